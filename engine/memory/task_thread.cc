// engine/memory/task_thread.cc -- TaskThread (see task_thread.h).
#include "engine/memory/task_thread.h"

#include <atomic>
#include <new>
#include <utility>

namespace agentmem::engine {

namespace {

#ifdef AGENTMEM_TEST_HOOKS
std::atomic<bool> g_thread_start_fails{false};
#endif

// Starts the helper thread.
std::thread NewThread(TaskThread* w, void (TaskThread::*loop)()) {
#ifdef AGENTMEM_TEST_HOOKS
  if (g_thread_start_fails.load(std::memory_order_relaxed)) throw std::bad_alloc();
#endif
  return std::thread(loop, w);
}

}  // namespace

#ifdef AGENTMEM_TEST_HOOKS
void TaskThread::SetThreadStartFailsForTest(bool on) { g_thread_start_fails.store(on); }
#endif

TaskThread::~TaskThread() {
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return !queued_ && !running_; });
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TaskThread::Start(std::function<Status()> task) {
  started_ = true;
  if (!thread_.joinable()) {
    try {
      thread_ = NewThread(this, &TaskThread::Loop);
    } catch (...) {  // no thread (none left, or no memory for one): the task runs here
      Outcome o = Run(task);
      std::lock_guard lock(mu_);
      result_ = std::move(o.status);
      threw_ = o.threw;
      done_ = true;
      return;
    }
  }
  {
    std::lock_guard lock(mu_);
    task_ = std::move(task);
    queued_ = true;
    done_ = false;
  }
  cv_.notify_all();
}

TaskThread::Outcome TaskThread::Run(const std::function<Status()>& task) {
  Outcome o;
  try {
    o.status = task();
  } catch (...) {
    o.threw = true;
  }
  return o;
}

Status TaskThread::Wait() {
  if (!started_) return Status::OK();
  started_ = false;
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  done_ = false;
  if (std::exchange(threw_, false)) {
    return StatusF(kNoMem, "%s failed (out of memory)", what_);
  }
  return std::exchange(result_, Status::OK());
}

void TaskThread::Loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || queued_; });
    if (!queued_) return;  // stop_, and nothing left to run
    std::function<Status()> task = std::move(task_);
    task_ = nullptr;
    queued_ = false;
    running_ = true;
    lock.unlock();
    Outcome o = Run(task);
    task = nullptr;
    lock.lock();
    result_ = std::move(o.status);
    threw_ = o.threw;
    running_ = false;
    done_ = true;
    cv_.notify_all();
  }
}

}  // namespace agentmem::engine

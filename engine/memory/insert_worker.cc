// engine/memory/insert_worker.cc -- InsertWorker (see insert_worker.h).
#include "engine/memory/insert_worker.h"

#include <system_error>
#include <utility>

namespace agentmem::engine {

InsertWorker::~InsertWorker() {
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return !queued_ && !running_; });
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void InsertWorker::Start(std::function<Status()> task) {
  started_ = true;
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { Loop(); });
    } catch (const std::system_error&) {  // no thread: the task runs here
      Status s;
      bool threw = false;
      try {
        s = task();
      } catch (...) {
        threw = true;
      }
      std::lock_guard lock(mu_);
      result_ = std::move(s);
      threw_ = threw;
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

Status InsertWorker::Wait() {
  if (!started_) return Status::OK();
  started_ = false;
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  done_ = false;
  if (std::exchange(threw_, false)) {
    return Status(kNoMem, "the graph insert of the last commit failed (out of memory)");
  }
  return std::exchange(result_, Status::OK());
}

void InsertWorker::Loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || queued_; });
    if (!queued_) return;  // stop_, and nothing left to run
    std::function<Status()> task = std::move(task_);
    task_ = nullptr;
    queued_ = false;
    running_ = true;
    lock.unlock();
    Status s;
    bool threw = false;
    try {
      s = task();
    } catch (...) {
      threw = true;
    }
    task = nullptr;
    lock.lock();
    result_ = std::move(s);
    threw_ = threw;
    running_ = false;
    done_ = true;
    cv_.notify_all();
  }
}

}  // namespace agentmem::engine

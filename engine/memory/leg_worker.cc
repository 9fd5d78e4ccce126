// engine/memory/leg_worker.cc -- see leg_worker.h.
#include "engine/memory/leg_worker.h"

#include <chrono>
#include <system_error>

namespace agentmem::engine {

namespace {

// How long Wait() polls before it sleeps: the caller's leg usually ends close
// to the worker's, and a sleeping thread takes tens of microseconds to wake.
constexpr auto kWaitSpin = std::chrono::microseconds(50);

}  // namespace

LegWorker::~LegWorker() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  work_cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

bool LegWorker::TryStart(void (*task)(void*), void* arg) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (busy_ || unavailable_ || stop_) return false;
    if (!thread_.joinable()) {
      if (std::thread::hardware_concurrency() == 1) {
        unavailable_ = true;
        return false;
      }
      try {
        thread_ = std::thread(&LegWorker::Loop, this);
      } catch (const std::system_error&) {
        unavailable_ = true;
        return false;
      }
    }
    task_ = task;
    arg_ = arg;
    busy_ = true;
    done_.store(false, std::memory_order_relaxed);
  }
  work_cv_.notify_one();
  return true;
}

void LegWorker::Wait() {
  const auto spin_end = std::chrono::steady_clock::now() + kWaitSpin;
  while (!done_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < spin_end) {
    std::this_thread::yield();
  }
  std::unique_lock<std::mutex> l(mu_);
  done_cv_.wait(l, [this] { return done_.load(std::memory_order_relaxed); });
  busy_ = false;
}

bool LegWorker::started() const {
  std::lock_guard<std::mutex> l(mu_);
  return thread_.joinable();
}

void LegWorker::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    work_cv_.wait(l, [this] { return task_ != nullptr || stop_; });
    if (task_ == nullptr) return;  // stop_, and no task in flight
    void (*task)(void*) = task_;
    void* arg = arg_;
    task_ = nullptr;
    l.unlock();
    task(arg);
    l.lock();
    done_.store(true, std::memory_order_release);
    done_cv_.notify_one();
  }
}

}  // namespace agentmem::engine

// engine/memory/leg_worker.h -- LegWorker: one helper thread of a handle,
// which runs the vector leg of a hybrid recall while the calling thread runs
// the BM25 leg (docs/architecture.md, "The two legs of a hybrid query").
//
// The thread starts with the first TryStart() and is joined by the
// destructor. TryStart() never queues: when the worker is running another
// caller's task, when the machine has one CPU, or when the thread cannot be
// started, it returns false and the caller runs the task itself. A task must
// not throw and must not call TryStart() on the same worker.
//
// Thread safety: every member may be called from any thread. A TryStart()
// that returned true is followed by exactly one Wait() from the same thread,
// before the task's argument goes away. The destructor REQUIRES that no task
// is in flight.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace agentmem::engine {

class LegWorker {
 public:
  LegWorker() = default;
  ~LegWorker();
  LegWorker(const LegWorker&) = delete;
  LegWorker& operator=(const LegWorker&) = delete;

  // Starts task(arg) on the worker thread and returns true; or returns false,
  // having run nothing, when the worker is busy or unavailable.
  bool TryStart(void (*task)(void*), void* arg);
  // Blocks until the task TryStart() started has returned.
  void Wait();
  // Whether the thread is running (it was started and not yet joined).
  bool started() const;

 private:
  void Loop();

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a task or stop_ for the worker
  std::condition_variable done_cv_;  // done_ for the caller
  void (*task_)(void*) = nullptr;    // under mu_: the task to run, until the worker takes it
  void* arg_ = nullptr;
  bool busy_ = false;         // under mu_: a caller is between TryStart() and Wait()
  bool unavailable_ = false;  // under mu_: one CPU, or the thread could not start
  bool stop_ = false;         // under mu_
  std::atomic<bool> done_{false};  // the task returned; written under mu_
  std::thread thread_;
};

}  // namespace agentmem::engine

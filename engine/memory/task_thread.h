// engine/memory/task_thread.h -- TaskThread: one helper thread, which runs
// one task at a time beside its owner: the graph inserts of a handle's last
// commit, which so overlap that commit's sync instead of preceding it
// (RecallIndex::DeferInsertForCommit); the next batch of records a
// compaction copies, read while the copy commits the one before
// (Database::WriteCompacted).
//
// The thread starts with the first Start() and is joined by the destructor,
// which first waits for a task in flight. When the thread cannot be started
// (no thread or no memory left), Start() runs the task itself. A task that
// throws fails: Wait() reports it.
//
// Thread safety: Start() and Wait() are called from one thread (the
// owner); the task runs on the helper thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "format/status.h"

namespace agentmem::engine {

class TaskThread {
 public:
  // `what` names the tasks in the status of one that runs out of memory.
  explicit TaskThread(const char* what) : what_(what) {}
  ~TaskThread();
  TaskThread(const TaskThread&) = delete;
  TaskThread& operator=(const TaskThread&) = delete;

  // Runs `task` on the thread. REQUIRES: no task in flight (Wait() returned
  // since the last Start()).
  void Start(std::function<Status()> task);
  // True from Start() until Wait() returns.
  bool busy() const { return started_; }
  // Waits for the task of the last Start() and returns its status (OK when
  // there is none).
  Status Wait();

#ifdef AGENTMEM_TEST_HOOKS
  // Tests (builds with -Dtest_hooks=true): true makes every TaskThread of
  // the process find no memory for its thread when it starts one (the
  // std::bad_alloc of std::thread's constructor). false restores.
  static void SetThreadStartFailsForTest(bool on);
#endif

 private:
  // What came of a task: its status, or that it threw (a task that cannot
  // even build its Status for want of memory throws std::bad_alloc).
  struct Outcome {
    Status status;
    bool threw = false;
  };
  static Outcome Run(const std::function<Status()>& task);
  void Loop();

  const char* what_;
  std::mutex mu_;
  std::condition_variable cv_;  // a task, its end, or stop_
  std::thread thread_;
  // Under mu_: the task Start() gave, until the thread takes it (queued_),
  // while it runs (running_), and what came of it (done_).
  std::function<Status()> task_;
  bool queued_ = false, running_ = false, done_ = false, threw_ = false, stop_ = false;
  Status result_;
  bool started_ = false;  // the owner's: a task not yet waited for
};

}  // namespace agentmem::engine

// engine/memory/leg_worker.h -- LegWorker: one helper thread of a handle,
// which runs the vector leg of a hybrid recall while the calling thread runs
// the BM25 leg (docs/architecture.md, "The two legs of a hybrid query").
//
// The thread starts with the first TryStart() and is joined by the
// destructor. TryStart() never queues: when the worker is running another
// caller's task, when the machine has one CPU, or when the thread cannot be
// started, it returns false and the caller runs the task itself. Finish()
// does not wait for a worker that has not begun the task (on a loaded
// machine a woken thread can wait milliseconds for a CPU): the caller takes
// the task back and runs it, so a query is never much slower than on one
// thread. A machine too loaded to give the worker a CPU at once makes it
// late (a task begun, or run, with the worker off the CPU for more than
// 250 µs): the worker then refuses the next tasks, 16 after one late task,
// doubling while they stay late, up to 1,024, so that on such a machine
// queries run on one thread and only an occasional one probes again. For
// the same reason the worker refuses tasks while the machine's runnable
// threads leave no CPU idle: their number, read from /proc/loadavg at most
// once a second and averaged over the last few reads (NoIdleCpu()), so that
// a load that ends stops counting within seconds. A task must not throw and
// must not call TryStart() on the same worker.
//
// Thread safety: every member may be called from any thread. A TryStart()
// that returned true is followed by exactly one Finish() or Cancel() from the
// same thread, before the task's argument goes away. The destructor REQUIRES
// that no task is in flight.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <thread>

namespace agentmem::engine {

class LegWorker {
 public:
  LegWorker() = default;
  ~LegWorker();
  LegWorker(const LegWorker&) = delete;
  LegWorker& operator=(const LegWorker&) = delete;

  enum class Start {
    kStarted,     // task(arg) is the worker's until Finish() or Cancel()
    kBusy,        // running another caller's task
    kUnavailable, // one CPU, or the thread could not start
    kBackingOff,  // refusing tasks after late ones
    kNoIdleCpu,   // the runnable threads leave no CPU idle (NoIdleCpu())
    kCpuTaken,    // the caller said another thread of its own takes a CPU
  };
  // Starts task(arg) on the worker thread (kStarted); any other answer means
  // nothing was run and the caller runs the task itself. `cpu_taken`: a
  // thread of the caller's own is running, so no CPU is idle for the worker
  // (kCpuTaken, without reading the runnable threads, which would count that
  // thread for seconds after).
  Start TryStart(void (*task)(void*), void* arg, bool cpu_taken = false);
  // Returns once the task TryStart() started has run: true when the worker
  // ran it, false when it had not begun it and the calling thread did.
  bool Finish();
  // Takes the task back unrun if the worker has not begun it; else waits
  // for it to return.
  void Cancel();
  // Whether the thread is running (it was started and not yet joined).
  bool started() const;

  // The number of runnable threads in the text of /proc/loadavg (its fourth
  // field, "running/total": the threads on a CPU or waiting for one when it
  // was read, the reader among them), or -1 when `text` is not such a text.
  static int RunnableThreads(std::string_view text);
  // The average of the runnable-thread reads after one more, `sample`:
  // each read counts half as much as the one after it. `average` < 0: the
  // first read.
  static double NextAverage(double average, int sample);
  // Whether that average leaves no CPU idle for the worker: at least
  // cpus - 1/4 runnable threads, the caller among them (two reads in a
  // row that find every CPU busy; a single one does not).
  static bool NoIdleCpu(double average, unsigned cpus);

#ifdef AGENTMEM_TEST_HOOKS
  // Tests (builds with -Dtest_hooks=true): true makes every LegWorker of the
  // process run every task it is given: no backoff, and Finish() waits for a
  // task the worker has not begun. false restores.
  static void SetAlwaysParallelForTest(bool on);
#endif

 private:
  void Loop();
  // Takes the task back if the worker has not begun it: true, and *task and
  // *arg are the task; else false.
  bool TakeBack(void (**task)(void*), void** arg);
  void WaitDone();
  // The caller is done with the worker; starts a backoff after a late task.
  // REQUIRES: mu_ held.
  void Release();

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a task or stop_ for the worker
  std::condition_variable done_cv_;  // done_ for the caller
  void (*task_)(void*) = nullptr;    // under mu_: the task to run, until the worker takes it
  void* arg_ = nullptr;
  bool busy_ = false;         // under mu_: a caller is between TryStart() and Wait()
  bool unavailable_ = false;  // under mu_: one CPU, or the thread could not start
  bool stop_ = false;         // under mu_
  // Under mu_: when the task was posted, whether it was late, and the backoff.
  std::chrono::steady_clock::time_point posted_;
  bool late_ = false;
  uint32_t backoff_ = 0;  // tasks refused after the last late one
  uint32_t refuse_ = 0;   // of those, still to refuse
  // Under mu_: when the runnable threads were last read, their average
  // (< 0: none read yet), and whether it leaves no CPU idle.
  std::chrono::steady_clock::time_point load_checked_;
  double runnable_ = -1;
  bool no_idle_cpu_ = false;
  // Reads the runnable threads and updates runnable_ and no_idle_cpu_.
  // REQUIRES: mu_ held.
  void CheckLoad();
  std::atomic<bool> done_{false};  // the task returned; written under mu_
  std::thread thread_;
};

}  // namespace agentmem::engine

// engine/memory/leg_worker.cc -- see leg_worker.h.
#include "engine/memory/leg_worker.h"

#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <system_error>

namespace agentmem::engine {

namespace {

// How long the caller polls for the worker's task before it sleeps. A
// sleeping thread, once woken, can wait milliseconds for a CPU on a loaded
// machine, so the caller polls (without yielding its CPU) for longer than a
// vector leg takes; only a worker that was preempted makes it sleep.
constexpr auto kWaitSpin = std::chrono::milliseconds(2);

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A task is late when the worker began it this long after TryStart(), or
// spent this long of its run off the CPU (preempted).
constexpr auto kLate = std::chrono::microseconds(250);
// After a late task the worker refuses this many tasks, doubling with each
// late task in a row up to kMaxBackoff; a task on time ends the backoff.
constexpr uint32_t kMinBackoff = 16;
constexpr uint32_t kMaxBackoff = 1024;

// How often TryStart() reads the runnable threads.
constexpr auto kLoadCheckEvery = std::chrono::seconds(1);

// The text of /proc/loadavg, or "" when it cannot be read (not Linux).
std::string LoadavgText() {
  char buf[128];
  const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Reads the digits of `s` at *at as a number, moving *at past them: false
// when there are none, or more than nine.
bool ReadNumber(std::string_view s, size_t* at, int* out) {
  const size_t from = *at;
  int v = 0;
  for (; *at < s.size() && s[*at] >= '0' && s[*at] <= '9'; ++*at) {
    if (*at - from == 9) return false;
    v = v * 10 + (s[*at] - '0');
  }
  *out = v;
  return *at > from;
}

std::chrono::nanoseconds ThreadCpuTime() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

#ifdef AGENTMEM_TEST_HOOKS
std::atomic<bool> g_always_parallel{false};
#endif

bool AlwaysParallel() {
#ifdef AGENTMEM_TEST_HOOKS
  return g_always_parallel.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

}  // namespace

#ifdef AGENTMEM_TEST_HOOKS
void LegWorker::SetAlwaysParallelForTest(bool on) { g_always_parallel.store(on); }
#endif

int LegWorker::RunnableThreads(std::string_view text) {
  // "0.52 0.58 0.59 2/345 6789": three averages, running/total, last pid.
  size_t at = 0;
  for (int field = 0; field < 3; field++) {
    at = text.find(' ', at);
    if (at == std::string_view::npos) return -1;
    at++;
  }
  int running = 0, total = 0;
  if (!ReadNumber(text, &at, &running) || at == text.size() || text[at] != '/') return -1;
  at++;
  if (!ReadNumber(text, &at, &total) || at == text.size() || text[at] != ' ') return -1;
  return running;
}

double LegWorker::NextAverage(double average, int sample) {
  return average < 0 ? sample : (average + sample) / 2;
}

bool LegWorker::NoIdleCpu(double average, unsigned cpus) {
  return average >= static_cast<double>(cpus) - 0.25;
}

void LegWorker::CheckLoad() {
  const unsigned cpus = std::thread::hardware_concurrency();
  const int runnable = RunnableThreads(LoadavgText());
  if (runnable >= 0) {
    runnable_ = NextAverage(runnable_, runnable);
    no_idle_cpu_ = NoIdleCpu(runnable_, cpus);
    return;
  }
  double load = 0;  // no /proc/loadavg: the one-minute load average
  no_idle_cpu_ = getloadavg(&load, 1) == 1 && load >= static_cast<double>(cpus);
}

LegWorker::~LegWorker() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  work_cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

LegWorker::Start LegWorker::TryStart(void (*task)(void*), void* arg, bool cpu_taken) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (busy_) return Start::kBusy;
    if (unavailable_ || stop_) return Start::kUnavailable;
    if (cpu_taken && !AlwaysParallel()) return Start::kCpuTaken;
    if (refuse_ > 0 && !AlwaysParallel()) {
      refuse_--;
      return Start::kBackingOff;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - load_checked_ >= kLoadCheckEvery) {
      load_checked_ = now;
      CheckLoad();
    }
    if (no_idle_cpu_ && !AlwaysParallel()) return Start::kNoIdleCpu;
    if (!thread_.joinable()) {
      if (std::thread::hardware_concurrency() == 1) {
        unavailable_ = true;
        return Start::kUnavailable;
      }
      try {
        thread_ = std::thread(&LegWorker::Loop, this);
      } catch (const std::system_error&) {
        unavailable_ = true;
        return Start::kUnavailable;
      }
    }
    task_ = task;
    arg_ = arg;
    busy_ = true;
    late_ = false;
    posted_ = now;
    done_.store(false, std::memory_order_relaxed);
  }
  work_cv_.notify_one();
  return Start::kStarted;
}

bool LegWorker::TakeBack(void (**task)(void*), void** arg) {
  if (AlwaysParallel()) return false;
  std::lock_guard<std::mutex> l(mu_);
  if (task_ == nullptr) return false;  // the worker has it
  *task = task_;
  *arg = arg_;
  task_ = nullptr;
  late_ = std::chrono::steady_clock::now() - posted_ > kLate;
  Release();
  return true;
}

void LegWorker::WaitDone() {
  const auto spin_end = std::chrono::steady_clock::now() + kWaitSpin;
  while (!done_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < spin_end) {
    for (int i = 0; i < 16; i++) CpuRelax();
  }
  std::unique_lock<std::mutex> l(mu_);
  done_cv_.wait(l, [this] { return done_.load(std::memory_order_relaxed); });
  Release();
}

void LegWorker::Release() {
  busy_ = false;
  if (late_) {
    backoff_ = std::clamp(backoff_ * 2, kMinBackoff, kMaxBackoff);
    refuse_ = backoff_;
  } else {
    backoff_ = 0;
  }
}

bool LegWorker::Finish() {
  void (*task)(void*);
  void* arg;
  if (TakeBack(&task, &arg)) {
    task(arg);
    return false;
  }
  WaitDone();
  return true;
}

void LegWorker::Cancel() {
  void (*task)(void*);
  void* arg;
  if (!TakeBack(&task, &arg)) WaitDone();
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
    const auto begun = std::chrono::steady_clock::now();
    const bool started_late = begun - posted_ > kLate;
    l.unlock();
    const auto cpu = ThreadCpuTime();
    task(arg);
    const auto off_cpu =
        (std::chrono::steady_clock::now() - begun) - (ThreadCpuTime() - cpu);
    l.lock();
    late_ = started_late || off_cpu > kLate;
    done_.store(true, std::memory_order_release);
    done_cv_.notify_one();
  }
}

}  // namespace agentmem::engine

// tests/engine/task_thread_test.cc -- TaskThread: the helper thread that
// runs a commit's graph insert beside its sync, or reads a compaction's next
// batch (engine/memory/task_thread.h).
// Also built into recall_threads_tests, which make test runs under
// ThreadSanitizer.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <new>
#include <stdexcept>
#include <thread>

#include "engine/memory/task_thread.h"

namespace agentmem::engine {
namespace {

TEST_CASE("a task thread runs each task on its own thread and reports its status") {
  TaskThread w("the task");
  CHECK_FALSE(w.busy());
  CHECK(w.Wait().ok());  // nothing started
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  int runs = 0;
  for (int i = 0; i < 50; i++) {
    w.Start([&, i]() -> Status {
      ran_on = std::this_thread::get_id();
      runs++;
      return i % 2 ? Status(kConstraint, "odd") : Status::OK();
    });
    CHECK(w.busy());
    Status s = w.Wait();
    CHECK_FALSE(w.busy());
    CHECK(s.ok() == (i % 2 == 0));
    if (i % 2) CHECK(s.message() == "odd");
    CHECK(ran_on != caller);
  }
  CHECK(runs == 50);
}

TEST_CASE("a task thread reports a task that threw as out of memory and runs the next one") {
  TaskThread w("the task");
  w.Start([]() -> Status { throw std::bad_alloc(); });
  Status s = w.Wait();
  CHECK(s.code() == kNoMem);
  CHECK(s.message() == "the task failed (out of memory)");
  bool ran = false;
  w.Start([&]() -> Status {
    ran = true;
    return Status::OK();
  });
  CHECK(w.Wait().ok());
  CHECK(ran);
}

TEST_CASE("a task thread that finds no memory for its thread runs the task on the caller's") {
  TaskThread::SetThreadStartFailsForTest(true);
  TaskThread w("the task");
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  CHECK_NOTHROW(w.Start([&]() -> Status {
    ran_on = std::this_thread::get_id();
    return Status(kIoErr, "from the task");
  }));
  TaskThread::SetThreadStartFailsForTest(false);
  CHECK(w.busy());
  Status s = w.Wait();
  CHECK(s.code() == kIoErr);
  CHECK(ran_on == caller);
  CHECK_FALSE(w.busy());
  // The next Start finds memory again and starts the thread.
  w.Start([&]() -> Status {
    ran_on = std::this_thread::get_id();
    return Status::OK();
  });
  CHECK(w.Wait().ok());
  CHECK(ran_on != caller);
}

TEST_CASE("a task thread destroyed with a task in flight waits for it") {
  std::atomic<bool> done{false};
  {
    TaskThread w("the task");
    w.Start([&]() -> Status {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      done = true;
      return Status::OK();
    });
  }
  CHECK(done);
}

}  // namespace
}  // namespace agentmem::engine

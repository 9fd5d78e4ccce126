// tests/reliability/spawn.h -- starting reliability_worker processes and
// reading their reports (workload.h Report) from a pipe.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "tests/reliability/workload.h"

namespace agentmem::reliability {

// The helper executable, set at build time (tests/reliability/meson.build).
const char* WorkerPath();

struct Child {
  pid_t pid = -1;
  int reports = -1;  // read end of the child's report pipe (its fd 3)
};

// Starts WorkerPath() with `args` (argv[1..]); its fd 3 is the write end of a
// fresh pipe. Returns pid -1 when fork or exec setup failed.
Child Spawn(const std::vector<std::string>& args);

// Reads the next report; false at end of stream (every writer exited).
// With timeout_ms >= 0, also false when nothing arrives in time (*timed_out).
bool ReadReport(int fd, Report* r, int timeout_ms = -1, bool* timed_out = nullptr);

// Waits for the child; returns the raw wait status.
int Reap(pid_t pid);

// "exit 3" / "killed by signal 9", for messages.
std::string DescribeStatus(int status);

}  // namespace agentmem::reliability

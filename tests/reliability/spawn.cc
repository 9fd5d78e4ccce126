// tests/reliability/spawn.cc -- see spawn.h.
#include "tests/reliability/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#ifndef AGENTMEM_RELIABILITY_WORKER
#error "AGENTMEM_RELIABILITY_WORKER must name the reliability_worker executable"
#endif

namespace agentmem::reliability {

const char* WorkerPath() { return AGENTMEM_RELIABILITY_WORKER; }

Child Spawn(const std::vector<std::string>& args) {
  Child c;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return c;
  std::vector<std::string> all = {WorkerPath()};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return c;
  }
  if (pid == 0) {
    // dup2 clears FD_CLOEXEC on the new descriptor.
    if (dup2(p[1], kReportFd) < 0) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(p[1]);
  c.pid = pid;
  c.reports = p[0];
  return c;
}

bool ReadReport(int fd, Report* r, int timeout_ms, bool* timed_out) {
  if (timed_out) *timed_out = false;
  char* dst = reinterpret_cast<char*>(r);
  size_t got = 0;
  while (got < sizeof *r) {
    if (timeout_ms >= 0) {
      pollfd pfd{fd, POLLIN, 0};
      int n = poll(&pfd, 1, timeout_ms);
      if (n == 0) {
        if (timed_out) *timed_out = true;
        return false;
      }
      if (n < 0 && errno == EINTR) continue;
    }
    ssize_t n = read(fd, dst + got, sizeof *r - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

int Reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

}  // namespace agentmem::reliability

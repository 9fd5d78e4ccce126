// tests/reliability/strace_test.cc -- R11: black-box syscall faults. The
// `agentmem` shell runs under `strace -e inject=...`, which makes the Nth
// call of one system call fail with an errno, without any test hook in the
// engine (the complement of tests/util/fault_env, which fails Env calls from
// inside). For every N at which the shell makes that call: the shell exits 1
// with "Error: <the engine's message>" on stderr, and a reopen without faults
// passes the integrity check and shows the state before or after the failed
// statement, never anything else; a write afterwards succeeds.
//
// strace is one of the Makefile's Debian packages; where it is missing or
// cannot trace (no ptrace in a container) the cases say so and check nothing.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/reliability/spawn.h"
#include "tests/util/temp_dir.h"

#ifndef AGENTMEM_SHELL
#error "AGENTMEM_SHELL must name the agentmem shell executable"
#endif

namespace agentmem::reliability {
namespace {

constexpr const char* kStrace = "/usr/bin/strace";

struct Run {
  int status = -1;  // raw wait status
  std::string out, err;
  bool exited(int code) const { return WIFEXITED(status) && WEXITSTATUS(status) == code; }
};

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs argv with stdout and stderr in files of `dir`; stdin is /dev/null.
Run Exec(const test::TempDir& dir, const std::vector<std::string>& argv) {
  const std::string out = dir.File("stdout"), err = dir.File("stderr");
  std::fflush(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY);
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || o < 0 || e < 0) _exit(126);
    dup2(in, 0);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  Run r;
  r.status = Reap(pid);
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

// The shell on `file` with statements `sql`, optionally under strace making
// call number `when` of `syscall` fail with `error` ("EIO", "ENOSPC"); `when`
// may end in '+' (that call and every later one).
Run Shell(const test::TempDir& dir, const std::string& file, const std::vector<std::string>& sql,
          const std::string& syscall = "", const std::string& error = "",
          const std::string& when = "") {
  std::vector<std::string> argv;
  if (!syscall.empty()) {
    // -P: only the calls on the database file are traced, and so failed.
    argv = {kStrace, "-f", "-qq", "-o", "/dev/null", "-P", file, "-e", "trace=" + syscall,
            "-e", "inject=" + syscall + ":error=" + error + ":when=" + when};
  }
  argv.push_back(AGENTMEM_SHELL);
  argv.push_back(file);
  argv.insert(argv.end(), sql.begin(), sql.end());
  return Exec(dir, argv);
}

// How many times the shell calls `syscall` running `sql` on `file` (strace's
// own count, from a copy of the file so that the file itself is unchanged).
int CountCalls(const test::TempDir& dir, const std::string& file, const std::string& sql,
               const std::string& syscall) {
  const std::string copy = dir.File("count.agentmem"), log = dir.File("strace.log");
  std::remove(copy.c_str());
  REQUIRE(Exec(dir, {"/bin/cp", file, copy}).exited(0));
  Run r = Exec(dir, {kStrace, "-f", "-qq", "-o", log, "-P", copy, "-e", "trace=" + syscall,
                     AGENTMEM_SHELL, copy, sql});
  REQUIRE_MESSAGE(r.exited(0), "without faults: " << r.err);
  std::istringstream lines(Slurp(log));
  int n = 0;
  for (std::string line; std::getline(lines, line);) n += line.find(syscall + "(") != std::string::npos;
  return n;
}

// strace is there and may trace (ptrace can be refused in a container).
bool StraceWorks(const test::TempDir& dir) {
  if (access(kStrace, X_OK) != 0) {
    MESSAGE("R11 not run: " << kStrace << " is missing (make deps installs it)");
    return false;
  }
  Run r = Exec(dir, {kStrace, "-f", "-qq", "-o", "/dev/null", "/bin/true"});
  if (!r.exited(0)) {
    MESSAGE("R11 not run: strace cannot trace here: " << r.err);
    return false;
  }
  return true;
}

// The number of episodes, after checking that the file passes the integrity
// check (both through the shell, without faults).
long CheckedCount(const test::TempDir& dir, const std::string& file) {
  Run r = Shell(dir, file, {"SELECT * FROM integrity_check()", "SELECT count(*) FROM episodes"});
  REQUIRE_MESSAGE(r.exited(0), "reopen without faults failed: " << r.err);
  std::istringstream lines(r.out);
  std::string check, count;
  std::getline(lines, check);
  std::getline(lines, count);
  CHECK_MESSAGE(check == "ok", "integrity check: " << r.out);
  return std::stol(count);
}

std::string Insert(int i) {
  return "INSERT INTO episodes(user_id, session_id, role, text) VALUES ('u', 's', 'user', "
         "'episode number " + std::to_string(i) + "')";
}

// For each N at which running `sql` makes `syscall`: the shell fails with
// `error` injected there (and, with `persist`, at every later call), exits 1
// naming the failure (one of `expect_in_error`: the errno's text in the
// engine's message, or agentmem_errstr's when the failure comes at close,
// after which the shell has no handle to ask), and the file afterwards is the state before or after
// the statement. `grows` says whether sql adds one episode. Returns the runs.
int Sweep(const test::TempDir& dir, const std::string& file, const std::string& sql,
          const std::string& syscall, const std::string& error, bool persist, bool grows,
          const std::vector<std::string>& expect_in_error) {
  const int calls = CountCalls(dir, file, sql, syscall);
  REQUIRE(calls > 0);
  int runs = 0;
  for (int n = 1; n <= calls; n++) {
    CAPTURE(syscall);
    CAPTURE(error);
    CAPTURE(n);
    const long before = CheckedCount(dir, file);
    Run r = Shell(dir, file, {sql}, syscall, error, std::to_string(n) + (persist ? "+" : ""));
    runs++;
    CHECK_MESSAGE(r.exited(1), "the shell " << DescribeStatus(r.status) << "; stderr: " << r.err);
    CHECK_MESSAGE(r.err.find("Error: ") != std::string::npos, "stderr: " << r.err);
    bool named = false;
    for (const std::string& e : expect_in_error) named |= r.err.find(e) != std::string::npos;
    CHECK_MESSAGE(named, "stderr should name the failure (" << expect_in_error.front()
                                                             << "): " << r.err);
    const long after = CheckedCount(dir, file);
    CHECK_MESSAGE((after == before || (grows && after == before + 1)),
                  "episodes before " << before << ", after " << after);
    // The file takes the next writer's statement.
    Run next = Shell(dir, file, {Insert(1000 + n)});
    CHECK_MESSAGE(next.exited(0), "a write after the fault: " << next.err);
    CHECK(CheckedCount(dir, file) == after + 1);
  }
  return runs;
}

}  // namespace

TEST_CASE("the shell reports an injected I/O error at every data sync, write and read, and the file stays whole") {
  test::TempDir dir;
  if (!StraceWorks(dir)) return;
  const std::string file = dir.File("r11.agentmem");
  for (int i = 0; i < 3; i++) REQUIRE(Shell(dir, file, {Insert(i)}).exited(0));
  const std::vector<std::string> kEio = {"Input/output error", "disk I/O error"};
  int runs = 0;
  // A failed data sync, once and for good (sync=full: one per commit, one at close).
  runs += Sweep(dir, file, Insert(100), "fdatasync", "EIO", false, true, kEio);
  runs += Sweep(dir, file, Insert(101), "fdatasync", "EIO", true, true, kEio);
  // A failed or refused page write.
  runs += Sweep(dir, file, Insert(102), "pwrite64", "EIO", false, true, kEio);
  runs += Sweep(dir, file, Insert(103), "pwrite64", "ENOSPC", true, true,
                {"No space left", "disk is full"});
  // A failed read while opening and reading: nothing is written.
  runs += Sweep(dir, file, "SELECT count(*) FROM episodes", "pread64", "EIO", false, false,
                kEio);
  MESSAGE("R11: " << runs << " shell runs under strace fault injection");
}

TEST_CASE("a file the shell cannot lock or open is reported and left as it was") {
  test::TempDir dir;
  if (!StraceWorks(dir)) return;
  const std::string file = dir.File("r11-open.agentmem");
  REQUIRE(Shell(dir, file, {Insert(0)}).exited(0));
  // openat fails: the shell cannot open the file at all.
  Run r = Shell(dir, file, {Insert(1)}, "openat", "EACCES", "1+");
  CHECK(r.exited(1));
  CHECK_MESSAGE(r.err.find("Permission denied") != std::string::npos, "stderr: " << r.err);
  // fcntl (the write lock) fails: the write is refused, nothing is written.
  r = Shell(dir, file, {Insert(2)}, "fcntl", "EIO", "1+");
  CHECK(r.exited(1));
  CHECK_MESSAGE(r.err.find("Error: lock of") != std::string::npos, "stderr: " << r.err);
  CHECK(CheckedCount(dir, file) == 1);
}

}  // namespace agentmem::reliability

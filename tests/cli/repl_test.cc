// tests/cli/repl_test.cc -- the interactive shell on a pseudo-terminal, used
// as a person would: type lines, read the screen (docs/shell.md, "The
// interactive shell").
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "tests/cli/shell_runner.h"
#include "tests/util/temp_dir.h"

using agentmem::test::ReadFileBytes;
using agentmem::test::TempDir;
using agentmem::test::WriteFileBytes;

namespace {

// The shell on the slave side of a pty; the test holds the master side.
class Terminal {
 public:
  Terminal(const std::string& dir, const std::vector<std::string>& args) {
    pid_ = forkpty(&fd_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      if (chdir(dir.c_str()) != 0) _exit(126);
      std::vector<std::string> argv_s = {AGENTMEM_SHELL_PATH};
      argv_s.insert(argv_s.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      std::string home = "HOME=" + dir, hist = "AGENTMEM_HISTORY=" + dir + "/history";
      char* env[] = {home.data(), hist.data(), const_cast<char*>("TERM=xterm"),
                     const_cast<char*>("LANG=C.UTF-8"), nullptr};
      execve(argv[0], argv.data(), env);
      _exit(127);
    }
  }
  ~Terminal() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }

  void Type(const std::string& keys) {
    size_t done = 0;
    while (done < keys.size()) {
      ssize_t n = write(fd_, keys.data() + done, keys.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }

  // Reads the screen until `text` appears after what earlier calls consumed.
  // The deadline only stops a hung shell from hanging the suite.
  bool WaitFor(const std::string& text) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (true) {
      size_t at = screen_.find(text, consumed_);
      if (at != std::string::npos) {
        consumed_ = at + text.size();
        return true;
      }
      if (std::chrono::steady_clock::now() > deadline) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char buf[4096];
      ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) return false;  // the shell has gone
      screen_.append(buf, static_cast<size_t>(n));
    }
  }

  // Waits for the shell to leave; its exit status.
  int Wait() {
    int ws = 0;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd_, buf, sizeof buf)) > 0) screen_.append(buf, static_cast<size_t>(n));
    waitpid(pid_, &ws, 0);
    exited_ = true;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  }

  const std::string& screen() const { return screen_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  bool exited_ = false;
  std::string screen_;
  size_t consumed_ = 0;
};

}  // namespace

TEST_CASE("the interactive shell prompts with the file name and runs typed statements") {
  TempDir dir;
  Terminal t(dir.path(), {"notes.agentmem"});
  REQUIRE(t.WaitFor("Enter \".help\""));
  REQUIRE(t.WaitFor("agentmem notes.agentmem> "));
  t.Type("SELECT 6 * 7 AS answer;\r");
  CHECK(t.WaitFor("| answer |"));  // table mode with headers on a terminal
  CHECK(t.WaitFor("|     42 |"));
  REQUIRE(t.WaitFor("agentmem notes.agentmem> "));
  // A statement over several lines: a continuation prompt until the ';'.
  t.Type("SELECT 'multi'\r");
  CHECK(t.WaitFor("...> "));
  t.Type("  || '-line' AS v;\r");
  CHECK(t.WaitFor("| multi-line |"));
  REQUIRE(t.WaitFor("agentmem notes.agentmem> "));
  // ^C drops the line being typed, and a pending statement, not the shell.
  t.Type("SELECT 'dropped'\r");
  REQUIRE(t.WaitFor("...> "));
  t.Type("\x03");
  CHECK(t.WaitFor("^C"));
  REQUIRE(t.WaitFor("agentmem notes.agentmem> "));
  t.Type("SELECT 'kept' AS v;\r");
  CHECK(t.WaitFor("| kept |"));
  CHECK(t.screen().find("dropped |") == std::string::npos);
  REQUIRE(t.WaitFor("agentmem notes.agentmem> "));
  t.Type("SELECT nope;\r");
  CHECK(t.WaitFor("Error: no such column: nope"));
  REQUIRE(t.WaitFor("agentmem notes.agentmem> "));
  t.Type(".quit\r");
  CHECK(t.Wait() == 0);  // an error typed earlier does not make a session fail
  // libedit's own format (spaces encoded): the next test reads it back.
  CHECK(ReadFileBytes(dir.File("history")).find("answer") != std::string::npos);
}

TEST_CASE("history from an earlier session comes back with the up arrow") {
  TempDir dir;
  {
    Terminal t(dir.path(), {"notes.agentmem"});
    REQUIRE(t.WaitFor("agentmem notes.agentmem> "));
    t.Type("SELECT 'remembered' AS v;\r");
    REQUIRE(t.WaitFor("| remembered |"));
    REQUIRE(t.WaitFor("agentmem notes.agentmem> "));
    t.Type(".quit\r");
    REQUIRE(t.Wait() == 0);
  }
  Terminal t(dir.path(), {"notes.agentmem"});
  REQUIRE(t.WaitFor("agentmem notes.agentmem> "));
  t.Type("\x1b[A\x1b[A\r");  // up arrow twice (past ".quit"), enter
  CHECK(t.WaitFor("| remembered |"));
  REQUIRE(t.WaitFor("agentmem notes.agentmem> "));
  t.Type("\x04");  // ^D leaves like .quit
  CHECK(t.Wait() == 0);
}

TEST_CASE("import on a terminal draws a progress bar") {
  TempDir dir;
  std::string jsonl;
  for (int i = 0; i < 3000; i++) {
    jsonl += R"({"user_id":"u","text":"line number )" + std::to_string(i) + "\"}\n";
  }
  WriteFileBytes(dir.File("many.jsonl"), jsonl);
  Terminal t(dir.path(), {"-options", "sync=off", "p.agentmem"});
  REQUIRE(t.WaitFor("agentmem p.agentmem> "));
  t.Type(".import many.jsonl\r");
  CHECK(t.WaitFor("imported 3,000 episodes, 0 block versions, 0 facts from many.jsonl"));
  CHECK(t.screen().find("[####") != std::string::npos);
  CHECK(t.screen().find("3,000 lines") != std::string::npos);
  REQUIRE(t.WaitFor("agentmem p.agentmem> "));
  t.Type(".open other.agentmem\r");
  CHECK(t.WaitFor("agentmem other.agentmem> "));
  t.Type(".quit\r");
  CHECK(t.Wait() == 0);
}

TEST_CASE("the LoCoMo import on a terminal shows a progress bar") {
  std::string data = agentmem::test::DataDir();
  if (data.empty()) {
    MESSAGE("evaluation data not found (../shared/data): skipped");
    return;
  }
  TempDir dir;
  Terminal t(dir.path(), {"-options", "sync=normal", "locomo.agentmem"});
  REQUIRE(t.WaitFor("agentmem locomo.agentmem> "));
  t.Type(".import " + data +
         "/locomo/episodes.jsonl --user-field conv_id --session-field session --role-field "
         "speaker\r");
  CHECK(t.WaitFor("imported 4,419 episodes, 0 block versions, 0 facts from "));
  CHECK(t.screen().find("[##############################] 100.0%  4,419 lines") !=
        std::string::npos);
  REQUIRE(t.WaitFor("agentmem locomo.agentmem> "));
  t.Type(".quit\r");
  CHECK(t.Wait() == 0);
}

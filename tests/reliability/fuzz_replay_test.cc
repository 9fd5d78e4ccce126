// tests/reliability/fuzz_replay_test.cc -- R6 in `make test`: every kept input
// of tests/fuzz/corpus/<target>/ (seeds, inputs libFuzzer found interesting,
// and every past crash once fixed) replayed through the g++ build of the
// targets (tests/fuzz/fuzz_replay), so CI checks them without clang.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/reliability/spawn.h"

#ifndef AGENTMEM_FUZZ_REPLAY
#error "AGENTMEM_FUZZ_REPLAY must name the fuzz_replay executable"
#endif

namespace agentmem::reliability {

TEST_CASE("the kept fuzz corpus of every target replays without a failure") {
  namespace fs = std::filesystem;
  REQUIRE_MESSAGE(fs::exists(AGENTMEM_FUZZ_REPLAY), AGENTMEM_FUZZ_REPLAY " is not built");
  for (std::string target : {"decode", "open", "ops", "sql", "import", "markdown"}) {
    fs::path dir = fs::path(AGENTMEM_FUZZ_CORPUS) / target;
    CAPTURE(target);
    REQUIRE_MESSAGE(fs::is_directory(dir), dir.string() << " is missing");
    size_t inputs = 0;
    for (const auto& e : fs::directory_iterator(dir)) inputs += e.is_regular_file();
    CHECK(inputs > 0);
    std::fflush(nullptr);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // fuzz_replay prints one summary line, or names the input that failed.
      execl(AGENTMEM_FUZZ_REPLAY, AGENTMEM_FUZZ_REPLAY, target.c_str(), dir.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = Reap(pid);
    CHECK_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0),
                  "fuzz_replay " << target << " " << dir.string() << " ended with "
                                 << DescribeStatus(status)
                                 << " (the input it was replaying is named above)");
    MESSAGE("R6 replay: target " << target << ", " << inputs << " inputs");
  }
}

}  // namespace agentmem::reliability

// tests/replication/crash_test.cc -- `agentmem sync` killed with SIGKILL at
// random points, pushing and pulling, then run to its end: nothing written
// is lost and nothing is applied twice, in PostgreSQL or in the files
// (docs/replication.md, "One run": each PostgreSQL transaction records its
// position, each pull batch is one local transaction with its position).
#include <agentmem.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/replication/replica_util.h"

extern char** environ;

using namespace agentmem::test;

namespace {

// Four kills a round (a pushing, b pushing and pulling, b again, a
// pulling): 80 in all. Each delay is drawn below how long that sync runs
// here, so most land mid-run; how many did is printed, not asserted.
constexpr int kRounds = 20;
constexpr int kMaxDelayUs[4] = {250000, 150000, 150000, 60000};
constexpr int kTransactionsOnA = 3, kEpisodesPerTransaction = 400;  // pulled in 3 batches
constexpr int kEpisodesOnB = 150;

// Starts `agentmem sync name URL` in dir and kills it with SIGKILL after
// `delay` (or lets it finish first). Returns whether it was killed.
bool SyncKilledAfter(const TempDir& dir, const std::string& name, std::chrono::microseconds delay) {
  const std::string path = dir.File(name), url = Url();
  std::vector<char*> argv = {const_cast<char*>(AGENTMEM_SHELL_PATH), const_cast<char*>("sync"),
                             const_cast<char*>(path.c_str()), const_cast<char*>(url.c_str()),
                             nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(rc == 0);
  std::this_thread::sleep_for(delay);
  const bool killed = kill(pid, SIGKILL) == 0;
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return killed && WIFSIGNALED(status);
}

void Fill(agentmem_db* db, const char* user, int transactions, int per_transaction) {
  for (int t = 0; t < transactions; t++) {
    REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
    for (int i = 0; i < per_transaction; i++) {
      const std::string text = std::string(user) + " episode " + std::to_string(t) + "." +
                               std::to_string(i);
      Remember(db, user, text.c_str(), static_cast<float>(i));
    }
    REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
  }
}

}  // namespace

TEST_CASE("sync killed at random points loses nothing and applies nothing twice") {
  std::mt19937_64 rng(20261127);
  const int on_a = kTransactionsOnA * kEpisodesPerTransaction, all = on_a + kEpisodesOnB;
  const std::string want = std::to_string(all) + "|" + std::to_string(all) + "\n";
  int killed = 0;
  for (int round = 0; round < kRounds; round++) {
    INFO("round ", round);
    TempDir dir;
    Conn pg = Fresh();
    agentmem_db* a = OpenReplica(dir, "a.agentmem");
    agentmem_db* b = OpenReplica(dir, "b.agentmem");
    Fill(a, "u", kTransactionsOnA, kEpisodesPerTransaction);
    Fill(b, "v", 1, kEpisodesOnB);
    agentmem_close(a);
    agentmem_close(b);
    // Kills while a pushes, b pushes and pulls, and a pulls.
    const char* names[4] = {"a.agentmem", "b.agentmem", "b.agentmem", "a.agentmem"};
    for (int k = 0; k < 4; k++) {
      killed += SyncKilledAfter(dir, names[k], std::chrono::microseconds(rng() % kMaxDelayUs[k]));
    }
    for (const char* name : {"a.agentmem", "b.agentmem", "a.agentmem"}) SyncRun(dir, name);
    CHECK(One(pg.get(), "SELECT count(*) || '|' || count(DISTINCT text) FROM episodes") + "\n" ==
          want);
    CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_changes WHERE kind = 'episode'") ==
          std::to_string(all));
    for (const char* name : {"a.agentmem", "b.agentmem"}) {
      CHECK(Shell(dir, name, "SELECT count(*), count(DISTINCT text) FROM episodes") == want);
    }
    CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_local_ids WHERE kind = 'episode'") ==
          std::to_string(all));
  }
  MESSAGE(killed, " of ", 4 * kRounds, " syncs killed before they finished");
}

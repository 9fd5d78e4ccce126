// tests/replication/crash_test.cc -- `agentmem sync` killed with SIGKILL at
// random points, pushing and pulling, then run to its end: nothing written
// is lost and nothing is applied twice, in PostgreSQL or in the files
// (docs/replication.md, "One run": each PostgreSQL transaction records its
// position, each pull batch is one local transaction with its position).
// Likewise with PostgreSQL restarted (an immediate stop) in the middle.
#include <agentmem.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/replication/replica_util.h"

using namespace agentmem::test;

namespace {

// Four kills a round (a pushing, b pushing and pulling, b again, a
// pulling): 100 in all. Each delay is drawn below how long that sync runs
// here, so most land mid-run; how many did is printed, not asserted.
constexpr int kRounds = 25;
constexpr int kMaxDelayUs[4] = {150000, 100000, 100000, 50000};
constexpr int kTransactionsOnA = 3, kEpisodesPerTransaction = 400;  // pulled in 3 batches
constexpr int kEpisodesOnB = 150;

// Runs the sync and kills it with SIGKILL after `delay` (or lets it finish
// first). Returns whether it was killed.
bool SyncKilledAfter(const TempDir& dir, const std::string& name, std::chrono::microseconds delay) {
  const pid_t pid = StartSync(dir, name);
  std::this_thread::sleep_for(delay);
  const bool killed = kill(pid, SIGKILL) == 0;
  return killed && WIFSIGNALED(Wait(pid));
}

// Runs the sync and restarts PostgreSQL at once (pg_run.sh's restart: an
// immediate stop, as a crash) after `delay`. Returns whether the sync failed.
bool SyncWithRestartAfter(const TempDir& dir, const std::string& name,
                          std::chrono::microseconds delay) {
  const char* restart = std::getenv("AGENTMEM_PG_RESTART");
  REQUIRE_MESSAGE(restart != nullptr, "AGENTMEM_PG_RESTART is not set: run through pg_run.sh");
  const pid_t pid = StartSync(dir, name);
  std::this_thread::sleep_for(delay);
  REQUIRE(std::system(restart) == 0);
  const int status = Wait(pid);
  return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
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

// Two fresh files: a with kTransactionsOnA x kEpisodesPerTransaction
// episodes, b with kEpisodesOnB; an empty database.
struct Files {
  TempDir dir;
  Conn pg = Fresh();
  Files() {
    agentmem_db* a = OpenReplica(dir, "a.agentmem");
    agentmem_db* b = OpenReplica(dir, "b.agentmem");
    Fill(a, "u", kTransactionsOnA, kEpisodesPerTransaction);
    Fill(b, "v", 1, kEpisodesOnB);
    agentmem_close(a);
    agentmem_close(b);
  }
  // Runs the syncs to their end and checks that every episode is in
  // PostgreSQL and in both files exactly once.
  void Finish() {
    pg = Connect();  // (a restart closed the first one)
    const int all = kTransactionsOnA * kEpisodesPerTransaction + kEpisodesOnB;
    const std::string want = std::to_string(all) + "|" + std::to_string(all) + "\n";
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
};

}  // namespace

TEST_CASE("sync killed at random points loses nothing and applies nothing twice") {
  std::mt19937_64 rng(20261127);
  int killed = 0;
  for (int round = 0; round < kRounds; round++) {
    INFO("round ", round);
    Files f;
    // Kills while a pushes, b pushes and pulls, and a pulls.
    const char* names[4] = {"a.agentmem", "b.agentmem", "b.agentmem", "a.agentmem"};
    for (int k = 0; k < 4; k++) {
      killed +=
          SyncKilledAfter(f.dir, names[k], std::chrono::microseconds(rng() % kMaxDelayUs[k]));
    }
    f.Finish();
  }
  MESSAGE(killed, " of ", 4 * kRounds, " syncs killed before they finished");
}

TEST_CASE("a PostgreSQL restart in the middle of syncs loses nothing and applies nothing twice") {
  std::mt19937_64 rng(20261128);
  int failed = 0;
  for (int round = 0; round < 4; round++) {
    INFO("round ", round);
    Files f;
    failed += SyncWithRestartAfter(f.dir, "a.agentmem",
                                   std::chrono::microseconds(rng() % kMaxDelayUs[0]));
    failed += SyncWithRestartAfter(f.dir, "b.agentmem",
                                   std::chrono::microseconds(rng() % kMaxDelayUs[1]));
    f.Finish();
  }
  MESSAGE(failed, " of 8 syncs stopped by the restart");
}

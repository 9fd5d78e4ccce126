// tests/reliability/kill_test.cc -- R2: a real writer process killed with
// SIGKILL at random moments (RELIABILITY.md R2).
//
// The writer (reliability_worker kill-writer) commits the deterministic
// workload of workload.h with sync=full and reports every transaction on a
// pipe after its commit returned OK. This test kills it -- after a random
// delay, or by making it kill itself just before, just after or in the middle
// of a random I/O call inside the commit code -- then reopens the file and
// checks: the transactions found are a contiguous prefix of those attempted,
// every acknowledged one is there, at most the one in doubt (the next after the
// last acknowledged) is there besides, every record equals what was written,
// the integrity check finds nothing, and the next writer can write on.
//
// AGENTMEM_KILLS sets the number of kills (default 200; `make soak` 10,000).
#include <doctest/doctest.h>

#include <agentmem.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/memory/database.h"
#include "tests/reliability/spawn.h"
#include "tests/reliability/workload.h"
#include "tests/util/oracle.h"
#include "tests/util/seed.h"
#include "tests/util/temp_dir.h"

namespace agentmem::reliability {
namespace {

using engine::Database;

uint64_t EnvCount(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

struct KillStats {
  uint64_t kills = 0, by_timer = 0, before = 0, after = 0, tear = 0;
  uint64_t acked = 0, in_doubt_present = 0, in_doubt_absent = 0, finished = 0;
  uint64_t files = 0;
};

}  // namespace

TEST_CASE("a writer process killed with SIGKILL at random moments loses no acknowledged commit") {
  const uint64_t kKills = EnvCount("AGENTMEM_KILLS", 200);
  const uint64_t kPerFile = 25;  // kills on one file before starting a fresh one
  const uint64_t seed = test::Seed();
  std::mt19937_64 rng(seed);
  KillStats st;
  test::TempDir dir;

  while (st.kills < kKills) {
    std::string path = dir.File("kill-" + std::to_string(st.files++) + ".agentmem");
    test::Oracle acked;
    uint64_t next_txn = 1;
    for (uint64_t k = 0; k < kPerFile && st.kills < kKills; k++) {
      // How this run dies.
      const char* modes[] = {"wait", "before", "after", "tear"};
      int mode = static_cast<int>(rng() % 4);
      uint64_t kill_at = 1 + rng() % 40;  // an autocommit costs about 2 mutating calls
      uint64_t delay_us = rng() % 30000;
      Child c = Spawn({"kill-writer", path, std::to_string(seed), std::to_string(next_txn),
                       mode == 0 ? "1000000" : "2000", modes[mode], std::to_string(kill_at)});
      REQUIRE(c.pid > 0);
      std::vector<Report> acks;
      Report r;
      bool ready = false;
      if (mode == 0) {
        // Wait for the open, then kill after a random delay while it commits.
        bool timed_out = false;
        if (ReadReport(c.reports, &r, 20000, &timed_out)) ready = r.kind == Report::kReady;
        std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        kill(c.pid, SIGKILL);
      }
      while (ReadReport(c.reports, &r)) {
        if (r.kind == Report::kReady) ready = true;
        if (r.kind == Report::kAcked) acks.push_back(r);
      }
      close(c.reports);
      int status = Reap(c.pid);
      bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
      bool finished = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      INFO("seed " << seed << ", file " << path << ", run " << k << ", mode " << modes[mode]
                   << " at call " << kill_at << ", delay " << delay_us << " us");
      REQUIRE_MESSAGE((killed || finished), "the writer ended with " << DescribeStatus(status));
      if (mode == 0) CHECK(ready);
      st.kills += killed;
      st.finished += finished;
      if (killed) {
        (mode == 0 ? st.by_timer : mode == 1 ? st.before : mode == 2 ? st.after : st.tear)++;
      }

      // The acknowledged transactions: next_txn, next_txn + 1, ... in order,
      // with the ids the model predicts.
      for (size_t i = 0; i < acks.size(); i++) {
        REQUIRE_MESSAGE(acks[i].a == next_txn + i, "acknowledgements out of order: got txn "
                                                       << acks[i].a << ", expected "
                                                       << next_txn + i);
        uint64_t t = acks[i].a;
        test::Txn want = ExpectTxn(acked, PlanTxn(seed, t), t);
        uint64_t first = want.episodes.empty() ? 0 : want.episodes.front().id;
        uint64_t last = want.episodes.empty() ? 0 : want.episodes.back().id;
        REQUIRE_MESSAGE((acks[i].b == first && acks[i].c == last),
                        "txn " << t << " was given episode ids " << acks[i].b << ".."
                               << acks[i].c << ", the model predicts " << first << ".." << last);
        acked.Apply(want);
      }
      st.acked += acks.size();
      uint64_t doubt_t = next_txn + acks.size();
      test::Txn doubt = ExpectTxn(acked, PlanTxn(seed, doubt_t), doubt_t);

      test::TestClock clock;
      engine::Options o = WorkloadOptions(engine::Env::Posix(), &clock);
      o.read_only = true;
      if (!engine::Env::Posix()->Exists(path)) {
        // Killed before the file was created: nothing can have been acked.
        REQUIRE(acked.commits() == 1);
        continue;
      }
      std::unique_ptr<Database> db;
      Status s = Database::Open(path, o, &db);
      REQUIRE_MESSAGE(s.ok(), "reopen after the kill failed: " << s.ToString());
      std::string why;
      int which = -1;
      bool match = test::MatchesAckedOrOneInDoubt(db.get(), acked, {doubt}, &why, &which);
      REQUIRE_MESSAGE(match, "after the kill (" << acks.size() << " acked, in doubt txn "
                                                << doubt_t << "): " << why);
      std::vector<std::string> problems;
      s = db->Check(&problems);
      REQUIRE_MESSAGE(s.ok(), s.ToString());
      REQUIRE_MESSAGE(problems.empty(), "integrity check: " << problems.front());
      db.reset();
      if (which == 0) {
        acked.Apply(doubt);
        next_txn = doubt_t + 1;
        st.in_doubt_present++;
      } else {
        next_txn = doubt_t;
        st.in_doubt_absent++;
      }
    }
    // The file still takes writes: one more transaction from this process,
    // then a reopen shows everything.
    if (!engine::Env::Posix()->Exists(path)) continue;
    test::TestClock clock;
    std::unique_ptr<Database> db;
    Status s = Database::Open(path, WorkloadOptions(engine::Env::Posix(), &clock), &db);
    REQUIRE_MESSAGE(s.ok(), s.ToString());
    std::vector<uint64_t> ids;
    s = RunTxn(db.get(), &clock, PlanTxn(seed, next_txn), next_txn, &ids);
    REQUIRE_MESSAGE(s.ok(), "a write after the kills failed: " << s.ToString());
    acked.Apply(ExpectTxn(acked, PlanTxn(seed, next_txn), next_txn));
    REQUIRE(db->Close().ok());
    engine::Options ro = WorkloadOptions(engine::Env::Posix(), &clock);
    ro.read_only = true;
    s = Database::Open(path, ro, &db);
    REQUIRE_MESSAGE(s.ok(), s.ToString());
    std::string diff = acked.Diff(db.get());
    CHECK_MESSAGE(diff.empty(), diff);
  }
  MESSAGE("R2: " << st.kills << " kills on " << st.files << " files (" << st.by_timer
                 << " by timer, " << st.before << " before / " << st.after << " after / "
                 << st.tear << " inside an I/O call; " << st.finished
                 << " runs finished first); " << st.acked << " acknowledged transactions, all "
                 << "present; the in-doubt one present " << st.in_doubt_present
                 << " times, absent " << st.in_doubt_absent << " times");
  CHECK(st.kills >= kKills);
}

TEST_CASE("a 10k-episode file opens after a kill -9 and the open time is reported") {
  // 10,000 episodes with 384-d vectors of the built-in embedder (100 per
  // transaction), then a writer process appending one episode per commit is
  // killed; the open that recovers is timed and printed (no assertion on
  // time: docs/testing.md records the figure).
  test::TempDir dir;
  std::string path = dir.File("tenk.agentmem");
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "sync=normal&embedder=agentmem-hash-v1") == AGENTMEM_OK);
  for (int t = 0; t < 100; t++) {
    REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
    for (int i = 0; i < 100; i++) {
      std::string text = "episode " + std::to_string(t * 100 + i) +
                         ": the user mentioned a meeting about the graph index on Tuesday";
      REQUIRE(agentmem_remember(db, ("u" + std::to_string(i % 10)).c_str(), "s", "user",
                                text.c_str(), 0, nullptr, nullptr, 0, nullptr) == AGENTMEM_OK);
    }
    REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
  }
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);

  int p[2];
  REQUIRE(pipe(p) == 0);
  std::fflush(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    agentmem_db* w = nullptr;
    if (agentmem_open(path.c_str(), &w) != AGENTMEM_OK) _exit(3);
    for (int i = 0;; i++) {
      if (agentmem_remember(w, "u0", "s", "user", "appended while being killed", 0, nullptr,
                            nullptr, 0, nullptr) != AGENTMEM_OK) {
        _exit(4);
      }
      if (i == 20) {
        char c = 'x';
        if (write(p[1], &c, 1) != 1) _exit(5);
      }
    }
  }
  close(p[1]);
  char c;
  REQUIRE(read(p[0], &c, 1) == 1);  // 20 commits in: it is committing now
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  kill(pid, SIGKILL);
  close(p[0]);
  int status = Reap(pid);
  REQUIRE_MESSAGE(WIFSIGNALED(status), DescribeStatus(status));

  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE, nullptr) == AGENTMEM_OK);
  agentmem_stats st;
  REQUIRE(agentmem_stats_get(db, &st) == AGENTMEM_OK);
  double open_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(st.episodes >= 10021);
  // The recovered file takes writes, and recall works on it.
  REQUIRE(agentmem_remember(db, "u1", "s", "user", "after recovery", 0, nullptr, nullptr, 0,
                            nullptr) == AGENTMEM_OK);
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_recall(db, "u1", "recovery", nullptr, &cur) == AGENTMEM_OK);
  CHECK(agentmem_cursor_step(cur) == AGENTMEM_ROW);
  agentmem_cursor_close(cur);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  MESSAGE("R2 recovery: open + stats of a " << st.file_bytes << "-byte file of " << st.episodes
                                            << " episodes (384-d) after kill -9 took "
                                            << open_ms << " ms");
}

}  // namespace agentmem::reliability

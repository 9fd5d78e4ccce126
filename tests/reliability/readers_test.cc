// tests/reliability/readers_test.cc -- R7: one writer and four reader
// processes on one file (RELIABILITY.md R7), a variant where the writer is
// killed mid-run, and the same with handles in threads of one process (run
// under ThreadSanitizer by `make tsan`).
//
// The writer and readers are ledger.h's: every reader snapshot is checked
// against the ledger block written in the same transaction as its episodes.
// AGENTMEM_R7_SECONDS sets the length of the process runs (default 8 s for
// the plain run and 6 s for the kill variant; `make soak` runs 60).
#include <doctest/doctest.h>

#include <agentmem.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/reliability/ledger.h"
#include "tests/reliability/spawn.h"
#include "tests/util/temp_dir.h"

namespace agentmem::reliability {
namespace {

double EnvSeconds(const char* name, double dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtod(v, nullptr) : dflt;
}

std::string Fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

struct ReaderTotals {
  uint64_t snapshots = 0, full_scans = 0, recalls = 0, readers_ok = 0;
};

// Collects the final report of each reader and reaps it.
void FinishReaders(std::vector<Child>& readers, ReaderTotals* tot) {
  for (Child& c : readers) {
    Report r;
    uint64_t snaps = 0;
    while (ReadReport(c.reports, &r)) {
      if (r.kind == Report::kReads) {
        snaps = r.a;
        tot->snapshots += r.a;
        tot->full_scans += r.b;
        tot->recalls += r.c;
      }
    }
    close(c.reports);
    int status = Reap(c.pid);
    CHECK_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0),
                  "reader " << c.pid << " ended with " << DescribeStatus(status)
                            << " (its message is on stderr)");
    CHECK(snaps > 0);
    tot->readers_ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
}

// Reads the writer's reports until it ends (or, with kill_after_s > 0, kills
// it that many seconds after it is ready). Returns the last acked transaction.
uint64_t RunWriter(Child w, double kill_after_s, uint64_t* acked, std::string* status_text,
                   bool* killed) {
  Report r;
  uint64_t last = 0;
  auto deadline = std::chrono::steady_clock::time_point::max();
  bool sent = false;
  for (;;) {
    int timeout = -1;
    if (kill_after_s > 0 && deadline != std::chrono::steady_clock::time_point::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      timeout = left > 0 ? static_cast<int>(left) : 0;
    }
    bool timed_out = false;
    if (!ReadReport(w.reports, &r, timeout, &timed_out)) {
      if (timed_out && !sent) {
        kill(w.pid, SIGKILL);
        sent = true;
        deadline = std::chrono::steady_clock::time_point::max();
        continue;
      }
      break;
    }
    if (r.kind == Report::kReady && kill_after_s > 0) {
      deadline = std::chrono::steady_clock::now() +
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(kill_after_s));
    }
    if (r.kind == Report::kAcked) {
      last = r.a;
      (*acked)++;
    }
  }
  close(w.reports);
  int status = Reap(w.pid);
  *status_text = DescribeStatus(status);
  *killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  return last;
}

// Creates the ledger file with one transaction so that readers can open it.
void CreateLedgerFile(const std::string& path) {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           kLedgerOptions) == AGENTMEM_OK);
  LedgerState st;
  std::string err;
  REQUIRE_MESSAGE(WriteLedgerTxn(db, &st, &err) == AGENTMEM_OK, err);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
}

// The ledger of the file as a fresh handle sees it, checked by one more
// reader pass.
LedgerState FinalCheck(const std::string& path) {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READONLY, kLedgerOptions) ==
          AGENTMEM_OK);
  int n = 0;
  ReaderResult r = RunReader(db, [&] { return n++ >= 33; });
  CHECK_MESSAGE(r.error.empty(), r.error);
  LedgerState st;
  std::string err = ReadLedger(db, &st);
  CHECK_MESSAGE(err.empty(), err);
  agentmem_close(db);
  return st;
}

}  // namespace

TEST_CASE("four reader processes see only whole transactions of one writer process") {
  const double seconds = EnvSeconds("AGENTMEM_R7_SECONDS", 8);
  test::TempDir dir;
  std::string path = dir.File("r7.agentmem");
  CreateLedgerFile(path);
  std::vector<Child> readers;
  for (int i = 0; i < 4; i++) {
    readers.push_back(Spawn({"reader", path, Fmt(seconds)}));
    REQUIRE(readers.back().pid > 0);
  }
  auto start = std::chrono::steady_clock::now();
  Child w = Spawn({"ledger-writer", path, Fmt(seconds), "2000"});
  REQUIRE(w.pid > 0);
  uint64_t acked = 0;
  std::string wstatus;
  bool killed = false;
  uint64_t last = RunWriter(w, 0, &acked, &wstatus, &killed);
  CHECK_MESSAGE(wstatus == "exit 0", "the writer ended with " << wstatus);
  ReaderTotals tot;
  FinishReaders(readers, &tot);
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  LedgerState st = FinalCheck(path);
  CHECK(st.t == last);
  MESSAGE("R7: 1 writer + 4 readers for " << Fmt(elapsed) << " s: " << acked
                                          << " transactions (" << st.count
                                          << " episodes); " << tot.snapshots
                                          << " reader snapshots checked (" << tot.full_scans
                                          << " full scans, " << tot.recalls
                                          << " recalls of the newest episode), 0 inconsistent");
  const char* min_reads = std::getenv("AGENTMEM_R7_MIN_READS");
  if (min_reads) CHECK(tot.snapshots >= std::strtoull(min_reads, nullptr, 10));
}

TEST_CASE("readers carry on when the writer process is killed and a new writer continues") {
  const double seconds = EnvSeconds("AGENTMEM_R7_SECONDS", 6);
  test::TempDir dir;
  std::string path = dir.File("r7-kill.agentmem");
  CreateLedgerFile(path);
  std::vector<Child> readers;
  for (int i = 0; i < 4; i++) {
    readers.push_back(Spawn({"reader", path, Fmt(seconds)}));
    REQUIRE(readers.back().pid > 0);
  }
  // The first writer is killed a third of the way in; readers read on alone
  // for a while; then a second writer picks up from the ledger it finds.
  uint64_t acked = 0;
  std::string wstatus;
  bool killed = false;
  Child w1 = Spawn({"ledger-writer", path, Fmt(seconds), "1000"});
  REQUIRE(w1.pid > 0);
  uint64_t last1 = RunWriter(w1, seconds / 3, &acked, &wstatus, &killed);
  CHECK_MESSAGE(killed, "the first writer ended with " << wstatus);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds / 6));
  uint64_t acked1 = acked;
  Child w2 = Spawn({"ledger-writer", path, Fmt(seconds / 3), "1000"});
  REQUIRE(w2.pid > 0);
  uint64_t last2 = RunWriter(w2, 0, &acked, &wstatus, &killed);
  CHECK_MESSAGE(wstatus == "exit 0", "the second writer ended with " << wstatus);
  ReaderTotals tot;
  FinishReaders(readers, &tot);
  LedgerState st = FinalCheck(path);
  // The second writer started after the last acknowledged transaction of the
  // first, or after the one in doubt.
  CHECK(last2 == st.t);
  CHECK(last2 > last1);
  CHECK(last2 - (acked - acked1) >= last1);
  CHECK(last2 - (acked - acked1) <= last1 + 1);
  MESSAGE("R7 kill: writer killed after " << acked1 << " transactions (last acked " << last1
                                          << "), a second writer committed "
                                          << (acked - acked1) << " more from "
                                          << last2 - (acked - acked1) + 1 << "; "
                                          << tot.snapshots
                                          << " reader snapshots checked, 0 inconsistent");
}

TEST_CASE("reader and writer handles in threads of one process see only whole transactions") {
  // Four threads each with their own read-only handle, checking snapshots; two
  // more sharing a fifth handle (calls serialised by its mutex), one checking
  // snapshots and one recall outside them; one writer thread.
  test::TempDir dir;
  std::string path = dir.File("r7-threads.agentmem");
  CreateLedgerFile(path);
  const uint64_t kTxns = std::getenv("AGENTMEM_R7_TXNS")
                             ? std::strtoull(std::getenv("AGENTMEM_R7_TXNS"), nullptr, 10)
                             : 300;
  std::atomic<bool> done{false};
  std::vector<ReaderResult> results(6);
  std::vector<agentmem_db*> handles(5, nullptr);
  for (int i = 0; i < 4; i++) {
    REQUIRE(agentmem_open_v2(path.c_str(), &handles[i], AGENTMEM_OPEN_READONLY, kLedgerOptions) ==
            AGENTMEM_OK);
  }
  REQUIRE(agentmem_open_v2(path.c_str(), &handles[4], AGENTMEM_OPEN_READWRITE, kLedgerOptions) ==
          AGENTMEM_OK);
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; i++) {
    agentmem_db* h = handles[i < 4 ? i : 4];
    threads.emplace_back([&, i, h] {
      results[i] = RunReader(h, [&] { return done.load(); }, i == 5);
    });
  }
  agentmem_db* w = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &w, AGENTMEM_OPEN_READWRITE, kLedgerOptions) ==
          AGENTMEM_OK);
  std::string err;
  std::thread writer([&] {
    LedgerState st;
    err = ReadLedger(w, &st);
    for (uint64_t t = 0; t < kTxns && err.empty(); t++) {
      if (WriteLedgerTxn(w, &st, &err) != AGENTMEM_OK) break;
    }
    done = true;
  });
  writer.join();
  for (std::thread& t : threads) t.join();
  CHECK_MESSAGE(err.empty(), err);
  uint64_t snapshots = 0;
  for (const ReaderResult& r : results) {
    CHECK_MESSAGE(r.error.empty(), r.error);
    CHECK(r.snapshots + r.recalls > 0);
    snapshots += r.snapshots;
  }
  for (agentmem_db* h : handles) CHECK(agentmem_close(h) == AGENTMEM_OK);
  CHECK(agentmem_close(w) == AGENTMEM_OK);
  LedgerState st = FinalCheck(path);
  CHECK(st.t == kTxns + 1);
  MESSAGE("R7 threads: " << kTxns << " transactions, " << snapshots
                         << " snapshots checked by 6 reader threads on 5 handles, 0 inconsistent");
}

}  // namespace agentmem::reliability

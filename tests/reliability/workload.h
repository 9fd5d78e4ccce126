// tests/reliability/workload.h -- the deterministic write workload shared by
// the kill -9 writer (worker.cc) and the test that checks what survived
// (kill_test.cc).
//
// Transaction t of a run with seed s is a pure function of (s, t): the same
// records, the same clock readings. The writer process executes it against a
// file; the parent rebuilds the expected records in an Oracle
// (tests/util/oracle.h) without running anything, so after a kill it knows
// exactly what every acknowledged -- and the one in-doubt -- transaction put in
// the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "format/records.h"
#include "tests/util/oracle.h"

namespace agentmem::reliability {

constexpr uint32_t kDim = 8;
constexpr uint64_t kSalt = 0x6b696c6c2d392121ULL;

// The clock reading before the first write of transaction t; each write of it
// advances the clock by 1,000 us first (as test::Driver does).
inline int64_t TxnClockBase(uint64_t t) {
  return 1'700'000'000'000'000 + static_cast<int64_t>(t) * 1'000'000;
}

// Options of the workload file: sync=full, an 8-d test vector space, a fixed
// salt, the given clock.
engine::Options WorkloadOptions(engine::Env* env, test::TestClock* clock);

struct Op {
  enum Kind { kEpisode, kBlock, kFact } kind = kEpisode;
  format::EpisodeRecord episode;
  format::BlockRecord block;
  format::FactRecord fact;
};

// One transaction: either a single autocommitted write, or Begin, several
// writes (episodes, a block, a fact) and Commit.
struct TxnPlan {
  bool explicit_txn = false;
  std::vector<Op> ops;
};

TxnPlan PlanTxn(uint64_t seed, uint64_t t);

// The records transaction t stores when it is applied on top of `before`.
test::Txn ExpectTxn(const test::Oracle& before, const TxnPlan& plan, uint64_t t);

// Runs transaction t against db, driving `clock`. On OK, *episode_ids holds
// the ids the engine assigned to its episodes, in order.
Status RunTxn(engine::Database* db, test::TestClock* clock, const TxnPlan& plan, uint64_t t,
              std::vector<uint64_t>* episode_ids);

// A message from a worker process to its parent on the report pipe. Each is
// written with one write(2) of sizeof(Report) <= PIPE_BUF bytes, so it arrives
// whole or not at all.
struct Report {
  enum Kind : uint64_t { kReady = 1, kAcked = 2, kReads = 3 };
  uint64_t kind = 0;
  uint64_t a = 0;  // kAcked: the transaction number; kReads: snapshots checked
  uint64_t b = 0;  // kAcked: its first episode id (0 when it has none)
  uint64_t c = 0;  // kAcked: its last episode id
};

// The fd number a worker writes its reports to.
constexpr int kReportFd = 3;

}  // namespace agentmem::reliability

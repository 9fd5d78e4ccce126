// tests/util/oracle.h -- an in-memory model of what a database must hold: the
// acknowledged transactions, applied in order, with the fields the engine
// fills in (ids, block versions, timestamps) predicted from a TestClock.
//
//   Oracle      the model; Diff() compares a Database with it through the
//               public API (every field, every user, and nothing extra).
//   Driver      runs writes against a Database and keeps an Oracle of what was
//               acknowledged, plus the transactions left in doubt by a failure.
//   Random*     deterministic records for randomized workloads.
//
// After a crash or an I/O error, a reopened database must equal the acked
// Oracle, or the acked Oracle plus exactly one of Driver::in_doubt() -- never a
// part of one (RELIABILITY.md, "Commits can be in doubt").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/database.h"
#include "format/records.h"

namespace agentmem::test {

// A clock the test controls: the engine stamps created_at, updated_at and
// recorded_at with `now`, so the model can predict them.
struct TestClock {
  int64_t now = 1'700'000'000'000'000;
  std::function<int64_t()> Fn() {
    return [this] { return now; };
  }
  int64_t Tick() { return now += 1000; }
};

// The records of one transaction, as the engine is expected to store them.
struct Txn {
  std::vector<format::EpisodeRecord> episodes;
  std::vector<format::BlockRecord> blocks;
  std::vector<format::FactRecord> facts;
  bool empty() const { return episodes.empty() && blocks.empty() && facts.empty(); }
};

class Oracle {
 public:
  // What the engine will store for r if it is written next inside `pending`
  // (the records already written in the same transaction) at clock `now`.
  format::EpisodeRecord ExpectEpisode(format::EpisodeRecord r, int64_t now,
                                      const Txn& pending) const;
  format::BlockRecord ExpectBlock(format::BlockRecord r, int64_t now, const Txn& pending) const;
  format::FactRecord ExpectFact(format::FactRecord r, int64_t now, const Txn& pending) const;

  // Applies an acknowledged transaction. An empty one writes nothing.
  void Apply(const Txn& t);
  Oracle With(const Txn& t) const {
    Oracle o = *this;
    o.Apply(t);
    return o;
  }

  // "" when db shows exactly this model; otherwise the first difference.
  // Reads through the public API: stats, every user's episode ids (and per
  // session), every episode, every current block, every fact, and checks that
  // the next episode id does not exist. Commits that carry no records are
  // invisible here: stats.commits must be at least commits() (tests that need
  // the exact count check it themselves).
  std::string Diff(engine::Database* db) const;

  uint64_t commits() const { return commits_; }  // including the creation transaction
  uint64_t next_episode_id() const { return next_episode_id_; }
  size_t episode_count() const { return episodes_.size(); }
  const std::map<uint64_t, format::EpisodeRecord>& episodes() const { return episodes_; }
  const std::map<uint64_t, format::FactRecord>& facts() const { return facts_; }
  // The current version of a block, or null.
  const format::BlockRecord* Block(const std::string& user, const std::string& name) const;

 private:
  std::map<uint64_t, format::EpisodeRecord> episodes_;
  std::map<std::pair<std::string, std::string>, std::vector<format::BlockRecord>> blocks_;
  std::map<uint64_t, format::FactRecord> facts_;
  std::set<std::string> users_;
  uint64_t commits_ = 1;
  uint64_t next_episode_id_ = 1;
  uint64_t next_fact_id_ = 1;
  uint64_t next_block_version_ = 1;
};

// True when db equals `acked`, or `acked` plus exactly one of `in_doubt`.
// *why gets the differences otherwise; *which the index of the in-doubt
// transaction found whole (-1 when none).
bool MatchesAckedOrOneInDoubt(engine::Database* db, const Oracle& acked,
                              const std::vector<Txn>& in_doubt, std::string* why,
                              int* which = nullptr);

// Drives writes against a Database and keeps the model in step. Before each
// call it predicts the stored record; a call that returns OK outside a
// transaction (or a Commit that returns OK) is applied to acked(); a failed one
// is kept in in_doubt() until a later write is acknowledged (then it cannot
// have been written: it would own the ids the later one was given).
// Inside Begin/Commit a failed write is a failed statement: it is not part of
// the transaction, as in SQLite.
class Driver {
 public:
  Driver(engine::Database* db, TestClock* clock) : db_(db), clock_(clock) {}
  void set_db(engine::Database* db) { db_ = db; }

  Status Remember(format::EpisodeRecord r);
  Status SetBlock(format::BlockRecord r);
  Status AssertFact(format::FactRecord r);
  Status Begin();
  Status Commit();
  Status Rollback();

  const Oracle& acked() const { return acked_; }
  Oracle& mutable_acked() { return acked_; }
  const std::vector<Txn>& in_doubt() const { return in_doubt_; }
  bool in_transaction() const { return in_txn_; }
  // Protocol violations seen while driving (an OK call whose assigned id
  // differs from the model's prediction).
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  template <typename Rec, typename Call>
  Status Write(Rec expected, std::vector<Rec> Txn::*list, Call call);
  void Acked(const Txn& t);

  engine::Database* db_;
  TestClock* clock_;
  Oracle acked_;
  std::vector<Txn> in_doubt_;
  bool in_txn_ = false;
  Txn pending_;
  std::vector<std::string> errors_;
};

// ---- deterministic record generators

// An episode for user "u<k>", session "s<j>", with a unique text tagged `n`.
// Some have a vector of `dim` floats, some metadata, some a text long enough
// to fill most of a page (and compress).
format::EpisodeRecord RandomEpisode(std::mt19937_64& rng, uint32_t dim, uint64_t n);
format::BlockRecord RandomBlock(std::mt19937_64& rng, uint64_t n);
format::FactRecord RandomFact(std::mt19937_64& rng, uint64_t n);

// One line describing a record, for failure messages.
std::string Describe(const format::EpisodeRecord& r);
std::string Describe(const format::BlockRecord& r);
std::string Describe(const format::FactRecord& r);

}  // namespace agentmem::test

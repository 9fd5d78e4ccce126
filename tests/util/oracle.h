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

#include "engine/memory/database.h"
#include "format/records.h"
#include "tests/util/fault_env.h"

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
// Forgets apply after the records, in order (docs/lifecycle.md); a retention
// policy set in the transaction (SetRetention) is stored with it.
struct Txn {
  std::vector<format::EpisodeRecord> episodes;
  std::vector<format::BlockRecord> blocks;
  std::vector<format::FactRecord> facts;
  std::vector<format::ForgetRecord> forgets;
  std::optional<std::pair<int64_t, bool>> retention;  // (max_age_s, keep_cited)
  bool empty() const {
    return episodes.empty() && blocks.empty() && facts.empty() && forgets.empty() && !retention;
  }
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
  // What a forget does (docs/lifecycle.md "Forgetting"): the episodes, facts
  // and block versions it names leave the model; after episodes, the facts of
  // their users whose sources are all gone, one of them now (not for
  // retention). Forgotten episode ids are remembered: Diff checks that each
  // stays unreadable.
  void Forget(const format::ForgetRecord& f);
  // The retention forget a close or VACUUM at clock `now` commits, if the
  // model's policy has one due (nullopt: nothing to forget).
  std::optional<format::ForgetRecord> RetentionDue(int64_t now) const;
  // A VACUUM writes a new file with its own commits: from then on stats.commits
  // is only known to be at least 1.
  void Compacted() { commits_ = 1; }
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
  const std::set<uint64_t>& forgotten_episodes() const { return forgotten_episodes_; }
  std::set<std::string> users() const { return users_; }
  // Every current block, per (user, name).
  std::vector<format::BlockRecord> CurrentBlocks() const;
  // The current version of a block, or null.
  const format::BlockRecord* Block(const std::string& user, const std::string& name) const;

 private:
  std::map<uint64_t, format::EpisodeRecord> episodes_;
  std::map<std::pair<std::string, std::string>, std::vector<format::BlockRecord>> blocks_;
  std::map<uint64_t, format::FactRecord> facts_;
  std::set<std::string> users_;
  std::set<uint64_t> forgotten_episodes_;
  std::pair<int64_t, bool> retention_{0, false};  // (max_age_s, keep_cited)
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
// have been written: it would own the ids the later one was given -- except a
// forget or a retention policy, which takes no ids: that one is decided by
// what the handle shows once the later write is read back).
// Inside Begin/Commit a failed write is a failed statement: it is not part of
// the transaction, as in SQLite.
class Driver {
 public:
  Driver(engine::Database* db, TestClock* clock) : db_(db), clock_(clock) {}
  // The FaultEnv under the handle, if any: the driver's own comparisons of
  // the handle with the model run with it paused.
  void set_faults(FaultEnv* faults) { faults_ = faults; }
  // model.Diff(db), with that FaultEnv paused.
  std::string Compare(const Oracle& model);
  void set_db(engine::Database* db) {
    db_ = db;
    failed_ = false;
  }

  Status Remember(format::EpisodeRecord r);
  Status SetBlock(format::BlockRecord r);
  Status AssertFact(format::FactRecord r);
  Status Begin();
  Status Commit();
  Status Rollback();
  // Lifecycle (docs/lifecycle.md). Forget: inside Begin/Commit it applies at
  // the commit. Purge = Forget then VACUUM: if it fails, its forget is in
  // doubt. Every acknowledged commit may be followed by the retention forget
  // (AfterCommit). Vacuum and Close apply the model's retention policy first, as the
  // engine does (a failed one leaves that forget in doubt); Close also runs
  // auto_vacuum, so the model's commit count is reset as by Compacted(). After
  // any failed call on the handle its close may skip that work (a sticky
  // error): the retention is then in doubt even when Close returns OK.
  Status Forget(const format::ForgetRecord& f);
  Status Purge(const format::ForgetRecord& f, engine::ForgetReceipt* receipt = nullptr);
  Status Vacuum();
  Status SetRetention(int64_t max_age_s, bool keep_cited);
  Status Close();

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
  void Acked(const Txn& t, bool compacted = false);

  // After an acknowledged commit a writer applies its retention policy when it
  // is due (docs/lifecycle.md, "Retention"): when the model has one due, the
  // handle decides -- it shows the retention forget (acked), or shows none
  // (not due yet: a close or VACUUM applies it); when a write failed after
  // the caller's commit, the forget is in doubt.
  void AfterCommit();
  // The outcome of a call that commits `t` by itself: acked, or in doubt.
  Status Autocommitted(Txn t, Status s);
  // A call that may compact the file. When it returns OK, outcomes.back() was
  // committed; when it fails, any one of `outcomes` (or none) may have been.
  Status Compacting(const std::vector<Txn>& outcomes, const std::function<Status()>& call);

  engine::Database* db_;
  TestClock* clock_;
  FaultEnv* faults_ = nullptr;
  Oracle acked_;
  std::vector<Txn> in_doubt_;
  bool in_txn_ = false;
  bool failed_ = false;  // a call on this handle failed
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
// `n` words from a small vocabulary (some of them not ASCII), space-separated.
std::string RandomWords(std::mt19937_64& rng, int n);

// One line describing a record, for failure messages.
std::string Describe(const format::EpisodeRecord& r);
std::string Describe(const format::BlockRecord& r);
std::string Describe(const format::FactRecord& r);

}  // namespace agentmem::test

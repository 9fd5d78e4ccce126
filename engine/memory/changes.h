// engine/memory/changes.h -- the change feed: the committed transactions of a
// file after a given commit, as logical changes in commit order, decoded from
// the log itself (docs/replication.md, "The change feed"; the records are
// docs/format.md §5, the transactions §6.1).
//
// A feed position is (log id, commit sequence number). The log id is the
// file's salt (docs/format.md §2): a new file, a VACUUM's copy and a salvaged
// file each get a new one, and each numbers its commits from 1. Within one
// log every commit from 1 on stays in the file (pages are only appended), so
// any `since` from 0 to the snapshot's last commit can be read; a position of
// another log, or past the last commit, is not in the file
// (kNotFoundChanges), and the caller resynchronises from `since` 0 of the
// file's log, whose first transactions then hold its live records.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "engine/storage/scan.h"

namespace agentmem::engine {

// What a change row is. The numbers are the C API's AGENTMEM_CHANGE_*.
enum class ChangeKind : int {
  kEpisode = 1,    // an episode record (docs/format.md §5.1)
  kBlock = 2,      // a block version (§5.2)
  kFact = 3,       // a fact record: a new fact, or a new version of one (§5.3)
  kForget = 4,     // a forget record of kinds 1-6 (§5.9)
  kRetention = 5,  // a forget record of kind 7, written by the retention policy
  kMeta = 6,       // one meta entry, key and value (§5.4)
  kCommit = 7,     // the end of a transaction: always its last row
};
// "episode", "block", "fact", "forget", "retention", "meta", "commit".
const char* ChangeKindName(ChangeKind kind);

// One change. Within a transaction the rows come in the order the records are
// applied: meta entries, episodes, block versions, facts, forgets, then the
// commit row.
struct Change {
  uint64_t log_id = 0;  // the file's salt
  uint64_t seq = 0;     // the transaction's commit_seq
  ChangeKind kind = ChangeKind::kCommit;
  // Episode id, block version, fact id, the episode or fact id a forget
  // names (kinds 4 and 5), else 0.
  uint64_t id = 0;
  std::string user_id;  // "" for meta, retention and commit rows
  // The record's fields as one JSON object (docs/replication.md lists them).
  std::string data;
  std::vector<float> vector;  // an episode's vector; empty otherwise
  int64_t commit_ts = 0;      // the transaction's commit time
};

// Reads the changes after one commit. Holds a read snapshot of the Database
// (a ReadPin) from Open to destruction: the feed ends at the commit that was
// the latest when it opened. Memory: one transaction's pages and records at a
// time; time: the log from the first page, or from where the last feed of
// this handle that was read to its end stopped when `since` is at or after
// it, or nothing when `since` is the last commit.
// Thread safety: none; calls are serialised with the Database's other calls.
// REQUIRES: the Database outlives the feed.
class ChangeFeed {
 public:
  // Opens a feed of the commits after `since` of log `log_id` (0: the file's,
  // whatever it is). Errors: kNotFoundChanges when log_id is another log's or
  // since is past the last commit (the message names the file's log and last
  // commit); kMisuse on a closed handle.
  static Status Open(Database* db, uint64_t log_id, uint64_t since,
                     std::unique_ptr<ChangeFeed>* out);
  // The file's log id and its last commit, as of a new snapshot (the open
  // transaction's, or a pinned one). Errors: those of a read.
  static Status Head(Database* db, uint64_t* log_id, uint64_t* seq);
  ~ChangeFeed();
  ChangeFeed(const ChangeFeed&) = delete;
  ChangeFeed& operator=(const ChangeFeed&) = delete;

  // The next change in *out, or *done after the commit row of the last
  // transaction. Errors: kCorrupt* naming a damaged page of the log (never
  // skipped), kIoErr*, kNoMem, and kMisuse when the handle closed or moved to
  // a file that replaced its own (a VACUUM of this handle) since Open.
  Status Next(Change* out, bool* done);

  // Forgets the Database without ending its read (ReadPin::Detach): for when
  // it is already gone.
  void Detach() { pin_.Detach(); }

  uint64_t log_id() const { return log_id_; }
  uint64_t last_seq() const { return last_seq_; }  // the snapshot's last commit

 private:
  ChangeFeed(Database* db, uint64_t since) : db_(db), since_(since) {}
  // Reads transactions until one after `since_` is decoded into rows_.
  Status Fill(bool* done);
  Status Decode(ScannedTxn& txn);

  Database* db_;
  ReadPin pin_;
  uint64_t since_;
  uint64_t log_id_ = 0;
  uint64_t last_seq_ = 0;
  uint64_t generation_ = 0;  // Database::log_generation_ at Open
  std::unique_ptr<TxnReader> reader_;
  Database::Counters next_;  // the counters before the transaction read next
  std::vector<Change> rows_;  // the decoded rows of one transaction
  size_t row_ = 0;
};

}  // namespace agentmem::engine

// engine/memory/database.h -- one open .agentmem file: snapshots, transactions, the
// commit protocol and the typed reads and writes behind the C ABI
// (docs/architecture.md).
//
// Thread safety: none. The C ABI (capi.cc) serialises every call on a handle
// with the handle's mutex. Several Database objects -- in this process or
// others -- may open the same file: one writes at a time (the write lock),
// the others keep reading their snapshot and move forward on their next read.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/memory/catalog.h"
#include "engine/memory/embedder.h"
#include "engine/env/env.h"
#include "engine/memory/fact_index.h"
#include "engine/memory/options.h"
#include "engine/memory/recall.h"
#include "engine/storage/scan.h"
#include "engine/storage/pager.h"
#include "format/checkpoint.h"
#include "format/file_header.h"
#include "format/records.h"

namespace agentmem::engine {

struct Stats {
  uint64_t file_bytes = 0;
  uint64_t episodes = 0;
  uint64_t blocks = 0;
  uint64_t block_versions = 0;
  uint64_t facts = 0;
  uint64_t users = 0;
  uint64_t commits = 0;
  uint64_t text_bytes = 0;
  uint64_t pages = 0;
  uint64_t syncs = 0;
  uint64_t torn_bytes = 0;
};

struct Selection;       // what a forget names (lifecycle.cc)
struct CompactionPlan;  // what a VACUUM copies (lifecycle.cc)
struct CompactionBatch;  // one transaction of it, as read
struct CheckpointSections;  // storage/checkpoint_reader.h

// What REINDEX did (reindex.cc).
struct ReindexReceipt {
  uint64_t episodes = 0;           // live episodes indexed
  uint64_t vectors = 0;            // of them, with a vector in the graph
  uint64_t checkpoint_offset = 0;  // the checkpoint that commits both indexes
};

// Which facts a query returns (docs/lifecycle.md, "Facts on two time axes").
struct FactQuery {
  std::string user_id;
  std::optional<std::string> subject, predicate, object;
  // Valid time: facts true at valid_at (valid_from <= valid_at < valid_to).
  // Transaction time: facts the file knew at known_at (recorded_at <=
  // known_at < expired_at). 0 = now, on both axes.
  int64_t valid_at = 0;
  int64_t known_at = 0;
  bool all_versions = false;  // every row of both axes: no time filter
};

// What a forget (and a PURGE or VACUUM) did; the C API's agentmem_receipt.
struct ForgetReceipt {
  uint64_t episodes = 0;        // episodes forgotten
  uint64_t facts = 0;           // facts forgotten (cited episodes all forgotten included)
  uint64_t block_versions = 0;  // block versions forgotten
  bool vacuumed = false;        // the file was rewritten (PURGE, VACUUM)
  uint64_t bytes_before = 0;    // file size before the rewrite
  uint64_t bytes_after = 0;     // and after
  // The proof of a PURGE: the forgotten texts (>= 16 bytes) and vectors
  // searched for in every byte of the new file, raw and decompressed.
  uint64_t needles = 0;         // distinct byte strings searched for
  uint64_t residue = 0;         // of them, found (0: nothing of the forgotten data remains)
};

// ts (unix us) plus `seconds`, clamped to the int64 range.
inline int64_t SaturatingAdd(int64_t ts, int64_t seconds) {
  int64_t us = 0, out = 0;
  if (__builtin_mul_overflow(seconds, int64_t{1000000}, &us)) return seconds > 0 ? INT64_MAX : INT64_MIN;
  if (__builtin_add_overflow(ts, us, &out)) return us > 0 ? INT64_MAX : INT64_MIN;
  return out;
}

class Database {
 public:
  // Opens (and with opts.create, creates) the file at path. On failure *out is
  // null and the Status explains.
  static Status Open(const std::string& path, const Options& opts, std::unique_ptr<Database>* out);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Makes what was committed durable under sync=NORMAL and releases the file.
  // An open transaction is rolled back. Safe to call twice.
  Status Close();
  // The episodes this handle indexes (the C API gives the freed heap back to
  // the system after closing a handle of many: capi.cc).
  uint64_t episode_count() const { return catalog_.episode_count(); }

  // ---- transactions
  Status Begin();
  Status Commit();
  Status Rollback();
  bool in_transaction() const { return explicit_txn_; }

  // ---- savepoints (savepoint.cc), with the semantics of SQL's SAVEPOINT,
  // RELEASE and ROLLBACK TO. They mark the open transaction's pending writes;
  // nothing is written to the file until the transaction commits.
  // Opens a savepoint named `name` (names may repeat: RELEASE and ROLLBACK TO
  // mean the newest one of a name; names compare exactly). Outside a
  // transaction it begins one, which the RELEASE of this savepoint commits.
  Status Savepoint(std::string name);
  // Closes the newest savepoint named `name` and every one opened after it;
  // their writes stay in the transaction (the enclosing savepoint's, if any).
  // When that savepoint began the transaction, commits it (as Commit does).
  // kNotFound when no open savepoint has the name.
  Status Release(const std::string& name);
  // Drops every write made since the newest savepoint named `name` -- records,
  // supersessions, forgets, meta settings, reserved ids -- and closes the
  // savepoints opened after it. The savepoint itself stays open, and so does
  // the transaction. The ids of the dropped records are given again to the
  // next writes, as after Rollback: they were never committed. kNotFound when
  // no open savepoint has the name.
  Status RollbackTo(const std::string& name);

  // ---- writes. Outside Begin/Commit each is its own transaction.
  // r.id == 0: the engine assigns the next id and returns it in *id. A
  // nonzero r.id (an import) is used when it is >= episode_id_limit() (ids
  // only increase; gaps are allowed), else kConstraint. r.created_at is kept
  // when nonzero.
  Status Remember(format::EpisodeRecord r, uint64_t* id);
  // r.updated_at is kept when nonzero; r.version likewise when it is above
  // every version so far (an import), else assigned.
  Status SetBlock(format::BlockRecord r);
  // Asserts a fact, recorded now. If the same (subject, predicate, object)
  // is already current and valid at r.valid_from, nothing is written and *id
  // is that fact's. If the predicate is single-valued (DeclarePredicate),
  // every current fact of (user, subject, predicate) with another object
  // whose valid time overlaps the new one's is superseded: it is expired in
  // transaction time (a new version with expired_at = now) and what is left
  // of its valid time before (and after) the new fact is recorded as new
  // facts, so that both time axes keep their history. `replaces` (0: none)
  // names a current fact of the same user that r corrects: it is expired in
  // transaction time at the instant r is recorded, even when r is already
  // known; when r states another subject, predicate or object and starts
  // inside its valid time, the part of it before r.valid_from is recorded as
  // a new fact known from that instant. kNotFound when it is not a current
  // fact of r.user_id.
  Status AssertFact(format::FactRecord r, uint64_t* id, uint64_t replaces = 0);
  // Writes a fact exactly as given (an import): both time axes kept
  // (recorded_at 0 = now, expired_at 0 = never), no superseding. r.id is
  // used when it is above every fact id so far, 0 = assigned.
  Status ImportFact(format::FactRecord r, uint64_t* id);
  // Declares `predicate` single-valued (or not) for every user of the file.
  Status DeclarePredicate(const std::string& predicate, bool single_valued);
  bool IsSingleValued(const std::string& predicate) const;
  // Stages meta entry (key, value) (docs/format.md §5.4) like every write:
  // in the open transaction, else committed at once. Only keys under
  // "sync." are accepted (kMisuse otherwise): the engine's own settings are
  // written by the calls that own them. Key at most 256 bytes, value at
  // most 64 KiB (kTooBig), both UTF-8 without NUL.
  Status SetSyncMeta(const std::string& key, const std::string& value);
  // The value of meta key `key` as of a new snapshot, with the open
  // transaction's entries applied; kNotFound when the file has none.
  Status GetMeta(const std::string& key, std::string* value);
  // Forgets what `f` names (format/records.h, ForgetKind): at once invisible to
  // every read and recall of this handle once committed, and of every other
  // handle from its next read. The receipt's counts are filled when the
  // forget commits at once (outside Begin/Commit).
  Status Forget(const format::ForgetRecord& f, ForgetReceipt* receipt);
  // Rewrites the live records into a new file and atomically replaces this
  // one with it (write, sync, rename, sync the directory); other handles move
  // to the new file on their next read or write. `needles`: byte strings to
  // prove absent (a PURGE's forgotten texts and vectors). REQUIRES: no open
  // transaction.
  Status Vacuum(const std::vector<std::string>& needles, ForgetReceipt* receipt);
  // Retention (docs/lifecycle.md): episodes whose event time is more than
  // max_age_s seconds in the past are forgotten -- except, with keep_cited,
  // those a live fact cites -- when a writable handle closes and before a
  // VACUUM copies. 0 keeps them forever (the default). Blocks and facts never
  // expire. Stored in the file, for every handle.
  Status SetRetention(int64_t max_age_s, bool keep_cited);
  void Retention(int64_t* max_age_s, bool* keep_cited) const;
  // Builds the BM25 index and the HNSW graph again from the episode records
  // and commits them in a checkpoint that the next superblock points at
  // (reindex.cc). REQUIRES: no open transaction. On failure the handle keeps
  // its indexes and the file is as it was.
  Status Reindex(ReindexReceipt* receipt);
  // Forget, then Vacuum with the forgotten texts and vectors as needles.
  Status Purge(const format::ForgetRecord& f, ForgetReceipt* receipt);
  // With `on`, every forget applied from now on (this handle's commits and
  // those it reads) keeps the texts and vectors of the episodes and the
  // values of the block versions it removes, and the next Vacuum searches its
  // copy for them too (receipt needles, residue), then drops them. Off drops
  // what is kept. For forgets committed inside a transaction, where PURGE is
  // refused.
  void CollectForgotten(bool on);
  // Searches every byte of the file, raw and in decompressed pages, for each
  // needle; *found: how many of them are there.
  Status SearchFile(const std::vector<std::string>& needles, uint64_t* found);

  // `v` as this file stores it (rounded to float16 or int8; unchanged for
  // float32): what a commit of `v` reads back. kRange when it cannot be
  // stored, leaving `v` as it was.
  Status AsStored(std::vector<float>* v) const;

  // ---- reads, on the handle's snapshot plus its own pending writes.
  Status GetEpisode(uint64_t id, format::EpisodeRecord* out);
  Status GetEpisodeNoRefresh(uint64_t id, format::EpisodeRecord* out);
  // The same for its text alone (no vector decoded).
  Status EpisodeTextNoRefresh(uint64_t id, std::string* text);
  Status ListEpisodeIds(std::string_view user_id, const std::string* session_id,
                        std::vector<uint64_t>* ids);
  // The same ids ordered by event time (ts), ties by id: the order of
  // agentmem_episodes().
  Status ListEpisodeIdsByTime(std::string_view user_id, const std::string* session_id,
                              std::vector<uint64_t>* ids);
  Status GetBlock(std::string_view user_id, std::string_view name, format::BlockRecord* out);
  Status ListBlocks(std::string_view user_id, std::vector<format::BlockRecord>* out);
  Status ListFacts(std::string_view user_id, const std::string* subject,
                   const std::string* predicate, std::vector<format::FactRecord>* out);
  // Facts by subject / predicate / object (indexed) on both time axes.
  Status QueryFacts(const FactQuery& q, std::vector<format::FactRecord>* out);
  Status GetStats(Stats* out);
  // Users with at least one episode, block or fact, in first-seen order.
  Status ListUsers(std::vector<std::string>* out);
  // Every version of one block, oldest first (pending writes last).
  Status ListBlockHistory(std::string_view user_id, std::string_view name,
                          std::vector<format::BlockRecord>* out);
  // ---- what an export carries besides the records (engine/memory/memory.cc)
  // The ids the next writes get (pending writes included): episode, fact,
  // block version.
  void NextIds(uint64_t* episode, uint64_t* fact, uint64_t* block_version) const;
  // Raises the next ids to at least these when the open transaction commits,
  // so that ids an export did not carry (forgotten records) are never given
  // again, as after VACUUM. The ids skipped, here and by the transaction's
  // records, are not counted as forgotten records in the file (auto_vacuum).
  // REQUIRES: an open transaction (Begin).
  Status ReserveIds(uint64_t episode, uint64_t fact, uint64_t block_version);
  // Every predicate a DeclarePredicate named, by name, with its setting.
  void DeclaredPredicates(std::vector<std::pair<std::string, bool>>* out) const;
  // Episode ids run from 1 to below this (pending ones included); an id below
  // it that GetEpisode does not find was never committed.
  // The largest episode id a write takes (INT64_MAX: ids are SQL integers);
  // above it Remember fails with kRange.
  static constexpr uint64_t kMaxEpisodeId = (uint64_t{1} << 63) - 1;
  uint64_t episode_id_limit() const {
    return pending_episodes_.empty() ? next_episode_id_ : pending_episodes_.back().id + 1;
  }
  // Reads the whole file again, verifying every page checksum, every record
  // and the counters of every commit, and compares it with the snapshot. Each
  // problem found is appended to *problems (none: the file is sound). The
  // Status is an error only when the check itself could not run.
  Status Check(std::vector<std::string>* problems);
  // Hybrid / BM25 / vector recall over committed episodes (recall.h). An open
  // transaction's own uncommitted episodes are not searched.
  Status Recall(const RecallQuery& q, std::vector<RecallHit>* hits, RecallPlan* plan);
  // The same with a metadata filter: `metadata_value` (JSON) at `metadata_key`
  // (a top-level key or a JSON pointer); an empty key means no filter.
  Status Recall(const RecallQuery& q, const std::string& metadata_key,
                const std::string& metadata_value, std::vector<RecallHit>* hits,
                RecallPlan* plan);

  // A read snapshot held across calls: after BeginRead() (which moves to the
  // latest commit) reads do not move forward until the matching EndRead(),
  // so a statement that reads rows lazily sees one state. Nestable. Cursors
  // hold them through a ReadPin (below).
  Status BeginRead() {
    AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
    read_pins_++;
    return Status::OK();
  }
  void EndRead() {
    if (read_pins_ > 0) read_pins_--;
  }

  // An exception (a failed allocation) escaped an operation half done: the
  // in-memory state may no longer match the file. Every later call on the
  // handle fails, and it writes nothing more, until it is closed and reopened.
  // Never throws.
  void Poison() noexcept;
  bool poisoned() const { return poisoned_; }
  // A write or sync failed: the handle refuses further writes until reopened.
  bool write_failed() const { return !sticky().ok(); }

  // Registers the application's embedding model for this handle (replacing
  // one registered before; null removes it). `space` must be the file's
  // vector space (else kMismatch) and the file's embedder must not be a
  // built-in one (else kMisuse); refused (kMisuse) while the open transaction
  // holds texts the current embedder has not embedded yet. On success the
  // Database owns *e (moved from); on failure *e is left to the caller.
  Status SetEmbedder(const VectorSpace& space, std::unique_ptr<Embedder>* e);
  bool has_embedder() const { return embedder_ != nullptr; }

  const VectorSpace& space() const { return space_; }
  // The text analysis the file records (text.tokenizer; without one, the
  // defaults of docs/format.md §5.4).
  index::TokenizerOptions RecordedTokenizer() const;
  const Options& options() const { return opts_; }
  const std::string& path() const { return path_; }
  // The page cache of this handle (its budget and counters).
  Pager& pager() { return log_->pager(); }

 private:
  friend class Salvage;  // recover.cc: writes what it salvages through the commit path
  friend class ChangeFeed;  // changes.cc: reads the log behind the snapshot
  Database(std::string path, Options opts);

  Status OpenFile();
  Status LoadSpace();
  VectorSpace RecordedSpace() const;
  Status WriteInitialMeta();
  // Brings the snapshot up to the last commit in the file. With `exclusive`
  // (write lock held) a torn tail is cut off.
  Status Refresh(bool exclusive);
  Status RefreshForRead();
  // One committed transaction's records, each with its place in the file:
  // decoded from the log (DecodeScanned), or as this handle's commit encoded
  // them (EncodePending). ApplyTxn takes both the same way.
  struct DecodedTxn {
    std::vector<std::pair<format::EpisodeRecord, RecordLoc>> episodes;
    std::vector<std::pair<format::BlockRecord, RecordLoc>> blocks;
    std::vector<std::pair<format::FactRecord, RecordLoc>> facts;
    std::vector<std::pair<std::string, std::string>> meta;
    std::vector<std::pair<std::string_view, int64_t>> graphs;  // image, page_no
    std::vector<format::TextRecord> texts;
    std::vector<format::ForgetRecord> forgets;
    format::CommitRecord commit;
    uint64_t checkpoint_start = 0;  // a checkpoint transaction: where it starts
    uint64_t end = 0;               // just past the commit page
    // This handle's own commit (TakePending): its episodes' graph nodes are
    // this handle's to insert (DeferInsertForCommit), so ApplyTxn looks for
    // none missing.
    bool own = false;
  };
  struct Counters {
    uint64_t episode = 1, fact = 1, block = 1;  // the next id of each
  };
  static Status DecodeScanned(ScannedTxn& txn, Counters next, DecodedTxn* out);
  Status ApplyScanned(ScannedTxn& txn);
  Status ApplyTxn(DecodedTxn& d);
  Status CheckWritable() const;
  Status AcquireWriteLock();
  void ReleaseWriteLock();
  Status FinishWrite(Status s);
  Status CommitPending();
  // Where each pending record goes, as EncodePending lays out the pages.
  struct Layout {
    std::vector<RecordLoc> episodes, blocks, facts;
    std::vector<format::TextRecord> texts;
    uint32_t pages = 0;  // record pages, the commit page not counted
    format::CommitRecord commit;
    PageRef last_episodes;  // the last episode page, for the cache (null: none)
  };
  Status PendingVectorsAsStored();
  std::string UnstorableMessage() const;
  Status EncodePending(std::string* buf, Layout* layout);
  // The text records (BM25 documents) the pending transaction writes.
  Status PendingTexts(std::vector<format::TextRecord>* texts);
  // The pending records, moved into the transaction `layout` placed them in.
  DecodedTxn TakePending(Layout& layout, uint64_t end);
  // Applies this handle's own transaction of `pages` pages (the commit page
  // included), just written, and moves the snapshot past it.
  Status Committed(DecodedTxn& d, uint64_t pages, const char* what);
  // Drops every pending write and every savepoint. A new kind of pending
  // write needs its mark in PendingMarks and its cut in RollbackTo
  // (savepoint.cc).
  void ClearPending();
  // The handle's sticky error: the log's (a failed write or sync), or why a
  // reopen after a VACUUM failed.
  const Status& sticky() const;
  void SetSticky(Status s);
  bool write_locked() const { return log_ && log_->write_locked(); }
  Env* env() const { return opts_.env ? opts_.env : Env::Posix(); }
  Status ReadPageRecords(uint64_t offset, std::shared_ptr<const std::string>* payload,
                         std::vector<std::string_view>* records);
  Status ReadRecord(const RecordLoc& loc, std::string_view* record, int64_t* page_no,
                    std::shared_ptr<const std::string>* keep);
  // ReadRecord of a committed episode's record; kNotFound for an unknown id.
  Status ReadEpisodeRecord(uint64_t id, std::string_view* record, int64_t* page_no,
                           std::shared_ptr<const std::string>* keep);
  Status ReadBlock(const RecordLoc& loc, format::BlockRecord* out);
  Status ReadFact(const RecordLoc& loc, format::FactRecord* out);
  // ---- checkpoints (checkpoint.cc)
  // Folds the snapshot into a checkpoint transaction, syncs it and points a
  // new superblock at it. REQUIRES: write lock, no pending writes.
  // Skipped (OK) when the file would end past max_end.
  Status WriteCheckpoint(uint64_t max_end = UINT64_MAX);
  // Writes a checkpoint when the policy of Options::checkpoint_bytes asks.
  Status MaybeCheckpoint(bool closing);
  void CheckpointAfterCommit();
  void AfterCommit();
  // Loads the checkpoint a superblock points at (open).
  Status LoadCheckpoint(const format::Superblock& sb);
  Status BuildCheckpointState(format::CheckpointState* out) const;
  Status ImportCheckpointState(const format::CheckpointState& st);
  int64_t Now() const;
  Status EnsureRecallIndex();
  // Embeds texts[i] into (*vectors[i]) with embedder_, kEmbedBatch at a time;
  // on failure no vector is changed.
  Status EmbedTexts(const std::vector<std::string_view>& texts,
                    const std::vector<std::vector<float>*>& vectors);
  // Embeds the pending episodes that wait for their vectors (pending_embed_).
  Status EmbedPending();
  uint64_t NextFactId() const;
  // ---- forgetting and compaction (lifecycle.cc)
  Status ApplyForget(const format::ForgetRecord& f);
  Status KeepCited(Selection* sel);
  Status MarkContextMatches(const RecallQuery& q, std::vector<RecallHit>* hits);
  // The episodes the pending forgets select (sorted), before they apply,
  // the transaction's own pending episodes among them.
  Status PendingForgottenEpisodes(std::vector<uint64_t>* ids);
  // The texts of the context of episode `r` (RecallIndex::ContextIds), newest
  // first: pending episodes of its session before it, then committed ones,
  // none of those in `skip` (sorted).
  Status ContextTexts(const format::EpisodeRecord& r, std::span<const uint64_t> skip,
                      std::vector<std::string>* out);
  Status ApplyRetention();
  // After a commit: ApplyRetention() when the policy is set and its due time
  // (retention_due_) has passed. Never the commit's error.
  void RetentionAfterCommit();
  void NoteRetentionDue(int64_t before, int64_t max_age_s);
  // The pending episode with this id, or null.
  const format::EpisodeRecord* FindPendingEpisode(uint64_t id) const;
  // Episodes forgotten since the file was last compacted (their records are
  // still in it).
  uint64_t ForgottenInFile() const;
  // The auto_vacuum policy at a close; *replaced says the file was compacted
  // (the handle is then left on the replaced file, which the close drops).
  Status MaybeVacuum(bool* replaced);
  // Vacuum with the write lock already held (released on return). The handle
  // moves to the copy, unless `closing`: a close needs nothing of it.
  Status VacuumLocked(const std::vector<std::string>& needles, ForgetReceipt* receipt,
                      bool closing = false);
  Status EnsureFactIndex();
  // The current (not expired) facts of (user, subject, predicate), pending
  // versions included.
  Status CurrentFacts(const std::string& user, const std::string& subject,
                      const std::string& predicate, std::vector<format::FactRecord>* out);
  void PutPendingFact(format::FactRecord f);
  // ---- savepoints (savepoint.cc)
  // PutPendingFact is about to replace pending_facts_[i] in place: keeps the
  // version it replaces when an open savepoint's rollback must restore it.
  void NoteFactReplaced(size_t i);
  // Forgets every savepoint (the transaction ends).
  void ClearSavepoints();
  // The current fact `id` of `user`, pending versions included (AssertFact's
  // `replaces`); kNotFound when there is none.
  Status CurrentFactById(const std::string& user, uint64_t id, format::FactRecord* out);
  Status CollectNeedles(const format::ForgetRecord& f, std::vector<std::string>* needles);
  Status AddNeedles(const Selection& sel, std::vector<std::string>* needles);
  Status SearchFile(const std::string& path, uint64_t size, const std::vector<std::string>& needles,
                    uint64_t* found);
  // Writes the live records and a checkpoint into a new file at `tmp`
  // (VACUUM's copy, of *bytes bytes). With `graph_in_checkpoint`, the copy's
  // commits carry no graph deltas and its checkpoint, which then must be
  // written, holds the graph (docs/format.md §6.6).
  Status WriteCompacted(const std::string& tmp, uint64_t size_before, bool graph_in_checkpoint,
                        uint64_t* bytes);
  void PlanCompaction(CompactionPlan* plan) const;
  Status OpenCompactionCopy(const std::string& tmp, std::unique_ptr<Database>* out);
  Status ReadCompactionBatch(const CompactionPlan& plan, size_t batch, RecallIndex::TakenBm25* texts,
                             CompactionBatch* out);
  Status StageCompactionBatch(Database* dst, const CompactionPlan& plan, size_t batch,
                              CompactionBatch* b);
  // The file at path_ is no longer the one this handle has open (a VACUUM
  // replaced it): reopens it and starts from its state.
  Status Reload();
  Status TryLockNoWait(bool* locked, bool refresh = true);
  Status RemoveVacuumLeftover();
  Status SupersededBytes(uint64_t* bytes);

  std::string path_;
  Options opts_;
  // The file: its log of transactions, the snapshot's place in it, the
  // write lock and the page cache.
  std::unique_ptr<Log> log_;
  uint64_t log_generation_ = 0;  // +1 whenever log_ is opened (a Reload opens another file)
  // Where the last change feed that read to its end stopped: a later feed
  // whose `since` is at or after `seq` starts there (changes.cc).
  struct FeedMark {
    uint64_t generation = 0;  // log_generation_ then (0: none)
    uint64_t seq = 0, end = 0;
    Counters next;
  };
  FeedMark feed_mark_;
  std::optional<size_t> pager_budget_;  // from Options::cache_size, kept across a Reload
  Status broken_;         // a reopen after a VACUUM failed (the handle is poisoned)
  Status write_refused_;  // set when the file's write_version is too new
  VectorSpace space_;
  Catalog catalog_;
  // The checkpoint's bm25 images, which recall_ reads where they lie (declared
  // first: destroyed after recall_).
  std::shared_ptr<MappedBytes> recall_bm25_owner_;
  // The worker thread of hybrid recalls (recall_threads=2), kept across the
  // recall_ of each Reload; declared first: destroyed (joined) after recall_.
  std::unique_ptr<LegWorker> recall_worker_;
  std::unique_ptr<RecallIndex> recall_;  // created once the vector space is known

  // The next ids as of the snapshot.
  uint64_t next_episode_id_ = 1;
  uint64_t next_fact_id_ = 1;
  uint64_t next_block_version_ = 1;

  // Writer state.
  bool explicit_txn_ = false;
  // The sticky error was set by the work after a commit (retention,
  // checkpoint) and no call has returned it yet: Close returns it then. Mutable because the
  // const CheckWritable is what returns it.
  mutable bool sticky_unreported_ = false;
  std::vector<format::EpisodeRecord> pending_episodes_;
  // Indexes into pending_episodes_ of the episodes whose vector embedder_
  // computes at the next batch (a transaction's texts are embedded together).
  std::vector<size_t> pending_embed_;
  std::unique_ptr<Embedder> embedder_;  // the application's model (SetEmbedder)
  std::vector<format::BlockRecord> pending_blocks_;
  std::vector<format::FactRecord> pending_facts_;
  format::MetaRecord pending_meta_;
  std::vector<format::ForgetRecord> pending_forgets_;
  ForgetReceipt forget_counts_;  // what the forgets applied by the last commits did
  bool collect_forgotten_ = false;             // CollectForgotten
  std::vector<std::string> forgotten_needles_;  // what the forgets since removed
  std::unique_ptr<FactIndex> fact_index_;  // built on first need (EnsureFactIndex)
  Counters counters_floor_;  // a VACUUM's copy commits the source's next ids (at least)
  // How commits write the graph: as deltas in each commit (the rule), or,
  // in a VACUUM's copy whose checkpoint will hold the graph, not at all --
  // built in memory by the commits, or adopted from the file copied.
  enum class GraphWrites { kDeltas, kInMemory, kAdopted };
  GraphWrites graph_writes_ = GraphWrites::kDeltas;
  // A VACUUM's copy whose texts are given (WriteCompacted): the text records
  // of its pending episodes, made from the BM25 indexes of the file it
  // copies, which it adopts once its transactions are written instead of
  // indexing these records itself.
  bool texts_given_ = false;
  std::vector<format::TextRecord> given_texts_;
  bool wrote_checkpoint_ = false;  // this handle wrote one (the auto_vacuum policy)
  // A VACUUM's copy: the file whose permissions and owner it is created with.
  std::string create_like_;
  int read_pins_ = 0;  // BeginRead() without EndRead()
  // Retention on commit: when retention_due_ (unix us) has passed, some
  // episode may have expired. Computed by ApplyRetention for the policy
  // retention_due_age_s_ (another policy: due at once); every episode applied
  // since may make it earlier. INT64_MIN: not known yet (due).
  int64_t retention_due_ = INT64_MIN;
  int64_t retention_due_age_s_ = 0;
  bool retention_due_keep_ = false;
  // The open savepoints, oldest first: what the transaction had pending at
  // each (savepoint.cc).
  struct PendingMarks {
    std::string name;
    size_t episodes = 0, blocks = 0, facts = 0, meta = 0, forgets = 0;
    size_t replaced_facts = 0;  // the size of replaced_facts_
    Counters floor;             // counters_floor_ (ReserveIds)
    bool began = false;         // this savepoint began the transaction
  };
  std::vector<PendingMarks> savepoints_;
  // Pending facts that PutPendingFact replaced in place while a savepoint was
  // open, with the version each replaced: (index into pending_facts_, record).
  std::vector<std::pair<size_t, format::FactRecord>> replaced_facts_;

  // Reads and verifies pages, and caches the decoded ones (bounded by bytes).
  Pager pager_;
  bool closed_ = false;
  bool poisoned_ = false;  // Poison()
  bool opened_ = false;  // Open() succeeded: only then may Close() write
};

// One Database::BeginRead() held until the pin is destroyed, reset or
// released: what a cursor of the C API or of SQL keeps while it reads rows
// lazily, so that it sees one snapshot. Movable, not copyable; an empty pin
// holds nothing.
// REQUIRES: the Database outlives the pin (or Detach() before it goes), and
// the pin is released under the same lock as the handle's other calls.
class ReadPin {
 public:
  ReadPin() = default;
  ~ReadPin() { Release(); }
  ReadPin(ReadPin&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  ReadPin& operator=(ReadPin&& o) noexcept {
    if (this != &o) {
      Release();
      db_ = o.db_;
      o.db_ = nullptr;
    }
    return *this;
  }
  ReadPin(const ReadPin&) = delete;
  ReadPin& operator=(const ReadPin&) = delete;

  // Releases what the pin held, then pins *db at its latest commit. On
  // failure the pin is empty and the Status says why.
  Status Begin(Database* db) {
    Release();
    AGENTMEM_RETURN_IF_ERROR(db->BeginRead());
    db_ = db;
    return Status::OK();
  }
  void Release() {
    if (db_) db_->EndRead();
    db_ = nullptr;
  }
  // Forgets the Database without EndRead(): for when it is already gone.
  void Detach() { db_ = nullptr; }
  bool held() const { return db_ != nullptr; }

 private:
  Database* db_ = nullptr;
};

}  // namespace agentmem::engine

// engine/memory/database.cc -- one open file: open and close, the snapshot, the
// write lock and transactions. A commit encodes the pending records
// (encode.cc), appends them to the log (storage/log.h, which states the
// commit protocol) and applies them (apply.cc).
//
//    state:   idle --Begin--> txn --write--> txn+lock --Commit--> idle
//               \--write (autocommit)--> lock --commit--> idle
//             any failed write/sync --> sticky (reads only) --reopen--> idle
#include "engine/memory/database.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "index/text/builtin_embedder.h"
#include "index/text/tokenizer.h"
#include "index/vector/metric.h"

namespace agentmem::engine {

using format::EpisodeRecord;

namespace {

format::MetaRecord SpaceMeta(const VectorSpace& s, const index::TokenizerOptions& tok) {
  format::MetaRecord m;
  m.entries = {{"vector.embedder", s.embedder},
               {"vector.dim", std::to_string(s.dim)},
               {"vector.metric", s.metric},
               {"text.tokenizer", index::TokenizerConfigString(tok)},
               {"created_by", std::string("agentmem ") + AGENTMEM_VERSION}};
  // Recorded only when not the default, so that a file of float32 vectors
  // is what a version 1 library writes.
  if (s.type != "f32") m.entries.emplace_back("vector.type", s.type);
  return m;
}


template <typename T>
const T* FindPending(const std::vector<T>& v, uint64_t T::*key, uint64_t id) {
  for (const T& r : v)
    if (r.*key == id) return &r;
  return nullptr;
}


}  // namespace

const EpisodeRecord* Database::FindPendingEpisode(uint64_t id) const {
  return FindPending(pending_episodes_, &EpisodeRecord::id, id);
}

Database::Database(std::string path, Options opts) : path_(std::move(path)), opts_(std::move(opts)) {}

Database::~Database() { Close().IgnoreError(); }

int64_t Database::Now() const {
  if (opts_.clock) return opts_.clock();
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

Status Database::Open(const std::string& path, const Options& opts,
                      std::unique_ptr<Database>* out) {
  out->reset();
  std::unique_ptr<Database> db(new Database(path, opts));
  AGENTMEM_RETURN_IF_ERROR(db->OpenFile());
  db->opened_ = true;  // from here on, Close() may write a superblock
  *out = std::move(db);
  return Status::OK();
}

Status Database::OpenFile() {
  const LogOptions lo{opts_.env, opts_.read_only, opts_.sync};
  if (!env()->Exists(path_)) {
    if (opts_.read_only || !opts_.create) {
      return Status(kCantOpen, "unable to open " + path_ + ": no such file");
    }
    NewLog n;
    n.salt = opts_.salt;
    n.page_size = opts_.page_size;
    n.created_at = Now();
    const VectorSpace space = NewFileSpace(opts_);
    format::EncodeMeta(SpaceMeta(space, opts_.tokenizer), &n.meta);
    if (space.type != "f32") n.version = format::kVectorTypeVersion;
    n.create_like = create_like_;
    AGENTMEM_RETURN_IF_ERROR(Log::Create(path_, lo, n));
  }
  AGENTMEM_RETURN_IF_ERROR(Log::Open(path_, lo, &log_));
  log_generation_++;
  if (!pager_budget_) {  // first open: the option (kept across a Reload)
    const int64_t n = opts_.cache_size;
    pager_budget_ = n < 0 ? static_cast<size_t>(-n) * 1024 : static_cast<size_t>(n) * log_->header().page_size;
  }
  log_->pager().set_budget(*pager_budget_);
  const format::Superblock sb = log_->superblock();
  if (sb.checkpoint != 0) AGENTMEM_RETURN_IF_ERROR(LoadCheckpoint(sb));
  if (log_->header().write_version > format::kWriteVersion && !opts_.read_only) {
    write_refused_ = StatusF(kReadOnlyFile,
                             "file format write version %u is newer than this library writes "
                             "(%u): the file was opened read-only",
                             log_->header().write_version, format::kWriteVersion);
  }
  // The vectors of the last transactions that no delta gave a node yet stay
  // pending (searched exactly): the graph gets them when it next changes,
  // as their writer inserted them (docs/format.md §5.6).
  AGENTMEM_RETURN_IF_ERROR(Refresh(false));
  if (log_->seq() == 0 && !opts_.read_only && write_refused_.ok()) {
    AGENTMEM_RETURN_IF_ERROR(WriteInitialMeta());
  }
  AGENTMEM_RETURN_IF_ERROR(LoadSpace());
  if (!opts_.read_only && write_refused_.ok() && create_like_.empty()) {
    AGENTMEM_RETURN_IF_ERROR(RemoveVacuumLeftover());
  }
  return Status::OK();
}

// A VACUUM writes its copy at path-vacuum while it holds the write lock of
// the file at path, and renames it over the file before letting go. So the
// copy is nobody's once this handle holds that lock on the file still at
// the path (TryLockNoWait checks): then it was left by a VACUUM that was
// killed, and goes. When another handle holds the lock it may be that
// VACUUM at work: the copy stays, for a later open.
Status Database::RemoveVacuumLeftover() {
  const std::string copy = path_ + "-vacuum";
  if (!env()->Exists(copy)) return Status::OK();
  bool locked = false;
  AGENTMEM_RETURN_IF_ERROR(TryLockNoWait(&locked, /*refresh=*/false));
  if (!locked) return Status::OK();
  // Not an error of the open: a copy that cannot be removed stays, and is
  // replaced by the next VACUUM.
  if (env()->Exists(copy)) env()->Delete(copy).IgnoreError();
  ReleaseWriteLock();
  return Status::OK();
}

// A file whose first transaction never landed (it can only come from a
// version that created files non-atomically, or from a copy cut short) gets
// its settings on the first writable open.
Status Database::WriteInitialMeta() {
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  if (log_->seq() == 0) pending_meta_ = SpaceMeta(NewFileSpace(opts_), opts_.tokenizer);
  return FinishWrite(Status::OK());  // which commits
}

// The vector space the file records (defaults for what it does not).
VectorSpace Database::RecordedSpace() const {
  VectorSpace s;
  if (const std::string* v = catalog_.Meta("vector.embedder")) s.embedder = *v;
  if (const std::string* v = catalog_.Meta("vector.metric")) s.metric = *v;
  if (const std::string* v = catalog_.Meta("vector.type")) s.type = *v;
  if (const std::string* v = catalog_.Meta("vector.dim")) {
    s.dim = static_cast<uint32_t>(std::strtoul(v->c_str(), nullptr, 10));
  }
  return s;
}

Status Database::LoadSpace() {
  VectorSpace s = RecordedSpace();
  if (!SpaceMatches(opts_, s)) {
    return StatusF(kMismatch,
                   "vector space mismatch: the file records %s/%u/%s%s, the open asked for %s",
                   s.embedder.c_str(), s.dim, s.metric.c_str(), s.type == "f32" ? "" : ("/" + s.type).c_str(),
                   AskedSpace(opts_).c_str());
  }
  space_ = s;
  if (opts_.tokenizer_given) {
    const std::string* recorded = catalog_.Meta("text.tokenizer");
    std::string wanted = index::TokenizerConfigString(opts_.tokenizer);
    std::string have = recorded ? *recorded : index::TokenizerConfigString({});
    if (have != wanted) {
      return StatusF(kMismatch, "tokenizer mismatch: the file records \"%s\", the open asked for \"%s\"",
                     have.c_str(), wanted.c_str());
    }
  }
  return EnsureRecallIndex();
}

index::TokenizerOptions Database::RecordedTokenizer() const {
  const std::string* v = catalog_.Meta("text.tokenizer");
  if (v == nullptr) return index::TokenizerOptions{};
  auto parsed = index::ParseTokenizerConfig(*v);
  return parsed.ok() ? parsed.value() : index::TokenizerOptions{};
}

// The recall index needs the vector space and tokenizer, which the file's
// first transaction records; it is created when the first episode or the
// end of open needs it.
Status Database::EnsureRecallIndex() {
  if (recall_) return Status::OK();
  VectorSpace s = RecordedSpace();
  auto metric = index::ParseMetric(s.metric);
  if (!metric.ok() || s.dim == 0 || s.dim > 65536) {
    return StatusF(kCorrupt, "file settings: unusable vector space %s/%u/%s", s.embedder.c_str(),
                   s.dim, s.metric.c_str());
  }
  format::VectorType stored;
  if (!StoredVectorType(s.type, &stored)) {
    return StatusF(kFormatVersion, "file stores vectors as \"%s\", unknown to this version",
                   s.type.c_str());
  }
  index::TokenizerOptions tok;
  if (const std::string* v = catalog_.Meta("text.tokenizer")) {
    auto parsed = index::ParseTokenizerConfig(*v);
    if (!parsed.ok()) {
      return StatusF(kFormatVersion, "file uses tokenizer \"%s\", unknown to this version",
                     v->c_str());
    }
    tok = parsed.value();
  }
  recall_ = std::make_unique<RecallIndex>(tok, s.dim, metric.value(),
                                          index::BuiltinEmbedder::For(s.embedder, s.dim));
  recall_->set_similarity_floor(RecallIndex::DefaultSimilarityFloor(s.embedder, metric.value()));
  recall_->set_space_embedder(s.embedder);
  if (opts_.recall_threads > 1) {
    if (!recall_worker_) recall_worker_ = std::make_unique<LegWorker>();
    recall_->set_leg_worker(recall_worker_.get());
  }
  return Status::OK();
}

Status Database::Close() {
  if (closed_) return Status::OK();
  closed_ = true;
  // An open transaction is rolled back (only one holds pending records:
  // an autocommit write clears its own).
  ClearPending();
  explicit_txn_ = false;
  Status s;
  // Opened and not poisoned: the log is open (a failed Reload poisons).
  if (opened_ && !opts_.read_only && write_refused_.ok() && sticky().ok() && !poisoned_ &&
      opts_.sync != SyncMode::kOff) {
    s = ApplyRetention();
    bool replaced = false;
    if (s.ok()) s = MaybeVacuum(&replaced);
    // A checkpoint that cannot be written (a full disk) still lets the
    // superblock vouch for the commits, after syncing them (sync=normal) --
    // unless a sync failed, which is never retried. A compacted file has
    // both already, and this handle is still on the file it replaced.
    Status checkpoint = s.ok() && !replaced ? MaybeCheckpoint(true) : Status::OK();
    if (s.ok() && !replaced && sticky().ok() && log_->end() > log_->superblock().durable_through) {
      s = log_->WriteSuperblock();
    }
    if (s.ok()) s = checkpoint;
  }
  if (s.ok() && sticky_unreported_) {
    s = Status(kIoErrSticky, "the work after the last commit (retention or checkpoint) failed (" +
                                 sticky().message() + "); with sync=normal the last commits may not be durable");
  }
  ReleaseWriteLock();
  log_.reset();
  embedder_.reset();  // the application's destroy callback runs here
  return s;
}

const Status& Database::sticky() const {
  return log_ && !log_->sticky().ok() ? log_->sticky() : broken_;
}

void Database::SetSticky(Status s) {
  if (log_) {
    log_->SetSticky(std::move(s));
  } else {
    broken_ = std::move(s);
  }
}

// Takes the write lock if it is free, without waiting (the work of a close),
// and with `refresh` moves to the last commit (cutting a torn tail).
// *locked stays false when another handle holds it, or when the file was
// replaced by a VACUUM: the new file's handles do that work then.
Status Database::TryLockNoWait(bool* locked, bool refresh) {
  *locked = log_->write_locked();
  if (*locked) return Status::OK();
  bool replaced = false;
  AGENTMEM_RETURN_IF_ERROR(log_->TryLock(locked, &replaced));
  return *locked && refresh ? Refresh(true) : Status::OK();
}

Status Database::Refresh(bool exclusive) {
  return log_->Refresh(exclusive, [this](ScannedTxn& t) { return ApplyScanned(t); });
}

void Database::Poison() noexcept {
  poisoned_ = true;
  try {
    Status why(kNoMem, "an allocation failed in the middle of an operation; the handle is "
                       "unusable until it is closed and reopened (the file is unaffected)");
    if (sticky().ok()) SetSticky(why);
    if (recall_) recall_->Break(why);
  } catch (...) {
    // Still poisoned: poisoned_ alone refuses every later call.
  }
}

Status Database::RefreshForRead() {
  if (closed_) return Status(kMisuse, "database is closed");
  if (poisoned_) return sticky().ok() ? Status(kNoMem, "handle unusable after a failed allocation") : sticky();
  // Keep the transaction's snapshot, or a statement's (BeginRead).
  if (explicit_txn_ || write_locked() || read_pins_ > 0) return Status::OK();
  if (log_->Replaced()) return Reload();
  bool more = false;
  AGENTMEM_RETURN_IF_ERROR(log_->MayHaveMore(&more));
  return more ? Refresh(false) : Status::OK();
}

Status Database::CheckWritable() const {
  if (closed_) return Status(kMisuse, "database is closed");
  if (poisoned_) return sticky().ok() ? Status(kNoMem, "handle unusable after a failed allocation") : sticky();
  if (opts_.read_only) return Status(kReadOnlyFile, "attempt to write a database opened read-only");
  if (!write_refused_.ok()) return write_refused_;
  if (!sticky().ok()) {
    sticky_unreported_ = false;
    return Status(kIoErrSticky, "an earlier write or sync failed (" + sticky().message() +
                                    "); close and reopen the database");
  }
  return Status::OK();
}

Status Database::AcquireWriteLock() {
  if (write_locked()) return Status::OK();
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + std::chrono::milliseconds(opts_.busy_timeout_ms);
  int delay_us = 100;
  for (;;) {
    bool acquired = false, replaced = false;
    AGENTMEM_RETURN_IF_ERROR(log_->TryLock(&acquired, &replaced));
    if (acquired) break;
    if (replaced) {
      // A VACUUM replaced the file while we waited: its lock is the old
      // file's. Move to the new file and take its lock instead. No pending
      // write can be lost here: a handle with one holds the lock.
      AGENTMEM_RETURN_IF_ERROR(Reload());
      continue;
    }
    if (clock::now() >= deadline) {
      return StatusF(kBusyTimeout,
                     "database is locked: another writer holds the write lock (waited %d ms)",
                     opts_.busy_timeout_ms);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    delay_us = std::min(delay_us * 2, 5000);
  }
  Status s = Refresh(true);
  if (s.ok()) s = log_->SyncBeforeWrite();
  if (!s.ok()) ReleaseWriteLock();
  return s;
}

void Database::ReleaseWriteLock() {
  if (log_) log_->Unlock();
}

Status Database::Begin() {
  if (closed_) return Status(kMisuse, "database is closed");
  if (explicit_txn_) return Status(kMisuse, "cannot start a transaction within a transaction");
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  explicit_txn_ = true;
  return Status::OK();
}

Status Database::Commit() {
  if (closed_) return Status(kMisuse, "database is closed");
  if (!explicit_txn_) return Status(kMisuse, "cannot commit: no transaction is active");
  explicit_txn_ = false;
  Status s = write_locked() ? CommitPending() : Status::OK();
  ClearPending();
  if (s.ok() && write_locked()) AfterCommit();
  ReleaseWriteLock();
  return s;
}

Status Database::Rollback() {
  if (closed_) return Status(kMisuse, "database is closed");
  if (!explicit_txn_) return Status(kMisuse, "cannot roll back: no transaction is active");
  explicit_txn_ = false;
  ClearPending();
  counters_floor_ = Counters{};  // a ReserveIds of the transaction
  ReleaseWriteLock();
  return Status::OK();
}

// Ends an autocommit write: commits on success, discards on failure.
Status Database::FinishWrite(Status s) {
  if (explicit_txn_) return s;  // the transaction decides at Commit()
  if (s.ok()) s = CommitPending();
  ClearPending();
  if (s.ok()) AfterCommit();
  ReleaseWriteLock();
  return s;
}

// A writer that stays open checkpoints too, once the log after the last
// checkpoint outgrows 16 x checkpoint_bytes and that checkpoint (the policy of
// MaybeCheckpoint; docs/architecture.md, "Checkpoints"), so that an open after
// a crash, and every reader's open, folds a bounded log. The commit is durable
// before this runs, so nothing here is the commit's error: a checkpoint that
// cannot be written (a full disk) leaves the log to be scanned as before and
// the handle as it was, and a failed sync stays the handle's error
// (WriteCheckpoint makes it sticky).
void Database::CheckpointAfterCommit() { MaybeCheckpoint(false).IgnoreError(); }

// The work after a commit. Its failure is not the commit's, but a failed
// write or sync there leaves the sticky error set, which the next write returns, or
// Close if no write comes: in sync=normal that sync was the commits' too.
void Database::AfterCommit() {
  const bool was_ok = sticky().ok();
  RetentionAfterCommit();
  CheckpointAfterCommit();
  if (was_ok && !sticky().ok()) sticky_unreported_ = true;
}

void Database::ClearPending() {
  pending_embed_.clear();
  pending_forgets_.clear();
  pending_episodes_.clear();
  pending_blocks_.clear();
  pending_facts_.clear();
  pending_meta_.entries.clear();
  given_texts_.clear();
  ClearSavepoints();
}

Status Database::CommitPending() {
  if (pending_episodes_.empty() && pending_blocks_.empty() && pending_facts_.empty() &&
      pending_meta_.entries.empty() && pending_forgets_.empty()) {
    return Status::OK();
  }
  AGENTMEM_RETURN_IF_ERROR(EmbedPending());  // before a byte is written
  std::string buf;
  Layout layout;
  AGENTMEM_RETURN_IF_ERROR(EncodePending(&buf, &layout));
  Status s = log_->Append(buf);
  if (!s.ok()) {
    if (recall_) recall_->Break(s);  // its graph holds the in-doubt inserts
    return s;
  }
  // The next commit's context texts read the latest episodes: the page
  // goes into the cache as written, not read back.
  if (layout.last_episodes) log_->pager().Keep(std::move(layout.last_episodes));
  // The bytes are durable per the sync mode: move the snapshot.
  DecodedTxn d = TakePending(layout, log_->end() + buf.size());
  return Committed(d, layout.pages + 1, "commit");
}
}  // namespace agentmem::engine

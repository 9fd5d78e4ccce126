// engine/database.cc -- snapshots, transactions and the commit protocol.
//
// The commit protocol (docs/architecture.md keeps the same numbered list):
//  (1) Only the write-lock holder appends. It takes the lock, then brings its
//      snapshot to the last commit in the file and cuts off any torn tail.
//  (2) A transaction's records are encoded into record pages, followed by one
//      commit page, and appended with a single write at the end of the last
//      commit. Nothing already written is ever overwritten.
//  (3) The commit page records txn_start, page_count, commit_seq (previous+1)
//      and durable_through (every byte before it was synced before this write).
//  (4) sync=FULL: one fdatasync after the write; the commit is acknowledged
//      only after it returns. sync=NORMAL: synced at close; OFF: never.
//      A clean close (full or normal) then writes the next superblock, which
//      vouches that every byte up to the last commit is synced, and syncs.
//  (5) The in-memory snapshot moves to the new commit only after (4).
//  (6) A failed write or sync makes the handle's error sticky: no further
//      writes until reopen; fsync is never retried (the transaction is in
//      doubt: after reopen it is wholly present or wholly absent).
//  (7) Before the first write under a newly taken lock the file is synced
//      once, so that durable_through never vouches for bytes another handle
//      wrote but did not sync.
//
//    state:   idle --Begin--> txn --write--> txn+lock --Commit--> idle
//               \--write (autocommit)--> lock --commit--> idle
//             any failed write/sync --> sticky (reads only) --reopen--> idle
#include "engine/database.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <unordered_set>
#include <random>
#include <thread>

#include "engine/json_reader.h"
#include "engine/validate.h"
#include "index/text/builtin_embedder.h"
#include "index/text/tokenizer.h"
#include "index/vector/metric.h"
#include "format/page.h"

namespace agentmem::engine {

using format::BlockRecord;
using format::EpisodeRecord;
using format::FactRecord;
using format::PageType;

namespace {

uint64_t NewSalt() {
  std::random_device rd;
  uint64_t s = 0;
  while (s == 0) s = (uint64_t{rd()} << 32) ^ rd();
  return s;
}

format::MetaRecord SpaceMeta(const VectorSpace& s, const index::TokenizerOptions& tok) {
  format::MetaRecord m;
  m.entries = {{"vector.embedder", s.embedder},
               {"vector.dim", std::to_string(s.dim)},
               {"vector.metric", s.metric},
               {"text.tokenizer", index::TokenizerConfigString(tok)},
               {"created_by", std::string("agentmem ") + AGENTMEM_VERSION}};
  return m;
}

// A record of the open transaction, found by its id (or null).
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

Database::Database(std::string path, Options opts) : path_(std::move(path)), opts_(std::move(opts)) {
  env_ = opts_.env ? opts_.env : Env::Posix();
}

Database::~Database() { Close().IgnoreError(); }

int64_t Database::Now() const {
  if (opts_.clock) return opts_.clock();
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

// ------------------------------------------------------------------ open

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
  if (!env_->Exists(path_)) {
    if (opts_.read_only || !opts_.create) {
      return Status(kCantOpen, "unable to open " + path_ + ": no such file");
    }
    // The new file holds its header, superblocks and a first transaction that
    // records the vector space, created atomically (env/env.h).
    header_.salt = opts_.salt ? opts_.salt : NewSalt();
    header_.page_size = opts_.page_size;
    header_.created_at = Now();
    std::string init = format::EncodeFileHeader(header_);
    init.resize(format::kFirstPageOffset, '\0');
    std::string meta;
    format::EncodeMeta(SpaceMeta(NewFileSpace(opts_), opts_.tokenizer), &meta);
    std::string payload;
    format::AppendRecord(meta, &payload);
    init += format::EncodePage(PageType::kMeta, init.size(), header_.salt, 1, payload, false);
    format::CommitRecord c;
    c.commit_seq = 1;
    c.txn_start = format::kFirstPageOffset;
    c.durable_through = format::kFirstPageOffset;
    c.page_count = 1;
    c.commit_ts = header_.created_at;
    init += format::EncodePage(PageType::kCommit, init.size(), header_.salt, 1,
                               format::EncodeCommit(c), false);
    // Superblock A vouches for every byte of the new file (it is created
    // durably, env.h); B starts at generation 0 with nothing vouched for.
    format::Superblock sb;
    sb.salt = header_.salt;
    sb.generation = 0;
    init.replace(format::kSuperblockOffset[1], format::kSuperblockSize, format::EncodeSuperblock(sb));
    sb.generation = 1;
    sb.durable_through = init.size();
    init.replace(format::kSuperblockOffset[0], format::kSuperblockSize, format::EncodeSuperblock(sb));
    Status s = create_like_.empty() ? env_->CreateAtomic(path_, init)
                                    : env_->CreateAtomicLike(path_, init, create_like_);
    if (!s.ok() && s.code() != kCantOpenExists) return s;
  }
  AGENTMEM_RETURN_IF_ERROR(env_->Open(path_, OpenMode{opts_.read_only}, &file_));
  file_id_ = file_->Identity();

  std::string head;
  AGENTMEM_RETURN_IF_ERROR(file_->ReadAt(0, format::kFirstPageOffset, &head));
  if (head.empty()) return Status(kNotADb, "file is not an agentmem database: " + path_ + " is empty");
  AGENTMEM_RETURN_IF_ERROR(format::DecodeFileHeader(head, &header_));
  pager_.Reset(file_.get(), header_.salt);
  if (head.size() < format::kFirstPageOffset) {
    return AGENTMEM_CORRUPTION(kCorruptHeader, 0, "file is cut short inside its header (%zu bytes)",
                               head.size());
  }
  // The newest valid superblock says where the scan starts.
  std::optional<format::Superblock> best;
  Status last_error;
  for (uint64_t off : format::kSuperblockOffset) {
    format::Superblock sb;
    Status s = format::DecodeSuperblock(std::string_view(head).substr(off, format::kSuperblockSize),
                                        header_.salt, &sb);
    if (s.ok() && (!best || sb.generation > best->generation)) best = sb;
    if (!s.ok()) last_error = s;
  }
  if (!best) {
    return AGENTMEM_CORRUPTION(kCorruptSuperblock, 0, "both superblocks are invalid (%s)",
                               last_error.message().c_str());
  }
  end_ = best->scan_from;
  seq_ = best->commit_seq;
  superblock_ = *best;
  synced_through_ = best->durable_through;
  if (best->checkpoint != 0) AGENTMEM_RETURN_IF_ERROR(LoadCheckpoint(*best));
  if (header_.write_version > format::kWriteVersion && !opts_.read_only) {
    write_refused_ = StatusF(kReadOnlyFile,
                             "file format write version %u is newer than this library writes "
                             "(%u): the file was opened read-only",
                             header_.write_version, format::kWriteVersion);
  }
  AGENTMEM_RETURN_IF_ERROR(Refresh(false));
  if (seq_ == 0 && !opts_.read_only && write_refused_.ok()) {
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
  if (!env_->Exists(copy)) return Status::OK();
  bool locked = false;
  AGENTMEM_RETURN_IF_ERROR(TryLockNoWait(&locked, /*refresh=*/false));
  if (!locked) return Status::OK();
  // Not an error of the open: a copy that cannot be removed stays, and is
  // replaced by the next VACUUM.
  if (env_->Exists(copy)) env_->Delete(copy).IgnoreError();
  ReleaseWriteLock();
  return Status::OK();
}

// A file whose first transaction never landed (it can only come from a
// version that created files non-atomically, or from a copy cut short) gets
// its settings on the first writable open.
Status Database::WriteInitialMeta() {
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  if (seq_ == 0) pending_meta_ = SpaceMeta(NewFileSpace(opts_), opts_.tokenizer);
  return FinishWrite(Status::OK());  // which commits
}

// The vector space the file records (defaults for what it does not).
VectorSpace Database::RecordedSpace() const {
  VectorSpace s;
  if (const std::string* v = catalog_.Meta("vector.embedder")) s.embedder = *v;
  if (const std::string* v = catalog_.Meta("vector.metric")) s.metric = *v;
  if (const std::string* v = catalog_.Meta("vector.dim")) {
    s.dim = static_cast<uint32_t>(std::strtoul(v->c_str(), nullptr, 10));
  }
  return s;
}

Status Database::LoadSpace() {
  VectorSpace s = RecordedSpace();
  if (!SpaceMatches(opts_, s)) {
    return StatusF(kMismatch,
                   "vector space mismatch: the file records %s/%u/%s, the open asked for %s",
                   s.embedder.c_str(), s.dim, s.metric.c_str(), AskedSpace(opts_).c_str());
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
  return Status::OK();
}

// ------------------------------------------------------------------ the application's embedder

Status Database::SetEmbedder(const VectorSpace& space, std::unique_ptr<Embedder>* e) {
  if (closed_) return Status(kMisuse, "database is closed");
  AGENTMEM_RETURN_IF_ERROR(EnsureRecallIndex());
  if (!(space == space_)) {
    return StatusF(kMismatch,
                   "vector space mismatch: the file records %s/%u/%s, the embedder is %s/%u/%s",
                   space_.embedder.c_str(), space_.dim, space_.metric.c_str(),
                   space.embedder.c_str(), space.dim, space.metric.c_str());
  }
  if (recall_->builtin_embedder()) {
    return StatusF(kMisuse,
                   "the file's embedder %s is built into agentmem; register an embedder on a "
                   "file created with embedder=NAME for your model",
                   space_.embedder.c_str());
  }
  if (!pending_embed_.empty()) {
    return Status(kMisuse,
                  "the open transaction holds texts the current embedder has not embedded "
                  "yet; commit or roll back before replacing it");
  }
  embedder_ = std::move(*e);  // the one replaced is destroyed here
  return Status::OK();
}

Status Database::EmbedTexts(const std::vector<std::string_view>& texts,
                            const std::vector<std::vector<float>*>& vectors) {
  const size_t dim = space_.dim;
  std::vector<float> out(texts.size() * dim);
  for (size_t at = 0; at < texts.size(); at += Embedder::kEmbedBatch) {
    size_t n = std::min(Embedder::kEmbedBatch, texts.size() - at);
    std::vector<std::string_view> batch(texts.begin() + static_cast<long>(at),
                                        texts.begin() + static_cast<long>(at + n));
    float* dst = out.data() + at * dim;
    Status s = embedder_->Embed(batch, dst);
    if (!s.ok()) {
      return Status(s.code(), "embedder " + space_.embedder + " failed: " + s.message());
    }
    for (size_t i = 0; i < n * dim; i++) {
      if (!std::isfinite(dst[i])) {
        return StatusF(kRange, "embedder %s returned a NaN or infinite value (text %zu of %zu)",
                       space_.embedder.c_str(), i / dim + 1, n);
      }
    }
  }
  for (size_t i = 0; i < vectors.size(); i++) {
    vectors[i]->assign(out.begin() + static_cast<long>(i * dim),
                       out.begin() + static_cast<long>((i + 1) * dim));
  }
  return Status::OK();
}

Status Database::EmbedPending() {
  if (pending_embed_.empty()) return Status::OK();
  if (!embedder_) return Status(kInternal, "episodes wait for an embedder that is gone");
  std::vector<std::string_view> texts;
  std::vector<std::vector<float>*> vectors;
  for (size_t i : pending_embed_) {
    texts.push_back(pending_episodes_[i].text);
    vectors.push_back(&pending_episodes_[i].vector);
  }
  AGENTMEM_RETURN_IF_ERROR(EmbedTexts(texts, vectors));
  pending_embed_.clear();
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
  // Opened and not poisoned: file_ is open (a failed Reload poisons).
  if (opened_ && !opts_.read_only && write_refused_.ok() && sticky_.ok() && !poisoned_ &&
      opts_.sync != SyncMode::kOff) {
    s = ApplyRetention();
    if (s.ok()) s = MaybeVacuum();
    // A checkpoint that cannot be written (a full disk) still lets the
    // superblock vouch for the commits, after syncing them (sync=normal) --
    // unless a sync failed, which is never retried.
    Status checkpoint = s.ok() ? MaybeCheckpoint(true) : Status::OK();
    if (s.ok() && sticky_.ok() && end_ > superblock_.durable_through) s = WriteSuperblock();
    if (s.ok()) s = checkpoint;
  }
  if (s.ok() && sticky_unreported_) {
    s = Status(kIoErrSticky, "the work after the last commit (retention or checkpoint) failed (" +
                                 sticky_.message() + "); with sync=normal the last commits may not be durable");
  }
  ReleaseWriteLock();
  pager_.Reset(nullptr, 0);
  file_.reset();
  embedder_.reset();  // the application's destroy callback runs here
  return s;
}

// Records in the next superblock slot that every byte before end_ is synced,
// so that a later open can tell damage from a torn tail all the way to the
// last commit. Skipped (not an error) when another handle holds the lock.
// Takes the write lock if it is free, without waiting (the work of a close),
// and with `refresh` moves to the last commit (cutting a torn tail).
// *locked stays false when another handle holds it, or when the file was
// replaced by a VACUUM: the new file's handles do that work then.
Status Database::TryLockNoWait(bool* locked, bool refresh) {
  *locked = write_locked_;
  if (*locked) return Status::OK();
  bool acquired = false;
  AGENTMEM_RETURN_IF_ERROR(file_->TryLockWrite(&acquired));
  if (!acquired) return Status::OK();
  if (FileReplaced()) {
    file_->UnlockWrite().IgnoreError();
    return Status::OK();
  }
  write_locked_ = true;
  *locked = true;
  return refresh ? Refresh(true) : Status::OK();
}

Status Database::WriteSuperblock(uint64_t checkpoint) {
  bool acquired = false;
  AGENTMEM_RETURN_IF_ERROR(TryLockNoWait(&acquired, /*refresh=*/false));
  if (!acquired) return Status::OK();
  if (synced_through_ < end_) AGENTMEM_RETURN_IF_ERROR(Sync());
  synced_through_ = end_;
  std::string head;
  AGENTMEM_RETURN_IF_ERROR(file_->ReadAt(0, format::kFirstPageOffset, &head));
  format::Superblock newest;
  int newest_slot = -1;
  for (int slot = 0; slot < 2; slot++) {
    format::Superblock sb;
    std::string_view bytes = std::string_view(head).substr(
        std::min<size_t>(head.size(), format::kSuperblockOffset[slot]), format::kSuperblockSize);
    if (format::DecodeSuperblock(bytes, header_.salt, &sb).ok() &&
        (newest_slot < 0 || sb.generation > newest.generation)) {
      newest = sb;
      newest_slot = slot;
    }
  }
  format::Superblock next = newest_slot < 0 ? format::Superblock{} : newest;
  next.generation = newest_slot < 0 ? 1 : newest.generation + 1;
  next.salt = header_.salt;
  next.durable_through = std::max(end_, next.durable_through);  // end_ just synced
  if (checkpoint != 0) {
    next.checkpoint = checkpoint;
    next.scan_from = end_;
    next.commit_seq = seq_;
  }
  int slot = newest_slot == 0 ? 1 : 0;
  Status s = file_->WriteAt(format::kSuperblockOffset[slot], format::EncodeSuperblock(next));
  if (!s.ok()) {
    sticky_ = s;
    return s;
  }
  AGENTMEM_RETURN_IF_ERROR(Sync());
  superblock_ = next;
  return Status::OK();
}

// ------------------------------------------------------------------ snapshots

// Phase 1 of applying a scanned transaction: decode and check every record,
// changing nothing. Counters must run on from the previous commit's.
Status Database::DecodeScanned(ScannedTxn& txn, Counters next, DecodedTxn* out) {
  uint64_t next_episode = next.episode, next_fact = next.fact, next_block = next.block;
  std::vector<std::string_view> records;
  for (DecodedPage& page : txn.pages) {
    int64_t page_no = static_cast<int64_t>(page.header.page_no);
    // Derived state as of the previous commit, checked by the scan; only an
    // open from the superblock that points at it reads it (checkpoint.cc).
    if (page.header.type == static_cast<uint8_t>(PageType::kCheckpoint)) continue;
    AGENTMEM_RETURN_IF_ERROR(
        format::SplitRecords(page.payload, page.header.record_count, page_no, &records));
    auto out_of_order = [page_no](const char* what) {
      return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld: %s out of order",
                                 static_cast<long long>(page_no), what);
    };
    for (uint32_t slot = 0; slot < records.size(); slot++) {
      RecordLoc loc{page.offset, slot};
      switch (static_cast<PageType>(page.header.type)) {
        case PageType::kEpisodes: {
          out->episodes.emplace_back();
          AGENTMEM_RETURN_IF_ERROR(format::DecodeEpisode(records[slot], page_no, &out->episodes.back().first));
          out->episodes.back().second = loc;
          // Ids increase; an import may skip some (docs/format.md §5.1).
          if (out->episodes.back().first.id < next_episode) return out_of_order("episode id");
          next_episode = out->episodes.back().first.id + 1;
          break;
        }
        case PageType::kBlocks: {
          out->blocks.emplace_back();
          AGENTMEM_RETURN_IF_ERROR(format::DecodeBlock(records[slot], page_no, &out->blocks.back().first));
          out->blocks.back().second = loc;
          if (out->blocks.back().first.version < next_block) return out_of_order("block version");
          next_block = out->blocks.back().first.version + 1;
          break;
        }
        case PageType::kFacts: {
          out->facts.emplace_back();
          AGENTMEM_RETURN_IF_ERROR(format::DecodeFact(records[slot], page_no, &out->facts.back().first));
          out->facts.back().second = loc;
          // A new fact takes an id above every one so far; a known id is a
          // new version of that fact (docs/format.md §5.3).
          const uint64_t fact_id = out->facts.back().first.id;
          if (fact_id == 0) return out_of_order("fact id");
          if (fact_id >= next_fact) next_fact = fact_id + 1;
          break;
        }
        case PageType::kMeta: {
          format::MetaRecord m;
          AGENTMEM_RETURN_IF_ERROR(format::DecodeMeta(records[slot], page_no, &m));
          for (auto& e : m.entries) out->meta.push_back(std::move(e));
          break;
        }
        case PageType::kGraph:
          out->graphs.push_back({records[slot], page_no});
          break;
        case PageType::kForget:
          out->forgets.emplace_back();
          AGENTMEM_RETURN_IF_ERROR(format::DecodeForget(records[slot], page_no, &out->forgets.back()));
          break;
        case PageType::kText:
          out->texts.emplace_back();
          AGENTMEM_RETURN_IF_ERROR(format::DecodeText(records[slot], page_no, &out->texts.back()));
          break;
        default:
          // Not reached: the scan ends a transaction at its commit page,
          // checkpoint pages are skipped above and unknown types fail the
          // page header check.
          return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld: a %s page inside a transaction",
                                     static_cast<long long>(page_no),
                                     format::PageTypeName(page.header.type));
      }
    }
  }
  // The commit's counters may run ahead of its records (a VACUUM's copy
  // keeps the ids of forgotten records used), never behind.
  if (next_episode > txn.commit.next_episode_id || next_fact > txn.commit.next_fact_id ||
      next_block > txn.commit.next_block_version) {
    int64_t page_no = static_cast<int64_t>(format::PageNoOf(txn.commit_offset));
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no,
                               "page %lld (commit): its counters do not match its records",
                               static_cast<long long>(page_no));
  }
  return Status::OK();
}

// Phase 2 for a scanned transaction.
Status Database::ApplyScanned(ScannedTxn& txn) {
  DecodedTxn d;
  AGENTMEM_RETURN_IF_ERROR(
      DecodeScanned(txn, Counters{next_episode_id_, next_fact_id_, next_block_version_}, &d));
  d.commit = txn.commit;
  d.end = txn.end;
  if (!txn.pages.empty() && txn.pages.front().header.type == static_cast<uint8_t>(PageType::kCheckpoint)) {
    d.checkpoint_start = txn.pages.front().offset;
  }
  return ApplyTxn(d);
}

// The transaction enters the catalog whole, then the fact index, the recall
// index (the BM25 terms of its text records, its graph delta) and, last, its
// forgets. The recall index is derived data: if it cannot take the
// transaction, it is marked broken (recall then asks for a reopen) and the
// catalog stays right.
Status Database::ApplyTxn(DecodedTxn& d) {
  for (auto& [k, v] : d.meta) catalog_.SetMeta(k, v);
  for (const auto& [r, loc] : d.episodes) {
    catalog_.AddEpisode(r, loc);
    // An episode older than the policy's next due time brings it forward.
    if (retention_due_ != INT64_MIN) {
      retention_due_ = std::min(retention_due_, SaturatingAdd(r.ts, retention_due_age_s_));
    }
  }
  for (const auto& [r, loc] : d.blocks) catalog_.AddBlock(r, loc);
  for (const auto& [r, loc] : d.facts) {
    if (r.id < next_fact_id_ && !catalog_.FindFact(r.id)) {
      int64_t page_no = static_cast<int64_t>(format::PageNoOf(loc.page_offset));
      return AGENTMEM_CORRUPTION(kCorruptPage, page_no,
                                 "page %lld: a new version of fact %llu, which does not exist",
                                 static_cast<long long>(page_no),
                                 static_cast<unsigned long long>(r.id));
    }
    catalog_.AddFact(r, loc);
    if (fact_index_) fact_index_->Add(r);
  }
  next_episode_id_ = d.commit.next_episode_id;
  next_fact_id_ = d.commit.next_fact_id;
  next_block_version_ = d.commit.next_block_version;
  if (d.checkpoint_start != 0) {
    checkpoint_end_ = d.end;
    checkpoint_size_ = d.end - d.checkpoint_start;
  }
  if (d.episodes.empty() && d.graphs.empty() && d.texts.empty() && d.forgets.empty()) {
    return Status::OK();
  }
  Status s = EnsureRecallIndex();
  if (!s.ok()) return s;
  for (const auto& [r, loc] : d.episodes) {
    s = recall_->Add(r);
    if (!s.ok()) break;
  }
  std::unordered_set<uint64_t> with_text;
  for (const auto& t : d.texts) {
    if (!s.ok()) break;
    s = recall_->AddText(t);
    with_text.insert(t.episode_id);
  }
  // Episodes committed without their text record (files written before text
  // pages existed, in the unreleased v1) are tokenized here instead.
  for (const auto& [r, loc] : d.episodes) {
    if (!s.ok() || with_text.count(r.id)) continue;
    s = recall_->AddText(recall_->TextFor(r));
  }
  // A commit's graph delta leaves out the vectors of its new nodes: they are
  // those of the transaction's episode records, in increasing id order
  // (docs/format.md §5.6).
  auto vectors = [&d](uint64_t id) -> const float* {
    auto it = std::lower_bound(d.episodes.begin(), d.episodes.end(), id,
                               [](const auto& e, uint64_t v) { return e.first.id < v; });
    if (it == d.episodes.end() || it->first.id != id || it->first.vector.empty()) return nullptr;
    return it->first.vector.data();
  };
  for (const auto& [image, page_no] : d.graphs) {
    if (!s.ok()) break;
    s = recall_->ApplyGraphImage(image, page_no, vectors);
  }
  if (!s.ok()) recall_->Break(s);
  // Forgets apply last, to everything up to and including this transaction.
  for (const format::ForgetRecord& f : d.forgets) AGENTMEM_RETURN_IF_ERROR(ApplyForget(f));
  return Status::OK();
}

Status Database::Refresh(bool exclusive) {
  auto apply = [this](ScannedTxn& t) { return ApplyScanned(t); };
  ScanResult res;
  Status s;
  // A reader racing a writer can see a page half-written and then a later
  // commit; one more scan from the same place settles it.
  for (int attempt = 0; attempt < 2; attempt++) {
    s = ScanLog(file_.get(), header_, end_, seq_, superblock_.durable_through, apply, &res);
    end_ = res.end;
    seq_ = res.commit_seq;
    pages_ += res.pages;
    if (s.ok() || !res.damage || exclusive) break;
  }
  AGENTMEM_RETURN_IF_ERROR(s);
  scanned_size_ = res.file_size;
  torn_bytes_ = res.torn_bytes;
  if (exclusive && res.torn_bytes > 0) {
    Status t = file_->Truncate(end_);
    if (!t.ok()) {
      sticky_ = t;
      return t;
    }
    scanned_size_ = end_;
    torn_bytes_ = 0;
  }
  return Status::OK();
}

void Database::Poison() noexcept {
  poisoned_ = true;
  try {
    Status why(kNoMem, "an allocation failed in the middle of an operation; the handle is "
                       "unusable until it is closed and reopened (the file is unaffected)");
    if (sticky_.ok()) sticky_ = why;
    if (recall_) recall_->Break(why);
  } catch (...) {
    // Still poisoned: poisoned_ alone refuses every later call.
  }
}

Status Database::RefreshForRead() {
  if (closed_) return Status(kMisuse, "database is closed");
  if (poisoned_) return sticky_.ok() ? Status(kNoMem, "handle unusable after a failed allocation") : sticky_;
  // Keep the transaction's snapshot, or a statement's (BeginRead).
  if (explicit_txn_ || write_locked_ || read_pins_ > 0) return Status::OK();
  if (FileReplaced()) return Reload();
  uint64_t size = 0;
  AGENTMEM_RETURN_IF_ERROR(file_->Size(&size));
  // Unchanged size means nothing new -- unless a torn tail was seen: a writer
  // may have cut it and committed exactly up to the same size.
  if (size == scanned_size_ && torn_bytes_ == 0) return Status::OK();
  return Refresh(false);
}

// ------------------------------------------------------------------ transactions

Status Database::CheckWritable() const {
  if (closed_) return Status(kMisuse, "database is closed");
  if (poisoned_) return sticky_.ok() ? Status(kNoMem, "handle unusable after a failed allocation") : sticky_;
  if (opts_.read_only) return Status(kReadOnlyFile, "attempt to write a database opened read-only");
  if (!write_refused_.ok()) return write_refused_;
  if (!sticky_.ok()) {
    sticky_unreported_ = false;
    return Status(kIoErrSticky, "an earlier write or sync failed (" + sticky_.message() +
                                    "); close and reopen the database");
  }
  return Status::OK();
}

Status Database::AcquireWriteLock() {
  if (write_locked_) return Status::OK();
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + std::chrono::milliseconds(opts_.busy_timeout_ms);
  int delay_us = 100;
  for (;;) {
    bool acquired = false;
    AGENTMEM_RETURN_IF_ERROR(file_->TryLockWrite(&acquired));
    if (acquired) {
      // A VACUUM may have replaced the file while we waited: its lock is
      // the old file's. Move to the new file and take its lock instead.
      if (!FileReplaced()) break;
      file_->UnlockWrite().IgnoreError();
      // No pending write can be lost here: a handle with one holds the lock.
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
  write_locked_ = true;
  Status s = Refresh(true);
  // Invariant (7): under sync=FULL, make the bytes before this transaction
  // durable before the next commit record vouches for them. This is a no-op
  // sync unless another handle wrote without syncing, or this handle is new.
  if (s.ok() && opts_.sync == SyncMode::kFull && synced_through_ < end_) {
    s = Sync();
    if (s.ok()) synced_through_ = end_;
  }
  if (!s.ok()) ReleaseWriteLock();
  return s;
}

void Database::ReleaseWriteLock() {
  if (!write_locked_) return;
  write_locked_ = false;
  file_->UnlockWrite().IgnoreError();  // held on file_, which outlives it
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
  Status s = write_locked_ ? CommitPending() : Status::OK();
  ClearPending();
  if (s.ok() && write_locked_) AfterCommit();
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
// write or sync there leaves sticky_ set, which the next write returns, or
// Close if no write comes: in sync=normal that sync was the commits' too.
void Database::AfterCommit() {
  const bool was_ok = sticky_.ok();
  RetentionAfterCommit();
  CheckpointAfterCommit();
  if (was_ok && !sticky_.ok()) sticky_unreported_ = true;
}

void Database::ClearPending() {
  pending_embed_.clear();
  pending_forgets_.clear();
  pending_episodes_.clear();
  pending_blocks_.clear();
  pending_facts_.clear();
  pending_meta_.entries.clear();
  ClearSavepoints();
}

Status Database::Sync() {
  syncs_++;
  Status s = file_->Sync();
  if (!s.ok()) sticky_ = s;
  return s;
}

// Packs the pending records into pages starting at end_, then the commit
// page, and says in `layout` where each record went.
Status Database::EncodePending(std::string* buf, Layout* layout) {
  uint64_t pos = end_;
  layout->pages = 0;
  auto emit = [&](PageType type, const std::string& payload, uint32_t count) {
    std::string page = format::EncodePage(type, pos, header_.salt, count, payload, true);
    pos += page.size();
    *buf += page;
    layout->pages++;
  };
  // Records go on the page at `pos` until it is full; `locs` (if given)
  // receives each record's page and slot.
  auto pack = [&](PageType type, size_t n, auto encode_one, std::vector<RecordLoc>* locs = nullptr) {
    std::string payload, rec;
    uint32_t count = 0;
    if (locs) locs->reserve(n);
    for (size_t i = 0; i < n; i++) {
      rec.clear();
      encode_one(i, &rec);
      if (count > 0 && payload.size() + rec.size() + 5 > header_.page_size) {
        emit(type, payload, count);
        payload.clear();
        count = 0;
      }
      format::AppendRecord(rec, &payload);
      if (locs) locs->push_back(RecordLoc{pos, count});
      count++;
    }
    if (count > 0) emit(type, payload, count);
  };
  if (!pending_meta_.entries.empty()) {  // one record, on a page of its own
    std::string meta, payload;
    format::EncodeMeta(pending_meta_, &meta);
    format::AppendRecord(meta, &payload);
    emit(PageType::kMeta, payload, 1);
  }
  pack(PageType::kEpisodes, pending_episodes_.size(),
       [&](size_t i, std::string* r) { format::EncodeEpisode(pending_episodes_[i], r); },
       &layout->episodes);
  pack(PageType::kBlocks, pending_blocks_.size(),
       [&](size_t i, std::string* r) { format::EncodeBlock(pending_blocks_[i], r); },
       &layout->blocks);
  pack(PageType::kFacts, pending_facts_.size(),
       [&](size_t i, std::string* r) { format::EncodeFact(pending_facts_[i], r); },
       &layout->facts);
  pack(PageType::kForget, pending_forgets_.size(),
       [&](size_t i, std::string* r) { format::EncodeForget(pending_forgets_[i], r); });
  // The BM25 terms and the graph delta of this transaction's episodes ride in
  // the same commit, so that no reader ever tokenizes or inserts again.
  if (!pending_episodes_.empty()) AGENTMEM_RETURN_IF_ERROR(EnsureRecallIndex());
  // With context indexing, an episode's document holds the turns before it
  // in its session; the episodes whose context a forget removes are indexed
  // again, without it, in the same commit (their text records come first).
  std::vector<format::TextRecord>& texts = layout->texts;
  if (recall_ && recall_->context() > 0) {
    std::vector<uint64_t> forgotten, context;
    std::vector<std::string> context_texts;
    if (!pending_forgets_.empty()) AGENTMEM_RETURN_IF_ERROR(PendingForgottenEpisodes(&forgotten));
    for (uint64_t id : recall_->ContextDependents(forgotten)) {
      EpisodeRecord r;
      AGENTMEM_RETURN_IF_ERROR(GetEpisodeNoRefresh(id, &r));
      AGENTMEM_RETURN_IF_ERROR(ContextTexts(r, forgotten, &context_texts));
      texts.push_back(recall_->TextFor(r, context_texts));
    }
    for (const EpisodeRecord& r : pending_episodes_) {
      AGENTMEM_RETURN_IF_ERROR(ContextTexts(r, forgotten, &context_texts));
      texts.push_back(recall_->TextFor(r, context_texts));
    }
  } else if (!pending_episodes_.empty()) {
    for (const EpisodeRecord& r : pending_episodes_) texts.push_back(recall_->TextFor(r));
  }
  pack(PageType::kText, texts.size(),
       [&](size_t i, std::string* r) { format::EncodeText(texts[i], r); });
  if (recall_ && !pending_episodes_.empty()) {
    std::string delta;
    AGENTMEM_RETURN_IF_ERROR(recall_->InsertForCommit(pending_episodes_, &delta));
    if (!delta.empty()) {
      std::string payload;
      format::AppendRecord(delta, &payload);
      emit(PageType::kGraph, payload, 1);
    }
  }

  format::CommitRecord& c = layout->commit;
  c.commit_seq = seq_ + 1;
  c.txn_start = end_;
  c.durable_through = std::min(synced_through_, end_);
  c.page_count = layout->pages;
  c.commit_ts = Now();
  c.next_episode_id = std::max(episode_id_limit(), counters_floor_.episode);
  c.next_fact_id = std::max(NextFactId(), counters_floor_.fact);
  c.next_block_version = std::max(
      pending_blocks_.empty() ? next_block_version_ : pending_blocks_.back().version + 1,
      counters_floor_.block);
  *buf += format::EncodePage(PageType::kCommit, pos, header_.salt, 1, format::EncodeCommit(c), false);
  return Status::OK();
}

// The commit path: invariants (2)-(6) above. REQUIRES: write lock held.
Status Database::ContextTexts(const EpisodeRecord& r, std::span<const uint64_t> skip,
                              std::vector<std::string>* out) {
  out->clear();
  const size_t want = recall_->context();
  // Pending episodes of the same session before r, newest first.
  for (auto it = pending_episodes_.rbegin(); it != pending_episodes_.rend() && out->size() < want; ++it) {
    if (it->id >= r.id || it->user_id != r.user_id || it->session_id != r.session_id) continue;
    if (std::binary_search(skip.begin(), skip.end(), it->id)) continue;
    out->push_back(it->text);
  }
  if (out->size() == want) return Status::OK();
  for (uint64_t id : recall_->ContextIds(r.user_id, r.session_id, r.id, skip)) {
    if (out->size() == want) break;
    EpisodeRecord prev;
    AGENTMEM_RETURN_IF_ERROR(GetEpisodeNoRefresh(id, &prev));
    out->push_back(std::move(prev.text));
  }
  return Status::OK();
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
  Status s = file_->WriteAt(end_, buf);
  if (s.ok() && opts_.sync == SyncMode::kFull) s = Sync();
  if (!s.ok()) {
    sticky_ = s;
    if (recall_) recall_->Break(s);  // its graph holds the in-doubt inserts
    return s;
  }
  const uint64_t new_end = end_ + buf.size();
  if (opts_.sync == SyncMode::kFull) synced_through_ = new_end;
  // The bytes are durable per the sync mode: move the snapshot.
  DecodedTxn d = TakePending(layout, new_end);
  return Committed(d, layout.pages + 1, "commit");
}

Status Database::Committed(DecodedTxn& d, uint64_t pages, const char* what) {
  Status s = ApplyTxn(d);
  if (!s.ok()) {
    // In doubt to the caller like any failed commit: the handle's error
    // goes sticky and a reopen settles it from the file.
    sticky_ = StatusF(s.code(), "%s written but not applied: %s", what, s.message().c_str());
    if (recall_) recall_->Break(sticky_);
    return sticky_;
  }
  end_ = d.end;
  seq_ = d.commit.commit_seq;
  pages_ += pages;
  // The writer cut any torn tail before it wrote (Refresh), so the file
  // ends at its last commit.
  scanned_size_ = end_;
  torn_bytes_ = 0;
  return Status::OK();
}

// The graph delta is not among the records: InsertForCommit put it in the
// graph already, and the text records are the layout's.
Database::DecodedTxn Database::TakePending(Layout& layout, uint64_t end) {
  DecodedTxn d;
  d.meta = std::move(pending_meta_.entries);
  pending_meta_.entries.clear();
  d.episodes.reserve(pending_episodes_.size());
  for (size_t i = 0; i < pending_episodes_.size(); i++) {
    d.episodes.emplace_back(std::move(pending_episodes_[i]), layout.episodes[i]);
  }
  d.blocks.reserve(pending_blocks_.size());
  for (size_t i = 0; i < pending_blocks_.size(); i++) {
    d.blocks.emplace_back(std::move(pending_blocks_[i]), layout.blocks[i]);
  }
  d.facts.reserve(pending_facts_.size());
  for (size_t i = 0; i < pending_facts_.size(); i++) {
    d.facts.emplace_back(std::move(pending_facts_[i]), layout.facts[i]);
  }
  d.texts = std::move(layout.texts);
  d.forgets = std::move(pending_forgets_);
  d.commit = layout.commit;
  d.end = end;
  ClearPending();
  return d;
}

// ------------------------------------------------------------------ writes

Status Database::Remember(EpisodeRecord r, uint64_t* id) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  if (r.text.size() > opts_.max_text_bytes) {
    return StatusF(kTooBig, "episode text is %zu bytes; the limit is %llu (max_text_bytes)",
                   r.text.size(), static_cast<unsigned long long>(opts_.max_text_bytes));
  }
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.user_id, "user_id"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.session_id, "session_id"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.role, "role"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.text, "text"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.metadata, "metadata"));
  AGENTMEM_RETURN_IF_ERROR(CheckJson(r.metadata, "metadata"));
  if (!r.vector.empty() && r.vector.size() != space_.dim) {
    return StatusF(kMismatchDimension,
                   "vector has %zu dimensions; this file's vector space (%s, %s) has %u",
                   r.vector.size(), space_.embedder.c_str(), space_.metric.c_str(), space_.dim);
  }
  for (float f : r.vector) {
    if (!std::isfinite(f)) return Status(kRange, "vector contains a NaN or infinite value");
  }
  if (r.vector.empty() && recall_->builtin_embedder()) {  // (recall_ exists from open on)
    r.vector = recall_->Embed(r.text);  // the built-in embedder fills in
  }
  // The application's embedder: a lone write embeds its text now, before
  // the write lock; a transaction's texts are embedded in batches.
  bool embed_later = r.vector.empty() && embedder_ != nullptr;
  if (embed_later && !explicit_txn_) {
    AGENTMEM_RETURN_IF_ERROR(EmbedTexts({r.text}, {&r.vector}));
    embed_later = false;
  }
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  const uint64_t limit = episode_id_limit();
  if (r.id != 0 && r.id < limit) {
    Status refused = StatusF(kConstraint, "episode id %llu is taken: new ids start at %llu",
                             static_cast<unsigned long long>(r.id),
                             static_cast<unsigned long long>(limit));
    return FinishWrite(refused);
  }
  if (r.id > kMaxEpisodeId || (r.id == 0 && limit > kMaxEpisodeId)) {
    // Ids are SQL integers (int64).
    return FinishWrite(StatusF(kRange, "episode id %llu is above the largest, %lld%s",
                               static_cast<unsigned long long>(r.id ? r.id : limit),
                               static_cast<long long>(kMaxEpisodeId),
                               r.id ? "" : ": this file's episode ids are used up"));
  }
  if (r.id == 0) r.id = limit;
  if (r.created_at == 0) r.created_at = Now();
  if (r.ts == 0) r.ts = r.created_at;
  uint64_t assigned = r.id;
  pending_episodes_.push_back(std::move(r));
  if (embed_later) {
    pending_embed_.push_back(pending_episodes_.size() - 1);
    if (pending_embed_.size() >= Embedder::kEmbedBatch) {
      Status e = EmbedPending();
      if (!e.ok()) {  // this call fails and leaves no episode behind
        pending_embed_.pop_back();
        pending_episodes_.pop_back();
        return e;  // (in a transaction: FinishWrite would only return it)
      }
    }
  }
  Status s = FinishWrite(Status::OK());
  if (s.ok() && id) *id = assigned;
  return s;
}

Status Database::SetBlock(BlockRecord r) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  if (r.name.empty()) return Status(kConstraint, "block name must not be empty");
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.user_id, "user_id"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.name, "block name"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.value, "block value"));
  if (r.value.size() > opts_.max_text_bytes) {
    return StatusF(kTooBig, "block value is %zu bytes; the limit is %llu (max_text_bytes)",
                   r.value.size(), static_cast<unsigned long long>(opts_.max_text_bytes));
  }
  size_t chars = Utf8Length(r.value);
  if (r.limit > 0 && chars > r.limit) {
    return StatusF(kConstraint, "block \"%s\" value is %zu characters; its limit is %u",
                   r.name.c_str(), chars, r.limit);
  }
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  const uint64_t next = pending_blocks_.empty() ? next_block_version_ : pending_blocks_.back().version + 1;
  if (r.version < next) r.version = next;
  if (r.updated_at == 0) r.updated_at = Now();
  pending_blocks_.push_back(std::move(r));
  return FinishWrite(Status::OK());
}

namespace {
Status CheckFact(const FactRecord& r) {
  if (r.subject.empty() || r.predicate.empty() || r.object.empty()) {
    return Status(kConstraint, "fact subject, predicate and object must not be empty");
  }
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.user_id, "user_id"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.subject, "fact subject"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.predicate, "fact predicate"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.object, "fact object"));
  if (!(r.confidence >= 0.0f && r.confidence <= 1.0f)) {
    return Status(kRange, "fact confidence must be between 0 and 1");
  }
  return Status::OK();
}
}  // namespace

// valid_from 0 means now, valid_to 0 open-ended.
static void DefaultValidTime(int64_t now, FactRecord* r) {
  if (r->valid_from == 0) r->valid_from = now;
  if (r->valid_to == 0) r->valid_to = format::kForever;
}

uint64_t Database::NextFactId() const {
  uint64_t next = next_fact_id_;
  for (const FactRecord& f : pending_facts_) next = std::max(next, f.id + 1);
  return next;
}

// A new version of a fact replaces a pending one of the same id in place:
// a transaction writes each fact id at most once.
void Database::PutPendingFact(FactRecord f) {
  for (size_t i = 0; i < pending_facts_.size(); i++) {
    if (pending_facts_[i].id == f.id) {
      NoteFactReplaced(i);
      pending_facts_[i] = std::move(f);
      return;
    }
  }
  pending_facts_.push_back(std::move(f));
}

Status Database::CurrentFactById(const std::string& user, uint64_t id, FactRecord* out) {
  const FactRecord* pending = nullptr;
  for (const FactRecord& p : pending_facts_) {
    if (p.id == id) pending = &p;
  }
  if (pending) {
    *out = *pending;
  } else if (const RecordLoc* loc = catalog_.FindFact(id)) {
    AGENTMEM_RETURN_IF_ERROR(ReadFact(*loc, out));
  } else {
    out->user_id.clear();
  }
  if (out->user_id != user || out->expired_at != format::kForever) {
    return StatusF(kNotFound, "fact %llu is not a current fact of this user",
                   static_cast<unsigned long long>(id));
  }
  return Status::OK();
}

Status Database::AssertFact(FactRecord r, uint64_t* id, uint64_t replaces) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  AGENTMEM_RETURN_IF_ERROR(CheckFact(r));
  int64_t now = Now();
  DefaultValidTime(now, &r);
  if (r.valid_to <= r.valid_from) return Status(kRange, "fact valid_to must be after valid_from");
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  std::optional<FactRecord> replaced;
  if (replaces != 0) {
    replaced.emplace();
    Status s = CurrentFactById(r.user_id, replaces, &*replaced);
    if (!s.ok()) return FinishWrite(s);
  }
  std::vector<FactRecord> current;
  Status s = CurrentFacts(r.user_id, r.subject, r.predicate, &current);
  if (!s.ok()) return FinishWrite(s);
  std::erase_if(current, [&](const FactRecord& c) { return c.id == replaces; });
  // The corrected fact leaves transaction time when its correction enters it.
  // A correction that states something else from a later instant of the
  // fact's valid time says the fact held until then: that part stays, known
  // from the same instant.
  auto expire_replaced = [&](int64_t at) {
    if (!replaced) return;
    at = std::max(at, replaced->recorded_at);
    const bool other = r.subject != replaced->subject || r.predicate != replaced->predicate ||
                       r.object != replaced->object;
    if (other && replaced->valid_from < r.valid_from && r.valid_from < replaced->valid_to) {
      FactRecord before = *replaced;
      before.id = NextFactId();
      before.valid_to = r.valid_from;
      before.recorded_at = at;
      before.expired_at = format::kForever;
      pending_facts_.push_back(std::move(before));
    }
    replaced->expired_at = at;
    PutPendingFact(std::move(*replaced));
  };
  for (const FactRecord& c : current) {
    if (c.object == r.object && c.valid_from <= r.valid_from && r.valid_from < c.valid_to) {
      expire_replaced(Now());
      if (id) *id = c.id;  // already known and valid then: nothing else to write
      return FinishWrite(Status::OK());
    }
  }
  // Transaction time is read under the lock, and never before what the file
  // already recorded (another process's clock, or a wait for the lock), so
  // that no fact is expired before it was recorded.
  now = Now();
  for (const FactRecord& c : current) now = std::max(now, c.recorded_at);
  if (replaced) now = std::max(now, replaced->recorded_at);
  expire_replaced(now);
  r.recorded_at = now;
  r.expired_at = format::kForever;
  r.id = NextFactId();
  const uint64_t assigned = r.id;
  pending_facts_.push_back(r);
  if (IsSingleValued(r.predicate)) {
    for (const FactRecord& c : current) {
      if (c.object == r.object || c.valid_to <= r.valid_from || c.valid_from >= r.valid_to) continue;
      FactRecord expired = c;  // the row as it was known, closed in transaction time
      expired.expired_at = now;
      PutPendingFact(std::move(expired));
      // What stays true of it, before and after the new fact, known from now.
      auto remainder = [&](int64_t from, int64_t to) {
        FactRecord rest = c;
        rest.id = NextFactId();
        rest.valid_from = from;
        rest.valid_to = to;
        rest.recorded_at = now;
        rest.expired_at = format::kForever;
        pending_facts_.push_back(std::move(rest));
      };
      if (c.valid_from < r.valid_from) remainder(c.valid_from, r.valid_from);
      if (c.valid_to > r.valid_to) remainder(r.valid_to, c.valid_to);
    }
  }
  s = FinishWrite(Status::OK());
  if (s.ok() && id) *id = assigned;
  return s;
}

Status Database::ImportFact(FactRecord r, uint64_t* id) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  AGENTMEM_RETURN_IF_ERROR(CheckFact(r));
  int64_t now = Now();
  DefaultValidTime(now, &r);
  if (r.recorded_at == 0) r.recorded_at = now;
  if (r.expired_at == 0) r.expired_at = format::kForever;
  // A fact superseded in the transaction that asserted it was never known
  // at any commit: its transaction time is empty, [t, t), and valid.
  if (r.valid_to <= r.valid_from || r.expired_at < r.recorded_at) {
    return Status(kRange, "fact valid_to must be after valid_from, and expired_at not before "
                          "recorded_at");
  }
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  const uint64_t next = NextFactId();
  if (r.id != 0 && r.id < next) {
    return FinishWrite(StatusF(kConstraint, "fact id %llu is taken: new ids start at %llu",
                               static_cast<unsigned long long>(r.id),
                               static_cast<unsigned long long>(next)));
  }
  if (r.id == 0) r.id = next;
  const uint64_t assigned = r.id;
  pending_facts_.push_back(std::move(r));
  Status s = FinishWrite(Status::OK());
  if (s.ok() && id) *id = assigned;
  return s;
}

Status Database::DeclarePredicate(const std::string& predicate, bool single_valued) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  if (predicate.empty()) return Status(kConstraint, "predicate must not be empty");
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(predicate, "predicate"));
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  pending_meta_.entries.emplace_back("fact.single_valued." + predicate, single_valued ? "1" : "0");
  return FinishWrite(Status::OK());
}

bool Database::IsSingleValued(const std::string& predicate) const {
  const std::string key = "fact.single_valued." + predicate;
  for (auto it = pending_meta_.entries.rbegin(); it != pending_meta_.entries.rend(); ++it) {
    if (it->first == key) return it->second == "1";
  }
  const std::string* v = catalog_.Meta(key);
  return v && *v == "1";
}

void Database::DeclaredPredicates(std::vector<std::pair<std::string, bool>>* out) const {
  static constexpr std::string_view kPrefix = "fact.single_valued.";
  std::map<std::string, bool> declared;
  auto take = [&](const std::string& key, const std::string& value) {
    if (key.size() > kPrefix.size() && key.starts_with(kPrefix)) {
      declared[key.substr(kPrefix.size())] = value == "1";
    }
  };
  for (const auto& [key, value] : catalog_.meta()) take(key, value);
  for (const auto& [key, value] : pending_meta_.entries) take(key, value);
  out->assign(declared.begin(), declared.end());
}

// ------------------------------------------------------------------ export / import

void Database::NextIds(uint64_t* episode, uint64_t* fact, uint64_t* block_version) const {
  *episode = std::max(episode_id_limit(), counters_floor_.episode);
  *fact = std::max(NextFactId(), counters_floor_.fact);
  *block_version = std::max(
      pending_blocks_.empty() ? next_block_version_ : pending_blocks_.back().version + 1,
      counters_floor_.block);
}

Status Database::ReserveIds(uint64_t episode, uint64_t fact, uint64_t block_version) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  if (!explicit_txn_) return Status(kMisuse, "reserving ids needs an open transaction");
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  counters_floor_.episode = std::max(counters_floor_.episode, episode);
  counters_floor_.fact = std::max(counters_floor_.fact, fact);
  counters_floor_.block = std::max(counters_floor_.block, block_version);
  // ForgottenInFile() counts the ids below the next one that hold no live
  // episode, less a baseline: the ids this commit skips go into the baseline.
  uint64_t next = 0, unused = 0;
  NextIds(&next, &unused, &unused);
  const uint64_t live = catalog_.episode_count() + pending_episodes_.size();
  const uint64_t gone_after = next - 1 > live ? next - 1 - live : 0;
  const uint64_t baseline = gone_after - std::min(gone_after, ForgottenInFile());
  uint64_t before = 0;
  if (const std::string* v = catalog_.Meta("vacuum.gone_episodes")) {
    before = std::strtoull(v->c_str(), nullptr, 10);
  }
  if (baseline != before || counters_floor_.episode > next_episode_id_ ||
      counters_floor_.fact > next_fact_id_ || counters_floor_.block > next_block_version_) {
    pending_meta_.entries.emplace_back("vacuum.gone_episodes", std::to_string(baseline));
  }
  return FinishWrite(Status::OK());
}

// ------------------------------------------------------------------ reads

Status Database::ReadPageRecords(uint64_t offset, std::shared_ptr<const std::string>* payload,
                                 std::vector<std::string_view>* records) {
  PageRef page;
  AGENTMEM_RETURN_IF_ERROR(pager_.ReadPage(offset, &page));
  *records = page->records;
  *payload = std::shared_ptr<const std::string>(page, &page->payload);
  return Status::OK();
}

Status Database::ReadRecord(const RecordLoc& loc, std::string_view* record, int64_t* page_no,
                            std::shared_ptr<const std::string>* keep) {
  std::vector<std::string_view> records;
  AGENTMEM_RETURN_IF_ERROR(ReadPageRecords(loc.page_offset, keep, &records));
  *page_no = static_cast<int64_t>(format::PageNoOf(loc.page_offset));
  if (loc.slot >= records.size()) {
    return AGENTMEM_CORRUPTION(kCorruptPage, *page_no, "page %lld: record %u missing",
                               static_cast<long long>(*page_no), loc.slot);
  }
  *record = records[loc.slot];
  return Status::OK();
}

Status Database::GetEpisode(uint64_t id, EpisodeRecord* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  return GetEpisodeNoRefresh(id, out);
}

Status Database::GetEpisodeNoRefresh(uint64_t id, EpisodeRecord* out) {
  if (const EpisodeRecord* p = FindPending(pending_episodes_, &EpisodeRecord::id, id)) {
    *out = *p;
    return Status::OK();
  }
  const EpisodeEntry* e = catalog_.FindEpisode(id);
  if (!e) return StatusF(kNotFound, "no episode with id %llu", static_cast<unsigned long long>(id));
  std::string_view rec;
  int64_t page_no = 0;
  std::shared_ptr<const std::string> keep;
  AGENTMEM_RETURN_IF_ERROR(ReadRecord(e->loc, &rec, &page_no, &keep));
  AGENTMEM_RETURN_IF_ERROR(format::DecodeEpisode(rec, page_no, out));
  if (out->id != id) {
    return AGENTMEM_CORRUPTION(kCorruptIndex, page_no, "page %lld: holds episode %llu, expected %llu",
                               static_cast<long long>(page_no),
                               static_cast<unsigned long long>(out->id),
                               static_cast<unsigned long long>(id));
  }
  return Status::OK();
}

Status Database::ListEpisodeIds(std::string_view user_id, const std::string* session_id,
                                std::vector<uint64_t>* ids) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  ids->clear();
  if (const UserEntry* u = catalog_.FindUser(user_id)) {
    if (!session_id) {
      *ids = u->episode_ids;
    } else if (auto it = u->sessions.find(*session_id); it != u->sessions.end()) {
      *ids = it->second;
    }
  }
  for (const EpisodeRecord& r : pending_episodes_) {
    if (r.user_id == user_id && (!session_id || r.session_id == *session_id)) ids->push_back(r.id);
  }
  return Status::OK();
}

Status Database::ListEpisodeIdsByTime(std::string_view user_id, const std::string* session_id,
                                      std::vector<uint64_t>* ids) {
  AGENTMEM_RETURN_IF_ERROR(ListEpisodeIds(user_id, session_id, ids));
  std::vector<std::pair<int64_t, uint64_t>> by_time;
  by_time.reserve(ids->size());
  for (uint64_t id : *ids) {
    const EpisodeEntry* e = catalog_.FindEpisode(id);
    const EpisodeRecord* p = e ? nullptr : FindPendingEpisode(id);
    by_time.emplace_back(e ? e->ts : p ? p->ts : 0, id);
  }
  std::sort(by_time.begin(), by_time.end());
  for (size_t i = 0; i < by_time.size(); i++) (*ids)[i] = by_time[i].second;
  return Status::OK();
}

Status Database::ReadBlock(const RecordLoc& loc, BlockRecord* out) {
  std::string_view rec;
  int64_t page_no = 0;
  std::shared_ptr<const std::string> keep;
  AGENTMEM_RETURN_IF_ERROR(ReadRecord(loc, &rec, &page_no, &keep));
  return format::DecodeBlock(rec, page_no, out);
}

Status Database::ReadFact(const RecordLoc& loc, FactRecord* out) {
  std::string_view rec;
  int64_t page_no = 0;
  std::shared_ptr<const std::string> keep;
  AGENTMEM_RETURN_IF_ERROR(ReadRecord(loc, &rec, &page_no, &keep));
  return format::DecodeFact(rec, page_no, out);
}

Status Database::GetBlock(std::string_view user_id, std::string_view name, BlockRecord* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  for (auto it = pending_blocks_.rbegin(); it != pending_blocks_.rend(); ++it) {
    if (it->user_id == user_id && it->name == name) {
      *out = *it;
      return Status::OK();
    }
  }
  const UserEntry* u = catalog_.FindUser(user_id);
  if (u) {
    auto it = u->blocks.find(name);
    if (it != u->blocks.end()) return ReadBlock(it->second.back().loc, out);
  }
  return StatusF(kNotFound, "no block named \"%.*s\" for this user", static_cast<int>(name.size()),
                 name.data());
}

Status Database::ListBlocks(std::string_view user_id, std::vector<BlockRecord>* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  out->clear();
  std::map<std::string, BlockRecord> current;
  if (const UserEntry* u = catalog_.FindUser(user_id)) {
    for (const auto& [name, versions] : u->blocks) {
      AGENTMEM_RETURN_IF_ERROR(ReadBlock(versions.back().loc, &current[name]));
    }
  }
  for (const BlockRecord& r : pending_blocks_) {
    if (r.user_id == user_id) current[r.name] = r;
  }
  for (auto& [name, r] : current) out->push_back(std::move(r));
  return Status::OK();
}

Status Database::ListFacts(std::string_view user_id, const std::string* subject,
                           const std::string* predicate, std::vector<FactRecord>* out) {
  FactQuery q;
  q.user_id = std::string(user_id);
  if (subject) q.subject = *subject;
  if (predicate) q.predicate = *predicate;
  q.all_versions = true;
  return QueryFacts(q, out);
}

Status Database::Recall(const RecallQuery& q, std::vector<RecallHit>* hits, RecallPlan* plan) {
  return Recall(q, std::string(), std::string(), hits, plan);
}

// The metadata filter: the episode's metadata JSON must hold `value` (JSON)
// at `key` (a top-level key, or a JSON pointer such as "/place/city").
Status Database::Recall(const RecallQuery& q, const std::string& metadata_key,
                        const std::string& metadata_value, std::vector<RecallHit>* hits,
                        RecallPlan* plan) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  AGENTMEM_RETURN_IF_ERROR(EnsureRecallIndex());
  RecallQuery query = q;
  if (query.now == 0) query.now = Now();
  if (query.vector.empty() && query.mode != RecallMode::kBm25 && embedder_ &&
      !recall_->builtin_embedder()) {
    AGENTMEM_RETURN_IF_ERROR(EmbedTexts({query.text}, {&query.vector}));
  }
  if (metadata_key.empty()) {
    AGENTMEM_RETURN_IF_ERROR(recall_->Recall(query, hits, plan));
    return plan ? MarkContextMatches(query, hits) : Status::OK();
  }
  // Read as tokens, not nlohmann::json trees (engine/json_reader.h): the
  // trees' destructor allocates, so running out of memory here would be
  // std::terminate. The comparison is nlohmann's operator== all the same.
  JsonTokens want;
  if (!ParseJson(metadata_value, &want)) {
    return Status(kMismatchJson, "metadata_value is not valid JSON (a string needs quotes)");
  }
  std::vector<std::string> ptr;
  if (!ParseJsonPointer(metadata_key[0] == '/' ? metadata_key : "/" + metadata_key, &ptr)) {
    return Status(kMisuse, "metadata_key is not a key or a JSON pointer");
  }
  Status read_error;
  JsonTokens meta;  // each episode's metadata in turn
  query.extra_filter = [&](uint64_t id) {
    EpisodeRecord r;
    Status s = GetEpisodeNoRefresh(id, &r);
    if (!s.ok()) {
      if (read_error.ok()) read_error = s;
      return false;
    }
    if (!ParseJson(r.metadata, &meta)) return false;
    size_t at = JsonPointerFind(meta, ptr);
    return at != kNoJsonValue && JsonEqual(meta, at, want, 0);
  };
  Status s = recall_->Recall(query, hits, plan);
  if (s.ok() && read_error.ok() && plan) s = MarkContextMatches(query, hits);
  return s.ok() ? read_error : s;
}

// EXPLAIN's view of a BM25 hit: did a query term occur in the episode's own
// text, or only in the context indexed with it?
Status Database::MarkContextMatches(const RecallQuery& q, std::vector<RecallHit>* hits) {
  if (recall_->context() == 0) return Status::OK();
  std::vector<std::string> query = recall_->QueryTokens(q.text);
  std::sort(query.begin(), query.end());
  for (RecallHit& h : *hits) {
    if (h.bm25_rank == 0) continue;
    EpisodeRecord r;
    AGENTMEM_RETURN_IF_ERROR(GetEpisodeNoRefresh(h.id, &r));
    bool own = false;
    for (const std::string& t : recall_->DocumentTokens(r.text)) {
      if (std::binary_search(query.begin(), query.end(), t)) {
        own = true;
        break;
      }
    }
    h.bm25_via_context = !own;
  }
  return Status::OK();
}

Status Database::GetStats(Stats* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  Stats s;
  s.file_bytes = end_;
  s.episodes = catalog_.episode_count();
  s.blocks = catalog_.block_count();
  s.block_versions = catalog_.block_version_count();
  s.facts = catalog_.fact_count();
  for (const UserEntry& u : catalog_.users()) {
    if (!u.episode_ids.empty() || !u.blocks.empty() || !u.fact_ids.empty()) s.users++;
  }
  s.commits = seq_;
  s.text_bytes = catalog_.text_bytes();
  s.pages = pages_;
  s.syncs = syncs_;
  s.torn_bytes = torn_bytes_;
  *out = s;
  return Status::OK();
}

Status Database::ListUsers(std::vector<std::string>* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  out->clear();
  std::unordered_set<std::string_view> seen;
  for (const UserEntry& u : catalog_.users()) {
    if (u.episode_ids.empty() && u.blocks.empty() && u.fact_ids.empty()) continue;
    out->push_back(u.user_id);
    seen.insert(u.user_id);
  }
  auto add_pending = [&](const std::string& user) {
    if (seen.insert(user).second) out->push_back(user);
  };
  for (const EpisodeRecord& r : pending_episodes_) add_pending(r.user_id);
  for (const BlockRecord& r : pending_blocks_) add_pending(r.user_id);
  for (const FactRecord& r : pending_facts_) add_pending(r.user_id);
  return Status::OK();
}

Status Database::ListBlockHistory(std::string_view user_id, std::string_view name,
                                  std::vector<BlockRecord>* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  out->clear();
  if (const UserEntry* u = catalog_.FindUser(user_id)) {
    if (auto it = u->blocks.find(name); it != u->blocks.end()) {
      for (const BlockVersion& v : it->second) {
        out->emplace_back();
        AGENTMEM_RETURN_IF_ERROR(ReadBlock(v.loc, &out->back()));
      }
    }
  }
  for (const BlockRecord& r : pending_blocks_) {
    if (r.user_id == user_id && r.name == name) out->push_back(r);
  }
  return Status::OK();
}

Status Database::Check(std::vector<std::string>* problems) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  Counters next;
  uint64_t episodes = 0, forgets = 0;
  auto apply = [&](ScannedTxn& txn) {
    DecodedTxn d;
    AGENTMEM_RETURN_IF_ERROR(DecodeScanned(txn, next, &d));
    next = Counters{txn.commit.next_episode_id, txn.commit.next_fact_id,
                    txn.commit.next_block_version};
    episodes += d.episodes.size();
    forgets += d.forgets.size();
    for (const auto& [image, page_no] : d.graphs) {
      if (image.empty()) problems->push_back("page " + std::to_string(page_no) + ": empty graph image");
    }
    return Status::OK();
  };
  ScanResult res;
  Status s = ScanLog(file_.get(), header_, format::kFirstPageOffset, 0,
                     superblock_.durable_through, apply, &res);
  if (!s.ok()) {
    if (s.primary() == kNoMem || s.primary() == kIoErr) return s;
    problems->push_back(s.ToString());
    return Status::OK();
  }
  auto mismatch = [&](const char* what, uint64_t file, uint64_t snapshot) {
    if (file != snapshot) {
      problems->push_back(std::string(what) + ": the file has " + std::to_string(file) +
                          ", the open snapshot " + std::to_string(snapshot));
    }
  };
  mismatch("last commit", res.commit_seq, seq_);
  if (forgets == 0) mismatch("episodes", episodes, catalog_.episode_count());
  mismatch("next episode id", next.episode, next_episode_id_);
  mismatch("next fact id", next.fact, next_fact_id_);
  mismatch("next block version", next.block, next_block_version_);
  Status broken = recall_->broken();  // (recall_ exists from open on)
  if (!broken.ok()) problems->push_back("recall index: " + broken.ToString());
  return Status::OK();
}

}  // namespace agentmem::engine

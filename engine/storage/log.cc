// engine/storage/log.cc -- the append-only log: create, open, lock, append,
// sync, superblocks, refresh (the protocol is in log.h).
#include "engine/storage/log.h"

#include <algorithm>
#include <optional>
#include <random>

namespace agentmem::engine {

using format::PageType;

// ------------------------------------------------------------------ TxnWriter

void TxnWriter::ClosePage(const format::StoredPayload* prepared) {
  if (count_ == 0) return;
  const bool may_pay = payload_.size() - std::min(incompressible_, payload_.size()) >= payload_.size() / 8;
  std::string page = prepared && may_pay && prepared->raw == payload_
                         ? format::EncodePage(type_, pos_, salt_, count_, *prepared)
                         : format::EncodePage(type_, pos_, salt_, count_, payload_, may_pay);
  if (type_ == PageType::kEpisodes) {
    episodes_head_.assign(page, 0, format::kPageHeaderSize);
    episodes_offset_ = pos_;
    episodes_payload_.swap(payload_);
  }
  pos_ += page.size();
  buf_ += page;
  pages_++;
  payload_.clear();
  count_ = 0;
  incompressible_ = 0;
}

RecordLoc TxnWriter::Add(PageType type, std::string_view record, size_t incompressible) {
  if (count_ > 0 && (type != type_ || payload_.size() + record.size() + 5 > page_size_)) ClosePage();
  type_ = type;
  format::AppendRecord(record, &payload_);
  incompressible_ += incompressible;
  return RecordLoc{pos_, count_++};
}

PageRef TxnWriter::LastEpisodePage() const {
  if (episodes_head_.empty()) return nullptr;
  auto page = std::make_shared<Page>();
  page->offset = episodes_offset_;
  if (!format::PeekPageHeader(episodes_head_, episodes_offset_, salt_, &page->header).ok()) return nullptr;
  page->payload = episodes_payload_;
  if (!format::SplitRecords(page->payload, page->header.record_count,
                            static_cast<int64_t>(page->header.page_no), &page->records)
           .ok()) {
    return nullptr;
  }
  return page;
}

void TxnWriter::AddAlone(PageType type, std::string_view record,
                         const format::StoredPayload* prepared) {
  ClosePage();
  type_ = type;
  format::AppendRecord(record, &payload_);
  count_ = 1;
  ClosePage(prepared);
}

std::string TxnWriter::Finish(format::CommitRecord* c) {
  ClosePage();
  c->txn_start = start_;
  c->page_count = pages_;
  buf_ += format::EncodePage(PageType::kCommit, pos_, salt_, 1, format::EncodeCommit(*c), false);
  return std::move(buf_);
}

// ------------------------------------------------------------------ create, open

namespace {

uint64_t NewSalt() {
  std::random_device rd;
  uint64_t s = 0;
  while (s == 0) s = (uint64_t{rd()} << 32) ^ rd();
  return s;
}

Env* EnvOf(const LogOptions& o) { return o.env ? o.env : Env::Posix(); }

}  // namespace

Status Log::Create(const std::string& path, const LogOptions& o, const NewLog& n) {
  format::FileHeader header;
  header.salt = n.salt ? n.salt : NewSalt();
  header.page_size = n.page_size;
  header.created_at = n.created_at;
  header.read_version = header.write_version = n.version;
  std::string init = format::EncodeFileHeader(header);
  init.resize(format::kFirstPageOffset, '\0');
  std::string payload;
  format::AppendRecord(n.meta, &payload);
  init += format::EncodePage(PageType::kMeta, init.size(), header.salt, 1, payload, false);
  format::CommitRecord c;
  c.commit_seq = 1;
  c.txn_start = format::kFirstPageOffset;
  c.durable_through = format::kFirstPageOffset;
  c.page_count = 1;
  c.commit_ts = header.created_at;
  init += format::EncodePage(PageType::kCommit, init.size(), header.salt, 1, format::EncodeCommit(c),
                             false);
  // Superblock A vouches for every byte of the new file (it is created
  // durably, env.h); B starts at generation 0 with nothing vouched for.
  format::Superblock sb;
  sb.salt = header.salt;
  sb.generation = 0;
  init.replace(format::kSuperblockOffset[1], format::kSuperblockSize, format::EncodeSuperblock(sb));
  sb.generation = 1;
  sb.durable_through = init.size();
  init.replace(format::kSuperblockOffset[0], format::kSuperblockSize, format::EncodeSuperblock(sb));
  Env* env = EnvOf(o);
  Status s = n.create_like.empty() ? env->CreateAtomic(path, init)
                                   : env->CreateAtomicLike(path, init, n.create_like);
  return s.code() == kCantOpenExists ? Status::OK() : s;
}

Status Log::Open(const std::string& path, const LogOptions& o, std::unique_ptr<Log>* out) {
  out->reset();
  std::unique_ptr<Log> log(new Log(path, o));
  AGENTMEM_RETURN_IF_ERROR(EnvOf(o)->Open(path, OpenMode{o.read_only}, &log->file_));
  log->file_id_ = log->file_->Identity();
  AGENTMEM_RETURN_IF_ERROR(log->ReadHead());
  *out = std::move(log);
  return Status::OK();
}

Log::~Log() {
  Unlock();
  pager_.Reset(nullptr, 0);
}

// The header, and the newest valid superblock, which says where the scan
// starts.
Status Log::ReadHead() {
  std::string head;
  AGENTMEM_RETURN_IF_ERROR(file_->ReadAt(0, format::kFirstPageOffset, &head));
  if (head.empty()) return Status(kNotADb, "file is not an agentmem database: " + path_ + " is empty");
  AGENTMEM_RETURN_IF_ERROR(format::DecodeFileHeader(head, &header_));
  pager_.Reset(file_.get(), header_.salt);
  if (head.size() < format::kFirstPageOffset) {
    return AGENTMEM_CORRUPTION(kCorruptHeader, 0, "file is cut short inside its header (%zu bytes)",
                               head.size());
  }
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
  return Status::OK();
}

// ------------------------------------------------------------------ the snapshot

Status Log::Unchanged(bool* unchanged) {
  *unchanged = false;
  if (torn_bytes_ != 0) return Status::OK();
  uint64_t size = 0;
  AGENTMEM_RETURN_IF_ERROR(file_->Size(&size));
  if (size != scanned_size_) return Status::OK();
  if (reserve_bytes_ == 0) {
    *unchanged = true;
    return Status::OK();
  }
  // Every write after end() starts there, with a page header (never zeros).
  std::string head;
  AGENTMEM_RETURN_IF_ERROR(file_->ReadAt(end_, format::kPageHeaderSize, &head));
  *unchanged = head.size() == format::kPageHeaderSize &&
               head.find_first_not_of('\0') == std::string::npos;
  return Status::OK();
}

Status Log::Refresh(bool exclusive, const ApplyFn& apply) {
  // The common case of a reserve: nothing past it to read.
  bool unchanged = false;
  if (reserve_bytes_ > 0) AGENTMEM_RETURN_IF_ERROR(Unchanged(&unchanged));
  if (unchanged) return Status::OK();
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
  reserve_bytes_ = res.reserve_bytes;
  return exclusive && res.torn_bytes > 0 ? CutAtEnd() : Status::OK();
}

Status Log::CutAtEnd() {
  Status s = file_->Truncate(end_);
  if (!s.ok()) {
    sticky_ = s;
    return s;
  }
  scanned_size_ = end_;
  torn_bytes_ = 0;
  reserve_bytes_ = 0;
  return Status::OK();
}

Status Log::ScanAll(const ApplyFn& apply, ScanResult* res) {
  return ScanLog(file_.get(), header_, format::kFirstPageOffset, 0, superblock_.durable_through,
                 apply, res);
}

Status Log::MayHaveMore(bool* more) {
  bool unchanged = false;
  AGENTMEM_RETURN_IF_ERROR(Unchanged(&unchanged));
  *more = !unchanged;
  return Status::OK();
}

bool Log::Replaced() const {
  if (!file_id_.known()) return false;
  FileId now = EnvOf(opts_)->Identify(path_);
  // A path that is gone (deleted under us) leaves the open file as it is.
  return now.known() && !(now == file_id_);
}

void Log::Advance(uint64_t end, uint64_t seq, uint64_t pages) {
  end_ = end;
  seq_ = seq;
  pages_ += pages;
  // The writer cut any torn tail before it wrote (Refresh), so the file
  // ends at its last commit or at the reserve after it.
  scanned_size_ = std::max(scanned_size_, end_);
  torn_bytes_ = 0;
  reserve_bytes_ = scanned_size_ - end_;
}

void Log::NoteCheckpoint(uint64_t start, uint64_t end) {
  checkpoint_end_ = end;
  checkpoint_size_ = end - start;
}

// ------------------------------------------------------------------ the write lock

Status Log::TryLock(bool* acquired, bool* replaced) {
  *replaced = false;
  *acquired = write_locked_;
  if (*acquired) return Status::OK();
  bool got = false;
  AGENTMEM_RETURN_IF_ERROR(file_->TryLockWrite(&got));
  if (!got) return Status::OK();
  if (Replaced()) {
    // Its lock is the old file's: of no use to anyone.
    file_->UnlockWrite().IgnoreError();
    *replaced = true;
    return Status::OK();
  }
  write_locked_ = true;
  *acquired = true;
  return Status::OK();
}

void Log::Unlock() {
  if (!write_locked_) return;
  write_locked_ = false;
  file_->UnlockWrite().IgnoreError();  // held on file_, which outlives it
}

Status Log::SyncBeforeWrite() {
  // A no-op sync unless another handle wrote without syncing, or this
  // handle is new.
  if (opts_.sync != SyncMode::kFull || synced_through_ >= end_) return Status::OK();
  AGENTMEM_RETURN_IF_ERROR(Sync());
  synced_through_ = end_;
  return Status::OK();
}

// ------------------------------------------------------------------ writing

Status Log::Append(const std::string& txn) {
  const uint64_t txn_end = end_ + txn.size();
  Status s;
  if (opts_.sync == SyncMode::kFull && txn_end > scanned_size_) {
    // The reserve's zeros go in the same write, and are synced with it.
    s = file_->WriteWithZeros(end_, txn, kReserveBytes);
    if (s.ok()) scanned_size_ = txn_end + kReserveBytes;
  } else {
    s = file_->WriteAt(end_, txn);
    if (s.ok()) scanned_size_ = std::max(scanned_size_, txn_end);
  }
  if (s.ok() && opts_.sync == SyncMode::kFull) s = Sync();
  if (!s.ok()) {
    sticky_ = s;
    return s;
  }
  if (opts_.sync == SyncMode::kFull) synced_through_ = txn_end;
  return Status::OK();
}

Status Log::AppendAndSync(const std::function<Status(const Put& put)>& write) {
  uint64_t last = end_, put = 0;
  Status s = write([&](uint64_t offset, std::string_view bytes) {
    if (offset < end_) return Status(kInternal, "log: a checkpoint byte before the end of the log");
    last = std::max(last, offset + bytes.size());
    put += bytes.size();
    return file_->WriteAt(offset, bytes);
  });
  // Pieces that overlap, or leave a hole, do not add up to their extent.
  if (s.ok() && put != last - end_) {
    s = StatusF(kInternal, "log: a checkpoint's pieces cover %llu bytes with %llu",
                static_cast<unsigned long long>(last - end_), static_cast<unsigned long long>(put));
  }
  if (!s.ok()) {
    // A write that failed (a full disk) leaves bytes after the last commit
    // that nothing vouches for: a torn tail to every reader, which the next
    // writer would cut. Cut now, to give the space back. The commits before
    // stay as they were, so the log goes on (a failed sync, below, is
    // different: fsync is never retried).
    file_->Truncate(end_).IgnoreError();
    scanned_size_ = end_;
    reserve_bytes_ = 0;
    return s;
  }
  scanned_size_ = std::max(scanned_size_, last);
  AGENTMEM_RETURN_IF_ERROR(Sync());  // makes its failure sticky
  synced_through_ = last;
  return Status::OK();
}

Status Log::Sync() {
  syncs_++;
  Status s = file_->Sync();
  if (!s.ok()) sticky_ = s;
  return s;
}

Status Log::SyncAll() {
  AGENTMEM_RETURN_IF_ERROR(Sync());
  synced_through_ = end_;
  return Status::OK();
}

Status Log::WriteSuperblock(uint64_t checkpoint) {
  bool acquired = false, replaced = false;
  AGENTMEM_RETURN_IF_ERROR(TryLock(&acquired, &replaced));
  if (!acquired) return Status::OK();
  // The reserve, if nothing was written after end() since this handle saw it.
  bool unchanged = false;
  if (reserve_bytes_ > 0) AGENTMEM_RETURN_IF_ERROR(Unchanged(&unchanged));
  if (unchanged) AGENTMEM_RETURN_IF_ERROR(CutAtEnd());
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

}  // namespace agentmem::engine

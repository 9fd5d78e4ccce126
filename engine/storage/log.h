// engine/storage/log.h -- the file as an append-only log of transactions:
// creating and opening it, the write lock, appending a transaction, syncing,
// the superblocks, and the scan that moves a snapshot to the last commit.
//
// The commit protocol (docs/architecture.md keeps the same numbered list):
//  (1) Only the write-lock holder appends. It takes the lock, then brings its
//      snapshot to the last commit in the file and cuts off any torn tail.
//  (2) A transaction's records are encoded into record pages, followed by one
//      commit page (TxnWriter), and appended with a single write at the end
//      of the last commit (Log::Append; a checkpoint's state and commit
//      pages one write each, its bm25 and graph pages in pieces with their
//      headers last, then one sync: Log::AppendAndSync). Nothing written is
//      ever overwritten but the zeros of the reserve: under sync=FULL a
//      transaction that passes the end of the file is written with
//      kReserveBytes of zeros after it, which later transactions overwrite,
//      so that their fdatasync carries no change of the file's size. A
//      writer's close cuts the reserve off again.
//  (3) The commit page records txn_start, page_count, commit_seq (previous+1)
//      and durable_through (every byte before it was synced before this write).
//  (4) sync=FULL: one fdatasync after the write; the commit is acknowledged
//      only after it returns. sync=NORMAL: synced at close; OFF: never.
//      A clean close (full or normal) then writes the next superblock, which
//      vouches that every byte up to the last commit is synced, and syncs.
//  (5) The in-memory snapshot moves to the new commit only after (4)
//      (Log::Advance, once the transaction is applied).
//  (6) A failed write or sync makes the log's error sticky: no further
//      writes until reopen; fsync is never retried (the transaction is in
//      doubt: after reopen it is wholly present or wholly absent).
//  (7) Before the first write under a newly taken lock the file is synced
//      once, so that durable_through never vouches for bytes another handle
//      wrote but did not sync (Log::SyncBeforeWrite).
//
//    state:   idle --lock--> locked --Append--> locked --Advance--> locked --Unlock--> idle
//             any failed write/sync --> sticky (reads only) --reopen--> idle
//
// Thread safety: none; the owner serialises calls.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "engine/env/env.h"
#include "engine/storage/pager.h"
#include "engine/storage/scan.h"
#include "format/file_header.h"
#include "format/page.h"
#include "format/records.h"

namespace agentmem::engine {

enum class SyncMode { kFull, kNormal, kOff };

struct LogOptions {
  Env* env = nullptr;  // null: Env::Posix()
  bool read_only = false;
  SyncMode sync = SyncMode::kFull;
};

// What a new file starts with (Log::Create).
struct NewLog {
  uint64_t salt = 0;  // 0: random
  uint32_t page_size = 4096;
  int64_t created_at = 0;
  uint16_t version = format::kBaseVersion;  // the header's read and write version
  // The one record of the first transaction's meta page (an encoded
  // MetaRecord: the file's settings).
  std::string meta;
  // A file whose permissions and owner the new file takes ("" none).
  std::string create_like;
};

// Packs one transaction's records into pages starting at a file offset, and
// closes it with its commit page. Records of one type share a page until it
// is full; a record of another type starts a new page.
class TxnWriter {
 public:
  TxnWriter(uint64_t start, const format::FileHeader& header)
      : start_(start), pos_(start), salt_(header.salt), page_size_(header.page_size) {}
  // Adds one encoded record; returns where it goes. `incompressible` is how
  // many of its bytes zstd is not expected to shrink (a dense vector's): a
  // page whose other bytes are under an eighth of it is stored without
  // trying, since compression would not save the eighth it must (EncodePage).
  RecordLoc Add(format::PageType type, std::string_view record, size_t incompressible = 0);
  // Adds a record on a page of its own; `prepared`, when given and its raw
  // bytes are that page's payload, is what the page stores (made ahead).
  void AddAlone(format::PageType type, std::string_view record,
                const format::StoredPayload* prepared = nullptr);
  // Record pages so far (the page being filled included).
  uint32_t pages() const { return pages_ + (count_ > 0 ? 1 : 0); }
  // Closes the last record page and appends the commit page; fills in c's
  // txn_start and page_count. Returns the transaction's bytes.
  std::string Finish(format::CommitRecord* c);
  // The last episode page of the transaction, as Pager::ReadPage would return
  // it once the transaction is written (null when it has none). REQUIRES:
  // Finish() was called.
  PageRef LastEpisodePage() const;

 private:
  void ClosePage(const format::StoredPayload* prepared = nullptr);

  uint64_t start_, pos_;
  uint64_t salt_;
  uint32_t page_size_;
  uint32_t pages_ = 0;  // closed record pages
  std::string buf_, payload_;
  format::PageType type_ = format::PageType::kEpisodes;
  uint32_t count_ = 0;  // records on the page being filled
  size_t incompressible_ = 0;  // of the page being filled (Add)
  // The last episode page closed: its header bytes, offset and payload.
  std::string episodes_head_, episodes_payload_;
  uint64_t episodes_offset_ = 0;
};

class Log {
 public:
  using ApplyFn = std::function<Status(ScannedTxn&)>;

  // Creates the file at `path` (header, superblocks and a first transaction
  // of one meta page), atomically (env/env.h). A file already there is left
  // as it is (not an error).
  static Status Create(const std::string& path, const LogOptions& o, const NewLog& n);
  // Opens the file, reads its header and its newest valid superblock; the
  // snapshot starts where that superblock says (scan_from). Nothing is
  // scanned yet (Refresh).
  static Status Open(const std::string& path, const LogOptions& o, std::unique_ptr<Log>* out);
  ~Log();
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  // ---- the snapshot's place in the log
  uint64_t end() const { return end_; }  // just past the last applied commit
  uint64_t seq() const { return seq_; }  // its commit_seq
  uint64_t pages() const { return pages_; }
  uint64_t torn_bytes() const { return torn_bytes_; }
  uint64_t reserve_bytes() const { return reserve_bytes_; }  // zeros after end()
  // What Append writes after a transaction that passes the end of the file.
  static constexpr uint64_t kReserveBytes = 256 << 10;
  uint64_t syncs() const { return syncs_; }
  uint64_t synced_through() const { return synced_through_; }
  uint64_t checkpoint_end() const { return checkpoint_end_; }    // just past the newest checkpoint known
  uint64_t checkpoint_size() const { return checkpoint_size_; }  // its bytes
  const format::FileHeader& header() const { return header_; }
  // The newest valid superblock, as of open or this log's last superblock write.
  const format::Superblock& superblock() const { return superblock_; }
  File* file() const { return file_.get(); }
  Pager& pager() { return pager_; }
  const std::string& path() const { return path_; }

  // Scans forward from the snapshot, calling apply() for each committed
  // transaction, and moves the snapshot to the last one. With `exclusive`
  // (the write lock held) a torn tail is cut off.
  Status Refresh(bool exclusive, const ApplyFn& apply);
  // Scans every transaction from the start of the file (Check), leaving the
  // snapshot where it is.
  Status ScanAll(const ApplyFn& apply, ScanResult* res);
  // Whether commits may have landed past the snapshot: the file's size
  // changed, a torn tail was seen (a writer may have cut it and committed
  // exactly up to the same size), or the reserve no longer starts with zeros.
  Status MayHaveMore(bool* more);
  // Whether the file at path() is no longer the one this log has open (a
  // VACUUM replaced it).
  bool Replaced() const;
  // The transaction `pages` long (the commit page counted) that ends at
  // `end` with commit `seq` was applied: the snapshot moves past it.
  void Advance(uint64_t end, uint64_t seq, uint64_t pages);
  // A checkpoint transaction from `start` to `end` was applied.
  void NoteCheckpoint(uint64_t start, uint64_t end);
  // Sets the counters that a checkpoint's state records.
  void set_pages(uint64_t pages) { pages_ = pages; }

  // ---- the write lock
  bool write_locked() const { return write_locked_; }
  // Takes the write lock if it is free, without waiting. *acquired stays
  // false when another handle holds it; *replaced says the file was replaced
  // (the lock was not kept: that file's handles do the work).
  Status TryLock(bool* acquired, bool* replaced);
  void Unlock();
  // Invariant (7): under sync=FULL, the bytes before the next transaction are
  // made durable before its commit record vouches for them.
  Status SyncBeforeWrite();

  // ---- writing. REQUIRES: the write lock.
  // Writes a transaction (TxnWriter) at end(); under sync=FULL syncs it.
  Status Append(const std::string& txn);
  // Writes a checkpoint's bytes from end() on, then syncs: `write` calls
  // put(offset, bytes) for each piece (offsets at or after end(), each byte
  // once, in any order), and the sync covers up to the last byte put. A
  // failed write cuts the file back to end() (the space is given back; the
  // log stays usable); so do pieces whose sizes do not add up to the extent
  // they cover from end() (kInternal: a hole or an overlap).
  using Put = std::function<Status(uint64_t offset, std::string_view bytes)>;
  Status AppendAndSync(const std::function<Status(const Put& put)>& write);
  // Syncs the file; a failure is sticky.
  Status Sync();
  // Syncs the file: every byte before end() is then known synced.
  Status SyncAll();
  // Writes the next superblock (taking the write lock if it is free; skipped
  // when another handle holds it), after cutting off the reserve: every byte
  // before end() is synced; with
  // `checkpoint` (the first page of a checkpoint transaction that ends at
  // end()) it points there.
  Status WriteSuperblock(uint64_t checkpoint = 0);

  // A failed write or sync: every later write is refused.
  const Status& sticky() const { return sticky_; }
  void SetSticky(Status s) { sticky_ = std::move(s); }

 private:
  Log(std::string path, LogOptions o) : path_(std::move(path)), opts_(o) {}
  Status ReadHead();
  // Whether nothing changed after end() since the last refresh or write:
  // the file has the same size, and the reserve still starts with zeros.
  Status Unchanged(bool* unchanged);
  // Truncates the file to end() (a torn tail, or the reserve); a failure is
  // sticky.
  Status CutAtEnd();

  std::string path_;
  LogOptions opts_;
  std::unique_ptr<File> file_;
  FileId file_id_;  // the identity of file_ when it was opened
  format::FileHeader header_;
  format::Superblock superblock_;
  uint64_t end_ = format::kFirstPageOffset;
  uint64_t seq_ = 0;
  uint64_t scanned_size_ = 0;  // file size at the last refresh or write
  uint64_t torn_bytes_ = 0;
  uint64_t reserve_bytes_ = 0;
  uint64_t pages_ = 0;
  uint64_t checkpoint_end_ = format::kFirstPageOffset;
  uint64_t checkpoint_size_ = 0;
  bool write_locked_ = false;
  uint64_t synced_through_ = 0;  // every byte before this offset is known synced
  uint64_t syncs_ = 0;
  Status sticky_;
  Pager pager_;
};

}  // namespace agentmem::engine

// engine/storage/scan.h -- the forward scan over committed transactions: recovery on
// open, and the refresh that brings a handle's snapshot up to date with
// commits made by other handles (docs/format.md §6, docs/architecture.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/env/env.h"
#include "format/file_header.h"
#include "format/page.h"
#include "format/records.h"

namespace agentmem::engine {

struct DecodedPage {
  uint64_t offset = 0;
  format::PageHeader header;
  std::string payload;  // decompressed, checksum verified
};

// One complete, valid transaction found by the scan.
struct ScannedTxn {
  std::vector<DecodedPage> pages;  // record pages in file order
  format::CommitRecord commit;
  uint64_t commit_offset = 0;
  uint64_t end = 0;  // offset just past the commit page
};

struct ScanResult {
  uint64_t end = 0;          // offset just past the last valid commit
  uint64_t commit_seq = 0;   // its sequence number
  uint64_t file_size = 0;
  uint64_t torn_bytes = 0;   // bytes after `end` that are not part of a commit
  uint64_t reserve_bytes = 0;  // or zeros from `end` to the end of the file instead
  uint64_t pages = 0;        // pages in the transactions applied by this scan
  uint64_t commits = 0;      // transactions applied by this scan
  bool damage = false;       // the scan failed because a bad page is vouched for
};

// Scans forward from `from` (just past the commit numbered `seq`, or the first
// page offset with seq 0), calling apply() for each valid transaction in order.
//
// The scan stops at the first page that is missing, cut short or invalid.
// Zeros from the end of the last commit to the end of the file are the log's
// reserve (docs/format.md §6.4), not a torn tail. Otherwise the
// bytes from there on are a torn tail -- ignored -- unless a valid commit
// page lies beyond the bad page whose durable_through is past it, or the
// newest superblock vouches for it (`vouched_through`): then the
// bad page had been synced before that later commit was written, so it is
// damage, and the scan fails with AGENTMEM_CORRUPT_* naming the bad page.
// Errors: kCorrupt*, kIoErr*, or whatever apply() returns.
// `vouched_through` is the durable_through of the newest superblock: a bad
// page before it is damage too.
Status ScanLog(File* file, const format::FileHeader& header, uint64_t from, uint64_t seq,
               uint64_t vouched_through, const std::function<Status(ScannedTxn&)>& apply,
               ScanResult* result);

// The bytes of the graph pages (type 6) and checkpoint pages (type 8) from
// the first page up to `end`, found by reading each page's header only (no
// checksum): the derived data that a checkpoint starting at `end` makes
// redundant. Stops early, with what it has counted, at a header that could
// not start a page. Errors: kIoErr*.
Status DerivedBytesBefore(File* file, uint64_t salt, uint64_t end, uint64_t* bytes);

// Reads committed transactions one at a time, in file order, from `from`
// (just past the commit numbered `seq`, or the first page offset with seq 0)
// up to `until`, the end of a commit that a scan has already applied (a
// handle's snapshot). Every byte before `until` belongs to committed
// transactions, so nothing there is a torn tail: a page that does not
// validate, or a commit page that does not match its transaction, is damage.
// Reads through a window of 1 MiB; holds one transaction's pages at a time.
// Not thread safe. REQUIRES: `file` outlives the reader.
class TxnReader {
 public:
  TxnReader(File* file, uint64_t salt, uint64_t from, uint64_t seq, uint64_t until);
  ~TxnReader();
  // The next transaction in *txn (checkpoint pages with an empty payload),
  // or *done once `until` is reached.
  // Errors: kCorrupt* naming the damaged page, kIoErr*, kNoMem.
  Status Next(ScannedTxn* txn, bool* done);
  uint64_t pos() const;  // just past the last transaction read
  uint64_t seq() const;  // its commit_seq

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads and validates single pages at any 16-byte aligned offset, through the
// scan's read window (salvage: engine/memory/recover.cc walks a damaged file page by
// page and looks for the next valid page after damage).
class PageReader {
 public:
  // `mapped`: the file's first `file_size` bytes (File::MapShared()), read
  // there instead of through the window; views then point into them.
  PageReader(File* file, uint64_t file_size, uint64_t salt, const char* mapped = nullptr);
  ~PageReader();
  // The page at `pos`, validated as the scan validates it (docs/format.md
  // §4.6). A checkpoint page's payload is left empty unless `checkpoint_payload`.
  // Errors: kCorrupt* (no valid page there), kIoErr*.
  Status Read(uint64_t pos, DecodedPage* out, bool checkpoint_payload = false);
  // The record page at `pos`, validated as Read() does, its payload in
  // *payload: a view of the read window for a page stored uncompressed, else
  // of *storage; valid until the next call. Errors: as Read(), and
  // kCorruptPage for a checkpoint page.
  Status ReadView(uint64_t pos, format::PageHeader* header, std::string* storage,
                  std::string_view* payload);
  // Whether the 32 bytes at `pos` could start a valid page (salt, page
  // number, known type): the cheap filter before Read() when resynchronising.
  Status Plausible(uint64_t pos, bool* plausible);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agentmem::engine

// engine/storage/pager.h -- reads pages from the file, verifies them, and
// keeps the decoded ones in a cache bounded by bytes.
//
// Every page the engine reads from a database file is checked by one
// function, Pager::Verify (header, checksum, decompression; docs/format.md
// §4). Pager::ReadPage is the one function that reads a page from the file
// by itself: it reads the header, then the whole page, verifies it, splits a
// record page into its records, and keeps the result in an LRU cache. The
// log scan (engine/storage/scan.cc) reads through its own window for sequential
// reads and verifies each page with Pager::Verify.
//
// Caveats:
//  - The cache is bounded by bytes, not pages (kDefaultBudget unless
//    set_budget() says otherwise). A page is charged its decompressed
//    payload, its record table and a fixed overhead (kEntryOverhead). A page
//    whose charge exceeds the whole budget is returned but not kept.
//  - Pages are handed out as shared_ptr: a reader holding one keeps it valid
//    after the cache evicted it, so memory is bounded by the budget plus the
//    pages that live readers still hold.
//  - A page that fails verification is never cached; the next read of it
//    reads the file again.
//  - The cache is keyed by offset and trusts that a page once verified at an
//    offset stays the same (pages are only appended, docs/format.md §1). A
//    file replaced under the handle (VACUUM) calls for Clear() or Reset().
//  - Thread safe: the cache is guarded by a mutex; the File must allow
//    concurrent ReadAt (every Env's does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/env/env.h"
#include "format/page.h"
#include "format/status.h"

namespace agentmem::engine {

// Where a record lives: the page's offset and the record's index in it.
struct RecordLoc {
  uint64_t page_offset = 0;
  uint32_t slot = 0;
};

// One verified page: its header, its payload (decompressed) and, for a record
// page, its records (views into payload). Immutable once made.
struct Page {
  uint64_t offset = 0;
  format::PageHeader header;
  std::string payload;
  std::vector<std::string_view> records;  // empty for commit and checkpoint pages
};
using PageRef = std::shared_ptr<const Page>;

class Pager {
 public:
  // 8 MiB: about 2,000 pages at the default page_size of 4096, four times
  // what a fixed cache of 512 pages held, and small next to the indexes.
  static constexpr size_t kDefaultBudget = size_t{8} << 20;
  // Charged per cached page on top of its payload and record table: the
  // Page, its list and map nodes, the shared_ptr control block.
  static constexpr size_t kEntryOverhead = 160;

  Pager() = default;
  Pager(File* file, uint64_t salt) : file_(file), salt_(salt) {}
  Pager(const Pager&) = delete;
  Pager& operator=(const Pager&) = delete;

  // Empties the cache and reads `file` (whose header holds `salt`) from now
  // on. `file` may be null: ReadPage then fails until the next Reset().
  void Reset(File* file, uint64_t salt);

  // The page at `offset`: from the cache, or read from the file and
  // verified (Verify), its records split (format::SplitRecords), and cached
  // when `keep` and its charge fits the budget (keep = false: a page read
  // once, such as a checkpoint's, that should not push others out). On
  // success *out holds the page; on failure *out is null and nothing was
  // cached.
  // Errors: kCorruptChecksum, kCorruptPage (also for a page cut short by the
  // end of the file), kIoErr*, kNoMem; kMisuse without a file.
  Status ReadPage(uint64_t offset, PageRef* out, bool keep = true);

  // Caches `page`, which this handle wrote at page->offset and whose write
  // succeeded, as ReadPage would have after reading it back (header, payload
  // decompressed, records split). A page already cached, or whose charge
  // exceeds the budget, is not kept. The writer keeps the page its next
  // commit is likely to read (a session's latest episodes).
  void Keep(PageRef page);

  // Checks a whole page held in memory (PaddedPageSize bytes, more are
  // ignored) that was read at `offset` of a file whose header holds `salt`:
  // page header, checksum, and decompression. On success sets *header and
  // *payload (decompressed); on failure leaves them unspecified.
  // Every page read from a database file is verified here. With `view`, the
  // payload is left where it lies when the page is stored uncompressed
  // (format::DecodePage).
  // Errors: kCorruptChecksum, kCorruptPage, kNoMem.
  static Status Verify(std::string_view page, uint64_t offset, uint64_t salt,
                       format::PageHeader* header, std::string* payload,
                       std::string_view* view = nullptr);

  // Drops every cached page (readers holding one keep it).
  void Clear();
  // Sets the byte budget and evicts down to it. 0 caches nothing.
  void set_budget(size_t bytes);
  size_t budget() const;

  // Counters, for tests and statistics.
  uint64_t hits() const;
  uint64_t misses() const;
  size_t bytes_held() const;  // charged bytes of the cached pages, <= budget()
  size_t pages_held() const;

  // What a page is charged in the cache.
  static size_t ChargeOf(const Page& page);

 private:
  struct Entry {
    PageRef page;
    size_t charge = 0;
  };
  using Lru = std::list<Entry>;  // most recently used first

  Status Load(uint64_t offset, PageRef* out) const;
  void EvictTo(size_t bytes);  // REQUIRES: mu_ held

  File* file_ = nullptr;
  uint64_t salt_ = 0;
  mutable std::mutex mu_;
  size_t budget_ = kDefaultBudget;
  size_t held_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
  Lru lru_;
  std::unordered_map<uint64_t, Lru::iterator> index_;
};

}  // namespace agentmem::engine

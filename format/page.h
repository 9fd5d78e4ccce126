// format/page.h -- the page: the unit the file is appended in (docs/format.md §4).
//
// A page is a 32-byte header, a payload of `length` bytes, and zero padding up
// to the next multiple of 16. It starts at a 16-byte aligned offset, and its
// page number is that offset divided by 16, so a valid page copied to another
// place no longer validates. The checksum covers every byte of the page after
// the checksum field, padding included.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "format/status.h"

namespace agentmem::format {

enum class PageType : uint8_t {
  kEpisodes = 1,  // episode records
  kBlocks = 2,    // block versions
  kFacts = 3,     // fact records
  kCommit = 4,    // the commit record that ends a transaction
  kMeta = 5,      // file settings (vector space, limits) as key/value pairs
  kGraph = 6,     // one HNSW graph image (a delta of this transaction's inserts)
  kText = 7,      // the BM25 terms of this transaction's episodes
  kCheckpoint = 8,  // one section of a checkpoint (format/checkpoint.h); never compressed
  kForget = 9,    // forget records: what the transaction makes invisible
};
const char* PageTypeName(uint8_t type);  // "episodes", …; "unknown" otherwise
bool IsKnownPageType(uint8_t type);

constexpr uint32_t kPageHeaderSize = 32;
constexpr uint32_t kMaxPagePayload = 1u << 30;
// A zstd payload decompresses to at most this many times its stored length
// (docs/format.md §4.4), so that what a reader allocates for a page is
// bounded by the bytes the file really holds.
constexpr uint32_t kMaxCompressionRatio = 32;
constexpr uint8_t kPageFlagZstd = 1;

struct PageHeader {
  uint8_t type = 0;
  uint8_t flags = 0;
  uint32_t length = 0;      // payload bytes as stored
  uint64_t page_no = 0;     // offset / 16
  uint32_t raw_length = 0;  // payload bytes after decompression
  uint32_t record_count = 0;
};

inline uint64_t PageNoOf(uint64_t offset) { return offset / 16; }
// Bytes the page occupies in the file, padding included.
inline uint64_t PaddedPageSize(uint32_t length) {
  return (uint64_t{kPageHeaderSize} + length + 15) & ~uint64_t{15};
}

// The page checksum rule (docs/format.md §4.1): bytes 0..3 of a page hold
// the masked CRC-32C of every later byte up to the end of its padding. Fed
// the page's bytes in file order, in pieces of any size (a page of hundreds
// of megabytes need not be in memory at once); every page checksum, written
// or checked, goes through here.
class PageChecksum {
 public:
  // The next bytes of the page, from its first byte on.
  void Update(std::string_view piece);
  // Once the whole padded page was fed: whether the stored value matches.
  bool Matches() const { return fed_ >= 4 && stored_ == crc_; }
  uint32_t stored() const { return stored_; }    // unmasked
  uint32_t computed() const { return crc_; }     // unmasked
  // The value to store at bytes 0..3 of a page fed whole (its first four
  // bytes whatever they are).
  uint32_t Masked() const;

 private:
  uint64_t fed_ = 0;
  uint32_t stored_ = 0;  // bytes 0..3 as fed, unmasked
  char head_[4] = {};
  uint32_t crc_ = 0;
};

// The checksum of a whole page in memory (PageChecksum fed once).
PageChecksum ChecksumOf(std::string_view page);

// Builds a complete page for `offset`. The payload is zstd-compressed when
// `try_compress` is set and compression saves at least an eighth.
std::string EncodePage(PageType type, uint64_t offset, uint64_t salt, uint32_t record_count,
                       std::string_view payload, bool try_compress);

// A payload as EncodePage(..., try_compress = true) stores it, made ahead
// of the page (on another thread): `raw`, and `stored`, its zstd frame when
// compression saves at least an eighth (zstd), else a copy of raw.
struct StoredPayload {
  std::string raw, stored;
  bool zstd = false;
};
StoredPayload PreparePayload(std::string_view raw);
// The page EncodePage(type, offset, salt, record_count, p.raw, true) builds.
std::string EncodePage(PageType type, uint64_t offset, uint64_t salt, uint32_t record_count,
                       const StoredPayload& p);

// The same in place, uncompressed: *page holds kPageHeaderSize bytes of
// room, then the payload; the header is written into the room and the
// padding appended. For a payload too large to copy twice (a checkpoint's
// sections).
// REQUIRES: page->size() >= kPageHeaderSize.
void SealPage(PageType type, uint64_t offset, uint64_t salt, uint32_t record_count,
              std::string* page);

// The same page written in pieces, uncompressed, for a payload that need
// not be held whole (a checkpoint's bm25 section): each piece of the
// `length` payload bytes in order through Add(), then padding(), then
// header() -- the bytes SealPage makes, so that a writer can put the
// payload after kPageHeaderSize bytes of room and the header in front last.
class PageStream {
 public:
  PageStream(PageType type, uint64_t offset, uint64_t salt, uint32_t record_count, uint32_t length);
  void Add(std::string_view piece);
  // The zeros after the payload, up to PaddedPageSize(length).
  std::string padding() const;
  // The kPageHeaderSize header bytes, checksum included.
  // REQUIRES: every payload byte was added.
  std::string header() const;
  uint64_t size() const { return PaddedPageSize(length_); }

 private:
  std::string header_;  // checksum 0
  uint32_t length_;
  PageChecksum sum_;
};

// Checks the 32 header bytes of a page expected at `offset` without the
// checksum: salt, page number, known type, flags, length bounds (the
// compression ratio included). Used by the
// recovery scan to find where a page ends before reading all of it.
// Errors: kCorruptPage.
Status PeekPageHeader(std::string_view header, uint64_t offset, uint64_t salt, PageHeader* out);

// Validates a whole page (PaddedPageSize bytes at `offset`) and returns its
// payload, decompressed. With `view`, *view is the payload: `page`'s own
// bytes when it is stored uncompressed (no copy; *payload is left alone),
// else *payload. Errors: kCorruptChecksum, kCorruptPage.
Status DecodePage(std::string_view page, uint64_t offset, uint64_t salt, PageHeader* header,
                  std::string* payload, std::string_view* view = nullptr);

}  // namespace agentmem::format

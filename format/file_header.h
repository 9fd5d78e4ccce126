// format/file_header.h -- the file header and the two superblocks
// (docs/format.md §3). The header is written once, at creation. The superblocks
// are the only bytes ever overwritten in place: they alternate (the higher valid
// generation wins), each sits in its own 512-byte sector, and each only ever
// points at pages that were already synced.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "format/status.h"

namespace agentmem::format {

constexpr char kMagic[8] = {'\x89', 'A', 'G', 'M', '\r', '\n', '\x1a', '\n'};
// The newest versions this library reads and writes (docs/format.md §7).
constexpr uint16_t kReadVersion = 2;
constexpr uint16_t kWriteVersion = 2;
// The versions a new file records: 1, or 2 when its vectors are float16 or
// int8 (vector.type, §5.1), which a version 1 library cannot read.
constexpr uint16_t kBaseVersion = 1;
constexpr uint16_t kVectorTypeVersion = 2;
constexpr uint32_t kDefaultPageSize = 4096;
constexpr uint32_t kPageAlign = 16;
constexpr uint64_t kHeaderSize = 64;
constexpr uint64_t kSuperblockSize = 64;
constexpr uint64_t kSuperblockOffset[2] = {512, 1024};
constexpr uint64_t kFirstPageOffset = 4096;

struct FileHeader {
  uint16_t read_version = kBaseVersion;
  uint16_t write_version = kBaseVersion;
  uint32_t page_size = kDefaultPageSize;
  uint32_t page_align = kPageAlign;
  uint32_t first_page = static_cast<uint32_t>(kFirstPageOffset);
  uint64_t salt = 0;
  int64_t created_at = 0;  // unix microseconds
  uint32_t flags = 0;
};

// Encodes exactly kHeaderSize bytes.
std::string EncodeFileHeader(const FileHeader& h);
// Validates and decodes the first kHeaderSize bytes of a file.
// Errors: kNotADb (bad magic or too short), kFormatVersion (read_version newer
// than this library), kCorruptHeader (checksum or field out of range).
Status DecodeFileHeader(std::string_view bytes, FileHeader* out);

struct Superblock {
  uint64_t generation = 0;
  uint64_t salt = 0;
  uint64_t scan_from = kFirstPageOffset;  // recovery starts its forward scan here
  uint64_t commit_seq = 0;                // last commit sequence number before scan_from
  // Every byte of the file before this offset had been synced when the
  // superblock was written (0: nothing is vouched for). Recovery treats a bad
  // page before it as damage, never as a torn tail.
  uint64_t durable_through = 0;
  // Offset of the first page of the checkpoint transaction that ends just
  // before scan_from (0: none; then scan_from is the first page and
  // commit_seq 0). Recovery loads the checkpoint, then scans from scan_from.
  uint64_t checkpoint = 0;
};

std::string EncodeSuperblock(const Superblock& s);
// Errors: kCorruptSuperblock (magic, checksum or salt mismatch).
Status DecodeSuperblock(std::string_view bytes, uint64_t salt, Superblock* out);

}  // namespace agentmem::format

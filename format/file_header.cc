// format/file_header.cc -- see file_header.h and docs/format.md §3.
#include "format/file_header.h"

#include <cstring>

#include "format/coding.h"
#include "format/crc32c.h"

namespace agentmem::format {

std::string EncodeFileHeader(const FileHeader& h) {
  std::string b(kMagic, sizeof(kMagic));   // 0  8 magic
  PutFixed16(&b, h.read_version);          // 8  2
  PutFixed16(&b, h.write_version);         // 10 2
  PutFixed32(&b, h.page_size);             // 12 4
  PutFixed32(&b, h.page_align);            // 16 4
  PutFixed32(&b, h.first_page);            // 20 4
  PutFixed64(&b, h.salt);                  // 24 8
  PutFixed64(&b, static_cast<uint64_t>(h.created_at));  // 32 8
  PutFixed32(&b, h.flags);                 // 40 4
  b.append(16, '\0');                      // 44 16 reserved
  PutFixed32(&b, MaskCrc(Crc32c(b.data(), 60)));  // 60 4
  return b;
}

Status DecodeFileHeader(std::string_view bytes, FileHeader* out) {
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return Status(kNotADb, "file is not an agentmem database (bad magic)");
  }
  const char* p = bytes.data();
  FileHeader h;
  h.read_version = DecodeFixed16(p + 8);
  h.write_version = DecodeFixed16(p + 10);
  if (h.read_version > kReadVersion) {
    return StatusF(kFormatVersion,
                   "file format read version %u is newer than this library supports (%u): "
                   "upgrade agentmem to read this file",
                   h.read_version, kReadVersion);
  }
  uint32_t stored = UnmaskCrc(DecodeFixed32(p + 60));
  uint32_t actual = Crc32c(p, 60);
  if (stored != actual) {
    return AGENTMEM_CORRUPTION(kCorruptHeader, 0,
                               "file header: checksum mismatch (stored %08x, computed %08x)",
                               stored, actual);
  }
  h.page_size = DecodeFixed32(p + 12);
  h.page_align = DecodeFixed32(p + 16);
  h.first_page = DecodeFixed32(p + 20);
  h.salt = DecodeFixed64(p + 24);
  h.created_at = static_cast<int64_t>(DecodeFixed64(p + 32));
  h.flags = DecodeFixed32(p + 40);
  bool pow2 = h.page_size && (h.page_size & (h.page_size - 1)) == 0;
  if (!pow2 || h.page_size < 512 || h.page_size > 65536 || h.page_align != kPageAlign ||
      h.first_page != kFirstPageOffset || h.salt == 0) {
    return AGENTMEM_CORRUPTION(kCorruptHeader, 0,
                               "file header: field out of range (page_size %u, page_align %u, "
                               "first_page %u)",
                               h.page_size, h.page_align, h.first_page);
  }
  *out = h;
  return Status::OK();
}

std::string EncodeSuperblock(const Superblock& s) {
  std::string b("AGSB", 4);         // 0  4 magic
  PutFixed32(&b, 0);                // 4  4 reserved
  PutFixed64(&b, s.generation);     // 8  8
  PutFixed64(&b, s.salt);           // 16 8
  PutFixed64(&b, s.scan_from);      // 24 8
  PutFixed64(&b, s.commit_seq);     // 32 8
  PutFixed64(&b, s.durable_through);  // 40 8
  PutFixed64(&b, s.checkpoint);     // 48 8
  b.append(4, '\0');               // 56 4 reserved
  PutFixed32(&b, MaskCrc(Crc32c(b.data(), 60)));  // 60 4
  return b;
}

Status DecodeSuperblock(std::string_view bytes, uint64_t salt, Superblock* out) {
  if (bytes.size() < kSuperblockSize || std::memcmp(bytes.data(), "AGSB", 4) != 0) {
    return Status(kCorruptSuperblock, "superblock: bad magic");
  }
  const char* p = bytes.data();
  uint32_t stored = UnmaskCrc(DecodeFixed32(p + 60));
  uint32_t actual = Crc32c(p, 60);
  if (stored != actual) {
    return StatusF(kCorruptSuperblock, "superblock: checksum mismatch (stored %08x, computed %08x)",
                   stored, actual);
  }
  Superblock s;
  s.generation = DecodeFixed64(p + 8);
  s.salt = DecodeFixed64(p + 16);
  s.scan_from = DecodeFixed64(p + 24);
  s.commit_seq = DecodeFixed64(p + 32);
  s.durable_through = DecodeFixed64(p + 40);
  s.checkpoint = DecodeFixed64(p + 48);
  if (s.salt != salt) return Status(kCorruptSuperblock, "superblock: salt does not match the file");
  // Without a checkpoint every scan starts at the first page; with one, the
  // scan starts after it and the checkpoint holds the state before it.
  bool plain = s.checkpoint == 0 && s.scan_from == kFirstPageOffset && s.commit_seq == 0;
  bool after_checkpoint = s.checkpoint >= kFirstPageOffset && s.checkpoint < s.scan_from &&
                          s.checkpoint % kPageAlign == 0 && s.scan_from % kPageAlign == 0 &&
                          s.commit_seq >= 1 && s.scan_from <= s.durable_through;
  if (!plain && !after_checkpoint) {
    return StatusF(kCorruptSuperblock, "superblock: scan_from %llu / checkpoint %llu out of range",
                   static_cast<unsigned long long>(s.scan_from),
                   static_cast<unsigned long long>(s.checkpoint));
  }
  *out = s;
  return Status::OK();
}

}  // namespace agentmem::format

// tests/format/file_header_test.cc -- the file header and the two superblocks
// (docs/format.md §3).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "format/coding.h"
#include "format/crc32c.h"
#include "format/file_header.h"

using namespace agentmem;
using namespace agentmem::format;

namespace {

constexpr uint64_t kSalt = 0x0123456789abcdefull;

FileHeader SampleHeader() {
  FileHeader h;
  h.page_size = 8192;
  h.salt = kSalt;
  h.created_at = 1767225600000000;
  return h;
}

Superblock SampleSuperblock() {
  Superblock s;
  s.generation = 7;
  s.salt = kSalt;
  s.checkpoint = 4096;  // a checkpoint transaction from 4096 to 8192
  s.scan_from = 8192;
  s.commit_seq = 12;
  s.durable_through = 8192 + 4000;
  return s;
}

// Recomputes the checksum at bytes 60..63 after a test has edited bytes 0..59.
void Reseal(std::string* b) { EncodeFixed32(b->data() + 60, MaskCrc(Crc32c(b->data(), 60))); }

bool SameHeader(const FileHeader& a, const FileHeader& b) {
  return a.read_version == b.read_version && a.write_version == b.write_version &&
         a.page_size == b.page_size && a.page_align == b.page_align &&
         a.first_page == b.first_page && a.salt == b.salt && a.created_at == b.created_at &&
         a.flags == b.flags;
}

bool SameSuperblock(const Superblock& a, const Superblock& b) {
  return a.generation == b.generation && a.salt == b.salt && a.scan_from == b.scan_from &&
         a.commit_seq == b.commit_seq && a.durable_through == b.durable_through &&
         a.checkpoint == b.checkpoint;
}

}  // namespace

TEST_CASE("the fixed places of the file are the ones docs/format.md gives") {
  CHECK(kHeaderSize == 64);
  CHECK(kSuperblockSize == 64);
  CHECK(kSuperblockOffset[0] == 512);
  CHECK(kSuperblockOffset[1] == 1024);
  CHECK(kFirstPageOffset == 4096);
  CHECK(kPageAlign == 16);
  // the header and each superblock sit alone in their own 512-byte sectors
  CHECK(kHeaderSize <= 512);
  CHECK(kSuperblockSize <= 512);
  CHECK(kSuperblockOffset[0] % 512 == 0);
  CHECK(kSuperblockOffset[1] % 512 == 0);
  CHECK(kSuperblockOffset[1] >= kSuperblockOffset[0] + 512);
  CHECK(kFirstPageOffset >= kSuperblockOffset[1] + 512);
  CHECK(kReadVersion == 2);
  CHECK(kWriteVersion == 2);
  // A new file records version 1 unless it stores float16 vectors.
  CHECK(FileHeader{}.read_version == 1);
  CHECK(FileHeader{}.write_version == 1);
  CHECK(kBaseVersion == 1);
  CHECK(kVectorTypeVersion == 2);
}

TEST_CASE("the file header round-trips") {
  FileHeader h = SampleHeader();
  h.flags = 0;
  std::string b = EncodeFileHeader(h);
  REQUIRE(b.size() == kHeaderSize);
  FileHeader out;
  REQUIRE(DecodeFileHeader(b, &out).ok());
  CHECK(SameHeader(out, h));
}

TEST_CASE("the file header keeps a negative creation time and every page size from 512 to 65536") {
  for (uint32_t ps = 512; ps <= 65536; ps *= 2) {
    CAPTURE(ps);
    FileHeader h = SampleHeader();
    h.page_size = ps;
    h.created_at = -1;
    FileHeader out;
    REQUIRE(DecodeFileHeader(EncodeFileHeader(h), &out).ok());
    CHECK(SameHeader(out, h));
  }
}

TEST_CASE("the file header fields sit at the offsets docs/format.md gives") {
  FileHeader h = SampleHeader();
  h.flags = 0;
  std::string b = EncodeFileHeader(h);
  CHECK(b.substr(0, 8) == std::string("\x89" "AGM\r\n\x1a\n", 8));
  CHECK(DecodeFixed16(b.data() + 8) == 1);
  CHECK(DecodeFixed16(b.data() + 10) == 1);
  CHECK(DecodeFixed32(b.data() + 12) == 8192);
  CHECK(DecodeFixed32(b.data() + 16) == 16);
  CHECK(DecodeFixed32(b.data() + 20) == 4096);
  CHECK(DecodeFixed64(b.data() + 24) == kSalt);
  CHECK(DecodeFixed64(b.data() + 32) == 1767225600000000);
  CHECK(DecodeFixed32(b.data() + 40) == 0);
  CHECK(b.substr(44, 16) == std::string(16, '\0'));
  CHECK(DecodeFixed32(b.data() + 60) == MaskCrc(Crc32c(b.data(), 60)));
}

TEST_CASE("a file that does not start with the magic is not an agentmem database") {
  std::string good = EncodeFileHeader(SampleHeader());
  FileHeader out;
  for (int i = 0; i < 8; i++) {
    CAPTURE(i);
    std::string bad = good;
    bad[i] ^= 0x20;
    Reseal(&bad);
    Status s = DecodeFileHeader(bad, &out);
    CHECK(s.code() == kNotADb);
    CHECK(s.message().find("not an agentmem database") != std::string::npos);
  }
  CHECK(DecodeFileHeader("SQLite format 3" + std::string(49, '\0'), &out).code() == kNotADb);
}

TEST_CASE("a header shorter than 64 bytes is not an agentmem database") {
  std::string good = EncodeFileHeader(SampleHeader());
  FileHeader out;
  for (size_t n = 0; n < kHeaderSize; n++) {
    CAPTURE(n);
    CHECK(DecodeFileHeader(good.substr(0, n), &out).code() == kNotADb);
  }
}

TEST_CASE("a header with a newer read version is refused with kFormatVersion") {
  FileHeader h = SampleHeader();
  h.read_version = kReadVersion + 1;
  FileHeader out;
  Status s = DecodeFileHeader(EncodeFileHeader(h), &out);
  CHECK(s.code() == kFormatVersion);
  CHECK(s.message().find("read version 3 is newer than this library supports (2)") !=
        std::string::npos);
  CHECK(s.message().find("upgrade agentmem") != std::string::npos);
  h.read_version = 0xffff;
  CHECK(DecodeFileHeader(EncodeFileHeader(h), &out).code() == kFormatVersion);
}

TEST_CASE("the read version is checked before the checksum") {
  // docs/format.md §7: bytes 0-11 keep their meaning in every version, so a
  // future version may change the rest of the header, checksum included.
  std::string b = EncodeFileHeader(SampleHeader());
  EncodeFixed16(b.data() + 8, kReadVersion + 1);
  b[61] ^= 0x55;  // and the checksum no longer matches
  FileHeader out;
  CHECK(DecodeFileHeader(b, &out).code() == kFormatVersion);
}

TEST_CASE("a header with a newer write version decodes, so older libraries can still read") {
  FileHeader h = SampleHeader();
  h.write_version = kWriteVersion + 1;
  FileHeader out;
  REQUIRE(DecodeFileHeader(EncodeFileHeader(h), &out).ok());
  CHECK(out.write_version == kWriteVersion + 1);
}

TEST_CASE("an older read version is accepted") {
  FileHeader h = SampleHeader();
  h.read_version = 0;
  FileHeader out;
  REQUIRE(DecodeFileHeader(EncodeFileHeader(h), &out).ok());
  CHECK(out.read_version == 0);
}

TEST_CASE("every single-bit flip in the file header is detected") {
  const std::string good = EncodeFileHeader(SampleHeader());
  FileHeader out;
  for (size_t bit = 0; bit < kHeaderSize * 8; bit++) {
    CAPTURE(bit);
    std::string bad = good;
    bad[bit / 8] ^= static_cast<char>(1 << (bit % 8));
    Status s = DecodeFileHeader(bad, &out);
    size_t byte = bit / 8;
    if (byte < 8) {
      CHECK(s.code() == kNotADb);  // magic
    } else if (byte < 10 && DecodeFixed16(bad.data() + 8) > kReadVersion) {
      CHECK(s.code() == kFormatVersion);  // read_version made larger
    } else {
      CHECK(s.code() == kCorruptHeader);
      CHECK(s.page_no() == 0);
      CHECK(s.message().find("file header: checksum mismatch") != std::string::npos);
    }
  }
}

TEST_CASE("a checksummed header with a field out of range is corrupt") {
  FileHeader out;
  auto check_refused = [&](FileHeader h) {
    Status s = DecodeFileHeader(EncodeFileHeader(h), &out);
    CHECK(s.code() == kCorruptHeader);
    CHECK(s.message().find("field out of range") != std::string::npos);
  };
  for (uint32_t ps : {0u, 256u, 1000u, 4095u, 4097u, 131072u, 0x80000000u}) {
    CAPTURE(ps);
    FileHeader h = SampleHeader();
    h.page_size = ps;
    check_refused(h);
  }
  FileHeader h = SampleHeader();
  h.page_align = 8;
  check_refused(h);
  h = SampleHeader();
  h.first_page = 8192;
  check_refused(h);
  h = SampleHeader();
  h.salt = 0;
  check_refused(h);
}

TEST_CASE("header flags and reserved bytes are carried by the checksum and not interpreted") {
  // Version 1 writers write zeros; a version 1 reader does not look at them
  // (docs/format.md §3.1). A future feature must bump a version instead.
  FileHeader h = SampleHeader();
  h.flags = 0x80000001u;
  std::string b = EncodeFileHeader(h);
  b[50] = 'x';
  Reseal(&b);
  FileHeader out;
  REQUIRE(DecodeFileHeader(b, &out).ok());
  CHECK(out.flags == 0x80000001u);
}

// ---------------------------------------------------------------- superblocks

TEST_CASE("a superblock round-trips") {
  Superblock s = SampleSuperblock();
  std::string b = EncodeSuperblock(s);
  REQUIRE(b.size() == kSuperblockSize);
  Superblock out;
  REQUIRE(DecodeSuperblock(b, kSalt, &out).ok());
  CHECK(SameSuperblock(out, s));
}

TEST_CASE("the superblock fields sit at the offsets docs/format.md gives") {
  std::string b = EncodeSuperblock(SampleSuperblock());
  CHECK(b.substr(0, 4) == "AGSB");
  CHECK(DecodeFixed32(b.data() + 4) == 0);
  CHECK(DecodeFixed64(b.data() + 8) == 7);
  CHECK(DecodeFixed64(b.data() + 16) == kSalt);
  CHECK(DecodeFixed64(b.data() + 24) == 8192);
  CHECK(DecodeFixed64(b.data() + 32) == 12);
  CHECK(DecodeFixed64(b.data() + 40) == 8192 + 4000);
  CHECK(DecodeFixed64(b.data() + 48) == 4096);
  CHECK(b.substr(56, 4) == std::string(4, '\0'));
  CHECK(DecodeFixed32(b.data() + 60) == MaskCrc(Crc32c(b.data(), 60)));
}

TEST_CASE("a superblock with bad magic is corrupt") {
  std::string b = EncodeSuperblock(SampleSuperblock());
  b[0] = 'X';
  Reseal(&b);
  Superblock out;
  Status s = DecodeSuperblock(b, kSalt, &out);
  CHECK(s.code() == kCorruptSuperblock);
  CHECK(s.message().find("bad magic") != std::string::npos);
  CHECK(DecodeSuperblock(std::string(64, '\0'), kSalt, &out).code() == kCorruptSuperblock);
  CHECK(DecodeSuperblock(b.substr(0, 63), kSalt, &out).code() == kCorruptSuperblock);
}

TEST_CASE("a superblock from another file is refused by its salt") {
  std::string b = EncodeSuperblock(SampleSuperblock());
  Superblock out;
  Status s = DecodeSuperblock(b, kSalt + 1, &out);
  CHECK(s.code() == kCorruptSuperblock);
  CHECK(s.message().find("salt does not match") != std::string::npos);
}

TEST_CASE("a superblock whose scan start is before the first page or unaligned is refused") {
  Superblock out;
  for (uint64_t from : {uint64_t{0}, uint64_t{4080}, uint64_t{4097}, uint64_t{4104}}) {
    CAPTURE(from);
    Superblock s = SampleSuperblock();
    s.scan_from = from;
    Status st = DecodeSuperblock(EncodeSuperblock(s), kSalt, &out);
    CHECK(st.code() == kCorruptSuperblock);
    CHECK(st.message().find("scan_from") != std::string::npos);
  }
  Superblock s = SampleSuperblock();
  s.checkpoint = 0;
  s.scan_from = 4096;
  s.commit_seq = 0;
  CHECK(DecodeSuperblock(EncodeSuperblock(s), kSalt, &out).ok());
}

TEST_CASE("a superblock checkpoint must lie before scan_from and be vouched for") {
  Superblock out;
  auto refused = [&](Superblock s) {
    Status st = DecodeSuperblock(EncodeSuperblock(s), kSalt, &out);
    return st.code() == kCorruptSuperblock && st.message().find("checkpoint") != std::string::npos;
  };
  Superblock s = SampleSuperblock();
  s.checkpoint = 8192;  // not before scan_from
  CHECK(refused(s));
  s = SampleSuperblock();
  s.checkpoint = 2048;  // before the first page
  CHECK(refused(s));
  s = SampleSuperblock();
  s.checkpoint = 4100;  // unaligned
  CHECK(refused(s));
  s = SampleSuperblock();
  s.commit_seq = 0;  // a checkpoint ends a commit
  CHECK(refused(s));
  s = SampleSuperblock();
  s.durable_through = 8000;  // the checkpoint must be synced
  CHECK(refused(s));
  s = SampleSuperblock();
  s.checkpoint = 0;  // no checkpoint: the scan starts at the first page
  CHECK(refused(s));
  CHECK(DecodeSuperblock(EncodeSuperblock(SampleSuperblock()), kSalt, &out).ok());
}

TEST_CASE("a superblock without a checkpoint must start at the first page with no commit before it") {
  Superblock out;
  Superblock s = SampleSuperblock();
  s.checkpoint = 0;
  s.scan_from = kFirstPageOffset;
  s.commit_seq = 0;
  REQUIRE(DecodeSuperblock(EncodeSuperblock(s), kSalt, &out).ok());
  s.commit_seq = 3;  // commits before the first page cannot exist
  Status st = DecodeSuperblock(EncodeSuperblock(s), kSalt, &out);
  CHECK(st.code() == kCorruptSuperblock);
  CHECK(st.message().find("out of range") != std::string::npos);
}

TEST_CASE("every single-bit flip in a superblock is detected") {
  const std::string good = EncodeSuperblock(SampleSuperblock());
  Superblock out;
  for (size_t bit = 0; bit < kSuperblockSize * 8; bit++) {
    CAPTURE(bit);
    std::string bad = good;
    bad[bit / 8] ^= static_cast<char>(1 << (bit % 8));
    Status s = DecodeSuperblock(bad, kSalt, &out);
    CHECK(s.code() == kCorruptSuperblock);
    if (bit >= 32) CHECK(s.message().find("checksum mismatch") != std::string::npos);
  }
}

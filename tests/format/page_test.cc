// tests/format/page_test.cc -- the page: header layout, padding, checksum,
// salt and page number binding, zstd payloads (docs/format.md §4).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <string>

#include "format/coding.h"
#include "format/crc32c.h"
#include "format/page.h"
#include "tests/util/crafted.h"
#include "tests/util/seed.h"

using namespace agentmem;
using namespace agentmem::format;

namespace {

constexpr uint64_t kSalt = 0x0123456789abcdefull;
constexpr uint64_t kOffset = 4096 + 7 * 16;  // any 16-aligned offset past the header

// Recomputes the checksum of a page after a test has edited it, so that the
// edit is seen by the checks behind the checksum.
void Reseal(std::string* page) {
  EncodeFixed32(page->data(), MaskCrc(Crc32c(page->data() + 4, page->size() - 4)));
}

std::string Text(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  static const char* words[] = {"memory ", "agent ", "user ", "said ", "Lisbon ", "tea ",
                                "moved ", "likes ", "the ", "a "};
  std::string s;
  while (s.size() < n) s += words[rng() % 10];
  s.resize(n);
  return s;
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

Status Decode(const std::string& page, uint64_t offset, uint64_t salt, std::string* payload,
              PageHeader* h = nullptr) {
  PageHeader local;
  return DecodePage(page, offset, salt, h ? h : &local, payload);
}

}  // namespace

TEST_CASE("page numbers are offsets divided by 16 and pages are padded to 16 bytes") {
  CHECK(PageNoOf(4096) == 256);
  CHECK(PageNoOf(4096 + 16) == 257);
  CHECK(PaddedPageSize(0) == 32);
  CHECK(PaddedPageSize(1) == 48);
  CHECK(PaddedPageSize(16) == 48);
  CHECK(PaddedPageSize(17) == 64);
  CHECK(PaddedPageSize(kMaxPagePayload) == uint64_t{kMaxPagePayload} + 32);
}

TEST_CASE("page type names and known types") {
  CHECK(std::string(PageTypeName(1)) == "episodes");
  CHECK(std::string(PageTypeName(2)) == "blocks");
  CHECK(std::string(PageTypeName(3)) == "facts");
  CHECK(std::string(PageTypeName(4)) == "commit");
  CHECK(std::string(PageTypeName(5)) == "meta");
  CHECK(std::string(PageTypeName(0)) == "unknown");
  CHECK(std::string(PageTypeName(6)) == "graph");
  CHECK(std::string(PageTypeName(7)) == "text");
  CHECK(std::string(PageTypeName(8)) == "checkpoint");
  CHECK(std::string(PageTypeName(9)) == "forget");
  CHECK(std::string(PageTypeName(10)) == "unknown");
  for (int t = 0; t < 256; t++) CHECK(IsKnownPageType(static_cast<uint8_t>(t)) == (t >= 1 && t <= 9));
}

TEST_CASE("the page header fields sit at the offsets docs/format.md gives") {
  std::string payload = "0123456789";
  std::string page = EncodePage(PageType::kFacts, kOffset, kSalt, 3, payload, false);
  REQUIRE(page.size() == 48);
  CHECK(DecodeFixed32(page.data()) == MaskCrc(Crc32c(page.data() + 4, 44)));  // 0  checksum
  CHECK(page[4] == 3);                                                          // 4  type
  CHECK(page[5] == 0);                                                          // 5  flags
  CHECK(DecodeFixed16(page.data() + 6) == 0);                                   // 6  reserved
  CHECK(DecodeFixed32(page.data() + 8) == 0x89abcdefu);                         // 8  salt (low 32)
  CHECK(DecodeFixed32(page.data() + 12) == 10);                                 // 12 length
  CHECK(DecodeFixed64(page.data() + 16) == kOffset / 16);                       // 16 page_no
  CHECK(DecodeFixed32(page.data() + 24) == 10);                                 // 24 raw_length
  CHECK(DecodeFixed32(page.data() + 28) == 3);                                  // 28 record_count
  CHECK(page.substr(32, 10) == payload);
  CHECK(page.substr(42) == std::string(6, '\0'));  // zero padding
}

TEST_CASE("pages round-trip without compression at every payload length up to 300") {
  for (uint32_t n = 0; n <= 300; n++) {
    CAPTURE(n);
    std::string payload = RandomBytes(n, n);
    std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, n, payload, false);
    CHECK(page.size() == PaddedPageSize(n));
    CHECK(page.size() % 16 == 0);
    PageHeader h;
    std::string out;
    Status s = Decode(page, kOffset, kSalt, &out, &h);
    REQUIRE(s.ok());
    CHECK(out == payload);
    CHECK(h.type == 1);
    CHECK(h.flags == 0);
    CHECK(h.length == n);
    CHECK(h.raw_length == n);
    CHECK(h.record_count == n);
    CHECK(h.page_no == kOffset / 16);
  }
}

TEST_CASE("a page sealed in place is byte for byte the page EncodePage builds") {
  for (uint32_t n : {0u, 1u, 15u, 16u, 17u, 300u, 70000u}) {
    CAPTURE(n);
    std::string payload = Text(n, n);  // compressible: SealPage never compresses
    std::string page(kPageHeaderSize, 'x');
    page += payload;
    SealPage(PageType::kCheckpoint, kOffset, kSalt, 1, &page);
    CHECK(page == EncodePage(PageType::kCheckpoint, kOffset, kSalt, 1, payload, false));
    std::string out;
    REQUIRE(Decode(page, kOffset, kSalt, &out).ok());
    CHECK(out == payload);
  }
}

TEST_CASE("a payload prepared ahead gives byte for byte the page EncodePage builds") {
  std::mt19937 rng(static_cast<uint32_t>(agentmem::test::Seed()));
  for (uint32_t n : {0u, 100u, 300u, 5000u}) {
    for (bool compressible : {true, false}) {
      CAPTURE(n);
      CAPTURE(compressible);
      std::string payload = Text(n, n);
      if (!compressible) {
        for (char& c : payload) c = static_cast<char>(rng());
      }
      const StoredPayload p = PreparePayload(payload);
      CHECK(p.raw == payload);
      CHECK(p.zstd == (compressible && n >= 300));
      const std::string page = EncodePage(PageType::kGraph, kOffset, kSalt, 1, p);
      CHECK(page == EncodePage(PageType::kGraph, kOffset, kSalt, 1, payload, true));
      std::string out;
      REQUIRE(Decode(page, kOffset, kSalt, &out).ok());
      CHECK(out == payload);
    }
  }
}

TEST_CASE("a page streamed in pieces is byte for byte the page SealPage makes") {
  for (uint32_t n : {0u, 1u, 15u, 16u, 17u, 300u, 70000u}) {
    for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 20}) {
      CAPTURE(n);
      CAPTURE(piece);
      const std::string payload = Text(n, n + 1);
      std::string sealed(kPageHeaderSize, '\0');
      sealed += payload;
      SealPage(PageType::kCheckpoint, kOffset, kSalt, 1, &sealed);
      PageStream stream(PageType::kCheckpoint, kOffset, kSalt, 1, n);
      std::string page(kPageHeaderSize, '\0');
      for (size_t at = 0; at < payload.size(); at += piece) {
        const std::string_view part = std::string_view(payload).substr(at, piece);
        stream.Add(part);
        page.append(part);
      }
      page += stream.padding();
      CHECK(page.size() == stream.size());
      page.replace(0, kPageHeaderSize, stream.header());
      CHECK(page == sealed);
    }
  }
}

TEST_CASE("a compressible payload is stored as a zstd frame and round-trips") {
  std::string payload = Text(20000, 1);
  std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, 42, payload, true);
  PageHeader h;
  std::string out;
  REQUIRE(Decode(page, kOffset, kSalt, &out, &h).ok());
  CHECK(out == payload);
  CHECK(h.flags == kPageFlagZstd);
  CHECK(h.raw_length == payload.size());
  CHECK(h.length < payload.size() - payload.size() / 8);
  CHECK(page.size() == PaddedPageSize(h.length));
  // zstd frame magic 28 b5 2f fd at the start of the stored payload
  CHECK(DecodeFixed32(page.data() + 32) == 0xfd2fb528u);
}

TEST_CASE("a page decoded to a view gives its own bytes when stored raw, the decompressed ones otherwise") {
  for (bool compress : {false, true}) {
    CAPTURE(compress);
    const std::string payload = compress ? Text(20000, 2) : RandomBytes(3000, 9);
    const std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, payload, compress);
    PageHeader h;
    std::string storage = "untouched";
    std::string_view view;
    REQUIRE(DecodePage(page, kOffset, kSalt, &h, &storage, &view).ok());
    CHECK(view == payload);
    if (compress) {
      CHECK(view.data() == storage.data());
    } else {
      CHECK(view.data() == page.data() + kPageHeaderSize);  // no copy
      CHECK(storage == "untouched");
    }
    // A damaged page is refused the same way.
    std::string bad = page;
    bad[kPageHeaderSize + 5] ^= 1;
    CHECK(DecodePage(bad, kOffset, kSalt, &h, &storage, &view).code() == kCorruptChecksum);
  }
}

TEST_CASE("an incompressible payload is stored raw even when compression is allowed") {
  std::string payload = RandomBytes(4000, 7);
  std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, payload, true);
  PageHeader h;
  std::string out;
  REQUIRE(Decode(page, kOffset, kSalt, &out, &h).ok());
  CHECK(h.flags == 0);
  CHECK(h.length == 4000);
  CHECK(out == payload);
}

TEST_CASE("a payload under 128 bytes is never compressed") {
  std::string payload(127, 'a');
  std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, payload, true);
  CHECK(page[5] == 0);
  CHECK(DecodeFixed32(page.data() + 12) == 127);
  std::string longer(128, 'a');
  std::string page2 = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, longer, true);
  CHECK(page2[5] == static_cast<char>(kPageFlagZstd));
}

TEST_CASE("a page checked at the wrong offset is refused, naming the page expected there") {
  std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, "payload", false);
  std::string out;
  for (uint64_t other : {kOffset + 16, kOffset - 16, uint64_t{4096}, kOffset + 4096}) {
    CAPTURE(other);
    Status s = Decode(page, other, kSalt, &out);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == static_cast<int64_t>(other / 16));
    CHECK(s.message().find("not a page of this file at this place") != std::string::npos);
  }
}

TEST_CASE("a page checked with the wrong salt is refused") {
  std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, "payload", false);
  std::string out;
  Status s = Decode(page, kOffset, kSalt ^ 1, &out);
  CHECK(s.code() == kCorruptPage);
  CHECK(s.page_no() == static_cast<int64_t>(kOffset / 16));
  CHECK(Decode(page, kOffset, 0x89abcdefull << 32, &out).code() == kCorruptPage);
}

TEST_CASE("a page binds only the low 32 bits of the salt") {
  // docs/format.md §4: the page carries salt mod 2^32; the full 64 bits live in
  // the file header and superblocks.
  std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, "payload", false);
  std::string out;
  CHECK(Decode(page, kOffset, (kSalt & 0xffffffffull) | (0x55ull << 40), &out).ok());
  CHECK(out == "payload");
}

TEST_CASE("every single-bit flip in a small page is detected") {
  std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, 2, "two small records!", false);
  REQUIRE(page.size() == 64);
  std::string out;
  REQUIRE(Decode(page, kOffset, kSalt, &out).ok());
  for (size_t bit = 0; bit < page.size() * 8; bit++) {
    CAPTURE(bit);
    std::string bad = page;
    bad[bit / 8] ^= static_cast<char>(1 << (bit % 8));
    Status s = Decode(bad, kOffset, kSalt, &out);
    CHECK_FALSE(s.ok());
    CHECK((s.code() == kCorruptChecksum || s.code() == kCorruptPage));
    CHECK(s.page_no() == static_cast<int64_t>(kOffset / 16));
  }
}

TEST_CASE("every single-bit flip in a compressed page is detected") {
  std::string payload = Text(600, 3);
  std::string page = EncodePage(PageType::kFacts, kOffset, kSalt, 1, payload, true);
  REQUIRE(page[5] == static_cast<char>(kPageFlagZstd));
  std::string out;
  for (size_t bit = 0; bit < page.size() * 8; bit++) {
    CAPTURE(bit);
    std::string bad = page;
    bad[bit / 8] ^= static_cast<char>(1 << (bit % 8));
    Status s = Decode(bad, kOffset, kSalt, &out);
    CHECK_FALSE(s.ok());
    CHECK(s.primary() == kCorrupt);
  }
}

TEST_CASE("a page cut short at any length is refused as corrupt") {
  std::string page = EncodePage(PageType::kBlocks, kOffset, kSalt, 1, Text(90, 4), false);
  std::string out;
  for (size_t n = 0; n < page.size(); n++) {
    CAPTURE(n);
    Status s = Decode(page.substr(0, n), kOffset, kSalt, &out);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == static_cast<int64_t>(kOffset / 16));
  }
}

TEST_CASE("bytes after a page are not part of it") {
  std::string page = EncodePage(PageType::kBlocks, kOffset, kSalt, 1, "abc", false);
  std::string out;
  REQUIRE(Decode(page + std::string(100, '\x7f'), kOffset, kSalt, &out).ok());
  CHECK(out == "abc");
}

TEST_CASE("the page header check refuses unknown types, flags, reserved bits and lengths") {
  const std::string good = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, "abc", false);
  PageHeader h;
  REQUIRE(PeekPageHeader(good, kOffset, kSalt, &h).ok());

  // Applies edits (offset, bytes) to a copy of the good page.
  auto peek_with = [&](std::initializer_list<std::pair<size_t, std::string>> edits) {
    std::string bad = good;
    for (const auto& [at, bytes] : edits) bad.replace(at, bytes.size(), bytes);
    Reseal(&bad);  // the header check runs before the checksum, but be sure
    PageHeader out;
    std::string payload;
    Status peek = PeekPageHeader(bad, kOffset, kSalt, &out);
    Status full = DecodePage(bad, kOffset, kSalt, &out, &payload);
    CHECK(full.code() == peek.code());
    return peek;
  };
  auto le32 = [](uint32_t v) {
    std::string s(4, '\0');
    EncodeFixed32(s.data(), v);
    return s;
  };
  for (int type : {0, 10, 255}) {
    CAPTURE(type);
    Status s = peek_with({{4, std::string(1, static_cast<char>(type))}});
    CHECK(s.code() == kCorruptPage);
    CHECK(s.message().find("invalid header") != std::string::npos);
  }
  for (int flags : {2, 4, 0x80, 0xff}) {
    CAPTURE(flags);
    Status s = peek_with({{5, std::string(1, static_cast<char>(flags))}});
    CHECK(s.code() == kCorruptPage);
    CHECK(s.message().find("invalid header") != std::string::npos);
  }
  CHECK(peek_with({{6, "\x01"}}).code() == kCorruptPage);
  CHECK(peek_with({{7, "\x80"}}).code() == kCorruptPage);
  // raw_length must equal length when the payload is not compressed
  CHECK(peek_with({{24, le32(4)}}).code() == kCorruptPage);
  CHECK(peek_with({{24, le32(2)}}).code() == kCorruptPage);
  // length and raw_length beyond the 1 GiB limit
  Status too_long = peek_with({{12, le32(kMaxPagePayload + 1)}, {24, le32(kMaxPagePayload + 1)}});
  CHECK(too_long.code() == kCorruptPage);
  CHECK(too_long.message().find("invalid header") != std::string::npos);
  // a zstd page may not claim a decompressed size beyond the limit either
  Status too_raw = peek_with({{5, "\x01"}, {24, le32(kMaxPagePayload + 1)}});
  CHECK(too_raw.code() == kCorruptPage);
  CHECK(too_raw.message().find("invalid header") != std::string::npos);
}

TEST_CASE("a header claiming exactly the maximum payload passes the header check") {
  std::string head = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, "", false);
  EncodeFixed32(head.data() + 12, kMaxPagePayload);
  EncodeFixed32(head.data() + 24, kMaxPagePayload);
  PageHeader h;
  REQUIRE(PeekPageHeader(head, kOffset, kSalt, &h).ok());
  CHECK(h.length == kMaxPagePayload);
  EncodeFixed32(head.data() + 12, kMaxPagePayload + 1);
  EncodeFixed32(head.data() + 24, kMaxPagePayload + 1);
  CHECK(PeekPageHeader(head, kOffset, kSalt, &h).code() == kCorruptPage);
  // and the whole-page decoder reports such a header on a short input as cut short
  std::string out;
  EncodeFixed32(head.data() + 12, kMaxPagePayload);
  EncodeFixed32(head.data() + 24, kMaxPagePayload);
  Status s = DecodePage(head, kOffset, kSalt, &h, &out);
  CHECK(s.code() == kCorruptPage);
  CHECK(s.message().find("cut short") != std::string::npos);
}

TEST_CASE("a checksummed zstd page whose frame size disagrees with raw_length is corrupt") {
  std::string payload = Text(5000, 9);
  std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, payload, true);
  REQUIRE(page[5] == static_cast<char>(kPageFlagZstd));
  std::string out;
  for (uint32_t raw : {uint32_t{4999}, uint32_t{5001}, uint32_t{0}}) {
    CAPTURE(raw);
    std::string bad = page;
    EncodeFixed32(bad.data() + 24, raw);
    Reseal(&bad);
    Status s = Decode(bad, kOffset, kSalt, &out);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == static_cast<int64_t>(kOffset / 16));
  }
}

TEST_CASE("a zstd page of a gigabyte of zeros in a few kilobytes is refused from its header") {
  // A valid frame (checksummed page, content size = raw_length) that
  // decompresses 1 GiB from 32 KiB: the reader must not allocate for it.
  const std::string frame = test::ZstdZeros(kMaxPagePayload);
  REQUIRE(frame.size() < 40000);
  std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, frame, false);
  page[5] = static_cast<char>(kPageFlagZstd);
  EncodeFixed32(page.data() + 24, kMaxPagePayload);
  Reseal(&page);
  PageHeader h;
  Status peek = PeekPageHeader(page, kOffset, kSalt, &h);
  CHECK(peek.code() == kCorruptPage);
  CHECK(peek.message().find("invalid header") != std::string::npos);
  std::string out;
  Status s = Decode(page, kOffset, kSalt, &out);
  CHECK(s.code() == kCorruptPage);
  CHECK(out.capacity() < 4096);
}

TEST_CASE("a zstd page decompressing to exactly the ratio limit is read, one byte more is refused") {
  // Raw blocks pad the frame so that it is exactly 1/32 of what it holds.
  const uint32_t n = 64 * 1024;
  std::string frame = test::ZstdZeros(n, n / kMaxCompressionRatio - 13 - 3 - 4);
  for (uint32_t raw : {n, n + 1}) {
    CAPTURE(raw);
    std::string f = raw == n ? frame : test::ZstdZeros(raw, n / kMaxCompressionRatio - 13 - 3 - 4);
    REQUIRE(f.size() == n / kMaxCompressionRatio);
    std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, f, false);
    page[5] = static_cast<char>(kPageFlagZstd);
    EncodeFixed32(page.data() + 24, raw);
    Reseal(&page);
    std::string out;
    Status s = Decode(page, kOffset, kSalt, &out);
    if (raw == n) {
      REQUIRE_MESSAGE(s.ok(), s.ToString());
      CHECK(out == std::string(n, '\0'));
    } else {
      CHECK(s.code() == kCorruptPage);
      CHECK(s.message().find("invalid header") != std::string::npos);
    }
  }
}

TEST_CASE("a checksummed page flagged zstd whose payload is not a zstd frame is corrupt") {
  std::string page = EncodePage(PageType::kEpisodes, kOffset, kSalt, 1, Text(200, 5), false);
  page[5] = static_cast<char>(kPageFlagZstd);
  Reseal(&page);
  std::string out;
  Status s = Decode(page, kOffset, kSalt, &out);
  CHECK(s.code() == kCorruptPage);
  CHECK(s.page_no() == static_cast<int64_t>(kOffset / 16));
}

TEST_CASE("a checksum mismatch names the page, its type and both checksums") {
  std::string page = EncodePage(PageType::kFacts, kOffset, kSalt, 1, "fact bytes", false);
  page[40] ^= 0x01;
  std::string out;
  Status s = Decode(page, kOffset, kSalt, &out);
  CHECK(s.code() == kCorruptChecksum);
  CHECK(s.page_no() == static_cast<int64_t>(kOffset / 16));
  CHECK(s.message().find("page " + std::to_string(kOffset / 16) + " (facts)") != std::string::npos);
  char expect[64];
  std::snprintf(expect, sizeof expect, "checksum mismatch (stored %08x, computed %08x)",
                UnmaskCrc(DecodeFixed32(page.data())), Crc32c(page.data() + 4, page.size() - 4));
  CHECK(s.message().find(expect) != std::string::npos);
}

TEST_CASE("random payloads round-trip through pages of every type, compressed or not") {
  std::mt19937_64 rng(agentmem::test::Seed());
  std::set<int> flags_seen;
  for (int i = 0; i < 300; i++) {
    size_t n = rng() % 3000;
    std::string payload = (rng() & 1) ? Text(n, static_cast<uint32_t>(rng())) : RandomBytes(n, rng());
    auto type = static_cast<PageType>(1 + rng() % 5);
    uint64_t offset = 4096 + (rng() % 100000) * 16;
    uint64_t salt = rng() | 1;
    std::string page = EncodePage(type, offset, salt, static_cast<uint32_t>(i), payload, rng() & 1);
    PageHeader h;
    std::string out;
    REQUIRE(Decode(page, offset, salt, &out, &h).ok());
    CHECK(out == payload);
    CHECK(h.type == static_cast<uint8_t>(type));
    CHECK(h.record_count == static_cast<uint32_t>(i));
    flags_seen.insert(h.flags);
  }
  CHECK(flags_seen.size() == 2);  // both stored forms were exercised
}

// tests/format/records_test.cc -- the record codecs and the payload framing
// (docs/format.md §5 and §4.3).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "format/coding.h"
#include "format/records.h"
#include "tests/util/seed.h"

using namespace agentmem;
using namespace agentmem::format;

namespace {

constexpr int64_t kPageNo = 777;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

EpisodeRecord SampleEpisode() {
  EpisodeRecord r;
  r.id = 42;
  r.user_id = "alice";
  r.session_id = "s-2026-01-01";
  r.role = "user";
  r.text = "I moved to Lisbon and I drink green tea every morning.";
  r.ts = 1767225540000000;
  r.created_at = 1767225600000000;
  r.metadata = R"({"mood":"calm","tags":["move","tea"]})";
  r.vector = {0.25f, -1.5f, 3.0f, 0.0f};
  return r;
}

BlockRecord SampleBlock() {
  BlockRecord r;
  r.version = 9;
  r.user_id = "alice";
  r.name = "persona";
  r.value = "Lives in Lisbon. Likes tea.";
  r.limit = 2000;
  r.pinned_order = 3;
  r.updated_at = 1767225600000000;
  return r;
}

FactRecord SampleFact() {
  FactRecord r;
  r.id = 5;
  r.user_id = "alice";
  r.subject = "alice";
  r.predicate = "lives_in";
  r.object = "Lisbon";
  r.confidence = 0.875f;
  r.source_episode_ids = {1, 2, 40};
  r.valid_from = 1767225600000000;
  r.recorded_at = 1767225600000001;
  return r;
}

MetaRecord SampleMeta() {
  MetaRecord r;
  r.entries = {{"vector.dim", "384"}, {"vector.metric", "cosine"}};
  return r;
}

CommitRecord SampleCommit() {
  CommitRecord r;
  r.commit_seq = 3;
  r.txn_start = 4336;
  r.durable_through = 4336;
  r.page_count = 2;
  r.commit_ts = 1767225600000000;
  r.next_episode_id = 43;
  r.next_fact_id = 6;
  r.next_block_version = 10;
  return r;
}

template <typename R>
std::string Encode(const R& r, void (*enc)(const R&, std::string*)) {
  std::string s;
  enc(r, &s);
  return s;
}

// Bit-exact float comparison (so that -0.0f, denormals and the like count).
bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

// A heap copy of exactly the given bytes: reading one byte past it is a heap
// overflow that AddressSanitizer reports.
std::unique_ptr<char[]> ExactCopy(std::string_view s) {
  std::unique_ptr<char[]> p(new char[s.size() + 1]);
  std::memcpy(p.get(), s.data(), s.size());
  return p;
}

// Every proper prefix and several extensions of a valid encoding must be
// refused as kCorruptPage naming the page.
void CheckTruncatedAndExtendedAreRefused(
    const std::string& good, const char* what,
    const std::function<Status(std::string_view, int64_t)>& decode) {
  REQUIRE(decode(good, kPageNo).ok());
  const std::string expect = "page " + std::to_string(kPageNo) + ": malformed " + what + " record";
  for (size_t n = 0; n < good.size(); n++) {
    CAPTURE(n);
    auto copy = ExactCopy(std::string_view(good).substr(0, n));
    Status s = decode(std::string_view(copy.get(), n), kPageNo);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == kPageNo);
    CHECK(s.message().find(expect) != std::string::npos);
  }
  for (const std::string& extra : {std::string(1, '\0'), std::string("x"), std::string(9, '\xff')}) {
    Status s = decode(good + extra, kPageNo);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == kPageNo);
  }
}

}  // namespace

// ---------------------------------------------------------------- episodes

TEST_CASE("an episode round-trips") {
  EpisodeRecord r = SampleEpisode();
  EpisodeRecord out;
  REQUIRE(DecodeEpisode(Encode(r, EncodeEpisode), kPageNo, &out).ok());
  CHECK(out == r);
}

TEST_CASE("an episode's fields are encoded in the order docs/format.md gives") {
  EpisodeRecord r;
  r.id = 0x0102030405060708;
  r.ts = -1;
  r.created_at = 1;
  r.user_id = "u";
  r.session_id = "";
  r.role = "ro";
  r.text = "t";
  r.metadata = "{}";
  r.vector = {1.0f};
  std::string s = Encode(r, EncodeEpisode);
  const std::string expect = std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8) +  // id
                             "\x01" +                                              // ts = -1
                             "\x02" +                                              // created_at = 1
                             "\x01u" + std::string(1, '\0') + "\x02ro" + "\x01t" + "\x02{}" +
                             "\x01" + std::string("\x00\x00\x80\x3f", 4);  // 1 float: 1.0f
  CHECK(s == expect);
}

TEST_CASE("an episode with every string empty and no vector round-trips") {
  EpisodeRecord r;
  std::string s = Encode(r, EncodeEpisode);
  CHECK(s.size() == 8 + 2 + 5 + 1);  // id, two times, five empty strings, dimension 0
  EpisodeRecord out = SampleEpisode();
  REQUIRE(DecodeEpisode(s, kPageNo, &out).ok());
  CHECK(out == r);
}

TEST_CASE("an episode keeps unicode text byte for byte") {
  EpisodeRecord r = SampleEpisode();
  r.user_id = "\xe7\x94\xa8\xe6\x88\xb7-\xf0\x9f\x91\xa4";  // CJK and an emoji
  r.role = "assistant";
  r.text = "na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x8d\xb5 e\xcc\x81 \xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d";
  r.metadata = "{\"emoji\":\"\xf0\x9f\x98\x80\"}";
  EpisodeRecord out;
  REQUIRE(DecodeEpisode(Encode(r, EncodeEpisode), kPageNo, &out).ok());
  CHECK(out == r);
}

TEST_CASE("an episode with a large vector round-trips bit for bit") {
  EpisodeRecord r = SampleEpisode();
  std::mt19937 rng(static_cast<uint32_t>(agentmem::test::Seed()));
  std::normal_distribution<float> dist;
  r.vector.resize(4096);
  for (float& f : r.vector) f = dist(rng);
  r.vector[0] = -0.0f;
  r.vector[1] = std::numeric_limits<float>::denorm_min();
  r.vector[2] = std::numeric_limits<float>::max();
  r.vector[3] = std::numeric_limits<float>::lowest();
  std::string s = Encode(r, EncodeEpisode);
  EpisodeRecord out;
  REQUIRE(DecodeEpisode(s, kPageNo, &out).ok());
  CHECK(SameBits(out.vector, r.vector));
  CHECK(std::signbit(out.vector[0]));
  CHECK(out.text == r.text);
}

TEST_CASE("an episode with a float16 vector stores two bytes per component and its type in the dim varint") {
  EpisodeRecord r = SampleEpisode();
  r.vector = {1.0f, -0.5f, 0.0999755859375f /* a half */};
  r.vector_type = VectorType::kF16;
  const std::string s = Encode(r, EncodeEpisode);
  EpisodeRecord f32 = r;
  f32.vector_type = VectorType::kF32;
  const std::string s32 = Encode(f32, EncodeEpisode);
  CHECK(s.size() + 2 == s32.size());  // 3 × 2 bytes, not 3 × 4, and a varint 4 bytes longer
  // The tail: varint 3 | 1 << 32, then 0x3c00, 0xb800, 0x2e66, little-endian.
  CHECK(s.substr(s.size() - 11) == std::string("\x83\x80\x80\x80\x10\x00\x3c\x00\xb8\x66\x2e", 11));
  EpisodeRecord out;
  REQUIRE(DecodeEpisode(s, kPageNo, &out).ok());
  CHECK(out == r);
  uint64_t id = 0;
  std::string_view bytes;
  VectorType type = VectorType::kF32;
  REQUIRE(EpisodeVectorOf(s, kPageNo, &id, &bytes, &type).ok());
  CHECK(id == r.id);
  CHECK(type == VectorType::kF16);
  CHECK(bytes.size() == 6);
  REQUIRE(EpisodeVectorOf(s32, kPageNo, &id, &bytes, &type).ok());
  CHECK(type == VectorType::kF32);
  CHECK(bytes.size() == 12);
}

TEST_CASE("an episode with an int8 vector stores a float32 scale and one byte per component") {
  EpisodeRecord r = SampleEpisode();
  r.vector = {1.27f, -0.5f, 0.0f, 0.635f};
  r.vector_type = VectorType::kInt8;
  const std::string s = Encode(r, EncodeEpisode);
  // The tail: varint 4 | 2 << 32, the scale (the float nearest 0.01,
  // 0x3c23d70a: 127 x it reaches 1.27), then 127, -50, 0 and 64 (0.635 is
  // 63.5 steps: ties to even).
  CHECK(s.substr(s.size() - 13) ==
        std::string("\x84\x80\x80\x80\x20\x0a\xd7\x23\x3c\x7f\xce\x00\x40", 13));
  EpisodeRecord out;
  REQUIRE(DecodeEpisode(s, kPageNo, &out).ok());
  CHECK(out.vector_type == VectorType::kInt8);
  REQUIRE(out.vector.size() == 4);
  CHECK(out.vector[0] >= 1.27f);
  CHECK(std::fabs(out.vector[1] + 0.5f) < 1e-6f);
  CHECK(out.vector[2] == 0.0f);
  EpisodeRecord again = out;  // what it reads back stores as the same bytes
  CHECK(Encode(again, EncodeEpisode) == s);
  uint64_t id = 0;
  std::string_view bytes;
  VectorType type = VectorType::kF32;
  REQUIRE(EpisodeVectorOf(s, kPageNo, &id, &bytes, &type).ok());
  CHECK(type == VectorType::kInt8);
  CHECK(bytes.size() == 8);
  std::vector<float> floats(4);
  REQUIRE(StoredToFloats(type, bytes, 4, floats.data()));
  CHECK(floats == out.vector);
  CHECK_FALSE(StoredToFloats(type, bytes, 3, floats.data()));
  // A -128 component is a value no writer stores: the record is malformed.
  std::string bad = s;
  bad[bad.size() - 2] = static_cast<char>(0x80);
  CHECK(DecodeEpisode(bad, kPageNo, &out).code() == kCorruptPage);
  // A dim whose bytes (scale included) run past the record.
  bad = s;
  bad[bad.size() - 9] = static_cast<char>(0x85);
  CHECK(DecodeEpisode(bad, kPageNo, &out).code() == kCorruptPage);
}

TEST_CASE("two episodes that differ only in how a file stores the vector have the same content") {
  EpisodeRecord a = SampleEpisode();
  a.vector = {0.5f, -0.25f};
  EpisodeRecord b = a;
  b.vector_type = VectorType::kF16;
  CHECK(SameContent(a, b));
  CHECK_FALSE(a == b);
  b.vector[1] = -0.5f;
  CHECK_FALSE(SameContent(a, b));
  b = a;
  b.metadata = "{}";
  CHECK_FALSE(SameContent(a, b));
}

TEST_CASE("a vector that cannot be stored as its type is left as it was") {
  std::vector<float> v = {0.1f, 1e5f, 0.3f};  // 1e5 is beyond float16's 65504
  const std::vector<float> before = v;
  CHECK_FALSE(RoundToStored(VectorType::kF16, v));
  CHECK(v == before);
  v = {std::numeric_limits<float>::max(), 0.1f};  // no int8 scale reaches it
  const std::vector<float> huge = v;
  CHECK_FALSE(RoundToStored(VectorType::kInt8, v));
  CHECK(v == huge);
  v = {0.1f, 65504.0f};
  CHECK(RoundToStored(VectorType::kF16, v));
  CHECK(v[0] != 0.1f);  // rounded to the nearest half
  CHECK(v[1] == 65504.0f);
}

TEST_CASE("an episode whose dim varint names an unknown component type, or more bytes than are left, is malformed") {
  EpisodeRecord r = SampleEpisode();
  r.vector = {1.0f, 2.0f};
  r.vector_type = VectorType::kF16;
  std::string s = Encode(r, EncodeEpisode);
  const size_t at = s.size() - 4 - 5;  // the 5-byte varint before 2 halves
  EpisodeRecord out;
  std::string bad = s;
  bad[at + 4] = 0x30;  // type 3
  CHECK(DecodeEpisode(bad, kPageNo, &out).code() == kCorruptPage);
  bad = s;
  bad[at] = static_cast<char>(0x83);  // dim 3: 6 bytes, 4 left
  CHECK(DecodeEpisode(bad, kPageNo, &out).code() == kCorruptPage);
  uint64_t id = 0;
  std::string_view bytes;
  VectorType type;
  CHECK(EpisodeVectorOf(bad, kPageNo, &id, &bytes, &type).code() == kCorruptPage);
}

TEST_CASE("an episode keeps the extreme int64 times and the largest id") {
  for (int64_t t : {kMin, kMin + 1, int64_t{-1}, int64_t{0}, kMax - 1, kMax}) {
    CAPTURE(t);
    EpisodeRecord r = SampleEpisode();
    r.id = std::numeric_limits<uint64_t>::max();
    r.ts = t;
    r.created_at = ~t;  // -t - 1 without overflow: covers the other extreme at the same time
    EpisodeRecord out;
    REQUIRE(DecodeEpisode(Encode(r, EncodeEpisode), kPageNo, &out).ok());
    CHECK(out == r);
  }
}

TEST_CASE("a truncated or extended episode is refused as corrupt naming the page") {
  CheckTruncatedAndExtendedAreRefused(Encode(SampleEpisode(), EncodeEpisode), "episode",
                                      [](std::string_view in, int64_t page_no) {
                                        EpisodeRecord r;
                                        return DecodeEpisode(in, page_no, &r);
                                      });
}

TEST_CASE("an episode claiming more vector dimensions than its bytes hold is refused") {
  EpisodeRecord r = SampleEpisode();
  r.vector.clear();
  std::string s = Encode(r, EncodeEpisode);
  s.pop_back();                              // the dimension varint (0)
  PutVarint(&s, uint64_t{1} << 60);          // would be 4 EiB of floats
  s += std::string(16, '\0');
  EpisodeRecord out;
  Status st = DecodeEpisode(s, kPageNo, &out);
  CHECK(st.code() == kCorruptPage);
  CHECK(st.page_no() == kPageNo);
}

// ---------------------------------------------------------------- blocks

TEST_CASE("a block version round-trips, including the int32 and uint32 extremes") {
  BlockRecord r = SampleBlock();
  BlockRecord out;
  REQUIRE(DecodeBlock(Encode(r, EncodeBlock), kPageNo, &out).ok());
  CHECK(out == r);
  for (int32_t pin : {std::numeric_limits<int32_t>::min(), -1, 0, std::numeric_limits<int32_t>::max()}) {
    CAPTURE(pin);
    r.pinned_order = pin;
    r.limit = pin < 0 ? 0 : std::numeric_limits<uint32_t>::max();
    r.updated_at = pin < 0 ? kMin : kMax;
    REQUIRE(DecodeBlock(Encode(r, EncodeBlock), kPageNo, &out).ok());
    CHECK(out == r);
  }
}

TEST_CASE("a block with empty user, value and unicode name round-trips") {
  BlockRecord r;
  r.name = "\xc3\xa9tat";
  BlockRecord out = SampleBlock();
  REQUIRE(DecodeBlock(Encode(r, EncodeBlock), kPageNo, &out).ok());
  CHECK(out == r);
}

TEST_CASE("a block whose limit or pinned order does not fit its field is refused") {
  BlockRecord base = SampleBlock();
  auto build = [&](uint64_t limit, int64_t pinned) {
    std::string s;
    PutFixed64(&s, base.version);
    PutString(&s, base.user_id);
    PutString(&s, base.name);
    PutString(&s, base.value);
    PutVarint(&s, limit);
    PutSignedVarint(&s, pinned);
    PutSignedVarint(&s, base.updated_at);
    return s;
  };
  BlockRecord out;
  REQUIRE(DecodeBlock(build(7, -1), kPageNo, &out).ok());  // the builder itself is right
  CHECK(out.limit == 7);
  CHECK(DecodeBlock(build(uint64_t{1} << 32, 0), kPageNo, &out).code() == kCorruptPage);
  CHECK(DecodeBlock(build(0, int64_t{1} << 31), kPageNo, &out).code() == kCorruptPage);
  CHECK(DecodeBlock(build(0, -(int64_t{1} << 31) - 1), kPageNo, &out).code() == kCorruptPage);
}

TEST_CASE("a truncated or extended block is refused as corrupt naming the page") {
  CheckTruncatedAndExtendedAreRefused(Encode(SampleBlock(), EncodeBlock), "block",
                                      [](std::string_view in, int64_t page_no) {
                                        BlockRecord r;
                                        return DecodeBlock(in, page_no, &r);
                                      });
}

// ---------------------------------------------------------------- facts

TEST_CASE("a fact round-trips, with its open-ended validity") {
  FactRecord r = SampleFact();
  CHECK(r.valid_to == kForever);
  CHECK(r.expired_at == kForever);
  FactRecord out;
  REQUIRE(DecodeFact(Encode(r, EncodeFact), kPageNo, &out).ok());
  CHECK(out == r);
}

TEST_CASE("a fact with many sources and extreme times round-trips") {
  FactRecord r = SampleFact();
  r.source_episode_ids.clear();
  for (uint64_t i = 0; i < 20000; i++) r.source_episode_ids.push_back(i * 0x9e3779b97f4a7c15ull);
  r.valid_from = kMin;
  r.valid_to = kMax;
  r.recorded_at = -1;
  r.expired_at = kMin + 1;
  r.confidence = 0.0f;
  FactRecord out;
  REQUIRE(DecodeFact(Encode(r, EncodeFact), kPageNo, &out).ok());
  CHECK(out == r);
}

TEST_CASE("a fact with no sources and empty strings round-trips") {
  FactRecord r;
  FactRecord out = SampleFact();
  REQUIRE(DecodeFact(Encode(r, EncodeFact), kPageNo, &out).ok());
  CHECK(out == r);
}

TEST_CASE("a fact claiming more sources than its bytes hold is refused") {
  FactRecord r = SampleFact();
  r.source_episode_ids.clear();
  std::string s;
  PutFixed64(&s, r.id);
  for (const std::string* f : {&r.user_id, &r.subject, &r.predicate, &r.object}) PutString(&s, *f);
  PutFixed32(&s, 0x3f800000u);
  PutVarint(&s, uint64_t{1} << 61);
  s += std::string(40, '\0');
  FactRecord out;
  Status st = DecodeFact(s, kPageNo, &out);
  CHECK(st.code() == kCorruptPage);
  CHECK(st.page_no() == kPageNo);
}

TEST_CASE("a truncated or extended fact is refused as corrupt naming the page") {
  CheckTruncatedAndExtendedAreRefused(Encode(SampleFact(), EncodeFact), "fact",
                                      [](std::string_view in, int64_t page_no) {
                                        FactRecord r;
                                        return DecodeFact(in, page_no, &r);
                                      });
}

// ---------------------------------------------------------------- meta

TEST_CASE("a meta record round-trips, empty, with empty keys and with many entries") {
  MetaRecord out;
  for (int n : {0, 1, 500}) {
    CAPTURE(n);
    MetaRecord r;
    for (int i = 0; i < n; i++) r.entries.emplace_back(i == 0 ? "" : "key." + std::to_string(i), std::string(i % 7, 'v'));
    REQUIRE(DecodeMeta(Encode(r, EncodeMeta), kPageNo, &out).ok());
    CHECK(out == r);
  }
  REQUIRE(DecodeMeta(Encode(SampleMeta(), EncodeMeta), kPageNo, &out).ok());
  CHECK(out == SampleMeta());
}

TEST_CASE("a meta record claiming more entries than its bytes hold is refused") {
  std::string s;
  PutVarint(&s, 1000000);
  s += std::string(10, '\0');
  MetaRecord out;
  Status st = DecodeMeta(s, kPageNo, &out);
  CHECK(st.code() == kCorruptPage);
  CHECK(st.page_no() == kPageNo);
}

TEST_CASE("a truncated or extended meta record is refused as corrupt naming the page") {
  CheckTruncatedAndExtendedAreRefused(Encode(SampleMeta(), EncodeMeta), "meta",
                                      [](std::string_view in, int64_t page_no) {
                                        MetaRecord r;
                                        return DecodeMeta(in, page_no, &r);
                                      });
}

// ---------------------------------------------------------------- commit

TEST_CASE("a commit record is 64 bytes at the offsets docs/format.md gives and round-trips") {
  CommitRecord r = SampleCommit();
  std::string s = EncodeCommit(r);
  REQUIRE(s.size() == 64);
  CHECK(DecodeFixed64(s.data() + 0) == 3);      // commit_seq
  CHECK(DecodeFixed64(s.data() + 8) == 4336);   // txn_start
  CHECK(DecodeFixed64(s.data() + 16) == 4336);  // durable_through
  CHECK(DecodeFixed32(s.data() + 24) == 2);     // page_count
  CHECK(DecodeFixed32(s.data() + 28) == 0);     // reserved
  CHECK(DecodeFixed64(s.data() + 32) == 1767225600000000);  // commit_ts
  CHECK(DecodeFixed64(s.data() + 40) == 43);    // next_episode_id
  CHECK(DecodeFixed64(s.data() + 48) == 6);     // next_fact_id
  CHECK(DecodeFixed64(s.data() + 56) == 10);    // next_block_version
  CommitRecord out;
  REQUIRE(DecodeCommit(s, kPageNo, &out).ok());
  CHECK(out == r);
}

TEST_CASE("a commit record keeps a negative commit time and the largest counters") {
  CommitRecord r = SampleCommit();
  r.commit_ts = kMin;
  r.commit_seq = std::numeric_limits<uint64_t>::max();
  r.next_episode_id = std::numeric_limits<uint64_t>::max();
  r.page_count = std::numeric_limits<uint32_t>::max();
  CommitRecord out;
  REQUIRE(DecodeCommit(EncodeCommit(r), kPageNo, &out).ok());
  CHECK(out == r);
}

TEST_CASE("a commit record with its reserved word set is refused") {
  std::string s = EncodeCommit(SampleCommit());
  for (int byte = 28; byte < 32; byte++) {
    std::string bad = s;
    bad[byte] = 1;
    CommitRecord out;
    Status st = DecodeCommit(bad, kPageNo, &out);
    CHECK(st.code() == kCorruptPage);
    CHECK(st.page_no() == kPageNo);
  }
}

TEST_CASE("a truncated or extended commit record is refused as corrupt naming the page") {
  CheckTruncatedAndExtendedAreRefused(EncodeCommit(SampleCommit()), "commit",
                                      [](std::string_view in, int64_t page_no) {
                                        CommitRecord r;
                                        return DecodeCommit(in, page_no, &r);
                                      });
}

// ---------------------------------------------------------------- random input

TEST_CASE("every record decoder returns OK or kCorruptPage on random bytes, never crashing") {
  std::mt19937_64 rng(agentmem::test::Seed());
  // Random mutations of valid encodings reach deeper than pure noise.
  const std::vector<std::string> seeds = {Encode(SampleEpisode(), EncodeEpisode),
                                          Encode(SampleBlock(), EncodeBlock),
                                          Encode(SampleFact(), EncodeFact),
                                          Encode(SampleMeta(), EncodeMeta),
                                          EncodeCommit(SampleCommit())};
  int ok = 0, refused = 0;
  for (int i = 0; i < 4000; i++) {
    std::string in;
    if (i % 2 == 0) {
      in.resize(rng() % 96);
      for (char& c : in) c = static_cast<char>(rng());
    } else {
      in = seeds[rng() % seeds.size()];
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !in.empty(); e++) in[rng() % in.size()] = static_cast<char>(rng());
    }
    auto copy = ExactCopy(in);
    std::string_view view(copy.get(), in.size());
    EpisodeRecord er;
    BlockRecord br;
    FactRecord fr;
    MetaRecord mr;
    CommitRecord cr;
    for (const Status& s : {DecodeEpisode(view, kPageNo, &er), DecodeBlock(view, kPageNo, &br),
                            DecodeFact(view, kPageNo, &fr), DecodeMeta(view, kPageNo, &mr),
                            DecodeCommit(view, kPageNo, &cr)}) {
      if (s.ok()) {
        ok++;
      } else {
        refused++;
        CHECK(s.code() == kCorruptPage);
        CHECK(s.page_no() == kPageNo);
      }
    }
  }
  CHECK(refused > 0);
  CHECK(ok > 0);  // mutated records that still parse (e.g. a changed text byte)
}

// ---------------------------------------------------------------- framing

TEST_CASE("records are framed as a varint length followed by the record") {
  std::string payload;
  AppendRecord("abc", &payload);
  AppendRecord("", &payload);
  AppendRecord(std::string(130, 'z'), &payload);
  CHECK(payload.substr(0, 5) == std::string("\x03" "abc" "\x00", 5));
  CHECK(payload.substr(5, 2) == "\x82\x01");
  std::vector<std::string_view> recs;
  REQUIRE(SplitRecords(payload, 3, kPageNo, &recs).ok());
  REQUIRE(recs.size() == 3);
  CHECK(recs[0] == "abc");
  CHECK(recs[1].empty());
  CHECK(recs[2] == std::string(130, 'z'));
}

TEST_CASE("an empty payload holds zero records") {
  std::vector<std::string_view> recs = {"stale"};
  REQUIRE(SplitRecords("", 0, kPageNo, &recs).ok());
  CHECK(recs.empty());
  Status s = SplitRecords("", 1, kPageNo, &recs);
  CHECK(s.code() == kCorruptPage);
}

TEST_CASE("a payload of more records than its count is refused without listing them all") {
  // A million empty records (one zero byte each) on a page that counts one:
  // the split stops at the second record, and a count above the payload's
  // bytes is refused before anything is reserved.
  const std::string zeros(1 << 20, '\0');
  std::vector<std::string_view> recs;
  Status s = SplitRecords(zeros, 1, kPageNo, &recs);
  CHECK(s.code() == kCorruptPage);
  CHECK(recs.capacity() < 16);
  std::vector<std::string_view> none;
  s = SplitRecords("\x01" "a", 0xffffffffu, kPageNo, &none);
  CHECK(s.code() == kCorruptPage);
  CHECK(none.capacity() == 0);
}

TEST_CASE("record lengths that do not add up to the payload are refused") {
  std::string payload;
  AppendRecord("first", &payload);
  AppendRecord("second", &payload);
  std::vector<std::string_view> recs;
  REQUIRE(SplitRecords(payload, 2, kPageNo, &recs).ok());

  SUBCASE("the last record runs past the end") {
    std::string bad = payload;
    bad[6] = 7;  // "second" claims 7 bytes
    Status s = SplitRecords(bad, 2, kPageNo, &recs);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == kPageNo);
    CHECK(s.message().find("record lengths do not add up") != std::string::npos);
  }
  SUBCASE("a record is shorter than its bytes, leaving a stray tail") {
    std::string bad = payload;
    bad[6] = 5;  // "secon" then a one-byte "record" 'd' whose length runs out
    CHECK(SplitRecords(bad, 2, kPageNo, &recs).code() == kCorruptPage);
  }
  SUBCASE("the payload ends inside a length varint") {
    std::string bad = payload + "\x80";
    CHECK(SplitRecords(bad, 2, kPageNo, &recs).code() == kCorruptPage);
  }
  SUBCASE("the header counts fewer or more records than the payload holds") {
    for (uint32_t count : {0u, 1u, 3u, 0xffffffffu}) {
      CAPTURE(count);
      Status s = SplitRecords(payload, count, kPageNo, &recs);
      CHECK(s.code() == kCorruptPage);
      CHECK(s.page_no() == kPageNo);
    }
  }
  SUBCASE("every truncation of the payload is refused") {
    for (size_t n = 0; n < payload.size(); n++) {
      CAPTURE(n);
      auto copy = ExactCopy(std::string_view(payload).substr(0, n));
      CHECK(SplitRecords(std::string_view(copy.get(), n), 2, kPageNo, &recs).code() == kCorruptPage);
    }
  }
}

TEST_CASE("random records framed into a payload split back into the same records") {
  std::mt19937_64 rng(agentmem::test::Seed());
  for (int round = 0; round < 100; round++) {
    std::vector<std::string> records(rng() % 50);
    std::string payload;
    for (std::string& r : records) {
      r.resize(rng() % 400);
      for (char& c : r) c = static_cast<char>(rng());
      AppendRecord(r, &payload);
    }
    std::vector<std::string_view> out;
    REQUIRE(SplitRecords(payload, static_cast<uint32_t>(records.size()), kPageNo, &out).ok());
    REQUIRE(out.size() == records.size());
    for (size_t i = 0; i < out.size(); i++) CHECK(out[i] == records[i]);
  }
}

TEST_CASE("a text record round-trips and refuses counts that do not add up") {
  TextRecord r;
  r.episode_id = 42;
  r.doc_len = 5;
  r.terms = {{"lisbon", 2}, {"moved", 1}, {"café", 2}};
  std::string bytes;
  EncodeText(r, &bytes);
  TextRecord back;
  REQUIRE(DecodeText(bytes, 9, &back).ok());
  CHECK(back == r);
  for (size_t cut = 0; cut < bytes.size(); cut++) {
    Status s = DecodeText(std::string_view(bytes).substr(0, cut), 9, &back);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == 9);
  }
  r.doc_len = 6;  // counts add up to 5
  bytes.clear();
  EncodeText(r, &bytes);
  CHECK(DecodeText(bytes, 9, &back).code() == kCorruptPage);
  r.doc_len = 5;
  r.terms[1].second = 0;  // a zero count
  r.terms[0].second = 3;
  bytes.clear();
  EncodeText(r, &bytes);
  CHECK(DecodeText(bytes, 9, &back).code() == kCorruptPage);
}

TEST_CASE("a forget record round-trips and refuses unknown kinds and missing ids") {
  ForgetRecord r;
  r.kind = ForgetKind::kSession;
  r.user_id = "bob";
  r.session_id = "s-7";
  r.before = -5;
  std::string bytes;
  EncodeForget(r, &bytes);
  ForgetRecord back;
  REQUIRE(DecodeForget(bytes, 9, &back).ok());
  CHECK(back == r);
  for (size_t cut = 0; cut < bytes.size(); cut++) {
    Status s = DecodeForget(std::string_view(bytes).substr(0, cut), 9, &back);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == 9);
  }
  for (uint8_t kind : {0, 8, 255}) {
    std::string b = bytes;
    b[0] = static_cast<char>(kind);
    CHECK(DecodeForget(b, 9, &back).code() == kCorruptPage);
  }
  r.kind = ForgetKind::kEpisode;  // by id, but no id
  r.id = 0;
  bytes.clear();
  EncodeForget(r, &bytes);
  CHECK(DecodeForget(bytes, 9, &back).code() == kCorruptPage);
  r.id = 77;
  bytes.clear();
  EncodeForget(r, &bytes);
  REQUIRE(DecodeForget(bytes, 9, &back).ok());
  CHECK(back.id == 77);
  r.kind = ForgetKind::kUser;  // not by id, but an id
  bytes.clear();
  EncodeForget(r, &bytes);
  CHECK(DecodeForget(bytes, 9, &back).code() == kCorruptPage);
}

TEST_CASE("a text record whose length or a term count does not fit 32 bits, or with an empty term, is refused") {
  auto text = [](uint64_t doc_len, std::string_view term, uint64_t tf) {
    std::string b;
    PutFixed64(&b, 42);
    PutVarint(&b, doc_len);
    PutVarint(&b, 1);
    PutString(&b, term);
    PutVarint(&b, tf);
    return b;
  };
  TextRecord out;
  REQUIRE(DecodeText(text(3, "tea", 3), 9, &out).ok());
  CHECK(out.terms[0].second == 3);
  const uint64_t big = uint64_t{UINT32_MAX} + 1;
  for (const std::string& bad : {text(big, "tea", big), text(3, "tea", big), text(1, "", 1)}) {
    Status s = DecodeText(bad, 9, &out);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == 9);
    CHECK(s.message().find("malformed text record") != std::string::npos);
  }
}

TEST_CASE("a forget record by fact id round-trips and needs its id") {
  ForgetRecord r;
  r.kind = ForgetKind::kFact;
  r.user_id = "bob";
  r.id = 9;
  std::string bytes;
  EncodeForget(r, &bytes);
  ForgetRecord back;
  REQUIRE(DecodeForget(bytes, 9, &back).ok());
  CHECK(back == r);
  r.id = 0;
  bytes.clear();
  EncodeForget(r, &bytes);
  Status s = DecodeForget(bytes, 9, &back);
  CHECK(s.code() == kCorruptPage);
  CHECK(s.message().find("malformed forget record") != std::string::npos);
}

// tests/index/text/postings_test.cc -- encoding and bounds-checked decoding of
// BM25 posting lists (index/text/postings.h).
#include "index/text/postings.h"

#include <doctest/doctest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/util/seed.h"

namespace agentmem::index {
namespace {

using Postings = std::vector<Posting>;

std::string Encode(const Postings& postings) {
  std::string out;
  REQUIRE(EncodePostings(postings, &out).ok());
  return out;
}

Postings RandomPostings(std::mt19937_64& rng) {
  Postings out;
  uint64_t doc_id = rng() % 3;
  size_t n = rng() % 200;
  for (size_t i = 0; i < n; i++) {
    uint32_t tf = rng() % 8 == 0 ? static_cast<uint32_t>(rng()) | 1u : 1 + rng() % 4;
    out.push_back({doc_id, tf});
    uint64_t gap = rng() % 5 == 0 ? (rng() >> (rng() % 64)) : 1 + rng() % 20;
    if (gap == 0 || doc_id > std::numeric_limits<uint64_t>::max() - gap) break;
    doc_id += gap;
  }
  return out;
}

TEST_CASE("random posting lists survive an encode then decode round trip") {
  std::mt19937_64 rng(test::Seed());
  for (int round = 0; round < 500; round++) {
    Postings postings = RandomPostings(rng);
    auto decoded = DecodePostings(Encode(postings));
    REQUIRE(decoded.ok());
    REQUIRE(*decoded == postings);
  }
}

TEST_CASE("extreme doc ids and term frequencies round trip") {
  const uint64_t max_id = std::numeric_limits<uint64_t>::max();
  const uint32_t max_tf = std::numeric_limits<uint32_t>::max();
  Postings postings{{0, 1}, {1, max_tf}, {max_id - 1, 7}, {max_id, 1}};
  auto decoded = DecodePostings(Encode(postings));
  REQUIRE(decoded.ok());
  CHECK(*decoded == postings);
}

TEST_CASE("an empty list encodes as a single zero count") {
  CHECK(Encode({}) == std::string(1, '\0'));
  auto decoded = DecodePostings(std::string(1, '\0'));
  REQUIRE(decoded.ok());
  CHECK(decoded->empty());
}

TEST_CASE("doc ids are stored as deltas, so dense lists take two bytes a posting") {
  Postings postings;
  for (uint64_t id = 1000000; id < 1000100; id++) postings.push_back({id, 2});
  // count (1 byte) + first id (3 bytes) + tf, then 99 x (delta 1, tf).
  CHECK(Encode(postings).size() == 1 + 3 + 1 + 99 * 2);
}

TEST_CASE("encoding refuses unsorted, duplicate or zero-tf postings and appends nothing") {
  for (const Postings& bad :
       {Postings{{5, 1}, {3, 1}}, Postings{{5, 1}, {5, 2}}, Postings{{5, 0}}}) {
    std::string out = "keep";
    Status s = EncodePostings(bad, &out);
    CHECK(s.code() == kInternal);
    CHECK(out == "keep");
  }
}

TEST_CASE("every truncation of a valid list is reported as index corruption") {
  std::string bytes = Encode({{3, 1}, {300, 2}, {70000, 300}, {70001, 1}});
  for (size_t len = 0; len < bytes.size(); len++) {
    auto decoded = DecodePostings(std::string_view(bytes).substr(0, len), 42);
    INFO("length " << len);
    REQUIRE_FALSE(decoded.ok());
    CHECK(decoded.status().code() == kCorruptIndex);
    CHECK(decoded.status().page_no() == 42);
    CHECK(decoded.status().message().find("bm25 postings") != std::string::npos);
  }
}

// A string from a literal that may hold NUL bytes.
template <size_t N>
std::string Bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

TEST_CASE("malformed lists are refused with a message naming the failed check") {
  struct Case {
    std::string bytes;
    const char* expect;
  };
  const std::string max_varint = "\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01";  // 2^64-1
  const std::vector<Case> cases = {
      {Bytes("\x02\x05\x01\x00\x01"), "delta 0"},                // second doc id repeats the first
      {"\x02" + max_varint + "\x01\x01\x01", "delta 1"},         // doc id overflows
      {Bytes("\x01\x05\x00"), "tf 0"},                           // zero term frequency
      {Bytes("\x01\x05\x80\x80\x80\x80\x10"), "tf 4294967296"},  // tf above 2^32-1
      {Bytes("\x01\x05\x01\x07"), "1 bytes follow"},             // trailing garbage
      {Bytes("\xFF\xFF\xFF\xFF\x0F\x01\x01"), "does not fit"},   // absurd count
      {Bytes("\x80"), "count is truncated"},
      {Bytes("\x01\x05\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x7F"), "truncated"},  // varint > 64 bits
  };
  for (const Case& c : cases) {
    auto decoded = DecodePostings(c.bytes);
    INFO("expect: " << c.expect);
    REQUIRE_FALSE(decoded.ok());
    CHECK(decoded.status().code() == kCorruptIndex);
    CHECK(decoded.status().message().find(c.expect) != std::string::npos);
  }
}

TEST_CASE("random bytes decode to a valid list or an error, never a crash") {
  std::mt19937_64 rng(test::Seed());
  int ok = 0;
  for (int round = 0; round < 5000; round++) {
    std::string bytes(rng() % 24, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 4 == 0 ? rng() % 4 : rng());
    auto decoded = DecodePostings(bytes);
    if (!decoded.ok()) {
      REQUIRE(decoded.status().code() == kCorruptIndex);
      continue;
    }
    ok++;
    for (size_t i = 1; i < decoded->size(); i++) {
      REQUIRE((*decoded)[i].doc_id > (*decoded)[i - 1].doc_id);
    }
  }
  MESSAGE(ok << " of 5000 random strings were valid posting lists");
}

TEST_CASE("lists stored back to back decode one after the other from a shared decoder") {
  Postings a{{1, 1}, {9, 3}};
  Postings b{{4, 2}};
  std::string bytes = Encode(a) + Encode(b);
  format::Decoder in(bytes);
  Postings out;
  REQUIRE(DecodePostings(&in, &out).ok());
  CHECK(out == a);
  REQUIRE(DecodePostings(&in, &out).ok());
  CHECK(out == b);
  CHECK(in.done());
}

}  // namespace
}  // namespace agentmem::index

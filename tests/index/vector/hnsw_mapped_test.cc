// tests/index/vector/hnsw_mapped_test.cc -- MappedRecordCheck: the level-0
// record checks of HnswIndex::Map(), made on an image read in pieces.
#include "index/vector/hnsw_mapped.h"

#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "index/vector/hnsw.h"
#include "tests/index/vector/vector_test_util.h"

namespace agentmem::index {
namespace {

constexpr uint32_t kDim = 8, kM = 16;
constexpr size_t kRecord = 2 * kM * 4 + 4 + kDim * 4 + 8;

// A mappable image of n random vectors under labels 1..n, every 7th deleted.
std::string ImageOf(size_t n) {
  auto rng = test::SeededRng(41);
  std::vector<float> data = test::RandomFloats(rng, n * kDim, -1.0f, 1.0f);
  HnswOptions o;
  o.metric = Metric::kL2;
  o.dim = kDim;
  auto index = HnswIndex::Create(o);
  REQUIRE(index.ok());
  for (size_t r = 0; r < n; ++r) {
    REQUIRE((*index)->Add(r + 1, std::span<const float>(data.data() + r * kDim, kDim)).ok());
  }
  for (uint64_t l = 1; l <= n; l += 7) REQUIRE((*index)->MarkDeleted(l).ok());
  std::string image;
  REQUIRE((*index)->SerializeMappable(&image).ok());
  return image;
}

uint64_t Level0(const std::string& image) {
  uint64_t at = 0;
  std::memcpy(&at, image.data() + 48, 8);
  return at;
}

// Feeds `image` in pieces of `piece` bytes; the first failure, or Finish().
Status CheckInPieces(const std::string& image, size_t piece) {
  MappedRecordCheck check;
  AGENTMEM_RETURN_IF_ERROR(check.Start(image, image.size()));
  for (size_t at = 0; at < image.size(); at += piece) {
    AGENTMEM_RETURN_IF_ERROR(
        check.Feed(at, std::string_view(image).substr(at, std::min(piece, image.size() - at))));
  }
  return check.Finish();
}

const size_t kPieces[] = {1, 7, 64, kRecord - 1, kRecord + 3, 4096, 1 << 20};

TEST_CASE("an image fed in pieces of any size passes, and Map() then takes its records as checked") {
  const std::string image = ImageOf(700);
  for (size_t piece : kPieces) {
    CAPTURE(piece);
    Status s = CheckInPieces(image, piece);
    CHECK_MESSAGE(s.ok(), s.ToString());
  }
  auto memory = std::shared_ptr<char[]>(new char[image.size() + 64]());
  std::memcpy(memory.get(), image.data(), image.size());
  auto checked = HnswIndex::Map(memory.get(), image.size(), 0, memory, 64, true);
  auto full = HnswIndex::Map(memory.get(), image.size(), 0, memory, 64, false);
  REQUIRE(checked.ok());
  REQUIRE(full.ok());
  CHECK((*checked)->Stats().deleted == (*full)->Stats().deleted);
  std::vector<float> q(kDim, 0.25f);
  auto a = (*checked)->Search(q);
  auto b = (*full)->Search(q);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->size() == b->size());
  for (size_t i = 0; i < a->size(); ++i) CHECK((*a)[i].id == (*b)[i].id);
}

TEST_CASE("the record check finds what Map() finds in a level-0 record and names the node") {
  const std::string image = ImageOf(300);
  const uint64_t level0 = Level0(image);
  struct Damage {
    size_t at;
    uint32_t value;
    const char* says;
  };
  const Damage damages[] = {
      {level0 + 7 * kRecord + 4, 0xfffffff0u, "node 7: link to"},
      {level0 + 9 * kRecord, 0xffffu, "node 9: too many links"},
      {level0 + 3 * kRecord + kRecord - 8, 0, "node 3: labels do not increase"},
      {level0 + 5 * kRecord, 0x10000u, "marked deleted"},  // the deleted flag of a live node
  };
  for (const Damage& d : damages) {
    CAPTURE(d.says);
    std::string bad = image;
    uint32_t word = 0;
    std::memcpy(&word, bad.data() + d.at, 4);
    word = d.value == 0x10000u ? word | d.value : d.value;
    std::memcpy(bad.data() + d.at, &word, 4);
    for (size_t piece : kPieces) {
      CAPTURE(piece);
      Status s = CheckInPieces(bad, piece);
      CHECK(s.code() == kCorruptIndex);
      CHECK(s.message().find(d.says) != std::string::npos);
    }
    auto memory = std::shared_ptr<char[]>(new char[bad.size() + 64]());
    std::memcpy(memory.get(), bad.data(), bad.size());
    CHECK(HnswIndex::Map(memory.get(), bad.size(), 0, memory).status().code() == kCorruptIndex);
  }
}

TEST_CASE("the record check refuses a header that does not fit and an image that ends early") {
  const std::string image = ImageOf(50);
  MappedRecordCheck check;
  CHECK(check.Start(image.substr(0, 40), image.size()).code() == kCorruptIndex);
  CHECK(check.Start(image, image.size() - 1).code() == kCorruptIndex);
  std::string bad = image;
  const uint32_t nodes = 51;
  std::memcpy(bad.data() + 24, &nodes, 4);
  CHECK(check.Start(bad, bad.size()).code() == kCorruptIndex);
  REQUIRE(check.Start(image, image.size()).ok());
  REQUIRE(check.Feed(0, std::string_view(image).substr(0, image.size() - 10)).ok());
  CHECK(check.Finish().code() == kCorruptIndex);
  // Pieces must come in order, without gaps.
  REQUIRE(check.Start(image, image.size()).ok());
  CHECK_FALSE(check.Feed(10, std::string_view(image).substr(10, 10)).ok());
}

}  // namespace
}  // namespace agentmem::index

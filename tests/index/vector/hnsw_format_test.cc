// tests/index/vector/hnsw_format_test.cc -- the HNSW image layout of
// index/vector/hnsw_format.h: the documented offsets, and refusal of damaged
// images (truncation, bit flips, and structural damage behind a recomputed
// checksum), which must never crash or allocate absurd memory.
#include "index/vector/hnsw_format.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "format/coding.h"
#include "format/crc32c.h"
#include "index/vector/hnsw.h"
#include "tests/index/vector/vector_test_util.h"
#include "tests/util/peak_memory.h"

namespace agentmem::index {
namespace {

using format::DecodeFixed16;
using format::DecodeFixed32;
using format::EncodeFixed32;
using format::EncodeFixed64;
using test::RandomFloats;
using test::SeededRng;

constexpr uint32_t kDim = 8;

// A small graph with several levels and some deleted nodes, and its image.
struct Fixture {
  std::unique_ptr<HnswIndex> index;
  std::string image;
};

Fixture MakeFixture(size_t n = 300, uint64_t salt = 41) {
  auto rng = SeededRng(salt);
  HnswOptions o;
  o.metric = Metric::kL2;
  o.dim = kDim;
  o.m = 4;  // small m: more levels in a small graph
  Fixture f;
  f.index = std::move(*HnswIndex::Create(o));
  std::vector<float> data = RandomFloats(rng, n * kDim, -1.0f, 1.0f);
  for (size_t r = 0; r < n; ++r) {
    REQUIRE(f.index->Add(1000 + r, std::span<const float>(data.data() + r * kDim, kDim)).ok());
  }
  for (size_t r = 0; r < n; r += 10) REQUIRE(f.index->MarkDeleted(1000 + r).ok());
  REQUIRE(f.index->Serialize(&f.image).ok());
  return f;
}

void FixCrc(std::string* image) {
  size_t at = image->size() - hnsw::kImageTrailerSize;
  EncodeFixed32(image->data() + at, format::MaskCrc(format::Crc32c(image->data(), at)));
}

// Where the documented layout puts each record and its link lists.
struct RecordLoc {
  size_t offset = 0;
  uint32_t node = 0;
  int level = 0;
  std::vector<size_t> layers;  // offset of each layer's u16 count
};

std::vector<RecordLoc> WalkRecords(const std::string& image, uint32_t dim, uint32_t base_count) {
  std::vector<RecordLoc> out;
  const uint32_t records = DecodeFixed32(image.data() + 36);
  size_t at = hnsw::kImageHeaderSize;
  for (uint32_t i = 0; i < records; ++i) {
    RecordLoc r;
    r.offset = at;
    r.node = DecodeFixed32(image.data() + at);
    r.level = static_cast<uint8_t>(image[at + 12]);
    at += hnsw::kRecordFixedSize + (r.node >= base_count ? 4 * dim : 0);
    for (int l = 0; l <= r.level; ++l) {
      r.layers.push_back(at);
      at += 2 + 4 * size_t{DecodeFixed16(image.data() + at)};
    }
    out.push_back(r);
  }
  REQUIRE(at == image.size() - hnsw::kImageTrailerSize);
  return out;
}

// Deserialises and expects kCorruptIndex with `fragment` in the message.
void ExpectCorrupt(const std::string& image, const char* fragment) {
  Result<std::unique_ptr<HnswIndex>> r = HnswIndex::Deserialize(image);
  REQUIRE_FALSE(r.ok());
  CAPTURE(r.status().ToString());
  CHECK(r.status().code() == kCorruptIndex);
  CHECK(r.status().message().find(fragment) != std::string::npos);
}

// Applies `edit` to a copy of the image, fixes the checksum, expects refusal.
template <class Edit>
void ExpectEditRefused(const std::string& image, const char* fragment, Edit edit) {
  std::string bad = image;
  edit(&bad);
  FixCrc(&bad);
  ExpectCorrupt(bad, fragment);
}

TEST_CASE("the image header holds the documented fields at the documented offsets") {
  Fixture f = MakeFixture();
  const std::string& im = f.image;
  CHECK(im.substr(0, 4) == "AHNS");
  CHECK(DecodeFixed16(im.data() + 4) == hnsw::kImageVersion);
  CHECK(static_cast<uint8_t>(im[6]) == static_cast<uint8_t>(Metric::kL2));
  CHECK(im[7] == 0);
  CHECK(DecodeFixed32(im.data() + 8) == kDim);
  CHECK(DecodeFixed32(im.data() + 12) == 4);
  CHECK(DecodeFixed32(im.data() + 16) == 200);
  CHECK(DecodeFixed32(im.data() + 20) == 0);
  CHECK(DecodeFixed32(im.data() + 24) == 300);
  CHECK(static_cast<int32_t>(DecodeFixed32(im.data() + 32)) == f.index->Stats().max_level);
  CHECK(DecodeFixed32(im.data() + 36) == 300);
  CHECK(format::DecodeFixed64(im.data() + 40) ==
        im.size() - hnsw::kImageHeaderSize - hnsw::kImageTrailerSize);
  std::vector<RecordLoc> recs = WalkRecords(im, kDim, 0);
  REQUIRE(recs.size() == 300);
  for (uint32_t i = 0; i < recs.size(); ++i) {
    CHECK(recs[i].node == i);
    CHECK(format::DecodeFixed64(im.data() + recs[i].offset + 4) == 1000 + i);
    CHECK(static_cast<uint8_t>(im[recs[i].offset + 13]) == (i % 10 == 0 ? 1 : 0));
  }
  const uint32_t entry = DecodeFixed32(im.data() + 28);
  CHECK(recs[entry].level == f.index->Stats().max_level);
}

TEST_CASE("an image truncated at any offset is refused") {
  Fixture f = MakeFixture(120);
  for (size_t len = 0; len < f.image.size(); ++len) {
    Result<std::unique_ptr<HnswIndex>> r = HnswIndex::Deserialize(f.image.substr(0, len));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == kCorruptIndex);
  }
  CHECK(HnswIndex::Deserialize(f.image).ok());
}

TEST_CASE("random bit flips are caught by the checksum") {
  Fixture f = MakeFixture();
  auto rng = SeededRng(42);
  std::uniform_int_distribution<size_t> pos(0, f.image.size() * 8 - 1);
  for (int t = 0; t < 2000; ++t) {
    std::string bad = f.image;
    size_t bit = pos(rng);
    bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
    Result<std::unique_ptr<HnswIndex>> r = HnswIndex::Deserialize(bad);
    REQUIRE_FALSE(r.ok());
    CAPTURE(bit);
    CHECK((r.status().code() == kCorruptIndex || r.status().code() == kFormatVersion));
  }
}

TEST_CASE("bit flips behind a recomputed checksum are refused or give a usable graph") {
  Fixture f = MakeFixture(200);
  auto rng = SeededRng(43);
  std::uniform_int_distribution<size_t> pos(0, (f.image.size() - 4) * 8 - 1);
  std::uniform_int_distribution<int> flips(1, 4);
  size_t refused = 0, loaded = 0;
  for (int t = 0; t < 3000; ++t) {
    std::string bad = f.image;
    for (int i = flips(rng); i > 0; --i) {
      size_t bit = pos(rng);
      bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
    }
    FixCrc(&bad);
    Result<std::unique_ptr<HnswIndex>> r = HnswIndex::Deserialize(bad);
    if (!r.ok()) {
      CHECK((r.status().code() == kCorruptIndex || r.status().code() == kFormatVersion));
      ++refused;
      continue;
    }
    // Damage the validator cannot see (a vector value, a label, a link to
    // another valid node) must still leave a graph that works.
    ++loaded;
    std::vector<float> q = RandomFloats(rng, kDim, -1.0f, 1.0f);
    HnswSearchOptions o;
    o.k = 10;
    CHECK((*r)->Search(q, o).ok());
    std::string again;
    CHECK((*r)->Serialize(&again).ok());
  }
  MESSAGE("damaged images with a valid checksum: " << refused << " refused, " << loaded
                                                   << " loaded and searched");
  CHECK(refused > 0);
}

TEST_CASE("damaged header fields behind a valid checksum are refused by name") {
  Fixture f = MakeFixture();
  const std::string& im = f.image;
  ExpectEditRefused(im, "bad magic", [](std::string* s) { (*s)[0] = 'X'; });
  ExpectEditRefused(im, "version 0", [](std::string* s) { (*s)[4] = (*s)[5] = 0; });
  ExpectEditRefused(im, "unknown metric", [](std::string* s) { (*s)[6] = 9; });
  ExpectEditRefused(im, "unknown flags", [](std::string* s) { (*s)[7] = 2; });
  ExpectEditRefused(im, "dimension 0", [](std::string* s) { EncodeFixed32(s->data() + 8, 0); });
  ExpectEditRefused(im, "m 2 out of range",
                    [](std::string* s) { EncodeFixed32(s->data() + 12, 2); });
  ExpectEditRefused(im, "ef_construction 0",
                    [](std::string* s) { EncodeFixed32(s->data() + 16, 0); });
  ExpectEditRefused(im, "body_length",
                    [](std::string* s) { EncodeFixed64(s->data() + 40, s->size()); });
  ExpectEditRefused(im, "entry point 300 out of range",
                    [](std::string* s) { EncodeFixed32(s->data() + 28, 300); });
  ExpectEditRefused(im, "max_level 40", [](std::string* s) { EncodeFixed32(s->data() + 32, 40); });
  ExpectEditRefused(im, "empty graph", [](std::string* s) {
    EncodeFixed32(s->data() + 24, 0);
    EncodeFixed32(s->data() + 36, 0);
  });
  ExpectEditRefused(im, "a delta", [](std::string* s) { EncodeFixed32(s->data() + 20, 5); });
}

TEST_CASE("a header promising two billion nodes is refused before anything is allocated") {
  Fixture f = MakeFixture();
  // Were the loader to size the graph from this field first, it would ask for
  // hundreds of GiB and fail with kNoMem instead.
  ExpectEditRefused(f.image, "record_count",
                    [](std::string* s) { EncodeFixed32(s->data() + 24, hnsw::kMaxNodes); });
  ExpectEditRefused(f.image, "out of range",
                    [](std::string* s) { EncodeFixed32(s->data() + 24, hnsw::kMaxNodes + 1); });
  ExpectEditRefused(f.image, "need at least", [](std::string* s) {
    EncodeFixed32(s->data() + 24, 1u << 30);
    EncodeFixed32(s->data() + 36, 1u << 30);
  });
}

TEST_CASE("an image from a newer version is refused with kFormatVersion") {
  Fixture f = MakeFixture();
  std::string newer = f.image;
  newer[4] = 2;
  FixCrc(&newer);
  Status s = HnswIndex::Deserialize(newer).status();
  CHECK(s.code() == kFormatVersion);
  CHECK(s.message().find("newer") != std::string::npos);
}

TEST_CASE("damaged node records behind a valid checksum are refused by name") {
  Fixture f = MakeFixture();
  const std::string& im = f.image;
  std::vector<RecordLoc> recs = WalkRecords(im, kDim, 0);
  const int max_level = f.index->Stats().max_level;
  // A record with a non-empty layer-0 list, and one with a non-empty layer 1.
  const RecordLoc* r0 = nullptr;
  const RecordLoc* r1 = nullptr;
  for (const RecordLoc& r : recs) {
    if (!r0 && DecodeFixed16(im.data() + r.layers[0]) > 0) r0 = &r;
    if (!r1 && r.level >= 1 && DecodeFixed16(im.data() + r.layers[1]) > 0) r1 = &r;
  }
  REQUIRE(r0 != nullptr);
  REQUIRE(r1 != nullptr);
  uint32_t level0_node = 0;
  while (recs[level0_node].level != 0) ++level0_node;
  const size_t first_link0 = r0->layers[0] + 2;
  const size_t first_link1 = r1->layers[1] + 2;

  ExpectEditRefused(im, "neighbour 300 on layer 0 is out of range",
                    [&](std::string* s) { EncodeFixed32(s->data() + first_link0, 300); });
  ExpectEditRefused(im, "links to itself",
                    [&](std::string* s) { EncodeFixed32(s->data() + first_link0, r0->node); });
  ExpectEditRefused(im, "on layer 1 has level 0",
                    [&](std::string* s) { EncodeFixed32(s->data() + first_link1, level0_node); });
  ExpectEditRefused(im, "links on layer 0, more than 8",
                    [&](std::string* s) { format::EncodeFixed16(s->data() + r0->layers[0], 9); });
  ExpectEditRefused(im, "above max_level", [&](std::string* s) {
    (*s)[recs[5].offset + 12] = static_cast<char>(max_level + 1);
  });
  ExpectEditRefused(im, "unknown flags 0x02",
                    [&](std::string* s) { (*s)[recs[5].offset + 13] = 2; });
  ExpectEditRefused(im, "appears twice", [&](std::string* s) {
    std::memcpy(s->data() + recs[7].offset + 4, s->data() + recs[6].offset + 4, 8);
  });
  ExpectEditRefused(im, "out of order",
                    [&](std::string* s) { EncodeFixed32(s->data() + recs[9].offset, 8); });
  ExpectEditRefused(im, "entry point",
                    [&](std::string* s) { EncodeFixed32(s->data() + 28, level0_node); });
  ExpectEditRefused(im, "bytes after the last record", [&](std::string* s) {
    s->insert(s->size() - hnsw::kImageTrailerSize, std::string(4, '\0'));
    EncodeFixed64(s->data() + 40, format::DecodeFixed64(s->data() + 40) + 4);
  });
  ExpectEditRefused(im, "is truncated", [&](std::string* s) {
    const size_t cut = s->size() - hnsw::kImageTrailerSize - recs.back().offset;
    s->erase(recs.back().offset, cut);
    EncodeFixed64(s->data() + 40, format::DecodeFixed64(s->data() + 40) - cut);
  });
}

// A hand-made graph: `n` nodes, all at `level`, no links. Used to build images
// that the adapter would never write.
class FakeGraph final : public hnsw::GraphSource {
 public:
  FakeGraph(uint32_t n, int level) : n_(n), level_(level), vec_(kDim, 0.5f) {}
  hnsw::GraphShape shape() const override { return {Metric::kL2, kDim, 16, 200}; }
  uint32_t node_count() const override { return n_; }
  uint32_t entry_point() const override { return n_ == 0 ? hnsw::kNoNode : 0; }
  int max_level() const override { return n_ == 0 ? -1 : level_; }
  uint64_t label(uint32_t node) const override { return 77 + node; }
  int level(uint32_t) const override { return level_; }
  bool deleted(uint32_t) const override { return false; }
  const float* vector(uint32_t) const override { return vec_.data(); }
  std::span<const uint32_t> links(uint32_t, int) const override { return {}; }
  bool HasLabel(uint64_t l) const override { return l >= 77 && l < 77 + n_; }

 private:
  uint32_t n_;
  int level_;
  std::vector<float> vec_;
};

std::string FakeImage(uint32_t n, int level) {
  FakeGraph g(n, level);
  std::vector<uint32_t> all(n);
  for (uint32_t i = 0; i < n; ++i) all[i] = i;
  std::string image;
  hnsw::EncodeImage(g, 0, all, &image);
  CHECK(image.size() == hnsw::EncodedImageSize(g, 0, all));
  return image;
}

TEST_CASE("implausibly many upper levels are refused, bounding the memory of a hostile image") {
  // 10 nodes at level 5 sum to 50 <= 10 + 64: plausible and loadable.
  Result<std::unique_ptr<HnswIndex>> ok = HnswIndex::Deserialize(FakeImage(10, 5));
  REQUIRE(ok.ok());
  CHECK((*ok)->Stats().max_level == 5);
  std::vector<float> q(kDim, 0.5f);
  HnswSearchOptions o;
  o.k = 3;
  CHECK((*ok)->Search(q, o)->size() == 1);  // no links: only the entry point is reachable
  // 30 nodes at level 31 sum to 930: every one would cost 31 upper lists.
  ExpectCorrupt(FakeImage(30, 31), "implausibly high");
}

TEST_CASE("a damaged delta is refused and leaves the index as it was") {
  Fixture f = MakeFixture(200);
  Result<std::unique_ptr<HnswIndex>> replica = HnswIndex::Deserialize(f.image);
  REQUIRE(replica.ok());
  ChangeMark mark = f.index->Mark();
  auto rng = SeededRng(44);
  std::vector<float> data = RandomFloats(rng, 50 * kDim, -1.0f, 1.0f);
  for (size_t r = 0; r < 50; ++r) {
    REQUIRE(f.index->Add(5000 + r, std::span<const float>(data.data() + r * kDim, kDim)).ok());
  }
  std::string delta;
  REQUIRE(f.index->EncodeDelta(mark, &delta).ok());
  std::vector<RecordLoc> recs = WalkRecords(delta, kDim, 200);
  // Damage the last record only: every earlier record is valid, and must not
  // have been applied either.
  std::string bad = delta;
  EncodeFixed32(bad.data() + recs.back().layers[0] + 2, 999);
  FixCrc(&bad);
  Status s = (*replica)->ApplyDelta(bad);
  CHECK(s.code() == kCorruptIndex);
  std::string unchanged;
  REQUIRE((*replica)->Serialize(&unchanged).ok());
  CHECK(unchanged == f.image);
  for (size_t len = 0; len < delta.size(); len += 7) {
    CHECK((*replica)->ApplyDelta(delta.substr(0, len)).code() == kCorruptIndex);
  }
  REQUIRE((*replica)->ApplyDelta(delta).ok());
  CHECK((*replica)->size() == 250);
}

TEST_CASE("a delta without vectors applies with the vectors its caller gives, as the one with them") {
  for (Metric metric : {Metric::kCosine, Metric::kInnerProduct, Metric::kL2}) {
    CAPTURE(static_cast<int>(metric));
    auto rng = SeededRng(45);
    HnswOptions o;
    o.metric = metric;
    o.dim = kDim;
    o.m = 4;
    auto index = std::move(*HnswIndex::Create(o));
    std::vector<float> data = RandomFloats(rng, 260 * kDim, -1.0f, 1.0f);
    auto row = [&](size_t r) { return std::span<const float>(data.data() + r * kDim, kDim); };
    for (size_t r = 0; r < 200; ++r) REQUIRE(index->Add(1 + r, row(r)).ok());
    std::string base;
    REQUIRE(index->Serialize(&base).ok());
    ChangeMark mark = index->Mark();
    for (size_t r = 200; r < 260; ++r) REQUIRE(index->Add(1 + r, row(r)).ok());
    REQUIRE(index->MarkDeleted(7).ok());
    std::string with, without;
    REQUIRE(index->EncodeDelta(mark, &with).ok());
    REQUIRE(index->EncodeDelta(mark, &without, /*with_vectors=*/false).ok());
    CHECK(with.size() - without.size() == 60 * kDim * 4);
    CHECK(static_cast<uint8_t>(without[7]) == hnsw::kImageFlagNoVectors);
    // The caller's vectors are the ones given to Add(): raw, not normalised.
    auto given = [&](uint64_t label) -> const float* {
      return label >= 1 && label <= 260 ? data.data() + (label - 1) * kDim : nullptr;
    };
    std::string want;
    REQUIRE(index->Serialize(&want).ok());
    auto replica = std::move(*HnswIndex::Deserialize(base));
    REQUIRE(replica->ApplyDelta(without, given).ok());
    std::string got;
    REQUIRE(replica->Serialize(&got).ok());
    CHECK(got == want);
    // A vector the caller does not have fails the image, which changes nothing.
    auto fresh = std::move(*HnswIndex::Deserialize(base));
    auto missing = [&](uint64_t label) { return label == 230 ? nullptr : given(label); };
    Status s = fresh->ApplyDelta(without, missing);
    CHECK(s.code() == kCorruptIndex);
    CHECK(s.message().find("label 230") != std::string::npos);
    CHECK(fresh->ApplyDelta(without).code() == kCorruptIndex);  // no vectors at all
    std::string unchanged;
    REQUIRE(fresh->Serialize(&unchanged).ok());
    CHECK(unchanged == base);
    // A full image must carry its vectors.
    auto empty = std::move(*HnswIndex::Create(o));
    std::string full_without;
    REQUIRE(index->EncodeDelta(empty->Mark(), &full_without, false).ok());
    CHECK(HnswIndex::Deserialize(full_without).status().code() == kCorruptIndex);
  }
}

}  // namespace
TEST_CASE("a delta without vectors is refused before room is made for the vectors its header counts") {
  // 4,096 new nodes of dimension 65,536 in 72 KiB of records: room for their
  // vectors would be a gigabyte. None has a vector to supply, and the image
  // is refused having allocated about its own size.
  constexpr uint32_t kDim = 65536, kNodes = 4096;
  HnswOptions o;
  o.dim = kDim;
  auto g = HnswIndex::Create(o);
  REQUIRE(g.ok());
  std::string image = "AHNS";
  format::PutFixed16(&image, 1);
  image.push_back(1);  // cosine
  image.push_back(1);  // no vectors
  for (uint32_t v : {kDim, o.m, o.ef_construction, 0u, kNodes, 0u, 0u, kNodes}) {
    format::PutFixed32(&image, v);
  }
  format::PutFixed64(&image, 0);  // body_length, below
  const size_t body = image.size();
  for (uint32_t node = 0; node < kNodes; node++) {
    format::PutFixed32(&image, node);
    format::PutFixed64(&image, node + 1);
    image.push_back(0);  // level
    image.push_back(0);  // flags
    format::PutFixed16(&image, 0);  // no links
  }
  EncodeFixed64(image.data() + 40, image.size() - body);
  format::PutFixed32(&image, format::MaskCrc(format::Crc32c(image.data(), image.size())));
  int lookups = 0;
  const long start = test::ResetPeakKib();
  Status s = (*g)->ApplyDelta(image, [&](uint64_t) -> const float* {
    lookups++;
    return nullptr;
  });
  const long grown = test::PeakGrowthKib(start);
  CHECK(s.code() == kCorruptIndex);
  CHECK(s.message().find("no usable vector") != std::string::npos);
  CHECK(lookups == 1);
  CHECK((*g)->size() == 0);
  MESSAGE("peak memory grew " << grown << " KiB");
  if (start >= 0 && test::MemoryMeasurable()) CHECK(grown < 64 * 1024);
}

}  // namespace agentmem::index

namespace agentmem::index {
namespace {

TEST_CASE("a delta rebased onto a graph that holds its first new nodes gives the writer's graph") {
  auto rng = SeededRng(77);
  HnswOptions o;
  o.metric = Metric::kCosine;
  o.dim = kDim;
  std::vector<float> data = RandomFloats(rng, 330 * kDim, -1.0f, 1.0f);
  auto rows = [&](size_t from, size_t to) {
    std::vector<HnswInsert> items;
    for (size_t r = from; r < to; ++r) {
      items.push_back({1000 + r, std::span<const float>(data.data() + r * kDim, kDim)});
    }
    return items;
  };
  auto writer = std::move(*HnswIndex::Create(o));
  REQUIRE(writer->AddBatch(rows(0, 300)).ok());
  std::string base;
  REQUIRE(writer->Serialize(&base).ok());
  const ChangeMark mark = writer->Mark();
  // The writer inserts two transactions and writes one delta of both.
  REQUIRE(writer->AddBatch(rows(300, 310)).ok());
  REQUIRE(writer->AddBatch(rows(310, 330)).ok());
  std::string delta, with_vectors, want;
  REQUIRE(writer->EncodeDelta(mark, &delta, /*with_vectors=*/false).ok());
  REQUIRE(writer->EncodeDelta(mark, &with_vectors).ok());
  REQUIRE(writer->Serialize(&want).ok());
  // A reader that inserted the first transaction itself.
  auto reader = std::move(*HnswIndex::Deserialize(base));
  REQUIRE(reader->AddBatch(rows(300, 310)).ok());
  CHECK(reader->ApplyDelta(delta).code() == kCorruptIndex);  // builds on 300, not 310
  std::string rebased;
  REQUIRE(hnsw::RebaseImage(delta, 310, &rebased).ok());
  REQUIRE(reader->ApplyDelta(rebased, [&](uint64_t label) {
                   return data.data() + (label - 1000) * kDim;
                 }).ok());
  std::string got;
  REQUIRE(reader->Serialize(&got).ok());
  CHECK(got == want);
  // Only within [base_count, node_count], and only without vectors.
  CHECK(hnsw::RebaseImage(delta, 299, &rebased).code() == kCorruptIndex);
  CHECK(hnsw::RebaseImage(delta, 331, &rebased).code() == kCorruptIndex);
  CHECK(hnsw::RebaseImage(with_vectors, 310, &rebased).code() == kCorruptIndex);
  // A rebased image is checked like any other: a reader whose nodes differ
  // from the image's is refused.
  auto other = std::move(*HnswIndex::Deserialize(base));
  REQUIRE(other->AddBatch(rows(310, 320)).ok());  // other labels for nodes 300..309
  REQUIRE(hnsw::RebaseImage(delta, 310, &rebased).ok());
  CHECK(other->ApplyDelta(rebased, [&](uint64_t label) {
                 return data.data() + (label - 1000) * kDim;
               }).code() == kCorruptIndex);
}

}  // namespace
}  // namespace agentmem::index

// tests/index/vector/hnsw_test.cc -- HnswIndex (index/vector/hnsw.h): recall
// against exact ground truth (real SIFT data and synthetic clusters), deletion,
// filters, growth, persistence through full images and deltas, concurrency.
#include "index/vector/hnsw.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "index/vector/distance.h"
#include "index/vector/exact_search.h"
#include "tests/index/vector/vector_test_util.h"

namespace agentmem::index {
namespace {

using test::RandomFloats;
using test::SeededRng;

const Metric kMetrics[] = {Metric::kCosine, Metric::kInnerProduct, Metric::kL2};

std::unique_ptr<HnswIndex> NewIndex(Metric metric, uint32_t dim, size_t capacity = 1024) {
  HnswOptions o;
  o.metric = metric;
  o.dim = dim;
  o.initial_capacity = capacity;
  Result<std::unique_ptr<HnswIndex>> index = HnswIndex::Create(o);
  REQUIRE(index.ok());
  return std::move(*index);
}

// Adds rows [0, n) of data under labels first_label + row.
void AddRows(HnswIndex* index, const std::vector<float>& data, size_t dim, size_t from, size_t to,
             uint64_t first_label = 0) {
  for (size_t r = from; r < to; ++r) {
    REQUIRE(index->Add(first_label + r, std::span<const float>(data.data() + r * dim, dim)).ok());
  }
}

// Adds rows [from, to) as AddRows does, in batches of `batch` rows linked on
// `threads` threads (HnswIndex::AddBatch).
void AddRowBatches(HnswIndex* index, const std::vector<float>& data, size_t dim, size_t from,
                   size_t to, size_t batch, unsigned threads, uint64_t first_label = 0) {
  for (size_t start = from; start < to; start += batch) {
    std::vector<HnswInsert> items;
    for (size_t r = start; r < std::min(to, start + batch); ++r) {
      items.push_back({first_label + r, std::span<const float>(data.data() + r * dim, dim)});
    }
    REQUIRE(index->AddBatch(items, threads).ok());
  }
}

// How a recall test builds its index: one insert at a time, or as the engine
// commits, 1,000 per batch on two threads.
enum class Build { kOneByOne, kBatchesOnTwoThreads };
std::string BuildName(Build b) {
  return b == Build::kOneByOne ? "one by one" : "batches of 1000 on 2 threads";
}
void BuildRows(Build b, HnswIndex* index, const std::vector<float>& data, size_t dim, size_t n) {
  if (b == Build::kOneByOne) {
    AddRows(index, data, dim, 0, n);
  } else {
    AddRowBatches(index, data, dim, 0, n, 1000, 2);
  }
}

// Search options without designated initialisers (which -Wextra flags when
// a member is left out).
HnswSearchOptions Top(size_t k, size_t ef = 0, LabelFilter filter = {}) {
  HnswSearchOptions o;
  o.k = k;
  o.ef = ef;
  o.filter = std::move(filter);
  return o;
}

std::vector<Neighbor> MustSearch(const HnswIndex& index, std::span<const float> q,
                                 const HnswSearchOptions& o) {
  Result<std::vector<Neighbor>> r = index.Search(q, o);
  REQUIRE(r.ok());
  return std::move(*r);
}

// Both indexes answer `q` with the same ids in the same order (and the same
// distances, when `distances`).
void CheckSameAnswers(const HnswIndex& want_index, const HnswIndex& got_index,
                      std::span<const float> q, const HnswSearchOptions& o, bool distances = false) {
  const auto want = MustSearch(want_index, q, o);
  const auto got = MustSearch(got_index, q, o);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].id == want[i].id);
    if (distances) CHECK(got[i].distance == want[i].distance);
  }
}

size_t Overlap(const std::vector<Neighbor>& got, const std::vector<uint64_t>& truth, size_t k) {
  std::set<uint64_t> want(truth.begin(), truth.begin() + std::min(k, truth.size()));
  size_t hits = 0;
  for (size_t i = 0; i < std::min(k, got.size()); ++i) hits += want.count(got[i].id);
  return hits;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

std::string ImageOf(const HnswIndex& index) {
  std::string image;
  REQUIRE(index.Serialize(&image).ok());
  return image;
}

TEST_CASE("options out of range are refused with kRange naming the field") {
  HnswOptions o;
  o.dim = 0;
  CHECK(HnswIndex::Create(o).status().code() == kRange);
  o.dim = 8;
  o.m = 2;
  Status s = HnswIndex::Create(o).status();
  CHECK(s.code() == kRange);
  CHECK(s.message().find("m 2") != std::string::npos);
  o.m = 16;
  o.ef_construction = 0;
  CHECK(HnswIndex::Create(o).status().code() == kRange);
  o.ef_construction = 200;
  o.metric = static_cast<Metric>(7);
  CHECK(HnswIndex::Create(o).status().code() == kRange);
  o.metric = Metric::kL2;
  CHECK(HnswIndex::Create(o).ok());
}

TEST_CASE("an empty index returns no results and serialises to an empty image") {
  auto index = NewIndex(Metric::kL2, 4);
  std::vector<float> q = {1, 2, 3, 4};
  CHECK(MustSearch(*index, q, {}).empty());
  CHECK(index->Stats().max_level == -1);
  Result<std::unique_ptr<HnswIndex>> copy = HnswIndex::Deserialize(ImageOf(*index));
  REQUIRE(copy.ok());
  CHECK((*copy)->size() == 0);
  CHECK(MustSearch(**copy, q, {}).empty());
}

TEST_CASE("bad vectors and duplicate labels are refused without changing the index") {
  auto index = NewIndex(Metric::kL2, 3);
  std::vector<float> v = {1, 2, 3};
  REQUIRE(index->Add(7, v).ok());
  CHECK(index->Add(7, v).code() == kConstraint);
  std::vector<float> short_v = {1, 2};
  CHECK(index->Add(8, short_v).code() == kMismatchDimension);
  std::vector<float> nan_v = {1, std::nanf(""), 3};
  CHECK(index->Add(9, nan_v).code() == kMismatch);
  std::vector<float> inf_v = {1, INFINITY, 3};
  CHECK(index->Search(inf_v, {}).status().code() == kMismatch);
  CHECK(index->Search(short_v, {}).status().code() == kMismatchDimension);
  CHECK(index->size() == 1);
  REQUIRE(index->MarkDeleted(7).ok());
  CHECK(index->Add(7, v).code() == kConstraint);  // labels are never reused
  CHECK(index->MarkDeleted(7).ok());              // again: harmless
  CHECK(index->MarkDeleted(12345).code() == kNotFound);
}

TEST_CASE("each inserted vector is its own nearest neighbour (cosine and l2)") {
  auto rng = SeededRng(21);
  const size_t n = 2000, dim = 32;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  for (Metric metric : {Metric::kCosine, Metric::kL2}) {
    auto index = NewIndex(metric, dim);
    AddRows(index.get(), data, dim, 0, n, 100);
    size_t found = 0;
    for (size_t r = 0; r < n; r += 7) {
      auto hits = MustSearch(*index, std::span<const float>(data.data() + r * dim, dim), Top(1));
      REQUIRE(hits.size() == 1);
      found += hits[0].id == 100 + r;
      CHECK(hits[0].distance == doctest::Approx(0.0).epsilon(1e-5).scale(1.0));
    }
    CHECK(found == (n + 6) / 7);
  }
}

TEST_CASE("with ef as large as the index, search equals the exact scan for every metric") {
  auto rng = SeededRng(22);
  const size_t n = 1500, dim = 24;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  for (Metric metric : kMetrics) {
    CAPTURE(MetricName(metric));
    auto index = NewIndex(metric, dim);
    AddRows(index.get(), data, dim, 0, n);
    for (int t = 0; t < 20; ++t) {
      std::vector<float> q = RandomFloats(rng, dim, -1.0f, 1.0f);
      auto got = MustSearch(*index, q, Top(10, n));
      auto want = ExactTopK(metric, q, VectorBlock{data.data(), n, dim}, 10);
      REQUIRE(want.ok());
      REQUIRE(got.size() == 10);
      for (size_t i = 0; i < 10; ++i) {
        CHECK(got[i].distance == doctest::Approx((*want)[i].distance).epsilon(1e-4));
      }
    }
  }
}

TEST_CASE("cosine vectors of any length, near zero or near the float limit, give cosine distances") {
  auto rng = SeededRng(23);
  const size_t n = 600, dim = 24;
  const std::vector<float> unit = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  for (float factor : {1.0f, 1e-30f, 1e30f}) {
    CAPTURE(factor);
    std::vector<float> data = unit;
    for (float& x : data) x *= factor;
    // Kept as given with their inverse length as scale, or kept normalised
    // where a product of two components could vanish or overflow.
    Result<float> scale = HnswIndex::ScaleFor(Metric::kCosine, data.data(), dim);
    REQUIRE(scale.ok());
    CHECK((*scale == 0) == (factor != 1.0f));
    auto index = NewIndex(Metric::kCosine, dim);
    AddRows(index.get(), data, dim, 0, n);
    const std::vector<float> zero(dim, 0.0f);
    REQUIRE(index->Add(n, zero).ok());
    for (int t = 0; t < 10; ++t) {
      std::vector<float> q = RandomFloats(rng, dim, -1.0f, 1.0f);
      auto got = MustSearch(*index, q, Top(10, n + 1));
      auto want = ExactTopK(Metric::kCosine, q, VectorBlock{unit.data(), n, dim}, 10);
      REQUIRE(want.ok());
      REQUIRE(got.size() == 10);
      for (size_t i = 0; i < 10; ++i) {
        CHECK(got[i].distance == doctest::Approx((*want)[i].distance).epsilon(1e-4));
      }
    }
    // The zero vector is at distance 1 from everything.
    auto far = MustSearch(*index, RandomFloats(rng, dim, -1.0f, 1.0f), Top(n + 1, n + 1));
    REQUIRE(far.size() == n + 1);
    bool seen = false;
    for (const Neighbor& h : far) {
      if (h.id != n) continue;
      seen = true;
      CHECK(h.distance == doctest::Approx(1.0).epsilon(1e-6));
    }
    CHECK(seen);
  }
}

TEST_CASE("HNSW recall@10 on real SIFT data meets 0.98 at the default ef") {
  test::TexmexMatrix<float> base, queries;
  test::TexmexMatrix<int32_t> truth;
  const std::string dir = test::SiftDir();
  if (!test::ReadTexmex(dir + "/base.fvecs", &base) ||
      !test::ReadTexmex(dir + "/query.fvecs", &queries) ||
      !test::ReadTexmex(dir + "/groundtruth.ivecs", &truth)) {
    MESSAGE("skipped: " << dir << " is absent");
    return;
  }
  for (Build how : {Build::kOneByOne, Build::kBatchesOnTwoThreads}) {
    const std::string build_name = BuildName(how);
    CAPTURE(build_name);
    auto index = NewIndex(Metric::kL2, static_cast<uint32_t>(base.dim), base.rows);
    test::Stopwatch build;
    BuildRows(how, index.get(), base.values, base.dim, base.rows);
    const double build_s = build.Seconds();
    MESSAGE("SIFT build " << build_name << ": " << base.rows << " x " << base.dim << " in "
                          << build_s << " s (" << base.rows / build_s
                          << " inserts/s, m 16, ef_construction 200, "
                          << std::string(SimdPathName(ActiveSimdPath())) << ")");
    double recall_at_default = 0;
    for (size_t ef : {10, 16, 32, 64, 128}) {
      size_t hits = 0;
      std::vector<double> micros;
      for (size_t qi = 0; qi < queries.rows; ++qi) {
        std::span<const float> q(queries.row(qi), queries.dim);
        test::Stopwatch sw;
        auto got = MustSearch(*index, q, Top(10, ef));
        micros.push_back(sw.Seconds() * 1e6);
        std::vector<uint64_t> want(truth.row(qi), truth.row(qi) + 10);
        hits += Overlap(got, want, 10);
      }
      const double recall = hits / (10.0 * queries.rows);
      if (ef == index->options().default_ef) recall_at_default = recall;
      MESSAGE("SIFT ef " << ef << ": recall@10 " << recall << ", latency p50 "
                         << Percentile(micros, 0.5) << " us, p99 " << Percentile(micros, 0.99)
                         << " us");
    }
    CHECK(index->options().default_ef == 64);
    CHECK(recall_at_default >= 0.98);
  }
}

// Points around `clusters` random unit centres, as embeddings of similar
// texts are: each centre plus noise.
std::vector<float> ClusteredVectors(std::mt19937_64& rng, size_t n, size_t dim, size_t clusters) {
  std::vector<float> centres = RandomFloats(rng, clusters * dim, -1.0f, 1.0f);
  std::normal_distribution<float> noise(0.0f, 0.35f);
  std::uniform_int_distribution<size_t> pick(0, clusters - 1);
  std::vector<float> out(n * dim);
  for (size_t i = 0; i < n; ++i) {
    const float* c = centres.data() + pick(rng) * dim;
    for (size_t j = 0; j < dim; ++j) out[i * dim + j] = c[j] + noise(rng);
  }
  return out;
}

TEST_CASE("HNSW recall@10 on clustered 384-d vectors (cosine) at default settings") {
  auto rng = SeededRng(23);
  const size_t n = 10000, dim = 384, nq = 100;
  std::vector<float> data = ClusteredVectors(rng, n + nq, dim, 50);
  for (Build how : {Build::kOneByOne, Build::kBatchesOnTwoThreads}) {
    const std::string build_name = BuildName(how);
    CAPTURE(build_name);
    auto index = NewIndex(Metric::kCosine, dim, n);
    test::Stopwatch build;
    BuildRows(how, index.get(), data, dim, n);
    const double build_s = build.Seconds();
    size_t hits = 0;
    std::vector<double> micros;
    for (size_t qi = 0; qi < nq; ++qi) {
      std::span<const float> q(data.data() + (n + qi) * dim, dim);
      test::Stopwatch sw;
      auto got = MustSearch(*index, q, Top(10));
      micros.push_back(sw.Seconds() * 1e6);
      auto want = ExactTopK(Metric::kCosine, q, VectorBlock{data.data(), n, dim}, 10);
      REQUIRE(want.ok());
      std::vector<uint64_t> ids;
      for (const Neighbor& w : *want) ids.push_back(w.id);
      hits += Overlap(got, ids, 10);
    }
    const double recall = hits / (10.0 * nq);
    MESSAGE("clustered 10k x 384 cosine, " << build_name << ": build "
            << n / build_s << " inserts/s; default ef " << index->options().default_ef
            << ": recall@10 " << recall << ", p50 " << Percentile(micros, 0.5) << " us, p99 "
            << Percentile(micros, 0.99) << " us; memory " << index->Stats().memory_bytes / 1048576.0
            << " MiB");
    CHECK(recall >= 0.98);
  }
}

TEST_CASE("labels marked deleted never come back, and k live results still do") {
  auto rng = SeededRng(24);
  const size_t n = 3000, dim = 16;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim);
  AddRows(index.get(), data, dim, 0, n);
  std::set<uint64_t> deleted;
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  while (deleted.size() < n * 3 / 10) {
    uint64_t label = pick(rng);
    REQUIRE(index->MarkDeleted(label).ok());
    deleted.insert(label);
  }
  CHECK(index->Stats().deleted == deleted.size());
  for (uint64_t label : deleted) CHECK_FALSE(index->Contains(label));
  for (int t = 0; t < 200; ++t) {
    std::vector<float> q = RandomFloats(rng, dim, -1.0f, 1.0f);
    auto got = MustSearch(*index, q, Top(50));
    CHECK(got.size() == 50);
    for (const Neighbor& h : got) CHECK(deleted.count(h.id) == 0);
  }
  // A deleted vector queried exactly is not its own answer any more.
  uint64_t gone = *deleted.begin();
  auto got = MustSearch(*index, std::span<const float>(data.data() + gone * dim, dim), Top(5));
  for (const Neighbor& h : got) CHECK(h.id != gone);
}

TEST_CASE("deleting every label leaves searches empty") {
  auto rng = SeededRng(25);
  std::vector<float> data = RandomFloats(rng, 200 * 8, 0.0f, 1.0f);
  auto index = NewIndex(Metric::kCosine, 8);
  AddRows(index.get(), data, 8, 0, 200);
  for (uint64_t l = 0; l < 200; ++l) REQUIRE(index->MarkDeleted(l).ok());
  CHECK(MustSearch(*index, std::span<const float>(data.data(), 8), Top(10)).empty());
}

TEST_CASE("a label filter returns only accepted labels, and finds a small partition") {
  auto rng = SeededRng(26);
  const size_t n = 4000, dim = 16;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim);
  AddRows(index.get(), data, dim, 0, n);
  std::vector<float> q = RandomFloats(rng, dim, -1.0f, 1.0f);
  auto even = MustSearch(*index, q, Top(20, 0, [](uint64_t l) { return l % 2 == 0; }));
  CHECK(even.size() == 20);
  for (const Neighbor& h : even) CHECK(h.id % 2 == 0);
  // One label in 400 passes: the search walks most of the graph, but finds
  // the partition's true nearest ones.
  std::vector<uint32_t> rows;
  for (uint32_t r = 0; r < n; r += 400) rows.push_back(r);
  auto got = MustSearch(*index, q, Top(5, 0, [](uint64_t l) { return l % 400 == 0; }));
  auto want = ExactTopKRows(Metric::kL2, q, VectorBlock{data.data(), n, dim}, rows, 5);
  REQUIRE(want.ok());
  REQUIRE(got.size() == 5);
  for (size_t i = 0; i < 5; ++i) CHECK(got[i].id == (*want)[i].id);
  auto none = MustSearch(*index, q, Top(5, 0, [](uint64_t) { return false; }));
  CHECK(none.empty());
}

TEST_CASE("the index grows past its initial capacity and keeps every node reachable") {
  auto rng = SeededRng(27);
  const size_t n = 3000, dim = 12;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim, 16);
  AddRows(index.get(), data, dim, 0, n);
  HnswStats st = index->Stats();
  CHECK(st.nodes == n);
  CHECK(st.capacity >= n);
  for (size_t r = 0; r < n; r += 37) {
    auto hits = MustSearch(*index, std::span<const float>(data.data() + r * dim, dim), Top(1));
    REQUIRE(hits.size() == 1);
    CHECK(hits[0].id == r);
  }
  REQUIRE(index->Reserve(10000).ok());
  CHECK(index->Stats().capacity == 10000);
}

TEST_CASE("serialise then deserialise gives identical results and identical bytes") {
  auto rng = SeededRng(28);
  const size_t n = 2500, dim = 20;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  for (Metric metric : kMetrics) {
    CAPTURE(MetricName(metric));
    auto index = NewIndex(metric, dim);
    AddRows(index.get(), data, dim, 0, n, 1u << 20);
    for (uint64_t l = 0; l < n; l += 9) REQUIRE(index->MarkDeleted((1u << 20) + l).ok());
    const std::string image = ImageOf(*index);
    Result<std::unique_ptr<HnswIndex>> copy = HnswIndex::Deserialize(image);
    REQUIRE(copy.ok());
    CHECK((*copy)->size() == n);
    CHECK((*copy)->Stats().deleted == index->Stats().deleted);
    CHECK((*copy)->Stats().max_level == index->Stats().max_level);
    CHECK(ImageOf(**copy) == image);
    for (int t = 0; t < 50; ++t) {
      CheckSameAnswers(*index, **copy, RandomFloats(rng, dim, -1.0f, 1.0f), Top(10, 40), true);
    }
    // The copy keeps working: a new insert is found (under inner product a
    // longer vector nearby may score higher than the vector itself: then the
    // best hit is at least as near).
    std::vector<float> v = RandomFloats(rng, dim, -1.0f, 1.0f);
    REQUIRE((*copy)->Add(42, v).ok());
    Neighbor best = MustSearch(**copy, v, Top(1))[0];
    if (metric == Metric::kInnerProduct) {
      float self = 1.0f;
      for (float x : v) self -= x * x;
      CHECK(best.distance <= self + 1e-4f);
    } else {
      CHECK(best.id == 42);
    }
  }
}

// A private, writable copy of a mappable image with `spare` bytes after it,
// as the engine maps the file.
struct MappedCopy {
  std::shared_ptr<char[]> memory;
  size_t size = 0;
  static MappedCopy Of(const std::string& image, size_t spare) {
    MappedCopy m;
    m.memory = std::shared_ptr<char[]>(new char[image.size() + spare + 64]());
    m.size = image.size();
    std::memcpy(m.memory.get(), image.data(), image.size());
    return m;
  }
  Result<std::unique_ptr<HnswIndex>> Map(size_t spare) const {
    return HnswIndex::Map(memory.get(), size, spare, memory);
  }
};

TEST_CASE("a mapped image searches like the index it came from and keeps taking changes") {
  auto rng = SeededRng(31);
  const size_t n = 3000, dim = 24;
  std::vector<float> data = RandomFloats(rng, (n + 600) * dim, -1.0f, 1.0f);
  for (Metric metric : kMetrics) {
    CAPTURE(MetricName(metric));
    auto index = NewIndex(metric, dim);
    AddRows(index.get(), data, dim, 0, n, 1);
    for (uint64_t l = 1; l < n; l += 13) REQUIRE(index->MarkDeleted(l).ok());
    std::string image;
    REQUIRE(index->SerializeMappable(&image).ok());
    for (size_t spare : {size_t{0}, size_t{200} * 4096}) {
      CAPTURE(spare);
      MappedCopy copy = MappedCopy::Of(image, spare);
      Result<std::unique_ptr<HnswIndex>> mapped = copy.Map(spare);
      REQUIRE_MESSAGE(mapped.ok(), mapped.status().ToString());
      HnswIndex& m = **mapped;
      CHECK(m.size() == n);
      CHECK(m.Stats().deleted == index->Stats().deleted);
      CHECK(ImageOf(m) == ImageOf(*index));
      for (int t = 0; t < 30; ++t) {
        CheckSameAnswers(*index, m, RandomFloats(rng, dim, -1.0f, 1.0f), Top(10, 40), true);
      }
      CHECK(m.Contains(2));
      CHECK_FALSE(m.Contains(1));  // marked deleted
      CHECK(m.Add(5, std::span<const float>(data.data(), dim)).code() == kConstraint);
      // Inserts into the spare room and past it, a delete of a mapped node, and
      // a delta from the mapped index that a deserialised replica applies.
      Result<std::unique_ptr<HnswIndex>> replica = HnswIndex::Deserialize(ImageOf(m));
      REQUIRE(replica.ok());
      ChangeMark mark = m.Mark();
      AddRows(&m, data, dim, n, n + 600, 1);
      REQUIRE(m.MarkDeleted(2).ok());
      std::string delta;
      REQUIRE(m.EncodeDelta(mark, &delta).ok());
      REQUIRE((*replica)->ApplyDelta(delta).ok());
      CHECK(ImageOf(**replica) == ImageOf(m));
      for (size_t r = n; r < n + 600; r += 50) {
        std::span<const float> v(data.data() + r * dim, dim);
        Neighbor best = MustSearch(m, v, Top(1, 64))[0];
        if (metric == Metric::kInnerProduct) {
          // Under inner product a vector is not always its own nearest: a
          // longer one nearby scores higher. The search finds one at least as
          // near as the vector itself.
          float self = 1.0f;
          for (float x : v) self -= x * x;
          CHECK(best.distance <= self + 1e-4f);
        } else {
          CHECK(best.id == r + 1);
        }
      }
    }
  }
}

TEST_CASE("a mapped image with a damaged link or header is refused with kCorruptIndex") {
  auto rng = SeededRng(32);
  const size_t n = 500, dim = 8;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim);
  AddRows(index.get(), data, dim, 0, n, 1);
  std::string image;
  REQUIRE(index->SerializeMappable(&image).ok());
  uint64_t level0 = 0;
  std::memcpy(&level0, image.data() + 48, 8);
  const size_t record = 2 * 16 * 4 + 4 + dim * 4 + 8;
  struct Damage {
    size_t at;
    uint32_t value;
  };
  const Damage damages[] = {
      {level0 + 7 * record + 4, 0xfffffff0u},  // a level-0 link out of range
      {level0 + 9 * record, 0xffffu},          // a link count above 2m
      {24, 501},                               // node count
      {0, 0},                                  // magic
      {level0 + 3 * record + 2 * 16 * 4 + 4 + dim * 4, 0},  // a label that does not increase
  };
  for (const Damage& d : damages) {
    CAPTURE(d.at);
    std::string bad = image;
    std::memcpy(bad.data() + d.at, &d.value, 4);
    MappedCopy copy = MappedCopy::Of(bad, 0);
    Result<std::unique_ptr<HnswIndex>> mapped = copy.Map(0);
    REQUIRE_FALSE(mapped.ok());
    CHECK(mapped.status().code() == kCorruptIndex);
  }
  // Labels that do not increase cannot be written as a mappable image.
  auto unordered = NewIndex(Metric::kL2, dim);
  AddRows(unordered.get(), data, dim, 0, 10, 100);
  REQUIRE(unordered->Add(5, std::span<const float>(data.data(), dim)).ok());
  std::string out;
  CHECK(unordered->SerializeMappable(&out).code() == kMisuse);
}

TEST_CASE("an image in the file is never written, a list changed under it is never followed out of bounds, and its first change checks it again") {
  auto rng = SeededRng(36);
  const size_t n = 800, dim = 8;  // n a multiple of four: the upper lists stay in place
  std::vector<float> data = RandomFloats(rng, (n + 200) * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim);
  AddRows(index.get(), data, dim, 0, n, 1);
  std::string image;
  REQUIRE(index->SerializeMappable(&image).ok());
  auto map_in_file = [&](const MappedCopy& copy) {
    return HnswIndex::Map(copy.memory.get(), copy.size, 0, copy.memory, 64, false, {}, HnswImagePlace::kFile);
  };
  CHECK(HnswIndex::Map(image.data(), image.size(), 4096, nullptr, 64, false, {}, HnswImagePlace::kFile).status().code() ==
        kMisuse);  // no spare room in a file
  SUBCASE("unchanged: it searches, and takes changes in memory of its own") {
    MappedCopy copy = MappedCopy::Of(image, 0);
    Result<std::unique_ptr<HnswIndex>> mapped = map_in_file(copy);
    REQUIRE_MESSAGE(mapped.ok(), mapped.status().ToString());
    HnswIndex& m = **mapped;
    for (int t = 0; t < 20; ++t) {
      CheckSameAnswers(*index, m, RandomFloats(rng, dim, -1.0f, 1.0f), Top(10, 40), true);
    }
    AddRows(&m, data, dim, n, n + 200, 1);
    REQUIRE(m.MarkDeleted(2).ok());
    CHECK(std::string_view(copy.memory.get(), copy.size) == image);  // not a byte written
    for (size_t r = n; r < n + 200; r += 20) {
      CHECK(MustSearch(m, std::span<const float>(data.data() + r * dim, dim), Top(1, 64))[0].id == r + 1);
    }
  }
  SUBCASE("changed after the map: searches stay inside the graph, the first change fails") {
    MappedCopy copy = MappedCopy::Of(image, 0);
    Result<std::unique_ptr<HnswIndex>> mapped = map_in_file(copy);
    REQUIRE_MESSAGE(mapped.ok(), mapped.status().ToString());
    HnswIndex& m = **mapped;
    // Another program writes the file: a level-0 link out of range on every
    // tenth node, a count above 2m on others, and an upper-layer link to a
    // node that is not there.
    uint64_t level0 = 0;
    std::memcpy(&level0, image.data() + 48, 8);
    const size_t record = 2 * 16 * 4 + 4 + dim * 4 + 8;
    char* bytes = copy.memory.get();
    for (size_t node = 0; node < n; node += 10) {
      const uint32_t far = 0xfffffff0u, many = 0xffffu;
      std::memcpy(bytes + level0 + node * record + 4, &far, 4);
      std::memcpy(bytes + level0 + (node + 5) * record, &many, 4);
    }
    const uint32_t missing = static_cast<uint32_t>(n + 5);
    std::memcpy(bytes + 64 + n + 4, &missing, 4);  // the first upper list's first link
    size_t hits = 0;
    for (int t = 0; t < 40; ++t) {
      auto got = m.Search(RandomFloats(rng, dim, -1.0f, 1.0f), Top(10, 40));
      REQUIRE(got.ok());
      for (const Neighbor& h : *got) CHECK((h.id >= 1 && h.id <= n));
      hits += got->size();
    }
    CHECK(hits > 0);
    CHECK(m.Add(n + 1, std::span<const float>(data.data() + n * dim, dim)).code() == kCorruptIndex);
    CHECK(m.Search(RandomFloats(rng, dim, -1.0f, 1.0f), Top(10, 40)).status().code() == kCorruptIndex);
  }
}

// An image without vectors, in "the file" (`copy`), mapped with the reader
// thread's copy ahead: node i's vector is row i of `data`, its label i +
// `first_label`.
Result<std::unique_ptr<HnswIndex>> MapCopiedAhead(const MappedCopy& copy, const std::vector<float>& data,
                                                  size_t n, size_t dim, uint64_t first_label) {
  HnswIndex::MapVectors vectors;
  vectors.rows.assign(n, nullptr);
  vectors.scales.assign(n, 0.0f);
  vectors.read_ahead = true;
  vectors.read = [&data, dim, first_label](uint32_t node, uint64_t label, float* scale) -> const float* {
    if (label != node + first_label) return nullptr;
    *scale = 1.0f;
    return data.data() + node * dim;
  };
  return HnswIndex::Map(copy.memory.get(), copy.size, 0, copy.memory, 64, false, std::move(vectors),
                        HnswImagePlace::kFileCopiedAhead);
}

TEST_CASE("an image in the file copied ahead leaves the file once its vectors are read, and later writes to the file change nothing") {
  auto rng = SeededRng(37);
  const size_t n = 800, dim = 8;
  std::vector<float> data = RandomFloats(rng, (n + 100) * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim);
  AddRows(index.get(), data, dim, 0, n, 1);  // labels 1..n
  std::string without;
  REQUIRE(index->SerializeMappable(&without, false).ok());
  for (bool change_first : {false, true}) {
    CAPTURE(change_first);
    MappedCopy copy = MappedCopy::Of(without, 0);
    Result<std::unique_ptr<HnswIndex>> mapped = MapCopiedAhead(copy, data, n, dim, 1);
    REQUIRE_MESSAGE(mapped.ok(), mapped.status().ToString());
    HnswIndex& m = **mapped;
    // A change while the thread may still be copying: one of the two copies
    // is used, never both.
    if (change_first) AddRows(&m, data, dim, n, n + 100, 1);
    while (m.ReadingAhead()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(std::string_view(copy.memory.get(), copy.size) == without);  // not a byte written
    // Another program writes every list in the file: the graph reads its copy.
    uint64_t level0 = 0;
    std::memcpy(&level0, without.data() + 48, 8);
    const size_t record = 2 * 16 * 4 + 4 + 8;
    for (size_t node = 0; node < n; ++node) {
      const uint32_t far = 0xfffffff0u;
      std::memcpy(copy.memory.get() + level0 + node * record + 4, &far, 4);
    }
    std::memset(copy.memory.get() + 64 + n, 0xff, level0 - 64 - n);  // the upper lists
    if (!change_first) AddRows(&m, data, dim, n, n + 100, 1);
    for (int t = 0; t < 20; ++t) {
      const std::vector<float> q = RandomFloats(rng, dim, -1.0f, 1.0f);
      auto got = m.Search(q, Top(10, 64));
      REQUIRE_MESSAGE(got.ok(), got.status().ToString());
      CHECK(got->size() == 10);
    }
    for (size_t r = 0; r < n + 100; r += 50) {
      auto got = MustSearch(m, std::span<const float>(data.data() + r * dim, dim), Top(1, 64));
      CHECK(got[0].id == r + 1);
    }
  }
}

TEST_CASE("a mappable image without vectors maps the same graph with its vectors given beside it") {
  auto rng = SeededRng(33);
  const size_t n = 1200, dim = 16;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  for (Metric metric : kMetrics) {
    CAPTURE(MetricName(metric));
    auto index = NewIndex(metric, dim);
    AddRows(index.get(), data, dim, 0, n, 1);  // labels 1..n
    for (uint64_t l = 3; l < n; l += 17) REQUIRE(index->MarkDeleted(l).ok());
    std::string with, without;
    REQUIRE(index->SerializeMappable(&with).ok());
    REQUIRE(index->SerializeMappable(&without, false).ok());
    // The links and labels only: 2m + 1 words and a label per node.
    uint64_t level0 = 0;
    std::memcpy(&level0, without.data() + 48, 8);
    CHECK(without.size() == level0 + n * (2 * 16 * 4 + 4 + 8));
    CHECK(without.size() < with.size() - n * dim * 4 + 64);
    Result<size_t> bytes = HnswIndex::VectorBytes(without);
    REQUIRE(bytes.ok());
    CHECK(*bytes == n * dim * 4);
    CHECK(*HnswIndex::VectorBytes(with) == 0);
    // The vectors one byte past 4-byte alignment, as a page of a file may
    // hold them, each used where it lies.
    auto lying = std::make_shared<std::vector<char>>(n * dim * 4 + 1);
    std::memcpy(lying->data() + 1, data.data(), n * dim * 4);
    HnswIndex::MapVectors vectors;
    REQUIRE(HnswIndex::ForEachNodeLabel(without, 0, SIZE_MAX, [&](size_t node, uint64_t label) {
              if (label < 1 || label > n || node != vectors.rows.size()) return false;
              const float* v = reinterpret_cast<const float*>(lying->data() + 1 + (label - 1) * dim * 4);
              Result<float> scale = HnswIndex::ScaleFor(metric, v, dim);
              if (!scale.ok() || *scale == 0) return false;  // lengths near 1: kept as they are
              vectors.rows.push_back(v);
              vectors.scales.push_back(*scale);
              return true;
            }).ok());
    CHECK(vectors.rows.size() == n);
    vectors.owner = lying;
    MappedCopy copy = MappedCopy::Of(without, 4096);
    CHECK(HnswIndex::Map(copy.memory.get(), copy.size, 0, copy.memory).status().code() == kMisuse);
    Result<std::unique_ptr<HnswIndex>> mapped =
        HnswIndex::Map(copy.memory.get(), copy.size, 4096, copy.memory, 64, false, std::move(vectors));
    REQUIRE_MESSAGE(mapped.ok(), mapped.status().ToString());
    for (int t = 0; t < 20; ++t) {
      CheckSameAnswers(*index, **mapped, RandomFloats(rng, dim, -1.0f, 1.0f), Top(10, 40));
    }
    // The same bytes again: the vectors as Add() stored them (normalised).
    std::string again, again_without;
    REQUIRE((*mapped)->SerializeMappable(&again).ok());
    REQUIRE((*mapped)->SerializeMappable(&again_without, false).ok());
    CHECK(again == with);
    CHECK(again_without == without);
    // New nodes go to the spare room, then the heap, and are found.
    const std::vector<float> extra = RandomFloats(rng, 200 * dim, -1.0f, 1.0f);
    AddRows(index.get(), extra, dim, 0, 200, n + 1);
    AddRows(mapped->get(), extra, dim, 0, 200, n + 1);
    for (int t = 0; t < 20; ++t) {
      CheckSameAnswers(*index, **mapped, RandomFloats(rng, dim, -1.0f, 1.0f), Top(10, 40));
    }
  }
}

TEST_CASE("a mapped image's vectors left unread are read on first use, and one that cannot be read is never a hit") {
  auto rng = SeededRng(35);
  const size_t n = 1500, dim = 16;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  for (Metric metric : kMetrics) {
   for (bool read_ahead : {false, true}) {
    CAPTURE(MetricName(metric));
    CAPTURE(read_ahead);
    auto index = NewIndex(metric, dim);
    AddRows(index.get(), data, dim, 0, n, 1);  // labels 1..n
    std::string without;
    REQUIRE(index->SerializeMappable(&without, false).ok());
    // Every row left null: `read` gives each when first asked, and none for
    // label 700, as for an episodes page that fails its checksum.
    constexpr uint64_t kUnreadable = 700;
    std::vector<std::atomic<int>> reads(n);
    HnswIndex::MapVectors vectors;
    vectors.rows.assign(n, nullptr);
    vectors.scales.assign(n, 0.0f);
    vectors.read_ahead = read_ahead;  // the index's own thread reads them all meanwhile
    vectors.read = [&](uint32_t node, uint64_t label, float* scale) -> const float* {
      reads[node]++;
      if (label != node + 1 || label == kUnreadable) return nullptr;
      const float* v = data.data() + node * dim;
      Result<float> s = HnswIndex::ScaleFor(metric, v, dim);
      if (!s.ok() || *s == 0) return nullptr;
      *scale = *s;
      return v;
    };
    MappedCopy copy = MappedCopy::Of(without, 4096);
    Result<std::unique_ptr<HnswIndex>> mapped =
        HnswIndex::Map(copy.memory.get(), copy.size, 4096, copy.memory, 64, false, std::move(vectors));
    REQUIRE_MESSAGE(mapped.ok(), mapped.status().ToString());
    auto read_so_far = [&] {
      size_t r = 0;
      for (const auto& c : reads) r += c.load() > 0;
      return r;
    };
    if (!read_ahead) {
      CHECK(read_so_far() == 0);  // nothing read by the map itself
      // The exact scan's rows are read when asked for.
      std::vector<uint32_t> some = {3, 1, 2};
      (*mapped)->ReadVectors(&some);
      CHECK(some == std::vector<uint32_t>{3, 1, 2});
      CHECK(read_so_far() == 3);
      CHECK((*mapped)->NodeVectors().rows[1] == data.data() + dim);
      // One search reads a part of the graph.
      const std::vector<float> first = RandomFloats(rng, dim, -1.0f, 1.0f);
      REQUIRE((*mapped)->Search(first, Top(10, 40)).ok());
      CHECK(read_so_far() > 0);
      CHECK(read_so_far() < n);
    }
    // Searches from two threads at once: the same answers as the index the
    // image came from, without the unreadable label.
    std::vector<std::vector<float>> queries;
    for (int t = 0; t < 40; ++t) queries.push_back(RandomFloats(rng, dim, -1.0f, 1.0f));
    queries.push_back(std::vector<float>(data.begin() + (kUnreadable - 1) * dim,
                                         data.begin() + kUnreadable * dim));
    std::atomic<int> differ{0}, returned_unreadable{0};
    auto search = [&](size_t from) {
      for (size_t q = from; q < queries.size(); q += 2) {
        auto want = index->Search(queries[q], Top(10, 200));
        auto got = (*mapped)->Search(queries[q], Top(10, 200));
        if (!want.ok() || !got.ok()) {
          differ++;
          continue;
        }
        std::erase_if(*want, [](const Neighbor& h) { return h.id == kUnreadable; });
        for (const Neighbor& h : *got) returned_unreadable += h.id == kUnreadable;
        got->resize(std::min(got->size(), want->size()));
        for (size_t i = 0; i < got->size(); ++i) differ += (*got)[i].id != (*want)[i].id;
      }
    };
    std::thread other(search, 1);
    search(0);
    other.join();
    CHECK(returned_unreadable == 0);
    CHECK(differ <= 2);  // a graph without one node's vector may route a query apart
    // A search for every node returns all but the unreadable one.
    auto all = (*mapped)->Search(queries.back(), Top(n, n));
    REQUIRE(all.ok());
    CHECK(all->size() == n - 1);
    for (const Neighbor& h : *all) CHECK(h.id != kUnreadable);
    // The exact scan's rows: the unreadable node goes, the rest are read.
    std::vector<uint32_t> rows(n);
    std::iota(rows.begin(), rows.end(), 0u);
    (*mapped)->ReadVectors(&rows);
    CHECK(rows.size() == n - 1);
    CHECK(std::find(rows.begin(), rows.end(), kUnreadable - 1) == rows.end());
    const VectorBlock block = (*mapped)->NodeVectors();
    for (uint32_t r : rows) CHECK(block.rows[r] == data.data() + r * dim);
    for (size_t i = 0; i < n; ++i) CHECK(reads[i].load() >= 1);
    // Once read, never read again; new nodes link to the mapped ones.
    std::vector<int> before(n);
    for (size_t i = 0; i < n; ++i) before[i] = reads[i].load();
    const std::vector<float> extra = RandomFloats(rng, 100 * dim, -1.0f, 1.0f);
    AddRows(mapped->get(), extra, dim, 0, 100, n + 1);
    for (size_t i = 0; i < n; ++i) {
      if (i + 1 != kUnreadable) CHECK(reads[i].load() == before[i]);
    }
    // (A beam of most of the graph: the check is of the links, not of the
    // search's approximation. Under inner product a vector need not be its
    // own nearest.)
    auto found = (*mapped)->Search(std::span<const float>(extra.data() + 42 * dim, dim), Top(1, 1000));
    REQUIRE(found.ok());
    REQUIRE(found->size() == 1);
    if (metric != Metric::kInnerProduct) CHECK((*found)[0].id == n + 43);
    // Without() copies every node, the unreadable one deleted.
    const uint64_t removed[] = {5};
    auto smaller = (*mapped)->Without(removed);
    REQUIRE(smaller.ok());
    auto hits = (*smaller)->Search(queries.back(), Top(n, n));
    REQUIRE(hits.ok());
    for (const Neighbor& h : *hits) CHECK((h.id != kUnreadable && h.id != 5));
    // An image that carries the vectors is refused: it would hold the zero
    // vector the unreadable node got as if it were its own. One without
    // them is written.
    std::string image;
    CHECK((*mapped)->Serialize(&image).code() == kCorruptIndex);
    image.clear();
    CHECK((*mapped)->SerializeMappable(&image, true).code() == kCorruptIndex);
    image.clear();
    CHECK((*mapped)->SerializeMappable(&image, false).ok());
   }
  }
}

TEST_CASE("an image without vectors whose vectors cannot all be found, or that is cut short, is refused") {
  auto rng = SeededRng(34);
  const size_t n = 300, dim = 8;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kCosine, dim);
  AddRows(index.get(), data, dim, 0, n, 1);
  std::string image;
  REQUIRE(index->SerializeMappable(&image, false).ok());
  Result<size_t> bytes = HnswIndex::VectorBytes(image);
  REQUIRE(bytes.ok());
  CHECK(*bytes == n * dim * 4);
  // Label 77 has no vector; another is not finite.
  std::vector<float> infinite(dim, std::numeric_limits<float>::infinity());
  CHECK(HnswIndex::ScaleFor(Metric::kCosine, infinite.data(), dim).status().code() == kMismatch);
  CHECK(HnswIndex::ScaleFor(Metric::kL2, infinite.data(), dim).status().code() == kMismatch);
  for (uint64_t bad : {uint64_t{77}, uint64_t{78}}) {
    CAPTURE(bad);
    Status s = HnswIndex::ForEachNodeLabel(image, 0, SIZE_MAX, [&](size_t, uint64_t label) {
      const float* v = label != bad ? data.data() + (label - 1) * dim
                       : bad == 77  ? nullptr
                                    : infinite.data();
      return v != nullptr && HnswIndex::ScaleFor(Metric::kCosine, v, dim).ok();
    });
    CHECK(s.code() == kCorruptIndex);
    CHECK(s.message().find("label " + std::to_string(bad)) != std::string::npos);
  }
  // A node count that the bytes do not hold, an image cut short, a version
  // from the future.
  std::string more = image;
  const uint32_t count = n + 1;
  std::memcpy(more.data() + 24, &count, 4);
  CHECK(HnswIndex::VectorBytes(more).status().code() == kCorruptIndex);
  const std::string_view cut = std::string_view(image).substr(0, image.size() - 7);
  CHECK(HnswIndex::VectorBytes(cut).status().code() == kCorruptIndex);
  CHECK(HnswIndex::VectorBytes(cut.substr(0, 40)).status().code() == kCorruptIndex);
  std::string future = image;
  const uint32_t version = 3;
  std::memcpy(future.data() + 4, &version, 4);
  CHECK(HnswIndex::VectorBytes(future).status().code() == kFormatVersion);
}

TEST_CASE("the same inserts in the same order give byte-identical graphs") {
  auto rng = SeededRng(29);
  const size_t n = 800, dim = 10;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto a = NewIndex(Metric::kCosine, dim);
  auto b = NewIndex(Metric::kCosine, dim, 16);
  AddRows(a.get(), data, dim, 0, n);
  AddRows(b.get(), data, dim, 0, n);
  CHECK(ImageOf(*a) == ImageOf(*b));
}

TEST_CASE("deltas applied to a checkpoint reproduce the index byte for byte") {
  auto rng = SeededRng(30);
  const size_t dim = 16, per_round = 400;
  std::vector<float> data = RandomFloats(rng, 5 * per_round * dim, -1.0f, 1.0f);
  auto live = NewIndex(Metric::kCosine, dim);
  AddRows(live.get(), data, dim, 0, per_round);
  const std::string checkpoint = ImageOf(*live);
  Result<std::unique_ptr<HnswIndex>> replica = HnswIndex::Deserialize(checkpoint);
  REQUIRE(replica.ok());
  std::uniform_int_distribution<uint64_t> pick(0, per_round - 1);
  for (size_t round = 1; round < 5; ++round) {
    ChangeMark mark = live->Mark();
    AddRows(live.get(), data, dim, round * per_round, (round + 1) * per_round);
    for (int d = 0; d < 10; ++d) REQUIRE(live->MarkDeleted(pick(rng) + round * per_round).ok());
    REQUIRE(live->MarkDeleted(pick(rng)).ok());  // an old node
    std::string delta;
    REQUIRE(live->EncodeDelta(mark, &delta).ok());
    const std::string full = ImageOf(*live);
    MESSAGE("round " << round << ": delta " << delta.size() << " bytes, full image " << full.size()
                     << " bytes");
    CHECK(delta.size() < full.size());
    REQUIRE((*replica)->ApplyDelta(delta).ok());
    CHECK(ImageOf(**replica) == full);
  }
  CheckSameAnswers(*live, **replica, RandomFloats(rng, dim, -1.0f, 1.0f), Top(10));
}

TEST_CASE("deltas of one node each grow a graph in memory or in the file by doubling and rebuild it byte for byte") {
  auto rng = SeededRng(38);
  const size_t n = 500, more = 200, dim = 8;
  std::vector<float> data = RandomFloats(rng, (n + more) * dim, -1.0f, 1.0f);
  auto live = NewIndex(Metric::kL2, dim);
  AddRows(live.get(), data, dim, 0, n, 1);
  std::string image;
  REQUIRE(live->SerializeMappable(&image).ok());
  MappedCopy copy = MappedCopy::Of(image, 0);
  Result<std::unique_ptr<HnswIndex>> in_file =
      HnswIndex::Map(copy.memory.get(), copy.size, 0, copy.memory, 64, false, {}, HnswImagePlace::kFile);
  REQUIRE_MESSAGE(in_file.ok(), in_file.status().ToString());
  Result<std::unique_ptr<HnswIndex>> in_memory = HnswIndex::Deserialize(ImageOf(*live));
  REQUIRE(in_memory.ok());
  std::vector<std::string> deltas(more);
  for (size_t i = 0; i < more; ++i) {
    const ChangeMark mark = live->Mark();
    AddRows(live.get(), data, dim, n + i, n + i + 1, 1);
    REQUIRE(live->EncodeDelta(mark, &deltas[i]).ok());
  }
  for (HnswIndex* replica : {in_file->get(), in_memory->get()}) {
    size_t growths = 0, capacity = replica->Stats().capacity;
    for (const std::string& delta : deltas) {
      REQUIRE(replica->ApplyDelta(delta).ok());
      growths += replica->Stats().capacity != capacity;
      capacity = replica->Stats().capacity;
    }
    CHECK(growths == 1);  // 500 nodes to room for 1,000 at the first delta
    CHECK(capacity >= 2 * n);
    CHECK(ImageOf(*replica) == ImageOf(*live));
  }
  CHECK(std::string_view(copy.memory.get(), copy.size) == image);  // not a byte written
}

TEST_CASE("a delta applied twice or to the wrong base is refused and changes nothing") {
  auto rng = SeededRng(31);
  const size_t dim = 8;
  std::vector<float> data = RandomFloats(rng, 600 * dim, -1.0f, 1.0f);
  auto live = NewIndex(Metric::kL2, dim);
  AddRows(live.get(), data, dim, 0, 300);
  const std::string checkpoint = ImageOf(*live);
  ChangeMark mark = live->Mark();
  AddRows(live.get(), data, dim, 300, 600);
  std::string delta;
  REQUIRE(live->EncodeDelta(mark, &delta).ok());
  auto replica = std::move(*HnswIndex::Deserialize(checkpoint));
  REQUIRE(replica->ApplyDelta(delta).ok());
  const std::string after = ImageOf(*replica);
  Status again = replica->ApplyDelta(delta);
  CHECK(again.code() == kCorruptIndex);
  CHECK(again.message().find("builds on 300 nodes, the graph has 600") != std::string::npos);
  CHECK(ImageOf(*replica) == after);
  // A delta for another shape.
  auto other = NewIndex(Metric::kL2, dim + 1);
  CHECK(other->ApplyDelta(delta).code() == kCorruptIndex);
  CHECK(other->size() == 0);
  // A delta is not a checkpoint.
  CHECK(HnswIndex::Deserialize(delta).status().code() == kCorruptIndex);
}

TEST_CASE("the nodes changed since a mark are the new nodes and the nodes they link to") {
  auto rng = SeededRng(32);
  const size_t dim = 8;
  std::vector<float> data = RandomFloats(rng, 501 * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim);
  AddRows(index.get(), data, dim, 0, 500);
  ChangeMark mark = index->Mark();
  CHECK(mark.node_count == 500);
  CHECK(index->NodesChangedSince(mark)->empty());
  AddRows(index.get(), data, dim, 500, 501);
  Result<std::vector<uint32_t>> changed = index->NodesChangedSince(mark);
  REQUIRE(changed.ok());
  CHECK(changed->back() == 500);
  CHECK(changed->size() >= 2);
  CHECK(changed->size() <= 1 + 2 * 16 + 16 * 4);
  ChangeMark future{mark.seq + 100, 0};
  CHECK(index->NodesChangedSince(future).status().code() == kMisuse);
  std::string out;
  CHECK(index->EncodeDelta(ChangeMark{0, 9999}, &out).code() == kMisuse);
}

TEST_CASE("a delta from an old mark holds every change, however many came after it") {
  // One-node batches, as a commit of one episode makes: each notes some 30
  // nodes, so the index's change log is emptied several times over 600 of
  // them. The marks of every 40th insert are replayed from copies made then.
  auto rng = SeededRng(40);
  const size_t dim = 8, n = 600;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto live = NewIndex(Metric::kCosine, dim);
  AddRows(live.get(), data, dim, 0, 50);
  std::vector<std::pair<ChangeMark, std::string>> copies;
  for (size_t r = 50; r < n; ++r) {
    if (r % 40 == 10) copies.emplace_back(live->Mark(), ImageOf(*live));
    AddRowBatches(live.get(), data, dim, r, r + 1, 1, 2);
    if (r % 97 == 0) REQUIRE(live->MarkDeleted(r / 2).ok());
  }
  const std::string now = ImageOf(*live);
  REQUIRE(copies.size() > 10);
  // (No structured binding: clang 14 cannot capture one in CAPTURE's lambda.)
  for (const auto& copy : copies) {
    const auto& mark = copy.first;
    const std::string& image = copy.second;
    CAPTURE(mark.node_count);
    std::string delta;
    REQUIRE(live->EncodeDelta(mark, &delta).ok());
    Result<std::unique_ptr<HnswIndex>> replica = HnswIndex::Deserialize(image);
    REQUIRE(replica.ok());
    REQUIRE((*replica)->ApplyDelta(delta).ok());
    CHECK(ImageOf(**replica) == now);
  }
  // The newest mark: nothing changed since.
  CHECK(live->NodesChangedSince(live->Mark())->empty());
}

// Runs `insert` on this thread while two threads search `index` (vectors of
// `dim` in [-1, 1), labels below n); checks that every search returned 10
// valid labels and returns how many ran.
size_t SearchWhile(const HnswIndex& index, size_t n, size_t dim,
                   const std::function<void()>& insert) {
  std::atomic<bool> done{false};
  std::atomic<size_t> searches{0}, bad{0};
  auto reader = [&](uint64_t salt) {
    std::mt19937_64 r(salt);
    while (!done.load()) {
      std::vector<float> q = RandomFloats(r, dim, -1.0f, 1.0f);
      Result<std::vector<Neighbor>> hits = index.Search(q, Top(10));
      if (!hits.ok() || hits->size() != 10) bad.fetch_add(1);
      for (const Neighbor& h : *hits) bad.fetch_add(h.id >= n ? 1 : 0);
      searches.fetch_add(1);
    }
  };
  std::thread t1(reader, 1), t2(reader, 2);
  insert();
  done.store(true);
  t1.join();
  t2.join();
  CHECK(bad.load() == 0);
  return searches.load();
}

TEST_CASE("searches running during inserts see a consistent graph") {
  auto rng = SeededRng(33);
  const size_t n = 3000, dim = 16;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim, 16);
  AddRows(index.get(), data, dim, 0, 100);
  size_t searches = SearchWhile(*index, n, dim, [&] { AddRows(index.get(), data, dim, 100, n); });
  CHECK(index->size() == n);
  MESSAGE(searches << " searches ran during " << n - 100 << " inserts");
}

TEST_CASE("searches running during the copy ahead of a graph in the file and the inserts after it see a consistent graph") {
  auto rng = SeededRng(34);
  const size_t n = 3000, mapped_n = 1000, dim = 16;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim, 16);
  AddRows(index.get(), data, dim, 0, mapped_n);  // labels 0..
  std::string without;
  REQUIRE(index->SerializeMappable(&without, false).ok());
  for (bool wait : {false, true}) {
    CAPTURE(wait);
    MappedCopy copy = MappedCopy::Of(without, 0);
    Result<std::unique_ptr<HnswIndex>> mapped = MapCopiedAhead(copy, data, mapped_n, dim, 0);
    REQUIRE_MESSAGE(mapped.ok(), mapped.status().ToString());
    HnswIndex& m = **mapped;
    // The inserts start while the thread copies, or once it is done.
    SearchWhile(m, n, dim, [&] {
      while (wait && m.ReadingAhead()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      AddRows(&m, data, dim, mapped_n, n);
    });
    CHECK(m.size() == n);
    CHECK(std::string_view(copy.memory.get(), copy.size) == without);
  }
}

// ---- batch inserts (AddBatch)

// The level of each node, from a mappable image (a byte per node after the
// 64-byte header, docs/format.md section 5.8).
std::string LevelsOf(const HnswIndex& index) {
  std::string image;
  REQUIRE(index.SerializeMappable(&image).ok());
  return image.substr(64, index.size());
}

TEST_CASE("a batch numbers its nodes in label order and gives each label the level Add gives it") {
  auto rng = SeededRng(35);
  const size_t n = 3000, dim = 12;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto one_by_one = NewIndex(Metric::kCosine, dim);
  AddRows(one_by_one.get(), data, dim, 0, n, 1);
  auto batched = NewIndex(Metric::kCosine, dim, 16);
  AddRowBatches(batched.get(), data, dim, 0, 1000, 1000, 2, 1);
  // The next batches arrive shuffled.
  for (size_t start = 1000; start < n; start += 1000) {
    std::vector<HnswInsert> items;
    for (size_t r = start; r < start + 1000; ++r) {
      items.push_back({1 + r, std::span<const float>(data.data() + r * dim, dim)});
    }
    std::shuffle(items.begin(), items.end(), rng);
    REQUIRE(batched->AddBatch(items, 3).ok());
  }
  REQUIRE(batched->size() == n);
  for (uint32_t node = 0; node < n; ++node) CHECK(batched->NodeLabel(node) == node + 1);
  CHECK(LevelsOf(*batched) == LevelsOf(*one_by_one));  // also: the image is mappable
  CHECK(batched->Stats().max_level == one_by_one->Stats().max_level);
  for (size_t r = 0; r < n; r += 11) {
    auto hits = MustSearch(*batched, std::span<const float>(data.data() + r * dim, dim), Top(1));
    REQUIRE(hits.size() == 1);
    CHECK(hits[0].id == r + 1);
  }
}

TEST_CASE("the same batches give byte-identical graphs whatever the number of threads") {
  auto rng = SeededRng(36);
  const size_t n = 1200, dim = 10;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto one = NewIndex(Metric::kL2, dim);
  AddRowBatches(one.get(), data, dim, 0, n, 500, 1);
  const std::string image = ImageOf(*one);
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    CAPTURE(threads);
    auto other = NewIndex(Metric::kL2, dim, 16);
    AddRowBatches(other.get(), data, dim, 0, n, 500, threads);
    CHECK(ImageOf(*other) == image);
  }
}

TEST_CASE("a bad vector or a repeated label refuses the whole batch and changes nothing") {
  auto rng = SeededRng(37);
  const size_t dim = 6;
  std::vector<float> data = RandomFloats(rng, 300 * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim);
  AddRowBatches(index.get(), data, dim, 0, 200, 200, 2);
  const std::string before = ImageOf(*index);
  const ChangeMark mark = index->Mark();
  std::vector<HnswInsert> items;
  for (size_t r = 200; r < 300; ++r) {
    items.push_back({r, std::span<const float>(data.data() + r * dim, dim)});
  }
  std::vector<float> nan_v(dim, 0.5f), short_v(dim - 1, 0.5f);
  nan_v[3] = std::nanf("");
  auto with = [&](HnswInsert extra) {
    std::vector<HnswInsert> v = items;
    v.insert(v.begin() + 50, extra);
    return v;
  };
  CHECK(index->AddBatch(with({999, nan_v}), 2).code() == kMismatch);
  CHECK(index->AddBatch(with({999, short_v}), 2).code() == kMismatchDimension);
  CHECK(index->AddBatch(with({250, items[0].vector}), 2).code() == kConstraint);  // twice in it
  CHECK(index->AddBatch(with({7, items[0].vector}), 2).code() == kConstraint);    // in the index
  CHECK(index->AddBatch({}, 2).ok());
  CHECK(ImageOf(*index) == before);
  CHECK(index->NodesChangedSince(mark)->empty());
  REQUIRE(index->AddBatch(items, 2).ok());
  CHECK(index->size() == 300);
}

TEST_CASE("the delta of a batch linked on several threads rebuilds it on a copy at the mark") {
  auto rng = SeededRng(38);
  const size_t dim = 16, per_round = 1000;
  std::vector<float> data = RandomFloats(rng, 6 * per_round * dim, -1.0f, 1.0f);
  for (Metric metric : {Metric::kCosine, Metric::kL2}) {
    CAPTURE(MetricName(metric));
    auto live = NewIndex(metric, dim, 16);
    AddRowBatches(live.get(), data, dim, 0, per_round, per_round, 2);
    Result<std::unique_ptr<HnswIndex>> replica = HnswIndex::Deserialize(ImageOf(*live));
    REQUIRE(replica.ok());
    std::uniform_int_distribution<uint64_t> pick(0, per_round - 1);
    const unsigned threads[] = {2, 4, 2, 8, 3};
    for (size_t round = 1; round < 6; ++round) {
      CAPTURE(round);
      const ChangeMark mark = live->Mark();
      // Deleted nodes, which the batch walks through but does not link to.
      for (int d = 0; d < 20; ++d) {
        REQUIRE(live->MarkDeleted(pick(rng) + (round - 1) * per_round).ok());
      }
      AddRowBatches(live.get(), data, dim, round * per_round, (round + 1) * per_round, per_round,
                    threads[round - 1]);
      Result<std::vector<uint32_t>> changed = live->NodesChangedSince(mark);
      REQUIRE(changed.ok());
      CHECK(changed->size() > per_round);
      std::string delta;
      REQUIRE(live->EncodeDelta(mark, &delta).ok());
      REQUIRE((*replica)->ApplyDelta(delta).ok());
      CHECK(ImageOf(**replica) == ImageOf(*live));
    }
  }
}

TEST_CASE("searches running during batch inserts see a consistent graph") {
  auto rng = SeededRng(39);
  const size_t n = 4000, dim = 16;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim, 16);
  AddRows(index.get(), data, dim, 0, 100);
  size_t searches = SearchWhile(*index, n, dim, [&] {
    AddRowBatches(index.get(), data, dim, 100, n, 150, 2);
  });
  CHECK(index->size() == n);
  MESSAGE(searches << " searches ran during " << (n - 100) / 150 + 1 << " batches");
}

TEST_CASE("persistence timings at 10k x 128 (printed, not asserted)") {
  auto rng = SeededRng(34);
  const size_t n = 10000, dim = 128;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim, n);
  test::Stopwatch build;
  AddRows(index.get(), data, dim, 0, n);
  const double build_s = build.Seconds();
  test::Stopwatch ser;
  std::string image = ImageOf(*index);
  const double ser_s = ser.Seconds();
  test::Stopwatch again;
  image.clear();  // keeps its capacity: no fresh pages to fault in
  REQUIRE(index->Serialize(&image).ok());
  const double again_s = again.Seconds();
  test::Stopwatch de;
  Result<std::unique_ptr<HnswIndex>> copy = HnswIndex::Deserialize(image);
  const double de_s = de.Seconds();
  REQUIRE(copy.ok());
  MESSAGE("10k x 128 l2: build " << n / build_s << " inserts/s; image " << image.size() / 1048576.0
                                 << " MiB, serialise " << ser_s * 1e3 << " ms (" << again_s * 1e3
                                 << " ms into a reused buffer), deserialise " << de_s * 1e3
                                 << " ms");
  // The delta of one more insert: the new node plus the lists it changed.
  ChangeMark mark = (*copy)->Mark();
  std::vector<float> v = RandomFloats(rng, dim, -1.0f, 1.0f);
  REQUIRE((*copy)->Add(n, v).ok());
  std::string delta;
  REQUIRE((*copy)->EncodeDelta(mark, &delta).ok());
  MESSAGE("delta of one insert into 10k nodes: " << (*copy)->NodesChangedSince(mark)->size()
                                                 << " nodes, " << delta.size() << " bytes");
}

}  // namespace
}  // namespace agentmem::index

namespace agentmem::index {
namespace {

// Recall@10 of `index` (default ef) over `queries` against the exact top 10
// of the rows whose labels `keep` accepts (label = row + 1).
double RecallAgainstExact(const HnswIndex& index, Metric metric, const std::vector<float>& data,
                          size_t n, size_t dim, const std::vector<float>& queries,
                          const std::function<bool(uint64_t)>& keep) {
  std::vector<uint32_t> rows;
  for (size_t r = 0; r < n; ++r) {
    if (keep(r + 1)) rows.push_back(static_cast<uint32_t>(r));
  }
  size_t hits = 0, total = 0;
  for (size_t q = 0; q < queries.size() / dim; ++q) {
    std::span<const float> query(queries.data() + q * dim, dim);
    auto exact = ExactTopKRows(metric, std::vector<float>(query.begin(), query.end()),
                               VectorBlock{data.data(), n, dim}, rows, 10);
    REQUIRE(exact.ok());
    std::vector<uint64_t> truth;
    for (const Neighbor& x : exact.value()) truth.push_back(x.id + 1);
    hits += Overlap(MustSearch(index, query, Top(10)), truth, 10);
    total += truth.size();
  }
  return static_cast<double>(hits) / static_cast<double>(total);
}

TEST_CASE("an index without some of its nodes keeps the others exactly and finds nearly what a rebuilt one finds") {
  auto rng = SeededRng(61);
  const size_t n = 6000, dim = 32, nq = 200;
  std::vector<float> data = ClusteredVectors(rng, n, dim, 40);
  std::vector<float> queries = ClusteredVectors(rng, nq, dim, 40);
  for (Metric metric : kMetrics) {
    CAPTURE(MetricName(metric));
    auto index = NewIndex(metric, dim);
    AddRowBatches(index.get(), data, dim, 0, n, 1000, 2, 1);  // labels 1..n
    // 5 %: every 20th label, and a run of 60 labels together.
    std::vector<uint64_t> removed;
    for (uint64_t l = 7; l <= n; l += 20) removed.push_back(l);
    for (uint64_t l = 3001; l <= 3060; ++l) {
      if (l % 20 != 7) removed.push_back(l);
    }
    std::set<uint64_t> gone(removed.begin(), removed.end());
    auto without = index->Without(removed);
    REQUIRE(without.ok());
    const HnswIndex& w = **without;
    REQUIRE(w.size() == n - gone.size());
    // The kept nodes in order, with the vectors and labels they had.
    const VectorBlock before = index->NodeVectors(), after = w.NodeVectors();
    size_t at = 0;
    for (uint32_t node = 0; node < index->size(); ++node) {
      const uint64_t label = index->NodeLabel(node);
      if (gone.count(label)) {
        CHECK_FALSE(w.Contains(label));
        continue;
      }
      REQUIRE(w.NodeLabel(static_cast<uint32_t>(at)) == label);
      CHECK(std::memcmp(after.row(at), before.row(node), dim * sizeof(float)) == 0);
      CHECK(w.Contains(label));
      ++at;
    }
    // A search as wide as the index is exact over the kept nodes.
    for (size_t q = 0; q < 10; ++q) {
      std::span<const float> query(queries.data() + q * dim, dim);
      for (const Neighbor& x : MustSearch(w, query, Top(10, n))) CHECK(gone.count(x.id) == 0);
    }
    auto rebuilt = NewIndex(metric, dim);
    for (size_t r = 0; r < n; ++r) {
      if (!gone.count(r + 1)) {
        REQUIRE(rebuilt->Add(r + 1, std::span<const float>(data.data() + r * dim, dim)).ok());
      }
    }
    auto keep = [&](uint64_t label) { return gone.count(label) == 0; };
    const double repaired = RecallAgainstExact(w, metric, data, n, dim, queries, keep);
    const double fresh = RecallAgainstExact(*rebuilt, metric, data, n, dim, queries, keep);
    MESSAGE(std::string(MetricName(metric)) << ": recall@10 without 5% of the nodes " << repaired
                               << ", rebuilt " << fresh);
    CHECK(repaired >= 0.85);
    CHECK(repaired >= fresh - 0.02);
    // It takes inserts as any index does.
    REQUIRE((*without)->Add(n + 100, std::span<const float>(data.data(), dim)).ok());
    CHECK(MustSearch(w, std::span<const float>(data.data(), dim), Top(1, n)).front().distance <= 1e-5f);
  }
}

TEST_CASE("an index without its entry point, without every node, or asked for a label it lacks") {
  auto rng = SeededRng(62);
  const size_t n = 800, dim = 16;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kL2, dim);
  AddRows(index.get(), data, dim, 0, n, 1);
  const HnswStats stats = index->Stats();
  REQUIRE(stats.max_level >= 1);
  const uint64_t entry = index->NodeLabel(stats.entry_node);
  auto no_entry = index->Without(std::vector<uint64_t>{entry});
  REQUIRE(no_entry.ok());
  CHECK((*no_entry)->size() == n - 1);
  CHECK((*no_entry)->Stats().max_level <= stats.max_level);
  for (size_t r = 0; r < 50; ++r) {
    std::span<const float> q(data.data() + r * dim, dim);
    auto hits = MustSearch(**no_entry, q, Top(1));
    REQUIRE(hits.size() == 1);
    if (r + 1 != entry) CHECK(hits[0].id == r + 1);
  }
  std::vector<uint64_t> all(n);
  std::iota(all.begin(), all.end(), 1);
  auto empty = index->Without(all);
  REQUIRE(empty.ok());
  CHECK((*empty)->size() == 0);
  CHECK(MustSearch(**empty, std::span<const float>(data.data(), dim), Top(5)).empty());
  REQUIRE((*empty)->Add(1, std::span<const float>(data.data(), dim)).ok());
  CHECK(MustSearch(**empty, std::span<const float>(data.data(), dim), Top(5)).size() == 1);
  CHECK(index->Without(std::vector<uint64_t>{n + 5}).status().code() == kNotFound);
  CHECK(index->size() == n);  // the index itself is unchanged
}

TEST_CASE("a mapped image of a node count that is no multiple of four searches like its index") {
  // One level byte per node precedes the upper-layer lists in the image:
  // they start misaligned unless the node count is a multiple of four.
  auto rng = SeededRng(64);
  const size_t dim = 16;
  for (size_t n : {size_t{1001}, size_t{1002}, size_t{1003}}) {
    CAPTURE(n);
    std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
    auto index = NewIndex(Metric::kL2, dim);
    AddRows(index.get(), data, dim, 0, n, 1);
    REQUIRE(index->Stats().max_level >= 1);
    std::string image;
    REQUIRE(index->SerializeMappable(&image).ok());
    MappedCopy copy = MappedCopy::Of(image, 0);
    auto mapped = copy.Map(0);
    REQUIRE(mapped.ok());
    for (size_t r = 0; r < 50; ++r) {
      CheckSameAnswers(*index, **mapped, std::span<const float>(data.data() + r * dim, dim), Top(5));
    }
  }
}

TEST_CASE("a mapped index without some nodes is an index of its own") {
  auto rng = SeededRng(63);
  const size_t n = 2000, dim = 24;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  auto index = NewIndex(Metric::kCosine, dim);
  AddRows(index.get(), data, dim, 0, n, 1);
  std::string image;
  REQUIRE(index->SerializeMappable(&image).ok());
  std::unique_ptr<HnswIndex> without;
  {
    MappedCopy copy = MappedCopy::Of(image, 0);
    auto mapped = copy.Map(0);
    REQUIRE(mapped.ok());
    std::vector<uint64_t> removed;
    for (uint64_t l = 5; l <= n; l += 37) removed.push_back(l);
    auto w = (*mapped)->Without(removed);
    REQUIRE(w.ok());
    without = std::move(*w);
  }  // the mapped memory is gone
  std::string again;
  REQUIRE(without->SerializeMappable(&again).ok());
  for (size_t r = 0; r < 100; ++r) {
    std::span<const float> q(data.data() + r * dim, dim);
    auto hits = MustSearch(*without, q, Top(1, n));
    REQUIRE(hits.size() == 1);
    if ((r + 1) % 37 != 5) CHECK(hits[0].id == r + 1);
  }
}

}  // namespace
}  // namespace agentmem::index

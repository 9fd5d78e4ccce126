// tests/index/vector/exact_search_test.cc -- the exact scan of
// index/vector/exact_search.h against a naive sort, and against the exact
// ground truth of ../shared/data/bigann10k_sift.
#include "index/vector/exact_search.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "index/vector/distance.h"
#include "tests/index/vector/vector_test_util.h"

namespace agentmem::index {
namespace {

using test::RandomFloats;
using test::SeededRng;

const Metric kMetrics[] = {Metric::kCosine, Metric::kInnerProduct, Metric::kL2};

// Every listed row scored with Distance() and fully sorted: the obvious answer.
std::vector<Neighbor> NaiveTopK(Metric metric, const std::vector<float>& q, const VectorBlock& b,
                                const std::vector<uint32_t>& rows, size_t k) {
  std::vector<Neighbor> all;
  for (uint32_t r : rows) all.push_back({r, Distance(metric, q.data(), b.data + r * b.dim, b.dim)});
  std::sort(all.begin(), all.end(), NeighborLess);
  all.resize(std::min(k, all.size()));
  return all;
}

std::vector<uint32_t> AllRows(size_t n) {
  std::vector<uint32_t> rows(n);
  std::iota(rows.begin(), rows.end(), 0u);
  return rows;
}

// The scan's cosine divides by a separately computed query norm, so its
// distances may differ from Distance() by rounding; l2 and ip are identical.
void CheckSameRanking(Metric metric, const std::vector<Neighbor>& got,
                      const std::vector<Neighbor>& want) {
  REQUIRE(got.size() == want.size());
  CHECK(std::is_sorted(got.begin(), got.end(), NeighborLess));
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    if (metric == Metric::kCosine) {
      CHECK(got[i].distance == doctest::Approx(want[i].distance).epsilon(1e-5));
    } else {
      CHECK(got[i].id == want[i].id);
      CHECK(got[i].distance == want[i].distance);
    }
  }
}

TEST_CASE("exact top-k equals a naive full sort for every metric and k") {
  auto rng = SeededRng(11);
  const size_t n = 1000, dim = 37;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  VectorBlock block{data.data(), n, dim};
  for (Metric metric : kMetrics) {
    std::vector<float> q = RandomFloats(rng, dim, -1.0f, 1.0f);
    for (size_t k : {1, 10, 100, 1000, 5000}) {
      CAPTURE(MetricName(metric));
      CAPTURE(k);
      Result<std::vector<Neighbor>> got = ExactTopK(metric, q, block, k);
      REQUIRE(got.ok());
      CheckSameRanking(metric, *got, NaiveTopK(metric, q, block, AllRows(n), k));
    }
  }
}

TEST_CASE("exact top-k over listed rows scores only those rows and maps them to ids") {
  auto rng = SeededRng(12);
  const size_t n = 500, dim = 16;
  std::vector<float> data = RandomFloats(rng, n * dim, 0.0f, 1.0f);
  VectorBlock block{data.data(), n, dim};
  std::vector<uint32_t> rows;
  for (uint32_t r = 3; r < n; r += 7) rows.push_back(r);
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = 1000000 + 3 * i;
  std::vector<float> q = RandomFloats(rng, dim, 0.0f, 1.0f);
  for (Metric metric : kMetrics) {
    Result<std::vector<Neighbor>> got = ExactTopKRows(metric, q, block, rows, 10, ids);
    REQUIRE(got.ok());
    std::vector<Neighbor> want = NaiveTopK(metric, q, block, rows, 10);
    for (Neighbor& w : want) w.id = ids[w.id];
    CheckSameRanking(metric, *got, want);
    for (const Neighbor& h : *got) CHECK((h.id - 1000000) / 3 % 7 == 3);
  }
}

TEST_CASE("equal distances are ordered by the smaller id") {
  std::vector<float> data = {1, 0, 0, 1, 1, 0, 1, 0};  // rows 0, 2, 3 equal (1, 0)
  VectorBlock block{data.data(), 4, 2};
  std::vector<uint64_t> ids = {40, 30, 20, 10};
  std::vector<float> q = {1, 0};
  Result<std::vector<Neighbor>> got = ExactTopK(Metric::kL2, q, block, 4, ids);
  REQUIRE(got.ok());
  REQUIRE(got->size() == 4);
  CHECK((*got)[0].id == 10);
  CHECK((*got)[1].id == 20);
  CHECK((*got)[2].id == 40);
  CHECK((*got)[3].id == 30);
  CHECK((*got)[3].distance == 2.0f);
}

TEST_CASE("k of zero, an empty block and an empty row list give empty results") {
  std::vector<float> data = {1, 2, 3, 4};
  std::vector<float> q = {1, 1};
  VectorBlock block{data.data(), 2, 2};
  CHECK(ExactTopK(Metric::kL2, q, block, 0)->empty());
  CHECK(ExactTopK(Metric::kL2, q, VectorBlock{nullptr, 0, 2}, 5)->empty());
  CHECK(ExactTopKRows(Metric::kL2, q, block, {}, 5)->empty());
  CHECK(ExactTopK(Metric::kL2, q, block, 9)->size() == 2);
}

TEST_CASE("bad arguments to the exact scan give precise errors") {
  std::vector<float> data = {1, 2, 3, 4};
  VectorBlock block{data.data(), 2, 2};
  std::vector<float> q3 = {1, 2, 3};
  CHECK(ExactTopK(Metric::kL2, q3, block, 1).status().code() == kMismatchDimension);
  std::vector<float> nan_q = {1, std::nanf("")};
  CHECK(ExactTopK(Metric::kL2, nan_q, block, 1).status().code() == kMismatch);
  std::vector<float> q = {1, 2};
  std::vector<uint64_t> short_ids = {7};
  CHECK(ExactTopK(Metric::kL2, q, block, 1, short_ids).status().code() == kRange);
  std::vector<uint32_t> bad_rows = {0, 2};
  Status s = ExactTopKRows(Metric::kL2, q, block, bad_rows, 1).status();
  CHECK(s.code() == kRange);
  CHECK(s.message().find("row 2") != std::string::npos);
  CHECK(ExactTopK(Metric::kL2, q, VectorBlock{nullptr, 2, 2}, 1).status().code() == kRange);
  CHECK(ExactTopK(static_cast<Metric>(0), q, block, 1).status().code() == kRange);
}

TEST_CASE("a stored vector holding NaN ranks after every real distance") {
  std::vector<float> data = {std::nanf(""), 0, 5, 5, 1, 1};
  VectorBlock block{data.data(), 3, 2};
  std::vector<float> q = {1, 2};
  for (Metric metric : kMetrics) {
    CAPTURE(MetricName(metric));
    Result<std::vector<Neighbor>> got = ExactTopK(metric, q, block, 3);
    REQUIRE(got.ok());
    REQUIRE(got->size() == 3);
    CHECK(got->back().id == 0);
    CHECK(std::isinf(got->back().distance));
  }
}

TEST_CASE("cosine scan treats unnormalised and normalised copies alike") {
  auto rng = SeededRng(13);
  const size_t n = 300, dim = 24;
  std::vector<float> raw = RandomFloats(rng, n * dim, -2.0f, 2.0f);
  std::vector<float> unit = raw;
  for (size_t r = 0; r < n; ++r) NormalizeInPlace(unit.data() + r * dim, dim);
  std::vector<float> q = RandomFloats(rng, dim, -2.0f, 2.0f);
  auto a = ExactTopK(Metric::kCosine, q, VectorBlock{raw.data(), n, dim}, 20);
  auto b = ExactTopK(Metric::kCosine, q, VectorBlock{unit.data(), n, dim}, 20);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  for (size_t i = 0; i < 20; ++i) {
    CHECK((*a)[i].distance == doctest::Approx((*b)[i].distance).epsilon(1e-5));
  }
}

TEST_CASE("exact L2 scan reproduces the SIFT ground truth exactly") {
  test::TexmexMatrix<float> base, queries;
  test::TexmexMatrix<int32_t> truth;
  const std::string dir = test::SiftDir();
  if (!test::ReadTexmex(dir + "/base.fvecs", &base) ||
      !test::ReadTexmex(dir + "/query.fvecs", &queries) ||
      !test::ReadTexmex(dir + "/groundtruth.ivecs", &truth)) {
    MESSAGE("skipped: " << dir << " is absent");
    return;
  }
  REQUIRE(base.dim == 128);
  REQUIRE(truth.rows == queries.rows);
  VectorBlock block{base.values.data(), base.rows, base.dim};
  // SIFT values are integers up to 255: every squared distance is an exact
  // float, so the ranking, ties included (smaller id first), must match.
  test::Stopwatch sw;
  for (size_t qi = 0; qi < queries.rows; ++qi) {
    std::vector<float> q(queries.row(qi), queries.row(qi) + queries.dim);
    Result<std::vector<Neighbor>> got = ExactTopK(Metric::kL2, q, block, truth.dim);
    REQUIRE(got.ok());
    REQUIRE(got->size() == truth.dim);
    for (size_t i = 0; i < truth.dim; ++i) {
      CAPTURE(qi);
      CAPTURE(i);
      CHECK((*got)[i].id == static_cast<uint64_t>(truth.row(qi)[i]));
    }
  }
  MESSAGE("exact scan, 9,900 x 128 L2, top-100: " << sw.Seconds() * 1e3 / queries.rows
                                                  << " ms/query");
}

TEST_CASE("exact scan latency at 50k x 384 (printed, not asserted)") {
  auto rng = SeededRng(14);
  const size_t n = 50000, dim = 384;
  std::vector<float> data = RandomFloats(rng, n * dim, -1.0f, 1.0f);
  std::vector<float> q = RandomFloats(rng, dim, -1.0f, 1.0f);
  for (Metric metric : kMetrics) {
    test::Stopwatch sw;
    const int reps = 10;
    for (int i = 0; i < reps; ++i) {
      REQUIRE(ExactTopK(metric, q, VectorBlock{data.data(), n, dim}, 10).ok());
    }
    MESSAGE("exact top-10, " << std::string(MetricName(metric)) << ", 50k x 384 ("
                             << std::string(SimdPathName(ActiveSimdPath()))
                             << "): " << sw.Seconds() * 1e3 / reps << " ms");
  }
}

}  // namespace
}  // namespace agentmem::index

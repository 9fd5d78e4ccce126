// tests/index/vector/distance_test.cc -- the distance kernels of
// index/vector/distance.h: every SIMD path the CPU offers against the scalar
// reference, edge values, and run-time path selection.
#include "index/vector/distance.h"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/index/vector/vector_test_util.h"

namespace agentmem::index {
namespace {

using test::RandomFloats;
using test::SeededRng;

const size_t kDims[] = {1,  2,  3,  4,   5,   7,   8,   9,   15,  16,  17,  31,   32,   33,  47,
                        63, 64, 65, 100, 127, 128, 129, 255, 256, 384, 768, 1000, 1536, 4096};

// Restores the active path when a test that changes it ends.
struct ActivePathGuard {
  SimdPath saved = ActiveSimdPath();
  ~ActivePathGuard() { SetActiveSimdPath(saved).IgnoreError(); }
};

// Sum of |a_i * b_i|: the scale of a dot product's rounding error.
double AbsDot(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(a[i]) * b[i]);
  return s;
}

double RelativeError(double got, double want) {
  double scale = std::max(std::fabs(want), 1e-30);
  return std::fabs(got - want) / scale;
}

// Checks one path on one dimension at every float offset 0..15 from a
// 64-byte boundary, so that every load alignment is exercised.
void CheckPathAgainstReference(const DistanceKernels& k, size_t dim, std::mt19937_64& rng) {
  std::vector<float> pos_a = RandomFloats(rng, dim + 16, 0.0f, 1.0f);
  std::vector<float> pos_b = RandomFloats(rng, dim + 16, 0.0f, 1.0f);
  std::vector<float> sgn_a = RandomFloats(rng, dim + 16, -1.0f, 1.0f);
  std::vector<float> sgn_b = RandomFloats(rng, dim + 16, -1.0f, 1.0f);
  for (size_t off = 0; off < 16; ++off) {
    const float* a = pos_a.data() + off;
    const float* b = pos_b.data() + (15 - off);
    CHECK(RelativeError(k.dot(a, b, dim), reference::Dot(a, b, dim)) <= 1e-5);
    CHECK(RelativeError(k.l2_sqr(a, b, dim), reference::L2Sqr(a, b, dim)) <= 1e-5);
    DotNorms got = k.dot_norms(a, b, dim), want = reference::DotAndNorms(a, b, dim);
    CHECK(RelativeError(got.dot, want.dot) <= 1e-5);
    CHECK(RelativeError(got.norm_a_sqr, want.norm_a_sqr) <= 1e-5);
    CHECK(RelativeError(got.norm_b_sqr, want.norm_b_sqr) <= 1e-5);
    // Signed inputs cancel, so the error is measured against sum |a_i b_i|.
    const float* sa = sgn_a.data() + off;
    const float* sb = sgn_b.data() + (15 - off);
    double scale = AbsDot(sa, sb, dim) + 1e-30;
    CHECK(std::fabs(k.dot(sa, sb, dim) - reference::Dot(sa, sb, dim)) / scale <= 1e-5);
    CHECK(RelativeError(k.l2_sqr(sa, sb, dim), reference::L2Sqr(sa, sb, dim)) <= 1e-5);
  }
}

TEST_CASE("the scalar path is always available and the active path is the widest available") {
  std::vector<SimdPath> paths = AvailableSimdPaths();
  REQUIRE(!paths.empty());
  CHECK(paths.front() == SimdPath::kScalar);
  CHECK(KernelsFor(SimdPath::kScalar) != nullptr);
  ActivePathGuard guard;
  CHECK(SetActiveSimdPath(paths.back()).ok());
  CHECK(ActiveSimdPath() == paths.back());
  std::string names;
  for (SimdPath p : paths) names += std::string(SimdPathName(p)) + " ";
  MESSAGE("available SIMD paths: " << names
                                   << "; chosen: " << std::string(SimdPathName(guard.saved)));
#if defined(__x86_64__)
  CHECK(KernelsFor(SimdPath::kSse2) != nullptr);
  CHECK(KernelsFor(SimdPath::kNeon) == nullptr);
#elif defined(__aarch64__)
  CHECK(KernelsFor(SimdPath::kNeon) != nullptr);
  CHECK(ActiveSimdPath() == SimdPath::kNeon);
  CHECK(KernelsFor(SimdPath::kSse2) == nullptr);
#endif
}

TEST_CASE(
    "every available SIMD path equals the scalar reference for many dimensions and "
    "unaligned pointers") {
  auto rng = SeededRng(1);
  for (SimdPath path : AvailableSimdPaths()) {
    const DistanceKernels* k = KernelsFor(path);
    REQUIRE(k != nullptr);
    CHECK(k->path == path);
    for (size_t dim : kDims) {
      CAPTURE(SimdPathName(path));
      CAPTURE(dim);
      CheckPathAgainstReference(*k, dim, rng);
    }
  }
}

TEST_CASE("kernels never read past the end of their inputs") {
  // Each vector ends exactly at a PROT_NONE page: reading one float too far
  // faults, for every path and every tail length. (Run it on hardware: QEMU
  // 7.2's emulator faults on a scalar FMA whose 4-byte operand ends a page.)
  long page = sysconf(_SC_PAGESIZE);
  REQUIRE(page >= 4096);
  size_t bytes = static_cast<size_t>(page) * 4;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  char* base = static_cast<char*>(mem);
  REQUIRE(mprotect(base + page, page, PROT_NONE) == 0);
  REQUIRE(mprotect(base + 3 * page, page, PROT_NONE) == 0);
  auto* end_a = reinterpret_cast<float*>(base + page);
  auto* end_b = reinterpret_cast<float*>(base + 3 * page);
  for (size_t i = 1; i <= 512; ++i)
    end_a[-static_cast<long>(i)] = end_b[-static_cast<long>(i)] = 0.5f;
  for (SimdPath path : AvailableSimdPaths()) {
    const DistanceKernels* k = KernelsFor(path);
    for (size_t dim = 1; dim <= 130; ++dim) {
      const float* a = end_a - dim;
      const float* b = end_b - dim;
      CHECK(k->dot(a, b, dim) == doctest::Approx(0.25 * dim).epsilon(1e-5));
      CHECK(k->l2_sqr(a, b, dim) == 0.0f);
      CHECK(k->dot_norms(a, b, dim).norm_b_sqr == doctest::Approx(0.25 * dim).epsilon(1e-5));
    }
  }
  munmap(mem, bytes);
}

TEST_CASE("a zero dimension gives zero on every path") {
  float x = 1.0f;
  for (SimdPath path : AvailableSimdPaths()) {
    const DistanceKernels* k = KernelsFor(path);
    CHECK(k->dot(&x, &x, 0) == 0.0f);
    CHECK(k->l2_sqr(&x, &x, 0) == 0.0f);
    CHECK(k->dot_norms(&x, &x, 0).dot == 0.0f);
  }
  CHECK(CosineSimilarity(&x, &x, 0) == 0.0f);
}

TEST_CASE(
    "cosine similarity is 1 for parallel, -1 for opposite, 0 for orthogonal or zero "
    "vectors") {
  std::vector<float> a = {1, 2, 3, 4, 5};
  std::vector<float> twice = {2, 4, 6, 8, 10};
  std::vector<float> opposite = {-1, -2, -3, -4, -5};
  std::vector<float> ortho = {2, -1, 0, 0, 0};
  std::vector<float> zero(5, 0.0f);
  CHECK(CosineSimilarity(a.data(), twice.data(), 5) == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(CosineSimilarity(a.data(), opposite.data(), 5) == doctest::Approx(-1.0).epsilon(1e-6));
  CHECK(CosineSimilarity(a.data(), ortho.data(), 5) == doctest::Approx(0.0));
  CHECK(CosineSimilarity(a.data(), zero.data(), 5) == 0.0f);
  CHECK(CosineSimilarity(zero.data(), zero.data(), 5) == 0.0f);
}

TEST_CASE("Distance follows the convention of metric.h for each metric") {
  std::vector<float> a = {3, 4};
  std::vector<float> b = {4, 3};
  // |a - b|^2 = 2, <a, b> = 24, cos = 24 / 25.
  CHECK(Distance(Metric::kL2, a.data(), b.data(), 2) == doctest::Approx(2.0));
  CHECK(Distance(Metric::kInnerProduct, a.data(), b.data(), 2) == doctest::Approx(1.0 - 24.0));
  CHECK(Distance(Metric::kCosine, a.data(), b.data(), 2) == doctest::Approx(1.0 - 24.0 / 25.0));
  std::vector<float> zero = {0, 0};
  CHECK(Distance(Metric::kCosine, a.data(), zero.data(), 2) == 1.0f);
  CHECK(Distance(Metric::kL2, a.data(), a.data(), 2) == 0.0f);
}

TEST_CASE("normalising gives unit length, returns the old length, and leaves zero alone") {
  auto rng = SeededRng(2);
  for (size_t dim : kDims) {
    std::vector<float> v = RandomFloats(rng, dim, -3.0f, 3.0f);
    double want = 0;
    for (float x : v) want += static_cast<double>(x) * x;
    float norm = NormalizeInPlace(v.data(), dim);
    CHECK(norm == doctest::Approx(std::sqrt(want)).epsilon(1e-5));
    CHECK(reference::Dot(v.data(), v.data(), dim) == doctest::Approx(1.0).epsilon(1e-5));
  }
  std::vector<float> zero(7, 0.0f);
  CHECK(NormalizeInPlace(zero.data(), 7) == 0.0f);
  CHECK(zero == std::vector<float>(7, 0.0f));
  // Squares that overflow a float still normalise.
  std::vector<float> huge = {3e30f, 4e30f};
  CHECK(NormalizeInPlace(huge.data(), 2) == doctest::Approx(5e30));
  CHECK(huge[0] == doctest::Approx(0.6));
  CHECK(huge[1] == doctest::Approx(0.8));
}

TEST_CASE("normalising sums squares in eight lanes in a fixed order and scales by 1/norm, the same bits on every CPU") {
  auto rng = SeededRng(3);
  for (size_t dim : {size_t{1}, size_t{7}, size_t{8}, size_t{100}, size_t{384}, size_t{1031}}) {
    CAPTURE(dim);
    std::vector<float> v = RandomFloats(rng, dim, -5.0f, 5.0f);
    // The definition, one element at a time.
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < dim; ++i) lane[i % 8] += static_cast<double>(v[i]) * v[i];
    const double norm =
        std::sqrt(((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])));
    std::vector<float> want(dim);
    const double scale = 1.0 / norm;
    for (size_t i = 0; i < dim; ++i) want[i] = static_cast<float>(v[i] * scale);
    std::vector<float> copy(dim);
    CHECK(CopyNormalized(v.data(), copy.data(), dim) == static_cast<float>(norm));
    CHECK(std::memcmp(copy.data(), want.data(), dim * sizeof(float)) == 0);
    CHECK(NormalizeInPlace(v.data(), dim) == static_cast<float>(norm));
    CHECK(std::memcmp(v.data(), want.data(), dim * sizeof(float)) == 0);
  }
}

TEST_CASE("a normalised copy has the bits of a copy normalised in place, zero and non-finite vectors too") {
  auto rng = SeededRng(11);
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t dim : {size_t{1}, size_t{3}, size_t{8}, size_t{17}, size_t{384}, size_t{520}}) {
    CAPTURE(dim);
    std::vector<std::vector<float>> cases = {RandomFloats(rng, dim, -5.0f, 5.0f),
                                             RandomFloats(rng, dim, -1e-30f, 1e-30f),
                                             RandomFloats(rng, dim, -3e30f, 3e30f),
                                             std::vector<float>(dim, 0.0f)};
    cases.push_back(cases[0]);
    cases.back()[dim / 2] = std::nanf("");
    cases.push_back(cases[0]);
    cases.back()[dim - 1] = -inf;
    cases.push_back(std::vector<float>(dim, 1e-45f));  // denormals
    for (size_t c = 0; c < cases.size(); c++) {
      CAPTURE(c);
      std::vector<float> in_place = cases[c], copy(dim, 7.0f);
      const float a = NormalizeInPlace(in_place.data(), dim);
      const float b = CopyNormalized(cases[c].data(), copy.data(), dim);
      CHECK(std::memcmp(&a, &b, sizeof a) == 0);
      CHECK(std::memcmp(in_place.data(), copy.data(), dim * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("AllFinite rejects NaN and infinities") {
  std::vector<float> v = {1, 2, 3};
  CHECK(AllFinite(v.data(), 3));
  v[1] = std::nanf("");
  CHECK_FALSE(AllFinite(v.data(), 3));
  v[1] = INFINITY;
  CHECK_FALSE(AllFinite(v.data(), 3));
  v[1] = -INFINITY;
  CHECK_FALSE(AllFinite(v.data(), 3));
  // Anywhere in a long vector, the last element included; the largest finite
  // float and subnormals are finite.
  std::vector<float> w(1000, std::numeric_limits<float>::max());
  w[3] = std::numeric_limits<float>::denorm_min();
  CHECK(AllFinite(w.data(), w.size()));
  for (size_t at : {size_t{0}, size_t{517}, size_t{999}}) {
    std::vector<float> bad = w;
    bad[at] = std::nanf("");
    CHECK_FALSE(AllFinite(bad.data(), bad.size()));
  }
}

TEST_CASE("selecting an unavailable path is refused and leaves the active path alone") {
  ActivePathGuard guard;
  for (SimdPath p : {SimdPath::kScalar, SimdPath::kSse2, SimdPath::kAvx2, SimdPath::kAvx512,
                     SimdPath::kNeon}) {
    SimdPath before = ActiveSimdPath();
    Status s = SetActiveSimdPath(p);
    if (KernelsFor(p) != nullptr) {
      CHECK(s.ok());
      CHECK(ActiveSimdPath() == p);
    } else {
      CHECK(s.code() == kRange);
      CHECK(ActiveSimdPath() == before);
    }
  }
  CHECK(SetActiveSimdPath(static_cast<SimdPath>(9)).code() == kRange);
}

TEST_CASE("metric names parse back to their metric") {
  for (Metric m : {Metric::kCosine, Metric::kInnerProduct, Metric::kL2}) {
    Result<Metric> parsed = ParseMetric(MetricName(m));
    REQUIRE(parsed.ok());
    CHECK(*parsed == m);
    CHECK(IsValidMetric(static_cast<uint8_t>(m)));
  }
  CHECK(ParseMetric("euclidean").value() == Metric::kL2);
  CHECK(ParseMetric("hamming").status().code() == kMismatch);
  CHECK_FALSE(IsValidMetric(0));
  CHECK_FALSE(IsValidMetric(4));
}

TEST_CASE("kernel throughput per path (printed, not asserted)") {
  auto rng = SeededRng(3);
  const size_t dim = 384, rows = 4096;
  std::vector<float> data = RandomFloats(rng, dim * rows, -1.0f, 1.0f);
  std::vector<float> q = RandomFloats(rng, dim, -1.0f, 1.0f);
  for (SimdPath path : AvailableSimdPaths()) {
    const DistanceKernels* k = KernelsFor(path);
    volatile float sink = 0;
    test::Stopwatch sw;
    for (int rep = 0; rep < 20; ++rep) {
      for (size_t r = 0; r < rows; ++r) sink = sink + k->dot(q.data(), data.data() + r * dim, dim);
    }
    double ns = sw.Seconds() * 1e9 / (20.0 * rows);
    MESSAGE(std::string(SimdPathName(path)) << ": dot over 384 floats " << ns << " ns");
  }
}

}  // namespace
}  // namespace agentmem::index

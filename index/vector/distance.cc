// index/vector/distance.cc -- run-time choice of the distance kernels, the
// scalar reference, and the metric-level helpers of distance.h and metric.h.
#include "index/vector/distance.h"

#include <atomic>
#include <cmath>
#include <cstring>

#include "index/vector/distance_arch.h"

namespace agentmem::index {

// ---- metric.h ----

const char* MetricName(Metric metric) {
  switch (metric) {
    case Metric::kCosine: return "cosine";
    case Metric::kInnerProduct: return "ip";
    case Metric::kL2: return "l2";
  }
  return "unknown";
}

Result<Metric> ParseMetric(std::string_view name) {
  if (name == "cosine") return Metric::kCosine;
  if (name == "ip" || name == "inner_product") return Metric::kInnerProduct;
  if (name == "l2" || name == "euclidean") return Metric::kL2;
  return StatusF(kMismatch, "unknown vector metric '%.*s' (expected cosine, ip or l2)",
                 static_cast<int>(name.size()), name.data());
}

bool IsValidMetric(uint8_t value) {
  return value == static_cast<uint8_t>(Metric::kCosine) ||
         value == static_cast<uint8_t>(Metric::kInnerProduct) ||
         value == static_cast<uint8_t>(Metric::kL2);
}

// ---- the scalar reference ----

namespace reference {

float Dot(const float* a, const float* b, size_t dim) {
  float s = 0;
  for (size_t i = 0; i < dim; ++i) s += LoadFloat(a + i) * LoadFloat(b + i);
  return s;
}

float L2Sqr(const float* a, const float* b, size_t dim) {
  float s = 0;
  for (size_t i = 0; i < dim; ++i) {
    float d = LoadFloat(a + i) - LoadFloat(b + i);
    s += d * d;
  }
  return s;
}

DotNorms DotAndNorms(const float* a, const float* b, size_t dim) {
  DotNorms r;
  for (size_t i = 0; i < dim; ++i) {
    const float x = LoadFloat(a + i), y = LoadFloat(b + i);
    r.dot += x * y;
    r.norm_a_sqr += x * x;
    r.norm_b_sqr += y * y;
  }
  return r;
}

}  // namespace reference

// ---- path selection ----

namespace {

constexpr DistanceKernels kScalarKernels{SimdPath::kScalar, &reference::Dot, &reference::L2Sqr,
                                         &reference::DotAndNorms};

// Whether the CPU and the OS can run a path. GCC's __builtin_cpu_supports
// reports AVX/AVX-512 features only when XGETBV says the OS saves the wider
// registers (xsimd 8.1's own detection does not check that).
bool CpuRuns(SimdPath path) {
#if AGENTMEM_VECTOR_X86_TARGETS
  __builtin_cpu_init();
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (path) {
    case SimdPath::kScalar: return true;
    case SimdPath::kSse2: return true;  // part of x86-64
    case SimdPath::kAvx2: return avx2_fma;
    case SimdPath::kAvx512: return avx2_fma && __builtin_cpu_supports("avx512f");
    case SimdPath::kNeon: return false;
  }
  return false;
#elif defined(__aarch64__)
  return path == SimdPath::kScalar || path == SimdPath::kNeon;  // NEON is baseline
#else
  return path == SimdPath::kScalar || path == SimdPath::kSse2;
#endif
}

const DistanceKernels* CompiledKernels(SimdPath path) {
  switch (path) {
    case SimdPath::kScalar: return &kScalarKernels;
    case SimdPath::kSse2: return internal::Sse2Kernels();
    case SimdPath::kAvx2: return internal::Avx2Kernels();
    case SimdPath::kAvx512: return internal::Avx512Kernels();
    case SimdPath::kNeon: return internal::NeonKernels();
  }
  return nullptr;
}

// Narrowest first within an architecture; no CPU runs both SSE2 and NEON.
constexpr SimdPath kAllPaths[] = {SimdPath::kScalar, SimdPath::kSse2, SimdPath::kAvx2,
                                  SimdPath::kAvx512, SimdPath::kNeon};

const DistanceKernels* WidestKernels() {
  const DistanceKernels* best = &kScalarKernels;
  for (SimdPath p : kAllPaths) {
    if (const DistanceKernels* k = KernelsFor(p)) best = k;
  }
  return best;
}

std::atomic<const DistanceKernels*> g_active{nullptr};

}  // namespace

const char* SimdPathName(SimdPath path) {
  switch (path) {
    case SimdPath::kScalar: return "scalar";
    case SimdPath::kSse2: return "sse2";
    case SimdPath::kAvx2: return "avx2+fma";
    case SimdPath::kAvx512: return "avx512f";
    case SimdPath::kNeon: return "neon";
  }
  return "unknown";
}

// The CPU is asked first: the table getters of the wide units are themselves
// compiled for their instruction set and must not run on a CPU without it.
const DistanceKernels* KernelsFor(SimdPath path) {
  return CpuRuns(path) ? CompiledKernels(path) : nullptr;
}

std::vector<SimdPath> AvailableSimdPaths() {
  std::vector<SimdPath> paths;
  for (SimdPath p : kAllPaths) {
    if (KernelsFor(p) != nullptr) paths.push_back(p);
  }
  return paths;
}

const DistanceKernels& ActiveKernels() {
  const DistanceKernels* k = g_active.load(std::memory_order_acquire);
  if (k == nullptr) {
    const DistanceKernels* expected = nullptr;
    k = WidestKernels();
    if (!g_active.compare_exchange_strong(expected, k, std::memory_order_acq_rel)) k = expected;
  }
  return *k;
}

SimdPath ActiveSimdPath() { return ActiveKernels().path; }

Status SetActiveSimdPath(SimdPath path) {
  const DistanceKernels* k = KernelsFor(path);
  if (k == nullptr) {
    return StatusF(kRange, "SIMD path %s is not available on this CPU or build",
                   SimdPathName(path));
  }
  g_active.store(k, std::memory_order_release);
  return Status::OK();
}

// ---- single-call helpers ----

float Dot(const float* a, const float* b, size_t dim) { return ActiveKernels().dot(a, b, dim); }

float L2Sqr(const float* a, const float* b, size_t dim) {
  return ActiveKernels().l2_sqr(a, b, dim);
}

namespace {
float CosineFromSums(const DotNorms& s) {
  if (s.norm_a_sqr == 0 || s.norm_b_sqr == 0) return 0;
  return s.dot / (std::sqrt(s.norm_a_sqr) * std::sqrt(s.norm_b_sqr));
}
}  // namespace

float CosineSimilarity(const float* a, const float* b, size_t dim) {
  return CosineFromSums(ActiveKernels().dot_norms(a, b, dim));
}

float DistanceWith(const DistanceKernels& kernels, Metric metric, const float* a, const float* b,
                   size_t dim) {
  switch (metric) {
    case Metric::kCosine: return 1.0f - CosineFromSums(kernels.dot_norms(a, b, dim));
    case Metric::kInnerProduct: return 1.0f - kernels.dot(a, b, dim);
    case Metric::kL2: return kernels.l2_sqr(a, b, dim);
  }
  return 0;
}

float Distance(Metric metric, const float* a, const float* b, size_t dim) {
  return DistanceWith(ActiveKernels(), metric, a, b, dim);
}

namespace {

// Eight sums of squares in double, element i in lane i % 8, added in a
// fixed order; then the norm. Each product of two floats is exact in double,
// so the bits are the same on every CPU (with or without fused
// multiply-add), and the lanes let the compiler use vector instructions.
__attribute__((always_inline)) inline double NormOf(const float* v, size_t dim) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= dim; i += 8) {
    for (size_t j = 0; j < 8; ++j) {
      const double x = LoadFloat(v + i + j);
      lane[j] += x * x;
    }
  }
  for (; i < dim; ++i) {
    const double x = LoadFloat(v + i);
    lane[i % 8] += x * x;
  }
  const double sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  return std::sqrt(sum);
}

// dst = src / |src| in double, a multiply per element, not a divide; a zero
// or non-finite norm leaves the floats as they are. Returns the norm. In
// place, the loop reads and writes through one pointer (so that it is built
// without an overlap check).
template <bool kInPlace>
__attribute__((always_inline)) inline float ToUnit(const float* src, float* dst, size_t dim) {
  const float* from = kInPlace ? dst : src;
  const double norm = NormOf(from, dim);
  if (norm == 0 || !std::isfinite(norm)) {
    if (!kInPlace) std::memcpy(dst, src, dim * sizeof(float));
    return static_cast<float>(norm);
  }
  const double scale = 1.0 / norm;
  for (size_t i = 0; i < dim; ++i) dst[i] = static_cast<float>(LoadFloat(from + i) * scale);
  return static_cast<float>(norm);
}

}  // namespace

// In double: once per insert or query, and immune to overflow of the squares.
// On x86-64 GCC also builds these for AVX2 and AVX-512 and picks one at load
// time: the same operations on wider registers, so the same bits. Not with
// Clang (the TSan and fuzz builds): Clang 14 builds each of these three as
// its AVX-512 version alone, one symbol with no choice at load time, which
// stops with SIGILL on a CPU without AVX-512.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define AGENTMEM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define AGENTMEM_CLONES
#endif
AGENTMEM_CLONES
float NormalizeInPlace(float* v, size_t dim) { return ToUnit<true>(v, v, dim); }

AGENTMEM_CLONES
float CopyNormalized(const float* src, float* dst, size_t dim) { return ToUnit<false>(src, dst, dim); }

AGENTMEM_CLONES
double Norm(const float* v, size_t dim) { return NormOf(v, dim); }
#undef AGENTMEM_CLONES

bool AllFinite(const float* v, size_t dim) {
  // Exponent bits all ones: an infinity or a NaN. No early exit, so that
  // the loop runs in vector instructions.
  uint32_t bad = 0;
  for (size_t i = 0; i < dim; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

}  // namespace agentmem::index

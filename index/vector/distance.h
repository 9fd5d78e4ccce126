// index/vector/distance.h -- float32 distance kernels (dot product, squared L2,
// cosine) written with xsimd and chosen at run time for the CPU.
//
// Paths. One set of kernels exists per instruction set ("path"): a plain-C++
// scalar reference, SSE2 (the x86-64 baseline), AVX2+FMA and AVX-512F on
// x86-64, and NEON (the AArch64 baseline) on 64-bit ARM. The wider x86 paths
// are compiled in their own translation units with a target pragma
// (distance_avx2.cc, distance_avx512.cc), and are only ever called after the
// CPU and the operating system were asked whether they support them, so a
// build for baseline x86-64 never executes an instruction the CPU lacks. On a compiler or
// architecture without those units only the scalar path and the baseline one
// (SSE2 on x86-64, NEON on aarch64) exist.
//
// Numerics. The SIMD kernels sum in a different order from the scalar
// reference (several accumulators, fused multiply-add on AVX2/AVX-512/NEON), so
// results differ from it by float rounding only: within about 1e-6 of
// sum(|a_i * b_i|) for a dot product of a few thousand elements.
//
// Thread safety: every function here may be called from any thread.
// Pointers need no particular alignment. A dim of 0 gives 0 (cosine: 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "format/status.h"
#include "index/vector/metric.h"

namespace agentmem::index {

enum class SimdPath : uint8_t { kScalar = 0, kSse2 = 1, kAvx2 = 2, kAvx512 = 3, kNeon = 4 };

// The float at p, which need not be aligned (a vector may lie where a file's
// page put it).
inline float LoadFloat(const float* p) {
  float x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

// "scalar", "sse2", "avx2+fma", "avx512f" or "neon".
const char* SimdPathName(SimdPath path);

// The three sums a cosine needs, computed in one pass.
struct DotNorms {
  float dot = 0;         // sum a_i * b_i
  float norm_a_sqr = 0;  // sum a_i * a_i
  float norm_b_sqr = 0;  // sum b_i * b_i
};

// The kernels of one path. Function pointers, so that a hot loop (the exact
// scan, the HNSW distance callback) resolves the path once.
struct DistanceKernels {
  SimdPath path;
  float (*dot)(const float* a, const float* b, size_t dim);
  float (*l2_sqr)(const float* a, const float* b, size_t dim);
  DotNorms (*dot_norms)(const float* a, const float* b, size_t dim);
};

// The kernels of `path`, or nullptr when this build lacks the path or this
// CPU (and OS) cannot run it. kScalar is always available.
const DistanceKernels* KernelsFor(SimdPath path);

// Every path KernelsFor() would return, narrowest first (scalar first).
std::vector<SimdPath> AvailableSimdPaths();

// The kernels in use: the widest available path, chosen on first use, unless
// SetActiveSimdPath() chose another.
const DistanceKernels& ActiveKernels();
SimdPath ActiveSimdPath();

// Makes `path` the active path (for benchmarks and tests). Returns kRange,
// leaving the active path unchanged, when the path is not available. Objects
// that already captured kernels (an HnswIndex) keep theirs.
Status SetActiveSimdPath(SimdPath path);

// The active path's kernels, for single calls.
float Dot(const float* a, const float* b, size_t dim);
float L2Sqr(const float* a, const float* b, size_t dim);
// cos(a, b) for any inputs: dot / (|a| |b|), and 0 when a or b is zero.
float CosineSimilarity(const float* a, const float* b, size_t dim);
// The distance of metric.h's convention (smaller is closer).
float Distance(Metric metric, const float* a, const float* b, size_t dim);

// The distance of metric.h's convention, computed with the given kernels.
float DistanceWith(const DistanceKernels& kernels, Metric metric, const float* a, const float* b,
                   size_t dim);

// Scales v to unit length and returns its former length. A zero vector is
// left unchanged (and 0 is returned).
float NormalizeInPlace(float* v, size_t dim);
// The same into dst (dim floats, not overlapping src): the bits of copying
// src to dst and then NormalizeInPlace(dst), in one pass over dst.
float CopyNormalized(const float* src, float* dst, size_t dim);
// |v| in double: the length NormalizeInPlace divides by (the same bits on
// every CPU); not finite exactly when v holds a NaN or an infinity.
double Norm(const float* v, size_t dim);

// True when every element is finite (no NaN, no infinity).
bool AllFinite(const float* v, size_t dim);

// The scalar reference: one accumulator, elements in order. It is the
// kScalar path, and what the tests hold the SIMD paths against.
namespace reference {
float Dot(const float* a, const float* b, size_t dim);
float L2Sqr(const float* a, const float* b, size_t dim);
DotNorms DotAndNorms(const float* a, const float* b, size_t dim);
}  // namespace reference

}  // namespace agentmem::index

// index/vector/distance_kernels_inl.h -- the xsimd kernels, written once as a
// template over the instruction set and instantiated by one translation unit
// per instruction set (distance_sse2.cc, distance_avx2.cc, distance_avx512.cc,
// distance_neon.cc).
//
// Include it only from those units, after the unit has set its target. Two
// rules keep a wide unit's code away from baseline callers (an inline function
// emitted in several objects is kept once, from any of them, by the linker):
//   (1) everything defined here has internal linkage (anonymous namespace);
//   (2) a unit instantiates xsimd only for its own instruction set, so the
//       xsimd inline functions it emits are ones no other unit emits.
// A third rule keeps the wide code correct; see (3) below.
// `nm -C --defined-only` on the three objects shows no weak symbol in common.
#pragma once

#include <cstddef>
#include <xsimd/xsimd.hpp>

#include "index/vector/distance.h"

namespace agentmem::index {
namespace {

template <class Arch>
using FloatBatch = xsimd::batch<float, Arch>;

// (3) These kernels use only batch members (+=, *=, loads, stores) and
// namespace-scope xsimd functions, never xsimd's binary operators (a + b):
// those are hidden friends, and GCC does not apply a target pragma to them or
// to implicitly defined members. Compiled for the baseline ISA, they pass wide
// registers by another convention and compute garbage when not inlined (as in
// a debug build; UBSan reports it).

// a * b + c, fused where the instruction set has FMA.
template <class Arch>
inline FloatBatch<Arch> MulAdd(FloatBatch<Arch> a, FloatBatch<Arch> b, FloatBatch<Arch> c) {
  a *= b;
  a += c;
  return a;
}

#if XSIMD_WITH_FMA3_AVX2
inline FloatBatch<xsimd::fma3<xsimd::avx2>> MulAdd(FloatBatch<xsimd::fma3<xsimd::avx2>> a,
                                                   FloatBatch<xsimd::fma3<xsimd::avx2>> b,
                                                   FloatBatch<xsimd::fma3<xsimd::avx2>> c) {
  return xsimd::fma(a, b, c);
}
#endif

#if XSIMD_WITH_NEON64
inline FloatBatch<xsimd::neon64> MulAdd(FloatBatch<xsimd::neon64> a, FloatBatch<xsimd::neon64> b,
                                        FloatBatch<xsimd::neon64> c) {
  return FloatBatch<xsimd::neon64>(vfmaq_f32(c, a, b));
}
#endif

#if XSIMD_WITH_AVX512F
// xsimd 8.1 implements fma for avx512f as a multiply and an add.
inline FloatBatch<xsimd::avx512f> MulAdd(FloatBatch<xsimd::avx512f> a, FloatBatch<xsimd::avx512f> b,
                                         FloatBatch<xsimd::avx512f> c) {
  return FloatBatch<xsimd::avx512f>(_mm512_fmadd_ps(a, b, c));
}
#endif

// The kernels are flattened (every call inlined into them): GCC otherwise
// declines to inline some xsimd members across the pragma'd target ("target
// specific option mismatch"), which costs 4x on AVX-512.
#define AGENTMEM_KERNEL __attribute__((flatten))

template <class Arch>
struct SimdKernels {
  using Batch = FloatBatch<Arch>;
  static constexpr size_t kWidth = Batch::size;
  static constexpr size_t kUnroll = 4 * kWidth;  // four independent accumulators

  static Batch Load(const float* p) { return Batch::load_unaligned(p); }

  // Lane sum in a fixed order. (xsimd 8.1's hadd for avx512f uses an AVX512DQ
  // instruction, which an AVX512F-only CPU lacks.)
  static float Sum(Batch v) {
    alignas(64) float lanes[kWidth];
    v.store_aligned(lanes);
    float s = 0;
    for (size_t i = 0; i < kWidth; ++i) s += lanes[i];
    return s;
  }

  // (s0 + s1) + (s2 + s3), summed.
  static float Sum4(Batch s0, Batch s1, Batch s2, Batch s3) {
    s0 += s1;
    s2 += s3;
    s0 += s2;
    return Sum(s0);
  }

  AGENTMEM_KERNEL static float Dot(const float* a, const float* b, size_t n) {
    Batch s0(0.f), s1(0.f), s2(0.f), s3(0.f);
    size_t i = 0;
    for (; i + kUnroll <= n; i += kUnroll) {
      s0 = MulAdd(Load(a + i), Load(b + i), s0);
      s1 = MulAdd(Load(a + i + kWidth), Load(b + i + kWidth), s1);
      s2 = MulAdd(Load(a + i + 2 * kWidth), Load(b + i + 2 * kWidth), s2);
      s3 = MulAdd(Load(a + i + 3 * kWidth), Load(b + i + 3 * kWidth), s3);
    }
    for (; i + kWidth <= n; i += kWidth) s0 = MulAdd(Load(a + i), Load(b + i), s0);
    float s = Sum4(s0, s1, s2, s3);
    for (; i < n; ++i) s += LoadFloat(a + i) * LoadFloat(b + i);
    return s;
  }

  static Batch SquaredDiff(const float* a, const float* b, Batch acc) {
    Batch d = Load(a);
    d -= Load(b);
    return MulAdd(d, d, acc);
  }

  AGENTMEM_KERNEL static float L2Sqr(const float* a, const float* b, size_t n) {
    Batch s0(0.f), s1(0.f), s2(0.f), s3(0.f);
    size_t i = 0;
    for (; i + kUnroll <= n; i += kUnroll) {
      s0 = SquaredDiff(a + i, b + i, s0);
      s1 = SquaredDiff(a + i + kWidth, b + i + kWidth, s1);
      s2 = SquaredDiff(a + i + 2 * kWidth, b + i + 2 * kWidth, s2);
      s3 = SquaredDiff(a + i + 3 * kWidth, b + i + 3 * kWidth, s3);
    }
    for (; i + kWidth <= n; i += kWidth) s0 = SquaredDiff(a + i, b + i, s0);
    float s = Sum4(s0, s1, s2, s3);
    for (; i < n; ++i) {
      const float d = LoadFloat(a + i) - LoadFloat(b + i);
      s += d * d;
    }
    return s;
  }

  // Adds x*y, x*x and y*y to three running sums.
  static void Accumulate3(Batch x, Batch y, Batch* ab, Batch* aa, Batch* bb) {
    *ab = MulAdd(x, y, *ab);
    *aa = MulAdd(x, x, *aa);
    *bb = MulAdd(y, y, *bb);
  }

  AGENTMEM_KERNEL static DotNorms DotAndNorms(const float* a, const float* b, size_t n) {
    Batch ab0(0.f), aa0(0.f), bb0(0.f), ab1(0.f), aa1(0.f), bb1(0.f);
    size_t i = 0;
    for (; i + 2 * kWidth <= n; i += 2 * kWidth) {
      Accumulate3(Load(a + i), Load(b + i), &ab0, &aa0, &bb0);
      Accumulate3(Load(a + i + kWidth), Load(b + i + kWidth), &ab1, &aa1, &bb1);
    }
    for (; i + kWidth <= n; i += kWidth) Accumulate3(Load(a + i), Load(b + i), &ab0, &aa0, &bb0);
    ab0 += ab1;
    aa0 += aa1;
    bb0 += bb1;
    DotNorms r{Sum(ab0), Sum(aa0), Sum(bb0)};
    for (; i < n; ++i) {
      const float x = LoadFloat(a + i), y = LoadFloat(b + i);
      r.dot += x * y;
      r.norm_a_sqr += x * x;
      r.norm_b_sqr += y * y;
    }
    return r;
  }

  static constexpr DistanceKernels Table(SimdPath path) {
    return DistanceKernels{path, &Dot, &L2Sqr, &DotAndNorms};
  }
};

}  // namespace
}  // namespace agentmem::index

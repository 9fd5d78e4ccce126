// index/vector/distance_avx512.cc -- the AVX-512F kernels (16 floats a batch,
// FMA). Compiled for AVX-512F by the pragma below (see distance_arch.h);
// distance.cc calls into it only when the CPU and the OS support AVX-512F,
// AVX2 and FMA. Only AVX-512F instructions are used (no DQ/BW/VL), so the
// first AVX-512 CPUs qualify too.
#include "index/vector/distance_arch.h"

#if AGENTMEM_VECTOR_X86_TARGETS
#pragma GCC target("sse3,ssse3,sse4.1,sse4.2,popcnt,avx,avx2,fma,avx512f")
// GCC does not define these for a target pragma; xsimd needs them.
#ifndef __SSE3__
#define __SSE3__ 1
#endif
#ifndef __SSSE3__
#define __SSSE3__ 1
#endif
#ifndef __SSE4_1__
#define __SSE4_1__ 1
#endif
#ifndef __SSE4_2__
#define __SSE4_2__ 1
#endif
#ifndef __AVX__
#define __AVX__ 1
#endif
#ifndef __AVX2__
#define __AVX2__ 1
#endif
#ifndef __FMA__
#define __FMA__ 1
#endif
#ifndef __AVX512F__
#define __AVX512F__ 1
#endif
#include "index/vector/distance_kernels_inl.h"

namespace agentmem::index::internal {
namespace {
constexpr DistanceKernels kAvx512 = SimdKernels<xsimd::avx512f>::Table(SimdPath::kAvx512);
}  // namespace
const DistanceKernels* Avx512Kernels() { return &kAvx512; }
}  // namespace agentmem::index::internal

#else
namespace agentmem::index::internal {
const DistanceKernels* Avx512Kernels() { return nullptr; }
}  // namespace agentmem::index::internal
#endif

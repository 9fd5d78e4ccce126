// index/vector/distance_avx2.cc -- the AVX2+FMA kernels. The whole unit is
// compiled for AVX2+FMA by the pragma below (see distance_arch.h for why a
// pragma); distance.cc calls into it only when the CPU and the OS support
// AVX2 and FMA. Keep this file free of anything but the kernel table: every
// inline function it instantiates is compiled with AVX2 enabled.
#include "index/vector/distance_arch.h"

#if AGENTMEM_VECTOR_X86_TARGETS
#pragma GCC target("sse3,ssse3,sse4.1,sse4.2,popcnt,avx,avx2,fma")
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
#include "index/vector/distance_kernels_inl.h"

namespace agentmem::index::internal {
namespace {
constexpr DistanceKernels kAvx2 = SimdKernels<xsimd::fma3<xsimd::avx2>>::Table(SimdPath::kAvx2);
}  // namespace
const DistanceKernels* Avx2Kernels() { return &kAvx2; }
}  // namespace agentmem::index::internal

#else
namespace agentmem::index::internal {
const DistanceKernels* Avx2Kernels() { return nullptr; }
}  // namespace agentmem::index::internal
#endif

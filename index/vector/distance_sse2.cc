// index/vector/distance_sse2.cc -- the SSE2 kernels: the x86-64 baseline, so
// this unit needs no target pragma. Empty on other architectures.
#include "index/vector/distance_arch.h"

#if defined(__x86_64__)
#include "index/vector/distance_kernels_inl.h"

namespace agentmem::index::internal {
namespace {
constexpr DistanceKernels kSse2 = SimdKernels<xsimd::sse2>::Table(SimdPath::kSse2);
}  // namespace
const DistanceKernels* Sse2Kernels() { return &kSse2; }
}  // namespace agentmem::index::internal

#else
namespace agentmem::index::internal {
const DistanceKernels* Sse2Kernels() { return nullptr; }
}  // namespace agentmem::index::internal
#endif

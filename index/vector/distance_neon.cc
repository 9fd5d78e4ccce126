// index/vector/distance_neon.cc -- the NEON kernels (AdvSIMD, 4 floats a batch,
// fused multiply-add). NEON is part of every AArch64 CPU, so this unit needs
// no target pragma and distance.cc needs to ask the CPU nothing: the path is
// chosen when the build is for aarch64. Empty on other architectures.
#include "index/vector/distance_arch.h"

#if defined(__aarch64__)
#include "index/vector/distance_kernels_inl.h"

namespace agentmem::index::internal {
namespace {
constexpr DistanceKernels kNeon = SimdKernels<xsimd::neon64>::Table(SimdPath::kNeon);
}  // namespace
const DistanceKernels* NeonKernels() { return &kNeon; }
}  // namespace agentmem::index::internal

#else
namespace agentmem::index::internal {
const DistanceKernels* NeonKernels() { return nullptr; }
}  // namespace agentmem::index::internal
#endif

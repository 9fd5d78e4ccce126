// index/vector/distance_arch.h -- internal to index/vector: the kernel tables of
// the per-instruction-set translation units, and the condition under which the
// wider ones are compiled at all.
//
// Why a pragma and not per-file compiler flags: the index layer is one meson
// static_library, and meson gives every source of a target the same flags. GCC's
// `#pragma GCC target` retargets the rest of one file instead. GCC does not
// define the ISA macros (__AVX2__, ...) for a pragma, and xsimd decides which
// instruction sets exist from exactly those macros, so the wide units define
// them by hand before including xsimd (distance_avx2.cc). Other compilers get
// the scalar and SSE2 paths only. NEON is the AArch64 baseline: its unit
// (distance_neon.cc) is compiled whenever the build is for aarch64.
#pragma once

#include "index/vector/distance.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define AGENTMEM_VECTOR_X86_TARGETS 1
#else
#define AGENTMEM_VECTOR_X86_TARGETS 0
#endif

namespace agentmem::index::internal {

// Each returns its unit's table, or nullptr when the unit was compiled empty.
// They say nothing about the CPU: distance.cc asks the CPU before using one.
const DistanceKernels* Sse2Kernels();
const DistanceKernels* Avx2Kernels();
const DistanceKernels* Avx512Kernels();
const DistanceKernels* NeonKernels();

}  // namespace agentmem::index::internal

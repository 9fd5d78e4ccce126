// format/half.h -- IEEE 754 binary16 ("half", float16) conversions for
// vectors stored as float16 (docs/format.md §5.1, vector.type f16).
// Both directions are exact where they can be: HalfToFloat is exact for
// every half; FloatToHalf rounds to nearest, ties to even, overflows to
// infinity and keeps NaN a NaN.
#pragma once

#include <cstddef>
#include <cstdint>

namespace agentmem::format {

uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
// `n` little-endian halves at `src` into `dst`.
void HalfsToFloats(const char* src, size_t n, float* dst);

// The float nearest to `f` that a half holds (FloatToHalf, then back).
inline float RoundToHalf(float f) { return HalfToFloat(FloatToHalf(f)); }

}  // namespace agentmem::format

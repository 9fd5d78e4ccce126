// format/half.h -- IEEE 754 binary16 ("half", float16) conversions for
// vectors stored as float16 (docs/format.md §5.1, vector.type f16).
// Both directions are exact where they can be: HalfToFloat is exact for
// every half; FloatToHalf rounds to nearest, ties to even, overflows to
// infinity and keeps NaN a NaN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace agentmem::format {

uint16_t FloatToHalf(float f);

// Without branches, so that HalfsToFloats' loop is vectorised: the exponent
// and mantissa move into place and the exponent is rebiased (by 112, or by
// 224 for infinity and NaN); a subnormal or zero is its mantissa times
// 2^-24, computed exactly as (2^-14 + m * 2^-24) - 2^-14.
inline float HalfToFloat(uint16_t h) {
  auto as_float = [](uint32_t x) {
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  };
  auto as_bits = [](float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    return x;
  };
  const uint32_t em = h & 0x7fffu;
  const uint32_t exp = em & 0x7c00u;
  const uint32_t normal = (em << 13) + (exp == 0x7c00u ? 224u << 23 : 112u << 23);
  const float sub = as_float((em << 13) + (113u << 23)) - as_float(113u << 23);
  const uint32_t bits = exp == 0 ? as_bits(sub) : normal;
  return as_float(bits | (static_cast<uint32_t>(h & 0x8000u) << 16));
}
// `n` little-endian halves at `src` (any alignment) into `dst`, several at a
// time with the CPU's conversion instruction where there is one (x86-64
// F16C, AArch64), else as HalfsToFloatsPortable. Both give HalfToFloat's
// bits for every half but a NaN, which stays a NaN (the instruction sets a
// signalling NaN's quiet bit).
void HalfsToFloats(const char* src, size_t n, float* dst);
void HalfsToFloatsPortable(const char* src, size_t n, float* dst);

// The float nearest to `f` that a half holds (FloatToHalf, then back).
inline float RoundToHalf(float f) { return HalfToFloat(FloatToHalf(f)); }

}  // namespace agentmem::format

// format/half.cc -- float16 conversions (half.h).
#include "format/half.h"

#include <cstring>

namespace agentmem::format {

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) {  // infinity or NaN (a NaN keeps a set mantissa bit)
    return sign | 0x7c00 | (abs > 0x7f800000 ? 0x0200 : 0);
  }
  const int32_t exp = static_cast<int32_t>(abs >> 23) - 127;  // unbiased
  if (exp > 15) return sign | 0x7c00;                         // too large: infinity
  uint32_t mant = abs & 0x7fffff;
  if (exp >= -14) {  // a normal half: 10 mantissa bits, round the 13 dropped
    uint32_t h = (static_cast<uint32_t>(exp + 15) << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;  // may carry into the exponent
    return sign | static_cast<uint16_t>(h);                 // 0x7c00 after a carry: infinity
  }
  if (exp < -25) return sign;  // below half the smallest subnormal: zero
  // A subnormal half: the value is mant' * 2^-24 with the implicit bit put back.
  mant |= 0x800000;
  const int shift = -exp - 14 + 13;  // 14..24
  uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1))) h++;
  return sign | static_cast<uint16_t>(h);
}

namespace {

float AsFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint32_t AsBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}

}  // namespace

// Without branches, so that HalfsToFloats' loop is vectorised: the exponent
// and mantissa move into place and the exponent is rebiased (by 112, or by
// 224 for infinity and NaN); a subnormal or zero is its mantissa times
// 2^-24, computed exactly as (2^-14 + m * 2^-24) - 2^-14.
float HalfToFloat(uint16_t h) {
  const uint32_t em = h & 0x7fffu;
  const uint32_t exp = em & 0x7c00u;
  const uint32_t normal = (em << 13) + (exp == 0x7c00u ? 224u << 23 : 112u << 23);
  const float sub = AsFloat((em << 13) + (113u << 23)) - AsFloat(113u << 23);
  const uint32_t bits = exp == 0 ? AsBits(sub) : normal;
  return AsFloat(bits | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

void HalfsToFloats(const char* src, size_t n, float* dst) {
  for (size_t i = 0; i < n; i++) {
    const uint16_t h = static_cast<uint16_t>(static_cast<uint8_t>(src[2 * i]) |
                                             (static_cast<uint8_t>(src[2 * i + 1]) << 8));
    dst[i] = HalfToFloat(h);
  }
}

}  // namespace agentmem::format

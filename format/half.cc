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

void HalfsToFloats(const char* src, size_t n, float* dst) {
  for (size_t i = 0; i < n; i++) {
    const uint16_t h = static_cast<uint16_t>(static_cast<uint8_t>(src[2 * i]) |
                                             (static_cast<uint8_t>(src[2 * i + 1]) << 8));
    dst[i] = HalfToFloat(h);
  }
}

}  // namespace agentmem::format

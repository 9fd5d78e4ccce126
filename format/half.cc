// format/half.cc -- float16 conversions (half.h).
#include "format/half.h"

#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace agentmem::format {
namespace {

uint16_t LoadHalf(const char* p) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) | (static_cast<uint8_t>(p[1]) << 8));
}

#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void HalfsToFloatsF16c(const char* src, size_t n,
                                                          float* dst) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  HalfsToFloatsPortable(src + 2 * i, n - i, dst + i);
}

// F16C is CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does
// not know the name); "avx" also says the OS saves the AVX registers.
bool HasF16c() {
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
         (ecx & (1u << 29)) != 0;
}

const bool kF16c = HasF16c();
#endif

}  // namespace

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

void HalfsToFloatsPortable(const char* src, size_t n, float* dst) {
  for (size_t i = 0; i < n; i++) dst[i] = HalfToFloat(LoadHalf(src + 2 * i));
}

void HalfsToFloats(const char* src, size_t n, float* dst) {
#if defined(__x86_64__)
  if (kF16c) return HalfsToFloatsF16c(src, n, dst);
#elif defined(__aarch64__) && defined(__ARM_FP16_FORMAT_IEEE) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    float16x4_t h;
    std::memcpy(&h, src + 2 * i, 8);
    vst1q_f32(dst + i, vcvt_f32_f16(h));
  }
  return HalfsToFloatsPortable(src + 2 * i, n - i, dst + i);
#endif
  HalfsToFloatsPortable(src, n, dst);
}

}  // namespace agentmem::format

// format/int8.cc -- int8 vector quantization (int8.h).
#include "format/int8.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

namespace agentmem::format {

float Int8Scale(std::span<const float> v) {
  float m = 0;
  for (float f : v) m = std::fmax(m, std::fabs(f));
  if (m < 127.0f * FLT_MIN) return 0;
  float s = m / 127.0f;
  // The smallest s with fl(127 s) >= m: m / 127 is within an ulp of it.
  while (127.0f * s < m) s = std::nextafter(s, INFINITY);
  for (float lower = std::nextafter(s, 0.0f); 127.0f * lower >= m;
       lower = std::nextafter(s, 0.0f)) {
    s = lower;
  }
  return std::isfinite(127.0f * s) ? s : INFINITY;
}

void Int8Quantize(std::span<const float> v, float scale, int8_t* q) {
  for (size_t i = 0; i < v.size(); i++) {
    const float x = scale > 0 ? std::nearbyint(v[i] / scale) : 0.0f;
    q[i] = static_cast<int8_t>(std::fmin(127.0f, std::fmax(-127.0f, x)));
  }
}

bool RoundToInt8(std::span<float> v) {
  const float scale = Int8Scale(v);
  if (!std::isfinite(scale)) return false;
  std::vector<int8_t> q(v.size());
  Int8Quantize(v, scale, q.data());
  for (size_t i = 0; i < v.size(); i++) v[i] = static_cast<float>(q[i]) * scale;
  return true;
}

bool Int8ToFloats(const char* src, size_t n, float* dst) {
  uint32_t bits = static_cast<uint32_t>(static_cast<uint8_t>(src[0])) |
                  static_cast<uint32_t>(static_cast<uint8_t>(src[1])) << 8 |
                  static_cast<uint32_t>(static_cast<uint8_t>(src[2])) << 16 |
                  static_cast<uint32_t>(static_cast<uint8_t>(src[3])) << 24;
  float scale;
  std::memcpy(&scale, &bits, 4);
  if (!(scale >= 0) || !std::isfinite(127.0f * scale)) return false;
  // Two plain loops over restrict pointers, which the compiler vectorises.
  const int8_t* __restrict q = reinterpret_cast<const int8_t*>(src + kInt8ScaleBytes);
  float* __restrict out = dst;
  int lowest = 0;
  for (size_t i = 0; i < n; i++) lowest = std::min<int>(lowest, q[i]);
  if (lowest == -128) return false;
  for (size_t i = 0; i < n; i++) out[i] = static_cast<float>(q[i]) * scale;
  return true;
}

}  // namespace agentmem::format

// tests/format/half_test.cc -- float16 conversions (format/half.h).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "format/half.h"

using namespace agentmem::format;

namespace {

uint32_t Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}

// The half nearest to `f` by exhaustive search over every finite half
// (ties to the even one), or infinity past the largest half's rounding edge.
uint16_t NearestHalf(float f) {
  const double v = f;
  uint16_t best = 0;
  double best_err = INFINITY;
  for (uint32_t h = 0; h < 0x8000; h++) {  // magnitudes; the sign is added below
    const uint32_t exp = (h >> 10) & 0x1f;
    if (exp == 0x1f) continue;
    const double err =
        std::fabs(static_cast<double>(HalfToFloat(static_cast<uint16_t>(h))) - std::fabs(v));
    if (err < best_err || (err == best_err && !(h & 1) && (best & 1))) {
      best = static_cast<uint16_t>(h);
      best_err = err;
    }
  }
  // 65520 = the largest half (65504) plus half its last step rounds up, to infinity.
  if (std::fabs(v) >= 65520) return (f < 0 ? 0x8000 : 0) | 0x7c00;
  return best | (f < 0 ? 0x8000 : 0);  // the sign is kept, also by a zero
}

}  // namespace

TEST_CASE("every half converts to a float and back to itself") {
  for (uint32_t h = 0; h < 0x10000; h++) {
    const uint16_t half = static_cast<uint16_t>(h);
    const float f = HalfToFloat(half);
    if (((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff)) {
      CHECK(std::isnan(f));
      CHECK(((FloatToHalf(f) >> 10) & 0x1f) == 0x1f);
      CHECK((FloatToHalf(f) & 0x3ff) != 0);  // still a NaN
      continue;
    }
    CHECK(FloatToHalf(f) == half);
  }
  CHECK(HalfToFloat(0x3c00) == 1.0f);
  CHECK(HalfToFloat(0x7bff) == 65504.0f);
  CHECK(HalfToFloat(0x0001) == std::ldexp(1.0f, -24));  // the smallest subnormal
  CHECK(HalfToFloat(0x8000) == 0.0f);
  CHECK(std::signbit(HalfToFloat(0x8000)));
}

TEST_CASE("a run of halves converts as each half does, at any length and alignment") {
  // Every half, little-endian, one byte into the buffer so that no load is aligned.
  std::vector<char> bytes(1 + 2 * 0x10000);
  for (uint32_t h = 0; h < 0x10000; h++) {
    bytes[1 + 2 * h] = static_cast<char>(h & 0xff);
    bytes[2 + 2 * h] = static_cast<char>(h >> 8);
  }
  auto same = [](float got, uint16_t h) {
    const float want = HalfToFloat(h);
    return std::isnan(want) ? std::isnan(got) : Bits(got) == Bits(want);
  };
  for (auto convert : {&HalfsToFloats, &HalfsToFloatsPortable}) {
    std::vector<float> out(0x10000 + 1, -7.0f);
    convert(bytes.data() + 1, 0x10000, out.data());
    size_t wrong = 0;
    for (uint32_t h = 0; h < 0x10000; h++) wrong += !same(out[h], static_cast<uint16_t>(h));
    CHECK(wrong == 0);
    CHECK(out[0x10000] == -7.0f);  // nothing written past n
    // Short runs and tails at each length up to two vectors' worth.
    for (size_t n = 0; n <= 17; n++) {
      for (size_t at : {size_t{0}, size_t{0x3bf5}, size_t{0x7bf0}}) {
        std::vector<float> part(n + 1, -7.0f);
        convert(bytes.data() + 1 + 2 * at, n, part.data());
        for (size_t i = 0; i < n; i++) CHECK(same(part[i], static_cast<uint16_t>(at + i)));
        CHECK(part[n] == -7.0f);
      }
    }
  }
}

TEST_CASE("a float converts to the nearest half, ties to even, and past 65504 to infinity") {
  const float cases[] = {0.1f, -0.3333f, 1.0009765625f, 1.00048828125f /* a tie: to 1.0 */,
                         1.00146484375f /* a tie: to 1.001953125 */, 65504.0f, 65519.9f,
                         65520.0f, -70000.0f, 1e-8f, 2.98e-8f, 2.9802322e-8f /* 2^-25: to 0 */,
                         3.0e-8f, 6.0e-8f, 6.1e-5f, 6.097555e-5f, 1e30f, -1e-30f,
                         std::numeric_limits<float>::infinity()};
  for (float f : cases) {
    CAPTURE(f);
    if (std::isinf(f)) {
      CHECK(FloatToHalf(f) == 0x7c00);
      continue;
    }
    CHECK(FloatToHalf(f) == NearestHalf(f));
  }
  // A sweep over float bit patterns of magnitudes a half covers.
  for (uint32_t x = 0x33000000; x < 0x477fe000; x += 0x1357) {  // up to 65504
    float f;
    std::memcpy(&f, &x, 4);
    CAPTURE(f);
    const uint16_t h = FloatToHalf(f);
    const float back = HalfToFloat(h);
    // Within half a step of the result, and never a worse half than a neighbour.
    const float up = HalfToFloat(static_cast<uint16_t>(h + 1));
    CHECK(std::fabs(back - f) <= std::fabs(up - f));
    if ((h & 0x7fff) != 0) {
      const float down = HalfToFloat(static_cast<uint16_t>(h - 1));
      CHECK(std::fabs(back - f) <= std::fabs(down - f));
    }
    CHECK(Bits(RoundToHalf(f)) == Bits(back));
  }
}

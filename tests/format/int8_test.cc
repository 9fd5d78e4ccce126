// tests/format/int8_test.cc -- int8 vector quantization (format/int8.h).
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "format/int8.h"

using namespace agentmem::format;

namespace {

uint32_t Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}

// The bytes an int8 record stores for v: the scale, then the components.
std::string Stored(const std::vector<float>& v) {
  const float scale = Int8Scale(v);
  std::string out(kInt8ScaleBytes + v.size(), '\0');
  const uint32_t bits = Bits(scale);
  for (int i = 0; i < 4; i++) out[i] = static_cast<char>(bits >> (8 * i));
  Int8Quantize(v, scale, reinterpret_cast<int8_t*>(out.data() + kInt8ScaleBytes));
  return out;
}

std::vector<float> RandomVector(std::mt19937_64& rng, size_t dim, float magnitude) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(dim);
  for (float& f : v) f = u(rng) * magnitude;
  return v;
}

}  // namespace

TEST_CASE("an int8 vector reads back as RoundToInt8 gives it, within half a step, and rounds to itself again") {
  std::mt19937_64 rng(8);
  for (float magnitude : {1e-30f, 3e-7f, 0.05f, 1.0f, 77.0f, 1e20f, 1e36f}) {
    for (size_t dim : {size_t{1}, size_t{3}, size_t{384}}) {
      CAPTURE(magnitude);
      CAPTURE(dim);
      for (int t = 0; t < 50; t++) {
        const std::vector<float> v = RandomVector(rng, dim, magnitude);
        const float scale = Int8Scale(v);
        REQUIRE(std::isfinite(scale));
        const std::string stored = Stored(v);
        std::vector<float> read(dim, -1.0f);
        REQUIRE(Int8ToFloats(stored.data(), dim, read.data()));
        std::vector<float> rounded = v;
        REQUIRE(RoundToInt8(rounded));
        float largest = 0;
        for (size_t i = 0; i < dim; i++) {
          CHECK(Bits(read[i]) == Bits(rounded[i]));
          CHECK(std::fabs(static_cast<double>(read[i]) - v[i]) <= 0.5001 * scale);
          largest = std::fmax(largest, std::fabs(read[i]));
        }
        CHECK(largest == 127.0f * scale);  // the largest component uses the full range
        // Idempotent: the bytes of the read-back vector are the same bytes.
        CHECK(Stored(read) == stored);
        std::vector<float> again = rounded;
        REQUIRE(RoundToInt8(again));
        for (size_t i = 0; i < dim; i++) CHECK(Bits(again[i]) == Bits(rounded[i]));
      }
    }
  }
}

TEST_CASE("an int8 scale is the smallest float whose 127 multiple reaches the largest component") {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> u(-40.0f, 40.0f);
  for (int t = 0; t < 20000; t++) {
    const float m = std::ldexp(1.0f + std::fabs(u(rng)) / 40.0f, static_cast<int>(u(rng)));
    const std::vector<float> v = {m * 0.5f, -m, 0.0f};
    const float s = Int8Scale(v);
    CAPTURE(m);
    CHECK(127.0f * s >= m);
    CHECK(127.0f * std::nextafter(s, 0.0f) < m);
  }
}

TEST_CASE("a vector too small for a normal int8 scale stores as zeros, and one near the largest float is refused") {
  std::vector<float> tiny = {FLT_MIN, -FLT_MIN * 3, 0.0f};
  CHECK(Int8Scale(tiny) == 0.0f);
  REQUIRE(RoundToInt8(tiny));
  for (float f : tiny) CHECK(f == 0.0f);
  std::vector<float> zero(4, 0.0f);
  CHECK(Stored(zero) == std::string(8, '\0'));

  std::vector<float> huge = {FLT_MAX, 1.0f};
  const std::vector<float> before = huge;
  CHECK(std::isinf(Int8Scale(huge)));
  CHECK_FALSE(RoundToInt8(huge));
  CHECK(huge == before);  // unchanged
  std::vector<float> large = {FLT_MAX / 2, -1.0f};
  CHECK(RoundToInt8(large));
  CHECK(std::isfinite(large[0]));
}

TEST_CASE("a stored int8 vector with a negative, infinite or NaN scale, an overflowing one, or a -128 component is refused") {
  const std::vector<float> v = {0.5f, -0.25f, 1.0f};
  const std::string good = Stored(v);
  std::vector<float> out(3);
  REQUIRE(Int8ToFloats(good.data(), 3, out.data()));
  auto with_scale = [&](float scale) {
    std::string s = good;
    const uint32_t bits = Bits(scale);
    for (int i = 0; i < 4; i++) s[i] = static_cast<char>(bits >> (8 * i));
    return s;
  };
  for (float scale : {-1.0f, INFINITY, -INFINITY, NAN, FLT_MAX / 100}) {
    CAPTURE(scale);
    CHECK_FALSE(Int8ToFloats(with_scale(scale).data(), 3, out.data()));
  }
  CHECK(Int8ToFloats(with_scale(0.0f).data(), 3, out.data()));
  std::string min = good;
  min[kInt8ScaleBytes + 1] = static_cast<char>(0x80);  // -128
  CHECK_FALSE(Int8ToFloats(min.data(), 3, out.data()));
}

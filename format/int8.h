// format/int8.h -- vectors stored as int8 components with one float32 scale
// (docs/format.md §5.1, vector.type int8): component i reads as q[i] * scale,
// with q[i] in -127..127 and the product rounded once, as float32.
//
// The scale is the smallest float s with fl(127 * s) >= the largest |v[i]|,
// so that a vector read back from its record quantizes to the same bytes:
// rounding is idempotent, and a VACUUM or a copy keeps every vector exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace agentmem::format {

constexpr size_t kInt8ScaleBytes = 4;

// The scale of `v` (finite components): 0 when every |v[i]| is below
// 127 * FLT_MIN (the vector then stores as zeros); infinity when 127 * scale
// would overflow (no int8 record holds such a vector).
float Int8Scale(std::span<const float> v);

// q[i] = v[i] / scale rounded to nearest, ties to even, within -127..127 (0
// for a zero scale).
void Int8Quantize(std::span<const float> v, float scale, int8_t* q);

// The floats an int8 record holds for `v`, in place (Int8Scale, Int8Quantize,
// then back). False, leaving v unchanged, when v's scale is infinite.
bool RoundToInt8(std::span<float> v);

// A stored int8 vector of n components (the scale, little-endian, then n
// bytes) into dst. False, when the scale is negative, not finite, or 127
// times it overflows, or a component is -128: no writer stores those.
bool Int8ToFloats(const char* src, size_t n, float* dst);

}  // namespace agentmem::format

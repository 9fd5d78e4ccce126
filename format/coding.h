// format/coding.h -- little-endian fixed-width and varint encoding (docs/format.md §2).
//
// Encoders append to a std::string. Decoding goes through Decoder, which is
// bounds-checked on every read: a read past the end sets the decoder's error
// flag and yields zero, so a decoder never touches memory outside its input.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace agentmem::format {

inline void PutFixed16(std::string* dst, uint16_t v) {
  char b[2] = {static_cast<char>(v), static_cast<char>(v >> 8)};
  dst->append(b, 2);
}
inline void PutFixed32(std::string* dst, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; i++) b[i] = static_cast<char>(v >> (8 * i));
  dst->append(b, 4);
}
inline void PutFixed64(std::string* dst, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; i++) b[i] = static_cast<char>(v >> (8 * i));
  dst->append(b, 8);
}
inline void EncodeFixed16(char* p, uint16_t v) {
  for (int i = 0; i < 2; i++) p[i] = static_cast<char>(v >> (8 * i));
}
inline void EncodeFixed32(char* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = static_cast<char>(v >> (8 * i));
}
inline void EncodeFixed64(char* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = static_cast<char>(v >> (8 * i));
}
inline uint16_t DecodeFixed16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint16_t>(u[0] | (u[1] << 8));
}
inline uint32_t DecodeFixed32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | u[i];
  return v;
}
inline uint64_t DecodeFixed64(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | u[i];
  return v;
}

// LEB128 unsigned varint, at most 10 bytes.
inline void PutVarint(std::string* dst, uint64_t v) {
  while (v >= 0x80) {
    dst->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  dst->push_back(static_cast<char>(v));
}
// Signed values are zigzag-encoded first.
inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}
inline void PutSignedVarint(std::string* dst, int64_t v) { PutVarint(dst, ZigZag(v)); }
inline void PutString(std::string* dst, std::string_view s) {
  PutVarint(dst, s.size());
  dst->append(s.data(), s.size());
}

// Bounds-checked reader over a byte span.
class Decoder {
 public:
  explicit Decoder(std::string_view in) : p_(in.data()), end_(in.data() + in.size()) {}

  bool failed() const { return failed_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool done() const { return p_ == end_; }

  uint8_t U8() {
    if (!Need(1)) return 0;
    return static_cast<uint8_t>(*p_++);
  }
  uint16_t Fixed16() {
    if (!Need(2)) return 0;
    uint16_t v = DecodeFixed16(p_);
    p_ += 2;
    return v;
  }
  uint32_t Fixed32() {
    if (!Need(4)) return 0;
    uint32_t v = DecodeFixed32(p_);
    p_ += 4;
    return v;
  }
  uint64_t Fixed64() {
    if (!Need(8)) return 0;
    uint64_t v = DecodeFixed64(p_);
    p_ += 8;
    return v;
  }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
      if (!Need(1)) return 0;
      uint8_t b = static_cast<uint8_t>(*p_++);
      if (shift == 63 && b > 1) return Fail();
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return Fail();
  }
  int64_t SignedVarint() { return UnZigZag(Varint()); }
  // A length-prefixed byte string; the view points into the input.
  std::string_view String() {
    uint64_t n = Varint();
    if (failed_ || !Need(n)) return {};
    std::string_view s(p_, static_cast<size_t>(n));
    p_ += n;
    return s;
  }
  std::string_view Bytes(size_t n) {
    if (!Need(n)) return {};
    std::string_view s(p_, n);
    p_ += n;
    return s;
  }

 private:
  bool Need(uint64_t n) {
    if (failed_ || n > static_cast<uint64_t>(end_ - p_)) {
      failed_ = true;
      return false;
    }
    return true;
  }
  uint64_t Fail() {
    failed_ = true;
    return 0;
  }
  const char* p_;
  const char* end_;
  bool failed_ = false;
};

}  // namespace agentmem::format

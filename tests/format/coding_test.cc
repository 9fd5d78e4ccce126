// tests/format/coding_test.cc -- fixed-width, varint and zigzag coding and the
// bounds-checked Decoder (docs/format.md §2).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "format/coding.h"
#include "tests/util/seed.h"

using namespace agentmem::format;

namespace {

std::string Bytes(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s.push_back(static_cast<char>(b));
  return s;
}

std::string Varint(uint64_t v) {
  std::string s;
  PutVarint(&s, v);
  return s;
}

// The number of bytes LEB128 needs for v: one per started group of 7 bits.
size_t VarintLength(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

// A heap copy of exactly the given bytes, so that a read one past the end is a
// heap overflow that AddressSanitizer reports.
struct ExactBuffer {
  explicit ExactBuffer(std::string_view s) : data(new char[s.size() + (s.empty() ? 1 : 0)]), size(s.size()) {
    if (!s.empty()) std::memcpy(data.get(), s.data(), s.size());
  }
  std::string_view view() const { return std::string_view(data.get(), size); }
  std::unique_ptr<char[]> data;
  size_t size;
};

}  // namespace

TEST_CASE("fixed-width integers are stored little-endian") {
  std::string s;
  PutFixed16(&s, 0x0102);
  PutFixed32(&s, 0x03040506u);
  PutFixed64(&s, 0x0708090a0b0c0d0eull);
  CHECK(s == Bytes({0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08,
                    0x07}));
  char buf[8];
  EncodeFixed16(buf, 0xbeef);
  CHECK(std::string(buf, 2) == Bytes({0xef, 0xbe}));
  EncodeFixed32(buf, 0xdeadbeefu);
  CHECK(std::string(buf, 4) == Bytes({0xef, 0xbe, 0xad, 0xde}));
  EncodeFixed64(buf, 0x0123456789abcdefull);
  CHECK(std::string(buf, 8) == Bytes({0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01}));
}

TEST_CASE("fixed-width integers round-trip at their boundary values") {
  for (uint16_t v : {uint16_t{0}, uint16_t{1}, uint16_t{0x7f}, uint16_t{0x80}, uint16_t{0xff},
                     uint16_t{0x100}, uint16_t{0x7fff}, uint16_t{0x8000}, uint16_t{0xffff}}) {
    std::string s;
    PutFixed16(&s, v);
    REQUIRE(s.size() == 2);
    CHECK(DecodeFixed16(s.data()) == v);
  }
  for (uint32_t v : {0u, 1u, 0xffu, 0x100u, 0x7fffffffu, 0x80000000u, 0xffffffffu}) {
    std::string s;
    PutFixed32(&s, v);
    REQUIRE(s.size() == 4);
    CHECK(DecodeFixed32(s.data()) == v);
    Decoder d(s);
    CHECK(d.Fixed32() == v);
    CHECK(d.done());
    CHECK_FALSE(d.failed());
  }
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{0xffffffff}, uint64_t{0x100000000},
                     uint64_t{0x7fffffffffffffff}, uint64_t{0x8000000000000000},
                     std::numeric_limits<uint64_t>::max()}) {
    std::string s;
    PutFixed64(&s, v);
    REQUIRE(s.size() == 8);
    CHECK(DecodeFixed64(s.data()) == v);
    Decoder d(s);
    CHECK(d.Fixed64() == v);
    CHECK(d.done());
  }
}

TEST_CASE("varints are LEB128: seven bits a byte, low group first, high bit means more") {
  CHECK(Varint(0) == Bytes({0x00}));
  CHECK(Varint(1) == Bytes({0x01}));
  CHECK(Varint(127) == Bytes({0x7f}));
  CHECK(Varint(128) == Bytes({0x80, 0x01}));
  CHECK(Varint(300) == Bytes({0xac, 0x02}));
  CHECK(Varint(16383) == Bytes({0xff, 0x7f}));
  CHECK(Varint(16384) == Bytes({0x80, 0x80, 0x01}));
  CHECK(Varint(std::numeric_limits<uint64_t>::max()) ==
        Bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
}

TEST_CASE("varints round-trip on both sides of every 7-bit boundary") {
  std::vector<uint64_t> values = {0, std::numeric_limits<uint64_t>::max()};
  for (int bits = 1; bits < 64; bits++) {
    uint64_t p = uint64_t{1} << bits;
    values.insert(values.end(), {p - 1, p, p + 1});
  }
  for (uint64_t v : values) {
    CAPTURE(v);
    std::string s = Varint(v);
    CHECK(s.size() == VarintLength(v));
    CHECK(s.size() <= 10);
    Decoder d(s);
    CHECK(d.Varint() == v);
    CHECK_FALSE(d.failed());
    CHECK(d.done());
  }
}

TEST_CASE("zigzag maps signed values of small magnitude to small codes") {
  CHECK(ZigZag(0) == 0);
  CHECK(ZigZag(-1) == 1);
  CHECK(ZigZag(1) == 2);
  CHECK(ZigZag(-2) == 3);
  CHECK(ZigZag(2) == 4);
  CHECK(ZigZag(std::numeric_limits<int64_t>::max()) == std::numeric_limits<uint64_t>::max() - 1);
  CHECK(ZigZag(std::numeric_limits<int64_t>::min()) == std::numeric_limits<uint64_t>::max());
  for (int64_t v = -1000; v <= 1000; v++) CHECK(UnZigZag(ZigZag(v)) == v);
}

TEST_CASE("signed varints round-trip the extreme int64 values") {
  const int64_t lo = std::numeric_limits<int64_t>::min();
  const int64_t hi = std::numeric_limits<int64_t>::max();
  for (int64_t v : {lo, lo + 1, int64_t{-1767225600000000}, int64_t{-64}, int64_t{-63},
                    int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64},
                    int64_t{1767225600000000}, hi - 1, hi}) {
    CAPTURE(v);
    std::string s;
    PutSignedVarint(&s, v);
    Decoder d(s);
    CHECK(d.SignedVarint() == v);
    CHECK(d.done());
    CHECK_FALSE(d.failed());
  }
  std::string one_byte;
  PutSignedVarint(&one_byte, -64);
  CHECK(one_byte.size() == 1);  // zigzag keeps small negatives short
}

TEST_CASE("a varint that overflows 64 bits or runs past ten bytes fails") {
  // ten bytes whose last carries a bit beyond bit 63
  std::string over = Bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02});
  Decoder d1(over);
  CHECK(d1.Varint() == 0);
  CHECK(d1.failed());
  // eleven bytes with the continuation bit set on the first ten
  std::string longer = Bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x81, 0x00});
  Decoder d2(longer);
  d2.Varint();
  CHECK(d2.failed());
  // the largest value is accepted
  std::string max = Bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
  Decoder d3(max);
  CHECK(d3.Varint() == std::numeric_limits<uint64_t>::max());
  CHECK_FALSE(d3.failed());
}

TEST_CASE("a non-shortest varint is still read as its value") {
  // Writers always emit the shortest form (docs/format.md §2); readers accept
  // padded forms, so this is a property of the reader, not of the writer.
  std::string padded = Bytes({0x81, 0x80, 0x00});
  Decoder d(padded);
  CHECK(d.Varint() == 1);
  CHECK(d.done());
  CHECK_FALSE(d.failed());
}

TEST_CASE("strings are a varint length followed by the bytes") {
  std::string s;
  PutString(&s, "");
  PutString(&s, "abc");
  PutString(&s, std::string(200, 'x'));
  CHECK(s.substr(0, 5) == Bytes({0x00, 0x03, 'a', 'b', 'c'}));
  CHECK(s.substr(5, 2) == Bytes({0xc8, 0x01}));
  Decoder d(s);
  CHECK(d.String().empty());
  CHECK(d.String() == "abc");
  CHECK(d.String() == std::string(200, 'x'));
  CHECK(d.done());
  CHECK_FALSE(d.failed());
}

TEST_CASE("a string whose length exceeds the input fails without reading it") {
  std::string s = Varint(std::numeric_limits<uint64_t>::max() / 2);
  s += "abc";
  ExactBuffer buf(s);
  Decoder d(buf.view());
  CHECK(d.String().empty());
  CHECK(d.failed());
}

TEST_CASE("once a decoder has failed every later read yields zero and it stays failed") {
  std::string s;
  PutFixed32(&s, 7);
  Decoder d(std::string_view(s).substr(0, 3));
  CHECK(d.Fixed32() == 0);
  CHECK(d.failed());
  CHECK(d.U8() == 0);
  CHECK(d.Varint() == 0);
  CHECK(d.Fixed64() == 0);
  CHECK(d.String().empty());
  CHECK(d.Bytes(1).empty());
  CHECK(d.failed());
}

TEST_CASE("a decoder over a truncated input fails at every length and never reads past the end") {
  std::string s;
  s.push_back('\x42');
  PutFixed32(&s, 0xa1b2c3d4u);
  PutFixed64(&s, 0x0102030405060708ull);
  PutVarint(&s, std::numeric_limits<uint64_t>::max());
  PutSignedVarint(&s, std::numeric_limits<int64_t>::min());
  PutString(&s, "hello, world");
  s += "tail";

  auto read_all = [](std::string_view in, bool* ok) {
    Decoder d(in);
    uint8_t a = d.U8();
    uint32_t b = d.Fixed32();
    uint64_t c = d.Fixed64();
    uint64_t e = d.Varint();
    int64_t f = d.SignedVarint();
    std::string_view g = d.String();
    std::string_view h = d.Bytes(4);
    *ok = !d.failed() && d.done();
    return a == 0x42 && b == 0xa1b2c3d4u && c == 0x0102030405060708ull &&
           e == std::numeric_limits<uint64_t>::max() &&
           f == std::numeric_limits<int64_t>::min() && g == "hello, world" && h == "tail";
  };

  bool ok = false;
  CHECK(read_all(s, &ok));
  CHECK(ok);
  for (size_t n = 0; n < s.size(); n++) {
    CAPTURE(n);
    ExactBuffer buf(std::string_view(s).substr(0, n));
    bool prefix_ok = true;
    read_all(buf.view(), &prefix_ok);
    CHECK_FALSE(prefix_ok);
    Decoder d(buf.view());
    d.U8();
    d.Fixed32();
    d.Fixed64();
    d.Varint();
    d.SignedVarint();
    d.String();
    d.Bytes(4);
    CHECK(d.failed());
  }
}

TEST_CASE("a random sequence of values round-trips through the encoders and the decoder") {
  std::mt19937_64 rng(agentmem::test::Seed());
  for (int round = 0; round < 200; round++) {
    std::vector<int> kinds;
    std::vector<uint64_t> values;
    std::vector<std::string> strings;
    std::string s;
    int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; i++) {
      int kind = static_cast<int>(rng() % 5);
      // Spread values over every magnitude, not just large ones.
      uint64_t v = rng() >> (rng() % 64);
      kinds.push_back(kind);
      values.push_back(v);
      switch (kind) {
        case 0: PutFixed32(&s, static_cast<uint32_t>(v)); break;
        case 1: PutFixed64(&s, v); break;
        case 2: PutVarint(&s, v); break;
        case 3: PutSignedVarint(&s, static_cast<int64_t>(v)); break;
        case 4: {
          std::string str(v % 300, '\0');
          for (char& c : str) c = static_cast<char>(rng());
          strings.push_back(str);
          PutString(&s, str);
          break;
        }
      }
    }
    Decoder d(s);
    size_t next_string = 0;
    for (int i = 0; i < n; i++) {
      uint64_t v = values[i];
      switch (kinds[i]) {
        case 0: CHECK(d.Fixed32() == static_cast<uint32_t>(v)); break;
        case 1: CHECK(d.Fixed64() == v); break;
        case 2: CHECK(d.Varint() == v); break;
        case 3: CHECK(d.SignedVarint() == static_cast<int64_t>(v)); break;
        case 4: CHECK(d.String() == strings[next_string++]); break;
      }
    }
    CHECK_FALSE(d.failed());
    CHECK(d.done());
  }
}

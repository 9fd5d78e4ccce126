// tests/format/crc32c_test.cc -- CRC-32C known answers and masking.
#include <doctest/doctest.h>

#include <string>

#include "format/crc32c.h"

using namespace agentmem::format;

TEST_CASE("crc32c matches the standard check value and RFC 3720 vectors") {
  CHECK(Crc32c("123456789", 9) == 0xe3069283u);
  std::string zeros(32, '\0'), ones(32, '\xff');
  CHECK(Crc32c(zeros.data(), zeros.size()) == 0x8a9136aau);
  CHECK(Crc32c(ones.data(), ones.size()) == 0x62a8ab43u);
  std::string inc(32, '\0');
  for (int i = 0; i < 32; i++) inc[i] = static_cast<char>(i);
  CHECK(Crc32c(inc.data(), inc.size()) == 0x46dd794eu);
}

TEST_CASE("crc32c extended in pieces equals crc32c of the whole") {
  std::string s = "the quick brown fox jumps over the lazy dog, again and again";
  for (size_t cut = 0; cut <= s.size(); cut++) {
    uint32_t a = Crc32cExtend(Crc32c(s.data(), cut), s.data() + cut, s.size() - cut);
    CHECK(a == Crc32c(s.data(), s.size()));
  }
}

TEST_CASE("masking a crc is reversible and changes the value") {
  for (uint32_t c : {0u, 1u, 0xe3069283u, 0xffffffffu}) {
    CHECK(UnmaskCrc(MaskCrc(c)) == c);
    CHECK(MaskCrc(c) != c);
  }
}

TEST_CASE("crc32c by table and by the crc32 instruction agree at every length, alignment and split") {
  // Past three 4 KiB stripes (and then three 256-byte ones) the hardware
  // path checksums three runs at once and joins them; the table path is the
  // one CPUs without SSE4.2 take.
  std::string s(5 * 12288 + 64, '\0');
  uint32_t x = 0x9e3779b9u;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  CHECK(Crc32cExtendPortable(0, "123456789", 9) == 0xe3069283u);
  for (size_t n : {0, 1, 7, 8, 9, 767, 768, 769, 1536 + 8, 3200, 4095, 12287, 12288, 12289, 12288 + 8,
                   12288 + 768 + 5, 24576 + 13, 5 * 12288 + 64}) {
    for (size_t at : {0, 1, 3}) {
      if (at + n > s.size()) continue;
      CAPTURE(n);
      CAPTURE(at);
      const uint32_t whole = Crc32c(s.data() + at, n);
      CHECK(Crc32cExtendPortable(0, s.data() + at, n) == whole);
      const size_t cut = n / 3;
      CHECK(Crc32cExtend(Crc32cExtendPortable(0, s.data() + at, cut), s.data() + at + cut, n - cut) == whole);
      CHECK(Crc32cExtendPortable(Crc32c(s.data() + at, cut), s.data() + at + cut, n - cut) == whole);
    }
  }
  // Known answers over joined stripes (from a bit-at-a-time reference):
  // 3 x 4 KiB of zeros; 40,000 bytes i % 251.
  std::string zeros(12288, '\0'), ramp(40000, '\0');
  for (size_t i = 0; i < ramp.size(); i++) ramp[i] = static_cast<char>(i % 251);
  for (auto crc : {Crc32c, +[](const void* p, size_t n) { return Crc32cExtendPortable(0, p, n); }}) {
    CHECK(crc(zeros.data(), zeros.size()) == 0x214c1a65u);
    CHECK(crc(ramp.data(), ramp.size()) == 0x68608d15u);
  }
  MESSAGE("hardware crc32c in use: " << (Crc32cHardware() ? "yes" : "no"));
}

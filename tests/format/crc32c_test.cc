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

// tests/index/text/unicode_test.cc -- UTF-8 decoding, case folding and word
// classification of index/text/unicode.h.
#include "index/text/unicode.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace agentmem::index {
namespace {

std::vector<char32_t> DecodeAll(std::string_view s) {
  std::vector<char32_t> out;
  size_t pos = 0;
  while (pos < s.size()) out.push_back(DecodeUtf8(s, &pos));
  return out;
}

std::string Utf8(char32_t c) {
  std::string s;
  AppendUtf8(c, &s);
  return s;
}

TEST_CASE("every Unicode scalar value survives an encode then decode round trip") {
  for (char32_t c = 0; c <= 0x10FFFF; c++) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    std::string s = Utf8(c);
    size_t pos = 0;
    REQUIRE(DecodeUtf8(s, &pos) == c);
    REQUIRE(pos == s.size());
  }
}

TEST_CASE("well-formed UTF-8 of one to four bytes decodes to its code points") {
  CHECK(DecodeAll("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80") ==
        std::vector<char32_t>{U'a', 0xE9, 0x20AC, 0x1F600});
}

TEST_CASE("each malformed byte decodes to U+FFFD and decoding moves on by one byte") {
  CHECK(DecodeAll("\xFF") == std::vector<char32_t>{kReplacementChar});
  CHECK(DecodeAll("\x80"
                  "a") == std::vector<char32_t>{kReplacementChar, U'a'});
  // Truncated two-byte sequence at the end of the input.
  CHECK(DecodeAll("ab\xC3") == std::vector<char32_t>{U'a', U'b', kReplacementChar});
  // A lead byte followed by a non-continuation byte.
  CHECK(DecodeAll("\xC3"
                  "b") == std::vector<char32_t>{kReplacementChar, U'b'});
  // Overlong encodings of '/' and of NUL.
  CHECK(DecodeAll("\xC0\xAF") == std::vector<char32_t>{kReplacementChar, kReplacementChar});
  CHECK(DecodeAll("\xE0\x80\x80").size() == 3);
  // A UTF-16 surrogate and a value above U+10FFFF.
  CHECK(DecodeAll("\xED\xA0\x80").front() == kReplacementChar);
  CHECK(DecodeAll("\xF4\x90\x80\x80").front() == kReplacementChar);
  CHECK(DecodeAll("\xF5\x80\x80\x80").front() == kReplacementChar);
}

TEST_CASE("values that are not scalar values are encoded as U+FFFD") {
  CHECK(Utf8(0xD800) == Utf8(kReplacementChar));
  CHECK(Utf8(0x110000) == Utf8(kReplacementChar));
}

TEST_CASE("case folding lower-cases ASCII, Latin, Greek, Cyrillic and Armenian letters") {
  CHECK(FoldCase(U'A') == U'a');
  CHECK(FoldCase(U'z') == U'z');
  CHECK(FoldCase(U'7') == U'7');
  CHECK(FoldCase(0xC9) == 0xE9);      // É -> é
  CHECK(FoldCase(0xDF) == 0xDF);      // ß has no simple lower-case mapping
  CHECK(FoldCase(0x178) == 0xFF);     // Ÿ -> ÿ
  CHECK(FoldCase(0x141) == 0x142);    // Ł -> ł
  CHECK(FoldCase(0x130) == U'i');     // İ -> i
  CHECK(FoldCase(0x1C4) == 0x1C6);    // Ǆ -> ǆ
  CHECK(FoldCase(0x1C5) == 0x1C6);    // ǅ -> ǆ
  CHECK(FoldCase(0x218) == 0x219);    // Ș -> ș
  CHECK(FoldCase(0x1EA0) == 0x1EA1);  // Ạ -> ạ
  CHECK(FoldCase(0x1E9E) == 0xDF);    // ẞ -> ß
  CHECK(FoldCase(0x3A3) == 0x3C3);    // Σ -> σ
  CHECK(FoldCase(0x3C2) == 0x3C3);    // final ς -> σ
  CHECK(FoldCase(0x386) == 0x3AC);    // Ά -> ά
  CHECK(FoldCase(0x41C) == 0x43C);    // М -> м
  CHECK(FoldCase(0x401) == 0x451);    // Ё -> ё
  CHECK(FoldCase(0x490) == 0x491);    // Ґ -> ґ
  CHECK(FoldCase(0x531) == 0x561);    // Ա -> ա
  CHECK(FoldCase(0x212A) == U'k');    // Kelvin sign
  CHECK(FoldCase(0xFF21) == 0xFF41);  // fullwidth A
}

TEST_CASE("case folding leaves lower-case letters and unlisted scripts unchanged") {
  for (char32_t c : {char32_t{0xE9}, char32_t{0x101}, char32_t{0x3B1}, char32_t{0x430},
                     char32_t{0x4E2D}, char32_t{0x5D0}, char32_t{0x1F600}}) {
    CHECK(FoldCase(c) == c);
  }
  // Every folded letter stays folded (the mapping is idempotent).
  for (char32_t c = 0; c < 0x30000; c++) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    REQUIRE(FoldCase(FoldCase(c)) == FoldCase(c));
  }
}

TEST_CASE("letters and digits of any script are word characters, punctuation is not") {
  for (char32_t c : {U'a', U'0', char32_t{0xE9}, char32_t{0xDF}, char32_t{0x3C3}, char32_t{0x43C},
                     char32_t{0x4E2D}, char32_t{0x301}, char32_t{0x661}}) {
    CHECK(IsWordChar(c));
  }
  for (char32_t c : {U' ', U'-', U'\'', char32_t{0xA0}, char32_t{0xAB}, char32_t{0x2019},
                     char32_t{0x2014}, char32_t{0x2026}, char32_t{0x200D}, char32_t{0x2764},
                     char32_t{0xFE0F}, char32_t{0x1F44D}, char32_t{0x3002}, kReplacementChar}) {
    CHECK_FALSE(IsWordChar(c));
  }
}

TEST_CASE("the ascii alphabet's word characters are exactly [a-z0-9]") {
  int count = 0;
  for (char32_t c = 0; c < 0x300; c++) count += IsAsciiWordChar(c) ? 1 : 0;
  CHECK(count == 36);
  CHECK_FALSE(IsAsciiWordChar(U'A'));
  CHECK_FALSE(IsAsciiWordChar(0xE9));
}

}  // namespace
}  // namespace agentmem::index

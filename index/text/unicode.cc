// index/text/unicode.cc -- UTF-8 decoding, the "unicode-v1" lower-case table
// and the separator table (see unicode.h).
//
// The case table was written from the Unicode 14 simple lower-case mappings of
// the blocks named in unicode.h, compressed into ranges. A range either maps
// every code point by a constant delta, or (pairs) maps every other code point
// starting at `first` to its successor, the layout Unicode uses for most
// European alphabets (upper case even, lower case odd, or the reverse).
#include "index/text/unicode.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace agentmem::index {
namespace {

struct CaseRange {
  char32_t first;
  char32_t last;
  int32_t delta;  // added to the code point; 1 for pair ranges
  bool pairs;     // true: only first, first+2, first+4, ... are mapped
};

// Sorted by `first`; ranges do not overlap.
// clang-format off
constexpr CaseRange kCaseRanges[] = {
    {0x00C0, 0x00D6, 32, false},     {0x00D8, 0x00DE, 32, false},
    {0x0100, 0x012F, 1, true},       {0x0130, 0x0130, -199, false},  // İ -> i
    {0x0132, 0x0137, 1, true},       {0x0139, 0x0148, 1, true},
    {0x014A, 0x0177, 1, true},       {0x0178, 0x0178, -121, false},
    {0x0179, 0x017E, 1, true},       {0x0181, 0x0181, 210, false},
    {0x0182, 0x0185, 1, true},       {0x0186, 0x0186, 206, false},
    {0x0187, 0x0187, 1, false},      {0x0189, 0x018A, 205, false},
    {0x018B, 0x018B, 1, false},      {0x018E, 0x018E, 79, false},
    {0x018F, 0x018F, 202, false},    {0x0190, 0x0190, 203, false},
    {0x0191, 0x0191, 1, false},      {0x0193, 0x0193, 205, false},
    {0x0194, 0x0194, 207, false},    {0x0196, 0x0196, 211, false},
    {0x0197, 0x0197, 209, false},    {0x0198, 0x0198, 1, false},
    {0x019C, 0x019C, 211, false},    {0x019D, 0x019D, 213, false},
    {0x019F, 0x019F, 214, false},    {0x01A0, 0x01A5, 1, true},
    {0x01A6, 0x01A6, 218, false},    {0x01A7, 0x01A7, 1, false},
    {0x01A9, 0x01A9, 218, false},    {0x01AC, 0x01AC, 1, false},
    {0x01AE, 0x01AE, 218, false},    {0x01AF, 0x01AF, 1, false},
    {0x01B1, 0x01B2, 217, false},    {0x01B3, 0x01B6, 1, true},
    {0x01B7, 0x01B7, 219, false},    {0x01B8, 0x01B8, 1, false},
    {0x01BC, 0x01BC, 1, false},      {0x01C4, 0x01C4, 2, false},
    {0x01C5, 0x01C5, 1, false},      {0x01C7, 0x01C7, 2, false},
    {0x01C8, 0x01C8, 1, false},      {0x01CA, 0x01CA, 2, false},
    {0x01CB, 0x01DC, 1, true},       {0x01DE, 0x01EF, 1, true},
    {0x01F1, 0x01F1, 2, false},      {0x01F2, 0x01F5, 1, true},
    {0x01F6, 0x01F6, -97, false},    {0x01F7, 0x01F7, -56, false},
    {0x01F8, 0x021F, 1, true},       {0x0220, 0x0220, -130, false},
    {0x0222, 0x0233, 1, true},       {0x023A, 0x023A, 10795, false},
    {0x023B, 0x023B, 1, false},      {0x023D, 0x023D, -163, false},
    {0x023E, 0x023E, 10792, false},  {0x0241, 0x0241, 1, false},
    {0x0243, 0x0243, -195, false},   {0x0244, 0x0244, 69, false},
    {0x0245, 0x0245, 71, false},     {0x0246, 0x024F, 1, true},
    {0x0370, 0x0373, 1, true},       {0x0376, 0x0376, 1, false},
    {0x037F, 0x037F, 116, false},    {0x0386, 0x0386, 38, false},
    {0x0388, 0x038A, 37, false},     {0x038C, 0x038C, 64, false},
    {0x038E, 0x038F, 63, false},     {0x0391, 0x03A1, 32, false},
    {0x03A3, 0x03AB, 32, false},     {0x03C2, 0x03C2, 1, false},  // ς -> σ (folding)
    {0x03CF, 0x03CF, 8, false},      {0x03D8, 0x03EF, 1, true},
    {0x03F4, 0x03F4, -60, false},    {0x03F7, 0x03F7, 1, false},
    {0x03F9, 0x03F9, -7, false},     {0x03FA, 0x03FA, 1, false},
    {0x03FD, 0x03FF, -130, false},   {0x0400, 0x040F, 80, false},
    {0x0410, 0x042F, 32, false},     {0x0460, 0x0481, 1, true},
    {0x048A, 0x04BF, 1, true},       {0x04C0, 0x04C0, 15, false},
    {0x04C1, 0x04CE, 1, true},       {0x04D0, 0x052F, 1, true},
    {0x0531, 0x0556, 48, false},     {0x1E00, 0x1E95, 1, true},
    {0x1E9E, 0x1E9E, -7615, false},  {0x1EA0, 0x1EFF, 1, true},
    {0x2126, 0x2126, -7517, false},  {0x212A, 0x212A, -8383, false},
    {0x212B, 0x212B, -8262, false},  {0x2132, 0x2132, 28, false},
    {0xFF21, 0xFF3A, 32, false},
};
// clang-format on

// Non-ASCII code points that separate words. Sorted by `first`; inclusive.
struct CodeRange {
  char32_t first;
  char32_t last;
};
// clang-format off
constexpr CodeRange kSeparatorRanges[] = {
    {0x0080, 0x00A9},    // C1 controls, NBSP, Latin-1 punctuation and symbols
    {0x00AB, 0x00B4},    // « ¬ soft hyphen ® ¯ ° ± ² ³ ´
    {0x00B6, 0x00B9},    // ¶ · ¸ ¹
    {0x00BB, 0x00BF},    // » ¼ ½ ¾ ¿
    {0x00D7, 0x00D7},    // ×
    {0x00F7, 0x00F7},    // ÷
    {0x02C2, 0x02C5},    // modifier arrowheads
    {0x02D2, 0x02DF},    // modifier symbols: breve, dot, ring, ogonek, tilde, ...
    {0x02E5, 0x02EB},    // tone letters
    {0x02ED, 0x02ED},    // unaspirated
    {0x02EF, 0x02FF},    // modifier symbols
    {0x0374, 0x0375},    // Greek numeral signs
    {0x037E, 0x037E},    // Greek question mark
    {0x0384, 0x0385},    // Greek tonos, dialytika tonos
    {0x0387, 0x0387},    // Greek ano teleia
    {0x03F6, 0x03F6},    // Greek reversed lunate epsilon symbol
    {0x0482, 0x0482},    // Cyrillic thousands sign
    {0x055A, 0x055F},    // Armenian punctuation
    {0x0589, 0x058A},    // Armenian full stop, hyphen
    {0x05BE, 0x05BE},    // Hebrew maqaf
    {0x05C0, 0x05C0},    // Hebrew paseq
    {0x05C3, 0x05C3},    // Hebrew sof pasuq
    {0x05C6, 0x05C6},    // Hebrew nun hafukha
    {0x05F3, 0x05F4},    // Hebrew geresh, gershayim
    {0x060C, 0x060D},    // Arabic comma, date separator
    {0x061B, 0x061B},    // Arabic semicolon
    {0x061F, 0x061F},    // Arabic question mark
    {0x066A, 0x066D},    // Arabic percent, decimal and thousands separators, star
    {0x06D4, 0x06D4},    // Arabic full stop
    {0x0964, 0x0965},    // Devanagari danda, double danda
    {0x0E3F, 0x0E3F},    // Thai baht sign
    {0x0E4F, 0x0E4F},    // Thai fongman
    {0x0E5A, 0x0E5B},    // Thai angkhankhu, khomut
    {0x0F04, 0x0F12},    // Tibetan punctuation
    {0x0F14, 0x0F14},    // Tibetan gter tsheg
    {0x104A, 0x104F},    // Myanmar punctuation
    {0x1360, 0x1368},    // Ethiopic punctuation
    {0x1680, 0x1680},    // Ogham space mark
    {0x17D4, 0x17D6},    // Khmer punctuation
    {0x17D8, 0x17DB},    // Khmer punctuation, riel sign
    {0x1800, 0x180A},    // Mongolian punctuation
    {0x180E, 0x180E},    // Mongolian vowel separator
    {0x2000, 0x2BFF},    // spaces, ZWJ/ZWNJ, punctuation, super/subscripts, currency,
                         // letterlike, number forms, arrows, math, technical, box
                         // drawing, shapes, symbols, dingbats, braille
    {0x2E00, 0x2E7F},    // supplemental punctuation
    {0x2E80, 0x2FFF},    // CJK radicals, Kangxi radicals, ideographic description
    {0x3000, 0x3004},    // ideographic space, comma, full stop, ditto, JIS mark
    {0x3008, 0x3020},    // CJK brackets, postal marks
    {0x3030, 0x3030},    // wavy dash
    {0x303D, 0x303F},    // part alternation mark, half fill space
    {0x30FB, 0x30FB},    // katakana middle dot
    {0x3200, 0x33FF},    // enclosed CJK letters, CJK compatibility squares
    {0x4DC0, 0x4DFF},    // Yijing hexagram symbols
    {0xD800, 0xF8FF},    // surrogates (never decoded) and private use
    {0xFE00, 0xFE0F},    // variation selectors
    {0xFE10, 0xFE1F},    // vertical forms
    {0xFE30, 0xFE6F},    // CJK compatibility forms, small form variants
    {0xFEFF, 0xFEFF},    // zero width no-break space (BOM)
    {0xFF00, 0xFF0F},    // fullwidth punctuation
    {0xFF1A, 0xFF20},    // fullwidth punctuation
    {0xFF3B, 0xFF40},    // fullwidth punctuation
    {0xFF5B, 0xFF65},    // fullwidth and halfwidth punctuation
    {0xFFE0, 0xFFEE},    // fullwidth and halfwidth signs
    {0xFFF0, 0xFFFF},    // specials, including U+FFFD (malformed UTF-8)
    {0x1D000, 0x1D24F},  // musical symbols
    {0x1F000, 0x1FBFF},  // game symbols, enclosed, pictographs, emoji, legacy computing
    {0xE0000, 0xE0FFF},  // tags, variation selectors supplement
    {0xF0000, 0x10FFFF}, // supplementary private use
};
// clang-format on

// The last range whose `first` is <= c, or end when there is none.
template <typename Range, size_t N>
const Range* FindRange(const Range (&table)[N], char32_t c) {
  const Range* it = std::upper_bound(std::begin(table), std::end(table), c,
                                     [](char32_t v, const Range& r) { return v < r.first; });
  if (it == std::begin(table)) return std::end(table);
  --it;
  return c <= it->last ? it : std::end(table);
}

bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

}  // namespace

char32_t DecodeUtf8(std::string_view text, size_t* pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = *pos;
  unsigned char b0 = s[i];
  *pos = i + 1;  // the answer for every malformed sequence
  if (b0 < 0x80) return b0;
  int len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 0;
  if (len == 0 || b0 > 0xF4 || text.size() - i < static_cast<size_t>(len)) {
    return kReplacementChar;
  }
  char32_t c = b0 & (0x7F >> len);
  for (int k = 1; k < len; k++) {
    if (!IsContinuation(s[i + k])) return kReplacementChar;
    c = (c << 6) | (s[i + k] & 0x3F);
  }
  static constexpr char32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMinForLength[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
    return kReplacementChar;
  }
  *pos = i + static_cast<size_t>(len);
  return c;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = kReplacementChar;
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

char32_t FoldCase(char32_t c) {
  if (c < 0x80) return (c >= U'A' && c <= U'Z') ? c + 32 : c;
  const CaseRange* r = FindRange(kCaseRanges, c);
  if (r == std::end(kCaseRanges)) return c;
  if (r->pairs && (c - r->first) % 2 != 0) return c;
  return static_cast<char32_t>(static_cast<int64_t>(c) + r->delta);
}

bool IsWordChar(char32_t c) {
  if (c < 0x80) return IsAsciiWordChar(c);
  return FindRange(kSeparatorRanges, c) == std::end(kSeparatorRanges);
}

}  // namespace agentmem::index

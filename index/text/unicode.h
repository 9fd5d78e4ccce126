// index/text/unicode.h -- the Unicode pieces of the tokenizer: a forgiving
// UTF-8 decoder, simple lower-case mapping, and the "is this code point part of
// a word" classification.
//
// These tables are part of the file format: the tokenizer name recorded in a
// file ("unicode-v1") promises exactly this folding and classification. Any
// change to a table must come with a new tokenizer name, never an edit in
// place, or the BM25 postings of existing files would silently stop matching.
//
// Coverage of the case mapping (Unicode simple lower-case mapping, plus one
// folding: final sigma U+03C2 becomes U+03C3 so that "ΟΔΟΣ" and "οδος" match):
//   Latin-1 Supplement, Latin Extended-A, most of Latin Extended-B, Latin
//   Extended Additional (Vietnamese), Greek and Coptic, Cyrillic and Cyrillic
//   Supplement, Armenian, fullwidth Latin letters, and the Kelvin, Ohm and
//   Angstrom signs. Every other code point maps to itself.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace agentmem::index {

// The code point that stands in for every malformed UTF-8 sequence.
inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the code point that starts at (*pos) in `text` and advances *pos
// past it. A malformed sequence (bad lead byte, truncated sequence, overlong
// form, surrogate, value above U+10FFFF) yields kReplacementChar and advances
// by exactly one byte, so decoding always makes progress and never reads
// outside `text`.
// REQUIRES: *pos < text.size().
char32_t DecodeUtf8(std::string_view text, size_t* pos);

// Appends the UTF-8 encoding of `c` to *out. Values that are not Unicode
// scalar values (surrogates, > U+10FFFF) are written as U+FFFD.
void AppendUtf8(char32_t c, std::string* out);

// The simple lower-case mapping of `c` (with final sigma folded to sigma),
// for the blocks listed in the file comment; any other code point is returned
// unchanged.
char32_t FoldCase(char32_t c);

// True when `c` (already folded) belongs to a word under the "unicode-v1"
// rules: ASCII letters and digits, and every code point >= 0x80 that is not
// in the separator table of unicode.cc. The separator table lists the
// Latin-1, general, CJK and common script punctuation, the symbol, space,
// control, emoji, variation-selector and private-use ranges; all other
// non-ASCII code points (letters of every script, combining marks, non-ASCII
// digits, and the rarer punctuation and symbols of some scripts, kept
// conservatively) count as word characters. The letter-like symbols
// U+2100..214F are separators, except the Kelvin, Ohm and Angstrom signs,
// which fold to letters first.
// Scripts written without spaces (Chinese, Japanese, Thai) therefore yield
// one token per run of characters: there is no word segmentation.
bool IsWordChar(char32_t c);

// True when `c` is one of [a-z0-9]: the word characters of the "ascii-v1"
// alphabet, which reproduces the reference tokenization of
// shared/data/bm25_baseline.py exactly.
inline bool IsAsciiWordChar(char32_t c) {
  return (c >= U'a' && c <= U'z') || (c >= U'0' && c <= U'9');
}

}  // namespace agentmem::index

// index/text/tokenizer.h -- the text tokenizer shared by BM25 and the hash
// embedder.
//
// Pipeline, per code point of the UTF-8 input:
//   1. decode; a malformed byte becomes U+FFFD (a separator), so invalid UTF-8
//      splits words but never fails or crashes;
//   2. lower-case with FoldCase() (unicode.h);
//   3. classify: a word character under the alphabet (IsWordChar() for
//      "unicode-v1", [a-z0-9] for "ascii-v1"); anything else ends the token.
// Each maximal run of word characters is a candidate token, which is then
//   4. dropped if shorter than min_token_chars or longer than max_token_chars
//      code points (max 0 = no limit);
//   5. dropped if stop_words and IsEnglishStopWord() (english.h);
//   6. stemmed with StemSnowballEnglish() if snowball, else with
//      StemEnglish() if stem.
// A query's tokens (TokenizeQuery) also drop IsEnglishQueryStopWord() words
// before stemming when query_stop_words, unless every token of the query is
// one (then none is dropped).
//
// With the default options, the tokens of an ASCII text are exactly
// re.findall(r"[a-z0-9]+", text.lower()), the reference tokenization of
// shared/data/bm25_baseline.py. The "ascii-v1" alphabet reproduces that
// reference on any text (non-ASCII letters separate words there).
//
// The options are part of the file format: ConfigString() is what a file
// records, and ParseTokenizerConfig() must accept every string it ever wrote.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/status.h"

namespace agentmem::index {

enum class Alphabet : uint8_t {
  kUnicode = 0,  // "unicode-v1": letters and digits of every script
  kAscii = 1,    // "ascii-v1": [a-z0-9] only, the bm25_baseline.py reference
};

struct TokenizerOptions {
  static constexpr uint32_t kMaxContext = 8;

  Alphabet alphabet = Alphabet::kUnicode;
  bool stem = false;        // Porter step 1 (english.h)
  bool stop_words = false;  // drop the 33 built-in English stop words
  uint32_t min_token_chars = 1;
  uint32_t max_token_chars = 0;  // 0: no limit
  bool snowball = false;          // the Snowball English stemmer (wins over stem)
  bool query_stop_words = false;  // queries drop the longer query stop list
  // Not the tokenizer's own: how many earlier episodes of the same session
  // (the conversation turns before) each episode's BM25 document also holds
  // (engine/memory/recall.h). Recorded with the tokenizer, as it shapes the index.
  uint32_t context = 0;
  // With context: the episode's own tokens count this many times in its
  // document, each context token once (1..8).
  uint32_t own_weight = 1;
  static constexpr uint32_t kMaxOwnWeight = 8;

  bool operator==(const TokenizerOptions&) const = default;
};

// The canonical, short description of `options` that a file records, e.g.
// "unicode-v1;stem=0;stop=0;min=1;max=0"; the options added later are
// appended only when set ("...;max=0;snowball=1;qstop=1;context=2;own=3"), so a
// configuration without them keeps its string.
std::string TokenizerConfigString(const TokenizerOptions& options);

// Parses a string written by TokenizerConfigString(). Keys may come in any
// order; missing keys take their defaults.
// Returns kFormatVersion for an alphabet or key this version does not know
// (a newer file), kMismatch for a malformed value, kRange when min is 0 or
// max is below min. On failure no options are returned.
Result<TokenizerOptions> ParseTokenizerConfig(std::string_view config);

// Stateless after construction; safe to use from many threads at once.
class Tokenizer {
 public:
  explicit Tokenizer(TokenizerOptions options = {}) : options_(options) {}

  const TokenizerOptions& options() const { return options_; }

  // The tokens of `text` in order, duplicates kept.
  std::vector<std::string> Tokenize(std::string_view text) const;

  // Appends the tokens of `text` to *out.
  void AppendTokens(std::string_view text, std::vector<std::string>* out) const;

  // The tokens of a query: Tokenize() less the query stop words when
  // query_stop_words (and some token is not one).
  std::vector<std::string> TokenizeQuery(std::string_view text) const;

 private:
  void Append(std::string_view text, bool query, std::vector<std::string>* out) const;
  void EmitToken(std::string* token, uint64_t chars, bool query, std::vector<std::string>* out) const;

  TokenizerOptions options_;
};

}  // namespace agentmem::index

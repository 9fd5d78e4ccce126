// tests/index/text/tokenizer_test.cc -- the tokenizer of
// index/text/tokenizer.h: the reference tokenization on real conversation
// text, Unicode folding, invalid UTF-8, stemming, stop words, length limits
// and the recorded config string.
#include "index/text/tokenizer.h"

#include <doctest/doctest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "index/text/unicode.h"
#include "tests/index/text/shared_data.h"
#include "tests/util/seed.h"

namespace agentmem::index {
namespace {

using Tokens = std::vector<std::string>;

// re.findall(r"[a-z0-9]+", text.lower()) for text whose non-ASCII characters
// do not lower-case to ASCII (true of the shared data): lower-case the ASCII
// bytes, then match the regex over bytes, where non-ASCII bytes never match.
Tokens ReferenceTokens(const std::string& text) {
  std::string lower = text;
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  static const std::regex kToken("[a-z0-9]+");
  Tokens out;
  for (auto it = std::sregex_iterator(lower.begin(), lower.end(), kToken);
       it != std::sregex_iterator(); ++it) {
    out.push_back(it->str());
  }
  return out;
}

bool IsAscii(const std::string& s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// True when `s` is valid UTF-8 without U+FFFD.
bool IsCleanUtf8(const std::string& s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (DecodeUtf8(s, &pos) == kReplacementChar) return false;
  }
  return true;
}

TEST_CASE("on every text of the shared conversations the tokens equal the reference regex") {
  std::string dir = test::SharedDataDir();
  if (dir.empty()) {
    MESSAGE("../shared/data is absent (set AGENTMEM_DATA_DIR): reference check skipped");
    return;
  }
  Tokenizer unicode;
  Tokenizer ascii(TokenizerOptions{.alphabet = Alphabet::kAscii});
  size_t ascii_texts = 0;
  size_t texts = 0;
  for (const char* set : {"locomo", "realtalk"}) {
    for (const auto& file : {"/episodes.jsonl", "/questions.jsonl"}) {
      for (const auto& row : test::ReadJsonLines(dir + "/" + set + file)) {
        std::string text = test::TextField(row, row.contains("question") ? "question" : "text");
        Tokens expected = ReferenceTokens(text);
        INFO(set << file << ": " << text);
        REQUIRE(ascii.Tokenize(text) == expected);
        if (IsAscii(text)) {
          REQUIRE(unicode.Tokenize(text) == expected);
          ascii_texts++;
        }
        texts++;
      }
    }
  }
  MESSAGE("compared " << texts << " texts with the ascii alphabet, " << ascii_texts
                      << " ASCII texts with the default alphabet");
  CHECK(texts == 4419 + 1524 + 5664 + 512);
}

TEST_CASE("default options split ASCII text on everything but letters and digits") {
  CHECK(Tokenizer().Tokenize("Hello, World! It's 2023-05-07; e-mail me@x.org") ==
        Tokens{"hello", "world", "it", "s", "2023", "05", "07", "e", "mail", "me", "x", "org"});
  CHECK(Tokenizer().Tokenize("").empty());
  CHECK(Tokenizer().Tokenize("  ...  ").empty());
}

TEST_CASE("letters of Latin, Greek and Cyrillic scripts are lower-cased and kept whole") {
  CHECK(Tokenizer().Tokenize("ÉCOLE Straße ΣΟΦΙΑ Москва") ==
        Tokens{"école", "straße", "σοφια", "москва"});
  // Final sigma folds to sigma, so both spellings of a word match.
  CHECK(Tokenizer().Tokenize("ΟΔΟΣ οδος") == Tokens{"οδοσ", "οδοσ"});
  CHECK(Tokenizer().Tokenize("İSTANBUL Łódź ǅemal ẞ") == Tokens{"istanbul", "łódź", "ǆemal", "ß"});
  CHECK(Tokenizer().Tokenize("北京欢迎你 ok") == Tokens{"北京欢迎你", "ok"});
}

TEST_CASE("Unicode punctuation, spaces and emoji separate words") {
  CHECK(Tokenizer().Tokenize("don’t stop—ever… «oui» a\u00A0b") ==
        Tokens{"don", "t", "stop", "ever", "oui", "a", "b"});
  CHECK(Tokenizer().Tokenize("I ❤️ NY👍🏽ok 🧘‍♀️yoga") ==
        Tokens{"i", "ny", "ok", "yoga"});
}

TEST_CASE("the ascii alphabet treats non-ASCII letters as separators, like the reference") {
  Tokenizer ascii(TokenizerOptions{.alphabet = Alphabet::kAscii});
  CHECK(ascii.Tokenize("Café naïve ÉCOLE") == Tokens{"caf", "na", "ve", "cole"});
}

TEST_CASE("invalid UTF-8 splits words and never fails") {
  Tokenizer t;
  CHECK(t.Tokenize("abc\xFF"
                   "def") == Tokens{"abc", "def"});
  CHECK(t.Tokenize("caf\xC3") == Tokens{"caf"});
  CHECK(t.Tokenize("x\xC0\xAFy") == Tokens{"x", "y"});
  CHECK(t.Tokenize("\xED\xA0\x80surrogate") == Tokens{"surrogate"});
  CHECK(t.Tokenize(std::string("nul\0byte", 8)) == Tokens{"nul", "byte"});
}

TEST_CASE("random bytes always give clean, non-empty UTF-8 tokens") {
  std::mt19937_64 rng(test::Seed());
  Tokenizer t(TokenizerOptions{.stem = true, .stop_words = true});
  for (int round = 0; round < 2000; round++) {
    std::string bytes(rng() % 64, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    for (const std::string& token : t.Tokenize(bytes)) {
      REQUIRE_FALSE(token.empty());
      REQUIRE(IsCleanUtf8(token));
    }
  }
}

TEST_CASE("stemming, when enabled, maps inflected forms to one stem") {
  Tokenizer t(TokenizerOptions{.stem = true});
  CHECK(t.Tokenize("The cats were RUNNING and jumped") ==
        Tokens{"the", "cat", "were", "run", "and", "jump"});
  CHECK(Tokenizer().Tokenize("cats") == Tokens{"cats"});
}

TEST_CASE("stop words, when enabled, are dropped before stemming") {
  Tokenizer t(TokenizerOptions{.stem = true, .stop_words = true});
  CHECK(t.Tokenize("The cat is on the mat, and it was happy") == Tokens{"cat", "mat", "happi"});
  // "thes" is not a stop word, even though its stem would be "the".
  CHECK(t.Tokenize("thes") == Tokens{"the"});
}

TEST_CASE("a query drops the query stop words before Snowball stemming, unless all are") {
  Tokenizer t(TokenizerOptions{.snowball = true, .query_stop_words = true});
  CHECK(t.TokenizeQuery("When did Maria donate her car?") == Tokens{"maria", "donat", "car"});
  // Documents keep them.
  CHECK(t.Tokenize("When did Maria donate her car?") ==
        Tokens{"when", "did", "maria", "donat", "her", "car"});
  // A query of stop words only keeps them all.
  CHECK(t.TokenizeQuery("Who is he?") == Tokens{"who", "is", "he"});
  // Without the option a query is tokenized as a document.
  Tokenizer plain(TokenizerOptions{.snowball = true});
  CHECK(plain.TokenizeQuery("When did she go") == plain.Tokenize("When did she go"));
}

TEST_CASE("tokens outside the length limits are dropped, counting code points") {
  Tokenizer t(TokenizerOptions{.min_token_chars = 2, .max_token_chars = 5});
  CHECK(t.Tokenize("a bb ccccc dddddd ééééé") == Tokens{"bb", "ccccc", "ééééé"});
  std::string huge(10 << 20, 'x');
  CHECK(t.Tokenize(huge + " ok").size() == 1);
}

TEST_CASE("the config string names every option and parses back to the same options") {
  CHECK(TokenizerConfigString({}) == "unicode-v1;stem=0;stop=0;min=1;max=0");
  TokenizerOptions options{Alphabet::kAscii, true, true, 2, 40};
  std::string config = TokenizerConfigString(options);
  CHECK(config == "ascii-v1;stem=1;stop=1;min=2;max=40");
  auto parsed = ParseTokenizerConfig(config);
  REQUIRE(parsed.ok());
  CHECK(*parsed == options);
  auto reordered = ParseTokenizerConfig("ascii-v1;max=40;min=2;stop=1;stem=1");
  REQUIRE(reordered.ok());
  CHECK(*reordered == options);
  auto bare = ParseTokenizerConfig("unicode-v1");
  REQUIRE(bare.ok());
  CHECK(*bare == TokenizerOptions{});
}

TEST_CASE("the later options are recorded only when set and parse back") {
  TokenizerOptions options{.snowball = true, .query_stop_words = true, .context = 2, .own_weight = 3};
  std::string config = TokenizerConfigString(options);
  CHECK(config == "unicode-v1;stem=0;stop=0;min=1;max=0;snowball=1;qstop=1;context=2;own=3");
  auto parsed = ParseTokenizerConfig(config);
  REQUIRE(parsed.ok());
  CHECK(*parsed == options);
  CHECK(ParseTokenizerConfig("unicode-v1;context=9").status().code() == kRange);
  CHECK(ParseTokenizerConfig("unicode-v1;own=0").status().code() == kRange);
  CHECK(ParseTokenizerConfig("unicode-v1;own=9").status().code() == kRange);
  CHECK(ParseTokenizerConfig("unicode-v1;snowball=2").status().code() == kMismatch);
}

TEST_CASE("an unknown tokenizer or option is refused as needing a newer version") {
  auto unknown = ParseTokenizerConfig("porter;stem=1");
  CHECK(unknown.status().code() == kFormatVersion);
  CHECK(unknown.status().message().find("porter") != std::string::npos);
  CHECK(ParseTokenizerConfig("unicode-v1;accents=0").status().code() == kFormatVersion);
}

TEST_CASE("malformed or out-of-range config values are refused") {
  for (const char* bad :
       {"unicode-v1;stem=2", "unicode-v1;stem", "unicode-v1;min=x", "unicode-v1;min=-1",
        "unicode-v1;max=99999999999", "unicode-v1;", "unicode-v1;stem=0;stem=1"}) {
    INFO(bad);
    CHECK(ParseTokenizerConfig(bad).status().code() == kMismatch);
  }
  CHECK(ParseTokenizerConfig("unicode-v1;min=0").status().code() == kRange);
  CHECK(ParseTokenizerConfig("unicode-v1;min=5;max=4").status().code() == kRange);
  CHECK(ParseTokenizerConfig("").status().code() == kFormatVersion);
}

}  // namespace
}  // namespace agentmem::index

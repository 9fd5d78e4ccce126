// tests/index/text/english_test.cc -- the Porter step 1 stemmer and the stop
// list of index/text/english.h.
#include "index/text/english.h"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

namespace agentmem::index {
namespace {

void CheckStems(const std::vector<std::pair<const char*, const char*>>& cases) {
  for (const auto& c : cases) {
    const char* word = c.first;
    INFO("word: " << word);
    CHECK(StemEnglish(word) == c.second);
  }
}

TEST_CASE("step 1a removes plural endings as Porter's examples show") {
  CheckStems({{"caresses", "caress"},
              {"ponies", "poni"},
              {"ties", "ti"},
              {"caress", "caress"},
              {"cats", "cat"}});
}

TEST_CASE("step 1b removes -eed, -ed and -ing and repairs the stem as Porter's examples show") {
  CheckStems({{"feed", "feed"},
              {"agreed", "agree"},
              {"plastered", "plaster"},
              {"bled", "bled"},
              {"motoring", "motor"},
              {"sing", "sing"},
              {"conflated", "conflate"},
              {"troubled", "trouble"},
              {"sized", "size"},
              {"hopping", "hop"},
              {"tanned", "tan"},
              {"falling", "fall"},
              {"hissing", "hiss"},
              {"fizzed", "fizz"},
              {"failing", "fail"},
              {"filing", "file"},
              {"baking", "bake"}});
}

TEST_CASE("step 1c turns a final y into i only after a vowel-bearing stem") {
  CheckStems({{"happy", "happi"}, {"sky", "sky"}, {"days", "dai"}});
}

TEST_CASE("inflected forms of one word meet on one stem") {
  for (const char* w : {"jumps", "jumped", "jumping"}) CHECK(StemEnglish(w) == "jump");
  for (const char* w : {"bakes", "baked", "baking"}) CHECK(StemEnglish(w) == "bake");
}

TEST_CASE("the stemmer leaves short, non-letter, non-ASCII and very long words alone") {
  CheckStems({{"is", "is"},
              {"as", "as"},
              {"2010s", "2010s"},
              {"cafés", "cafés"},
              {"Cats", "Cats"},
              {"", ""}});
  std::string long_word(65, 'a');
  long_word += "s";
  CHECK(StemEnglish(long_word) == long_word);
  std::string ys(64, 'y');
  CHECK(StemEnglish(ys) == std::string(63, 'y') + "i");
}

TEST_CASE("the stop list holds the 33 function words and nothing else") {
  int count = 0;
  for (const char* w :
       {"a",   "an",    "and",  "are",   "as",    "at",   "be",   "but", "by",  "for",  "if",
        "in",  "into",  "is",   "it",    "no",    "not",  "of",   "on",  "or",  "such", "that",
        "the", "their", "then", "there", "these", "they", "this", "to",  "was", "will", "with"}) {
    CHECK(IsEnglishStopWord(w));
    count++;
  }
  CHECK(count == 33);
  for (const char* w : {"", "The", "bread", "i", "you", "thee", "wit"}) {
    CHECK_FALSE(IsEnglishStopWord(w));
  }
}

TEST_CASE("the Snowball stemmer also removes derivational suffixes and keeps odd tokens") {
  for (const auto& c : std::vector<std::pair<const char*, const char*>>{
           {"running", "run"}, {"runs", "run"}, {"generously", "generous"},
           {"adoption", "adopt"}, {"adopted", "adopt"}, {"painting", "paint"},
           {"paintings", "paint"}, {"happiness", "happi"}, {"a", "a"}}) {
    const char* word = c.first;
    INFO("word: " << word);
    CHECK(StemSnowballEnglish(word) == c.second);
  }
  // Digits, capitals, non-ASCII and words longer than 64 letters are kept.
  for (const char* kept : {"2010s", "Cats", "caf\xc3\xa9s", ""}) CHECK(StemSnowballEnglish(kept) == kept);
  std::string long_word(65, 'a');
  long_word += "s";
  CHECK(StemSnowballEnglish(long_word) == long_word);
}

TEST_CASE("a word stems the same the second time, also after many other words") {
  // Words built from syllables, with endings the stemmer removes; more of
  // them than a thread keeps stems of.
  const char* const syllables[] = {"ka", "lo", "mi", "ne", "ru", "sta", "ven", "dor"};
  const char* const endings[] = {"ing", "ed", "s", "ness", "ly", "ation", ""};
  std::vector<std::string> words;
  for (const char* a : syllables) {
    for (const char* b : syllables) {
      for (const char* c : syllables) {
        for (const char* d : syllables) {
          for (const char* e : endings) words.push_back(std::string(a) + b + c + d + e);
        }
      }
    }
  }
  for (int i = 0; i < 7; i++) words.push_back(words[i * 11]);  // a few repeats within
  REQUIRE(words.size() > 3 * 8192);
  std::vector<std::string> first;
  for (int round = 0; round < 4; round++) {
    for (size_t i = 0; i < words.size(); i++) {
      const std::string stem = StemSnowballEnglish(words[i]);
      if (round == 0) first.push_back(stem);
      else CHECK(stem == first[i]);
    }
  }
  CHECK(StemSnowballEnglish("running") == "run");
  CHECK(StemSnowballEnglish("running") == "run");
  CHECK(StemSnowballEnglish("Running") == "Running");
}

TEST_CASE("the query stop list holds the built-in stop words and the question words") {
  for (const char* w : {"the", "with", "when", "what", "did", "does", "her", "his", "how",
                        "many", "s", "t", "ve", "would"}) {
    INFO(w);
    CHECK(IsEnglishQueryStopWord(w));
  }
  for (const char* w : {"car", "donate", "maria", "dinner", "mother", "2023", ""}) {
    INFO(w);
    CHECK_FALSE(IsEnglishQueryStopWord(w));
  }
  // Every word of the document stop list is a query stop word too.
  for (const char* w : {"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if",
                        "in", "into", "is", "it", "no", "not", "of", "on", "or", "such", "that",
                        "the", "their", "then", "there", "these", "they", "this", "to", "was",
                        "will", "with"}) {
    CHECK(IsEnglishQueryStopWord(w));
  }
}

}  // namespace
}  // namespace agentmem::index

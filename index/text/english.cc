// index/text/english.cc -- Porter step 1 stemming and the stop-word list (see
// english.h).
#include "index/text/english.h"

#include <libstemmer.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>

namespace agentmem::index {
namespace {

// The stop list, sorted for binary search.
constexpr std::array<std::string_view, 33> kStopWords = {
    "a",   "an",    "and",  "are",   "as",    "at",   "be",   "but", "by",  "for",  "if",
    "in",  "into",  "is",   "it",    "no",    "not",  "of",   "on",  "or",  "such", "that",
    "the", "their", "then", "there", "these", "they", "this", "to",  "was", "will", "with"};

// The query stop list, sorted for binary search.
constexpr std::array<std::string_view, 142> kQueryStopWords = {
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
    "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both",
    "but", "by", "can", "could", "d", "did", "do", "does", "doing", "down", "during", "each",
    "else", "ever", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her",
    "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is",
    "it", "its", "itself", "just", "kind", "ll", "m", "many", "me", "more", "most", "much", "my",
    "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our",
    "ours", "ourselves", "out", "over", "own", "re", "s", "same", "she", "should", "so", "some",
    "such", "t", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there",
    "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "us", "ve",
    "very", "was", "we", "were", "what", "whats", "when", "where", "which", "while", "who",
    "whom", "whose", "why", "will", "with", "would", "you", "your", "yours", "yourself",
    "yourselves"};

// Longer "words" are not English words; the bound also keeps the consonant
// test's recursion shallow.
constexpr size_t kMaxStemmedLength = 64;

// A word of up to 31 bytes and its Snowball stem: one slot of a thread's
// stem cache, a cache line. word_len 0: an empty slot.
struct StemSlot {
  uint8_t word_len = 0;
  uint8_t stem_len = 0;
  char word[31];
  char stem[31];
};
static_assert(sizeof(StemSlot) == 64);
constexpr size_t kStemSlots = 4096;  // 256 KiB per thread, made on first use

// The slot `word` goes in (one per word: a newer word takes the place of an
// older one), or nullptr when the word is too long or there is no memory.
StemSlot* StemSlotFor(std::string_view word) {
  if (word.size() > sizeof(StemSlot::word)) return nullptr;
  thread_local std::unique_ptr<StemSlot[]> slots(new (std::nothrow) StemSlot[kStemSlots]);
  if (!slots) return nullptr;
  return &slots[std::hash<std::string_view>{}(word) % kStemSlots];
}

bool IsVowelLetter(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

// Porter's consonant test on w[i]: y is a consonant at the start of the word
// and after a vowel, a vowel after a consonant.
bool IsConsonant(const std::string& w, size_t i) {
  if (IsVowelLetter(w[i])) return false;
  if (w[i] != 'y') return true;
  return i == 0 || !IsConsonant(w, i - 1);
}

// m of the first `len` letters: the number of vowel-run-then-consonant-run
// transitions in [C](VC)^m[V].
int Measure(const std::string& w, size_t len) {
  int m = 0;
  bool in_vowels = false;
  for (size_t i = 0; i < len; i++) {
    bool consonant = IsConsonant(w, i);
    if (consonant && in_vowels) m++;
    in_vowels = !consonant;
  }
  return m;
}

bool HasVowel(const std::string& w, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (!IsConsonant(w, i)) return true;
  }
  return false;
}

bool EndsWithDoubleConsonant(const std::string& w) {
  size_t n = w.size();
  return n >= 2 && w[n - 1] == w[n - 2] && IsConsonant(w, n - 1);
}

// *o: the word ends consonant-vowel-consonant and the last is not w, x or y.
bool EndsCvc(const std::string& w) {
  size_t n = w.size();
  if (n < 3) return false;
  char last = w[n - 1];
  return IsConsonant(w, n - 3) && !IsConsonant(w, n - 2) && IsConsonant(w, n - 1) && last != 'w' &&
         last != 'x' && last != 'y';
}

bool EndsWith(const std::string& w, std::string_view suffix) {
  return w.size() >= suffix.size() &&
         std::string_view(w).substr(w.size() - suffix.size()) == suffix;
}

void Step1a(std::string* w) {
  if (EndsWith(*w, "sses") || EndsWith(*w, "ies")) {
    w->resize(w->size() - 2);
  } else if (!EndsWith(*w, "ss") && EndsWith(*w, "s")) {
    w->pop_back();
  }
}

// The repairs of step 1b after "ed" or "ing" was removed.
void Step1bRepair(std::string* w) {
  if (EndsWith(*w, "at") || EndsWith(*w, "bl") || EndsWith(*w, "iz")) {
    w->push_back('e');
  } else if (EndsWithDoubleConsonant(*w)) {
    char last = w->back();
    if (last != 'l' && last != 's' && last != 'z') w->pop_back();
  } else if (Measure(*w, w->size()) == 1 && EndsCvc(*w)) {
    w->push_back('e');
  }
}

void Step1b(std::string* w) {
  if (EndsWith(*w, "eed")) {
    if (Measure(*w, w->size() - 3) > 0) w->pop_back();
    return;
  }
  for (std::string_view suffix : {std::string_view("ed"), std::string_view("ing")}) {
    if (EndsWith(*w, suffix) && HasVowel(*w, w->size() - suffix.size())) {
      w->resize(w->size() - suffix.size());
      Step1bRepair(w);
      return;
    }
  }
}

void Step1c(std::string* w) {
  if (EndsWith(*w, "y") && HasVowel(*w, w->size() - 1)) w->back() = 'i';
}

bool IsLowerAsciiWord(std::string_view word) {
  return std::all_of(word.begin(), word.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

}  // namespace

std::string StemEnglish(std::string_view word) {
  std::string w(word);
  if (w.size() < 3 || w.size() > kMaxStemmedLength || !IsLowerAsciiWord(w)) return w;
  Step1a(&w);
  Step1b(&w);
  Step1c(&w);
  return w;
}

bool IsEnglishStopWord(std::string_view word) {
  return std::binary_search(kStopWords.begin(), kStopWords.end(), word);
}

bool IsEnglishQueryStopWord(std::string_view word) {
  return std::binary_search(kQueryStopWords.begin(), kQueryStopWords.end(), word);
}

std::string StemSnowballEnglish(std::string_view word) {
  std::string w(word);
  if (w.empty() || w.size() > kMaxStemmedLength || !IsLowerAsciiWord(w)) return w;
  // The stems this thread made last: a word recurs often (and an episode
  // is tokenized again as the context of the next ones), and the Snowball
  // stemmer takes about a microsecond a word.
  StemSlot* slot = StemSlotFor(w);
  if (slot != nullptr && std::string_view(slot->word, slot->word_len) == w) {
    return std::string(slot->stem, slot->stem_len);
  }
  // A libstemmer stemmer keeps per-call state: one per thread.
  struct Deleter {
    void operator()(sb_stemmer* s) const { sb_stemmer_delete(s); }
  };
  thread_local std::unique_ptr<sb_stemmer, Deleter> stemmer(sb_stemmer_new("english", nullptr));
  if (!stemmer) return w;  // no memory for the stemmer: the word as it is
  const sb_symbol* out =
      sb_stemmer_stem(stemmer.get(), reinterpret_cast<const sb_symbol*>(w.data()), static_cast<int>(w.size()));
  if (out == nullptr) return w;
  std::string stem(reinterpret_cast<const char*>(out), static_cast<size_t>(sb_stemmer_length(stemmer.get())));
  if (slot != nullptr && stem.size() <= sizeof(StemSlot::stem)) {
    std::memcpy(slot->word, w.data(), w.size());
    slot->word_len = static_cast<uint8_t>(w.size());
    std::memcpy(slot->stem, stem.data(), stem.size());
    slot->stem_len = static_cast<uint8_t>(stem.size());
  }
  return stem;
}

}  // namespace agentmem::index

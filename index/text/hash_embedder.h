// index/text/hash_embedder.h -- "agentmem-hash-v1", the built-in deterministic
// text embedder: signed feature hashing of words, word bigrams and character
// n-grams, L2-normalised.
//
// Definition (part of the file format: any change needs a new name):
//   1. Tokens: Tokenizer with default options ("unicode-v1;stem=0;stop=0;
//      min=1;max=0"): lower-cased words of every script.
//   2. Features, each with a weight:
//        word      "w" 0x1F token                       1.0  (0.25 for a stop
//                                                             word, english.h)
//        bigram    "b" 0x1F token_i 0x1F token_i+1      0.5
//        n-gram    "c" 0x1F g, for every run g of n = 3, 4, 5 consecutive code
//                  points of "<" token ">"              0.75 each
//      Stop words and words of more than 64 code points get no n-grams.
//      (The weights were picked on a coarse grid by turn recall on the shared
//      LoCoMo/REALTALK splits: n-gram weights 0.75..1.5 form a plateau,
//      0.25 is clearly worse; bigrams and stop-word damping matter little.
//      Cosine top-k over these vectors reaches turn R@10 0.354 on LoCoMo and
//      0.373 on REALTALK, against BM25's 0.495 and 0.436: no idf, no synonyms.)
//   3. Each feature's bytes are hashed with h = StableHash64() (stable_hash.h);
//      it adds sign * weight to component h mod dimension, where sign is -1
//      when the top bit of h is set and +1 otherwise.
//   4. The vector is divided by its L2 norm and rounded to float32.
// Every weight is a multiple of 1/4, so the sums and the squared norm are
// exact in double precision whatever the order of the additions; with
// correctly rounded sqrt and division the output is bit-identical on every
// IEEE-754 platform.
//
// A text without any token embeds to the zero vector (there is no direction
// to normalise); callers that need unit vectors must handle that case.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "format/status.h"

namespace agentmem::index {

struct HashEmbedderOptions {
  uint32_t dimension = 384;
};

// Immutable after creation; safe to use from many threads at once.
class HashEmbedder {
 public:
  static constexpr std::string_view kName = "agentmem-hash-v1";
  static constexpr uint32_t kMaxDimension = 65536;

  // Returns an embedder, or kRange when the dimension is 0 or above
  // kMaxDimension.
  static Result<HashEmbedder> Create(HashEmbedderOptions options = {});

  std::string_view name() const { return kName; }
  uint32_t dimension() const { return dimension_; }

  // The embedding of `text` (any bytes; invalid UTF-8 is tolerated as by the
  // tokenizer): dimension() floats, unit L2 norm or all zero.
  std::vector<float> Embed(std::string_view text) const;

  // Writes the embedding into `out`. Returns kMismatchDimension, leaving
  // `out` untouched, when out.size() != dimension().
  Status EmbedInto(std::string_view text, std::span<float> out) const;

 private:
  explicit HashEmbedder(uint32_t dimension) : dimension_(dimension) {}

  void AddFeature(uint64_t hash, double weight, std::vector<double>* acc) const;
  void AddCharNgrams(std::string_view token, std::vector<double>* acc) const;

  uint32_t dimension_;
};

}  // namespace agentmem::index

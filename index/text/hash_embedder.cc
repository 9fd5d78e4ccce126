// index/text/hash_embedder.cc -- "agentmem-hash-v1" (see hash_embedder.h).
#include "index/text/hash_embedder.h"

#include <cmath>
#include <initializer_list>
#include <string>

#include "index/text/english.h"
#include "index/text/stable_hash.h"
#include "index/text/tokenizer.h"
#include "index/text/unicode.h"

namespace agentmem::index {
namespace {

constexpr double kWordWeight = 1.0;
constexpr double kStopWordWeight = 0.25;
constexpr double kBigramWeight = 0.5;
constexpr double kNgramWeight = 0.75;
constexpr size_t kMinNgram = 3;
constexpr size_t kMaxNgram = 5;
constexpr size_t kMaxNgramWordChars = 64;
constexpr char kSep = '\x1f';

// The hash of a feature whose bytes are `kind`, then each piece preceded by
// 0x1F.
uint64_t FeatureHash(char kind, std::initializer_list<std::string_view> pieces) {
  uint64_t h = Fnv1a64(std::string_view(&kind, 1));
  for (std::string_view piece : pieces) {
    h = Fnv1a64(piece, Fnv1a64(std::string_view(&kSep, 1), h));
  }
  return Mix64(h);
}

// Byte offsets of the code points of `s` (valid UTF-8), plus s.size().
std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  size_t pos = 0;
  while (pos < s.size()) {
    offsets.push_back(pos);
    DecodeUtf8(s, &pos);
  }
  offsets.push_back(s.size());
  return offsets;
}

}  // namespace

Result<HashEmbedder> HashEmbedder::Create(HashEmbedderOptions options) {
  if (options.dimension == 0 || options.dimension > kMaxDimension) {
    return StatusF(kRange, "%s: dimension %u is outside 1..%u", std::string(kName).c_str(),
                   options.dimension, kMaxDimension);
  }
  return HashEmbedder(options.dimension);
}

std::vector<float> HashEmbedder::Embed(std::string_view text) const {
  std::vector<float> out(dimension_);
  EmbedInto(text, out).IgnoreError();  // the size matches by construction
  return out;
}

Status HashEmbedder::EmbedInto(std::string_view text, std::span<float> out) const {
  if (out.size() != dimension_) {
    return StatusF(kMismatchDimension, "%s: output has %zu floats, the dimension is %u",
                   std::string(kName).c_str(), out.size(), dimension_);
  }
  std::vector<std::string> tokens = Tokenizer().Tokenize(text);
  std::vector<double> acc(dimension_, 0.0);
  for (size_t i = 0; i < tokens.size(); i++) {
    bool stop = IsEnglishStopWord(tokens[i]);
    AddFeature(FeatureHash('w', {tokens[i]}), stop ? kStopWordWeight : kWordWeight, &acc);
    if (i + 1 < tokens.size()) {
      AddFeature(FeatureHash('b', {tokens[i], tokens[i + 1]}), kBigramWeight, &acc);
    }
    if (!stop) AddCharNgrams(tokens[i], &acc);
  }
  double sum_sq = 0;
  for (double v : acc) sum_sq += v * v;
  const double norm = std::sqrt(sum_sq);
  for (size_t i = 0; i < acc.size(); i++) {
    out[i] = norm > 0 ? static_cast<float>(acc[i] / norm) : 0.0f;
  }
  return Status::OK();
}

void HashEmbedder::AddFeature(uint64_t hash, double weight, std::vector<double>* acc) const {
  const bool negative = (hash >> 63) != 0;
  (*acc)[hash % dimension_] += negative ? -weight : weight;
}

void HashEmbedder::AddCharNgrams(std::string_view token, std::vector<double>* acc) const {
  std::string padded;
  padded.reserve(token.size() + 2);
  padded.push_back('<');
  padded.append(token);
  padded.push_back('>');
  const std::vector<size_t> offsets = CodePointOffsets(padded);
  const size_t chars = offsets.size() - 1;
  if (chars - 2 > kMaxNgramWordChars) return;
  for (size_t n = kMinNgram; n <= kMaxNgram; n++) {
    for (size_t i = 0; i + n <= chars; i++) {
      std::string_view gram(padded.data() + offsets[i], offsets[i + n] - offsets[i]);
      AddFeature(FeatureHash('c', {gram}), kNgramWeight, acc);
    }
  }
}

}  // namespace agentmem::index

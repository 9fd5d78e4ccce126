// index/text/glove_embedder.cc -- "agentmem-glove-v1" and "-v2" (see
// glove_embedder.h).
#include "index/text/glove_embedder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "index/text/glove/linked_table.h"
#include "index/text/stable_hash.h"
#include "index/text/tokenizer.h"

namespace agentmem::index {
namespace {

constexpr char kMagic[8] = {'A', 'M', 'G', 'L', 'O', 'V', 'E', '1'};
constexpr size_t kHeaderBytes = 24;
constexpr uint32_t kMaxWords = 1u << 22;

uint32_t Le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

bool IsNumber(std::string_view token) {
  for (char c : token) {
    if (c < '0' || c > '9') return false;
  }
  return !token.empty();
}

Status Bad(const char* what) { return StatusF(kCorrupt, "GloVe table: %s", what); }

}  // namespace

Result<std::shared_ptr<const GloveTable>> GloveTable::Parse(std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return Bad("no AMGLOVE1 header");
  }
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 4 != 0) return Bad("not 4-byte aligned");
  const uint8_t* p = bytes.data();
  std::shared_ptr<GloveTable> t(new GloveTable());
  t->dim_ = Le32(p + 8);
  t->words_ = Le32(p + 12);
  t->quant_ = Le32(p + 16);
  const uint64_t blob_bytes = Le32(p + 20);
  if (t->dim_ != GloveEmbedder::kDimension) return Bad("dimension is not 100");
  if (t->words_ == 0 || t->words_ > kMaxWords) return Bad("word count out of range");
  if (t->quant_ > 1) return Bad("unknown quantisation");
  if (blob_bytes % 4 != 0) return Bad("word blob size is not a multiple of 4");
  const uint64_t n = t->words_;
  const uint64_t row_bytes = t->quant_ == 1 ? t->dim_ : 4ull * t->dim_;
  const uint64_t need = kHeaderBytes + 4 * (n + 1) + blob_bytes + (t->quant_ == 1 ? 4 * n : 0) +
                        n * row_bytes;
  if (bytes.size() != need) return Bad("size does not match its header");
  t->offsets_ = reinterpret_cast<const uint32_t*>(p + kHeaderBytes);
  t->blob_ = reinterpret_cast<const char*>(p + kHeaderBytes + 4 * (n + 1));
  const uint8_t* rows = p + kHeaderBytes + 4 * (n + 1) + blob_bytes;
  if (t->quant_ == 1) {
    t->scales_ = reinterpret_cast<const float*>(rows);
    t->rows8_ = reinterpret_cast<const int8_t*>(rows + 4 * n);
  } else {
    t->rows32_ = reinterpret_cast<const float*>(rows);
  }
  if (t->offsets_[0] != 0 || t->offsets_[n] > blob_bytes) return Bad("word offsets out of range");
  for (uint64_t i = 0; i < n; i++) {
    if (t->offsets_[i + 1] <= t->offsets_[i]) return Bad("word offsets not increasing");
  }
  uint64_t slots = 1;
  while (slots < 2 * n) slots <<= 1;
  t->slots_.assign(slots, 0);
  t->mask_ = slots - 1;
  for (uint32_t r = 0; r < t->words_; r++) {
    uint64_t h = StableHash64(t->Word(r)) & t->mask_;
    while (t->slots_[h] != 0) h = (h + 1) & t->mask_;
    t->slots_[h] = r + 1;
  }
  t->norms_.resize(n);
  for (uint32_t r = 0; r < t->words_; r++) {
    float v[GloveEmbedder::kDimension] = {};
    t->AddVector(r, 1.0f, v);
    double sum_sq = 0;
    for (float x : v) sum_sq += static_cast<double>(x) * x;
    t->norms_[r] = static_cast<float>(std::sqrt(sum_sq));
  }
  return std::shared_ptr<const GloveTable>(std::move(t));
}

bool GloveTable::HasLinked() { return !glove::LinkedTableBytes().empty(); }

Result<std::shared_ptr<const GloveTable>> GloveTable::Linked() {
  static std::once_flag once;
  static std::shared_ptr<const GloveTable> table;
  static Status status;
  std::call_once(once, [] {
    std::span<const uint8_t> bytes = glove::LinkedTableBytes();
    if (bytes.empty()) {
      status = StatusF(kNotFound, "%s is not built into this library (meson option glove_table)",
                       std::string(GloveEmbedder::kName).c_str());
      return;
    }
    auto parsed = Parse(bytes);
    if (parsed.ok()) table = parsed.value();
    else status = parsed.status();
  });
  if (!table) return status;
  return table;
}

std::string_view GloveTable::Word(uint32_t rank) const {
  return std::string_view(blob_ + offsets_[rank], offsets_[rank + 1] - offsets_[rank]);
}

int64_t GloveTable::Find(std::string_view word) const {
  uint64_t h = StableHash64(word) & mask_;
  while (slots_[h] != 0) {
    if (Word(slots_[h] - 1) == word) return slots_[h] - 1;
    h = (h + 1) & mask_;
  }
  return -1;
}

void GloveTable::AddVector(uint32_t rank, float weight, float* acc) const {
  if (rows8_ != nullptr) {
    const int8_t* row = rows8_ + static_cast<size_t>(rank) * dim_;
    const float w = weight * scales_[rank];
    for (uint32_t i = 0; i < dim_; i++) acc[i] += w * static_cast<float>(row[i]);
  } else {
    const float* row = rows32_ + static_cast<size_t>(rank) * dim_;
    for (uint32_t i = 0; i < dim_; i++) acc[i] += weight * row[i];
  }
}

GloveEmbedder::GloveEmbedder(std::shared_ptr<const GloveTable> table,
                             GloveEmbedderOptions options, HashEmbedder numbers)
    : table_(std::move(table)), options_(options), numbers_(std::move(numbers)) {
  words_ = options_.max_words == 0 || options_.max_words > table_->size() ? table_->size()
                                                                          : options_.max_words;
  if (options_.common == GloveCommon::kMeanDirection) MakeMeanDirection();
  if (options_.common == GloveCommon::kTopDirection) MakeTopDirection();
}

void GloveEmbedder::MakeMeanDirection() {
  double u[kDimension] = {};
  for (uint32_t r = 0; r < words_; r++) {
    const double w = Probability(r) * Weight(r);
    float v[kDimension] = {};
    table_->AddVector(r, 1.0f, v);
    for (uint32_t i = 0; i < kDimension; i++) u[i] += w * v[i];
  }
  double sum_sq = 0;
  for (double x : u) sum_sq += x * x;
  if (sum_sq > 0) {
    common_.resize(kDimension);
    const double norm = std::sqrt(sum_sq);
    for (uint32_t i = 0; i < kDimension; i++) common_[i] = static_cast<float>(u[i] / norm);
  }
}

void GloveEmbedder::MakeTopDirection() {
  constexpr uint32_t d = kDimension;
  double mean[d] = {};
  for (uint32_t r = 0; r < words_; r++) {
    float v[d] = {};
    table_->AddVector(r, 1.0f, v);
    for (uint32_t i = 0; i < d; i++) mean[i] += v[i];
  }
  for (double& m : mean) m /= words_;
  mean_.assign(mean, mean + d);
  // The scatter matrix of the centred vectors, upper triangle: summed in
  // float over blocks of kBlock words, the blocks added into float64, each
  // element in rank order (so the result does not depend on how the compiler
  // vectorises the loop over j).
  constexpr uint32_t kBlock = 64;
  std::vector<double> c(d * d, 0.0);
  std::vector<float> block(d * d);
  for (uint32_t start = 0; start < words_; start += kBlock) {
    std::fill(block.begin(), block.end(), 0.0f);
    const uint32_t end = std::min(words_, start + kBlock);
    for (uint32_t r = start; r < end; r++) {
      float v[d] = {};
      table_->AddVector(r, 1.0f, v);
      for (uint32_t i = 0; i < d; i++) v[i] -= mean_[i];
      for (uint32_t i = 0; i < d; i++) {
        float* row = &block[i * d];
        const float vi = v[i];
        for (uint32_t j = i; j < d; j++) row[j] += vi * v[j];
      }
    }
    for (uint32_t k = 0; k < d * d; k++) c[k] += block[k];
  }
  for (uint32_t i = 0; i < d; i++) {
    for (uint32_t j = 0; j < i; j++) c[i * d + j] = c[j * d + i];
  }
  // Power iteration from the all-ones vector: the largest eigenvalue of a
  // scatter matrix of word vectors stands well apart, so 200 rounds settle
  // every digit of a float.
  std::vector<double> x(d, 1.0), y(d);
  for (int round = 0; round < 200; round++) {
    double sum_sq = 0;
    for (uint32_t i = 0; i < d; i++) {
      double sum = 0;
      for (uint32_t j = 0; j < d; j++) sum += c[i * d + j] * x[j];
      y[i] = sum;
      sum_sq += sum * sum;
    }
    if (!(sum_sq > 0)) return;  // all vectors equal: nothing in common to remove
    const double norm = std::sqrt(sum_sq);
    for (uint32_t i = 0; i < d; i++) x[i] = y[i] / norm;
  }
  common_.resize(d);
  for (uint32_t i = 0; i < d; i++) common_[i] = static_cast<float>(x[i]);
}

double GloveEmbedder::Probability(uint32_t rank) const {
  return 1.0 / (std::pow(static_cast<double>(rank + 1), options_.zipf_exponent) * kZipfH);
}

double GloveEmbedder::Weight(uint32_t rank) const {
  const double a = options_.sif_a;
  return table_->Norm(rank) * a / (a + Probability(rank));
}

std::optional<GloveVersion> GloveEmbedder::VersionOf(std::string_view name) {
  if (name == kNameV1) return GloveVersion::kV1;
  if (name == kNameV2) return GloveVersion::kV2;
  return std::nullopt;
}

std::string_view GloveEmbedder::name() const {
  return options_.common == GloveCommon::kMeanDirection ? kNameV1 : kNameV2;
}

Result<GloveEmbedder> GloveEmbedder::Create(GloveVersion version) {
  // Made once per version: step 4 costs passes over the table.
  static std::once_flag once[2];
  static std::optional<Result<GloveEmbedder>> made[2];
  const int v = version == GloveVersion::kV1 ? 0 : 1;
  std::call_once(once[v], [version, v] {
    auto table = GloveTable::Linked();
    if (!table.ok()) made[v].emplace(table.status());
    else made[v].emplace(Create(table.value(), Options(version)));
  });
  return *made[v];
}

Result<GloveEmbedder> GloveEmbedder::Create(std::shared_ptr<const GloveTable> table,
                                            GloveEmbedderOptions options) {
  if (!table || table->dimension() != kDimension) {
    return StatusF(kMisuse, "%s: needs a table of %u dimensions", std::string(kName).c_str(),
                   kDimension);
  }
  if (!(options.sif_a > 0) || !(options.zipf_exponent > 0)) {
    return StatusF(kRange, "%s: sif_a and zipf_exponent must be positive",
                   std::string(kName).c_str());
  }
  auto numbers = HashEmbedder::Create({kDimension});
  if (!numbers.ok()) return numbers.status();
  return GloveEmbedder(std::move(table), options, std::move(numbers.value()));
}

std::vector<float> GloveEmbedder::Embed(std::string_view text) const {
  std::vector<float> out(kDimension);
  EmbedInto(text, out).IgnoreError();  // the size matches by construction
  return out;
}

Status GloveEmbedder::EmbedInto(std::string_view text, std::span<float> out) const {
  if (out.size() != kDimension) {
    return StatusF(kMismatchDimension, "%s: output has %zu floats, the dimension is %u",
                   std::string(kName).c_str(), out.size(), kDimension);
  }
  float acc[kDimension] = {};
  double total_weight = 0;
  for (const std::string& token : Tokenizer().Tokenize(text)) {
    const int64_t rank = table_->Find(token);
    if (rank < 0 || rank >= words_) {
      if (options_.number_weight > 0 && IsNumber(token)) {
        float v[kDimension];
        numbers_.EmbedInto(token, v).IgnoreError();  // kDimension floats by construction
        const float w = static_cast<float>(options_.number_weight);
        for (uint32_t i = 0; i < kDimension; i++) acc[i] += w * v[i];
      }
      continue;
    }
    const double weight = Weight(static_cast<uint32_t>(rank));
    table_->AddVector(static_cast<uint32_t>(rank), static_cast<float>(weight), acc);
    total_weight += weight;
  }
  if (!mean_.empty()) {
    const float w = static_cast<float>(total_weight);
    for (uint32_t i = 0; i < kDimension; i++) acc[i] -= w * mean_[i];
  }
  if (!common_.empty()) {
    float dot = 0;
    for (uint32_t i = 0; i < kDimension; i++) dot += acc[i] * common_[i];
    for (uint32_t i = 0; i < kDimension; i++) acc[i] -= dot * common_[i];
  }
  double sum_sq = 0;
  for (float v : acc) sum_sq += static_cast<double>(v) * v;
  const double norm = std::sqrt(sum_sq);
  for (uint32_t i = 0; i < kDimension; i++) {
    out[i] = norm > 0 ? static_cast<float>(acc[i] / norm) : 0.0f;
  }
  return Status::OK();
}

}  // namespace agentmem::index

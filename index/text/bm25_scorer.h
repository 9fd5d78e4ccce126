// index/text/bm25_scorer.h -- the BM25 term score, shared by the brute-force
// and the MaxScore top-k so that both compute bit-identical numbers.
#pragma once

#include <array>
#include <cstdint>

namespace agentmem::index {

// The score of one term in one document for a fixed k1, b and avgdl, the
// state of one query. Length normalisations of short documents are computed
// once up front: the hot loop then costs one division per posting.
class Bm25TermScorer {
 public:
  Bm25TermScorer(double k1, double b, double avgdl) : k1_(k1), b_(b), avgdl_(avgdl) {
    for (uint32_t len = 0; len < kCachedLengths; len++) norms_[len] = Norm(len);
  }

  // idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl)), with the
  // operations in the order of shared/data/bm25_baseline.py, so that the
  // scores agree with the reference to the last bit, not just to rounding.
  double Score(double idf, uint32_t tf, uint32_t doc_len) const {
    const double f = tf;
    const double norm = doc_len < kCachedLengths ? norms_[doc_len] : Norm(doc_len);
    return idf * f * (k1_ + 1) / (f + norm);
  }

 private:
  static constexpr uint32_t kCachedLengths = 256;

  double Norm(uint32_t doc_len) const {
    return avgdl_ != 0.0 ? k1_ * (1 - b_ + b_ * doc_len / avgdl_) : k1_;
  }

  double k1_;
  double b_;
  double avgdl_;
  std::array<double, kCachedLengths> norms_;
};

}  // namespace agentmem::index

// index/vector/exact_search.cc -- brute-force top-k (see exact_search.h).
#include "index/vector/exact_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "index/vector/distance.h"

namespace agentmem::index {
namespace {

// The best k seen so far, as a max-heap on (distance, id): the root is the
// worst kept hit, the one a better candidate replaces.
class TopK {
 public:
  explicit TopK(size_t k) : k_(k) { heap_.reserve(k); }

  void Offer(uint64_t id, float distance) {
    if (k_ == 0) return;
    if (std::isnan(distance)) distance = std::numeric_limits<float>::infinity();
    Neighbor n{id, distance};
    if (heap_.size() < k_) {
      heap_.push_back(n);
      std::push_heap(heap_.begin(), heap_.end(), NeighborLess);
    } else if (NeighborLess(n, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), NeighborLess);
      heap_.back() = n;
      std::push_heap(heap_.begin(), heap_.end(), NeighborLess);
    }
  }

  std::vector<Neighbor> Take() {
    std::sort_heap(heap_.begin(), heap_.end(), NeighborLess);
    return std::move(heap_);
  }

 private:
  size_t k_;
  std::vector<Neighbor> heap_;
};

// Scores one row against a prepared query.
class RowScorer {
 public:
  RowScorer(Metric metric, const float* query, size_t dim)
      : kernels_(ActiveKernels()), metric_(metric), query_(query), dim_(dim) {
    query_norm_ = std::sqrt(kernels_.dot(query, query, dim));
  }

  float operator()(const float* row) const {
    switch (metric_) {
      case Metric::kL2: return kernels_.l2_sqr(query_, row, dim_);
      case Metric::kInnerProduct: return 1.0f - kernels_.dot(query_, row, dim_);
      case Metric::kCosine: return CosineDistance(row);
    }
    return 0;
  }

 private:
  float CosineDistance(const float* row) const {
    DotNorms s = kernels_.dot_norms(query_, row, dim_);
    if (query_norm_ == 0 || s.norm_b_sqr == 0) return 1.0f;
    return 1.0f - s.dot / (query_norm_ * std::sqrt(s.norm_b_sqr));
  }

  const DistanceKernels& kernels_;
  Metric metric_;
  const float* query_;
  size_t dim_;
  float query_norm_ = 0;
};

Status CheckArguments(Metric metric, std::span<const float> query, const VectorBlock& block,
                      std::span<const uint64_t> ids) {
  if (!IsValidMetric(static_cast<uint8_t>(metric))) {
    return StatusF(kRange, "exact search: unknown metric %d", static_cast<int>(metric));
  }
  if (query.size() != block.dim) {
    return StatusF(kMismatchDimension, "exact search: query has dimension %zu, vectors have %zu",
                   query.size(), block.dim);
  }
  if (!AllFinite(query.data(), query.size())) {
    return Status(kMismatch, "exact search: query holds NaN or infinity");
  }
  if (block.data == nullptr && block.rows == nullptr && block.count > 0) {
    return Status(kRange, "exact search: null vector block");
  }
  if (!ids.empty() && ids.size() != block.count) {
    return StatusF(kRange, "exact search: %zu ids for %zu vectors", ids.size(), block.count);
  }
  return Status::OK();
}

uint64_t IdOf(std::span<const uint64_t> ids, size_t row) { return ids.empty() ? row : ids[row]; }

}  // namespace

Result<std::vector<Neighbor>> ExactTopK(Metric metric, std::span<const float> query,
                                        const VectorBlock& block, size_t k,
                                        std::span<const uint64_t> ids) {
  AGENTMEM_RETURN_IF_ERROR(CheckArguments(metric, query, block, ids));
  TopK top(std::min(k, block.count));
  if (k == 0) return top.Take();
  RowScorer score(metric, query.data(), block.dim);
  for (size_t row = 0; row < block.count; ++row) {
    top.Offer(IdOf(ids, row), score(block.row(row)));
  }
  return top.Take();
}

Result<std::vector<Neighbor>> ExactTopKRows(Metric metric, std::span<const float> query,
                                            const VectorBlock& block,
                                            std::span<const uint32_t> rows, size_t k,
                                            std::span<const uint64_t> ids) {
  AGENTMEM_RETURN_IF_ERROR(CheckArguments(metric, query, block, ids));
  for (uint32_t row : rows) {
    if (row >= block.count) {
      return StatusF(kRange, "exact search: row %u out of range (%zu vectors)", row, block.count);
    }
  }
  TopK top(std::min(k, rows.size()));
  if (k == 0) return top.Take();
  RowScorer score(metric, query.data(), block.dim);
  for (uint32_t row : rows) top.Offer(IdOf(ids, row), score(block.row(row)));
  return top.Take();
}

}  // namespace agentmem::index

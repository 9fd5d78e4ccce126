// index/vector/metric.h -- the metrics of a vector space and the one distance
// convention every vector search in index/ uses.
//
// All searches rank by a *distance*: smaller is closer, and ties are broken by
// the smaller id, so that results are deterministic. Per metric:
//
//   metric          distance                      range for finite input
//   kCosine         1 - cos(a, b)                 [0, 2]; 1 when a or b is zero
//   kInnerProduct   1 - <a, b>                    any float (hnswlib's convention)
//   kL2             |a - b|^2 (squared Euclidean) [0, +inf)
//
// The exact scan (exact_search.h) and the graph (hnsw.h) report the same
// distance for the same pair, up to float rounding, so that a planner can merge
// or compare their results.
#pragma once

#include <cstdint>
#include <string_view>

#include "format/status.h"

namespace agentmem::index {

// Stored in the HNSW image (hnsw_format.h): the values are part of the format.
enum class Metric : uint8_t { kCosine = 1, kInnerProduct = 2, kL2 = 3 };

// "cosine", "ip" or "l2"; "unknown" for a value outside the enum.
const char* MetricName(Metric metric);

// The inverse of MetricName(). Also accepts "inner_product" and "euclidean".
// Returns kMismatch with a message naming the accepted names otherwise.
Result<Metric> ParseMetric(std::string_view name);

// True for the three values of the enum (a decoder checks a byte with this).
bool IsValidMetric(uint8_t value);

// One search hit: the caller's 64-bit id (episode id, row number, ...) and
// its distance to the query under the metric's convention above.
struct Neighbor {
  uint64_t id = 0;
  float distance = 0;
};

// The ranking order of every result list: by distance, then by id.
inline bool NeighborLess(const Neighbor& a, const Neighbor& b) {
  if (a.distance != b.distance) return a.distance < b.distance;
  return a.id < b.id;
}

}  // namespace agentmem::index

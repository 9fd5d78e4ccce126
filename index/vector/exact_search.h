// index/vector/exact_search.h -- exact top-k by brute force over a contiguous
// block of vectors, with the SIMD kernels of distance.h.
//
// This is the planner's exact path: a filtered partition small enough to scan
// (a user with a few hundred episodes) is scanned here rather than searched in
// the graph, and it is the ground truth the HNSW tests measure recall against.
// Distances follow metric.h (cosine: 1 - cos, with the stored vectors taken as
// they are, normalised or not; ip: 1 - dot; l2: squared), results are ordered
// by (distance, id), and a NaN distance (a stored vector holding NaN) ranks
// after every number, reported as +infinity.
//
// Cost: one pass over the scanned rows, O(rows * dim) kernel work plus
// O(rows log k) to keep the best k. No allocation beyond the result.
// Thread safety: pure functions of their arguments; the block is only read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "format/status.h"
#include "index/vector/metric.h"

namespace agentmem::index {

// `count` vectors of `dim` floats: row r at rows[r] when `rows` is given (as
// the graph's nodes, each where it lies), else at data + r * stride (stride 0
// means dim: a plain row-major matrix; a larger stride skips other fields
// stored between the vectors). Any alignment. Not owned: it must outlive the
// call.
struct VectorBlock {
  const float* data = nullptr;
  size_t count = 0;
  size_t dim = 0;
  size_t stride = 0;  // floats from one row to the next; 0 = dim
  const float* const* rows = nullptr;
  const float* row(size_t r) const { return rows ? rows[r] : data + r * (stride ? stride : dim); }
};

// The k nearest rows of `block` to `query`, nearest first (fewer when the
// block has fewer rows). A hit's id is ids[row] when `ids` is given (then it
// must hold block.count ids), else the row number.
// Errors: kMismatchDimension when query.size() != block.dim; kMismatch for a
// query holding NaN or infinity; kRange when ids has the wrong length or
// block.data is null with count > 0. k == 0 returns an empty list.
Result<std::vector<Neighbor>> ExactTopK(Metric metric, std::span<const float> query,
                                        const VectorBlock& block, size_t k,
                                        std::span<const uint64_t> ids = {});

// The same over the listed rows only (a filtered partition). A row listed
// twice is scored twice. Errors as ExactTopK(), and kRange when a row is
// >= block.count.
Result<std::vector<Neighbor>> ExactTopKRows(Metric metric, std::span<const float> query,
                                            const VectorBlock& block,
                                            std::span<const uint32_t> rows, size_t k,
                                            std::span<const uint64_t> ids = {});

}  // namespace agentmem::index

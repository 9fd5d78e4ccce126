// engine/memory/embedder.h -- an embedding model the application registers on one
// handle (agentmem_create_embedder): the Database calls it for every episode
// written without a vector and for every recall query without a query vector,
// when the file's vector space names a model the library does not build in.
//
// Batching (docs/recall.md, "Your own embedder"): a write outside a
// transaction embeds its one text at once, before the write lock is taken; in
// a transaction, texts wait until kEmbedBatch of them are pending or the
// transaction commits, and are embedded kEmbedBatch at a time.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "format/status.h"

namespace agentmem::engine {

class Embedder {
 public:
  // The most texts one Embed() call is given.
  static constexpr size_t kEmbedBatch = 64;

  virtual ~Embedder() = default;
  // Writes texts.size() * dim floats (one vector per text, in order) to out.
  // A failure is returned as a Status whose message says what went wrong;
  // the caller then writes nothing. REQUIRES: 1 <= texts.size() <= kEmbedBatch.
  virtual Status Embed(const std::vector<std::string_view>& texts, float* out) = 0;
};

}  // namespace agentmem::engine

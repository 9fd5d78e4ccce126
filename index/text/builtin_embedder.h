// index/text/builtin_embedder.h -- the embedders built into the library, by
// the name a file's vector space records: "agentmem-glove-v2" and
// "agentmem-glove-v1" (glove_embedder.h; 100 dimensions, when the build links
// its table) and "agentmem-hash-v1" (hash_embedder.h; any dimension). The engine computes
// an episode's vector with the file's built-in embedder when the caller
// gives none; any other name is an application's model.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "format/status.h"
#include "index/text/glove_embedder.h"
#include "index/text/hash_embedder.h"

namespace agentmem::index {

// Immutable after creation; safe to use from many threads at once.
class BuiltinEmbedder {
 public:
  // The built-in embedder `name` at `dim`, or nullopt when no built-in
  // embedder has that name and dimension in this build.
  static std::optional<BuiltinEmbedder> For(std::string_view name, uint32_t dim);
  // Why For(name, ...) gave nullopt, for a recall that needs a query vector:
  // a GloVe embedder in a build without the table (`glove_linked` false),
  // another "agentmem-glove-" version, or an application's model. kMisuse,
  // with a message that says which and what to do.
  static Status Missing(std::string_view name, bool glove_linked = GloveTable::HasLinked());
  // The names of the GloVe embedders start with this.
  static constexpr std::string_view kGlovePrefix = "agentmem-glove-";

  std::string_view name() const;
  uint32_t dimension() const;
  // As HashEmbedder's and GloveEmbedder's: unit L2 norm or all zero.
  std::vector<float> Embed(std::string_view text) const;
  Status EmbedInto(std::string_view text, std::span<float> out) const;

 private:
  template <typename E>
  explicit BuiltinEmbedder(E e) : e_(std::move(e)) {}
  std::variant<HashEmbedder, GloveEmbedder> e_;
};

}  // namespace agentmem::index

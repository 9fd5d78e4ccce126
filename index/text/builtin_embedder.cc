// index/text/builtin_embedder.cc -- the built-in embedders by name.
#include "index/text/builtin_embedder.h"

#include <string>

namespace agentmem::index {

std::optional<BuiltinEmbedder> BuiltinEmbedder::For(std::string_view name, uint32_t dim) {
  if (name == HashEmbedder::kName) {
    auto e = HashEmbedder::Create({dim});
    if (e.ok()) return BuiltinEmbedder(std::move(e.value()));
  } else if (auto version = GloveEmbedder::VersionOf(name);
             version && dim == GloveEmbedder::kDimension) {
    auto e = GloveEmbedder::Create(*version);
    if (e.ok()) return BuiltinEmbedder(std::move(e.value()));
  }
  return std::nullopt;
}

Status BuiltinEmbedder::Missing(std::string_view name, bool glove_linked) {
  const std::string n(name);
  if (GloveEmbedder::VersionOf(name) && !glove_linked) {
    return StatusF(kMisuse,
                   "this file's vectors come from the built-in embedder %s, which this build of "
                   "the library lacks: it was built without the GloVe table (meson option "
                   "glove_table); build it with the table (make fetches it), or pass a query "
                   "vector",
                   n.c_str());
  }
  if (name.starts_with(kGlovePrefix)) {
    return StatusF(kMisuse,
                   "this file's vectors come from the built-in embedder %s, which this version "
                   "of the library does not have: open it with the version that made it, or "
                   "pass a query vector",
                   n.c_str());
  }
  return StatusF(kMisuse,
                 "this file's vectors come from an external embedder (%s): register it "
                 "(agentmem_create_embedder) or pass a query vector",
                 n.c_str());
}

std::string_view BuiltinEmbedder::name() const {
  return std::visit([](const auto& e) { return e.name(); }, e_);
}

uint32_t BuiltinEmbedder::dimension() const {
  return std::visit([](const auto& e) { return e.dimension(); }, e_);
}

std::vector<float> BuiltinEmbedder::Embed(std::string_view text) const {
  return std::visit([&](const auto& e) { return e.Embed(text); }, e_);
}

Status BuiltinEmbedder::EmbedInto(std::string_view text, std::span<float> out) const {
  return std::visit([&](const auto& e) { return e.EmbedInto(text, out); }, e_);
}

}  // namespace agentmem::index

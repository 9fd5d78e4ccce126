// index/text/builtin_embedder.cc -- the built-in embedders by name.
#include "index/text/builtin_embedder.h"

namespace agentmem::index {

std::optional<BuiltinEmbedder> BuiltinEmbedder::For(std::string_view name, uint32_t dim) {
  if (name == HashEmbedder::kName) {
    auto e = HashEmbedder::Create({dim});
    if (e.ok()) return BuiltinEmbedder(std::move(e.value()));
  } else if (name == GloveEmbedder::kName && dim == GloveEmbedder::kDimension) {
    auto e = GloveEmbedder::Create();
    if (e.ok()) return BuiltinEmbedder(std::move(e.value()));
  }
  return std::nullopt;
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

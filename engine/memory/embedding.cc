// engine/memory/embedding.cc -- the application's embedder: registering it, and
// embedding the texts that wait for it (episodes and recall queries).
#include "engine/memory/database.h"

#include <cmath>

namespace agentmem::engine {

using format::BlockRecord;
using format::EpisodeRecord;
using format::FactRecord;
using format::PageType;

Status Database::SetEmbedder(const VectorSpace& space, std::unique_ptr<Embedder>* e) {
  if (closed_) return Status(kMisuse, "database is closed");
  AGENTMEM_RETURN_IF_ERROR(EnsureRecallIndex());
  if (!(space == space_)) {
    return StatusF(kMismatch,
                   "vector space mismatch: the file records %s/%u/%s, the embedder is %s/%u/%s",
                   space_.embedder.c_str(), space_.dim, space_.metric.c_str(),
                   space.embedder.c_str(), space.dim, space.metric.c_str());
  }
  if (recall_->builtin_embedder()) {
    return StatusF(kMisuse,
                   "the file's embedder %s is built into agentmem; register an embedder on a "
                   "file created with embedder=NAME for your model",
                   space_.embedder.c_str());
  }
  if (!pending_embed_.empty()) {
    return Status(kMisuse,
                  "the open transaction holds texts the current embedder has not embedded "
                  "yet; commit or roll back before replacing it");
  }
  embedder_ = std::move(*e);  // the one replaced is destroyed here
  return Status::OK();
}

Status Database::EmbedTexts(const std::vector<std::string_view>& texts,
                            const std::vector<std::vector<float>*>& vectors) {
  const size_t dim = space_.dim;
  std::vector<float> out(texts.size() * dim);
  for (size_t at = 0; at < texts.size(); at += Embedder::kEmbedBatch) {
    size_t n = std::min(Embedder::kEmbedBatch, texts.size() - at);
    std::vector<std::string_view> batch(texts.begin() + static_cast<long>(at),
                                        texts.begin() + static_cast<long>(at + n));
    float* dst = out.data() + at * dim;
    Status s = embedder_->Embed(batch, dst);
    if (!s.ok()) {
      return Status(s.code(), "embedder " + space_.embedder + " failed: " + s.message());
    }
    for (size_t i = 0; i < n * dim; i++) {
      if (!std::isfinite(dst[i])) {
        return StatusF(kRange, "embedder %s returned a NaN or infinite value (text %zu of %zu)",
                       space_.embedder.c_str(), i / dim + 1, n);
      }
    }
  }
  for (size_t i = 0; i < vectors.size(); i++) {
    vectors[i]->assign(out.begin() + static_cast<long>(i * dim),
                       out.begin() + static_cast<long>((i + 1) * dim));
  }
  return Status::OK();
}

Status Database::EmbedPending() {
  if (pending_embed_.empty()) return Status::OK();
  if (!embedder_) return Status(kInternal, "episodes wait for an embedder that is gone");
  std::vector<std::string_view> texts;
  std::vector<std::vector<float>*> vectors;
  for (size_t i : pending_embed_) {
    texts.push_back(pending_episodes_[i].text);
    vectors.push_back(&pending_episodes_[i].vector);
  }
  AGENTMEM_RETURN_IF_ERROR(EmbedTexts(texts, vectors));
  pending_embed_.clear();
  return Status::OK();
}

}  // namespace agentmem::engine

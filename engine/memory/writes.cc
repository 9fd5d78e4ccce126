// engine/memory/writes.cc -- episodes and blocks: the input rules, the ids a write
// takes, and the ids an import reserves.
#include "engine/memory/database.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "engine/memory/validate.h"

namespace agentmem::engine {

using format::BlockRecord;
using format::EpisodeRecord;
using format::FactRecord;
using format::PageType;

Status Database::Remember(EpisodeRecord r, uint64_t* id) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  if (r.text.size() > opts_.max_text_bytes) {
    return StatusF(kTooBig, "episode text is %zu bytes; the limit is %llu (max_text_bytes)",
                   r.text.size(), static_cast<unsigned long long>(opts_.max_text_bytes));
  }
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.user_id, "user_id"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.session_id, "session_id"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.role, "role"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.text, "text"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.metadata, "metadata"));
  AGENTMEM_RETURN_IF_ERROR(CheckJson(r.metadata, "metadata"));
  if (!r.vector.empty() && r.vector.size() != space_.dim) {
    return StatusF(kMismatchDimension,
                   "vector has %zu dimensions; this file's vector space (%s, %s) has %u",
                   r.vector.size(), space_.embedder.c_str(), space_.metric.c_str(), space_.dim);
  }
  for (float f : r.vector) {
    if (!std::isfinite(f)) return Status(kRange, "vector contains a NaN or infinite value");
  }
  AGENTMEM_RETURN_IF_ERROR(AsStored(&r.vector));
  if (r.vector.empty() && recall_->builtin_embedder()) {  // (recall_ exists from open on)
    r.vector = recall_->Embed(r.text);  // the built-in embedder fills in
  }
  // The application's embedder: a lone write embeds its text now, before
  // the write lock; a transaction's texts are embedded in batches.
  bool embed_later = r.vector.empty() && embedder_ != nullptr;
  if (embed_later && !explicit_txn_) {
    AGENTMEM_RETURN_IF_ERROR(EmbedTexts({r.text}, {&r.vector}));
    embed_later = false;
  }
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  const uint64_t limit = episode_id_limit();
  if (r.id != 0 && r.id < limit) {
    Status refused = StatusF(kConstraint, "episode id %llu is taken: new ids start at %llu",
                             static_cast<unsigned long long>(r.id),
                             static_cast<unsigned long long>(limit));
    return FinishWrite(refused);
  }
  if (r.id > kMaxEpisodeId || (r.id == 0 && limit > kMaxEpisodeId)) {
    // Ids are SQL integers (int64).
    return FinishWrite(StatusF(kRange, "episode id %llu is above the largest, %lld%s",
                               static_cast<unsigned long long>(r.id ? r.id : limit),
                               static_cast<long long>(kMaxEpisodeId),
                               r.id ? "" : ": this file's episode ids are used up"));
  }
  if (r.id == 0) r.id = limit;
  if (r.created_at == 0) r.created_at = Now();
  if (r.ts == 0) r.ts = r.created_at;
  uint64_t assigned = r.id;
  pending_episodes_.push_back(std::move(r));
  if (embed_later) {
    pending_embed_.push_back(pending_episodes_.size() - 1);
    if (pending_embed_.size() >= Embedder::kEmbedBatch) {
      Status e = EmbedPending();
      if (!e.ok()) {  // this call fails and leaves no episode behind
        pending_embed_.pop_back();
        pending_episodes_.pop_back();
        return e;  // (in a transaction: FinishWrite would only return it)
      }
    }
  }
  Status s = FinishWrite(Status::OK());
  if (s.ok() && id) *id = assigned;
  return s;
}

Status Database::SetBlock(BlockRecord r) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  if (r.name.empty()) return Status(kConstraint, "block name must not be empty");
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.user_id, "user_id"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.name, "block name"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.value, "block value"));
  if (r.value.size() > opts_.max_text_bytes) {
    return StatusF(kTooBig, "block value is %zu bytes; the limit is %llu (max_text_bytes)",
                   r.value.size(), static_cast<unsigned long long>(opts_.max_text_bytes));
  }
  size_t chars = Utf8Length(r.value);
  if (r.limit > 0 && chars > r.limit) {
    return StatusF(kConstraint, "block \"%s\" value is %zu characters; its limit is %u",
                   r.name.c_str(), chars, r.limit);
  }
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  const uint64_t next = pending_blocks_.empty() ? next_block_version_ : pending_blocks_.back().version + 1;
  if (r.version < next) r.version = next;
  if (r.updated_at == 0) r.updated_at = Now();
  pending_blocks_.push_back(std::move(r));
  return FinishWrite(Status::OK());
}

void Database::NextIds(uint64_t* episode, uint64_t* fact, uint64_t* block_version) const {
  *episode = std::max(episode_id_limit(), counters_floor_.episode);
  *fact = std::max(NextFactId(), counters_floor_.fact);
  *block_version = std::max(
      pending_blocks_.empty() ? next_block_version_ : pending_blocks_.back().version + 1,
      counters_floor_.block);
}

Status Database::ReserveIds(uint64_t episode, uint64_t fact, uint64_t block_version) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  if (!explicit_txn_) return Status(kMisuse, "reserving ids needs an open transaction");
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  counters_floor_.episode = std::max(counters_floor_.episode, episode);
  counters_floor_.fact = std::max(counters_floor_.fact, fact);
  counters_floor_.block = std::max(counters_floor_.block, block_version);
  // ForgottenInFile() counts the ids below the next one that hold no live
  // episode, less a baseline: the ids this commit skips go into the baseline.
  uint64_t next = 0, unused = 0;
  NextIds(&next, &unused, &unused);
  const uint64_t live = catalog_.episode_count() + pending_episodes_.size();
  const uint64_t gone_after = next - 1 > live ? next - 1 - live : 0;
  const uint64_t baseline = gone_after - std::min(gone_after, ForgottenInFile());
  uint64_t before = 0;
  if (const std::string* v = catalog_.Meta("vacuum.gone_episodes")) {
    before = std::strtoull(v->c_str(), nullptr, 10);
  }
  if (baseline != before || counters_floor_.episode > next_episode_id_ ||
      counters_floor_.fact > next_fact_id_ || counters_floor_.block > next_block_version_) {
    pending_meta_.entries.emplace_back("vacuum.gone_episodes", std::to_string(baseline));
  }
  return FinishWrite(Status::OK());
}

}  // namespace agentmem::engine

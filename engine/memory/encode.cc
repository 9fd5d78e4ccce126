// engine/memory/encode.cc -- what a transaction writes: its pending records, the
// BM25 text records and the graph delta of its episodes, and its commit
// record, packed into pages by storage's TxnWriter.
#include "engine/memory/database.h"

#include <algorithm>
#include <cmath>

#include "format/page.h"

namespace agentmem::engine {

using format::EpisodeRecord;
using format::PageType;

// In a file of float16 or int8 vectors (vector.type), each pending
// episode's vector becomes the values its record holds, before the graph
// sees it, so that the graph and every later reader hold the same vector.
Status Database::PendingVectorsAsStored() {
  format::VectorType type = format::VectorType::kF32;
  StoredVectorType(space_.type, &type);
  if (type == format::VectorType::kF32) return Status::OK();
  for (EpisodeRecord& r : pending_episodes_) {
    r.vector_type = type;
    if (!format::RoundToStored(type, r.vector)) {
      return StatusF(kRange, "episode %llu: %s", static_cast<unsigned long long>(r.id),
                     UnstorableMessage().c_str());
    }
  }
  return Status::OK();
}

std::string Database::UnstorableMessage() const {
  return space_.type == "f16"
             ? "a vector component is outside float16's range (+-65504), and this file stores "
               "float16 vectors (vector_type=f16)"
             : "a vector component is too close to the largest float for an int8 scale, and "
               "this file stores int8 vectors (vector_type=int8)";
}

Status Database::AsStored(std::vector<float>* v) const {
  format::VectorType type = format::VectorType::kF32;
  StoredVectorType(space_.type, &type);
  if (type == format::VectorType::kF32) return Status::OK();
  if (!format::RoundToStored(type, *v)) return Status(kRange, UnstorableMessage());
  return Status::OK();
}

namespace {

// The bytes of an episode record that zstd is not expected to shrink: its
// vector's nonzero components (those of a dense embedding are close to
// random bits; a sparse vector's zeros compress).
size_t IncompressibleBytes(const EpisodeRecord& r) {
  size_t nonzero = 0;
  for (float f : r.vector) nonzero += f != 0.0f;
  switch (r.vector_type) {
    case format::VectorType::kF16: return nonzero * 2;
    case format::VectorType::kInt8: return nonzero;
    case format::VectorType::kF32: break;
  }
  return nonzero * 4;
}

}  // namespace

// Packs the pending records into pages starting at the end of the log, then
// the commit page, and says in `layout` where each record went.
Status Database::EncodePending(std::string* buf, Layout* layout) {
  AGENTMEM_RETURN_IF_ERROR(PendingVectorsAsStored());
  TxnWriter w(log_->end(), log_->header());
  std::string rec;
  // Each record of `v`, encoded by `encode`; `locs` (if given) receives its place.
  auto add_all = [&](PageType type, const auto& v, auto encode, std::vector<RecordLoc>* locs) {
    if (locs) locs->reserve(v.size());
    for (const auto& r : v) {
      rec.clear();
      encode(r, &rec);
      RecordLoc loc = w.Add(type, rec);
      if (locs) locs->push_back(loc);
    }
  };
  if (!pending_meta_.entries.empty()) {  // one record, on a page of its own
    rec.clear();
    format::EncodeMeta(pending_meta_, &rec);
    w.AddAlone(PageType::kMeta, rec);
  }
  layout->episodes.reserve(pending_episodes_.size());
  for (const EpisodeRecord& r : pending_episodes_) {
    rec.clear();
    format::EncodeEpisode(r, &rec);
    layout->episodes.push_back(w.Add(PageType::kEpisodes, rec, IncompressibleBytes(r)));
  }
  add_all(PageType::kBlocks, pending_blocks_, format::EncodeBlock, &layout->blocks);
  add_all(PageType::kFacts, pending_facts_, format::EncodeFact, &layout->facts);
  add_all(PageType::kForget, pending_forgets_, format::EncodeForget, nullptr);
  // The BM25 terms of this transaction's episodes ride in the same commit, so
  // that no reader ever tokenizes again; the graph delta holds the nodes of
  // the transactions before (docs/format.md §5.6).
  AGENTMEM_RETURN_IF_ERROR(PendingTexts(&layout->texts));
  add_all(PageType::kText, layout->texts, format::EncodeText, nullptr);
  if (recall_ && graph_writes_ == GraphWrites::kDeltas) {
    // The graph's changes since the last delta; this transaction's vectors
    // are inserted while it is written and synced, for the next delta.
    std::string delta;
    format::StoredPayload prepared;
    AGENTMEM_RETURN_IF_ERROR(recall_->DeferInsertForCommit(pending_episodes_, &delta, &prepared));
    if (!delta.empty()) w.AddAlone(PageType::kGraph, delta, &prepared);
  } else if (recall_ && !pending_episodes_.empty() && graph_writes_ != GraphWrites::kAdopted) {
    std::string delta;  // the graph goes whole into the checkpoint
    AGENTMEM_RETURN_IF_ERROR(recall_->InsertForCommit(pending_episodes_, &delta));
  }
  format::CommitRecord& c = layout->commit;
  c.commit_seq = log_->seq() + 1;
  c.durable_through = std::min(log_->synced_through(), log_->end());
  c.commit_ts = Now();
  NextIds(&c.next_episode_id, &c.next_fact_id, &c.next_block_version);
  *buf = w.Finish(&c);
  layout->pages = c.page_count;
  layout->last_episodes = w.LastEpisodePage();
  return Status::OK();
}

// The text records of the transaction: its episodes' and, with context
// indexing (an episode's document holds the turns before it in its
// session), those of the episodes whose context a forget removes, indexed
// again without it (their text records come first).
Status Database::PendingTexts(std::vector<format::TextRecord>* texts) {
  if (!pending_episodes_.empty()) AGENTMEM_RETURN_IF_ERROR(EnsureRecallIndex());
  if (texts_given_) {
    bool match = given_texts_.size() == pending_episodes_.size();
    for (size_t i = 0; match && i < given_texts_.size(); i++) {
      match = given_texts_[i].episode_id == pending_episodes_[i].id;
    }
    if (!match) return Status(kInternal, "compaction: the copy's text records are not its episodes'");
    *texts = std::move(given_texts_);
    given_texts_.clear();
    return Status::OK();
  }
  if (recall_ && recall_->context() > 0) {
    std::vector<uint64_t> forgotten;
    std::vector<std::string> context_texts;
    if (!pending_forgets_.empty()) AGENTMEM_RETURN_IF_ERROR(PendingForgottenEpisodes(&forgotten));
    for (uint64_t id : recall_->ContextDependents(forgotten)) {
      EpisodeRecord r;
      AGENTMEM_RETURN_IF_ERROR(GetEpisodeNoRefresh(id, &r));
      AGENTMEM_RETURN_IF_ERROR(ContextTexts(r, forgotten, &context_texts));
      texts->push_back(recall_->TextFor(r, context_texts));
    }
    for (const EpisodeRecord& r : pending_episodes_) {
      AGENTMEM_RETURN_IF_ERROR(ContextTexts(r, forgotten, &context_texts));
      texts->push_back(recall_->TextFor(r, context_texts));
    }
  } else if (!pending_episodes_.empty()) {
    for (const EpisodeRecord& r : pending_episodes_) texts->push_back(recall_->TextFor(r));
  }
  return Status::OK();
}

Status Database::ContextTexts(const EpisodeRecord& r, std::span<const uint64_t> skip,
                              std::vector<std::string>* out) {
  out->clear();
  const size_t want = recall_->context();
  // Pending episodes of the same session before r, newest first.
  for (auto it = pending_episodes_.rbegin(); it != pending_episodes_.rend() && out->size() < want; ++it) {
    if (it->id >= r.id || it->user_id != r.user_id || it->session_id != r.session_id) continue;
    if (std::binary_search(skip.begin(), skip.end(), it->id)) continue;
    out->push_back(it->text);
  }
  if (out->size() == want) return Status::OK();
  for (uint64_t id : recall_->ContextIds(r.user_id, r.session_id, r.id, skip)) {
    if (out->size() == want) break;
    AGENTMEM_RETURN_IF_ERROR(EpisodeTextNoRefresh(id, &out->emplace_back()));
  }
  return Status::OK();
}

}  // namespace agentmem::engine

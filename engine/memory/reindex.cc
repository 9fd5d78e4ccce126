// engine/memory/reindex.cc -- REINDEX: both indexes built again from the records
// (docs/recovery.md, "REINDEX").
//
// The BM25 index is built from the episodes' texts, tokenized again with the
// file's tokenizer, and the HNSW graph from their vectors, inserted in id
// order; then a checkpoint (docs/format.md §5.8) commits both, and the next
// superblock points at it, so every later open uses them. The log is left as
// it was: derived data is only ever added, never rewritten in place.
//
// So that graph deltas committed afterwards still apply to the graph of a
// reader that built it from the log, the new graph has the same nodes, in
// the same order: every episode with a vector since the last compaction,
// forgotten ones included (deleted nodes, as the log leaves them).
#include <algorithm>
#include <memory>

#include "engine/memory/database.h"

namespace agentmem::engine {

Status Database::Reindex(ReindexReceipt* receipt) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  if (explicit_txn_) return Status(kMisuse, "REINDEX cannot run inside a transaction");
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  ReindexReceipt r;
  std::unique_ptr<RecallIndex> old = std::move(recall_);
  std::shared_ptr<MappedBytes> old_owner = recall_bm25_owner_;
  Status s = EnsureRecallIndex();
  std::vector<uint64_t> forgotten;
  const auto& entries = catalog_.episodes();
  std::vector<format::EpisodeRecord> batch;
  auto flush = [&]() -> Status {
    std::string delta;  // the checkpoint below commits the graph whole
    AGENTMEM_RETURN_IF_ERROR(recall_->InsertForCommit(batch, &delta));
    batch.clear();
    return Status::OK();
  };
  std::vector<uint64_t> ids;
  ids.reserve(entries.size());
  entries.ForEach([&](uint64_t id, const EpisodeEntry&) { ids.push_back(id); });
  std::sort(ids.begin(), ids.end());
  // Forgotten episodes are never another's context (ContextTexts skips them).
  std::vector<uint64_t> gone;
  for (uint64_t id : ids) {
    if (entries.Find(id)->forgotten) gone.push_back(id);
  }
  std::vector<std::string> context;
  for (uint64_t id : ids) {
    if (!s.ok()) break;
    const EpisodeEntry& e = *entries.Find(id);
    if (!e.present && !e.forgotten) continue;
    std::string_view rec;
    int64_t page_no = 0;
    std::shared_ptr<const std::string> keep;
    format::EpisodeRecord ep;
    s = ReadRecord(e.loc, &rec, &page_no, &keep);
    if (s.ok()) s = format::DecodeEpisode(rec, page_no, &ep);
    if (s.ok() && ep.id != id) {
      s = AGENTMEM_CORRUPTION(kCorruptIndex, page_no, "page %lld: holds episode %llu, expected %llu",
                              static_cast<long long>(page_no),
                              static_cast<unsigned long long>(ep.id),
                              static_cast<unsigned long long>(id));
    }
    if (s.ok()) s = recall_->Add(ep);
    if (s.ok() && e.present && !e.forgotten) s = ContextTexts(ep, gone, &context);
    if (s.ok() && e.present) {
      s = recall_->AddText(recall_->TextFor(ep, e.forgotten ? std::vector<std::string>{} : context));
    }
    if (!s.ok()) break;
    if (e.forgotten) {
      forgotten.push_back(id);
    } else {
      r.episodes++;
      r.vectors += ep.vector.size() == space_.dim;
    }
    batch.push_back(std::move(ep));
    if (batch.size() >= 1000) s = flush();
  }
  if (s.ok() && !batch.empty()) s = flush();
  if (s.ok()) s = recall_->Forget(forgotten);
  if (!s.ok()) {
    recall_ = std::move(old);  // as it was: the file is unchanged
    recall_bm25_owner_ = old_owner;
    ReleaseWriteLock();
    return s;
  }
  recall_bm25_owner_.reset();  // the old index's images are no longer read
  old.reset();
  const uint64_t end = log_->end();
  s = WriteCheckpoint();
  if (s.ok() && log_->end() == end) {
    s = Status(kTooBig, "REINDEX: the indexes are larger than one checkpoint page holds in format "
                        "v1; they are rebuilt in memory but not committed");
  }
  r.checkpoint_offset = log_->end() == end ? 0 : end;
  ReleaseWriteLock();
  if (s.ok() && receipt) *receipt = r;
  return s;
}

}  // namespace agentmem::engine

// engine/memory/apply.cc -- committed transactions reach the catalog, the fact
// index and the recall index: decoded from the log (another handle's, or the
// file's on open) or as this handle's commit encoded them, through one path
// (ApplyTxn).
#include "engine/memory/database.h"

#include <algorithm>
#include <unordered_set>

#include "format/page.h"

namespace agentmem::engine {

using format::BlockRecord;
using format::EpisodeRecord;
using format::FactRecord;
using format::PageType;

// Phase 1 of applying a scanned transaction: decode and check every record,
// changing nothing. Counters must run on from the previous commit's.
Status Database::DecodeScanned(ScannedTxn& txn, Counters next, DecodedTxn* out) {
  uint64_t next_episode = next.episode, next_fact = next.fact, next_block = next.block;
  std::vector<std::string_view> records;
  for (DecodedPage& page : txn.pages) {
    int64_t page_no = static_cast<int64_t>(page.header.page_no);
    // Derived state as of the previous commit, checked by the scan; only an
    // open from the superblock that points at it reads it (checkpoint.cc).
    if (page.header.type == static_cast<uint8_t>(PageType::kCheckpoint)) continue;
    AGENTMEM_RETURN_IF_ERROR(
        format::SplitRecords(page.payload, page.header.record_count, page_no, &records));
    auto out_of_order = [page_no](const char* what) {
      return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld: %s out of order",
                                 static_cast<long long>(page_no), what);
    };
    for (uint32_t slot = 0; slot < records.size(); slot++) {
      RecordLoc loc{page.offset, slot};
      switch (static_cast<PageType>(page.header.type)) {
        case PageType::kEpisodes: {
          out->episodes.emplace_back();
          AGENTMEM_RETURN_IF_ERROR(format::DecodeEpisode(records[slot], page_no, &out->episodes.back().first));
          out->episodes.back().second = loc;
          // Ids increase; an import may skip some (docs/format.md §5.1).
          if (out->episodes.back().first.id < next_episode) return out_of_order("episode id");
          next_episode = out->episodes.back().first.id + 1;
          break;
        }
        case PageType::kBlocks: {
          out->blocks.emplace_back();
          AGENTMEM_RETURN_IF_ERROR(format::DecodeBlock(records[slot], page_no, &out->blocks.back().first));
          out->blocks.back().second = loc;
          if (out->blocks.back().first.version < next_block) return out_of_order("block version");
          next_block = out->blocks.back().first.version + 1;
          break;
        }
        case PageType::kFacts: {
          out->facts.emplace_back();
          AGENTMEM_RETURN_IF_ERROR(format::DecodeFact(records[slot], page_no, &out->facts.back().first));
          out->facts.back().second = loc;
          // A new fact takes an id above every one so far; a known id is a
          // new version of that fact (docs/format.md §5.3).
          const uint64_t fact_id = out->facts.back().first.id;
          if (fact_id == 0) return out_of_order("fact id");
          if (fact_id >= next_fact) next_fact = fact_id + 1;
          break;
        }
        case PageType::kMeta: {
          format::MetaRecord m;
          AGENTMEM_RETURN_IF_ERROR(format::DecodeMeta(records[slot], page_no, &m));
          for (auto& e : m.entries) out->meta.push_back(std::move(e));
          break;
        }
        case PageType::kGraph:
          out->graphs.push_back({records[slot], page_no});
          break;
        case PageType::kForget:
          out->forgets.emplace_back();
          AGENTMEM_RETURN_IF_ERROR(format::DecodeForget(records[slot], page_no, &out->forgets.back()));
          break;
        case PageType::kText:
          out->texts.emplace_back();
          AGENTMEM_RETURN_IF_ERROR(format::DecodeText(records[slot], page_no, &out->texts.back()));
          break;
        default:
          // Not reached: the scan ends a transaction at its commit page,
          // checkpoint pages are skipped above and unknown types fail the
          // page header check.
          return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld: a %s page inside a transaction",
                                     static_cast<long long>(page_no),
                                     format::PageTypeName(page.header.type));
      }
    }
  }
  // The commit's counters may run ahead of its records (a VACUUM's copy
  // keeps the ids of forgotten records used), never behind.
  if (next_episode > txn.commit.next_episode_id || next_fact > txn.commit.next_fact_id ||
      next_block > txn.commit.next_block_version) {
    int64_t page_no = static_cast<int64_t>(format::PageNoOf(txn.commit_offset));
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no,
                               "page %lld (commit): its counters do not match its records",
                               static_cast<long long>(page_no));
  }
  return Status::OK();
}

// Phase 2 for a scanned transaction.
Status Database::ApplyScanned(ScannedTxn& txn) {
  DecodedTxn d;
  AGENTMEM_RETURN_IF_ERROR(
      DecodeScanned(txn, Counters{next_episode_id_, next_fact_id_, next_block_version_}, &d));
  d.commit = txn.commit;
  d.end = txn.end;
  if (!txn.pages.empty() && txn.pages.front().header.type == static_cast<uint8_t>(PageType::kCheckpoint)) {
    d.checkpoint_start = txn.pages.front().offset;
  }
  return ApplyTxn(d);
}

// The transaction enters the catalog whole, then the fact index, the recall
// index (the BM25 terms of its text records, its graph delta) and, last, its
// forgets. The recall index is derived data: if it cannot take the
// transaction, it is marked broken (recall then asks for a reopen) and the
// catalog stays right.
Status Database::ApplyTxn(DecodedTxn& d) {
  for (auto& [k, v] : d.meta) catalog_.SetMeta(k, v);
  for (const auto& [r, loc] : d.episodes) {
    catalog_.AddEpisode(r, loc);
    // An episode older than the policy's next due time brings it forward.
    if (retention_due_ != INT64_MIN) {
      retention_due_ = std::min(retention_due_, SaturatingAdd(r.ts, retention_due_age_s_));
    }
  }
  for (const auto& [r, loc] : d.blocks) catalog_.AddBlock(r, loc);
  for (const auto& [r, loc] : d.facts) {
    if (r.id < next_fact_id_ && !catalog_.FindFact(r.id)) {
      int64_t page_no = static_cast<int64_t>(format::PageNoOf(loc.page_offset));
      return AGENTMEM_CORRUPTION(kCorruptPage, page_no,
                                 "page %lld: a new version of fact %llu, which does not exist",
                                 static_cast<long long>(page_no),
                                 static_cast<unsigned long long>(r.id));
    }
    catalog_.AddFact(r, loc);
    if (fact_index_) fact_index_->Add(r);
  }
  next_episode_id_ = d.commit.next_episode_id;
  next_fact_id_ = d.commit.next_fact_id;
  next_block_version_ = d.commit.next_block_version;
  if (d.checkpoint_start != 0) {
    log_->NoteCheckpoint(d.checkpoint_start, d.end);
  }
  if (d.episodes.empty() && d.graphs.empty() && d.texts.empty() && d.forgets.empty()) {
    return Status::OK();
  }
  Status s = EnsureRecallIndex();
  if (!s.ok()) return s;
  for (const auto& [r, loc] : d.episodes) {
    s = recall_->Add(r);
    if (!s.ok()) break;
  }
  // A compaction copy's own texts are not indexed: it adopts the indexes
  // they were made from (texts_given_).
  std::unordered_set<uint64_t> with_text;
  for (const auto& t : d.texts) {
    if (!s.ok() || (d.own && texts_given_)) break;
    s = recall_->AddText(t);
    with_text.insert(t.episode_id);
  }
  // Episodes committed without their text record (files written before text
  // pages existed, in the unreleased v1) are tokenized here instead.
  for (const auto& [r, loc] : d.episodes) {
    if (!s.ok() || (d.own && texts_given_)) break;
    if (with_text.count(r.id)) continue;
    s = recall_->AddText(recall_->TextFor(r));
  }
  // A commit's graph delta leaves out the vectors of its new nodes: they are
  // those of episode records of this or earlier transactions, in increasing
  // id order (docs/format.md §5.6); the recall index finds the earlier ones.
  auto vectors = [&d](uint64_t id) -> const float* {
    auto it = std::lower_bound(d.episodes.begin(), d.episodes.end(), id,
                               [](const auto& e, uint64_t v) { return e.first.id < v; });
    if (it == d.episodes.end() || it->first.id != id || it->first.vector.empty()) return nullptr;
    return it->first.vector.data();
  };
  for (const auto& [image, page_no] : d.graphs) {
    if (!s.ok()) break;
    s = recall_->ApplyGraphImage(image, page_no, vectors);
  }
  // Vectors committed without a graph image (a compacted file, whose
  // checkpoint holds its graph, read from its first page) are inserted here,
  // as their writer would have. A handle's own commit has its nodes and no
  // graph image among its records: it is not looked at.
  // Otherwise the vectors that the transaction's deltas left without a node
  // are pending: a writer inserts them after it writes their transaction,
  // and the delta of its next commit holds them (docs/format.md §5.6).
  if (s.ok() && !d.own) {
    std::vector<const format::EpisodeRecord*> episodes;
    for (const auto& [r, loc] : d.episodes) {
      if (!r.vector.empty()) episodes.push_back(&r);
    }
    if (!episodes.empty()) {
      s = d.graphs.empty() && graph_writes_ == GraphWrites::kDeltas
              ? recall_->InsertUnlinked(episodes)
              : recall_->AddPending(episodes);
    }
  }
  if (!s.ok()) recall_->Break(s);
  // Forgets apply last, to everything up to and including this transaction.
  for (const format::ForgetRecord& f : d.forgets) AGENTMEM_RETURN_IF_ERROR(ApplyForget(f));
  return Status::OK();
}

// The graph delta is not among the records: InsertForCommit put it in the
// graph already, and the text records are the layout's.
Database::DecodedTxn Database::TakePending(Layout& layout, uint64_t end) {
  DecodedTxn d;
  d.meta = std::move(pending_meta_.entries);
  pending_meta_.entries.clear();
  d.episodes.reserve(pending_episodes_.size());
  for (size_t i = 0; i < pending_episodes_.size(); i++) {
    d.episodes.emplace_back(std::move(pending_episodes_[i]), layout.episodes[i]);
  }
  d.blocks.reserve(pending_blocks_.size());
  for (size_t i = 0; i < pending_blocks_.size(); i++) {
    d.blocks.emplace_back(std::move(pending_blocks_[i]), layout.blocks[i]);
  }
  d.facts.reserve(pending_facts_.size());
  for (size_t i = 0; i < pending_facts_.size(); i++) {
    d.facts.emplace_back(std::move(pending_facts_[i]), layout.facts[i]);
  }
  d.texts = std::move(layout.texts);
  d.forgets = std::move(pending_forgets_);
  d.commit = layout.commit;
  d.end = end;
  d.own = true;
  ClearPending();
  return d;
}

Status Database::Committed(DecodedTxn& d, uint64_t pages, const char* what) {
  Status s = ApplyTxn(d);
  if (!s.ok()) {
    // In doubt to the caller like any failed commit: the handle's error
    // goes sticky and a reopen settles it from the file.
    SetSticky(StatusF(s.code(), "%s written but not applied: %s", what, s.message().c_str()));
    if (recall_) recall_->Break(sticky());
    return sticky();
  }
  log_->Advance(d.end, d.commit.commit_seq, pages);
  return Status::OK();
}

}  // namespace agentmem::engine

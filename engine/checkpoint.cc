// engine/checkpoint.cc -- checkpoints: the snapshot folded into one
// transaction so that an open reads it and the commits after it, not the
// whole log (docs/architecture.md "Checkpoints", docs/format.md §5.8).
//
// Writing (under the write lock, nothing pending):
//   1. the state section (catalog, episode attributes, BM25 terms) and the
//      graph as a mappable image are appended as checkpoint pages, followed by
//      a commit page that adds nothing (counters unchanged);
//   2. fdatasync;
//   3. the next superblock records checkpoint = the first checkpoint page,
//      scan_from = the end of its commit, commit_seq = that commit's number;
//      fdatasync.
// A crash before 3 leaves the older superblock, which scans the log as before
// (a scan skips checkpoint pages). The superblock never points at bytes that
// were not synced first.
//
// Loading (open): the checkpoint's pages are checked -- checksums, the commit
// that ends them -- the state section is decoded into the catalog and the
// recall index, and the graph section is mapped from the file and used where
// it lies (File::MapPrivate, HnswIndex::Map). Then the scan continues at
// scan_from.
#include <algorithm>
#include <future>
#include <unordered_map>

#include "engine/database.h"
#include "format/crc32c.h"
#include "format/page.h"

namespace agentmem::engine {

using format::CheckpointState;
using format::PageType;

Status Database::BuildCheckpointState(CheckpointState* out) const {
  CheckpointState st;
  st.next_episode_id = next_episode_id_;
  st.next_fact_id = next_fact_id_;
  st.next_block_version = next_block_version_;
  st.pages = pages_;
  st.text_bytes = catalog_.text_bytes();
  for (const auto& [k, v] : catalog_.meta()) st.meta.emplace_back(k, v);
  std::unordered_map<std::string, uint32_t> ids;
  auto intern = [&](const std::string& s) {
    auto [it, inserted] = ids.emplace(s, static_cast<uint32_t>(st.strings.size()));
    if (inserted) st.strings.push_back(s);
    return it->second;
  };
  const auto& users = catalog_.users();
  std::vector<uint32_t> user_string(users.size());
  for (size_t u = 0; u < users.size(); u++) user_string[u] = intern(users[u].user_id);
  const auto& entries = catalog_.episodes();
  st.episodes.resize(next_episode_id_ - 1);
  for (uint64_t id = 1; id < next_episode_id_; id++) {
    if (id > entries.size() || !(entries[id - 1].present || entries[id - 1].forgotten)) continue;
    const EpisodeEntry& e = entries[id - 1];
    format::CheckpointEpisode& c = st.episodes[id - 1];
    const EpisodeAttrs* attrs = nullptr;
    const std::string *session = nullptr, *role = nullptr;
    if (e.forgotten) {
      // Kept only while the graph holds its node (until VACUUM).
      if (!recall_ || !recall_->ExportEntry(id, &attrs, &session, &role) ||
          attrs->node == EpisodeAttrs::kNoNode) {
        continue;
      }
      c.forgotten = true;
    } else if (!recall_ || !recall_->ExportEntry(id, &attrs, &session, &role)) {
      return StatusF(kInternal, "checkpoint: episode %llu is not in the recall index",
                     static_cast<unsigned long long>(id));
    }
    c.page_offset = e.loc.page_offset;
    c.slot = e.loc.slot;
    c.user = user_string[e.user];
    c.session = intern(*session);
    c.role = intern(*role);
    c.ts = e.ts;
    c.has_vector = attrs->has_vector;
    c.node = attrs->node;
  }
  for (size_t u = 0; u < users.size(); u++) {
    for (const auto& [name, versions] : users[u].blocks) {
      for (const BlockVersion& v : versions) {
        st.blocks.push_back({user_string[u], name, v.version, v.loc.page_offset, v.loc.slot});
      }
    }
    for (uint64_t id : users[u].fact_ids) {
      const RecordLoc* loc = catalog_.FindFact(id);
      st.facts.push_back({id, user_string[u], loc->page_offset, loc->slot});
    }
  }
  std::sort(st.blocks.begin(), st.blocks.end(),
            [](const auto& a, const auto& b) { return a.version < b.version; });
  std::sort(st.facts.begin(), st.facts.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  *out = std::move(st);
  return Status::OK();
}

Status Database::WriteCheckpoint() {
  AGENTMEM_RETURN_IF_ERROR(EnsureRecallIndex());
  if (!recall_->broken().ok()) return Status::OK();  // nothing sound to fold; keep the log
  CheckpointState st;
  AGENTMEM_RETURN_IF_ERROR(BuildCheckpointState(&st));
  std::string state;
  format::EncodeCheckpointState(st, &state);
  // The BM25 indexes, frozen; the state section's string table names users.
  std::unordered_map<std::string, uint32_t> string_index;
  for (uint32_t i = 0; i < st.strings.size(); i++) string_index.emplace(st.strings[i], i);
  std::string bm25;
  format::EncodeBm25SectionHeader(&bm25);
  recall_->SerializeBm25([&](const std::string& user) { return string_index.at(user); }, &bm25);
  std::string graph;
  format::EncodeGraphSectionHeader(&graph);
  std::string image;
  AGENTMEM_RETURN_IF_ERROR(recall_->SerializeGraph(&image));
  graph += image;
  image.clear();
  image.shrink_to_fit();
  if (state.size() > format::kMaxPagePayload || graph.size() > format::kMaxPagePayload ||
      bm25.size() > format::kMaxPagePayload) {
    return Status::OK();  // too large for one page in format v1: keep scanning the log
  }
  const uint64_t start = end_;
  std::string buf = format::EncodePage(PageType::kCheckpoint, start, header_.salt, 1, state, false);
  state.clear();
  state.shrink_to_fit();
  buf += format::EncodePage(PageType::kCheckpoint, start + buf.size(), header_.salt, 1, bm25, false);
  bm25.clear();
  bm25.shrink_to_fit();
  buf += format::EncodePage(PageType::kCheckpoint, start + buf.size(), header_.salt, 1, graph, false);
  graph.clear();
  graph.shrink_to_fit();
  format::CommitRecord c;
  c.commit_seq = seq_ + 1;
  c.txn_start = start;
  c.durable_through = std::min(synced_through_, start);
  c.page_count = 3;
  c.commit_ts = Now();
  c.next_episode_id = next_episode_id_;
  c.next_fact_id = next_fact_id_;
  c.next_block_version = next_block_version_;
  buf += format::EncodePage(PageType::kCommit, start + buf.size(), header_.salt, 1,
                            format::EncodeCommit(c), false);
  Status s = file_->WriteAt(start, buf);
  if (s.ok()) s = Sync();
  if (!s.ok()) {
    sticky_ = s;
    return s;
  }
  synced_through_ = start + buf.size();
  // Read it back like any commit: it must scan as a valid transaction.
  AGENTMEM_RETURN_IF_ERROR(ReadBackCommit(c.commit_seq, "checkpoint"));
  return WriteSuperblock(start);
}

Status Database::MaybeCheckpoint(bool closing) {
  if (opts_.checkpoint_bytes == 0 || opts_.sync == SyncMode::kOff || !sticky_.ok() ||
      explicit_txn_ || end_ <= checkpoint_end_) {
    return Status::OK();
  }
  const uint64_t tail = end_ - checkpoint_end_;
  const bool due = closing ? tail >= opts_.checkpoint_bytes
                           : tail >= std::max(16 * opts_.checkpoint_bytes, checkpoint_size_);
  if (!due) return Status::OK();
  bool acquired = false;
  AGENTMEM_RETURN_IF_ERROR(TryLockNoWait(&acquired));
  if (!acquired) return Status::OK();  // another handle writes: it will checkpoint
  if (end_ - checkpoint_end_ < tail / 2) return Status::OK();  // someone else just did
  return WriteCheckpoint();
}

Status Database::ImportCheckpointState(const CheckpointState& st) {
  for (const auto& [k, v] : st.meta) catalog_.SetMeta(k, v);
  AGENTMEM_RETURN_IF_ERROR(EnsureRecallIndex());
  std::vector<uint64_t> forgotten;
  for (uint64_t id = 1; id <= st.episodes.size(); id++) {
    const format::CheckpointEpisode& e = st.episodes[id - 1];
    if (e.page_offset == 0) continue;
    const std::string& user = st.strings[e.user];
    if (e.forgotten) {
      forgotten.push_back(id);
      catalog_.AddForgottenEntry(id, user, e.ts, RecordLoc{e.page_offset, e.slot});
    } else {
      catalog_.AddEpisodeEntry(id, user, st.strings[e.session], e.ts, RecordLoc{e.page_offset, e.slot});
    }
    AGENTMEM_RETURN_IF_ERROR(
        recall_->AddEntry(id, user, st.strings[e.session], st.strings[e.role], e.ts, e.has_vector,
                          e.node));
  }
  for (const format::TextRecord& t : st.texts) AGENTMEM_RETURN_IF_ERROR(recall_->AddText(t));
  AGENTMEM_RETURN_IF_ERROR(recall_->Forget(forgotten));
  for (const format::CheckpointBlock& b : st.blocks) {
    catalog_.AddBlockEntry(st.strings[b.user], b.name, b.version, RecordLoc{b.page_offset, b.slot});
  }
  for (const format::CheckpointFact& f : st.facts) {
    catalog_.AddFactEntry(f.id, st.strings[f.user], RecordLoc{f.page_offset, f.slot});
  }
  catalog_.set_text_bytes(st.text_bytes);
  next_episode_id_ = st.next_episode_id;
  next_fact_id_ = st.next_fact_id;
  next_block_version_ = st.next_block_version;
  pages_ = st.pages;
  return Status::OK();
}

Status Database::LoadCheckpoint(const format::Superblock& sb) {
  auto damaged = [](uint64_t offset, const char* what) {
    int64_t page_no = static_cast<int64_t>(format::PageNoOf(offset));
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld (checkpoint): %s",
                               static_cast<long long>(page_no), what);
  };
  uint64_t size = 0;
  AGENTMEM_RETURN_IF_ERROR(file_->Size(&size));
  if (sb.scan_from > size) return damaged(sb.checkpoint, "the file ends inside the checkpoint");
  CheckpointState state;
  bool have_state = false;
  std::shared_ptr<MappedBytes> graph;  // the graph page, mapped whole
  size_t graph_at = 0, graph_size = 0;
  std::shared_ptr<MappedBytes> bm25;  // the bm25 page, mapped whole
  std::string_view bm25_body;
  int64_t bm25_page = 0;
  uint32_t pages = 0;
  uint64_t pos = sb.checkpoint;
  std::future<uint32_t> graph_crc;
  uint32_t graph_crc_stored = 0;
  int64_t graph_crc_page = 0;
  // Whatever happens below, the checksum thread is waited for before the
  // mapping it reads can go away.
  struct Join {
    std::future<uint32_t>* f;
    ~Join() {
      if (f->valid()) f->wait();
    }
  } join{&graph_crc};
  std::string head;
  while (pos < sb.scan_from) {
    AGENTMEM_RETURN_IF_ERROR(file_->ReadAt(pos, format::kPageHeaderSize, &head));
    format::PageHeader h;
    AGENTMEM_RETURN_IF_ERROR(format::PeekPageHeader(head, pos, header_.salt, &h));
    const uint64_t padded = format::PaddedPageSize(h.length);
    if (pos + padded > sb.scan_from) return damaged(pos, "a page runs past the checkpoint's end");
    const int64_t page_no = static_cast<int64_t>(h.page_no);
    if (h.type == static_cast<uint8_t>(PageType::kCommit)) {
      std::string bytes, payload;
      AGENTMEM_RETURN_IF_ERROR(file_->ReadAt(pos, padded, &bytes));
      format::PageHeader ch;
      AGENTMEM_RETURN_IF_ERROR(format::DecodePage(bytes, pos, header_.salt, &ch, &payload));
      format::CommitRecord c;
      AGENTMEM_RETURN_IF_ERROR(format::DecodeCommit(payload, page_no, &c));
      if (c.commit_seq != sb.commit_seq || c.txn_start != sb.checkpoint || c.page_count != pages ||
          pos + padded != sb.scan_from || !have_state || c.next_episode_id != state.next_episode_id ||
          c.next_fact_id != state.next_fact_id || c.next_block_version != state.next_block_version) {
        return damaged(pos, "its commit does not match the superblock or its sections");
      }
      pos += padded;
      break;
    }
    if (h.type != static_cast<uint8_t>(PageType::kCheckpoint) || (h.flags & format::kPageFlagZstd)) {
      return damaged(pos, "not a checkpoint page");
    }
    // Mapped rather than read: the graph section is used where it lies.
    // Spare room after the page lets the graph take new nodes in place for a while.
    std::shared_ptr<MappedBytes> bytes;
    AGENTMEM_RETURN_IF_ERROR(file_->MapPrivate(pos, padded, padded / 4 + (size_t{1} << 20), &bytes));
    const uint32_t stored = format::UnmaskCrc(format::DecodeFixed32(bytes->data()));
    std::string_view payload(bytes->data() + format::kPageHeaderSize, h.length);
    const bool is_graph = h.length >= format::kSectionHeaderSize &&
                          format::DecodeFixed32(payload.data()) ==
                              static_cast<uint32_t>(format::CheckpointSection::kGraph);
    if (is_graph && !graph_crc.valid()) {
      // The graph page is most of the checkpoint: its checksum is computed on
      // another core while the rest loads, and checked before the open returns
      // (the graph is only checked, not searched, before then).
      const char* p = bytes->data() + 4;
      graph_crc = std::async(std::launch::async, [p, padded] { return format::Crc32c(p, padded - 4); });
      graph_crc_stored = stored;
      graph_crc_page = page_no;
    } else if (stored != format::Crc32c(bytes->data() + 4, padded - 4)) {
      return AGENTMEM_CORRUPTION(kCorruptChecksum, page_no, "page %lld (checkpoint): checksum mismatch",
                                 static_cast<long long>(page_no));
    }
    format::CheckpointSection kind;
    std::string_view body;
    AGENTMEM_RETURN_IF_ERROR(format::SplitSection(payload, page_no, &kind, &body));
    if (kind == format::CheckpointSection::kState && !have_state) {
      AGENTMEM_RETURN_IF_ERROR(format::DecodeCheckpointState(body, page_no, &state));
      have_state = true;
    } else if (kind == format::CheckpointSection::kBm25 && !bm25) {
      bm25_body = body;
      bm25_page = page_no;
      bm25 = std::move(bytes);
    } else if (kind == format::CheckpointSection::kGraph && !graph) {
      graph_at = format::kPageHeaderSize + format::kSectionHeaderSize;
      graph_size = body.size();
      graph = std::move(bytes);
    } else {
      return damaged(pos, "a section repeats");
    }
    pages++;
    pos += padded;
  }
  if (pos != sb.scan_from) return damaged(sb.checkpoint, "no commit ends the checkpoint");
  AGENTMEM_RETURN_IF_ERROR(ImportCheckpointState(state));
  if (bm25) {
    std::vector<format::Bm25Partition> parts;
    AGENTMEM_RETURN_IF_ERROR(format::DecodeBm25Directory(bm25_body, bm25_page, state.strings.size(), &parts));
    for (const format::Bm25Partition& p : parts) {
      Status s = recall_->AttachBm25(state.strings[p.user], bm25_body.data() + p.offset, p.size);
      if (!s.ok()) {
        return AGENTMEM_CORRUPTION(kCorruptIndex, bm25_page, "page %lld (checkpoint bm25): %s",
                                   static_cast<long long>(bm25_page), s.message().c_str());
      }
    }
    recall_bm25_owner_ = std::move(bm25);
  }
  if (graph && graph_size > 0) {
    // New nodes after the checkpoint go to the heap (the index grows there);
    // the mapped records stay shared with the page cache until written.
    const size_t spare = graph->size() - graph_at - graph_size;  // padding; the spare room follows
    Status s = recall_->MapGraph(graph->data() + graph_at, graph_size,
                                 spare + graph->size() / 4 + (size_t{1} << 20), graph);
    if (!s.ok()) {
      // A damaged byte fails the checksum too: that is the better report.
      if (graph_crc.valid() && graph_crc.get() != graph_crc_stored) {
        return AGENTMEM_CORRUPTION(kCorruptChecksum, graph_crc_page,
                                   "page %lld (checkpoint): checksum mismatch",
                                   static_cast<long long>(graph_crc_page));
      }
      return AGENTMEM_CORRUPTION(kCorruptIndex, graph_crc_page, "page %lld (checkpoint graph): %s",
                                 static_cast<long long>(graph_crc_page), s.message().c_str());
    }
  }
  if (graph_crc.valid() && graph_crc.get() != graph_crc_stored) {
    recall_.reset();  // it points into the page that failed
    return AGENTMEM_CORRUPTION(kCorruptChecksum, graph_crc_page,
                               "page %lld (checkpoint): checksum mismatch",
                               static_cast<long long>(graph_crc_page));
  }
  checkpoint_end_ = sb.scan_from;
  checkpoint_size_ = sb.scan_from - sb.checkpoint;
  return Status::OK();
}

}  // namespace agentmem::engine

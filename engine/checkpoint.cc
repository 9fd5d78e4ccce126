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
// recall index, and the bm25 and graph sections are read once into memory
// (File::ReadPrivate) and used there (Bm25Index::AttachFrozen,
// HnswIndex::Map). Then the scan continues at scan_from.
#include <algorithm>
#include <future>
#include <type_traits>
#include <unordered_map>

#include "engine/database.h"
#include "engine/storage/pager.h"
#include "format/page.h"
#include "index/vector/hnsw_mapped.h"

namespace agentmem::engine {

using format::CheckpointState;
using format::PageType;

// REQUIRES: recall_ (WriteCheckpoint makes it).
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
  st.episodes.reserve(catalog_.episodes().size());
  Status status;
  catalog_.episodes().ForEach([&](uint64_t id, const EpisodeEntry& e) {
    if (!status.ok() || !(e.present || e.forgotten)) return;
    const EpisodeAttrs* attrs = nullptr;
    const std::string *session = nullptr, *role = nullptr;
    format::CheckpointEpisode c;
    c.id = id;
    if (e.forgotten) {
      // Kept only while the graph holds its node (until VACUUM).
      if (!recall_->ExportEntry(id, &attrs, &session, &role) || attrs->node == EpisodeAttrs::kNoNode) {
        return;
      }
      c.forgotten = true;
    } else if (!recall_->ExportEntry(id, &attrs, &session, &role)) {
      status = StatusF(kInternal, "checkpoint: episode %llu is not in the recall index",
                       static_cast<unsigned long long>(id));
      return;
    }
    c.page_offset = e.loc.page_offset;
    c.slot = e.loc.slot;
    c.user = user_string[e.user];
    c.session = intern(*session);
    c.role = intern(*role);
    c.ts = e.ts;
    c.has_vector = attrs->has_vector;
    c.node = attrs->node;
    st.episodes.push_back(c);
  });
  AGENTMEM_RETURN_IF_ERROR(status);
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

Status Database::WriteCheckpoint(uint64_t max_end) {
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
  if (std::max({state.size(), graph.size(), bm25.size()}) > format::kMaxPagePayload) {
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
  if (start + buf.size() > max_end) return Status::OK();
  Status s = file_->WriteAt(start, buf);
  if (!s.ok()) {
    // A write that failed (a full disk) leaves bytes after the last commit
    // that nothing vouches for: a torn tail to every reader, which the next
    // writer would cut. Cut now, to give the space back. The commits before
    // stay as they were, so the handle goes on (a failed sync, below, is
    // different: fsync is never retried).
    file_->Truncate(start).IgnoreError();
    return s;
  }
  s = Sync();  // makes its failure sticky
  if (!s.ok()) return s;
  synced_through_ = start + buf.size();
  DecodedTxn d;
  d.commit = c;
  d.checkpoint_start = start;
  d.end = start + buf.size();
  AGENTMEM_RETURN_IF_ERROR(Committed(d, 4, "checkpoint"));
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
  // Each name is looked up once (per string of the state section), not once
  // per episode: 100,000 entries share a few users, sessions and roles.
  constexpr uint32_t kUnset = UINT32_MAX;
  std::vector<uint32_t> catalog_user(st.strings.size(), kUnset), user(st.strings.size(), kUnset),
      session(st.strings.size(), kUnset), role(st.strings.size(), kUnset);
  auto name = [&](std::vector<uint32_t>* ids, uint32_t s, auto intern) {
    uint32_t& id = (*ids)[s];
    if (id == kUnset) id = intern(st.strings[s]);
    return id;
  };
  catalog_.ReserveEpisodes(st.episodes.size());
  recall_->ReserveEntries(st.episodes.size());
  std::vector<uint64_t>* session_ids = nullptr;  // of (last_user, last_session)
  uint32_t last_user = kUnset, last_session = kUnset;
  std::vector<uint64_t> forgotten;
  for (const format::CheckpointEpisode& e : st.episodes) {
    const uint64_t id = e.id;
    const RecordLoc loc{e.page_offset, e.slot};
    const uint32_t cu = name(&catalog_user, e.user, [&](const std::string& s) { return catalog_.UserIndex(s); });
    if (e.forgotten) {
      forgotten.push_back(id);
      catalog_.AddForgottenEntry(id, cu, e.ts, loc);
    } else {
      // A new user may move the others, but not their session lists (the
      // nodes of a std::map stay put when it is moved).
      static_assert(std::is_nothrow_move_constructible_v<UserEntry>);
      if (cu != last_user || e.session != last_session) {
        session_ids = catalog_.SessionIds(cu, st.strings[e.session]);
        last_user = cu;
        last_session = e.session;
      }
      catalog_.AddEpisodeEntry(id, cu, session_ids, e.ts, loc);
    }
    AGENTMEM_RETURN_IF_ERROR(recall_->AddEntry(
        id, name(&user, e.user, [&](const std::string& s) { return recall_->InternUser(s); }),
        name(&session, e.session, [&](const std::string& s) { return recall_->InternSession(s); }),
        name(&role, e.role, [&](const std::string& s) { return recall_->InternRole(s); }), e.ts,
        e.has_vector, e.node));
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

// The pages are read on this thread, in file order; the state section is
// imported on another while the bm25 and graph pages are checked here (each
// read once, in pieces: checksum, and for the graph its level-0 records), so
// that an open costs about one pass over the checkpoint's bytes.
Status Database::LoadCheckpoint(const format::Superblock& sb) {
  auto damaged = [](uint64_t offset, const char* what) {
    int64_t page_no = static_cast<int64_t>(format::PageNoOf(offset));
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld (checkpoint): %s",
                               static_cast<long long>(page_no), what);
  };
  auto bad_checksum = [](int64_t page_no) {
    return AGENTMEM_CORRUPTION(kCorruptChecksum, page_no, "page %lld (checkpoint): checksum mismatch",
                               static_cast<long long>(page_no));
  };
  uint64_t size = 0;
  AGENTMEM_RETURN_IF_ERROR(file_->Size(&size));
  if (sb.scan_from > size) return damaged(sb.checkpoint, "the file ends inside the checkpoint");
  CheckpointState state;
  bool have_state = false;
  std::future<Status> imported;  // ImportCheckpointState(state), on another thread
  // Whatever happens below, the import is waited for before `state` goes away.
  struct Join {
    std::future<Status>* f;
    ~Join() {
      if (f->valid()) f->wait();
    }
  } join{&imported};
  std::shared_ptr<MappedBytes> graph;  // the graph page, mapped whole
  size_t graph_at = 0, graph_size = 0;
  int64_t graph_page = 0;
  bool graph_checked = false;  // its level-0 records went through MappedRecordCheck
  std::shared_ptr<MappedBytes> bm25;  // the bm25 page, mapped whole
  std::string_view bm25_body;
  int64_t bm25_page = 0;
  uint32_t pages = 0;
  bool committed = false;
  uint64_t pos = sb.checkpoint;
  const size_t head_size = format::kPageHeaderSize + format::kSectionHeaderSize;
  // A checkpoint page read whole into *page and verified by the pager (not
  // kept in its cache), then split (SplitSection's errors); *body points
  // into (*page)->payload. (The page lies inside the file: scan_from is at
  // most its size.)
  auto read_whole = [&](uint64_t at, const format::PageHeader& h, PageRef* page,
                        std::string_view* body) -> Status {
    const int64_t page_no = static_cast<int64_t>(h.page_no);
    if (Status s = pager_.ReadPage(at, page, false); !s.ok()) {
      return s.code() == kCorruptChecksum ? bad_checksum(page_no) : s;
    }
    format::CheckpointSection kind;
    return format::SplitSection((*page)->payload, page_no, &kind, body);
  };
  std::string head;
  while (pos < sb.scan_from) {
    AGENTMEM_RETURN_IF_ERROR(file_->ReadAt(pos, std::min<uint64_t>(head_size, sb.scan_from - pos), &head));
    if (head.size() < format::kPageHeaderSize) return damaged(pos, "a page runs past the checkpoint's end");
    format::PageHeader h;
    AGENTMEM_RETURN_IF_ERROR(format::PeekPageHeader(head, pos, header_.salt, &h));
    const uint64_t padded = format::PaddedPageSize(h.length);
    if (pos + padded > sb.scan_from) return damaged(pos, "a page runs past the checkpoint's end");
    const int64_t page_no = static_cast<int64_t>(h.page_no);
    if (h.type == static_cast<uint8_t>(PageType::kCommit)) {
      PageRef commit;
      AGENTMEM_RETURN_IF_ERROR(pager_.ReadPage(pos, &commit, false));
      format::CommitRecord c;
      AGENTMEM_RETURN_IF_ERROR(format::DecodeCommit(commit->payload, page_no, &c));
      if (c.commit_seq != sb.commit_seq || c.txn_start != sb.checkpoint || c.page_count != pages ||
          pos + padded != sb.scan_from || !have_state || c.next_episode_id != state.next_episode_id ||
          c.next_fact_id != state.next_fact_id || c.next_block_version != state.next_block_version) {
        return damaged(pos, "its commit does not match the superblock or its sections");
      }
      pos += padded;
      committed = true;
      break;
    }
    if (h.type != static_cast<uint8_t>(PageType::kCheckpoint) || (h.flags & format::kPageFlagZstd)) {
      return damaged(pos, "not a checkpoint page");
    }
    const uint32_t kind_word = head.size() >= head_size && h.length >= format::kSectionHeaderSize
                                   ? format::DecodeFixed32(head.data() + format::kPageHeaderSize)
                                   : 0;
    if (kind_word == static_cast<uint32_t>(format::CheckpointSection::kState)) {
      // Read whole (it is decoded into memory anyway), then imported on another thread.
      std::string_view body;
      PageRef page;  // (the decoded state holds copies)
      AGENTMEM_RETURN_IF_ERROR(read_whole(pos, h, &page, &body));
      if (have_state) return damaged(pos, "a section repeats");
      AGENTMEM_RETURN_IF_ERROR(format::DecodeCheckpointState(body, page_no, &state));
      have_state = true;
      imported = std::async(std::launch::async, [this, &state] { return ImportCheckpointState(state); });
    } else if (kind_word == static_cast<uint32_t>(format::CheckpointSection::kBm25)) {
      if (bm25) return damaged(pos, "a section repeats");
      format::PageChecksum sum;
      std::shared_ptr<MappedBytes> bytes;
      AGENTMEM_RETURN_IF_ERROR(file_->ReadPrivate(
          pos, padded, 0,
          [&](uint64_t, std::string_view piece) {
            sum.Update(piece);
            return Status::OK();
          },
          &bytes));
      if (!sum.Matches()) return bad_checksum(page_no);
      format::CheckpointSection kind;
      AGENTMEM_RETURN_IF_ERROR(format::SplitSection(
          std::string_view(bytes->data() + format::kPageHeaderSize, h.length), page_no, &kind, &bm25_body));
      bm25_page = page_no;
      bm25 = std::move(bytes);
    } else if (kind_word == static_cast<uint32_t>(format::CheckpointSection::kGraph)) {
      if (graph) return damaged(pos, "a section repeats");
      // The graph's level-0 records are checked from the same pieces that
      // are checksummed, and not read again when the image is mapped.
      const uint64_t image_at = head_size;  // in the page
      const uint64_t image_size = h.length - format::kSectionHeaderSize;
      index::MappedRecordCheck check;
      Status check_status;
      bool checking = false;
      auto feed = [&](uint64_t at, std::string_view piece) {
        // An empty image: the file has no graph (checked below).
        if (image_size == 0 || !check_status.ok() || at + piece.size() <= image_at) return;
        if (!checking) {
          if (at > image_at || at + piece.size() < image_at + std::min<uint64_t>(64, image_size)) {
            return;  // no image head in the first piece: Map() checks it all
          }
          check_status = check.Start(piece.substr(image_at - at), image_size);
          checking = check_status.ok();
        }
        if (checking) {
          const uint64_t from = std::max(at, image_at);
          const uint64_t to = std::min<uint64_t>(at + piece.size(), image_at + image_size);
          if (from < to) check_status = check.Feed(from - image_at, piece.substr(from - at, to - from));
        }
      };
      format::PageChecksum sum;
      std::shared_ptr<MappedBytes> bytes;  // spare room lets the graph take new nodes in place
      AGENTMEM_RETURN_IF_ERROR(file_->ReadPrivate(
          pos, padded, padded / 4 + (size_t{1} << 20),
          [&](uint64_t at, std::string_view piece) {
            feed(at, piece);
            sum.Update(piece);
            return Status::OK();
          },
          &bytes));
      if (!sum.Matches()) return bad_checksum(page_no);
      if (checking && check_status.ok()) check_status = check.Finish();
      if (!check_status.ok()) {
        return AGENTMEM_CORRUPTION(kCorruptIndex, page_no, "page %lld (checkpoint graph): %s",
                                   static_cast<long long>(page_no), check_status.message().c_str());
      }
      std::string_view payload(bytes->data() + format::kPageHeaderSize, h.length);
      format::CheckpointSection kind;
      std::string_view body;
      AGENTMEM_RETURN_IF_ERROR(format::SplitSection(payload, page_no, &kind, &body));
      graph_at = head_size;
      graph_size = body.size();
      graph_page = page_no;
      graph_checked = checking;
      graph = std::move(bytes);
    } else {
      // No known section kind: checked as a whole page first (a damaged kind
      // is a bad checksum), then SplitSection refuses it ("unknown section",
      // "no section header"). read_whole cannot succeed here.
      std::string_view body;
      PageRef page;
      return read_whole(pos, h, &page, &body);
    }
    pages++;
    pos += padded;
  }
  // (A page never runs past scan_from, and a commit ends there.)
  if (!committed) return damaged(sb.checkpoint, "no commit ends the checkpoint");
  // All three sections (§5.8): without the bm25 one the text index would be
  // silently empty, without the graph the vectors of the state's episodes
  // would have no nodes. (The commit checked that the state was there.)
  if (!bm25 || !graph) {
    return damaged(sb.checkpoint, "a section is missing");
  }
  AGENTMEM_RETURN_IF_ERROR(imported.get());
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
  auto bad_graph = [&](const std::string& why) {
    return AGENTMEM_CORRUPTION(kCorruptIndex, graph_page, "page %lld (checkpoint graph): %s",
                               static_cast<long long>(graph_page), why.c_str());
  };
  if (graph_size == 0) {
    // What a file that has never held a vector writes: then no episode has one.
    for (const format::CheckpointEpisode& e : state.episodes) {
      if (e.has_vector) return bad_graph("empty, but episode " + std::to_string(e.id) + " has a vector");
    }
  } else {
    // New nodes after the checkpoint go first to the room after the image
    // (the page's padding and ReadPrivate's spare bytes), then to the heap.
    const size_t spare = graph->size() - graph_at - graph_size;
    Status s = recall_->MapGraph(graph->data() + graph_at, graph_size, spare, graph, graph_checked);
    if (!s.ok()) return bad_graph(s.message());
  }
  checkpoint_end_ = sb.scan_from;
  checkpoint_size_ = sb.scan_from - sb.checkpoint;
  return Status::OK();
}

}  // namespace agentmem::engine

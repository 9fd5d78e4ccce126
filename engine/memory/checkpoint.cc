// engine/memory/checkpoint.cc -- checkpoints: the snapshot folded into one
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
// that ends them (storage/checkpoint_reader.h) -- the state section is
// decoded into the catalog and the recall index, and the bm25 and graph
// sections are read once into memory (File::ReadPrivate) and used there
// (Bm25Index::AttachFrozen, HnswIndex::Map). Then the scan continues at
// scan_from.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <new>
#include <system_error>
#include <type_traits>
#include <unordered_map>

#include "engine/memory/database.h"
#include "engine/storage/checkpoint_reader.h"
#include "engine/storage/scan.h"
#include "format/coding.h"
#include "format/page.h"
#include "format/records.h"
#include "index/vector/hnsw.h"

namespace agentmem::engine {

using format::CheckpointState;
using format::PageType;

// REQUIRES: recall_ (WriteCheckpoint makes it).
Status Database::BuildCheckpointState(CheckpointState* out) const {
  CheckpointState st;
  st.next_episode_id = next_episode_id_;
  st.next_fact_id = next_fact_id_;
  st.next_block_version = next_block_version_;
  st.pages = log_->pages();
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

// The state section is built with room for its page header in front and
// becomes its page in place (format::SealPage); the bm25 and graph sections,
// the largest, are never held whole: each is laid out first, then written in
// pieces (one user's image; a few hundred KiB of graph records) with its page
// header last (format::PageStream). A checkpoint takes the memory of the
// state page and one piece beyond the indexes.
Status Database::WriteCheckpoint(uint64_t max_end) {
  AGENTMEM_RETURN_IF_ERROR(EnsureRecallIndex());
  // Every vector gets its node first: a checkpoint's graph holds them all.
  recall_->FlushGraph().IgnoreError();
  if (!recall_->broken().ok()) return Status::OK();  // nothing sound to fold; keep the log
  const uint64_t start = log_->end();
  const uint64_t salt = log_->header().salt;
  uint64_t at = start;
  auto new_section = [] { return std::string(format::kPageHeaderSize, '\0'); };
  // False, when the section is too large for one page in format v1: then no
  // checkpoint is written and the log is scanned as before.
  auto seal = [&](std::string* section) {
    if (section->size() - format::kPageHeaderSize > format::kMaxPagePayload) return false;
    format::SealPage(PageType::kCheckpoint, at, salt, 1, section);
    at += section->size();
    return true;
  };
  // The state section; its string table names the users of the bm25 section.
  std::unordered_map<std::string, uint32_t> string_index;
  std::string state = new_section();
  {
    CheckpointState st;
    AGENTMEM_RETURN_IF_ERROR(BuildCheckpointState(&st));
    format::EncodeCheckpointState(st, &state);
    if (!seal(&state)) return Status::OK();
    for (uint32_t i = 0; i < st.strings.size(); i++) string_index.emplace(std::move(st.strings[i]), i);
  }
  // The BM25 indexes, frozen: laid out now, written below.
  const RecallIndex::Bm25Plan bm25 =
      recall_->PlanBm25([&](const std::string& user) { return string_index.at(user); });
  std::string bm25_header;
  format::EncodeBm25SectionHeader(&bm25_header);
  const uint64_t bm25_length = bm25_header.size() + bm25.size;
  if (bm25_length > format::kMaxPagePayload) return Status::OK();
  const uint64_t bm25_at = at;
  format::PageStream bm25_page(PageType::kCheckpoint, bm25_at, salt, 1, static_cast<uint32_t>(bm25_length));
  at += bm25_page.size();
  std::string graph_header;
  format::EncodeGraphSectionHeader(&graph_header);
  Result<size_t> graph_image = recall_->GraphSize();
  AGENTMEM_RETURN_IF_ERROR(graph_image.status());
  const uint64_t graph_length = graph_header.size() + graph_image.value();
  if (graph_length > format::kMaxPagePayload) return Status::OK();
  const uint64_t graph_at = at;
  format::PageStream graph_page(PageType::kCheckpoint, graph_at, salt, 1,
                                static_cast<uint32_t>(graph_length));
  at += graph_page.size();
  format::CommitRecord c;
  c.commit_seq = log_->seq() + 1;
  c.txn_start = start;
  c.durable_through = std::min(log_->synced_through(), start);
  c.page_count = 3;
  c.commit_ts = Now();
  c.next_episode_id = next_episode_id_;
  c.next_fact_id = next_fact_id_;
  c.next_block_version = next_block_version_;
  const uint64_t commit_at = at;
  const std::string commit = format::EncodePage(PageType::kCommit, at, salt, 1, format::EncodeCommit(c), false);
  at += commit.size();
  if (at > max_end) return Status::OK();
  using Emit = std::function<Status(std::string_view)>;
  AGENTMEM_RETURN_IF_ERROR(log_->AppendAndSync([&](const Log::Put& put) {
    // A streamed section: its pieces after the page header's room, then the
    // padding, then the header.
    auto stream = [&](format::PageStream* page, uint64_t page_at, uint64_t length,
                      const std::string& section_header, const std::function<Status(const Emit&)>& body,
                      const char* name) {
      uint64_t pos = page_at + format::kPageHeaderSize;
      const Emit emit = [&](std::string_view piece) {
        page->Add(piece);
        const uint64_t piece_at = pos;
        pos += piece.size();
        return put(piece_at, piece);
      };
      AGENTMEM_RETURN_IF_ERROR(emit(section_header));
      AGENTMEM_RETURN_IF_ERROR(body(emit));
      if (pos != page_at + format::kPageHeaderSize + length) {
        return StatusF(kInternal, "checkpoint: the %s section is not the size it was laid out with", name);
      }
      AGENTMEM_RETURN_IF_ERROR(put(pos, page->padding()));
      return put(page_at, page->header());
    };
    AGENTMEM_RETURN_IF_ERROR(put(start, state));
    AGENTMEM_RETURN_IF_ERROR(stream(&bm25_page, bm25_at, bm25_length, bm25_header,
                                    [&](const Emit& emit) { return recall_->EmitBm25(bm25, emit); },
                                    "bm25"));
    AGENTMEM_RETURN_IF_ERROR(stream(&graph_page, graph_at, graph_length, graph_header,
                                    [&](const Emit& emit) { return recall_->EmitGraph(emit); },
                                    "graph"));
    return put(commit_at, commit);
  }));
  DecodedTxn d;
  d.commit = c;
  d.checkpoint_start = start;
  d.end = at;
  AGENTMEM_RETURN_IF_ERROR(Committed(d, 4, "checkpoint"));
  recall_->NoteGraphWritten();  // later deltas build on the checkpoint's graph
  wrote_checkpoint_ = true;
  return log_->WriteSuperblock(start);
}

Status Database::MaybeCheckpoint(bool closing) {
  if (opts_.checkpoint_bytes == 0 || opts_.sync == SyncMode::kOff || !sticky().ok() ||
      explicit_txn_ || log_->end() <= log_->checkpoint_end()) {
    return Status::OK();
  }
  const uint64_t tail = log_->end() - log_->checkpoint_end();
  const bool due = closing ? tail >= opts_.checkpoint_bytes
                           : tail >= std::max(16 * opts_.checkpoint_bytes, log_->checkpoint_size());
  if (!due) return Status::OK();
  bool acquired = false;
  AGENTMEM_RETURN_IF_ERROR(TryLockNoWait(&acquired));
  if (!acquired) return Status::OK();  // another handle writes: it will checkpoint
  if (log_->end() - log_->checkpoint_end() < tail / 2) return Status::OK();  // someone else just did
  return WriteCheckpoint();
}

namespace {

constexpr uint32_t kUnset = UINT32_MAX;

// Each name is looked up once (per string of the state section), not once
// per episode: 100,000 entries share a few users, sessions and roles.
// `ids`: by string index, kUnset until looked up.
template <class Intern>
uint32_t NameOf(const CheckpointState& st, std::vector<uint32_t>* ids, uint32_t s, Intern intern) {
  uint32_t& id = (*ids)[s];
  if (id == kUnset) id = intern(st.strings[s]);
  return id;
}

// The state's episodes into the catalog: their users, sessions and records.
void ImportCatalogEpisodes(const CheckpointState& st, Catalog* catalog) {
  std::vector<uint32_t> user(st.strings.size(), kUnset);
  catalog->ReserveEpisodes(st.episodes.size());
  std::vector<uint64_t>* session_ids = nullptr;  // of (last_user, last_session)
  uint32_t last_user = kUnset, last_session = kUnset;
  for (const format::CheckpointEpisode& e : st.episodes) {
    const RecordLoc loc{e.page_offset, e.slot};
    const uint32_t u =
        NameOf(st, &user, e.user, [&](const std::string& s) { return catalog->UserIndex(s); });
    if (e.forgotten) {
      catalog->AddForgottenEntry(e.id, u, e.ts, loc);
      continue;
    }
    // A new user may move the others, but not their session lists (the
    // nodes of a std::map stay put when it is moved).
    static_assert(std::is_nothrow_move_constructible_v<UserEntry>);
    if (u != last_user || e.session != last_session) {
      session_ids = catalog->SessionIds(u, st.strings[e.session]);
      last_user = u;
      last_session = e.session;
    }
    catalog->AddEpisodeEntry(e.id, u, session_ids, e.ts, loc);
  }
}

// The state's episodes into the recall index: their filter attributes and
// graph nodes; the forgotten ones' ids appended to *forgotten.
Status ImportRecallEpisodes(const CheckpointState& st, RecallIndex* recall,
                            std::vector<uint64_t>* forgotten) {
  std::vector<uint32_t> user(st.strings.size(), kUnset), session(st.strings.size(), kUnset),
      role(st.strings.size(), kUnset);
  recall->ReserveEntries(st.episodes.size());
  for (const format::CheckpointEpisode& e : st.episodes) {
    if (e.forgotten) forgotten->push_back(e.id);
    AGENTMEM_RETURN_IF_ERROR(recall->AddEntry(
        e.id, NameOf(st, &user, e.user, [&](const std::string& s) { return recall->InternUser(s); }),
        NameOf(st, &session, e.session,
               [&](const std::string& s) { return recall->InternSession(s); }),
        NameOf(st, &role, e.role, [&](const std::string& s) { return recall->InternRole(s); }),
        e.ts, e.has_vector, e.node));
  }
  return Status::OK();
}

}  // namespace

Status Database::ImportCheckpointState(const CheckpointState& st) {
  for (const auto& [k, v] : st.meta) catalog_.SetMeta(k, v);
  AGENTMEM_RETURN_IF_ERROR(EnsureRecallIndex());
  // The catalog's entries on a thread of their own beside the recall
  // index's (two structures that share nothing), or here when no thread
  // can be started.
  std::future<void> catalog;
  try {
    catalog = std::async(std::launch::async, ImportCatalogEpisodes, std::cref(st), &catalog_);
  } catch (const std::system_error&) {
    ImportCatalogEpisodes(st, &catalog_);
  }
  std::vector<uint64_t> forgotten;
  const Status recall = ImportRecallEpisodes(st, recall_.get(), &forgotten);
  if (catalog.valid()) catalog.get();
  AGENTMEM_RETURN_IF_ERROR(recall);
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
  log_->set_pages(st.pages);
  return Status::OK();
}

namespace {

// Reads the episodes page at `offset`, checked, and splits its records
// (views of the mapping, or of *storage for a page stored compressed).
Status ReadEpisodesPage(PageReader* reader, uint64_t offset, format::PageHeader* header,
                        std::string* storage, std::vector<std::string_view>* records) {
  std::string_view payload;
  AGENTMEM_RETURN_IF_ERROR(reader->ReadView(offset, header, storage, &payload));
  if (header->type != static_cast<uint8_t>(format::PageType::kEpisodes)) {
    return Status(kCorruptIndex, "a node's episode is not on an episodes page");
  }
  return format::SplitRecords(payload, header->record_count, static_cast<int64_t>(header->page_no),
                              records);
}

// The stored vector `bytes` where it lies, when it is float32 of `dim`
// components inside the mapping [begin, end) (a page stored uncompressed);
// null otherwise.
const float* InMapping(format::VectorType type, std::string_view bytes, uint32_t dim, const char* begin,
                       const char* end) {
  const auto at = reinterpret_cast<uintptr_t>(bytes.data());
  if (type != format::VectorType::kF32 || bytes.size() != size_t{4} * dim || begin == nullptr ||
      at < reinterpret_cast<uintptr_t>(begin) || at >= reinterpret_cast<uintptr_t>(end)) {
    return nullptr;
  }
  return reinterpret_cast<const float*>(bytes.data());
}

// The vectors of the graph's nodes, from their episodes' records: node n is
// the n-th episode of the state section with a node, and its label is that
// episode's id. Pages are read in file order, each checked as the scan
// checks it, through one read window or where the file is mapped. A
// node whose episode page is damaged gets a zero vector and is listed in
// hidden(): the open goes on (as it does for any damaged record page that it
// does not need), the node stays a waypoint of the graph but is never a hit,
// and reading the episode reports the page.
class NodeVectorSource {
 public:
  // `at`: the index in `episodes` to look from (the first node's entry or
  // any entry before it). `mapped`: the file's first `file_size` bytes, or
  // null to read them.
  NodeVectorSource(File* file, uint64_t file_size, uint64_t salt,
                   const std::vector<format::CheckpointEpisode>& episodes, uint32_t dim, size_t at,
                   const char* mapped)
      : reader_(file, file_size, salt, mapped),
        episodes_(episodes),
        dim_(dim),
        vector_(dim),
        at_(at),
        mapped_(mapped),
        mapped_end_(mapped ? mapped + file_size : nullptr) {}

  // The vector of the next node, which must be labelled `label`; nullptr
  // (with status() telling why when it is not just missing) otherwise.
  // Valid until the next call, or for as long as the mapping when
  // in_place().
  const float* Next(uint64_t label) {
    in_place_ = false;
    while (at_ < episodes_.size() && episodes_[at_].node == UINT32_MAX) at_++;
    if (!status_.ok() || at_ == episodes_.size() || episodes_[at_].id != label) return nullptr;
    const format::CheckpointEpisode& e = episodes_[at_++];
    if (page_at_ != e.page_offset) {
      page_at_ = e.page_offset;
      page_status_ = ReadEpisodesPage(&reader_, e.page_offset, &header_, &storage_, &records_);
      if (!page_status_.ok() && page_status_.primary() != kCorrupt) status_ = page_status_;
    }
    if (!status_.ok()) return nullptr;
    if (!page_status_.ok()) return Hide(label);
    if (e.slot >= records_.size()) return nullptr;
    uint64_t id = 0;
    std::string_view bytes;
    format::VectorType type;
    if (!format::EpisodeVectorOf(records_[e.slot], static_cast<int64_t>(header_.page_no), &id, &bytes,
                                 &type)
             .ok()) {
      return Hide(label);
    }
    if (id != label) return nullptr;
    if (const float* v = InMapping(type, bytes, dim_, mapped_, mapped_end_)) {
      in_place_ = true;
      return v;
    }
    if (!format::StoredToFloats(type, bytes, dim_, vector_.data())) return nullptr;
    return vector_.data();
  }
  // Whether the last vector given lies in the mapped file.
  bool in_place() const { return in_place_; }
  // OK, or the I/O error that stopped it.
  const Status& status() const { return status_; }
  const std::vector<uint64_t>& hidden() const { return hidden_; }

 private:
  const float* Hide(uint64_t label) {
    hidden_.push_back(label);
    std::fill(vector_.begin(), vector_.end(), 0.0f);
    return vector_.data();
  }

  PageReader reader_;
  const std::vector<format::CheckpointEpisode>& episodes_;
  uint32_t dim_;
  std::vector<float> vector_;
  size_t at_;
  const char* mapped_;
  const char* mapped_end_;
  bool in_place_ = false;
  uint64_t page_at_ = 0;  // the page read last, and what came of it
  format::PageHeader header_;
  std::string storage_;
  Status page_status_;
  std::vector<std::string_view> records_;
  Status status_;
  std::vector<uint64_t> hidden_;
};

// The graph's vectors of a mapped file, read when a search or an insert
// first needs each (HnswIndex::MapVectors::read), not at open: the node's
// episodes page is checked then (checksum, records, the record's id against
// the node's label), on whichever thread needs it. A float32 vector in a page
// stored uncompressed is used where it lies; any other is copied into new
// memory (no memory for it throws std::bad_alloc). A page that fails its
// checks makes the node unreadable (never a hit), as the open does for the
// pages it reads.
class LazyVectors {
 public:
  struct Where {
    uint64_t page;  // the episodes page's offset
    uint32_t slot;  // the record's index in the page
  };
  LazyVectors(std::shared_ptr<const MappedBytes> map, uint64_t file_size, uint64_t salt,
              uint32_t dim, index::Metric metric, std::vector<Where> where)
      : map_(std::move(map)), file_size_(file_size), salt_(salt), dim_(dim), metric_(metric),
        where_(std::move(where)) {}

  const float* Read(uint32_t node, uint64_t label, float* scale) {
    if (node >= where_.size()) return nullptr;
    const Where& w = where_[node];
    // The page read last, when no other thread holds it: the index's reader
    // thread goes through the nodes in file order. Otherwise the page is
    // read for this node alone.
    std::unique_lock last(last_mu_, std::try_to_lock);
    Page own;
    Page* page = &own;
    if (last.owns_lock()) {
      page = &last_;
      if (last_at_ != w.page) {
        last_at_ = 0;
        Load(w.page, &last_);
        last_at_ = w.page;
      }
    } else {
      Load(w.page, &own);
    }
    if (!page->ok || w.slot >= page->records.size()) return nullptr;
    uint64_t id = 0;
    std::string_view bytes;
    format::VectorType type;
    if (!format::EpisodeVectorOf(page->records[w.slot], page->page_no, &id, &bytes, &type).ok() || id != label) {
      return nullptr;
    }
    if (const float* v = InMapping(type, bytes, dim_, map_->data(), map_->data() + file_size_)) {
      Result<float> s = index::HnswIndex::ScaleFor(metric_, v, dim_);
      if (s.ok() && *s != 0) {
        *scale = *s;
        return v;
      }
    }
    std::vector<float> v(dim_);
    if (!format::StoredToFloats(type, bytes, dim_, v.data())) return nullptr;
    Result<float> s = index::HnswIndex::ScaleFor(metric_, v.data(), dim_);
    if (!s.ok()) return nullptr;
    float* row = NewRow();
    if (row == nullptr) throw std::bad_alloc();  // the search or insert fails, kNoMem
    *scale = index::HnswIndex::KeepCopy(v.data(), dim_, *s, row);
    return row;
  }

 private:
  // An episodes page, checked, and its records (views of the mapping, or
  // of `storage` for a page stored compressed).
  struct Page {
    bool ok = false;
    int64_t page_no = 0;
    std::string storage;
    std::vector<std::string_view> records;
  };
  void Load(uint64_t at, Page* page) const {
    PageReader reader(nullptr, file_size_, salt_, map_->data());  // reads the mapping only
    format::PageHeader header;
    page->ok = ReadEpisodesPage(&reader, at, &header, &page->storage, &page->records).ok();
    page->page_no = static_cast<int64_t>(header.page_no);
  }

  static constexpr size_t kBlockRows = 1024;
  // Room for one copied vector, kept until the index goes; null without memory.
  float* NewRow() {
    std::lock_guard lock(mu_);
    if (blocks_.empty() || used_ == kBlockRows) {
      std::shared_ptr<MappedBytes> block = NewPrivateBytes(kBlockRows * dim_ * sizeof(float));
      if (!block) return nullptr;
      blocks_.push_back(std::move(block));
      used_ = 0;
    }
    return reinterpret_cast<float*>(blocks_.back()->data()) + used_++ * dim_;
  }

  const std::shared_ptr<const MappedBytes> map_;
  const uint64_t file_size_, salt_;
  const uint32_t dim_;
  const index::Metric metric_;
  const std::vector<Where> where_;  // of each node
  std::mutex last_mu_;
  uint64_t last_at_ = 0;  // the offset of last_ (0: none)
  Page last_;
  std::mutex mu_;
  std::vector<std::shared_ptr<MappedBytes>> blocks_;  // the copies
  size_t used_ = 0;  // rows taken in the last block
};

// The graph's vectors, for a checkpoint's image without them (the image
// itself is used where it was read): where each node's vector lies, and its
// scale (HnswIndex::ScaleFor), by every thread that calls Help()
// (ReadCheckpoint's two), in chunks of kChunk nodes taken in order, each
// thread with its own read window. A file mapped (File::MapShared) has only
// its nodes placed: where each node's record lies, its label checked against
// the state section; the vectors are read on first use (LazyVectors). A file
// that cannot be mapped has every vector read now and copied into new
// memory, a block per chunk. A page that fails its checks is reported as
// itself.
class GraphFill {
 public:
  // `map`: the file's first `file_size` bytes mapped (File::MapShared), or
  // null when the file cannot be mapped.
  GraphFill(File* file, uint64_t file_size, std::shared_ptr<const MappedBytes> map, uint64_t salt,
            const CheckpointState& state, const CheckpointSections& sec,
            std::function<Status(Status)> bad_graph)
      : file_(file), salt_(salt), state_(state), sec_(sec), bad_graph_(std::move(bad_graph)),
        file_size_(file_size), map_(std::move(map)) {}

  // Sets the fill up (once, on the first thread here), then fills chunks
  // until none is left or one has failed.
  void Help() {
    std::call_once(once_, [this] { prepared_ = Prepare(); });
    if (!prepared_.ok() || chunks_.empty()) return;
    for (size_t c; !stop_.load(std::memory_order_relaxed) && (c = next_.fetch_add(1)) < chunks_.size();) {
      FillChunk(c);
    }
  }
  // Leaves the chunks not yet begun undone: the fill is not wanted.
  void Cancel() { stop_.store(true); }
  // After every Help() has returned: the set-up's error, then each chunk's in
  // node order.
  Status Done() {
    Help();  // (nothing left to do when the read helped)
    AGENTMEM_RETURN_IF_ERROR(prepared_);
    for (const Chunk& c : chunks_) AGENTMEM_RETURN_IF_ERROR(c.status);
    // Stopped with no chunk failed: cancelled, with chunks left unfilled.
    if (stop_.load()) return Status(kInternal, "checkpoint graph: the fill was cancelled");
    return Status::OK();
  }
  // Where each node's vector lies, for HnswIndex::Map (empty for an image
  // that holds its vectors); the mapping is kept only when a vector lies
  // in it. After Done().
  index::HnswIndex::MapVectors TakeVectors() {
    auto owner = std::make_shared<Owner>();
    if (lazy_) {
      auto lazy = std::make_shared<LazyVectors>(map_, file_size_, salt_, dim_, metric_, std::move(where_));
      owner->map = map_;
      return {std::move(rows_), std::move(scales_), std::move(owner),
              [lazy](uint32_t node, uint64_t label, float* scale) { return lazy->Read(node, label, scale); },
              /*read_ahead=*/true};
    }
    for (Chunk& c : chunks_) {
      if (c.copies) owner->copies.push_back(std::move(c.copies));
      if (c.in_place > 0) owner->map = map_;
    }
    return {std::move(rows_), std::move(scales_), std::move(owner), nullptr, false};
  }
  // Nodes whose episode page was damaged, in each chunk.
  std::vector<uint64_t> hidden() const {
    std::vector<uint64_t> all;
    for (const Chunk& c : chunks_) all.insert(all.end(), c.hidden.begin(), c.hidden.end());
    return all;
  }

 private:
  static constexpr size_t kChunk = 4096;
  struct Chunk {
    size_t entry;  // the index in state.episodes of its first node
    Status status;
    std::vector<uint64_t> hidden;
    std::shared_ptr<MappedBytes> copies;  // kChunk rows, made on the first copy
    size_t in_place = 0;                  // vectors used where the file lies
  };
  // What the vectors' pointers point into.
  struct Owner {
    std::shared_ptr<const MappedBytes> map;
    std::vector<std::shared_ptr<MappedBytes>> copies;
  };
  std::string_view Image() const {
    return std::string_view(sec_.graph->data() + sec_.graph_at, sec_.graph_size);
  }
  Status Prepare() {
    if (sec_.graph_size == 0) return Status::OK();  // no graph: the caller checks the episodes
    const std::string_view image = Image();
    Result<size_t> size = index::HnswIndex::VectorBytes(image);
    if (!size.ok()) return bad_graph_(size.status());
    if (*size == 0) return Status::OK();  // vectors included
    // Memory is sized only for vectors the file can hold: one per node of the
    // state section, in pages that decompress to at most 32 times their size.
    nodes_ = format::DecodeFixed32(image.data() + 24);
    dim_ = format::DecodeFixed32(image.data() + 12);
    metric_ = static_cast<index::Metric>(format::DecodeFixed32(image.data() + 8));
    uint64_t with_node = 0;
    try {
      for (size_t i = 0; i < state_.episodes.size(); i++) {
        if (state_.episodes[i].node == UINT32_MAX) continue;
        if (with_node++ % kChunk == 0) chunks_.push_back(Chunk{i, Status::OK(), {}, nullptr, 0});
      }
      // Without nodes, one empty chunk.
      if (chunks_.empty()) chunks_.push_back(Chunk{0, Status::OK(), {}, nullptr, 0});
      if (nodes_ != with_node || nodes_ * dim_ * 4 > 32 * file_size_) {
        chunks_.clear();
        return bad_graph_(
            Status(kCorruptIndex, "its nodes are not the state section's episodes with a node"));
      }
      rows_.resize(nodes_);
      scales_.resize(nodes_);
    } catch (const std::bad_alloc&) {
      chunks_.clear();
      return Status(kNoMem, "checkpoint graph: out of memory");
    }
    // A file that cannot be mapped is read instead, every vector now; a
    // mapped one's vectors are read on first use (LazyVectors).
    lazy_ = map_ != nullptr;
    if (lazy_) {
      try {
        where_.resize(nodes_);
      } catch (const std::bad_alloc&) {
        chunks_.clear();
        return Status(kNoMem, "checkpoint graph: out of memory");
      }
    }
    return Status::OK();
  }
  // Where each node of chunk c lies (LazyVectors), each node's label checked
  // against its episode in the state section.
  void PlaceChunk(size_t c) {
    Chunk& chunk = chunks_[c];
    const size_t from = c * kChunk, to = std::min<size_t>(from + kChunk, nodes_);
    size_t at = chunk.entry;
    const std::vector<format::CheckpointEpisode>& episodes = state_.episodes;
    Status s = index::HnswIndex::ForEachNodeLabel(Image(), from, to, [&](size_t node, uint64_t label) {
      while (at < episodes.size() && episodes[at].node == UINT32_MAX) at++;
      if (at == episodes.size() || episodes[at].id != label) return false;
      where_[node] = {episodes[at].page_offset, episodes[at].slot};
      at++;
      return true;
    });
    chunk.status = s.ok() ? s : bad_graph_(std::move(s));
    if (!chunk.status.ok()) stop_.store(true);
  }
  // Row `row` of the chunk's copies, made on first use; null without memory.
  float* CopyRow(Chunk* chunk, size_t row) {
    if (!chunk->copies) chunk->copies = NewPrivateBytes(kChunk * dim_ * sizeof(float));
    if (!chunk->copies) return nullptr;
    return reinterpret_cast<float*>(chunk->copies->data()) + row * dim_;
  }
  void FillChunk(size_t c) {
    if (lazy_) return PlaceChunk(c);
    Chunk& chunk = chunks_[c];
    const size_t from = c * kChunk, to = std::min<size_t>(from + kChunk, nodes_);
    NodeVectorSource source(file_, file_size_, salt_, state_.episodes, dim_, chunk.entry,
                            map_ ? map_->data() : nullptr);
    bool no_memory = false;
    Status s = index::HnswIndex::ForEachNodeLabel(Image(), from, to, [&](size_t node, uint64_t label) {
      const float* v = source.Next(label);
      if (v == nullptr) return false;
      Result<float> scale = index::HnswIndex::ScaleFor(metric_, v, dim_);
      if (!scale.ok()) return false;
      if (*scale == 0 || !source.in_place()) {
        float* copy = CopyRow(&chunk, node - from);
        if (copy == nullptr) {
          no_memory = true;
          return false;
        }
        *scale = index::HnswIndex::KeepCopy(v, dim_, *scale, copy);
        v = copy;
      } else {
        chunk.in_place++;
      }
      rows_[node] = v;
      scales_[node] = *scale;
      return true;
    });
    chunk.hidden = source.hidden();
    if (no_memory) s = Status(kNoMem, "checkpoint graph: out of memory");
    chunk.status = !source.status().ok() ? source.status() : s.ok() ? s : bad_graph_(std::move(s));
    if (!chunk.status.ok()) stop_.store(true);
  }

  File* file_;
  uint64_t salt_;
  const CheckpointState& state_;
  const CheckpointSections& sec_;
  const std::function<Status(Status)> bad_graph_;
  std::once_flag once_;
  Status prepared_;
  const uint64_t file_size_;
  const std::shared_ptr<const MappedBytes> map_;
  uint64_t nodes_ = 0;
  uint32_t dim_ = 0;
  index::Metric metric_ = index::Metric::kCosine;
  std::vector<Chunk> chunks_;
  std::vector<const float*> rows_;
  std::vector<float> scales_;
  bool lazy_ = false;                        // the vectors are read on first use
  std::vector<LazyVectors::Where> where_;   // then, where each node's lies
  std::atomic<size_t> next_{0};
  std::atomic<bool> stop_{false};  // a chunk failed, or cancelled
};

}  // namespace

// The pages are read and verified by ReadCheckpoint, which imports the state
// section on this thread while another reads the bm25 and graph sections;
// both then fill the graph's vectors from the episodes (GraphFill). Then the
// bm25 indexes are attached and the graph mapped where they lie in memory
// (the bm25 error reported first when both fail).
Status Database::LoadCheckpoint(const format::Superblock& sb) {
  CheckpointState state;
  CheckpointSections sec;
  const std::function<Status(Status)> bad_graph = [&](Status cause) {
    return AGENTMEM_CORRUPTION_FROM(std::move(cause), kCorruptIndex, sec.graph_page,
                                    "checkpoint graph");
  };
  // The file mapped read-only and shared when the Env can: the graph section
  // is then used where it lies, and the vectors read from it on first use.
  uint64_t file_size = 0;
  AGENTMEM_RETURN_IF_ERROR(log_->file()->Size(&file_size));
  std::shared_ptr<const MappedBytes> map;
  if (file_size == 0 || !log_->file()->MapShared(file_size, &map).ok()) map = nullptr;
  GraphFill fill(log_->file(), file_size, map, log_->header().salt, state, sec, bad_graph);
  auto import = [&](const CheckpointState& st) {
    Status s = ImportCheckpointState(st);
    if (!s.ok()) fill.Cancel();  // the open fails: the other thread stops filling
    return s;
  };
  AGENTMEM_RETURN_IF_ERROR(ReadCheckpoint(log_->file(), &log_->pager(), log_->header().salt, sb, map,
                                          &state, import, [&fill] { fill.Help(); }, &sec));
  std::vector<format::Bm25Partition> parts;
  AGENTMEM_RETURN_IF_ERROR(
      format::DecodeBm25Directory(sec.bm25_body, sec.bm25_page, state.strings.size(), &parts));
  for (const format::Bm25Partition& p : parts) {
    Status s = recall_->AttachBm25(state.strings[p.user], sec.bm25_body.data() + p.offset, p.size);
    if (!s.ok()) {
      return AGENTMEM_CORRUPTION_FROM(std::move(s), kCorruptIndex, sec.bm25_page, "checkpoint bm25");
    }
  }
  recall_bm25_owner_ = std::move(sec.bm25);
  AGENTMEM_RETURN_IF_ERROR(fill.Done());
  if (sec.graph_size == 0) {
    // What a file that has never held a vector writes: then no episode has one.
    for (const format::CheckpointEpisode& e : state.episodes) {
      if (e.has_vector) {
        return bad_graph(StatusF(kCorruptIndex, "empty, but episode %llu has a vector",
                                 static_cast<unsigned long long>(e.id)));
      }
    }
  } else {
    // The links and labels were checked as the section was read. A graph in
    // the file is copied out of it after the open by a handle that can write
    // (its first commit would), and left there by a read-only one.
    using Place = index::HnswImagePlace;
    const Place place = !sec.graph_in_file ? Place::kMemory
                        : opts_.read_only  ? Place::kFile
                                           : Place::kFileCopiedAhead;
    const size_t spare = sec.graph_in_file ? 0 : sec.graph->size() - sec.graph_at - sec.graph_size;
    Status s = recall_->MapGraph(sec.graph->data() + sec.graph_at, sec.graph_size, spare,
                                 std::const_pointer_cast<MappedBytes>(sec.graph), sec.graph_checked,
                                 fill.TakeVectors(), place);
    if (!s.ok()) return bad_graph(std::move(s));
    AGENTMEM_RETURN_IF_ERROR(recall_->HideNodes(fill.hidden()));
  }
  log_->NoteCheckpoint(sb.checkpoint, sb.scan_from);
  return Status::OK();
}

}  // namespace agentmem::engine

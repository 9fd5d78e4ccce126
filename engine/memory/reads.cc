// engine/memory/reads.cc -- typed reads on the handle's snapshot plus its own
// pending writes, recall, and Check.
#include "engine/memory/database.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include "engine/json/json_reader.h"

namespace agentmem::engine {

using format::BlockRecord;
using format::EpisodeRecord;
using format::FactRecord;
using format::PageType;

namespace {

Status WrongEpisode(int64_t page_no, uint64_t found, uint64_t id) {
  return AGENTMEM_CORRUPTION(kCorruptIndex, page_no, "page %lld: holds episode %llu, expected %llu",
                             static_cast<long long>(page_no), static_cast<unsigned long long>(found),
                             static_cast<unsigned long long>(id));
}

}  // namespace

Status Database::ReadPageRecords(uint64_t offset, std::shared_ptr<const std::string>* payload,
                                 std::vector<std::string_view>* records) {
  PageRef page;
  AGENTMEM_RETURN_IF_ERROR(log_->pager().ReadPage(offset, &page));
  *records = page->records;
  *payload = std::shared_ptr<const std::string>(page, &page->payload);
  return Status::OK();
}

Status Database::ReadRecord(const RecordLoc& loc, std::string_view* record, int64_t* page_no,
                            std::shared_ptr<const std::string>* keep) {
  PageRef page;
  AGENTMEM_RETURN_IF_ERROR(log_->pager().ReadPage(loc.page_offset, &page));
  *page_no = static_cast<int64_t>(format::PageNoOf(loc.page_offset));
  if (loc.slot >= page->records.size()) {
    return AGENTMEM_CORRUPTION(kCorruptPage, *page_no, "page %lld: record %u missing",
                               static_cast<long long>(*page_no), loc.slot);
  }
  *record = page->records[loc.slot];
  *keep = std::shared_ptr<const std::string>(page, &page->payload);
  return Status::OK();
}

Status Database::ReadEpisodeRecord(uint64_t id, std::string_view* record, int64_t* page_no,
                                   std::shared_ptr<const std::string>* keep) {
  const EpisodeEntry* e = catalog_.FindEpisode(id);
  if (!e) return StatusF(kNotFound, "no episode with id %llu", static_cast<unsigned long long>(id));
  return ReadRecord(e->loc, record, page_no, keep);
}

Status Database::GetEpisode(uint64_t id, EpisodeRecord* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  return GetEpisodeNoRefresh(id, out);
}

Status Database::GetEpisodeNoRefresh(uint64_t id, EpisodeRecord* out) {
  if (const EpisodeRecord* p = FindPendingEpisode(id)) {
    *out = *p;
    return Status::OK();
  }
  std::string_view rec;
  int64_t page_no = 0;
  std::shared_ptr<const std::string> keep;
  AGENTMEM_RETURN_IF_ERROR(ReadEpisodeRecord(id, &rec, &page_no, &keep));
  AGENTMEM_RETURN_IF_ERROR(format::DecodeEpisode(rec, page_no, out));
  if (out->id != id) return WrongEpisode(page_no, out->id, id);
  return Status::OK();
}

Status Database::EpisodeTextNoRefresh(uint64_t id, std::string* text) {
  if (const EpisodeRecord* p = FindPendingEpisode(id)) {
    *text = p->text;
    return Status::OK();
  }
  std::string_view rec, view;
  int64_t page_no = 0;
  std::shared_ptr<const std::string> keep;
  AGENTMEM_RETURN_IF_ERROR(ReadEpisodeRecord(id, &rec, &page_no, &keep));
  uint64_t found = 0;
  AGENTMEM_RETURN_IF_ERROR(format::EpisodeTextOf(rec, page_no, &found, &view));
  if (found != id) return WrongEpisode(page_no, found, id);
  text->assign(view);
  return Status::OK();
}

Status Database::ListEpisodeIds(std::string_view user_id, const std::string* session_id,
                                std::vector<uint64_t>* ids) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  ids->clear();
  if (const UserEntry* u = catalog_.FindUser(user_id)) {
    if (!session_id) {
      *ids = u->episode_ids;
    } else if (auto it = u->sessions.find(*session_id); it != u->sessions.end()) {
      *ids = it->second;
    }
  }
  for (const EpisodeRecord& r : pending_episodes_) {
    if (r.user_id == user_id && (!session_id || r.session_id == *session_id)) ids->push_back(r.id);
  }
  return Status::OK();
}

Status Database::ListEpisodeIdsByTime(std::string_view user_id, const std::string* session_id,
                                      std::vector<uint64_t>* ids) {
  AGENTMEM_RETURN_IF_ERROR(ListEpisodeIds(user_id, session_id, ids));
  std::vector<std::pair<int64_t, uint64_t>> by_time;
  by_time.reserve(ids->size());
  for (uint64_t id : *ids) {
    const EpisodeEntry* e = catalog_.FindEpisode(id);
    const EpisodeRecord* p = e ? nullptr : FindPendingEpisode(id);
    by_time.emplace_back(e ? e->ts : p ? p->ts : 0, id);
  }
  std::sort(by_time.begin(), by_time.end());
  for (size_t i = 0; i < by_time.size(); i++) (*ids)[i] = by_time[i].second;
  return Status::OK();
}

Status Database::ReadBlock(const RecordLoc& loc, BlockRecord* out) {
  std::string_view rec;
  int64_t page_no = 0;
  std::shared_ptr<const std::string> keep;
  AGENTMEM_RETURN_IF_ERROR(ReadRecord(loc, &rec, &page_no, &keep));
  return format::DecodeBlock(rec, page_no, out);
}

Status Database::ReadFact(const RecordLoc& loc, FactRecord* out) {
  std::string_view rec;
  int64_t page_no = 0;
  std::shared_ptr<const std::string> keep;
  AGENTMEM_RETURN_IF_ERROR(ReadRecord(loc, &rec, &page_no, &keep));
  return format::DecodeFact(rec, page_no, out);
}

Status Database::GetBlock(std::string_view user_id, std::string_view name, BlockRecord* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  for (auto it = pending_blocks_.rbegin(); it != pending_blocks_.rend(); ++it) {
    if (it->user_id == user_id && it->name == name) {
      *out = *it;
      return Status::OK();
    }
  }
  const UserEntry* u = catalog_.FindUser(user_id);
  if (u) {
    auto it = u->blocks.find(name);
    if (it != u->blocks.end()) return ReadBlock(it->second.back().loc, out);
  }
  return StatusF(kNotFound, "no block named \"%.*s\" for this user", static_cast<int>(name.size()),
                 name.data());
}

Status Database::ListBlocks(std::string_view user_id, std::vector<BlockRecord>* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  out->clear();
  std::map<std::string, BlockRecord> current;
  if (const UserEntry* u = catalog_.FindUser(user_id)) {
    for (const auto& [name, versions] : u->blocks) {
      AGENTMEM_RETURN_IF_ERROR(ReadBlock(versions.back().loc, &current[name]));
    }
  }
  for (const BlockRecord& r : pending_blocks_) {
    if (r.user_id == user_id) current[r.name] = r;
  }
  for (auto& [name, r] : current) out->push_back(std::move(r));
  return Status::OK();
}

Status Database::ListFacts(std::string_view user_id, const std::string* subject,
                           const std::string* predicate, std::vector<FactRecord>* out) {
  FactQuery q;
  q.user_id = std::string(user_id);
  if (subject) q.subject = *subject;
  if (predicate) q.predicate = *predicate;
  q.all_versions = true;
  return QueryFacts(q, out);
}

Status Database::Recall(const RecallQuery& q, std::vector<RecallHit>* hits, RecallPlan* plan) {
  return Recall(q, std::string(), std::string(), hits, plan);
}

// The metadata filter: the episode's metadata JSON must hold `value` (JSON)
// at `key` (a top-level key, or a JSON pointer such as "/place/city").
Status Database::Recall(const RecallQuery& q, const std::string& metadata_key,
                        const std::string& metadata_value, std::vector<RecallHit>* hits,
                        RecallPlan* plan) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  AGENTMEM_RETURN_IF_ERROR(EnsureRecallIndex());
  RecallQuery query = q;
  if (query.now == 0) query.now = Now();
  if (query.vector.empty() && query.mode != RecallMode::kBm25 && embedder_ &&
      !recall_->builtin_embedder()) {
    AGENTMEM_RETURN_IF_ERROR(EmbedTexts({query.text}, {&query.vector}));
  }
  if (metadata_key.empty()) {
    AGENTMEM_RETURN_IF_ERROR(recall_->Recall(query, hits, plan));
    return plan ? MarkContextMatches(query, hits) : Status::OK();
  }
  // Read as tokens, not nlohmann::json trees (engine/json/json_reader.h): the
  // trees' destructor allocates, so running out of memory here would be
  // std::terminate. The comparison is nlohmann's operator== all the same.
  JsonTokens want;
  if (!ParseJson(metadata_value, &want)) {
    return Status(kMismatchJson, "metadata_value is not valid JSON (a string needs quotes)");
  }
  std::vector<std::string> ptr;
  if (!ParseJsonPointer(metadata_key[0] == '/' ? metadata_key : "/" + metadata_key, &ptr)) {
    return Status(kMisuse, "metadata_key is not a key or a JSON pointer");
  }
  Status read_error;
  JsonTokens meta;  // each episode's metadata in turn
  query.extra_filter = [&](uint64_t id) {
    EpisodeRecord r;
    Status s = GetEpisodeNoRefresh(id, &r);
    if (!s.ok()) {
      if (read_error.ok()) read_error = s;
      return false;
    }
    if (!ParseJson(r.metadata, &meta)) return false;
    size_t at = JsonPointerFind(meta, ptr);
    return at != kNoJsonValue && JsonEqual(meta, at, want, 0);
  };
  Status s = recall_->Recall(query, hits, plan);
  if (s.ok() && read_error.ok() && plan) s = MarkContextMatches(query, hits);
  return s.ok() ? read_error : s;
}

// EXPLAIN's view of a BM25 hit: did a query term occur in the episode's own
// text, or only in the context indexed with it?
Status Database::MarkContextMatches(const RecallQuery& q, std::vector<RecallHit>* hits) {
  if (recall_->context() == 0) return Status::OK();
  std::vector<std::string> query = recall_->QueryTokens(q.text);
  std::sort(query.begin(), query.end());
  for (RecallHit& h : *hits) {
    if (h.bm25_rank == 0) continue;
    EpisodeRecord r;
    AGENTMEM_RETURN_IF_ERROR(GetEpisodeNoRefresh(h.id, &r));
    bool own = false;
    for (const std::string& t : recall_->DocumentTokens(r.text)) {
      if (std::binary_search(query.begin(), query.end(), t)) {
        own = true;
        break;
      }
    }
    h.bm25_via_context = !own;
  }
  return Status::OK();
}

Status Database::GetStats(Stats* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  Stats s;
  s.file_bytes = log_->end();
  s.episodes = catalog_.episode_count();
  s.blocks = catalog_.block_count();
  s.block_versions = catalog_.block_version_count();
  s.facts = catalog_.fact_count();
  for (const UserEntry& u : catalog_.users()) {
    if (!u.episode_ids.empty() || !u.blocks.empty() || !u.fact_ids.empty()) s.users++;
  }
  s.commits = log_->seq();
  s.text_bytes = catalog_.text_bytes();
  s.pages = log_->pages();
  s.syncs = log_->syncs();
  s.torn_bytes = log_->torn_bytes();
  *out = s;
  return Status::OK();
}

Status Database::ListUsers(std::vector<std::string>* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  out->clear();
  std::unordered_set<std::string_view> seen;
  for (const UserEntry& u : catalog_.users()) {
    if (u.episode_ids.empty() && u.blocks.empty() && u.fact_ids.empty()) continue;
    out->push_back(u.user_id);
    seen.insert(u.user_id);
  }
  auto add_pending = [&](const std::string& user) {
    if (seen.insert(user).second) out->push_back(user);
  };
  for (const EpisodeRecord& r : pending_episodes_) add_pending(r.user_id);
  for (const BlockRecord& r : pending_blocks_) add_pending(r.user_id);
  for (const FactRecord& r : pending_facts_) add_pending(r.user_id);
  return Status::OK();
}

Status Database::ListBlockHistory(std::string_view user_id, std::string_view name,
                                  std::vector<BlockRecord>* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  out->clear();
  if (const UserEntry* u = catalog_.FindUser(user_id)) {
    if (auto it = u->blocks.find(name); it != u->blocks.end()) {
      for (const BlockVersion& v : it->second) {
        out->emplace_back();
        AGENTMEM_RETURN_IF_ERROR(ReadBlock(v.loc, &out->back()));
      }
    }
  }
  for (const BlockRecord& r : pending_blocks_) {
    if (r.user_id == user_id && r.name == name) out->push_back(r);
  }
  return Status::OK();
}

Status Database::Check(std::vector<std::string>* problems) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  Counters next;
  uint64_t episodes = 0, forgets = 0;
  auto apply = [&](ScannedTxn& txn) {
    DecodedTxn d;
    AGENTMEM_RETURN_IF_ERROR(DecodeScanned(txn, next, &d));
    next = Counters{txn.commit.next_episode_id, txn.commit.next_fact_id,
                    txn.commit.next_block_version};
    episodes += d.episodes.size();
    forgets += d.forgets.size();
    for (const auto& [image, page_no] : d.graphs) {
      if (image.empty()) problems->push_back("page " + std::to_string(page_no) + ": empty graph image");
    }
    return Status::OK();
  };
  ScanResult res;
  Status s = log_->ScanAll(apply, &res);
  if (!s.ok()) {
    if (s.primary() == kNoMem || s.primary() == kIoErr) return s;
    problems->push_back(s.ToString());
    return Status::OK();
  }
  auto mismatch = [&](const char* what, uint64_t file, uint64_t snapshot) {
    if (file != snapshot) {
      problems->push_back(std::string(what) + ": the file has " + std::to_string(file) +
                          ", the open snapshot " + std::to_string(snapshot));
    }
  };
  mismatch("last commit", res.commit_seq, log_->seq());
  if (forgets == 0) mismatch("episodes", episodes, catalog_.episode_count());
  mismatch("next episode id", next.episode, next_episode_id_);
  mismatch("next fact id", next.fact, next_fact_id_);
  mismatch("next block version", next.block, next_block_version_);
  Status broken = recall_->broken();  // (recall_ exists from open on)
  if (broken.code() == kNoMem) return broken;  // says nothing of the file
  if (!broken.ok()) problems->push_back("recall index: " + broken.ToString());
  if (broken.ok()) {
    Status bm25 = recall_->VerifyBm25();
    if (bm25.code() == kNoMem) return bm25;
    if (!bm25.ok()) problems->push_back("recall index: " + bm25.ToString());
  }
  return Status::OK();
}

}  // namespace agentmem::engine

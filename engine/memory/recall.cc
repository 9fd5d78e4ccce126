// engine/memory/recall.cc -- see recall.h. The planner, in order:
//   1. candidates: the user's partition (or every user's) minus what the
//      session / role / time filters exclude -- filters run before scoring,
//      so k is guaranteed whenever k candidates exist. An unfiltered query
//      over every user lists none: its searches run on the indexes as they
//      are, and only an exact scan or fill walks the episodes;
//   2. BM25 top-k over the partition's own index (N, df and avgdl are the
//      partition's), MaxScore skipping, candidates enforced by a filter;
//      over every user, one top-k across the users' indexes scored with the
//      collection's N, df and avgdl (as one index of every episode would);
//   3. vector top-k: an exact SIMD scan of the candidates' vectors, or the
//      graph walk for many candidates (filters checked inside the walk);
//   4. the union of both lists, fused (hybrid: a score-normalised weighted
//      sum; one list: its reciprocal rank), weighted by recency when asked; hits that match neither list's threshold (a BM25
//      score > 0 and >= min_bm25, a similarity >= min_similarity or the
//      embedder's floor) are dropped, the rest cut at min_score;
//   5. only with `fill`: if fewer than k hits remain and more candidates
//      exist, the remaining candidates fill the list in id order, i.e. the
//      order they were remembered (marked `fill`, score 0) -- the reference
//      BM25's rule for zero-score documents.
#include "engine/memory/recall.h"

#include "engine/json/json_writer.h"
#include "format/coding.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <unordered_set>
#include <utility>

#include "index/vector/distance.h"
#include "index/vector/exact_search.h"
#include "index/vector/hnsw_format.h"

namespace agentmem::engine {

namespace {

// The cosine a vector hit of a built-in embedder needs to match by default:
// the 99th percentile of the similarities of a question to the turns of
// another conversation, LoCoMo and REALTALK, rounded up to 0.01
// (docs/recall.md, "Relevance and thresholds"; bench/relevance_floor.py).
constexpr double kHashSimilarityFloor = 0.22;   // agentmem-hash-v1
constexpr double kGloveV1SimilarityFloor = 0.59;  // agentmem-glove-v1
constexpr double kGloveV2SimilarityFloor = 0.69;  // agentmem-glove-v2

const char* ModeName(RecallMode m) {
  switch (m) {
    case RecallMode::kHybrid: return "hybrid";
    case RecallMode::kBm25: return "bm25";
    case RecallMode::kVector: return "vector";
  }
  return "?";
}

}  // namespace

std::string ExplainJson(const RecallPlan& plan, const std::vector<RecallHit>& hits) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Field("mode", plan.mode);
  w.Field("partition", plan.partition);
  w.Field("filtered", plan.filtered);
  w.Field("candidates", plan.candidates);
  w.Field("bm25_hits", plan.bm25_hits);
  w.Field("vector_hits", plan.vector_hits);
  w.Field("fused", plan.fused);
  w.Field("filled", plan.filled);
  w.Field("unmatched", plan.unmatched);
  w.Field("bm25", plan.bm25_path);
  w.Field("vector", plan.vector_path);
  w.Field("legs", plan.legs);
  w.Key("hits");
  w.BeginArray();
  for (const RecallHit& h : hits) {
    w.BeginObject();
    w.Field("id", h.id);
    w.Field("score", h.score);
    w.Field("bm25_rank", h.bm25_rank);
    w.Field("bm25_score", h.bm25_score);
    w.Field("vector_rank", h.vector_rank);
    w.Field("vector_score", h.vector_score);
    if (h.bm25_via_context) w.Field("bm25_match", "context");
    if (h.fill) w.Field("fill", true);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return out;
}

RecallIndex::RecallIndex(index::TokenizerOptions tokenizer, uint32_t dim, index::Metric metric,
                         std::optional<index::BuiltinEmbedder> embedder)
    : tokenizer_(tokenizer), dim_(dim), metric_(metric), embedder_(std::move(embedder)) {}

uint32_t RecallIndex::Intern(Names* table, const std::string& s) {
  auto [it, inserted] = table->ids.emplace(s, static_cast<uint32_t>(table->names.size()));
  if (inserted) table->names.push_back(s);
  return it->second;
}

std::vector<float> RecallIndex::Embed(std::string_view text) const { return embedder_->Embed(text); }

void RecallIndex::SyncNodes() {
  size_t nodes = graph_ ? graph_->size() : 0;
  for (; synced_nodes_ < nodes; synced_nodes_++) {
    uint64_t label = graph_->NodeLabel(static_cast<uint32_t>(synced_nodes_));
    if (label == 0) continue;
    attrs_.At(label).node = static_cast<uint32_t>(synced_nodes_);
  }
}

Status RecallIndex::Add(const format::EpisodeRecord& r) {
  return AddEntry(r.id, r.user_id, r.session_id, r.role, r.ts, r.vector.size() == dim_);
}

Status RecallIndex::AddEntry(uint64_t id, const std::string& user, const std::string& session,
                             const std::string& role, int64_t ts, bool has_vector, uint32_t node) {
  return AddEntry(id, InternUser(user), InternSession(session), InternRole(role), ts, has_vector,
                  node);
}

Status RecallIndex::AddEntry(uint64_t id, uint32_t user, uint32_t session, uint32_t role,
                             int64_t ts, bool has_vector, uint32_t node) {
  if (id == 0) return Status(kInternal, "recall index: episode id 0");
  EpisodeAttrs& a = attrs_.At(id);
  a.user = user;
  a.session = session;
  a.role = role;
  a.ts = ts;
  a.present = true;
  a.has_vector = has_vector;
  if (node != EpisodeAttrs::kNoNode) a.node = node;
  if (partitions_.size() <= a.user) partitions_.resize(a.user + 1);
  if (!partitions_[a.user]) {
    partitions_[a.user] = std::make_unique<UserPartition>();
    if (term_parts_) term_parts_->Attach(a.user, &partitions_[a.user]->bm25);
  }
  partitions_[a.user]->ids.push_back(id);
  partitions_[a.user]->vectors += a.has_vector;
  if (context() > 0) {
    std::vector<uint64_t>& s = session_ids_[SessionKey(user, session)];
    if (s.empty() || s.back() < id) s.push_back(id);
    else s.insert(std::lower_bound(s.begin(), s.end(), id), id);
  }
  episodes_++;
  return Status::OK();
}

Status RecallIndex::Forget(const std::vector<uint64_t>& ids) {
  std::vector<uint32_t> users;
  for (uint64_t id : ids) {
    EpisodeAttrs* found = attrs_.Find(id);
    if (!found || !found->present || found->forgotten) continue;
    EpisodeAttrs& a = *found;
    a.forgotten = true;
    episodes_--;
    UserPartition& p = *partitions_[a.user];
    p.vectors -= a.has_vector;
    if (p.bm25.Contains(id)) AGENTMEM_RETURN_IF_ERROR(p.bm25.Remove(id));
    if (std::find(users.begin(), users.end(), a.user) == users.end()) users.push_back(a.user);
    auto s = session_ids_.find(SessionKey(a.user, a.session));
    if (s != session_ids_.end()) {
      auto at = std::lower_bound(s->second.begin(), s->second.end(), id);
      if (at != s->second.end() && *at == id) s->second.erase(at);
    }
  }
  for (uint32_t u : users) {
    auto& v = partitions_[u]->ids;
    v.erase(std::remove_if(v.begin(), v.end(), [this](uint64_t id) { return attrs_.Find(id)->forgotten; }),
            v.end());
  }
  return Status::OK();
}

bool RecallIndex::ExportEntry(uint64_t id, const EpisodeAttrs** attrs, const std::string** session,
                              const std::string** role) const {
  const EpisodeAttrs* found = attrs_.Find(id);
  if (!found || !found->present) return false;
  const EpisodeAttrs& a = *found;
  *attrs = &a;
  *session = &sessions_.names[a.session];
  *role = &roles_.names[a.role];
  return true;
}

RecallIndex::Bm25Plan RecallIndex::PlanBm25(
    const std::function<uint32_t(const std::string&)>& user_string) const {
  Bm25Plan plan;
  for (uint32_t u = 0; u < partitions_.size(); u++) {
    if (!partitions_[u] || partitions_[u]->bm25.doc_count() == 0) continue;
    plan.users.push_back(u);
    plan.parts.push_back({user_string(users_.names[u]), 0, partitions_[u]->bm25.FrozenSize()});
  }
  plan.size = format::EncodeBm25Directory(plan.parts, &plan.directory);
  return plan;
}

Status RecallIndex::EmitBm25(const Bm25Plan& plan,
                             const std::function<Status(std::string_view)>& emit) const {
  AGENTMEM_RETURN_IF_ERROR(emit(plan.directory));
  std::string image;  // one at a time, its capacity reused
  for (size_t i = 0; i < plan.users.size(); i++) {
    image.clear();
    AGENTMEM_RETURN_IF_ERROR(VerifiedBm25(plan.users[i]));
    partitions_[plan.users[i]]->bm25.EncodeFrozen(&image);
    if (image.size() != plan.parts[i].size) {
      return Status(kInternal, "bm25: an image is not the size its plan gave it");
    }
    AGENTMEM_RETURN_IF_ERROR(emit(image));
  }
  return Status::OK();
}

Status RecallIndex::VerifiedBm25(uint32_t u) const {
  return OfUser(partitions_[u]->bm25.Verify(), users_.names[u]);
}

Status RecallIndex::VerifyBm25() const {
  for (uint32_t u = 0; u < partitions_.size(); u++) {
    if (partitions_[u]) AGENTMEM_RETURN_IF_ERROR(VerifiedBm25(u));
  }
  return Status::OK();
}

// A search that read a damaged term of `user`'s image.
Status RecallIndex::Bm25Damage(const UserPartition& p, const std::string& user) {
  return OfUser(p.bm25.status(), user);
}

// A bm25 index's damage, naming its user; any other status as it is.
Status RecallIndex::OfUser(const Status& s, const std::string& user) {
  if (s.code() != kCorruptIndex) return s;
  return StatusF(kCorruptIndex, "bm25 index of user \"%s\": %s", user.c_str(), s.message().c_str());
}

Status RecallIndex::AttachBm25(const std::string& user, const char* image, size_t size) {
  auto it = users_.ids.find(user);
  if (it == users_.ids.end() || it->second >= partitions_.size() || !partitions_[it->second]) {
    return StatusF(kCorruptIndex, "checkpoint bm25: user \"%s\" has no episodes", user.c_str());
  }
  UserPartition& p = *partitions_[it->second];
  AGENTMEM_RETURN_IF_ERROR(p.bm25.AttachFrozen(image, size, attrs_.max_id()));
  // Every document of the image must be one of this user's episodes.
  for (uint64_t doc : p.bm25.frozen_docs()) {
    const EpisodeAttrs* a = attrs_.Find(doc);
    if (!a || !a->present || a->user != it->second) {
      return StatusF(kCorruptIndex, "checkpoint bm25: episode %llu is not \"%s\"'s",
                     static_cast<unsigned long long>(doc), user.c_str());
    }
  }
  return Status::OK();
}

Result<size_t> RecallIndex::GraphSize() {
  Settle();
  if (!graph_) return size_t{0};
  return graph_->MappableSize(/*with_vectors=*/false);
}

Status RecallIndex::EmitGraph(const std::function<Status(std::string_view)>& emit) {
  Settle();
  if (!graph_) return Status::OK();
  return graph_->EmitMappable(/*with_vectors=*/false, emit);
}

Status RecallIndex::MapGraph(char* image, size_t size, size_t spare, std::shared_ptr<void> owner,
                             bool records_checked, index::HnswIndex::MapVectors vectors,
                             index::HnswImagePlace place) {
  auto g = index::HnswIndex::Map(image, size, spare, std::move(owner), index::HnswOptions{}.default_ef,
                                 records_checked, std::move(vectors), place);
  AGENTMEM_RETURN_IF_ERROR(g.status());
  std::unique_ptr<index::HnswIndex> graph = std::move(g.value());
  if (!NodesAgree(graph->size())) {
    return Status(kCorruptIndex, "checkpoint graph: episodes and nodes disagree");
  }
  SetGraph(std::move(graph));
  synced_nodes_ = graph_->size();
  delta_mark_ = graph_->Mark();
  return Status::OK();
}

bool RecallIndex::NodesAgree(size_t nodes) const {
  size_t n = 0;
  bool agree = true;
  attrs_.ForEach([&](uint64_t, const EpisodeAttrs& a) {
    if (!a.present || !a.has_vector) return;
    agree &= a.node == n;
    n++;
  });
  return agree && n == nodes;
}

bool RecallIndex::ForgottenNodes(std::vector<uint64_t>* labels) {
  Settle();
  labels->clear();
  if (!graph_ || !broken_.ok() || hidden_nodes_ || graph_->Stats().deleted != 0) return false;
  size_t n = 0;
  bool agree = true;
  attrs_.ForEach([&](uint64_t id, const EpisodeAttrs& a) {
    if (!a.present || !a.has_vector) return;
    agree &= a.node == n;
    n++;
    if (a.forgotten) labels->push_back(id);
  });
  return agree && n == graph_->size();
}

bool RecallIndex::TakableGraph(std::vector<uint64_t>* forgotten) {
  return ForgottenNodes(forgotten) &&
         static_cast<double>(forgotten->size()) <= kRepairShare * static_cast<double>(graph_->size());
}

bool RecallIndex::CanTakeGraph() {
  std::vector<uint64_t> forgotten;
  return TakableGraph(&forgotten);
}

std::unique_ptr<index::HnswIndex> RecallIndex::TakeGraph() {
  std::vector<uint64_t> forgotten;
  if (!TakableGraph(&forgotten)) return nullptr;
  std::unique_ptr<index::HnswIndex> graph;
  if (forgotten.empty()) {
    graph = std::move(graph_);
  } else {
    auto without = graph_->Without(forgotten);
    if (!without.ok()) return nullptr;  // the copy builds its own
    graph = std::move(without.value());
  }
  broken_ = Status(kInternal, "the graph was handed to a compaction copy; reopen the handle");
  synced_nodes_ = 0;
  return graph;
}

Status RecallIndex::AdoptGraph(std::unique_ptr<index::HnswIndex> graph) {
  if (graph_) return Status(kInternal, "recall index: a graph is already there");
  SetGraph(std::move(graph));
  synced_nodes_ = 0;
  SyncNodes();
  delta_mark_ = graph_->Mark();
  if (NodesAgree(graph_->size())) return Status::OK();
  broken_ = Status(kCorruptIndex, "compaction: the graph's nodes are not the copy's episodes");
  return broken_;
}

RecallIndex::TakenBm25 RecallIndex::TakeBm25() {
  TakenBm25 taken;
  std::vector<uint32_t> users;
  try {
    for (uint32_t u = 0; u < partitions_.size(); u++) {
      if (!partitions_[u] || (partitions_[u]->ids.empty() && partitions_[u]->bm25.doc_count() == 0)) {
        continue;
      }
      const UserPartition& p = *partitions_[u];
      if (p.bm25.doc_count() != p.ids.size() || !p.bm25.Verify().ok()) return {};
      for (uint64_t id : p.ids) {
        if (!p.bm25.Contains(id)) return {};
      }
      taken.ids.insert(taken.ids.end(), p.ids.begin(), p.ids.end());
      users.push_back(u);
    }
    if (users.empty()) return {};
    std::sort(taken.ids.begin(), taken.ids.end());
    taken.users.reserve(users.size());
  } catch (const std::bad_alloc&) {
    return {};
  }
  for (uint32_t u : users) {
    partitions_[u]->bm25.DetachTermParts();
    taken.users.emplace_back(users_.names[u], std::move(partitions_[u]));
  }
  term_parts_.reset();
  broken_ = Status(kInternal, "the BM25 indexes were handed to a compaction copy; reopen the handle");
  return taken;
}

bool RecallIndex::TakenBm25::TextOf(uint64_t id, format::TextRecord* out) {
  if (id < from || id >= to) {
    auto at = std::lower_bound(ids.begin(), ids.end(), id);
    if (at == ids.end() || *at != id) return false;
    from = id;
    to = static_cast<size_t>(ids.end() - at) > window ? *(at + window) : UINT64_MAX;
    terms.clear();
    docs.clear();
    postings.clear();
    std::vector<std::string_view> t;
    std::vector<index::Bm25Index::DocumentTerms> d;
    std::vector<index::Bm25Index::TermRef> p;
    for (const auto& [name, part] : users) {
      auto first = std::lower_bound(part->ids.begin(), part->ids.end(), from);
      if (first == part->ids.end() || *first >= to) continue;  // none of its documents
      part->bm25.Documents(from, to, &t, &d, &p);
      for (auto& doc : d) doc.first += postings.size();
      for (auto& ref : p) ref.term += static_cast<uint32_t>(terms.size());
      terms.insert(terms.end(), t.begin(), t.end());
      docs.insert(docs.end(), d.begin(), d.end());
      postings.insert(postings.end(), p.begin(), p.end());
    }
    std::sort(docs.begin(), docs.end(), [](const auto& a, const auto& b) { return a.doc_id < b.doc_id; });
  }
  auto it = std::lower_bound(docs.begin(), docs.end(), id,
                             [](const auto& d, uint64_t v) { return d.doc_id < v; });
  if (it == docs.end() || it->doc_id != id) return false;
  out->episode_id = id;
  out->doc_len = it->doc_len;
  // In byte order (it compresses as well as the order of the text): the
  // document's postings are sorted by their terms' views, then copied.
  const auto first = postings.begin() + static_cast<std::ptrdiff_t>(it->first);
  std::sort(first, first + static_cast<std::ptrdiff_t>(it->count), [&](const auto& a, const auto& b) {
    const std::string_view x = terms[a.term], y = terms[b.term];
    return x != y ? x < y : a.tf < b.tf;
  });
  out->terms.clear();
  out->terms.reserve(it->count);
  for (uint64_t i = it->first; i < it->first + it->count; i++) {
    out->terms.emplace_back(terms[postings[i].term], postings[i].tf);
  }
  return true;
}

Status RecallIndex::AdoptBm25(TakenBm25* taken) {
  size_t users = 0;
  for (const auto& p : partitions_) users += p && !p->ids.empty();
  const Status disagree(kCorruptIndex, "compaction: the BM25 indexes' episodes are not the copy's");
  if (users != taken->users.size()) return disagree;
  for (const auto& [name, p] : taken->users) {
    auto it = users_.ids.find(name);
    if (it == users_.ids.end() || !partitions_[it->second] || partitions_[it->second]->ids != p->ids ||
        partitions_[it->second]->vectors != p->vectors) {
      return disagree;
    }
  }
  for (auto& p : partitions_) {
    if (p) p->bm25.DetachTermParts();
  }
  term_parts_.reset();  // built again by the next search over every user
  for (auto& [name, p] : taken->users) partitions_[users_.ids.find(name)->second] = std::move(p);
  taken->users.clear();
  return Status::OK();
}

Status RecallIndex::InsertUnlinked(const std::vector<const format::EpisodeRecord*>& episodes) {
  std::vector<format::EpisodeRecord> batch;
  for (const format::EpisodeRecord* r : episodes) {
    const EpisodeAttrs* a = attrs_.Find(r->id);
    if (r->vector.size() == dim_ && a && a->node == EpisodeAttrs::kNoNode) batch.push_back(*r);
  }
  if (batch.empty()) return Status::OK();
  std::string delta;  // not written: the file holds its graph in a checkpoint
  return InsertForCommit(batch, &delta);
}

Status RecallIndex::HideNodes(const std::vector<uint64_t>& labels) {
  Settle();
  for (uint64_t label : labels) AGENTMEM_RETURN_IF_ERROR(graph_->MarkDeleted(label));
  hidden_nodes_ |= !labels.empty();
  delta_mark_ = graph_->Mark();  // this handle's own view: never written
  return Status::OK();
}

Status RecallIndex::AddText(const format::TextRecord& t) {
  const EpisodeAttrs* a = attrs_.Find(t.episode_id);
  if (!a || !a->present) {
    return StatusF(kCorruptIndex, "text record for episode %llu, which is not in the file",
                   static_cast<unsigned long long>(t.episode_id));
  }
  std::vector<index::Bm25Index::TermCount> counts;
  counts.reserve(t.terms.size());
  for (const auto& [term, tf] : t.terms) counts.push_back({term, tf});
  index::Bm25Index& bm25 = partitions_[a->user]->bm25;
  if (a->forgotten) return Status::OK();  // a forgotten episode is not searched
  // A re-indexed episode: the new terms replace the old.
  if (bm25.Contains(t.episode_id)) AGENTMEM_RETURN_IF_ERROR(bm25.Remove(t.episode_id));
  return bm25.AddCounts(t.episode_id, t.doc_len, counts);
}

std::vector<uint64_t> RecallIndex::ContextIds(const std::string& user, const std::string& session,
                                              uint64_t id, std::span<const uint64_t> skip) const {
  std::vector<uint64_t> out;
  if (context() == 0) return out;
  auto u = users_.ids.find(user);
  auto s = sessions_.ids.find(session);
  if (u == users_.ids.end() || s == sessions_.ids.end()) return out;
  auto it = session_ids_.find(SessionKey(u->second, s->second));
  if (it == session_ids_.end()) return out;
  const std::vector<uint64_t>& ids = it->second;
  for (auto at = std::lower_bound(ids.begin(), ids.end(), id); at != ids.begin() && out.size() < context();) {
    --at;
    if (!std::binary_search(skip.begin(), skip.end(), *at)) out.push_back(*at);
  }
  return out;
}

std::vector<uint64_t> RecallIndex::ContextDependents(std::span<const uint64_t> ids) const {
  std::vector<uint64_t> out;
  if (context() == 0) return out;
  for (uint64_t id : ids) {
    const EpisodeAttrs* found_attrs = attrs_.Find(id);
    if (!found_attrs || !found_attrs->present || found_attrs->forgotten) continue;
    const EpisodeAttrs& a = *found_attrs;
    auto it = session_ids_.find(SessionKey(a.user, a.session));
    if (it == session_ids_.end()) continue;
    const std::vector<uint64_t>& s = it->second;
    size_t found = 0;
    for (auto at = std::upper_bound(s.begin(), s.end(), id); at != s.end() && found < context(); ++at) {
      if (std::binary_search(ids.begin(), ids.end(), *at)) continue;
      out.push_back(*at);
      found++;
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

format::TextRecord RecallIndex::TextFor(const format::EpisodeRecord& r,
                                        std::span<const std::string> context) const {
  std::vector<std::string> tokens = tokenizer_.Tokenize(r.text);
  // The own text counts own_weight times, so that a term of the context
  // weighs less than the same term of the episode itself.
  const size_t own = tokens.size();
  const uint32_t weight = context.empty() ? 1 : std::max<uint32_t>(1, tokenizer_.options().own_weight);
  for (const std::string& c : context) tokenizer_.AppendTokens(c, &tokens);
  format::TextRecord t;
  t.episode_id = r.id;
  t.doc_len = static_cast<uint32_t>(own * weight + (tokens.size() - own));
  for (const auto& c : index::Bm25Index::CountTerms(tokens, own, weight)) t.terms.emplace_back(c.term, c.tf);
  return t;
}

bool RecallIndex::Passes(const RecallQuery& q, uint64_t id, const EpisodeAttrs& a) const {
  if (!a.present || a.forgotten || a.ts < q.ts_from || a.ts >= q.ts_to) return false;
  if (q.session_id) {
    auto it = sessions_.ids.find(*q.session_id);
    if (it == sessions_.ids.end() || it->second != a.session) return false;
  }
  if (q.role) {
    auto it = roles_.ids.find(*q.role);
    if (it == roles_.ids.end() || it->second != a.role) return false;
  }
  if (q.extra_filter) return q.extra_filter(id);
  return true;
}

bool RecallIndex::Unfiltered(const RecallQuery& q) {
  return !q.session_id && !q.role && q.ts_from == INT64_MIN && q.ts_to == INT64_MAX &&
         !q.extra_filter;
}

// The candidates in id order. An unfiltered query of one user is that user's
// partition itself (no copy, no per-episode work); otherwise *storage holds
// the episodes that pass the filters.
std::span<const uint64_t> RecallIndex::Candidates(const RecallQuery& q, uint64_t* partition,
                                                 std::vector<uint64_t>* storage) const {
  auto consider = [&](uint64_t id) {
    if (Passes(q, id, *attrs_.Find(id))) storage->push_back(id);
  };
  if (q.all_users) {
    *partition = episodes_;
    if (EveryEpisode(q)) return {};
    *storage = ListEveryUser(q);
    return *storage;
  }
  *partition = 0;
  const UserPartition* p = Partition(q.user_id);
  if (!p) return {};
  *partition = p->ids.size();
  if (Unfiltered(q)) return p->ids;
  storage->reserve(p->ids.size());
  for (uint64_t id : p->ids) consider(id);
  return *storage;
}

std::vector<uint64_t> RecallIndex::ListEveryUser(const RecallQuery& q) const {
  std::vector<uint64_t> ids;
  attrs_.ForEach([&](uint64_t id, const EpisodeAttrs& a) {
    if (Passes(q, id, a)) ids.push_back(id);
  });
  return ids;
}

const RecallIndex::UserPartition* RecallIndex::Partition(const std::string& user_id) const {
  auto it = users_.ids.find(user_id);
  if (it == users_.ids.end() || it->second >= partitions_.size()) return nullptr;
  return partitions_[it->second].get();
}

Status RecallIndex::VectorQuery(const RecallQuery& q, std::vector<float>* out) const {
  if (!q.vector.empty()) {
    if (q.vector.size() != dim_) {
      return StatusF(kMismatchDimension, "query vector has %zu dimensions; the file's have %u",
                     q.vector.size(), dim_);
    }
    if (!index::AllFinite(q.vector.data(), q.vector.size())) {
      return Status(kRange, "query vector contains a NaN or infinite value");
    }
    *out = q.vector;
    return Status::OK();
  }
  if (!embedder_) return index::BuiltinEmbedder::Missing(space_embedder_);
  *out = embedder_->Embed(q.text);
  return Status::OK();
}

double RecallIndex::DefaultSimilarityFloor(const std::string& embedder, index::Metric metric) {
  // Cosine floors measured on LoCoMo (docs/recall.md, "Relevance and
  // thresholds"). The built-in embedders' vectors have unit length, so the
  // dot product is the cosine and the squared L2 distance is 2 - 2 cos.
  double cos_floor;
  if (embedder == index::HashEmbedder::kName) {
    cos_floor = kHashSimilarityFloor;
  } else if (embedder == index::GloveEmbedder::kNameV1) {
    cos_floor = kGloveV1SimilarityFloor;
  } else if (embedder == index::GloveEmbedder::kNameV2) {
    cos_floor = kGloveV2SimilarityFloor;
  } else {
    return -INFINITY;
  }
  return metric == index::Metric::kL2 ? -(2.0 - 2.0 * cos_floor) : cos_floor;
}

bool RecallIndex::Matches(const RecallQuery& q, const RecallHit& h) const {
  double floor = q.min_similarity;
  if (std::isnan(floor)) floor = q.fill ? -INFINITY : similarity_floor_;
  return (h.bm25_rank > 0 && h.bm25_score > 0 && h.bm25_score >= q.min_bm25) ||
         (h.vector_rank > 0 && h.vector_score >= floor);
}

double RecallIndex::Similarity(float distance) const {
  return metric_ == index::Metric::kL2 ? -static_cast<double>(distance)
                                       : 1.0 - static_cast<double>(distance);
}

Status RecallIndex::InsertForCommit(const std::vector<format::EpisodeRecord>& episodes,
                                    std::string* delta) {
  Settle();
  delta->clear();
  AGENTMEM_RETURN_IF_ERROR(broken_);
  bool any = false;
  for (const auto& e : episodes) any |= e.vector.size() == dim_;
  if (!any) return Status::OK();
  // The pending vectors first, so that nodes still follow episode ids.
  AGENTMEM_RETURN_IF_ERROR(FlushGraph());
  AGENTMEM_RETURN_IF_ERROR(EnsureGraph());
  AGENTMEM_RETURN_IF_ERROR(InsertEpisodes(episodes));
  // The vectors are in the episode records of the same transaction
  // (docs/format.md §5.6): the delta holds only the graph's own bytes.
  Status s = graph_->EncodeDelta(delta_mark_, delta, /*with_vectors=*/false);
  if (!s.ok()) broken_ = s;
  delta_mark_ = graph_->Mark();
  return s;
}

Status RecallIndex::DeferInsertForCommit(const std::vector<format::EpisodeRecord>& episodes,
                                         std::string* delta, format::StoredPayload* prepared) {
  Settle();
  delta->clear();
  *prepared = format::StoredPayload{};
  PreparedDelta ahead = std::exchange(prepared_delta_, PreparedDelta{});
  AGENTMEM_RETURN_IF_ERROR(broken_);
  size_t vectors = 0;
  for (const auto& e : episodes) vectors += e.vector.size() == dim_;
  if (!graph_ && vectors == 0 && pending_.empty()) return Status::OK();
  AGENTMEM_RETURN_IF_ERROR(EnsureGraph());
  if (vectors > kDeferVectors) {
    // A large transaction's insert takes far longer than its sync: it goes
    // in now (after the pending vectors before it), its nodes in its own delta.
    AGENTMEM_RETURN_IF_ERROR(InsertPending());
    AGENTMEM_RETURN_IF_ERROR(InsertEpisodes(episodes));
  } else if (vectors > 0) {
    const uint64_t txn = ++pending_txns_;
    for (const auto& e : episodes) {
      if (e.vector.size() == dim_) pending_[e.id] = NewPending(txn, e.vector);
    }
  }
  // A transaction with vectors always carries a delta, empty or not: a
  // reader tells it from one whose graph is elsewhere (InsertUnlinked).
  const index::ChangeMark now = graph_->Mark();
  if (vectors > 0 || now != delta_mark_) {
    std::vector<std::string_view> record;
    if (ahead.from == delta_mark_ && ahead.to == now && !ahead.payload.raw.empty() &&
        format::SplitRecords(ahead.payload.raw, 1, 0, &record).ok()) {
      delta->assign(record[0]);  // the graph is as the delta was made
      *prepared = std::move(ahead.payload);
    } else if (Status s = graph_->EncodeDelta(delta_mark_, delta, /*with_vectors=*/false); !s.ok()) {
      broken_ = s;
      return s;
    }
    delta_mark_ = now;
  }
  std::vector<std::vector<index::HnswInsert>> batches = TakePendingBatches();
  if (batches.empty()) return Status::OK();
  index::HnswIndex* graph = graph_.get();
  PreparedDelta* next = &prepared_delta_;
  inserter_.Start([graph, next, from = delta_mark_, batches = std::move(batches)]() -> Status {
    for (const auto& batch : batches) AGENTMEM_RETURN_IF_ERROR(graph->AddBatch(batch));
    PrepareDelta(*graph, from, next);
    return Status::OK();
  });
  return Status::OK();
}

void RecallIndex::PrepareDelta(const index::HnswIndex& graph, const index::ChangeMark& from,
                               PreparedDelta* out) noexcept {
  try {
    std::string delta, payload;
    if (!graph.EncodeDelta(from, &delta, /*with_vectors=*/false).ok()) return;
    format::AppendRecord(delta, &payload);
    out->payload = format::PreparePayload(payload);
    out->from = from;
    out->to = graph.Mark();
  } catch (...) {
    *out = PreparedDelta{};  // no memory: the commit encodes it itself
  }
}

Status RecallIndex::InsertEpisodes(const std::vector<format::EpisodeRecord>& episodes) {
  // One batch, linked on min(2, hardware threads) threads; nodes still follow
  // episode ids (AddBatch numbers them in label order).
  std::vector<index::HnswInsert> batch;
  batch.reserve(episodes.size());
  for (const auto& e : episodes) {
    if (e.vector.size() == dim_) batch.push_back({e.id, e.vector});
  }
  Status s = graph_->AddBatch(batch);
  if (!s.ok()) {
    broken_ = s;
    return s;
  }
  SyncNodes();
  return s;
}

Status RecallIndex::FlushGraph() {
  Settle();
  AGENTMEM_RETURN_IF_ERROR(broken_);
  if (pending_.empty()) return Status::OK();
  AGENTMEM_RETURN_IF_ERROR(EnsureGraph());
  return InsertPending();
}

void RecallIndex::SetGraph(std::unique_ptr<index::HnswIndex> graph) {
  graph_ = std::move(graph);
  prepared_delta_ = PreparedDelta{};  // made from another graph
}

Status RecallIndex::EnsureGraph() {
  if (graph_) return Status::OK();
  index::HnswOptions o;
  o.metric = metric_;
  o.dim = dim_;
  auto g = index::HnswIndex::Create(o);
  AGENTMEM_RETURN_IF_ERROR(g.status());
  SetGraph(std::move(g.value()));
  delta_mark_ = graph_->Mark();
  return Status::OK();
}

Status RecallIndex::InsertPending(size_t batches) {
  Status s;
  for (const auto& batch : TakePendingBatches(batches)) {
    s = graph_->AddBatch(batch);
    if (!s.ok()) break;
  }
  if (!s.ok()) broken_ = s;
  SyncNodes();
  std::erase_if(pending_, [](const auto& p) { return p.second.inserting; });
  return s;
}

void RecallIndex::NoteGraphWritten() {
  Settle();
  if (graph_) delta_mark_ = graph_->Mark();
}

Status RecallIndex::AddPending(const std::vector<const format::EpisodeRecord*>& episodes) {
  Settle();
  const uint64_t txn = pending_txns_ + 1;
  bool any = false;
  for (const format::EpisodeRecord* r : episodes) {
    const EpisodeAttrs* a = attrs_.Find(r->id);
    if (r->vector.size() != dim_ || !a || a->node != EpisodeAttrs::kNoNode) continue;
    pending_[r->id] = NewPending(txn, r->vector);
    any = true;
  }
  if (any) pending_txns_ = txn;
  return Status::OK();
}

RecallIndex::Pending RecallIndex::NewPending(uint64_t txn, const std::vector<float>& vector) const {
  Pending p{txn, vector, std::vector<float>(vector.size()), 1.0f, false};
  // A committed vector is finite (checked before it was written).
  Result<float> scale = index::HnswIndex::ScaleFor(metric_, vector.data(), vector.size());
  p.scale = index::HnswIndex::KeepCopy(vector.data(), vector.size(), scale.ok() ? *scale : 1.0f,
                                       p.kept.data());
  return p;
}

void RecallIndex::Settle() {
  if (!inserter_.busy()) return;
  Status s = inserter_.Wait();
  if (!s.ok() && broken_.ok()) broken_ = s;
  SyncNodes();
  std::erase_if(pending_, [](const auto& p) { return p.second.inserting; });
}

std::vector<std::vector<index::HnswInsert>> RecallIndex::TakePendingBatches(size_t most) {
  std::vector<std::vector<index::HnswInsert>> batches;
  uint64_t txn = 0;
  for (auto& [id, p] : pending_) {
    if (p.inserting) continue;
    if (batches.empty() || p.txn != txn) {
      if (batches.size() == most) break;
      batches.emplace_back();
    }
    txn = p.txn;
    batches.back().push_back({id, p.vector});
    p.inserting = true;
  }
  return batches;
}

void RecallIndex::PrunePending() {
  std::erase_if(pending_, [this](const auto& p) {
    const EpisodeAttrs* a = attrs_.Find(p.first);
    return a && a->node != EpisodeAttrs::kNoNode;
  });
}

Status RecallIndex::ApplyGraphImage(std::string_view image, int64_t page_no,
                                    const index::HnswIndex::VectorLookup& vectors) {
  Settle();
  if (!broken_.ok()) return Status::OK();  // already unusable; recall reports broken_
  // Damage in the image, or what it asked of the graph (memory running out
  // is reported as it is).
  auto bad_image = [page_no](Status s) {
    return AGENTMEM_CORRUPTION_FROM(std::move(s), kCorruptIndex, page_no, "graph");
  };
  auto header = index::hnsw::ParseImageHeader(image);
  if (!header.ok()) return bad_image(header.status());
  const auto& h = header.value();
  // An image that builds on nodes this handle has as pending vectors (a
  // checkpoint holds them, and the writer that opened from it wrote this):
  // they go in first, each transaction's as their writer inserted them.
  while (!pending_.empty() && (graph_ ? graph_->size() : 0) < h.base_count) {
    AGENTMEM_RETURN_IF_ERROR(EnsureGraph());
    if (Status s = InsertPending(1); !s.ok()) return bad_image(s);
  }
  size_t have = graph_ ? graph_->size() : 0;
  // This handle's own commit, or nodes it inserted itself from the same
  // pending vectors as the writer (the same batches in the same order: the
  // same graph), perhaps with more after them.
  if (graph_ && h.base_count <= have && h.node_count <= have) {
    delta_mark_ = graph_->Mark();
    return Status::OK();
  }
  // A new node's vector: its transaction's record, or an earlier one's.
  auto lookup = [&](uint64_t id) -> const float* {
    if (const float* v = vectors ? vectors(id) : nullptr) return v;
    auto it = pending_.find(id);
    return it == pending_.end() ? nullptr : it->second.vector.data();
  };
  Status s;
  if (!graph_ && h.base_count == 0 && h.vectors) {
    auto g = index::HnswIndex::Deserialize(image);
    s = g.status();
    if (s.ok()) SetGraph(std::move(g.value()));
  } else if (!graph_ && h.base_count == 0) {  // the first delta, without vectors
    index::HnswOptions o;
    o.metric = h.shape.metric;
    o.dim = h.shape.dim;
    o.m = h.shape.m;
    o.ef_construction = h.shape.ef_construction;
    auto g = index::HnswIndex::Create(o);
    s = g.status();
    if (s.ok()) s = g.value()->ApplyDelta(image, lookup);
    if (s.ok()) SetGraph(std::move(g.value()));
  } else if (graph_ && h.base_count == have) {
    s = graph_->ApplyDelta(image, lookup);
  } else if (graph_ && h.base_count < have && have < h.node_count && !h.vectors) {
    // This handle inserted the first of its new nodes already.
    std::string rebased;
    s = index::hnsw::RebaseImage(image, static_cast<uint32_t>(have), &rebased);
    if (s.ok()) s = graph_->ApplyDelta(rebased, lookup);
  } else {
    s = StatusF(kCorruptIndex, "graph image builds on %u nodes; the graph has %zu", h.base_count,
                have);
  }
  if (!s.ok()) return bad_image(s);
  SyncNodes();
  PrunePending();
  delta_mark_ = graph_->Mark();
  return Status::OK();
}

void RecallIndex::VectorSearch(const RecallQuery& q, const std::vector<float>& query,
                               std::span<const uint64_t> candidates, size_t k,
                               std::vector<index::Neighbor>* out, RecallPlan* plan) const {
  // How many candidates have vectors: for an unfiltered user query it is kept
  // per partition, so the graph path does no per-episode work.
  const UserPartition* p = q.all_users ? nullptr : Partition(q.user_id);
  size_t with_vectors = 0;
  if (p && Unfiltered(q)) {
    with_vectors = p->vectors;
  } else if (EveryEpisode(q)) {
    for (const auto& user : partitions_) with_vectors += user ? user->vectors : 0;
  } else {
    for (uint64_t id : candidates) with_vectors += attrs_.Find(id)->has_vector;
  }
  // Vectors not yet in the graph are scanned apart, and their hits merged,
  // scored as the path taken scores the graph's vectors.
  const std::vector<uint64_t> pending = PendingMatches(q, candidates);
  with_vectors -= std::min(pending.size(), with_vectors);
  auto merge_pending = [&](bool graph_path) {
    if (pending.empty()) return;
    const std::vector<index::Neighbor> hits = ScorePending(pending, query, k, graph_path);
    out->insert(out->end(), hits.begin(), hits.end());
    std::sort(out->begin(), out->end(), index::NeighborLess);
    if (out->size() > k) out->resize(k);
    if (plan) {
      plan->vector_path += "; exact scan of " + std::to_string(pending.size()) +
                           " vectors not yet in the graph";
    }
  };
  if (with_vectors > kExactScanMax && graph_ && broken_.ok() &&
      GraphSearch(q, query, with_vectors, k, out, plan)) {
    merge_pending(true);
    return;
  }
  // A live episode's node is deleted only when its vector could not be read
  // (HideNodes): it is never a hit.
  std::vector<uint32_t> rows;
  rows.reserve(with_vectors);
  if (EveryEpisode(q)) {
    attrs_.ForEach([&](uint64_t id, const EpisodeAttrs& a) {
      if (a.node != EpisodeAttrs::kNoNode && Passes(q, id, a)) rows.push_back(a.node);
    });
  }
  for (uint64_t id : candidates) {
    const uint32_t node = attrs_.Find(id)->node;
    if (node != EpisodeAttrs::kNoNode) rows.push_back(node);
  }
  if (hidden_nodes_) std::erase_if(rows, [&](uint32_t node) { return graph_->NodeDeleted(node); });
  if (graph_) graph_->ReadVectors(&rows);  // those unread since the open; unreadable ones go
  out->clear();
  // Node order is episode id order (a commit inserts its episodes in id
  // order), so ties between equal distances still go to the smaller id.
  auto res = rows.empty() ? Result<std::vector<index::Neighbor>>(std::vector<index::Neighbor>{})
                          : index::ExactTopKRows(metric_, query, graph_->NodeVectors(), rows, k);
  if (res.ok()) {
    for (index::Neighbor n : res.value()) {
      n.id = graph_->NodeLabel(static_cast<uint32_t>(n.id));  // node -> episode id
      out->push_back(n);
    }
  }
  if (plan) {
    std::string why = plan->vector_path.empty() ? "" : "; " + plan->vector_path;
    plan->vector_path = "exact scan of " + std::to_string(rows.size()) + " vectors (" +
                        index::SimdPathName(index::ActiveSimdPath()) + ")" + why;
  }
  merge_pending(false);
}

std::vector<uint64_t> RecallIndex::PendingMatches(const RecallQuery& q,
                                                  std::span<const uint64_t> candidates) const {
  std::vector<uint64_t> ids;
  const bool every = EveryEpisode(q);
  for (const auto& [id, p] : pending_) {
    const EpisodeAttrs* a = attrs_.Find(id);
    if (!a || !a->present || a->forgotten || !a->has_vector || a->node != EpisodeAttrs::kNoNode) {
      continue;
    }
    if (every ? Passes(q, id, *a) : std::binary_search(candidates.begin(), candidates.end(), id)) {
      ids.push_back(id);
    }
  }
  return ids;
}

// The graph keeps each vector with a scale (HnswIndex::ScaleFor); its walk
// scores 1 - <q, v> times that scale for cosine, with q normalised, and the
// exact scan the cosine of the kept rows: so are the pending vectors scored,
// to the bit.
std::vector<index::Neighbor> RecallIndex::ScorePending(std::span<const uint64_t> ids,
                                                       const std::vector<float>& query, size_t k,
                                                       bool graph_path) const {
  const bool cosine = metric_ == index::Metric::kCosine;
  std::vector<float> rows, scales;
  rows.reserve(ids.size() * dim_);
  for (uint64_t id : ids) {
    const Pending& p = pending_.find(id)->second;
    rows.insert(rows.end(), p.kept.begin(), p.kept.end());
    scales.push_back(p.scale);
  }
  if (!graph_path) {
    const index::VectorBlock block{rows.data(), ids.size(), dim_, 0};
    auto res = index::ExactTopK(metric_, query, block, k, ids);
    return res.ok() ? std::move(res.value()) : std::vector<index::Neighbor>{};
  }
  std::vector<float> q = query;
  if (cosine) index::NormalizeInPlace(q.data(), q.size());
  std::vector<index::Neighbor> hits;
  for (size_t i = 0; i < ids.size(); i++) {
    const float* v = rows.data() + i * dim_;
    const float d = metric_ == index::Metric::kL2
                        ? index::L2Sqr(q.data(), v, dim_)
                        : 1.0f - index::Dot(q.data(), v, dim_) * (1.0f * scales[i]);
    hits.push_back({ids[i], d});
  }
  std::sort(hits.begin(), hits.end(), index::NeighborLess);
  if (hits.size() > k) hits.resize(k);
  return hits;
}

// The graph path, for large candidate sets: hnswlib's graph walked by our own
// search loop with the filters applied to every node it visits, so filtered
// nodes cost a visit but never a result slot. When the walk cannot produce
// min(k, candidates) hits (a very selective filter), it reports failure and
// the caller scans exactly: k stays guaranteed.
bool RecallIndex::GraphSearch(const RecallQuery& q, const std::vector<float>& query,
                              size_t candidates, size_t k, std::vector<index::Neighbor>* out,
                              RecallPlan* plan) const {
  index::HnswSearchOptions o;
  o.k = k;
  o.ef = std::max<size_t>(kGraphEf, 2 * k);
  bool filtered = candidates != graph_->size();
  // Nodes the filter rejects still take places in the beam: widen it by the
  // share they are (up to 4x), so a filtered walk keeps the recall of an
  // unfiltered one.
  if (filtered && candidates > 0) {
    o.ef = std::min(4 * o.ef, o.ef * graph_->size() / candidates);
  }
  if (filtered) {
    uint32_t user = 0;
    auto it = users_.ids.find(q.user_id);
    if (!q.all_users && it != users_.ids.end()) user = it->second;
    o.filter = [this, &q, user](uint64_t label) {
      const EpisodeAttrs* a = attrs_.Find(label);
      return a && (q.all_users || a->user == user) && Passes(q, label, *a);
    };
  }
  auto res = graph_->Search(query, o);
  size_t want = std::min(k, candidates);
  if (!res.ok() || res.value().size() < want) {
    plan->vector_path = "hnsw found " + std::to_string(res.ok() ? res.value().size() : 0) +
                        " of " + std::to_string(want) + ", fell back";
    return false;
  }
  *out = std::move(res.value());
  plan->vector_path = "hnsw ef=" + std::to_string(o.ef) + " over " +
                      std::to_string(graph_->size()) + " nodes" +
                      (filtered ? ", filter inside the walk (" + std::to_string(candidates) +
                                      " candidates)"
                                : "");
  return true;
}

Status RecallIndex::Bm25Search(const RecallQuery& q, std::span<const uint64_t> candidates,
                               size_t k, std::vector<index::ScoredDoc>* out,
                               RecallPlan* plan) const {
  std::vector<std::string> tokens = tokenizer_.TokenizeQuery(q.text);
  bool filtered = !EveryEpisode(q) && candidates.size() != plan->partition;
  index::DocFilter filter;
  if (filtered) {
    filter = [candidates](uint64_t id) {
      return std::binary_search(candidates.begin(), candidates.end(), id);
    };
  }
  if (q.all_users) return Bm25SearchEveryUser(tokens, filter, k, out, plan);
  index::QueryStats stats;
  out->clear();
  if (const UserPartition* p = Partition(q.user_id)) {
    *out = p->bm25.TopK(tokens, k, filter, &stats);
    AGENTMEM_RETURN_IF_ERROR(Bm25Damage(*p, q.user_id));
  }
  plan->bm25_path = "maxscore: " + std::to_string(tokens.size()) + " query tokens, " +
                    std::to_string(stats.postings_scored) + " of " +
                    std::to_string(stats.postings_total) + " postings scored";
  return Status::OK();
}

Status RecallIndex::Bm25SearchEveryUser(std::span<const std::string> tokens,
                                        const index::DocFilter& filter, size_t k,
                                        std::vector<index::ScoredDoc>* out,
                                        RecallPlan* plan) const {
  // By user index, as term_parts_ numbers them (null: no partition).
  std::vector<const index::Bm25Index*> parts(partitions_.size(), nullptr);
  size_t users = 0;
  uint64_t docs = 0;
  for (size_t u = 0; u < partitions_.size(); u++) {
    if (!partitions_[u]) continue;
    parts[u] = &partitions_[u]->bm25;
    users++;
    docs += partitions_[u]->bm25.doc_count();
  }
  const index::Bm25TermParts* table = nullptr;
  if (users > kTermTableUsers) {
    std::lock_guard<std::mutex> lock(term_parts_mu_);
    if (!term_parts_) {
      auto built = std::make_unique<index::Bm25TermParts>();
      for (uint32_t u = 0; u < partitions_.size(); u++) {
        if (partitions_[u]) built->Attach(u, &partitions_[u]->bm25);
      }
      built->ShrinkToFit();
      term_parts_ = std::move(built);
    }
    table = term_parts_.get();
  }
  index::QueryStats stats;
  *out = index::Bm25Index::TopKAcross(parts, tokens, k, filter, &stats, table);
  for (uint32_t u = 0; u < partitions_.size(); u++) {
    if (partitions_[u]) AGENTMEM_RETURN_IF_ERROR(Bm25Damage(*partitions_[u], users_.names[u]));
  }
  plan->bm25_path = "maxscore across " + std::to_string(users) +
                    " users' indexes, statistics of all " + std::to_string(docs) +
                    " documents: " + std::to_string(tokens.size()) + " query tokens, " +
                    std::to_string(stats.parts_searched) + " indexes searched, " +
                    std::to_string(stats.parts_skipped) + " skipped on their bound, " +
                    std::to_string(stats.postings_scored) + " of " +
                    std::to_string(stats.postings_total) + " postings scored; " +
                    (table == nullptr
                         ? std::string("no term table: each token looked up in every index")
                         : "term table of " + std::to_string(table->term_count()) + " terms, " +
                               std::to_string(table->pair_count()) + " (term, user) pairs");
  return Status::OK();
}

// One list: its reciprocal rank. Hybrid: the score-normalised weighted sum
// over the union of both lists (recall.h, RecallQuery::vector_weight). Each
// list holds an episode at most once; an episode in both is found by its id in
// a sorted copy of the BM25 list's ids.
std::vector<RecallHit> RecallIndex::Fuse(const RecallQuery& q,
                                         const std::vector<index::ScoredDoc>& bm25,
                                         const std::vector<index::Neighbor>& vec) const {
  const bool hybrid = q.mode == RecallMode::kHybrid;
  const double w = q.vector_weight >= 0 ? q.vector_weight : VectorWeight();
  const double best_bm25 = bm25.empty() ? 0 : bm25.front().score;  // sorted best first
  double high = -HUGE_VAL, low = HUGE_VAL;
  for (const index::Neighbor& n : vec) {
    high = std::max(high, Similarity(n.distance));
    low = std::min(low, Similarity(n.distance));
  }
  std::vector<RecallHit> fused(bm25.size());
  fused.reserve(bm25.size() + vec.size());
  std::vector<std::pair<uint64_t, size_t>> by_id(bm25.size());  // (id, index in fused)
  for (size_t i = 0; i < bm25.size(); i++) {
    RecallHit& h = fused[i];
    h.id = bm25[i].doc_id;
    h.bm25_score = bm25[i].score;
    h.bm25_rank = static_cast<int>(i + 1);
    h.score += hybrid ? (1 - w) * (best_bm25 > 0 ? bm25[i].score / best_bm25 : 0)
                      : 1.0 / (q.rrf_k + static_cast<double>(i + 1));
    by_id[i] = {h.id, i};
  }
  std::sort(by_id.begin(), by_id.end());
  for (size_t i = 0; i < vec.size(); i++) {
    auto at = std::lower_bound(by_id.begin(), by_id.end(), std::pair<uint64_t, size_t>{vec[i].id, 0});
    RecallHit* h;
    if (at != by_id.end() && at->first == vec[i].id) {
      h = &fused[at->second];
    } else {
      h = &fused.emplace_back();
      h->id = vec[i].id;
    }
    h->vector_score = Similarity(vec[i].distance);
    h->vector_rank = static_cast<int>(i + 1);
    h->score += hybrid ? w * (high > low ? (h->vector_score - low) / (high - low) : 1.0)
                       : 1.0 / (q.rrf_k + static_cast<double>(i + 1));
  }
  return fused;
}

// Fill: k is guaranteed when the filtered partition holds k episodes.
void RecallIndex::Fill(const RecallQuery& q, std::span<const uint64_t> candidates,
                       std::vector<RecallHit>* hits, RecallPlan* plan) {
  if (q.fill && hits->size() < q.k && candidates.size() > hits->size() && q.min_score <= 0) {
    std::unordered_set<uint64_t> have;
    for (const RecallHit& h : *hits) have.insert(h.id);
    for (auto it = candidates.begin(); it != candidates.end() && hits->size() < q.k; ++it) {
      if (have.count(*it)) continue;
      RecallHit h;
      h.id = *it;
      h.fill = true;
      hits->push_back(h);
      plan->filled++;
    }
  }
}

void RecallIndex::VectorLeg::Run() {
  std::vector<float> query;
  status = self->VectorQuery(*q, &query);
  if (!status.ok()) return;
  RecallPlan plan;
  self->VectorSearch(*q, query, candidates, depth, &hits, &plan);
  path = std::move(plan.vector_path);
}

// On the worker thread: an exception goes back to the caller's thread.
void RecallIndex::VectorLeg::RunOn(void* leg) {
  VectorLeg* l = static_cast<VectorLeg*>(leg);
  try {
    l->Run();
  } catch (...) {
    l->exception = std::current_exception();
  }
}

LegWorker* RecallIndex::StartVectorLeg(const RecallQuery& q, uint64_t candidates,
                                       VectorLeg* leg, std::string* legs) const {
  if (!legs_) {
    *legs = "one thread: recall_threads=1";
  } else if (q.extra_filter) {
    *legs = "one thread: the metadata filter reads records";
  } else if (candidates <= kParallelMin) {
    *legs = "one thread: " + std::to_string(candidates) + " candidates";
  } else {
    switch (legs_->TryStart(&VectorLeg::RunOn, leg, graph_ && graph_->ReadingAhead())) {
      case LegWorker::Start::kStarted: return legs_;
      case LegWorker::Start::kBusy: *legs = "one thread: the worker is busy"; break;
      case LegWorker::Start::kUnavailable:
        *legs = "one thread: no worker thread (one CPU, or it could not start)";
        break;
      case LegWorker::Start::kBackingOff:
        *legs = "one thread: the worker was late for a CPU recently";
        break;
      case LegWorker::Start::kNoIdleCpu:
        *legs = "one thread: the runnable threads leave no CPU idle";
        break;
      case LegWorker::Start::kCpuTaken:
        *legs = "one thread: the graph's vectors are being read since the open";
        break;
    }
  }
  return nullptr;
}

Status RecallIndex::Recall(const RecallQuery& q, std::vector<RecallHit>* hits,
                           RecallPlan* plan_out) {
  RecallPlan plan;
  plan.mode = ModeName(q.mode);
  hits->clear();
  Settle();
  if (!broken_.ok()) {
    return Status(kIoErrSticky, "the recall index of this handle is out of step with the file ("
                                    + broken_.message() + "); close and reopen the database");
  }
  if (q.k == 0) return Status::OK();
  std::vector<uint64_t> storage;
  std::span<const uint64_t> candidates = Candidates(q, &plan.partition, &storage);
  const bool every = EveryEpisode(q);
  plan.filtered = every ? plan.partition : candidates.size();
  plan.candidates = every ? "every episode, not listed"
                    : !q.all_users && Unfiltered(q) ? "partition"
                                                    : "listed";
  // A hybrid query looks deeper into each list than k, so that an episode
  // ranked well by both lists but in the top k of neither can win.
  const size_t depth = q.mode == RecallMode::kHybrid ? std::max(q.k, q.fusion_depth) : q.k;
  const bool run_bm25 = q.mode != RecallMode::kVector;
  const bool run_vector = q.mode != RecallMode::kBm25;
  VectorLeg leg(this, &q, candidates, depth);
  // The worker runs the vector leg while this thread runs the BM25 leg; on
  // an early way out of this scope (an exception) the guard takes the leg
  // back or waits for it.
  struct LegGuard {
    LegWorker* worker = nullptr;
    ~LegGuard() {
      if (worker) worker->Cancel();
    }
  } parallel;
  if (run_bm25 && run_vector) {
    parallel.worker = StartVectorLeg(q, plan.filtered, &leg, &plan.legs);
  } else {
    plan.legs = "one leg";
  }

  std::vector<index::ScoredDoc> bm25;
  if (run_bm25) {
    AGENTMEM_RETURN_IF_ERROR(Bm25Search(q, candidates, depth, &bm25, &plan));
  } else {
    plan.bm25_path = "skipped: mode vector";
  }
  std::vector<index::Neighbor> vec;
  if (run_vector) {
    if (parallel.worker) {
      LegWorker* worker = std::exchange(parallel.worker, nullptr);
      plan.legs = worker->Finish()
                      ? "parallel: vector leg on the handle's worker thread"
                      : "one thread: the worker had not begun the vector leg when BM25 ended";
      if (leg.exception) std::rethrow_exception(leg.exception);
    } else {
      leg.Run();
    }
    const Status& s = leg.status;
    if (!s.ok() && (q.mode == RecallMode::kVector || s.code() != kMisuse)) return s;
    if (s.ok()) {
      vec = std::move(leg.hits);
      plan.vector_path = std::move(leg.path);
    } else {
      plan.vector_path = "skipped: " + s.message();
    }
  } else {
    plan.vector_path = "skipped: mode bm25";
  }
  plan.bm25_hits = bm25.size();
  plan.vector_hits = vec.size();

  std::vector<RecallHit> fused = Fuse(q, bm25, vec);
  int64_t now = q.now;
  if (now == 0) {
    using namespace std::chrono;
    now = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  }
  for (RecallHit& h : fused) {
    if (!Matches(q, h)) {
      plan.unmatched++;
      continue;
    }
    if (q.half_life_s > 0) {
      double age_s = std::max<double>(0, static_cast<double>(now - attrs_.Find(h.id)->ts) / 1e6);
      h.score *= std::exp2(-age_s / q.half_life_s);
    }
    if (h.score >= q.min_score) hits->push_back(h);
  }
  std::sort(hits->begin(), hits->end(), [](const RecallHit& a, const RecallHit& b) {
    return a.score != b.score ? a.score > b.score : a.id < b.id;
  });
  if (hits->size() > q.k) hits->resize(q.k);
  plan.fused = hits->size();

  if (every && q.fill && hits->size() < q.k && plan.filtered > hits->size()) {
    storage = ListEveryUser(q);  // fill takes the candidates in id order
    candidates = storage;
  }
  Fill(q, candidates, hits, &plan);
  if (plan_out) *plan_out = std::move(plan);
  return Status::OK();
}

}  // namespace agentmem::engine

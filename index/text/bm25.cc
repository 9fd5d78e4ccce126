// index/text/bm25.cc -- Bm25Index maintenance (add, remove), BM25 scoring and
// the brute-force top-k oracle (see bm25.h; the skipping top-k is in
// maxscore.cc).
#include "index/text/bm25.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace agentmem::index {
namespace {

// True when a ranks before b: higher score, then smaller doc id.
bool RanksBefore(const ScoredDoc& a, const ScoredDoc& b) {
  return a.score > b.score || (a.score == b.score && a.doc_id < b.doc_id);
}

}  // namespace

Status Bm25Index::Add(uint64_t doc_id, std::span<const std::string> tokens) {
  if (tokens.size() > std::numeric_limits<uint32_t>::max()) {
    return StatusF(kTooBig, "bm25: document %llu has %zu tokens, more than 2^32-1",
                   static_cast<unsigned long long>(doc_id), tokens.size());
  }
  std::vector<TermCount> counts = CountTerms(tokens);
  return AddCounts(doc_id, static_cast<uint32_t>(tokens.size()), counts);
}

std::vector<Bm25Index::TermCount> Bm25Index::CountTerms(std::span<const std::string> tokens,
                                                        size_t weighted, uint32_t weight) {
  std::vector<TermCount> counts;
  std::unordered_map<std::string_view, size_t> at;
  at.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); i++) {
    auto [it, inserted] = at.emplace(tokens[i], counts.size());
    if (inserted) counts.push_back(TermCount{tokens[i], 0});
    counts[it->second].tf += i < weighted ? weight : 1;
  }
  return counts;
}

bool Bm25Index::Contains(uint64_t doc_id) const {
  return docs_.count(doc_id) != 0 ||
         std::binary_search(frozen_docs_.begin(), frozen_docs_.end(), doc_id);
}

// The frozen terms that `counts` would move into the ordinary index,
// checked before anything changes (a damaged one would move as empty); the
// rest of the image is left to its first use or Verify().
Status Bm25Index::CheckTermsToMove(std::span<const TermCount> counts) const {
  AGENTMEM_RETURN_IF_ERROR(status());
  if (!frozen_ || verified_.load(std::memory_order_acquire)) return Status::OK();
  for (const TermCount& c : counts) {
    if (term_ids_.find(c.term) != term_ids_.end()) continue;  // moved already
    const int64_t frozen = FindFrozen(c.term);
    if (frozen >= 0 && !TermHolds(static_cast<size_t>(frozen))) return status();
  }
  return Status::OK();
}

Status Bm25Index::AddCounts(uint64_t doc_id, uint32_t doc_len, std::span<const TermCount> counts) {
  AGENTMEM_RETURN_IF_ERROR(status());
  if (Contains(doc_id)) {
    return StatusF(kConstraint, "bm25: document %llu is already indexed",
                   static_cast<unsigned long long>(doc_id));
  }
  uint64_t sum = 0;
  std::vector<std::string_view> terms;  // sorted, to find a repeated one
  terms.reserve(counts.size());
  bool bad = false;
  for (const TermCount& c : counts) {
    bad |= c.tf == 0 || c.term.empty();
    terms.push_back(c.term);
    sum += c.tf;
  }
  std::sort(terms.begin(), terms.end());
  if (bad || std::adjacent_find(terms.begin(), terms.end()) != terms.end()) {
    return StatusF(kRange, "bm25: document %llu has an empty, repeated or zero-count term",
                   static_cast<unsigned long long>(doc_id));
  }
  if (sum != doc_len) {
    return StatusF(kRange, "bm25: document %llu term counts add up to %llu, not %u",
                   static_cast<unsigned long long>(doc_id), static_cast<unsigned long long>(sum),
                   doc_len);
  }
  AGENTMEM_RETURN_IF_ERROR(CheckTermsToMove(counts));
  Doc doc{doc_len, {}};
  doc.term_ids.reserve(counts.size());
  size_t gained = 0;
  for (const TermCount& c : counts) {
    const size_t known = term_ids_.size();
    uint32_t term_id = TermIdFor(c.term);
    gained += term_ids_.size() != known;
    terms_[term_id].list.Insert(Posting{doc_id, c.tf}, doc_len);
    doc.term_ids.push_back(term_id);
  }
  docs_.emplace(doc_id, std::move(doc));
  total_length_ += doc_len;
  ordinary_bytes_ += OrdinaryBytes(gained, counts.size());
  if (ordinary_bytes_ >= freeze_at_) {
    // Without the memory to freeze, or with damage found in the image
    // (status() keeps it for the next write and the checkpoint), the
    // document stays ordinary.
    Status s = Freeze();
    if (!s.ok() && s.code() != kNoMem && s.code() != kCorruptIndex) return s;
  }
  return Status::OK();
}

size_t Bm25Index::OrdinaryBytes(size_t terms, size_t postings) {
  // A document's entry and term ids; a term's text, list header, block, peak
  // and hash nodes; a posting with its length (measured with glibc's malloc:
  // about 300 bytes per term of a 100-document index).
  return 64 + terms * 256 + postings * 24;
}

bool Bm25Index::TermsOf(uint64_t doc_id, uint32_t* doc_len, std::vector<TermCount>* counts) const {
  auto it = docs_.find(doc_id);
  if (it == docs_.end()) return false;
  *doc_len = it->second.length;
  counts->clear();
  for (uint32_t term_id : it->second.term_ids) {
    const Term& t = terms_[term_id];
    const size_t at = t.list.LowerBound(doc_id);
    counts->push_back({t.text, at < t.list.size() && t.list.doc_id(at) == doc_id ? t.list.tf(at) : 0});
  }
  return true;
}

Status Bm25Index::Remove(uint64_t doc_id) {
  AGENTMEM_RETURN_IF_ERROR(Verify());
  auto it = docs_.find(doc_id);
  if (it == docs_.end() && Contains(doc_id)) {
    AGENTMEM_RETURN_IF_ERROR(Thaw());  // the image's documents become ordinary ones
    it = docs_.find(doc_id);
  }
  if (it == docs_.end()) {
    return StatusF(kNotFound, "bm25: document %llu is not indexed",
                   static_cast<unsigned long long>(doc_id));
  }
  for (uint32_t term_id : it->second.term_ids) {
    PostingList& list = terms_[term_id].list;
    if (!list.Erase(doc_id)) {
      return StatusF(kInternal, "bm25: document %llu is missing from a posting list",
                     static_cast<unsigned long long>(doc_id));
    }
    if (list.empty()) ReleaseTerm(term_id);
  }
  total_length_ -= it->second.length;
  docs_.erase(it);
  return Status::OK();
}

double Bm25Index::avgdl() const { return AvgdlOf(doc_count(), total_length_); }

double Bm25Index::AvgdlOf(uint64_t doc_count, uint64_t total_length) {
  return doc_count == 0 ? 0.0 : static_cast<double>(total_length) / static_cast<double>(doc_count);
}

uint64_t Bm25Index::DocFrequency(std::string_view term) const {
  const PostingList* list = FindList(term);
  return list ? list->size() : 0;
}

std::vector<Posting> Bm25Index::Postings(std::string_view term) const {
  std::vector<Posting> out;
  if (const PostingList* list = FindList(term)) {
    out.reserve(list->size());
    for (size_t i = 0; i < list->size(); i++) out.push_back(list->posting(i));
  }
  return out;
}

double Bm25Index::Idf(std::string_view term) const {
  const PostingList* list = FindList(term);
  return list ? IdfFor(list->size()) : 0.0;
}

const PostingList* Bm25Index::FindList(std::string_view term) const {
  if (!term_ids_.empty()) {
    auto it = term_ids_.find(term);
    if (it != term_ids_.end()) return &terms_[*it].list;
  }
  const int64_t frozen = FindFrozen(term);
  if (frozen < 0) return nullptr;
  std::lock_guard lock(views_mu_);
  auto& view = frozen_views_[static_cast<size_t>(frozen)];
  if (!view) view = std::make_unique<PostingList>(FrozenList(static_cast<size_t>(frozen)));
  return view.get();
}

const PostingList* Bm25Index::ListOfRef(uint32_t ref, PostingList* view) const {
  if (ref & kOrdinaryRef) return &terms_[ref & ~kOrdinaryRef].list;
  *view = FrozenList(ref);
  return view;
}

void Bm25Index::PrefetchRef(uint32_t ref) const {
  if (ref & kOrdinaryRef) {
    __builtin_prefetch(&terms_[ref & ~kOrdinaryRef].list);
  } else {
    __builtin_prefetch(&frozen_terms_[ref]);
  }
}

const PostingList* Bm25Index::FindListInto(std::string_view term,
                                           std::deque<PostingList>* views) const {
  if (!term_ids_.empty()) {
    auto it = term_ids_.find(term);
    if (it != term_ids_.end()) return &terms_[*it].list;
  }
  const int64_t frozen = FindFrozen(term);
  if (frozen < 0) return nullptr;
  return &views->emplace_back(FrozenList(static_cast<size_t>(frozen)));
}

uint32_t Bm25Index::TermIdFor(std::string_view token) {
  auto it = term_ids_.find(token);
  if (it != term_ids_.end()) return *it;
  uint32_t term_id;
  if (!free_term_ids_.empty()) {
    term_id = free_term_ids_.back();
    free_term_ids_.pop_back();
  } else {
    term_id = static_cast<uint32_t>(terms_.size());
    terms_.emplace_back();
  }
  terms_[term_id].text = std::string(token);
  // A frozen term moves here with its postings (viewed; copied on insert).
  if (const int64_t frozen = FindFrozen(token); frozen >= 0) {
    terms_[term_id].list = FrozenList(static_cast<size_t>(frozen));
    superseded_++;
  }
  if (term_parts_ != nullptr) term_parts_->Set(term_parts_part_, token, kOrdinaryRef | term_id);
  term_ids_.insert(term_id);
  return term_id;
}

void Bm25Index::ReleaseTerm(uint32_t term_id) {
  Term& term = terms_[term_id];
  if (term_parts_ != nullptr) term_parts_->Erase(term_parts_part_, term.text);  // lost
  term_ids_.erase(term_id);  // hashed by its text: before the text goes
  term = Term();
  free_term_ids_.push_back(term_id);
}

double Bm25Index::IdfOf(uint64_t doc_count, uint64_t df) {
  const auto n = static_cast<double>(doc_count);
  const auto d = static_cast<double>(df);
  return std::log(1 + (n - d + 0.5) / (d + 0.5));
}

Bm25Index::QueryTerm Bm25Index::MakeQueryTerm(const PostingList* list, double idf, size_t slot,
                                              const Bm25TermScorer& scorer) {
  double bound = 0;
  for (const PostingList::Peak& peak : list->peaks()) {
    bound = std::max(bound, scorer.Score(idf, peak.tf, peak.min_len));
  }
  return {list, idf, bound, slot};
}

// The distinct query tokens that are in the index, in order of first
// appearance (the canonical summation order), with idf and score bound.
std::vector<Bm25Index::QueryTerm> Bm25Index::PrepareQuery(std::span<const std::string> query_tokens,
                                                          const Bm25TermScorer& scorer) const {
  std::vector<QueryTerm> terms;
  for (const std::string& token : query_tokens) {
    const PostingList* list = FindList(token);
    if (list == nullptr) continue;
    bool seen = std::any_of(terms.begin(), terms.end(),
                            [list](const QueryTerm& q) { return q.list == list; });
    if (seen) continue;
    terms.push_back(MakeQueryTerm(list, IdfFor(list->size()), terms.size(), scorer));
  }
  return terms;
}

// The collection's statistics are sums over the parts; its canonical order
// is that of one index holding every document: the distinct tokens found in
// some part, in order of first appearance. A part scores a term it lacks as
// the 0.0 a document without the term adds, so its sums are the same.
// With `term_parts` a token is looked up only in the parts listed for it.
Bm25Index::AcrossQuery Bm25Index::PrepareAcross(std::span<const Bm25Index* const> parts,
                                                std::span<const std::string> query_tokens,
                                                const Bm25TermParts* term_parts) {
  std::vector<std::string_view> distinct;
  for (const std::string& token : query_tokens) {
    if (std::find(distinct.begin(), distinct.end(), token) == distinct.end()) {
      distinct.push_back(token);
    }
  }
  uint64_t n = 0, total_length = 0;
  Bm25Params params;
  for (const Bm25Index* part : parts) {
    if (part == nullptr) continue;
    params = part->params_;
    n += part->doc_count();
    total_length += part->total_length_;
  }
  // Every (part, token) list, token by token; per_part[p]: how many part p has.
  struct Found {
    uint32_t part, token;
    const PostingList* list;
  };
  std::vector<Found> found;
  std::vector<uint32_t> per_part(parts.size(), 0);
  std::vector<uint64_t> df(distinct.size(), 0);
  std::deque<PostingList> views;
  std::vector<PostingList> ref_views;
  if (term_parts != nullptr) {
    size_t holders = 0;
    for (std::string_view token : distinct) holders += term_parts->Find(token).size();
    ref_views.reserve(holders);  // never grows past: the lists stay put
  }
  auto take = [&](size_t p, size_t t, const PostingList* list) {
    if (list == nullptr || list->empty()) return;
    __builtin_prefetch(list->peaks().data());  // for MakeQueryTerm() below
    found.push_back({static_cast<uint32_t>(p), static_cast<uint32_t>(t), list});
    per_part[p]++;
    df[t] += list->size();
  };
  for (size_t t = 0; t < distinct.size(); t++) {
    if (term_parts != nullptr) {
      // Each list is a cache miss or two in another index: the term entries
      // a few holders ahead are loaded while this one is read.
      constexpr size_t kAhead = 8;
      const std::span<const Bm25TermParts::Holder> holders = term_parts->Find(distinct[t]);
      auto usable = [&](const Bm25TermParts::Holder& h) {
        return h.part < parts.size() && parts[h.part] != nullptr;
      };
      for (size_t i = 0; i < std::min(kAhead, holders.size()); i++) {
        if (usable(holders[i])) parts[holders[i].part]->PrefetchRef(holders[i].ref);
      }
      for (size_t i = 0; i < holders.size(); i++) {
        const Bm25TermParts::Holder& h = holders[i];
        if (i + kAhead < holders.size() && usable(holders[i + kAhead])) {
          parts[holders[i + kAhead].part]->PrefetchRef(holders[i + kAhead].ref);
        }
        if (!usable(h)) continue;
        PostingList* view = &ref_views.emplace_back();
        const PostingList* list = parts[h.part]->ListOfRef(h.ref, view);
        if (list != view) ref_views.pop_back();
        take(h.part, t, list);
      }
    } else {
      for (size_t p = 0; p < parts.size(); p++) {
        if (parts[p] == nullptr) continue;
        take(p, t, parts[p]->FindListInto(distinct[t], &views));
      }
    }
  }
  AcrossQuery q{Bm25TermScorer(params.k1, params.b, AvgdlOf(n, total_length)), 0, {}, {},
                std::move(views), std::move(ref_views)};
  std::vector<size_t> slot(distinct.size());
  std::vector<double> idf(distinct.size());
  for (size_t t = 0; t < distinct.size(); t++) {
    if (df[t] == 0) continue;
    slot[t] = q.slots++;
    idf[t] = IdfOf(n, df[t]);
  }
  // The parts in argument order, each with its lists in token (= slot) order;
  // per_part[p] becomes the position of part p's next list.
  std::vector<uint32_t> part_at(parts.size(), 0);
  uint32_t next = 0;
  for (size_t p = 0; p < parts.size(); p++) {
    if (per_part[p] == 0) continue;
    part_at[p] = static_cast<uint32_t>(q.parts.size());
    q.parts.push_back({next, per_part[p], 0.0});
    const uint32_t count = per_part[p];
    per_part[p] = next;
    next += count;
  }
  q.terms.resize(found.size(), QueryTerm{nullptr, 0, 0, 0});
  for (const Found& f : found) {
    QueryTerm& term = q.terms[per_part[f.part]++];
    term = MakeQueryTerm(f.list, idf[f.token], slot[f.token], q.scorer);
    q.parts[part_at[f.part]].bound += term.upper_bound;
  }
  return q;
}

std::vector<ScoredDoc> Bm25Index::TopKAcrossBruteForce(std::span<const Bm25Index* const> parts,
                                                       std::span<const std::string> query_tokens,
                                                       size_t k, const DocFilter& filter) {
  const AcrossQuery q = PrepareAcross(parts, query_tokens, nullptr);
  std::unordered_map<uint64_t, std::vector<double>> by_slot;
  for (const QueryTerm& t : q.terms) {
    const PostingList& list = *t.list;
    for (size_t i = 0; i < list.size(); i++) {
      if (filter && !filter(list.doc_id(i))) continue;
      std::vector<double>& slots = by_slot[list.doc_id(i)];
      slots.resize(q.slots, 0.0);
      slots[t.slot] = q.scorer.Score(t.idf, list.tf(i), list.doc_len(i));
    }
  }
  std::vector<ScoredDoc> all;
  all.reserve(by_slot.size());
  for (const auto& [doc_id, slots] : by_slot) {
    double score = 0;
    for (double s : slots) score += s;
    all.push_back({doc_id, score});
  }
  size_t n = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<ptrdiff_t>(n), all.end(), RanksBefore);
  all.resize(n);
  return all;
}

std::vector<ScoredDoc> Bm25Index::TopKBruteForce(std::span<const std::string> query_tokens,
                                                 size_t k, const DocFilter& filter) const {
  std::unordered_map<uint64_t, double> scores;
  const Bm25TermScorer scorer = MakeScorer();
  for (const QueryTerm& q : PrepareQuery(query_tokens, scorer)) {
    const PostingList& list = *q.list;
    for (size_t i = 0; i < list.size(); i++) {
      if (filter && !filter(list.doc_id(i))) continue;
      scores[list.doc_id(i)] += scorer.Score(q.idf, list.tf(i), list.doc_len(i));
    }
  }
  std::vector<ScoredDoc> all;
  all.reserve(scores.size());
  for (const auto& [doc_id, score] : scores) all.push_back({doc_id, score});
  size_t n = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<ptrdiff_t>(n), all.end(), RanksBefore);
  all.resize(n);
  return all;
}

}  // namespace agentmem::index

// index/text/maxscore.cc -- Bm25Index::TopK(): disjunctive top-k with
// block-max MaxScore, document at a time.
//
// MaxScore (Turtle & Flood, 1995). The query's posting lists are sorted by
// their score upper bound (the best of the list's peaks, posting_list.h),
// ascending, and prefix sums of the bounds are kept. Once k documents are
// held, with the k-th score as threshold, the longest prefix of lists whose
// bounds sum to no more than the threshold is "non-essential": a document
// found only there cannot enter the top k. Candidates are drawn only from the
// essential lists; each candidate is completed by probing the non-essential
// lists from the highest bound down (galloping search, no scan), and
// abandoned as soon as its partial score plus the bounds still unprobed
// cannot beat the threshold.
//
// Block-max refinement (in the manner of Ding & Suel, 2011). Every list is
// summarised in blocks of 64 postings (largest tf, smallest |d|), which bound
// the score of each posting in the block. Two checks use them before any
// posting is scored:
//   * run skip: no document between the candidate and the end of the
//     shortest current block of the essential lists can score more than the
//     sum of those current blocks' bounds plus the non-essential bounds; when
//     that cannot beat the threshold, every essential cursor jumps past the
//     run;
//   * candidate skip: a candidate scores at most the block bounds of the
//     essential lists that hold it plus the non-essential bounds.
//
// Several indexes as one collection (TopKAcross()): one search per index,
// each with the collection's idf and avgdl, all offering to one top-k heap,
// so the k-th score one index reached prunes the next from its start. The
// searches share one MaxScoreSearch, whose buffers are reused from index to
// index: with a thousand indexes, allocating them per index would cost more
// than the small lists' postings.
//
// Exactness: a candidate enters when it ranks before the k-th document
// (greater score, or equal score and smaller id); within one index,
// candidates come in increasing doc id order, so a tie there only loses. Pruning compares bounds inflated by a
// relative 1e-9, far above the rounding error of summing a query's term
// scores in another order, so no document that belongs in the top k is ever
// pruned. The final score of every document is summed in the canonical order
// shared with TopKBruteForce(), so both return identical numbers.
#include <algorithm>
#include <limits>
#include <queue>

#include "index/text/bm25.h"

namespace agentmem::index {
namespace {

constexpr double kBoundSlack = 1e-9;

// Heap order: the worst of the held documents is on top.
struct RanksBeforeOrder {
  bool operator()(const ScoredDoc& a, const ScoredDoc& b) const {
    return a.score > b.score || (a.score == b.score && a.doc_id < b.doc_id);
  }
};

using TopKHeap = std::priority_queue<ScoredDoc, std::vector<ScoredDoc>, RanksBeforeOrder>;

// The held documents, best first.
std::vector<ScoredDoc> Drain(TopKHeap* heap) {
  std::vector<ScoredDoc> out;
  out.reserve(heap->size());
  for (; !heap->empty(); heap->pop()) out.push_back(heap->top());
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

// The search of one index's lists at a time, offering to a top-k heap that
// may already hold documents (of other indexes).
class MaxScoreSearch {
 public:
  // Lists' slots are < `slots`; their idf and bound are for `scorer`.
  MaxScoreSearch(size_t slots, const Bm25TermScorer& scorer, size_t k, const DocFilter& filter,
                 TopKHeap* heap);
  // Searches the lists of one index (`terms`: the query's lists with idf,
  // bound and slot): offers every document that can enter to the heap; adds
  // the work to *stats (if not null).
  void Run(std::span<const Bm25Index::QueryTerm> terms, QueryStats* stats);

 private:
  struct Cursor {
    const Bm25Index::QueryTerm* q;
    size_t pos = 0;                                     // current posting; size() when exhausted
    uint64_t doc = 0;                                   // its doc id, read once per move
    size_t block = std::numeric_limits<size_t>::max();  // block of block_bound
    double block_bound = 0;
  };

  bool Exhausted(const Cursor& c) const { return c.pos >= c.q->list->size(); }
  uint64_t DocOf(const Cursor& c) const { return c.doc; }
  // Moves the cursor to posting `pos` (size() when exhausted).
  static void MoveTo(Cursor* c, size_t pos) {
    c->pos = pos;
    if (pos < c->q->list->size()) c->doc = c->q->list->doc_id(pos);
  }
  bool AtDoc(const Cursor& c, uint64_t doc_id) const { return !Exhausted(c) && DocOf(c) == doc_id; }
  double BlockBound(Cursor* c);
  double NonEssentialBound() const;
  bool NextCandidate(uint64_t* doc_id) const;
  bool SkipRun(uint64_t doc_id);
  void SkipCandidate(uint64_t doc_id);
  bool ScoreCandidate(uint64_t doc_id, double* score);
  double TakeContribution(Cursor* c);
  static void SeekTo(Cursor* c, uint64_t doc_id);
  double SumContributions();
  bool CannotEnter(double upper_bound) const;
  void Offer(uint64_t doc_id, double score);
  void UpdateEssential();

  const DocFilter& filter_;
  const size_t k_;
  const Bm25TermScorer& scorer_;
  std::vector<Bm25Index::QueryTerm> terms_;  // ascending by upper bound
  std::vector<Cursor> cursors_;              // parallel to terms_
  std::vector<double> prefix_bound_;         // sum of bounds of cursors 0..i
  std::vector<double> contributions_;        // current candidate, by slot
  size_t first_essential_ = 0;               // cursors below are non-essential
  uint64_t failed_run_end_ = 0;              // the last run that could not be skipped
  double failed_run_threshold_ = -1;         // ... and the threshold it was checked at
  TopKHeap& heap_;
  QueryStats stats_;
};

MaxScoreSearch::MaxScoreSearch(size_t slots, const Bm25TermScorer& scorer, size_t k,
                               const DocFilter& filter, TopKHeap* heap)
    : filter_(filter), k_(k), scorer_(scorer), heap_(*heap) {
  contributions_.assign(slots, 0.0);  // every candidate leaves them 0 (SumContributions)
}

void MaxScoreSearch::Run(std::span<const Bm25Index::QueryTerm> terms, QueryStats* stats) {
  // Ascending by bound, ties in the given order: an insertion sort, as a
  // part has a few lists and std::stable_sort would allocate for them.
  terms_.clear();
  for (const Bm25Index::QueryTerm& t : terms) {
    terms_.push_back(t);
    for (size_t i = terms_.size() - 1; i > 0 && terms_[i - 1].upper_bound > t.upper_bound; i--) {
      std::swap(terms_[i - 1], terms_[i]);
    }
  }
  cursors_.clear();
  prefix_bound_.clear();
  stats_ = QueryStats();
  first_essential_ = 0;
  failed_run_end_ = 0;
  failed_run_threshold_ = -1;
  double sum = 0;
  for (const Bm25Index::QueryTerm& q : terms_) {
    cursors_.push_back({&q});
    MoveTo(&cursors_.back(), 0);
    sum += q.upper_bound;
    prefix_bound_.push_back(sum);
    stats_.postings_total += q.list->size();
  }
  UpdateEssential();  // a heap already full prunes from the first posting
  uint64_t doc_id;
  while (first_essential_ < cursors_.size() && NextCandidate(&doc_id)) {
    if (SkipRun(doc_id)) continue;
    if (filter_ && !filter_(doc_id)) {
      SkipCandidate(doc_id);
      continue;
    }
    double score;
    if (ScoreCandidate(doc_id, &score)) Offer(doc_id, score);
  }
  if (stats != nullptr) {
    stats->postings_total += stats_.postings_total;
    stats->postings_scored += stats_.postings_scored;
    stats->docs_scored += stats_.docs_scored;
    stats->blocks_skipped += stats_.blocks_skipped;
  }
}

// The bound of the block that holds the cursor's current posting, computed
// once per block. REQUIRES: !Exhausted(*c).
double MaxScoreSearch::BlockBound(Cursor* c) {
  size_t block = c->pos / PostingList::kBlockSize;
  if (block != c->block) {
    const PostingList::Block& b = c->q->list->blocks()[block];
    c->block = block;
    c->block_bound = scorer_.Score(c->q->idf, b.max_tf, b.min_len);
  }
  return c->block_bound;
}

double MaxScoreSearch::NonEssentialBound() const {
  return first_essential_ == 0 ? 0.0 : prefix_bound_[first_essential_ - 1];
}

// The smallest current doc id over the essential cursors; false when they
// are all exhausted.
bool MaxScoreSearch::NextCandidate(uint64_t* doc_id) const {
  bool found = false;
  for (size_t i = first_essential_; i < cursors_.size(); i++) {
    if (Exhausted(cursors_[i])) continue;
    uint64_t id = DocOf(cursors_[i]);
    if (!found || id < *doc_id) *doc_id = id;
    found = true;
  }
  return found;
}

// The run skip of the file comment, for the run that starts at candidate
// doc_id (every essential cursor is at or past it). Returns true when it
// moved the cursors.
bool MaxScoreSearch::SkipRun(uint64_t doc_id) {
  if (heap_.size() < k_) return false;
  // Until the failed run is over, every cursor stays in the same block, so
  // the answer cannot change unless the threshold does.
  const double threshold = heap_.top().score;
  if (doc_id <= failed_run_end_ && threshold == failed_run_threshold_) return false;
  double bound = NonEssentialBound();
  uint64_t run_end = std::numeric_limits<uint64_t>::max();
  for (size_t i = first_essential_; i < cursors_.size(); i++) {
    Cursor& c = cursors_[i];
    if (Exhausted(c)) continue;
    bound += BlockBound(&c);
    run_end = std::min(run_end, c.q->list->blocks()[c.pos / PostingList::kBlockSize].last_doc);
  }
  if (!CannotEnter(bound)) {
    failed_run_end_ = run_end;
    failed_run_threshold_ = threshold;
    return false;
  }
  stats_.blocks_skipped++;
  for (size_t i = first_essential_; i < cursors_.size(); i++) {
    Cursor& c = cursors_[i];
    if (run_end == std::numeric_limits<uint64_t>::max()) {
      MoveTo(&c, c.q->list->size());
    } else {
      SeekTo(&c, run_end + 1);
    }
  }
  return true;
}

void MaxScoreSearch::SkipCandidate(uint64_t doc_id) {
  for (size_t i = first_essential_; i < cursors_.size(); i++) {
    if (AtDoc(cursors_[i], doc_id)) MoveTo(&cursors_[i], cursors_[i].pos + 1);
  }
}

// Applies the candidate skip, scores the candidate from the essential lists,
// then completes it from the non-essential ones unless its bound drops to the
// threshold. Returns false (no score) for a skipped or abandoned candidate.
bool MaxScoreSearch::ScoreCandidate(uint64_t doc_id, double* score) {
  if (heap_.size() == k_) {
    double bound = NonEssentialBound();
    for (size_t i = first_essential_; i < cursors_.size(); i++) {
      if (AtDoc(cursors_[i], doc_id)) bound += BlockBound(&cursors_[i]);
    }
    if (CannotEnter(bound)) {
      SkipCandidate(doc_id);
      return false;
    }
  }
  double partial = 0;
  for (size_t i = first_essential_; i < cursors_.size(); i++) {
    if (AtDoc(cursors_[i], doc_id)) partial += TakeContribution(&cursors_[i]);
  }
  for (size_t i = first_essential_; i-- > 0;) {
    if (CannotEnter(partial + prefix_bound_[i])) {
      SumContributions();  // clears them
      return false;
    }
    SeekTo(&cursors_[i], doc_id);
    if (AtDoc(cursors_[i], doc_id)) partial += TakeContribution(&cursors_[i]);
  }
  *score = SumContributions();
  stats_.docs_scored++;
  return true;
}

// Scores the posting under the cursor into its slot and steps past it.
double MaxScoreSearch::TakeContribution(Cursor* c) {
  const PostingList& list = *c->q->list;
  double s = scorer_.Score(c->q->idf, list.tf(c->pos), list.doc_len(c->pos));
  contributions_[c->q->slot] = s;
  MoveTo(c, c->pos + 1);
  stats_.postings_scored++;
  return s;
}

// Moves the cursor to the first posting with doc id >= doc_id: doubling steps
// from the current position, then a binary search in the last step.
void MaxScoreSearch::SeekTo(Cursor* c, uint64_t doc_id) {
  const PostingList& list = *c->q->list;
  const size_t n = list.size();
  size_t lo = c->pos;
  if (lo >= n || c->doc >= doc_id) return;
  size_t step = 1;
  size_t hi = lo + 1;
  while (hi < n && list.doc_id(hi) < doc_id) {
    lo = hi;
    step *= 2;
    hi = lo + step;
  }
  MoveTo(c, list.LowerBound(doc_id, lo + 1, std::min(hi, n)));
}

// The candidate's score in canonical (slot) order; resets the slots. Adding
// the 0.0 of an absent term leaves a sum unchanged, exactly.
double MaxScoreSearch::SumContributions() {
  double sum = 0;
  for (double& c : contributions_) {
    sum += c;
    c = 0;
  }
  return sum;
}

bool MaxScoreSearch::CannotEnter(double upper_bound) const {
  return heap_.size() == k_ && upper_bound * (1 + kBoundSlack) <= heap_.top().score;
}

// Keeps the candidate if it beats the k-th document, then lets the raised
// threshold turn more lists non-essential.
void MaxScoreSearch::Offer(uint64_t doc_id, double score) {
  const ScoredDoc doc{doc_id, score};
  if (heap_.size() < k_) {
    heap_.push(doc);
  } else if (RanksBeforeOrder()(doc, heap_.top())) {
    heap_.pop();
    heap_.push(doc);
  } else {
    return;
  }
  UpdateEssential();
}

// The lists whose bounds together cannot beat the k-th score become
// non-essential.
void MaxScoreSearch::UpdateEssential() {
  while (first_essential_ < cursors_.size() && CannotEnter(prefix_bound_[first_essential_])) {
    first_essential_++;
  }
}

std::vector<ScoredDoc> Bm25Index::TopK(std::span<const std::string> query_tokens, size_t k,
                                       const DocFilter& filter, QueryStats* stats) const {
  if (k == 0) {
    if (stats != nullptr) *stats = QueryStats();
    return {};
  }
  const Bm25TermScorer scorer = MakeScorer();
  std::vector<QueryTerm> terms = PrepareQuery(query_tokens, scorer);
  const size_t slots = terms.size();
  TopKHeap heap;
  if (stats != nullptr) *stats = QueryStats();
  MaxScoreSearch(slots, scorer, k, filter, &heap).Run(terms, stats);
  return Drain(&heap);
}

std::vector<ScoredDoc> Bm25Index::TopKAcross(std::span<const Bm25Index* const> parts,
                                             std::span<const std::string> query_tokens, size_t k,
                                             const DocFilter& filter, QueryStats* stats,
                                             const Bm25TermParts* term_parts) {
  QueryStats sink;
  if (stats == nullptr) stats = &sink;
  *stats = QueryStats();
  if (k == 0) return {};
  AcrossQuery q = PrepareAcross(parts, query_tokens, term_parts);
  // Best bound first, so that the k-th score rises early; ties keep the
  // parts' order (their lists' order).
  std::sort(q.parts.begin(), q.parts.end(), [](const AcrossPart& a, const AcrossPart& b) {
    return a.bound > b.bound || (a.bound == b.bound && a.first < b.first);
  });
  TopKHeap heap;
  MaxScoreSearch search(q.slots, q.scorer, k, filter, &heap);
  for (size_t i = 0; i < q.parts.size(); i++) {
    const AcrossPart& part = q.parts[i];
    if (heap.size() == k && part.bound * (1 + kBoundSlack) <= heap.top().score) {
      stats->parts_skipped += q.parts.size() - i;  // the rest have no higher bound
      for (size_t j = i; j < q.parts.size(); j++) {
        for (uint32_t t = q.parts[j].first; t < q.parts[j].first + q.parts[j].count; t++) {
          stats->postings_total += q.terms[t].list->size();
        }
      }
      break;
    }
    stats->parts_searched++;
    search.Run(std::span(q.terms).subspan(part.first, part.count), stats);
  }
  return Drain(&heap);
}

}  // namespace agentmem::index

// index/text/bm25.h -- an in-memory BM25 inverted index over the documents of
// one partition, with a skipping (block-max MaxScore) disjunctive top-k and a
// brute-force scorer that serves as its test oracle.
//
// Scoring is Okapi BM25 exactly as shared/data/bm25_baseline.py defines it:
//
//   score(d, q) = sum over DISTINCT query tokens t present in the index of
//                 idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
//   idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
//
// with k1 = 1.2, b = 0.75, N the number of documents, |d| the number of
// tokens of d (duplicates counted), avgdl the mean |d| over all documents
// (empty documents count in N and avgdl), all over this one index. Ranking is
// score descending, ties by smaller doc id. Only documents that contain at
// least one query token are returned (their score is > 0): a caller that
// wants the reference's "zero-score documents fill the tail in id order"
// appends them itself.
//
// Floating point: every document's score is summed in one canonical order
// (distinct query tokens in order of first appearance), by both the skipping
// and the brute-force scorer, so the two return bit-identical scores.
//
// Persistence: postings are kept sorted by doc id so that a term's list can be
// written with EncodePostings() (postings.h) as it stands. Document lengths
// and the skipping summaries (posting_list.h) are derived from the documents.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "format/status.h"
#include "index/text/bm25_scorer.h"
#include "index/text/posting_list.h"
#include "index/text/postings.h"
#include "index/text/term_parts.h"

namespace agentmem::index {

struct Bm25Params {
  double k1 = 1.2;
  double b = 0.75;
};

struct ScoredDoc {
  uint64_t doc_id;
  double score;
};

// Restricts a query to the documents for which it returns true. Called at
// most once per candidate document, in increasing doc id order by TopK().
using DocFilter = std::function<bool(uint64_t doc_id)>;

// What a query cost; filled by TopK() when asked for.
struct QueryStats {
  uint64_t postings_total = 0;   // postings of all query terms together
  uint64_t postings_scored = 0;  // term scores computed
  uint64_t docs_scored = 0;      // documents whose full score was computed
  uint64_t blocks_skipped = 0;   // runs of candidates skipped on block bounds
  uint64_t parts_searched = 0;   // TopKAcross(): indexes whose postings were searched
  uint64_t parts_skipped = 0;    // TopKAcross(): indexes whose bound could not beat the k-th
};

// One partition's index. Not thread-safe for writes: Add() and Remove()
// need exclusive access; const methods may run concurrently with each other.
//
// Memory: a document is held in one of two forms. Ordinary documents are
// per-term lists that take new postings cheaply, at about 300 bytes per term
// and 24 per posting; a frozen image (bm25_frozen.cc) holds the same in
// about a quarter of that, its terms' lists viewed where they lie. An index
// freezes itself (Freeze()) when an Add() brings the ordinary memory gained
// since its last freeze or thaw (as OrdinaryBytes() counts it) to
// `freeze_bytes` and to twice the size of its image: the ordinary documents
// then hold at most about twice the image's memory, and the image grows
// geometrically, so each of its bytes is encoded a bounded number of times.
// A frozen term that takes a new posting has its whole list copied into an
// ordinary one; those copies are not counted (the image bounds them).
class Bm25Index {
 public:
  static constexpr size_t kFreezeBytes = size_t{64} << 10;

  // `freeze_bytes`: SIZE_MAX for an index that never freezes itself.
  explicit Bm25Index(Bm25Params params = {}, size_t freeze_bytes = kFreezeBytes)
      : params_(params),
        term_ids_(0, TermKey{&terms_}, TermKey{&terms_}),
        freeze_bytes_(freeze_bytes),
        freeze_at_(freeze_bytes) {}

  // Indexes document `doc_id` with its tokens (duplicates count towards tf and
  // |d|; an empty list is a document of length 0). Doc ids need not arrive in
  // order, but increasing ids are the fast path.
  // Returns kConstraint if doc_id is already indexed, kTooBig for more than
  // 2^32-1 tokens, kCorruptIndex for a damaged term of the attached image
  // that the document would move, or for damage found before (status());
  // the index is unchanged on failure.
  Status Add(uint64_t doc_id, std::span<const std::string> tokens);

  // The same, from a document's term counts (as persisted in the file):
  // `doc_len` tokens in all, `counts` its distinct terms with their tf >= 1.
  // Returns kConstraint for a known doc_id, kRange when the counts do not add
  // up to doc_len or a term repeats, Add()'s kCorruptIndex; the index is
  // unchanged on failure.
  struct TermCount {
    std::string_view term;
    uint32_t tf;
  };
  Status AddCounts(uint64_t doc_id, uint32_t doc_len, std::span<const TermCount> counts);

  // The distinct terms of `tokens` with their counts, in first-seen order;
  // each of the first `weighted` tokens counts `weight` times.
  static std::vector<TermCount> CountTerms(std::span<const std::string> tokens, size_t weighted = 0,
                                           uint32_t weight = 1);

  // The length and the distinct terms with their counts of an indexed
  // document, in the order they were added (what AddCounts() takes back).
  // False if the document is not indexed.
  bool TermsOf(uint64_t doc_id, uint32_t* doc_len, std::vector<TermCount>* counts) const;

  // Removes document `doc_id`. Returns kNotFound if it is not indexed,
  // Verify()'s errors, and kInternal if the index is inconsistent (a posting of the document is
  // missing; the index is then partly updated and should be rebuilt).
  Status Remove(uint64_t doc_id);

  bool Contains(uint64_t doc_id) const;
  uint64_t doc_count() const { return frozen_docs_.size() + docs_.size(); }
  uint64_t total_length() const { return total_length_; }
  double avgdl() const;
  size_t term_count() const { return term_ids_.size() + frozen_terms_.size() - superseded_; }

  // ---- frozen images (checkpoints; docs/format.md §5.8, bm25 section)
  // Appends this index as a frozen image, 8-byte aligned within *out (which
  // must itself start 8-byte aligned): a table of the documents (ids and
  // lengths), a sorted term table and each term's postings (indexes into the
  // document table, with tf), blocks and peaks. Version 3 packs a posting in
  // four bytes; an index with a tf above 255 or more than 2^24 documents is
  // written as version 2 (eight bytes a posting).
  // REQUIRES: fewer than 2^32 documents; Verify() held.
  void EncodeFrozen(std::string* out) const;
  // The bytes EncodeFrozen() appends to a string of 8-byte aligned size,
  // counted without encoding anything.
  size_t FrozenSize() const;
  // Makes an empty index hold the documents of a frozen image (version 1, 2
  // or 3) at `data` (8-byte aligned; it must outlive the index), used where it
  // lies: terms are found by binary search, a term's arrays are viewed, and
  // copied only when a later Add() gives the term a posting. Checked first,
  // in time linear in the documents and terms: every offset and count, the
  // document ids (increasing, <= max_doc), the terms' order and ranges.
  // What lies in a term's ranges (each posting's document and tf, the block
  // and peak summaries) is checked on the term's first use, once: a term that
  // fails reads as empty and status() reports it; or whole by Verify(),
  // which Remove(), Thaw(), Freeze() and a checkpoint call first (Add()
  // checks the terms it moves). (A version 1 image is checked whole
  // here.) Errors: kCorruptIndex; kFormatVersion for an unknown version;
  // kMisuse on a non-empty index; kNoMem. Removing a document of the image
  // thaws it first.
  Status AttachFrozen(const char* data, size_t size, uint64_t max_doc);
  // Checks what AttachFrozen() left to first use, for the whole image: every
  // term's postings and summaries, each document's length against its
  // terms' tf sum, and the total length. OK once it has held (and for an
  // index without an image, or with one Freeze() made); else kCorruptIndex,
  // also kept by status(), or kNoMem.
  Status Verify() const;
  // OK, or the first damage found in the attached image (by a term's first
  // use or by Verify()): sticky until the image is detached. A search that
  // met a damaged term has read it as empty: callers check this after it.
  Status status() const;
  // Copies every document of the frozen image into the ordinary index and
  // detaches the image (a no-op without one): O(postings), once. Scores are
  // unchanged. Errors: Verify()'s; kNoMem; the index is unchanged on failure.
  Status Thaw();
  // Makes the index hold every document in one frozen image of its own
  // (EncodeFrozen()'s bytes, attached): the same documents, terms and
  // scores, to the last bit. Reports every term's new place to the term
  // table it is attached to. A no-op for an index without ordinary
  // documents or moved terms, and for one holding document 0 (an image
  // has none). Errors: Verify()'s; kNoMem (the index unchanged).
  Status Freeze();
  // The frozen documents, increasing (empty without an image).
  std::span<const uint64_t> frozen_docs() const { return frozen_docs_; }
  // The documents with ids in [from, to) and their terms and counts, as
  // TermsOf() gives an ordinary one's, frozen or not: `docs` by increasing
  // id, each with its length and its run [first, first + count) of
  // `postings`, whose terms index `terms` (a document's terms in no
  // particular order). The views in `terms` are valid while the index is
  // unchanged. O(terms × log postings + the range's postings + ordinary
  // documents). REQUIRES: Verify() held.
  struct DocumentTerms {
    uint64_t doc_id;
    uint32_t doc_len;
    uint32_t count;
    uint64_t first;
  };
  struct TermRef {
    uint32_t term;
    uint32_t tf;
  };
  void Documents(uint64_t from, uint64_t to, std::vector<std::string_view>* terms,
                 std::vector<DocumentTerms>* docs, std::vector<TermRef>* postings) const;
  // Stops reporting to the term table this index is attached to
  // (Bm25TermParts::Attach()): the index leaves that collection.
  void DetachTermParts() { term_parts_ = nullptr; }
  const Bm25Params& params() const { return params_; }

  // df(term): the number of documents that contain `term`.
  uint64_t DocFrequency(std::string_view term) const;
  // A copy of the postings of `term` sorted by doc id; empty if the term is
  // unknown.
  std::vector<Posting> Postings(std::string_view term) const;
  // idf(term) for the index as it is now (0 for an unknown term).
  double Idf(std::string_view term) const;

  // The best min(k, matching documents) documents for the OR of the distinct
  // `query_tokens`, best first, computed with block-max MaxScore
  // (maxscore.cc): lists whose bounds together cannot beat the current k-th
  // score are only probed (by galloping search) for documents found through
  // the other lists, never scanned, and runs of documents whose block bounds
  // cannot beat it are skipped unscored. Documents that `filter` rejects are
  // skipped before scoring. If `stats` is not null it receives the work done.
  std::vector<ScoredDoc> TopK(std::span<const std::string> query_tokens, size_t k,
                              const DocFilter& filter = {}, QueryStats* stats = nullptr) const;

  // The same ranking, computed by scoring every posting of every query term.
  std::vector<ScoredDoc> TopKBruteForce(std::span<const std::string> query_tokens, size_t k,
                                        const DocFilter& filter = {}) const;

  // ---- several indexes as one collection
  // The best min(k, matching documents) documents of all of `parts` for the
  // OR of the distinct `query_tokens`, scored as ONE index holding every
  // document of every part would score them: N and the total length are
  // summed over the parts (so avgdl is the collection's) and df(t) is the sum
  // of the parts' df(t). Scores and order equal that index's TopK() to the
  // last bit (same formula, same summation order).
  // The parts share one top-k and are searched best bound first (a part's
  // bound: the sum over the query terms of its lists' best scores under the
  // collection's statistics); once k documents are held, a part whose bound
  // cannot beat the k-th score is skipped whole, and inside a part MaxScore
  // prunes against the k-th score from its first posting.
  // With `term_parts` (term_parts.h), whose part numbers index `parts`, a
  // query token is looked up only in the parts that table lists for it;
  // without, in every part (a binary search of its term table).
  // REQUIRES: doc ids are unique across the parts; every part has the same
  // params; each index attached to `term_parts` as part p is parts[p]. Null
  // parts are ignored.
  static std::vector<ScoredDoc> TopKAcross(std::span<const Bm25Index* const> parts,
                                           std::span<const std::string> query_tokens, size_t k,
                                           const DocFilter& filter = {},
                                           QueryStats* stats = nullptr,
                                           const Bm25TermParts* term_parts = nullptr);
  // The same ranking, by scoring every posting of every query term of every
  // part (the oracle of TopKAcross()).
  static std::vector<ScoredDoc> TopKAcrossBruteForce(std::span<const Bm25Index* const> parts,
                                                     std::span<const std::string> query_tokens,
                                                     size_t k, const DocFilter& filter = {});

 private:
  friend class MaxScoreSearch;  // the state of one TopK() call (maxscore.cc)
  friend class Bm25TermParts;   // reads the terms of an index it attaches

  struct Term {
    std::string text;
    PostingList list;
  };
  struct Doc {
    uint32_t length;
    std::vector<uint32_t> term_ids;  // distinct terms of the document
  };
  // A distinct query token that is in the index, as the scorers see it.
  struct QueryTerm {
    const PostingList* list;
    double idf;
    double upper_bound;  // no document scores more than this for the term
    size_t slot;         // position in the canonical summation order
  };
  // Hashes and compares the ordinary terms' ids by their text, so that the
  // table of ids is looked up by text without holding a copy of it. Not
  // noexcept, so that the table keeps each node's hash (a rehash or a probe
  // then never reads the text again).
  struct TermKey {
    using is_transparent = void;
    const std::vector<Term>* terms;
    std::string_view text(uint32_t id) const { return (*terms)[id].text; }
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    size_t operator()(uint32_t id) const { return (*this)(text(id)); }
    bool operator()(uint32_t a, uint32_t b) const { return a == b; }
    bool operator()(std::string_view s, uint32_t id) const { return s == text(id); }
    bool operator()(uint32_t id, std::string_view s) const { return s == text(id); }
  };

  const PostingList* FindList(std::string_view term) const;
  // Calls f(text, list) for each term a frozen image of this index holds:
  // the frozen terms not superseded (their lists are views), then the
  // ordinary terms that have postings.
  template <class F>
  void ForEachImageTerm(F&& f) const;
  // Where a term is in this index, as Bm25TermParts records it: an ordinary
  // term's id with kOrdinaryRef set, or a frozen term's entry in the image.
  // REQUIRES: fewer than 2^31 terms of either kind.
  static constexpr uint32_t kOrdinaryRef = uint32_t{1} << 31;
  // The list of the term at `ref`: an ordinary term's own list, or a frozen
  // term's list viewed into *view (and `view` returned).
  // REQUIRES: `ref` is current.
  const PostingList* ListOfRef(uint32_t ref, PostingList* view) const;
  // Starts loading what ListOfRef(ref) reads first.
  void PrefetchRef(uint32_t ref) const;
  // The same without the cached views of FindList(): a frozen term's list is
  // a view appended to *views (whose elements keep their addresses), so a
  // lookup takes no lock and leaves nothing behind.
  const PostingList* FindListInto(std::string_view term,
                                  std::deque<PostingList>* views) const;
  // status(), then the frozen terms `counts` would move (TermHolds()).
  Status CheckTermsToMove(std::span<const TermCount> counts) const;
  // The frozen term at `index` in the table, or -1.
  // By binary search of the term table.
  int64_t FindFrozen(std::string_view term) const;
  std::string_view FrozenText(size_t index) const;
  PostingList FrozenList(size_t index) const;
  // The checks of AttachFrozen() on the arrays it has placed (`text`: the
  // header's text_bytes), then for version 1 the rest.
  Status CheckShape(uint64_t max_doc, uint64_t text) const;
  Status CheckVersion1(uint64_t max_doc) const;
  // Versions 2 and 3: what lies in term t's ranges; its tfs added to
  // doc_sums[doc] and *sum unless doc_sums is null.
  Status CheckTerm(size_t t, uint64_t* doc_sums, uint64_t* sum) const;
  // Whether frozen term t holds together, checked on its first call.
  bool TermHolds(size_t t) const;
  void NoteDamage(const Status& s) const;
  // Forgets the frozen image and everything derived from it.
  void DetachFrozen();
  // Whether the attached image is the whole index, in a version
  // EncodeFrozen() writes: nothing added, moved or removed since.
  bool ImageIsWhole() const;
  // The memory AddCounts() adds for a document of `postings` postings that
  // gave `terms` terms an ordinary list, as the freeze policy counts it.
  static size_t OrdinaryBytes(size_t terms, size_t postings);
  uint32_t TermIdFor(std::string_view token);
  void ReleaseTerm(uint32_t term_id);
  double IdfFor(uint64_t df) const { return IdfOf(doc_count(), df); }
  static double IdfOf(uint64_t doc_count, uint64_t df);
  static double AvgdlOf(uint64_t doc_count, uint64_t total_length);
  Bm25TermScorer MakeScorer() const { return Bm25TermScorer(params_.k1, params_.b, avgdl()); }
  std::vector<QueryTerm> PrepareQuery(std::span<const std::string> query_tokens,
                                      const Bm25TermScorer& scorer) const;
  // The query term of `list` with its idf, its best score by `scorer`
  // (over the list's peaks) and its summation slot.
  static QueryTerm MakeQueryTerm(const PostingList* list, double idf, size_t slot,
                                 const Bm25TermScorer& scorer);
  // A query over several indexes (TopKAcross()): the distinct query tokens
  // in the collection in canonical order, each part's lists for them, and the
  // collection's statistics.
  struct AcrossPart {
    uint32_t first, count;  // the part's lists: terms[first, first + count)
    double bound;           // sum of their upper bounds
  };
  struct AcrossQuery {
    Bm25TermScorer scorer;          // the collection's avgdl
    size_t slots = 0;               // distinct query tokens in the collection
    std::vector<QueryTerm> terms;   // every part's lists, part by part, in slot order
    std::vector<AcrossPart> parts;  // the parts holding a query token, in argument order
    // The frozen lists the terms point to: views of FindListInto(), and
    // those of ListOfRef() (reserved up front, so that they never move;
    // a deque would allocate for every two of them).
    std::deque<PostingList> views;
    std::vector<PostingList> ref_views;
  };
  static AcrossQuery PrepareAcross(std::span<const Bm25Index* const> parts,
                                   std::span<const std::string> query_tokens,
                                   const Bm25TermParts* term_parts);

  Bm25Params params_;
  std::vector<Term> terms_;  // indexed by term id; released ids are empty
  // The ids of the ordinary terms, found by their text.
  std::unordered_set<uint32_t, TermKey, TermKey> term_ids_;
  std::vector<uint32_t> free_term_ids_;  // released ids, reused by TermIdFor()
  std::unordered_map<uint64_t, Doc> docs_;
  uint64_t total_length_ = 0;

  // The frozen image, when attached. Its terms are viewed on first lookup
  // (frozen_views_, guarded by views_mu_ so const lookups may run
  // concurrently) and move to terms_ when a new document uses them.
  struct FrozenTerm {
    uint32_t text_offset, text_length;
    uint64_t first_posting;
    uint32_t posting_count, first_block, first_peak, peak_count;
  };
  static_assert(sizeof(FrozenTerm) == 32);
  const char* frozen_ = nullptr;
  size_t frozen_size_ = 0;
  std::string own_image_;  // the image Freeze() made, when it is the one attached
  // The freeze policy: ordinary memory gained since the last freeze or thaw
  // (OrdinaryBytes()), and the amount at which AddCounts() freezes: at
  // least freeze_bytes_, and twice the size of the last image attached.
  size_t ordinary_bytes_ = 0;
  const size_t freeze_bytes_;
  size_t freeze_at_;
  uint32_t frozen_version_ = 0;
  std::span<const uint64_t> frozen_docs_;
  std::span<const FrozenTerm> frozen_terms_;
  const char* frozen_text_ = nullptr;
  std::span<const Posting> frozen_postings_;                       // version 1
  std::span<const PostingList::IndexedPosting> frozen_indexed_;    // version 2
  std::span<const PostingList::PackedPosting> frozen_packed_;      // version 3
  std::span<const uint32_t> frozen_lens_;  // version 1: per posting; 2, 3: per document
  std::span<const PostingList::Block> frozen_blocks_;
  std::span<const PostingList::Peak> frozen_peaks_;
  size_t superseded_ = 0;  // frozen terms that moved to terms_
  uint64_t frozen_total_ = 0;  // the image's total_length
  // Versions 2 and 3: per frozen term, whether TermHolds() checked it yet
  // and what it found; all of them stand once verified_ is set (Verify(),
  // or an image of Freeze()'s own).
  static constexpr uint8_t kTermUnchecked = 0, kTermHeld = 1, kTermFailed = 2;
  mutable std::unique_ptr<std::atomic<uint8_t>[]> term_checks_;
  mutable std::atomic<bool> verified_{false};
  mutable std::mutex damage_mu_;
  mutable Status damage_;  // the first damage found (status())
  mutable std::atomic<bool> damaged_{false};  // damage_ is set: status() locks only then
  mutable std::mutex views_mu_;
  mutable std::unordered_map<size_t, std::unique_ptr<PostingList>> frozen_views_;

  // The table this index reports its gained and lost terms to, as part
  // term_parts_part_ (Bm25TermParts::Attach()); null when not attached.
  Bm25TermParts* term_parts_ = nullptr;
  uint32_t term_parts_part_ = 0;
};

}  // namespace agentmem::index

// index/text/term_parts.h -- which indexes of a collection hold a term: the
// directory that lets a top-k across many indexes (Bm25Index::TopKAcross())
// visit only the indexes that hold one of the query's terms.
//
// The indexes are the collection's parts, numbered by the caller (the
// recall index numbers them by user). For every term held by some part the
// table keeps the sorted list of the parts whose index has a posting list
// for it, each with the term's place in that index (its term id, or its
// entry in the index's frozen image), so that the search reaches the list
// without looking the term up: at a thousand parts those lookups, each a
// few cache misses, were most of a query's time. An attached index keeps
// its entries exact: it reports each term it gains (a first posting, or the
// terms of a frozen image it attaches), each term that moves (a frozen term
// that takes a new posting; every term when the image thaws) and each term
// it loses (its last posting removed).
//
// Memory: 8 bytes per (term, part) pair -- each pair is a posting list of
// that part, which costs at least one posting (8 or 16 bytes), a block
// summary (16), a peak (8) and, frozen, a term entry (32) besides the term's
// text -- and, per distinct term of the collection, one hash node holding
// the term's text and its vector (about 80 bytes). Not thread-safe for
// writes; Find() may run concurrently with other const calls.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace agentmem::index {

class Bm25Index;

class Bm25TermParts {
 public:
  Bm25TermParts() = default;
  Bm25TermParts(const Bm25TermParts&) = delete;
  Bm25TermParts& operator=(const Bm25TermParts&) = delete;

  // Makes `index` part `part` of the collection: records every term it holds
  // now, and has it report the terms it gains and loses from now on.
  // REQUIRES: `part` is not attached yet, and `index` is attached to no
  // other table; the table outlives the index's changes (an index reports
  // only when it changes, never when it is destroyed).
  void Attach(uint32_t part, Bm25Index* index);

  // A part holding a term, and where the term is in that part's index
  // (Bm25Index::TermRef()).
  struct Holder {
    uint32_t part;
    uint32_t ref;
  };
  // The parts holding `term`, by increasing part; empty when none does. The
  // span is valid until the next change of any attached index.
  std::span<const Holder> Find(std::string_view term) const;
  // Whether every pair names the list its part's index has for the term, and
  // every term of every attached index in `parts` (part p: parts[p]) is
  // listed. O(postings): for tests.
  bool Consistent(std::span<const Bm25Index* const> parts) const;

  // Gives back the spare capacity of every term's vector (after attaching
  // many indexes at once).
  void ShrinkToFit();

  size_t term_count() const { return parts_.size(); }
  // (term, part) pairs recorded.
  size_t pair_count() const { return pairs_; }
  // An estimate of the heap bytes the table holds.
  size_t MemoryBytes() const;

  // ---- reports of the attached indexes (bm25.cc, bm25_frozen.cc)
  // Part `part` holds `term` at `ref`: a new pair, or a moved one.
  void Set(uint32_t part, std::string_view term, uint32_t ref);
  // Part `part` lost `term`; a pair not recorded is ignored.
  void Erase(uint32_t part, std::string_view term);

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::vector<Holder>, StringHash, std::equal_to<>> parts_;
  size_t pairs_ = 0;
};

}  // namespace agentmem::index

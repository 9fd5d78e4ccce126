// index/text/term_parts.h -- which indexes of a collection hold a term: the
// directory that lets a top-k across many indexes (Bm25Index::TopKAcross())
// visit only the indexes that hold one of the query's terms.
//
// The indexes are the collection's parts, numbered by the caller (the
// recall index numbers them by user). For every term held by some part the
// table keeps the sorted list of the parts whose index has a posting list
// for it. An attached index keeps its entries exact: it reports each term it
// gains (a first posting, or the terms of a frozen image it attaches) and
// each term it loses (its last posting removed); thawing a frozen image
// neither gains nor loses a term.
//
// Memory: 4 bytes per (term, part) pair -- every pair is at least one
// posting, which costs 8 to 16 bytes plus its document's length and its share
// of the block and peak summaries -- and, per distinct term of the
// collection, one hash node holding the term's text and its list (about 80
// bytes). Not thread-safe for writes; Find() may run concurrently with other
// const calls.
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

  // The parts holding `term`, increasing; empty when none does. The span is
  // valid until the next change of any attached index.
  std::span<const uint32_t> Find(std::string_view term) const;

  size_t term_count() const { return parts_.size(); }
  // (term, part) pairs recorded.
  size_t pair_count() const { return pairs_; }
  // An estimate of the heap bytes the table holds.
  size_t MemoryBytes() const;

  // ---- reports of the attached indexes (bm25.cc)
  // Part `part` gained `term`; a pair already recorded is left as it is.
  void Insert(uint32_t part, std::string_view term);
  // Part `part` lost `term`; a pair not recorded is ignored.
  void Erase(uint32_t part, std::string_view term);

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::vector<uint32_t>, StringHash, std::equal_to<>> parts_;
  size_t pairs_ = 0;
};

}  // namespace agentmem::index

// index/text/posting_list.h -- the in-memory posting list of one term, with
// the score summaries that let the BM25 top-k skip.
//
// Besides the postings (sorted by doc id) and the length |d| of each posting's
// document, a list keeps two summaries, both exact at all times:
//   * blocks: for every run of kBlockSize consecutive postings, the last doc
//     id, the largest tf and the smallest |d| of the run;
//   * peaks: the Pareto frontier of (tf, |d|) over the whole list, i.e. the
//     postings that no other posting beats on both (higher-or-equal tf and
//     shorter-or-equal document). The BM25 term score grows with tf and shrinks
//     with |d|, so the list's best score, for any idf and avgdl, is the best
//     score among its peaks -- a tight bound from a handful of entries.
// A block's (largest tf, smallest |d|) bounds the score of each of its
// postings, even when no posting has both.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "index/text/postings.h"

namespace agentmem::index {

// Not thread-safe for writes; const methods may run concurrently.
class PostingList {
 public:
  static constexpr size_t kBlockSize = 64;

  struct Block {
    uint64_t last_doc;  // doc id of the block's last posting
    uint32_t max_tf;
    uint32_t min_len;
  };
  struct Peak {
    uint32_t tf;
    uint32_t min_len;  // the smallest |d| among postings with tf >= this tf
  };

  PostingList() = default;
  // A list over arrays that live elsewhere (a checkpoint mapped from the file,
  // bm25_frozen.h) and outlive it; the first Insert() or Erase() copies them.
  // REQUIRES: the arrays are a valid list (the checkpoint loader checks).
  static PostingList View(std::span<const Posting> postings, std::span<const uint32_t> doc_lens,
                          std::span<const Block> blocks, std::span<const Peak> peaks);

  // Adds a posting. Appending (a doc id above all others) costs O(1)
  // amortised; inserting elsewhere shifts the later postings.
  // REQUIRES: no posting for posting.doc_id; posting.tf >= 1.
  void Insert(Posting posting, uint32_t doc_len);

  // Removes the posting of doc_id; returns false (and changes nothing) if
  // there is none. O(size).
  bool Erase(uint64_t doc_id);

  size_t size() const { return view_postings_.size(); }
  bool empty() const { return view_postings_.empty(); }
  std::span<const Posting> postings() const { return view_postings_; }
  std::span<const uint32_t> doc_lens() const { return view_lens_; }
  std::span<const Block> blocks() const { return view_blocks_; }
  // Sorted by tf ascending; min_len then ascends strictly.
  std::span<const Peak> peaks() const { return view_peaks_; }
  bool is_view() const { return viewing_; }

  PostingList(const PostingList& o) { *this = o; }
  PostingList& operator=(const PostingList& o);
  PostingList(PostingList&& o) noexcept { *this = std::move(o); }
  PostingList& operator=(PostingList&& o) noexcept;

 private:
  void RebuildBlocksFrom(size_t pos);
  void AddPeak(uint32_t tf, uint32_t doc_len);
  void Own();      // a view copies its arrays, so that it can change
  void Reseat();   // the spans follow the owned vectors

  // What the accessors show: the owned vectors, or the viewed arrays.
  bool viewing_ = false;
  std::span<const Posting> view_postings_;
  std::span<const uint32_t> view_lens_;
  std::span<const Block> view_blocks_;
  std::span<const Peak> view_peaks_;

  std::vector<Posting> postings_;
  std::vector<uint32_t> doc_lens_;
  std::vector<Block> blocks_;
  std::vector<Peak> peaks_;
};

}  // namespace agentmem::index

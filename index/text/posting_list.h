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

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

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

  // A posting of an indexed view: its document is entry `doc` of a document
  // table (ids and lengths) shared by every list of a frozen image.
  struct IndexedPosting {
    uint32_t doc;
    uint32_t tf;
  };
  // The same in four bytes: the document's index in the top 24 bits, the tf
  // (1..255) in the low 8.
  using PackedPosting = uint32_t;
  static constexpr unsigned kPackedTfBits = 8;
  static constexpr uint32_t kPackedMaxTf = (1u << kPackedTfBits) - 1;
  static constexpr uint64_t kPackedMaxDocs = uint64_t{1} << (32 - kPackedTfBits);

  PostingList() = default;
  // A list over arrays that live elsewhere (a checkpoint mapped from the file,
  // bm25_frozen.cc) and outlive it; the first Insert() or Erase() copies them.
  // View: the postings with their doc ids and one length per posting.
  // ViewIndexed: postings that index `doc_ids` and `doc_lens` (one entry per
  // document of the image); ViewPacked: the same, packed.
  // REQUIRES: the arrays are a valid list (the checkpoint loader checks).
  static PostingList View(std::span<const Posting> postings, std::span<const uint32_t> doc_lens,
                          std::span<const Block> blocks, std::span<const Peak> peaks);
  static PostingList ViewIndexed(std::span<const IndexedPosting> postings,
                                 const uint64_t* doc_ids, const uint32_t* doc_lens,
                                 std::span<const Block> blocks, std::span<const Peak> peaks);
  static PostingList ViewPacked(std::span<const PackedPosting> postings, const uint64_t* doc_ids,
                                const uint32_t* doc_lens, std::span<const Block> blocks,
                                std::span<const Peak> peaks);

  // Adds a posting. Appending (a doc id above all others) costs O(1)
  // amortised; inserting elsewhere shifts the later postings.
  // REQUIRES: no posting for posting.doc_id; posting.tf >= 1; fewer than
  // 2^32 - 1 postings.
  void Insert(Posting posting, uint32_t doc_len);

  // Removes the posting of doc_id; returns false (and changes nothing) if
  // there is none. O(size); O(size x peaks) when it was the last posting at
  // a peak.
  bool Erase(uint64_t doc_id);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Posting i (< size()): its doc id, tf and document length |d|.
  uint64_t doc_id(size_t i) const {
    return kind_ == Kind::kPacked    ? doc_ids_[packed()[i] >> kPackedTfBits]
           : kind_ == Kind::kIndexed ? doc_ids_[indexed()[i].doc]
                                     : wide()[i].doc_id;
  }
  uint32_t tf(size_t i) const {
    return kind_ == Kind::kPacked    ? packed()[i] & kPackedMaxTf
           : kind_ == Kind::kIndexed ? indexed()[i].tf
                                     : wide()[i].tf;
  }
  uint32_t doc_len(size_t i) const {
    return kind_ == Kind::kPacked    ? lens_[packed()[i] >> kPackedTfBits]
           : kind_ == Kind::kIndexed ? lens_[indexed()[i].doc]
                                     : lens_[i];
  }
  Posting posting(size_t i) const { return {doc_id(i), tf(i)}; }
  // The first posting in [from, to) whose doc id is >= doc_id, or `to`.
  size_t LowerBound(uint64_t doc_id, size_t from, size_t to) const;
  size_t LowerBound(uint64_t doc_id) const { return LowerBound(doc_id, 0, size_); }
  // One per kBlockSize postings.
  std::span<const Block> blocks() const { return {blocks_, BlocksFor(size_)}; }
  // Sorted by tf ascending; min_len then ascends strictly.
  std::span<const Peak> peaks() const { return {peaks_, peak_count_}; }
  bool is_view() const { return viewing_; }

  PostingList(const PostingList& o) { *this = o; }
  PostingList& operator=(const PostingList& o);
  PostingList(PostingList&& o) noexcept { *this = std::move(o); }
  PostingList& operator=(PostingList&& o) noexcept;

 private:
  // A view over a document table; the caller sets the postings.
  static PostingList ViewOfTable(size_t size, const uint64_t* doc_ids, const uint32_t* doc_lens,
                                 std::span<const Block> blocks, std::span<const Peak> peaks);
  void RebuildBlocksFrom(size_t pos);
  void AddPeak(uint32_t tf, uint32_t doc_len);
  // Whether (tf, doc_len) is one of the peaks.
  bool AtPeak(uint32_t tf, uint32_t doc_len) const;
  // Whether an owned posting has this tf and document length.
  bool Holds(uint32_t tf, uint32_t doc_len) const;
  void Own();      // a view copies its arrays, so that it can change
  void CopyViewOf(const PostingList& o);  // the accessors show o's viewed arrays

  // The owned arrays share one allocation, owned_: cap_ postings, cap_
  // document lengths, a block for every kBlockSize of cap_ postings, then
  // peak_cap_ peaks. A list of one posting costs one small allocation.
  static size_t BlocksFor(size_t postings) { return (postings + kBlockSize - 1) / kBlockSize; }
  static size_t LensAt(size_t cap) { return cap * sizeof(Posting); }
  static size_t BlocksAt(size_t cap) { return (LensAt(cap) + cap * sizeof(uint32_t) + 7) & ~size_t{7}; }
  static size_t PeaksAt(size_t cap) { return BlocksAt(cap) + BlocksFor(cap) * sizeof(Block); }
  Posting* owned_postings() { return reinterpret_cast<Posting*>(owned_.get()); }
  uint32_t* owned_lens() { return reinterpret_cast<uint32_t*>(owned_.get() + LensAt(cap_)); }
  Block* owned_blocks() { return reinterpret_cast<Block*>(owned_.get() + BlocksAt(cap_)); }
  Peak* owned_peaks() { return reinterpret_cast<Peak*>(owned_.get() + PeaksAt(cap_)); }
  // Makes room for `postings` postings and `peaks` peaks, moving the owned
  // arrays to a larger allocation when they do not fit.
  void Reserve(size_t postings, size_t peaks);
  // The accessors follow the owned arrays: `size` postings, BlocksFor(size)
  // blocks, `peaks` peaks.
  void Reseat(size_t size, size_t peaks);

  // What the accessors show: the owned arrays, or the viewed ones. The
  // postings are Postings (kind_ kWide), IndexedPostings or PackedPostings;
  // with the last two, lens_ and doc_ids_ are per document, else lens_ is
  // per posting. A list of a term is kept for every (term, user) pair of a
  // writer, so it is kept small.
  enum class Kind : uint8_t { kWide, kIndexed, kPacked };
  const Posting* wide() const { return static_cast<const Posting*>(postings_); }
  const IndexedPosting* indexed() const { return static_cast<const IndexedPosting*>(postings_); }
  const PackedPosting* packed() const { return static_cast<const PackedPosting*>(postings_); }
  const void* postings_ = nullptr;
  const uint64_t* doc_ids_ = nullptr;
  const uint32_t* lens_ = nullptr;
  const Block* blocks_ = nullptr;  // BlocksFor(size_) of them
  const Peak* peaks_ = nullptr;
  std::unique_ptr<std::byte[]> owned_;
  uint32_t size_ = 0;
  uint32_t peak_count_ = 0;
  uint32_t cap_ = 0;
  uint32_t peak_cap_ = 0;
  Kind kind_ = Kind::kWide;
  bool viewing_ = false;
};

}  // namespace agentmem::index

// index/text/posting_list.cc -- a term's postings and their block and peak
// summaries (see posting_list.h).
#include "index/text/posting_list.h"

#include <algorithm>

namespace agentmem::index {
namespace {

bool DocBefore(const Posting& p, uint64_t doc_id) { return p.doc_id < doc_id; }

}  // namespace

PostingList PostingList::View(std::span<const Posting> postings, std::span<const uint32_t> doc_lens,
                              std::span<const Block> blocks, std::span<const Peak> peaks) {
  PostingList l;
  l.viewing_ = true;
  l.size_ = postings.size();
  l.wide_ = postings.data();
  l.lens_ = doc_lens.data();
  l.view_blocks_ = blocks;
  l.view_peaks_ = peaks;
  return l;
}

PostingList PostingList::ViewIndexed(std::span<const IndexedPosting> postings,
                                     const uint64_t* doc_ids, const uint32_t* doc_lens,
                                     std::span<const Block> blocks, std::span<const Peak> peaks) {
  PostingList l = ViewOfTable(postings.size(), doc_ids, doc_lens, blocks, peaks);
  l.indexed_ = postings.data();
  return l;
}

PostingList PostingList::ViewPacked(std::span<const PackedPosting> postings,
                                    const uint64_t* doc_ids, const uint32_t* doc_lens,
                                    std::span<const Block> blocks, std::span<const Peak> peaks) {
  PostingList l = ViewOfTable(postings.size(), doc_ids, doc_lens, blocks, peaks);
  l.packed_ = postings.data();
  return l;
}

PostingList PostingList::ViewOfTable(size_t size, const uint64_t* doc_ids,
                                     const uint32_t* doc_lens, std::span<const Block> blocks,
                                     std::span<const Peak> peaks) {
  PostingList l;
  l.viewing_ = true;
  l.size_ = size;
  l.doc_ids_ = doc_ids;
  l.lens_ = doc_lens;
  l.view_blocks_ = blocks;
  l.view_peaks_ = peaks;
  return l;
}

size_t PostingList::LowerBound(uint64_t doc_id, size_t from, size_t to) const {
  while (from < to) {
    const size_t mid = from + (to - from) / 2;
    if (this->doc_id(mid) < doc_id) {
      from = mid + 1;
    } else {
      to = mid;
    }
  }
  return from;
}

PostingList& PostingList::operator=(const PostingList& o) {
  if (this == &o) return *this;
  postings_ = o.postings_;
  doc_lens_ = o.doc_lens_;
  blocks_ = o.blocks_;
  peaks_ = o.peaks_;
  viewing_ = o.viewing_;
  if (viewing_) {
    CopyViewOf(o);
  } else {
    Reseat();
  }
  return *this;
}

PostingList& PostingList::operator=(PostingList&& o) noexcept {
  if (this == &o) return *this;
  postings_ = std::move(o.postings_);
  doc_lens_ = std::move(o.doc_lens_);
  blocks_ = std::move(o.blocks_);
  peaks_ = std::move(o.peaks_);
  viewing_ = o.viewing_;
  if (viewing_) {
    CopyViewOf(o);
  } else {
    Reseat();
  }
  o.postings_.clear();
  o.doc_lens_.clear();
  o.blocks_.clear();
  o.peaks_.clear();
  o.viewing_ = false;
  o.Reseat();
  return *this;
}

void PostingList::CopyViewOf(const PostingList& o) {
  size_ = o.size_;
  wide_ = o.wide_;
  indexed_ = o.indexed_;
  packed_ = o.packed_;
  doc_ids_ = o.doc_ids_;
  lens_ = o.lens_;
  view_blocks_ = o.view_blocks_;
  view_peaks_ = o.view_peaks_;
}

void PostingList::Reseat() {
  size_ = postings_.size();
  wide_ = postings_.data();
  indexed_ = nullptr;
  packed_ = nullptr;
  doc_ids_ = nullptr;
  lens_ = doc_lens_.data();
  view_blocks_ = blocks_;
  view_peaks_ = peaks_;
}

void PostingList::Own() {
  if (!viewing_) return;
  postings_.resize(size_);
  doc_lens_.resize(size_);
  for (size_t i = 0; i < size_; i++) {
    postings_[i] = posting(i);
    doc_lens_[i] = doc_len(i);
  }
  blocks_.assign(view_blocks_.begin(), view_blocks_.end());
  peaks_.assign(view_peaks_.begin(), view_peaks_.end());
  viewing_ = false;
  Reseat();
}

void PostingList::Insert(Posting posting, uint32_t doc_len) {
  Own();
  auto it = postings_.end();
  if (!postings_.empty() && postings_.back().doc_id > posting.doc_id) {
    it = std::lower_bound(postings_.begin(), postings_.end(), posting.doc_id, DocBefore);
  }
  const auto pos = static_cast<size_t>(it - postings_.begin());
  postings_.insert(it, posting);
  doc_lens_.insert(doc_lens_.begin() + static_cast<ptrdiff_t>(pos), doc_len);
  if (pos + 1 < postings_.size()) {
    RebuildBlocksFrom(pos);
  } else if (pos % kBlockSize == 0) {
    blocks_.push_back({posting.doc_id, posting.tf, doc_len});
  } else {
    Block& last = blocks_.back();
    last.last_doc = posting.doc_id;
    last.max_tf = std::max(last.max_tf, posting.tf);
    last.min_len = std::min(last.min_len, doc_len);
  }
  AddPeak(posting.tf, doc_len);
  Reseat();
}

bool PostingList::Erase(uint64_t doc_id) {
  {
    const size_t at = LowerBound(doc_id);
    if (at == size_ || this->doc_id(at) != doc_id) return false;
  }
  Own();
  auto it = std::lower_bound(postings_.begin(), postings_.end(), doc_id, DocBefore);
  const auto pos = static_cast<size_t>(it - postings_.begin());
  const uint32_t tf = it->tf, len = doc_lens_[pos];
  postings_.erase(it);
  doc_lens_.erase(doc_lens_.begin() + static_cast<ptrdiff_t>(pos));
  RebuildBlocksFrom(pos);
  // Only the last posting at a peak can change the frontier. A posting below
  // the peaks is dominated by one, and so is everything it dominated; a
  // posting with another at the same (tf, length) leaves that peak held.
  // When the last one at a peak goes, the frontier is rebuilt.
  if (AtPeak(tf, len) && !Holds(tf, len)) {
    peaks_.clear();
    for (size_t i = 0; i < postings_.size(); i++) AddPeak(postings_[i].tf, doc_lens_[i]);
  }
  Reseat();
  return true;
}

bool PostingList::Holds(uint32_t tf, uint32_t doc_len) const {
  for (size_t i = 0; i < postings_.size(); i++) {
    if (postings_[i].tf == tf && doc_lens_[i] == doc_len) return true;
  }
  return false;
}

bool PostingList::AtPeak(uint32_t tf, uint32_t doc_len) const {
  auto it = std::lower_bound(peaks_.begin(), peaks_.end(), tf,
                             [](const Peak& p, uint32_t v) { return p.tf < v; });
  return it != peaks_.end() && it->tf == tf && it->min_len == doc_len;
}

// Recomputes the blocks from the one that holds postings_[pos] to the end.
void PostingList::RebuildBlocksFrom(size_t pos) {
  size_t first = pos / kBlockSize;
  blocks_.resize(first);
  for (size_t start = first * kBlockSize; start < postings_.size(); start += kBlockSize) {
    size_t end = std::min(start + kBlockSize, postings_.size());
    Block block{postings_[end - 1].doc_id, 0, doc_lens_[start]};
    for (size_t i = start; i < end; i++) {
      block.max_tf = std::max(block.max_tf, postings_[i].tf);
      block.min_len = std::min(block.min_len, doc_lens_[i]);
    }
    blocks_.push_back(block);
  }
}

// Adds (tf, doc_len) to the Pareto frontier unless a peak already dominates
// it, dropping the peaks it dominates.
void PostingList::AddPeak(uint32_t tf, uint32_t doc_len) {
  for (const Peak& p : peaks_) {
    if (p.tf >= tf && p.min_len <= doc_len) return;
  }
  std::erase_if(peaks_, [&](const Peak& p) { return p.tf <= tf && p.min_len >= doc_len; });
  auto it = std::lower_bound(peaks_.begin(), peaks_.end(), tf,
                             [](const Peak& p, uint32_t v) { return p.tf < v; });
  peaks_.insert(it, Peak{tf, doc_len});
}

}  // namespace agentmem::index

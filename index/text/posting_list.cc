// index/text/posting_list.cc -- a term's postings and their block and peak
// summaries (see posting_list.h).
#include "index/text/posting_list.h"

#include <algorithm>

namespace agentmem::index {
namespace {

bool DocBefore(const Posting& p, uint64_t doc_id) { return p.doc_id < doc_id; }

// One list is kept for every (term, user) pair a writer holds.
static_assert(sizeof(void*) != 8 || sizeof(PostingList) <= 72);

}  // namespace

PostingList PostingList::View(std::span<const Posting> postings, std::span<const uint32_t> doc_lens,
                              std::span<const Block> blocks, std::span<const Peak> peaks) {
  PostingList l = ViewOfTable(postings.size(), nullptr, doc_lens.data(), blocks, peaks);
  l.postings_ = postings.data();
  return l;
}

PostingList PostingList::ViewIndexed(std::span<const IndexedPosting> postings,
                                     const uint64_t* doc_ids, const uint32_t* doc_lens,
                                     std::span<const Block> blocks, std::span<const Peak> peaks) {
  PostingList l = ViewOfTable(postings.size(), doc_ids, doc_lens, blocks, peaks);
  l.kind_ = Kind::kIndexed;
  l.postings_ = postings.data();
  return l;
}

PostingList PostingList::ViewPacked(std::span<const PackedPosting> postings,
                                    const uint64_t* doc_ids, const uint32_t* doc_lens,
                                    std::span<const Block> blocks, std::span<const Peak> peaks) {
  PostingList l = ViewOfTable(postings.size(), doc_ids, doc_lens, blocks, peaks);
  l.kind_ = Kind::kPacked;
  l.postings_ = postings.data();
  return l;
}

PostingList PostingList::ViewOfTable(size_t size, const uint64_t* doc_ids,
                                     const uint32_t* doc_lens, std::span<const Block> blocks,
                                     std::span<const Peak> peaks) {
  PostingList l;
  l.viewing_ = true;
  l.size_ = static_cast<uint32_t>(size);
  l.doc_ids_ = doc_ids;
  l.lens_ = doc_lens;
  l.blocks_ = blocks.data();
  l.peaks_ = peaks.data();
  l.peak_count_ = static_cast<uint32_t>(peaks.size());
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
  owned_.reset();
  cap_ = peak_cap_ = 0;
  viewing_ = o.viewing_;
  if (viewing_) {
    CopyViewOf(o);
    return *this;
  }
  Reseat(0, 0);
  Reserve(o.size_, o.peak_count_);
  std::copy_n(o.wide(), o.size_, owned_postings());
  std::copy_n(o.lens_, o.size_, owned_lens());
  std::ranges::copy(o.blocks(), owned_blocks());
  std::ranges::copy(o.peaks(), owned_peaks());
  Reseat(o.size_, o.peak_count_);
  return *this;
}

PostingList& PostingList::operator=(PostingList&& o) noexcept {
  if (this == &o) return *this;
  owned_ = std::move(o.owned_);
  cap_ = o.cap_;
  peak_cap_ = o.peak_cap_;
  viewing_ = o.viewing_;
  CopyViewOf(o);  // owned arrays stay where they are
  o.cap_ = o.peak_cap_ = 0;
  o.viewing_ = false;
  o.Reseat(0, 0);
  return *this;
}

void PostingList::CopyViewOf(const PostingList& o) {
  kind_ = o.kind_;
  postings_ = o.postings_;
  size_ = o.size_;
  doc_ids_ = o.doc_ids_;
  lens_ = o.lens_;
  blocks_ = o.blocks_;
  peaks_ = o.peaks_;
  peak_count_ = o.peak_count_;
}

void PostingList::Reseat(size_t size, size_t peaks) {
  kind_ = Kind::kWide;
  postings_ = owned_postings();
  size_ = static_cast<uint32_t>(size);
  doc_ids_ = nullptr;
  lens_ = owned_lens();
  blocks_ = owned_blocks();
  peaks_ = owned_peaks();
  peak_count_ = static_cast<uint32_t>(peaks);
}

void PostingList::Reserve(size_t postings, size_t peaks) {
  if (owned_ && postings <= cap_ && peaks <= peak_cap_) return;
  size_t cap = cap_;
  if (postings > cap) cap = std::min<size_t>(std::max(postings, cap + cap / 2), UINT32_MAX);
  size_t peak_cap = peak_cap_;
  if (peaks > peak_cap) peak_cap = std::min<size_t>(std::max(peaks, 2 * peak_cap), UINT32_MAX);
  auto bytes = std::make_unique_for_overwrite<std::byte[]>(PeaksAt(cap) + peak_cap * sizeof(Peak));
  std::byte* at = bytes.get();
  std::copy_n(wide(), size_, reinterpret_cast<Posting*>(at));
  std::copy_n(lens_, size_, reinterpret_cast<uint32_t*>(at + LensAt(cap)));
  std::ranges::copy(blocks(), reinterpret_cast<Block*>(at + BlocksAt(cap)));
  std::copy_n(peaks_, peak_count_, reinterpret_cast<Peak*>(at + PeaksAt(cap)));
  owned_ = std::move(bytes);
  cap_ = static_cast<uint32_t>(cap);
  peak_cap_ = static_cast<uint32_t>(peak_cap);
  Reseat(size_, peak_count_);
}

void PostingList::Own() {
  if (!viewing_) return;
  // Room for one more posting and peak: Insert() follows.
  const size_t cap = size_t{size_} + 1, peak_cap = size_t{peak_count_} + 1;
  auto bytes = std::make_unique_for_overwrite<std::byte[]>(PeaksAt(cap) + peak_cap * sizeof(Peak));
  std::byte* at = bytes.get();
  auto* postings = reinterpret_cast<Posting*>(at);
  auto* lens = reinterpret_cast<uint32_t*>(at + LensAt(cap));
  for (size_t i = 0; i < size_; i++) {
    postings[i] = posting(i);
    lens[i] = doc_len(i);
  }
  std::ranges::copy(blocks(), reinterpret_cast<Block*>(at + BlocksAt(cap)));
  std::ranges::copy(peaks(), reinterpret_cast<Peak*>(at + PeaksAt(cap)));
  owned_ = std::move(bytes);
  cap_ = static_cast<uint32_t>(cap);
  peak_cap_ = static_cast<uint32_t>(peak_cap);
  viewing_ = false;
  Reseat(size_, peak_count_);
}

void PostingList::Insert(Posting posting, uint32_t doc_len) {
  Own();
  Reserve(size_t{size_} + 1, peak_count_);
  Posting* postings = owned_postings();
  uint32_t* lens = owned_lens();
  size_t pos = size_;
  if (size_ > 0 && postings[size_ - 1].doc_id > posting.doc_id) {
    pos = static_cast<size_t>(std::lower_bound(postings, postings + size_, posting.doc_id, DocBefore) -
                              postings);
  }
  std::copy_backward(postings + pos, postings + size_, postings + size_ + 1);
  std::copy_backward(lens + pos, lens + size_, lens + size_ + 1);
  postings[pos] = posting;
  lens[pos] = doc_len;
  Reseat(size_t{size_} + 1, peak_count_);
  Block* blocks = owned_blocks();
  if (pos + 1 < size_) {
    RebuildBlocksFrom(pos);
  } else if (pos % kBlockSize == 0) {
    blocks[pos / kBlockSize] = {posting.doc_id, posting.tf, doc_len};
  } else {
    Block& last = blocks[pos / kBlockSize];
    last.last_doc = posting.doc_id;
    last.max_tf = std::max(last.max_tf, posting.tf);
    last.min_len = std::min(last.min_len, doc_len);
  }
  AddPeak(posting.tf, doc_len);
}

bool PostingList::Erase(uint64_t doc_id) {
  const size_t pos = LowerBound(doc_id);
  if (pos == size_ || this->doc_id(pos) != doc_id) return false;
  Own();
  Posting* postings = owned_postings();
  uint32_t* lens = owned_lens();
  const uint32_t tf = postings[pos].tf, len = lens[pos];
  std::copy(postings + pos + 1, postings + size_, postings + pos);
  std::copy(lens + pos + 1, lens + size_, lens + pos);
  Reseat(size_ - 1, peak_count_);
  RebuildBlocksFrom(pos);
  // Only the last posting at a peak can change the frontier. A posting below
  // the peaks is dominated by one, and so is everything it dominated; a
  // posting with another at the same (tf, length) leaves that peak held.
  // When the last one at a peak goes, the frontier is rebuilt.
  if (AtPeak(tf, len) && !Holds(tf, len)) {
    // AddPeak() may move the arrays: read them through the accessors.
    Reseat(size_, 0);
    for (size_t i = 0; i < size_; i++) AddPeak(wide()[i].tf, lens_[i]);
  }
  return true;
}

bool PostingList::Holds(uint32_t tf, uint32_t doc_len) const {
  for (size_t i = 0; i < size_; i++) {
    if (wide()[i].tf == tf && lens_[i] == doc_len) return true;
  }
  return false;
}

bool PostingList::AtPeak(uint32_t tf, uint32_t doc_len) const {
  const std::span<const Peak> all = peaks();
  auto it = std::lower_bound(all.begin(), all.end(), tf,
                             [](const Peak& p, uint32_t v) { return p.tf < v; });
  return it != all.end() && it->tf == tf && it->min_len == doc_len;
}

// Recomputes the blocks from the one that holds posting `pos` to the end.
void PostingList::RebuildBlocksFrom(size_t pos) {
  const Posting* postings = owned_postings();
  const uint32_t* lens = owned_lens();
  Block* blocks = owned_blocks();
  const size_t n = size_;
  for (size_t start = pos / kBlockSize * kBlockSize; start < n; start += kBlockSize) {
    const size_t end = std::min(start + kBlockSize, n);
    Block block{postings[end - 1].doc_id, 0, lens[start]};
    for (size_t i = start; i < end; i++) {
      block.max_tf = std::max(block.max_tf, postings[i].tf);
      block.min_len = std::min(block.min_len, lens[i]);
    }
    blocks[start / kBlockSize] = block;
  }
}

// Adds (tf, doc_len) to the Pareto frontier unless a peak already dominates
// it, dropping the peaks it dominates.
void PostingList::AddPeak(uint32_t tf, uint32_t doc_len) {
  for (const Peak& p : peaks()) {
    if (p.tf >= tf && p.min_len <= doc_len) return;
  }
  Reserve(size_, size_t{peak_count_} + 1);
  Peak* first = owned_peaks();
  Peak* end = std::remove_if(first, first + peak_count_,
                             [&](const Peak& p) { return p.tf <= tf && p.min_len >= doc_len; });
  Peak* at = std::lower_bound(first, end, tf, [](const Peak& p, uint32_t v) { return p.tf < v; });
  std::copy_backward(at, end, end + 1);
  *at = Peak{tf, doc_len};
  Reseat(size_, static_cast<size_t>(end - first) + 1);
}

}  // namespace agentmem::index

// index/text/bm25_frozen.cc -- a Bm25Index written as a frozen image and used
// where it lies (see bm25.h, "frozen images"; docs/format.md §5.8).
//
// Image layout, version 3 (what EncodeFrozen writes when every tf is at most
// 255 and there are at most 2^24 documents), little-endian, every array
// 8-byte aligned (sizes in bytes):
//   header    80: u32 magic "AB25", u32 version 3, u64 doc_count,
//                 u64 total_length, u64 term_count, u64 posting_count,
//                 u64 block_count, u64 peak_count, u64 text_bytes, 16 zero
//   docs      8 * doc_count         doc ids, increasing
//   lens      4 * doc_count         |d| of each document (padded to 8)
//   terms     32 * term_count       per term, sorted by text (bytes):
//                 u32 text_offset, u32 text_length, u64 first_posting,
//                 u32 posting_count, u32 first_block, u32 first_peak,
//                 u32 peak_count
//   postings  4 * posting_count     u32: doc (an index into docs) << 8 | tf
//                                   (padded to 8)
//   blocks    16 * block_count      u64 last_doc (a doc id), u32 max_tf, u32 min_len
//   peaks     8 * peak_count        u32 tf, u32 min_len
//   text      text_bytes            the terms' bytes (padded to 8)
// Version 2, written when an image does not fit version 3, differs only in
// its postings: 8 bytes each, u32 doc, u32 tf.
// Version 1, which AttachFrozen still reads, has no lens table; its postings
// are 16 bytes each (u64 doc id, u32 tf, u32 zero) and are followed by
// 4 * posting_count bytes holding the |d| of each posting's document (padded
// to 8). Everything else is the same.
// A term's blocks are ceil(posting_count / 64) consecutive entries from
// first_block, exactly as PostingList keeps them.
#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <new>

#include "index/text/bm25.h"

namespace agentmem::index {
namespace {

// The number of blocks of a list of `postings`.
constexpr uint64_t BlocksOf(uint64_t postings) {
  return (postings + PostingList::kBlockSize - 1) / PostingList::kBlockSize;
}

static_assert(std::endian::native == std::endian::little, "frozen images are mapped as they lie");
static_assert(sizeof(Posting) == 16 && sizeof(PostingList::IndexedPosting) == 8 &&
              sizeof(PostingList::Block) == 16 && sizeof(PostingList::Peak) == 8);

constexpr uint32_t kMagic = 0x35324241;  // "AB25"
// Written: version 3, or 2 for an image whose postings do not pack; version
// 1 is still read.
constexpr uint32_t kPackedVersion = 3;
constexpr uint32_t kIndexedVersion = 2;
constexpr size_t kHeader = 80;

size_t Pad8(size_t n) { return (n + 7) & ~size_t{7}; }

template <class T>
void Append(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

Status Bad(const char* what) { return StatusF(kCorruptIndex, "bm25 frozen image: %s", what); }

// The block and peak summaries of a frozen list against its postings: each
// block exactly as PostingList computes it, and the peaks in order with every
// posting at or under one of them, so that the bounds the top-k prunes with
// hold. REQUIRES: the postings' documents were checked.
Status CheckSummaries(const PostingList& list) {
  const std::span<const PostingList::Block> blocks = list.blocks();
  for (size_t b = 0; b < blocks.size(); b++) {
    const size_t start = b * PostingList::kBlockSize;
    const size_t end = std::min(start + PostingList::kBlockSize, list.size());
    uint32_t max_tf = 0, min_len = UINT32_MAX;
    for (size_t i = start; i < end; i++) {
      max_tf = std::max(max_tf, list.tf(i));
      min_len = std::min(min_len, list.doc_len(i));
    }
    if (blocks[b].last_doc != list.doc_id(end - 1) || blocks[b].max_tf != max_tf ||
        blocks[b].min_len != min_len) {
      return Bad("a block's summary does not match its postings");
    }
  }
  const std::span<const PostingList::Peak> peaks = list.peaks();
  for (size_t p = 1; p < peaks.size(); p++) {
    if (peaks[p].tf <= peaks[p - 1].tf || peaks[p].min_len <= peaks[p - 1].min_len) {
      return Bad("a term's peaks are not in order");
    }
  }
  for (size_t i = 0; i < list.size(); i++) {
    // The first peak with tf >= the posting's has the smallest min_len of those.
    const uint32_t tf = list.tf(i);
    auto peak = std::lower_bound(peaks.begin(), peaks.end(), tf,
                                 [](const PostingList::Peak& a, uint32_t v) { return a.tf < v; });
    if (peak == peaks.end() || peak->min_len > list.doc_len(i)) {
      return Bad("a posting scores above its term's peaks");
    }
  }
  return Status::OK();
}

// CheckSummaries and the checks of each posting, in one pass over a term's
// postings of an image that indexes its documents (versions 2 and 3; `get(j)`
// gives posting j of the image): their documents in order and in the image,
// tf >= 1, each document's tf added to doc_sums[doc] and to *sum (unless
// doc_sums is null), and the block and peak summaries. A bad posting is
// reported before a bad summary, and the summaries in CheckSummaries' order.
template <class Get>
Status CheckIndexedTerm(const Get& get, uint64_t first, uint32_t count,
                        std::span<const uint64_t> docs, std::span<const uint32_t> lens,
                        std::span<const PostingList::Block> blocks,
                        std::span<const PostingList::Peak> peaks, uint64_t* doc_sums,
                        uint64_t* sum) {
  constexpr size_t kBlock = PostingList::kBlockSize;
  bool blocks_hold = true, under_peaks = true;
  uint32_t previous = 0, max_tf = 0, min_len = UINT32_MAX;
  for (uint32_t i = 0; i < count; i++) {
    const PostingList::IndexedPosting post = get(first + i);
    if (post.doc >= docs.size() || (i > 0 && post.doc <= previous)) {
      return Bad("a posting's document is out of order or not in the image");
    }
    if (post.tf == 0) return Bad("a posting's tf is 0");
    previous = post.doc;
    if (doc_sums != nullptr) {
      doc_sums[post.doc] += post.tf;
      *sum += post.tf;
    }
    const uint32_t len = lens[post.doc];
    max_tf = std::max(max_tf, post.tf);
    min_len = std::min(min_len, len);
    if (i % kBlock == kBlock - 1 || i + 1 == count) {
      const PostingList::Block& b = blocks[i / kBlock];
      blocks_hold &= b.last_doc == docs[post.doc] && b.max_tf == max_tf && b.min_len == min_len;
      max_tf = 0;
      min_len = UINT32_MAX;
    }
    // The first peak with tf >= the posting's has the smallest min_len of
    // those (most lists have one peak).
    if (peaks.size() == 1) {
      under_peaks &= post.tf <= peaks[0].tf && peaks[0].min_len <= len;
    } else {
      auto peak = std::lower_bound(peaks.begin(), peaks.end(), post.tf,
                                   [](const PostingList::Peak& a, uint32_t v) { return a.tf < v; });
      under_peaks &= peak != peaks.end() && peak->min_len <= len;
    }
  }
  if (!blocks_hold) return Bad("a block's summary does not match its postings");
  for (size_t p = 1; p < peaks.size(); p++) {
    if (peaks[p].tf <= peaks[p - 1].tf || peaks[p].min_len <= peaks[p - 1].min_len) {
      return Bad("a term's peaks are not in order");
    }
  }
  if (!under_peaks) return Bad("a posting scores above its term's peaks");
  return Status::OK();
}

}  // namespace

template <class F>
void Bm25Index::ForEachImageTerm(F&& f) const {
  for (size_t i = 0; i < frozen_terms_.size(); i++) {
    if (term_ids_.count(FrozenText(i)) == 0) f(FrozenText(i), FrozenList(i));
  }
  for (uint32_t id : term_ids_) {
    if (!terms_[id].list.empty()) f(std::string_view(terms_[id].text), terms_[id].list);
  }
}

void Bm25Index::Documents(uint64_t from, uint64_t to, std::vector<std::string_view>* terms,
                          std::vector<DocumentTerms>* docs, std::vector<TermRef>* postings) const {
  terms->clear();
  docs->clear();
  postings->clear();
  auto frozen = std::lower_bound(frozen_docs_.begin(), frozen_docs_.end(), from);
  for (; frozen != frozen_docs_.end() && *frozen < to; ++frozen) docs->push_back({*frozen, 0, 0, 0});
  for (const auto& entry : docs_) {
    if (entry.first >= from && entry.first < to) docs->push_back({entry.first, 0, 0, 0});
  }
  std::sort(docs->begin(), docs->end(),
            [](const DocumentTerms& a, const DocumentTerms& b) { return a.doc_id < b.doc_id; });
  // A posting's document: by a table over the range's ids when they are
  // dense (as episode ids are), else by binary search.
  const uint64_t low = docs->empty() ? 0 : docs->front().doc_id;
  const uint64_t span = docs->empty() ? 0 : docs->back().doc_id - low + 1;
  std::vector<uint32_t> slot;
  if (span <= 4 * docs->size() + 1024) {
    slot.assign(span, UINT32_MAX);
    for (size_t i = 0; i < docs->size(); i++) slot[(*docs)[i].doc_id - low] = static_cast<uint32_t>(i);
  }
  auto find = [&](uint64_t id) -> DocumentTerms* {
    if (!slot.empty()) {
      const bool in = id >= low && id - low < span && slot[id - low] != UINT32_MAX;
      return in ? &(*docs)[slot[id - low]] : nullptr;
    }
    auto it = std::lower_bound(docs->begin(), docs->end(), id,
                               [](const DocumentTerms& d, uint64_t v) { return d.doc_id < v; });
    return it == docs->end() || it->doc_id != id ? nullptr : &*it;
  };
  // Each term's postings in the range, twice: counted, then placed.
  auto each = [&](auto&& posting) {
    uint32_t term = 0;
    ForEachImageTerm([&](std::string_view text, const PostingList& list) {
      size_t i = list.LowerBound(from);
      if (i == list.size() || list.doc_id(i) >= to) return;
      posting(term, text, list, i);
      term++;
    });
  };
  each([&](uint32_t, std::string_view text, const PostingList& list, size_t i) {
    terms->push_back(text);
    for (; i < list.size() && list.doc_id(i) < to; i++) {
      if (DocumentTerms* d = find(list.doc_id(i))) d->count++;
    }
  });
  uint64_t next = 0;
  for (DocumentTerms& d : *docs) {
    d.first = next;
    next += d.count;
    d.count = 0;
  }
  postings->resize(next);
  each([&](uint32_t term, std::string_view, const PostingList& list, size_t i) {
    for (; i < list.size() && list.doc_id(i) < to; i++) {
      DocumentTerms* d = find(list.doc_id(i));
      if (!d) continue;
      (*postings)[d->first + d->count++] = {term, list.tf(i)};
      d->doc_len += list.tf(i);
    }
  });
}

size_t Bm25Index::FrozenSize() const {
  if (ImageIsWhole()) return frozen_size_;
  uint64_t terms = 0, postings = 0, blocks = 0, peaks = 0, text = 0;
  uint32_t max_tf = 0;
  ForEachImageTerm([&](std::string_view t, const PostingList& list) {
    terms++;
    postings += list.size();
    blocks += list.blocks().size();
    peaks += list.peaks().size();
    text += t.size();
    for (size_t i = 0; i < list.size() && max_tf <= PostingList::kPackedMaxTf; i++) {
      max_tf = std::max(max_tf, list.tf(i));
    }
  });
  const uint64_t docs = doc_count();
  const bool packed = docs <= PostingList::kPackedMaxDocs && max_tf <= PostingList::kPackedMaxTf;
  return kHeader + docs * 8 + Pad8(docs * 4) + terms * 32 +
         (packed ? Pad8(postings * 4) : postings * 8) + blocks * 16 + peaks * 8 + Pad8(text);
}

void Bm25Index::EncodeFrozen(std::string* out) const {
  out->resize(Pad8(out->size()), '\0');
  if (ImageIsWhole()) {
    out->append(frozen_, frozen_size_);
    return;
  }
  // Every term, owned or frozen, sorted by its text.
  struct Entry {
    std::string_view text;
    const PostingList* list;
  };
  std::vector<Entry> entries;
  std::vector<PostingList> frozen_lists;  // views of frozen terms not superseded
  frozen_lists.reserve(frozen_terms_.size());
  ForEachImageTerm([&](std::string_view text, const PostingList& list) {
    if (list.is_view()) {
      entries.push_back({text, &frozen_lists.emplace_back(list)});
    } else {
      entries.push_back({text, &list});
    }
  });
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.text < b.text; });
  std::vector<uint64_t> docs(frozen_docs_.begin(), frozen_docs_.end());
  for (const auto& [doc, d] : docs_) docs.push_back(doc);
  std::sort(docs.begin(), docs.end());
  // Postings as indexes into `docs`, and each document's length from any of
  // its postings (a document without postings is empty).
  // A document's index: from a table over the ids' range when they are
  // dense (a table no larger than four entries per document), else by a
  // galloping search from the list's previous posting.
  std::vector<uint32_t> slot;
  const uint64_t first_doc = docs.empty() ? 0 : docs.front();
  if (!docs.empty() && docs.back() - first_doc < 4 * docs.size()) {
    slot.resize(docs.back() - first_doc + 1);
    for (size_t i = 0; i < docs.size(); i++) slot[docs[i] - first_doc] = static_cast<uint32_t>(i);
  }
  std::vector<PostingList::IndexedPosting> indexed;
  size_t postings = 0;
  for (const Entry& e : entries) postings += e.list->size();
  indexed.reserve(postings);
  std::vector<uint32_t> lens(docs.size(), 0);
  uint64_t blocks = 0, peaks = 0, text = 0;
  for (const Entry& e : entries) {
    size_t at = 0;
    for (size_t i = 0; i < e.list->size(); i++) {
      const uint64_t id = e.list->doc_id(i);
      if (!slot.empty()) {
        at = slot[id - first_doc];
      } else {
        size_t step = 1;
        while (at + step < docs.size() && docs[at + step] < id) step *= 2;
        at = std::lower_bound(docs.begin() + at, docs.begin() + std::min(at + step + 1, docs.size()), id) -
             docs.begin();
      }
      const auto doc = static_cast<uint32_t>(at);
      lens[doc] = e.list->doc_len(i);
      indexed.push_back({doc, e.list->tf(i)});
    }
    blocks += e.list->blocks().size();
    peaks += e.list->peaks().size();
    text += e.text.size();
  }
  const bool packed =
      docs.size() <= PostingList::kPackedMaxDocs &&
      std::all_of(indexed.begin(), indexed.end(), [](const PostingList::IndexedPosting& p) {
        return p.tf <= PostingList::kPackedMaxTf;
      });
  Append(out, kMagic);
  Append(out, packed ? kPackedVersion : kIndexedVersion);
  Append(out, uint64_t{docs.size()});
  Append(out, total_length_);
  Append(out, uint64_t{entries.size()});
  Append(out, uint64_t{indexed.size()});
  Append(out, blocks);
  Append(out, peaks);
  Append(out, text);
  out->append(16, '\0');
  out->append(reinterpret_cast<const char*>(docs.data()), docs.size() * 8);
  out->append(reinterpret_cast<const char*>(lens.data()), lens.size() * 4);
  out->resize(Pad8(out->size()), '\0');
  uint64_t at_posting = 0, at_block = 0, at_peak = 0, at_text = 0;
  for (const Entry& e : entries) {
    FrozenTerm t{static_cast<uint32_t>(at_text), static_cast<uint32_t>(e.text.size()), at_posting,
                 static_cast<uint32_t>(e.list->size()), static_cast<uint32_t>(at_block),
                 static_cast<uint32_t>(at_peak), static_cast<uint32_t>(e.list->peaks().size())};
    Append(out, t);
    at_posting += e.list->size();
    at_block += e.list->blocks().size();
    at_peak += e.list->peaks().size();
    at_text += e.text.size();
  }
  if (packed) {
    for (const PostingList::IndexedPosting& p : indexed) {
      Append(out, PostingList::PackedPosting{p.doc << PostingList::kPackedTfBits | p.tf});
    }
    out->resize(Pad8(out->size()), '\0');
  } else {
    out->append(reinterpret_cast<const char*>(indexed.data()), indexed.size() * 8);
  }
  for (const Entry& e : entries) {
    out->append(reinterpret_cast<const char*>(e.list->blocks().data()), e.list->blocks().size() * 16);
  }
  for (const Entry& e : entries) {
    out->append(reinterpret_cast<const char*>(e.list->peaks().data()), e.list->peaks().size() * 8);
  }
  for (const Entry& e : entries) out->append(e.text);
  out->resize(Pad8(out->size()), '\0');
}

Status Bm25Index::AttachFrozen(const char* data, size_t size, uint64_t max_doc) {
  if (!docs_.empty() || !term_ids_.empty() || frozen_ != nullptr) {
    return Status(kMisuse, "bm25: a frozen image can only be attached to an empty index");
  }
  if (reinterpret_cast<uintptr_t>(data) % 8 != 0 || size < kHeader) return Bad("too short or misaligned");
  uint32_t magic, version;
  uint64_t n[7];
  std::memcpy(&magic, data, 4);
  std::memcpy(&version, data + 4, 4);
  std::memcpy(n, data + 8, sizeof n);
  if (magic != kMagic) return Bad("bad magic");
  if (std::any_of(data + 64, data + kHeader, [](char c) { return c != 0; })) {
    return Bad("its reserved header bytes are not zero");
  }
  if (version < 1 || version > kPackedVersion) {
    return StatusF(kFormatVersion, "bm25 frozen image: version %u is not known", version);
  }
  // Versions 2 and 3: lengths per document, postings that index the documents.
  const bool per_doc = version >= 2;
  const auto [docs, total, terms, postings, blocks, peaks, text] =
      std::tuple{n[0], n[1], n[2], n[3], n[4], n[5], n[6]};
  // Sizes first (each count is bounded by the image, so nothing overflows).
  const size_t doc_bytes = per_doc ? 12 : 8;
  const size_t posting_bytes = version == 1 ? 16 : version == 2 ? 8 : 4;
  const uint64_t max_docs = version == 2 ? UINT32_MAX : PostingList::kPackedMaxDocs;
  if (docs > size / doc_bytes || terms > size / 32 ||
      postings > size / (posting_bytes + (per_doc ? 0 : 4)) || blocks > size / 16 ||
      peaks > size / 8 || text > size || (per_doc && docs > max_docs)) {
    return Bad("a count is larger than the image");
  }
  const size_t lens_bytes = per_doc ? Pad8(docs * 4) : Pad8(postings * 4);
  const size_t postings_bytes = Pad8(postings * posting_bytes);
  const size_t need = kHeader + docs * 8 + terms * 32 + postings_bytes + lens_bytes +
                      blocks * 16 + peaks * 8 + Pad8(text);
  if (need != size) return Bad("its sections do not add up to its size");
  const char* p = data + kHeader;
  frozen_version_ = version;
  frozen_docs_ = std::span(reinterpret_cast<const uint64_t*>(p), docs);
  p += docs * 8;
  if (per_doc) {
    frozen_lens_ = std::span(reinterpret_cast<const uint32_t*>(p), docs);
    p += lens_bytes;
  }
  frozen_terms_ = std::span(reinterpret_cast<const FrozenTerm*>(p), terms);
  p += terms * 32;
  if (version == 3) {
    frozen_packed_ = std::span(reinterpret_cast<const PostingList::PackedPosting*>(p), postings);
    p += postings_bytes;
  } else if (version == 2) {
    frozen_indexed_ = std::span(reinterpret_cast<const PostingList::IndexedPosting*>(p), postings);
    p += postings_bytes;
  } else {
    frozen_postings_ = std::span(reinterpret_cast<const Posting*>(p), postings);
    p += postings * 16;
    frozen_lens_ = std::span(reinterpret_cast<const uint32_t*>(p), postings);
    p += lens_bytes;
  }
  frozen_blocks_ = std::span(reinterpret_cast<const PostingList::Block*>(p), blocks);
  p += blocks * 16;
  frozen_peaks_ = std::span(reinterpret_cast<const PostingList::Peak*>(p), peaks);
  p += peaks * 8;
  frozen_text_ = p;
  frozen_total_ = total;
  Status s = CheckShape(max_doc, text);
  if (s.ok() && version == 1) s = CheckVersion1(max_doc);
  if (s.ok() && version >= 2) {
    try {
      term_checks_ = std::make_unique<std::atomic<uint8_t>[]>(terms);  // (zeroed: none checked)
    } catch (const std::bad_alloc&) {
      s = Status(kNoMem, "bm25: no memory to attach a frozen image");
    }
  }
  if (!s.ok()) {
    DetachFrozen();
    return s;
  }
  verified_.store(version == 1, std::memory_order_release);
  frozen_ = data;
  frozen_size_ = size;
  total_length_ = total;
  ordinary_bytes_ = 0;
  if (freeze_bytes_ != SIZE_MAX) freeze_at_ = std::max(freeze_bytes_, 2 * size);
  if (term_parts_ != nullptr) {  // the image's terms are gained
    for (size_t i = 0; i < frozen_terms_.size(); i++) {
      term_parts_->Set(term_parts_part_, FrozenText(i), static_cast<uint32_t>(i));
    }
  }
  return Status::OK();
}

// The checks AttachFrozen() makes on the arrays it has placed, in time
// linear in the documents and terms: documents in order and in range, and
// the terms sorted, each one's ranges following the previous term's and all
// of them covering the arrays exactly. What lies in a term's ranges is
// checked on the term's first use (TermHolds()) or by Verify().
Status Bm25Index::CheckShape(uint64_t max_doc, uint64_t text) const {
  const std::span<const uint64_t> docs = frozen_docs_;
  for (size_t i = 0; i < docs.size(); i++) {
    if (docs[i] == 0 || docs[i] > max_doc || (i > 0 && docs[i] <= docs[i - 1])) {
      return Bad("document ids out of order or range");
    }
  }
  const uint64_t postings = frozen_version_ == 3   ? frozen_packed_.size()
                            : frozen_version_ == 2 ? frozen_indexed_.size()
                                                   : frozen_postings_.size();
  const uint64_t blocks = frozen_blocks_.size(), peaks = frozen_peaks_.size();
  uint64_t expect_posting = 0, expect_block = 0, expect_peak = 0, expect_text = 0;
  std::string_view previous;
  for (size_t t = 0; t < frozen_terms_.size(); t++) {
    const FrozenTerm& ft = frozen_terms_[t];
    const uint64_t nb = BlocksOf(ft.posting_count);
    if (ft.first_posting != expect_posting || ft.first_block != expect_block ||
        ft.first_peak != expect_peak || ft.text_offset != expect_text || ft.posting_count == 0 ||
        ft.peak_count == 0 || ft.text_length == 0 || expect_posting + ft.posting_count > postings ||
        expect_block + nb > blocks || expect_peak + ft.peak_count > peaks ||
        expect_text + ft.text_length > text) {
      return Bad("a term's ranges do not follow the previous term's");
    }
    std::string_view term = FrozenText(t);
    if (t > 0 && term <= previous) return Bad("terms are not sorted");
    previous = term;
    expect_posting += ft.posting_count;
    expect_block += nb;
    expect_peak += ft.peak_count;
    expect_text += ft.text_length;
  }
  if (expect_posting != postings || expect_block != blocks || expect_peak != peaks ||
      expect_text != text) {
    return Bad("the terms do not cover its arrays");
  }
  return Status::OK();
}

// Version 1, checked whole when attached: every posting's document is one
// of the image's, in order, with tf >= 1; the summaries; the tf total. A
// bitmap over the ids from the first document to the last when that range
// is small next to the image (ids are dense in practice), else a binary
// search of the documents: memory follows the image, never the size of an id.
Status Bm25Index::CheckVersion1(uint64_t max_doc) const {
  const std::span<const uint64_t> docs = frozen_docs_;
  const uint64_t first_doc = docs.empty() ? 0 : docs.front();
  const uint64_t doc_range = docs.empty() ? 0 : docs.back() - first_doc + 1;
  const bool bitmap = doc_range / 64 <= docs.size() + 1024;
  std::vector<uint64_t> is_doc(bitmap ? doc_range / 64 + 1 : 0, 0);
  if (bitmap) {
    for (uint64_t d : docs) is_doc[(d - first_doc) / 64] |= uint64_t{1} << ((d - first_doc) % 64);
  }
  auto known = [&](uint64_t d) {
    if (d < first_doc || d - first_doc >= doc_range) return false;
    if (bitmap) return ((is_doc[(d - first_doc) / 64] >> ((d - first_doc) % 64)) & 1) != 0;
    return std::binary_search(docs.begin(), docs.end(), d);
  };
  uint64_t sum = 0;
  for (size_t t = 0; t < frozen_terms_.size(); t++) {
    const FrozenTerm& ft = frozen_terms_[t];
    for (uint64_t i = 0; i < ft.posting_count; i++) {
      const Posting& post = frozen_postings_[ft.first_posting + i];
      const uint64_t d = post.doc_id;
      if (d > max_doc || !known(d) ||
          (i > 0 && d <= frozen_postings_[ft.first_posting + i - 1].doc_id)) {
        return Bad("a posting's document is out of order or not in the image");
      }
      if (post.tf == 0) return Bad("a posting's tf is 0");
      sum += post.tf;
    }
    AGENTMEM_RETURN_IF_ERROR(CheckSummaries(FrozenList(t)));
  }
  if (sum != frozen_total_) return Bad("the lengths do not add up");
  return Status::OK();
}

// Versions 2 and 3: what lies in term t's ranges (CheckIndexedTerm), its
// tfs added to doc_sums and *sum unless doc_sums is null.
Status Bm25Index::CheckTerm(size_t t, uint64_t* doc_sums, uint64_t* sum) const {
  const FrozenTerm& ft = frozen_terms_[t];
  const size_t nb = BlocksOf(ft.posting_count);
  const auto blocks = frozen_blocks_.subspan(ft.first_block, nb);
  const auto peaks = frozen_peaks_.subspan(ft.first_peak, ft.peak_count);
  if (frozen_version_ == 3) {
    auto packed = [this](uint64_t j) {
      const PostingList::PackedPosting p = frozen_packed_[j];
      return PostingList::IndexedPosting{p >> PostingList::kPackedTfBits, p & PostingList::kPackedMaxTf};
    };
    return CheckIndexedTerm(packed, ft.first_posting, ft.posting_count, frozen_docs_, frozen_lens_,
                            blocks, peaks, doc_sums, sum);
  }
  auto indexed = [this](uint64_t j) { return frozen_indexed_[j]; };
  return CheckIndexedTerm(indexed, ft.first_posting, ft.posting_count, frozen_docs_, frozen_lens_,
                          blocks, peaks, doc_sums, sum);
}

bool Bm25Index::TermHolds(size_t t) const {
  if (!term_checks_ || verified_.load(std::memory_order_acquire)) return true;
  const uint8_t state = term_checks_[t].load(std::memory_order_acquire);
  if (state != kTermUnchecked) return state == kTermHeld;
  // Threads that check one term at once reach the same verdict.
  Status s = CheckTerm(t, nullptr, nullptr);
  if (!s.ok()) NoteDamage(s);
  term_checks_[t].store(s.ok() ? kTermHeld : kTermFailed, std::memory_order_release);
  return s.ok();
}

void Bm25Index::NoteDamage(const Status& s) const {
  std::lock_guard lock(damage_mu_);
  if (damage_.ok()) damage_ = s;
  damaged_.store(true, std::memory_order_release);
}

Status Bm25Index::status() const {
  if (!damaged_.load(std::memory_order_acquire)) return Status::OK();
  std::lock_guard lock(damage_mu_);
  return damage_;
}

// Every term (with the sums CheckTerm keeps), each document's length
// against its terms' tf sum, and the total. Memory: a sum per document,
// bounded by the image.
Status Bm25Index::Verify() const {
  if (!frozen_ || verified_.load(std::memory_order_acquire)) return Status::OK();
  if (Status damage = status(); !damage.ok()) return damage;
  Status s;
  try {
    std::vector<uint64_t> doc_sums(frozen_docs_.size(), 0);
    uint64_t sum = 0;
    for (size_t t = 0; t < frozen_terms_.size() && s.ok(); t++) s = CheckTerm(t, doc_sums.data(), &sum);
    for (size_t d = 0; d < doc_sums.size() && s.ok(); d++) {
      if (doc_sums[d] != frozen_lens_[d]) s = Bad("a document's length is not its terms' tf sum");
    }
    if (s.ok() && sum != frozen_total_) s = Bad("the lengths do not add up");
  } catch (const std::bad_alloc&) {
    return Status(kNoMem, "bm25: no memory to check a frozen image");
  }
  if (!s.ok()) {
    NoteDamage(s);
    return s;
  }
  verified_.store(true, std::memory_order_release);
  return Status::OK();
}

void Bm25Index::DetachFrozen() {
  frozen_ = nullptr;
  frozen_size_ = 0;
  frozen_version_ = 0;
  frozen_docs_ = {};
  frozen_terms_ = {};
  frozen_text_ = nullptr;
  frozen_postings_ = {};
  frozen_indexed_ = {};
  frozen_packed_ = {};
  frozen_lens_ = {};
  frozen_blocks_ = {};
  frozen_peaks_ = {};
  superseded_ = 0;
  frozen_total_ = 0;
  term_checks_.reset();
  verified_.store(false, std::memory_order_release);
  {
    std::lock_guard damage_lock(damage_mu_);
    damage_ = Status::OK();
    damaged_.store(false, std::memory_order_release);
  }
  std::lock_guard<std::mutex> lock(views_mu_);
  frozen_views_.clear();
}

std::string_view Bm25Index::FrozenText(size_t i) const {
  return {frozen_text_ + frozen_terms_[i].text_offset, frozen_terms_[i].text_length};
}

PostingList Bm25Index::FrozenList(size_t i) const {
  if (!TermHolds(i)) return PostingList();  // status() tells why
  const FrozenTerm& t = frozen_terms_[i];
  const size_t nb = BlocksOf(t.posting_count);
  const auto blocks = frozen_blocks_.subspan(t.first_block, nb);
  const auto peaks = frozen_peaks_.subspan(t.first_peak, t.peak_count);
  if (frozen_version_ == 3) {
    return PostingList::ViewPacked(frozen_packed_.subspan(t.first_posting, t.posting_count),
                                   frozen_docs_.data(), frozen_lens_.data(), blocks, peaks);
  }
  if (frozen_version_ == 2) {
    return PostingList::ViewIndexed(frozen_indexed_.subspan(t.first_posting, t.posting_count),
                                    frozen_docs_.data(), frozen_lens_.data(), blocks, peaks);
  }
  return PostingList::View(frozen_postings_.subspan(t.first_posting, t.posting_count),
                           frozen_lens_.subspan(t.first_posting, t.posting_count), blocks, peaks);
}

int64_t Bm25Index::FindFrozen(std::string_view term) const {
  size_t lo = 0, hi = frozen_terms_.size();
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    std::string_view t = FrozenText(mid);
    if (t == term) return static_cast<int64_t>(mid);
    if (t < term) lo = mid + 1; else hi = mid;
  }
  return -1;
}

Status Bm25Index::Thaw() {
  if (!frozen_) return Status::OK();
  AGENTMEM_RETURN_IF_ERROR(Verify());
  // Every document's terms, gathered from the lists (frozen ones not yet
  // moved, and the ordinary ones, which hold frozen postings once moved).
  std::map<uint64_t, std::vector<TermCount>> docs;
  for (uint64_t d : frozen_docs_) docs[d];
  for (const auto& [d, doc] : docs_) docs[d];
  for (size_t i = 0; i < frozen_terms_.size(); i++) {
    std::string_view text = FrozenText(i);
    if (term_ids_.count(text)) continue;
    PostingList list = FrozenList(i);
    for (size_t j = 0; j < list.size(); j++) docs[list.doc_id(j)].push_back({text, list.tf(j)});
  }
  for (const Term& t : terms_) {
    for (size_t j = 0; j < t.list.size(); j++) {
      docs[t.list.doc_id(j)].push_back({t.text, t.list.tf(j)});
    }
  }
  Bm25Index fresh(params_, SIZE_MAX);
  for (const auto& [d, counts] : docs) {
    uint64_t len = 0;
    for (const TermCount& c : counts) len += c.tf;
    if (len > UINT32_MAX) return Status(kCorruptIndex, "bm25: a document is too long to thaw");
    AGENTMEM_RETURN_IF_ERROR(fresh.AddCounts(d, static_cast<uint32_t>(len), counts));
  }
  // The table's hash reads the terms of the index it belongs to: it is
  // filled again, not moved.
  terms_ = std::move(fresh.terms_);
  term_ids_.clear();
  term_ids_.reserve(fresh.term_ids_.size());
  for (uint32_t id : fresh.term_ids_) term_ids_.insert(id);
  free_term_ids_ = std::move(fresh.free_term_ids_);
  docs_ = std::move(fresh.docs_);
  total_length_ = fresh.total_length_;
  DetachFrozen();
  std::string().swap(own_image_);
  ordinary_bytes_ = 0;
  if (term_parts_ != nullptr) {  // every term moves; none is gained or lost
    for (uint32_t term_id : term_ids_) {
      term_parts_->Set(term_parts_part_, terms_[term_id].text, kOrdinaryRef | term_id);
    }
  }
  return Status::OK();
}

bool Bm25Index::ImageIsWhole() const {
  return frozen_ != nullptr && frozen_version_ >= kIndexedVersion && docs_.empty() &&
         superseded_ == 0;
}

Status Bm25Index::Freeze() {
  // An image has no document 0.
  if ((docs_.empty() && superseded_ == 0) || docs_.count(0) != 0) return Status::OK();
  AGENTMEM_RETURN_IF_ERROR(Verify());
  std::string image;
  try {
    image.reserve(FrozenSize());
    EncodeFrozen(&image);
  } catch (const std::bad_alloc&) {
    return Status(kNoMem, "bm25: no memory to freeze the index");
  }
  uint64_t max_doc = frozen_docs_.empty() ? 0 : frozen_docs_.back();
  for (const auto& [doc, d] : docs_) max_doc = std::max(max_doc, doc);
  // The ordinary documents and the previous image go; the new image holds
  // them all. Its terms are reported to the term table as they attach.
  const std::string previous = std::move(own_image_);
  terms_ = {};
  term_ids_ = decltype(term_ids_)(0, TermKey{&terms_}, TermKey{&terms_});
  free_term_ids_ = {};
  docs_ = {};
  total_length_ = 0;
  DetachFrozen();
  own_image_ = std::move(image);
  Status s = AttachFrozen(own_image_.data(), own_image_.size(), max_doc);
  if (!s.ok()) {
    return Status(kInternal, "bm25: the index's own frozen image does not attach: " + s.message());
  }
  verified_.store(true, std::memory_order_release);  // what EncodeFrozen() wrote
  return Status::OK();
}

}  // namespace agentmem::index

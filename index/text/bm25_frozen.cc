// index/text/bm25_frozen.cc -- a Bm25Index written as a frozen image and used
// where it lies (see bm25.h, "frozen images"; docs/format.md §5.8).
//
// Image layout, little-endian, every array 8-byte aligned (sizes in bytes):
//   header    80: u32 magic "AB25", u32 version 1, u64 doc_count,
//                 u64 total_length, u64 term_count, u64 posting_count,
//                 u64 block_count, u64 peak_count, u64 text_bytes, 16 zero
//   docs      8 * doc_count         doc ids, increasing
//   terms     32 * term_count       per term, sorted by text (bytes):
//                 u32 text_offset, u32 text_length, u64 first_posting,
//                 u32 posting_count, u32 first_block, u32 first_peak,
//                 u32 peak_count
//   postings  16 * posting_count    u64 doc id, u32 tf, u32 zero
//   lens      4 * posting_count     |d| of each posting's document (padded to 8)
//   blocks    16 * block_count      u64 last_doc, u32 max_tf, u32 min_len
//   peaks     8 * peak_count        u32 tf, u32 min_len
//   text      text_bytes            the terms' bytes (padded to 8)
// A term's blocks are ceil(posting_count / 64) consecutive entries from
// first_block, exactly as PostingList keeps them.
#include <algorithm>
#include <bit>
#include <cstring>
#include <map>

#include "index/text/bm25.h"

namespace agentmem::index {
namespace {

static_assert(std::endian::native == std::endian::little, "frozen images are mapped as they lie");
static_assert(sizeof(Posting) == 16 && sizeof(PostingList::Block) == 16 &&
              sizeof(PostingList::Peak) == 8);

constexpr uint32_t kMagic = 0x35324241;  // "AB25"
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 80;

size_t Pad8(size_t n) { return (n + 7) & ~size_t{7}; }

template <class T>
void Append(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

Status Bad(const char* what) { return StatusF(kCorruptIndex, "bm25 frozen image: %s", what); }

}  // namespace

void Bm25Index::EncodeFrozen(std::string* out) const {
  out->resize(Pad8(out->size()), '\0');
  // Every term, owned or frozen, sorted by its text.
  struct Entry {
    std::string_view text;
    const PostingList* list;
  };
  std::vector<Entry> entries;
  std::vector<PostingList> frozen_lists;  // views of frozen terms not superseded
  frozen_lists.reserve(frozen_terms_.size());
  for (size_t i = 0; i < frozen_terms_.size(); i++) {
    if (term_ids_.count(FrozenText(i)) == 0) frozen_lists.push_back(FrozenList(i));
  }
  size_t next_frozen = 0;
  for (size_t i = 0; i < frozen_terms_.size(); i++) {
    if (term_ids_.count(FrozenText(i)) == 0) entries.push_back({FrozenText(i), &frozen_lists[next_frozen++]});
  }
  for (const auto& [text, id] : term_ids_) {
    if (!terms_[id].list.empty()) entries.push_back({terms_[id].text, &terms_[id].list});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.text < b.text; });
  std::vector<uint64_t> docs(frozen_docs_.begin(), frozen_docs_.end());
  for (const auto& [doc, d] : docs_) docs.push_back(doc);
  std::sort(docs.begin(), docs.end());
  uint64_t postings = 0, blocks = 0, peaks = 0, text = 0;
  for (const Entry& e : entries) {
    postings += e.list->size();
    blocks += e.list->blocks().size();
    peaks += e.list->peaks().size();
    text += e.text.size();
  }
  const size_t start = out->size();
  Append(out, kMagic);
  Append(out, kVersion);
  Append(out, uint64_t{docs.size()});
  Append(out, total_length_);
  Append(out, uint64_t{entries.size()});
  Append(out, postings);
  Append(out, blocks);
  Append(out, peaks);
  Append(out, text);
  out->append(16, '\0');
  out->append(reinterpret_cast<const char*>(docs.data()), docs.size() * 8);
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
  for (const Entry& e : entries) {
    for (const Posting& p : e.list->postings()) {
      Append(out, p.doc_id);
      Append(out, p.tf);
      Append(out, uint32_t{0});
    }
  }
  for (const Entry& e : entries) {
    out->append(reinterpret_cast<const char*>(e.list->doc_lens().data()), e.list->size() * 4);
  }
  out->resize(Pad8(out->size()), '\0');
  for (const Entry& e : entries) {
    out->append(reinterpret_cast<const char*>(e.list->blocks().data()), e.list->blocks().size() * 16);
  }
  for (const Entry& e : entries) {
    out->append(reinterpret_cast<const char*>(e.list->peaks().data()), e.list->peaks().size() * 8);
  }
  for (const Entry& e : entries) out->append(e.text);
  out->resize(Pad8(out->size()), '\0');
  (void)start;
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
  if (version != kVersion) return StatusF(kFormatVersion, "bm25 frozen image: version %u is not known", version);
  const auto [docs, total, terms, postings, blocks, peaks, text] =
      std::tuple{n[0], n[1], n[2], n[3], n[4], n[5], n[6]};
  // Sizes first (each count is bounded by the image, so nothing overflows).
  if (docs > size / 8 || terms > size / 32 || postings > size / 16 || blocks > size / 16 ||
      peaks > size / 8 || text > size) {
    return Bad("a count is larger than the image");
  }
  const size_t need = kHeader + docs * 8 + terms * 32 + postings * 16 + Pad8(postings * 4) +
                      blocks * 16 + peaks * 8 + Pad8(text);
  if (need != size) return Bad("its sections do not add up to its size");
  const char* p = data + kHeader;
  auto docs_span = std::span(reinterpret_cast<const uint64_t*>(p), docs);
  p += docs * 8;
  auto terms_span = std::span(reinterpret_cast<const FrozenTerm*>(p), terms);
  p += terms * 32;
  auto postings_span = std::span(reinterpret_cast<const Posting*>(p), postings);
  p += postings * 16;
  auto lens_span = std::span(reinterpret_cast<const uint32_t*>(p), postings);
  p += Pad8(postings * 4);
  auto blocks_span = std::span(reinterpret_cast<const PostingList::Block*>(p), blocks);
  p += blocks * 16;
  auto peaks_span = std::span(reinterpret_cast<const PostingList::Peak*>(p), peaks);
  p += peaks * 8;
  const char* text_base = p;

  for (size_t i = 0; i < docs; i++) {
    if (docs_span[i] == 0 || docs_span[i] > max_doc || (i > 0 && docs_span[i] <= docs_span[i - 1])) {
      return Bad("document ids out of order or range");
    }
  }
  // Every posting's document must be one of the image's. A bitmap over the
  // ids from the first document to the last when that range is small next to
  // the image (ids are dense in practice), else a binary search of `docs`:
  // memory follows the image, never the size of an id.
  const uint64_t first_doc = docs > 0 ? docs_span[0] : 0;
  const uint64_t doc_range = docs > 0 ? docs_span[docs - 1] - first_doc + 1 : 0;
  const bool bitmap = doc_range / 64 <= docs + 1024;
  std::vector<uint64_t> is_doc(bitmap ? doc_range / 64 + 1 : 0, 0);
  if (bitmap) {
    for (uint64_t d : docs_span) is_doc[(d - first_doc) / 64] |= uint64_t{1} << ((d - first_doc) % 64);
  }
  auto known = [&](uint64_t d) {
    if (d < first_doc || d - first_doc >= doc_range) return false;
    if (bitmap) return ((is_doc[(d - first_doc) / 64] >> ((d - first_doc) % 64)) & 1) != 0;
    return std::binary_search(docs_span.begin(), docs_span.end(), d);
  };
  uint64_t expect_posting = 0, expect_block = 0, expect_peak = 0, expect_text = 0, sum = 0;
  std::string_view previous;
  for (size_t t = 0; t < terms; t++) {
    const FrozenTerm& ft = terms_span[t];
    const uint64_t nb = (uint64_t{ft.posting_count} + PostingList::kBlockSize - 1) / PostingList::kBlockSize;
    if (ft.first_posting != expect_posting || ft.first_block != expect_block ||
        ft.first_peak != expect_peak || ft.text_offset != expect_text || ft.posting_count == 0 ||
        ft.peak_count == 0 || ft.text_length == 0 || expect_posting + ft.posting_count > postings ||
        expect_block + nb > blocks || expect_peak + ft.peak_count > peaks ||
        expect_text + ft.text_length > text) {
      return Bad("a term's ranges do not follow the previous term's");
    }
    std::string_view term(text_base + ft.text_offset, ft.text_length);
    if (t > 0 && term <= previous) return Bad("terms are not sorted");
    previous = term;
    for (uint64_t i = 0; i < ft.posting_count; i++) {
      const Posting& post = postings_span[ft.first_posting + i];
      const uint64_t d = post.doc_id;
      if (d > max_doc || !known(d) || post.tf == 0 ||
          (i > 0 && d <= postings_span[ft.first_posting + i - 1].doc_id)) {
        return Bad("a posting's document is out of order or not in the image");
      }
      sum += post.tf;
    }
    expect_posting += ft.posting_count;
    expect_block += nb;
    expect_peak += ft.peak_count;
    expect_text += ft.text_length;
  }
  if (expect_posting != postings || expect_block != blocks || expect_peak != peaks ||
      expect_text != text || sum != total) {
    return Bad("the terms do not cover its arrays, or the lengths do not add up");
  }
  frozen_ = data;
  frozen_docs_ = docs_span;
  frozen_terms_ = terms_span;
  frozen_text_ = text_base;
  frozen_postings_ = postings_span;
  frozen_lens_ = lens_span;
  frozen_blocks_ = blocks_span;
  frozen_peaks_ = peaks_span;
  total_length_ = total;
  return Status::OK();
}

std::string_view Bm25Index::FrozenText(size_t i) const {
  return {frozen_text_ + frozen_terms_[i].text_offset, frozen_terms_[i].text_length};
}

PostingList Bm25Index::FrozenList(size_t i) const {
  const FrozenTerm& t = frozen_terms_[i];
  const size_t nb = (t.posting_count + PostingList::kBlockSize - 1) / PostingList::kBlockSize;
  return PostingList::View(frozen_postings_.subspan(t.first_posting, t.posting_count),
                           frozen_lens_.subspan(t.first_posting, t.posting_count),
                           frozen_blocks_.subspan(t.first_block, nb),
                           frozen_peaks_.subspan(t.first_peak, t.peak_count));
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

int64_t Bm25Index::FindFrozenHashed(std::string_view term, size_t hash) const {
  if (frozen_terms_.empty()) return -1;
  // Too many terms for the table's 32-bit slots.
  if (frozen_terms_.size() >= UINT32_MAX) return FindFrozen(term);
  if (!frozen_table_ready_.load(std::memory_order_acquire)) BuildFrozenTable();
  const uint64_t tag = uint64_t{hash} >> 32 << 32;
  const size_t mask = frozen_table_.size() - 1;
  for (size_t at = hash & mask;; at = (at + 1) & mask) {
    const uint64_t slot = frozen_table_[at];
    if (slot == 0) return -1;
    if ((slot & ~uint64_t{0xffffffff}) != tag) continue;
    const size_t i = (slot & 0xffffffff) - 1;
    if (FrozenText(i) == term) return static_cast<int64_t>(i);
  }
}

void Bm25Index::BuildFrozenTable() const {
  std::lock_guard<std::mutex> lock(views_mu_);
  if (frozen_table_ready_.load(std::memory_order_relaxed)) return;
  size_t size = 2;
  while (2 * size < 3 * frozen_terms_.size()) size *= 2;
  std::vector<uint64_t> table(size, 0);
  const size_t mask = size - 1;
  for (size_t i = 0; i < frozen_terms_.size(); i++) {
    const uint64_t hash = std::hash<std::string_view>{}(FrozenText(i));
    size_t at = hash & mask;
    while (table[at] != 0) at = (at + 1) & mask;
    table[at] = (hash >> 32 << 32) | (i + 1);
  }
  frozen_table_ = std::move(table);
  frozen_table_ready_.store(true, std::memory_order_release);
}

Status Bm25Index::Thaw() {
  if (!frozen_) return Status::OK();
  // Every document's terms, gathered from the lists (frozen ones not yet
  // moved, and the ordinary ones, which hold frozen postings once moved).
  std::map<uint64_t, std::vector<TermCount>> docs;
  for (uint64_t d : frozen_docs_) docs[d];
  for (const auto& [d, doc] : docs_) docs[d];
  for (size_t i = 0; i < frozen_terms_.size(); i++) {
    std::string_view text = FrozenText(i);
    if (term_ids_.count(text)) continue;
    PostingList list = FrozenList(i);
    for (const Posting& p : list.postings()) docs[p.doc_id].push_back({text, p.tf});
  }
  for (const Term& t : terms_) {
    for (const Posting& p : t.list.postings()) docs[p.doc_id].push_back({t.text, p.tf});
  }
  Bm25Index fresh(params_);
  for (const auto& [d, counts] : docs) {
    uint64_t len = 0;
    for (const TermCount& c : counts) len += c.tf;
    if (len > UINT32_MAX) return Status(kCorruptIndex, "bm25: a document is too long to thaw");
    AGENTMEM_RETURN_IF_ERROR(fresh.AddCounts(d, static_cast<uint32_t>(len), counts));
  }
  term_ids_ = std::move(fresh.term_ids_);
  terms_ = std::move(fresh.terms_);
  free_term_ids_ = std::move(fresh.free_term_ids_);
  docs_ = std::move(fresh.docs_);
  total_length_ = fresh.total_length_;
  frozen_ = nullptr;
  frozen_docs_ = {};
  frozen_terms_ = {};
  frozen_text_ = nullptr;
  frozen_postings_ = {};
  frozen_lens_ = {};
  frozen_blocks_ = {};
  frozen_peaks_ = {};
  superseded_ = 0;
  std::lock_guard<std::mutex> lock(views_mu_);
  frozen_views_.clear();
  frozen_table_.clear();
  frozen_table_ready_.store(false, std::memory_order_release);
  return Status::OK();
}

}  // namespace agentmem::index

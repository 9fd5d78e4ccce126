// index/text/term_parts.cc -- see term_parts.h.
#include "index/text/term_parts.h"

#include <algorithm>

#include "index/text/bm25.h"

namespace agentmem::index {

void Bm25TermParts::Attach(uint32_t part, Bm25Index* index) {
  index->term_parts_ = this;
  index->term_parts_part_ = part;
  for (uint32_t term_id : index->term_ids_) {
    Set(part, index->terms_[term_id].text, Bm25Index::kOrdinaryRef | term_id);
  }
  // Frozen terms that moved to the ordinary table are there already.
  for (size_t i = 0; i < index->frozen_terms_.size(); i++) {
    const std::string_view text = index->FrozenText(i);
    if (index->term_ids_.empty() || !index->term_ids_.count(text)) {
      Set(part, text, static_cast<uint32_t>(i));
    }
  }
}

std::span<const Bm25TermParts::Holder> Bm25TermParts::Find(std::string_view term) const {
  auto it = parts_.find(term);
  if (it == parts_.end()) return {};
  return it->second;
}

bool Bm25TermParts::Consistent(std::span<const Bm25Index* const> parts) const {
  size_t listed = 0;
  for (const auto& [text, holders] : parts_) {
    for (size_t i = 0; i < holders.size(); i++) {
      const Holder& h = holders[i];
      if (i > 0 && holders[i - 1].part >= h.part) return false;
      if (h.part >= parts.size() || parts[h.part] == nullptr) return false;
      const Bm25Index& index = *parts[h.part];
      if (index.term_parts_ != this || index.term_parts_part_ != h.part) return false;
      PostingList view;
      const PostingList* list = index.ListOfRef(h.ref, &view);
      const std::vector<Posting> want = index.Postings(text);
      if (list == nullptr || list->size() != want.size() || want.empty()) return false;
      for (size_t j = 0; j < want.size(); j++) {
        if (list->doc_id(j) != want[j].doc_id || list->tf(j) != want[j].tf) return false;
      }
      listed++;
    }
  }
  size_t held = 0;
  for (const Bm25Index* index : parts) {
    if (index != nullptr && index->term_parts_ == this) held += index->term_count();
  }
  return listed == held && listed == pairs_;
}

void Bm25TermParts::ShrinkToFit() {
  for (auto& [text, holders] : parts_) holders.shrink_to_fit();
}

size_t Bm25TermParts::MemoryBytes() const {
  // A node: the key, the vector, the cached hash and the next pointer; a
  // bucket pointer per term at load factor 1.
  size_t bytes = parts_.bucket_count() * sizeof(void*);
  for (const auto& [text, holders] : parts_) {
    bytes += sizeof(std::string) + sizeof(holders) + 2 * sizeof(void*);
    if (text.capacity() > 15) bytes += text.capacity() + 1;
    bytes += holders.capacity() * sizeof(Holder);
  }
  return bytes;
}

void Bm25TermParts::Set(uint32_t part, std::string_view term, uint32_t ref) {
  auto it = parts_.find(term);
  if (it == parts_.end()) it = parts_.emplace(std::string(term), std::vector<Holder>()).first;
  std::vector<Holder>& holders = it->second;
  // Parts are mostly attached and grown in increasing order: append.
  if (holders.empty() || holders.back().part < part) {
    holders.push_back({part, ref});
  } else {
    auto at = std::lower_bound(holders.begin(), holders.end(), part,
                               [](const Holder& h, uint32_t p) { return h.part < p; });
    if (at->part == part) {
      at->ref = ref;  // moved
      return;
    }
    holders.insert(at, {part, ref});
  }
  pairs_++;
}

void Bm25TermParts::Erase(uint32_t part, std::string_view term) {
  auto it = parts_.find(term);
  if (it == parts_.end()) return;
  std::vector<Holder>& holders = it->second;
  auto at = std::lower_bound(holders.begin(), holders.end(), part,
                             [](const Holder& h, uint32_t p) { return h.part < p; });
  if (at == holders.end() || at->part != part) return;
  holders.erase(at);
  pairs_--;
  if (holders.empty()) parts_.erase(it);
}

}  // namespace agentmem::index

// index/text/term_parts.cc -- see term_parts.h.
#include "index/text/term_parts.h"

#include <algorithm>

#include "index/text/bm25.h"

namespace agentmem::index {

void Bm25TermParts::Attach(uint32_t part, Bm25Index* index) {
  index->term_parts_ = this;
  index->term_parts_part_ = part;
  for (const auto& [text, term_id] : index->term_ids_) Insert(part, text);
  // Frozen terms that moved to the ordinary table were recorded just above.
  for (size_t i = 0; i < index->frozen_terms_.size(); i++) Insert(part, index->FrozenText(i));
}

std::span<const uint32_t> Bm25TermParts::Find(std::string_view term) const {
  auto it = parts_.find(term);
  if (it == parts_.end()) return {};
  return it->second;
}

size_t Bm25TermParts::MemoryBytes() const {
  // A node: the key, the vector, the cached hash and the next pointer; a
  // bucket pointer per term at load factor 1.
  size_t bytes = parts_.bucket_count() * sizeof(void*);
  for (const auto& [text, parts] : parts_) {
    bytes += sizeof(std::string) + sizeof(parts) + 2 * sizeof(void*);
    if (text.capacity() > 15) bytes += text.capacity() + 1;
    bytes += parts.capacity() * sizeof(uint32_t);
  }
  return bytes;
}

void Bm25TermParts::Insert(uint32_t part, std::string_view term) {
  auto it = parts_.find(term);
  if (it == parts_.end()) it = parts_.emplace(std::string(term), std::vector<uint32_t>()).first;
  std::vector<uint32_t>& parts = it->second;
  // Parts are mostly attached and grown in increasing order: append.
  if (parts.empty() || parts.back() < part) {
    parts.push_back(part);
  } else {
    auto at = std::lower_bound(parts.begin(), parts.end(), part);
    if (*at == part) return;
    parts.insert(at, part);
  }
  pairs_++;
}

void Bm25TermParts::Erase(uint32_t part, std::string_view term) {
  auto it = parts_.find(term);
  if (it == parts_.end()) return;
  std::vector<uint32_t>& parts = it->second;
  auto at = std::lower_bound(parts.begin(), parts.end(), part);
  if (at == parts.end() || *at != part) return;
  parts.erase(at);
  pairs_--;
  if (parts.empty()) parts_.erase(it);
}

}  // namespace agentmem::index

// engine/memory/id_table.h -- entries keyed by a 64-bit id (an episode id), in
// memory that follows the number of entries, never the size of an id.
//
// Ids a writer hands out run 1, 2, 3, ...; a file or an import may hold any
// id up to 2^64 - 1. The table keeps a dense array for ids 1..D, indexed by
// id - 1, and an ordered map for the ids above D. D only grows, and only to
// an id no larger than twice the number of entries plus kDenseSlack, so the
// array is never more than about half empty; when it grows, the map's
// entries it now covers move into it. Lookups of dense ids are one index.
//
// Thread safety: none; the owner serialises access.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

namespace agentmem::engine {

template <typename T>
class IdTable {
 public:
  static constexpr uint64_t kDenseSlack = 1024;

  // The entry of `id`, or nullptr when At(id) was never called.
  const T* Find(uint64_t id) const {
    if (id - 1 < dense_.size()) return made_[id - 1] ? &dense_[id - 1] : nullptr;
    if (sparse_.empty()) return nullptr;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  T* Find(uint64_t id) { return const_cast<T*>(static_cast<const IdTable*>(this)->Find(id)); }

  // The entry of `id` (not 0), made (value-initialised) if new.
  T& At(uint64_t id) {
    if (id != 0 && id - 1 >= dense_.size() && id <= 2 * (count_ + 1) + kDenseSlack) Grow(id);
    if (id - 1 < dense_.size()) {
      if (!made_[id - 1]) {
        made_[id - 1] = true;
        count_++;
        if (id > max_id_) max_id_ = id;
      }
      return dense_[id - 1];
    }
    auto [it, added] = sparse_.try_emplace(id);
    if (added) {
      count_++;
      if (id > max_id_) max_id_ = id;
    }
    return it->second;
  }

  // Room for n entries with ids 1..n, as far as the density rule allows.
  void Reserve(uint64_t n) {
    const uint64_t d = std::min<uint64_t>(n, 2 * (count_ + n) + kDenseSlack);
    dense_.reserve(d);
    made_.reserve(d);
  }

  uint64_t size() const { return count_; }  // entries made
  uint64_t max_id() const { return max_id_; }  // the largest id made; 0 when none

  // Calls f(id, entry) for every entry, ids increasing.
  template <typename F>
  void ForEach(F&& f) const {
    for (uint64_t i = 0; i < dense_.size(); i++) {
      if (made_[i]) f(i + 1, dense_[i]);
    }
    for (const auto& [id, entry] : sparse_) f(id, entry);
  }
  template <typename F>
  void ForEach(F&& f) {
    for (uint64_t i = 0; i < dense_.size(); i++) {
      if (made_[i]) f(i + 1, dense_[i]);
    }
    for (auto& [id, entry] : sparse_) f(id, entry);
  }

 private:
  void Grow(uint64_t id) {
    dense_.resize(id);
    made_.resize(id, false);
    while (!sparse_.empty() && sparse_.begin()->first <= id) {
      auto node = sparse_.extract(sparse_.begin());
      dense_[node.key() - 1] = std::move(node.mapped());
      made_[node.key() - 1] = true;
    }
  }

  std::vector<T> dense_;     // ids 1..dense_.size(), by id - 1
  std::vector<bool> made_;   // which of them are entries
  std::map<uint64_t, T> sparse_;  // ids above dense_.size()
  uint64_t count_ = 0;
  uint64_t max_id_ = 0;
};

}  // namespace agentmem::engine

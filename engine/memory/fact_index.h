// engine/memory/fact_index.h -- facts by subject, predicate and object, per user:
// the lookups behind single-valued predicates and fact queries,
// so that neither scans a user's facts. Derived, in memory: built from the
// fact records the first time a handle needs it, then kept current by every
// commit the handle applies.
//
// Thread safety: none; the owning Database serialises access.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "format/records.h"

namespace agentmem::engine {

class FactIndex {
 public:
  // Adds a fact, or replaces the entry of the same id (a new version).
  void Add(const format::FactRecord& f);
  void Remove(uint64_t id);
  // The ids of `user`'s facts matching every given field (null: any),
  // increasing. With no field given, all of the user's facts.
  std::vector<uint64_t> Find(const std::string& user, const std::string* subject,
                             const std::string* predicate, const std::string* object) const;
  size_t size() const { return keys_.size(); }

 private:
  struct Key {
    std::string user, subject, predicate, object;
  };
  using Lists = std::unordered_map<std::string, std::vector<uint64_t>>;
  struct UserFacts {
    Lists by_subject, by_predicate, by_object;
    std::vector<uint64_t> all;
  };
  static void Insert(std::vector<uint64_t>* ids, uint64_t id);
  static void Erase(Lists* lists, const std::string& key, uint64_t id);

  std::unordered_map<uint64_t, Key> keys_;
  std::unordered_map<std::string, UserFacts> users_;
};

}  // namespace agentmem::engine

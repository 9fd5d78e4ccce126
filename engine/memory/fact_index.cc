// engine/memory/fact_index.cc -- see fact_index.h.
#include "engine/memory/fact_index.h"

#include <algorithm>

namespace agentmem::engine {

void FactIndex::Insert(std::vector<uint64_t>* ids, uint64_t id) {
  if (ids->empty() || ids->back() < id) {
    ids->push_back(id);  // the usual case: ids arrive increasing
    return;
  }
  auto at = std::lower_bound(ids->begin(), ids->end(), id);
  if (at == ids->end() || *at != id) ids->insert(at, id);
}

void FactIndex::Erase(Lists* lists, const std::string& key, uint64_t id) {
  auto it = lists->find(key);
  if (it == lists->end()) return;
  auto& ids = it->second;
  auto at = std::lower_bound(ids.begin(), ids.end(), id);
  if (at != ids.end() && *at == id) ids.erase(at);
  if (ids.empty()) lists->erase(it);
}

void FactIndex::Add(const format::FactRecord& f) {
  if (keys_.count(f.id)) return;  // a new version: subject, predicate and object never change
  keys_.emplace(f.id, Key{f.user_id, f.subject, f.predicate, f.object});
  UserFacts& u = users_[f.user_id];
  Insert(&u.all, f.id);
  Insert(&u.by_subject[f.subject], f.id);
  Insert(&u.by_predicate[f.predicate], f.id);
  Insert(&u.by_object[f.object], f.id);
}

void FactIndex::Remove(uint64_t id) {
  auto it = keys_.find(id);
  if (it == keys_.end()) return;
  const Key& k = it->second;
  auto u = users_.find(k.user);
  if (u != users_.end()) {
    auto at = std::lower_bound(u->second.all.begin(), u->second.all.end(), id);
    if (at != u->second.all.end() && *at == id) u->second.all.erase(at);
    Erase(&u->second.by_subject, k.subject, id);
    Erase(&u->second.by_predicate, k.predicate, id);
    Erase(&u->second.by_object, k.object, id);
    if (u->second.all.empty()) users_.erase(u);
  }
  keys_.erase(it);
}

std::vector<uint64_t> FactIndex::Find(const std::string& user, const std::string* subject,
                                      const std::string* predicate,
                                      const std::string* object) const {
  auto u = users_.find(user);
  if (u == users_.end()) return {};
  // Start from the shortest list of the given fields, then check the rest.
  const std::vector<uint64_t>* best = &u->second.all;
  auto consider = [&](const Lists& lists, const std::string* key) {
    if (!key) return true;
    auto it = lists.find(*key);
    if (it == lists.end()) return false;
    if (it->second.size() < best->size()) best = &it->second;
    return true;
  };
  if (!consider(u->second.by_subject, subject) || !consider(u->second.by_predicate, predicate) ||
      !consider(u->second.by_object, object)) {
    return {};
  }
  std::vector<uint64_t> out;
  for (uint64_t id : *best) {
    const Key& k = keys_.at(id);
    if ((!subject || k.subject == *subject) && (!predicate || k.predicate == *predicate) &&
        (!object || k.object == *object)) {
      out.push_back(id);
    }
  }
  return out;
}

}  // namespace agentmem::engine

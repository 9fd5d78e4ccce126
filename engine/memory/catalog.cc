// engine/memory/catalog.cc -- see catalog.h.
#include "engine/memory/catalog.h"

#include <algorithm>

namespace agentmem::engine {

UserEntry* Catalog::UserFor(const std::string& user_id, uint32_t* index) {
  auto it = user_index_.find(user_id);
  if (it == user_index_.end()) {
    it = user_index_.emplace(user_id, static_cast<uint32_t>(users_.size())).first;
    users_.push_back(UserEntry{});
    users_.back().user_id = user_id;
  }
  if (index) *index = it->second;
  return &users_[it->second];
}

void Catalog::AddEpisode(const format::EpisodeRecord& r, RecordLoc loc) {
  AddEpisodeEntry(r.id, r.user_id, r.session_id, r.ts, loc);
  text_bytes_ += r.text.size();
}

void Catalog::AddEpisodeEntry(uint64_t id, const std::string& user_id,
                              const std::string& session_id, int64_t ts, RecordLoc loc) {
  const uint32_t user = UserIndex(user_id);
  AddEpisodeEntry(id, user, SessionIds(user, session_id), ts, loc);
}

uint32_t Catalog::UserIndex(const std::string& user_id) {
  uint32_t user = 0;
  UserFor(user_id, &user);
  return user;
}

std::vector<uint64_t>* Catalog::SessionIds(uint32_t user, const std::string& session_id) {
  auto& sessions = users_[user].sessions;
  auto it = sessions.find(session_id);
  if (it == sessions.end()) it = sessions.emplace(session_id, std::vector<uint64_t>{}).first;
  return &it->second;
}

void Catalog::AddEpisodeEntry(uint64_t id, uint32_t user, std::vector<uint64_t>* session_ids,
                              int64_t ts, RecordLoc loc) {
  episodes_.At(id) = EpisodeEntry{loc, user, ts, true, false};
  users_[user].episode_ids.push_back(id);
  session_ids->push_back(id);
  episode_count_++;
}

void Catalog::AddBlock(const format::BlockRecord& r, RecordLoc loc) {
  AddBlockEntry(r.user_id, r.name, r.version, loc);
}

void Catalog::AddBlockEntry(const std::string& user_id, const std::string& name,
                            uint64_t version, RecordLoc loc) {
  UserEntry* u = UserFor(user_id, nullptr);
  auto& versions = u->blocks[name];
  if (versions.empty()) block_count_++;
  versions.push_back(BlockVersion{loc, version});
  block_version_count_++;
}

void Catalog::AddFact(const format::FactRecord& r, RecordLoc loc) {
  AddFactEntry(r.id, r.user_id, loc);
}

void Catalog::AddFactEntry(uint64_t id, const std::string& user_id, RecordLoc loc) {
  auto [it, added] = facts_.insert_or_assign(id, loc);
  if (added) UserFor(user_id, nullptr)->fact_ids.push_back(id);
}

namespace {
// Removes the ids marked by `gone` from an increasing list.
template <typename Pred>
void EraseIds(std::vector<uint64_t>* ids, Pred gone) {
  ids->erase(std::remove_if(ids->begin(), ids->end(), gone), ids->end());
}
}  // namespace

void Catalog::ForgetEpisodes(const std::vector<uint64_t>& ids, uint64_t text_bytes) {
  std::vector<uint32_t> users;
  for (uint64_t id : ids) {
    EpisodeEntry* found = episodes_.Find(id);
    if (!found || !found->present) continue;
    EpisodeEntry& e = *found;
    e.present = false;
    e.forgotten = true;
    episode_count_--;
    if (std::find(users.begin(), users.end(), e.user) == users.end()) users.push_back(e.user);
  }
  auto gone = [this](uint64_t id) { return episodes_.Find(id)->forgotten; };
  for (uint32_t user : users) {
    UserEntry& u = users_[user];
    EraseIds(&u.episode_ids, gone);
    for (auto it = u.sessions.begin(); it != u.sessions.end();) {
      EraseIds(&it->second, gone);
      it = it->second.empty() ? u.sessions.erase(it) : std::next(it);
    }
  }
  text_bytes_ -= std::min(text_bytes_, text_bytes);
}

void Catalog::AddForgottenEntry(uint64_t id, uint32_t user, int64_t ts, RecordLoc loc) {
  episodes_.At(id) = EpisodeEntry{loc, user, ts, false, true};
}

void Catalog::ForgetFact(uint64_t id) {
  auto it = facts_.find(id);
  if (it == facts_.end()) return;
  facts_.erase(it);
  for (UserEntry& u : users_) {
    auto at = std::lower_bound(u.fact_ids.begin(), u.fact_ids.end(), id);
    if (at != u.fact_ids.end() && *at == id) {
      u.fact_ids.erase(at);
      return;
    }
  }
}

uint64_t Catalog::ForgetBlock(const std::string& user_id, const std::string& name) {
  auto u = user_index_.find(user_id);
  if (u == user_index_.end()) return 0;
  auto& blocks = users_[u->second].blocks;
  auto it = blocks.find(name);
  if (it == blocks.end()) return 0;
  uint64_t n = it->second.size();
  blocks.erase(it);
  block_count_--;
  block_version_count_ -= n;
  return n;
}

const EpisodeEntry* Catalog::FindEpisode(uint64_t id) const {
  const EpisodeEntry* e = episodes_.Find(id);
  return e && e->present ? e : nullptr;
}

const UserEntry* Catalog::FindUser(std::string_view user_id) const {
  auto it = user_index_.find(std::string(user_id));
  return it == user_index_.end() ? nullptr : &users_[it->second];
}

const RecordLoc* Catalog::FindFact(uint64_t id) const {
  auto it = facts_.find(id);
  return it == facts_.end() ? nullptr : &it->second;
}

const std::string* Catalog::Meta(const std::string& key) const {
  auto it = meta_.find(key);
  return it == meta_.end() ? nullptr : &it->second;
}

}  // namespace agentmem::engine

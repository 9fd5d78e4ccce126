// engine/catalog.cc -- see catalog.h.
#include "engine/catalog.h"

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
  uint32_t user = 0;
  UserEntry* u = UserFor(user_id, &user);
  if (episodes_.size() < id) episodes_.resize(id);
  episodes_[id - 1] = EpisodeEntry{loc, user, ts, true};
  u->episode_ids.push_back(id);
  u->sessions[session_id].push_back(id);
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
  UserEntry* u = UserFor(user_id, nullptr);
  u->fact_ids.push_back(id);
  facts_[id] = loc;
}

const EpisodeEntry* Catalog::FindEpisode(uint64_t id) const {
  if (id == 0 || id > episodes_.size() || !episodes_[id - 1].present) return nullptr;
  return &episodes_[id - 1];
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

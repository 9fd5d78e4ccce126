// engine/memory/catalog.h -- the in-memory map from keys to where records live in the
// file: episodes by id, per user (and per session), block versions by (user,
// name), facts by id and user, and the file's meta settings. Built by the
// recovery scan and extended by each commit; never holds record bodies.
//
// Thread safety: none; the owning Database serialises access.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/memory/id_table.h"
#include "engine/storage/pager.h"
#include "format/records.h"

namespace agentmem::engine {

struct EpisodeEntry {
  RecordLoc loc;
  uint32_t user = 0;  // index into Catalog::users()
  int64_t ts = 0;
  bool present = false;
  bool forgotten = false;  // was present; a forget record hid it (loc still points at it)
};

struct BlockVersion {
  RecordLoc loc;
  uint64_t version = 0;
};

struct UserEntry {
  std::string user_id;
  std::vector<uint64_t> episode_ids;                           // increasing
  std::map<std::string, std::vector<uint64_t>, std::less<>> sessions;  // session -> ids
  std::map<std::string, std::vector<BlockVersion>, std::less<>> blocks;  // name -> versions
  std::vector<uint64_t> fact_ids;                              // increasing
};

class Catalog {
 public:
  void AddEpisode(const format::EpisodeRecord& r, RecordLoc loc);
  void AddBlock(const format::BlockRecord& r, RecordLoc loc);
  // A fact record whose id is already known is a new version of that fact
  // (docs/format.md §5.3): it replaces the old one's location.
  void AddFact(const format::FactRecord& r, RecordLoc loc);
  void SetMeta(const std::string& key, const std::string& value) { meta_[key] = value; }
  // The same from a checkpoint's entries, which carry no record bodies.
  void AddEpisodeEntry(uint64_t id, const std::string& user_id, const std::string& session_id,
                       int64_t ts, RecordLoc loc);
  // A checkpoint's many entries, without a lookup per entry: the user's
  // index (created if new) and the id list of one of its sessions, resolved
  // once per name. The list stays valid until the next new user.
  uint32_t UserIndex(const std::string& user_id);
  std::vector<uint64_t>* SessionIds(uint32_t user, const std::string& session_id);
  void AddEpisodeEntry(uint64_t id, uint32_t user, std::vector<uint64_t>* session_ids, int64_t ts,
                       RecordLoc loc);
  void ReserveEpisodes(uint64_t n) { episodes_.Reserve(n); }
  void AddBlockEntry(const std::string& user_id, const std::string& name, uint64_t version,
                     RecordLoc loc);
  void AddFactEntry(uint64_t id, const std::string& user_id, RecordLoc loc);
  void set_text_bytes(uint64_t n) { text_bytes_ = n; }
  // ---- forgetting (docs/format.md §5.9): the entries leave every list;
  // a forgotten episode keeps its entry, marked, so that its graph node and
  // the facts that cite it can still be told apart from ids never used.
  // `text_bytes` is the forgotten episode's text length.
  void ForgetEpisodes(const std::vector<uint64_t>& ids, uint64_t text_bytes);
  // A forgotten episode from a checkpoint (in no list).
  void AddForgottenEntry(uint64_t id, uint32_t user, int64_t ts, RecordLoc loc);
  void ForgetFact(uint64_t id);
  // Returns the versions forgotten (0: no such block).
  uint64_t ForgetBlock(const std::string& user_id, const std::string& name);
  // Every episode entry (present or forgotten), by id.
  const IdTable<EpisodeEntry>& episodes() const { return episodes_; }
  // The entry of `id`, present or forgotten; nullptr for an id never used.
  const EpisodeEntry* FindEntry(uint64_t id) const { return episodes_.Find(id); }

  const EpisodeEntry* FindEpisode(uint64_t id) const;
  const UserEntry* FindUser(std::string_view user_id) const;
  const RecordLoc* FindFact(uint64_t id) const;
  const std::vector<UserEntry>& users() const { return users_; }
  const std::map<std::string, std::string>& meta() const { return meta_; }
  const std::string* Meta(const std::string& key) const;

  uint64_t episode_count() const { return episode_count_; }
  uint64_t fact_count() const { return facts_.size(); }
  uint64_t block_count() const { return block_count_; }
  uint64_t block_version_count() const { return block_version_count_; }
  uint64_t text_bytes() const { return text_bytes_; }

 private:
  UserEntry* UserFor(const std::string& user_id, uint32_t* index);

  IdTable<EpisodeEntry> episodes_;
  std::unordered_map<uint64_t, RecordLoc> facts_;
  std::vector<UserEntry> users_;
  std::unordered_map<std::string, uint32_t> user_index_;
  std::map<std::string, std::string> meta_;
  uint64_t episode_count_ = 0;
  uint64_t block_count_ = 0;
  uint64_t block_version_count_ = 0;
  uint64_t text_bytes_ = 0;
};

}  // namespace agentmem::engine

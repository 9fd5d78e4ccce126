// tests/util/oracle.cc -- see oracle.h.
#include "tests/util/oracle.h"

#include <algorithm>
#include <sstream>

namespace agentmem::test {

using format::BlockRecord;
using format::EpisodeRecord;
using format::FactRecord;

// ------------------------------------------------------------------ Oracle

EpisodeRecord Oracle::ExpectEpisode(EpisodeRecord r, int64_t now, const Txn& pending) const {
  r.id = next_episode_id_ + pending.episodes.size();
  r.created_at = now;
  if (r.ts == 0) r.ts = now;
  return r;
}

BlockRecord Oracle::ExpectBlock(BlockRecord r, int64_t now, const Txn& pending) const {
  r.version = next_block_version_ + pending.blocks.size();
  r.updated_at = now;
  return r;
}

FactRecord Oracle::ExpectFact(FactRecord r, int64_t now, const Txn& pending) const {
  r.id = next_fact_id_ + pending.facts.size();
  if (r.valid_from == 0) r.valid_from = now;
  if (r.valid_to == 0) r.valid_to = format::kForever;
  r.recorded_at = now;
  r.expired_at = format::kForever;
  return r;
}

void Oracle::Apply(const Txn& t) {
  if (t.empty()) return;
  commits_++;
  for (const EpisodeRecord& e : t.episodes) {
    episodes_[e.id] = e;
    users_.insert(e.user_id);
    next_episode_id_ = std::max(next_episode_id_, e.id + 1);
  }
  for (const BlockRecord& b : t.blocks) {
    blocks_[{b.user_id, b.name}].push_back(b);
    users_.insert(b.user_id);
    next_block_version_ = std::max(next_block_version_, b.version + 1);
  }
  for (const FactRecord& f : t.facts) {
    facts_[f.id] = f;
    users_.insert(f.user_id);
    next_fact_id_ = std::max(next_fact_id_, f.id + 1);
  }
  if (t.retention) retention_ = *t.retention;
  for (const format::ForgetRecord& f : t.forgets) Forget(f);
}

void Oracle::Forget(const format::ForgetRecord& f) {
  using format::ForgetKind;
  std::set<uint64_t> episodes, facts;
  std::vector<std::pair<std::string, std::string>> blocks;
  std::set<uint64_t> cited;  // retention with keep_cited
  if (f.kind == ForgetKind::kRetention && retention_.second) {
    for (const auto& [id, fact] : facts_) cited.insert(fact.source_episode_ids.begin(), fact.source_episode_ids.end());
  }
  for (const auto& [id, e] : episodes_) {
    bool mine = e.user_id == f.user_id;
    switch (f.kind) {
      case ForgetKind::kUser: if (mine) episodes.insert(id); break;
      case ForgetKind::kSession: if (mine && e.session_id == f.session_id) episodes.insert(id); break;
      case ForgetKind::kBefore: if (mine && e.ts < f.before) episodes.insert(id); break;
      case ForgetKind::kEpisode: if (id == f.id) episodes.insert(id); break;
      case ForgetKind::kRetention: if (e.ts < f.before && !cited.count(id)) episodes.insert(id); break;
      default: break;
    }
  }
  for (const auto& [id, fact] : facts_) {
    if ((f.kind == ForgetKind::kUser && fact.user_id == f.user_id) ||
        (f.kind == ForgetKind::kFact && id == f.id)) {
      facts.insert(id);
    }
  }
  for (const auto& [key, versions] : blocks_) {
    if ((f.kind == ForgetKind::kUser && key.first == f.user_id) ||
        (f.kind == ForgetKind::kBlock && key.first == f.user_id && key.second == f.name)) {
      blocks.push_back(key);
    }
  }
  std::set<std::string> users;  // whose facts may now cite only forgotten episodes
  for (uint64_t id : episodes) {
    users.insert(episodes_[id].user_id);
    episodes_.erase(id);
    forgotten_episodes_.insert(id);
  }
  // Facts go with their sources: every source gone (now or before, or never
  // written), at least one now. Never by retention.
  if (f.kind != ForgetKind::kRetention) {
    for (const auto& [id, fact] : facts_) {
      if (!users.count(fact.user_id) || fact.source_episode_ids.empty()) continue;
      bool all_gone = true, one_now = false;
      for (uint64_t e : fact.source_episode_ids) {
        all_gone &= episodes_.count(e) == 0;
        one_now |= episodes.count(e) > 0;
      }
      if (all_gone && one_now) facts.insert(id);
    }
  }
  for (uint64_t id : facts) facts_.erase(id);
  for (const auto& key : blocks) blocks_.erase(key);
  // A user with nothing left is no longer listed.
  users_.clear();
  for (const auto& [id, e] : episodes_) users_.insert(e.user_id);
  for (const auto& [key, v] : blocks_) users_.insert(key.first);
  for (const auto& [id, fact] : facts_) users_.insert(fact.user_id);
}

std::optional<format::ForgetRecord> Oracle::RetentionDue(int64_t now) const {
  if (retention_.first <= 0) return std::nullopt;
  format::ForgetRecord f;
  f.kind = format::ForgetKind::kRetention;
  f.before = now - retention_.first * 1000000;
  Oracle probe = *this;
  probe.Forget(f);
  if (probe.episodes_.size() == episodes_.size()) return std::nullopt;
  return f;
}

std::vector<BlockRecord> Oracle::CurrentBlocks() const {
  std::vector<BlockRecord> out;
  for (const auto& [key, v] : blocks_) out.push_back(v.back());
  return out;
}

const BlockRecord* Oracle::Block(const std::string& user, const std::string& name) const {
  auto it = blocks_.find({user, name});
  return it == blocks_.end() ? nullptr : &it->second.back();
}

namespace {

template <typename T>
std::string Num(T v) {
  return std::to_string(v);
}

std::string EpisodeFieldDiff(const EpisodeRecord& a, const EpisodeRecord& b) {
  std::string d;
  auto add = [&](bool differ, const char* name) {
    if (differ) d += std::string(d.empty() ? "" : ",") + name;
  };
  add(a.id != b.id, "id");
  add(a.user_id != b.user_id, "user_id");
  add(a.session_id != b.session_id, "session_id");
  add(a.role != b.role, "role");
  add(a.text != b.text, "text");
  add(a.ts != b.ts, "ts");
  add(a.created_at != b.created_at, "created_at");
  add(a.metadata != b.metadata, "metadata");
  add(a.vector != b.vector, "vector");
  return d;
}

}  // namespace

std::string Oracle::Diff(engine::Database* db) const {
  std::ostringstream why;
  engine::Stats st;
  Status s = db->GetStats(&st);
  if (!s.ok()) return "GetStats failed: " + s.ToString();
  uint64_t versions = 0;
  for (const auto& [key, v] : blocks_) versions += v.size();
  auto count = [&](const char* what, uint64_t got, uint64_t want) {
    if (got != want && why.tellp() == 0) {
      why << "stats." << what << " is " << got << ", the model has " << want;
    }
  };
  count("episodes", st.episodes, episodes_.size());
  count("facts", st.facts, facts_.size());
  count("blocks", st.blocks, blocks_.size());
  count("block_versions", st.block_versions, versions);
  count("users", st.users, users_.size());
  int64_t max_age_s = 0;
  bool keep_cited = false;
  db->Retention(&max_age_s, &keep_cited);
  if (std::make_pair(max_age_s, keep_cited) != retention_ && why.tellp() == 0) {
    why << "the retention policy is (" << max_age_s << " s, keep_cited " << keep_cited
        << "), the model has (" << retention_.first << " s, " << retention_.second << ")";
  }
  // A commit that carries no records changes nothing a reader can see, and an
  // engine may write one (say, to mark bytes synced at close); every record is
  // checked above and below. So: at least the model's commits.
  if (st.commits < commits_ && why.tellp() == 0) {
    why << "stats.commits is " << st.commits << ", the model has " << commits_;
  }
  if (why.tellp() != 0) return why.str();

  for (const std::string& user : users_) {
    std::vector<uint64_t> want, got;
    std::map<std::string, std::vector<uint64_t>> sessions;
    for (const auto& [id, e] : episodes_) {
      if (e.user_id != user) continue;
      want.push_back(id);
      sessions[e.session_id].push_back(id);
    }
    s = db->ListEpisodeIds(user, nullptr, &got);
    if (!s.ok()) return "ListEpisodeIds failed: " + s.ToString();
    if (got != want) {
      return "user " + user + ": ListEpisodeIds returns " + Num(got.size()) +
             " ids, the model has " + Num(want.size());
    }
    for (const auto& [session, ids] : sessions) {
      s = db->ListEpisodeIds(user, &session, &got);
      if (!s.ok()) return "ListEpisodeIds(session) failed: " + s.ToString();
      if (got != ids) return "user " + user + " session " + session + ": episode ids differ";
    }
    std::vector<BlockRecord> blocks;
    s = db->ListBlocks(user, &blocks);
    if (!s.ok()) return "ListBlocks failed: " + s.ToString();
    std::vector<BlockRecord> want_blocks;
    for (const auto& [key, v] : blocks_)
      if (key.first == user) want_blocks.push_back(v.back());
    if (blocks != want_blocks) {
      return "user " + user + ": ListBlocks returns " + Num(blocks.size()) + " blocks" +
             (blocks.empty() ? "" : " (first " + Describe(blocks[0]) + ")") + ", the model has " +
             Num(want_blocks.size()) +
             (want_blocks.empty() ? "" : " (first " + Describe(want_blocks[0]) + ")");
    }
    for (const BlockRecord& b : want_blocks) {
      BlockRecord got_block;
      s = db->GetBlock(user, b.name, &got_block);
      if (!s.ok()) return "GetBlock failed: " + s.ToString();
      if (!(got_block == b))
        return "GetBlock: got " + Describe(got_block) + ", want " + Describe(b);
    }
    std::vector<FactRecord> facts, want_facts;
    for (const auto& [id, f] : facts_) {
      if (f.user_id != user) continue;
      // A read reports only the sources still remembered (docs/lifecycle.md).
      FactRecord shown = f;
      auto& src = shown.source_episode_ids;
      src.erase(std::remove_if(src.begin(), src.end(),
                               [&](uint64_t e) {
                                 return e < next_episode_id_ && !episodes_.count(e);
                               }),
                src.end());
      want_facts.push_back(std::move(shown));
    }
    s = db->ListFacts(user, nullptr, nullptr, &facts);
    if (!s.ok()) return "ListFacts failed: " + s.ToString();
    if (facts.size() != want_facts.size()) {
      return "user " + user + ": ListFacts returns " + Num(facts.size()) +
             " facts, the model has " + Num(want_facts.size());
    }
    for (size_t i = 0; i < facts.size(); i++) {
      if (!(facts[i] == want_facts[i])) {
        return "fact: got " + Describe(facts[i]) + ", want " + Describe(want_facts[i]);
      }
    }
  }
  for (const auto& [id, e] : episodes_) {
    EpisodeRecord got;
    s = db->GetEpisode(id, &got);
    if (!s.ok()) return "GetEpisode(" + Num(id) + ") failed: " + s.ToString();
    if (!(got == e)) {
      return "episode " + Num(id) + " differs in " + EpisodeFieldDiff(got, e) + ": got " +
             Describe(got) + ", want " + Describe(e);
    }
  }
  for (uint64_t id : forgotten_episodes_) {
    EpisodeRecord got;
    s = db->GetEpisode(id, &got);
    if (s.ok()) return "episode " + Num(id) + " was forgotten but reads back: " + Describe(got);
    if (s.code() != kNotFound) return "GetEpisode(forgotten " + Num(id) + ") failed: " + s.ToString();
  }
  EpisodeRecord extra;
  s = db->GetEpisode(next_episode_id_, &extra);
  if (s.ok())
    return "episode " + Num(next_episode_id_) + " exists but the model has no such episode";
  if (s.code() != kNotFound) return "GetEpisode(next id) failed: " + s.ToString();
  return "";
}

bool MatchesAckedOrOneInDoubt(engine::Database* db, const Oracle& acked,
                              const std::vector<Txn>& in_doubt, std::string* why, int* which) {
  if (which) *which = -1;
  std::string d = acked.Diff(db);
  if (d.empty()) return true;
  std::string all = "acked state: " + d;
  for (size_t i = 0; i < in_doubt.size(); i++) {
    std::string di = acked.With(in_doubt[i]).Diff(db);
    if (di.empty()) {
      if (which) *which = static_cast<int>(i);
      return true;
    }
    all += "; acked + in-doubt #" + Num(i) + ": " + di;
  }
  *why = all;
  return false;
}

// ------------------------------------------------------------------ Driver

void Driver::Acked(const Txn& t, bool compacted) {
  if (t.empty()) return;
  // An in-doubt write that took ids cannot have been written: the acked one
  // would own its ids. An in-doubt forget or retention policy can have been
  // (a PURGE whose forget committed before its VACUUM failed): it counts if
  // the handle, which read the acked commit back, shows it. After a
  // compaction the file holds as few commits as one, whatever came before.
  // The handle may show the retention forget that its policy commits after
  // `t` (AfterCommit) on top: a state matches with or without it.
  auto shows = [&](Oracle m) {
    if (compacted) m.Compacted();
    if (Compare(m).empty()) return true;
    if (compacted) return false;
    std::optional<format::ForgetRecord> r = m.RetentionDue(clock_->now);
    if (!r) return false;
    Txn retention;
    retention.forgets.push_back(*r);
    return Compare(m.With(retention)).empty();
  };
  for (const Txn& d : in_doubt_) {
    if (!d.episodes.empty() || !d.blocks.empty() || !d.facts.empty()) continue;
    if (shows(acked_.With(d).With(t)) && !shows(acked_.With(t))) {
      acked_.Apply(d);
      break;
    }
  }
  acked_.Apply(t);
  in_doubt_.clear();
}

std::string Driver::Compare(const Oracle& model) {
  if (faults_) faults_->set_paused(true);
  std::string diff = model.Diff(db_);
  if (faults_) faults_->set_paused(false);
  return diff;
}

void Driver::AfterCommit() {
  std::optional<format::ForgetRecord> r = acked_.RetentionDue(clock_->now);
  if (!r) return;
  Txn t;
  t.forgets.push_back(*r);
  if (db_->write_failed()) {
    // Its commit (or the checkpoint after it) failed: the handle may show
    // bytes that were never synced.
    in_doubt_.push_back(std::move(t));
    failed_ = true;  // the handle is sticky: its close does no more
    return;
  }
  Oracle with = acked_.With(t);
  if (Compare(with).empty()) acked_ = std::move(with);
}

template <typename Rec, typename Call>
Status Driver::Write(Rec expected, std::vector<Rec> Txn::*list, Call call) {
  Status s = call();
  failed_ |= !s.ok();
  if (in_txn_) {
    if (s.ok()) (pending_.*list).push_back(std::move(expected));
    return s;
  }
  Txn t;
  (t.*list).push_back(std::move(expected));
  if (s.ok()) {
    Acked(t);
    AfterCommit();
  } else {
    in_doubt_.push_back(std::move(t));
  }
  return s;
}

Status Driver::Remember(EpisodeRecord r) {
  static const Txn kNone;
  int64_t now = clock_->Tick();
  EpisodeRecord e = acked_.ExpectEpisode(r, now, in_txn_ ? pending_ : kNone);
  return Write(e, &Txn::episodes, [&] {
    uint64_t id = 0;
    Status s = db_->Remember(std::move(r), &id);
    if (s.ok() && id != e.id) {
      errors_.push_back("Remember returned id " + Num(id) + ", the model predicted " + Num(e.id));
    }
    return s;
  });
}

Status Driver::SetBlock(BlockRecord r) {
  static const Txn kNone;
  int64_t now = clock_->Tick();
  BlockRecord e = acked_.ExpectBlock(r, now, in_txn_ ? pending_ : kNone);
  return Write(e, &Txn::blocks, [&] { return db_->SetBlock(std::move(r)); });
}

Status Driver::AssertFact(FactRecord r) {
  static const Txn kNone;
  int64_t now = clock_->Tick();
  FactRecord e = acked_.ExpectFact(r, now, in_txn_ ? pending_ : kNone);
  return Write(e, &Txn::facts, [&] {
    uint64_t id = 0;
    Status s = db_->AssertFact(std::move(r), &id);
    if (s.ok() && id != e.id) {
      errors_.push_back("AssertFact returned id " + Num(id) + ", the model predicted " + Num(e.id));
    }
    return s;
  });
}

Status Driver::Begin() {
  Status s = db_->Begin();
  failed_ |= !s.ok();
  if (s.ok()) {
    in_txn_ = true;
    pending_ = Txn{};
  }
  return s;
}

Status Driver::Commit() {
  Status s = db_->Commit();
  failed_ |= !s.ok();
  if (!in_txn_) return s;
  in_txn_ = false;
  Txn t = std::move(pending_);
  pending_ = Txn{};
  if (s.ok()) {
    Acked(t);
    AfterCommit();
  } else if (!t.empty()) {
    in_doubt_.push_back(std::move(t));
  }
  return s;
}

Status Driver::Rollback() {
  Status s = db_->Rollback();
  failed_ |= !s.ok();
  in_txn_ = false;
  pending_ = Txn{};
  return s;
}

Status Driver::Forget(const format::ForgetRecord& f) {
  if (in_txn_) {
    Status s = db_->Forget(f, nullptr);
    failed_ |= !s.ok();
    if (s.ok()) pending_.forgets.push_back(f);
    return s;
  }
  Txn t;
  t.forgets.push_back(f);
  return Autocommitted(std::move(t), db_->Forget(f, nullptr));
}

Status Driver::Autocommitted(Txn t, Status s) {
  failed_ |= !s.ok();
  if (s.ok()) {
    Acked(t);
    AfterCommit();
  } else {
    in_doubt_.push_back(std::move(t));
  }
  return s;
}

Status Driver::Compacting(const std::vector<Txn>& outcomes, const std::function<Status()>& call) {
  Status s = call();
  failed_ |= !s.ok();
  acked_.Compacted();
  if (s.ok()) {
    Acked(outcomes.back(), /*compacted=*/true);
    // The outcome's commits came before the copy, which holds as few
    // commits as its records need: as few as one.
    acked_.Compacted();
  } else {
    for (const Txn& t : outcomes)
      if (!t.empty()) in_doubt_.push_back(t);
  }
  return s;
}

Status Driver::Purge(const format::ForgetRecord& f, engine::ForgetReceipt* receipt) {
  // The forget commits first, then the VACUUM applies retention: a failed
  // PURGE may leave neither, the forget, or both.
  Txn forget;
  forget.forgets.push_back(f);
  Txn both = forget;
  if (auto r = acked_.With(forget).RetentionDue(clock_->now)) both.forgets.push_back(*r);
  return Compacting({forget, both}, [&] { return db_->Purge(f, receipt); });
}

Status Driver::Vacuum() {
  Txn t;
  if (auto r = acked_.RetentionDue(clock_->now)) t.forgets.push_back(*r);
  return Compacting({t}, [&] { return db_->Vacuum({}, nullptr); });
}

Status Driver::SetRetention(int64_t max_age_s, bool keep_cited) {
  Txn t;
  t.retention = std::make_pair(max_age_s, keep_cited);
  return Autocommitted(std::move(t), db_->SetRetention(max_age_s, keep_cited));
}

Status Driver::Close() {
  in_txn_ = false;
  pending_ = Txn{};
  Txn t;
  if (db_->options().sync != engine::SyncMode::kOff) {
    if (auto r = acked_.RetentionDue(clock_->now)) t.forgets.push_back(*r);
  }
  if (!failed_) return Compacting({t}, [&] { return db_->Close(); });
  Status s = db_->Close();
  acked_.Compacted();
  if (!t.empty()) in_doubt_.push_back(t);
  return s;
}

// ------------------------------------------------------------------ generators

namespace {

const char* const kWords[] = {"memory", "agent",   "recall", "note",    "tea",   "café",
                              "plan",   "meeting", "paris",  "résumé",  "☕",     "deadline",
                              "graph",  "vector",  "user",   "prefers", "green", "Tuesday"};

}  // namespace

std::string RandomWords(std::mt19937_64& rng, int n) {
  std::string s;
  for (int i = 0; i < n; i++) {
    if (i) s += ' ';
    s += kWords[rng() % std::size(kWords)];
  }
  return s;
}

EpisodeRecord RandomEpisode(std::mt19937_64& rng, uint32_t dim, uint64_t n) {
  EpisodeRecord r;
  r.user_id = "u" + Num(rng() % 3);
  r.session_id = "s" + Num(rng() % 4);
  static const char* const kRoles[] = {"user", "assistant", "tool"};
  r.role = kRoles[rng() % 3];
  r.text = "episode " + Num(n) + ": " + RandomWords(rng, 3 + static_cast<int>(rng() % 30));
  if (rng() % 8 == 0) {
    // Long and repetitive: fills most of a page and compresses.
    std::string phrase = " the agent recalled the user's " + RandomWords(rng, 3) + ".";
    while (r.text.size() < 2500 + rng() % 1500) r.text += phrase;
  }
  r.ts = 1'600'000'000'000'000 + static_cast<int64_t>(n) * 1000;
  if (rng() % 2) r.metadata = "{\"n\":" + Num(n) + ",\"tag\":\"" + RandomWords(rng, 1) + "\"}";
  if (rng() % 3 != 0) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    r.vector.resize(dim);
    for (float& f : r.vector) f = u(rng);
  }
  return r;
}

BlockRecord RandomBlock(std::mt19937_64& rng, uint64_t n) {
  BlockRecord r;
  r.user_id = "u" + Num(rng() % 3);
  static const char* const kNames[] = {"persona", "goals", "scratch"};
  r.name = kNames[rng() % 3];
  r.value = "block version " + Num(n) + ": " + RandomWords(rng, 2 + static_cast<int>(rng() % 12));
  r.limit = rng() % 2 ? 0 : 1000;
  r.pinned_order = static_cast<int32_t>(rng() % 4) - 1;
  return r;
}

FactRecord RandomFact(std::mt19937_64& rng, uint64_t n) {
  FactRecord r;
  r.user_id = "u" + Num(rng() % 3);
  static const char* const kSubjects[] = {"user", "alice", "project-x"};
  static const char* const kPredicates[] = {"likes", "works_at", "deadline"};
  r.subject = kSubjects[rng() % 3];
  r.predicate = kPredicates[rng() % 3];
  r.object = "object " + Num(n) + " " + RandomWords(rng, 2);
  r.confidence = static_cast<float>(rng() % 101) / 100.0f;
  r.source_episode_ids = {n, n + 7};
  r.valid_from = 1'600'000'000'000'000 + static_cast<int64_t>(n);
  if (rng() % 2) r.valid_to = r.valid_from + 86'400'000'000;
  return r;
}

std::string Describe(const EpisodeRecord& r) {
  std::ostringstream o;
  o << "episode{id " << r.id << ", " << r.user_id << "/" << r.session_id << "/" << r.role
    << ", text " << r.text.size() << "B \"" << r.text.substr(0, 24) << "\", ts " << r.ts
    << ", created " << r.created_at << ", meta " << r.metadata.size() << "B, vector "
    << r.vector.size() << "}";
  return o.str();
}

std::string Describe(const BlockRecord& r) {
  std::ostringstream o;
  o << "block{v" << r.version << ", " << r.user_id << "/" << r.name << " = \""
    << r.value.substr(0, 24) << "\", limit " << r.limit << ", pinned " << r.pinned_order
    << ", updated " << r.updated_at << "}";
  return o.str();
}

std::string Describe(const FactRecord& r) {
  std::ostringstream o;
  o << "fact{id " << r.id << ", " << r.user_id << ": " << r.subject << " " << r.predicate << " "
    << r.object << ", conf " << r.confidence << ", valid [" << r.valid_from << ", " << r.valid_to
    << "), recorded " << r.recorded_at << "}";
  return o.str();
}

}  // namespace agentmem::test

// engine/memory/lifecycle.cc -- forgetting, fact queries on two time axes, and
// compaction (VACUUM, PURGE) of a Database (docs/lifecycle.md).
//
// Forgetting is a record (format/records.h, ForgetRecord) committed like any
// other: every handle applies it when it reads the commit, so what it names is
// invisible everywhere from that commit on. The bytes stay in the file until
// VACUUM writes the live records into a new file and renames it over the old
// one; PURGE is a forget followed by a VACUUM and a scan of the new file for
// the forgotten texts and vectors.
#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "engine/memory/database.h"
#include "engine/memory/task_thread.h"
#include "engine/storage/pager.h"
#include "engine/storage/scan.h"
#include "engine/memory/validate.h"
#include "format/page.h"

namespace agentmem::engine {

using format::EpisodeRecord;
using format::FactRecord;
using format::ForgetKind;
using format::ForgetRecord;

// What one forget record names, before the facts that cite only forgotten
// episodes are added.
struct Selection {
  std::vector<uint64_t> episodes;
  std::vector<uint64_t> facts;
  std::vector<std::pair<std::string, std::string>> blocks;  // (user, name)
};

// ------------------------------------------------------------------ forget

static void Select(const Catalog& catalog, const ForgetRecord& f, Selection* out) {
  const UserEntry* u = catalog.FindUser(f.user_id);
  switch (f.kind) {
    case ForgetKind::kUser:
      if (!u) return;
      out->episodes = u->episode_ids;
      out->facts = u->fact_ids;
      for (const auto& [name, versions] : u->blocks) out->blocks.emplace_back(f.user_id, name);
      return;
    case ForgetKind::kSession:
      if (!u) return;
      if (auto it = u->sessions.find(f.session_id); it != u->sessions.end()) out->episodes = it->second;
      return;
    case ForgetKind::kBefore:
      if (!u) return;
      for (uint64_t id : u->episode_ids) {
        if (catalog.FindEpisode(id)->ts < f.before) out->episodes.push_back(id);
      }
      return;
    case ForgetKind::kEpisode:
      if (catalog.FindEpisode(f.id)) out->episodes.push_back(f.id);
      return;
    case ForgetKind::kFact:
      if (catalog.FindFact(f.id)) out->facts.push_back(f.id);
      return;
    case ForgetKind::kBlock:
      if (u && u->blocks.count(f.name)) out->blocks.emplace_back(f.user_id, f.name);
      return;
    case ForgetKind::kRetention:
      for (const UserEntry& user : catalog.users()) {
        for (uint64_t id : user.episode_ids) {
          if (catalog.FindEpisode(id)->ts < f.before) out->episodes.push_back(id);
        }
      }
      std::sort(out->episodes.begin(), out->episodes.end());
      return;
  }
}

// Retention keeps the episodes a live fact cites, when the file says so.
Status Database::KeepCited(Selection* sel) {
  const std::string* keep = catalog_.Meta("retention.episodes.keep_cited");
  if (sel->episodes.empty() || !keep || *keep != "1") return Status::OK();
  std::unordered_set<uint64_t> cited;
  for (const UserEntry& u : catalog_.users()) {
    for (uint64_t id : u.fact_ids) {
      FactRecord fact;
      AGENTMEM_RETURN_IF_ERROR(ReadFact(*catalog_.FindFact(id), &fact));
      cited.insert(fact.source_episode_ids.begin(), fact.source_episode_ids.end());
    }
  }
  auto& e = sel->episodes;
  e.erase(std::remove_if(e.begin(), e.end(), [&](uint64_t id) { return cited.count(id) > 0; }),
          e.end());
  return Status::OK();
}

// Whether `f` names the pending episode `r`: a transaction's forgets apply
// after its episodes (as when it is read back), so they may name its own.
static bool SelectsPending(const ForgetRecord& f, const EpisodeRecord& r) {
  switch (f.kind) {
    case ForgetKind::kUser: return r.user_id == f.user_id;
    case ForgetKind::kSession: return r.user_id == f.user_id && r.session_id == f.session_id;
    case ForgetKind::kBefore: return r.user_id == f.user_id && r.ts < f.before;
    case ForgetKind::kEpisode: return r.id == f.id;
    case ForgetKind::kRetention: return r.ts < f.before;
    case ForgetKind::kFact:
    case ForgetKind::kBlock: return false;
  }
  return false;
}

Status Database::PendingForgottenEpisodes(std::vector<uint64_t>* ids) {
  ids->clear();
  for (const ForgetRecord& f : pending_forgets_) {
    Selection sel;
    Select(catalog_, f, &sel);
    for (const EpisodeRecord& r : pending_episodes_) {
      if (SelectsPending(f, r)) sel.episodes.push_back(r.id);
    }
    if (f.kind == ForgetKind::kRetention) AGENTMEM_RETURN_IF_ERROR(KeepCited(&sel));
    ids->insert(ids->end(), sel.episodes.begin(), sel.episodes.end());
  }
  std::sort(ids->begin(), ids->end());
  ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  return Status::OK();
}

Status Database::ApplyForget(const ForgetRecord& f) {
  Selection sel;
  Select(catalog_, f, &sel);
  if (f.kind == ForgetKind::kRetention) AGENTMEM_RETURN_IF_ERROR(KeepCited(&sel));
  if (collect_forgotten_) AGENTMEM_RETURN_IF_ERROR(AddNeedles(sel, &forgotten_needles_));
  // Text bytes leave the statistics with their episodes.
  uint64_t text_bytes = 0;
  std::vector<uint32_t> users;  // whose facts may now cite only forgotten episodes
  for (uint64_t id : sel.episodes) {
    EpisodeRecord r;
    AGENTMEM_RETURN_IF_ERROR(GetEpisodeNoRefresh(id, &r));
    text_bytes += r.text.size();
    uint32_t user = catalog_.FindEpisode(id)->user;
    if (std::find(users.begin(), users.end(), user) == users.end()) users.push_back(user);
  }
  catalog_.ForgetEpisodes(sel.episodes, text_bytes);
  AGENTMEM_RETURN_IF_ERROR(EnsureRecallIndex());
  AGENTMEM_RETURN_IF_ERROR(recall_->Forget(sel.episodes));
  // Facts go with their sources -- but never by retention: facts do not expire.
  if (!sel.episodes.empty() && f.kind != ForgetKind::kRetention) {
    std::unordered_set<uint64_t> chosen(sel.facts.begin(), sel.facts.end());
    for (uint32_t user : users) {
      for (uint64_t id : catalog_.users()[user].fact_ids) {
        if (chosen.count(id)) continue;
        FactRecord fact;
        AGENTMEM_RETURN_IF_ERROR(ReadFact(*catalog_.FindFact(id), &fact));
        // Every source gone (forgotten now or before), one of them now.
        bool all_gone = !fact.source_episode_ids.empty(), one_now = false;
        for (uint64_t e : fact.source_episode_ids) {
          all_gone &= catalog_.FindEpisode(e) == nullptr;
          one_now |= std::binary_search(sel.episodes.begin(), sel.episodes.end(), e);
        }
        if (all_gone && one_now) sel.facts.push_back(id);
      }
    }
  }
  for (uint64_t id : sel.facts) {
    catalog_.ForgetFact(id);
    if (fact_index_) fact_index_->Remove(id);
  }
  uint64_t versions = 0;
  for (const auto& [user, name] : sel.blocks) versions += catalog_.ForgetBlock(user, name);
  forget_counts_.episodes += sel.episodes.size();
  forget_counts_.facts += sel.facts.size();
  forget_counts_.block_versions += versions;
  return Status::OK();
}

Status Database::Forget(const ForgetRecord& f, ForgetReceipt* receipt) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(f.user_id, "user_id"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(f.session_id, "session_id"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(f.name, "block name"));
  const bool by_id = f.kind == ForgetKind::kEpisode || f.kind == ForgetKind::kFact;
  if (by_id && f.id == 0) return Status(kMisuse, "forget by id needs an id");
  // The decoder refuses such a record (format.md §5.9): committed, it would
  // make the file unreadable.
  if (!by_id && f.id != 0) return Status(kMisuse, "only a forget of an episode or a fact takes an id");
  if (f.kind == ForgetKind::kBlock && f.name.empty()) return Status(kMisuse, "forget block needs a name");
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  forget_counts_ = ForgetReceipt{};
  pending_forgets_.push_back(f);
  Status s = FinishWrite(Status::OK());
  if (s.ok() && receipt) *receipt = forget_counts_;
  return s;
}

// ------------------------------------------------------------------ retention

Status Database::SetRetention(int64_t max_age_s, bool keep_cited) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  if (max_age_s < 0) return Status(kRange, "retention max_age must be >= 0 seconds (0 = keep forever)");
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  pending_meta_.entries.emplace_back("retention.episodes.max_age_s", std::to_string(max_age_s));
  pending_meta_.entries.emplace_back("retention.episodes.keep_cited", keep_cited ? "1" : "0");
  return FinishWrite(Status::OK());
}

void Database::Retention(int64_t* max_age_s, bool* keep_cited) const {
  *max_age_s = 0;
  *keep_cited = false;
  // The open transaction's setting, else the file's.
  auto meta = [this](const std::string& key) -> const std::string* {
    for (auto it = pending_meta_.entries.rbegin(); it != pending_meta_.entries.rend(); ++it) {
      if (it->first == key) return &it->second;
    }
    return catalog_.Meta(key);
  };
  if (const std::string* v = meta("retention.episodes.max_age_s")) {
    *max_age_s = std::strtoll(v->c_str(), nullptr, 10);
  }
  if (const std::string* v = meta("retention.episodes.keep_cited")) *keep_cited = *v == "1";
}

// Commits one retention forget when an episode is older than the policy
// allows. Takes the write lock if it is free (a close never waits for it).
// REQUIRES: no pending writes.
Status Database::ApplyRetention() {
  int64_t max_age_s = 0;
  bool keep_cited = false;
  Retention(&max_age_s, &keep_cited);
  if (max_age_s <= 0) return Status::OK();
  ForgetRecord f;
  f.kind = ForgetKind::kRetention;
  f.before = SaturatingAdd(Now(), -max_age_s);
  Selection sel;
  Select(catalog_, f, &sel);
  AGENTMEM_RETURN_IF_ERROR(KeepCited(&sel));
  if (sel.episodes.empty()) {
    NoteRetentionDue(f.before, max_age_s);
    return Status::OK();
  }
  bool locked = false;
  AGENTMEM_RETURN_IF_ERROR(TryLockNoWait(&locked));
  if (!locked) return Status::OK();  // another handle writes; it applies the policy
  // The state may have moved on while the lock was free: decide again.
  sel = Selection{};
  Select(catalog_, f, &sel);
  AGENTMEM_RETURN_IF_ERROR(KeepCited(&sel));
  if (sel.episodes.empty()) {
    NoteRetentionDue(f.before, max_age_s);
    return Status::OK();
  }
  pending_forgets_.push_back(f);
  Status s = CommitPending();
  ClearPending();
  if (s.ok()) NoteRetentionDue(f.before, max_age_s);
  return s;
}

// Every episode with an event time before `before` is forgotten, or kept
// because a fact cites it: the policy is next due when the oldest of the
// others expires.
void Database::NoteRetentionDue(int64_t before, int64_t max_age_s) {
  int64_t oldest = INT64_MAX;
  for (const UserEntry& user : catalog_.users()) {
    for (uint64_t id : user.episode_ids) {
      const int64_t ts = catalog_.FindEpisode(id)->ts;
      if (ts >= before) oldest = std::min(oldest, ts);
    }
  }
  retention_due_ = oldest == INT64_MAX ? INT64_MAX : SaturatingAdd(oldest, max_age_s);
  // At most one pass a minute (or per max_age, when shorter) for what ages
  // out of the snapshot: a steady stream of episodes is not rescanned at
  // every commit. Episodes committed with an older event time bring the
  // next pass forward (ApplyScanned).
  retention_due_ = std::max(retention_due_, SaturatingAdd(Now(), std::min<int64_t>(max_age_s, 60)));
  retention_due_age_s_ = max_age_s;
  bool keep_cited = false;
  int64_t age = 0;
  Retention(&age, &keep_cited);
  retention_due_keep_ = keep_cited;
}

void Database::RetentionAfterCommit() {
  if (!write_locked() || explicit_txn_) return;
  int64_t max_age_s = 0;
  bool keep_cited = false;
  Retention(&max_age_s, &keep_cited);
  if (max_age_s <= 0) return;
  if (retention_due_ != INT64_MIN && max_age_s == retention_due_age_s_ &&
      keep_cited == retention_due_keep_ && Now() < retention_due_) {
    return;
  }
  // The caller's receipt holds what its own forget did.
  const ForgetReceipt counts = forget_counts_;
  ApplyRetention().IgnoreError();  // a failed write is sticky; nothing else is lost
  forget_counts_ = counts;
}

uint64_t Database::ForgottenInFile() const {
  uint64_t gone = next_episode_id_ - 1 - catalog_.episode_count();
  uint64_t before = 0;
  if (const std::string* v = catalog_.Meta("vacuum.gone_episodes")) {
    before = std::strtoull(v->c_str(), nullptr, 10);
  }
  return gone > before ? gone - before : 0;
}

// The derived bytes a compaction drops: every graph delta and checkpoint in
// the file, less the newest checkpoint's size (the copy writes one like it).
Status Database::SupersededBytes(uint64_t* bytes) {
  uint64_t derived = 0;
  AGENTMEM_RETURN_IF_ERROR(DerivedBytesBefore(log_->file(), log_->header().salt, log_->end(), &derived));
  *bytes = derived - std::min(derived, log_->checkpoint_size());
  return Status::OK();
}

// The auto_vacuum policy (options.h), at a writable close; skipped when
// another handle holds the write lock. Due when more episodes are forgotten
// than live (at least 1,000), or -- looked at when this handle has written a
// checkpoint or the close is about to write one -- when the graph deltas and
// checkpoints a compaction would drop (SupersededBytes, at least
// checkpoint_bytes) are more than half the rest of the file, or, if the
// graph would have to be built again (forgotten nodes), twice the rest.
Status Database::MaybeVacuum(bool* replaced) {
  *replaced = false;
  if (!opts_.auto_vacuum || explicit_txn_) return Status::OK();
  // The header walk runs once per state of the log: taking the lock catches
  // up with other writers, and only a log that moved is counted again.
  std::pair<uint64_t, uint64_t> counted{UINT64_MAX, UINT64_MAX};
  uint64_t superseded = 0;
  auto due = [&](bool* yes) -> Status {
    const uint64_t forgotten = ForgottenInFile();
    *yes = forgotten >= 1000 && forgotten > catalog_.episode_count();
    const bool checkpointing =
        wrote_checkpoint_ || log_->end() - log_->checkpoint_end() >= opts_.checkpoint_bytes;
    if (*yes || !checkpointing || opts_.checkpoint_bytes == 0) return Status::OK();
    const std::pair<uint64_t, uint64_t> now{log_->end(), log_->checkpoint_end()};
    if (counted != now) {
      AGENTMEM_RETURN_IF_ERROR(SupersededBytes(&superseded));
      counted = now;
    }
    const uint64_t rest = log_->end() - std::min(log_->end(), superseded);
    const bool cheap = recall_ && recall_->CanTakeGraph();
    *yes = superseded >= opts_.checkpoint_bytes && (cheap ? 2 * superseded > rest : superseded > 2 * rest);
    return Status::OK();
  };
  bool yes = false;
  AGENTMEM_RETURN_IF_ERROR(due(&yes));
  if (!yes) return Status::OK();
  bool locked = false;
  AGENTMEM_RETURN_IF_ERROR(TryLockNoWait(&locked));
  if (!locked) return Status::OK();
  AGENTMEM_RETURN_IF_ERROR(due(&yes));  // decided again on the latest state
  if (!yes) return Status::OK();
  AGENTMEM_RETURN_IF_ERROR(VacuumLocked({}, nullptr, true));
  *replaced = true;
  return Status::OK();
}

// ------------------------------------------------------------------ facts

Status Database::EnsureFactIndex() {
  if (fact_index_) return Status::OK();
  auto index = std::make_unique<FactIndex>();
  for (const UserEntry& u : catalog_.users()) {
    for (uint64_t id : u.fact_ids) {
      FactRecord f;
      AGENTMEM_RETURN_IF_ERROR(ReadFact(*catalog_.FindFact(id), &f));
      index->Add(f);
    }
  }
  fact_index_ = std::move(index);
  return Status::OK();
}

// The committed facts `ids` with the pending versions and facts laid over
// them (pending ones matching `keep`), in id order.
static void Overlay(std::vector<FactRecord>* committed, const std::vector<FactRecord>& pending,
                    const std::function<bool(const FactRecord&)>& keep) {
  std::unordered_map<uint64_t, size_t> at;
  for (size_t i = 0; i < committed->size(); i++) at[(*committed)[i].id] = i;
  for (const FactRecord& p : pending) {
    if (!keep(p)) continue;
    auto it = at.find(p.id);
    if (it != at.end()) {
      (*committed)[it->second] = p;
    } else {
      committed->push_back(p);
    }
  }
  std::sort(committed->begin(), committed->end(),
            [](const FactRecord& a, const FactRecord& b) { return a.id < b.id; });
}

Status Database::CurrentFacts(const std::string& user, const std::string& subject,
                              const std::string& predicate, std::vector<FactRecord>* out) {
  AGENTMEM_RETURN_IF_ERROR(EnsureFactIndex());
  out->clear();
  for (uint64_t id : fact_index_->Find(user, &subject, &predicate, nullptr)) {
    out->emplace_back();
    AGENTMEM_RETURN_IF_ERROR(ReadFact(*catalog_.FindFact(id), &out->back()));
  }
  Overlay(out, pending_facts_, [&](const FactRecord& f) {
    return f.user_id == user && f.subject == subject && f.predicate == predicate;
  });
  out->erase(std::remove_if(out->begin(), out->end(),
                            [](const FactRecord& f) { return f.expired_at != format::kForever; }),
             out->end());
  return Status::OK();
}

Status Database::QueryFacts(const FactQuery& q, std::vector<FactRecord>* out) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  AGENTMEM_RETURN_IF_ERROR(EnsureFactIndex());
  out->clear();
  const std::string* subject = q.subject ? &*q.subject : nullptr;
  const std::string* predicate = q.predicate ? &*q.predicate : nullptr;
  const std::string* object = q.object ? &*q.object : nullptr;
  for (uint64_t id : fact_index_->Find(q.user_id, subject, predicate, object)) {
    out->emplace_back();
    AGENTMEM_RETURN_IF_ERROR(ReadFact(*catalog_.FindFact(id), &out->back()));
  }
  Overlay(out, pending_facts_, [&](const FactRecord& f) {
    return f.user_id == q.user_id && (!subject || f.subject == *subject) &&
           (!predicate || f.predicate == *predicate) && (!object || f.object == *object);
  });
  // A fact's sources are the episodes it cites that are still remembered: a
  // forgotten one is no longer reported (the record keeps its id until the
  // fact is forgotten with its last source).
  const uint64_t limit = episode_id_limit();
  for (FactRecord& f : *out) {
    auto& src = f.source_episode_ids;
    src.erase(std::remove_if(src.begin(), src.end(),
                             [&](uint64_t e) {
                               return e < limit && !catalog_.FindEpisode(e) &&
                                      !FindPendingEpisode(e);
                             }),
              src.end());
  }
  if (q.all_versions) return Status::OK();
  const int64_t now = Now();
  const int64_t valid_at = q.valid_at ? q.valid_at : now;
  const int64_t known_at = q.known_at ? q.known_at : now;
  out->erase(std::remove_if(out->begin(), out->end(),
                            [&](const FactRecord& f) {
                              return !(f.valid_from <= valid_at && valid_at < f.valid_to &&
                                       f.recorded_at <= known_at && known_at < f.expired_at);
                            }),
             out->end());
  return Status::OK();
}

// ------------------------------------------------------------------ vacuum

Status Database::Reload() {
  ReleaseWriteLock();
  retention_due_ = INT64_MIN;
  fact_index_.reset();
  recall_.reset();
  recall_bm25_owner_.reset();
  catalog_ = Catalog();
  // A failed write or sync stays the handle's error in the new file too.
  const Status sticky_before = sticky();
  if (log_) pager_budget_ = log_->pager().budget();
  log_.reset();
  write_refused_ = Status::OK();
  next_episode_id_ = next_fact_id_ = next_block_version_ = 1;
  const bool create = opts_.create;
  opts_.create = false;  // the file must be there: never make an empty one here
  Status s = OpenFile();
  opts_.create = create;
  if (!s.ok()) {
    // Nothing sound is left to read: the handle fails every call from here.
    log_.reset();
    broken_ = s;
    poisoned_ = true;
    return s;
  }
  if (!sticky_before.ok()) SetSticky(sticky_before);
  return s;
}

// The forgotten texts and vectors of `f`, as byte strings to search for.
Status Database::CollectNeedles(const ForgetRecord& f, std::vector<std::string>* needles) {
  Selection sel;
  Select(catalog_, f, &sel);
  if (f.kind == ForgetKind::kRetention) AGENTMEM_RETURN_IF_ERROR(KeepCited(&sel));
  AGENTMEM_RETURN_IF_ERROR(AddNeedles(sel, needles));
  std::sort(needles->begin(), needles->end());
  needles->erase(std::unique(needles->begin(), needles->end()), needles->end());
  return Status::OK();
}

// Appends the texts and vectors of the selected episodes and the values of
// every version of the selected blocks. Strings shorter than 16 bytes would
// match innocent bytes: not searched.
Status Database::AddNeedles(const Selection& sel, std::vector<std::string>* needles) {
  auto add = [&](std::string s) {
    if (s.size() >= 16) needles->push_back(std::move(s));
  };
  for (uint64_t id : sel.episodes) {
    EpisodeRecord r;
    AGENTMEM_RETURN_IF_ERROR(GetEpisodeNoRefresh(id, &r));
    add(std::move(r.text));
    add(std::string(reinterpret_cast<const char*>(r.vector.data()), r.vector.size() * sizeof(float)));
  }
  for (const auto& [user, name] : sel.blocks) {
    const UserEntry* u = catalog_.FindUser(user);
    for (const BlockVersion& v : u->blocks.at(name)) {
      format::BlockRecord b;
      AGENTMEM_RETURN_IF_ERROR(ReadBlock(v.loc, &b));
      add(std::move(b.value));
    }
  }
  return Status::OK();
}

void Database::CollectForgotten(bool on) {
  collect_forgotten_ = on;
  if (!on) forgotten_needles_.clear();
}

Status Database::Purge(const ForgetRecord& f, ForgetReceipt* receipt) {
  if (explicit_txn_) return Status(kMisuse, "PURGE cannot run inside a transaction");
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());  // the needles and the forget see one state
  std::vector<std::string> needles;
  Status s = CollectNeedles(f, &needles);
  ForgetReceipt forgot;
  if (s.ok()) s = Forget(f, &forgot);  // commits and releases the lock
  ReleaseWriteLock();
  AGENTMEM_RETURN_IF_ERROR(s);
  ForgetReceipt vacuumed;
  AGENTMEM_RETURN_IF_ERROR(Vacuum(needles, &vacuumed));
  vacuumed.episodes = forgot.episodes;
  vacuumed.facts = forgot.facts;
  vacuumed.block_versions = forgot.block_versions;
  if (receipt) *receipt = vacuumed;
  return Status::OK();
}

namespace {

// Counts the needles found in `hay`: each needle is looked up by its first
// 16 bytes at every position.
class NeedleScan {
 public:
  explicit NeedleScan(const std::vector<std::string>& needles) : needles_(needles) {
    found_.assign(needles.size(), false);
    filter_.assign(size_t{1} << (kFilterBits - 6), 0);
    for (size_t i = 0; i < needles.size(); i++) {
      const uint64_t key = Key(needles[i].data());
      by_prefix_[key].push_back(i);
      filter_[key >> (64 - kFilterBits + 6)] |= uint64_t{1} << ((key >> (64 - kFilterBits)) & 63);
    }
  }
  void Scan(std::string_view hay) {
    if (needles_.empty() || hay.size() < 16) return;
    for (size_t pos = 0; pos + 16 <= hay.size(); pos++) {
      // A bit per value of the key's top bits, set for each needle: most
      // positions stop here, in a table that stays in the cache.
      const uint64_t key = Key(hay.data() + pos);
      if (!((filter_[key >> (64 - kFilterBits + 6)] >> ((key >> (64 - kFilterBits)) & 63)) & 1)) {
        continue;
      }
      auto it = by_prefix_.find(key);
      if (it == by_prefix_.end()) continue;
      for (size_t i : it->second) {
        const std::string& n = needles_[i];
        if (!found_[i] && hay.size() - pos >= n.size() && std::memcmp(hay.data() + pos, n.data(), n.size()) == 0) {
          found_[i] = true;
        }
      }
    }
  }
  uint64_t found() const { return std::count(found_.begin(), found_.end(), true); }

 private:
  static uint64_t Key(const char* p) {
    uint64_t a, b;
    std::memcpy(&a, p, 8);
    std::memcpy(&b, p + 8, 8);
    return a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  }
  static constexpr int kFilterBits = 20;  // a 128 KiB table
  const std::vector<std::string>& needles_;
  std::vector<bool> found_;
  std::vector<uint64_t> filter_;
  std::unordered_map<uint64_t, std::vector<size_t>> by_prefix_;
};

}  // namespace

// The live records a compaction copies, each list in the order it is written.
struct CompactionPlan {
  std::vector<uint64_t> episodes;                       // ids
  std::vector<std::pair<uint64_t, RecordLoc>> versions;  // block versions
  std::vector<uint64_t> facts;                          // ids
  size_t batches = 1;  // transactions: a thousand episodes each
};

void Database::PlanCompaction(CompactionPlan* plan) const {
  catalog_.episodes().ForEach([&](uint64_t id, const EpisodeEntry& e) {
    if (e.present) plan->episodes.push_back(id);
  });
  std::sort(plan->episodes.begin(), plan->episodes.end());
  for (const UserEntry& u : catalog_.users()) {
    for (const auto& [name, vs] : u.blocks) {
      for (const BlockVersion& v : vs) plan->versions.emplace_back(v.version, v.loc);
    }
    plan->facts.insert(plan->facts.end(), u.fact_ids.begin(), u.fact_ids.end());
  }
  std::sort(plan->versions.begin(), plan->versions.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::sort(plan->facts.begin(), plan->facts.end());
  plan->batches = std::max<size_t>(1, (plan->episodes.size() + 999) / 1000);
}

// A second Database at `tmp` that writes what it is given, in the vector
// space and with the tokenizer of this file.
Status Database::OpenCompactionCopy(const std::string& tmp, std::unique_ptr<Database>* out) {
  if (env()->Exists(tmp)) AGENTMEM_RETURN_IF_ERROR(env()->Delete(tmp));  // left by a crash
  Options o = opts_;
  o.create = true;
  o.read_only = false;
  o.sync = SyncMode::kOff;  // synced once, at the end
  o.checkpoint_bytes = 0;   // written explicitly
  o.salt = 0;
  o.space = RecordedSpace();
  o.space_given = true;
  if (const std::string* v = catalog_.Meta("text.tokenizer")) {
    auto parsed = index::ParseTokenizerConfig(*v);
    if (!parsed.ok()) return Status(kFormatVersion, "VACUUM: unknown tokenizer " + *v);
    o.tokenizer = parsed.value();
  } else {
    o.tokenizer = index::TokenizerOptions{};
  }
  o.tokenizer_given = false;
  // The copy is created with the file's permissions and owner (env.h,
  // CreateAtomicLike), which the rename then carries over.
  std::unique_ptr<Database> dst(new Database(tmp, o));
  dst->create_like_ = path_;
  AGENTMEM_RETURN_IF_ERROR(dst->OpenFile());
  dst->opened_ = true;
  *out = std::move(dst);
  return Status::OK();
}

// What transaction `batch` of the copy holds, as read from this file: its
// thousand episodes and their text records (when the copy is given texts);
// the first, this file's settings; the last, the block versions, facts and
// counters.
struct CompactionBatch {
  std::vector<EpisodeRecord> episodes;
  std::vector<format::TextRecord> texts;
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<format::BlockRecord> blocks;
  std::vector<FactRecord> facts;
  uint64_t next_episode_id = 0, next_fact_id = 0, next_block_version = 0;
  uint64_t gone_episodes = 0;
};

// Reads transaction `batch` of the copy from this file (and `texts`, null
// when the copy tokenizes). It touches nothing but this handle's catalog,
// page cache and `texts`, so that it can run on a helper thread while the
// copy commits the batch before (WriteCompacted).
Status Database::ReadCompactionBatch(const CompactionPlan& plan, size_t batch,
                                     RecallIndex::TakenBm25* texts, CompactionBatch* out) {
  if (batch == 0) out->meta.assign(catalog_.meta().begin(), catalog_.meta().end());
  const size_t first = batch * 1000, end = std::min(plan.episodes.size(), first + 1000);
  out->episodes.reserve(end - first);
  if (texts) out->texts.reserve(end - first);
  for (size_t i = first; i < end; i++) {
    AGENTMEM_RETURN_IF_ERROR(GetEpisodeNoRefresh(plan.episodes[i], &out->episodes.emplace_back()));
    if (texts && !texts->TextOf(plan.episodes[i], &out->texts.emplace_back())) {
      return StatusF(kCorruptIndex, "compaction: episode %llu has no BM25 document",
                     static_cast<unsigned long long>(plan.episodes[i]));
    }
  }
  if (batch + 1 < plan.batches) return Status::OK();
  for (const auto& [version, loc] : plan.versions) {
    AGENTMEM_RETURN_IF_ERROR(ReadBlock(loc, &out->blocks.emplace_back()));
  }
  for (uint64_t id : plan.facts) {
    AGENTMEM_RETURN_IF_ERROR(ReadFact(*catalog_.FindFact(id), &out->facts.emplace_back()));
  }
  out->next_episode_id = next_episode_id_;
  out->next_fact_id = next_fact_id_;
  out->next_block_version = next_block_version_;
  out->gone_episodes = next_episode_id_ - 1 - catalog_.episode_count();
  return Status::OK();
}

// Stages transaction `batch` of the copy in dst: the settings (vector space,
// tokenizer, predicates, policies) ride in the first, and the block versions,
// facts and the compaction's own meta in the last. The records go in as they
// are, not through Remember(): they were checked when written, and this
// handle's options must not refuse them. Touches only dst.
Status Database::StageCompactionBatch(Database* dst, const CompactionPlan& plan, size_t batch,
                                      CompactionBatch* b) {
  AGENTMEM_RETURN_IF_ERROR(dst->AcquireWriteLock());
  for (auto& [k, v] : b->meta) {
    const std::string* have = dst->catalog_.Meta(k);  // the new file's first transaction
    if (k.rfind("vacuum.", 0) != 0 && !(have && *have == v)) {
      dst->pending_meta_.entries.emplace_back(std::move(k), std::move(v));
    }
  }
  dst->pending_episodes_ = std::move(b->episodes);
  dst->given_texts_ = std::move(b->texts);
  if (batch + 1 < plan.batches) return Status::OK();
  dst->pending_blocks_ = std::move(b->blocks);
  dst->pending_facts_ = std::move(b->facts);
  // The source's next ids, so that ids of forgotten records are never
  // used again.
  dst->counters_floor_ = Counters{b->next_episode_id, b->next_fact_id, b->next_block_version};
  // Ids used before this compaction whose records it dropped: the
  // baseline of ForgottenInFile(), recorded when there are any.
  if (b->gone_episodes > 0) {
    dst->pending_meta_.entries.emplace_back("vacuum.gone_episodes", std::to_string(b->gone_episodes));
  }
  return Status::OK();
}

// Writes the live records and a checkpoint into a new file at `tmp`, through
// a second Database that writes what it is given: ids, versions and both time
// axes are kept, and so are the next ids (ids of forgotten records are never
// used again).
//
// The copy's graph, by `graph_in_checkpoint`: false, it is built again by the
// copy's commits, a thousand episodes at a time, each commit with its delta
// (without vectors, format.md §5.6), and the checkpoint is written only when
// the copy is long enough and no larger than the file it replaces; true, the
// commits carry no deltas and the checkpoint, always written, holds the
// graph: this file's graph itself when each of its nodes is an episode the
// copy keeps, or a copy of it without the forgotten episodes' nodes when
// they are few (RecallIndex::TakeGraph), else one built in memory. With
// the graph in the checkpoint, this file's BM25 indexes go to the copy too
// when they hold exactly the live episodes (RecallIndex::TakeBm25): the
// copy's text records are their documents and its checkpoint holds them, so
// nothing is tokenized or indexed again; else the copy's commits tokenize.
Status Database::WriteCompacted(const std::string& tmp, uint64_t size_before,
                                bool graph_in_checkpoint, uint64_t* bytes) {
  std::unique_ptr<Database> dst;
  AGENTMEM_RETURN_IF_ERROR(OpenCompactionCopy(tmp, &dst));
  std::unique_ptr<index::HnswIndex> graph;
  RecallIndex::TakenBm25 texts;
  std::shared_ptr<MappedBytes> texts_owner;
  if (graph_in_checkpoint && recall_) {
    graph = recall_->TakeGraph();
    texts = recall_->TakeBm25();
    if (!texts.empty()) texts_owner = recall_bm25_owner_;
  }
  // The handle reloads from the copy, or from this file should the copy
  // fail (VacuumLocked): its indexes are not needed until then, and their
  // memory is the copy's.
  if (graph_in_checkpoint) {
    recall_.reset();
    recall_bm25_owner_.reset();
  }
  if (graph_in_checkpoint) dst->graph_writes_ = graph ? GraphWrites::kAdopted : GraphWrites::kInMemory;
  dst->texts_given_ = !texts.empty();
  // As few transactions as the records need (each costs a commit page).
  CompactionPlan plan;
  PlanCompaction(&plan);
  // Each batch after the first is read on a helper thread while the copy
  // commits the one before: reading (decoding records, rebuilding texts)
  // and committing (encoding, compressing, writing) take about as long.
  RecallIndex::TakenBm25* given = dst->texts_given_ ? &texts : nullptr;
  CompactionBatch next;
  Status read = ReadCompactionBatch(plan, 0, given, &next);
  TaskThread reader("reading the records a compaction copies");
  for (size_t batch = 0; batch < plan.batches; batch++) {
    AGENTMEM_RETURN_IF_ERROR(read);
    CompactionBatch current = std::move(next);
    next = CompactionBatch{};
    if (batch + 1 < plan.batches) {
      reader.Start([&, batch] { return ReadCompactionBatch(plan, batch + 1, given, &next); });
    }
    Status s = dst->Begin();
    if (s.ok()) {
      s = StageCompactionBatch(dst.get(), plan, batch, &current);
      if (s.ok()) {
        s = dst->Commit();
      } else {
        dst->Rollback().IgnoreError();
      }
    }
    read = reader.Wait();
    AGENTMEM_RETURN_IF_ERROR(s);
  }
  AGENTMEM_RETURN_IF_ERROR(dst->AcquireWriteLock());
  if (graph) {
    AGENTMEM_RETURN_IF_ERROR(dst->EnsureRecallIndex());
    AGENTMEM_RETURN_IF_ERROR(dst->recall_->AdoptGraph(std::move(graph)));
  }
  if (!texts.empty()) {
    AGENTMEM_RETURN_IF_ERROR(dst->EnsureRecallIndex());
    AGENTMEM_RETURN_IF_ERROR(dst->recall_->AdoptBm25(&texts));
    dst->recall_bm25_owner_ = std::move(texts_owner);
  }
  AGENTMEM_RETURN_IF_ERROR(dst->log_->SyncAll());
  if (graph_in_checkpoint) {
    const uint64_t before = dst->log_->checkpoint_end();
    AGENTMEM_RETURN_IF_ERROR(dst->WriteCheckpoint());
    if (dst->log_->checkpoint_end() == before) {
      return Status(kTooBig, "VACUUM: the copy's checkpoint does not fit in a page");
    }
  } else if (opts_.checkpoint_bytes != 0 && dst->log_->end() >= opts_.checkpoint_bytes) {
    // A checkpoint pays once the log is long enough to be slow to scan (the
    // checkpoint_bytes policy); below that, a small file stays small. Never
    // one that would make the copy larger than the file it replaces.
    AGENTMEM_RETURN_IF_ERROR(dst->WriteCheckpoint(size_before));
  }
  // WriteCheckpoint pointed one superblock at the checkpoint; this one is the
  // other slot's, so that both do.
  AGENTMEM_RETURN_IF_ERROR(dst->log_->WriteSuperblock());
  *bytes = dst->log_->end();
  dst->ReleaseWriteLock();
  return dst->Close();
}

// Every byte of the file at `path` (its first `size` bytes), and every
// compressed page's payload decompressed, searched for each needle.
Status Database::SearchFile(const std::string& path, uint64_t size,
                            const std::vector<std::string>& needles, uint64_t* found) {
  *found = 0;
  NeedleScan scan(needles);
  std::unique_ptr<File> f;
  AGENTMEM_RETURN_IF_ERROR(env()->Open(path, OpenMode{true}, &f));
  std::string bytes;
  AGENTMEM_RETURN_IF_ERROR(f->ReadAt(0, size, &bytes));
  format::FileHeader fh;
  AGENTMEM_RETURN_IF_ERROR(
      format::DecodeFileHeader(std::string_view(bytes).substr(0, format::kFirstPageOffset), &fh));
  scan.Scan(bytes);
  for (uint64_t pos = format::kFirstPageOffset; pos + format::kPageHeaderSize <= bytes.size();) {
    std::string_view at = std::string_view(bytes).substr(pos);
    format::PageHeader h;
    if (!format::PeekPageHeader(at.substr(0, format::kPageHeaderSize), pos, fh.salt, &h).ok()) break;
    const uint64_t padded = format::PaddedPageSize(h.length);
    if (padded > at.size()) break;
    if (h.flags & format::kPageFlagZstd) {
      format::PageHeader full;
      std::string payload;
      if (Pager::Verify(at.substr(0, padded), pos, fh.salt, &full, &payload).ok()) scan.Scan(payload);
    }
    pos += padded;
  }
  *found = scan.found();
  return Status::OK();
}

Status Database::SearchFile(const std::vector<std::string>& needles, uint64_t* found) {
  *found = 0;
  if (needles.empty()) return Status::OK();
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  uint64_t size = 0;
  AGENTMEM_RETURN_IF_ERROR(log_->file()->Size(&size));
  return SearchFile(path_, size, needles, found);
}

Status Database::Vacuum(const std::vector<std::string>& needles, ForgetReceipt* receipt) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  if (explicit_txn_) return Status(kMisuse, "VACUUM cannot run inside a transaction");
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  return VacuumLocked(needles, receipt);
}

Status Database::VacuumLocked(const std::vector<std::string>& needles, ForgetReceipt* receipt,
                              bool closing) {
  ForgetReceipt r;
  r.vacuumed = true;
  Status s = ApplyRetention();  // expired episodes are not copied
  if (s.ok()) s = log_->file()->Size(&r.bytes_before);
  const std::string tmp = path_ + "-vacuum";
  // A file with a checkpoint, or one of at least checkpoint_bytes whose graph
  // the copy can take, gets a copy whose checkpoint holds the graph (no
  // deltas); should that checkpoint not fit in a page, the copy is written
  // again with deltas. Either way this handle's indexes went to the copy or
  // were dropped (WriteCompacted): it reloads.
  // The pending vectors go into the graph first, so that it can go to the copy.
  if (s.ok() && recall_) recall_->FlushGraph().IgnoreError();
  const bool graph_in_checkpoint =
      s.ok() && opts_.checkpoint_bytes != 0 &&
      (log_->checkpoint_size() != 0 ||
       (r.bytes_before >= opts_.checkpoint_bytes && recall_ && recall_->CanTakeGraph()));
  const bool indexes_dropped = graph_in_checkpoint && s.ok();
  if (s.ok()) s = WriteCompacted(tmp, r.bytes_before, graph_in_checkpoint, &r.bytes_after);
  if (graph_in_checkpoint && s.code() == kTooBig) {
    s = WriteCompacted(tmp, r.bytes_before, false, &r.bytes_after);
  }
  // The proof: what this handle's forgets removed since it asked to collect,
  // and `needles`, searched for in the copy.
  std::vector<std::string> all = needles;
  all.insert(all.end(), forgotten_needles_.begin(), forgotten_needles_.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  if (s.ok() && !all.empty()) {
    r.needles = all.size();
    s = SearchFile(tmp, r.bytes_after, all, &r.residue);
  }
  if (s.ok()) s = env()->Rename(tmp, path_);
  if (!s.ok()) {
    env()->Delete(tmp).IgnoreError();
    ReleaseWriteLock();
    if (indexes_dropped) Reload().IgnoreError();  // the file, unchanged, has them
    return s;
  }
  forgotten_needles_.clear();
  // Waiting writers now get the old file's lock, see it replaced and move on.
  ReleaseWriteLock();
  // The copy holds its checkpoint and both superblocks: a closing handle
  // does not build the indexes of a file it is about to let go.
  if (closing) return Status::OK();
  AGENTMEM_RETURN_IF_ERROR(Reload());
  if (receipt) *receipt = r;
  return Status::OK();
}

}  // namespace agentmem::engine

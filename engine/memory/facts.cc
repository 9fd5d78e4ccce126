// engine/memory/facts.cc -- facts on two time axes: the input rules, supersession
// of single-valued predicates, corrections, imports (docs/lifecycle.md).
#include "engine/memory/database.h"

#include <algorithm>
#include <map>
#include <optional>

#include "engine/memory/validate.h"

namespace agentmem::engine {

using format::BlockRecord;
using format::EpisodeRecord;
using format::FactRecord;
using format::PageType;

namespace {
Status CheckFact(const FactRecord& r) {
  if (r.subject.empty() || r.predicate.empty() || r.object.empty()) {
    return Status(kConstraint, "fact subject, predicate and object must not be empty");
  }
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.user_id, "user_id"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.subject, "fact subject"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.predicate, "fact predicate"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(r.object, "fact object"));
  if (!(r.confidence >= 0.0f && r.confidence <= 1.0f)) {
    return Status(kRange, "fact confidence must be between 0 and 1");
  }
  return Status::OK();
}
}  // namespace

// valid_from 0 means now, valid_to 0 open-ended.
static void DefaultValidTime(int64_t now, FactRecord* r) {
  if (r->valid_from == 0) r->valid_from = now;
  if (r->valid_to == 0) r->valid_to = format::kForever;
}

uint64_t Database::NextFactId() const {
  uint64_t next = next_fact_id_;
  for (const FactRecord& f : pending_facts_) next = std::max(next, f.id + 1);
  return next;
}

// A new version of a fact replaces a pending one of the same id in place:
// a transaction writes each fact id at most once.
void Database::PutPendingFact(FactRecord f) {
  for (size_t i = 0; i < pending_facts_.size(); i++) {
    if (pending_facts_[i].id == f.id) {
      NoteFactReplaced(i);
      pending_facts_[i] = std::move(f);
      return;
    }
  }
  pending_facts_.push_back(std::move(f));
}

Status Database::CurrentFactById(const std::string& user, uint64_t id, FactRecord* out) {
  const FactRecord* pending = nullptr;
  for (const FactRecord& p : pending_facts_) {
    if (p.id == id) pending = &p;
  }
  if (pending) {
    *out = *pending;
  } else if (const RecordLoc* loc = catalog_.FindFact(id)) {
    AGENTMEM_RETURN_IF_ERROR(ReadFact(*loc, out));
  } else {
    out->user_id.clear();
  }
  if (out->user_id != user || out->expired_at != format::kForever) {
    return StatusF(kNotFound, "fact %llu is not a current fact of this user",
                   static_cast<unsigned long long>(id));
  }
  return Status::OK();
}

Status Database::AssertFact(FactRecord r, uint64_t* id, uint64_t replaces) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  AGENTMEM_RETURN_IF_ERROR(CheckFact(r));
  int64_t now = Now();
  DefaultValidTime(now, &r);
  if (r.valid_to <= r.valid_from) return Status(kRange, "fact valid_to must be after valid_from");
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  std::optional<FactRecord> replaced;
  if (replaces != 0) {
    replaced.emplace();
    Status s = CurrentFactById(r.user_id, replaces, &*replaced);
    if (!s.ok()) return FinishWrite(s);
  }
  std::vector<FactRecord> current;
  Status s = CurrentFacts(r.user_id, r.subject, r.predicate, &current);
  if (!s.ok()) return FinishWrite(s);
  std::erase_if(current, [&](const FactRecord& c) { return c.id == replaces; });
  // The corrected fact leaves transaction time when its correction enters it.
  // A correction that states something else from a later instant of the
  // fact's valid time says the fact held until then: that part stays, known
  // from the same instant.
  auto expire_replaced = [&](int64_t at) {
    if (!replaced) return;
    at = std::max(at, replaced->recorded_at);
    const bool other = r.subject != replaced->subject || r.predicate != replaced->predicate ||
                       r.object != replaced->object;
    if (other && replaced->valid_from < r.valid_from && r.valid_from < replaced->valid_to) {
      FactRecord before = *replaced;
      before.id = NextFactId();
      before.valid_to = r.valid_from;
      before.recorded_at = at;
      before.expired_at = format::kForever;
      pending_facts_.push_back(std::move(before));
    }
    replaced->expired_at = at;
    PutPendingFact(std::move(*replaced));
  };
  for (const FactRecord& c : current) {
    if (c.object == r.object && c.valid_from <= r.valid_from && r.valid_from < c.valid_to) {
      expire_replaced(Now());
      if (id) *id = c.id;  // already known and valid then: nothing else to write
      return FinishWrite(Status::OK());
    }
  }
  // Transaction time is read under the lock, and never before what the file
  // already recorded (another process's clock, or a wait for the lock), so
  // that no fact is expired before it was recorded.
  now = Now();
  for (const FactRecord& c : current) now = std::max(now, c.recorded_at);
  if (replaced) now = std::max(now, replaced->recorded_at);
  expire_replaced(now);
  r.recorded_at = now;
  r.expired_at = format::kForever;
  r.id = NextFactId();
  const uint64_t assigned = r.id;
  pending_facts_.push_back(r);
  if (IsSingleValued(r.predicate)) {
    for (const FactRecord& c : current) {
      if (c.object == r.object || c.valid_to <= r.valid_from || c.valid_from >= r.valid_to) continue;
      FactRecord expired = c;  // the row as it was known, closed in transaction time
      expired.expired_at = now;
      PutPendingFact(std::move(expired));
      // What stays true of it, before and after the new fact, known from now.
      auto remainder = [&](int64_t from, int64_t to) {
        FactRecord rest = c;
        rest.id = NextFactId();
        rest.valid_from = from;
        rest.valid_to = to;
        rest.recorded_at = now;
        rest.expired_at = format::kForever;
        pending_facts_.push_back(std::move(rest));
      };
      if (c.valid_from < r.valid_from) remainder(c.valid_from, r.valid_from);
      if (c.valid_to > r.valid_to) remainder(r.valid_to, c.valid_to);
    }
  }
  s = FinishWrite(Status::OK());
  if (s.ok() && id) *id = assigned;
  return s;
}

Status Database::ImportFact(FactRecord r, uint64_t* id) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  AGENTMEM_RETURN_IF_ERROR(CheckFact(r));
  int64_t now = Now();
  DefaultValidTime(now, &r);
  if (r.recorded_at == 0) r.recorded_at = now;
  if (r.expired_at == 0) r.expired_at = format::kForever;
  // A fact superseded in the transaction that asserted it was never known
  // at any commit: its transaction time is empty, [t, t), and valid.
  if (r.valid_to <= r.valid_from || r.expired_at < r.recorded_at) {
    return Status(kRange, "fact valid_to must be after valid_from, and expired_at not before "
                          "recorded_at");
  }
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  const uint64_t next = NextFactId();
  if (r.id != 0 && r.id < next) {
    return FinishWrite(StatusF(kConstraint, "fact id %llu is taken: new ids start at %llu",
                               static_cast<unsigned long long>(r.id),
                               static_cast<unsigned long long>(next)));
  }
  if (r.id == 0) r.id = next;
  const uint64_t assigned = r.id;
  pending_facts_.push_back(std::move(r));
  Status s = FinishWrite(Status::OK());
  if (s.ok() && id) *id = assigned;
  return s;
}

Status Database::DeclarePredicate(const std::string& predicate, bool single_valued) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  if (predicate.empty()) return Status(kConstraint, "predicate must not be empty");
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(predicate, "predicate"));
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  pending_meta_.entries.emplace_back("fact.single_valued." + predicate, single_valued ? "1" : "0");
  return FinishWrite(Status::OK());
}

Status Database::SetSyncMeta(const std::string& key, const std::string& value) {
  AGENTMEM_RETURN_IF_ERROR(CheckWritable());
  if (!key.starts_with("sync.") || key.size() == 5) {
    return StatusF(kMisuse, "meta key \"%s\" is not a sync.* key", key.c_str());
  }
  if (key.size() > 256 || value.size() > 65536) {
    return Status(kTooBig, "meta keys are at most 256 bytes and values at most 64 KiB");
  }
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(key, "meta key"));
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(value, "meta value"));
  AGENTMEM_RETURN_IF_ERROR(AcquireWriteLock());
  pending_meta_.entries.emplace_back(key, value);
  return FinishWrite(Status::OK());
}

Status Database::GetMeta(const std::string& key, std::string* value) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  for (auto it = pending_meta_.entries.rbegin(); it != pending_meta_.entries.rend(); ++it) {
    if (it->first == key) {
      *value = it->second;
      return Status::OK();
    }
  }
  const std::string* v = catalog_.Meta(key);
  if (!v) return StatusF(kNotFound, "the file has no setting \"%s\"", key.c_str());
  *value = *v;
  return Status::OK();
}

bool Database::IsSingleValued(const std::string& predicate) const {
  const std::string key = "fact.single_valued." + predicate;
  for (auto it = pending_meta_.entries.rbegin(); it != pending_meta_.entries.rend(); ++it) {
    if (it->first == key) return it->second == "1";
  }
  const std::string* v = catalog_.Meta(key);
  return v && *v == "1";
}

void Database::DeclaredPredicates(std::vector<std::pair<std::string, bool>>* out) const {
  static constexpr std::string_view kPrefix = "fact.single_valued.";
  std::map<std::string, bool> declared;
  auto take = [&](const std::string& key, const std::string& value) {
    if (key.size() > kPrefix.size() && key.starts_with(kPrefix)) {
      declared[key.substr(kPrefix.size())] = value == "1";
    }
  };
  for (const auto& [key, value] : catalog_.meta()) take(key, value);
  for (const auto& [key, value] : pending_meta_.entries) take(key, value);
  out->assign(declared.begin(), declared.end());
}

}  // namespace agentmem::engine

// cli/sync/pull.cc -- the pull step of `agentmem sync` (sync_internal.h):
// every other origin's change rows after the file's pulled position, in
// global order (gpos), applied through the engine's write API, one local
// transaction per batch that also moves the position (meta key sync.pulled):
// a batch is applied whole or not at all, and never twice. Rows read from
// PostgreSQL are untrusted: each value is parsed, typed and bounded first.
//
// Ids: a pulled record gets this file's next id; agentmem_local_ids maps
// (this origin, kind, the record's origin, its id there) to it, written in
// PostgreSQL before the local commit (an upsert, so a batch applied again
// after a failed local commit maps its new ids).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "sync/sync_internal.h"

namespace agentmem::sync {
namespace {

using nlohmann::json;

// The rows after $1 up to the end of the last source transaction among the
// next kChangesPerBatch rows (or, for a longer transaction, its end).
constexpr const char* kBatchEnd =
    "SELECT COALESCE((SELECT max(gpos) FROM (SELECT gpos, kind FROM agentmem_changes"
    " WHERE gpos > $1 ORDER BY gpos LIMIT 1000) x WHERE kind = 'commit'),"
    " (SELECT min(gpos) FROM agentmem_changes WHERE gpos > $1 AND kind = 'commit'))";

constexpr const char* kRows =
    "SELECT gpos, origin, log || ':' || seq, kind, id, data::text, vector::text"
    " FROM agentmem_changes WHERE gpos > $1 AND gpos <= $2 AND origin <> $3 ORDER BY gpos";

// This file's local id of the record `replica` holds as `local` ($1-$3);
// NULL when this file ($4) has not pulled it.
constexpr const char* kLocalId =
    "SELECT c.origin, c.origin_id, CASE WHEN c.origin = $4 THEN c.origin_id"
    " ELSE (SELECT l.local_id FROM agentmem_local_ids l WHERE l.replica = $4 AND l.kind = $2"
    "  AND l.origin = c.origin AND l.origin_id = c.origin_id) END"
    " FROM agentmem_canonical($1, $2, $3) c";

// Whether this file ($1) wrote, later in the global order than $2, a version
// of the block or a fact of the single-valued key that a pulled row names:
// then the pulled one is not current (docs/replication.md, "Conflicts").
constexpr const char* kOwnLaterBlock =
    "SELECT EXISTS (SELECT 1 FROM blocks WHERE origin = $1 AND gpos > $2 AND user_id = $3"
    " AND name = $4)";
constexpr const char* kOwnLaterFact =
    "SELECT EXISTS (SELECT 1 FROM facts f JOIN agentmem_predicates p ON p.predicate ="
    " f.predicate AND p.single_valued WHERE f.origin = $1 AND f.gpos > $2 AND f.user_id = $3"
    " AND f.subject = $4 AND f.predicate = $5 AND f.object <> $6 AND NOT f.derived)";

constexpr const char* kMapIds =
    "INSERT INTO agentmem_local_ids SELECT $1, k, o, oid, lid FROM unnest($2::text[],"
    " $3::text[], $4::bigint[], $5::bigint[]) AS t(k, o, oid, lid)"
    " ON CONFLICT (replica, kind, origin, origin_id) DO UPDATE SET local_id = EXCLUDED.local_id";

// A member of a row's data, typed; throws FieldError otherwise.
struct FieldError {
  std::string what;
};

std::string Str(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_string()) throw FieldError{std::string(name) + " is not a string"};
  return it->get<std::string>();
}

int64_t Int(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number_integer()) {
    throw FieldError{std::string(name) + " is not an integer"};
  }
  return it->get<int64_t>();
}

double Num(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number()) throw FieldError{std::string(name) + " is not a number"};
  return it->get<double>();
}

// A string member of one of the file's own feed rows; "" when it is not one.
std::string Text(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A fact row's "new": a new fact, not a new version of one.
bool IsNew(const json& j) {
  auto it = j.find("new");
  if (it == j.end() || !it->is_boolean()) throw FieldError{"new is not a boolean"};
  return it->get<bool>();
}

// One pulled row.
struct Pulled {
  int64_t gpos = 0, id = 0;
  std::string origin, txn, kind;
  json data;
  std::vector<float> vector;
};

class Puller {
 public:
  Puller(const Replica& r, const PushReport& push, PullReport* report)
      : r_(r), pg_(*r.pg), report_(report), unread_log_(push.pushed_log),
        unread_seq_(push.pushed_seq) {}
  bool Run();

 private:
  bool ReadPosition();
  bool ReadUnpushed();
  bool Fetch(int64_t end, std::vector<Pulled>* rows);
  bool ApplyBatch(int64_t end, const std::vector<Pulled>& rows);
  bool Apply(const Pulled& p, bool remainder);
  bool Episode(const Pulled& p);
  bool Block(const Pulled& p);
  bool Fact(const Pulled& p);
  bool Forget(const Pulled& p);
  bool ValidFloor(const std::string& user, const std::string& subject,
                  const std::string& predicate, const std::string& object, int64_t* floor);
  bool Exists(const char* sql, const std::vector<const char*>& values, bool* yes);
  // This file's id of the record (kind, local id at `origin`); 0 when it
  // holds none.
  bool LocalId(const std::string& origin, const char* kind, int64_t id, int64_t* local);
  bool Check(int rc, const char* what) {
    return rc == AGENTMEM_OK || FailOn(&pg_, r_.db, what);
  }

  const Replica& r_;
  Pg& pg_;
  PullReport* report_;
  // Where the file's feed has been read to for them.
  uint64_t unread_log_;
  int64_t unread_seq_;
  // What the file wrote after what PostgreSQL holds of it (a write made
  // while this sync runs): blocks (user, name) and facts (user, subject,
  // predicate) -> their objects. Later in the global order than anything
  // pulled now, so what they name stays current here.
  std::set<std::pair<std::string, std::string>> unpushed_blocks_;
  std::map<std::tuple<std::string, std::string, std::string>, std::set<std::string>>
      unpushed_facts_;
  // The batch's new ids: (kind, origin, id there) -> id here.
  std::map<std::tuple<std::string, std::string, int64_t>, int64_t> new_ids_;
};

bool Puller::ReadPosition() {
  char* v = nullptr;
  const int rc = agentmem_meta_get(r_.db, "sync.pulled", &v);
  if (rc == AGENTMEM_NOTFOUND) return true;
  if (rc != AGENTMEM_OK) return FailOn(&pg_, r_.db, "reading sync.pulled");
  char* end = nullptr;
  report_->position = std::strtoll(v, &end, 10);
  const bool ok = end != v && *end == '\0' && report_->position >= 0;
  agentmem_free(v);
  return ok || pg_.Fail("the file's sync.pulled is not a position");
}

// Reads the file's own changes after what PostgreSQL holds, and after what
// the batches before read (in the batch's transaction, whose write lock
// keeps the application's writes out until it commits), leaving out the
// transactions a pull wrote.
bool Puller::ReadUnpushed() {
  agentmem_cursor* cur = nullptr;
  const int rc = agentmem_changes_since(r_.db, unread_log_, unread_seq_, &cur);
  if (rc == AGENTMEM_NOTFOUND_CHANGES) return true;  // a new log: all of it is pushed next time
  if (!Check(rc, "change feed")) return false;
  std::unique_ptr<agentmem_cursor, int (*)(agentmem_cursor*)> close(cur, agentmem_cursor_close);
  std::vector<json> txn;
  bool pulled = false, origin = false;
  int step;
  while ((step = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    const agentmem_change& c = *agentmem_cursor_change(cur);
    json j = json::parse(c.data, nullptr, false);
    if (!j.is_object()) return pg_.Fail("change feed: a row's data is not a JSON object");
    if (c.kind == AGENTMEM_CHANGE_META) {
      pulled |= Text(j, "key") == "sync.pulled";
      origin |= Text(j, "key") == "sync.origin";
    }
    if (c.kind == AGENTMEM_CHANGE_BLOCK || c.kind == AGENTMEM_CHANGE_FACT) {
      auto is_new = j.find("new");
      const bool fresh = is_new != j.end() && is_new->is_boolean() && is_new->get<bool>();
      txn.push_back({{"block", c.kind == AGENTMEM_CHANGE_BLOCK}, {"new", fresh},
                     {"user_id", Text(j, "user_id")}, {"name", Text(j, "name")},
                     {"subject", Text(j, "subject")}, {"predicate", Text(j, "predicate")},
                     {"object", Text(j, "object")}});
    }
    if (c.kind != AGENTMEM_CHANGE_COMMIT) continue;
    unread_log_ = c.log_id;
    unread_seq_ = c.seq;
    for (const json& r : txn) {
      if (pulled && !origin) break;
      const std::string user = r["user_id"];
      if (r["block"]) {
        unpushed_blocks_.emplace(user, r["name"]);
      } else if (r["new"]) {
        const std::string object = r["object"];
        unpushed_facts_[{user, r["subject"], r["predicate"]}].insert(object);
      }
    }
    txn.clear();
    pulled = origin = false;
  }
  return Check(step == AGENTMEM_DONE ? AGENTMEM_OK : step, "change feed");
}

// Whether the file declares `predicate` single-valued.
bool SingleValued(agentmem_db* db, const std::string& predicate) {
  char* v = nullptr;
  const bool single =
      agentmem_meta_get(db, ("fact.single_valued." + predicate).c_str(), &v) == AGENTMEM_OK &&
      std::string(v) == "1";
  agentmem_free(v);
  return single;
}

bool Puller::Fetch(int64_t end, std::vector<Pulled>* rows) {
  const std::string from = std::to_string(report_->position), to = std::to_string(end);
  Result res;
  if (!pg_.Query(kRows, {from.c_str(), to.c_str(), r_.origin.c_str()}, &res)) return false;
  std::string error, data;
  const PGresult* q = res.get();
  for (int i = 0; i < PQntuples(q); i++) {
    Pulled& p = rows->emplace_back();
    if (!ReadInt(q, i, 0, &p.gpos, &error) || !ReadText(q, i, 1, 16, &p.origin, &error) ||
        !ReadText(q, i, 2, 64, &p.txn, &error) || !ReadText(q, i, 3, 16, &p.kind, &error) ||
        !ReadInt(q, i, 4, &p.id, &error) || !ReadText(q, i, 5, kMaxTextBytes, &data, &error) ||
        !ReadFloats(q, i, 6, kMaxVectorFloats, &p.vector, &error)) {
      return pg_.Fail(error);
    }
    p.data = json::parse(data, nullptr, false);
    if (!p.data.is_object()) {
      return pg_.Fail("PostgreSQL: change " + std::to_string(p.gpos) +
                      ": data is not a JSON object");
    }
  }
  return true;
}

bool Puller::Exists(const char* sql, const std::vector<const char*>& values, bool* yes) {
  Result res;
  if (!pg_.Query(sql, values, &res)) return false;
  *yes = PQntuples(res.get()) == 1 && PQgetvalue(res.get(), 0, 0)[0] == 't';
  return true;
}

bool Puller::LocalId(const std::string& origin, const char* kind, int64_t id, int64_t* local) {
  const std::string i = std::to_string(id);
  Result res;
  if (!pg_.Query(kLocalId, {origin.c_str(), kind, i.c_str(), r_.origin.c_str()}, &res)) {
    return false;
  }
  std::string error, c_origin;
  int64_t c_id = 0;
  *local = 0;
  if (PQntuples(res.get()) != 1 || !ReadText(res.get(), 0, 0, 16, &c_origin, &error) ||
      !ReadInt(res.get(), 0, 1, &c_id, &error)) {
    return pg_.Fail("PostgreSQL: agentmem_canonical gave no record: " + error);
  }
  auto it = new_ids_.find({kind, c_origin, c_id});
  if (it != new_ids_.end()) {
    *local = it->second;
  } else if (!PQgetisnull(res.get(), 0, 2) && !ReadInt(res.get(), 0, 2, local, &error)) {
    return pg_.Fail(error);
  }
  return true;
}

bool Puller::Episode(const Pulled& p) {
  const json& d = p.data;
  const std::string user = Str(d, "user_id"), session = Str(d, "session_id"),
                    role = Str(d, "role"), text = Str(d, "text"), meta = Str(d, "metadata");
  agentmem_episode ep{};
  ep.user_id = user.c_str();
  ep.session_id = session.c_str();
  ep.role = role.c_str();
  ep.text = text.c_str();
  ep.ts = Int(d, "ts");
  ep.created_at = Int(d, "created_at");
  ep.metadata = meta.c_str();
  ep.vector = p.vector.empty() ? nullptr : p.vector.data();
  ep.dim = static_cast<int>(p.vector.size());
  int64_t local = 0;
  if (!Check(agentmem_episode_put(r_.db, &ep, &local), "applying a pulled episode")) return false;
  new_ids_[{"episode", p.origin, p.id}] = local;
  return true;
}

// The version just written of the block: the current one.
bool CurrentBlock(agentmem_db* db, const std::string& user, const std::string& name,
                  agentmem_block** out) {
  return agentmem_block_get(db, user.c_str(), name.c_str(), out) == AGENTMEM_OK;
}

bool Puller::Block(const Pulled& p) {
  const json& d = p.data;
  const std::string user = Str(d, "user_id"), name = Str(d, "name"), value = Str(d, "value");
  const int64_t limit = Int(d, "limit"), pinned = Int(d, "pinned_order");
  if (limit < 0 || limit > INT32_MAX || pinned < -1 || pinned > INT32_MAX) {
    throw FieldError{"limit or pinned_order is out of range"};
  }
  const std::string g = std::to_string(p.gpos);
  bool own_later = unpushed_blocks_.count({user, name}) > 0;
  if (!own_later &&
      !Exists(kOwnLaterBlock, {r_.origin.c_str(), g.c_str(), user.c_str(), name.c_str()},
              &own_later)) {
    return false;
  }
  // This file's later version, current again after (none when the block
  // was forgotten here since).
  agentmem_block* keep = nullptr;
  const int rc = own_later ? agentmem_block_get(r_.db, user.c_str(), name.c_str(), &keep)
                           : AGENTMEM_NOTFOUND;
  if (rc != AGENTMEM_OK && rc != AGENTMEM_NOTFOUND) {
    return FailOn(&pg_, r_.db, "reading the current block");
  }
  std::unique_ptr<agentmem_block, void (*)(void*)> free_keep(keep, agentmem_free);
  if (!Check(agentmem_block_set(r_.db, user.c_str(), name.c_str(), value.c_str(),
                                static_cast<int>(limit), static_cast<int>(pinned)),
             "applying a pulled block version")) {
    return false;
  }
  agentmem_block* now = nullptr;
  if (!CurrentBlock(r_.db, user, name, &now)) return FailOn(&pg_, r_.db, "reading a block");
  new_ids_[{"block", p.origin, p.id}] = now->version;
  agentmem_free(now);
  if (!keep) return true;
  if (!Check(agentmem_block_set(r_.db, user.c_str(), name.c_str(), keep->value, keep->limit,
                                keep->pinned_order),
             "restoring the current block version")) {
    return false;
  }
  // The copy is this file's own version again: not to be pushed as new.
  if (!CurrentBlock(r_.db, user, name, &now)) return FailOn(&pg_, r_.db, "reading a block");
  new_ids_[{"block", r_.origin, keep->version}] = now->version;
  agentmem_free(now);
  return true;
}

// The earliest valid_from a fact can be asserted with here and still be
// written: past the valid time every current row of its key with the same
// object closes, and not before one still open. (The engine takes an
// assertion whose valid_from falls inside such a row as already known.)
bool Puller::ValidFloor(const std::string& user, const std::string& subject,
                        const std::string& predicate, const std::string& object,
                        int64_t* floor) {
  agentmem_cursor* cur = nullptr;
  if (!Check(agentmem_facts_v2(r_.db, user.c_str(), subject.c_str(), predicate.c_str(), nullptr,
                               0, 0, AGENTMEM_FACTS_ALL_VERSIONS, &cur),
             "reading facts")) {
    return false;
  }
  *floor = 0;
  int rc;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    const agentmem_fact* f = agentmem_cursor_fact(cur);
    if (f->expired_at != kForever || object != f->object) continue;
    *floor = std::max(*floor, f->valid_to == kForever ? f->valid_from : f->valid_to);
  }
  agentmem_cursor_close(cur);
  return Check(rc == AGENTMEM_DONE ? AGENTMEM_OK : rc, "reading facts");
}

bool Puller::Fact(const Pulled& p) {
  const json& d = p.data;
  const std::string user = Str(d, "user_id"), subject = Str(d, "subject"),
                    predicate = Str(d, "predicate"), object = Str(d, "object");
  const double confidence = Num(d, "confidence");
  auto src = d.find("source_episode_ids");
  if (src == d.end() || !src->is_array() || src->size() > 65536) {
    throw FieldError{"source_episode_ids is not an array"};
  }
  std::vector<int64_t> sources;
  for (const json& s : *src) {
    if (!s.is_number_integer()) throw FieldError{"source_episode_ids holds a non-integer"};
    int64_t local = 0;
    if (!LocalId(p.origin, "episode", s.get<int64_t>(), &local)) return false;
    if (local > 0) sources.push_back(local);  // a source forgotten here stays forgotten
  }
  const std::string g = std::to_string(p.gpos);
  auto unpushed = unpushed_facts_.find({user, subject, predicate});
  bool own_later = unpushed != unpushed_facts_.end() &&
                   (unpushed->second.size() > 1 || !unpushed->second.count(object)) &&
                   SingleValued(r_.db, predicate);
  if (!own_later && !Exists(kOwnLaterFact,
              {r_.origin.c_str(), g.c_str(), user.c_str(), subject.c_str(), predicate.c_str(),
               object.c_str()},
              &own_later)) {
    return false;
  }
  agentmem_fact f{};
  f.user_id = user.c_str();
  f.subject = subject.c_str();
  f.predicate = predicate.c_str();
  f.object = object.c_str();
  f.confidence = confidence;
  f.source_episode_ids = sources.data();
  f.n_sources = static_cast<int>(sources.size());
  f.valid_from = Int(d, "valid_from");
  f.valid_to = Int(d, "valid_to");
  f.recorded_at = Int(d, "recorded_at");
  f.expired_at = f.recorded_at;  // superseded here before it arrived: never current
  int64_t local = 0, floor = 0;
  if (!own_later && !ValidFloor(user, subject, predicate, object, &floor)) return false;
  const int64_t valid_from = std::max(f.valid_from, floor);
  const int64_t valid_to = f.valid_to == kForever ? 0 : f.valid_to;
  if (valid_to != 0 && valid_to <= valid_from) return true;  // over before it would start here
  const int rc = own_later ? agentmem_fact_put(r_.db, &f, &local)
                           : agentmem_fact_assert(r_.db, f.user_id, f.subject, f.predicate,
                                                  f.object, f.confidence, valid_from, valid_to,
                                                  sources.data(), f.n_sources, &local);
  if (!Check(rc, "applying a pulled fact")) return false;
  new_ids_[{"fact", p.origin, p.id}] = local;
  return true;
}

bool Puller::Forget(const Pulled& p) {
  const json& d = p.data;
  const std::string scope = Str(d, "scope"), user = Str(d, "user_id");
  int rc = AGENTMEM_OK;
  if (scope == "user") {
    rc = agentmem_forget(r_.db, user.c_str(), nullptr, 0, 0, nullptr);
  } else if (scope == "session") {
    rc = agentmem_forget(r_.db, user.c_str(), Str(d, "session_id").c_str(), 0, 0, nullptr);
  } else if (scope == "before") {
    const int64_t before = Int(d, "before");
    if (before <= 0) throw FieldError{"before is not a time"};
    rc = agentmem_forget(r_.db, user.c_str(), nullptr, before, 0, nullptr);
  } else if (scope == "block") {
    rc = agentmem_forget_block(r_.db, user.c_str(), Str(d, "name").c_str(), 0, nullptr);
  } else if (scope == "episode" || scope == "fact") {
    int64_t local = 0;
    if (!LocalId(p.origin, scope.c_str(), Int(d, "id"), &local)) return false;
    if (local == 0) return true;  // never here
    rc = scope == "episode" ? agentmem_forget_episode(r_.db, local, 0, nullptr)
                            : agentmem_forget_fact(r_.db, local, 0, nullptr);
  } else {
    throw FieldError{"scope \"" + scope + "\" is unknown"};
  }
  report_->forgets++;
  return Check(rc, "applying a pulled forget");
}

bool Puller::Apply(const Pulled& p, bool remainder) {
  if (p.kind == "episode") return Episode(p);
  if (p.kind == "block") return Block(p);
  if (p.kind == "fact") {
    // A supersession's new version of a fact, and the rest of its valid
    // time, are derived: this file supersedes by its own assertions.
    return !IsNew(p.data) || remainder || Fact(p);
  }
  if (p.kind == "forget") return Forget(p);
  if (p.kind == "meta") {
    const std::string key = Str(p.data, "key");
    static const std::string kSingle = "fact.single_valued.";
    if (key.size() <= kSingle.size() || key.rfind(kSingle, 0) != 0) return true;
    return Check(agentmem_predicate_declare(r_.db, key.substr(kSingle.size()).c_str(),
                                            Str(p.data, "value") == "1"),
                 "declaring a pulled predicate");
  }
  return true;  // commit rows; retention is each file's own
}

// The key a fact row supersedes or is the remainder of, within its source
// transaction.
std::string FactKey(const Pulled& p) {
  std::string key = p.txn;
  for (const char* f : {"user_id", "subject", "predicate", "object"}) {
    key += '\x1f' + Str(p.data, f);
  }
  return key;
}

bool Puller::ApplyBatch(int64_t end, const std::vector<Pulled>& rows) {
  new_ids_.clear();
  std::set<std::string> superseded;
  const Pulled* at = nullptr;  // the row being read, for the message
  try {
    for (const Pulled& p : rows) {
      at = &p;
      if (p.kind == "fact" && !IsNew(p.data)) superseded.insert(FactKey(p));
    }
    // The position first: it takes the write lock before the file's own
    // unpushed writes are read.
    const std::string position = std::to_string(end);
    if (!Check(agentmem_begin(r_.db), "beginning the pull transaction") ||
        !Check(agentmem_meta_set(r_.db, "sync.pulled", position.c_str()), "writing sync.pulled") ||
        !ReadUnpushed()) {
      return false;
    }
    const int64_t forgets = report_->forgets;
    for (const Pulled& p : rows) {
      at = &p;
      const bool remainder = p.kind == "fact" && superseded.count(FactKey(p));
      if (!Apply(p, remainder)) return false;
    }
    // The file is vacuumed at the end of this run, or of the next one if
    // this one stops first.
    if (report_->forgets > forgets &&
        !Check(agentmem_meta_set(r_.db, "sync.purge", "1"), "writing sync.purge")) {
      return false;
    }
  } catch (const FieldError& e) {
    return pg_.Fail("PostgreSQL: change " + std::to_string(at->gpos) + " (" + at->kind +
                    "): " + e.what);
  }
  std::string kinds = "{", origins = "{";
  std::vector<int64_t> ids, locals;
  for (const auto& [key, local] : new_ids_) {
    kinds += (ids.empty() ? "" : ",") + std::get<0>(key);
    origins += (ids.empty() ? "" : ",") + std::get<1>(key);
    ids.push_back(std::get<2>(key));
    locals.push_back(local);
  }
  kinds += "}";
  origins += "}";
  const std::string id_list = IntArray(ids), local_list = IntArray(locals);
  if (!ids.empty() && !pg_.Exec(kMapIds, {r_.origin.c_str(), kinds.c_str(), origins.c_str(),
                                          id_list.c_str(), local_list.c_str()})) {
    return false;
  }
  if (!Check(agentmem_commit(r_.db), "committing the pull transaction")) return false;
  report_->changes += static_cast<int64_t>(rows.size());
  report_->position = end;
  return true;
}

bool Puller::Run() {
  if (!ReadPosition()) return false;
  for (;;) {
    const std::string from = std::to_string(report_->position);
    Result res;
    if (!pg_.Query(kBatchEnd, {from.c_str()}, &res)) return false;
    if (PQntuples(res.get()) != 1 || PQgetisnull(res.get(), 0, 0)) return true;
    int64_t end = 0;
    std::string error;
    if (!ReadInt(res.get(), 0, 0, &end, &error)) return pg_.Fail(error);
    if (end <= report_->position) return pg_.Fail("PostgreSQL: the change log went backwards");
    std::vector<Pulled> rows;
    if (!Fetch(end, &rows) || !ApplyBatch(end, rows)) return false;
  }
}

}  // namespace

bool Pull(const Replica& r, const PushReport& push, PullReport* report) {
  // What the pulled forgets remove is kept for the vacuum's proof.
  if (agentmem_forget_collect(r.db, 1) != AGENTMEM_OK) {
    return FailOn(r.pg, r.db, "collecting what forgets remove");
  }
  if (!Puller(r, push, report).Run()) return false;
  // What another file forgot leaves this one's bytes too, as after a forget
  // with PURGE here: sync.purge, set with the forgets, asks for it.
  char* v = nullptr;
  const int rc = agentmem_meta_get(r.db, "sync.purge", &v);
  const bool due = rc == AGENTMEM_OK && std::string(v) == "1";
  agentmem_free(v);
  if (rc != AGENTMEM_OK && rc != AGENTMEM_NOTFOUND) {
    return FailOn(r.pg, r.db, "reading sync.purge");
  }
  if (!due) return true;
  agentmem_receipt receipt{};
  if (agentmem_vacuum(r.db, &receipt) != AGENTMEM_OK) {
    return FailOn(r.pg, r.db, "vacuum after the pulled forgets");
  }
  // Before sync.purge is cleared: a receipt that could not be written is
  // written by the next run, after its vacuum.
  if (!WriteReceiptsPulled(r.pg, r.origin, report->position,
                           Receipt{receipt.needles, receipt.residue}, &report->receipts)) {
    return false;
  }
  if (agentmem_meta_set(r.db, "sync.purge", "0") != AGENTMEM_OK) {
    return FailOn(r.pg, r.db, "writing sync.purge");
  }
  report->purged = true;
  return true;
}

}  // namespace agentmem::sync

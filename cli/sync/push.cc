// cli/sync/push.cc -- the push step of `agentmem sync` (sync_internal.h):
// the file's change feed after the position agentmem_origins holds for its
// origin, one source transaction at a time, into agentmem_changes (a global
// order, gpos) and the canonical tables episodes, blocks and facts. The
// transactions a pull wrote (a sync.pulled meta row and no sync.origin one)
// are not the file's own and are left out.
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

// One feed row, copied out of the cursor (a transaction is read whole
// before it is written).
struct Row {
  int kind = 0;
  std::string kind_name, user_id, data;
  int64_t id = 0, seq = 0, commit_ts = 0;
  std::vector<float> vector;
  bool fact_new = false;
  std::string meta_key, meta_value;  // meta rows
  std::string fact_key;              // fact rows: user, subject, predicate, object
};

// A string member of a feed row's data; "" when it has none.
std::string Member(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A source transaction's rows ($4: a JSON array of {pos, kind, id, user_id,
// data (the JSON as text), v (the vector, or null)}) in one statement, in
// pos order, so that gpos follows it.
constexpr const char* kInsertChanges =
    "INSERT INTO agentmem_changes (origin, log, seq, pos, kind, id, user_id, data, vector,"
    " commit_ts) SELECT $1, $2, $3, r.pos, r.kind, r.id, r.user_id, r.data::jsonb,"
    " CASE WHEN r.v IS NULL THEN NULL"
    "  ELSE ARRAY(SELECT jsonb_array_elements_text(r.v)::real) END, $5"
    " FROM jsonb_to_recordset($4::jsonb) AS r(pos integer, kind text, id bigint, user_id text,"
    "  data text, v jsonb) ORDER BY r.pos ON CONFLICT DO NOTHING RETURNING gpos, pos";

// The episodes and block versions among the change rows just written ($1
// the origin, $2 their gpos).
constexpr const char* kInsertEpisodes =
    "INSERT INTO episodes (origin, id, gpos, user_id, session_id, role, text, ts, created_at,"
    " metadata, embedding) SELECT $1, (d->>'id')::bigint, c.gpos, d->>'user_id',"
    " d->>'session_id', d->>'role', d->>'text', (d->>'ts')::bigint,"
    " (d->>'created_at')::bigint, d->>'metadata', c.vector"
    " FROM agentmem_changes c, LATERAL (SELECT c.data AS d) x"
    " WHERE c.gpos = ANY($2::bigint[]) AND c.kind = 'episode' ON CONFLICT DO NOTHING";

constexpr const char* kInsertBlocks =
    "INSERT INTO blocks (origin, version, gpos, user_id, name, value, \"limit\", pinned_order,"
    " updated_at) SELECT $1, (d->>'version')::bigint, c.gpos, d->>'user_id', d->>'name',"
    " d->>'value', (d->>'limit')::integer, (d->>'pinned_order')::integer,"
    " (d->>'updated_at')::bigint FROM agentmem_changes c, LATERAL (SELECT c.data AS d) x"
    " WHERE c.gpos = ANY($2::bigint[]) AND c.kind = 'block' ON CONFLICT DO NOTHING";

constexpr const char* kInsertFact =
    "INSERT INTO facts (origin, id, gpos, user_id, subject, predicate, object, confidence,"
    " source_episode_ids, valid_from, valid_to, recorded_at, expired_at, derived)"
    " SELECT $1, (d->>'id')::bigint, $2, d->>'user_id', d->>'subject', d->>'predicate',"
    " d->>'object', (d->>'confidence')::double precision,"
    " ARRAY(SELECT jsonb_array_elements_text(d->'source_episode_ids')::bigint),"
    " (d->>'valid_from')::bigint, (d->>'valid_to')::bigint, (d->>'recorded_at')::bigint,"
    " (d->>'expired_at')::bigint, $4 FROM (SELECT $3::jsonb AS d) x ON CONFLICT DO NOTHING";

// A fact of a single-valued predicate asserted later in the global order
// supersedes the current rows of its key with another object whose valid
// time reaches past its valid_from, whichever file wrote them (not the rows
// a supersession derived: what was valid before) (docs/replication.md,
// "Conflicts").
constexpr const char* kSupersede =
    "UPDATE facts f SET expired_at = GREATEST(f.recorded_at, (d->>'recorded_at')::bigint)"
    " FROM (SELECT $2::jsonb AS d) x WHERE f.user_id = d->>'user_id'"
    " AND f.subject = d->>'subject' AND f.predicate = d->>'predicate'"
    " AND f.object <> d->>'object' AND f.expired_at = 9223372036854775807 AND f.gpos < $1"
    " AND NOT f.derived AND f.valid_to > (d->>'valid_from')::bigint"
    " AND EXISTS (SELECT 1 FROM agentmem_predicates p WHERE p.predicate = d->>'predicate'"
    "  AND p.single_valued)";

// A new version of a fact (new = false): its time axes as the file now has
// them, on the record it is ($1 this origin, $2 the file's fact id).
constexpr const char* kUpdateFact =
    "UPDATE facts f SET valid_from = (d->>'valid_from')::bigint,"
    " valid_to = (d->>'valid_to')::bigint, expired_at = (d->>'expired_at')::bigint"
    " FROM (SELECT $3::jsonb AS d) x, agentmem_canonical($1, 'fact', $2) c"
    " WHERE f.origin = c.origin AND f.id = c.origin_id";

constexpr const char* kPredicate =
    "INSERT INTO agentmem_predicates VALUES (substr($1, 20), $2 = '1')"
    " ON CONFLICT (predicate) DO UPDATE SET single_valued = EXCLUDED.single_valued";

// What a forget ($1 its data, $2 the origin that forgot) names, in every
// origin's records: the rows of the canonical tables, and the change rows
// that carried them. Retention is per file and not applied here.
constexpr const char* kForget =
    "WITH x AS (SELECT $1::jsonb AS d),"
    " ep AS (SELECT * FROM agentmem_canonical($2, 'episode',"
    "  COALESCE(($1::jsonb->>'id')::bigint, 0))),"
    " fa AS (SELECT * FROM agentmem_canonical($2, 'fact',"
    "  COALESCE(($1::jsonb->>'id')::bigint, 0))),"
    " e AS (DELETE FROM episodes e USING x WHERE CASE d->>'scope'"
    "  WHEN 'user' THEN e.user_id = d->>'user_id'"
    "  WHEN 'session' THEN e.user_id = d->>'user_id' AND e.session_id = d->>'session_id'"
    "  WHEN 'before' THEN e.user_id = d->>'user_id' AND e.ts < (d->>'before')::bigint"
    "  WHEN 'episode' THEN (e.origin, e.id) = (SELECT origin, origin_id FROM ep)"
    "  ELSE false END RETURNING e.origin, e.id),"
    " b AS (DELETE FROM blocks b USING x WHERE b.user_id = d->>'user_id' AND"
    "  (d->>'scope' = 'user' OR (d->>'scope' = 'block' AND b.name = d->>'name'))"
    "  RETURNING b.origin, b.version),"
    " f AS (DELETE FROM facts f USING x WHERE (d->>'scope' = 'user' AND f.user_id = d->>'user_id')"
    "  OR (d->>'scope' = 'fact' AND (f.origin, f.id) = (SELECT origin, origin_id FROM fa))"
    "  RETURNING f.origin, f.id)"
    " DELETE FROM agentmem_changes c WHERE"
    " (c.kind = 'episode' AND (c.origin, c.id) IN (SELECT * FROM e))"
    " OR (c.kind = 'block' AND (c.origin, c.id) IN (SELECT * FROM b))"
    " OR (c.kind = 'fact' AND (c.origin, c.id) IN (SELECT * FROM f))";

// The facts a forget of episodes ($1 its data) leaves with no source: with
// at least one cited episode, and none of them in episodes any more, as the
// engine forgets them with their episodes (docs/format.md §5.9); and their
// change rows.
constexpr const char* kForgetUnsourced =
    "WITH gone AS (DELETE FROM facts f USING (SELECT $1::jsonb AS d) x"
    " WHERE d->>'scope' IN ('session', 'before', 'episode')"
    " AND (f.user_id = d->>'user_id' OR d->>'user_id' = '')"
    " AND cardinality(f.source_episode_ids) > 0 AND NOT EXISTS (SELECT 1"
    "  FROM unnest(f.source_episode_ids) AS s(id)"
    "  CROSS JOIN LATERAL agentmem_canonical(f.origin, 'episode', s.id) AS c"
    "  JOIN episodes e ON e.origin = c.origin AND e.id = c.origin_id)"
    " RETURNING f.origin, f.id)"
    " DELETE FROM agentmem_changes c WHERE c.kind = 'fact'"
    " AND (c.origin, c.id) IN (SELECT * FROM gone)";

// The file's records (kind, local id) that PostgreSQL holds already: those
// it pulled, and those it pushed before a VACUUM gave it a new log.
constexpr const char* kAlreadyThere =
    "SELECT kind, local_id FROM agentmem_local_ids WHERE replica = $1"
    " UNION SELECT kind, id FROM agentmem_changes WHERE origin = $1"
    "  AND kind IN ('episode', 'block', 'fact')";

// What this file ($1) held in PostgreSQL -- its own records and those it
// pulled -- as (kind, id here, user, block name, text or block value,
// vector).
constexpr const char* kHeld =
    "SELECT 'episode', id, user_id, '', text, embedding::text FROM episodes WHERE origin = $1"
    " UNION ALL SELECT 'episode', m.local_id, e.user_id, '', e.text, e.embedding::text"
    "  FROM agentmem_local_ids m JOIN episodes e ON e.origin = m.origin AND e.id = m.origin_id"
    "  WHERE m.replica = $1 AND m.kind = 'episode'"
    " UNION ALL SELECT 'fact', id, user_id, '', '', NULL FROM facts WHERE origin = $1"
    " UNION ALL SELECT 'fact', m.local_id, f.user_id, '', '', NULL FROM agentmem_local_ids m"
    "  JOIN facts f ON f.origin = m.origin AND f.id = m.origin_id"
    "  WHERE m.replica = $1 AND m.kind = 'fact'"
    " UNION ALL SELECT 'block', version, user_id, name, value, NULL FROM blocks WHERE origin = $1"
    " UNION ALL SELECT 'block', m.local_id, b.user_id, b.name, b.value, NULL"
    "  FROM agentmem_local_ids m JOIN blocks b ON b.origin = m.origin AND b.version = m.origin_id"
    "  WHERE m.replica = $1 AND m.kind = 'block'";

// A needle of the proof: byte strings shorter than 16 bytes would match
// innocent bytes and are not searched for (as PURGE does).
void AddNeedle(std::string bytes, std::set<std::string>* needles) {
  if (bytes.size() >= 16) needles->insert(std::move(bytes));
}

class Pusher {
 public:
  Pusher(const Replica& r, PushReport* report) : r_(r), pg_(*r.pg), report_(report) {}
  bool Run();

 private:
  bool OpenFeed(agentmem_cursor** cur);
  bool Step(agentmem_cursor* cur, std::vector<Row>* txn, bool* done);
  bool PushTxn(const std::vector<Row>& txn);
  bool ReadThere();
  bool Insert(const std::vector<const Row*>& rows, std::vector<int64_t>* gpos);
  bool Canonical(const Row& row, int64_t gpos, bool remainder);
  bool SavePosition(int64_t seq);
  bool ForgetMissing();
  bool Prove(const std::set<std::string>& needles);

  // A read from the log's start: the records the file holds, (kind, id),
  // and those of them PostgreSQL holds already, (kind name, id).
  std::set<std::pair<int, int64_t>> held_;
  std::set<std::pair<std::string, int64_t>> there_;

  const Replica& r_;
  Pg& pg_;
  PushReport* report_;
  std::string log_;
  int in_batch_ = 0;
};

// The feed after the origin's position, or from 0 (report_->resync) when
// PostgreSQL holds none or a log the file does not hold (a VACUUM).
bool Pusher::OpenFeed(agentmem_cursor** cur) {
  Result res;
  const char* origin = r_.origin.c_str();
  if (!pg_.Query("SELECT log, seq FROM agentmem_origins WHERE origin = $1", {origin}, &res)) {
    return false;
  }
  std::string error, log;
  int64_t seq = 0;
  if (PQntuples(res.get()) == 1) {
    if (!ReadText(res.get(), 0, 0, 16, &log, &error) || !ReadInt(res.get(), 0, 1, &seq, &error)) {
      return pg_.Fail(error);
    }
    const uint64_t log_id = std::strtoull(log.c_str(), nullptr, 16);
    const int rc = agentmem_changes_since(r_.db, log_id, seq, cur);
    if (rc == AGENTMEM_OK) {
      report_->pushed_log = log_id;
      report_->pushed_seq = seq;
      return true;
    }
    if (rc != AGENTMEM_NOTFOUND_CHANGES) return FailOn(&pg_, r_.db, "change feed");
    report_->resync = true;
  }
  if (agentmem_changes_since(r_.db, 0, 0, cur) != AGENTMEM_OK) {
    return FailOn(&pg_, r_.db, "change feed");
  }
  return true;
}

// Reads one whole transaction into *txn; *done when the feed has ended.
bool Pusher::Step(agentmem_cursor* cur, std::vector<Row>* txn, bool* done) {
  txn->clear();
  int rc;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    const agentmem_change& c = *agentmem_cursor_change(cur);
    char log[24];
    std::snprintf(log, sizeof log, "%016" PRIx64, c.log_id);
    log_ = log;
    Row& row = txn->emplace_back();
    row.kind = c.kind;
    row.kind_name = c.kind_name;
    row.user_id = c.user_id;
    row.data = c.data;
    row.id = c.id;
    row.seq = c.seq;
    row.commit_ts = c.commit_ts;
    if (c.vector) row.vector.assign(c.vector, c.vector + c.dim);
    if (c.kind == AGENTMEM_CHANGE_FACT || c.kind == AGENTMEM_CHANGE_META) {
      const nlohmann::json j = nlohmann::json::parse(row.data, nullptr, false);
      if (!j.is_object()) return pg_.Fail("change feed: a row's data is not a JSON object");
      auto is_new = j.find("new");
      row.fact_new = is_new != j.end() && is_new->is_boolean() && is_new->get<bool>();
      row.meta_key = Member(j, "key");
      row.meta_value = Member(j, "value");
      if (c.kind == AGENTMEM_CHANGE_FACT) {
        for (const char* f : {"user_id", "subject", "predicate", "object"}) {
          row.fact_key += Member(j, f) + '\x1f';
        }
      }
    }
    if (report_->resync && c.kind >= AGENTMEM_CHANGE_EPISODE && c.kind <= AGENTMEM_CHANGE_FACT) {
      held_.emplace(c.kind, c.id);
    }
    if (c.kind == AGENTMEM_CHANGE_COMMIT) return true;
  }
  if (rc != AGENTMEM_DONE) return FailOn(&pg_, r_.db, "change feed");
  *done = true;
  return true;
}

// Reads kAlreadyThere into there_ (once, for a read from the log's start).
bool Pusher::ReadThere() {
  Result res;
  if (!pg_.Query(kAlreadyThere, {r_.origin.c_str()}, &res)) return false;
  std::string kind, error;
  for (int i = 0; i < PQntuples(res.get()); i++) {
    int64_t id = 0;
    if (!ReadText(res.get(), i, 0, 16, &kind, &error) || !ReadInt(res.get(), i, 1, &id, &error)) {
      return pg_.Fail(error);
    }
    there_.emplace(kind, id);
  }
  return true;
}

// Writes `rows` (pos = their index) into agentmem_changes; gpos[i] is row
// i's global position, 0 when it was there already (a run that stopped
// after writing it).
bool Pusher::Insert(const std::vector<const Row*>& rows, std::vector<int64_t>* gpos) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < rows.size(); i++) {
    const Row& r = *rows[i];
    nlohmann::json v = nullptr;
    if (!r.vector.empty()) v = r.vector;
    list.push_back({{"pos", i}, {"kind", r.kind_name}, {"id", r.id}, {"user_id", r.user_id},
                    {"data", r.data}, {"v", v}});
  }
  const std::string json = list.dump(), seq = std::to_string(rows[0]->seq),
                    ts = std::to_string(rows[0]->commit_ts);
  Result res;
  if (!pg_.Query(kInsertChanges,
                 {r_.origin.c_str(), log_.c_str(), seq.c_str(), json.c_str(), ts.c_str()},
                 &res)) {
    return false;
  }
  gpos->assign(rows.size(), 0);
  std::string error;
  for (int i = 0; i < PQntuples(res.get()); i++) {
    int64_t g = 0, pos = 0;
    if (!ReadInt(res.get(), i, 0, &g, &error) || !ReadInt(res.get(), i, 1, &pos, &error)) {
      return pg_.Fail(error);
    }
    if (pos < 0 || pos >= static_cast<int64_t>(rows.size())) return pg_.Fail("PostgreSQL: bad pos");
    (*gpos)[pos] = g;
  }
  return true;
}

// The row's record in the canonical tables.
bool Pusher::Canonical(const Row& row, int64_t gpos, bool remainder) {
  const std::string g = std::to_string(gpos), id = std::to_string(row.id);
  const char* origin = r_.origin.c_str();
  switch (row.kind) {
    case AGENTMEM_CHANGE_FACT:
      if (!row.fact_new) return pg_.Exec(kUpdateFact, {origin, id.c_str(), row.data.c_str()});
      if (!pg_.Exec(kInsertFact, {origin, g.c_str(), row.data.c_str(), remainder ? "t" : "f"})) {
        return false;
      }
      return remainder || pg_.Exec(kSupersede, {g.c_str(), row.data.c_str()});
    case AGENTMEM_CHANGE_FORGET:
      return pg_.Exec(kForget, {row.data.c_str(), origin}) &&
             pg_.Exec(kForgetUnsourced, {row.data.c_str()});
    case AGENTMEM_CHANGE_META:
      if (row.meta_key.rfind("fact.single_valued.", 0) != 0) return true;
      return pg_.Exec(kPredicate, {row.meta_key.c_str(), row.meta_value.c_str()});
    default:
      return true;
  }
}

bool Pusher::PushTxn(const std::vector<Row>& txn) {
  bool pulled = false, has_origin = false;
  for (const Row& row : txn) {
    pulled |= row.meta_key == "sync.pulled";
    has_origin |= row.meta_key == "sync.origin";
  }
  if (pulled && !has_origin) {
    report_->skipped++;
    return true;
  }
  // A superseded fact's new version and the rest of its valid time, if any,
  // come in the transaction that superseded it: the rest ("remainder") is
  // the same fact, and supersedes nothing itself.
  std::set<std::string> superseded;
  for (const Row& row : txn) {
    if (row.kind == AGENTMEM_CHANGE_FACT && !row.fact_new) superseded.insert(row.fact_key);
  }
  std::vector<const Row*> rows;
  for (const Row& row : txn) {
    const bool record = row.kind == AGENTMEM_CHANGE_EPISODE || row.kind == AGENTMEM_CHANGE_BLOCK ||
                        (row.kind == AGENTMEM_CHANGE_FACT && row.fact_new);
    if (row.kind == AGENTMEM_CHANGE_META && row.meta_key.rfind("sync.", 0) == 0) continue;
    if (row.kind == AGENTMEM_CHANGE_COMMIT && rows.empty()) continue;
    if (report_->resync && record && there_.count({row.kind_name, row.id})) {
      report_->skipped++;
      continue;
    }
    rows.push_back(&row);
  }
  if (rows.empty()) return true;
  std::vector<int64_t> gpos;
  if (!Insert(rows, &gpos)) return false;
  // Episodes and block versions first, in two statements: a transaction
  // applies them before its facts and forgets.
  std::vector<int64_t> records;
  int written = 0;
  for (size_t i = 0; i < rows.size(); i++) {
    written += gpos[i] != 0;
    const int kind = rows[i]->kind;
    if (gpos[i] && (kind == AGENTMEM_CHANGE_EPISODE || kind == AGENTMEM_CHANGE_BLOCK)) {
      records.push_back(gpos[i]);
    }
  }
  const std::string list = IntArray(records);
  if (!records.empty() && (!pg_.Exec(kInsertEpisodes, {r_.origin.c_str(), list.c_str()}) ||
                           !pg_.Exec(kInsertBlocks, {r_.origin.c_str(), list.c_str()}))) {
    return false;
  }
  for (size_t i = 0; i < rows.size(); i++) {
    const Row& row = *rows[i];
    if (gpos[i] == 0 || row.kind == AGENTMEM_CHANGE_EPISODE || row.kind == AGENTMEM_CHANGE_BLOCK) {
      continue;
    }
    const bool remainder = row.kind == AGENTMEM_CHANGE_FACT && superseded.count(row.fact_key);
    if (!Canonical(row, gpos[i], remainder)) return false;
  }
  report_->changes += written;
  in_batch_ += written;
  return true;
}

bool Pusher::SavePosition(int64_t seq) {
  const std::string s = std::to_string(seq);
  return pg_.Exec("INSERT INTO agentmem_origins VALUES ($1, $2, $3) ON CONFLICT (origin)"
                  " DO UPDATE SET log = EXCLUDED.log, seq = EXCLUDED.seq",
                  {r_.origin.c_str(), log_.c_str(), s.c_str()});
}

// After a VACUUM (a new log, read from its start): what PostgreSQL holds
// of this file that the file no longer holds was forgotten here, and the
// forget records went with the old log. Each becomes a forget row (seq 0 of
// the new log: before its first commit) for one episode, one fact, or a
// block of which no version is left, applied like any other.
bool Pusher::ForgetMissing() {
  Result res;
  if (!pg_.Query(kHeld, {r_.origin.c_str()}, &res)) return false;
  std::vector<nlohmann::json> forgets;
  std::set<std::pair<std::string, std::string>> blocks_gone, blocks_kept;
  // The bytes of what the file no longer holds, by block: the proof that the
  // file's own PURGE removed them.
  std::set<std::string> needles;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> block_values;
  std::string error, kind, user, name, text;
  std::vector<float> vector;
  for (int i = 0; i < PQntuples(res.get()); i++) {
    int64_t id = 0;
    if (!ReadText(res.get(), i, 0, 16, &kind, &error) || !ReadInt(res.get(), i, 1, &id, &error) ||
        !ReadText(res.get(), i, 2, kMaxTextBytes, &user, &error) ||
        !ReadText(res.get(), i, 3, kMaxTextBytes, &name, &error) ||
        !ReadText(res.get(), i, 4, kMaxTextBytes, &text, &error) ||
        !ReadFloats(res.get(), i, 5, kMaxVectorFloats, &vector, &error)) {
      return pg_.Fail(error);
    }
    const int k = kind == "episode" ? AGENTMEM_CHANGE_EPISODE
                  : kind == "fact"  ? AGENTMEM_CHANGE_FACT
                                    : AGENTMEM_CHANGE_BLOCK;
    const bool held = held_.count({k, id}) > 0;
    if (k == AGENTMEM_CHANGE_BLOCK) {
      (held ? blocks_kept : blocks_gone).emplace(user, name);
      block_values[{user, name}].push_back(text);
    } else if (!held) {
      if (k == AGENTMEM_CHANGE_EPISODE) {
        AddNeedle(text, &needles);
        AddNeedle(std::string(reinterpret_cast<const char*>(vector.data()),
                              vector.size() * sizeof(float)),
                  &needles);
      }
      forgets.push_back({{"scope", kind}, {"user_id", user}, {"session_id", ""}, {"name", ""},
                         {"before", 0}, {"id", id}});
    }
  }
  for (const auto& [u, n] : blocks_gone) {
    if (blocks_kept.count({u, n})) continue;
    for (const std::string& value : block_values[{u, n}]) AddNeedle(value, &needles);
    forgets.push_back({{"scope", "block"}, {"user_id", u}, {"session_id", ""}, {"name", n},
                       {"before", 0}, {"id", 0}});
  }
  std::vector<Row> txn;
  for (const nlohmann::json& f : forgets) {
    Row& row = txn.emplace_back();
    row.kind = AGENTMEM_CHANGE_FORGET;
    row.kind_name = "forget";
    row.user_id = f["user_id"].get<std::string>();
    row.data = f.dump();
    row.id = f["id"].get<int64_t>();
  }
  if (txn.empty()) return true;
  Row& commit = txn.emplace_back();
  commit.kind = AGENTMEM_CHANGE_COMMIT;
  commit.kind_name = "commit";
  commit.data = "{}";
  const bool resync = report_->resync;
  report_->resync = false;  // these rows are new, not records to look for
  const bool ok = PushTxn(txn);
  report_->resync = resync;
  return ok && Prove(needles);
}

// The receipt of the file's own purge (the forget rows just written, seq 0
// of its new log): the bytes PostgreSQL held of what it forgot, searched
// for in the file.
bool Pusher::Prove(const std::set<std::string>& needles) {
  std::vector<const void*> data;
  std::vector<int64_t> sizes;
  for (const std::string& n : needles) {
    data.push_back(n.data());
    sizes.push_back(static_cast<int64_t>(n.size()));
  }
  int64_t found = 0;
  if (agentmem_search_bytes(r_.db, data.data(), sizes.data(), static_cast<int>(data.size()),
                            &found) != AGENTMEM_OK) {
    return FailOn(&pg_, r_.db, "searching the file for what it forgot");
  }
  const Receipt receipt{static_cast<int64_t>(needles.size()), found};
  return WriteReceipt(&pg_, r_.origin, log_, 0, r_.origin, receipt, &report_->receipts);
}

bool Pusher::Run() {
  agentmem_cursor* cur = nullptr;
  if (!OpenFeed(&cur)) return false;
  std::unique_ptr<agentmem_cursor, int (*)(agentmem_cursor*)> close(cur, agentmem_cursor_close);
  if (!pg_.Exec("BEGIN", {}) || (report_->resync && !ReadThere())) return false;
  std::vector<Row> txn;
  bool done = false;
  int64_t last = 0;
  while (true) {
    if (!Step(cur, &txn, &done)) return false;
    if (txn.empty() || done) break;  // (a feed ends at a commit row)
    if (report_->first == 0) report_->first = txn.front().seq;
    last = report_->last = txn.front().seq;
    if (!PushTxn(txn)) return false;
    // A read from the log's start is written in one PostgreSQL transaction
    // with the forgets it finds at its end (ForgetMissing): a run stopped
    // half-way must not leave the position in the new log without them.
    if (in_batch_ >= kChangesPerBatch && !report_->resync) {
      if (!SavePosition(last) || !pg_.Exec("COMMIT", {}) || !pg_.Exec("BEGIN", {})) return false;
      in_batch_ = 0;
    }
  }
  if (report_->resync && !ForgetMissing()) return false;
  if (last != 0 && !SavePosition(last)) return false;
  report_->log = log_;
  if (last != 0) {
    report_->pushed_log = std::strtoull(log_.c_str(), nullptr, 16);
    report_->pushed_seq = last;
  }
  return pg_.Exec("COMMIT", {});
}

}  // namespace

bool Push(const Replica& r, PushReport* report) { return Pusher(r, report).Run(); }

}  // namespace agentmem::sync

// cli/sync/sync.cc -- `agentmem sync FILE postgresql://...` (sync.h): reads the
// file's change feed (agentmem_changes_since) after the position PostgreSQL
// already holds and writes it there, in the tables of kSchema: every change
// row into agentmem_changes, episodes into episodes, and forgets applied to
// both. A pure client of agentmem.h and libpq.
#include "sync/sync.h"

#include <agentmem.h>
#include <libpq-fe.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace agentmem::sync {
namespace {

constexpr const char* kUsage =
    "Usage: agentmem sync FILE CONNINFO\n"
    "Pushes FILE's change feed into PostgreSQL (CONNINFO: a libpq connection string or URI,\n"
    "e.g. postgresql://user@host/db): tables agentmem_changes and episodes, created when\n"
    "missing. Idempotent: a second run writes only the commits made since.\n";

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS agentmem_changes ("
    " log text NOT NULL, seq bigint NOT NULL, pos integer NOT NULL, kind text NOT NULL,"
    " id bigint NOT NULL, user_id text NOT NULL, data jsonb NOT NULL, vector real[],"
    " commit_ts bigint NOT NULL, PRIMARY KEY (log, seq, pos));"
    "CREATE TABLE IF NOT EXISTS episodes ("
    " id bigint PRIMARY KEY, user_id text NOT NULL, session_id text NOT NULL,"
    " role text NOT NULL, text text NOT NULL, ts bigint NOT NULL, created_at bigint NOT NULL,"
    " metadata text NOT NULL, embedding real[],"
    " tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED);"
    "CREATE INDEX IF NOT EXISTS episodes_user ON episodes (user_id, session_id);"
    "CREATE INDEX IF NOT EXISTS episodes_tsv ON episodes USING gin (tsv);";

// The episodes a forget row names (its data as $1), by the rules of
// docs/format.md §5.9; retention is decided by the file (ForgetRetention).
constexpr const char* kForgetEpisodes =
    "DELETE FROM episodes e USING (SELECT $1::jsonb AS d) x WHERE CASE x.d->>'scope'"
    " WHEN 'user' THEN e.user_id = x.d->>'user_id'"
    " WHEN 'session' THEN e.user_id = x.d->>'user_id' AND e.session_id = x.d->>'session_id'"
    " WHEN 'before' THEN e.user_id = x.d->>'user_id' AND e.ts < (x.d->>'before')::bigint"
    " WHEN 'episode' THEN e.id = (x.d->>'id')::bigint ELSE false END RETURNING e.id";

// The change rows that carry what a forget removed ($1 its data, $2 the
// episode ids it removed): nothing forgotten stays in the change log either.
constexpr const char* kForgetChanges =
    "DELETE FROM agentmem_changes c USING (SELECT $1::jsonb AS d) x WHERE"
    " (c.kind = 'episode' AND c.id = ANY($2::bigint[]))"
    " OR (x.d->>'scope' = 'user' AND c.user_id = x.d->>'user_id'"
    "     AND c.kind IN ('episode', 'block', 'fact'))"
    " OR (x.d->>'scope' = 'block' AND c.kind = 'block' AND c.user_id = x.d->>'user_id'"
    "     AND c.data->>'name' = x.d->>'name')"
    " OR (x.d->>'scope' = 'fact' AND c.kind = 'fact' AND c.id = (x.d->>'id')::bigint)";

// PostgreSQL transactions commit at a source transaction's end once this many
// changes are in them.
constexpr int kChangesPerCommit = 1000;

struct ResultFree {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultFree>;

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// A PostgreSQL array literal of floats, each written so that it reads back
// exactly.
std::string FloatArray(const float* v, int n) {
  std::string out = "{";
  char buf[32];
  for (int i = 0; i < n; i++) {
    std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", static_cast<double>(v[i]));
    out += buf;
  }
  return out + "}";
}

std::string IdArray(const std::vector<int64_t>& ids) {
  std::string out = "{";
  for (size_t i = 0; i < ids.size(); i++) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "}";
}

class Sync {
 public:
  Sync(agentmem_db* db, PGconn* pg) : db_(db), pg_(pg) {}
  bool Run();
  const std::string& error() const { return error_; }

 private:
  // One statement; values may hold nullptr for NULL. false (error_ set)
  // unless it returned `want`.
  bool Exec(const char* sql, const std::vector<const char*>& values, Result* out = nullptr,
            ExecStatusType want = PGRES_COMMAND_OK);
  bool Position(std::string* log, int64_t* seq, bool* found);
  bool OpenFeed(agentmem_cursor** cur);
  bool Apply(const agentmem_change& c, int pos);
  bool AddEpisode(const agentmem_change& c);
  bool Forget(const agentmem_change& c);
  bool ForgetRetention(const agentmem_change& c, std::vector<int64_t>* ids);

  agentmem_db* db_;
  PGconn* pg_;
  std::string error_;
  bool resync_ = false;
  int64_t changes_ = 0, added_ = 0, removed_ = 0;
};

bool Sync::Exec(const char* sql, const std::vector<const char*>& values, Result* out,
                ExecStatusType want) {
  Result r(PQexecParams(pg_, sql, static_cast<int>(values.size()), nullptr, values.data(),
                        nullptr, nullptr, 0));
  if (PQresultStatus(r.get()) != want) {
    error_ = std::string("PostgreSQL: ") + PQerrorMessage(pg_);
    return false;
  }
  if (out) *out = std::move(r);
  return true;
}

// The position PostgreSQL holds: the last commit of the one log in
// agentmem_changes. *found is false when it holds none, or several logs.
bool Sync::Position(std::string* log, int64_t* seq, bool* found) {
  Result r;
  if (!Exec("SELECT log, max(seq) FROM agentmem_changes GROUP BY log", {}, &r, PGRES_TUPLES_OK)) {
    return false;
  }
  *found = PQntuples(r.get()) == 1;
  if (*found) {
    *log = PQgetvalue(r.get(), 0, 0);
    *seq = std::strtoll(PQgetvalue(r.get(), 0, 1), nullptr, 10);
  }
  return true;
}

// The feed after PostgreSQL's position, or from 0 (resync_) when it holds
// none or one the file does not hold (a VACUUM made a new log).
bool Sync::OpenFeed(agentmem_cursor** cur) {
  std::string log;
  int64_t seq = 0;
  bool found = false;
  if (!Position(&log, &seq, &found)) return false;
  if (found) {
    uint64_t log_id = std::strtoull(log.c_str(), nullptr, 16);
    int rc = agentmem_changes_since(db_, log_id, seq, cur);
    if (rc == AGENTMEM_OK) return true;
    if (rc != AGENTMEM_NOTFOUND_CHANGES) {
      error_ = agentmem_errmsg(db_);
      return false;
    }
  }
  resync_ = true;
  if (agentmem_changes_since(db_, 0, 0, cur) != AGENTMEM_OK) {
    error_ = agentmem_errmsg(db_);
    return false;
  }
  return true;
}

bool Sync::AddEpisode(const agentmem_change& c) {
  Result r;
  const std::string vec = c.vector ? FloatArray(c.vector, c.dim) : "";
  const std::string data = c.data;
  if (!Exec("INSERT INTO episodes (id, user_id, session_id, role, text, ts, created_at, "
            "metadata, embedding) SELECT (d->>'id')::bigint, d->>'user_id', d->>'session_id', "
            "d->>'role', d->>'text', (d->>'ts')::bigint, (d->>'created_at')::bigint, "
            "d->>'metadata', $2::real[] FROM (SELECT $1::jsonb AS d) x "
            "ON CONFLICT (id) DO NOTHING",
            {data.c_str(), c.vector ? vec.c_str() : nullptr}, &r)) {
    return false;
  }
  added_ += std::strtoll(PQcmdTuples(r.get()), nullptr, 10);
  return true;
}

// Retention: the episodes before the time that the file no longer holds
// (with keep_cited it keeps those a fact cites; only the file knows which).
bool Sync::ForgetRetention(const agentmem_change& c, std::vector<int64_t>* ids) {
  Result r;
  if (!Exec("SELECT id FROM episodes WHERE ts < ($1::jsonb->>'before')::bigint", {c.data}, &r,
            PGRES_TUPLES_OK)) {
    return false;
  }
  for (int i = 0; i < PQntuples(r.get()); i++) {
    const int64_t id = std::strtoll(PQgetvalue(r.get(), i, 0), nullptr, 10);
    agentmem_episode* e = nullptr;
    const int rc = agentmem_episode_get(db_, id, &e);
    agentmem_free(e);
    if (rc == AGENTMEM_NOTFOUND) {
      ids->push_back(id);
    } else if (rc != AGENTMEM_OK) {
      error_ = agentmem_errmsg(db_);
      return false;
    }
  }
  const std::string list = IdArray(*ids);
  return Exec("DELETE FROM episodes WHERE id = ANY($1::bigint[])", {list.c_str()});
}

bool Sync::Forget(const agentmem_change& c) {
  std::vector<int64_t> ids;
  if (c.kind == AGENTMEM_CHANGE_RETENTION) {
    if (!ForgetRetention(c, &ids)) return false;
  } else {
    Result r;
    if (!Exec(kForgetEpisodes, {c.data}, &r, PGRES_TUPLES_OK)) return false;
    for (int i = 0; i < PQntuples(r.get()); i++) {
      ids.push_back(std::strtoll(PQgetvalue(r.get(), i, 0), nullptr, 10));
    }
  }
  removed_ += static_cast<int64_t>(ids.size());
  const std::string list = IdArray(ids);
  return Exec(kForgetChanges, {c.data, list.c_str()});
}

bool Sync::Apply(const agentmem_change& c, int pos) {
  const std::string log = Hex(c.log_id), seq = std::to_string(c.seq), at = std::to_string(pos),
                    id = std::to_string(c.id), ts = std::to_string(c.commit_ts);
  const std::string vec = c.vector ? FloatArray(c.vector, c.dim) : "";
  if (!Exec("INSERT INTO agentmem_changes (log, seq, pos, kind, id, user_id, data, vector, "
            "commit_ts) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::real[], $9) "
            "ON CONFLICT DO NOTHING",
            {log.c_str(), seq.c_str(), at.c_str(), c.kind_name, id.c_str(), c.user_id, c.data,
             c.vector ? vec.c_str() : nullptr, ts.c_str()})) {
    return false;
  }
  changes_++;
  if (c.kind == AGENTMEM_CHANGE_EPISODE) return AddEpisode(c);
  if (c.kind == AGENTMEM_CHANGE_FORGET || c.kind == AGENTMEM_CHANGE_RETENTION) return Forget(c);
  return true;
}

bool Sync::Run() {
  Result r;
  if (!Exec("SELECT pg_advisory_lock(hashtext('agentmem sync'))", {}, &r, PGRES_TUPLES_OK)) {
    return false;
  }
  if (PQresultStatus(Result(PQexec(pg_, kSchema)).get()) != PGRES_COMMAND_OK) {
    error_ = std::string("PostgreSQL: ") + PQerrorMessage(pg_);
    return false;
  }
  agentmem_cursor* cur = nullptr;
  if (!OpenFeed(&cur)) return false;
  std::unique_ptr<agentmem_cursor, int (*)(agentmem_cursor*)> close(cur, agentmem_cursor_close);
  if (!Exec("BEGIN", {})) return false;
  if (resync_ && (!Exec("DELETE FROM agentmem_changes", {}) || !Exec("DELETE FROM episodes", {}))) {
    return false;
  }
  int64_t first = 0, last = 0, in_txn = 0;
  uint64_t log_id = 0;
  int pos = 0, rc;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    const agentmem_change& c = *agentmem_cursor_change(cur);
    if (c.seq != last) pos = 0;
    if (first == 0) first = c.seq;
    last = c.seq;
    log_id = c.log_id;
    if (!Apply(c, pos++)) return false;
    in_txn++;
    if (c.kind == AGENTMEM_CHANGE_COMMIT && in_txn >= kChangesPerCommit) {
      if (!Exec("COMMIT", {}) || !Exec("BEGIN", {})) return false;
      in_txn = 0;
    }
  }
  if (rc != AGENTMEM_DONE) {
    error_ = agentmem_errmsg(db_);
    return false;
  }
  if (!Exec("COMMIT", {})) return false;
  if (first == 0) {
    std::printf("up to date\n");
  } else {
    std::printf("log %s: commits %" PRId64 " to %" PRId64 ", %" PRId64 " changes, %" PRId64
                " episodes added, %" PRId64 " removed%s\n",
                Hex(log_id).c_str(), first, last, changes_, added_, removed_,
                resync_ ? " (from the start of the log)" : "");
  }
  return true;
}

}  // namespace

int RunSync(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-help") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 3) {
    std::fputs(kUsage, stderr);
    return 1;
  }
  agentmem_db* db = nullptr;
  if (agentmem_open_v2(argv[1], &db, AGENTMEM_OPEN_READONLY, nullptr) != AGENTMEM_OK) {
    std::fprintf(stderr, "Error: %s: %s\n", argv[1], agentmem_errmsg(db));
    agentmem_close(db);
    return 1;
  }
  PGconn* pg = PQconnectdb(argv[2]);
  int status = 0;
  if (PQstatus(pg) != CONNECTION_OK) {
    std::fprintf(stderr, "Error: PostgreSQL: %s", PQerrorMessage(pg));
    status = 1;
  } else {
    // CREATE ... IF NOT EXISTS notices are not the user's business.
    PQsetNoticeProcessor(pg, [](void*, const char*) {}, nullptr);
    Sync s(db, pg);
    if (!s.Run()) {
      std::fprintf(stderr, "Error: %s\n", s.error().c_str());
      status = 1;
    }
  }
  PQfinish(pg);  // an open transaction is rolled back
  agentmem_close(db);
  return status;
}

}  // namespace agentmem::sync

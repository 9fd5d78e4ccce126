// cli/sync/sync.cc -- agentmem_sync() (include/agentmem_sync.h), the sync
// that `agentmem sync FILE CONNINFO` runs too: gives the file its origin id,
// creates the PostgreSQL schema, then pushes the file's own changes
// (push.cc) and pulls every other origin's (pull.cc), all under one advisory
// lock. A client of agentmem.h and libpq only.
#include <agentmem.h>
#include <agentmem_sync.h>
#include <libpq-fe.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>

#include "sync/sync_internal.h"

namespace agentmem::sync {
namespace {

// Every table, index and function of docs/replication.md.
constexpr const char* kSchema =
    // The database's id: a file synced with one database is refused by another.
    "CREATE TABLE IF NOT EXISTS agentmem_database ("
    " one boolean PRIMARY KEY DEFAULT true CHECK (one), id text NOT NULL);"
    "INSERT INTO agentmem_database (id) SELECT substr(md5(random()::text"
    " || clock_timestamp()::text), 1, 16) WHERE NOT EXISTS (SELECT 1 FROM agentmem_database);"
    "CREATE TABLE IF NOT EXISTS agentmem_changes ("
    " gpos bigserial PRIMARY KEY, origin text NOT NULL, log text NOT NULL, seq bigint NOT NULL,"
    " pos integer NOT NULL, kind text NOT NULL, id bigint NOT NULL, user_id text NOT NULL,"
    " data jsonb NOT NULL, vector real[], commit_ts bigint NOT NULL,"
    " UNIQUE (origin, log, seq, pos));"
    "CREATE INDEX IF NOT EXISTS agentmem_changes_record ON agentmem_changes (origin, kind, id);"
    "CREATE TABLE IF NOT EXISTS agentmem_origins ("
    " origin text PRIMARY KEY, log text NOT NULL, seq bigint NOT NULL);"
    "CREATE TABLE IF NOT EXISTS agentmem_local_ids ("
    " replica text NOT NULL, kind text NOT NULL, origin text NOT NULL, origin_id bigint NOT NULL,"
    " local_id bigint NOT NULL, PRIMARY KEY (replica, kind, origin, origin_id));"
    "CREATE INDEX IF NOT EXISTS agentmem_local_ids_local"
    " ON agentmem_local_ids (replica, kind, local_id);"
    // Each replica's proof that it purged a forget transaction.
    "CREATE TABLE IF NOT EXISTS agentmem_receipts ("
    " forget_origin text NOT NULL, forget_log text NOT NULL, forget_seq bigint NOT NULL,"
    " replica text NOT NULL, needles bigint NOT NULL, residue bigint NOT NULL,"
    " at bigint NOT NULL, PRIMARY KEY (forget_origin, forget_log, forget_seq, replica));"
    "CREATE TABLE IF NOT EXISTS agentmem_predicates ("
    " predicate text PRIMARY KEY, single_valued boolean NOT NULL);"
    "CREATE TABLE IF NOT EXISTS episodes ("
    " origin text NOT NULL, id bigint NOT NULL, gpos bigint NOT NULL, user_id text NOT NULL,"
    " session_id text NOT NULL, role text NOT NULL, text text NOT NULL, ts bigint NOT NULL,"
    " created_at bigint NOT NULL, metadata text NOT NULL, embedding real[],"
    " tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,"
    " PRIMARY KEY (origin, id));"
    "CREATE INDEX IF NOT EXISTS episodes_user ON episodes (user_id, session_id);"
    "CREATE INDEX IF NOT EXISTS episodes_tsv ON episodes USING gin (tsv);"
    "CREATE TABLE IF NOT EXISTS blocks ("
    " origin text NOT NULL, version bigint NOT NULL, gpos bigint NOT NULL,"
    " user_id text NOT NULL, name text NOT NULL, value text NOT NULL, \"limit\" integer NOT NULL,"
    " pinned_order integer NOT NULL, updated_at bigint NOT NULL, PRIMARY KEY (origin, version));"
    "CREATE INDEX IF NOT EXISTS blocks_name ON blocks (user_id, name, gpos);"
    "CREATE OR REPLACE VIEW blocks_current AS SELECT DISTINCT ON (user_id, name) *"
    " FROM blocks ORDER BY user_id, name, gpos DESC;"
    "CREATE TABLE IF NOT EXISTS facts ("
    " origin text NOT NULL, id bigint NOT NULL, gpos bigint NOT NULL, user_id text NOT NULL,"
    " subject text NOT NULL, predicate text NOT NULL, object text NOT NULL,"
    " confidence double precision NOT NULL, source_episode_ids bigint[] NOT NULL,"
    " valid_from bigint NOT NULL, valid_to bigint NOT NULL, recorded_at bigint NOT NULL,"
    " expired_at bigint NOT NULL, derived boolean NOT NULL, PRIMARY KEY (origin, id));"
    "CREATE INDEX IF NOT EXISTS facts_key ON facts (user_id, subject, predicate);"
    // The record (origin, origin_id) that `replica` holds as its local id
    // `local`: what it pulled, from agentmem_local_ids, else its own.
    "CREATE OR REPLACE FUNCTION agentmem_canonical(replica text, k text, local bigint,"
    " OUT origin text, OUT origin_id bigint) LANGUAGE sql STABLE AS $$"
    " SELECT COALESCE(m.origin, replica), COALESCE(m.origin_id, local) FROM (SELECT 1) one"
    " LEFT JOIN LATERAL (SELECT l.origin, l.origin_id FROM agentmem_local_ids l"
    "  WHERE l.replica = $1 AND l.kind = $2 AND l.local_id = $3"
    "  ORDER BY l.origin, l.origin_id LIMIT 1) m ON true $$;";

std::string Hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

bool IsOriginId(const std::string& s) {
  return s.size() == 16 && s.find_first_not_of("0123456789abcdef") == std::string::npos &&
         s != std::string(16, '0');
}

// The file's origin id, made (64 random bits) and stored on the first sync.
bool EnsureOrigin(agentmem_db* db, Pg* pg, std::string* origin) {
  char* v = nullptr;
  const int rc = agentmem_meta_get(db, "sync.origin", &v);
  if (rc == AGENTMEM_OK) {
    *origin = v;
    agentmem_free(v);
    if (IsOriginId(*origin)) return true;
    return pg->Fail("the file's sync.origin \"" + *origin + "\" is not 16 hexadecimal digits");
  }
  if (rc != AGENTMEM_NOTFOUND) return FailOn(pg, db, "reading sync.origin");
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  *origin = Hex64(id);
  if (agentmem_meta_set(db, "sync.origin", origin->c_str()) != AGENTMEM_OK) {
    return FailOn(pg, db, "writing sync.origin");
  }
  return true;
}

// The file's sync.database must be this database's id (it is written on the
// first sync), and the file's pulled position must be in its change log: a
// file cannot follow a database that was replaced or restored to a point
// before what the file applied.
bool CheckDatabase(agentmem_db* db, Pg* pg) {
  Result r;
  if (!pg->Query("SELECT id, (SELECT COALESCE(max(gpos), 0) FROM agentmem_changes)"
                 " FROM agentmem_database",
                 {}, &r)) {
    return false;
  }
  std::string id, error;
  int64_t last = 0;
  if (PQntuples(r.get()) != 1 || !ReadText(r.get(), 0, 0, 64, &id, &error) ||
      !ReadInt(r.get(), 0, 1, &last, &error)) {
    return pg->Fail("PostgreSQL: agentmem_database holds no id " + error);
  }
  char* v = nullptr;
  int rc = agentmem_meta_get(db, "sync.database", &v);
  if (rc == AGENTMEM_NOTFOUND) {
    if (agentmem_meta_set(db, "sync.database", id.c_str()) == AGENTMEM_OK) return true;
    return FailOn(pg, db, "writing sync.database");
  }
  if (rc != AGENTMEM_OK) return FailOn(pg, db, "reading sync.database");
  const std::string mine = v;
  agentmem_free(v);
  if (mine != id) {
    return pg->Fail("the file was synced with another PostgreSQL database (" + mine +
                    "; this one is " + id + "): its positions mean nothing here");
  }
  rc = agentmem_meta_get(db, "sync.pulled", &v);
  if (rc == AGENTMEM_NOTFOUND) return true;
  if (rc != AGENTMEM_OK) return FailOn(pg, db, "reading sync.pulled");
  const int64_t pulled = std::strtoll(v, nullptr, 10);
  agentmem_free(v);
  if (pulled <= last) return true;
  return pg->Fail("the file has applied PostgreSQL's changes up to " + std::to_string(pulled) +
                  ", but agentmem_changes ends at " + std::to_string(last) +
                  ": the database was restored to an earlier point, and syncing would "
                  "apply changes twice");
}

}  // namespace

bool FailOn(Pg* pg, agentmem_db* db, const char* what) {
  const int code = agentmem_errcode(db);
  return pg->Fail(std::string(what) + ": " + agentmem_errmsg(db),
                  code == AGENTMEM_OK ? AGENTMEM_ERROR : code);
}

bool CreateSchema(Pg* pg) {
  // A table of the earlier single-file sync has no gpos column.
  Result r;
  if (!pg->Query("SELECT count(*) FROM information_schema.columns WHERE table_schema ="
                 " current_schema() AND table_name = 'agentmem_changes'"
                 " AND column_name IN ('gpos', 'log')",
                 {}, &r)) {
    return false;
  }
  int64_t columns = 0;
  std::string error;
  if (!ReadInt(r.get(), 0, 0, &columns, &error)) return pg->Fail(error);
  if (columns == 1) {
    return pg->Fail("agentmem_changes was made by an earlier agentmem sync (no origins); "
                    "drop it and its episodes table, then sync again");
  }
  return pg->Script(kSchema);
}

bool Lock(Pg* pg) {
  Result r;
  return pg->Query("SELECT pg_advisory_lock(hashtext('agentmem sync'))", {}, &r) &&
         CreateSchema(pg);
}

PGconn* Connect(const char* conninfo, std::string* error) {
  PGconn* conn = PQconnectdb(conninfo);
  if (PQstatus(conn) != CONNECTION_OK) {
    *error = std::string("PostgreSQL: ") + PQerrorMessage(conn);
    while (!error->empty() && error->back() == '\n') error->pop_back();
    PQfinish(conn);
    return nullptr;
  }
  // CREATE ... IF NOT EXISTS notices are not the caller's business.
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  return conn;
}

namespace {

void CopyText(const std::string& from, char* to, size_t size) {
  std::snprintf(to, size, "%s", from.c_str());
}

// Copies what the run did into the caller's report.
void Fill(const Replica& rep, const PushReport& push, const PullReport& pull,
          agentmem_sync_report* out) {
  CopyText(rep.origin, out->origin, sizeof out->origin);
  CopyText(push.log, out->log, sizeof out->log);
  out->pushed = push.changes;
  out->push_first = push.first;
  out->push_last = push.last;
  out->resync = push.resync ? 1 : 0;
  out->pulled = pull.changes;
  out->forgets = pull.forgets;
  out->purged = pull.purged ? 1 : 0;
  out->receipts = push.receipts + pull.receipts;
  out->position = pull.position;
}

bool Run(agentmem_db* db, Pg* pg, agentmem_sync_report* out) {
  Replica rep{db, pg, ""};
  PushReport push;
  PullReport pull;
  bool ok = Lock(pg);
  ok = ok && EnsureOrigin(db, pg, &rep.origin);
  ok = ok && CheckDatabase(db, pg) && Push(rep, &push);
#ifdef AGENTMEM_TEST_HOOKS
  // Test builds: a command run between the push and the pull, to write to
  // the file as its application may meanwhile (tests/replication).
  if (const char* between = std::getenv("AGENTMEM_TEST_SYNC_BETWEEN"); ok && between) {
    if (std::system(between) != 0) ok = pg->Fail("AGENTMEM_TEST_SYNC_BETWEEN failed");
  }
#endif
  ok = ok && Pull(rep, push, &pull);
  Fill(rep, push, pull, out);
  return ok;
}

int Sync(agentmem_db* db, const char* conninfo, agentmem_sync_report* out) {
  if (!agentmem_get_autocommit(db)) {
    CopyText("agentmem_sync: called inside BEGIN ... COMMIT", out->errmsg, sizeof out->errmsg);
    return AGENTMEM_MISUSE;
  }
  std::string error;
  PGconn* conn = Connect(conninfo, &error);
  if (!conn) {
    CopyText(error, out->errmsg, sizeof out->errmsg);
    return AGENTMEM_CANTOPEN;
  }
  Pg pg(conn);
  const bool ok = Run(db, &pg, out);
  PQfinish(conn);  // an open PostgreSQL transaction is rolled back
  if (ok) return AGENTMEM_OK;
  if (!agentmem_get_autocommit(db)) agentmem_rollback(db);
  CopyText(pg.error(), out->errmsg, sizeof out->errmsg);
  return pg.code();
}

}  // namespace

}  // namespace agentmem::sync

extern "C" int agentmem_sync(agentmem_db* db, const char* conninfo,
                             agentmem_sync_report* pReport) {
  if (!db || !conninfo || !pReport || pReport->version != AGENTMEM_SYNC_REPORT_VERSION) {
    return AGENTMEM_MISUSE;
  }
  const int version = pReport->version;
  *pReport = agentmem_sync_report{};
  pReport->version = version;
  try {
    return agentmem::sync::Sync(db, conninfo, pReport);
  } catch (const std::bad_alloc&) {
    return AGENTMEM_NOMEM;
  } catch (...) {
    return AGENTMEM_INTERNAL;
  }
}

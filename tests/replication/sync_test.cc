// tests/replication/sync_test.cc -- `agentmem sync FILE CONNINFO` (cli/sync/,
// docs/replication.md) run as a program against the throwaway PostgreSQL of
// pg_run.sh: what it writes, that a second run writes nothing, that a forget
// removes the forgotten records from every table, and that a VACUUM's new log
// replaces the copy.
#include <doctest/doctest.h>
#include <libpq-fe.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/cli/shell_runner.h"
#include "tests/util/temp_dir.h"

using agentmem::test::RunShell;
using agentmem::test::ShellResult;
using agentmem::test::TempDir;

namespace {

struct ConnCloser {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Conn = std::unique_ptr<PGconn, ConnCloser>;

std::string Url() {
  const char* url = std::getenv("AGENTMEM_PG_URL");
  REQUIRE_MESSAGE(url != nullptr,
                  "AGENTMEM_PG_URL is not set: run through tests/replication/pg_run.sh");
  return url;
}

// A connection to the harness's server with the sync's tables dropped, so
// that each case starts from an empty database.
Conn Fresh() {
  Conn c(PQconnectdb(Url().c_str()));
  REQUIRE_MESSAGE(PQstatus(c.get()) == CONNECTION_OK, PQerrorMessage(c.get()));
  PQsetNoticeProcessor(c.get(), [](void*, const char*) {}, nullptr);
  PGresult* r = PQexec(c.get(), "DROP TABLE IF EXISTS agentmem_changes, episodes");
  REQUIRE_MESSAGE(PQresultStatus(r) == PGRES_COMMAND_OK, PQerrorMessage(c.get()));
  PQclear(r);
  return c;
}

// The rows of a query, each column as text.
std::vector<std::vector<std::string>> Rows(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  REQUIRE_MESSAGE(PQresultStatus(r) == PGRES_TUPLES_OK, sql << ": " << PQerrorMessage(c));
  std::vector<std::vector<std::string>> out;
  for (int i = 0; i < PQntuples(r); i++) {
    auto& row = out.emplace_back();
    for (int j = 0; j < PQnfields(r); j++) row.push_back(PQgetvalue(r, i, j));
  }
  PQclear(r);
  return out;
}

std::string One(PGconn* c, const std::string& sql) {
  auto rows = Rows(c, sql);
  REQUIRE(rows.size() == 1);
  return rows[0][0];
}

// Runs SQL on the test file (created with 4-d vectors given by the tests).
void Shell(const TempDir& dir, const std::string& sql) {
  ShellResult r = RunShell(dir.path(), {"-options", "vector_dim=4&embedder=mine", "m.agentmem", sql});
  REQUIRE_MESSAGE(r.status == 0, r.err);
}

ShellResult SyncRun(const TempDir& dir) {
  ShellResult r = RunShell(dir.path(), {"sync", "m.agentmem", Url()});
  CHECK_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.empty());
  return r;
}

void Seed(const TempDir& dir) {
  Shell(dir, "INSERT INTO episodes(user_id, session_id, role, text, embedding) VALUES "
             "('alice', 's1', 'user', 'I moved to Lisbon last spring.', '[0.5, -1, 2.25, 0]'), "
             "('bob', 's2', 'user', 'Bob keeps a private diary entry here.', '[1, 0, 0, 0]')");
  Shell(dir, "INSERT INTO blocks(user_id, name, value) VALUES ('bob', 'notes', 'bob private notes')");
}

}  // namespace

TEST_CASE("sync writes every episode and change row, and a second run writes nothing") {
  TempDir dir;
  Conn pg = Fresh();
  Seed(dir);
  ShellResult r = SyncRun(dir);
  CHECK(r.out.find("commits 1 to 3") != std::string::npos);
  CHECK(r.out.find("2 episodes added") != std::string::npos);
  auto episodes = Rows(pg.get(), "SELECT id, user_id, session_id, text, embedding::text, "
                                 "tsv @@ to_tsquery('simple', 'lisbon') FROM episodes ORDER BY id");
  REQUIRE(episodes.size() == 2);
  CHECK(episodes[0] == std::vector<std::string>{"1", "alice", "s1", "I moved to Lisbon last spring.",
                                                 "{0.5,-1,2.25,0}", "t"});
  CHECK(episodes[1][1] == "bob");
  // One change row per row of the feed, in commit order.
  CHECK(One(pg.get(), "SELECT string_agg(kind, ' ' ORDER BY seq, pos) FROM agentmem_changes "
                      "WHERE seq > 1") == "episode episode commit block commit");
  CHECK(One(pg.get(), "SELECT count(DISTINCT log) FROM agentmem_changes") == "1");
  const std::string changes = One(pg.get(), "SELECT count(*) FROM agentmem_changes");

  r = SyncRun(dir);
  CHECK(r.out == "up to date\n");
  CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_changes") == changes);
  Shell(dir, "INSERT INTO episodes(user_id, session_id, role, text, embedding) VALUES "
             "('alice', 's1', 'user', 'A third turn.', '[0, 0, 1, 0]')");
  r = SyncRun(dir);
  CHECK(r.out.find("commits 4 to 4") != std::string::npos);
  CHECK(One(pg.get(), "SELECT count(*) FROM episodes") == "3");
}

TEST_CASE("a forget synced removes the forgotten records from the copy and its change log") {
  TempDir dir;
  Conn pg = Fresh();
  Seed(dir);
  SyncRun(dir);
  Shell(dir, "FORGET USER 'bob'");
  ShellResult r = SyncRun(dir);
  CHECK(r.out.find("1 removed") != std::string::npos);
  CHECK(One(pg.get(), "SELECT count(*) FROM episodes WHERE user_id = 'bob'") == "0");
  CHECK(One(pg.get(), "SELECT count(*) FROM episodes") == "1");
  // Nothing of Bob's is left in any table, only the forget itself.
  CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_changes WHERE data::text LIKE '%private%'") ==
        "0");
  CHECK(One(pg.get(), "SELECT string_agg(kind, ' ') FROM agentmem_changes WHERE user_id = 'bob'") ==
        "forget");
  Shell(dir, "FORGET EPISODE 1");
  SyncRun(dir);
  CHECK(One(pg.get(), "SELECT count(*) FROM episodes") == "0");
  CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_changes WHERE kind = 'episode'") == "0");
}

TEST_CASE("after VACUUM sync starts again from the new log and the copy holds the live records") {
  TempDir dir;
  Conn pg = Fresh();
  Seed(dir);
  SyncRun(dir);
  const std::string old_log = One(pg.get(), "SELECT DISTINCT log FROM agentmem_changes");
  Shell(dir, "FORGET USER 'bob' PURGE");  // forgets, then rewrites the file: a new log
  ShellResult r = SyncRun(dir);
  CHECK(r.out.find("from the start of the log") != std::string::npos);
  CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_changes WHERE log = '" + old_log + "'") == "0");
  CHECK(One(pg.get(), "SELECT string_agg(user_id || ':' || id, ' ' ORDER BY id) FROM episodes") ==
        "alice:1");
  CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_changes WHERE data::text LIKE '%private%'") ==
        "0");
  CHECK(SyncRun(dir).out == "up to date\n");
}

TEST_CASE("sync refuses a wrong command line and a server it cannot reach") {
  TempDir dir;
  Seed(dir);
  ShellResult r = RunShell(dir.path(), {"sync", "m.agentmem"});
  CHECK(r.status == 1);
  CHECK(r.err.find("Usage: agentmem sync FILE CONNINFO") != std::string::npos);
  r = RunShell(dir.path(), {"sync", "m.agentmem", "postgresql:///nodb?host=/nonexistent"});
  CHECK(r.status == 1);
  CHECK(r.err.find("PostgreSQL") != std::string::npos);
  r = RunShell(dir.path(), {"sync", "missing.agentmem", Url()});
  CHECK(r.status == 1);
}

// tests/replication/pg_harness_test.cc -- the throwaway PostgreSQL of
// tests/replication/pg_run.sh, through libpq: the server it starts is
// reachable at AGENTMEM_PG_URL and keeps what is written to it
// (docs/replication.md, "The PostgreSQL test harness").
#include <doctest/doctest.h>
#include <libpq-fe.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace {

struct ConnCloser {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultClearer {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Conn = std::unique_ptr<PGconn, ConnCloser>;
using Result = std::unique_ptr<PGresult, ResultClearer>;

// A connection to the harness's server; the case fails when there is none.
Conn Connect() {
  const char* url = std::getenv("AGENTMEM_PG_URL");
  REQUIRE_MESSAGE(url != nullptr,
                  "AGENTMEM_PG_URL is not set: run through tests/replication/pg_run.sh");
  Conn c(PQconnectdb(url));
  REQUIRE(c != nullptr);
  REQUIRE_MESSAGE(PQstatus(c.get()) == CONNECTION_OK, PQerrorMessage(c.get()));
  PQsetNoticeProcessor(c.get(), [](void*, const char*) {}, nullptr);  // "does not exist, skipping"
  return c;
}

Result Exec(PGconn* c, const char* sql, ExecStatusType want = PGRES_COMMAND_OK) {
  Result r(PQexec(c, sql));
  REQUIRE_MESSAGE(PQresultStatus(r.get()) == want, sql << ": " << PQerrorMessage(c));
  return r;
}

}  // namespace

TEST_CASE("a row written to the harness's server reads back the same over a new connection") {
  {
    Conn c = Connect();
    Exec(c.get(), "DROP TABLE IF EXISTS harness_roundtrip");
    Exec(c.get(), "CREATE TABLE harness_roundtrip (id bigint PRIMARY KEY, text text NOT NULL, "
                  "vector real[] NOT NULL, tsv tsvector GENERATED ALWAYS AS "
                  "(to_tsvector('simple', text)) STORED)");
    const char* params[] = {"7", "I moved to Lisbon \xe2\x80\x94 last spring", "{0.5,-1,2.25}"};
    Result r(PQexecParams(c.get(),
                          "INSERT INTO harness_roundtrip (id, text, vector) VALUES ($1, $2, $3)",
                          3, nullptr, params, nullptr, nullptr, 0));
    REQUIRE_MESSAGE(PQresultStatus(r.get()) == PGRES_COMMAND_OK, PQerrorMessage(c.get()));
  }
  Conn c = Connect();
  Result r = Exec(c.get(),
                  "SELECT id, text, vector, tsv @@ to_tsquery('simple', 'lisbon') FROM "
                  "harness_roundtrip",
                  PGRES_TUPLES_OK);
  REQUIRE(PQntuples(r.get()) == 1);
  CHECK(std::string(PQgetvalue(r.get(), 0, 0)) == "7");
  CHECK(std::string(PQgetvalue(r.get(), 0, 1)) == "I moved to Lisbon \xe2\x80\x94 last spring");
  CHECK(std::string(PQgetvalue(r.get(), 0, 2)) == "{0.5,-1,2.25}");
  CHECK(std::string(PQgetvalue(r.get(), 0, 3)) == "t");
  Exec(c.get(), "DROP TABLE harness_roundtrip");
}

TEST_CASE("the harness's server listens on its own socket only and runs unprivileged") {
  Conn c = Connect();
  Result r = Exec(c.get(),
                  "SELECT current_setting('listen_addresses'), "
                  "current_setting('unix_socket_directories'), current_setting('fsync')",
                  PGRES_TUPLES_OK);
  CHECK(std::string(PQgetvalue(r.get(), 0, 0)).empty());
  const char* host = std::getenv("PGHOST");
  REQUIRE(host != nullptr);
  CHECK(std::string(PQgetvalue(r.get(), 0, 1)) == host);
  CHECK(std::string(PQgetvalue(r.get(), 0, 2)) == "off");
  CHECK(std::string(PQhost(c.get())) == host);
}

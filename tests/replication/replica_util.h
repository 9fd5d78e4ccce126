// tests/replication/replica_util.h -- what the replication cases share: a
// connection to pg_run.sh's server with the sync's tables dropped, queries
// read back as text, and files run through the `agentmem` program.
#pragma once

#include <agentmem.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/cli/shell_runner.h"
#include "tests/util/temp_dir.h"

extern char** environ;

namespace agentmem::test {

struct ConnCloser {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Conn = std::unique_ptr<PGconn, ConnCloser>;

inline std::string Url() {
  const char* url = std::getenv("AGENTMEM_PG_URL");
  REQUIRE_MESSAGE(url != nullptr,
                  "AGENTMEM_PG_URL is not set: run through tests/replication/pg_run.sh");
  return url;
}

inline void Run(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  REQUIRE_MESSAGE(ok, sql << ": " << PQerrorMessage(c));
}

// A connection to the harness's server.
inline Conn Connect() {
  Conn c(PQconnectdb(Url().c_str()));
  REQUIRE_MESSAGE(PQstatus(c.get()) == CONNECTION_OK, PQerrorMessage(c.get()));
  PQsetNoticeProcessor(c.get(), [](void*, const char*) {}, nullptr);
  return c;
}

// A connection to the harness's server with every table of the sync
// dropped, so that each case starts from an empty database.
inline Conn Fresh() {
  Conn c = Connect();
  Run(c.get(), "DROP VIEW IF EXISTS blocks_current; DROP TABLE IF EXISTS agentmem_changes,"
               " agentmem_origins, agentmem_local_ids, agentmem_predicates, agentmem_database,"
               " agentmem_receipts, episodes, blocks, facts CASCADE");
  return c;
}

// The rows of a query, each column as text.
inline std::vector<std::vector<std::string>> Rows(PGconn* c, const std::string& sql) {
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

inline std::string One(PGconn* c, const std::string& sql) {
  auto rows = Rows(c, sql);
  REQUIRE(rows.size() == 1);
  return rows[0][0];
}

// Runs SQL on file `name` in dir (created with 4-d vectors the cases give);
// returns what it printed.
inline std::string Shell(const TempDir& dir, const std::string& name, const std::string& sql) {
  ShellResult r =
      RunShell(dir.path(), {"-options", "vector_dim=4&embedder=mine", name, sql});
  REQUIRE_MESSAGE(r.status == 0, sql << ": " << r.err);
  return r.out;
}

// File `name` in dir, created when missing with 4-d vectors the cases give,
// open read-write.
inline agentmem_db* OpenReplica(const TempDir& dir, const std::string& name) {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(dir.File(name).c_str(), &db,
                           AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "vector_dim=4&embedder=mine") == AGENTMEM_OK);
  return db;
}

// Remembers `text` in session s1 with the vector {1, x, 0, 0}. (Give each
// episode its own x: a PURGE also looks for the forgotten vectors, and would
// find one that another user's episode shares.)
inline void Remember(agentmem_db* db, const char* user, const char* text, float x) {
  const float v[4] = {1, x, 0, 0};
  REQUIRE(agentmem_remember(db, user, "s1", "user", text, 0, nullptr, v, 4, nullptr) ==
          AGENTMEM_OK);
}

// The files of the three-replica cases.
inline constexpr const char* kThree[] = {"a.agentmem", "b.agentmem", "c.agentmem"};

// The three files of kThree, new in dir: a remembers bob's `bob_a` and an
// episode of alice's, b bob's `bob_b` and his block `persona` holding
// `bob_block`. a and b are returned open (*a, *b); c is closed.
inline void BobOnTwoOfThree(const TempDir& dir, const char* bob_a, const char* bob_b,
                            const char* bob_block, agentmem_db** a, agentmem_db** b) {
  const char* const* names = kThree;
  *a = OpenReplica(dir, names[0]);
  *b = OpenReplica(dir, names[1]);
  agentmem_close(OpenReplica(dir, names[2]));
  Remember(*a, "bob", bob_a, 0.25f);
  Remember(*a, "alice", "alice keeps this one", 0.5f);
  Remember(*b, "bob", bob_b, 0.75f);
  REQUIRE(agentmem_block_set(*b, "bob", "persona", bob_block, 0, -1) == AGENTMEM_OK);
}

// Starts `agentmem sync name URL` in dir, with this process's environment;
// its output goes nowhere.
inline pid_t StartSync(const TempDir& dir, const std::string& name) {
  const std::string path = dir.File(name), url = Url();
  std::vector<char*> argv = {const_cast<char*>(AGENTMEM_SHELL_PATH), const_cast<char*>("sync"),
                             const_cast<char*>(path.c_str()), const_cast<char*>(url.c_str()),
                             nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(rc == 0);
  return pid;
}

// The wait status of a process StartSync started.
inline int Wait(pid_t pid) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}

// `agentmem sync name URL`, which must succeed.
inline ShellResult SyncRun(const TempDir& dir, const std::string& name) {
  ShellResult r = RunShell(dir.path(), {"sync", name, Url()});
  CHECK_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.empty());
  return r;
}

}  // namespace agentmem::test

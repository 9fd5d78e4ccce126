// tests/sql/changes_sql_test.cc -- the change feed in SQL (engine/sql/changes.cc,
// docs/replication.md): changes(since [, log]) gives the rows that
// agentmem_changes_since gives, change_log() names the file's log, and the
// positions a file does not hold are refused.
#include <doctest/doctest.h>

#include <agentmem.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/sql/stepped_query.h"

namespace {

using agentmem::test::g_error;
using agentmem::test::Query;
using agentmem::test::Rows;

agentmem_db* Seeded() {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(":memory:", &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "vector_dim=4") == AGENTMEM_OK);
  Query(db, "INSERT INTO episodes(user_id, session_id, role, text) VALUES "
            "('alice', 's1', 'user', 'I moved to Lisbon.'), ('bob', 's2', 'user', 'Hello')");
  Query(db, "INSERT INTO blocks(user_id, name, value) VALUES ('alice', 'persona', 'Friendly')");
  Query(db, "FORGET USER 'bob'");
  return db;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

TEST_CASE("changes(since) in SQL gives the rows agentmem_changes_since gives, in commit order") {
  agentmem_db* db = Seeded();
  Rows rows = Query(db, "SELECT seq, kind, id, user_id, data, commit_ts, log FROM changes(0)");
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_changes_since(db, 0, 0, &cur) == AGENTMEM_OK);
  size_t i = 0;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
    const agentmem_change* c = agentmem_cursor_change(cur);
    REQUIRE(i < rows.size());
    CHECK(rows[i][0] == std::to_string(c->seq));
    CHECK(rows[i][1] == c->kind_name);
    CHECK(rows[i][2] == std::to_string(c->id));
    CHECK(rows[i][3] == c->user_id);
    CHECK(rows[i][4] == c->data);
    CHECK(rows[i][5] == std::to_string(c->commit_ts));
    CHECK(rows[i][6] == Hex(c->log_id));
    i++;
  }
  CHECK(i == rows.size());
  agentmem_cursor_close(cur);
  Rows kinds = Query(db, "SELECT group_concat(kind, ' ') FROM changes(1)");
  CHECK(kinds[0][0] == "episode episode commit block commit forget commit");
  agentmem_close(db);
}

TEST_CASE("changes() names the log and last commit that change_log() gives") {
  agentmem_db* db = Seeded();
  Rows head = Query(db, "SELECT log, seq FROM change_log()");
  REQUIRE(head.size() == 1);
  uint64_t log_id = 0;
  int64_t seq = 0;
  REQUIRE(agentmem_changes_head(db, &log_id, &seq) == AGENTMEM_OK);
  CHECK(head[0][0] == Hex(log_id));
  CHECK(head[0][1] == std::to_string(seq));
  Rows last = Query(db, "SELECT max(seq), min(log), max(log) FROM changes(0)");
  CHECK(last[0] == std::vector<std::string>{head[0][1], head[0][0], head[0][0]});
  // The same log, written as change_log() gives it or in capitals.
  CHECK(Query(db, "SELECT count(*) FROM changes(" + head[0][1] + ", '" + head[0][0] + "')")[0][0] ==
        "0");
  std::string upper = head[0][0];
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  CHECK(Query(db, "SELECT count(*) FROM changes(2, '" + upper + "')")[0][0] != "0");
  agentmem_close(db);
}

TEST_CASE("changes() refuses a position the file does not hold and says what it holds") {
  agentmem_db* db = Seeded();
  int rc = 0;
  Query(db, "SELECT * FROM changes(99)", &rc);
  CHECK(rc == AGENTMEM_NOTFOUND_CHANGES);
  CHECK(g_error.find("commits 1 to") != std::string::npos);
  Query(db, "SELECT * FROM changes(0, '0000000000000001')", &rc);
  CHECK(rc == AGENTMEM_NOTFOUND_CHANGES);
  Query(db, "SELECT * FROM changes(0, 'not hex')", &rc);
  CHECK(rc == AGENTMEM_MISMATCH);
  Query(db, "SELECT * FROM changes(-1)", &rc);
  CHECK(rc == AGENTMEM_RANGE);
  Query(db, "SELECT * FROM changes()", &rc);
  CHECK(rc == AGENTMEM_MISUSE);
  CHECK(g_error.find("changes(since [, log])") != std::string::npos);
  agentmem_close(db);
}

TEST_CASE("an episode's vector comes back from changes() as a float32 blob") {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(":memory:", &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "vector_dim=4&embedder=mine") == AGENTMEM_OK);
  const float v[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  REQUIRE(agentmem_remember(db, "u", "s", "user", "with a vector", 0, nullptr, v, 4, nullptr) ==
          AGENTMEM_OK);
  agentmem_stmt* stmt = nullptr;
  REQUIRE(agentmem_prepare(db, "SELECT vector FROM changes(1) WHERE kind = 'episode'", -1, &stmt,
                           nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_step(stmt) == AGENTMEM_ROW);
  REQUIRE(agentmem_column_bytes(stmt, 0) == 16);
  float got[4];
  std::memcpy(got, agentmem_column_blob(stmt, 0), sizeof got);
  for (int i = 0; i < 4; i++) CHECK(got[i] == v[i]);
  CHECK(agentmem_step(stmt) == AGENTMEM_DONE);
  agentmem_finalize(stmt);
  CHECK(Query(db, "SELECT count(*) FROM changes(0) WHERE vector IS NOT NULL")[0][0] == "1");
  agentmem_close(db);
}

TEST_CASE("after VACUUM in SQL the new log's changes hold only the live records") {
  agentmem_db* db = Seeded();
  std::string old_log = Query(db, "SELECT log FROM change_log()")[0][0];
  Query(db, "VACUUM");
  Rows head = Query(db, "SELECT log, seq FROM change_log()");
  CHECK(head[0][0] != old_log);
  int rc = 0;
  Query(db, "SELECT * FROM changes(1, '" + old_log + "')", &rc);
  CHECK(rc == AGENTMEM_NOTFOUND_CHANGES);
  Rows users = Query(db, "SELECT DISTINCT user_id FROM changes(0) WHERE kind IN ('episode', "
                         "'block', 'fact') ORDER BY 1");
  CHECK(users == Rows{{"alice"}});
  agentmem_close(db);
}

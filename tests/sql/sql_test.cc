// tests/sql/sql_test.cc -- the SQL front end (docs/sql.md) through the public
// C API: statements, parameters, errors, the virtual tables and functions,
// pushdown, transactions, and that no SQLite file is ever created.
#include <doctest/doctest.h>

#include <agentmem.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>

#include <algorithm>
#include <cstdio>

#include "engine/memory/database.h"
#include "engine/sql/vtab.h"
#include "engine/sql/session.h"
#include "tests/util/fault_env.h"
#include "tests/util/open_helpers.h"
#include "tests/util/temp_dir.h"

using agentmem::test::TempDir;

namespace {

// One open handle, closed at the end of the test.
struct Db {
  explicit Db(const std::string& path = ":memory:", int flags = AGENTMEM_OPEN_READWRITE |
                                                                 AGENTMEM_OPEN_CREATE,
              const char* options = nullptr) {
    rc = agentmem_open_v2(path.c_str(), &db, flags, options);
  }
  ~Db() { agentmem_close(db); }
  agentmem_db* db = nullptr;
  int rc = AGENTMEM_OK;
};

using Rows = std::vector<std::vector<std::string>>;

// Runs sql with agentmem_exec and returns every row as text ("NULL" for NULL).
Rows Query(agentmem_db* db, const std::string& sql) {
  Rows rows;
  char* err = nullptr;
  int rc = agentmem_exec(
      db, sql.c_str(),
      [](void* arg, int n, char** values, char**) {
        auto* out = static_cast<Rows*>(arg);
        out->emplace_back();
        for (int i = 0; i < n; i++) out->back().push_back(values[i] ? values[i] : "NULL");
        return 0;
      },
      &rows, &err);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK,
                  sql << ": " << std::string(err ? err : "") << " (" << rc << ")");
  agentmem_free(err);
  return rows;
}

std::string One(agentmem_db* db, const std::string& sql) {
  Rows rows = Query(db, sql);
  REQUIRE_MESSAGE(rows.size() == 1, sql);
  REQUIRE_MESSAGE(rows[0].size() == 1, sql);
  return rows[0][0];
}

// Runs sql expecting failure; returns the code and leaves the message in *msg.
int Fails(agentmem_db* db, const std::string& sql, std::string* msg) {
  char* err = nullptr;
  int rc = agentmem_exec(db, sql.c_str(), nullptr, nullptr, &err);
  *msg = err ? err : "";
  agentmem_free(err);
  if (rc != AGENTMEM_OK) CHECK(*msg == agentmem_errmsg(db));
  return rc;
}

}  // namespace

TEST_CASE("plain SQL runs without any table") {
  Db h;
  REQUIRE(h.rc == AGENTMEM_OK);
  CHECK(One(h.db, "SELECT 1+1") == "2");
  CHECK(One(h.db, "SELECT json_extract('{\"a\":2}','$.a')") == "2");
  CHECK(Query(h.db, "SELECT 1; SELECT 2 UNION ALL SELECT 3") ==
        Rows{{"1"}, {"2"}, {"3"}});
  CHECK(agentmem_errcode(h.db) == AGENTMEM_OK);
}

TEST_CASE("prepared statements bind by position and by name") {
  Db h;
  agentmem_stmt* st = nullptr;
  const char* tail = nullptr;
  const char* sql = "SELECT ?1 + ?2, :name, @blob, $none; SELECT 2";
  REQUIRE(agentmem_prepare(h.db, sql, -1, &st, &tail) == AGENTMEM_OK);
  REQUIRE(st != nullptr);
  CHECK(std::string(tail) == " SELECT 2");
  CHECK(agentmem_db_handle(st) == h.db);
  CHECK(agentmem_bind_parameter_count(st) == 5);
  CHECK(agentmem_bind_parameter_index(st, ":name") == 3);
  CHECK(agentmem_bind_parameter_index(st, "@blob") == 4);
  CHECK(agentmem_bind_parameter_index(st, "$none") == 5);
  CHECK(agentmem_bind_parameter_index(st, ":missing") == 0);
  CHECK(agentmem_bind_int64(st, 1, 40) == AGENTMEM_OK);
  CHECK(agentmem_bind_double(st, 2, 2.5) == AGENTMEM_OK);
  std::string text = "caf\xc3\xa9 and more";
  CHECK(agentmem_bind_text(st, agentmem_bind_parameter_index(st, ":name"), text.c_str(), 5) ==
        AGENTMEM_OK);
  const unsigned char bytes[3] = {0, 1, 2};
  CHECK(agentmem_bind_blob(st, 4, bytes, 3) == AGENTMEM_OK);
  CHECK(agentmem_bind_null(st, 5) == AGENTMEM_OK);
  CHECK(agentmem_bind_int64(st, 6, 1) == AGENTMEM_RANGE);
  CHECK(std::string(agentmem_errmsg(h.db)).find("out of range") != std::string::npos);

  REQUIRE(agentmem_step(st) == AGENTMEM_ROW);
  CHECK(agentmem_column_count(st) == 4);
  CHECK(std::string(agentmem_column_name(st, 1)) == ":name");
  CHECK(agentmem_column_type(st, 0) == AGENTMEM_FLOAT);
  CHECK(agentmem_column_double(st, 0) == 42.5);
  CHECK(agentmem_column_type(st, 1) == AGENTMEM_TEXT);
  CHECK(std::string(reinterpret_cast<const char*>(agentmem_column_text(st, 1))) == "caf\xc3\xa9");
  CHECK(agentmem_column_bytes(st, 1) == 5);
  CHECK(agentmem_column_type(st, 2) == AGENTMEM_BLOB);
  REQUIRE(agentmem_column_bytes(st, 2) == 3);
  CHECK(std::memcmp(agentmem_column_blob(st, 2), bytes, 3) == 0);
  CHECK(agentmem_column_type(st, 3) == AGENTMEM_NULL);
  CHECK(agentmem_step(st) == AGENTMEM_DONE);

  // reset keeps the bindings; clear_bindings drops them.
  CHECK(agentmem_reset(st) == AGENTMEM_OK);
  REQUIRE(agentmem_step(st) == AGENTMEM_ROW);
  CHECK(agentmem_column_int64(st, 0) == 42);
  CHECK(agentmem_reset(st) == AGENTMEM_OK);
  CHECK(agentmem_clear_bindings(st) == AGENTMEM_OK);
  REQUIRE(agentmem_step(st) == AGENTMEM_ROW);
  CHECK(agentmem_column_type(st, 0) == AGENTMEM_NULL);
  CHECK(agentmem_finalize(st) == AGENTMEM_OK);
  CHECK(agentmem_finalize(nullptr) == AGENTMEM_OK);
}

TEST_CASE("a statement of only comments prepares to NULL") {
  Db h;
  agentmem_stmt* st = reinterpret_cast<agentmem_stmt*>(1);
  CHECK(agentmem_prepare(h.db, "  -- nothing\n /* here */ ", -1, &st, nullptr) == AGENTMEM_OK);
  CHECK(st == nullptr);
  CHECK(agentmem_exec(h.db, " ; -- nothing ", nullptr, nullptr, nullptr) == AGENTMEM_OK);
}

TEST_CASE("bad SQL fails with the message of the parser and nothing is left open") {
  Db h;
  std::string msg;
  CHECK(Fails(h.db, "SELEC 1", &msg) == AGENTMEM_ERROR);
  CHECK(msg.find("syntax error") != std::string::npos);
  CHECK(Fails(h.db, "SELECT * FROM no_such_table", &msg) == AGENTMEM_ERROR);
  CHECK(msg.find("no such table: no_such_table") != std::string::npos);
  agentmem_stmt* st = nullptr;
  CHECK(agentmem_prepare(h.db, "SELECT (", -1, &st, nullptr) == AGENTMEM_ERROR);
  CHECK(st == nullptr);
  CHECK(agentmem_prepare(h.db, nullptr, -1, &st, nullptr) == AGENTMEM_MISUSE);
  CHECK(agentmem_exec(h.db, "SELECT 1", nullptr, nullptr, nullptr) == AGENTMEM_OK);
  CHECK(agentmem_errcode(h.db) == AGENTMEM_OK);
}

TEST_CASE("a non-zero return from the exec callback aborts with AGENTMEM_ABORT") {
  Db h;
  int calls = 0;
  char* err = nullptr;
  int rc = agentmem_exec(
      h.db, "SELECT 1 UNION ALL SELECT 2; SELECT 3",
      [](void* arg, int, char**, char**) {
        ++*static_cast<int*>(arg);
        return 1;
      },
      &calls, &err);
  CHECK(rc == AGENTMEM_ABORT);
  CHECK(calls == 1);
  REQUIRE(err != nullptr);
  CHECK(std::string(err).find("aborted") != std::string::npos);
  agentmem_free(err);
}

TEST_CASE("the exec callback may call the API on the same handle") {
  Db h;
  struct Ctx {
    agentmem_db* db;
    std::string inner;
  } ctx{h.db, ""};
  int rc = agentmem_exec(
      h.db, "SELECT 1",
      [](void* arg, int, char**, char**) {
        auto* c = static_cast<Ctx*>(arg);
        c->inner = One(c->db, "SELECT 'nested'");
        return 0;
      },
      &ctx, nullptr);
  CHECK(rc == AGENTMEM_OK);
  CHECK(ctx.inner == "nested");
}

TEST_CASE("close refuses while a statement is not finalized") {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(":memory:", &db) == AGENTMEM_OK);
  agentmem_stmt* st = nullptr;
  REQUIRE(agentmem_prepare(db, "SELECT 1", -1, &st, nullptr) == AGENTMEM_OK);
  CHECK(agentmem_close(db) == AGENTMEM_BUSY);
  CHECK(std::string(agentmem_errmsg(db)).find("not finalized") != std::string::npos);
  CHECK(agentmem_finalize(st) == AGENTMEM_OK);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

// ---------------------------------------------------------------- the tables

namespace {

std::vector<float> UnitVector(int dim, int seed) {
  std::vector<float> v(dim);
  double norm = 0;
  for (int i = 0; i < dim; i++) {
    v[i] = static_cast<float>(std::sin(seed * 31.0 + i));
    norm += v[i] * v[i];
  }
  for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
  return v;
}

std::string JsonArray(const std::vector<float>& v) {
  std::string s = "[";
  char buf[32];
  for (size_t i = 0; i < v.size(); i++) {
    std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", v[i]);
    s += buf;
  }
  return s + "]";
}

int64_t Commits(agentmem_db* db) { return std::stoll(One(db, "SELECT commits FROM stats()")); }

// Steps a prepared statement to the end; returns the last code.
int RunStmt(agentmem_stmt* st) {
  int rc;
  while ((rc = agentmem_step(st)) == AGENTMEM_ROW) {
  }
  return rc;
}

// A few episodes of two users, through SQL.
void Seed(agentmem_db* db) {
  Query(db,
        "INSERT INTO episodes(user_id, session_id, role, text, ts, metadata) VALUES "
        "('alice', 's1', 'user', 'I moved to Lisbon last spring', 1000, "
        "'{\"channel\":\"chat\",\"place\":{\"city\":\"Lisbon\"}}'),"
        "('alice', 's1', 'assistant', 'Lisbon is lovely in spring', 2000, NULL),"
        "('alice', 's2', 'user', 'My cat is called Pixel', 3000, '{\"channel\":\"voice\"}'),"
        "('bob', 's1', 'user', 'I work as a carpenter in Porto', 1500, NULL),"
        "('bob', 's9', 'user', 'Porto has a bridge by Eiffel', 2500, '{\"channel\":\"chat\"}')");
}

}  // namespace

TEST_CASE("episodes are inserted and read back through SQL with every column") {
  Db h;
  Seed(h.db);
  CHECK(agentmem_changes(h.db) == 5);
  CHECK(One(h.db, "SELECT last_insert_rowid()") == "5");
  CHECK(Query(h.db, "SELECT id, user_id, session_id, role, text, ts, metadata FROM episodes "
                    "WHERE id = 3") ==
        Rows{{"3", "alice", "s2", "user", "My cat is called Pixel", "3000",
              "{\"channel\":\"voice\"}"}});
  CHECK(Query(h.db, "SELECT id FROM episodes ORDER BY id") ==
        Rows{{"1"}, {"2"}, {"3"}, {"4"}, {"5"}});
  CHECK(One(h.db, "SELECT count(*) FROM episodes WHERE metadata IS NULL") == "2");
  CHECK(One(h.db, "SELECT count(*) FROM episodes WHERE created_at > 0") == "5");
  // SELECT * leaves the hidden embedding out; it is there when named.
  agentmem_stmt* st = nullptr;
  REQUIRE(agentmem_prepare(h.db, "SELECT * FROM episodes", -1, &st, nullptr) == AGENTMEM_OK);
  CHECK(agentmem_column_count(st) == 8);
  agentmem_finalize(st);
  CHECK(One(h.db, "SELECT length(embedding) FROM episodes WHERE id = 1") ==
        std::to_string(agentmem::engine::DefaultSpace().dim * 4));
}

TEST_CASE("episode ids come in id order for every plan") {
  Db h;
  Seed(h.db);
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('alice', 'later')");
  CHECK(Query(h.db, "SELECT id FROM episodes") ==
        Rows{{"1"}, {"2"}, {"3"}, {"4"}, {"5"}, {"6"}});
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE user_id = 'alice'") ==
        Rows{{"1"}, {"2"}, {"3"}, {"6"}});
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE user_id = 'alice' ORDER BY id DESC") ==
        Rows{{"6"}, {"3"}, {"2"}, {"1"}});
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE user_id IN ('bob', 'alice') ORDER BY id") ==
        Rows{{"1"}, {"2"}, {"3"}, {"4"}, {"5"}, {"6"}});
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE user_id = 'alice' AND session_id = 's1'") ==
        Rows{{"1"}, {"2"}});
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE id IN (5, 2, 99, 4) ORDER BY id") ==
        Rows{{"2"}, {"4"}, {"5"}});
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE ts >= 1500 AND ts < 3000") ==
        Rows{{"2"}, {"4"}, {"5"}});
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE user_id = 'bob' AND ts > 1500.5") ==
        Rows{{"5"}});
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE id = '3'") == Rows{{"3"}});
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE id = 2.5").empty());
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE id = 0 OR id = -1").empty());
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE user_id = 'nobody'").empty());
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE user_id = NULL").empty());
}

TEST_CASE("a point lookup and a one-user listing do not scan the other users") {
  Db h;
  Seed(h.db);
  for (int i = 0; i < 50; i++) {
    Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('user" + std::to_string(i) +
                    "', 'filler')");
  }
  namespace sql = agentmem::engine::sql;
  auto plan = [&](const std::string& q) {
    Rows r = Query(h.db, "EXPLAIN QUERY PLAN " + q);
    REQUIRE(!r.empty());
    return r.back().back();
  };
  CHECK(plan("SELECT * FROM episodes WHERE id = 3").find("INDEX 0:id=") != std::string::npos);
  CHECK(plan("SELECT * FROM episodes WHERE user_id = 'bob'").find("user_id=") !=
        std::string::npos);
  CHECK(plan("SELECT * FROM episodes").find(":scan") != std::string::npos);

  sql::Counters().Reset();
  CHECK(One(h.db, "SELECT text FROM episodes WHERE id = 3") == "My cat is called Pixel");
  CHECK(sql::Counters().episode_reads == 1);
  CHECK(sql::Counters().user_scans == 0);

  sql::Counters().Reset();
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE id IN (1, 4)").size() == 2);
  CHECK(sql::Counters().episode_reads == 2);
  CHECK(sql::Counters().user_scans == 0);

  sql::Counters().Reset();
  CHECK(Query(h.db, "SELECT text FROM episodes WHERE user_id = 'bob'").size() == 2);
  CHECK(sql::Counters().episode_reads == 2);  // bob's two, none of the other 53
  CHECK(sql::Counters().user_scans == 0);
  CHECK(sql::Counters().user_lists == 1);

  // The counters do count: an unconstrained query walks every user.
  sql::Counters().Reset();
  CHECK(One(h.db, "SELECT count(*) FROM episodes WHERE text = 'filler'") == "50");
  CHECK(sql::Counters().user_scans == 1);
  CHECK(sql::Counters().episode_reads == 55);

  // Joins drive the lookup from the other side.
  sql::Counters().Reset();
  Query(h.db, "INSERT INTO facts(user_id, subject, predicate, object, source_episode_ids) "
              "VALUES ('bob', 'bob', 'works_as', 'carpenter', '[4]')");
  CHECK(Query(h.db, "SELECT e.text FROM facts f, json_each(f.source_episode_ids) j "
                    "JOIN episodes e ON e.id = j.value WHERE f.user_id = 'bob'") ==
        Rows{{"I work as a carpenter in Porto"}});
  CHECK(sql::Counters().episode_reads == 1);
  CHECK(sql::Counters().user_scans == 0);
}

TEST_CASE("an episode without an embedding gets the file's embedder vector") {
  Db h;
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'the same words')");
  int64_t id = 0;
  REQUIRE(agentmem_remember(h.db, "u", "", "", "the same words", 0, nullptr, nullptr, 0, &id) ==
          AGENTMEM_OK);
  agentmem_episode* e = nullptr;
  REQUIRE(agentmem_episode_get(h.db, id, &e) == AGENTMEM_OK);
  const int dim = static_cast<int>(agentmem::engine::DefaultSpace().dim);  // the new file's embedder
  REQUIRE(e->dim == dim);
  agentmem_stmt* st = nullptr;
  REQUIRE(agentmem_prepare(h.db, "SELECT embedding, user_id, session_id, role FROM episodes "
                                 "WHERE id = 1", -1, &st, nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_step(st) == AGENTMEM_ROW);
  REQUIRE(agentmem_column_bytes(st, 0) == dim * 4);
  CHECK(std::memcmp(agentmem_column_blob(st, 0), e->vector, dim * 4) == 0);
  CHECK(std::string(reinterpret_cast<const char*>(agentmem_column_text(st, 2))).empty());
  agentmem_finalize(st);
  agentmem_free(e);
}

TEST_CASE("an app supplies its own vector as a float32 BLOB or a JSON array") {
  TempDir dir;
  Db h(dir.File("own.agentmem"), AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
       "vector_dim=8&embedder=my-model");
  REQUIRE(h.rc == AGENTMEM_OK);
  std::vector<float> a = UnitVector(8, 1), b = UnitVector(8, 2);
  agentmem_stmt* st = nullptr;
  REQUIRE(agentmem_prepare(h.db, "INSERT INTO episodes(user_id, text, embedding) "
                                 "VALUES (:u, :t, :v)", -1, &st, nullptr) == AGENTMEM_OK);
  CHECK(agentmem_bind_text(st, agentmem_bind_parameter_index(st, ":u"), "u", -1) == AGENTMEM_OK);
  CHECK(agentmem_bind_text(st, agentmem_bind_parameter_index(st, ":t"), "blob", -1) ==
        AGENTMEM_OK);
  CHECK(agentmem_bind_blob(st, agentmem_bind_parameter_index(st, ":v"), a.data(), 32) ==
        AGENTMEM_OK);
  CHECK(RunStmt(st) == AGENTMEM_DONE);
  agentmem_finalize(st);
  Query(h.db, "INSERT INTO episodes(user_id, text, embedding) VALUES ('u', 'json', '" +
                  JsonArray(b) + "')");
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'none')");

  for (auto [id, want] : {std::pair{1, &a}, std::pair{2, &b}}) {
    agentmem_episode* e = nullptr;
    REQUIRE(agentmem_episode_get(h.db, id, &e) == AGENTMEM_OK);
    REQUIRE(e->dim == 8);
    for (int i = 0; i < 8; i++) CHECK(e->vector[i] == (*want)[i]);
    agentmem_free(e);
  }
  // No built-in embedder for this file: the text-only episode has no vector.
  CHECK(One(h.db, "SELECT embedding IS NULL FROM episodes WHERE id = 3") == "1");

  std::string msg;
  CHECK(Fails(h.db, "INSERT INTO episodes(user_id, text, embedding) VALUES ('u', 'x', '[1,2]')",
              &msg) == AGENTMEM_MISMATCH_DIMENSION);
  CHECK(msg.find("2 dimensions") != std::string::npos);
  CHECK(agentmem_extended_errcode(h.db) == AGENTMEM_MISMATCH_DIMENSION);
  CHECK(Fails(h.db, "INSERT INTO episodes(user_id, text, embedding) VALUES ('u', 'x', x'0102')",
              &msg) == AGENTMEM_MISMATCH_DIMENSION);
  CHECK(msg.find("float32") != std::string::npos);
  CHECK(Fails(h.db, "INSERT INTO episodes(user_id, text, embedding) VALUES ('u', 'x', '[1,\"a\"]')",
              &msg) == AGENTMEM_MISMATCH_JSON);
  CHECK(Fails(h.db, "INSERT INTO episodes(user_id, text, embedding) VALUES ('u', 'x', 7)",
              &msg) == AGENTMEM_MISMATCH);
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "3");
}

TEST_CASE("bad episode inserts are refused with the engine's message") {
  Db h;
  std::string msg;
  CHECK(Fails(h.db, "INSERT INTO episodes(user_id) VALUES ('u')", &msg) == AGENTMEM_CONSTRAINT);
  CHECK(msg == "episodes.text must not be NULL");
  CHECK(Fails(h.db, "INSERT INTO episodes(id, user_id, text) VALUES (7, 'u', 'x')", &msg) ==
        AGENTMEM_CONSTRAINT);
  CHECK(msg.find("assigned by the engine") != std::string::npos);
  CHECK(Fails(h.db, "INSERT INTO episodes(user_id, text, metadata) VALUES ('u', 'x', '{bad')",
              &msg) == AGENTMEM_MISMATCH_JSON);
  CHECK(Fails(h.db, "INSERT INTO episodes(user_id, text, ts) VALUES ('u', 'x', 'yesterday')",
              &msg) == AGENTMEM_MISMATCH);
  CHECK(msg.find("episodes.ts must be an integer") != std::string::npos);
  CHECK(Fails(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', CAST(x'ff' AS TEXT))",
              &msg) == AGENTMEM_MISMATCH_UTF8);
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "0");
  CHECK(Commits(h.db) == 1);  // the file's creation only
}

TEST_CASE("episodes, facts and blocks are append-only and point at FORGET") {
  Db h;
  Seed(h.db);
  Query(h.db, "INSERT INTO facts(user_id, subject, predicate, object) VALUES ('u', 's', 'p', 'o')");
  std::string msg;
  CHECK(Fails(h.db, "DELETE FROM episodes WHERE id = 1", &msg) == AGENTMEM_ERROR);
  CHECK(msg.find("append-only") != std::string::npos);
  CHECK(msg.find("FORGET EPISODE id") != std::string::npos);
  CHECK(Fails(h.db, "UPDATE episodes SET text = 'x' WHERE id = 1", &msg) == AGENTMEM_ERROR);
  CHECK(msg.find("append-only") != std::string::npos);
  CHECK(Fails(h.db, "DELETE FROM facts", &msg) == AGENTMEM_ERROR);
  CHECK(Fails(h.db, "UPDATE facts SET object = 'x'", &msg) == AGENTMEM_ERROR);
  CHECK(msg.find("facts are append-only") != std::string::npos);
  CHECK(Fails(h.db, "DELETE FROM blocks", &msg) == AGENTMEM_OK);  // no rows, nothing to refuse
  Query(h.db, "INSERT INTO blocks(user_id, name, value) VALUES ('u', 'b', 'v')");
  CHECK(Fails(h.db, "DELETE FROM blocks", &msg) == AGENTMEM_ERROR);
  CHECK(msg.find("FORGET BLOCK") != std::string::npos);
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "5");
  CHECK(One(h.db, "SELECT text FROM episodes WHERE id = 1") == "I moved to Lisbon last spring");
}

TEST_CASE("SQLite's JSON functions work on metadata") {
  Db h;
  Seed(h.db);
  CHECK(Query(h.db, "SELECT id FROM episodes WHERE json_extract(metadata, '$.channel') = 'chat'") ==
        Rows{{"1"}, {"5"}});
  CHECK(One(h.db, "SELECT metadata ->> '$.place.city' FROM episodes WHERE id = 1") == "Lisbon");
  Query(h.db, "INSERT INTO episodes(user_id, text, metadata) VALUES ('u', 'x', "
              "json_object('tags', json_array('a', 'b')))");
  CHECK(One(h.db, "SELECT json_array_length(metadata, '$.tags') FROM episodes WHERE id = 6") ==
        "2");
}

TEST_CASE("blocks are set with INSERT and UPDATE writes a new version") {
  Db h;
  Query(h.db, "INSERT INTO blocks(user_id, name, value, char_limit, pinned_order) "
              "VALUES ('alice', 'profile', 'Lives in Lisbon', 40, 0), "
              "('alice', 'todo', 'buy milk', NULL, NULL), ('bob', 'profile', 'Carpenter', 0, 1)");
  CHECK(Query(h.db, "SELECT user_id, name, value, version, char_limit, pinned_order FROM blocks "
                    "ORDER BY user_id, name") ==
        Rows{{"alice", "profile", "Lives in Lisbon", "1", "40", "0"},
             {"alice", "todo", "buy milk", "2", "0", "NULL"},
             {"bob", "profile", "Carpenter", "3", "0", "1"}});
  Query(h.db, "UPDATE blocks SET value = 'Lives in Porto' WHERE user_id = 'alice' AND "
              "name = 'profile'");
  CHECK(agentmem_changes(h.db) == 1);
  CHECK(Query(h.db, "SELECT value, version, char_limit, pinned_order FROM blocks "
                    "WHERE user_id = 'alice' AND name = 'profile'") ==
        Rows{{"Lives in Porto", "4", "40", "0"}});
  CHECK(Query(h.db, "SELECT value, version FROM block_history('alice', 'profile')") ==
        Rows{{"Lives in Lisbon", "1"}, {"Lives in Porto", "4"}});
  // INSERT of an existing name is a new version too (agentmem_block_set).
  Query(h.db, "INSERT INTO blocks(user_id, name, value) VALUES ('bob', 'profile', 'Retired')");
  CHECK(One(h.db, "SELECT last_insert_rowid()") == "5");
  CHECK(One(h.db, "SELECT count(*) FROM block_history('bob', 'profile')") == "2");

  std::string msg;
  CHECK(Fails(h.db, "UPDATE blocks SET value = 'Lives in a very very long place name that "
                    "does not fit' WHERE user_id = 'alice' AND name = 'profile'",
              &msg) == AGENTMEM_CONSTRAINT);
  CHECK(msg.find("its limit is 40") != std::string::npos);
  CHECK(Fails(h.db, "UPDATE blocks SET name = 'other' WHERE user_id = 'alice'", &msg) ==
        AGENTMEM_CONSTRAINT);
  CHECK(msg.find("cannot change") != std::string::npos);
  CHECK(Fails(h.db, "UPDATE blocks SET version = 99", &msg) == AGENTMEM_CONSTRAINT);
  CHECK(Fails(h.db, "INSERT INTO blocks(user_id, value) VALUES ('u', 'v')", &msg) ==
        AGENTMEM_CONSTRAINT);
  CHECK(Fails(h.db, "INSERT INTO blocks(user_id, name, value) VALUES ('u', '', 'v')", &msg) ==
        AGENTMEM_CONSTRAINT);
  CHECK(msg == "block name must not be empty");
  CHECK(Fails(h.db, "INSERT INTO blocks(user_id, name, value, pinned_order) VALUES "
                    "('u', 'n', 'v', -2)", &msg) == AGENTMEM_RANGE);
  CHECK(One(h.db, "SELECT count(*) FROM blocks") == "3");
  CHECK(One(h.db, "SELECT value FROM blocks WHERE user_id = 'alice' AND name = 'profile'") ==
        "Lives in Porto");
}

TEST_CASE("an UPDATE of every user's blocks writes one version of each") {
  Db h;
  for (int u = 0; u < 30; u++) {
    Query(h.db, "INSERT INTO blocks(user_id, name, value) VALUES ('u" + std::to_string(u) +
                    "', 'a', 'x'), ('u" + std::to_string(u) + "', 'b', 'y')");
  }
  int64_t c0 = Commits(h.db);
  Query(h.db, "UPDATE blocks SET value = value || '!', pinned_order = 3 WHERE name = 'b'");
  CHECK(agentmem_changes(h.db) == 30);
  CHECK(Commits(h.db) == c0 + 1);
  CHECK(One(h.db, "SELECT count(*) FROM blocks WHERE value = 'y!' AND pinned_order = 3") ==
        "30");
  CHECK(One(h.db, "SELECT count(*) FROM blocks WHERE value = 'x' AND pinned_order IS NULL") ==
        "30");
  CHECK(One(h.db, "SELECT block_versions FROM stats()") == "90");
}

TEST_CASE("facts are asserted and read with their times and sources") {
  Db h;
  Seed(h.db);
  Query(h.db, "INSERT INTO facts(user_id, subject, predicate, object, confidence, "
              "source_episode_ids, valid_from, valid_to) VALUES "
              "('alice', 'alice', 'lives_in', 'Berlin', 0.5, '[]', 100, 1000),"
              "('alice', 'alice', 'lives_in', 'Lisbon', 0.9, '[1, 2]', 1000, NULL),"
              "('alice', 'alice', 'has_pet', 'cat', NULL, NULL, 500, NULL),"
              "('bob', 'bob', 'works_as', 'carpenter', 1, '[4]', 10, NULL)");
  CHECK(Query(h.db, "SELECT id, object, confidence, source_episode_ids, valid_from, valid_to, "
                    "expired_at FROM facts WHERE user_id = 'alice'") ==
        Rows{{"1", "Berlin", "0.5", "[]", "100", "1000", "NULL"},
             {"2", "Lisbon", "0.899999976158142", "[1,2]", "1000", "NULL", "NULL"},
             {"3", "cat", "1.0", "[]", "500", "NULL", "NULL"}});
  CHECK(Query(h.db, "SELECT object FROM facts WHERE user_id = 'alice' AND predicate = "
                    "'lives_in' AND subject = 'alice'") == Rows{{"Berlin"}, {"Lisbon"}});
  CHECK(Query(h.db, "SELECT id FROM facts") == Rows{{"1"}, {"2"}, {"3"}, {"4"}});
  CHECK(Query(h.db, "SELECT id FROM facts WHERE id = 4") == Rows{{"4"}});
  CHECK(One(h.db, "SELECT recorded_at > 0 FROM facts WHERE id = 1") == "1");

  SUBCASE("facts_as_of keeps the facts valid at the instant") {
    CHECK(Query(h.db, "SELECT object FROM facts_as_of('alice', 200)") == Rows{{"Berlin"}});
    CHECK(Query(h.db, "SELECT object FROM facts_as_of('alice', 999)") ==
          Rows{{"Berlin"}, {"cat"}});
    CHECK(Query(h.db, "SELECT object FROM facts_as_of('alice', 1000)") ==
          Rows{{"Lisbon"}, {"cat"}});
    CHECK(Query(h.db, "SELECT object FROM facts_as_of('alice')") == Rows{{"Lisbon"}, {"cat"}});
    CHECK(Query(h.db, "SELECT object FROM facts_as_of('alice', 50)").empty());
  }
  SUBCASE("facts_as_of with known_at sees a superseded fact as the file knew it then") {
    REQUIRE(agentmem_predicate_declare(h.db, "lives_in", 1) == AGENTMEM_OK);
    Query(h.db, "INSERT INTO facts(user_id, subject, predicate, object, valid_from) VALUES "
                "('alice', 'alice', 'lives_in', 'Porto', 1000)");
    const std::string before = "(SELECT recorded_at - 1 FROM facts WHERE object = 'Porto')";
    CHECK(Query(h.db, "SELECT object FROM facts_as_of('alice', 2000, " + before + ")") ==
          Rows{{"Lisbon"}, {"cat"}});
    CHECK(Query(h.db, "SELECT object FROM facts_as_of('alice', 2000)") ==
          Rows{{"cat"}, {"Porto"}});
    CHECK(Query(h.db, "SELECT object FROM facts_as_of('alice', 2000, 0)").empty());
    std::string msg;
    CHECK(Fails(h.db, "SELECT * FROM facts_as_of('alice', 2000, 'x')", &msg) == AGENTMEM_MISMATCH);
    CHECK(msg.find("known_at") != std::string::npos);
  }
  SUBCASE("bad facts are refused") {
    std::string msg;
    CHECK(Fails(h.db, "INSERT INTO facts(user_id, subject, predicate, object, confidence) "
                      "VALUES ('u', 's', 'p', 'o', 1.5)", &msg) == AGENTMEM_RANGE);
    CHECK(Fails(h.db, "INSERT INTO facts(user_id, subject, predicate, object) "
                      "VALUES ('u', 's', '', 'o')", &msg) == AGENTMEM_CONSTRAINT);
    CHECK(Fails(h.db, "INSERT INTO facts(user_id, subject, predicate, object, valid_from, "
                      "valid_to) VALUES ('u', 's', 'p', 'o', 10, 5)", &msg) == AGENTMEM_RANGE);
    CHECK(Fails(h.db, "INSERT INTO facts(user_id, subject, predicate, object, "
                      "source_episode_ids) VALUES ('u', 's', 'p', 'o', '[\"x\"]')", &msg) ==
          AGENTMEM_MISMATCH_JSON);
    CHECK(One(h.db, "SELECT count(*) FROM facts") == "4");
  }
}

TEST_CASE("a statement outside a transaction is one engine commit") {
  Db h;
  int64_t c0 = Commits(h.db);
  Seed(h.db);  // five rows, one statement
  CHECK(Commits(h.db) == c0 + 1);
  Query(h.db, "INSERT INTO blocks(user_id, name, value) VALUES ('u', 'a', '1'), ('u', 'b', '2')");
  CHECK(Commits(h.db) == c0 + 2);
  // A statement that fails part-way writes nothing.
  std::string msg;
  CHECK(Fails(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'ok'), ('u', NULL)",
              &msg) == AGENTMEM_CONSTRAINT);
  CHECK(Commits(h.db) == c0 + 2);
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "5");
  // Reads commit nothing.
  Query(h.db, "SELECT * FROM episodes; SELECT * FROM blocks");
  CHECK(Commits(h.db) == c0 + 2);
}

TEST_CASE("BEGIN and COMMIT group statements into one engine commit") {
  TempDir dir;
  std::string path = dir.File("txn.agentmem");
  Db h(path);
  Db other(path);
  int64_t c0 = Commits(h.db);
  Query(h.db, "BEGIN");
  Seed(h.db);
  Query(h.db, "INSERT INTO blocks(user_id, name, value) VALUES ('alice', 'b', 'v')");
  Query(h.db, "INSERT INTO facts(user_id, subject, predicate, object) VALUES ('alice', 's', 'p', "
              "'o')");
  // The transaction reads its own writes; no one else sees them yet.
  CHECK(One(h.db, "SELECT count(*) FROM episodes WHERE user_id = 'alice'") == "3");
  CHECK(One(h.db, "SELECT value FROM blocks WHERE user_id = 'alice'") == "v");
  CHECK(One(other.db, "SELECT count(*) FROM episodes") == "0");
  Query(h.db, "COMMIT");
  CHECK(Commits(h.db) == c0 + 1);
  CHECK(One(other.db, "SELECT count(*) FROM episodes") == "5");
  CHECK(One(other.db, "SELECT count(*) FROM facts") == "1");
}

TEST_CASE("ROLLBACK discards the transaction's writes") {
  Db h;
  Seed(h.db);
  int64_t c0 = Commits(h.db);
  Query(h.db, "BEGIN; INSERT INTO episodes(user_id, text) VALUES ('u', 'gone'); "
              "INSERT INTO blocks(user_id, name, value) VALUES ('u', 'b', 'gone')");
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "6");
  Query(h.db, "ROLLBACK");
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "5");
  CHECK(One(h.db, "SELECT count(*) FROM blocks") == "0");
  CHECK(Commits(h.db) == c0);
  // The next episode gets the id the rolled-back one had: it was never committed.
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'kept')");
  CHECK(One(h.db, "SELECT text FROM episodes WHERE id = 6") == "kept");
}

TEST_CASE("a failed statement inside a transaction is undone and the transaction goes on") {
  Db h;
  int64_t c0 = Commits(h.db);
  Query(h.db, "BEGIN");
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'one'), ('u', 'two')");
  Query(h.db, "INSERT INTO blocks(user_id, name, value) VALUES ('u', 'b', 'kept')");
  std::string msg;
  // The third row fails: the statement's first two rows are undone, as in SQLite.
  CHECK(Fails(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'three'), ('u', 'four'), "
                    "('u', NULL)", &msg) == AGENTMEM_CONSTRAINT);
  CHECK(Fails(h.db, "INSERT INTO blocks(user_id, name, value, char_limit) VALUES "
                    "('u', 'c', 'ok', 0), ('u', 'd', 'too long', 2)", &msg) ==
        AGENTMEM_CONSTRAINT);
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'five')");
  CHECK(Query(h.db, "SELECT id, text FROM episodes") ==
        Rows{{"1", "one"}, {"2", "two"}, {"3", "five"}});
  Query(h.db, "COMMIT");
  CHECK(Commits(h.db) == c0 + 1);
  CHECK(Query(h.db, "SELECT id, text FROM episodes") ==
        Rows{{"1", "one"}, {"2", "two"}, {"3", "five"}});
  CHECK(Query(h.db, "SELECT name FROM blocks") == Rows{{"b"}});
}

TEST_CASE("ROLLBACK TO a savepoint undoes the writes made since it") {
  Db h;
  int64_t c0 = Commits(h.db);
  Query(h.db, "BEGIN; INSERT INTO episodes(user_id, text) VALUES ('u', 'one'); SAVEPOINT sp; "
              "INSERT INTO episodes(user_id, text) VALUES ('u', 'undone'); "
              "INSERT INTO blocks(user_id, name, value) VALUES ('u', 'b', 'undone'); "
              "ROLLBACK TO sp; INSERT INTO episodes(user_id, text) VALUES ('u', 'two'); "
              "RELEASE sp; COMMIT");
  CHECK(Query(h.db, "SELECT id, text FROM episodes") == Rows{{"1", "one"}, {"2", "two"}});
  CHECK(Query(h.db, "SELECT * FROM blocks").empty());
  CHECK(Commits(h.db) == c0 + 1);
  // A savepoint outside BEGIN is a transaction of its own.
  Query(h.db, "SAVEPOINT outer_sp; INSERT INTO blocks(user_id, name, value) VALUES ('u', 'b', "
              "'v'); RELEASE outer_sp");
  CHECK(Commits(h.db) == c0 + 2);
  CHECK(One(h.db, "SELECT value FROM blocks") == "v");
}

TEST_CASE("nested savepoints release and roll back as in SQLite, over every table") {
  Db h;
  int64_t c0 = Commits(h.db);
  Query(h.db, "BEGIN; INSERT INTO episodes(user_id, text) VALUES ('u', 'a'); SAVEPOINT s1; "
              "INSERT INTO episodes(user_id, text) VALUES ('u', 'b'); SAVEPOINT s2; "
              "INSERT INTO facts(user_id, subject, predicate, object) VALUES ('u', 's', 'p', 'o'); "
              "INSERT INTO blocks(user_id, name, value) VALUES ('u', 'n', 'v'); RELEASE s2");
  CHECK(One(h.db, "SELECT count(*) FROM facts") == "1");
  Query(h.db, "ROLLBACK TO s1");  // s2's writes were s1's since its RELEASE
  CHECK(Query(h.db, "SELECT text FROM episodes") == Rows{{"a"}});
  CHECK(Query(h.db, "SELECT * FROM facts").empty());
  CHECK(Query(h.db, "SELECT * FROM blocks").empty());
  std::string msg;
  CHECK(Fails(h.db, "ROLLBACK TO s2", &msg) != AGENTMEM_OK);  // gone with the RELEASE
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'c'); SAVEPOINT s3; "
              "INSERT INTO blocks(user_id, name, value) VALUES ('u', 'n', 'dropped'); "
              "ROLLBACK TO s3; ROLLBACK TO s3; "
              "INSERT INTO blocks(user_id, name, value) VALUES ('u', 'n', 'kept'); "
              "RELEASE s1; COMMIT");
  CHECK(Commits(h.db) == c0 + 1);
  CHECK(Query(h.db, "SELECT id, text FROM episodes") == Rows{{"1", "a"}, {"2", "c"}});
  CHECK(Query(h.db, "SELECT value, version FROM blocks") == Rows{{"kept", "1"}});
  // Tables that join after the savepoints were opened roll back to them too.
  Query(h.db, "BEGIN; SAVEPOINT x; SAVEPOINT y; INSERT INTO blocks(user_id, name, value) "
              "VALUES ('u', 'n', 'in y'); ROLLBACK TO x; INSERT INTO facts(user_id, subject, "
              "predicate, object) VALUES ('u', 's', 'p', 'in x'); ROLLBACK TO x; COMMIT");
  CHECK(Commits(h.db) == c0 + 1);
  CHECK(Query(h.db, "SELECT value FROM blocks") == Rows{{"kept"}});
  CHECK(Query(h.db, "SELECT * FROM facts").empty());
}

TEST_CASE("ROLLBACK TO after many writes drops them and leaves the kept ones as they were written") {
  TempDir dir;
  const std::string kept_rows =
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) ";
  const std::string dropped_rows =
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) ";
  Db h(dir.File("kept.agentmem"));
  Query(h.db, "BEGIN");
  Query(h.db, "INSERT INTO episodes(user_id, text) " + kept_rows +
                  "SELECT 'u', 'kept ' || i FROM n");
  Query(h.db, "INSERT INTO blocks(user_id, name, value) VALUES ('u', 'persona', 'kept')");
  Query(h.db, "INSERT INTO facts(user_id, subject, predicate, object) VALUES ('u', 's', 'p', "
              "'kept')");
  const Rows written = Query(h.db, "SELECT id, created_at FROM episodes ORDER BY id");
  const Rows fact = Query(h.db, "SELECT id, recorded_at FROM facts");
  Query(h.db, "SAVEPOINT sp");
  Query(h.db, "INSERT INTO episodes(user_id, text) " + dropped_rows +
                  "SELECT 'u', 'dropped ' || i FROM n");
  Query(h.db, "INSERT INTO blocks(user_id, name, value) " + dropped_rows +
                  "SELECT 'u', 'persona', 'dropped ' || i FROM n");
  Query(h.db, "INSERT INTO facts(user_id, subject, predicate, object) " + dropped_rows +
                  "SELECT 'u', 's', 'p', 'dropped ' || i FROM n");
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "500");
  Query(h.db, "ROLLBACK TO sp");
  // The kept rows are the ones written before the savepoint, not written again:
  // their engine-assigned times are unchanged.
  CHECK(Query(h.db, "SELECT id, created_at FROM episodes ORDER BY id") == written);
  CHECK(Query(h.db, "SELECT id, recorded_at FROM facts") == fact);
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'after')");
  CHECK(One(h.db, "SELECT max(id) FROM episodes") == "201");
  Query(h.db, "COMMIT");
  CHECK(Query(h.db, "SELECT * FROM integrity_check()") == Rows{{"ok"}});
  // The file holds the records of the same transaction written without the
  // dropped ones, and nothing else.
  Db same(dir.File("same.agentmem"));
  Query(same.db, "BEGIN");
  Query(same.db, "INSERT INTO episodes(user_id, text) " + kept_rows +
                     "SELECT 'u', 'kept ' || i FROM n");
  Query(same.db, "INSERT INTO blocks(user_id, name, value) VALUES ('u', 'persona', 'kept')");
  Query(same.db, "INSERT INTO facts(user_id, subject, predicate, object) VALUES ('u', 's', "
                 "'p', 'kept')");
  Query(same.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'after')");
  Query(same.db, "COMMIT");
  const std::string counts =
      "SELECT episodes, blocks, block_versions, facts, users, commits, text_bytes FROM stats";
  CHECK(Query(h.db, counts) == Query(same.db, counts));
  Db reopened(dir.File("kept.agentmem"));
  CHECK(Query(reopened.db, counts) == Query(same.db, counts));
  CHECK(Query(reopened.db, "SELECT id, created_at FROM episodes WHERE id <= 200 ORDER BY id") ==
        written);
  CHECK(One(reopened.db, "SELECT group_concat(value) FROM block_history('u', 'persona')") ==
        "kept");
}

TEST_CASE("inside an agentmem_begin transaction a failed statement is undone, and so are SQL's writes at its ROLLBACK") {
  Db h;
  int64_t c0 = Commits(h.db);
  REQUIRE(agentmem_begin(h.db) == AGENTMEM_OK);
  REQUIRE(agentmem_remember(h.db, "u", "", "", "from C", 0, nullptr, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'a')");
  std::string msg;
  CHECK(Fails(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'b'), ('u', NULL)",
              &msg) == AGENTMEM_CONSTRAINT);
  CHECK(Query(h.db, "SELECT text FROM episodes ORDER BY id") == Rows{{"from C"}, {"a"}});
  Query(h.db, "BEGIN; INSERT INTO episodes(user_id, text) VALUES ('u', 'c'); SAVEPOINT sp; "
              "INSERT INTO episodes(user_id, text) VALUES ('u', 'd'); ROLLBACK TO sp; "
              "INSERT INTO episodes(user_id, text) VALUES ('u', 'e')");
  CHECK(Query(h.db, "SELECT id, text FROM episodes ORDER BY id") ==
        Rows{{"1", "from C"}, {"2", "a"}, {"3", "c"}, {"4", "e"}});
  Query(h.db, "ROLLBACK");
  CHECK(Query(h.db, "SELECT text FROM episodes ORDER BY id") == Rows{{"from C"}, {"a"}});
  CHECK(Commits(h.db) == c0);
  REQUIRE(agentmem_commit(h.db) == AGENTMEM_OK);
  CHECK(Commits(h.db) == c0 + 1);
  CHECK(Query(h.db, "SELECT id, text FROM episodes ORDER BY id") ==
        Rows{{"1", "from C"}, {"2", "a"}});
}

TEST_CASE("COMMIT after the C API ended the transaction says what happened") {
  Db h;
  Query(h.db, "BEGIN; INSERT INTO episodes(user_id, text) VALUES ('u', 'x')");
  REQUIRE(agentmem_commit(h.db) == AGENTMEM_OK);
  std::string msg;
  CHECK(Fails(h.db, "COMMIT", &msg) == AGENTMEM_MISUSE);
  CHECK(msg.find("agentmem_commit()") != std::string::npos);
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "1");
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'y')");
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "2");
}

TEST_CASE("one handle is shared by threads running SQL") {
  Db h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < 25; i++) {
        agentmem_stmt* st = nullptr;
        if (agentmem_prepare(h.db, "INSERT INTO episodes(user_id, text) VALUES (?, ?)", -1, &st,
                             nullptr) != AGENTMEM_OK) {
          return;
        }
        std::string user("t"), text("row ");
        user.append(std::to_string(t));
        text.append(std::to_string(i));
        agentmem_bind_text(st, 1, user.c_str(), -1);
        agentmem_bind_text(st, 2, text.c_str(), -1);
        agentmem_step(st);
        agentmem_finalize(st);
        agentmem_exec(h.db, "SELECT count(*) FROM episodes WHERE user_id = 't0'", nullptr,
                      nullptr, nullptr);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(Query(h.db, "SELECT user_id, count(*) FROM episodes GROUP BY user_id") ==
        Rows{{"t0", "25"}, {"t1", "25"}, {"t2", "25"}, {"t3", "25"}});
}

TEST_CASE("SQL writes join a transaction opened with agentmem_begin") {
  Db h;
  int64_t c0 = Commits(h.db);
  REQUIRE(agentmem_begin(h.db) == AGENTMEM_OK);
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'a')");
  REQUIRE(agentmem_remember(h.db, "u", "", "", "b", 0, nullptr, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'c')");
  CHECK(Commits(h.db) == c0);
  REQUIRE(agentmem_rollback(h.db) == AGENTMEM_OK);
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "0");
  REQUIRE(agentmem_begin(h.db) == AGENTMEM_OK);
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'a'), ('u', 'b')");
  REQUIRE(agentmem_commit(h.db) == AGENTMEM_OK);
  CHECK(Commits(h.db) == c0 + 1);
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "2");
}

TEST_CASE("a read sees what another handle committed since the last statement") {
  TempDir dir;
  std::string path = dir.File("shared.agentmem");
  Db a(path);
  Db b(path);
  CHECK(One(b.db, "SELECT count(*) FROM episodes") == "0");
  Seed(a.db);
  CHECK(One(b.db, "SELECT count(*) FROM episodes") == "5");
  CHECK(One(b.db, "SELECT text FROM episodes WHERE id = 4") == "I work as a carpenter in Porto");
  REQUIRE(agentmem_remember(a.db, "carol", "", "", "hello", 0, nullptr, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  CHECK(One(b.db, "SELECT user_id FROM episodes WHERE id = 6") == "carol");
  CHECK(One(b.db, "SELECT users FROM stats()") == "3");
}

TEST_CASE("a read-only handle reads through SQL and refuses writes") {
  TempDir dir;
  std::string path = dir.File("ro.agentmem");
  {
    Db w(path);
    Seed(w.db);
  }
  Db ro(path, AGENTMEM_OPEN_READONLY);
  REQUIRE(ro.rc == AGENTMEM_OK);
  CHECK(One(ro.db, "SELECT count(*) FROM episodes") == "5");
  CHECK(One(ro.db, "SELECT count(*) FROM recall('Lisbon', 'alice', 2)") == "2");
  std::string msg;
  CHECK(Fails(ro.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'x')", &msg) ==
        AGENTMEM_READONLY_FILE);
  CHECK(msg.find("read-only") != std::string::npos);
  CHECK(agentmem_errcode(ro.db) == AGENTMEM_READONLY);
  CHECK(Fails(ro.db, "BEGIN; INSERT INTO blocks(user_id, name, value) VALUES ('u', 'n', 'v')",
              &msg) == AGENTMEM_READONLY_FILE);
  Query(ro.db, "ROLLBACK");
  CHECK(One(ro.db, "SELECT count(*) FROM episodes") == "5");
}

TEST_CASE("a second writer gets AGENTMEM_BUSY and loses nothing") {
  TempDir dir;
  std::string path = dir.File("busy.agentmem");
  Db a(path, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE, "busy_timeout=0");
  Db b(path, AGENTMEM_OPEN_READWRITE, "busy_timeout=0");
  Query(a.db, "BEGIN; INSERT INTO episodes(user_id, text) VALUES ('a', 'holds the lock')");
  std::string msg;
  CHECK(Fails(b.db, "INSERT INTO episodes(user_id, text) VALUES ('b', 'waits')", &msg) ==
        AGENTMEM_BUSY_TIMEOUT);
  CHECK(msg.find("locked") != std::string::npos);
  Query(a.db, "COMMIT");
  Query(b.db, "INSERT INTO episodes(user_id, text) VALUES ('b', 'now')");
  CHECK(Query(a.db, "SELECT user_id, text FROM episodes") ==
        Rows{{"a", "holds the lock"}, {"b", "now"}});
}

// ---------------------------------------------------------------- functions

namespace {

struct Hit {
  int64_t id;
  double score, bm25_score, vector_score;
  int bm25_rank, vector_rank;
  bool operator==(const Hit&) const = default;
};

std::vector<Hit> SqlRecall(agentmem_db* db, const std::string& sql) {
  std::vector<Hit> out;
  agentmem_stmt* st = nullptr;
  REQUIRE(agentmem_prepare(db, sql.c_str(), -1, &st, nullptr) == AGENTMEM_OK);
  int rc;
  while ((rc = agentmem_step(st)) == AGENTMEM_ROW) {
    out.push_back(Hit{agentmem_column_int64(st, 0), agentmem_column_double(st, 1),
                      agentmem_column_double(st, 2), agentmem_column_double(st, 3),
                      static_cast<int>(agentmem_column_int64(st, 4)),
                      static_cast<int>(agentmem_column_int64(st, 5))});
  }
  CHECK(rc == AGENTMEM_DONE);
  agentmem_finalize(st);
  return out;
}

std::vector<std::string> DirEntries(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = opendir(path.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("recall through SQL gives the ids and scores of Database::Recall and the C API") {
  TempDir dir;
  std::string path = dir.File("recall.agentmem");
  Db h(path);
  Seed(h.db);
  const char* texts[] = {"We hiked in Sintra near Lisbon", "Pixel sleeps all day",
                         "Dinner plans for Friday", "The tram to Belem was slow",
                         "My sister visits in June", "Lisbon rent is getting expensive"};
  for (int i = 0; i < 30; i++) {
    Query(h.db, std::string("INSERT INTO episodes(user_id, session_id, role, text, ts) VALUES "
                            "('alice', 's") + std::to_string(i % 3) + "', '" +
                    (i % 2 ? "user" : "assistant") + "', '" + texts[i % 6] + " " +
                    std::to_string(i) + "', " + std::to_string(10000 + i) + ")");
  }
  agentmem::engine::Options opts;
  opts.read_only = true;
  std::unique_ptr<agentmem::engine::Database> engine;
  REQUIRE(agentmem::engine::Database::Open(path, opts, &engine).ok());

  struct Case {
    std::string sql;
    agentmem::engine::RecallQuery q;
  };
  std::vector<Case> cases;
  for (auto [mode, name] : {std::pair{agentmem::engine::RecallMode::kHybrid, "hybrid"},
                            std::pair{agentmem::engine::RecallMode::kBm25, "bm25"},
                            std::pair{agentmem::engine::RecallMode::kVector, "vector"}}) {
    Case c;
    c.sql = std::string("SELECT id, score, bm25_score, vector_score, bm25_rank, vector_rank "
                        "FROM recall('Lisbon rent', 'alice', 7, '") + name + "')";
    c.q.user_id = "alice";
    c.q.text = "Lisbon rent";
    c.q.k = 7;
    c.q.mode = mode;
    if (mode == agentmem::engine::RecallMode::kVector) {
      // No vector neighbour is above the embedder's floor: fill = 1, so
      // both sides have hits to compare.
      c.sql.insert(c.sql.size() - 1, ", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
                                     "NULL, 1");
      c.q.fill = true;
    }
    cases.push_back(c);
  }
  Case filtered;
  filtered.sql = "SELECT id, score, bm25_score, vector_score, bm25_rank, vector_rank FROM "
                 "recall('Lisbon', 'alice', 5, 'hybrid', 's1', 'user', 10000, 10020, NULL, NULL, "
                 "NULL, NULL, NULL, NULL, 1)";  // nothing there matches: fill = 1
  filtered.q.fill = true;
  filtered.q.user_id = "alice";
  filtered.q.text = "Lisbon";
  filtered.q.k = 5;
  filtered.q.session_id = "s1";
  filtered.q.role = "user";
  filtered.q.ts_from = 10000;
  filtered.q.ts_to = 10020;
  cases.push_back(filtered);
  Case defaults;
  defaults.sql = "SELECT id, score, bm25_score, vector_score, bm25_rank, vector_rank FROM "
                 "recall('Pixel', 'alice')";
  defaults.q.user_id = "alice";
  defaults.q.text = "Pixel";
  cases.push_back(defaults);
  Case thresholds;
  thresholds.sql = "SELECT id, score, bm25_score, vector_score, bm25_rank, vector_rank FROM "
                   "recall WHERE query = 'Lisbon rent' AND for_user = 'alice' AND k = 20 AND "
                   "min_similarity = 0.1 AND min_bm25 = 2.5 AND fill = 0";
  thresholds.q.user_id = "alice";
  thresholds.q.text = "Lisbon rent";
  thresholds.q.k = 20;
  thresholds.q.min_similarity = 0.1;
  thresholds.q.min_bm25 = 2.5;
  cases.push_back(thresholds);

  for (const Case& c : cases) {
    CAPTURE(c.sql);
    std::vector<agentmem::engine::RecallHit> want;
    REQUIRE(engine->Recall(c.q, &want, nullptr).ok());
    std::vector<Hit> got = SqlRecall(h.db, c.sql);
    REQUIRE(got.size() == want.size());
    REQUIRE(!got.empty());
    for (size_t i = 0; i < got.size(); i++) {
      CHECK(got[i].id == static_cast<int64_t>(want[i].id));
      CHECK(got[i].score == want[i].score);
      CHECK(got[i].bm25_score == want[i].bm25_score);
      CHECK(got[i].vector_score == want[i].vector_score);
      CHECK(got[i].bm25_rank == want[i].bm25_rank);
      CHECK(got[i].vector_rank == want[i].vector_rank);
    }
  }

  // The typed C API and agentmem_exec agree with the prepared statement.
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.k = 7;
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_recall(h.db, "alice", "Lisbon rent", &o, &cur) == AGENTMEM_OK);
  std::vector<Hit> typed;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
    const agentmem_hit* x = agentmem_cursor_hit(cur);
    typed.push_back(Hit{x->id, x->score, x->bm25_score, x->vector_score, x->bm25_rank,
                        x->vector_rank});
  }
  agentmem_cursor_close(cur);
  CHECK(typed == SqlRecall(h.db, cases[0].sql));
  Rows ids = Query(h.db, "SELECT id FROM recall('Lisbon rent', 'alice', 7)");
  REQUIRE(ids.size() == typed.size());
  for (size_t i = 0; i < ids.size(); i++) CHECK(ids[i][0] == std::to_string(typed[i].id));

  // The episode columns come with each hit.
  CHECK(Query(h.db, "SELECT user_id, session_id, role, text, ts FROM recall('Pixel cat', "
                    "'alice', 1, 'bm25')") ==
        Rows{{"alice", "s2", "user", "My cat is called Pixel", "3000"}});
  // Named arguments work like positional ones.
  CHECK(Query(h.db, "SELECT id FROM recall WHERE query = 'Pixel' AND for_user = 'alice' AND "
                    "k = 3") == Query(h.db, "SELECT id FROM recall('Pixel', 'alice', 3)"));
  // The metadata filter.
  CHECK(Query(h.db, "SELECT id FROM recall WHERE query = 'Lisbon' AND for_user = 'alice' AND "
                    "metadata_key = 'channel' AND metadata_value = '\"chat\"'") == Rows{{"1"}});
}

TEST_CASE("recall arguments are checked with clear messages") {
  Db h;
  Seed(h.db);
  std::string msg;
  CHECK(Fails(h.db, "SELECT * FROM recall('x')", &msg) == AGENTMEM_MISUSE);
  CHECK(msg.find("needs a query and a user_id") != std::string::npos);
  CHECK(Fails(h.db, "SELECT * FROM recall('x', 'alice', 5, 'fuzzy')", &msg) == AGENTMEM_MISUSE);
  CHECK(msg.find("'hybrid', 'bm25' or 'vector'") != std::string::npos);
  CHECK(Fails(h.db, "SELECT * FROM recall('x', 'alice', -1)", &msg) == AGENTMEM_RANGE);
  CHECK(Fails(h.db, "SELECT * FROM recall('x', 'alice', 5, 'hybrid', NULL, NULL, 'soon')",
              &msg) == AGENTMEM_MISMATCH);
  CHECK(Fails(h.db, "SELECT * FROM recall('x', 'alice', 5, 'vector', NULL, NULL, NULL, NULL, "
                    "NULL, NULL, NULL, NULL, '[1, 2]')", &msg) == AGENTMEM_MISMATCH_DIMENSION);
  CHECK(Fails(h.db, "SELECT * FROM recall('x', 'alice', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, "
                    "14, 15, 16)", &msg) == AGENTMEM_ERROR);
  CHECK(msg.find("too many arguments") != std::string::npos);
  CHECK(One(h.db, "SELECT count(*) FROM recall('Lisbon', 'nobody')") == "0");
  CHECK(Fails(h.db, "SELECT * FROM recall WHERE query = 'x' AND for_user = 'alice' AND fill = 2",
              &msg) == AGENTMEM_MISMATCH);
  CHECK(msg.find("fill must be 0 or 1") != std::string::npos);
  CHECK(Fails(h.db, "SELECT * FROM recall WHERE query = 'x' AND for_user = 'alice' AND "
                    "min_similarity = 'high'", &msg) == AGENTMEM_MISMATCH);
  CHECK(msg.find("min_similarity must be a number") != std::string::npos);
  // A query that matches nothing: no rows; fill = 1 lists the user's episodes.
  CHECK(One(h.db, "SELECT count(*) FROM recall('zeppelin', 'alice')") == "0");
  CHECK(One(h.db, "SELECT count(*) FROM recall WHERE query = 'zeppelin' AND for_user = 'alice' "
                  "AND fill = 1") == "3");
  CHECK(Fails(h.db, "SELECT * FROM recall WHERE query = 'x' AND all_users = 2", &msg) ==
        AGENTMEM_MISMATCH);
  // all_users searches every user's episodes; user_id is not needed.
  CHECK(Query(h.db, "SELECT user_id FROM recall WHERE query = 'Porto Lisbon' AND all_users = 1 "
                    "AND k = 4 AND mode = 'bm25' ORDER BY user_id") ==
        Rows{{"alice"}, {"alice"}, {"bob"}, {"bob"}});
  CHECK(One(h.db, "SELECT count(*) FROM recall('Lisbon', 'alice', 0)") == "0");
}

TEST_CASE("recall is usable in a join with an argument from another table") {
  Db h;
  Seed(h.db);
  CHECK(Query(h.db, "SELECT u.name, r.id FROM (SELECT 'bob' AS name) u, "
                    "recall('Porto carpenter', u.name, 1, 'bm25') r") == Rows{{"bob", "4"}});
}

TEST_CASE("explain_recall returns the plan and the hits as one JSON row") {
  Db h;
  Seed(h.db);
  std::string plan = One(h.db, "SELECT plan FROM explain_recall('Lisbon', 'alice', 2)");
  CHECK(plan.find("\"mode\":\"hybrid\"") != std::string::npos);
  CHECK(plan.find("\"partition\":3") != std::string::npos);
  CHECK(One(h.db, "SELECT json_array_length(plan, '$.hits') FROM explain_recall('Lisbon', "
                  "'alice', 2)") == "2");
  CHECK(One(h.db, "SELECT plan ->> '$.hits[0].id' FROM explain_recall('Lisbon', 'alice', 2, "
                  "'bm25')") == One(h.db, "SELECT id FROM recall('Lisbon', 'alice', 1, 'bm25')"));
  char* c_plan = nullptr;
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.k = 2;
  REQUIRE(agentmem_explain_recall(h.db, "alice", "Lisbon", &o, &c_plan) == AGENTMEM_OK);
  CHECK(One(h.db, "SELECT json_extract(plan, '$.hits[0].id', '$.hits[1].id', '$.filtered') "
                  "FROM explain_recall('Lisbon', 'alice', 2)") ==
        One(h.db, std::string("SELECT json_extract('") + c_plan +
                      "', '$.hits[0].id', '$.hits[1].id', '$.filtered')"));
  agentmem_free(c_plan);
}

TEST_CASE("explain_recall and agentmem_explain_recall return the same JSON text") {
  TempDir dir;
  const std::string path = dir.File("explain.agentmem");
  {
    Db w(path);
    REQUIRE(w.rc == AGENTMEM_OK);
    Seed(w.db);
  }
  Db h(path);
  REQUIRE(h.rc == AGENTMEM_OK);
  struct Case {
    int mode;
    const char* sql_mode;
    int k;
    int fill;
    const char* query;
  };
  const Case cases[] = {{AGENTMEM_RECALL_HYBRID, "hybrid", 2, 0, "Lisbon spring"},
                        {AGENTMEM_RECALL_BM25, "bm25", 5, 0, "Lisbon"},
                        {AGENTMEM_RECALL_VECTOR, "vector", 3, 0, "where does she live"},
                        {AGENTMEM_RECALL_HYBRID, "hybrid", 3, 1, "zeppelin"}};
  for (const Case& c : cases) {
    CAPTURE(c.query);
    CAPTURE(c.sql_mode);
    agentmem_recall_options o;
    agentmem_recall_options_init(&o);
    o.mode = c.mode;
    o.k = c.k;
    o.fill = c.fill;
    char* c_plan = nullptr;
    REQUIRE(agentmem_explain_recall(h.db, "alice", c.query, &o, &c_plan) == AGENTMEM_OK);
    std::string from_c = c_plan;
    agentmem_free(c_plan);
    std::string from_sql =
        One(h.db, std::string("SELECT plan FROM explain_recall WHERE query = '") + c.query +
                      "' AND for_user = 'alice' AND k = " + std::to_string(c.k) +
                      " AND mode = '" + c.sql_mode + "' AND fill = " + std::to_string(c.fill));
    CHECK(from_sql == from_c);
    CHECK(One(h.db, "SELECT json_valid('" + from_c + "')") == "1");
  }
}

TEST_CASE("integrity_check stats and user_stats describe the file") {
  Db h;
  Seed(h.db);
  Query(h.db, "INSERT INTO blocks(user_id, name, value) VALUES ('alice', 'b', '1'); "
              "UPDATE blocks SET value = '2' WHERE user_id = 'alice' AND name = 'b'; "
              "INSERT INTO facts(user_id, subject, predicate, object) VALUES ('carol', 's', "
              "'p', 'o')");
  CHECK(Query(h.db, "SELECT * FROM integrity_check()") == Rows{{"ok"}});
  CHECK(Query(h.db, "SELECT episodes, blocks, block_versions, facts, users, commits FROM "
                    "stats()") == Rows{{"5", "1", "2", "1", "3", "5"}});
  CHECK(One(h.db, "SELECT file_bytes > 0 AND pages > 0 AND text_bytes > 0 FROM stats") == "1");
  CHECK(Query(h.db, "SELECT * FROM user_stats() ORDER BY user_id") ==
        Rows{{"alice", "3", "1", "0"}, {"bob", "2", "0", "0"}, {"carol", "0", "0", "1"}});
  CHECK(Query(h.db, "SELECT episodes FROM user_stats('bob')") == Rows{{"2"}});
}

TEST_CASE("block_history needs both arguments") {
  Db h;
  std::string msg;
  CHECK(Fails(h.db, "SELECT * FROM block_history('alice')", &msg) == AGENTMEM_MISUSE);
  CHECK(msg.find("block_history(user_id, name)") != std::string::npos);
  CHECK(Query(h.db, "SELECT * FROM block_history('alice', 'none')").empty());
}

TEST_CASE("FORGET and VACUUM statements forget, compact and return a receipt") {
  TempDir dir;
  Db h(dir.File("m.agentmem"));
  REQUIRE(h.rc == AGENTMEM_OK);
  Query(h.db, "INSERT INTO episodes(user_id, session_id, text) VALUES "
              "('bob', 's1', 'bob likes long bicycle rides in the hills'), "
              "('bob', 's2', 'bob plans a trip to the coast next summer'), "
              "('ann', 's1', 'ann likes quiet mornings with coffee'); "
              "INSERT INTO blocks(user_id, name, value) VALUES ('bob', 'persona', 'cyclist'); "
              "INSERT INTO facts(user_id, subject, predicate, object, source_episode_ids) "
              "VALUES ('bob', 'bob', 'likes', 'cycling', '[1]')");
  // A session, then the rest of the user with PURGE; parameters bind as usual.
  CHECK(Query(h.db, "FORGET USER 'bob' SESSION 's2'") == Rows{{"1", "0", "0", "0", "0", "0", "0", "0"}});
  agentmem_stmt* st = nullptr;
  REQUIRE(agentmem_prepare(h.db, "FORGET USER ? PURGE;", -1, &st, nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_bind_text(st, 1, "bob", -1) == AGENTMEM_OK);
  REQUIRE(agentmem_step(st) == AGENTMEM_ROW);
  CHECK(agentmem_column_int64(st, 0) == 1);  // episodes
  CHECK(agentmem_column_int64(st, 1) == 1);  // facts
  CHECK(agentmem_column_int64(st, 2) == 1);  // block versions
  CHECK(agentmem_column_int64(st, 3) == 1);  // vacuumed
  CHECK(agentmem_column_int64(st, 5) < agentmem_column_int64(st, 4));  // the file shrank
  CHECK(agentmem_column_int64(st, 6) > 0);   // needles searched
  CHECK(agentmem_column_int64(st, 7) == 0);  // none found
  CHECK(agentmem_step(st) == AGENTMEM_DONE);
  agentmem_finalize(st);
  CHECK(Query(h.db, "SELECT count(*) FROM episodes WHERE user_id = 'bob'") == Rows{{"0"}});
  CHECK(Query(h.db, "SELECT count(*) FROM facts WHERE user_id = 'bob'") == Rows{{"0"}});
  CHECK(Query(h.db, "SELECT count(*) FROM blocks WHERE user_id = 'bob'") == Rows{{"0"}});
  CHECK(Query(h.db, "SELECT id FROM recall('bicycle', 'bob', 5)").empty());
  const std::string exported = One(h.db, "SELECT export_user('bob')");
  CHECK(exported.find("bicycle") == std::string::npos);
  CHECK(exported.find("cyclist") == std::string::npos);
  CHECK(exported.find("\"episode\"") == std::string::npos);
  CHECK(One(h.db, "SELECT export_user('ann')").find("\"episode\"") != std::string::npos);
  CHECK(Query(h.db, "SELECT id FROM recall('coffee', 'ann', 5)") == Rows{{"3"}});
  CHECK(One(h.db, "SELECT vacuumed FROM vacuum()") == "1");
  CHECK(Query(h.db, "VACUUM")[0][3] == "1");
  CHECK(Query(h.db, "SELECT * FROM integrity_check()") == Rows{{"ok"}});
  CHECK(Query(h.db, "FORGET EPISODE 3") == Rows{{"1", "0", "0", "0", "0", "0", "0", "0"}});
  CHECK(Query(h.db, "FORGET FACT 99; FORGET BLOCK 'ann' 'none'") ==
        Rows{{"0", "0", "0", "0", "0", "0", "0", "0"}, {"0", "0", "0", "0", "0", "0", "0", "0"}});
  std::string msg;
  CHECK(Fails(h.db, "FORGET USER", &msg) == AGENTMEM_ERROR);
  CHECK(msg.find("FORGET USER u [SESSION s | BEFORE t] [PURGE]") != std::string::npos);
  CHECK(Fails(h.db, "FORGET EPISODE 'x'", &msg) == AGENTMEM_ERROR);
  CHECK(Fails(h.db, "FORGET USER 'a' PURGE now", &msg) == AGENTMEM_ERROR);
  CHECK(Fails(h.db, "FORGET EPISODE ?ISNULL", &msg) == AGENTMEM_ERROR);  // ?NNN is digits only
  CHECK(msg.find("unexpected") != std::string::npos);
  CHECK(Fails(h.db, "BEGIN; FORGET USER 'ann' PURGE", &msg) == AGENTMEM_MISUSE);
  Query(h.db, "ROLLBACK");
  CHECK(Fails(h.db, "  /* c */ vacuum main", &msg) == AGENTMEM_ERROR);
  CHECK(Fails(h.db, "REINDEX episodes", &msg) == AGENTMEM_ERROR);
  CHECK(msg.find("REINDEX takes no arguments here") != std::string::npos);
}

TEST_CASE("REINDEX rebuilds both indexes and returns what it indexed") {
  TempDir dir;
  Db h(dir.File("r.agentmem"));
  REQUIRE(h.rc == AGENTMEM_OK);
  Query(h.db, "INSERT INTO episodes(user_id, text) VALUES ('ann', 'ann likes quiet mornings'), "
              "('ann', 'ann rides a bicycle to work'), ('ann', 'ann reads in the evening')");
  Query(h.db, "FORGET EPISODE 1");
  const Rows r = Query(h.db, "REINDEX;");
  REQUIRE(r.size() == 1);
  CHECK(r[0][0] == "2");  // live episodes
  CHECK(r[0][1] == "2");  // with vectors
  CHECK(r[0][2] != "0");  // the checkpoint's first page
  CHECK(Query(h.db, "SELECT id FROM recall('bicycle', 'ann', 1, 'bm25')") == Rows{{"2"}});
  CHECK(Query(h.db, "SELECT episodes FROM reindex()") == Rows{{"2"}});
  CHECK(Query(h.db, "SELECT * FROM integrity_check()") == Rows{{"ok"}});
  std::string msg;
  CHECK(Fails(h.db, "BEGIN; REINDEX", &msg) == AGENTMEM_MISUSE);
  Query(h.db, "ROLLBACK");
}

TEST_CASE("no SQLite database file is ever created") {
  TempDir dir;
  std::string path = dir.File("only.agentmem");
  Db h(path);
  std::vector<std::string> before = DirEntries(dir.path());
  Seed(h.db);
  Query(h.db, "BEGIN; INSERT INTO blocks(user_id, name, value) VALUES ('u', 'n', 'v'); COMMIT");
  // Enough temporary data that a file-backed temp store would spill to disk.
  Query(h.db, "CREATE TEMP TABLE scratch(a); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
              "SELECT i + 1 FROM n WHERE i < 20000) INSERT INTO scratch SELECT "
              "printf('%.500c', i) FROM n; SELECT a FROM scratch ORDER BY a DESC LIMIT 1");
  Query(h.db, "SELECT * FROM episodes ORDER BY text DESC");
  std::string msg;
  std::string attached = dir.File("attached.db");
  CHECK(Fails(h.db, "ATTACH '" + attached + "' AS x", &msg) == AGENTMEM_ERROR);
  CHECK(msg.find("ATTACH is not supported") != std::string::npos);
  CHECK(Fails(h.db, "VACUUM INTO '" + dir.File("copy.db") + "'", &msg) == AGENTMEM_ERROR);
  CHECK(Fails(h.db, "CREATE TABLE t(a)", &msg) == AGENTMEM_ERROR);
  CHECK(msg.find("CREATE TEMP TABLE") != std::string::npos);
  CHECK(Fails(h.db, "DROP TABLE episodes", &msg) == AGENTMEM_ERROR);
  CHECK(Fails(h.db, "PRAGMA temp_store = FILE", &msg) == AGENTMEM_ERROR);
  CHECK(DirEntries(dir.path()) == before);
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "5");
}

TEST_CASE("the tables are listed in the schema") {
  Db h;
  CHECK(Query(h.db, "SELECT name FROM sqlite_schema ORDER BY name") ==
        Rows{{"blocks"}, {"episodes"}, {"facts"}});
  CHECK(Query(h.db, "SELECT name FROM pragma_table_info('blocks')") ==
        Rows{{"user_id"}, {"name"}, {"value"}, {"version"}, {"char_limit"}, {"pinned_order"},
             {"updated_at"}});
}

// ---------------------------------------------------------------- I/O errors

namespace {

// Runs every statement of sql on a Session; returns the first failure.
agentmem::Status SessionExec(agentmem::engine::sql::Session* s, const std::string& sql) {
  const char* rest = sql.c_str();
  while (*rest) {
    sqlite3_stmt* st = nullptr;
    const char* tail = nullptr;
    agentmem::Status prep = s->Prepare(rest, -1, &st, &tail);
    if (!prep.ok()) return prep;
    if (!st) break;
    agentmem::Status r;
    while ((r = s->Step(st)).code() == agentmem::kRow) {
    }
    sqlite3_finalize(st);
    if (r.code() != agentmem::kDone) return r;
    rest = tail;
  }
  return agentmem::Status::OK();
}

}  // namespace

TEST_CASE("a failed commit reports the engine's I/O error and later writes are refused") {
  namespace eng = agentmem::engine;
  std::unique_ptr<eng::Env> mem = eng::NewMemEnv();
  agentmem::test::FaultEnv env(mem.get());
  agentmem::test::TestClock clock;
  auto db = agentmem::test::MustOpen(
      "io.agentmem", agentmem::test::TestOptionsFor(&env, &clock, eng::SyncMode::kFull, 7, 8));
  std::unique_ptr<eng::sql::Session> session;
  REQUIRE(eng::sql::Session::Open(db.get(), &session).ok());
  REQUIRE(SessionExec(session.get(), "INSERT INTO episodes(user_id, text) VALUES ('u', 'kept')")
              .ok());

  SUBCASE("in autocommit") {
    env.FailAt(1, agentmem::test::Fault::kEio, false, agentmem::test::kOpSync);
    agentmem::Status s =
        SessionExec(session.get(), "INSERT INTO episodes(user_id, text) VALUES ('u', 'lost')");
    CHECK(s.code() == agentmem::kIoErrFsync);
  }
  SUBCASE("at COMMIT") {
    REQUIRE(SessionExec(session.get(), "BEGIN; INSERT INTO episodes(user_id, text) VALUES "
                                       "('u', 'lost')").ok());
    env.FailAt(1, agentmem::test::Fault::kEio, false, agentmem::test::kOpSync);
    CHECK(SessionExec(session.get(), "COMMIT").code() == agentmem::kIoErrFsync);
    CHECK(!db->in_transaction());
  }
  env.ClearFaults();
  agentmem::Status again =
      SessionExec(session.get(), "INSERT INTO episodes(user_id, text) VALUES ('u', 'refused')");
  CHECK(again.code() == agentmem::kIoErrSticky);
  CHECK(again.message().find("close and reopen") != std::string::npos);
  // Reads still work, and the acknowledged episode is there.
  CHECK(SessionExec(session.get(), "SELECT * FROM episodes WHERE id = 1").ok());
  session.reset();
  db.reset();
  auto reopened = agentmem::test::MustOpen(
      "io.agentmem", agentmem::test::TestOptionsFor(&env, &clock, eng::SyncMode::kFull, 7, 8));
  agentmem::format::EpisodeRecord r;
  REQUIRE(reopened->GetEpisode(1, &r).ok());
  CHECK(r.text == "kept");
}

TEST_CASE("a statement reading episodes or recall hits sees one snapshot while another handle forgets") {
  TempDir dir;
  const std::string path = dir.File("snap.agentmem");
  Db a(path), b(path);
  REQUIRE(a.rc == AGENTMEM_OK);
  REQUIRE(b.rc == AGENTMEM_OK);
  Query(a.db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'one'), ('u', 'two'), "
              "('u', 'three'), ('u', 'four')");
  agentmem_stmt* st = nullptr;
  REQUIRE(agentmem_prepare(a.db, "SELECT id, text FROM episodes WHERE user_id = 'u'", -1, &st,
                           nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_step(st) == AGENTMEM_ROW);
  CHECK(agentmem_column_int64(st, 0) == 1);
  REQUIRE(agentmem_forget_episode(b.db, 3, 0, nullptr) == AGENTMEM_OK);
  std::vector<int64_t> rest;
  int rc;
  while ((rc = agentmem_step(st)) == AGENTMEM_ROW) rest.push_back(agentmem_column_int64(st, 0));
  CHECK(rc == AGENTMEM_DONE);
  CHECK(rest == std::vector<int64_t>{2, 3, 4});  // the statement's snapshot
  agentmem_finalize(st);
  CHECK(Query(a.db, "SELECT id FROM episodes WHERE user_id = 'u'") == Rows{{"1"}, {"2"}, {"4"}});

  // recall() reads each hit's episode as it steps: the forget of a hit not
  // yet read does not reach the statement either.
  Query(a.db, "INSERT INTO episodes(user_id, text) VALUES ('v', 'tea in the morning'), "
              "('v', 'tea at noon'), ('v', 'tea at night')");
  REQUIRE(agentmem_prepare(a.db, "SELECT text FROM recall('tea', 'v', 10, 'bm25')", -1, &st,
                           nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_step(st) == AGENTMEM_ROW);
  std::vector<std::string> texts{reinterpret_cast<const char*>(agentmem_column_text(st, 0))};
  REQUIRE(agentmem_forget(b.db, "v", nullptr, 0, 0, nullptr) == AGENTMEM_OK);
  while ((rc = agentmem_step(st)) == AGENTMEM_ROW) {
    texts.push_back(reinterpret_cast<const char*>(agentmem_column_text(st, 0)));
  }
  CHECK_MESSAGE(rc == AGENTMEM_DONE, std::string(agentmem_errmsg(a.db)));
  std::sort(texts.begin(), texts.end());
  CHECK(texts == std::vector<std::string>{"tea at night", "tea at noon", "tea in the morning"});
  agentmem_finalize(st);
  CHECK(One(a.db, "SELECT count(*) FROM recall('tea', 'v', 10, 'bm25')") == "0");
}

TEST_CASE("a NUL byte in a name or a text is refused by INSERT with AGENTMEM_MISMATCH") {
  Db h;
  std::string msg;
  CHECK((Fails(h.db, "INSERT INTO episodes(user_id, text) VALUES('alice'||char(0)||'evil', 'x')",
               &msg) & 0xff) == AGENTMEM_MISMATCH);
  CHECK(msg.find("user_id contains a NUL byte") != std::string::npos);
  CHECK((Fails(h.db, "INSERT INTO episodes(user_id, text) VALUES('alice', 'before'||char(0)||'after')",
               &msg) & 0xff) == AGENTMEM_MISMATCH);
  CHECK(msg.find("text contains a NUL byte") != std::string::npos);
  CHECK((Fails(h.db, "INSERT INTO episodes(user_id, session_id, text) VALUES('a', 's'||char(0), 'x')",
               &msg) & 0xff) == AGENTMEM_MISMATCH);
  CHECK((Fails(h.db, "INSERT INTO blocks(user_id, name, value) VALUES('a', 'n'||char(0), 'v')",
               &msg) & 0xff) == AGENTMEM_MISMATCH);
  CHECK((Fails(h.db, "INSERT INTO blocks(user_id, name, value) VALUES('a', 'n', 'v'||char(0)||'w')",
               &msg) & 0xff) == AGENTMEM_MISMATCH);
  CHECK((Fails(h.db, "INSERT INTO facts(user_id, subject, predicate, object) "
                     "VALUES('a', 'a', 'likes', 'tea'||char(0)||'coffee')",
               &msg) & 0xff) == AGENTMEM_MISMATCH);
  CHECK((Fails(h.db, "INSERT INTO facts(user_id, subject, predicate, object) "
                     "VALUES('a', 'a', 'li'||char(0)||'kes', 'tea')",
               &msg) & 0xff) == AGENTMEM_MISMATCH);
  CHECK((Fails(h.db, "SELECT * FROM forget('user', 'alice'||char(0), NULL, NULL, NULL, NULL, 0)",
               &msg) & 0xff) == AGENTMEM_MISMATCH);
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "0");
  CHECK(One(h.db, "SELECT count(*) FROM blocks") == "0");
  CHECK(One(h.db, "SELECT count(*) FROM facts") == "0");
  // Bound as a parameter with its length, the same.
  agentmem_stmt* st = nullptr;
  REQUIRE(agentmem_prepare(h.db, "INSERT INTO episodes(user_id, text) VALUES(?, 'x')", -1, &st,
                           nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_bind_text(st, 1, "alice\0evil", 10) == AGENTMEM_OK);
  CHECK((agentmem_step(st) & 0xff) == AGENTMEM_MISMATCH);
  agentmem_finalize(st);
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "0");
}

TEST_CASE("INSERT refuses metadata nested deeper than 64 levels with AGENTMEM_TOOBIG") {
  Db h;
  std::string deep(5000, '['), msg;
  deep += std::string(5000, ']');
  CHECK(Fails(h.db, "INSERT INTO episodes(user_id, text, metadata) VALUES('u', 'x', '" + deep + "')",
              &msg) == AGENTMEM_TOOBIG);
  CHECK(msg.find("the limit is 64") != std::string::npos);
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "0");
  std::string ok = std::string(64, '[') + std::string(64, ']');
  Query(h.db, "INSERT INTO episodes(user_id, text, metadata) VALUES('u', 'x', '" + ok + "')");
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "1");
}

TEST_CASE("SET RETENTION and retention() set and read the retention policy") {
  TempDir dir;
  const std::string path = dir.File("r.agentmem");
  Db h(path);
  REQUIRE(h.rc == AGENTMEM_OK);
  CHECK(Query(h.db, "SELECT * FROM retention()") == Rows{{"0", "0"}});
  CHECK(Query(h.db, "SET RETENTION 2592000 KEEP CITED") == Rows{{"2592000", "1"}});
  int64_t age = 0;
  int keep = 0;
  REQUIRE(agentmem_retention_get(h.db, &age, &keep) == AGENTMEM_OK);
  CHECK(age == 2592000);
  CHECK(keep == 1);
  CHECK(Query(h.db, "set retention 3600;") == Rows{{"3600", "0"}});
  CHECK(Query(h.db, "SELECT max_age_s, keep_cited FROM retention(60, 1)") == Rows{{"60", "1"}});
  // Like FORGET, it runs on its own, not inside BEGIN ... COMMIT.
  Query(h.db, "BEGIN");
  std::string why;
  CHECK(Fails(h.db, "SET RETENTION 120", &why) == AGENTMEM_MISUSE);
  CHECK(why.find("inside BEGIN") != std::string::npos);
  CHECK(Query(h.db, "SELECT * FROM retention()") == Rows{{"60", "1"}});
  Query(h.db, "ROLLBACK");
  // Inside a C API transaction it joins it, and reads show it.
  REQUIRE(agentmem_begin(h.db) == AGENTMEM_OK);
  CHECK(Query(h.db, "SET RETENTION 120") == Rows{{"120", "0"}});
  REQUIRE(agentmem_rollback(h.db) == AGENTMEM_OK);
  CHECK(Query(h.db, "SELECT * FROM retention()") == Rows{{"60", "1"}});
  std::string msg;
  CHECK(Fails(h.db, "SET RETENTION 'a week'", &msg) != AGENTMEM_OK);
  CHECK(msg.find("SET RETENTION seconds [KEEP CITED]") != std::string::npos);
  CHECK((Fails(h.db, "SET RETENTION -1", &msg) & 0xff) == AGENTMEM_RANGE);
  // An episode already older than the policy goes at the commit that set it.
  const int64_t old = (1700000000LL - 7200) * 1000000;
  Query(h.db, "INSERT INTO episodes(user_id, text, ts) VALUES('u', 'long ago', " +
                  std::to_string(old) + ")");
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "0");
  Query(h.db, "SET RETENTION 0");
  Query(h.db, "INSERT INTO episodes(user_id, text, ts) VALUES('u', 'long ago', " +
                  std::to_string(old) + ")");
  CHECK(One(h.db, "SELECT count(*) FROM episodes") == "1");
}

namespace {

int OfflineModel(void*, int, const char* const*, int, float*, char* err, int err_size) {
  std::snprintf(err, static_cast<size_t>(err_size), "model offline");
  return AGENTMEM_ERROR;
}

}  // namespace

TEST_CASE("agentmem_get_autocommit says whether a transaction is open, and a failed COMMIT ended it") {
  Db h;
  CHECK(agentmem_get_autocommit(h.db) == 1);
  REQUIRE(agentmem_begin(h.db) == AGENTMEM_OK);
  CHECK(agentmem_get_autocommit(h.db) == 0);
  REQUIRE(agentmem_rollback(h.db) == AGENTMEM_OK);
  CHECK(agentmem_get_autocommit(h.db) == 1);
  Query(h.db, "BEGIN");
  CHECK(agentmem_get_autocommit(h.db) == 0);  // no write yet: SQL's transaction alone
  Query(h.db, "COMMIT");
  CHECK(agentmem_get_autocommit(h.db) == 1);
  // The model is called at commit for the texts waiting for vectors; it fails.
  agentmem_db* m = nullptr;
  REQUIRE(agentmem_open_v2(":memory:", &m, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "embedder=offline&vector_dim=4") == AGENTMEM_OK);
  REQUIRE(agentmem_create_embedder(m, "offline", 4, AGENTMEM_METRIC_COSINE, OfflineModel, nullptr,
                                   nullptr) == AGENTMEM_OK);
  Query(m, "BEGIN; INSERT INTO episodes(user_id, text) VALUES ('u', 'lost')");
  CHECK(agentmem_get_autocommit(m) == 0);
  std::string msg;
  CHECK(Fails(m, "COMMIT", &msg) != AGENTMEM_OK);
  CHECK(msg.find("model offline") != std::string::npos);
  CHECK(agentmem_get_autocommit(m) == 1);
  CHECK(agentmem_rollback(m) == AGENTMEM_MISUSE);  // nothing left to end
  CHECK(One(m, "SELECT count(*) FROM episodes") == "0");
  agentmem_close(m);
  CHECK(agentmem_get_autocommit(nullptr) == 1);
}

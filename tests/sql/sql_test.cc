// tests/sql/sql_test.cc -- the SQL front end (docs/sql.md) through the public
// C API: statements, parameters, errors, the virtual tables and functions,
// pushdown, transactions, and that no SQLite file is ever created.
#include <doctest/doctest.h>

#include <agentmem.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

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
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, sql << ": " << (err ? err : "") << " (" << rc << ")");
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

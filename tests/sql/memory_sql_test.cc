// tests/sql/memory_sql_test.cc -- the SQL face of context assembly, profile
// and export (docs/sql.md, docs/memory.md): context(user_id, query, budget),
// profile(user_id) and export_user(user_id) give what the C API gives.
#include <doctest/doctest.h>

#include <agentmem.h>

#include <string>
#include <vector>

#include "tests/sql/stepped_query.h"

namespace {

using agentmem::test::g_error;
using agentmem::test::Query;
using agentmem::test::Rows;

agentmem_db* Seeded() {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(":memory:", &db) == AGENTMEM_OK);
  REQUIRE(agentmem_remember(db, "alice", "s1", "user", "I adopted a cat named Miso", 0, nullptr,
                            nullptr, 0, nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_remember(db, "alice", "s2", "user", "Rainy week in Lisbon", 0, nullptr,
                            nullptr, 0, nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_block_set(db, "alice", "persona", "Friendly", 0, 0) == AGENTMEM_OK);
  REQUIRE(agentmem_fact_assert(db, "alice", "Alice", "has_pet", "cat Miso", 0.9, 0, 0, nullptr, 0,
                               nullptr) == AGENTMEM_OK);
  return db;
}

}  // namespace

TEST_CASE("context() in SQL returns the rows agentmem_context returns") {
  agentmem_db* db = Seeded();
  for (int budget : {0, 2, 5, 9, 100}) {
    CAPTURE(budget);
    Rows rows = Query(db, "SELECT position, kind, id, name, text, tokens, reason FROM "
                          "context('alice', 'cat', " + std::to_string(budget) + ")");
    agentmem_context_item* items = nullptr;
    int n = 0;
    REQUIRE(agentmem_context(db, "alice", "cat", budget, &items, &n) == AGENTMEM_OK);
    REQUIRE(rows.size() == static_cast<size_t>(n));
    const char* kinds[] = {"", "block", "fact", "episode"};
    int sum = 0;
    for (int i = 0; i < n; i++) {
      CHECK(rows[i][0] == std::to_string(i + 1));
      CHECK(rows[i][1] == kinds[items[i].kind]);
      CHECK(rows[i][2] == std::to_string(items[i].id));
      CHECK(rows[i][3] == items[i].name);
      CHECK(rows[i][4] == items[i].text);
      CHECK(rows[i][5] == std::to_string(items[i].tokens));
      CHECK(rows[i][6] == items[i].reason);
      sum += items[i].tokens;
    }
    CHECK(sum <= budget);
    agentmem_free(items);
  }
  Rows all = Query(db, "SELECT kind, reason FROM context('alice', 'cat', 1000)");
  REQUIRE(all.size() == 3);  // "Rainy week in Lisbon" does not match "cat"
  CHECK(all[0] == std::vector<std::string>{"block", "pinned block persona"});
  CHECK(all[1] == std::vector<std::string>{"fact", "current fact, bm25 rank 1"});
  CHECK(all[2][1] == "recall rank 1: bm25 #1, vector #1");
  Rows sum = Query(db, "SELECT sum(tokens) <= 7 FROM context WHERE for_user = 'alice' AND "
                       "for_query = 'cat' AND budget = 7");
  CHECK(sum[0][0] == "1");
  int rc = 0;
  Query(db, "SELECT * FROM context('alice', 'cat')", &rc);
  CHECK(rc == AGENTMEM_MISUSE);
  CHECK(g_error.find("context(user_id, query, budget)") !=
        std::string::npos);
  Query(db, "SELECT * FROM context('alice', 'cat', -1)", &rc);
  CHECK(rc == AGENTMEM_RANGE);
  agentmem_close(db);
}

TEST_CASE("profile() and export_user() in SQL return the C API's text") {
  agentmem_db* db = Seeded();
  char* profile = nullptr;
  REQUIRE(agentmem_profile(db, "alice", &profile) == AGENTMEM_OK);
  Rows rows = Query(db, "SELECT profile('alice'), profile('alice') ->> '$.sessions', "
                        "json_array_length(profile('alice') -> '$.top_facts')");
  CHECK(rows[0][0] == profile);
  CHECK(rows[0][1] == "2");
  CHECK(rows[0][2] == "1");
  agentmem_free(profile);
  char* jsonl = nullptr;
  REQUIRE(agentmem_export(db, "alice", &jsonl) == AGENTMEM_OK);
  rows = Query(db, "SELECT export_user('alice')");
  CHECK(rows[0][0] == jsonl);
  agentmem_free(jsonl);
  int rc = 0;
  Query(db, "SELECT profile(NULL)", &rc);
  CHECK(rc == AGENTMEM_MISUSE);
  CHECK(g_error == "profile() needs a user_id: profile(user_id)");
  agentmem_close(db);
}

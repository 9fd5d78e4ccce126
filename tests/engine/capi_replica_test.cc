// tests/engine/capi_replica_test.cc -- the replica writes of include/agentmem.h
// (engine/capi/capi_replica.cc): an episode and a fact written with every
// field as given, and the sync.* settings, which a VACUUM keeps.
#include <doctest/doctest.h>

#include <agentmem.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "tests/util/temp_dir.h"

using agentmem::test::TempDir;

namespace {

agentmem_db* OpenNew(const std::string& path) {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "vector_dim=4&embedder=mine") == AGENTMEM_OK);
  return db;
}

std::string Meta(agentmem_db* db, const char* key) {
  char* v = nullptr;
  REQUIRE(agentmem_meta_get(db, key, &v) == AGENTMEM_OK);
  std::string out = v;
  agentmem_free(v);
  return out;
}

}  // namespace

TEST_CASE("episode_put keeps ts, created_at, metadata and vector and assigns the next id") {
  TempDir dir;
  agentmem_db* db = OpenNew(dir.File("r.agentmem"));
  REQUIRE(agentmem_remember(db, "u", "s", "user", "first", 0, nullptr, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  const float v[4] = {0.25f, -1.5f, 3.0f, 0.0f};
  agentmem_episode ep{};
  ep.id = 77;  // ignored
  ep.user_id = "alice";
  ep.session_id = "s9";
  ep.role = "assistant";
  ep.text = "copied from another file";
  ep.ts = 1000;
  ep.created_at = 2000;
  ep.metadata = "{\"k\":1}";
  ep.vector = v;
  ep.dim = 4;
  int64_t id = 0;
  REQUIRE(agentmem_episode_put(db, &ep, &id) == AGENTMEM_OK);
  CHECK(id == 2);
  agentmem_episode* got = nullptr;
  REQUIRE(agentmem_episode_get(db, id, &got) == AGENTMEM_OK);
  CHECK(std::string(got->text) == "copied from another file");
  CHECK(got->ts == 1000);
  CHECK(got->created_at == 2000);
  CHECK(std::string(got->metadata) == "{\"k\":1}");
  REQUIRE(got->dim == 4);
  CHECK(std::memcmp(got->vector, v, sizeof v) == 0);
  agentmem_free(got);

  ep.dim = 3;
  CHECK(agentmem_episode_put(db, &ep, &id) == AGENTMEM_MISMATCH_DIMENSION);
  ep.dim = 4;
  ep.ts = -5;
  CHECK(agentmem_episode_put(db, &ep, &id) == AGENTMEM_RANGE);
  CHECK(agentmem_episode_put(db, nullptr, &id) == AGENTMEM_MISUSE);
  agentmem_close(db);
}

TEST_CASE("fact_put writes both time axes as given and supersedes nothing") {
  TempDir dir;
  agentmem_db* db = OpenNew(dir.File("r.agentmem"));
  REQUIRE(agentmem_predicate_declare(db, "lives_in", 1) == AGENTMEM_OK);
  int64_t current = 0;
  REQUIRE(agentmem_fact_assert(db, "u", "ann", "lives_in", "Paris", 1.0, 100, 0, nullptr, 0,
                               &current) == AGENTMEM_OK);
  agentmem_fact f{};
  f.user_id = "u";
  f.subject = "ann";
  f.predicate = "lives_in";
  f.object = "Rome";
  f.confidence = 0.5;
  f.valid_from = 50;
  f.recorded_at = 60;
  f.expired_at = 60;  // never current: known over an empty transaction time
  int64_t id = 0;
  REQUIRE(agentmem_fact_put(db, &f, &id) == AGENTMEM_OK);
  CHECK(id == current + 1);
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_facts_v2(db, "u", "ann", "lives_in", nullptr, 0, 0, 0, &cur) == AGENTMEM_OK);
  REQUIRE(agentmem_cursor_step(cur) == AGENTMEM_ROW);
  CHECK(std::string(agentmem_cursor_fact(cur)->object) == "Paris");  // not superseded
  CHECK(agentmem_cursor_step(cur) == AGENTMEM_DONE);
  agentmem_cursor_close(cur);
  REQUIRE(agentmem_facts_v2(db, "u", "ann", "lives_in", "Rome", 0, 0,
                            AGENTMEM_FACTS_ALL_VERSIONS, &cur) == AGENTMEM_OK);
  REQUIRE(agentmem_cursor_step(cur) == AGENTMEM_ROW);
  const agentmem_fact* rome = agentmem_cursor_fact(cur);
  CHECK(rome->valid_from == 50);
  CHECK(rome->valid_to == INT64_MAX);
  CHECK(rome->recorded_at == 60);
  CHECK(rome->expired_at == 60);
  CHECK(rome->confidence == doctest::Approx(0.5));
  agentmem_cursor_close(cur);

  f.expired_at = 59;
  CHECK(agentmem_fact_put(db, &f, &id) == AGENTMEM_RANGE);
  f.expired_at = 0;
  f.confidence = 2;
  CHECK(agentmem_fact_put(db, &f, &id) == AGENTMEM_RANGE);
  agentmem_close(db);
}

TEST_CASE("sync settings are written in the transaction, read back, and kept by VACUUM") {
  TempDir dir;
  const std::string path = dir.File("r.agentmem");
  agentmem_db* db = OpenNew(path);
  char* v = reinterpret_cast<char*>(1);
  CHECK(agentmem_meta_get(db, "sync.origin", &v) == AGENTMEM_NOTFOUND);
  CHECK(v == nullptr);
  CHECK(Meta(db, "vector.dim") == "4");
  CHECK(agentmem_meta_set(db, "vector.dim", "8") == AGENTMEM_MISUSE);
  CHECK(agentmem_meta_set(db, "sync.", "x") == AGENTMEM_MISUSE);
  CHECK(agentmem_meta_set(db, "sync.origin", std::string(70000, 'x').c_str()) ==
        AGENTMEM_TOOBIG);

  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  REQUIRE(agentmem_meta_set(db, "sync.origin", "0123abcd") == AGENTMEM_OK);
  CHECK(Meta(db, "sync.origin") == "0123abcd");  // the transaction sees its own entry
  REQUIRE(agentmem_rollback(db) == AGENTMEM_OK);
  CHECK(agentmem_meta_get(db, "sync.origin", &v) == AGENTMEM_NOTFOUND);

  REQUIRE(agentmem_meta_set(db, "sync.origin", "0123abcd") == AGENTMEM_OK);
  REQUIRE(agentmem_meta_set(db, "sync.pulled", "7") == AGENTMEM_OK);
  REQUIRE(agentmem_meta_set(db, "sync.pulled", "9") == AGENTMEM_OK);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);

  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE, nullptr) == AGENTMEM_OK);
  CHECK(Meta(db, "sync.pulled") == "9");
  REQUIRE(agentmem_vacuum(db, nullptr) == AGENTMEM_OK);
  CHECK(Meta(db, "sync.origin") == "0123abcd");
  CHECK(Meta(db, "sync.pulled") == "9");
  agentmem_close(db);
}

namespace {

void Put(agentmem_db* db, const char* user, const char* text, float x) {
  const float v[4] = {x, 1.0f, -2.0f, 0.5f};
  agentmem_episode ep{};
  ep.user_id = user;
  ep.session_id = "s";
  ep.role = "user";
  ep.text = text;
  ep.ts = 1000;
  ep.vector = v;
  ep.dim = 4;
  int64_t id = 0;
  REQUIRE(agentmem_episode_put(db, &ep, &id) == AGENTMEM_OK);
}

int64_t Found(agentmem_db* db, const std::string& needle) {
  const void* p = needle.data();
  const int64_t n = static_cast<int64_t>(needle.size());
  int64_t found = -1;
  REQUIRE(agentmem_search_bytes(db, &p, &n, 1, &found) == AGENTMEM_OK);
  return found;
}

// Forgets all of `user` inside BEGIN ... COMMIT, where PURGE is refused.
void ForgetInTransaction(agentmem_db* db, const char* user) {
  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  REQUIRE(agentmem_forget(db, user, nullptr, 0, AGENTMEM_FORGET_PURGE, nullptr) ==
          AGENTMEM_MISUSE);
  REQUIRE(agentmem_forget(db, user, nullptr, 0, 0, nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
}

}  // namespace

TEST_CASE("a forget inside a transaction, collected, is proved absent by the next VACUUM") {
  TempDir dir;
  agentmem_db* db = OpenNew(dir.File("r.agentmem"));
  Put(db, "alice", "alice keeps her passport in the blue drawer", 0.125f);
  Put(db, "alice", "alice was born in a small town by the sea", 0.25f);
  Put(db, "bob", "bob prefers window seats on long flights", 0.375f);
  REQUIRE(agentmem_block_set(db, "alice", "profile", "alice, thirty-four, likes quiet trains",
                             100, -1) == AGENTMEM_OK);
  CHECK(Found(db, "alice keeps her passport in the blue drawer") == 1);
  REQUIRE(agentmem_forget_collect(db, 1) == AGENTMEM_OK);
  ForgetInTransaction(db, "alice");
  // Forgotten but not yet vacuumed: the bytes are still in the file.
  CHECK(Found(db, "alice keeps her passport in the blue drawer") == 1);
  agentmem_receipt r{};
  REQUIRE(agentmem_vacuum(db, &r) == AGENTMEM_OK);
  CHECK(r.vacuumed == 1);
  CHECK(r.needles == 5);  // two texts, two vectors, one block value
  CHECK(r.residue == 0);
  CHECK(Found(db, "alice keeps her passport in the blue drawer") == 0);
  CHECK(Found(db, "bob prefers window seats on long flights") == 1);
  // What was collected is dropped by the VACUUM that searched for it.
  agentmem_receipt again{};
  REQUIRE(agentmem_vacuum(db, &again) == AGENTMEM_OK);
  CHECK(again.needles == 0);
  agentmem_close(db);
}

TEST_CASE("a forget not collected gives its VACUUM nothing to search for") {
  TempDir dir;
  agentmem_db* db = OpenNew(dir.File("r.agentmem"));
  Put(db, "alice", "alice keeps her passport in the blue drawer", 0.125f);
  REQUIRE(agentmem_forget_collect(db, 1) == AGENTMEM_OK);
  REQUIRE(agentmem_forget_collect(db, 0) == AGENTMEM_OK);
  ForgetInTransaction(db, "alice");
  agentmem_receipt r{};
  REQUIRE(agentmem_vacuum(db, &r) == AGENTMEM_OK);
  CHECK((r.needles == 0 && r.residue == 0));
  agentmem_close(db);
}

TEST_CASE("search_bytes refuses needles shorter than 16 bytes and NULL arguments") {
  TempDir dir;
  agentmem_db* db = OpenNew(dir.File("r.agentmem"));
  Put(db, "alice", "alice keeps her passport in the blue drawer", 0.125f);
  const std::string shortish = "passport";
  const void* p = shortish.data();
  const int64_t n = static_cast<int64_t>(shortish.size());
  int64_t found = 7;
  CHECK(agentmem_search_bytes(db, &p, &n, 1, &found) == AGENTMEM_MISUSE);
  CHECK(found == 0);
  CHECK(agentmem_search_bytes(db, nullptr, nullptr, 1, &found) == AGENTMEM_MISUSE);
  CHECK(agentmem_search_bytes(db, nullptr, nullptr, 0, &found) == AGENTMEM_OK);
  CHECK(found == 0);
  CHECK(Found(db, "keeps her passport in the blue") == 1);
  agentmem_close(db);
}

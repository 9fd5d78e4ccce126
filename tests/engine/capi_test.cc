// tests/engine/capi_test.cc -- the C ABI of include/agentmem.h: open/close
// contract, error codes and messages, typed reads and writes, and bad input.
#include <doctest/doctest.h>

#include <agentmem.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "format/file_header.h"
#include "tests/util/temp_dir.h"

using agentmem::test::ReadFileBytes;
using agentmem::test::TempDir;
using agentmem::test::WriteFileBytes;

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

int64_t Remember(agentmem_db* db, const char* user, const char* text) {
  int64_t id = 0;
  REQUIRE(agentmem_remember(db, user, "s1", "user", text, 0, nullptr, nullptr, 0, &id) ==
          AGENTMEM_OK);
  return id;
}

std::vector<std::string> EpisodeTexts(agentmem_db* db, const char* user) {
  std::vector<std::string> out;
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_episodes(db, user, nullptr, &cur) == AGENTMEM_OK);
  int rc;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    out.push_back(agentmem_cursor_episode(cur)->text);
  }
  CHECK(rc == AGENTMEM_DONE);
  agentmem_cursor_close(cur);
  return out;
}

}  // namespace

TEST_CASE("close of NULL is a harmless no-op and free of NULL too") {
  CHECK(agentmem_close(nullptr) == AGENTMEM_OK);
  agentmem_free(nullptr);
  CHECK(std::string(agentmem_libversion()) == AGENTMEM_VERSION);
}

TEST_CASE("a failed open still returns a handle whose errmsg explains") {
  TempDir dir;
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(dir.File("missing.agentmem").c_str(), &db, AGENTMEM_OPEN_READONLY,
                            nullptr);
  CHECK(rc == AGENTMEM_CANTOPEN);
  REQUIRE(db != nullptr);
  CHECK(agentmem_errcode(db) == AGENTMEM_CANTOPEN);
  CHECK(std::string(agentmem_errmsg(db)).find("no such file") != std::string::npos);
  // Any other call on a handle whose open failed is misuse, not a crash.
  CHECK(agentmem_remember(db, "u", "", "user", "x", 0, nullptr, nullptr, 0, nullptr) ==
        AGENTMEM_MISUSE);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("bad flags and unknown options are refused with AGENTMEM_MISUSE") {
  agentmem_db* db = nullptr;
  CHECK(agentmem_open_v2(":memory:", &db, 0, nullptr) == AGENTMEM_MISUSE);
  CHECK(std::string(agentmem_errmsg(db)).find("flags") != std::string::npos);
  agentmem_close(db);
  CHECK(agentmem_open_v2(":memory:", &db, AGENTMEM_OPEN_READWRITE, "sync=sometimes") ==
        AGENTMEM_MISUSE);
  CHECK(std::string(agentmem_errmsg(db)).find("sync=sometimes") != std::string::npos);
  agentmem_close(db);
  CHECK(agentmem_open_v2(":memory:", &db, AGENTMEM_OPEN_READWRITE, "colour=blue") ==
        AGENTMEM_MISUSE);
  CHECK(std::string(agentmem_errmsg(db)).find("unknown option") != std::string::npos);
  agentmem_close(db);
  CHECK(agentmem_open_v2(":memory:", nullptr, AGENTMEM_OPEN_READWRITE, nullptr) ==
        AGENTMEM_MISUSE);
}

TEST_CASE("memory databases are private to their handle") {
  agentmem_db *a = nullptr, *b = nullptr;
  REQUIRE(agentmem_open(":memory:", &a) == AGENTMEM_OK);
  REQUIRE(agentmem_open(":memory:", &b) == AGENTMEM_OK);
  Remember(a, "u", "only in a");
  CHECK(EpisodeTexts(a, "u").size() == 1);
  CHECK(EpisodeTexts(b, "u").empty());
  agentmem_close(a);
  agentmem_close(b);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED_ALLOCATOR 1
#endif
#endif

namespace {

// Resident pages of this process, in bytes (/proc/self/statm).
long ResidentBytes() {
  long size = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  const int got = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
}

}  // namespace

TEST_CASE("closing a handle of many episodes gives the memory it freed back to the system") {
#ifdef SANITIZED_ALLOCATOR
  MESSAGE("skipped: a sanitizer's allocator keeps freed memory itself");
#else
  const long before = ResidentBytes();
  REQUIRE(before > 0);
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(":memory:", &db) == AGENTMEM_OK);
  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  for (int i = 0; i < 20000; i++) {
    const std::string text = "episode " + std::to_string(i) + " mentions word" + std::to_string(i % 997) +
                             " and term" + std::to_string(i % 1009) + " and item" + std::to_string(i);
    REQUIRE(agentmem_remember(db, ("user" + std::to_string(i % 200)).c_str(), "s", "user", text.c_str(), i,
                              nullptr, nullptr, 0, nullptr) == AGENTMEM_OK);
  }
  REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
  const long open = ResidentBytes();
  REQUIRE(open - before > 8L << 20);  // the handle's indexes and records
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  const long after = ResidentBytes();
  CAPTURE(before);
  CAPTURE(open);
  CAPTURE(after);
  // Most of what the handle grew by is resident no more.
  CHECK(after - before < (open - before) / 4);
#endif
}

TEST_CASE("remember, get and iterate episodes round-trip every field") {
  TempDir dir;
  std::string path = dir.File("bot.agentmem");
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "embedder=agentmem-hash-v1") == AGENTMEM_OK);
  std::vector<float> v = UnitVector(384, 7);
  int64_t id = 0;
  REQUIRE(agentmem_remember(db, "alice", "sess-1", "assistant", "Bonjour, ça va? 🍞", 123456789,
                            "{\"mood\":\"happy\",\"n\":[1,2]}", v.data(), 384, &id) ==
          AGENTMEM_OK);
  CHECK(id == 1);
  Remember(db, "alice", "second");
  Remember(db, "bob", "bob's");
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);

  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READONLY, nullptr) == AGENTMEM_OK);
  agentmem_episode* ep = nullptr;
  REQUIRE(agentmem_episode_get(db, id, &ep) == AGENTMEM_OK);
  CHECK(ep->id == 1);
  CHECK(std::string(ep->user_id) == "alice");
  CHECK(std::string(ep->session_id) == "sess-1");
  CHECK(std::string(ep->role) == "assistant");
  CHECK(std::string(ep->text) == "Bonjour, ça va? 🍞");
  CHECK(ep->ts == 123456789);
  CHECK(ep->created_at > 0);
  CHECK(std::string(ep->metadata) == "{\"mood\":\"happy\",\"n\":[1,2]}");
  REQUIRE(ep->dim == 384);
  CHECK(std::memcmp(ep->vector, v.data(), 384 * sizeof(float)) == 0);
  agentmem_free(ep);
  CHECK(EpisodeTexts(db, "alice") == std::vector<std::string>{"Bonjour, ça va? 🍞", "second"});
  CHECK(EpisodeTexts(db, "bob") == std::vector<std::string>{"bob's"});
  CHECK(EpisodeTexts(db, "carol").empty());
  CHECK(agentmem_episode_get(db, 99, &ep) == AGENTMEM_NOTFOUND);
  CHECK(ep == nullptr);
  CHECK(std::string(agentmem_errmsg(db)).find("99") != std::string::npos);
  agentmem_close(db);
}

TEST_CASE("episodes can be listed per session") {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(":memory:", &db) == AGENTMEM_OK);
  for (const char* s : {"a", "b", "a"}) {
    REQUIRE(agentmem_remember(db, "u", s, "user", s, 0, nullptr, nullptr, 0, nullptr) ==
            AGENTMEM_OK);
  }
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_episodes(db, "u", "a", &cur) == AGENTMEM_OK);
  std::vector<int64_t> ids;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW) ids.push_back(agentmem_cursor_episode(cur)->id);
  CHECK(ids == std::vector<int64_t>{1, 3});
  CHECK(agentmem_cursor_block(cur) == nullptr);
  agentmem_cursor_close(cur);
  agentmem_close(db);
}

TEST_CASE("blocks keep versions and enforce their character limit") {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(":memory:", &db) == AGENTMEM_OK);
  REQUIRE(agentmem_block_set(db, "u", "persona", "v1", 10, 0) == AGENTMEM_OK);
  REQUIRE(agentmem_block_set(db, "u", "persona", "ééééé", 5, 0) == AGENTMEM_OK);  // 5 chars
  CHECK(agentmem_block_set(db, "u", "persona", "ééééééé", 5, 0) == AGENTMEM_CONSTRAINT);
  CHECK(std::string(agentmem_errmsg(db)).find("limit is 5") != std::string::npos);
  CHECK(agentmem_block_set(db, "u", "", "x", 0, 0) == AGENTMEM_CONSTRAINT);
  agentmem_block* b = nullptr;
  REQUIRE(agentmem_block_get(db, "u", "persona", &b) == AGENTMEM_OK);
  CHECK(std::string(b->value) == "ééééé");
  CHECK(b->limit == 5);
  CHECK(b->version == 2);
  agentmem_free(b);
  CHECK(agentmem_block_get(db, "u", "nope", &b) == AGENTMEM_NOTFOUND);
  CHECK(b == nullptr);
  CHECK(agentmem_block_get(db, "other", "persona", &b) == AGENTMEM_NOTFOUND);
  agentmem_stats st;
  REQUIRE(agentmem_stats_get(db, &st) == AGENTMEM_OK);
  CHECK(st.blocks == 1);
  CHECK(st.block_versions == 2);
  agentmem_close(db);
}

TEST_CASE("facts are asserted and listed with subject and predicate filters") {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(":memory:", &db) == AGENTMEM_OK);
  int64_t src[] = {1, 2};
  int64_t id = 0;
  REQUIRE(agentmem_fact_assert(db, "u", "ana", "lives_in", "Lisbon", 0.9, 1000, 0, src, 2, &id) ==
          AGENTMEM_OK);
  CHECK(id == 1);
  REQUIRE(agentmem_fact_assert(db, "u", "ana", "likes", "bread", 1.0, 0, 0, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  REQUIRE(agentmem_fact_assert(db, "v", "ana", "likes", "tea", 1.0, 0, 0, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  CHECK(agentmem_fact_assert(db, "u", "ana", "", "x", 1.0, 0, 0, nullptr, 0, nullptr) ==
        AGENTMEM_CONSTRAINT);
  CHECK(agentmem_fact_assert(db, "u", "a", "b", "c", 1.5, 0, 0, nullptr, 0, nullptr) ==
        AGENTMEM_RANGE);
  CHECK(agentmem_fact_assert(db, "u", "a", "b", "c", 1.0, 50, 40, nullptr, 0, nullptr) ==
        AGENTMEM_RANGE);
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_facts(db, "u", "ana", "lives_in", &cur) == AGENTMEM_OK);
  REQUIRE(agentmem_cursor_step(cur) == AGENTMEM_ROW);
  const agentmem_fact* f = agentmem_cursor_fact(cur);
  CHECK(std::string(f->object) == "Lisbon");
  CHECK(f->confidence == doctest::Approx(0.9));
  CHECK(f->valid_from == 1000);
  CHECK(f->valid_to == INT64_MAX);
  CHECK(f->expired_at == INT64_MAX);
  REQUIRE(f->n_sources == 2);
  CHECK(f->source_episode_ids[1] == 2);
  CHECK(agentmem_cursor_step(cur) == AGENTMEM_DONE);
  agentmem_cursor_close(cur);
  REQUIRE(agentmem_facts(db, "u", nullptr, nullptr, &cur) == AGENTMEM_OK);
  int n = 0;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW) n++;
  CHECK(n == 2);
  agentmem_cursor_close(cur);
  agentmem_close(db);
}

TEST_CASE("rollback discards a transaction and commit keeps it whole") {
  TempDir dir;
  std::string path = dir.File("t.agentmem");
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(path.c_str(), &db) == AGENTMEM_OK);
  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  CHECK(agentmem_begin(db) == AGENTMEM_MISUSE);
  Remember(db, "u", "discarded");
  CHECK(EpisodeTexts(db, "u").size() == 1);  // a transaction sees its own writes
  REQUIRE(agentmem_rollback(db) == AGENTMEM_OK);
  CHECK(EpisodeTexts(db, "u").empty());
  CHECK(agentmem_rollback(db) == AGENTMEM_MISUSE);
  CHECK(agentmem_commit(db) == AGENTMEM_MISUSE);
  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  for (int i = 0; i < 50; i++) Remember(db, "u", ("kept " + std::to_string(i)).c_str());
  REQUIRE(agentmem_block_set(db, "u", "summary", "fifty turns", 0, -1) == AGENTMEM_OK);
  REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
  agentmem_close(db);
  REQUIRE(agentmem_open(path.c_str(), &db) == AGENTMEM_OK);
  CHECK(EpisodeTexts(db, "u").size() == 50);
  agentmem_stats st;
  REQUIRE(agentmem_stats_get(db, &st) == AGENTMEM_OK);
  CHECK(st.commits == 2);  // the file's first commit, then the transaction
  agentmem_close(db);
}

TEST_CASE("bad input gets a clear error and loses nothing") {
  TempDir dir;
  std::string path = dir.File("bad.agentmem");
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "embedder=agentmem-hash-v1") == AGENTMEM_OK);
  Remember(db, "u", "kept before");

  SUBCASE("NULL handle and NULL arguments") {
    CHECK(agentmem_remember(nullptr, "u", "", "user", "x", 0, nullptr, nullptr, 0, nullptr) ==
          AGENTMEM_MISUSE);
    CHECK(agentmem_errcode(nullptr) == AGENTMEM_NOMEM);
    CHECK(agentmem_remember(db, nullptr, "", "user", "x", 0, nullptr, nullptr, 0, nullptr) ==
          AGENTMEM_MISUSE);
    CHECK(std::string(agentmem_errmsg(db)) == "user_id must not be NULL");
    CHECK(agentmem_remember(db, "u", "", "user", nullptr, 0, nullptr, nullptr, 0, nullptr) ==
          AGENTMEM_MISUSE);
  }
  SUBCASE("invalid UTF-8") {
    CHECK(agentmem_remember(db, "u", "", "user", "bad \xc3\x28 byte", 0, nullptr, nullptr, 0,
                            nullptr) == AGENTMEM_MISMATCH_UTF8);
    CHECK(std::string(agentmem_errmsg(db)) == "text is not valid UTF-8");
    CHECK(agentmem_remember(db, "\xff", "", "user", "x", 0, nullptr, nullptr, 0, nullptr) ==
          AGENTMEM_MISMATCH_UTF8);
    CHECK(agentmem_remember(db, "u", "", "user", "\xed\xa0\x80 surrogate", 0, nullptr, nullptr, 0,
                            nullptr) == AGENTMEM_MISMATCH_UTF8);
  }
  SUBCASE("a 16 MiB text is refused as too big") {
    std::string big(16u << 20, 'a');
    CHECK(agentmem_remember(db, "u", "", "user", big.c_str(), 0, nullptr, nullptr, 0, nullptr) ==
          AGENTMEM_TOOBIG);
    CHECK(std::string(agentmem_errmsg(db)).find("max_text_bytes") != std::string::npos);
  }
  SUBCASE("metadata that is not JSON") {
    CHECK(agentmem_remember(db, "u", "", "user", "x", 0, "{not json", nullptr, 0, nullptr) ==
          AGENTMEM_MISMATCH_JSON);
  }
  SUBCASE("a wrong vector dimension") {
    std::vector<float> v = UnitVector(128, 1);
    CHECK(agentmem_remember(db, "u", "", "user", "x", 0, nullptr, v.data(), 128, nullptr) ==
          AGENTMEM_MISMATCH_DIMENSION);
    CHECK(std::string(agentmem_errmsg(db)).find("has 384") != std::string::npos);
    CHECK(agentmem_remember(db, "u", "", "user", "x", 0, nullptr, nullptr, 5, nullptr) ==
          AGENTMEM_MISUSE);
    v = UnitVector(384, 2);
    v[3] = NAN;
    CHECK(agentmem_remember(db, "u", "", "user", "x", 0, nullptr, v.data(), 384, nullptr) ==
          AGENTMEM_RANGE);
  }
  SUBCASE("the empty user_id is the anonymous bucket, kept apart from other users") {
    Remember(db, "", "anonymous turn");
    CHECK(EpisodeTexts(db, "") == std::vector<std::string>{"anonymous turn"});
    CHECK(EpisodeTexts(db, "u") == std::vector<std::string>{"kept before"});
  }
  SUBCASE("a write on a read-only handle") {
    agentmem_db* ro = nullptr;
    REQUIRE(agentmem_open_v2(path.c_str(), &ro, AGENTMEM_OPEN_READONLY, nullptr) == AGENTMEM_OK);
    CHECK(agentmem_remember(ro, "u", "", "user", "x", 0, nullptr, nullptr, 0, nullptr) ==
          AGENTMEM_READONLY_FILE);
    CHECK(agentmem_errcode(ro) == AGENTMEM_READONLY);
    agentmem_close(ro);
  }
  // Whatever was refused, the file holds exactly what was accepted.
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  REQUIRE(agentmem_open(path.c_str(), &db) == AGENTMEM_OK);
  std::vector<std::string> texts = EpisodeTexts(db, "u");
  CHECK(texts == std::vector<std::string>{"kept before"});
  agentmem_close(db);
}

TEST_CASE("a closed handle is detected as misuse instead of crashing") {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(":memory:", &db) == AGENTMEM_OK);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  // The pointer is dangling; the registry of live handles catches it.
  CHECK(agentmem_remember(db, "u", "", "user", "x", 0, nullptr, nullptr, 0, nullptr) ==
        AGENTMEM_MISUSE);
  CHECK(agentmem_close(db) == AGENTMEM_MISUSE);
  CHECK(agentmem_extended_errcode(db) == AGENTMEM_MISUSE);
  CHECK(std::string(agentmem_errmsg(db)).find("closed") != std::string::npos);
}

TEST_CASE("close with an open cursor is refused until the cursor is closed") {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(":memory:", &db) == AGENTMEM_OK);
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_blocks(db, "u", &cur) == AGENTMEM_OK);
  CHECK(agentmem_close(db) == AGENTMEM_BUSY);
  CHECK(agentmem_cursor_step(cur) == AGENTMEM_DONE);
  agentmem_cursor_close(cur);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("a file that is not an agentmem file is refused with AGENTMEM_NOTADB") {
  TempDir dir;
  std::string path = dir.File("notes.txt");
  static const char kSqliteLike[] = "SQLite format 3\0 and then some other bytes";
  WriteFileBytes(path, std::string(kSqliteLike, sizeof kSqliteLike - 1) + std::string(5000, 'x'));
  agentmem_db* db = nullptr;
  CHECK(agentmem_open(path.c_str(), &db) == AGENTMEM_NOTADB);
  CHECK(std::string(agentmem_errmsg(db)).find("not an agentmem database") != std::string::npos);
  agentmem_close(db);
  CHECK(ReadFileBytes(path).substr(0, 6) == "SQLite");  // left untouched
  std::string empty = dir.File("empty.agentmem");
  WriteFileBytes(empty, "");
  CHECK(agentmem_open(empty.c_str(), &db) == AGENTMEM_NOTADB);
  agentmem_close(db);
}

TEST_CASE("a file from a newer format version is refused with a clear version error") {
  TempDir dir;
  std::string path = dir.File("future.agentmem");
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(path.c_str(), &db) == AGENTMEM_OK);
  Remember(db, "u", "from the future");
  agentmem_close(db);
  std::string bytes = ReadFileBytes(path);
  agentmem::format::FileHeader h;
  REQUIRE(agentmem::format::DecodeFileHeader(bytes, &h).ok());
  h.read_version = 9;
  bytes.replace(0, 64, agentmem::format::EncodeFileHeader(h));
  WriteFileBytes(path, bytes);
  CHECK(agentmem_open(path.c_str(), &db) == AGENTMEM_FORMAT_VERSION);
  std::string msg = agentmem_errmsg(db);
  CHECK(msg.find("read version 9") != std::string::npos);
  CHECK(msg.find("upgrade agentmem") != std::string::npos);
  agentmem_close(db);
}

TEST_CASE("the vector space is recorded at creation and checked on open") {
  TempDir dir;
  std::string path = dir.File("space.agentmem");
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "vector_dim=1536&vector_metric=ip&embedder=hosted-3-small") ==
          AGENTMEM_OK);
  std::vector<float> v(1536, 0.01f);
  CHECK(agentmem_remember(db, "u", "", "user", "x", 0, nullptr, v.data(), 1536, nullptr) ==
        AGENTMEM_OK);
  agentmem_close(db);
  REQUIRE(agentmem_open(path.c_str(), &db) == AGENTMEM_OK);  // no options: the file decides
  CHECK(agentmem_remember(db, "u", "", "user", "y", 0, nullptr, v.data(), 384, nullptr) ==
        AGENTMEM_MISMATCH_DIMENSION);
  agentmem_close(db);
  CHECK(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE, "vector_dim=384") ==
        AGENTMEM_MISMATCH);
  CHECK(std::string(agentmem_errmsg(db)).find("hosted-3-small/1536/ip") != std::string::npos);
  agentmem_close(db);
}

TEST_CASE("an episode cursor and a recall cursor keep their snapshot while another handle forgets") {
  TempDir dir;
  const std::string path = dir.File("pin.agentmem");
  agentmem_db* a = nullptr;
  agentmem_db* b = nullptr;
  REQUIRE(agentmem_open(path.c_str(), &a) == AGENTMEM_OK);
  REQUIRE(agentmem_open(path.c_str(), &b) == AGENTMEM_OK);
  for (const char* t : {"tea in the morning", "tea at noon", "tea at night"}) Remember(a, "u", t);

  agentmem_cursor* eps = nullptr;
  REQUIRE(agentmem_episodes(a, "u", nullptr, &eps) == AGENTMEM_OK);
  agentmem_cursor* hits = nullptr;
  REQUIRE(agentmem_recall(a, "u", "tea", nullptr, &hits) == AGENTMEM_OK);
  REQUIRE(agentmem_cursor_step(eps) == AGENTMEM_ROW);
  CHECK(agentmem_cursor_episode(eps)->id == 1);

  CHECK(agentmem_forget_episode(b, 2, 0, nullptr) == AGENTMEM_OK);
  CHECK(agentmem_forget(b, "u", nullptr, 0, 0, nullptr) == AGENTMEM_OK);

  std::vector<int64_t> seen;
  int rc;
  while ((rc = agentmem_cursor_step(eps)) == AGENTMEM_ROW) seen.push_back(agentmem_cursor_episode(eps)->id);
  CHECK_MESSAGE(rc == AGENTMEM_DONE, agentmem_errmsg(a));
  CHECK(seen == std::vector<int64_t>{2, 3});
  size_t n = 0;
  while ((rc = agentmem_cursor_step(hits)) == AGENTMEM_ROW) {
    CHECK(std::string(agentmem_cursor_hit(hits)->text).find("tea") == 0);
    n++;
  }
  CHECK_MESSAGE(rc == AGENTMEM_DONE, agentmem_errmsg(a));
  CHECK(n == 3);
  agentmem_cursor_close(eps);
  agentmem_cursor_close(hits);

  // Closed, they let the handle move on to the forget.
  CHECK(EpisodeTexts(a, "u").empty());
  agentmem_episode* ep = nullptr;
  CHECK(agentmem_episode_get(a, 1, &ep) == AGENTMEM_NOTFOUND);
  CHECK(agentmem_close(a) == AGENTMEM_OK);
  CHECK(agentmem_close(b) == AGENTMEM_OK);
}

TEST_CASE("a user's episodes are listed by event time, ties by id") {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(":memory:", &db) == AGENTMEM_OK);
  const int64_t t0 = 1700000000LL * 1000000;
  const std::pair<const char*, int64_t> turns[] = {
      {"third", t0 + 300}, {"first", t0 + 100}, {"second", t0 + 200}, {"first too", t0 + 100}};
  for (const auto& [text, ts] : turns) {
    REQUIRE(agentmem_remember(db, "u", "s", "user", text, ts, nullptr, nullptr, 0, nullptr) ==
            AGENTMEM_OK);
  }
  CHECK(EpisodeTexts(db, "u") == std::vector<std::string>{"first", "first too", "second", "third"});
  // Within a transaction, its own episodes take their place by time too.
  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  REQUIRE(agentmem_remember(db, "u", "s", "user", "zeroth", t0, nullptr, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  CHECK(EpisodeTexts(db, "u").front() == "zeroth");
  REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
  agentmem_close(db);
}

// tests/engine/embedder_test.cc -- the application's embedder
// (agentmem_create_embedder; engine/memory/embedder.h, engine/capi/capi_embedder.cc):
// which calls use it, batching, the vector-space check, failures that write
// nothing, and when destroy runs.
#include <doctest/doctest.h>

#include <agentmem.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/util/capi_helpers.h"
#include "tests/util/temp_dir.h"

using agentmem::test::TempDir;
using agentmem::test::VectorOf;

namespace {

constexpr int kDim = 4;
constexpr const char* kSpace = "embedder=test-model&vector_dim=4&vector_metric=cosine";

// A deterministic model: counts of a, e, i, o (+1), normalised. Counts the
// calls and the batch sizes; can be told to fail or to return NaN.
struct Model {
  int calls = 0;
  std::vector<int> batches;
  std::vector<std::string> texts;
  int fail_code = AGENTMEM_OK;  // returned instead of vectors when not OK
  const char* fail_message = "model offline";
  bool nan = false;
  int destroyed = 0;
};

std::vector<float> Expected(const std::string& text) {
  std::vector<float> v(kDim, 1.0f);
  for (char c : text) {
    const char* at = std::strchr("aeio", c);
    if (c && at) v[at - "aeio"] += 1;
  }
  double norm = 0;
  for (float x : v) norm += x * x;
  for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
  return v;
}

int Embed(void* ctx, int n, const char* const* texts, int dim, float* out, char* err, int nerr) {
  auto* m = static_cast<Model*>(ctx);
  m->calls++;
  m->batches.push_back(n);
  if (m->fail_code != AGENTMEM_OK) {
    std::snprintf(err, static_cast<size_t>(nerr), "%s", m->fail_message);
    return m->fail_code;
  }
  for (int i = 0; i < n; i++) {
    m->texts.push_back(texts[i]);
    std::vector<float> v = Expected(texts[i]);
    if (m->nan) v[1] = NAN;
    std::memcpy(out + static_cast<size_t>(i) * dim, v.data(), sizeof(float) * dim);
  }
  return AGENTMEM_OK;
}

void Destroy(void* ctx) { static_cast<Model*>(ctx)->destroyed++; }

agentmem_db* OpenModelFile(const std::string& path) {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           kSpace) == AGENTMEM_OK);
  return db;
}

int Register(agentmem_db* db, Model* m) {
  return agentmem_create_embedder(db, "test-model", kDim, AGENTMEM_METRIC_COSINE, Embed, m,
                                  Destroy);
}

int RememberText(agentmem_db* db, const char* text, int64_t* id = nullptr) {
  return agentmem_remember(db, "u", "s", "user", text, 0, nullptr, nullptr, 0, id);
}

int64_t EpisodeCount(agentmem_db* db) {
  agentmem_stats st;
  REQUIRE(agentmem_stats_get(db, &st) == AGENTMEM_OK);
  return st.episodes;
}

std::vector<int64_t> RecallIds(agentmem_db* db, const char* query, int mode, int* rc_out = nullptr) {
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.mode = mode;
  o.min_similarity = -INFINITY;
  agentmem_cursor* cur = nullptr;
  int rc = agentmem_recall(db, "u", query, &o, &cur);
  if (rc_out) *rc_out = rc;
  std::vector<int64_t> ids;
  if (rc != AGENTMEM_OK) return ids;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW) ids.push_back(agentmem_cursor_hit(cur)->id);
  agentmem_cursor_close(cur);
  return ids;
}

}  // namespace

TEST_CASE("a registered embedder gives text-only episodes and recall queries their vectors") {
  TempDir dir;
  agentmem_db* db = OpenModelFile(dir.path() + "/m.agentmem");
  int64_t before = 0;
  REQUIRE(RememberText(db, "no model yet", &before) == AGENTMEM_OK);
  agentmem_episode* ep = nullptr;
  REQUIRE(agentmem_episode_get(db, before, &ep) == AGENTMEM_OK);
  CHECK(ep->vector == nullptr);  // an external embedder and none registered: no vector
  agentmem_free(ep);
  int rc = 0;
  RecallIds(db, "anything", AGENTMEM_RECALL_VECTOR, &rc);
  CHECK(rc == AGENTMEM_MISUSE);

  Model m;
  REQUIRE(Register(db, &m) == AGENTMEM_OK);
  int64_t id = 0;
  REQUIRE(RememberText(db, "a banana in a bowl", &id) == AGENTMEM_OK);
  CHECK(m.calls == 1);  // a lone write embeds at once
  CHECK(VectorOf(db, id) == Expected("a banana in a bowl"));

  // A given vector is kept and the model is not asked.
  std::vector<float> given = {1, 0, 0, 0};
  int64_t id2 = 0;
  REQUIRE(agentmem_remember(db, "u", "s", "user", "given", 0, nullptr, given.data(), kDim,
                            &id2) == AGENTMEM_OK);
  CHECK(m.calls == 1);
  CHECK(VectorOf(db, id2) == given);

  // Recall embeds its query: vector mode now works and finds the nearest.
  std::vector<int64_t> ids = RecallIds(db, "a banana in a bowl", AGENTMEM_RECALL_VECTOR, &rc);
  REQUIRE(rc == AGENTMEM_OK);
  CHECK(m.calls == 2);
  REQUIRE(!ids.empty());
  CHECK(ids[0] == id);
  CHECK(m.texts.back() == "a banana in a bowl");
  // BM25 mode never asks the model.
  RecallIds(db, "banana", AGENTMEM_RECALL_BM25, &rc);
  CHECK(rc == AGENTMEM_OK);
  CHECK(m.calls == 2);

  // context() recalls through the model too.
  agentmem_context_item* items = nullptr;
  int n = 0;
  REQUIRE(agentmem_context(db, "u", "banana bowl", 1000, &items, &n) == AGENTMEM_OK);
  CHECK(m.calls == 3);
  agentmem_free(items);

  // SQL INSERT without an embedding.
  REQUIRE(agentmem_exec(db,
                        "INSERT INTO episodes(user_id, session_id, role, text) VALUES "
                        "('u', 's', 'user', 'olive oil'), ('u', 's', 'user', 'an iota')",
                        nullptr, nullptr, nullptr) == AGENTMEM_OK);
  CHECK(m.calls == 4);  // one statement, one transaction, one batch
  CHECK(m.batches.back() == 2);
  CHECK(VectorOf(db, id2 + 1) == Expected("olive oil"));
  CHECK(VectorOf(db, id2 + 2) == Expected("an iota"));
  CHECK(agentmem_close(db) == AGENTMEM_OK);
  CHECK(m.destroyed == 1);
}

TEST_CASE("a transaction embeds its texts 64 at a time and the rest at commit") {
  TempDir dir;
  agentmem_db* db = OpenModelFile(dir.path() + "/m.agentmem");
  Model m;
  REQUIRE(Register(db, &m) == AGENTMEM_OK);
  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  for (int i = 0; i < 150; i++) {
    std::string text = "turn " + std::to_string(i) + (i % 2 ? " alpha" : " omega");
    REQUIRE(RememberText(db, text.c_str()) == AGENTMEM_OK);
    CHECK(m.calls == (i + 1) / AGENTMEM_EMBED_BATCH_MAX);
  }
  REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
  CHECK(m.batches == std::vector<int>{64, 64, 22});
  CHECK(EpisodeCount(db) == 150);
  CHECK(VectorOf(db, 150) == Expected("turn 149 alpha"));
  CHECK(VectorOf(db, 1) == Expected("turn 0 omega"));
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("a rollback to a savepoint takes the dropped texts out of the batches and keeps the vectors of the kept ones") {
  TempDir dir;
  agentmem_db* db = OpenModelFile(dir.path() + "/m.agentmem");
  Model m;
  REQUIRE(Register(db, &m) == AGENTMEM_OK);
  auto insert = [&](const std::string& prefix, int n) {
    std::string sql = "INSERT INTO episodes(user_id, session_id, role, text) VALUES ";
    for (int i = 0; i < n; i++) {
      sql += (i ? ", " : "") + std::string("('u', 's', 'user', '") + prefix + " " +
             std::to_string(i) + "')";
    }
    REQUIRE(agentmem_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == AGENTMEM_OK);
  };
  REQUIRE(agentmem_exec(db, "BEGIN", nullptr, nullptr, nullptr) == AGENTMEM_OK);
  insert("kept", 10);
  REQUIRE(agentmem_exec(db, "SAVEPOINT sp", nullptr, nullptr, nullptr) == AGENTMEM_OK);
  insert("dropped", 5);
  CHECK(m.calls == 0);
  REQUIRE(agentmem_exec(db, "ROLLBACK TO sp", nullptr, nullptr, nullptr) == AGENTMEM_OK);
  // A batch that runs after the savepoint embeds kept and dropped texts together.
  insert("also dropped", 60);
  CHECK(m.batches == std::vector<int>{64});
  REQUIRE(agentmem_exec(db, "ROLLBACK TO sp", nullptr, nullptr, nullptr) == AGENTMEM_OK);
  insert("later", 3);
  REQUIRE(agentmem_exec(db, "COMMIT", nullptr, nullptr, nullptr) == AGENTMEM_OK);
  // The commit embeds only the texts still waiting: the three written last.
  CHECK(m.batches == std::vector<int>{64, 3});
  CHECK(std::vector<std::string>(m.texts.end() - 3, m.texts.end()) ==
        std::vector<std::string>{"later 0", "later 1", "later 2"});
  CHECK(EpisodeCount(db) == 13);
  for (int i = 0; i < 10; i++) CHECK(VectorOf(db, i + 1) == Expected("kept " + std::to_string(i)));
  CHECK(VectorOf(db, 13) == Expected("later 2"));
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("an embedder whose name, dimension or metric is not the file's is refused") {
  TempDir dir;
  agentmem_db* db = OpenModelFile(dir.path() + "/m.agentmem");
  Model m;
  CHECK(agentmem_create_embedder(db, "other-model", kDim, AGENTMEM_METRIC_COSINE, Embed, &m,
                                 Destroy) == AGENTMEM_MISMATCH);
  CHECK(std::string(agentmem_errmsg(db)).find("test-model/4/cosine") != std::string::npos);
  CHECK(agentmem_create_embedder(db, "test-model", 8, AGENTMEM_METRIC_COSINE, Embed, &m,
                                 Destroy) == AGENTMEM_MISMATCH);
  CHECK(agentmem_create_embedder(db, "test-model", kDim, AGENTMEM_METRIC_L2, Embed, &m,
                                 Destroy) == AGENTMEM_MISMATCH);
  CHECK(agentmem_create_embedder(db, "test-model", kDim, 7, Embed, &m, Destroy) ==
        AGENTMEM_MISUSE);
  CHECK(agentmem_create_embedder(db, nullptr, kDim, 0, Embed, &m, Destroy) == AGENTMEM_MISUSE);
  CHECK(agentmem_create_embedder(db, "test-model", 0, 0, Embed, &m, Destroy) == AGENTMEM_RANGE);
  CHECK(m.destroyed == 0);  // a failed registration leaves ctx to the caller
  CHECK(m.calls == 0);
  CHECK(RememberText(db, "still no model") == AGENTMEM_OK);
  CHECK(m.calls == 0);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
  CHECK(m.destroyed == 0);

  // A file on the built-in embedder takes no other.
  agentmem_db* builtin = nullptr;
  REQUIRE(agentmem_open_v2(":memory:", &builtin, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "embedder=agentmem-hash-v1") == AGENTMEM_OK);
  CHECK(agentmem_create_embedder(builtin, "agentmem-hash-v1", 384, AGENTMEM_METRIC_COSINE, Embed,
                                 &m, Destroy) == AGENTMEM_MISUSE);
  CHECK(agentmem_create_embedder(builtin, "test-model", 384, AGENTMEM_METRIC_COSINE, Embed, &m,
                                 Destroy) == AGENTMEM_MISMATCH);
  CHECK(agentmem_create_embedder(nullptr, "test-model", kDim, 0, Embed, &m, Destroy) ==
        AGENTMEM_MISUSE);
  CHECK(agentmem_close(builtin) == AGENTMEM_OK);
  CHECK(m.destroyed == 0);
}

TEST_CASE("an embedder that fails or returns NaN fails the call and nothing is written") {
  TempDir dir;
  std::string path = dir.path() + "/m.agentmem";
  agentmem_db* db = OpenModelFile(path);
  Model m;
  REQUIRE(Register(db, &m) == AGENTMEM_OK);

  m.fail_code = AGENTMEM_BUSY;
  int64_t id = -1;
  CHECK(RememberText(db, "lost", &id) == AGENTMEM_BUSY);
  CHECK(id == -1);
  std::string msg = agentmem_errmsg(db);
  CHECK(msg.find("test-model") != std::string::npos);
  CHECK(msg.find("model offline") != std::string::npos);
  CHECK(EpisodeCount(db) == 0);

  m.fail_code = 12345;  // not an agentmem code
  CHECK(RememberText(db, "lost") == AGENTMEM_ERROR);
  m.fail_code = AGENTMEM_OK;
  m.nan = true;
  CHECK(RememberText(db, "lost") == AGENTMEM_RANGE);
  CHECK(std::string(agentmem_errmsg(db)).find("NaN") != std::string::npos);
  m.nan = false;
  CHECK(EpisodeCount(db) == 0);

  // A failing recall query.
  m.fail_code = AGENTMEM_ERROR;
  int rc = 0;
  RecallIds(db, "query", AGENTMEM_RECALL_HYBRID, &rc);
  CHECK(rc == AGENTMEM_ERROR);
  m.fail_code = AGENTMEM_OK;

  // In a transaction: the call that fills a batch fails and leaves no
  // episode; a failure at commit rolls the whole transaction back.
  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  for (int i = 0; i < AGENTMEM_EMBED_BATCH_MAX - 1; i++) {
    REQUIRE(RememberText(db, "pending") == AGENTMEM_OK);
  }
  m.fail_code = AGENTMEM_ERROR;
  CHECK(RememberText(db, "the 64th") == AGENTMEM_ERROR);
  CHECK(agentmem_commit(db) == AGENTMEM_ERROR);  // the 63 are embedded at commit: fails again
  m.fail_code = AGENTMEM_OK;
  CHECK(EpisodeCount(db) == 0);
  CHECK(agentmem_rollback(db) == AGENTMEM_MISUSE);  // the commit ended the transaction

  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  REQUIRE(RememberText(db, "kept") == AGENTMEM_OK);
  REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
  CHECK(EpisodeCount(db) == 1);

  // SQL: a failed INSERT writes nothing, and the next one works.
  m.fail_code = AGENTMEM_ERROR;
  char* err = nullptr;
  CHECK(agentmem_exec(db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'x'), ('u', 'y')",
                      nullptr, nullptr, &err) != AGENTMEM_OK);
  REQUIRE(err != nullptr);
  CHECK(std::string(err).find("model offline") != std::string::npos);
  agentmem_free(err);
  m.fail_code = AGENTMEM_OK;
  CHECK(EpisodeCount(db) == 1);
  CHECK(agentmem_exec(db, "INSERT INTO episodes(user_id, text) VALUES ('u', 'z')", nullptr,
                      nullptr, nullptr) == AGENTMEM_OK);
  CHECK(EpisodeCount(db) == 2);
  CHECK(agentmem_close(db) == AGENTMEM_OK);

  // What the file holds after a reopen: the two that were written.
  agentmem_db* again = OpenModelFile(path);
  CHECK(EpisodeCount(again) == 2);
  CHECK(agentmem_close(again) == AGENTMEM_OK);
}

TEST_CASE("destroy runs when the embedder is replaced, removed, and at close") {
  TempDir dir;
  agentmem_db* db = OpenModelFile(dir.path() + "/m.agentmem");
  Model first, second;
  REQUIRE(Register(db, &first) == AGENTMEM_OK);
  REQUIRE(Register(db, &second) == AGENTMEM_OK);
  CHECK(first.destroyed == 1);
  CHECK(second.destroyed == 0);
  REQUIRE(RememberText(db, "to the second") == AGENTMEM_OK);
  CHECK(first.calls == 0);
  CHECK(second.calls == 1);
  // Not while a transaction holds texts the current one has not embedded.
  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  REQUIRE(RememberText(db, "waiting") == AGENTMEM_OK);
  CHECK(Register(db, &first) == AGENTMEM_MISUSE);
  REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
  CHECK(second.calls == 2);
  // fn NULL removes it.
  REQUIRE(agentmem_create_embedder(db, "test-model", kDim, AGENTMEM_METRIC_COSINE, nullptr,
                                   nullptr, nullptr) == AGENTMEM_OK);
  CHECK(second.destroyed == 1);
  REQUIRE(RememberText(db, "no model") == AGENTMEM_OK);
  CHECK(second.calls == 2);
  REQUIRE(Register(db, &first) == AGENTMEM_OK);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
  CHECK(first.destroyed == 2);
  CHECK(second.destroyed == 1);
}

TEST_CASE("an import of lines without vectors embeds them with the model, once") {
  TempDir dir;
  agentmem_db* plain = OpenModelFile(dir.path() + "/plain.agentmem");  // no model: no vectors
  REQUIRE(RememberText(plain, "olive oil") == AGENTMEM_OK);
  REQUIRE(RememberText(plain, "an iota") == AGENTMEM_OK);
  char* jsonl = nullptr;
  REQUIRE(agentmem_export(plain, "u", &jsonl) == AGENTMEM_OK);
  CHECK(std::string(jsonl).find("\"embedding\"") == std::string::npos);
  CHECK(agentmem_close(plain) == AGENTMEM_OK);

  agentmem_db* db = OpenModelFile(dir.path() + "/m.agentmem");
  Model m;
  REQUIRE(Register(db, &m) == AGENTMEM_OK);
  int64_t added = 0;
  REQUIRE(agentmem_import(db, jsonl, &added) == AGENTMEM_OK);
  CHECK(added == 2);
  CHECK(m.batches == std::vector<int>{2});
  CHECK(VectorOf(db, 1) == Expected("olive oil"));
  CHECK(VectorOf(db, 2) == Expected("an iota"));
  // Importing it again adds nothing: a line without a vector takes the model's.
  REQUIRE(agentmem_import(db, jsonl, &added) == AGENTMEM_OK);
  CHECK(added == 0);
  REQUIRE(agentmem_import_v2(db, jsonl, AGENTMEM_IMPORT_NEW_IDS, &added) == AGENTMEM_OK);
  CHECK(added == 0);
  CHECK(m.batches == std::vector<int>{2});
  agentmem_free(jsonl);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

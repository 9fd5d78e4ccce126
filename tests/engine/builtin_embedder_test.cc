// tests/engine/builtin_embedder_test.cc -- which built-in embedder a file uses
// (engine/memory/options.h NewFileSpace, index/text/builtin_embedder.h): new files
// get agentmem-glove-v2 when the library links its table, files made with
// agentmem-glove-v1 or agentmem-hash-v1 keep it, the vector space options name
// parts of it, and a file whose built-in embedder this library lacks says so.
#include <doctest/doctest.h>

#include <agentmem.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/memory/options.h"
#include "format/half.h"
#include "index/text/builtin_embedder.h"
#include "index/text/glove_embedder.h"
#include "index/text/hash_embedder.h"
#include "tests/util/temp_dir.h"

namespace agentmem {
namespace {

agentmem_db* Open(const std::string& path, const char* options = nullptr) {
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                            options);
  INFO(path << " " << (options ? options : "") << ": " << agentmem_errmsg(db));
  REQUIRE(rc == AGENTMEM_OK);
  return db;
}

// Remembers `text` without a vector and returns the vector the file gave it.
std::vector<float> Remembered(agentmem_db* db, const char* text) {
  int64_t id = 0;
  REQUIRE(agentmem_remember(db, "u", "s", "user", text, 0, nullptr, nullptr, 0, &id) ==
          AGENTMEM_OK);
  agentmem_episode* e = nullptr;
  REQUIRE(agentmem_episode_get(db, id, &e) == AGENTMEM_OK);
  std::vector<float> v(e->vector, e->vector + e->dim);
  agentmem_free(e);
  return v;
}

// `v` as a file of vector_type f16 stores it.
std::vector<float> Halved(std::vector<float> v) {
  for (float& x : v) x = format::RoundToHalf(x);
  return v;
}

std::vector<float> Hash(uint32_t dim, const char* text) {
  return index::HashEmbedder::Create({dim}).value().Embed(text);
}

TEST_CASE("a new file records agentmem-glove-v2 when the library has its table") {
  test::TempDir dir;
  agentmem_db* db = Open(dir.File("new.agentmem"));
  const char* text = "We adopted a puppy from the shelter last week.";
  auto glove = index::GloveEmbedder::Create();
  if (glove.ok()) {
    CHECK(engine::DefaultSpace() == engine::VectorSpace{"agentmem-glove-v2", 100, "cosine", "f16"});
    CHECK(Remembered(db, text) == Halved(glove->Embed(text)));
  } else {
    MESSAGE("without the GloVe table: " << glove.status().message());
    CHECK(engine::DefaultSpace() == engine::VectorSpace{"agentmem-hash-v1", 384, "cosine"});
    CHECK(Remembered(db, text) == Hash(384, text));
  }
  agentmem_close(db);
  // Reopened without options, with the same embedder named, or another one.
  db = Open(dir.File("new.agentmem"));
  CHECK(Remembered(db, text).size() == engine::DefaultSpace().dim);
  agentmem_close(db);
  std::string same = "embedder=" + engine::DefaultSpace().embedder;
  agentmem_close(Open(dir.File("new.agentmem"), same.c_str()));
  agentmem_db* other = nullptr;
  std::string wrong = glove.ok() ? "embedder=agentmem-glove-v1" : "embedder=agentmem-glove-v2";
  CHECK(agentmem_open_v2(dir.File("new.agentmem").c_str(), &other, AGENTMEM_OPEN_READWRITE,
                         wrong.c_str()) == AGENTMEM_MISMATCH);
  CHECK(std::string(agentmem_errmsg(other)).find("the open asked for " + wrong) != std::string::npos);
  agentmem_close(other);
}

TEST_CASE("a file made with agentmem-glove-v1 reopens with it and keeps embedding with it") {
  auto v1 = index::GloveEmbedder::Create(index::GloveVersion::kV1);
  if (!v1.ok()) {
    MESSAGE("skipped: " << v1.status().message());
    return;
  }
  test::TempDir dir;
  const std::string path = dir.File("v1.agentmem");
  agentmem_db* db = Open(path, "embedder=agentmem-glove-v1");
  const char* text = "We adopted a puppy from the shelter last week.";
  CHECK(Remembered(db, text) == Halved(v1->Embed(text)));
  agentmem_close(db);
  db = Open(path);
  const char* later = "The lake was frozen when we went skating.";
  CHECK(Remembered(db, later) == Halved(v1->Embed(later)));
  CHECK(Remembered(db, later) != Halved(index::GloveEmbedder::Create().value().Embed(later)));
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.mode = AGENTMEM_RECALL_VECTOR;
  o.k = 1;
  o.min_similarity = -INFINITY;
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_recall(db, "u", "a dog from the animal shelter", &o, &cur) == AGENTMEM_OK);
  REQUIRE(agentmem_cursor_step(cur) == AGENTMEM_ROW);
  CHECK(std::string(agentmem_cursor_hit(cur)->text) == text);
  agentmem_cursor_close(cur);
  agentmem_close(db);
}

TEST_CASE("a file made with agentmem-hash-v1 reopens with it and keeps embedding with it") {
  test::TempDir dir;
  const std::string path = dir.File("hash.agentmem");
  agentmem_db* db = Open(path, "embedder=agentmem-hash-v1");
  CHECK(Remembered(db, "first turn") == Hash(384, "first turn"));  // its default dimension
  agentmem_close(db);
  db = Open(path);
  CHECK(Remembered(db, "second turn about the lake") == Hash(384, "second turn about the lake"));
  agentmem_close(db);
  // Options that name only parts of the space are checked on those parts.
  agentmem_close(Open(path, "vector_metric=cosine"));
  agentmem_close(Open(path, "vector_dim=384"));
  agentmem_db* other = nullptr;
  CHECK(agentmem_open_v2(path.c_str(), &other, AGENTMEM_OPEN_READWRITE, "vector_dim=100") ==
        AGENTMEM_MISMATCH);
  agentmem_close(other);
}

TEST_CASE("a dimension named without an embedder means agentmem-hash-v1 at that dimension") {
  test::TempDir dir;
  agentmem_db* db = Open(dir.File("d64.agentmem"), "vector_dim=64");
  CHECK(Remembered(db, "a text of some words") == Hash(64, "a text of some words"));
  agentmem_close(db);
  engine::Options o;
  REQUIRE(engine::ParseOptions("vector_metric=ip", &o).ok());
  CHECK(engine::NewFileSpace(o) ==
        engine::VectorSpace{engine::DefaultSpace().embedder, engine::DefaultSpace().dim, "ip",
                            engine::DefaultSpace().type});
  engine::Options named;
  REQUIRE(engine::ParseOptions("embedder=my-model", &named).ok());
  CHECK(engine::NewFileSpace(named) == engine::VectorSpace{"my-model", 384, "cosine"});
}

TEST_CASE("a new file of a GloVe embedder stores float16 vectors unless the open names a type") {
  auto type_of = [](const char* options) {
    engine::Options o;
    REQUIRE(engine::ParseOptions(options, &o).ok());
    return engine::NewFileSpace(o).type;
  };
  CHECK(type_of("embedder=agentmem-glove-v2") == "f16");
  CHECK(type_of("embedder=agentmem-glove-v1") == "f16");
  CHECK(type_of("embedder=agentmem-glove-v2&vector_type=f32") == "f32");
  CHECK(type_of("embedder=agentmem-glove-v1&vector_type=int8") == "int8");
  CHECK(type_of("embedder=agentmem-hash-v1") == "f32");
  CHECK(type_of("vector_dim=1536") == "f32");
  CHECK(type_of("embedder=my-model") == "f32");
  // The type is the file's: a reopen without options keeps it, and a
  // vector_type=f32 file of the same embedder keeps float32 values.
  auto glove = index::GloveEmbedder::Create();
  if (!glove.ok()) {
    MESSAGE("without the GloVe table: " << glove.status().message());
    return;
  }
  test::TempDir dir;
  const char* text = "The lake was frozen when we went skating.";
  const std::string f32 = dir.File("f32.agentmem");
  agentmem_db* db = Open(f32, "vector_type=f32");
  CHECK(Remembered(db, text) == glove->Embed(text));
  agentmem_close(db);
  db = Open(f32);
  CHECK(Remembered(db, text) == glove->Embed(text));
  agentmem_close(db);
  const std::string f16 = dir.File("f16.agentmem");
  agentmem_close(Open(f16));
  db = Open(f16);
  CHECK(Remembered(db, text) == Halved(glove->Embed(text)));
  CHECK(Remembered(db, text) != glove->Embed(text));
  agentmem_close(db);
}

TEST_CASE("agentmem-glove-v1 or v2 with another dimension than 100 is refused") {
  for (std::string name : {"agentmem-glove-v1", "agentmem-glove-v2"}) {
    engine::Options o;
    Status s = engine::ParseOptions(("embedder=" + name + "&vector_dim=384").c_str(), &o);
    CHECK(s.code() == kMisuse);
    CHECK(s.message() == "option vector_dim=384: " + name + " has 100 dimensions");
    engine::Options ok;
    REQUIRE(engine::ParseOptions(("embedder=" + name).c_str(), &ok).ok());
    CHECK(engine::NewFileSpace(ok) == engine::VectorSpace{name, 100, "cosine", "f16"});
  }
}

TEST_CASE("a GloVe file in a build without the table is told to need that embedder, not an "
          "external one") {
  for (const char* name : {"agentmem-glove-v1", "agentmem-glove-v2"}) {
    Status s = index::BuiltinEmbedder::Missing(name, /*glove_linked=*/false);
    CHECK(s.code() == kMisuse);
    CHECK(s.message() == std::string("this file's vectors come from the built-in embedder ") +
                             name +
                             ", which this build of the library lacks: it was built without "
                             "the GloVe table (meson option glove_table); build it with the "
                             "table (make fetches it), or pass a query vector");
  }
  CHECK(index::BuiltinEmbedder::Missing("my-model").message() ==
        "this file's vectors come from an external embedder (my-model): register it "
        "(agentmem_create_embedder) or pass a query vector");
}

TEST_CASE("a file of a GloVe embedder version this library does not know says so on recall") {
  agentmem_db* db = Open(":memory:", "embedder=agentmem-glove-v9&vector_dim=100");
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.mode = AGENTMEM_RECALL_VECTOR;
  agentmem_cursor* cur = nullptr;
  CHECK(agentmem_recall(db, "u", "where is the lake", &o, &cur) == AGENTMEM_MISUSE);
  CHECK(std::string(agentmem_errmsg(db)) ==
        "this file's vectors come from the built-in embedder agentmem-glove-v9, which this "
        "version of the library does not have: open it with the version that made it, or pass "
        "a query vector");
  agentmem_close(db);
}

TEST_CASE("recall by text on a new file finds an episode by meaning without a shared word") {
  if (!index::GloveTable::HasLinked()) {
    MESSAGE("skipped: agentmem-glove-v2 is not built into this library");
    return;
  }
  agentmem_db* db = Open(":memory:");
  for (const char* text : {"The carburetor of my old truck needs cleaning.",
                           "Our new puppy chewed my shoes again!",
                           "The stock market fell sharply today."}) {
    Remembered(db, text);
  }
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.mode = AGENTMEM_RECALL_VECTOR;
  o.k = 1;
  // The nearest neighbour by meaning; the default floor (the 99th
  // percentile of unrelated question/turn pairs) is about whether a
  // neighbour counts as a match, not about which is nearest.
  o.min_similarity = -INFINITY;
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_recall(db, "u", "a dog that bites footwear", &o, &cur) == AGENTMEM_OK);
  REQUIRE(agentmem_cursor_step(cur) == AGENTMEM_ROW);
  CHECK(std::string(agentmem_cursor_hit(cur)->text) == "Our new puppy chewed my shoes again!");
  agentmem_cursor_close(cur);
  agentmem_close(db);
}

}  // namespace
}  // namespace agentmem

// tests/fuzz/fuzz_sql.cc -- SQL text run with agentmem_exec on a seeded file
// (a MemEnv image with episodes, blocks and facts of two users, made once per
// process). Invariants: no crash or sanitizer report whatever the statement
// (reads, writes, transactions, the table-valued functions); every call
// returns a code the C API documents; the handle closes; the file then
// reopens, passes the integrity check, and every seeded episode reads back
// unchanged (episodes are append-only, so no SQL may alter them).
//
// The input is the SQL text itself (a NUL ends it early). The seeds
// (tests/fuzz/corpus/sql/) are statements over every table and function of
// docs/sql.md. SQLite's run time is bounded by a progress handler and its
// string and blob sizes by sqlite3_limit, so that a recursive CTE or
// zeroblob(1e9) ends as an error rather than as a libFuzzer timeout or
// out-of-memory report.
#include <sqlite3.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/capi/capi_internal.h"
#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "engine/memory/options.h"
#include "engine/sql/session.h"
#include "tests/fuzz/fuzz.h"

namespace {

using namespace agentmem;

constexpr const char* kPath = "/fuzz/sql.agentmem";
constexpr int kSeedEpisodes = 6;

engine::Options OptionsFor(engine::Env* env) {
  engine::Options o;
  Status s = engine::ParseOptions("vector_dim=8&page_size=512&sync=full&busy_timeout=0", &o);
  AGENTMEM_FUZZ_CHECK(s.ok(), "options: %s", s.ToString().c_str());
  o.env = env;
  o.salt = 0x73716c66757a7a31ULL;
  static int64_t now = 1700000000000000;
  o.clock = [] { return now += 1000; };
  return o;
}

// A C API handle over a Database on `env` (what agentmem_open_v2 does for a
// path, here on a MemEnv); nullptr when the image does not open.
agentmem_db* OpenHandle(engine::Env* env) {
  auto* h = new agentmem_db;
  if (!engine::Database::Open(kPath, OptionsFor(env), &h->db).ok()) {
    delete h;
    return nullptr;
  }
  capi::SetLive(h, true);
  return h;
}

// The image every input starts from, and its episodes' texts.
struct Seed {
  std::string image;
  std::vector<std::string> texts;  // texts[i] is episode i + 1
};

const Seed& TheSeed() {
  static const Seed seed = [] {
    Seed s;
    std::unique_ptr<engine::Env> env = engine::NewMemEnv();
    agentmem_db* h = OpenHandle(env.get());
    AGENTMEM_FUZZ_CHECK(h != nullptr, "the seed file does not open");
    const char* script =
        "INSERT INTO episodes(user_id, session_id, role, text, ts, metadata) VALUES"
        " ('alice','s1','user','I moved to Lisbon in May',1,'{\"topic\":\"travel\"}'),"
        " ('alice','s1','assistant','Noted: Lisbon since May',2,NULL),"
        " ('alice','s2','user','my cat is called Miso',3,'{\"topic\":\"pets\",\"n\":1}'),"
        " ('bob','s9','user','résumé sent to the agency',4,NULL),"
        " ('bob','s9','tool','{\"weather\":\"rain\"}',5,NULL),"
        " ('','','system','anonymous note',6,NULL);"
        "INSERT INTO blocks(user_id, name, value, char_limit, pinned_order) VALUES"
        " ('alice','persona','likes tea',100,1), ('bob','goals','find a job',0,NULL);"
        "UPDATE blocks SET value = 'likes green tea' WHERE user_id = 'alice' AND name = 'persona';"
        "INSERT INTO facts(user_id, subject, predicate, object, confidence) VALUES"
        " ('alice','alice','lives_in','Lisbon',0.9), ('bob','bob','wants','job',0.5);";
    char* err = nullptr;
    int rc = agentmem_exec(h, script, nullptr, nullptr, &err);
    AGENTMEM_FUZZ_CHECK(rc == AGENTMEM_OK, "seeding failed: %s", err ? err : "?");
    for (int id = 1; id <= kSeedEpisodes; id++) {
      format::EpisodeRecord e;
      Status g = h->db->GetEpisode(static_cast<uint64_t>(id), &e);
      AGENTMEM_FUZZ_CHECK(g.ok(), "seed episode %d: %s", id, g.ToString().c_str());
      s.texts.push_back(e.text);
    }
    AGENTMEM_FUZZ_CHECK(agentmem_close(h) == AGENTMEM_OK, "closing the seed file failed");
    std::unique_ptr<engine::File> f;
    AGENTMEM_FUZZ_CHECK(env->Open(kPath, engine::OpenMode{true}, &f).ok(), "seed image");
    uint64_t size = 0;
    f->Size(&size).IgnoreError();
    f->ReadAt(0, size, &s.image).IgnoreError();
    return s;
  }();
  return seed;
}

// Reads every value of every row (the strings must be valid to the end).
int OnRow(void* arg, int n, char** values, char** names) {
  size_t* bytes = static_cast<size_t*>(arg);
  for (int i = 0; i < n; i++) {
    if (values[i]) *bytes += std::strlen(values[i]);
    if (names[i]) *bytes += std::strlen(names[i]);
  }
  return 0;
}

int Progress(void* arg) { return ++*static_cast<long*>(arg) > 20000; }  // ~20M VM steps

// A code of include/agentmem.h that agentmem_exec may return (not ROW/DONE).
bool Documented(int rc) { return rc >= 0 && (rc & 0xff) <= AGENTMEM_ABORT; }

}  // namespace

AGENTMEM_FUZZ_TARGET(sql) {
  if (size > 8192) return 0;
  const Seed& seed = TheSeed();
  std::string sql(reinterpret_cast<const char*>(data), size);
  sql.resize(std::strlen(sql.c_str()));

  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  AGENTMEM_FUZZ_CHECK(env->CreateAtomic(kPath, seed.image).ok(), "cannot lay the seed image");
  agentmem_db* h = OpenHandle(env.get());
  AGENTMEM_FUZZ_CHECK(h != nullptr, "the seed image does not open");
  // The first statement opens the SQL session; then bound it.
  AGENTMEM_FUZZ_CHECK(agentmem_exec(h, "SELECT 1", nullptr, nullptr, nullptr) == AGENTMEM_OK,
                      "SELECT 1 failed: %s", agentmem_errmsg(h));
  long steps = 0;
  sqlite3_progress_handler(h->sql->conn(), 1000, Progress, &steps);
  sqlite3_limit(h->sql->conn(), SQLITE_LIMIT_LENGTH, 1 << 20);

  size_t bytes = 0;
  char* err = nullptr;
  int rc = agentmem_exec(h, sql.c_str(), OnRow, &bytes, &err);
  AGENTMEM_FUZZ_CHECK(Documented(rc), "agentmem_exec returned %d: %s", rc, err ? err : "");
  AGENTMEM_FUZZ_CHECK((rc == AGENTMEM_OK) == (err == nullptr), "exec %d with message %s", rc,
                      err ? err : "(none)");
  agentmem_free(err);
  // A statement left a transaction open: roll it back (or the close does).
  agentmem_exec(h, "ROLLBACK", nullptr, nullptr, nullptr);
  rc = agentmem_close(h);
  AGENTMEM_FUZZ_CHECK(rc == AGENTMEM_OK, "close failed: %d", rc);

  engine::Options ro = OptionsFor(env.get());
  ro.read_only = true;
  ro.create = false;
  std::unique_ptr<engine::Database> db;
  Status s = engine::Database::Open(kPath, ro, &db);
  AGENTMEM_FUZZ_CHECK(s.ok(), "the file no longer opens: %s", s.ToString().c_str());
  std::vector<std::string> problems;
  s = db->Check(&problems);
  AGENTMEM_FUZZ_CHECK(s.ok() && problems.empty(), "integrity check: %s",
                      s.ok() ? problems.front().c_str() : s.ToString().c_str());
  for (int id = 1; id <= kSeedEpisodes; id++) {
    format::EpisodeRecord e;
    s = db->GetEpisode(static_cast<uint64_t>(id), &e);
    AGENTMEM_FUZZ_CHECK(s.ok() && e.text == seed.texts[id - 1],
                        "seeded episode %d changed or lost: %s", id,
                        s.ok() ? e.text.c_str() : s.ToString().c_str());
  }
  return 0;
}

// tests/fuzz/fuzz_open.cc -- a whole file image, as bytes, opened through
// engine::Database on a MemEnv. Invariants: open never crashes; when it
// succeeds, every read (stats, users, episodes, blocks and their history,
// facts, the integrity check, a BM25 and a vector recall) returns OK or an
// error but never crashes; and when a write is then acknowledged, a reopen
// shows it exactly, together with the episode count read before.
//
// The same bytes are salvaged too (engine/memory/recover.h): never a crash, and when
// the salvage succeeds, the new file opens and checks clean.
//
// The seeds (tests/fuzz/corpus/open/) are small real files, so mutations get
// past the header and checksums often enough to reach the scan and decoders.
#include <memory>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "engine/memory/recover.h"
#include "tests/fuzz/fuzz.h"

namespace {

using namespace agentmem;
using engine::Database;

constexpr const char* kPath = "/fuzz/open.agentmem";

// Reads everything through the public calls of Database. Errors are allowed
// (the file may be damaged); crashes are not. Returns the episodes seen.
uint64_t ReadAll(Database* db) {
  engine::Stats st;
  db->GetStats(&st).IgnoreError();
  std::vector<std::string> users;
  if (!db->ListUsers(&users).ok()) return 0;
  uint64_t seen = 0;
  for (const std::string& u : users) {
    std::vector<uint64_t> ids;
    if (db->ListEpisodeIds(u, nullptr, &ids).ok()) {
      for (uint64_t id : ids) {
        format::EpisodeRecord e;
        if (db->GetEpisode(id, &e).ok()) seen++;
      }
    }
    std::vector<format::BlockRecord> blocks;
    if (db->ListBlocks(u, &blocks).ok()) {
      for (const format::BlockRecord& b : blocks) {
        std::vector<format::BlockRecord> history;
        db->ListBlockHistory(u, b.name, &history).IgnoreError();
      }
    }
    std::vector<format::FactRecord> facts;
    db->ListFacts(u, nullptr, nullptr, &facts).IgnoreError();
    engine::RecallQuery q;
    q.user_id = u;
    q.text = "memory agent note";
    q.k = 5;
    std::vector<engine::RecallHit> hits;
    engine::RecallPlan plan;
    db->Recall(q, &hits, &plan).IgnoreError();
    q.mode = engine::RecallMode::kBm25;
    db->Recall(q, &hits, &plan).IgnoreError();
  }
  std::vector<std::string> problems;
  db->Check(&problems).IgnoreError();
  return seen;
}

}  // namespace

AGENTMEM_FUZZ_TARGET(open) {
  if (size > (1u << 20)) return 0;
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  if (!env->CreateAtomic(kPath, std::string_view(reinterpret_cast<const char*>(data), size))
           .ok()) {
    return 0;
  }
  engine::Options ro;
  ro.env = env.get();
  ro.read_only = true;
  ro.create = false;
  std::unique_ptr<Database> db;
  {
    constexpr const char* kSaved = "/fuzz/saved.agentmem";
    engine::Options so;
    so.env = env.get();
    engine::RecoverReport report;
    Status r = engine::Recover(kPath, kSaved, so, &report);
    AGENTMEM_FUZZ_CHECK(r.ok() || !env->Exists(kSaved), "a failed salvage left its new file: %s",
                        r.ToString().c_str());
    if (r.ok()) {
      engine::Options sro = ro;
      Status o = Database::Open(kSaved, sro, &db);
      AGENTMEM_FUZZ_CHECK(o.ok(), "the salvaged file does not open: %s", o.ToString().c_str());
      std::vector<std::string> problems;
      Status c = db->Check(&problems);
      AGENTMEM_FUZZ_CHECK(c.ok() && problems.empty(), "the salvaged file does not check clean: %s %s",
                          c.ToString().c_str(), problems.empty() ? "" : problems[0].c_str());
      db.reset();
      env->Delete(kSaved).IgnoreError();
    }
  }
  if (!Database::Open(kPath, ro, &db).ok()) return 0;
  ReadAll(db.get());
  db.reset();

  // A write on top of what opened: OK or an error, and if OK, durable.
  engine::Options rw = ro;
  rw.read_only = false;
  rw.sync = engine::SyncMode::kFull;
  if (!Database::Open(kPath, rw, &db).ok()) return 0;
  format::EpisodeRecord e;
  e.user_id = "fuzz";
  e.session_id = "s";
  e.role = "user";
  e.text = "written after a fuzzed open";
  e.ts = 1;
  uint64_t id = 0;
  Status s = db->Remember(e, &id);
  if (!s.ok()) return 0;
  format::EpisodeRecord written;
  Status g = db->GetEpisode(id, &written);
  AGENTMEM_FUZZ_CHECK(g.ok(), "episode %llu was acknowledged but cannot be read back: %s",
                      static_cast<unsigned long long>(id), g.ToString().c_str());
  db.reset();
  Status o = Database::Open(kPath, ro, &db);
  AGENTMEM_FUZZ_CHECK(o.ok(), "the file no longer opens after an acknowledged write: %s",
                      o.ToString().c_str());
  format::EpisodeRecord back;
  g = db->GetEpisode(id, &back);
  AGENTMEM_FUZZ_CHECK(g.ok(), "acknowledged episode %llu is gone after reopen: %s",
                      static_cast<unsigned long long>(id), g.ToString().c_str());
  AGENTMEM_FUZZ_CHECK(back == written, "acknowledged episode %llu changed after reopen",
                      static_cast<unsigned long long>(id));
  ReadAll(db.get());
  return 0;
}

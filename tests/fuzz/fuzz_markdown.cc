// tests/fuzz/fuzz_markdown.cc -- the Markdown memory import (engine/memory/markdown.cc,
// ImportMarkdown; docs/markdown.md) of arbitrary text into a seeded file: a
// user with a block with history, a single-valued predicate's superseded
// fact, episodes in two sessions, in a MemEnv image made once per process.
//
// Input: the Markdown text, read into user "alice".
// Invariants: no crash or sanitizer report; the import returns OK or a code
// docs/markdown.md names, and a refused import writes nothing; whatever it
// did, the user's export read back writes nothing and exports the same
// bytes again; the file then reopens and passes the integrity check.
#include <memory>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "engine/memory/markdown.h"
#include "engine/memory/options.h"
#include "tests/fuzz/fuzz.h"

namespace {

using namespace agentmem;

constexpr const char* kPath = "/fuzz/markdown.agentmem";

engine::Options OptionsFor(engine::Env* env) {
  engine::Options o;
  Status s = engine::ParseOptions("vector_dim=8&page_size=512&sync=off&busy_timeout=0", &o);
  AGENTMEM_FUZZ_CHECK(s.ok(), "options: %s", s.ToString().c_str());
  o.env = env;
  o.salt = 0x6d61726b646f776eULL;
  static int64_t now = 1700000000000000;
  o.clock = [] { return now += 1000; };
  return o;
}

std::unique_ptr<engine::Database> MustOpen(engine::Env* env) {
  std::unique_ptr<engine::Database> db;
  Status s = engine::Database::Open(kPath, OptionsFor(env), &db);
  AGENTMEM_FUZZ_CHECK(s.ok(), "open: %s", s.ToString().c_str());
  return db;
}

void Must(const Status& s, const char* what) {
  AGENTMEM_FUZZ_CHECK(s.ok(), "%s: %s", what, s.ToString().c_str());
}

// The seeded file's image, made once.
const std::string& SeedImage() {
  static const std::string image = [] {
    std::unique_ptr<engine::Env> env = engine::NewMemEnv();
    std::unique_ptr<engine::Database> db = MustOpen(env.get());
    Must(db->DeclarePredicate("lives_in", true), "declare");
    const char* texts[] = {"I live in Tokyo", "I moved to Osaka\n## Facts", "my cat is Miso"};
    for (int i = 0; i < 3; i++) {
      format::EpisodeRecord e;
      e.user_id = "alice";
      e.session_id = i < 2 ? "s1" : "s2";
      e.role = "user";
      e.text = texts[i];
      e.ts = 1000 + i;
      uint64_t id = 0;
      Must(db->Remember(e, &id), "remember");
    }
    for (const char* value : {"likes tea", "likes green tea\n```\nand | pipes"}) {
      format::BlockRecord b;
      b.user_id = "alice";
      b.name = "persona";
      b.value = value;
      b.pinned_order = 0;
      Must(db->SetBlock(b), "block");
    }
    for (const char* city : {"Tokyo", "Osaka"}) {
      format::FactRecord f;
      f.user_id = "alice";
      f.subject = "alice";
      f.predicate = "lives_in";
      f.object = city;
      uint64_t id = 0;
      Must(db->AssertFact(f, &id), "fact");
    }
    Must(db->Close(), "close seed");
    std::unique_ptr<engine::File> f;
    Must(env->Open(kPath, engine::OpenMode{true}, &f), "seed image");
    uint64_t size = 0;
    std::string bytes;
    Must(f->Size(&size), "seed size");
    Must(f->ReadAt(0, size, &bytes), "seed read");
    return bytes;
  }();
  return image;
}

uint64_t Records(engine::Database* db) {
  engine::Stats st;
  Must(db->GetStats(&st), "stats");
  return st.episodes + st.block_versions + st.facts + st.commits;
}

// A code docs/markdown.md gives an import.
bool Documented(const Status& s) {
  int p = s.primary();
  return s.ok() || p == kMismatch || p == kNotFound || p == kConstraint || p == kRange ||
         p == kTooBig;
}

}  // namespace

AGENTMEM_FUZZ_TARGET(markdown) {
  if (size > 16384) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  Must(env->CreateAtomic(kPath, SeedImage()), "lay the seed image");
  std::unique_ptr<engine::Database> db = MustOpen(env.get());
  const uint64_t before = Records(db.get());
  std::string report;
  Status s = engine::ImportMarkdown(db.get(), "alice", text, &report);
  AGENTMEM_FUZZ_CHECK(Documented(s), "import returned %s", s.ToString().c_str());
  if (!s.ok()) {
    AGENTMEM_FUZZ_CHECK(Records(db.get()) == before, "a refused import wrote: %s",
                        s.ToString().c_str());
  }
  // The user's export reads back without a write, and exports the same bytes.
  std::string first, second;
  Must(engine::ExportMarkdown(db.get(), "alice", &first), "export");
  const uint64_t exported = Records(db.get());
  Must(engine::ImportMarkdown(db.get(), "alice", first, &report), "import of the export");
  AGENTMEM_FUZZ_CHECK(Records(db.get()) == exported, "the export read back wrote: %s",
                      report.c_str());
  Must(engine::ExportMarkdown(db.get(), "alice", &second), "export again");
  AGENTMEM_FUZZ_CHECK(first == second, "the round trip changed the export:\n%s\n---\n%s",
                      first.c_str(), second.c_str());
  Must(db->Close(), "close");
  db.reset();

  db = MustOpen(env.get());
  std::vector<std::string> problems;
  s = db->Check(&problems);
  AGENTMEM_FUZZ_CHECK(s.ok() && problems.empty(), "integrity check: %s",
                      s.ok() ? problems.front().c_str() : s.ToString().c_str());
  return 0;
}

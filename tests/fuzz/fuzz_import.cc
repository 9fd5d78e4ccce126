// tests/fuzz/fuzz_import.cc -- JSONL import (engine/memory/memory.cc, ImportJsonl;
// docs/export.md) of arbitrary text into a seeded file: episodes of two
// users, a block with history, a superseded fact, a forgotten episode and a
// declared predicate, in a MemEnv image made once per process.
//
// Input: the first byte picks the flags (bit 0: new ids; bit 1: import into
// an empty file instead of the seeded one); the rest is the JSONL text.
// Invariants: no crash or sanitizer report; the import returns OK or a code
// docs/export.md names, and a refused import writes nothing; an accepted
// import imported again adds nothing; the file's whole export, imported into
// an empty file, exports the same bytes, and imported into the file itself
// adds nothing; the file then reopens and passes the integrity check.
//
// Inputs that name an id above kMaxId are left out: the catalog holds
// episodes in an array indexed by id, so such an input measures the memory
// of that array, not the import.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "engine/json/json_reader.h"
#include "engine/memory/memory.h"
#include "engine/memory/options.h"
#include "tests/fuzz/fuzz.h"

namespace {

using namespace agentmem;

constexpr const char* kPath = "/fuzz/import.agentmem";
constexpr const char* kCopyPath = "/fuzz/copy.agentmem";
constexpr uint64_t kMaxId = 1 << 20;

engine::Options OptionsFor(engine::Env* env) {
  engine::Options o;
  Status s = engine::ParseOptions("vector_dim=8&page_size=512&sync=off&busy_timeout=0", &o);
  AGENTMEM_FUZZ_CHECK(s.ok(), "options: %s", s.ToString().c_str());
  o.env = env;
  o.salt = 0x696d706f72743121ULL;
  static int64_t now = 1700000000000000;
  o.clock = [] { return now += 1000; };
  return o;
}

std::unique_ptr<engine::Database> MustOpen(engine::Env* env, const char* path) {
  std::unique_ptr<engine::Database> db;
  Status s = engine::Database::Open(path, OptionsFor(env), &db);
  AGENTMEM_FUZZ_CHECK(s.ok(), "open %s: %s", path, s.ToString().c_str());
  return db;
}

void Must(const Status& s, const char* what) {
  AGENTMEM_FUZZ_CHECK(s.ok(), "%s: %s", what, s.ToString().c_str());
}

std::string Image(engine::Env* env) {
  std::unique_ptr<engine::File> f;
  Must(env->Open(kPath, engine::OpenMode{true}, &f), "seed image");
  uint64_t size = 0;
  std::string image;
  Must(f->Size(&size), "seed size");
  Must(f->ReadAt(0, size, &image), "seed read");
  return image;
}

// The seeded file's image, made once.
const std::string& SeedImage() {
  static const std::string image = [] {
    std::unique_ptr<engine::Env> env = engine::NewMemEnv();
    std::unique_ptr<engine::Database> db = MustOpen(env.get(), kPath);
    Must(db->DeclarePredicate("lives_in", true), "declare");
    const char* texts[] = {"I live in Tokyo", "I moved to Osaka", "my cat is Miso", "bob here"};
    std::vector<uint64_t> ids;
    for (int i = 0; i < 4; i++) {
      format::EpisodeRecord e;
      e.user_id = i == 3 ? "bob" : "alice";
      e.session_id = "s1";
      e.role = "user";
      e.text = texts[i];
      e.ts = 1000 + i;
      if (i == 2) e.metadata = "{\"topic\":\"pets\"}";
      uint64_t id = 0;
      Must(db->Remember(e, &id), "remember");
      ids.push_back(id);
    }
    for (const char* value : {"likes tea", "likes green tea"}) {
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
      f.source_episode_ids = {ids[city[0] == 'T' ? 0 : 1]};
      uint64_t id = 0;
      Must(db->AssertFact(f, &id), "fact");
    }
    format::ForgetRecord forget;
    forget.kind = format::ForgetKind::kEpisode;
    forget.id = ids[3];
    Must(db->Forget(forget, nullptr), "forget");
    Must(db->Close(), "close seed");
    return Image(env.get());
  }();
  return image;
}

// Whether a line names an id (or next id) above kMaxId.
bool HugeId(std::string_view text) {
  engine::JsonTokens t;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!engine::ParseJson(line, &t) || t[0].kind != engine::JsonToken::kBeginObject) continue;
    for (const char* key : {"id", "version", "next_episode_id", "next_fact_id",
                            "next_block_version", "source_episode_ids"}) {
      size_t v = engine::JsonMember(t, 0, key);
      if (v == engine::kNoJsonValue) continue;
      for (size_t i = v; i < engine::JsonValueEnd(t, v); i++) {
        if (t[i].kind == engine::JsonToken::kUint && t[i].u > kMaxId) return true;
      }
    }
  }
  return false;
}

uint64_t Records(engine::Database* db) {
  engine::Stats st;
  Must(db->GetStats(&st), "stats");
  return st.episodes + st.block_versions + st.facts;
}

// A code docs/export.md gives an import.
bool Documented(const Status& s) {
  int p = s.primary();
  return s.ok() || p == kMismatch || p == kConstraint || p == kTooBig || p == kRange;
}

}  // namespace

AGENTMEM_FUZZ_TARGET(import) {
  if (size < 1 || size > 16384) return 0;
  const bool new_ids = data[0] & 1, empty = data[0] & 2;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (HugeId(text)) return 0;

  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  if (!empty) Must(env->CreateAtomic(kPath, SeedImage()), "lay the seed image");
  std::unique_ptr<engine::Database> db = MustOpen(env.get(), kPath);
  const uint64_t before = Records(db.get());
  engine::ImportCounts counts;
  Status s = engine::ImportJsonl(db.get(), text, &counts, new_ids);
  AGENTMEM_FUZZ_CHECK(Documented(s), "import returned %s", s.ToString().c_str());
  if (!s.ok()) {
    AGENTMEM_FUZZ_CHECK(Records(db.get()) == before && counts.added() == 0,
                        "a refused import wrote records: %s", s.ToString().c_str());
  } else {
    AGENTMEM_FUZZ_CHECK(Records(db.get()) == before + counts.added(), "counts: %llu added",
                        static_cast<unsigned long long>(counts.added()));
    engine::ImportCounts again;
    s = engine::ImportJsonl(db.get(), text, &again, new_ids);
    AGENTMEM_FUZZ_CHECK(s.ok() && again.added() == 0,
                        "the same import again: %s, %llu added", s.ToString().c_str(),
                        static_cast<unsigned long long>(again.added()));
  }
  // The round trip of the whole file, whatever the import did.
  std::string first, second;
  Must(engine::ExportFile(db.get(), &first), "export");
  {
    std::unique_ptr<engine::Database> copy = MustOpen(env.get(), kCopyPath);
    engine::ImportCounts c;
    Must(engine::ImportJsonl(copy.get(), first, &c), "import of the export into an empty file");
    Must(engine::ExportFile(copy.get(), &second), "export of the copy");
    AGENTMEM_FUZZ_CHECK(first == second, "the round trip changed the export:\n%s\n---\n%s",
                        first.c_str(), second.c_str());
    Must(copy->Close(), "close the copy");
  }
  engine::ImportCounts own;
  Must(engine::ImportJsonl(db.get(), first, &own), "import of the file's own export");
  AGENTMEM_FUZZ_CHECK(own.added() == 0, "the file's own export added %llu records",
                      static_cast<unsigned long long>(own.added()));
  Must(db->Close(), "close");
  db.reset();

  db = MustOpen(env.get(), kPath);
  std::vector<std::string> problems;
  s = db->Check(&problems);
  AGENTMEM_FUZZ_CHECK(s.ok() && problems.empty(), "integrity check: %s",
                      s.ok() ? problems.front().c_str() : s.ToString().c_str());
  return 0;
}

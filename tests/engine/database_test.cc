// tests/engine/database_test.cc -- engine::Database: ids, snapshots,
// transactions and how records are packed into pages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/memory/database.h"
#include "format/page.h"
#include "tests/util/fault_env.h"
#include "tests/util/temp_dir.h"

using agentmem::Status;
using agentmem::engine::Database;
using agentmem::engine::Options;
using agentmem::engine::Stats;
using agentmem::format::EpisodeRecord;

namespace {

EpisodeRecord Ep(const std::string& user, const std::string& text) {
  EpisodeRecord r;
  r.user_id = user;
  r.session_id = "s";
  r.role.assign("user", 4);  // (not operator=: GCC 12 -Wrestrict false positive)
  r.text = text;
  return r;
}

std::unique_ptr<Database> OpenMem(agentmem::engine::Env* env, Options opts = {}) {
  opts.env = env;
  std::unique_ptr<Database> db;
  Status s = Database::Open("db", opts, &db);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return db;
}

// Walks the page headers of a file image and counts pages by type.
std::vector<agentmem::format::PageHeader> Pages(const std::string& bytes, uint64_t salt) {
  std::vector<agentmem::format::PageHeader> out;
  uint64_t pos = agentmem::format::kFirstPageOffset;
  while (pos + agentmem::format::kPageHeaderSize <= bytes.size()) {
    agentmem::format::PageHeader h;
    if (!agentmem::format::PeekPageHeader(std::string_view(bytes).substr(pos), pos, salt, &h).ok()) {
      break;
    }
    out.push_back(h);
    pos += agentmem::format::PaddedPageSize(h.length);
  }
  return out;
}

}  // namespace

TEST_CASE("episode ids increase across transactions and reopen") {
  auto env = agentmem::engine::NewMemEnv();
  uint64_t last = 0;
  for (int round = 0; round < 3; round++) {
    auto db = OpenMem(env.get());
    for (int i = 0; i < 5; i++) {
      uint64_t id = 0;
      REQUIRE(db->Remember(Ep("u", "t"), &id).ok());
      CHECK(id == last + 1);
      last = id;
    }
  }
}

TEST_CASE("a rolled-back transaction leaves no trace and its ids are reused") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  uint64_t id = 0;
  REQUIRE(db->Remember(Ep("u", "one"), &id).ok());
  Stats before;
  REQUIRE(db->GetStats(&before).ok());
  REQUIRE(db->Begin().ok());
  REQUIRE(db->Remember(Ep("u", "gone"), &id).ok());
  CHECK(id == 2);
  REQUIRE(db->Rollback().ok());
  Stats after;
  REQUIRE(db->GetStats(&after).ok());
  CHECK(after.file_bytes == before.file_bytes);
  CHECK(after.episodes == 1);
  REQUIRE(db->Remember(Ep("u", "two"), &id).ok());
  CHECK(id == 2);
  EpisodeRecord r;
  REQUIRE(db->GetEpisode(2, &r).ok());
  CHECK(r.text == "two");
}

TEST_CASE("a transaction's snapshot does not move while it only reads") {
  auto env = agentmem::engine::NewMemEnv();
  auto a = OpenMem(env.get());
  auto b = OpenMem(env.get());
  REQUIRE(a->Remember(Ep("u", "first"), nullptr).ok());
  REQUIRE(b->Begin().ok());
  std::vector<uint64_t> ids;
  REQUIRE(b->ListEpisodeIds("u", nullptr, &ids).ok());
  CHECK(ids.size() == 1);
  REQUIRE(a->Remember(Ep("u", "second"), nullptr).ok());
  REQUIRE(b->ListEpisodeIds("u", nullptr, &ids).ok());
  CHECK(ids.size() == 1);  // pinned
  REQUIRE(b->Rollback().ok());
  REQUIRE(b->ListEpisodeIds("u", nullptr, &ids).ok());
  CHECK(ids.size() == 2);  // moved on
}

TEST_CASE("a read pin holds the snapshot until its last owner lets it go") {
  auto env = agentmem::engine::NewMemEnv();
  auto a = OpenMem(env.get());
  auto b = OpenMem(env.get());
  REQUIRE(a->Remember(Ep("u", "first"), nullptr).ok());
  std::vector<uint64_t> ids;
  {
    agentmem::engine::ReadPin pin;
    CHECK(!pin.held());
    REQUIRE(pin.Begin(b.get()).ok());
    CHECK(pin.held());
    REQUIRE(a->Remember(Ep("u", "second"), nullptr).ok());
    agentmem::engine::ReadPin moved = std::move(pin);
    CHECK(!pin.held());
    CHECK(moved.held());
    REQUIRE(b->ListEpisodeIds("u", nullptr, &ids).ok());
    CHECK(ids.size() == 1);  // pinned before the second commit
    // Begin again: the pin moves to the latest commit and still holds it.
    REQUIRE(moved.Begin(b.get()).ok());
    REQUIRE(a->Remember(Ep("u", "third"), nullptr).ok());
    REQUIRE(b->ListEpisodeIds("u", nullptr, &ids).ok());
    CHECK(ids.size() == 2);
  }
  REQUIRE(b->ListEpisodeIds("u", nullptr, &ids).ok());
  CHECK(ids.size() == 3);  // the pin is gone: reads move on
}

TEST_CASE("a big transaction is packed into pages of about page_size and compressed") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  REQUIRE(db->Begin().ok());
  for (int i = 0; i < 500; i++) {
    REQUIRE(db->Remember(Ep("u", "the same sentence about sourdough starters, turn " +
                                     std::to_string(i)), nullptr).ok());
  }
  REQUIRE(db->Commit().ok());
  std::unique_ptr<agentmem::engine::File> f;
  REQUIRE(env->Open("db", agentmem::engine::OpenMode{true}, &f).ok());
  agentmem::engine::Stats st;
  REQUIRE(db->GetStats(&st).ok());
  const uint64_t size = st.file_bytes;  // the log's end: the reserve's zeros after it are not pages
  std::string bytes;
  REQUIRE(f->ReadAt(0, size, &bytes).ok());
  agentmem::format::FileHeader h;
  REQUIRE(agentmem::format::DecodeFileHeader(bytes, &h).ok());
  auto pages = Pages(bytes, h.salt);
  int episode_pages = 0, compressed = 0, records = 0;
  for (const auto& p : pages) {
    if (p.type != static_cast<uint8_t>(agentmem::format::PageType::kEpisodes)) continue;
    episode_pages++;
    records += static_cast<int>(p.record_count);
    compressed += (p.flags & agentmem::format::kPageFlagZstd) != 0;
    CHECK(p.raw_length <= h.page_size);
  }
  CHECK(records == 500);
  CHECK(episode_pages > 1);
  CHECK(compressed == episode_pages);
  uint64_t raw = 0;
  for (const auto& p : pages) raw += p.raw_length;
  CHECK(size < raw);  // compression paid
}

TEST_CASE("an episode larger than a page gets a page of its own and reads back") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  std::string big;
  for (int i = 0; big.size() < 100000; i++) big += "word" + std::to_string(i * 7919 % 100003) + " ";
  uint64_t id = 0;
  REQUIRE(db->Begin().ok());
  REQUIRE(db->Remember(Ep("u", "small before"), nullptr).ok());
  REQUIRE(db->Remember(Ep("u", big), &id).ok());
  REQUIRE(db->Remember(Ep("u", "small after"), nullptr).ok());
  REQUIRE(db->Commit().ok());
  db.reset();
  db = OpenMem(env.get());
  EpisodeRecord r;
  REQUIRE(db->GetEpisode(id, &r).ok());
  CHECK(r.text == big);
}

TEST_CASE("blocks return their newest version and list one row per name") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  for (const char* v : {"a", "b", "c"}) {
    agentmem::format::BlockRecord b;
    b.user_id = "u";
    b.name = "persona";
    b.value = v;
    REQUIRE(db->SetBlock(b).ok());
  }
  agentmem::format::BlockRecord other;
  other.user_id = "u";
  other.name = "profile";
  other.value = "p";
  REQUIRE(db->SetBlock(other).ok());
  agentmem::format::BlockRecord got;
  REQUIRE(db->GetBlock("u", "persona", &got).ok());
  CHECK(got.value == "c");
  CHECK(got.version == 3);
  std::vector<agentmem::format::BlockRecord> all;
  REQUIRE(db->ListBlocks("u", &all).ok());
  REQUIRE(all.size() == 2);
  CHECK(all[0].name == "persona");
  CHECK(all[1].value == "p");
}

TEST_CASE("sync=normal makes its commits durable at close") {
  agentmem::test::TempDir dir;
  Options opts;
  opts.sync = agentmem::engine::SyncMode::kNormal;
  std::unique_ptr<Database> db;
  REQUIRE(Database::Open(dir.File("n.agentmem"), opts, &db).ok());
  for (int i = 0; i < 20; i++) REQUIRE(db->Remember(Ep("u", "x"), nullptr).ok());
  Stats st;
  REQUIRE(db->GetStats(&st).ok());
  CHECK(st.syncs == 0);
  REQUIRE(db->Close().ok());
  REQUIRE(Database::Open(dir.File("n.agentmem"), opts, &db).ok());
  REQUIRE(db->GetStats(&st).ok());
  CHECK(st.episodes == 20);
}

TEST_CASE("check finds nothing wrong in a sound file and lists users and block history") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  uint64_t id = 0;
  REQUIRE(db->Remember(Ep("ann", "hello"), &id).ok());
  agentmem::format::BlockRecord b;
  b.user_id = "bob";
  b.name = "persona";
  b.value = "v1";
  REQUIRE(db->SetBlock(b).ok());
  b.value = "v2";
  REQUIRE(db->SetBlock(b).ok());
  std::vector<std::string> problems;
  REQUIRE(db->Check(&problems).ok());
  CHECK(problems.empty());
  std::vector<std::string> users;
  REQUIRE(db->ListUsers(&users).ok());
  CHECK(users == std::vector<std::string>{"ann", "bob"});
  std::vector<agentmem::format::BlockRecord> history;
  REQUIRE(db->ListBlockHistory("bob", "persona", &history).ok());
  REQUIRE(history.size() == 2);
  CHECK(history[0].value == "v1");
  CHECK(history[1].value == "v2");
  CHECK(db->episode_id_limit() == 2);
}

namespace {

using agentmem::format::BlockRecord;
using agentmem::format::FactRecord;

FactRecord Fact(const std::string& subject, const std::string& predicate, const std::string& object,
                int64_t valid_from = 0, int64_t valid_to = 0) {
  FactRecord f;
  f.user_id = "u";
  f.subject = subject;
  f.predicate = predicate;
  f.object = object;
  f.valid_from = valid_from;
  f.valid_to = valid_to;
  return f;
}

// The whole file, as another process would read it.
std::string FileBytes(agentmem::engine::Env* env, const std::string& path = "db") {
  std::unique_ptr<agentmem::engine::File> f;
  REQUIRE(env->Open(path, agentmem::engine::OpenMode{true}, &f).ok());
  uint64_t size = 0;
  REQUIRE(f->Size(&size).ok());
  std::string bytes;
  REQUIRE(f->ReadAt(0, size, &bytes).ok());
  return bytes;
}

// Facts of user u valid now and current, as (subject, object, valid_from, valid_to).
std::vector<FactRecord> CurrentFacts(Database* db, const std::string& predicate) {
  agentmem::engine::FactQuery q;
  q.user_id = "u";
  q.predicate = predicate;
  q.all_versions = true;
  std::vector<FactRecord> all;
  REQUIRE(db->QueryFacts(q, &all).ok());
  std::vector<FactRecord> out;
  for (const FactRecord& f : all) {
    if (f.expired_at == agentmem::format::kForever) out.push_back(f);
  }
  return out;
}

// Reopened, the file's last episode is `id`, with `text`.
void CheckReopensWithLast(agentmem::engine::Env* env, uint64_t id, const std::string& text) {
  auto db = OpenMem(env);
  EpisodeRecord r;
  REQUIRE(db->GetEpisode(id, &r).ok());
  CHECK(r.text == text);
  CHECK(db->episode_id_limit() == id + 1);
}

}  // namespace

TEST_CASE("opening a missing file without create fails naming the path and creates nothing") {
  auto env = agentmem::engine::NewMemEnv();
  Options opts;
  opts.env = env.get();
  opts.create = false;
  std::unique_ptr<Database> db;
  Status s = Database::Open("missing.agentmem", opts, &db);
  CHECK(s.code() == agentmem::kCantOpen);
  CHECK(s.message().find("missing.agentmem") != std::string::npos);
  CHECK(db == nullptr);
  CHECK_FALSE(env->Exists("missing.agentmem"));
}

namespace {

// A MemEnv that reports the file missing once: another process then creates
// it between this open's check and its own create.
class LateCreatorEnv : public agentmem::engine::Env {
 public:
  explicit LateCreatorEnv(agentmem::engine::Env* base) : base_(base) {}
  Status Open(const std::string& path, agentmem::engine::OpenMode mode,
              std::unique_ptr<agentmem::engine::File>* out) override {
    return base_->Open(path, mode, out);
  }
  Status CreateAtomic(const std::string& path, std::string_view initial) override {
    return base_->CreateAtomic(path, initial);
  }
  bool Exists(const std::string& path) override {
    return std::exchange(claimed_missing_, true) ? base_->Exists(path) : false;
  }
  Status Delete(const std::string& path) override { return base_->Delete(path); }

 private:
  agentmem::engine::Env* base_;
  bool claimed_missing_ = false;
};

}  // namespace

TEST_CASE("an open that loses the race to create the file opens the one the other creator made") {
  auto mem = agentmem::engine::NewMemEnv();
  uint64_t id = 0;
  REQUIRE(OpenMem(mem.get())->Remember(Ep("u", "the creator's"), &id).ok());
  LateCreatorEnv env(mem.get());
  auto db = OpenMem(&env);  // its create finds the file there: not replaced
  EpisodeRecord r;
  REQUIRE(db->GetEpisode(id, &r).ok());
  CHECK(r.text == "the creator's");
  Stats st;
  REQUIRE(db->GetStats(&st).ok());
  CHECK(st.episodes == 1);
}

TEST_CASE("an open naming another tokenizer than the file records is refused, the same one accepted") {
  auto env = agentmem::engine::NewMemEnv();
  Options opts;
  opts.tokenizer.stem = true;
  opts.tokenizer_given = true;
  OpenMem(env.get(), opts)->Close().IgnoreError();
  OpenMem(env.get(), opts);  // the same: accepted
  Options other;
  other.env = env.get();
  other.tokenizer_given = true;  // the default tokenizer, which does not stem
  std::unique_ptr<Database> db;
  Status s = Database::Open("db", other, &db);
  CHECK(s.code() == agentmem::kMismatch);
  CHECK(s.message().find("tokenizer mismatch") != std::string::npos);
  CHECK(s.message().find("stem=1") != std::string::npos);
  CHECK(db == nullptr);
  OpenMem(env.get());  // not naming one: takes the file's
}

TEST_CASE("a closed handle refuses every call with a misuse error and closes again quietly") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  uint64_t id = 0;
  REQUIRE(db->Remember(Ep("u", "kept"), &id).ok());
  REQUIRE(db->Close().ok());
  CHECK(db->Begin().code() == agentmem::kMisuse);
  CHECK(db->Commit().code() == agentmem::kMisuse);
  CHECK(db->Rollback().code() == agentmem::kMisuse);
  CHECK(db->Remember(Ep("u", "late"), nullptr).code() == agentmem::kMisuse);
  EpisodeRecord r;
  CHECK(db->GetEpisode(id, &r).code() == agentmem::kMisuse);
  std::vector<uint64_t> ids;
  CHECK(db->ListEpisodeIds("u", nullptr, &ids).code() == agentmem::kMisuse);
  std::vector<BlockRecord> blocks;
  CHECK(db->ListBlocks("u", &blocks).code() == agentmem::kMisuse);
  CHECK(db->ListBlockHistory("u", "persona", &blocks).code() == agentmem::kMisuse);
  std::vector<std::string> users;
  CHECK(db->ListUsers(&users).code() == agentmem::kMisuse);
  std::vector<agentmem::engine::RecallHit> hits;
  agentmem::engine::RecallQuery q;
  q.user_id = "u";
  q.text = "kept";
  CHECK(db->Recall(q, &hits, nullptr).code() == agentmem::kMisuse);
  CHECK(db->DeclarePredicate("likes", true).code() == agentmem::kMisuse);
  CHECK(db->ImportFact(Fact("ann", "likes", "tea"), nullptr).code() == agentmem::kMisuse);
  CHECK(db->Close().ok());
  CheckReopensWithLast(env.get(), id, "kept");
}

TEST_CASE("a poisoned handle refuses reads and writes, writes nothing at close, and the file reopens intact") {
  auto env = agentmem::engine::NewMemEnv();
  Options opts;
  opts.sync = agentmem::engine::SyncMode::kNormal;  // a clean close would write a superblock
  auto db = OpenMem(env.get(), opts);
  uint64_t id = 0;
  REQUIRE(db->Remember(Ep("u", "before"), &id).ok());
  const std::string bytes = FileBytes(env.get());
  db->Poison();
  CHECK(db->poisoned());
  EpisodeRecord r;
  Status s = db->GetEpisode(id, &r);
  CHECK(s.code() == agentmem::kNoMem);
  CHECK(s.message().find("closed and reopened") != std::string::npos);
  CHECK(db->Remember(Ep("u", "after"), nullptr).code() == agentmem::kNoMem);
  CHECK(db->Close().ok());
  CHECK(FileBytes(env.get()) == bytes);  // no retention, checkpoint or superblock written
  CheckReopensWithLast(env.get(), id, "before");
}

TEST_CASE("writes with invalid UTF-8, an over-long block, empty fields or a confidence outside 0..1 are refused and write nothing") {
  auto env = agentmem::engine::NewMemEnv();
  Options opts;
  opts.max_text_bytes = 64;
  auto db = OpenMem(env.get(), opts);
  const std::string before = FileBytes(env.get());
  const std::string bad = "caf\xc3";  // cut inside a two-byte sequence
  auto episode_with = [&](std::string EpisodeRecord::*field) {
    EpisodeRecord e = Ep("u", "text");
    e.*field = bad;
    Status s = db->Remember(e, nullptr);
    CHECK(s.code() == agentmem::kMismatchUtf8);
    return s.message();
  };
  CHECK(episode_with(&EpisodeRecord::session_id).find("session_id") != std::string::npos);
  CHECK(episode_with(&EpisodeRecord::role).find("role") != std::string::npos);
  CHECK(episode_with(&EpisodeRecord::metadata).find("metadata") != std::string::npos);
  auto block_with = [&](std::string BlockRecord::*field, const std::string& value) {
    BlockRecord b;
    b.user_id = "u";
    b.name = "persona";
    b.value = "v";
    b.*field = value;
    return db->SetBlock(b);
  };
  CHECK(block_with(&BlockRecord::user_id, bad).message().find("user_id") != std::string::npos);
  CHECK(block_with(&BlockRecord::name, bad).message().find("block name") != std::string::npos);
  CHECK(block_with(&BlockRecord::value, bad).message().find("block value") != std::string::npos);
  Status s = block_with(&BlockRecord::value, std::string(65, 'x'));
  CHECK(s.code() == agentmem::kTooBig);
  CHECK(s.message().find("65 bytes") != std::string::npos);
  CHECK(db->AssertFact(Fact("", "likes", "tea"), nullptr).code() == agentmem::kConstraint);
  CHECK(db->AssertFact(Fact("ann", "likes", ""), nullptr).code() == agentmem::kConstraint);
  CHECK(db->AssertFact(Fact("ann", "likes", bad), nullptr).code() == agentmem::kMismatchUtf8);
  for (float c : {-0.5f, 1.5f, std::nanf("")}) {
    FactRecord f = Fact("ann", "likes", "tea");
    f.confidence = c;
    CHECK(db->AssertFact(f, nullptr).code() == agentmem::kRange);
    CHECK(db->ImportFact(f, nullptr).code() == agentmem::kRange);
  }
  CHECK(db->DeclarePredicate("", true).code() == agentmem::kConstraint);
  CHECK(db->DeclarePredicate(bad, true).code() == agentmem::kMismatchUtf8);
  CHECK(FileBytes(env.get()) == before);
  Stats st;
  REQUIRE(db->GetStats(&st).ok());
  CHECK(st.episodes + st.blocks + st.facts == 0);
}

TEST_CASE("an imported fact keeps both time axes and its id, and a taken id or an empty time range is refused") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  FactRecord f = Fact("ann", "lives_in", "Oslo", 100, 200);
  f.id = 7;
  f.recorded_at = 150;
  f.expired_at = 180;
  REQUIRE(db->ImportFact(f, nullptr).ok());  // no id wanted back
  FactRecord taken = Fact("ann", "lives_in", "Bergen");
  taken.id = 7;
  Status s = db->ImportFact(taken, nullptr);
  CHECK(s.code() == agentmem::kConstraint);
  CHECK(s.message().find("fact id 7 is taken: new ids start at 8") != std::string::npos);
  FactRecord backwards = Fact("ann", "lives_in", "Bergen", 200, 100);
  CHECK(db->ImportFact(backwards, nullptr).code() == agentmem::kRange);
  FactRecord unknown_before_recorded = Fact("ann", "lives_in", "Bergen");
  unknown_before_recorded.recorded_at = 50;
  unknown_before_recorded.expired_at = 40;
  CHECK(db->ImportFact(unknown_before_recorded, nullptr).code() == agentmem::kRange);
  uint64_t id = 0;
  FactRecord never_expired = Fact("ann", "likes", "tea");
  never_expired.expired_at = 0;  // 0: never
  REQUIRE(db->ImportFact(never_expired, &id).ok());
  CHECK(id == 8);
  db.reset();
  Options ro;
  ro.read_only = true;
  db = OpenMem(env.get(), ro);
  CHECK(db->ImportFact(Fact("ann", "likes", "coffee"), nullptr).code() == agentmem::kReadOnlyFile);
  std::vector<FactRecord> facts;
  REQUIRE(db->ListFacts("u", nullptr, nullptr, &facts).ok());
  REQUIRE(facts.size() == 2);
  CHECK(facts[0] == f);
  CHECK(facts[1].id == 8);
  CHECK(facts[1].expired_at == agentmem::format::kForever);
}

TEST_CASE("a predicate declared in a transaction is single-valued for the facts asserted after it, and declaring it again as not makes it multi-valued") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  REQUIRE(db->Begin().ok());
  REQUIRE(db->DeclarePredicate("lives_in", true).ok());
  CHECK(db->IsSingleValued("lives_in"));
  CHECK_FALSE(db->IsSingleValued("likes"));
  REQUIRE(db->AssertFact(Fact("ann", "lives_in", "Oslo", 10), nullptr).ok());
  REQUIRE(db->AssertFact(Fact("ann", "lives_in", "Bergen", 20), nullptr).ok());
  REQUIRE(db->Commit().ok());
  auto now = CurrentFacts(db.get(), "lives_in");
  REQUIRE(now.size() == 2);  // Oslo cut to [10, 20), Bergen from 20
  std::sort(now.begin(), now.end(),
            [](const FactRecord& a, const FactRecord& b) { return a.object < b.object; });
  CHECK(now[0].object == "Bergen");
  CHECK(now[1].object == "Oslo");
  CHECK(now[1].valid_to == 20);
  REQUIRE(db->DeclarePredicate("lives_in", false).ok());
  CHECK_FALSE(db->IsSingleValued("lives_in"));
  REQUIRE(db->AssertFact(Fact("ann", "lives_in", "Paris", 30), nullptr).ok());
  CHECK(CurrentFacts(db.get(), "lives_in").size() == 3);  // nothing superseded
  db.reset();
  db = OpenMem(env.get());
  CHECK_FALSE(db->IsSingleValued("lives_in"));
  CHECK(CurrentFacts(db.get(), "lives_in").size() == 3);
}

TEST_CASE("a single-valued assertion splits an overlapping fact around its valid time and leaves the rest alone") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  REQUIRE(db->DeclarePredicate("status", true).ok());
  uint64_t around = 0, later = 0, same = 0;
  REQUIRE(db->AssertFact(Fact("ann", "status", "busy", 10, 100), &around).ok());
  REQUIRE(db->AssertFact(Fact("ann", "status", "away", 200, 300), &later).ok());
  REQUIRE(db->AssertFact(Fact("ann", "status", "free", 500, 600), &same).ok());
  // "free" during [20, 50): busy is cut before and after it; away (later)
  // does not overlap; the other "free" row is the same object.
  uint64_t id = 0;
  REQUIRE(db->AssertFact(Fact("ann", "status", "free", 20, 50), &id).ok());
  CHECK(id != same);
  auto now = CurrentFacts(db.get(), "status");
  std::vector<std::tuple<std::string, int64_t, int64_t>> rows;
  for (const FactRecord& f : now) rows.emplace_back(f.object, f.valid_from, f.valid_to);
  std::sort(rows.begin(), rows.end());
  using Row = std::tuple<std::string, int64_t, int64_t>;
  CHECK(rows == std::vector<Row>{Row{"away", 200, 300}, Row{"busy", 10, 20}, Row{"busy", 50, 100},
                                 Row{"free", 20, 50}, Row{"free", 500, 600}});
  // Asserting a known fact again while it is valid writes nothing; before
  // its valid time or after it, it is a new row.
  const std::string bytes = FileBytes(env.get());
  REQUIRE(db->AssertFact(Fact("ann", "status", "free", 30, 50), nullptr).ok());
  CHECK(FileBytes(env.get()) == bytes);
  REQUIRE(db->AssertFact(Fact("ann", "status", "away", 150, 160), &id).ok());
  CHECK(id != later);
  REQUIRE(db->AssertFact(Fact("ann", "status", "away", 400, 450), &id).ok());
  CHECK(id != later);
  CHECK(CurrentFacts(db.get(), "status").size() == 7);
}

TEST_CASE("reads in a transaction see its own pending records of the asked user, session and block only") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  REQUIRE(db->Begin().ok());
  EpisodeRecord in_s = Ep("u", "in s");
  EpisodeRecord in_t = Ep("u", "in t");
  in_t.session_id = "t";
  uint64_t s_id = 0, t_id = 0;
  REQUIRE(db->Remember(in_s, &s_id).ok());
  REQUIRE(db->Remember(in_t, &t_id).ok());
  REQUIRE(db->Remember(Ep("v", "other user"), nullptr).ok());
  BlockRecord b;
  b.user_id = "u";
  b.name = "persona";
  b.value = "mine";
  REQUIRE(db->SetBlock(b).ok());
  b.user_id = "v";
  b.value = "theirs";
  REQUIRE(db->SetBlock(b).ok());
  b.name = "notes";
  REQUIRE(db->SetBlock(b).ok());
  const std::string session = "t";
  std::vector<uint64_t> ids;
  REQUIRE(db->ListEpisodeIds("u", &session, &ids).ok());
  CHECK(ids == std::vector<uint64_t>{t_id});
  REQUIRE(db->ListEpisodeIds("u", nullptr, &ids).ok());
  CHECK(ids == std::vector<uint64_t>{s_id, t_id});
  BlockRecord got;
  REQUIRE(db->GetBlock("u", "persona", &got).ok());
  CHECK(got.value == "mine");
  CHECK(db->GetBlock("u", "notes", &got).code() == agentmem::kNotFound);
  std::vector<BlockRecord> blocks;
  REQUIRE(db->ListBlocks("u", &blocks).ok());
  REQUIRE(blocks.size() == 1);
  CHECK(blocks[0].value == "mine");
  REQUIRE(db->Rollback().ok());
  REQUIRE(db->ListBlocks("u", &blocks).ok());
  CHECK(blocks.empty());
}

TEST_CASE("a block version given by an import is kept when it is above every version so far") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  BlockRecord b;
  b.user_id = "u";
  b.name = "persona";
  b.value = "imported";
  b.version = 40;
  b.updated_at = 1234;
  REQUIRE(db->SetBlock(b).ok());
  b.value = "stale import";
  b.version = 12;  // below: assigned the next one
  b.updated_at = 0;
  REQUIRE(db->SetBlock(b).ok());
  db.reset();
  db = OpenMem(env.get());
  std::vector<BlockRecord> history;
  REQUIRE(db->ListBlockHistory("u", "persona", &history).ok());
  REQUIRE(history.size() == 2);
  CHECK(history[0].version == 40);
  CHECK(history[0].updated_at == 1234);
  CHECK(history[1].version == 41);
  CHECK(history[1].value == "stale import");
  CHECK(history[1].updated_at != 0);
}

TEST_CASE("lists in a transaction add its pending records to the committed ones, once per user") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  BlockRecord b;
  b.user_id = "u";
  b.name = "persona";
  b.value = "v1";
  REQUIRE(db->SetBlock(b).ok());
  REQUIRE(db->Remember(Ep("u", "committed"), nullptr).ok());
  REQUIRE(db->Begin().ok());
  b.value = "v2";
  REQUIRE(db->SetBlock(b).ok());
  b.name = "notes";
  b.value = "n1";
  REQUIRE(db->SetBlock(b).ok());
  b.user_id = "w";
  REQUIRE(db->SetBlock(b).ok());
  REQUIRE(db->Remember(Ep("u", "pending"), nullptr).ok());
  std::vector<BlockRecord> history;
  REQUIRE(db->ListBlockHistory("u", "persona", &history).ok());
  REQUIRE(history.size() == 2);
  CHECK(history[0].value == "v1");
  CHECK(history[1].value == "v2");
  REQUIRE(db->ListBlockHistory("u", "missing", &history).ok());
  CHECK(history.empty());
  std::vector<std::string> users;
  REQUIRE(db->ListUsers(&users).ok());
  CHECK(users == std::vector<std::string>{"u", "w"});
  const std::string other_session = "elsewhere";
  std::vector<uint64_t> ids;
  REQUIRE(db->ListEpisodeIds("u", &other_session, &ids).ok());
  CHECK(ids.empty());
  REQUIRE(db->Commit().ok());
  REQUIRE(db->ListBlockHistory("u", "persona", &history).ok());
  CHECK(history.size() == 2);
}

TEST_CASE("recall weighs recency from the query's own now when it gives one") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  const int64_t day = 86400LL * 1000000;
  EpisodeRecord old_one = Ep("u", "sourdough starter feeding");
  old_one.ts = 10 * day;
  EpisodeRecord new_one = Ep("u", "sourdough starter feeding");
  new_one.ts = 20 * day;
  uint64_t old_id = 0, new_id = 0;
  REQUIRE(db->Remember(old_one, &old_id).ok());
  REQUIRE(db->Remember(new_one, &new_id).ok());
  agentmem::engine::RecallQuery q;
  q.user_id = "u";
  q.text = "sourdough starter";
  q.half_life_s = 86400;
  q.now = 20 * day;  // the newer one is fresh then, the older ten half-lives old
  std::vector<agentmem::engine::RecallHit> hits;
  REQUIRE(db->Recall(q, &hits, nullptr).ok());
  REQUIRE(hits.size() == 2);
  CHECK(hits[0].id == new_id);
  CHECK(hits[1].score < hits[0].score / 100);
}

namespace {

// The offset of the first page of `type` in `bytes`.
uint64_t FirstPageOf(const std::string& bytes, agentmem::format::PageType type) {
  agentmem::format::FileHeader h;
  REQUIRE(agentmem::format::DecodeFileHeader(bytes, &h).ok());
  uint64_t pos = agentmem::format::kFirstPageOffset;
  for (const auto& p : Pages(bytes, h.salt)) {
    if (p.type == static_cast<uint8_t>(type)) return pos;
    pos += agentmem::format::PaddedPageSize(p.length);
  }
  FAIL("no page of that type");
  return 0;
}

// Flips one byte of the file behind every open handle's back.
void FlipByte(agentmem::engine::Env* env, uint64_t offset) {
  std::unique_ptr<agentmem::engine::File> f;
  REQUIRE(env->Open("db", agentmem::engine::OpenMode{false}, &f).ok());
  std::string b;
  REQUIRE(f->ReadAt(offset, 1, &b).ok());
  b[0] = static_cast<char>(b[0] ^ 0x20);
  REQUIRE(f->WriteAt(offset, b).ok());
}

}  // namespace

TEST_CASE("a record page damaged under an open handle is reported as corruption naming it by every read") {
  for (bool in_header : {false, true}) {
    CAPTURE(in_header);
    auto env = agentmem::engine::NewMemEnv();
    auto db = OpenMem(env.get());
    EpisodeRecord e = Ep("u", "sourdough starter");
    e.metadata = R"({"topic":"bread"})";
    uint64_t id = 0;
    REQUIRE(db->Remember(e, &id).ok());
    BlockRecord b;
    b.user_id = "u";
    b.name = "persona";
    b.value = "baker";
    REQUIRE(db->SetBlock(b).ok());
    const std::string bytes = FileBytes(env.get());
    const uint64_t episodes = FirstPageOf(bytes, agentmem::format::PageType::kEpisodes);
    const uint64_t blocks = FirstPageOf(bytes, agentmem::format::PageType::kBlocks);
    // The salt in the page header (not a page of this file), or a byte of
    // the checksummed payload.
    const uint64_t at = in_header ? 8 : agentmem::format::kPageHeaderSize + 2;
    FlipByte(env.get(), episodes + at);
    FlipByte(env.get(), blocks + at);
    // The cache trusts a page it holds (Pager): the writer keeps its last
    // episode page there, so the reads below start from an empty cache.
    db->pager().Clear();
    auto damaged = [](const Status& s, uint64_t offset) {
      CAPTURE(s.ToString());
      CHECK(s.primary() == agentmem::kCorrupt);
      CHECK(s.page_no() == static_cast<int64_t>(agentmem::format::PageNoOf(offset)));
    };
    EpisodeRecord got;
    damaged(db->GetEpisode(id, &got), episodes);
    std::vector<BlockRecord> list;
    damaged(db->ListBlocks("u", &list), blocks);
    damaged(db->ListBlockHistory("u", "persona", &list), blocks);
    agentmem::engine::RecallQuery q;
    q.user_id = "u";
    q.text = "sourdough";
    std::vector<agentmem::engine::RecallHit> hits;
    damaged(db->Recall(q, "topic", "\"bread\"", &hits, nullptr), episodes);
    // The check finds it too, as a problem of the file.
    std::vector<std::string> problems;
    REQUIRE(db->Check(&problems).ok());
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].find("page " + std::to_string(agentmem::format::PageNoOf(episodes))) !=
          std::string::npos);
  }
}

TEST_CASE("a writer that finds damage in another handle's commits refuses to write and cuts nothing") {
  auto env = agentmem::engine::NewMemEnv();
  auto a = OpenMem(env.get());
  auto b = OpenMem(env.get());
  REQUIRE(b->Remember(Ep("u", "first of b"), nullptr).ok());
  const std::string before = FileBytes(env.get());
  REQUIRE(b->Remember(Ep("u", "second of b"), nullptr).ok());
  // The first of b's transactions is damaged; its second, synced after it,
  // vouches that it was whole.
  uint64_t damaged = 0;
  {
    const std::string bytes = FileBytes(env.get());
    agentmem::format::FileHeader h;
    REQUIRE(agentmem::format::DecodeFileHeader(bytes, &h).ok());
    uint64_t pos = agentmem::format::kFirstPageOffset;
    for (const auto& p : Pages(bytes, h.salt)) {
      if (p.type == static_cast<uint8_t>(agentmem::format::PageType::kEpisodes) && damaged == 0 &&
          pos > agentmem::format::kFirstPageOffset) {
        damaged = pos;  // the first episodes page: b's first transaction
      }
      pos += agentmem::format::PaddedPageSize(p.length);
    }
  }
  REQUIRE(damaged != 0);
  REQUIRE(damaged < before.size());
  FlipByte(env.get(), damaged + agentmem::format::kPageHeaderSize + 2);
  const std::string bytes = FileBytes(env.get());
  Status s = a->Remember(Ep("u", "of a"), nullptr);
  CHECK(s.primary() == agentmem::kCorrupt);
  CHECK(s.page_no() == static_cast<int64_t>(agentmem::format::PageNoOf(damaged)));
  CHECK(FileBytes(env.get()) == bytes);  // not cut as if it were a torn tail
  Stats st;
  CHECK(a->GetStats(&st).primary() == agentmem::kCorrupt);  // a reader says the same
}

TEST_CASE("a transaction of many forgets spans pages and every one of them applies after reopen") {
  auto env = agentmem::engine::NewMemEnv();
  Options opts;
  opts.page_size = 512;
  auto db = OpenMem(env.get(), opts);
  std::vector<uint64_t> ids;
  REQUIRE(db->Begin().ok());
  for (int i = 0; i < 240; i++) {
    uint64_t id = 0;
    REQUIRE(db->Remember(Ep("u", "episode " + std::to_string(i)), &id).ok());
    ids.push_back(id);
  }
  REQUIRE(db->Commit().ok());
  REQUIRE(db->Begin().ok());
  for (size_t i = 0; i < ids.size(); i += 2) {
    agentmem::format::ForgetRecord f;
    f.kind = agentmem::format::ForgetKind::kEpisode;
    f.user_id = "u";
    f.id = ids[i];
    REQUIRE(db->Forget(f, nullptr).ok());
  }
  REQUIRE(db->Commit().ok());
  db.reset();
  const std::string bytes = FileBytes(env.get());
  agentmem::format::FileHeader h;
  REQUIRE(agentmem::format::DecodeFileHeader(bytes, &h).ok());
  int forget_pages = 0;
  for (const auto& p : Pages(bytes, h.salt)) {
    forget_pages += p.type == static_cast<uint8_t>(agentmem::format::PageType::kForget);
  }
  CHECK(forget_pages > 1);
  db = OpenMem(env.get(), opts);
  for (size_t i = 0; i < ids.size(); i++) {
    EpisodeRecord r;
    CHECK(db->GetEpisode(ids[i], &r).code() == (i % 2 ? agentmem::kOk : agentmem::kNotFound));
  }
}

namespace {

using agentmem::test::Fault;
using agentmem::test::FaultEnv;

}  // namespace

TEST_CASE("a fact assertion whose read of the current facts fails writes nothing and leaves the handle writable") {
  auto mem = agentmem::engine::NewMemEnv();
  FaultEnv env(mem.get());
  uint64_t first = 0;
  {
    auto db = OpenMem(&env);
    REQUIRE(db->AssertFact(Fact("ann", "likes", "tea"), &first).ok());
  }
  auto db = OpenMem(&env);  // its fact index is built on first need, reading the file
  const std::string bytes = FileBytes(mem.get());
  env.FailAt(1, Fault::kEio, /*persistent=*/true, agentmem::test::kOpRead);
  uint64_t id = 0;
  Status s = db->AssertFact(Fact("ann", "likes", "coffee"), &id);
  CHECK(s.code() == agentmem::kIoErrRead);
  CHECK(id == 0);
  env.ClearFaults();
  CHECK(FileBytes(mem.get()) == bytes);
  auto other = OpenMem(mem.get());  // the lock was released
  REQUIRE(other->AssertFact(Fact("ann", "likes", "cocoa"), nullptr).ok());
  other.reset();
  REQUIRE(db->AssertFact(Fact("ann", "likes", "coffee"), &id).ok());
  CHECK(id == first + 2);
}

TEST_CASE("writes wait for another handle's write lock and give up with busy, writing nothing") {
  auto env = agentmem::engine::NewMemEnv();
  auto holder = OpenMem(env.get());
  Options opts;
  opts.busy_timeout_ms = 10;
  auto db = OpenMem(env.get(), opts);
  REQUIRE(holder->Begin().ok());
  REQUIRE(holder->Remember(Ep("u", "holding the lock"), nullptr).ok());
  const std::string bytes = FileBytes(env.get());
  Status s = db->ImportFact(Fact("ann", "likes", "tea"), nullptr);
  CHECK(s.code() == agentmem::kBusyTimeout);
  CHECK(s.message().find("another writer holds the write lock") != std::string::npos);
  CHECK(db->DeclarePredicate("likes", true).code() == agentmem::kBusyTimeout);
  CHECK(FileBytes(env.get()) == bytes);
  REQUIRE(holder->Commit().ok());
  REQUIRE(db->DeclarePredicate("likes", true).ok());
  uint64_t id = 0;
  REQUIRE(db->ImportFact(Fact("ann", "likes", "tea"), &id).ok());
  CHECK(id == 1);
  CHECK(db->IsSingleValued("likes"));
}

TEST_CASE("an import whose commit fails returns the write error and no id, and poisoning keeps that error") {
  auto mem = agentmem::engine::NewMemEnv();
  FaultEnv env(mem.get());
  auto db = OpenMem(&env);
  REQUIRE(db->Remember(Ep("u", "kept"), nullptr).ok());
  env.FailAt(1, Fault::kEio, /*persistent=*/false, agentmem::test::kOpWrite);
  uint64_t id = 0;
  CHECK(db->ImportFact(Fact("ann", "likes", "tea"), &id).code() == agentmem::kIoErrWrite);
  CHECK(id == 0);
  CHECK(db->Remember(Ep("u", "refused"), nullptr).code() == agentmem::kIoErrSticky);
  db->Poison();  // after the failed write: its error is the one reported
  EpisodeRecord r;
  CHECK(db->GetEpisode(1, &r).code() == agentmem::kIoErrWrite);
  db.reset();
  db = OpenMem(mem.get());
  REQUIRE(db->GetEpisode(1, &r).ok());
  CHECK(r.text == "kept");
  std::vector<FactRecord> facts;
  REQUIRE(db->ListFacts("u", nullptr, nullptr, &facts).ok());
  CHECK(facts.empty());
}

TEST_CASE("episode id 0, an id beyond the last and a forgotten one are not found, naming the id") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  uint64_t id = 0;
  REQUIRE(db->Remember(Ep("u", "forgotten"), &id).ok());
  agentmem::format::ForgetRecord f;
  f.kind = agentmem::format::ForgetKind::kEpisode;
  f.id = id;
  REQUIRE(db->Forget(f, nullptr).ok());
  for (uint64_t missing : {uint64_t{0}, id, id + 1}) {
    EpisodeRecord r;
    Status s = db->GetEpisode(missing, &r);
    CHECK(s.code() == agentmem::kNotFound);
    CHECK(s.message() == "no episode with id " + std::to_string(missing));
  }
}

namespace {

// What one handle sees of user u: episodes, blocks, facts and recall.
struct Seen {
  std::vector<EpisodeRecord> episodes;
  std::vector<agentmem::format::BlockRecord> blocks;
  std::vector<FactRecord> facts;
  std::vector<std::pair<uint64_t, double>> hits;
  bool operator==(const Seen&) const = default;
};

Seen SeenBy(Database* db) {
  Seen s;
  std::vector<uint64_t> ids;
  REQUIRE(db->ListEpisodeIds("u", nullptr, &ids).ok());
  for (uint64_t id : ids) {
    s.episodes.emplace_back();
    REQUIRE(db->GetEpisode(id, &s.episodes.back()).ok());
  }
  REQUIRE(db->ListBlocks("u", &s.blocks).ok());
  REQUIRE(db->ListFacts("u", nullptr, nullptr, &s.facts).ok());
  for (const char* text : {"apples in the orchard", "the red car", "tea"}) {
    agentmem::engine::RecallQuery q;
    q.user_id = "u";
    q.text = text;
    std::vector<agentmem::engine::RecallHit> hits;
    REQUIRE(db->Recall(q, &hits, nullptr).ok());
    for (const auto& h : hits) s.hits.emplace_back(h.id, h.score);
  }
  return s;
}

}  // namespace

TEST_CASE("a writer's own commits leave it seeing what a fresh open of the file sees") {
  auto env = agentmem::engine::NewMemEnv();
  auto writer = OpenMem(env.get());
  const char* texts[] = {"we picked apples in the orchard", "the red car would not start",
                         "tea with lemon in the morning", "the orchard needs rain",
                         "a new car, also red", "green tea after lunch"};
  std::vector<uint64_t> ids;
  REQUIRE(writer->Begin().ok());  // four in one transaction, then one each
  for (int i = 0; i < 6; i++) {
    EpisodeRecord r = Ep("u", texts[i]);
    r.session_id = i % 2 ? "b" : "a";
    uint64_t id = 0;
    REQUIRE(writer->Remember(r, &id).ok());
    ids.push_back(id);
    if (i == 3) REQUIRE(writer->Commit().ok());
  }
  REQUIRE(writer->Begin().ok());
  agentmem::format::BlockRecord b;
  b.user_id = "u";
  b.name = "persona";
  b.value = "likes tea";
  REQUIRE(writer->SetBlock(b).ok());
  FactRecord f;
  f.user_id = "u";
  f.subject = "u";
  f.predicate = "drives";
  f.object = "red car";
  uint64_t fact = 0;
  REQUIRE(writer->AssertFact(f, &fact).ok());
  REQUIRE(writer->Commit().ok());
  f.object = "blue car";
  REQUIRE(writer->AssertFact(f, nullptr, fact).ok());
  agentmem::format::ForgetRecord forget;
  forget.kind = agentmem::format::ForgetKind::kEpisode;
  forget.user_id = "u";
  forget.id = ids[2];
  agentmem::engine::ForgetReceipt receipt;
  REQUIRE(writer->Forget(forget, &receipt).ok());
  auto reader = OpenMem(env.get());
  Seen mine = SeenBy(writer.get()), fresh = SeenBy(reader.get());
  CHECK(mine.episodes.size() == 5);
  CHECK(mine.facts.size() >= 1);
  CHECK_FALSE(mine.hits.empty());
  CHECK(mine == fresh);
  std::vector<std::string> problems;
  REQUIRE(reader->Check(&problems).ok());
  CHECK(problems.empty());
}

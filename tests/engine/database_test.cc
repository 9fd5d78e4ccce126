// tests/engine/database_test.cc -- engine::Database: ids, snapshots,
// transactions and how records are packed into pages.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/database.h"
#include "format/page.h"
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
  uint64_t size = 0;
  REQUIRE(f->Size(&size).ok());
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

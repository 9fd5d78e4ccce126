// tests/engine/validate_test.cc -- the checks on values that come from callers
// (engine/memory/validate.cc): no NUL byte in a name or a text, metadata JSON nested
// at most kMaxJsonDepth deep; through the Database and the C API.
#include <doctest/doctest.h>

#include <agentmem.h>

#include <string>

#include "engine/memory/database.h"
#include "engine/memory/validate.h"
#include "tests/util/open_helpers.h"
#include "tests/util/temp_dir.h"

using agentmem::Status;
using agentmem::engine::CheckJson;
using agentmem::engine::CheckUtf8Text;
using agentmem::engine::Database;
using agentmem::engine::kMaxJsonDepth;
using agentmem::engine::Options;
using agentmem::format::BlockRecord;
using agentmem::format::EpisodeRecord;
using agentmem::format::FactRecord;
using agentmem::format::ForgetKind;
using agentmem::format::ForgetRecord;
using agentmem::test::MustOpen;
using agentmem::test::TempDir;

namespace {

using namespace std::string_literals;

std::string Nested(size_t depth, const std::string& inner = "1") {
  std::string s;
  for (size_t i = 0; i < depth; i++) s += i % 2 ? "[" : "{\"k\":";
  s += inner;
  for (size_t i = depth; i-- > 0;) s += i % 2 ? "]" : "}";
  return s;
}

EpisodeRecord Episode(const std::string& user, const std::string& text) {
  EpisodeRecord r;
  r.user_id = user;
  r.session_id = "s";
  r.role = "user";
  r.text = text;
  return r;
}

}  // namespace

TEST_CASE("a NUL byte in a name or a text is refused, valid UTF-8 though it is") {
  CHECK(CheckUtf8Text("alice", "user_id").ok());
  Status s = CheckUtf8Text("alice\0evil"s, "user_id");
  CHECK(s.code() == agentmem::kMismatch);
  CHECK(s.message().find("user_id contains a NUL byte") != std::string::npos);
  CHECK(CheckUtf8Text("\xff", "text").code() == agentmem::kMismatchUtf8);
}

TEST_CASE("metadata nested deeper than the limit is refused, brackets inside strings do not count") {
  CHECK(CheckJson(Nested(kMaxJsonDepth), "metadata").ok());
  Status s = CheckJson(Nested(kMaxJsonDepth + 1), "metadata");
  CHECK(s.code() == agentmem::kTooBig);
  CHECK(s.message().find("65 levels deep; the limit is 64") != std::string::npos);
  CHECK(CheckJson(Nested(5000), "metadata").code() == agentmem::kTooBig);
  CHECK(CheckJson("{\"a\":\"" + std::string(200, '[') + "\\\"{\"}", "metadata").ok());
  CHECK(CheckJson("[1,", "metadata").code() == agentmem::kMismatchJson);
}

TEST_CASE("no write of a name or text with a NUL byte reaches the file, and no user is aliased") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  auto db = MustOpen(path, Options{});
  uint64_t id = 0;
  CHECK(db->Remember(Episode("alice\0evil"s, "x"), &id).code() == agentmem::kMismatch);
  CHECK(db->Remember(Episode("alice", "before\0after"s), &id).code() == agentmem::kMismatch);
  EpisodeRecord e = Episode("alice", "x");
  e.session_id = "s\0t"s;
  CHECK(db->Remember(e, &id).code() == agentmem::kMismatch);
  e = Episode("alice", "x");
  e.role = "user\0x"s;
  CHECK(db->Remember(e, &id).code() == agentmem::kMismatch);

  BlockRecord b;
  b.user_id = "alice";
  b.name = "pro\0file"s;
  b.value = "v";
  CHECK(db->SetBlock(b).code() == agentmem::kMismatch);
  b.name = "profile";
  b.value = "v\0hidden"s;
  CHECK(db->SetBlock(b).code() == agentmem::kMismatch);

  FactRecord f;
  f.user_id = "alice";
  f.subject = "alice";
  f.predicate = "likes";
  f.object = "tea";
  for (int k = 0; k < 4; k++) {
    FactRecord g = f;
    std::string* fields[] = {&g.user_id, &g.subject, &g.predicate, &g.object};
    *fields[k] += "\0x"s;
    CHECK(db->AssertFact(g, &id).code() == agentmem::kMismatch);
    CHECK(db->ImportFact(g, &id).code() == agentmem::kMismatch);
  }
  CHECK(db->DeclarePredicate("lives\0in"s, true).code() == agentmem::kMismatch);
  ForgetRecord forget;
  forget.kind = ForgetKind::kUser;
  forget.user_id = "alice\0evil"s;
  CHECK(db->Forget(forget, nullptr).code() == agentmem::kMismatch);

  std::vector<std::string> users;
  REQUIRE(db->ListUsers(&users).ok());
  CHECK(users.empty());
  CHECK(db->episode_id_limit() == 1);
}

TEST_CASE("the C API refuses metadata nested too deep with AGENTMEM_TOOBIG and writes nothing") {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(":memory:", &db) == AGENTMEM_OK);
  int64_t id = 0;
  const std::string deep = Nested(5000);
  CHECK(agentmem_remember(db, "u", "", "user", "x", 0, deep.c_str(), nullptr, 0, &id) ==
        AGENTMEM_TOOBIG);
  CHECK(std::string(agentmem_errmsg(db)).find("metadata nests") != std::string::npos);
  const std::string ok = Nested(64);
  CHECK(agentmem_remember(db, "u", "", "user", "x", 0, ok.c_str(), nullptr, 0, &id) == AGENTMEM_OK);
  CHECK(id == 1);
  agentmem_close(db);
}

// tests/engine/changes_test.cc -- the change feed (engine/memory/changes.h,
// engine/storage/scan.h TxnReader) through agentmem_changes_since(): the
// commits after a position, in order, each record kind with its fields, the
// positions a file does not hold, and what reopening, a checkpoint, a VACUUM
// and a damaged page do to it (docs/replication.md).
#include <doctest/doctest.h>

#include <agentmem.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/util/temp_dir.h"

using agentmem::test::ReadFileBytes;
using agentmem::test::TempDir;
using agentmem::test::WriteFileBytes;

namespace {

struct Row {
  uint64_t log_id = 0;
  int64_t seq = 0;
  int kind = 0;
  std::string kind_name;
  int64_t id = 0;
  std::string user_id;
  std::string data;
  std::vector<float> vector;
  int64_t commit_ts = 0;
};

// Every row of a feed; *rc is how the reading ended (AGENTMEM_DONE when all
// went well) or what agentmem_changes_since returned.
std::vector<Row> Read(agentmem_db* db, uint64_t log_id, int64_t since, int* rc) {
  std::vector<Row> rows;
  agentmem_cursor* cur = nullptr;
  *rc = agentmem_changes_since(db, log_id, since, &cur);
  if (*rc != AGENTMEM_OK) {
    CHECK(cur == nullptr);
    return rows;
  }
  while ((*rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    const agentmem_change* c = agentmem_cursor_change(cur);
    REQUIRE(c != nullptr);
    Row r;
    r.log_id = c->log_id;
    r.seq = c->seq;
    r.kind = c->kind;
    r.kind_name = c->kind_name;
    r.id = c->id;
    r.user_id = c->user_id;
    r.data = c->data;
    if (c->dim > 0) r.vector.assign(c->vector, c->vector + c->dim);
    r.commit_ts = c->commit_ts;
    rows.push_back(std::move(r));
  }
  CHECK(agentmem_cursor_close(cur) == AGENTMEM_OK);
  return rows;
}

std::vector<Row> ReadAll(agentmem_db* db, uint64_t log_id, int64_t since) {
  int rc = 0;
  std::vector<Row> rows = Read(db, log_id, since, &rc);
  CHECK_MESSAGE(rc == AGENTMEM_DONE, agentmem_errmsg(db));
  return rows;
}

agentmem_db* Open(const std::string& path, const char* options = "vector_dim=8") {
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                            options);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, agentmem_errmsg(db));
  return db;
}

int64_t Remember(agentmem_db* db, const char* user, const char* text, int64_t ts = 0) {
  int64_t id = 0;
  REQUIRE(agentmem_remember(db, user, "s1", "user", text, ts, nullptr, nullptr, 0, &id) ==
          AGENTMEM_OK);
  return id;
}

void Head(agentmem_db* db, uint64_t* log_id, int64_t* seq) {
  REQUIRE(agentmem_changes_head(db, log_id, seq) == AGENTMEM_OK);
}

std::vector<std::string> Kinds(const std::vector<Row>& rows) {
  std::vector<std::string> out;
  for (const Row& r : rows) out.push_back(r.kind_name);
  return out;
}

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("changes since 0 list every commit in order, each ending with its commit row") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("a.agentmem"));
  Remember(db, "alice", "first");                                            // seq 2
  REQUIRE(agentmem_block_set(db, "alice", "profile", "vegetarian", 0, 1) == AGENTMEM_OK);  // 3
  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);                                // seq 4
  Remember(db, "alice", "second");
  Remember(db, "bob", "third");
  REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
  uint64_t log_id = 0;
  int64_t last = 0;
  Head(db, &log_id, &last);
  CHECK(last == 4);
  CHECK(log_id != 0);

  std::vector<Row> rows = ReadAll(db, 0, 0);
  // Transaction 1 is the file's settings.
  std::vector<std::string> kinds = Kinds(rows);
  REQUIRE(kinds.size() >= 8);
  std::vector<std::string> tail(kinds.end() - 8, kinds.end());
  CHECK(tail == std::vector<std::string>{"commit", "episode", "commit", "block", "commit",
                                          "episode", "episode", "commit"});
  REQUIRE(rows.size() >= 8);
  int64_t seq = 1;
  for (size_t i = 0; i < rows.size(); i++) {
    CHECK(rows[i].log_id == log_id);
    CHECK(rows[i].seq == seq);
    if (rows[i].kind == AGENTMEM_CHANGE_COMMIT) seq++;
  }
  CHECK(seq == last + 1);
  CHECK(rows.back().kind == AGENTMEM_CHANGE_COMMIT);
  CHECK(rows[0].kind == AGENTMEM_CHANGE_META);
  // The last transaction: two episodes in id order, then its commit.
  const size_t n = rows.size();
  CHECK(rows[n - 3].kind_name == "episode");
  CHECK(rows[n - 3].user_id == "alice");
  CHECK(rows[n - 2].user_id == "bob");
  CHECK(rows[n - 3].id + 1 == rows[n - 2].id);
  CHECK(rows[n - 3].commit_ts == rows[n - 1].commit_ts);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("each kind of record comes back with its fields") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("k.agentmem"));
  std::vector<float> v = {1, 0, 0, 0, 0, 0, 0, 0};
  int64_t ep = 0;
  REQUIRE(agentmem_remember(db, "alice", "s9", "assistant", "hello \"there\"", 1234,
                            "{\"channel\":\"chat\"}", v.data(), 8, &ep) == AGENTMEM_OK);
  REQUIRE(agentmem_block_set(db, "alice", "persona", "kind", 40, 2) == AGENTMEM_OK);
  REQUIRE(agentmem_predicate_declare(db, "lives_in", 1) == AGENTMEM_OK);
  int64_t f1 = 0, f2 = 0;
  REQUIRE(agentmem_fact_assert(db, "alice", "alice", "lives_in", "Porto", 0.5, 0, 0, &ep, 1,
                               &f1) == AGENTMEM_OK);
  REQUIRE(agentmem_fact_assert(db, "alice", "alice", "lives_in", "Lisbon", 0.9, 0, 0, nullptr, 0,
                               &f2) == AGENTMEM_OK);
  REQUIRE(agentmem_forget_block(db, "alice", "persona", 0, nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_forget_episode(db, ep, 0, nullptr) == AGENTMEM_OK);
  int64_t old = Remember(db, "carol", "long ago", 1000000);
  REQUIRE(agentmem_retention_set(db, 3600, 0) == AGENTMEM_OK);  // forgets `old` after its commit

  int64_t since = 1;  // past the file's settings
  std::vector<Row> rows = ReadAll(db, 0, since);
  auto find = [&](const char* kind, int64_t id) -> const Row* {
    for (const Row& r : rows) {
      if (r.kind_name == kind && r.id == id) return &r;
    }
    return nullptr;
  };
  const Row* e = find("episode", ep);
  REQUIRE(e != nullptr);
  CHECK(e->kind == AGENTMEM_CHANGE_EPISODE);
  CHECK(e->user_id == "alice");
  CHECK(Has(e->data, "\"session_id\":\"s9\""));
  CHECK(Has(e->data, "\"role\":\"assistant\""));
  CHECK(Has(e->data, "\"text\":\"hello \\\"there\\\"\""));
  CHECK(Has(e->data, "\"ts\":1234"));
  CHECK(Has(e->data, "\"metadata\":\"{\\\"channel\\\":\\\"chat\\\"}\""));
  CHECK(Has(e->data, "\"dim\":8"));
  CHECK(e->vector == v);

  const Row* b = nullptr;
  for (const Row& r : rows) {
    if (r.kind == AGENTMEM_CHANGE_BLOCK) b = &r;
  }
  REQUIRE(b != nullptr);
  CHECK(b->user_id == "alice");
  CHECK(Has(b->data, "\"name\":\"persona\""));
  CHECK(Has(b->data, "\"value\":\"kind\""));
  CHECK(Has(b->data, "\"limit\":40"));
  CHECK(Has(b->data, "\"pinned_order\":2"));
  CHECK(b->vector.empty());

  bool declared = false;
  for (const Row& r : rows) {
    if (r.kind == AGENTMEM_CHANGE_META && Has(r.data, "\"key\":\"fact.single_valued.lives_in\"")) {
      declared = Has(r.data, "\"value\":\"1\"");
    }
  }
  CHECK(declared);

  // The first fact, new; then its version that the second one supersedes.
  std::vector<const Row*> first;
  for (const Row& r : rows) {
    if (r.kind == AGENTMEM_CHANGE_FACT && r.id == f1) first.push_back(&r);
  }
  REQUIRE(first.size() == 2);
  CHECK(Has(first[0]->data, "\"new\":true"));
  CHECK(Has(first[0]->data, "\"object\":\"Porto\""));
  CHECK(Has(first[0]->data, "\"source_episode_ids\":[" + std::to_string(ep) + "]"));
  CHECK(Has(first[0]->data, "\"expired_at\":9223372036854775807"));
  CHECK(Has(first[1]->data, "\"new\":false"));
  CHECK(!Has(first[1]->data, "\"expired_at\":9223372036854775807"));
  CHECK(first[0]->seq < first[1]->seq);
  const Row* second = find("fact", f2);
  REQUIRE(second != nullptr);
  CHECK(Has(second->data, "\"object\":\"Lisbon\""));
  CHECK(second->seq == first[1]->seq);

  const Row* fb = nullptr;
  for (const Row& r : rows) {
    if (r.kind == AGENTMEM_CHANGE_FORGET && Has(r.data, "\"scope\":\"block\"")) fb = &r;
  }
  REQUIRE(fb != nullptr);
  CHECK(fb->user_id == "alice");
  CHECK(Has(fb->data, "\"name\":\"persona\""));
  const Row* fe = find("forget", ep);
  REQUIRE(fe != nullptr);
  CHECK(Has(fe->data, "\"scope\":\"episode\""));

  const Row* ret = nullptr;
  for (const Row& r : rows) {
    if (r.kind == AGENTMEM_CHANGE_RETENTION) ret = &r;
  }
  REQUIRE(ret != nullptr);
  CHECK(Has(ret->data, "\"scope\":\"retention\""));
  CHECK(ret->user_id.empty());
  CHECK(ret->seq > find("episode", old)->seq);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("changes since a commit in the middle list only the later commits") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("m.agentmem"));
  for (int i = 0; i < 6; i++) Remember(db, "alice", ("turn " + std::to_string(i)).c_str());
  std::vector<Row> all = ReadAll(db, 0, 0);
  for (int64_t since : {1, 3, 6}) {
    CAPTURE(since);
    std::vector<Row> rows = ReadAll(db, 0, since);
    std::vector<Row> expect;
    for (const Row& r : all) {
      if (r.seq > since) expect.push_back(r);
    }
    REQUIRE(rows.size() == expect.size());
    for (size_t i = 0; i < rows.size(); i++) {
      CHECK(rows[i].seq == expect[i].seq);
      CHECK(rows[i].data == expect[i].data);
    }
    CHECK(rows.front().seq == since + 1);
  }
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("since at the last commit lists nothing and since beyond it is NOTFOUND_CHANGES") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("e.agentmem"));
  Remember(db, "alice", "one");
  uint64_t log_id = 0;
  int64_t last = 0;
  Head(db, &log_id, &last);
  CHECK(ReadAll(db, log_id, last).empty());
  int rc = 0;
  CHECK(Read(db, log_id, last + 1, &rc).empty());
  CHECK(rc == AGENTMEM_NOTFOUND_CHANGES);
  CHECK((rc & 0xff) == AGENTMEM_NOTFOUND);
  std::string msg = agentmem_errmsg(db);
  CHECK(Has(msg, "commits 1 to " + std::to_string(last)));
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(log_id));
  CHECK(Has(msg, hex));
  // Another log's position is not in this file either.
  CHECK(Read(db, log_id ^ 1, 0, &rc).empty());
  CHECK(rc == AGENTMEM_NOTFOUND_CHANGES);
  CHECK(Read(db, 0, -1, &rc).empty());
  CHECK(rc == AGENTMEM_RANGE);
  agentmem_cursor* cur = nullptr;
  CHECK(agentmem_changes_since(db, 0, 0, nullptr) == AGENTMEM_MISUSE);
  CHECK(agentmem_changes_since(nullptr, 0, 0, &cur) == AGENTMEM_MISUSE);
  CHECK(agentmem_cursor_change(nullptr) == nullptr);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("the feed reads the same after the file is closed and reopened") {
  TempDir dir;
  const std::string path = dir.File("r.agentmem");
  agentmem_db* db = Open(path);
  Remember(db, "alice", "before reopen");
  REQUIRE(agentmem_block_set(db, "bob", "notes", "x", 0, -1) == AGENTMEM_OK);
  std::vector<Row> before = ReadAll(db, 0, 0);
  uint64_t log_id = 0;
  int64_t last = 0;
  Head(db, &log_id, &last);
  CHECK(agentmem_close(db) == AGENTMEM_OK);

  db = Open(path, nullptr);
  std::vector<Row> after = ReadAll(db, log_id, 0);
  REQUIRE(after.size() == before.size());
  for (size_t i = 0; i < after.size(); i++) {
    CHECK(after[i].seq == before[i].seq);
    CHECK(after[i].kind == before[i].kind);
    CHECK(after[i].data == before[i].data);
  }
  Remember(db, "alice", "after reopen");
  std::vector<Row> more = ReadAll(db, log_id, last);
  REQUIRE(more.size() == 2);
  CHECK(Has(more[0].data, "after reopen"));
  CHECK(more[1].kind == AGENTMEM_CHANGE_COMMIT);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("a checkpoint is a commit row alone and the feed reads through it") {
  TempDir dir;
  const std::string path = dir.File("c.agentmem");
  agentmem_db* db = Open(path, "vector_dim=8&checkpoint_bytes=1");
  Remember(db, "alice", "before the checkpoint");
  CHECK(agentmem_close(db) == AGENTMEM_OK);  // writes a checkpoint
  // Opened through the checkpoint: the log before it is not scanned by the
  // open, and the feed still reads it.
  db = Open(path, "checkpoint_bytes=0");
  Remember(db, "alice", "after the checkpoint");
  std::vector<Row> rows = ReadAll(db, 0, 0);
  std::vector<int64_t> episodes;
  int checkpoints = 0;
  for (const Row& r : rows) {
    if (r.kind == AGENTMEM_CHANGE_EPISODE) episodes.push_back(r.id);
    if (Has(r.data, "\"checkpoint\":true")) {
      checkpoints++;
      CHECK(r.kind == AGENTMEM_CHANGE_COMMIT);
    }
  }
  CHECK(episodes == std::vector<int64_t>{1, 2});
  CHECK(checkpoints == 1);
  // A checkpoint's transaction holds nothing else.
  for (size_t i = 1; i < rows.size(); i++) {
    if (Has(rows[i].data, "\"checkpoint\":true")) CHECK(rows[i - 1].kind == AGENTMEM_CHANGE_COMMIT);
  }
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("after VACUUM the old position is NOTFOUND_CHANGES and the new log holds the live records") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("v.agentmem"));
  Remember(db, "alice", "keep this turn");
  Remember(db, "bob", "bob says something private");
  REQUIRE(agentmem_block_set(db, "alice", "profile", "likes tea", 0, -1) == AGENTMEM_OK);
  REQUIRE(agentmem_forget(db, "bob", nullptr, 0, 0, nullptr) == AGENTMEM_OK);
  uint64_t old_log = 0;
  int64_t old_seq = 0;
  Head(db, &old_log, &old_seq);
  REQUIRE(agentmem_vacuum(db, nullptr) == AGENTMEM_OK);

  uint64_t new_log = 0;
  int64_t new_seq = 0;
  Head(db, &new_log, &new_seq);
  CHECK(new_log != old_log);
  int rc = 0;
  CHECK(Read(db, old_log, old_seq, &rc).empty());
  CHECK(rc == AGENTMEM_NOTFOUND_CHANGES);
  CHECK(Has(agentmem_errmsg(db), "read its changes from 0"));

  std::vector<Row> rows = ReadAll(db, new_log, 0);
  int episodes = 0, blocks = 0;
  for (const Row& r : rows) {
    CHECK(r.log_id == new_log);
    CHECK(!Has(r.data, "private"));
    CHECK(r.user_id != "bob");
    if (r.kind == AGENTMEM_CHANGE_EPISODE) episodes++;
    if (r.kind == AGENTMEM_CHANGE_BLOCK) blocks++;
  }
  CHECK(episodes == 1);
  CHECK(blocks == 1);
  CHECK(rows.back().seq == new_seq);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("a damaged page in the log is reported naming it, not skipped") {
  TempDir dir;
  const std::string path = dir.File("d.agentmem");
  agentmem_db* db = Open(path);
  Remember(db, "alice", "an ordinary turn");
  Remember(db, "alice", "the turn whose page gets damaged");
  Remember(db, "alice", "a later turn");
  // Damage the page of the second episode under the open handle (pages are
  // never cached by the feed: it reads the file).
  std::string bytes = ReadFileBytes(path);
  const size_t at = bytes.find("whose page gets damaged");
  REQUIRE(at != std::string::npos);
  bytes[at] ^= 0x20;
  WriteFileBytes(path, bytes);

  for (int64_t since : {0, 2, 3}) {
    CAPTURE(since);
    int rc = 0;
    std::vector<Row> rows = Read(db, 0, since, &rc);
    CHECK(rc == AGENTMEM_CORRUPT_CHECKSUM);
    CHECK(Has(agentmem_errmsg(db), "page "));
    CHECK(Has(agentmem_errmsg(db), "checksum mismatch"));
    for (const Row& r : rows) CHECK(r.seq <= 2);  // nothing after the damage
  }
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("a feed sees another handle's commits from its next open, and its cursor keeps its snapshot") {
  TempDir dir;
  const std::string path = dir.File("t.agentmem");
  agentmem_db* a = Open(path);
  agentmem_db* b = Open(path, nullptr);
  Remember(a, "alice", "from a");
  uint64_t log_id = 0;
  int64_t last = 0;
  Head(b, &log_id, &last);
  std::vector<Row> rows = ReadAll(b, log_id, 0);  // b's feed reads to the end
  CHECK(rows.back().seq == last);

  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_changes_since(b, log_id, last, &cur) == AGENTMEM_OK);
  Remember(a, "alice", "from a, later");
  CHECK(agentmem_cursor_step(cur) == AGENTMEM_DONE);  // opened before the commit
  CHECK(agentmem_cursor_close(cur) == AGENTMEM_OK);

  rows = ReadAll(b, log_id, last);  // starts where b's last feed ended
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].seq == last + 1);
  CHECK(Has(rows[0].data, "from a, later"));
  CHECK(agentmem_close(b) == AGENTMEM_OK);
  CHECK(agentmem_close(a) == AGENTMEM_OK);
}

TEST_CASE("a handle with an open feed cursor refuses to close, and this handle's VACUUM ends the feed") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("x.agentmem"));
  Remember(db, "alice", "one");
  Remember(db, "alice", "two");
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_changes_since(db, 0, 0, &cur) == AGENTMEM_OK);
  CHECK(agentmem_close(db) == AGENTMEM_BUSY);
  REQUIRE(agentmem_cursor_step(cur) == AGENTMEM_ROW);
  REQUIRE(agentmem_vacuum(db, nullptr) == AGENTMEM_OK);
  int rc = AGENTMEM_ROW;
  while (rc == AGENTMEM_ROW) rc = agentmem_cursor_step(cur);
  // The rows of the transaction read before the VACUUM may still come; then
  // the feed stops instead of reading a file that is gone.
  CHECK(rc == AGENTMEM_MISUSE);
  CHECK(Has(agentmem_errmsg(db), "replaced"));
  CHECK(agentmem_cursor_close(cur) == AGENTMEM_OK);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("polling with the last commit seen reads each new commit once, facts' versions told apart") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("p.agentmem"));
  REQUIRE(agentmem_predicate_declare(db, "mood", 1) == AGENTMEM_OK);
  uint64_t log_id = 0;
  int64_t seen = 0;
  Head(db, &log_id, &seen);
  ReadAll(db, log_id, 0);
  CHECK(ReadAll(db, log_id, seen).empty());  // nothing new: read from the end
  int64_t fact = 0;
  REQUIRE(agentmem_fact_assert(db, "ann", "ann", "mood", "calm", 1, 0, 0, nullptr, 0, &fact) ==
          AGENTMEM_OK);
  std::vector<Row> rows = ReadAll(db, log_id, seen);
  REQUIRE(rows.size() == 2);
  CHECK(Has(rows[0].data, "\"new\":true"));
  seen = rows.back().seq;
  CHECK(ReadAll(db, log_id, seen).empty());
  REQUIRE(agentmem_fact_assert(db, "ann", "ann", "mood", "happy", 1, 0, 0, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  rows = ReadAll(db, log_id, seen);
  REQUIRE(!rows.empty());
  CHECK(rows.front().seq == seen + 1);
  int versions = 0, news = 0;
  for (const Row& r : rows) {
    if (r.kind != AGENTMEM_CHANGE_FACT) continue;
    if (r.id == fact) {
      versions++;
      CHECK(Has(r.data, "\"new\":false"));
    } else {
      news++;
      CHECK(Has(r.data, "\"new\":true"));
    }
  }
  CHECK(versions == 1);
  CHECK(news >= 1);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

// tests/engine/savepoint_test.cc -- engine::Database savepoints: SAVEPOINT,
// RELEASE and ROLLBACK TO on the open transaction's pending writes.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/memory/database.h"
#include "tests/util/seed.h"

using agentmem::Status;
using agentmem::engine::Database;
using agentmem::engine::Options;
using agentmem::engine::Stats;
using agentmem::format::BlockRecord;
using agentmem::format::EpisodeRecord;
using agentmem::format::FactRecord;
using agentmem::format::ForgetKind;
using agentmem::format::ForgetRecord;

namespace {

// (Fields are copied from these strings rather than set from literals: GCC 12
// -Wrestrict false positive.)
const std::string kUser = "u", kSession = "s", kRole = "user", kSubject = "ann";

std::unique_ptr<Database> OpenMem(agentmem::engine::Env* env) {
  Options opts;
  opts.env = env;
  std::unique_ptr<Database> db;
  Status s = Database::Open("db", opts, &db);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return db;
}

EpisodeRecord Ep(const std::string& text) {
  EpisodeRecord r;
  r.user_id = kUser;
  r.session_id = kSession;
  r.role = kRole;
  r.text = text;
  return r;
}

BlockRecord Block(const std::string& name, const std::string& value) {
  BlockRecord b;
  b.user_id = kUser;
  b.name = name;
  b.value = value;
  return b;
}

FactRecord Fact(const std::string& predicate, const std::string& object, int64_t valid_from = 0) {
  FactRecord f;
  f.user_id = kUser;
  f.subject = kSubject;
  f.predicate = predicate;
  f.object = object;
  f.valid_from = valid_from;
  return f;
}

uint64_t Remember(Database* db, const std::string& text) {
  uint64_t id = 0;
  Status s = db->Remember(Ep(text), &id);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return id;
}

std::vector<std::string> Texts(Database* db) {
  std::vector<uint64_t> ids;
  REQUIRE(db->ListEpisodeIds("u", nullptr, &ids).ok());
  std::vector<std::string> out;
  for (uint64_t id : ids) {
    EpisodeRecord r;
    REQUIRE(db->GetEpisode(id, &r).ok());
    out.push_back(r.text);
  }
  return out;
}

// The current facts of ann for `predicate`, as "object" strings, sorted.
std::vector<std::string> Current(Database* db, const std::string& predicate) {
  agentmem::engine::FactQuery q;
  q.user_id = "u";
  q.predicate = predicate;
  q.all_versions = true;
  std::vector<FactRecord> all;
  REQUIRE(db->QueryFacts(q, &all).ok());
  std::vector<std::string> out;
  for (const FactRecord& f : all) {
    if (f.expired_at == agentmem::format::kForever) out.push_back(f.object);
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t FactRows(Database* db, const std::string& predicate) {
  agentmem::engine::FactQuery q;
  q.user_id = "u";
  q.predicate = predicate;
  q.all_versions = true;
  std::vector<FactRecord> all;
  REQUIRE(db->QueryFacts(q, &all).ok());
  return all.size();
}

uint64_t Commits(Database* db) {
  Stats st;
  REQUIRE(db->GetStats(&st).ok());
  return st.commits;
}

void CheckSound(Database* db) {
  std::vector<std::string> problems;
  REQUIRE(db->Check(&problems).ok());
  for (const std::string& p : problems) FAIL(p);
  CHECK(problems.empty());
}

}  // namespace

TEST_CASE("rollback to a savepoint drops the writes after it and keeps those before") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  const uint64_t c0 = Commits(db.get());
  REQUIRE(db->Begin().ok());
  Remember(db.get(), "kept");
  REQUIRE(db->SetBlock(Block("kept", "1")).ok());
  REQUIRE(db->AssertFact(Fact("likes", "tea"), nullptr).ok());
  REQUIRE(db->Savepoint("sp").ok());
  Remember(db.get(), "dropped");
  REQUIRE(db->SetBlock(Block("dropped", "2")).ok());
  REQUIRE(db->AssertFact(Fact("likes", "coffee"), nullptr).ok());
  REQUIRE(db->DeclarePredicate("lives_in", true).ok());
  REQUIRE(db->SetRetention(3600, true).ok());
  CHECK(Texts(db.get()) == std::vector<std::string>{"kept", "dropped"});
  CHECK(db->IsSingleValued("lives_in"));
  REQUIRE(db->RollbackTo("sp").ok());
  CHECK(db->in_transaction());
  CHECK(Texts(db.get()) == std::vector<std::string>{"kept"});
  std::vector<BlockRecord> blocks;
  REQUIRE(db->ListBlocks("u", &blocks).ok());
  REQUIRE(blocks.size() == 1);
  CHECK(blocks[0].name == "kept");
  CHECK(Current(db.get(), "likes") == std::vector<std::string>{"tea"});
  CHECK_FALSE(db->IsSingleValued("lives_in"));
  int64_t max_age = -1;
  bool keep = true;
  db->Retention(&max_age, &keep);
  CHECK(max_age == 0);
  CHECK_FALSE(keep);
  // The savepoint stays open: writes after it can be dropped again.
  Remember(db.get(), "dropped too");
  REQUIRE(db->RollbackTo("sp").ok());
  REQUIRE(db->Commit().ok());
  CHECK(Commits(db.get()) == c0 + 1);
  CheckSound(db.get());
  db.reset();
  db = OpenMem(env.get());
  CHECK(Texts(db.get()) == std::vector<std::string>{"kept"});
  CHECK(Current(db.get(), "likes") == std::vector<std::string>{"tea"});
  CHECK(FactRows(db.get(), "likes") == 1);
  CheckSound(db.get());
}

// Ids are reused: a rollback to a savepoint gives the ids of the dropped
// records to the next writes, as a whole rollback does. They were never
// committed, so the committed counters never run behind a record.
TEST_CASE("ids after a rollback to a savepoint continue without reuse problems") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  Remember(db.get(), "one");
  REQUIRE(db->SetBlock(Block("b", "v1")).ok());
  uint64_t next_episode = 0, next_fact = 0, next_version = 0;
  REQUIRE(db->Begin().ok());
  CHECK(Remember(db.get(), "two") == 2);
  uint64_t fact = 0;
  REQUIRE(db->AssertFact(Fact("likes", "tea"), &fact).ok());
  CHECK(fact == 1);
  REQUIRE(db->SetBlock(Block("b", "v2")).ok());
  db->NextIds(&next_episode, &next_fact, &next_version);
  CHECK(next_episode == 3);
  CHECK(next_fact == 2);
  CHECK(next_version == 3);
  REQUIRE(db->Savepoint("sp").ok());
  CHECK(Remember(db.get(), "three") == 3);
  CHECK(Remember(db.get(), "four") == 4);
  REQUIRE(db->AssertFact(Fact("likes", "coffee"), &fact).ok());
  CHECK(fact == 2);
  REQUIRE(db->SetBlock(Block("b", "v3")).ok());
  REQUIRE(db->ReserveIds(100, 200, 300).ok());
  uint64_t e = 0, f = 0, v = 0;
  db->NextIds(&e, &f, &v);
  CHECK(e == 100);
  REQUIRE(db->RollbackTo("sp").ok());
  db->NextIds(&e, &f, &v);
  CHECK(e == next_episode);
  CHECK(f == next_fact);
  CHECK(v == next_version);
  CHECK(db->episode_id_limit() == 3);
  // The ids of the dropped records come again.
  CHECK(Remember(db.get(), "three again") == 3);
  REQUIRE(db->AssertFact(Fact("likes", "juice"), &fact).ok());
  CHECK(fact == 2);
  REQUIRE(db->SetBlock(Block("b", "v3 again")).ok());
  BlockRecord b;
  REQUIRE(db->GetBlock("u", "b", &b).ok());
  CHECK(b.version == 3);
  CHECK(b.value == "v3 again");
  REQUIRE(db->Commit().ok());
  CheckSound(db.get());
  db.reset();
  db = OpenMem(env.get());
  CheckSound(db.get());
  db->NextIds(&e, &f, &v);
  CHECK(e == 4);
  CHECK(f == 3);
  CHECK(v == 4);
  CHECK(Remember(db.get(), "four again") == 4);
  CHECK(Texts(db.get()) == std::vector<std::string>{"one", "two", "three again", "four again"});
  CheckSound(db.get());
}

TEST_CASE("a fact superseded after a savepoint is current again after rollback to it") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  REQUIRE(db->DeclarePredicate("works_at", true).ok());
  REQUIRE(db->DeclarePredicate("lives_in", true).ok());
  REQUIRE(db->AssertFact(Fact("works_at", "Acme", 10), nullptr).ok());  // committed
  REQUIRE(db->Begin().ok());
  uint64_t paris = 0;
  REQUIRE(db->AssertFact(Fact("lives_in", "Paris", 10), &paris).ok());  // pending
  REQUIRE(db->Savepoint("sp").ok());
  // Both are superseded: the committed one gets a pending expired version,
  // the pending one is expired in place.
  REQUIRE(db->AssertFact(Fact("works_at", "Beta", 20), nullptr).ok());
  REQUIRE(db->AssertFact(Fact("lives_in", "Rome", 20), nullptr).ok());
  CHECK(Current(db.get(), "works_at") == std::vector<std::string>{"Acme", "Beta"});  // Acme cut
  CHECK(Current(db.get(), "lives_in") == std::vector<std::string>{"Paris", "Rome"});
  CHECK(FactRows(db.get(), "lives_in") == 3);  // Paris expired, Paris [10, 20), Rome
  REQUIRE(db->RollbackTo("sp").ok());
  CHECK(Current(db.get(), "works_at") == std::vector<std::string>{"Acme"});
  CHECK(Current(db.get(), "lives_in") == std::vector<std::string>{"Paris"});
  CHECK(FactRows(db.get(), "works_at") == 1);
  CHECK(FactRows(db.get(), "lives_in") == 1);
  // A correction (`replaces`) after the savepoint is undone the same way.
  REQUIRE(db->Savepoint("fix").ok());
  uint64_t fixed = 0;
  REQUIRE(db->AssertFact(Fact("lives_in", "Lyon", 10), &fixed, paris).ok());
  CHECK(Current(db.get(), "lives_in") == std::vector<std::string>{"Lyon"});
  REQUIRE(db->RollbackTo("fix").ok());
  CHECK(Current(db.get(), "lives_in") == std::vector<std::string>{"Paris"});
  REQUIRE(db->Commit().ok());
  CheckSound(db.get());
  db.reset();
  db = OpenMem(env.get());
  CHECK(Current(db.get(), "works_at") == std::vector<std::string>{"Acme"});
  CHECK(Current(db.get(), "lives_in") == std::vector<std::string>{"Paris"});
  CHECK(FactRows(db.get(), "lives_in") == 1);
  CheckSound(db.get());
}

TEST_CASE("a block set after a savepoint reverts") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  REQUIRE(db->SetBlock(Block("persona", "v1")).ok());
  REQUIRE(db->Begin().ok());
  REQUIRE(db->SetBlock(Block("persona", "v2")).ok());
  REQUIRE(db->Savepoint("sp").ok());
  REQUIRE(db->SetBlock(Block("persona", "v3")).ok());
  REQUIRE(db->SetBlock(Block("other", "x")).ok());
  BlockRecord b;
  REQUIRE(db->GetBlock("u", "persona", &b).ok());
  CHECK(b.value == "v3");
  REQUIRE(db->RollbackTo("sp").ok());
  REQUIRE(db->GetBlock("u", "persona", &b).ok());
  CHECK(b.value == "v2");
  CHECK(db->GetBlock("u", "other", &b).primary() == agentmem::kNotFound);
  std::vector<BlockRecord> history;
  REQUIRE(db->ListBlockHistory("u", "persona", &history).ok());
  REQUIRE(history.size() == 2);
  CHECK(history[1].value == "v2");
  REQUIRE(db->Commit().ok());
  CheckSound(db.get());
  db.reset();
  db = OpenMem(env.get());
  REQUIRE(db->ListBlockHistory("u", "persona", &history).ok());
  REQUIRE(history.size() == 2);
  CHECK(history[0].version == 1);
  CHECK(history[1].version == 2);
  CHECK(history[1].value == "v2");
}

TEST_CASE("a forget after a savepoint is undone") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  Remember(db.get(), "one");
  Remember(db.get(), "two");
  Remember(db.get(), "three");
  REQUIRE(db->Begin().ok());
  ForgetRecord f;
  f.kind = ForgetKind::kEpisode;
  f.id = 1;
  REQUIRE(db->Forget(f, nullptr).ok());  // before the savepoint: kept
  REQUIRE(db->Savepoint("sp").ok());
  f.id = 2;
  REQUIRE(db->Forget(f, nullptr).ok());
  ForgetRecord all;
  all.kind = ForgetKind::kUser;
  all.user_id = "u";
  REQUIRE(db->Forget(all, nullptr).ok());
  REQUIRE(db->RollbackTo("sp").ok());
  REQUIRE(db->Commit().ok());
  CHECK(Texts(db.get()) == std::vector<std::string>{"two", "three"});
  CheckSound(db.get());
  db.reset();
  db = OpenMem(env.get());
  CHECK(Texts(db.get()) == std::vector<std::string>{"two", "three"});
}

TEST_CASE("release merges into the outer savepoint") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  REQUIRE(db->Begin().ok());
  REQUIRE(db->Savepoint("a").ok());
  Remember(db.get(), "in a");
  REQUIRE(db->Savepoint("b").ok());
  Remember(db.get(), "in b");
  REQUIRE(db->Savepoint("c").ok());
  Remember(db.get(), "in c");
  // Releasing b releases c with it; their writes stay, now a's.
  REQUIRE(db->Release("b").ok());
  CHECK(Texts(db.get()) == std::vector<std::string>{"in a", "in b", "in c"});
  CHECK(db->RollbackTo("c").primary() == agentmem::kNotFound);
  CHECK(db->Release("b").primary() == agentmem::kNotFound);
  CHECK(db->in_transaction());
  REQUIRE(db->RollbackTo("a").ok());
  CHECK(Texts(db.get()).empty());
  // Released writes commit with the transaction.
  Remember(db.get(), "kept");
  REQUIRE(db->Savepoint("d").ok());
  Remember(db.get(), "kept too");
  REQUIRE(db->Release("d").ok());
  REQUIRE(db->Release("a").ok());
  CHECK(db->in_transaction());  // a did not begin the transaction
  REQUIRE(db->Commit().ok());
  CHECK(Texts(db.get()) == std::vector<std::string>{"kept", "kept too"});
  CheckSound(db.get());
}

TEST_CASE("nested savepoints roll back in order") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  REQUIRE(db->Begin().ok());
  REQUIRE(db->Savepoint("a").ok());
  Remember(db.get(), "w1");
  REQUIRE(db->Savepoint("b").ok());
  Remember(db.get(), "w2");
  REQUIRE(db->Savepoint("c").ok());
  Remember(db.get(), "w3");
  REQUIRE(db->RollbackTo("c").ok());
  CHECK(Texts(db.get()) == std::vector<std::string>{"w1", "w2"});
  REQUIRE(db->RollbackTo("b").ok());
  CHECK(Texts(db.get()) == std::vector<std::string>{"w1"});
  // Rolling back to b released c; b itself stays.
  CHECK(db->RollbackTo("c").primary() == agentmem::kNotFound);
  Remember(db.get(), "w4");
  REQUIRE(db->RollbackTo("b").ok());
  CHECK(Texts(db.get()) == std::vector<std::string>{"w1"});
  // A repeated name means the newest savepoint of that name.
  REQUIRE(db->Savepoint("a").ok());
  Remember(db.get(), "w5");
  REQUIRE(db->RollbackTo("a").ok());
  CHECK(Texts(db.get()) == std::vector<std::string>{"w1"});
  REQUIRE(db->Release("a").ok());  // the inner a
  REQUIRE(db->RollbackTo("a").ok());  // the outer a
  CHECK(Texts(db.get()).empty());
  Remember(db.get(), "w6");
  REQUIRE(db->Commit().ok());
  CHECK(Texts(db.get()) == std::vector<std::string>{"w6"});
  CheckSound(db.get());
  // After the transaction no savepoint is left.
  REQUIRE(db->Begin().ok());
  CHECK(db->RollbackTo("a").primary() == agentmem::kNotFound);
  REQUIRE(db->Rollback().ok());
}

TEST_CASE("a savepoint outside a transaction begins one that its release commits") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  const uint64_t c0 = Commits(db.get());
  CHECK(db->RollbackTo("none").primary() == agentmem::kNotFound);
  CHECK(db->Release("none").primary() == agentmem::kNotFound);
  REQUIRE(db->Savepoint("outer").ok());
  CHECK(db->in_transaction());
  Remember(db.get(), "dropped");
  REQUIRE(db->RollbackTo("outer").ok());
  CHECK(db->in_transaction());  // ROLLBACK TO keeps the transaction
  Remember(db.get(), "one");
  REQUIRE(db->Savepoint("inner").ok());
  Remember(db.get(), "two");
  REQUIRE(db->Release("inner").ok());
  CHECK(db->in_transaction());
  CHECK(Commits(db.get()) == c0);
  REQUIRE(db->Release("outer").ok());
  CHECK_FALSE(db->in_transaction());
  CHECK(Commits(db.get()) == c0 + 1);
  CHECK(Texts(db.get()) == std::vector<std::string>{"one", "two"});
  // Begin inside such a transaction is refused like any nested Begin;
  // Rollback ends it with its savepoints.
  REQUIRE(db->Savepoint("s").ok());
  CHECK(db->Begin().primary() == agentmem::kMisuse);
  Remember(db.get(), "gone");
  REQUIRE(db->Rollback().ok());
  CHECK_FALSE(db->in_transaction());
  CHECK(db->Release("s").primary() == agentmem::kNotFound);
  CHECK(Texts(db.get()) == std::vector<std::string>{"one", "two"});
  CheckSound(db.get());
}

namespace {

// One write of a random program, kept to be written again.
struct Op {
  int kind = 0;  // 0 episode, 1 block, 2 fact, 3 forget, 4 declare, 5 reserve
  int64_t at = 0;
  int a = 0, b = 0;
  int code = 0;  // what it returned the first time
};

std::unique_ptr<Database> OpenClocked(agentmem::engine::Env* env, const int64_t* now) {
  Options opts;
  opts.env = env;
  opts.salt = 0x7361766570743031ULL;
  opts.clock = [now] { return *now; };
  std::unique_ptr<Database> db;
  Status s = Database::Open("db", opts, &db);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return db;
}

int Run(Database* db, const Op& op) {
  static const char* const kPredicates[] = {"lives_in", "likes", "works_at"};
  static const char* const kObjects[] = {"Oslo", "Rome", "tea", "Acme", "Lyon"};
  switch (op.kind) {
    case 0: return db->Remember(Ep("episode " + std::to_string(op.a)), nullptr).code();
    case 1:
      return db->SetBlock(Block("block" + std::to_string(op.a % 3), "v" + std::to_string(op.b)))
          .code();
    case 2: {
      FactRecord f = Fact(kPredicates[op.a % 3], kObjects[op.b % 5], 10 + (op.b % 4) * 10);
      // Now and then a correction of fact op.a (refused when it is not current).
      uint64_t replaces = op.b % 7 == 0 ? static_cast<uint64_t>(op.a % 12) : 0;
      return db->AssertFact(f, nullptr, replaces).code();
    }
    case 3: {
      ForgetRecord f;
      if (op.b % 2) {
        f.kind = ForgetKind::kEpisode;
        f.id = 1 + static_cast<uint64_t>(op.a % 20);
      } else {
        f.kind = ForgetKind::kBlock;
        f.user_id = kUser;
        f.name = "block" + std::to_string(op.a % 3);
      }
      return db->Forget(f, nullptr).code();
    }
    case 4: return db->DeclarePredicate(kPredicates[op.a % 3], op.b % 2 == 0).code();
    default: return db->ReserveIds(40 + op.a, 40 + op.b, 40).code();
  }
}

}  // namespace

TEST_CASE("a random program of savepoints leaves the same file as its kept writes written without them") {
  std::mt19937_64 rng(agentmem::test::Seed());
  for (int round = 0; round < 200; round++) {
    CAPTURE(round);
    auto env_a = agentmem::engine::NewMemEnv();
    auto env_b = agentmem::engine::NewMemEnv();
    int64_t now = 1'700'000'000'000'000;
    auto a = OpenClocked(env_a.get(), &now);
    auto b = OpenClocked(env_b.get(), &now);
    // The same committed start in both.
    std::vector<Op> start;
    for (int i = 0; i < 6; i++) start.push_back(Op{static_cast<int>(i % 3), 0, i, i * 3});
    start.push_back(Op{4, 0, 0, 0});  // lives_in is single-valued
    for (Op& op : start) {
      now += 1000;
      REQUIRE(Run(a.get(), op) == Run(b.get(), op));
    }
    REQUIRE(a->Begin().ok());
    std::vector<Op> kept;
    std::vector<std::pair<std::string, size_t>> marks;  // the model's savepoints
    const int steps = 20 + static_cast<int>(rng() % 60);
    for (int i = 0; i < steps; i++) {
      now += 1000;
      const int what = static_cast<int>(rng() % 16);
      const std::string name(1, static_cast<char>('a' + rng() % 3));
      auto find = [&] {
        for (size_t j = marks.size(); j-- > 0;) {
          if (marks[j].first == name) return j;
        }
        return marks.size();
      };
      if (what == 13) {
        REQUIRE(a->Savepoint(name).ok());
        marks.emplace_back(name, kept.size());
      } else if (what == 14) {
        const size_t j = find();
        Status s = a->Release(name);
        CHECK((j == marks.size() ? s.primary() == agentmem::kNotFound : s.ok()));
        if (j < marks.size()) marks.resize(j);
      } else if (what == 15) {
        const size_t j = find();
        Status s = a->RollbackTo(name);
        CHECK((j == marks.size() ? s.primary() == agentmem::kNotFound : s.ok()));
        if (j < marks.size()) {
          kept.resize(marks[j].second);
          marks.resize(j + 1);
        }
      } else {
        Op op;
        op.kind = what < 5 ? 0 : what < 7 ? 1 : what < 10 ? 2 : what < 11 ? 3 : what < 12 ? 4 : 5;
        if (op.kind == 5 && rng() % 4) op.kind = 0;  // reserved ids: rarely
        op.at = now;
        op.a = static_cast<int>(rng() % 1000);
        op.b = static_cast<int>(rng() % 1000);
        op.code = Run(a.get(), op);
        kept.push_back(op);
      }
    }
    now += 1000;
    const int64_t commit_at = now;
    REQUIRE(a->Commit().ok());
    REQUIRE(b->Begin().ok());
    for (const Op& op : kept) {
      now = op.at;
      CHECK(Run(b.get(), op) == op.code);
    }
    now = commit_at;
    REQUIRE(b->Commit().ok());
    CheckSound(a.get());
    CheckSound(b.get());
    a.reset();
    b.reset();
    // Written at the same times, the two files are the same bytes.
    std::unique_ptr<agentmem::engine::File> fa, fb;
    REQUIRE(env_a->Open("db", agentmem::engine::OpenMode{true}, &fa).ok());
    REQUIRE(env_b->Open("db", agentmem::engine::OpenMode{true}, &fb).ok());
    uint64_t size_a = 0, size_b = 0;
    REQUIRE(fa->Size(&size_a).ok());
    REQUIRE(fb->Size(&size_b).ok());
    std::string bytes_a, bytes_b;
    REQUIRE(fa->ReadAt(0, size_a, &bytes_a).ok());
    REQUIRE(fb->ReadAt(0, size_b, &bytes_b).ok());
    CHECK(size_a == size_b);
    CHECK(bytes_a == bytes_b);
  }
}

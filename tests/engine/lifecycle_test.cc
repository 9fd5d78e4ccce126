// tests/engine/lifecycle_test.cc -- memory lifecycle (engine/memory/lifecycle.cc):
// facts on two time axes with single-valued predicates, forgetting
// (visible at once to every handle, kept across reopen and checkpoints),
// VACUUM and PURGE (the file shrinks, nothing of the forgotten data remains,
// everything else is unchanged id for id, readers in other processes carry on).
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <cmath>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "engine/memory/task_thread.h"
#include "format/file_header.h"
#include "format/page.h"
#include "tests/util/fault_env.h"
#include "tests/util/open_helpers.h"
#include "tests/util/page_bytes.h"
#include "tests/util/temp_dir.h"

using agentmem::Status;
using agentmem::engine::Database;
using agentmem::engine::FactQuery;
using agentmem::engine::ForgetReceipt;
using agentmem::engine::Options;
using agentmem::engine::RecallHit;
using agentmem::engine::RecallMode;
using agentmem::engine::RecallQuery;
using agentmem::format::EpisodeRecord;
using agentmem::format::FactRecord;
using agentmem::format::ForgetKind;
using agentmem::format::ForgetRecord;
using agentmem::test::MustOpen;
using agentmem::test::TempDir;

namespace {

constexpr int64_t kYear = 365LL * 24 * 3600 * 1000000;
constexpr int64_t k2020 = 1577836800LL * 1000000;

void Ok(const Status& s) { REQUIRE_MESSAGE(s.ok(), s.ToString()); }

uint64_t Remember(Database* db, const std::string& user, const std::string& session,
                  const std::string& text, int64_t ts = 0) {
  EpisodeRecord r;
  r.user_id = user;
  r.session_id = session;
  r.role = "user";
  r.text = text;
  r.ts = ts;
  uint64_t id = 0;
  Ok(db->Remember(r, &id));
  return id;
}

uint64_t Assert(Database* db, const std::string& user, const std::string& s, const std::string& p,
                const std::string& o, int64_t valid_from, std::vector<uint64_t> sources = {}) {
  FactRecord f;
  f.user_id = user;
  f.subject = s;
  f.predicate = p;
  f.object = o;
  f.valid_from = valid_from;
  f.source_episode_ids = std::move(sources);
  uint64_t id = 0;
  Ok(db->AssertFact(f, &id));
  return id;
}

std::vector<std::string> Objects(Database* db, const std::string& user, int64_t valid_at,
                                 int64_t known_at, bool all = false) {
  FactQuery q;
  q.user_id = user;
  q.subject = "alice";
  q.predicate = "lives_in";
  q.valid_at = valid_at;
  q.known_at = known_at;
  q.all_versions = all;
  std::vector<FactRecord> facts;
  Ok(db->QueryFacts(q, &facts));
  std::vector<std::string> out;
  for (const FactRecord& f : facts) out.push_back(f.object);
  return out;
}

std::vector<uint64_t> RecallIds(Database* db, const std::string& user, const std::string& text,
                                RecallMode mode = RecallMode::kHybrid, size_t k = 10) {
  RecallQuery q;
  q.user_id = user;
  q.text = text;
  q.k = k;
  q.mode = mode;
  // Every vector neighbour counts: these tests are about what the indexes
  // hold, not about the embedder's relevance floor.
  q.min_similarity = -INFINITY;
  std::vector<RecallHit> hits;
  Ok(db->Recall(q, &hits, nullptr));
  std::vector<uint64_t> ids;
  for (const RecallHit& h : hits) ids.push_back(h.id);
  return ids;
}

std::vector<uint64_t> Ids(Database* db, const std::string& user) {
  std::vector<uint64_t> ids;
  Ok(db->ListEpisodeIds(user, nullptr, &ids));
  return ids;
}

ForgetRecord ForgetUser(const std::string& user) {
  ForgetRecord f;
  f.kind = ForgetKind::kUser;
  f.user_id = user;
  return f;
}

std::string Text(const std::string& user, int i) {
  return user + " remembers distinct thing number " + std::to_string(i) + " about topic " +
         std::to_string(i % 7) + (i % 3 ? " coffee" : " mountains");
}

}  // namespace

TEST_CASE("a single-valued predicate supersedes the old object and keeps it with its valid_to") {
  TempDir dir;
  agentmem::test::TestClock clock;
  Options o;
  o.clock = clock.Fn();
  auto db = MustOpen(dir.File("f.agentmem"), o);
  Ok(db->DeclarePredicate("lives_in", true));
  const int64_t moved = k2020 + 3 * kYear;
  const uint64_t tokyo = Assert(db.get(), "alice-user", "alice", "lives_in", "Tokyo", k2020);
  Assert(db.get(), "bob-user", "alice", "lives_in", "Paris", k2020);  // Bob's own memory
  const int64_t before_move_known = clock.now;
  clock.Tick();
  const uint64_t osaka = Assert(db.get(), "alice-user", "alice", "lives_in", "Osaka", moved);
  CHECK(osaka > tokyo);

  auto check = [&](Database* d) {
    // Current: Osaka. As of valid time before the move: Tokyo.
    CHECK(Objects(d, "alice-user", 0, 0) == std::vector<std::string>{"Osaka"});
    CHECK(Objects(d, "alice-user", k2020 + kYear, 0) == std::vector<std::string>{"Tokyo"});
    // As the file knew it before the move was recorded: Tokyo, open-ended.
    CHECK(Objects(d, "alice-user", moved + kYear, before_move_known) == std::vector<std::string>{"Tokyo"});
    // The Tokyo fact is kept: expired in transaction time, and again with its valid_to.
    FactQuery q;
    q.user_id = "alice-user";
    q.all_versions = true;
    std::vector<FactRecord> all;
    Ok(d->QueryFacts(q, &all));
    REQUIRE(all.size() == 3);
    CHECK(all[0].id == tokyo);
    CHECK(all[0].object == "Tokyo");
    CHECK(all[0].valid_to == agentmem::format::kForever);
    CHECK(all[0].expired_at == clock.now);
    bool closed = false;
    for (const FactRecord& f : all) {
      if (f.object == "Tokyo" && f.valid_to == moved && f.expired_at == agentmem::format::kForever) {
        closed = f.valid_from == k2020;
      }
    }
    CHECK(closed);
    // Bob's facts never appear in Alice's, and Bob's Alice still lives in Paris.
    for (const FactRecord& f : all) CHECK(f.object != "Paris");
    CHECK(Objects(d, "bob-user", 0, 0) == std::vector<std::string>{"Paris"});
  };
  check(db.get());
  Ok(db->Close());
  auto again = MustOpen(dir.File("f.agentmem"), o);
  check(again.get());
}

TEST_CASE("asserting a fact that is already current writes nothing and returns its id") {
  TempDir dir;
  auto db = MustOpen(dir.File("f.agentmem"), Options{});
  const uint64_t a = Assert(db.get(), "u", "alice", "likes", "tea", k2020);
  agentmem::engine::Stats before, after;
  Ok(db->GetStats(&before));
  CHECK(Assert(db.get(), "u", "alice", "likes", "tea", k2020 + kYear) == a);
  Ok(db->GetStats(&after));
  CHECK(after.commits == before.commits);
  // Not single-valued: a second object is a second current fact.
  Assert(db.get(), "u", "alice", "likes", "coffee", k2020);
  FactQuery q;
  q.user_id = "u";
  q.predicate = "likes";
  std::vector<FactRecord> facts;
  Ok(db->QueryFacts(q, &facts));
  CHECK(facts.size() == 2);
}

TEST_CASE("a fact superseded twice in one transaction keeps one version per id") {
  TempDir dir;
  auto db = MustOpen(dir.File("f.agentmem"), Options{});
  Ok(db->DeclarePredicate("lives_in", true));
  Ok(db->Begin());
  Assert(db.get(), "u", "alice", "lives_in", "Tokyo", k2020);
  Assert(db.get(), "u", "alice", "lives_in", "Osaka", k2020 + kYear);
  Assert(db.get(), "u", "alice", "lives_in", "Kyoto", k2020 + 2 * kYear);
  Ok(db->Commit());
  CHECK(Objects(db.get(), "u", 0, 0) == std::vector<std::string>{"Kyoto"});
  CHECK(Objects(db.get(), "u", k2020 + kYear + 1, 0) == std::vector<std::string>{"Osaka"});
  Ok(db->Close());
  auto again = MustOpen(dir.File("f.agentmem"), Options{});
  CHECK(Objects(again.get(), "u", k2020 + 1, 0) == std::vector<std::string>{"Tokyo"});
  std::vector<std::string> problems;
  Ok(again->Check(&problems));
  CHECK(problems.empty());
}

TEST_CASE("forgetting a user hides every record at once in this handle and in another") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  auto db = MustOpen(path, Options{});
  auto other = MustOpen(path, Options{});
  for (int i = 0; i < 30; i++) Remember(db.get(), i % 2 ? "bob" : "ann", "s1", Text(i % 2 ? "bob" : "ann", i));
  Assert(db.get(), "bob", "bob", "owns", "a red bicycle", k2020);
  agentmem::format::BlockRecord b;
  b.user_id = "bob";
  b.name = "persona";
  b.value = "Bob is a cyclist";
  Ok(db->SetBlock(b));
  CHECK(Ids(other.get(), "bob").size() == 15);
  const auto ann_before = RecallIds(other.get(), "ann", "coffee mountains");

  ForgetReceipt r;
  Ok(db->Forget(ForgetUser("bob"), &r));
  CHECK(r.episodes == 15);
  CHECK(r.facts == 1);
  CHECK(r.block_versions == 1);
  for (Database* d : {db.get(), other.get()}) {
    CHECK(Ids(d, "bob").empty());
    CHECK(RecallIds(d, "bob", "coffee").empty());
    CHECK(RecallIds(d, "bob", "coffee", RecallMode::kVector).empty());
    agentmem::format::BlockRecord got;
    CHECK(d->GetBlock("bob", "persona", &got).code() == agentmem::kNotFound);
    std::vector<FactRecord> facts;
    Ok(d->ListFacts("bob", nullptr, nullptr, &facts));
    CHECK(facts.empty());
    std::vector<std::string> users;
    Ok(d->ListUsers(&users));
    CHECK(users == std::vector<std::string>{"ann"});
    CHECK(RecallIds(d, "ann", "coffee mountains") == ann_before);
    EpisodeRecord e;
    CHECK(d->GetEpisode(2, &e).code() == agentmem::kNotFound);
  }
  // A new episode of Bob's gets a new id; the forgotten ones are not reused.
  CHECK(Remember(db.get(), "bob", "s2", "bob starts over") == 31);
}

TEST_CASE("forget by session, before a time and one episode; facts citing only forgotten episodes go") {
  TempDir dir;
  auto db = MustOpen(dir.File("f.agentmem"), Options{});
  std::vector<uint64_t> ids;
  for (int i = 0; i < 12; i++) {
    ids.push_back(Remember(db.get(), "u", "s" + std::to_string(i % 3), Text("u", i), k2020 + i * kYear));
  }
  const uint64_t cites_s0 = Assert(db.get(), "u", "u", "went", "to s0", k2020, {ids[0], ids[3]});
  const uint64_t cites_mixed = Assert(db.get(), "u", "u", "went", "to both", k2020, {ids[0], ids[1]});
  ForgetRecord f;
  f.kind = ForgetKind::kSession;
  f.user_id = "u";
  f.session_id = "s0";
  ForgetReceipt r;
  Ok(db->Forget(f, &r));
  CHECK(r.episodes == 4);
  CHECK(r.facts == 1);
  std::vector<FactRecord> facts;
  Ok(db->ListFacts("u", nullptr, nullptr, &facts));
  REQUIRE(facts.size() == 1);
  CHECK(facts[0].id == cites_mixed);
  CHECK(facts[0].id != cites_s0);

  f = ForgetRecord{};
  f.kind = ForgetKind::kBefore;
  f.user_id = "u";
  f.before = k2020 + 5 * kYear;  // ids[0..4], of which 0 and 3 are gone already
  Ok(db->Forget(f, &r));
  CHECK(r.episodes == 3);
  CHECK(r.facts == 1);  // cites_mixed: ids[0] and ids[1] are both gone now

  f = ForgetRecord{};
  f.kind = ForgetKind::kEpisode;
  f.id = ids[7];
  Ok(db->Forget(f, &r));
  CHECK(r.episodes == 1);
  std::vector<uint64_t> want = {ids[5], ids[8], ids[10], ids[11]};
  CHECK(Ids(db.get(), "u") == want);
  auto hits = RecallIds(db.get(), "u", "remembers distinct thing", RecallMode::kBm25, 20);
  std::sort(hits.begin(), hits.end());
  CHECK(hits == want);
}

TEST_CASE("forgotten records stay forgotten after reopen, from a checkpoint and from the log") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  Options o;
  o.checkpoint_bytes = 1;  // every close folds the log into a checkpoint
  {
    auto db = MustOpen(path, o);
    for (int i = 0; i < 40; i++) Remember(db.get(), i % 2 ? "bob" : "ann", "s", Text("x", i));
    Ok(db->Close());  // checkpoint 1: all 40
  }
  std::vector<uint64_t> ann, bob_after;
  {
    auto db = MustOpen(path, o);
    Ok(db->Forget(ForgetUser("bob"), nullptr));  // frozen BM25 documents removed (thawed)
    for (int i = 40; i < 44; i++) Remember(db.get(), "bob", "s", Text("bob", i));
    ann = RecallIds(db.get(), "ann", "distinct thing coffee");
    bob_after = Ids(db.get(), "bob");
    CHECK(bob_after.size() == 4);
    Ok(db->Close());  // checkpoint 2: with forgotten episodes that are graph nodes
  }
  for (uint64_t cb : {uint64_t{1}, uint64_t{0}}) {
    Options r = o;
    r.checkpoint_bytes = cb;
    auto db = MustOpen(path, r);
    CHECK(Ids(db.get(), "bob") == bob_after);
    CHECK(RecallIds(db.get(), "ann", "distinct thing coffee") == ann);
    auto vec = RecallIds(db.get(), "bob", "distinct thing coffee", RecallMode::kVector, 50);
    std::sort(vec.begin(), vec.end());
    CHECK(vec == bob_after);
    std::vector<std::string> problems;
    Ok(db->Check(&problems));
    CHECK(problems.empty());
    // A forget after the checkpoint, then a close (checkpoint 3) and a reopen.
    ForgetRecord f;
    f.kind = ForgetKind::kEpisode;
    f.id = bob_after.back();
    Ok(db->Forget(f, nullptr));
    bob_after.pop_back();
    Ok(db->Close());
  }
  auto db = MustOpen(path, o);
  CHECK(Ids(db.get(), "bob") == bob_after);
}

TEST_CASE("PURGE of a user shrinks the file, leaves none of its texts or vectors, and changes no other user's recall") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  Options o;
  o.checkpoint_bytes = 1;
  auto db = MustOpen(path, o);
  std::vector<std::string> bob_texts;
  std::vector<std::vector<float>> bob_vectors;
  for (int i = 0; i < 600; i++) {
    const bool bob = i % 3 == 0;
    std::string text = Text(bob ? "bob-zq" : (i % 3 == 1 ? "ann" : "cy"), i);
    uint64_t id = Remember(db.get(), bob ? "bob" : (i % 3 == 1 ? "ann" : "cy"), "s", text);
    if (bob) {
      EpisodeRecord e;
      Ok(db->GetEpisode(id, &e));
      bob_texts.push_back(text);
      bob_vectors.push_back(e.vector);
    }
  }
  Ok(db->Close());
  db = MustOpen(path, o);  // from a checkpoint: the graph and BM25 are mapped
  Assert(db.get(), "ann", "ann", "likes", "coffee", k2020);
  const char* queries[] = {"coffee", "mountains topic 3", "distinct thing number 41", "remembers"};
  std::vector<std::vector<uint64_t>> before;
  for (const char* q : queries) {
    for (const char* user : {"ann", "cy"}) {
      for (RecallMode m : {RecallMode::kHybrid, RecallMode::kBm25, RecallMode::kVector}) {
        before.push_back(RecallIds(db.get(), user, q, m));
      }
    }
  }
  const auto ann_ids = Ids(db.get(), "ann");
  const uint64_t size_before = agentmem::test::ReadFileBytes(path).size();

  ForgetReceipt r;
  Ok(db->Purge(ForgetUser("bob"), &r));
  CHECK(r.episodes == 200);
  CHECK(r.vacuumed);
  CHECK(r.needles == 400);  // 200 texts, 200 vectors
  CHECK(r.residue == 0);
  CHECK(r.bytes_after < r.bytes_before);
  const std::string bytes = agentmem::test::AllPageBytes(path);
  CHECK(bytes.size() > 0);
  CHECK(agentmem::test::ReadFileBytes(path).size() < size_before);
  for (const std::string& t : bob_texts) CHECK(bytes.find(t) == std::string::npos);
  for (const auto& v : bob_vectors) {
    std::string_view needle(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    CHECK(bytes.find(needle) == std::string::npos);
  }
  CHECK(bytes.find("bob-zq") == std::string::npos);
  // Other users: unchanged, id for id, in this handle and after reopen.
  for (int pass = 0; pass < 2; pass++) {
    size_t i = 0;
    for (const char* q : queries) {
      for (const char* user : {"ann", "cy"}) {
        for (RecallMode m : {RecallMode::kHybrid, RecallMode::kBm25, RecallMode::kVector}) {
          CHECK(RecallIds(db.get(), user, q, m) == before[i++]);
        }
      }
    }
    CHECK(Ids(db.get(), "ann") == ann_ids);
    CHECK(Ids(db.get(), "bob").empty());
    std::vector<std::string> problems;
    Ok(db->Check(&problems));
    CHECK(problems.empty());
    Ok(db->Close());
    db = MustOpen(path, o);
  }
  // Ids are never reused: the next episode comes after Bob's last one.
  CHECK(Remember(db.get(), "ann", "s", "after the purge") == 601);
}

TEST_CASE("VACUUM while another process reads in a loop: the reader never sees an error or a partial snapshot") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  {
    auto db = MustOpen(path, Options{});
    for (int t = 0; t < 5; t++) {
      Ok(db->Begin());
      for (int i = 0; i < 10; i++) Remember(db.get(), "u", "s", Text("u", t * 10 + i));
      Ok(db->Commit());
    }
  }
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The reader: every snapshot holds whole transactions of 10 and never
    // shrinks; it runs until the parent closes the pipe.
    close(pipefd[1]);
    std::unique_ptr<Database> db;
    Options ro;
    ro.read_only = true;
    if (!Database::Open(path, ro, &db).ok()) _exit(10);
    size_t last = 0;
    long reads = 0;
    for (;;) {
      std::vector<uint64_t> ids;
      Status s = db->ListEpisodeIds("u", nullptr, &ids);
      if (!s.ok()) _exit(11);
      if (ids.size() % 10 != 0 || ids.size() < last) _exit(12);
      for (size_t i = 0; i < ids.size(); i++) {
        if (ids[i] != i + 1) _exit(13);
      }
      RecallQuery q;
      q.user_id = "u";
      q.text = "coffee";
      std::vector<RecallHit> hits;
      if (!db->Recall(q, &hits, nullptr).ok() || hits.size() != std::min<size_t>(10, ids.size())) _exit(14);
      last = ids.size();
      reads++;
      char c;
      fd_set set;
      FD_ZERO(&set);
      FD_SET(pipefd[0], &set);
      timeval tv{0, 0};
      if (select(pipefd[0] + 1, &set, nullptr, nullptr, &tv) > 0 && read(pipefd[0], &c, 1) <= 0) break;
    }
    _exit(reads > 0 ? 0 : 15);
  }
  close(pipefd[0]);
  auto db = MustOpen(path, Options{});
  for (int round = 0; round < 8; round++) {
    Ok(db->Begin());
    for (int i = 0; i < 10; i++) Remember(db.get(), "u", "s", Text("u", 50 + round * 10 + i));
    Ok(db->Commit());
    ForgetReceipt r;
    Ok(db->Vacuum({}, &r));
    CHECK(r.vacuumed);
    usleep(20000);
  }
  close(pipefd[1]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(Ids(db.get(), "u").size() == 130);
}

TEST_CASE("an episode imported with its id keeps it; ids only increase, with gaps allowed") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  auto db = MustOpen(path, Options{});
  EpisodeRecord r;
  r.user_id = "u";
  r.text = "imported";
  r.id = 10;
  r.created_at = 12345;
  uint64_t id = 0;
  Ok(db->Remember(r, &id));
  CHECK(id == 10);
  r.id = 5;
  CHECK(db->Remember(r, &id).code() == agentmem::kConstraint);
  CHECK(Remember(db.get(), "u", "s", "next one") == 11);
  Ok(db->Close());
  db = MustOpen(path, Options{});
  EpisodeRecord got;
  Ok(db->GetEpisode(10, &got));
  CHECK(got.created_at == 12345);
  CHECK(Ids(db.get(), "u") == std::vector<uint64_t>{10, 11});
}

TEST_CASE("retention forgets old episodes at commit, at close and at VACUUM, keeping those a live fact cites") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  agentmem::test::TestClock clock;
  clock.now = k2020 + 10 * kYear;
  Options o;
  o.clock = clock.Fn();
  std::vector<uint64_t> ids;
  {
    auto db = MustOpen(path, o);
    for (int i = 0; i < 10; i++) ids.push_back(Remember(db.get(), i % 2 ? "a" : "b", "s", Text("x", i), k2020 + i * kYear));
    Assert(db.get(), "a", "a", "was", "there", k2020, {ids[1]});  // cites an old one of a's
    Ok(db->SetRetention(5 * 365LL * 24 * 3600, true));  // five years
    int64_t age = 0;
    bool keep = false;
    db->Retention(&age, &keep);
    CHECK(age == 5 * 365LL * 24 * 3600);
    CHECK(keep);
    // Applied at the commit that set it. Older than 2025: ids[0..4], but
    // ids[1] is cited.
    CHECK(Ids(db.get(), "a") == std::vector<uint64_t>{ids[1], ids[5], ids[7], ids[9]});
    Ok(db->Close());
  }
  auto db = MustOpen(path, o);
  CHECK(Ids(db.get(), "a") == std::vector<uint64_t>{ids[1], ids[5], ids[7], ids[9]});
  CHECK(Ids(db.get(), "b") == std::vector<uint64_t>{ids[6], ids[8]});
  // Two years later a VACUUM applies it again before copying.
  clock.now += 2 * kYear;
  ForgetReceipt r;
  Ok(db->Vacuum({}, &r));
  CHECK(Ids(db.get(), "a") == std::vector<uint64_t>{ids[1], ids[7], ids[9]});
  CHECK(Ids(db.get(), "b") == std::vector<uint64_t>{ids[8]});
  Ok(db->SetRetention(0, false));
  Ok(db->Close());
  db = MustOpen(path, o);
  CHECK(Ids(db.get(), "b") == std::vector<uint64_t>{ids[8]});
}

TEST_CASE("a close compacts the file once more episodes are forgotten than live, unless auto_vacuum is off") {
  TempDir dir;
  for (bool automatic : {true, false}) {
    CAPTURE(automatic);
    const std::string path = dir.File(automatic ? "on.agentmem" : "off.agentmem");
    Options o;
    o.sync = agentmem::engine::SyncMode::kNormal;
    o.auto_vacuum = automatic;
    // A sliding window: 1,200 episodes in, the oldest forgotten, three times over.
    uint64_t size_full = 0, size_last = 0;
    for (int round = 0; round < 3; round++) {
      auto db = MustOpen(path, o);
      Ok(db->Begin());
      for (int i = 0; i < 1200; i++) Remember(db.get(), "u", "r" + std::to_string(round), Text("u", round * 1200 + i));
      Ok(db->Commit());
      if (round > 0) {
        ForgetRecord f;
        f.kind = ForgetKind::kSession;
        f.user_id = "u";
        f.session_id = "r" + std::to_string(round - 1);
        Ok(db->Forget(f, nullptr));
      }
      Ok(db->Close());
      size_last = agentmem::test::ReadFileBytes(path).size();
      if (round == 0) size_full = size_last;
    }
    auto db = MustOpen(path, o);
    CHECK(Ids(db.get(), "u").size() == 1200);
    CHECK(Ids(db.get(), "u").front() == 2401);
    if (automatic) {
      CHECK(size_last < 2 * size_full);  // compacted at the third close
    } else {
      CHECK(size_last > 2 * size_full);  // every record is still there
    }
  }
}

TEST_CASE("a handle opened before a VACUUM writes into the new file, never the replaced one") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  auto a = MustOpen(path, Options{});
  auto b = MustOpen(path, Options{});
  for (int i = 0; i < 20; i++) Remember(a.get(), "u", "s", Text("u", i));
  CHECK(Ids(b.get(), "u").size() == 20);
  ForgetRecord f;
  f.kind = ForgetKind::kEpisode;
  f.id = 3;
  Ok(a->Forget(f, nullptr));
  ForgetReceipt r;
  Ok(a->Vacuum({}, &r));
  // b still has the old file open; its write must reach the new one.
  const uint64_t id = Remember(b.get(), "u", "s", "written by the other handle after the vacuum");
  CHECK(id == 21);
  Ok(b->Begin());
  Remember(b.get(), "u", "s", "and one in a transaction");
  Ok(b->Commit());
  for (Database* d : {a.get(), b.get()}) {
    auto ids = Ids(d, "u");
    CHECK(ids.size() == 21);
    CHECK(ids.back() == 22);
  }
  Ok(a->Close());
  Ok(b->Close());
  auto c = MustOpen(path, Options{});
  CHECK(Ids(c.get(), "u").size() == 21);
  std::vector<std::string> problems;
  Ok(c->Check(&problems));
  CHECK(problems.empty());
  // A transaction that began writing on the old file cannot commit into the new one.
  Ok(c->Begin());
  Remember(c.get(), "u", "s", "pending on the old file");
  Options quick;
  quick.busy_timeout_ms = 50;
  auto d = MustOpen(path, quick);
  // d cannot vacuum while c holds the lock (busy), so nothing is lost.
  CHECK(d->Vacuum({}, &r).primary() == agentmem::kBusy);
  Ok(c->Commit());
  CHECK(Ids(d.get(), "u").size() == 22);
}

TEST_CASE("a handle left on a replaced file does not compact it over the new one at close") {
  // Regression: A's close ran auto_vacuum on its stale, renamed-away file and
  // renamed the copy over the path, losing what was committed to the new file.
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  auto a = MustOpen(path, Options{});
  Ok(a->Begin());
  for (int i = 0; i < 1100; i++) Remember(a.get(), "x", "s", "x says " + std::to_string(i));
  for (int i = 0; i < 10; i++) Remember(a.get(), "y", "s", "y says " + std::to_string(i));
  Ok(a->Commit());
  Ok(a->Forget(ForgetUser("x"), nullptr));
  {
    Options no_auto;
    no_auto.auto_vacuum = false;
    auto b = MustOpen(path, no_auto);
    Ok(b->Vacuum({}, nullptr));
    Remember(b.get(), "y", "s", "y says eleven");
    Ok(b->Close());
  }
  Ok(a->Close());  // a never read again: its file is the old one
  auto c = MustOpen(path, Options{});
  CHECK(Ids(c.get(), "y").size() == 11);
}

TEST_CASE("a supersede never expires a fact before it was recorded, whatever the writers' clocks") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  agentmem::test::TestClock slow, fast;
  fast.now = slow.now + 1000000;
  Options os, of;
  os.clock = slow.Fn();
  of.clock = fast.Fn();
  auto a = MustOpen(path, os);
  auto b = MustOpen(path, of);
  Ok(a->DeclarePredicate("lives_in", true));
  Assert(b.get(), "u", "alice", "lives_in", "Osaka", k2020);  // recorded by the fast clock
  Assert(a.get(), "u", "alice", "lives_in", "Kyoto", k2020 + kYear);  // the slow clock supersedes it
  FactQuery q;
  q.user_id = "u";
  q.all_versions = true;
  std::vector<FactRecord> all;
  Ok(a->QueryFacts(q, &all));
  for (const FactRecord& f : all) CHECK(f.expired_at >= f.recorded_at);
  // Known as of the fast clock's now (the slow one has not reached it yet).
  CHECK(Objects(a.get(), "u", 0, fast.now) == std::vector<std::string>{"Kyoto"});
  Ok(a->Vacuum({}, nullptr));  // every record copies
  CHECK(Objects(a.get(), "u", 0, fast.now) == std::vector<std::string>{"Kyoto"});
}

TEST_CASE("retention never forgets facts, even those whose sources it forgets") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  agentmem::test::TestClock clock;
  Options o;
  o.clock = clock.Fn();
  {
    auto db = MustOpen(path, o);
    const uint64_t old = Remember(db.get(), "u", "s", "an old turn", clock.now - 2 * 3600LL * 1000000);
    Assert(db.get(), "u", "u", "said", "something old", k2020, {old});
    Ok(db->SetRetention(3600, false));
    Ok(db->Close());
  }
  auto db = MustOpen(path, o);
  CHECK(Ids(db.get(), "u").empty());
  std::vector<FactRecord> facts;
  Ok(db->ListFacts("u", nullptr, nullptr, &facts));
  CHECK(facts.size() == 1);
}

namespace {

struct stat StatOf(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st;
}

}  // namespace

TEST_CASE("VACUUM, PURGE and auto-vacuum keep the file's permissions, owner and group") {
  TempDir dir;
  // Only a privileged process may give a file away: then the owner is kept
  // too; otherwise the rewrite is owned by whoever runs it, as with SQLite.
  const bool root = ::geteuid() == 0;
  for (mode_t mode : {mode_t{0600}, mode_t{0640}, mode_t{0604}}) {
    CAPTURE(mode);
    const std::string path = dir.File("m" + std::to_string(mode) + ".agentmem");
    Options o;
    {
      auto db = MustOpen(path, o);
      Ok(db->Begin());
      for (int i = 0; i < 1002; i++) Remember(db.get(), i < 1001 ? "bob" : "ann", "s", Text("x", i));
      Ok(db->Commit());
      Ok(db->Close());
    }
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    if (root) REQUIRE(::chown(path.c_str(), 4321, 4322) == 0);
    auto check = [&](const char* after) {
      CAPTURE(after);
      const struct stat st = StatOf(path);
      CHECK((st.st_mode & 07777) == mode);
      if (root) {
        CHECK(st.st_uid == 4321u);
        CHECK(st.st_gid == 4322u);
      }
    };
    auto db = MustOpen(path, o);
    const agentmem::engine::FileId before = agentmem::engine::Env::Posix()->Identify(path);
    Ok(db->Vacuum({}, nullptr));
    CHECK(!(agentmem::engine::Env::Posix()->Identify(path) == before));  // a new file
    check("VACUUM");
    ForgetRecord one;
    one.kind = ForgetKind::kEpisode;
    one.id = 1;
    Ok(db->Purge(one, nullptr));
    check("PURGE");
    Ok(db->Forget(ForgetUser("bob"), nullptr));
    const agentmem::engine::FileId before_close = agentmem::engine::Env::Posix()->Identify(path);
    Ok(db->Close());  // 1,000 more forgotten, 1 live: compacted
    CHECK(!(agentmem::engine::Env::Posix()->Identify(path) == before_close));
    check("auto-vacuum");
  }
}

TEST_CASE("a fact's sources leave out the episodes forgotten since it was asserted") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  auto db = MustOpen(path, Options{});
  const uint64_t e1 = Remember(db.get(), "u", "s", "I moved to Osaka");
  const uint64_t e2 = Remember(db.get(), "u", "s", "Osaka is home now");
  const uint64_t fact = Assert(db.get(), "u", "u", "lives_in", "Osaka", k2020, {e1, e2});
  ForgetRecord f;
  f.kind = ForgetKind::kEpisode;
  f.id = e1;
  Ok(db->Forget(f, nullptr));
  auto sources = [](Database* d) {
    std::vector<FactRecord> facts;
    Ok(d->ListFacts("u", nullptr, nullptr, &facts));
    REQUIRE(facts.size() == 1);
    return facts[0].source_episode_ids;
  };
  CHECK(sources(db.get()) == std::vector<uint64_t>{e2});
  FactQuery q;
  q.user_id = "u";
  std::vector<FactRecord> current;
  Ok(db->QueryFacts(q, &current));
  REQUIRE(current.size() == 1);
  CHECK(current[0].id == fact);
  CHECK(current[0].source_episode_ids == std::vector<uint64_t>{e2});
  Ok(db->Close());
  db = MustOpen(path, Options{});
  CHECK(sources(db.get()) == std::vector<uint64_t>{e2});
  // Its last source forgotten, the fact goes with it.
  f.id = e2;
  Ok(db->Forget(f, nullptr));
  std::vector<FactRecord> none;
  Ok(db->ListFacts("u", nullptr, nullptr, &none));
  CHECK(none.empty());
}

TEST_CASE("a writer that stays open applies due retention at its commits, not only at close") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  agentmem::test::TestClock clock;
  clock.now = k2020;
  Options o;
  o.clock = clock.Fn();
  auto writer = MustOpen(path, o);
  auto reader = MustOpen(path, o);
  const int64_t hour = 3600LL * 1000000;
  Remember(writer.get(), "u", "s", "an old turn", clock.now - 2 * hour);
  const uint64_t fresh = Remember(writer.get(), "u", "s", "a fresh turn", clock.now);
  Ok(writer->SetRetention(3600, false));
  CHECK(Ids(reader.get(), "u") == std::vector<uint64_t>{fresh});
  // An episode remembered with an event time already past the policy goes at
  // its own commit.
  Remember(writer.get(), "u", "s", "imported from long ago", clock.now - 3 * hour);
  CHECK(Ids(reader.get(), "u") == std::vector<uint64_t>{fresh});
  // Two hours on, the next commit of any kind applies it to the fresh turn.
  clock.now += 2 * hour;
  const uint64_t later = Remember(writer.get(), "v", "s", "another user's turn", clock.now);
  CHECK(Ids(reader.get(), "u").empty());
  CHECK(Ids(reader.get(), "v") == std::vector<uint64_t>{later});
  // A forget's receipt counts only what the forget itself did.
  clock.now += 2 * hour;
  ForgetRecord f;
  f.kind = ForgetKind::kBlock;
  f.user_id = "v";
  f.name = "none";
  ForgetReceipt r;
  Ok(writer->Forget(f, &r));
  CHECK(r.episodes == 0);
  CHECK(Ids(reader.get(), "v").empty());
}

namespace {

// The POSIX Env, except that a rename kills the process: a VACUUM dies with
// its copy written and not yet in place.
class KillAtRenameEnv : public agentmem::engine::Env {
 public:
  Status Open(const std::string& path, agentmem::engine::OpenMode mode,
              std::unique_ptr<agentmem::engine::File>* out) override {
    return base_->Open(path, mode, out);
  }
  Status CreateAtomic(const std::string& path, std::string_view initial) override {
    return base_->CreateAtomic(path, initial);
  }
  bool Exists(const std::string& path) override { return base_->Exists(path); }
  Status Delete(const std::string& path) override { return base_->Delete(path); }
  Status Rename(const std::string&, const std::string&) override {
    ::raise(SIGKILL);
    return Status::OK();
  }
  agentmem::engine::FileId Identify(const std::string& path) override { return base_->Identify(path); }

 private:
  agentmem::engine::Env* base_ = agentmem::engine::Env::Posix();
};

}  // namespace

TEST_CASE("a copy left by a killed VACUUM goes at the next writable open, never while a writer holds the lock") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  const std::string copy = path + "-vacuum";
  {
    auto db = MustOpen(path, Options{});
    for (int i = 0; i < 20; i++) Remember(db.get(), "u", "s", Text("u", i));
    Ok(db->Close());
  }
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    KillAtRenameEnv env;
    Options o;
    o.env = &env;
    std::unique_ptr<Database> db;
    if (Database::Open(path, o, &db).ok()) db->Vacuum({}, nullptr).IgnoreError();
    ::_exit(3);  // the rename was not reached
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(::access(copy.c_str(), F_OK) == 0);
  CHECK(agentmem::test::ReadFileBytes(copy).size() > agentmem::format::kFirstPageOffset);

  Options ro;
  ro.read_only = true;
  MustOpen(path, ro)->Close().IgnoreError();
  CHECK(::access(copy.c_str(), F_OK) == 0);  // a reader removes nothing

  // The next writable open removes it.
  auto writer = MustOpen(path, Options{});
  CHECK(::access(copy.c_str(), F_OK) != 0);

  // While a writer holds the lock, a copy could be its VACUUM's, at work.
  Ok(writer->Begin());
  Remember(writer.get(), "u", "s", "written while the copy is there");
  {
    std::FILE* f = std::fopen(copy.c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fputs("a compaction being written", f);
    std::fclose(f);
  }
  MustOpen(path, Options{})->Close().IgnoreError();
  CHECK(::access(copy.c_str(), F_OK) == 0);
  Ok(writer->Commit());

  auto db = MustOpen(path, Options{});
  CHECK(::access(copy.c_str(), F_OK) != 0);
  CHECK(Ids(db.get(), "u").size() == 21);
}

TEST_CASE("a VACUUM that drops nothing, or a PURGE of one episode, never makes the file larger") {
  TempDir dir;
  // One large transaction (its graph delta holds no vectors), and many small
  // ones with checkpoints along the way.
  for (int layout = 0; layout < 2; layout++) {
    CAPTURE(layout);
    const std::string path = dir.File("g" + std::to_string(layout) + ".agentmem");
    Options o;
    if (layout == 1) o.checkpoint_bytes = 16 * 1024;
    {
      auto db = MustOpen(path, o);
      for (int t = 0; t < (layout == 0 ? 1 : 12); t++) {
        Ok(db->Begin());
        for (int i = 0; i < (layout == 0 ? 300 : 25); i++) Remember(db.get(), "u" + std::to_string(i % 3), "s", Text("u", t * 1000 + i));
        Ok(db->Commit());
      }
      Ok(db->Close());
    }
    auto size = [&] { return agentmem::test::ReadFileBytes(path).size(); };
    auto db = MustOpen(path, o);
    const auto ids = Ids(db.get(), "u1");
    for (int round = 0; round < 2; round++) {
      const size_t before = size();
      ForgetReceipt r;
      Ok(db->Vacuum({}, &r));
      CHECK(r.bytes_before == before);
      CHECK(size() <= before);
      CHECK(r.bytes_after == size());
    }
    const size_t before = size();
    ForgetRecord one;
    one.kind = ForgetKind::kEpisode;
    one.id = 5;
    Ok(db->Purge(one, nullptr));
    CHECK(size() <= before);
    std::vector<std::string> problems;
    Ok(db->Check(&problems));
    CHECK(problems.empty());
    Ok(db->Close());
    db = MustOpen(path, o);
    auto after = Ids(db.get(), "u1");
    CHECK(after.size() + 1 == ids.size());
    CHECK(RecallIds(db.get(), "u1", "distinct thing number 7", RecallMode::kVector).size() == 10);
  }
}

TEST_CASE("an episode forgotten in the transaction that remembers it is no context of the next") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  {
    auto db = MustOpen(path, Options{});
    Ok(db->Begin());
    const uint64_t first = Remember(db.get(), "u", "s", "the zeppelin landed at noon");
    Remember(db.get(), "u", "s", "and then we all went home");
    ForgetRecord f;
    f.kind = ForgetKind::kEpisode;
    f.id = first;
    Ok(db->Forget(f, nullptr));
    Ok(db->Commit());
    CHECK(RecallIds(db.get(), "u", "zeppelin", RecallMode::kBm25).empty());
    Ok(db->Close());
  }
  auto db = MustOpen(path, Options{});
  CHECK(RecallIds(db.get(), "u", "zeppelin", RecallMode::kBm25).empty());
  CHECK(RecallIds(db.get(), "u", "went home", RecallMode::kBm25).size() == 1);
}

namespace {

// The bytes of each page type in a file, and its two superblocks (an
// invalid one has generation 0).
struct FileLayout {
  std::map<int, uint64_t> bytes;  // page type -> bytes
  agentmem::format::Superblock sb[2];
};

FileLayout LayoutOf(const std::string& path) {
  namespace fmt = agentmem::format;
  const std::string raw = agentmem::test::ReadFileBytes(path);
  fmt::FileHeader h;
  REQUIRE(fmt::DecodeFileHeader(std::string_view(raw).substr(0, fmt::kFirstPageOffset), &h).ok());
  FileLayout out;
  for (int slot = 0; slot < 2; slot++) {
    if (!fmt::DecodeSuperblock(std::string_view(raw).substr(fmt::kSuperblockOffset[slot], fmt::kSuperblockSize),
                               h.salt, &out.sb[slot]).ok()) {
      out.sb[slot] = fmt::Superblock{};
    }
  }
  for (uint64_t pos = fmt::kFirstPageOffset; pos + fmt::kPageHeaderSize <= raw.size();) {
    fmt::PageHeader ph;
    if (!fmt::PeekPageHeader(std::string_view(raw).substr(pos, fmt::kPageHeaderSize), pos, h.salt, &ph).ok()) break;
    out.bytes[static_cast<int>(ph.type)] += fmt::PaddedPageSize(ph.length);
    pos += fmt::PaddedPageSize(ph.length);
  }
  return out;
}

constexpr int kGraphPage = static_cast<int>(agentmem::format::PageType::kGraph);
constexpr int kCheckpointPage = static_cast<int>(agentmem::format::PageType::kCheckpoint);

// Ids of the top-k of each of a few queries, in every mode.
std::vector<std::vector<uint64_t>> Answers(Database* db, const std::vector<std::string>& users,
                                           bool* graph_used = nullptr) {
  std::vector<std::vector<uint64_t>> out;
  for (const std::string& user : users) {
    for (int q = 0; q < 6; q++) {
      const std::string text = Text(user, q * 37);
      for (RecallMode mode : {RecallMode::kVector, RecallMode::kBm25, RecallMode::kHybrid}) {
        RecallQuery rq;
        rq.user_id = user;
        rq.text = text;
        rq.mode = mode;
        rq.min_similarity = -INFINITY;
        std::vector<RecallHit> hits;
        agentmem::engine::RecallPlan plan;
        Ok(db->Recall(rq, &hits, &plan));
        if (graph_used && plan.vector_path.find("hnsw") != std::string::npos) *graph_used = true;
        std::vector<uint64_t> ids;
        for (const RecallHit& h : hits) ids.push_back(h.id);
        out.push_back(ids);
      }
    }
  }
  return out;
}

// 300 episodes of users u0, u1 and u2 in six commits of 50.
// Rewrites both superblocks as a file's first superblock is, knowing no
// checkpoint: an open then scans every transaction from the first page.
void ForgetCheckpoint(const std::string& path) {
  namespace fmt = agentmem::format;
  std::string raw = agentmem::test::ReadFileBytes(path);
  fmt::FileHeader h;
  REQUIRE(fmt::DecodeFileHeader(std::string_view(raw).substr(0, fmt::kFirstPageOffset), &h).ok());
  for (int slot = 0; slot < 2; slot++) {
    fmt::Superblock sb;
    sb.generation = 100 + slot;
    sb.salt = h.salt;
    sb.durable_through = raw.size();
    raw.replace(fmt::kSuperblockOffset[slot], fmt::kSuperblockSize, fmt::EncodeSuperblock(sb));
  }
  agentmem::test::WriteFileBytes(path, raw);
}

void RememberInSixCommits(Database* db) {
  for (int t = 0; t < 6; t++) {
    Ok(db->Begin());
    for (int i = 0; i < 50; i++) Remember(db, "u" + std::to_string(i % 3), "s", Text("u", t * 100 + i));
    Ok(db->Commit());
  }
}

// `commits` commits of 1,000 episodes of user u: past kExactScanMax, so
// vector recall walks the graph. `sessions` > 1 spreads them over sessions.
void RememberThousands(Database* db, int commits, int sessions = 1) {
  for (int t = 0; t < commits; t++) {
    Ok(db->Begin());
    for (int i = 0; i < 1000; i++) {
      const std::string session = sessions > 1 ? "s" + std::to_string(i % sessions) : "s";
      Remember(db, "u", session, Text("u", t * 1000 + i));
    }
    Ok(db->Commit());
  }
}

// Three commits of `per_commit` episodes, dealt to users u0, u1 and u2 in
// turn, each user's over `sessions` sessions.
void RememberForThreeUsers(Database* db, int per_commit, int sessions) {
  for (int t = 0; t < 3; t++) {
    Ok(db->Begin());
    for (int i = 0; i < per_commit; i++) {
      const std::string user = "u" + std::to_string(i % 3);
      Remember(db, user, "s" + std::to_string(i % sessions), Text(user, t * per_commit + i));
    }
    Ok(db->Commit());
  }
}
}  // namespace

TEST_CASE("a VACUUM of a file with a checkpoint puts the graph in the copy's checkpoint only, and recall is unchanged") {
  TempDir dir;
  const std::string path = dir.File("v.agentmem");
  Options o;
  o.checkpoint_bytes = 64 * 1024;
  {
    auto db = MustOpen(path, o);
    RememberThousands(db.get(), 6);
    Ok(db->Close());
  }
  const FileLayout before = LayoutOf(path);
  REQUIRE(before.bytes.count(kCheckpointPage));
  REQUIRE(before.bytes.count(kGraphPage));
  auto db = MustOpen(path, o);
  bool graph_used = false;
  const auto answers = Answers(db.get(), {"u"}, &graph_used);
  CHECK(graph_used);
  ForgetReceipt r;
  Ok(db->Vacuum({}, &r));
  CHECK(r.bytes_after < r.bytes_before);
  const FileLayout after = LayoutOf(path);
  CHECK(after.bytes.count(kGraphPage) == 0);  // no delta: the checkpoint holds the graph
  CHECK(after.bytes.at(kCheckpointPage) > 0);
  // Both superblocks point at the checkpoint: neither leads a reader to a
  // scan that would find vectors without their graph.
  CHECK(after.sb[0].checkpoint != 0);
  CHECK(after.sb[0].checkpoint == after.sb[1].checkpoint);
  CHECK(after.sb[0].scan_from == after.sb[1].scan_from);
  // The graph was handed over as it was: the same answers, bit for bit.
  CHECK(Answers(db.get(), {"u"}) == answers);
  std::vector<std::string> problems;
  Ok(db->Check(&problems));
  CHECK(problems.empty());
  Ok(db->Close());
  db = MustOpen(path, o);
  CHECK(Answers(db.get(), {"u"}) == answers);
  // Later commits write their deltas on top of it, as usual.
  const uint64_t id = Remember(db.get(), "u", "s", "a brand new memory about sailing boats");
  Ok(db->Close());
  db = MustOpen(path, o);
  CHECK(RecallIds(db.get(), "u", "a brand new memory about sailing boats", RecallMode::kVector, 1) ==
        std::vector<uint64_t>{id});
}

namespace {

// The BM25 top-10 of a few queries, ids and scores, per user and over
// every user.
std::vector<std::pair<uint64_t, double>> Bm25Scores(Database* db, const std::vector<std::string>& users) {
  std::vector<std::pair<uint64_t, double>> out;
  for (size_t u = 0; u <= users.size(); u++) {
    for (int q = 0; q < 5; q++) {
      RecallQuery rq;
      rq.all_users = u == users.size();
      rq.user_id = rq.all_users ? "" : users[u];
      rq.text = q % 2 ? "coffee topic " + std::to_string(q) : "distinct thing number " + std::to_string(q * 41);
      rq.mode = RecallMode::kBm25;
      std::vector<RecallHit> hits;
      agentmem::engine::RecallPlan plan;
      Ok(db->Recall(rq, &hits, &plan));
      for (const RecallHit& h : hits) out.emplace_back(h.id, h.bm25_score);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("a VACUUM copies each episode's BM25 document as it was, context and forgets included: scores are unchanged from the checkpoint and from the log") {
  TempDir dir;
  const std::string path = dir.File("t.agentmem");
  Options o;
  o.checkpoint_bytes = 64 * 1024;
  const std::vector<std::string> users{"u0", "u1", "u2"};
  {
    auto db = MustOpen(path, o);
    RememberForThreeUsers(db.get(), 600, 5);
    Ok(db->Close());
  }
  auto db = MustOpen(path, o);
  // Forgotten episodes leave the context of the turns after them, which are
  // indexed again without them.
  for (uint64_t id : {40u, 41u, 700u, 1203u}) {
    ForgetRecord f;
    f.kind = ForgetKind::kEpisode;
    f.id = id;
    Ok(db->Forget(f, nullptr));
  }
  const auto scores = Bm25Scores(db.get(), users);
  REQUIRE(scores.size() > 100);
  ForgetReceipt r;
  Ok(db->Vacuum({}, &r));
  const FileLayout after = LayoutOf(path);
  CHECK(after.bytes.count(kGraphPage) == 0);
  CHECK(after.bytes.at(static_cast<int>(agentmem::format::PageType::kText)) > 0);
  CHECK(Bm25Scores(db.get(), users) == scores);
  std::vector<std::string> problems;
  Ok(db->Check(&problems));
  CHECK(problems.empty());
  Ok(db->Close());
  db = MustOpen(path, o);  // the indexes from the copy's checkpoint
  CHECK(Bm25Scores(db.get(), users) == scores);
  Ok(db->Close());
  db.reset();
  // Without the checkpoint every reader builds its indexes from the copy's
  // text records.
  ForgetCheckpoint(path);
  Options ro = o;
  ro.read_only = true;
  db = MustOpen(path, ro);
  CHECK(Bm25Scores(db.get(), users) == scores);
}

namespace {

// Every live record of `users`, as one string: episodes (text, times and
// vector), each user's persona and facts.
std::string Contents(Database* db, const std::vector<std::string>& users) {
  std::string out;
  for (const std::string& u : users) {
    for (uint64_t id : Ids(db, u)) {
      EpisodeRecord e;
      Ok(db->GetEpisode(id, &e));
      out += std::to_string(id) + " " + e.user_id + " " + e.session_id + " " + e.text + " " +
             std::to_string(e.ts) + " " + std::to_string(e.created_at) + " " +
             std::string(reinterpret_cast<const char*>(e.vector.data()), e.vector.size() * sizeof(float)) +
             "\n";
    }
    agentmem::format::BlockRecord b;
    Ok(db->GetBlock(u, "persona", &b));
    out += b.value + " " + std::to_string(b.version) + "\n";
    std::vector<FactRecord> facts;
    Ok(db->ListFacts(u, nullptr, nullptr, &facts));
    for (const FactRecord& f : facts) out += std::to_string(f.id) + " " + f.object + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("a VACUUM of several batches copies the same records whether the next batch is read on a helper thread or on the calling one") {
  TempDir dir;
  Options o;
  o.checkpoint_bytes = 64 * 1024;
  const std::vector<std::string> users{"u0", "u1", "u2"};
  const std::string first = dir.File("a.agentmem"), second = dir.File("b.agentmem");
  {
    auto db = MustOpen(first, o);
    RememberForThreeUsers(db.get(), 900, 4);
    for (const std::string& u : users) {
      agentmem::format::BlockRecord b;
      b.user_id = u;
      b.name = "persona";
      b.value = u + " likes long walks";
      Ok(db->SetBlock(b));
      Assert(db.get(), u, "alice", "lives_in", u + "ville", k2020);
    }
    ForgetRecord f;
    f.kind = ForgetKind::kEpisode;
    f.id = 17;
    Ok(db->Forget(f, nullptr));
    Ok(db->Close());
  }
  agentmem::test::WriteFileBytes(second, agentmem::test::ReadFileBytes(first));
  std::string contents;
  std::vector<std::pair<uint64_t, double>> scores;
  {
    auto db = MustOpen(first, o);
    contents = Contents(db.get(), users);
    scores = Bm25Scores(db.get(), users);
    REQUIRE(scores.size() > 100);
    ForgetReceipt r;
    Ok(db->Vacuum({}, &r));  // 2,699 live episodes: three batches
    CHECK(Contents(db.get(), users) == contents);
    CHECK(Bm25Scores(db.get(), users) == scores);
  }
#ifdef AGENTMEM_TEST_HOOKS
  agentmem::engine::TaskThread::SetThreadStartFailsForTest(true);
  {
    auto db = MustOpen(second, o);
    ForgetReceipt r;
    const Status s = db->Vacuum({}, &r);
    agentmem::engine::TaskThread::SetThreadStartFailsForTest(false);
    Ok(s);
    CHECK(Contents(db.get(), users) == contents);
    CHECK(Bm25Scores(db.get(), users) == scores);
  }
  agentmem::engine::TaskThread::SetThreadStartFailsForTest(false);
#endif
  for (const std::string& path : {first, second}) {
    auto db = MustOpen(path, o);
    CHECK(Contents(db.get(), users) == contents);
    CHECK(Bm25Scores(db.get(), users) == scores);
    std::vector<std::string> problems;
    Ok(db->Check(&problems));
    CHECK(problems.empty());
  }
}

TEST_CASE("a VACUUM of a file past checkpoint_bytes that has no checkpoint yet puts the graph in the copy's checkpoint") {
  TempDir dir;
  const std::string path = dir.File("n.agentmem");
  Options o;
  o.checkpoint_bytes = 1024 * 1024;
  auto db = MustOpen(path, o);
  RememberThousands(db.get(), 6);
  const FileLayout before = LayoutOf(path);
  REQUIRE(before.bytes.count(kCheckpointPage) == 0);  // a writer checkpoints at 16 x checkpoint_bytes
  REQUIRE(before.bytes.count(kGraphPage));
  REQUIRE(agentmem::test::ReadFileBytes(path).size() >= o.checkpoint_bytes);
  bool graph_used = false;
  const auto answers = Answers(db.get(), {"u"}, &graph_used);
  CHECK(graph_used);
  Ok(db->Vacuum({}, nullptr));
  const FileLayout after = LayoutOf(path);
  CHECK(after.bytes.count(kGraphPage) == 0);
  CHECK(after.sb[0].checkpoint != 0);
  CHECK(after.sb[0].checkpoint == after.sb[1].checkpoint);
  CHECK(Answers(db.get(), {"u"}) == answers);  // the same graph, handed over
  Ok(db->Close());
  db = MustOpen(path, o);
  CHECK(Answers(db.get(), {"u"}) == answers);
}

TEST_CASE("a PURGE of a few episodes keeps the graph less their nodes, in the copy's checkpoint only") {
  TempDir dir;
  const std::string path = dir.File("p.agentmem");
  Options o;
  o.checkpoint_bytes = 64 * 1024;
  {
    auto db = MustOpen(path, o);
    RememberThousands(db.get(), 6, 40);
    Ok(db->Close());
  }
  auto db = MustOpen(path, o);
  std::vector<uint64_t> session;
  const std::string s7 = "s7";
  Ok(db->ListEpisodeIds("u", &s7, &session));
  REQUIRE(session.size() == 150);  // 2.5 % of the episodes
  ForgetRecord f;
  f.kind = ForgetKind::kSession;
  f.user_id = "u";
  f.session_id = "s7";
  Ok(db->Forget(f, nullptr));
  // What the file answered before the copy: its graph, the forgotten nodes
  // passed over by the walk.
  bool graph_used = false;
  const auto before = Answers(db.get(), {"u"}, &graph_used);
  CHECK(graph_used);
  ForgetReceipt r;
  Ok(db->Vacuum({}, &r));
  const FileLayout after = LayoutOf(path);
  CHECK(after.bytes.count(kGraphPage) == 0);
  CHECK(after.sb[0].checkpoint != 0);
  CHECK(after.sb[0].checkpoint == after.sb[1].checkpoint);
  graph_used = false;
  const auto answers = Answers(db.get(), {"u"}, &graph_used);
  CHECK(graph_used);
  // No forgotten episode is a hit, and the answers are nearly those before.
  size_t same = 0, total = 0;
  for (size_t i = 0; i < answers.size(); i++) {
    for (uint64_t id : answers[i]) {
      CHECK_FALSE(std::binary_search(session.begin(), session.end(), id));
      same += std::find(before[i].begin(), before[i].end(), id) != before[i].end();
      total++;
    }
  }
  CHECK(total > 0);
  CHECK(same >= total * 9 / 10);
  std::vector<std::string> problems;
  Ok(db->Check(&problems));
  CHECK(problems.empty());
  Ok(db->Close());
  db = MustOpen(path, o);
  CHECK(Answers(db.get(), {"u"}) == answers);  // the checkpoint holds that graph
  const uint64_t id = Remember(db.get(), "u", "s", "a brand new memory about sailing boats");
  CHECK(RecallIds(db.get(), "u", "a brand new memory about sailing boats", RecallMode::kVector, 1) ==
        std::vector<uint64_t>{id});
}

TEST_CASE("a VACUUM that drops episodes builds the copy's graph again, into its checkpoint only") {
  TempDir dir;
  const std::string path = dir.File("d.agentmem");
  Options o;
  o.checkpoint_bytes = 16 * 1024;
  auto db = MustOpen(path, o);
  RememberInSixCommits(db.get());
  Ok(db->Close());
  db = MustOpen(path, o);
  REQUIRE(LayoutOf(path).bytes.count(kCheckpointPage));
  Ok(db->Forget(ForgetUser("u1"), nullptr));
  const auto answers = Answers(db.get(), {"u0", "u2"});
  Ok(db->Vacuum({}, nullptr));
  const FileLayout after = LayoutOf(path);
  CHECK(after.bytes.count(kGraphPage) == 0);
  CHECK(after.sb[0].checkpoint != 0);
  CHECK(after.sb[1].checkpoint == after.sb[0].checkpoint);
  CHECK(Ids(db.get(), "u1").empty());
  CHECK(Answers(db.get(), {"u0", "u2"}) == answers);  // exact scans: the graph's shape does not matter
  Ok(db->Close());
  db = MustOpen(path, o);
  CHECK(Answers(db.get(), {"u0", "u2"}) == answers);
}

TEST_CASE("a compacted file read from its first page inserts the vectors its checkpoint's graph holds") {
  TempDir dir;
  const std::string path = dir.File("s.agentmem");
  Options o;
  o.checkpoint_bytes = 16 * 1024;
  std::vector<std::vector<uint64_t>> answers;
  {
    auto db = MustOpen(path, o);
    RememberInSixCommits(db.get());
    Ok(db->Close());
    db = MustOpen(path, o);
    Ok(db->Vacuum({}, nullptr));
    answers = Answers(db.get(), {"u0", "u1", "u2"});
    Ok(db->Close());
  }
  REQUIRE(LayoutOf(path).bytes.count(kGraphPage) == 0);
  // Superblocks that know no checkpoint (as a file's first superblock does):
  // the open scans every transaction from the first page.
  ForgetCheckpoint(path);
  auto db = MustOpen(path, o);
  CHECK(Answers(db.get(), {"u0", "u1", "u2"}) == answers);
  const uint64_t id = Remember(db.get(), "u1", "s", "a brand new memory about sailing boats");
  CHECK(RecallIds(db.get(), "u1", "a brand new memory about sailing boats", RecallMode::kVector, 1) ==
        std::vector<uint64_t>{id});
  std::vector<std::string> problems;
  Ok(db->Check(&problems));
  CHECK(problems.empty());
}

TEST_CASE("a compacted file read from its first page gives the graph a node for every episode its transactions hold") {
  TempDir dir;
  const std::string path = dir.File("g.agentmem");
  Options o;
  o.checkpoint_bytes = 64 * 1024;
  {
    auto db = MustOpen(path, o);
    RememberThousands(db.get(), 5);
    Ok(db->Close());
    db = MustOpen(path, o);
    Ok(db->Vacuum({}, nullptr));
    Ok(db->Close());
  }
  REQUIRE(LayoutOf(path).bytes.count(kGraphPage) == 0);
  ForgetCheckpoint(path);
  auto db = MustOpen(path, o);
  // Each episode's own text is its nearest vector: found only if the scan
  // of its transaction gave it a node.
  for (int i : {0, 999, 2500, 4999}) {
    RecallQuery rq;
    rq.user_id = "u";
    rq.text = Text("u", i);
    rq.mode = RecallMode::kVector;
    rq.k = 1;
    rq.min_similarity = -INFINITY;
    std::vector<RecallHit> hits;
    agentmem::engine::RecallPlan plan;
    Ok(db->Recall(rq, &hits, &plan));
    CHECK(plan.vector_path.find("hnsw") != std::string::npos);
    REQUIRE(hits.size() == 1);
    CHECK(hits[0].id == static_cast<uint64_t>(i + 1));
  }
  std::vector<std::string> problems;
  Ok(db->Check(&problems));
  CHECK(problems.empty());
}

// Every file opened and renamed through it, in order.
class OpenLog : public agentmem::test::FaultEnv {
 public:
  using FaultEnv::FaultEnv;
  Status Open(const std::string& path, agentmem::engine::OpenMode mode,
              std::unique_ptr<agentmem::engine::File>* out) override {
    events.push_back("open " + path);
    return FaultEnv::Open(path, mode, out);
  }
  Status Rename(const std::string& from, const std::string& to) override {
    events.push_back("rename " + from + " " + to);
    return FaultEnv::Rename(from, to);
  }
  std::vector<std::string> events;
};

TEST_CASE("a close that compacts the file does not open the copy it wrote") {
  TempDir dir;
  const std::string path = dir.File("f.agentmem");
  OpenLog env(agentmem::engine::Env::Posix());
  Options o;
  o.env = &env;
  o.checkpoint_bytes = 16 * 1024;
  auto db = MustOpen(path, o);
  for (int t = 0; t < 100; t++) {  // checkpoints at commits, then compacted at close
    Ok(db->Begin());
    for (int i = 0; i < 100; i++) Remember(db.get(), "u", "s", Text("u", t * 100 + i));
    Ok(db->Commit());
  }
  const auto answers = Answers(db.get(), {"u"});
  Ok(db->Close());
  db.reset();
  const auto renamed = std::find(env.events.begin(), env.events.end(),
                                 "rename " + path + "-vacuum " + path);
  REQUIRE(renamed != env.events.end());
  CHECK(std::find(renamed, env.events.end(), "open " + path) == env.events.end());
  // The copy is whole: its graph in its checkpoint, every episode there.
  CHECK(LayoutOf(path).bytes.count(kGraphPage) == 0);
  db = MustOpen(path, Options{});
  CHECK(Ids(db.get(), "u").size() == 10000);
  CHECK(Answers(db.get(), {"u"}) == answers);
  Ok(db->Close());
}

TEST_CASE("a close compacts the file once superseded checkpoints and graph deltas exceed half the rest of it, unless auto_vacuum is off") {
  TempDir dir;
  std::vector<std::vector<uint64_t>> answers[2];
  uint64_t sizes[2] = {0, 0};
  FileLayout layouts[2];
  for (int auto_vacuum = 0; auto_vacuum < 2; auto_vacuum++) {
    CAPTURE(auto_vacuum);
    const std::string path = dir.File("a" + std::to_string(auto_vacuum) + ".agentmem");
    Options o;
    o.checkpoint_bytes = 16 * 1024;
    o.auto_vacuum = auto_vacuum == 1;
    auto db = MustOpen(path, o);
    for (int t = 0; t < 100; t++) {  // a writer that stays open: checkpoints at commits
      Ok(db->Begin());
      for (int i = 0; i < 100; i++) {
        Remember(db.get(), "u" + std::to_string(i % 3), "s", Text("u", t * 100 + i));
      }
      Ok(db->Commit());
    }
    const FileLayout open = LayoutOf(path);
    REQUIRE(open.bytes.count(kCheckpointPage));
    Ok(db->Close());
    layouts[auto_vacuum] = LayoutOf(path);
    sizes[auto_vacuum] = agentmem::test::ReadFileBytes(path).size();
    db = MustOpen(path, o);
    answers[auto_vacuum] = Answers(db.get(), {"u0", "u1", "u2"});
    CHECK(Ids(db.get(), "u0").size() + Ids(db.get(), "u1").size() + Ids(db.get(), "u2").size() == 10000);
  }
  MESSAGE("file at close: " << sizes[0] << " bytes with auto_vacuum=0 (checkpoints "
          << layouts[0].bytes[kCheckpointPage] << ", graph deltas " << layouts[0].bytes[kGraphPage]
          << "), " << sizes[1] << " with auto_vacuum=1");
  CHECK(layouts[0].bytes[kGraphPage] > 0);
  CHECK(layouts[1].bytes.count(kGraphPage) == 0);  // compacted: the graph is in its checkpoint
  CHECK(sizes[1] * 2 < sizes[0]);
  CHECK(answers[1] == answers[0]);
}

// tests/replication/convergence_test.cc -- three files write concurrently
// (episodes, block versions, facts superseding each other) and run `agentmem
// sync` in random orders for several rounds (docs/replication.md, "What the
// tests show"). Afterwards every file answers the same as one file that
// received every change directly, through the write API, in PostgreSQL's
// global order: the same episodes, the same recall hits and scores over all
// users, the same current blocks and block histories, the same facts as of
// now. Nothing written is lost.
#include <agentmem.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/replication/replica_util.h"
#include "tests/util/seed.h"

using namespace agentmem::test;

namespace {

constexpr int kReplicas = 3;
constexpr int kRounds = 5;
constexpr int kOpsPerRound = 12;
const char* const kUsers[] = {"u0", "u1", "u2"};
const char* const kWords[] = {"lisbon", "tea", "jazz", "garden", "train", "coffee", "river",
                              "piano", "winter", "market", "bread", "mountain"};
const char* const kObjects[] = {"Paris", "Rome", "Lisbon", "Oslo"};

// One write, as the test made it; tag is unique and names it in PostgreSQL.
struct Op {
  enum Kind { kEpisode, kBlock, kFact } kind;
  int tag;
  std::string user, session, text;  // text: episode text, block value, fact object
  std::string name;                 // block name, fact subject
  std::string predicate;
  int64_t ts = 0;                   // episode ts; fact valid_from
  float vec[4] = {0, 0, 0, 0};
};

agentmem_db* Open(const TempDir& dir, const std::string& name) {
  agentmem_db* db = OpenReplica(dir, name);
  REQUIRE(agentmem_predicate_declare(db, "lives_in", 1) == AGENTMEM_OK);
  return db;
}

// A write of file `replica`. Each session is written on one file: a session
// is one conversation, and its BM25 context is its earlier turns in the
// order they were remembered (docs/replication.md, "Limits").
Op MakeOp(std::mt19937_64& rng, int tag, int replica) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  Op op;
  op.tag = tag;
  op.kind = static_cast<Op::Kind>(pick(3));
  op.user = kUsers[pick(3)];
  switch (op.kind) {
    case Op::kEpisode:
      op.session = "s" + std::to_string(replica) + "-" + std::to_string(pick(2));
      op.text = "t" + std::to_string(tag);
      for (int i = 0; i < 3; i++) op.text += std::string(" ") + kWords[pick(12)];
      op.ts = 1'700'000'000'000'000 + tag * 1000;
      for (float& x : op.vec) x = static_cast<float>(pick(2001) - 1000) / 1000.0f;
      op.vec[0] += 1.5f;  // never the zero vector
      break;
    case Op::kBlock:
      op.name = pick(2) ? "persona" : "scratch";
      op.text = "v" + std::to_string(tag) + " " + kWords[pick(12)];
      break;
    case Op::kFact:
      op.name = pick(2) ? "ann" : "bob";
      op.predicate = pick(3) ? "lives_in" : "likes";
      op.text = op.predicate == "likes" ? kWords[pick(12)] : kObjects[pick(4)];

      break;
  }
  return op;
}

void Apply(agentmem_db* db, const Op& op) {
  const char* u = op.user.c_str();
  switch (op.kind) {
    case Op::kEpisode:
      REQUIRE(agentmem_remember(db, u, op.session.c_str(), "user", op.text.c_str(), op.ts,
                                nullptr, op.vec, 4, nullptr) == AGENTMEM_OK);
      break;
    case Op::kBlock:
      REQUIRE(agentmem_block_set(db, u, op.name.c_str(), op.text.c_str(), 0, -1) == AGENTMEM_OK);
      break;
    case Op::kFact:
      // Valid from now; the confidence names the write.
      REQUIRE(agentmem_fact_assert(db, u, op.name.c_str(), op.predicate.c_str(), op.text.c_str(),
                                   (op.tag + 1) / 1000.0, 0, 0, nullptr, 0, nullptr) ==
              AGENTMEM_OK);
      break;
  }
}

// The test's writes in PostgreSQL's global order: each by the first change
// row that carries it (an episode's text and a block's value start with its
// tag; a fact's confidence encodes it).
std::vector<int> GlobalOrder(PGconn* pg) {
  std::vector<int> order;
  std::set<int> seen;
  for (const auto& row : Rows(pg, "SELECT kind, data->>'text', data->>'value',"
                                  " data->>'confidence' FROM agentmem_changes"
                                  " WHERE kind IN ('episode', 'block', 'fact') ORDER BY gpos")) {
    int tag = -1;
    if (row[0] == "episode") tag = std::stoi(row[1].substr(1));
    if (row[0] == "block") tag = std::stoi(row[2].substr(1));
    if (row[0] == "fact") tag = static_cast<int>(std::lround(std::stod(row[3]) * 1000)) - 1;
    if (seen.insert(tag).second) order.push_back(tag);
  }
  return order;
}

std::vector<std::string> Column(agentmem_db* db, const std::string& sql,
                                const std::vector<std::string>& args) {
  agentmem_stmt* st = nullptr;
  REQUIRE(agentmem_prepare(db, sql.c_str(), -1, &st, nullptr) == AGENTMEM_OK);
  for (size_t i = 0; i < args.size(); i++) {
    REQUIRE(agentmem_bind_text(st, static_cast<int>(i + 1), args[i].c_str(), -1) == AGENTMEM_OK);
  }
  std::vector<std::string> out;
  int rc;
  while ((rc = agentmem_step(st)) == AGENTMEM_ROW) {
    out.emplace_back(reinterpret_cast<const char*>(agentmem_column_text(st, 0)));
  }
  CHECK(rc == AGENTMEM_DONE);
  agentmem_finalize(st);
  return out;
}

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// What a file answers, as text: per user its episodes, current blocks and
// block histories (distinct values, sorted) and facts valid and known now;
// then recall over all users for a few queries (hits sorted by score, then
// text; ids are each file's own and left out).
std::string Answers(agentmem_db* db) {
  std::string out;
  for (const char* u : kUsers) {
    out += std::string("== ") + u + "\n";
    std::vector<std::string> lines = Column(
        db, "SELECT session_id || '|' || role || '|' || text || '|' || ts || '|' ||"
            " hex(embedding) FROM episodes WHERE user_id = ?1", {u});
    std::sort(lines.begin(), lines.end());
    for (const std::string& l : lines) out += "episode " + l + "\n";
    for (const char* name : {"persona", "scratch"}) {
      agentmem_block* b = nullptr;
      if (agentmem_block_get(db, u, name, &b) == AGENTMEM_OK) {
        out += std::string("block ") + name + " = " + b->value + "\n";
        agentmem_free(b);
      }
      std::vector<std::string> h =
          Column(db, "SELECT DISTINCT value FROM block_history(?1, ?2)", {u, name});
      std::sort(h.begin(), h.end());
      for (const std::string& v : h) out += std::string("history ") + name + " " + v + "\n";
    }
    agentmem_cursor* cur = nullptr;
    REQUIRE(agentmem_facts_v2(db, u, nullptr, nullptr, nullptr, 0, 0, 0, &cur) == AGENTMEM_OK);
    std::vector<std::string> facts;
    while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
      const agentmem_fact* f = agentmem_cursor_fact(cur);
      facts.push_back(std::string(f->subject) + " " + f->predicate + " " + f->object);
    }
    agentmem_cursor_close(cur);
    // The same fact asserted twice with different valid times may be one
    // row or two, by the order the assertions came in: the facts are compared
    // as (subject, predicate, object).
    std::sort(facts.begin(), facts.end());
    facts.erase(std::unique(facts.begin(), facts.end()), facts.end());
    for (const std::string& f : facts) out += "fact " + f + "\n";
  }
  const float qv[4] = {1, 0.5f, -0.25f, 0};
  for (const char* u : kUsers) {
  for (const char* q : {"lisbon", "tea jazz", "winter market bread", "river"}) {
    agentmem_recall_options o;
    agentmem_recall_options_init(&o);
    o.k = 500;
    o.query_vector = qv;
    o.query_dim = 4;
    agentmem_cursor* cur = nullptr;
    REQUIRE(agentmem_recall(db, u, q, &o, &cur) == AGENTMEM_OK);
    std::vector<std::pair<std::string, std::string>> hits;
    while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
      const agentmem_hit* h = agentmem_cursor_hit(cur);
      hits.emplace_back(Fmt("%.9f", -h->score),
                        std::string(h->user_id) + " " + h->text + Fmt(" bm25 %.9f", h->bm25_score) +
                            Fmt(" vec %.9f", h->vector_score));
    }
    agentmem_cursor_close(cur);
    std::sort(hits.begin(), hits.end());
    out += std::string("recall ") + u + " " + q + "\n";
    for (const auto& [score, hit] : hits) out += "  " + score + " " + hit + "\n";
  }
  }
  return out;
}

// The first line where two answers differ, for a short failure message.
std::string FirstDifference(const std::string& got, const std::string& want) {
  std::vector<std::string> g = Lines(got), w = Lines(want);
  for (size_t i = 0; i < std::max(g.size(), w.size()); i++) {
    const std::string a = i < g.size() ? g[i] : "(end)", b = i < w.size() ? w[i] : "(end)";
    if (a != b) return "line " + std::to_string(i + 1) + ": got \"" + a + "\", want \"" + b + "\"";
  }
  return "";
}

}  // namespace

TEST_CASE("three files writing concurrently and syncing in random orders converge") {
  TempDir dir;
  Conn pg = Fresh();
  // A fixed seed, so that make test runs the same rounds each time;
  // AGENTMEM_TEST_SEED replays another.
  const uint64_t seed = std::getenv("AGENTMEM_TEST_SEED") ? Seed() : 20261127;
  INFO("seed ", seed);
  std::mt19937_64 rng(seed);
  const std::string names[kReplicas] = {"a.agentmem", "b.agentmem", "c.agentmem"};
  agentmem_db* dbs[kReplicas];
  for (int i = 0; i < kReplicas; i++) dbs[i] = Open(dir, names[i]);
  std::vector<Op> ops;
  for (int round = 0; round < kRounds; round++) {
    for (int n = 0; n < kReplicas * kOpsPerRound; n++) {
      const int replica = static_cast<int>(rng() % kReplicas);
      ops.push_back(MakeOp(rng, static_cast<int>(ops.size()), replica));
      Apply(dbs[replica], ops.back());
    }
    std::vector<int> order = {0, 1, 2};
    std::shuffle(order.begin(), order.end(), rng);
    for (int i : order) {
      if (rng() % 4 != 0) SyncRun(dir, names[i]);  // sometimes a file skips a round
    }
  }
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < kReplicas; i++) SyncRun(dir, names[i]);
  }

  // The reference: every write applied to one file in the global order.
  agentmem_db* ref = Open(dir, "reference.agentmem");
  const std::vector<int> order = GlobalOrder(pg.get());
  for (int tag : order) Apply(ref, ops[tag]);
  // Nothing lost: every episode and block version is in PostgreSQL.
  int episodes = 0, blocks = 0;
  for (const Op& op : ops) {
    episodes += op.kind == Op::kEpisode;
    blocks += op.kind == Op::kBlock;
  }
  CHECK(One(pg.get(), "SELECT count(*) FROM episodes") == std::to_string(episodes));
  CHECK(One(pg.get(), "SELECT count(*) FROM blocks") == std::to_string(blocks));

  const std::string want = Answers(ref);
  CHECK(want.find("recall u0 lisbon\n  -") != std::string::npos);  // recall finds something
  CHECK(want.find("fact ") != std::string::npos);
  for (int i = 0; i < kReplicas; i++) {
    CHECK_MESSAGE(FirstDifference(Answers(dbs[i]), want) == "", names[i]);
  }
  // PostgreSQL's current blocks are the reference's.
  for (const auto& row : Rows(pg.get(), "SELECT user_id, name, value FROM blocks_current")) {
    agentmem_block* b = nullptr;
    REQUIRE(agentmem_block_get(ref, row[0].c_str(), row[1].c_str(), &b) == AGENTMEM_OK);
    CHECK(row[2] == b->value);
    agentmem_free(b);
  }
  for (agentmem_db* db : dbs) agentmem_close(db);
  agentmem_close(ref);
}

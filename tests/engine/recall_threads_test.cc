// tests/engine/recall_threads_test.cc -- the two legs of a hybrid recall on
// two threads (engine/memory/leg_worker.h): the worker itself, the same hits
// as one thread bit for bit, and several threads querying one handle. Part of
// engine_tests, and on its own as recall_threads_tests for ThreadSanitizer
// (make tsan, make test).
#include <doctest/doctest.h>

#include <agentmem.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/memory/leg_worker.h"
#include "tests/util/oracle.h"
#include "tests/util/seed.h"
#include "tests/util/temp_dir.h"

using agentmem::engine::LegWorker;
using agentmem::test::RandomWords;
using agentmem::test::TempDir;

namespace {

// A task that waits until the test opens its gate.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool entered = false;
  static void Task(void* arg) {
    Gate* g = static_cast<Gate*>(arg);
    std::unique_lock<std::mutex> l(g->mu);
    g->entered = true;
    g->cv.notify_all();
    g->cv.wait(l, [g] { return g->open; });
  }
};

void Increment(void* arg) { static_cast<std::atomic<int>*>(arg)->fetch_add(1); }

}  // namespace

#ifdef AGENTMEM_TEST_HOOKS
TEST_CASE("a leg worker starts on its first task, refuses a second caller while busy, and joins") {
  { LegWorker never_used; }  // destroyed without a thread
  LegWorker w;
  CHECK_FALSE(w.started());
  std::atomic<int> n{0};
  if (std::thread::hardware_concurrency() == 1) {
    CHECK(w.TryStart(&Increment, &n) == LegWorker::Start::kUnavailable);  // one CPU
    return;
  }
  // Every task on the worker, whatever the load (the hook): no take-back,
  // no backoff.
  LegWorker::SetAlwaysParallelForTest(true);
  for (int i = 0; i < 100; i++) {
    REQUIRE(w.TryStart(&Increment, &n) == LegWorker::Start::kStarted);
    CHECK(w.Finish());
  }
  CHECK(n.load() == 100);
  CHECK(w.started());
  REQUIRE(w.TryStart(&Increment, &n) == LegWorker::Start::kStarted);
  w.Cancel();  // the worker had it: Cancel waits
  CHECK(n.load() == 101);

  Gate gate;
  REQUIRE(w.TryStart(&Gate::Task, &gate) == LegWorker::Start::kStarted);
  {
    std::unique_lock<std::mutex> l(gate.mu);
    gate.cv.wait(l, [&] { return gate.entered; });
  }
  // Another caller does not queue: it is told to run its leg itself.
  LegWorker::Start second = LegWorker::Start::kStarted;
  std::thread other([&] { second = w.TryStart(&Increment, &n); });
  other.join();
  CHECK(second == LegWorker::Start::kBusy);
  LegWorker::SetAlwaysParallelForTest(false);
  // The gate keeps the worker off the CPU well past 250 us: a late task.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  {
    std::lock_guard<std::mutex> l(gate.mu);
    gate.open = true;
  }
  gate.cv.notify_all();
  CHECK(w.Finish());  // the worker had begun it
  // So the next 16 tasks are refused, and then the worker takes one again.
  for (int i = 0; i < 16; i++) {
    CHECK(w.TryStart(&Increment, &n) == LegWorker::Start::kBackingOff);
  }
  CHECK(n.load() == 101);
  // A loaded machine (no CPU idle) keeps refusing.
  const LegWorker::Start next = w.TryStart(&Increment, &n);
  CHECK((next == LegWorker::Start::kStarted || next == LegWorker::Start::kNoIdleCpu));
  if (next == LegWorker::Start::kStarted) {
    w.Finish();  // on the worker or taken back: it runs once
    CHECK(n.load() == 102);
  }
}
#endif

#ifdef AGENTMEM_TEST_HOOKS
TEST_CASE("a leg worker refuses a task while the caller's own thread takes a CPU, unless the hook says run") {
  if (std::thread::hardware_concurrency() == 1) return;  // no worker at all
  LegWorker w;
  std::atomic<int> n{0};
  CHECK(w.TryStart(&Increment, &n, /*cpu_taken=*/true) == LegWorker::Start::kCpuTaken);
  CHECK_FALSE(w.started());  // refused before any thread
  CHECK(n.load() == 0);
  LegWorker::SetAlwaysParallelForTest(true);
  REQUIRE(w.TryStart(&Increment, &n, /*cpu_taken=*/true) == LegWorker::Start::kStarted);
  CHECK(w.Finish());
  LegWorker::SetAlwaysParallelForTest(false);
  CHECK(n.load() == 1);
}
#endif

TEST_CASE("the runnable threads are read from the fourth field of /proc/loadavg's text") {
  CHECK(LegWorker::RunnableThreads("0.52 0.58 0.59 2/345 6789\n") == 2);
  CHECK(LegWorker::RunnableThreads("12.00 8.25 3.10 17/1024 1") == 17);
  CHECK(LegWorker::RunnableThreads("0.00 0.00 0.00 0/1 0") == 0);
  // Anything else is not such a text: the caller falls back.
  CHECK(LegWorker::RunnableThreads("") == -1);
  CHECK(LegWorker::RunnableThreads("0.52 0.58 0.59") == -1);
  CHECK(LegWorker::RunnableThreads("0.52 0.58 0.59 ") == -1);
  CHECK(LegWorker::RunnableThreads("0.52 0.58 0.59 2") == -1);
  CHECK(LegWorker::RunnableThreads("0.52 0.58 0.59 2/") == -1);
  CHECK(LegWorker::RunnableThreads("0.52 0.58 0.59 /345 1") == -1);
  CHECK(LegWorker::RunnableThreads("0.52 0.58 0.59 x/345 1") == -1);
  CHECK(LegWorker::RunnableThreads("0.52 0.58 0.59 2/345") == -1);  // cut short
  CHECK(LegWorker::RunnableThreads("0.52 0.58 0.59 9999999999/345 1") == -1);
  CHECK(LegWorker::RunnableThreads(std::string("0.52 0.58 0.59 2\0/345 1", 24)) == -1);
  // This machine's own text, when it has one, reads (the reader runs).
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f) {
    char buf[128] = {};
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    CHECK(LegWorker::RunnableThreads(std::string_view(buf, n)) >= 1);
  }
}

TEST_CASE("a worker finds no CPU idle after two reads of busy CPUs and one again a read after") {
  const unsigned cpus = 2;
  // An idle machine: the caller alone runs.
  double avg = LegWorker::NextAverage(-1, 1);
  CHECK_FALSE(LegWorker::NoIdleCpu(avg, cpus));
  // One read that finds a second thread running does not refuse ...
  avg = LegWorker::NextAverage(avg, 2);
  CHECK_FALSE(LegWorker::NoIdleCpu(avg, cpus));
  avg = LegWorker::NextAverage(avg, 1);
  CHECK_FALSE(LegWorker::NoIdleCpu(avg, cpus));
  // ... two in a row do, and a steady load keeps refusing.
  avg = LegWorker::NextAverage(avg, 2);
  avg = LegWorker::NextAverage(avg, 2);
  CHECK(LegWorker::NoIdleCpu(avg, cpus));
  for (int i = 0; i < 20; i++) avg = LegWorker::NextAverage(avg, 2);
  CHECK(LegWorker::NoIdleCpu(avg, cpus));
  // Once the load ends, the next read finds a CPU idle.
  avg = LegWorker::NextAverage(avg, 1);
  CHECK_FALSE(LegWorker::NoIdleCpu(avg, cpus));
  // A heavy load (six runnable threads on two CPUs) takes three reads.
  avg = LegWorker::NextAverage(-1, 6);
  CHECK(LegWorker::NoIdleCpu(avg, cpus));
  int reads = 0;
  while (LegWorker::NoIdleCpu(avg, cpus)) {
    avg = LegWorker::NextAverage(avg, 1);
    reads++;
  }
  CHECK(reads == 3);
  // The first read alone decides: a loaded machine refuses at once.
  CHECK(LegWorker::NoIdleCpu(LegWorker::NextAverage(-1, 2), cpus));
  CHECK_FALSE(LegWorker::NoIdleCpu(LegWorker::NextAverage(-1, 1), cpus));
  // More CPUs, more room.
  CHECK_FALSE(LegWorker::NoIdleCpu(LegWorker::NextAverage(-1, 7), 8));
  CHECK(LegWorker::NoIdleCpu(LegWorker::NextAverage(-1, 8), 8));
}

namespace {

constexpr int kDim = 16;

struct Hit {
  int64_t id;
  double score, bm25_score, vector_score;
  int bm25_rank, vector_rank;
  bool operator==(const Hit& o) const {
    // Bit for bit: the doubles compared as bytes.
    return id == o.id && bm25_rank == o.bm25_rank && vector_rank == o.vector_rank &&
           std::memcmp(&score, &o.score, sizeof score) == 0 &&
           std::memcmp(&bm25_score, &o.bm25_score, sizeof score) == 0 &&
           std::memcmp(&vector_score, &o.vector_score, sizeof score) == 0;
  }
};

struct Query {
  std::string user, text;
  std::vector<float> vec;
  int k = 10;
  bool all_users = false;
  int64_t ts_from = INT64_MIN;
};

std::vector<float> Unit(std::mt19937_64& rng) {
  std::normal_distribution<float> g(0, 1);
  std::vector<float> v(kDim);
  double norm = 0;
  for (float& x : v) {
    x = g(rng);
    norm += x * x;
  }
  for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
  return v;
}

// 6,000 episodes of user "a" and 500 of "b", each with a few words and a
// vector: above RecallIndex::kParallelMin, so that user a's hybrid queries
// take the worker.
void MakeFile(const std::string& path, uint64_t seed) {
  std::mt19937_64 rng(seed);
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "vector_dim=16&embedder=test-threads&sync=off") == AGENTMEM_OK);
  const int kEpisodes = 6500;
  for (int batch = 0; batch < kEpisodes; batch += 1000) {
    REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
    for (int i = batch; i < batch + 1000 && i < kEpisodes; i++) {
      std::vector<float> v = Unit(rng);
      std::string text = RandomWords(rng, 3 + static_cast<int>(rng() % 8));
      REQUIRE(agentmem_remember(db, i % 13 == 0 ? "b" : "a", i % 2 ? "odd" : "even", "user",
                                text.c_str(), 1000 + i, nullptr, v.data(), kDim,
                                nullptr) == AGENTMEM_OK);
    }
    REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
  }
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
}

std::vector<Query> MakeQueries(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<Query> out;
  for (int i = 0; i < n; i++) {
    Query q;
    q.user = i % 10 == 9 ? "b" : "a";
    q.text = RandomWords(rng, 1 + static_cast<int>(rng() % 5));
    if (i % 7 != 6) q.vec = Unit(rng);  // else: no vector, the vector leg is skipped
    q.k = i % 5 == 0 ? 1 : i % 5 == 1 ? 50 : 10;
    q.all_users = i % 11 == 10;
    if (i % 13 == 12) q.ts_from = 1000 + static_cast<int64_t>(rng() % 1000);
    out.push_back(std::move(q));
  }
  return out;
}

agentmem_recall_options Options(const Query& q) {
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.mode = AGENTMEM_RECALL_HYBRID;
  o.k = q.k;
  o.all_users = q.all_users;
  o.ts_from = q.ts_from;
  o.query_vector = q.vec.empty() ? nullptr : q.vec.data();
  o.query_dim = static_cast<int>(q.vec.size());
  o.min_similarity = -INFINITY;  // every vector hit matches: both lists count
  return o;
}

std::vector<Hit> Recall(agentmem_db* db, const Query& q) {
  agentmem_recall_options o = Options(q);
  agentmem_cursor* cur = nullptr;
  int rc = agentmem_recall(db, q.user.c_str(), q.text.c_str(), &o, &cur);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, agentmem_errmsg(db));
  std::vector<Hit> out;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    const agentmem_hit* h = agentmem_cursor_hit(cur);
    out.push_back({h->id, h->score, h->bm25_score, h->vector_score, h->bm25_rank, h->vector_rank});
  }
  REQUIRE(rc == AGENTMEM_DONE);
  agentmem_cursor_close(cur);
  return out;
}

std::string Legs(agentmem_db* db, const Query& q) {
  agentmem_recall_options o = Options(q);
  char* plan = nullptr;
  REQUIRE(agentmem_explain_recall(db, q.user.c_str(), q.text.c_str(), &o, &plan) == AGENTMEM_OK);
  std::string s = plan;
  agentmem_free(plan);
  size_t at = s.find("\"legs\":\"");
  REQUIRE(at != std::string::npos);
  at += 8;
  return s.substr(at, s.find('"', at) - at);
}

agentmem_db* OpenReader(const std::string& path, const char* options) {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READONLY, options) == AGENTMEM_OK);
  return db;
}

}  // namespace

TEST_CASE("hybrid recall with its vector leg on the worker gives the hits of one thread, bit for bit") {
  TempDir dir;
  const std::string path = dir.File("legs.agentmem");
  const uint64_t seed = agentmem::test::Seed();
  MakeFile(path, seed);
  agentmem_db* one = OpenReader(path, "recall_threads=1");
  agentmem_db* two = OpenReader(path, nullptr);  // recall_threads=2, the default
  const std::vector<Query> queries = MakeQueries(seed + 1, 400);
  const bool parallel = std::thread::hardware_concurrency() > 1;
  // Twice: with the worker running every leg it is given (a test hook:
  // otherwise a leg it has not begun when BM25 ends is taken back, and a
  // worker late for a CPU refuses legs for a while), then as it comes.
  for (bool forced : {true, false}) {
#ifdef AGENTMEM_TEST_HOOKS
    LegWorker::SetAlwaysParallelForTest(forced);
#else
    if (forced) continue;
#endif
    int ran_parallel = 0;
    for (size_t i = 0; i < queries.size(); i++) {
      const Query& q = queries[i];
      CAPTURE(i);
      std::vector<Hit> a = Recall(one, q), b = Recall(two, q);
      REQUIRE(a.size() == b.size());
      CHECK(a == b);
      CHECK(Legs(one, q) == "one thread: recall_threads=1");
      const std::string legs = Legs(two, q);
      ran_parallel += legs.rfind("parallel", 0) == 0;
      if (q.user == "b" && !q.all_users && q.ts_from == INT64_MIN) {
        CHECK(legs == "one thread: 500 candidates");
      }
      if (q.user == "a" && !q.all_users && q.ts_from == INT64_MIN && parallel) {
        if (forced) {
          CHECK(legs == "parallel: vector leg on the handle's worker thread");
        } else {
          CHECK((legs == "parallel: vector leg on the handle's worker thread" ||
                 legs == "one thread: the worker had not begun the vector leg when BM25 ended" ||
                 legs == "one thread: the worker was late for a CPU recently" ||
                 legs == "one thread: the runnable threads leave no CPU idle"));
        }
      }
    }
    MESSAGE(std::string(forced ? "forced: " : "as it comes: ")
            << "queries whose legs ran in parallel: " << ran_parallel << " of " << queries.size());
    if (parallel && forced) CHECK(ran_parallel > 200);
  }
#ifdef AGENTMEM_TEST_HOOKS
  LegWorker::SetAlwaysParallelForTest(false);
#endif
  // A vector-mode or bm25-mode query has one leg.
  Query q = queries[0];
  agentmem_recall_options o = Options(q);
  o.mode = AGENTMEM_RECALL_BM25;
  char* plan = nullptr;
  REQUIRE(agentmem_explain_recall(two, q.user.c_str(), q.text.c_str(), &o, &plan) == AGENTMEM_OK);
  CHECK(std::string(plan).find("\"legs\":\"one leg\"") != std::string::npos);
  agentmem_free(plan);
  CHECK(agentmem_close(one) == AGENTMEM_OK);
  CHECK(agentmem_close(two) == AGENTMEM_OK);
}

TEST_CASE("several threads issuing hybrid recalls on one handle get the hits of one thread") {
  TempDir dir;
  const std::string path = dir.File("threads.agentmem");
  const uint64_t seed = agentmem::test::Seed();
  MakeFile(path, seed);
  const std::vector<Query> queries = MakeQueries(seed + 2, 60);
  std::vector<std::vector<Hit>> expected;
  agentmem_db* one = OpenReader(path, "recall_threads=1");
  for (const Query& q : queries) expected.push_back(Recall(one, q));
  CHECK(agentmem_close(one) == AGENTMEM_OK);

  agentmem_db* db = OpenReader(path, nullptr);
  const int kThreads = 4;
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; round++) {
        for (size_t j = 0; j < queries.size(); j++) {
          const size_t i = (j + static_cast<size_t>(t) * 17) % queries.size();
          agentmem_recall_options o = Options(queries[i]);
          agentmem_cursor* cur = nullptr;
          if (agentmem_recall(db, queries[i].user.c_str(), queries[i].text.c_str(), &o, &cur) !=
              AGENTMEM_OK) {
            errors++;
            continue;
          }
          std::vector<Hit> got;
          int rc;
          while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
            const agentmem_hit* h = agentmem_cursor_hit(cur);
            got.push_back(
                {h->id, h->score, h->bm25_score, h->vector_score, h->bm25_rank, h->vector_rank});
          }
          if (rc != AGENTMEM_DONE) errors++;
          agentmem_cursor_close(cur);
          if (!(got == expected[i])) mismatches++;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(errors.load() == 0);
  CHECK(mismatches.load() == 0);
  CHECK(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("recall_threads accepts 1 and 2 only") {
  agentmem_db* db = nullptr;
  for (const char* bad : {"recall_threads=0", "recall_threads=3", "recall_threads=x"}) {
    CAPTURE(bad);
    CHECK(agentmem_open_v2(":memory:", &db, AGENTMEM_OPEN_READWRITE, bad) == AGENTMEM_MISUSE);
    agentmem_close(db);
    db = nullptr;
  }
  REQUIRE(agentmem_open_v2(":memory:", &db, AGENTMEM_OPEN_READWRITE, "recall_threads=1") ==
          AGENTMEM_OK);
  agentmem_close(db);
}

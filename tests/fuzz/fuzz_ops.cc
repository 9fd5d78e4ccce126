// tests/fuzz/fuzz_ops.cc -- structured operation sequences against the
// in-memory model (tests/util/oracle.h), in the manner of SQLite's
// fuzzinvariants: the input is a program of writes, transactions, forgets
// (every kind, in and out of transactions), PURGE, VACUUM, a retention policy,
// closes (which apply retention and auto_vacuum), reopens, simulated power
// losses and injected I/O errors on a MemEnv behind a FaultEnv. Invariants:
// every acknowledged write and forget is there after any reopen or crash, a
// failed transaction is wholly present or wholly absent, a forgotten episode
// never reads back nor comes out of recall, ids are what the model predicts,
// and the integrity check finds nothing.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "tests/fuzz/fuzz.h"
#include "tests/util/fault_env.h"
#include "tests/util/oracle.h"

namespace {

using namespace agentmem;
using engine::Database;
using test::Driver;
using test::FaultEnv;
using test::Oracle;
using test::TestClock;

constexpr const char* kPath = "/fuzz/ops.agentmem";
constexpr uint32_t kDim = 4;

engine::Options OptionsFor(engine::Env* env, TestClock* clock, engine::SyncMode sync) {
  engine::Options o;
  o.env = env;
  o.sync = sync;
  o.salt = 0x66757a7a6f707321ULL;
  o.clock = clock->Fn();
  o.space = engine::VectorSpace{"test-hash", kDim, "cosine"};
  o.space_given = true;
  o.busy_timeout_ms = 0;
  o.page_size = 512;  // small pages: transactions span several
  return o;
}

struct World {
  std::unique_ptr<engine::Env> mem = engine::NewMemEnv();
  std::unique_ptr<FaultEnv> fenv;
  std::unique_ptr<Database> db;
  std::unique_ptr<Driver> driver;
  TestClock clock;
  engine::SyncMode sync = engine::SyncMode::kFull;
  Oracle model;  // the state a reopen must show (plus one in-doubt transaction)

  // Opens the file again on a fresh FaultEnv and checks it against the model.
  void Reopen(const std::vector<test::Txn>& in_doubt) {
    driver.reset();
    db.reset();
    fenv = std::make_unique<FaultEnv>(mem.get());
    Status s = Database::Open(kPath, OptionsFor(fenv.get(), &clock, sync), &db);
    AGENTMEM_FUZZ_CHECK(s.ok(), "reopen failed: %s", s.ToString().c_str());
    std::string why;
    int which = -1;
    bool ok = test::MatchesAckedOrOneInDoubt(db.get(), model, in_doubt, &why, &which);
    AGENTMEM_FUZZ_CHECK(ok, "after reopen: %s", why.c_str());
    if (which >= 0) model.Apply(in_doubt[static_cast<size_t>(which)]);
    std::vector<std::string> problems;
    s = db->Check(&problems);
    AGENTMEM_FUZZ_CHECK(s.ok() && problems.empty(), "integrity check: %s",
                        s.ok() ? problems.front().c_str() : s.ToString().c_str());
    driver = std::make_unique<Driver>(db.get(), &clock);
    driver->set_faults(fenv.get());
    driver->mutable_acked() = model;
  }
};

}  // namespace

AGENTMEM_FUZZ_TARGET(ops) {
  fuzz::Bytes in(data, size);
  World w;
  uint8_t mode = in.U8();
  w.sync = mode % 2 ? engine::SyncMode::kFull : engine::SyncMode::kNormal;
  w.Reopen({});
  std::mt19937_64 rng(in.U32());
  uint64_t n = 0;
  int steps = 0;
  // Episode event times 1,000 s apart, so that FORGET BEFORE and retention
  // (whole seconds) cut inside the program's episodes.
  constexpr int64_t kTs0 = 1'600'000'000'000'000, kTsStep = 1'000'000'000;
  auto episode = [&] {
    format::EpisodeRecord e = test::RandomEpisode(rng, kDim, n);
    e.ts = kTs0 + static_cast<int64_t>(n++) * kTsStep;
    return e;
  };
  auto forget = [&] {
    format::ForgetRecord f;
    f.kind = static_cast<format::ForgetKind>(1 + in.U8() % 6);
    f.user_id = "u" + std::to_string(in.U8() % 3);
    f.session_id = "s" + std::to_string(in.U8() % 4);
    static const char* const kNames[] = {"persona", "goals", "scratch"};
    f.name = kNames[in.U8() % 3];
    f.before = kTs0 + static_cast<int64_t>(in.U8() % (n + 1)) * kTsStep;
    // Only by-id kinds take an id; now and then another kind gets one too,
    // which the engine must refuse (the decoder would reject the record).
    const bool by_id = f.kind == format::ForgetKind::kEpisode || f.kind == format::ForgetKind::kFact;
    const uint8_t id = in.U8();
    if (by_id || id % 16 == 0) f.id = 1 + id % (n + 1);
    return f;
  };
  bool faulted = false;  // an injected fault may still be pending
  const char* trace_env = std::getenv("AGENTMEM_FUZZ_TRACE");
  const bool trace = trace_env != nullptr;  // each op on stderr
  const bool trace_diff = trace && std::string(trace_env) == "2";  // and the model diff
  while (!in.empty() && steps++ < 200) {
    uint8_t op = in.U8();
    Driver& d = *w.driver;
    if (trace) std::fprintf(stderr, "op %d (%d)\n", op % 18, steps);
    switch (op % 18) {
      case 0:
      case 1:
      case 2:
        d.Remember(episode()).IgnoreError();
        break;
      case 3:
        d.SetBlock(test::RandomBlock(rng, n++)).IgnoreError();
        break;
      case 4:
        d.AssertFact(test::RandomFact(rng, n++)).IgnoreError();
        break;
      case 5:
        if (!d.in_transaction()) d.Begin().IgnoreError();
        break;
      case 6:
        if (d.in_transaction()) d.Commit().IgnoreError();
        break;
      case 7:
        if (d.in_transaction()) d.Rollback().IgnoreError();
        break;
      case 8: {
        // Clean close and reopen: under sync=full every acked write is there;
        // under sync=normal too (the close syncs).
        // The close applies retention and auto_vacuum (the model follows).
        if (d.in_transaction()) d.Rollback().IgnoreError();
        w.fenv->ClearFaults();
        d.Close().IgnoreError();
        w.model = d.acked();
        std::vector<test::Txn> doubt = d.in_doubt();
        w.Reopen(doubt);
        faulted = false;
        break;
      }
      case 9: {
        // Power loss. Under sync=normal only what a clean close or a sync
        // vouched for must survive, which the model cannot tell here: crash
        // only under sync=full.
        if (w.sync != engine::SyncMode::kFull) break;
        w.model = d.acked();
        std::vector<test::Txn> doubt = d.in_doubt();
        auto policy = static_cast<test::CrashPolicy>(in.U8() % 5);
        w.fenv->SimulateCrash(policy, in.U32());
        w.Reopen(doubt);
        faulted = false;
        break;
      }
      case 10: {
        // An I/O error at one of the next few calls.
        if (faulted) break;
        auto fault = static_cast<test::Fault>(in.U8() % 3);
        w.fenv->FailAt(w.fenv->ops() + 1 + in.U8() % 6, fault, /*persistent=*/false);
        faulted = true;
        break;
      }
      case 11: {
        // Reads see the acked state plus the open transaction's own writes;
        // outside a transaction, with nothing in doubt, exactly the model.
        if (d.in_transaction() || !d.in_doubt().empty() || faulted) break;
        std::string diff = d.acked().Diff(w.db.get());
        AGENTMEM_FUZZ_CHECK(diff.empty(), "live handle differs from the model: %s",
                            diff.c_str());
        break;
      }
      case 12: {
        engine::RecallQuery q;
        q.user_id = "u" + std::to_string(in.U8() % 3);
        q.text = "agent memory";
        q.k = 1 + in.U8() % 8;
        q.mode = engine::RecallMode::kBm25;
        std::vector<engine::RecallHit> hits;
        engine::RecallPlan plan;
        Status s = w.db->Recall(q, &hits, &plan);
        if (s.ok()) {
          AGENTMEM_FUZZ_CHECK(hits.size() <= q.k, "recall returned %zu hits for k %zu",
                              hits.size(), q.k);
          for (const engine::RecallHit& h : hits) {
            AGENTMEM_FUZZ_CHECK(!d.acked().forgotten_episodes().count(h.id),
                                "recall returned forgotten episode %llu",
                                static_cast<unsigned long long>(h.id));
          }
        }
        break;
      }
      case 13:
      case 14:
        // Inside a transaction it applies at the commit.
        d.Forget(forget()).IgnoreError();
        break;
      case 15:
        if (!d.in_transaction()) {
          format::ForgetRecord f = forget();
          Status s = d.Purge(f);
          if (trace) {
            std::fprintf(stderr, "  purge kind %d user %s session %s name %s before %lld id %llu: %s\n",
                         static_cast<int>(f.kind), f.user_id.c_str(), f.session_id.c_str(),
                         f.name.c_str(), static_cast<long long>(f.before),
                         static_cast<unsigned long long>(f.id), s.ToString().c_str());
          }
        }
        break;
      case 16:
        if (!d.in_transaction()) d.Vacuum().IgnoreError();
        break;
      case 17: {
        // Episodes older than a cut inside the program's range expire at a
        // close or VACUUM (0: the policy is turned off).
        uint8_t cut = in.U8();
        int64_t max_age = cut == 0 ? 0
            : (w.clock.now - (kTs0 + static_cast<int64_t>(cut % (n + 1)) * kTsStep)) / 1'000'000;
        if (!d.in_transaction()) d.SetRetention(std::max<int64_t>(0, max_age), in.U8() % 2).IgnoreError();
        break;
      }
    }
    // The diff fills the handle's page cache, which moves where a later
    // fault lands: only with AGENTMEM_FUZZ_TRACE=2.
    if (trace) {
      std::fprintf(stderr, "  faults hit %d, model %zu episodes, %zu in doubt, handle %s\n",
                   static_cast<int>(w.fenv->faults_hit()), w.driver->acked().episode_count(),
                   w.driver->in_doubt().size(), w.db->write_failed() ? "failed" : "ok");
    }
    if (trace_diff && !w.driver->in_transaction()) {
      std::string diff = w.driver->Compare(w.driver->acked());
      std::fprintf(stderr, "  after: %zu in doubt, faulted %d, model %zu episodes; %s\n",
                   w.driver->in_doubt().size(), faulted, w.driver->acked().episode_count(),
                   diff.empty() ? "the handle equals the model" : diff.c_str());
    }
    for (const std::string& e : w.driver->errors()) {
      AGENTMEM_FUZZ_CHECK(false, "driver: %s", e.c_str());
    }
  }
  Driver& d = *w.driver;
  if (d.in_transaction()) d.Commit().IgnoreError();
  w.fenv->ClearFaults();
  d.Close().IgnoreError();
  w.model = d.acked();
  std::vector<test::Txn> doubt = d.in_doubt();
  w.Reopen(doubt);
  return 0;
}

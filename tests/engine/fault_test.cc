// tests/engine/fault_test.cc -- I/O errors (RELIABILITY.md R3, small): every
// failure is reported with an I/O code and never as OK with data lost; a
// failed sync or write makes the handle's error sticky until reopen (never
// retrying fsync); ENOSPC is AGENTMEM_FULL; and what each sync mode costs in
// syncs (database.cc invariants (4) and (7)).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "tests/util/fault_env.h"
#include "tests/util/open_helpers.h"
#include "tests/util/oracle.h"
#include "tests/util/seed.h"
#include "tests/util/temp_dir.h"

namespace agentmem::test {
namespace {

using engine::Database;
using engine::Env;
using engine::Options;
using engine::Stats;
using engine::SyncMode;
using format::EpisodeRecord;

constexpr uint64_t kSalt = 0xfa017fa017ULL;
constexpr uint32_t kDim = 8;
constexpr const char* kPath = "/mem/fault.agentmem";

Options TestOptions(Env* env, TestClock* clock, SyncMode sync = SyncMode::kFull) {
  return TestOptionsFor(env, clock, sync, kSalt, kDim);
}

const char* SyncName(SyncMode m) { return engine::SyncModeName(m); }

uint64_t FileSize(Env* env, const std::string& path) {
  std::unique_ptr<engine::File> f;
  REQUIRE(env->Open(path, engine::OpenMode{true}, &f).ok());
  uint64_t size = 0;
  REQUIRE(f->Size(&size).ok());
  return size;
}

std::string FileBytes(Env* env, const std::string& path) {
  std::unique_ptr<engine::File> f;
  REQUIRE(env->Open(path, engine::OpenMode{true}, &f).ok());
  std::string bytes;
  REQUIRE(f->ReadAt(0, FileSize(env, path), &bytes).ok());
  return bytes;
}

// ------------------------------------------------------------------ R3

// The scripted workload: open, 20 autocommit episodes, a block, a fact, one
// explicit 5-episode transaction, some reads, close.
struct Script {
  std::vector<EpisodeRecord> singles;
  format::BlockRecord block;
  format::FactRecord fact;
  std::vector<EpisodeRecord> batch;
};

Script MakeScript(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Script s;
  uint64_t n = 1;
  for (int i = 0; i < 20; i++) s.singles.push_back(RandomEpisode(rng, kDim, n++));
  s.block = RandomBlock(rng, n++);
  s.fact = RandomFact(rng, n++);
  for (int i = 0; i < 5; i++) s.batch.push_back(RandomEpisode(rng, kDim, n++));
  return s;
}

// What one run of the script saw.
struct ScriptRun {
  std::vector<std::string> violations;  // codes or data that break the contract
  std::map<std::string, int> codes;     // failure codes seen, by name
  int failures = 0;
  bool opened = false;
};

// The codes an I/O fault may surface as:
//   primary AGENTMEM_IOERR (any extended code: READ, WRITE, FSYNC, TRUNCATE,
//     LOCK, or plain IOERR from a failed size query) -- the call itself failed;
//   AGENTMEM_FULL -- ENOSPC on a write or on creating the file;
//   AGENTMEM_CANTOPEN -- opening or creating the file failed;
//   AGENTMEM_IOERR_STICKY -- only after an earlier failure on the same handle.
// Anything else (CORRUPT above all) misreports a transient I/O error.
void Note(ScriptRun* run, const char* call, const Status& s) {
  if (s.ok()) return;
  run->codes[CodeName(s.code())]++;
  bool sticky = s.code() == kIoErrSticky;
  bool io = s.primary() == kIoErr || s.primary() == kFull || s.primary() == kCantOpen;
  if (!io || (sticky && run->failures == 0)) {
    run->violations.push_back(std::string(call) + " returned " + s.ToString() +
                              (sticky ? " with no earlier failure" : ""));
  }
  run->failures++;
}

// Runs the script on env; d (whose clock is `clock`) keeps the model.
void RunScript(Env* env, const Script& script, SyncMode mode, TestClock* clock, Driver* d,
               ScriptRun* run) {
  std::unique_ptr<Database> db;
  Status s = Database::Open(kPath, TestOptions(env, clock, mode), &db);
  Note(run, "Open", s);
  if (!s.ok()) return;
  run->opened = true;
  d->set_db(db.get());
  for (const EpisodeRecord& e : script.singles) Note(run, "Remember", d->Remember(e));
  Note(run, "SetBlock", d->SetBlock(script.block));
  Note(run, "AssertFact", d->AssertFact(script.fact));
  s = d->Begin();
  Note(run, "Begin", s);
  if (s.ok()) {
    for (const EpisodeRecord& e : script.batch) Note(run, "Remember (in txn)", d->Remember(e));
    Note(run, "Commit", d->Commit());
  }

  // Reads: an OK answer must agree with what was acknowledged (the in-doubt
  // transaction may show on this handle too).
  const Oracle& acked = d->acked();
  std::set<uint64_t> doubt_ids;
  for (const Txn& t : d->in_doubt())
    for (const EpisodeRecord& e : t.episodes) doubt_ids.insert(e.id);
  if (!acked.episodes().empty()) {
    for (uint64_t id : {acked.episodes().begin()->first, acked.episodes().rbegin()->first}) {
      EpisodeRecord got;
      s = db->GetEpisode(id, &got);
      Note(run, "GetEpisode", s);
      if (s.ok() && !(got == acked.episodes().at(id))) {
        run->violations.push_back("GetEpisode returned OK with " + Describe(got) + ", acked was " +
                                  Describe(acked.episodes().at(id)));
      }
    }
  }
  std::vector<uint64_t> ids;
  s = db->ListEpisodeIds("u0", nullptr, &ids);
  Note(run, "ListEpisodeIds", s);
  if (s.ok()) {
    std::vector<uint64_t> want;
    for (const auto& [id, e] : acked.episodes())
      if (e.user_id == "u0") want.push_back(id);
    std::vector<uint64_t> acked_seen;
    for (uint64_t id : ids) {
      if (acked.episodes().count(id)) {
        acked_seen.push_back(id);
      } else if (!doubt_ids.count(id)) {
        run->violations.push_back("ListEpisodeIds returned unknown id " + std::to_string(id));
      }
    }
    if (acked_seen != want) run->violations.push_back("ListEpisodeIds lost acknowledged ids");
  }
  format::BlockRecord block;
  s = db->GetBlock(script.block.user_id, script.block.name, &block);
  if (s.code() != kNotFound) Note(run, "GetBlock", s);
  const format::BlockRecord* want_block = acked.Block(script.block.user_id, script.block.name);
  if (s.ok() && want_block && !(block == *want_block)) {
    run->violations.push_back("GetBlock returned OK with " + Describe(block) + ", acked was " +
                              Describe(*want_block));
  }
  if (s.code() == kNotFound && want_block) {
    run->violations.push_back("GetBlock lost an acknowledged block");
  }
  std::vector<format::FactRecord> facts;
  s = db->ListFacts(script.fact.user_id, nullptr, nullptr, &facts);
  Note(run, "ListFacts", s);
  if (s.ok()) {
    for (const auto& [id, f] : acked.facts()) {
      if (f.user_id == script.fact.user_id &&
          std::find(facts.begin(), facts.end(), f) == facts.end()) {
        run->violations.push_back("ListFacts lost acknowledged " + Describe(f));
      }
    }
  }
  Stats st;
  s = db->GetStats(&st);
  Note(run, "GetStats", s);
  if (s.ok() && st.episodes < acked.episode_count()) {
    run->violations.push_back("GetStats counts fewer episodes than were acknowledged");
  }
  Note(run, "Close", db->Close());
  db.reset();
  d->set_db(nullptr);
}

// After the faults are cleared: the file (if it was created) opens, holds the
// acknowledged state or that plus exactly one in-doubt transaction, takes one
// more write, and a reopen shows it.
void VerifyAfterFaults(Env* base, const Driver& d, ScriptRun* run, uint64_t* present) {
  if (!base->Exists(kPath)) {
    if (d.acked().commits() != 1)
      run->violations.push_back("file missing after acknowledged commits");
    return;
  }
  TestClock c;
  Options opts = TestOptions(base, &c);
  opts.create = false;
  std::unique_ptr<Database> db;
  Status s = Database::Open(kPath, opts, &db);
  if (!s.ok()) {
    run->violations.push_back("reopen failed: " + s.ToString());
    return;
  }
  std::string why;
  int which = -1;
  if (!MatchesAckedOrOneInDoubt(db.get(), d.acked(), d.in_doubt(), &why, &which)) {
    run->violations.push_back("after reopen: " + why);
    return;
  }
  if (which >= 0) (*present)++;
  Driver more(db.get(), &c);
  more.mutable_acked() =
      which >= 0 ? d.acked().With(d.in_doubt()[static_cast<size_t>(which)]) : d.acked();
  EpisodeRecord e;
  e.user_id = "u9";
  e.session_id = "after";
  e.role = "user";
  e.text = "written after the faults were cleared";
  e.ts = 42;
  s = more.Remember(e);
  if (!s.ok()) run->violations.push_back("write after reopen failed: " + s.ToString());
  for (const std::string& err : more.errors()) run->violations.push_back(err);
  s = db->Close();
  if (!s.ok()) run->violations.push_back("close after reopen failed: " + s.ToString());
  db.reset();
  s = Database::Open(kPath, opts, &db);
  if (!s.ok()) {
    run->violations.push_back("second reopen failed: " + s.ToString());
    return;
  }
  std::string d2 = more.acked().Diff(db.get());
  if (!d2.empty()) run->violations.push_back("after the write and a reopen: " + d2);
}

TEST_SUITE_BEGIN("fault");

TEST_CASE("failing the Nth I/O call of a workload never returns OK with data lost") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  const Script script = MakeScript(seed);
  auto start = std::chrono::steady_clock::now();

  struct Mode {
    const char* name;
    Fault fault;
    uint32_t mask;
  };
  const Mode modes[] = {{"EIO", Fault::kEio, kOpAll},
                        {"ENOSPC", Fault::kEnospc, kOpAll},
                        {"short write", Fault::kShortWrite, kOpWrite}};
  uint64_t runs = 0, in_doubt_present = 0, violations = 0;
  std::map<std::string, int> all_codes;
  std::map<std::string, uint64_t> counts;  // ops per (sync mode, fault mode)
  for (SyncMode sync : {SyncMode::kFull, SyncMode::kNormal}) {
    // A clean run: M operations, and the script's state for reference.
    uint64_t clean_ops = 0;
    {
      std::unique_ptr<Env> base = engine::NewMemEnv();
      FaultEnv fenv(base.get());
      TestClock c;
      Driver d(nullptr, &c);
      ScriptRun run;
      RunScript(&fenv, script, sync, &c, &d, &run);
      REQUIRE(run.opened);
      REQUIRE(run.failures == 0);
      REQUIRE(d.acked().commits() == 1 + 20 + 2 + 1);
      clean_ops = fenv.ops();
      VerifyAfterFaults(base.get(), d, &run, &in_doubt_present);
      CHECK(run.violations.empty());
    }
    for (const Mode& mode : modes) {
      for (bool persistent : {false, true}) {
        const std::string sync_name = SyncName(sync), mode_name = mode.name;
        CAPTURE(sync_name);
        CAPTURE(mode_name);
        CAPTURE(persistent);
        uint64_t n = 1;
        for (;; n++) {
          CAPTURE(n);
          std::unique_ptr<Env> base = engine::NewMemEnv();
          FaultEnv fenv(base.get());
          fenv.FailAt(n, mode.fault, persistent, mode.mask);
          TestClock c;
          Driver d(nullptr, &c);
          ScriptRun run;
          RunScript(&fenv, script, sync, &c, &d, &run);
          if (fenv.faults_hit() == 0) break;  // n is past the last matching call
          runs++;
          CHECK(run.failures > 0);  // an injected fault is never swallowed silently
          for (const std::string& e : d.errors()) run.violations.push_back(e);
          fenv.ClearFaults();
          VerifyAfterFaults(base.get(), d, &run, &in_doubt_present);
          for (const auto& [code, k] : run.codes) all_codes[code] += k;
          if (!run.violations.empty()) {
            violations++;
            std::string all;
            for (size_t i = 0; i < run.violations.size() && i < 3; i++)
              all += "\n  " + run.violations[i];
            if (run.violations.size() > 3)
              all += "\n  (" + std::to_string(run.violations.size() - 3) + " more)";
            FAIL_CHECK("N=" << n << " (" << sync_name << ", " << mode_name << ", "
                            << std::string(persistent ? "persistent" : "one-shot") << "):" << all);
          }
        }
        counts[std::string(SyncName(sync)) + "/" + mode.name] = n - 1;
        // Every call site of the clean run was failed once (EIO and ENOSPC
        // count every call; the short write counts writes).
        if (mode.mask == kOpAll) CHECK(n - 1 == clean_ops);
      }
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string codes, sizes;
  for (const auto& [code, k] : all_codes) codes += " " + code + "=" + std::to_string(k);
  for (const auto& [name, m] : counts) sizes += " " + name + "=" + std::to_string(m);
  MESSAGE(runs << " fault runs in " << secs << " s; calls per workload:" << sizes
               << "; runs breaking the contract: " << violations
               << "; in-doubt transaction present after reopen " << in_doubt_present
               << " times; failure codes seen:" << codes);
  CHECK(violations == 0);
}

TEST_CASE("after a failed sync the handle refuses writes until reopened") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  // The failing sync is either a commit's own sync, or the one a new handle
  // makes when it first takes the write lock on a file whose last bytes are
  // not known to be synced (invariant (7)) -- here, written under sync=off.
  for (bool first_write : {false, true}) {
    CAPTURE(first_write);
    std::mt19937_64 rng(seed);
    std::unique_ptr<Env> base = engine::NewMemEnv();
    FaultEnv fenv(base.get());
    TestClock clock;
    Oracle acked;
    uint64_t n = 1;
    {
      std::unique_ptr<Database> db = MustOpen(
          kPath, TestOptions(&fenv, &clock, first_write ? SyncMode::kOff : SyncMode::kFull));
      Driver d(db.get(), &clock);
      for (int i = 0; i < 5; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
      REQUIRE(d.SetBlock(RandomBlock(rng, n++)).ok());
      acked = d.acked();
    }
    std::unique_ptr<Database> db = MustOpen(kPath, TestOptions(&fenv, &clock));
    Driver d(db.get(), &clock);
    d.mutable_acked() = acked;
    if (!first_write) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
    acked = d.acked();

    fenv.FailAt(1, Fault::kEio, /*persistent=*/true, kOpSync);
    const std::string bytes_before = FileBytes(base.get(), kPath);
    Status s = d.Remember(RandomEpisode(rng, kDim, n++));
    CHECK(s.code() == kIoErrFsync);
    CHECK(fenv.faults_hit() == 1);
    // The lock-time sync fails before the transaction is written; a commit's
    // own sync fails after (perhaps over the zeros of the log's reserve).
    const bool written = FileBytes(base.get(), kPath) != bytes_before;
    CHECK(written == !first_write);

    // Every later write is refused without touching the file.
    uint64_t ops = fenv.ops();
    CHECK(d.Remember(RandomEpisode(rng, kDim, n++)).code() == kIoErrSticky);
    CHECK(d.SetBlock(RandomBlock(rng, n++)).code() == kIoErrSticky);
    CHECK(d.AssertFact(RandomFact(rng, n++)).code() == kIoErrSticky);
    CHECK(fenv.ops() == ops);
    REQUIRE(d.Begin().ok());
    CHECK(d.Remember(RandomEpisode(rng, kDim, n++)).code() == kIoErrSticky);
    CHECK(d.Commit().ok());  // nothing was added to the transaction
    CHECK(d.errors().empty());

    // Reads still work, and show at least what was acknowledged.
    for (const auto& [id, e] : acked.episodes()) {
      EpisodeRecord got;
      REQUIRE(db->GetEpisode(id, &got).ok());
      CHECK(got == e);
    }
    std::vector<format::FactRecord> facts;
    CHECK(db->ListFacts("u0", nullptr, nullptr, &facts).ok());
    Stats st;
    REQUIRE(db->GetStats(&st).ok());
    CHECK(st.episodes >= acked.episode_count());

    // fsync is never retried: not by later calls, not by Close.
    CHECK(db->Close().ok());
    CHECK(fenv.faults_hit() == 1);
    db.reset();

    // Reopened, the in-doubt episode is whole or absent, and writes work.
    fenv.ClearFaults();
    db = MustOpen(kPath, TestOptions(&fenv, &clock));
    std::string why;
    int which = -1;
    CHECK_MESSAGE(MatchesAckedOrOneInDoubt(db.get(), acked, d.in_doubt(), &why, &which), why);
    // With the failed commit's own sync, its bytes had been written: present
    // (MemEnv keeps them). With the lock-time sync, nothing had been: absent.
    CHECK(which == (written ? 0 : -1));
    Driver again(db.get(), &clock);
    again.mutable_acked() =
        which >= 0 ? acked.With(d.in_doubt()[static_cast<size_t>(which)]) : acked;
    REQUIRE(again.Remember(RandomEpisode(rng, kDim, n++)).ok());
    CHECK(again.errors().empty());
    db.reset();
    db = MustOpen(kPath, TestOptions(base.get(), &clock));
    CHECK(again.acked().Diff(db.get()) == "");
  }
}

TEST_CASE("a failed write leaves the file usable after reopen") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  for (Fault fault : {Fault::kEio, Fault::kShortWrite}) {
    for (bool batch : {false, true}) {
      CAPTURE(static_cast<int>(fault));
      CAPTURE(batch);
      std::mt19937_64 rng(seed);
      std::unique_ptr<Env> base = engine::NewMemEnv();
      FaultEnv fenv(base.get());
      TestClock clock;
      uint64_t n = 1;
      std::unique_ptr<Database> db = MustOpen(kPath, TestOptions(&fenv, &clock));
      Driver d(db.get(), &clock);
      for (int i = 0; i < 6; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
      REQUIRE(d.AssertFact(RandomFact(rng, n++)).ok());
      const Oracle acked = d.acked();

      fenv.FailAt(1, fault, /*persistent=*/false, kOpWrite);
      Status s;
      if (batch) {
        REQUIRE(d.Begin().ok());
        for (int i = 0; i < 8; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
        REQUIRE(d.SetBlock(RandomBlock(rng, n++)).ok());
        s = d.Commit();
      } else {
        s = d.Remember(RandomEpisode(rng, kDim, n++));
      }
      CHECK(s.code() == kIoErrWrite);
      CHECK(fenv.faults_hit() == 1);
      // The fault was one-shot, but the handle stays refused (invariant (6)).
      CHECK(d.Remember(RandomEpisode(rng, kDim, n++)).code() == kIoErrSticky);
      db.reset();

      // Nothing of the failed transaction is visible: its commit page (the
      // last bytes of the single write) never reached the file.
      db = MustOpen(kPath, TestOptions(&fenv, &clock));
      CHECK(acked.Diff(db.get()) == "");
      Stats st;
      REQUIRE(db->GetStats(&st).ok());
      if (fault == Fault::kShortWrite) {
        CHECK(st.torn_bytes > 0);  // half of the write landed: a torn tail
      } else {
        CHECK(st.torn_bytes == 0);
      }
      Driver again(db.get(), &clock);
      again.mutable_acked() = acked;
      REQUIRE(again.Remember(RandomEpisode(rng, kDim, n++)).ok());
      REQUIRE(again.SetBlock(RandomBlock(rng, n++)).ok());
      CHECK(again.errors().empty());
      REQUIRE(db->GetStats(&st).ok());
      CHECK(st.torn_bytes == 0);
      db.reset();
      db = MustOpen(kPath, TestOptions(base.get(), &clock));
      CHECK(again.acked().Diff(db.get()) == "");
    }
  }
}

TEST_CASE("ENOSPC is reported as AGENTMEM_FULL") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::unique_ptr<Env> base = engine::NewMemEnv();
  FaultEnv fenv(base.get());
  TestClock clock;
  uint64_t n = 1;

  // Creating the file on a full disk.
  fenv.FailAt(1, Fault::kEnospc, /*persistent=*/true, kOpCreate);
  std::unique_ptr<Database> db;
  Status s = Database::Open(kPath, TestOptions(&fenv, &clock), &db);
  CHECK(s.code() == kFull);
  CHECK(db == nullptr);
  CHECK(!base->Exists(kPath));
  fenv.ClearFaults();

  db = MustOpen(kPath, TestOptions(&fenv, &clock));
  Driver d(db.get(), &clock);
  for (int i = 0; i < 4; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
  const Oracle acked = d.acked();

  // An autocommit write, then (on a new handle) an explicit transaction.
  fenv.FailAt(1, Fault::kEnospc, /*persistent=*/true, kOpWrite);
  s = d.Remember(RandomEpisode(rng, kDim, n++));
  CHECK(s.code() == kFull);
  CHECK(s.primary() == kFull);
  CHECK(CodeName(s.code()) == std::string("AGENTMEM_FULL"));
  CHECK(d.SetBlock(RandomBlock(rng, n++)).code() == kIoErrSticky);
  CHECK(acked.Diff(db.get()) == "");  // reads still work
  db.reset();

  db = MustOpen(kPath, TestOptions(&fenv, &clock));
  d.set_db(db.get());
  REQUIRE(d.Begin().ok());
  for (int i = 0; i < 3; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
  s = d.Commit();
  CHECK(s.code() == kFull);
  db.reset();

  // Space freed: the file holds what was acknowledged and takes writes.
  fenv.ClearFaults();
  db = MustOpen(kPath, TestOptions(&fenv, &clock));
  CHECK(acked.Diff(db.get()) == "");
  Driver again(db.get(), &clock);
  again.mutable_acked() = acked;
  REQUIRE(again.Remember(RandomEpisode(rng, kDim, n++)).ok());
  db.reset();
  db = MustOpen(kPath, TestOptions(base.get(), &clock));
  CHECK(again.acked().Diff(db.get()) == "");
}

TEST_CASE(
    "a one-shot I/O error while refreshing the snapshot does not make the file look corrupt") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::unique_ptr<Env> base = engine::NewMemEnv();
  TestClock clock;
  uint64_t n = 1;

  SUBCASE("on the writer: the size query when taking the write lock fails once") {
    FaultEnv fenv(base.get());
    std::unique_ptr<Database> db = MustOpen(kPath, TestOptions(&fenv, &clock));
    Driver d(db.get(), &clock);
    for (int i = 0; i < 3; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
    // Remember: TryLockWrite, then the refresh scan's File::Size -- fail that.
    fenv.FailAt(1, Fault::kEio, /*persistent=*/false, kOpSize);
    Status s = d.Remember(RandomEpisode(rng, kDim, n++));
    CHECK(s.primary() == kIoErr);
    CHECK(fenv.faults_hit() == 1);
    // The fault is gone and nothing was written: the handle works as before.
    s = d.Remember(RandomEpisode(rng, kDim, n++));
    CHECK_MESSAGE(s.ok(), s.ToString());
    CHECK(d.errors().empty());
    CHECK(d.acked().Diff(db.get()) == "");
    db.reset();
    db = MustOpen(kPath, TestOptions(base.get(), &clock));
    CHECK(d.acked().Diff(db.get()) == "");
  }

  SUBCASE("on a reader: the refresh scan's size query fails once after another handle wrote") {
    FaultEnv reader_env(base.get());
    std::unique_ptr<Database> writer = MustOpen(kPath, TestOptions(base.get(), &clock));
    Driver d(writer.get(), &clock);
    REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
    std::unique_ptr<Database> reader = MustOpen(kPath, TestOptions(&reader_env, &clock));
    CHECK(d.acked().Diff(reader.get()) == "");
    REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
    // RefreshForRead's own size query passes (and sees the file grew); the
    // scan's size query fails.
    reader_env.FailAt(2, Fault::kEio, /*persistent=*/false, kOpSize);
    Stats st;
    Status s = reader->GetStats(&st);
    CHECK(s.primary() == kIoErr);
    CHECK(reader_env.faults_hit() == 1);
    s = reader->GetStats(&st);
    CHECK_MESSAGE(s.ok(), s.ToString());
    CHECK(d.acked().Diff(reader.get()) == "");
  }
}

// ------------------------------------------------------------------ sync costs

struct SyncCounting {
  std::unique_ptr<Env> mem = engine::NewMemEnv();
  TempDir dir;
};

TEST_CASE("a commit of one episode with sync=full costs exactly one data sync") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  SyncCounting where;
  for (bool real : {false, true}) {
    CAPTURE(real);
    std::mt19937_64 rng(seed);
    FaultEnv fenv(real ? Env::Posix() : where.mem.get());
    const std::string path = real ? where.dir.File("syncs.agentmem") : std::string(kPath);
    TestClock clock;
    uint64_t n = 1;
    Driver d(nullptr, &clock);
    // A first writer with sync=off leaves a commit that nobody synced.
    {
      std::unique_ptr<Database> db = MustOpen(path, TestOptions(&fenv, &clock, SyncMode::kOff));
      d.set_db(db.get());
      REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
      REQUIRE(db->Close().ok());
    }
    REQUIRE(fenv.syncs() == 0);  // creation is durable through CreateAtomic; off never syncs

    // The rule (invariants (4) and (7)): one sync per commit, plus one the
    // first time a handle takes the write lock on a file with bytes not known
    // to be synced -- as here. So 100 commits cost exactly 101 syncs: 2 for
    // the first, 1 for each later one.
    std::unique_ptr<Database> db = MustOpen(path, TestOptions(&fenv, &clock));
    d.set_db(db.get());
    for (int i = 0; i < 100; i++) {
      uint64_t before = fenv.syncs();
      REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
      CHECK(fenv.syncs() - before == (i == 0 ? 2u : 1u));
    }
    CHECK(fenv.syncs() == 101);
    Stats st;
    REQUIRE(db->GetStats(&st).ok());
    CHECK(st.syncs == 101);
    // A transaction of 20 episodes is one commit: one sync.
    REQUIRE(d.Begin().ok());
    for (int i = 0; i < 20; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
    REQUIRE(d.Commit().ok());
    CHECK(fenv.syncs() == 102);
    // Reads cost none. Every commit is already synced, so close syncs at most
    // once (to record that in a superblock, if the engine does).
    CHECK(d.acked().Diff(db.get()) == "");
    CHECK(fenv.syncs() == 102);
    REQUIRE(db->Close().ok());
    const uint64_t at_close = fenv.syncs() - 102;
    CHECK(at_close <= 1);
    db.reset();
    // A new handle after a clean close: its first commit costs 1 sync, or 2
    // if the engine cannot tell that the file was synced; later ones cost 1.
    db = MustOpen(path, TestOptions(&fenv, &clock));
    d.set_db(db.get());
    uint64_t before = fenv.syncs();
    REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
    const uint64_t first_after_close = fenv.syncs() - before;
    CHECK(first_after_close >= 1);
    CHECK(first_after_close <= 2);
    for (int i = 0; i < 10; i++) {
      before = fenv.syncs();
      REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
      CHECK(fenv.syncs() - before == 1);
    }
    CHECK(d.errors().empty());
    MESSAGE(std::string(real ? "real file" : "MemEnv")
            << ": 100 single-episode commits cost " << 101 << " syncs (100 + the one-time "
            << "lock sync); close cost " << at_close << "; first commit after a clean close cost "
            << first_after_close);
  }
}

TEST_CASE("sync=normal syncs only at close") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::unique_ptr<Env> base = engine::NewMemEnv();
  FaultEnv fenv(base.get());
  TestClock clock;
  uint64_t n = 1;
  std::unique_ptr<Database> db = MustOpen(kPath, TestOptions(&fenv, &clock, SyncMode::kNormal));
  Driver d(db.get(), &clock);
  for (int i = 0; i < 100; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
  REQUIRE(d.Begin().ok());
  for (int i = 0; i < 20; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
  REQUIRE(d.Commit().ok());
  REQUIRE(d.SetBlock(RandomBlock(rng, n++)).ok());
  CHECK(d.acked().Diff(db.get()) == "");
  CHECK(fenv.syncs() == 0);
  REQUIRE(db->Close().ok());
  // The data sync, and at most one more to record it (a superblock).
  const uint64_t at_close = fenv.syncs();
  CHECK(at_close >= 1);
  CHECK(at_close <= 2);
  CHECK(db->Close().ok());  // a second close does nothing
  CHECK(fenv.syncs() == at_close);
  db.reset();
  // A read-only handle never syncs.
  Options ro = TestOptions(&fenv, &clock, SyncMode::kNormal);
  ro.read_only = true;
  db = MustOpen(kPath, ro);
  CHECK(d.acked().Diff(db.get()) == "");
  REQUIRE(db->Close().ok());
  CHECK(fenv.syncs() == at_close);
  CHECK(d.errors().empty());
}

TEST_CASE("sync=off never syncs") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::unique_ptr<Env> base = engine::NewMemEnv();
  FaultEnv fenv(base.get());
  TestClock clock;
  uint64_t n = 1;
  Driver d(nullptr, &clock);
  for (int session = 0; session < 2; session++) {
    std::unique_ptr<Database> db = MustOpen(kPath, TestOptions(&fenv, &clock, SyncMode::kOff));
    d.set_db(db.get());
    for (int i = 0; i < 100; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
    REQUIRE(d.Begin().ok());
    for (int i = 0; i < 20; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
    REQUIRE(d.Commit().ok());
    REQUIRE(d.AssertFact(RandomFact(rng, n++)).ok());
    REQUIRE(db->Close().ok());
    CHECK(fenv.syncs() == 0);
    CHECK(d.errors().empty());
  }
  std::unique_ptr<Database> db = MustOpen(kPath, TestOptions(base.get(), &clock, SyncMode::kOff));
  CHECK(d.acked().Diff(db.get()) == "");
  Stats st;
  REQUIRE(db->GetStats(&st).ok());
  CHECK(st.episodes == 2 * 120);
  CHECK(st.syncs == 0);
}

TEST_SUITE_END();

}  // namespace
}  // namespace agentmem::test

// tests/reliability/worker.cc -- the helper processes of the reliability suite
// (spawned by reliability_tests; never run by hand except to debug).
//
//   reliability_worker kill-writer PATH SEED FIRST_TXN MAX_TXNS MODE KILL_AT
//       R2. Opens PATH (creating it) with the workload options and commits
//       transactions FIRST_TXN, FIRST_TXN+1, ... of workload.h, reporting each
//       one on fd 3 after its commit returned OK. MODE says how it dies:
//         wait      -- it runs until the parent's SIGKILL (or MAX_TXNS);
//         before N  -- it SIGKILLs itself just before its Nth mutating I/O
//                      call (write, sync, truncate, create);
//         after N   -- just after the Nth;
//         tear N    -- in the middle of the Nth: a write writes a random prefix
//                      of its bytes first (a write cut short by the kill);
//                      a sync or truncate is killed just after.
//   reliability_worker ledger-writer PATH SECONDS PACE_US
//       R7. Appends ledger transactions (ledger.h) for SECONDS, one every
//       PACE_US microseconds at most, reporting each on fd 3.
//   reliability_worker reader PATH SECONDS
//       R7. Opens PATH read-only and checks snapshots for SECONDS; reports the
//       number checked on fd 3; exits 0, or 1 with the inconsistency on stderr.
//
// Exit status: 0 done; 1 a check failed; 2 bad arguments; 3 an API call
// failed (the message is on stderr).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "tests/reliability/ledger.h"
#include "tests/reliability/workload.h"

namespace agentmem::reliability {
namespace {

void Send(const Report& r) {
  ssize_t n;
  do {
    n = write(kReportFd, &r, sizeof r);
  } while (n < 0 && errno == EINTR);
}

[[noreturn]] void Die(int code, const std::string& msg) {
  std::fprintf(stderr, "reliability_worker: %s\n", msg.c_str());
  std::fflush(stderr);
  _exit(code);
}

// ------------------------------------------------------------ KillEnv

enum class KillMode { kWait, kBefore, kAfter, kTear };

// Wraps Env::Posix() and kills the process at the Nth mutating call.
class KillEnv : public engine::Env {
 public:
  KillEnv(KillMode mode, uint64_t kill_at, uint64_t seed)
      : base_(engine::Env::Posix()), mode_(mode), kill_at_(kill_at), rng_(seed) {}

  // Runs every mutating call (`call`), killing the process around the
  // kill_at-th: before it, after it, or -- for kTear on a write of 2 bytes or
  // more -- after writing only a random prefix of `*write` (other calls are
  // killed after, under kTear). `write` is the data of a write, else nullptr.
  template <typename F>
  Status Mutate(std::string_view* write, F&& call) {
    uint64_t n = ++ops_;
    if (mode_ == KillMode::kWait || n != kill_at_) return call();
    if (mode_ == KillMode::kBefore) raise(SIGKILL);
    if (mode_ == KillMode::kTear && write && write->size() > 1) {
      *write = write->substr(0, 1 + rng_() % (write->size() - 1));
      call().IgnoreError();
      raise(SIGKILL);
    }
    Status s = call();
    raise(SIGKILL);
    return s;
  }

  class KillFile : public engine::File {
   public:
    KillFile(KillEnv* env, std::unique_ptr<engine::File> f) : env_(env), f_(std::move(f)) {}
    Status ReadAt(uint64_t offset, size_t n, std::string* out) override {
      return f_->ReadAt(offset, n, out);
    }
    Status WriteAt(uint64_t offset, std::string_view data) override {
      return env_->Mutate(&data, [&] { return f_->WriteAt(offset, data); });
    }
    Status Sync() override {
      return env_->Mutate(nullptr, [&] { return f_->Sync(); });
    }
    Status Truncate(uint64_t size) override {
      return env_->Mutate(nullptr, [&] { return f_->Truncate(size); });
    }
    Status Size(uint64_t* size) override { return f_->Size(size); }
    Status TryLockWrite(bool* acquired) override { return f_->TryLockWrite(acquired); }
    Status UnlockWrite() override { return f_->UnlockWrite(); }

   private:
    KillEnv* env_;
    std::unique_ptr<engine::File> f_;
  };

  Status Open(const std::string& path, engine::OpenMode mode,
              std::unique_ptr<engine::File>* out) override {
    std::unique_ptr<engine::File> f;
    AGENTMEM_RETURN_IF_ERROR(base_->Open(path, mode, &f));
    *out = std::make_unique<KillFile>(this, std::move(f));
    return Status::OK();
  }
  Status CreateAtomic(const std::string& path, std::string_view initial) override {
    return Mutate(nullptr, [&] { return base_->CreateAtomic(path, initial); });
  }
  bool Exists(const std::string& path) override { return base_->Exists(path); }
  Status Delete(const std::string& path) override { return base_->Delete(path); }

 private:
  engine::Env* base_;
  KillMode mode_;
  uint64_t kill_at_;
  std::mt19937_64 rng_;
  uint64_t ops_ = 0;
};

uint64_t Num(const char* s) { return std::strtoull(s, nullptr, 10); }

int KillWriter(int argc, char** argv) {
  if (argc != 8) Die(2, "kill-writer PATH SEED FIRST_TXN MAX_TXNS MODE KILL_AT");
  std::string path = argv[2];
  uint64_t seed = Num(argv[3]), first = Num(argv[4]), max_txns = Num(argv[5]);
  std::string m = argv[6];
  KillMode mode = m == "wait"     ? KillMode::kWait
                  : m == "before" ? KillMode::kBefore
                  : m == "after"  ? KillMode::kAfter
                  : m == "tear"   ? KillMode::kTear
                                  : (Die(2, "unknown mode " + m), KillMode::kWait);
  uint64_t kill_at = Num(argv[7]);
  KillEnv env(mode, kill_at, seed ^ (first << 20) ^ kill_at);
  test::TestClock clock;
  clock.now = TxnClockBase(first);
  std::unique_ptr<engine::Database> db;
  Status s = engine::Database::Open(path, WorkloadOptions(&env, &clock), &db);
  if (!s.ok()) Die(3, "open " + path + ": " + s.ToString());
  Send(Report{Report::kReady, first, 0, 0});
  std::vector<uint64_t> ids;
  for (uint64_t t = first; t < first + max_txns; t++) {
    s = RunTxn(db.get(), &clock, PlanTxn(seed, t), t, &ids);
    if (!s.ok()) Die(3, "transaction " + std::to_string(t) + ": " + s.ToString());
    Send(Report{Report::kAcked, t, ids.empty() ? 0 : ids.front(), ids.empty() ? 0 : ids.back()});
  }
  s = db->Close();
  if (!s.ok()) Die(3, "close: " + s.ToString());
  return 0;
}

int LedgerWriter(int argc, char** argv) {
  if (argc != 5) Die(2, "ledger-writer PATH SECONDS PACE_US");
  std::string path = argv[2];
  double seconds = std::strtod(argv[3], nullptr);
  auto pace = std::chrono::microseconds(Num(argv[4]));
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                            kLedgerOptions);
  if (rc != AGENTMEM_OK) Die(3, std::string("open: ") + agentmem_errmsg(db));
  LedgerState st;
  std::string err = ReadLedger(db, &st);
  if (!err.empty()) Die(3, err);
  Send(Report{Report::kReady, st.t, 0, 0});
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + std::chrono::duration<double>(seconds);
  auto next = start;
  while (std::chrono::steady_clock::now() < deadline) {
    rc = WriteLedgerTxn(db, &st, &err);
    if (rc != AGENTMEM_OK) Die(3, "transaction " + std::to_string(st.t + 1) + ": " + err);
    Send(Report{Report::kAcked, st.t, st.count, st.last_id});
    next += pace;
    std::this_thread::sleep_until(next);
  }
  rc = agentmem_close(db);
  if (rc != AGENTMEM_OK) Die(3, std::string("close: ") + agentmem_errstr(rc));
  return 0;
}

int Reader(int argc, char** argv) {
  if (argc != 4) Die(2, "reader PATH SECONDS");
  std::string path = argv[2];
  double seconds = std::strtod(argv[3], nullptr);
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READONLY, kLedgerOptions);
  if (rc != AGENTMEM_OK) Die(3, std::string("open read-only: ") + agentmem_errmsg(db));
  Send(Report{Report::kReady, 0, 0, 0});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  ReaderResult r = RunReader(db, [&] { return std::chrono::steady_clock::now() >= deadline; });
  Send(Report{Report::kReads, r.snapshots, r.full_scans, r.recalls});
  agentmem_close(db);
  if (!r.error.empty()) Die(1, r.error);
  return 0;
}

}  // namespace
}  // namespace agentmem::reliability

int main(int argc, char** argv) {
  using namespace agentmem::reliability;
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "kill-writer") return KillWriter(argc, argv);
  if (cmd == "ledger-writer") return LedgerWriter(argc, argv);
  if (cmd == "reader") return Reader(argc, argv);
  Die(2, "usage: reliability_worker kill-writer|ledger-writer|reader ...");
}

// tests/reliability/nomem_test.cc -- R4: allocation failure. This file
// replaces the global operator new/delete of reliability_tests with counting
// versions that can fail the Nth allocation (std::bad_alloc, or nullptr for
// the nothrow forms). Disarmed, they only count.
//
// For each N of a subset, a forked child runs a scripted workload through the
// C API with allocation N failing once, then checks: every call returned OK or
// AGENTMEM_NOMEM (never a crash, never another code); no allocation is left
// over once every handle is closed (a leak count that works without ASan --
// `make asan` adds LeakSanitizer); the file reopens with the integrity check
// clean and every episode whose remember returned OK reads back intact.
//
// Only C++ allocations are counted: malloc/calloc (the C API's result structs,
// sqlite3, zstd) are not failed here.
#include <doctest/doctest.h>

#include <agentmem.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "engine/database.h"
#include "tests/reliability/spawn.h"
#include "tests/util/temp_dir.h"

// Clang's sanitizer runtimes are linked statically and define operator new
// themselves, so the replacement is left out of clang sanitizer builds (the
// test case then says so and checks nothing). GCC's are shared libraries, which
// the replacement overrides: `make asan` runs this test under ASan and LSan.
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define AGENTMEM_NOMEM_UNAVAILABLE 1
#endif
#endif

namespace {

std::atomic<long> g_live{0};          // allocations not yet freed
std::atomic<long> g_count{0};         // allocations since Arm()
std::atomic<long> g_fail_at{0};       // fail the allocation with this count (0: never)
std::atomic<long> g_failed{0};        // allocations failed

#ifndef AGENTMEM_NOMEM_UNAVAILABLE
void* Allocate(std::size_t n, bool nothrow) {
  long c = g_count.fetch_add(1, std::memory_order_relaxed) + 1;
  long f = g_fail_at.load(std::memory_order_relaxed);
  if (f != 0 && c == f) {
    g_failed.fetch_add(1, std::memory_order_relaxed);
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  void* p = std::malloc(n ? n : 1);
  if (!p) {
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  g_live.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void Release(void* p) {
  if (!p) return;
  g_live.fetch_sub(1, std::memory_order_relaxed);
  std::free(p);
}

void* AllocateAligned(std::size_t n, std::align_val_t al, bool nothrow) {
  long c = g_count.fetch_add(1, std::memory_order_relaxed) + 1;
  long f = g_fail_at.load(std::memory_order_relaxed);
  if (f != 0 && c == f) {
    g_failed.fetch_add(1, std::memory_order_relaxed);
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  std::size_t a = static_cast<std::size_t>(al);
  void* p = std::aligned_alloc(a, (n + a - 1) / a * a);
  if (!p) {
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  g_live.fetch_add(1, std::memory_order_relaxed);
  return p;
}
#endif

}  // namespace

#ifndef AGENTMEM_NOMEM_UNAVAILABLE
void* operator new(std::size_t n) { return Allocate(n, false); }
void* operator new[](std::size_t n) { return Allocate(n, false); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return Allocate(n, true); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return Allocate(n, true); }
void* operator new(std::size_t n, std::align_val_t a) { return AllocateAligned(n, a, false); }
void* operator new[](std::size_t n, std::align_val_t a) { return AllocateAligned(n, a, false); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return AllocateAligned(n, a, true);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return AllocateAligned(n, a, true);
}
void operator delete(void* p) noexcept { Release(p); }
void operator delete[](void* p) noexcept { Release(p); }
void operator delete(void* p, std::size_t) noexcept { Release(p); }
void operator delete[](void* p, std::size_t) noexcept { Release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { Release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { Release(p); }
void operator delete(void* p, std::align_val_t) noexcept { Release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { Release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { Release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { Release(p); }
#endif

namespace agentmem::reliability {
namespace {

// Exit codes of a workload child (LeakSanitizer's own is 23).
enum : int {
  kChildOk = 0,
  kChildBadCode = 40,  // a call returned something other than OK / NOMEM
  kChildLeak = 41,
  kChildReopen = 42,   // the file does not reopen cleanly
  kChildLost = 43,     // an acknowledged episode is missing or changed
  kChildThrew = 44,    // an exception escaped a C API call
  // Known engine bugs (docs/testing.md, R4), counted and reported rather than
  // failed until they are fixed:
  kKnownGraphKeepsLabel = 51,  // after a failed commit the handle's HNSW graph keeps the
                               // new label: later writes fail with CONSTRAINT
  kKnownHnswInternal = 52,     // hnsw out of memory reported as AGENTMEM_INTERNAL
  kKnownCloseInternal = 53,    // agentmem_close maps bad_alloc to AGENTMEM_INTERNAL
  kKnownOpenThrows = 54,       // agentmem_open_v2 lets bad_alloc escape (SetLive outside try)
  kKnownLeak = 55,             // allocations left over after a failed remember
  kKnownCrashAfterFailure = 57,  // SIGSEGV in a call after an earlier call failed (bug 1)
  kKnownSelfCorrupt = 56,      // after a failed commit the same handle reports its own
                               // transaction as "episode id out of order" (CORRUPT)
};
const char* const kKnownNames[] = {
    "after a failed commit later writes fail with CONSTRAINT (hnsw label already in the index)",
    "hnsw out of memory is reported as AGENTMEM_INTERNAL",
    "agentmem_close reports a failed allocation as AGENTMEM_INTERNAL",
    "agentmem_open_v2 lets std::bad_alloc escape",
    "C++ allocations left over after every handle closed",
    "after a failed commit the handle reports the file malformed (episode id out of order)"};

const char* g_last_call = "(none)";  // the last C API call that returned
volatile sig_atomic_t g_prior_failure = 0;  // a call already failed (NOMEM or a known bug)

// In the child: a crash after an earlier failure is the known bug 1; any
// other crash ends the child by the signal (and fails the test).
void OnChildCrash(int sig) {
  if (g_prior_failure) _exit(kKnownCrashAfterFailure);
  signal(sig, SIG_DFL);
  raise(sig);
}

struct Outcome {
  long allocations = 0;  // counted during the workload
  long failed = 0;       // allocations failed
  int nomem = 0;         // calls that returned AGENTMEM_NOMEM
};

// The scripted workload. With fail_at == 0 it only counts. Returns a child
// exit code; *out gets the counts. The first run allocates statics that live
// on (the handle registry, tables): it runs without the leak check.
int Workload(const std::string& path, long fail_at, Outcome* out, bool check_leaks = true) {
  // Acknowledged episodes, in fixed storage (no allocation of the test's own
  // is live across the leak check).
  struct Acked {
    int64_t id;
    const char* text;
  } acked[8];
  int n_acked = 0;
  std::string bad;
  int known = 0;
  const char* lastmsg = "";
  agentmem_db* db = nullptr;
  auto check = [&](int rc, const char* call) {
    g_last_call = call;
    if (rc != AGENTMEM_OK) g_prior_failure = 1;
    lastmsg = db ? agentmem_errmsg(db) : "(no handle)";
    if (rc == AGENTMEM_OK) return true;
    if ((rc & 0xff) == AGENTMEM_NOMEM) {
      if (std::getenv("AGENTMEM_NOMEM_TRACE")) std::fprintf(stderr, "N=%ld: %s: NOMEM\n", fail_at, call);
      out->nomem++;
      return false;
    }
    std::string msg = lastmsg;
    if (std::string_view(call) == "agentmem_close") msg = "";  // the handle is gone
    if (rc == AGENTMEM_CONSTRAINT && msg.find("is already in the index") != std::string::npos) {
      if (!known) known = kKnownGraphKeepsLabel;
      return false;
    }
    if (rc == AGENTMEM_INTERNAL && msg.find("hnsw: out of memory") != std::string::npos) {
      if (!known) known = kKnownHnswInternal;
      return false;
    }
    if ((rc & 0xff) == AGENTMEM_CORRUPT && msg.find("episode id out of order") != std::string::npos) {
      if (!known) known = kKnownSelfCorrupt;
      return false;
    }
    if (rc == AGENTMEM_INTERNAL && std::string_view(call) == "agentmem_close") {
      if (!known) known = kKnownCloseInternal;
      return false;
    }
    // Documented (docs/architecture.md, Recall): after a transaction the graph
    // could not take, recall fails with IOERR_STICKY until reopen.
    if (rc == AGENTMEM_IOERR_STICKY && std::string_view(call) == "agentmem_recall" &&
        (out->nomem > 0 || known)) {
      return false;
    }
    if (bad.empty()) bad = std::string(call) + " returned " + agentmem_errstr(rc) + ": " + msg;
    return false;
  };
  long live_before = g_live.load();
  g_count = 0;
  g_failed = 0;
  g_last_call = "(none)";
  g_prior_failure = 0;
  g_fail_at = fail_at;
  {
    int rc = agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                              "vector_dim=16&sync=normal");
    if (check(rc, "agentmem_open_v2")) {
      const char* texts[] = {"the user likes green tea", "meeting moved to Tuesday",
                             "résumé sent to the agency"};
      for (int i = 0; i < 3; i++) {
        int64_t id = 0;
        rc = agentmem_remember(db, "u", "s", "user", texts[i], 0, i == 1 ? "{\"k\":1}" : nullptr,
                               nullptr, 0, &id);
        if (check(rc, "agentmem_remember")) acked[n_acked++] = {id, texts[i]};
      }
      check(agentmem_block_set(db, "u", "persona", "likes tea", 0, 0), "agentmem_block_set");
      int64_t src[] = {1};
      check(agentmem_fact_assert(db, "u", "user", "likes", "tea", 0.9, 0, 0, src, 1, nullptr),
            "agentmem_fact_assert");
      if (check(agentmem_begin(db), "agentmem_begin")) {
        Acked pending[2];
        int n_pending = 0;
        for (const char* t : {"first of a transaction", "second of a transaction"}) {
          int64_t id = 0;
          if (check(agentmem_remember(db, "u", "s2", "assistant", t, 0, nullptr, nullptr, 0, &id),
                    "agentmem_remember (in a transaction)")) {
            pending[n_pending++] = {id, t};
          }
        }
        if (check(agentmem_commit(db), "agentmem_commit")) {
          for (int i = 0; i < n_pending; i++) acked[n_acked++] = pending[i];
        } else {
          agentmem_rollback(db);
        }
      }
      agentmem_episode* ep = nullptr;
      if (n_acked > 0 &&
          check(agentmem_episode_get(db, acked[0].id, &ep), "agentmem_episode_get")) {
        agentmem_free(ep);
      }
      agentmem_cursor* cur = nullptr;
      if (check(agentmem_episodes(db, "u", nullptr, &cur), "agentmem_episodes")) {
        while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
        }
        if (rc != AGENTMEM_DONE) check(rc, "agentmem_cursor_step");
        agentmem_cursor_close(cur);
      }
      if (check(agentmem_recall(db, "u", "tea Tuesday", nullptr, &cur), "agentmem_recall")) {
        while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
        }
        if (rc != AGENTMEM_DONE) check(rc, "agentmem_cursor_step (recall)");
        agentmem_cursor_close(cur);
      }
      agentmem_stats st;
      check(agentmem_stats_get(db, &st), "agentmem_stats_get");
    }
    rc = agentmem_close(db);
    if (rc != AGENTMEM_OK) check(rc, "agentmem_close");
  }
  g_fail_at = 0;
  out->allocations = g_count.load();
  out->failed = g_failed.load();
  if (!bad.empty()) {
    std::fprintf(stderr, "N=%ld: %s\n", fail_at, bad.c_str());
    return kChildBadCode;
  }
  long leaked = g_live.load() - live_before;
  if (check_leaks && leaked != 0 && !known) known = kKnownLeak;
  // The file reopens clean and holds every acknowledged episode.
  if (!engine::Env::Posix()->Exists(path)) return n_acked == 0 ? kChildOk : kChildLost;
  engine::Options o;
  o.read_only = true;
  std::unique_ptr<engine::Database> reopened;
  Status s = engine::Database::Open(path, o, &reopened);
  std::vector<std::string> problems;
  if (s.ok()) s = reopened->Check(&problems);
  if (!s.ok() || !problems.empty()) {
    std::fprintf(stderr, "N=%ld: reopen: %s\n", fail_at,
                 s.ok() ? problems.front().c_str() : s.ToString().c_str());
    return kChildReopen;
  }
  for (int i = 0; i < n_acked; i++) {
    const int64_t id = acked[i].id;
    const std::string text = acked[i].text;
    format::EpisodeRecord e;
    s = reopened->GetEpisode(static_cast<uint64_t>(id), &e);
    if (!s.ok() || e.text != text) {
      std::fprintf(stderr, "N=%ld: acknowledged episode %lld: %s\n", fail_at,
                   static_cast<long long>(id), s.ok() ? "text differs" : s.ToString().c_str());
      return kChildLost;
    }
  }
  return known ? known : kChildOk;
}

}  // namespace

TEST_CASE("a failed allocation anywhere in a scripted workload gives AGENTMEM_NOMEM and loses nothing") {
#ifdef AGENTMEM_NOMEM_UNAVAILABLE
  MESSAGE("R4 not run: this build's sanitizer runtime owns operator new");
  return;
#endif
  // Files of this test need no durability: put them on tmpfs when there is
  // one (each run syncs on create and close).
  const char* old_tmpdir = std::getenv("TMPDIR");
  std::string saved = old_tmpdir ? old_tmpdir : "";
  if (access("/dev/shm", W_OK) == 0) setenv("TMPDIR", "/dev/shm", 1);
  test::TempDir dir;
  if (old_tmpdir) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  // Warm up (statics allocated once), then count the workload's allocations.
  Outcome warm, count;
  REQUIRE(Workload(dir.File("warm.agentmem"), 0, &warm, false) == kChildOk);
  REQUIRE(Workload(dir.File("count.agentmem"), 0, &count) == kChildOk);
  const long m = count.allocations;
  REQUIRE(m > 100);
  if (const char* only = std::getenv("AGENTMEM_NOMEM_ONLY")) {
    // Debugging one N in this process (no fork), e.g. under gdb.
    Outcome o;
    CHECK(Workload(dir.File("only.agentmem"), std::strtol(only, nullptr, 10), &o) == kChildOk);
    return;
  }
  // Every N up to 200 (open, the first writes), then a stride covering the
  // rest in about 200 runs, and the last 5 (close). AGENTMEM_NOMEM_ALL=1 runs
  // every N.
  const bool all = std::getenv("AGENTMEM_NOMEM_ALL") != nullptr;
  std::vector<long> ns;
  for (long n = 1; n <= m; n += (all || n < 200 ? 1 : std::max<long>(1, (m - 200) / 200))) {
    ns.push_back(n);
  }
  for (long n = std::max(ns.back() + 1, m - 4); n <= m; n++) ns.push_back(n);
  int crashes = 0, bad = 0, runs = 0;
  std::map<int, std::vector<long>> known;
  for (long n : ns) {
    std::string path = dir.File("n" + std::to_string(n) + ".agentmem");
    std::fflush(nullptr);  // the child exits through exit(): nothing buffered twice
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // A crash must end the child, not run doctest's handlers (which would
      // report a crashed test case from the child).
      for (int sig : {SIGABRT, SIGFPE, SIGILL}) signal(sig, SIG_DFL);
      for (int sig : {SIGSEGV, SIGBUS}) signal(sig, OnChildCrash);
      Outcome o;
      int code = kChildThrew;
      try {
        code = Workload(path, n, &o);
      } catch (const std::exception& e) {
        g_fail_at = 0;
        if (std::string_view(g_last_call) == "(none)") {
          code = kKnownOpenThrows;  // nothing returned yet: it came out of agentmem_open_v2
        } else {
          std::fprintf(stderr, "N=%ld: %s escaped the C API call after %s\n", n, e.what(),
                       g_last_call);
        }
      }
      std::fflush(stderr);
      std::exit(code);  // exit, not _exit: LeakSanitizer checks at exit
    }
    int status = Reap(pid);
    runs++;
    if (WIFEXITED(status) && WEXITSTATUS(status) == kKnownCrashAfterFailure) {
      // Known engine bug 1 (docs/testing.md, R4): a bad_alloc inside a commit
      // after its pages were written leaves the catalog half-applied; the next
      // write re-applies the transaction and Catalog::AddEpisodeEntry crashes.
      // AGENTMEM_NOMEM_ONLY=<n> replays one n in-process (under gdb).
      crashes++;
      known[0].push_back(n);
    } else if (!WIFEXITED(status)) {
      crashes++;
      CHECK_MESSAGE(false, "failing allocation " << n << " of " << m << ": the process "
                                                 << DescribeStatus(status) << " after "
                                                 << "no earlier failure");
    } else if (WEXITSTATUS(status) >= kKnownGraphKeepsLabel && WEXITSTATUS(status) <= kKnownSelfCorrupt) {
      known[WEXITSTATUS(status)].push_back(n);
    } else if (WEXITSTATUS(status) != 0) {
      bad++;
      CHECK_MESSAGE(false, "failing allocation " << n << " of " << m << ": exit "
                                                 << WEXITSTATUS(status)
                                                 << (WEXITSTATUS(status) == 23
                                                         ? " (LeakSanitizer found a leak)"
                                                         : " (the reason is printed above)"));
    }
    std::remove(path.c_str());
  }
  MESSAGE("R4: " << runs << " runs failing one of the workload's " << m
                 << " C++ allocations: " << crashes << " crashes, " << bad << " other failures");
  CHECK(bad == 0);
  for (const auto& entry : known) {
    const int code = entry.first;
    const std::vector<long>& list = entry.second;
    std::string at;
    for (size_t i = 0; i < list.size() && i < 8; i++) at += (i ? ", " : "") + std::to_string(list[i]);
    if (list.size() > 8) at += ", ...";
    WARN_MESSAGE(false, "R4 known engine bug (docs/testing.md): "
                            << (code == 0 ? std::string("a later call crashed after a failed commit (SIGSEGV in Catalog::AddEpisodeEntry)")
                                          : std::string(kKnownNames[code - kKnownGraphKeepsLabel]))
                            << ": " << list.size()
                            << " runs (N = " << at << ")");
  }
}

}  // namespace agentmem::reliability

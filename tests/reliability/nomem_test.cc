// tests/reliability/nomem_test.cc -- R4: allocation failure. This file
// replaces the global operator new/delete of reliability_tests with counting
// versions that can fail the Nth allocation (std::bad_alloc, or nullptr for
// the nothrow forms). Disarmed, they only count.
//
// For each N of a subset, a forked child runs a scripted workload through the
// C API (records, recall with a metadata filter, context, profile, export and
// import; or SQL: inserts, one with a JSON embedding, a transaction, selects,
// recall with and without a metadata filter, context(), profile(),
// export_user(), FORGET, VACUUM) with allocation N failing once -- or, in the
// second case, allocation N and every later one until the C API call that
// met it returns (memory stays short while the call handles its failure: the
// out-of-memory paths must not allocate) -- then checks: every call returned
// OK or AGENTMEM_NOMEM (never a crash, never another code); no allocation is left
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

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "engine/memory/database.h"
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
std::atomic<bool> g_persist{false};   // fail every allocation from g_fail_at on

#ifndef AGENTMEM_NOMEM_UNAVAILABLE
void* Allocate(std::size_t n, bool nothrow) {
  long c = g_count.fetch_add(1, std::memory_order_relaxed) + 1;
  long f = g_fail_at.load(std::memory_order_relaxed);
  if (f != 0 && (c == f || (c > f && g_persist.load(std::memory_order_relaxed)))) {
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
  if (f != 0 && (c == f || (c > f && g_persist.load(std::memory_order_relaxed)))) {
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
  kChildLeak = 41,     // C++ allocations left over after every handle closed
  kChildReopen = 42,   // the file does not reopen cleanly
  kChildLost = 43,     // an acknowledged episode is missing or changed
  kChildThrew = 44,    // an exception escaped a C API call
};

const char* g_last_call = "(none)";  // the last C API call that returned

struct Outcome {
  long allocations = 0;  // counted during the workload
  long failed = 0;       // allocations failed
  int nomem = 0;         // calls that returned AGENTMEM_NOMEM
};

// The end of a workload run: the counts; then a wrong code, a leak, or a file
// that does not reopen clean (read-only, integrity check) makes the child's
// exit code. *reopened is the reopened file (null when it was never created,
// which is fine only if nothing was acknowledged).
int EndRun(const std::string& path, long fail_at, const std::string& bad, long live_before,
           bool check_leaks, bool anything_acked, Outcome* out,
           std::unique_ptr<engine::Database>* reopened) {
  g_fail_at = 0;
  g_persist = false;
  out->allocations = g_count.load();
  out->failed = g_failed.load();
  if (!bad.empty()) {
    std::fprintf(stderr, "N=%ld: %s\n", fail_at, bad.c_str());
    return kChildBadCode;
  }
  long leaked = g_live.load() - live_before;
  if (check_leaks && leaked != 0) {
    std::fprintf(stderr, "N=%ld: %ld C++ allocations left over after every handle closed "
                 "(`make asan` names their stacks)\n", fail_at, leaked);
    return kChildLeak;
  }
  if (!engine::Env::Posix()->Exists(path)) return anything_acked ? kChildLost : kChildOk;
  engine::Options o;
  o.read_only = true;
  Status s = engine::Database::Open(path, o, reopened);
  std::vector<std::string> problems;
  if (s.ok()) s = (*reopened)->Check(&problems);
  if (!s.ok() || !problems.empty()) {
    std::fprintf(stderr, "N=%ld: reopen: %s\n", fail_at,
                 s.ok() ? problems.front().c_str() : s.ToString().c_str());
    return kChildReopen;
  }
  return kChildOk;
}

// What a workload's C API call returned: true when it succeeded (OK, ROW,
// DONE). AGENTMEM_NOMEM is counted; AGENTMEM_IOERR_STICKY after a failed
// allocation passes where `sticky_ok`; any other code is the run's first
// wrong one, kept in *bad.
bool Judge(int rc, const char* call, bool sticky_ok, long fail_at, agentmem_db* db, Outcome* out,
           std::string* bad) {
  if (g_failed.load() > 0) g_fail_at = 0;  // the call that met the failure has returned
  g_last_call = call;
  if (rc == AGENTMEM_OK || rc == AGENTMEM_ROW || rc == AGENTMEM_DONE) return true;
  if ((rc & 0xff) == AGENTMEM_NOMEM) {
    if (std::getenv("AGENTMEM_NOMEM_TRACE")) std::fprintf(stderr, "N=%ld: %s: NOMEM\n", fail_at, call);
    out->nomem++;
    return false;
  }
  if (rc == AGENTMEM_IOERR_STICKY && g_failed.load() > 0 && sticky_ok) return false;
  if (bad->empty()) {
    std::string msg = std::string_view(call) == "agentmem_close" || !db ? "" : agentmem_errmsg(db);
    *bad = std::string(call) + " returned " + agentmem_errstr(rc) + ": " + msg;
  }
  return false;
}

// The scripted workload. With fail_at == 0 it only counts; with `persist`,
// allocation fail_at and all after it fail until the C API call that met the
// first one returns. Returns a child exit code; *out gets the counts. The
// first run allocates statics that live on (the handle registry, tables): it
// runs without the leak check.
int Workload(const std::string& path, long fail_at, bool persist, Outcome* out,
             bool check_leaks = true) {
  // Acknowledged episodes, in fixed storage (no allocation of the test's own
  // is live across the leak check).
  struct Acked {
    int64_t id;
    const char* text;
  } acked[8];
  int n_acked = 0;
  std::string bad;
  agentmem_db* db = nullptr;
  // Documented (docs/architecture.md, Recall): after a commit whose episodes
  // the graph could not take for want of memory, recall fails with
  // IOERR_STICKY until the file is reopened; so does context, which recalls.
  auto check = [&](int rc, const char* call) {
    const bool recalls = std::string_view(call).starts_with("agentmem_recall") ||
                         std::string_view(call) == "agentmem_context";
    return Judge(rc, call, recalls, fail_at, db, out, &bad);
  };
  long live_before = g_live.load();
  g_count = 0;
  g_failed = 0;
  g_last_call = "(none)";
  g_persist = persist;
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
      // A metadata filter: its JSON (value, pointer, each candidate's
      // metadata) is read as tokens (engine/json/json_reader.h).
      agentmem_recall_options ro;
      agentmem_recall_options_init(&ro);
      ro.metadata_key = "/k";
      ro.metadata_value = "1.0";
      if (check(agentmem_recall(db, "u", "tea Tuesday", &ro, &cur),
                "agentmem_recall (metadata filter)")) {
        while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
        }
        if (rc != AGENTMEM_DONE) check(rc, "agentmem_cursor_step (metadata filter)");
        agentmem_cursor_close(cur);
      }
      agentmem_stats st;
      check(agentmem_stats_get(db, &st), "agentmem_stats_get");
      // Context, profile, export and import: the JSON is written with
      // JsonWriter and read as tokens, never as nlohmann::json trees (whose
      // destructor allocates: a failure there was std::terminate).
      agentmem_context_item* items = nullptr;
      int n_items = 0;
      if (check(agentmem_context(db, "u", "tea", 200, &items, &n_items), "agentmem_context")) {
        agentmem_free(items);
      }
      char* json = nullptr;
      if (check(agentmem_profile(db, "u", &json), "agentmem_profile")) agentmem_free(json);
      json = nullptr;
      if (check(agentmem_export(db, "u", &json), "agentmem_export")) {
        // Into the same file: every record is there already, so nothing is
        // written, but every line is read and checked.
        int64_t added = 0;
        check(agentmem_import(db, json, &added), "agentmem_import");
        check(agentmem_import_v2(db, json, AGENTMEM_IMPORT_NEW_IDS, &added),
              "agentmem_import_v2 (new ids)");
        agentmem_free(json);
      }
    }
    rc = agentmem_close(db);
    db = nullptr;
    if (rc != AGENTMEM_OK) check(rc, "agentmem_close");
  }
  std::unique_ptr<engine::Database> reopened;
  int code = EndRun(path, fail_at, bad, live_before, check_leaks, n_acked > 0, out, &reopened);
  if (code != kChildOk || !reopened) return code;
  Status s;
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
  return kChildOk;
}

// The SQL workload: the same checks over agentmem_exec / prepare / step. The
// acknowledged episodes are known by text (user "u"); FORGET USER 'v' that
// returned OK must hold after the reopen.
int SqlWorkload(const std::string& path, long fail_at, bool persist, Outcome* out,
                bool check_leaks = true) {
  const char* acked[8];
  int n_acked = 0;
  bool forgot_v = false;
  std::string bad;
  agentmem_db* db = nullptr;
  // As in Workload: recall (or context) after the graph could not take a
  // commit's episodes.
  auto check = [&](int rc, const char* call) {
    const bool recalls = std::string_view(call).find("recall") != std::string_view::npos ||
                         std::string_view(call).find("context(") != std::string_view::npos;
    return Judge(rc, call, recalls, fail_at, db, out, &bad);
  };
  // Runs one statement to its end (every row stepped, then finalized).
  auto run = [&](const char* sql) {
    agentmem_stmt* st = nullptr;
    if (!check(agentmem_prepare(db, sql, -1, &st, nullptr), sql)) return false;
    int rc;
    while ((rc = agentmem_step(st)) == AGENTMEM_ROW) {
      for (int i = 0; i < agentmem_column_count(st); i++) (void)agentmem_column_text(st, i);
    }
    bool ok = check(rc, sql);
    agentmem_finalize(st);
    return ok;
  };
  long live_before = g_live.load();
  g_count = 0;
  g_failed = 0;
  g_last_call = "(none)";
  g_persist = persist;
  g_fail_at = fail_at;
  {
    int rc = agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                              "vector_dim=16&sync=normal");
    if (check(rc, "agentmem_open_v2")) {
      run("INSERT INTO episodes(user_id, text) VALUES ('v', 'an episode of v, to be forgotten')");
      const char* texts[] = {"the user likes green tea", "meeting moved to Tuesday"};
      if (run("INSERT INTO episodes(user_id, session_id, role, text, metadata) VALUES "
              "('u', 's', 'user', 'the user likes green tea', '{\"k\":1}')")) {
        acked[n_acked++] = texts[0];
      }
      if (run("INSERT INTO episodes(user_id, session_id, role, text) VALUES "
              "('u', 's', 'user', 'meeting moved to Tuesday')")) {
        acked[n_acked++] = texts[1];
      }
      // An embedding given as JSON text (read as tokens: engine/json/json_reader.h).
      if (run("INSERT INTO episodes(user_id, session_id, role, text, embedding) VALUES "
              "('u', 's', 'user', 'an episode with its own vector', "
              "'[1, 0.5, -0.25, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2e-3]')")) {
        acked[n_acked++] = "an episode with its own vector";
      }
      run("INSERT INTO blocks(user_id, name, value) VALUES ('u', 'persona', 'likes tea')");
      run("INSERT INTO facts(user_id, subject, predicate, object, source_episode_ids) VALUES "
          "('u', 'user', 'likes', 'tea', '[2]')");
      if (check(agentmem_exec(db,
                              "BEGIN; INSERT INTO episodes(user_id, session_id, text) VALUES "
                              "('u', 's2', 'first of a transaction'); INSERT INTO episodes(user_id, "
                              "session_id, text) VALUES ('u', 's2', 'second of a transaction'); "
                              "COMMIT",
                              nullptr, nullptr, nullptr),
                "agentmem_exec (BEGIN ... COMMIT)")) {
        acked[n_acked++] = "first of a transaction";
        acked[n_acked++] = "second of a transaction";
      } else {
        agentmem_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      }
      // A savepoint rolled back to: its later row never reaches the file.
      if (check(agentmem_exec(db,
                              "BEGIN; INSERT INTO episodes(user_id, text) VALUES ('u', "
                              "'kept by a savepoint'); SAVEPOINT sp; INSERT INTO episodes("
                              "user_id, text) VALUES ('u', 'dropped at a savepoint'), ('u', "
                              "'dropped too'); ROLLBACK TO sp; RELEASE sp; COMMIT",
                              nullptr, nullptr, nullptr),
                "agentmem_exec (SAVEPOINT ... ROLLBACK TO)")) {
        acked[n_acked++] = "kept by a savepoint";
      } else {
        agentmem_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      }
      run("SELECT id, text, metadata FROM episodes WHERE user_id = 'u' ORDER BY id");
      run("SELECT id, score FROM recall('tea Tuesday', 'u', 5)");
      run("SELECT id FROM recall WHERE query = 'tea' AND for_user = 'u' AND "
          "metadata_key = 'k' AND metadata_value = '1'");
      run("SELECT * FROM facts_as_of WHERE for_user = 'u'");
      run("SELECT * FROM stats");
      run("SELECT * FROM context('u', 'tea', 200)");
      run("SELECT profile('u')");
      run("SELECT export_user('u')");
      forgot_v = run("FORGET USER 'v'");
      run("VACUUM");
      run("SELECT count(*) FROM episodes");
    }
    rc = agentmem_close(db);
    db = nullptr;
    if (rc != AGENTMEM_OK) check(rc, "agentmem_close");
  }
  std::unique_ptr<engine::Database> reopened;
  int code = EndRun(path, fail_at, bad, live_before, check_leaks, n_acked > 0, out, &reopened);
  if (code != kChildOk || !reopened) return code;
  Status s;
  std::vector<uint64_t> ids;
  std::vector<std::string> texts;
  s = reopened->ListEpisodeIds("u", nullptr, &ids);
  for (uint64_t id : ids) {
    format::EpisodeRecord e;
    if (s.ok()) s = reopened->GetEpisode(id, &e);
    texts.push_back(e.text);
  }
  for (int i = 0; s.ok() && i < n_acked; i++) {
    if (std::find(texts.begin(), texts.end(), acked[i]) == texts.end()) {
      std::fprintf(stderr, "N=%ld: acknowledged episode \"%s\" is missing\n", fail_at, acked[i]);
      return kChildLost;
    }
  }
  for (const char* dropped : {"dropped at a savepoint", "dropped too"}) {
    if (std::find(texts.begin(), texts.end(), dropped) != texts.end()) {
      std::fprintf(stderr, "N=%ld: \"%s\" was rolled back to a savepoint, but is in the file\n",
                   fail_at, dropped);
      return kChildLost;
    }
  }
  if (s.ok() && forgot_v) s = reopened->ListEpisodeIds("v", nullptr, &ids);
  if (!s.ok() || (forgot_v && !ids.empty())) {
    std::fprintf(stderr, "N=%ld: %s\n", fail_at,
                 s.ok() ? "FORGET USER 'v' returned OK, but v's episode is back" : s.ToString().c_str());
    return kChildLost;
  }
  return kChildOk;
}

// The open of a file with a checkpoint (graph, BM25 indexes, state): the file
// is written first with nothing failing (40 episodes; the close folds them
// into a checkpoint), then opened, recalled from and closed with allocation
// fail_at failing. An open that runs out of memory says so, never that the
// file is damaged.
int OpenWorkload(const std::string& path, long fail_at, bool persist, Outcome* out,
                 bool check_leaks = true) {
  constexpr const char* kOptions = "vector_dim=16&sync=normal&checkpoint_bytes=1&auto_vacuum=0";
  constexpr int kEpisodes = 40;
  agentmem_db* db = nullptr;
  if (agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                       kOptions) != AGENTMEM_OK) {
    return kChildReopen;
  }
  char text[64];
  for (int i = 0; i < kEpisodes; i++) {
    std::snprintf(text, sizeof text, "episode %d about tea number %d", i, i * 7);
    int64_t id = 0;
    if (agentmem_remember(db, "u", "s", "user", text, 0, nullptr, nullptr, 0, &id) != AGENTMEM_OK) {
      agentmem_close(db);
      return kChildReopen;
    }
  }
  if (agentmem_close(db) != AGENTMEM_OK) return kChildReopen;
  db = nullptr;

  std::string bad;
  auto check = [&](int rc, const char* call) { return Judge(rc, call, false, fail_at, db, out, &bad); };
  long live_before = g_live.load();
  g_count = 0;
  g_failed = 0;
  g_last_call = "(none)";
  g_persist = persist;
  g_fail_at = fail_at;
  int rc = agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE, kOptions);
  if (check(rc, "agentmem_open_v2 (a file with a checkpoint)")) {
    agentmem_cursor* cur = nullptr;
    if (check(agentmem_recall(db, "u", "tea number 14", nullptr, &cur), "agentmem_recall")) {
      while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
      }
      if (rc != AGENTMEM_DONE) check(rc, "agentmem_cursor_step (recall)");
      agentmem_cursor_close(cur);
    }
  }
  rc = agentmem_close(db);
  db = nullptr;
  if (rc != AGENTMEM_OK) check(rc, "agentmem_close");
  std::unique_ptr<engine::Database> reopened;
  int code = EndRun(path, fail_at, bad, live_before, check_leaks, true, out, &reopened);
  if (code != kChildOk || !reopened) return code;
  engine::Stats st;
  if (Status s = reopened->GetStats(&st); !s.ok() || st.episodes != kEpisodes) {
    std::fprintf(stderr, "N=%ld: the reopened file has %s\n", fail_at,
                 s.ok() ? (std::to_string(st.episodes) + " episodes").c_str() : s.ToString().c_str());
    return kChildLost;
  }
  return kChildOk;
}

// A folder for the files of these tests: tmpfs when there is one (each run
// syncs on create and close; none of it needs durability).
std::unique_ptr<test::TempDir> ScratchDir() {
  const char* old_tmpdir = std::getenv("TMPDIR");
  std::string saved = old_tmpdir ? old_tmpdir : "";
  if (access("/dev/shm", W_OK) == 0) setenv("TMPDIR", "/dev/shm", 1);
  auto dir = std::make_unique<test::TempDir>();
  if (old_tmpdir) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  return dir;
}

// Runs the workload failing allocation N (and, with `persist`, the rest of
// the call) for every N of `ns`, each in a forked child; every child must
// end with kChildOk. Returns the number of runs.
// AGENTMEM_NOMEM_ONLY=<n> runs only that N, in this process (no fork), e.g.
// under gdb.
using WorkloadFn = int (*)(const std::string&, long, bool, Outcome*, bool);

int RunFailures(const test::TempDir& dir, const std::vector<long>& ns, long m, bool persist,
                WorkloadFn workload = Workload, const char* name = "") {
  if (const char* only = std::getenv("AGENTMEM_NOMEM_ONLY")) {
    Outcome o;
    CHECK(workload(dir.File("only.agentmem"), std::strtol(only, nullptr, 10), persist, &o, true) ==
          kChildOk);
    return 1;
  }
  int runs = 0, failures = 0;
  for (long n : ns) {
    std::string path = dir.File("n" + std::to_string(n) + ".agentmem");
    std::fflush(nullptr);  // the child exits through exit(): nothing buffered twice
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // A crash must end the child, not run doctest's handlers (which would
      // report a crashed test case from the child).
      for (int sig : {SIGABRT, SIGFPE, SIGILL, SIGSEGV, SIGBUS}) signal(sig, SIG_DFL);
      Outcome o;
      int code = kChildThrew;
      try {
        code = workload(path, n, persist, &o, true);
      } catch (const std::exception& e) {
        g_fail_at = 0;
        std::fprintf(stderr, "N=%ld: %s escaped a C API call (the last to return: %s)\n", n,
                     e.what(), g_last_call);
      }
      std::fflush(stderr);
      std::exit(code);  // exit, not _exit: LeakSanitizer checks at exit
    }
    int status = Reap(pid);
    runs++;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == kChildOk)) failures++;
    CHECK_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == kChildOk),
                  "failing allocation " << n << " of " << m
                                        << std::string(persist ? " and the rest of its call" : "")
                                        << ": the child " << DescribeStatus(status)
                                        << std::string(WIFEXITED(status) && WEXITSTATUS(status) == 23
                                                           ? " (LeakSanitizer found a leak)"
                                                           : " (the reason is printed above)"));
    std::remove(path.c_str());
  }
  MESSAGE("R4" << std::string(name) << std::string(persist ? " (failing the rest of the call)" : "") << ": " << runs
               << " runs over the workload's " << m << " C++ allocations, " << failures
               << " failed");
  return runs;
}

// Counts the workload's allocations (after a warm-up that allocates the
// statics); 0 in builds whose sanitizer runtime owns operator new.
long CountAllocations(const test::TempDir& dir, WorkloadFn workload = Workload) {
  Outcome warm, count;
  REQUIRE(workload(dir.File("warm.agentmem"), 0, false, &warm, false) == kChildOk);
  REQUIRE(workload(dir.File("count.agentmem"), 0, false, &count, true) == kChildOk);
  REQUIRE(count.allocations > 100);
  return count.allocations;
}

}  // namespace

TEST_CASE("a failed allocation anywhere in a scripted workload gives AGENTMEM_NOMEM and loses nothing") {
#ifdef AGENTMEM_NOMEM_UNAVAILABLE
  MESSAGE("R4 not run: this build's sanitizer runtime owns operator new");
  return;
#endif
  std::unique_ptr<test::TempDir> dir = ScratchDir();
  const long m = CountAllocations(*dir);
  // Every N up to 200 (open, the first writes), then a stride covering the
  // rest in about 200 runs, and the last 5 (close). AGENTMEM_NOMEM_ALL=1 runs
  // every N.
  const bool all = std::getenv("AGENTMEM_NOMEM_ALL") != nullptr;
  std::vector<long> ns;
  for (long n = 1; n <= m; n += (all || n < 200 ? 1 : std::max<long>(1, (m - 200) / 200))) {
    ns.push_back(n);
  }
  for (long n = std::max(ns.back() + 1, m - 4); n <= m; n++) ns.push_back(n);
  RunFailures(*dir, ns, m, false);
}

TEST_CASE("when memory stays short after a failed allocation the C API still returns AGENTMEM_NOMEM without throwing or leaking") {
  // Regression: Guard's handler of std::bad_alloc built a Status (a heap Rep)
  // and copied its message into the handle, and agentmem_open_v2 and
  // agentmem_close did the same; with memory still short that threw out of
  // the handler and out of the C API. Here allocation N and every later one
  // fail until the call that met N returns.
#ifdef AGENTMEM_NOMEM_UNAVAILABLE
  MESSAGE("R4 not run: this build's sanitizer runtime owns operator new");
  return;
#endif
  std::unique_ptr<test::TempDir> dir = ScratchDir();
  const long m = CountAllocations(*dir);
  // Every 4th N (about 210 runs); AGENTMEM_NOMEM_ALL=1 runs every N.
  const long step = std::getenv("AGENTMEM_NOMEM_ALL") ? 1 : 4;
  std::vector<long> ns;
  for (long n = 1; n <= m; n += step) ns.push_back(n);
  if (ns.back() != m) ns.push_back(m);
  RunFailures(*dir, ns, m, true);
}

TEST_CASE("a failed allocation anywhere in a SQL workload gives AGENTMEM_NOMEM, loses nothing and never throws out of a virtual table") {
  // SQL runs the engine inside sqlite3 callbacks (engine/sql/vtabs.cc), from
  // which no exception may escape. The first pass fails allocation N once; the
  // second, N and the rest of its call (vtabs.cc's Protect() built a Status
  // while handling std::bad_alloc).
#ifdef AGENTMEM_NOMEM_UNAVAILABLE
  MESSAGE("R4 not run: this build's sanitizer runtime owns operator new");
  return;
#endif
  std::unique_ptr<test::TempDir> dir = ScratchDir();
  const long m = CountAllocations(*dir, SqlWorkload);
  // About 150 runs of each kind, and in the first pass every N up to 150
  // (open, and the SQL session with its tables: regression, creating a table
  // that ran out of memory was AGENTMEM_ERROR); AGENTMEM_NOMEM_ALL=1 runs
  // every N.
  const long step = std::getenv("AGENTMEM_NOMEM_ALL") ? 1 : std::max<long>(1, m / 150);
  std::vector<long> ns, first;
  for (long n = 1; n <= m; n += step) ns.push_back(n);
  if (ns.back() != m) ns.push_back(m);
  for (long n = 1; n <= std::min<long>(150, m); n++) first.push_back(n);
  for (long n : ns) {
    if (n > first.back()) first.push_back(n);
  }
  RunFailures(*dir, first, m, false, SqlWorkload, " (SQL)");
  RunFailures(*dir, ns, m, true, SqlWorkload, " (SQL)");
}

TEST_CASE("a failed allocation while a file with a checkpoint opens gives AGENTMEM_NOMEM, never a damaged file") {
  // Regression: the graph and BM25 sections' errors were all reported as a
  // damaged checkpoint (AGENTMEM_CORRUPT_INDEX), memory running out included.
#ifdef AGENTMEM_NOMEM_UNAVAILABLE
  MESSAGE("R4 not run: this build's sanitizer runtime owns operator new");
  return;
#endif
  std::unique_ptr<test::TempDir> dir = ScratchDir();
  const long m = CountAllocations(*dir, OpenWorkload);
  std::vector<long> ns(static_cast<size_t>(m));  // every N: the open allocates a few hundred times
  std::iota(ns.begin(), ns.end(), 1L);
  RunFailures(*dir, ns, m, false, OpenWorkload, " (open)");
}

}  // namespace agentmem::reliability

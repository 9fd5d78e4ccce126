// bench/commit_loop.cc -- thread CPU of single-episode commits, for profiling
// the commit path under perf or callgrind: M agentmem_remember() calls, each
// its own transaction, with d-dimensional vectors around 1,000 N(0,1) centres
// (noise 0.35, unit length, as recall_bench makes them) and short texts, one
// session. Prints the p50 and p90 of the thread CPU per commit, and the
// loop's wall time with the p50, p99 and longest commit (and which). With
// --no-vectors the episodes have none (no graph insert); with --sqlite the
// same rows go to SQLite (WAL; synchronous per --sync, off meaning OFF) as a
// table with a vector BLOB, without a text index.
//   build/bench/commit_loop [--n M] [--dim D] [--sync full|normal|off]
//                           [--no-vectors] [--sqlite] [--path FILE]
//   perf record -g build/bench/commit_loop --n 3000
#include <agentmem.h>
#include <sqlite3.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct Config {
  int n = 2000, dim = 384;
  std::string sync = "full", path = "/tmp/commit_loop.agentmem";
  bool vectors = true, sqlite = false;
};

double ClockUs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}
double ThreadCpuUs() { return ClockUs(CLOCK_THREAD_CPUTIME_ID); }
double WallUs() { return ClockUs(CLOCK_MONOTONIC); }

bool Parse(int argc, char** argv, Config* c) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--n") c->n = std::atoi(val());
    else if (a == "--dim") c->dim = std::atoi(val());
    else if (a == "--sync") c->sync = val();
    else if (a == "--path") c->path = val();
    else if (a == "--no-vectors") c->vectors = false;
    else if (a == "--sqlite") c->sqlite = true;
    else return false;
  }
  return c->n > 0 && c->dim > 0;
}

void RemoveFiles(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) unlink((path + suffix).c_str());
}

// One episode's vector and text, the i-th of the run.
struct Source {
  explicit Source(int dim) : dim(dim), rng(20240611), centres(1000 * static_cast<size_t>(dim)) {
    for (float& f : centres) f = normal(rng);
  }
  void Next(int i, std::vector<float>* v, std::string* text) {
    static const char* kWords[] = {"river", "garden", "letter", "morning", "bread", "music",
                                   "window", "travel", "friend", "office", "winter", "market"};
    const float* c = &centres[(rng() % 1000) * static_cast<size_t>(dim)];
    v->resize(dim);
    double norm = 0;
    for (int d = 0; d < dim; d++) {
      (*v)[d] = c[d] + 0.35f * normal(rng);
      norm += static_cast<double>((*v)[d]) * (*v)[d];
    }
    for (float& f : *v) f = static_cast<float>(f / std::sqrt(norm));
    text->clear();
    for (int w = 0; w < 12; w++) *text += std::string(kWords[rng() % 12]) + " ";
    *text += std::to_string(i);
  }
  int dim;
  std::mt19937 rng;
  std::normal_distribution<float> normal;
  std::vector<float> centres;
};

}  // namespace

int main(int argc, char** argv) {
  Config c;
  if (!Parse(argc, argv, &c)) {
    std::fprintf(stderr, "usage: commit_loop [--n M] [--dim D] [--sync full|normal|off] "
                         "[--no-vectors] [--sqlite] [--path FILE]\n");
    return 2;
  }
  RemoveFiles(c.path);
  agentmem_db* db = nullptr;
  sqlite3* sq = nullptr;
  sqlite3_stmt* insert = nullptr;
  if (c.sqlite) {
    const std::string sync = c.sync == "off" ? "OFF" : c.sync == "normal" ? "NORMAL" : "FULL";
    const std::string setup = "PRAGMA journal_mode=WAL; PRAGMA synchronous=" + sync +
                              "; CREATE TABLE episodes(id INTEGER PRIMARY KEY, user_id TEXT, "
                              "text TEXT, vector BLOB);";
    if (sqlite3_open(c.path.c_str(), &sq) != SQLITE_OK ||
        sqlite3_exec(sq, setup.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK ||
        sqlite3_prepare_v2(sq, "INSERT INTO episodes(user_id, text, vector) VALUES('u', ?1, ?2)",
                           -1, &insert, nullptr) != SQLITE_OK) {
      std::fprintf(stderr, "sqlite: %s\n", sqlite3_errmsg(sq));
      return 1;
    }
  } else {
    const std::string options = "vector_dim=" + std::to_string(c.dim) +
                                "&vector_metric=cosine&embedder=commit-loop&sync=" + c.sync;
    if (agentmem_open_v2(c.path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                         options.c_str()) != AGENTMEM_OK) {
      std::fprintf(stderr, "open %s: %s\n", c.path.c_str(), db ? agentmem_errmsg(db) : "");
      agentmem_close(db);
      return 1;
    }
  }
  Source src(c.dim);
  std::vector<float> v;
  std::string text;
  std::vector<double> cpu_us, wall_us;
  cpu_us.reserve(c.n);
  wall_us.reserve(c.n);
  double loop_us = 0;
  for (int i = 0; i < c.n; i++) {
    src.Next(i, &v, &text);
    const double w0 = WallUs();
    const double c0 = ThreadCpuUs();
    if (sq) {
      sqlite3_bind_text(insert, 1, text.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_blob(insert, 2, v.data(), static_cast<int>(v.size() * sizeof(float)),
                        SQLITE_TRANSIENT);
      const int rc = sqlite3_step(insert);
      sqlite3_reset(insert);
      if (rc != SQLITE_DONE) {
        std::fprintf(stderr, "sqlite insert: %s\n", sqlite3_errmsg(sq));
        return 1;
      }
    } else {
      const int rc = agentmem_remember(db, "u", "s1", "user", text.c_str(),
                                       1700000000000000LL + i, nullptr,
                                       c.vectors ? v.data() : nullptr, c.vectors ? c.dim : 0, nullptr);
      if (rc != AGENTMEM_OK) {
        std::fprintf(stderr, "agentmem_remember: %s\n", agentmem_errmsg(db));
        return 1;
      }
    }
    cpu_us.push_back(ThreadCpuUs() - c0);
    wall_us.push_back(WallUs() - w0);
    loop_us += wall_us.back();
  }
  const auto longest = std::max_element(wall_us.begin(), wall_us.end());
  const double longest_us = *longest;
  const long longest_at = longest - wall_us.begin();
  std::sort(cpu_us.begin(), cpu_us.end());
  std::sort(wall_us.begin(), wall_us.end());
  std::printf("%s, %d commits, sync=%s%s: thread CPU per commit p50 %.1f us, p90 %.1f us; "
              "wall %.3f s, per commit p50 %.1f us, p99 %.1f us, longest %.1f us (commit %ld)\n",
              sq ? "sqlite" : "agentmem", c.n, c.sync.c_str(), c.vectors ? "" : ", no vectors",
              cpu_us[cpu_us.size() / 2], cpu_us[cpu_us.size() * 9 / 10], loop_us / 1e6,
              wall_us[wall_us.size() / 2], wall_us[wall_us.size() * 99 / 100], longest_us,
              longest_at);
  sqlite3_finalize(insert);
  sqlite3_close(sq);
  const int rc = db ? agentmem_close(db) : AGENTMEM_OK;
  RemoveFiles(c.path);
  return rc == AGENTMEM_OK ? 0 : 1;
}

// bench/sync_bench.cc -- `agentmem sync` throughput and convergence time
// (docs/bench.md, "Sync"): file a gets N episodes (d-dimensional random
// vectors, 1,000 per transaction); `agentmem sync a` pushes them, then
// `agentmem sync b` pulls them into an empty file b. Prints the time of each
// step, changes per second, and the convergence time (push + pull). Run it
// under tests/replication/pg_run.sh, which sets AGENTMEM_PG_URL:
//   tests/replication/pg_run.sh build/bench/sync_bench build/cli/agentmem 100000 384
#include <agentmem.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

bool Fill(const std::string& path, const std::string& options, int n, int dim) {
  agentmem_db* db = nullptr;
  if (agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                       options.c_str()) != AGENTMEM_OK) {
    std::fprintf(stderr, "open %s: %s\n", path.c_str(), agentmem_errmsg(db));
    agentmem_close(db);
    return false;
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> g;
  std::vector<float> v(dim);
  bool ok = true;
  for (int i = 0; ok && i < n; i++) {
    if (i % 1000 == 0) ok = agentmem_begin(db) == AGENTMEM_OK;
    for (float& x : v) x = g(rng);
    const std::string text = "episode " + std::to_string(i) + " of the sync benchmark",
                      user = "u" + std::to_string(i % 10);
    ok = ok && agentmem_remember(db, user.c_str(), "s", "user", text.c_str(), 0, nullptr,
                                 v.data(), dim, nullptr) == AGENTMEM_OK;
    if (ok && (i % 1000 == 999 || i == n - 1)) ok = agentmem_commit(db) == AGENTMEM_OK;
  }
  if (!ok) std::fprintf(stderr, "fill: %s\n", agentmem_errmsg(db));
  agentmem_close(db);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const char* url = std::getenv("AGENTMEM_PG_URL");
  if (argc != 4 || !url) {
    std::fprintf(stderr, "usage (under pg_run.sh): sync_bench AGENTMEM N DIM\n");
    return 2;
  }
  const std::string shell = argv[1];
  const int n = std::atoi(argv[2]), dim = std::atoi(argv[3]);
  char tmpl[] = "/tmp/sync_bench.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string a = dir + "/a.agentmem", b = dir + "/b.agentmem";
  const std::string options = "vector_dim=" + std::to_string(dim) + "&embedder=bench";
  auto t = std::chrono::steady_clock::now();
  if (!Fill(a, options, n, dim) || !Fill(b, options, 0, dim)) return 1;
  std::printf("fill a: %d episodes, %d-d, %.1f s\n", n, dim, Seconds(t));
  double total = 0;
  for (const std::string& file : {a, b}) {
    const std::string cmd = shell + " sync " + file + " '" + url + "'";
    t = std::chrono::steady_clock::now();
    if (std::system(cmd.c_str()) != 0) return 1;
    const double s = Seconds(t);
    total += s;
    std::printf("sync %s: %.1f s, %.0f episodes/s\n", file == a ? "a (push)" : "b (pull)", s,
                n / s);
  }
  std::printf("convergence (push + pull): %.1f s\n", total);
  std::system(("rm -rf " + dir).c_str());
  return 0;
}

// bench/purge_bench.cc -- forgetting with PURGE (docs/bench.md, "Purge"): a
// file of N episodes (one user, DIM-dimensional random vectors, 1,000 per
// transaction, 50 sessions) loses one session's episodes with
// agentmem_forget(..., AGENTMEM_FORGET_PURGE): the forget, the VACUUM that
// copies the file without them and the search of every byte of the copy for
// what was forgotten, timed as one call. Prints the time, the receipt and the
// sizes; repeats with a fresh file ROUNDS times and prints the median.
//   build/bench/purge_bench [N=50000] [DIM=384] [ROUNDS=3] [options]
#include <agentmem.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

bool Fail(agentmem_db* db, const char* what) {
  std::fprintf(stderr, "purge_bench: %s: %s\n", what, agentmem_errmsg(db));
  return false;
}

// Fills `path`; the episodes of session "s<i % sessions>".
bool Fill(agentmem_db* db, int n, int dim, int sessions) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g;
  std::vector<float> v(dim);
  for (int i = 0; i < n; i++) {
    if (i % 1000 == 0 && agentmem_begin(db) != AGENTMEM_OK) return Fail(db, "begin");
    for (float& x : v) x = g(rng);
    const std::string text = "episode " + std::to_string(i) + " of the purge benchmark, about topic " +
                             std::to_string(i % 97),
                      session = "s" + std::to_string(i % sessions);
    if (agentmem_remember(db, "u", session.c_str(), "user", text.c_str(), 0, nullptr, v.data(), dim,
                          nullptr) != AGENTMEM_OK) {
      return Fail(db, "remember");
    }
    if ((i % 1000 == 999 || i == n - 1) && agentmem_commit(db) != AGENTMEM_OK) {
      return Fail(db, "commit");
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 50000;
  const int dim = argc > 2 ? std::atoi(argv[2]) : 384;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  const std::string extra = argc > 4 ? argv[4] : "";
  const int sessions = std::max(1, n / 1000);
  char tmpl[] = "/tmp/purge_bench.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string options = "vector_dim=" + std::to_string(dim) + "&embedder=bench" +
                              (extra.empty() ? "" : "&" + extra);
  std::vector<double> times;
  for (int r = 0; r < rounds; r++) {
    const std::string path = dir + "/purge" + std::to_string(r) + ".agentmem";
    agentmem_db* db = nullptr;
    if (agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                         options.c_str()) != AGENTMEM_OK ||
        !Fill(db, n, dim, sessions)) {
      Fail(db, "open or fill");
      return 1;
    }
    agentmem_receipt receipt{};
    const auto t = std::chrono::steady_clock::now();
    const int rc = agentmem_forget(db, "u", "s7", 0, AGENTMEM_FORGET_PURGE, &receipt);
    const double s = Seconds(t);
    if (rc != AGENTMEM_OK) {
      Fail(db, "forget");
      return 1;
    }
    times.push_back(s);
    std::printf("round %d: purge of %lld of %d episodes: %.2f s; file %.1f -> %.1f MiB; %lld "
                "needles, residue %lld\n",
                r + 1, static_cast<long long>(receipt.episodes), n, s,
                static_cast<double>(receipt.bytes_before) / (1 << 20),
                static_cast<double>(receipt.bytes_after) / (1 << 20),
                static_cast<long long>(receipt.needles), static_cast<long long>(receipt.residue));
    std::fflush(stdout);
    agentmem_close(db);
    unlink(path.c_str());
  }
  std::sort(times.begin(), times.end());
  std::printf("median %.2f s (min %.2f, max %.2f, %d rounds)\n", times[times.size() / 2],
              times.front(), times.back(), rounds);
  rmdir(dir.c_str());
  return 0;
}

// bench/locomo_size.cc -- loads N episodes of real conversation text (cycling
// through ../shared/data/locomo/episodes.jsonl) into a fresh file, one
// transaction per `batch` episodes, and reports the file size against the raw
// text size, the commits and data syncs, and the load rate.
//
// usage: locomo_size [N=10000] [batch=1] [sync=full] [file=/tmp/locomo.agentmem] [options]
// (options are appended to the open options, e.g. "embedder=none" to store
// text without vectors)
#include <agentmem.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

struct Turn {
  std::string user, session, role, text;
};

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 10000;
  int batch = argc > 2 ? std::atoi(argv[2]) : 1;
  std::string sync = argc > 3 ? argv[3] : "full";
  std::string path = argc > 4 ? argv[4] : "/tmp/locomo.agentmem";
  std::string extra = argc > 5 ? argv[5] : "";
  const char* src = "../shared/data/locomo/episodes.jsonl";
  std::ifstream in(src);
  if (!in) {
    std::fprintf(stderr, "locomo_size: %s not found (run from the repository root)\n", src);
    return 2;
  }
  std::vector<Turn> turns;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    turns.push_back({j["conv_id"], std::to_string(j["session"].get<int>()), j["speaker"], j["text"]});
  }
  std::remove(path.c_str());
  agentmem_db* db = nullptr;
  std::string opts = "sync=" + sync + (extra.empty() ? "" : "&" + extra);
  if (agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                       opts.c_str()) != AGENTMEM_OK) {
    std::fprintf(stderr, "open: %s\n", agentmem_errmsg(db));
    return 1;
  }
  long long raw = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; i++) {
    const Turn& t = turns[i % turns.size()];
    if (batch > 1 && i % batch == 0) agentmem_begin(db);
    if (agentmem_remember(db, t.user.c_str(), t.session.c_str(), t.role.c_str(), t.text.c_str(), 0,
                          nullptr, nullptr, 0, nullptr) != AGENTMEM_OK) {
      std::fprintf(stderr, "remember: %s\n", agentmem_errmsg(db));
      return 1;
    }
    if (batch > 1 && (i % batch == batch - 1 || i == n - 1)) agentmem_commit(db);
    raw += static_cast<long long>(t.text.size());
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  agentmem_stats st;
  agentmem_stats_get(db, &st);
  std::printf("episodes %lld  raw text %lld bytes  file %lld bytes  (%.2fx raw)  commits %lld  "
              "data syncs %lld  pages %lld  %.0f episodes/s (batch %d, sync=%s%s%s)\n",
              (long long)st.episodes, raw, (long long)st.file_bytes,
              static_cast<double>(st.file_bytes) / static_cast<double>(raw), (long long)st.commits,
              (long long)st.syncs, (long long)st.pages, n / secs, batch, sync.c_str(),
              extra.empty() ? "" : ", ", extra.c_str());
  agentmem_close(db);
  return 0;
}

// tests/arm64/arm64_files.cc -- writes a database file and prints its recall
// results, so that tests/arm64/run.sh can hold a file written on one
// architecture against the same file read on another (x86-64 natively,
// aarch64 under qemu-aarch64).
//
//   arm64_files write PATH
//       creates PATH: 6,000 episodes of three users, made from a fixed
//       pseudo-random vocabulary, with the hashing embedder agentmem-hash-v1
//       (the same on every build), so the vector index is an HNSW graph
//       (past the exact scan's 4,096) and the BM25 index is frozen at close.
//   arm64_files recall PATH [--scalar]
//       opens PATH read-only and prints, for 20 queries of each user in
//       BM25, vector and hybrid mode, one line per hit:
//         <user> <mode> <query#> <rank> <id> <score> <bm25_score> <vector_score>
//       with the doubles in %a (exact). --scalar makes the scalar distance
//       kernels the active path before anything runs, so that two
//       architectures compute every distance with the same float operations
//       in the same order.
// Exits 0 on success; on a failure prints the error to stderr and exits 1.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "agentmem.h"
#include "index/vector/distance.h"

namespace {

constexpr int kEpisodes = 6000;
constexpr int kQueries = 20;
const char* const kUsers[] = {"ada", "brook", "cyd"};

// A vocabulary of 800 made-up words: consonant-vowel syllables, fixed seed.
std::vector<std::string> Vocabulary() {
  std::mt19937_64 rng(20261127);
  const char* consonants = "bcdfghklmnprstvz";
  const char* vowels = "aeiou";
  std::vector<std::string> words;
  while (words.size() < 800) {
    std::string w;
    int syllables = 2 + static_cast<int>(rng() % 3);
    for (int s = 0; s < syllables; ++s) {
      w += consonants[rng() % 16];
      w += vowels[rng() % 5];
    }
    words.push_back(w);
  }
  return words;
}

// Words are drawn with a skewed distribution (the square of a uniform
// index), so that BM25 sees common and rare terms.
std::string Sentence(std::mt19937_64& rng, const std::vector<std::string>& words, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    double u = static_cast<double>(rng() % 1000000) / 1000000.0;
    size_t idx = static_cast<size_t>(u * u * static_cast<double>(words.size()));
    if (!s.empty()) s += ' ';
    s += words[idx];
  }
  return s;
}

int Fail(agentmem_db* db, const char* what, int rc) {
  std::fprintf(stderr, "arm64_files: %s: %s (%s)\n", what, agentmem_errstr(rc),
               db != nullptr ? agentmem_errmsg(db) : "");
  agentmem_close(db);
  return 1;
}

int Write(const char* path) {
  std::remove(path);
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(path, &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                            "embedder=agentmem-hash-v1;sync=off");
  if (rc != AGENTMEM_OK) return Fail(db, "open", rc);
  std::vector<std::string> words = Vocabulary();
  std::mt19937_64 rng(7);
  const int64_t t0 = 1767225600000000;  // 2026-01-01T00:00:00Z
  if ((rc = agentmem_begin(db)) != AGENTMEM_OK) return Fail(db, "begin", rc);
  for (int i = 0; i < kEpisodes; ++i) {
    const char* user = kUsers[i % 3];
    std::string session = "s" + std::to_string(i / 50);
    std::string text = Sentence(rng, words, 6 + static_cast<int>(rng() % 20));
    rc = agentmem_remember(db, user, session.c_str(), (i % 2) ? "assistant" : "user",
                           text.c_str(), t0 + int64_t{i} * 1000000, nullptr, nullptr, 0, nullptr);
    if (rc != AGENTMEM_OK) return Fail(db, "remember", rc);
    if (i % 1000 == 999) {
      if ((rc = agentmem_commit(db)) != AGENTMEM_OK) return Fail(db, "commit", rc);
      if ((rc = agentmem_begin(db)) != AGENTMEM_OK) return Fail(db, "begin", rc);
    }
  }
  if ((rc = agentmem_commit(db)) != AGENTMEM_OK) return Fail(db, "commit", rc);
  if ((rc = agentmem_close(db)) != AGENTMEM_OK) return Fail(nullptr, "close", rc);
  return 0;
}

int Recall(const char* path, bool scalar) {
  using agentmem::index::SimdPath;
  if (scalar && !agentmem::index::SetActiveSimdPath(SimdPath::kScalar).ok()) {
    std::fprintf(stderr, "arm64_files: the scalar path is not available\n");
    return 1;
  }
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(path, &db, AGENTMEM_OPEN_READONLY, nullptr);
  if (rc != AGENTMEM_OK) return Fail(db, "open", rc);
  std::vector<std::string> words = Vocabulary();
  std::mt19937_64 rng(11);
  const struct {
    int mode;
    const char* name;
  } modes[] = {{AGENTMEM_RECALL_BM25, "bm25"},
               {AGENTMEM_RECALL_VECTOR, "vector"},
               {AGENTMEM_RECALL_HYBRID, "hybrid"}};
  for (int q = 0; q < kQueries; ++q) {
    std::string query = Sentence(rng, words, 2 + static_cast<int>(rng() % 4));
    for (const char* user : kUsers) {
      for (const auto& m : modes) {
        agentmem_recall_options opts;
        agentmem_recall_options_init(&opts);
        opts.k = 10;
        opts.mode = m.mode;
        agentmem_cursor* cur = nullptr;
        rc = agentmem_recall(db, user, query.c_str(), &opts, &cur);
        if (rc != AGENTMEM_OK) return Fail(db, "recall", rc);
        int rank = 0;
        while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
          const agentmem_hit* h = agentmem_cursor_hit(cur);
          std::printf("%s %s %d %d %" PRId64 " %a %a %a\n", user, m.name, q, ++rank, h->id,
                      h->score, h->bm25_score, h->vector_score);
        }
        agentmem_cursor_close(cur);
        if (rc != AGENTMEM_DONE) return Fail(db, "cursor", rc);
      }
    }
  }
  std::fprintf(stderr, "arm64_files: distance kernels %s\n",
               agentmem::index::SimdPathName(agentmem::index::ActiveSimdPath()));
  if ((rc = agentmem_close(db)) != AGENTMEM_OK) return Fail(nullptr, "close", rc);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "write") == 0) return Write(argv[2]);
  if ((argc == 3 || argc == 4) && std::strcmp(argv[1], "recall") == 0) {
    bool scalar = argc == 4 && std::strcmp(argv[3], "--scalar") == 0;
    if (argc == 4 && !scalar) return 2;
    return Recall(argv[2], scalar);
  }
  std::fprintf(stderr, "usage: arm64_files write PATH | recall PATH [--scalar]\n");
  return 2;
}

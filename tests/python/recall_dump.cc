// recall_dump: prints agentmem_recall()'s hits for one query, straight from the C
// API, so that tests/python/test_recall_parity.py can check that Python returns
// the same ids, order and scores for the same file.
//   usage: recall_dump FILE USER QUERY K MODE(hybrid|bm25|vector)
//   output: one line per hit: id score bm25_score vector_score bm25_rank vector_rank
//           (scores with %.17g, which a double survives exactly)
#include <agentmem.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char **argv) {
  if (argc != 6 && !(argc == 7 && std::strcmp(argv[6], "fill") == 0)) {
    std::fprintf(stderr, "usage: %s FILE USER QUERY K hybrid|bm25|vector [fill]\n", argv[0]);
    return 2;
  }
  agentmem_db *db = nullptr;
  if (agentmem_open_v2(argv[1], &db, AGENTMEM_OPEN_READONLY, nullptr) != AGENTMEM_OK) {
    std::fprintf(stderr, "open: %s\n", agentmem_errmsg(db));
    agentmem_close(db);
    return 1;
  }
  agentmem_recall_options opts;
  agentmem_recall_options_init(&opts);
  opts.k = std::atoi(argv[4]);
  opts.mode = std::strcmp(argv[5], "bm25") == 0     ? AGENTMEM_RECALL_BM25
              : std::strcmp(argv[5], "vector") == 0 ? AGENTMEM_RECALL_VECTOR
                                                    : AGENTMEM_RECALL_HYBRID;
  opts.fill = argc == 7;
  agentmem_cursor *cur = nullptr;
  int rc = agentmem_recall(db, argv[2], argv[3], &opts, &cur);
  while (rc == AGENTMEM_OK && agentmem_cursor_step(cur) == AGENTMEM_ROW) {
    const agentmem_hit *h = agentmem_cursor_hit(cur);
    std::printf("%lld %.17g %.17g %.17g %d %d\n", static_cast<long long>(h->id), h->score,
                h->bm25_score, h->vector_score, h->bm25_rank, h->vector_rank);
  }
  if (rc != AGENTMEM_OK) std::fprintf(stderr, "recall: %s\n", agentmem_errmsg(db));
  agentmem_cursor_close(cur);
  agentmem_close(db);
  return rc == AGENTMEM_OK ? 0 : 1;
}

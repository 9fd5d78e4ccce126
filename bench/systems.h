// bench/systems.h -- the three memory stores the side-by-side bench runs:
// agentmem through its C ABI, and the two baselines a user would
// build instead, written here against the libraries themselves:
//
//   sqlite    SQLite 3: one table (id, user, text, 384-float BLOB), an FTS5
//             external-content index over the text, brute-force cosine via a
//             registered SQL function, reciprocal rank fusion of the two
//             top-k lists -- what the SQLite memory backends of the popular
//             agent frameworks do. WAL, synchronous=FULL, mmap 1 GiB.
//   hnswlib   raw hnswlib 0.6.2 in memory (M 16, ef_construction 200, ef 64,
//             the engine's own defaults), saveIndex at close and loadIndex at
//             open, with the text, user and FTS5 index in a SQLite file next
//             to it ("hnswlib + a database"). A batch's vectors are inserted
//             by 2 threads (hnswlib's addPoint is thread-safe).
//
// Every store takes the same calls, so the driver (recall_bench.cc) times the
// same workload on each. Errors throw std::runtime_error with a message that
// names the store, the call and the library's own message.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bench {

// The values of AGENTMEM_RECALL_HYBRID / _BM25 / _VECTOR.
enum Mode : int { kHybrid = 0, kBm25 = 1, kVector = 2 };

enum class Metric { kCosine, kL2 };

struct StoreOptions {
  int dim = 384;
  Metric metric = Metric::kCosine;
  // agentmem: the embedder named in the open options; "" = the built-in one
  // (vectors passed as NULL are embedded by the engine).
  std::string embedder = "bench-synthetic";
  size_t capacity_hint = 1024;  // hnswlib: elements allocated at creation
  int build_threads = 2;        // hnswlib: threads inserting a batch's vectors
  int m = 16, ef_construction = 200, ef = 64;
  int rrf_k = 60;
};

struct SysHit {
  int64_t id = 0;
  std::string user;
  int bm25_rank = 0, vector_rank = 0;  // 1-based; 0 = not in that list
  size_t text_bytes = 0;               // the hit's text was fetched
};

class Store {
 public:
  virtual ~Store() = default;
  virtual std::string Name() const = 0;
  // One line: the configuration, for the report.
  virtual std::string Describe() const = 0;
  // A new, empty store at `path` (earlier files there are removed).
  virtual void Create(const std::string& path) = 0;
  // An existing store at `path`.
  virtual void Open(const std::string& path) = 0;
  // Makes everything durable and releases the store (hnswlib: saveIndex).
  virtual void Close() = 0;
  // A transaction around Add() calls; without Begin() every Add() commits
  // on its own (synchronous=FULL / sync=full).
  virtual void Begin() = 0;
  virtual void Commit() = 0;
  // Adds one episode; vec may be null only for agentmem with the built-in
  // embedder. Returns the id the hits name.
  virtual int64_t Add(const std::string& user, const std::string& text, const float* vec) = 0;
  // Top-k for `user` (null: every user's episodes). vec may be null only for
  // agentmem's BM25 mode or its built-in embedder.
  virtual void Recall(const char* user, const std::string& text, const float* vec, Mode mode,
                      int k, std::vector<SysHit>* hits) = 0;
  // Files that make up the store at `path`.
  virtual std::vector<std::string> Files(const std::string& path) const = 0;
  // agentmem: the plan of one recall (EXPLAIN RECALL, without its hits);
  // "" for the baselines.
  virtual std::string Explain(const char* /*user*/, const std::string& /*text*/,
                              const float* /*vec*/, Mode /*mode*/, int /*k*/) {
    return "";
  }
  // hnswlib: the search beam width (the recall/latency sweep).
  virtual void SetEf(int /*ef*/) {}
  // Seconds spent inserting vectors into the graph (hnswlib's own build),
  // and in the last Close() (saveIndex); -1 where it does not apply.
  virtual double VectorBuildSeconds() const { return -1; }
  virtual double LastCloseSeconds() const { return -1; }
};

std::unique_ptr<Store> MakeAgentmemStore(const StoreOptions& o);
std::unique_ptr<Store> MakeSqliteStore(const StoreOptions& o);
std::unique_ptr<Store> MakeHnswlibStore(const StoreOptions& o);
// "agentmem", "sqlite" or "hnswlib"; throws on another name.
std::unique_ptr<Store> MakeStore(const std::string& name, const StoreOptions& o);

// The OR query the baselines give FTS5: the distinct [a-z0-9]+ tokens of the
// lower-cased text, each quoted ("a" OR "b" ...); "" when there is none.
std::string Fts5OrQuery(const std::string& text);

// Reciprocal rank fusion of two ranked id lists (1/(rrf_k + rank), summed;
// ties to the smaller id), top k, with each id's rank in either list.
struct Fused {
  int64_t id;
  double score;
  int bm25_rank, vector_rank;
};
std::vector<Fused> Rrf(const std::vector<int64_t>& bm25, const std::vector<int64_t>& vec, int k,
                       int rrf_k);

}  // namespace bench

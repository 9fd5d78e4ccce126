// bench/agentmem_store.cc -- agentmem through its public C ABI, as a Store
// (see systems.h): every figure carries the cost of the C API, the cursor and
// fetching each hit's text.
#include <agentmem.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "systems.h"

namespace bench {

namespace {

class AgentmemStore : public Store {
 public:
  explicit AgentmemStore(const StoreOptions& o) : o_(o) {
    options_ = "vector_dim=" + std::to_string(o.dim) + "&vector_metric=" +
               (o.metric == Metric::kCosine ? "cosine" : "l2") + "&sync=full";
    if (!o.embedder.empty()) options_ += "&embedder=" + o.embedder;
    // More open options for every agentmem handle of the run, the open
    // phase's child processes included (they inherit the environment): e.g.
    // AGENTMEM_BENCH_OPTIONS=cache_size=-16384 for a 16 MiB page cache.
    if (const char* more = std::getenv("AGENTMEM_BENCH_OPTIONS"); more != nullptr && *more)
      options_ += std::string("&") + more;
  }
  ~AgentmemStore() override { agentmem_close(db_); }
  std::string Name() const override { return "agentmem"; }
  std::string Describe() const override {
    return std::string("agentmem ") + agentmem_libversion() + " (options " + options_ +
           "; one thread)";
  }
  void Create(const std::string& path) override {
    unlink(path.c_str());
    OpenWith(path, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE);
  }
  void Open(const std::string& path) override { OpenWith(path, AGENTMEM_OPEN_READWRITE); }
  void Close() override {
    int rc = agentmem_close(db_);
    db_ = nullptr;
    if (rc != AGENTMEM_OK) throw std::runtime_error(std::string("agentmem_close: ") +
                                                    agentmem_errstr(rc));
  }
  void Begin() override { Check(agentmem_begin(db_), "agentmem_begin"); }
  void Commit() override { Check(agentmem_commit(db_), "agentmem_commit"); }
  int64_t Add(const std::string& user, const std::string& text, const float* vec) override {
    int64_t id = 0;
    Check(agentmem_remember(db_, user.c_str(), "s1", "user", text.c_str(), kTs0 + next_ts_++,
                            nullptr, vec, vec ? o_.dim : 0, &id),
          "agentmem_remember");
    return id;
  }
  void Recall(const char* user, const std::string& text, const float* vec, Mode mode, int k,
              std::vector<SysHit>* hits) override {
    agentmem_recall_options ro;
    agentmem_recall_options_init(&ro);
    ro.k = k;
    ro.mode = mode;
    ro.all_users = user ? 0 : 1;
    ro.rrf_k = o_.rrf_k;
    ro.query_vector = mode == kBm25 ? nullptr : vec;
    ro.query_dim = mode == kBm25 || !vec ? 0 : o_.dim;
    agentmem_cursor* cur = nullptr;
    Check(agentmem_recall(db_, user ? user : "", text.c_str(), &ro, &cur), "agentmem_recall");
    hits->clear();
    int rc;
    while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
      const agentmem_hit* h = agentmem_cursor_hit(cur);
      SysHit s;
      s.id = h->id;
      s.user.assign(h->user_id);
      s.bm25_rank = h->bm25_rank;
      s.vector_rank = h->vector_rank;
      s.text_bytes = std::strlen(h->text);  // touch the text, as a caller would
      hits->push_back(std::move(s));
    }
    agentmem_cursor_close(cur);
    if (rc != AGENTMEM_DONE) Check(rc, "agentmem_cursor_step");
  }
  std::vector<std::string> Files(const std::string& path) const override { return {path}; }
  std::string Explain(const char* user, const std::string& text, const float* vec, Mode mode,
                      int k) override {
    agentmem_recall_options ro;
    agentmem_recall_options_init(&ro);
    ro.k = k;
    ro.mode = mode;
    ro.all_users = user ? 0 : 1;
    ro.rrf_k = o_.rrf_k;
    ro.query_vector = mode == kBm25 ? nullptr : vec;
    ro.query_dim = mode == kBm25 || !vec ? 0 : o_.dim;
    char* plan = nullptr;
    Check(agentmem_explain_recall(db_, user ? user : "", text.c_str(), &ro, &plan),
          "agentmem_explain_recall");
    std::string out = plan;
    agentmem_free(plan);
    size_t h = out.find(",\"hits\":");  // the plan part only
    return h == std::string::npos ? out : out.substr(0, h) + "}";
  }

  agentmem_db* db() const { return db_; }

 private:
  static constexpr int64_t kTs0 = 1700000000LL * 1000000;

  void OpenWith(const std::string& path, int flags) {
    agentmem_close(db_);
    db_ = nullptr;
    int rc = agentmem_open_v2(path.c_str(), &db_, flags, options_.c_str());
    if (rc != AGENTMEM_OK) {
      std::string msg = "agentmem: open " + path + ": " + agentmem_errstr(rc) + " (" +
                        (db_ ? agentmem_errmsg(db_) : "") + ")";
      agentmem_close(db_);
      db_ = nullptr;
      throw std::runtime_error(msg);
    }
  }
  void Check(int rc, const char* what) {
    if (rc == AGENTMEM_OK) return;
    throw std::runtime_error(std::string("agentmem: ") + what + ": " + agentmem_errstr(rc) +
                             " (" + (db_ ? agentmem_errmsg(db_) : "") + ")");
  }

  StoreOptions o_;
  std::string options_;
  agentmem_db* db_ = nullptr;
  int64_t next_ts_ = 0;
};

}  // namespace

std::unique_ptr<Store> MakeAgentmemStore(const StoreOptions& o) {
  return std::make_unique<AgentmemStore>(o);
}

std::unique_ptr<Store> MakeStore(const std::string& name, const StoreOptions& o) {
  if (name == "agentmem") return MakeAgentmemStore(o);
  if (name == "sqlite") return MakeSqliteStore(o);
  if (name == "hnswlib") return MakeHnswlibStore(o);
  throw std::runtime_error("unknown system " + name + " (agentmem, sqlite or hnswlib)");
}

}  // namespace bench

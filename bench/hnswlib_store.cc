// bench/hnswlib_store.cc -- baseline (b): raw hnswlib 0.6.2 in memory,
// saveIndex at close / loadIndex at open, plus FTS5 for the text in a SQLite
// file beside it (see systems.h). The only translation unit of the bench
// that includes <hnswlib/hnswlib.h> (the header defines non-inline
// functions).
#include <hnswlib/hnswlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "sqlite_text.h"
#include "systems.h"

namespace bench {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class HnswlibStore : public Store {
 public:
  explicit HnswlibStore(const StoreOptions& o) : o_(o), text_("hnswlib baseline") {
    if (o.metric == Metric::kCosine)
      space_ = std::make_unique<hnswlib::InnerProductSpace>(static_cast<size_t>(o.dim));
    else
      space_ = std::make_unique<hnswlib::L2Space>(static_cast<size_t>(o.dim));
  }
  std::string Name() const override { return "hnswlib"; }
  std::string Describe() const override {
    return "hnswlib 0.6.2 (" + std::string(o_.metric == Metric::kCosine ? "inner product on "
                                                                          "normalised vectors"
                                                                        : "L2") +
           ", M " + std::to_string(o_.m) + ", ef_construction " +
           std::to_string(o_.ef_construction) + ", ef " + std::to_string(ef_) + ", " +
           std::to_string(o_.build_threads) +
           " insert threads per batch; saveIndex at close, loadIndex at open) + SQLite " +
           sqlite3_libversion() + " FTS5 for text (WAL, synchronous=FULL); RRF (k=" +
           std::to_string(o_.rrf_k) + ")";
  }
  void Create(const std::string& path) override {
    path_ = path;
    unlink(IndexPath().c_str());
    text_.Open(TextPath(), true, false, o_.metric, o_.dim);
    index_ = std::make_unique<hnswlib::HierarchicalNSW<float>>(
        space_.get(), std::max<size_t>(o_.capacity_hint, 16), static_cast<size_t>(o_.m),
        static_cast<size_t>(o_.ef_construction), 100);
    index_->setEf(static_cast<size_t>(ef_));
    build_seconds_ = 0;
    dirty_ = true;
  }
  void Open(const std::string& path) override {
    path_ = path;
    if (access(IndexPath().c_str(), R_OK) != 0)
      throw std::runtime_error("hnswlib baseline: no index file " + IndexPath());
    index_ = std::make_unique<hnswlib::HierarchicalNSW<float>>(space_.get(), IndexPath());
    index_->setEf(static_cast<size_t>(ef_));
    dirty_ = false;
    text_.Open(TextPath(), false, false, o_.metric, o_.dim);
  }
  void Close() override {
    double t0 = Now();
    if (index_) {
      Flush();
      // Only a changed index is written again (saveIndex rewrites the file).
      if (dirty_) index_->saveIndex(IndexPath());
      index_.reset();
      dirty_ = false;
    }
    text_.Close();
    close_seconds_ = Now() - t0;
  }
  void Begin() override {
    text_.Begin();
    in_txn_ = true;
  }
  void Commit() override {
    text_.Commit();
    Flush();
    in_txn_ = false;
  }
  int64_t Add(const std::string& user, const std::string& text, const float* vec) override {
    if (!vec) throw std::runtime_error("hnswlib baseline: an episode needs a vector");
    int64_t id = text_.Insert(user, text, nullptr, o_.dim);
    pending_.insert(pending_.end(), vec, vec + o_.dim);
    pending_ids_.push_back(id);
    dirty_ = true;
    if (!in_txn_) Flush();
    return id;
  }
  void Recall(const char* user, const std::string& text, const float* vec, Mode mode, int k,
              std::vector<SysHit>* hits) override {
    hits->clear();
    if (mode != kVector) text_.Bm25(user, text, k, &bm25_);
    else bm25_.clear();
    if (mode != kBm25) Search(user, vec, k, &vec_);
    else vec_.clear();
    for (const Fused& f : Rrf(bm25_, vec_, k, o_.rrf_k)) {
      SysHit h;
      h.id = f.id;
      h.bm25_rank = f.bm25_rank;
      h.vector_rank = f.vector_rank;
      text_.Fetch(f.id, &h);
      hits->push_back(std::move(h));
    }
  }
  std::vector<std::string> Files(const std::string& path) const override {
    return {path + ".hnsw", path + ".sqlite", path + ".sqlite-wal", path + ".sqlite-shm"};
  }
  void SetEf(int ef) override {
    ef_ = ef;
    if (index_) index_->setEf(static_cast<size_t>(ef));
  }
  double VectorBuildSeconds() const override { return build_seconds_; }
  double LastCloseSeconds() const override { return close_seconds_; }

 private:
  std::string IndexPath() const { return path_ + ".hnsw"; }
  std::string TextPath() const { return path_ + ".sqlite"; }

  const float* Prepared(const float* v, std::vector<float>* buf) const {
    if (o_.metric != Metric::kCosine) return v;
    buf->assign(v, v + o_.dim);
    double n = 0;
    for (float x : *buf) n += static_cast<double>(x) * x;
    if (n > 0) {
      float inv = static_cast<float>(1.0 / std::sqrt(n));
      for (float& x : *buf) x *= inv;
    }
    return buf->data();
  }

  // Inserts the pending vectors: `build_threads` threads take them in turn
  // (addPoint is thread-safe for distinct labels); the capacity doubles first
  // when needed (resizeIndex is not thread-safe).
  void Flush() {
    if (pending_ids_.empty()) return;
    double t0 = Now();
    size_t need = index_->cur_element_count + pending_ids_.size();
    if (need > index_->max_elements_)
      index_->resizeIndex(std::max(need, index_->max_elements_ * 2));
    std::atomic<size_t> next{0};
    auto work = [&] {
      std::vector<float> buf;
      for (size_t i; (i = next.fetch_add(1)) < pending_ids_.size();)
        index_->addPoint(Prepared(pending_.data() + i * o_.dim, &buf),
                         static_cast<hnswlib::labeltype>(pending_ids_[i]));
    };
    size_t threads = std::min<size_t>(static_cast<size_t>(std::max(1, o_.build_threads)),
                                      pending_ids_.size());
    if (threads <= 1) {
      work();
    } else {
      std::vector<std::thread> pool;
      for (size_t t = 0; t < threads; t++) pool.emplace_back(work);
      for (auto& th : pool) th.join();
    }
    pending_.clear();
    pending_ids_.clear();
    build_seconds_ += Now() - t0;
  }

  // hnswlib 0.6.2 has no filter: for one user, search ever more neighbours
  // (k, then doubling, ef >= the count, at most kMaxFetch) and keep the
  // user's (their user read from SQLite by id), until k of them are found --
  // what a user of this version has to do. A user with few episodes among
  // many may get fewer than k, or not their nearest: recall@10 shows it.
  static constexpr size_t kMaxFetch = 4096;
  void Search(const char* user, const float* vec, int k, std::vector<int64_t>* ids) {
    ids->clear();
    size_t count = index_->cur_element_count;
    if (count == 0) return;
    const float* q = Prepared(vec, &qbuf_);
    is_users_.clear();  // id -> belongs to `user`, looked up once per query
    size_t want = std::min<size_t>(static_cast<size_t>(k), count);
    size_t cap = std::min(count, std::max(want, kMaxFetch));
    for (size_t fetch = want;; fetch = std::min(cap, fetch * 2)) {
      if (user) index_->setEf(std::max<size_t>(static_cast<size_t>(ef_), fetch));
      auto pq = index_->searchKnn(q, fetch);
      std::vector<std::pair<float, hnswlib::labeltype>> res;
      while (!pq.empty()) {
        res.push_back(pq.top());
        pq.pop();
      }
      std::reverse(res.begin(), res.end());  // closest first
      ids->clear();
      for (const auto& r : res) {
        int64_t id = static_cast<int64_t>(r.second);
        if (user) {
          auto [it, added] = is_users_.try_emplace(id, false);
          if (added) it->second = text_.UserOf(id) == user;
          if (!it->second) continue;
        }
        ids->push_back(id);
        if (ids->size() == static_cast<size_t>(k)) break;
      }
      if (!user || ids->size() >= want || fetch >= cap) break;
    }
    if (user) index_->setEf(static_cast<size_t>(ef_));
  }

  StoreOptions o_;
  int ef_ = 64;
  std::string path_;
  SqliteText text_;
  std::unique_ptr<hnswlib::SpaceInterface<float>> space_;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> index_;
  std::vector<float> pending_, qbuf_;
  std::vector<int64_t> pending_ids_;
  bool in_txn_ = false;
  bool dirty_ = false;  // added to since Create/Open: Close() saves
  double build_seconds_ = 0, close_seconds_ = -1;
  std::vector<int64_t> bm25_, vec_;
  std::unordered_map<int64_t, bool> is_users_;
};

}  // namespace

std::unique_ptr<Store> MakeHnswlibStore(const StoreOptions& o) {
  auto s = std::make_unique<HnswlibStore>(o);
  s->SetEf(o.ef);
  return s;
}

}  // namespace bench

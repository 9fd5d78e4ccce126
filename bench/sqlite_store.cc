// bench/sqlite_store.cc -- baseline (a): SQLite 3 + FTS5 + a vector BLOB
// scanned by a registered SQL function, fused by RRF (see systems.h); and
// SqliteText, the SQLite side the hnswlib baseline shares.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>

#include "sqlite_text.h"
#include "systems.h"

namespace bench {

namespace {

// A competent UDF: 16 accumulators, so that the compiler vectorises the loop
// (AVX2 where the CPU has it) -- the SQL scan, not a slow loop, is measured.
__attribute__((target_clones("avx2", "default"))) void DotAndNorms(const float* a, const float* b,
                                                                   int dim, float* dot, float* na,
                                                                   float* nb) {
  float d[16] = {}, x[16] = {}, y[16] = {};
  int i = 0;
  for (; i + 16 <= dim; i += 16)
    for (int j = 0; j < 16; j++) {
      d[j] += a[i + j] * b[i + j];
      x[j] += a[i + j] * a[i + j];
      y[j] += b[i + j] * b[i + j];
    }
  float sd = 0, sx = 0, sy = 0;
  for (; i < dim; i++) {
    sd += a[i] * b[i];
    sx += a[i] * a[i];
    sy += b[i] * b[i];
  }
  for (int j = 0; j < 16; j++) sd += d[j], sx += x[j], sy += y[j];
  *dot = sd;
  *na = sx;
  *nb = sy;
}

__attribute__((target_clones("avx2", "default"))) float L2Squared(const float* a, const float* b,
                                                                  int dim) {
  float acc[16] = {};
  int i = 0;
  for (; i + 16 <= dim; i += 16)
    for (int j = 0; j < 16; j++) {
      float t = a[i + j] - b[i + j];
      acc[j] += t * t;
    }
  float s = 0;
  for (; i < dim; i++) s += (a[i] - b[i]) * (a[i] - b[i]);
  for (float v : acc) s += v;
  return s;
}

// cosine_sim(a, b): the cosine of two float32 BLOBs of the same length;
// NULL when either is NULL or the lengths differ.
void CosineSimFn(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const void* a = sqlite3_value_blob(argv[0]);
  const void* b = sqlite3_value_blob(argv[1]);
  int na = sqlite3_value_bytes(argv[0]), nb = sqlite3_value_bytes(argv[1]);
  if (!a || !b || na != nb || na % 4 != 0) return sqlite3_result_null(ctx);
  float dot, xa, xb;
  DotAndNorms(static_cast<const float*>(a), static_cast<const float*>(b), na / 4, &dot, &xa, &xb);
  double den = std::sqrt(static_cast<double>(xa)) * std::sqrt(static_cast<double>(xb));
  sqlite3_result_double(ctx, den > 0 ? dot / den : 0.0);
}

// neg_l2sq(a, b): minus the squared L2 distance (larger is closer).
void NegL2SqFn(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const void* a = sqlite3_value_blob(argv[0]);
  const void* b = sqlite3_value_blob(argv[1]);
  int na = sqlite3_value_bytes(argv[0]), nb = sqlite3_value_bytes(argv[1]);
  if (!a || !b || na != nb || na % 4 != 0) return sqlite3_result_null(ctx);
  sqlite3_result_double(
      ctx, -static_cast<double>(L2Squared(static_cast<const float*>(a),
                                          static_cast<const float*>(b), na / 4)));
}

}  // namespace

// ------------------------------------------------------------------ shared helpers

std::string Fts5OrQuery(const std::string& text) {
  std::vector<std::string> tokens;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty() && std::find(tokens.begin(), tokens.end(), cur) == tokens.end())
      tokens.push_back(cur);
    cur.clear();
  };
  for (char ch : text) {
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) cur += c;
    else flush();
  }
  flush();
  std::string q;
  for (const std::string& t : tokens) {
    if (!q.empty()) q += " OR ";
    q += '"';
    q += t;
    q += '"';
  }
  return q;
}

std::vector<Fused> Rrf(const std::vector<int64_t>& bm25, const std::vector<int64_t>& vec, int k,
                       int rrf_k) {
  std::map<int64_t, Fused> by_id;
  for (size_t i = 0; i < bm25.size(); i++) {
    Fused& f = by_id.try_emplace(bm25[i], Fused{bm25[i], 0, 0, 0}).first->second;
    f.score += 1.0 / (rrf_k + static_cast<double>(i + 1));
    f.bm25_rank = static_cast<int>(i + 1);
  }
  for (size_t i = 0; i < vec.size(); i++) {
    Fused& f = by_id.try_emplace(vec[i], Fused{vec[i], 0, 0, 0}).first->second;
    f.score += 1.0 / (rrf_k + static_cast<double>(i + 1));
    f.vector_rank = static_cast<int>(i + 1);
  }
  std::vector<Fused> out;
  out.reserve(by_id.size());
  for (auto& [id, f] : by_id) out.push_back(f);
  std::sort(out.begin(), out.end(), [](const Fused& a, const Fused& b) {
    return a.score != b.score ? a.score > b.score : a.id < b.id;
  });
  if (out.size() > static_cast<size_t>(k)) out.resize(static_cast<size_t>(k));
  return out;
}

// ------------------------------------------------------------------ SqliteText

void SqliteText::Fail(const char* what) const {
  throw std::runtime_error(owner_ + ": " + what + ": " +
                           (db_ ? sqlite3_errmsg(db_) : "out of memory"));
}

void SqliteText::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = owner_ + ": " + sql + ": " + (err ? err : "?");
    sqlite3_free(err);
    throw std::runtime_error(msg);
  }
}

sqlite3_stmt* SqliteText::Prepare(const char* sql) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr) != SQLITE_OK)
    Fail(sql);
  return st;
}

void SqliteText::Step(sqlite3_stmt* st, const char* what) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) Fail(what);
}

void SqliteText::Open(const std::string& path, bool create, bool vectors, Metric metric, int dim) {
  Close();
  if (create)
    for (const char* sfx : {"", "-wal", "-shm", "-journal"}) unlink((path + sfx).c_str());
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    std::string msg = owner_ + ": cannot open " + path + ": " +
                      (db_ ? sqlite3_errmsg(db_) : "out of memory");
    sqlite3_close(db_);
    db_ = nullptr;
    throw std::runtime_error(msg);
  }
  dim_ = dim;
  Exec("PRAGMA journal_mode=WAL");
  Exec("PRAGMA synchronous=FULL");
  Exec("PRAGMA mmap_size=1073741824");
  if (create) {
    Exec("CREATE TABLE episodes(id INTEGER PRIMARY KEY, user TEXT NOT NULL, text TEXT NOT NULL, "
         "embedding BLOB)");
    Exec("CREATE INDEX episodes_user ON episodes(user)");
    Exec("CREATE VIRTUAL TABLE episodes_fts USING fts5(text, content='episodes', "
         "content_rowid='id')");
  }
  const char* fn = metric == Metric::kCosine ? "cosine_sim" : "neg_l2sq";
  if (vectors) {
    if (sqlite3_create_function(db_, fn, 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                nullptr, metric == Metric::kCosine ? CosineSimFn : NegL2SqFn,
                                nullptr, nullptr) != SQLITE_OK)
      Fail("sqlite3_create_function");
  }
  insert_ = Prepare("INSERT INTO episodes(user, text, embedding) VALUES(?1, ?2, ?3)");
  insert_fts_ = Prepare("INSERT INTO episodes_fts(rowid, text) VALUES(?1, ?2)");
  bm25_ = Prepare(
      "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ?1 ORDER BY rank LIMIT ?2");
  bm25_user_ = Prepare(
      "SELECT f.rowid FROM episodes_fts f JOIN episodes e ON e.id = f.rowid "
      "WHERE episodes_fts MATCH ?1 AND e.user = ?3 ORDER BY f.rank LIMIT ?2");
  if (vectors) {
    std::string scan = std::string("SELECT id FROM episodes WHERE embedding IS NOT NULL ORDER BY ") +
                       fn + "(embedding, ?1) DESC, id LIMIT ?2";
    std::string scan_user = std::string("SELECT id FROM episodes WHERE user = ?3 ORDER BY ") + fn +
                            "(embedding, ?1) DESC, id LIMIT ?2";
    scan_ = Prepare(scan.c_str());
    scan_user_ = Prepare(scan_user.c_str());
  }
  fetch_ = Prepare("SELECT user, text FROM episodes WHERE id = ?1");
  user_of_ = Prepare("SELECT user FROM episodes WHERE id = ?1");
  begin_ = Prepare("BEGIN");
  commit_ = Prepare("COMMIT");
}

void SqliteText::Close() {
  if (!db_) return;
  for (sqlite3_stmt** st : {&insert_, &insert_fts_, &bm25_, &bm25_user_, &scan_, &scan_user_,
                            &fetch_, &user_of_, &begin_, &commit_}) {
    sqlite3_finalize(*st);
    *st = nullptr;
  }
  int rc = sqlite3_close(db_);
  if (rc != SQLITE_OK) Fail("sqlite3_close");
  db_ = nullptr;
}

void SqliteText::Begin() { Step(begin_, "BEGIN"); }
void SqliteText::Commit() { Step(commit_, "COMMIT"); }

int64_t SqliteText::Insert(const std::string& user, const std::string& text, const float* vec,
                           int dim) {
  sqlite3_bind_text(insert_, 1, user.data(), static_cast<int>(user.size()), SQLITE_STATIC);
  sqlite3_bind_text(insert_, 2, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
  if (vec)
    sqlite3_bind_blob(insert_, 3, vec, dim * static_cast<int>(sizeof(float)), SQLITE_STATIC);
  else
    sqlite3_bind_null(insert_, 3);
  bool autocommit = sqlite3_get_autocommit(db_);
  // Outside a transaction the row and its FTS5 entry commit together.
  if (autocommit) Begin();
  Step(insert_, "INSERT INTO episodes");
  int64_t id = sqlite3_last_insert_rowid(db_);
  sqlite3_bind_int64(insert_fts_, 1, id);
  sqlite3_bind_text(insert_fts_, 2, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
  Step(insert_fts_, "INSERT INTO episodes_fts");
  if (autocommit) Commit();
  return id;
}

void SqliteText::Bm25(const char* user, const std::string& text, int k,
                      std::vector<int64_t>* ids) {
  ids->clear();
  std::string q = Fts5OrQuery(text);
  if (q.empty()) return;
  sqlite3_stmt* st = user ? bm25_user_ : bm25_;
  sqlite3_bind_text(st, 1, q.data(), static_cast<int>(q.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int(st, 2, k);
  if (user) sqlite3_bind_text(st, 3, user, -1, SQLITE_STATIC);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) ids->push_back(sqlite3_column_int64(st, 0));
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) Fail("FTS5 MATCH");
}

void SqliteText::VectorScan(const char* user, const float* vec, int dim, int k,
                            std::vector<int64_t>* ids) {
  ids->clear();
  sqlite3_stmt* st = user ? scan_user_ : scan_;
  if (!st) throw std::runtime_error(owner_ + ": this store keeps no vectors");
  sqlite3_bind_blob(st, 1, vec, dim * static_cast<int>(sizeof(float)), SQLITE_STATIC);
  sqlite3_bind_int(st, 2, k);
  if (user) sqlite3_bind_text(st, 3, user, -1, SQLITE_STATIC);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) ids->push_back(sqlite3_column_int64(st, 0));
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) Fail("vector scan");
}

void SqliteText::Fetch(int64_t id, SysHit* hit) {
  sqlite3_bind_int64(fetch_, 1, id);
  int rc = sqlite3_step(fetch_);
  if (rc == SQLITE_ROW) {
    hit->user.assign(reinterpret_cast<const char*>(sqlite3_column_text(fetch_, 0)));
    hit->text_bytes = static_cast<size_t>(sqlite3_column_bytes(fetch_, 1));
    (void)sqlite3_column_text(fetch_, 1);  // the text, as a caller reads it
  }
  sqlite3_reset(fetch_);
  if (rc != SQLITE_ROW) {
    if (rc == SQLITE_DONE)
      throw std::runtime_error(owner_ + ": episode " + std::to_string(id) + " not found");
    Fail("SELECT episode");
  }
}

const std::string& SqliteText::UserOf(int64_t id) {
  sqlite3_bind_int64(user_of_, 1, id);
  int rc = sqlite3_step(user_of_);
  if (rc == SQLITE_ROW)
    user_buf_.assign(reinterpret_cast<const char*>(sqlite3_column_text(user_of_, 0)));
  else
    user_buf_.clear();
  sqlite3_reset(user_of_);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) Fail("SELECT user");
  return user_buf_;
}

// ------------------------------------------------------------------ the sqlite baseline

namespace {

class SqliteStore : public Store {
 public:
  explicit SqliteStore(const StoreOptions& o) : o_(o), db_("sqlite baseline") {}
  std::string Name() const override { return "sqlite"; }
  std::string Describe() const override {
    return std::string("SQLite ") + sqlite3_libversion() +
           ": table + FTS5 external content + float32 BLOB, brute-force " +
           (o_.metric == Metric::kCosine ? "cosine_sim()" : "neg_l2sq()") +
           " UDF, RRF (k=" + std::to_string(o_.rrf_k) +
           "); WAL, synchronous=FULL, mmap_size 1 GiB";
  }
  void Create(const std::string& path) override {
    db_.Open(path, true, true, o_.metric, o_.dim);
  }
  void Open(const std::string& path) override { db_.Open(path, false, true, o_.metric, o_.dim); }
  void Close() override { db_.Close(); }
  void Begin() override { db_.Begin(); }
  void Commit() override { db_.Commit(); }
  int64_t Add(const std::string& user, const std::string& text, const float* vec) override {
    if (!vec) throw std::runtime_error("sqlite baseline: an episode needs a vector");
    return db_.Insert(user, text, vec, o_.dim);
  }
  void Recall(const char* user, const std::string& text, const float* vec, Mode mode, int k,
              std::vector<SysHit>* hits) override {
    hits->clear();
    if (mode != kVector) db_.Bm25(user, text, k, &bm25_);
    else bm25_.clear();
    if (mode != kBm25) db_.VectorScan(user, vec, o_.dim, k, &vec_);
    else vec_.clear();
    for (const Fused& f : Rrf(bm25_, vec_, k, o_.rrf_k)) {
      SysHit h;
      h.id = f.id;
      h.bm25_rank = f.bm25_rank;
      h.vector_rank = f.vector_rank;
      db_.Fetch(f.id, &h);
      hits->push_back(std::move(h));
    }
  }
  std::vector<std::string> Files(const std::string& path) const override {
    return {path, path + "-wal", path + "-shm"};
  }

 private:
  StoreOptions o_;
  SqliteText db_;
  std::vector<int64_t> bm25_, vec_;
};

}  // namespace

std::unique_ptr<Store> MakeSqliteStore(const StoreOptions& o) {
  return std::make_unique<SqliteStore>(o);
}

}  // namespace bench

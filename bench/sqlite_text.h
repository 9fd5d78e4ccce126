// bench/sqlite_text.h -- the SQLite side both baselines share: the episodes
// table, its FTS5 external-content index, BM25 top-k through FTS5 and text
// fetches by id. The sqlite baseline also keeps each vector in the table
// (a BLOB of dim float32) and scans it with a registered SQL function; the
// hnswlib baseline leaves that column NULL.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "systems.h"

namespace bench {

class SqliteText {
 public:
  // `owner` names the baseline in error messages.
  explicit SqliteText(std::string owner) : owner_(std::move(owner)) {}
  ~SqliteText() { Close(); }
  SqliteText(const SqliteText&) = delete;
  SqliteText& operator=(const SqliteText&) = delete;

  // Opens (create: a new file, earlier files removed) with WAL,
  // synchronous=FULL and a 1 GiB mmap; `vectors` registers the scoring
  // function for `metric` and `dim`.
  void Open(const std::string& path, bool create, bool vectors, Metric metric, int dim);
  void Close();
  void Begin();
  void Commit();
  // Inserts the row and its FTS5 entry; vec may be null (no BLOB).
  int64_t Insert(const std::string& user, const std::string& text, const float* vec, int dim);
  // BM25 top-k ids (FTS5 rank order), optionally of one user.
  void Bm25(const char* user, const std::string& text, int k, std::vector<int64_t>* ids);
  // Brute-force top-k ids by the scoring function, optionally of one user.
  void VectorScan(const char* user, const float* vec, int dim, int k, std::vector<int64_t>* ids);
  // Fetches the user and text of one row into the hit.
  void Fetch(int64_t id, SysHit* hit);
  // The user of one row ("" when there is no such row).
  const std::string& UserOf(int64_t id);
  bool open() const { return db_ != nullptr; }

 private:
  void Exec(const char* sql);
  sqlite3_stmt* Prepare(const char* sql);
  [[noreturn]] void Fail(const char* what) const;
  void Step(sqlite3_stmt* st, const char* what);

  std::string owner_;
  sqlite3* db_ = nullptr;
  int dim_ = 0;
  sqlite3_stmt* insert_ = nullptr;
  sqlite3_stmt* insert_fts_ = nullptr;
  sqlite3_stmt* bm25_ = nullptr;
  sqlite3_stmt* bm25_user_ = nullptr;
  sqlite3_stmt* scan_ = nullptr;
  sqlite3_stmt* scan_user_ = nullptr;
  sqlite3_stmt* fetch_ = nullptr;
  sqlite3_stmt* user_of_ = nullptr;
  std::string user_buf_;
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* commit_ = nullptr;
};

}  // namespace bench

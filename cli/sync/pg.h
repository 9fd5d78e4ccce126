// cli/sync/pg.h -- what `agentmem sync` (sync.h) needs of libpq: statements
// with text parameters, their results, and values read from them defensively
// (a row read from PostgreSQL is untrusted: every value is parsed and bounded
// before use).
#pragma once

#include <libpq-fe.h>

#include "agentmem.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace agentmem::sync {

struct ResultFree {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultFree>;

// One connection. Not thread-safe; owns nothing (the caller closes the
// PGconn after this is gone).
class Pg {
 public:
  explicit Pg(PGconn* conn) : conn_(conn) {}

  // Runs one statement; values may hold nullptr for NULL. false (error()
  // set) unless it returned `want`; *out (if not NULL) receives the result.
  bool Exec(const char* sql, const std::vector<const char*>& values, Result* out = nullptr,
            ExecStatusType want = PGRES_COMMAND_OK);
  // A query that returns rows.
  bool Query(const char* sql, const std::vector<const char*>& values, Result* out) {
    return Exec(sql, values, out, PGRES_TUPLES_OK);
  }
  // Several statements without parameters (the schema).
  bool Script(const char* sql);
  // Sets error() to msg and code() to `code` (what agentmem_sync returns),
  // and returns false.
  bool Fail(const std::string& msg, int code = AGENTMEM_ERROR) {
    error_ = msg;
    code_ = code;
    return false;
  }
  const std::string& error() const { return error_; }
  int code() const { return code_; }

 private:
  PGconn* conn_;
  std::string error_;
  int code_ = AGENTMEM_ERROR;
};

// Values of a result, checked: false (and *error set, naming the column)
// when the value is NULL where one is needed, not a number, out of range, or
// longer than max_bytes.
bool ReadInt(const PGresult* r, int row, int col, int64_t* out, std::string* error);
bool ReadText(const PGresult* r, int row, int col, size_t max_bytes, std::string* out,
              std::string* error);
// A real[] in PostgreSQL's text form ("{0.5,-1}"); NULL gives an empty
// vector. At most max_count floats, each finite.
bool ReadFloats(const PGresult* r, int row, int col, size_t max_count, std::vector<float>* out,
                std::string* error);

// A PostgreSQL array literal of floats, each written so that it reads back
// exactly, and one of integers.
std::string FloatArray(const float* v, int n);
std::string IntArray(const std::vector<int64_t>& v);

}  // namespace agentmem::sync

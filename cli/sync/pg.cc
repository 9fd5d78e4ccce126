// cli/sync/pg.cc -- the libpq helpers of pg.h.
#include "sync/pg.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace agentmem::sync {

bool Pg::Exec(const char* sql, const std::vector<const char*>& values, Result* out,
              ExecStatusType want) {
  Result r(PQexecParams(conn_, sql, static_cast<int>(values.size()), nullptr, values.data(),
                        nullptr, nullptr, 0));
  if (PQresultStatus(r.get()) != want) {
    return Fail(std::string("PostgreSQL: ") + PQerrorMessage(conn_));
  }
  if (out) *out = std::move(r);
  return true;
}

bool Pg::Script(const char* sql) {
  Result r(PQexec(conn_, sql));
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
    return Fail(std::string("PostgreSQL: ") + PQerrorMessage(conn_));
  }
  return true;
}

namespace {

bool Bad(const PGresult* r, int col, const char* what, std::string* error) {
  const char* name = PQfname(r, col);
  *error = std::string("PostgreSQL returned ") + what + " in column " + (name ? name : "?");
  return false;
}

}  // namespace

bool ReadInt(const PGresult* r, int row, int col, int64_t* out, std::string* error) {
  if (col >= PQnfields(r) || PQgetisnull(r, row, col)) return Bad(r, col, "NULL", error);
  const char* s = PQgetvalue(r, row, col);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') {
    return Bad(r, col, "a value that is not an integer", error);
  }
  *out = v;
  return true;
}

bool ReadText(const PGresult* r, int row, int col, size_t max_bytes, std::string* out,
              std::string* error) {
  if (col >= PQnfields(r) || PQgetisnull(r, row, col)) return Bad(r, col, "NULL", error);
  const size_t n = static_cast<size_t>(PQgetlength(r, row, col));
  if (n > max_bytes) return Bad(r, col, "a value over its size limit", error);
  out->assign(PQgetvalue(r, row, col), n);
  if (std::memchr(out->data(), '\0', n)) return Bad(r, col, "a NUL byte", error);
  return true;
}

bool ReadFloats(const PGresult* r, int row, int col, size_t max_count, std::vector<float>* out,
                std::string* error) {
  out->clear();
  if (col >= PQnfields(r)) return Bad(r, col, "too few columns", error);
  if (PQgetisnull(r, row, col)) return true;
  const char* p = PQgetvalue(r, row, col);
  if (*p++ != '{') return Bad(r, col, "a value that is not an array", error);
  if (*p == '}') return p[1] == '\0' ? true : Bad(r, col, "a malformed array", error);
  for (;;) {
    if (out->size() >= max_count) return Bad(r, col, "an array over its size limit", error);
    char* end = nullptr;
    errno = 0;
    const float f = std::strtof(p, &end);
    if (end == p || errno == ERANGE || !std::isfinite(f)) {
      return Bad(r, col, "an array element that is not a finite float", error);
    }
    out->push_back(f);
    p = end;
    if (*p == '}' && p[1] == '\0') return true;
    if (*p++ != ',') return Bad(r, col, "a malformed array", error);
  }
}

std::string FloatArray(const float* v, int n) {
  std::string out = "{";
  char buf[32];
  for (int i = 0; i < n; i++) {
    std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", static_cast<double>(v[i]));
    out += buf;
  }
  return out + "}";
}

std::string IntArray(const std::vector<int64_t>& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); i++) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "}";
}

}  // namespace agentmem::sync

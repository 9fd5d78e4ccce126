// engine/capi/capi_sql.cc -- the SQL section of include/agentmem.h:
// agentmem_exec, agentmem_prepare and the statement calls, over the handle's
// sql::Session (created by the first SQL call on the handle).
//
// Every call holds the handle's mutex (capi::Guard) -- except while
// agentmem_exec runs the caller's callback, so that the callback may call
// agentmem_* functions on the same handle, as sqlite3_exec allows.
#include <sqlite3.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "agentmem.h"
#include "engine/capi/capi_internal.h"
#include "engine/sql/session.h"

using agentmem::Status;
using agentmem::capi::Guard;
using agentmem::capi::IsLive;
using agentmem::capi::Need;
using agentmem::capi::Record;
using agentmem::capi::SetLive;
namespace eng = agentmem::engine;

static_assert(AGENTMEM_INTEGER == SQLITE_INTEGER && AGENTMEM_FLOAT == SQLITE_FLOAT &&
                  AGENTMEM_TEXT == SQLITE_TEXT && AGENTMEM_BLOB == SQLITE_BLOB &&
                  AGENTMEM_NULL == SQLITE_NULL,
              "include/agentmem.h column types must equal sqlite3's");

struct agentmem_stmt {
  agentmem_db* owner = nullptr;
  sqlite3_stmt* stmt = nullptr;
};

namespace {

// The handle's SQL session, opened on first use. REQUIRES: h->mu held.
Status EnsureSession(agentmem_db* h, eng::Database& d, eng::sql::Session** out) {
  if (!h->sql) AGENTMEM_RETURN_IF_ERROR(eng::sql::Session::Open(&d, &h->sql));
  *out = h->sql.get();
  return Status::OK();
}

bool StmtLive(agentmem_stmt* st) { return st && IsLive(st) && IsLive(st->owner); }

// Runs f(Session&, sqlite3_stmt*) for a statement under its handle's Guard.
template <typename F>
int StmtGuard(agentmem_stmt* st, F&& f) {
  if (!StmtLive(st)) return AGENTMEM_MISUSE;
  return Guard(st->owner, [&](eng::Database&) -> Status {
    if (!st->owner->sql) return Status(agentmem::kMisuse, "the statement's handle has no SQL");
    return f(*st->owner->sql, st->stmt);
  });
}

Status BindResult(eng::sql::Session& s, sqlite3_stmt* stmt, int i, int rc) {
  if (rc == SQLITE_RANGE) {
    return agentmem::StatusF(agentmem::kRange,
                             "parameter index %d is out of range: the statement has %d "
                             "parameter(s), numbered from 1",
                             i, sqlite3_bind_parameter_count(stmt));
  }
  return s.Take(rc);
}

// Column accessors take the mutex but do not change the handle's error state.
template <typename T, typename F>
T ColumnRead(agentmem_stmt* st, T none, F&& f) {
  if (!StmtLive(st)) return none;
  std::lock_guard<std::mutex> g(st->owner->mu);
  return f(st->stmt);
}

}  // namespace

extern "C" {

int agentmem_prepare(agentmem_db* db, const char* zSql, int nByte, agentmem_stmt** ppStmt,
                     const char** pzTail) {
  if (ppStmt) *ppStmt = nullptr;
  if (pzTail) *pzTail = zSql;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(zSql, "zSql"));
    AGENTMEM_RETURN_IF_ERROR(Need(ppStmt, "ppStmt"));
    eng::sql::Session* s = nullptr;
    AGENTMEM_RETURN_IF_ERROR(EnsureSession(db, d, &s));
    sqlite3_stmt* stmt = nullptr;
    AGENTMEM_RETURN_IF_ERROR(s->Prepare(zSql, nByte, &stmt, pzTail));
    if (!stmt) return Status::OK();
    auto* st = new (std::nothrow) agentmem_stmt;
    if (!st) {
      sqlite3_finalize(stmt);
      return Status(agentmem::kNoMem, "out of memory");
    }
    st->owner = db;
    st->stmt = stmt;
    try {
      SetLive(st, true);
    } catch (...) {  // out of memory: the statement must not outlive the call
      sqlite3_finalize(stmt);
      delete st;
      throw;
    }
    db->open_stmts++;
    *ppStmt = st;
    return Status::OK();
  });
}

int agentmem_step(agentmem_stmt* pStmt) {
  return StmtGuard(pStmt, [](eng::sql::Session& s, sqlite3_stmt* stmt) { return s.Step(stmt); });
}

int agentmem_reset(agentmem_stmt* pStmt) {
  return StmtGuard(pStmt, [](eng::sql::Session& s, sqlite3_stmt* stmt) {
    s.ClearError();
    sqlite3_reset(stmt);
    return Status::OK();
  });
}

int agentmem_finalize(agentmem_stmt* pStmt) {
  if (!pStmt) return AGENTMEM_OK;
  if (!StmtLive(pStmt)) return AGENTMEM_MISUSE;
  agentmem_db* db = pStmt->owner;
  int rc = Guard(db, [&](eng::Database&) -> Status {
    sqlite3_finalize(pStmt->stmt);
    pStmt->stmt = nullptr;
    db->open_stmts--;
    SetLive(pStmt, false);
    return Status::OK();
  });
  if (rc == AGENTMEM_OK) delete pStmt;
  return rc;
}

int agentmem_clear_bindings(agentmem_stmt* pStmt) {
  return StmtGuard(pStmt, [](eng::sql::Session& s, sqlite3_stmt* stmt) {
    return s.Take(sqlite3_clear_bindings(stmt));
  });
}

int agentmem_bind_parameter_count(agentmem_stmt* pStmt) {
  return ColumnRead(pStmt, 0, [](sqlite3_stmt* s) { return sqlite3_bind_parameter_count(s); });
}

int agentmem_bind_parameter_index(agentmem_stmt* pStmt, const char* zName) {
  if (!zName) return 0;
  return ColumnRead(pStmt, 0,
                    [&](sqlite3_stmt* s) { return sqlite3_bind_parameter_index(s, zName); });
}

int agentmem_bind_null(agentmem_stmt* pStmt, int i) {
  return StmtGuard(pStmt, [&](eng::sql::Session& s, sqlite3_stmt* stmt) {
    return BindResult(s, stmt, i, sqlite3_bind_null(stmt, i));
  });
}

int agentmem_bind_int64(agentmem_stmt* pStmt, int i, int64_t v) {
  return StmtGuard(pStmt, [&](eng::sql::Session& s, sqlite3_stmt* stmt) {
    return BindResult(s, stmt, i, sqlite3_bind_int64(stmt, i, v));
  });
}

int agentmem_bind_double(agentmem_stmt* pStmt, int i, double v) {
  return StmtGuard(pStmt, [&](eng::sql::Session& s, sqlite3_stmt* stmt) {
    return BindResult(s, stmt, i, sqlite3_bind_double(stmt, i, v));
  });
}

int agentmem_bind_text(agentmem_stmt* pStmt, int i, const char* z, int n) {
  return StmtGuard(pStmt, [&](eng::sql::Session& s, sqlite3_stmt* stmt) {
    if (!z) return BindResult(s, stmt, i, sqlite3_bind_null(stmt, i));
    return BindResult(s, stmt, i, sqlite3_bind_text(stmt, i, z, n, SQLITE_TRANSIENT));
  });
}

int agentmem_bind_blob(agentmem_stmt* pStmt, int i, const void* p, int n) {
  return StmtGuard(pStmt, [&](eng::sql::Session& s, sqlite3_stmt* stmt) -> Status {
    if (n < 0) return Status(agentmem::kMisuse, "blob length must be >= 0");
    if (!p && n > 0) return Status(agentmem::kMisuse, "blob must not be NULL when n > 0");
    if (!p) return BindResult(s, stmt, i, sqlite3_bind_zeroblob(stmt, i, 0));
    return BindResult(s, stmt, i, sqlite3_bind_blob(stmt, i, p, n, SQLITE_TRANSIENT));
  });
}

int agentmem_column_count(agentmem_stmt* pStmt) {
  return ColumnRead(pStmt, 0, [](sqlite3_stmt* s) { return sqlite3_column_count(s); });
}

const char* agentmem_column_name(agentmem_stmt* pStmt, int i) {
  return ColumnRead(pStmt, static_cast<const char*>(nullptr),
                    [&](sqlite3_stmt* s) { return sqlite3_column_name(s, i); });
}

int agentmem_column_type(agentmem_stmt* pStmt, int i) {
  return ColumnRead(pStmt, AGENTMEM_NULL,
                    [&](sqlite3_stmt* s) { return sqlite3_column_type(s, i); });
}

int64_t agentmem_column_int64(agentmem_stmt* pStmt, int i) {
  return ColumnRead(pStmt, int64_t{0}, [&](sqlite3_stmt* s) {
    return static_cast<int64_t>(sqlite3_column_int64(s, i));
  });
}

double agentmem_column_double(agentmem_stmt* pStmt, int i) {
  return ColumnRead(pStmt, 0.0, [&](sqlite3_stmt* s) { return sqlite3_column_double(s, i); });
}

const unsigned char* agentmem_column_text(agentmem_stmt* pStmt, int i) {
  return ColumnRead(pStmt, static_cast<const unsigned char*>(nullptr),
                    [&](sqlite3_stmt* s) { return sqlite3_column_text(s, i); });
}

const void* agentmem_column_blob(agentmem_stmt* pStmt, int i) {
  return ColumnRead(pStmt, static_cast<const void*>(nullptr),
                    [&](sqlite3_stmt* s) { return sqlite3_column_blob(s, i); });
}

int agentmem_column_bytes(agentmem_stmt* pStmt, int i) {
  return ColumnRead(pStmt, 0, [&](sqlite3_stmt* s) { return sqlite3_column_bytes(s, i); });
}

agentmem_db* agentmem_db_handle(agentmem_stmt* pStmt) {
  return StmtLive(pStmt) ? pStmt->owner : nullptr;
}

int64_t agentmem_changes(agentmem_db* db) {
  if (!IsLive(db)) return 0;
  std::lock_guard<std::mutex> g(db->mu);
  return db->sql ? static_cast<int64_t>(sqlite3_changes64(db->sql->conn())) : 0;
}

int agentmem_get_autocommit(agentmem_db* db) {
  if (!IsLive(db)) return 1;
  std::lock_guard<std::mutex> g(db->mu);
  if (db->db && db->db->in_transaction()) return 0;
  return db->sql && !sqlite3_get_autocommit(db->sql->conn()) ? 0 : 1;
}

// Like sqlite3_exec(): prepare, step and finalize each statement in turn.
int agentmem_exec(agentmem_db* db, const char* zSql, int (*xCallback)(void*, int, char**, char**),
                  void* pArg, char** pzErr) {
  if (pzErr) *pzErr = nullptr;
  if (!IsLive(db)) return AGENTMEM_MISUSE;
  const char* rest = zSql;
  int rc = AGENTMEM_OK;
  std::vector<std::string> values, names;
  std::vector<char*> value_ptrs, name_ptrs;
  while (rc == AGENTMEM_OK) {
    agentmem_stmt* st = nullptr;
    const char* tail = nullptr;
    if (rest) {
      while (*rest && std::strchr(" \t\r\n\f\v;", *rest)) rest++;
      if (!*rest) break;
    }
    rc = agentmem_prepare(db, rest, -1, &st, &tail);
    if (rc != AGENTMEM_OK) break;
    if (!st) break;  // only comments were left
    rest = tail;
    for (;;) {
      int n = 0;
      // One step, and a copy of the row, under the mutex; the callback runs
      // without it.
      int src = StmtGuard(st, [&](eng::sql::Session& s, sqlite3_stmt* stmt) -> Status {
        Status r = s.Step(stmt);
        if (r.code() != agentmem::kRow || !xCallback) return r;
        n = sqlite3_column_count(stmt);
        values.assign(n, std::string());
        value_ptrs.assign(n, nullptr);
        names.assign(n, std::string());
        name_ptrs.assign(n, nullptr);
        for (int i = 0; i < n; i++) {
          names[i].assign(sqlite3_column_name(stmt, i));
          if (sqlite3_column_type(stmt, i) == SQLITE_NULL) continue;
          const unsigned char* t = sqlite3_column_text(stmt, i);
          values[i].assign(reinterpret_cast<const char*>(t),
                           static_cast<size_t>(sqlite3_column_bytes(stmt, i)));
        }
        for (int i = 0; i < n; i++) {
          name_ptrs[i] = names[i].data();
          if (sqlite3_column_type(stmt, i) != SQLITE_NULL) value_ptrs[i] = values[i].data();
        }
        return r;
      });
      if (src == AGENTMEM_DONE) break;
      if (src != AGENTMEM_ROW) {
        rc = src;
        break;
      }
      if (xCallback && xCallback(pArg, n, value_ptrs.data(), name_ptrs.data()) != 0) {
        rc = Guard(db, [](eng::Database&) {
          return Status(agentmem::kAbort, "query aborted: the exec callback returned non-zero");
        });
        break;
      }
    }
    // Finalizing never changes the handle's error state.
    std::string msg;
    {
      std::lock_guard<std::mutex> g(db->mu);
      msg = db->errmsg;
    }
    agentmem_finalize(st);
    if (rc != AGENTMEM_OK) {
      std::lock_guard<std::mutex> g(db->mu);
      db->errcode = rc;
      db->errmsg = msg;
    }
  }
  if (rc == AGENTMEM_OK) {
    Guard(db, [](eng::Database&) { return Status::OK(); });
  } else if (pzErr) {
    std::lock_guard<std::mutex> g(db->mu);
    *pzErr = static_cast<char*>(std::malloc(db->errmsg.size() + 1));
    if (*pzErr) std::memcpy(*pzErr, db->errmsg.c_str(), db->errmsg.size() + 1);
  }
  return rc;
}

}  // extern "C"

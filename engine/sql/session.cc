// engine/sql/session.cc -- the in-memory sqlite3 connection of one handle:
// opening it safely, statement preparation and stepping with engine errors
// carried through, and the mapping of SQLite transactions onto the engine's.
#include "engine/sql/session.h"
#include "engine/sql/maintenance.h"

#include <sqlite3.h>

#include <cctype>
#include <cstring>
#include <string>

#include "engine/sql/vtabs.h"

namespace agentmem::engine::sql {

namespace {

// The first keyword of a statement, upper-cased ("" when there is none),
// skipping white space and comments.
std::string FirstKeyword(const char* p, const char* end) {
  for (;;) {
    while (p < end && std::isspace(static_cast<unsigned char>(*p))) p++;
    if (end - p >= 2 && p[0] == '-' && p[1] == '-') {
      while (p < end && *p != '\n') p++;
      continue;
    }
    if (end - p >= 2 && p[0] == '/' && p[1] == '*') {
      const char* close = p + 2;
      while (end - close >= 2 && !(close[0] == '*' && close[1] == '/')) close++;
      p = end - close >= 2 ? close + 2 : end;
      continue;
    }
    break;
  }
  std::string word;
  while (p < end && std::isalpha(static_cast<unsigned char>(*p))) {
    word.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(*p))));
    p++;
  }
  return word;
}

// Keeps every byte in the .agentmem file: no SQLite files, no schema objects
// that would silently vanish at close.
int Authorize(void* arg, int action, const char* a, const char*, const char* db_name,
              const char*) {
  auto* session = static_cast<Session*>(arg);
  switch (action) {
    case SQLITE_ATTACH:
    case SQLITE_DETACH:
      session->SetDenied(
          "ATTACH is not supported: agentmem SQL runs on the .agentmem file only and never "
          "creates a SQLite database file");
      return SQLITE_DENY;
    case SQLITE_CREATE_TABLE:
    case SQLITE_CREATE_INDEX:
    case SQLITE_CREATE_VIEW:
    case SQLITE_CREATE_TRIGGER:
    case SQLITE_CREATE_VTABLE:
      session->SetDenied(
          "CREATE is not supported on the main schema: its tables are the episodes, blocks "
          "and facts of the .agentmem file (docs/sql.md); use CREATE TEMP TABLE/VIEW for "
          "scratch data, which vanishes at close");
      return SQLITE_DENY;
    case SQLITE_DROP_TABLE:
    case SQLITE_DROP_VTABLE:
    case SQLITE_DROP_INDEX:
    case SQLITE_DROP_VIEW:
    case SQLITE_DROP_TRIGGER:
    case SQLITE_ALTER_TABLE:
      if (db_name && std::strcmp(db_name, "temp") == 0) return SQLITE_OK;
      session->SetDenied("the tables of an .agentmem file cannot be dropped or altered");
      return SQLITE_DENY;
    case SQLITE_PRAGMA:
      if (a && (sqlite3_stricmp(a, "temp_store") == 0 ||
                sqlite3_stricmp(a, "temp_store_directory") == 0 ||
                sqlite3_stricmp(a, "data_store_directory") == 0 ||
                sqlite3_stricmp(a, "writable_schema") == 0)) {
        session->SetDenied(std::string("PRAGMA ") + a +
                           " is not supported: agentmem SQL keeps SQLite's storage in memory");
        return SQLITE_DENY;
      }
      return SQLITE_OK;
    default:
      return SQLITE_OK;
  }
}

}  // namespace

Status Session::Open(Database* db, std::unique_ptr<Session>* out) {
  std::unique_ptr<Session> s(new Session(db));
  AGENTMEM_RETURN_IF_ERROR(s->Init());
  *out = std::move(s);
  return Status::OK();
}

Status Session::Init() {
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_MEMORY |
              SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  int rc = sqlite3_open_v2(":memory:", &conn_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = conn_ ? sqlite3_errmsg(conn_) : "out of memory";
    return Status(rc == SQLITE_NOMEM ? kNoMem : kError,
                  "cannot open the in-memory SQL connection: " + msg);
  }
  // Sorts and temporary b-trees stay in memory; no attached files at all.
  char* err = nullptr;
  rc = sqlite3_exec(conn_, "PRAGMA temp_store=MEMORY", nullptr, nullptr, &err);
  if (rc == SQLITE_OK) sqlite3_limit(conn_, SQLITE_LIMIT_ATTACHED, 0);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return Status(kError, "cannot set up the in-memory SQL connection: " + msg);
  }
  AGENTMEM_RETURN_IF_ERROR(RegisterTables(this));
  sqlite3_set_authorizer(conn_, Authorize, this);
  return Status::OK();
}

Session::~Session() {
  if (conn_) sqlite3_close_v2(conn_);  // rolls back an open SQL transaction
}

Status Session::Take(int rc) {
  if (rc == SQLITE_OK) return Status::OK();
  if (rc == SQLITE_ROW) return Status(kRow, "row ready");
  if (rc == SQLITE_DONE) return Status(kDone, "no more rows");
  if (!error_.ok()) {
    Status s = std::move(error_);
    error_ = Status::OK();
    return s;
  }
  std::string msg = sqlite3_errmsg(conn_);
  if (!denied_.empty() && (rc & 0xff) == SQLITE_AUTH) {
    msg = denied_;
    denied_.clear();
    return Status(kError, msg);
  }
  switch (rc & 0xff) {
    case SQLITE_NOMEM: return Status(kNoMem, "out of memory");
    case SQLITE_CONSTRAINT: return Status(kConstraint, msg);
    case SQLITE_RANGE: return Status(kRange, msg);
    case SQLITE_MISUSE: return Status(kMisuse, msg);
    case SQLITE_TOOBIG: return Status(kTooBig, msg);
    case SQLITE_READONLY: return Status(kReadOnly, msg);
    case SQLITE_BUSY: return Status(kBusy, msg);
    case SQLITE_MISMATCH: return Status(kMismatch, msg);
    case SQLITE_INTERRUPT: return Status(kAbort, msg);
    case SQLITE_ABORT: return Status(kAbort, msg);
    default: return Status(kError, msg);
  }
}

Status Session::Prepare(const char* sql, int n, sqlite3_stmt** stmt, const char** tail) {
  *stmt = nullptr;
  ClearError();
  denied_.clear();
  const char* rest = nullptr;
  // FORGET, VACUUM and REINDEX become calls of forget(), vacuum() and
  // reindex() (maintenance.h).
  const char* sql_end = n < 0 ? sql + std::strlen(sql) : sql + n;
  std::string rewritten;
  const char* after = nullptr;
  auto maintenance = RewriteMaintenance(sql, sql_end, &rewritten, &after);
  AGENTMEM_RETURN_IF_ERROR(maintenance.status());
  if (maintenance.value()) {
    int rc = sqlite3_prepare_v2(conn_, rewritten.c_str(), -1, stmt, nullptr);
    if (tail) *tail = after;
    if (rc != SQLITE_OK) {
      sqlite3_finalize(*stmt);
      *stmt = nullptr;
      return Take(rc);
    }
    return Status::OK();
  }
  int rc = sqlite3_prepare_v2(conn_, sql, n, stmt, &rest);
  if (tail) *tail = rest;
  if (rc != SQLITE_OK) {
    sqlite3_finalize(*stmt);
    *stmt = nullptr;
    return Take(rc);
  }
  if (*stmt) {
    const char* end = rest ? rest : sql + std::strlen(sql);
    std::string word = FirstKeyword(sql, end);
    const char* refused = nullptr;
    if (word == "VACUUM") {
      refused = "VACUUM takes no arguments here: the .agentmem file is compacted whole";
    } else if (word == "REINDEX") {
      refused =
          "REINDEX takes no arguments here: it rebuilds both indexes of the .agentmem file "
          "(BM25 and vector) whole";
    }
    if (refused) {
      sqlite3_finalize(*stmt);
      *stmt = nullptr;
      return Status(kError, refused);
    }
  }
  return Status::OK();
}

Status Session::Step(sqlite3_stmt* stmt) {
  ClearError();
  return Take(sqlite3_step(stmt));
}

int Session::Fail(sqlite3_vtab* vtab, const Status& s) {
  error_ = s;
  if (vtab) {
    sqlite3_free(vtab->zErrMsg);
    vtab->zErrMsg = sqlite3_mprintf("%s", s.message().c_str());
  }
  switch (s.primary()) {
    case kNoMem: return SQLITE_NOMEM;
    case kConstraint: return SQLITE_CONSTRAINT;
    case kBusy: return SQLITE_BUSY;
    case kReadOnly: return SQLITE_READONLY;
    default: return SQLITE_ERROR;
  }
}

// ------------------------------------------------------------------ transactions
//
// SQLite tells every virtual table in its write transaction of each savepoint
// level it opens, releases or rolls back to (SAVEPOINT statements, and the
// statement savepoint that undoes a failed statement). Each level is one
// engine savepoint (Database::Savepoint), named by this Session; the first
// table to hear of a level opens it, the others find it open.

namespace {

Status EngineTxnEnded() {
  return Status(kMisuse,
                "the SQL transaction's engine transaction was ended by agentmem_commit() or "
                "agentmem_rollback() while SQL had it open; end SQL transactions with COMMIT "
                "or ROLLBACK");
}

}  // namespace

Status Session::OpenSavepoint(std::string* name) {
  *name = "sql savepoint " + std::to_string(++savepoint_serial_);
  return db_->Savepoint(*name);
}

Status Session::TxnBegin() {
  if (owned_ || joined_) return Status::OK();  // another table of this transaction began it
  levels_.clear();
  if (db_->in_transaction()) {
    // agentmem_begin() is in charge of it; SQL's ROLLBACK undoes what was
    // written in it from here on.
    AGENTMEM_RETURN_IF_ERROR(OpenSavepoint(&joined_at_));
    joined_ = true;
    return Status::OK();
  }
  AGENTMEM_RETURN_IF_ERROR(db_->Begin());
  owned_ = true;
  return Status::OK();
}

Status Session::TxnSync() {
  levels_.clear();
  if (joined_) {
    joined_ = false;
    // The writes stay in the C API's transaction. (NotFound: that ended.)
    db_->Release(joined_at_).IgnoreError();
    return Status::OK();
  }
  if (!owned_) return Status::OK();
  owned_ = false;
  if (!db_->in_transaction()) return EngineTxnEnded();
  return db_->Commit();
}

void Session::TxnRollback() {
  levels_.clear();
  if (joined_) {
    joined_ = false;
    if (db_->RollbackTo(joined_at_).ok()) db_->Release(joined_at_).IgnoreError();
    return;
  }
  if (!owned_) return;
  owned_ = false;
  db_->Rollback().IgnoreError();
}

Status Session::TxnSavepoint(int n) {
  if (n < 0) return Status::OK();
  if (!db_->in_transaction()) return EngineTxnEnded();
  // A table joining the transaction late is told only of the innermost level;
  // the levels below it that no table has heard of were opened before any
  // write of this transaction, so they open here at the same point.
  while (levels_.size() <= static_cast<size_t>(n)) {
    std::string name;
    AGENTMEM_RETURN_IF_ERROR(OpenSavepoint(&name));
    levels_.push_back(std::move(name));
  }
  return Status::OK();
}

Status Session::TxnRelease(int n) {
  if (n < 0 || static_cast<size_t>(n) >= levels_.size()) return Status::OK();
  Status s = db_->Release(levels_[n]);
  levels_.resize(n);
  return s.primary() == kNotFound ? EngineTxnEnded() : s;
}

Status Session::TxnRollbackTo(int n) {
  if (n < 0 || static_cast<size_t>(n) >= levels_.size()) return Status::OK();
  levels_.resize(n + 1);
  Status s = db_->RollbackTo(levels_[n]);  // the level stays open, as in SQLite
  return s.primary() == kNotFound ? EngineTxnEnded() : s;
}

}  // namespace agentmem::engine::sql

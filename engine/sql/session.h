// engine/sql/session.h -- the SQL front end of one agentmem_db handle: a
// private in-memory sqlite3 connection whose tables are virtual tables over
// the handle's engine::Database (docs/sql.md).
//
// No SQLite database file is ever created: the connection is ":memory:",
// temporary storage is kept in memory, ATTACH (and so VACUUM INTO) is
// refused, and ordinary CREATE TABLE is refused (only TEMP objects, which
// vanish at close, may be created).
//
// Transactions. The virtual tables' xBegin/xSync/xCommit/xRollback call
// Begin/Commit/Rollback here, which map SQLite's transaction onto one engine
// transaction: a write statement outside BEGIN...COMMIT is one engine commit,
// and BEGIN...COMMIT groups every write in it into one commit. xSavepoint /
// xRelease / xRollbackTo map SQLite's savepoint levels (SAVEPOINT statements,
// and the statement savepoint that undoes a failed statement) onto engine
// savepoints (Database::Savepoint), one per level. Inside a transaction opened
// with agentmem_begin(), SQL's writes join it; an engine savepoint taken at
// SQL's first write lets SQL's ROLLBACK undo them.
//
// Errors. A virtual table that fails on an engine Status calls Fail(), which
// keeps the Status (code and message) for the C API and gives SQLite the
// message; Take() turns the result of a sqlite3 call into a Status.
//
// Thread safety: none. The C API holds the handle's mutex around every call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "format/status.h"

struct sqlite3;
struct sqlite3_stmt;
struct sqlite3_vtab;

namespace agentmem::engine::sql {

class Session {
 public:
  // Opens the in-memory connection and registers the virtual tables and
  // table-valued functions over *db (which must outlive the Session).
  static Status Open(Database* db, std::unique_ptr<Session>* out);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  sqlite3* conn() const { return conn_; }
  Database* db() const { return db_; }

  // Compiles the first statement of sql (n < 0: up to the NUL). *stmt is null
  // when sql holds only white space or comments. Statements that SQLite would
  // run as an in-memory no-op on a named table or index (VACUUM main, REINDEX
  // episodes) are refused here with a message that says so.
  Status Prepare(const char* sql, int n, sqlite3_stmt** stmt, const char** tail);
  // One sqlite3_step: kRow, kDone, or the error (the engine's Status when a
  // virtual table failed on one).
  Status Step(sqlite3_stmt* stmt);
  // Converts a sqlite3 result code (of a call on this connection) to a
  // Status, preferring the engine Status a virtual table recorded.
  Status Take(int rc);
  // Forgets any recorded engine error (called before each sqlite3 call).
  void ClearError() { error_ = Status::OK(); }

  // ---- for the virtual tables
  // Records s (not OK) as the reason the current statement fails and puts its
  // message in vtab->zErrMsg. Returns the sqlite3 result code to return.
  int Fail(sqlite3_vtab* vtab, const Status& s);
  // The authorizer's message for the statement it refused, if any.
  void SetDenied(std::string why) { denied_ = std::move(why); }

  // Transaction hooks, called by every writable virtual table.
  Status TxnBegin();
  Status TxnSync();      // commits the engine transaction (the first call)
  void TxnRollback();
  Status TxnSavepoint(int n);
  Status TxnRelease(int n);
  Status TxnRollbackTo(int n);

 private:
  explicit Session(Database* db) : db_(db) {}
  Status Init();
  // Opens an engine savepoint under a new name, returned in *name.
  Status OpenSavepoint(std::string* name);

  Database* db_;
  sqlite3* conn_ = nullptr;
  Status error_;
  std::string denied_;
  // The engine transaction SQLite's current write transaction runs in:
  // owned_ when this Session began it (and so commits or rolls it back);
  // joined_ when it was already open through agentmem_begin().
  bool owned_ = false;
  bool joined_ = false;
  std::string joined_at_;            // joined_: the engine savepoint at SQL's first write
  std::vector<std::string> levels_;  // the engine savepoint of each SQLite level
  uint64_t savepoint_serial_ = 0;    // names are unique for the Session's lifetime
};

}  // namespace agentmem::engine::sql

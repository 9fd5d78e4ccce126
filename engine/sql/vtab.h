// engine/sql/vtab.h -- the C++ shape of a sqlite3 virtual table used by every
// table and table-valued function of the SQL front end, and small helpers for
// sqlite3_value conversion.
//
// A VTable subclass plans (BestIndex), opens cursors and, when writable,
// writes (Update); a VCursor subclass filters, steps and returns columns.
// Methods return Status; the trampolines in vtabs.cc hand a failure to
// Session::Fail, which keeps the engine's code and message for the C API.
// Everything here runs inside sqlite3_step under the handle's mutex: call
// Database (or Session) methods, never the public agentmem_* functions.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "engine/sql/session.h"
#include "format/status.h"

namespace agentmem::engine::sql {

class VCursor;

class VTable : public sqlite3_vtab {
 public:
  explicit VTable(Session* s) : sqlite3_vtab{}, session_(s) {}
  virtual ~VTable() = default;
  virtual Status BestIndex(sqlite3_index_info* info) = 0;
  virtual std::unique_ptr<VCursor> Open() = 0;
  // xUpdate; argc/argv as sqlite3 passes them. Read-only tables refuse.
  virtual Status Update(int argc, sqlite3_value** argv, sqlite3_int64* rowid);
  Session* session() const { return session_; }
  Database* db() const { return session_->db(); }

 protected:
  Session* session_;
};

class VCursor : public sqlite3_vtab_cursor {
 public:
  VCursor() : sqlite3_vtab_cursor{} {}
  virtual ~VCursor() = default;
  virtual Status Filter(int idx_num, const char* idx_str, int argc, sqlite3_value** argv) = 0;
  virtual Status Next() = 0;
  virtual bool Eof() const = 0;
  virtual Status Column(sqlite3_context* ctx, int i) = 0;
  virtual int64_t Rowid() const = 0;
};

// What the module registers: the declared schema and how to make a table.
struct ModuleSpec {
  const char* module;       // sqlite3 module name
  const char* table;        // created in main as "CREATE VIRTUAL TABLE <table> USING <module>";
                            // null for an eponymous-only table-valued function
  const char* schema;       // for sqlite3_declare_vtab
  bool writable;            // has xUpdate and the transaction hooks
  VTable* (*make)(Session*);
};

// The specs of tables.cc and functions.cc.
std::vector<ModuleSpec> TableSpecs();
std::vector<ModuleSpec> FunctionSpecs();
// The scalar functions of functions.cc (profile, export_user).
Status RegisterScalarFunctions(Session* session);

// ---- sqlite3_value helpers
std::string ValueText(sqlite3_value* v);
bool IsNull(sqlite3_value* v);
// An integer value, if v is one or converts exactly (12, 12.0, '12').
std::optional<int64_t> ValueInt(sqlite3_value* v);
void ResultText(sqlite3_context* ctx, const std::string& s);
// Unix microseconds now, by the file's clock.
int64_t NowMicros(Database* db);

// A vector given as a float32 BLOB or a JSON array of numbers; `what` names
// it in messages. NULL gives an empty vector.
Status VectorArg(sqlite3_value* v, const char* what, std::vector<float>* out);
// Column i of a row of blocks / facts (the tables' column order).
void BlockRow(sqlite3_context* ctx, const format::BlockRecord& b, int i);
void FactColumn(sqlite3_context* ctx, const format::FactRecord& f, int i);
constexpr int kBlockColumns = 7;
constexpr int kFactColumns = 11;

// Counts of engine reads made by the virtual tables, for tests that check a
// plan does not scan (tests/sql/sql_test.cc).
// Process-wide (handles on several threads add to them).
struct ReadCounters {
  std::atomic<uint64_t> episode_reads{0};  // episode records read (GetEpisode)
  std::atomic<uint64_t> user_scans{0};     // walks over every user (ListUsers)
  std::atomic<uint64_t> user_lists{0};     // one user's listings (ListEpisodeIds, ListBlocks, ListFacts)
  void Reset() {
    episode_reads = 0;
    user_scans = 0;
    user_lists = 0;
  }
};
ReadCounters& Counters();

}  // namespace agentmem::engine::sql

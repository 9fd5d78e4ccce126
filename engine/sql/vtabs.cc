// engine/sql/vtabs.cc -- registration of the virtual tables and table-valued
// functions, and the sqlite3_module trampolines over VTable / VCursor.
#include "engine/sql/vtabs.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "engine/sql/function_table.h"
#include "engine/sql/session.h"
#include "engine/sql/vtab.h"

namespace agentmem::engine::sql {

namespace {

struct ModuleAux {
  Session* session;
  ModuleSpec spec;
};

Session* SessionOf(sqlite3_vtab* v) { return static_cast<VTable*>(v)->session(); }

// Runs f (which returns a Status) for a sqlite3 callback and gives SQLite its
// result code: SQLITE_OK, or for an error Status what `fail` makes of it
// (Session::Fail keeps the Status for the C API). No exception leaves, and
// none may: the callback returns through sqlite3's C frames.
//
// A failed allocation inside f left the operation half done, so the handle is
// poisoned (Database::Poison), as the C API's Guard does. The answer is then
// SQLITE_NOMEM and nothing is allocated for it: memory may still be short, and
// a Status is a heap object. Session::Take reports SQLITE_NOMEM as
// AGENTMEM_NOMEM. When keeping an error Status fails for want of memory, the
// answer is SQLITE_NOMEM too.
template <typename F, typename Fail>
int Protect(Session* session, F&& f, Fail&& fail) noexcept {
  bool half_done = true;
  try {
    Status s;
    try {
      s = f();
      half_done = false;
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      half_done = false;
      session->db()->Poison();
      s = Status(kInternal, std::string("internal error: ") + e.what());
    } catch (...) {
      half_done = false;
      session->db()->Poison();
      s = Status(kInternal, "internal error");
    }
    return s.ok() ? SQLITE_OK : fail(s);
  } catch (...) {
    if (half_done) session->db()->Poison();
    return SQLITE_NOMEM;
  }
}

// The same, with Session::Fail for an error Status.
template <typename F>
int Protect(sqlite3_vtab* v, F&& f) noexcept {
  Session* session = SessionOf(v);
  return Protect(session, f, [&](const Status& s) { return session->Fail(v, s); });
}

int Connect(sqlite3* conn, void* aux, int, const char* const*, sqlite3_vtab** out, char** err) {
  auto* a = static_cast<ModuleAux*>(aux);
  int rc = sqlite3_declare_vtab(conn, a->spec.schema);
  if (rc != SQLITE_OK) {
    *err = sqlite3_mprintf("cannot declare %s: %s", a->spec.module, sqlite3_errmsg(conn));
    return rc;
  }
  VTable* t = nullptr;
  rc = Protect(
      a->session,
      [&] {
        t = a->spec.make(a->session);
        return Status::OK();
      },
      [](const Status&) { return SQLITE_NOMEM; });
  if (rc != SQLITE_OK) return rc;
  *out = t;
  return SQLITE_OK;
}

int Disconnect(sqlite3_vtab* v) {
  delete static_cast<VTable*>(v);
  return SQLITE_OK;
}

int BestIndex(sqlite3_vtab* v, sqlite3_index_info* info) {
  auto* t = static_cast<VTable*>(v);
  return Protect(t->session(), [&] { return t->BestIndex(info); }, [&](const Status& s) {
    if (s.code() == kConstraint) return SQLITE_CONSTRAINT;  // this plan is not usable
    return t->session()->Fail(v, s);
  });
}

int OpenCursor(sqlite3_vtab* v, sqlite3_vtab_cursor** out) {
  auto* t = static_cast<VTable*>(v);
  std::unique_ptr<VCursor> c;
  int rc = Protect(v, [&] {
    c = t->Open();
    return Status::OK();
  });
  if (rc != SQLITE_OK) return rc;
  *out = c.release();
  return SQLITE_OK;
}

int CloseCursor(sqlite3_vtab_cursor* c) {
  delete static_cast<VCursor*>(c);
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* c, int idx_num, const char* idx_str, int argc,
           sqlite3_value** argv) {
  auto* cur = static_cast<VCursor*>(c);
  return Protect(c->pVtab, [&] { return cur->Filter(idx_num, idx_str, argc, argv); });
}

int Next(sqlite3_vtab_cursor* c) {
  auto* cur = static_cast<VCursor*>(c);
  return Protect(c->pVtab, [&] { return cur->Next(); });
}

int Eof(sqlite3_vtab_cursor* c) { return static_cast<VCursor*>(c)->Eof() ? 1 : 0; }

int Column(sqlite3_vtab_cursor* c, sqlite3_context* ctx, int i) {
  auto* cur = static_cast<VCursor*>(c);
  int rc = Protect(SessionOf(c->pVtab), [&] { return cur->Column(ctx, i); },
                   [&](const Status& s) {
                     int code = SessionOf(c->pVtab)->Fail(c->pVtab, s);
                     sqlite3_result_error(ctx, s.message().c_str(), -1);
                     return code;
                   });
  if (rc == SQLITE_NOMEM) sqlite3_result_error_nomem(ctx);
  return rc;
}

int Rowid(sqlite3_vtab_cursor* c, sqlite3_int64* out) {
  *out = static_cast<VCursor*>(c)->Rowid();
  return SQLITE_OK;
}

int Update(sqlite3_vtab* v, int argc, sqlite3_value** argv, sqlite3_int64* rowid) {
  auto* t = static_cast<VTable*>(v);
  return Protect(v, [&] { return t->Update(argc, argv, rowid); });
}

int Begin(sqlite3_vtab* v) {
  return Protect(v, [&] { return SessionOf(v)->TxnBegin(); });
}
int Sync(sqlite3_vtab* v) {
  return Protect(v, [&] { return SessionOf(v)->TxnSync(); });
}
int Commit(sqlite3_vtab*) { return SQLITE_OK; }  // the commit happened in xSync
int Rollback(sqlite3_vtab* v) {
  return Protect(v, [&] {
    SessionOf(v)->TxnRollback();
    return Status::OK();
  });
}
int Savepoint(sqlite3_vtab* v, int n) {
  return Protect(v, [&] { return SessionOf(v)->TxnSavepoint(n); });
}
int Release(sqlite3_vtab* v, int n) {
  return Protect(v, [&] { return SessionOf(v)->TxnRelease(n); });
}
int RollbackTo(sqlite3_vtab* v, int n) {
  return Protect(v, [&] { return SessionOf(v)->TxnRollbackTo(n); });
}

sqlite3_module MakeModule(const ModuleSpec& spec) {
  sqlite3_module m{};
  m.iVersion = 2;  // xSavepoint, xRelease, xRollbackTo
  m.xCreate = spec.table ? Connect : nullptr;  // null: eponymous-only
  m.xConnect = Connect;
  m.xBestIndex = BestIndex;
  m.xDisconnect = Disconnect;
  m.xDestroy = Disconnect;
  m.xOpen = OpenCursor;
  m.xClose = CloseCursor;
  m.xFilter = Filter;
  m.xNext = Next;
  m.xEof = Eof;
  m.xColumn = Column;
  m.xRowid = Rowid;
  if (spec.writable) {
    m.xUpdate = Update;
    m.xBegin = Begin;
    m.xSync = Sync;
    m.xCommit = Commit;
    m.xRollback = Rollback;
    m.xSavepoint = Savepoint;
    m.xRelease = Release;
    m.xRollbackTo = RollbackTo;
  }
  return m;
}

// sqlite3 keeps a pointer to the module struct: one static copy per spec.
struct ModuleStore {
  std::vector<std::unique_ptr<sqlite3_module>> modules;
};
ModuleStore& Store() {
  static auto* store = new ModuleStore;
  return *store;
}
std::mutex g_store_mu;

const sqlite3_module* ModuleFor(const ModuleSpec& spec) {
  std::lock_guard<std::mutex> g(g_store_mu);
  // Modules are the same for every Session: build each once, by name.
  static auto* by_name = new std::vector<std::pair<std::string, const sqlite3_module*>>;
  for (const auto& [name, m] : *by_name) {
    if (name == spec.module) return m;
  }
  Store().modules.push_back(std::make_unique<sqlite3_module>(MakeModule(spec)));
  by_name->emplace_back(spec.module, Store().modules.back().get());
  return Store().modules.back().get();
}

}  // namespace

Status VTable::Update(int, sqlite3_value**, sqlite3_int64*) {
  return Status(kError, "this table-valued function is read-only");
}

std::string ValueText(sqlite3_value* v) {
  if (!v) return std::string();
  const unsigned char* t = sqlite3_value_text(v);
  int n = sqlite3_value_bytes(v);
  return t ? std::string(reinterpret_cast<const char*>(t), static_cast<size_t>(n)) : std::string();
}

bool IsNull(sqlite3_value* v) { return v == nullptr || sqlite3_value_type(v) == SQLITE_NULL; }

std::optional<int64_t> ValueInt(sqlite3_value* v) {
  if (IsNull(v)) return std::nullopt;
  switch (sqlite3_value_numeric_type(v)) {
    case SQLITE_INTEGER:
      return static_cast<int64_t>(sqlite3_value_int64(v));
    case SQLITE_FLOAT: {
      double d = sqlite3_value_double(v);
      if (std::isfinite(d) && std::floor(d) == d && d >= -9.2e18 && d <= 9.2e18) {
        return static_cast<int64_t>(d);
      }
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

void ResultText(sqlite3_context* ctx, const std::string& s) {
  sqlite3_result_text64(ctx, s.data(), s.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
}

int64_t NowMicros(Database* db) {
  if (db->options().clock) return db->options().clock();
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

ReadCounters& Counters() {
  static ReadCounters counters;
  return counters;
}

Status RegisterTables(Session* session) {
  std::vector<ModuleSpec> specs = TableSpecs();
  for (const ModuleSpec& f : FunctionSpecs()) specs.push_back(f);
  for (const ModuleSpec& f : ChangeFeedSpecs()) specs.push_back(f);
  for (const ModuleSpec& spec : specs) {
    auto* aux = new ModuleAux{session, spec};
    int rc = sqlite3_create_module_v2(session->conn(), spec.module, ModuleFor(spec), aux,
                                      [](void* p) { delete static_cast<ModuleAux*>(p); });
    if (rc != SQLITE_OK) {
      return StatusF(kError, "cannot register the SQL module %s: %s", spec.module,
                     sqlite3_errmsg(session->conn()));
    }
    if (spec.table) {
      std::string sql = std::string("CREATE VIRTUAL TABLE ") + spec.table + " USING " +
                        spec.module;
      char* err = nullptr;
      rc = sqlite3_exec(session->conn(), sql.c_str(), nullptr, nullptr, &err);
      if (rc != SQLITE_OK) {
        // SQLITE_NOMEM: the table's constructor ran out of memory (R4).
        Status s = StatusF((rc & 0xff) == SQLITE_NOMEM ? kNoMem : kError,
                           "cannot create the SQL table %s: %s", spec.table,
                           err ? err : sqlite3_errstr(rc));
        sqlite3_free(err);
        return s;
      }
    }
  }
  return RegisterScalarFunctions(session);
}

}  // namespace agentmem::engine::sql

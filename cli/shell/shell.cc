// cli/shell/shell.cc -- opening files, running SQL and reporting errors.
#include "shell/shell.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "shell/interrupt.h"

namespace agentmem::shell {
namespace {

// The value of column i of the current row, typed.
Value ColumnValue(agentmem_stmt* stmt, int i) {
  switch (agentmem_column_type(stmt, i)) {
    case AGENTMEM_INTEGER:
      return Value::Int(static_cast<long long>(agentmem_column_int64(stmt, i)));
    case AGENTMEM_FLOAT:
      return Value::Real(agentmem_column_double(stmt, i));
    case AGENTMEM_BLOB: {
      const void* p = agentmem_column_blob(stmt, i);
      int n = agentmem_column_bytes(stmt, i);
      return Value::Blob(p ? std::string(static_cast<const char*>(p), n) : std::string());
    }
    case AGENTMEM_NULL:
      return Value::Null();
    default: {
      const unsigned char* t = agentmem_column_text(stmt, i);
      int n = agentmem_column_bytes(stmt, i);
      return Value::Text(t ? std::string(reinterpret_cast<const char*>(t), n) : std::string());
    }
  }
}

bool FileExists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Whether the statement at sql starts with BEGIN or SAVEPOINT.
bool BeginsTransaction(const char* sql) {
  while (*sql == ' ' || *sql == '\t' || *sql == '\r' || *sql == '\n' || *sql == ';') sql++;
  for (const char* word : {"BEGIN", "SAVEPOINT"}) {
    const size_t n = std::strlen(word);
    if (strncasecmp(sql, word, n) == 0 && !std::isalnum(static_cast<unsigned char>(sql[n])) &&
        sql[n] != '_') {
      return true;
    }
  }
  return false;
}

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

Shell::Shell(std::FILE* o, std::FILE* e) : out(o), err(e) {}

Shell::~Shell() { agentmem_close(db_); }

bool Shell::Open(const std::string& path) {
  // A missing file in a folder where it could be made is created by the
  // first write (CreateFile); until then an empty database stands in.
  if (!open_settings.readonly && path != ":memory:" && !path.empty() && !FileExists(path) &&
      access(DirOf(path).c_str(), W_OK | X_OK) == 0) {
    agentmem_db* db = OpenEmptyStandIn();
    if (!db) return false;
    if (db_ && agentmem_close(db_) != AGENTMEM_OK) {
      std::fprintf(err, "Warning: closing %s: %s\n", path_.c_str(), agentmem_errmsg(db_));
    }
    db_ = db;
    path_ = path;
    not_created_ = true;
    return true;
  }
  int flags = open_settings.readonly ? AGENTMEM_OPEN_READONLY
                                     : AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE;
  const char* options = open_settings.options.empty() ? nullptr : open_settings.options.c_str();
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(path.c_str(), &db, flags, options);
  if (rc != AGENTMEM_OK && !open_settings.readonly && path != ":memory:" && FileExists(path) &&
      access(path.c_str(), W_OK) != 0) {
    // Like sqlite3: a file we may read but not write opens read-only, and
    // writes then fail with the engine's read-only message.
    agentmem_close(db);
    db = nullptr;
    rc = agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READONLY, options);
    if (rc == AGENTMEM_OK) {
      std::fprintf(err, "Note: %s is not writable; opened read-only\n", path.c_str());
    }
  }
  if (rc != AGENTMEM_OK) {
    std::string msg = db ? agentmem_errmsg(db) : agentmem_errstr(rc);
    agentmem_close(db);
    if ((rc & 0xff) == AGENTMEM_CORRUPT) msg += " (.check lists the damage; .recover NEWFILE salvages the rest)";
    Fail("cannot open \"" + path + "\": " + msg);
    return false;
  }
  if (db_ && agentmem_close(db_) != AGENTMEM_OK) {
    std::fprintf(err, "Warning: closing %s: %s\n", path_.c_str(), agentmem_errmsg(db_));
  }
  db_ = db;
  path_ = path;
  not_created_ = false;
  return true;
}

agentmem_db* Shell::OpenEmptyStandIn() {
  const char* options = open_settings.options.empty() ? nullptr : open_settings.options.c_str();
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/agentmem-shell-XXXXXX";
  if (!mkdtemp(dir.data())) {
    Fail("cannot make a temporary folder in " + DirOf(dir) + ": " + std::strerror(errno));
    return nullptr;
  }
  const std::string file = dir + "/empty.agentmem";
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(file.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                            options);
  if (rc == AGENTMEM_OK) rc = agentmem_close(db);
  db = nullptr;
  if (rc == AGENTMEM_OK) rc = agentmem_open_v2(file.c_str(), &db, AGENTMEM_OPEN_READONLY, options);
  std::string msg = rc == AGENTMEM_OK ? "" : db ? agentmem_errmsg(db) : agentmem_errstr(rc);
  unlink(file.c_str());  // the open handle reads it all the same
  rmdir(dir.c_str());
  if (rc != AGENTMEM_OK) {
    agentmem_close(db);
    Fail("cannot open an empty database: " + msg);
    return nullptr;
  }
  return db;
}

bool Shell::WriteRefused() const {
  return not_created_ && db_ && (agentmem_errcode(db_) & 0xff) == AGENTMEM_READONLY;
}

namespace {

// Which group of the file's settings an open option belongs to: 1 the
// vector space, 2 the text analysis, 3 how vectors are stored, 0 none.
int SettingGroup(const std::string& key) {
  if (key == "embedder" || key == "vector_dim" || key == "vector_metric") return 1;
  if (key == "tokenizer" || key == "stem" || key == "stop_words" || key == "context" ||
      key == "own_weight") {
    return 2;
  }
  if (key == "vector_type") return 3;
  return 0;
}

// Calls fn(key, item) for each "key=value" item of an options string.
template <typename Fn>
void ForEachOption(const std::string& options, Fn fn) {
  for (size_t at = 0; at < options.size();) {
    size_t end = std::min(options.find_first_of("&;", at), options.size());
    std::string item = options.substr(at, end - at);
    fn(item.substr(0, item.find('=')), item);
    at = end + 1;
  }
}

}  // namespace

bool Shell::CreateFile(const std::string& space) {
  std::string all = open_settings.options;
  bool named[4] = {false, false, false, false};
  ForEachOption(all, [&](const std::string& key, const std::string&) {
    named[SettingGroup(key)] = true;
  });
  // A group of settings that -options names wins over the export's.
  ForEachOption(space, [&](const std::string& key, const std::string& item) {
    int group = SettingGroup(key);
    if (group != 0 && !named[group]) all += (all.empty() ? "" : "&") + item;
  });
  const char* options = all.empty() ? nullptr : all.c_str();
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(path_.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                            options);
  if (rc != AGENTMEM_OK) {
    std::string msg = db ? agentmem_errmsg(db) : agentmem_errstr(rc);
    agentmem_close(db);
    Fail("cannot create \"" + path_ + "\": " + msg);
    return false;
  }
  agentmem_close(db_);
  db_ = db;
  not_created_ = false;
  return true;
}

bool Shell::OpenForSalvage(const std::string& path) {
  agentmem_db* db = nullptr;
  const char* options = open_settings.options.empty() ? nullptr : open_settings.options.c_str();
  int rc = agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READONLY, options);
  if (rc == AGENTMEM_OK) {
    db_ = db;
    path_ = path;
    return true;
  }
  std::string msg = db ? agentmem_errmsg(db) : agentmem_errstr(rc);
  agentmem_close(db);
  if ((rc & 0xff) != AGENTMEM_CORRUPT) {
    Fail("cannot open \"" + path + "\": " + msg);
    return false;
  }
  path_ = path;
  damage_ = msg;
  return true;
}

bool Shell::Close() {
  if (!db_) return true;
  int rc = agentmem_close(db_);
  if (rc != AGENTMEM_OK && rc != AGENTMEM_BUSY) {
    db_ = nullptr;  // freed all the same (agentmem.h)
    Fail("closing " + path_ + ": " + agentmem_errstr(rc));
    return false;
  }
  if (rc == AGENTMEM_OK) db_ = nullptr;
  return rc == AGENTMEM_OK;
}

void Shell::Fail(const std::string& message) {
  failures_++;
  std::fflush(out);
  std::fprintf(err, "Error: %s\n", message.c_str());
  std::fflush(err);
}

bool Shell::FailDb(const std::string& context) {
  std::string msg = db_ ? agentmem_errmsg(db_) : "no database is open";
  Fail(context.empty() ? msg : context + ": " + msg);
  return false;
}

bool Shell::Query(const std::string& sql, std::vector<std::string>* columns,
                  const std::function<void(const std::vector<Value>&)>& fn, std::string* error) {
  auto fail = [&](const std::string& msg) {
    if (error) {
      *error = msg;
    } else {
      Fail(msg);
    }
    return false;
  };
  if (!db_) return fail("no database is open (use .open FILE)");
  const char* tail = sql.c_str();
  while (*tail) {
    agentmem_stmt* stmt = nullptr;
    const char* next = nullptr;
    if (agentmem_prepare(db_, tail, -1, &stmt, &next) != AGENTMEM_OK) {
      return fail(agentmem_errmsg(db_));
    }
    tail = next ? next : tail + std::strlen(tail);
    if (!stmt) continue;
    int n = agentmem_column_count(stmt);
    columns->clear();
    for (int i = 0; i < n; i++) {
      const char* name = agentmem_column_name(stmt, i);
      columns->push_back(name ? name : "");
    }
    int rc;
    std::vector<Value> row(n);
    while ((rc = agentmem_step(stmt)) == AGENTMEM_ROW) {
      for (int i = 0; i < n; i++) row[i] = ColumnValue(stmt, i);
      fn(row);
    }
    if (rc != AGENTMEM_DONE) {
      std::string msg = agentmem_errmsg(db_);
      agentmem_finalize(stmt);
      return fail(msg);
    }
    agentmem_finalize(stmt);
  }
  return true;
}

bool Shell::RunSql(const std::string& sql) {
  if (!db_) {
    Fail("no database is open (use .open FILE)");
    return false;
  }
  const char* tail = sql.c_str();
  while (*tail) {
    agentmem_stmt* stmt = nullptr;
    const char* next = nullptr;
    const char* start = tail;
    // A transaction is begun to write: it begins in the created file.
    if (not_created_ && BeginsTransaction(tail) && !CreateFile()) return false;
    if (agentmem_prepare(db_, tail, -1, &stmt, &next) != AGENTMEM_OK) {
      // The first write to a file not created yet creates it, then runs.
      if (!WriteRefused()) return FailDb();
      if (!CreateFile()) return false;
      continue;
    }
    tail = next ? next : tail + std::strlen(tail);
    if (!stmt) continue;
    if (!BindParams(stmt, std::string(start, tail))) {
      agentmem_finalize(stmt);
      return false;
    }
    int n = agentmem_column_count(stmt);
    std::unique_ptr<Printer> printer;
    std::vector<std::string> columns;
    if (n > 0) {
      for (int i = 0; i < n; i++) {
        const char* name = agentmem_column_name(stmt, i);
        columns.push_back(name ? name : "");
      }
      printer = MakePrinter(print, out);
    }
    // Nothing is printed before the first row or the end: a statement run
    // again on a file just created has printed nothing the first time.
    bool begun = false;
    int rc;
    std::vector<Value> row(n);
    bool interrupted = false;
    while ((rc = agentmem_step(stmt)) == AGENTMEM_ROW) {
      for (int i = 0; i < n; i++) row[i] = ColumnValue(stmt, i);
      if (!begun) printer->Begin(columns);
      begun = true;
      printer->Row(row);
      if ((interrupted = Interrupted())) break;
    }
    if (rc != AGENTMEM_ROW && rc != AGENTMEM_DONE && !begun && WriteRefused()) {
      agentmem_finalize(stmt);
      if (!CreateFile()) return false;
      tail = start;
      continue;
    }
    if (printer && !begun) printer->Begin(columns);
    if (printer) printer->End();
    if (interrupted) {
      agentmem_finalize(stmt);
      ClearInterrupt();
      Fail("interrupted");
      return false;
    }
    if (rc != AGENTMEM_DONE) {
      FailDb();
      agentmem_finalize(stmt);
      return false;
    }
    agentmem_finalize(stmt);
  }
  std::fflush(out);
  return true;
}

bool Shell::Run(const std::string& input) {
  size_t start = input.find_first_not_of(" \t\r\n");
  if (start != std::string::npos && input[start] == '.') return RunDot(input.substr(start));
  return RunSql(input);
}

}  // namespace agentmem::shell

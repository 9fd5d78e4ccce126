// cli/shell/shell.h -- the state of one `agentmem` shell session and the entry
// points that run its input: SQL text and dot-commands (docs/shell.md).
//
// The shell is a pure client of include/agentmem.h. It owns one database
// handle at a time (.open replaces it). Every failure is reported on stderr
// as "Error: <message>" (the engine's message for engine failures) and
// counted, so that main() can exit with status 1.
#pragma once

#include <agentmem.h>

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "shell/output.h"

namespace agentmem::shell {

struct OpenSettings {
  bool readonly = false;
  std::string options;  // agentmem_open_v2 option string ("" = defaults)
};

class Shell {
 public:
  explicit Shell(std::FILE* out = stdout, std::FILE* err = stderr);
  ~Shell();
  Shell(const Shell&) = delete;
  Shell& operator=(const Shell&) = delete;

  // Opens path and makes it the current database, closing the previous one
  // only once the new one is open. Returns false (and reports) on failure.
  // A missing file that could be created is not created yet: until the
  // first write the shell reads an empty database, and that write creates
  // the file (as sqlite3 creates a file only once something is written).
  bool Open(const std::string& path);
  // Closes the database (at exit); false (reported) when the close failed,
  // e.g. the final sync of sync=normal.
  bool Close();
  const std::string& path() const { return path_; }
  // The file at path() does not exist yet (Open).
  bool not_created() const { return not_created_; }
  // Creates that file and makes it the current database. False (reported)
  // on failure. `space`, when not empty, is open options naming a vector
  // space ("embedder=...&vector_dim=...&vector_metric=...") and text
  // analysis ("tokenizer=...&stem=..."): the file gets each unless -options
  // names one of its keys.
  bool CreateFile(const std::string& space = "");
  // Opens path read-only for .check and .recover only: a file that fails to
  // open as damaged (AGENTMEM_CORRUPT_*) becomes the current path with no
  // handle, and damage() holds why. Returns false (reported) otherwise.
  bool OpenForSalvage(const std::string& path);
  const std::string& damage() const { return damage_; }
  agentmem_db* db() const { return db_; }

  // Runs every ';'-separated statement of sql and prints the results in the
  // current mode. Returns false at the first failing statement.
  bool RunSql(const std::string& sql);
  // Runs one dot-command line (starting with '.'). Returns false on failure.
  bool RunDot(const std::string& line);
  // A statement or a dot-command line.
  bool Run(const std::string& input);

  // Reports "Error: <message>" on stderr and counts the failure.
  void Fail(const std::string& message);
  // Reports the handle's current error message.
  bool FailDb(const std::string& context = "");
  size_t failures() const { return failures_; }

  // Runs a query and hands its rows to fn(row) (column names in *columns).
  // Returns false on an error: reported, or only stored in *error when
  // error is not null.
  bool Query(const std::string& sql, std::vector<std::string>* columns,
             const std::function<void(const std::vector<Value>&)>& fn,
             std::string* error = nullptr);

  // Binds the .parameter values to stmt, compiled from sql; false (reported)
  // when one of its parameters has no value.
  bool BindParams(agentmem_stmt* stmt, const std::string& sql);

  PrintOptions print;
  std::map<std::string, Value> params;  // .parameter set NAME VALUE
  OpenSettings open_settings;
  bool bail = false;
  bool interactive = false;  // stdin is a terminal and the REPL runs
  bool quit = false;         // .quit was run
  int exit_code = -1;        // .quit/.exit CODE (-1: by failures)
  std::FILE* out;
  std::FILE* err;

 private:
  // An empty database of the open settings, read-only, whose file is
  // already unlinked: what a missing file reads as. Null on failure
  // (reported).
  agentmem_db* OpenEmptyStandIn();
  // The last call was refused as a write on a file not created yet.
  bool WriteRefused() const;

  agentmem_db* db_ = nullptr;
  std::string path_;
  std::string damage_;  // why path_ did not open (OpenForSalvage)
  size_t failures_ = 0;
  bool not_created_ = false;
};

// The parameters of one statement by index, as SQLite numbers them: names[i]
// is ":name", "@name", "$name" or "?N" for index i, "" for an index no
// parameter has (names[0] is unused). params.cc.
std::vector<std::string> ParameterNames(const std::string& sql);

}  // namespace agentmem::shell

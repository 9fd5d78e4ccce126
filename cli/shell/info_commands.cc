// cli/shell/info_commands.cc -- .tables, .schema, .stats, .check and .vacuum:
// what the file holds and whether it is sound, through agentmem_stats_get and
// the SQL layer's catalog and table-valued functions (docs/sql.md).
#include <algorithm>
#include <set>

#include "shell/dot_commands.h"
#include "shell/text.h"

namespace agentmem::shell {
namespace {

// Modules that SQLite itself registers: not agentmem's table functions.
bool SqliteModule(const std::string& name) {
  static const char* kPrefixes[] = {"fts", "rtree", "json_", "pragma_", "sqlite_"};
  for (const char* p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  static const std::set<std::string> kNames = {"dbstat",          "geopoly", "bytecode",
                                               "tables_used",     "carray",  "completion",
                                               "generate_series", "fsdir",   "zipfile"};
  return kNames.count(name) > 0;
}

// Tables (and views) in the catalog, and the table-valued functions.
bool Catalog(Shell& sh, std::vector<std::string>* tables, std::vector<std::string>* functions) {
  std::vector<std::string> cols;
  std::set<std::string> modules_of_tables;
  bool ok = sh.Query(
      "SELECT name, sql FROM sqlite_schema WHERE type IN ('table', 'view') "
      "AND name NOT LIKE 'sqlite_%' ORDER BY name",
      &cols, [&](const std::vector<Value>& row) {
        tables->push_back(row[0].text);
        // "CREATE VIRTUAL TABLE x USING module(...)": its module is no function.
        const std::string& sql = row[1].text;
        size_t using_at = sql.find("USING ");
        if (using_at != std::string::npos) {
          std::string module = sql.substr(using_at + 6);
          module = module.substr(0, module.find_first_of("( \t\n;"));
          modules_of_tables.insert(module);
        }
      });
  if (!ok) return false;
  return sh.Query("SELECT name FROM pragma_module_list ORDER BY name", &cols,
                  [&](const std::vector<Value>& row) {
                    const std::string& m = row[0].text;
                    if (!SqliteModule(m) && !modules_of_tables.count(m) &&
                        std::find(tables->begin(), tables->end(), m) == tables->end()) {
                      functions->push_back(m);
                    }
                  });
}

struct Column {
  std::string name, type;
  bool hidden;
};

bool Columns(Shell& sh, const std::string& table, std::vector<Column>* out) {
  std::vector<std::string> cols;
  return sh.Query("SELECT name, type, hidden FROM pragma_table_xinfo(" + SqlQuote(table) + ")",
                  &cols, [&](const std::vector<Value>& row) {
                    out->push_back({row[0].text, row[1].text, row[2].text != "0"});
                  });
}

std::string Joined(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); i++) out += (i ? ", " : "") + parts[i];
  return out;
}

// "episodes(id INTEGER, ..., embedding BLOB HIDDEN)" or, for a table-valued
// function, "recall(query, user_id, ...) -> (id INTEGER, ...)".
std::string Describe(const std::string& name, const std::vector<Column>& columns, bool function) {
  std::vector<std::string> args, result;
  for (const auto& c : columns) {
    std::string decl = c.type.empty() ? c.name : c.name + " " + c.type;
    if (function && c.hidden) {
      args.push_back(c.name);
    } else {
      result.push_back(c.hidden ? decl + " HIDDEN" : decl);
    }
  }
  if (!function) return name + "(" + Joined(result) + ")";
  return name + "(" + Joined(args) + ") -> (" + Joined(result) + ")";
}

}  // namespace

bool CmdTables(Shell& sh, const Args& args) {
  if (args.size() != 1) {
    sh.Fail("usage: .tables");
    return false;
  }
  std::vector<std::string> tables, functions;
  if (!Catalog(sh, &tables, &functions)) return false;
  std::fprintf(sh.out, "tables:          %s\n", Joined(tables).c_str());
  std::fprintf(sh.out, "table functions: %s\n", Joined(functions).c_str());
  std::fflush(sh.out);
  return true;
}

bool CmdSchema(Shell& sh, const Args& args) {
  if (args.size() > 2) {
    sh.Fail("usage: .schema [NAME]");
    return false;
  }
  std::vector<std::string> tables, functions;
  if (!Catalog(sh, &tables, &functions)) return false;
  bool found = false;
  auto show = [&](const std::vector<std::string>& names, bool function) {
    for (const auto& name : names) {
      if (args.size() == 2 && args[1] != name) continue;
      found = true;
      std::vector<Column> columns;
      if (!Columns(sh, name, &columns)) return false;
      std::fprintf(sh.out, "%s\n", Describe(name, columns, function).c_str());
    }
    return true;
  };
  if (!show(tables, false) || !show(functions, true)) return false;
  if (args.size() == 2 && !found) {
    sh.Fail("no such table or table function: " + args[1]);
    return false;
  }
  std::fflush(sh.out);
  return true;
}

bool CmdStats(Shell& sh, const Args& args) {
  if (args.size() != 1) {
    sh.Fail("usage: .stats");
    return false;
  }
  if (!sh.db()) {
    sh.Fail("no database is open (use .open FILE)");
    return false;
  }
  agentmem_stats st;
  if (agentmem_stats_get(sh.db(), &st) != AGENTMEM_OK) return sh.FailDb(".stats");
  std::FILE* o = sh.out;
  std::fprintf(o, "file:      %s\n", sh.path().c_str());
  std::fprintf(o, "size:      %s bytes (%s), %s pages\n", Thousands(st.file_bytes).c_str(),
               HumanBytes(st.file_bytes).c_str(), Thousands(st.pages).c_str());
  std::fprintf(o, "users:     %s\n", Thousands(st.users).c_str());
  std::fprintf(o, "episodes:  %s (%s of text)\n", Thousands(st.episodes).c_str(),
               HumanBytes(st.text_bytes).c_str());
  std::fprintf(o, "blocks:    %s (%s versions)\n", Thousands(st.blocks).c_str(),
               Thousands(st.block_versions).c_str());
  std::fprintf(o, "facts:     %s\n", Thousands(st.facts).c_str());
  std::fprintf(o, "commits:   %s\n", Thousands(st.commits).c_str());
  // The torn tail and the per-user counts come from the SQL layer.
  std::vector<std::string> cols;
  std::string error;
  int64_t torn = 0;
  bool ok = sh.Query(
      "SELECT torn_bytes FROM stats()", &cols,
      [&](const std::vector<Value>& row) { ParseInt(row[0].text, &torn); }, &error);
  if (ok) {
    std::fprintf(o, "torn tail: %s bytes%s\n", Thousands(torn).c_str(),
                 torn ? " (left by a crash; ignored, and cut off by the next write)" : "");
  }
  PrintOptions po = sh.print;
  if (po.mode == Mode::kList) po.mode = Mode::kTable;
  std::unique_ptr<Printer> printer;
  ok =
      ok && sh.Query(
                "SELECT user_id, episodes, blocks, facts FROM user_stats() ORDER BY user_id", &cols,
                [&](const std::vector<Value>& row) {
                  if (!printer) {
                    std::fputc('\n', o);
                    printer = MakePrinter(po, o);
                    printer->Begin(cols);
                  }
                  printer->Row(row);
                },
                &error);
  if (printer) printer->End();
  if (!ok) {
    sh.Fail(".stats: " + error);
    return false;
  }
  std::fflush(o);
  return true;
}

bool CmdCheck(Shell& sh, const Args& args) {
  if (args.size() != 1) {
    sh.Fail("usage: .check");
    return false;
  }
  if (!sh.db() && !sh.damage().empty()) return CmdCheckDamaged(sh);
  std::vector<std::string> cols, problems;
  if (!sh.Query("SELECT * FROM integrity_check()", &cols,
                [&](const std::vector<Value>& row) { problems.push_back(row[0].text); })) {
    return false;
  }
  for (const auto& p : problems) std::fprintf(sh.out, "%s\n", p.c_str());
  std::fflush(sh.out);
  if (problems.size() == 1 && problems[0] == "ok") return true;
  PrintDamage(sh);  // damage before a checkpoint lets the file open: list all of it
  sh.Fail("integrity check found " + Thousands(static_cast<int64_t>(problems.size())) +
          (problems.size() == 1 ? " problem" : " problems"));
  return false;
}

bool CmdVacuum(Shell& sh, const Args& args) {
  if (args.size() != 1) {
    sh.Fail("usage: .vacuum");
    return false;
  }
  if (!sh.db()) {
    sh.Fail("no database is open (use .open FILE)");
    return false;
  }
  agentmem_receipt r;
  if (agentmem_vacuum(sh.db(), &r) != AGENTMEM_OK) return sh.FailDb(".vacuum");
  std::fprintf(sh.out, "vacuumed %s: %s -> %s bytes\n", sh.path().c_str(),
               Thousands(r.bytes_before).c_str(), Thousands(r.bytes_after).c_str());
  return true;
}

}  // namespace agentmem::shell

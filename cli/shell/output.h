// cli/shell/output.h -- result sets and the output modes of the shell
// (docs/shell.md, "Output modes"): list, csv, json, line, table and box.
//
// A Printer receives a result set as Begin(columns), Row(values)..., End().
// Streaming modes (list, csv, json, line) print each row as it arrives; table
// and box keep the rows until End() because the column widths depend on all
// of them.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agentmem::shell {

enum class Mode { kList, kCsv, kJson, kLine, kTable, kBox };

// "list" -> kList ...; nullopt for an unknown name.
std::optional<Mode> ParseMode(const std::string& name);
const char* ModeName(Mode mode);

// One value of a result row. kind follows agentmem's column types
// (AGENTMEM_INTEGER ... AGENTMEM_NULL); text holds the value as text (for a
// float the shortest decimal that reads back to the same double, for a blob
// the raw bytes).
struct Value {
  int kind = 5;  // AGENTMEM_NULL
  std::string text;

  static Value Null();
  static Value Int(long long v);
  static Value Real(double v);
  static Value Text(std::string s);
  static Value Blob(std::string bytes);
  bool is_null() const { return kind == 5; }
  bool is_number() const { return kind == 1 || kind == 2; }
};

// The shortest decimal text that reads back as the same double ("1.5", "1e+300").
std::string FormatDouble(double v);

struct PrintOptions {
  Mode mode = Mode::kList;
  bool headers = false;  // list and csv: print a header line
  size_t max_width = 0;  // table and box: cut longer cells (0: no limit)
};

class Printer {
 public:
  virtual ~Printer() = default;
  virtual void Begin(const std::vector<std::string>& columns) = 0;
  virtual void Row(const std::vector<Value>& values) = 0;
  // Ends the result set. `any_rows` tells json whether to print "[]".
  virtual void End() = 0;
};

// A printer writing to `out` (not owned; it must outlive the printer).
std::unique_ptr<Printer> MakePrinter(const PrintOptions& opts, std::FILE* out);

// Display helpers shared with the dot-commands.
size_t DisplayWidth(const std::string& utf8);
std::string CsvQuote(const std::string& s);
std::string JsonString(const std::string& s);  // a JSON string literal, invalid UTF-8 replaced
std::string HexOf(const std::string& bytes);

}  // namespace agentmem::shell

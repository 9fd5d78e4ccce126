// cli/shell/output.cc -- the output modes (see output.h).
#include "shell/output.h"

#include <charconv>
#include <nlohmann/json.hpp>

namespace agentmem::shell {
namespace {

constexpr int kInteger = 1, kFloat = 2, kText = 3, kBlob = 4, kNull = 5;

// Text for the display modes: control characters escaped so that one value
// stays on one line of a table; blobs as an SQL hex literal.
std::string DisplayText(const Value& v) {
  if (v.kind == kBlob) return "x'" + HexOf(v.text) + "'";
  std::string out;
  out.reserve(v.text.size());
  for (char c : v.text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += '?';
    } else {
      out += c;
    }
  }
  return out;
}

// Cuts s to at most `width` code points, ending with "…" when cut.
std::string Clip(const std::string& s, size_t width) {
  if (width == 0 || DisplayWidth(s) <= width) return s;
  size_t points = 0, i = 0;
  for (; i < s.size(); i++) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (points == width - 1) break;
      points++;
    }
  }
  return s.substr(0, i) + "\xE2\x80\xA6";
}

std::string Pad(const std::string& s, size_t width, bool right) {
  size_t w = DisplayWidth(s);
  std::string fill(width > w ? width - w : 0, ' ');
  return right ? fill + s : s + fill;
}

class ListPrinter : public Printer {
 public:
  ListPrinter(const PrintOptions& o, std::FILE* out, bool csv) : o_(o), out_(out), csv_(csv) {}
  void Begin(const std::vector<std::string>& columns) override {
    if (!o_.headers) return;
    for (size_t i = 0; i < columns.size(); i++) {
      if (i) std::fputc(csv_ ? ',' : '|', out_);
      std::fputs(csv_ ? CsvQuote(columns[i]).c_str() : columns[i].c_str(), out_);
    }
    std::fputc('\n', out_);
  }
  void Row(const std::vector<Value>& values) override {
    for (size_t i = 0; i < values.size(); i++) {
      if (i) std::fputc(csv_ ? ',' : '|', out_);
      const Value& v = values[i];
      std::string text = v.kind == kBlob ? "x'" + HexOf(v.text) + "'" : v.text;
      if (csv_) text = CsvQuote(text);
      std::fwrite(text.data(), 1, text.size(), out_);
    }
    std::fputc('\n', out_);
  }
  void End() override {}

 private:
  PrintOptions o_;
  std::FILE* out_;
  bool csv_;
};

class JsonPrinter : public Printer {
 public:
  explicit JsonPrinter(std::FILE* out) : out_(out) {}
  void Begin(const std::vector<std::string>& columns) override {
    keys_.clear();
    for (const auto& c : columns) keys_.push_back(JsonString(c));
    rows_ = 0;
  }
  void Row(const std::vector<Value>& values) override {
    std::string line = rows_ == 0 ? "[{" : ",\n{";
    for (size_t i = 0; i < values.size(); i++) {
      if (i) line += ',';
      line += keys_[i];
      line += ':';
      const Value& v = values[i];
      if (v.kind == kNull) {
        line += "null";
      } else if (v.kind == kInteger || v.kind == kFloat) {
        line += v.text == "inf" || v.text == "-inf" || v.text == "nan" ? "null" : v.text;
      } else if (v.kind == kBlob) {
        line += '"' + HexOf(v.text) + '"';
      } else {
        line += JsonString(v.text);
      }
    }
    line += '}';
    std::fwrite(line.data(), 1, line.size(), out_);
    rows_++;
  }
  void End() override { std::fputs(rows_ == 0 ? "[]\n" : "]\n", out_); }

 private:
  std::FILE* out_;
  std::vector<std::string> keys_;
  size_t rows_ = 0;
};

class LinePrinter : public Printer {
 public:
  explicit LinePrinter(std::FILE* out) : out_(out) {}
  void Begin(const std::vector<std::string>& columns) override {
    columns_ = columns;
    width_ = 0;
    for (const auto& c : columns) width_ = std::max(width_, DisplayWidth(c));
    rows_ = 0;
  }
  void Row(const std::vector<Value>& values) override {
    if (rows_++) std::fputc('\n', out_);
    for (size_t i = 0; i < values.size(); i++) {
      std::string line = Pad(columns_[i], width_, true) + " = " + DisplayText(values[i]) + "\n";
      std::fwrite(line.data(), 1, line.size(), out_);
    }
  }
  void End() override {}

 private:
  std::FILE* out_;
  std::vector<std::string> columns_;
  size_t width_ = 0;
  size_t rows_ = 0;
};

// table (ASCII) and box (Unicode line drawing).
class GridPrinter : public Printer {
 public:
  GridPrinter(const PrintOptions& o, std::FILE* out, bool box) : o_(o), out_(out), box_(box) {}
  void Begin(const std::vector<std::string>& columns) override {
    header_.clear();
    for (const auto& c : columns)
      header_.push_back(Clip(DisplayText(Value::Text(c)), o_.max_width));
    cells_.clear();
    right_.assign(columns.size(), true);
  }
  void Row(const std::vector<Value>& values) override {
    std::vector<std::string> row;
    for (size_t i = 0; i < values.size(); i++) {
      row.push_back(Clip(DisplayText(values[i]), o_.max_width));
      if (!values[i].is_number() && !values[i].is_null()) right_[i] = false;
    }
    cells_.push_back(std::move(row));
  }
  void End() override {
    if (cells_.empty()) return;
    std::vector<size_t> w(header_.size());
    for (size_t i = 0; i < w.size(); i++) w[i] = DisplayWidth(header_[i]);
    for (const auto& row : cells_) {
      for (size_t i = 0; i < row.size(); i++) w[i] = std::max(w[i], DisplayWidth(row[i]));
    }
    Rule(w, box_ ? "\u250C" : "+", box_ ? "\u252C" : "+", box_ ? "\u2510" : "+");
    Line(header_, w, false);
    Rule(w, box_ ? "\u251C" : "+", box_ ? "\u253C" : "+", box_ ? "\u2524" : "+");
    for (const auto& row : cells_) Line(row, w, true);
    Rule(w, box_ ? "\u2514" : "+", box_ ? "\u2534" : "+", box_ ? "\u2518" : "+");
    cells_.clear();
  }

 private:
  void Rule(const std::vector<size_t>& w, const char* left, const char* mid, const char* right) {
    std::string dash = box_ ? "\u2500" : "-";
    std::string line = left;
    for (size_t i = 0; i < w.size(); i++) {
      if (i) line += mid;
      for (size_t k = 0; k < w[i] + 2; k++) line += dash;
    }
    line += right;
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), out_);
  }
  void Line(const std::vector<std::string>& cells, const std::vector<size_t>& w, bool data) {
    std::string bar = box_ ? "\u2502" : "|";
    std::string line = bar;
    for (size_t i = 0; i < cells.size(); i++) {
      line += ' ' + Pad(cells[i], w[i], data && right_[i]) + ' ' + bar;
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), out_);
  }

  PrintOptions o_;
  std::FILE* out_;
  bool box_;
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> cells_;
  std::vector<bool> right_;  // right-align: every value of the column is a number
};

}  // namespace

Value Value::Null() { return Value{}; }
Value Value::Int(long long v) { return Value{kInteger, std::to_string(v)}; }
Value Value::Real(double v) { return Value{kFloat, FormatDouble(v)}; }
Value Value::Text(std::string s) { return Value{kText, std::move(s)}; }
Value Value::Blob(std::string bytes) { return Value{kBlob, std::move(bytes)}; }

std::string FormatDouble(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  // A float that happens to be integral still reads as a float: "2.0", not "2".
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::optional<Mode> ParseMode(const std::string& name) {
  if (name == "list") return Mode::kList;
  if (name == "csv") return Mode::kCsv;
  if (name == "json") return Mode::kJson;
  if (name == "line") return Mode::kLine;
  if (name == "table") return Mode::kTable;
  if (name == "box") return Mode::kBox;
  return std::nullopt;
}

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kList:
      return "list";
    case Mode::kCsv:
      return "csv";
    case Mode::kJson:
      return "json";
    case Mode::kLine:
      return "line";
    case Mode::kTable:
      return "table";
    case Mode::kBox:
      return "box";
  }
  return "list";
}

std::unique_ptr<Printer> MakePrinter(const PrintOptions& opts, std::FILE* out) {
  switch (opts.mode) {
    case Mode::kList:
      return std::make_unique<ListPrinter>(opts, out, false);
    case Mode::kCsv:
      return std::make_unique<ListPrinter>(opts, out, true);
    case Mode::kJson:
      return std::make_unique<JsonPrinter>(out);
    case Mode::kLine:
      return std::make_unique<LinePrinter>(out);
    case Mode::kTable:
      return std::make_unique<GridPrinter>(opts, out, false);
    case Mode::kBox:
      return std::make_unique<GridPrinter>(opts, out, true);
  }
  return nullptr;
}

size_t DisplayWidth(const std::string& utf8) {
  size_t n = 0;
  for (char c : utf8) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string CsvQuote(const std::string& s) {
  bool quote = s.find_first_of(",\"\r\n") != std::string::npos ||
               (!s.empty() && (s.front() == ' ' || s.back() == ' '));
  if (!quote) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string JsonString(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string HexOf(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

}  // namespace agentmem::shell

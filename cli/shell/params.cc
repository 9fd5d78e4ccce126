// cli/shell/params.cc -- .parameter: values for the parameters of SQL typed in
// the shell (":name", "@name", "$name", "?NNN"), bound to every statement
// that uses them. A statement whose parameters are not all set is refused
// rather than run with NULLs.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "shell/dot_commands.h"
#include "shell/text.h"

namespace agentmem::shell {
namespace {

// NULL, an integer, a real, or else text. (Quotes were taken off by the
// dot-command parser: '5' is the number 5; use CAST in SQL for text.)
Value ParseParamValue(const std::string& s) {
  if (s == "NULL" || s == "null") return Value::Null();
  int64_t i;
  if (ParseInt(s, &i)) return Value::Int(i);
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (!s.empty() && end && *end == '\0') return Value::Real(d);
  return Value::Text(s);
}

bool ValidName(const std::string& name) {
  if (name.size() < 2) return false;
  if (name[0] == '?') {
    int64_t n;
    return ParseInt(name.substr(1), &n) && n >= 1;
  }
  return name[0] == ':' || name[0] == '@' || name[0] == '$';
}

}  // namespace

bool CmdParameter(Shell& sh, const Args& args) {
  const char* usage =
      "usage: .parameter set NAME VALUE | unset NAME | list | clear "
      "(NAME: :name, @name, $name or ?N)";
  std::string sub = args.size() > 1 ? args[1] : "";
  if (sub == "set" && args.size() == 4 && ValidName(args[2])) {
    sh.params[args[2]] = ParseParamValue(args[3]);
  } else if (sub == "unset" && args.size() == 3) {
    if (sh.params.erase(args[2]) == 0) {
      sh.Fail("no parameter " + args[2] + " is set");
      return false;
    }
  } else if (sub == "clear" && args.size() == 2) {
    sh.params.clear();
  } else if (sub == "list" && args.size() == 2) {
    for (const auto& [name, v] : sh.params) {
      std::string shown = v.is_null() ? "NULL" : v.kind == 3 ? SqlQuote(v.text) : v.text;
      std::fprintf(sh.out, "%s = %s\n", name.c_str(), shown.c_str());
    }
  } else {
    sh.Fail(usage);
    return false;
  }
  return true;
}

bool Shell::BindParams(agentmem_stmt* stmt, const std::string& sql) {
  int count = agentmem_bind_parameter_count(stmt);
  if (count == 0) return true;
  std::vector<std::string> names = ParameterNames(sql);
  if (static_cast<int>(names.size()) != count + 1) {
    names.assign(count + 1, "");  // the scan disagrees with SQLite: bind by name only
  }
  std::vector<bool> bound(count + 1, false);
  for (const auto& [name, v] : params) {
    int idx = 0;
    int64_t n;
    if (name[0] == '?' && ParseInt(name.substr(1), &n)) {
      idx = n <= count ? static_cast<int>(n) : 0;
    } else {
      idx = agentmem_bind_parameter_index(stmt, name.c_str());
    }
    if (idx <= 0) continue;
    int rc;
    switch (v.kind) {
      case 1:
        rc = agentmem_bind_int64(stmt, idx, std::strtoll(v.text.c_str(), nullptr, 10));
        break;
      case 2:
        rc = agentmem_bind_double(stmt, idx, std::strtod(v.text.c_str(), nullptr));
        break;
      case 5:
        rc = agentmem_bind_null(stmt, idx);
        break;
      default:
        rc = agentmem_bind_text(stmt, idx, v.text.c_str(), static_cast<int>(v.text.size()));
    }
    if (rc != AGENTMEM_OK) return FailDb("binding " + name);
    bound[idx] = true;
  }
  std::string missing;
  for (int i = 1; i <= count; i++) {
    if (bound[i] || names[i].empty()) continue;  // "": no parameter has this index
    missing += (missing.empty() ? "" : ", ") + names[i];
  }
  if (!missing.empty()) {
    Fail("no value for parameter " + missing +
         " (set one with .parameter set NAME VALUE; the statement is not run)");
    return false;
  }
  return true;
}

std::vector<std::string> ParameterNames(const std::string& sql) {
  // SQLite numbers parameters thus: ?NNN has index NNN; a bare ? the largest
  // index so far plus one; a name the next index the first time it appears.
  std::vector<std::string> names(1);
  auto ident = [&](size_t i) {
    size_t j = i;
    while (j < sql.size() && (std::isalnum(static_cast<unsigned char>(sql[j])) || sql[j] == '_' ||
                              static_cast<unsigned char>(sql[j]) >= 0x80)) {
      j++;
    }
    return j;
  };
  auto set = [&](size_t idx, const std::string& name) {
    if (names.size() <= idx) names.resize(idx + 1);
    names[idx] = name;
  };
  for (size_t i = 0; i < sql.size();) {
    char c = sql[i];
    if (c == '\'' || c == '"' || c == '`' || c == '[') {
      char close = c == '[' ? ']' : c;
      size_t end = sql.find(close, i + 1);
      i = end == std::string::npos ? sql.size() : end + 1;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      size_t end = sql.find('\n', i);
      i = end == std::string::npos ? sql.size() : end + 1;
    } else if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
      size_t end = sql.find("*/", i + 2);
      i = end == std::string::npos ? sql.size() : end + 2;
    } else if (c == '?') {
      size_t j = i + 1;
      while (j < sql.size() && std::isdigit(static_cast<unsigned char>(sql[j]))) j++;
      size_t idx = j > i + 1 ? std::strtoull(sql.c_str() + i + 1, nullptr, 10) : names.size();
      if (idx > 32766) return {};  // SQLite refuses it anyway
      std::string name(1, '?');  // (not "?" + ...: GCC 12's -Wrestrict false positive)
      name += std::to_string(idx);
      set(idx, name);
      i = j;
    } else if ((c == ':' || c == '@' || c == '$') && ident(i + 1) > i + 1) {
      size_t j = ident(i + 1);
      std::string name = sql.substr(i, j - i);
      if (std::find(names.begin(), names.end(), name) == names.end()) set(names.size(), name);
      i = j;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      i = ident(i);  // a word: "a:b" is no parameter inside one
    } else {
      i++;
    }
  }
  return names;
}

}  // namespace agentmem::shell

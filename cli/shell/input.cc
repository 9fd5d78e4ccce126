// cli/shell/input.cc -- statements from scripts (see input.h).
#include "shell/input.h"

#include "shell/text.h"

namespace agentmem::shell {

Read FileLines::Next(std::string* line, bool) {
  line->clear();
  int c;
  bool any = false;
  while ((c = std::fgetc(f_)) != EOF) {
    any = true;
    if (c == '\n') break;
    line->push_back(static_cast<char>(c));
  }
  if (!line->empty() && line->back() == '\r') line->pop_back();
  return any ? Read::kLine : Read::kEnd;
}

bool RunLines(Shell& sh, LineSource& src) {
  std::string pending, line;
  bool ok = true;
  auto stop = [&](bool step_ok) {
    ok = ok && step_ok;
    return sh.quit || (!step_ok && sh.bail && !sh.interactive);
  };
  Read r;
  while ((r = src.Next(&line, !pending.empty())) != Read::kEnd) {
    if (r == Read::kCancel) {
      pending.clear();
      continue;
    }
    if (pending.empty()) {
      size_t start = line.find_first_not_of(" \t\r");
      if (start == std::string::npos) continue;
      if (line[start] == '.') {
        src.Remember(line);
        if (stop(sh.RunDot(line.substr(start)))) return ok;
        continue;
      }
    }
    pending += line;
    pending += '\n';
    if (SqlComplete(pending)) {
      std::string sql;
      sql.swap(pending);
      src.Remember(sql);
      if (stop(sh.RunSql(sql))) return ok;
    }
  }
  // Like sqlite3, a last statement without its ';' still runs.
  if (pending.find_first_not_of(" \t\r\n") != std::string::npos) {
    src.Remember(pending);
    stop(sh.RunSql(pending));
  }
  return ok;
}

}  // namespace agentmem::shell

// cli/shell/memory_commands.cc -- .context, .profile, .export-user,
// .import-user and .retention: context assembly, the profile, one user's
// export / import (docs/memory.md) and the retention policy
// (docs/lifecycle.md), through agentmem_context / profile / export / import /
// retention_set.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "shell/dot_commands.h"
#include "shell/text.h"

namespace agentmem::shell {
namespace {

bool NeedDb(Shell& sh) {
  if (sh.db()) return true;
  sh.Fail("no database is open (use .open FILE)");
  return false;
}

// Writes text to file, or to the shell's output when file is "".
bool WriteText(Shell& sh, const std::string& file, const std::string& text) {
  if (file.empty()) {
    std::fwrite(text.data(), 1, text.size(), sh.out);
    std::fflush(sh.out);
    return true;
  }
  std::FILE* f = std::fopen(file.c_str(), "wb");
  bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f && std::fclose(f) != 0) ok = false;
  if (!ok) sh.Fail("cannot write \"" + file + "\": " + std::strerror(errno));
  return ok;
}

}  // namespace

bool CmdContext(Shell& sh, const Args& args) {
  int64_t budget = 0;
  if (args.size() != 4 || !ParseInt(args[2], &budget) || budget < 0 || budget > INT32_MAX) {
    sh.Fail("usage: .context USER BUDGET QUERY (BUDGET: tokens, >= 0)");
    return false;
  }
  if (!NeedDb(sh)) return false;
  agentmem_context_item* items = nullptr;
  int n = 0;
  if (agentmem_context(sh.db(), args[1].c_str(), args[3].c_str(), static_cast<int>(budget),
                       &items, &n) != AGENTMEM_OK) {
    return sh.FailDb();
  }
  static const char* const kKinds[] = {"", "block", "fact", "episode"};
  PrintOptions po = sh.print;
  if (po.mode == Mode::kList) po.mode = Mode::kTable;
  if (po.mode == Mode::kTable || po.mode == Mode::kBox) po.max_width = 72;
  auto printer = MakePrinter(po, sh.out);
  printer->Begin({"#", "kind", "id", "tokens", "reason", "text"});
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    const agentmem_context_item& it = items[i];
    std::string text = it.kind == AGENTMEM_CONTEXT_BLOCK ? std::string(it.name) + ": " + it.text
                                                         : std::string(it.text);
    printer->Row({Value::Int(i + 1), Value::Text(kKinds[it.kind]), Value::Int(it.id),
                  Value::Int(it.tokens), Value::Text(it.reason), Value::Text(text)});
    total += it.tokens;
  }
  printer->End();
  agentmem_free(items);
  if (po.mode == Mode::kTable || po.mode == Mode::kBox) {
    std::fprintf(sh.out, "(%d items, %lld of %lld tokens)\n", n, static_cast<long long>(total),
                 static_cast<long long>(budget));
  }
  std::fflush(sh.out);
  return true;
}

bool CmdProfile(Shell& sh, const Args& args) {
  if (args.size() != 2) {
    sh.Fail("usage: .profile USER");
    return false;
  }
  if (!NeedDb(sh)) return false;
  char* json = nullptr;
  if (agentmem_profile(sh.db(), args[1].c_str(), &json) != AGENTMEM_OK) return sh.FailDb();
  std::string text = json;
  agentmem_free(json);
  auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);
  if (!parsed.is_discarded() && sh.print.mode != Mode::kJson) {
    text = parsed.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  return WriteText(sh, "", text + "\n");
}

bool CmdExportUser(Shell& sh, const Args& args) {
  if (args.size() < 2 || args.size() > 3) {
    sh.Fail("usage: .export-user USER [FILE]");
    return false;
  }
  if (!NeedDb(sh)) return false;
  char* jsonl = nullptr;
  if (agentmem_export(sh.db(), args[1].c_str(), &jsonl) != AGENTMEM_OK) return sh.FailDb();
  std::string text = jsonl;
  agentmem_free(jsonl);
  return WriteText(sh, args.size() == 3 ? args[2] : "", text);
}

bool CmdImportUser(Shell& sh, const Args& args) {
  bool new_ids = args.size() == 3 && args[2] == "--new-ids";
  if (args.size() != 2 && !new_ids) {
    sh.Fail("usage: .import-user FILE [--new-ids]");
    return false;
  }
  if (!NeedDb(sh)) return false;
  std::ifstream in(args[1], std::ios::binary);
  if (!in) {
    sh.Fail("cannot read \"" + args[1] + "\": " + std::strerror(errno));
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (!RefuseNul(sh, ".import-user", args[1], text.str())) return false;
  // A file not created yet takes the export's vector space.
  std::string space;
  if (sh.not_created()) {
    const std::string& all = text.str();
    for (size_t at = 0; at < all.size();) {
      size_t end = std::min(all.find('\n', at), all.size());
      std::string line = all.substr(at, end - at);
      at = end + 1;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      ExportHeader(line, &space);
      break;
    }
    if (!sh.CreateFile(space)) return false;
  }
  int64_t added = 0;
  int flags = new_ids ? AGENTMEM_IMPORT_NEW_IDS : 0;
  if (agentmem_import_v2(sh.db(), text.str().c_str(), flags, &added) != AGENTMEM_OK) {
    return sh.FailDb();
  }
  std::fprintf(sh.out, "added %lld records\n", static_cast<long long>(added));
  std::fflush(sh.out);
  return true;
}

bool CmdRetention(Shell& sh, const Args& args) {
  const bool keep = args.size() == 3 && args[2] == "keep-cited";
  if (args.size() > 3 || (args.size() == 3 && !keep)) {
    sh.Fail("usage: .retention [SECONDS [keep-cited]]");
    return false;
  }
  if (!NeedDb(sh)) return false;
  if (args.size() >= 2) {
    char* end = nullptr;
    errno = 0;
    long long seconds = std::strtoll(args[1].c_str(), &end, 10);
    if (args[1].empty() || *end != '\0' || errno == ERANGE) {
      sh.Fail(".retention: SECONDS must be an integer (0 keeps episodes forever), not \"" +
              args[1] + "\"");
      return false;
    }
    if (agentmem_retention_set(sh.db(), seconds, keep ? 1 : 0) != AGENTMEM_OK) {
      return sh.FailDb(".retention");
    }
  }
  int64_t max_age_s = 0;
  int keep_cited = 0;
  if (agentmem_retention_get(sh.db(), &max_age_s, &keep_cited) != AGENTMEM_OK) {
    return sh.FailDb(".retention");
  }
  if (max_age_s == 0) {
    std::fprintf(sh.out, "retention: off (episodes are kept forever)\n");
  } else {
    std::fprintf(sh.out, "retention: episodes older than %lld s are forgotten%s\n",
                 static_cast<long long>(max_age_s), keep_cited ? ", except those a fact cites" : "");
  }
  std::fflush(sh.out);
  return true;
}

}  // namespace agentmem::shell

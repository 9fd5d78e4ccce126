// cli/shell/markdown_commands.cc -- .export-markdown and .import-markdown: one
// user's memory as a Markdown file a person edits, and the edited file read
// back (docs/markdown.md), through agentmem_export_markdown / _import_markdown.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "shell/dot_commands.h"

namespace agentmem::shell {

bool CmdExportMarkdown(Shell& sh, const Args& args) {
  if (args.size() < 2 || args.size() > 3) {
    sh.Fail("usage: .export-markdown USER [FILE]");
    return false;
  }
  if (!sh.db()) {
    sh.Fail("no database is open (use .open FILE)");
    return false;
  }
  char* text = nullptr;
  if (agentmem_export_markdown(sh.db(), args[1].c_str(), &text) != AGENTMEM_OK) {
    return sh.FailDb(".export-markdown");
  }
  const std::string markdown = text;
  agentmem_free(text);
  if (args.size() == 2) {
    std::fwrite(markdown.data(), 1, markdown.size(), sh.out);
    std::fflush(sh.out);
    return true;
  }
  std::FILE* f = std::fopen(args[2].c_str(), "wb");
  bool ok = f && std::fwrite(markdown.data(), 1, markdown.size(), f) == markdown.size();
  if (f && std::fclose(f) != 0) ok = false;
  if (!ok) sh.Fail("cannot write \"" + args[2] + "\": " + std::strerror(errno));
  return ok;
}

bool CmdImportMarkdown(Shell& sh, const Args& args) {
  if (args.size() != 3) {
    sh.Fail("usage: .import-markdown USER FILE");
    return false;
  }
  if (!sh.db()) {
    sh.Fail("no database is open (use .open FILE)");
    return false;
  }
  std::ifstream in(args[2], std::ios::binary);
  if (!in) {
    sh.Fail("cannot read \"" + args[2] + "\": " + std::strerror(errno));
    return false;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  // The C API reads a NUL-terminated string: a NUL inside the file is
  // refused here, by its line, rather than cutting the text short.
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    const long line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(nul), '\n');
    sh.Fail(".import-markdown: markdown line " + std::to_string(line) + ": holds a NUL byte");
    return false;
  }
  char* report = nullptr;
  if (agentmem_import_markdown(sh.db(), args[1].c_str(), text.c_str(), &report) != AGENTMEM_OK) {
    return sh.FailDb(".import-markdown");
  }
  std::string out = report;
  agentmem_free(report);
  auto parsed = nlohmann::ordered_json::parse(out, nullptr, false);
  if (!parsed.is_discarded() && sh.print.mode != Mode::kJson) {
    out = parsed.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  std::fprintf(sh.out, "%s\n", out.c_str());
  std::fflush(sh.out);
  return true;
}

}  // namespace agentmem::shell

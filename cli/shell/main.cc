// cli/shell/main.cc -- `agentmem`, the shell (docs/shell.md): a pure client of
// include/agentmem.h that opens one database file and runs SQL and
// dot-commands from its arguments, from a script on standard input, or
// interactively.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "mcp/mcp.h"
#include "shell/args.h"
#include "shell/input.h"
#include "shell/interrupt.h"
#include "shell/shell.h"
#ifdef AGENTMEM_WITH_SYNC
#include "sync/sync.h"
#endif

using agentmem::shell::CommandLine;
using agentmem::shell::Mode;
using agentmem::shell::Shell;

namespace {

// Runs -cmd commands and the SQL arguments; false as soon as one fails
// (-cmd failures only stop with -bail, as in sqlite3).
bool RunArguments(Shell& sh, const CommandLine& cl) {
  for (const auto& cmd : cl.cmds) {
    if (!sh.Run(cmd) && sh.bail) return false;
    if (sh.quit) return true;
  }
  for (const auto& sql : cl.sql) {
    if (!sh.Run(sql)) return false;
    if (sh.quit) return true;
  }
  return true;
}

// Whether the command line names a file and runs only .check and .recover,
// which also work on a file too damaged to open.
bool SalvageOnly(const CommandLine& cl) {
  if (cl.file.empty() || cl.file == ":memory:" || cl.sql.empty()) return false;
  auto salvage = [](const std::string& c) {
    size_t at = c.find_first_not_of(" \t\r\n");
    if (at == std::string::npos) return false;
    std::string word = c.substr(at, c.find_first_of(" \t\r\n", at) - at);
    return word == ".check" || word == ".recover";
  };
  for (const auto& c : cl.cmds) {
    if (!salvage(c)) return false;
  }
  for (const auto& c : cl.sql) {
    if (!salvage(c)) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "mcp") == 0) return agentmem::mcp::RunMcp(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "sync") == 0) {
#ifdef AGENTMEM_WITH_SYNC
    return agentmem::sync::RunSync(argc - 1, argv + 1);
#else
    std::fputs("Error: this agentmem was built without libpq: no sync\n", stderr);
    return 1;
#endif
  }
  CommandLine cl;
  std::string error;
  if (!agentmem::shell::ParseCommandLine(argc, argv, &cl, &error)) {
    std::fprintf(stderr, "Error: %s\n", error.c_str());
    return 1;
  }
  if (cl.help) {
    std::fputs(agentmem::shell::Usage().c_str(), stdout);
    return 0;
  }
  if (cl.version) {
    std::printf("agentmem %s\n", agentmem_libversion());
    return 0;
  }
  Shell sh;
  sh.interactive = cl.sql.empty() && isatty(0);
  sh.print.mode = cl.mode.value_or(sh.interactive ? Mode::kTable : Mode::kList);
  sh.print.headers = cl.headers.value_or(sh.interactive);
  sh.bail = cl.bail;
  sh.open_settings.readonly = cl.readonly;
  sh.open_settings.options = cl.options;
  if (SalvageOnly(cl)) {
    // .check and .recover read a damaged file that does not open.
    if (!sh.OpenForSalvage(cl.file)) return 1;
  } else if (!sh.Open(cl.file.empty() ? ":memory:" : cl.file)) {
    return 1;
  }
  if (cl.file.empty() && sh.interactive) {
    std::printf("Connected to a private in-memory database; \".open FILE\" opens a file.\n");
  }
  bool ok = RunArguments(sh, cl);
  if (ok && !sh.quit && cl.sql.empty()) {
    if (sh.interactive) {
      agentmem::shell::InstallInterruptHandler();
      agentmem::shell::RunRepl(sh);
    } else {
      agentmem::shell::FileLines in(stdin);
      agentmem::shell::RunLines(sh, in);
    }
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "Error: writing standard output failed: %s\n", std::strerror(errno));
    return 1;
  }
  if (!sh.Close()) ok = false;
  if (sh.exit_code >= 0) return sh.exit_code;
  // An interactive session succeeds even if a typed statement failed; a
  // script or SQL arguments fail when anything failed.
  if (sh.interactive && ok) return 0;
  return sh.failures() > 0 ? 1 : 0;
}

// cli/shell/dot_commands.cc -- dispatch of dot-commands and the small ones
// that only change settings (.mode, .headers, .bail, .open, .quit, .help).
#include "shell/dot_commands.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "shell/input.h"
#include "shell/text.h"

namespace agentmem::shell {
namespace {

bool CmdHelp(Shell& sh, const Args&) {
  std::fputs(DotHelp().c_str(), sh.out);
  return true;
}

bool OnOff(Shell& sh, const Args& args, bool* flag) {
  if (args.size() != 2 || (args[1] != "on" && args[1] != "off")) {
    sh.Fail("usage: " + args[0] + " on|off");
    return false;
  }
  *flag = args[1] == "on";
  return true;
}

bool CmdHeaders(Shell& sh, const Args& args) { return OnOff(sh, args, &sh.print.headers); }
bool CmdBail(Shell& sh, const Args& args) { return OnOff(sh, args, &sh.bail); }

bool CmdMode(Shell& sh, const Args& args) {
  if (args.size() == 1) {
    std::fprintf(sh.out, "current output mode: %s\n", ModeName(sh.print.mode));
    return true;
  }
  auto mode = args.size() == 2 ? ParseMode(args[1]) : std::nullopt;
  if (!mode) {
    sh.Fail("usage: .mode list|csv|json|line|table|box");
    return false;
  }
  sh.print.mode = *mode;
  return true;
}

bool CmdOpen(Shell& sh, const Args& args) {
  Args rest;
  OpenSettings settings = sh.open_settings;
  for (size_t i = 1; i < args.size(); i++) {
    if (args[i] == "--readonly" || args[i] == "-readonly") {
      settings.readonly = true;
    } else if ((args[i] == "--options" || args[i] == "-options") && i + 1 < args.size()) {
      settings.options = args[++i];
    } else {
      rest.push_back(args[i]);
    }
  }
  if (rest.size() != 1) {
    sh.Fail("usage: .open [--readonly] [--options OPTS] FILE");
    return false;
  }
  OpenSettings saved = sh.open_settings;
  sh.open_settings = settings;
  bool ok = sh.Open(rest[0]);
  if (!ok) sh.open_settings = saved;
  return ok;
}

bool CmdQuit(Shell& sh, const Args& args) {
  int64_t code = 0;
  if (args.size() > 2 || (args.size() == 2 && !ParseInt(args[1], &code))) {
    sh.Fail("usage: " + args[0] + " [CODE]");
    return false;
  }
  sh.quit = true;
  if (args.size() == 2) sh.exit_code = static_cast<int>(code);
  return true;
}

bool CmdRead(Shell& sh, const Args& args) {
  if (args.size() != 2) {
    sh.Fail("usage: .read FILE");
    return false;
  }
  std::FILE* f = std::fopen(args[1].c_str(), "rb");
  if (!f) {
    sh.Fail(".read: cannot read \"" + args[1] + "\": " + std::strerror(errno));
    return false;
  }
  FileLines lines(f);
  bool was_interactive = sh.interactive;
  sh.interactive = false;  // -bail applies inside the script
  bool ok = RunLines(sh, lines);
  sh.interactive = was_interactive;
  std::fclose(f);
  return ok;
}

// The dot-commands that never write to the current database: on a file not
// created yet they run on the empty stand-in (Shell::Open). Every other one
// (.import, .import-user, .vacuum, ...) creates the file first.
bool ReadOnlyCommand(const std::string& name) {
  static const char* const kReaders[] = {
      ".bail", ".check", ".context", ".exit", ".explain", ".export", ".export-user",
      ".headers", ".help", ".mode", ".open", ".parameter", ".profile", ".quit",
      ".export-markdown",
      ".read", ".recall", ".schema", ".stats", ".tables"};
  for (const char* r : kReaders) {
    if (name == r) return true;
  }
  return false;
}

struct DotCommand {
  const char* name;
  bool (*fn)(Shell&, const Args&);
  const char* usage;
  const char* help;
};

const DotCommand kCommands[] = {
    {".bail", CmdBail, ".bail on|off", "stop at the first error (non-interactive input)"},
    {".check", CmdCheck, ".check", "read the whole file again and verify it (integrity check)"},
    {".context", CmdContext, ".context USER BUDGET QUERY",
     "the context for QUERY within BUDGET tokens: pinned blocks, facts, episodes"},
    {".exit", CmdQuit, ".exit [CODE]", "leave the shell (exit status CODE, default 0)"},
    {".explain", CmdExplain, ".explain USER QUERY [K] [MODE]",
     "show the recall plan as JSON (EXPLAIN RECALL)"},
    {".export", CmdExport, ".export [FILE]",
     "back up the whole file as an agentmem export (JSONL; stdout without FILE)"},
    {".export-user", CmdExportUser, ".export-user USER [FILE]",
     "write one user's whole memory as an agentmem export (stdout without FILE)"},
    {".export-markdown", CmdExportMarkdown, ".export-markdown USER [FILE]",
     "write USER's memory as Markdown a person can edit (MEMORY.md; stdout without FILE)"},
    {".headers", CmdHeaders, ".headers on|off", "column names in list and csv modes"},
    {".help", CmdHelp, ".help", "this text"},
    {".import", CmdImport, ".import FILE [options]",
     "restore an agentmem export, or load plain JSONL records (options below)"},
    {".import-markdown", CmdImportMarkdown, ".import-markdown USER FILE",
     "read an edited .export-markdown file back: changed blocks and facts become new versions"},
    {".import-user", CmdImportUser, ".import-user FILE [--new-ids]",
     "import an agentmem export (idempotent; --new-ids: this file's next ids)"},
    {".mode", CmdMode, ".mode list|csv|json|line|table|box", "how query results are printed"},
    {".open", CmdOpen, ".open [--readonly] [--options OPTS] FILE",
     "close this database and open FILE (created if missing)"},
    {".parameter", CmdParameter, ".parameter set NAME VALUE",
     "a value for :name, @name, $name or ?N in SQL (also: unset NAME, list, clear)"},
    {".profile", CmdProfile, ".profile USER",
     "a summary of USER's memory as JSON: counts, sessions, time span, top facts"},
    {".quit", CmdQuit, ".quit", "leave the shell"},
    {".read", CmdRead, ".read FILE", "run the SQL and dot-commands of FILE"},
    {".recover", CmdRecover, ".recover NEWFILE",
     "salvage what is whole of this file into NEWFILE and report what was lost"},
    {".recall", CmdRecall, ".recall USER QUERY [K] [MODE]",
     "recall with scores and both ranks (MODE: hybrid, bm25, vector)"},
    {".retention", CmdRetention, ".retention [SECONDS [keep-cited]]",
     "show or set the retention policy: forget episodes older than SECONDS (0: keep forever)"},
    {".schema", CmdSchema, ".schema [NAME]", "the columns of the tables and table functions"},
    {".stats", CmdStats, ".stats", "counts per user, file size and pages"},
    {".tables", CmdTables, ".tables", "the tables and table-valued functions"},
    {".vacuum", CmdVacuum, ".vacuum", "compact the file: rewrite live data, drop forgotten bytes"},
};

}  // namespace

std::string DotHelp() {
  std::string out;
  for (const auto& c : kCommands) {
    std::string usage = c.usage;
    usage.resize(std::max<size_t>(usage.size(), 44), ' ');
    out += usage + " " + c.help + "\n";
  }
  out +=
      "\n.import options: for an agentmem export, --new-ids (give episodes and facts\n"
      "  this file's next ids); for plain records, --user ID (user of lines without\n"
      "  one), --user-field F, --session-field F, --role-field F (take user_id /\n"
      "  session_id / role from field F), --batch N (records per transaction,\n"
      "  default 1000)\n";
  return out;
}

bool Shell::RunDot(const std::string& line) {
  Args args;
  std::string error;
  if (!SplitArgs(line, &args, &error)) {
    Fail(error);
    return false;
  }
  if (args.empty()) return true;
  for (const auto& c : kCommands) {
    if (args[0] != c.name) continue;
    // A command that may write creates a file not created yet first.
    // .import and .import-user create the file themselves: with the vector
    // space of an export.
    if (not_created() && !ReadOnlyCommand(c.name) && c.name != std::string(".import") &&
        c.name != std::string(".import-user") && !CreateFile()) {
      return false;
    }
    return c.fn(*this, args);
  }
  Fail("unknown command: " + args[0] + " (.help lists the commands)");
  return false;
}

}  // namespace agentmem::shell

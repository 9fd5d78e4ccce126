// cli/shell/args.cc -- see args.h.
#include "shell/args.h"

namespace agentmem::shell {

bool ParseCommandLine(int argc, char** argv, CommandLine* cl, std::string* error) {
  bool options_done = false;
  bool have_file = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (!options_done && a == "--") {
      options_done = true;
      continue;
    }
    if (!options_done && a.size() > 1 && a[0] == '-') {
      std::string name = a.substr(a[1] == '-' ? 2 : 1);  // -json and --json alike
      auto value = [&](std::string* out) {
        if (i + 1 >= argc) {
          *error = "option " + a + " needs a value";
          return false;
        }
        *out = argv[++i];
        return true;
      };
      if (auto mode = ParseMode(name)) {
        cl->mode = mode;
      } else if (name == "header" || name == "headers") {
        cl->headers = true;
      } else if (name == "noheader" || name == "noheaders") {
        cl->headers = false;
      } else if (name == "readonly") {
        cl->readonly = true;
      } else if (name == "bail") {
        cl->bail = true;
      } else if (name == "version") {
        cl->version = true;
      } else if (name == "help" || name == "h") {
        cl->help = true;
      } else if (name == "cmd") {
        std::string cmd;
        if (!value(&cmd)) return false;
        cl->cmds.push_back(cmd);
      } else if (name == "options") {
        if (!value(&cl->options)) return false;
      } else {
        *error = "unknown option: " + a + " (agentmem -help lists the options)";
        return false;
      }
      continue;
    }
    if (!have_file) {
      cl->file = a;
      have_file = true;
    } else {
      cl->sql.push_back(a);
    }
  }
  return true;
}

std::string Usage() {
  return "Usage: agentmem [OPTIONS] [FILE] [SQL...]\n"
         "       agentmem mcp FILE [OPTIONS]   (an MCP server over stdio: agentmem mcp --help)\n"
         "Opens the agentmem database FILE (created if missing; without FILE a private\n"
         "in-memory database) and runs SQL. Each SQL argument is a statement list or a\n"
         "dot-command. Without SQL arguments, reads from standard input when it is not a\n"
         "terminal, and otherwise starts the interactive shell. Exit status: 0 when\n"
         "everything succeeded, 1 after any error.\n"
         "\n"
         "Options (one dash or two):\n"
         "  -box            results in a box drawn with Unicode lines\n"
         "  -csv            results as CSV\n"
         "  -json           results as a JSON array of objects\n"
         "  -line           one \"column = value\" line per column\n"
         "  -list           values separated by '|' (the default for scripts)\n"
         "  -table          results in an ASCII table (the default interactively)\n"
         "  -header         print column names (list and csv modes)\n"
         "  -noheader       do not print column names\n"
         "  -readonly       open the file read-only\n"
         "  -options OPTS   open options, e.g. \"busy_timeout=0&sync=normal\"\n"
         "                  (see agentmem_open_v2 in agentmem.h)\n"
         "  -cmd COMMAND    run COMMAND (SQL or a dot-command) before the others\n"
         "  -bail           stop at the first error\n"
         "  -version        print the library version and exit\n"
         "  -help           print this text and exit\n"
         "\n"
         "Enter \".help\" in the shell for the dot-commands.\n";
}

}  // namespace agentmem::shell

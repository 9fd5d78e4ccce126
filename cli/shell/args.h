// cli/shell/args.h -- the command line: agentmem [OPTIONS] [FILE] [SQL...]
// (docs/shell.md, "Options").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "shell/output.h"

namespace agentmem::shell {

struct CommandLine {
  std::string file;               // "" when none was given (":memory:" is used)
  std::vector<std::string> sql;   // statements or dot-commands, run in order
  std::vector<std::string> cmds;  // -cmd, run first
  std::optional<Mode> mode;
  std::optional<bool> headers;
  bool readonly = false;
  bool bail = false;
  std::string options;  // -options: agentmem_open_v2 options
  bool help = false;
  bool version = false;
};

// Parses argv. Options may come before or after FILE; "--" ends them. On an
// unknown option or a missing value returns false with *error set.
bool ParseCommandLine(int argc, char** argv, CommandLine* cl, std::string* error);

// The text of -help.
std::string Usage();

}  // namespace agentmem::shell

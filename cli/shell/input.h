// cli/shell/input.h -- reading statements line by line: from a script (stdin
// that is not a terminal, or .read) and from the interactive REPL. A line
// that starts with '.' when no statement is pending is a dot-command; other
// lines gather until SqlComplete() says the statement ends (text.h).
#pragma once

#include <cstdio>
#include <string>

#include "shell/shell.h"

namespace agentmem::shell {

enum class Read { kLine, kEnd, kCancel };

class LineSource {
 public:
  virtual ~LineSource() = default;
  // The next line without its newline (kLine); kEnd at the end of input;
  // kCancel when ^C dropped the line (and the pending statement with it).
  // `continuation`: a statement is pending (the REPL shows "...>").
  virtual Read Next(std::string* line, bool continuation) = 0;
  // One complete input (statement or dot-command) was read.
  virtual void Remember(const std::string& /*input*/) {}
};

// Lines of a FILE* (not owned).
class FileLines : public LineSource {
 public:
  explicit FileLines(std::FILE* f) : f_(f) {}
  Read Next(std::string* line, bool continuation) override;

 private:
  std::FILE* f_;
};

// Runs every statement and dot-command of src. With sh.bail (and not
// interactive) stops at the first failure; always stops after .quit.
// Returns false if anything failed.
bool RunLines(Shell& sh, LineSource& src);

// The interactive loop on the terminal: libedit line editing, history in
// $AGENTMEM_HISTORY or ~/.agentmem_history, prompt "agentmem FILE> ".
void RunRepl(Shell& sh);

}  // namespace agentmem::shell

// tests/cli/shell_runner.h -- runs the real `agentmem` binary (its path is
// compiled in as AGENTMEM_SHELL_PATH) the way a person or a script does:
// arguments, standard input from a file, standard output and error captured.
#pragma once

#include <string>
#include <vector>

namespace agentmem::test {

struct ShellResult {
  int status = -1;  // exit status (-1: killed by a signal)
  std::string out;
  std::string err;
};

// Runs `agentmem args...` with `input` on standard input (a regular file,
// so not a terminal) in directory `dir`, with HOME set to dir.
ShellResult RunShell(const std::string& dir, const std::vector<std::string>& args,
                     const std::string& input = "");

// The evaluation data folder (AGENTMEM_DATA_DIR, ../shared/data or
// /work/shared/data), or "" when it is not there.
std::string DataDir();

std::vector<std::string> Lines(const std::string& text);

}  // namespace agentmem::test

// cli/shell/repl.cc -- the interactive loop: libedit's readline interface for
// line editing and history (input.h).
#include <editline/readline.h>

#include <cstdlib>
#include <string>

#include "shell/input.h"

namespace agentmem::shell {
namespace {

std::string HistoryPath() {
  if (const char* p = std::getenv("AGENTMEM_HISTORY")) return p;  // "" turns history off
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.agentmem_history" : "";
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

class ReplLines : public LineSource {
 public:
  explicit ReplLines(Shell& sh) : sh_(sh), history_(HistoryPath()) {
    using_history();
    stifle_history(2000);
    if (!history_.empty()) read_history(history_.c_str());
  }

  bool Next(std::string* line, bool continuation) override {
    std::string prompt = "agentmem " + BaseName(sh_.path()) + "> ";
    if (continuation) prompt = std::string(prompt.size() > 5 ? prompt.size() - 5 : 0, ' ') + "...> ";
    char* text = readline(prompt.c_str());
    if (!text) {
      std::fputc('\n', sh_.out);  // leave the shell on a fresh line after ^D
      return false;
    }
    line->assign(text);
    std::free(text);
    return true;
  }

  void Remember(const std::string& input) override {
    std::string entry = input;
    while (!entry.empty() && (entry.back() == '\n' || entry.back() == ' ')) entry.pop_back();
    for (char& c : entry) {
      if (c == '\n') c = ' ';
    }
    if (entry.empty()) return;
    add_history(entry.c_str());
    if (!history_.empty()) write_history(history_.c_str());
  }

 private:
  Shell& sh_;
  std::string history_;
};

}  // namespace

void RunRepl(Shell& sh) {
  std::fprintf(sh.out, "agentmem %s -- %s\nEnter \".help\" for the dot-commands; end SQL with \";\".\n",
               agentmem_libversion(), sh.path().c_str());
  std::fflush(sh.out);
  ReplLines lines(sh);
  RunLines(sh, lines);
}

}  // namespace agentmem::shell

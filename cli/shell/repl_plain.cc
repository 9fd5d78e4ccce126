// cli/shell/repl_plain.cc -- the interactive loop of a shell built without
// libedit (meson option small): the prompt, then a line read from standard
// input as the terminal's own line discipline edits it. No history, no
// completion. ^C (SIGINT, see interrupt.h) drops the line being typed.
#include <cstdio>
#include <string>

#include "shell/input.h"
#include "shell/interrupt.h"

namespace agentmem::shell {
namespace {

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

class PromptLines : public LineSource {
 public:
  explicit PromptLines(Shell& sh) : sh_(sh), in_(stdin) {}

  Read Next(std::string* line, bool continuation) override {
    std::string prompt = "agentmem " + BaseName(sh_.path()) + "> ";
    if (continuation)
      prompt = std::string(prompt.size() > 5 ? prompt.size() - 5 : 0, ' ') + "...> ";
    std::fputs(prompt.c_str(), sh_.out);
    std::fflush(sh_.out);
    ClearInterrupt();
    Read r = in_.Next(line, continuation);
    if (Interrupted()) {
      // The read returned early; what was typed is dropped.
      ClearInterrupt();
      std::clearerr(stdin);
      std::fputs("^C\n", sh_.out);
      return Read::kCancel;
    }
    if (r == Read::kEnd) std::fputc('\n', sh_.out);  // a fresh line after ^D
    return r;
  }

 private:
  Shell& sh_;
  FileLines in_;
};

}  // namespace

void RunRepl(Shell& sh) {
  std::fprintf(sh.out,
               "agentmem %s -- %s\nEnter \".help\" for the dot-commands; end SQL with \";\".\n",
               agentmem_libversion(), sh.path().c_str());
  std::fflush(sh.out);
  PromptLines lines(sh);
  RunLines(sh, lines);
}

}  // namespace agentmem::shell

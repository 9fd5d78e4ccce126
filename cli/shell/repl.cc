// cli/shell/repl.cc -- the interactive loop: libedit's readline interface for
// line editing and history (input.h). Lines are read with the callback
// interface so that ^C (SIGINT, see interrupt.h) can drop the line being
// typed and show a fresh prompt instead of ending the shell.
#include <editline/readline.h>
#include <sys/select.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <string>

#include "shell/input.h"
#include "shell/interrupt.h"

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

// The line handler's result (the callback interface has no user pointer).
struct Pending {
  bool done = false;
  bool eof = false;
  std::string line;
};
Pending g_pending;

void OnLine(char* text) {
  g_pending.done = true;
  g_pending.eof = text == nullptr;
  if (text) g_pending.line.assign(text);
  std::free(text);
  rl_callback_handler_remove();  // no prompt until the next Next()
}

class ReplLines : public LineSource {
 public:
  explicit ReplLines(Shell& sh) : sh_(sh), history_(HistoryPath()) {
    using_history();
    stifle_history(2000);
    if (!history_.empty()) read_history(history_.c_str());
  }

  Read Next(std::string* line, bool continuation) override {
    std::string prompt = "agentmem " + BaseName(sh_.path()) + "> ";
    if (continuation)
      prompt = std::string(prompt.size() > 5 ? prompt.size() - 5 : 0, ' ') + "...> ";
    std::fflush(sh_.out);
    // SIGINT stays blocked except inside pselect(), so a ^C that arrives
    // after the prompt is shown and before the wait begins is not lost: it
    // interrupts the wait, and the loop sees it.
    sigset_t sigint, before;
    sigemptyset(&sigint);
    sigaddset(&sigint, SIGINT);
    sigprocmask(SIG_BLOCK, &sigint, &before);
    sigset_t waiting = before;
    sigdelset(&waiting, SIGINT);
    g_pending = Pending();
    ClearInterrupt();
    rl_callback_handler_install(prompt.c_str(), OnLine);
    Read result = Read::kLine;
    while (!g_pending.done) {
      if (Interrupted()) {
        // ^C: drop what was typed (and the pending statement).
        ClearInterrupt();
        rl_callback_handler_remove();
        std::fputs("^C\n", sh_.out);
        std::fflush(sh_.out);
        result = Read::kCancel;
        break;
      }
      fd_set in;
      FD_ZERO(&in);
      FD_SET(0, &in);
      int n = pselect(1, &in, nullptr, nullptr, nullptr, &waiting);
      if (n > 0) rl_callback_read_char();
    }
    sigprocmask(SIG_SETMASK, &before, nullptr);
    if (result == Read::kCancel) return result;
    if (g_pending.eof) {
      std::fputc('\n', sh_.out);  // leave the shell on a fresh line after ^D
      return Read::kEnd;
    }
    *line = g_pending.line;
    return Read::kLine;
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
  std::fprintf(sh.out,
               "agentmem %s -- %s\nEnter \".help\" for the dot-commands; end SQL with \";\".\n",
               agentmem_libversion(), sh.path().c_str());
  std::fflush(sh.out);
  ReplLines lines(sh);
  RunLines(sh, lines);
}

}  // namespace agentmem::shell

// cli/mcp/stdio.cc -- the MCP stdio transport: options, the file, and the loop
// that reads newline-delimited messages from standard input and writes the
// responses to standard output, one line each. Lines longer than
// --max-message-bytes are skipped and answered with an error, never held.
// SIGTERM, SIGINT and SIGHUP are blocked except while waiting for input, so
// a signal ends the loop between messages and the file is closed normally.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

#include "mcp/mcp.h"
#include "mcp/server.h"

namespace agentmem::mcp {
namespace {

constexpr size_t kDefaultMaxMessage = 4u << 20;

struct Options {
  std::string file;
  ServerOptions server;
  std::string open_options;
  size_t max_message = kDefaultMaxMessage;
  bool help = false;
};

const char kUsage[] =
    "Usage: agentmem mcp FILE [OPTIONS]\n"
    "Serves the agentmem database FILE (created if missing) to one MCP client over\n"
    "standard input and output (JSON-RPC 2.0, one message a line). docs/mcp.md.\n"
    "\n"
    "Options:\n"
    "  --user NAME              serve only this user's memory (default: tools take an\n"
    "                           optional \"user\" argument, default the anonymous user \"\")\n"
    "  --readonly               open FILE read-only and offer only the read tools\n"
    "  --options OPTS           open options, e.g. \"busy_timeout=10000\"\n"
    "  --max-message-bytes N    longest message accepted (default 4194304)\n"
    "  --help                   print this text and exit\n";

bool ParseSize(const std::string& s, size_t* out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 12) {
    return false;
  }
  *out = std::strtoull(s.c_str(), nullptr, 10);
  return *out >= 64;
}

bool ParseOptions(int argc, char** argv, Options* o, std::string* error) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    std::string name = a.starts_with("--") ? a.substr(2) : a.starts_with("-") ? a.substr(1) : "";
    bool takes_value = name == "user" || name == "options" || name == "max-message-bytes";
    if (takes_value && i + 1 >= argc) {
      *error = "option " + a + " needs a value";
      return false;
    }
    if (name == "user") {
      o->server.user = argv[++i];
    } else if (name == "options") {
      o->open_options = argv[++i];
    } else if (name == "max-message-bytes") {
      if (!ParseSize(argv[++i], &o->max_message)) {
        *error = "--max-message-bytes takes a number of bytes, at least 64";
        return false;
      }
    } else if (name == "readonly") {
      o->server.readonly = true;
    } else if (name == "help" || name == "h") {
      o->help = true;
    } else if (!name.empty()) {
      *error = "unknown option: " + a + " (agentmem mcp --help lists the options)";
      return false;
    } else if (o->file.empty()) {
      o->file = a;
    } else {
      *error = "one FILE only: unexpected \"" + a + "\"";
      return false;
    }
  }
  if (o->file.empty() && !o->help) *error = "agentmem mcp needs a FILE";
  return !o->file.empty() || o->help;
}

// ---------------------------------------------------------------- signals

volatile std::sig_atomic_t g_stop = 0;

void OnSignal(int) { g_stop = 1; }

// Installs the handlers and blocks the signals; *waiting gets the mask to
// wait with (the signals unblocked).
void SetUpSignals(sigset_t* waiting) {
  struct sigaction sa{};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigset_t block;
  sigemptyset(&block);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    sigaction(sig, &sa, nullptr);
    sigaddset(&block, sig);
  }
  std::signal(SIGPIPE, SIG_IGN);
  sigprocmask(SIG_BLOCK, &block, waiting);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigdelset(waiting, sig);
}

// ---------------------------------------------------------------- framing

// Splits standard input into lines of at most max bytes.
class LineReader {
 public:
  struct Item {
    bool too_long = false;
    size_t bytes = 0;  // of a too-long line
    std::string line;
  };
  LineReader(int fd, size_t max, const sigset_t* waiting) : fd_(fd), max_(max), waiting_(waiting) {}

  // The next line; false at end of input or on a signal.
  bool Next(Item* item) {
    while (ready_.empty()) {
      if (!Fill()) return false;
    }
    *item = std::move(ready_.front());
    ready_.pop_front();
    return true;
  }
  // Bytes after the last line break at end of input.
  size_t unterminated() const { return discarding_ ? skipped_ : pending_.size(); }

 private:
  bool Fill() {
    pollfd p{fd_, POLLIN, 0};
    int n = ppoll(&p, 1, nullptr, waiting_);
    if (g_stop) return false;
    if (n < 0) return errno == EINTR;
    char buf[65536];
    ssize_t got = read(fd_, buf, sizeof buf);
    if (got < 0) return errno == EINTR || errno == EAGAIN;
    if (got == 0) return false;
    Split(std::string_view(buf, static_cast<size_t>(got)));
    return true;
  }

  void Split(std::string_view data) {
    while (!data.empty()) {
      size_t nl = data.find('\n');
      std::string_view part = data.substr(0, nl);
      Append(part);
      if (nl == std::string_view::npos) return;
      EndLine();
      data.remove_prefix(nl + 1);
    }
  }

  void Append(std::string_view part) {
    if (!discarding_ && pending_.size() + part.size() > max_) {
      discarding_ = true;
      skipped_ = pending_.size();
      std::string().swap(pending_);
    }
    if (discarding_) {
      skipped_ += part.size();
    } else {
      pending_ += part;
    }
  }

  void EndLine() {
    Item item;
    if (discarding_) {
      item.too_long = true;
      item.bytes = skipped_;
    } else {
      if (!pending_.empty() && pending_.back() == '\r') pending_.pop_back();
      item.line = std::move(pending_);
    }
    pending_.clear();
    discarding_ = false;
    skipped_ = 0;
    ready_.push_back(std::move(item));
  }

  int fd_;
  size_t max_;
  const sigset_t* waiting_;
  std::string pending_;
  bool discarding_ = false;
  size_t skipped_ = 0;
  std::deque<Item> ready_;
};

bool WriteLine(std::string line) {
  line += '\n';
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = write(1, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

std::string TooLongResponse(size_t bytes, size_t max) {
  return ErrorResponse("null", kInvalidRequest,
                       "message of " + std::to_string(bytes) + " bytes exceeds the limit of " +
                           std::to_string(max) + " bytes (--max-message-bytes); it was skipped");
}

// Serves messages until end of input, a signal, or a failed write.
void Serve(Server& server, LineReader& in, size_t max) {
  LineReader::Item item;
  while (in.Next(&item)) {
    std::string out;
    if (item.too_long) {
      out = TooLongResponse(item.bytes, max);
    } else if (item.line.find_first_not_of(" \t") != std::string::npos) {
      out = server.HandleLine(item.line);
    }
    if (!out.empty() && !WriteLine(std::move(out))) return;
  }
  if (!g_stop && in.unterminated() > 0) {
    std::fprintf(stderr, "agentmem mcp: ignored %zu bytes after the last line break\n",
                 in.unterminated());
  }
}

agentmem_db* OpenFile(const Options& o) {
  int flags = o.server.readonly ? AGENTMEM_OPEN_READONLY
                                : AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE;
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(o.file.c_str(), &db, flags,
                            o.open_options.empty() ? nullptr : o.open_options.c_str());
  if (rc == AGENTMEM_OK) return db;
  std::fprintf(stderr, "agentmem mcp: cannot open %s: %s\n", o.file.c_str(),
               db ? agentmem_errmsg(db) : agentmem_errstr(rc));
  agentmem_close(db);
  return nullptr;
}

}  // namespace

int RunMcp(int argc, char** argv) {
  Options o;
  std::string error;
  if (!ParseOptions(argc, argv, &o, &error)) {
    std::fprintf(stderr, "Error: %s\n%s", error.c_str(), kUsage);
    return 1;
  }
  if (o.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  sigset_t waiting;
  SetUpSignals(&waiting);
  agentmem_db* db = OpenFile(o);
  if (!db) return 1;
  {
    Server server(db, o.server);
    LineReader in(0, o.max_message, &waiting);
    Serve(server, in, o.max_message);
  }
  int rc = agentmem_close(db);
  if (rc != AGENTMEM_OK) {
    std::fprintf(stderr, "agentmem mcp: closing %s failed: %s\n", o.file.c_str(),
                 agentmem_errstr(rc));
    return 1;
  }
  return 0;
}

}  // namespace agentmem::mcp

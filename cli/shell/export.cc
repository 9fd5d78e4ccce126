// cli/shell/export.cc -- .export [FILE]: the whole file as an agentmem export
// (agentmem_export with no user; docs/export.md): a header, the file's
// settings, every episode, every version of every block and every fact, with
// ids and both time axes, so that .import of it into a new file gives the
// same records and exporting that file gives the same bytes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "shell/dot_commands.h"
#include "shell/text.h"

namespace agentmem::shell {
namespace {

bool WriteText(std::FILE* f, const std::string& text) {
  return std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
}

// Lines of the export whose record type is `type`.
int64_t CountLines(const std::string& jsonl, std::string_view type) {
  std::string prefix = "{\"type\":\"" + std::string(type) + "\"";
  int64_t n = 0;
  for (size_t at = 0; at < jsonl.size();) {
    size_t nl = jsonl.find('\n', at);
    if (nl == std::string::npos) nl = jsonl.size();
    if (std::string_view(jsonl).substr(at, nl - at).starts_with(prefix)) n++;
    at = nl + 1;
  }
  return n;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Writes the records to standard output (file ""), straight into a file
// that is not a regular file (a device, a FIFO), or else to FILE.part,
// synced and renamed over FILE (a symbolic link is followed, not replaced),
// so that a failed export never leaves a half-written FILE.
bool WriteOutput(Shell& sh, const std::string& file, const std::string& text,
                 std::string* error) {
  auto fail = [&](const std::string& what) {
    *error = Errno(what);
    return false;
  };
  if (file.empty()) return WriteText(sh.out, text) || fail("writing standard output failed");
  struct stat st;
  bool exists = stat(file.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    std::FILE* f = std::fopen(file.c_str(), "wb");
    if (!f) return fail("cannot write \"" + file + "\"");
    bool ok = WriteText(f, text) || fail("writing \"" + file + "\" failed");
    return (std::fclose(f) == 0 || fail("writing \"" + file + "\" failed")) && ok;
  }
  std::string target = file;
  if (exists) {
    char* real = realpath(file.c_str(), nullptr);
    if (real) target = real;
    std::free(real);
  }
  std::string part = target + ".part";
  std::FILE* f = std::fopen(part.c_str(), "wb");
  if (!f) return fail("cannot write \"" + part + "\"");
  bool ok = (WriteText(f, text) && fsync(fileno(f)) == 0) ||
            fail("writing \"" + part + "\" failed");
  ok = (std::fclose(f) == 0 || fail("writing \"" + part + "\" failed")) && ok;
  ok = ok && (std::rename(part.c_str(), target.c_str()) == 0 ||
              fail("renaming \"" + part + "\" to \"" + target + "\" failed"));
  if (!ok) {
    std::remove(part.c_str());
    return false;
  }
  // The rename is durable once the folder is synced.
  size_t slash = target.find_last_of('/');
  std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash);
  int fd = open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
  return true;
}

}  // namespace

bool CmdExport(Shell& sh, const Args& args) {
  std::string file;
  for (size_t i = 1; i < args.size(); i++) {
    if (args[i] == "--vectors") {
      // Accepted as before: a vector is always written when the importing
      // file could not compute it again from the text.
    } else if (file.empty() && args[i].rfind("--", 0) != 0) {
      file = args[i];
    } else {
      sh.Fail("usage: .export [FILE]");
      return false;
    }
  }
  if (!sh.db()) {
    sh.Fail("no database is open (use .open FILE)");
    return false;
  }
  char* jsonl = nullptr;
  if (agentmem_export(sh.db(), nullptr, &jsonl) != AGENTMEM_OK) return sh.FailDb(".export");
  std::string text = jsonl;
  agentmem_free(jsonl);
  std::string error;
  if (!WriteOutput(sh, file, text, &error)) {
    sh.Fail(".export: " + error);
    return false;
  }
  if (!file.empty()) {
    std::fprintf(sh.out, "exported %s episodes, %s block versions, %s facts to %s\n",
                 Thousands(CountLines(text, "episode")).c_str(),
                 Thousands(CountLines(text, "block")).c_str(),
                 Thousands(CountLines(text, "fact")).c_str(), file.c_str());
  }
  return true;
}

}  // namespace agentmem::shell

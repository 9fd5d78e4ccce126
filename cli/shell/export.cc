// cli/shell/export.cc -- .export [FILE] [--vectors]: every episode, every
// version of every block and every fact as JSONL (jsonl.h), in the order they
// were written (episodes by id, block versions by version, facts by id), so
// that .import of the output into a new file gives the same records and, when
// the source's ids have no gaps, the same ids (docs/shell.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "shell/dot_commands.h"
#include "shell/jsonl.h"
#include "shell/text.h"

namespace agentmem::shell {
namespace {

using Keyed = std::vector<std::pair<int64_t, std::string>>;  // (order key, JSON line)

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

int64_t IntOr(const Value& v, int64_t dflt) {
  int64_t x;
  return !v.is_null() && ParseInt(v.text, &x) ? x : dflt;
}

// Every user with an episode, a block or a fact.
bool ListUsers(Shell& sh, std::vector<std::string>* users) {
  std::vector<std::string> cols;
  return sh.Query("SELECT user_id FROM user_stats() ORDER BY user_id", &cols,
                  [&](const std::vector<Value>& row) { users->push_back(row[0].text); });
}

bool ExportEpisodes(Shell& sh, const std::string& user, bool vectors, Keyed* out) {
  agentmem_cursor* cur = nullptr;
  if (agentmem_episodes(sh.db(), user.c_str(), nullptr, &cur) != AGENTMEM_OK) {
    return sh.FailDb(".export: episodes of \"" + user + "\"");
  }
  int rc;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    const agentmem_episode* e = agentmem_cursor_episode(cur);
    Json j;
    j["kind"] = "episode";
    j["id"] = e->id;
    j["user_id"] = e->user_id;
    j["session_id"] = e->session_id;
    j["role"] = e->role;
    j["text"] = e->text;
    j["ts"] = e->ts;
    if (e->metadata && *e->metadata) {
      Json meta = Json::parse(e->metadata, nullptr, false);
      j["metadata"] = meta.is_discarded() ? Json(e->metadata) : meta;
    }
    if (vectors && e->vector) j["vector"] = std::vector<float>(e->vector, e->vector + e->dim);
    out->emplace_back(e->id, Dump(j));
  }
  agentmem_cursor_close(cur);
  if (rc != AGENTMEM_DONE) return sh.FailDb(".export: episodes of \"" + user + "\"");
  return true;
}

// Every version of each of the user's blocks (block_history()), keyed by version.
bool ExportBlocks(Shell& sh, const std::string& user, Keyed* out) {
  agentmem_cursor* cur = nullptr;
  if (agentmem_blocks(sh.db(), user.c_str(), &cur) != AGENTMEM_OK) {
    return sh.FailDb(".export: blocks of \"" + user + "\"");
  }
  std::vector<std::string> names;
  int rc;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    names.push_back(agentmem_cursor_block(cur)->name);
  }
  agentmem_cursor_close(cur);
  if (rc != AGENTMEM_DONE) return sh.FailDb(".export: blocks of \"" + user + "\"");
  for (const std::string& name : names) {
    std::string sql = "SELECT version, value, char_limit, pinned_order FROM block_history(" +
                      SqlQuote(user) + ", " + SqlQuote(name) + ") ORDER BY version";
    std::vector<std::string> cols;
    bool ok = sh.Query(sql, &cols, [&](const std::vector<Value>& row) {
      Json j;
      j["kind"] = "block";
      j["user_id"] = user;
      j["name"] = name;
      j["value"] = row[1].text;
      j["limit"] = IntOr(row[2], 0);
      j["pinned_order"] = IntOr(row[3], -1);  // SQL shows "not pinned" as NULL
      out->emplace_back(IntOr(row[0], 0), Dump(j));
    });
    if (!ok) return false;
  }
  return true;
}

bool ExportFacts(Shell& sh, const std::string& user, Keyed* out) {
  agentmem_cursor* cur = nullptr;
  if (agentmem_facts(sh.db(), user.c_str(), nullptr, nullptr, &cur) != AGENTMEM_OK) {
    return sh.FailDb(".export: facts of \"" + user + "\"");
  }
  int rc;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    const agentmem_fact* f = agentmem_cursor_fact(cur);
    Json j;
    j["kind"] = "fact";
    j["id"] = f->id;
    j["user_id"] = f->user_id;
    j["subject"] = f->subject;
    j["predicate"] = f->predicate;
    j["object"] = f->object;
    j["confidence"] = f->confidence;
    j["source_episode_ids"] =
        std::vector<int64_t>(f->source_episode_ids, f->source_episode_ids + f->n_sources);
    j["valid_from"] = f->valid_from;
    j["valid_to"] = f->valid_to == INT64_MAX ? Json(nullptr) : Json(f->valid_to);
    out->emplace_back(f->id, Dump(j));
  }
  agentmem_cursor_close(cur);
  if (rc != AGENTMEM_DONE) return sh.FailDb(".export: facts of \"" + user + "\"");
  return true;
}

bool WriteAll(std::FILE* f, Keyed& lines) {
  std::stable_sort(lines.begin(), lines.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [key, line] : lines) {
    if (std::fwrite(line.data(), 1, line.size(), f) != line.size() || std::fputc('\n', f) == EOF) {
      return false;
    }
  }
  return true;
}

bool WriteLists(std::FILE* f, const std::vector<Keyed*>& lists) {
  for (Keyed* k : lists) {
    if (!WriteAll(f, *k)) return false;
  }
  return std::fflush(f) == 0;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Writes the records to standard output (file ""), straight into a file
// that is not a regular file (a device, a FIFO), or else to FILE.part,
// synced and renamed over FILE (a symbolic link is followed, not replaced),
// so that a failed export never leaves a half-written FILE.
bool WriteOutput(Shell& sh, const std::string& file, const std::vector<Keyed*>& lists,
                 std::string* error) {
  auto fail = [&](const std::string& what) {
    *error = Errno(what);
    return false;
  };
  if (file.empty()) return WriteLists(sh.out, lists) || fail("writing standard output failed");
  struct stat st;
  bool exists = stat(file.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    std::FILE* f = std::fopen(file.c_str(), "wb");
    if (!f) return fail("cannot write \"" + file + "\"");
    bool ok = WriteLists(f, lists) || fail("writing \"" + file + "\" failed");
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
  bool ok = (WriteLists(f, lists) && fsync(fileno(f)) == 0) ||
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
  bool vectors = false;
  for (size_t i = 1; i < args.size(); i++) {
    if (args[i] == "--vectors") {
      vectors = true;
    } else if (file.empty() && args[i].rfind("--", 0) != 0) {
      file = args[i];
    } else {
      sh.Fail("usage: .export [FILE] [--vectors]");
      return false;
    }
  }
  if (!sh.db()) {
    sh.Fail("no database is open (use .open FILE)");
    return false;
  }
  // One snapshot for the whole export: the reads run in a transaction.
  bool own_txn = agentmem_begin(sh.db()) == AGENTMEM_OK;
  std::vector<std::string> users;
  Keyed episodes, blocks, facts;
  bool ok = ListUsers(sh, &users);
  for (size_t i = 0; ok && i < users.size(); i++) {
    ok = ExportEpisodes(sh, users[i], vectors, &episodes) && ExportBlocks(sh, users[i], &blocks) &&
         ExportFacts(sh, users[i], &facts);
  }
  if (own_txn) agentmem_rollback(sh.db());
  if (!ok) return false;

  std::string error;
  if (!WriteOutput(sh, file, {&episodes, &blocks, &facts}, &error)) {
    sh.Fail(".export: " + error);
    return false;
  }
  if (!file.empty()) {
    std::fprintf(sh.out, "exported %s episodes, %s block versions, %s facts to %s\n",
                 Thousands(static_cast<int64_t>(episodes.size())).c_str(),
                 Thousands(static_cast<int64_t>(blocks.size())).c_str(),
                 Thousands(static_cast<int64_t>(facts.size())).c_str(), file.c_str());
  }
  return true;
}

}  // namespace agentmem::shell

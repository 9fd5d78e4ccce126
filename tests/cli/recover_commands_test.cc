// tests/cli/recover_commands_test.cc -- .recover and .check on a damaged
// file (cli/shell/recover_commands.cc), run as a person runs the shell.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "format/coding.h"
#include "tests/cli/shell_runner.h"
#include "tests/util/temp_dir.h"

namespace agentmem::test {
namespace {

// Five transactions of two episodes each (ids 1-10); returns the offsets of
// the episodes pages, one per transaction.
std::vector<uint64_t> MakeFile(const TempDir& dir) {
  for (int t = 1; t <= 5; t++) {
    std::string sql = "BEGIN;";
    for (const char* s : {"a", "b"}) {
      sql += " INSERT INTO episodes(user_id, text) VALUES('alice', 'turn " + std::to_string(t) +
             s + "');";
    }
    sql += " COMMIT;";
    ShellResult r = RunShell(dir.path(), {"-options", "page_size=16384", "t.agentmem", sql});
    REQUIRE_MESSAGE(r.status == 0, r.err);
  }
  const std::string bytes = ReadFileBytes(dir.File("t.agentmem"));
  std::vector<uint64_t> pages;
  for (uint64_t pos = 4096; pos + 32 <= bytes.size();) {
    if (bytes[pos + 4] == 1) pages.push_back(pos);  // an episodes page
    pos += (32 + format::DecodeFixed32(bytes.data() + pos + 12) + 15) & ~uint64_t{15};
  }
  REQUIRE(pages.size() == 5);
  return pages;
}

void Damage(const TempDir& dir, uint64_t offset) {
  std::string bytes = ReadFileBytes(dir.File("t.agentmem"));
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x5a);
  WriteFileBytes(dir.File("t.agentmem"), bytes);
}

TEST_CASE(".check on a damaged file lists the damage and what it costs, and fails") {
  TempDir dir;
  const std::vector<uint64_t> pages = MakeFile(dir);
  Damage(dir, pages[2] + 40);
  const std::string page = std::to_string(pages[2] / 16);
  ShellResult r = RunShell(dir.path(), {"t.agentmem", "SELECT count(*) FROM episodes"});
  CHECK(r.status == 1);  // an ordinary open still refuses it
  CHECK(r.err.find("page " + page) != std::string::npos);
  r = RunShell(dir.path(), {"t.agentmem", ".check"});
  CHECK(r.status == 1);
  CHECK(r.out.find("page " + page + ": ") == 0);
  CHECK(r.out.find("checksum mismatch") != std::string::npos);
  CHECK(r.out.find("transaction 4 (from page " + page + ") is dropped") != std::string::npos);
  CHECK(r.out.find("episodes lost: 2 (5-6)\n") != std::string::npos);
  // No checkpoint says what transaction 4 forgot: a forget on its damaged page is unknown.
  CHECK(r.out.find("transaction 4 may have forgotten records that are kept (its damaged pages "
                   "may have held forgets): episodes below id 5, facts below id 1, block "
                   "versions below 1\n") != std::string::npos);
  CHECK(r.err.find("the file is damaged: 1 damaged run") != std::string::npos);
}

TEST_CASE(".recover keeps every episode not on the damaged page and names the lost ones") {
  TempDir dir;
  const std::vector<uint64_t> pages = MakeFile(dir);
  Damage(dir, pages[2] + 40);
  REQUIRE(::chmod(dir.File("t.agentmem").c_str(), 0600) == 0);
  const std::string before = ReadFileBytes(dir.File("t.agentmem"));
  ShellResult r = RunShell(dir.path(), {"t.agentmem", ".recover new.agentmem"});
  CHECK_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find("transaction 4 (from page " + std::to_string(pages[2] / 16) +
                   ") is dropped") != std::string::npos);
  CHECK(r.out.find("episodes lost: 2 (5-6)\n") != std::string::npos);
  CHECK(r.out.find("recovered t.agentmem into new.agentmem: 5 transactions, 8 episodes") !=
        std::string::npos);
  CHECK(ReadFileBytes(dir.File("t.agentmem")) == before);
  struct stat st;
  REQUIRE(::stat(dir.File("new.agentmem").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  r = RunShell(dir.path(), {"new.agentmem", "SELECT group_concat(id) FROM episodes", ".check"});
  CHECK(r.status == 0);
  CHECK(r.out == "1,2,3,4,7,8,9,10\nok\n");
  // A second .recover never overwrites what the first wrote.
  r = RunShell(dir.path(), {"t.agentmem", ".recover new.agentmem"});
  CHECK(r.status == 1);
  CHECK(r.err.find("new.agentmem exists") != std::string::npos);
}

TEST_CASE(".check lists all damage of a file that opens through a checkpoint after it") {
  TempDir dir;
  std::vector<uint64_t> pages;
  for (int t = 1; t <= 5; t++) {
    // checkpoint_bytes=1: the close of the third write folds the log.
    const char* opts = t == 3 ? "page_size=16384&checkpoint_bytes=1" : "page_size=16384&checkpoint_bytes=0";
    ShellResult r = RunShell(dir.path(), {"-options", opts, "t.agentmem",
                                          "INSERT INTO episodes(user_id, text) VALUES('alice', 'turn " +
                                              std::to_string(t) + "')"});
    REQUIRE_MESSAGE(r.status == 0, r.err);
  }
  const std::string bytes = ReadFileBytes(dir.File("t.agentmem"));
  for (uint64_t pos = 4096; pos + 32 <= bytes.size();) {
    if (bytes[pos + 4] == 1) pages.push_back(pos);
    pos += (32 + format::DecodeFixed32(bytes.data() + pos + 12) + 15) & ~uint64_t{15};
  }
  REQUIRE(pages.size() == 5);
  Damage(dir, pages[0] + 40);  // before the checkpoint: the file still opens
  Damage(dir, pages[1] + 40);
  ShellResult r = RunShell(dir.path(), {"t.agentmem", "SELECT count(*) FROM episodes"});
  CHECK(r.status == 0);
  r = RunShell(dir.path(), {"t.agentmem", ".check"});
  CHECK(r.status == 1);
  CHECK(r.out.find("page " + std::to_string(pages[0] / 16) + ": ") != std::string::npos);
  CHECK(r.out.find("page " + std::to_string(pages[1] / 16) + ": ") != std::string::npos);
}

TEST_CASE(".recover of a sound file copies it and says nothing was lost") {
  TempDir dir;
  MakeFile(dir);
  ShellResult r = RunShell(dir.path(), {"t.agentmem", ".recover copy.agentmem"});
  CHECK_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find("10 episodes, 0 block versions, 0 facts; nothing was lost\n") != std::string::npos);
  r = RunShell(dir.path(), {"t.agentmem", ".check"});
  CHECK(r.status == 0);
  CHECK(r.out == "ok\n");
  r = RunShell(dir.path(), {"missing.agentmem", ".check"});
  CHECK(r.status == 1);
  CHECK(r.err.find("cannot open \"missing.agentmem\"") != std::string::npos);
  CHECK(::access(dir.File("missing.agentmem").c_str(), F_OK) != 0);  // not created
}

}  // namespace
}  // namespace agentmem::test

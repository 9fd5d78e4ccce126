// tests/cli/memory_commands_test.cc -- the shell's .context, .profile,
// .export-user and .import-user (docs/shell.md), run as a program.
#include <doctest/doctest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/shell_runner.h"
#include "tests/util/temp_dir.h"

using agentmem::test::RunShell;
using agentmem::test::TempDir;

namespace {

const char* kSeed =
    "INSERT INTO episodes(user_id, session_id, role, text) VALUES\n"
    "  ('alice', 's1', 'user', 'I adopted a cat named Miso'),\n"
    "  ('alice', 's2', 'user', 'Rainy week in Lisbon');\n"
    "INSERT INTO blocks(user_id, name, value, pinned_order) VALUES ('alice', 'persona', "
    "'Friendly', 0);\n";

}  // namespace

TEST_CASE("the shell shows a context within its budget and a profile as JSON") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"a.agentmem"},
                    std::string(kSeed) + ".mode csv\n.context alice 9 'the cat'\n"
                                         ".mode json\n.profile alice\n");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find("1,block,1,2,pinned block persona,persona: Friendly\n") !=
        std::string::npos);
  CHECK(r.out.find("2,episode,1,7,\"recall rank 1: bm25 #1, vector #1\"") != std::string::npos);
  std::string profile = r.out.substr(r.out.find("{\"user_id\""));
  nlohmann::json p = nlohmann::json::parse(profile);
  CHECK(p["episodes"] == 2);
  CHECK(p["sessions"] == 2);
  auto bad = RunShell(dir.path(), {"a.agentmem"}, ".context alice lots cat\n");
  CHECK(bad.status == 1);
  CHECK(bad.err.find("usage: .context USER BUDGET QUERY") != std::string::npos);
}

TEST_CASE("the shell exports a user to a file and imports it into another file, twice adding nothing") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"a.agentmem"},
                    std::string(kSeed) + ".export-user alice alice.jsonl\n.export-user alice\n");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  std::string exported = r.out;
  CHECK(exported.rfind("{\"type\":\"agentmem-export\"", 0) == 0);
  auto b = RunShell(dir.path(), {"b.agentmem"},
                    ".import-user alice.jsonl\n.import-user alice.jsonl\n.export-user alice\n");
  REQUIRE_MESSAGE(b.status == 0, b.err);
  CHECK(b.out == "added 3 records\nadded 0 records\n" + exported);
  auto merged = RunShell(dir.path(), {"c.agentmem"},
                        "INSERT INTO episodes(user_id, text) VALUES ('bob', 'first');\n"
                        ".import-user alice.jsonl --new-ids\n"
                        ".import-user alice.jsonl --new-ids\n");
  REQUIRE_MESSAGE(merged.status == 0, merged.err);
  CHECK(merged.out == "added 3 records\nadded 0 records\n");
  auto missing = RunShell(dir.path(), {"b.agentmem"}, ".import-user nowhere.jsonl\n");
  CHECK(missing.status == 1);
  CHECK(missing.err.find("cannot read \"nowhere.jsonl\"") != std::string::npos);
}

TEST_CASE("the shell shows and sets the retention policy, which a commit applies") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"a.agentmem"},
                    ".retention\n"
                    "INSERT INTO episodes(user_id, text, ts) VALUES ('u', 'long ago', 1000000);\n"
                    ".retention 3600 keep-cited\n"
                    "SELECT count(*) FROM episodes;\n"
                    ".retention 0\n");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out ==
        "retention: off (episodes are kept forever)\n"
        "retention: episodes older than 3600 s are forgotten, except those a fact cites\n"
        "0\n"
        "retention: off (episodes are kept forever)\n");
  auto bad = RunShell(dir.path(), {"a.agentmem"}, ".retention a-week\n");
  CHECK(bad.status == 1);
  CHECK(bad.err.find("SECONDS must be an integer") != std::string::npos);
}

TEST_CASE("the shell's .import-user refuses a NUL byte in a text instead of cutting it") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"a.agentmem"},
                    "INSERT INTO episodes(user_id, text) VALUES ('alice', 'beforeXafter');\n"
                    ".export-user alice\n");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  std::string jsonl = r.out;
  const size_t at = jsonl.find("beforeXafter");
  REQUIRE(at != std::string::npos);
  jsonl.replace(at, 12, "before\\u0000after");
  {
    std::FILE* f = std::fopen((dir.path() + "/nul.jsonl").c_str(), "wb");
    REQUIRE(f);
    std::fwrite(jsonl.data(), 1, jsonl.size(), f);
    std::fclose(f);
  }
  auto imp = RunShell(dir.path(), {"b.agentmem"},
                      "INSERT INTO blocks(user_id, name, value) VALUES ('bob', 'n', 'v');\n"
                      ".import-user nul.jsonl\n"
                      "SELECT count(*) FROM episodes WHERE user_id = 'alice';\n");
  CHECK(imp.err.find("NUL byte") != std::string::npos);
  CHECK(imp.out.find("0\n") != std::string::npos);
}

TEST_CASE("the shell's .import-user names the line of a NUL byte, raw or escaped, and imports nothing") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"a.agentmem"},
                    "INSERT INTO episodes(user_id, text) VALUES ('alice', 'first');\n"
                    "INSERT INTO episodes(user_id, text) VALUES ('alice', 'beforeXafter');\n"
                    ".export-user alice\n");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const size_t at = r.out.find("beforeXafter");
  REQUIRE(at != std::string::npos);
  // The second episode is on line 3, after the header and the first.
  std::string escaped = r.out, raw = r.out, raw_at_start = r.out;
  escaped.replace(at, 12, "before\\u0000after");
  raw.replace(at, 12, std::string("before\0after", 12));
  // A NUL where line 3 starts would end the C string there: lines 1-2 alone import.
  raw_at_start.insert(raw_at_start.rfind("{\"type\":\"episode\""), 1, '\0');
  agentmem::test::WriteFileBytes(dir.File("escaped.jsonl"), escaped);
  agentmem::test::WriteFileBytes(dir.File("raw.jsonl"), raw);
  agentmem::test::WriteFileBytes(dir.File("start.jsonl"), raw_at_start);
  for (const char* file : {"escaped.jsonl", "raw.jsonl", "start.jsonl"}) {
    CAPTURE(file);
    auto imp = RunShell(dir.path(), {"b.agentmem"},
                        std::string(".import-user ") + file + "\n"
                        "SELECT count(*) FROM episodes;\n");
    CHECK(imp.err.find(std::string(file) == "escaped.jsonl" ? "import line 3: " : ".jsonl:3: ") !=
          std::string::npos);
    CHECK(imp.err.find("NUL") != std::string::npos);
    CHECK(imp.out == "0\n");
  }
}

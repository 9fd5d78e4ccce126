// tests/cli/markdown_commands_test.cc -- the shell's .export-markdown and
// .import-markdown (docs/shell.md, docs/markdown.md), run as a program: an
// edited file comes back as new versions with the old ones kept, an
// unchanged file writes nothing, a bad line or a NUL byte is refused by line.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/shell_runner.h"
#include "tests/util/temp_dir.h"

using agentmem::test::RunShell;
using agentmem::test::TempDir;

namespace {

const char* kSeed =
    "INSERT INTO episodes(user_id, session_id, role, text) VALUES\n"
    "  ('alice', 's1', 'user', 'I moved to Tokyo'),\n"
    "  ('alice', 's2', 'user', 'Rainy week');\n"
    "INSERT INTO blocks(user_id, name, value, pinned_order) VALUES ('alice', 'persona', "
    "'Warm and brief.', 0);\n"
    "INSERT INTO facts(user_id, subject, predicate, object, confidence, valid_from) VALUES "
    "('alice', 'alice', 'lives_in', 'Tokyo', 0.9, 1672531200000000);\n";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  return text.replace(at, from.size(), to);
}

std::string Exported(const std::string& dir) {
  return agentmem::test::ReadFileBytes(dir + "/memory.md");
}

}  // namespace

TEST_CASE("the shell exports a memory file, reads an edited one back, and keeps both versions") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"a.agentmem"},
                    std::string(kSeed) + ".export-markdown alice memory.md\n");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  std::string text = Exported(dir.path());
  CHECK(text.find("| alice | lives_in | Tokyo | 2023-01-01 |  | 0.9 | 1 |") != std::string::npos);
  CHECK(text.find("### Session s2") < text.find("### Session s1"));  // newest session first
  std::string edited =
      Replace(Replace(text, "Warm and brief.", "Warm, brief, exact."), "| Tokyo |", "| Osaka |");
  agentmem::test::WriteFileBytes(dir.File("edited.md"), edited);
  auto imp = RunShell(dir.path(), {"a.agentmem"},
                      ".mode json\n.import-markdown alice edited.md\n.mode list\n"
                      "SELECT value FROM block_history('alice', 'persona');\n"
                      "SELECT object, expired_at IS NULL FROM facts WHERE user_id = 'alice';\n");
  REQUIRE_MESSAGE(imp.status == 0, imp.err);
  nlohmann::json report = nlohmann::json::parse(imp.out.substr(0, imp.out.find('\n')));
  CHECK(report["block_versions"] == 1);
  CHECK(report["facts_asserted"] == 1);
  CHECK(report["facts_superseded"] == 1);
  CHECK(imp.out.substr(imp.out.find('\n') + 1) ==
        "Warm and brief.\nWarm, brief, exact.\nTokyo|0\nOsaka|1\n");
}

TEST_CASE("the shell reads an unchanged export back without writing and refuses a bad line") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"a.agentmem"},
                    std::string(kSeed) +
                        ".export-markdown alice memory.md\n"
                        ".import-markdown alice memory.md\n"
                        "SELECT block_versions, facts FROM stats();\n");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find("\"changes\": []") != std::string::npos);
  CHECK(r.out.find("\"block_versions\": 0") != std::string::npos);
  CHECK(r.out.substr(r.out.rfind('}') + 2) == "1|1\n");
  std::string text = Exported(dir.path());
  std::string bad =
      Replace(Replace(text, "Warm and brief.", "Changed."), "| 2023-01-01 |", "| 2023-02-30 |");
  agentmem::test::WriteFileBytes(dir.File("bad.md"), bad);
  const long line = 1 + std::count(bad.begin(), bad.begin() + bad.find("| alice |"), '\n');
  auto refused = RunShell(dir.path(), {"a.agentmem"}, ".import-markdown alice bad.md\n");
  CHECK(refused.status == 1);
  CHECK(refused.err.find("markdown line " + std::to_string(line) + ": valid from \"2023-02-30\"") !=
        std::string::npos);
  std::string nul = text;
  nul.insert(nul.find("Warm and brief."), 1, '\0');
  agentmem::test::WriteFileBytes(dir.File("nul.md"), nul);
  const long nul_line = 1 + std::count(nul.begin(), nul.begin() + nul.find('\0'), '\n');
  auto with_nul = RunShell(dir.path(), {"a.agentmem"}, ".import-markdown alice nul.md\n");
  CHECK(with_nul.status == 1);
  CHECK(with_nul.err.find("markdown line " + std::to_string(nul_line) + ": holds a NUL byte") !=
        std::string::npos);
  auto after = RunShell(dir.path(), {"a.agentmem"}, ".export-markdown alice\n");
  CHECK(after.out == text);  // neither wrote anything
}

TEST_CASE("the shell exports the headings alone for a user with no memory, and names its usage") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"new.agentmem"}, ".export-markdown nobody\n");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find("# Memory of nobody\n") != std::string::npos);
  CHECK(r.out.find("## Facts\n") != std::string::npos);
  auto usage = RunShell(dir.path(), {"new.agentmem"}, ".import-markdown nobody\n");
  CHECK(usage.status == 1);
  CHECK(usage.err.find("usage: .import-markdown USER FILE") != std::string::npos);
  auto missing = RunShell(dir.path(), {"new.agentmem"}, ".import-markdown nobody none.md\n");
  CHECK(missing.status == 1);
  CHECK(missing.err.find("cannot read \"none.md\"") != std::string::npos);
}

// tests/engine/markdown_test.cc -- the Markdown memory file (docs/markdown.md)
// through the C ABI (agentmem_export_markdown / agentmem_import_markdown): an
// edited block and fact come back as new versions with the old ones kept, an
// unchanged round trip writes nothing, malformed lines are refused with their
// line number and nothing written; and the layout's escapes and times
// (engine/memory/markdown_text.h) read back what they write.
#include "engine/memory/markdown.h"

#include <agentmem.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/memory/markdown_text.h"
#include "tests/util/temp_dir.h"

using agentmem::test::TempDir;
namespace md = agentmem::engine::markdown;

namespace {

constexpr int64_t kSecond = 1000000;
constexpr int64_t k2023 = 1672531200LL * kSecond;  // 2023-01-01T00:00:00Z

agentmem_db* Open(const std::string& path) {
  agentmem_db* db = nullptr;
  int rc =
      agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE, nullptr);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, agentmem_errmsg(db));
  return db;
}

void Ok(agentmem_db* db, int rc) {
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, std::string(agentmem_errmsg(db)));
}

int64_t Fact(agentmem_db* db, const char* user, const char* s, const char* p, const char* o,
             double confidence = 1.0, int64_t valid_from = 0, int64_t valid_to = 0) {
  int64_t id = 0;
  Ok(db,
     agentmem_fact_assert(db, user, s, p, o, confidence, valid_from, valid_to, nullptr, 0, &id));
  return id;
}

std::string ExportMd(agentmem_db* db, const char* user) {
  char* out = nullptr;
  Ok(db, agentmem_export_markdown(db, user, &out));
  std::string s = out;
  agentmem_free(out);
  return s;
}

nlohmann::json ImportMd(agentmem_db* db, const char* user, const std::string& text) {
  char* report = nullptr;
  Ok(db, agentmem_import_markdown(db, user, text.c_str(), &report));
  nlohmann::json j = nlohmann::json::parse(report);
  agentmem_free(report);
  return j;
}

// The import's result code and message, for a text it must refuse.
std::pair<int, std::string> Refused(agentmem_db* db, const char* user, const std::string& text) {
  char* report = reinterpret_cast<char*>(1);
  int rc = agentmem_import_markdown(db, user, text.c_str(), &report);
  CHECK(report == nullptr);
  return {rc, agentmem_errmsg(db)};
}

agentmem_stats Stats(agentmem_db* db) {
  agentmem_stats st{};
  Ok(db, agentmem_stats_get(db, &st));
  return st;
}

// Replaces the one occurrence of `from` in `text`.
std::string Edit(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  REQUIRE_MESSAGE(text.find(from, at + 1) == std::string::npos, from);
  return text.replace(at, from.size(), to);
}

struct FactRow {
  int64_t id;
  std::string object;
  int64_t recorded_at, expired_at;
};

std::vector<FactRow> Facts(agentmem_db* db, const char* user, const char* predicate,
                           int64_t known_at, int flags = 0) {
  agentmem_cursor* cur = nullptr;
  Ok(db, agentmem_facts_v2(db, user, nullptr, predicate, nullptr, 0, known_at, flags, &cur));
  std::vector<FactRow> out;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
    const agentmem_fact* f = agentmem_cursor_fact(cur);
    out.push_back({f->id, f->object, f->recorded_at, f->expired_at});
  }
  agentmem_cursor_close(cur);
  return out;
}

std::vector<std::string> SqlColumn(agentmem_db* db, const std::string& sql) {
  std::vector<std::string> out;
  char* err = nullptr;
  int rc = agentmem_exec(
      db, sql.c_str(),
      [](void* p, int, char** values, char**) {
        static_cast<std::vector<std::string>*>(p)->push_back(values[0] ? values[0] : "NULL");
        return 0;
      },
      &out, &err);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, (err ? err : ""));
  return out;
}

// A memory with what the layout must carry: pinned and unpinned blocks with
// multi-line values, backquotes, a carriage return, names that need escapes;
// facts with closed and open valid times and awkward characters; sessions
// whose texts look like the layout's own headings and fences.
void Populate(agentmem_db* db, const char* user) {
  Ok(db, agentmem_block_set(db, user, "persona", "Warm and brief.\nNever guesses.", 0, 0));
  Ok(db, agentmem_block_set(db, user, "goals", "```\n## Facts\n| not | a | row |\n````", 0, 1));
  Ok(db, agentmem_block_set(db, user, "scratch", "line one\r\nline two\n\n  indented  ", 0, -1));
  Ok(db, agentmem_block_set(db, user, " odd | name\\ ", "", 0, -1));
  Ok(db, agentmem_block_set(db, user, "limited", "short", 10, 2));
  Ok(db, agentmem_block_set(db, user, "unpinned", "negative order", 0, -7));
  Fact(db, user, "alice", "lives_in", "Tokyo", 0.9, k2023);
  Fact(db, user, "alice", "likes", "tea | green\\black", 0.75);
  Fact(db, user, "alice", "worked_at", " Acme\nCorp ", 1.0, k2023 - 365 * 86400 * kSecond,
       k2023 + 1234567);
  Ok(db, agentmem_remember(db, user, "s1", "user", "hello\n## Facts\n```", k2023, nullptr, nullptr,
                           0, nullptr));
  Ok(db, agentmem_remember(db, user, "s1", "assistant", "| 1 | 2 |", k2023 + kSecond, nullptr,
                           nullptr, 0, nullptr));
  Ok(db, agentmem_remember(db, user, "s2", "user", "later", k2023 + 86400 * kSecond, nullptr,
                           nullptr, 0, nullptr));
}

}  // namespace

TEST_CASE("a user with no memory exports the headings alone, and reading it back writes nothing") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("a.agentmem"));
  const int64_t commits = Stats(db).commits;
  std::string text = ExportMd(db, "nobody");
  CHECK(text.find("# Memory of nobody") != std::string::npos);
  CHECK(text.find("## Blocks") != std::string::npos);
  CHECK(text.find("| subject | predicate | object | valid from | valid to | confidence | fact |") !=
        std::string::npos);
  CHECK(text.find("## Sessions") != std::string::npos);
  CHECK(text.find("### ") == std::string::npos);
  nlohmann::json r = ImportMd(db, "nobody", text);
  CHECK(r["block_versions"] == 0);
  CHECK(r["facts_asserted"] == 0);
  CHECK(r["changes"].empty());
  CHECK(Stats(db).commits == commits);
  CHECK(ImportMd(db, "nobody", "")["changes"].empty());  // an empty text is a valid one
  char* out = nullptr;
  CHECK(agentmem_export_markdown(db, nullptr, &out) == AGENTMEM_MISUSE);
  CHECK(out == nullptr);
  CHECK(agentmem_import_markdown(db, "nobody", nullptr, &out) == AGENTMEM_MISUSE);
  CHECK(agentmem_import_markdown(db, "nobody", "", nullptr) == AGENTMEM_OK);  // no report wanted
  agentmem_close(db);
}

TEST_CASE("an edited block and fact come back as new versions and both stay in the history") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("a.agentmem"));
  Ok(db, agentmem_block_set(db, "alice", "persona", "Warm and brief.", 0, 0));
  const int64_t tokyo = Fact(db, "alice", "alice", "lives_in", "Tokyo", 0.9, k2023);
  std::string text = ExportMd(db, "alice");
  CHECK(text.find("| alice | lives_in | Tokyo | 2023-01-01 |  | 0.9 | " + std::to_string(tokyo) +
                  " |") != std::string::npos);

  std::string edited = Edit(text, "Warm and brief.", "Warm, brief and exact.");
  edited = Edit(edited, "| Tokyo |", "| Osaka |");
  const int64_t before = Facts(db, "alice", "lives_in", 0)[0].recorded_at;
  nlohmann::json r = ImportMd(db, "alice", edited);
  CHECK(r["block_versions"] == 1);
  CHECK(r["facts_asserted"] == 1);
  CHECK(r["facts_superseded"] == 1);
  REQUIRE(r["changes"].size() == 2);
  CHECK(r["changes"][0]["block"] == "persona");
  CHECK(r["changes"][0]["line"] ==
        std::count(edited.begin(), edited.begin() + edited.find("### persona"), '\n') + 1);
  CHECK(r["changes"][1]["supersedes"] == tokyo);

  // block_history keeps both versions, oldest first.
  CHECK(SqlColumn(db, "SELECT value FROM block_history('alice', 'persona')") ==
        std::vector<std::string>{"Warm and brief.", "Warm, brief and exact."});
  // The fact as the file knew it before the import, and as it knows it now.
  std::vector<FactRow> now = Facts(db, "alice", "lives_in", 0);
  REQUIRE(now.size() == 1);
  CHECK(now[0].object == "Osaka");
  std::vector<FactRow> then = Facts(db, "alice", "lives_in", before);
  REQUIRE(then.size() == 1);
  CHECK(then[0].object == "Tokyo");
  CHECK(then[0].id == tokyo);
  std::vector<FactRow> all = Facts(db, "alice", "lives_in", 0, AGENTMEM_FACTS_ALL_VERSIONS);
  REQUIRE(all.size() == 2);
  CHECK(all[0].expired_at == now[0].recorded_at);  // superseded at the instant Osaka was recorded
  // SQL facts_as_of gives the new value now, and the old one as known before.
  CHECK(SqlColumn(db, "SELECT object FROM facts_as_of('alice')") ==
        std::vector<std::string>{"Osaka"});
  CHECK(SqlColumn(db, "SELECT object FROM facts_as_of('alice', NULL, " + std::to_string(before) +
                          ")") == std::vector<std::string>{"Tokyo"});

  // The export now shows the new values, and reading it back writes nothing.
  std::string again = ExportMd(db, "alice");
  CHECK(again.find("Warm, brief and exact.") != std::string::npos);
  CHECK(again.find("Tokyo") == std::string::npos);
  const int64_t commits = Stats(db).commits;
  CHECK(ImportMd(db, "alice", again)["changes"].empty());
  CHECK(Stats(db).commits == commits);
  agentmem_close(db);
}

TEST_CASE(
    "an edited fact row with a later valid from keeps the old value until then in valid time") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("a.agentmem"));
  const int64_t tokyo = Fact(db, "alice", "alice", "lives_in", "Tokyo", 0.9, k2023);
  const int64_t k2025 = k2023 + 731LL * 86400 * kSecond;  // 2025-01-01
  const int64_t known_before = Facts(db, "alice", "lives_in", 0)[0].recorded_at;
  std::string text = ExportMd(db, "alice");
  nlohmann::json r =
      ImportMd(db, "alice", Edit(text, "| Tokyo | 2023-01-01 |", "| Osaka | 2025-01-01 |"));
  CHECK(r["facts_superseded"] == 1);
  auto valid_at = [&](int64_t t) {
    return SqlColumn(db, "SELECT object FROM facts_as_of('alice', " + std::to_string(t) + ")");
  };
  CHECK(valid_at(k2025 - 1) == std::vector<std::string>{"Tokyo"});
  CHECK(valid_at(k2025) == std::vector<std::string>{"Osaka"});
  CHECK(SqlColumn(db, "SELECT object FROM facts_as_of('alice')") ==
        std::vector<std::string>{"Osaka"});
  std::vector<FactRow> then = Facts(db, "alice", "lives_in", known_before);
  REQUIRE(then.size() == 1);
  CHECK(then[0].id == tokyo);
  // The new rows were recorded at the instant the old one left transaction time.
  std::vector<FactRow> all = Facts(db, "alice", "lives_in", 0, AGENTMEM_FACTS_ALL_VERSIONS);
  REQUIRE(all.size() == 3);
  CHECK(all[1].recorded_at == all[0].expired_at);
  CHECK(all[2].recorded_at == all[0].expired_at);
  // A changed date alone is a correction: nothing of the old dates stays.
  text = ExportMd(db, "alice");
  CHECK(text.find("| alice | lives_in | Tokyo | 2023-01-01 | 2025-01-01 | 0.9 |") !=
        std::string::npos);
  ImportMd(db, "alice", Edit(text, "| Osaka | 2025-01-01 |", "| Osaka | 2025-06-01 |"));
  CHECK(valid_at(k2025) == std::vector<std::string>{});
  CHECK(Facts(db, "alice", "lives_in", 0).size() == 1);
  agentmem_close(db);
}

TEST_CASE("an export read back unchanged writes nothing, whatever its values hold") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("a.agentmem"));
  Populate(db, "alice");
  const std::string text = ExportMd(db, "alice");
  const agentmem_stats before = Stats(db);
  nlohmann::json r = ImportMd(db, "alice", text);
  CHECK(r["block_versions"] == 0);
  CHECK(r["blocks_unchanged"] == 6);
  CHECK(r["facts_unchanged"] == 3);
  CHECK(r["changes"].empty());
  const agentmem_stats after = Stats(db);
  CHECK(after.commits == before.commits);
  CHECK(after.block_versions == before.block_versions);
  CHECK(after.facts == before.facts);
  CHECK(ExportMd(db, "alice") == text);

  // Line endings changed to CRLF by an editor write nothing either.
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  CHECK(ImportMd(db, "alice", crlf)["changes"].empty());
  CHECK(Stats(db).commits == before.commits);

  // Edits to the sessions, the title and the read-only settings are not read.
  std::string sessions = Edit(text, "  later\n", "  much later, edited\n");
  sessions = Edit(sessions, "# Memory of alice", "# Memory of someone else");
  sessions = Edit(sessions, "### Session s1", "### Session renamed");
  sessions = Edit(sessions, "pinned: 0 \xC2\xB7 limit: none \xC2\xB7 version: 1",
                  "pinned: 0 \xC2\xB7 limit: none \xC2\xB7 version: 99");
  CHECK(ImportMd(db, "alice", sessions)["changes"].empty());
  CHECK(Stats(db).commits == before.commits);

  // Fact ids are the user's own: another user's import refuses them.
  auto [rc, msg] = Refused(db, "bob", text);
  CHECK(rc == AGENTMEM_NOTFOUND);
  CHECK(msg.find("is not one of this user's facts") != std::string::npos);
  // Without them every value reads back exactly into another user.
  std::string no_ids;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl - start);
    start = nl + 1;
    if (line.rfind("| alice |", 0) == 0) line = line.substr(0, line.rfind(" | ")) + " |  |";
    no_ids += line + "\n";
  }
  nlohmann::json copy = ImportMd(db, "bob", no_ids);
  CHECK(copy["block_versions"] == 6);
  CHECK(copy["facts_asserted"] == 3);
  agentmem_block* b = nullptr;
  Ok(db, agentmem_block_get(db, "bob", "scratch", &b));
  CHECK(std::string(b->value) == "line one\r\nline two\n\n  indented  ");
  agentmem_free(b);
  Ok(db, agentmem_block_get(db, "bob", " odd | name\\ ", &b));
  CHECK(std::string(b->value).empty());
  agentmem_free(b);
  Ok(db, agentmem_block_get(db, "bob", "goals", &b));
  CHECK(std::string(b->value) == "```\n## Facts\n| not | a | row |\n````");
  CHECK(b->pinned_order == 1);
  agentmem_free(b);
  std::vector<std::string> objects =
      SqlColumn(db, "SELECT object FROM facts WHERE user_id = 'bob'");
  CHECK(std::count(objects.begin(), objects.end(), " Acme\nCorp ") == 1);
  CHECK(std::count(objects.begin(), objects.end(), "tea | green\\black") == 1);
  agentmem_close(db);
}

TEST_CASE("a malformed line is refused with its line number and nothing is written") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("a.agentmem"));
  Populate(db, "alice");
  const std::string text = ExportMd(db, "alice");
  // A valid edit before each bad line: it must not be written either.
  const std::string good = Edit(text, "Warm and brief.", "Changed.");
  const size_t facts_at = good.find("| alice | likes |");
  const int facts_line =
      static_cast<int>(std::count(good.begin(), good.begin() + facts_at, '\n')) + 1;
  struct Case {
    std::string from, to;
    int code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"| 0.75 |", "| 1.5 |", AGENTMEM_MISMATCH, "confidence is a number from 0 to 1"},
      {"| alice | likes |", "| alice | likes | tea | 2023-02-30 | |\n| alice | likes |",
       AGENTMEM_MISMATCH, "valid from \"2023-02-30\": no such date"},
      {"| alice | likes |", "| alice | likes | tea | yesterday |\n| alice | likes |",
       AGENTMEM_MISMATCH, "valid from \"yesterday\""},
      {"| alice | likes |", "| alice |\n| alice | likes |", AGENTMEM_MISMATCH,
       "a fact row has 3 to 7 cells"},
      {"| alice | likes |", "| alice | likes | tea | | | | 999999 |\n| alice | likes |",
       AGENTMEM_NOTFOUND, "fact 999999 is not one of this user's facts"},
      {"| alice | likes |", "the cat likes tea\n| alice | likes |", AGENTMEM_MISMATCH,
       "unexpected text in the Facts section"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    auto [rc, msg] = Refused(db, "alice", Edit(good, c.from, c.to));
    CHECK(rc == c.code);
    CHECK(msg.find("markdown line " + std::to_string(facts_line) + ": ") == 0);
    CHECK(msg.find(c.message) != std::string::npos);
  }
  auto refused_at = [&](const std::string& bad, int line, const std::string& what) {
    CAPTURE(what);
    auto [rc, msg] = Refused(db, "alice", bad);
    CHECK(rc != AGENTMEM_OK);
    CHECK(msg.find("markdown line " + std::to_string(line) + ": ") == 0);
    CHECK(msg.find(what) != std::string::npos);
  };
  refused_at("## Blocks\n\n### a\n```text\nnever closed\n", 4, "is not closed");
  refused_at("## Blocks\n### a\n\n### b\n```\n```\n", 2, "has no value");
  refused_at("## Blocks\n### a\n```\n```\n### a\n```\n```\n", 5, "appears twice (also at line 2)");
  refused_at("## Blocks\n### a\npinned: maybe\n```\n```\n", 3, "pinned is \"no\" or an order");
  refused_at("## Blocks\n### a\nsome text\n```\n```\n", 3, "expected the block's settings");
  refused_at("## Blocks\n### a\nlimit: 3\n```\nfour\n```\n", 2, "its limit is 3");
  refused_at("## Notes\n", 1, "unknown section \"Notes\"");
  refused_at(
      "## Facts\n| subject | predicate | object | valid from | valid to | confidence | fact |\n"
      "|-|-|-|-|-|-|-|\n| a | b | c | 1970-01-01 |\n",
      4, "valid from \"1970-01-01\": the instant 0");
  refused_at("## Facts\n| s | p | o |\n", 2, "the facts table starts with the header");
  refused_at("<!-- agentmem-memory 2 -->\n", 1, "another layout");
  refused_at("## Blocks\n### a\n```\nbad \xff byte\n```\n", 4, "not valid UTF-8");
  CHECK(ExportMd(db, "alice") == text);  // nothing was written by any of them
  agentmem_close(db);
}

TEST_CASE("a new fact line and a new block are written, and a removed line forgets nothing") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("a.agentmem"));
  Populate(db, "alice");
  const std::string text = ExportMd(db, "alice");
  // Remove every fact row and the persona block; add a block and a fact.
  std::string edited;
  bool skip = false;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl - start);
    start = nl + 1;
    if (line == "### persona") skip = true;
    if (line == "### goals") skip = false;
    if (skip || line.rfind("| alice", 0) == 0) continue;
    edited += line + "\n";
  }
  edited = Edit(edited, "## Sessions\n", "| alice | likes | coffee | | | | |\n\n## Sessions\n");
  edited = Edit(edited, "## Blocks\n\n", "## Blocks\n\n### todo\n```\nbuy milk\n```\n\n");
  nlohmann::json r = ImportMd(db, "alice", edited);
  CHECK(r["block_versions"] == 1);
  CHECK(r["facts_asserted"] == 1);
  CHECK(r["facts_superseded"] == 0);
  agentmem_block* b = nullptr;
  Ok(db, agentmem_block_get(db, "alice", "todo", &b));
  CHECK(std::string(b->value) == "buy milk");
  CHECK(b->pinned_order == -1);
  CHECK(b->limit == 0);
  agentmem_free(b);
  Ok(db, agentmem_block_get(db, "alice", "persona", &b));  // still there
  agentmem_free(b);
  CHECK(Facts(db, "alice", "likes", 0).size() == 2);  // tea and coffee
  CHECK(Facts(db, "alice", "lives_in", 0).size() == 1);
  // A line that asserts what the file already knows writes nothing.
  const int64_t commits = Stats(db).commits;
  nlohmann::json again = ImportMd(db, "alice",
                                  "## Facts\n| subject | predicate | object | valid "
                                  "from | valid to | confidence | fact |\n|-|-|-|-|-|-|-|\n"
                                  "| alice | likes | coffee |\n");
  CHECK(again["facts_asserted"] == 0);
  CHECK(again["facts_unchanged"] == 1);
  CHECK(Stats(db).commits == commits);
  agentmem_close(db);
}

TEST_CASE("an import inside the caller's transaction is written by its commit") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("a.agentmem"));
  Ok(db, agentmem_begin(db));
  ImportMd(db, "alice", "## Blocks\n### a\npinned: 3\n```\nvalue\n```\n");
  Ok(db, agentmem_rollback(db));
  agentmem_block* b = nullptr;
  CHECK(agentmem_block_get(db, "alice", "a", &b) == AGENTMEM_NOTFOUND);
  Ok(db, agentmem_begin(db));
  ImportMd(db, "alice", "## Blocks\n### a\npinned: 3\n```\nvalue\n```\n");
  Ok(db, agentmem_commit(db));
  Ok(db, agentmem_block_get(db, "alice", "a", &b));
  CHECK(b->pinned_order == 3);
  agentmem_free(b);
  agentmem_close(db);
}

TEST_CASE("a NUL byte, a very long line and a long run of backquotes are read within their size") {
  TempDir dir;
  {
    // The engine's entry point takes a length, so a NUL arrives whole there.
    agentmem::engine::Options opts;
    std::unique_ptr<agentmem::engine::Database> raw;
    REQUIRE(agentmem::engine::Database::Open(dir.File("n.agentmem"), opts, &raw).ok());
    const std::string nul("## Blocks\n### a\n```\nx\0y\n```\n", 28);
    std::string report;
    agentmem::Status s = agentmem::engine::ImportMarkdown(raw.get(), "alice", nul, &report);
    CHECK(s.code() == AGENTMEM_MISMATCH);
    CHECK(s.message() == "markdown line 4: holds a NUL byte");
    agentmem::engine::Stats st;
    REQUIRE(raw->GetStats(&st).ok());
    CHECK(st.block_versions == 0);
  }
  agentmem_db* db = Open(dir.File("a.agentmem"));
  const std::string long_value(4 << 20, 'v');
  nlohmann::json r = ImportMd(db, "alice", "## Blocks\n### big\n```\n" + long_value + "\n```\n");
  CHECK(r["block_versions"] == 1);
  const std::string fence(100000, '`');
  r = ImportMd(
      db, "alice",
      "## Blocks\n### ticks\n" + fence + "\n" + std::string(99999, '`') + "\n" + fence + "\n");
  CHECK(r["block_versions"] == 1);
  agentmem_block* b = nullptr;
  Ok(db, agentmem_block_get(db, "alice", "ticks", &b));
  CHECK(std::string(b->value) == std::string(99999, '`'));
  agentmem_free(b);
  std::string text = ExportMd(db, "alice");
  CHECK(text.find(fence + "text\n") != std::string::npos);
  CHECK(ImportMd(db, "alice", text)["changes"].empty());
  agentmem_close(db);
}

TEST_CASE("an import that would write more than 10000 blocks and facts is refused before writing") {
  TempDir dir;
  agentmem_db* db = Open(dir.File("a.agentmem"));
  std::string text =
      "## Facts\n| subject | predicate | object | valid from | valid to | confidence | fact |\n"
      "|-|-|-|-|-|-|-|\n";
  for (int i = 0; i < 10001; i++) text += "| s" + std::to_string(i) + " | p | o |\n";
  auto [rc, msg] = Refused(db, "alice", text);
  CHECK(rc == AGENTMEM_TOOBIG);
  CHECK(msg.find("markdown line 10004: more than 10000 blocks and facts") == 0);
  CHECK(Facts(db, "alice", nullptr, 0).empty());
  text.resize(text.rfind("| s10000"));
  CHECK(ImportMd(db, "alice", text)["facts_asserted"] == 10000);
  agentmem_close(db);
}

TEST_CASE("names and cells escape what would break the layout and read back as written") {
  const std::vector<std::string> values = {
      "plain",     " lead",       "trail ", "a|b", "back\\slash", "line\nfeed", "cr\rlf",
      "tab\there", "\\n literal", "",       "  ",  "x\\",         "\\|"};
  for (const std::string& v : values) {
    CAPTURE(v);
    const std::string cell = md::Escape(v, true);
    CHECK((cell.find('|') == std::string::npos || cell.find("\\|") != std::string::npos));
    CHECK(cell.find('\n') == std::string::npos);
    std::vector<std::string> cells = md::SplitRow("| " + cell + " | " + cell + " |");
    REQUIRE(cells.size() == 2);
    CHECK(cells[0] == v);
    CHECK(cells[1] == v);
    CHECK(md::Unescape(md::TrimUnescaped(md::Escape(v, false))) == v);
  }
  CHECK(md::Unescape("C:\\Users\\x") == "C:\\Users\\x");  // not an escape: kept
  CHECK(md::Unescape("a\\*b\\#") == "a*b#");
  CHECK(md::FenceFor("no ticks") == "```");
  CHECK(md::FenceFor("a ```` b") == "`````");
}

TEST_CASE("times are written as ISO 8601 UTC and read back to the microsecond") {
  const std::vector<int64_t> times = {k2023,
                                      k2023 + 1,
                                      k2023 + 500000,
                                      k2023 - 1,
                                      0,
                                      -1,
                                      253402300799LL * kSecond + 999999,
                                      -62135596800LL * kSecond,
                                      INT64_MAX - 1,
                                      INT64_MIN};
  for (int64_t t : times) {
    CAPTURE(t);
    const std::string written = md::FormatTime(t);
    int64_t back = 0;
    std::string why;
    CAPTURE(written);
    CAPTURE(why);
    REQUIRE(md::ParseTime(written, &back, &why));
    CHECK(back == t);
  }
  CHECK(md::FormatTime(k2023) == "2023-01-01");
  CHECK(md::FormatTime(k2023 + 5 * kSecond + 250000) == "2023-01-01T00:00:05.25Z");
  CHECK(md::FormatTime(INT64_MAX - 1) == "@9223372036854775806");
  int64_t t = 0;
  std::string why;
  CHECK(md::ParseTime("2023-01-01 09:30+09:00", &t, &why));
  CHECK(t == k2023 + 30 * 60 * kSecond);
  for (const char* bad :
       {"2023-13-01", "2023-1-01", "2023-01-01T24:00", "2023-01-01T10:00:00.1234567Z",
        "2023-01-01Z", "@", "@12x", "@99999999999999999999", "2023-01-01T10:00junk"}) {
    CAPTURE(bad);
    CHECK_FALSE(md::ParseTime(bad, &t, &why));
  }
}

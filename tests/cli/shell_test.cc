// tests/cli/shell_test.cc -- the `agentmem` shell run as a program: output
// modes, SQL from arguments and from standard input, dot-commands, exit
// status and error messages (docs/shell.md).
#include <agentmem.h>
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/shell_runner.h"
#include "tests/util/temp_dir.h"

using agentmem::test::Lines;
using agentmem::test::RunShell;
using agentmem::test::TempDir;

namespace {

// A small file: two users, episodes, a block with two versions and a fact.
void MakeSample(const std::string& path) {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(path.c_str(), &db) == AGENTMEM_OK);
  int64_t id = 0;
  REQUIRE(agentmem_remember(db, "ana", "s1", "user", "My sourdough starter smells like acetone.",
                            1700000000000000, "{\"channel\":\"chat\"}", nullptr, 0,
                            &id) == AGENTMEM_OK);
  REQUIRE(agentmem_remember(db, "ana", "s1", "assistant", "Feed it more often and keep it warm.",
                            1700000060000000, nullptr, nullptr, 0, nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_remember(db, "ben", "s9", "user", "I run a marathon in April.", 1700000120000000,
                            nullptr, nullptr, 0, nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_block_set(db, "ana", "profile", "Bakes bread.", 100, 0) == AGENTMEM_OK);
  REQUIRE(agentmem_block_set(db, "ana", "profile", "Bakes sourdough bread.", 100, 0) ==
          AGENTMEM_OK);
  REQUIRE(agentmem_fact_assert(db, "ana", "ana", "bakes", "sourdough", 0.9, 0, 0, &id, 1,
                               nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
}

}  // namespace

TEST_CASE("list mode prints values separated by bars and headers only when asked") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"t.agentmem", "SELECT 1 AS a, 'x' AS b, NULL AS c"});
  CHECK(r.status == 0);
  CHECK(r.out == "1|x|\n");
  CHECK(r.err == "");
  r = RunShell(dir.path(), {"-header", "t.agentmem", "SELECT 1 AS a, 'x' AS b"});
  CHECK(r.out == "a|b\n1|x\n");
}

TEST_CASE("csv mode quotes commas and quotes and newlines") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"-csv", "-header", "t.agentmem",
                                 "SELECT 'a,b' AS x, 'say \"hi\"' AS y, 2.5 AS z"});
  CHECK(r.status == 0);
  CHECK(r.out == "x,y,z\n\"a,b\",\"say \"\"hi\"\"\",2.5\n");
}

TEST_CASE("json mode prints one valid JSON array with typed values") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"-json", "t.agentmem",
                                 "SELECT 1 AS i, 0.5 AS f, 'q\"uote' AS t, NULL AS n, x'00ff' AS b "
                                 "UNION ALL SELECT 2, 1.0, 'two', NULL, NULL"});
  CHECK(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 2);
  CHECK(j[0]["i"] == 1);
  CHECK(j[0]["f"] == 0.5);
  CHECK(j[0]["t"] == "q\"uote");
  CHECK(j[0]["n"].is_null());
  CHECK(j[0]["b"] == "00ff");
  CHECK(j[1]["f"].is_number_float());
  r = RunShell(dir.path(), {"-json", "t.agentmem", "SELECT 1 AS i WHERE 0"});
  CHECK(r.out == "[]\n");
}

TEST_CASE("line mode prints one column per line with aligned names") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"-line", "t.agentmem", "SELECT 1 AS a, 'x' AS longer"});
  CHECK(r.out == "     a = 1\nlonger = x\n");
}

TEST_CASE("table and box modes draw aligned grids") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"-table", "t.agentmem", "SELECT 7 AS n, 'abc' AS s"});
  CHECK(r.out ==
        "+---+-----+\n"
        "| n | s   |\n"
        "+---+-----+\n"
        "| 7 | abc |\n"
        "+---+-----+\n");
  r = RunShell(dir.path(), {"-box", "t.agentmem", "SELECT 10 AS n, 'h\xC3\xA9' AS s"});
  CHECK(r.out ==
        "\u250C\u2500\u2500\u2500\u2500\u252C\u2500\u2500\u2500\u2500\u2510\n"
        "\u2502 n  \u2502 s  \u2502\n"
        "\u251C\u2500\u2500\u2500\u2500\u253C\u2500\u2500\u2500\u2500\u2524\n"
        "\u2502 10 \u2502 h\xC3\xA9 \u2502\n"
        "\u2514\u2500\u2500\u2500\u2500\u2534\u2500\u2500\u2500\u2500\u2518\n");
}

TEST_CASE("dot mode and headers change the output of later statements") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"t.agentmem"},
                    "SELECT 1 AS a;\n.mode csv\n.headers on\nSELECT 2 AS a;\n.mode json\n"
                    "SELECT 3 AS a;\n.mode\n");
  CHECK(r.status == 0);
  CHECK(r.out == "1\na\n2\n[{\"a\":3}]\ncurrent output mode: json\n");
  r = RunShell(dir.path(), {"t.agentmem", ".mode fancy"});
  CHECK(r.status == 1);
  CHECK(r.err.find("Error: usage: .mode") == 0);
}

TEST_CASE("statements from standard input may span lines and share a line") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"t.agentmem"},
                    "SELECT 1;SELECT 2;\nSELECT\n  3 -- a comment; not the end\n  + 4;\n"
                    "SELECT ';' AS semi;\n/* block; comment */ SELECT 5\n");
  CHECK(r.status == 0);
  CHECK(r.out == "1\n2\n7\n;\n5\n");
  CHECK(r.err == "");
}

TEST_CASE("bad SQL exits with status 1 and the engine message on stderr") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"t.agentmem", "SELEC 1"});
  CHECK(r.status == 1);
  CHECK(r.out == "");
  CHECK(r.err.rfind("Error: ", 0) == 0);
  CHECK(r.err.find("syntax error") != std::string::npos);
}

TEST_CASE("an unknown table is an error naming the table") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"t.agentmem", "SELECT * FROM nonesuch"});
  CHECK(r.status == 1);
  CHECK(r.err.find("Error: ") == 0);
  CHECK(r.err.find("no such table: nonesuch") != std::string::npos);
}

TEST_CASE("a script goes on after an error unless bail is set and still exits 1") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"t.agentmem"}, "SELECT 1;\nSELECT nope;\nSELECT 2;\n");
  CHECK(r.status == 1);
  CHECK(r.out == "1\n2\n");
  CHECK(Lines(r.err).size() == 1);
  r = RunShell(dir.path(), {"-bail", "t.agentmem"}, "SELECT 1;\nSELECT nope;\nSELECT 2;\n");
  CHECK(r.status == 1);
  CHECK(r.out == "1\n");
}

TEST_CASE("SQL arguments run in order and stop at the first failure") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"t.agentmem", "SELECT 1", "SELECT nope", "SELECT 2"});
  CHECK(r.status == 1);
  CHECK(r.out == "1\n");
  r = RunShell(dir.path(),
               {"-cmd", ".mode csv", "t.agentmem", "SELECT 'a,b'", ".mode list", "SELECT 'a,b'"});
  CHECK(r.status == 0);
  CHECK(r.out == "\"a,b\"\na,b\n");
}

TEST_CASE("version help and unknown options") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"-version"});
  CHECK(r.status == 0);
  CHECK(r.out == std::string("agentmem ") + agentmem_libversion() + "\n");
  r = RunShell(dir.path(), {"--help"});
  CHECK(r.status == 0);
  CHECK(r.out.find("Usage: agentmem [OPTIONS] [FILE] [SQL...]") == 0);
  r = RunShell(dir.path(), {"-frobnicate", "t.agentmem"});
  CHECK(r.status == 1);
  CHECK(r.err == "Error: unknown option: -frobnicate (agentmem -help lists the options)\n");
  r = RunShell(dir.path(), {"t.agentmem", ".nonesuch"});
  CHECK(r.status == 1);
  CHECK(r.err == "Error: unknown command: .nonesuch (.help lists the commands)\n");
}

TEST_CASE("a file that is not a database is refused with the engine message") {
  TempDir dir;
  agentmem::test::WriteFileBytes(dir.File("junk.agentmem"), std::string(8192, 'j'));
  auto r = RunShell(dir.path(), {"junk.agentmem", "SELECT 1"});
  CHECK(r.status == 1);
  CHECK(r.err.find("Error: cannot open \"junk.agentmem\": ") == 0);
  CHECK(r.out == "");
  CHECK(agentmem::test::ReadFileBytes(dir.File("junk.agentmem")) == std::string(8192, 'j'));
}

TEST_CASE("the tables are listed and described") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"t.agentmem", ".tables"});
  CHECK(r.status == 0);
  CHECK(r.out.find("tables:          blocks, episodes, facts\n") == 0);
  CHECK(r.out.find("recall") != std::string::npos);
  CHECK(r.out.find("integrity_check") != std::string::npos);
  CHECK(r.out.find("json_each") == std::string::npos);
  r = RunShell(dir.path(), {"t.agentmem", ".schema episodes"});
  CHECK(r.status == 0);
  CHECK(r.out.find("episodes(id INTEGER, user_id TEXT") == 0);
  r = RunShell(dir.path(), {"t.agentmem", ".schema recall"});
  CHECK(r.out.find("recall(query, ") == 0);
  CHECK(r.out.find(") -> (id INTEGER") != std::string::npos);
  r = RunShell(dir.path(), {"t.agentmem", ".schema nonesuch"});
  CHECK(r.status == 1);
}

TEST_CASE("stats shows the counts per user and check says ok") {
  TempDir dir;
  MakeSample(dir.File("s.agentmem"));
  auto r = RunShell(dir.path(), {"s.agentmem", ".stats"});
  CHECK(r.status == 0);
  CHECK(r.out.find("users:     2\n") != std::string::npos);
  CHECK(r.out.find("episodes:  3 (") != std::string::npos);
  CHECK(r.out.find("blocks:    1 (2 versions)\n") != std::string::npos);
  CHECK(r.out.find("facts:     1\n") != std::string::npos);
  CHECK(r.out.find("| ana     |        2 |      1 |     1 |") != std::string::npos);
  r = RunShell(dir.path(), {"s.agentmem", ".check"});
  CHECK(r.status == 0);
  CHECK(r.out == "ok\n");
}

TEST_CASE("vacuum compacts the file and forget statements run from the shell") {
  TempDir dir;
  MakeSample(dir.File("s.agentmem"));
  auto r = RunShell(dir.path(), {"s.agentmem", "FORGET USER 'ana'"});
  CHECK(r.status == 0);
  r = RunShell(dir.path(), {"s.agentmem", ".vacuum"});
  CHECK(r.status == 0);
  CHECK(r.out.find("vacuumed ") == 0);
  r = RunShell(dir.path(), {"s.agentmem", "SELECT count(*) FROM episodes WHERE user_id = 'ana'"});
  CHECK(r.out == "0\n");
  r = RunShell(dir.path(), {"s.agentmem", ".check"});
  CHECK(r.out == "ok\n");
  r = RunShell(dir.path(), {"s.agentmem", ".vacuum extra"});
  CHECK(r.status == 1);
}

TEST_CASE("recall shows scores and both ranks") {
  TempDir dir;
  MakeSample(dir.File("s.agentmem"));
  auto r = RunShell(dir.path(), {"s.agentmem", ".recall ana 'sourdough starter' 2"});
  CHECK(r.status == 0);
  // rule, header, rule, 2 hits, rule: ana's second turn matches through its
  // context, the turn before it in the session
  CHECK(Lines(r.out).size() == 6);
  r = RunShell(dir.path(), {"s.agentmem", ".recall ana 'sourdough starter' 2 fill"});
  CHECK(r.status == 0);
  auto lines = Lines(r.out);
  REQUIRE(lines.size() == 6);  // rule, header, rule, 2 hits, rule
  CHECK(lines[1].find("| # | id | score  | bm25_rank | bm25_score | vector_rank |") == 0);
  CHECK(lines[3].find("| 1 |  1 | 1.0") == 0);  // the best of both lists: 0.9 + 0.1
  r = RunShell(dir.path(), {"-json", "s.agentmem", ".recall ana 'sourdough starter' 2 bm25 fill"});
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.size() == 2);
  CHECK(j[0]["id"] == 1);
  CHECK(j[0]["bm25_rank"] == 1);
  CHECK(j[0]["vector_rank"].is_null());
  r = RunShell(dir.path(), {"s.agentmem", ".recall ana x 0"});
  CHECK(r.status == 1);
  CHECK(r.err == "Error: k must be between 1 and 10000, not 0\n");
  // Thresholds: min_similarity=-inf lists every vector neighbour, min_bm25 cuts BM25 hits.
  r = RunShell(dir.path(), {"-json", "s.agentmem", ".recall ana 'sourdough starter' vector min_similarity=-inf"});
  CHECK(nlohmann::json::parse(r.out).size() == 2);
  r = RunShell(dir.path(), {"-json", "s.agentmem", ".recall ana 'sourdough starter' bm25 min_bm25=1000"});
  CHECK(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).empty());
  r = RunShell(dir.path(), {"s.agentmem", ".recall ana zeppelin"});
  CHECK(r.status == 0);
  CHECK(r.out.find("(no episode of user \"ana\" matches") != std::string::npos);
  r = RunShell(dir.path(), {"s.agentmem", ".recall ana x min_similarity=high"});
  CHECK(r.status == 1);
  CHECK(r.err == "Error: min_similarity must be a number, not \"high\"\n");
  r = RunShell(dir.path(), {"s.agentmem", ".explain ana 'sourdough starter'"});
  CHECK(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).is_object());
}

TEST_CASE("recall through SQL in json mode gives the ids of the C API in the same order") {
  TempDir dir;
  MakeSample(dir.File("s.agentmem"));
  auto r = RunShell(dir.path(), {"-json", "s.agentmem",
                                 "SELECT id, score, bm25_score, vector_score, text FROM "
                                 "recall('sourdough starter', 'ana', 5)"});
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  std::vector<int64_t> shell_ids;
  for (const auto& row : j) shell_ids.push_back(row["id"].get<int64_t>());
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(dir.File("s.agentmem").c_str(), &db, AGENTMEM_OPEN_READONLY, nullptr) ==
          AGENTMEM_OK);
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.k = 5;
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_recall(db, "ana", "sourdough starter", &o, &cur) == AGENTMEM_OK);
  std::vector<int64_t> api_ids;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW) api_ids.push_back(agentmem_cursor_hit(cur)->id);
  agentmem_cursor_close(cur);
  agentmem_close(db);
  CHECK(shell_ids.size() == 2);  // the second of ana's turns matches through the first
  CHECK(shell_ids == api_ids);
}

TEST_CASE("open switches to another file") {
  TempDir dir;
  MakeSample(dir.File("s.agentmem"));
  auto r =
      RunShell(dir.path(), {"empty.agentmem"},
               "SELECT count(*) FROM episodes;\n.open s.agentmem\nSELECT count(*) FROM "
               "episodes;\n.open /nonexistent-dir/x.agentmem\nSELECT count(*) FROM episodes;\n");
  CHECK(r.status == 1);
  CHECK(r.out == "0\n3\n3\n");  // a failed .open keeps the current file
  CHECK(r.err.find("Error: cannot open \"/nonexistent-dir/x.agentmem\"") == 0);
}

TEST_CASE("a read-only open refuses writes with a clear message and loses nothing") {
  TempDir dir;
  MakeSample(dir.File("s.agentmem"));
  std::string before = agentmem::test::ReadFileBytes(dir.File("s.agentmem"));
  auto r = RunShell(dir.path(), {"-readonly", "s.agentmem",
                                 "INSERT INTO episodes(user_id, session_id, role, text) "
                                 "VALUES ('ana', 's1', 'user', 'more')"});
  CHECK(r.status == 1);
  CHECK(r.err.find("Error: ") == 0);
  CHECK(r.err.find("read-only") != std::string::npos);
  CHECK(agentmem::test::ReadFileBytes(dir.File("s.agentmem")) == before);
  // A file without write permission opens read-only by itself.
  REQUIRE(chmod(dir.File("s.agentmem").c_str(), 0444) == 0);
  r = RunShell(dir.path(), {"s.agentmem", "SELECT count(*) FROM episodes", ".import /dev/null"});
  if (geteuid() != 0) {  // root may write anyway
    CHECK(r.err.find("Note: s.agentmem is not writable; opened read-only") == 0);
  }
  CHECK(r.out.find("3\n") == 0);
  CHECK(agentmem::test::ReadFileBytes(dir.File("s.agentmem")) == before);
}

TEST_CASE("a busy file gives a clear message and the other writer loses nothing") {
  TempDir dir;
  MakeSample(dir.File("s.agentmem"));
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(dir.File("s.agentmem").c_str(), &db) == AGENTMEM_OK);
  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  REQUIRE(agentmem_remember(db, "ana", "s1", "user", "held by the test", 0, nullptr, nullptr, 0,
                            nullptr) == AGENTMEM_OK);  // takes the write lock
  auto r = RunShell(dir.path(), {"-options", "busy_timeout=0", "s.agentmem",
                                 "INSERT INTO episodes(user_id, session_id, role, text) "
                                 "VALUES ('ana', 's1', 'user', 'from the shell')"});
  CHECK(r.status == 1);
  CHECK(r.err.find("Error: ") == 0);
  CHECK(r.err.find("lock") != std::string::npos);
  REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
  agentmem_close(db);
  r = RunShell(dir.path(), {"s.agentmem", "SELECT text FROM episodes WHERE user_id = 'ana'"});
  CHECK(r.out ==
        "My sourdough starter smells like acetone.\nFeed it more often and keep it warm.\n"
        "held by the test\n");
}

TEST_CASE("a wrong number of arguments to a table function is an error") {
  TempDir dir;
  MakeSample(dir.File("s.agentmem"));
  auto r = RunShell(dir.path(), {"s.agentmem", "SELECT * FROM recall()"});
  CHECK(r.status == 1);
  CHECK(r.err.find("Error: ") == 0);
  CHECK(r.out == "");
}

TEST_CASE("parameters are bound by name and position and a missing one is an error") {
  TempDir dir;
  MakeSample(dir.File("s.agentmem"));
  auto r = RunShell(dir.path(), {"s.agentmem"},
                    ".parameter set :user ana\n.parameter set ?2 'it''s'\n"
                    ".parameter set @k 2\n.parameter list\n"
                    "SELECT count(*), ?2 FROM episodes WHERE user_id = :user;\n"
                    "SELECT id FROM recall('sourdough starter', :user, @k);\n");
  CHECK(r.status == 0);
  CHECK(r.err == "");
  CHECK(r.out == ":user = 'ana'\n?2 = 'it''s'\n@k = 2\n2|it's\n1\n2\n");
  r = RunShell(dir.path(), {"s.agentmem", "SELECT :a, ?, ':b', @c -- :d"});
  CHECK(r.status == 1);
  CHECK(r.out == "");
  CHECK(r.err ==
        "Error: no value for parameter :a, ?2, @c (set one with .parameter set NAME VALUE; the "
        "statement is not run)\n");
  r = RunShell(dir.path(), {"s.agentmem", ".parameter set ?2 7", "SELECT :a, ?, ?5"});
  CHECK(r.err ==
        "Error: no value for parameter :a, ?5 (set one with .parameter set NAME VALUE; "
        "the statement is not run)\n");
  r = RunShell(dir.path(), {"s.agentmem", ".parameter set x 1"});
  CHECK(r.status == 1);
}

TEST_CASE("read runs a script file") {
  TempDir dir;
  agentmem::test::WriteFileBytes(dir.File("script.sql"), "SELECT 1;\n.mode csv\nSELECT 'a,b';\n");
  auto r = RunShell(dir.path(), {"t.agentmem", ".read script.sql", "SELECT 2"});
  CHECK(r.status == 0);
  CHECK(r.out == "1\n\"a,b\"\n2\n");
  r = RunShell(dir.path(), {"t.agentmem", ".read nonesuch.sql"});
  CHECK(r.status == 1);
  CHECK(r.err == "Error: .read: cannot read \"nonesuch.sql\": No such file or directory\n");
}

TEST_CASE("a read of a missing file creates nothing and reads as empty; the first write creates it") {
  TempDir dir;
  const std::string typo = dir.File("typo.agentmen");
  auto r = RunShell(dir.path(), {"typo.agentmen", "SELECT count(*) FROM episodes", ".tables"});
  CHECK(r.status == 0);
  CHECK(r.out.find("0\n") == 0);
  CHECK(access(typo.c_str(), F_OK) != 0);
  // .open likewise; a failed statement does not create it either.
  r = RunShell(dir.path(), {}, ".open typo.agentmen\nSELECT count(*) FROM episodes;\n.stats\n"
                               "SELECT * FROM nonesuch;\n");
  CHECK(r.status == 1);
  CHECK(r.out.find("0\n") == 0);
  CHECK(access(typo.c_str(), F_OK) != 0);
  // The first write creates it and is written, once; statements before it
  // print once too.
  r = RunShell(dir.path(), {"new.agentmem"},
               "SELECT count(*) FROM episodes;\n"
               "INSERT INTO episodes(user_id, session_id, role, text) VALUES ('ana', 's', 'user', "
               "'first'); SELECT count(*) FROM episodes;\n");
  CHECK_MESSAGE(r.status == 0, r.err);
  CHECK(r.out == "0\n1\n");
  CHECK(access(dir.File("new.agentmem").c_str(), F_OK) == 0);
  r = RunShell(dir.path(), {"new.agentmem", "SELECT text FROM episodes"});
  CHECK(r.out == "first\n");
  // A dot-command that writes creates the file, and runs once.
  r = RunShell(dir.path(), {"new.agentmem", ".export-user ana ana.jsonl"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  r = RunShell(dir.path(), {}, ".open other.agentmem\n.import-user ana.jsonl\n"
                               "SELECT text FROM episodes;\n");
  CHECK_MESSAGE(r.status == 0, r.err);
  CHECK(r.out == "added 1 records\nfirst\n");
  CHECK(access(dir.File("other.agentmem").c_str(), F_OK) == 0);
  // A folder that does not exist is still an error at open.
  r = RunShell(dir.path(), {"no-such-dir/x.agentmem", "SELECT count(*) FROM episodes"});
  CHECK(r.status == 1);
  CHECK(r.err.find("Error: cannot open \"no-such-dir/x.agentmem\"") == 0);
}

// tests/cli/import_export_test.cc -- .import and .export: the JSONL format,
// bad lines, the round trip export -> import into a new file -> export, and
// the LoCoMo episodes (docs/shell.md, "JSONL records").
#include <doctest/doctest.h>

#include <agentmem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/cli/shell_runner.h"
#include "tests/util/temp_dir.h"

using agentmem::test::Lines;
using agentmem::test::ReadFileBytes;
using agentmem::test::RunShell;
using agentmem::test::TempDir;
using agentmem::test::WriteFileBytes;

namespace {

// Every kind of record, with the forms import accepts: kind given or
// inferred, ISO and numeric times, numbers as session ids, extra fields.
const char kSample[] =
    R"({"kind":"episode","user_id":"ana","session_id":"s1","role":"user","text":"I moved to Lisbon.","ts":"2024-03-01T10:00:00Z","metadata":{"channel":"chat"}})" "\n"
    R"({"user_id":"ana","session_id":2,"role":"assistant","text":"Caf\u00e9 tips \"quoted\"\nnew line","ts":1709287260000000,"mood":"warm"})" "\n"
    "\n"
    R"({"kind":"episode","id":77,"user_id":"ben","session_id":"s9","role":"user","text":"Marathon in April.","ts":1709287320000000})" "\n"
    R"({"user_id":"ana","name":"profile","value":"Lives in Porto.","limit":100,"pinned_order":0})" "\n"
    R"({"kind":"block","user_id":"ana","name":"profile","value":"Lives in Lisbon.","limit":100,"pinned_order":0})" "\n"
    R"({"kind":"block","user_id":"ben","name":"goals","value":"Run 42 km."})" "\n"
    R"({"user_id":"ben","subject":"ben","predicate":"runs","object":"marathon","confidence":0.75,"source_episode_ids":[77],"valid_from":"2024-03-01"})" "\n"
    R"({"kind":"fact","user_id":"ana","subject":"ana","predicate":"lives_in","object":"Lisbon","valid_from":1709287200000000,"valid_to":1800000000000000})" "\n";

}  // namespace

TEST_CASE("import reads every kind of record and export writes them back in write order") {
  TempDir dir;
  WriteFileBytes(dir.File("in.jsonl"), kSample);
  auto r = RunShell(dir.path(), {"a.agentmem", ".import in.jsonl", ".export"});
  CHECK(r.status == 0);
  CHECK(r.err == "");  // no progress bar: stderr is not a terminal
  auto lines = Lines(r.out);
  REQUIRE(lines.size() == 9);
  CHECK(lines[0] == "imported 3 episodes, 3 block versions, 2 facts from in.jsonl");
  CHECK(lines[1] ==
        R"({"kind":"episode","id":1,"user_id":"ana","session_id":"s1","role":"user","text":"I moved to Lisbon.","ts":1709287200000000,"metadata":{"channel":"chat"}})");
  CHECK(lines[2] ==
        R"({"kind":"episode","id":2,"user_id":"ana","session_id":"2","role":"assistant","text":"Café tips \"quoted\"\nnew line","ts":1709287260000000,"metadata":{"mood":"warm"}})");
  CHECK(lines[3] ==
        R"({"kind":"episode","id":3,"user_id":"ben","session_id":"s9","role":"user","text":"Marathon in April.","ts":1709287320000000})");
  CHECK(lines[4] ==
        R"({"kind":"block","user_id":"ana","name":"profile","value":"Lives in Porto.","limit":100,"pinned_order":0})");
  CHECK(lines[5] ==
        R"({"kind":"block","user_id":"ana","name":"profile","value":"Lives in Lisbon.","limit":100,"pinned_order":0})");
  CHECK(lines[6] ==
        R"({"kind":"block","user_id":"ben","name":"goals","value":"Run 42 km.","limit":0,"pinned_order":-1})");
  // The fact's source is episode 77 of the input, which became episode 3.
  CHECK(lines[7] ==
        R"({"kind":"fact","id":1,"user_id":"ben","subject":"ben","predicate":"runs","object":"marathon","confidence":0.75,"source_episode_ids":[3],"valid_from":1709251200000000,"valid_to":null})");
  CHECK(lines[8] ==
        R"({"kind":"fact","id":2,"user_id":"ana","subject":"ana","predicate":"lives_in","object":"Lisbon","confidence":1.0,"source_episode_ids":[],"valid_from":1709287200000000,"valid_to":1800000000000000})");
}

TEST_CASE("export then import into a new file then export gives the same JSONL") {
  TempDir dir;
  WriteFileBytes(dir.File("in.jsonl"), kSample);
  auto r = RunShell(dir.path(), {"a.agentmem", ".import in.jsonl", ".export one.jsonl --vectors"});
  REQUIRE(r.status == 0);
  r = RunShell(dir.path(), {"b.agentmem", ".import one.jsonl", ".export two.jsonl --vectors"});
  REQUIRE(r.status == 0);
  std::string one = ReadFileBytes(dir.File("one.jsonl"));
  CHECK(one.size() > 1000);  // the vectors are in it
  CHECK(Lines(one).size() == 8);
  CHECK(one == ReadFileBytes(dir.File("two.jsonl")));
  // The block history came along: both versions, oldest first.
  r = RunShell(dir.path(), {"b.agentmem", "SELECT value FROM block_history('ana', 'profile')"});
  CHECK(r.out == "Lives in Porto.\nLives in Lisbon.\n");
}

TEST_CASE("bad lines are reported with their line numbers and the good ones are imported") {
  TempDir dir;
  WriteFileBytes(dir.File("bad.jsonl"),
                 R"({"user_id":"ana","text":"fine"})" "\n"
                 "{not json\n"
                 R"({"user_id":"ana","role":"user"})" "\n"
                 R"({"kind":"episode","user_id":"ana","role":"user"})" "\n"
                 R"({"kind":"block","user_id":"ana","name":"b","value":"too long","limit":3})" "\n"
                 R"({"kind":"fact","user_id":"ana","subject":"a","predicate":"p","object":"o","confidence":2})" "\n"
                 R"({"kind":"fact","user_id":"ana","subject":"a","predicate":"p","object":"o","colour":"red"})" "\n"
                 R"({"kind":"thing","text":"x"})" "\n"
                 R"({"user_id":"ana","text":"also fine","ts":"yesterday"})" "\n"
                 R"([1,2])" "\n"
                 R"({"user_id":"ana","text":"fine too"})" "\n");
  auto r = RunShell(dir.path(), {"a.agentmem", ".import bad.jsonl"});
  CHECK(r.status == 1);
  CHECK(r.out == "imported 2 episodes, 0 block versions, 0 facts from bad.jsonl\n");
  auto err = Lines(r.err);
  REQUIRE(err.size() == 10);
  CHECK(err[0] == "bad.jsonl:2: not valid JSON");
  CHECK(err[1] == "bad.jsonl:3: cannot tell the kind of record: add \"kind\" (episode, block or fact)");
  CHECK(err[2] == "bad.jsonl:4: missing \"text\"");
  CHECK(err[3].find("bad.jsonl:5: ") == 0);
  CHECK(err[4].find("bad.jsonl:6: ") == 0);
  CHECK(err[5] == "bad.jsonl:7: unknown field \"colour\"");
  CHECK(err[6] == "bad.jsonl:8: \"kind\" must be \"episode\", \"block\" or \"fact\", not \"thing\"");
  CHECK(err[7] ==
        "bad.jsonl:9: \"ts\" must be unix microseconds or an ISO-8601 time, not \"yesterday\"");
  CHECK(err[8] == "bad.jsonl:10: not a JSON object");
  CHECK(err[9] == "Error: .import: 9 lines of bad.jsonl could not be imported (listed above)");
  r = RunShell(dir.path(), {"a.agentmem", "SELECT text FROM episodes"});
  CHECK(r.out == "fine\nfine too\n");
}

TEST_CASE("import of a missing file and import into a read-only file fail cleanly") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"a.agentmem", ".import nonesuch.jsonl"});
  CHECK(r.status == 1);
  CHECK(r.err == "Error: .import: cannot read \"nonesuch.jsonl\": No such file or directory\n");
  WriteFileBytes(dir.File("in.jsonl"), kSample);
  r = RunShell(dir.path(), {"-readonly", "a.agentmem", ".import in.jsonl"});
  CHECK(r.status == 1);
  CHECK(r.err.find("Error: .import: line 1: ") == 0);
  CHECK(r.err.find("read-only") != std::string::npos);
  CHECK(r.err.find("(import stopped; nothing was imported)") != std::string::npos);
  r = RunShell(dir.path(), {"a.agentmem", "SELECT count(*) FROM episodes"});
  CHECK(r.out == "0\n");
}

TEST_CASE("import with small batches commits each batch and gives the same records") {
  TempDir dir;
  WriteFileBytes(dir.File("in.jsonl"), kSample);
  auto r = RunShell(dir.path(), {"a.agentmem", ".import in.jsonl --batch 2", ".export"});
  REQUIRE(r.status == 0);
  auto r1 = RunShell(dir.path(), {"b.agentmem", ".import in.jsonl", ".export"});
  REQUIRE(r1.status == 0);
  CHECK(r.out == r1.out);
  r = RunShell(dir.path(), {"a.agentmem", "SELECT commits FROM stats()"});
  auto r2 = RunShell(dir.path(), {"b.agentmem", "SELECT commits FROM stats()"});
  CHECK(std::stoll(r.out) > std::stoll(r2.out));
}

TEST_CASE("the LoCoMo episodes import with conv_id as the user and round-trip exactly") {
  std::string data = agentmem::test::DataDir();
  if (data.empty()) {
    MESSAGE("evaluation data not found (../shared/data): skipped");
    return;
  }
  TempDir dir;
  std::string src = data + "/locomo/episodes.jsonl";
  auto source_lines = Lines(ReadFileBytes(src));
  size_t n = source_lines.size();
  std::set<std::string> conversations;
  for (const auto& line : source_lines) {
    conversations.insert(nlohmann::json::parse(line)["conv_id"].get<std::string>());
  }
  auto r = RunShell(dir.path(), {"-options", "sync=normal", "a.agentmem",
                                 ".import " + src +
                                     " --user-field conv_id --session-field session "
                                     "--role-field speaker",
                                 ".export one.jsonl"});
  REQUIRE(r.status == 0);
  CHECK(r.err == "");  // piped: no progress bar
  CHECK(r.out.find("imported " ) == 0);
  r = RunShell(dir.path(), {"a.agentmem", "SELECT count(*), count(DISTINCT user_id) FROM episodes"});
  CHECK(r.out == std::to_string(n) + "|" + std::to_string(conversations.size()) + "\n");
  r = RunShell(dir.path(), {"-options", "sync=normal", "b.agentmem", ".import one.jsonl",
                            ".export two.jsonl"});
  REQUIRE(r.status == 0);
  std::string one = ReadFileBytes(dir.File("one.jsonl"));
  CHECK(Lines(one).size() == n);
  CHECK(one == ReadFileBytes(dir.File("two.jsonl")));
  // The fields without a column were kept in metadata.
  auto first = nlohmann::json::parse(Lines(one)[0]);
  CHECK(first["user_id"] == "conv-41");
  CHECK(first["session_id"] == "1");
  CHECK(first["role"] == "Maria");
  CHECK(first["metadata"]["turn_id"] == "D1:1");
  CHECK(first["metadata"]["seq"] == 0);
}

TEST_CASE("import joins an open engine transaction and rollback discards it") {
  TempDir dir;
  WriteFileBytes(dir.File("two.jsonl"), "{\"user_id\":\"u\",\"text\":\"one\"}\n"
                                        "{\"user_id\":\"u\",\"text\":\"two\"}\n");
  auto r = RunShell(dir.path(), {"j.agentmem"},
                    "BEGIN;\nINSERT INTO episodes(user_id, text) VALUES ('u', 'zero');\n"
                    ".import two.jsonl --batch 1\nROLLBACK;\nSELECT count(*) FROM episodes;\n"
                    "BEGIN;\nINSERT INTO episodes(user_id, text) VALUES ('u', 'zero');\n"
                    ".import two.jsonl --batch 1\nCOMMIT;\nSELECT text FROM episodes;\n");
  CHECK(r.status == 0);
  CHECK(r.out ==
        "imported 2 episodes, 0 block versions, 0 facts from two.jsonl\n0\n"
        "imported 2 episodes, 0 block versions, 0 facts from two.jsonl\nzero\none\ntwo\n");
}

TEST_CASE("export through a symbolic link writes the file it points to") {
  TempDir dir;
  WriteFileBytes(dir.File("in.jsonl"), kSample);
  WriteFileBytes(dir.File("real.jsonl"), "old\n");
  REQUIRE(symlink("real.jsonl", dir.File("link.jsonl").c_str()) == 0);
  auto r = RunShell(dir.path(), {"a.agentmem", ".import in.jsonl", ".export link.jsonl"});
  CHECK(r.status == 0);
  struct stat st;
  REQUIRE(lstat(dir.File("link.jsonl").c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  CHECK(Lines(ReadFileBytes(dir.File("real.jsonl"))).size() == 8);
  CHECK(access(dir.File("real.jsonl.part").c_str(), F_OK) != 0);
  r = RunShell(dir.path(), {"a.agentmem", ".export nonesuch/x.jsonl"});
  CHECK(r.status == 1);
  CHECK(r.err ==
        "Error: .export: cannot write \"nonesuch/x.jsonl.part\": No such file or directory\n");
  r = RunShell(dir.path(), {"a.agentmem", ".import ."});
  CHECK(r.status == 1);
  CHECK(r.err == "Error: .import: \".\" is a folder, not a file\n");
}

TEST_CASE("import refuses a NUL byte in a name or a text instead of cutting it there") {
  TempDir dir;
  WriteFileBytes(dir.File("nul.jsonl"),
                 R"({"user_id":"alice\u0000evil","text":"x"})" "\n"
                 R"({"user_id":"alice","text":"before\u0000after"})" "\n"
                 R"({"kind":"block","user_id":"alice","name":"b","value":"v\u0000w"})" "\n"
                 R"({"kind":"fact","user_id":"alice","subject":"a","predicate":"p\u0000q","object":"o"})" "\n"
                 R"({"user_id":"alice","text":"fine","metadata":{"note":"a\u0000b"}})" "\n");
  auto r = RunShell(dir.path(), {"a.agentmem", ".import nul.jsonl"});
  CHECK(r.status == 1);
  CHECK(r.out == "imported 1 episodes, 0 block versions, 0 facts from nul.jsonl\n");
  auto err = Lines(r.err);
  REQUIRE(err.size() == 5);
  CHECK(err[0] == "nul.jsonl:1: \"user_id\" contains a NUL byte (\\u0000), which agentmem refuses");
  CHECK(err[1] == "nul.jsonl:2: \"text\" contains a NUL byte (\\u0000), which agentmem refuses");
  CHECK(err[2].find("nul.jsonl:3: ") == 0);
  CHECK(err[3].find("nul.jsonl:4: ") == 0);
  // Metadata keeps it escaped in its JSON text: it round-trips whole.
  r = RunShell(dir.path(), {"a.agentmem", "SELECT user_id, text, metadata FROM episodes"});
  CHECK(r.out == "alice|fine|{\"note\":\"a\\u0000b\"}\n");
}

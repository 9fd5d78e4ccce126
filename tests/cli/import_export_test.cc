// tests/cli/import_export_test.cc -- .import and .export: plain JSONL
// records and their bad lines (docs/shell.md, "JSONL records"), the whole-file
// export (docs/export.md) and its round trip export -> import into a new file
// -> export, a backup of superseded facts, block history and forgotten data,
// and the LoCoMo episodes.
#include <doctest/doctest.h>

#include <agentmem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

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
  REQUIRE(lines.size() == 10);
  CHECK(lines[0] == "imported 3 episodes, 3 block versions, 2 facts from in.jsonl");
  // The export: a header, then episodes, block versions and facts with the
  // times the engine gave them (created_at, updated_at, recorded_at).
  auto header = nlohmann::json::parse(lines[1]);
  CHECK(header["type"] == "agentmem-export");
  CHECK(header["scope"] == "file");
  CHECK(header["next_episode_id"] == 4);
  auto without = [](const std::string& line, std::initializer_list<const char*> keys) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(line);
    for (const char* k : keys) {
      CHECK(j.contains(k));
      j.erase(k);
    }
    return j.dump();
  };
  CHECK(without(lines[2], {"created_at"}) ==
        R"({"type":"episode","user_id":"ana","id":1,"session_id":"s1","role":"user","ts":1709287200000000,"text":"I moved to Lisbon.","metadata":{"channel":"chat"}})");
  CHECK(without(lines[3], {"created_at"}) ==
        R"({"type":"episode","user_id":"ana","id":2,"session_id":"2","role":"assistant","ts":1709287260000000,"text":"Café tips \"quoted\"\nnew line","metadata":{"mood":"warm"}})");
  CHECK(without(lines[4], {"created_at"}) ==
        R"({"type":"episode","user_id":"ben","id":3,"session_id":"s9","role":"user","ts":1709287320000000,"text":"Marathon in April."})");
  CHECK(without(lines[5], {"updated_at"}) ==
        R"({"type":"block","user_id":"ana","name":"profile","version":1,"value":"Lives in Porto.","limit":100,"pinned_order":0})");
  CHECK(without(lines[6], {"updated_at"}) ==
        R"({"type":"block","user_id":"ana","name":"profile","version":2,"value":"Lives in Lisbon.","limit":100,"pinned_order":0})");
  CHECK(without(lines[7], {"updated_at"}) ==
        R"({"type":"block","user_id":"ben","name":"goals","version":3,"value":"Run 42 km.","limit":0,"pinned_order":-1})");
  // The fact's source is episode 77 of the input, which became episode 3.
  CHECK(without(lines[8], {"recorded_at"}) ==
        R"({"type":"fact","user_id":"ben","id":1,"subject":"ben","predicate":"runs","object":"marathon","confidence":0.75,"source_episode_ids":[3],"valid_from":1709251200000000,"valid_to":null,"expired_at":null})");
  CHECK(without(lines[9], {"recorded_at"}) ==
        R"({"type":"fact","user_id":"ana","id":2,"subject":"ana","predicate":"lives_in","object":"Lisbon","confidence":1.0,"source_episode_ids":[],"valid_from":1709287200000000,"valid_to":1800000000000000,"expired_at":null})");
}

TEST_CASE("export then import into a new file then export gives the same JSONL") {
  TempDir dir;
  WriteFileBytes(dir.File("in.jsonl"), kSample);
  auto r = RunShell(dir.path(), {"a.agentmem", ".import in.jsonl", ".export one.jsonl --vectors"});
  REQUIRE(r.status == 0);
  r = RunShell(dir.path(), {"b.agentmem", ".import one.jsonl", ".export two.jsonl --vectors"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("imported 8 new records from one.jsonl") == 0);
  std::string one = ReadFileBytes(dir.File("one.jsonl"));
  CHECK(Lines(one).size() == 9);
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
  // The records, less the times the engine gave them when written.
  const std::vector<std::string> kRecords = {
      "SELECT id, user_id, session_id, role, text, ts, metadata FROM episodes",
      "SELECT user_id, name, value, char_limit, pinned_order, version FROM blocks",
      "SELECT id, user_id, subject, predicate, object, confidence, source_episode_ids, "
      "valid_from, valid_to FROM facts"};
  std::vector<std::string> a = {"a.agentmem", ".import in.jsonl --batch 2"};
  std::vector<std::string> b = {"b.agentmem", ".import in.jsonl"};
  a.insert(a.end(), kRecords.begin(), kRecords.end());
  b.insert(b.end(), kRecords.begin(), kRecords.end());
  auto r = RunShell(dir.path(), a);
  REQUIRE(r.status == 0);
  auto r1 = RunShell(dir.path(), b);
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
  CHECK(Lines(one).size() == n + 1);  // and the header
  CHECK(one == ReadFileBytes(dir.File("two.jsonl")));
  // The fields without a column were kept in metadata.
  auto first = nlohmann::json::parse(Lines(one)[1]);
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
  CHECK(Lines(ReadFileBytes(dir.File("real.jsonl"))).size() == 9);
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

// ---------------------------------------------------------------- whole-file backup

namespace {

// A file with every kind of history: alice lives in Tokyo, then Osaka
// (lives_in single-valued: Tokyo superseded on both time axes), a block with
// three versions, episodes with and without metadata, a forgotten episode (the
// last id, so only the next ids remember it), a forgotten fact (the last
// fact id too) and bob's
// memory. Built through the C API, which has the calls the shell lacks.
void MakeHistoryFile(const std::string& path) {
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "sync=off") == AGENTMEM_OK);
  REQUIRE(agentmem_predicate_declare(db, "lives_in", 1) == AGENTMEM_OK);
  REQUIRE(agentmem_predicate_declare(db, "likes", 0) == AGENTMEM_OK);
  int64_t tokyo = 0, osaka = 0, id = 0;
  REQUIRE(agentmem_remember(db, "alice", "s1", "user", "I live in Tokyo", 1000, nullptr, nullptr,
                            0, &tokyo) == AGENTMEM_OK);
  REQUIRE(agentmem_remember(db, "alice", "s2", "user", "I moved to Osaka", 2000,
                            "{\"mood\": \"happy\", \"tags\": [1, 2.5]}", nullptr, 0,
                            &osaka) == AGENTMEM_OK);
  REQUIRE(agentmem_remember(db, "bob", "b1", "user", "bob likes chess", 3000, "\"plain\"",
                            nullptr, 0, &id) == AGENTMEM_OK);
  REQUIRE(agentmem_remember(db, "alice", "s3", "user", "my pin is 1234, forget it", 4000,
                            nullptr, nullptr, 0, &id) == AGENTMEM_OK);
  for (const char* v : {"Tokyo resident", "Osaka resident", "Osaka resident, likes tea"}) {
    REQUIRE(agentmem_block_set(db, "alice", "persona", v, 100, 0) == AGENTMEM_OK);
  }
  REQUIRE(agentmem_block_set(db, "bob", "notes", "chess", 0, -1) == AGENTMEM_OK);
  REQUIRE(agentmem_fact_assert(db, "alice", "alice", "lives_in", "Tokyo", 0.9, 1000, 0, &tokyo, 1,
                               nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_fact_assert(db, "alice", "alice", "lives_in", "Osaka", 0.8, 2000, 0, &osaka, 1,
                               nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_fact_assert(db, "bob", "bob", "likes", "chess", 0.7, 3000, 0, nullptr, 0,
                               nullptr) == AGENTMEM_OK);
  int64_t secret = 0;
  REQUIRE(agentmem_fact_assert(db, "alice", "alice", "pin", "1234", 1.0, 4000, 0, &id, 1,
                               &secret) == AGENTMEM_OK);
  REQUIRE(agentmem_forget_fact(db, secret, 0, nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_forget_episode(db, id, 0, nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
}

std::string FactRows(agentmem_db* db, const char* user, int64_t valid_at, int64_t known_at,
                     int flags) {
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_facts_v2(db, user, nullptr, nullptr, nullptr, valid_at, known_at, flags,
                            &cur) == AGENTMEM_OK);
  std::string out;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
    const agentmem_fact* f = agentmem_cursor_fact(cur);
    out += std::to_string(f->id) + " " + f->subject + " " + f->predicate + " " + f->object +
           " valid [" + std::to_string(f->valid_from) + ", " + std::to_string(f->valid_to) +
           ") known [" + std::to_string(f->recorded_at) + ", " + std::to_string(f->expired_at) +
           ") from";
    for (int i = 0; i < f->n_sources; i++) out += " " + std::to_string(f->source_episode_ids[i]);
    out += "\n";
  }
  agentmem_cursor_close(cur);
  return out;
}

// What queries answer about the file: episodes, blocks and their history,
// facts now, as of a valid time, as known before the supersession, every
// version, recall, and the counts.
std::string QueryResults(const std::string& dir, const std::string& file) {
  auto r = RunShell(dir, {"-readonly", file,
                          "SELECT id, user_id, session_id, role, text, ts, created_at, metadata "
                          "FROM episodes ORDER BY id",
                          "SELECT * FROM blocks ORDER BY user_id, name",
                          "SELECT * FROM block_history('alice', 'persona')",
                          "SELECT id, score FROM recall('where does alice live', 'alice', 5)",
                          "SELECT episodes, blocks, block_versions, facts, users FROM stats()"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  std::string out = r.out;
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2((dir + "/" + file).c_str(), &db, AGENTMEM_OPEN_READONLY, nullptr) ==
          AGENTMEM_OK);
  std::string all = FactRows(db, "alice", 0, 0, AGENTMEM_FACTS_ALL_VERSIONS);
  out += "now:\n" + FactRows(db, "alice", 0, 0, 0);
  out += "valid at 1500:\n" + FactRows(db, "alice", 1500, 0, 0);
  // Known just before Osaka was recorded: Tokyo, not yet superseded.
  int64_t osaka_recorded = 0;
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_facts_v2(db, "alice", nullptr, nullptr, "Osaka", 0, 0, 0, &cur) ==
          AGENTMEM_OK);
  REQUIRE(agentmem_cursor_step(cur) == AGENTMEM_ROW);
  osaka_recorded = agentmem_cursor_fact(cur)->recorded_at;
  agentmem_cursor_close(cur);
  out += "known before Osaka:\n" + FactRows(db, "alice", 0, osaka_recorded - 1, 0);
  out += "all versions:\n" + all + FactRows(db, "bob", 0, 0, AGENTMEM_FACTS_ALL_VERSIONS);
  agentmem_close(db);
  return out;
}

}  // namespace

TEST_CASE("a whole-file backup of superseded facts, block history and forgotten data restores the same answers") {
  TempDir dir;
  MakeHistoryFile(dir.File("a.agentmem"));
  auto r = RunShell(dir.path(), {"a.agentmem", ".export backup.jsonl"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out == "exported 3 episodes, 4 block versions, 4 facts to backup.jsonl\n");
  std::string backup = ReadFileBytes(dir.File("backup.jsonl"));
  // The forgotten episode and fact are not in it, not even their text.
  CHECK(backup.find("1234") == std::string::npos);
  auto lines = Lines(backup);
  REQUIRE(lines.size() == 1 + 2 + 3 + 4 + 4);
  auto header = nlohmann::json::parse(lines[0]);
  CHECK(header["type"] == "agentmem-export");
  CHECK(header["version"] == 3);
  CHECK(header["scope"] == "file");
  CHECK(header["next_episode_id"] == 5);  // episode 4 was forgotten
  CHECK(lines[1] == R"({"type":"predicate","predicate":"likes","single_valued":false})");
  CHECK(lines[2] == R"({"type":"predicate","predicate":"lives_in","single_valued":true})");
  // Metadata travels as the JSON value it is, byte for byte.
  CHECK(lines[4].find(R"("metadata":{"mood": "happy", "tags": [1, 2.5]})") != std::string::npos);
  CHECK(lines[5].find(R"("metadata":"plain")") != std::string::npos);

  r = RunShell(dir.path(), {"b.agentmem", ".import backup.jsonl", ".import backup.jsonl",
                            ".export again.jsonl"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto out = Lines(r.out);
  REQUIRE(out.size() == 3);
  CHECK(out[0] ==
        "imported 11 new records from backup.jsonl (an agentmem export; records already present "
        "are skipped)");
  CHECK(out[1] ==
        "imported 0 new records from backup.jsonl (an agentmem export; records already present "
        "are skipped)");
  CHECK(ReadFileBytes(dir.File("again.jsonl")) == backup);
  std::string want = QueryResults(dir.path(), "a.agentmem");
  CHECK(want.find("Tokyo valid [1000, 2000) known") != std::string::npos);
  CHECK(QueryResults(dir.path(), "b.agentmem") == want);

  // Ids of forgotten records are not given again, and the declaration came
  // along: a new home supersedes Osaka in the restored file as in the source.
  for (const char* file : {"a.agentmem", "b.agentmem"}) {
    CAPTURE(file);
    r = RunShell(dir.path(), {file,
                              "INSERT INTO episodes(user_id, text) VALUES ('alice', 'Kyoto now')",
                              "SELECT max(id) FROM episodes"});
    REQUIRE_MESSAGE(r.status == 0, r.err);
    CHECK(r.out == "5\n");
    agentmem_db* db = nullptr;
    REQUIRE(agentmem_open(dir.File(file).c_str(), &db) == AGENTMEM_OK);
    int64_t fact = 0;
    REQUIRE(agentmem_fact_assert(db, "alice", "alice", "lives_in", "Kyoto", 1.0, 5000, 0, nullptr,
                                 0, &fact) == AGENTMEM_OK);
    CHECK(fact == 6);  // not 5: the last fact (the pin) was forgotten
    std::string then = FactRows(db, "alice", 3000, 0, 0);
    CAPTURE(then);
    CHECK(then.find("Osaka valid [2000, 5000)") != std::string::npos);
    CHECK(FactRows(db, "alice", 0, 0, 0).find("Kyoto valid [5000, ") != std::string::npos);
    agentmem_close(db);
  }
}

TEST_CASE("import of an export refuses plain-record options, an unknown version and a NUL byte") {
  TempDir dir;
  MakeHistoryFile(dir.File("a.agentmem"));
  auto r = RunShell(dir.path(), {"a.agentmem", ".export backup.jsonl"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  r = RunShell(dir.path(), {"b.agentmem", ".import backup.jsonl --user-field conv"});
  CHECK(r.status == 1);
  CHECK(r.err ==
        "Error: .import: --user-field is for plain records; \"backup.jsonl\" is an agentmem "
        "export, whose records name their users and sessions\n");
  std::string backup = ReadFileBytes(dir.File("backup.jsonl"));
  std::string v9 = backup;
  v9.replace(v9.find("\"version\":3"), 11, "\"version\":9");
  WriteFileBytes(dir.File("v9.jsonl"), v9);
  r = RunShell(dir.path(), {"b.agentmem", ".import v9.jsonl"});
  CHECK(r.status == 1);
  CHECK(r.err ==
        "Error: .import: v9.jsonl: import line 1: export version 9 is unknown (this library "
        "reads versions 1 to 3)\n");
  std::string nul = backup;
  nul.insert(nul.find("Osaka"), 1, '\0');
  WriteFileBytes(dir.File("nul.jsonl"), nul);
  r = RunShell(dir.path(), {"b.agentmem", ".import nul.jsonl"});
  CHECK(r.status == 1);
  CHECK(r.err.find("Error: .import: nul.jsonl:5: a NUL byte") == 0);
  r = RunShell(dir.path(), {"b.agentmem", "SELECT count(*) FROM episodes"});
  CHECK(r.out == "0\n");
  // Plain records take no --new-ids: they always get this file's next ids.
  WriteFileBytes(dir.File("plain.jsonl"), kSample);
  r = RunShell(dir.path(), {"b.agentmem", ".import plain.jsonl --new-ids"});
  CHECK(r.status == 1);
  CHECK(r.err.find("--new-ids is for an agentmem export") != std::string::npos);
}

TEST_CASE(".import of an export into a new file creates it with the export's vector space") {
  TempDir dir;
  WriteFileBytes(dir.File("in.jsonl"), kSample);
  auto r = RunShell(dir.path(), {"-options", "embedder=agentmem-hash-v1", "a.agentmem",
                                 ".import in.jsonl", ".export backup.jsonl"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  // A new file: the export's space, not the default one.
  r = RunShell(dir.path(), {"b.agentmem", ".import backup.jsonl", ".export"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find(R"("embedder":"agentmem-hash-v1","dim":384,"metric":"cosine")") !=
        std::string::npos);
  r = RunShell(dir.path(), {"b.agentmem", "SELECT count(*) FROM episodes"});
  CHECK(r.out == "3\n");
  r = RunShell(dir.path(), {"e.agentmem", ".import-user backup.jsonl",
                            "SELECT count(*) FROM episodes"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out == "added 8 records\n3\n");
  // A space named by -options wins, and the import reports the difference.
  r = RunShell(dir.path(), {"-options", "embedder=agentmem-glove-v1", "c.agentmem",
                            ".import backup.jsonl"});
  CHECK(r.status == 1);
  CHECK(r.err.find("vector space agentmem-hash-v1/384/cosine differs from this file's "
                   "agentmem-glove-v1/100/cosine") != std::string::npos);
  // A file that exists keeps its space.
  r = RunShell(dir.path(), {"d.agentmem", ".import in.jsonl", ".import backup.jsonl"});
  CHECK(r.status == 1);
  CHECK(r.err.find("differs from this file's agentmem-glove-v2/100/cosine") !=
        std::string::npos);
}

TEST_CASE(".import of an export into a new file keeps the export's vector storage") {
  TempDir dir;
  WriteFileBytes(dir.File("in.jsonl"), kSample);
  auto r = RunShell(dir.path(), {"-options", "vector_type=f16", "a.agentmem", ".import in.jsonl",
                                 ".export backup.jsonl"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const std::string backup = ReadFileBytes(dir.File("backup.jsonl"));
  const std::string imported =
      "imported 8 new records from backup.jsonl (an agentmem export; records already present "
      "are skipped)\n";
  CHECK(backup.find(R"("metric":"cosine","vector_type":"f16","tokenizer")") != std::string::npos);
  // A new file stores float16 vectors as the exported one did: the same export back.
  r = RunShell(dir.path(), {"b.agentmem", ".import backup.jsonl", ".export"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out == imported + backup);
  // -options names another storage: it wins, and holds the export's values as they were.
  r = RunShell(dir.path(), {"-options", "vector_type=f32", "c.agentmem", ".import backup.jsonl",
                            ".export"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  std::string as_f32 = backup;
  as_f32.erase(as_f32.find(R"(,"vector_type":"f16")"), std::strlen(R"(,"vector_type":"f16")"));
  CHECK(r.out == imported + as_f32);
  // A float16 file that exists takes the backup too.
  r = RunShell(dir.path(), {"-options", "vector_type=f16", "d.agentmem", "BEGIN", "COMMIT"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  r = RunShell(dir.path(), {"d.agentmem", ".import backup.jsonl", "SELECT count(*) FROM episodes"});
  CHECK_MESSAGE(r.status == 0, r.err);
  CHECK(r.out == imported + "3\n");
}

TEST_CASE("an export of format version 1 is still imported, metadata given as a string") {
  TempDir dir;
  WriteFileBytes(
      dir.File("v1.jsonl"),
      R"({"type":"agentmem-export","version":1,"user_id":"ana","embedder":"agentmem-hash-v1","dim":384,"metric":"cosine"})"
      "\n"
      R"({"type":"episode","user_id":"ana","id":3,"session_id":"s","role":"user","ts":5,"created_at":6,"text":"hello","metadata":"{\"k\":1}"})"
      "\n"
      R"({"type":"block","user_id":"ana","name":"persona","value":"kind","limit":0,"pinned_order":-1,"updated_at":7})"
      "\n");
  auto r = RunShell(dir.path(), {"b.agentmem", ".import v1.jsonl", ".import v1.jsonl",
                                 "SELECT id, metadata, created_at FROM episodes",
                                 "SELECT version, value, updated_at FROM blocks"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto out = Lines(r.out);
  REQUIRE(out.size() == 4);
  CHECK(out[0].find("imported 2 new records") == 0);
  CHECK(out[1].find("imported 0 new records") == 0);
  CHECK(out[2] == R"(3|{"k":1}|6)");
  CHECK(out[3] == "1|kind|7");
}

TEST_CASE(".import of an export into a new file creates it with the export's text analysis") {
  TempDir dir;
  WriteFileBytes(dir.File("in.jsonl"),
                 R"({"user_id":"ana","session_id":"s1","text":"The runners were running in the parks","ts":1709287200000000})" "\n"
                 R"({"user_id":"ana","session_id":"s1","text":"A runner runs","ts":1709287200000001})" "\n"
                 R"({"user_id":"ana","session_id":"s2","text":"the park is big and the parks are green","ts":1709287200000002})" "\n");
  const std::string query = "SELECT id, score FROM recall('the running parks', 'ana', 5)";
  auto r = RunShell(dir.path(), {"-options", "stem=1&stop_words=1&context=0", "a.agentmem",
                                 ".import in.jsonl", ".export backup.jsonl", query});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto lines = Lines(r.out);
  REQUIRE(lines.size() == 5);
  const std::vector<std::string> want(lines.begin() + 2, lines.end());
  r = RunShell(dir.path(), {"b.agentmem", ".import backup.jsonl", ".export", query});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find(R"("tokenizer":"unicode-v1;stem=1;stop=1;min=1;max=0;own=3")") !=
        std::string::npos);
  lines = Lines(r.out);
  REQUIRE(lines.size() > 3);
  CHECK(std::vector<std::string>(lines.end() - 3, lines.end()) == want);  // ids and scores
  // A file made without those options ranks otherwise.
  r = RunShell(dir.path(), {"c.agentmem", ".import in.jsonl", query});
  lines = Lines(r.out);
  CHECK(std::vector<std::string>(lines.begin() + 1, lines.end()) != want);
  // That file exists with another text analysis: it refuses the export, naming the options.
  r = RunShell(dir.path(), {"c.agentmem", ".import backup.jsonl"});
  CHECK(r.status == 1);
  CHECK(r.err.find("import line 1: the export's tokenizer \"unicode-v1;stem=1;stop=1;min=1;max=0;"
                   "own=3\" differs from this file's") != std::string::npos);
  CHECK(r.err.find("\"tokenizer=unicode&stem=1&stop_words=1&context=0&own_weight=3\"") !=
        std::string::npos);
}

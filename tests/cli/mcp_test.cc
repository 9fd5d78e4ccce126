// tests/cli/mcp_test.cc -- `agentmem mcp FILE` (docs/mcp.md), run as a program:
// JSON-RPC lines on standard input, one response line each on standard
// output. The malformed-input list, --user and --readonly, clean shutdown on
// end of input and SIGTERM, and kill -9 during writes. The real-client test
// with the official TypeScript SDK is tests/mcp/sdk_client.mjs.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/shell_runner.h"
#include "tests/util/temp_dir.h"

using agentmem::test::Lines;
using agentmem::test::ReadFileBytes;
using agentmem::test::RunShell;
using agentmem::test::TempDir;
using Json = nlohmann::json;

namespace {

const char* kInit =
    R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",)"
    R"("capabilities":{},"clientInfo":{"name":"test","version":"1"}}})"
    "\n"
    R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
    "\n";

std::string Call(int id, const std::string& tool, const std::string& arguments) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
         R"(,"method":"tools/call","params":{"name":")" + tool + R"(","arguments":)" + arguments +
         "}}\n";
}

// The responses of a run, parsed, in order.
std::vector<Json> Responses(const std::string& out) {
  std::vector<Json> r;
  for (const auto& line : Lines(out)) {
    if (!line.empty()) r.push_back(Json::parse(line));
  }
  return r;
}

// The response whose id is id (a number), or null.
Json ById(const std::vector<Json>& rs, int id) {
  for (const auto& r : rs) {
    if (r.contains("id") && r["id"] == id) return r;
  }
  return Json();
}

int ErrorCode(const Json& r) { return r.contains("error") ? r["error"]["code"].get<int>() : 0; }

bool IsToolError(const Json& r) {
  return r.contains("result") && r["result"]["isError"] == true;
}

std::string ToolText(const Json& r) { return r["result"]["content"][0]["text"]; }

// A file with one episode, one fact and one block of user "alice", and one
// episode and one block of user "bob".
void Seed(const TempDir& dir) {
  auto r = RunShell(dir.path(), {"m.agentmem",
      "INSERT INTO episodes(user_id, session_id, role, text) VALUES "
      "('alice','s1','user','I adopted a cat named Miso'),"
      "('bob','s9','user','bob keeps a secret diary about parrots');"
      "INSERT INTO facts(user_id, subject, predicate, object) VALUES ('alice','alice','likes','tea');"
      "INSERT INTO blocks(user_id, name, value) VALUES ('alice','persona','Friendly'),"
      "('bob','secret','hidden')"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
}

}  // namespace

TEST_CASE("mcp answers initialize with the client's revision when it speaks it, else its latest") {
  TempDir dir;
  std::string in =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}})"
      "\n" R"({"jsonrpc":"2.0","id":2,"method":"ping"})" "\n";
  auto r = RunShell(dir.path(), {"mcp", "m.agentmem"}, in);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto rs = Responses(r.out);
  REQUIRE(rs.size() == 2);
  CHECK(rs[0]["result"]["protocolVersion"] == "2025-06-18");
  CHECK(rs[0]["result"]["capabilities"].contains("tools"));
  CHECK(rs[0]["result"]["capabilities"].contains("resources"));
  CHECK(rs[0]["result"]["serverInfo"]["name"] == "agentmem");
  CHECK(rs[1]["result"] == Json::object());
  auto old = RunShell(dir.path(), {"mcp", "m.agentmem"},
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01"}})" "\n");
  CHECK(Responses(old.out)[0]["result"]["protocolVersion"] == "2025-11-25");
}

TEST_CASE("mcp lists every tool with an input schema, and only the read tools with --readonly") {
  TempDir dir;
  Seed(dir);
  std::string in = std::string(kInit) + R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})" "\n";
  auto names = [](const Json& list) {
    std::vector<std::string> n;
    for (const auto& t : list["result"]["tools"]) {
      CHECK(t["inputSchema"]["type"] == "object");
      n.push_back(t["name"]);
    }
    return n;
  };
  auto all = names(ById(Responses(RunShell(dir.path(), {"mcp", "m.agentmem"}, in).out), 1));
  CHECK(all == std::vector<std::string>{"remember", "recall", "forget", "facts_assert",
                                        "facts_query", "block_get", "block_set", "context",
                                        "profile", "create_entities", "create_relations",
                                        "add_observations", "delete_entities",
                                        "delete_observations", "delete_relations", "read_graph",
                                        "search_nodes", "open_nodes"});
  auto ro = names(ById(Responses(RunShell(dir.path(), {"mcp", "m.agentmem", "--readonly"}, in).out), 1));
  CHECK(ro == std::vector<std::string>{"recall", "facts_query", "block_get", "context", "profile",
                                       "read_graph", "search_nodes", "open_nodes"});
}

TEST_CASE("malformed input gets JSON-RPC errors or tool errors and leaves the file untouched") {
  TempDir dir;
  Seed(dir);
  std::string before = ReadFileBytes(dir.File("m.agentmem"));
  std::string huge_text(10 << 20, 'x');
  std::vector<std::pair<std::string, int>> protocol = {
      {"not json at all", -32700},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"\xff\xfe\"}", -32700},
      {R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"remember")", -32700},
      {R"([{"jsonrpc":"2.0","id":2,"method":"ping"}])", -32600},
      {R"("a string")", -32600},
      {R"({"id":3,"method":"ping"})", -32600},
      {R"({"jsonrpc":"1.0","id":4,"method":"ping"})", -32600},
      {R"({"jsonrpc":"2.0","id":null,"method":"ping"})", -32600},
      {R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})", -32600},
      {R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})", -32600},
      {R"({"jsonrpc":"2.0","id":5})", -32600},
      {R"({"jsonrpc":"2.0","id":6,"method":7})", -32600},
      {R"({"jsonrpc":"2.0","id":7,"method":"tools/list","params":[1]})", -32602},
      {R"({"jsonrpc":"2.0","id":8,"method":"no/such/method"})", -32601},
      {R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{}})", -32602},
      {R"({"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":5}})", -32602},
      {R"({"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"remember","arguments":[1]}})", -32602},
      {R"({"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}})", -32602},
      {R"({"jsonrpc":"2.0","id":13,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})", -32600},
      {R"({"jsonrpc":"2.0","id":14,"method":"resources/read","params":{"uri":"agentmem://blocks/nope"}})", -32002},
      {R"({"jsonrpc":"2.0","id":15,"method":"resources/read","params":{}})", -32602},
      {"{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"tools/call\",\"params\":{\"name\":\"remember\","
       "\"arguments\":{\"text\":\"" + huge_text + "\"}}}", -32600},
  };
  std::vector<std::pair<std::string, std::string>> tool_errors = {
      {Call(20, "remember", R"({"text":5})"), "argument \"text\" must be a string"},
      {Call(21, "remember", R"({})"), "missing argument \"text\""},
      {Call(22, "block_set", R"({"name":"a\u0000b","value":"v"})"), "NUL"},
      {Call(23, "facts_assert", R"({"subject":"s","predicate":"p","object":"o","confidence":"high"})"),
       "argument \"confidence\" must be a number"},
      {Call(24, "recall", R"({"query":"cat","k":0})"), "argument \"k\" must be between 1 and 10000"},
      {Call(25, "recall", R"({"query":"cat","mode":"psychic"})"), "\"mode\""},
      {Call(26, "remember", R"({"text":"hi","colour":"red"})"), "unknown argument \"colour\""},
      {Call(27, "create_entities", R"({"entities":[{"name":"A","entityType":"t","observations":"x"}]})"),
       "observations\" must be an array"},
      {Call(28, "add_observations", R"({"observations":[{"entityName":"Nobody","contents":["x"]}]})"),
       "Entity with name Nobody not found"},
      {Call(29, "forget", R"({"episode_id":1,"fact_id":1})"), "exactly one"},
      {Call(30, "forget", R"({"episode_id":2})"), "no episode 2"},
      {Call(31, "block_get", R"({"name":"secret"})"), "no block named"},
      {Call(32, "remember", R"({"text":"x","user":"bob"})"), "one user"},
      {Call(33, "remember", "{\"text\":\"" + huge_text + "\"}"), "remember failed"},
  };
  // Before initialize, only initialize and ping are served.
  std::string in = R"({"jsonrpc":"2.0","id":100,"method":"tools/list"})" "\n";
  in += R"({"jsonrpc":"2.0","id":101,"method":"ping"})" "\n";
  in += kInit;
  for (const auto& [line, code] : protocol) in += line + "\n";
  // A notification is never answered, even when it is wrong, and a tool
  // call without an id (a notification) is not run.
  in += R"({"jsonrpc":"2.0","method":"notifications/unknown","params":[1]})" "\n";
  in += R"({"jsonrpc":"2.0","method":"tools/call","params":{"name":"remember","arguments":{"text":"x"}}})" "\n";
  std::string tools_in;
  for (const auto& [line, want] : tool_errors) tools_in += line;
  // The last message is a whole write without its line break: not served.
  std::string unterminated = Call(40, "remember", R"({"text":"never"})");
  unterminated.pop_back();
  auto r = RunShell(dir.path(), {"mcp", "m.agentmem", "--user", "alice", "--max-message-bytes",
                                 "1048576"},
                    in);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto rs = Responses(r.out);
  CHECK(ErrorCode(ById(rs, 100)) == -32600);
  CHECK(ById(rs, 101)["result"] == Json::object());
  size_t first = 3;  // the two above and initialize
  REQUIRE(rs.size() == first + protocol.size());
  for (size_t i = 0; i < protocol.size(); i++) {
    INFO("line " << i << ": " << protocol[i].first.substr(0, 120));
    CHECK(ErrorCode(rs[first + i]) == protocol[i].second);
    CHECK(rs[first + i]["error"]["message"].get<std::string>().size() > 10);
  }
  CHECK(rs.back()["error"]["message"].get<std::string>().find("--max-message-bytes") !=
        std::string::npos);
  auto t = RunShell(dir.path(), {"mcp", "m.agentmem", "--user", "alice", "--max-message-bytes",
                                 "33554432"},
                    std::string(kInit) + tools_in + unterminated);
  REQUIRE_MESSAGE(t.status == 0, t.err);
  auto ts = Responses(t.out);
  REQUIRE(ts.size() == 1 + tool_errors.size());
  for (size_t i = 0; i < tool_errors.size(); i++) {
    const Json& resp = ById(ts, 20 + static_cast<int>(i));
    INFO("tool call " << 20 + i << ": " << resp.dump().substr(0, 300));
    CHECK(IsToolError(resp));
    CHECK(ToolText(resp).find(tool_errors[i].second) != std::string::npos);
  }
  CHECK(t.err.find("ignored") != std::string::npos);
  CHECK(ReadFileBytes(dir.File("m.agentmem")) == before);
}

TEST_CASE("every truncation of a write request is a parse error and writes nothing") {
  TempDir dir;
  Seed(dir);
  std::string before = ReadFileBytes(dir.File("m.agentmem"));
  std::string call = Call(7, "create_entities",
                          R"({"entities":[{"name":"A","entityType":"t","observations":["o"]}]})");
  call.pop_back();
  std::string in = kInit;
  for (size_t n = 1; n < call.size(); n++) in += call.substr(0, n) + "\n";
  auto r = RunShell(dir.path(), {"mcp", "m.agentmem"}, in);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto rs = Responses(r.out);
  REQUIRE(rs.size() == call.size());
  for (size_t i = 1; i < rs.size(); i++) CHECK(ErrorCode(rs[i]) == -32700);
  CHECK(ReadFileBytes(dir.File("m.agentmem")) == before);
}

TEST_CASE("mcp --readonly refuses write tools with a clear error and never writes") {
  TempDir dir;
  Seed(dir);
  std::string before = ReadFileBytes(dir.File("m.agentmem"));
  auto r = RunShell(dir.path(), {"mcp", "m.agentmem", "--readonly", "--user", "alice"},
                    std::string(kInit) + Call(1, "remember", R"({"text":"hello"})") +
                        Call(2, "create_entities", R"({"entities":[]})") +
                        Call(3, "recall", R"({"query":"cat"})"));
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto rs = Responses(r.out);
  CHECK(IsToolError(ById(rs, 1)));
  CHECK(ToolText(ById(rs, 1)).find("read-only (--readonly)") != std::string::npos);
  CHECK(IsToolError(ById(rs, 2)));
  CHECK(ById(rs, 3)["result"]["structuredContent"]["hits"].size() == 1);
  CHECK(ReadFileBytes(dir.File("m.agentmem")) == before);
}

TEST_CASE("mcp --user keeps the client inside that user's memory") {
  TempDir dir;
  Seed(dir);
  auto r = RunShell(dir.path(), {"mcp", "m.agentmem", "--user", "alice"},
                    std::string(kInit) + Call(1, "recall", R"({"query":"secret diary parrots"})") +
                        Call(2, "block_get", "{}") + Call(3, "facts_query", "{}") +
                        Call(4, "forget", R"({"episode_id":2})") +
                        Call(5, "recall", R"({"query":"cat","user":"alice"})") +
                        R"({"jsonrpc":"2.0","id":6,"method":"resources/list"})" "\n" +
                        R"({"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"agentmem://blocks/persona"}})" "\n" +
                        R"({"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":"agentmem://blocks/secret"}})" "\n");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto rs = Responses(r.out);
  CHECK(ById(rs, 1)["result"]["structuredContent"]["hits"].empty());
  auto blocks = ById(rs, 2)["result"]["structuredContent"]["blocks"];
  REQUIRE(blocks.size() == 1);
  CHECK(blocks[0]["name"] == "persona");
  CHECK(ById(rs, 3)["result"]["structuredContent"]["facts"].size() == 1);
  CHECK(IsToolError(ById(rs, 4)));
  CHECK(ById(rs, 5)["result"]["structuredContent"]["hits"].size() == 1);
  std::vector<std::string> uris;
  Json listed = ById(rs, 6);
  for (const auto& res : listed["result"]["resources"]) uris.push_back(res["uri"]);
  CHECK(uris == std::vector<std::string>{"agentmem://profile", "agentmem://MEMORY.md",
                                         "agentmem://blocks/persona"});
  CHECK(ById(rs, 7)["result"]["contents"][0]["text"] == "Friendly");
  CHECK(ErrorCode(ById(rs, 8)) == -32002);
  auto bob = RunShell(dir.path(), {"m.agentmem", "SELECT count(*) FROM episodes WHERE user_id='bob'"});
  CHECK(bob.out == "1\n");
}

TEST_CASE("tool calls through mcp write what the shell then reads from the file") {
  TempDir dir;
  auto r = RunShell(dir.path(), {"mcp", "m.agentmem", "--user", "u"},
      std::string(kInit) +
          Call(1, "remember", R"({"text":"We moved to Lisbon in May","session_id":"s1","metadata":{"mood":"happy"}})") +
          Call(2, "facts_assert", R"({"subject":"u","predicate":"lives_in","object":"Lisbon","confidence":0.5,"source_episode_ids":[1]})") +
          Call(3, "block_set", R"({"name":"persona","value":"Concise","pinned_order":0})") +
          Call(4, "recall", R"({"query":"Lisbon","mode":"bm25","explain":true})") +
          Call(5, "context", R"({"query":"Lisbon","token_budget":50})") +
          Call(6, "profile", "{}") +
          Call(7, "facts_query", R"({"predicate":"lives_in","all_versions":true})"));
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto rs = Responses(r.out);
  CHECK(ById(rs, 1)["result"]["structuredContent"]["id"] == 1);
  CHECK(ById(rs, 2)["result"]["structuredContent"]["id"] == 1);
  CHECK(ById(rs, 3)["result"]["structuredContent"]["pinned_order"] == 0);
  auto hit = ById(rs, 4)["result"]["structuredContent"]["hits"][0];
  CHECK(hit["id"] == 1);
  CHECK(hit["bm25_rank"] == 1);
  CHECK(hit["reason"] == "bm25 #1");
  CHECK(ById(rs, 4)["result"]["structuredContent"].contains("plan"));
  auto items = ById(rs, 5)["result"]["structuredContent"]["items"];
  REQUIRE(items.size() == 3);
  CHECK(items[0]["kind"] == "block");
  CHECK(ById(rs, 6)["result"]["structuredContent"]["episodes"] == 1);
  auto fact = ById(rs, 7)["result"]["structuredContent"]["facts"][0];
  CHECK(fact["source_episode_ids"] == Json::array({1}));
  CHECK(fact["expired_at"].is_null());
  auto sql = RunShell(dir.path(), {"m.agentmem",
      "SELECT user_id, session_id, text, json_extract(metadata,'$.mood') FROM episodes;"
      "SELECT subject, predicate, object, confidence FROM facts;"
      "SELECT name, value, pinned_order FROM blocks"});
  CHECK(sql.out ==
        "u|s1|We moved to Lisbon in May|happy\nu|lives_in|Lisbon|0.5\npersona|Concise|0\n");
}

namespace {

// A server process with pipes to its standard input and output.
struct ServerProcess {
  pid_t pid = -1;
  int to = -1;    // its standard input
  FILE* from = nullptr;  // its standard output

  ServerProcess(const std::string& dir, const std::vector<std::string>& args) {
    int in[2], out[2];
    REQUIRE(pipe(in) == 0);
    REQUIRE(pipe(out) == 0);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      if (chdir(dir.c_str()) != 0) _exit(126);
      std::vector<std::string> a = {AGENTMEM_SHELL_PATH, "mcp"};
      a.insert(a.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& s : a) argv.push_back(s.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to = in[1];
    from = fdopen(out[0], "r");
  }
  ~ServerProcess() {
    if (to >= 0) close(to);
    if (from) fclose(from);
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
  void Send(const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
      ssize_t n = write(to, s.data() + done, s.size() - done);
      REQUIRE(n > 0);
      done += static_cast<size_t>(n);
    }
  }
  // The next response line, parsed; null at end of output.
  Json Read() {
    std::string line;
    int c;
    while ((c = fgetc(from)) != EOF && c != '\n') line += static_cast<char>(c);
    if (line.empty()) return Json();
    return Json::parse(line);
  }
  // Waits for the process; its exit status, or -signal.
  int Wait() {
    int ws = 0;
    waitpid(pid, &ws, 0);
    pid = -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -WTERMSIG(ws);
  }
};

}  // namespace

TEST_CASE("mcp closes the file cleanly on SIGTERM between messages") {
  TempDir dir;
  ServerProcess s(dir.path(), {"m.agentmem", "--user", "u"});
  s.Send(std::string(kInit) + Call(1, "remember", R"({"text":"kept"})"));
  CHECK(s.Read()["id"] == 0);
  CHECK(s.Read()["result"]["structuredContent"]["id"] == 1);
  kill(s.pid, SIGTERM);
  CHECK(s.Wait() == 0);
  auto r = RunShell(dir.path(), {"m.agentmem", "SELECT text FROM episodes"});
  CHECK(r.out == "kept\n");
}

TEST_CASE("kill -9 during writes through mcp loses no acknowledged call") {
  TempDir dir;
  const int kCalls = 40;
  int total_acked = 0;
  for (int round = 0; round < 6; round++) {
    ServerProcess s(dir.path(), {"m.agentmem", "--user", "u"});
    std::string batch = kInit;
    for (int i = 1; i <= kCalls; i++) {
      std::string text = "round " + std::to_string(round) + " call " + std::to_string(i);
      batch += i % 2 ? Call(i, "remember", R"({"text":")" + text + R"("})")
                     : Call(i, "create_entities", R"({"entities":[{"name":")" + text +
                                                      R"(","entityType":"t","observations":["o )" +
                                                      text + R"("]}]})");
    }
    s.Send(batch);
    REQUIRE(s.Read()["id"] == 0);
    // Kill after a different number of acknowledgements each round, while
    // the server is working through the rest of the batch.
    int kill_after = 1 + (round * 7) % (kCalls - 5);
    std::vector<std::string> acked;
    for (int n = 0; n < kill_after; n++) {
      Json r = s.Read();
      REQUIRE(r.contains("result"));
      REQUIRE(r["result"]["isError"] == false);
      int id = r["id"];
      acked.push_back("round " + std::to_string(round) + " call " + std::to_string(id));
    }
    kill(s.pid, SIGKILL);
    CHECK(s.Wait() == -SIGKILL);
    total_acked += static_cast<int>(acked.size());
    auto r = RunShell(dir.path(), {"m.agentmem",
        "SELECT text FROM episodes WHERE session_id = '';"
        "SELECT subject FROM facts WHERE predicate = 'entity_type'"});
    REQUIRE_MESSAGE(r.status == 0, r.err);
    for (const auto& text : acked) {
      INFO(text);
      CHECK(r.out.find(text + "\n") != std::string::npos);
    }
    // A call is one transaction: an entity that is there has its observation.
    auto whole = RunShell(dir.path(), {"m.agentmem",
        "SELECT count(*) FROM facts e WHERE e.predicate = 'entity_type' AND NOT EXISTS "
        "(SELECT 1 FROM facts o WHERE o.predicate = 'observation' AND o.subject = e.subject)"});
    CHECK(whole.out == "0\n");
  }
  CHECK(total_acked > 6);
}

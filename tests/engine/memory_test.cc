// tests/engine/memory_test.cc -- context assembly, profile, export and import
// through the C ABI (include/agentmem.h, "memory"; docs/memory.md): the
// budget and no-repeat rules over many budgets on a real LoCoMo conversation,
// the order and reasons of items, the profile's figures, byte-identical
// export -> import -> export, and idempotent import.
#include <doctest/doctest.h>

#include <agentmem.h>

#include <cmath>
#include <cstring>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "engine/memory/memory.h"
#include "format/half.h"
#include "tests/index/text/shared_data.h"
#include "tests/util/capi_helpers.h"
#include "tests/util/open_helpers.h"
#include "tests/util/seed.h"
#include "tests/util/temp_dir.h"

using agentmem::test::TempDir;
using agentmem::test::VectorOf;

namespace {

const std::string kData = agentmem::test::SharedDataDir();
constexpr int64_t kDay = 86400LL * 1000000;

agentmem_db* Open(const std::string& path, const char* options = nullptr) {
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                            options);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, agentmem_errmsg(db));
  return db;
}

int64_t Remember(agentmem_db* db, const char* user, const char* session, const char* role,
                 const std::string& text, int64_t ts = 0, const char* metadata = nullptr) {
  int64_t id = 0;
  int rc = agentmem_remember(db, user, session, role, text.c_str(), ts, metadata, nullptr, 0, &id);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, agentmem_errmsg(db));
  return id;
}

int64_t Fact(agentmem_db* db, const char* user, const char* s, const char* p, const char* o,
             double confidence, std::vector<int64_t> sources = {}, int64_t valid_from = 0,
             int64_t valid_to = 0) {
  int64_t id = 0;
  int rc = agentmem_fact_assert(db, user, s, p, o, confidence, valid_from, valid_to,
                                sources.data(), static_cast<int>(sources.size()), &id);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, agentmem_errmsg(db));
  return id;
}

void Block(agentmem_db* db, const char* user, const char* name, const std::string& value,
           int pinned_order, int limit = 0) {
  int rc = agentmem_block_set(db, user, name, value.c_str(), limit, pinned_order);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, agentmem_errmsg(db));
}

struct Item {
  int kind;
  int64_t id;
  std::string name, text, reason;
  int tokens;
};

std::vector<Item> Context(agentmem_db* db, const char* user, const char* query, int budget) {
  agentmem_context_item* items = nullptr;
  int n = -1;
  int rc = agentmem_context(db, user, query, budget, &items, &n);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, agentmem_errmsg(db));
  std::vector<Item> out;
  for (int i = 0; i < n; i++) {
    out.push_back({items[i].kind, items[i].id, items[i].name, items[i].text, items[i].reason,
                   items[i].tokens});
  }
  CHECK((n == 0) == (items == nullptr));
  agentmem_free(items);
  return out;
}

std::string Export(agentmem_db* db, const char* user) {
  char* out = nullptr;
  int rc = agentmem_export(db, user, &out);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, agentmem_errmsg(db));
  std::string s = out;
  agentmem_free(out);
  return s;
}

int64_t Import(agentmem_db* db, const std::string& jsonl) {
  int64_t added = -1;
  int rc = agentmem_import(db, jsonl.c_str(), &added);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, agentmem_errmsg(db));
  return added;
}

nlohmann::json Profile(agentmem_db* db, const char* user) {
  char* out = nullptr;
  int rc = agentmem_profile(db, user, &out);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, agentmem_errmsg(db));
  nlohmann::json j = nlohmann::json::parse(out);
  agentmem_free(out);
  return j;
}

int Tokens(const std::string& text) { return static_cast<int>((text.size() + 3) / 4); }

// "2022-12-17T11:01:00" as unix microseconds (UTC).
int64_t Micros(const std::string& iso) {
  std::tm tm{};
  REQUIRE(strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) != nullptr);
  return static_cast<int64_t>(timegm(&tm)) * 1000000;
}

// The first LoCoMo conversation, remembered as user `user` (one session per
// LoCoMo session, the speaker as role); returns the episode ids. Empty when
// the shared data is absent.
std::vector<int64_t> LoadConversation(agentmem_db* db, const char* user) {
  std::vector<int64_t> ids;
  if (kData.empty()) return ids;
  std::string conv;
  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  for (const nlohmann::json& row : agentmem::test::ReadJsonLines(kData + "/locomo/episodes.jsonl")) {
    if (conv.empty()) conv = row["conv_id"].get<std::string>();
    if (row["conv_id"] != conv) break;
    std::string session = "session " + std::to_string(row["session"].get<int>());
    std::string meta = nlohmann::json{{"turn_id", row["turn_id"]}}.dump();
    ids.push_back(Remember(db, user, session.c_str(), row["speaker"].get<std::string>().c_str(),
                           agentmem::test::TextField(row, "text"),
                           Micros(row["ts"].get<std::string>()), meta.c_str()));
  }
  REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
  return ids;
}

// Blocks (with history), facts (current, superseded by time, repeated) about
// the conversation's people.
void AddBlocksAndFacts(agentmem_db* db, const char* user, const std::vector<int64_t>& ids) {
  Block(db, user, "persona", "You are a helpful assistant who remembers Maria and John.", 0);
  Block(db, user, "persona", "You are a warm assistant who remembers Maria and John well.", 0);
  Block(db, user, "goals", "Help John plan his community projects.", 1, 200);
  Block(db, user, "scratch", "not pinned: never in the context", -1);
  Block(db, user, "style", std::string(400, 'x'), 2);
  int64_t a = ids.empty() ? 0 : ids[0], b = ids.size() > 2 ? ids[2] : a;
  std::vector<int64_t> src = ids.empty() ? std::vector<int64_t>{} : std::vector<int64_t>{a, b};
  Fact(db, user, "Maria", "volunteers_at", "homeless shelter", 0.9, src);
  Fact(db, user, "John", "went_on", "family road trip", 0.7, src);
  Fact(db, user, "John", "works_on", "community projects", 0.8);
  Fact(db, user, "Maria", "volunteers_at", "homeless shelter", 0.6);  // the same s/p/o again
  Fact(db, user, "Maria", "lived_in", "Old Town", 1.0, {}, 1000, 2000);  // no longer valid
}

// The export of a small memory of `user`: two episodes (one with metadata),
// blocks with history, facts with sources.
std::string SmallExport(const char* user) {
  agentmem_db* db = Open(":memory:");
  std::vector<int64_t> ids;
  ids.push_back(Remember(db, user, "s1", "user", "I moved to Osaka in May", 0, "{\"a\":[1,2]}"));
  ids.push_back(Remember(db, user, "s2", "assistant", "Noted: Osaka, since May"));
  AddBlocksAndFacts(db, user, ids);
  std::string jsonl = Export(db, user);
  agentmem_close(db);
  return jsonl;
}

void CheckContext(const std::vector<Item>& items, int budget) {
  int sum = 0;
  std::set<std::pair<int, int64_t>> seen;
  std::set<std::string> fact_texts, block_names;
  int last_kind = 0;
  for (const Item& it : items) {
    sum += it.tokens;
    CHECK(it.tokens == Tokens(it.text));
    CHECK(it.kind >= last_kind);  // blocks, then facts, then episodes
    last_kind = it.kind;
    CHECK_MESSAGE(seen.insert({it.kind, it.id}).second, "repeated item ", it.kind, "/", it.id);
    if (it.kind == AGENTMEM_CONTEXT_FACT) CHECK(fact_texts.insert(it.text).second);
    if (it.kind == AGENTMEM_CONTEXT_BLOCK) CHECK(block_names.insert(it.name).second);
    CHECK(!it.reason.empty());
  }
  CHECK_MESSAGE(sum <= budget, "budget ", budget, " exceeded: ", sum);
}

// An engine-level file in memory with a test clock, for tests that need
// engine calls the C API does not have (single-valued predicates, forget).
struct EngineFile {
  explicit EngineFile(uint64_t salt) {
    opts = agentmem::test::TestOptionsFor(env.get(), &clock, agentmem::engine::SyncMode::kOff,
                                          salt, 8);
  }
  std::unique_ptr<agentmem::engine::Database> Open(const char* name) {
    return agentmem::test::MustOpen(name, opts);
  }
  // Remembers one episode and moves the clock on.
  uint64_t Remember(agentmem::engine::Database* db, const char* user, const char* text) {
    agentmem::format::EpisodeRecord e;
    e.user_id = user;
    e.text = text;
    uint64_t id = 0;
    REQUIRE(db->Remember(e, &id).ok());
    clock.Tick();
    return id;
  }
  std::unique_ptr<agentmem::engine::Env> env = agentmem::engine::NewMemEnv();
  agentmem::test::TestClock clock;
  agentmem::engine::Options opts;
};

}  // namespace

TEST_CASE("context assembly gives pinned blocks, then current facts, then recalled episodes, each with its reason") {
  agentmem_db* db = Open(":memory:");
  int64_t e1 = Remember(db, "alice", "s1", "user", "I adopted a cat named Miso last spring");
  Remember(db, "alice", "s1", "user", "The weather was rainy all week");
  Remember(db, "bob", "s1", "user", "Bob has a cat too");
  Block(db, "alice", "persona", "Friendly assistant", 1);
  Block(db, "alice", "human", "Alice, a designer", 0);
  Block(db, "alice", "notes", "unpinned", -1);
  int64_t f1 = Fact(db, "alice", "Alice", "has_pet", "cat Miso", 0.9, {e1});
  int64_t f2 = Fact(db, "alice", "Alice", "works_as", "designer", 0.95);
  Fact(db, "bob", "Bob", "has_pet", "cat", 1.0);

  std::vector<Item> items = Context(db, "alice", "cat", 10000);
  REQUIRE(items.size() >= 5);
  CHECK(items[0].kind == AGENTMEM_CONTEXT_BLOCK);
  CHECK(items[0].name == "human");
  CHECK(items[0].reason == "pinned block human");
  CHECK(items[1].name == "persona");
  CHECK(items[2].kind == AGENTMEM_CONTEXT_FACT);
  CHECK(items[2].id == f1);  // matches the query: ranked above the more confident fact
  CHECK(items[2].text == "Alice has_pet cat Miso");
  CHECK(items[2].reason == "current fact, bm25 rank 1");
  CHECK(items[3].id == f2);
  CHECK(items[3].reason == "current fact, confidence 0.95");
  CHECK(items[4].kind == AGENTMEM_CONTEXT_EPISODE);
  CHECK(items[4].id == e1);
  CHECK_MESSAGE(items[4].reason.rfind("recall rank 1: bm25 #1, vector #", 0) == 0, items[4].reason);
  for (const Item& it : items) {
    CHECK(it.text.find("Bob") == std::string::npos);
    CHECK(it.text != "unpinned");
  }
  CheckContext(items, 10000);
  agentmem_close(db);
}

TEST_CASE("an item that does not fit is skipped and a later smaller one still fits") {
  agentmem_db* db = Open(":memory:");
  Block(db, "u", "big", std::string(40, 'a'), 0);    // 10 tokens
  Block(db, "u", "small", std::string(8, 'b'), 1);   // 2 tokens
  Block(db, "u", "tiny", "c", 2);                    // 1 token
  std::vector<Item> items = Context(db, "u", "", 3);
  REQUIRE(items.size() == 2);
  CHECK(items[0].name == "small");
  CHECK(items[1].name == "tiny");
  CHECK(Context(db, "u", "", 0).empty());
  CHECK(Context(db, "u", "", 13).size() == 3);
  agentmem_context_item* raw = nullptr;
  int n = 7;
  CHECK(agentmem_context(db, "u", "", -1, &raw, &n) == AGENTMEM_RANGE);
  CHECK(raw == nullptr);
  CHECK(n == 0);
  CHECK(agentmem_context(db, nullptr, "", 5, &raw, &n) == AGENTMEM_MISUSE);
  agentmem_close(db);
}

TEST_CASE("context assembly includes no episode that does not match the query") {
  agentmem_db* db = Open(":memory:");
  for (int i = 0; i < 40; i++) {
    int64_t id = 0;
    std::string text = "we planted tomatoes in row " + std::to_string(i);
    REQUIRE(agentmem_remember(db, "u", "s", "user", text.c_str(), 0, nullptr, nullptr, 0, &id) ==
            AGENTMEM_OK);
  }
  Block(db, "u", "persona", "a gardener", 0);
  // Nothing matches: the pinned block alone, however large the budget.
  std::vector<Item> items = Context(db, "u", "zeppelin harbour", 100000);
  REQUIRE(items.size() == 1);
  CHECK(items[0].kind == AGENTMEM_CONTEXT_BLOCK);
  // A query that matches some gets those, each matched by a list.
  items = Context(db, "u", "tomatoes row 12", 100000);
  REQUIRE(items.size() > 1);
  CHECK(items[1].text == "we planted tomatoes in row 12");
  for (const Item& it : items) {
    if (it.kind == AGENTMEM_CONTEXT_EPISODE) CHECK(it.reason.find("bm25 -, vector -") == std::string::npos);
  }
  agentmem_close(db);
}

TEST_CASE("context assembly never exceeds the budget and never repeats an item") {
  if (kData.empty()) {
    MESSAGE("shared data absent: skipped");
    return;
  }
  agentmem_db* db = Open(":memory:");
  std::vector<int64_t> ids = LoadConversation(db, "conv");
  REQUIRE(ids.size() > 100);
  AddBlocksAndFacts(db, "conv", ids);
  std::vector<int> budgets;
  for (int b = 0; b <= 400; b++) budgets.push_back(b);
  for (int b = 450; b <= 20000; b = b * 5 / 4) budgets.push_back(b);
  budgets.push_back(1000000);
  for (const char* query : {"homeless shelter volunteering", "road trip with the family",
                            "what did John say about his job?", ""}) {
    for (int budget : budgets) {
      CAPTURE(query);
      CAPTURE(budget);
      CheckContext(Context(db, "conv", query, budget), budget);
    }
  }
  // A large budget holds every pinned block and every distinct current fact.
  std::vector<Item> all = Context(db, "conv", "homeless shelter", 1000000);
  std::set<std::string> blocks, facts;
  for (const Item& it : all) {
    if (it.kind == AGENTMEM_CONTEXT_BLOCK) blocks.insert(it.name);
    if (it.kind == AGENTMEM_CONTEXT_FACT) facts.insert(it.text);
  }
  CHECK(blocks == std::set<std::string>{"persona", "goals", "style"});
  CHECK(facts == std::set<std::string>{"Maria volunteers_at homeless shelter",
                                       "John went_on family road trip",
                                       "John works_on community projects"});
  CHECK(all[0].text == "You are a warm assistant who remembers Maria and John well.");
  CHECK(all.back().kind == AGENTMEM_CONTEXT_EPISODE);
  agentmem_close(db);
}

TEST_CASE("the profile counts a user's memory and lists the top current facts by confidence") {
  agentmem_db* db = Open(":memory:");
  Remember(db, "alice", "s1", "user", "hello", 5 * kDay);
  Remember(db, "alice", "s1", "assistant", "hi there", 6 * kDay);
  Remember(db, "alice", "s2", "user", "again", 9 * kDay);
  Remember(db, "bob", "s9", "user", "not alice", 1 * kDay);
  Block(db, "alice", "persona", "v1", 0);
  Block(db, "alice", "persona", "v2", 0);
  Block(db, "alice", "notes", "n", -1);
  Fact(db, "alice", "Alice", "likes", "tea", 0.5);
  Fact(db, "alice", "Alice", "lives_in", "Tokyo", 0.9);
  Fact(db, "alice", "Alice", "lived_in", "Kyoto", 1.0, {}, 1000, 2000);
  nlohmann::json p = Profile(db, "alice");
  CHECK(p["user_id"] == "alice");
  CHECK(p["episodes"] == 3);
  CHECK(p["sessions"] == 2);
  CHECK(p["roles"] == nlohmann::json{{"assistant", 1}, {"user", 2}});
  CHECK(p["first_ts"] == 5 * kDay);
  CHECK(p["last_ts"] == 9 * kDay);
  CHECK(p["blocks"] == 2);
  CHECK(p["pinned_blocks"] == 1);
  CHECK(p["block_versions"] == 3);
  CHECK(p["facts"] == 3);
  CHECK(p["current_facts"] == 2);
  REQUIRE(p["top_facts"].size() == 2);
  CHECK(p["top_facts"][0]["object"] == "Tokyo");
  CHECK(p["top_facts"][0]["confidence"] == 0.9);
  CHECK(p["top_facts"][1]["object"] == "tea");
  nlohmann::json empty = Profile(db, "nobody");
  CHECK(empty["episodes"] == 0);
  CHECK(empty["first_ts"].is_null());
  agentmem_close(db);
}

TEST_CASE("an import refuses integers out of range and fields of the wrong type, naming the line") {
  agentmem_db* db = Open(":memory:");
  std::string header = Export(db, "u");
  const char* bad[] = {
      "{\"type\":\"block\",\"user_id\":\"u\",\"name\":\"n\",\"value\":\"v\",\"limit\":-1,"
      "\"pinned_order\":0,\"updated_at\":5}",
      "{\"type\":\"block\",\"user_id\":\"u\",\"name\":\"n\",\"value\":\"v\",\"limit\":0,"
      "\"pinned_order\":4294967296,\"updated_at\":5}",
      "{\"type\":\"episode\",\"user_id\":\"u\",\"id\":-3,\"session_id\":\"\",\"role\":\"\","
      "\"ts\":1,\"created_at\":1,\"text\":\"t\",\"metadata\":\"\"}",
      "{\"type\":\"episode\",\"user_id\":\"u\",\"id\":3,\"session_id\":\"\",\"role\":\"\","
      "\"ts\":1,\"created_at\":1,\"text\":7,\"metadata\":\"\"}",
      "{\"type\":\"fact\",\"user_id\":\"u\",\"id\":1,\"subject\":\"s\",\"predicate\":\"p\","
      "\"object\":\"o\",\"confidence\":1,\"source_episode_ids\":5,\"valid_from\":1,"
      "\"valid_to\":null,\"recorded_at\":1,\"expired_at\":null}",
      "{\"type\":\"fact\",\"user_id\":\"u\",\"id\":1,\"subject\":\"s\",\"predicate\":\"p\","
      "\"object\":\"o\",\"confidence\":\"high\",\"source_episode_ids\":[],\"valid_from\":1,"
      "\"valid_to\":null,\"recorded_at\":1,\"expired_at\":null}",
  };
  for (const char* line : bad) {
    CAPTURE(line);
    std::string text = header + line + "\n";
    CHECK(agentmem_import(db, text.c_str(), nullptr) == AGENTMEM_MISMATCH_JSON);
    CHECK(std::string(agentmem_errmsg(db)).rfind("import line 2: ", 0) == 0);
  }
  agentmem_stats st{};
  REQUIRE(agentmem_stats_get(db, &st) == AGENTMEM_OK);
  CHECK(st.episodes + st.block_versions + st.facts == 0);
  agentmem_close(db);
}

// What the export and the profile were written with before engine/json/json_writer.h:
// nlohmann::ordered_json dumped compact. Parsing a line into an ordered_json
// and dumping it gives those bytes for the same values, keys and number kinds.
std::string NlohmannDump(const std::string& line) {
  using Ordered = nlohmann::ordered_json;
  return Ordered::parse(line).dump(-1, ' ', false, Ordered::error_handler_t::replace);
}

TEST_CASE("the export and the profile are byte for byte what nlohmann's ordered_json dump wrote") {
  agentmem_db* db = Open(":memory:");
  std::string tricky = std::string("quote \" backslash \\ tab\t nl\n cr\r bs\b ff\f ") +
                       "ctl \x01\x1f del \x7f résumé 日本 \xF0\x9F\x98\x80 </script>";
  std::vector<int64_t> ids;
  ids.push_back(Remember(db, "u", "s\"1", "user", tricky, -5, "{\"k\":\"v\\n\",\"n\":[1,2.5]}"));
  ids.push_back(Remember(db, "u", "s2", "assistant", "plain", INT64_MAX));
  Block(db, "u", "persona", tricky, 0);
  Block(db, "u", "notes", "unpinned", -1, 100);
  // Confidences that are stored as floats and written through a double;
  // 0.9682616 is one where Grisu2 (nlohmann) and the shortest form differ.
  Fact(db, "u", "user", "likes", tricky.c_str(), 0.9682616, ids);
  Fact(db, "u", "user", "lived_in", "Oslo", 1.0, {}, 1000, 2000);
  std::mt19937_64 rng(agentmem::test::Seed());
  for (int i = 0; i < 40; i++) {
    std::string predicate = std::to_string(i);
    Fact(db, "u", "user", predicate.c_str(), "o",
         std::uniform_real_distribution<double>(0, 1)(rng));
  }
  std::string jsonl = Export(db, "u");
  size_t lines = 0;
  for (size_t at = 0; at < jsonl.size(); lines++) {
    size_t nl = jsonl.find('\n', at);
    REQUIRE(nl != std::string::npos);
    std::string line = jsonl.substr(at, nl - at);
    CHECK(line == NlohmannDump(line));
    at = nl + 1;
  }
  CHECK(lines == 1 + 2 + 2 + 42);
  char* profile = nullptr;
  REQUIRE(agentmem_profile(db, "u", &profile) == AGENTMEM_OK);
  CHECK(std::string(profile) == NlohmannDump(profile));
  agentmem_free(profile);
  agentmem_close(db);
}

TEST_CASE("an import names a missing field, takes the last of a repeated key, and refuses nested values where a scalar belongs") {
  agentmem_db* db = Open(":memory:");
  std::string header = Export(db, "u");
  std::string episode =
      "{\"type\":\"episode\",\"user_id\":\"u\",\"id\":3,\"session_id\":\"\",\"role\":\"\","
      "\"ts\":1,\"created_at\":1,\"metadata\":\"\"";
  std::string text = header + episode + "}\n";
  CHECK(agentmem_import(db, text.c_str(), nullptr) == AGENTMEM_MISMATCH_JSON);
  CHECK(std::string(agentmem_errmsg(db)) == "import line 2: \"text\" is missing");
  text = header + episode + ",\"text\":[\"t\"]}\n";
  CHECK(agentmem_import(db, text.c_str(), nullptr) == AGENTMEM_MISMATCH_JSON);
  CHECK(std::string(agentmem_errmsg(db)) == "import line 2: \"text\" must be a string");
  text = header + "[1]\n";
  CHECK(agentmem_import(db, text.c_str(), nullptr) == AGENTMEM_MISMATCH_JSON);
  CHECK(std::string(agentmem_errmsg(db)) == "import line 2: not a JSON object");
  std::string fact =
      "{\"type\":\"fact\",\"user_id\":\"u\",\"id\":1,\"subject\":\"s\",\"predicate\":\"p\","
      "\"object\":\"o\",\"confidence\":1,\"source_episode_ids\":[[3]],\"valid_from\":1,"
      "\"valid_to\":null,\"recorded_at\":1,\"expired_at\":null}";
  text = header + fact + "\n";
  CHECK(agentmem_import(db, text.c_str(), nullptr) == AGENTMEM_MISMATCH_JSON);
  CHECK(std::string(agentmem_errmsg(db)) ==
        "import line 2: \"source_episode_ids\" must be an integer in range");
  // A key given twice counts with its last value, as nlohmann's trees kept it.
  text = header + episode + ",\"text\":7,\"text\":\"the last\"}\n";
  CHECK(Import(db, text) == 1);
  agentmem_episode* ep = nullptr;
  REQUIRE(agentmem_episode_get(db, 3, &ep) == AGENTMEM_OK);
  CHECK(std::string(ep->text) == "the last");
  agentmem_free(ep);
  agentmem_close(db);
}

TEST_CASE("export then import into a new file then export gives byte-identical JSONL") {
  TempDir dir;
  agentmem_db* a = Open(dir.File("a.agentmem"));
  std::vector<int64_t> ids = LoadConversation(a, "conv");
  if (ids.empty()) ids.push_back(Remember(a, "conv", "s", "user", "a turn", 0, "{\"k\":1}"));
  AddBlocksAndFacts(a, "conv", ids);
  Remember(a, "other", "s", "user", "another user's turn");
  std::string first = Export(a, "conv");
  CHECK(first.find("another user") == std::string::npos);
  agentmem_close(a);

  agentmem_db* b = Open(dir.File("b.agentmem"));
  int64_t lines = 0;
  for (char c : first) lines += c == '\n';
  CHECK(Import(b, first) == lines - 1);  // every line but the header adds a record
  std::string second = Export(b, "conv");
  CHECK(second.size() == first.size());
  CHECK(second == first);
  agentmem_close(b);
  // And after reopening (the records as read back from the file).
  b = Open(dir.File("b.agentmem"));
  CHECK(Export(b, "conv") == first);
  agentmem_close(b);
}

TEST_CASE("an export imports into a file of any vector type, which stores the vectors its own way") {
  TempDir dir;
  const std::vector<std::string> types = {"f32", "f16", "int8"};
  // An application's vector (in the export as it is stored) and the
  // built-in embedder's (left out, and computed again by the importing file).
  std::vector<float> own;
  std::vector<float> computed;  // the built-in vector of `text` in a float32 file
  const char* text = "we adopted a puppy from the shelter";
  for (const std::string& from : types) {
    CAPTURE(from);
    agentmem_db* a = Open(dir.File(from + ".agentmem"), ("vector_type=" + from).c_str());
    int64_t id = 0, given_id = 0;
    REQUIRE(agentmem_remember(a, "u", "s", "user", text, 0, nullptr, nullptr, 0, &id) == 0);
    own.resize(VectorOf(a, id).size());
    for (size_t i = 0; i < own.size(); i++) own[i] = std::sin(0.37f * static_cast<float>(i + 1));
    REQUIRE(agentmem_remember(a, "u", "s", "user", "the lake was frozen in January", 0, nullptr,
                              own.data(), static_cast<int>(own.size()), &given_id) == 0);
    const std::string jsonl = Export(a, "u");
    if (from == "f32") computed = VectorOf(a, id);
    const std::vector<float> given = VectorOf(a, given_id);
    agentmem_close(a);
    for (const std::string& to : types) {
      CAPTURE(to);
      agentmem_db* b = Open(dir.File(from + "-" + to + ".agentmem"), ("vector_type=" + to).c_str());
      CHECK(Import(b, jsonl) == 2);
      CHECK(Import(b, jsonl) == 0);  // present as this file stores it
      if (to == from) CHECK(Export(b, "u") == jsonl);
      std::vector<float> expect_computed = computed, expect_given = given;
      if (to == "f16") {
        for (float& x : expect_computed) x = agentmem::format::RoundToHalf(x);
        for (float& x : expect_given) x = agentmem::format::RoundToHalf(x);
      }
      if (to != "int8") {
        CHECK(VectorOf(b, id) == expect_computed);
        CHECK(VectorOf(b, given_id) == expect_given);
      }
      agentmem_close(b);
    }
  }
}

TEST_CASE("an export of a float16 or int8 file leaves out the vectors the file computes from the text") {
  TempDir dir;
  for (const char* type : {"f32", "f16", "int8"}) {
    CAPTURE(type);
    agentmem_db* a = Open(dir.File(std::string(type) + ".agentmem"),
                          (std::string("vector_type=") + type).c_str());
    Remember(a, "u", "s", "user", "we adopted a puppy from the shelter");
    const std::string jsonl = Export(a, "u");
    CHECK(jsonl.find("puppy") != std::string::npos);
    CHECK(jsonl.find("\"embedding\"") == std::string::npos);
    agentmem_close(a);
    agentmem_db* b = Open(dir.File(std::string(type) + "-copy.agentmem"),
                          (std::string("vector_type=") + type).c_str());
    CHECK(Import(b, jsonl) == 1);
    CHECK(Export(b, "u") == jsonl);
    agentmem_close(b);
  }
}

TEST_CASE("episodes imported without their vectors into a float16 or int8 file are present on a second import") {
  TempDir dir;
  agentmem_db* a = Open(dir.File("a.agentmem"), "vector_type=f32");
  Remember(a, "u", "s", "user", "we adopted a puppy from the shelter");
  Remember(a, "u", "s", "user", "the lake was frozen in January");
  std::string jsonl = Export(a, "u");
  agentmem_close(a);
  const std::regex embedding(",\"embedding\":\"[^\"]*\"");
  jsonl = std::regex_replace(jsonl, embedding, "");
  REQUIRE(jsonl.find("embedding") == std::string::npos);
  for (const char* type : {"f16", "int8"}) {
    CAPTURE(type);
    agentmem_db* b = Open(dir.File(std::string(type) + ".agentmem"),
                          (std::string("vector_type=") + type).c_str());
    CHECK(Import(b, jsonl) == 2);  // each vector computed from its text, then rounded
    CHECK(Import(b, jsonl) == 0);
    agentmem_close(b);
  }
}

TEST_CASE("importing the same JSONL twice adds nothing the second time") {
  std::string jsonl = SmallExport("u");

  agentmem_db* b = Open(":memory:");
  int64_t first = Import(b, jsonl);
  CHECK(first > 0);
  agentmem_stats before{};
  REQUIRE(agentmem_stats_get(b, &before) == AGENTMEM_OK);
  CHECK(Import(b, jsonl) == 0);
  CHECK(Import(b, jsonl + jsonl) == 0);  // concatenated exports: still nothing new
  agentmem_stats after{};
  REQUIRE(agentmem_stats_get(b, &after) == AGENTMEM_OK);
  CHECK(after.episodes == before.episodes);
  CHECK(after.block_versions == before.block_versions);
  CHECK(after.facts == before.facts);
  CHECK(after.commits == before.commits);  // nothing to write: no transaction at all
  CHECK(Export(b, "u") == jsonl);
  agentmem_close(b);
}

TEST_CASE("an import that meets a conflicting record or a malformed line writes nothing") {
  agentmem_db* a = Open(":memory:");
  Remember(a, "u", "s1", "user", "original text");
  Block(a, "u", "persona", "p", 0);
  std::string jsonl = Export(a, "u");
  agentmem_close(a);

  agentmem_db* b = Open(":memory:");
  REQUIRE(Import(b, jsonl) == 2);
  std::string changed = jsonl;
  size_t at = changed.find("original text");
  REQUIRE(at != std::string::npos);
  changed.replace(at, 8, "changed!");
  changed += "{\"type\":\"block\",\"user_id\":\"u\",\"name\":\"new\",\"value\":\"v\",\"limit\":0,"
             "\"pinned_order\":-1,\"updated_at\":5}\n";
  int64_t added = -1;
  CHECK(agentmem_import(b, changed.c_str(), &added) == AGENTMEM_CONSTRAINT);
  CHECK(std::string(agentmem_errmsg(b)).find("exists with different content") !=
        std::string::npos);
  CHECK(added == -1);
  agentmem_block* blk = nullptr;
  CHECK(agentmem_block_get(b, "u", "new", &blk) == AGENTMEM_NOTFOUND);

  std::string broken = jsonl + "{\"type\":\"fact\",\"user_id\":\"u\"}\n";
  CHECK(agentmem_import(b, broken.c_str(), nullptr) == AGENTMEM_MISMATCH_JSON);
  CHECK(std::string(agentmem_errmsg(b)).find("import line 4") != std::string::npos);
  CHECK(agentmem_import(b, "not json\n", nullptr) == AGENTMEM_MISMATCH_JSON);
  std::string headless = jsonl.substr(jsonl.find('\n') + 1);
  CHECK(agentmem_import(b, headless.c_str(), nullptr) == AGENTMEM_MISMATCH_JSON);
  agentmem_stats st{};
  REQUIRE(agentmem_stats_get(b, &st) == AGENTMEM_OK);
  CHECK(st.block_versions == 1);
  agentmem_close(b);
}

TEST_CASE("an export is refused by a file of another vector space, and external vectors travel as base64") {
  agentmem_db* ext = Open(":memory:", "vector_dim=4&embedder=my-model");
  const float v[4] = {0.5f, -0.25f, 1e-7f, 3.0f};
  int64_t id = 0;
  REQUIRE(agentmem_remember(ext, "u", "s", "user", "with a vector", 0, nullptr, v, 4, &id) ==
          AGENTMEM_OK);
  Remember(ext, "u", "s", "user", "without a vector");
  std::string jsonl = Export(ext, "u");
  CHECK(jsonl.find("\"embedding\":\"") != std::string::npos);
  agentmem_close(ext);

  agentmem_db* other = Open(":memory:");  // the built-in embedder, 384 dimensions
  CHECK(agentmem_import(other, jsonl.c_str(), nullptr) == AGENTMEM_MISMATCH);
  agentmem_close(other);

  agentmem_db* same = Open(":memory:", "vector_dim=4&embedder=my-model");
  CHECK(Import(same, jsonl) == 2);
  agentmem_episode* ep = nullptr;
  REQUIRE(agentmem_episode_get(same, id, &ep) == AGENTMEM_OK);
  REQUIRE(ep->dim == 4);
  CHECK(std::memcmp(ep->vector, v, sizeof v) == 0);
  agentmem_free(ep);
  CHECK(Export(same, "u") == jsonl);
  // Without the built-in embedder, recall for the context is lexical only.
  std::vector<Item> items = Context(same, "u", "without", 100);
  REQUIRE(items.size() == 1);
  CHECK(items[0].text == "without a vector");
  CHECK(items[0].reason == "recall rank 1: bm25 #1, vector -");
  agentmem_close(same);
}

TEST_CASE("a superseded fact keeps both time axes through export and import, and only the current one is in the context") {
  namespace eng = agentmem::engine;
  namespace fmt = agentmem::format;
  EngineFile file(7);
  auto& clock = file.clock;
  auto a = file.Open("a");
  REQUIRE(a->DeclarePredicate("lives_in", true).ok());
  auto remember = [&](const char* text) { return file.Remember(a.get(), "alice", text); };
  auto assert_fact = [&](const char* object, uint64_t source) {
    fmt::FactRecord f;
    f.user_id = "alice";
    f.subject = "Alice";
    f.predicate = "lives_in";
    f.object = object;
    f.confidence = 0.8f;
    f.source_episode_ids = {source};
    f.valid_from = clock.now;
    uint64_t id = 0;
    REQUIRE(a->AssertFact(f, &id).ok());
    clock.Tick();
    return id;
  };
  assert_fact("Tokyo", remember("I live in Tokyo"));
  uint64_t told = remember("I moved to Osaka");
  int64_t moved = clock.now;
  assert_fact("Osaka", told);

  std::vector<eng::ContextItem> items;
  REQUIRE(eng::AssembleContext(a.get(), "alice", "where does Alice live", 1000, &items).ok());
  std::vector<std::string> facts;
  for (const eng::ContextItem& it : items) {
    if (it.kind == eng::ContextKind::kFact) facts.push_back(it.text);
  }
  CHECK(facts == std::vector<std::string>{"Alice lives_in Osaka"});

  std::string exported;
  REQUIRE(eng::ExportUser(a.get(), "alice", &exported).ok());
  CHECK(exported.find("\"object\":\"Tokyo\"") != std::string::npos);
  CHECK(exported.find("\"valid_to\":" + std::to_string(moved)) != std::string::npos);
  CHECK(exported.find("\"expired_at\":" + std::to_string(moved)) != std::string::npos);

  auto b = file.Open("b");
  eng::ImportCounts counts;
  REQUIRE(eng::ImportJsonl(b.get(), exported, &counts).ok());
  CHECK(counts.episodes == 2);
  CHECK(counts.facts >= 2);
  std::string again;
  REQUIRE(eng::ExportUser(b.get(), "alice", &again).ok());
  CHECK(again == exported);
  REQUIRE(eng::ImportJsonl(b.get(), exported, &counts).ok());
  CHECK(counts.added() == 0);
  std::string profile;
  REQUIRE(eng::ProfileJson(b.get(), "alice", &profile).ok());
  nlohmann::json p = nlohmann::json::parse(profile);
  CHECK(p["current_facts"] == 1);
  CHECK(p["top_facts"][0]["object"] == "Osaka");
}

TEST_CASE("a purged user is in no export, context or profile, and another user's export is unchanged") {
  namespace eng = agentmem::engine;
  namespace fmt = agentmem::format;
  EngineFile file(9);
  auto db = file.Open("f");
  auto remember = [&](const char* user, const char* text) {
    return file.Remember(db.get(), user, text);
  };
  remember("alice", "Alice likes green tea");
  uint64_t b1 = remember("bob", "Bob keeps a secret diary under the floorboards");
  remember("alice", "Alice visited Kyoto");
  fmt::BlockRecord blk;
  blk.user_id = "bob";
  blk.name = "persona";
  blk.value = "Bob's private persona";
  blk.pinned_order = 0;
  REQUIRE(db->SetBlock(blk).ok());
  fmt::FactRecord f;
  f.user_id = "bob";
  f.subject = "Bob";
  f.predicate = "hides";
  f.object = "diary";
  f.source_episode_ids = {b1};
  uint64_t fid = 0;
  REQUIRE(db->AssertFact(f, &fid).ok());
  std::string alice_before, bob_before;
  REQUIRE(eng::ExportUser(db.get(), "alice", &alice_before).ok());
  REQUIRE(eng::ExportUser(db.get(), "bob", &bob_before).ok());

  fmt::ForgetRecord forget;
  forget.kind = fmt::ForgetKind::kUser;
  forget.user_id = "bob";
  eng::ForgetReceipt receipt;
  agentmem::Status purged = db->Purge(forget, &receipt);
  REQUIRE_MESSAGE(purged.ok(), purged.ToString());
  CHECK(receipt.residue == 0);

  std::string bob_after, alice_after;
  REQUIRE(eng::ExportUser(db.get(), "bob", &bob_after).ok());
  CHECK(bob_after == bob_before.substr(0, bob_before.find('\n') + 1));  // the header alone
  REQUIRE(eng::ExportUser(db.get(), "alice", &alice_after).ok());
  CHECK(alice_after == alice_before);
  std::vector<eng::ContextItem> items;
  REQUIRE(eng::AssembleContext(db.get(), "bob", "secret diary", 100000, &items).ok());
  CHECK(items.empty());
  std::string profile;
  REQUIRE(eng::ProfileJson(db.get(), "bob", &profile).ok());
  nlohmann::json p = nlohmann::json::parse(profile);
  CHECK(p["episodes"] == 0);
  CHECK(p["blocks"] == 0);
  CHECK(p["facts"] == 0);
  // Bob's old export cannot come back under the ids it had: they are gone.
  eng::ImportCounts counts;
  agentmem::Status s = eng::ImportJsonl(db.get(), bob_before, &counts);
  CHECK(s.code() == agentmem::kConstraint);
  CHECK(s.message().find("below this file's next id") != std::string::npos);
}

// A fact superseded in the transaction that asserted it has an empty
// transaction-time range, [t, t), which AssertFact writes and ImportFact takes.
TEST_CASE("a fact asserted and superseded in one transaction survives export and import") {
  namespace eng = agentmem::engine;
  namespace fmt = agentmem::format;
  EngineFile file(11);
  auto a = file.Open("a");
  REQUIRE(a->DeclarePredicate("lives_in", true).ok());
  REQUIRE(a->Begin().ok());
  for (const char* city : {"Tokyo", "Osaka"}) {
    fmt::FactRecord f;
    f.user_id = "alice";
    f.subject = "Alice";
    f.predicate = "lives_in";
    f.object = city;
    uint64_t id = 0;
    REQUIRE(a->AssertFact(f, &id).ok());
  }
  REQUIRE(a->Commit().ok());
  std::string exported;
  REQUIRE(eng::ExportUser(a.get(), "alice", &exported).ok());
  auto b = file.Open("b");
  eng::ImportCounts counts;
  agentmem::Status s = eng::ImportJsonl(b.get(), exported, &counts);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  std::string again;
  REQUIRE(eng::ExportUser(b.get(), "alice", &again).ok());
  CHECK(again == exported);
}

TEST_CASE("an import of a damaged export fails cleanly or imports, and the handle stays usable") {
  std::string jsonl = SmallExport("u");
  std::mt19937_64 rng(agentmem::test::Seed());
  int ok = 0, refused = 0;
  for (int round = 0; round < 300; round++) {
    std::string text = jsonl;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); e++) {
      size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0: text[at] = static_cast<char>(rng() % 256); break;          // a byte changed
        case 1: text.erase(at, 1 + rng() % 40); break;                      // bytes cut out
        case 2: text.insert(at, text.substr(rng() % text.size(), 30)); break;  // bytes repeated
        default: text.resize(at); break;                                    // truncated
      }
    }
    agentmem_db* db = Open(":memory:");
    int rc = agentmem_import(db, text.c_str(), nullptr);
    CAPTURE(round);
    CHECK(rc != AGENTMEM_INTERNAL);
    CHECK(rc != AGENTMEM_NOMEM);
    (rc == AGENTMEM_OK ? ok : refused)++;
    // Not poisoned: the handle still writes and reads.
    int64_t id = 0;
    CHECK(agentmem_remember(db, "v", "s", "user", "after the import", 0, nullptr, nullptr, 0,
                            &id) == AGENTMEM_OK);
    CHECK(Export(db, "v").find("after the import") != std::string::npos);
    agentmem_close(db);
  }
  MESSAGE("damaged imports: ", ok, " imported, ", refused, " refused");
  CHECK(refused > 0);
}

TEST_CASE("re-importing an export taken before a fact was superseded adds nothing and keeps the later state") {
  namespace eng = agentmem::engine;
  namespace fmt = agentmem::format;
  EngineFile file(13);
  auto db = file.Open("a");
  REQUIRE(db->DeclarePredicate("lives_in", true).ok());
  auto assert_fact = [&](const char* object) {
    fmt::FactRecord f;
    f.user_id = "alice";
    f.subject = "Alice";
    f.predicate = "lives_in";
    f.object = object;
    uint64_t id = 0;
    REQUIRE(db->AssertFact(f, &id).ok());
    file.clock.Tick();
    return id;
  };
  uint64_t tokyo = assert_fact("Tokyo");
  std::string before;
  REQUIRE(eng::ExportUser(db.get(), "alice", &before).ok());
  assert_fact("Osaka");
  std::string after;
  REQUIRE(eng::ExportUser(db.get(), "alice", &after).ok());
  eng::ImportCounts counts;
  REQUIRE(eng::ImportJsonl(db.get(), before, &counts).ok());
  CHECK(counts.added() == 0);
  CHECK(counts.skipped == 1);
  std::string again;
  REQUIRE(eng::ExportUser(db.get(), "alice", &again).ok());
  CHECK(again == after);
  // The other way round -- the file knows an older state than the export --
  // cannot be written over, and is refused.
  auto fresh = file.Open("b");
  REQUIRE(eng::ImportJsonl(fresh.get(), before, &counts).ok());
  agentmem::Status s = eng::ImportJsonl(fresh.get(), after, &counts);
  CHECK(s.code() == agentmem::kConstraint);
  CHECK(s.message().find("fact " + std::to_string(tokyo) + " exists with different content") !=
        std::string::npos);
}

TEST_CASE("an import with new ids merges a user into a file whose ids moved on, once") {
  std::string jsonl = SmallExport("alice");

  agentmem_db* b = Open(":memory:");
  for (int i = 0; i < 5; i++) Remember(b, "bob", "s", "user", "bob " + std::to_string(i));
  Fact(b, "bob", "Bob", "likes", "tea", 1.0);
  CHECK(agentmem_import(b, jsonl.c_str(), nullptr) == AGENTMEM_CONSTRAINT);  // ids taken
  int64_t added = 0;
  REQUIRE(agentmem_import_v2(b, jsonl.c_str(), AGENTMEM_IMPORT_NEW_IDS, &added) == AGENTMEM_OK);
  CHECK(added > 0);
  REQUIRE(agentmem_import_v2(b, jsonl.c_str(), AGENTMEM_IMPORT_NEW_IDS, &added) == AGENTMEM_OK);
  CHECK(added == 0);
  // Same memory, other ids: the export differs only in ids, and the sources
  // follow their episodes.
  std::string merged = Export(b, "alice");
  auto lines = [](const std::string& text) {
    std::vector<nlohmann::json> out;
    size_t at = 0, nl;
    while ((nl = text.find('\n', at)) != std::string::npos) {
      out.push_back(nlohmann::json::parse(text.substr(at, nl - at)));
      at = nl + 1;
    }
    return out;
  };
  std::vector<nlohmann::json> want = lines(jsonl), got = lines(merged);
  REQUIRE(got.size() == want.size());
  std::map<int64_t, int64_t> renumbered;
  for (size_t i = 0; i < got.size(); i++) {
    if (want[i]["type"] == "episode") {
      CHECK(got[i]["id"] != want[i]["id"]);
      renumbered[want[i]["id"].get<int64_t>()] = got[i]["id"].get<int64_t>();
    }
    if (want[i]["type"] == "fact") {
      for (auto& s : want[i]["source_episode_ids"]) s = renumbered.at(s.get<int64_t>());
    }
    for (const char* key : {"episode", "fact"}) {
      if (want[i]["type"] == key) {
        want[i].erase("id");
        got[i].erase("id");
      }
    }
    // This file's own next ids and block version numbers.
    for (const char* key : {"next_episode_id", "next_fact_id", "next_block_version", "version"}) {
      if (want[i]["type"] != "agentmem-export" || std::string(key) != "version") {
        want[i].erase(key);
        got[i].erase(key);
      }
    }
    CHECK(got[i] == want[i]);
  }
  CHECK(agentmem_import_v2(b, jsonl.c_str(), 0x10, nullptr) == AGENTMEM_MISUSE);
  agentmem_close(b);
}

TEST_CASE("metadata is exported as the JSON value it is, or as metadata_text when it cannot sit in one line, and reads back byte for byte") {
  agentmem_db* a = Open(":memory:");
  const char* metas[] = {"{\"a\": 1,  \"b\" :[1, 2.50]}", " {\"lead\":1}", "{\"c\":\n3}",
                         "[1, \"x\"]", "\"text\"", "null", "7", nullptr};
  std::vector<int64_t> ids;
  for (const char* m : metas) ids.push_back(Remember(a, "u", "s", "user", "turn", 5, m));
  std::string jsonl = Export(a, nullptr);
  CHECK(jsonl.find(R"("metadata":{"a": 1,  "b" :[1, 2.50]})") != std::string::npos);
  CHECK(jsonl.find(R"("metadata_text":" {\"lead\":1}")") != std::string::npos);
  CHECK(jsonl.find(R"("metadata_text":"{\"c\":\n3}")") != std::string::npos);
  CHECK(jsonl.find(R"("metadata":[1, "x"])") != std::string::npos);
  CHECK(jsonl.find(R"("metadata":"text")") != std::string::npos);
  CHECK(jsonl.find(R"("metadata":null)") != std::string::npos);
  CHECK(jsonl.find(R"("metadata":7)") != std::string::npos);
  agentmem_db* b = Open(":memory:");
  CHECK(Import(b, jsonl) == 7 + 1);
  CHECK(Import(b, jsonl) == 0);
  CHECK(Export(b, nullptr) == jsonl);
  for (size_t i = 0; i < ids.size(); i++) {
    agentmem_episode* e = nullptr;
    REQUIRE(agentmem_episode_get(b, ids[i], &e) == AGENTMEM_OK);
    CHECK(std::string(e->metadata) == (metas[i] ? metas[i] : ""));
    agentmem_free(e);
  }
  // Both forms at once are refused.
  std::string both = jsonl.substr(0, jsonl.find('\n') + 1) +
                     R"({"type":"episode","user_id":"u","id":99,"session_id":"","role":"",)"
                     R"("ts":1,"created_at":1,"text":"t","metadata":{},"metadata_text":"{}"})"
                     "\n";
  CHECK(agentmem_import(b, both.c_str(), nullptr) == AGENTMEM_MISMATCH_JSON);
  agentmem_close(a);
  agentmem_close(b);
}

TEST_CASE("a restored backup keeps the next ids and does not count the ids of forgotten records as forgotten in the file") {
  agentmem_db* a = Open(":memory:");
  REQUIRE(agentmem_begin(a) == AGENTMEM_OK);
  for (int i = 0; i < 1000; i++) Remember(a, "old", "s", "user", "old turn " + std::to_string(i));
  REQUIRE(agentmem_commit(a) == AGENTMEM_OK);
  int64_t kept = Remember(a, "new", "s", "user", "the one kept");
  REQUIRE(agentmem_forget(a, "old", nullptr, 0, 0, nullptr) == AGENTMEM_OK);
  std::string backup = Export(a, nullptr);
  CHECK(backup.find("\"next_episode_id\":1002") != std::string::npos);
  agentmem_close(a);

  TempDir dir;
  agentmem_db* b = Open(dir.File("b.agentmem"));
  CHECK(Import(b, backup) == 1);
  agentmem_stats before{};
  REQUIRE(agentmem_stats_get(b, &before) == AGENTMEM_OK);
  REQUIRE(agentmem_close(b) == AGENTMEM_OK);  // auto_vacuum would rewrite the file here
  b = Open(dir.File("b.agentmem"));
  agentmem_stats after{};
  REQUIRE(agentmem_stats_get(b, &after) == AGENTMEM_OK);
  CHECK(after.commits == before.commits);  // not rewritten: 1,000 ids are gaps, not records
  CHECK(Export(b, nullptr) == backup);
  CHECK(Remember(b, "new", "s", "user", "next") == kept + 1);
  agentmem_close(b);
}

TEST_CASE("an import refuses a time of 0, which would not read back as it was written") {
  agentmem_db* db = Open(":memory:");
  std::string header = Export(db, nullptr);
  const char* lines[] = {
      R"({"type":"episode","user_id":"u","id":3,"session_id":"","role":"","ts":0,"created_at":6,"text":"t"})",
      R"({"type":"episode","user_id":"u","id":3,"session_id":"","role":"","ts":5,"created_at":0,"text":"t"})",
      R"({"type":"block","user_id":"u","name":"n","version":1,"value":"v","limit":0,"pinned_order":-1,"updated_at":0})",
      R"({"type":"fact","user_id":"u","id":1,"subject":"s","predicate":"p","object":"o","confidence":1,"source_episode_ids":[],"valid_from":0,"valid_to":null,"recorded_at":1,"expired_at":null})",
      R"({"type":"fact","user_id":"u","id":1,"subject":"s","predicate":"p","object":"o","confidence":1,"source_episode_ids":[],"valid_from":1,"valid_to":0,"recorded_at":1,"expired_at":null})",
      R"({"type":"fact","user_id":"u","id":1,"subject":"s","predicate":"p","object":"o","confidence":1,"source_episode_ids":[],"valid_from":1,"valid_to":null,"recorded_at":0,"expired_at":null})",
      R"({"type":"fact","user_id":"u","id":1,"subject":"s","predicate":"p","object":"o","confidence":1,"source_episode_ids":[],"valid_from":1,"valid_to":null,"recorded_at":1,"expired_at":0})",
  };
  for (const char* line : lines) {
    CAPTURE(line);
    std::string text = header + line + "\n";
    CHECK(agentmem_import(db, text.c_str(), nullptr) == AGENTMEM_MISMATCH_JSON);
    CHECK(std::string(agentmem_errmsg(db)).find("must not be 0") != std::string::npos);
  }
  agentmem_close(db);
}

namespace {

// The ids and scores of a BM25 recall of `query` for `user`.
std::vector<std::pair<int64_t, double>> Bm25(agentmem_db* db, const char* user,
                                             const char* query) {
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.mode = AGENTMEM_RECALL_BM25;
  o.k = 10;
  agentmem_cursor* cur = nullptr;
  int rc = agentmem_recall(db, user, query, &o, &cur);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, agentmem_errmsg(db));
  std::vector<std::pair<int64_t, double>> out;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
    const agentmem_hit* h = agentmem_cursor_hit(cur);
    out.emplace_back(h->id, h->score);
  }
  agentmem_cursor_close(cur);
  return out;
}

}  // namespace

TEST_CASE("an export carries the file's text analysis: an import recreates its recall, or is refused naming the options") {
  const char* kText = "tokenizer=unicode&stem=1&stop_words=1&context=0&own_weight=1";
  agentmem_db* a = Open(":memory:", kText);
  Remember(a, "u", "s", "user", "The runners were running in the parks");
  Remember(a, "u", "s", "user", "A runner runs");
  Remember(a, "u", "s", "user", "the park is big and the parks are green");
  const std::string jsonl = Export(a, nullptr);
  CHECK(jsonl.find(R"("tokenizer":"unicode-v1;stem=1;stop=1;min=1;max=0")") !=
        std::string::npos);
  const auto want = Bm25(a, "u", "the running parks");
  REQUIRE(want.size() == 3);

  agentmem_db* plain = Open(":memory:");  // the default text analysis
  CHECK(agentmem_import(plain, jsonl.c_str(), nullptr) == AGENTMEM_MISMATCH);
  const std::string msg = agentmem_errmsg(plain);
  CHECK(msg.find("import line 1: the export's tokenizer") != std::string::npos);
  CHECK(msg.find(std::string("the open options \"") + kText + "\"") != std::string::npos);
  agentmem_stats st;
  REQUIRE(agentmem_stats_get(plain, &st) == AGENTMEM_OK);
  CHECK(st.episodes == 0);
  agentmem_close(plain);

  agentmem_db* b = Open(":memory:", kText);  // the options the refusal named
  CHECK(Import(b, jsonl) == 3);
  CHECK(Bm25(b, "u", "the running parks") == want);
  CHECK(Export(b, nullptr) == jsonl);
  agentmem_close(b);
  agentmem_close(a);

  // A version 2 export names no tokenizer: a file of any text analysis takes it.
  std::string v2 = jsonl;
  v2.replace(v2.find("\"version\":3"), 11, "\"version\":2");
  const size_t t = v2.find(",\"tokenizer\":");
  v2.erase(t, v2.find(",\"next_episode_id\"") - t);
  agentmem_db* c = Open(":memory:");
  CHECK(Import(c, v2) == 3);
  agentmem_close(c);
}

TEST_CASE("every refusal of an import line names the line, whichever record and check refuses it") {
  // A blank line first: line numbers count every line of the text.
  const std::string jsonl = "\n" + SmallExport("u");
  std::vector<std::string> lines;
  for (size_t at = 0; at < jsonl.size();) {
    size_t nl = jsonl.find('\n', at);
    lines.push_back(jsonl.substr(at, nl - at));
    at = nl + 1;
  }
  auto refusal = [&](size_t index, const std::string& from, const std::string& to) {
    std::vector<std::string> changed = lines;
    const size_t at = changed[index].find(from);
    REQUIRE_MESSAGE(at != std::string::npos, changed[index]);
    changed[index].replace(at, from.size(), to);
    std::string text;
    for (const std::string& l : changed) text += l + "\n";
    agentmem_db* db = Open(":memory:");
    CHECK(agentmem_import(db, text.c_str(), nullptr) != AGENTMEM_OK);
    std::string msg = agentmem_errmsg(db);
    agentmem_stats st;
    REQUIRE(agentmem_stats_get(db, &st) == AGENTMEM_OK);
    CHECK(st.episodes + st.block_versions + st.facts == 0);
    agentmem_close(db);
    return msg;
  };
  int kinds = 0;
  for (size_t i = 0; i < lines.size(); i++) {
    const std::string prefix = "import line " + std::to_string(i + 1) + ": ";
    CAPTURE(lines[i]);
    if (lines[i].find("\"user_id\":\"u\"") == std::string::npos) continue;
    if (lines[i].find("\"type\":\"agentmem-export\"") != std::string::npos) continue;
    kinds++;
    // A NUL escape in a name, which the engine refuses when it writes.
    std::string msg = refusal(i, "\"user_id\":\"u\"", "\"user_id\":\"u\\u0000x\"");
    CHECK(msg.rfind(prefix, 0) == 0);
    CHECK(msg.find("NUL") != std::string::npos);
    // An unpaired surrogate escape: not valid UTF-8.
    msg = refusal(i, "\"user_id\":\"u\"", "\"user_id\":\"u\\ud800\"");
    CHECK(msg.rfind(prefix, 0) == 0);
  }
  CHECK(kinds >= 3);  // episodes, block versions and facts
  const size_t episode = 2;  // the first episode, after the blank line and the header
  REQUIRE(lines[episode].find("\"type\":\"episode\"") != std::string::npos);
  std::string deep = "\"metadata\":" + std::string(65, '[') + std::string(65, ']');
  std::string msg = refusal(episode, "\"metadata\":{\"a\":[1,2]}", deep);
  CHECK(msg.rfind("import line 3: ", 0) == 0);
  CHECK(msg.find("64") != std::string::npos);
}

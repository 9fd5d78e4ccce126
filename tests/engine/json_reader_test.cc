// tests/engine/json_reader_test.cc -- the token reader answers what
// nlohmann::json's trees answered before it (parse, operator==, JSON pointer
// lookup), which this test uses as the reference; and the recall metadata
// filter built on it.
#include "engine/json/json_reader.h"

#include <agentmem.h>
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/util/seed.h"

namespace agentmem::engine {
namespace {

using Json = nlohmann::json;

JsonTokens Tokens(const std::string& text) {
  JsonTokens t;
  REQUIRE_MESSAGE(ParseJson(text, &t), text);
  return t;
}

// A random JSON text over few keys and numbers that nlohmann compares across
// kinds (1, 1.0, 1e0, -0, huge unsigned ...), so that equal pairs are common.
std::string RandomJson(std::mt19937_64& rng, int depth) {
  static const char* const kScalars[] = {
      "0", "-0", "0.0", "1", "1.0", "1e0", "-1", "-1.0", "2", "18446744073709551615",
      "-9223372036854775808", "9223372036854775808", "9007199254740993", "9007199254740992.0",
      "1e2", "100", "true", "false", "null", "\"a\"", "\"b\"", "\"\"", "\"1\""};
  static const char* const kKeys[] = {"a", "b", "c", ""};
  int pick = static_cast<int>(rng() % (depth > 0 ? 8 : 5));
  if (pick < 5) return kScalars[rng() % std::size(kScalars)];
  std::string out;
  size_t n = rng() % 4;
  bool object = pick < 7;
  out += object ? '{' : '[';
  for (size_t i = 0; i < n; i++) {
    if (i) out += ',';
    if (object) out += std::string("\"") + kKeys[rng() % std::size(kKeys)] + "\":";
    out += RandomJson(rng, depth - 1);
  }
  out += object ? '}' : ']';
  return out;
}

TEST_CASE("the reader accepts exactly the texts nlohmann's parser accepts") {
  for (std::string text :
       {"", " ", "1", " 1 ", "1 2", "[1,]", "{\"a\":1,}", "{\"a\"}", "[", "]", "nul", "null",
        "\"\\u0000\"", "\"\\ud800\"", "\"\xC0\x80\"", "\"\xE2\x82\xAC\"", "01", "-", "1e", "1.",
        "/*c*/1", "[1]//c", "\"a\"\"b\"", "{\"a\":{\"b\":[1,2,{\"c\":null}]}}", "1e400",
        "-1e400", "123456789012345678901234567890", "\t[\n]\r", "true false"}) {
    JsonTokens t;
    CHECK_MESSAGE(ParseJson(text, &t) == Json::accept(text), text);
  }
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  JsonTokens t;
  CHECK(ParseJson(deep, &t));  // no recursion: any depth is read
  CHECK(t.size() == 200000);
  CHECK(JsonValueEnd(t, 0) == t.size());
}

TEST_CASE("equality of two values is nlohmann's operator==, numbers across kinds and objects in any member order") {
  CHECK(JsonEqual(Tokens("1"), 0, Tokens("1.0"), 0));
  CHECK(JsonEqual(Tokens("-0"), 0, Tokens("0"), 0));
  CHECK(!JsonEqual(Tokens("1"), 0, Tokens("\"1\""), 0));
  CHECK(JsonEqual(Tokens("{\"a\":1,\"b\":[1,2]}"), 0, Tokens("{\"b\":[1.0,2],\"a\":1}"), 0));
  CHECK(!JsonEqual(Tokens("[1,2]"), 0, Tokens("[2,1]"), 0));
  CHECK(!JsonEqual(Tokens("[1,2]"), 0, Tokens("[1,2,3]"), 0));
  CHECK(JsonEqual(Tokens("{\"a\":1,\"a\":2}"), 0, Tokens("{\"a\":2}"), 0));  // the last one counts
  std::mt19937_64 rng(test::Seed());
  int equal = 0, mismatches = 0;
  for (int n = 0; n < 30000; n++) {
    std::string a = RandomJson(rng, 3);
    // Often b is a itself with its members sorted and numbers rewritten.
    std::string b = rng() % 2 ? Json::parse(a).dump() : RandomJson(rng, 3);
    bool want = Json::parse(a) == Json::parse(b);
    equal += want;
    if (JsonEqual(Tokens(a), 0, Tokens(b), 0) != want && mismatches++ < 5) {
      CHECK_MESSAGE(false, a << " == " << b << " is " << want << " for nlohmann");
    }
  }
  CHECK(mismatches == 0);
  CHECK(equal > 1000);
}

TEST_CASE("a JSON pointer names the value nlohmann's contains() and at() name, or nothing") {
  std::vector<std::string> p;
  CHECK(!ParseJsonPointer("a", &p));
  CHECK(!ParseJsonPointer("/a~", &p));
  CHECK(!ParseJsonPointer("/a~2", &p));
  REQUIRE(ParseJsonPointer("/a~1b/~01/", &p));
  CHECK(p == std::vector<std::string>{"a/b", "~1", ""});
  const char* const kPointers[] = {"/a", "/b", "/", "/0", "/1", "/01", "/-", "/a/0", "/a/b",
                                   "/a/", "/0/a", "/1/1", "/99999999999999999999999",
                                   "/a/99999999999999999999999", "/c/c/c"};
  std::mt19937_64 rng(test::Seed());
  int found = 0, mismatches = 0;
  for (int n = 0; n < 20000; n++) {
    std::string text = RandomJson(rng, 3);
    const char* pointer = kPointers[rng() % std::size(kPointers)];
    REQUIRE(ParseJsonPointer(pointer, &p));
    Json j = Json::parse(text);
    Json::json_pointer ptr(pointer);
    bool has = false;
    try {
      has = j.contains(ptr);
    } catch (const Json::exception&) {
      // nlohmann throws for "" and too large an index into an array: the
      // reader names nothing (the old filter let this out of recall).
    }
    JsonTokens t = Tokens(text);
    size_t at = JsonPointerFind(t, p);
    bool same = has ? at != kNoJsonValue && JsonEqual(t, at, Tokens(j.at(ptr).dump()), 0)
                    : at == kNoJsonValue;
    found += has;
    if (!same && mismatches++ < 5) CHECK_MESSAGE(false, pointer << " in " << text);
  }
  CHECK(mismatches == 0);
  CHECK(found > 200);  // about 550
}

TEST_CASE("a metadata filter whose pointer nlohmann could not resolve in an array matches nothing and leaves the handle usable") {
  // Regression: the filter used nlohmann's json_pointer, whose contains()
  // throws out_of_range for the token "" ("/") or an index beyond 64 bits
  // in an array. The exception left recall as AGENTMEM_INTERNAL and poisoned
  // the handle.
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(":memory:", &db) == AGENTMEM_OK);
  int64_t list = 0, object = 0;
  REQUIRE(agentmem_remember(db, "u", "s", "user", "bread in a list", 0, "[1,2]", nullptr, 0,
                            &list) == AGENTMEM_OK);
  REQUIRE(agentmem_remember(db, "u", "s", "user", "bread in an object", 0, "{\"\":1,\"n\":2.0}",
                            nullptr, 0, &object) == AGENTMEM_OK);
  auto recall = [&](const char* key, const char* value) {
    agentmem_recall_options o;
    agentmem_recall_options_init(&o);
    o.metadata_key = key;
    o.metadata_value = value;
    agentmem_cursor* cur = nullptr;
    std::vector<int64_t> ids;
    REQUIRE(agentmem_recall(db, "u", "bread", &o, &cur) == AGENTMEM_OK);
    while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
      const agentmem_hit* h = agentmem_cursor_hit(cur);
      if (h->score > 0) ids.push_back(h->id);
    }
    agentmem_cursor_close(cur);
    return ids;
  };
  CHECK(recall("/", "1") == std::vector<int64_t>{object});
  CHECK(recall("/99999999999999999999999", "1").empty());
  CHECK(recall("/1", "2") == std::vector<int64_t>{list});
  CHECK(recall("n", "2") == std::vector<int64_t>{object});  // 2 == 2.0, as before
  int64_t id = 0;
  CHECK(agentmem_remember(db, "u", "s", "user", "still usable", 0, nullptr, nullptr, 0, &id) ==
        AGENTMEM_OK);
  agentmem_close(db);
}

}  // namespace
}  // namespace agentmem::engine

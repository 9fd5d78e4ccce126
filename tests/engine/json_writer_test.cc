// tests/engine/json_writer_test.cc -- JsonWriter writes the bytes nlohmann's
// compact dump() writes for the same values (the export format was written
// by dump() before; exports must keep re-exporting byte for byte). nlohmann is
// the reference here, in the test only.
#include "engine/json/json_writer.h"

#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/util/seed.h"

namespace agentmem::engine {
namespace {

using Ordered = nlohmann::ordered_json;

// What the export wrote before: dump() compact, non-ASCII as is, invalid
// UTF-8 replaced.
std::string Dump(const Ordered& j) {
  return j.dump(-1, ' ', false, Ordered::error_handler_t::replace);
}

std::string Written(std::string_view s) {
  std::string out;
  JsonWriter(&out).String(s);
  return out;
}

std::string Written(double d) {
  std::string out;
  JsonWriter(&out).Double(d);
  return out;
}

// A confidence as engine/memory/memory.cc turns a float into a double: the shortest
// %g that reads back as the same float.
double ConfidenceNumber(float f) {
  char buf[32];
  for (int prec = 1; prec <= 9; prec++) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(f));
    double d = std::strtod(buf, nullptr);
    if (static_cast<float>(d) == f) return d;
  }
  return static_cast<double>(f);
}

TEST_CASE("every control character, quote and backslash is escaped as nlohmann escapes it") {
  for (int c = 0; c < 0x80; c++) {
    std::string s = "a";
    s += static_cast<char>(c);
    s += 'b';
    CHECK_MESSAGE(Written(s) == Dump(Ordered(s)), "byte 0x" << std::hex << c);
  }
  CHECK(Written("tab\there") == "\"tab\\there\"");
  CHECK(Written(std::string("\x01\x1f\x7f", 3)) == "\"\\u0001\\u001f\x7f\"");
  CHECK(Written("") == "\"\"");
}

TEST_CASE("valid UTF-8 is written as it is, not escaped") {
  for (const char* s : {"résumé", "日本語", "emoji \xF0\x9F\x98\x80", "\xEF\xBF\xBF",
                        "\xF4\x8F\xBF\xBF", "\xED\x9F\xBF", "\xEE\x80\x80"}) {
    CHECK(Written(s) == Dump(Ordered(s)));
    std::string quoted = "\"";
    quoted += s;
    quoted += '"';
    CHECK(Written(s) == quoted);
  }
}

TEST_CASE("invalid UTF-8 is replaced by U+FFFD where and as nlohmann replaces it") {
  for (const char* s :
       {"\x80", "a\xBF" "b", "\xC0\x80", "\xC1\xBF", "\xC2", "x\xC2", "\xC2" "A",
        "\xE0\x80\x80", "\xE0\x9F\xBF", "\xE0\xA0", "\xED\xA0\x80", "\xE2\x82" "A",
        "\xE2\x82", "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF", "\xF4\x90\x80\x80", "\xF5\x80",
        "\xFF", "\xFE\xFF", "\xF0\x9F\x98", "\xF0\x9F\x98\"", "\xF0\x9F\x98\n",
        "\xE2\x82\xE2\x82\xAC", "ok \xC3\xA9 \xC3 bad \xC3\xA9"}) {
    CHECK_MESSAGE(Written(s) == Dump(Ordered(s)), "input " << Ordered::binary_t(
                                                      std::vector<uint8_t>(s, s + std::strlen(s))));
  }
}

TEST_CASE("random byte strings are written as nlohmann writes them") {
  std::mt19937_64 rng(test::Seed());
  // Bytes drawn mostly from the ones that matter to UTF-8 and escaping.
  const unsigned char pool[] = {0x00, 0x08, 0x0a, 0x1f, 0x20, '"', '\\', 'a', 0x7f, 0x80, 0x8f,
                                0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1,
                                0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff};
  int mismatches = 0;
  for (int n = 0; n < 50000; n++) {
    std::string s(rng() % 12, '\0');
    for (char& c : s) {
      c = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : pool[rng() % sizeof pool]);
    }
    if (Written(s) != Dump(Ordered(s)) && mismatches++ < 5) {
      CHECK_MESSAGE(false, "differs for bytes "
                               << Ordered::binary_t(std::vector<uint8_t>(s.begin(), s.end())));
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("integers are written in decimal, the extremes included") {
  for (int64_t v : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{9}, int64_t{10}, int64_t{-10},
                    std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    std::string out;
    JsonWriter(&out).Int(v);
    CHECK(out == Dump(Ordered(v)));
  }
  for (uint64_t v : {uint64_t{0}, uint64_t{7}, uint64_t{1} << 63,
                     std::numeric_limits<uint64_t>::max()}) {
    std::string out;
    JsonWriter(&out).Uint(v);
    CHECK(out == Dump(Ordered(v)));
  }
}

TEST_CASE("doubles are written as nlohmann writes them: 1.0 for integral values, exponents, null for NaN and infinities") {
  const double cases[] = {0.0, -0.0, 1.0, -1.0, 0.5, 0.9, 0.1 + 0.2, 100.0, 1e15, 1e16, 1e17,
                          123456789012345680.0, 1e-4, 1e-5, 1e-6, 0.000123, 1.5e300, 5e-324,
                          DBL_MIN, DBL_MAX, -DBL_MAX, 4503599627370496.5, 9007199254740993.0,
                          std::nan(""), std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity()};
  for (double d : cases) CHECK_MESSAGE(Written(d) == Dump(Ordered(d)), "value " << d);
  CHECK(Written(1.0) == "1.0");
  CHECK(Written(-0.0) == "-0.0");
  CHECK(Written(1e16) == "1e+16");
  CHECK(Written(std::nan("")) == "null");
  // Grisu2 is not the shortest here (std::to_chars writes 0.9682616): the
  // writer keeps nlohmann's form, which exports already hold.
  CHECK(Written(ConfidenceNumber(0.9682616f)) == "0.9682615999999999");
}

TEST_CASE("random doubles and float confidences are written as nlohmann writes them") {
  std::mt19937_64 rng(test::Seed());
  int mismatches = 0;
  for (int n = 0; n < 200000; n++) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    double c = ConfidenceNumber(std::uniform_real_distribution<float>(0, 1)(rng));
    for (double v : {d, c}) {
      if (Written(v) != Dump(Ordered(v)) && mismatches++ < 5) {
        CHECK_MESSAGE(false, "differs for the double with bits " << std::hex << bits);
      }
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("objects and arrays, nested and empty, are written as nlohmann's ordered_json dumps them") {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Field("user_id", "u\"1");
  w.Field("n", uint64_t{3});
  w.Field("t", int64_t{-5});
  w.Key("empty_object");
  w.BeginObject();
  w.EndObject();
  w.Key("empty_array");
  w.BeginArray();
  w.EndArray();
  w.Key("list");
  w.BeginArray();
  w.Uint(1);
  w.BeginObject();
  w.Field("x", 0.25);
  w.Field("b", true);
  w.Key("z");
  w.Null();
  w.EndObject();
  w.BeginArray();
  w.EndArray();
  w.String("s");
  w.EndArray();
  w.Field("last", false);
  w.EndObject();
  Ordered j;
  j["user_id"] = "u\"1";
  j["n"] = uint64_t{3};
  j["t"] = int64_t{-5};
  j["empty_object"] = Ordered::object();
  j["empty_array"] = Ordered::array();
  j["list"] = Ordered::array({1, Ordered{{"x", 0.25}, {"b", true}, {"z", nullptr}},
                              Ordered::array(), "s"});
  j["last"] = false;
  CHECK(out == Dump(j));
}

}  // namespace
}  // namespace agentmem::engine

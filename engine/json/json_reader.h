// engine/json/json_reader.h -- JSON text read into a flat list of tokens through
// nlohmann's SAX interface: no nlohmann::json tree, whose destructor allocates
// (3.11.2's json_value::destroy reserves a std::vector), so that a failed
// allocation while reading JSON is std::bad_alloc, never std::terminate
// (docs/testing.md, R4). Used by import (engine/memory/memory.cc), recall's metadata
// filter (engine/memory/database.cc) and the JSON arguments of INSERT
// (engine/sql/tables.cc).
//
// Nothing here recurses, so any nesting depth is read and compared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace agentmem::engine {

// One token of a JSON text, in document order. A value is one scalar token,
// or a Begin token, its contents, and the matching End token; an object's
// contents are pairs of a kKey token and a value.
struct JsonToken {
  enum Kind : uint8_t {
    kNull, kBool, kInt, kUint, kDouble, kString,  // scalars
    kKey, kBeginObject, kEndObject, kBeginArray, kEndArray,
  };
  Kind kind = kNull;
  bool b = false;     // kBool
  int64_t i = 0;      // kInt: nlohmann reads a negative integer (and "-0") as one
  uint64_t u = 0;     // kUint: a non-negative integer; for kBegin*: the index one
                      // past the matching End token
  double d = 0;       // kDouble: a fraction, an exponent, or an integer too long for 64 bits
  std::string s;      // kString, kKey
};

using JsonTokens = std::vector<JsonToken>;

// Reads `text`, which must be one JSON value (RFC 8259, as nlohmann::json::parse
// reads it: no comments, nothing after the value). Returns false when it is
// not; *out is then unspecified. Throws std::bad_alloc only.
bool ParseJson(std::string_view text, JsonTokens* out);

// The index one past the value that starts at index i.
inline size_t JsonValueEnd(const JsonTokens& t, size_t i) {
  return t[i].kind == JsonToken::kBeginObject || t[i].kind == JsonToken::kBeginArray
             ? static_cast<size_t>(t[i].u)
             : i + 1;
}

inline bool IsJsonNumber(const JsonToken& t) {
  return t.kind == JsonToken::kInt || t.kind == JsonToken::kUint || t.kind == JsonToken::kDouble;
}

constexpr size_t kNoJsonValue = static_cast<size_t>(-1);

// The value of member `key` of the object that starts at index obj, or
// kNoJsonValue. A key given twice means its last value (as nlohmann's trees
// keep it).
size_t JsonMember(const JsonTokens& t, size_t obj, std::string_view key);

// Equality as nlohmann::json's operator== has it for two parsed values: same
// type and value; numbers across kinds compare as nlohmann converts them
// (an integer and a double as doubles, so 1 == 1.0; a non-negative and a
// negative integer as int64); objects as maps (member order does not matter,
// a repeated key counts once, with its last value); arrays element by element.
bool JsonEqual(const JsonTokens& a, size_t ai, const JsonTokens& b, size_t bi);

// A JSON pointer (RFC 6901) split into its reference tokens, "~1" read as '/'
// and "~0" as '~'. False when it does not start with '/' or a '~' is followed
// by anything but '0' or '1' (nlohmann's json_pointer refuses the same).
bool ParseJsonPointer(std::string_view pointer, std::vector<std::string>* tokens);

// The value the pointer names in the value that starts at index 0, or
// kNoJsonValue (what nlohmann's contains() calls absent). An array is indexed
// by a decimal without leading zeros ("-", other text and an index too large
// for 64 bits name nothing).
size_t JsonPointerFind(const JsonTokens& t, const std::vector<std::string>& pointer);

}  // namespace agentmem::engine

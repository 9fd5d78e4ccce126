// cli/mcp/json_util.cc -- see json_util.h.
#include "mcp/json_util.h"

namespace agentmem::mcp {
namespace {

void WriteToken(const JsonToken& tok, JsonWriter* w) {
  switch (tok.kind) {
    case JsonToken::kNull: w->Null(); break;
    case JsonToken::kBool: w->Bool(tok.b); break;
    case JsonToken::kInt: w->Int(tok.i); break;
    case JsonToken::kUint: w->Uint(tok.u); break;
    case JsonToken::kDouble: w->Double(tok.d); break;
    case JsonToken::kString: w->String(tok.s); break;
    case JsonToken::kKey: w->Key(tok.s); break;
    case JsonToken::kBeginObject: w->BeginObject(); break;
    case JsonToken::kEndObject: w->EndObject(); break;
    case JsonToken::kBeginArray: w->BeginArray(); break;
    case JsonToken::kEndArray: w->EndArray(); break;
  }
}

}  // namespace

void CopyJson(const JsonTokens& t, size_t i, JsonWriter* w) {
  size_t end = engine::JsonValueEnd(t, i);
  for (size_t j = i; j < end; j++) WriteToken(t[j], w);
}

void CopyJsonMembers(const JsonTokens& t, size_t i, JsonWriter* w) {
  size_t end = engine::JsonValueEnd(t, i);
  for (size_t j = i + 1; j + 1 < end; j++) WriteToken(t[j], w);
}

std::string JsonText(const JsonTokens& t, size_t i) {
  std::string out;
  JsonWriter w(&out);
  CopyJson(t, i, &w);
  return out;
}

std::string CompactJson(std::string_view text) {
  JsonTokens t;
  if (!engine::ParseJson(text, &t) || t.empty()) return "";
  return JsonText(t, 0);
}

const char* JsonTypeName(const JsonToken& t) {
  switch (t.kind) {
    case JsonToken::kNull: return "null";
    case JsonToken::kBool: return "a boolean";
    case JsonToken::kInt:
    case JsonToken::kUint:
    case JsonToken::kDouble: return "a number";
    case JsonToken::kString: return "a string";
    case JsonToken::kBeginObject: return "an object";
    case JsonToken::kBeginArray: return "an array";
    default: return "not a value";
  }
}

}  // namespace agentmem::mcp

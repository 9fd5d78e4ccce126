// cli/mcp/json_util.h -- small helpers over the engine's JSON token reader and
// writer (engine/json/json_reader.h, engine/json/json_writer.h) used by the MCP server.
#pragma once

#include <string>
#include <string_view>

#include "engine/json/json_reader.h"
#include "engine/json/json_writer.h"

namespace agentmem::mcp {

using engine::JsonToken;
using engine::JsonTokens;
using engine::JsonWriter;
using engine::kNoJsonValue;

// Writes the value that starts at token i through w (compact, one line).
void CopyJson(const JsonTokens& t, size_t i, JsonWriter* w);

// Writes the members (or elements) of the object (or array) at token i,
// without its brackets: w must be inside an open object (or array).
void CopyJsonMembers(const JsonTokens& t, size_t i, JsonWriter* w);

// The value at token i as compact JSON text.
std::string JsonText(const JsonTokens& t, size_t i);

// JSON text re-written compact; "" when text is not one JSON value.
std::string CompactJson(std::string_view text);

// The name of a token's JSON type, for error messages ("a string").
const char* JsonTypeName(const JsonToken& t);

}  // namespace agentmem::mcp

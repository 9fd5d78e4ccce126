// cli/mcp/jsonrpc.h -- JSON-RPC 2.0 messages as the MCP stdio transport carries
// them: one JSON object per line (docs/mcp.md, "Protocol"). Reads the envelope
// of an incoming message and writes responses; knows nothing of MCP methods.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "mcp/json_util.h"

namespace agentmem::mcp {

// The error codes of JSON-RPC 2.0, and MCP's "resource not found".
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;
constexpr int kResourceNotFound = -32002;

// A protocol error: answered as a JSON-RPC error response.
struct RpcError : std::runtime_error {
  RpcError(int c, const std::string& message) : std::runtime_error(message), code(c) {}
  int code;
};

// One incoming message.
struct Message {
  enum Kind { kRequest, kNotification, kResponse };
  Kind kind = kRequest;
  JsonTokens tokens;
  std::string id;      // a request's id as JSON text (a string or an integer)
  std::string method;  // requests and notifications
  size_t params = kNoJsonValue;  // token index of params (an object), or none
};

// Reads one line. Returns true with *msg filled, or false with *error (the
// code and message to answer) and *error_id: the id to answer with, as JSON
// text ("null" when the line has no usable id).
bool ParseMessage(std::string_view line, Message* msg, RpcError* error, std::string* error_id);

// A response line (without the line break).
std::string ResultResponse(const std::string& id, std::string_view result_json);
std::string ErrorResponse(const std::string& id, int code, std::string_view message);

}  // namespace agentmem::mcp

// cli/mcp/jsonrpc.cc -- see jsonrpc.h.
#include "mcp/jsonrpc.h"

namespace agentmem::mcp {
namespace {

// The id member as JSON text; throws RpcError when it is not a string or an
// integer (MCP: "MUST NOT be null"). "" when the message has none.
std::string ReadId(const JsonTokens& t) {
  size_t at = engine::JsonMember(t, 0, "id");
  if (at == kNoJsonValue) return "";
  const JsonToken& id = t[at];
  if (id.kind == JsonToken::kString || id.kind == JsonToken::kInt ||
      id.kind == JsonToken::kUint) {
    return JsonText(t, at);
  }
  throw RpcError(kInvalidRequest,
                 std::string("the id must be a string or an integer, not ") + JsonTypeName(id));
}

void CheckVersion(const JsonTokens& t) {
  size_t at = engine::JsonMember(t, 0, "jsonrpc");
  if (at == kNoJsonValue || t[at].kind != JsonToken::kString || t[at].s != "2.0") {
    throw RpcError(kInvalidRequest, "not a JSON-RPC 2.0 message: \"jsonrpc\" must be \"2.0\"");
  }
}

// Fills the method and params of a request or notification.
void ReadCall(Message* msg, size_t method_at) {
  const JsonTokens& t = msg->tokens;
  if (t[method_at].kind != JsonToken::kString) {
    throw RpcError(kInvalidRequest, "\"method\" must be a string");
  }
  msg->method = t[method_at].s;
  size_t params = engine::JsonMember(t, 0, "params");
  if (params != kNoJsonValue && t[params].kind != JsonToken::kBeginObject) {
    throw RpcError(kInvalidParams, std::string("\"params\" must be an object, not ") +
                                       JsonTypeName(t[params]));
  }
  msg->params = params;
}

void ReadEnvelope(Message* msg, std::string* error_id) {
  const JsonTokens& t = msg->tokens;
  if (t[0].kind == JsonToken::kBeginArray) {
    throw RpcError(kInvalidRequest, "JSON-RPC batches are not supported: send one message a line");
  }
  if (t[0].kind != JsonToken::kBeginObject) {
    throw RpcError(kInvalidRequest, "a message must be a JSON object");
  }
  msg->id = ReadId(t);
  if (!msg->id.empty()) *error_id = msg->id;
  CheckVersion(t);
  size_t method = engine::JsonMember(t, 0, "method");
  if (method != kNoJsonValue) {
    msg->kind = msg->id.empty() ? Message::kNotification : Message::kRequest;
    ReadCall(msg, method);
    return;
  }
  bool response = engine::JsonMember(t, 0, "result") != kNoJsonValue ||
                  engine::JsonMember(t, 0, "error") != kNoJsonValue;
  if (!response) throw RpcError(kInvalidRequest, "a request needs a \"method\"");
  msg->kind = Message::kResponse;
}

}  // namespace

bool ParseMessage(std::string_view line, Message* msg, RpcError* error, std::string* error_id) {
  *error_id = "null";
  if (!engine::ParseJson(line, &msg->tokens) || msg->tokens.empty()) {
    *error = RpcError(kParseError, "parse error: the line is not one JSON value");
    return false;
  }
  try {
    ReadEnvelope(msg, error_id);
  } catch (const RpcError& e) {
    *error = e;
    return false;
  }
  return true;
}

std::string ResultResponse(const std::string& id, std::string_view result_json) {
  std::string out = "{\"jsonrpc\":\"2.0\",\"id\":";
  out += id;
  out += ",\"result\":";
  out += result_json;
  out += '}';
  return out;
}

std::string ErrorResponse(const std::string& id, int code, std::string_view message) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Field("jsonrpc", "2.0");
  w.Key("id");
  w.Raw(id);
  w.Key("error");
  w.BeginObject();
  w.Field("code", code);
  w.Field("message", message);
  w.EndObject();
  w.EndObject();
  return out;
}

}  // namespace agentmem::mcp

// cli/mcp/server.cc -- see server.h.
#include "mcp/server.h"

#include <new>

namespace agentmem::mcp {

const char* const kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
                                         nullptr};

namespace {

constexpr const char* kInstructions =
    "agentmem keeps this user's memory in one file: episodes (remember, recall), facts with "
    "valid and transaction time (facts_assert, facts_query), working-memory blocks (block_get, "
    "block_set), a knowledge graph (create_entities ... open_nodes, stored as facts), context "
    "assembly under a token budget (context) and verified forgetting (forget).";

// Parses schema text written in this program; an error here is a bug.
JsonTokens SchemaTokens(const std::string& json) {
  JsonTokens t;
  if (!engine::ParseJson(json, &t) || t.empty()) {
    throw RpcError(kInternalError, "a tool schema of this server is not JSON");
  }
  return t;
}

}  // namespace

std::string ToolResultJson(std::string_view text, std::string_view structured, bool is_error) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("content");
  w.BeginArray();
  w.BeginObject();
  w.Field("type", "text");
  w.Field("text", text);
  w.EndObject();
  w.EndArray();
  if (!is_error && !structured.empty()) {
    w.Key("structuredContent");
    w.Raw(structured);
  }
  w.Field("isError", is_error);
  w.EndObject();
  return out;
}

Server::Server(agentmem_db* db, ServerOptions options) : sources_(Sources()) {
  ctx_.db = db;
  ctx_.fixed_user = std::move(options.user);
  ctx_.readonly = options.readonly;
  AddMemoryTools(&tools_);
  AddGraphTools(&tools_);
}

std::string Server::HandleLine(std::string_view line) {
  Message m;
  RpcError error(0, "");
  std::string error_id;
  if (!ParseMessage(line, &m, &error, &error_id)) {
    if (m.kind == Message::kNotification) return "";  // a notification is never answered
    return ErrorResponse(error_id, error.code, error.what());
  }
  if (m.kind != Message::kRequest) return "";  // notifications; responses to nothing we sent
  try {
    return ResultResponse(m.id, Dispatch(m));
  } catch (const RpcError& e) {
    return ErrorResponse(m.id, e.code, e.what());
  } catch (const std::bad_alloc&) {
    return ErrorResponse(m.id, kInternalError, "out of memory");
  } catch (const std::exception& e) {
    return ErrorResponse(m.id, kInternalError, std::string("internal error: ") + e.what());
  }
}

std::string Server::Dispatch(const Message& m) {
  Args params(m.tokens, m.params);
  if (m.method == "ping") return "{}";
  if (m.method == "initialize") return Initialize(params);
  if (!initialized_) {
    throw RpcError(kInvalidRequest, "the server is not initialized: send initialize first");
  }
  if (m.method == "tools/list") return ListTools();
  if (m.method == "tools/call") return CallTool(params);
  if (m.method == "resources/list") return ListResources();
  if (m.method == "resources/templates/list") return "{\"resourceTemplates\":[]}";
  if (m.method == "resources/read") return ReadResource(params);
  throw RpcError(kMethodNotFound, "method not found: " + m.method);
}

std::string Server::Initialize(const Args& params) {
  if (initialized_) throw RpcError(kInvalidRequest, "initialize was already received");
  std::string asked;
  try {
    asked = params.RequiredString("protocolVersion");
  } catch (const ToolError& e) {
    throw RpcError(kInvalidParams, std::string("initialize: ") + e.what());
  }
  std::string version = kProtocolVersions[0];
  for (int i = 0; kProtocolVersions[i]; i++) {
    if (asked == kProtocolVersions[i]) version = asked;
  }
  initialized_ = true;
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Field("protocolVersion", version);
  w.Key("capabilities");
  w.Raw(R"({"tools":{"listChanged":false},"resources":{"listChanged":false}})");
  w.Key("serverInfo");
  w.BeginObject();
  w.Field("name", "agentmem");
  w.Field("title", "agentmem memory");
  w.Field("version", agentmem_libversion());
  w.EndObject();
  w.Field("instructions", kInstructions);
  w.EndObject();
  return out;
}

// ---------------------------------------------------------------- tools

void Server::WriteTool(JsonWriter* w, const Tool& tool) const {
  w->BeginObject();
  w->Field("name", tool.name);
  w->Field("title", tool.title);
  w->Field("description", tool.description);
  w->Key("inputSchema");
  w->BeginObject();
  w->Field("type", "object");
  w->Key("properties");
  w->BeginObject();
  JsonTokens props = SchemaTokens(tool.properties);
  CopyJsonMembers(props, 0, w);
  if (!ctx_.fixed_user) {
    w->Key("user");
    w->Raw(R"S({"type":"string","description":"whose memory (default: the anonymous user, an empty string)"})S");
  }
  w->EndObject();
  w->Key("required");
  w->BeginArray();
  for (const auto& r : tool.required) w->String(r);
  w->EndArray();
  w->EndObject();
  if (!tool.output_schema.empty()) {
    w->Key("outputSchema");
    CopyJson(SchemaTokens(tool.output_schema), 0, w);
  }
  w->Key("annotations");
  w->BeginObject();
  w->Field("readOnlyHint", !tool.writes);
  w->Field("destructiveHint", tool.name == "forget" || tool.name.starts_with("delete_"));
  w->Field("openWorldHint", false);
  w->EndObject();
  w->EndObject();
}

std::string Server::ListTools() const {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("tools");
  w.BeginArray();
  for (const Tool& t : tools_) {
    if (!(t.writes && ctx_.readonly)) WriteTool(&w, t);
  }
  w.EndArray();
  w.EndObject();
  return out;
}

void Server::CheckArgumentNames(const Tool& tool, const Args& args) const {
  JsonTokens props = SchemaTokens(tool.properties);
  for (const std::string& key : args.Keys()) {
    if (key == "user" || engine::JsonMember(props, 0, key) != kNoJsonValue) continue;
    CheckNoNul(key, "an argument name");
    throw ToolError("unknown argument \"" + key + "\" (tools/list gives the tool's arguments)");
  }
}

std::string Server::RunTool(const Tool& tool, const Args& args) {
  if (tool.writes && ctx_.readonly) {
    throw ToolError(tool.name + " writes, and this server is read-only (--readonly)");
  }
  if (tool.strict) CheckArgumentNames(tool, args);
  std::string structured;
  JsonWriter w(&structured);
  std::string text = tool.run(ctx_, args, &w);
  return ToolResultJson(text.empty() ? structured : text, structured, false);
}

std::string Server::CallTool(const Args& params) {
  std::optional<std::string> name;
  size_t args_at = params.At("arguments");
  try {
    name = params.String("name");
  } catch (const ToolError& e) {
    throw RpcError(kInvalidParams, std::string("tools/call: ") + e.what());
  }
  if (!name) throw RpcError(kInvalidParams, "tools/call needs params.name, the tool's name");
  if (args_at != kNoJsonValue && params.tokens()[args_at].kind != JsonToken::kBeginObject) {
    throw RpcError(kInvalidParams, "tools/call: params.arguments must be an object");
  }
  for (const Tool& tool : tools_) {
    if (tool.name != *name) continue;
    try {
      return RunTool(tool, Args(params.tokens(), args_at));
    } catch (const ToolError& e) {
      return ToolResultJson(e.what(), "", true);
    }
  }
  throw RpcError(kInvalidParams, "Unknown tool: " + *name);
}

// ---------------------------------------------------------------- resources

std::string Server::ListResources() const {
  std::vector<ResourceInfo> all;
  try {
    for (const auto& s : sources_) s.list(ctx_, ResourceUser(), &all);
  } catch (const ToolError& e) {
    throw RpcError(kInternalError, e.what());
  }
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("resources");
  w.BeginArray();
  for (const auto& r : all) {
    w.BeginObject();
    w.Field("uri", r.uri);
    w.Field("name", r.name);
    w.Field("title", r.title);
    w.Field("description", r.description);
    w.Field("mimeType", r.mime_type);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return out;
}

std::string Server::ReadResource(const Args& params) const {
  std::string uri;
  try {
    uri = params.RequiredString("uri");
  } catch (const ToolError& e) {
    throw RpcError(kInvalidParams, std::string("resources/read: ") + e.what());
  }
  std::string mime, text;
  try {
    for (const auto& s : sources_) {
      if (!s.read(ctx_, ResourceUser(), uri, &mime, &text)) continue;
      std::string out;
      JsonWriter w(&out);
      w.BeginObject();
      w.Key("contents");
      w.BeginArray();
      w.BeginObject();
      w.Field("uri", uri);
      w.Field("mimeType", mime);
      w.Field("text", text);
      w.EndObject();
      w.EndArray();
      w.EndObject();
      return out;
    }
  } catch (const ToolError& e) {
    throw RpcError(kInternalError, e.what());
  }
  throw RpcError(kResourceNotFound, "Resource not found: " + uri);
}

}  // namespace agentmem::mcp

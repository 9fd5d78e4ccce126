// cli/mcp/server.h -- the MCP server's method dispatch: one JSON-RPC message
// in, at most one response out (docs/mcp.md). Lifecycle (initialize, ping),
// tools (tools/list, tools/call) and resources (resources/list,
// resources/read). Knows nothing of stdio: stdio.cc feeds it lines.
#pragma once

#include <agentmem.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mcp/jsonrpc.h"
#include "mcp/resources.h"
#include "mcp/tools.h"

namespace agentmem::mcp {

// The protocol revisions this server speaks, newest first.
extern const char* const kProtocolVersions[];

struct ServerOptions {
  std::optional<std::string> user;  // --user
  bool readonly = false;            // --readonly
};

class Server {
 public:
  Server(agentmem_db* db, ServerOptions options);

  // Handles one line of input; returns the response line (no line break), or
  // "" when none is due (notifications, responses).
  std::string HandleLine(std::string_view line);

 private:
  std::string Dispatch(const Message& m);  // the result's JSON; throws RpcError
  std::string Initialize(const Args& params);
  std::string ListTools() const;
  std::string CallTool(const Args& params);
  std::string RunTool(const Tool& tool, const Args& args);
  std::string ListResources() const;
  std::string ReadResource(const Args& params) const;
  void WriteTool(JsonWriter* w, const Tool& tool) const;
  void CheckArgumentNames(const Tool& tool, const Args& args) const;
  std::string ResourceUser() const { return ctx_.fixed_user.value_or(""); }

  ToolContext ctx_;
  std::vector<Tool> tools_;
  std::vector<ResourceSource> sources_;
  bool initialized_ = false;
};

// A tool result holding one text block and, unless it is an error, the
// structured content.
std::string ToolResultJson(std::string_view text, std::string_view structured, bool is_error);

}  // namespace agentmem::mcp

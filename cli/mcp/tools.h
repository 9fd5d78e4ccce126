// cli/mcp/tools.h -- the tool layer of the MCP server: what a tool is, the
// context it runs in (the database, the user partition, read-only), and the
// two tool sets: agentmem's own (memory_tools.cc) and the reference memory
// server's knowledge graph mapped onto facts and episodes (graph_tools.cc).
// docs/mcp.md lists every tool with its arguments.
#pragma once

#include <agentmem.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mcp/args.h"
#include "mcp/json_util.h"

namespace agentmem::mcp {

struct ToolContext {
  agentmem_db* db = nullptr;
  std::optional<std::string> fixed_user;  // --user: the only partition served
  bool readonly = false;

  // The user a call works on: the fixed user, or the call's optional "user"
  // argument (default: the anonymous user ""). Throws ToolError when a fixed
  // server is asked for another user.
  std::string User(const Args& args) const;
  // Throws ToolError with the engine's message for the failed call `what`.
  [[noreturn]] void Fail(const std::string& what) const;
  void Check(int rc, const std::string& what) const {
    if (rc != AGENTMEM_OK) Fail(what);
  }
};

// A tool writes its result as one JSON object (structuredContent) through w
// and returns the text of its content block ("": the object's JSON text).
using ToolFn = std::function<std::string(const ToolContext&, const Args&, JsonWriter* w)>;

struct Tool {
  std::string name;
  std::string title;
  std::string description;
  std::string properties;  // the inputSchema's "properties" object (JSON), without "user"
  std::vector<std::string> required;
  std::string output_schema;  // JSON, or "" for none
  bool writes = false;        // listed and allowed only without --readonly
  bool strict = true;         // unknown arguments are refused
  ToolFn run;
};

void AddMemoryTools(std::vector<Tool>* tools);
void AddGraphTools(std::vector<Tool>* tools);

// Runs fn inside one transaction: committed when fn returns, rolled back
// when it throws (the exception goes on).
void InTransaction(const ToolContext& ctx, const std::function<void()>& fn);

}  // namespace agentmem::mcp

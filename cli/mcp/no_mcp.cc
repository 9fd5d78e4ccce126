// cli/mcp/no_mcp.cc -- `agentmem mcp` in a shell built without the MCP server
// (meson option small): says so and fails.
#include <cstdio>

#include "mcp/mcp.h"

namespace agentmem::mcp {

int RunMcp(int, char**) {
  std::fputs("agentmem: this shell was built without the MCP server (meson option small)\n",
             stderr);
  return 1;
}

}  // namespace agentmem::mcp

// cli/mcp/mcp.h -- `agentmem mcp FILE [OPTIONS]`: the MCP server over stdio
// (docs/mcp.md).
#pragma once

namespace agentmem::mcp {

// Runs the server; argv[0] is "mcp". Returns the process exit status: 0 after
// a clean shutdown (end of input, SIGTERM, SIGINT or SIGHUP), 1 when the
// arguments are wrong or the file does not open or close cleanly.
int RunMcp(int argc, char** argv);

}  // namespace agentmem::mcp

// cli/mcp/resources.h -- the MCP resources of one user's memory: each
// working-memory block (agentmem://blocks/NAME, text/plain) and the profile
// (agentmem://profile, application/json). A source of resources is a pair of
// functions; another one (a MEMORY.md, say) is one more entry in Sources().
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "mcp/tools.h"

namespace agentmem::mcp {

struct ResourceInfo {
  std::string uri;
  std::string name;
  std::string title;
  std::string description;
  std::string mime_type;
};

struct ResourceSource {
  // Appends the resources it has now for user.
  std::function<void(const ToolContext&, const std::string& user, std::vector<ResourceInfo>*)> list;
  // Reads uri when it is one of this source's: true with *mime_type and
  // *text set, false when the uri is not its own. Throws ToolError on failure.
  std::function<bool(const ToolContext&, const std::string& user, const std::string& uri,
                     std::string* mime_type, std::string* text)>
      read;
};

std::vector<ResourceSource> Sources();

// "%"-encodes the bytes of s that are not unreserved in a URI path segment
// (RFC 3986), and back; Decode returns false on a bad escape.
std::string UriEncode(const std::string& s);
bool UriDecode(const std::string& s, std::string* out);

}  // namespace agentmem::mcp

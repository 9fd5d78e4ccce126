// cli/mcp/resources.cc -- see resources.h.
#include "mcp/resources.h"

#include <memory>

namespace agentmem::mcp {
namespace {

constexpr std::string_view kBlockPrefix = "agentmem://blocks/";
constexpr const char* kProfileUri = "agentmem://profile";
constexpr const char* kMarkdownUri = "agentmem://MEMORY.md";

struct CursorCloser {
  void operator()(agentmem_cursor* c) const { agentmem_cursor_close(c); }
};

void ListBlocks(const ToolContext& ctx, const std::string& user, std::vector<ResourceInfo>* out) {
  agentmem_cursor* raw = nullptr;
  ctx.Check(agentmem_blocks(ctx.db, user.c_str(), &raw), "listing blocks");
  std::unique_ptr<agentmem_cursor, CursorCloser> cur(raw);
  int rc;
  while ((rc = agentmem_cursor_step(cur.get())) == AGENTMEM_ROW) {
    const agentmem_block* b = agentmem_cursor_block(cur.get());
    out->push_back({std::string(kBlockPrefix) + UriEncode(b->name), b->name,
                    std::string("Block ") + b->name,
                    "A working-memory block (its current version)", "text/plain"});
  }
  if (rc != AGENTMEM_DONE) ctx.Fail("listing blocks");
}

bool ReadBlock(const ToolContext& ctx, const std::string& user, const std::string& uri,
               std::string* mime, std::string* text) {
  if (!uri.starts_with(kBlockPrefix)) return false;
  std::string name;
  if (!UriDecode(uri.substr(kBlockPrefix.size()), &name)) return false;
  if (name.empty() || name.find('\0') != std::string::npos) return false;
  agentmem_block* b = nullptr;
  int rc = agentmem_block_get(ctx.db, user.c_str(), name.c_str(), &b);
  if (rc == AGENTMEM_NOTFOUND) return false;
  ctx.Check(rc, "reading block");
  *mime = "text/plain";
  *text = b->value;
  agentmem_free(b);
  return true;
}

void ListProfile(const ToolContext&, const std::string&, std::vector<ResourceInfo>* out) {
  out->push_back({kProfileUri, "profile", "Memory profile",
                  "A summary of the user's memory: counts, time span, roles and top facts",
                  "application/json"});
}

bool ReadProfile(const ToolContext& ctx, const std::string& user, const std::string& uri,
                 std::string* mime, std::string* text) {
  if (uri != kProfileUri) return false;
  char* json = nullptr;
  ctx.Check(agentmem_profile(ctx.db, user.c_str(), &json), "profile");
  *mime = "application/json";
  *text = json;
  agentmem_free(json);
  return true;
}

void ListMarkdown(const ToolContext&, const std::string&, std::vector<ResourceInfo>* out) {
  out->push_back({kMarkdownUri, "MEMORY.md", "Memory as Markdown",
                  "The user's blocks, current facts and sessions as one Markdown document "
                  "(docs/markdown.md)",
                  "text/markdown"});
}

bool ReadMarkdown(const ToolContext& ctx, const std::string& user, const std::string& uri,
                  std::string* mime, std::string* text) {
  if (uri != kMarkdownUri) return false;
  char* md = nullptr;
  ctx.Check(agentmem_export_markdown(ctx.db, user.c_str(), &md), "Markdown export");
  *mime = "text/markdown";
  *text = md;
  agentmem_free(md);
  return true;
}

bool Unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::vector<ResourceSource> Sources() {
  return {{ListProfile, ReadProfile}, {ListMarkdown, ReadMarkdown}, {ListBlocks, ReadBlock}};
}

std::string UriEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (Unreserved(c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

bool UriDecode(const std::string& s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '%') {
      *out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return false;
    int hi = HexValue(s[i + 1]);
    int lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

}  // namespace agentmem::mcp

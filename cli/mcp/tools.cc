// cli/mcp/tools.cc -- see tools.h: the context every tool runs in.
#include "mcp/tools.h"

namespace agentmem::mcp {

std::string ToolContext::User(const Args& args) const {
  auto asked = args.String("user");
  if (!fixed_user) return asked.value_or("");
  if (asked && *asked != *fixed_user) {
    throw ToolError("this server serves the memory of one user (--user); argument \"user\" "
                    "cannot name another");
  }
  return *fixed_user;
}

void ToolContext::Fail(const std::string& what) const {
  throw ToolError(what + " failed: " + agentmem_errmsg(db));
}

void InTransaction(const ToolContext& ctx, const std::function<void()>& fn) {
  ctx.Check(agentmem_begin(ctx.db), "begin");
  try {
    fn();
  } catch (...) {
    agentmem_rollback(ctx.db);
    throw;
  }
  ctx.Check(agentmem_commit(ctx.db), "commit");
}

}  // namespace agentmem::mcp

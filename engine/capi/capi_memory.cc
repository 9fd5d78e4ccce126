// engine/capi/capi_memory.cc -- the C ABI of context assembly, profile, export and
// import (include/agentmem.h, "memory" section) over engine/memory/memory.h.
//
// Every entry point runs inside Guard() (capi_internal.h): the handle's mutex
// is held for the call and exceptions become result codes. Results cross the
// ABI as single malloc'd blocks the caller frees with agentmem_free().
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "agentmem.h"
#include "engine/capi/capi_internal.h"
#include "engine/memory/markdown.h"
#include "engine/memory/memory.h"

using agentmem::Status;
namespace eng = agentmem::engine;
using agentmem::capi::CopyOut;
using agentmem::capi::Guard;
using agentmem::capi::Need;

namespace {

// The items as one block: the array first, then every string after it.
Status PackItems(const std::vector<eng::ContextItem>& items, agentmem_context_item** out) {
  if (items.empty()) return Status::OK();
  size_t head = items.size() * sizeof(agentmem_context_item);
  size_t size = head;
  for (const eng::ContextItem& it : items) {
    size += it.name.size() + it.text.size() + it.reason.size() + 3;
  }
  char* base = static_cast<char*>(std::calloc(1, size));
  if (!base) return Status(agentmem::kNoMem, "out of memory");
  auto* rows = reinterpret_cast<agentmem_context_item*>(base);
  char* p = base + head;
  auto str = [&p](const std::string& s) {
    char* at = p;
    std::memcpy(p, s.c_str(), s.size() + 1);
    p += s.size() + 1;
    return at;
  };
  for (size_t i = 0; i < items.size(); i++) {
    const eng::ContextItem& it = items[i];
    rows[i].kind = static_cast<int>(it.kind);
    rows[i].id = static_cast<int64_t>(it.id);
    rows[i].name = str(it.name);
    rows[i].text = str(it.text);
    rows[i].tokens = static_cast<int>(it.tokens);
    rows[i].reason = str(it.reason);
  }
  *out = rows;
  return Status::OK();
}

}  // namespace

static_assert(AGENTMEM_CONTEXT_BLOCK == static_cast<int>(eng::ContextKind::kBlock) &&
                  AGENTMEM_CONTEXT_FACT == static_cast<int>(eng::ContextKind::kFact) &&
                  AGENTMEM_CONTEXT_EPISODE == static_cast<int>(eng::ContextKind::kEpisode),
              "include/agentmem.h and engine/memory/memory.h disagree on context kinds");

extern "C" {

int agentmem_context(agentmem_db* db, const char* user_id, const char* query, int token_budget,
                     agentmem_context_item** paItems, int* pnItems) {
  if (paItems) *paItems = nullptr;
  if (pnItems) *pnItems = 0;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(user_id, "user_id"));
    AGENTMEM_RETURN_IF_ERROR(Need(query, "query"));
    AGENTMEM_RETURN_IF_ERROR(Need(paItems, "paItems"));
    AGENTMEM_RETURN_IF_ERROR(Need(pnItems, "pnItems"));
    std::vector<eng::ContextItem> items;
    AGENTMEM_RETURN_IF_ERROR(eng::AssembleContext(&d, user_id, query, token_budget, &items));
    if (items.size() > INT_MAX) return Status(agentmem::kTooBig, "too many context items");
    AGENTMEM_RETURN_IF_ERROR(PackItems(items, paItems));
    *pnItems = static_cast<int>(items.size());
    return Status::OK();
  });
}

int agentmem_profile(agentmem_db* db, const char* user_id, char** pzJson) {
  if (pzJson) *pzJson = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(user_id, "user_id"));
    AGENTMEM_RETURN_IF_ERROR(Need(pzJson, "pzJson"));
    std::string json;
    AGENTMEM_RETURN_IF_ERROR(eng::ProfileJson(&d, user_id, &json));
    return CopyOut(json, pzJson);
  });
}

int agentmem_export(agentmem_db* db, const char* user_id, char** pzJsonl) {
  if (pzJsonl) *pzJsonl = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(pzJsonl, "pzJsonl"));
    std::string jsonl;
    AGENTMEM_RETURN_IF_ERROR(user_id ? eng::ExportUser(&d, user_id, &jsonl)
                                     : eng::ExportFile(&d, &jsonl));
    return CopyOut(jsonl, pzJsonl);
  });
}

int agentmem_import(agentmem_db* db, const char* zJsonl, int64_t* pnAdded) {
  return agentmem_import_v2(db, zJsonl, 0, pnAdded);
}

int agentmem_import_v2(agentmem_db* db, const char* zJsonl, int flags, int64_t* pnAdded) {
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(zJsonl, "zJsonl"));
    if (flags & ~AGENTMEM_IMPORT_NEW_IDS) {
      return agentmem::StatusF(agentmem::kMisuse, "unknown import flags 0x%x", flags);
    }
    eng::ImportCounts counts;
    AGENTMEM_RETURN_IF_ERROR(
        eng::ImportJsonl(&d, zJsonl, &counts, (flags & AGENTMEM_IMPORT_NEW_IDS) != 0));
    if (pnAdded) *pnAdded = static_cast<int64_t>(counts.added());
    return Status::OK();
  });
}

int agentmem_export_markdown(agentmem_db* db, const char* user_id, char** pzMarkdown) {
  if (pzMarkdown) *pzMarkdown = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(user_id, "user_id"));
    AGENTMEM_RETURN_IF_ERROR(Need(pzMarkdown, "pzMarkdown"));
    std::string markdown;
    AGENTMEM_RETURN_IF_ERROR(eng::ExportMarkdown(&d, user_id, &markdown));
    return CopyOut(markdown, pzMarkdown);
  });
}

int agentmem_import_markdown(agentmem_db* db, const char* user_id, const char* zMarkdown,
                             char** pzReport) {
  if (pzReport) *pzReport = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(user_id, "user_id"));
    AGENTMEM_RETURN_IF_ERROR(Need(zMarkdown, "zMarkdown"));
    std::string report;
    AGENTMEM_RETURN_IF_ERROR(eng::ImportMarkdown(&d, user_id, zMarkdown, &report));
    return pzReport ? CopyOut(report, pzReport) : Status::OK();
  });
}

}  // extern "C"

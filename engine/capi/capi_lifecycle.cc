// engine/capi/capi_lifecycle.cc -- the C ABI of forgetting and compaction
// (include/agentmem.h, "forgetting") over engine::Database (lifecycle.cc).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "agentmem.h"
#include "engine/capi/capi_internal.h"
#include "engine/memory/recover.h"

namespace eng = agentmem::engine;
namespace fmt = agentmem::format;
using agentmem::Status;
using agentmem::capi::Guard;

namespace {

void Fill(const eng::ForgetReceipt& r, agentmem_receipt* out) {
  if (!out) return;
  out->episodes = static_cast<int64_t>(r.episodes);
  out->facts = static_cast<int64_t>(r.facts);
  out->block_versions = static_cast<int64_t>(r.block_versions);
  out->vacuumed = r.vacuumed ? 1 : 0;
  out->bytes_before = static_cast<int64_t>(r.bytes_before);
  out->bytes_after = static_cast<int64_t>(r.bytes_after);
  out->needles = static_cast<int64_t>(r.needles);
  out->residue = static_cast<int64_t>(r.residue);
}

int Run(agentmem_db* db, const fmt::ForgetRecord& f, int flags, agentmem_receipt* pReceipt) {
  if (pReceipt) *pReceipt = agentmem_receipt{};
  return Guard(db, [&](eng::Database& d) -> Status {
    if (flags & ~AGENTMEM_FORGET_PURGE) return Status(agentmem::kMisuse, "unknown forget flags");
    eng::ForgetReceipt r;
    if (flags & AGENTMEM_FORGET_PURGE) {
      AGENTMEM_RETURN_IF_ERROR(d.Purge(f, &r));
    } else {
      AGENTMEM_RETURN_IF_ERROR(d.Forget(f, &r));
    }
    Fill(r, pReceipt);
    return Status::OK();
  });
}

}  // namespace

int agentmem_forget(agentmem_db* db, const char* user_id, const char* session_id, int64_t before,
                    int flags, agentmem_receipt* pReceipt) {
  if (!user_id) return Guard(db, [](eng::Database&) { return Status(agentmem::kMisuse, "user_id is NULL"); });
  if (session_id && before != 0) {
    return Guard(db, [](eng::Database&) {
      return Status(agentmem::kMisuse, "forget takes a session or a time, not both");
    });
  }
  fmt::ForgetRecord f;
  f.user_id = user_id;
  if (session_id) {
    f.kind = fmt::ForgetKind::kSession;
    f.session_id = session_id;
  } else if (before != 0) {
    f.kind = fmt::ForgetKind::kBefore;
    f.before = before;
  } else {
    f.kind = fmt::ForgetKind::kUser;
  }
  return Run(db, f, flags, pReceipt);
}

int agentmem_forget_episode(agentmem_db* db, int64_t id, int flags, agentmem_receipt* pReceipt) {
  if (id <= 0) return Guard(db, [](eng::Database&) { return Status(agentmem::kMisuse, "episode id must be positive"); });
  fmt::ForgetRecord f;
  f.kind = fmt::ForgetKind::kEpisode;
  f.id = static_cast<uint64_t>(id);
  return Run(db, f, flags, pReceipt);
}

int agentmem_forget_fact(agentmem_db* db, int64_t id, int flags, agentmem_receipt* pReceipt) {
  if (id <= 0) return Guard(db, [](eng::Database&) { return Status(agentmem::kMisuse, "fact id must be positive"); });
  fmt::ForgetRecord f;
  f.kind = fmt::ForgetKind::kFact;
  f.id = static_cast<uint64_t>(id);
  return Run(db, f, flags, pReceipt);
}

int agentmem_forget_block(agentmem_db* db, const char* user_id, const char* name, int flags,
                          agentmem_receipt* pReceipt) {
  if (!user_id || !name) {
    return Guard(db, [](eng::Database&) { return Status(agentmem::kMisuse, "user_id and name must not be NULL"); });
  }
  fmt::ForgetRecord f;
  f.kind = fmt::ForgetKind::kBlock;
  f.user_id = user_id;
  f.name = name;
  return Run(db, f, flags, pReceipt);
}

int agentmem_vacuum(agentmem_db* db, agentmem_receipt* pReceipt) {
  if (pReceipt) *pReceipt = agentmem_receipt{};
  return Guard(db, [&](eng::Database& d) -> Status {
    eng::ForgetReceipt r;
    AGENTMEM_RETURN_IF_ERROR(d.Vacuum({}, &r));
    Fill(r, pReceipt);
    return Status::OK();
  });
}

int agentmem_forget_collect(agentmem_db* db, int on) {
  return Guard(db, [&](eng::Database& d) -> Status {
    d.CollectForgotten(on != 0);
    return Status::OK();
  });
}

int agentmem_search_bytes(agentmem_db* db, const void* const* aNeedle, const int64_t* aBytes,
                          int n, int64_t* pFound) {
  if (pFound) *pFound = 0;
  return Guard(db, [&](eng::Database& d) -> Status {
    if (!pFound || n < 0 || (n > 0 && (!aNeedle || !aBytes))) {
      return Status(agentmem::kMisuse, "search_bytes: NULL argument or negative count");
    }
    std::vector<std::string> needles;
    for (int i = 0; i < n; i++) {
      if (!aNeedle[i] || aBytes[i] < 16) {
        return Status(agentmem::kMisuse, "search_bytes: a needle is NULL or shorter than 16 bytes");
      }
      needles.emplace_back(static_cast<const char*>(aNeedle[i]), static_cast<size_t>(aBytes[i]));
    }
    std::sort(needles.begin(), needles.end());
    needles.erase(std::unique(needles.begin(), needles.end()), needles.end());
    uint64_t found = 0;
    AGENTMEM_RETURN_IF_ERROR(d.SearchFile(needles, &found));
    *pFound = static_cast<int64_t>(found);
    return Status::OK();
  });
}

int agentmem_retention_set(agentmem_db* db, int64_t max_age_seconds, int keep_cited) {
  return Guard(db, [&](eng::Database& d) { return d.SetRetention(max_age_seconds, keep_cited != 0); });
}

int agentmem_retention_get(agentmem_db* db, int64_t* pMaxAgeSeconds, int* pKeepCited) {
  return Guard(db, [&](eng::Database& d) -> Status {
    if (!pMaxAgeSeconds || !pKeepCited) return Status(agentmem::kMisuse, "NULL output pointer");
    bool keep = false;
    d.Retention(pMaxAgeSeconds, &keep);
    *pKeepCited = keep ? 1 : 0;
    return Status::OK();
  });
}

namespace {

// A malloc'd copy for agentmem_free(); NULL when memory ran out.
char* CopyOut(const std::string& text) {
  char* p = static_cast<char*>(std::malloc(text.size() + 1));
  if (p) std::memcpy(p, text.c_str(), text.size() + 1);
  return p;
}

}  // namespace

int agentmem_recover(const char* zSrc, const char* zDst, char** pzReport) {
  if (pzReport) *pzReport = nullptr;
  if (!zSrc || (zDst && !*zDst)) {
    if (pzReport) *pzReport = CopyOut(zSrc ? "recover: the new file's name is empty" : "recover: zSrc is NULL");
    return AGENTMEM_MISUSE;
  }
  try {
    eng::RecoverReport report;
    Status s = eng::Recover(zSrc, zDst ? zDst : "", eng::Options{}, &report);
    if (!s.ok()) {
      if (pzReport) *pzReport = CopyOut(s.message());
      return s.code();
    }
    if (pzReport) {
      *pzReport = CopyOut(eng::RecoverReportJson(report));
      if (!*pzReport) return AGENTMEM_NOMEM;
    }
    return AGENTMEM_OK;
  } catch (const std::bad_alloc&) {
    return AGENTMEM_NOMEM;
  } catch (const std::exception& e) {
    if (pzReport) *pzReport = CopyOut(std::string("internal error: ") + e.what());
    return AGENTMEM_INTERNAL;
  }
}

// engine/capi/capi_replica.cc -- the C ABI of the replica writes
// (include/agentmem.h, "replica writes"): an episode or a fact written with
// every field as given, and the sync.* settings, over engine::Database.
#include <string>

#include "agentmem.h"
#include "engine/capi/capi_internal.h"

using agentmem::Status;
namespace eng = agentmem::engine;
namespace fmt = agentmem::format;
using agentmem::capi::CopyOut;
using agentmem::capi::Guard;
using agentmem::capi::Need;

extern "C" {

int agentmem_episode_put(agentmem_db* db, const agentmem_episode* ep, int64_t* pId) {
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(ep, "ep"));
    fmt::EpisodeRecord r;
    AGENTMEM_RETURN_IF_ERROR(agentmem::capi::EpisodeOf(*ep, &r));
    if (ep->ts < 0 || ep->created_at < 0) {
      return Status(agentmem::kRange, "episode ts and created_at must not be negative");
    }
    r.created_at = ep->created_at;
    uint64_t id = 0;
    AGENTMEM_RETURN_IF_ERROR(d.Remember(std::move(r), &id));
    if (pId) *pId = static_cast<int64_t>(id);
    return Status::OK();
  });
}

int agentmem_fact_put(agentmem_db* db, const agentmem_fact* f, int64_t* pId) {
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(f, "f"));
    AGENTMEM_RETURN_IF_ERROR(Need(f->user_id, "user_id"));
    AGENTMEM_RETURN_IF_ERROR(Need(f->subject, "subject"));
    AGENTMEM_RETURN_IF_ERROR(Need(f->predicate, "predicate"));
    AGENTMEM_RETURN_IF_ERROR(Need(f->object, "object"));
    if (f->n_sources < 0 || (f->n_sources > 0 && !f->source_episode_ids)) {
      return Status(agentmem::kMisuse, "source_episode_ids must be non-NULL when n_sources > 0");
    }
    if (!(f->confidence >= 0.0 && f->confidence <= 1.0)) {
      return Status(agentmem::kRange, "fact confidence must be between 0 and 1");
    }
    if (f->valid_from < 0 || f->valid_to < 0 || f->recorded_at < 0 || f->expired_at < 0) {
      return Status(agentmem::kRange, "fact times must not be negative");
    }
    fmt::FactRecord r;
    r.user_id = f->user_id;
    r.subject = f->subject;
    r.predicate = f->predicate;
    r.object = f->object;
    r.confidence = static_cast<float>(f->confidence);
    r.valid_from = f->valid_from;
    r.valid_to = f->valid_to;
    r.recorded_at = f->recorded_at;
    r.expired_at = f->expired_at;
    for (int i = 0; i < f->n_sources; i++) {
      if (f->source_episode_ids[i] <= 0) {
        return Status(agentmem::kRange, "fact source episode ids must be positive");
      }
      r.source_episode_ids.push_back(static_cast<uint64_t>(f->source_episode_ids[i]));
    }
    uint64_t id = 0;
    AGENTMEM_RETURN_IF_ERROR(d.ImportFact(std::move(r), &id));
    if (pId) *pId = static_cast<int64_t>(id);
    return Status::OK();
  });
}

int agentmem_meta_set(agentmem_db* db, const char* key, const char* value) {
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(key, "key"));
    AGENTMEM_RETURN_IF_ERROR(Need(value, "value"));
    return d.SetSyncMeta(key, value);
  });
}

int agentmem_meta_get(agentmem_db* db, const char* key, char** pzValue) {
  if (pzValue) *pzValue = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(key, "key"));
    AGENTMEM_RETURN_IF_ERROR(Need(pzValue, "pzValue"));
    std::string value;
    AGENTMEM_RETURN_IF_ERROR(d.GetMeta(key, &value));
    return CopyOut(value, pzValue);
  });
}

}  // extern "C"

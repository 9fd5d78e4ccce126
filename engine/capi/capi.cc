// engine/capi/capi.cc -- the C ABI of include/agentmem.h over engine::Database.
//
// Exceptions stop here: every entry point runs inside Guard(), which maps
// std::bad_alloc to AGENTMEM_NOMEM and anything else to AGENTMEM_INTERNAL.
// Handles are checked against a registry of live handles, so a closed or
// foreign pointer gets AGENTMEM_MISUSE instead of a crash.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_set>
#ifdef __GLIBC__
#include <malloc.h>  // malloc_trim
#endif

#include "agentmem.h"
#include "engine/capi/capi_internal.h"
#include "engine/memory/changes.h"
#include "engine/memory/database.h"
#include "engine/sql/session.h"

using agentmem::Status;
namespace eng = agentmem::engine;
namespace fmt = agentmem::format;

// The public codes must equal the internal ones.
static_assert(AGENTMEM_CORRUPT == agentmem::kCorrupt && AGENTMEM_DONE == agentmem::kDone &&
              AGENTMEM_ROW == agentmem::kRow && AGENTMEM_RANGE == agentmem::kRange &&
              AGENTMEM_ABORT == agentmem::kAbort &&
              AGENTMEM_TOOBIG == agentmem::kTooBig && AGENTMEM_MISMATCH == agentmem::kMismatch &&
              AGENTMEM_NOTFOUND == agentmem::kNotFound && AGENTMEM_BUSY == agentmem::kBusy &&
              AGENTMEM_IOERR_FSYNC == agentmem::kIoErrFsync &&
              AGENTMEM_IOERR_STICKY == agentmem::kIoErrSticky &&
              AGENTMEM_CORRUPT_CHECKSUM == agentmem::kCorruptChecksum &&
              AGENTMEM_CORRUPT_HEADER == agentmem::kCorruptHeader &&
              AGENTMEM_MISMATCH_JSON == agentmem::kMismatchJson &&
              AGENTMEM_CANTOPEN_EXISTS == agentmem::kCantOpenExists &&
              AGENTMEM_READONLY_FILE == agentmem::kReadOnlyFile &&
              AGENTMEM_NOTFOUND_CHANGES == agentmem::kNotFoundChanges,
              "include/agentmem.h and format/codes.h disagree");

agentmem_db::agentmem_db() = default;
agentmem_db::~agentmem_db() = default;

struct agentmem_cursor {
  enum Kind { kEpisodes, kBlocks, kFacts, kHits, kChanges } kind;
  agentmem_db* owner = nullptr;
  std::vector<uint64_t> ids;
  std::vector<fmt::BlockRecord> blocks;
  std::vector<fmt::FactRecord> facts;
  size_t next = 0;
  bool has_row = false;
  fmt::EpisodeRecord episode;
  agentmem_episode episode_row{};
  agentmem_block block_row{};
  agentmem_fact fact_row{};
  std::vector<int64_t> fact_sources;
  std::vector<eng::RecallHit> hits;
  agentmem_hit hit_row{};
  // The episode and recall cursors read their rows as they step: they hold
  // the handle's read snapshot from creation to close, so a forget committed
  // meanwhile by another handle does not reach them. Released under the
  // handle's mutex by agentmem_cursor_close.
  eng::ReadPin pin;
  // The change feed (agentmem_changes_since), which holds its own pin.
  std::unique_ptr<eng::ChangeFeed> feed;
  eng::Change change;
  agentmem_change change_row{};
};

namespace {
std::mutex g_live_mu;
std::unordered_set<const void*>& Live() {
  static auto* live = new std::unordered_set<const void*>;
  return *live;
}
}  // namespace

namespace agentmem::capi {

bool IsLive(const void* p) {
  std::lock_guard<std::mutex> g(g_live_mu);
  return p && Live().count(p);
}
void SetLive(const void* p, bool live) {
  std::lock_guard<std::mutex> g(g_live_mu);
  if (live) Live().insert(p);
  else Live().erase(p);
}

int Record(agentmem_db* db, const Status& s) {
  db->errcode = s.code();
  if (s.ok()) {
    db->errmsg.assign("not an error");
  } else {
    db->errmsg = s.message();
  }
  return s.code();
}

Status Need(const void* p, const char* what) {
  if (p) return Status::OK();
  return agentmem::StatusF(agentmem::kMisuse, "%s must not be NULL", what);
}

Status EpisodeOf(const agentmem_episode& ep, format::EpisodeRecord* out) {
  AGENTMEM_RETURN_IF_ERROR(Need(ep.user_id, "user_id"));
  AGENTMEM_RETURN_IF_ERROR(Need(ep.session_id, "session_id"));
  AGENTMEM_RETURN_IF_ERROR(Need(ep.role, "role"));
  AGENTMEM_RETURN_IF_ERROR(Need(ep.text, "text"));
  if (ep.dim < 0 || (ep.dim > 0 && !ep.vector)) {
    return Status(kMisuse, "vector must be non-NULL when dim > 0, and dim >= 0");
  }
  out->user_id = ep.user_id;
  out->session_id = ep.session_id;
  out->role = ep.role;
  out->text = ep.text;
  out->ts = ep.ts;
  out->metadata = ep.metadata ? ep.metadata : "";
  if (ep.dim > 0) out->vector.assign(ep.vector, ep.vector + ep.dim);
  return Status::OK();
}

Status CopyOut(const std::string& s, char** out) {
  *out = static_cast<char*>(std::malloc(s.size() + 1));
  if (!*out) return Status(kNoMem, "out of memory");
  std::memcpy(*out, s.c_str(), s.size() + 1);
  return Status::OK();
}

}  // namespace agentmem::capi

using agentmem::capi::Guard;
using agentmem::capi::IsLive;
using agentmem::capi::Need;
using agentmem::capi::Record;
using agentmem::capi::RecordShort;
using agentmem::capi::SetLive;

namespace {

// Packs a struct and the strings it points to into one malloc'd block, so the
// caller frees everything with one agentmem_free().
class Packer {
 public:
  explicit Packer(size_t struct_size) : size_(Align(struct_size)) {}
  void Reserve(size_t n) { size_ += Align(n); }
  bool Allocate() {
    base_ = static_cast<char*>(std::calloc(1, size_));
    used_ = 0;
    return base_ != nullptr;
  }
  void* Struct(size_t struct_size) {
    used_ = Align(struct_size);
    return base_;
  }
  const char* Str(const std::string& s) {
    char* p = base_ + used_;
    std::memcpy(p, s.c_str(), s.size() + 1);
    used_ += Align(s.size() + 1);
    return p;
  }
  void* Bytes(const void* src, size_t n) {
    char* p = base_ + used_;
    if (n) std::memcpy(p, src, n);
    used_ += Align(n);
    return p;
  }

 private:
  static size_t Align(size_t n) { return (n + 15) & ~size_t{15}; }
  size_t size_;
  size_t used_ = 0;
  char* base_ = nullptr;
};

void FillEpisode(const fmt::EpisodeRecord& r, agentmem_episode* e,
                 const std::function<const char*(const std::string&)>& str) {
  e->id = static_cast<int64_t>(r.id);
  e->user_id = str(r.user_id);
  e->session_id = str(r.session_id);
  e->role = str(r.role);
  e->text = str(r.text);
  e->ts = r.ts;
  e->created_at = r.created_at;
  e->metadata = str(r.metadata);
  e->dim = static_cast<int>(r.vector.size());
}

void FillBlock(const fmt::BlockRecord& r, agentmem_block* b,
               const std::function<const char*(const std::string&)>& str) {
  b->user_id = str(r.user_id);
  b->name = str(r.name);
  b->value = str(r.value);
  b->limit = static_cast<int>(r.limit);
  b->pinned_order = r.pinned_order;
  b->updated_at = r.updated_at;
  b->version = static_cast<int64_t>(r.version);
}

void FillFact(const fmt::FactRecord& r, agentmem_fact* f,
              const std::function<const char*(const std::string&)>& str) {
  f->id = static_cast<int64_t>(r.id);
  f->user_id = str(r.user_id);
  f->subject = str(r.subject);
  f->predicate = str(r.predicate);
  f->object = str(r.object);
  f->confidence = r.confidence;
  f->n_sources = static_cast<int>(r.source_episode_ids.size());
  f->valid_from = r.valid_from;
  f->valid_to = r.valid_to;
  f->recorded_at = r.recorded_at;
  f->expired_at = r.expired_at;
}

const char* Borrow(const std::string& s) { return s.c_str(); }

void FillChange(const eng::Change& c, agentmem_change* row) {
  row->log_id = c.log_id;
  row->seq = static_cast<int64_t>(c.seq);
  row->kind = static_cast<int>(c.kind);
  row->kind_name = eng::ChangeKindName(c.kind);
  row->id = static_cast<int64_t>(c.id);
  row->user_id = c.user_id.c_str();
  row->data = c.data.c_str();
  row->vector = c.vector.empty() ? nullptr : c.vector.data();
  row->dim = static_cast<int>(c.vector.size());
  row->commit_ts = c.commit_ts;
}

Status NewCursor(agentmem_db* db, agentmem_cursor::Kind kind, agentmem_cursor** out) {
  auto* cur = new agentmem_cursor{};
  cur->kind = kind;
  cur->owner = db;
  *out = cur;
  return Status::OK();
}

Status BuildQuery(const char* user_id, const char* query, const agentmem_recall_options* o,
                  eng::RecallQuery* q) {
  AGENTMEM_RETURN_IF_ERROR(Need(query, "query"));
  agentmem_recall_options defaults;
  agentmem_recall_options_init(&defaults);
  if (!o) o = &defaults;
  if (o->version < 1 || o->version > AGENTMEM_RECALL_OPTIONS_VERSION) {
    return agentmem::StatusF(agentmem::kMisuse,
                             "recall options version %d is unknown; call "
                             "agentmem_recall_options_init() first",
                             o->version);
  }
  if (!o->all_users) AGENTMEM_RETURN_IF_ERROR(Need(user_id, "user_id"));
  if (o->k < 0 || o->k > 10000) return Status(agentmem::kRange, "recall k must be 0..10000");
  if (o->mode < AGENTMEM_RECALL_HYBRID || o->mode > AGENTMEM_RECALL_VECTOR) {
    return Status(agentmem::kMisuse, "recall mode must be hybrid, bm25 or vector");
  }
  if (o->query_dim < 0 || (o->query_dim > 0 && !o->query_vector)) {
    return Status(agentmem::kMisuse, "query_vector must be non-NULL when query_dim > 0");
  }
  if ((o->metadata_key == nullptr) != (o->metadata_value == nullptr) ||
      (o->metadata_key && !*o->metadata_key)) {
    return Status(agentmem::kMisuse, "metadata_key and metadata_value go together, key non-empty");
  }
  if (o->half_life_s < 0 || o->rrf_k < 1) {
    return Status(agentmem::kRange, "half_life_s must be >= 0 and rrf_k >= 1");
  }
  q->user_id = user_id ? user_id : "";
  q->all_users = o->all_users != 0;
  q->text = query;
  q->k = static_cast<size_t>(o->k);
  q->mode = static_cast<eng::RecallMode>(o->mode);
  if (o->session_id) q->session_id = o->session_id;
  if (o->role) q->role = o->role;
  q->ts_from = o->ts_from;
  q->ts_to = o->ts_to;
  if (o->query_dim > 0) q->vector.assign(o->query_vector, o->query_vector + o->query_dim);
  q->half_life_s = o->half_life_s;
  q->min_score = o->min_score;
  q->rrf_k = o->rrf_k;
  if (o->version >= 2) {
    if (std::isnan(o->min_bm25)) return Status(agentmem::kRange, "min_bm25 must be a number");
    q->fill = o->fill != 0;
    q->min_similarity = o->min_similarity;
    q->min_bm25 = o->min_bm25;
  }
  return Status::OK();
}

std::string MetaKey(const agentmem_recall_options* o) {
  return o && o->metadata_key ? o->metadata_key : "";
}
std::string MetaValue(const agentmem_recall_options* o) {
  return o && o->metadata_value ? o->metadata_value : "null";
}

}  // namespace

extern "C" {

void agentmem_recall_options_init(agentmem_recall_options* o) {
  if (!o) return;
  *o = agentmem_recall_options{};
  o->version = AGENTMEM_RECALL_OPTIONS_VERSION;
  o->k = 10;
  o->mode = AGENTMEM_RECALL_HYBRID;
  o->ts_from = INT64_MIN;
  o->ts_to = INT64_MAX;
  o->rrf_k = 60;
  o->min_similarity = NAN;
}

int agentmem_recall(agentmem_db* db, const char* user_id, const char* query,
                    const agentmem_recall_options* opts, agentmem_cursor** ppCur) {
  if (ppCur) *ppCur = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(ppCur, "ppCur"));
    eng::RecallQuery q;
    AGENTMEM_RETURN_IF_ERROR(BuildQuery(user_id, query, opts, &q));
    std::vector<eng::RecallHit> hits;
    eng::ReadPin pin;
    AGENTMEM_RETURN_IF_ERROR(pin.Begin(&d));
    AGENTMEM_RETURN_IF_ERROR(d.Recall(q, MetaKey(opts), MetaValue(opts), &hits, nullptr));
    AGENTMEM_RETURN_IF_ERROR(NewCursor(db, agentmem_cursor::kHits, ppCur));
    (*ppCur)->hits = std::move(hits);
    (*ppCur)->pin = std::move(pin);
    db->open_cursors++;
    return Status::OK();
  });
}

int agentmem_explain_recall(agentmem_db* db, const char* user_id, const char* query,
                            const agentmem_recall_options* opts, char** pzPlan) {
  if (pzPlan) *pzPlan = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(pzPlan, "pzPlan"));
    eng::RecallQuery q;
    AGENTMEM_RETURN_IF_ERROR(BuildQuery(user_id, query, opts, &q));
    std::vector<eng::RecallHit> hits;
    eng::RecallPlan plan;
    AGENTMEM_RETURN_IF_ERROR(d.Recall(q, MetaKey(opts), MetaValue(opts), &hits, &plan));
    std::string json = eng::ExplainJson(plan, hits);
    *pzPlan = static_cast<char*>(std::malloc(json.size() + 1));
    if (!*pzPlan) return Status(agentmem::kNoMem, "out of memory");
    std::memcpy(*pzPlan, json.c_str(), json.size() + 1);
    return Status::OK();
  });
}

const char* agentmem_libversion(void) { return AGENTMEM_VERSION; }

const char* agentmem_errstr(int code) { return agentmem::CodeString(code); }

int agentmem_open_v2(const char* zPath, agentmem_db** ppDb, int flags, const char* zOptions) {
  if (!ppDb) return AGENTMEM_MISUSE;
  *ppDb = nullptr;
  agentmem_db* h = new (std::nothrow) agentmem_db;
  if (!h) return AGENTMEM_NOMEM;
  try {
    SetLive(h, true);
  } catch (...) {  // the registry could not grow: no handle to return
    delete h;
    return AGENTMEM_NOMEM;
  }
  *ppDb = h;
  std::lock_guard<std::mutex> g(h->mu);
  try {
    eng::Options opts;
    Status s = Need(zPath, "path");
    bool ro = flags & AGENTMEM_OPEN_READONLY, rw = flags & AGENTMEM_OPEN_READWRITE;
    if (s.ok() && (ro == rw || (flags & ~0x07) || (ro && (flags & AGENTMEM_OPEN_CREATE)))) {
      s = Status(agentmem::kMisuse,
                 "flags must be AGENTMEM_OPEN_READONLY, or AGENTMEM_OPEN_READWRITE with an "
                 "optional AGENTMEM_OPEN_CREATE");
    }
    if (s.ok()) s = eng::ParseOptions(zOptions, &opts);
    if (s.ok()) {
      opts.read_only = ro;
      opts.create = (flags & AGENTMEM_OPEN_CREATE) != 0;
      std::string path = zPath;
      if (path == ":memory:") {
        if (ro) {
          s = Status(agentmem::kMisuse, "\":memory:\" cannot be opened read-only");
        } else {
          h->mem_env = eng::NewMemEnv();
          opts.env = h->mem_env.get();
          opts.create = true;
          opts.sync = eng::SyncMode::kOff;
          path = "memory";
        }
      }
      if (s.ok()) s = eng::Database::Open(path, opts, &h->db);
    }
    return Record(h, s);
  } catch (const std::bad_alloc&) {
    return RecordShort(h, agentmem::kNoMem, "out of memory");
  } catch (...) {
    return RecordShort(h, agentmem::kInternal, "internal error");
  }
}

int agentmem_open(const char* zPath, agentmem_db** ppDb) {
  return agentmem_open_v2(zPath, ppDb, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE, nullptr);
}

namespace {

// After closing a handle of at least this many episodes, the heap it freed
// goes back to the system: glibc keeps freed memory for reuse, so the
// process would stay at the size of its largest handle, and a next open
// would add its own memory to that. Giving it back costs milliseconds (it
// walks the free heap), next to the seconds such a handle took to close.
constexpr uint64_t kReleaseAfterEpisodes = 10000;

void ReleaseFreedMemory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace

int agentmem_close(agentmem_db* db) {
  if (!db) return AGENTMEM_OK;
  if (!IsLive(db)) return AGENTMEM_MISUSE;
  Status s;
  int code = AGENTMEM_OK;
  bool large = false;
  {
    std::lock_guard<std::mutex> g(db->mu);
    if (db->open_cursors > 0) {
      return Record(db, agentmem::StatusF(agentmem::kBusy,
                                          "unable to close: %d cursor(s) still open",
                                          db->open_cursors));
    }
    if (db->open_stmts > 0) {
      return Record(db, agentmem::StatusF(agentmem::kBusy,
                                          "unable to close: %d prepared statement(s) not "
                                          "finalized",
                                          db->open_stmts));
    }
    SetLive(db, false);
    try {
      // The SQL connection first: closing it rolls back an open SQL
      // transaction through the virtual tables, which still need the Database.
      db->sql.reset();
      large = db->db && db->db->episode_count() >= kReleaseAfterEpisodes;
      if (db->db) s = db->db->Close();
    } catch (const std::bad_alloc&) {  // no Status built here: it would allocate
      code = agentmem::kNoMem;
    } catch (...) {
      code = agentmem::kInternal;
    }
  }
  delete db;
  if (large) ReleaseFreedMemory();
  return code != AGENTMEM_OK ? code : s.code();
}

int agentmem_errcode(agentmem_db* db) { return agentmem_extended_errcode(db) & 0xff; }

int agentmem_extended_errcode(agentmem_db* db) {
  if (!db) return AGENTMEM_NOMEM;
  if (!IsLive(db)) return AGENTMEM_MISUSE;
  std::lock_guard<std::mutex> g(db->mu);
  return db->errcode;
}

const char* agentmem_errmsg(agentmem_db* db) {
  if (!db) return "out of memory";
  if (!IsLive(db)) return "bad parameter or API misuse: the handle is closed or invalid";
  std::lock_guard<std::mutex> g(db->mu);
  return db->errmsg.c_str();
}

void agentmem_free(void* p) { std::free(p); }

int agentmem_begin(agentmem_db* db) {
  return Guard(db, [](eng::Database& d) { return d.Begin(); });
}
int agentmem_commit(agentmem_db* db) {
  return Guard(db, [](eng::Database& d) { return d.Commit(); });
}
int agentmem_rollback(agentmem_db* db) {
  return Guard(db, [](eng::Database& d) { return d.Rollback(); });
}

int agentmem_remember(agentmem_db* db, const char* user_id, const char* session_id, const char* role,
                      const char* text, int64_t ts, const char* metadata, const float* vector,
                      int dim, int64_t* pId) {
  return Guard(db, [&](eng::Database& d) -> Status {
    agentmem_episode ep{};
    ep.user_id = user_id;
    ep.session_id = session_id;
    ep.role = role;
    ep.text = text;
    ep.ts = ts;
    ep.metadata = metadata;
    ep.vector = vector;
    ep.dim = dim;
    fmt::EpisodeRecord r;
    AGENTMEM_RETURN_IF_ERROR(agentmem::capi::EpisodeOf(ep, &r));
    uint64_t id = 0;
    AGENTMEM_RETURN_IF_ERROR(d.Remember(std::move(r), &id));
    if (pId) *pId = static_cast<int64_t>(id);
    return Status::OK();
  });
}

int agentmem_episode_get(agentmem_db* db, int64_t id, agentmem_episode** ppEp) {
  if (ppEp) *ppEp = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(ppEp, "ppEp"));
    fmt::EpisodeRecord r;
    if (id <= 0) return agentmem::StatusF(agentmem::kNotFound, "no episode with id %lld",
                                          static_cast<long long>(id));
    AGENTMEM_RETURN_IF_ERROR(d.GetEpisode(static_cast<uint64_t>(id), &r));
    Packer pk(sizeof(agentmem_episode));
    for (const std::string* s : {&r.user_id, &r.session_id, &r.role, &r.text, &r.metadata}) {
      pk.Reserve(s->size() + 1);
    }
    pk.Reserve(r.vector.size() * sizeof(float));
    if (!pk.Allocate()) return Status(agentmem::kNoMem, "out of memory");
    auto* e = static_cast<agentmem_episode*>(pk.Struct(sizeof(agentmem_episode)));
    FillEpisode(r, e, [&](const std::string& s) { return pk.Str(s); });
    e->vector = r.vector.empty() ? nullptr
                                 : static_cast<const float*>(pk.Bytes(r.vector.data(),
                                                                      r.vector.size() * 4));
    *ppEp = e;
    return Status::OK();
  });
}

int agentmem_episodes(agentmem_db* db, const char* user_id, const char* session_id,
                      agentmem_cursor** ppCur) {
  if (ppCur) *ppCur = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(ppCur, "ppCur"));
    AGENTMEM_RETURN_IF_ERROR(Need(user_id, "user_id"));
    std::string session = session_id ? session_id : "";
    std::vector<uint64_t> ids;
    eng::ReadPin pin;
    AGENTMEM_RETURN_IF_ERROR(pin.Begin(&d));
    AGENTMEM_RETURN_IF_ERROR(
        d.ListEpisodeIdsByTime(user_id, session_id ? &session : nullptr, &ids));
    AGENTMEM_RETURN_IF_ERROR(NewCursor(db, agentmem_cursor::kEpisodes, ppCur));
    (*ppCur)->ids = std::move(ids);
    (*ppCur)->pin = std::move(pin);
    db->open_cursors++;
    return Status::OK();
  });
}

int agentmem_block_set(agentmem_db* db, const char* user_id, const char* name, const char* value,
                       int limit, int pinned_order) {
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(user_id, "user_id"));
    AGENTMEM_RETURN_IF_ERROR(Need(name, "name"));
    AGENTMEM_RETURN_IF_ERROR(Need(value, "value"));
    if (limit < 0) return Status(agentmem::kRange, "block limit must be >= 0");
    fmt::BlockRecord r;
    r.user_id = user_id;
    r.name = name;
    r.value = value;
    r.limit = static_cast<uint32_t>(limit);
    r.pinned_order = pinned_order < 0 ? -1 : pinned_order;
    return d.SetBlock(std::move(r));
  });
}

int agentmem_block_get(agentmem_db* db, const char* user_id, const char* name,
                       agentmem_block** ppBlock) {
  if (ppBlock) *ppBlock = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(ppBlock, "ppBlock"));
    AGENTMEM_RETURN_IF_ERROR(Need(user_id, "user_id"));
    AGENTMEM_RETURN_IF_ERROR(Need(name, "name"));
    fmt::BlockRecord r;
    AGENTMEM_RETURN_IF_ERROR(d.GetBlock(user_id, name, &r));
    Packer pk(sizeof(agentmem_block));
    for (const std::string* s : {&r.user_id, &r.name, &r.value}) pk.Reserve(s->size() + 1);
    if (!pk.Allocate()) return Status(agentmem::kNoMem, "out of memory");
    auto* b = static_cast<agentmem_block*>(pk.Struct(sizeof(agentmem_block)));
    FillBlock(r, b, [&](const std::string& s) { return pk.Str(s); });
    *ppBlock = b;
    return Status::OK();
  });
}

int agentmem_blocks(agentmem_db* db, const char* user_id, agentmem_cursor** ppCur) {
  if (ppCur) *ppCur = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(ppCur, "ppCur"));
    AGENTMEM_RETURN_IF_ERROR(Need(user_id, "user_id"));
    std::vector<fmt::BlockRecord> blocks;
    AGENTMEM_RETURN_IF_ERROR(d.ListBlocks(user_id, &blocks));
    AGENTMEM_RETURN_IF_ERROR(NewCursor(db, agentmem_cursor::kBlocks, ppCur));
    (*ppCur)->blocks = std::move(blocks);
    db->open_cursors++;
    return Status::OK();
  });
}

int agentmem_fact_assert(agentmem_db* db, const char* user_id, const char* subject,
                         const char* predicate, const char* object, double confidence,
                         int64_t valid_from, int64_t valid_to, const int64_t* source_ids,
                         int n_sources, int64_t* pId) {
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(user_id, "user_id"));
    AGENTMEM_RETURN_IF_ERROR(Need(subject, "subject"));
    AGENTMEM_RETURN_IF_ERROR(Need(predicate, "predicate"));
    AGENTMEM_RETURN_IF_ERROR(Need(object, "object"));
    if (n_sources < 0 || (n_sources > 0 && !source_ids)) {
      return Status(agentmem::kMisuse, "source_ids must be non-NULL when n_sources > 0");
    }
    fmt::FactRecord r;
    r.user_id = user_id;
    r.subject = subject;
    r.predicate = predicate;
    r.object = object;
    r.confidence = static_cast<float>(confidence);
    if (!(confidence >= 0.0 && confidence <= 1.0)) {
      return Status(agentmem::kRange, "fact confidence must be between 0 and 1");
    }
    r.valid_from = valid_from;
    r.valid_to = valid_to;
    for (int i = 0; i < n_sources; i++) {
      r.source_episode_ids.push_back(static_cast<uint64_t>(source_ids[i]));
    }
    uint64_t id = 0;
    AGENTMEM_RETURN_IF_ERROR(d.AssertFact(std::move(r), &id));
    if (pId) *pId = static_cast<int64_t>(id);
    return Status::OK();
  });
}

int agentmem_facts(agentmem_db* db, const char* user_id, const char* subject, const char* predicate,
                   agentmem_cursor** ppCur) {
  if (ppCur) *ppCur = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(ppCur, "ppCur"));
    AGENTMEM_RETURN_IF_ERROR(Need(user_id, "user_id"));
    std::string s = subject ? subject : "", p = predicate ? predicate : "";
    std::vector<fmt::FactRecord> facts;
    AGENTMEM_RETURN_IF_ERROR(
        d.ListFacts(user_id, subject ? &s : nullptr, predicate ? &p : nullptr, &facts));
    AGENTMEM_RETURN_IF_ERROR(NewCursor(db, agentmem_cursor::kFacts, ppCur));
    (*ppCur)->facts = std::move(facts);
    db->open_cursors++;
    return Status::OK();
  });
}

int agentmem_predicate_declare(agentmem_db* db, const char* predicate, int single_valued) {
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(predicate, "predicate"));
    return d.DeclarePredicate(predicate, single_valued != 0);
  });
}

int agentmem_facts_v2(agentmem_db* db, const char* user_id, const char* subject,
                      const char* predicate, const char* object, int64_t valid_at,
                      int64_t known_at, int flags, agentmem_cursor** ppCur) {
  if (ppCur) *ppCur = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(ppCur, "ppCur"));
    AGENTMEM_RETURN_IF_ERROR(Need(user_id, "user_id"));
    if (flags & ~AGENTMEM_FACTS_ALL_VERSIONS) return Status(agentmem::kMisuse, "unknown flags");
    eng::FactQuery q;
    q.user_id = user_id;
    if (subject) q.subject = subject;
    if (predicate) q.predicate = predicate;
    if (object) q.object = object;
    q.valid_at = valid_at;
    q.known_at = known_at;
    q.all_versions = flags & AGENTMEM_FACTS_ALL_VERSIONS;
    std::vector<fmt::FactRecord> facts;
    AGENTMEM_RETURN_IF_ERROR(d.QueryFacts(q, &facts));
    AGENTMEM_RETURN_IF_ERROR(NewCursor(db, agentmem_cursor::kFacts, ppCur));
    (*ppCur)->facts = std::move(facts);
    db->open_cursors++;
    return Status::OK();
  });
}

int agentmem_changes_since(agentmem_db* db, uint64_t log_id, int64_t since,
                           agentmem_cursor** ppCur) {
  if (ppCur) *ppCur = nullptr;
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(ppCur, "ppCur"));
    if (since < 0) return Status(agentmem::kRange, "since must be >= 0");
    std::unique_ptr<eng::ChangeFeed> feed;
    AGENTMEM_RETURN_IF_ERROR(
        eng::ChangeFeed::Open(&d, log_id, static_cast<uint64_t>(since), &feed));
    AGENTMEM_RETURN_IF_ERROR(NewCursor(db, agentmem_cursor::kChanges, ppCur));
    (*ppCur)->feed = std::move(feed);
    db->open_cursors++;
    return Status::OK();
  });
}

int agentmem_changes_head(agentmem_db* db, uint64_t* pLogId, int64_t* pSeq) {
  return Guard(db, [&](eng::Database& d) -> Status {
    uint64_t log_id = 0, seq = 0;
    AGENTMEM_RETURN_IF_ERROR(eng::ChangeFeed::Head(&d, &log_id, &seq));
    if (pLogId) *pLogId = log_id;
    if (pSeq) *pSeq = static_cast<int64_t>(seq);
    return Status::OK();
  });
}

int agentmem_cursor_step(agentmem_cursor* cur) {
  if (!cur) return AGENTMEM_MISUSE;
  cur->has_row = false;
  return Guard(cur->owner, [&](eng::Database& d) -> Status {
    switch (cur->kind) {
      case agentmem_cursor::kEpisodes: {
        if (cur->next >= cur->ids.size()) return Status(agentmem::kDone, "no more rows");
        AGENTMEM_RETURN_IF_ERROR(d.GetEpisode(cur->ids[cur->next++], &cur->episode));
        FillEpisode(cur->episode, &cur->episode_row, Borrow);
        cur->episode_row.vector = cur->episode.vector.empty() ? nullptr : cur->episode.vector.data();
        break;
      }
      case agentmem_cursor::kBlocks: {
        if (cur->next >= cur->blocks.size()) return Status(agentmem::kDone, "no more rows");
        FillBlock(cur->blocks[cur->next++], &cur->block_row, Borrow);
        break;
      }
      case agentmem_cursor::kFacts: {
        if (cur->next >= cur->facts.size()) return Status(agentmem::kDone, "no more rows");
        const fmt::FactRecord& f = cur->facts[cur->next++];
        FillFact(f, &cur->fact_row, Borrow);
        cur->fact_sources.assign(f.source_episode_ids.begin(), f.source_episode_ids.end());
        cur->fact_row.source_episode_ids =
            cur->fact_sources.empty() ? nullptr : cur->fact_sources.data();
        break;
      }
      case agentmem_cursor::kChanges: {
        bool done = false;
        AGENTMEM_RETURN_IF_ERROR(cur->feed->Next(&cur->change, &done));
        if (done) return Status(agentmem::kDone, "no more rows");
        FillChange(cur->change, &cur->change_row);
        break;
      }
      case agentmem_cursor::kHits: {
        if (cur->next >= cur->hits.size()) return Status(agentmem::kDone, "no more rows");
        const eng::RecallHit& h = cur->hits[cur->next++];
        AGENTMEM_RETURN_IF_ERROR(d.GetEpisode(h.id, &cur->episode));
        agentmem_hit& row = cur->hit_row;
        row.id = static_cast<int64_t>(h.id);
        row.user_id = cur->episode.user_id.c_str();
        row.session_id = cur->episode.session_id.c_str();
        row.role = cur->episode.role.c_str();
        row.text = cur->episode.text.c_str();
        row.ts = cur->episode.ts;
        row.score = h.score;
        row.bm25_score = h.bm25_score;
        row.vector_score = h.vector_score;
        row.bm25_rank = h.bm25_rank;
        row.vector_rank = h.vector_rank;
        break;
      }
    }
    cur->has_row = true;
    return Status(agentmem::kRow, "row ready");
  });
}

const agentmem_episode* agentmem_cursor_episode(agentmem_cursor* cur) {
  return cur && cur->has_row && cur->kind == agentmem_cursor::kEpisodes ? &cur->episode_row
                                                                         : nullptr;
}
const agentmem_block* agentmem_cursor_block(agentmem_cursor* cur) {
  return cur && cur->has_row && cur->kind == agentmem_cursor::kBlocks ? &cur->block_row : nullptr;
}
const agentmem_hit* agentmem_cursor_hit(agentmem_cursor* cur) {
  return cur && cur->has_row && cur->kind == agentmem_cursor::kHits ? &cur->hit_row : nullptr;
}
const agentmem_change* agentmem_cursor_change(agentmem_cursor* cur) {
  return cur && cur->has_row && cur->kind == agentmem_cursor::kChanges ? &cur->change_row
                                                                        : nullptr;
}
const agentmem_fact* agentmem_cursor_fact(agentmem_cursor* cur) {
  return cur && cur->has_row && cur->kind == agentmem_cursor::kFacts ? &cur->fact_row : nullptr;
}

int agentmem_cursor_close(agentmem_cursor* cur) {
  if (!cur) return AGENTMEM_OK;
  if (IsLive(cur->owner)) {
    std::lock_guard<std::mutex> g(cur->owner->mu);
    cur->owner->open_cursors--;
    delete cur;  // its ReadPin ends the snapshot, under the handle's mutex
    return AGENTMEM_OK;
  }
  cur->pin.Detach();  // the handle, and its Database, are gone
  if (cur->feed) cur->feed->Detach();
  delete cur;
  return AGENTMEM_OK;
}

int agentmem_stats_get(agentmem_db* db, agentmem_stats* pStats) {
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(Need(pStats, "pStats"));
    eng::Stats s;
    AGENTMEM_RETURN_IF_ERROR(d.GetStats(&s));
    *pStats = agentmem_stats{};
    pStats->file_bytes = static_cast<int64_t>(s.file_bytes);
    pStats->episodes = static_cast<int64_t>(s.episodes);
    pStats->blocks = static_cast<int64_t>(s.blocks);
    pStats->block_versions = static_cast<int64_t>(s.block_versions);
    pStats->facts = static_cast<int64_t>(s.facts);
    pStats->users = static_cast<int64_t>(s.users);
    pStats->commits = static_cast<int64_t>(s.commits);
    pStats->text_bytes = static_cast<int64_t>(s.text_bytes);
    pStats->pages = static_cast<int64_t>(s.pages);
    pStats->syncs = static_cast<int64_t>(s.syncs);
    return Status::OK();
  });
}

}  // extern "C"

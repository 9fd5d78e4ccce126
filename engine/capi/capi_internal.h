// engine/capi/capi_internal.h -- what the C ABI's translation units share: the
// handle struct behind agentmem_db, the live-handle registry and Guard().
//
// engine/capi/capi.cc implements the record API over engine::Database;
// engine/capi/capi_sql.cc implements the SQL API (agentmem_exec, prepare, step,
// ...) over an sql::Session. Both run every entry point inside Guard(): the
// handle's mutex is held for the whole call and exceptions become codes.
// Code that runs under Guard (the virtual tables run inside sqlite3_step)
// must call Database methods directly, never a public agentmem_* function on
// the same handle: the mutex is not recursive.
#pragma once

#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "agentmem.h"
#include "engine/memory/database.h"
#include "engine/env/env.h"

namespace agentmem::engine::sql {
class Session;
}

struct agentmem_db {
  agentmem_db();
  ~agentmem_db();  // defined in capi.cc, where sql::Session is complete
  std::mutex mu;
  std::unique_ptr<agentmem::engine::Env> mem_env;  // for ":memory:"
  std::unique_ptr<agentmem::engine::Database> db;
  // The SQL connection, created by the first SQL call (engine/sql/session.h)
  // and closed before the Database in agentmem_close().
  std::unique_ptr<agentmem::engine::sql::Session> sql;
  int errcode = AGENTMEM_OK;
  std::string errmsg = "not an error";
  int open_cursors = 0;
  int open_stmts = 0;  // prepared statements not yet finalized (agentmem_close refuses)
};

namespace agentmem::capi {

bool IsLive(const void* p);
void SetLive(const void* p, bool live);

// Stores s as the handle's most recent result; returns its code.
int Record(agentmem_db* db, const Status& s);

// Stores a code with a message of at most 15 characters, which std::string
// keeps in its inline buffer: no allocation, so it cannot fail when memory is
// exhausted (the out-of-memory paths below use it).
inline int RecordShort(agentmem_db* db, int code, const char* msg) noexcept {
  db->errcode = code;
  try {
    db->errmsg.assign(msg);
  } catch (...) {
    db->errmsg.clear();
  }
  return code;
}

// Runs f(Database&) under the handle's mutex, with exceptions turned into
// codes; records and returns f's Status code. Nothing here allocates once an
// allocation has failed: the handler of std::bad_alloc builds no Status, and a
// message that cannot be copied is replaced by "out of memory" (the code is
// kept).
template <typename F>
int Guard(agentmem_db* db, F&& f) {
  if (!IsLive(db)) return AGENTMEM_MISUSE;
  std::lock_guard<std::mutex> g(db->mu);
  Status s;
  try {
    s = db->db ? f(*db->db) : Status(kMisuse, "the database did not open");
  } catch (const std::bad_alloc&) {
    // The operation stopped half done: the handle's memory may no longer
    // match the file, so it refuses everything until reopened.
    if (db->db) db->db->Poison();
    return RecordShort(db, kNoMem, "out of memory");
  } catch (const std::exception& e) {
    if (db->db) db->db->Poison();
    try {
      s = Status(kInternal, std::string("internal error: ") + e.what());
    } catch (...) {
      return RecordShort(db, kInternal, "internal error");
    }
  } catch (...) {
    if (db->db) db->db->Poison();
    return RecordShort(db, kInternal, "internal error");
  }
  try {
    return Record(db, s);
  } catch (...) {
    return RecordShort(db, s.code(), "out of memory");
  }
}

Status Need(const void* p, const char* what);

// The episode of agentmem_remember's arguments (an agentmem_episode's fields
// less created_at), its pointers checked.
Status EpisodeOf(const agentmem_episode& ep, format::EpisodeRecord* out);

// A malloc'd, NUL-terminated copy of s in *out, for agentmem_free().
Status CopyOut(const std::string& s, char** out);

}  // namespace agentmem::capi

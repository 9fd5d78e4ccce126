// cli/sync/sync_internal.h -- what the parts of the sync (agentmem_sync()
// and `agentmem sync`) share: the connection, the PostgreSQL schema, the
// replica being synced, and the push (push.cc) and pull (pull.cc) steps
// (docs/replication.md, "agentmem sync").
#pragma once

#include <agentmem.h>

#include <cstdint>
#include <string>

#include "sync/pg.h"

namespace agentmem::sync {

// Times in the feed and in PostgreSQL: INT64_MAX is "no end".
constexpr int64_t kForever = INT64_MAX;
// Bounds on what a row read from PostgreSQL may hold.
constexpr size_t kMaxTextBytes = 64u << 20;
constexpr size_t kMaxVectorFloats = 65536;
// PostgreSQL transactions (push) and local transactions (pull) end at a
// source transaction's end once they hold this many changes.
constexpr int kChangesPerBatch = 1000;

// The file being synced and the connection. origin is the file's origin id
// (16 hexadecimal digits, meta key sync.origin), the name of its records in
// PostgreSQL.
struct Replica {
  agentmem_db* db;
  Pg* pg;
  std::string origin;
};

struct PushReport {
  std::string log;          // the file's log, hexadecimal
  int64_t first = 0, last = 0;  // the commits read (0 when none)
  int64_t changes = 0;      // change rows written
  int64_t skipped = 0;      // pulled transactions, and records already there
  bool resync = false;      // the log was read from its start (a VACUUM made a new one)
  // Every change of the file's own up to this position of its feed is in
  // PostgreSQL (0, 0: none).
  uint64_t pushed_log = 0;
  int64_t pushed_seq = 0;
  int64_t receipts = 0;     // receipt rows written (the file's own purge)
};

struct PullReport {
  int64_t changes = 0;   // change rows of other origins read
  int64_t position = 0;  // the global position the file has applied
  int64_t forgets = 0;   // forget rows applied
  bool purged = false;   // and then the file was vacuumed
  int64_t receipts = 0;  // receipt rows written after that vacuum
};

// A connection to conninfo with notices silenced, or nullptr with *error
// ("PostgreSQL: " and libpq's message). The caller PQfinish()es it.
PGconn* Connect(const char* conninfo, std::string* error);

// Takes the advisory lock that one sync at a time holds (released when the
// connection closes), and creates the schema when it is missing.
bool Lock(Pg* pg);

// Creates the tables, indexes and functions of docs/replication.md when
// they are missing; refuses tables of the earlier single-file sync.
bool CreateSchema(Pg* pg);

// Writes the file's changes that PostgreSQL does not hold under the file's
// origin, leaving out the transactions that pull wrote. false: pg->error().
bool Push(const Replica& r, PushReport* report);

// Applies every other origin's changes after the file's pulled position
// (meta key sync.pulled), one local transaction per batch that also moves
// the position. `push` says which of the file's own changes PostgreSQL
// holds: those after it were written meanwhile. false: pg->error().
bool Pull(const Replica& r, const PushReport& push, PullReport* report);

// What a replica proved after it purged a forget: how many forgotten byte
// strings (texts, vectors, block values of 16 bytes or more) it searched its
// file for, and how many of them it found (0: none remains).
struct Receipt {
  int64_t needles = 0;
  int64_t residue = 0;
};

// Records `replica`'s receipt for the forget transaction (origin, log, seq)
// in agentmem_receipts, unless it has one (a receipt is written once).
// *written grows by the rows written.
bool WriteReceipt(Pg* pg, const std::string& origin, const std::string& log, int64_t seq,
                  const std::string& replica, const Receipt& receipt, int64_t* written);

// Records `replica`'s receipt for every forget transaction of another
// origin up to global position `position` that it has none for: the vacuum
// after a pull purged them all. *written grows by the rows written.
bool WriteReceiptsPulled(Pg* pg, const std::string& replica, int64_t position,
                         const Receipt& receipt, int64_t* written);

// `agentmem sync --verify`: prints, for every forget in the change log, each
// replica's receipt and what PostgreSQL still holds of it. false when a
// statement or a row fails (pg->error()); *failed when a receipt has residue
// or PostgreSQL holds a forgotten row.
bool Verify(Pg* pg, bool* failed);

// Fails pg with the handle's last error: message "what: message", code the
// handle's (AGENTMEM_BUSY when another handle holds the write lock, ...).
bool FailOn(Pg* pg, agentmem_db* db, const char* what);

}  // namespace agentmem::sync

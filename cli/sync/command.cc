// cli/sync/command.cc -- `agentmem sync FILE CONNINFO` and `agentmem sync
// --verify [FILE] CONNINFO` (sync.h): opens FILE, runs agentmem_sync()
// (sync.cc) on it and prints its report; --verify then prints the receipts
// report (verify.cc).
#include <agentmem.h>
#include <agentmem_sync.h>
#include <libpq-fe.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "sync/sync.h"
#include "sync/sync_internal.h"

namespace agentmem::sync {
namespace {

constexpr const char* kUsage =
    "Usage: agentmem sync FILE CONNINFO\n"
    "Pushes FILE's own changes into PostgreSQL (CONNINFO: a libpq connection string or URI,\n"
    "e.g. postgresql://user@host/db) and applies every other file's changes found there.\n"
    "Tables agentmem_changes, episodes, blocks and facts are created when missing.\n"
    "Idempotent and resumable: a second run writes only what changed since.\n"
    "\n"
    "Usage: agentmem sync --verify [FILE] CONNINFO\n"
    "Syncs FILE first when it is given, then reports, for every forget in the change log\n"
    "and every replica PostgreSQL has seen, the replica's receipt (residue 0: none of the\n"
    "forgotten bytes remain in its file) or that it has not synced since, and whether\n"
    "PostgreSQL still holds forgotten rows. Exits 1 when a receipt has residue or a\n"
    "forgotten row is left; a replica not synced yet is not a failure.\n";

void Print(const agentmem_sync_report& r) {
  if (r.pushed == 0 && r.pulled == 0) {
    std::printf("up to date (origin %s, position %" PRId64 ")\n", r.origin, r.position);
    return;
  }
  std::printf("origin %s: pushed %" PRId64 " changes", r.origin, r.pushed);
  if (r.pushed > 0 && r.push_first) {
    std::printf(" (log %s, commits %" PRId64 " to %" PRId64 "%s)", r.log, r.push_first,
                r.push_last, r.resync ? ", from the start of the log" : "");
  }
  std::printf("; pulled %" PRId64 " changes, %" PRId64 " forgets%s, to position %" PRId64 "\n",
              r.pulled, r.forgets, r.purged ? " (purged)" : "", r.position);
}

// Syncs FILE through agentmem_sync() and prints what it did. false after
// printing the error.
bool SyncFile(const char* file, const char* conninfo) {
  agentmem_db* db = nullptr;
  if (agentmem_open_v2(file, &db, AGENTMEM_OPEN_READWRITE, nullptr) != AGENTMEM_OK) {
    std::fprintf(stderr, "Error: %s: %s\n", file, agentmem_errmsg(db));
    agentmem_close(db);
    return false;
  }
  agentmem_sync_report report{};
  report.version = AGENTMEM_SYNC_REPORT_VERSION;
  const int rc = agentmem_sync(db, conninfo, &report);
  agentmem_close(db);
  if (rc != AGENTMEM_OK) {
    std::fprintf(stderr, "Error: %s\n", report.errmsg);
    return false;
  }
  Print(report);
  return true;
}

// The receipts report, under the sync's lock. 0, or 1 after printing an
// error or when the report found a failure.
int VerifyAll(const char* conninfo) {
  std::string error;
  PGconn* conn = Connect(conninfo, &error);
  if (!conn) {
    std::fprintf(stderr, "Error: %s\n", error.c_str());
    return 1;
  }
  Pg pg(conn);
  bool failed = false;
  int status = 0;
  if (!Lock(&pg) || !Verify(&pg, &failed)) {
    std::fprintf(stderr, "Error: %s\n", pg.error().c_str());
    status = 1;
  } else if (failed) {
    status = 1;
  }
  PQfinish(conn);
  return status;
}

}  // namespace

int RunSync(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-help") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const bool verify = argc >= 2 && std::strcmp(argv[1], "--verify") == 0;
  const int first = verify ? 2 : 1;  // FILE, or CONNINFO when --verify has no FILE
  if (argc - first != 2 && !(verify && argc - first == 1)) {
    std::fputs(kUsage, stderr);
    return 1;
  }
  const char* file = argc - first == 2 ? argv[first] : nullptr;
  const char* conninfo = argv[argc - 1];
  if (file && !SyncFile(file, conninfo)) return 1;
  return verify ? VerifyAll(conninfo) : 0;
}

}  // namespace agentmem::sync

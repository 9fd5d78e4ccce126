// tests/reliability/ledger.h -- R7: one writer and several readers on one file,
// through the C API. Shared by the worker processes (worker.cc) and the
// in-process thread variant (readers_test.cc).
//
// The writer appends transactions. Transaction t holds K(t) = 1 + t % 4
// episodes of user "r7" (metadata {"t":t,"j":j,"k":K}, a unique word
// "tok<t>q<j>" in the text, a vector on the first) and a new version of block
// "ledger" whose value is "<t> <episodes> <xor of ids> <last id>". Readers loop:
// inside one snapshot they read the ledger and check that it agrees with the
// episodes they can see (the last transaction whole, nothing beyond it, and on
// every 32nd read the full list: ids 1..n, count and xor); outside a snapshot
// they read the ledger and check that recall finds its newest episode.
#pragma once

#include <agentmem.h>

#include <cstdint>
#include <functional>
#include <string>

namespace agentmem::reliability {

// The open options of the ledger file.
constexpr const char* kLedgerOptions = "vector_dim=8&embedder=r7-test&busy_timeout=5000";

struct LedgerState {
  uint64_t t = 0;        // last committed transaction (0: none yet)
  uint64_t count = 0;    // episodes
  uint64_t xor_ids = 0;  // xor of every episode id
  uint64_t last_id = 0;
};

// Reads the ledger block of db's current snapshot. "" or an error message.
std::string ReadLedger(agentmem_db* db, LedgerState* out);

// Commits transaction st->t + 1 and advances *st. Returns an agentmem code.
int WriteLedgerTxn(agentmem_db* db, LedgerState* st, std::string* err);

struct ReaderResult {
  uint64_t snapshots = 0;  // consistent snapshots checked
  uint64_t full_scans = 0;
  uint64_t recalls = 0;
  std::string error;       // the first inconsistency (or API failure); "" when none
};

// Checks snapshots until `stop()` (asked between reads) returns true; stops at
// the first inconsistency. With `recall_only`, runs only the recall check,
// outside any transaction (for a second thread on a handle whose transaction
// another thread owns).
ReaderResult RunReader(agentmem_db* db, const std::function<bool()>& stop,
                       bool recall_only = false);

}  // namespace agentmem::reliability

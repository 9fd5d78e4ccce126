// tests/reliability/ledger.cc -- see ledger.h.
#include "tests/reliability/ledger.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace agentmem::reliability {
namespace {

constexpr const char* kUser = "r7";

uint64_t KOf(uint64_t t) { return 1 + t % 4; }

std::string Word(uint64_t t, uint64_t j) {
  return "tok" + std::to_string(t) + "q" + std::to_string(j);
}

std::string Metadata(uint64_t t, uint64_t j, uint64_t k) {
  return "{\"t\":" + std::to_string(t) + ",\"j\":" + std::to_string(j) +
         ",\"k\":" + std::to_string(k) + "}";
}

std::string Err(agentmem_db* db, const char* what, int rc) {
  return std::string(what) + " failed: " + agentmem_errstr(rc) + " (" + agentmem_errmsg(db) + ")";
}

// Checks that episode `id` of the snapshot is part j of k of transaction t.
std::string CheckEpisode(agentmem_db* db, uint64_t id, uint64_t t, uint64_t j, uint64_t k) {
  agentmem_episode* ep = nullptr;
  int rc = agentmem_episode_get(db, static_cast<int64_t>(id), &ep);
  if (rc != AGENTMEM_OK) {
    return "the ledger says transaction " + std::to_string(t) + " ends at episode " +
           std::to_string(id + (k - 1 - j)) + ", but episode " + std::to_string(id) +
           " is missing: " + Err(db, "agentmem_episode_get", rc);
  }
  std::string why;
  if (ep->metadata != Metadata(t, j, k)) {
    why = "episode " + std::to_string(id) + " has metadata " + ep->metadata + ", expected " +
          Metadata(t, j, k) + " (a transaction seen in part)";
  } else if (std::strstr(ep->text, Word(t, j).c_str()) == nullptr) {
    why = "episode " + std::to_string(id) + " text \"" + ep->text + "\" lacks " + Word(t, j);
  } else if (j == 0 && ep->dim != 8) {
    why = "episode " + std::to_string(id) + " lost its vector";
  }
  agentmem_free(ep);
  return why;
}

std::string FullScan(agentmem_db* db, const LedgerState& st) {
  agentmem_cursor* cur = nullptr;
  int rc = agentmem_episodes(db, kUser, nullptr, &cur);
  if (rc != AGENTMEM_OK) return Err(db, "agentmem_episodes", rc);
  uint64_t n = 0, x = 0;
  std::string why;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    const agentmem_episode* e = agentmem_cursor_episode(cur);
    n++;
    if (static_cast<uint64_t>(e->id) != n && why.empty()) {
      why = "episode ids are not contiguous: id " + std::to_string(e->id) + " at position " +
            std::to_string(n);
    }
    x ^= static_cast<uint64_t>(e->id);
  }
  agentmem_cursor_close(cur);
  if (rc != AGENTMEM_DONE) return Err(db, "agentmem_cursor_step", rc);
  if (!why.empty()) return why;
  if (n != st.count || x != st.xor_ids) {
    return "the ledger of transaction " + std::to_string(st.t) + " counts " +
           std::to_string(st.count) + " episodes (xor " + std::to_string(st.xor_ids) +
           ") but the snapshot lists " + std::to_string(n) + " (xor " + std::to_string(x) + ")";
  }
  return "";
}

// Checks that the snapshot shows transaction st.t whole and nothing after it.
std::string CheckSnapshot(agentmem_db* db, const LedgerState& st) {
  if (st.t == 0) return "";
  uint64_t k = KOf(st.t);
  for (uint64_t j = 0; j < k; j++) {
    std::string why = CheckEpisode(db, st.last_id - (k - 1 - j), st.t, j, k);
    if (!why.empty()) return why;
  }
  agentmem_episode* ep = nullptr;
  int rc = agentmem_episode_get(db, static_cast<int64_t>(st.last_id + 1), &ep);
  if (rc == AGENTMEM_OK) {
    std::string why = "episode " + std::to_string(st.last_id + 1) + " (" + ep->metadata +
                      ") is visible in a snapshot whose ledger ends at " +
                      std::to_string(st.last_id);
    agentmem_free(ep);
    return why;
  }
  if (rc != AGENTMEM_NOTFOUND) return Err(db, "agentmem_episode_get(next)", rc);
  return "";
}

}  // namespace

std::string ReadLedger(agentmem_db* db, LedgerState* out) {
  *out = LedgerState{};
  agentmem_block* b = nullptr;
  int rc = agentmem_block_get(db, kUser, "ledger", &b);
  if (rc == AGENTMEM_NOTFOUND) return "";
  if (rc != AGENTMEM_OK) return Err(db, "agentmem_block_get(ledger)", rc);
  unsigned long long t, n, x, last;
  int got = std::sscanf(b->value, "%llu %llu %llu %llu", &t, &n, &x, &last);
  std::string value = b->value;
  agentmem_free(b);
  if (got != 4) return "the ledger block holds \"" + value + "\"";
  *out = LedgerState{t, n, x, last};
  return "";
}

int WriteLedgerTxn(agentmem_db* db, LedgerState* st, std::string* err) {
  LedgerState next = *st;
  next.t = st->t + 1;
  uint64_t k = KOf(next.t);
  int rc = agentmem_begin(db);
  if (rc != AGENTMEM_OK) {
    *err = Err(db, "agentmem_begin", rc);
    return rc;
  }
  for (uint64_t j = 0; j < k; j++) {
    std::string text = "transaction " + std::to_string(next.t) + " part " + std::to_string(j) +
                       " of " + std::to_string(k) + ": the agent noted " + Word(next.t, j);
    std::string meta = Metadata(next.t, j, k);
    float vec[8];
    for (int d = 0; d < 8; d++) vec[d] = static_cast<float>((next.t * 31 + j * 7 + d) % 17) - 8.0f;
    int64_t id = 0;
    rc = agentmem_remember(db, kUser, "s", "user", text.c_str(), 0, meta.c_str(),
                           j == 0 ? vec : nullptr, j == 0 ? 8 : 0, &id);
    if (rc != AGENTMEM_OK) {
      *err = Err(db, "agentmem_remember", rc);
      agentmem_rollback(db);
      return rc;
    }
    next.count++;
    next.xor_ids ^= static_cast<uint64_t>(id);
    next.last_id = static_cast<uint64_t>(id);
  }
  std::string value = std::to_string(next.t) + " " + std::to_string(next.count) + " " +
                      std::to_string(next.xor_ids) + " " + std::to_string(next.last_id);
  rc = agentmem_block_set(db, kUser, "ledger", value.c_str(), 0, -1);
  if (rc != AGENTMEM_OK) {
    *err = Err(db, "agentmem_block_set", rc);
    agentmem_rollback(db);
    return rc;
  }
  rc = agentmem_commit(db);
  if (rc != AGENTMEM_OK) {
    *err = Err(db, "agentmem_commit", rc);
    return rc;
  }
  *st = next;
  return AGENTMEM_OK;
}

// Reads the ledger outside a transaction (so at the newest commit) and checks
// that recall finds the newest episode it names.
static std::string CheckRecallNewest(agentmem_db* db) {
  LedgerState now;
  std::string why = ReadLedger(db, &now);
  if (!why.empty() || now.t == 0) return why;
  uint64_t k = KOf(now.t);
  std::string q = Word(now.t, k - 1);
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.k = 3;
  o.mode = AGENTMEM_RECALL_BM25;
  agentmem_cursor* cur = nullptr;
  int rc = agentmem_recall(db, kUser, q.c_str(), &o, &cur);
  if (rc != AGENTMEM_OK) return Err(db, "agentmem_recall", rc);
  rc = agentmem_cursor_step(cur);
  const agentmem_hit* h = rc == AGENTMEM_ROW ? agentmem_cursor_hit(cur) : nullptr;
  if (!h) {
    why = "recall of " + q + " found nothing; the ledger's newest episode is " +
          std::to_string(now.last_id);
  } else if (static_cast<uint64_t>(h->id) != now.last_id || h->bm25_rank != 1) {
    why = "recall of " + q + " returned episode " + std::to_string(h->id) +
          " first; the ledger's newest episode is " + std::to_string(now.last_id);
  }
  agentmem_cursor_close(cur);
  return why;
}

ReaderResult RunReader(agentmem_db* db, const std::function<bool()>& stop, bool recall_only) {
  ReaderResult r;
  LedgerState prev;
  for (uint64_t i = 0; !stop(); i++) {
    if (recall_only) {
      std::string why = CheckRecallNewest(db);
      if (!why.empty()) {
        r.error = "recall " + std::to_string(r.recalls + 1) + ": " + why;
        return r;
      }
      r.recalls++;
      continue;
    }
    int rc = agentmem_begin(db);
    if (rc != AGENTMEM_OK) {
      r.error = Err(db, "agentmem_begin", rc);
      return r;
    }
    LedgerState st;
    std::string why = ReadLedger(db, &st);
    if (why.empty()) why = CheckSnapshot(db, st);
    if (why.empty() && i % 32 == 0) {
      why = FullScan(db, st);
      r.full_scans++;
    }
    if (why.empty() && (st.t < prev.t || st.count < prev.count)) {
      why = "the snapshot went back from transaction " + std::to_string(prev.t) + " to " +
            std::to_string(st.t);
    }
    rc = agentmem_rollback(db);
    if (why.empty() && rc != AGENTMEM_OK) why = Err(db, "agentmem_rollback", rc);
    if (!why.empty()) {
      r.error = "snapshot " + std::to_string(r.snapshots + 1) + ": " + why;
      return r;
    }
    r.snapshots++;
    prev = st;
    if (i % 16 == 7) {
      // Outside a transaction every read moves to the newest commit: the
      // newest episode the ledger names must be found by recall.
      why = CheckRecallNewest(db);
      if (!why.empty()) {
        r.error = "recall after snapshot " + std::to_string(r.snapshots) + ": " + why;
        return r;
      }
      r.recalls++;
    }
  }
  return r;
}

}  // namespace agentmem::reliability

// cli/sync/verify.cc -- receipts and `agentmem sync --verify`
// (sync_internal.h; docs/replication.md, "Receipts and --verify"). A forget
// is one source transaction of forget rows in agentmem_changes, named by
// (origin, log, seq); each replica that purged it writes one receipt row in
// agentmem_receipts. Verify reads the two and what the canonical tables
// still hold of each forget. Rows read from PostgreSQL are untrusted: every
// value is read typed and bounded.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "sync/sync_internal.h"

namespace agentmem::sync {
namespace {

constexpr const char* kInsertReceipt =
    "INSERT INTO agentmem_receipts VALUES ($1, $2, $3, $4, $5, $6,"
    " (extract(epoch FROM clock_timestamp()) * 1000000)::bigint) ON CONFLICT DO NOTHING";

constexpr const char* kInsertPulledReceipts =
    "INSERT INTO agentmem_receipts SELECT DISTINCT origin, log, seq, $1, $3::bigint, $4::bigint,"
    " (extract(epoch FROM clock_timestamp()) * 1000000)::bigint FROM agentmem_changes"
    " WHERE kind = 'forget' AND origin <> $1 AND gpos <= $2::bigint ON CONFLICT DO NOTHING";

// Every forget transaction, in global order: its first position, its
// origin, log and seq, how many forget rows, and the users they name.
constexpr const char* kForgets =
    "SELECT min(gpos), origin, log, seq, count(*), count(DISTINCT user_id),"
    " left(min(user_id), 200) FROM agentmem_changes WHERE kind = 'forget'"
    " GROUP BY origin, log, seq ORDER BY min(gpos)";

constexpr const char* kReplicas = "SELECT origin FROM agentmem_origins ORDER BY origin";

constexpr const char* kReceipts =
    "SELECT forget_origin, forget_log, forget_seq, replica, needles, residue"
    " FROM agentmem_receipts";

// The rows of the canonical tables that the forget transaction ($1-$3)
// names and that were written before it: each is a forgotten row PostgreSQL
// still holds. (A row written after a forget is not forgotten by it.)
constexpr const char* kLeft =
    "SELECT count(*) FROM agentmem_changes c, LATERAL (SELECT c.data AS d) x,"
    " LATERAL (SELECT 1 FROM episodes e WHERE e.gpos < c.gpos AND CASE d->>'scope'"
    "  WHEN 'user' THEN e.user_id = d->>'user_id'"
    "  WHEN 'session' THEN e.user_id = d->>'user_id' AND e.session_id = d->>'session_id'"
    "  WHEN 'before' THEN e.user_id = d->>'user_id'"
    "   AND e.ts < COALESCE((d->>'before')::bigint, 0)"
    "  WHEN 'episode' THEN (e.origin, e.id) = (SELECT origin, origin_id FROM"
    "   agentmem_canonical(c.origin, 'episode', COALESCE((d->>'id')::bigint, 0)))"
    "  ELSE false END"
    "  UNION ALL SELECT 1 FROM blocks b WHERE b.gpos < c.gpos AND b.user_id = d->>'user_id'"
    "   AND (d->>'scope' = 'user' OR (d->>'scope' = 'block' AND b.name = d->>'name'))"
    "  UNION ALL SELECT 1 FROM facts f WHERE f.gpos < c.gpos AND"
    "   ((d->>'scope' = 'user' AND f.user_id = d->>'user_id') OR (d->>'scope' = 'fact' AND"
    "   (f.origin, f.id) = (SELECT origin, origin_id FROM"
    "   agentmem_canonical(c.origin, 'fact', COALESCE((d->>'id')::bigint, 0)))))) left_row"
    " WHERE c.kind = 'forget' AND c.origin = $1 AND c.log = $2 AND c.seq = $3";

// A forget transaction: (origin, log, seq).
using ForgetKey = std::tuple<std::string, std::string, int64_t>;

struct Forget {
  ForgetKey key;
  int64_t gpos = 0, rows = 0, users = 0;
  std::string user;  // the first user it names
};

bool ReadForgets(Pg* pg, std::vector<Forget>* out) {
  Result r;
  if (!pg->Query(kForgets, {}, &r)) return false;
  std::string error;
  for (int i = 0; i < PQntuples(r.get()); i++) {
    Forget& f = out->emplace_back();
    auto& [origin, log, seq] = f.key;
    if (!ReadInt(r.get(), i, 0, &f.gpos, &error) || !ReadText(r.get(), i, 1, 16, &origin, &error) ||
        !ReadText(r.get(), i, 2, 16, &log, &error) || !ReadInt(r.get(), i, 3, &seq, &error) ||
        !ReadInt(r.get(), i, 4, &f.rows, &error) || !ReadInt(r.get(), i, 5, &f.users, &error) ||
        !ReadText(r.get(), i, 6, 800, &f.user, &error)) {
      return pg->Fail("PostgreSQL: agentmem_changes: " + error);
    }
  }
  return true;
}

bool ReadReceipts(Pg* pg, std::map<std::pair<ForgetKey, std::string>, Receipt>* out) {
  Result r;
  if (!pg->Query(kReceipts, {}, &r)) return false;
  std::string error, origin, log, replica;
  for (int i = 0; i < PQntuples(r.get()); i++) {
    int64_t seq = 0;
    Receipt receipt;
    if (!ReadText(r.get(), i, 0, 16, &origin, &error) || !ReadText(r.get(), i, 1, 16, &log, &error) ||
        !ReadInt(r.get(), i, 2, &seq, &error) || !ReadText(r.get(), i, 3, 16, &replica, &error) ||
        !ReadInt(r.get(), i, 4, &receipt.needles, &error) ||
        !ReadInt(r.get(), i, 5, &receipt.residue, &error)) {
      return pg->Fail("PostgreSQL: agentmem_receipts: " + error);
    }
    if (receipt.needles < 0 || receipt.residue < 0) {
      return pg->Fail("PostgreSQL: agentmem_receipts: a count is negative (replica " + replica +
                      ")");
    }
    (*out)[{{origin, log, seq}, replica}] = receipt;
  }
  return true;
}

bool ReadReplicas(Pg* pg, std::vector<std::string>* out) {
  Result r;
  if (!pg->Query(kReplicas, {}, &r)) return false;
  std::string error;
  for (int i = 0; i < PQntuples(r.get()); i++) {
    if (!ReadText(r.get(), i, 0, 16, &out->emplace_back(), &error)) {
      return pg->Fail("PostgreSQL: agentmem_origins: " + error);
    }
  }
  return true;
}

// How many rows of the canonical tables the forget left behind.
bool RowsLeft(Pg* pg, const ForgetKey& key, int64_t* left) {
  const auto& [origin, log, seq] = key;
  const std::string s = std::to_string(seq);
  Result r;
  if (!pg->Query(kLeft, {origin.c_str(), log.c_str(), s.c_str()}, &r)) return false;
  std::string error;
  if (PQntuples(r.get()) != 1 || !ReadInt(r.get(), 0, 0, left, &error)) {
    return pg->Fail("PostgreSQL: counting forgotten rows: " + error);
  }
  return true;
}

// "forget 12 (by 1f..., 3 rows, user "alice")"
std::string Describe(const Forget& f) {
  std::string users = "user \"" + f.user + "\"";
  if (f.users > 1) users += " and " + std::to_string(f.users - 1) + " more";
  return "forget " + std::to_string(f.gpos) + " (by " + std::get<0>(f.key) + ", " +
         std::to_string(f.rows) + (f.rows == 1 ? " row, " : " rows, ") + users + ")";
}

}  // namespace

bool WriteReceipt(Pg* pg, const std::string& origin, const std::string& log, int64_t seq,
                  const std::string& replica, const Receipt& receipt, int64_t* written) {
  const std::string s = std::to_string(seq), n = std::to_string(receipt.needles),
                    found = std::to_string(receipt.residue);
  Result r;
  if (!pg->Exec(kInsertReceipt, {origin.c_str(), log.c_str(), s.c_str(), replica.c_str(),
                                 n.c_str(), found.c_str()}, &r)) {
    return false;
  }
  *written += std::atoll(PQcmdTuples(r.get()));
  return true;
}

bool WriteReceiptsPulled(Pg* pg, const std::string& replica, int64_t position,
                         const Receipt& receipt, int64_t* written) {
  const std::string p = std::to_string(position), n = std::to_string(receipt.needles),
                    found = std::to_string(receipt.residue);
  Result r;
  if (!pg->Exec(kInsertPulledReceipts, {replica.c_str(), p.c_str(), n.c_str(), found.c_str()},
                &r)) {
    return false;
  }
  *written += std::atoll(PQcmdTuples(r.get()));
  return true;
}

bool Verify(Pg* pg, bool* failed) {
  std::vector<Forget> forgets;
  std::vector<std::string> replicas;
  std::map<std::pair<ForgetKey, std::string>, Receipt> receipts;
  if (!ReadForgets(pg, &forgets) || !ReadReplicas(pg, &replicas) ||
      !ReadReceipts(pg, &receipts)) {
    return false;
  }
  int64_t problems = 0, waiting = 0;
  for (const Forget& f : forgets) {
    const std::string what = Describe(f);
    for (const std::string& replica : replicas) {
      auto it = receipts.find({f.key, replica});
      if (it != receipts.end()) {
        const Receipt& r = it->second;
        const bool ok = r.residue == 0;
        problems += !ok;
        std::printf("%s: replica %s: purged, residue %" PRId64 " of %" PRId64 " needles: %s\n",
                    what.c_str(), replica.c_str(), r.residue, r.needles,
                    ok ? "ok" : "FAILED (forgotten bytes remain in its file)");
      } else if (replica == std::get<0>(f.key) && std::get<2>(f.key) != 0) {
        std::printf("%s: replica %s: forgot it without PURGE, no receipt (its bytes leave at "
                    "its next VACUUM; not a failure)\n",
                    what.c_str(), replica.c_str());
      } else {
        waiting++;
        std::printf("%s: replica %s: no receipt yet, not synced since (not a failure)\n",
                    what.c_str(), replica.c_str());
      }
    }
    int64_t left = 0;
    if (!RowsLeft(pg, f.key, &left)) return false;
    problems += left != 0;
    if (left == 0) {
      std::printf("%s: PostgreSQL: no forgotten rows left: ok\n", what.c_str());
    } else {
      std::printf("%s: PostgreSQL: %" PRId64 " forgotten rows left in episodes, blocks or facts: "
                  "FAILED\n",
                  what.c_str(), left);
    }
  }
  std::printf("%zu forgets, %zu replicas: %" PRId64 " failures, %" PRId64
              " receipts not yet written\n",
              forgets.size(), replicas.size(), problems, waiting);
  *failed = problems != 0;
  return true;
}

}  // namespace agentmem::sync

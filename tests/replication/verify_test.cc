// tests/replication/verify_test.cc -- receipts and `agentmem sync --verify`
// (docs/replication.md, "Receipts and --verify"): a user forgotten with
// PURGE on one of three files; each file's sync records a receipt of its
// purge, and --verify reports each replica's receipt, or that it has not
// synced since, and what PostgreSQL still holds of the forget.
#include <agentmem.h>
#include <doctest/doctest.h>

#include <string>

#include "tests/replication/replica_util.h"

using namespace agentmem::test;

namespace {

std::string Origin(const TempDir& dir, const std::string& name) {
  agentmem_db* db = OpenReplica(dir, name);
  char* v = nullptr;
  REQUIRE(agentmem_meta_get(db, "sync.origin", &v) == AGENTMEM_OK);
  const std::string origin = v;
  agentmem_free(v);
  agentmem_close(db);
  return origin;
}

// `agentmem sync --verify [file] URL`.
ShellResult Verify(const TempDir& dir, const std::string& file = "") {
  if (file.empty()) return RunShell(dir.path(), {"sync", "--verify", Url()});
  return RunShell(dir.path(), {"sync", "--verify", file, Url()});
}

// The line --verify printed about `replica` (or "PostgreSQL").
std::string LineOf(const std::string& out, const std::string& what) {
  const size_t at = out.find(": " + what + ": ");
  if (at == std::string::npos) return "";
  const size_t start = out.rfind('\n', at) + 1, end = out.find('\n', at);
  return out.substr(start, end - start);
}

bool Has(const std::string& line, const std::string& part) {
  return line.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("--verify reports each replica's receipt of a PURGE, and fails on residue") {
  TempDir dir;
  Conn pg = Fresh();
  agentmem_db *a = nullptr, *b = nullptr;
  BobOnTwoOfThree(dir, "Bob's diary on file a: the locker code is 4417",
                  "Bob told file b about his sister's surgery", "bob prefers to be called Robert",
                  &a, &b);
  agentmem_close(b);
  for (int pass = 0; pass < 2; pass++) {
    for (const char* n : kThree) SyncRun(dir, n);
  }
  const std::string oa = Origin(dir, kThree[0]), ob = Origin(dir, kThree[1]),
                    oc = Origin(dir, kThree[2]);
  ShellResult none = Verify(dir);
  CHECK_MESSAGE(none.status == 0, none.err);
  CHECK(none.out == "0 forgets, 3 replicas: 0 failures, 0 receipts not yet written\n");

  REQUIRE(agentmem_forget(a, "bob", nullptr, 0, AGENTMEM_FORGET_PURGE, nullptr) == AGENTMEM_OK);
  agentmem_close(a);
  SyncRun(dir, kThree[0]);
  // a's receipt: two texts, two vectors and the block's value searched for.
  ShellResult r = Verify(dir);
  CHECK_MESSAGE(r.status == 0, r.out << r.err);
  CHECK_MESSAGE(Has(LineOf(r.out, "replica " + oa), "purged, residue 0 of 5 needles: ok"), r.out);
  for (const std::string& o : {ob, oc}) {
    CHECK_MESSAGE(Has(LineOf(r.out, "replica " + o), "no receipt yet, not synced since (not a "
                                                     "failure)"),
                  r.out);
  }
  CHECK_MESSAGE(Has(LineOf(r.out, "PostgreSQL"), "no forgotten rows left: ok"), r.out);
  CHECK(Has(r.out, "(by " + oa + ", 3 rows, user \"bob\")"));

  SyncRun(dir, kThree[1]);
  r = Verify(dir);
  CHECK(r.status == 0);
  CHECK_MESSAGE(Has(LineOf(r.out, "replica " + ob), "purged, residue 0 of 5 needles: ok"), r.out);
  CHECK_MESSAGE(Has(LineOf(r.out, "replica " + oc), "no receipt yet"), r.out);

  // With a file, --verify syncs it first.
  r = Verify(dir, kThree[2]);
  CHECK_MESSAGE(r.status == 0, r.out << r.err);
  for (const std::string& o : {oa, ob, oc}) {
    CHECK_MESSAGE(Has(LineOf(r.out, "replica " + o), "purged, residue 0 of 5 needles: ok"), r.out);
  }
  CHECK_MESSAGE(Has(r.out, "1 forgets, 3 replicas: 0 failures, 0 receipts not yet written\n"),
                r.out);

  // Receipts are written once: more syncs add none.
  for (const char* n : kThree) SyncRun(dir, n);
  CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_receipts") == "3");

  // A receipt with residue fails the report, naming the replica.
  Run(pg.get(), "UPDATE agentmem_receipts SET residue = 2 WHERE replica = '" + oc + "'");
  r = Verify(dir);
  CHECK(r.status == 1);
  CHECK_MESSAGE(Has(LineOf(r.out, "replica " + oc), "residue 2 of 5 needles: FAILED"), r.out);
  CHECK(Has(LineOf(r.out, "replica " + oa), ": ok"));
  CHECK(Has(r.out, ": 1 failures,"));
  Run(pg.get(), "UPDATE agentmem_receipts SET residue = 0");

  // So does a forgotten row left in PostgreSQL: one of the episodes the
  // forget names, as written before it.
  Run(pg.get(), "INSERT INTO episodes (origin, id, gpos, user_id, session_id, role, text, ts,"
                " created_at, metadata) SELECT c.origin, c.origin_id, 1, 'bob', 's1', 'user',"
                " 'left behind', 0, 0, '' FROM agentmem_changes f, agentmem_canonical(f.origin,"
                " 'episode', (f.data->>'id')::bigint) c WHERE f.kind = 'forget'"
                " AND f.data->>'scope' = 'episode' ORDER BY f.gpos LIMIT 1");
  r = Verify(dir);
  CHECK(r.status == 1);
  CHECK_MESSAGE(Has(LineOf(r.out, "PostgreSQL"), "1 forgotten rows left in episodes, blocks or "
                                                 "facts: FAILED"),
                r.out);
  // A row of the user written after the forget is not one it forgot.
  Run(pg.get(), "UPDATE episodes SET gpos = 1000000 WHERE text = 'left behind'");
  r = Verify(dir);
  CHECK_MESSAGE(r.status == 0, r.out);
}

TEST_CASE("--verify refuses a wrong command line and an unreachable server") {
  TempDir dir;
  ShellResult r = RunShell(dir.path(), {"sync", "--verify"});
  CHECK(r.status == 1);
  CHECK(Has(r.err, "Usage: agentmem sync --verify [FILE] CONNINFO"));
  r = RunShell(dir.path(), {"sync", "--verify", "postgresql://nobody@/none?host=/nonexistent"});
  CHECK(r.status == 1);
  CHECK(Has(r.err, "Error: PostgreSQL: "));
}

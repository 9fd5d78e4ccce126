// tests/replication/forget_test.cc -- a user forgotten with PURGE on one file
// reaches PostgreSQL and every other file (docs/replication.md, "Forgetting
// everywhere"): after their next sync no byte of the forgotten texts is left
// in PostgreSQL's tables or in any file, and what was not forgotten stays.
#include <agentmem.h>
#include <doctest/doctest.h>

#include <string>

#include "tests/replication/replica_util.h"
#include "tests/util/page_bytes.h"

using namespace agentmem::test;

namespace {

constexpr const char* kNeedleA = "Bob's diary on file a: the locker code is 4417";
constexpr const char* kNeedleB = "Bob told file b about his sister's surgery";
constexpr const char* kNeedleBlock = "bob prefers to be called Robert in private";

// How many times `needle` occurs in file `name`, raw or in a decompressed
// page.
int Occurrences(const TempDir& dir, const std::string& name, const std::string& needle) {
  const std::string bytes = AllPageBytes(dir.File(name));
  int n = 0;
  for (size_t at = bytes.find(needle); at != std::string::npos; at = bytes.find(needle, at + 1)) {
    n++;
  }
  return n;
}

int Residue(const TempDir& dir, const std::string& name) {
  return Occurrences(dir, name, kNeedleA) + Occurrences(dir, name, kNeedleB) +
         Occurrences(dir, name, kNeedleBlock);
}

}  // namespace

TEST_CASE("a user forgotten with PURGE on one file is purged from PostgreSQL and the others") {
  TempDir dir;
  Conn pg = Fresh();
  agentmem_db *a = nullptr, *b = nullptr;
  BobOnTwoOfThree(dir, kNeedleA, kNeedleB, kNeedleBlock, &a, &b);
  REQUIRE(agentmem_fact_assert(b, "bob", "bob", "sister", "in hospital", 1, 0, 0, nullptr, 0,
                               nullptr) == AGENTMEM_OK);
  agentmem_close(b);
  for (int pass = 0; pass < 2; pass++) {
    for (const char* n : kThree) SyncRun(dir, n);
  }
  for (const char* n : {"b.agentmem", "c.agentmem"}) {
    REQUIRE(Occurrences(dir, n, kNeedleA) > 0);  // the scan sees the text before the forget
  }
  REQUIRE(Occurrences(dir, "c.agentmem", kNeedleB) > 0);

  agentmem_receipt receipt{};
  REQUIRE(agentmem_forget(a, "bob", nullptr, 0, AGENTMEM_FORGET_PURGE, &receipt) == AGENTMEM_OK);
  CHECK(receipt.episodes == 2);  // a's own and the one it pulled from b
  CHECK(receipt.residue == 0);
  agentmem_close(a);
  SyncRun(dir, "a.agentmem");
  CHECK(One(pg.get(), "SELECT (SELECT count(*) FROM episodes WHERE user_id = 'bob')"
                      " + (SELECT count(*) FROM blocks WHERE user_id = 'bob')"
                      " + (SELECT count(*) FROM facts WHERE user_id = 'bob')") == "0");
  CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_changes WHERE data::text LIKE '%Bob%'"
                      " OR data::text LIKE '%Robert%' OR data::text LIKE '%hospital%'") == "0");

  for (const char* n : {"b.agentmem", "c.agentmem"}) {
    ShellResult r = SyncRun(dir, n);
    CHECK_MESSAGE(r.out.find("(purged)") != std::string::npos, r.out);
    CHECK_MESSAGE(Residue(dir, n) == 0, n);
    CHECK(Shell(dir, n, "SELECT user_id, text FROM episodes") == "alice|alice keeps this one\n");
    CHECK(Shell(dir, n, "SELECT count(*) FROM blocks WHERE user_id = 'bob'") == "0\n");
    CHECK(Shell(dir, n, "SELECT count(*) FROM facts WHERE user_id = 'bob'") == "0\n");
  }
  CHECK(Residue(dir, "a.agentmem") == 0);
  // The purges gave b and c new logs too: their next syncs find nothing more
  // to forget, and every file still holds alice's episode once.
  for (int pass = 0; pass < 2; pass++) {
    for (const char* n : kThree) {
      ShellResult r = SyncRun(dir, n);
      CHECK_MESSAGE(r.out.find("forgets (purged)") == std::string::npos, r.out);
    }
  }
  for (const char* n : kThree) {
    CHECK(Shell(dir, n, "SELECT count(*) FROM episodes") == "1\n");
  }
  CHECK(One(pg.get(), "SELECT count(*) FROM episodes") == "1");
}

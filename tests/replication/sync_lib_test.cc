// tests/replication/sync_lib_test.cc -- agentmem_sync() (include/agentmem_sync.h)
// against pg_run.sh's server, linked as a program links it: libagentmem_sync
// and libagentmem, nothing of the engine's inside.
#include <agentmem.h>
#include <agentmem_sync.h>
#include <doctest/doctest.h>

#include <string>

#include "tests/replication/replica_util.h"
#include "tests/util/temp_dir.h"

namespace agentmem::test {
namespace {

agentmem_sync_report Report() {
  agentmem_sync_report r{};
  r.version = AGENTMEM_SYNC_REPORT_VERSION;
  return r;
}

// agentmem_sync(db, URL), which must succeed; returns its report.
agentmem_sync_report Sync(agentmem_db* db) {
  agentmem_sync_report r = Report();
  const int rc = agentmem_sync(db, Url().c_str(), &r);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, r.errmsg);
  CHECK(std::string(r.errmsg).empty());
  return r;
}

// The text of user's best BM25 hit for query ("" when none).
std::string Recall(agentmem_db* db, const char* user, const char* query) {
  agentmem_recall_options opts;
  agentmem_recall_options_init(&opts);
  opts.mode = AGENTMEM_RECALL_BM25;
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_recall(db, user, query, &opts, &cur) == AGENTMEM_OK);
  std::string text;
  if (agentmem_cursor_step(cur) == AGENTMEM_ROW) text = agentmem_cursor_hit(cur)->text;
  agentmem_cursor_close(cur);
  return text;
}

TEST_CASE("agentmem_sync brings two files together and reports what it did") {
  Conn c = Fresh();
  TempDir dir;
  agentmem_db* a = OpenReplica(dir, "a.agentmem");
  agentmem_db* b = OpenReplica(dir, "b.agentmem");
  Remember(a, "ann", "ann moved to lisbon in spring", 0.25f);
  Remember(a, "ann", "ann likes green tea", 0.5f);

  const agentmem_sync_report ra = Sync(a);
  CHECK(std::string(ra.origin).size() == 16);
  CHECK(ra.pushed > 0);
  CHECK(ra.pushed == std::stoll(One(c.get(), "SELECT count(*) FROM agentmem_changes")));
  CHECK(ra.push_first > 0);
  CHECK(ra.push_last >= ra.push_first);
  CHECK(ra.pulled == 0);
  CHECK(ra.receipts == 0);
  CHECK(One(c.get(), "SELECT count(*) FROM episodes WHERE user_id = 'ann'") == "2");

  // A second call has nothing to do.
  const agentmem_sync_report again = Sync(a);
  CHECK(std::string(again.origin) == std::string(ra.origin));
  CHECK(again.pushed == 0);
  CHECK(again.pulled == 0);

  // b pushes its own rows (the settings of its creation) and pulls every
  // row a pushed.
  const agentmem_sync_report rb = Sync(b);
  CHECK(std::string(rb.origin) != std::string(ra.origin));
  CHECK(rb.pulled == ra.pushed);
  CHECK(rb.forgets == 0);
  CHECK(rb.pushed + ra.pushed ==
        std::stoll(One(c.get(), "SELECT count(*) FROM agentmem_changes")));
  CHECK(rb.position == std::stoll(One(c.get(), "SELECT max(gpos) FROM agentmem_changes")));
  CHECK(Recall(b, "ann", "lisbon") == "ann moved to lisbon in spring");

  SUBCASE("once each has pulled the other's rows, a call has nothing to do") {
    CHECK(Sync(a).pulled == rb.pushed);
    for (agentmem_db* db : {a, b}) {
      const agentmem_sync_report r = Sync(db);
      CHECK(r.pushed == 0);
      CHECK(r.pulled == 0);
      CHECK(r.position == rb.position);
    }
  }
  SUBCASE("a forget with PURGE reaches the other file, which writes its receipt") {
    REQUIRE(agentmem_forget(a, "ann", nullptr, 0, AGENTMEM_FORGET_PURGE, nullptr) == AGENTMEM_OK);
    const agentmem_sync_report fa = Sync(a);
    CHECK(fa.resync == 1);
    CHECK(fa.receipts == 1);  // its own purge's
    const agentmem_sync_report fb = Sync(b);
    CHECK(fb.forgets > 0);
    CHECK(fb.purged == 1);
    CHECK(fb.receipts == 1);
    CHECK(Recall(b, "ann", "lisbon").empty());
    CHECK(Sync(b).receipts == 0);  // a receipt is written once
  }
  agentmem_close(a);
  agentmem_close(b);
}

TEST_CASE("agentmem_sync refuses a bad conninfo, a NULL argument and an open transaction") {
  Fresh();
  TempDir dir;
  agentmem_db* db = OpenReplica(dir, "a.agentmem");
  Remember(db, "ann", "nothing leaves this file", 0.25f);

  agentmem_sync_report r = Report();
  const std::string nowhere = "postgresql://postgres@/postgres?host=" + dir.path() + "&port=1";
  CHECK(agentmem_sync(db, nowhere.c_str(), &r) == AGENTMEM_CANTOPEN);
  const std::string msg = r.errmsg;
  CHECK_MESSAGE(msg.rfind("PostgreSQL: connection to server on socket", 0) == 0, msg);
  CHECK(msg.find(dir.path()) != std::string::npos);
  CHECK(r.pushed == 0);

  r = Report();
  CHECK(agentmem_sync(db, "host=/nonexistent-dir sslmode=nonsense", &r) == AGENTMEM_CANTOPEN);
  CHECK_MESSAGE(std::string(r.errmsg).find("sslmode") != std::string::npos, r.errmsg);

  CHECK(agentmem_sync(nullptr, Url().c_str(), &r) == AGENTMEM_MISUSE);
  CHECK(agentmem_sync(db, nullptr, &r) == AGENTMEM_MISUSE);
  CHECK(agentmem_sync(db, Url().c_str(), nullptr) == AGENTMEM_MISUSE);
  agentmem_sync_report unknown{};
  unknown.version = AGENTMEM_SYNC_REPORT_VERSION + 1;
  CHECK(agentmem_sync(db, Url().c_str(), &unknown) == AGENTMEM_MISUSE);

  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  r = Report();
  CHECK(agentmem_sync(db, Url().c_str(), &r) == AGENTMEM_MISUSE);
  CHECK(std::string(r.errmsg).find("BEGIN") != std::string::npos);
  REQUIRE(agentmem_rollback(db) == AGENTMEM_OK);
  agentmem_close(db);
}

TEST_CASE("agentmem_sync returns AGENTMEM_BUSY while another handle holds the file's write lock") {
  Fresh();
  TempDir dir;
  agentmem_close(OpenReplica(dir, "a.agentmem"));
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(dir.File("a.agentmem").c_str(), &db, AGENTMEM_OPEN_READWRITE,
                           "busy_timeout=0") == AGENTMEM_OK);
  agentmem_db* writer = OpenReplica(dir, "a.agentmem");
  REQUIRE(agentmem_begin(writer) == AGENTMEM_OK);
  Remember(writer, "ann", "written inside a transaction that stays open", 0.25f);

  agentmem_sync_report r = Report();
  CHECK(agentmem_sync(db, Url().c_str(), &r) == AGENTMEM_BUSY);
  CHECK_MESSAGE(std::string(r.errmsg).rfind("writing sync.origin: ", 0) == 0, r.errmsg);

  REQUIRE(agentmem_commit(writer) == AGENTMEM_OK);
  CHECK(Sync(db).pushed > 0);
  agentmem_close(writer);
  agentmem_close(db);
}

}  // namespace
}  // namespace agentmem::test

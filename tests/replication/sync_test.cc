// tests/replication/sync_test.cc -- `agentmem sync FILE CONNINFO` (cli/sync/,
// docs/replication.md) run as a program against the throwaway PostgreSQL of
// pg_run.sh: origins and the global change log, pull into other files,
// conflict rules for blocks and single-valued facts, forgets, resuming after
// a bad row, and VACUUM's new log.
#include <agentmem.h>
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/replication/replica_util.h"

using namespace agentmem::test;

namespace {

std::string Meta(const TempDir& dir, const std::string& name, const char* key) {
  agentmem_db* db = OpenReplica(dir, name);
  char* v = nullptr;
  std::string out = agentmem_meta_get(db, key, &v) == AGENTMEM_OK ? v : "";
  agentmem_free(v);
  agentmem_close(db);
  return out;
}

// Two files, a and b, open, and an empty database.
struct TwoFiles {
  TempDir dir;
  Conn pg = Fresh();
  agentmem_db* a = OpenReplica(dir, "a.agentmem");
  agentmem_db* b = OpenReplica(dir, "b.agentmem");
  ~TwoFiles() {
    agentmem_close(a);
    agentmem_close(b);
  }
};

// The current value of user u's block "persona".
std::string Persona(agentmem_db* db) {
  agentmem_block* blk = nullptr;
  REQUIRE(agentmem_block_get(db, "u", "persona", &blk) == AGENTMEM_OK);
  std::string value = blk->value;
  agentmem_free(blk);
  return value;
}

// The current objects of a user's facts on (subject, predicate).
std::string Current(agentmem_db* db, const char* user, const char* subject, const char* pred) {
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_facts_v2(db, user, subject, pred, nullptr, 0, 0, 0, &cur) == AGENTMEM_OK);
  std::string out;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
    out += std::string(out.empty() ? "" : " ") + agentmem_cursor_fact(cur)->object;
  }
  agentmem_cursor_close(cur);
  return out;
}

}  // namespace

TEST_CASE("sync pushes a file's changes under its origin id, and a second run writes nothing") {
  TempDir dir;
  Conn pg = Fresh();
  Shell(dir, "a.agentmem",
        "INSERT INTO episodes(user_id, session_id, role, text, embedding) VALUES "
        "('alice', 's1', 'user', 'I moved to Lisbon last spring.', '[0.5, -1, 2.25, 0]')");
  ShellResult r = SyncRun(dir, "a.agentmem");
  const std::string origin = Meta(dir, "a.agentmem", "sync.origin");
  REQUIRE(origin.size() == 16);
  CHECK(r.out.find("origin " + origin + ": pushed") != std::string::npos);
  auto episodes = Rows(pg.get(), "SELECT origin, id, user_id, text, embedding::text,"
                                 " tsv @@ to_tsquery('simple', 'lisbon') FROM episodes");
  REQUIRE(episodes.size() == 1);
  CHECK(episodes[0] == std::vector<std::string>{origin, "1", "alice",
                                                "I moved to Lisbon last spring.",
                                                "{0.5,-1,2.25,0}", "t"});
  CHECK(One(pg.get(), "SELECT count(DISTINCT origin) FROM agentmem_changes") == "1");
  CHECK(One(pg.get(), "SELECT string_agg(kind, ' ' ORDER BY gpos) FROM agentmem_changes"
                      " WHERE kind <> 'meta'") == "commit episode commit");
  const std::string changes = One(pg.get(), "SELECT count(*) FROM agentmem_changes");
  CHECK(SyncRun(dir, "a.agentmem").out.rfind("up to date", 0) == 0);
  CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_changes") == changes);
}

TEST_CASE_FIXTURE(TwoFiles,
                  "a second file pulls the first's episodes with their times and vectors, "
                  "under new ids") {
  Remember(a, "alice", "alice wrote this on file a", 0.5f);
  Remember(b, "bob", "bob wrote this on file b", 0.25f);
  Remember(b, "bob", "and this too", 0.75f);
  SyncRun(dir, "a.agentmem");
  SyncRun(dir, "b.agentmem");
  SyncRun(dir, "a.agentmem");
  CHECK(SyncRun(dir, "b.agentmem").out.rfind("up to date", 0) == 0);
  CHECK(SyncRun(dir, "a.agentmem").out.rfind("up to date", 0) == 0);

  // a's own episode keeps id 1; b's two follow it as 2 and 3 on a.
  agentmem_episode* e = nullptr;
  REQUIRE(agentmem_episode_get(a, 2, &e) == AGENTMEM_OK);
  CHECK(std::string(e->text) == "bob wrote this on file b");
  CHECK(e->vector[1] == 0.25f);
  agentmem_episode* there = nullptr;
  REQUIRE(agentmem_episode_get(b, 1, &there) == AGENTMEM_OK);
  CHECK(e->ts == there->ts);
  CHECK(e->created_at == there->created_at);
  agentmem_free(e);
  agentmem_free(there);
  REQUIRE(agentmem_episode_get(b, 3, &e) == AGENTMEM_OK);
  CHECK(std::string(e->text) == "alice wrote this on file a");
  agentmem_free(e);
  // PostgreSQL knows each pulled record's id on each file.
  const std::string oa = Meta(dir, "a.agentmem", "sync.origin");
  const std::string ob = Meta(dir, "b.agentmem", "sync.origin");
  CHECK(One(pg.get(), "SELECT string_agg(origin_id || '->' || local_id, ' ' ORDER BY origin_id)"
                      " FROM agentmem_local_ids WHERE replica = '" + oa +
                          "' AND kind = 'episode' AND origin = '" + ob + "'") == "1->2 2->3");
  CHECK(One(pg.get(), "SELECT count(*) FROM episodes") == "3");
}

// The texts of the episodes the user's facts with `object` cite.
std::string Sources(agentmem_db* db, const char* user, const char* object) {
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_facts_v2(db, user, nullptr, nullptr, object, 0, 0, 0, &cur) == AGENTMEM_OK);
  std::string out;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
    const agentmem_fact* f = agentmem_cursor_fact(cur);
    for (int i = 0; i < f->n_sources; i++) {
      agentmem_episode* e = nullptr;
      REQUIRE(agentmem_episode_get(db, f->source_episode_ids[i], &e) == AGENTMEM_OK);
      out += std::string(out.empty() ? "" : ",") + e->text;
      agentmem_free(e);
    }
  }
  agentmem_cursor_close(cur);
  return out;
}

TEST_CASE_FIXTURE(TwoFiles, "a pulled fact cites the episodes it cited, by their ids here") {
  agentmem_db* c = OpenReplica(dir, "c.agentmem");
  Remember(b, "u", "b's own first episode", 0.1f);  // so that ids differ between files
  Remember(c, "u", "c's own first episode", 0.2f);
  Remember(c, "u", "c's own second episode", 0.3f);
  Remember(a, "u", "ann said she moved to Oslo", 0.4f);
  const int64_t cited = 1;
  REQUIRE(agentmem_fact_assert(a, "u", "ann", "lives_in", "Oslo", 1, 0, 0, &cited, 1, nullptr) ==
          AGENTMEM_OK);
  SyncRun(dir, "a.agentmem");
  SyncRun(dir, "b.agentmem");
  // b cites a's episode in a fact of its own: c gets it through b's ids.
  agentmem_cursor* cur = nullptr;
  REQUIRE(agentmem_episodes(b, "u", nullptr, &cur) == AGENTMEM_OK);
  std::vector<int64_t> ids;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
    ids.push_back(agentmem_cursor_episode(cur)->id);
  }
  agentmem_cursor_close(cur);
  REQUIRE(ids.size() == 2);
  REQUIRE(agentmem_fact_assert(b, "u", "ann", "likes", "snow", 1, 0, 0, ids.data(), 2, nullptr) ==
          AGENTMEM_OK);
  SyncRun(dir, "b.agentmem");
  SyncRun(dir, "c.agentmem");
  CHECK(Sources(b, "u", "Oslo") == "ann said she moved to Oslo");
  CHECK(Sources(c, "u", "Oslo") == "ann said she moved to Oslo");
  const std::string both = Sources(c, "u", "snow");
  CHECK((both == "b's own first episode,ann said she moved to Oslo" ||
         both == "ann said she moved to Oslo,b's own first episode"));
  agentmem_close(c);
}

TEST_CASE_FIXTURE(TwoFiles,
                  "a block written on two files keeps both versions and the later global "
                  "order is current") {
  REQUIRE(agentmem_block_set(a, "u", "persona", "from a", 0, -1) == AGENTMEM_OK);
  REQUIRE(agentmem_block_set(b, "u", "persona", "from b", 0, -1) == AGENTMEM_OK);
  SyncRun(dir, "a.agentmem");  // a's version first in the global order
  SyncRun(dir, "b.agentmem");  // b's after it: current
  SyncRun(dir, "a.agentmem");
  for (agentmem_db* db : {a, b}) {
    CHECK(Persona(db) == "from b");
  }
  CHECK(Shell(dir, "a.agentmem", "SELECT group_concat(value, ',') FROM "
                                  "(SELECT value FROM block_history('u', 'persona'))") ==
        "from a,from b\n");
  // b held its own version, then a's earlier one came: b's is current again.
  CHECK(Shell(dir, "b.agentmem", "SELECT group_concat(value, ',') FROM "
                                  "(SELECT value FROM block_history('u', 'persona'))") ==
        "from b,from a,from b\n");
  CHECK(One(pg.get(), "SELECT string_agg(value, ',' ORDER BY gpos) FROM blocks") ==
        "from a,from b");
  CHECK(One(pg.get(), "SELECT value FROM blocks_current WHERE name = 'persona'") == "from b");
}

#ifdef AGENTMEM_TEST_HOOKS  // (the sync runs AGENTMEM_TEST_SYNC_BETWEEN in test builds only)
TEST_CASE_FIXTURE(TwoFiles, "what a file writes while its sync runs stays current there") {
  for (agentmem_db* db : {a, b}) {
    REQUIRE(agentmem_predicate_declare(db, "lives_in", 1) == AGENTMEM_OK);
  }
  REQUIRE(agentmem_block_set(a, "u", "persona", "from a", 0, -1) == AGENTMEM_OK);
  REQUIRE(agentmem_fact_assert(a, "u", "ann", "lives_in", "Paris", 1, 0, 0, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  SyncRun(dir, "a.agentmem");
  // b's sync pushes, then b's application writes, then the sync pulls a's
  // older versions: b's writes are later in the global order (its next
  // push), so they stay current on b, and become current on a.
  const std::string write = std::string(AGENTMEM_SHELL_PATH) + " " + dir.File("b.agentmem") +
                            " \"INSERT INTO blocks(user_id, name, value) VALUES ('u', 'persona',"
                            " 'b meanwhile'); INSERT INTO facts(user_id, subject, predicate,"
                            " object) VALUES ('u', 'ann', 'lives_in', 'Rome')\"";
  REQUIRE(setenv("AGENTMEM_TEST_SYNC_BETWEEN", write.c_str(), 1) == 0);
  const int status = Wait(StartSync(dir, "b.agentmem"));
  unsetenv("AGENTMEM_TEST_SYNC_BETWEEN");
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  SyncRun(dir, "b.agentmem");
  SyncRun(dir, "a.agentmem");
  for (agentmem_db* db : {a, b}) {
    CHECK(Persona(db) == "b meanwhile");
    CHECK(Current(db, "u", "ann", "lives_in") == "Rome");
  }
  CHECK(One(pg.get(), "SELECT value FROM blocks_current WHERE name = 'persona'") ==
        "b meanwhile");
}
#endif

TEST_CASE_FIXTURE(TwoFiles,
                  "a single-valued fact asserted on two files: the later global order is current") {
  for (agentmem_db* db : {a, b}) {
    REQUIRE(agentmem_predicate_declare(db, "lives_in", 1) == AGENTMEM_OK);
  }
  REQUIRE(agentmem_fact_assert(a, "u", "ann", "lives_in", "Paris", 1, 0, 0, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  REQUIRE(agentmem_fact_assert(b, "u", "ann", "lives_in", "Rome", 1, 0, 0, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  SyncRun(dir, "b.agentmem");  // Rome first
  SyncRun(dir, "a.agentmem");  // Paris after it: current
  SyncRun(dir, "b.agentmem");
  CHECK(Current(a, "u", "ann", "lives_in") == "Paris");
  CHECK(Current(b, "u", "ann", "lives_in") == "Paris");
  // Rome is kept, with its end in transaction time, in PostgreSQL and on both files.
  CHECK(One(pg.get(), "SELECT string_agg(object || ':' || (expired_at = 9223372036854775807),"
                      " ' ' ORDER BY gpos) FROM facts") == "Rome:false Paris:true");
  for (agentmem_db* db : {a, b}) {
    agentmem_cursor* cur = nullptr;
    REQUIRE(agentmem_facts_v2(db, "u", "ann", "lives_in", "Rome", 0, 0,
                              AGENTMEM_FACTS_ALL_VERSIONS, &cur) == AGENTMEM_OK);
    REQUIRE(agentmem_cursor_step(cur) == AGENTMEM_ROW);
    CHECK(agentmem_cursor_fact(cur)->expired_at < INT64_MAX);
    agentmem_cursor_close(cur);
  }
}

TEST_CASE_FIXTURE(TwoFiles,
                  "a forget synced removes the records from PostgreSQL and from the other file") {
  Remember(a, "bob", "Bob keeps a private diary entry here.", 1);
  Remember(a, "alice", "Alice stays.", 1);
  REQUIRE(agentmem_block_set(b, "bob", "notes", "bob private notes", 0, -1) == AGENTMEM_OK);
  SyncRun(dir, "a.agentmem");
  SyncRun(dir, "b.agentmem");
  REQUIRE(agentmem_forget(a, "bob", nullptr, 0, 0, nullptr) == AGENTMEM_OK);
  // The block came to a by pull; the forget names the user, so it goes too.
  SyncRun(dir, "a.agentmem");
  CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_changes WHERE data::text LIKE '%private%'") ==
        "0");
  CHECK(One(pg.get(), "SELECT (SELECT count(*) FROM episodes WHERE user_id = 'bob') +"
                      " (SELECT count(*) FROM blocks WHERE user_id = 'bob')") == "0");
  ShellResult r = SyncRun(dir, "b.agentmem");
  CHECK(r.out.find("1 forgets") != std::string::npos);
  agentmem_block* blk = nullptr;
  CHECK(agentmem_block_get(b, "bob", "notes", &blk) == AGENTMEM_NOTFOUND);
  CHECK(Shell(dir, "b.agentmem", "SELECT user_id, text FROM episodes") == "alice|Alice stays.\n");

  // A fact whose only source is forgotten goes with it, in PostgreSQL too.
  Remember(a, "alice", "Alice mentioned a passing remark.", 2);  // episode 3 on a
  const int64_t source = 3;
  REQUIRE(agentmem_fact_assert(a, "alice", "alice", "said", "a remark", 1, 0, 0, &source, 1,
                               nullptr) == AGENTMEM_OK);
  SyncRun(dir, "a.agentmem");
  CHECK(One(pg.get(), "SELECT count(*) FROM facts WHERE user_id = 'alice'") == "1");
  SyncRun(dir, "b.agentmem");
  CHECK(Sources(b, "alice", "a remark") == "Alice mentioned a passing remark.");
  REQUIRE(agentmem_forget_episode(a, source, 0, nullptr) == AGENTMEM_OK);
  SyncRun(dir, "a.agentmem");
  CHECK(One(pg.get(), "SELECT count(*) FROM facts WHERE user_id = 'alice'") == "0");
  CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_changes WHERE kind = 'fact'") == "0");
  SyncRun(dir, "b.agentmem");
  CHECK(Shell(dir, "b.agentmem", "SELECT count(*) FROM facts WHERE user_id = 'alice'") == "0\n");
}

TEST_CASE("a bad row stops the pull after the batches before it, and the next run resumes") {
  TempDir dir;
  Conn pg = Fresh();
  agentmem_db* a = OpenReplica(dir, "a.agentmem");
  for (int txn = 0; txn < 2; txn++) {  // two transactions of 600 episodes: two batches
    REQUIRE(agentmem_begin(a) == AGENTMEM_OK);
    for (int i = 0; i < 600; i++) {
      const std::string text = "episode " + std::to_string(txn * 600 + i);
      Remember(a, "u", text.c_str(), static_cast<float>(i));
    }
    REQUIRE(agentmem_commit(a) == AGENTMEM_OK);
  }
  agentmem_close(a);
  SyncRun(dir, "a.agentmem");
  Run(pg.get(), "UPDATE agentmem_changes SET data = jsonb_set(data, '{ts}', '\"soon\"')"
                " WHERE kind = 'episode' AND id = 1100");
  agentmem_close(OpenReplica(dir, "b.agentmem"));
  ShellResult r = RunShell(dir.path(), {"sync", "b.agentmem", Url()});
  CHECK(r.status == 1);
  CHECK(r.err.find("(episode): ts is not an integer") != std::string::npos);
  CHECK(Shell(dir, "b.agentmem", "SELECT count(*) FROM episodes") == "600\n");
  Run(pg.get(), "UPDATE agentmem_changes SET data = jsonb_set(data, '{ts}', to_jsonb(1))"
                " WHERE kind = 'episode' AND id = 1100");
  SyncRun(dir, "b.agentmem");
  CHECK(Shell(dir, "b.agentmem", "SELECT count(*), count(DISTINCT text) FROM episodes") ==
        "1200|1200\n");
  CHECK(SyncRun(dir, "b.agentmem").out.rfind("up to date", 0) == 0);
}

TEST_CASE_FIXTURE(TwoFiles,
                  "rows of the wrong type are refused with the change they are in") {
  REQUIRE(agentmem_fact_assert(a, "u", "ann", "likes", "tea", 1, 0, 0, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  SyncRun(dir, "a.agentmem");
  const std::string gpos = One(pg.get(), "SELECT gpos FROM agentmem_changes WHERE kind = 'fact'");
  for (const char* bad :
       {"'{new}', '\"yes\"'", "'{object}', '7'", "'{source_episode_ids}', '{}'"}) {
    Run(pg.get(), std::string("UPDATE agentmem_changes SET data = jsonb_set(data, ") + bad +
                      ") WHERE kind = 'fact'");
    ShellResult r = RunShell(dir.path(), {"sync", "b.agentmem", Url()});
    CHECK(r.status == 1);
    CHECK_MESSAGE(r.err.find("change " + gpos + " (fact): ") != std::string::npos, r.err);
    Run(pg.get(), "UPDATE agentmem_changes SET data = data || '{\"new\": true, \"object\":"
                  " \"tea\", \"source_episode_ids\": []}' WHERE kind = 'fact'");
  }
  SyncRun(dir, "b.agentmem");
  CHECK(Current(b, "u", "ann", "likes") == "tea");
}

TEST_CASE("after VACUUM sync reads the new log and writes nothing twice") {
  TempDir dir;
  Conn pg = Fresh();
  agentmem_db* a = OpenReplica(dir, "a.agentmem");
  agentmem_db* b = OpenReplica(dir, "b.agentmem");
  Remember(a, "alice", "alice on a", 1);
  Remember(b, "bob", "bob on b", 1);
  agentmem_close(b);
  SyncRun(dir, "b.agentmem");
  SyncRun(dir, "a.agentmem");  // a holds bob's episode, pulled
  const std::string changes = One(pg.get(), "SELECT count(*) FROM agentmem_changes");
  REQUIRE(agentmem_vacuum(a, nullptr) == AGENTMEM_OK);  // a new log: every record again
  Remember(a, "alice", "after the vacuum", 1);
  ShellResult r = SyncRun(dir, "a.agentmem");
  CHECK(r.out.find("from the start of the log") != std::string::npos);
  CHECK(One(pg.get(), "SELECT string_agg(text, ',' ORDER BY gpos) FROM episodes") ==
        "bob on b,alice on a,after the vacuum");
  CHECK(One(pg.get(), "SELECT count(*) FROM agentmem_changes WHERE kind = 'episode'") == "3");
  CHECK(SyncRun(dir, "a.agentmem").out.rfind("up to date", 0) == 0);
  agentmem_close(a);
}

TEST_CASE_FIXTURE(TwoFiles,
                  "a file is refused by another database and by one restored to before it") {
  Remember(a, "u", "one", 0.5f);
  Remember(b, "v", "two", 0.25f);
  SyncRun(dir, "a.agentmem");
  SyncRun(dir, "b.agentmem");  // b has applied a's changes
  Run(pg.get(), "DELETE FROM agentmem_changes WHERE origin = (SELECT origin FROM agentmem_changes"
                " ORDER BY gpos DESC LIMIT 1)");  // as if restored to before b's push
  ShellResult r = RunShell(dir.path(), {"sync", "b.agentmem", Url()});
  CHECK(r.status == 1);
  CHECK(r.err.find("the database was restored to an earlier point") != std::string::npos);
  Conn fresh = Fresh();  // another database
  r = RunShell(dir.path(), {"sync", "a.agentmem", Url()});
  CHECK(r.status == 1);
  CHECK(r.err.find("the file was synced with another PostgreSQL database") != std::string::npos);
}

TEST_CASE("sync refuses a wrong command line, a server it cannot reach and old tables") {
  TempDir dir;
  agentmem_close(OpenReplica(dir, "m.agentmem"));
  ShellResult r = RunShell(dir.path(), {"sync", "m.agentmem"});
  CHECK(r.status == 1);
  CHECK(r.err.find("Usage: agentmem sync FILE CONNINFO") != std::string::npos);
  r = RunShell(dir.path(), {"sync", "m.agentmem", "postgresql:///nodb?host=/nonexistent"});
  CHECK(r.status == 1);
  CHECK(r.err.find("PostgreSQL") != std::string::npos);
  r = RunShell(dir.path(), {"sync", "missing.agentmem", Url()});
  CHECK(r.status == 1);
  Conn pg = Fresh();
  Run(pg.get(), "CREATE TABLE agentmem_changes (log text, seq bigint)");
  r = RunShell(dir.path(), {"sync", "m.agentmem", Url()});
  CHECK(r.status == 1);
  CHECK(r.err.find("made by an earlier agentmem sync") != std::string::npos);
}

// tests/engine/concurrency_test.cc -- one writer at a time across processes
// and handles, readers never blocked, snapshots consistent.
#include <doctest/doctest.h>

#include <agentmem.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/temp_dir.h"

using agentmem::test::TempDir;

namespace {

int CountEpisodes(agentmem_db* db, const char* user) {
  agentmem_cursor* cur = nullptr;
  if (agentmem_episodes(db, user, nullptr, &cur) != AGENTMEM_OK) return -1;
  int n = 0, rc;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) n++;
  agentmem_cursor_close(cur);
  return rc == AGENTMEM_DONE ? n : -1;
}

void WaitByte(int fd) {
  char c;
  while (read(fd, &c, 1) < 0) {
  }
}

void SendByte(int fd) {
  char c = 'x';
  while (write(fd, &c, 1) < 0) {
  }
}

// Exit status of a child, or -1 when it died of a signal.
int Reap(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("a second writer process gets AGENTMEM_BUSY after the timeout while readers read") {
  TempDir dir;
  std::string path = dir.File("shared.agentmem");
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open(path.c_str(), &db) == AGENTMEM_OK);
  REQUIRE(agentmem_remember(db, "u", "", "user", "before", 0, nullptr, nullptr, 0, nullptr) ==
          AGENTMEM_OK);
  agentmem_close(db);

  int to_child[2], to_parent[2];
  REQUIRE(pipe(to_child) == 0);
  REQUIRE(pipe(to_parent) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child holds the write lock inside an open transaction until told.
    agentmem_db* w = nullptr;
    if (agentmem_open(path.c_str(), &w) != AGENTMEM_OK) _exit(10);
    if (agentmem_begin(w) != AGENTMEM_OK) _exit(11);
    if (agentmem_remember(w, "u", "", "user", "from child", 0, nullptr, nullptr, 0, nullptr) !=
        AGENTMEM_OK) {
      _exit(12);
    }
    SendByte(to_parent[1]);
    WaitByte(to_child[0]);
    if (agentmem_commit(w) != AGENTMEM_OK) _exit(13);
    agentmem_close(w);
    _exit(0);
  }
  WaitByte(to_parent[0]);

  agentmem_db* writer = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &writer, AGENTMEM_OPEN_READWRITE, "busy_timeout=150") ==
          AGENTMEM_OK);
  CHECK(agentmem_remember(writer, "u", "", "user", "from parent", 0, nullptr, nullptr, 0,
                          nullptr) == AGENTMEM_BUSY_TIMEOUT);
  CHECK(agentmem_errcode(writer) == AGENTMEM_BUSY);
  CHECK(std::string(agentmem_errmsg(writer)).find("locked") != std::string::npos);

  agentmem_db* reader = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &reader, AGENTMEM_OPEN_READONLY, nullptr) == AGENTMEM_OK);
  CHECK(CountEpisodes(reader, "u") == 1);  // never blocked, and the child's txn is invisible

  SendByte(to_child[1]);
  CHECK(Reap(pid) == 0);
  CHECK(CountEpisodes(reader, "u") == 2);  // the next read moves to the new commit
  REQUIRE(agentmem_remember(writer, "u", "", "user", "from parent", 0, nullptr, nullptr, 0,
                            nullptr) == AGENTMEM_OK);
  CHECK(CountEpisodes(reader, "u") == 3);
  agentmem_close(reader);
  agentmem_close(writer);
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
}

TEST_CASE("two handles in one process take turns as writers and lose nothing") {
  TempDir dir;
  std::string path = dir.File("turns.agentmem");
  agentmem_db *a = nullptr, *b = nullptr;
  REQUIRE(agentmem_open(path.c_str(), &a) == AGENTMEM_OK);
  REQUIRE(agentmem_open(path.c_str(), &b) == AGENTMEM_OK);
  const int kEach = 200;
  // Counts the failed calls and keeps the first one's message.
  auto work = [&](agentmem_db* db, const char* who, int* failures, std::string* first) {
    for (int i = 0; i < kEach; i++) {
      std::string text = std::string(who) + " " + std::to_string(i);
      if (agentmem_remember(db, "u", who, "user", text.c_str(), 0, nullptr, nullptr, 0, nullptr) !=
          AGENTMEM_OK) {
        if ((*failures)++ == 0) *first = agentmem_errmsg(db);
      }
    }
  };
  int fa = 0, fb = 0;
  std::string ma, mb;
  std::thread ta(work, a, "a", &fa, &ma), tb(work, b, "b", &fb, &mb);
  ta.join();
  tb.join();
  CHECK_MESSAGE(fa == 0, ma);
  CHECK_MESSAGE(fb == 0, mb);
  CHECK(CountEpisodes(a, "u") == 2 * kEach);
  CHECK(CountEpisodes(b, "u") == 2 * kEach);
  agentmem_close(a);
  agentmem_close(b);
  REQUIRE(agentmem_open(path.c_str(), &a) == AGENTMEM_OK);
  agentmem_stats st;
  REQUIRE(agentmem_stats_get(a, &st) == AGENTMEM_OK);
  CHECK(st.episodes == 2 * kEach);
  CHECK(st.commits == 2 * kEach + 1);
  agentmem_close(a);
}

TEST_CASE("readers in other processes always see whole transactions") {
  // The writer appends transactions of 7 episodes plus a block holding the
  // running total; readers check, inside one snapshot, that the total and the
  // number of episodes agree.
  TempDir dir;
  std::string path = dir.File("ledger.agentmem");
  agentmem_db* db = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                           "sync=normal") == AGENTMEM_OK);
  REQUIRE(agentmem_block_set(db, "u", "ledger", "0", 0, -1) == AGENTMEM_OK);
  agentmem_close(db);

  const int kReaders = 2, kTxns = 150, kPerTxn = 7;
  std::vector<pid_t> readers;
  for (int r = 0; r < kReaders; r++) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      agentmem_db* rd = nullptr;
      if (agentmem_open_v2(path.c_str(), &rd, AGENTMEM_OPEN_READONLY, nullptr) != AGENTMEM_OK) {
        _exit(20);
      }
      int snapshots = 0, last = 0;
      while (last < kTxns * kPerTxn) {
        if (agentmem_begin(rd) != AGENTMEM_OK) _exit(21);
        agentmem_block* b = nullptr;
        if (agentmem_block_get(rd, "u", "ledger", &b) != AGENTMEM_OK) _exit(22);
        int total = std::atoi(b->value);
        agentmem_free(b);
        int n = CountEpisodes(rd, "u");
        if (agentmem_rollback(rd) != AGENTMEM_OK) _exit(23);
        if (n != total) _exit(24);  // an inconsistent snapshot
        if (n < last) _exit(25);    // snapshots never go back
        last = n;
        snapshots++;
      }
      agentmem_close(rd);
      _exit(snapshots > 0 ? 0 : 26);
    }
    readers.push_back(pid);
  }
  agentmem_db* w = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &w, AGENTMEM_OPEN_READWRITE, "sync=normal") ==
          AGENTMEM_OK);
  int total = 0;
  for (int t = 0; t < kTxns; t++) {
    REQUIRE(agentmem_begin(w) == AGENTMEM_OK);
    for (int i = 0; i < kPerTxn; i++) {
      REQUIRE(agentmem_remember(w, "u", "", "user", "turn", 0, nullptr, nullptr, 0, nullptr) ==
              AGENTMEM_OK);
    }
    total += kPerTxn;
    REQUIRE(agentmem_block_set(w, "u", "ledger", std::to_string(total).c_str(), 0, -1) ==
            AGENTMEM_OK);
    REQUIRE(agentmem_commit(w) == AGENTMEM_OK);
  }
  agentmem_close(w);
  for (pid_t pid : readers) CHECK(Reap(pid) == 0);
}

// tests/engine/checkpoint_test.cc -- checkpoints (engine/memory/checkpoint.cc): an
// open from a checkpoint sees exactly what a full scan sees, recall included;
// commits after a checkpoint, a later checkpoint and a crash at any point of
// writing one lose nothing; a damaged checkpoint is reported, naming the page.
#include <doctest/doctest.h>

#include <agentmem.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "format/file_header.h"
#include "format/page.h"
#include "tests/util/fault_env.h"
#include "tests/util/open_helpers.h"
#include "tests/util/seed.h"
#include "tests/util/temp_dir.h"

using agentmem::Status;
using agentmem::engine::Database;
using agentmem::format::EpisodeRecord;

namespace {

// Everything a reader sees of a file: every record and a few recalls.
struct View {
  std::vector<std::string> rows;
  bool operator==(const View&) const = default;
};

const char* kQueries[] = {"the cat sat on the mat", "rain in the mountains", "coffee and a book",
                          "a long walk"};

// `text_only`: recall by BM25 alone (a file with an external embedder and no
// vectors cannot embed a query).
View Look(agentmem_db* db, bool text_only = false) {
  View v;
  agentmem_stats st;
  REQUIRE(agentmem_stats_get(db, &st) == AGENTMEM_OK);
  v.rows.push_back("episodes=" + std::to_string(st.episodes) + " blocks=" + std::to_string(st.blocks) +
                   " versions=" + std::to_string(st.block_versions) + " facts=" + std::to_string(st.facts) +
                   " users=" + std::to_string(st.users) + " text=" + std::to_string(st.text_bytes));
  for (const char* user : {"ann", "bob", "cy"}) {
    agentmem_cursor* cur = nullptr;
    REQUIRE(agentmem_episodes(db, user, nullptr, &cur) == AGENTMEM_OK);
    while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
      const agentmem_episode* e = agentmem_cursor_episode(cur);
      v.rows.push_back(std::to_string(e->id) + " " + e->user_id + "/" + e->session_id + "/" + e->role +
                       ": " + e->text + " @" + std::to_string(e->ts));
    }
    agentmem_cursor_close(cur);
    REQUIRE(agentmem_blocks(db, user, &cur) == AGENTMEM_OK);
    while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
      const agentmem_block* b = agentmem_cursor_block(cur);
      v.rows.push_back(std::string("block ") + b->name + "=" + b->value);
    }
    agentmem_cursor_close(cur);
    REQUIRE(agentmem_facts(db, user, nullptr, nullptr, &cur) == AGENTMEM_OK);
    while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
      const agentmem_fact* f = agentmem_cursor_fact(cur);
      v.rows.push_back(std::string("fact ") + f->subject + " " + f->predicate + " " + f->object);
    }
    agentmem_cursor_close(cur);
    for (int mode : {AGENTMEM_RECALL_HYBRID, AGENTMEM_RECALL_BM25, AGENTMEM_RECALL_VECTOR}) {
      if (text_only && mode != AGENTMEM_RECALL_BM25) continue;
      for (const char* q : kQueries) {
        agentmem_recall_options o;
        agentmem_recall_options_init(&o);
        o.mode = mode;
        o.k = 5;
        REQUIRE(agentmem_recall(db, user, q, &o, &cur) == AGENTMEM_OK);
        std::string line = "recall " + std::to_string(mode) + " " + q + ":";
        while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
          const agentmem_hit* h = agentmem_cursor_hit(cur);
          char buf[96];
          std::snprintf(buf, sizeof buf, " %lld(%.9g,%d,%d)", static_cast<long long>(h->id), h->score,
                        h->bm25_rank, h->vector_rank);
          line += buf;
        }
        agentmem_cursor_close(cur);
        v.rows.push_back(line);
      }
    }
  }
  return v;
}

const char* kWords[] = {"cat", "mat", "rain", "mountains", "coffee", "book", "walk", "long",
                        "the", "a", "sat", "on", "in", "and", "river", "stone", "light"};

void Write(agentmem_db* db, std::mt19937* rng, int episodes) {
  REQUIRE(agentmem_begin(db) == AGENTMEM_OK);
  std::uniform_int_distribution<int> word(0, std::size(kWords) - 1), user(0, 2), n(2, 9);
  const char* users[] = {"ann", "bob", "cy"};
  for (int i = 0; i < episodes; i++) {
    std::string text;
    for (int w = n(*rng); w > 0; w--) text += std::string(kWords[word(*rng)]) + " ";
    int64_t id = 0;
    const char* u = users[user(*rng)];
    REQUIRE(agentmem_remember(db, u, i % 2 ? "s1" : "s2", i % 3 ? "user" : "assistant", text.c_str(),
                              i + 1, nullptr, nullptr, 0, &id) == AGENTMEM_OK);
    if (i % 7 == 0) {
      REQUIRE(agentmem_block_set(db, u, "notes", text.c_str(), 0, -1) == AGENTMEM_OK);
      int64_t fact = 0;
      REQUIRE(agentmem_fact_assert(db, u, u, "said", text.c_str(), 1.0, 0, INT64_MAX, &id, 1,
                                   &fact) == AGENTMEM_OK);
    }
  }
  REQUIRE(agentmem_commit(db) == AGENTMEM_OK);
}

// Where the log ends (the reserve's zeros after it are not counted).
uint64_t LogEnd(agentmem_db* db) {
  agentmem_stats st;
  REQUIRE(agentmem_stats_get(db, &st) == AGENTMEM_OK);
  return st.file_bytes;
}

agentmem_db* Open(const std::string& path, const char* options) {
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE, options);
  REQUIRE_MESSAGE(rc == AGENTMEM_OK, std::string(agentmem_errmsg(db)));
  return db;
}

agentmem::format::Superblock NewestSuperblockIn(const std::string& head) {
  agentmem::format::FileHeader h;
  REQUIRE(agentmem::format::DecodeFileHeader(head, &h).ok());
  agentmem::format::Superblock best;
  for (uint64_t off : agentmem::format::kSuperblockOffset) {
    agentmem::format::Superblock sb;
    if (agentmem::format::DecodeSuperblock(std::string_view(head).substr(off, 64), h.salt, &sb).ok() &&
        sb.generation >= best.generation) {
      best = sb;
    }
  }
  return best;
}

agentmem::format::Superblock NewestSuperblock(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), head.size());
  return NewestSuperblockIn(head);
}

agentmem::format::Superblock NewestSuperblockOf(agentmem::engine::Env* env, const std::string& path) {
  std::unique_ptr<agentmem::engine::File> f;
  REQUIRE(env->Open(path, agentmem::engine::OpenMode{true}, &f).ok());
  std::string head;
  REQUIRE(f->ReadAt(0, 4096, &head).ok());
  return NewestSuperblockIn(head);
}

}  // namespace

TEST_CASE("an open from a checkpoint sees exactly what a full scan of the log sees") {
  agentmem::test::TempDir dir;
  const std::string path = dir.path() + "/c.agentmem";
  std::mt19937 rng(static_cast<uint32_t>(agentmem::test::Seed()));
  // checkpoint_bytes=1: every close folds the log.
  agentmem_db* db = Open(path, "checkpoint_bytes=1&vector_dim=64");
  for (int round = 0; round < 3; round++) Write(db, &rng, 120);
  View before = Look(db);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  agentmem::format::Superblock sb = NewestSuperblock(path);
  REQUIRE(sb.checkpoint != 0);
  CHECK(sb.scan_from > sb.checkpoint);

  // The same file opened from the checkpoint, and read by a full scan (a
  // handle that never checkpoints opens from the superblock too, so the full
  // scan is forced by hiding the checkpoint: see the test below).
  db = Open(path, "checkpoint_bytes=0");
  CHECK(Look(db) == before);
  // Commits after the checkpoint are scanned on top of it.
  Write(db, &rng, 50);
  View after = Look(db);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  db = Open(path, "checkpoint_bytes=0");
  CHECK(Look(db) == after);
  // A second checkpoint over the first, and commits that reuse the mapped graph.
  Write(db, &rng, 40);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  db = Open(path, "checkpoint_bytes=1");
  View third = Look(db);
  Write(db, &rng, 30);
  View fourth = Look(db);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  CHECK(NewestSuperblock(path).scan_from > sb.scan_from);
  db = Open(path, "checkpoint_bytes=0");
  CHECK(Look(db) == fourth);
  CHECK_FALSE(third == fourth);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("a checkpoint gives the same state as the full scan it replaces") {
  // Two files with the same commits: one is opened from its checkpoint, the
  // other never had one. Everything a reader sees must agree.
  agentmem::test::TempDir dir;
  const std::string a = dir.path() + "/a.agentmem", b = dir.path() + "/b.agentmem";
  uint64_t seed = agentmem::test::Seed();
  for (const auto& [path, options] : {std::pair{a, "checkpoint_bytes=1&vector_dim=64"},
                                      std::pair{b, "checkpoint_bytes=0&vector_dim=64"}}) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    agentmem_db* db = Open(path, options);
    for (int round = 0; round < 4; round++) Write(db, &rng, 90);
    REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  }
  CHECK(NewestSuperblock(a).checkpoint != 0);
  CHECK(NewestSuperblock(b).checkpoint == 0);
  agentmem_db* da = Open(a, "checkpoint_bytes=0");
  agentmem_db* db = Open(b, "checkpoint_bytes=0");
  View va = Look(da), vb = Look(db);
  REQUIRE(va.rows.size() == vb.rows.size());
  for (size_t i = 0; i < va.rows.size(); i++) CHECK(va.rows[i] == vb.rows[i]);
  agentmem_close(da);
  agentmem_close(db);
}

// Whether the file at `path` is among this process's mappings.
bool MapsFile(const std::string& path) {
  const std::string name = std::filesystem::canonical(path).string();
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.size() >= name.size() && line.compare(line.size() - name.size(), name.size(), name) == 0) {
      return true;
    }
  }
  return false;
}

// Each query's vector hits for each user: (id, similarity) in order.
std::vector<std::pair<uint64_t, double>> VectorHits(agentmem::engine::Database* db,
                                                    const std::vector<std::vector<float>>& queries) {
  std::vector<std::pair<uint64_t, double>> all;
  for (const char* user : {"ann", "bob"}) {
    for (const std::vector<float>& v : queries) {
      agentmem::engine::RecallQuery q;
      q.user_id = user;
      q.vector = v;
      q.mode = agentmem::engine::RecallMode::kVector;
      q.k = 20;
      std::vector<agentmem::engine::RecallHit> hits;
      Status s = db->Recall(q, &hits, nullptr);
      REQUIRE_MESSAGE(s.ok(), s.ToString());
      for (const auto& h : hits) all.emplace_back(h.id, h.vector_score);
      all.emplace_back(0, 0);  // end of this list
    }
  }
  return all;
}

TEST_CASE("an open uses the graph's vectors where the file lies and answers as an open that reads them") {
  agentmem::test::TempDir dir;
  const std::string path = dir.path() + "/m.agentmem";
  std::mt19937 rng(static_cast<uint32_t>(agentmem::test::Seed()));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  auto random_vector = [&] {
    std::vector<float> v(256);
    for (float& x : v) x = unit(rng);
    return v;
  };
  agentmem::test::TestClock clock;
  auto opts = agentmem::test::TestOptionsFor(agentmem::engine::Env::Posix(), &clock,
                                             agentmem::engine::SyncMode::kFull, 7, 256);
  opts.checkpoint_bytes = 1;
  std::vector<std::vector<float>> queries;
  for (int i = 0; i < 8; i++) queries.push_back(random_vector());
  std::vector<std::pair<uint64_t, double>> written;
  {
    auto db = agentmem::test::MustOpen(path, opts);
    for (int i = 0; i < 500; i++) {
      EpisodeRecord r;
      r.user_id = i % 2 ? "ann" : "bob";
      r.text = "turn " + std::to_string(i);
      r.vector = random_vector();
      // Some too short to keep as they are (kept normalised), and a zero one.
      if (i % 50 == 7) {
        for (float& x : r.vector) x *= 1e-35f;
      }
      if (i == 100) std::fill(r.vector.begin(), r.vector.end(), 0.0f);
      uint64_t id = 0;
      REQUIRE(db->Remember(r, &id).ok());
    }
    written = VectorHits(db.get(), queries);
    REQUIRE(db->Close().ok());
  }
  REQUIRE(NewestSuperblock(path).checkpoint != 0);
  CHECK_FALSE(MapsFile(path));
  opts.checkpoint_bytes = 0;
  {
    // Pages of vectors with little text are stored uncompressed (docs/format.md
    // §4.4): their vectors are used in place, and the file stays mapped.
    auto mapped = agentmem::test::MustOpen(path, opts);
    CHECK(MapsFile(path));
    CHECK(VectorHits(mapped.get(), queries) == written);
    // An Env whose files cannot be mapped: the vectors are read and copied.
    agentmem::test::FaultEnv env(agentmem::engine::Env::Posix());
    auto read_opts = opts;
    read_opts.env = &env;
    auto read = agentmem::test::MustOpen(path, read_opts);
    CHECK(VectorHits(read.get(), queries) == written);
    REQUIRE(mapped->Close().ok());
    REQUIRE(read->Close().ok());
  }
  // Closed: the mapping is gone with the graph.
  CHECK_FALSE(MapsFile(path));
}

TEST_CASE("a reader whose snapshot predates a checkpoint moves past it on its next read") {
  agentmem::test::TempDir dir;
  const std::string path = dir.path() + "/r.agentmem";
  std::mt19937 rng(static_cast<uint32_t>(agentmem::test::Seed()));
  agentmem_db* writer = Open(path, "checkpoint_bytes=1&vector_dim=64");
  Write(writer, &rng, 100);
  agentmem_db* reader = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &reader, AGENTMEM_OPEN_READONLY, nullptr) == AGENTMEM_OK);
  View early = Look(reader);
  REQUIRE(agentmem_close(writer) == AGENTMEM_OK);  // writes a checkpoint
  REQUIRE(NewestSuperblock(path).checkpoint != 0);
  writer = Open(path, "checkpoint_bytes=0");
  Write(writer, &rng, 20);
  View now = Look(writer);
  CHECK(Look(reader) == now);
  CHECK_FALSE(early == now);
  agentmem_close(reader);
  agentmem_close(writer);
}

TEST_CASE("a crash at any point of writing a checkpoint loses no commit") {
  using agentmem::test::CrashPolicy;
  using agentmem::test::Fault;
  using agentmem::test::FaultEnv;
  const uint64_t seed = agentmem::test::Seed();
  for (CrashPolicy policy : {CrashPolicy::kDropAll, CrashPolicy::kKeepPrefix,
                             CrashPolicy::kKeepRandomSubset, CrashPolicy::kTearLast,
                             CrashPolicy::kGarbageSectors}) {
    for (uint64_t nth = 1; nth <= 3; nth++) {
      CAPTURE(agentmem::test::CrashPolicyName(policy));
      CAPTURE(nth);
      auto base = agentmem::engine::NewMemEnv();
      agentmem::test::TestClock clock;
      std::vector<uint64_t> acked;
      {
        FaultEnv env(base.get());
        auto opts = agentmem::test::TestOptionsFor(&env, &clock, agentmem::engine::SyncMode::kFull,
                                                   99, 8);
        opts.checkpoint_bytes = 1;
        auto db = agentmem::test::MustOpen("f", opts);
        for (int i = 0; i < 30; i++) {
          EpisodeRecord r;
          r.user_id = "u";
          r.text = "episode number " + std::to_string(i);
          r.vector = std::vector<float>(8, 0.1f * static_cast<float>(i + 1));
          r.vector[i % 8] = 1.0f;
          uint64_t id = 0;
          REQUIRE(db->Remember(r, &id).ok());
          acked.push_back(id);
        }
        // Close writes the checkpoint (pages, sync, superblock, sync): the
        // power goes out at its nth sync.
        env.FailAt(env.syncs() + nth, Fault::kEio, /*persistent=*/true,
                   agentmem::test::kOpSync);
        db->Close().IgnoreError();
        env.SimulateCrash(policy, seed + nth);
      }
      auto opts = agentmem::test::TestOptionsFor(base.get(), &clock,
                                                 agentmem::engine::SyncMode::kFull, 99, 8);
      auto db = agentmem::test::MustOpen("f", opts);
      for (uint64_t id : acked) {
        EpisodeRecord r;
        Status s = db->GetEpisode(id, &r);
        REQUIRE_MESSAGE(s.ok(), s.ToString());
        CHECK(r.text == "episode number " + std::to_string(id - 1));
      }
      agentmem::engine::RecallQuery q;
      q.user_id = "u";
      q.text = "episode number";
      q.vector = std::vector<float>(8, 0.0f);
      q.vector[3] = 1.0f;
      q.mode = agentmem::engine::RecallMode::kVector;
      q.k = 30;
      std::vector<agentmem::engine::RecallHit> hits;
      Status s = db->Recall(q, &hits, nullptr);
      REQUIRE_MESSAGE(s.ok(), s.ToString());
      CHECK(hits.size() == 30);
    }
  }
}

TEST_CASE("a checkpoint after VACUUM dropped the last episodes keeps their ids used") {
  agentmem::test::TempDir dir;
  const std::string path = dir.path() + "/v.agentmem";
  agentmem_db* db = Open(path, "checkpoint_bytes=1&vector_dim=16&embedder=my-model");
  for (int i = 1; i <= 6; i++) {
    int64_t id = 0;
    REQUIRE(agentmem_remember(db, "ann", "s", "user", ("note " + std::to_string(i)).c_str(), i, nullptr,
                              nullptr, 0, &id) == AGENTMEM_OK);
    REQUIRE(id == i);
  }
  for (int64_t id : {2, 5, 6}) REQUIRE(agentmem_forget_episode(db, id, 0, nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_vacuum(db, nullptr) == AGENTMEM_OK);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  REQUIRE(NewestSuperblock(path).checkpoint != 0);
  db = Open(path, "checkpoint_bytes=0");
  const View after = Look(db, true);
  for (int64_t id = 1; id <= 6; id++) {
    CAPTURE(id);
    agentmem_episode* e = nullptr;
    const bool kept = id != 2 && id != 5 && id != 6;
    CHECK((agentmem_episode_get(db, id, &e) == AGENTMEM_OK) == kept);
    if (e) agentmem_free(e);
  }
  int64_t id = 0;
  REQUIRE(agentmem_remember(db, "ann", "s", "user", "note 7", 7, nullptr, nullptr, 0, &id) == AGENTMEM_OK);
  CHECK(id == 7);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  CHECK(after.rows.front().find("episodes=3 ") != std::string::npos);
}

TEST_CASE("a close leaves the checkpoint to the handle that holds the write lock") {
  agentmem::test::TempDir dir;
  const std::string path = dir.path() + "/l.agentmem";
  std::mt19937 rng(11);
  agentmem_db* a = Open(path, "checkpoint_bytes=1&vector_dim=64");
  agentmem_db* b = Open(path, "checkpoint_bytes=1&vector_dim=64");
  Write(a, &rng, 40);
  // With checkpoint_bytes=1 the commit itself checkpointed (its log was past
  // 16 bytes and the size of no checkpoint).
  const uint64_t at_commit = NewestSuperblock(path).checkpoint;
  CHECK(at_commit != 0);
  REQUIRE(agentmem_begin(b) == AGENTMEM_OK);  // b writes: it holds the lock
  int64_t id = 0;
  REQUIRE(agentmem_remember(b, "cy", "s1", "user", "a walk by the river", 1, nullptr, nullptr, 0, &id) ==
          AGENTMEM_OK);
  REQUIRE(agentmem_close(a) == AGENTMEM_OK);
  CHECK(NewestSuperblock(path).checkpoint == at_commit);  // a could not take the lock
  REQUIRE(agentmem_commit(b) == AGENTMEM_OK);
  // One episode is far less log than the last checkpoint: no checkpoint at
  // this commit, but one at the close.
  CHECK(NewestSuperblock(path).checkpoint == at_commit);
  const View before = Look(b);
  REQUIRE(agentmem_close(b) == AGENTMEM_OK);
  CHECK(NewestSuperblock(path).checkpoint > at_commit);
  agentmem_db* c = Open(path, "checkpoint_bytes=0");
  CHECK(Look(c) == before);
  REQUIRE(agentmem_close(c) == AGENTMEM_OK);
}

TEST_CASE("a writer that stays open checkpoints once the log outgrows 16 x checkpoint_bytes and the last checkpoint") {
  agentmem::test::TempDir dir;
  const std::string path = dir.path() + "/w.agentmem";
  std::mt19937 rng(5);
  // 16 x 4 KiB = 64 KiB of log before a commit checkpoints.
  agentmem_db* db = Open(path, "checkpoint_bytes=4096&vector_dim=64");
  std::vector<uint64_t> checkpoints;  // where each one was written
  uint64_t commits = 0;
  while (checkpoints.size() < 3) {
    const uint64_t before = NewestSuperblock(path).checkpoint;
    const uint64_t end_before = LogEnd(db);
    Write(db, &rng, 20);
    commits++;
    REQUIRE(commits < 2000);
    const uint64_t now = NewestSuperblock(path).checkpoint;
    if (now == before) continue;
    // The checkpoint follows this commit's pages, and came only once the log
    // since the last one (or the file's start) passed 64 KiB.
    CHECK(now >= end_before);
    CHECK(now - (checkpoints.empty() ? 0 : checkpoints.back()) >= 16 * 4096);
    checkpoints.push_back(now);
  }
  MESSAGE(commits << " commits of 20 episodes, checkpoints at " << checkpoints[0] << ", "
                  << checkpoints[1] << ", " << checkpoints[2]);
  // A reader opening now starts from the newest checkpoint and sees what the
  // writer sees; so does an open after a crash (the writer never closed).
  agentmem_db* reader = nullptr;
  REQUIRE(agentmem_open_v2(path.c_str(), &reader, AGENTMEM_OPEN_READONLY, "checkpoint_bytes=0") ==
          AGENTMEM_OK);
  CHECK(Look(reader) == Look(db));
  REQUIRE(agentmem_close(reader) == AGENTMEM_OK);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
}

TEST_CASE("an I/O error at any operation of a closing checkpoint fails the close and loses no commit") {
  // The close writes the checkpoint (pages, sync, read back, superblock,
  // sync); the nth of its operations fails, whatever it is. The checkpoint
  // is then not used -- the superblock never points at bytes that were not
  // synced and read back -- and a reopen scans the log.
  using agentmem::test::Fault;
  using agentmem::test::FaultEnv;
  int failed = 0;
  for (uint64_t nth = 1; nth < 40; nth++) {
    CAPTURE(nth);
    auto base = agentmem::engine::NewMemEnv();
    agentmem::test::TestClock clock;
    Status closed;
    uint64_t hit = 0;
    {
      FaultEnv env(base.get());
      auto opts = agentmem::test::TestOptionsFor(&env, &clock, agentmem::engine::SyncMode::kFull, 99, 8);
      // Due at the close (a tail of 512 bytes), not after the commit (16 times that).
      opts.checkpoint_bytes = 512;
      auto db = agentmem::test::MustOpen("f", opts);
      REQUIRE(db->Begin().ok());
      for (int i = 0; i < 30; i++) {
        EpisodeRecord r;
        r.user_id = i % 2 ? "u" : "v";
        r.text = "episode number " + std::to_string(i);
        uint64_t id = 0;
        REQUIRE(db->Remember(r, &id).ok());
      }
      REQUIRE(db->Commit().ok());
      env.FailAt(nth, Fault::kEio, /*persistent=*/false, agentmem::test::kOpAll);
      closed = db->Close();
      hit = env.faults_hit();
    }
    auto opts = agentmem::test::TestOptionsFor(base.get(), &clock, agentmem::engine::SyncMode::kFull, 99, 8);
    opts.checkpoint_bytes = 0;
    auto db = agentmem::test::MustOpen("f", opts);
    agentmem::engine::Stats st;
    REQUIRE(db->GetStats(&st).ok());
    CHECK(st.episodes == 30);
    for (uint64_t id = 1; id <= 30; id++) {
      EpisodeRecord r;
      REQUIRE(db->GetEpisode(id, &r).ok());
      CHECK(r.text == "episode number " + std::to_string(id - 1));
    }
    if (hit == 0) {  // past the close's last operation
      CHECK(closed.ok());
      CHECK(NewestSuperblockOf(base.get(), "f").checkpoint != 0);
      break;
    }
    CAPTURE(closed.ToString());
    CHECK((closed.primary() == agentmem::kIoErr || closed.ok()));
    failed++;
  }
  CHECK(failed >= 5);
}

TEST_CASE("a flipped byte in any checkpoint page fails the open naming the page") {
  agentmem::test::TempDir dir;
  const std::string path = dir.path() + "/d.agentmem";
  std::mt19937 rng(static_cast<uint32_t>(agentmem::test::Seed()));
  agentmem_db* db = Open(path, "checkpoint_bytes=1&vector_dim=32");
  Write(db, &rng, 200);
  REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  const agentmem::format::Superblock sb = NewestSuperblock(path);
  REQUIRE(sb.checkpoint != 0);
  std::string good;
  {
    std::ifstream in(path, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The checkpoint's pages: state, bm25, graph, commit.
  std::vector<uint64_t> pages;
  for (uint64_t pos = sb.checkpoint; pos < sb.scan_from;) {
    pages.push_back(pos);
    uint32_t length = 0;
    std::memcpy(&length, good.data() + pos + 12, 4);
    pos += agentmem::format::PaddedPageSize(length);
  }
  REQUIRE(pages.size() == 4);
  for (uint64_t page : pages) {
    for (uint64_t at : {page + 40, (page + (page == pages.back() ? 40 : 200))}) {
      CAPTURE(page);
      CAPTURE(at);
      std::string bad = good;
      bad[at] ^= 0x10;
      {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(bad.data(), static_cast<std::streamsize>(bad.size()));
      }
      agentmem_db* d = nullptr;
      int rc = agentmem_open_v2(path.c_str(), &d, AGENTMEM_OPEN_READONLY, nullptr);
      CHECK((rc & 0xff) == AGENTMEM_CORRUPT);
      INFO(std::string(agentmem_errmsg(d)));
      CHECK(std::string(agentmem_errmsg(d)).find("page " + std::to_string(page / 16)) !=
            std::string::npos);
      agentmem_close(d);
    }
  }
}

TEST_CASE("a checkpoint of a file that has never held a vector opens, and recall by text works") {
  // An external embedder and no vectors given: the graph section is empty.
  for (const char* options : {"checkpoint_bytes=1&vector_dim=16&embedder=my-model", "checkpoint_bytes=1"}) {
    CAPTURE(options);
    agentmem::test::TempDir dir;
    const std::string path = dir.path() + "/t.agentmem";
    std::mt19937 rng(7);
    agentmem_db* db = Open(path, options);
    Write(db, &rng, 60);
    // Forgotten episodes without a node are left out of the checkpoint (a
    // gap in its state section).
    REQUIRE(agentmem_forget_episode(db, 3, 0, nullptr) == AGENTMEM_OK);
    REQUIRE(agentmem_forget_episode(db, 4, 0, nullptr) == AGENTMEM_OK);
    const View before = Look(db, true);
    REQUIRE(before.rows.size() > 60);
    agentmem_stats st;
    REQUIRE(agentmem_stats_get(db, &st) == AGENTMEM_OK);
    CHECK(st.episodes == 58);
    REQUIRE(agentmem_close(db) == AGENTMEM_OK);
    REQUIRE(NewestSuperblock(path).checkpoint != 0);
    db = Open(path, "checkpoint_bytes=0");
    CHECK(Look(db, true) == before);
    REQUIRE(agentmem_close(db) == AGENTMEM_OK);
  }
}

// Remembers episode i for user "u", with a text that does not compress away
// (so that a few hundred of them pass 8 KiB of log).
static Status RememberIncompressible(Database* db, int i) {
  EpisodeRecord r;
  r.user_id = "u";
  std::mt19937 words(i);
  r.text = "episode " + std::to_string(i);
  for (int w = 0; w < 12; w++) r.text += " w" + std::to_string(words() % 100000);
  uint64_t id = 0;
  return db->Remember(r, &id);
}

TEST_CASE("a full disk while a commit checkpoints fails neither that commit nor the handle") {
  // The commit is durable before its checkpoint starts: a checkpoint that
  // cannot be written is not the commit's error, and the next call either
  // writes (space came back) or reports the full disk itself.
  using agentmem::test::Fault;
  using agentmem::test::FaultEnv;
  for (bool persistent : {false, true}) {
    CAPTURE(persistent);
    auto base = agentmem::engine::NewMemEnv();
    agentmem::test::TestClock clock;
    FaultEnv env(base.get());
    auto opts = agentmem::test::TestOptionsFor(&env, &clock, agentmem::engine::SyncMode::kFull, 99, 8);
    opts.checkpoint_bytes = 512;  // a commit checkpoints past 8 KiB of log
    auto db = agentmem::test::MustOpen("f", opts);
    auto remember = [&](int i) { return RememberIncompressible(db.get(), i); };
    // The commit's write goes through; the checkpoint's, next, finds the disk full.
    env.FailAt(2, Fault::kEnospc, persistent, agentmem::test::kOpWrite);
    REQUIRE(db->Begin().ok());
    for (int i = 0; i < 300; i++) REQUIRE(remember(i).ok());
    Status committed = db->Commit();
    CHECK_MESSAGE(committed.ok(), committed.ToString());
    REQUIRE(env.faults_hit() == 1);  // the checkpoint was tried
    CHECK(NewestSuperblockOf(base.get(), "f").checkpoint == 0);
    Status next = remember(300);
    if (persistent) {
      CHECK(next.code() == agentmem::kFull);
    } else {
      CHECK_MESSAGE(next.ok(), next.ToString());
    }
    env.ClearFaults();
    db->Close().IgnoreError();
    db.reset();
    opts.env = base.get();
    db = agentmem::test::MustOpen("f", opts);
    agentmem::engine::Stats st;
    REQUIRE(db->GetStats(&st).ok());
    CHECK(st.episodes == (persistent ? 300u : 301u));
    std::vector<std::string> problems;
    REQUIRE(db->Check(&problems).ok());
    CHECK(problems.empty());
  }
}

TEST_CASE("a failed sync in a commit's checkpoint is reported by the next write, or by the close") {
  // The commit returns OK (its own sync went through), but fsync is never
  // retried: the handle's next call must say so, and when no call comes
  // before the close, the close does -- with sync=normal that sync was the
  // one that made the commits durable.
  using agentmem::test::Fault;
  using agentmem::test::FaultEnv;
  for (bool write_after : {false, true}) {
    CAPTURE(write_after);
    auto base = agentmem::engine::NewMemEnv();
    agentmem::test::TestClock clock;
    FaultEnv env(base.get());
    auto opts = agentmem::test::TestOptionsFor(&env, &clock, agentmem::engine::SyncMode::kFull, 99, 8);
    opts.checkpoint_bytes = 512;  // a commit checkpoints past 8 KiB of log
    auto db = agentmem::test::MustOpen("f", opts);
    auto remember = [&](int i) { return RememberIncompressible(db.get(), i); };
    // The commit's sync goes through; the checkpoint's, next, fails.
    env.FailAt(2, Fault::kEio, /*persistent=*/false, agentmem::test::kOpSync);
    REQUIRE(db->Begin().ok());
    for (int i = 0; i < 300; i++) REQUIRE(remember(i).ok());
    Status committed = db->Commit();
    CHECK_MESSAGE(committed.ok(), committed.ToString());
    REQUIRE(env.faults_hit() == 1);  // the checkpoint's sync failed
    if (write_after) {
      CHECK(remember(300).code() == agentmem::kIoErrSticky);
      CHECK(db->Close().ok());  // already reported
    } else {
      Status closed = db->Close();
      CHECK(closed.code() == agentmem::kIoErrSticky);
      CHECK(closed.message().find("checkpoint") != std::string::npos);
    }
    db.reset();
    opts.env = base.get();
    db = agentmem::test::MustOpen("f", opts);
    agentmem::engine::Stats st;
    REQUIRE(db->GetStats(&st).ok());
    CHECK(st.episodes == 300u);
  }
}

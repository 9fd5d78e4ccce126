// tests/engine/recover_test.cc -- salvage of damaged files (engine/memory/recover.cc,
// docs/recovery.md): what survives, what the report names, and that the
// source is never written.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agentmem.h"
#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "engine/memory/recover.h"
#include "format/file_header.h"
#include "format/page.h"
#include "tests/util/oracle.h"
#include "tests/util/temp_dir.h"

namespace agentmem::test {
namespace {

using engine::Database;
using engine::Env;
using engine::Options;
using engine::RecoverReport;
using format::EpisodeRecord;
using format::PageType;

constexpr const char* kSrc = "/mem/src.agentmem";
constexpr const char* kDst = "/mem/dst.agentmem";

Options Opts(Env* env, TestClock* clock) {
  Options o;
  o.env = env;
  o.salt = 0x5a1a6e0000c0ffeeULL;
  o.clock = clock->Fn();
  o.busy_timeout_ms = 200;
  o.page_size = 16384;  // a transaction's three episodes (with 384-d vectors) on one page
  return o;
}

std::unique_ptr<Database> MustOpen(const std::string& path, const Options& o) {
  std::unique_ptr<Database> db;
  Status s = Database::Open(path, o, &db);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return db;
}

std::string Text(uint64_t txn, int i) {
  return "transaction " + std::to_string(txn) + " turn " + std::to_string(i) + " about word" +
         std::to_string(txn * 10 + i);
}

// Five transactions of three episodes each (ids 1-15), each episode page a
// page of its own; returns the offset of every episodes page, by transaction.
std::vector<uint64_t> BuildFile(Env* env, TestClock* clock) {
  std::unique_ptr<Database> db = MustOpen(kSrc, Opts(env, clock));
  for (uint64_t t = 1; t <= 5; t++) {
    REQUIRE(db->Begin().ok());
    for (int i = 0; i < 3; i++) {
      EpisodeRecord e;
      e.user_id = "alice";
      e.session_id = "s" + std::to_string(t);
      e.role = "user";
      e.text = Text(t, i);
      uint64_t id = 0;
      REQUIRE(db->Remember(e, &id).ok());
    }
    REQUIRE(db->Commit().ok());
  }
  REQUIRE(db->Close().ok());
  std::unique_ptr<engine::File> f;
  REQUIRE(env->Open(kSrc, engine::OpenMode{true}, &f).ok());
  uint64_t size = 0;
  REQUIRE(f->Size(&size).ok());
  std::string bytes;
  REQUIRE(f->ReadAt(0, size, &bytes).ok());
  format::FileHeader fh;
  REQUIRE(format::DecodeFileHeader(bytes, &fh).ok());
  std::vector<uint64_t> episode_pages;
  for (uint64_t pos = format::kFirstPageOffset; pos < bytes.size();) {
    format::PageHeader h;
    REQUIRE(format::PeekPageHeader(std::string_view(bytes).substr(pos, 32), pos, fh.salt, &h).ok());
    if (h.type == static_cast<uint8_t>(PageType::kEpisodes)) episode_pages.push_back(pos);
    pos += format::PaddedPageSize(h.length);
  }
  REQUIRE(episode_pages.size() == 5);
  return episode_pages;
}

std::string ReadAll(Env* env, const std::string& path) {
  std::unique_ptr<engine::File> f;
  REQUIRE(env->Open(path, engine::OpenMode{true}, &f).ok());
  uint64_t size = 0;
  REQUIRE(f->Size(&size).ok());
  std::string bytes;
  REQUIRE(f->ReadAt(0, size, &bytes).ok());
  return bytes;
}

// Flips one byte of the file in place.
void Flip(Env* env, const std::string& path, uint64_t offset) {
  std::unique_ptr<engine::File> f;
  REQUIRE(env->Open(path, engine::OpenMode{false}, &f).ok());
  std::string b;
  REQUIRE(f->ReadAt(offset, 1, &b).ok());
  b[0] = static_cast<char>(b[0] ^ 0x5a);
  REQUIRE(f->WriteAt(offset, b).ok());
}

std::set<uint64_t> Episodes(Database* db) {
  std::vector<uint64_t> ids;
  REQUIRE(db->ListEpisodeIds("alice", nullptr, &ids).ok());
  return std::set<uint64_t>(ids.begin(), ids.end());
}

std::vector<uint64_t> Lost(const RecoverReport& r) {
  std::vector<uint64_t> out;
  for (const auto& [first, last] : r.episodes_lost) {
    for (uint64_t id = first; id <= last; id++) out.push_back(id);
  }
  return out;
}

TEST_CASE("recover keeps every episode not on the damaged page of the middle transaction") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  const std::vector<uint64_t> pages = BuildFile(env.get(), &clock);
  Flip(env.get(), kSrc, pages[2] + 40);  // a payload byte of transaction 3's episodes page
  {
    std::unique_ptr<Database> db;
    Status s = Database::Open(kSrc, Opts(env.get(), &clock), &db);
    REQUIRE(s.primary() == kCorrupt);  // open refuses it, naming the page
    CHECK(s.page_no() == static_cast<int64_t>(pages[2] / 16));
  }
  const std::string before = ReadAll(env.get(), kSrc);

  RecoverReport r;
  Status s = engine::Recover(kSrc, kDst, Opts(env.get(), &clock), &r);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(ReadAll(env.get(), kSrc) == before);  // the source is never written

  // The report: one damaged page, one dropped transaction, its three episodes.
  REQUIRE(r.damage.size() == 1);
  CHECK(r.damage[0].offset == pages[2]);
  CHECK(r.damage[0].bytes > 0);
  CHECK(r.damage[0].offset + r.damage[0].bytes < pages[3]);  // up to the next valid page
  CHECK(r.damage[0].error.find(std::to_string(pages[2] / 16)) != std::string::npos);
  REQUIRE(r.dropped.size() == 1);
  CHECK(r.dropped[0].first_offset == pages[2]);
  CHECK(r.dropped[0].commit_seq == 4);  // the file's creation is commit 1
  CHECK(r.dropped[0].episodes == std::vector<uint64_t>{7, 8, 9});
  CHECK(Lost(r) == std::vector<uint64_t>{7, 8, 9});
  CHECK(r.episodes_lost_count == 3);
  CHECK(r.transactions_kept == 5);  // the creation and four of five
  CHECK(r.episodes_written == 12);
  CHECK_FALSE(r.clean());
  const std::string json = engine::RecoverReportJson(r);
  CHECK(json.find("\"episodes_lost\":[[7,9]]") != std::string::npos);
  CHECK(json.find("\"page\":" + std::to_string(pages[2] / 16)) != std::string::npos);

  // The new file: every other episode, with its id, text and both indexes.
  std::unique_ptr<Database> db = MustOpen(kDst, Opts(env.get(), &clock));
  std::vector<std::string> problems;
  REQUIRE(db->Check(&problems).ok());
  CHECK(problems.empty());
  std::set<uint64_t> want;
  for (uint64_t id = 1; id <= 15; id++) {
    if (id < 7 || id > 9) want.insert(id);
  }
  CHECK(Episodes(db.get()) == want);
  EpisodeRecord e;
  REQUIRE(db->GetEpisode(11, &e).ok());
  CHECK(e.text == Text(4, 1));
  CHECK(e.session_id == "s4");
  CHECK(db->GetEpisode(8, &e).code() == kNotFound);
  for (auto mode : {engine::RecallMode::kBm25, engine::RecallMode::kVector}) {
    engine::RecallQuery q;
    q.user_id = "alice";
    q.text = Text(5, 2);
    q.k = 1;
    q.mode = mode;
    std::vector<engine::RecallHit> hits;
    REQUIRE(db->Recall(q, &hits, nullptr).ok());
    REQUIRE(hits.size() == 1);
    CHECK(hits[0].id == 15);
  }
  // Ids of the lost episodes are never given again.
  EpisodeRecord more;
  more.user_id = "alice";
  more.role = "user";
  more.text = "after the salvage";
  uint64_t id = 0;
  REQUIRE(db->Remember(more, &id).ok());
  CHECK(id == 16);
  REQUIRE(db->Close().ok());
}

TEST_CASE("recover without a destination only reports, and the report matches") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  const std::vector<uint64_t> pages = BuildFile(env.get(), &clock);
  Flip(env.get(), kSrc, pages[1] + 8);  // transaction 2's episodes page, in its header (salt)
  RecoverReport r;
  Status s = engine::Recover(kSrc, "", Opts(env.get(), &clock), &r);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK_FALSE(env->Exists(kDst));
  REQUIRE(r.damage.size() == 1);
  CHECK(r.damage[0].offset == pages[1]);
  CHECK(r.damage[0].commit_seq == 3);
  CHECK(Lost(r) == std::vector<uint64_t>{4, 5, 6});
  CHECK(r.destination.empty());
}

TEST_CASE("recover of a sound file copies everything and reports it clean") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  BuildFile(env.get(), &clock);
  {
    std::unique_ptr<Database> db = MustOpen(kSrc, Opts(env.get(), &clock));
    format::BlockRecord b;
    b.user_id = "alice";
    b.name = "persona";
    b.value = "likes tea";
    REQUIRE(db->SetBlock(b).ok());
    b.value = "likes coffee";
    REQUIRE(db->SetBlock(b).ok());
    format::FactRecord f;
    f.user_id = "alice";
    f.subject = "alice";
    f.predicate = "lives_in";
    f.object = "Lisbon";
    f.confidence = 1;
    uint64_t fid = 0;
    REQUIRE(db->AssertFact(f, &fid).ok());
    format::ForgetRecord fg;
    fg.kind = format::ForgetKind::kEpisode;
    fg.id = 2;
    REQUIRE(db->Forget(fg, nullptr).ok());
    REQUIRE(db->Close().ok());
  }
  RecoverReport r;
  Status s = engine::Recover(kSrc, kDst, Opts(env.get(), &clock), &r);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(r.clean());
  CHECK(r.damage.empty());
  CHECK(r.episodes_lost_count == 0);
  std::unique_ptr<Database> db = MustOpen(kDst, Opts(env.get(), &clock));
  std::set<uint64_t> want;
  for (uint64_t id = 1; id <= 15; id++) {
    if (id != 2) want.insert(id);  // the forget is carried over
  }
  CHECK(Episodes(db.get()) == want);
  std::vector<format::BlockRecord> history;
  REQUIRE(db->ListBlockHistory("alice", "persona", &history).ok());
  REQUIRE(history.size() == 2);
  CHECK(history[1].value == "likes coffee");
  std::vector<format::FactRecord> facts;
  REQUIRE(db->ListFacts("alice", nullptr, nullptr, &facts).ok());
  REQUIRE(facts.size() == 1);
  CHECK(facts[0].object == "Lisbon");
  REQUIRE(db->Close().ok());
}

TEST_CASE("a damaged commit page drops its transaction and keeps the next one") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  const std::vector<uint64_t> pages = BuildFile(env.get(), &clock);
  // Transaction 2's commit page is the page just before transaction 3's
  // episodes page; a byte of its payload (commit record).
  const std::string bytes = ReadAll(env.get(), kSrc);
  uint64_t commit = 0;
  format::FileHeader fh;
  REQUIRE(format::DecodeFileHeader(bytes, &fh).ok());
  for (uint64_t pos = pages[1]; pos < pages[2];) {
    format::PageHeader h;
    REQUIRE(format::PeekPageHeader(std::string_view(bytes).substr(pos, 32), pos, fh.salt, &h).ok());
    if (h.type == static_cast<uint8_t>(PageType::kCommit)) commit = pos;
    pos += format::PaddedPageSize(h.length);
  }
  REQUIRE(commit != 0);
  Flip(env.get(), kSrc, commit + 40);
  RecoverReport r;
  Status s = engine::Recover(kSrc, kDst, Opts(env.get(), &clock), &r);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(r.damage.size() == 1);
  CHECK(r.damage[0].offset == commit);
  REQUIRE(r.dropped.size() == 1);
  CHECK(r.dropped[0].commit_offset == 0);  // its commit page is the damage
  CHECK(r.dropped[0].first_offset == pages[1]);
  CHECK(r.dropped[0].episodes == std::vector<uint64_t>{4, 5, 6});
  CHECK(Lost(r) == std::vector<uint64_t>{4, 5, 6});
  std::unique_ptr<Database> db = MustOpen(kDst, Opts(env.get(), &clock));
  std::set<uint64_t> want = {1, 2, 3, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  CHECK(Episodes(db.get()) == want);
  REQUIRE(db->Close().ok());
}

// Episodes 1-9 in three transactions and a forget of episode 1, written with
// checkpoint_bytes 1 (so checkpoints follow commits and the close), then
// episodes 10-15 in two more. Gives the episodes page and the text page of
// episodes 4-6 (commit 4), and the forget page; all lie before the last
// checkpoint.
struct CheckpointedFile {
  uint64_t episodes_4_6 = 0, text_4_6 = 0, forget_page = 0;
};

CheckpointedFile BuildCheckpointedFile(Env* env, TestClock* clock) {
  Options o = Opts(env, clock);
  o.checkpoint_bytes = 1;
  auto add = [](Database* db, uint64_t t) {
    REQUIRE(db->Begin().ok());
    for (int i = 0; i < 3; i++) {
      EpisodeRecord e;
      e.user_id = "alice";
      e.role = "user";
      e.text = Text(t, i);
      uint64_t id = 0;
      REQUIRE(db->Remember(e, &id).ok());
    }
    REQUIRE(db->Commit().ok());
  };
  {
    std::unique_ptr<Database> db = MustOpen(kSrc, o);
    for (uint64_t t = 1; t <= 3; t++) add(db.get(), t);
    format::ForgetRecord f;
    f.kind = format::ForgetKind::kEpisode;
    f.id = 1;
    REQUIRE(db->Forget(f, nullptr).ok());
    REQUIRE(db->Close().ok());
  }
  o.checkpoint_bytes = 0;
  {
    std::unique_ptr<Database> db = MustOpen(kSrc, o);
    for (uint64_t t = 4; t <= 5; t++) add(db.get(), t);
    REQUIRE(db->Close().ok());
  }
  const std::string bytes = ReadAll(env, kSrc);
  format::FileHeader fh;
  REQUIRE(format::DecodeFileHeader(bytes, &fh).ok());
  std::vector<uint64_t> episodes, texts;
  uint64_t last_checkpoint = 0;
  CheckpointedFile out;
  for (uint64_t pos = format::kFirstPageOffset; pos < bytes.size();) {
    format::PageHeader h;
    REQUIRE(format::PeekPageHeader(std::string_view(bytes).substr(pos, 32), pos, fh.salt, &h).ok());
    if (h.type == static_cast<uint8_t>(PageType::kEpisodes)) episodes.push_back(pos);
    if (h.type == static_cast<uint8_t>(PageType::kText)) texts.push_back(pos);
    if (h.type == static_cast<uint8_t>(PageType::kForget)) out.forget_page = pos;
    if (h.type == static_cast<uint8_t>(PageType::kCheckpoint)) last_checkpoint = pos;
    pos += format::PaddedPageSize(h.length);
  }
  REQUIRE(episodes.size() == 5);
  // One text page per transaction of episodes, and one for the forget: it
  // indexes episodes 2 and 3 again without episode 1 in their context.
  REQUIRE(texts.size() == 6);
  out.episodes_4_6 = episodes[1];
  out.text_4_6 = texts[1];
  REQUIRE(out.forget_page != 0);
  REQUIRE(out.forget_page < last_checkpoint);
  return out;
}

TEST_CASE("with a checkpoint, a transaction damaged outside its episodes page loses no episode") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  const CheckpointedFile f = BuildCheckpointedFile(env.get(), &clock);
  Flip(env.get(), kSrc, f.text_4_6 + 40);
  RecoverReport r;
  Status s = engine::Recover(kSrc, kDst, Opts(env.get(), &clock), &r);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(r.checkpoint_offset != 0);
  REQUIRE(r.dropped.size() == 1);
  CHECK(r.dropped[0].commit_seq == 4);
  CHECK(r.dropped[0].episodes.empty());
  CHECK(r.records_from_checkpoint == 3);  // episodes 4-6, named by the checkpoint
  CHECK(r.episodes_lost_count == 0);
  std::unique_ptr<Database> db = MustOpen(kDst, Opts(env.get(), &clock));
  std::set<uint64_t> want;
  for (uint64_t id = 2; id <= 15; id++) want.insert(id);  // 1 was forgotten
  CHECK(Episodes(db.get()) == want);
  engine::RecallQuery q;
  q.user_id = "alice";
  q.text = Text(2, 1);
  q.k = 1;
  q.mode = engine::RecallMode::kBm25;
  std::vector<engine::RecallHit> hits;
  REQUIRE(db->Recall(q, &hits, nullptr).ok());
  REQUIRE(hits.size() == 1);
  CHECK(hits[0].id == 5);  // its text was indexed again from the record
  REQUIRE(db->Close().ok());
}

TEST_CASE("with a checkpoint, a damaged episodes page loses exactly its episodes") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  const CheckpointedFile f = BuildCheckpointedFile(env.get(), &clock);
  Flip(env.get(), kSrc, f.episodes_4_6 + 40);
  RecoverReport r;
  Status s = engine::Recover(kSrc, kDst, Opts(env.get(), &clock), &r);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(Lost(r) == std::vector<uint64_t>{4, 5, 6});
  REQUIRE(r.dropped.size() == 1);
  CHECK(r.dropped[0].episodes == std::vector<uint64_t>{4, 5, 6});
  std::unique_ptr<Database> db = MustOpen(kDst, Opts(env.get(), &clock));
  std::set<uint64_t> want = {2, 3, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  CHECK(Episodes(db.get()) == want);
  REQUIRE(db->Close().ok());
}

TEST_CASE("a forget on a damaged page still applies when a checkpoint after it says so") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  const CheckpointedFile f = BuildCheckpointedFile(env.get(), &clock);
  Flip(env.get(), kSrc, f.forget_page + 40);
  RecoverReport r;
  Status s = engine::Recover(kSrc, kDst, Opts(env.get(), &clock), &r);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(r.dropped.size() == 1);
  CHECK(r.forgets_from_checkpoint == 1);
  CHECK(r.episodes_lost_count == 0);
  std::unique_ptr<Database> db = MustOpen(kDst, Opts(env.get(), &clock));
  EpisodeRecord e;
  CHECK(db->GetEpisode(1, &e).code() == kNotFound);  // forgotten, never brought back
  CHECK(Episodes(db.get()).size() == 14);
  REQUIRE(db->Close().ok());
}

TEST_CASE("whichever page is damaged, the recovered file opens, checks clean and loses only that transaction") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  const CheckpointedFile f = BuildCheckpointedFile(env.get(), &clock);
  (void)f;
  const std::string bytes = ReadAll(env.get(), kSrc);
  format::FileHeader fh;
  REQUIRE(format::DecodeFileHeader(bytes, &fh).ok());
  std::vector<uint64_t> pages;
  for (uint64_t pos = format::kFirstPageOffset; pos < bytes.size();) {
    format::PageHeader h;
    REQUIRE(format::PeekPageHeader(std::string_view(bytes).substr(pos, 32), pos, fh.salt, &h).ok());
    pages.push_back(pos);
    pos += format::PaddedPageSize(h.length);
  }
  int runs = 0;
  for (uint64_t page : pages) {
    for (uint64_t at : {page + 4, page + 16, page + 33}) {  // type, page number, payload
      CAPTURE(at);
      std::string damaged = bytes;
      damaged[at] = static_cast<char>(damaged[at] ^ 0x21);
      std::unique_ptr<Env> e = engine::NewMemEnv();
      REQUIRE(e->CreateAtomic(kSrc, damaged).ok());
      RecoverReport r;
      Status s = engine::Recover(kSrc, kDst, Opts(e.get(), &clock), &r);
      REQUIRE_MESSAGE(s.ok(), s.ToString());
      CHECK(r.damage.size() == 1);
      CHECK(r.dropped.size() <= 1);
      CHECK(r.episodes_lost_count <= 3);  // at most one transaction's episodes
      std::unique_ptr<Database> db = MustOpen(kDst, Opts(e.get(), &clock));
      std::vector<std::string> problems;
      REQUIRE(db->Check(&problems).ok());
      CHECK(problems.empty());
      CHECK(Episodes(db.get()).size() + r.episodes_lost_count == 14);  // 15, one forgotten
      REQUIRE(db->Close().ok());
      runs++;
    }
  }
  MESSAGE(runs << " damaged files recovered");
}

TEST_CASE("recover refuses an existing destination and a missing source") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  BuildFile(env.get(), &clock);
  REQUIRE(env->CreateAtomic(kDst, "x").ok());
  RecoverReport r;
  Status s = engine::Recover(kSrc, kDst, Opts(env.get(), &clock), &r);
  CHECK(s.code() == kCantOpenExists);
  CHECK(ReadAll(env.get(), kDst) == "x");
  s = engine::Recover("/mem/none.agentmem", "/mem/new.agentmem", Opts(env.get(), &clock), &r);
  CHECK(s.primary() == kCantOpen);
  CHECK_FALSE(env->Exists("/mem/new.agentmem"));
}

TEST_CASE("a damaged file header: the salt comes from a superblock and nothing is lost") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  BuildFile(env.get(), &clock);
  Flip(env.get(), kSrc, 40);  // the header's flags: its checksum fails
  {
    std::unique_ptr<Database> db;
    CHECK(Database::Open(kSrc, Opts(env.get(), &clock), &db).code() == kCorruptHeader);
  }
  RecoverReport r;
  Status s = engine::Recover(kSrc, kDst, Opts(env.get(), &clock), &r);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(r.header_damaged);
  REQUIRE(r.damage.size() == 1);
  CHECK(r.damage[0].offset == 0);
  CHECK(r.dropped.empty());
  CHECK(r.episodes_lost_count == 0);
  std::unique_ptr<Database> db = MustOpen(kDst, Opts(env.get(), &clock));
  CHECK(Episodes(db.get()).size() == 15);
  REQUIRE(db->Close().ok());
}

TEST_CASE("agentmem_recover reports as JSON, and a failure as a message (on real files)") {
  TempDir dir;
  TestClock clock;
  const std::string src = dir.File("src.agentmem"), dst = dir.File("dst.agentmem");
  {
    std::unique_ptr<Database> db = MustOpen(src, Opts(Env::Posix(), &clock));
    EpisodeRecord e;
    e.user_id = "bob";
    e.text = "hello";
    uint64_t id = 0;
    REQUIRE(db->Remember(e, &id).ok());
    REQUIRE(db->Close().ok());
  }
  char* report = nullptr;
  REQUIRE(agentmem_recover(src.c_str(), nullptr, &report) == AGENTMEM_OK);
  REQUIRE(report != nullptr);
  CHECK(std::string(report).find("\"clean\":true") != std::string::npos);
  CHECK(std::string(report).find("\"destination\":null") != std::string::npos);
  agentmem_free(report);
  REQUIRE(agentmem_recover(src.c_str(), dst.c_str(), nullptr) == AGENTMEM_OK);
  CHECK(agentmem_recover(src.c_str(), dst.c_str(), &report) == AGENTMEM_CANTOPEN_EXISTS);
  REQUIRE(report != nullptr);
  CHECK(std::string(report).find("exists") != std::string::npos);
  agentmem_free(report);
  CHECK(agentmem_recover(nullptr, dst.c_str(), &report) == AGENTMEM_MISUSE);
  agentmem_free(report);
  const std::string junk = dir.File("junk");
  WriteFileBytes(junk, std::string(5000, 'j'));
  CHECK(agentmem_recover(junk.c_str(), dir.File("out").c_str(), &report) == AGENTMEM_NOTADB);
  agentmem_free(report);
  CHECK_FALSE(Env::Posix()->Exists(dir.File("out")));
}

TEST_CASE("the recovered file has the permission bits of its source (on real files)") {
  TempDir dir;
  TestClock clock;
  Options o = Opts(Env::Posix(), &clock);
  const std::string src = dir.File("src.agentmem"), dst = dir.File("dst.agentmem");
  {
    std::unique_ptr<Database> db = MustOpen(src, o);
    EpisodeRecord e;
    e.user_id = "bob";
    e.text = "private";
    uint64_t id = 0;
    REQUIRE(db->Remember(e, &id).ok());
    REQUIRE(db->Close().ok());
  }
  REQUIRE(::chmod(src.c_str(), 0600) == 0);
  RecoverReport r;
  Status s = engine::Recover(src, dst, o, &r);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  struct stat st;
  REQUIRE(::stat(dst.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
}

}  // namespace
}  // namespace agentmem::test

namespace agentmem::test {
namespace {

// Alice's episode, fact and two blocks; then a forget of the fact and of
// the block "secret" in one transaction, each commit followed by a
// checkpoint when `checkpoint_after` (else none at all); then one more
// episode. Returns the offset of the forget page.
uint64_t BuildForgottenFactAndBlock(Env* env, TestClock* clock, bool checkpoint_after) {
  Options o = Opts(env, clock);
  o.checkpoint_bytes = checkpoint_after ? 1 : 0;
  {
    std::unique_ptr<Database> db = MustOpen(kSrc, o);
    REQUIRE(db->Begin().ok());
    EpisodeRecord e;
    e.user_id = "alice";
    e.text = "my locker code is 4417";
    uint64_t id = 0;
    REQUIRE(db->Remember(e, &id).ok());
    format::FactRecord f;
    f.user_id = "alice";
    f.subject = "alice";
    f.predicate = "locker_code";
    f.object = "4417";
    f.confidence = 1;
    f.source_episode_ids = {};
    uint64_t fact = 0;
    REQUIRE(db->AssertFact(f, &fact).ok());
    REQUIRE(fact == 1);
    for (const char* name : {"secret", "profile"}) {
      format::BlockRecord b;
      b.user_id = "alice";
      b.name = name;
      b.value = std::string(name) + " value";
      b.pinned_order = -1;
      REQUIRE(db->SetBlock(b).ok());
    }
    REQUIRE(db->Commit().ok());
    REQUIRE(db->Begin().ok());
    format::ForgetRecord ff;
    ff.kind = format::ForgetKind::kFact;
    ff.id = 1;
    REQUIRE(db->Forget(ff, nullptr).ok());
    format::ForgetRecord fb;
    fb.kind = format::ForgetKind::kBlock;
    fb.user_id = "alice";
    fb.name = "secret";
    REQUIRE(db->Forget(fb, nullptr).ok());
    REQUIRE(db->Commit().ok());
    REQUIRE(db->Close().ok());
  }
  {
    std::unique_ptr<Database> db = MustOpen(kSrc, o);
    EpisodeRecord e;
    e.user_id = "alice";
    e.text = "a later turn";
    uint64_t id = 0;
    REQUIRE(db->Remember(e, &id).ok());
    REQUIRE(db->Close().ok());
  }
  const std::string bytes = ReadAll(env, kSrc);
  format::FileHeader fh;
  REQUIRE(format::DecodeFileHeader(bytes, &fh).ok());
  uint64_t forget_page = 0;
  for (uint64_t pos = format::kFirstPageOffset; pos < bytes.size();) {
    format::PageHeader h;
    REQUIRE(format::PeekPageHeader(std::string_view(bytes).substr(pos, 32), pos, fh.salt, &h).ok());
    if (h.type == static_cast<uint8_t>(PageType::kForget)) forget_page = pos;
    pos += format::PaddedPageSize(h.length);
  }
  REQUIRE(forget_page != 0);
  return forget_page;
}

}  // namespace

TEST_CASE("a forgotten fact and block whose forget page is damaged stay forgotten when a checkpoint after it says so") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  const uint64_t forget_page = BuildForgottenFactAndBlock(env.get(), &clock, true);
  Flip(env.get(), kSrc, forget_page + 40);
  RecoverReport r;
  Status s = engine::Recover(kSrc, kDst, Opts(env.get(), &clock), &r);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(r.dropped.size() == 1);
  CHECK(r.forgets_from_checkpoint == 2);  // the fact and the block
  CHECK(r.forgets_unknown.empty());       // the checkpoint said what was forgotten
  std::unique_ptr<Database> db = MustOpen(kDst, Opts(env.get(), &clock));
  std::vector<format::FactRecord> facts;
  REQUIRE(db->ListFacts("alice", nullptr, nullptr, &facts).ok());
  CHECK(facts.empty());
  std::vector<format::BlockRecord> blocks;
  REQUIRE(db->ListBlocks("alice", &blocks).ok());
  REQUIRE(blocks.size() == 1);
  CHECK(blocks[0].name == "profile");
  CHECK(Episodes(db.get()).size() == 2);
  REQUIRE(db->Close().ok());
  CHECK(engine::RecoverReportJson(r).find("\"forgets_from_checkpoint\":2") != std::string::npos);
}

TEST_CASE("without a checkpoint after a damaged forget page, the report names what may have been forgotten") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  const uint64_t forget_page = BuildForgottenFactAndBlock(env.get(), &clock, false);
  Flip(env.get(), kSrc, forget_page + 40);
  RecoverReport r;
  Status s = engine::Recover(kSrc, kDst, Opts(env.get(), &clock), &r);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(r.checkpoint_offset == 0);
  REQUIRE(r.dropped.size() == 1);
  REQUIRE(r.forgets_unknown.size() == 1);
  const auto& f = r.forgets_unknown[0];
  CHECK(f.commit_seq == r.dropped[0].commit_seq);
  CHECK(f.episodes_below == 2);        // episode 1
  CHECK(f.facts_below == 2);           // fact 1
  CHECK(f.block_versions_below == 3);  // both blocks' first versions
  const std::string json = engine::RecoverReportJson(r);
  CHECK(json.find("\"forgets_unknown\":[{\"commit_seq\":" + std::to_string(f.commit_seq) +
                  ",\"episodes_below\":2,\"facts_below\":2,\"block_versions_below\":3}]") !=
        std::string::npos);
}

}  // namespace agentmem::test

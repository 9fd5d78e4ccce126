// tests/engine/reindex_test.cc -- REINDEX (engine/memory/reindex.cc): both indexes
// built again from the records and committed in a checkpoint.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "format/coding.h"
#include "format/file_header.h"
#include "format/page.h"
#include "format/records.h"
#include "tests/util/oracle.h"

namespace agentmem::test {
namespace {

using engine::Database;
using engine::Env;
using engine::Options;

constexpr const char* kPath = "/mem/reindex.agentmem";

Options Opts(Env* env, TestClock* clock) {
  Options o;
  o.env = env;
  o.salt = 0x7e1d3e0000abcdefULL;
  o.clock = clock->Fn();
  o.busy_timeout_ms = 200;
  return o;
}

std::unique_ptr<Database> MustOpen(const Options& o) {
  std::unique_ptr<Database> db;
  Status s = Database::Open(kPath, o, &db);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return db;
}

Status RecallFirst(Database* db, const std::string& text, engine::RecallMode mode, uint64_t* id) {
  engine::RecallQuery q;
  q.user_id = "alice";
  q.text = text;
  q.k = 1;
  q.mode = mode;
  std::vector<engine::RecallHit> hits;
  AGENTMEM_RETURN_IF_ERROR(db->Recall(q, &hits, nullptr));
  *id = hits.empty() ? 0 : hits[0].id;
  return Status::OK();
}

// Appends a committed transaction whose one text record names an episode
// the file does not hold: every handle that reads it marks its recall index
// broken (docs/format.md §5.7), while the records stay readable.
void AppendBadText(Env* env) {
  std::unique_ptr<engine::File> f;
  REQUIRE(env->Open(kPath, engine::OpenMode{false}, &f).ok());
  uint64_t size = 0;
  REQUIRE(f->Size(&size).ok());
  std::string bytes;
  REQUIRE(f->ReadAt(0, size, &bytes).ok());
  format::FileHeader fh;
  REQUIRE(format::DecodeFileHeader(bytes, &fh).ok());
  format::CommitRecord last;
  for (uint64_t pos = format::kFirstPageOffset; pos < size;) {
    format::PageHeader h;
    REQUIRE(format::PeekPageHeader(std::string_view(bytes).substr(pos, 32), pos, fh.salt, &h).ok());
    const uint64_t padded = format::PaddedPageSize(h.length);
    if (h.type == static_cast<uint8_t>(format::PageType::kCommit)) {
      std::string payload;
      REQUIRE(format::DecodePage(std::string_view(bytes).substr(pos, padded), pos, fh.salt, &h, &payload).ok());
      REQUIRE(format::DecodeCommit(payload, 0, &last).ok());
    }
    pos += padded;
  }
  format::TextRecord t;
  t.episode_id = 999;
  t.doc_len = 1;
  t.terms = {{"ghost", 1}};
  std::string rec, payload;
  format::EncodeText(t, &rec);
  format::AppendRecord(rec, &payload);
  std::string txn = format::EncodePage(format::PageType::kText, size, fh.salt, 1, payload, false);
  format::CommitRecord c = last;
  c.commit_seq = last.commit_seq + 1;
  c.txn_start = size;
  c.durable_through = size;
  c.page_count = 1;
  txn += format::EncodePage(format::PageType::kCommit, size + txn.size(), fh.salt, 1,
                            format::EncodeCommit(c), false);
  REQUIRE(f->WriteAt(size, txn).ok());
}

TEST_CASE("REINDEX rebuilds a broken recall index from the records and commits it") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  {
    std::unique_ptr<Database> db = MustOpen(Opts(env.get(), &clock));
    for (int i = 1; i <= 5; i++) {
      format::EpisodeRecord e;
      e.user_id = "alice";
      e.role = "user";
      e.text = "note number " + std::to_string(i) + " mentions topic" + std::to_string(i);
      uint64_t id = 0;
      REQUIRE(db->Remember(e, &id).ok());
    }
    format::ForgetRecord f;
    f.kind = format::ForgetKind::kEpisode;
    f.id = 2;
    REQUIRE(db->Forget(f, nullptr).ok());
    REQUIRE(db->Close().ok());
  }
  AppendBadText(env.get());
  std::unique_ptr<Database> db = MustOpen(Opts(env.get(), &clock));
  uint64_t id = 0;
  CHECK(RecallFirst(db.get(), "topic3", engine::RecallMode::kBm25, &id).code() == kIoErrSticky);
  format::EpisodeRecord e;
  REQUIRE(db->GetEpisode(3, &e).ok());  // records stay readable

  engine::ReindexReceipt r;
  Status s = db->Reindex(&r);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(r.episodes == 4);  // episode 2 is forgotten
  CHECK(r.vectors == 4);
  CHECK(r.checkpoint_offset > 0);
  for (auto mode : {engine::RecallMode::kBm25, engine::RecallMode::kVector}) {
    REQUIRE(RecallFirst(db.get(), "note number 3 mentions topic3", mode, &id).ok());
    CHECK(id == 3);
  }
  REQUIRE(RecallFirst(db.get(), "topic2", engine::RecallMode::kBm25, &id).ok());
  CHECK(id != 2);
  // A commit after it, then a new handle: the checkpoint's indexes are used.
  format::EpisodeRecord more;
  more.user_id = "alice";
  more.role = "user";
  more.text = "a sixth note about gardening";
  REQUIRE(db->Remember(more, &id).ok());
  CHECK(id == 6);
  REQUIRE(db->Close().ok());
  db = MustOpen(Opts(env.get(), &clock));
  REQUIRE(RecallFirst(db.get(), "gardening", engine::RecallMode::kBm25, &id).ok());
  CHECK(id == 6);
  REQUIRE(RecallFirst(db.get(), "note number 4 mentions topic4", engine::RecallMode::kVector, &id).ok());
  CHECK(id == 4);
  std::vector<std::string> problems;
  REQUIRE(db->Check(&problems).ok());
  CHECK(problems.empty());
  REQUIRE(db->Close().ok());
}

TEST_CASE("REINDEX inside a transaction is refused and changes nothing") {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(Opts(env.get(), &clock));
  REQUIRE(db->Begin().ok());
  CHECK(db->Reindex(nullptr).code() == kMisuse);
  REQUIRE(db->Rollback().ok());
  engine::Stats before, after;
  REQUIRE(db->GetStats(&before).ok());
  REQUIRE(db->Reindex(nullptr).ok());  // an empty file: an empty checkpoint
  REQUIRE(db->GetStats(&after).ok());
  CHECK(after.commits == before.commits + 1);
}

}  // namespace
}  // namespace agentmem::test

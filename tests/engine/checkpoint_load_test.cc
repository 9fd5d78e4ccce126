// tests/engine/checkpoint_load_test.cc -- loading a checkpoint on open
// (engine/memory/checkpoint.cc, LoadCheckpoint and ImportCheckpointState) when its
// pages are well formed -- every checksum valid -- but what they say does not
// hold together: the checkpoint transaction is rebuilt from a real one with
// one thing changed, and the open must fail with AGENTMEM_CORRUPT_* naming
// the page at fault (docs/format.md §5.8).
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "format/checkpoint.h"
#include "format/coding.h"
#include "format/file_header.h"
#include "format/records.h"
#include "format/page.h"
#include "index/vector/hnsw.h"
#include "tests/util/bm25_old_images.h"
#include "tests/util/fault_env.h"
#include "tests/util/open_helpers.h"
#include "tests/util/temp_dir.h"

namespace agentmem::test {
namespace {

using engine::Database;
using format::CheckpointSection;
using format::CommitRecord;
using format::PageType;

constexpr uint64_t kSalt = 0xc4ec6b0147ULL;
constexpr const char* kPath = "/mem/checkpoint.agentmem";
constexpr uint32_t kDim = 8;

engine::Options CheckpointOptions(engine::Env* env, TestClock* clock, bool read_only) {
  engine::Options o = TestOptionsFor(env, clock, engine::SyncMode::kFull, kSalt, kDim);
  o.read_only = read_only;
  o.checkpoint_bytes = 1;  // every writable close folds the log into a checkpoint
  return o;
}

std::string ReadAll(engine::Env* env) {
  std::unique_ptr<engine::File> f;
  REQUIRE(env->Open(kPath, engine::OpenMode{true}, &f).ok());
  uint64_t size = 0;
  REQUIRE(f->Size(&size).ok());
  std::string bytes;
  REQUIRE(f->ReadAt(0, size, &bytes).ok());
  return bytes;
}

// A real checkpoint, taken apart: the file up to it, its sections in order
// and its commit, and the superblock that points at it.
struct Checkpointed {
  std::string bytes;
  format::Superblock sb;
  int slot = 0;
  std::vector<std::string> sections;  // checkpoint page payloads: state, bm25, graph
  CommitRecord commit;
  format::CheckpointState state;

  std::string Section(CheckpointSection kind) const {
    for (const std::string& s : sections) {
      if (format::DecodeFixed32(s.data()) == static_cast<uint32_t>(kind)) return s;
    }
    FAIL("no such section");
    return {};
  }
};

// Five episodes with vectors for two users (episode 4 then forgotten), two
// block versions and a fact; a writable close writes the checkpoint.
Checkpointed MakeCheckpointed() {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  TestClock clock;
  {
    std::unique_ptr<Database> db = MustOpen(kPath, CheckpointOptions(env.get(), &clock, false));
    const char* texts[] = {"the cat sat on the mat", "rain in the mountains", "coffee and a book",
                           "a long walk by the river", "the cat came back"};
    for (int i = 0; i < 5; i++) {
      format::EpisodeRecord e;
      e.user_id = i % 2 ? "bob" : "ann";
      e.session_id = "s1";
      e.role = "user";
      e.text = texts[i];
      for (uint32_t d = 0; d < kDim; d++) e.vector.push_back(static_cast<float>((i + 1) * (d + 2) % 7) - 3);
      uint64_t id = 0;
      REQUIRE(db->Remember(e, &id).ok());
      clock.Tick();
    }
    for (const char* v : {"first", "second"}) {
      format::BlockRecord b;
      b.user_id = "ann";
      b.name = "notes";
      b.value = v;
      REQUIRE(db->SetBlock(b).ok());
    }
    format::FactRecord f;
    f.user_id = "ann";
    f.subject = "ann";
    f.predicate = "likes";
    f.object = "tea";
    f.source_episode_ids = {1};
    uint64_t fact = 0;
    REQUIRE(db->AssertFact(f, &fact).ok());
    format::ForgetRecord forget;
    forget.kind = format::ForgetKind::kEpisode;
    forget.id = 4;
    engine::ForgetReceipt receipt;
    REQUIRE(db->Forget(forget, &receipt).ok());
    REQUIRE(db->Close().ok());
  }
  Checkpointed c;
  c.bytes = ReadAll(env.get());
  for (int slot = 0; slot < 2; slot++) {
    format::Superblock sb;
    if (format::DecodeSuperblock(std::string_view(c.bytes).substr(format::kSuperblockOffset[slot], 64),
                                 kSalt, &sb)
            .ok() &&
        (slot == 0 || sb.generation > c.sb.generation)) {
      c.sb = sb;
      c.slot = slot;
    }
  }
  REQUIRE(c.sb.checkpoint != 0);
  REQUIRE(c.sb.scan_from == c.bytes.size());  // the checkpoint ends the file
  for (uint64_t pos = c.sb.checkpoint; pos < c.sb.scan_from;) {
    format::PageHeader h;
    REQUIRE(format::PeekPageHeader(std::string_view(c.bytes).substr(pos), pos, kSalt, &h).ok());
    std::string payload;
    REQUIRE(format::DecodePage(std::string_view(c.bytes).substr(pos), pos, kSalt, &h, &payload).ok());
    if (h.type == static_cast<uint8_t>(PageType::kCommit)) {
      REQUIRE(format::DecodeCommit(payload, 0, &c.commit).ok());
    } else {
      c.sections.push_back(payload);
    }
    pos += format::PaddedPageSize(h.length);
  }
  REQUIRE(c.sections.size() == 3);
  const std::string state = c.Section(CheckpointSection::kState);
  REQUIRE(format::DecodeCheckpointState(std::string_view(state).substr(format::kSectionHeaderSize), 0,
                                        &c.state)
              .ok());
  REQUIRE(c.state.episodes.size() == 5);
  REQUIRE(c.state.episodes[3].forgotten);
  return c;
}

const Checkpointed& Original() {
  static const Checkpointed c = MakeCheckpointed();
  return c;
}

struct Page {
  PageType type;
  std::string payload;
  bool compress = false;
};

std::vector<Page> Sections(const Checkpointed& c) {
  std::vector<Page> pages;
  for (const std::string& s : c.sections) pages.push_back({PageType::kCheckpoint, s});
  return pages;
}

std::string StatePayload(const format::CheckpointState& s) {
  std::string p;
  format::EncodeCheckpointState(s, &p);
  return p;
}

// Rewrites the superblock of `c` so that the checkpoint it points at ends
// where *bytes end (then applies `change`).
void PointSuperblockAtEnd(const Checkpointed& c, std::string* bytes,
                          const std::function<void(format::Superblock*)>& change = {}) {
  format::Superblock sb = c.sb;
  sb.scan_from = bytes->size();
  sb.durable_through = bytes->size();
  if (change) change(&sb);
  bytes->replace(format::kSuperblockOffset[c.slot], format::kSuperblockSize,
                 format::EncodeSuperblock(sb));
}

// The file with its checkpoint transaction replaced by `pages` and a commit
// for them, and the superblock pointing at it. Returns the file; *commit_at
// (when given) is where the commit page went.
std::string Rebuild(const Checkpointed& c, const std::vector<Page>& pages,
                    const std::function<void(CommitRecord*)>& change_commit = {},
                    const std::function<void(format::Superblock*)>& change_sb = {},
                    uint64_t* commit_at = nullptr) {
  std::string b = c.bytes.substr(0, c.sb.checkpoint);
  for (const Page& p : pages) {
    b += format::EncodePage(p.type, b.size(), kSalt, 1, p.payload, p.compress);
  }
  CommitRecord cr = c.commit;
  cr.page_count = static_cast<uint32_t>(pages.size());
  if (change_commit) change_commit(&cr);
  if (commit_at) *commit_at = b.size();
  b += format::EncodePage(PageType::kCommit, b.size(), kSalt, 1, format::EncodeCommit(cr), false);
  PointSuperblockAtEnd(c, &b, change_sb);
  return b;
}

// The clock and the Env outlive the handle that reads them (members are
// destroyed in reverse order).
struct Opened {
  Status status;
  std::unique_ptr<test::TempDir> dir;  // where a file on disk lies
  std::unique_ptr<TestClock> clock = std::make_unique<TestClock>();
  std::unique_ptr<engine::Env> env;
  std::unique_ptr<Database> db;
};

Opened OpenBytes(const std::string& bytes) {
  Opened o;
  o.env = engine::NewMemEnv();
  REQUIRE(o.env->CreateAtomic(kPath, bytes).ok());
  o.status = Database::Open(kPath, CheckpointOptions(o.env.get(), o.clock.get(), true), &o.db);
  return o;
}

// The same from a file on disk, which the open maps (File::MapShared): the
// graph's vectors are used where the file's pages hold them.
Opened OpenBytesOnDisk(const std::string& bytes) {
  Opened o;
  o.dir = std::make_unique<test::TempDir>();
  const std::string path = o.dir->path() + "/checkpoint.agentmem";
  REQUIRE(engine::Env::Posix()->CreateAtomic(path, bytes).ok());
  o.status = Database::Open(path, CheckpointOptions(engine::Env::Posix(), o.clock.get(), true), &o.db);
  return o;
}

Opened OpenBytes(const std::string& bytes, bool on_disk) {
  return on_disk ? OpenBytesOnDisk(bytes) : OpenBytes(bytes);
}

// A File that passes every call to another, and an in-memory Env whose
// files are wrapped by Wrap(): the Envs below change one call each.
class ForwardingFile : public engine::File {
 public:
  explicit ForwardingFile(std::unique_ptr<engine::File> f) : f_(std::move(f)) {}
  Status ReadPrivate(uint64_t offset, size_t n, size_t spare, const PieceFn& piece,
                     std::shared_ptr<engine::MappedBytes>* out) override {
    return f_->ReadPrivate(offset, n, spare, piece, out);
  }
  Status ReadAt(uint64_t offset, size_t n, std::string* out) override { return f_->ReadAt(offset, n, out); }
  Status WriteAt(uint64_t offset, std::string_view data) override { return f_->WriteAt(offset, data); }
  Status Sync() override { return f_->Sync(); }
  Status Truncate(uint64_t size) override { return f_->Truncate(size); }
  Status Size(uint64_t* size) override { return f_->Size(size); }
  Status TryLockWrite(bool* acquired) override { return f_->TryLockWrite(acquired); }
  Status UnlockWrite() override { return f_->UnlockWrite(); }

 protected:
  std::unique_ptr<engine::File> f_;
};

class WrappingEnv : public engine::Env {
 public:
  Status Open(const std::string& path, engine::OpenMode mode, std::unique_ptr<engine::File>* out) override {
    std::unique_ptr<engine::File> f;
    AGENTMEM_RETURN_IF_ERROR(base_->Open(path, mode, &f));
    *out = Wrap(std::move(f));
    return Status::OK();
  }
  Status CreateAtomic(const std::string& path, std::string_view initial) override {
    return base_->CreateAtomic(path, initial);
  }
  bool Exists(const std::string& path) override { return base_->Exists(path); }
  Status Delete(const std::string& path) override { return base_->Delete(path); }

 protected:
  virtual std::unique_ptr<engine::File> Wrap(std::unique_ptr<engine::File> f) = 0;

 private:
  std::unique_ptr<engine::Env> base_ = engine::NewMemEnv();
};

// An Env whose files show ReadPrivate's bytes to the caller in pieces of
// `piece` bytes (File::ReadPrivate promises at most 1 MiB, not exactly).
class PieceFile : public ForwardingFile {
 public:
  PieceFile(std::unique_ptr<engine::File> f, size_t piece) : ForwardingFile(std::move(f)), piece_(piece) {}
  Status ReadPrivate(uint64_t offset, size_t n, size_t spare, const PieceFn& piece,
                     std::shared_ptr<engine::MappedBytes>* out) override {
    std::shared_ptr<engine::MappedBytes> bytes;
    AGENTMEM_RETURN_IF_ERROR(f_->ReadPrivate(offset, n, spare, nullptr, &bytes));
    for (size_t at = 0; piece && at < n; at += piece_) {
      AGENTMEM_RETURN_IF_ERROR(piece(at, std::string_view(bytes->data() + at, std::min(piece_, n - at))));
    }
    *out = std::move(bytes);
    return Status::OK();
  }

 private:
  size_t piece_;
};

class PieceEnv : public WrappingEnv {
 public:
  explicit PieceEnv(size_t piece) : piece_(piece) {}

 private:
  std::unique_ptr<engine::File> Wrap(std::unique_ptr<engine::File> f) override {
    return std::make_unique<PieceFile>(std::move(f), piece_);
  }
  size_t piece_;
};

Opened OpenBytesInPieces(const std::string& bytes, size_t piece) {
  Opened o;
  o.env = std::make_unique<PieceEnv>(piece);
  REQUIRE(o.env->CreateAtomic(kPath, bytes).ok());
  o.status = Database::Open(kPath, CheckpointOptions(o.env.get(), o.clock.get(), true), &o.db);
  return o;
}

int64_t PageNo(uint64_t offset) { return static_cast<int64_t>(offset / 16); }

void CheckRefused(const std::string& bytes, int code, uint64_t page_offset, const char* why) {
  Opened o = OpenBytes(bytes);
  CAPTURE(o.status.ToString());
  CHECK(o.status.code() == code);
  CHECK(o.status.page_no() == PageNo(page_offset));
  CHECK(o.status.message().find("page " + std::to_string(PageNo(page_offset))) != std::string::npos);
  CHECK(o.status.message().find(why) != std::string::npos);
  CHECK(o.db == nullptr);
}

// Offset of the i-th page of the rebuilt checkpoint.
uint64_t PageAt(const std::string& bytes, uint64_t first, int i) {
  uint64_t pos = first;
  for (; i > 0; i--) pos += format::PaddedPageSize(format::DecodeFixed32(bytes.data() + pos + 12));
  return pos;
}

// The file with the payload of the checkpoint's `kind` section changed by
// `change`; *at: where that section's page went.
std::string WithSection(const Checkpointed& c, CheckpointSection kind,
                        const std::function<void(std::string*)>& change, uint64_t* at) {
  std::vector<Page> pages = Sections(c);
  int index = -1;
  for (int i = 0; i < static_cast<int>(pages.size()); i++) {
    if (format::DecodeFixed32(pages[i].payload.data()) == static_cast<uint32_t>(kind)) {
      change(&pages[i].payload);
      index = i;
    }
  }
  REQUIRE(index >= 0);
  std::string bytes = Rebuild(c, pages);
  *at = PageAt(bytes, c.sb.checkpoint, index);
  return bytes;
}

std::vector<std::string> Recall(Database* db, const std::string& user, const std::string& text,
                                engine::RecallMode mode) {
  engine::RecallQuery q;
  q.user_id = user;
  q.text = text;
  q.mode = mode;
  q.k = 5;
  if (mode == engine::RecallMode::kVector) {
    for (uint32_t d = 0; d < kDim; d++) q.vector.push_back(static_cast<float>(1 * (d + 2) % 7) - 3);
  }
  std::vector<engine::RecallHit> hits;
  engine::RecallPlan plan;
  Status s = db->Recall(q, &hits, &plan);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  std::vector<std::string> out;
  for (const auto& h : hits) out.push_back(std::to_string(h.id));
  return out;
}

}  // namespace

TEST_SUITE_BEGIN("checkpoint load");

TEST_CASE("a checkpoint rebuilt from its own sections opens with the same contents") {
  const Checkpointed& c = Original();
  Opened a = OpenBytes(c.bytes);
  REQUIRE_MESSAGE(a.status.ok(), a.status.ToString());
  Opened b = OpenBytes(Rebuild(c, Sections(c)));
  REQUIRE_MESSAGE(b.status.ok(), b.status.ToString());
  engine::Stats sa, sb;
  REQUIRE(a.db->GetStats(&sa).ok());
  REQUIRE(b.db->GetStats(&sb).ok());
  CHECK(sa.episodes == 4);
  CHECK(sb.episodes == sa.episodes);
  CHECK(sb.block_versions == sa.block_versions);
  CHECK(sb.facts == sa.facts);
  for (auto mode : {engine::RecallMode::kBm25, engine::RecallMode::kVector}) {
    CHECK(Recall(b.db.get(), "ann", "cat", mode) == Recall(a.db.get(), "ann", "cat", mode));
    CHECK(Recall(b.db.get(), "bob", "walk", mode) == Recall(a.db.get(), "bob", "walk", mode));
  }
  // The two episodes of ann's that say "cat" rank first.
  std::vector<std::string> cat = Recall(b.db.get(), "ann", "cat", engine::RecallMode::kBm25);
  REQUIRE(cat.size() >= 2);
  cat.resize(2);
  std::sort(cat.begin(), cat.end());
  CHECK(cat == std::vector<std::string>{"1", "5"});
  format::EpisodeRecord e;
  CHECK(b.db->GetEpisode(4, &e).code() == kNotFound);
}

TEST_CASE("a checkpoint whose bm25 images are version 1 opens and recalls like version 3") {
  const Checkpointed& c = Original();
  Opened a = OpenBytes(c.bytes);
  REQUIRE_MESSAGE(a.status.ok(), a.status.ToString());
  uint64_t at = 0;
  size_t images = 0;
  const std::string bytes = WithSection(c, CheckpointSection::kBm25, [&](std::string* s) {
    const std::string_view body = std::string_view(*s).substr(format::kSectionHeaderSize);
    std::vector<format::Bm25Partition> parts;
    REQUIRE(format::DecodeBm25Directory(body, -1, UINT32_MAX, &parts).ok());
    std::string out = s->substr(0, format::kSectionHeaderSize);
    const size_t start = out.size();
    format::PutFixed64(&out, parts.size());
    const size_t directory = out.size();
    out.append(parts.size() * 24, '\0');
    for (size_t i = 0; i < parts.size(); i++) {
      const std::string_view v3 = body.substr(parts[i].offset, parts[i].size);
      REQUIRE(format::DecodeFixed32(v3.data() + 4) == 3);  // what writers write
      const std::string v1 = test::Bm25ImageV1(v3);
      char* e = out.data() + directory + i * 24;
      format::EncodeFixed32(e, parts[i].user);
      format::EncodeFixed32(e + 4, 0);
      format::EncodeFixed64(e + 8, out.size() - start);
      format::EncodeFixed64(e + 16, v1.size());
      out += v1;
    }
    images = parts.size();
    *s = out;
  }, &at);
  CHECK(images == 2);
  Opened b = OpenBytes(bytes);
  REQUIRE_MESSAGE(b.status.ok(), b.status.ToString());
  for (const auto& [user, text] : {std::pair{"ann", "cat"}, {"bob", "walk"}, {"ann", "the"}}) {
    CHECK(Recall(b.db.get(), user, text, engine::RecallMode::kBm25) ==
          Recall(a.db.get(), user, text, engine::RecallMode::kBm25));
  }
}

TEST_CASE("a file that ends inside its checkpoint fails the open naming the checkpoint") {
  const Checkpointed& c = Original();
  CheckRefused(c.bytes.substr(0, c.sb.scan_from - 16), kCorruptPage, c.sb.checkpoint,
               "the file ends inside the checkpoint");
}

TEST_CASE("a checkpoint page with an invalid header fails the open naming it") {
  const Checkpointed& c = Original();
  std::string bytes = Rebuild(c, Sections(c));
  const uint64_t second = PageAt(bytes, c.sb.checkpoint, 1);
  bytes[second + 6] = 1;  // the reserved half-word
  CheckRefused(bytes, kCorruptPage, second, "invalid header");
}

TEST_CASE("of damaged pages read on both threads, the first in file order is the one reported") {
  // The state section is read on the opening thread, the bm25 and graph
  // sections on another: whichever finishes first, the report names the
  // page a reading from first to last would meet first, with the sections
  // in the order a checkpoint writes them and reversed.
  const Checkpointed& c = Original();
  for (bool reversed : {false, true}) {
    CAPTURE(reversed);
    std::vector<Page> pages = Sections(c);
    if (reversed) std::reverse(pages.begin(), pages.end());
    const std::string good = Rebuild(c, pages);
    auto damage = [&](std::string* bytes, int i) {
      (*bytes)[PageAt(good, c.sb.checkpoint, i) + format::kPageHeaderSize + format::kSectionHeaderSize + 1] ^= 0x40;
    };
    for (int first = 0; first < 3; first++) {
      for (int second = first + 1; second < 3; second++) {
        CAPTURE(first);
        CAPTURE(second);
        std::string bytes = good;
        damage(&bytes, first);
        damage(&bytes, second);
        CheckRefused(bytes, kCorruptChecksum, PageAt(good, c.sb.checkpoint, first), "checksum mismatch");
      }
      // A damaged page before a page head that stops the walk: the page.
      if (first < 2) {
        std::string bytes = good;
        damage(&bytes, first);
        bytes[PageAt(good, c.sb.checkpoint, 2) + 6] = 1;  // the reserved half-word
        CheckRefused(bytes, kCorruptChecksum, PageAt(good, c.sb.checkpoint, first), "checksum mismatch");
      }
    }
    // Each page alone, and the walk's error alone.
    for (int i = 0; i < 3; i++) {
      CAPTURE(i);
      std::string bytes = good;
      damage(&bytes, i);
      CheckRefused(bytes, kCorruptChecksum, PageAt(good, c.sb.checkpoint, i), "checksum mismatch");
    }
    std::string bytes = good;
    bytes[PageAt(good, c.sb.checkpoint, 2) + 6] = 1;
    CheckRefused(bytes, kCorruptPage, PageAt(good, c.sb.checkpoint, 2), "invalid header");
    Opened o = OpenBytes(good);
    CHECK(o.status.ok());
  }
}

TEST_CASE("a checkpoint page that runs past the superblock's scan_from fails the open") {
  const Checkpointed& c = Original();
  // scan_from inside the commit page's payload, then inside its header.
  for (uint64_t short_by : {16, 80}) {
    CAPTURE(short_by);
    uint64_t commit_at = 0;
    const std::string bytes = Rebuild(
        c, Sections(c), {}, [&](format::Superblock* sb) { sb->scan_from -= short_by; }, &commit_at);
    CheckRefused(bytes, kCorruptPage, commit_at, "a page runs past the checkpoint's end");
  }
}

TEST_CASE("an I/O error while loading a checkpoint fails the open with that error, not as damage") {
  const Checkpointed& c = Original();
  int failed = 0;
  for (uint64_t n = 2; n < 12; n++) {
    CAPTURE(n);
    std::unique_ptr<engine::Env> mem = engine::NewMemEnv();
    REQUIRE(mem->CreateAtomic(kPath, c.bytes).ok());
    FaultEnv env(mem.get());
    env.FailAt(n, Fault::kEio, true, kOpRead);  // the first read is the header
    TestClock clock;
    std::unique_ptr<Database> db;
    Status s = Database::Open(kPath, CheckpointOptions(&env, &clock, true), &db);
    if (s.ok()) break;  // n is past the reads an open makes
    CHECK(s.code() == kIoErrRead);
    failed++;
  }
  CHECK(failed >= 3);  // the checkpoint's pages are read one by one
  // The file's size (checked against the superblock's scan_from) cannot be read.
  std::unique_ptr<engine::Env> mem = engine::NewMemEnv();
  REQUIRE(mem->CreateAtomic(kPath, c.bytes).ok());
  int size_failed = 0;
  for (uint64_t n = 1; n < 8; n++) {
    CAPTURE(n);
    FaultEnv env(mem.get());
    env.FailAt(n, Fault::kEio, false, kOpSize);
    TestClock clock;
    std::unique_ptr<Database> db;
    Status s = Database::Open(kPath, CheckpointOptions(&env, &clock, true), &db);
    if (s.ok()) break;
    CHECK(s.primary() == kIoErr);
    size_failed++;
  }
  CHECK(size_failed >= 1);
}

TEST_CASE("a checkpoint commit that does not match the superblock or its sections fails the open") {
  const Checkpointed& c = Original();
  struct Case {
    const char* name;
    std::function<void(CommitRecord*)> change;
  };
  const Case cases[] = {
      {"another sequence number", [](CommitRecord* r) { r->commit_seq++; }},
      {"another transaction start", [](CommitRecord* r) { r->txn_start += 16; }},
      {"another page count", [](CommitRecord* r) { r->page_count++; }},
      {"another next episode id", [](CommitRecord* r) { r->next_episode_id++; }},
      {"another next fact id", [](CommitRecord* r) { r->next_fact_id++; }},
      {"another next block version", [](CommitRecord* r) { r->next_block_version++; }},
  };
  for (const Case& k : cases) {
    CAPTURE(k.name);
    uint64_t commit_at = 0;
    const std::string bytes = Rebuild(c, Sections(c), k.change, {}, &commit_at);
    CheckRefused(bytes, kCorruptPage, commit_at, "its commit does not match");
  }
  SUBCASE("the superblock names another commit sequence number") {
    uint64_t commit_at = 0;
    const std::string bytes =
        Rebuild(c, Sections(c), {}, [](format::Superblock* sb) { sb->commit_seq++; }, &commit_at);
    CheckRefused(bytes, kCorruptPage, commit_at, "its commit does not match");
  }
  SUBCASE("no state section") {
    std::vector<Page> pages = {{PageType::kCheckpoint, c.Section(CheckpointSection::kBm25)},
                               {PageType::kCheckpoint, c.Section(CheckpointSection::kGraph)}};
    uint64_t commit_at = 0;
    const std::string bytes = Rebuild(c, pages, {}, {}, &commit_at);
    CheckRefused(bytes, kCorruptPage, commit_at, "its commit does not match");
  }
  SUBCASE("a page after the commit, before scan_from") {
    uint64_t commit_at = 0;
    std::string bytes = Rebuild(c, Sections(c), {}, {}, &commit_at);
    std::string graph;
    format::EncodeGraphSectionHeader(&graph);
    bytes += format::EncodePage(PageType::kCheckpoint, bytes.size(), kSalt, 1, graph, false);
    PointSuperblockAtEnd(c, &bytes);
    CheckRefused(bytes, kCorruptPage, commit_at, "its commit does not match");
  }
}

TEST_CASE("a checkpoint without its bm25 or graph section, or without its commit, fails the open") {
  const Checkpointed& c = Original();
  const std::string state = c.Section(CheckpointSection::kState);
  const std::string bm25 = c.Section(CheckpointSection::kBm25);
  const std::string graph = c.Section(CheckpointSection::kGraph);
  SUBCASE("no graph section (the state's episodes have vectors)") {
    CheckRefused(Rebuild(c, {{PageType::kCheckpoint, state}, {PageType::kCheckpoint, bm25}}),
                 kCorruptPage, c.sb.checkpoint, "a section is missing");
  }
  SUBCASE("no bm25 section (the state holds no texts)") {
    CheckRefused(Rebuild(c, {{PageType::kCheckpoint, state}, {PageType::kCheckpoint, graph}}),
                 kCorruptPage, c.sb.checkpoint, "a section is missing");
  }
  SUBCASE("scan_from stops before the checkpoint's commit") {
    uint64_t commit_at = 0;
    std::string bytes = Rebuild(c, Sections(c), {}, {}, &commit_at);
    PointSuperblockAtEnd(c, &bytes, [&](format::Superblock* sb) { sb->scan_from = commit_at; });
    CheckRefused(bytes, kCorruptPage, c.sb.checkpoint, "no commit ends the checkpoint");
  }
}

TEST_CASE("a checkpoint commit page that fails its checksum or does not decode fails the open") {
  const Checkpointed& c = Original();
  uint64_t commit_at = 0;
  std::string bytes = Rebuild(c, Sections(c), {}, {}, &commit_at);
  std::string flipped = bytes;
  flipped[commit_at + 40] ^= 0x08;
  CheckRefused(flipped, kCorruptChecksum, commit_at, "checksum mismatch");
  // A 65-byte commit record, checksummed.
  std::string longer = bytes.substr(0, commit_at);
  longer += format::EncodePage(PageType::kCommit, commit_at, kSalt, 1,
                               format::EncodeCommit(c.commit) + "x", false);
  PointSuperblockAtEnd(c, &longer);
  CheckRefused(longer, kCorruptPage, commit_at, "malformed commit record");
}

TEST_CASE("a page inside a checkpoint that is not an uncompressed checkpoint page fails the open") {
  const Checkpointed& c = Original();
  SUBCASE("an episodes page") {
    std::vector<Page> pages = Sections(c);
    pages.insert(pages.begin() + 1, Page{PageType::kEpisodes, "\x01x"});
    const std::string bytes = Rebuild(c, pages);
    CheckRefused(bytes, kCorruptPage, PageAt(bytes, c.sb.checkpoint, 1), "not a checkpoint page");
  }
  SUBCASE("a checkpoint page stored compressed") {
    std::vector<Page> pages = Sections(c);
    std::string graph;
    format::EncodeGraphSectionHeader(&graph);
    // Numbers: compressible, but not beyond the ratio a reader accepts.
    for (int i = 0; graph.size() < 4000; i++) graph += std::to_string(i * 7919 % 1000) + " ";
    pages.push_back({PageType::kCheckpoint, graph, /*compress=*/true});
    const std::string bytes = Rebuild(c, pages);
    const uint64_t last = PageAt(bytes, c.sb.checkpoint, 3);
    REQUIRE((static_cast<uint8_t>(bytes[last + 5]) & format::kPageFlagZstd) != 0);
    CheckRefused(bytes, kCorruptPage, last, "not a checkpoint page");
  }
}

TEST_CASE("a checkpoint page without a known section header fails the open naming it") {
  const Checkpointed& c = Original();
  std::vector<Page> pages = Sections(c);
  SUBCASE("an unknown section kind") {
    std::string p;
    format::PutFixed32(&p, 9);
    format::PutFixed32(&p, 0);
    pages.insert(pages.begin(), Page{PageType::kCheckpoint, p});
    CheckRefused(Rebuild(c, pages), kCorruptPage, c.sb.checkpoint, "unknown section");
  }
  SUBCASE("a payload shorter than a section header") {
    pages.insert(pages.begin(), Page{PageType::kCheckpoint, "abc"});
    CheckRefused(Rebuild(c, pages), kCorruptPage, c.sb.checkpoint, "no section header");
  }
}

TEST_CASE("a checkpoint state section with an index out of range fails the open naming its page") {
  const Checkpointed& c = Original();
  format::CheckpointState st = c.state;
  st.episodes[0].user = static_cast<uint32_t>(st.strings.size());
  std::vector<Page> pages = Sections(c);
  for (Page& p : pages) {
    if (format::DecodeFixed32(p.payload.data()) == 1) p.payload = StatePayload(st);
  }
  const std::string bytes = Rebuild(c, pages);
  uint64_t state_at = c.sb.checkpoint;
  for (int i = 0; format::DecodeFixed32(c.sections[i].data()) != 1; i++) {
    state_at = PageAt(bytes, c.sb.checkpoint, i + 1);
  }
  CheckRefused(bytes, kCorruptPage, state_at, "episode entry out of range");
}

TEST_CASE("a checkpoint section that appears twice fails the open naming the second") {
  const Checkpointed& c = Original();
  for (CheckpointSection kind : {CheckpointSection::kState, CheckpointSection::kBm25,
                                 CheckpointSection::kGraph}) {
    CAPTURE(static_cast<int>(kind));
    std::vector<Page> pages = Sections(c);
    pages.push_back({PageType::kCheckpoint, c.Section(kind)});
    const std::string bytes = Rebuild(c, pages);
    CheckRefused(bytes, kCorruptPage, PageAt(bytes, c.sb.checkpoint, 3), "a section repeats");
  }
}

namespace {

// A bm25 section body after its header: a directory of one image, for
// the state's first string, whose 16 bytes are not a frozen BM25 index.
std::string NotAFrozenImage() {
  std::string body;
  format::PutFixed64(&body, 1);
  format::PutFixed32(&body, 0);  // the first string: a user
  format::PutFixed32(&body, 0);
  format::PutFixed64(&body, 32);
  format::PutFixed64(&body, 16);
  body.append(16, '\x33');
  return body;
}

}  // namespace

TEST_CASE("a checkpoint bm25 section that does not hold together fails the open naming its page") {
  const Checkpointed& c = Original();
  auto with_bm25 = [&](const std::string& body, uint64_t* at) {
    std::vector<Page> pages;
    std::string payload;
    format::EncodeBm25SectionHeader(&payload);
    payload += body;
    for (const std::string& s : c.sections) {
      const bool bm25 = format::DecodeFixed32(s.data()) == static_cast<uint32_t>(CheckpointSection::kBm25);
      pages.push_back({PageType::kCheckpoint, bm25 ? payload : s});
    }
    std::string bytes = Rebuild(c, pages);
    for (int i = 0; i < 3; i++) {
      if (format::DecodeFixed32(c.sections[i].data()) == static_cast<uint32_t>(CheckpointSection::kBm25)) {
        *at = PageAt(bytes, c.sb.checkpoint, i);
      }
    }
    return bytes;
  };
  uint64_t at = 0;
  SUBCASE("its directory is cut short") {
    const std::string bytes = with_bm25("abc", &at);
    CheckRefused(bytes, kCorruptPage, at, "bm25 directory cut short");
  }
  SUBCASE("an image that is not a frozen BM25 index") {
    const std::string bytes = with_bm25(NotAFrozenImage(), &at);
    CheckRefused(bytes, kCorruptIndex, at, "(checkpoint bm25)");
  }
}

namespace {

// Makes the first posting's tf of `term` 0 in `user`'s image of a bm25
// section payload (version 3 images: docs/format.md, bm25 section).
void DamageTermInImage(const Checkpointed& c, std::string* payload, const std::string& user,
                       const std::string& term) {
  const size_t body = format::kSectionHeaderSize;
  auto u64 = [&](size_t at) { return format::DecodeFixed64(payload->data() + at); };
  const uint64_t images = u64(body);
  for (uint64_t i = 0; i < images; i++) {
    const size_t entry = body + 8 + 24 * i;
    if (c.state.strings[format::DecodeFixed32(payload->data() + entry)] != user) continue;
    const size_t at = body + u64(entry + 8);
    REQUIRE(format::DecodeFixed32(payload->data() + at + 4) == 3);
    const uint64_t docs = u64(at + 8), terms = u64(at + 24), postings = u64(at + 32);
    const uint64_t blocks = u64(at + 40), peaks = u64(at + 48);
    const size_t terms_at = at + 80 + docs * 8 + (docs * 4 + 7) / 8 * 8;
    const size_t postings_at = terms_at + terms * 32;
    const size_t text_at = postings_at + (postings * 4 + 7) / 8 * 8 + blocks * 16 + peaks * 8;
    for (uint64_t t = 0; t < terms; t++) {
      const size_t e = terms_at + 32 * t;
      const std::string text = payload->substr(text_at + format::DecodeFixed32(payload->data() + e),
                                               format::DecodeFixed32(payload->data() + e + 4));
      if (text != term) continue;
      const size_t posting = postings_at + 4 * u64(e + 8);
      (*payload)[posting] = 0;  // the low byte: tf
      return;
    }
  }
  FAIL("no such term in the user's image");
}

}  // namespace

TEST_CASE("a damaged term of a checkpoint bm25 image is found when a recall first reads it") {
  // The open checks each image's documents and term table; what lies in a
  // term's ranges is checked when a search first reads the term.
  const Checkpointed& c = Original();
  uint64_t at = 0;
  const std::string bytes = WithSection(c, CheckpointSection::kBm25, [&](std::string* payload) {
    DamageTermInImage(c, payload, "ann", "cat");
  }, &at);
  Opened o = OpenBytes(bytes);
  REQUIRE_MESSAGE(o.status.ok(), o.status.ToString());
  Opened whole = OpenBytes(c.bytes);
  REQUIRE(whole.status.ok());
  // Other terms and users recall as before.
  CHECK(Recall(o.db.get(), "ann", "coffee", engine::RecallMode::kBm25) ==
        Recall(whole.db.get(), "ann", "coffee", engine::RecallMode::kBm25));
  CHECK(Recall(o.db.get(), "bob", "rain cat", engine::RecallMode::kBm25) ==
        Recall(whole.db.get(), "bob", "rain cat", engine::RecallMode::kBm25));
  for (auto mode : {engine::RecallMode::kBm25, engine::RecallMode::kHybrid}) {
    engine::RecallQuery q;
    q.user_id = "ann";
    q.text = "the cat";
    q.mode = mode;
    q.k = 5;
    if (mode == engine::RecallMode::kHybrid) q.vector.assign(kDim, 1.0f);
    std::vector<engine::RecallHit> hits;
    engine::RecallPlan plan;
    Status s = o.db->Recall(q, &hits, &plan);
    CAPTURE(s.ToString());
    CHECK(s.code() == kCorruptIndex);
    CHECK(s.message().find("bm25 index of user \"ann\"") != std::string::npos);
    CHECK(s.message().find("tf is 0") != std::string::npos);
    q.all_users = true;
    CHECK(o.db->Recall(q, &hits, &plan).code() == kCorruptIndex);
  }
  std::vector<std::string> problems;
  REQUIRE(o.db->Check(&problems).ok());
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("bm25 index of user \"ann\"") != std::string::npos);
  // A fresh (writable) handle's integrity check finds it without a search.
  Opened fresh;
  fresh.env = engine::NewMemEnv();
  REQUIRE(fresh.env->CreateAtomic(kPath, bytes).ok());
  fresh.status = Database::Open(kPath, CheckpointOptions(fresh.env.get(), fresh.clock.get(), false), &fresh.db);
  REQUIRE_MESSAGE(fresh.status.ok(), fresh.status.ToString());
  problems.clear();
  REQUIRE(fresh.db->Check(&problems).ok());
  CHECK(problems.size() == 1);
  problems.clear();
  REQUIRE(whole.db->Check(&problems).ok());
  CHECK(problems.empty());
  // REINDEX builds the index again from the texts: the term is back.
  engine::ReindexReceipt receipt;
  Status reindexed = fresh.db->Reindex(&receipt);
  REQUIRE_MESSAGE(reindexed.ok(), reindexed.ToString());
  CHECK(Recall(fresh.db.get(), "ann", "the cat", engine::RecallMode::kBm25) ==
        Recall(whole.db.get(), "ann", "the cat", engine::RecallMode::kBm25));
  problems.clear();
  REQUIRE(fresh.db->Check(&problems).ok());
  CHECK(problems.empty());
}

TEST_CASE("a checkpoint graph section that does not map fails the open as index corruption") {
  uint64_t at = 0;
  const std::string bytes = WithSection(Original(), CheckpointSection::kGraph, [](std::string* s) {
    s->resize(format::kSectionHeaderSize);
    s->append(200, '\x42');
  }, &at);
  CheckRefused(bytes, kCorruptIndex, at, "(checkpoint graph)");
}

TEST_CASE("a checkpoint whose bm25 images and graph's nodes are both bad fails the open naming its bm25 page") {
  // The bm25 images are attached while the graph's vectors are read: the
  // bm25 error is the one reported, whether the graph's nodes fail before
  // their vectors are read or while they are.
  const Checkpointed& c = Original();
  const std::string bad_image = NotAFrozenImage();
  const std::vector<std::function<void(format::CheckpointState*)>> bad_nodes = {
      [](format::CheckpointState* st) { st->episodes[0].node = UINT32_MAX; },  // one node too many
      [](format::CheckpointState* st) { st->episodes[0].slot = 9; }};          // no vector for it
  for (size_t g = 0; g < bad_nodes.size(); g++) {
    CAPTURE(g);
    format::CheckpointState st = c.state;
    bad_nodes[g](&st);
    std::vector<Page> pages = Sections(c);
    int bm25_index = -1;
    for (int i = 0; i < static_cast<int>(pages.size()); i++) {
      const uint32_t kind = format::DecodeFixed32(pages[i].payload.data());
      if (kind == static_cast<uint32_t>(CheckpointSection::kBm25)) {
        pages[i].payload.clear();
        format::EncodeBm25SectionHeader(&pages[i].payload);
        pages[i].payload += bad_image;
        bm25_index = i;
      } else if (kind == static_cast<uint32_t>(CheckpointSection::kState)) {
        pages[i].payload = StatePayload(st);
      }
    }
    REQUIRE(bm25_index >= 0);
    const std::string bytes = Rebuild(c, pages);
    CheckRefused(bytes, kCorruptIndex, PageAt(bytes, c.sb.checkpoint, bm25_index), "(checkpoint bm25)");
    // With a good bm25 section, the graph's error.
    std::vector<Page> graph_only = Sections(c);
    for (Page& p : graph_only) {
      if (format::DecodeFixed32(p.payload.data()) == static_cast<uint32_t>(CheckpointSection::kState)) {
        p.payload = StatePayload(st);
      }
    }
    Opened o = OpenBytes(Rebuild(c, graph_only));
    CHECK(o.status.code() == kCorruptIndex);
    CHECK(o.status.message().find("(checkpoint graph)") != std::string::npos);
  }
}

TEST_CASE("an empty checkpoint graph section while episodes have vectors fails the open naming it") {
  // An empty image is what a file that has never held a vector writes.
  uint64_t at = 0;
  const std::string bytes = WithSection(Original(), CheckpointSection::kGraph,
                                        [](std::string* s) { s->resize(format::kSectionHeaderSize); }, &at);
  CheckRefused(bytes, kCorruptIndex, at, "empty, but episode 1 has a vector");
}

TEST_CASE("a checkpoint read in pieces of any size opens the same, and a damaged graph record is refused") {
  const Checkpointed& c = Original();
  Opened whole = OpenBytes(c.bytes);
  REQUIRE_MESSAGE(whole.status.ok(), whole.status.ToString());
  // The graph's first level-0 record claims more links than a node may have.
  uint64_t graph_at = 0;
  const std::string damaged = WithSection(c, CheckpointSection::kGraph, [](std::string* s) {
    const uint64_t level0 = format::DecodeFixed64(s->data() + format::kSectionHeaderSize + 48);
    REQUIRE(format::kSectionHeaderSize + level0 + 2 <= s->size());
    (*s)[format::kSectionHeaderSize + level0] = '\xff';
    (*s)[format::kSectionHeaderSize + level0 + 1] = '\xff';
  }, &graph_at);
  // Pieces smaller than the page, section and image headers (the graph is
  // then checked whole when mapped), pieces that hold them, and 1 MiB.
  for (size_t piece : {16, 48, 100, 128, 256, 1 << 20}) {
    CAPTURE(piece);
    Opened o = OpenBytesInPieces(c.bytes, piece);
    REQUIRE_MESSAGE(o.status.ok(), o.status.ToString());
    for (auto mode : {engine::RecallMode::kBm25, engine::RecallMode::kVector}) {
      CHECK(Recall(o.db.get(), "ann", "cat", mode) == Recall(whole.db.get(), "ann", "cat", mode));
      CHECK(Recall(o.db.get(), "bob", "walk", mode) == Recall(whole.db.get(), "bob", "walk", mode));
    }
    Opened bad = OpenBytesInPieces(damaged, piece);
    CAPTURE(bad.status.ToString());
    CHECK(bad.status.code() == kCorruptIndex);
    CHECK(bad.status.page_no() == PageNo(graph_at));
    CHECK(bad.status.message().find("(checkpoint graph)") != std::string::npos);
    CHECK(bad.status.message().find("too many links") != std::string::npos);
  }
}

TEST_CASE("a checkpoint state section that names a tokenizer unknown to this version fails the open") {
  const Checkpointed& c = Original();
  format::CheckpointState st = c.state;
  bool found = false;
  for (auto& [k, v] : st.meta) {
    if (k == "text.tokenizer") {
      v = "klingon-3";
      found = true;
    }
  }
  REQUIRE(found);
  uint64_t at = 0;
  Opened o = OpenBytes(WithSection(c, CheckpointSection::kState, [&](std::string* s) { *s = StatePayload(st); }, &at));
  CAPTURE(o.status.ToString());
  CHECK(o.status.code() == kFormatVersion);
  CHECK(o.status.message().find("klingon-3") != std::string::npos);
  CHECK(o.db == nullptr);
}

TEST_CASE("a checkpoint section header whose reserved word is not zero fails the open naming its page") {
  const Checkpointed& c = Original();
  for (CheckpointSection kind : {CheckpointSection::kState, CheckpointSection::kBm25,
                                 CheckpointSection::kGraph}) {
    CAPTURE(static_cast<int>(kind));
    uint64_t at = 0;
    const std::string bytes = WithSection(c, kind, [](std::string* s) { (*s)[4] = 1; }, &at);
    CheckRefused(bytes, kCorruptPage, at, "unknown section");
  }
}

TEST_CASE("an empty checkpoint page just before scan_from fails the open naming it") {
  // Its header is all there is: shorter than a page and section header.
  const Checkpointed& c = Original();
  std::string bytes = Rebuild(c, Sections(c));
  const uint64_t at = bytes.size();
  bytes += format::EncodePage(PageType::kCheckpoint, at, kSalt, 1, "", false);
  PointSuperblockAtEnd(c, &bytes, [&](format::Superblock* sb) { sb->checkpoint = at; });
  CheckRefused(bytes, kCorruptPage, at, "no section header");
}

// Offset of the first page of `type` after the file header.
uint64_t FirstPageOf(const std::string& bytes, PageType type) {
  for (uint64_t pos = format::kFirstPageOffset; pos + format::kPageHeaderSize <= bytes.size();) {
    if (static_cast<uint8_t>(bytes[pos + 4]) == static_cast<uint8_t>(type)) return pos;
    pos += format::PaddedPageSize(format::DecodeFixed32(bytes.data() + pos + 12));
  }
  FAIL("no such page");
  return 0;
}

TEST_CASE("a checkpoint's graph holds no vectors: each node's comes from its episode record") {
  const Checkpointed& c = Original();
  const std::string graph = c.Section(CheckpointSection::kGraph);
  const char* image = graph.data() + format::kSectionHeaderSize;
  CHECK(format::DecodeFixed32(image + 4) == 2);  // the version without vectors
  const uint32_t m = format::DecodeFixed32(image + 16);
  CHECK(format::DecodeFixed32(image + 56) == 8 * m + 4 + 8);  // links and a label per node
  const uint64_t level0 = format::DecodeFixed64(image + 48);
  CHECK(graph.size() == format::kSectionHeaderSize + level0 + 5 * (8 * m + 4 + 8));
  // Opened, read or from a file on disk, the graph finds each episode by its
  // own vector.
  for (bool on_disk : {false, true}) {
    CAPTURE(on_disk);
    Opened o = OpenBytes(c.bytes, on_disk);
    REQUIRE_MESSAGE(o.status.ok(), o.status.ToString());
    CHECK_FALSE(Recall(o.db.get(), "ann", "cat", engine::RecallMode::kVector).empty());
  }
}

TEST_CASE("a damaged episodes page that a checkpoint's graph needs still opens, and only its episode is lost") {
  const Checkpointed& c = Original();
  const uint64_t at = FirstPageOf(c.bytes, PageType::kEpisodes);  // episode 1 (ann)
  REQUIRE(at < c.sb.checkpoint);
  std::string bytes = c.bytes;
  bytes[at + format::kPageHeaderSize + 3] ^= 0x10;
  // Read, and from a file on disk (mapped).
  for (bool on_disk : {false, true}) {
    CAPTURE(on_disk);
    Opened whole = OpenBytes(c.bytes, on_disk);
    Opened o = OpenBytes(bytes, on_disk);
    REQUIRE_MESSAGE(o.status.ok(), o.status.ToString());
    // Reading the episode names the page; the graph never returns it, and
    // everything else is found as before.
    format::EpisodeRecord e;
    Status s = o.db->GetEpisode(1, &e);
    CHECK(s.code() == kCorruptChecksum);
    CHECK(s.page_no() == PageNo(at));
    std::vector<std::string> before = Recall(whole.db.get(), "bob", "walk", engine::RecallMode::kVector);
    CHECK(Recall(o.db.get(), "bob", "walk", engine::RecallMode::kVector) == before);
    std::vector<std::string> ann = Recall(whole.db.get(), "ann", "cat", engine::RecallMode::kVector);
    std::vector<std::string> hidden = Recall(o.db.get(), "ann", "cat", engine::RecallMode::kVector);
    CHECK(std::find(ann.begin(), ann.end(), "1") != ann.end());
    CHECK(std::find(hidden.begin(), hidden.end(), "1") == hidden.end());
    ann.erase(std::find(ann.begin(), ann.end(), "1"));
    CHECK(hidden == ann);
  }
}

TEST_CASE("an episodes page damaged after a mapped open is found when a recall first needs its vector") {
  const Checkpointed& c = Original();
  const uint64_t at = FirstPageOf(c.bytes, PageType::kEpisodes);  // episode 1 (ann)
  std::string bad = c.bytes;
  bad[at + format::kPageHeaderSize + 3] ^= 0x10;
  Opened damaged_before = OpenBytes(bad, false);  // read at open: episode 1 hidden then
  REQUIRE(damaged_before.status.ok());
  const std::vector<std::string> want = Recall(damaged_before.db.get(), "ann", "cat", engine::RecallMode::kVector);
  REQUIRE(std::find(want.begin(), want.end(), "1") == want.end());
  // Opened whole from a file on disk, the graph's vectors left to read on
  // first use; then the page changes on disk, under the open handle.
  index::HnswIndex::SetReadAheadForTest(false);
  Opened o = OpenBytes(c.bytes, true);
  index::HnswIndex::SetReadAheadForTest(true);
  REQUIRE_MESSAGE(o.status.ok(), o.status.ToString());
  {
    std::fstream f(o.dir->path() + "/checkpoint.agentmem", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at + format::kPageHeaderSize + 3));
    f.put(bad[at + format::kPageHeaderSize + 3]);
    REQUIRE(f.good());
  }
  // The recall checks the page before using its vector: episode 1 is not a
  // hit, and the rest are those of a file damaged before its open.
  CHECK(Recall(o.db.get(), "ann", "cat", engine::RecallMode::kVector) == want);
  CHECK(Recall(o.db.get(), "ann", "cat", engine::RecallMode::kVector) == want);
  format::EpisodeRecord e;
  const Status s = o.db->GetEpisode(1, &e);
  CHECK(s.code() == kCorruptChecksum);
  CHECK(s.page_no() == PageNo(at));
}

TEST_CASE("a graph section changed on disk after a mapped open is searched without leaving the graph, and the next insert finds it") {
  const Checkpointed& c = Original();
  // The graph's page: the checkpoint's page of that section kind.
  uint64_t graph_at = 0;
  for (uint64_t pos = c.sb.checkpoint; pos < c.sb.scan_from;
       pos += format::PaddedPageSize(format::DecodeFixed32(c.bytes.data() + pos + 12))) {
    if (format::DecodeFixed32(c.bytes.data() + pos + format::kPageHeaderSize) ==
        static_cast<uint32_t>(CheckpointSection::kGraph)) {
      graph_at = pos;
    }
  }
  REQUIRE(graph_at != 0);
  const uint64_t image = graph_at + format::kPageHeaderSize + format::kSectionHeaderSize;
  const uint64_t level0 = format::DecodeFixed64(c.bytes.data() + image + 48);
  Opened whole = OpenBytes(c.bytes, false);
  const std::vector<std::string> want = Recall(whole.db.get(), "ann", "cat", engine::RecallMode::kVector);
  Opened o;  // from a file on disk, for writing
  o.dir = std::make_unique<test::TempDir>();
  REQUIRE(engine::Env::Posix()->CreateAtomic(o.dir->path() + "/checkpoint.agentmem", c.bytes).ok());
  // Without the reader thread, which would copy the graph out of the file
  // before the change below (hnsw_test covers that copy).
  index::HnswIndex::SetReadAheadForTest(false);
  o.status = Database::Open(o.dir->path() + "/checkpoint.agentmem",
                            CheckpointOptions(engine::Env::Posix(), o.clock.get(), false), &o.db);
  index::HnswIndex::SetReadAheadForTest(true);
  REQUIRE_MESSAGE(o.status.ok(), o.status.ToString());
  {
    // Another program writes node 0's first link out of range, in place.
    std::fstream f(o.dir->path() + "/checkpoint.agentmem", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(image + level0 + 4));
    const char far[4] = {'\xf0', '\xff', '\xff', '\x7f'};
    f.write(far, 4);
    REQUIRE(f.good());
  }
  // The open used the section where it lies: the search sees the change and
  // skips the link (five nodes: every hit still found).
  std::vector<std::string> got = Recall(o.db.get(), "ann", "cat", engine::RecallMode::kVector);
  std::sort(got.begin(), got.end());
  std::vector<std::string> sorted = want;
  std::sort(sorted.begin(), sorted.end());
  CHECK(got == sorted);
  // The first change copies the graph and checks it again: the changed link
  // is found, and the handle refuses to build on it (reopen); the next open
  // finds the page's checksum wrong.
  format::EpisodeRecord e;
  e.user_id = "ann";
  e.session_id = "s1";
  e.role = "user";
  e.text = "a new cat";
  for (uint32_t d = 0; d < kDim; d++) e.vector.push_back(static_cast<float>(d % 3) - 1);
  uint64_t id = 0;
  Status s = o.db->Remember(e, &id);
  if (s.ok()) {
    engine::RecallQuery q;
    q.user_id = "ann";
    q.mode = engine::RecallMode::kVector;
    q.vector = e.vector;
    std::vector<engine::RecallHit> hits;
    engine::RecallPlan plan;
    s = o.db->Recall(q, &hits, &plan);
  }
  CHECK_FALSE(s.ok());
  CHECK_MESSAGE(s.ToString().find("node 0: its links were changed in the file after it was mapped") !=
                    std::string::npos,
                s.ToString());
  o.db.reset();
  std::unique_ptr<Database> again;
  const Status reopened = Database::Open(o.dir->path() + "/checkpoint.agentmem",
                                         CheckpointOptions(engine::Env::Posix(), o.clock.get(), true), &again);
  CHECK(reopened.code() == kCorruptChecksum);
  CHECK(reopened.page_no() == PageNo(graph_at));
}

namespace {

// Episode i's vector: eight numbers of a fixed sequence.
std::vector<float> SpreadVector(uint64_t i) {
  std::vector<float> v;
  uint64_t x = i * 0x9e3779b97f4a7c15ull + 1;
  for (uint32_t d = 0; d < kDim; d++) {
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    v.push_back(static_cast<float>(x % 2001) / 1000.0f - 1.0f);
  }
  return v;
}

// The ids of the k nearest to episode id's vector, nearest first.
std::vector<uint64_t> NearestTo(Database* db, uint64_t id, size_t k = 1) {
  engine::RecallQuery q;
  q.user_id = "ann";
  q.mode = engine::RecallMode::kVector;
  q.k = k;
  q.vector = SpreadVector(id);
  std::vector<engine::RecallHit> hits;
  engine::RecallPlan plan;
  Status s = db->Recall(q, &hits, &plan);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  std::vector<uint64_t> ids;
  for (const engine::RecallHit& h : hits) ids.push_back(h.id);
  return ids;
}

}  // namespace

TEST_CASE("a checkpoint graph of many nodes, read in chunks by two threads, gives each node its own vector, and a damaged page hides only its episodes") {
  constexpr uint64_t kEpisodes = 10000;  // the graph is read in chunks of 4,096 nodes
  // Without a vector: episode 4098 is node 4,096, the first of the second
  // chunk, and shares its page with the last nodes of the first.
  constexpr uint64_t kNoVector = 10;
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  TestClock clock;
  {
    std::unique_ptr<Database> db = MustOpen(kPath, CheckpointOptions(env.get(), &clock, false));
    for (uint64_t i = 1; i <= kEpisodes;) {
      REQUIRE(db->Begin().ok());
      for (uint64_t end = i + 1000; i < end; i++) {
        format::EpisodeRecord e;
        e.user_id = "ann";
        e.session_id = "s1";
        e.role = "user";
        e.text = "episode " + std::to_string(i);
        if (i != kNoVector) e.vector = SpreadVector(i);
        uint64_t id = 0;
        REQUIRE(db->Remember(e, &id).ok());
        REQUIRE(id == i);
      }
      REQUIRE(db->Commit().ok());
    }
    REQUIRE(db->Close().ok());
  }
  const std::string bytes = ReadAll(env.get());
  // The episodes page that holds node 4,096 (episode 4098): the first two
  // chunks both read it. (The close compacted the file: it has a salt of
  // its own.)
  format::FileHeader fh;
  REQUIRE(format::DecodeFileHeader(std::string_view(bytes).substr(0, format::kFirstPageOffset), &fh).ok());
  const uint64_t salt = fh.salt;
  uint64_t damaged = 0;
  for (uint64_t pos = format::kFirstPageOffset; pos + format::kPageHeaderSize <= bytes.size() && damaged == 0;) {
    format::PageHeader h;
    REQUIRE(format::PeekPageHeader(std::string_view(bytes).substr(pos), pos, salt, &h).ok());
    if (h.type == static_cast<uint8_t>(PageType::kEpisodes)) {
      std::string payload;
      REQUIRE(format::DecodePage(std::string_view(bytes).substr(pos), pos, salt, &h, &payload).ok());
      std::vector<std::string_view> records;
      REQUIRE(format::SplitRecords(payload, h.record_count, PageNo(pos), &records).ok());
      uint64_t first = 0, last = 0;
      std::string_view vector;
      format::VectorType type;
      REQUIRE(format::EpisodeVectorOf(records.front(), PageNo(pos), &first, &vector, &type).ok());
      REQUIRE(format::EpisodeVectorOf(records.back(), PageNo(pos), &last, &vector, &type).ok());
      if (first <= 4098 && 4098 <= last) damaged = pos;
    }
    pos += format::PaddedPageSize(h.length);
  }
  REQUIRE(damaged != 0);
  std::string bad = bytes;
  bad[damaged + format::kPageHeaderSize + 3] ^= 0x10;
  Opened whole = OpenBytes(bytes);
  Opened o = OpenBytes(bad);
  REQUIRE_MESSAGE(whole.status.ok(), whole.status.ToString());
  REQUIRE_MESSAGE(o.status.ok(), o.status.ToString());
  // The lost episodes are those whose reads name the damaged page, and
  // only the graph of the damaged file leaves them out.
  std::vector<uint64_t> lost;
  uint64_t sampled = 0, kept = 0, found_whole = 0, found = 0;
  for (uint64_t id = 1; id <= kEpisodes; id++) {
    format::EpisodeRecord e;
    Status s = o.db->GetEpisode(id, &e);
    const bool on_damaged = !s.ok();
    if (on_damaged) {
      CHECK(s.page_no() == PageNo(damaged));
      lost.push_back(id);
    }
    if (id == kNoVector || (id % 7 != 0 && !on_damaged)) continue;  // a sample, and every lost episode
    sampled++;
    found_whole += NearestTo(whole.db.get(), id) == std::vector<uint64_t>{id};
    const std::vector<uint64_t> nearest = NearestTo(o.db.get(), id);
    if (on_damaged) {
      CHECK(nearest != std::vector<uint64_t>{id});
    } else {
      kept++;
      found += nearest == std::vector<uint64_t>{id};
    }
  }
  REQUIRE(!lost.empty());
  CHECK(lost.size() < 1000);
  CHECK(lost.front() <= 4097);  // in the first chunk and the second
  CHECK(lost.back() >= 4098);
  // A search that returns nearly every node returns none of the lost ones.
  const std::vector<uint64_t> all = NearestTo(o.db.get(), 1, kEpisodes);
  CHECK(all.size() > kEpisodes / 2);
  for (uint64_t id : all) CHECK_FALSE(std::binary_search(lost.begin(), lost.end(), id));
  // Every sampled episode, lost or not, is its own vector's nearest in the
  // whole file, and every kept one in the damaged file.
  CHECK(found_whole == sampled);
  CHECK(found == kept);
}

namespace {

// An in-memory Env that notes where and how much each write of its files
// puts.
struct Write {
  uint64_t offset;
  size_t size;
};
class WriteLogFile : public ForwardingFile {
 public:
  WriteLogFile(std::unique_ptr<engine::File> f, std::vector<Write>* log) : ForwardingFile(std::move(f)), log_(log) {}
  Status WriteAt(uint64_t offset, std::string_view data) override {
    log_->push_back({offset, data.size()});
    return f_->WriteAt(offset, data);
  }

 private:
  std::vector<Write>* log_;
};
class WriteLogEnv : public WrappingEnv {
 public:
  std::vector<Write> writes;

 private:
  std::unique_ptr<engine::File> Wrap(std::unique_ptr<engine::File> f) override {
    return std::make_unique<WriteLogFile>(std::move(f), &writes);
  }
};

}  // namespace

TEST_CASE("a checkpoint writes its bm25 and graph sections in pieces, each page's header last") {
  constexpr int kUsers = 100;
  WriteLogEnv env;
  TestClock clock;
  {
    std::unique_ptr<Database> db = MustOpen(kPath, CheckpointOptions(&env, &clock, false));
    REQUIRE(db->Begin().ok());
    for (int i = 0; i < 30 * kUsers; i++) {
      format::EpisodeRecord e;
      e.user_id = "user" + std::to_string(i % kUsers);
      e.session_id = "s1";
      e.role = "user";
      e.text = "note " + std::to_string(i) + " about word" + std::to_string(i % 17) + " and word" +
               std::to_string(i % 23);
      e.vector = SpreadVector(static_cast<uint64_t>(i + 1));
      uint64_t id = 0;
      REQUIRE(db->Remember(e, &id).ok());
    }
    REQUIRE(db->Commit().ok());
    REQUIRE(db->Close().ok());
  }
  const std::string bytes = ReadAll(&env);
  format::FileHeader fh;
  REQUIRE(format::DecodeFileHeader(std::string_view(bytes).substr(0, format::kFirstPageOffset), &fh).ok());
  format::Superblock sb;
  bool found = false;
  for (int slot = 0; slot < 2; slot++) {
    format::Superblock s;
    if (format::DecodeSuperblock(std::string_view(bytes).substr(format::kSuperblockOffset[slot], 64), fh.salt, &s)
            .ok() &&
        s.checkpoint != 0 && (!found || s.generation > sb.generation)) {
      sb = s;
      found = true;
    }
  }
  REQUIRE(found);
  // The checkpoint's pages: state, bm25, graph, commit.
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> pages;  // section: offset, padded size
  for (uint64_t pos = sb.checkpoint; pos < sb.scan_from;) {
    format::PageHeader h;
    REQUIRE(format::PeekPageHeader(std::string_view(bytes).substr(pos), pos, fh.salt, &h).ok());
    std::string payload;
    REQUIRE(format::DecodePage(std::string_view(bytes).substr(pos), pos, fh.salt, &h, &payload).ok());
    if (h.type == static_cast<uint8_t>(PageType::kCheckpoint)) {
      pages[format::DecodeFixed32(payload.data())] = {pos, format::PaddedPageSize(h.length)};
    }
    pos += format::PaddedPageSize(h.length);
  }
  // The writes into a page: many pieces, none near the section's size, the
  // header last; together they cover the page once.
  auto check_pieces = [&](CheckpointSection section, size_t min_pieces, double max_share) {
    CAPTURE(static_cast<int>(section));
    REQUIRE(pages.count(static_cast<uint32_t>(section)) == 1);
    const auto [at, size] = pages[static_cast<uint32_t>(section)];
    std::vector<Write> in_page;
    for (const Write& w : env.writes) {
      if (w.offset >= at && w.offset < at + size) in_page.push_back(w);
    }
    CHECK(in_page.size() >= min_pieces);
    size_t largest = 0, total = 0;
    for (const Write& w : in_page) {
      largest = std::max(largest, w.size);
      total += w.size;
    }
    CHECK(static_cast<double>(largest) < static_cast<double>(size) / max_share);
    CHECK(total == size);
    REQUIRE(!in_page.empty());
    CHECK(in_page.back().offset == at);
    CHECK(in_page.back().size == format::kPageHeaderSize);
  };
  check_pieces(CheckpointSection::kBm25, kUsers, 10);  // a piece per user's image
  check_pieces(CheckpointSection::kGraph, 4, 1.5);     // 3,000 records of 140 bytes, 256 KiB a piece
  // And the file opens from that checkpoint and finds each user's notes.
  Opened o = OpenBytes(bytes);
  REQUIRE_MESSAGE(o.status.ok(), o.status.ToString());
  for (int u : {0, 42, kUsers - 1}) {
    CAPTURE(u);
    CHECK(Recall(o.db.get(), "user" + std::to_string(u), "note " + std::to_string(u), engine::RecallMode::kBm25)
              .size() > 0);
  }
}

TEST_CASE("a checkpoint episode entry that does not lead to its node's vector fails the open") {
  const Checkpointed& c = Original();
  int graph_index = 0;
  while (format::DecodeFixed32(c.sections[graph_index].data()) !=
         static_cast<uint32_t>(CheckpointSection::kGraph)) {
    graph_index++;
  }
  auto refused = [&](const std::function<void(format::CheckpointState*)>& change) {
    format::CheckpointState st = c.state;
    change(&st);
    std::vector<Page> pages = Sections(c);
    for (Page& p : pages) {
      if (format::DecodeFixed32(p.payload.data()) == 1) p.payload = StatePayload(st);
    }
    const std::string bytes = Rebuild(c, pages);
    CheckRefused(bytes, kCorruptIndex, PageAt(bytes, c.sb.checkpoint, graph_index),
                 "no usable vector");
  };
  SUBCASE("a slot past its page's records") {
    refused([](format::CheckpointState* st) { st->episodes[0].slot = 9; });
  }
  SUBCASE("another episode's record") {
    refused([](format::CheckpointState* st) { st->episodes[0].page_offset = st->episodes[1].page_offset; });
  }
}

TEST_SUITE_END();


namespace {

// Ids of the vector top-10 of a few queries of user "u".
std::vector<std::vector<uint64_t>> VectorAnswers(Database* db) {
  std::vector<std::vector<uint64_t>> out;
  for (int q = 0; q < 8; q++) {
    engine::RecallQuery rq;
    rq.user_id = "u";
    rq.text = "memory number " + std::to_string(q * 131) + " about sailing and tea";
    rq.mode = engine::RecallMode::kVector;
    rq.min_similarity = -INFINITY;
    std::vector<engine::RecallHit> hits;
    REQUIRE(db->Recall(rq, &hits, nullptr).ok());
    std::vector<uint64_t> ids;
    for (const auto& h : hits) ids.push_back(h.id);
    out.push_back(ids);
  }
  return out;
}

uint16_t ReadVersionOf(const std::string& path) {
  return format::DecodeFixed16(test::ReadFileBytes(path).data() + 8);
}

// A file of `type` (f16 or int8) vectors against one of float32 vectors:
// version 2, smaller by at least half of what each component saves, and
// recalling the same after reopen and VACUUM.
void CheckTypedVectorFile(const std::string& type, size_t width, float unstorable) {
  test::TempDir dir;
  const std::string small = dir.File(type + ".agentmem"), full = dir.File("full.agentmem");
  std::vector<std::vector<uint64_t>> answers;
  size_t dim = 0;  // the default embedder's
  for (const std::string& path : {full, small}) {
    engine::Options o;
    REQUIRE(engine::ParseOptions((path == small ? "vector_type=" + type : std::string("vector_type=f32")).c_str(), &o).ok());
    o.checkpoint_bytes = 256 * 1024;
    auto db = test::MustOpen(path, o);
    for (int t = 0; t < 5; t++) {
      REQUIRE(db->Begin().ok());
      for (int i = 0; i < 1000; i++) {
        format::EpisodeRecord r;
        r.user_id = "u";
        r.session_id = "s";
        r.text = "memory number " + std::to_string(t * 1000 + i) + " about " +
                 (i % 3 ? "sailing" : "tea") + " and topic " + std::to_string(i % 17);
        uint64_t id = 0;
        REQUIRE(db->Remember(r, &id).ok());
      }
      REQUIRE(db->Commit().ok());
    }
    if (path == small) {
      answers = VectorAnswers(db.get());
      format::EpisodeRecord r;
      REQUIRE(db->GetEpisode(77, &r).ok());
      dim = r.vector.size();
      REQUIRE(dim > 0);
      std::vector<float> again = r.vector;  // stored as it reads back
      format::VectorType stored;
      REQUIRE(engine::StoredVectorType(type, &stored));
      REQUIRE(format::RoundToStored(stored, again));
      CHECK(again == r.vector);
    }
    REQUIRE(db->Close().ok());
  }
  CHECK(ReadVersionOf(full) == 1);
  CHECK(ReadVersionOf(small) == 2);
  const size_t full_size = test::ReadFileBytes(full).size(), small_size = test::ReadFileBytes(small).size();
  MESSAGE("5,000 episodes x " << dim << "-d: " << full_size << " bytes as float32, " << small_size
                              << " as " << type);
  CHECK(small_size + 5000 * dim * (4 - width) / 2 < full_size);
  {
    engine::Options o;  // no vector_type: whatever the file records
    auto db = test::MustOpen(small, o);
    CHECK(VectorAnswers(db.get()) == answers);  // the checkpoint's graph, vectors from the records
    REQUIRE(db->Vacuum({}, nullptr).ok());
    CHECK(VectorAnswers(db.get()) == answers);
    REQUIRE(db->Close().ok());
  }
  CHECK(ReadVersionOf(small) == 2);
  auto db = test::MustOpen(small, engine::Options{});
  CHECK(VectorAnswers(db.get()) == answers);
  format::EpisodeRecord big;
  big.user_id = "u";
  big.text = "too large for the file's vectors";
  big.vector.assign(dim, 0.0f);
  big.vector[5] = unstorable;
  uint64_t id = 0;
  const Status range = db->Remember(big, &id);
  CHECK(range.code() == kRange);
  CHECK(range.message().find("vector_type=" + type) != std::string::npos);
  REQUIRE(db->Close().ok());
  engine::Options f32;
  REQUIRE(engine::ParseOptions("vector_type=f32", &f32).ok());
  std::unique_ptr<Database> other;
  const Status s = Database::Open(small, f32, &other);
  CHECK(s.code() == kMismatch);
  CHECK(s.message().find("/" + type) != std::string::npos);
}

}  // namespace

TEST_CASE("a file of float16 vectors is a version 2 file half the vector bytes, and recalls the same after reopen and VACUUM") {
  CheckTypedVectorFile("f16", 2, 1e6f);
}

TEST_CASE("a file of int8 vectors is a version 2 file a quarter of the vector bytes, and recalls the same after reopen and VACUUM") {
  CheckTypedVectorFile("int8", 1, FLT_MAX);
}

TEST_CASE("an unknown vector type is refused as an option, and a file that records one is refused to open") {
  engine::Options bad;
  CHECK(engine::ParseOptions("vector_type=f64", &bad).code() == kMisuse);
  test::TempDir dir;
  engine::Options future;
  future.space.type = "bf16";
  future.space_given = true;
  const std::string odd = dir.File("bf16.agentmem");
  std::unique_ptr<Database> other;
  Database::Open(odd, future, &other).IgnoreError();
  other.reset();
  const Status refused = Database::Open(odd, engine::Options{}, &other);
  CHECK(refused.code() == kFormatVersion);
  CHECK(refused.message().find("bf16") != std::string::npos);
}

}  // namespace agentmem::test

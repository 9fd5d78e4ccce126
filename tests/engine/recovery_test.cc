// tests/engine/recovery_test.cc -- recovery on open (engine/storage/scan.cc) and the
// durability contract of RELIABILITY.md: reopen returns what was committed; a
// torn tail is ignored and cut by the next writer; damage before the last
// commit is AGENTMEM_CORRUPT naming the page (R5, small); a power loss at
// every sync point loses no acknowledged commit (R1, small).
//
// Most cases run on MemEnv (fast, no disk); the ones marked "on real files"
// use Env::Posix() in a TempDir.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "format/file_header.h"
#include "format/page.h"
#include "tests/util/fault_env.h"
#include "tests/util/open_helpers.h"
#include "tests/util/oracle.h"
#include "tests/util/seed.h"
#include "tests/util/temp_dir.h"

namespace agentmem::test {
namespace {

using engine::Database;
using engine::Env;
using engine::Options;
using engine::Stats;
using engine::SyncMode;
using format::EpisodeRecord;

constexpr uint64_t kSalt = 0x5eed0000a11ce5ULL;
constexpr uint32_t kDim = 8;
constexpr const char* kPath = "/mem/recovery.agentmem";

Options TestOptions(Env* env, TestClock* clock, SyncMode sync = SyncMode::kFull,
                    uint64_t salt = kSalt) {
  return TestOptionsFor(env, clock, sync, salt, kDim);
}

Options ReadOnly(Options o) {
  o.read_only = true;
  return o;
}

Stats MustStats(Database* db) {
  Stats st;
  Status s = db->GetStats(&st);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return st;
}

// Whole-file access through an Env.
std::string EnvRead(Env* env, const std::string& path) {
  std::unique_ptr<engine::File> f;
  REQUIRE(env->Open(path, engine::OpenMode{true}, &f).ok());
  uint64_t size = 0;
  REQUIRE(f->Size(&size).ok());
  std::string bytes;
  REQUIRE(f->ReadAt(0, size, &bytes).ok());
  REQUIRE(bytes.size() == size);
  return bytes;
}

// Whether `bytes` runs at least to `end` and holds only zeros after it.
bool ZerosFrom(const std::string& bytes, uint64_t end) {
  return bytes.size() >= end && bytes.find_first_not_of('\0', end) == std::string::npos;
}

// A fresh MemEnv holding `bytes` at kPath.
std::unique_ptr<Env> MemEnvWith(std::string_view bytes) {
  std::unique_ptr<Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, bytes).ok());
  return env;
}

// ------------------------------------------------------------------ page walk

struct PageSpan {
  uint64_t offset = 0;
  uint64_t size = 0;    // padded
  uint32_t length = 0;  // payload bytes stored
  uint8_t type = 0;
  int txn = 0;  // 0 = the creation transaction
};

// Walks the page headers from the first page to the end of the file.
std::vector<PageSpan> ListPages(const std::string& bytes) {
  format::FileHeader fh;
  REQUIRE(format::DecodeFileHeader(bytes, &fh).ok());
  std::vector<PageSpan> pages;
  uint64_t pos = format::kFirstPageOffset;
  int txn = 0;
  while (pos < bytes.size()) {
    format::PageHeader h;
    Status s = format::PeekPageHeader(std::string_view(bytes).substr(pos, format::kPageHeaderSize),
                                      pos, fh.salt, &h);
    REQUIRE_MESSAGE(s.ok(), s.ToString());
    PageSpan p{pos, format::PaddedPageSize(h.length), h.length, h.type, txn};
    pages.push_back(p);
    if (h.type == static_cast<uint8_t>(format::PageType::kCommit)) txn++;
    pos += p.size;
  }
  REQUIRE(pos == bytes.size());
  return pages;
}

// ------------------------------------------------------------------ histories

EpisodeRecord LongEpisode(std::mt19937_64& rng, uint64_t n) {
  EpisodeRecord e = RandomEpisode(rng, kDim, n);
  while (e.text.size() < 3000) e.text += " and the user said the same thing again";
  return e;
}

// A few transactions of every kind: autocommit episodes (with and without
// vectors and metadata), two versions of one block, facts, an explicit batch
// with a long compressible episode, and a rolled-back batch.
void WriteHistory(Driver& d, std::mt19937_64& rng, uint64_t* n) {
  for (int i = 0; i < 3; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, (*n)++)).ok());
  format::BlockRecord b = RandomBlock(rng, (*n)++);
  b.user_id = "u0";
  b.name = "persona";
  REQUIRE(d.SetBlock(b).ok());
  REQUIRE(d.AssertFact(RandomFact(rng, (*n)++)).ok());
  REQUIRE(d.Begin().ok());
  for (int i = 0; i < 4; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, (*n)++)).ok());
  REQUIRE(d.Remember(LongEpisode(rng, (*n)++)).ok());
  REQUIRE(d.AssertFact(RandomFact(rng, (*n)++)).ok());
  REQUIRE(d.Commit().ok());
  b.value = "second version of the persona block";
  REQUIRE(d.SetBlock(b).ok());
  REQUIRE(d.Begin().ok());
  REQUIRE(d.Remember(RandomEpisode(rng, kDim, (*n)++)).ok());
  REQUIRE(d.Rollback().ok());
  REQUIRE(d.Remember(RandomEpisode(rng, kDim, (*n)++)).ok());
}

// The last transaction of the sweeps: a batch with pages of every record kind,
// one of them compressed.
void WriteLastBatch(Driver& d, std::mt19937_64& rng, uint64_t* n) {
  REQUIRE(d.Begin().ok());
  REQUIRE(d.Remember(RandomEpisode(rng, kDim, (*n)++)).ok());
  REQUIRE(d.Remember(LongEpisode(rng, (*n)++)).ok());
  REQUIRE(d.SetBlock(RandomBlock(rng, (*n)++)).ok());
  REQUIRE(d.AssertFact(RandomFact(rng, (*n)++)).ok());
  REQUIRE(d.Commit().ok());
}

// A reference file at `path`: WriteHistory, then WriteLastBatch (sync=full).
// `bytes` are the file as it stands right after the last commit returned,
// before Close(): the state a crash during or just after the last commit
// leaves. (A clean close may record more in a superblock; damage tests that
// need that say so.)
struct Reference {
  std::string bytes;
  Oracle before_last, full;  // the models before and after the last transaction
  uint64_t before_last_end = 0;
};

Reference BuildReference(Env* env, const std::string& path, std::mt19937_64& rng, uint64_t* n,
                         uint64_t salt = kSalt) {
  Reference r;
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(path, TestOptions(env, &clock, SyncMode::kFull, salt));
  Driver d(db.get(), &clock);
  WriteHistory(d, rng, n);
  r.before_last = d.acked();
  r.before_last_end = MustStats(db.get()).file_bytes;
  WriteLastBatch(d, rng, n);
  r.full = d.acked();
  const uint64_t end = MustStats(db.get()).file_bytes;
  CHECK(d.errors().empty());
  r.bytes = EnvRead(env, path);
  REQUIRE(db->Close().ok());
  // The log's reserve after the last commit is zeros; cut off, as a close does.
  REQUIRE(ZerosFrom(r.bytes, end));
  r.bytes.resize(end);
  REQUIRE(end > r.before_last_end);
  return r;
}

// ================================================================== tests

TEST_SUITE_BEGIN("recovery");

TEST_CASE("reopen returns exactly what was committed") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  std::unique_ptr<Env> mem = engine::NewMemEnv();
  TempDir dir;
  struct Where {
    const char* name;
    Env* env;
    std::string path;
  };
  for (const Where& w : {Where{"MemEnv", mem.get(), kPath},
                         Where{"real file", Env::Posix(), dir.File("reopen.agentmem")}}) {
    const std::string where = w.name;
    CAPTURE(where);
    std::mt19937_64 rng(seed);
    TestClock clock;
    Options opts = TestOptions(w.env, &clock);
    uint64_t n = 1;
    Oracle model;
    {
      std::unique_ptr<Database> db = MustOpen(w.path, opts);
      Driver d(db.get(), &clock);
      WriteHistory(d, rng, &n);
      CHECK(d.errors().empty());
      model = d.acked();
      // The writing handle shows it too.
      CHECK(model.Diff(db.get()) == "");
      REQUIRE(db->Close().ok());
    }
    REQUIRE(model.commits() == 9);  // creation + 8 (the rolled-back batch wrote nothing)
    {
      std::unique_ptr<Database> db = MustOpen(w.path, opts);
      CHECK(model.Diff(db.get()) == "");
      // Spot checks written out, so the test does not rest on the model alone.
      const EpisodeRecord& first = model.episodes().begin()->second;
      EpisodeRecord got;
      REQUIRE(db->GetEpisode(first.id, &got).ok());
      CHECK(got.id == 1);
      CHECK(got.text == first.text);
      CHECK(got.vector == first.vector);
      CHECK(got.metadata == first.metadata);
      CHECK(got.created_at == first.created_at);
      format::BlockRecord block;
      REQUIRE(db->GetBlock("u0", "persona", &block).ok());
      CHECK(block.value == "second version of the persona block");
      Stats st = MustStats(db.get());
      CHECK(st.block_versions >= 2);
      CHECK(st.episodes == model.episode_count());
      CHECK(st.torn_bytes == 0);

      // A second session appends; a third sees both.
      Driver d(db.get(), &clock);
      d.mutable_acked() = model;
      REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
      REQUIRE(d.AssertFact(RandomFact(rng, n++)).ok());
      model = d.acked();
      REQUIRE(db->Close().ok());
    }
    std::unique_ptr<Database> ro = MustOpen(w.path, ReadOnly(opts));
    CHECK(model.Diff(ro.get()) == "");
    CHECK(MustStats(ro.get()).commits == model.commits());
    std::unique_ptr<Database> rw = MustOpen(w.path, opts);
    CHECK(model.Diff(rw.get()) == "");
  }
}

TEST_CASE(
    "the file truncated at every byte offset inside the last commit opens with exactly the "
    "committed prefix") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::unique_ptr<Env> env = engine::NewMemEnv();
  uint64_t n = 1;
  const Reference ref = BuildReference(env.get(), kPath, rng, &n);
  const std::string& bytes = ref.bytes;
  const Oracle& before = ref.before_last;
  const Oracle& after = ref.full;
  const uint64_t before_end = ref.before_last_end, full_size = bytes.size();
  const EpisodeRecord extra = RandomEpisode(rng, kDim, n++);

  auto check_length = [&](Env* e, const std::string& path, uint64_t len) {
    CAPTURE(len);
    const bool whole = len == full_size;
    const Oracle& want = whole ? after : before;
    const uint64_t end = whole ? full_size : before_end;
    TestClock c2;
    Options opts = TestOptions(e, &c2);
    {
      std::unique_ptr<Database> ro = MustOpen(path, ReadOnly(opts));
      CHECK(want.Diff(ro.get()) == "");
      Stats st = MustStats(ro.get());
      CHECK(st.file_bytes == end);
      CHECK(st.torn_bytes == len - end);
    }
    uint64_t new_end = 0;
    Oracle with_extra;
    {
      std::unique_ptr<Database> rw = MustOpen(path, opts);
      CHECK(want.Diff(rw.get()) == "");
      Driver d(rw.get(), &c2);
      d.mutable_acked() = want;
      REQUIRE(d.Remember(extra).ok());
      CHECK(d.errors().empty());
      with_extra = d.acked();
      Stats st = MustStats(rw.get());
      CHECK(st.torn_bytes == 0);
      new_end = st.file_bytes;
      REQUIRE(rw->Close().ok());
    }
    std::unique_ptr<Database> again = MustOpen(path, ReadOnly(opts));
    CHECK(with_extra.Diff(again.get()) == "");
    Stats st = MustStats(again.get());
    CHECK(st.file_bytes == new_end);
    CHECK(st.torn_bytes == 0);  // the torn tail was cut, not left behind the new commit
  };

  uint64_t lengths = 0;
  for (uint64_t len = before_end; len <= full_size; len++) {
    std::unique_ptr<Env> e = MemEnvWith(std::string_view(bytes).substr(0, len));
    check_length(e.get(), kPath, len);
    lengths++;
  }
  // A sample on real files: every page boundary of the last commit +-1, and a
  // spread of offsets between.
  TempDir dir;
  std::vector<uint64_t> sample;
  for (const PageSpan& p : ListPages(bytes)) {
    if (p.offset < before_end) continue;
    for (uint64_t d : {p.offset, p.offset + 1, p.offset + 31, p.offset + 32, p.offset + p.size - 1})
      sample.push_back(d);
  }
  for (uint64_t len = before_end; len < full_size; len += (full_size - before_end) / 7 + 1)
    sample.push_back(len);
  sample.push_back(full_size);
  int real = 0;
  for (uint64_t len : sample) {
    std::string path = dir.File("cut-" + std::to_string(len) + ".agentmem");
    WriteFileBytes(path, bytes.substr(0, len));
    check_length(Env::Posix(), path, len);
    real++;
  }
  MESSAGE("truncated lengths checked: " << lengths << " on MemEnv (" << before_end << ".."
                                        << full_size << "), " << real << " on real files");
}

// Opens `bytes` read-only and read-write and checks the outcome of damage to
// the page at `page` (PageSpan). Returns false when a check failed (to stop a
// sweep early).
struct DamageExpect {
  const Oracle* before_last;  // the model of all but the last transaction
  int last_txn;
};

bool CheckDamaged(const std::string& bytes, const PageSpan& page, const DamageExpect& x) {
  std::unique_ptr<Env> env = MemEnvWith(bytes);
  TestClock clock;
  Options opts = TestOptions(env.get(), &clock);
  bool good = true;
  for (bool read_only : {true, false}) {
    CAPTURE(read_only);
    opts.read_only = read_only;
    std::unique_ptr<Database> db;
    Status s = Database::Open(kPath, opts, &db);
    if (page.txn != x.last_txn) {
      // Damage before the last commit: a later commit's durable_through
      // vouches for these bytes, so this is corruption, named by page.
      CHECK_MESSAGE(s.primary() == kCorrupt, s.ToString());
      CHECK(s.page_no() == static_cast<int64_t>(page.offset / 16));
      CHECK(s.message().find(std::to_string(page.offset / 16)) != std::string::npos);
      CHECK(db == nullptr);
      good =
          good && s.primary() == kCorrupt && s.page_no() == static_cast<int64_t>(page.offset / 16);
    } else {
      // Damage in the last transaction is indistinguishable from a torn write:
      // the open succeeds and shows the state before it.
      CHECK_MESSAGE(s.ok(), s.ToString());
      if (!s.ok()) return false;
      std::string d = x.before_last->Diff(db.get());
      CHECK(d == "");
      good = good && d.empty();
    }
  }
  return good;
}

TEST_CASE(
    "a flipped bit in any page before the last commit gives AGENTMEM_CORRUPT with that page "
    "number") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::unique_ptr<Env> env = engine::NewMemEnv();
  uint64_t n = 1;
  const Reference ref = BuildReference(env.get(), kPath, rng, &n);
  const std::string& bytes = ref.bytes;
  const Oracle& before = ref.before_last;
  const Oracle& after = ref.full;
  TestClock clock;
  const std::vector<PageSpan> pages = ListPages(bytes);
  const int last_txn = pages.back().txn;
  REQUIRE(last_txn == static_cast<int>(after.commits()) - 1);
  DamageExpect expect{&before, last_txn};
  {
    std::unique_ptr<Env> e = MemEnvWith(bytes);
    std::unique_ptr<Database> db = MustOpen(kPath, ReadOnly(TestOptions(e.get(), &clock)));
    REQUIRE(after.Diff(db.get()) == "");
  }

  // Every bit of every page header; every bit of small payloads; one bit of
  // every other payload and padding byte (a different bit from byte to byte).
  uint64_t flips = 0, corrupt_pages = 0, torn_pages = 0;
  for (const PageSpan& p : pages) {
    CAPTURE(p.offset);
    CAPTURE(p.txn);
    const std::string page_type = format::PageTypeName(p.type);
    CAPTURE(page_type);
    (p.txn == last_txn ? torn_pages : corrupt_pages)++;
    std::string damaged = bytes;
    bool ok = true;
    for (uint64_t byte = p.offset; byte < p.offset + p.size && ok; byte++) {
      const bool every_bit = byte < p.offset + format::kPageHeaderSize || p.length <= 128;
      for (int bit = 0; bit < 8 && ok; bit++) {
        if (!every_bit && static_cast<uint64_t>(bit) != byte % 8) continue;
        CAPTURE(byte);
        CAPTURE(bit);
        damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
        ok = CheckDamaged(damaged, p, expect);
        damaged[byte] = bytes[byte];
        flips++;
      }
    }
    // The whole page zeroed.
    std::fill(damaged.begin() + static_cast<std::ptrdiff_t>(p.offset),
              damaged.begin() + static_cast<std::ptrdiff_t>(p.offset + p.size), '\0');
    CheckDamaged(damaged, p, expect);
  }
  MESSAGE(pages.size() << " pages (" << corrupt_pages << " before the last transaction, "
                       << torn_pages << " in it), " << flips << " single-bit flips");
}

TEST_CASE(
    "a flipped bit in the file header fails the open; in one superblock it does not, in both it "
    "does") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::unique_ptr<Env> env = engine::NewMemEnv();
  uint64_t n = 1;
  const Reference ref = BuildReference(env.get(), kPath, rng, &n);
  const std::string& bytes = ref.bytes;
  const Oracle& after = ref.full;
  TestClock clock;

  // The file header: never opens. Bad magic is "not a database"; a read
  // version that became newer is "needs a newer agentmem" (DecodeFileHeader
  // checks the version before the checksum, format/file_header.h); anything
  // else is a header checksum error.
  for (uint64_t byte = 0; byte < format::kHeaderSize; byte++) {
    for (int bit = 0; bit < 8; bit++) {
      CAPTURE(byte);
      CAPTURE(bit);
      std::string damaged = bytes;
      damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
      std::unique_ptr<Env> e = MemEnvWith(damaged);
      std::unique_ptr<Database> db;
      Status s = Database::Open(kPath, ReadOnly(TestOptions(e.get(), &clock)), &db);
      REQUIRE(!s.ok());
      uint16_t read_version = static_cast<uint16_t>(static_cast<uint8_t>(damaged[8]) |
                                                    (static_cast<uint8_t>(damaged[9]) << 8));
      if (byte < 8) {
        CHECK_MESSAGE(s.code() == kNotADb, s.ToString());
      } else if (read_version > format::kReadVersion) {
        CHECK_MESSAGE(s.code() == kFormatVersion, s.ToString());
      } else {
        CHECK_MESSAGE(s.code() == kCorruptHeader, s.ToString());
      }
    }
  }

  // One superblock damaged: the other one serves and nothing is lost. Both
  // damaged: AGENTMEM_CORRUPT_SUPERBLOCK.
  for (uint64_t sb : format::kSuperblockOffset) {
    for (uint64_t byte = sb; byte < sb + format::kSuperblockSize; byte++) {
      for (int bit = 0; bit < 8; bit += 3) {
        CAPTURE(byte);
        CAPTURE(bit);
        std::string damaged = bytes;
        damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
        std::unique_ptr<Env> e = MemEnvWith(damaged);
        std::unique_ptr<Database> db;
        Status s = Database::Open(kPath, ReadOnly(TestOptions(e.get(), &clock)), &db);
        REQUIRE_MESSAGE(s.ok(), s.ToString());
        CHECK(after.Diff(db.get()) == "");
      }
    }
  }
  for (uint64_t off = 0; off < format::kSuperblockSize; off += 7) {
    CAPTURE(off);
    std::string damaged = bytes;
    for (uint64_t sb : format::kSuperblockOffset) damaged[sb + off] ^= 0x10;
    std::unique_ptr<Env> e = MemEnvWith(damaged);
    std::unique_ptr<Database> db;
    Status s = Database::Open(kPath, ReadOnly(TestOptions(e.get(), &clock)), &db);
    CHECK_MESSAGE(s.code() == kCorruptSuperblock, s.ToString());
  }
}

// Close() under sync=NORMAL makes every commit durable (database.h), so damage
// to those commits afterwards is damage, not a torn write, and must not be
// skipped silently (RELIABILITY.md contract, "Corruption in the middle").
TEST_CASE(
    "under sync=normal a flipped bit in a commit made durable by close is AGENTMEM_CORRUPT, not a "
    "torn tail") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  uint64_t n = 1;
  Oracle full;
  {
    std::unique_ptr<Database> db =
        MustOpen(kPath, TestOptions(env.get(), &clock, SyncMode::kNormal));
    Driver d(db.get(), &clock);
    for (int i = 0; i < 10; i++) REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
    full = d.acked();
    REQUIRE(db->Close().ok());  // fdatasync: all ten commits are durable now
  }
  const std::string bytes = EnvRead(env.get(), kPath);
  const std::vector<PageSpan> pages = ListPages(bytes);
  auto target =
      std::find_if(pages.begin(), pages.end(), [](const PageSpan& p) { return p.txn == 3; });
  REQUIRE(target != pages.end());
  std::string damaged = bytes;
  damaged[target->offset + format::kPageHeaderSize + target->length / 2] ^= 0x04;
  std::unique_ptr<Env> e2 = MemEnvWith(damaged);
  Options opts = TestOptions(e2.get(), &clock, SyncMode::kNormal);
  std::unique_ptr<Database> db;
  Status s = Database::Open(kPath, opts, &db);
  CHECK_MESSAGE(s.primary() == kCorrupt, s.ToString());
  CHECK(s.page_no() == static_cast<int64_t>(target->offset / 16));
  if (s.ok()) {
    // Evidence for the report: what the next writer does with the "tail".
    Stats st = MustStats(db.get());
    uint64_t id = 0;
    EpisodeRecord e = RandomEpisode(rng, kDim, n++);
    REQUIRE(db->Remember(e, &id).ok());
    REQUIRE(db->Close().ok());
    db.reset();
    db = MustOpen(kPath, opts);
    Stats after = MustStats(db.get());
    FAIL_CHECK("the open took damage in commit 3 of 10 for a torn tail: "
               << st.torn_bytes << " bytes of durable commits ignored (" << st.episodes << " of "
               << full.episode_count() << " episodes visible); after one more write the"
               << " file holds " << after.episodes << " episodes and " << after.file_bytes << " of "
               << bytes.size() << " bytes");
  }
}

TEST_CASE("torn tail is ignored on read-only open and cut by the next writer") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  TempDir dir;
  enum Tail { kHalfCommit, kGarbage, kZerosThenGarbage };
  for (Tail tail : {kHalfCommit, kGarbage, kZerosThenGarbage}) {
    CAPTURE(static_cast<int>(tail));
    std::mt19937_64 rng(seed + static_cast<uint64_t>(tail));
    const std::string path =
        dir.File("torn-" + std::to_string(static_cast<int>(tail)) + ".agentmem");
    uint64_t n = 1;
    const Reference ref = BuildReference(Env::Posix(), path, rng, &n);
    const Oracle& committed = ref.before_last;
    const uint64_t end = ref.before_last_end;
    std::string bytes = ref.bytes;  // its last transaction is cut in half (kHalfCommit)
    TestClock clock;
    Options opts = TestOptions(Env::Posix(), &clock);
    if (tail == kHalfCommit) {
      bytes.resize(end + (bytes.size() - end) / 2);
    } else {
      bytes.resize(end);
      std::string junk(1000 + rng() % 3000, '\0');
      // Garbage throughout, or after zeros: a write into the log's reserve
      // whose first sectors never landed.
      for (size_t i = tail == kGarbage ? 0 : junk.size() / 2; i < junk.size(); i++) {
        junk[i] = static_cast<char>(rng());
      }
      bytes += junk;
    }
    WriteFileBytes(path, bytes);
    const uint64_t torn = bytes.size() - end;

    // A read-only open ignores the tail and leaves the file alone.
    std::unique_ptr<Database> reader = MustOpen(path, ReadOnly(opts));
    CHECK(committed.Diff(reader.get()) == "");
    Stats st = MustStats(reader.get());
    CHECK(st.file_bytes == end);
    CHECK(st.torn_bytes == torn);
    CHECK(ReadFileBytes(path) == bytes);
    // So does a read-write open that does not write: the tail stays, and so
    // does every page (the superblocks, before the first page, are the only
    // bytes an engine may rewrite in place).
    const uint64_t first = format::kFirstPageOffset;
    {
      std::unique_ptr<Database> idle = MustOpen(path, opts);
      CHECK(committed.Diff(idle.get()) == "");
      CHECK(MustStats(idle.get()).torn_bytes == torn);
      REQUIRE(idle->Close().ok());
    }
    CHECK(ReadFileBytes(path).substr(first) == bytes.substr(first));

    // The next writer cuts it and appends where the last commit ended.
    Oracle model;
    uint64_t new_end = 0;
    {
      std::unique_ptr<Database> writer = MustOpen(path, opts);
      Driver d(writer.get(), &clock);
      d.mutable_acked() = committed;
      REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
      CHECK(d.errors().empty());
      model = d.acked();
      Stats ws = MustStats(writer.get());
      CHECK(ws.torn_bytes == 0);
      new_end = ws.file_bytes;
      CHECK(new_end > end);
      CHECK(ZerosFrom(ReadFileBytes(path), new_end));  // the reserve, if any, after it
      CHECK(ReadFileBytes(path).substr(first, end - first) == bytes.substr(first, end - first));
      REQUIRE(writer->Close().ok());
    }
    // The reader opened before the cut moves forward to the new commit. (When
    // the new commit happens to end exactly where the torn tail ended, the
    // next test case checks the same thing deterministically.)
    const uint64_t torn_size = bytes.size();
    CAPTURE(torn_size);
    CAPTURE(new_end);
    if (new_end != torn_size) CHECK(model.Diff(reader.get()) == "");
    reader.reset();
    std::unique_ptr<Database> again = MustOpen(path, ReadOnly(opts));
    CHECK(model.Diff(again.get()) == "");
    CHECK(MustStats(again.get()).torn_bytes == 0);
  }
}

TEST_CASE("zeros after the last commit are the log's reserve: kept, written over, cut at close") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  TempDir dir;
  std::mt19937_64 rng(seed);
  const std::string path = dir.File("reserve.agentmem");
  TestClock clock;
  const Options opts = TestOptions(Env::Posix(), &clock);  // sync=full
  uint64_t n = 1;
  std::unique_ptr<Database> writer = MustOpen(path, opts);
  Driver d(writer.get(), &clock);
  WriteHistory(d, rng, &n);
  // The writer's commits leave zeros after the last one, which are not torn.
  uint64_t end = MustStats(writer.get()).file_bytes;
  const uint64_t size = std::filesystem::file_size(path);
  CHECK(size > end);
  CHECK(ZerosFrom(ReadFileBytes(path), end));
  CHECK(MustStats(writer.get()).torn_bytes == 0);

  // A reader sees each commit written over them, the file's size unchanged.
  std::unique_ptr<Database> reader = MustOpen(path, ReadOnly(opts));
  CHECK(d.acked().Diff(reader.get()) == "");
  CHECK(MustStats(reader.get()).torn_bytes == 0);
  for (int i = 0; i < 3; i++) {
    REQUIRE(d.Remember(RandomEpisode(rng, kDim, n++)).ok());
    CHECK(d.acked().Diff(reader.get()) == "");
    CHECK(MustStats(reader.get()).file_bytes > end);
    end = MustStats(reader.get()).file_bytes;
    CHECK(std::filesystem::file_size(path) == size);
  }
  CHECK(d.errors().empty());

  // A clean close cuts the reserve off.
  REQUIRE(writer->Close().ok());
  CHECK(std::filesystem::file_size(path) == end);
  CHECK(d.acked().Diff(reader.get()) == "");

  // Zeros left by a writer that never closed: a reader keeps them; the next
  // writer commits over them and its close cuts the rest.
  const std::string closed = ReadFileBytes(path);
  WriteFileBytes(path, closed + std::string(20000, '\0'));
  {
    std::unique_ptr<Database> r2 = MustOpen(path, ReadOnly(opts));
    CHECK(d.acked().Diff(r2.get()) == "");
    CHECK(MustStats(r2.get()).torn_bytes == 0);
  }
  CHECK(std::filesystem::file_size(path) == end + 20000);
  std::unique_ptr<Database> w2 = MustOpen(path, opts);
  Driver d2(w2.get(), &clock);
  d2.mutable_acked() = d.acked();
  REQUIRE(d2.Remember(RandomEpisode(rng, kDim, n++)).ok());
  const uint64_t end2 = MustStats(w2.get()).file_bytes;
  REQUIRE(end2 < end + 20000);  // the commit fits in the zeros
  CHECK(std::filesystem::file_size(path) == end + 20000);
  CHECK(ReadFileBytes(path).substr(0, end).substr(format::kFirstPageOffset) ==
        closed.substr(format::kFirstPageOffset));
  CHECK(d2.acked().Diff(reader.get()) == "");
  REQUIRE(w2->Close().ok());
  CHECK(std::filesystem::file_size(path) == end2);
  std::unique_ptr<Database> fresh = MustOpen(path, ReadOnly(opts));
  CHECK(d2.acked().Diff(fresh.get()) == "");
}

TEST_CASE("a reader moves forward when a new commit ends exactly where a torn tail ended") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::unique_ptr<Env> env = engine::NewMemEnv();
  TestClock clock;
  uint64_t n = 1;
  Oracle committed;
  {
    std::unique_ptr<Database> db = MustOpen(kPath, TestOptions(env.get(), &clock));
    Driver d(db.get(), &clock);
    WriteHistory(d, rng, &n);
    committed = d.acked();
    REQUIRE(db->Close().ok());
  }
  const std::string bytes = EnvRead(env.get(), kPath);
  const EpisodeRecord next = RandomEpisode(rng, kDim, n++);

  // How long the next commit will be: a dry run on a copy, same clock.
  uint64_t commit_bytes = 0;
  {
    std::unique_ptr<Env> copy = MemEnvWith(bytes);
    TestClock c2 = clock;
    std::unique_ptr<Database> db = MustOpen(kPath, TestOptions(copy.get(), &c2));
    Driver d(db.get(), &c2);
    d.mutable_acked() = committed;
    REQUIRE(d.Remember(next).ok());
    commit_bytes = MustStats(db.get()).file_bytes - bytes.size();
  }

  // A torn tail of exactly that many bytes (half a page of garbage, rest zero).
  std::string torn = bytes;
  for (uint64_t i = 0; i < commit_bytes; i++) torn += static_cast<char>(i < 24 ? rng() : 0);
  std::unique_ptr<Env> e = MemEnvWith(torn);
  Options opts = TestOptions(e.get(), &clock);
  std::unique_ptr<Database> reader = MustOpen(kPath, ReadOnly(opts));
  CHECK(committed.Diff(reader.get()) == "");
  CHECK(MustStats(reader.get()).torn_bytes == commit_bytes);

  std::unique_ptr<Database> writer = MustOpen(kPath, opts);
  Driver d(writer.get(), &clock);
  d.mutable_acked() = committed;
  REQUIRE(d.Remember(next).ok());
  REQUIRE(MustStats(writer.get()).file_bytes == torn.size());  // same size as before the cut
  REQUIRE(writer->Close().ok());

  // The reader must see the new commit, as a fresh reader does.
  std::unique_ptr<Database> fresh = MustOpen(kPath, ReadOnly(opts));
  CHECK(d.acked().Diff(fresh.get()) == "");
  CHECK(d.acked().Diff(reader.get()) == "");
  EpisodeRecord got;
  Status s = reader->GetEpisode(d.acked().next_episode_id() - 1, &got);
  CHECK_MESSAGE(s.ok(), s.ToString());
}

TEST_CASE("a page copied to another offset is detected") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  TempDir dir;
  std::mt19937_64 rng(seed);
  const std::string path = dir.File("copy.agentmem");
  uint64_t n = 1;
  const std::string bytes = BuildReference(Env::Posix(), path, rng, &n).bytes;
  TestClock clock;
  Options opts = TestOptions(Env::Posix(), &clock);
  const std::vector<PageSpan> pages = ListPages(bytes);
  const int last_txn = pages.back().txn;
  REQUIRE(last_txn >= 4);

  // Every (source, target) pair with the target before the last transaction's
  // commit and at least one intact commit after the overwritten bytes.
  int pairs = 0;
  for (const PageSpan& target : pages) {
    if (target.txn >= last_txn - 1) continue;
    for (const PageSpan& source : pages) {
      if (source.offset == target.offset) continue;
      CAPTURE(source.offset);
      CAPTURE(target.offset);
      std::string damaged = bytes;
      uint64_t len = std::min<uint64_t>(source.size, bytes.size() - target.offset);
      damaged.replace(target.offset, len, bytes.substr(source.offset, len));
      // The copy must leave a later commit intact for this to be damage.
      if (target.offset + len > pages.back().offset) continue;
      WriteFileBytes(path, damaged);
      std::unique_ptr<Database> db;
      Status s = Database::Open(path, ReadOnly(opts), &db);
      CHECK_MESSAGE(s.code() == kCorruptPage, s.ToString());
      CHECK(s.page_no() == static_cast<int64_t>(target.offset / 16));
      pairs++;
    }
  }
  CHECK(pairs > 20);

  // A page of another file (another salt) at the same offset: same content,
  // same page number, still detected.
  std::mt19937_64 rng2(seed);
  uint64_t n2 = 1;
  const std::string foreign =
      BuildReference(Env::Posix(), dir.File("other.agentmem"), rng2, &n2, kSalt + 1).bytes;
  REQUIRE(foreign.size() == bytes.size());
  int foreign_pages = 0;
  for (const PageSpan& p : pages) {
    if (p.txn >= last_txn) continue;
    CAPTURE(p.offset);
    std::string damaged = bytes;
    damaged.replace(p.offset, p.size, foreign.substr(p.offset, p.size));
    REQUIRE(damaged != bytes);
    WriteFileBytes(path, damaged);
    std::unique_ptr<Database> db;
    Status s = Database::Open(path, ReadOnly(opts), &db);
    CHECK_MESSAGE(s.code() == kCorruptPage, s.ToString());
    CHECK(s.page_no() == static_cast<int64_t>(p.offset / 16));
    foreign_pages++;
  }
  MESSAGE(pairs << " page-over-page copies and " << foreign_pages
                << " pages from another file detected");
}

// ------------------------------------------------------------------ R1

// One step of the crash workload: one transaction.
struct Step {
  enum Kind { kEpisode, kBatch, kBlock, kFact } kind = kEpisode;
  std::vector<EpisodeRecord> episodes;
  std::optional<format::BlockRecord> block;
  std::optional<format::FactRecord> fact;
};

std::vector<Step> CrashWorkload(uint64_t seed, int commits) {
  std::mt19937_64 rng(seed);
  std::vector<Step> steps;
  uint64_t n = 1;
  for (int i = 0; i < commits; i++) {
    Step s;
    int r = static_cast<int>(rng() % 100);
    if (r < 45) {
      s.kind = Step::kEpisode;
      s.episodes.push_back(RandomEpisode(rng, kDim, n++));
    } else if (r < 65) {
      s.kind = Step::kBatch;
      int k = 5 + static_cast<int>(rng() % 16);
      for (int j = 0; j < k; j++) s.episodes.push_back(RandomEpisode(rng, kDim, n++));
      if (rng() % 2) s.block = RandomBlock(rng, n++);
      if (rng() % 2) s.fact = RandomFact(rng, n++);
    } else if (r < 85) {
      s.kind = Step::kBlock;
      s.block = RandomBlock(rng, n++);
    } else {
      s.kind = Step::kFact;
      s.fact = RandomFact(rng, n++);
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

// Runs steps [from, to) until the first failed call (the simulated power loss).
Status RunSteps(Driver& d, const std::vector<Step>& steps, size_t from = 0, size_t to = SIZE_MAX) {
  for (size_t i = from; i < steps.size() && i < to; i++) {
    const Step& st = steps[i];
    Status s;
    switch (st.kind) {
      case Step::kEpisode:
        s = d.Remember(st.episodes[0]);
        break;
      case Step::kBlock:
        s = d.SetBlock(*st.block);
        break;
      case Step::kFact:
        s = d.AssertFact(*st.fact);
        break;
      case Step::kBatch:
        s = d.Begin();
        for (const EpisodeRecord& e : st.episodes)
          if (s.ok()) s = d.Remember(e);
        if (s.ok() && st.block) s = d.SetBlock(*st.block);
        if (s.ok() && st.fact) s = d.AssertFact(*st.fact);
        if (s.ok()) {
          s = d.Commit();
        } else if (d.in_transaction()) {
          d.Rollback().IgnoreError();
        }
        break;
    }
    if (!s.ok()) return s;
  }
  return Status::OK();
}

// What a clean run of the workload leaves: the runs are deterministic (fixed
// salt, test clock), so every acknowledged commit must survive byte for byte.
struct CleanRun {
  uint64_t syncs = 0;         // by the workload and its Close()
  uint64_t commit_syncs = 0;  // by the workload alone
  std::string bytes;
  std::vector<uint64_t> end;  // [i] = file end after the first i commits
};

struct CrashTally {
  uint64_t cycles = 0, failed_opens = 0, lost = 0, in_doubt_present = 0, in_doubt_absent = 0;
};

// After a crash: reopens on `env` and checks that the file holds `acked`, or
// `acked` plus one of `in_doubt` wholly. On success *db is open and *found is
// the state the file holds.
bool ReopenAfterCrash(Env* env, TestClock* clock, const Oracle& acked,
                      const std::vector<Txn>& in_doubt, CrashTally* tally,
                      std::unique_ptr<Database>* db, Oracle* found) {
  tally->cycles++;
  Status s = Database::Open(kPath, TestOptions(env, clock), db);
  if (!s.ok()) {
    tally->failed_opens++;
    FAIL_CHECK("reopen after the crash failed: " << s.ToString());
    return false;
  }
  std::string why;
  int which = -1;
  if (!MatchesAckedOrOneInDoubt(db->get(), acked, in_doubt, &why, &which)) {
    tally->lost++;
    FAIL_CHECK(why);
    return false;
  }
  if (!in_doubt.empty()) (which >= 0 ? tally->in_doubt_present : tally->in_doubt_absent)++;
  *found = which >= 0 ? acked.With(in_doubt[static_cast<size_t>(which)]) : acked;
  CHECK(MustStats(db->get()).commits == found->commits());  // and no empty commit appeared
  return true;
}

// One crash point: the workload (then Close) runs until its (k+1)-th sync
// fails -- the power goes out after the k-th returned -- and `policy` decides
// what reached the disk. Then, on the recovered file, a second power loss at each sync of the
// first commit after recovery (the one that cuts any torn tail: one or two
// syncs, invariant (7)), each followed by one more write that must stick.
void CrashCycle(const std::vector<Step>& steps, const CleanRun& clean, uint64_t k,
                CrashPolicy policy, uint64_t crash_seed, const EpisodeRecord (&post)[2],
                CrashTally* tally) {
  std::unique_ptr<Env> base = engine::NewMemEnv();
  TestClock clock;
  Oracle recovered;
  {
    FaultEnv fenv(base.get());
    fenv.FailAt(k + 1, Fault::kEio, /*persistent=*/true, kOpSync);
    std::unique_ptr<Database> db = MustOpen(kPath, TestOptions(&fenv, &clock));
    Driver d(db.get(), &clock);
    Status s = RunSteps(d, steps);
    CHECK(s.ok() == (k >= clean.commit_syncs));
    if (s.ok()) s = db->Close();
    CHECK(s.ok() == (k == clean.syncs));
    CHECK(d.errors().empty());
    CHECK(d.in_doubt().size() <= 1);
    fenv.SimulateCrash(policy, crash_seed);
    db.reset();
    // Every acknowledged commit's pages are on "disk", byte for byte (the
    // superblocks before the first page are the only bytes rewritten in place).
    const uint64_t acked_end = clean.end[static_cast<size_t>(d.acked().commits() - 1)];
    const std::string crashed = EnvRead(base.get(), kPath);
    const uint64_t first = format::kFirstPageOffset;
    CHECK(crashed.size() >= acked_end);
    CHECK(crashed.compare(first, acked_end - first, clean.bytes, first, acked_end - first) == 0);
    if (!ReopenAfterCrash(base.get(), &clock, d.acked(), d.in_doubt(), tally, &db, &recovered)) {
      return;
    }
  }
  const std::string file = EnvRead(base.get(), kPath);
  for (uint64_t j = 1; j <= 2; j++) {
    CAPTURE(j);
    std::unique_ptr<Env> env = MemEnvWith(file);
    TestClock c2 = clock;
    Oracle model;
    std::unique_ptr<Database> db;
    {
      FaultEnv fenv(env.get());
      fenv.FailAt(j, Fault::kEio, /*persistent=*/true, kOpSync);
      db = MustOpen(kPath, TestOptions(&fenv, &c2));
      Driver d(db.get(), &c2);
      d.mutable_acked() = recovered;
      Status s = d.Remember(post[0]);
      CHECK((s.ok() || s.code() == kIoErrFsync));
      CHECK(s.ok() == (fenv.faults_hit() == 0));
      CHECK(d.errors().empty());
      fenv.SimulateCrash(policy, crash_seed + j);
      db.reset();
      if (!ReopenAfterCrash(env.get(), &c2, d.acked(), d.in_doubt(), tally, &db, &model)) return;
    }
    Driver after(db.get(), &c2);
    after.mutable_acked() = model;
    Status s = after.Remember(post[1]);
    CHECK_MESSAGE(s.ok(), s.ToString());
    CHECK(after.errors().empty());
    REQUIRE(db->Close().ok());
    db = MustOpen(kPath, TestOptions(env.get(), &c2));
    CHECK(after.acked().Diff(db.get()) == "");
  }
}

TEST_CASE("a simulated power loss at every sync point loses no acknowledged commit") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  constexpr int kCommits = 60;
  constexpr int kSeeds = 2;
  const std::vector<Step> steps = CrashWorkload(seed, kCommits);
  std::mt19937_64 post_rng(seed + 1);
  const EpisodeRecord post[2] = {RandomEpisode(post_rng, kDim, 100000),
                                 RandomEpisode(post_rng, kDim, 100001)};
  auto start = std::chrono::steady_clock::now();

  // A clean run counts the syncs: one per commit, plus the one-time sync when
  // the handle first takes the write lock if its file had bytes not yet known
  // to be synced (database.cc invariant (7)).
  CleanRun clean;
  {
    std::unique_ptr<Env> base = engine::NewMemEnv();
    FaultEnv fenv(base.get());
    TestClock clock;
    std::unique_ptr<Database> db = MustOpen(kPath, TestOptions(&fenv, &clock));
    Driver d(db.get(), &clock);
    clean.end.push_back(MustStats(db.get()).file_bytes);
    for (size_t i = 0; i < steps.size(); i++) {
      REQUIRE(RunSteps(d, steps, i, i + 1).ok());
      clean.end.push_back(MustStats(db.get()).file_bytes);
    }
    CHECK(d.errors().empty());
    REQUIRE(d.acked().commits() == kCommits + 1);
    clean.commit_syncs = fenv.syncs();
    CHECK(clean.commit_syncs >= kCommits);
    CHECK(clean.commit_syncs <= kCommits + 1);
    clean.bytes = EnvRead(base.get(), kPath);
    REQUIRE(ZerosFrom(clean.bytes, clean.end.back()));  // the log's reserve after its end
    REQUIRE(db->Close().ok());
    clean.syncs = fenv.syncs();
  }

  const CrashPolicy policies[] = {CrashPolicy::kDropAll, CrashPolicy::kKeepPrefix,
                                  CrashPolicy::kKeepRandomSubset, CrashPolicy::kTearLast,
                                  CrashPolicy::kGarbageSectors};
  CrashTally tally;
  for (uint64_t k = 0; k <= clean.syncs; k++) {
    for (CrashPolicy policy : policies) {
      for (int si = 0; si < kSeeds; si++) {
        const uint64_t crash_seed = seed * 1000003 + k * 101 + static_cast<uint64_t>(policy) * 7 +
                                    static_cast<uint64_t>(si);
        CAPTURE(k);
        const std::string policy_name = CrashPolicyName(policy);
        CAPTURE(policy_name);
        CAPTURE(crash_seed);
        CrashCycle(steps, clean, k, policy, crash_seed, post, &tally);
      }
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(tally.failed_opens == 0);
  CHECK(tally.lost == 0);
  MESSAGE(tally.cycles << " crash-reopen cycles (" << clean.syncs + 1
                       << " crash points x 5 policies x " << kSeeds
                       << " seeds, each followed by a second crash at each sync of the first "
                       << "commit after recovery) in " << secs
                       << " s; in-doubt transaction present " << tally.in_doubt_present
                       << " times, absent " << tally.in_doubt_absent << " times; failed opens "
                       << tally.failed_opens << ", lost or partial " << tally.lost);
}

TEST_CASE(
    "under sync=normal a simulated OS crash loses only commits since the last close, from the "
    "end") {
  const uint64_t seed = Seed();
  CAPTURE(seed);
  constexpr int kCommits = 40;
  constexpr size_t kClose = 20;  // the workload closes and reopens after this many commits
  constexpr int kSeeds = 2;
  const std::vector<Step> steps = CrashWorkload(seed ^ 0x9e3779b97f4a7c15ULL, kCommits);
  std::mt19937_64 post_rng(seed + 2);
  const EpisodeRecord post_crash = RandomEpisode(post_rng, kDim, 100000);
  auto records = [](uint64_t episodes, uint64_t versions, uint64_t facts) {
    return episodes + versions + facts;
  };

  // The model after each prefix of the workload.
  std::vector<Oracle> prefix;
  std::vector<uint64_t> prefix_records;
  {
    std::unique_ptr<Env> base = engine::NewMemEnv();
    TestClock clock;
    std::unique_ptr<Database> db =
        MustOpen(kPath, TestOptions(base.get(), &clock, SyncMode::kNormal));
    Driver d(db.get(), &clock);
    for (size_t i = 0; i <= steps.size(); i++) {
      if (i > 0) REQUIRE(RunSteps(d, steps, i - 1, i).ok());
      prefix.push_back(d.acked());
      Stats st = MustStats(db.get());
      prefix_records.push_back(records(st.episodes, st.block_versions, st.facts));
    }
  }

  const CrashPolicy policies[] = {CrashPolicy::kDropAll, CrashPolicy::kKeepPrefix,
                                  CrashPolicy::kKeepRandomSubset, CrashPolicy::kTearLast,
                                  CrashPolicy::kGarbageSectors};
  uint64_t cycles = 0, kept = 0, written = 0;
  for (size_t j = 0; j <= steps.size(); j++) {
    for (CrashPolicy policy : policies) {
      for (int si = 0; si < kSeeds; si++) {
        const uint64_t crash_seed =
            seed * 7919 + j * 31 + static_cast<uint64_t>(policy) * 3 + static_cast<uint64_t>(si);
        CAPTURE(j);
        const std::string policy_name = CrashPolicyName(policy);
        CAPTURE(policy_name);
        CAPTURE(crash_seed);
        std::unique_ptr<Env> base = engine::NewMemEnv();
        FaultEnv fenv(base.get());
        TestClock clock;
        Options opts = TestOptions(&fenv, &clock, SyncMode::kNormal);
        std::unique_ptr<Database> db = MustOpen(kPath, opts);
        Driver d(db.get(), &clock);
        REQUIRE(RunSteps(d, steps, 0, std::min(j, kClose)).ok());
        if (j >= kClose) {
          REQUIRE(db->Close().ok());  // everything so far is durable
          db = MustOpen(kPath, opts);
          d.set_db(db.get());
          REQUIRE(RunSteps(d, steps, kClose, j).ok());
        }
        fenv.SimulateCrash(policy, crash_seed);
        db.reset();
        cycles++;

        Options base_opts = TestOptions(base.get(), &clock, SyncMode::kNormal);
        Status os = Database::Open(kPath, base_opts, &db);
        REQUIRE_MESSAGE(os.ok(), os.ToString());  // never a corrupt file
        Stats st = MustStats(db.get());
        uint64_t got = records(st.episodes, st.block_versions, st.facts);
        auto it = std::find(prefix_records.begin(), prefix_records.end(), got);
        REQUIRE_MESSAGE(it != prefix_records.end(),
                        "recovered " << got << " records: no prefix has that many");
        const size_t m = static_cast<size_t>(it - prefix_records.begin());
        CHECK(m <= j);
        if (j >= kClose) CHECK(m >= kClose);
        CHECK(prefix[m].Diff(db.get()) == "");  // a whole prefix of the commits
        kept += m;
        written += j;

        Driver after(db.get(), &clock);
        after.mutable_acked() = prefix[m];
        Status ws = after.Remember(post_crash);
        CHECK_MESSAGE(ws.ok(), ws.ToString());
        REQUIRE(db->Close().ok());
        db = MustOpen(kPath, base_opts);
        CHECK(after.acked().Diff(db.get()) == "");
      }
    }
  }
  MESSAGE(cycles << " crash-reopen cycles under sync=normal; " << kept << " of " << written
                 << " commits survived in all");
}

TEST_SUITE_END();

}  // namespace
}  // namespace agentmem::test

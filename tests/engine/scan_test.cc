// tests/engine/scan_test.cc -- the recovery scan (engine/storage/scan.cc) driven
// directly over logs built page by page with the format encoders; the open
// of logs whose transactions are well formed but whose records or counters
// disagree with their commit (engine/memory/database.cc, DecodeScanned and
// ApplyScanned); and the commit and recovery work of a handle around them:
// the first writable open, the superblock and checkpoint a close writes,
// Check(). Each case states the rule of docs/format.md §6 it checks: which
// bad page ends the log as a torn tail, and which is damage reported as
// AGENTMEM_CORRUPT_* naming the page.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "engine/storage/scan.h"
#include "format/file_header.h"
#include "format/page.h"
#include "format/records.h"
#include "tests/util/fault_env.h"
#include "tests/util/open_helpers.h"

namespace agentmem::test {
namespace {

using engine::Database;
using engine::ScannedTxn;
using engine::ScanResult;
using format::CommitRecord;
using format::PageType;

constexpr uint64_t kSalt = 0x5ca9f11e0042ULL;
constexpr const char* kPath = "/mem/scan.agentmem";
constexpr uint64_t kFirst = format::kFirstPageOffset;

int64_t PageNo(uint64_t offset) { return static_cast<int64_t>(offset / 16); }

// A file built page by page: the header, superblock A (generation 1, nothing
// vouched for), then whatever pages the test appends.
struct Log {
  std::string bytes;
  uint64_t seq = 0;  // the last commit appended
  CommitRecord last;  // its record (counters as of it)

  Log() {
    format::FileHeader h;
    h.salt = kSalt;
    h.created_at = 1;
    bytes = format::EncodeFileHeader(h);
    bytes.resize(kFirst, '\0');
    format::Superblock sb;
    sb.salt = kSalt;
    sb.generation = 1;
    SetSuperblock(0, sb);
  }
  void SetSuperblock(int slot, const format::Superblock& sb) {
    bytes.replace(format::kSuperblockOffset[slot], format::kSuperblockSize,
                  format::EncodeSuperblock(sb));
  }
  uint64_t size() const { return bytes.size(); }
  uint64_t Page(PageType type, uint32_t count, std::string_view payload, bool compress = false) {
    const uint64_t at = bytes.size();
    bytes += format::EncodePage(type, at, kSalt, count, payload, compress);
    return at;
  }
  // The commit that makes the pages from `start` a transaction: the next
  // sequence number, every byte before the transaction vouched for.
  CommitRecord NextCommit(uint64_t start) const {
    CommitRecord c = last;
    c.commit_seq = seq + 1;
    c.txn_start = start;
    c.durable_through = start;
    c.page_count = 0;
    for (uint64_t pos = start; pos < bytes.size();) {
      format::PageHeader h;
      REQUIRE(format::PeekPageHeader(std::string_view(bytes).substr(pos), pos, kSalt, &h).ok());
      pos += format::PaddedPageSize(h.length);
      c.page_count++;
    }
    c.commit_ts = 1000 + static_cast<int64_t>(seq);
    return c;
  }
  uint64_t Commit(const CommitRecord& c, uint32_t record_count = 1) {
    const uint64_t at = Page(PageType::kCommit, record_count, format::EncodeCommit(c));
    seq = c.commit_seq;
    last = c;
    return at;
  }
  uint64_t Commit(uint64_t start) { return Commit(NextCommit(start)); }
};

std::string Records(const std::vector<std::string>& records) {
  std::string payload;
  for (const std::string& r : records) format::AppendRecord(r, &payload);
  return payload;
}

std::string Episode(uint64_t id, const std::string& text = "hello there") {
  format::EpisodeRecord e;
  e.id = id;
  e.user_id = "ann";
  e.session_id = "s1";
  e.role = "user";
  e.text = text;
  e.ts = static_cast<int64_t>(id);
  std::string r;
  format::EncodeEpisode(e, &r);
  return r;
}

std::string Block(uint64_t version) {
  format::BlockRecord b;
  b.version = version;
  b.user_id = "ann";
  b.name = "notes";
  b.value = "v" + std::to_string(version);
  std::string r;
  format::EncodeBlock(b, &r);
  return r;
}

std::string Fact(uint64_t id) {
  format::FactRecord f;
  f.id = id;
  f.user_id = "ann";
  f.subject = "ann";
  f.predicate = "likes";
  f.object = "tea " + std::to_string(id);
  std::string r;
  format::EncodeFact(f, &r);
  return r;
}

// Appends a transaction of one episodes page holding `ids`, counters moved
// past them. Returns the offset of its first page.
uint64_t EpisodeTxn(Log* log, std::vector<uint64_t> ids) {
  std::vector<std::string> recs;
  for (uint64_t id : ids) recs.push_back(Episode(id));
  const uint64_t start = log->Page(PageType::kEpisodes, static_cast<uint32_t>(recs.size()),
                                   Records(recs));
  CommitRecord c = log->NextCommit(start);
  c.next_episode_id = ids.back() + 1;
  log->Commit(c);
  return start;
}

// The file's first transaction, as a database creates it: the vector space.
Log SpaceLog() {
  Log log;
  format::MetaRecord m;
  m.entries = {{"vector.embedder", "test-hash"}, {"vector.dim", "8"}, {"vector.metric", "cosine"}};
  std::string r;
  format::EncodeMeta(m, &r);
  const uint64_t start = log.Page(PageType::kMeta, 1, Records({r}));
  log.Commit(start);
  return log;
}

struct Scanned {
  Status status;
  ScanResult result;
  std::vector<uint64_t> seqs;            // commit_seq of each applied transaction
  std::vector<std::vector<uint8_t>> types;  // page types of each
  std::vector<size_t> payload_bytes;     // payload bytes of every page applied
};

// Runs ScanLog over `file`.
Scanned ScanFile(engine::File* file, uint64_t vouched = 0, uint64_t from = kFirst,
                 uint64_t seq = 0, uint64_t fail_at_seq = 0) {
  format::FileHeader h;
  h.salt = kSalt;
  Scanned out;
  auto apply = [&](ScannedTxn& t) -> Status {
    if (t.commit.commit_seq == fail_at_seq) {
      return AGENTMEM_CORRUPTION(kCorruptPage, PageNo(t.commit_offset), "refused by the test");
    }
    out.seqs.push_back(t.commit.commit_seq);
    std::vector<uint8_t> types;
    for (const engine::DecodedPage& p : t.pages) {
      types.push_back(p.header.type);
      out.payload_bytes.push_back(p.payload.size());
    }
    out.types.push_back(types);
    return Status::OK();
  };
  out.status = engine::ScanLog(file, h, from, seq, vouched, apply, &out.result);
  return out;
}

Scanned Scan(const std::string& bytes, uint64_t vouched = 0, uint64_t from = kFirst,
             uint64_t seq = 0, uint64_t fail_at_seq = 0) {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, bytes).ok());
  std::unique_ptr<engine::File> file;
  REQUIRE(env->Open(kPath, engine::OpenMode{true}, &file).ok());
  return ScanFile(file.get(), vouched, from, seq, fail_at_seq);
}

// A file that says it is `extra` bytes longer than the bytes it can read:
// what a reader sees when a writer cuts a torn tail between its Size() and
// its reads.
class ShrunkFile : public engine::File {
 public:
  ShrunkFile(std::unique_ptr<engine::File> base, uint64_t extra)
      : base_(std::move(base)), extra_(extra) {}
  Status ReadAt(uint64_t offset, size_t n, std::string* out) override {
    return base_->ReadAt(offset, n, out);
  }
  Status WriteAt(uint64_t offset, std::string_view data) override {
    return base_->WriteAt(offset, data);
  }
  Status Sync() override { return base_->Sync(); }
  Status Truncate(uint64_t size) override { return base_->Truncate(size); }
  Status Size(uint64_t* size) override {
    AGENTMEM_RETURN_IF_ERROR(base_->Size(size));
    *size += extra_;
    return Status::OK();
  }
  Status TryLockWrite(bool* acquired) override { return base_->TryLockWrite(acquired); }
  Status UnlockWrite() override { return base_->UnlockWrite(); }

 private:
  std::unique_ptr<engine::File> base_;
  uint64_t extra_;
};

// The failure every damage case gives: a corruption code naming `offset`'s page.
void CheckDamage(const Scanned& s, int code, uint64_t offset, const char* why) {
  CAPTURE(s.status.ToString());
  CHECK(s.status.code() == code);
  CHECK(s.status.page_no() == PageNo(offset));
  CHECK(s.status.message().find("page " + std::to_string(PageNo(offset))) != std::string::npos);
  CHECK(s.status.message().find(why) != std::string::npos);
  CHECK(s.result.damage);
}

// The outcome of a torn tail: OK, everything up to `end` applied.
void CheckTorn(const Scanned& s, uint64_t end, uint64_t file_size, size_t commits) {
  CAPTURE(s.status.ToString());
  CHECK(s.status.ok());
  CHECK_FALSE(s.result.damage);
  CHECK(s.result.end == end);
  CHECK(s.result.torn_bytes == file_size - end);
  CHECK(s.seqs.size() == commits);
}

// Marks the file as written by a newer version of the format.
void SetNewerWriteVersion(Log* log) {
  format::FileHeader h;
  h.salt = kSalt;
  h.created_at = 1;
  h.write_version = format::kWriteVersion + 1;
  log->bytes.replace(0, format::kHeaderSize, format::EncodeFileHeader(h));
}

engine::Options OpenOptions(engine::Env* env, TestClock* clock, bool read_only = true) {
  engine::Options o = TestOptionsFor(env, clock, engine::SyncMode::kFull, kSalt, 8);
  o.read_only = read_only;
  return o;
}

Status OpenBytes(const std::string& bytes, bool read_only = true) {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, bytes).ok());
  TestClock clock;
  std::unique_ptr<Database> db;
  return Database::Open(kPath, OpenOptions(env.get(), &clock, read_only), &db);
}

}  // namespace

TEST_SUITE_BEGIN("scan");

// ------------------------------------------------------------------ ScanLog

TEST_CASE("a scan applies each valid transaction in order and ends just past the last commit") {
  Log log;
  const uint64_t t1 = EpisodeTxn(&log, {1, 2});
  const uint64_t t2 = log.Page(PageType::kBlocks, 1, Records({Block(1)}));
  log.Page(PageType::kFacts, 1, Records({Fact(1)}));
  log.Commit(t2);
  const uint64_t t3 = log.size();
  log.Commit(t3);  // a transaction of no pages but its commit
  const Scanned s = Scan(log.bytes);
  REQUIRE_MESSAGE(s.status.ok(), s.status.ToString());
  CHECK(s.seqs == std::vector<uint64_t>{1, 2, 3});
  CHECK(s.types[0] == std::vector<uint8_t>{1});
  CHECK(s.types[1] == std::vector<uint8_t>{2, 3});
  CHECK(s.types[2].empty());
  CHECK(s.result.end == log.size());
  CHECK(s.result.commit_seq == 3);
  CHECK(s.result.commits == 3);
  CHECK(s.result.pages == 6);
  CHECK(s.result.file_size == log.size());
  CHECK(s.result.torn_bytes == 0);
  CHECK_FALSE(s.result.damage);
  CHECK(t1 == kFirst);
}

TEST_CASE("a scan that starts after a commit applies only the transactions after it") {
  Log log;
  EpisodeTxn(&log, {1});
  const uint64_t second = log.size();
  EpisodeTxn(&log, {2});
  const uint64_t second_commit = log.size() - format::PaddedPageSize(64);
  EpisodeTxn(&log, {3});
  const Scanned s = Scan(log.bytes, 0, second, 1);
  REQUIRE(s.status.ok());
  CHECK(s.seqs == std::vector<uint64_t>{2, 3});
  CHECK(s.result.commits == 2);
  // Started with the wrong sequence number, the first commit does not
  // follow; the later commit vouches for it, so that is damage.
  const Scanned wrong = Scan(log.bytes, 0, second, 0);
  CheckDamage(wrong, kCorruptPage, second_commit, "does not match its transaction");
  CHECK(wrong.seqs.empty());
  CHECK(wrong.result.commit_seq == 0);
}

TEST_CASE("pages after the last commit are a torn tail, ignored and counted") {
  Log log;
  EpisodeTxn(&log, {1});
  const uint64_t end = log.size();
  SUBCASE("whole pages without their commit") {
    log.Page(PageType::kEpisodes, 1, Records({Episode(2)}));
    log.Page(PageType::kText, 1, "x");
    CheckTorn(Scan(log.bytes), end, log.size(), 1);
  }
  SUBCASE("a page cut short") {
    log.Page(PageType::kEpisodes, 1, Records({Episode(2, std::string(300, 'z'))}));
    log.bytes.resize(log.size() - 100);
    CheckTorn(Scan(log.bytes), end, log.size(), 1);
  }
  SUBCASE("fewer bytes than a page header") {
    log.bytes.append(20, '\x01');
    CheckTorn(Scan(log.bytes), end, log.size(), 1);
  }
  SUBCASE("a whole transaction whose commit page is cut short") {
    const uint64_t start = log.Page(PageType::kEpisodes, 1, Records({Episode(2)}));
    log.Commit(start);
    log.bytes.resize(log.size() - 1);
    CheckTorn(Scan(log.bytes), end, log.size(), 1);
  }
}

TEST_CASE("zeros after the last commit are the log's reserve, and anything else after them a torn tail") {
  Log log;
  EpisodeTxn(&log, {1});
  const uint64_t end = log.size();
  SUBCASE("zeros to the end of the file") {
    log.bytes.append(300000, '\0');
    const Scanned s = Scan(log.bytes);
    REQUIRE_MESSAGE(s.status.ok(), s.status.ToString());
    CHECK(s.result.end == end);
    CHECK(s.result.reserve_bytes == 300000);
    CHECK(s.result.torn_bytes == 0);
    CHECK(s.seqs.size() == 1);
  }
  SUBCASE("zeros, then a byte that is not") {
    log.bytes.append(200000, '\0');
    log.bytes.back() = 1;
    CheckTorn(Scan(log.bytes), end, log.size(), 1);
    CHECK(Scan(log.bytes).result.reserve_bytes == 0);
  }
  SUBCASE("zeros, then a transaction whose first page never landed") {
    const uint64_t start = EpisodeTxn(&log, {2});
    std::fill(log.bytes.begin() + static_cast<std::ptrdiff_t>(start),
              log.bytes.begin() + static_cast<std::ptrdiff_t>(start + 48), '\0');
    CheckTorn(Scan(log.bytes), end, log.size(), 1);
  }
  SUBCASE("zeros where the superblock vouches for bytes are damage") {
    log.bytes.append(4096, '\0');
    const Scanned s = Scan(log.bytes, end + 16);
    CHECK(s.status.code() == kCorruptPage);
    CHECK(s.status.page_no() == PageNo(end));
    CHECK(s.result.damage);
  }
}

TEST_CASE("an error from applying a transaction stops the scan and is returned") {
  Log log;
  EpisodeTxn(&log, {1});
  const uint64_t end1 = log.size();
  EpisodeTxn(&log, {2});
  EpisodeTxn(&log, {3});
  const Scanned s = Scan(log.bytes, 0, kFirst, 0, /*fail_at_seq=*/2);
  CHECK(s.status.code() == kCorruptPage);
  CHECK(s.status.message().find("refused by the test") != std::string::npos);
  CHECK(s.seqs == std::vector<uint64_t>{1});
  CHECK(s.result.end == end1);
  CHECK(s.result.commit_seq == 1);
  CHECK_FALSE(s.result.damage);
}

TEST_CASE("a commit page whose record count is not 1 ends the log, or is damage when vouched for") {
  Log log;
  EpisodeTxn(&log, {1});
  const uint64_t end = log.size();
  const uint64_t start = log.Page(PageType::kEpisodes, 1, Records({Episode(2)}));
  CommitRecord c = log.NextCommit(start);
  c.next_episode_id = 3;
  const uint64_t commit = log.Commit(c, /*record_count=*/2);
  CheckTorn(Scan(log.bytes), end, log.size(), 1);
  CheckDamage(Scan(log.bytes, log.size()), kCorruptPage, commit, "record count 2, not 1");
}

TEST_CASE("a commit page that does not match its transaction ends the log, or is damage when vouched for") {
  struct Case {
    const char* name;
    void (*change)(CommitRecord*);
  };
  const Case cases[] = {
      {"a sequence number skipped", [](CommitRecord* c) { c->commit_seq++; }},
      {"a sequence number repeated", [](CommitRecord* c) { c->commit_seq--; }},
      {"txn_start after its first page", [](CommitRecord* c) { c->txn_start += 16 * 4; }},
      {"txn_start before its first page", [](CommitRecord* c) { c->txn_start -= 16; }},
      {"a page count too small", [](CommitRecord* c) { c->page_count--; }},
      {"a page count too large", [](CommitRecord* c) { c->page_count++; }},
      {"durable_through past its own start", [](CommitRecord* c) { c->durable_through += 16; }},
  };
  for (const Case& k : cases) {
    CAPTURE(k.name);
    Log log;
    EpisodeTxn(&log, {1});
    const uint64_t end = log.size();
    const uint64_t start = log.Page(PageType::kEpisodes, 1, Records({Episode(2)}));
    log.Page(PageType::kText, 1, Records({"t"}));
    CommitRecord c = log.NextCommit(start);
    c.next_episode_id = 3;
    k.change(&c);
    const uint64_t commit = log.Commit(c);
    CheckTorn(Scan(log.bytes), end, log.size(), 1);
    CheckDamage(Scan(log.bytes, log.size()), kCorruptPage, commit, "does not match its transaction");
  }
}

TEST_CASE("a commit page whose record is not 64 bytes ends the log, or is damage when vouched for") {
  Log log;
  EpisodeTxn(&log, {1});
  const uint64_t end = log.size();
  const uint64_t commit =
      log.Page(PageType::kCommit, 1, format::EncodeCommit(log.NextCommit(end)).substr(0, 63));
  CheckTorn(Scan(log.bytes), end, log.size(), 1);
  CheckDamage(Scan(log.bytes, log.size()), kCorruptPage, commit, "malformed commit record");
}

TEST_CASE("a bad page before bytes the superblock vouches for is damage naming the page") {
  Log log;
  EpisodeTxn(&log, {1});
  const uint64_t bad = EpisodeTxn(&log, {2});
  log.bytes[bad + 40] ^= 0x04;
  CheckTorn(Scan(log.bytes), bad, log.size(), 1);
  CheckDamage(Scan(log.bytes, bad + 16), kCorruptChecksum, bad, "checksum mismatch");
}

TEST_CASE("a file that ends before the bytes its superblock vouches for was cut short") {
  Log log;
  EpisodeTxn(&log, {1});
  EpisodeTxn(&log, {2});
  const Scanned s = Scan(log.bytes, log.size() + 16);
  CHECK(s.status.code() == kCorruptPage);
  CHECK(s.status.page_no() == PageNo(log.size()));
  CHECK(s.status.message().find("the file was cut short") != std::string::npos);
  CHECK(s.result.damage);
  CHECK(s.seqs.size() == 2);  // what was there was applied first
  CHECK(Scan(log.bytes, log.size()).status.ok());
}

TEST_CASE("a later commit whose durable_through covers a bad page makes it damage") {
  Log log;
  EpisodeTxn(&log, {1});
  const uint64_t bad = EpisodeTxn(&log, {2});
  EpisodeTxn(&log, {3});  // durable_through = its own start, past the bad page
  log.bytes[bad + 4] = 0;  // an unknown page type: the header check fails
  const Scanned s = Scan(log.bytes);
  CheckDamage(s, kCorruptPage, bad, "invalid header");
  CHECK(s.seqs.size() == 1);
}

TEST_CASE("a later commit that does not vouch for the bad page leaves it a torn tail") {
  // The probe for a later commit considers only commit pages of this file at
  // their own place that validate, and only durable_through values that lie
  // past the bad page and before that commit.
  struct Case {
    const char* name;
    uint64_t durable_through;  // of the later commit; 0 = the bad page's offset
    bool vouches;
  };
  for (const Case& k : {Case{"durable_through before the bad page", kFirst, false},
                        Case{"durable_through exactly at the bad page", 0, false},
                        Case{"durable_through past the later commit itself", UINT64_MAX, false},
                        Case{"durable_through between the bad page and the commit", 1, true}}) {
    CAPTURE(k.name);
    Log log;
    EpisodeTxn(&log, {1});
    const uint64_t end = log.size();
    const uint64_t bad = log.Page(PageType::kEpisodes, 1, Records({Episode(2)}));
    log.bytes[bad + 50] ^= 1;
    const uint64_t start = log.Page(PageType::kEpisodes, 1, Records({Episode(3)}));
    CommitRecord c = log.NextCommit(start);
    c.durable_through = k.durable_through == 0   ? bad
                        : k.durable_through == 1 ? bad + 16
                                                 : k.durable_through;
    log.Commit(c);
    const Scanned s = Scan(log.bytes);
    if (k.vouches) {
      CheckDamage(s, kCorruptChecksum, bad, "checksum mismatch");
    } else {
      CheckTorn(s, end, log.size(), 1);
    }
  }
}

TEST_CASE("a later commit page that fails its own checks vouches for nothing") {
  Log log;
  EpisodeTxn(&log, {1});
  const uint64_t end = log.size();
  const uint64_t bad = log.Page(PageType::kEpisodes, 1, Records({Episode(2)}));
  log.bytes[bad + 50] ^= 1;
  CommitRecord c = log.NextCommit(log.size());
  c.durable_through = bad + 16;
  SUBCASE("its checksum fails") {
    const uint64_t at = log.Commit(c);
    log.bytes[at + 40] ^= 1;
  }
  SUBCASE("its record does not decode") {
    log.Page(PageType::kCommit, 1, format::EncodeCommit(c) + "x");
  }
  SUBCASE("it is a commit page of another file") {
    log.bytes += format::EncodePage(PageType::kCommit, log.size(), kSalt + 1, 1,
                                    format::EncodeCommit(c), false);
  }
  SUBCASE("it was written for another offset") {
    log.bytes += format::EncodePage(PageType::kCommit, log.size() + 16, kSalt, 1,
                                    format::EncodeCommit(c), false);
  }
  CheckTorn(Scan(log.bytes), end, log.size(), 1);
}

TEST_CASE("a scan checks a checkpoint page's checksum and skips its payload") {
  Log log;
  EpisodeTxn(&log, {1});
  // A checkpoint page larger than the scan's read window, checked a window
  // at a time, then a small one.
  std::string big(2'500'000, '\0');
  for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>(i * 131 % 251);
  const uint64_t start = log.Page(PageType::kCheckpoint, 1, big);
  log.Page(PageType::kCheckpoint, 1, "state-ish");
  log.Commit(start);
  const Scanned s = Scan(log.bytes);
  REQUIRE_MESSAGE(s.status.ok(), s.status.ToString());
  REQUIRE(s.seqs == std::vector<uint64_t>{1, 2});
  CHECK(s.types[1] == std::vector<uint8_t>{8, 8});
  // The episodes page of transaction 1 keeps its payload; checkpoint pages do not.
  REQUIRE(s.payload_bytes.size() == 3);
  CHECK(s.payload_bytes[0] > 0);
  CHECK(s.payload_bytes[1] == 0);
  CHECK(s.payload_bytes[2] == 0);
  SUBCASE("a byte flipped past the first window is damage when vouched for") {
    log.bytes[start + 32 + 1'500'000] ^= 0x20;
    CheckTorn(Scan(log.bytes), start, log.size(), 1);
    CheckDamage(Scan(log.bytes, log.size()), kCorruptChecksum, start, "checksum mismatch");
  }
  SUBCASE("cut short inside the page") {
    log.bytes.resize(start + 2'000'000);
    CheckTorn(Scan(log.bytes), start, log.size(), 1);
    CheckDamage(Scan(log.bytes, log.size() + 1), kCorruptPage, start, "cut short");
  }
  SUBCASE("cut short exactly where a read window ends") {
    log.bytes.resize(start + 4 + (1u << 20));
    CheckTorn(Scan(log.bytes), start, log.size(), 1);
    CheckDamage(Scan(log.bytes, log.size() + 1), kCorruptPage, start, "cut short");
  }
}

TEST_CASE("a checkpoint page stored compressed is refused even with a valid checksum") {
  Log log;
  EpisodeTxn(&log, {1});
  // Numbers: compressible, but not beyond the ratio a reader accepts.
  std::string body;
  for (int i = 0; body.size() < 4000; i++) body += std::to_string(i * 7919 % 1000) + " ";
  const uint64_t start = log.Page(PageType::kCheckpoint, 1, body, true);
  format::PageHeader h;
  REQUIRE(format::PeekPageHeader(std::string_view(log.bytes).substr(start), start, kSalt, &h).ok());
  REQUIRE((h.flags & format::kPageFlagZstd) != 0);
  log.Commit(start);
  CheckTorn(Scan(log.bytes), start, log.size(), 1);
  CheckDamage(Scan(log.bytes, log.size()), kCorruptChecksum, start, "(checkpoint)");
}

TEST_CASE("a file that shrinks under the scan ends the log where its bytes end") {
  Log log;
  EpisodeTxn(&log, {1});
  EpisodeTxn(&log, {2});
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, log.bytes).ok());
  std::unique_ptr<engine::File> base;
  REQUIRE(env->Open(kPath, engine::OpenMode{true}, &base).ok());
  ShrunkFile file(std::move(base), 4096);
  const Scanned s = ScanFile(&file);
  CheckTorn(s, log.size(), log.size() + 4096, 2);
  CHECK(s.result.file_size == log.size() + 4096);
}

TEST_CASE("an I/O error during a scan is returned as it is and nothing counts as applied") {
  Log log;
  EpisodeTxn(&log, {1});
  std::unique_ptr<engine::Env> mem = engine::NewMemEnv();
  FaultEnv env(mem.get());
  REQUIRE(env.CreateAtomic(kPath, log.bytes).ok());
  std::unique_ptr<engine::File> file;
  REQUIRE(env.Open(kPath, engine::OpenMode{true}, &file).ok());
  SUBCASE("reading a page") {
    env.FailAt(1, Fault::kEio, false, kOpRead);
    const Scanned s = ScanFile(file.get());
    CHECK(s.status.code() == kIoErrRead);
    CHECK(s.result.end == kFirst);
    CHECK(s.result.commits == 0);
    CHECK_FALSE(s.result.damage);
  }
  SUBCASE("the size of the file") {
    env.FailAt(1, Fault::kEio, false, kOpSize);
    const Scanned s = ScanFile(file.get(), 0, kFirst, 0);
    CHECK(s.status.primary() == kIoErr);
    CHECK(s.result.end == kFirst);
    CHECK(s.seqs.empty());
  }
}

TEST_CASE("an I/O error while probing past a bad page for a later commit is returned") {
  // The bad page and a later commit header lie in the scan's first read
  // window (1 MiB from the first page); the rest of that commit does not, so
  // reading it needs a read that fails.
  Log log;
  EpisodeTxn(&log, {1});
  const uint64_t bad = log.Page(PageType::kEpisodes, 1, Records({Episode(2)}));
  log.bytes[bad + 50] ^= 1;
  const uint64_t commit_at = kFirst + (1u << 20) - 32;
  log.Page(PageType::kGraph, 1, std::string(commit_at - log.size() - 32, 'x'));
  REQUIRE(log.size() == commit_at);
  CommitRecord c = log.NextCommit(commit_at);
  c.durable_through = bad + 16;
  log.Commit(c);
  std::unique_ptr<engine::Env> mem = engine::NewMemEnv();
  FaultEnv env(mem.get());
  REQUIRE(env.CreateAtomic(kPath, log.bytes).ok());
  std::unique_ptr<engine::File> file;
  REQUIRE(env.Open(kPath, engine::OpenMode{true}, &file).ok());
  // Without a fault the later commit vouches for the bad page.
  CheckDamage(ScanFile(file.get()), kCorruptChecksum, bad, "checksum mismatch");
  env.FailAt(2, Fault::kEio, true, kOpRead);
  const Scanned s = ScanFile(file.get());
  CHECK(s.status.code() == kIoErrRead);
  CHECK(s.seqs.size() == 1);
  CHECK_FALSE(s.result.damage);
}

// ------------------------------------------------------------------ open

TEST_CASE("an open applies a hand-built log and reads its records back") {
  Log log = SpaceLog();
  const uint64_t start = log.Page(PageType::kEpisodes, 2, Records({Episode(1), Episode(2)}));
  log.Page(PageType::kBlocks, 1, Records({Block(1)}));
  log.Page(PageType::kFacts, 1, Records({Fact(1)}));
  CommitRecord c = log.NextCommit(start);
  c.next_episode_id = 3;
  c.next_fact_id = 2;
  c.next_block_version = 2;
  log.Commit(c);
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, log.bytes).ok());
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(env.get(), &clock));
  format::EpisodeRecord e;
  REQUIRE(db->GetEpisode(2, &e).ok());
  CHECK(e.text == "hello there");
  format::BlockRecord b;
  REQUIRE(db->GetBlock("ann", "notes", &b).ok());
  CHECK(b.value == "v1");
  engine::Stats st;
  REQUIRE(db->GetStats(&st).ok());
  CHECK(st.commits == 2);
  CHECK(st.episodes == 2);
  CHECK(st.facts == 1);
  std::vector<std::string> problems;
  REQUIRE(db->Check(&problems).ok());
  CHECK(problems.empty());
}

TEST_CASE("a transaction whose records run behind the counters before it fails the open naming the page") {
  struct Case {
    const char* name;
    PageType type;
    std::string record;
    const char* why;
  };
  // Transaction 2 uses episode 1, block version 1 and fact 1 and moves
  // every counter to 2; transaction 3 then holds the record below.
  const Case cases[] = {
      {"an episode id already used", PageType::kEpisodes, Episode(1), "episode id out of order"},
      {"a block version already used", PageType::kBlocks, Block(1), "block version out of order"},
      {"fact id 0", PageType::kFacts, Fact(0), "fact id out of order"},
  };
  for (const Case& k : cases) {
    CAPTURE(k.name);
    Log log = SpaceLog();
    uint64_t start = log.Page(PageType::kEpisodes, 1, Records({Episode(1)}));
    log.Page(PageType::kBlocks, 1, Records({Block(1)}));
    log.Page(PageType::kFacts, 1, Records({Fact(1)}));
    CommitRecord c = log.NextCommit(start);
    c.next_episode_id = c.next_fact_id = c.next_block_version = 2;
    log.Commit(c);
    start = log.Page(k.type, 1, Records({k.record}));
    log.Commit(start);
    for (bool read_only : {true, false}) {
      CAPTURE(read_only);
      Status s = OpenBytes(log.bytes, read_only);
      CHECK(s.code() == kCorruptPage);
      CHECK(s.page_no() == PageNo(start));
      CHECK(s.message().find(k.why) != std::string::npos);
    }
  }
}

TEST_CASE("a commit whose counters run behind its own records fails the open naming the commit page") {
  struct Case {
    const char* name;
    PageType type;
    std::string record;
  };
  for (const Case& k : {Case{"episodes", PageType::kEpisodes, Episode(1)},
                        Case{"blocks", PageType::kBlocks, Block(1)},
                        Case{"facts", PageType::kFacts, Fact(1)}}) {
    CAPTURE(k.name);
    Log log = SpaceLog();
    const uint64_t start = log.Page(k.type, 1, Records({k.record}));
    const uint64_t commit = log.Commit(start);  // counters still at 1
    Status s = OpenBytes(log.bytes);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == PageNo(commit));
    CHECK(s.message().find("its counters do not match its records") != std::string::npos);
  }
}

TEST_CASE("counters that run ahead of the records are kept: the ids in between are never used") {
  Log log = SpaceLog();
  const uint64_t start = log.Page(PageType::kEpisodes, 1, Records({Episode(1)}));
  CommitRecord c = log.NextCommit(start);
  c.next_episode_id = 10;
  c.next_fact_id = 5;
  c.next_block_version = 7;
  log.Commit(c);
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, log.bytes).ok());
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(env.get(), &clock, false));
  format::EpisodeRecord e;
  e.user_id = "ann";
  e.text = "next one";
  uint64_t id = 0;
  REQUIRE(db->Remember(e, &id).ok());
  CHECK(id == 10);
}

TEST_CASE("a fact record with an id below the counter that no commit created fails the open") {
  // Facts may be written again with their id (a new version), but only ids
  // that exist: a known-looking id that names nothing is damage.
  Log log = SpaceLog();
  uint64_t start = log.Page(PageType::kFacts, 1, Records({Fact(1)}));
  CommitRecord c = log.NextCommit(start);
  c.next_fact_id = 5;  // ids 2..4 skipped, as a VACUUM's copy may leave them
  log.Commit(c);
  start = log.Page(PageType::kFacts, 1, Records({Fact(3)}));
  log.Commit(start);
  Status s = OpenBytes(log.bytes);
  CHECK(s.code() == kCorruptPage);
  CHECK(s.page_no() == PageNo(start));
  CHECK(s.message().find("a new version of fact 3, which does not exist") != std::string::npos);
  // A new version of fact 1 is fine.
  Log ok = SpaceLog();
  start = ok.Page(PageType::kFacts, 1, Records({Fact(1)}));
  c = ok.NextCommit(start);
  c.next_fact_id = 5;
  ok.Commit(c);
  start = ok.Page(PageType::kFacts, 1, Records({Fact(1)}));
  ok.Commit(start);
  CHECK(OpenBytes(ok.bytes).ok());
}

TEST_CASE("a record page whose records do not split as its header says fails the open naming it") {
  Log log = SpaceLog();
  EpisodeTxn(&log, {1});
  const uint64_t start = log.Page(PageType::kEpisodes, 3, Records({Episode(2)}));
  CommitRecord c = log.NextCommit(start);
  c.next_episode_id = 3;
  log.Commit(c);
  Status s = OpenBytes(log.bytes);
  CHECK(s.code() == kCorruptPage);
  CHECK(s.page_no() == PageNo(start));
  CHECK(s.message().find("record lengths do not add up") != std::string::npos);
}

TEST_CASE("an open fails on an empty file, a cut header area and two bad superblocks") {
  SUBCASE("an empty file is not an agentmem database") {
    Status s = OpenBytes("");
    CHECK(s.code() == kNotADb);
  }
  SUBCASE("a file cut inside its first 4096 bytes is corrupt") {
    Log log;
    Status s = OpenBytes(log.bytes.substr(0, 2000));
    CHECK(s.code() == kCorruptHeader);
    CHECK(s.message().find("cut short inside its header") != std::string::npos);
  }
  SUBCASE("both superblocks invalid") {
    Log log = SpaceLog();
    log.bytes[format::kSuperblockOffset[0] + 20] ^= 1;
    Status s = OpenBytes(log.bytes);
    CHECK(s.code() == kCorruptSuperblock);
    CHECK(s.message().find("both superblocks are invalid") != std::string::npos);
    CHECK(s.message().find("bad magic") != std::string::npos);  // slot B was never written
  }
}

TEST_CASE("an open follows the superblock of the higher generation") {
  Log log = SpaceLog();
  EpisodeTxn(&log, {1});
  format::Superblock sb;
  sb.salt = kSalt;
  sb.generation = 1;
  log.SetSuperblock(0, sb);
  sb.durable_through = log.size() + 160;  // vouches for bytes the file lacks
  for (uint64_t generation : {0, 2}) {
    CAPTURE(generation);
    sb.generation = generation;
    log.SetSuperblock(1, sb);
    Status s = OpenBytes(log.bytes);
    if (generation == 0) {
      CHECK(s.ok());
    } else {
      CHECK(s.code() == kCorruptPage);
      CHECK(s.message().find("the file was cut short") != std::string::npos);
    }
  }
}

TEST_CASE("a file whose first transaction never landed gets its settings on the first writable open") {
  Log empty;  // header and superblock, no pages
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, empty.bytes).ok());
  TestClock clock;
  {
    std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(env.get(), &clock, false));
    engine::Stats st;
    REQUIRE(db->GetStats(&st).ok());
    CHECK(st.commits == 1);  // one transaction, not the settings twice
    REQUIRE(db->Close().ok());
  }
  std::unique_ptr<engine::File> f;
  REQUIRE(env->Open(kPath, engine::OpenMode{true}, &f).ok());
  const Scanned s = ScanFile(f.get());
  REQUIRE(s.status.ok());
  REQUIRE(!s.types.empty());
  CHECK(s.types[0] == std::vector<uint8_t>{static_cast<uint8_t>(PageType::kMeta)});
  CHECK(s.types.size() == 1);
  // The settings are the ones asked for: an open that names them succeeds,
  // one that names others is refused.
  engine::Options ro = OpenOptions(env.get(), &clock, true);
  std::unique_ptr<Database> db = MustOpen(kPath, ro);
  ro.space.dim = 16;
  std::unique_ptr<Database> other;
  CHECK(Database::Open(kPath, ro, &other).primary() == kMismatch);
}

TEST_CASE("a file with a newer write version opens, but refuses writes") {
  Log log = SpaceLog();
  SetNewerWriteVersion(&log);
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, log.bytes).ok());
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(env.get(), &clock, false));
  format::EpisodeRecord e;
  e.user_id = "ann";
  e.text = "x";
  uint64_t id = 0;
  Status s = db->Remember(e, &id);
  CHECK(s.code() == kReadOnlyFile);
  CHECK(s.message().find("write version " + std::to_string(format::kWriteVersion + 1)) != std::string::npos);
  // Opened read-only, it reads like any other; a write is refused for that.
  db = MustOpen(kPath, OpenOptions(env.get(), &clock, true));
  engine::Stats st;
  REQUIRE(db->GetStats(&st).ok());
  CHECK(st.commits == 1);
  s = db->Remember(e, &id);
  CHECK(s.code() == kReadOnlyFile);
  CHECK(s.message().find("opened read-only") != std::string::npos);
}

TEST_CASE("a writer that cannot cut a torn tail reports the error and writes nothing more") {
  Log log = SpaceLog();
  const uint64_t end = log.size();
  log.Page(PageType::kEpisodes, 1, Records({Episode(1)}));  // no commit: torn
  std::unique_ptr<engine::Env> mem = engine::NewMemEnv();
  FaultEnv env(mem.get());
  REQUIRE(env.CreateAtomic(kPath, log.bytes).ok());
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(&env, &clock, false));
  env.FailAt(1, Fault::kEio, false, kOpTruncate);
  format::EpisodeRecord e;
  e.user_id = "ann";
  e.text = "x";
  uint64_t id = 0;
  CHECK(db->Remember(e, &id).code() == kIoErrTruncate);
  CHECK(db->Remember(e, &id).code() == kIoErrSticky);
  db.reset();
  // The file is as it was: reopened, the tail is cut and the write lands.
  std::unique_ptr<Database> again = MustOpen(kPath, OpenOptions(mem.get(), &clock, false));
  REQUIRE(again->Remember(e, &id).ok());
  CHECK(id == 1);
  engine::Stats st;
  REQUIRE(again->GetStats(&st).ok());
  CHECK(st.torn_bytes == 0);
  CHECK(st.file_bytes > end);
}

TEST_CASE("check reports damage that a full scan finds as a problem, not as a failure") {
  Log log = SpaceLog();
  const uint64_t first = EpisodeTxn(&log, {1});
  EpisodeTxn(&log, {2});
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, log.bytes).ok());
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(env.get(), &clock));
  std::vector<std::string> problems;
  REQUIRE(db->Check(&problems).ok());
  CHECK(problems.empty());
  {
    std::unique_ptr<engine::File> f;
    REQUIRE(env->Open(kPath, engine::OpenMode{false}, &f).ok());
    std::string byte;
    REQUIRE(f->ReadAt(first + 45, 1, &byte).ok());
    byte[0] ^= 0x10;
    REQUIRE(f->WriteAt(first + 45, byte).ok());
  }
  REQUIRE(db->Check(&problems).ok());
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("page " + std::to_string(PageNo(first))) != std::string::npos);
  CHECK(problems[0].find("AGENTMEM_CORRUPT_CHECKSUM") != std::string::npos);
}

// ------------------------------------------------------------------ superblocks

// The superblock that an open of the file at kPath would use.
format::Superblock NewestSuperblock(engine::Env* env) {
  std::unique_ptr<engine::File> f;
  REQUIRE(env->Open(kPath, engine::OpenMode{true}, &f).ok());
  std::string head;
  REQUIRE(f->ReadAt(0, kFirst, &head).ok());
  format::Superblock best;
  for (uint64_t off : format::kSuperblockOffset) {
    format::Superblock sb;
    if (format::DecodeSuperblock(std::string_view(head).substr(off, 64), kSalt, &sb).ok() &&
        sb.generation >= best.generation) {
      best = sb;
    }
  }
  return best;
}

// The highest valid superblock generation in the file at kPath (0: none).
uint64_t NewestGeneration(engine::Env* env) { return NewestSuperblock(env).generation; }

format::EpisodeRecord Note(const char* text) {
  format::EpisodeRecord e;
  e.user_id = "ann";
  e.text = text;
  return e;
}

TEST_CASE("a close whose superblock write or sync fails reports it and the file reopens whole") {
  for (engine::SyncMode sync : {engine::SyncMode::kFull, engine::SyncMode::kNormal}) {
    for (uint32_t op : {uint32_t{kOpWrite}, uint32_t{kOpSync}}) {
      CAPTURE(static_cast<int>(sync));
      CAPTURE(op);
      std::unique_ptr<engine::Env> mem = engine::NewMemEnv();
      FaultEnv env(mem.get());
      TestClock clock;
      engine::Options opts = OpenOptions(&env, &clock, false);
      opts.sync = sync;
      std::unique_ptr<Database> db = MustOpen(kPath, opts);
      uint64_t id = 0;
      REQUIRE(db->Remember(Note("kept through a failed close"), &id).ok());
      const uint64_t generation = NewestGeneration(mem.get());
      env.FailAt(1, Fault::kEio, false, op);
      Status s = db->Close();
      CHECK(s.code() == (op == kOpWrite ? kIoErrWrite : kIoErrFsync));
      db.reset();
      if (op == kOpWrite) CHECK(NewestGeneration(mem.get()) == generation);
      std::unique_ptr<Database> again = MustOpen(kPath, OpenOptions(mem.get(), &clock, true));
      format::EpisodeRecord e;
      REQUIRE(again->GetEpisode(id, &e).ok());
      CHECK(e.text == "kept through a failed close");
    }
  }
}

TEST_CASE("a close while another handle holds the write lock leaves the superblock to that handle") {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  TestClock clock;
  std::unique_ptr<Database> a = MustOpen(kPath, OpenOptions(env.get(), &clock, false));
  std::unique_ptr<Database> b = MustOpen(kPath, OpenOptions(env.get(), &clock, false));
  uint64_t id = 0;
  REQUIRE(b->Remember(Note("from b"), &id).ok());
  REQUIRE(a->Begin().ok());
  REQUIRE(a->Remember(Note("from a, pending"), &id).ok());  // a holds the lock
  const uint64_t generation = NewestGeneration(env.get());
  REQUIRE(b->Close().ok());
  CHECK(NewestGeneration(env.get()) == generation);
  REQUIRE(a->Commit().ok());
  REQUIRE(a->Close().ok());
  CHECK(NewestGeneration(env.get()) == generation + 1);
}

TEST_CASE("a close writes a first superblock again when both were damaged while the file was open") {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(env.get(), &clock, false));
  uint64_t id = 0;
  REQUIRE(db->Remember(Note("before the damage"), &id).ok());
  {
    std::unique_ptr<engine::File> f;
    REQUIRE(env->Open(kPath, engine::OpenMode{false}, &f).ok());
    for (uint64_t off : format::kSuperblockOffset) REQUIRE(f->WriteAt(off, std::string(64, 'x')).ok());
  }
  CHECK(NewestGeneration(env.get()) == 0);
  REQUIRE(db->Close().ok());
  CHECK(NewestGeneration(env.get()) == 1);
  std::unique_ptr<Database> again = MustOpen(kPath, OpenOptions(env.get(), &clock, true));
  format::EpisodeRecord e;
  REQUIRE(again->GetEpisode(id, &e).ok());
  CHECK(e.text == "before the damage");
}

TEST_CASE("a malformed record in a checksummed page of any record type fails the open naming the page") {
  // The page checksum holds; the record inside does not parse (one byte of
  // what should be a whole record).
  for (PageType type : {PageType::kEpisodes, PageType::kBlocks, PageType::kFacts, PageType::kMeta,
                        PageType::kForget, PageType::kText}) {
    CAPTURE(format::PageTypeName(static_cast<uint8_t>(type)));
    Log log = SpaceLog();
    const uint64_t start = log.Page(type, 1, Records({"\x01"}));
    log.Commit(start);
    Status s = OpenBytes(log.bytes);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == PageNo(start));
    CHECK(s.message().find("malformed") != std::string::npos);
  }
}

TEST_CASE("check inside a transaction reports how far the file has moved past the snapshot") {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  TestClock clock;
  std::unique_ptr<Database> a = MustOpen(kPath, OpenOptions(env.get(), &clock, false));
  std::unique_ptr<Database> b = MustOpen(kPath, OpenOptions(env.get(), &clock, false));
  REQUIRE(a->Begin().ok());  // a's snapshot stays where it is
  uint64_t id = 0;
  REQUIRE(b->Remember(Note("committed by b"), &id).ok());
  std::vector<std::string> problems;
  REQUIRE(a->Check(&problems).ok());
  REQUIRE(problems.size() == 3);
  CHECK(problems[0] == "last commit: the file has 2, the open snapshot 1");
  CHECK(problems[1] == "episodes: the file has 1, the open snapshot 0");
  CHECK(problems[2] == "next episode id: the file has 2, the open snapshot 1");
  REQUIRE(a->Rollback().ok());
  problems.clear();
  REQUIRE(a->Check(&problems).ok());
  CHECK(problems.empty());
}

TEST_CASE("check returns an I/O error of its scan rather than listing it as a problem") {
  std::unique_ptr<engine::Env> mem = engine::NewMemEnv();
  FaultEnv env(mem.get());
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(&env, &clock, false));
  uint64_t id = 0;
  REQUIRE(db->Remember(Note("one"), &id).ok());
  env.FailAt(1, Fault::kEio, true, kOpRead);
  std::vector<std::string> problems;
  CHECK(db->Check(&problems).code() == kIoErrRead);
  CHECK(problems.empty());
}

TEST_CASE("a graph page that does not apply breaks recall, not the open, and check lists both") {
  Log log = SpaceLog();
  const uint64_t start = log.Page(PageType::kEpisodes, 1, Records({Episode(1)}));
  const uint64_t graph = log.Page(PageType::kGraph, 1, Records({""}));
  CommitRecord c = log.NextCommit(start);
  c.next_episode_id = 2;
  log.Commit(c);
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, log.bytes).ok());
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(env.get(), &clock));
  format::EpisodeRecord e;
  REQUIRE(db->GetEpisode(1, &e).ok());  // the catalog took the transaction
  std::vector<std::string> problems;
  REQUIRE(db->Check(&problems).ok());
  REQUIRE(problems.size() == 2);
  CHECK(problems[0] == "page " + std::to_string(PageNo(graph)) + ": empty graph image");
  CHECK(problems[1].find("recall index: ") == 0);
}

TEST_CASE("a read or a check on a closed handle is misuse") {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(env.get(), &clock, false));
  REQUIRE(db->Close().ok());
  format::EpisodeRecord e;
  CHECK(db->GetEpisode(1, &e).code() == kMisuse);
  std::vector<std::string> problems;
  CHECK(db->Check(&problems).code() == kMisuse);
  CHECK(db->Close().ok());  // a second close does nothing
}

TEST_CASE("a close inside a transaction discards its pending writes") {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  TestClock clock;
  uint64_t kept = 0, dropped = 0;
  {
    std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(env.get(), &clock, false));
    REQUIRE(db->Remember(Note("committed"), &kept).ok());
    REQUIRE(db->Begin().ok());
    REQUIRE(db->Remember(Note("pending at close"), &dropped).ok());
    REQUIRE(db->Close().ok());
  }
  std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(env.get(), &clock, true));
  format::EpisodeRecord e;
  CHECK(db->GetEpisode(kept, &e).ok());
  CHECK(db->GetEpisode(dropped, &e).code() == kNotFound);
}

TEST_CASE("a reader whose file another handle's VACUUM replaced moves to the new file on its next read") {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  TestClock clock;
  std::unique_ptr<Database> writer = MustOpen(kPath, OpenOptions(env.get(), &clock, false));
  uint64_t kept = 0, forgotten = 0;
  REQUIRE(writer->Remember(Note("kept"), &kept).ok());
  REQUIRE(writer->Remember(Note("forgotten"), &forgotten).ok());
  std::unique_ptr<Database> reader = MustOpen(kPath, OpenOptions(env.get(), &clock, true));
  format::EpisodeRecord e;
  REQUIRE(reader->GetEpisode(forgotten, &e).ok());
  format::ForgetRecord f;
  f.kind = format::ForgetKind::kEpisode;
  f.id = forgotten;
  engine::ForgetReceipt receipt;
  REQUIRE(writer->Forget(f, &receipt).ok());
  REQUIRE(writer->Vacuum({}, &receipt).ok());
  CHECK(receipt.vacuumed);
  CHECK(reader->GetEpisode(forgotten, &e).code() == kNotFound);
  REQUIRE(reader->GetEpisode(kept, &e).ok());
  CHECK(e.text == "kept");
}

TEST_CASE("a close keeps the log and writes no checkpoint while the recall index is broken") {
  Log log = SpaceLog();
  const uint64_t start = log.Page(PageType::kEpisodes, 1, Records({Episode(1)}));
  log.Page(PageType::kGraph, 1, Records({""}));  // does not apply: recall breaks
  CommitRecord c = log.NextCommit(start);
  c.next_episode_id = 2;
  log.Commit(c);
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, log.bytes).ok());
  TestClock clock;
  engine::Options opts = OpenOptions(env.get(), &clock, false);
  opts.checkpoint_bytes = 1;
  std::unique_ptr<Database> db = MustOpen(kPath, opts);
  REQUIRE(db->Close().ok());
  CHECK(NewestSuperblock(env.get()).checkpoint == 0);
  db = MustOpen(kPath, OpenOptions(env.get(), &clock, true));
  format::EpisodeRecord e;
  CHECK(db->GetEpisode(1, &e).ok());
  uint64_t id = 0;
  // With a sound index the same close does write one.
  std::unique_ptr<engine::Env> good = engine::NewMemEnv();
  db = MustOpen(kPath, OpenOptions(good.get(), &clock, false));
  db.reset();
  opts.env = good.get();
  db = MustOpen(kPath, opts);
  REQUIRE(db->Remember(Note("sound"), &id).ok());
  REQUIRE(db->Close().ok());
  CHECK(NewestSuperblock(good.get()).checkpoint != 0);
}

TEST_CASE("a checkpoint whose write or sync fails at close leaves the log to the next open") {
  for (uint32_t op : {uint32_t{kOpWrite}, uint32_t{kOpSync}}) {
    CAPTURE(op);
    std::unique_ptr<engine::Env> mem = engine::NewMemEnv();
    FaultEnv env(mem.get());
    TestClock clock;
    engine::Options opts = OpenOptions(&env, &clock, false);
    opts.checkpoint_bytes = 256;  // a close checkpoints; a commit (at 16 x) does not
    std::unique_ptr<Database> db = MustOpen(kPath, opts);
    uint64_t id = 0;
    REQUIRE(db->Remember(Note("in the log"), &id).ok());
    env.FailAt(1, Fault::kEio, false, op);
    CHECK(db->Close().primary() == kIoErr);
    db.reset();
    CHECK(NewestSuperblock(mem.get()).checkpoint == 0);
    std::unique_ptr<Database> again = MustOpen(kPath, OpenOptions(mem.get(), &clock, true));
    format::EpisodeRecord e;
    REQUIRE(again->GetEpisode(id, &e).ok());
    CHECK(e.text == "in the log");
  }
}

TEST_CASE("a close while another handle holds the write lock leaves the checkpoint to that handle") {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  TestClock clock;
  engine::Options opts = OpenOptions(env.get(), &clock, false);
  opts.checkpoint_bytes = 256;  // a close checkpoints; a commit (at 16 x) does not
  std::unique_ptr<Database> a = MustOpen(kPath, opts);
  std::unique_ptr<Database> b = MustOpen(kPath, opts);
  uint64_t id = 0;
  REQUIRE(b->Remember(Note("from b"), &id).ok());
  REQUIRE(a->Begin().ok());
  REQUIRE(a->Remember(Note("from a, pending"), &id).ok());
  REQUIRE(b->Close().ok());
  CHECK(NewestSuperblock(env.get()).checkpoint == 0);
  REQUIRE(a->Commit().ok());
  REQUIRE(a->Close().ok());
  CHECK(NewestSuperblock(env.get()).checkpoint != 0);
}

// ------------------------------------------------------------------ settings

// A file whose first transaction records `entries` as its settings.
Log SettingsLog(const std::vector<std::pair<std::string, std::string>>& entries) {
  Log log;
  format::MetaRecord m;
  m.entries = entries;
  std::string r;
  format::EncodeMeta(m, &r);
  log.Commit(log.Page(PageType::kMeta, 1, Records({r})));
  return log;
}

// Read-only, naming no vector space (nor tokenizer).
engine::Options UnnamedOptions(engine::Env* env, TestClock* clock) {
  engine::Options o = OpenOptions(env, clock, true);
  o.space_given = false;
  return o;
}

// Opens `bytes` with UnnamedOptions (and opts_out's tokenizer).
Status OpenUnnamed(const std::string& bytes, engine::Options* opts_out = nullptr) {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, bytes).ok());
  TestClock clock;
  engine::Options o = UnnamedOptions(env.get(), &clock);
  if (opts_out) {
    o.tokenizer = opts_out->tokenizer;
    o.tokenizer_given = opts_out->tokenizer_given;
  }
  std::unique_ptr<Database> db;
  return Database::Open(kPath, o, &db);
}

TEST_CASE("settings naming an unusable vector space or an unknown tokenizer fail the open saying which") {
  struct Case {
    std::vector<std::pair<std::string, std::string>> entries;
    int code;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{{"vector.embedder", "e"}, {"vector.dim", "8"}, {"vector.metric", "manhattan"}},
       kCorrupt, "unusable vector space e/8/manhattan"},
      {{{"vector.embedder", "e"}, {"vector.dim", "0"}, {"vector.metric", "l2"}},
       kCorrupt, "unusable vector space e/0/l2"},
      {{{"vector.embedder", "e"}, {"vector.dim", "70000"}, {"vector.metric", "ip"}},
       kCorrupt, "unusable vector space e/70000/ip"},
      {{{"vector.embedder", "e"}, {"vector.dim", "8"}, {"vector.metric", "cosine"},
        {"text.tokenizer", "klingon-v9"}},
       kFormatVersion, "tokenizer \"klingon-v9\", unknown to this version"},
  };
  for (const Case& c : cases) {
    Status s = OpenUnnamed(SettingsLog(c.entries).bytes);
    CAPTURE(s.ToString());
    CHECK(s.code() == c.code);
    CHECK(s.message().find(c.says) != std::string::npos);
  }
}

TEST_CASE("a file that records no settings opens with the default vector space and tokenizer") {
  const Log log = SettingsLog({{"created_by", "a test"}});
  CHECK(OpenUnnamed(log.bytes).ok());
  engine::Options named;
  named.tokenizer_given = true;
  named.tokenizer = index::TokenizerOptions{};  // what a file without one has
  CHECK(OpenUnnamed(log.bytes, &named).ok());
  named.tokenizer.stop_words = true;
  Status s = OpenUnnamed(log.bytes, &named);
  CHECK(s.code() == kMismatch);
  CHECK(s.message().find("the file records \"unicode-v1;stem=0;stop=0") != std::string::npos);
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, log.bytes).ok());
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(kPath, UnnamedOptions(env.get(), &clock));
  CHECK(db->space() == engine::VectorSpace{});
}

TEST_CASE("a file whose first transaction never landed opens read-only, or newer than this version, without settings written") {
  Log empty;
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, empty.bytes).ok());
  TestClock clock;
  engine::Options o = UnnamedOptions(env.get(), &clock);
  {
    std::unique_ptr<Database> db = MustOpen(kPath, o);
    engine::Stats st;
    REQUIRE(db->GetStats(&st).ok());
    CHECK(st.commits == 0);
    CHECK(db->space() == engine::VectorSpace{});
  }
  SetNewerWriteVersion(&empty);
  std::unique_ptr<engine::Env> newer = engine::NewMemEnv();
  REQUIRE(newer->CreateAtomic(kPath, empty.bytes).ok());
  o.env = newer.get();
  o.read_only = false;
  {
    std::unique_ptr<Database> db = MustOpen(kPath, o);
    format::EpisodeRecord e = Note("x");
    CHECK(db->Remember(e, nullptr).code() == kReadOnlyFile);
  }
  std::unique_ptr<engine::File> f;
  REQUIRE(newer->Open(kPath, engine::OpenMode{true}, &f).ok());
  uint64_t size = 0;
  REQUIRE(f->Size(&size).ok());
  CHECK(size == empty.size());  // nothing written
}

TEST_CASE("the first writable open of a file without settings waits for the write lock, and keeps the settings a writer recorded meanwhile") {
  const Log empty;
  const Log settled = SpaceLog();  // the same file with its first transaction
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, empty.bytes).ok());
  TestClock clock;
  // Another process holds the write lock: the open cannot record the settings.
  std::unique_ptr<engine::File> other;
  REQUIRE(env->Open(kPath, engine::OpenMode{false}, &other).ok());
  bool locked = false;
  REQUIRE(other->TryLockWrite(&locked).ok());
  REQUIRE(locked);
  engine::Options o = OpenOptions(env.get(), &clock, false);
  o.busy_timeout_ms = 10;
  std::unique_ptr<Database> db;
  Status s = Database::Open(kPath, o, &db);
  CHECK(s.code() == kBusyTimeout);
  CHECK(db == nullptr);
  // It records them while the open waits: the open takes them as they are.
  o.busy_timeout_ms = 60000;
  std::thread opener([&] { s = Database::Open(kPath, o, &db); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // (either order passes)
  REQUIRE(other->WriteAt(empty.size(), settled.bytes.substr(empty.size())).ok());
  REQUIRE(other->UnlockWrite().ok());
  opener.join();
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  engine::Stats st;
  REQUIRE(db->GetStats(&st).ok());
  CHECK(st.commits == 1);  // the writer's transaction only
  CHECK(db->space() == engine::VectorSpace{"test-hash", 8, "cosine"});
}

TEST_CASE("an empty transaction, a commit page alone, is applied and counted") {
  Log log = SpaceLog();
  EpisodeTxn(&log, {1});
  log.Commit(log.size());  // no pages before it
  EpisodeTxn(&log, {2});
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, log.bytes).ok());
  TestClock clock;
  std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(env.get(), &clock, false));
  engine::Stats st;
  REQUIRE(db->GetStats(&st).ok());
  CHECK(st.commits == 4);
  CHECK(st.episodes == 2);
  uint64_t id = 0;
  REQUIRE(db->Remember(Note("after"), &id).ok());
  CHECK(id == 3);
  std::vector<std::string> problems;
  REQUIRE(db->Check(&problems).ok());
  CHECK(problems.empty());
}

TEST_CASE("a text record for an episode not in the file breaks recall, not the open, and check lists it") {
  for (bool with_episode : {true, false}) {
    CAPTURE(with_episode);
    Log log = SpaceLog();
    EpisodeTxn(&log, {1});
    auto text = [](uint64_t episode) {
      format::TextRecord t;
      t.episode_id = episode;
      t.doc_len = 1;
      t.terms = {{"hello", 1}};
      std::string r;
      format::EncodeText(t, &r);
      return r;
    };
    uint64_t start = log.size();
    if (with_episode) log.Page(PageType::kEpisodes, 1, Records({Episode(2)}));
    // The stray record first: the records after it are not added either.
    log.Page(PageType::kText, 2, Records({text(99), text(with_episode ? 2 : 1)}));
    if (with_episode) log.Page(PageType::kGraph, 1, Records({""}));
    CommitRecord c = log.NextCommit(start);
    c.next_episode_id = with_episode ? 3 : 2;
    log.Commit(c);
    std::unique_ptr<engine::Env> env = engine::NewMemEnv();
    REQUIRE(env->CreateAtomic(kPath, log.bytes).ok());
    TestClock clock;
    std::unique_ptr<Database> db = MustOpen(kPath, OpenOptions(env.get(), &clock));
    format::EpisodeRecord e;
    REQUIRE(db->GetEpisode(1, &e).ok());  // the catalog is whole
    CHECK(db->GetEpisode(2, &e).code() == (with_episode ? kOk : kNotFound));
    engine::RecallQuery q;
    q.user_id = "ann";
    q.text = "hello";
    std::vector<engine::RecallHit> hits;
    Status s = db->Recall(q, &hits, nullptr);
    CHECK(s.code() == kIoErrSticky);
    CHECK(s.message().find("text record for episode 99, which is not in the file") !=
          std::string::npos);
    CHECK(s.message().find("close and reopen") != std::string::npos);
    std::vector<std::string> problems;
    REQUIRE(db->Check(&problems).ok());
    REQUIRE_FALSE(problems.empty());
    CHECK(problems.back().find("recall index: ") == 0);
  }
}

TEST_CASE("an episode in a file whose settings name an unusable vector space fails the open") {
  Log log = SettingsLog({{"vector.embedder", "e"}, {"vector.dim", "0"}, {"vector.metric", "l2"}});
  EpisodeTxn(&log, {1});
  Status s = OpenUnnamed(log.bytes);
  CHECK(s.code() == kCorrupt);
  CHECK(s.message().find("unusable vector space e/0/l2") != std::string::npos);
}

// ---- TxnReader: the change feed's reader of committed transactions.

struct ReadTxns {
  Status status;
  std::vector<uint64_t> seqs;
  uint64_t pos = 0;
};

// Reads `bytes` with a TxnReader from `from` (after commit `seq`) up to `until`.
ReadTxns ReadTxnsOf(const std::string& bytes, uint64_t until, uint64_t from = kFirst,
                    uint64_t seq = 0) {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, bytes).ok());
  std::unique_ptr<engine::File> file;
  REQUIRE(env->Open(kPath, engine::OpenMode{true}, &file).ok());
  engine::TxnReader reader(file.get(), kSalt, from, seq, until);
  ReadTxns out;
  for (;;) {
    ScannedTxn txn;
    bool done = false;
    out.status = reader.Next(&txn, &done);
    if (!out.status.ok() || done) break;
    out.seqs.push_back(txn.commit.commit_seq);
    CHECK(txn.end == reader.pos());
  }
  out.pos = reader.pos();
  return out;
}

TEST_CASE("the transaction reader returns each transaction up to the end it is given, no further") {
  Log log = SpaceLog();
  const uint64_t second = EpisodeTxn(&log, {1, 2});
  const uint64_t third = EpisodeTxn(&log, {3});
  EpisodeTxn(&log, {4});
  ReadTxns r = ReadTxnsOf(log.bytes, third);
  REQUIRE(r.status.ok());
  CHECK(r.seqs == std::vector<uint64_t>{1, 2});
  CHECK(r.pos == third);
  r = ReadTxnsOf(log.bytes, log.size(), second, 1);
  REQUIRE(r.status.ok());
  CHECK(r.seqs == std::vector<uint64_t>{2, 3, 4});
  CHECK(ReadTxnsOf(log.bytes, kFirst).seqs.empty());
}

TEST_CASE("before the transaction reader's end a bad page is damage, never a torn tail") {
  Log log = SpaceLog();
  const uint64_t second = EpisodeTxn(&log, {1});
  EpisodeTxn(&log, {2});
  std::string bytes = log.bytes;
  bytes[second + format::kPageHeaderSize + 3] ^= 1;  // inside the episode record
  ReadTxns r = ReadTxnsOf(bytes, bytes.size());
  CHECK(r.status.code() == kCorruptChecksum);
  CHECK(r.status.page_no() == PageNo(second));
  CHECK(r.seqs == std::vector<uint64_t>{1});
  // A commit page whose sequence number does not follow is damage too.
  r = ReadTxnsOf(log.bytes, log.size(), second, 5);
  CHECK(r.status.code() == kCorruptPage);
  CHECK(r.status.message().find("does not match its transaction") != std::string::npos);
}

TEST_CASE("record pages that run to the transaction reader's end without a commit are damage") {
  Log log = SpaceLog();
  const uint64_t start = log.Page(PageType::kEpisodes, 1, Records({Episode(1)}));
  ReadTxns r = ReadTxnsOf(log.bytes, log.size());
  CHECK(r.seqs == std::vector<uint64_t>{1});
  CHECK(r.status.code() == kCorruptPage);
  CHECK(r.status.page_no() == PageNo(log.size()));
  // A page whose header claims more bytes than lie before the end is cut
  // short: refused from what the file holds, whatever length it names.
  std::string bytes = log.bytes;
  const uint32_t huge = format::kMaxPagePayload;
  std::memcpy(&bytes[start + 12], &huge, 4);
  std::memcpy(&bytes[start + 24], &huge, 4);
  r = ReadTxnsOf(bytes, bytes.size());
  CHECK(r.status.code() == kCorruptPage);
  CHECK(r.status.page_no() == PageNo(start));
}

TEST_SUITE_END();

}  // namespace agentmem::test

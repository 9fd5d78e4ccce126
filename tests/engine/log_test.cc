// tests/engine/log_test.cc -- engine::TxnWriter: how a transaction's records
// are packed into pages (which pages it tries to compress, the page it hands
// to the cache); engine::Log::AppendAndSync: a checkpoint's pieces.
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "engine/env/env.h"
#include "engine/storage/log.h"
#include "engine/storage/pager.h"
#include "format/file_header.h"
#include "format/page.h"
#include "format/records.h"

using agentmem::engine::Log;
using agentmem::engine::LogOptions;
using agentmem::engine::NewLog;
using agentmem::engine::OpenMode;
using agentmem::engine::PageRef;
using agentmem::engine::Pager;
using agentmem::engine::RecordLoc;
using agentmem::engine::TxnWriter;
namespace format = agentmem::format;

namespace {

constexpr uint64_t kSalt = 0x1065'7e57'0000'0001;

format::FileHeader Header() {
  format::FileHeader h;
  h.salt = kSalt;
  h.page_size = 4096;
  return h;
}

// A record zstd shrinks by more than an eighth and less than the ratio a
// reader accepts (32): letters from an alphabet of eight.
std::string Compressible(size_t bytes, char c = 'a') {
  std::string s(bytes, c);
  uint32_t x = static_cast<uint32_t>(c);
  for (char& ch : s) {
    x = x * 1103515245u + 12345u;
    ch = static_cast<char>(c + (x >> 16) % 8);
  }
  return s;
}

// The header of the page at `offset` of the transaction bytes `txn` written
// at `start`.
format::PageHeader PageAt(const std::string& txn, uint64_t start, uint64_t offset) {
  format::PageHeader h;
  REQUIRE(format::PeekPageHeader(std::string_view(txn).substr(offset - start, format::kPageHeaderSize),
                                 offset, kSalt, &h)
              .ok());
  return h;
}

}  // namespace

TEST_CASE("a page whose incompressible bytes leave less than an eighth of it is stored without compression") {
  const uint64_t start = format::kFirstPageOffset;
  TxnWriter w(start, Header());
  const std::string rec = Compressible(1000);
  RecordLoc tried = w.Add(format::PageType::kEpisodes, rec, 0);
  w.Add(format::PageType::kFacts, rec, 800);  // 200 other bytes: above an eighth
  RecordLoc skipped = w.Add(format::PageType::kBlocks, rec, 900);  // 100 + framing: below
  format::CommitRecord c;
  const std::string txn = w.Finish(&c);
  CHECK((PageAt(txn, start, tried.page_offset).flags & format::kPageFlagZstd) != 0);
  const format::PageHeader facts = PageAt(txn, start, tried.page_offset + format::PaddedPageSize(
                                                          PageAt(txn, start, tried.page_offset).length));
  CHECK(facts.type == static_cast<uint8_t>(format::PageType::kFacts));
  CHECK((facts.flags & format::kPageFlagZstd) != 0);
  const format::PageHeader blocks = PageAt(txn, start, skipped.page_offset);
  CHECK(blocks.type == static_cast<uint8_t>(format::PageType::kBlocks));
  CHECK(blocks.flags == 0);
  CHECK(blocks.length == blocks.raw_length);
}

TEST_CASE("the last episode page a transaction hands to the cache is the page a read of the file returns") {
  const uint64_t start = format::kFirstPageOffset;
  TxnWriter none(start, Header());
  none.Add(format::PageType::kFacts, "a fact");
  format::CommitRecord c0;
  none.Finish(&c0);
  CHECK(none.LastEpisodePage() == nullptr);

  for (bool compressed : {false, true}) {
    CAPTURE(compressed);
    TxnWriter w(start, Header());
    w.Add(format::PageType::kEpisodes, Compressible(3000, 'x'));
    // Past the page size: the second episode starts the last episode page.
    RecordLoc last = w.Add(format::PageType::kEpisodes, Compressible(1500, 'y'), compressed ? 0 : 1500);
    w.Add(format::PageType::kEpisodes, "the second record of the last page", 0);
    w.Add(format::PageType::kText, Compressible(200, 't'));
    format::CommitRecord c;
    const std::string txn = w.Finish(&c);
    PageRef kept = w.LastEpisodePage();
    REQUIRE(kept != nullptr);
    CHECK(kept->offset == last.page_offset);

    std::string image(start, '\0');
    image += txn;
    auto env = agentmem::engine::NewMemEnv();
    REQUIRE(env->CreateAtomic("f", image).ok());
    std::unique_ptr<agentmem::engine::File> file;
    REQUIRE(env->Open("f", OpenMode{true}, &file).ok());
    Pager pager(file.get(), kSalt);
    PageRef read;
    REQUIRE(pager.ReadPage(last.page_offset, &read).ok());
    CHECK(((read->header.flags & format::kPageFlagZstd) != 0) == compressed);
    CHECK(kept->header.type == read->header.type);
    CHECK(kept->header.flags == read->header.flags);
    CHECK(kept->header.length == read->header.length);
    CHECK(kept->header.raw_length == read->header.raw_length);
    CHECK(kept->header.page_no == read->header.page_no);
    CHECK(kept->header.record_count == read->header.record_count);
    CHECK(kept->payload == read->payload);
    REQUIRE(kept->records.size() == 2);
    CHECK(kept->records == read->records);
  }
}

TEST_CASE("checkpoint pieces that leave a hole or overlap are refused and the file cut back") {
  auto env = agentmem::engine::NewMemEnv();
  LogOptions o;
  o.env = env.get();
  NewLog n;
  n.salt = kSalt;
  REQUIRE(Log::Create("f", o, n).ok());
  std::unique_ptr<Log> log;
  REQUIRE(Log::Open("f", o, &log).ok());
  bool acquired = false, replaced = false;
  REQUIRE(log->TryLock(&acquired, &replaced).ok());
  REQUIRE(acquired);
  REQUIRE(log->Refresh(true, [](agentmem::engine::ScannedTxn&) { return agentmem::Status::OK(); }).ok());
  const uint64_t end = log->end();
  auto size = [&] {
    uint64_t bytes = 0;
    REQUIRE(log->file()->Size(&bytes).ok());
    return bytes;
  };
  REQUIRE(size() == end);
  const std::string piece(100, 'c');
  SUBCASE("a hole") {
    agentmem::Status s = log->AppendAndSync([&](const Log::Put& put) {
      AGENTMEM_RETURN_IF_ERROR(put(end, piece));
      return put(end + 150, piece);
    });
    CHECK(s.code() == agentmem::kInternal);
    CHECK(size() == end);
  }
  SUBCASE("an overlap") {
    agentmem::Status s = log->AppendAndSync([&](const Log::Put& put) {
      AGENTMEM_RETURN_IF_ERROR(put(end, piece));
      return put(end + 50, piece);
    });
    CHECK(s.code() == agentmem::kInternal);
    CHECK(size() == end);
  }
  SUBCASE("pieces in any order that cover their extent once") {
    agentmem::Status s = log->AppendAndSync([&](const Log::Put& put) {
      AGENTMEM_RETURN_IF_ERROR(put(end + 100, piece));
      return put(end, piece);
    });
    REQUIRE_MESSAGE(s.ok(), s.ToString());
    CHECK(size() == end + 200);
    CHECK(log->synced_through() == end + 200);
  }
  log->Unlock();
}

// tests/engine/pager_test.cc -- engine::Pager: the one page verifier and the
// page cache bounded by bytes.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "engine/storage/pager.h"
#include "format/file_header.h"
#include "format/page.h"
#include "format/records.h"

using agentmem::Status;
using agentmem::engine::Database;
using agentmem::engine::Env;
using agentmem::engine::File;
using agentmem::engine::OpenMode;
using agentmem::engine::Options;
using agentmem::engine::Page;
using agentmem::engine::PageRef;
using agentmem::engine::Pager;
namespace format = agentmem::format;

namespace {

constexpr uint64_t kSalt = 0x5a17'5a17'0000'0001;

// A file image: 4096 bytes of zeros, then record pages of `records` records
// of `record_bytes` bytes each. offsets receives where each page starts.
struct Image {
  std::string bytes;
  std::vector<uint64_t> offsets;
};

Image MakeImage(int pages, int records, size_t record_bytes, bool compress = false) {
  Image img;
  img.bytes.assign(format::kFirstPageOffset, '\0');
  for (int p = 0; p < pages; p++) {
    std::string payload;
    for (int r = 0; r < records; r++) {
      std::string rec(record_bytes, static_cast<char>('a' + (p + r) % 26));
      rec[0] = static_cast<char>('0' + p % 10);
      if (compress) {
        // Text that compresses, but by less than format's ratio limit.
        uint32_t x = static_cast<uint32_t>(p * 131 + r * 7 + 1);
        for (size_t i = 1; i < rec.size(); i++) {
          x = x * 1103515245u + 12345u;
          rec[i] = static_cast<char>('a' + (x >> 16) % 8);
        }
      }
      format::AppendRecord(rec, &payload);
    }
    img.offsets.push_back(img.bytes.size());
    img.bytes += format::EncodePage(format::PageType::kEpisodes, img.bytes.size(), kSalt,
                                    static_cast<uint32_t>(records), payload, compress);
  }
  return img;
}

struct Fixture {
  explicit Fixture(const Image& img) : env(agentmem::engine::NewMemEnv()) {
    REQUIRE(env->CreateAtomic("pages", img.bytes).ok());
    REQUIRE(env->Open("pages", OpenMode{true}, &file).ok());
    pager.Reset(file.get(), kSalt);
  }
  std::unique_ptr<Env> env;
  std::unique_ptr<File> file;
  Pager pager;
};

std::unique_ptr<Database> OpenMem(Env* env, Options opts = {}) {
  opts.env = env;
  std::unique_ptr<Database> db;
  Status s = Database::Open("db", opts, &db);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return db;
}

}  // namespace

TEST_CASE("a page read twice is served from the cache") {
  Image img = MakeImage(2, 3, 100);
  Fixture f(img);
  PageRef a, b;
  REQUIRE(f.pager.ReadPage(img.offsets[1], &a).ok());
  CHECK(f.pager.misses() == 1);
  CHECK(f.pager.hits() == 0);
  REQUIRE(f.pager.ReadPage(img.offsets[1], &b).ok());
  CHECK(f.pager.misses() == 1);
  CHECK(f.pager.hits() == 1);
  CHECK(a.get() == b.get());
  REQUIRE(a->records.size() == 3);
  CHECK(a->records[0].size() == 100);
  CHECK(a->header.type == static_cast<uint8_t>(format::PageType::kEpisodes));
  CHECK(a->offset == img.offsets[1]);
  CHECK(f.pager.pages_held() == 1);
  CHECK(f.pager.bytes_held() == Pager::ChargeOf(*a));
}

TEST_CASE("a compressed page is returned decompressed") {
  Image img = MakeImage(1, 20, 200, true);
  format::PageHeader h;
  REQUIRE(format::PeekPageHeader(std::string_view(img.bytes).substr(img.offsets[0]), img.offsets[0],
                                 kSalt, &h).ok());
  REQUIRE((h.flags & format::kPageFlagZstd) != 0);
  Fixture f(img);
  PageRef p;
  REQUIRE(f.pager.ReadPage(img.offsets[0], &p).ok());
  CHECK(p->payload.size() == h.raw_length);
  REQUIRE(p->records.size() == 20);
  CHECK(p->records[19].size() == 200);
}

TEST_CASE("the cache never holds more bytes than its budget") {
  Image img = MakeImage(40, 4, 250);
  Fixture f(img);
  PageRef one;
  REQUIRE(f.pager.ReadPage(img.offsets[0], &one).ok());
  const size_t charge = Pager::ChargeOf(*one);
  one.reset();
  f.pager.Clear();
  CHECK(f.pager.bytes_held() == 0);
  f.pager.set_budget(charge * 5 + charge / 2);  // room for five pages
  for (int round = 0; round < 3; round++) {
    for (uint64_t off : img.offsets) {
      PageRef p;
      REQUIRE(f.pager.ReadPage(off, &p).ok());
      CHECK(f.pager.bytes_held() <= f.pager.budget());
    }
  }
  CHECK(f.pager.pages_held() == 5);
  // Least recently used goes first: the last five pages read are the ones kept.
  const uint64_t misses = f.pager.misses();
  for (size_t i = img.offsets.size() - 5; i < img.offsets.size(); i++) {
    PageRef p;
    REQUIRE(f.pager.ReadPage(img.offsets[i], &p).ok());
  }
  CHECK(f.pager.misses() == misses);
  // A smaller budget evicts down to it.
  f.pager.set_budget(charge * 2);
  CHECK(f.pager.pages_held() == 2);
  CHECK(f.pager.bytes_held() <= charge * 2);
  f.pager.set_budget(0);
  CHECK(f.pager.pages_held() == 0);
  CHECK(f.pager.bytes_held() == 0);
}

TEST_CASE("a page whose checksum fails is refused and not cached") {
  Image img = MakeImage(2, 2, 64);
  img.bytes[img.offsets[1] + format::kPageHeaderSize + 10] ^= 0x40;  // a payload byte
  Fixture f(img);
  for (int i = 0; i < 2; i++) {
    PageRef p;
    Status s = f.pager.ReadPage(img.offsets[1], &p);
    CHECK(s.code() == agentmem::kCorruptChecksum);
    CHECK(s.page_no() == static_cast<int64_t>(format::PageNoOf(img.offsets[1])));
    CHECK(p == nullptr);
    CHECK(f.pager.pages_held() == 0);
  }
  CHECK(f.pager.misses() == 2);  // each attempt read the file again
  PageRef good;
  REQUIRE(f.pager.ReadPage(img.offsets[0], &good).ok());
  CHECK(f.pager.pages_held() == 1);
}

TEST_CASE("a page with a bad header or cut short is refused and not cached") {
  Image img = MakeImage(1, 2, 64);
  SUBCASE("a wrong salt") {
    Fixture f(img);
    f.pager.Reset(f.file.get(), kSalt + 1);
    PageRef p;
    CHECK(f.pager.ReadPage(img.offsets[0], &p).code() == agentmem::kCorruptPage);
    CHECK(f.pager.pages_held() == 0);
  }
  SUBCASE("an offset that is not a page") {
    Fixture f(img);
    PageRef p;
    CHECK(f.pager.ReadPage(img.offsets[0] + 16, &p).code() == agentmem::kCorruptPage);
    CHECK(f.pager.pages_held() == 0);
  }
  SUBCASE("the file ends inside the page") {
    img.bytes.resize(img.bytes.size() - 20);
    Fixture f(img);
    PageRef p;
    CHECK(f.pager.ReadPage(img.offsets[0], &p).code() == agentmem::kCorruptPage);
    CHECK(f.pager.pages_held() == 0);
  }
  SUBCASE("no file") {
    Pager pager;
    PageRef p;
    CHECK(pager.ReadPage(img.offsets[0], &p).code() == agentmem::kMisuse);
  }
}

TEST_CASE("a page bigger than the budget is read but not kept") {
  Image img = MakeImage(2, 8, 1000);
  Fixture f(img);
  f.pager.set_budget(4000);
  PageRef big;
  REQUIRE(f.pager.ReadPage(img.offsets[0], &big).ok());
  REQUIRE(big->records.size() == 8);
  CHECK(Pager::ChargeOf(*big) > 4000);
  CHECK(f.pager.pages_held() == 0);
  CHECK(f.pager.bytes_held() == 0);
  REQUIRE(f.pager.ReadPage(img.offsets[0], &big).ok());
  CHECK(f.pager.misses() == 2);
  CHECK(f.pager.hits() == 0);
}

TEST_CASE("a reader's page stays valid after it is evicted") {
  Image img = MakeImage(10, 3, 300);
  Fixture f(img);
  PageRef held;
  REQUIRE(f.pager.ReadPage(img.offsets[0], &held).ok());
  f.pager.set_budget(Pager::ChargeOf(*held) * 2);
  const std::string first(held->records[0]);
  for (size_t i = 1; i < img.offsets.size(); i++) {
    PageRef p;
    REQUIRE(f.pager.ReadPage(img.offsets[i], &p).ok());
  }
  f.pager.Clear();
  CHECK(f.pager.pages_held() == 0);
  REQUIRE(held->records.size() == 3);
  CHECK(held->records[0] == first);
  CHECK(held->records[0][0] == '0');
  CHECK(held->records[2] == std::string(300, 'c').replace(0, 1, "0"));
}

TEST_CASE("Pager::Verify accepts a good page and refuses a flipped one") {
  Image img = MakeImage(1, 2, 40);
  std::string_view page = std::string_view(img.bytes).substr(img.offsets[0]);
  format::PageHeader h;
  std::string payload;
  REQUIRE(Pager::Verify(page, img.offsets[0], kSalt, &h, &payload).ok());
  CHECK(h.record_count == 2);
  std::string bad(page);
  bad[format::kPageHeaderSize] ^= 1;
  CHECK(Pager::Verify(bad, img.offsets[0], kSalt, &h, &payload).code() == agentmem::kCorruptChecksum);
}

TEST_CASE("a database with a tiny page cache still reads all its records") {
  auto env = agentmem::engine::NewMemEnv();
  Options opts;
  opts.page_size = 512;
  std::vector<uint64_t> ids;
  {
    auto db = OpenMem(env.get(), opts);
    REQUIRE(db->Begin().ok());
    for (int i = 0; i < 300; i++) {
      format::EpisodeRecord r;
      r.user_id = "u";
      r.session_id = "s";
      r.role.assign("user", 4);
      r.text = "episode number " + std::to_string(i) + " " + std::string(i % 50, 'x');
      uint64_t id = 0;
      REQUIRE(db->Remember(r, &id).ok());
      ids.push_back(id);
    }
    REQUIRE(db->Commit().ok());
  }
  auto db = OpenMem(env.get(), opts);
  db->pager().set_budget(2048);  // a few small pages at most
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < ids.size(); i++) {
      format::EpisodeRecord r;
      Status s = db->GetEpisode(ids[i], &r);
      REQUIRE_MESSAGE(s.ok(), s.ToString());
      CHECK(r.text == "episode number " + std::to_string(i) + " " + std::string(i % 50, 'x'));
      CHECK(db->pager().bytes_held() <= 2048);
    }
  }
  CHECK(db->pager().misses() > 2);
  // No cache at all still reads.
  db->pager().set_budget(0);
  format::EpisodeRecord r;
  REQUIRE(db->GetEpisode(ids[7], &r).ok());
  CHECK(r.text == "episode number 7 " + std::string(7, 'x'));
  CHECK(db->pager().pages_held() == 0);
}

TEST_CASE("a page kept by its writer is served from the cache, unless one is cached there or it exceeds the budget") {
  Image img = MakeImage(2, 3, 100);
  Fixture f(img);
  PageRef read;
  REQUIRE(f.pager.ReadPage(img.offsets[0], &read).ok());
  // A second copy of the first page, as its writer would keep it.
  Fixture g(img);
  PageRef copy;
  REQUIRE(g.pager.ReadPage(img.offsets[0], &copy).ok());
  f.pager.Keep(copy);
  PageRef again;
  REQUIRE(f.pager.ReadPage(img.offsets[0], &again).ok());
  CHECK(again.get() == read.get());  // the cached one stays
  PageRef second;
  REQUIRE(g.pager.ReadPage(img.offsets[1], &second).ok());
  f.pager.Keep(second);
  CHECK(f.pager.pages_held() == 2);
  const uint64_t misses = f.pager.misses();
  REQUIRE(f.pager.ReadPage(img.offsets[1], &again).ok());
  CHECK(again.get() == second.get());
  CHECK(f.pager.misses() == misses);
  Fixture h(img);
  h.pager.set_budget(Pager::ChargeOf(*second) - 1);
  h.pager.Keep(second);
  CHECK(h.pager.pages_held() == 0);
}

TEST_CASE("a commit's episode is in the cache for the next commit, whose context texts read it") {
  auto env = agentmem::engine::NewMemEnv();
  auto db = OpenMem(env.get());
  format::EpisodeRecord r;
  r.user_id = "u";
  r.session_id = "s";
  r.role.assign("user", 4);
  r.text = "the first turn of the session";
  REQUIRE(db->Remember(r, nullptr).ok());
  const uint64_t misses = db->pager().misses();
  r.text = "the second turn, indexed with the first as its context";
  REQUIRE(db->Remember(r, nullptr).ok());
  CHECK(db->pager().misses() == misses);
  CHECK(db->pager().hits() > 0);
}

TEST_CASE("a page read without keep is verified but not cached") {
  Image img = MakeImage(2, 2, 64);
  img.bytes[img.offsets[1] + format::kPageHeaderSize + 3] ^= 0x01;
  Fixture f(img);
  PageRef p;
  REQUIRE(f.pager.ReadPage(img.offsets[0], &p, false).ok());
  CHECK(p->records.size() == 2);
  CHECK(f.pager.pages_held() == 0);
  CHECK(f.pager.ReadPage(img.offsets[1], &p, false).code() == agentmem::kCorruptChecksum);
  CHECK(p == nullptr);
  // A cached page is still served from the cache.
  REQUIRE(f.pager.ReadPage(img.offsets[0], &p).ok());
  REQUIRE(f.pager.ReadPage(img.offsets[0], &p, false).ok());
  CHECK(f.pager.hits() == 1);
}

TEST_CASE("the cache_size option bounds the page cache in pages or KiB, like SQLite's") {
  auto env = agentmem::engine::NewMemEnv();
  Options opts;
  opts.env = env.get();
  opts.page_size = 4096;
  REQUIRE(ParseOptions("cache_size=-64", &opts).ok());  // 64 KiB
  {
    auto db = OpenMem(env.get(), opts);
    CHECK(db->pager().budget() == 64 * 1024);
  }
  REQUIRE(ParseOptions("cache_size=10", &opts).ok());  // 10 pages of the file's page_size
  {
    auto db = OpenMem(env.get(), opts);
    CHECK(db->pager().budget() == 10 * 4096);
  }
  REQUIRE(ParseOptions("cache_size=0", &opts).ok());  // no cache: reads still work
  {
    auto db = OpenMem(env.get(), opts);
    CHECK(db->pager().budget() == 0);
    format::EpisodeRecord r;
    r.user_id = "u";
    r.text = "read without a cache";
    uint64_t id = 0;
    REQUIRE(db->Remember(r, &id).ok());
    format::EpisodeRecord back;
    REQUIRE(db->GetEpisode(id, &back).ok());
    CHECK(back.text == r.text);
  }
  Options defaults;
  defaults.env = env.get();
  auto db = OpenMem(env.get(), defaults);
  CHECK(db->pager().budget() == Pager::kDefaultBudget);
  for (const char* bad : {"cache_size=", "cache_size=x", "cache_size=-", "cache_size=1.5",
                          "cache_size=99999999999999999999", "cache_size=-99999999999999999"}) {
    Options o;
    Status s = ParseOptions(bad, &o);
    CHECK_MESSAGE(s.code() == agentmem::kMisuse, bad);
    CHECK_MESSAGE(s.message().find("cache_size") != std::string::npos, bad);
  }
}

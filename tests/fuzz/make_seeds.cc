// tests/fuzz/make_seeds.cc -- fuzz_make_seeds DIR: writes the seed inputs of
// the fuzz targets into DIR/<target>/seed-*, deterministically. The committed
// corpus (tests/fuzz/corpus/) was made with it; run it again after a format
// change and commit what changed (the old seeds stay useful as they are).
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "format/compress.h"
#include "format/file_header.h"
#include "format/page.h"
#include "format/records.h"
#include "index/text/bm25.h"
#include "index/text/postings.h"
#include "index/text/tokenizer.h"
#include "index/vector/hnsw.h"
#include "tests/util/crafted.h"
#include "tests/util/oracle.h"

namespace {

using namespace agentmem;
namespace fs = std::filesystem;

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::string ReadMem(engine::Env* env, const std::string& path) {
  std::unique_ptr<engine::File> f;
  if (!env->Open(path, engine::OpenMode{true}, &f).ok()) return "";
  uint64_t size = 0;
  f->Size(&size).IgnoreError();
  std::string bytes;
  f->ReadAt(0, size, &bytes).IgnoreError();
  return bytes;
}

// A small file with every record kind: `commits` transactions on a MemEnv.
std::string SmallFile(uint64_t seed, int commits, uint32_t page_size, bool close) {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  test::TestClock clock;
  engine::Options o;
  o.env = env.get();
  o.salt = 0x5eed5eed5eedULL + seed;
  o.clock = clock.Fn();
  o.space = engine::VectorSpace{"test-hash", 4, "cosine"};
  o.space_given = true;
  o.page_size = page_size;
  std::unique_ptr<engine::Database> db;
  if (!engine::Database::Open("/seed", o, &db).ok()) return "";
  std::mt19937_64 rng(seed);
  test::Driver d(db.get(), &clock);
  for (int c = 0; c < commits; c++) {
    bool txn = c % 3 == 2;
    if (txn) d.Begin().IgnoreError();
    d.Remember(test::RandomEpisode(rng, 4, c)).IgnoreError();
    if (c % 2) d.SetBlock(test::RandomBlock(rng, c)).IgnoreError();
    if (c % 3 == 0) d.AssertFact(test::RandomFact(rng, c)).IgnoreError();
    if (txn) d.Commit().IgnoreError();
  }
  if (close) db->Close().IgnoreError();
  db.reset();
  return ReadMem(env.get(), "/seed");
}

std::string Sel(uint8_t which, const std::string& body) {
  return std::string(1, static_cast<char>(which)) + body;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds DIR\n");
    return 2;
  }
  fs::path root = argv[1];

  // open: whole files.
  Write(root / "open", "seed-small-closed", SmallFile(1, 4, 4096, true));
  Write(root / "open", "seed-small-open", SmallFile(2, 3, 4096, false));
  Write(root / "open", "seed-small-pages", SmallFile(3, 6, 512, true));
  std::string torn = SmallFile(4, 4, 4096, false);
  Write(root / "open", "seed-torn-tail", torn.substr(0, torn.size() - 40));
  // open: hostile files (tests/util/crafted.h), every page checksummed.
  Write(root / "open", "crafted-bomb", test::BombFile());
  Write(root / "open", "crafted-record-flood", test::RecordFloodFile(4u << 20));
  Write(root / "open", "crafted-huge-count", test::HugeCountFile());
  Write(root / "open", "crafted-huge-length", test::HugeLengthFile());
  Write(root / "open", "crafted-huge-id", test::HugeIdFile(30000000));
  Write(root / "open", "crafted-huge-id-max", test::HugeIdFile((uint64_t{1} << 63) - 1));
  Write(root / "open", "crafted-huge-next-id", test::HugeNextIdFile(20000000));

  // decode: one valid input per decoder (the first byte selects it).
  std::mt19937_64 rng(7);
  format::FileHeader h;
  h.salt = 0x0123456789abcdefULL;
  Write(root / "decode", "seed-00-header", Sel(0, format::EncodeFileHeader(h)));
  format::Superblock sb;
  sb.salt = 0x0123456789abcdefULL;
  sb.generation = 3;
  sb.durable_through = 8192;
  Write(root / "decode", "seed-01-superblock", Sel(1, format::EncodeSuperblock(sb)));
  std::string ep;
  format::EncodeEpisode(test::RandomEpisode(rng, 4, 1), &ep);
  std::string payload;
  format::AppendRecord(ep, &payload);
  uint32_t off = 4096 / 16;
  std::string offb(reinterpret_cast<const char*>(&off), 4);
  Write(root / "decode", "seed-02-page",
        Sel(2, offb + format::EncodePage(format::PageType::kEpisodes, 4096, 0x0123456789abcdefULL,
                                         1, payload, false)));
  format::EpisodeRecord long_ep = test::RandomEpisode(rng, 4, 2);
  long_ep.text.clear();  // compressible, within the ratio a reader accepts
  for (int i = 0; long_ep.text.size() < 3000; i++) long_ep.text += std::to_string(i * 7919 % 1000) + " ";
  std::string long_payload;
  std::string long_rec;
  format::EncodeEpisode(long_ep, &long_rec);
  format::AppendRecord(long_rec, &long_payload);
  Write(root / "decode", "seed-02-page-zstd",
        Sel(2, offb + format::EncodePage(format::PageType::kEpisodes, 4096, 0x0123456789abcdefULL,
                                         1, long_payload, true)));
  Write(root / "decode", "seed-03-episode", Sel(3, ep));
  std::string b;
  format::EncodeBlock(test::RandomBlock(rng, 1), &b);
  Write(root / "decode", "seed-04-block", Sel(4, b));
  std::string f;
  format::EncodeFact(test::RandomFact(rng, 1), &f);
  Write(root / "decode", "seed-05-fact", Sel(5, f));
  format::MetaRecord meta;
  meta.entries = {{"vector_dim", "4"}, {"embedder", "test-hash"}};
  std::string m;
  format::EncodeMeta(meta, &m);
  Write(root / "decode", "seed-06-meta", Sel(6, m));
  format::TextRecord tr;
  tr.episode_id = 9;
  tr.doc_len = 3;
  tr.terms = {{"agent", 2}, {"memory", 1}};
  std::string t;
  format::EncodeText(tr, &t);
  Write(root / "decode", "seed-07-text", Sel(7, t));
  format::CommitRecord cr;
  cr.commit_seq = 4;
  cr.txn_start = 4096;
  cr.page_count = 2;
  Write(root / "decode", "seed-08-commit", Sel(8, format::EncodeCommit(cr)));
  std::string joined;
  format::AppendRecord(ep, &joined);
  format::AppendRecord(b, &joined);
  Write(root / "decode", "seed-09-records", Sel(9, std::string(1, '\2') + joined));
  std::string z;
  std::string numbers;
  for (int i = 0; numbers.size() < 2000; i++) numbers += std::to_string(i * 7919 % 1000) + " ";
  numbers.resize(2000);
  if (format::CompressIfItPays(numbers, &z)) {
    uint32_t n = 2000;
    Write(root / "decode", "seed-10-zstd",
          Sel(10, std::string(reinterpret_cast<const char*>(&n), 4) + z));
  }
  // A page whose zstd frame holds 1 GiB of zeros in 32 KiB, checksum valid.
  std::string bomb = format::EncodePage(format::PageType::kEpisodes, 4096, 0x0123456789abcdefULL, 1,
                                        test::ZstdZeros(format::kMaxPagePayload), false);
  bomb[5] = static_cast<char>(format::kPageFlagZstd);
  format::EncodeFixed32(bomb.data() + 24, format::kMaxPagePayload);
  format::EncodeFixed32(bomb.data(), format::ChecksumOf(bomb).Masked());
  Write(root / "decode", "crafted-page-bomb", Sel(2, offb + bomb));
  index::HnswOptions ho;
  ho.dim = 4;
  ho.m = 4;
  ho.ef_construction = 8;
  auto g = index::HnswIndex::Create(ho);
  if (g.ok()) {
    std::uniform_real_distribution<float> u(-1, 1);
    for (uint64_t i = 1; i <= 12; i++) {
      std::vector<float> v(4);
      for (float& x : v) x = u(rng);
      (*g)->Add(i, v).IgnoreError();
    }
    std::string image;
    if ((*g)->Serialize(&image).ok()) Write(root / "decode", "seed-11-hnsw", Sel(11, image));
  }
  std::vector<index::Posting> postings = {{1, 2}, {5, 1}, {900, 3}};
  std::string pb;
  if (index::EncodePostings(postings, &pb).ok()) {
    Write(root / "decode", "seed-12-postings", Sel(12, pb));
  }
  index::TokenizerOptions to;
  Write(root / "decode", "seed-13-tokenizer", Sel(13, index::TokenizerConfigString(to)));
  index::Bm25Index bm25;
  const std::vector<std::vector<std::string>> docs = {
      {"cat", "sat", "mat"}, {"rain", "cat"}, {"coffee", "book", "book"}, {}};
  for (size_t d = 0; d < docs.size(); d++) bm25.Add(d + 1, docs[d]).IgnoreError();
  std::string frozen;
  bm25.EncodeFrozen(&frozen);
  Write(root / "decode", "seed-14-bm25-image", Sel(14, frozen));

  // ops: short programs of random bytes (both sync modes).
  for (int i = 0; i < 6; i++) {
    std::string prog;
    std::mt19937 r(100 + i);
    for (int j = 0; j < 96; j++) prog += static_cast<char>(r() & 0xff);
    prog[0] = static_cast<char>(i);
    Write(root / "ops", "seed-" + std::to_string(i), prog);
  }
  return 0;
}

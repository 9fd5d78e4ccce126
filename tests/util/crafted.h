// tests/util/crafted.h -- bytes a hostile writer would make: a zstd frame
// built by hand (RFC 8878) that decompresses to far more than it stores, and
// whole files, every page checksummed, whose headers or records carry numbers
// far larger than their bytes (decompression bombs, huge counts, lengths and
// ids). Used by tests/engine/crafted_file_test.cc and written into the fuzz
// corpus by fuzz_make_seeds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "format/coding.h"
#include "format/crc32c.h"
#include "format/file_header.h"
#include "format/page.h"
#include "format/records.h"

namespace agentmem::test {

// A zstd frame of `n` zero bytes, declaring content size n: first `raw`
// bytes (at most n) as raw blocks of zeros, the rest as RLE blocks, which take
// 4 bytes per 128 KiB. So the frame is about raw + n / 32768 bytes.
inline std::string ZstdZeros(uint64_t n, uint64_t raw = 0) {
  constexpr uint64_t kBlock = 128 * 1024;
  std::string f = "\x28\xb5\x2f\xfd";
  f.push_back(static_cast<char>(0xe0));  // 8-byte content size, single segment
  for (int i = 0; i < 8; i++) f.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  raw = std::min(raw, n);
  uint64_t left = n;
  auto header = [&](uint32_t type, uint64_t size, bool last) {
    const uint32_t h = (last ? 1u : 0u) | (type << 1) | static_cast<uint32_t>(size << 3);
    for (int i = 0; i < 3; i++) f.push_back(static_cast<char>((h >> (8 * i)) & 0xff));
  };
  if (n == 0) header(0, 0, true);
  while (left > 0) {
    const bool in_raw = n - left < raw;
    const uint64_t size = std::min(kBlock, in_raw ? raw - (n - left) : left);
    left -= size;
    header(in_raw ? 0 : 1, size, left == 0);
    if (in_raw) {
      f.append(size, '\0');
    } else {
      f.push_back('\0');
    }
  }
  return f;
}

// A file built page by page, as the engine writes one: the file header,
// superblock A (nothing vouched for), the meta transaction that records the
// vector space ("test-hash", 4, cosine), then what the caller appends.
class CraftedLog {
 public:
  static constexpr uint64_t kSalt = 0xc4af7edULL;

  CraftedLog() {
    format::FileHeader h;
    h.salt = kSalt;
    h.created_at = 1;
    bytes_ = format::EncodeFileHeader(h);
    bytes_.resize(format::kFirstPageOffset, '\0');
    format::Superblock sb;
    sb.salt = kSalt;
    sb.generation = 1;
    bytes_.replace(format::kSuperblockOffset[0], format::kSuperblockSize,
                   format::EncodeSuperblock(sb));
    format::MetaRecord m;
    m.entries = {{"vector.embedder", "test-hash"}, {"vector.dim", "4"}, {"vector.metric", "cosine"}};
    std::string r;
    format::EncodeMeta(m, &r);
    Page(format::PageType::kMeta, 1, Framed({r}));
    Commit();
  }

  // Appends a page holding `payload` as stored; `raw_length` set (non-zero)
  // flags it as a zstd frame decompressing to that many bytes.
  void Page(format::PageType type, uint32_t record_count, const std::string& payload,
            uint32_t raw_length = 0) {
    const uint64_t at = bytes_.size();
    std::string page = format::EncodePage(type, at, kSalt, record_count, payload, false);
    if (raw_length != 0) {
      page[5] = static_cast<char>(format::kPageFlagZstd);
      format::EncodeFixed32(page.data() + 24, raw_length);
      format::EncodeFixed32(page.data(), format::ChecksumOf(page).Masked());
    }
    if (txn_pages_++ == 0) txn_start_ = at;
    bytes_ += page;
  }

  // Ends the pages appended since the last commit as one transaction, with
  // the counters given (0: keep the previous).
  void Commit(uint64_t next_episode_id = 0) {
    format::CommitRecord c = last_;
    c.commit_seq = last_.commit_seq + 1;
    c.txn_start = txn_pages_ ? txn_start_ : bytes_.size();
    c.durable_through = c.txn_start;
    c.page_count = txn_pages_;
    c.commit_ts = 1000 + static_cast<int64_t>(c.commit_seq);
    if (next_episode_id) c.next_episode_id = next_episode_id;
    const uint64_t at = bytes_.size();
    bytes_ += format::EncodePage(format::PageType::kCommit, at, kSalt, 1, format::EncodeCommit(c),
                                 false);
    last_ = c;
    txn_pages_ = 0;
  }

  // A transaction of one episode with id `id` (and its text record).
  void Episode(uint64_t id, uint64_t next_episode_id) {
    format::EpisodeRecord e;
    e.id = id;
    e.user_id = "ann";
    e.session_id = "s1";
    e.role = "user";
    e.text = "hello there";
    e.ts = 5;
    std::string r;
    format::EncodeEpisode(e, &r);
    Page(format::PageType::kEpisodes, 1, Framed({r}));
    format::TextRecord t;
    t.episode_id = id;
    t.doc_len = 2;
    t.terms = {{"hello", 1}, {"there", 1}};
    std::string tr;
    format::EncodeText(t, &tr);
    Page(format::PageType::kText, 1, Framed({tr}));
    Commit(next_episode_id);
  }

  static std::string Framed(const std::vector<std::string>& records) {
    std::string payload;
    for (const std::string& r : records) format::AppendRecord(r, &payload);
    return payload;
  }

  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
  format::CommitRecord last_;
  uint64_t txn_start_ = 0;
  uint32_t txn_pages_ = 0;
};

// One episode (id 1), then a transaction whose episodes page is a zstd frame
// of 1 GiB of zeros in about 32 KiB, its checksum valid.
inline std::string BombFile() {
  CraftedLog log;
  log.Episode(1, 2);
  log.Page(format::PageType::kEpisodes, 1, ZstdZeros(format::kMaxPagePayload),
           format::kMaxPagePayload);
  log.Commit();
  return log.bytes();
}

// A page within the compression ratio (`raw` bytes of zeros stored in
// raw / 32 and a little more) whose header counts one record: the payload
// reads as `raw` empty ones.
inline std::string RecordFloodFile(uint32_t raw = 24u << 20) {
  CraftedLog log;
  log.Page(format::PageType::kEpisodes, 1,
           ZstdZeros(raw, raw / format::kMaxCompressionRatio), raw);
  log.Commit();
  return log.bytes();
}

// One episode (id 1), then a page whose header counts 2^32 - 1 records and
// holds one.
inline std::string HugeCountFile() {
  CraftedLog log;
  log.Episode(1, 2);
  format::EpisodeRecord e;
  e.id = 2;
  e.user_id = "ann";
  std::string r;
  format::EncodeEpisode(e, &r);
  log.Page(format::PageType::kEpisodes, 0xffffffffu, CraftedLog::Framed({r}));
  log.Commit(3);
  return log.bytes();
}

// One episode (id 1), then an episode record whose text claims 2^62 bytes.
inline std::string HugeLengthFile() {
  CraftedLog log;
  log.Episode(1, 2);
  std::string r;
  format::PutFixed64(&r, 2);  // id
  format::PutSignedVarint(&r, 5);
  format::PutSignedVarint(&r, 5);
  format::PutString(&r, "ann");
  format::PutString(&r, "s1");
  format::PutString(&r, "user");
  format::PutVarint(&r, uint64_t{1} << 62);  // text length
  r += "hello";
  log.Page(format::PageType::kEpisodes, 1, CraftedLog::Framed({r}));
  log.Commit(3);
  return log.bytes();
}

// One episode whose id is `id`, the next id after it.
inline std::string HugeIdFile(uint64_t id) {
  CraftedLog log;
  log.Episode(id, id + 1);
  return log.bytes();
}

// One episode (id 1), then a commit that moves the next episode id to `next`.
inline std::string HugeNextIdFile(uint64_t next) {
  CraftedLog log;
  log.Episode(1, 2);
  log.Commit(next);
  return log.bytes();
}

}  // namespace agentmem::test

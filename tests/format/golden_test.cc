// tests/format/golden_test.cc -- the format-version-1 golden file and the
// worked example of docs/format.md §9 (RELIABILITY.md R10).
//
// tests/golden/format-v1-two-episodes.agentmem is the file the engine writes for
// two episodes of one user, committed in one transaction, with a fixed salt and
// a fixed clock. These tests check that
//   (a) the engine still writes exactly those bytes,
//   (b) the annotated hex dump in docs/format.md is exactly those bytes,
//   (c) the engine reads the file back (read-only) as exactly the two episodes,
//       and the superblock its clean close wrote vouches for the whole file,
//   (d) the same file with a newer read_version is refused with kFormatVersion,
//       and with a newer write_version opens read-only.
// The tests run with the repository root as working directory (meson `workdir`).
// While version 1 is unreleased, tests/golden/README.md says how to regenerate
// the golden file and the dump when the format changes.
#include <doctest/doctest.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "format/coding.h"
#include "format/crc32c.h"
#include "format/file_header.h"
#include "tests/util/temp_dir.h"

using namespace agentmem;

namespace {

constexpr const char* kGoldenPath = "tests/golden/format-v1-two-episodes.agentmem";
constexpr const char* kFormatDoc = "docs/format.md";
constexpr uint64_t kGoldenSalt = 0x0123456789abcdefull;
constexpr int64_t kGoldenClock = 1767225600000000;  // 2026-01-01T00:00:00Z, unix microseconds

// The vector space of the golden file. It names an application's embedder, not
// the built-in one, so that the engine stores the episodes exactly as given,
// without vectors: with the built-in embedder it would compute 384-component
// vectors, the episodes page would be zstd-compressed, and the bytes would
// depend on the zstd version and could not be shown record by record in
// docs/format.md §9.
engine::VectorSpace GoldenSpace() { return engine::VectorSpace{"example-v1", 384, "cosine"}; }

// The two episodes as the application hands them to Remember().
std::vector<format::EpisodeRecord> GoldenInputs() {
  format::EpisodeRecord a;
  a.user_id = "alice";
  a.session_id = "s1";
  a.role = "user";
  a.text = "I moved to Lisbon.";
  a.ts = kGoldenClock - 60000000;
  format::EpisodeRecord b;
  b.user_id = "alice";
  b.session_id = "s1";
  b.role = "assistant";
  b.text = "Noted: Lisbon.";
  b.ts = kGoldenClock - 30000000;
  return {a, b};
}

// The two episodes as the file stores them: ids and created_at assigned.
std::vector<format::EpisodeRecord> GoldenStored() {
  std::vector<format::EpisodeRecord> v = GoldenInputs();
  for (size_t i = 0; i < v.size(); i++) {
    v[i].id = i + 1;
    v[i].created_at = kGoldenClock;
  }
  return v;
}

engine::Options GoldenOptions(engine::Env* env) {
  engine::Options o;
  o.env = env;
  o.sync = engine::SyncMode::kFull;
  o.salt = kGoldenSalt;
  o.clock = [] { return kGoldenClock; };
  o.space = GoldenSpace();
  o.space_given = true;
  // The golden file's text settings: the version 1 default, without the
  // stemming, query stop words and context a new file gets now.
  o.tokenizer = index::TokenizerOptions{};
  return o;
}

std::string ReadWhole(engine::Env* env, const std::string& path) {
  std::unique_ptr<engine::File> f;
  REQUIRE(env->Open(path, engine::OpenMode{true}, &f).ok());
  uint64_t size = 0;
  REQUIRE(f->Size(&size).ok());
  std::string bytes;
  REQUIRE(f->ReadAt(0, size, &bytes).ok());
  return bytes;
}

// Creates the golden file from scratch in an in-memory Env and returns its bytes.
std::string BuildGolden() {
  auto env = engine::NewMemEnv();
  std::unique_ptr<engine::Database> db;
  Status s = engine::Database::Open("golden.agentmem", GoldenOptions(env.get()), &db);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(db->Begin().ok());
  uint64_t expect_id = 1;
  for (const format::EpisodeRecord& r : GoldenInputs()) {
    uint64_t id = 0;
    s = db->Remember(r, &id);
    REQUIRE_MESSAGE(s.ok(), s.ToString());
    CHECK(id == expect_id++);
  }
  s = db->Commit();
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(db->Close().ok());
  return ReadWhole(env.get(), "golden.agentmem");
}

std::string ReadSourceFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << std::string(path)
                                            << " (run the tests from the repository root)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Hex(std::string_view bytes, size_t at, size_t n) {
  std::string out;
  char buf[4];
  for (size_t i = at; i < at + n && i < bytes.size(); i++) {
    std::snprintf(buf, sizeof buf, "%02x ", static_cast<unsigned char>(bytes[i]));
    out += buf;
  }
  return out;
}

// The first offset where two byte strings differ, with a few bytes of each.
std::string FirstDifference(std::string_view a, std::string_view b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) i++;
  if (i == a.size() && i == b.size()) return "identical";
  std::ostringstream m;
  m << "first difference at offset " << i << " (0x" << std::hex << i << std::dec << "): "
    << Hex(a, i, 8) << "vs " << Hex(b, i, 8) << "; sizes " << a.size() << " and " << b.size();
  return m.str();
}

// Parses the one ```hexdump block of docs/format.md. Its grammar
// (tests/golden/README.md): `#` starts a comment; every other non-blank line is
// an offset in hex followed by byte tokens, each two hex digits or `00*N`
// (N zero bytes, N decimal); a line's offset must equal the number of bytes
// before it. Returns the bytes; on a grammar error *error says where.
std::string ParseHexdump(const std::string& markdown, std::string* error) {
  std::istringstream in(markdown);
  std::string line, bytes;
  int blocks = 0, line_no = 0;
  bool inside = false;
  auto fail = [&](const std::string& why) {
    if (error->empty()) *error = std::string(kFormatDoc) + ":" + std::to_string(line_no) + ": " + why;
  };
  while (std::getline(in, line)) {
    line_no++;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!inside) {
      if (line.rfind("```hexdump", 0) == 0) {
        inside = true;
        blocks++;
      }
      continue;
    }
    if (line.rfind("```", 0) == 0) {
      inside = false;
      continue;
    }
    if (blocks > 1) continue;
    std::string data = line.substr(0, line.find('#'));
    std::istringstream tokens(data);
    std::string offset_token;
    if (!(tokens >> offset_token)) continue;  // blank or comment-only line
    char* end = nullptr;
    unsigned long long offset = std::strtoull(offset_token.c_str(), &end, 16);
    if (*end != '\0') {
      fail("bad offset \"" + offset_token + "\"");
      continue;
    }
    if (offset != bytes.size()) {
      fail("offset " + offset_token + " but " + std::to_string(bytes.size()) +
           " bytes precede this line");
    }
    std::string tok;
    while (tokens >> tok) {
      if (tok.size() == 2 && std::isxdigit(static_cast<unsigned char>(tok[0])) &&
          std::isxdigit(static_cast<unsigned char>(tok[1]))) {
        bytes.push_back(static_cast<char>(std::strtoul(tok.c_str(), nullptr, 16)));
      } else if (tok.rfind("00*", 0) == 0 && tok.size() > 3 &&
                 tok.find_first_not_of("0123456789", 3) == std::string::npos) {
        bytes.append(std::strtoull(tok.c_str() + 3, nullptr, 10), '\0');
      } else {
        fail("bad byte token \"" + tok + "\"");
      }
    }
  }
  if (blocks != 1) *error = std::string(kFormatDoc) + ": expected one ```hexdump block, found " + std::to_string(blocks);
  if (inside && error->empty()) *error = std::string(kFormatDoc) + ": the ```hexdump block is not closed";
  return bytes;
}

void CheckEpisodesAreTheGoldenOnes(engine::Database* db) {
  std::vector<uint64_t> ids;
  REQUIRE(db->ListEpisodeIds("alice", nullptr, &ids).ok());
  CHECK(ids == std::vector<uint64_t>{1, 2});
  std::vector<format::EpisodeRecord> want = GoldenStored();
  for (size_t i = 0; i < want.size(); i++) {
    format::EpisodeRecord got;
    Status s = db->GetEpisode(want[i].id, &got);
    REQUIRE_MESSAGE(s.ok(), s.ToString());
    CHECK(got == want[i]);
  }
}

}  // namespace

TEST_CASE("the golden file is what the engine writes for two episodes with a fixed salt and clock") {
  std::string golden = ReadSourceFile(kGoldenPath);
  std::string built = BuildGolden();
  if (const char* out = std::getenv("AGENTMEM_GOLDEN_OUT")) test::WriteFileBytes(out, built);
  CHECK_MESSAGE(built == golden, FirstDifference(built, golden));
}

TEST_CASE("the hex dump in docs/format.md is exactly the golden file") {
  std::string golden = ReadSourceFile(kGoldenPath);
  std::string error;
  std::string parsed = ParseHexdump(ReadSourceFile(kFormatDoc), &error);
  REQUIRE_MESSAGE(error.empty(), error);
  CHECK_MESSAGE(parsed == golden, FirstDifference(parsed, golden));
}

TEST_CASE("the hex dump parser refuses a dump whose offsets do not match its bytes") {
  // So that test (b) cannot pass on a dump that merely has the right bytes.
  std::string error;
  ParseHexdump("```hexdump\n000000  01 02  # two bytes\n000003  03\n```\n", &error);
  CHECK(error.find("offset 000003 but 2 bytes precede") != std::string::npos);
  error.clear();
  std::string ok = ParseHexdump("x\n```hexdump\n# c\n000000  00*3 ab\n\n000004 cd\n```\n", &error);
  CHECK(error.empty());
  CHECK(ok == std::string("\0\0\0\xab\xcd", 5));
  error.clear();
  ParseHexdump("```hexdump\n000000  0g\n```\n", &error);
  CHECK(error.find("bad byte token") != std::string::npos);
}

TEST_CASE("the golden file opens read-only and holds exactly the two episodes") {
  test::TempDir dir;
  std::string path = dir.File("golden.agentmem");
  const std::string golden = ReadSourceFile(kGoldenPath);
  test::WriteFileBytes(path, golden);
  engine::Options o;
  o.read_only = true;
  std::unique_ptr<engine::Database> db;
  Status s = engine::Database::Open(path, o, &db);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CheckEpisodesAreTheGoldenOnes(db.get());

  engine::Stats st;
  REQUIRE(db->GetStats(&st).ok());
  CHECK(st.episodes == 2);
  CHECK(st.users == 1);
  CHECK(st.commits == 2);
  CHECK(st.facts == 0);
  CHECK(st.blocks == 0);
  CHECK(st.torn_bytes == 0);
  CHECK(st.file_bytes == golden.size());
  CHECK(db->space() == GoldenSpace());

  format::EpisodeRecord none;
  CHECK(db->GetEpisode(3, &none).code() == kNotFound);
  std::vector<uint64_t> ids = {99};
  REQUIRE(db->ListEpisodeIds("bob", nullptr, &ids).ok());
  CHECK(ids.empty());
  REQUIRE(db->Close().ok());
  CHECK(test::ReadFileBytes(path) == golden);
}

TEST_CASE("the golden file opened read-write and closed keeps every byte") {
  test::TempDir dir;
  std::string path = dir.File("golden.agentmem");
  const std::string golden = ReadSourceFile(kGoldenPath);
  test::WriteFileBytes(path, golden);
  std::unique_ptr<engine::Database> db;
  Status s = engine::Database::Open(path, engine::Options{}, &db);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CheckEpisodesAreTheGoldenOnes(db.get());
  REQUIRE(db->Close().ok());
  CHECK(test::ReadFileBytes(path) == golden);
}

TEST_CASE("the golden file with a newer read version is refused with kFormatVersion") {
  test::TempDir dir;
  std::string path = dir.File("future.agentmem");
  std::string future = ReadSourceFile(kGoldenPath);
  REQUIRE(future.size() > format::kHeaderSize);
  format::EncodeFixed16(future.data() + 8, format::kReadVersion + 1);
  format::EncodeFixed32(future.data() + 60, format::MaskCrc(format::Crc32c(future.data(), 60)));
  test::WriteFileBytes(path, future);

  for (bool read_only : {true, false}) {
    CAPTURE(read_only);
    engine::Options o;
    o.read_only = read_only;
    o.create = false;
    std::unique_ptr<engine::Database> db;
    Status s = engine::Database::Open(path, o, &db);
    CHECK(s.code() == kFormatVersion);
    CHECK(db == nullptr);
    CHECK(s.message().find("read version 3 is newer than this library supports (2)") !=
          std::string::npos);
    CHECK(s.message().find("upgrade agentmem") != std::string::npos);
  }
  CHECK(test::ReadFileBytes(path) == future);  // refusing it changed nothing
}

TEST_CASE("the superblock of the golden file's clean close vouches for the whole file") {
  const std::string golden = ReadSourceFile(kGoldenPath);
  REQUIRE(golden.size() > format::kFirstPageOffset);
  format::FileHeader h;
  REQUIRE(format::DecodeFileHeader(golden, &h).ok());
  format::Superblock sb[2];
  for (int slot = 0; slot < 2; slot++) {
    CAPTURE(slot);
    Status s = format::DecodeSuperblock(
        std::string_view(golden).substr(format::kSuperblockOffset[slot], format::kSuperblockSize),
        h.salt, &sb[slot]);
    REQUIRE_MESSAGE(s.ok(), s.ToString());
    CHECK(sb[slot].salt == kGoldenSalt);
    CHECK(sb[slot].scan_from == format::kFirstPageOffset);  // always, in version 1
    CHECK(sb[slot].commit_seq == 0);
    CHECK(golden.substr(format::kSuperblockOffset[slot] + 48, 12) == std::string(12, '\0'));
  }
  // A is the creation's: it vouches for the created file, header, superblocks
  // and transaction 1, which ends where transaction 2 starts.
  const uint64_t txn2_start = format::DecodeFixed64(golden.data() + golden.size() - 64 + 8);
  CHECK(sb[0].generation == 1);
  CHECK(sb[0].durable_through == txn2_start);
  // B is the clean close's: the next generation, in the other slot, vouching for
  // every byte up to the end of the last commit, which is the end of the file.
  CHECK(sb[1].generation == 2);
  CHECK(sb[1].durable_through == golden.size());
}

TEST_CASE("the golden file with a newer write version opens read-only") {
  test::TempDir dir;
  std::string path = dir.File("newer-writer.agentmem");
  std::string newer = ReadSourceFile(kGoldenPath);
  REQUIRE(newer.size() > format::kHeaderSize);
  format::EncodeFixed16(newer.data() + 10, format::kWriteVersion + 1);
  format::EncodeFixed32(newer.data() + 60, format::MaskCrc(format::Crc32c(newer.data(), 60)));
  test::WriteFileBytes(path, newer);

  engine::Options o;
  o.create = false;
  std::unique_ptr<engine::Database> db;
  Status s = engine::Database::Open(path, o, &db);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CheckEpisodesAreTheGoldenOnes(db.get());
  format::EpisodeRecord r = GoldenInputs()[0];
  uint64_t id = 0;
  s = db->Remember(r, &id);
  CHECK(s.code() == kReadOnlyFile);
  CHECK(s.message().find("write version 3 is newer than this library writes (2)") !=
        std::string::npos);
  REQUIRE(db->Close().ok());
  CHECK(test::ReadFileBytes(path) == newer);  // not even a superblock was written
}

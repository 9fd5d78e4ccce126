// tests/format/compress_test.cc -- the zstd frame wrapper (format/compress.cc):
// when compression pays, frames that must be refused as page corruption, and
// a thread whose zstd allocations fail (test hooks builds).
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <thread>

#include "format/compress.h"
#include "format/page.h"

using namespace agentmem;
using namespace agentmem::format;

namespace {

// Text of words drawn from a small vocabulary: it compresses a few times,
// as conversation text does.
std::string Compressible(size_t n) {
  static const char* const kWords[] = {"the", "cat", "sat", "on", "mat", "a", "dog", "ran",
                                       "to", "park", "and", "then", "home", "slept", "ate"};
  std::mt19937 rng(7);
  std::string s;
  while (s.size() < n) {
    s += kWords[rng() % std::size(kWords)];
    s += rng() % 8 == 0 ? ". " : " ";
  }
  s.resize(n);
  return s;
}

std::string Repeated(size_t n) {
  std::string s;
  while (s.size() < n) s += "the cat sat on the mat; ";
  s.resize(n);
  return s;
}

std::string Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// A frame for `src`, which must compress.
std::string Frame(const std::string& src) {
  std::string z;
  REQUIRE(CompressIfItPays(src, &z));
  return z;
}

void CheckRefused(const std::string& frame, size_t expected, const char* why) {
  std::string out;
  Status s = Decompress(frame, expected, 42, &out);
  CAPTURE(s.ToString());
  CHECK(s.code() == kCorruptPage);
  CHECK(s.page_no() == 42);
  CHECK(s.message().find("page 42") != std::string::npos);
  CHECK(s.message().find(why) != std::string::npos);
}

}  // namespace

TEST_CASE("a payload is compressed only when that saves an eighth of its bytes, and decodes back") {
  std::string z;
  CHECK_FALSE(CompressIfItPays(Compressible(127), &z));  // too short to try
  CHECK_FALSE(CompressIfItPays(Random(4096, 1), &z));    // random bytes do not shrink
  for (size_t n : {128, 1000, 70000}) {
    CAPTURE(n);
    const std::string src = Compressible(n);
    REQUIRE(CompressIfItPays(src, &z));
    CHECK(z.size() <= n - n / 8);
    std::string out = "left over";
    REQUIRE(Decompress(z, n, 1, &out).ok());
    CHECK(out == src);
  }
}

TEST_CASE("float vectors are stored as they are, and bytes of every value compress when they repeat") {
  // 384 floats of unit scale: the bulk of an episode page, which zstd
  // cannot shrink by an eighth.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::string vectors;
  for (int i = 0; i < 4 * 384; i++) {
    const float f = normal(rng) * 0.05f;
    vectors.append(reinterpret_cast<const char*>(&f), sizeof f);
  }
  std::string z;
  CHECK_FALSE(CompressIfItPays(vectors, &z));
  // The same bytes twice, and random bytes thrice: no byte value is much
  // commoner than another, yet the repeats pay.
  for (const std::string& src : {vectors + vectors, Random(1000, 2) + Random(1000, 2) + Random(1000, 2)}) {
    CAPTURE(src.size());
    REQUIRE(CompressIfItPays(src, &z));
    CHECK(z.size() <= src.size() - src.size() / 8);
    std::string out;
    REQUIRE(Decompress(z, src.size(), 1, &out).ok());
    CHECK(out == src);
  }
  // Text with a vector: the text's bytes pay for both.
  const std::string mixed = Compressible(4000) + vectors.substr(0, 1536);
  REQUIRE(CompressIfItPays(mixed, &z));
}

TEST_CASE("a payload that would shrink more than the ratio a reader accepts is stored as it is") {
  std::string z;
  // 70,000 bytes of one phrase make a frame of a few dozen bytes: more than
  // kMaxCompressionRatio times smaller, which a reader refuses.
  CHECK_FALSE(CompressIfItPays(Repeated(70000), &z));
  // Up to the ratio it compresses.
  const std::string src = Repeated(500);
  REQUIRE(CompressIfItPays(src, &z));
  CHECK(uint64_t{z.size()} * kMaxCompressionRatio >= src.size());
}

TEST_CASE("a zstd frame that is not one, or records another size, is refused naming the page") {
  const std::string src = Compressible(5000);
  const std::string z = Frame(src);
  CheckRefused("not a zstd frame at all", src.size(), "does not match recorded size");
  CheckRefused("", src.size(), "does not match recorded size");
  CheckRefused(z, src.size() + 1, "does not match recorded size");
  CheckRefused(z, src.size() - 1, "does not match recorded size");
}

TEST_CASE("a zstd frame cut short or with a damaged block is refused naming the page") {
  const std::string src = Compressible(5000);
  const std::string z = Frame(src);
  // The header (and its content size) is intact; the blocks are not.
  CheckRefused(z.substr(0, z.size() - 1), src.size(), "does not decode");
  CheckRefused(z.substr(0, z.size() / 2), src.size(), "does not decode");
  std::string trailing = z + "x";  // a second frame that is only one byte
  CheckRefused(trailing, src.size(), "does not decode");
}

#ifdef AGENTMEM_TEST_HOOKS
TEST_CASE("a thread whose zstd allocation failed compresses and decompresses on its next call") {
  const std::string src = Compressible(20000);
  const std::string z = Frame(src);
  // Each allocation zstd makes on a fresh thread, failed in turn: making the
  // compression context, its workspace, the decompression context. The call
  // that met it stores the page uncompressed or reports kNoMem; the next call
  // of that thread works (a context that could not be made is made again).
  int failing = 0, no_compress = 0, no_decompress = 0;
  for (int after = 0; after < 16; after++) {
    CAPTURE(after);
    bool failed = false;
    std::thread([&] {
      FailZstdAllocationForTest(after);
      std::string c, out;
      const bool compressed = CompressIfItPays(src, &c);
      Status d = Decompress(z, src.size(), 3, &out);
      failed = ZstdAllocationsFailedForTest() == 1;
      FailZstdAllocationForTest(-1);
      if (!failed) {
        CHECK(compressed);
        CHECK(d.ok());
        return;
      }
      if (!compressed) no_compress++;
      if (!d.ok()) {
        CHECK(d.code() == kNoMem);
        no_decompress++;
      }
      CHECK(compressed != d.ok());  // the one failed allocation failed one call
      // (CHECK, not REQUIRE: an exception must not leave the thread.)
      std::string again;
      CHECK(CompressIfItPays(src, &c));
      CHECK(Decompress(c, src.size(), 3, &again).ok());
      CHECK(again == src);
      again.clear();
      CHECK(Decompress(z, src.size(), 3, &again).ok());
      CHECK(again == src);
    }).join();
    if (!failed) break;
    failing++;
  }
  CHECK(failing >= 3);
  CHECK(no_compress >= 2);  // the context, its workspace
  CHECK(no_decompress >= 1);
}
#endif

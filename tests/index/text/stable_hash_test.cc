// tests/index/text/stable_hash_test.cc -- the fixed hash of the built-in
// embedder (index/text/stable_hash.h).
#include "index/text/stable_hash.h"

#include <doctest/doctest.h>

#include <set>
#include <string>

namespace agentmem::index {
namespace {

TEST_CASE("FNV-1a 64 matches its published test vectors") {
  CHECK(Fnv1a64("") == 0xcbf29ce484222325ULL);
  CHECK(Fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(Fnv1a64("foobar") == 0x85944171f73967e8ULL);
}

TEST_CASE("hashing in pieces equals hashing the concatenation") {
  CHECK(Fnv1a64("bar", Fnv1a64("foo")) == Fnv1a64("foobar"));
}

TEST_CASE("the mix is fixed: known values never change") {
  // Computed once; the embedder's output, and so stored vectors, depend on them.
  CHECK(Mix64(0) == 0);
  CHECK(Mix64(1) == 0x5692161d100b05e5ULL);
  CHECK(StableHash64("agentmem") == 0xe4376286e00b6689ULL);
}

TEST_CASE("nearby inputs spread over all output bits") {
  std::set<uint64_t> low_bytes;
  int top_bits = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t h = StableHash64(std::string("w").append(std::to_string(i)));
    low_bytes.insert(h & 0xff);
    top_bits += static_cast<int>(h >> 63);
  }
  CHECK(low_bytes.size() > 240);
  CHECK(top_bits > 400);
  CHECK(top_bits < 600);
}

}  // namespace
}  // namespace agentmem::index

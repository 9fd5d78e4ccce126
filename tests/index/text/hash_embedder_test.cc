// tests/index/text/hash_embedder_test.cc -- the built-in embedder
// "agentmem-hash-v1" (index/text/hash_embedder.h): determinism, unit norm,
// dimension option, similarity behaviour, and frozen output values.
#include "index/text/hash_embedder.h"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/util/seed.h"

namespace agentmem::index {
namespace {

HashEmbedder Make(uint32_t dimension = 384) {
  auto embedder = HashEmbedder::Create({dimension});
  REQUIRE(embedder.ok());
  return *embedder;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); i++) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

double Norm(const std::vector<float>& v) { return std::sqrt(Dot(v, v)); }

// An order-sensitive digest of every bit of a vector.
uint64_t Digest(const std::vector<float>& v) {
  uint64_t h = 0;
  for (size_t i = 0; i < v.size(); i++) {
    h = h * 0x100000001b3ULL + (i + 1) * std::bit_cast<uint32_t>(v[i]);
  }
  return h;
}

TEST_CASE("the embedder is named agentmem-hash-v1 and defaults to 384 dimensions") {
  HashEmbedder e = Make();
  CHECK(e.name() == "agentmem-hash-v1");
  CHECK(e.dimension() == 384);
  CHECK(e.Embed("hello").size() == 384);
}

TEST_CASE("the dimension option is respected and bounded") {
  for (uint32_t dim : {1u, 8u, 100u, 1536u, HashEmbedder::kMaxDimension}) {
    CHECK(Make(dim).Embed("some text to embed").size() == dim);
  }
  CHECK(HashEmbedder::Create({0}).status().code() == kRange);
  CHECK(HashEmbedder::Create({HashEmbedder::kMaxDimension + 1}).status().code() == kRange);
}

TEST_CASE("embedding is deterministic across calls and embedder instances") {
  std::string text = "Melanie painted a lake at sunrise last year.";
  CHECK(Make().Embed(text) == Make().Embed(text));
  HashEmbedder e = Make();
  CHECK(e.Embed(text) == e.Embed(text));
}

TEST_CASE("every text with a word embeds to a unit vector; a text without one to zero") {
  std::mt19937_64 rng(test::Seed());
  HashEmbedder e = Make();
  for (const char* text : {"a", "Hello, world!", "Straße ΣΟΦΙΑ Москва", "42",
                           "a very long sentence about many different things and more"}) {
    INFO(text);
    CHECK(Norm(e.Embed(text)) == doctest::Approx(1.0).epsilon(1e-6));
  }
  for (int round = 0; round < 200; round++) {
    std::string bytes(1 + rng() % 80, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    std::vector<float> v = e.Embed(bytes);
    double norm = Norm(v);
    REQUIRE((norm == 0.0 || std::fabs(norm - 1.0) < 1e-6));
  }
  for (const char* text : {"", "   ", "!!! ...", "👍 ❤️"}) {
    std::vector<float> v = e.Embed(text);
    CHECK(Norm(v) == 0.0);
  }
}

TEST_CASE("similar texts are closer than unrelated ones") {
  HashEmbedder e = Make();
  auto first = e.Embed("I love baking sourdough bread");
  auto related = e.Embed("baking bread with sourdough");
  auto unrelated = e.Embed("the stock market fell today");
  double near = Dot(first, related);
  double far = Dot(first, unrelated);
  MESSAGE("cosine related " << near << ", unrelated " << far);
  CHECK(near > far + 0.3);
  // Character n-grams let inflected forms meet.
  CHECK(Dot(e.Embed("painting"), e.Embed("paintings")) > Dot(e.Embed("painting"), e.Embed("dog")));
  // Case and accents-as-letters: the same word in other case is the same vector.
  CHECK(e.Embed("CAFÉ Москва") == e.Embed("café москва"));
}

TEST_CASE("EmbedInto refuses an output of the wrong size and leaves it untouched") {
  HashEmbedder e = Make(16);
  std::vector<float> out(15, 7.0f);
  CHECK(e.EmbedInto("text", out).code() == kMismatchDimension);
  CHECK(out == std::vector<float>(15, 7.0f));
  std::vector<float> right(16);
  REQUIRE(e.EmbedInto("text", right).ok());
  CHECK(right == e.Embed("text"));
}

// The embedder is part of the file format: vectors stored in files must stay
// reproducible. These values were computed once from this implementation; a
// change here means a new embedder name, not a new expected value.
TEST_CASE("frozen output: known components of known texts never change") {
  {
    auto v = Make(384).Embed("Crème brûlée at the Café, 2024!");
    CHECK(v[2] == 0x1.1053f8p-3f);
    CHECK(v[9] == 0x1.6b1aap-4f);
    CHECK(v[14] == -0x1.1053f8p-3f);
    CHECK(v[16] == 0x1.6b1aap-5f);
    CHECK(v[0] == 0.0f);
    CHECK(Digest(v) == 0xa1441ecc28ffca28ULL);
  }
  {
    auto v = Make(64).Embed("Hello world");
    CHECK(v[5] == 0x1.c27ffcp-3f);
    CHECK(v[23] == -0x1.c27ffcp-3f);
    CHECK(Digest(v) == 0xf8779448075af96fULL);
  }
  {
    auto v = Make(1536).Embed("I love baking sourdough bread");
    CHECK(v[0] == 0x1.eabc46p-4f);
    CHECK(v[89] == 0x1.47282ep-3f);
    CHECK(v[142] == -0x1.47282ep-3f);
    CHECK(Digest(v) == 0xfd9cab1d9bba5c7eULL);
  }
}

}  // namespace
}  // namespace agentmem::index

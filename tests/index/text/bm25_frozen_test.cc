// tests/index/text/bm25_frozen_test.cc -- frozen BM25 images (bm25.h,
// bm25_frozen.cc): an index attached to its frozen image ranks exactly like
// the index it came from, keeps taking documents on top (terms old and new),
// freezes again with those, and refuses a damaged image.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "index/text/bm25.h"
#include "tests/util/seed.h"

namespace agentmem::index {
namespace {

using Tokens = std::vector<std::string>;

Tokens RandomDoc(std::mt19937_64& rng, size_t vocab) {
  Tokens doc(rng() % 25);
  for (std::string& t : doc) {
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    t = "w" + std::to_string(static_cast<size_t>(u * u * static_cast<double>(vocab)));
  }
  return doc;
}

// A frozen image in 8-byte aligned memory that outlives the index.
struct Image {
  std::shared_ptr<uint64_t[]> words;
  size_t size = 0;
  const char* data() const { return reinterpret_cast<const char*>(words.get()); }
  static Image Of(const Bm25Index& index) {
    std::string bytes;
    index.EncodeFrozen(&bytes);
    Image im;
    im.size = bytes.size();
    im.words = std::shared_ptr<uint64_t[]>(new uint64_t[bytes.size() / 8 + 1]());
    std::memcpy(im.words.get(), bytes.data(), bytes.size());
    return im;
  }
};

void CheckSame(const Bm25Index& a, const Bm25Index& b, std::mt19937_64& rng, size_t vocab) {
  CHECK(a.doc_count() == b.doc_count());
  CHECK(a.total_length() == b.total_length());
  CHECK(a.term_count() == b.term_count());
  for (int q = 0; q < 60; q++) {
    Tokens query = RandomDoc(rng, vocab + 20);  // some words no document has
    for (size_t k : {size_t{1}, size_t{10}, size_t{50}}) {
      auto x = a.TopK(query, k), y = b.TopK(query, k);
      REQUIRE(x.size() == y.size());
      for (size_t i = 0; i < x.size(); i++) {
        CHECK(x[i].doc_id == y[i].doc_id);
        CHECK(x[i].score == y[i].score);
      }
      auto z = b.TopKBruteForce(query, k);
      REQUIRE(z.size() == y.size());
      for (size_t i = 0; i < z.size(); i++) CHECK(z[i].doc_id == y[i].doc_id);
    }
  }
}

}  // namespace

TEST_CASE("an index attached to its frozen image ranks exactly like the original") {
  std::mt19937_64 rng(test::Seed());
  const size_t vocab = 300;
  Bm25Index live, attached;
  uint64_t id = 1;
  for (; id <= 2000; id++) REQUIRE(live.Add(id, RandomDoc(rng, vocab)).ok());
  Image image = Image::Of(live);
  REQUIRE(attached.AttachFrozen(image.data(), image.size, 10000).ok());
  CHECK(attached.Contains(5));
  CHECK_FALSE(attached.Contains(2001));
  CheckSame(live, attached, rng, vocab);

  // Documents on top: old terms get copied lists, new terms new ones.
  for (; id <= 2600; id++) {
    Tokens doc = RandomDoc(rng, vocab + 50);
    REQUIRE(live.Add(id, doc).ok());
    REQUIRE(attached.Add(id, doc).ok());
  }
  CheckSame(live, attached, rng, vocab + 50);
  CHECK(attached.Add(7, Tokens{"w1"}).code() == kConstraint);
  REQUIRE(attached.Remove(2500).ok());
  REQUIRE(live.Remove(2500).ok());
  CheckSame(live, attached, rng, vocab + 50);
}

TEST_CASE("a frozen image whose document ids are far apart attaches and ranks like the original") {
  // Ids near 2^63 and a few small ones: the check that every posting names a
  // document of the image must not allocate by the size of the ids.
  std::mt19937_64 rng(test::Seed());
  const size_t vocab = 100;
  Bm25Index live, attached;
  const uint64_t far = (uint64_t{1} << 63) - 1000;
  for (uint64_t id = 1; id <= 300; id++) {
    REQUIRE(live.Add(id % 3 == 0 ? far + id : id, RandomDoc(rng, vocab)).ok());
  }
  Image image = Image::Of(live);
  REQUIRE(attached.AttachFrozen(image.data(), image.size, UINT64_MAX - 1).ok());
  CHECK(attached.Contains(far + 3));
  CHECK_FALSE(attached.Contains(far + 4));
  CheckSame(live, attached, rng, vocab);
}

TEST_CASE("removing a document of a frozen image thaws it and ranks like the original") {
  std::mt19937_64 rng(test::Seed());
  const size_t vocab = 200;
  Bm25Index live, attached;
  uint64_t id = 1;
  for (; id <= 1500; id++) REQUIRE(live.Add(id, RandomDoc(rng, vocab)).ok());
  REQUIRE(live.Add(id++, Tokens{}).ok());  // an empty document too
  Image image = Image::Of(live);
  REQUIRE(attached.AttachFrozen(image.data(), image.size, 10000).ok());
  // A few documents on top first, so that some frozen terms have moved.
  for (; id <= 1700; id++) {
    Tokens doc = RandomDoc(rng, vocab + 20);
    REQUIRE(live.Add(id, doc).ok());
    REQUIRE(attached.Add(id, doc).ok());
  }
  for (uint64_t gone : {uint64_t{7}, uint64_t{1501}, uint64_t{1600}, uint64_t{1200}}) {
    REQUIRE(attached.Remove(gone).ok());
    REQUIRE(live.Remove(gone).ok());
    CHECK_FALSE(attached.Contains(gone));
  }
  CHECK(attached.frozen_docs().empty());
  CHECK(attached.doc_count() == live.doc_count());
  CHECK(attached.total_length() == live.total_length());
  CHECK(attached.term_count() == live.term_count());
  CHECK(attached.Remove(7).code() == kNotFound);
  CheckSame(live, attached, rng, vocab + 20);

  // Frozen again, with the documents added on top.
  Image again = Image::Of(attached);
  Bm25Index third;
  REQUIRE(third.AttachFrozen(again.data(), again.size, 10000).ok());
  CheckSame(live, third, rng, vocab + 50);
}

TEST_CASE("a damaged frozen image is refused with kCorruptIndex") {
  std::mt19937_64 rng(test::Seed());
  Bm25Index live;
  for (uint64_t id = 1; id <= 300; id++) REQUIRE(live.Add(id, RandomDoc(rng, 80)).ok());
  Image image = Image::Of(live);
  // A document id above the limit, a count, a term offset, a posting's doc id.
  const size_t docs_at = 80, terms_at = 80 + 300 * 8;
  const size_t postings_at = terms_at + live.term_count() * 32;
  const std::pair<size_t, uint64_t> damages[] = {
      {docs_at + 8 * 10, 999999}, {8, 301}, {terms_at + 32 * 3, 77}, {postings_at + 16 * 5, 12345}};
  for (const auto& damage : damages) {
    const size_t at = damage.first;  // (CAPTURE cannot name a structured binding in clang 14)
    const uint64_t value = damage.second;
    CAPTURE(at);
    Image bad = Image::Of(live);
    std::memcpy(reinterpret_cast<char*>(bad.words.get()) + at, &value, at == terms_at + 32 * 3 ? 4 : 8);
    Bm25Index index;
    Status s = index.AttachFrozen(bad.data(), bad.size, 1000);
    CHECK(s.code() == kCorruptIndex);
  }
  Bm25Index index;
  CHECK(index.AttachFrozen(image.data(), image.size - 8, 1000).code() == kCorruptIndex);
  REQUIRE(index.AttachFrozen(image.data(), image.size, 1000).ok());
  CHECK(index.AttachFrozen(image.data(), image.size, 1000).code() == kMisuse);
}

TEST_CASE("a top-k across indexes attached to frozen images ranks like one index of everything") {
  std::mt19937_64 rng(test::Seed() + 3);
  const size_t vocab = 200;
  // 30 users: every other one frozen, some with documents added on top and
  // one with a document of its image removed (thawed).
  std::vector<Bm25Index> live(30);
  std::vector<Image> images;
  std::vector<std::unique_ptr<Bm25Index>> attached;
  Bm25Index whole;
  uint64_t id = 1;
  for (Bm25Index& user : live) {
    for (int d = 0; d < 40; d++, id++) {
      Tokens doc = RandomDoc(rng, vocab);
      REQUIRE(user.Add(id, doc).ok());
      REQUIRE(whole.Add(id, doc).ok());
    }
  }
  std::vector<const Bm25Index*> parts;
  for (size_t u = 0; u < live.size(); u++) {
    if (u % 2 == 1) {
      parts.push_back(&live[u]);
      continue;
    }
    images.push_back(Image::Of(live[u]));
    attached.push_back(std::make_unique<Bm25Index>());
    REQUIRE(attached.back()->AttachFrozen(images.back().data(), images.back().size, 1 << 20).ok());
    if (u % 4 == 0) {
      Tokens doc = RandomDoc(rng, vocab + 10);
      REQUIRE(attached.back()->Add(id, doc).ok());
      REQUIRE(whole.Add(id++, doc).ok());
    }
    parts.push_back(attached.back().get());
  }
  auto compare = [&] {
    for (int q = 0; q < 100; q++) {
      Tokens query = RandomDoc(rng, vocab + 20);
      for (size_t k : {size_t{1}, size_t{10}, size_t{100}}) {
        auto got = Bm25Index::TopKAcross(parts, query, k);
        auto want = whole.TopK(query, k);
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); i++) {
          CHECK(got[i].doc_id == want[i].doc_id);
          CHECK(got[i].score == want[i].score);
        }
      }
    }
  };
  compare();
  // A removal thaws an image whose term table was already looked up.
  const uint64_t removed = attached[3]->frozen_docs()[5];
  REQUIRE(attached[3]->Remove(removed).ok());
  REQUIRE(whole.Remove(removed).ok());
  compare();
}

}  // namespace agentmem::index

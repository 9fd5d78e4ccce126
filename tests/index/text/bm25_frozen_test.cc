// tests/index/text/bm25_frozen_test.cc -- frozen BM25 images (bm25.h,
// bm25_frozen.cc): an index attached to its frozen image ranks exactly like
// the index it came from, keeps taking documents on top (terms old and new),
// freezes again with those, and refuses a damaged image. Version 2 and 1
// images (tests/util/bm25_old_images.h) still attach and rank like version 3.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "index/text/bm25.h"
#include "tests/util/bm25_old_images.h"
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
    return FromBytes(bytes);
  }
  static Image FromBytes(const std::string& bytes) {
    Image im;
    im.size = bytes.size();
    im.words = std::shared_ptr<uint64_t[]>(new uint64_t[bytes.size() / 8 + 1]());
    std::memcpy(im.words.get(), bytes.data(), bytes.size());
    return im;
  }
};

// The same documents with bit-identical scores, in the same order.
void CheckSameHits(const std::vector<ScoredDoc>& x, const std::vector<ScoredDoc>& y) {
  REQUIRE(x.size() == y.size());
  for (size_t i = 0; i < x.size(); i++) {
    CHECK(x[i].doc_id == y[i].doc_id);
    CHECK(x[i].score == y[i].score);
  }
}

void CheckSame(const Bm25Index& a, const Bm25Index& b, std::mt19937_64& rng, size_t vocab) {
  CHECK(a.doc_count() == b.doc_count());
  CHECK(a.total_length() == b.total_length());
  CHECK(a.term_count() == b.term_count());
  for (int q = 0; q < 60; q++) {
    Tokens query = RandomDoc(rng, vocab + 20);  // some words no document has
    for (size_t k : {size_t{1}, size_t{10}, size_t{50}}) {
      auto y = b.TopK(query, k);
      CheckSameHits(a.TopK(query, k), y);
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

TEST_CASE("a version 3 image ranks bit-identically to its index and to its version 2 and 1 images") {
  std::mt19937_64 rng(test::Seed());
  const size_t vocab = 300;
  Bm25Index live;
  uint64_t id = 1;
  for (; id <= 2000; id++) REQUIRE(live.Add(id, RandomDoc(rng, vocab)).ok());
  REQUIRE(live.Add(id++, Tokens{}).ok());
  std::string v3;
  live.EncodeFrozen(&v3);
  const std::string v2 = test::Bm25ImageV2(v3), v1 = test::Bm25ImageV1(v3);
  CHECK(v3[4] == 3);
  CHECK(v2[4] == 2);
  CHECK(v1[4] == 1);
  // Per posting 4 bytes instead of 8.
  const uint64_t postings = test::bm25_images::U64(v3, 32);
  CHECK(postings > 0);
  CHECK(v2.size() - v3.size() >= 4 * postings - 4);
  Image image3 = Image::FromBytes(v3), image2 = Image::FromBytes(v2), image1 = Image::FromBytes(v1);
  Bm25Index attached3, attached2, attached1;
  REQUIRE(attached3.AttachFrozen(image3.data(), image3.size, 10000).ok());
  REQUIRE(attached2.AttachFrozen(image2.data(), image2.size, 10000).ok());
  REQUIRE(attached1.AttachFrozen(image1.data(), image1.size, 10000).ok());
  CheckSame(live, attached3, rng, vocab);
  CheckSame(attached2, attached3, rng, vocab);
  CheckSame(attached1, attached3, rng, vocab);
  for (size_t w = 0; w < vocab; w++) {
    const std::string term = "w" + std::to_string(w);
    CAPTURE(term);
    CHECK(attached3.Postings(term) == live.Postings(term));
    CHECK(attached2.Postings(term) == live.Postings(term));
    CHECK(attached1.Postings(term) == live.Postings(term));
  }
  const std::vector<const Bm25Index*> live_part{&live}, v3_part{&attached3};
  for (int q = 0; q < 30; q++) {
    Tokens query = RandomDoc(rng, vocab);
    CheckSameHits(Bm25Index::TopKAcross(v3_part, query, 10),
                  Bm25Index::TopKAcross(live_part, query, 10));
  }
}

TEST_CASE("an index with a tf above 255 is frozen as version 2 and ranks like the original") {
  std::mt19937_64 rng(test::Seed());
  const size_t vocab = 100;
  Bm25Index live;
  uint64_t id = 1;
  for (; id <= 500; id++) REQUIRE(live.Add(id, RandomDoc(rng, vocab)).ok());
  REQUIRE(live.Add(id++, Tokens(255, "w3")).ok());  // still packs
  std::string packed;
  live.EncodeFrozen(&packed);
  CHECK(packed[4] == 3);
  Tokens long_doc(256, "w7");
  long_doc.push_back("w1");
  REQUIRE(live.Add(id++, long_doc).ok());
  std::string wide;
  live.EncodeFrozen(&wide);
  CHECK(wide[4] == 2);
  Image image = Image::FromBytes(wide);
  Bm25Index attached;
  REQUIRE(attached.AttachFrozen(image.data(), image.size, 10000).ok());
  CheckSame(live, attached, rng, vocab);
  CHECK(attached.Postings("w7") == live.Postings("w7"));
}

TEST_CASE("FrozenSize counts the bytes EncodeFrozen appends, packed or not, frozen terms or not") {
  std::mt19937_64 rng(test::Seed());
  const size_t vocab = 150;
  auto check = [](const Bm25Index& index) {
    std::string bytes(16, 'x');  // an 8-byte aligned start other than 0
    index.EncodeFrozen(&bytes);
    CHECK(index.FrozenSize() == bytes.size() - 16);
  };
  Bm25Index live;
  check(live);  // no documents
  uint64_t id = 1;
  for (; id <= 300; id++) REQUIRE(live.Add(id, RandomDoc(rng, vocab)).ok());
  REQUIRE(live.Add(id++, Tokens{}).ok());  // an empty document
  check(live);
  Image image = Image::Of(live);
  Bm25Index attached;
  REQUIRE(attached.AttachFrozen(image.data(), image.size, 10000).ok());
  check(attached);
  for (; id <= 400; id++) REQUIRE(attached.Add(id, RandomDoc(rng, vocab + 30)).ok());
  check(attached);  // frozen, superseded and ordinary terms
  Tokens long_doc(300, "w2");  // a tf above 255: postings of eight bytes
  REQUIRE(attached.Add(id++, long_doc).ok());
  check(attached);
}

TEST_CASE("a version 1 image takes documents on top, thaws, and freezes again as version 3") {
  std::mt19937_64 rng(test::Seed());
  const size_t vocab = 200;
  Bm25Index live, attached;
  uint64_t id = 1;
  for (; id <= 1500; id++) REQUIRE(live.Add(id, RandomDoc(rng, vocab)).ok());
  std::string v3;
  live.EncodeFrozen(&v3);
  Image v1 = Image::FromBytes(test::Bm25ImageV1(v3));
  REQUIRE(attached.AttachFrozen(v1.data(), v1.size, 10000).ok());
  for (; id <= 1700; id++) {
    Tokens doc = RandomDoc(rng, vocab + 20);
    REQUIRE(live.Add(id, doc).ok());
    REQUIRE(attached.Add(id, doc).ok());
  }
  CheckSame(live, attached, rng, vocab + 20);
  // Frozen again (version 3) from an index that views a version 1 image.
  std::string again;
  attached.EncodeFrozen(&again);
  CHECK(again[4] == 3);
  Image image = Image::FromBytes(again);
  Bm25Index third;
  REQUIRE(third.AttachFrozen(image.data(), image.size, 10000).ok());
  CheckSame(live, third, rng, vocab + 20);
  REQUIRE(attached.Remove(9).ok());
  REQUIRE(live.Remove(9).ok());
  CHECK(attached.frozen_docs().empty());
  CheckSame(live, attached, rng, vocab + 20);
}

namespace {

template <class T>
void Put(std::string* b, size_t at, T v) {
  std::memcpy(b->data() + at, &v, sizeof v);
}
template <class T>
T Get(const std::string& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// Where the arrays of a version 3 or 2 image start (docs/format.md §5.8).
struct Layout {
  uint64_t docs, terms, postings, blocks, peaks;
  size_t posting_bytes;  // version 3: 4 (doc << 8 | tf); 2: 8 (doc, tf)
  size_t docs_at, lens_at, terms_at, postings_at, blocks_at, peaks_at, text_at;
  explicit Layout(const std::string& b) {
    posting_bytes = Get<uint32_t>(b, 4) == 3 ? 4 : 8;
    std::memcpy(&docs, b.data() + 8, 8);
    std::memcpy(&terms, b.data() + 24, 8);
    std::memcpy(&postings, b.data() + 32, 8);
    std::memcpy(&blocks, b.data() + 40, 8);
    std::memcpy(&peaks, b.data() + 48, 8);
    docs_at = 80;
    lens_at = docs_at + docs * 8;
    terms_at = lens_at + (docs * 4 + 7) / 8 * 8;
    postings_at = terms_at + terms * 32;
    blocks_at = postings_at + (postings * posting_bytes + 7) / 8 * 8;
    peaks_at = blocks_at + blocks * 16;
    text_at = peaks_at + peaks * 8;
  }
  uint32_t PostingDoc(const std::string& b, size_t i) const {
    const uint32_t v = Get<uint32_t>(b, postings_at + posting_bytes * i);
    return posting_bytes == 4 ? v >> 8 : v;
  }
  uint32_t PostingTf(const std::string& b, size_t i) const {
    const size_t at = postings_at + posting_bytes * i;
    return posting_bytes == 4 ? Get<uint32_t>(b, at) & 0xff : Get<uint32_t>(b, at + 4);
  }
  void SetPosting(std::string* b, size_t i, uint32_t doc, uint32_t tf) const {
    const size_t at = postings_at + posting_bytes * i;
    if (posting_bytes == 4) {
      Put<uint32_t>(b, at, doc << 8 | tf);
    } else {
      Put<uint32_t>(b, at, doc);
      Put<uint32_t>(b, at + 4, tf);
    }
  }
  // A field of term t: 0 text_offset, 4 text_length, 8 first_posting,
  // 16 posting_count, 20 first_block, 24 first_peak, 28 peak_count.
  uint32_t Term(const std::string& b, size_t t, size_t field) const {
    uint32_t v;
    std::memcpy(&v, b.data() + terms_at + 32 * t + field, 4);
    return v;
  }
  // The first term whose `field` (16 postings, 28 peaks) satisfies `pred`.
  template <class Pred>
  size_t TermWhere(const std::string& b, size_t field, Pred pred) const {
    for (size_t t = 0; t < terms; t++) {
      if (pred(Term(b, t, field))) return t;
    }
    FAIL("no such term");
    return 0;
  }
  // In the first term with two or more entries by field `count`, makes the
  // u32 that starts its second entry equal that of its first, in the array
  // at `array_at` of `stride`-byte entries that field `first` indexes.
  void RepeatFirst(std::string* b, size_t count, size_t first, size_t array_at, size_t stride) const {
    const size_t t = TermWhere(*b, count, [](uint32_t n) { return n >= 2; });
    const size_t at = array_at + stride * Term(*b, t, first);
    Put<uint32_t>(b, at + stride, Get<uint32_t>(*b, at));
  }
};

// A damaged image of the version that `good` has: refused when attached
// if the damage is in its header, documents or term table; else attached,
// and found by Verify(), which every write calls first.
void CheckDamagedRefused(const std::string& good) {
  const Layout l(good);
  const uint64_t max_doc = 1000;
  struct Damage {
    const char* what;
    std::function<void(std::string*)> apply;
    const char* message;
  };
  // From this one on, in the order below, the damage lies in a term's
  // ranges or in the sums over every term.
  const std::string first_in_use = "a document index past the table";
  const Damage damages[] = {
      {"magic", [](std::string* b) { (*b)[0] ^= 1; }, "bad magic"},
      {"a count", [](std::string* b) { Put<uint64_t>(b, 8, uint64_t{1} << 40); }, "a count is larger"},
      {"the text size", [](std::string* b) { Put<uint64_t>(b, 56, Get<uint64_t>(*b, 56) + 8); },
       "do not add up to its size"},
      {"a reserved header byte", [](std::string* b) { (*b)[79] = 1; }, "reserved header bytes"},
      {"a zero document id", [&](std::string* b) { Put<uint64_t>(b, l.docs_at, 0); }, "document ids"},
      {"a repeated document id", [&](std::string* b) { Put<uint64_t>(b, l.docs_at + 8, 1); },
       "document ids"},
      {"a document id above the file's",
       [&](std::string* b) { Put<uint64_t>(b, l.docs_at + 8 * 300, max_doc + 1); }, "document ids"},
      {"a term's first posting", [&](std::string* b) { Put<uint64_t>(b, l.terms_at + 32 + 8, 1); },
       "a term's ranges"},
      {"a term's text length", [&](std::string* b) { Put<uint32_t>(b, l.terms_at + 4, 0); },
       "a term's ranges"},
      {"terms out of order", [&](std::string* b) { (*b)[l.text_at] = 'z'; }, "terms are not sorted"},
      {"a document index past the table",
       [&](std::string* b) { l.SetPosting(b, 0, static_cast<uint32_t>(l.docs), l.PostingTf(*b, 0)); },
       "a posting's document"},
      {"a document twice in a term",
       [&](std::string* b) { l.RepeatFirst(b, 16, 8, l.postings_at, l.posting_bytes); },
       "a posting's document"},
      {"a tf of 0", [&](std::string* b) { l.SetPosting(b, 0, l.PostingDoc(*b, 0), 0); }, "tf is 0"},
      {"the total length", [](std::string* b) { Put<uint64_t>(b, 16, Get<uint64_t>(*b, 16) + 1); },
       "lengths do not add up"},
      {"an empty document's length",
       [&](std::string* b) {
         Put<uint32_t>(b, l.lens_at + 4 * 300, 1);
         Put<uint64_t>(b, 16, Get<uint64_t>(*b, 16) + 1);
       },
       "a document's length is not its terms' tf sum"},
      {"a block's largest tf",
       [&](std::string* b) { Put<uint32_t>(b, l.blocks_at + 8, Get<uint32_t>(*b, l.blocks_at + 8) + 1); },
       "a block's summary"},
      {"a block's last document", [&](std::string* b) { Put<uint64_t>(b, l.blocks_at, 999); },
       "a block's summary"},
      {"peaks out of order", [&](std::string* b) { l.RepeatFirst(b, 28, 24, l.peaks_at, 8); },
       "peaks are not in order"},
      {"a peak below a posting",
       [&](std::string* b) {
         const size_t t = l.TermWhere(*b, 28, [](uint32_t n) { return n == 1; });
         Put<uint32_t>(b, l.peaks_at + 8 * l.Term(*b, t, 24) + 4, 1000000);
       },
       "above its term's peaks"},
  };
  bool in_use = false;
  for (const Damage& d : damages) {
    const std::string what = d.what;
    CAPTURE(what);
    in_use = in_use || what == first_in_use;
    std::string bytes = good;
    d.apply(&bytes);
    Image bad = Image::FromBytes(bytes);
    Bm25Index index;
    Status s = index.AttachFrozen(bad.data(), bad.size, max_doc);
    if (in_use) {
      REQUIRE(s.ok());
      CHECK(index.status().ok());
      s = index.Verify();
      CHECK(index.status().code() == kCorruptIndex);
      CHECK(index.Verify().code() == kCorruptIndex);  // and again
      CHECK(index.Add(max_doc + 1, Tokens{"w1"}).code() == kCorruptIndex);
      CHECK(index.Remove(1).code() == kCorruptIndex);
      CHECK(index.Thaw().code() == kCorruptIndex);
      CHECK(index.doc_count() == l.docs);  // unchanged
    }
    CHECK(s.code() == kCorruptIndex);
    CHECK_MESSAGE(s.message().find(d.message) != std::string::npos, s.ToString());
    if (!in_use) {
      CHECK(index.doc_count() == 0);
      CHECK(index.term_count() == 0);
    }
  }
  CHECK(in_use);
  std::string future = good;
  Put<uint32_t>(&future, 4, 4);
  Image image4 = Image::FromBytes(future);
  Bm25Index index;
  CHECK(index.AttachFrozen(image4.data(), image4.size, max_doc).code() == kFormatVersion);
  Image image = Image::FromBytes(good);
  CHECK(index.AttachFrozen(image.data(), image.size - 8, max_doc).code() == kCorruptIndex);
  CHECK(index.AttachFrozen(image.data() + 4, image.size - 8, max_doc).code() == kCorruptIndex);
  REQUIRE(index.AttachFrozen(image.data(), image.size, max_doc).ok());
  CHECK(index.AttachFrozen(image.data(), image.size, max_doc).code() == kMisuse);
}

}  // namespace

TEST_CASE("a damaged version 3 or 2 image is refused, naming the check that failed") {
  std::mt19937_64 rng(test::Seed());
  Bm25Index live;
  for (uint64_t id = 1; id <= 300; id++) REQUIRE(live.Add(id, RandomDoc(rng, 80)).ok());
  REQUIRE(live.Add(301, Tokens{}).ok());  // the last document is empty
  std::string good;
  live.EncodeFrozen(&good);
  REQUIRE(good[4] == 3);
  SUBCASE("version 3") { CheckDamagedRefused(good); }
  SUBCASE("version 2") { CheckDamagedRefused(test::Bm25ImageV2(good)); }
}

// The image of 300 random documents (`live`), and a copy with one term
// damaged: the first with two postings or more, its second posting's tf
// made 0.
struct DamagedTerm {
  Bm25Index live;
  std::string good;
  Image bad;
  std::string term;
  std::vector<std::string> others;  // every other term
  explicit DamagedTerm(std::mt19937_64& rng) {
    for (uint64_t id = 1; id <= 300; id++) REQUIRE(live.Add(id, RandomDoc(rng, 80)).ok());
    live.EncodeFrozen(&good);
    const Layout l(good);
    const size_t t = l.TermWhere(good, 16, [](uint32_t n) { return n >= 2; });
    term.assign(good.data() + l.text_at + l.Term(good, t, 0), l.Term(good, t, 4));
    std::string bytes = good;
    const size_t second = l.Term(good, t, 8) + 1;
    l.SetPosting(&bytes, second, l.PostingDoc(good, second), 0);
    bad = Image::FromBytes(bytes);
    for (size_t i = 0; i < l.terms; i++) {
      if (i != t) others.emplace_back(good.data() + l.text_at + l.Term(good, i, 0), l.Term(good, i, 4));
    }
  }
};

TEST_CASE("a damaged term of an attached image reads as empty from its first use on, and is reported") {
  std::mt19937_64 rng(test::Seed());
  DamagedTerm d(rng);
  Bm25Index& live = d.live;
  const std::string& good = d.good;
  const Image& bad = d.bad;
  const std::string& damaged_term = d.term;
  const std::vector<std::string>& others = d.others;
  CAPTURE(damaged_term);
  SUBCASE("one thread") {
    Bm25Index index;
    REQUIRE(index.AttachFrozen(bad.data(), bad.size, 1000).ok());
    for (const std::string& term : others) CheckSameHits(index.TopK(Tokens{term}, 10), live.TopK(Tokens{term}, 10));
    CHECK(index.status().ok());
    CHECK(index.TopK(Tokens{damaged_term}, 10).empty());
    CHECK(index.DocFrequency(damaged_term) == 0);
    const Status s = index.status();
    CHECK(s.code() == kCorruptIndex);
    CHECK_MESSAGE(s.message().find("tf is 0") != std::string::npos, s.ToString());
    // Still read as empty, still reported; the other terms as they were.
    CheckSameHits(index.TopK(Tokens{damaged_term, others[0]}, 10), live.TopK(Tokens{others[0]}, 10));
    CHECK(index.status().code() == kCorruptIndex);
    CHECK(index.Verify().code() == kCorruptIndex);
    CHECK(index.Add(301, Tokens{damaged_term}).code() == kCorruptIndex);
  }
  SUBCASE("threads that meet the term at once") {
    Bm25Index index;
    REQUIRE(index.AttachFrozen(bad.data(), bad.size, 1000).ok());
    std::vector<std::thread> threads;
    std::vector<size_t> empty(4, 0);
    for (size_t i = 0; i < empty.size(); i++) {
      threads.emplace_back([&, i] {
        for (int round = 0; round < 50; round++) empty[i] += index.TopK(Tokens{damaged_term}, 10).empty();
      });
    }
    for (std::thread& th : threads) th.join();
    for (size_t e : empty) CHECK(e == 50);
    CHECK(index.status().code() == kCorruptIndex);
  }
  SUBCASE("a good image verified whole reads like the original, and takes writes") {
    Image image = Image::FromBytes(good);
    Bm25Index index;
    REQUIRE(index.AttachFrozen(image.data(), image.size, 1000).ok());
    REQUIRE(index.Verify().ok());
    CHECK(index.status().ok());
    CheckSame(index, live, rng, 80);
    REQUIRE(index.Add(301, Tokens{damaged_term}).ok());
    REQUIRE(live.Add(301, Tokens{damaged_term}).ok());
    CheckSame(index, live, rng, 80);
  }
}

TEST_CASE("a write to an attached image checks the terms it moves: one damaged there refuses it, and any damage found refuses every later write") {
  std::mt19937_64 rng(test::Seed());
  DamagedTerm d(rng);
  Bm25Index& live = d.live;
  const Image& bad = d.bad;
  const std::string& damaged_term = d.term;
  const std::vector<std::string>& others = d.others;
  CAPTURE(damaged_term);
  Bm25Index index;
  REQUIRE(index.AttachFrozen(bad.data(), bad.size, 1000).ok());
  // A document of good terms goes in without the whole image being read,
  // and reads as it does in the index the image came from.
  REQUIRE(index.Add(301, Tokens{others[0], others[1], others[0]}).ok());
  REQUIRE(live.Add(301, Tokens{others[0], others[1], others[0]}).ok());
  CHECK(index.status().ok());
  for (const std::string& term : others) CheckSameHits(index.TopK(Tokens{term}, 10), live.TopK(Tokens{term}, 10));
  // One that would move the damaged term is refused, the index unchanged.
  const uint64_t docs = index.doc_count(), length = index.total_length();
  const Status s = index.Add(302, Tokens{others[2], damaged_term});
  CHECK(s.code() == kCorruptIndex);
  CHECK_MESSAGE(s.message().find("tf is 0") != std::string::npos, s.ToString());
  CHECK_FALSE(index.Contains(302));
  CHECK(index.doc_count() == docs);
  CHECK(index.total_length() == length);
  CheckSameHits(index.TopK(Tokens{others[2]}, 10), live.TopK(Tokens{others[2]}, 10));
  // From then on every write and the whole check report it.
  CHECK(index.Add(303, Tokens{others[0]}).code() == kCorruptIndex);
  CHECK(index.Remove(301).code() == kCorruptIndex);
  CHECK(index.Verify().code() == kCorruptIndex);
  // Damage a write never met is found by the whole check a checkpoint makes.
  Bm25Index unmet;
  REQUIRE(unmet.AttachFrozen(bad.data(), bad.size, 1000).ok());
  REQUIRE(unmet.Add(301, Tokens{others[0]}).ok());
  CHECK(unmet.Verify().code() == kCorruptIndex);
  CHECK(unmet.Add(302, Tokens{others[1]}).code() == kCorruptIndex);
}

TEST_CASE("a damaged version 1 image is refused") {
  std::mt19937_64 rng(test::Seed());
  Bm25Index live;
  for (uint64_t id = 1; id <= 300; id++) REQUIRE(live.Add(id, RandomDoc(rng, 80)).ok());
  std::string v3;
  live.EncodeFrozen(&v3);
  const std::string good = test::Bm25ImageV1(v3);
  // A document id above the limit, a count, a term offset, a posting's doc
  // id, a block's last document.
  const size_t terms_at = 80 + 300 * 8;
  const size_t postings_at = terms_at + live.term_count() * 32;
  const uint64_t postings = Get<uint64_t>(good, 32);
  const size_t blocks_at = postings_at + postings * 16 + (postings * 4 + 7) / 8 * 8;
  const std::pair<size_t, uint64_t> damages[] = {{80 + 8 * 10, 999999},
                                                 {8, 301},
                                                 {terms_at + 32 * 3, 77},
                                                 {postings_at + 16 * 5, 12345},
                                                 {blocks_at, 17}};
  for (const auto& damage : damages) {
    const size_t at = damage.first;  // (CAPTURE cannot name a structured binding in clang 14)
    const uint64_t value = damage.second;
    CAPTURE(at);
    std::string bytes = good;
    std::memcpy(bytes.data() + at, &value, at == terms_at + 32 * 3 ? 4 : 8);
    Image bad = Image::FromBytes(bytes);
    Bm25Index index;
    CHECK(index.AttachFrozen(bad.data(), bad.size, 1000).code() == kCorruptIndex);
  }
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
        CheckSameHits(Bm25Index::TopKAcross(parts, query, k), whole.TopK(query, k));
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

TEST_CASE("a term table follows indexes whose frozen images are attached, extended and thawed") {
  std::mt19937_64 rng(test::Seed() + 31);
  const size_t vocab = 120;
  std::vector<std::string> terms;
  for (size_t w = 0; w < vocab; w++) terms.push_back("w" + std::to_string(w));
  terms.push_back("brandnew");
  const size_t n_parts = 8;
  // Each part's documents, written to an image; one index of every document.
  Bm25Index whole;
  std::vector<Image> images;
  std::vector<std::vector<uint64_t>> docs_of(n_parts);
  uint64_t next_id = 1;
  for (size_t p = 0; p < n_parts; p++) {
    Bm25Index live;
    for (int d = 0; d < 60; d++) {
      Tokens doc = RandomDoc(rng, vocab);
      REQUIRE(live.Add(next_id, doc).ok());
      REQUIRE(whole.Add(next_id, doc).ok());
      docs_of[p].push_back(next_id++);
    }
    images.push_back(Image::Of(live));
  }
  // Half the parts are attached to the table before their image, half after.
  Bm25TermParts table;
  std::vector<std::unique_ptr<Bm25Index>> owned;
  std::vector<const Bm25Index*> parts;
  for (size_t p = 0; p < n_parts; p++) {
    owned.push_back(std::make_unique<Bm25Index>());
    parts.push_back(owned.back().get());
    if (p % 2 == 0) table.Attach(static_cast<uint32_t>(p), owned[p].get());
    REQUIRE(owned[p]->AttachFrozen(images[p].data(), images[p].size, 10000).ok());
    if (p % 2 == 1) table.Attach(static_cast<uint32_t>(p), owned[p].get());
  }
  auto check = [&](const char* when) {
    INFO(when);
    for (const std::string& term : terms) {
      std::vector<uint32_t> want;
      for (size_t p = 0; p < n_parts; p++) {
        if (parts[p]->DocFrequency(term) > 0) want.push_back(static_cast<uint32_t>(p));
      }
      std::vector<uint32_t> got;
      for (const Bm25TermParts::Holder& h : table.Find(term)) got.push_back(h.part);
      INFO("term " << term);
      CHECK(got == want);
    }
    CHECK(table.Consistent(parts));
    for (int q = 0; q < 20; q++) {
      Tokens query = RandomDoc(rng, vocab);
      query.resize(std::min<size_t>(query.size(), 6));
      if (q % 4 == 0) query.push_back("brandnew");
      CheckSameHits(Bm25Index::TopKAcross(parts, query, 10, {}, nullptr, &table),
                    whole.TopK(query, 10));
    }
  };
  check("frozen images");
  // New documents on top of the images: old terms move out of the images,
  // a new one appears in part 2 only.
  for (size_t p = 0; p < n_parts; p++) {
    Tokens doc = RandomDoc(rng, vocab);
    if (p == 2) doc.push_back("brandnew");
    REQUIRE(owned[p]->Add(next_id, doc).ok());
    REQUIRE(whole.Add(next_id, doc).ok());
    docs_of[p].push_back(next_id++);
  }
  check("documents added on top of the images");
  // Removing a document of an image thaws it; removing the only document of
  // a term takes the part out of the term's list.
  for (size_t p = 0; p < n_parts; p += 3) {
    for (size_t i = 0; i < docs_of[p].size(); i += 2) {
      REQUIRE(owned[p]->Remove(docs_of[p][i]).ok());
      REQUIRE(whole.Remove(docs_of[p][i]).ok());
    }
  }
  REQUIRE(owned[2]->Remove(docs_of[2].back()).ok());
  REQUIRE(whole.Remove(docs_of[2].back()).ok());
  CHECK(table.Find("brandnew").empty());
  check("documents removed, images thawed");
}

}  // namespace agentmem::index

namespace agentmem::index {
namespace {

std::string Encoded(const Bm25Index& index) {
  std::string bytes;
  index.EncodeFrozen(&bytes);
  return bytes;
}

}  // namespace

TEST_CASE("an index that freezes itself as it grows ranks and encodes like one that never does") {
  std::mt19937_64 rng(test::Seed() + 5);
  const size_t vocab = 2000;
  Bm25Index grows;
  Bm25Index never(Bm25Params{}, SIZE_MAX);
  uint64_t id = 1;
  auto add = [&](size_t n, size_t words) {
    for (size_t i = 0; i < n; i++, id++) {
      Tokens doc = RandomDoc(rng, words);
      REQUIRE(grows.Add(id, doc).ok());
      REQUIRE(never.Add(id, doc).ok());
    }
  };
  add(3000, vocab);
  // It froze (more than once: 3,000 documents are far above kFreezeBytes),
  // and the documents since its last freeze are ordinary ones.
  CHECK(grows.frozen_docs().size() > 1000);
  CHECK(grows.frozen_docs().size() < 3000);
  CHECK(never.frozen_docs().empty());
  CHECK(Encoded(grows) == Encoded(never));
  CheckSame(never, grows, rng, vocab);
  CHECK(grows.FrozenSize() == never.FrozenSize());

  // A removal thaws the image; later documents freeze it again.
  for (uint64_t d = 5; d < id; d += 97) {
    REQUIRE(grows.Remove(d).ok());
    REQUIRE(never.Remove(d).ok());
  }
  CHECK(grows.frozen_docs().empty());
  CheckSame(never, grows, rng, vocab);
  add(4000, vocab + 500);  // new words as well
  CHECK_FALSE(grows.frozen_docs().empty());
  CHECK(Encoded(grows) == Encoded(never));
  CheckSame(never, grows, rng, vocab + 500);

  // An explicit freeze holds every document in the image.
  REQUIRE(grows.Freeze().ok());
  CHECK(grows.frozen_docs().size() == never.doc_count());
  CHECK(Encoded(grows) == Encoded(never));
  CheckSame(never, grows, rng, vocab + 500);
  CHECK(grows.Add(id - 1, Tokens{"w1"}).code() == kConstraint);
}

TEST_CASE("an image attached whole is encoded as its own bytes until a document changes it") {
  std::mt19937_64 rng(test::Seed() + 6);
  Bm25Index live(Bm25Params{}, SIZE_MAX);
  for (uint64_t id = 1; id <= 500; id++) REQUIRE(live.Add(id, RandomDoc(rng, 300)).ok());
  const std::string bytes = Encoded(live);
  Image image = Image::FromBytes(bytes);
  Bm25Index attached;
  REQUIRE(attached.AttachFrozen(image.data(), image.size, 10000).ok());
  CHECK(Encoded(attached) == bytes);
  CHECK(attached.FrozenSize() == bytes.size());
  REQUIRE(attached.Freeze().ok());  // nothing to freeze: the same image
  CHECK(attached.frozen_docs().data() == reinterpret_cast<const uint64_t*>(image.data() + 80));
  Tokens doc = RandomDoc(rng, 300);
  doc.push_back("w1");
  REQUIRE(attached.Add(501, doc).ok());
  REQUIRE(live.Add(501, doc).ok());
  CHECK(Encoded(attached) == Encoded(live));
  CheckSame(live, attached, rng, 300);
}

TEST_CASE("an index holding document 0 stays ordinary: an image has no document 0") {
  std::mt19937_64 rng(test::Seed() + 7);
  Bm25Index grows;
  Bm25Index never(Bm25Params{}, SIZE_MAX);
  for (uint64_t id = 0; id < 3000; id++) {
    Tokens doc = RandomDoc(rng, 2000);
    REQUIRE(grows.Add(id, doc).ok());
    REQUIRE(never.Add(id, doc).ok());
  }
  REQUIRE(grows.Freeze().ok());
  CHECK(grows.frozen_docs().empty());
  CHECK(grows.Contains(0));
  CheckSame(never, grows, rng, 2000);
}

TEST_CASE("a term table follows indexes that freeze themselves as they grow") {
  std::mt19937_64 rng(test::Seed() + 8);
  const size_t vocab = 1500;
  const size_t n_parts = 5;
  Bm25TermParts table;
  std::vector<std::unique_ptr<Bm25Index>> owned;
  std::vector<const Bm25Index*> parts;
  for (size_t p = 0; p < n_parts; p++) {
    owned.push_back(std::make_unique<Bm25Index>());
    parts.push_back(owned.back().get());
    table.Attach(static_cast<uint32_t>(p), owned.back().get());
  }
  Bm25Index whole(Bm25Params{}, SIZE_MAX);
  uint64_t id = 1;
  auto check = [&](const char* when) {
    INFO(when);
    CHECK(table.Consistent(parts));
    for (int q = 0; q < 40; q++) {
      Tokens query = RandomDoc(rng, vocab + 20);
      query.resize(std::min<size_t>(query.size(), 6));
      for (size_t k : {size_t{1}, size_t{10}}) {
        CheckSameHits(Bm25Index::TopKAcross(parts, query, k, {}, nullptr, &table),
                      whole.TopK(query, k));
      }
    }
  };
  for (size_t i = 0; i < 6000; i++, id++) {
    Tokens doc = RandomDoc(rng, vocab);
    REQUIRE(owned[i % n_parts]->Add(id, doc).ok());
    REQUIRE(whole.Add(id, doc).ok());
  }
  for (const Bm25Index* p : parts) CHECK_FALSE(p->frozen_docs().empty());
  check("every part frozen, with ordinary documents on top");
  // Removals thaw parts 1 and 3 (document d is in part (d - 1) % 5).
  for (uint64_t d = 2; d + 2 < id; d += 50) {
    for (uint64_t r : {d, d + 2}) {
      REQUIRE(owned[(r - 1) % n_parts]->Remove(r).ok());
      REQUIRE(whole.Remove(r).ok());
    }
  }
  CHECK(parts[1]->frozen_docs().empty());
  CHECK(parts[3]->frozen_docs().empty());
  CHECK_FALSE(parts[2]->frozen_docs().empty());
  check("two parts thawed");
  for (size_t p = 0; p < n_parts; p++) REQUIRE(owned[p]->Freeze().ok());
  check("every part frozen whole");
}

}  // namespace agentmem::index

namespace agentmem::index {
namespace {

using DocumentMap = std::map<uint64_t, std::pair<uint32_t, std::map<std::string, uint32_t>>>;

// Each document's length, terms and counts as Documents() gives them, by
// id, asked for ids [0, end) in ranges of `step`.
DocumentMap DocumentsOf(const Bm25Index& index, uint64_t end, uint64_t step) {
  std::vector<std::string_view> terms;
  std::vector<Bm25Index::DocumentTerms> docs;
  std::vector<Bm25Index::TermRef> postings;
  DocumentMap out;
  for (uint64_t from = 0; from < end; from += step) {
    index.Documents(from, from + step, &terms, &docs, &postings);
    for (size_t i = 0; i < docs.size(); i++) {
      if (i > 0) CHECK(docs[i - 1].doc_id < docs[i].doc_id);
      CHECK(docs[i].doc_id >= from);
      CHECK(docs[i].doc_id < from + step);
      auto& entry = out[docs[i].doc_id];
      entry.first = docs[i].doc_len;
      for (uint64_t p = docs[i].first; p < docs[i].first + docs[i].count; p++) {
        CHECK(entry.second.emplace(std::string(terms[postings[p].term]), postings[p].tf).second);
      }
    }
  }
  return out;
}

TEST_CASE("the documents of a range of ids come back with their terms and counts, frozen, on top of an image, or with ids far apart") {
  std::mt19937_64 rng(test::Seed());
  for (uint64_t stride : {uint64_t{1}, uint64_t{1} << 40}) {
    CAPTURE(stride);
    DocumentMap want;
    auto doc = [&](uint64_t id, Bm25Index* a, Bm25Index* b) {
      Tokens tokens = id % 97 == 0 ? Tokens{} : RandomDoc(rng, 150);
      auto& entry = want[id];
      entry.first = static_cast<uint32_t>(tokens.size());
      for (const std::string& t : tokens) entry.second[t]++;
      REQUIRE(a->Add(id, tokens).ok());
      if (b) REQUIRE(b->Add(id, tokens).ok());
    };
    Bm25Index first(Bm25Params{}, SIZE_MAX);
    for (uint64_t i = 1; i <= 600; i++) doc(i * stride, &first, nullptr);
    Image image = Image::Of(first);
    Bm25Index attached;
    REQUIRE(attached.AttachFrozen(image.data(), image.size, 700 * stride).ok());
    CHECK(DocumentsOf(attached, 701 * stride, 701 * stride) == want);
    // Documents on top move some frozen terms into ordinary lists.
    for (uint64_t i = 601; i <= 700; i++) doc(i * stride, &attached, &first);
    for (uint64_t step : {uint64_t{1}, uint64_t{64}, uint64_t{701}}) {
      CHECK(DocumentsOf(attached, 701 * stride, step * stride) == want);
      CHECK(DocumentsOf(first, 701 * stride, step * stride) == want);
    }
    // An ordinary document's terms as TermsOf() gives them.
    uint32_t len = 0;
    std::vector<Bm25Index::TermCount> counts;
    REQUIRE(attached.TermsOf(650 * stride, &len, &counts));
    std::map<std::string, uint32_t> by_term;
    for (const auto& c : counts) by_term[std::string(c.term)] = c.tf;
    CHECK(want[650 * stride] == std::make_pair(len, by_term));
  }
}

}  // namespace
}  // namespace agentmem::index

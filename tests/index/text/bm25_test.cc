// tests/index/text/bm25_test.cc -- the BM25 index of index/text/bm25.h:
// scores by hand, MaxScore top-k against the brute-force oracle on random
// corpora, skipping, filters, removal, and persisting postings.
#include "index/text/bm25.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/util/seed.h"

namespace agentmem::index {
namespace {

using Tokens = std::vector<std::string>;

// "w<n>": the n-th word of the random vocabularies.
std::string WordName(size_t n) { return std::string("w").append(std::to_string(n)); }

void Add(Bm25Index* index, uint64_t doc_id, const Tokens& tokens) {
  REQUIRE(index->Add(doc_id, tokens).ok());
}

// Asserts that two rankings hold the same documents in the same order with
// identical scores.
void CheckSameRanking(const std::vector<ScoredDoc>& got, const std::vector<ScoredDoc>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); i++) {
    INFO("rank " << i);
    REQUIRE(got[i].doc_id == want[i].doc_id);
    REQUIRE(got[i].score == want[i].score);
  }
}

// Documents over a Zipf-like vocabulary of `vocab` words, some repeated
// verbatim so that equal scores (ties) occur.
struct RandomCorpus {
  std::vector<Tokens> docs;
  size_t vocab;

  RandomCorpus(std::mt19937_64& rng, size_t n_docs, size_t vocab_size) : vocab(vocab_size) {
    for (size_t d = 0; d < n_docs; d++) {
      if (d > 0 && rng() % 10 == 0) {
        docs.push_back(docs[rng() % d]);
        continue;
      }
      Tokens doc(rng() % 30);
      for (std::string& t : doc) t = Word(rng);
      docs.push_back(doc);
    }
  }
  std::string Word(std::mt19937_64& rng) const {
    // The square of a uniform draw favours small word numbers.
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return WordName(static_cast<size_t>(u * u * static_cast<double>(vocab)));
  }
  Tokens Query(std::mt19937_64& rng) const {
    Tokens q(1 + rng() % 8);
    for (std::string& t : q) t = rng() % 10 == 0 ? "unknown" : Word(rng);
    if (rng() % 4 == 0) q.push_back(q.front());  // a repeated query token
    return q;
  }
};

TEST_CASE("scores follow the Okapi BM25 formula with k1 1.2 and b 0.75") {
  Bm25Index index;
  Add(&index, 1, {"apple", "pie", "apple"});
  Add(&index, 2, {"pie"});
  Add(&index, 3, {"banana", "split", "with", "ice", "cream"});
  CHECK(index.doc_count() == 3);
  CHECK(index.avgdl() == doctest::Approx(3.0));
  // apple: df 1 of N 3; pie: df 2.
  const double idf_apple = std::log(1 + (3 - 1 + 0.5) / (1 + 0.5));
  const double idf_pie = std::log(1 + (3 - 2 + 0.5) / (2 + 0.5));
  CHECK(index.Idf("apple") == doctest::Approx(idf_apple));
  CHECK(index.Idf("nothing") == 0.0);
  auto tf_part = [](double tf, double len) {
    return tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len / 3));
  };
  auto top = index.TopK(Tokens{"apple", "pie"}, 10);
  REQUIRE(top.size() == 2);
  CHECK(top[0].doc_id == 1);
  CHECK(top[0].score == doctest::Approx(idf_apple * tf_part(2, 3) + idf_pie * tf_part(1, 3)));
  CHECK(top[1].doc_id == 2);
  CHECK(top[1].score == doctest::Approx(idf_pie * tf_part(1, 1)));
}

TEST_CASE("a repeated query token counts once") {
  Bm25Index index;
  Add(&index, 1, {"red", "fox"});
  Add(&index, 2, {"blue", "fox", "fox"});
  Add(&index, 3, {"green", "owl"});
  auto once = index.TopK(Tokens{"fox"}, 5);
  auto thrice = index.TopK(Tokens{"fox", "fox", "fox"}, 5);
  CheckSameRanking(thrice, once);
}

TEST_CASE("terms are counted in first-seen order, the first tokens weighing more when asked") {
  const std::vector<std::string> tokens = {"b", "a", "b", "c", "a", "d"};
  auto plain = Bm25Index::CountTerms(tokens);
  REQUIRE(plain.size() == 4);
  CHECK((plain[0].term == "b" && plain[0].tf == 2 && plain[1].term == "a" && plain[1].tf == 2));
  CHECK((plain[2].term == "c" && plain[2].tf == 1 && plain[3].term == "d" && plain[3].tf == 1));
  // The first three tokens three times each: as if they were written thrice.
  std::vector<std::string> thrice;
  for (int i = 0; i < 3; i++) thrice.insert(thrice.end(), tokens.begin(), tokens.begin() + 3);
  thrice.insert(thrice.end(), tokens.begin() + 3, tokens.end());
  auto weighted = Bm25Index::CountTerms(tokens, 3, 3);
  auto expanded = Bm25Index::CountTerms(thrice);
  REQUIRE(weighted.size() == expanded.size());
  for (size_t i = 0; i < weighted.size(); i++) {
    CAPTURE(i);
    CHECK(weighted[i].term == expanded[i].term);
    CHECK(weighted[i].tf == expanded[i].tf);
  }
  CHECK(weighted[0].tf == 6);  // "b": twice among the first three, counted thrice
}

TEST_CASE("equal scores are ranked by the smaller doc id, and only matching documents return") {
  Bm25Index index;
  for (uint64_t id : {40, 10, 30, 20}) Add(&index, id, {"same", "words"});
  Add(&index, 50, {"other"});
  auto top = index.TopK(Tokens{"same"}, 10);
  REQUIRE(top.size() == 4);
  for (size_t i = 0; i < 4; i++) CHECK(top[i].doc_id == 10 * (i + 1));
  CHECK(top[0].score == top[3].score);
  CHECK(index.TopK(Tokens{"same"}, 2).back().doc_id == 20);
}

TEST_CASE("an empty query, an unknown word or k of zero give no results") {
  Bm25Index index;
  Add(&index, 1, {"a"});
  CHECK(index.TopK(Tokens{}, 10).empty());
  CHECK(index.TopK(Tokens{"zzz"}, 10).empty());
  CHECK(index.TopK(Tokens{"a"}, 0).empty());
  CHECK(index.TopKBruteForce(Tokens{"a"}, 0).empty());
}

TEST_CASE("MaxScore top-k equals the brute-force scorer on random corpora") {
  const uint64_t seed = test::Seed();
  std::mt19937_64 rng(seed);
  MESSAGE("seed " << seed);
  for (int corpus_no = 0; corpus_no < 30; corpus_no++) {
    RandomCorpus corpus(rng, 1 + rng() % 600, 5 + rng() % 400);
    Bm25Index index;
    // Insert in a shuffled order so that postings are also built out of order.
    std::vector<uint64_t> ids(corpus.docs.size());
    for (size_t i = 0; i < ids.size(); i++) ids[i] = i * 3 + rng() % 3;
    std::vector<size_t> order(ids.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) Add(&index, ids[i], corpus.docs[i]);
    for (int q = 0; q < 40; q++) {
      Tokens query = corpus.Query(rng);
      size_t k = std::vector<size_t>{1, 3, 10, 50, corpus.docs.size() + 5}[rng() % 5];
      INFO("corpus " << corpus_no << " query " << q << " k " << k);
      CheckSameRanking(index.TopK(query, k), index.TopKBruteForce(query, k));
    }
  }
}

TEST_CASE("MaxScore top-k equals the brute-force scorer under a document filter") {
  std::mt19937_64 rng(test::Seed() + 1);
  RandomCorpus corpus(rng, 800, 200);
  Bm25Index index;
  for (size_t i = 0; i < corpus.docs.size(); i++) Add(&index, i, corpus.docs[i]);
  for (uint64_t modulus : {2, 3, 7, 50}) {
    DocFilter filter = [modulus](uint64_t id) { return id % modulus == 0; };
    for (int q = 0; q < 30; q++) {
      Tokens query = corpus.Query(rng);
      auto got = index.TopK(query, 10, filter);
      CheckSameRanking(got, index.TopKBruteForce(query, 10, filter));
      for (const ScoredDoc& d : got) CHECK(d.doc_id % modulus == 0);
    }
  }
}

TEST_CASE("MaxScore skips postings: a common word does not cost a scan of its list") {
  Bm25Index index;
  for (uint64_t id = 0; id < 20000; id++) {
    Tokens doc{"common", std::string("filler").append(std::to_string(id % 97))};
    if (id % 100 == 0) doc.push_back("rare");
    Add(&index, id, doc);
  }
  QueryStats stats;
  Tokens query{"common", "rare"};
  auto top = index.TopK(query, 5, {}, &stats);
  CheckSameRanking(top, index.TopKBruteForce(query, 5));
  MESSAGE("scored " << stats.postings_scored << " of " << stats.postings_total << " postings, "
                    << stats.docs_scored << " documents");
  CHECK(stats.postings_total == 20000 + 200);
  CHECK(stats.postings_scored < stats.postings_total / 10);
  for (const ScoredDoc& d : top) CHECK(d.doc_id % 100 == 0);
}

TEST_CASE("a removed document is gone from results, statistics and postings") {
  Bm25Index index;
  Add(&index, 1, {"alpha", "beta"});
  Add(&index, 2, {"beta", "gamma", "gamma"});
  Add(&index, 3, {"delta"});
  REQUIRE(index.Remove(2).ok());
  CHECK_FALSE(index.Contains(2));
  CHECK(index.doc_count() == 2);
  CHECK(index.total_length() == 3);
  CHECK(index.DocFrequency("beta") == 1);
  CHECK(index.DocFrequency("gamma") == 0);
  CHECK(index.Postings("gamma").empty());
  CHECK(index.term_count() == 3);  // alpha, beta, delta
  CHECK(index.TopK(Tokens{"gamma"}, 5).empty());
  auto beta = index.TopK(Tokens{"beta"}, 5);
  REQUIRE(beta.size() == 1);
  CHECK(beta[0].doc_id == 1);
}

TEST_CASE("removing and re-adding documents scores exactly like an index built fresh") {
  std::mt19937_64 rng(test::Seed() + 2);
  RandomCorpus corpus(rng, 400, 150);
  Bm25Index churned;
  for (size_t i = 0; i < corpus.docs.size(); i++) Add(&churned, i, corpus.docs[i]);
  std::vector<bool> present(corpus.docs.size(), true);
  for (int step = 0; step < 600; step++) {
    size_t i = rng() % corpus.docs.size();
    if (present[i]) {
      REQUIRE(churned.Remove(i).ok());
    } else {
      Add(&churned, i, corpus.docs[i]);
    }
    present[i] = !present[i];
  }
  Bm25Index fresh;
  for (size_t i = 0; i < corpus.docs.size(); i++) {
    if (present[i]) Add(&fresh, i, corpus.docs[i]);
  }
  CHECK(churned.doc_count() == fresh.doc_count());
  CHECK(churned.term_count() == fresh.term_count());
  CHECK(churned.total_length() == fresh.total_length());
  for (int q = 0; q < 50; q++) {
    Tokens query = corpus.Query(rng);
    CheckSameRanking(churned.TopK(query, 10), fresh.TopK(query, 10));
  }
}

TEST_CASE("adding an indexed doc id or removing an unknown one is refused") {
  Bm25Index index;
  Add(&index, 7, {"x"});
  CHECK(index.Add(7, Tokens{"y"}).code() == kConstraint);
  CHECK(index.DocFrequency("y") == 0);
  CHECK(index.Remove(8).code() == kNotFound);
  CHECK(index.doc_count() == 1);
}

TEST_CASE("empty documents count in N and the average length") {
  Bm25Index index;
  Add(&index, 1, {});
  Add(&index, 2, {"word", "word"});
  CHECK(index.doc_count() == 2);
  CHECK(index.avgdl() == doctest::Approx(1.0));
  CHECK(index.Idf("word") == doctest::Approx(std::log(1 + (2 - 1 + 0.5) / 1.5)));
}

TEST_CASE("postings stay sorted by doc id and round trip through their encoding") {
  std::mt19937_64 rng(test::Seed() + 3);
  RandomCorpus corpus(rng, 300, 60);
  Bm25Index index;
  for (size_t i = 0; i < corpus.docs.size(); i++) {
    Add(&index, (corpus.docs.size() - i) * 1000003ULL, corpus.docs[i]);  // descending ids
  }
  for (size_t w = 0; w < corpus.vocab; w++) {
    std::string term = WordName(w);
    auto postings = index.Postings(term);
    CHECK(postings.size() == index.DocFrequency(term));
    std::string bytes;
    REQUIRE(EncodePostings(postings, &bytes).ok());
    auto decoded = DecodePostings(bytes);
    REQUIRE(decoded.ok());
    CHECK(std::equal(decoded->begin(), decoded->end(), postings.begin(), postings.end()));
  }
}


// A random corpus split over `parts` indexes (the users of a collection),
// each document in one of them, and one index holding all of it.
struct SplitCorpus {
  std::vector<std::unique_ptr<Bm25Index>> parts;
  Bm25Index whole;
  std::vector<const Bm25Index*> Parts() const {
    std::vector<const Bm25Index*> v;
    for (const auto& p : parts) v.push_back(p.get());
    return v;
  }
  SplitCorpus(std::mt19937_64& rng, const RandomCorpus& corpus, size_t n_parts) {
    for (size_t p = 0; p < n_parts; p++) parts.push_back(std::make_unique<Bm25Index>());
    for (size_t i = 0; i < corpus.docs.size(); i++) {
      const uint64_t doc_id = i + 1;
      Add(parts[rng() % n_parts].get(), doc_id, corpus.docs[i]);
      Add(&whole, doc_id, corpus.docs[i]);
    }
  }
};

TEST_CASE("a top-k across indexes scores and ranks exactly like one index of all their documents") {
  const uint64_t seed = test::Seed();
  std::mt19937_64 rng(seed);
  MESSAGE("seed " << seed);
  for (int corpus_no = 0; corpus_no < 20; corpus_no++) {
    RandomCorpus corpus(rng, 1 + rng() % 800, 5 + rng() % 300);
    SplitCorpus split(rng, corpus, 1 + rng() % 40);
    const std::vector<const Bm25Index*> parts = split.Parts();
    for (int q = 0; q < 40; q++) {
      Tokens query = corpus.Query(rng);
      size_t k = std::vector<size_t>{1, 3, 10, 100, corpus.docs.size() + 5}[rng() % 5];
      INFO("corpus " << corpus_no << " query " << q << " k " << k);
      auto want = split.whole.TopK(query, k);
      CheckSameRanking(Bm25Index::TopKAcross(parts, query, k), want);
      CheckSameRanking(Bm25Index::TopKAcrossBruteForce(parts, query, k), want);
    }
  }
}

TEST_CASE("a top-k across indexes under a document filter ranks like one filtered index") {
  std::mt19937_64 rng(test::Seed() + 2);
  RandomCorpus corpus(rng, 1500, 150);
  SplitCorpus split(rng, corpus, 25);
  const std::vector<const Bm25Index*> parts = split.Parts();
  for (uint64_t modulus : {2, 5, 40}) {
    DocFilter filter = [modulus](uint64_t id) { return id % modulus == 0; };
    for (int q = 0; q < 30; q++) {
      Tokens query = corpus.Query(rng);
      auto got = Bm25Index::TopKAcross(parts, query, 10, filter);
      CheckSameRanking(got, split.whole.TopK(query, 10, filter));
      for (const ScoredDoc& d : got) CHECK(d.doc_id % modulus == 0);
    }
  }
}

TEST_CASE("equal scores across indexes are ranked by the smaller doc id") {
  // The same document in three indexes, the smallest id in the last one.
  Bm25Index a, b, c;
  Add(&a, 30, {"same", "words"});
  Add(&b, 20, {"same", "words"});
  Add(&c, 10, {"same", "words"});
  Add(&c, 40, {"other"});
  const std::vector<const Bm25Index*> parts = {&a, &b, nullptr, &c};
  auto top = Bm25Index::TopKAcross(parts, Tokens{"same"}, 2);
  REQUIRE(top.size() == 2);
  CHECK(top[0].doc_id == 10);
  CHECK(top[1].doc_id == 20);
  CHECK(top[0].score == top[1].score);
  CHECK(Bm25Index::TopKAcross(parts, Tokens{"same"}, 0).empty());
  CHECK(Bm25Index::TopKAcross(parts, Tokens{"zzz"}, 5).empty());
  CHECK(Bm25Index::TopKAcross({}, Tokens{"same"}, 5).empty());
}

TEST_CASE("a top-k across many indexes skips those whose bound cannot beat the k-th score") {
  // 200 indexes of common words; a rare word in 5 of them.
  std::vector<std::unique_ptr<Bm25Index>> owned;
  std::vector<const Bm25Index*> parts;
  uint64_t id = 1;
  for (int p = 0; p < 200; p++) {
    owned.push_back(std::make_unique<Bm25Index>());
    for (int d = 0; d < 20; d++) {
      Tokens doc{"common", std::string("filler").append(std::to_string(d % 7))};
      if (p % 40 == 0 && d == 3) doc.push_back("rare");
      Add(owned.back().get(), id++, doc);
    }
    parts.push_back(owned.back().get());
  }
  QueryStats stats;
  Tokens query{"rare", "common"};
  auto top = Bm25Index::TopKAcross(parts, query, 5, {}, &stats);
  CheckSameRanking(top, Bm25Index::TopKAcrossBruteForce(parts, query, 5));
  MESSAGE("searched " << stats.parts_searched << " indexes, skipped " << stats.parts_skipped
                      << "; scored " << stats.postings_scored << " of " << stats.postings_total
                      << " postings");
  CHECK(stats.parts_searched + stats.parts_skipped == 200);
  CHECK(stats.parts_searched == 5);
  CHECK(stats.postings_total == 200 * 20 + 5);
  for (const ScoredDoc& d : top) CHECK(d.doc_id % 20 == 4);  // the rare word's documents
}

// Asserts that `table` lists, for each of `terms`, exactly the parts whose
// index holds it, in increasing order.
void CheckTermParts(const Bm25TermParts& table, const std::vector<const Bm25Index*>& parts,
                    const std::vector<std::string>& terms) {
  for (const std::string& term : terms) {
    std::vector<uint32_t> want;
    for (size_t p = 0; p < parts.size(); p++) {
      if (parts[p] != nullptr && parts[p]->DocFrequency(term) > 0) {
        want.push_back(static_cast<uint32_t>(p));
      }
    }
    std::vector<uint32_t> got;
    for (const Bm25TermParts::Holder& h : table.Find(term)) got.push_back(h.part);
    INFO("term " << term);
    CHECK(got == want);
  }
  CHECK(table.Consistent(parts));
}

TEST_CASE("a term table follows every document added and removed, and a top-k through it ranks "
          "like one index") {
  const uint64_t seed = test::Seed() + 4;
  std::mt19937_64 rng(seed);
  MESSAGE("seed " << seed);
  RandomCorpus corpus(rng, 1600, 250);
  std::vector<std::string> vocab;
  for (size_t w = 0; w < corpus.vocab; w++) vocab.push_back(WordName(w));
  vocab.push_back("fresh");
  // 30 parts; the last one is created after the table was built, as a new
  // user is.
  const size_t n_parts = 30;
  std::vector<std::unique_ptr<Bm25Index>> owned;
  std::vector<const Bm25Index*> parts(n_parts, nullptr);
  for (size_t p = 0; p + 1 < n_parts; p++) {
    owned.push_back(std::make_unique<Bm25Index>());
    parts[p] = owned.back().get();
  }
  // owned[p] is parts[p], writable.
  Bm25Index whole;
  std::vector<std::pair<uint64_t, size_t>> live;  // (doc id, part)
  uint64_t next_id = 1;
  auto add = [&](size_t p, const Tokens& doc) {
    Add(owned[p].get(), next_id, doc);
    Add(&whole, next_id, doc);
    live.push_back({next_id++, p});
  };
  for (size_t i = 0; i < 800; i++) add(rng() % (n_parts - 1), corpus.docs[i]);
  Bm25TermParts table;
  for (size_t p = 0; p + 1 < n_parts; p++) table.Attach(static_cast<uint32_t>(p), owned[p].get());
  CheckTermParts(table, parts, vocab);

  auto compare = [&](const char* when) {
    INFO(when);
    CheckTermParts(table, parts, vocab);
    for (int q = 0; q < 25; q++) {
      Tokens query = corpus.Query(rng);
      if (q % 5 == 0) query.push_back("fresh");
      const size_t k = std::vector<size_t>{1, 10, 100}[rng() % 3];
      INFO("query " << q << " k " << k);
      auto want = whole.TopK(query, k);
      CheckSameRanking(Bm25Index::TopKAcross(parts, query, k, {}, nullptr, &table), want);
      CheckSameRanking(Bm25Index::TopKAcross(parts, query, k), want);
      DocFilter odd = [](uint64_t id) { return id % 2 == 1; };
      CheckSameRanking(Bm25Index::TopKAcross(parts, query, k, odd, nullptr, &table),
                       whole.TopK(query, k, odd));
    }
  };
  compare("after the table was built");

  // A word that first appears in a part after the table was built, then
  // leaves with its only document.
  add(3, {"fresh", "w1"});
  const uint64_t fresh_id = next_id - 1;
  CHECK(table.Find("fresh").size() == 1);
  auto top = Bm25Index::TopKAcross(parts, Tokens{"fresh"}, 5, {}, nullptr, &table);
  REQUIRE(top.size() == 1);
  CHECK(top[0].doc_id == fresh_id);
  REQUIRE(owned[3].get()->Remove(fresh_id).ok());
  REQUIRE(whole.Remove(fresh_id).ok());
  live.erase(std::find(live.begin(), live.end(), std::make_pair(fresh_id, size_t{3})));
  CHECK(table.Find("fresh").empty());
  CHECK(Bm25Index::TopKAcross(parts, Tokens{"fresh"}, 5, {}, nullptr, &table).empty());

  // A new part, then documents coming and going everywhere.
  owned.push_back(std::make_unique<Bm25Index>());
  parts[n_parts - 1] = owned.back().get();
  table.Attach(static_cast<uint32_t>(n_parts - 1), owned.back().get());
  for (size_t i = 800; i < corpus.docs.size(); i++) {
    add(rng() % n_parts, corpus.docs[i]);
    if (rng() % 3 == 0) {
      const size_t at = rng() % live.size();
      const auto [id, p] = live[at];
      REQUIRE(owned[p].get()->Remove(id).ok());
      REQUIRE(whole.Remove(id).ok());
      live.erase(live.begin() + static_cast<ptrdiff_t>(at));
    }
    if (i % 200 == 0) compare("while documents come and go");
  }
  compare("at the end");
  // Emptying a part takes it out of every term's list.
  for (size_t at = live.size(); at-- > 0;) {
    if (live[at].second != 7) continue;
    REQUIRE(owned[7].get()->Remove(live[at].first).ok());
    REQUIRE(whole.Remove(live[at].first).ok());
    live.erase(live.begin() + static_cast<ptrdiff_t>(at));
  }
  compare("with an empty part");
  CHECK(table.pair_count() > 0);
  table.ShrinkToFit();
  CHECK(table.Consistent(parts));
  CHECK(table.MemoryBytes() >= table.pair_count() * sizeof(Bm25TermParts::Holder));
}

}  // namespace
}  // namespace agentmem::index

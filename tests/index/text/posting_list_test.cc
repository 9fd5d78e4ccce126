// tests/index/text/posting_list_test.cc -- a term's in-memory postings and the
// block and peak summaries that the BM25 top-k skips with
// (index/text/posting_list.h).
#include "index/text/posting_list.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "tests/util/seed.h"

namespace agentmem::index {
namespace {

// The summaries recomputed from scratch, to compare with the maintained ones.
void CheckSummaries(const PostingList& list,
                    const std::map<uint64_t, std::pair<uint32_t, uint32_t>>& model) {
  // Postings: the model's entries in doc id order.
  REQUIRE(list.size() == model.size());
  size_t i = 0;
  for (const auto& [doc_id, tf_len] : model) {
    REQUIRE(list.doc_id(i) == doc_id);
    REQUIRE(list.tf(i) == tf_len.first);
    REQUIRE(list.doc_len(i) == tf_len.second);
    i++;
  }
  // Blocks: one per kBlockSize postings, each with its last doc, max tf, min length.
  const size_t n = list.size();
  REQUIRE(list.blocks().size() == (n + PostingList::kBlockSize - 1) / PostingList::kBlockSize);
  for (size_t b = 0; b < list.blocks().size(); b++) {
    size_t start = b * PostingList::kBlockSize;
    size_t end = std::min(n, start + PostingList::kBlockSize);
    uint32_t max_tf = 0;
    uint32_t min_len = UINT32_MAX;
    for (size_t j = start; j < end; j++) {
      max_tf = std::max(max_tf, list.tf(j));
      min_len = std::min(min_len, list.doc_len(j));
    }
    REQUIRE(list.blocks()[b].last_doc == list.doc_id(end - 1));
    REQUIRE(list.blocks()[b].max_tf == max_tf);
    REQUIRE(list.blocks()[b].min_len == min_len);
  }
  // Peaks: exactly the postings' (tf, len) pairs that no other pair dominates.
  std::vector<std::pair<uint32_t, uint32_t>> frontier;
  for (const auto& [doc_id, p] : model) {
    bool dominated = false;
    for (const auto& [other_id, q] : model) {
      if (q != p && q.first >= p.first && q.second <= p.second) dominated = true;
    }
    if (!dominated) frontier.push_back(p);
  }
  std::sort(frontier.begin(), frontier.end());
  frontier.erase(std::unique(frontier.begin(), frontier.end()), frontier.end());
  REQUIRE(list.peaks().size() == frontier.size());
  for (size_t p = 0; p < frontier.size(); p++) {
    REQUIRE(list.peaks()[p].tf == frontier[p].first);
    REQUIRE(list.peaks()[p].min_len == frontier[p].second);
  }
}

TEST_CASE("blocks and peaks stay exact through random inserts and erases") {
  std::mt19937_64 rng(test::Seed());
  for (int round = 0; round < 20; round++) {
    PostingList list;
    std::map<uint64_t, std::pair<uint32_t, uint32_t>> model;
    for (int step = 0; step < 400; step++) {
      uint64_t doc_id = rng() % 2 == 0 ? (model.empty() ? 0 : model.rbegin()->first + 1 + rng() % 3)
                                       : rng() % 1000;
      if (model.count(doc_id) && rng() % 3 != 0) {
        REQUIRE(list.Erase(doc_id));
        model.erase(doc_id);
      } else if (!model.count(doc_id)) {
        uint32_t tf = 1 + static_cast<uint32_t>(rng() % 6);
        uint32_t len = tf + static_cast<uint32_t>(rng() % 40);
        list.Insert({doc_id, tf}, len);
        model[doc_id] = {tf, len};
      }
      if (step % 37 == 0) CheckSummaries(list, model);
    }
    CheckSummaries(list, model);
  }
}

TEST_CASE("erasing a posting below the peaks keeps them; erasing the last one at a peak rebuilds them") {
  PostingList list;
  std::map<uint64_t, std::pair<uint32_t, uint32_t>> model;
  // Peaks (1, 5) and (3, 9); (2, 20) lies below (3, 9); docs 4 and 5 share
  // the peak (1, 5).
  for (const auto& [doc, tf, len] : {std::tuple{1, 3u, 9u}, {2, 2u, 20u}, {4, 1u, 5u}, {5, 1u, 5u},
                                     {7, 2u, 30u}}) {
    list.Insert({static_cast<uint64_t>(doc), tf}, len);
    model[doc] = {tf, len};
  }
  CheckSummaries(list, model);
  REQUIRE(list.peaks().size() == 2);
  for (uint64_t doc : {2, 4, 1, 5}) {
    CAPTURE(doc);
    REQUIRE(list.Erase(doc));
    model.erase(doc);
    CheckSummaries(list, model);
  }
  // Left: (2, 30) alone, a peak that was dominated before.
  REQUIRE(list.peaks().size() == 1);
  CHECK(list.peaks()[0].tf == 2);
  CHECK(list.peaks()[0].min_len == 30);
}

TEST_CASE("erasing a doc id that is not in the list changes nothing") {
  PostingList list;
  list.Insert({5, 2}, 10);
  CHECK_FALSE(list.Erase(4));
  CHECK_FALSE(list.Erase(6));
  CHECK(list.size() == 1);
  CHECK(list.Erase(5));
  CHECK(list.empty());
  CHECK(list.blocks().empty());
  CHECK(list.peaks().empty());
}

TEST_CASE("peaks keep one entry per useful tf: higher tf only with a longer document") {
  PostingList list;
  list.Insert({1, 1}, 5);   // peak
  list.Insert({2, 3}, 20);  // peak: more tf, longer doc
  list.Insert({3, 2}, 30);  // dominated by (3, 20)
  list.Insert({4, 1}, 8);   // dominated by (1, 5)
  REQUIRE(list.peaks().size() == 2);
  CHECK(list.peaks()[0].tf == 1);
  CHECK(list.peaks()[0].min_len == 5);
  CHECK(list.peaks()[1].tf == 3);
  CHECK(list.peaks()[1].min_len == 20);
  list.Insert({5, 4}, 4);  // dominates everything
  REQUIRE(list.peaks().size() == 1);
  CHECK(list.peaks()[0].tf == 4);
}

TEST_CASE("a copy of a list is its own: changing one leaves the other, and a moved-from list is empty") {
  PostingList list;
  std::map<uint64_t, std::pair<uint32_t, uint32_t>> model;
  for (uint64_t doc = 1; doc <= 150; doc++) {
    const auto tf = static_cast<uint32_t>(1 + doc % 5), len = static_cast<uint32_t>(10 + doc % 17);
    list.Insert({doc * 2, tf}, len);
    model[doc * 2] = {tf, len};
  }
  PostingList copy = list;
  CheckSummaries(copy, model);
  auto changed = model;
  REQUIRE(copy.Erase(20));
  changed.erase(20);
  copy.Insert({21, 7}, 3);
  changed[21] = {7, 3};
  CheckSummaries(copy, changed);
  CheckSummaries(list, model);
  PostingList moved = std::move(list);
  CheckSummaries(moved, model);
  CHECK(list.empty());  // NOLINT(bugprone-use-after-move): moved-from lists are empty
  CHECK(list.blocks().empty());
  CHECK(list.peaks().empty());
  list.Insert({1, 1}, 1);  // and usable
  CHECK(list.size() == 1);
  copy = moved;
  CheckSummaries(copy, model);
}

TEST_CASE("an erase that rebuilds the peaks may pass through more peaks than the list held") {
  // (9, 1) dominates the three others; a copy holds room for one peak only.
  std::map<uint64_t, std::pair<uint32_t, uint32_t>> model{
      {1, {1, 10}}, {2, {2, 20}}, {3, {3, 30}}, {4, {9, 1}}};
  PostingList list;
  for (const auto& [doc, tf_len] : model) list.Insert({doc, tf_len.first}, tf_len.second);
  PostingList copy = list;
  REQUIRE(copy.peaks().size() == 1);
  REQUIRE(copy.Erase(4));
  model.erase(4);
  CheckSummaries(copy, model);
  CHECK(copy.peaks().size() == 3);
}

TEST_CASE("an indexed view reads ids and lengths from its document table and copies on change") {
  // Three documents; the list holds the first and the third.
  const uint64_t doc_ids[] = {10, 20, 30};
  const uint32_t doc_lens[] = {4, 7, 9};
  const PostingList::IndexedPosting postings[] = {{0, 2}, {2, 5}};
  const PostingList::Block blocks[] = {{30, 5, 4}};
  const PostingList::Peak peaks[] = {{2, 4}, {5, 9}};
  PostingList list = PostingList::ViewIndexed(postings, doc_ids, doc_lens, blocks, peaks);
  CHECK(list.is_view());
  REQUIRE(list.size() == 2);
  CHECK(list.posting(1) == Posting{30, 5});
  CHECK(list.doc_len(0) == 4);
  CHECK(list.doc_len(1) == 9);
  CHECK(list.LowerBound(11) == 1);
  CHECK(list.LowerBound(31) == 2);
  CHECK_FALSE(list.Erase(20));
  CHECK(list.is_view());
  list.Insert({20, 1}, 7);
  CHECK_FALSE(list.is_view());
  CheckSummaries(list, {{10, {2, 4}}, {20, {1, 7}}, {30, {5, 9}}});
  REQUIRE(list.Erase(10));
  CheckSummaries(list, {{20, {1, 7}}, {30, {5, 9}}});
}

}  // namespace
}  // namespace agentmem::index

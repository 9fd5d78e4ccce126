// tests/engine/id_table_test.cc -- engine/memory/id_table.h: entries by episode id,
// in memory that follows their number, whatever the ids.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "engine/memory/id_table.h"
#include "tests/util/seed.h"

namespace agentmem::engine {

TEST_CASE("an id table finds what was made, in id order, dense ids and far ones alike") {
  IdTable<int> t;
  CHECK(t.Find(0) == nullptr);
  CHECK(t.Find(1) == nullptr);
  t.At(3) = 30;
  t.At(1) = 10;
  t.At(uint64_t{30000000}) = 7;
  t.At(UINT64_MAX) = 8;
  CHECK(t.size() == 4);
  CHECK(t.max_id() == UINT64_MAX);
  CHECK(t.Find(2) == nullptr);  // inside the dense part, never made
  REQUIRE(t.Find(3) != nullptr);
  CHECK(*t.Find(3) == 30);
  CHECK(*t.Find(30000000) == 7);
  CHECK(*t.Find(UINT64_MAX) == 8);
  CHECK(t.Find(29999999) == nullptr);
  std::vector<uint64_t> order;
  t.ForEach([&](uint64_t id, int) { order.push_back(id); });
  CHECK(order == std::vector<uint64_t>{1, 3, 30000000, UINT64_MAX});
}

TEST_CASE("an id table agrees with a map under random ids, the far ones moving in as it fills") {
  std::mt19937_64 rng(test::Seed());
  IdTable<uint64_t> t;
  std::map<uint64_t, uint64_t> model;
  for (int i = 0; i < 20000; i++) {
    // Mostly the next ids, sometimes one a little ahead, sometimes one far off.
    uint64_t id = model.empty() ? 1 : model.rbegin()->first + 1;
    if (rng() % 10 == 0) id += rng() % 3000;
    if (rng() % 50 == 0) id = 1 + rng() % (uint64_t{1} << 40);
    t.At(id) = id * 3;
    model[id] = id * 3;
  }
  CHECK(t.size() == model.size());
  for (const auto& [id, v] : model) {
    REQUIRE(t.Find(id) != nullptr);
    CHECK(*t.Find(id) == v);
  }
  std::vector<std::pair<uint64_t, uint64_t>> seen;
  t.ForEach([&](uint64_t id, uint64_t v) { seen.emplace_back(id, v); });
  CHECK(seen == std::vector<std::pair<uint64_t, uint64_t>>(model.begin(), model.end()));
}

}  // namespace agentmem::engine

// tests/util/seed.h -- the seed of randomized tests: AGENTMEM_TEST_SEED when
// set, else one chosen per run and printed by test_main.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace agentmem::test {

inline uint64_t Seed() {
  static const uint64_t seed = []() -> uint64_t {
    if (const char* s = std::getenv("AGENTMEM_TEST_SEED")) return std::strtoull(s, nullptr, 10);
    return static_cast<uint64_t>(
        std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007);
  }();
  return seed;
}

}  // namespace agentmem::test

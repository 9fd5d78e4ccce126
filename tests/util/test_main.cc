// tests/util/test_main.cc -- the doctest main shared by every suite. Prints the
// random seed so that a failing randomized test can be replayed with
// AGENTMEM_TEST_SEED=<seed>.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "tests/util/seed.h"

int main(int argc, char** argv) {
  std::printf("[agentmem] test seed %llu (set AGENTMEM_TEST_SEED to replay)\n",
              static_cast<unsigned long long>(agentmem::test::Seed()));
  doctest::Context ctx(argc, argv);
  return ctx.run();
}

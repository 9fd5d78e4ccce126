// tests/util/open_helpers.h -- opening engine::Database in tests: options with
// a fixed salt and a test clock, and an open that must succeed.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "engine/memory/database.h"
#include "tests/util/oracle.h"

namespace agentmem::test {

// Options for a test file: the given Env, sync mode, salt, a `dim`-d test
// vector space, the test clock, and a short busy timeout.
inline engine::Options TestOptionsFor(engine::Env* env, TestClock* clock, engine::SyncMode sync,
                                      uint64_t salt, uint32_t dim) {
  engine::Options o;
  o.env = env;
  o.sync = sync;
  o.salt = salt;
  o.clock = clock->Fn();
  o.space = engine::VectorSpace{"test-hash", dim, "cosine"};
  o.space_given = true;
  o.busy_timeout_ms = 200;
  return o;
}

inline std::unique_ptr<engine::Database> MustOpen(const std::string& path,
                                                  const engine::Options& opts) {
  std::unique_ptr<engine::Database> db;
  Status s = engine::Database::Open(path, opts, &db);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(db != nullptr);
  return db;
}

}  // namespace agentmem::test

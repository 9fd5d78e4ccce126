// tests/util/capi_helpers.h -- reading a file through the C API in tests.
#pragma once

#include <doctest/doctest.h>

#include <agentmem.h>

#include <cstdint>
#include <vector>

namespace agentmem::test {

// The vector of episode `id`, as agentmem_episode_get returns it.
inline std::vector<float> VectorOf(agentmem_db* db, int64_t id) {
  agentmem_episode* ep = nullptr;
  REQUIRE(agentmem_episode_get(db, id, &ep) == AGENTMEM_OK);
  std::vector<float> v(ep->vector, ep->vector + ep->dim);
  agentmem_free(ep);
  return v;
}

}  // namespace agentmem::test

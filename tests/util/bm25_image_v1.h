// tests/util/bm25_image_v1.h -- a frozen BM25 image rewritten in the version 1
// layout (docs/format.md §5.8, bm25 section), the layout that files written
// before version 2 hold: postings with their u64 episode id and a length per
// posting, no table of lengths. The library writes version 2 only; the tests
// build version 1 images from version 2 ones with this to check that they
// still load and rank the same.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace agentmem::test {

// The version 1 image of the same index. REQUIRES: `v2` is a whole, valid
// version 2 image.
inline std::string Bm25ImageV1(std::string_view v2) {
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, v2.data() + at, 4);
    return v;
  };
  auto u64 = [&](size_t at) {
    uint64_t v;
    std::memcpy(&v, v2.data() + at, 8);
    return v;
  };
  auto pad8 = [](size_t n) { return (n + 7) & ~size_t{7}; };
  const uint64_t docs = u64(8), terms = u64(24), postings = u64(32);
  const size_t docs_at = 80, lens_at = docs_at + docs * 8;
  const size_t terms_at = lens_at + pad8(docs * 4);
  const size_t postings_at = terms_at + terms * 32;
  const size_t rest_at = postings_at + postings * 8;  // blocks, peaks, text: unchanged
  std::string v1(v2.substr(0, 80));
  const uint32_t version = 1;
  std::memcpy(v1.data() + 4, &version, 4);
  v1.append(v2.substr(docs_at, docs * 8));
  v1.append(v2.substr(terms_at, terms * 32));
  for (size_t i = 0; i < postings; i++) {
    const uint64_t id = u64(docs_at + 8 * u32(postings_at + 8 * i));
    const uint32_t tf = u32(postings_at + 8 * i + 4), zero = 0;
    v1.append(reinterpret_cast<const char*>(&id), 8);
    v1.append(reinterpret_cast<const char*>(&tf), 4);
    v1.append(reinterpret_cast<const char*>(&zero), 4);
  }
  for (size_t i = 0; i < postings; i++) {
    const uint32_t len = u32(lens_at + 4 * u32(postings_at + 8 * i));
    v1.append(reinterpret_cast<const char*>(&len), 4);
  }
  v1.resize(pad8(v1.size()), '\0');
  v1.append(v2.substr(rest_at));
  return v1;
}

}  // namespace agentmem::test

// tests/util/bm25_old_images.h -- a frozen BM25 image rewritten in the layouts
// of the earlier versions (docs/format.md §5.8, bm25 section) that files may
// hold: version 2 (8-byte postings; the library still writes it when the
// postings do not pack) and version 1 (postings with their u64 episode id and
// a length per posting, no table of lengths). The tests build them from the
// image the library writes to check that they still load and rank the same.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace agentmem::test {
namespace bm25_images {

inline uint32_t U32(std::string_view b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
inline uint64_t U64(std::string_view b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}
inline size_t Pad8(size_t n) { return (n + 7) & ~size_t{7}; }
template <class T>
void Append(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace bm25_images

// The version 2 image of the same index. REQUIRES: `image` is a whole, valid
// image of version 2 (returned as it is) or 3.
inline std::string Bm25ImageV2(std::string_view image) {
  using namespace bm25_images;
  if (U32(image, 4) == 2) return std::string(image);
  const uint64_t docs = U64(image, 8), terms = U64(image, 24), postings = U64(image, 32);
  const size_t postings_at = 80 + docs * 8 + Pad8(docs * 4) + terms * 32;
  const size_t rest_at = postings_at + Pad8(postings * 4);  // blocks, peaks, text: unchanged
  std::string v2(image.substr(0, postings_at));
  const uint32_t version = 2;
  std::memcpy(v2.data() + 4, &version, 4);
  for (size_t i = 0; i < postings; i++) {
    const uint32_t packed = U32(image, postings_at + 4 * i);
    Append<uint32_t>(&v2, packed >> 8);
    Append<uint32_t>(&v2, packed & 0xff);
  }
  v2.append(image.substr(rest_at));
  return v2;
}

// The version 1 image of the same index. REQUIRES: `image` is a whole, valid
// image of version 2 or 3.
inline std::string Bm25ImageV1(std::string_view image) {
  using namespace bm25_images;
  const std::string v2 = Bm25ImageV2(image);
  const uint64_t docs = U64(v2, 8), terms = U64(v2, 24), postings = U64(v2, 32);
  const size_t docs_at = 80, lens_at = docs_at + docs * 8;
  const size_t terms_at = lens_at + Pad8(docs * 4);
  const size_t postings_at = terms_at + terms * 32;
  const size_t rest_at = postings_at + postings * 8;  // blocks, peaks, text: unchanged
  std::string v1(v2.substr(0, 80));
  const uint32_t version = 1;
  std::memcpy(v1.data() + 4, &version, 4);
  v1.append(v2.substr(docs_at, docs * 8));
  v1.append(v2.substr(terms_at, terms * 32));
  for (size_t i = 0; i < postings; i++) {
    Append<uint64_t>(&v1, U64(v2, docs_at + 8 * U32(v2, postings_at + 8 * i)));
    Append<uint32_t>(&v1, U32(v2, postings_at + 8 * i + 4));
    Append<uint32_t>(&v1, 0);
  }
  for (size_t i = 0; i < postings; i++) {
    Append<uint32_t>(&v1, U32(v2, lens_at + 4 * U32(v2, postings_at + 8 * i)));
  }
  v1.resize(Pad8(v1.size()), '\0');
  v1.append(v2.substr(rest_at));
  return v1;
}

}  // namespace agentmem::test

// index/text/stable_hash.h -- the 64-bit hash of the built-in embedder:
// FNV-1a over bytes, then a 64-bit avalanche finalizer (the one of the
// SplitMix64 generator) so that every output bit depends on every input bit.
//
// Unlike std::hash, these values are fixed forever: they decide where
// "agentmem-hash-v1" puts each feature, and so are part of the file format.
// Only integer arithmetic on fixed-width types: identical on every platform.
#pragma once

#include <cstdint>
#include <string_view>

namespace agentmem::index {

inline constexpr uint64_t kFnv1aOffsetBasis = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnv1aPrime = 0x100000001b3ULL;

// FNV-1a 64 of `bytes`, continuing from `h` (so that a hash can be computed
// over several pieces as if they were concatenated).
constexpr uint64_t Fnv1a64(std::string_view bytes, uint64_t h = kFnv1aOffsetBasis) {
  for (char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= kFnv1aPrime;
  }
  return h;
}

// A bijective mix of the 64 bits of x.
constexpr uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// The hash the embedder uses: Mix64(Fnv1a64(bytes)).
constexpr uint64_t StableHash64(std::string_view bytes) { return Mix64(Fnv1a64(bytes)); }

}  // namespace agentmem::index

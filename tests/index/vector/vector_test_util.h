// tests/index/vector/vector_test_util.h -- helpers shared by the vector index
// tests: seeded random vectors, a texmex .fvecs/.ivecs reader for
// ../shared/data/bigann10k_sift, and a monotonic stopwatch.
#pragma once

#include "tests/index/text/shared_data.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tests/util/seed.h"

namespace agentmem::test {

// A generator seeded from the run's seed (printed by test_main.cc) and a
// per-test salt, so that each test draws its own stream.
inline std::mt19937_64 SeededRng(uint64_t salt) { return std::mt19937_64(Seed() * 1000003 + salt); }

// n * dim floats uniform in [lo, hi).
inline std::vector<float> RandomFloats(std::mt19937_64& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A texmex file: `rows` vectors of `dim` values of T, row-major.
template <typename T>
struct TexmexMatrix {
  size_t rows = 0;
  size_t dim = 0;
  std::vector<T> values;
  const T* row(size_t r) const { return values.data() + r * dim; }
};

// Reads a texmex file ([int32 dim][dim values of T] per vector, little-endian).
// Returns false when the file is missing or malformed.
template <typename T>
bool ReadTexmex(const std::string& path, TexmexMatrix<T>* out) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  bool ok = true;
  int32_t dim = 0;
  while (ok && std::fread(&dim, sizeof dim, 1, f) == 1) {
    if (dim <= 0 || (out->dim != 0 && static_cast<size_t>(dim) != out->dim)) ok = false;
    if (!ok) break;
    out->dim = static_cast<size_t>(dim);
    size_t at = out->values.size();
    out->values.resize(at + out->dim);
    ok = std::fread(out->values.data() + at, sizeof(T), out->dim, f) == out->dim;
    out->rows += ok ? 1 : 0;
  }
  std::fclose(f);
  return ok && out->rows > 0;
}

// The evaluation data folder, seen from the project root (meson's workdir).
inline std::string SiftDir() { return SharedDataDir() + "/bigann10k_sift"; }

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace agentmem::test

// tests/fuzz/fuzz.h -- how a fuzz target is declared, so that one source file
// serves two builds:
//   * libFuzzer (clang-14, -fsanitize=fuzzer,address,undefined; `make fuzz`):
//     compiled with -DAGENTMEM_LIBFUZZER, the target is LLVMFuzzerTestOneInput;
//   * replay (the normal g++ build; tests/fuzz/replay_main.cc): every target
//     registers itself by name, and fuzz_replay feeds it each file of a corpus
//     folder. reliability_tests runs that for tests/fuzz/corpus/<name>/.
//
// A target reports a broken invariant with AGENTMEM_FUZZ_CHECK, which prints
// and aborts: libFuzzer saves the input as a crash, the replay fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace agentmem::fuzz {

using TargetFn = int (*)(const uint8_t* data, size_t size);

// Registers a target for the replay build (returns true).
bool Register(const char* name, TargetFn fn);

// Reads fuzzer bytes front to back; past the end it yields zeros.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  bool empty() const { return left_ == 0; }
  size_t left() const { return left_; }
  uint8_t U8() {
    if (!left_) return 0;
    left_--;
    return *p_++;
  }
  uint32_t U32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= uint32_t{U8()} << (8 * i);
    return v;
  }
  std::string Take(size_t n) {
    n = n < left_ ? n : left_;
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    left_ -= n;
    return s;
  }
  std::string Rest() { return Take(left_); }

 private:
  const uint8_t* p_;
  size_t left_;
};

}  // namespace agentmem::fuzz

#define AGENTMEM_FUZZ_CHECK(cond, ...)                                               \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "fuzz invariant broken at %s:%d: %s\n  ", __FILE__, __LINE__, \
                   #cond);                                                           \
      std::fprintf(stderr, __VA_ARGS__);                                             \
      std::fprintf(stderr, "\n");                                                    \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#ifdef AGENTMEM_LIBFUZZER
#define AGENTMEM_FUZZ_TARGET(name) \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#else
#define AGENTMEM_FUZZ_TARGET(name)                                                   \
  static int AgentmemFuzz_##name(const uint8_t* data, size_t size);                  \
  [[maybe_unused]] static const bool agentmem_fuzz_registered_##name =               \
      ::agentmem::fuzz::Register(#name, AgentmemFuzz_##name);                        \
  static int AgentmemFuzz_##name(const uint8_t* data, size_t size)
#endif

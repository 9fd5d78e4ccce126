// tests/util/peak_memory.h -- how much a piece of code grows this process's
// peak resident memory (Linux: VmHWM, reset through /proc/self/clear_refs).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define AGENTMEM_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define AGENTMEM_TEST_SANITIZED 1
#endif
#endif

namespace agentmem::test {

// A field of /proc/self/status in KiB ("VmRSS:", "VmHWM:"); -1 if unknown.
inline long ProcStatusKib(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, field, n) == 0) kib = std::strtol(line + n, nullptr, 10);
  }
  std::fclose(f);
  return kib;
}

// Sanitizers and valgrind keep freed memory and shadow bytes of their own:
// there a memory bound is not asserted.
inline bool MemoryMeasurable() {
#ifdef AGENTMEM_TEST_SANITIZED
  return false;
#else
  const char* preload = std::getenv("LD_PRELOAD");
  return !(preload && std::strstr(preload, "valgrind"));
#endif
}

// Resets the peak to the current resident size; returns that size (KiB), or
// -1 when the peak cannot be reset.
inline long ResetPeakKib() {
  FILE* c = std::fopen("/proc/self/clear_refs", "w");
  if (!c) return -1;
  const bool reset = std::fputs("5", c) >= 0;
  if (std::fclose(c) != 0 || !reset) return -1;
  return ProcStatusKib("VmRSS:");
}

// The peak's growth (KiB) since ResetPeakKib() returned `start`.
inline long PeakGrowthKib(long start) { return ProcStatusKib("VmHWM:") - start; }

}  // namespace agentmem::test

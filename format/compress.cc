// format/compress.cc -- zstd, bounded: the output size is known before decoding.
#include "format/compress.h"

#include "format/page.h"

#ifdef AGENTMEM_TEST_HOOKS
// ZSTD_create*_advanced: contexts whose allocations the tests can fail.
#define ZSTD_STATIC_LINKING_ONLY
#include <cstdlib>
#endif
#include <zstd.h>

namespace agentmem::format {

namespace {

#ifdef AGENTMEM_TEST_HOOKS
thread_local int t_allocations_until_failure = -1;  // -1: none fails
thread_local int t_failed_allocations = 0;

void* TestAllocate(void*, size_t n) {
  if (t_allocations_until_failure >= 0 && t_allocations_until_failure-- == 0) {
    t_failed_allocations++;
    return nullptr;
  }
  return std::malloc(n);
}
void TestFree(void*, void* p) { std::free(p); }
constexpr ZSTD_customMem kTestMem = {TestAllocate, TestFree, nullptr};
ZSTD_CCtx* NewCCtx() { return ZSTD_createCCtx_advanced(kTestMem); }
ZSTD_DCtx* NewDCtx() { return ZSTD_createDCtx_advanced(kTestMem); }
#else
ZSTD_CCtx* NewCCtx() { return ZSTD_createCCtx(); }
ZSTD_DCtx* NewDCtx() { return ZSTD_createDCtx(); }
#endif

// One compression and one decompression context per thread, kept: making a
// context per call (ZSTD_compress) allocates and clears about a megabyte
// each time, which cost more than compressing a page. Each is made on first
// use, and made again on the next call when that failed (no memory): a
// thread that once ran short must not be left unable to read compressed pages.
struct Contexts {
  ZSTD_CCtx* c = nullptr;
  ZSTD_DCtx* d = nullptr;
  ~Contexts() {
    ZSTD_freeCCtx(c);
    ZSTD_freeDCtx(d);
  }
};

Contexts& ThreadContexts() {
  thread_local Contexts contexts;
  return contexts;
}

// The zstd level of page payloads. On payloads of a few KiB (the default
// page_size is 4 KiB), level 1 shrinks text to within 2 % of level 3 and
// graph lists further than level 3 does, in half the time or less.
constexpr int kLevel = 1;

}  // namespace

bool CompressIfItPays(std::string_view src, std::string* dst) {
  if (src.size() < 128) return false;
  ZSTD_CCtx*& ctx = ThreadContexts().c;
  if (!ctx) ctx = NewCCtx();
  if (!ctx) return false;  // no memory for a context: store the page as it is
  dst->resize(ZSTD_compressBound(src.size()));
  // An error here is a failed allocation of the context's workspace: the
  // output has room for the worst case.
  size_t n = ZSTD_compressCCtx(ctx, dst->data(), dst->size(), src.data(), src.size(), kLevel);
  // Stored raw too when it compresses beyond the ratio a reader accepts.
  if (ZSTD_isError(n) || n > src.size() - src.size() / 8 ||
      uint64_t{n} * kMaxCompressionRatio < src.size()) {
    return false;
  }
  dst->resize(n);
  return true;
}

Status Decompress(std::string_view src, size_t expected_size, int64_t page_no, std::string* dst) {
  unsigned long long frame = ZSTD_getFrameContentSize(src.data(), src.size());
  if (frame == ZSTD_CONTENTSIZE_ERROR || frame != expected_size) {
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no,
                               "page %lld: zstd frame size %llu does not match recorded size %zu",
                               static_cast<long long>(page_no), frame, expected_size);
  }
  ZSTD_DCtx*& ctx = ThreadContexts().d;
  if (!ctx) ctx = NewDCtx();
  if (!ctx) return Status(kNoMem, "out of memory for a zstd context");
  dst->resize(expected_size);
  // zstd refuses a frame that decodes to other than its recorded content
  // size, and the output has no room for more: a success is expected_size bytes.
  size_t n = ZSTD_decompressDCtx(ctx, dst->data(), dst->size(), src.data(), src.size());
  if (ZSTD_isError(n)) {
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld: zstd frame does not decode: %s",
                               static_cast<long long>(page_no), ZSTD_getErrorName(n));
  }
  return Status::OK();
}

#ifdef AGENTMEM_TEST_HOOKS
void FailZstdAllocationForTest(int after) {
  t_allocations_until_failure = after;
  t_failed_allocations = 0;
}
int ZstdAllocationsFailedForTest() { return t_failed_allocations; }
#endif

}  // namespace agentmem::format

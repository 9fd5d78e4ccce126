// format/compress.cc -- zstd, bounded: the output size is known before decoding.
#include "format/compress.h"

#include <zstd.h>

namespace agentmem::format {

namespace {

// One compression and one decompression context per thread, kept: making a
// context per call (ZSTD_compress) allocates and clears about a megabyte
// each time, which cost more than compressing a page.
struct Contexts {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_DCtx* d = ZSTD_createDCtx();
  ~Contexts() {
    ZSTD_freeCCtx(c);
    ZSTD_freeDCtx(d);
  }
};

Contexts& ThreadContexts() {
  thread_local Contexts contexts;
  return contexts;
}

}  // namespace

bool CompressIfItPays(std::string_view src, std::string* dst) {
  if (src.size() < 128) return false;
  ZSTD_CCtx* ctx = ThreadContexts().c;
  if (!ctx) return false;  // no memory for a context: store the page as it is
  dst->resize(ZSTD_compressBound(src.size()));
  size_t n = ZSTD_compressCCtx(ctx, dst->data(), dst->size(), src.data(), src.size(), 3);
  if (ZSTD_isError(n) || n > src.size() - src.size() / 8) return false;
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
  dst->resize(expected_size);
  ZSTD_DCtx* ctx = ThreadContexts().d;
  if (!ctx) return Status(kNoMem, "out of memory for a zstd context");
  size_t n = ZSTD_decompressDCtx(ctx, dst->data(), dst->size(), src.data(), src.size());
  if (ZSTD_isError(n) || n != expected_size) {
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld: zstd frame does not decode: %s",
                               static_cast<long long>(page_no),
                               ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short output");
  }
  return Status::OK();
}

}  // namespace agentmem::format

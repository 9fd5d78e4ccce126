// format/compress.cc -- zstd, bounded: the output size is known before decoding.
#include "format/compress.h"

#include <zstd.h>

namespace agentmem::format {

bool CompressIfItPays(std::string_view src, std::string* dst) {
  if (src.size() < 128) return false;
  dst->resize(ZSTD_compressBound(src.size()));
  size_t n = ZSTD_compress(dst->data(), dst->size(), src.data(), src.size(), 3);
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
  size_t n = ZSTD_decompress(dst->data(), dst->size(), src.data(), src.size());
  if (ZSTD_isError(n) || n != expected_size) {
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld: zstd frame does not decode: %s",
                               static_cast<long long>(page_no),
                               ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short output");
  }
  return Status::OK();
}

}  // namespace agentmem::format

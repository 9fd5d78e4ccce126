// engine/env/env.cc -- anchor for the Env interface (its implementations live
// in posix_env.cc and mem_env.cc).
#include "engine/env/env.h"

#include <algorithm>
#include <cstring>

#include <sys/mman.h>

namespace agentmem::engine {
namespace {

// Anonymous memory (untouched pages cost nothing until written).
class AnonymousBytes : public MappedBytes {
 public:
  static std::shared_ptr<AnonymousBytes> New(size_t n) {
    void* p = ::mmap(nullptr, n == 0 ? 1 : n, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    auto b = std::shared_ptr<AnonymousBytes>(new AnonymousBytes());
    b->data_ = static_cast<char*>(p);
    b->size_ = n;
    return b;
  }
  ~AnonymousBytes() override { ::munmap(data_, size_ == 0 ? 1 : size_); }
};

}  // namespace

Status File::MapPrivate(uint64_t offset, size_t n, size_t spare,
                        std::shared_ptr<MappedBytes>* out) {
  auto bytes = AnonymousBytes::New(n + spare);
  if (!bytes) return Status(kNoMem, "cannot allocate memory to read a checkpoint");
  std::string buf;
  const size_t kChunk = size_t{1} << 20;
  for (size_t done = 0; done < n;) {
    size_t want = std::min(kChunk, n - done);
    AGENTMEM_RETURN_IF_ERROR(ReadAt(offset + done, want, &buf));
    if (buf.size() != want) return Status(kIoErrShortRead, "checkpoint: the file ends early");
    std::memcpy(bytes->data() + done, buf.data(), want);
    done += want;
  }
  *out = std::move(bytes);
  return Status::OK();
}

}  // namespace agentmem::engine

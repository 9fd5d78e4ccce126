// engine/env/env.cc -- anchor for the Env interface (its implementations live
// in posix_env.cc and mem_env.cc).
#include "engine/env/env.h"

#include <algorithm>
#include <cstring>

#include <sys/mman.h>

namespace agentmem::engine {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

std::shared_ptr<MappedBytes> NewPrivateBytes(size_t n) {
  // Aligned to a huge page (and asking for them), so that the system can back
  // it with 2 MiB pages; untouched pages cost nothing until written.
  class Bytes : public MappedBytes {
   public:
    Bytes(void* base, size_t reserved, size_t n) : base_(base), reserved_(reserved) {
      const uintptr_t at =
          (reinterpret_cast<uintptr_t>(base) + kHugePage - 1) / kHugePage * kHugePage;
      data_ = reinterpret_cast<char*>(at);
      size_ = n;
    }
    ~Bytes() override { ::munmap(base_, reserved_); }

   private:
    void* base_;
    size_t reserved_;
  };
  const size_t reserved = n + kHugePage;
  void* p = ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto b = std::make_shared<Bytes>(p, reserved, n);
#ifdef MADV_HUGEPAGE
  if (n >= kHugePage) ::madvise(b->data(), (n + kHugePage - 1) / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
  return b;
}

Status File::WriteWithZeros(uint64_t offset, std::string_view data, size_t zeros) {
  std::string both;
  both.reserve(data.size() + zeros);
  both.append(data);
  both.append(zeros, '\0');
  return WriteAt(offset, both);
}

Status File::ReadPrivate(uint64_t offset, size_t n, size_t spare, const PieceFn& piece,
                         std::shared_ptr<MappedBytes>* out) {
  std::shared_ptr<MappedBytes> bytes = NewPrivateBytes(n + spare);
  if (!bytes) return Status(kNoMem, "cannot allocate memory to read a checkpoint");
  std::string buf;
  for (size_t done = 0; done < n;) {
    const size_t want = std::min(kReadPiece, n - done);
    AGENTMEM_RETURN_IF_ERROR(ReadAt(offset + done, want, &buf));
    if (buf.size() != want) return Status(kIoErrShortRead, "read: the file ends early");
    std::memcpy(bytes->data() + done, buf.data(), want);
    if (piece) AGENTMEM_RETURN_IF_ERROR(piece(done, std::string_view(bytes->data() + done, want)));
    done += want;
  }
  *out = std::move(bytes);
  return Status::OK();
}

}  // namespace agentmem::engine

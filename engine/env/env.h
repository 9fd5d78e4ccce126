// engine/env/env.h -- the file I/O layer (docs/architecture.md "Env").
//
// Env and File are the only code in agentmem that calls open/pread/pwrite/
// fdatasync/ftruncate/fcntl. Three implementations: PosixEnv (the real one),
// MemEnv (in-memory files, for ":memory:" and fast tests) and, in tests/util,
// FaultEnv (wraps another Env to fail chosen calls and to simulate power loss).
//
// Thread safety: an Env is safe to share between threads. A File is used by
// one thread at a time (the Database that owns it serialises calls).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "format/status.h"

namespace agentmem::engine {

// Bytes of a file in memory: a private, writable copy (ReadPrivate(),
// NewPrivateBytes()), whose writes change this process's copy only, never
// the file; or the file's own pages, read-only (File::MapShared()).
class MappedBytes {
 public:
  virtual ~MappedBytes() = default;
  char* data() const { return data_; }
  size_t size() const { return size_; }

 protected:
  char* data_ = nullptr;
  size_t size_ = 0;
};

// Which file a path or an open File is (device and inode on POSIX); two
// equal ids are the same file. {0, 0}: unknown.
struct FileId {
  uint64_t dev = 0, ino = 0;
  bool known() const { return dev != 0 || ino != 0; }
  bool operator==(const FileId&) const = default;
};

// Memory for File::ReadPrivate: n writable bytes, aligned to 2 MiB and
// offered huge pages. nullptr when there is no memory.
std::shared_ptr<MappedBytes> NewPrivateBytes(size_t n);
// The largest piece File::ReadPrivate reads at once.
constexpr size_t kReadPiece = size_t{1} << 20;

class File {
 public:
  virtual ~File() = default;
  // A private, writable copy of the n bytes at offset (which the file must
  // hold), followed by `spare` more writable bytes, read in pieces of at
  // most 1 MiB; `piece` (optional) sees each piece once it is in place (its
  // offset from `offset`, its bytes), so that a caller can check the bytes
  // while they are in the CPU's cache, and stop the read with an error. The
  // memory asks the system for huge pages: a checkpoint's graph is searched
  // where it lies, and with 4 KiB pages every first touch of a page (and
  // every TLB miss) costs -- on some virtual machines 20x more than the
  // read. Errors: kIoErrRead, kIoErrShortRead, kNoMem, or what `piece` returns.
  using PieceFn = std::function<Status(uint64_t offset, std::string_view bytes)>;
  virtual Status ReadPrivate(uint64_t offset, size_t n, size_t spare, const PieceFn& piece,
                             std::shared_ptr<MappedBytes>* out);
  // The file's first n bytes (n > 0, at most its size) mapped read-only,
  // shared: the system's cached pages of the file, no copy. Reading past the
  // file's end through it faults (SIGBUS), so only bytes that stay in the
  // file may be read: the log's committed pages, which no writer changes or
  // cuts off (a VACUUM replaces the file, leaving this one as it was).
  // Errors: kMisuse when this File cannot be mapped (the caller reads
  // instead), kIoErr.
  virtual Status MapShared(uint64_t n, std::shared_ptr<const MappedBytes>* out) {
    (void)n, (void)out;
    return Status(kMisuse, "this file cannot be mapped");
  }
  // Reads up to n bytes at offset into *out; fewer only at end of file.
  // Errors: kIoErrRead.
  virtual Status ReadAt(uint64_t offset, size_t n, std::string* out) = 0;
  // Writes all of data at offset. Errors: kIoErrWrite, kFull.
  virtual Status WriteAt(uint64_t offset, std::string_view data) = 0;
  // Writes data at offset and `zeros` zero bytes right after it, as one
  // write (by default WriteAt() of the two put together). Errors: as WriteAt.
  virtual Status WriteWithZeros(uint64_t offset, std::string_view data, size_t zeros);
  // Makes every completed write durable (fdatasync). Errors: kIoErrFsync.
  virtual Status Sync() = 0;
  // Errors: kIoErrTruncate.
  virtual Status Truncate(uint64_t size) = 0;
  virtual Status Size(uint64_t* size) = 0;
  // The write lock: one holder per file across threads and processes (an OFD
  // lock on PosixEnv). Never blocks; *acquired tells. Errors: kIoErrLock.
  virtual Status TryLockWrite(bool* acquired) = 0;
  virtual Status UnlockWrite() = 0;
  // The identity of the open file (unknown by default).
  virtual FileId Identity() const { return {}; }
};

struct OpenMode {
  bool read_only = false;
};

class Env {
 public:
  virtual ~Env() = default;
  // Opens an existing file. Errors: kCantOpen (missing, permission).
  virtual Status Open(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) = 0;
  // Creates `path` holding exactly `initial` bytes, durably and atomically: after
  // a crash the file either does not exist or holds all of `initial`. Fails with
  // kCantOpenExists if the path exists (the caller then opens it).
  virtual Status CreateAtomic(const std::string& path, std::string_view initial) = 0;
  // As CreateAtomic, the new file taking the permission bits and, where the
  // process may, the owner and group of the file at `like` before its name
  // appears (the rewrite of a file by VACUUM keeps who may read it). An Env
  // without permissions creates it as CreateAtomic does.
  virtual Status CreateAtomicLike(const std::string& path, std::string_view initial,
                                  const std::string& like) {
    (void)like;
    return CreateAtomic(path, initial);
  }
  virtual bool Exists(const std::string& path) = 0;
  virtual Status Delete(const std::string& path) = 0;
  // Creates (or empties) `path` for a new file written from scratch.
  // Errors: kCantOpen.
  virtual Status CreateEmpty(const std::string& path, std::unique_ptr<File>* out) {
    (void)path, (void)out;
    return Status(kMisuse, "this Env cannot create a file from scratch");
  }
  // Renames `from` over `to` atomically, then makes the rename durable (syncs
  // the directory). Errors: kIoErr.
  virtual Status Rename(const std::string& from, const std::string& to) {
    (void)from, (void)to;
    return Status(kMisuse, "this Env cannot rename files");
  }
  // The identity of the file at `path` now ({} when unknown or missing).
  virtual FileId Identify(const std::string& path) {
    (void)path;
    return {};
  }

  // Gives `path` the permission bits of `like` (a salvaged copy is as private
  // as its source). An Env without permissions does nothing.
  virtual Status CopyPermissions(const std::string& like, const std::string& path) {
    (void)like, (void)path;
    return Status::OK();
  }

  // The process-wide POSIX Env. Never deleted.
  static Env* Posix();
};

// A fresh in-memory Env: its files live as long as the Env.
std::unique_ptr<Env> NewMemEnv();

}  // namespace agentmem::engine

// engine/env/posix_env.cc -- Env over POSIX: pread/pwrite loops that handle
// short counts and EINTR, fdatasync, OFD byte-range locks for the write lock,
// and atomic creation through O_TMPFILE + linkat (or a temporary file + link
// where O_TMPFILE is unsupported), followed by an fsync of the directory.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <random>
#include <vector>

#include "engine/env/env.h"

namespace agentmem::engine {
namespace {

// The write lock is one byte far beyond any real file size; OFD locks may lie
// beyond end of file, and no I/O ever touches that byte.
constexpr off_t kWriteLockByte = off_t{1} << 62;

Status Errno(int code, const std::string& what, const std::string& path, int err) {
  int c = code;
  if (err == ENOSPC || err == EDQUOT) c = kFull;
  return Status(c, what + " " + path + ": " + std::strerror(err));
}

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status SyncDirectory(const std::string& path) {
  std::string dir = DirOf(path);
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(kIoErrFsync, "cannot open directory", dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Errno(kIoErrFsync, "fsync of directory", dir, err);
  return Status::OK();
}

Status WriteAll(int fd, uint64_t offset, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno(kIoErrWrite, "write to", path, errno);
    }
    if (n == 0) return Status(kIoErrWrite, "write to " + path + ": no progress");
    data.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return Status::OK();
}

// Writes data and then `zeros` zero bytes at offset with pwritev, from one
// shared block of zeros: no copy of the data.
Status WriteAllWithZeros(int fd, uint64_t offset, std::string_view data, size_t zeros,
                         const std::string& path) {
  static const std::string kZeros(64 << 10, '\0');
  std::vector<iovec> iov;
  iov.push_back({const_cast<char*>(data.data()), data.size()});
  for (size_t left = zeros; left > 0;) {
    const size_t n = std::min(left, kZeros.size());
    iov.push_back({const_cast<char*>(kZeros.data()), n});
    left -= n;
  }
  size_t first = 0;  // the iovecs before it are written
  while (first < iov.size()) {
    const int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    ssize_t n = ::pwritev(fd, iov.data() + first, count, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno(kIoErrWrite, "write to", path, errno);
    }
    if (n == 0) return Status(kIoErrWrite, "write to " + path + ": no progress");
    offset += static_cast<uint64_t>(n);
    for (size_t done = static_cast<size_t>(n); done > 0 && first < iov.size();) {
      const size_t take = std::min(done, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
      iov[first].iov_len -= take;
      done -= take;
      if (iov[first].iov_len == 0) first++;
    }
    while (first < iov.size() && iov[first].iov_len == 0) first++;
  }
  return Status::OK();
}

// A file descriptor and its path.
class PosixFile : public File {
 public:
  // Reads straight into the memory (no intermediate copy).
  Status ReadPrivate(uint64_t offset, size_t n, size_t spare, const PieceFn& piece,
                     std::shared_ptr<MappedBytes>* out) override {
    std::shared_ptr<MappedBytes> bytes = NewPrivateBytes(n + spare);
    if (!bytes) return Errno(kNoMem, "cannot allocate memory to read", path_, ENOMEM);
    for (size_t done = 0; done < n;) {
      const size_t want = std::min(kReadPiece, n - done);
      size_t got = 0;
      while (got < want) {
        ssize_t r = ::pread(fd_, bytes->data() + done + got, want - got,
                            static_cast<off_t>(offset + done + got));
        if (r < 0) {
          if (errno == EINTR) continue;
          return Errno(kIoErrRead, "read from", path_, errno);
        }
        if (r == 0) return Status(kIoErrShortRead, "read from " + path_ + ": the file ends early");
        got += static_cast<size_t>(r);
      }
      if (piece) AGENTMEM_RETURN_IF_ERROR(piece(done, std::string_view(bytes->data() + done, want)));
      done += want;
    }
    *out = std::move(bytes);
    return Status::OK();
  }

  Status MapShared(uint64_t n, std::shared_ptr<const MappedBytes>* out) override {
    class Mapping : public MappedBytes {
     public:
      Mapping(void* p, size_t n) {
        data_ = static_cast<char*>(p);
        size_ = n;
      }
      ~Mapping() override { ::munmap(data_, size_); }
    };
    if (n == 0 || n > SIZE_MAX) return Status(kMisuse, "map of " + path_ + ": no bytes to map");
    void* p = ::mmap(nullptr, static_cast<size_t>(n), PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) return Errno(kIoErrRead, "cannot map", path_, errno);
    *out = std::make_shared<Mapping>(p, static_cast<size_t>(n));
    return Status::OK();
  }

  PosixFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixFile() override { ::close(fd_); }

  Status ReadAt(uint64_t offset, size_t n, std::string* out) override {
    out->resize(n);
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd_, out->data() + got, n - got, static_cast<off_t>(offset + got));
      if (r < 0) {
        if (errno == EINTR) continue;
        return Errno(kIoErrRead, "read from", path_, errno);
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    out->resize(got);
    return Status::OK();
  }
  Status WriteAt(uint64_t offset, std::string_view data) override {
    return WriteAll(fd_, offset, data, path_);
  }
  Status WriteWithZeros(uint64_t offset, std::string_view data, size_t zeros) override {
    return WriteAllWithZeros(fd_, offset, data, zeros, path_);
  }
  Status Sync() override {
    if (::fdatasync(fd_) != 0) return Errno(kIoErrFsync, "fdatasync of", path_, errno);
    return Status::OK();
  }
  Status Truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return Errno(kIoErrTruncate, "truncate of", path_, errno);
    }
    return Status::OK();
  }
  Status Size(uint64_t* size) override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Errno(kIoErrRead, "stat of", path_, errno);
    *size = static_cast<uint64_t>(st.st_size);
    return Status::OK();
  }
  Status TryLockWrite(bool* acquired) override { return Lock(F_WRLCK, acquired); }
  FileId Identity() const override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return {};
    return FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  }
  Status UnlockWrite() override {
    bool ignored;
    return Lock(F_UNLCK, &ignored);
  }

 private:
  Status Lock(short type, bool* acquired) {
    struct flock fl;
    std::memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = kWriteLockByte;
    fl.l_len = 1;
    while (::fcntl(fd_, F_OFD_SETLK, &fl) != 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EACCES) {
        *acquired = false;
        return Status::OK();
      }
      return Errno(kIoErrLock, "lock of", path_, errno);
    }
    *acquired = true;
    return Status::OK();
  }

  int fd_;
  std::string path_;
};

class PosixEnv : public Env {
 public:
  Status Open(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) override {
    int flags = (mode.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
    int fd = ::open(path.c_str(), flags);
    if (fd < 0) return Errno(kCantOpen, "cannot open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status(kCantOpen, "cannot open " + path + ": not a regular file");
    }
    *out = std::make_unique<PosixFile>(fd, path);
    return Status::OK();
  }

  Status CreateAtomic(const std::string& path, std::string_view initial) override {
    return Create(path, initial, nullptr);
  }

  Status CreateAtomicLike(const std::string& path, std::string_view initial,
                          const std::string& like) override {
    struct stat st;
    if (::stat(like.c_str(), &st) != 0) return Errno(kCantOpen, "cannot stat", like, errno);
    return Create(path, initial, &st);
  }

  bool Exists(const std::string& path) override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  }

  Status Delete(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return Errno(kIoErr, "cannot delete", path, errno);
    return Status::OK();
  }

  Status CreateEmpty(const std::string& path, std::unique_ptr<File>* out) override {
    int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
    if (fd < 0) return Errno(kCantOpen, "cannot create", path, errno);
    *out = std::make_unique<PosixFile>(fd, path);
    return Status::OK();
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return Errno(kIoErr, "cannot rename " + from + " to", to, errno);
    }
    return SyncDirectory(to);
  }

  Status CopyPermissions(const std::string& like, const std::string& path) override {
    struct stat st;
    if (::stat(like.c_str(), &st) != 0) return Errno(kIoErr, "cannot stat", like, errno);
    if (::chmod(path.c_str(), st.st_mode & 07777) != 0) return Errno(kIoErr, "cannot chmod", path, errno);
    return Status::OK();
  }

  FileId Identify(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return {};
    return FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  }

 private:
  // A new file is made 0644 (less the umask), or, given `like`, 0600 and
  // then given like's owner, group and mode before it has a name, so that no
  // other user can open it in between.
  Status Create(const std::string& path, std::string_view initial, const struct stat* like) {
    if (Exists(path)) return Status(kCantOpenExists, "file exists: " + path);
    const mode_t mode = like ? 0600 : 0644;
    int fd = ::open(DirOf(path).c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
    if (fd >= 0) return LinkTempFile(fd, path, initial, like);
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
      return Errno(kCantOpen, "cannot create", path, errno);
    }
    return CreateViaTempName(path, initial, like);
  }

  // Owner and group where permitted (only a privileged process may give a
  // file away: EPERM is not an error), then the permission bits, which a
  // change of owner may clear.
  static Status TakeAccess(int fd, const struct stat* like, const std::string& path) {
    if (!like) return Status::OK();
    if (::fchown(fd, like->st_uid, like->st_gid) != 0 && errno != EPERM) {
      return Errno(kCantOpen, "cannot set the owner of", path, errno);
    }
    if (::fchmod(fd, like->st_mode & 0777) != 0) {
      return Errno(kCantOpen, "cannot set the permissions of", path, errno);
    }
    return Status::OK();
  }

  // Writes and syncs the anonymous file, then gives it its name. linkat fails
  // with EEXIST if another process created the path meanwhile.
  Status LinkTempFile(int fd, const std::string& path, std::string_view initial,
                      const struct stat* like) {
    Status s = TakeAccess(fd, like, path);
    if (s.ok()) s = WriteAll(fd, 0, initial, path);
    if (s.ok() && ::fdatasync(fd) != 0) s = Errno(kIoErrFsync, "fdatasync of", path, errno);
    if (s.ok()) {
      std::string proc = "/proc/self/fd/" + std::to_string(fd);
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) != 0) {
        s = errno == EEXIST ? Status(kCantOpenExists, "file exists: " + path)
                            : Errno(kCantOpen, "cannot create", path, errno);
      }
    }
    ::close(fd);
    if (!s.ok()) return s;
    return SyncDirectory(path);
  }

  Status CreateViaTempName(const std::string& path, std::string_view initial,
                           const struct stat* like) {
    std::random_device rd;
    std::string tmp = path + ".agentmem-create-" + std::to_string(rd());
    int fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, like ? 0600 : 0644);
    if (fd < 0) return Errno(kCantOpen, "cannot create", tmp, errno);
    Status s = TakeAccess(fd, like, tmp);
    if (s.ok()) s = WriteAll(fd, 0, initial, tmp);
    if (s.ok() && ::fdatasync(fd) != 0) s = Errno(kIoErrFsync, "fdatasync of", tmp, errno);
    ::close(fd);
    if (s.ok() && ::link(tmp.c_str(), path.c_str()) != 0) {
      s = errno == EEXIST ? Status(kCantOpenExists, "file exists: " + path)
                          : Errno(kCantOpen, "cannot create", path, errno);
    }
    ::unlink(tmp.c_str());
    if (!s.ok()) return s;
    return SyncDirectory(path);
  }
};

}  // namespace

Env* Env::Posix() {
  static PosixEnv* env = new PosixEnv;
  return env;
}

}  // namespace agentmem::engine

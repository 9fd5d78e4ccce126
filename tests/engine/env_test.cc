// tests/engine/env_test.cc -- the Env contract, checked on PosixEnv and MemEnv.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <string>

#include "engine/env/env.h"
#include "tests/util/temp_dir.h"

using agentmem::Status;
using agentmem::engine::Env;
using agentmem::engine::File;
using agentmem::engine::OpenMode;
using agentmem::test::TempDir;

namespace {

void CheckContract(Env* env, const std::string& path) {
  CHECK_FALSE(env->Exists(path));
  std::unique_ptr<File> f;
  CHECK(env->Open(path, OpenMode{}, &f).code() == agentmem::kCantOpen);
  REQUIRE(env->CreateAtomic(path, "hello").ok());
  CHECK(env->Exists(path));
  CHECK(env->CreateAtomic(path, "again").code() == agentmem::kCantOpenExists);
  REQUIRE(env->Open(path, OpenMode{}, &f).ok());
  std::string got;
  REQUIRE(f->ReadAt(0, 100, &got).ok());
  CHECK(got == "hello");  // short only at end of file
  REQUIRE(f->WriteAt(10, "world").ok());
  uint64_t size = 0;
  REQUIRE(f->Size(&size).ok());
  CHECK(size == 15);
  REQUIRE(f->ReadAt(3, 12, &got).ok());
  CHECK(got == std::string("lo\0\0\0\0\0world", 12));
  REQUIRE(f->Sync().ok());
  REQUIRE(f->Truncate(4).ok());
  REQUIRE(f->Size(&size).ok());
  CHECK(size == 4);
  REQUIRE(f->ReadAt(10, 5, &got).ok());
  CHECK(got.empty());

  // The write lock has one holder across every File of the path.
  std::unique_ptr<File> g;
  REQUIRE(env->Open(path, OpenMode{}, &g).ok());
  bool a = false, b = true;
  REQUIRE(f->TryLockWrite(&a).ok());
  REQUIRE(g->TryLockWrite(&b).ok());
  CHECK(a);
  CHECK_FALSE(b);
  REQUIRE(f->UnlockWrite().ok());
  REQUIRE(g->TryLockWrite(&b).ok());
  CHECK(b);
  g.reset();  // closing releases the lock
  REQUIRE(f->TryLockWrite(&a).ok());
  CHECK(a);
  f.reset();
  REQUIRE(env->Delete(path).ok());
  CHECK_FALSE(env->Exists(path));
}

// ReadPrivate: the bytes, writable, with the spare room after them; every
// piece shown once, in order, while in place; a piece's error stops the read.
void CheckReadPrivate(Env* env, const std::string& path) {
  std::string content(3 * agentmem::engine::kReadPiece + 12345, '\0');
  for (size_t i = 0; i < content.size(); i++) content[i] = static_cast<char>(i * 7 + i / 4096);
  REQUIRE(env->CreateAtomic(path, content).ok());
  std::unique_ptr<File> f;
  REQUIRE(env->Open(path, OpenMode{}, &f).ok());
  const uint64_t offset = 100;
  const size_t n = content.size() - offset - 5, spare = 3 << 20;
  std::shared_ptr<agentmem::engine::MappedBytes> bytes;
  size_t next = 0;
  std::string seen;
  REQUIRE(f->ReadPrivate(
               offset, n, spare,
               [&](uint64_t at, std::string_view piece) {
                 CHECK(at == next);
                 CHECK(piece.size() <= agentmem::engine::kReadPiece);
                 next += piece.size();
                 seen.append(piece);
                 return Status::OK();
               },
               &bytes)
              .ok());
  REQUIRE(bytes != nullptr);
  CHECK(next == n);
  CHECK(seen == content.substr(offset, n));
  CHECK(bytes->size() == n + spare);
  CHECK(std::string_view(bytes->data(), n) == std::string_view(content).substr(offset, n));
  CHECK(reinterpret_cast<uintptr_t>(bytes->data()) % 4096 == 0);
  bytes->data()[n + spare - 1] = 'x';  // the spare room is writable
  bytes->data()[0] = 'y';              // and so is the copy, privately
  std::string again;
  REQUIRE(f->ReadAt(offset, 1, &again).ok());
  CHECK(again == content.substr(offset, 1));
  // A piece's error is the read's error; a read past the end is a short read.
  int calls = 0;
  Status stop = f->ReadPrivate(
      0, n, 0,
      [&](uint64_t, std::string_view) {
        calls++;
        return Status(agentmem::kCorruptPage, "stop here");
      },
      &bytes);
  CHECK(stop.code() == agentmem::kCorruptPage);
  CHECK(calls == 1);
  CHECK(f->ReadPrivate(content.size() - 10, 20, 0, nullptr, &bytes).code() == agentmem::kIoErrShortRead);
}

// WriteWithZeros: the data, then exactly `zeros` zero bytes, over whatever
// was there, for sizes around the block of zeros it writes from.
void CheckWriteWithZeros(Env* env, const std::string& path) {
  REQUIRE(env->CreateAtomic(path, std::string(300000, 'x')).ok());
  std::unique_ptr<File> f;
  REQUIRE(env->Open(path, OpenMode{}, &f).ok());
  uint64_t at = 7;
  for (size_t zeros : {size_t{0}, size_t{1}, size_t{65535}, size_t{65536}, size_t{65537}, size_t{262144}}) {
    CAPTURE(zeros);
    const std::string data = "data" + std::to_string(zeros);
    REQUIRE(f->WriteWithZeros(at, data, zeros).ok());
    std::string got;
    REQUIRE(f->ReadAt(at, data.size() + zeros + 1, &got).ok());
    REQUIRE(got.size() == data.size() + zeros + 1);
    CHECK(got.substr(0, data.size()) == data);
    CHECK(got.substr(data.size(), zeros) == std::string(zeros, '\0'));
    CHECK(got.back() == (at + data.size() + zeros < 300000 ? 'x' : '\0'));
    at += 1000;
  }
}

}  // namespace

TEST_CASE("a write with zeros after it puts the data and then exactly that many zeros") {
  TempDir dir;
  CheckWriteWithZeros(Env::Posix(), dir.File("zeros.bin"));
  auto env = agentmem::engine::NewMemEnv();
  CheckWriteWithZeros(env.get(), "zeros.bin");
}

TEST_CASE("reading a private copy gives the bytes with room after them, piece by piece") {
  TempDir dir;
  CheckReadPrivate(Env::Posix(), dir.File("private.bin"));
  auto env = agentmem::engine::NewMemEnv();
  CheckReadPrivate(env.get(), "private.bin");
}

TEST_CASE("the posix env keeps the file contract and its write lock excludes other opens") {
  TempDir dir;
  CheckContract(Env::Posix(), dir.File("env.bin"));
}

TEST_CASE("the memory env keeps the same contract") {
  auto env = agentmem::engine::NewMemEnv();
  CheckContract(env.get(), "mem.bin");
}

TEST_CASE("atomic creation leaves no temporary file behind") {
  TempDir dir;
  REQUIRE(Env::Posix()->CreateAtomic(dir.File("a.agentmem"), "x").ok());
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    entries++;
  }
  CHECK(entries == 1);
}

TEST_CASE("a read-only open cannot write") {
  TempDir dir;
  std::string path = dir.File("ro.bin");
  REQUIRE(Env::Posix()->CreateAtomic(path, "abc").ok());
  std::unique_ptr<File> f;
  REQUIRE(Env::Posix()->Open(path, OpenMode{true}, &f).ok());
  Status s = f->WriteAt(0, "z");
  CHECK(s.code() == agentmem::kIoErrWrite);
  CHECK(s.message().find("ro.bin") != std::string::npos);
}

TEST_CASE("a directory is not opened as a database file") {
  TempDir dir;
  std::unique_ptr<File> f;
  Status s = Env::Posix()->Open(dir.path(), OpenMode{}, &f);
  CHECK(s.primary() == agentmem::kCantOpen);
}

TEST_CASE("a directory opened read-only is refused as not a regular file") {
  TempDir dir;
  std::unique_ptr<File> f;
  Status s = Env::Posix()->Open(dir.path(), OpenMode{true}, &f);
  CHECK(s.code() == agentmem::kCantOpen);
  CHECK(s.message().find("not a regular file") != std::string::npos);
  CHECK(f == nullptr);
}

TEST_CASE("the posix env reports a missing directory or file with the path and the right code") {
  TempDir dir;
  const std::string missing = dir.File("no-such-dir/x.agentmem");
  Status s = Env::Posix()->CreateAtomic(missing, "abc");
  CHECK(s.code() == agentmem::kCantOpen);
  CHECK(s.message().find(missing) != std::string::npos);
  std::unique_ptr<File> f;
  s = Env::Posix()->CreateEmpty(missing, &f);
  CHECK(s.code() == agentmem::kCantOpen);
  CHECK(f == nullptr);
  s = Env::Posix()->Delete(dir.File("never.bin"));
  CHECK(s.code() == agentmem::kIoErr);
  CHECK(s.message().find("never.bin") != std::string::npos);
  s = Env::Posix()->Rename(dir.File("never.bin"), dir.File("other.bin"));
  CHECK(s.code() == agentmem::kIoErr);
  CHECK_FALSE(Env::Posix()->Exists(dir.File("other.bin")));
  CHECK_FALSE(Env::Posix()->Identify(dir.File("never.bin")).known());
}

TEST_CASE("a file created from scratch empties what was there, and a rename replaces the target") {
  TempDir dir;
  const std::string a = dir.File("a.bin"), b = dir.File("b.bin");
  REQUIRE(Env::Posix()->CreateAtomic(a, "old contents").ok());
  std::unique_ptr<File> f;
  REQUIRE(Env::Posix()->CreateEmpty(a, &f).ok());
  uint64_t size = 1;
  REQUIRE(f->Size(&size).ok());
  CHECK(size == 0);
  REQUIRE(f->WriteAt(0, "new").ok());
  REQUIRE(f->Sync().ok());
  const agentmem::engine::FileId id = f->Identity();
  CHECK(id.known());
  f.reset();
  REQUIRE(Env::Posix()->CreateAtomic(b, "replaced").ok());
  REQUIRE(Env::Posix()->Rename(a, b).ok());
  CHECK_FALSE(Env::Posix()->Exists(a));
  CHECK(Env::Posix()->Identify(b) == id);
  CHECK(agentmem::test::ReadFileBytes(b) == "new");
}

TEST_CASE("a device that is full reports AGENTMEM_FULL, and one that cannot sync or truncate says so") {
  // /dev/full: every write fails with ENOSPC; it has no data to sync or cut.
  if (!Env::Posix()->Exists("/dev/full")) {
    MESSAGE("no /dev/full here: nothing checked");
    return;
  }
  std::unique_ptr<File> f;
  REQUIRE(Env::Posix()->CreateEmpty("/dev/full", &f).ok());
  Status s = f->WriteAt(0, "x");
  CHECK(s.code() == agentmem::kFull);
  CHECK(s.message().find("/dev/full") != std::string::npos);
  s = f->Sync();
  CHECK(s.code() == agentmem::kIoErrFsync);
  s = f->Truncate(0);
  CHECK(s.code() == agentmem::kIoErrTruncate);
  std::string got;
  REQUIRE(f->ReadAt(0, 4, &got).ok());
  CHECK(got == std::string(4, '\0'));
}

TEST_CASE("a file that cannot be read at an offset (a FIFO) fails reads and writes with their codes") {
  // CreateEmpty opens what is there; a FIFO takes no pread or pwrite (ESPIPE).
  TempDir dir;
  const std::string path = dir.File("fifo");
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  std::unique_ptr<File> f;
  REQUIRE(Env::Posix()->CreateEmpty(path, &f).ok());
  std::string got;
  Status s = f->ReadAt(0, 4, &got);
  CHECK(s.code() == agentmem::kIoErrRead);
  CHECK(s.message().find("fifo") != std::string::npos);
  std::shared_ptr<agentmem::engine::MappedBytes> bytes;
  CHECK(f->ReadPrivate(0, 4, 0, nullptr, &bytes).code() == agentmem::kIoErrRead);
  CHECK(f->WriteAt(0, "x").code() == agentmem::kIoErrWrite);
}

TEST_CASE("a private copy too large for the address space is refused as out of memory") {
  TempDir dir;
  const std::string path = dir.File("small.bin");
  REQUIRE(Env::Posix()->CreateAtomic(path, "0123456789").ok());
  std::unique_ptr<File> f;
  REQUIRE(Env::Posix()->Open(path, OpenMode{true}, &f).ok());
  std::shared_ptr<agentmem::engine::MappedBytes> bytes;
  Status s = f->ReadPrivate(0, 10, size_t{1} << 62, nullptr, &bytes);
  CHECK(s.code() == agentmem::kNoMem);
  CHECK(bytes == nullptr);
  // Without a piece function the bytes are read all the same.
  REQUIRE(f->ReadPrivate(2, 8, 0, nullptr, &bytes).ok());
  CHECK(std::string_view(bytes->data(), 8) == "23456789");
}

TEST_CASE("a file named relative to the working directory is created there, durably") {
  TempDir dir;
  const std::filesystem::path before = std::filesystem::current_path();
  struct Back {
    std::filesystem::path to;
    ~Back() { std::filesystem::current_path(to); }
  } back{before};
  std::filesystem::current_path(dir.path());
  REQUIRE(Env::Posix()->CreateAtomic("rel.agentmem", "abc").ok());  // its directory is "."
  CHECK(agentmem::test::ReadFileBytes(dir.File("rel.agentmem")) == "abc");
  REQUIRE(Env::Posix()->Rename("rel.agentmem", "moved.agentmem").ok());
  CHECK(Env::Posix()->Exists(dir.File("moved.agentmem")));
}

// tests/engine/env_test.cc -- the Env contract, checked on PosixEnv and MemEnv.
#include <doctest/doctest.h>

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

}  // namespace

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

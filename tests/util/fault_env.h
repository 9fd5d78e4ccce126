// tests/util/fault_env.h -- an Env that wraps another to (a) fail a chosen I/O
// call, once or from then on, with EIO, ENOSPC or a short write, and (b)
// simulate power loss: it journals every write since the last Sync() of each
// file and, on SimulateCrash(), rewrites the file to what a disk could hold
// after losing power (SQLite test6.c semantics; RELIABILITY.md "FaultEnv").
//
// Files are tracked per inode, as on POSIX: Rename() moves a file to a new
// name, and handles open on the file it replaced keep writing to that one,
// which a crash then drops (an unlinked inode). Rename's directory sync counts
// as a sync operation (kOpSync): when it is failed, the rename is in doubt and
// SimulateCrash decides whether it reached the disk.
//
// Thread safety: all methods take one mutex.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/env/env.h"

namespace agentmem::test {

enum class Fault { kEio, kEnospc, kShortWrite };

enum OpKind : uint32_t {
  kOpRead = 1,
  kOpWrite = 2,
  kOpSync = 4,
  kOpTruncate = 8,
  kOpSize = 16,
  kOpLock = 32,
  kOpOpen = 64,
  kOpCreate = 128,
  kOpAll = 255,
};

enum class CrashPolicy { kDropAll, kKeepPrefix, kKeepRandomSubset, kTearLast, kGarbageSectors };
const char* CrashPolicyName(CrashPolicy p);

class FaultEnv : public engine::Env {
 public:
  explicit FaultEnv(engine::Env* base) : base_(base) {}

  // Fails the n-th counted operation (1-based, counting only kinds in mask);
  // with `persistent`, every matching operation from the n-th on.
  void FailAt(uint64_t n, Fault fault, bool persistent, uint32_t mask = kOpAll);
  void ClearFaults();
  uint64_t ops() const;        // operations counted so far (all kinds)
  uint64_t syncs() const;      // successful Sync() calls
  uint64_t faults_hit() const; // operations that were failed
  // While paused, operations are neither counted nor failed: a test's own
  // reads (comparing the handle with a model) do not meet its faults.
  void set_paused(bool paused);

  // Rewrites every file to a state a power loss could leave, per `policy`,
  // and kills every File opened so far (their calls then fail with EIO).
  void SimulateCrash(CrashPolicy policy, uint64_t seed);

  // engine::Env
  Status Open(const std::string& path, engine::OpenMode mode,
              std::unique_ptr<engine::File>* out) override;
  Status CreateAtomic(const std::string& path, std::string_view initial) override;
  bool Exists(const std::string& path) override { return base_->Exists(path); }
  Status Delete(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  engine::FileId Identify(const std::string& path) override { return base_->Identify(path); }

  // Used by FaultFile.
  struct Journal {
    std::string durable;  // bytes as of the last sync
    struct Write {
      uint64_t offset;
      std::string data;
      bool truncate = false;
    };
    std::vector<Write> unsynced;
  };
  Status Check(uint32_t kind, Fault* fault_out, bool* fault);
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Journal>> journals_;  // by the name it has now
  // Renames whose directory sync failed: `to` named `replaced` before.
  struct PendingRename {
    std::string from, to;
    std::shared_ptr<Journal> moved, replaced;
  };
  std::vector<PendingRename> pending_renames_;
  uint64_t generation_ = 0;  // bumped by SimulateCrash; older files are dead
  uint64_t syncs_ = 0;

 private:
  engine::Env* base_;
  uint64_t ops_ = 0;
  uint64_t fail_at_ = 0;
  uint32_t fail_mask_ = 0;
  bool persistent_ = false;
  Fault fault_ = Fault::kEio;
  uint64_t matching_ = 0;
  uint64_t faults_hit_ = 0;
  bool paused_ = false;
};

}  // namespace agentmem::test

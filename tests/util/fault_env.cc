// tests/util/fault_env.cc -- see fault_env.h.
#include "tests/util/fault_env.h"

#include <random>

namespace agentmem::test {
namespace {

Status FaultStatus(uint32_t kind, Fault fault) {
  if (fault == Fault::kEnospc && (kind == kOpWrite || kind == kOpCreate)) {
    return Status(kFull, "injected ENOSPC: No space left on device");
  }
  switch (kind) {
    case kOpRead: return Status(kIoErrRead, "injected EIO on read");
    case kOpWrite: return Status(kIoErrWrite, "injected EIO on write");
    case kOpSync: return Status(kIoErrFsync, "injected EIO on fdatasync");
    case kOpTruncate: return Status(kIoErrTruncate, "injected EIO on truncate");
    case kOpLock: return Status(kIoErrLock, "injected EIO on lock");
    case kOpOpen: return Status(kCantOpen, "injected EIO on open");
    case kOpCreate: return Status(kCantOpen, "injected EIO on create");
    default: return Status(kIoErr, "injected EIO");
  }
}

void Apply(std::string* bytes, const FaultEnv::Journal::Write& w) {
  if (w.truncate) {
    bytes->resize(w.offset);
    return;
  }
  if (bytes->size() < w.offset + w.data.size()) bytes->resize(w.offset + w.data.size(), '\0');
  bytes->replace(w.offset, w.data.size(), w.data);
}

class FaultFile : public engine::File {
 public:
  FaultFile(FaultEnv* env, std::shared_ptr<FaultEnv::Journal> journal,
            std::unique_ptr<engine::File> base, uint64_t gen)
      : env_(env), journal_(std::move(journal)), base_(std::move(base)), gen_(gen) {}

  Status ReadAt(uint64_t offset, size_t n, std::string* out) override {
    AGENTMEM_RETURN_IF_ERROR(Gate(kOpRead));
    return base_->ReadAt(offset, n, out);
  }
  Status WriteAt(uint64_t offset, std::string_view data) override {
    Fault f;
    bool fault = false;
    AGENTMEM_RETURN_IF_ERROR(Alive());
    Status s = env_->Check(kOpWrite, &f, &fault);
    if (fault && f == Fault::kShortWrite) {
      std::string_view half = data.substr(0, data.size() / 2);
      Journal(offset, half);
      base_->WriteAt(offset, half).IgnoreError();
      return Status(kIoErrWrite, "injected short write");
    }
    AGENTMEM_RETURN_IF_ERROR(s);
    Journal(offset, data);
    return base_->WriteAt(offset, data);
  }
  Status Sync() override {
    AGENTMEM_RETURN_IF_ERROR(Gate(kOpSync));
    AGENTMEM_RETURN_IF_ERROR(base_->Sync());
    std::lock_guard<std::mutex> g(env_->mu_);
    auto& j = *journal_;
    for (const auto& w : j.unsynced) Apply(&j.durable, w);
    j.unsynced.clear();
    env_->syncs_++;
    return Status::OK();
  }
  Status Truncate(uint64_t size) override {
    AGENTMEM_RETURN_IF_ERROR(Gate(kOpTruncate));
    {
      std::lock_guard<std::mutex> g(env_->mu_);
      journal_->unsynced.push_back({size, "", true});
    }
    return base_->Truncate(size);
  }
  Status Size(uint64_t* size) override {
    AGENTMEM_RETURN_IF_ERROR(Gate(kOpSize));
    return base_->Size(size);
  }
  Status TryLockWrite(bool* acquired) override {
    AGENTMEM_RETURN_IF_ERROR(Gate(kOpLock));
    return base_->TryLockWrite(acquired);
  }
  Status UnlockWrite() override {
    AGENTMEM_RETURN_IF_ERROR(Alive());
    return base_->UnlockWrite();
  }
  engine::FileId Identity() const override { return base_->Identity(); }

 private:
  Status Alive() {
    std::lock_guard<std::mutex> g(env_->mu_);
    if (gen_ != env_->generation_) return Status(kIoErr, "file handle died in a simulated crash");
    return Status::OK();
  }
  Status Gate(uint32_t kind) {
    AGENTMEM_RETURN_IF_ERROR(Alive());
    Fault f;
    bool fault = false;
    return env_->Check(kind, &f, &fault);
  }
  void Journal(uint64_t offset, std::string_view data) {
    std::lock_guard<std::mutex> g(env_->mu_);
    journal_->unsynced.push_back({offset, std::string(data), false});
  }

  FaultEnv* env_;
  std::shared_ptr<FaultEnv::Journal> journal_;
  std::unique_ptr<engine::File> base_;
  uint64_t gen_;
};

}  // namespace

const char* CrashPolicyName(CrashPolicy p) {
  switch (p) {
    case CrashPolicy::kDropAll: return "drop-all";
    case CrashPolicy::kKeepPrefix: return "keep-prefix";
    case CrashPolicy::kKeepRandomSubset: return "keep-random-subset";
    case CrashPolicy::kTearLast: return "tear-last";
    case CrashPolicy::kGarbageSectors: return "garbage-sectors";
  }
  return "?";
}

void FaultEnv::FailAt(uint64_t n, Fault fault, bool persistent, uint32_t mask) {
  std::lock_guard<std::mutex> g(mu_);
  fail_at_ = n;
  fault_ = fault;
  persistent_ = persistent;
  fail_mask_ = mask;
  matching_ = 0;
}

void FaultEnv::ClearFaults() {
  std::lock_guard<std::mutex> g(mu_);
  fail_at_ = 0;
  fail_mask_ = 0;
}

uint64_t FaultEnv::ops() const { return ops_; }
uint64_t FaultEnv::syncs() const { return syncs_; }
uint64_t FaultEnv::faults_hit() const { return faults_hit_; }

void FaultEnv::set_paused(bool paused) {
  std::lock_guard<std::mutex> g(mu_);
  paused_ = paused;
}

Status FaultEnv::Check(uint32_t kind, Fault* fault_out, bool* fault) {
  std::lock_guard<std::mutex> g(mu_);
  *fault = false;
  if (paused_) return Status::OK();
  ops_++;
  if (!(kind & fail_mask_) || fail_at_ == 0) return Status::OK();
  matching_++;
  if (matching_ == fail_at_ || (persistent_ && matching_ > fail_at_)) {
    *fault = true;
    *fault_out = fault_;
    faults_hit_++;
    return FaultStatus(kind, fault_);
  }
  return Status::OK();
}

Status FaultEnv::Open(const std::string& path, engine::OpenMode mode,
                      std::unique_ptr<engine::File>* out) {
  Fault f;
  bool fault = false;
  AGENTMEM_RETURN_IF_ERROR(Check(kOpOpen, &f, &fault));
  std::unique_ptr<engine::File> base;
  AGENTMEM_RETURN_IF_ERROR(base_->Open(path, mode, &base));
  std::lock_guard<std::mutex> g(mu_);
  std::shared_ptr<Journal>& j = journals_[path];
  if (!j) {
    // A file that existed before this Env saw it: its bytes count as durable.
    j = std::make_shared<Journal>();
    uint64_t size = 0;
    base->Size(&size).IgnoreError();
    base->ReadAt(0, size, &j->durable).IgnoreError();
  }
  *out = std::make_unique<FaultFile>(this, j, std::move(base), generation_);
  return Status::OK();
}

Status FaultEnv::Delete(const std::string& path) {
  AGENTMEM_RETURN_IF_ERROR(base_->Delete(path));
  std::lock_guard<std::mutex> g(mu_);
  journals_.erase(path);
  return Status::OK();
}

Status FaultEnv::Rename(const std::string& from, const std::string& to) {
  // The rename itself, then the directory sync that makes it durable.
  AGENTMEM_RETURN_IF_ERROR(base_->Rename(from, to));
  Fault f;
  bool fault = false;
  Status synced = Check(kOpSync, &f, &fault);
  std::lock_guard<std::mutex> g(mu_);
  std::shared_ptr<Journal> moved = journals_[from];
  std::shared_ptr<Journal> replaced = journals_[to];
  journals_.erase(from);
  journals_[to] = moved;
  if (!synced.ok()) {
    pending_renames_.push_back({from, to, moved, replaced});
    return Status(kIoErrFsync, "injected EIO on the directory fsync after a rename");
  }
  syncs_++;
  return Status::OK();
}

Status FaultEnv::CreateAtomic(const std::string& path, std::string_view initial) {
  Fault f;
  bool fault = false;
  AGENTMEM_RETURN_IF_ERROR(Check(kOpCreate, &f, &fault));
  AGENTMEM_RETURN_IF_ERROR(base_->CreateAtomic(path, initial));
  std::lock_guard<std::mutex> g(mu_);
  journals_[path] = std::make_shared<Journal>(Journal{std::string(initial), {}});
  return Status::OK();
}

void FaultEnv::SimulateCrash(CrashPolicy policy, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lock_guard<std::mutex> g(mu_);
  generation_++;
  // A rename whose directory sync failed reached the disk or not: never
  // under drop-all, else by a coin. Undone, the names go back as they were.
  for (auto it = pending_renames_.rbegin(); it != pending_renames_.rend(); ++it) {
    if (policy != CrashPolicy::kDropAll && (rng() & 1)) continue;
    base_->Rename(it->to, it->from).IgnoreError();
    journals_[it->from] = it->moved;
    journals_.erase(it->to);
    if (it->replaced) {
      std::unique_ptr<engine::File> f;
      if (base_->CreateEmpty(it->to, &f).ok()) journals_[it->to] = it->replaced;
    }
  }
  pending_renames_.clear();
  for (auto& [path, jp] : journals_) {
    if (!jp) continue;
    Journal& j = *jp;
    std::string bytes = j.durable;
    const auto& w = j.unsynced;
    size_t n = w.size();
    switch (policy) {
      case CrashPolicy::kDropAll:
        break;
      case CrashPolicy::kKeepPrefix: {
        size_t k = n ? rng() % (n + 1) : 0;
        for (size_t i = 0; i < k; i++) Apply(&bytes, w[i]);
        break;
      }
      case CrashPolicy::kKeepRandomSubset:
        for (size_t i = 0; i < n; i++)
          if (rng() & 1) Apply(&bytes, w[i]);
        break;
      case CrashPolicy::kTearLast: {
        for (size_t i = 0; i + 1 < n; i++) Apply(&bytes, w[i]);
        if (n && !w[n - 1].truncate) {
          Journal::Write last = w[n - 1];
          size_t sectors = (last.data.size() + 511) / 512;
          last.data.resize(std::min(last.data.size(), (rng() % (sectors + 1)) * 512));
          Apply(&bytes, last);
        }
        break;
      }
      case CrashPolicy::kGarbageSectors: {
        size_t k = n ? rng() % n : 0;  // writes before k land; write k becomes garbage
        for (size_t i = 0; i < k; i++) Apply(&bytes, w[i]);
        if (n && !w[k].truncate) {
          Journal::Write junk = w[k];
          // Bytes before the write's offset keep their durable value: like
          // SQLite's default (powersafe overwrite), agentmem assumes a torn
          // write never damages bytes outside the range written
          // (docs/architecture.md). The garbage runs to the sector's end.
          uint64_t start = junk.offset;
          uint64_t end = (junk.offset + junk.data.size() + 511) / 512 * 512;
          junk.data.assign(end - start, '\0');
          for (char& c : junk.data) c = static_cast<char>(rng());
          Apply(&bytes, junk);
        }
        break;
      }
    }
    std::unique_ptr<engine::File> f;
    if (base_->Open(path, engine::OpenMode{false}, &f).ok()) {
      f->Truncate(0).IgnoreError();
      f->WriteAt(0, bytes).IgnoreError();
      f->Truncate(bytes.size()).IgnoreError();
    }
    j.durable = bytes;
    j.unsynced.clear();
  }
}

}  // namespace agentmem::test

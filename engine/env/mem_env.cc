// engine/env/mem_env.cc -- in-memory files. Every File opened on the same path
// of one MemEnv shares the bytes and the write lock, so two handles on one
// MemEnv behave like two processes on one file (minus durability).
#include <map>
#include <mutex>

#include "engine/env/env.h"

namespace agentmem::engine {
namespace {

struct MemData {
  std::mutex mu;
  std::string bytes;
  const void* lock_owner = nullptr;
};

class MemFile : public File {
 public:
  MemFile(std::shared_ptr<MemData> data, bool read_only)
      : data_(std::move(data)), read_only_(read_only) {}
  ~MemFile() override {
    std::lock_guard<std::mutex> g(data_->mu);
    if (data_->lock_owner == this) data_->lock_owner = nullptr;
  }
  Status ReadAt(uint64_t offset, size_t n, std::string* out) override {
    std::lock_guard<std::mutex> g(data_->mu);
    out->clear();
    if (offset < data_->bytes.size()) out->assign(data_->bytes, offset, n);
    return Status::OK();
  }
  Status WriteAt(uint64_t offset, std::string_view d) override {
    if (read_only_) return Status(kIoErrWrite, "write to a read-only in-memory file");
    std::lock_guard<std::mutex> g(data_->mu);
    if (data_->bytes.size() < offset + d.size()) data_->bytes.resize(offset + d.size(), '\0');
    data_->bytes.replace(offset, d.size(), d.data(), d.size());
    return Status::OK();
  }
  Status Sync() override { return Status::OK(); }
  Status Truncate(uint64_t size) override {
    std::lock_guard<std::mutex> g(data_->mu);
    data_->bytes.resize(size, '\0');
    return Status::OK();
  }
  Status Size(uint64_t* size) override {
    std::lock_guard<std::mutex> g(data_->mu);
    *size = data_->bytes.size();
    return Status::OK();
  }
  Status TryLockWrite(bool* acquired) override {
    std::lock_guard<std::mutex> g(data_->mu);
    *acquired = data_->lock_owner == nullptr || data_->lock_owner == this;
    if (*acquired) data_->lock_owner = this;
    return Status::OK();
  }
  Status UnlockWrite() override {
    std::lock_guard<std::mutex> g(data_->mu);
    if (data_->lock_owner == this) data_->lock_owner = nullptr;
    return Status::OK();
  }
  FileId Identity() const override { return IdOf(data_.get()); }
  static FileId IdOf(const MemData* d) { return FileId{1, reinterpret_cast<uintptr_t>(d)}; }

 private:
  std::shared_ptr<MemData> data_;
  bool read_only_;
};

class MemEnv : public Env {
 public:
  Status Open(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return Status(kCantOpen, "cannot open " + path + ": no such file");
    *out = std::make_unique<MemFile>(it->second, mode.read_only);
    return Status::OK();
  }
  Status CreateAtomic(const std::string& path, std::string_view initial) override {
    std::lock_guard<std::mutex> g(mu_);
    if (files_.count(path)) return Status(kCantOpenExists, "file exists: " + path);
    auto data = std::make_shared<MemData>();
    data->bytes.assign(initial.data(), initial.size());
    files_[path] = std::move(data);
    return Status::OK();
  }
  bool Exists(const std::string& path) override {
    std::lock_guard<std::mutex> g(mu_);
    return files_.count(path) != 0;
  }
  Status Delete(const std::string& path) override {
    std::lock_guard<std::mutex> g(mu_);
    if (!files_.erase(path)) return Status(kIoErr, "cannot delete " + path + ": no such file");
    return Status::OK();
  }
  Status CreateEmpty(const std::string& path, std::unique_ptr<File>* out) override {
    std::lock_guard<std::mutex> g(mu_);
    auto data = std::make_shared<MemData>();
    files_[path] = data;
    *out = std::make_unique<MemFile>(data, false);
    return Status::OK();
  }
  Status Rename(const std::string& from, const std::string& to) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = files_.find(from);
    if (it == files_.end()) return Status(kIoErr, "cannot rename " + from + ": no such file");
    files_[to] = it->second;  // handles open on the old `to` keep its bytes, as on POSIX
    files_.erase(it);
    return Status::OK();
  }
  FileId Identify(const std::string& path) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = files_.find(path);
    return it == files_.end() ? FileId{} : MemFile::IdOf(it->second.get());
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<MemData>> files_;
};

}  // namespace

std::unique_ptr<Env> NewMemEnv() { return std::make_unique<MemEnv>(); }

}  // namespace agentmem::engine

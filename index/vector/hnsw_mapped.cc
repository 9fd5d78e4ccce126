// index/vector/hnsw_mapped.cc -- see hnsw_mapped.h. The header layout is the
// table of docs/format.md §5.8 (graph section).
#include "index/vector/hnsw_mapped.h"

#include <cstdio>
#include <cstring>

namespace agentmem::index {
namespace {

template <class T>
T Get(const char* p, size_t at) {
  T v;
  std::memcpy(&v, p + at, sizeof v);
  return v;
}

Status Corrupt(const char* fmt, uint64_t a = 0, uint64_t b = 0) {
  char msg[160];
  std::snprintf(msg, sizeof msg, fmt, static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return StatusF(kCorruptIndex, "hnsw mapped image: %s", msg);
}

}  // namespace

Status MappedRecordCheck::Start(std::string_view head, size_t size) {
  if (head.size() < 64) return Corrupt("%llu bytes, too short", head.size());
  const char* h = head.data();
  const uint64_t dim = Get<uint32_t>(h, 12), m = Get<uint32_t>(h, 16);
  // Version 2 records hold no vector (docs/format.md §5.8).
  const bool vectors = Get<uint32_t>(h, 4) != 2;
  nodes_ = Get<uint32_t>(h, 24);
  deleted_ = Get<uint32_t>(h, 36);
  level0_ = Get<uint64_t>(h, 48);
  record_ = Get<uint32_t>(h, 56);
  max_links_ = 2 * m;
  label_at_ = 4 + 8 * m + (vectors ? 4 * dim : 0);
  if (record_ != label_at_ + 8 || level0_ > size || (size - level0_) / record_ != nodes_ ||
      (size - level0_) % record_ != 0) {
    return Corrupt("sections do not fit its %llu bytes (%llu nodes)", size, nodes_);
  }
  next_ = 0;
  node_ = deleted_seen_ = last_label_ = 0;
  partial_.clear();
  return Status::OK();
}

Status MappedRecordCheck::CheckRecord(const char* r) {
  const uint32_t count = Get<uint32_t>(r, 0) & 0xffff;
  if (count > max_links_) return Corrupt("node %llu: too many links (%llu)", node_, count);
  for (uint32_t j = 0; j < count; ++j) {
    const uint32_t to = Get<uint32_t>(r, 4 + 4 * size_t{j});
    if (to >= nodes_) return Corrupt("node %llu: link to %llu out of range", node_, to);
  }
  deleted_seen_ += static_cast<uint8_t>(r[2]) & 1;
  const uint64_t label = Get<uint64_t>(r, label_at_);
  if (node_ > 0 && label <= last_label_) return Corrupt("node %llu: labels do not increase", node_);
  last_label_ = label;
  node_++;
  return Status::OK();
}

Status MappedRecordCheck::Feed(size_t offset, std::string_view bytes) {
  if (offset != next_) return Status(kInternal, "hnsw mapped image: pieces out of order");
  next_ += bytes.size();
  if (next_ <= level0_) return Status::OK();
  if (offset < level0_) bytes.remove_prefix(level0_ - offset);
  if (!partial_.empty()) {
    const size_t take = std::min<size_t>(record_ - partial_.size(), bytes.size());
    partial_.append(bytes.data(), take);
    bytes.remove_prefix(take);
    if (partial_.size() < record_) return Status::OK();
    AGENTMEM_RETURN_IF_ERROR(CheckRecord(partial_.data()));
    partial_.clear();
  }
  while (bytes.size() >= record_) {
    AGENTMEM_RETURN_IF_ERROR(CheckRecord(bytes.data()));
    bytes.remove_prefix(record_);
  }
  partial_.assign(bytes.data(), bytes.size());
  return Status::OK();
}

Status MappedRecordCheck::Finish() const {
  if (node_ != nodes_ || !partial_.empty()) {
    return Corrupt("%llu of %llu level-0 records seen", node_, nodes_);
  }
  if (deleted_seen_ != deleted_) {
    return Corrupt("%llu nodes marked deleted, header says %llu", deleted_seen_, deleted_);
  }
  return Status::OK();
}

}  // namespace agentmem::index

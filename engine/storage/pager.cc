// engine/storage/pager.cc -- the page cache and the one page verifier.
#include "engine/storage/pager.h"

#include <utility>

#include "format/records.h"

namespace agentmem::engine {

Status Pager::Verify(std::string_view page, uint64_t offset, uint64_t salt,
                     format::PageHeader* header, std::string* payload, std::string_view* view) {
  return format::DecodePage(page, offset, salt, header, payload, view);
}

size_t Pager::ChargeOf(const Page& page) {
  return page.payload.size() + page.records.size() * sizeof(std::string_view) + kEntryOverhead;
}

void Pager::Reset(File* file, uint64_t salt) {
  std::lock_guard<std::mutex> lock(mu_);
  file_ = file;
  salt_ = salt;
  EvictTo(0);
}

void Pager::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  EvictTo(0);
}

void Pager::set_budget(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  budget_ = bytes;
  EvictTo(budget_);
}

size_t Pager::budget() const {
  std::lock_guard<std::mutex> lock(mu_);
  return budget_;
}
uint64_t Pager::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}
uint64_t Pager::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}
size_t Pager::bytes_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}
size_t Pager::pages_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

void Pager::EvictTo(size_t bytes) {
  while (held_ > bytes && !lru_.empty()) {
    const Entry& last = lru_.back();
    held_ -= last.charge;
    index_.erase(last.page->offset);
    lru_.pop_back();
  }
}

// Reads and verifies the page at `offset`; no cache.
Status Pager::Load(uint64_t offset, PageRef* out) const {
  if (file_ == nullptr) return Status(kMisuse, "the pager has no file");
  std::string head;
  AGENTMEM_RETURN_IF_ERROR(file_->ReadAt(offset, format::kPageHeaderSize, &head));
  format::PageHeader h;
  AGENTMEM_RETURN_IF_ERROR(format::PeekPageHeader(head, offset, salt_, &h));
  std::string whole;
  AGENTMEM_RETURN_IF_ERROR(file_->ReadAt(offset, format::PaddedPageSize(h.length), &whole));
  auto page = std::make_shared<Page>();
  page->offset = offset;
  AGENTMEM_RETURN_IF_ERROR(Verify(whole, offset, salt_, &page->header, &page->payload));
  whole = std::string();
  const uint8_t type = page->header.type;
  if (type != static_cast<uint8_t>(format::PageType::kCommit) &&
      type != static_cast<uint8_t>(format::PageType::kCheckpoint)) {
    AGENTMEM_RETURN_IF_ERROR(format::SplitRecords(page->payload, page->header.record_count,
                                                  static_cast<int64_t>(page->header.page_no),
                                                  &page->records));
  }
  *out = std::move(page);
  return Status::OK();
}

void Pager::Keep(PageRef page) {
  const size_t charge = ChargeOf(*page);
  std::lock_guard<std::mutex> lock(mu_);
  if (charge > budget_ || index_.find(page->offset) != index_.end()) return;
  Lru node;
  node.push_back(Entry{page, charge});
  index_.emplace(page->offset, node.begin());
  EvictTo(budget_ - charge);
  lru_.splice(lru_.begin(), node);
  held_ += charge;
}

Status Pager::ReadPage(uint64_t offset, PageRef* out, bool keep) {
  out->reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(offset);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      hits_++;
      *out = it->second->page;
      return Status::OK();
    }
    misses_++;
  }
  PageRef page;
  AGENTMEM_RETURN_IF_ERROR(Load(offset, &page));
  const size_t charge = ChargeOf(*page);
  std::lock_guard<std::mutex> lock(mu_);
  if (keep && charge <= budget_ && index_.find(offset) == index_.end()) {
    // What may throw (bad_alloc) comes first, so that a failure leaves the
    // cache as it was: the list node, then the map entry; the splice cannot.
    Lru node;
    node.push_back(Entry{page, charge});
    index_.emplace(offset, node.begin());
    EvictTo(budget_ - charge);
    lru_.splice(lru_.begin(), node);
    held_ += charge;
  }
  *out = std::move(page);
  return Status::OK();
}

}  // namespace agentmem::engine

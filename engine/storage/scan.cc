// engine/storage/scan.cc -- the recovery scan. Long and linear on purpose.
//
// Invariants it relies on (docs/architecture.md, "commit protocol"):
//  (1) Pages are only appended; a transaction's pages are contiguous and end
//      with its commit page.
//  (2) A commit page records txn_start, page_count and commit_seq; a
//      transaction counts only when every page from txn_start to the commit
//      validates and commit_seq is one more than the previous commit's.
//  (3) A commit page records durable_through: every byte before it had been
//      synced when the transaction was written. So a bad page before the
//      durable_through of a later valid commit -- or of the newest superblock,
//      which a clean close writes -- is damage, not a torn write.
#include "engine/storage/scan.h"

#include <algorithm>

#include "engine/storage/pager.h"
#include "format/coding.h"

namespace agentmem::engine {
namespace {

using format::CommitRecord;
using format::PageHeader;
using format::PageType;

constexpr size_t kWindowBytes = 1 << 20;

// A read window over the file, so that the scan reads in large chunks; or,
// given the file's first `size` bytes mapped, a view of them.
class Window {
 public:
  Window(File* file, uint64_t size, const char* mapped = nullptr)
      : file_(file), size_(size), mapped_(mapped) {}
  // Makes bytes [pos, pos+n) available, fewer at end of file.
  Status View(uint64_t pos, size_t n, std::string_view* out) {
    if (pos >= size_) {
      *out = {};
      return Status::OK();
    }
    n = static_cast<size_t>(std::min<uint64_t>(n, size_ - pos));
    if (mapped_ != nullptr) {
      *out = std::string_view(mapped_ + pos, n);
      return Status::OK();
    }
    if (pos < start_ || pos + n > start_ + buf_.size()) {
      start_ = pos;
      AGENTMEM_RETURN_IF_ERROR(file_->ReadAt(pos, std::max(n, kWindowBytes), &buf_));
      if (buf_.size() < n) n = buf_.size();
    }
    *out = std::string_view(buf_).substr(pos - start_, n);
    return Status::OK();
  }

 private:
  File* file_;
  uint64_t size_;
  const char* mapped_;
  uint64_t start_ = 0;
  std::string buf_;
};

// Reads the page at pos through the window and verifies it (Pager::Verify).
// A non-OK status means "bad page here".
// A checkpoint page can be hundreds of megabytes, and a scan has no use for
// its payload (only an open from the superblock that points at it does): its
// checksum is checked a window at a time and the payload is left empty.
Status CheckCheckpointPage(Window* w, uint64_t pos, const PageHeader& h, DecodedPage* out) {
  const int64_t page_no = static_cast<int64_t>(h.page_no);
  const uint64_t size = format::PaddedPageSize(h.length);
  std::string_view chunk;
  format::PageChecksum sum;
  for (uint64_t at = 0; at < size;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kWindowBytes, size - at));
    AGENTMEM_RETURN_IF_ERROR(w->View(pos + at, want, &chunk));
    if (chunk.size() < want) {
      return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld (checkpoint): cut short",
                                 static_cast<long long>(page_no));
    }
    sum.Update(chunk);
    at += want;
  }
  if (!sum.Matches() || (h.flags & format::kPageFlagZstd)) {
    return AGENTMEM_CORRUPTION(kCorruptChecksum, page_no,
                               "page %lld (checkpoint): checksum mismatch (stored %08x, computed %08x)",
                               static_cast<long long>(page_no), sum.stored(), sum.computed());
  }
  out->header = h;
  out->payload.clear();
  return Status::OK();
}

Status ReadPage(Window* w, uint64_t pos, uint64_t salt, DecodedPage* out) {
  std::string_view head;
  AGENTMEM_RETURN_IF_ERROR(w->View(pos, format::kPageHeaderSize, &head));
  PageHeader h;
  AGENTMEM_RETURN_IF_ERROR(format::PeekPageHeader(head, pos, salt, &h));
  out->offset = pos;
  if (h.type == static_cast<uint8_t>(PageType::kCheckpoint)) return CheckCheckpointPage(w, pos, h, out);
  std::string_view whole;
  AGENTMEM_RETURN_IF_ERROR(w->View(pos, format::PaddedPageSize(h.length), &whole));
  return Pager::Verify(whole, pos, salt, &out->header, &out->payload);
}

// Checks 3-6 of docs/format.md §6.1 for the commit page `page` at `pos` that
// ends `txn`, the transaction after commit `prev_seq`; on success *c is its
// record.
Status CheckCommit(const DecodedPage& page, const ScannedTxn& txn, uint64_t prev_seq,
                   uint64_t pos, CommitRecord* c) {
  const int64_t page_no = static_cast<int64_t>(page.header.page_no);
  AGENTMEM_RETURN_IF_ERROR(format::DecodeCommit(page.payload, page_no, c));
  if (page.header.record_count != 1) {
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld (commit): record count %u, not 1",
                               static_cast<long long>(page_no), page.header.record_count);
  }
  const uint64_t expect_start = txn.pages.empty() ? pos : txn.pages.front().offset;
  if (c->commit_seq != prev_seq + 1 || c->txn_start != expect_start ||
      c->page_count != txn.pages.size() || c->durable_through > c->txn_start) {
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no,
                               "page %lld (commit): does not match its transaction (seq %llu after "
                               "%llu, start %llu, %u pages)",
                               static_cast<long long>(page_no),
                               static_cast<unsigned long long>(c->commit_seq),
                               static_cast<unsigned long long>(prev_seq),
                               static_cast<unsigned long long>(c->txn_start), c->page_count);
  }
  return Status::OK();
}

bool IsIoError(const Status& s) { return s.primary() == kIoErr; }

// Whether every byte of [from, to) is there and zero.
Status AllZeros(Window* w, uint64_t from, uint64_t to, bool* zeros) {
  *zeros = false;
  std::string_view chunk;
  for (uint64_t at = from; at < to; at += chunk.size()) {
    AGENTMEM_RETURN_IF_ERROR(
        w->View(at, static_cast<size_t>(std::min<uint64_t>(kWindowBytes, to - at)), &chunk));
    if (chunk.empty() || chunk.find_first_not_of('\0') != std::string_view::npos) {
      return Status::OK();
    }
  }
  *zeros = true;
  return Status::OK();
}

// Looks for a valid commit page after `bad` whose durable_through is past it.
Status ProbeForLaterCommit(Window* w, uint64_t bad, uint64_t file_size, uint64_t salt,
                           bool* found) {
  *found = false;
  for (uint64_t pos = bad + format::kPageAlign; pos + format::kPageHeaderSize <= file_size;
       pos += format::kPageAlign) {
    std::string_view head;
    AGENTMEM_RETURN_IF_ERROR(w->View(pos, format::kPageHeaderSize, &head));
    if (head.size() < format::kPageHeaderSize) break;
    // Cheap filters first: type, salt and page number.
    if (static_cast<uint8_t>(head[4]) != static_cast<uint8_t>(PageType::kCommit) ||
        format::DecodeFixed32(head.data() + 8) != static_cast<uint32_t>(salt) ||
        format::DecodeFixed64(head.data() + 16) != format::PageNoOf(pos)) {
      continue;
    }
    DecodedPage page;
    Status s = ReadPage(w, pos, salt, &page);
    if (IsIoError(s)) return s;
    CommitRecord c;
    if (!s.ok() || !format::DecodeCommit(page.payload, static_cast<int64_t>(format::PageNoOf(pos)), &c).ok()) {
      continue;
    }
    if (c.durable_through > bad && c.durable_through <= pos) {
      *found = true;
      return Status::OK();
    }
  }
  return Status::OK();
}

}  // namespace

Status ScanLog(File* file, const format::FileHeader& header, uint64_t from, uint64_t seq,
               uint64_t vouched_through, const std::function<Status(ScannedTxn&)>& apply,
               ScanResult* result) {
  // The result says "nothing applied" until the scan applies something, even
  // when an I/O error ends it early.
  *result = ScanResult{};
  result->end = from;
  result->commit_seq = seq;
  uint64_t file_size = 0;
  AGENTMEM_RETURN_IF_ERROR(file->Size(&file_size));
  Window w(file, file_size);
  result->file_size = file_size;

  ScannedTxn txn;
  uint64_t pos = from;
  Status bad_status;  // why the page at `pos` is bad, if the scan stopped at one
  while (pos < file_size) {
    DecodedPage page;
    Status s = ReadPage(&w, pos, header.salt, &page);
    if (IsIoError(s)) return s;
    if (!s.ok()) {
      bad_status = std::move(s);
      break;
    }
    uint64_t next = pos + format::PaddedPageSize(page.header.length);
    if (page.header.type != static_cast<uint8_t>(PageType::kCommit)) {
      txn.pages.push_back(std::move(page));
      pos = next;
      continue;
    }
    CommitRecord c;
    s = CheckCommit(page, txn, result->commit_seq, pos, &c);
    if (!s.ok()) {
      bad_status = std::move(s);
      break;
    }
    txn.commit = c;
    txn.commit_offset = pos;
    txn.end = next;
    AGENTMEM_RETURN_IF_ERROR(apply(txn));
    result->pages += txn.pages.size() + 1;
    result->commits++;
    result->end = next;
    result->commit_seq = c.commit_seq;
    txn = ScannedTxn{};
    pos = next;
  }

  bool reserve = false;  // zeros from the last commit to the end of the file
  if (!bad_status.ok()) {
    bool damage = pos < vouched_through;
    if (!damage && pos == result->end) {
      AGENTMEM_RETURN_IF_ERROR(AllZeros(&w, pos, file_size, &reserve));
    }
    if (!damage && !reserve) {
      AGENTMEM_RETURN_IF_ERROR(ProbeForLaterCommit(&w, pos, file_size, header.salt, &damage));
    }
    if (damage) {
      result->damage = true;
      return bad_status;
    }
  }
  if (result->end < vouched_through) {
    // The file ends, cleanly, before bytes a superblock vouches for: it was
    // cut short after a clean close.
    result->damage = true;
    int64_t page_no = static_cast<int64_t>(format::PageNoOf(result->end));
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no,
                               "file ends at offset %llu (page %lld) but its superblock vouches "
                               "for %llu bytes: the file was cut short",
                               static_cast<unsigned long long>(result->end),
                               static_cast<long long>(page_no),
                               static_cast<unsigned long long>(vouched_through));
  }
  (reserve ? result->reserve_bytes : result->torn_bytes) = file_size - result->end;
  return Status::OK();
}

struct TxnReader::Impl {
  Impl(File* f, uint64_t s, uint64_t from, uint64_t seq, uint64_t until)
      : window(f, until), salt(s), pos(from), seq(seq), until(until) {}
  Window window;  // sees no byte at or past `until`
  uint64_t salt;
  uint64_t pos;  // just past the last transaction read
  uint64_t seq;  // its commit_seq
  uint64_t until;
};

TxnReader::TxnReader(File* file, uint64_t salt, uint64_t from, uint64_t seq, uint64_t until)
    : impl_(std::make_unique<Impl>(file, salt, from, seq, until)) {}
TxnReader::~TxnReader() = default;
uint64_t TxnReader::pos() const { return impl_->pos; }
uint64_t TxnReader::seq() const { return impl_->seq; }

Status TxnReader::Next(ScannedTxn* txn, bool* done) {
  *txn = ScannedTxn{};
  *done = impl_->pos >= impl_->until;
  uint64_t pos = impl_->pos;
  while (!*done) {
    if (pos >= impl_->until) {
      // Record pages run up to `until` without their commit page: `until`
      // was not the end of a commit.
      return AGENTMEM_CORRUPTION(kCorruptPage, static_cast<int64_t>(format::PageNoOf(pos)),
                                 "page %lld: the log ends inside a transaction",
                                 static_cast<long long>(format::PageNoOf(pos)));
    }
    DecodedPage page;
    AGENTMEM_RETURN_IF_ERROR(ReadPage(&impl_->window, pos, impl_->salt, &page));
    const uint64_t next = pos + format::PaddedPageSize(page.header.length);
    if (page.header.type != static_cast<uint8_t>(PageType::kCommit)) {
      txn->pages.push_back(std::move(page));
      pos = next;
      continue;
    }
    AGENTMEM_RETURN_IF_ERROR(CheckCommit(page, *txn, impl_->seq, pos, &txn->commit));
    txn->commit_offset = pos;
    txn->end = next;
    impl_->pos = next;
    impl_->seq = txn->commit.commit_seq;
    return Status::OK();
  }
  return Status::OK();
}

struct PageReader::Impl {
  Impl(File* f, uint64_t size, uint64_t s, const char* mapped)
      : file(f), window(f, size, mapped), salt(s) {}
  File* file;
  Window window;
  uint64_t salt;
};

PageReader::PageReader(File* file, uint64_t file_size, uint64_t salt, const char* mapped)
    : impl_(std::make_unique<Impl>(file, file_size, salt, mapped)) {}
PageReader::~PageReader() = default;

Status PageReader::Read(uint64_t pos, DecodedPage* out, bool checkpoint_payload) {
  AGENTMEM_RETURN_IF_ERROR(ReadPage(&impl_->window, pos, impl_->salt, out));
  if (!checkpoint_payload || out->header.type != static_cast<uint8_t>(PageType::kCheckpoint)) {
    return Status::OK();
  }
  std::string whole;
  AGENTMEM_RETURN_IF_ERROR(
      impl_->file->ReadAt(pos, format::PaddedPageSize(out->header.length), &whole));
  return Pager::Verify(whole, pos, impl_->salt, &out->header, &out->payload);
}

Status PageReader::ReadView(uint64_t pos, PageHeader* header, std::string* storage,
                            std::string_view* payload) {
  std::string_view head;
  AGENTMEM_RETURN_IF_ERROR(impl_->window.View(pos, format::kPageHeaderSize, &head));
  PageHeader h;
  AGENTMEM_RETURN_IF_ERROR(format::PeekPageHeader(head, pos, impl_->salt, &h));
  if (h.type == static_cast<uint8_t>(PageType::kCheckpoint)) {
    const int64_t page_no = static_cast<int64_t>(h.page_no);
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld (checkpoint): not a record page",
                               static_cast<long long>(page_no));
  }
  std::string_view whole;
  AGENTMEM_RETURN_IF_ERROR(impl_->window.View(pos, format::PaddedPageSize(h.length), &whole));
  return Pager::Verify(whole, pos, impl_->salt, header, storage, payload);
}

Status PageReader::Plausible(uint64_t pos, bool* plausible) {
  std::string_view head;
  AGENTMEM_RETURN_IF_ERROR(impl_->window.View(pos, format::kPageHeaderSize, &head));
  *plausible = head.size() == format::kPageHeaderSize &&
               format::IsKnownPageType(static_cast<uint8_t>(head[4])) &&
               format::DecodeFixed32(head.data() + 8) == static_cast<uint32_t>(impl_->salt) &&
               format::DecodeFixed64(head.data() + 16) == format::PageNoOf(pos);
  return Status::OK();
}

Status DerivedBytesBefore(File* file, uint64_t salt, uint64_t end, uint64_t* bytes) {
  *bytes = 0;
  std::string head;
  for (uint64_t pos = format::kFirstPageOffset; pos + format::kPageHeaderSize <= end;) {
    AGENTMEM_RETURN_IF_ERROR(file->ReadAt(pos, format::kPageHeaderSize, &head));
    format::PageHeader h;
    if (head.size() < format::kPageHeaderSize ||
        !format::PeekPageHeader(head, pos, salt, &h).ok()) {
      break;
    }
    const uint64_t padded = format::PaddedPageSize(h.length);
    const auto type = static_cast<format::PageType>(h.type);
    if (type == format::PageType::kGraph || type == format::PageType::kCheckpoint) {
      *bytes += std::min(padded, end - pos);
    }
    pos += padded;
  }
  return Status::OK();
}

}  // namespace agentmem::engine

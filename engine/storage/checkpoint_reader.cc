// engine/storage/checkpoint_reader.cc -- the checkpoint's pages, read and
// verified in one pass (checkpoint_reader.h).
#include "engine/storage/checkpoint_reader.h"

#include <algorithm>
#include <future>

#include "format/coding.h"
#include "format/page.h"
#include "index/vector/hnsw_mapped.h"

namespace agentmem::engine {

using format::PageType;

namespace {

Status Damaged(uint64_t offset, const char* what) {
  int64_t page_no = static_cast<int64_t>(format::PageNoOf(offset));
  return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld (checkpoint): %s",
                             static_cast<long long>(page_no), what);
}

Status BadChecksum(int64_t page_no) {
  return AGENTMEM_CORRUPTION(kCorruptChecksum, page_no, "page %lld (checkpoint): checksum mismatch",
                             static_cast<long long>(page_no));
}

constexpr size_t kHeadSize = format::kPageHeaderSize + format::kSectionHeaderSize;

// The graph image's level-0 records, checked from the pieces ReadPrivate
// hands out as they arrive (the image starts kHeadSize bytes into the page).
class GraphCheck {
 public:
  explicit GraphCheck(uint64_t image_size) : image_size_(image_size) {}
  void Feed(uint64_t at, std::string_view piece) {
    // An empty image: the file has no graph (the caller checks that).
    if (image_size_ == 0 || !status_.ok() || at + piece.size() <= kHeadSize) return;
    if (!checking_) {
      if (at > kHeadSize || at + piece.size() < kHeadSize + std::min<uint64_t>(64, image_size_)) {
        return;  // no image head in the first piece: Map() checks it all
      }
      status_ = check_.Start(piece.substr(kHeadSize - at), image_size_);
      checking_ = status_.ok();
    }
    if (!checking_) return;
    const uint64_t from = std::max<uint64_t>(at, kHeadSize);
    const uint64_t to = std::min<uint64_t>(at + piece.size(), kHeadSize + image_size_);
    if (from < to) status_ = check_.Feed(from - kHeadSize, piece.substr(from - at, to - from));
  }
  // OK, and whether every record was checked.
  Status Finish(bool* checked) {
    if (checking_ && status_.ok()) status_ = check_.Finish();
    *checked = checking_;
    return status_;
  }

 private:
  uint64_t image_size_;
  index::MappedRecordCheck check_;
  Status status_;
  bool checking_ = false;
};

class Reader {
 public:
  Reader(File* file, Pager* pager, uint64_t salt, const format::Superblock& sb,
         format::CheckpointState* state,
         const std::function<Status(const format::CheckpointState&)>& import, CheckpointSections* out)
      : file_(file), pager_(pager), salt_(salt), sb_(sb), state_(state), import_(import), out_(out) {}
  // Whatever happens, the import is waited for before `state` goes away.
  ~Reader() {
    if (imported_.valid()) imported_.wait();
  }

  Status Run() {
    uint64_t size = 0;
    AGENTMEM_RETURN_IF_ERROR(file_->Size(&size));
    if (sb_.scan_from > size) return Damaged(sb_.checkpoint, "the file ends inside the checkpoint");
    bool committed = false;
    for (uint64_t pos = sb_.checkpoint; pos < sb_.scan_from && !committed;) {
      uint64_t padded = 0;
      AGENTMEM_RETURN_IF_ERROR(ReadPage(pos, &padded, &committed));
      pos += padded;
    }
    // (A page never runs past scan_from, and a commit ends there.)
    if (!committed) return Damaged(sb_.checkpoint, "no commit ends the checkpoint");
    // All three sections (§5.8): without the bm25 one the text index would be
    // silently empty, without the graph the vectors of the state's episodes
    // would have no nodes. (The commit checked that the state was there.)
    if (!out_->bm25 || !out_->graph) return Damaged(sb_.checkpoint, "a section is missing");
    return imported_.get();
  }

 private:
  Status ReadPage(uint64_t pos, uint64_t* padded, bool* committed) {
    std::string head;
    AGENTMEM_RETURN_IF_ERROR(file_->ReadAt(pos, std::min<uint64_t>(kHeadSize, sb_.scan_from - pos), &head));
    if (head.size() < format::kPageHeaderSize) return Damaged(pos, "a page runs past the checkpoint's end");
    format::PageHeader h;
    AGENTMEM_RETURN_IF_ERROR(format::PeekPageHeader(head, pos, salt_, &h));
    *padded = format::PaddedPageSize(h.length);
    if (pos + *padded > sb_.scan_from) return Damaged(pos, "a page runs past the checkpoint's end");
    if (h.type == static_cast<uint8_t>(PageType::kCommit)) {
      *committed = true;
      return ReadCommit(pos, h, *padded);
    }
    if (h.type != static_cast<uint8_t>(PageType::kCheckpoint) || (h.flags & format::kPageFlagZstd)) {
      return Damaged(pos, "not a checkpoint page");
    }
    const uint32_t kind = head.size() >= kHeadSize && h.length >= format::kSectionHeaderSize
                              ? format::DecodeFixed32(head.data() + format::kPageHeaderSize)
                              : 0;
    pages_++;
    switch (static_cast<format::CheckpointSection>(kind)) {
      case format::CheckpointSection::kState: return ReadState(pos, h);
      case format::CheckpointSection::kBm25: return ReadBm25(pos, h, *padded);
      case format::CheckpointSection::kGraph: return ReadGraph(pos, h, *padded);
      default: {
        // No known section kind: checked as a whole page first (a damaged
        // kind is a bad checksum), then SplitSection refuses it ("unknown
        // section", "no section header"). ReadWhole cannot succeed here.
        std::string_view body;
        PageRef page;
        return ReadWhole(pos, h, &page, &body);
      }
    }
  }

  // A checkpoint page read whole into *page and verified by the pager (not
  // kept in its cache), then split (SplitSection's errors); *body points
  // into (*page)->payload.
  Status ReadWhole(uint64_t at, const format::PageHeader& h, PageRef* page, std::string_view* body) {
    const int64_t page_no = static_cast<int64_t>(h.page_no);
    if (Status s = pager_->ReadPage(at, page, false); !s.ok()) {
      return s.code() == kCorruptChecksum ? BadChecksum(page_no) : s;
    }
    format::CheckpointSection kind;
    return format::SplitSection((*page)->payload, page_no, &kind, body);
  }

  Status ReadCommit(uint64_t pos, const format::PageHeader& h, uint64_t padded) {
    PageRef commit;
    AGENTMEM_RETURN_IF_ERROR(pager_->ReadPage(pos, &commit, false));
    format::CommitRecord c;
    AGENTMEM_RETURN_IF_ERROR(format::DecodeCommit(commit->payload, static_cast<int64_t>(h.page_no), &c));
    if (c.commit_seq != sb_.commit_seq || c.txn_start != sb_.checkpoint || c.page_count != pages_ ||
        pos + padded != sb_.scan_from || !have_state_ ||
        c.next_episode_id != state_->next_episode_id || c.next_fact_id != state_->next_fact_id ||
        c.next_block_version != state_->next_block_version) {
      return Damaged(pos, "its commit does not match the superblock or its sections");
    }
    return Status::OK();
  }

  // Read whole, decoded, then imported on another thread.
  Status ReadState(uint64_t pos, const format::PageHeader& h) {
    std::string_view body;
    PageRef page;  // (the decoded state holds copies)
    AGENTMEM_RETURN_IF_ERROR(ReadWhole(pos, h, &page, &body));
    if (have_state_) return Damaged(pos, "a section repeats");
    AGENTMEM_RETURN_IF_ERROR(format::DecodeCheckpointState(body, static_cast<int64_t>(h.page_no), state_));
    have_state_ = true;
    imported_ = std::async(std::launch::async, [this] { return import_(*state_); });
    return Status::OK();
  }

  Status ReadBm25(uint64_t pos, const format::PageHeader& h, uint64_t padded) {
    if (out_->bm25) return Damaged(pos, "a section repeats");
    const int64_t page_no = static_cast<int64_t>(h.page_no);
    format::PageChecksum sum;
    std::shared_ptr<MappedBytes> bytes;
    AGENTMEM_RETURN_IF_ERROR(file_->ReadPrivate(
        pos, padded, 0,
        [&](uint64_t, std::string_view piece) {
          sum.Update(piece);
          return Status::OK();
        },
        &bytes));
    if (!sum.Matches()) return BadChecksum(page_no);
    format::CheckpointSection kind;
    AGENTMEM_RETURN_IF_ERROR(format::SplitSection(
        std::string_view(bytes->data() + format::kPageHeaderSize, h.length), page_no, &kind,
        &out_->bm25_body));
    out_->bm25_page = page_no;
    out_->bm25 = std::move(bytes);
    return Status::OK();
  }

  // The graph's level-0 records are checked from the same pieces that are
  // checksummed, and not read again when the image is mapped.
  Status ReadGraph(uint64_t pos, const format::PageHeader& h, uint64_t padded) {
    if (out_->graph) return Damaged(pos, "a section repeats");
    const int64_t page_no = static_cast<int64_t>(h.page_no);
    GraphCheck check(h.length - format::kSectionHeaderSize);
    format::PageChecksum sum;
    std::shared_ptr<MappedBytes> bytes;  // spare room lets the graph take new nodes in place
    AGENTMEM_RETURN_IF_ERROR(file_->ReadPrivate(
        pos, padded, padded / 4 + (size_t{1} << 20),
        [&](uint64_t at, std::string_view piece) {
          check.Feed(at, piece);
          sum.Update(piece);
          return Status::OK();
        },
        &bytes));
    if (!sum.Matches()) return BadChecksum(page_no);
    if (Status s = check.Finish(&out_->graph_checked); !s.ok()) {
      return AGENTMEM_CORRUPTION(kCorruptIndex, page_no, "page %lld (checkpoint graph): %s",
                                 static_cast<long long>(page_no), s.message().c_str());
    }
    std::string_view payload(bytes->data() + format::kPageHeaderSize, h.length);
    format::CheckpointSection kind;
    std::string_view body;
    AGENTMEM_RETURN_IF_ERROR(format::SplitSection(payload, page_no, &kind, &body));
    out_->graph_at = kHeadSize;
    out_->graph_size = body.size();
    out_->graph_page = page_no;
    out_->graph = std::move(bytes);
    return Status::OK();
  }

  File* file_;
  Pager* pager_;
  uint64_t salt_;
  const format::Superblock& sb_;
  format::CheckpointState* state_;
  const std::function<Status(const format::CheckpointState&)>& import_;
  CheckpointSections* out_;
  std::future<Status> imported_;  // import_(*state_), on another thread
  bool have_state_ = false;
  uint32_t pages_ = 0;  // checkpoint pages before the commit
};

}  // namespace

Status ReadCheckpoint(File* file, Pager* pager, uint64_t salt, const format::Superblock& sb,
                      format::CheckpointState* state,
                      const std::function<Status(const format::CheckpointState&)>& import,
                      CheckpointSections* out) {
  Reader r(file, pager, salt, sb, state, import, out);
  return r.Run();
}

}  // namespace agentmem::engine

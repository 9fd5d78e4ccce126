// engine/storage/checkpoint_reader.cc -- the checkpoint's pages, read and
// verified in one pass (checkpoint_reader.h).
#include "engine/storage/checkpoint_reader.h"

#include <algorithm>
#include <future>
#include <system_error>
#include <vector>

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
// hands out as they arrive, or that the mapping is walked in (the image
// starts kHeadSize bytes into the page).
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

// A checkpoint page as its head says: where it is, its header and section kind.
struct PageAt {
  uint64_t pos;
  format::PageHeader h;
  uint64_t padded;
  uint32_t kind;
};

// Walks the page heads first, then reads the pages on two threads: this one
// takes the state section (decoded, then imported) and any unknown page, the
// other the bm25 and graph sections (File::ReadPrivate, no pager; the graph
// where it lies in the file's mapping when there is one). Errors are
// reported in file order, as a reading from first page to last would meet
// them; import's error comes after every page's.
class Reader {
 public:
  Reader(File* file, Pager* pager, uint64_t salt, const format::Superblock& sb,
         std::shared_ptr<const MappedBytes> map, format::CheckpointState* state,
         const std::function<Status(const format::CheckpointState&)>& import,
         const std::function<void()>& help, CheckpointSections* out)
      : file_(file), pager_(pager), salt_(salt), sb_(sb), map_(std::move(map)), state_(state),
        import_(import), help_(help), out_(out) {}
  // Whatever happens (an exception too), the other thread is told and waited
  // for before `state` goes away.
  ~Reader() {
    if (!state_told_) state_decoded_.set_value(false);
    if (other_.valid()) other_.wait();
  }

  Status Run() {
    uint64_t size = 0;
    AGENTMEM_RETURN_IF_ERROR(file_->Size(&size));
    if (sb_.scan_from > size) return Damaged(sb_.checkpoint, "the file ends inside the checkpoint");
    Status walked = Walk();
    status_.resize(pages_.size());
    std::shared_future<bool> sections = sections_read_.get_future().share();
    std::shared_future<bool> decoded = state_decoded_.get_future().share();
    try {
      other_ = std::async(std::launch::async, [this, decoded] { ReadSectionsTelling(decoded); });
    } catch (const std::system_error&) {  // no thread: this one reads them after the state
    }
    const bool state_ok = ReadStatePages();
    state_told_ = true;
    state_decoded_.set_value(state_ok && walked.ok());
    Status imported = state_ok ? import_(*state_) : Status::OK();
    if (!other_.valid()) ReadSectionsTelling(decoded);
    if (sections.get() && state_ok && walked.ok() && imported.ok() && help_) help_();
    other_.get();
    for (const Status& s : status_) AGENTMEM_RETURN_IF_ERROR(s);
    AGENTMEM_RETURN_IF_ERROR(walked);
    AGENTMEM_RETURN_IF_ERROR(ReadCommit());
    // All three sections (§5.8): without the bm25 one the text index would be
    // silently empty, without the graph the vectors of the state's episodes
    // would have no nodes. (The commit checked that the state was there.)
    if (!out_->bm25 || !out_->graph) return Damaged(sb_.checkpoint, "a section is missing");
    return imported;
  }

 private:
  // The heads of the pages up to the commit that ends them; an error stops
  // the walk and is reported after the pages before it.
  Status Walk() {
    for (uint64_t pos = sb_.checkpoint; pos < sb_.scan_from;) {
      std::string head;
      AGENTMEM_RETURN_IF_ERROR(
          file_->ReadAt(pos, std::min<uint64_t>(kHeadSize, sb_.scan_from - pos), &head));
      if (head.size() < format::kPageHeaderSize) return Damaged(pos, "a page runs past the checkpoint's end");
      PageAt p{pos, {}, 0, 0};
      AGENTMEM_RETURN_IF_ERROR(format::PeekPageHeader(head, pos, salt_, &p.h));
      p.padded = format::PaddedPageSize(p.h.length);
      if (pos + p.padded > sb_.scan_from) return Damaged(pos, "a page runs past the checkpoint's end");
      if (p.h.type == static_cast<uint8_t>(PageType::kCommit)) {
        commit_ = p;
        return Status::OK();
      }
      if (p.h.type != static_cast<uint8_t>(PageType::kCheckpoint) || (p.h.flags & format::kPageFlagZstd)) {
        return Damaged(pos, "not a checkpoint page");
      }
      p.kind = head.size() >= kHeadSize && p.h.length >= format::kSectionHeaderSize
                   ? format::DecodeFixed32(head.data() + format::kPageHeaderSize)
                   : 0;
      pages_.push_back(p);
      pos += p.padded;
    }
    // (A page never runs past scan_from, and a commit ends there.)
    return Damaged(sb_.checkpoint, "no commit ends the checkpoint");
  }
  bool IsSection(const PageAt& p) const {
    return p.kind == static_cast<uint32_t>(format::CheckpointSection::kBm25) ||
           p.kind == static_cast<uint32_t>(format::CheckpointSection::kGraph);
  }
  // The state section and any page of no known kind, in file order: true when
  // the state was decoded and none of them failed.
  bool ReadStatePages() {
    bool ok = true;
    for (size_t i = 0; i < pages_.size(); i++) {
      const PageAt& p = pages_[i];
      if (IsSection(p)) continue;
      status_[i] = p.kind == static_cast<uint32_t>(format::CheckpointSection::kState)
                       ? ReadState(p.pos, p.h)
                       : ReadUnknown(p.pos, p.h);
      ok = ok && status_[i].ok();
    }
    return ok && have_state_;
  }
  // The bm25 and graph sections, then (when every page went well) the
  // caller's help.
  void ReadSections(const std::shared_future<bool>& decoded) {
    bool ok = true;
    for (size_t i = 0; i < pages_.size(); i++) {
      const PageAt& p = pages_[i];
      if (!IsSection(p)) continue;
      status_[i] = p.kind == static_cast<uint32_t>(format::CheckpointSection::kBm25)
                       ? ReadBm25(p.pos, p.h, p.padded)
                       : ReadGraph(p.pos, p.h, p.padded);
      ok = ok && status_[i].ok();
    }
    sections_told_ = true;
    sections_read_.set_value(ok);
    if (ok && decoded.get() && help_) help_();
  }
  // ReadSections, which tells this thread the sections were not read when it
  // throws.
  void ReadSectionsTelling(const std::shared_future<bool>& decoded) {
    try {
      ReadSections(decoded);
    } catch (...) {
      if (!sections_told_) sections_read_.set_value(false);
      throw;
    }
  }
  // No known section kind: checked as a whole page first (a damaged kind is a
  // bad checksum), then SplitSection refuses it ("unknown section", "no
  // section header"). ReadWhole cannot succeed here.
  Status ReadUnknown(uint64_t pos, const format::PageHeader& h) {
    std::string_view body;
    PageRef page;
    return ReadWhole(pos, h, &page, &body);
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
  Status ReadCommit() {
    const PageAt& p = commit_;
    PageRef commit;
    AGENTMEM_RETURN_IF_ERROR(pager_->ReadPage(p.pos, &commit, false));
    format::CommitRecord c;
    AGENTMEM_RETURN_IF_ERROR(format::DecodeCommit(commit->payload, static_cast<int64_t>(p.h.page_no), &c));
    if (c.commit_seq != sb_.commit_seq || c.txn_start != sb_.checkpoint || c.page_count != pages_.size() ||
        p.pos + p.padded != sb_.scan_from || !have_state_ ||
        c.next_episode_id != state_->next_episode_id || c.next_fact_id != state_->next_fact_id ||
        c.next_block_version != state_->next_block_version) {
      return Damaged(p.pos, "its commit does not match the superblock or its sections");
    }
    return Status::OK();
  }
  Status ReadState(uint64_t pos, const format::PageHeader& h) {
    std::string_view body;
    PageRef page;  // (the decoded state holds copies)
    AGENTMEM_RETURN_IF_ERROR(ReadWhole(pos, h, &page, &body));
    if (have_state_) return Damaged(pos, "a section repeats");
    AGENTMEM_RETURN_IF_ERROR(format::DecodeCheckpointState(body, static_cast<int64_t>(h.page_no), state_));
    have_state_ = true;
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
  // checksummed, and not read again when the image is mapped. With the
  // file's mapping, the pieces are where the page lies in it: no copy, no
  // new memory.
  Status ReadGraph(uint64_t pos, const format::PageHeader& h, uint64_t padded) {
    if (out_->graph) return Damaged(pos, "a section repeats");
    const int64_t page_no = static_cast<int64_t>(h.page_no);
    GraphCheck check(h.length - format::kSectionHeaderSize);
    format::PageChecksum sum;
    const File::PieceFn feed = [&](uint64_t at, std::string_view piece) {
      check.Feed(at, piece);
      sum.Update(piece);
      return Status::OK();
    };
    std::shared_ptr<const MappedBytes> bytes;
    size_t page_at = 0;  // where the page starts in *bytes
    const bool in_file = map_ != nullptr && pos + padded <= map_->size();
    if (in_file) {
      for (uint64_t at = 0; at < padded; at += kReadPiece) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kReadPiece, padded - at));
        AGENTMEM_RETURN_IF_ERROR(feed(at, std::string_view(map_->data() + pos + at, n)));
      }
      bytes = map_;
      page_at = static_cast<size_t>(pos);
    } else {
      std::shared_ptr<MappedBytes> read;  // spare room lets the graph take new nodes in place
      AGENTMEM_RETURN_IF_ERROR(file_->ReadPrivate(pos, padded, padded / 4 + (size_t{1} << 20), feed, &read));
      bytes = std::move(read);
    }
    if (!sum.Matches()) return BadChecksum(page_no);
    if (Status s = check.Finish(&out_->graph_checked); !s.ok()) {
      return AGENTMEM_CORRUPTION_FROM(std::move(s), kCorruptIndex, page_no, "checkpoint graph");
    }
    std::string_view payload(bytes->data() + page_at + format::kPageHeaderSize, h.length);
    format::CheckpointSection kind;
    std::string_view body;
    AGENTMEM_RETURN_IF_ERROR(format::SplitSection(payload, page_no, &kind, &body));
    out_->graph_at = page_at + kHeadSize;
    out_->graph_in_file = in_file;
    out_->graph_size = body.size();
    out_->graph_page = page_no;
    out_->graph = std::move(bytes);
    return Status::OK();
  }

  File* file_;
  Pager* pager_;
  uint64_t salt_;
  const format::Superblock& sb_;
  const std::shared_ptr<const MappedBytes> map_;  // the file's, or null
  format::CheckpointState* state_;
  const std::function<Status(const format::CheckpointState&)>& import_;
  const std::function<void()>& help_;
  CheckpointSections* out_;
  std::vector<PageAt> pages_;  // the checkpoint pages before the commit
  PageAt commit_{};
  std::vector<Status> status_;  // of each of pages_
  bool have_state_ = false;
  // Each true when every page of its thread went well; state_decoded_ also
  // needs the walk to have reached the commit.
  std::promise<bool> sections_read_, state_decoded_;
  bool sections_told_ = false, state_told_ = false;   // whether each was set
  std::future<void> other_;  // ReadSections, on another thread
};

}  // namespace

Status ReadCheckpoint(File* file, Pager* pager, uint64_t salt, const format::Superblock& sb,
                      std::shared_ptr<const MappedBytes> map, format::CheckpointState* state,
                      const std::function<Status(const format::CheckpointState&)>& import,
                      const std::function<void()>& help, CheckpointSections* out) {
  Reader r(file, pager, salt, sb, std::move(map), state, import, help, out);
  return r.Run();
}

}  // namespace agentmem::engine

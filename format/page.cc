// format/page.cc -- page header layout (docs/format.md §4):
//
//   offset size field
//   0      4    checksum      masked CRC-32C of bytes [4, padded end)
//   4      1    type          PageType
//   5      1    flags         bit 0: payload is a zstd frame
//   6      2    reserved      0
//   8      4    salt          low 32 bits of the file salt
//   12     4    length        payload bytes stored
//   16     8    page_no       offset of the page / 16
//   24     4    raw_length    payload bytes after decompression
//   28     4    record_count  records in the payload
#include "format/page.h"

#include <cstring>

#include "format/coding.h"
#include "format/compress.h"
#include "format/crc32c.h"

namespace agentmem::format {

const char* PageTypeName(uint8_t type) {
  switch (static_cast<PageType>(type)) {
    case PageType::kEpisodes: return "episodes";
    case PageType::kBlocks: return "blocks";
    case PageType::kFacts: return "facts";
    case PageType::kCommit: return "commit";
    case PageType::kMeta: return "meta";
    case PageType::kGraph: return "graph";
    case PageType::kText: return "text";
    case PageType::kCheckpoint: return "checkpoint";
    case PageType::kForget: return "forget";
  }
  return "unknown";
}

bool IsKnownPageType(uint8_t type) { return type >= 1 && type <= 9; }

void PageChecksum::Update(std::string_view piece) {
  while (fed_ < 4 && !piece.empty()) {
    head_[fed_++] = piece.front();
    piece.remove_prefix(1);
    if (fed_ == 4) stored_ = UnmaskCrc(DecodeFixed32(head_));
  }
  crc_ = Crc32cExtend(crc_, piece.data(), piece.size());
  fed_ += piece.size();
}

uint32_t PageChecksum::Masked() const { return MaskCrc(crc_); }

PageChecksum ChecksumOf(std::string_view page) {
  PageChecksum sum;
  sum.Update(page);
  return sum;
}

// The header of a page whose stored payload is `stored` bytes (`raw` before
// compression), checksum left 0, written over the first kPageHeaderSize
// bytes of `dst`.
static void PutPageHeader(PageType type, bool zstd, uint64_t offset, uint64_t salt,
                          uint32_t stored, uint32_t raw, uint32_t record_count, char* dst) {
  std::string h;
  h.reserve(kPageHeaderSize);
  PutFixed32(&h, 0);  // checksum, filled by the caller
  h.push_back(static_cast<char>(type));
  h.push_back(static_cast<char>(zstd ? kPageFlagZstd : 0));
  PutFixed16(&h, 0);
  PutFixed32(&h, static_cast<uint32_t>(salt));
  PutFixed32(&h, stored);
  PutFixed64(&h, PageNoOf(offset));
  PutFixed32(&h, raw);
  PutFixed32(&h, record_count);
  std::memcpy(dst, h.data(), kPageHeaderSize);
}

// Writes the header of the page in *page (kPageHeaderSize bytes of room,
// then the stored payload), pads it and sets its checksum.
static void Seal(PageType type, bool zstd, uint64_t offset, uint64_t salt, uint32_t raw,
                 uint32_t record_count, std::string* page) {
  const auto stored = static_cast<uint32_t>(page->size() - kPageHeaderSize);
  PutPageHeader(type, zstd, offset, salt, stored, raw, record_count, page->data());
  page->resize(PaddedPageSize(stored), '\0');
  EncodeFixed32(page->data(), ChecksumOf(*page).Masked());
}

// A page of `stored` bytes, which are `raw` bytes of payload compressed (zstd)
// or not.
static std::string PageOf(PageType type, uint64_t offset, uint64_t salt, uint32_t record_count,
                          std::string_view stored, size_t raw, bool zstd) {
  std::string page;
  page.reserve(PaddedPageSize(static_cast<uint32_t>(stored.size())));
  page.resize(kPageHeaderSize);
  page.append(stored.data(), stored.size());
  Seal(type, zstd, offset, salt, static_cast<uint32_t>(raw), record_count, &page);
  return page;
}

std::string EncodePage(PageType type, uint64_t offset, uint64_t salt, uint32_t record_count,
                       std::string_view payload, bool try_compress) {
  std::string compressed;
  const bool zstd = try_compress && CompressIfItPays(payload, &compressed);
  return PageOf(type, offset, salt, record_count, zstd ? std::string_view(compressed) : payload,
                payload.size(), zstd);
}

StoredPayload PreparePayload(std::string_view raw) {
  StoredPayload p;
  p.raw = raw;
  p.zstd = CompressIfItPays(raw, &p.stored);
  if (!p.zstd) p.stored = raw;
  return p;
}

std::string EncodePage(PageType type, uint64_t offset, uint64_t salt, uint32_t record_count,
                       const StoredPayload& p) {
  return PageOf(type, offset, salt, record_count, p.stored, p.raw.size(), p.zstd);
}

void SealPage(PageType type, uint64_t offset, uint64_t salt, uint32_t record_count,
              std::string* page) {
  Seal(type, false, offset, salt, static_cast<uint32_t>(page->size() - kPageHeaderSize),
       record_count, page);
}

PageStream::PageStream(PageType type, uint64_t offset, uint64_t salt, uint32_t record_count,
                       uint32_t length)
    : header_(kPageHeaderSize, '\0'), length_(length) {
  PutPageHeader(type, false, offset, salt, length, length, record_count, header_.data());
  sum_.Update(header_);
}

void PageStream::Add(std::string_view piece) { sum_.Update(piece); }

std::string PageStream::padding() const {
  return std::string(PaddedPageSize(length_) - kPageHeaderSize - length_, '\0');
}

std::string PageStream::header() const {
  PageChecksum sum = sum_;
  sum.Update(padding());
  std::string header = header_;
  EncodeFixed32(header.data(), sum.Masked());
  return header;
}

Status PeekPageHeader(std::string_view header, uint64_t offset, uint64_t salt, PageHeader* out) {
  int64_t page_no = static_cast<int64_t>(PageNoOf(offset));
  if (header.size() < kPageHeaderSize) {
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld: header is cut short",
                               static_cast<long long>(page_no));
  }
  const char* p = header.data();
  PageHeader h;
  h.type = static_cast<uint8_t>(p[4]);
  h.flags = static_cast<uint8_t>(p[5]);
  uint16_t reserved = DecodeFixed16(p + 6);
  uint32_t salt32 = DecodeFixed32(p + 8);
  h.length = DecodeFixed32(p + 12);
  h.page_no = DecodeFixed64(p + 16);
  h.raw_length = DecodeFixed32(p + 24);
  h.record_count = DecodeFixed32(p + 28);
  if (salt32 != static_cast<uint32_t>(salt) || h.page_no != PageNoOf(offset)) {
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no,
                               "page %lld: not a page of this file at this place (salt %08x, "
                               "page number %llu)",
                               static_cast<long long>(page_no), salt32,
                               static_cast<unsigned long long>(h.page_no));
  }
  bool zstd = h.flags & kPageFlagZstd;
  if (!IsKnownPageType(h.type) || (h.flags & ~kPageFlagZstd) || reserved != 0 ||
      h.length > kMaxPagePayload || h.raw_length > kMaxPagePayload ||
      (!zstd && h.raw_length != h.length) ||
      (zstd && uint64_t{h.raw_length} > uint64_t{h.length} * kMaxCompressionRatio)) {
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no,
                               "page %lld: invalid header (type %u, flags %u, length %u, raw %u)",
                               static_cast<long long>(page_no), h.type, h.flags, h.length,
                               h.raw_length);
  }
  *out = h;
  return Status::OK();
}

Status DecodePage(std::string_view page, uint64_t offset, uint64_t salt, PageHeader* header,
                  std::string* payload, std::string_view* view) {
  PageHeader h;
  AGENTMEM_RETURN_IF_ERROR(PeekPageHeader(page, offset, salt, &h));
  int64_t page_no = static_cast<int64_t>(h.page_no);
  uint64_t size = PaddedPageSize(h.length);
  if (page.size() < size) {
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld (%s): cut short (%zu of %llu bytes)",
                               static_cast<long long>(page_no), PageTypeName(h.type), page.size(),
                               static_cast<unsigned long long>(size));
  }
  const PageChecksum sum = ChecksumOf(page.substr(0, size));
  if (!sum.Matches()) {
    return AGENTMEM_CORRUPTION(kCorruptChecksum, page_no,
                               "page %lld (%s): checksum mismatch (stored %08x, computed %08x)",
                               static_cast<long long>(page_no), PageTypeName(h.type), sum.stored(),
                               sum.computed());
  }
  std::string_view body = page.substr(kPageHeaderSize, h.length);
  if (h.flags & kPageFlagZstd) {
    AGENTMEM_RETURN_IF_ERROR(Decompress(body, h.raw_length, page_no, payload));
    if (view) *view = *payload;
  } else if (view) {
    *view = body;
  } else {
    payload->assign(body.data(), body.size());
  }
  *header = h;
  return Status::OK();
}

}  // namespace agentmem::format

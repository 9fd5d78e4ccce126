// index/text/postings.cc -- posting list encoding and bounds-checked decoding
// (see postings.h).
#include "index/text/postings.h"

#include <limits>

namespace agentmem::index {

Status EncodePostings(std::span<const Posting> postings, std::string* dst) {
  for (size_t i = 0; i < postings.size(); i++) {
    if (postings[i].tf == 0 || (i > 0 && postings[i].doc_id <= postings[i - 1].doc_id)) {
      return StatusF(kInternal, "bm25 postings: entry %zu is out of order or has tf 0", i);
    }
  }
  format::PutVarint(dst, postings.size());
  uint64_t prev = 0;
  for (const Posting& p : postings) {
    format::PutVarint(dst, p.doc_id - prev);
    format::PutVarint(dst, p.tf);
    prev = p.doc_id;
  }
  return Status::OK();
}

Status DecodePostings(format::Decoder* in, std::vector<Posting>* out, int64_t page_no) {
  out->clear();
  uint64_t count = in->Varint();
  if (in->failed()) {
    return AGENTMEM_CORRUPTION(kCorruptIndex, page_no, "bm25 postings: count is truncated");
  }
  // Every posting takes at least two bytes: refuse a count that cannot fit
  // before reserving memory for it.
  if (count > in->remaining() / 2) {
    return AGENTMEM_CORRUPTION(kCorruptIndex, page_no,
                               "bm25 postings: count %llu does not fit in the %zu bytes left",
                               static_cast<unsigned long long>(count), in->remaining());
  }
  out->reserve(static_cast<size_t>(count));
  uint64_t doc_id = 0;
  for (uint64_t i = 0; i < count; i++) {
    uint64_t delta = in->Varint();
    uint64_t tf = in->Varint();
    if (in->failed()) {
      return AGENTMEM_CORRUPTION(
          kCorruptIndex, page_no,
          "bm25 postings: entry %llu is truncated or has a varint over 64 bits",
          static_cast<unsigned long long>(i));
    }
    if ((i > 0 && delta == 0) || delta > std::numeric_limits<uint64_t>::max() - doc_id) {
      return AGENTMEM_CORRUPTION(
          kCorruptIndex, page_no, "bm25 postings: entry %llu has doc id delta %llu after %llu",
          static_cast<unsigned long long>(i), static_cast<unsigned long long>(delta),
          static_cast<unsigned long long>(doc_id));
    }
    if (tf == 0 || tf > std::numeric_limits<uint32_t>::max()) {
      return AGENTMEM_CORRUPTION(kCorruptIndex, page_no, "bm25 postings: entry %llu has tf %llu",
                                 static_cast<unsigned long long>(i),
                                 static_cast<unsigned long long>(tf));
    }
    doc_id += delta;
    out->push_back({doc_id, static_cast<uint32_t>(tf)});
  }
  return Status::OK();
}

Result<std::vector<Posting>> DecodePostings(std::string_view bytes, int64_t page_no) {
  format::Decoder in(bytes);
  std::vector<Posting> out;
  AGENTMEM_RETURN_IF_ERROR(DecodePostings(&in, &out, page_no));
  if (!in.done()) {
    return AGENTMEM_CORRUPTION(kCorruptIndex, page_no,
                               "bm25 postings: %zu bytes follow the last entry", in.remaining());
  }
  return out;
}

}  // namespace agentmem::index

// index/text/postings.h -- a BM25 posting (document id, term frequency) and
// the byte encoding of a posting list, the unit that BM25 index pages will
// store.
//
// Encoding of a posting list (all varints are LEB128, format/coding.h):
//
//   varint  count        number of postings, >= 0
//   count times:
//     varint  doc_delta  the first posting: its doc id; later ones: doc id
//                        minus the previous doc id, >= 1
//     varint  tf         term frequency, 1 .. 2^32-1
//
// A list is valid if and only if it decodes without running past its bytes,
// every doc_delta after the first is >= 1, doc ids do not overflow 64 bits,
// every tf is in 1 .. 2^32-1, and (for DecodePostings on a whole string) no
// bytes follow the last posting.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/coding.h"
#include "format/status.h"

namespace agentmem::index {

struct Posting {
  uint64_t doc_id;
  uint32_t tf;  // occurrences of the term in the document, >= 1

  bool operator==(const Posting&) const = default;
};

// Appends the encoding of `postings` to *dst.
// Returns kInternal (and appends nothing) when the postings are not sorted by
// strictly increasing doc id or a tf is 0: the caller's invariant is broken.
Status EncodePostings(std::span<const Posting> postings, std::string* dst);

// Decodes one posting list from `in`, leaving `in` just past it, into *out
// (replacing its contents). On malformed input returns kCorruptIndex naming
// `page_no` (-1 when unknown) and the check that failed; *out is then
// unspecified and `in` may be anywhere in its input.
Status DecodePostings(format::Decoder* in, std::vector<Posting>* out, int64_t page_no = -1);

// Decodes a string that holds exactly one posting list (trailing bytes are
// corruption).
Result<std::vector<Posting>> DecodePostings(std::string_view bytes, int64_t page_no = -1);

}  // namespace agentmem::index

// tests/fuzz/fuzz_decode.cc -- the decoders of format/ (and the two of index/
// that read file bytes) on arbitrary bytes. The first byte picks the decoder;
// the rest is its input. Invariants: no crash, no sanitizer report, and a
// value that decodes re-encodes to bytes that decode to the same bytes again
// (encode . decode is idempotent), so nothing is silently lost or altered.
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/compress.h"
#include "format/file_header.h"
#include "format/page.h"
#include "format/records.h"
#include "index/text/bm25.h"
#include "index/text/postings.h"
#include "index/text/tokenizer.h"
#include "index/vector/hnsw.h"
#include "tests/fuzz/fuzz.h"

namespace {

using namespace agentmem;
using namespace agentmem::format;

constexpr uint64_t kSalt = 0x0123456789abcdefULL;

// decode(in) -> encode -> decode -> encode must give the same bytes twice.
template <typename Rec, typename Dec, typename Enc>
void RoundTrip(std::string_view in, Dec dec, Enc enc, const char* what) {
  Rec a;
  if (!dec(in, 7, &a).ok()) return;
  std::string e1;
  enc(a, &e1);
  Rec b;
  Status s = dec(e1, 7, &b);
  AGENTMEM_FUZZ_CHECK(s.ok(), "%s: a re-encoded record does not decode: %s", what,
                      s.ToString().c_str());
  std::string e2;
  enc(b, &e2);
  AGENTMEM_FUZZ_CHECK(e1 == e2, "%s: re-encoding changed the record (%zu vs %zu bytes)", what,
                      e1.size(), e2.size());
}

// A frozen BM25 image (index/text/bm25_frozen.cc): attached, searched for
// the words its bytes hold (which finds its terms' texts), then checked
// whole. A term a search found damaged must fail the whole check, an image
// that passes it must search without damage, take a document and encode to
// an image that attaches and encodes to the same bytes again.
void FrozenBm25(const std::string& bytes) {
  std::vector<uint64_t> words(bytes.size() / 8 + 1, 0);  // 8-byte aligned
  std::memcpy(words.data(), bytes.data(), bytes.size());
  index::Bm25Index idx;
  if (!idx.AttachFrozen(reinterpret_cast<const char*>(words.data()), bytes.size(), 1 << 20).ok()) {
    return;
  }
  std::vector<std::string> tokens;
  std::string word;
  for (char c : bytes) {
    if (c >= 'a' && c <= 'z') {
      word += c;
    } else if (!word.empty()) {
      tokens.push_back(word);
      word.clear();
    }
  }
  for (size_t i = 0; i < tokens.size() && i < 256; i++) idx.TopK(std::span(&tokens[i], 1), 5);
  idx.TopK(tokens, 5);
  const bool damaged = !idx.status().ok();
  const Status whole = idx.Verify();
  AGENTMEM_FUZZ_CHECK(!damaged || !whole.ok(), "bm25 image: a damaged term passed the whole check");
  if (!whole.ok()) {
    const std::vector<std::string> x = {"x"};
    AGENTMEM_FUZZ_CHECK(idx.Add(1 << 21, x).code() == whole.code(),
                        "bm25 image: a write to an image that failed its check went through");
    return;
  }
  idx.TopK(tokens, 5);
  AGENTMEM_FUZZ_CHECK(idx.status().ok(), "bm25 image: a search of a checked image found damage");
  std::string e1;
  idx.EncodeFrozen(&e1);
  std::vector<uint64_t> words1(e1.size() / 8 + 1, 0);
  std::memcpy(words1.data(), e1.data(), e1.size());
  index::Bm25Index again;
  Status s = again.AttachFrozen(reinterpret_cast<const char*>(words1.data()), e1.size(), 1 << 20);
  AGENTMEM_FUZZ_CHECK(s.ok() && again.Verify().ok(), "bm25 image: its own encoding does not attach: %s",
                      s.ToString().c_str());
  std::string e2;
  again.EncodeFrozen(&e2);
  AGENTMEM_FUZZ_CHECK(e1 == e2, "bm25 image: encoding changed it (%zu vs %zu bytes)", e1.size(),
                      e2.size());
  s = idx.Add(1 << 21, tokens);
  AGENTMEM_FUZZ_CHECK(s.ok() || s.code() == kTooBig, "bm25 image: a document was refused: %s",
                      s.ToString().c_str());
}

}  // namespace

AGENTMEM_FUZZ_TARGET(decode) {
  fuzz::Bytes in(data, size);
  uint8_t which = in.U8();
  switch (which % 15) {
    case 0: {
      std::string bytes = in.Rest();
      FileHeader h;
      if (DecodeFileHeader(bytes, &h).ok()) {
        FileHeader h2;
        Status s = DecodeFileHeader(EncodeFileHeader(h), &h2);
        AGENTMEM_FUZZ_CHECK(s.ok(), "file header re-encode: %s", s.ToString().c_str());
        AGENTMEM_FUZZ_CHECK(EncodeFileHeader(h2) == EncodeFileHeader(h), "file header changed");
      }
      break;
    }
    case 1: {
      std::string bytes = in.Rest();
      Superblock sb;
      if (DecodeSuperblock(bytes, kSalt, &sb).ok()) {
        Superblock sb2;
        Status s = DecodeSuperblock(EncodeSuperblock(sb), kSalt, &sb2);
        AGENTMEM_FUZZ_CHECK(s.ok(), "superblock re-encode: %s", s.ToString().c_str());
        AGENTMEM_FUZZ_CHECK(EncodeSuperblock(sb2) == EncodeSuperblock(sb), "superblock changed");
      }
      break;
    }
    case 2: {
      // A page at a 16-aligned offset chosen by the input. The checksum
      // rejects almost everything; the fuzz_open target and the seeds get
      // past it. PeekPageHeader runs on the same bytes.
      uint64_t offset = uint64_t{in.U32() & 0xffff} * 16;
      std::string bytes = in.Rest();
      PageHeader ph;
      Status peek = PeekPageHeader(std::string_view(bytes).substr(0, kPageHeaderSize), offset,
                                   kSalt, &ph);
      std::string payload;
      PageHeader h;
      Status s = DecodePage(bytes, offset, kSalt, &h, &payload);
      if (s.ok()) {
        AGENTMEM_FUZZ_CHECK(peek.ok(), "a page decodes but its header does not peek: %s",
                            peek.ToString().c_str());
        AGENTMEM_FUZZ_CHECK(payload.size() == h.raw_length, "payload %zu bytes, raw_length %u",
                            payload.size(), h.raw_length);
        std::vector<std::string_view> records;
        SplitRecords(payload, h.record_count, 7, &records).IgnoreError();
      }
      break;
    }
    case 3:
      RoundTrip<EpisodeRecord>(in.Rest(), DecodeEpisode, EncodeEpisode, "episode");
      break;
    case 4:
      RoundTrip<BlockRecord>(in.Rest(), DecodeBlock, EncodeBlock, "block");
      break;
    case 5:
      RoundTrip<FactRecord>(in.Rest(), DecodeFact, EncodeFact, "fact");
      break;
    case 6:
      RoundTrip<MetaRecord>(in.Rest(), DecodeMeta, EncodeMeta, "meta");
      break;
    case 7:
      RoundTrip<TextRecord>(in.Rest(), DecodeText, EncodeText, "text");
      break;
    case 8:
      RoundTrip<CommitRecord>(
          in.Rest(), DecodeCommit,
          [](const CommitRecord& r, std::string* dst) { *dst = EncodeCommit(r); }, "commit");
      break;
    case 9: {
      uint32_t count = in.U8();
      std::string payload = in.Rest();
      std::vector<std::string_view> records;
      if (SplitRecords(payload, count, 7, &records).ok()) {
        std::string again;
        for (std::string_view r : records) AppendRecord(r, &again);
        std::vector<std::string_view> records2;
        Status s = SplitRecords(again, count, 7, &records2);
        AGENTMEM_FUZZ_CHECK(s.ok() && records2.size() == records.size(),
                            "re-joined records do not split again");
      }
      break;
    }
    case 10: {
      size_t expected = in.U32() % (1u << 20);
      std::string src = in.Rest();
      std::string dst;
      if (Decompress(src, expected, 7, &dst).ok()) {
        AGENTMEM_FUZZ_CHECK(dst.size() == expected, "decompressed %zu bytes, expected %zu",
                            dst.size(), expected);
      }
      break;
    }
    case 11: {
      std::string image = in.Rest();
      auto idx = index::HnswIndex::Deserialize(image);
      if (idx.ok()) {
        std::string again;
        Status s = (*idx)->Serialize(&again);
        AGENTMEM_FUZZ_CHECK(s.ok(), "serialize after deserialize: %s", s.ToString().c_str());
        auto idx2 = index::HnswIndex::Deserialize(again);
        AGENTMEM_FUZZ_CHECK(idx2.ok(), "a re-serialized graph does not load: %s",
                            idx2.status().ToString().c_str());
      }
      break;
    }
    case 12: {
      std::string bytes = in.Rest();
      auto postings = index::DecodePostings(bytes, 7);
      if (postings.ok()) {
        std::string again;
        if (index::EncodePostings(*postings, &again).ok()) {
          auto p2 = index::DecodePostings(again, 7);
          AGENTMEM_FUZZ_CHECK(p2.ok() && p2->size() == postings->size(),
                              "re-encoded postings do not decode the same");
        }
      }
      break;
    }
    case 13: {
      std::string config = in.Rest();
      index::ParseTokenizerConfig(config).status().IgnoreError();
      break;
    }
    case 14:
      FrozenBm25(in.Rest());
      break;
  }
  return 0;
}

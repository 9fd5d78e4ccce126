// format/records.cc -- see records.h; byte layouts in docs/format.md §5.
#include "format/records.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <string_view>
#include <tuple>
#include <vector>

#include "format/coding.h"
#include "format/half.h"
#include "format/int8.h"

namespace agentmem::format {
namespace {

void PutFloat(std::string* dst, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  PutFixed32(dst, bits);
}
float GetFloat(Decoder* d) {
  uint32_t bits = d->Fixed32();
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// A vector as little-endian float32s: on a little-endian host its bytes as
// they are, in one copy.
void PutFloats(std::string* dst, const std::vector<float>& v) {
  if constexpr (std::endian::native == std::endian::little) {
    if (!v.empty()) dst->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  } else {
    for (float f : v) PutFloat(dst, f);
  }
}
// n little-endian float32s at `src` into dst.
void GetFloats(const char* src, size_t n, float* dst) {
  if constexpr (std::endian::native == std::endian::little) {
    // (memcpy is never called with an empty vector's null data pointer.)
    if (n > 0) std::memcpy(dst, src, n * sizeof(float));
  } else {
    Decoder d(std::string_view(src, n * sizeof(float)));
    for (size_t i = 0; i < n; i++) dst[i] = GetFloat(&d);
  }
}

Status Malformed(int64_t page_no, const char* what) {
  return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld: malformed %s record",
                             static_cast<long long>(page_no), what);
}

// A record decoder must consume its input exactly.
Status Finish(const Decoder& d, int64_t page_no, const char* what) {
  if (d.failed() || !d.done()) return Malformed(page_no, what);
  return Status::OK();
}

}  // namespace

void EncodeEpisode(const EpisodeRecord& r, std::string* dst) {
  PutFixed64(dst, r.id);
  PutSignedVarint(dst, r.ts);
  PutSignedVarint(dst, r.created_at);
  PutString(dst, r.user_id);
  PutString(dst, r.session_id);
  PutString(dst, r.role);
  PutString(dst, r.text);
  PutString(dst, r.metadata);
  // The component type rides in bits 32-39 of the dim varint (0: f32).
  PutVarint(dst, r.vector.size() | (uint64_t{static_cast<uint8_t>(r.vector_type)} << 32));
  if (r.vector.empty()) return;
  switch (r.vector_type) {
    case VectorType::kF32:
      PutFloats(dst, r.vector);
      break;
    case VectorType::kF16:
      for (float f : r.vector) PutFixed16(dst, FloatToHalf(f));
      break;
    case VectorType::kInt8: {
      const float scale = Int8Scale(r.vector);
      uint32_t bits;
      std::memcpy(&bits, &scale, 4);
      PutFixed32(dst, bits);
      const size_t at = dst->size();
      dst->resize(at + r.vector.size());
      Int8Quantize(r.vector, scale, reinterpret_cast<int8_t*>(dst->data() + at));
      break;
    }
  }
}

// The dim varint of an episode record: dim, the component type and the
// vector's bytes, checked against the bytes left. False when malformed.
bool GetVectorHeader(Decoder* d, uint64_t* dim, VectorType* type, size_t* bytes) {
  const uint64_t v = d->Varint();
  *dim = v & 0xffffffff;
  const uint64_t t = v >> 32;
  if (d->failed() || t > 2) return false;
  *type = static_cast<VectorType>(t);
  if (*dim == 0) {
    *bytes = 0;
    return true;
  }
  const size_t fixed = t == 2 ? kInt8ScaleBytes : 0;
  const size_t width = t == 0 ? 4 : t == 1 ? 2 : 1;
  if (d->remaining() < fixed || *dim > (d->remaining() - fixed) / width) return false;
  *bytes = fixed + static_cast<size_t>(*dim) * width;
  return true;
}

Status DecodeEpisode(std::string_view in, int64_t page_no, EpisodeRecord* out) {
  Decoder d(in);
  EpisodeRecord r;
  r.id = d.Fixed64();
  r.ts = d.SignedVarint();
  r.created_at = d.SignedVarint();
  r.user_id = d.String();
  r.session_id = d.String();
  r.role = d.String();
  r.text = d.String();
  r.metadata = d.String();
  uint64_t dim = 0;
  size_t bytes = 0;
  if (!GetVectorHeader(&d, &dim, &r.vector_type, &bytes)) return Malformed(page_no, "episode");
  r.vector.resize(dim);
  const std::string_view stored = d.Bytes(bytes);
  if (!d.failed() && !StoredToFloats(r.vector_type, stored, r.vector.size(), r.vector.data())) {
    return Malformed(page_no, "episode");
  }
  AGENTMEM_RETURN_IF_ERROR(Finish(d, page_no, "episode"));
  *out = std::move(r);
  return Status::OK();
}

namespace {

// An episode record's parts as views, checked as EpisodeVectorOf says.
Status EpisodeViews(std::string_view in, int64_t page_no, uint64_t* id, std::string_view* text,
                    std::string_view* vector, VectorType* type) {
  Decoder d(in);
  *id = d.Fixed64();
  d.SignedVarint();
  d.SignedVarint();
  for (int i = 0; i < 3; i++) d.String();  // user, session, role
  *text = d.String();
  d.String();  // metadata
  uint64_t dim = 0;
  size_t bytes = 0;
  if (!GetVectorHeader(&d, &dim, type, &bytes)) return Malformed(page_no, "episode");
  *vector = d.Bytes(bytes);
  return Finish(d, page_no, "episode");
}

}  // namespace

Status EpisodeVectorOf(std::string_view in, int64_t page_no, uint64_t* id, std::string_view* vector,
                       VectorType* type) {
  std::string_view text;
  return EpisodeViews(in, page_no, id, &text, vector, type);
}

Status EpisodeTextOf(std::string_view in, int64_t page_no, uint64_t* id, std::string_view* text) {
  std::string_view vector;
  VectorType type;
  return EpisodeViews(in, page_no, id, text, &vector, &type);
}

bool StoredToFloats(VectorType type, std::string_view stored, size_t dim, float* dst) {
  switch (type) {
    case VectorType::kF32:
      if (stored.size() != dim * 4) return false;
      GetFloats(stored.data(), dim, dst);
      return true;
    case VectorType::kF16:
      if (stored.size() != dim * 2) return false;
      HalfsToFloats(stored.data(), dim, dst);
      return true;
    case VectorType::kInt8:
      if (dim == 0) return stored.empty();
      return stored.size() == kInt8ScaleBytes + dim && Int8ToFloats(stored.data(), dim, dst);
  }
  return false;
}

bool SameContent(const EpisodeRecord& a, const EpisodeRecord& b) {
  auto content = [](const EpisodeRecord& r) {
    return std::tie(r.id, r.user_id, r.session_id, r.role, r.text, r.ts, r.created_at,
                    r.metadata, r.vector);
  };
  return content(a) == content(b);
}

bool RoundToStored(VectorType type, std::span<float> v) {
  switch (type) {
    case VectorType::kF32:
      return true;
    case VectorType::kF16:
      for (float f : v) {
        if (!std::isfinite(RoundToHalf(f))) return false;
      }
      for (float& f : v) f = RoundToHalf(f);
      return true;
    case VectorType::kInt8:
      return RoundToInt8(v);
  }
  return false;
}

void EncodeBlock(const BlockRecord& r, std::string* dst) {
  PutFixed64(dst, r.version);
  PutString(dst, r.user_id);
  PutString(dst, r.name);
  PutString(dst, r.value);
  PutVarint(dst, r.limit);
  PutSignedVarint(dst, r.pinned_order);
  PutSignedVarint(dst, r.updated_at);
}

Status DecodeBlock(std::string_view in, int64_t page_no, BlockRecord* out) {
  Decoder d(in);
  BlockRecord r;
  r.version = d.Fixed64();
  r.user_id = d.String();
  r.name = d.String();
  r.value = d.String();
  uint64_t limit = d.Varint();
  int64_t pinned = d.SignedVarint();
  r.updated_at = d.SignedVarint();
  AGENTMEM_RETURN_IF_ERROR(Finish(d, page_no, "block"));
  if (limit > UINT32_MAX || pinned < INT32_MIN || pinned > INT32_MAX) {
    return Malformed(page_no, "block");
  }
  r.limit = static_cast<uint32_t>(limit);
  r.pinned_order = static_cast<int32_t>(pinned);
  *out = std::move(r);
  return Status::OK();
}

void EncodeFact(const FactRecord& r, std::string* dst) {
  PutFixed64(dst, r.id);
  PutString(dst, r.user_id);
  PutString(dst, r.subject);
  PutString(dst, r.predicate);
  PutString(dst, r.object);
  PutFloat(dst, r.confidence);
  PutVarint(dst, r.source_episode_ids.size());
  for (uint64_t id : r.source_episode_ids) PutFixed64(dst, id);
  PutSignedVarint(dst, r.valid_from);
  PutSignedVarint(dst, r.valid_to);
  PutSignedVarint(dst, r.recorded_at);
  PutSignedVarint(dst, r.expired_at);
}

Status DecodeFact(std::string_view in, int64_t page_no, FactRecord* out) {
  Decoder d(in);
  FactRecord r;
  r.id = d.Fixed64();
  r.user_id = d.String();
  r.subject = d.String();
  r.predicate = d.String();
  r.object = d.String();
  r.confidence = GetFloat(&d);
  uint64_t n = d.Varint();
  if (d.failed() || n > d.remaining() / 8) return Malformed(page_no, "fact");
  r.source_episode_ids.resize(n);
  for (auto& id : r.source_episode_ids) id = d.Fixed64();
  r.valid_from = d.SignedVarint();
  r.valid_to = d.SignedVarint();
  r.recorded_at = d.SignedVarint();
  r.expired_at = d.SignedVarint();
  AGENTMEM_RETURN_IF_ERROR(Finish(d, page_no, "fact"));
  *out = std::move(r);
  return Status::OK();
}

void EncodeMeta(const MetaRecord& r, std::string* dst) {
  PutVarint(dst, r.entries.size());
  for (const auto& [k, v] : r.entries) {
    PutString(dst, k);
    PutString(dst, v);
  }
}

Status DecodeMeta(std::string_view in, int64_t page_no, MetaRecord* out) {
  Decoder d(in);
  MetaRecord r;
  uint64_t n = d.Varint();
  if (d.failed() || n > d.remaining() / 2) return Malformed(page_no, "meta");
  for (uint64_t i = 0; i < n; i++) {
    std::string k(d.String());
    std::string v(d.String());
    r.entries.emplace_back(std::move(k), std::move(v));
  }
  AGENTMEM_RETURN_IF_ERROR(Finish(d, page_no, "meta"));
  *out = std::move(r);
  return Status::OK();
}

void EncodeText(const TextRecord& r, std::string* dst) {
  PutFixed64(dst, r.episode_id);
  PutVarint(dst, r.doc_len);
  PutVarint(dst, r.terms.size());
  for (const auto& [term, tf] : r.terms) {
    PutString(dst, term);
    PutVarint(dst, tf);
  }
}

Status DecodeText(std::string_view in, int64_t page_no, TextRecord* out) {
  Decoder d(in);
  TextRecord r;
  r.episode_id = d.Fixed64();
  uint64_t doc_len = d.Varint();
  uint64_t n = d.Varint();
  if (d.failed() || doc_len > UINT32_MAX || n > d.remaining() / 2) return Malformed(page_no, "text");
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; i++) {
    std::string term(d.String());
    uint64_t tf = d.Varint();
    if (d.failed() || tf == 0 || tf > UINT32_MAX || term.empty()) return Malformed(page_no, "text");
    sum += tf;
    r.terms.emplace_back(std::move(term), static_cast<uint32_t>(tf));
  }
  AGENTMEM_RETURN_IF_ERROR(Finish(d, page_no, "text"));
  if (sum != doc_len) return Malformed(page_no, "text");
  r.doc_len = static_cast<uint32_t>(doc_len);
  *out = std::move(r);
  return Status::OK();
}

std::string EncodeCommit(const CommitRecord& r) {
  std::string b;
  PutFixed64(&b, r.commit_seq);        // 0
  PutFixed64(&b, r.txn_start);         // 8
  PutFixed64(&b, r.durable_through);   // 16
  PutFixed32(&b, r.page_count);        // 24
  PutFixed32(&b, 0);                   // 28 reserved
  PutFixed64(&b, static_cast<uint64_t>(r.commit_ts));  // 32
  PutFixed64(&b, r.next_episode_id);   // 40
  PutFixed64(&b, r.next_fact_id);      // 48
  PutFixed64(&b, r.next_block_version);  // 56
  return b;                            // 64 bytes
}

Status DecodeCommit(std::string_view in, int64_t page_no, CommitRecord* out) {
  if (in.size() != 64) return Malformed(page_no, "commit");
  Decoder d(in);
  CommitRecord r;
  r.commit_seq = d.Fixed64();
  r.txn_start = d.Fixed64();
  r.durable_through = d.Fixed64();
  r.page_count = d.Fixed32();
  uint32_t reserved = d.Fixed32();
  r.commit_ts = static_cast<int64_t>(d.Fixed64());
  r.next_episode_id = d.Fixed64();
  r.next_fact_id = d.Fixed64();
  r.next_block_version = d.Fixed64();
  AGENTMEM_RETURN_IF_ERROR(Finish(d, page_no, "commit"));
  if (reserved != 0) return Malformed(page_no, "commit");
  *out = r;
  return Status::OK();
}

void AppendRecord(std::string_view record, std::string* payload) {
  PutVarint(payload, record.size());
  payload->append(record.data(), record.size());
}

Status SplitRecords(std::string_view payload, uint32_t record_count, int64_t page_no,
                    std::vector<std::string_view>* records) {
  records->clear();
  // Each record takes at least its one-byte length, so a count above the
  // payload's size is refused before anything is allocated, and the split
  // stops at the first record past the count.
  bool fits = record_count <= payload.size();
  if (fits) records->reserve(record_count);
  Decoder d(payload);
  while (fits && !d.done() && records->size() <= record_count) {
    std::string_view r = d.String();
    if (d.failed()) break;
    records->push_back(r);
  }
  if (!fits || d.failed() || !d.done() || records->size() != record_count) {
    return AGENTMEM_CORRUPTION(kCorruptPage, page_no,
                               "page %lld: record lengths do not add up (%zu records, header "
                               "says %u)",
                               static_cast<long long>(page_no), records->size(), record_count);
  }
  return Status::OK();
}

void EncodeForget(const ForgetRecord& r, std::string* dst) {
  dst->push_back(static_cast<char>(r.kind));
  PutString(dst, r.user_id);
  PutString(dst, r.session_id);
  PutString(dst, r.name);
  PutSignedVarint(dst, r.before);
  PutVarint(dst, r.id);
}

Status DecodeForget(std::string_view in, int64_t page_no, ForgetRecord* out) {
  Decoder d(in);
  ForgetRecord r;
  uint8_t kind = d.U8();
  r.user_id = d.String();
  r.session_id = d.String();
  r.name = d.String();
  r.before = d.SignedVarint();
  r.id = d.Varint();
  AGENTMEM_RETURN_IF_ERROR(Finish(d, page_no, "forget"));
  if (kind < 1 || kind > 7) return Malformed(page_no, "forget");
  r.kind = static_cast<ForgetKind>(kind);
  const bool by_id = r.kind == ForgetKind::kEpisode || r.kind == ForgetKind::kFact;
  if (by_id != (r.id != 0)) return Malformed(page_no, "forget");
  *out = std::move(r);
  return Status::OK();
}

}  // namespace agentmem::format

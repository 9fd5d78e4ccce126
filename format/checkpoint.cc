// format/checkpoint.cc -- checkpoint sections (checkpoint.h, docs/format.md §5.8).
#include "format/checkpoint.h"

#include "format/coding.h"

namespace agentmem::format {

namespace {

Status Bad(int64_t page_no, const char* what) {
  return AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld (checkpoint): %s",
                             static_cast<long long>(page_no), what);
}

void PutSection(CheckpointSection kind, std::string* dst) {
  PutFixed32(dst, static_cast<uint32_t>(kind));
  PutFixed32(dst, 0);
}

}  // namespace

void EncodeGraphSectionHeader(std::string* dst) { PutSection(CheckpointSection::kGraph, dst); }
void EncodeBm25SectionHeader(std::string* dst) { PutSection(CheckpointSection::kBm25, dst); }

uint64_t EncodeBm25Directory(std::span<Bm25Partition> parts, std::string* dst) {
  PutFixed64(dst, parts.size());
  uint64_t at = 8 + parts.size() * 24;
  for (Bm25Partition& p : parts) {
    p.offset = at;
    PutFixed32(dst, p.user);
    PutFixed32(dst, 0);
    PutFixed64(dst, p.offset);
    PutFixed64(dst, p.size);
    at += p.size;
  }
  return at;
}

Status DecodeBm25Directory(std::string_view body, int64_t page_no, size_t strings,
                           std::vector<Bm25Partition>* out) {
  out->clear();
  if (body.size() < 8) return Bad(page_no, "bm25 directory cut short");
  const uint64_t n = DecodeFixed64(body.data());
  if (n > (body.size() - 8) / 24) return Bad(page_no, "bm25 directory cut short");
  const uint64_t images = 8 + n * 24;
  uint64_t expect = (images + 7) & ~uint64_t{7};
  for (uint64_t i = 0; i < n; i++) {
    const char* e = body.data() + 8 + i * 24;
    Bm25Partition p{DecodeFixed32(e), DecodeFixed64(e + 8), DecodeFixed64(e + 16)};
    if (p.user >= strings || DecodeFixed32(e + 4) != 0 || p.offset != expect ||
        p.size > body.size() - p.offset || p.size % 8 != 0) {
      return Bad(page_no, "bm25 directory entry out of range");
    }
    expect = p.offset + p.size;
    out->push_back(p);
  }
  if (expect != body.size()) return Bad(page_no, "bm25 section has bytes no entry covers");
  return Status::OK();
}

void EncodeCheckpointState(const CheckpointState& s, std::string* dst) {
  PutSection(CheckpointSection::kState, dst);
  PutVarint(dst, s.next_episode_id);
  PutVarint(dst, s.next_fact_id);
  PutVarint(dst, s.next_block_version);
  PutVarint(dst, s.pages);
  PutVarint(dst, s.text_bytes);
  PutVarint(dst, s.meta.size());
  for (const auto& [k, v] : s.meta) {
    PutString(dst, k);
    PutString(dst, v);
  }
  PutVarint(dst, s.strings.size());
  for (const auto& str : s.strings) PutString(dst, str);
  PutVarint(dst, s.episodes.size());
  uint64_t previous = 0;
  for (const CheckpointEpisode& e : s.episodes) {
    PutVarint(dst, e.id - previous);
    previous = e.id;
    PutVarint(dst, e.page_offset);
    PutVarint(dst, e.slot);
    PutVarint(dst, e.user);
    PutVarint(dst, e.session);
    PutVarint(dst, e.role);
    PutSignedVarint(dst, e.ts);
    dst->push_back(static_cast<char>((e.has_vector ? 1 : 0) | (e.forgotten ? 2 : 0)));
    PutVarint(dst, e.node == UINT32_MAX ? 0 : uint64_t{e.node} + 1);
  }
  PutVarint(dst, s.blocks.size());
  for (const CheckpointBlock& b : s.blocks) {
    PutVarint(dst, b.user);
    PutString(dst, b.name);
    PutVarint(dst, b.version);
    PutVarint(dst, b.page_offset);
    PutVarint(dst, b.slot);
  }
  PutVarint(dst, s.facts.size());
  for (const CheckpointFact& f : s.facts) {
    PutVarint(dst, f.id);
    PutVarint(dst, f.user);
    PutVarint(dst, f.page_offset);
    PutVarint(dst, f.slot);
  }
  PutVarint(dst, s.texts.size());
  std::string text;
  for (const TextRecord& t : s.texts) {
    text.clear();
    EncodeText(t, &text);
    PutString(dst, text);
  }
}

Status SplitSection(std::string_view payload, int64_t page_no, CheckpointSection* kind,
                    std::string_view* body) {
  if (payload.size() < kSectionHeaderSize) return Bad(page_no, "no section header");
  uint32_t k = DecodeFixed32(payload.data());
  if (k < 1 || k > 3 || DecodeFixed32(payload.data() + 4) != 0) {
    return Bad(page_no, "unknown section");
  }
  *kind = static_cast<CheckpointSection>(k);
  *body = payload.substr(kSectionHeaderSize);
  return Status::OK();
}

Status DecodeCheckpointState(std::string_view body, int64_t page_no, CheckpointState* out) {
  Decoder d(body);
  CheckpointState s;
  s.next_episode_id = d.Varint();
  s.next_fact_id = d.Varint();
  s.next_block_version = d.Varint();
  s.pages = d.Varint();
  s.text_bytes = d.Varint();
  // A count can be no larger than the bytes left (each item takes at least one).
  auto count = [&]() -> uint64_t {
    uint64_t n = d.Varint();
    return n <= d.remaining() ? n : (d.Bytes(d.remaining() + 1), 0);
  };
  uint64_t n = count();
  for (uint64_t i = 0; i < n && !d.failed(); i++) {
    std::string_view k = d.String(), v = d.String();
    s.meta.emplace_back(std::string(k), std::string(v));
  }
  n = count();
  s.strings.reserve(n);
  for (uint64_t i = 0; i < n && !d.failed(); i++) s.strings.emplace_back(d.String());
  const uint64_t strings = s.strings.size();
  // An episode entry takes at least 9 bytes, so the count is checked
  // against the bytes left before the entries are allocated.
  n = d.Varint();
  if (d.failed() || n > d.remaining() / 9) return Bad(page_no, "episode count exceeds the section");
  s.episodes.resize(n);
  uint64_t previous = 0;
  for (CheckpointEpisode& e : s.episodes) {
    if (d.failed()) break;
    const uint64_t delta = d.Varint();
    e.id = previous + delta;
    e.page_offset = d.Varint();
    if (delta == 0 || e.id < previous || e.id >= s.next_episode_id || e.page_offset == 0) {
      return Bad(page_no, "episode ids out of order or range");
    }
    previous = e.id;
    e.slot = static_cast<uint32_t>(d.Varint());
    e.user = static_cast<uint32_t>(d.Varint());
    e.session = static_cast<uint32_t>(d.Varint());
    e.role = static_cast<uint32_t>(d.Varint());
    e.ts = d.SignedVarint();
    uint8_t flags = d.U8();
    uint64_t node = d.Varint();
    // flags: 1 has a vector, 2 forgotten (then it must have its node).
    if (flags > 3 || e.user >= strings || e.session >= strings || e.role >= strings ||
        node > UINT32_MAX || (node != 0 && !(flags & 1)) || (flags == 2) ||
        ((flags & 2) && node == 0)) {
      return Bad(page_no, "episode entry out of range");
    }
    e.has_vector = flags & 1;
    e.forgotten = flags & 2;
    e.node = node == 0 ? UINT32_MAX : static_cast<uint32_t>(node - 1);
  }
  n = count();
  for (uint64_t i = 0; i < n && !d.failed(); i++) {
    CheckpointBlock b;
    b.user = static_cast<uint32_t>(d.Varint());
    b.name = std::string(d.String());
    b.version = d.Varint();
    b.page_offset = d.Varint();
    b.slot = static_cast<uint32_t>(d.Varint());
    if (b.user >= strings || b.version == 0 || b.version >= s.next_block_version ||
        (!s.blocks.empty() && b.version <= s.blocks.back().version)) {
      return Bad(page_no, "block entry out of range");
    }
    s.blocks.push_back(std::move(b));
  }
  n = count();
  for (uint64_t i = 0; i < n && !d.failed(); i++) {
    CheckpointFact f;
    f.id = d.Varint();
    f.user = static_cast<uint32_t>(d.Varint());
    f.page_offset = d.Varint();
    f.slot = static_cast<uint32_t>(d.Varint());
    if (f.user >= strings || f.id == 0 || f.id >= s.next_fact_id ||
        (!s.facts.empty() && f.id <= s.facts.back().id)) {
      return Bad(page_no, "fact entry out of range");
    }
    s.facts.push_back(f);
  }
  n = count();
  size_t entry = 0;
  for (uint64_t i = 0; i < n && !d.failed(); i++) {
    std::string_view text = d.String();
    if (d.failed()) break;
    TextRecord t;
    AGENTMEM_RETURN_IF_ERROR(DecodeText(text, page_no, &t));
    // Texts go by increasing id, as the entries do: `entry` follows them.
    while (entry < s.episodes.size() && s.episodes[entry].id < t.episode_id) entry++;
    if (entry == s.episodes.size() || s.episodes[entry].id != t.episode_id ||
        s.episodes[entry].forgotten ||
        (!s.texts.empty() && t.episode_id <= s.texts.back().episode_id)) {
      return Bad(page_no, "text entry out of range");
    }
    s.texts.push_back(std::move(t));
  }
  if (d.failed() || !d.done()) return Bad(page_no, "state section cut short or overlong");
  *out = std::move(s);
  return Status::OK();
}

}  // namespace agentmem::format

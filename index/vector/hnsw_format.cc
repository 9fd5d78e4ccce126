// index/vector/hnsw_format.cc -- encoding and validating HNSW graph images
// (layout and validity rule in hnsw_format.h).
#include "index/vector/hnsw_format.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "format/coding.h"
#include "format/crc32c.h"

namespace agentmem::index::hnsw {

// Vectors and link lists are copied between the image and memory as bytes.
static_assert(std::endian::native == std::endian::little,
              "hnsw images are little-endian; a big-endian port must byte-swap here");

namespace {

using format::DecodeFixed16;
using format::DecodeFixed32;
using format::DecodeFixed64;

constexpr char kMagic[4] = {'A', 'H', 'N', 'S'};

#define HNSW_CORRUPT(...) AGENTMEM_CORRUPTION(kCorruptIndex, -1, "hnsw image: " __VA_ARGS__)

// A bounds-checked forward reader over the body.
class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), end_(p + n) {}
  // Points *at to the next n bytes and skips them; false when fewer remain.
  bool Take(uint64_t n, const char** at) {
    if (n > static_cast<uint64_t>(end_ - p_)) return false;
    *at = p_;
    p_ += n;
    return true;
  }
  const char* position() const { return p_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

 private:
  const char* p_;
  const char* end_;
};

void AppendHeader(const GraphSource& g, uint32_t base_count, size_t records, bool with_vectors,
                  std::string* out) {
  GraphShape s = g.shape();
  out->append(kMagic, sizeof kMagic);
  format::PutFixed16(out, kImageVersion);
  out->push_back(static_cast<char>(s.metric));
  out->push_back(with_vectors ? 0 : static_cast<char>(kImageFlagNoVectors));
  format::PutFixed32(out, s.dim);
  format::PutFixed32(out, s.m);
  format::PutFixed32(out, s.ef_construction);
  format::PutFixed32(out, base_count);
  format::PutFixed32(out, g.node_count());
  format::PutFixed32(out, g.entry_point());
  format::PutFixed32(out, static_cast<uint32_t>(g.max_level()));
  format::PutFixed32(out, static_cast<uint32_t>(records));
  format::PutFixed64(out, 0);  // body_length, patched by EncodeImage
}

ImageHeader DecodeHeaderFields(const char* p) {
  ImageHeader h;
  h.shape.metric = static_cast<Metric>(static_cast<uint8_t>(p[6]));
  h.shape.dim = DecodeFixed32(p + 8);
  h.shape.m = DecodeFixed32(p + 12);
  h.shape.ef_construction = DecodeFixed32(p + 16);
  h.base_count = DecodeFixed32(p + 20);
  h.node_count = DecodeFixed32(p + 24);
  h.entry_point = DecodeFixed32(p + 28);
  h.max_level = static_cast<int32_t>(DecodeFixed32(p + 32));
  h.record_count = DecodeFixed32(p + 36);
  h.body_length = DecodeFixed64(p + 40);
  h.vectors = (static_cast<uint8_t>(p[7]) & kImageFlagNoVectors) == 0;
  return h;
}

Status CheckFraming(std::string_view image) {
  const size_t min_size = kImageHeaderSize + kImageTrailerSize;
  if (image.size() < min_size) {
    return HNSW_CORRUPT("%zu bytes, shorter than a header and checksum (%zu)", image.size(),
                        min_size);
  }
  if (std::memcmp(image.data(), kMagic, sizeof kMagic) != 0) return HNSW_CORRUPT("bad magic");
  uint16_t version = DecodeFixed16(image.data() + 4);
  if (version > kImageVersion) {
    return StatusF(kFormatVersion, "hnsw image version %u is newer than this build reads (%u)",
                   version, kImageVersion);
  }
  if (version == 0) return HNSW_CORRUPT("version 0");
  size_t crc_at = image.size() - kImageTrailerSize;
  uint32_t stored = format::UnmaskCrc(DecodeFixed32(image.data() + crc_at));
  uint32_t computed = format::Crc32c(image.data(), crc_at);
  if (stored != computed) {
    return HNSW_CORRUPT("checksum mismatch (stored %08x, computed %08x)", stored, computed);
  }
  if ((static_cast<uint8_t>(image[7]) & ~kImageFlagNoVectors) != 0) {
    return HNSW_CORRUPT("unknown flags 0x%02x", static_cast<uint8_t>(image[7]));
  }
  return Status::OK();
}

Status CheckCounts(const ImageHeader& h, size_t image_size) {
  if (h.body_length != image_size - kImageHeaderSize - kImageTrailerSize) {
    return HNSW_CORRUPT("body_length %llu does not match the image size %zu",
                        static_cast<unsigned long long>(h.body_length), image_size);
  }
  if (h.node_count > kMaxNodes || h.base_count > h.node_count) {
    return HNSW_CORRUPT("base_count %u / node_count %u out of range", h.base_count, h.node_count);
  }
  const uint64_t new_nodes = h.node_count - h.base_count;
  if (h.record_count > h.node_count || h.record_count < new_nodes) {
    return HNSW_CORRUPT("record_count %u does not fit %llu new of %u nodes", h.record_count,
                        static_cast<unsigned long long>(new_nodes), h.node_count);
  }
  // Each record takes its fixed part and a layer-0 count; a new one its vector.
  uint64_t min_body = uint64_t{h.record_count} * (kRecordFixedSize + 2) +
                      (h.vectors ? new_nodes * 4 * uint64_t{h.shape.dim} : 0);
  if (min_body > h.body_length) {
    return HNSW_CORRUPT("%u records need at least %llu bytes, body has %llu", h.record_count,
                        static_cast<unsigned long long>(min_body),
                        static_cast<unsigned long long>(h.body_length));
  }
  return Status::OK();
}

Status CheckEntryFields(const ImageHeader& h) {
  if (h.node_count == 0) {
    if (h.entry_point != kNoNode || h.max_level != -1) {
      return HNSW_CORRUPT("empty graph with entry point %u, max_level %d", h.entry_point,
                          h.max_level);
    }
    return Status::OK();
  }
  if (h.entry_point >= h.node_count) {
    return HNSW_CORRUPT("entry point %u out of range (node_count %u)", h.entry_point, h.node_count);
  }
  if (h.max_level < 0 || h.max_level > kMaxLevel) {
    return HNSW_CORRUPT("max_level %d out of range [0, %d]", h.max_level, kMaxLevel);
  }
  return Status::OK();
}

// The record passes of ParseImage, against the graph the image applies to.
class RecordChecker {
 public:
  RecordChecker(const ImageHeader& h, const GraphSource& base) : h_(h), base_(base) {}

  Status ScanRecords(std::string_view body, std::vector<NodeRecordView>* records);
  Status CheckLinks(const std::vector<NodeRecordView>& records) const;
  Status CheckEntryPoint() const;

 private:
  Status ReadRecord(Reader* in, uint32_t index, NodeRecordView* r) const;
  Status SkipLinks(Reader* in, uint32_t index, NodeRecordView* r) const;
  Status CheckIdentity(uint32_t index, const NodeRecordView& r, int64_t prev);
  Status CheckNewLabels();
  Status CheckNeighbour(uint32_t index, const NodeRecordView& r, int layer, uint32_t id) const;
  int LevelOf(uint32_t node) const {
    return node < h_.base_count ? base_.level(node) : new_levels_[node - h_.base_count];
  }

  const ImageHeader& h_;
  const GraphSource& base_;
  std::vector<uint8_t> new_levels_;   // level of node base_count + i
  std::vector<uint64_t> new_labels_;  // labels of the new nodes, checked for uniqueness
  uint64_t level_sum_ = 0;
};

Status RecordChecker::ReadRecord(Reader* in, uint32_t index, NodeRecordView* r) const {
  const char* p = nullptr;
  if (!in->Take(kRecordFixedSize, &p)) return HNSW_CORRUPT("record %u is truncated", index);
  r->node = DecodeFixed32(p);
  r->label = DecodeFixed64(p + 4);
  r->level = static_cast<uint8_t>(p[12]);
  const uint8_t flags = static_cast<uint8_t>(p[13]);
  if (r->level > h_.max_level) {
    return HNSW_CORRUPT("record %u (node %u): level %d above max_level %d", index, r->node,
                        r->level, h_.max_level);
  }
  if ((flags & ~1u) != 0) {
    return HNSW_CORRUPT("record %u (node %u): unknown flags 0x%02x", index, r->node, flags);
  }
  r->deleted = (flags & 1u) != 0;
  if (r->node >= h_.base_count && h_.vectors && !in->Take(uint64_t{4} * h_.shape.dim, &r->vector)) {
    return HNSW_CORRUPT("record %u (node %u): vector is truncated", index, r->node);
  }
  return SkipLinks(in, index, r);
}

Status RecordChecker::SkipLinks(Reader* in, uint32_t index, NodeRecordView* r) const {
  r->links = in->position();
  for (int layer = 0; layer <= r->level; ++layer) {
    const char* p = nullptr;
    if (!in->Take(2, &p)) {
      return HNSW_CORRUPT("record %u (node %u): links truncated", index, r->node);
    }
    uint32_t count = DecodeFixed16(p);
    if (count > h_.shape.max_links(layer)) {
      return HNSW_CORRUPT("record %u (node %u): %u links on layer %d, more than %u", index, r->node,
                          count, layer, h_.shape.max_links(layer));
    }
    if (!in->Take(uint64_t{4} * count, &p)) {
      return HNSW_CORRUPT("record %u (node %u): links truncated", index, r->node);
    }
  }
  return Status::OK();
}

Status RecordChecker::CheckIdentity(uint32_t index, const NodeRecordView& r, int64_t prev) {
  if (static_cast<int64_t>(r.node) <= prev || r.node >= h_.node_count) {
    return HNSW_CORRUPT("record %u: node %u out of order or range (previous %lld, node_count %u)",
                        index, r.node, static_cast<long long>(prev), h_.node_count);
  }
  if (r.node < h_.base_count) {
    if (base_.label(r.node) != r.label || base_.level(r.node) != r.level) {
      return HNSW_CORRUPT("record %u (node %u): label %llu level %d differ from the graph's", index,
                          r.node, static_cast<unsigned long long>(r.label), r.level);
    }
    return Status::OK();
  }
  const uint64_t expected = uint64_t{h_.base_count} + new_levels_.size();
  if (r.node != expected) {
    return HNSW_CORRUPT("record %u: new node %u, expected node %llu", index, r.node,
                        static_cast<unsigned long long>(expected));
  }
  if (base_.HasLabel(r.label)) {
    return HNSW_CORRUPT("record %u (node %u): label %llu is already in the graph", index, r.node,
                        static_cast<unsigned long long>(r.label));
  }
  new_levels_.push_back(static_cast<uint8_t>(r.level));
  new_labels_.push_back(r.label);
  level_sum_ += static_cast<uint64_t>(r.level);
  return Status::OK();
}

Status RecordChecker::CheckNewLabels() {
  std::sort(new_labels_.begin(), new_labels_.end());
  auto dup = std::adjacent_find(new_labels_.begin(), new_labels_.end());
  if (dup != new_labels_.end()) {
    return HNSW_CORRUPT("label %llu appears twice", static_cast<unsigned long long>(*dup));
  }
  return Status::OK();
}

Status RecordChecker::ScanRecords(std::string_view body, std::vector<NodeRecordView>* records) {
  const uint64_t new_nodes = h_.node_count - h_.base_count;
  new_levels_.reserve(new_nodes);
  new_labels_.reserve(new_nodes);
  records->reserve(h_.record_count);
  Reader in(body.data(), body.size());
  int64_t prev = -1;
  for (uint32_t i = 0; i < h_.record_count; ++i) {
    NodeRecordView r;
    AGENTMEM_RETURN_IF_ERROR(ReadRecord(&in, i, &r));
    AGENTMEM_RETURN_IF_ERROR(CheckIdentity(i, r, prev));
    records->push_back(r);
    prev = r.node;
  }
  if (in.remaining() != 0) return HNSW_CORRUPT("%zu bytes after the last record", in.remaining());
  if (new_levels_.size() != new_nodes) {
    return HNSW_CORRUPT("%zu new node records, header promises %llu", new_levels_.size(),
                        static_cast<unsigned long long>(new_nodes));
  }
  if (level_sum_ > new_nodes + 64) {
    return HNSW_CORRUPT("levels of %llu new nodes sum to %llu, implausibly high",
                        static_cast<unsigned long long>(new_nodes),
                        static_cast<unsigned long long>(level_sum_));
  }
  return CheckNewLabels();
}

Status RecordChecker::CheckNeighbour(uint32_t index, const NodeRecordView& r, int layer,
                                     uint32_t id) const {
  if (id >= h_.node_count) {
    return HNSW_CORRUPT(
        "record %u (node %u): neighbour %u on layer %d is out of range "
        "(node_count %u)",
        index, r.node, id, layer, h_.node_count);
  }
  if (id == r.node) {
    return HNSW_CORRUPT("record %u (node %u): links to itself on layer %d", index, r.node, layer);
  }
  if (LevelOf(id) < layer) {
    return HNSW_CORRUPT("record %u (node %u): neighbour %u on layer %d has level %d", index, r.node,
                        id, layer, LevelOf(id));
  }
  return Status::OK();
}

Status RecordChecker::CheckLinks(const std::vector<NodeRecordView>& records) const {
  for (uint32_t i = 0; i < records.size(); ++i) {
    LinkCursor cursor(records[i].links);
    for (int layer = 0; layer <= records[i].level; ++layer) {
      const char* ids = nullptr;
      uint32_t count = cursor.Next(&ids);
      for (uint32_t j = 0; j < count; ++j) {
        AGENTMEM_RETURN_IF_ERROR(CheckNeighbour(i, records[i], layer, DecodeFixed32(ids + 4 * j)));
      }
    }
  }
  return Status::OK();
}

Status RecordChecker::CheckEntryPoint() const {
  if (h_.node_count == 0) return Status::OK();
  if (LevelOf(h_.entry_point) != h_.max_level) {
    return HNSW_CORRUPT("entry point %u has level %d, max_level is %d", h_.entry_point,
                        LevelOf(h_.entry_point), h_.max_level);
  }
  if (h_.max_level < base_.max_level()) {
    return HNSW_CORRUPT("max_level %d below the graph's %d", h_.max_level, base_.max_level());
  }
  return Status::OK();
}

Status CheckFitsBase(const ImageHeader& h, const GraphSource& base) {
  GraphShape s = base.shape();
  if (!(h.shape == s)) {
    return HNSW_CORRUPT(
        "shape (%s, dim %u, m %u, ef_construction %u) differs from the graph's "
        "(%s, dim %u, m %u, ef_construction %u)",
        MetricName(h.shape.metric), h.shape.dim, h.shape.m, h.shape.ef_construction,
        MetricName(s.metric), s.dim, s.m, s.ef_construction);
  }
  if (h.base_count != base.node_count()) {
    return HNSW_CORRUPT("builds on %u nodes, the graph has %u", h.base_count, base.node_count());
  }
  return Status::OK();
}

}  // namespace

Status ValidateShape(const GraphShape& s, int code) {
  if (!IsValidMetric(static_cast<uint8_t>(s.metric))) {
    return StatusF(code, "hnsw: unknown metric %d", static_cast<int>(s.metric));
  }
  if (s.dim < 1 || s.dim > kMaxDim) {
    return StatusF(code, "hnsw: dimension %u out of range [1, %u]", s.dim, kMaxDim);
  }
  if (s.m < kMinM || s.m > kMaxM) {
    return StatusF(code, "hnsw: m %u out of range [%u, %u]", s.m, kMinM, kMaxM);
  }
  if (s.ef_construction < 1 || s.ef_construction > kMaxEfConstruction) {
    return StatusF(code, "hnsw: ef_construction %u out of range [1, %u]", s.ef_construction,
                   kMaxEfConstruction);
  }
  return Status::OK();
}

void EncodeNodeRecord(const GraphSource& g, uint32_t node, bool with_vector, std::string* out) {
  const int level = g.level(node);
  format::PutFixed32(out, node);
  format::PutFixed64(out, g.label(node));
  out->push_back(static_cast<char>(level));
  out->push_back(g.deleted(node) ? 1 : 0);
  if (with_vector) {
    out->append(reinterpret_cast<const char*>(g.vector(node)), size_t{4} * g.shape().dim);
  }
  for (int layer = 0; layer <= level; ++layer) {
    std::span<const uint32_t> links = g.links(node, layer);
    format::PutFixed16(out, static_cast<uint16_t>(links.size()));
    out->append(reinterpret_cast<const char*>(links.data()), links.size_bytes());
  }
}

size_t EncodedImageSize(const GraphSource& g, uint32_t base_count,
                        std::span<const uint32_t> nodes, bool with_vectors) {
  size_t size = kImageHeaderSize + kImageTrailerSize;
  const size_t vector_bytes = with_vectors ? size_t{4} * g.shape().dim : 0;
  for (uint32_t node : nodes) {
    size += kRecordFixedSize + (node >= base_count ? vector_bytes : 0);
    for (int layer = 0; layer <= g.level(node); ++layer)
      size += 2 + g.links(node, layer).size_bytes();
  }
  return size;
}

void EncodeImage(const GraphSource& g, uint32_t base_count, std::span<const uint32_t> nodes,
                 std::string* out, bool with_vectors) {
  const size_t start = out->size();
  out->reserve(start + EncodedImageSize(g, base_count, nodes, with_vectors));
  AppendHeader(g, base_count, nodes.size(), with_vectors, out);
  const size_t body_start = out->size();
  for (uint32_t node : nodes) EncodeNodeRecord(g, node, with_vectors && node >= base_count, out);
  format::EncodeFixed64(out->data() + start + 40, out->size() - body_start);
  uint32_t crc = format::Crc32c(out->data() + start, out->size() - start);
  format::PutFixed32(out, format::MaskCrc(crc));
}

uint32_t LinkCursor::Next(const char** ids) {
  uint32_t count = DecodeFixed16(p_);
  *ids = p_ + 2;
  p_ += 2 + size_t{4} * count;
  return count;
}

Result<ImageHeader> ParseImageHeader(std::string_view image) {
  AGENTMEM_RETURN_IF_ERROR(CheckFraming(image));
  ImageHeader h = DecodeHeaderFields(image.data());
  AGENTMEM_RETURN_IF_ERROR(ValidateShape(h.shape, kCorruptIndex));
  AGENTMEM_RETURN_IF_ERROR(CheckCounts(h, image.size()));
  AGENTMEM_RETURN_IF_ERROR(CheckEntryFields(h));
  return h;
}

Result<ParsedImage> ParseImageBody(std::string_view image, const ImageHeader& header,
                                   const GraphSource& base) {
  AGENTMEM_RETURN_IF_ERROR(CheckFitsBase(header, base));
  ParsedImage parsed{header, {}};
  RecordChecker checker(parsed.header, base);
  std::string_view body = image.substr(kImageHeaderSize, parsed.header.body_length);
  AGENTMEM_RETURN_IF_ERROR(checker.ScanRecords(body, &parsed.records));
  AGENTMEM_RETURN_IF_ERROR(checker.CheckLinks(parsed.records));
  AGENTMEM_RETURN_IF_ERROR(checker.CheckEntryPoint());
  return parsed;
}

Status RebaseImage(std::string_view image, uint32_t base_count, std::string* out) {
  Result<ImageHeader> h = ParseImageHeader(image);
  if (!h.ok()) return h.status();
  if (h->vectors) return HNSW_CORRUPT("an image with vectors cannot build on other nodes");
  if (base_count < h->base_count || base_count > h->node_count) {
    return HNSW_CORRUPT("cannot build on %u nodes: its base_count is %u, its node_count %u",
                        base_count, h->base_count, h->node_count);
  }
  out->assign(image);
  format::EncodeFixed32(out->data() + 20, base_count);
  const size_t crc_at = out->size() - kImageTrailerSize;
  format::EncodeFixed32(out->data() + crc_at, format::MaskCrc(format::Crc32c(out->data(), crc_at)));
  return Status::OK();
}

Result<ParsedImage> ParseImage(std::string_view image, const GraphSource& base) {
  Result<ImageHeader> header = ParseImageHeader(image);
  if (!header.ok()) return header.status();
  return ParseImageBody(image, *header, base);
}

}  // namespace agentmem::index::hnsw

// index/vector/hnsw_format.h -- the bytes of an HNSW graph image: a full
// checkpoint of a graph, or a delta of the nodes one commit changed.
//
// hnswlib's own saveIndex/loadIndex write a raw memory dump to a file path, with
// no checksum and no bounds checks. This is our own layout instead, written to
// and read from a byte string, so that the engine can put it in pages of the
// .agentmem file. A loader validates every length, id, level and count before
// it touches the graph; a damaged image is refused with kCorruptIndex and never
// makes the loader crash or allocate more than a small multiple of its size.
//
// One layout serves both uses. An image "builds on" base_count nodes: a full
// image has base_count 0 and a record for every node; a delta has the node
// count of the graph it applies to, a record for every node added since
// (ids base_count .. node_count-1, with their vectors) and for every older node
// whose links or deleted flag changed (without its vector).
//
// All integers are little-endian.
//
// Image:
//   OFFSET  SIZE  FIELD            DESCRIPTION
//   0       4     magic            "AHNS"
//   4       2     version          kImageVersion (1); a newer one is refused
//   6       1     metric           Metric (1 cosine, 2 ip, 3 l2)
//   7       1     flags            bit 0 (kImageFlagNoVectors): the new nodes' records hold
//                                  no vector (the caller supplies them); other bits 0
//   8       4     dim              vector dimension, 1..kMaxDim
//   12      4     m                links per node and layer, kMinM..kMaxM (2m on layer 0)
//   16      4     ef_construction  beam width used while inserting, 1..kMaxEfConstruction
//   20      4     base_count       nodes of the graph the image applies to (0: full image)
//   24      4     node_count       nodes after applying it, base_count..kMaxNodes (2^31-1)
//   28      4     entry_point      node id where searches start; kNoNode iff node_count 0
//   32      4     max_level        int32 level of the entry point; -1 iff node_count 0
//   36      4     record_count     node records in the body
//   40      8     body_length      bytes of the body
//   48      ...   body             record_count node records, ascending node id
//   48+body 4     crc              masked CRC-32C (format/crc32c.h) of every byte before it
//
// Node record:
//   OFFSET  SIZE     FIELD       DESCRIPTION
//   0       4        node        dense internal id, in insertion order
//   4       8        label       the caller's id (episode id); unique in the graph
//   12      1        level       top layer of the node, 0..kMaxLevel
//   13      1        flags       bit 0: marked deleted; other bits 0
//   14      4*dim    vector      float32; present iff node >= base_count and the image's
//                                flags do not have kImageFlagNoVectors
//   ...              links       for layer 0..level: [2 count][4*count neighbour ids]
//                                count <= 2m on layer 0, <= m above
//
// An image is valid iff: its CRC matches; every header field is in range; the
// records are in ascending node order, the new ones exactly base_count ..
// node_count-1; an old node's record repeats its label and level; new labels are
// unique in the graph; every neighbour id is < node_count, is not the node
// itself, and names a node whose level is >= the layer; the entry point's level
// is max_level, no node's level exceeds it, and max_level is not below the
// graph's; and the sum of the new nodes' levels is at most their count + 64.
// (The last rule bounds the memory of a hostile image. Levels are drawn with
// P(level >= l) = m^-l, m >= 4, so a real graph's sum is about count/3.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/status.h"
#include "index/vector/metric.h"

namespace agentmem::index::hnsw {

inline constexpr uint32_t kNoNode = 0xffffffffu;
// hnswlib sizes its visited lists with an int.
inline constexpr uint32_t kMaxNodes = 0x7fffffffu;
inline constexpr int kMaxLevel = 31;
inline constexpr uint32_t kMinM = 4;
inline constexpr uint32_t kMaxM = 128;
inline constexpr uint32_t kMaxDim = 65536;
inline constexpr uint32_t kMaxEfConstruction = 65536;
inline constexpr uint16_t kImageVersion = 1;
inline constexpr size_t kImageHeaderSize = 48;
inline constexpr size_t kImageTrailerSize = 4;
inline constexpr size_t kRecordFixedSize = 14;
inline constexpr uint8_t kImageFlagNoVectors = 1;

// The parameters that make two graphs compatible.
struct GraphShape {
  Metric metric = Metric::kCosine;
  uint32_t dim = 0;
  uint32_t m = 16;
  uint32_t ef_construction = 200;

  // The most links a node may hold on `layer`.
  uint32_t max_links(int layer) const { return layer == 0 ? 2 * m : m; }
  bool operator==(const GraphShape&) const = default;
};

// OK when every field is in the ranges above; else `code` with a message.
Status ValidateShape(const GraphShape& shape, int code);

// Read access to a graph: what encoding reads, and what decoding checks a
// delta against. Implemented over hnswlib by hnsw.cc.
class GraphSource {
 public:
  virtual ~GraphSource() = default;
  virtual GraphShape shape() const = 0;
  virtual uint32_t node_count() const = 0;
  virtual uint32_t entry_point() const = 0;  // kNoNode when empty
  virtual int max_level() const = 0;         // -1 when empty
  // REQUIRES for the rest: node < node_count(), 0 <= layer <= level(node).
  virtual uint64_t label(uint32_t node) const = 0;
  virtual int level(uint32_t node) const = 0;
  virtual bool deleted(uint32_t node) const = 0;
  virtual const float* vector(uint32_t node) const = 0;
  virtual std::span<const uint32_t> links(uint32_t node, int layer) const = 0;
  virtual bool HasLabel(uint64_t label) const = 0;
};

struct ImageHeader {
  GraphShape shape;
  uint32_t base_count = 0;
  uint32_t node_count = 0;
  uint32_t entry_point = kNoNode;
  int32_t max_level = -1;
  uint32_t record_count = 0;
  uint64_t body_length = 0;
  bool vectors = true;  // false: kImageFlagNoVectors
};

// Appends to *out an image of `graph` holding the records of `nodes`
// (ascending, distinct, each < graph.node_count()) on top of base_count nodes.
// REQUIRES: every node >= base_count is listed. A full image: base_count 0 and
// every node. `with_vectors` false: the new nodes' vectors are left out
// (kImageFlagNoVectors).
void EncodeImage(const GraphSource& graph, uint32_t base_count, std::span<const uint32_t> nodes,
                 std::string* out, bool with_vectors = true);

// Appends one node record; the vector is written iff with_vector.
void EncodeNodeRecord(const GraphSource& graph, uint32_t node, bool with_vector, std::string* out);

// One validated record: views into the image, which must outlive it.
struct NodeRecordView {
  uint32_t node = 0;
  uint64_t label = 0;
  int level = 0;
  bool deleted = false;
  const char* vector = nullptr;  // dim little-endian floats, any alignment; null for old
                                 // nodes and in an image without vectors
  const char* links = nullptr;   // level+1 lists of [u16 count][count x u32]
};

// Walks the link lists of a validated record, layer 0 first.
class LinkCursor {
 public:
  explicit LinkCursor(const char* links) : p_(links) {}
  // The next layer's neighbour count; *ids gets count little-endian u32.
  uint32_t Next(const char** ids);

 private:
  const char* p_;
};

// A fully validated image.
struct ParsedImage {
  ImageHeader header;
  std::vector<NodeRecordView> records;
};

// The exact size EncodeImage() will append (it reserves this much).
size_t EncodedImageSize(const GraphSource& graph, uint32_t base_count,
                        std::span<const uint32_t> nodes, bool with_vectors = true);

// Reads and checks the header and the checksum of the whole image. Errors:
// kCorruptIndex for damage, kFormatVersion for an image of a newer version.
Result<ImageHeader> ParseImageHeader(std::string_view image);

// Checks the records of an image whose header ParseImageHeader() returned,
// against the graph it is to be applied to (for a full image, an empty graph
// of the image's shape). Nothing is changed. Errors: kCorruptIndex when the
// image does not fit `base` (other shape, other node count) or breaks a
// validity rule; messages name the record and the check, e.g. "hnsw image:
// record 7 (node 7): neighbour 912 on layer 0 is out of range (node_count 10)".
Result<ParsedImage> ParseImageBody(std::string_view image, const ImageHeader& header,
                                   const GraphSource& base);

// ParseImageHeader() then ParseImageBody().
Result<ParsedImage> ParseImage(std::string_view image, const GraphSource& base);

// The same image building on `base_count` nodes instead, written to *out: the
// records of nodes below it become those of old nodes (a graph that already
// holds them, with the same labels and levels, takes their lists). Only for
// an image without vectors, whose old and new records have one layout.
// Errors: ParseImageHeader()'s; kCorruptIndex for an image with vectors or
// `base_count` outside [its base_count, its node_count].
Status RebaseImage(std::string_view image, uint32_t base_count, std::string* out);

}  // namespace agentmem::index::hnsw

// index/vector/hnsw_mapped.h -- checking a mappable HNSW image's level-0
// records as a stream of bytes (docs/format.md §5.8, graph section).
//
// HnswIndex::Map() checks every level-0 record where the image lies. Through
// a file mapping that means a page-table walk per 4 KiB for the whole graph
// (most of a checkpoint): on virtual machines with costly TLB misses, reading
// 190 MB that way took 3x as long as copying it in 1 MiB pieces. A caller that
// reads the image anyway (to verify its page checksum) feeds the same bytes
// here, piece by piece, and then maps the image with the records taken as
// checked (HnswIndex::Map's `records_checked`).
//
// The checks are Map()'s: each record's link count at most 2m, each link a
// node of the graph, labels increasing with the node number, and as many
// deleted flags as the header says.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "format/status.h"

namespace agentmem::index {

class MappedRecordCheck {
 public:
  // `head`: the image's first 64 bytes (at least). Errors: kCorruptIndex when
  // the header cannot describe an image of `size` bytes.
  Status Start(std::string_view head, size_t size);
  // Bytes of the image from `offset` on, in increasing offsets with no gaps
  // (bytes before the level-0 records are skipped). Errors: kCorruptIndex
  // naming the node.
  Status Feed(size_t offset, std::string_view bytes);
  // After the last byte: every record seen and the deleted count right.
  Status Finish() const;

 private:
  Status CheckRecord(const char* r);

  uint64_t nodes_ = 0, deleted_ = 0, level0_ = 0, record_ = 0, max_links_ = 0, label_at_ = 0;
  uint64_t next_ = 0;  // image offset of the next byte expected
  uint64_t node_ = 0;  // records checked
  uint64_t deleted_seen_ = 0, last_label_ = 0;
  std::string partial_;  // a record split between two pieces
};

}  // namespace agentmem::index

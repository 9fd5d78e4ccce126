// format/checkpoint.h -- checkpoint sections (docs/format.md §5.8). A
// checkpoint is a transaction of checkpoint pages (type 8) and a commit page
// that folds everything before it: the catalog (where each record lives), the
// filter attributes and BM25 terms of the episodes, and the HNSW graph as a
// mappable image. A superblock that points at it lets recovery load it and
// scan only the commits after it; a scan that meets it in the log skips it.
//
// Each checkpoint page's payload starts with an 8-byte section header: u32
// kind, u32 zero. The state section is decoded (copied into memory); the graph
// section is used where it lies in the file (index/vector/hnsw.h, Map()).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/records.h"
#include "format/status.h"

namespace agentmem::format {

enum class CheckpointSection : uint32_t {
  kState = 1,  // CheckpointState
  kGraph = 2,  // a mappable HNSW image (hnsw.h, SerializeMappable)
  kBm25 = 3,   // a directory of frozen BM25 images, one per user (bm25.h, EncodeFrozen)
};
constexpr size_t kSectionHeaderSize = 8;

struct CheckpointEpisode {
  uint64_t id = 0;           // the episode id
  uint64_t page_offset = 0;  // of the episodes page holding its record
  uint32_t slot = 0;
  uint32_t user = 0;     // index into CheckpointState::strings
  uint32_t session = 0;  // index into CheckpointState::strings
  uint32_t role = 0;     // index into CheckpointState::strings
  int64_t ts = 0;
  bool has_vector = false;
  // Forgotten (a forget record hid it) but still a node of the graph section,
  // which keeps it until VACUUM; it is in no other list of the checkpoint.
  bool forgotten = false;
  uint32_t node = UINT32_MAX;  // its node in the graph section; UINT32_MAX: none
  bool operator==(const CheckpointEpisode&) const = default;
};

struct CheckpointBlock {
  uint32_t user = 0;  // index into strings
  std::string name;
  uint64_t version = 0;
  uint64_t page_offset = 0;
  uint32_t slot = 0;
  bool operator==(const CheckpointBlock&) const = default;
};

struct CheckpointFact {
  uint64_t id = 0;
  uint32_t user = 0;  // index into strings
  uint64_t page_offset = 0;
  uint32_t slot = 0;
  bool operator==(const CheckpointFact&) const = default;
};

struct CheckpointState {
  uint64_t next_episode_id = 1;
  uint64_t next_fact_id = 1;
  uint64_t next_block_version = 1;
  uint64_t pages = 0;       // pages in the file before the checkpoint
  uint64_t text_bytes = 0;  // bytes of episode text, all users
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<std::string> strings;          // user, session and role ids, each once
  std::vector<CheckpointEpisode> episodes;   // by increasing id; ids not listed are no episode
  std::vector<CheckpointBlock> blocks;       // every version, increasing
  std::vector<CheckpointFact> facts;         // increasing id
  std::vector<TextRecord> texts;             // increasing episode id
  bool operator==(const CheckpointState&) const = default;
};

// Appends a checkpoint page payload (section header + body) to *dst.
void EncodeCheckpointState(const CheckpointState& s, std::string* dst);
void EncodeGraphSectionHeader(std::string* dst);
void EncodeBm25SectionHeader(std::string* dst);

// The bm25 section body: u64 count, then per user {u32 user (a string index
// of the state section), u32 zero, u64 offset, u64 size} -- each image at
// `offset` bytes from the body's start, 8-byte aligned -- then the images.
struct Bm25Partition {
  uint32_t user = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};
// Sets each of `parts`' offsets (their images follow the directory in
// order; each size must be a multiple of 8), appends the directory to *dst
// and returns the size of the whole body, images included.
uint64_t EncodeBm25Directory(std::span<Bm25Partition> parts, std::string* dst);
Status DecodeBm25Directory(std::string_view body, int64_t page_no, size_t strings,
                           std::vector<Bm25Partition>* out);
// The section kind of a checkpoint page payload, and its body.
Status SplitSection(std::string_view payload, int64_t page_no, CheckpointSection* kind,
                    std::string_view* body);
// Decodes a state section body; every index and count is checked.
Status DecodeCheckpointState(std::string_view body, int64_t page_no, CheckpointState* out);

}  // namespace agentmem::format

// engine/storage/checkpoint_reader.h -- reads and verifies the checkpoint a
// superblock points at (docs/format.md §5.8): its state, bm25 and graph
// sections and the commit page that ends them.
//
// The page heads are walked first; then the state section is read whole (it
// is decoded into memory anyway) and imported by the caller on this thread,
// while another thread reads the bm25 page into private memory
// (File::ReadPrivate) in pieces that are checksummed as they arrive, and
// checks the graph page where it lies in the file's mapping (read into
// private memory the same way when the file cannot be mapped), its level-0
// records checked from the same pieces (index::MappedRecordCheck) -- so that
// an open costs about one pass over the checkpoint's bytes. Every error names the page, and the first in file
// order is the one reported.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "engine/env/env.h"
#include "engine/storage/pager.h"
#include "format/checkpoint.h"
#include "format/file_header.h"

namespace agentmem::engine {

// The bm25 and graph sections, verified, in memory that stays valid while
// the shared_ptrs are held.
struct CheckpointSections {
  std::shared_ptr<MappedBytes> bm25;  // the bm25 page, whole
  std::string_view bm25_body;         // its section body
  int64_t bm25_page = 0;
  // The graph page, whole, with spare room after it; or, when graph_in_file,
  // the file's mapping, read-only, which holds it.
  std::shared_ptr<const MappedBytes> graph;
  size_t graph_at = 0;                 // where the image starts in *graph
  size_t graph_size = 0;               // the image's size (0: the file has no graph)
  int64_t graph_page = 0;
  bool graph_checked = false;  // its level-0 records went through MappedRecordCheck
  bool graph_in_file = false;  // *graph is the file's mapping
};

// Reads the checkpoint `sb` points at. `map` (null when the file cannot be
// mapped) is the file's mapping (File::MapShared): the graph section is then
// checked and used where it lies in it, not copied. `state` receives the state section,
// and import(*state) runs on the calling thread while the other thread reads
// the bm25 and graph pages. Once the state is decoded and every page read
// well, help() runs on both threads (on the other one at once, on this one
// after import): work the caller shares between them, such as filling the
// graph's vectors from the state's episodes (it must not touch what import
// writes). Both have returned when ReadCheckpoint returns; its result is the
// first page's error, then the commit's, then import's (help reports its
// own).
// Errors: kCorrupt* naming the page (a bad checksum, a missing, repeated or
// unknown section, a commit that does not match), kIoErr*, or import's.
Status ReadCheckpoint(File* file, Pager* pager, uint64_t salt, const format::Superblock& sb,
                      std::shared_ptr<const MappedBytes> map, format::CheckpointState* state,
                      const std::function<Status(const format::CheckpointState&)>& import,
                      const std::function<void()>& help, CheckpointSections* out);

}  // namespace agentmem::engine

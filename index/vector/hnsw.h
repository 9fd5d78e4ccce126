// index/vector/hnsw.h -- HnswIndex: our adapter around hnswlib 0.6.2.
//
// hnswlib supplies the graph construction (insertion, neighbour selection
// heuristic, link repair). Around it this adapter adds what the engine needs
// and hnswlib lacks: Status instead of exceptions, per-query ef and an optional
// label filter (our own search loop over hnswlib's public graph), SIMD
// distances from distance.h chosen for the CPU, deterministic levels, automatic
// growth, and persistence to byte strings with a validating loader
// (hnsw_format.h) instead of saveIndex/loadIndex on file paths.
//
// hnswlib defines non-inline functions in its headers, so <hnswlib/hnswlib.h>
// is included by hnsw.cc only; this header shows none of its types.
//
// Persistence: the graph lives in pages of the .agentmem file, committed
// atomically with the episodes it indexes, never rewritten whole per commit
// and never rebuilt at open (docs/format.md §5.8).
//
//  * Checkpoint: Serialize() writes a full image (base_count 0). Deserialize()
//    rebuilds the index from one, validating every byte first; Map() uses an
//    image in place, without a copy (hnsw_mapped.h checks its records).
//  * Delta: a ChangeMark taken after the last persisted state, then
//    EncodeDelta(mark) at commit: one image holding the nodes added since the
//    mark (with vectors) and the older nodes whose neighbour lists or deleted
//    flag changed (links only). An insert changes the new node and the nodes it
//    links to (hnswlib rewrites exactly those lists): about 1 + m records, each
//    a whole neighbour list of up to 2m ids. NodesChangedSince(mark) lists the
//    nodes without encoding them.
//  * Replay: open = the last checkpoint's image, then ApplyDelta() of each
//    later commit's delta, in commit order. Each delta names the node count it
//    builds on, so a missing or repeated delta is refused, not misapplied.
//  * Images are self-checking (CRC-32C) and self-describing (metric, dim, m),
//    so they can span pages; the engine's page checksums come on top.
//  * A delta is made under the writer's lock in the engine, so "changed since
//    the mark" is exactly what the commit did.
//
// Thread safety: Search(), Contains(), size(), Stats() and the encoders may run
// concurrently with each other. Add(), AddBatch(), MarkDeleted(), Reserve() and
// ApplyDelta() take the index exclusively: a search waits for at most one
// in-flight insert (~1 ms at 384-d) or batch, never sees it half done.
// AddBatch's own threads never share a list (hnsw.cc).
//
// Failure: an exception thrown inside hnswlib is caught and returned as a
// Status. If it leaves the graph inconsistent (only an allocation failure in
// the middle of an insert or a batch's linking can), the index turns read-only-broken: every later
// call returns that error (kInternal), like SQLite's sticky pager error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/status.h"
#include "index/vector/exact_search.h"
#include "index/vector/metric.h"

namespace agentmem::index {

struct HnswOptions {
  Metric metric = Metric::kCosine;
  uint32_t dim = 0;                // required, 1..65536
  uint32_t m = 16;                 // links per node and layer (2m on layer 0), 4..128
  uint32_t ef_construction = 200;  // insertion beam width, 1..65536
  size_t initial_capacity = 1024;  // nodes before the first growth
  size_t default_ef = 64;          // search beam width when a query gives none
};

// One vector of a batch insert (AddBatch). `vector` must stay valid during
// the call.
struct HnswInsert {
  uint64_t label = 0;
  std::span<const float> vector;
};

// Returns true for the labels a search may return.
using LabelFilter = std::function<bool(uint64_t label)>;

struct HnswSearchOptions {
  size_t k = 10;
  // Beam width on layer 0: larger is slower and closer to exact. 0 means the
  // index's default_ef; a value below k is raised to k.
  size_t ef = 0;
  // Optional. Nodes failing it are still walked through but never returned,
  // so a selective filter costs more: with few matches the search visits
  // most of the graph. The planner scans small partitions exactly instead.
  LabelFilter filter;
};

struct HnswStats {
  size_t nodes = 0;         // inserted, including deleted ones
  size_t deleted = 0;       // marked deleted
  size_t capacity = 0;      // nodes that fit before the next growth
  int max_level = -1;       // top layer; -1 when empty
  uint32_t entry_node = UINT32_MAX;  // node where searches start; UINT32_MAX when empty
  size_t memory_bytes = 0;  // graph + vectors as hnswlib holds them (approximate)
};

// A point in the index's change history; see EncodeDelta().
struct ChangeMark {
  uint64_t seq = 0;         // changes made before the mark
  uint32_t node_count = 0;  // nodes that existed at the mark
  bool operator==(const ChangeMark&) const = default;
};

// Reads the vector of node `node` (labelled `label`) of a mapped image
// when it is first needed: where it lies (dim floats, any alignment, kept
// alive as long as the index) with *scale set as HnswIndex::ScaleFor() says, or
// nullptr when it cannot be read. Called from whichever thread first
// needs the vector, possibly from two at once for one node: both must give
// the same floats and scale (the index keeps the first).
using HnswReadVector = std::function<const float*(uint32_t node, uint64_t label, float* scale)>;

// Where the image given to HnswIndex::Map() lies.
enum class HnswImagePlace {
  kMemory,           // memory of this process's own, writable
  kFile,             // a file's pages, read-only, which another program could write
  kFileCopiedAhead,  // the same, copied into memory by the reader thread (read_ahead)
};

// The vectors of a mappable image that leaves them out: node i's at
// rows[i] (any alignment) with scales[i] (as HnswIndex::ScaleFor() says), kept alive
// by `owner` as long as the index uses them. A null row is given by `read`
// when a search or an insert first reaches the node, and, with
// `read_ahead`, by a thread of the index meanwhile, all of them in node
// order (joined when the index goes). A node whose vector cannot be read
// stays a waypoint with a zero vector and is never a hit.
struct HnswMapVectors {
  std::vector<const float*> rows;
  std::vector<float> scales;
  std::shared_ptr<void> owner;
  HnswReadVector read;
  bool read_ahead = true;
};

class HnswIndex {
 public:
  // A vector by its label, for the deltas that leave them out (ApplyDelta):
  // dim floats, or nullptr when there is none.
  using VectorLookup = std::function<const float*(uint64_t label)>;

  // A new empty index. Errors: kRange for options out of range (message names
  // the field). kNoMem when the initial capacity cannot be allocated.
  static Result<std::unique_ptr<HnswIndex>> Create(const HnswOptions& options);

  // An index rebuilt from a full image made by Serialize(). The image is
  // validated completely before anything is built. Errors: kCorruptIndex
  // (message names the record and the check), kFormatVersion, kNoMem.
  // `image` need not outlive the call.
  static Result<std::unique_ptr<HnswIndex>> Deserialize(std::string_view image,
                                                        size_t default_ef = 64);

  ~HnswIndex();
  HnswIndex(const HnswIndex&) = delete;
  HnswIndex& operator=(const HnswIndex&) = delete;

  // Inserts `vector` under `label`. For cosine its distances are those of
  // the vector normalised (a zero vector: distance 1 to everything). Grows
  // the capacity as needed. Errors: kMismatchDimension; kMismatch for NaN or
  // infinity; kConstraint when the label is already present (deleted or not:
  // labels are never reused); kNoMem.
  Status Add(uint64_t label, std::span<const float> vector);

  // Inserts a batch: what Add() of each item does, with `threads` threads
  // sharing the work (0: min(2, hardware threads)). The nodes are numbered in
  // label order whatever the order of `items`, and a node gets the level
  // Add() would give its label. The links differ from those of sequential
  // Add() calls (a batch is linked in rounds of nodes that search the graph
  // as the round found it; hnsw.cc), but they depend only on the batches and
  // their order, never on the number of threads or their timing. Every item
  // is checked before the index changes: errors as Add() (kConstraint also
  // for a label repeated in the batch), the index unchanged. A failure while
  // linking (kNoMem) leaves the index sticky-broken, as Add() does. Searches
  // wait for the whole batch.
  Status AddBatch(std::span<const HnswInsert> items, unsigned threads = 0);

  // Hides `label` from every later search. Its node stays in the graph as a
  // waypoint. Marking a deleted label again is OK. Errors: kNotFound.
  Status MarkDeleted(uint64_t label);

  // Ensures room for `capacity` nodes without further growth. kNoMem.
  Status Reserve(size_t capacity);

#ifdef AGENTMEM_TEST_HOOKS
  // Tests (builds with -Dtest_hooks=true): true makes every index of the
  // process find no memory when it must grow (kNoMem, as when the
  // allocation fails). false restores.
  static void SetGrowFailsForTest(bool on);
  // false makes every later Map() of the process leave its unread vectors
  // to be read on first use only, as without MapVectors::read_ahead. true
  // restores.
  static void SetReadAheadForTest(bool on);
#endif

  // A new index of this one's nodes less those labelled in `removed`, in the
  // same order (node ids close up), each keeping its level, vector, label
  // and deleted flag; nothing of a removed node is copied. A list that held
  // a removed node is refilled from that node's own list on the layer: the
  // neighbour heuristic's choice of the candidates, then the nearest of the
  // rest, up to the layer's maximum. When the entry point goes, the first node of the
  // highest remaining level takes its place. Meant for a few percent of the
  // nodes: each removal costs its in-neighbours a little recall, which a
  // rebuild does not. Errors: kNotFound for a label not in the index, kNoMem.
  Result<std::unique_ptr<HnswIndex>> Without(std::span<const uint64_t> removed) const;

  // The k nearest live labels to `query`, nearest first, by metric.h's
  // distance (ties: smaller label). Fewer than k when the index (or the
  // filter) holds fewer, or when a selective filter exhausts the beam.
  // Errors: kMismatchDimension; kMismatch for NaN or infinity in the query.
  Result<std::vector<Neighbor>> Search(std::span<const float> query,
                                       const HnswSearchOptions& options = {}) const;

  // True when `label` was added and not deleted.
  bool Contains(uint64_t label) const;
  // Nodes in the graph, deleted ones included.
  size_t size() const;
  HnswStats Stats() const;
  const HnswOptions& options() const;
  void set_default_ef(size_t ef);

  // The stored vectors, node by node in insertion order (node n's vector at
  // row n; for cosine, as given or normalised: ScaleFor()), and each node's
  // label; a row Map() left unread is null until ReadVectors() or a search
  // reads it. Valid until the next Add(), Reserve() or ApplyDelta(); the
  // caller must not run those concurrently with reading through them.
  VectorBlock NodeVectors() const;
  // Reads the vectors of `nodes` that Map() left to read on first use
  // (MapVectors::read) and drops from *nodes those that cannot be read:
  // NodeVectors() then holds a vector for each node left.
  // Throws std::bad_alloc when a vector needs copying and no memory is left.
  void ReadVectors(std::vector<uint32_t>* nodes) const;
  // Whether the thread of MapVectors::read_ahead is still at work (reading,
  // or copying for kFileCopiedAhead); once false, what it did is seen here.
  bool ReadingAhead() const;
  uint64_t NodeLabel(uint32_t node) const;
  // Whether a node (below size()) is marked deleted.
  bool NodeDeleted(uint32_t node) const;

  // ---- mappable images (docs/format.md §5.8)
  // A full image laid out so that it can be used where it lies, without a
  // copy: a 64-byte header, each node's level (one byte), the upper-layer
  // lists, then each node's level-0 record (hnswlib's: its links, its vector,
  // its label) at a 64-byte aligned offset. Node labels must increase with
  // the node id (the engine inserts episodes in id order); kMisuse otherwise.
  // `with_vectors` false leaves the vectors out of the records (image version
  // 2): the caller keeps them elsewhere and gives them to Map(). With the
  // vectors, a node of a mapped image whose vector could not be read
  // (MapVectors::read) fails it with kCorruptIndex.
  Status SerializeMappable(std::string* out, bool with_vectors = true) const;
  // The same bytes for a writer that never holds them whole: their size,
  // then emit(piece) in order, in pieces of at most a few hundred KiB. The
  // index must not change in between. Errors: SerializeMappable()'s, and
  // the first error of `emit` (no piece is given after it).
  Result<size_t> MappableSize(bool with_vectors = true) const;
  Status EmitMappable(bool with_vectors,
                      const std::function<Status(std::string_view)>& emit) const;
  // The bytes of the vectors a mappable image leaves out: 0 for an image
  // with vectors. Only the header is read, and checked against
  // `image.size()`. Errors: kCorruptIndex, kFormatVersion.
  static Result<size_t> VectorBytes(std::string_view image);
  // How the graph keeps vector v (dim floats, any alignment) of `metric`:
  // where it lies, with the scale returned (cosine: the inverse of its
  // length; other metrics 1), or, when 0 is returned (a cosine vector
  // shorter than 2^-30 or longer than 2^30, zero among them), as a copy
  // normalised by NormalizeInPlace() with scale 1. Every handle keeps a
  // vector the same way, so that all compute the same distances.
  // Errors: kMismatch when v holds NaN or infinity.
  static Result<float> ScaleFor(Metric metric, const float* v, size_t dim);
  // Copies v into dst (dim floats) as the graph keeps it, given ScaleFor()'s
  // `scale` for it: as it is, or normalised when `scale` is 0. Returns the
  // scale of the copy.
  static float KeepCopy(const float* v, size_t dim, float scale, float* dst);
  // Calls place(node, label) for each node in [first, end) of a mappable
  // image without vectors, in node order; nothing for an image with them.
  // Labels and links are not checked here: Map() checks them. Errors: those
  // of VectorBytes(); kCorruptIndex naming the node for which place()
  // returned false (no usable vector for its label).
  static Status ForEachNodeLabel(std::string_view image, size_t first, size_t end,
                                 const std::function<bool(size_t node, uint64_t label)>& place);
  using ReadVector = HnswReadVector;
  using MapVectors = HnswMapVectors;
  using ImagePlace = HnswImagePlace;
  // An index over a mappable image at `image` (`size` bytes, 4-byte aligned),
  // writable and private to this process, followed by `spare` writable bytes
  // that new nodes may use before the index moves to the heap. `owner` is kept
  // alive as long as the index points into the memory. An image without
  // vectors takes them from `vectors`. Every header field, level and link is
  // checked first; the vectors are taken as they are.
  // Errors: kCorruptIndex (message names the node and the check), kNoMem;
  // kMisuse for an image without vectors and not one row and scale per node
  // in `vectors`.
  // `records_checked`: the caller has put the level-0 records through
  // MappedRecordCheck (hnsw_mapped.h), so they are not read again here.
  // `place` kFile: the image is the file's own pages, read-only (`spare` 0),
  // which another program could write after the checks: searches then read
  // each list's ids once and follow only those that name a node on the
  // layer, and the first change (an insert, a delete, a delta, a Reserve())
  // copies the records into memory and checks every list again there (an
  // error then, kCorruptIndex, leaves the index refusing everything).
  // kFileCopiedAhead: the same, and the thread of `vectors.read_ahead`, once
  // it has read the vectors, makes that copy and check itself, a few
  // thousand nodes under each shared lock, and puts it in place (a copy
  // that fails is dropped: the first change finds it).
  static Result<std::unique_ptr<HnswIndex>> Map(char* image, size_t size, size_t spare,
                                                std::shared_ptr<void> owner,
                                                size_t default_ef = 64,
                                                bool records_checked = false,
                                                MapVectors vectors = {},
                                                ImagePlace place = ImagePlace::kMemory);

  // Appends a full image of the graph to *out (format: hnsw_format.h).
  // Errors: kCorruptIndex for a node whose vector could not be read, as
  // SerializeMappable() with the vectors.
  Status Serialize(std::string* out) const;

  // The current point in the change history.
  ChangeMark Mark() const;
  // Internal node ids (dense, in insertion order) added or changed since
  // `mark`, ascending.
  Result<std::vector<uint32_t>> NodesChangedSince(const ChangeMark& mark) const;
  // Appends to *out an image of the changes since `mark` (hnsw_format.h):
  // applied with ApplyDelta() to a copy of this index as it was at the mark, it
  // yields this index. kMisuse for a mark from the future or another index.
  // `with_vectors` false leaves the new nodes' vectors out of the image
  // (docs/format.md §5.6): ApplyDelta() then needs them from its caller.
  Status EncodeDelta(const ChangeMark& mark, std::string* out, bool with_vectors = true) const;
  // Applies an image made by EncodeDelta() (or a full image, to an empty
  // index). Validated completely first; on error the index is unchanged.
  // Errors: kCorruptIndex (including an image that builds on a different node
  // count), kFormatVersion, kNoMem.
  // An image without vectors takes each new node's vector from `vectors`:
  // the vector given to Add() under that label (dim floats), or nullptr,
  // which fails the image (kCorruptIndex).
  Status ApplyDelta(std::string_view image, const VectorLookup& vectors = {});

 private:
  struct Impl;
  explicit HnswIndex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace agentmem::index

// index/vector/hnsw.cc -- HnswIndex over hnswlib 0.6.2 (see hnsw.h).
//
// The only translation unit of the project that includes <hnswlib/hnswlib.h>:
// the header defines non-inline functions (cpuid, AVX512Capable, ...), so a
// second includer would fail to link. hnswlib's members are all public; this
// file uses them to (a) search with a per-query ef and a filter, (b) grow the
// graph exception-safely, and (c) copy nodes in and out of graph images. Nodes
// are inserted here (AddBatch), not by hnswlib's addPoint, and a node's vector
// is reached through Graph::vectors rather than at a fixed place in its
// record: it can lie in the heap, in the record of a mapped image that holds
// its vectors, or where the caller of Map() found it (a file's page). Vectors
// are kept as given, not normalised: a cosine distance is 1 - <a, b> times
// both scales (KeptScale), and distances are computed here, not by hnswlib's
// callback. What it relies on, from hnswalg.h of 0.6.2:
//   * node i's record: data_level0_memory_ + i * size_data_per_element_ =
//     [u32 header: u16 link count, u8 flags (bit 0 deleted), u8 0]
//     [maxM0_ u32 links][u64 label] (label_offset_ = the links' size), or
//     [maxM0_ u32 links][vector][u64 label] in a mapped image with vectors;
//   * upper layers l >= 1: linkLists_[i] + (l-1) * size_links_per_element_,
//     malloc'd (size_links_per_element_ * level + 1 bytes) iff level > 0;
//   * element_levels_, label_lookup_, cur_element_count, enterpoint_node_,
//     maxlevel_, num_deleted_ describe the rest.
#include "index/vector/hnsw.h"
#include "index/vector/hnsw_mapped.h"

#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <new>
#include <numeric>
#include <queue>
#include <shared_mutex>
#include <thread>

#include <sys/mman.h>

#include "index/vector/distance.h"
#include "index/vector/hnsw_format.h"

namespace agentmem::index {
namespace {

// hnswlib's graph, where each node's vector lies (one pointer per slot of
// capacity: dim floats, any alignment) and its scale (KeptScale()), and the
// kernels the distances use.
struct Unread;
struct Graph : hnswlib::HierarchicalNSW<float> {
  using hnswlib::HierarchicalNSW<float>::HierarchicalNSW;
  std::vector<const float*> vectors;
  std::vector<float> scales;
  const DistanceKernels* kernels = nullptr;
  size_t dim = 0;
  bool l2 = false;
  Unread* unread = nullptr;  // vectors Map() left to read on first use, if any
};

// The vectors of a mapped image that Map() left unread (null in
// Graph::vectors): each is read by `read` the first time a search or an
// insert needs it, on whichever thread that is, and stored under `mu` (a
// pointer is stored once, after its scale, and never changes after). With
// MapVectors::read_ahead, the index's own `reader` thread reads them all
// meanwhile. A node whose vector cannot be read gets `zeros`: a waypoint,
// never a hit.
struct Unread {
  HnswIndex::ReadVector read;
  std::mutex mu;
  std::vector<float> zeros;
  size_t nodes = 0;  // the mapped nodes: the only ones that can be unread
  std::atomic<size_t> unreadable{0};  // nodes given `zeros`
  std::atomic<bool> all_read{false};  // no node is unread any more
  std::thread reader;
  std::atomic<bool> reading{false};  // the reader has not returned
  std::atomic<bool> stop{false};     // the reader leaves the rest: the index goes
};
using hnsw::GraphShape;
using hnsw::kNoNode;

static_assert(sizeof(hnswlib::labeltype) == sizeof(uint64_t), "labels are 64-bit");
static_assert(sizeof(hnswlib::tableint) == sizeof(uint32_t), "node ids are 32-bit");

constexpr size_t kMinCapacity = 16;

#ifdef AGENTMEM_TEST_HOOKS
std::atomic<bool> g_grow_fails{false};
std::atomic<bool> g_read_ahead{true};
#endif

// ---- hnswlib's space: distance.h's kernels in hnswlib's callback shape ----
//
// hnswlib's own searches and inserts, which would call these, are not used
// (DistanceTo below is); a graph needs a space all the same.

// Handed back to the callback by hnswlib. `dim` comes first: hnswlib's
// getDataByLabel reads the parameter as a size_t*.
struct KernelParam {
  size_t dim;
  const DistanceKernels* kernels;
};

float L2Callback(const void* a, const void* b, const void* param) {
  auto* p = static_cast<const KernelParam*>(param);
  return p->kernels->l2_sqr(static_cast<const float*>(a), static_cast<const float*>(b), p->dim);
}

// Inner product, and cosine once both sides are normalised: 1 - <a, b>.
float IpCallback(const void* a, const void* b, const void* param) {
  auto* p = static_cast<const KernelParam*>(param);
  return 1.0f - p->kernels->dot(static_cast<const float*>(a), static_cast<const float*>(b), p->dim);
}

// hnswlib's "space": the vector size and the distance callback. It must
// outlive the graph, which keeps a pointer to its parameter.
class KernelSpace final : public hnswlib::SpaceInterface<float> {
 public:
  KernelSpace(Metric metric, size_t dim)
      : param_{dim, &ActiveKernels()}, fn_(metric == Metric::kL2 ? &L2Callback : &IpCallback) {}
  size_t get_data_size() override { return param_.dim * sizeof(float); }
  hnswlib::DISTFUNC<float> get_dist_func() override { return fn_; }
  void* get_dist_func_param() override { return &param_; }
  const DistanceKernels* kernels() const { return param_.kernels; }

 private:
  KernelParam param_;
  hnswlib::DISTFUNC<float> fn_;
};

// ---- graph access ----

// A node's list on a layer: never more ids than the layer holds, so that
// the span stays inside the node's list even when its count was written by
// another program (a graph whose records lie in the file: Map()'s in_file).
std::span<const uint32_t> Links(const Graph& g, uint32_t node, int layer) {
  hnswlib::linklistsizeint* list = g.get_linklist_at_level(node, layer);
  const size_t count = __atomic_load_n(reinterpret_cast<const uint16_t*>(list), __ATOMIC_RELAXED);
  const size_t capacity = layer == 0 ? g.maxM0_ : g.maxM_;
  return {reinterpret_cast<const uint32_t*>(list + 1), std::min(count, capacity)};
}

// Whether `to`, read from a list on `layer`, names a node on that layer.
bool OnLayer(const Graph& g, uint32_t to, int layer) {
  return to < g.cur_element_count && (layer == 0 || g.element_levels_[to] >= layer);
}

// Node's vector as stored: null while Map() left it unread.
const float* StoredVector(const Graph& g, uint32_t node) {
  return __atomic_load_n(&g.vectors[node], __ATOMIC_ACQUIRE);
}
// The same for a prefetch, which reads nothing through it.
const float* VectorToPrefetch(const Graph& g, uint32_t node) {
  return __atomic_load_n(&g.vectors[node], __ATOMIC_RELAXED);
}

// Reads and stores an unread node's vector (Unread).
__attribute__((noinline)) const float* ReadUnread(const Graph& g, uint32_t node) {
  Unread* u = g.unread;
  if (u == nullptr || node >= u->nodes) return nullptr;
  float scale = 1.0f;
  const float* v = u->read(node, g.getExternalLabel(node), &scale);
  std::lock_guard lock(u->mu);
  Graph& w = const_cast<Graph&>(g);  // the slots Map() left null are written here only
  if (const float* first = __atomic_load_n(&w.vectors[node], __ATOMIC_RELAXED)) return first;
  if (v == nullptr) {
    v = u->zeros.data();
    scale = 1.0f;
    u->unreadable.fetch_add(1, std::memory_order_relaxed);  // before the store below
  }
  w.scales[node] = scale;
  __atomic_store_n(&w.vectors[node], v, __ATOMIC_RELEASE);
  return v;
}

__attribute__((always_inline)) inline const float* VectorOf(const Graph& g, uint32_t node) {
  const float* v = StoredVector(g, node);
  return __builtin_expect(v != nullptr, 1) ? v : ReadUnread(g, node);
}

// Whether node's vector could not be read (Unread): it is never a hit.
bool Unreadable(const Graph& g, uint32_t node) {
  return g.unread != nullptr && g.unread->unreadable.load(std::memory_order_relaxed) != 0 &&
         VectorOf(g, node) == g.unread->zeros.data();
}

// Whether no node is left unread and none could not be read: every node
// that is not deleted is then a hit.
bool EveryVectorRead(const Graph& g) {
  return g.unread == nullptr || (g.unread->all_read.load(std::memory_order_acquire) &&
                                 g.unread->unreadable.load(std::memory_order_relaxed) == 0);
}

// An image that carries vectors cannot hold a node whose vector could not be
// read: its zero vector would be written as if it were the node's own.
Status CheckVectorsReadable(const Graph& g) {
  if (g.unread == nullptr) return Status::OK();
  for (uint32_t node = 0; node < g.unread->nodes; ++node) {
    if (VectorOf(g, node) == g.unread->zeros.data()) {  // reads it if unread
      return StatusF(kCorruptIndex, "hnsw: node %u (label %llu): its vector could not be read", node,
                     static_cast<unsigned long long>(g.getExternalLabel(node)));
    }
  }
  return Status::OK();
}

// The lengths of a cosine vector that the graph keeps as it is, with the
// inverse of its length as its scale: within them the product of two such
// vectors' components neither overflows nor vanishes. Others (a zero
// vector among them) it keeps normalised, with scale 1.
constexpr double kMinKeptNorm = 0x1p-30, kMaxKeptNorm = 0x1p30;

// The scale the graph gives a vector of length `norm` that it keeps as it is,
// or 0 when it keeps the vector normalised. Cosine distances are then
// 1 - <a, b> * scale(a) * scale(b) whichever handle computes them; other
// metrics' scales are 1.
float KeptScale(Metric metric, double norm) {
  if (metric != Metric::kCosine) return 1.0f;
  if (!(norm >= kMinKeptNorm && norm <= kMaxKeptNorm)) return 0.0f;
  return static_cast<float>(1.0 / norm);
}

// Copies finite vector v into dst as the graph keeps it; returns its scale.
float Keep(Metric metric, const float* v, size_t dim, float* dst) {
  return HnswIndex::KeepCopy(v, dim, KeptScale(metric, Norm(v, dim)), dst);
}

// What a walk measures distances from: a vector (any alignment) and its
// scale; a query's is 1 (normalised first for cosine).
struct Query {
  const float* v;
  float scale;
};

Query NodeQuery(const Graph& g, uint32_t node) {
  const float* v = VectorOf(g, node);
  return {v, g.scales[node]};
}

__attribute__((always_inline)) inline float DistanceTo(const Graph& g, const Query& q, uint32_t node) {
  const float* v = VectorOf(g, node);
  if (g.l2) return g.kernels->l2_sqr(q.v, v, g.dim);
  return 1.0f - g.kernels->dot(q.v, v, g.dim) * (q.scale * g.scales[node]);
}

// The node holding `label`. Nodes inserted or applied in this process are in
// hnswlib's label map; the first `mapped` nodes of a mapped image are not
// (building the map would touch memory for every node on open), but their
// labels increase with the node id, so a binary search over the records finds
// them.
bool FindNode(const Graph& g, size_t mapped, uint64_t label, uint32_t* node) {
  if (auto it = g.label_lookup_.find(label); it != g.label_lookup_.end()) {
    *node = it->second;
    return true;
  }
  size_t lo = 0, hi = mapped;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint64_t l = g.getExternalLabel(static_cast<uint32_t>(mid));
    if (l == label) {
      *node = static_cast<uint32_t>(mid);
      return true;
    }
    if (l < label) lo = mid + 1; else hi = mid;
  }
  return false;
}

// hnsw_format's view of an hnswlib graph.
class GraphView final : public hnsw::GraphSource {
 public:
  GraphView(const Graph& g, const GraphShape& shape, size_t mapped)
      : g_(g), shape_(shape), mapped_(mapped) {}
  GraphShape shape() const override { return shape_; }
  uint32_t node_count() const override { return static_cast<uint32_t>(g_.cur_element_count); }
  uint32_t entry_point() const override { return empty() ? kNoNode : g_.enterpoint_node_; }
  int max_level() const override { return empty() ? -1 : g_.maxlevel_; }
  uint64_t label(uint32_t node) const override { return g_.getExternalLabel(node); }
  int level(uint32_t node) const override { return g_.element_levels_[node]; }
  bool deleted(uint32_t node) const override { return g_.isMarkedDeleted(node); }
  const float* vector(uint32_t node) const override { return VectorOf(g_, node); }
  std::span<const uint32_t> links(uint32_t node, int layer) const override {
    return Links(g_, node, layer);
  }
  bool HasLabel(uint64_t label) const override {
    uint32_t node;
    return FindNode(g_, mapped_, label, &node);
  }

 private:
  bool empty() const { return g_.cur_element_count == 0; }
  const Graph& g_;
  GraphShape shape_;
  size_t mapped_;
};

// ---- search ----

struct Candidate {
  float distance;
  uint32_t node;
};
struct FartherOnTop {
  bool operator()(const Candidate& a, const Candidate& b) const { return a.distance < b.distance; }
};
struct NearerOnTop {
  bool operator()(const Candidate& a, const Candidate& b) const { return a.distance > b.distance; }
};

// A visited set from hnswlib's pool, returned on scope exit.
class VisitedSet {
 public:
  explicit VisitedSet(hnswlib::VisitedListPool* pool)
      : pool_(pool), list_(pool->getFreeVisitedList()) {}
  // Giving the list back can allocate (a deque node): when that fails the
  // list is freed instead (a destructor must not throw).
  ~VisitedSet() {
    try {
      pool_->releaseVisitedList(list_);
    } catch (...) {
      delete list_;
    }
  }
  VisitedSet(const VisitedSet&) = delete;
  VisitedSet& operator=(const VisitedSet&) = delete;
  // Marks the node; true when it was marked already.
  bool TestAndSet(uint32_t node) {
    if (list_->mass[node] == list_->curV) return true;
    list_->mass[node] = list_->curV;
    return false;
  }

 private:
  hnswlib::VisitedListPool* pool_;
  hnswlib::VisitedList* list_;
};

// How the walks below read a node's list on a layer: in place. A search
// holds the shared lock, so no insert changes a list meanwhile; a batch
// insert's threads plan against lists that no thread changes during that
// step (the batch insert, below).
struct DirectLists {
  const Graph& g;
  std::span<const uint32_t> operator()(uint32_t node, int layer) const {
    return Links(g, node, layer);
  }
};

// The same for a graph whose records lie in the file (Map()'s in_file):
// Map() checked every list, but another program could write the file after,
// so each id is read once, into a copy, and kept only when it names a node
// on the layer. The span is valid until the next call.
struct FileLists {
  const Graph& g;
  std::array<uint32_t, 2 * hnsw::kMaxM> ids;
  std::span<const uint32_t> operator()(uint32_t node, int layer) {
    std::span<const uint32_t> in = Links(g, node, layer);
    size_t kept = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const uint32_t to = __atomic_load_n(&in[i], __ATOMIC_RELAXED);
      if (OnLayer(g, to, layer)) ids[kept++] = to;
    }
    return {ids.data(), kept};
  }
};

// Greedy descent from `at` through layers top..bottom+1 to the node nearest
// the query on layer bottom + 1.
template <class Lists>
Candidate Descend(const Graph& g, const Query& query, Candidate at, int top, int bottom,
                  Lists& lists) {
  for (int layer = top; layer > bottom; --layer) {
    for (bool moved = true; moved;) {
      moved = false;
      for (uint32_t n : lists(at.node, layer)) {
        float d = DistanceTo(g, query, n);
        if (d < at.distance) {
          at = {d, n};
          moved = true;
        }
      }
    }
  }
  return at;
}

// Asks for a node's whole vector to be brought into the cache.
// A vector not read yet is not asked for.
void PrefetchVector(const Graph& g, uint32_t node) {
  const char* v = reinterpret_cast<const char*>(VectorToPrefetch(g, node));
  if (v == nullptr) return;
  for (size_t at = 0; at < g.data_size_; at += 64) __builtin_prefetch(v + at);
}

// Best-first beam search on one layer (the algorithm of hnswlib's
// searchBaseLayerST, with ef per call and an acceptance test). Nodes that fail
// `accept` are expanded but never returned. Returns up to ef accepted nodes.
template <class Lists, class Accept>
std::vector<Candidate> SearchLayer(const Graph& g, const Query& query, Candidate entry, size_t ef,
                                   int layer, Lists& lists, const Accept& accept) {
  VisitedSet visited(g.visited_list_pool_);
  std::priority_queue<Candidate, std::vector<Candidate>, FartherOnTop> best;
  std::priority_queue<Candidate, std::vector<Candidate>, NearerOnTop> frontier;
  float bound = std::numeric_limits<float>::infinity();
  std::vector<uint32_t> fresh;
  visited.TestAndSet(entry.node);
  frontier.push(entry);
  if (accept(entry.node)) {
    best.push(entry);
    bound = entry.distance;
  }
  while (!frontier.empty()) {
    const Candidate current = frontier.top();
    if (current.distance > bound && best.size() >= ef) break;
    frontier.pop();
    std::span<const uint32_t> links = lists(current.node, layer);
    // The nodes not met before, in list order, each vector's start fetched
    // ahead: the distances below then wait less on memory.
    fresh.clear();
    for (uint32_t n : links) {
      if (visited.TestAndSet(n)) continue;
      fresh.push_back(n);
      __builtin_prefetch(VectorToPrefetch(g, n));
    }
    for (size_t i = 0; i < fresh.size(); ++i) {
      if (i + 1 < fresh.size()) PrefetchVector(g, fresh[i + 1]);
      const uint32_t n = fresh[i];
      const float d = DistanceTo(g, query, n);
      if (best.size() >= ef && d >= bound) continue;
      frontier.push({d, n});
      if (!accept(n)) continue;
      best.push({d, n});
      if (best.size() > ef) best.pop();
      bound = best.top().distance;
    }
  }
  std::vector<Candidate> out;
  out.reserve(best.size());
  for (; !best.empty(); best.pop()) out.push_back(best.top());
  return out;
}

// ---- levels ----

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Seeds hnswlib's level generator from the label, so that a node's level
// depends on its label only (not on what was inserted before it), and never
// exceeds hnsw::kMaxLevel, which the image format allows.
void SeedLevelGenerator(Graph* g, uint64_t label) {
  for (uint64_t salt = 0;; ++salt) {
    const auto seed =
        static_cast<std::default_random_engine::result_type>(Mix64(label ^ (salt << 56)));
    g->level_generator_.seed(seed);
    const int level = g->getRandomLevel(g->mult_);
    g->level_generator_.seed(seed);
    if (level >= 0 && level <= hnsw::kMaxLevel) return;
  }
}

// The level of the node labelled `label`.
int LevelOf(Graph* g, uint64_t label) {
  SeedLevelGenerator(g, label);
  return g->getRandomLevel(g->mult_);
}

// ---- link-list slack ----

// hnswlib 0.6.2's searches read one id past the end of a link list
// (hnswalg.h, searchBaseLayer: *(datal + j + 1)), so on a node's full top
// layer up to 3 bytes past the block of its upper-layer lists. Every such
// block gets spare zero bytes, so that no code reading lists hnswlib's way
// overflows it (ASan would report it).
constexpr size_t kListSlack = 4;

size_t UpperBlockBytes(const Graph& g, int level) {
  return g.size_links_per_element_ * static_cast<size_t>(level) + 1;
}

char* NewUpperBlock(const Graph& g, int level) {
  return static_cast<char*>(std::calloc(1, UpperBlockBytes(g, level) + kListSlack));
}

// ---- exceptions ----

Status FromException(const char* what) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return StatusF(kNoMem, "hnsw: out of memory in %s", what);
  } catch (const std::exception& e) {
    // hnswlib reports a failed malloc as runtime_error("Not enough memory...").
    if (std::strstr(e.what(), "Not enough memory") != nullptr) {
      return StatusF(kNoMem, "hnsw: out of memory in %s (%s)", what, e.what());
    }
    return StatusF(kInternal, "hnsw: %s failed in hnswlib: %s", what, e.what());
  } catch (...) {
    return StatusF(kInternal, "hnsw: %s failed with an unknown exception", what);
  }
}

// Runs f, turning any exception into a Status. Not noexcept: when memory is
// still short the Status itself cannot be built, and that std::bad_alloc goes
// to the caller (the C API's Guard turns it into AGENTMEM_NOMEM).
template <class F>
Status Guarded(const char* what, F&& f) {
  try {
    return f();
  } catch (...) {
    return FromException(what);
  }
}

// A reader-writer lock on which a waiting writer holds off new readers.
// std::shared_mutex is glibc's rwlock, which prefers readers: under a steady
// stream of searches an insert would wait forever. Here every acquisition
// passes a gate; a writer keeps the gate while it waits for the readers
// inside to leave, so readers that come later queue behind it.
class GatedSharedMutex {
 public:
  void lock() {
    std::lock_guard gate(gate_);
    mu_.lock();
  }
  void unlock() { mu_.unlock(); }
  void lock_shared() {
    std::lock_guard gate(gate_);
    mu_.lock_shared();
  }
  void unlock_shared() { mu_.unlock_shared(); }

 private:
  std::mutex gate_;
  std::shared_mutex mu_;
};

// ---- memory in 2 MiB pages ----
//
// An insert's walks read the links and vectors of nodes all over the graph;
// in 4 KiB pages most of those reads miss the TLB. The graph's level-0
// records and the arena's large blocks ask the system for 2 MiB pages, as an
// open's copies of them do (docs/bench.md measures what it saves a build).

constexpr size_t kHugePage = size_t{2} << 20;

// Asks that the whole 4 KiB pages of [p, p + n) be backed by 2 MiB pages
// where they can. Only advice: nothing fails.
void AdviseHugePages(void* p, size_t n) {
#ifdef MADV_HUGEPAGE
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + 4095) & ~uintptr_t{4095};
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) & ~uintptr_t{4095};
  if (hi >= lo + kHugePage) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)p;
  (void)n;
#endif
}

// A block of floats from operator new (so that a test's counting allocator
// sees it), aligned to a cache line, or from 2 MiB on to 2 MiB and in 2 MiB
// pages.
struct FloatsDeleter {
  std::align_val_t align;
  void operator()(float* p) const { ::operator delete[](p, align); }
};
using Floats = std::unique_ptr<float[], FloatsDeleter>;

Floats NewFloats(size_t n) {
  const size_t bytes = n * sizeof(float);
  const std::align_val_t align{bytes >= kHugePage ? kHugePage : 64};
  Floats block(static_cast<float*>(::operator new[](bytes, align, std::nothrow)), FloatsDeleter{align});
  if (block && bytes >= kHugePage) AdviseHugePages(block.get(), bytes);
  return block;
}

// The vectors of the nodes inserted or applied in this process, in blocks
// that never move: a node's pointer stays good as the graph grows. Each new
// block holds as many vectors as all before it (at least 64).
class VectorArena {
 public:
  explicit VectorArena(size_t dim) : dim_(dim) {}
  // Makes room for n more vectors now; false when there is no memory (the
  // arena is then as it was).
  bool Reserve(size_t n) {
    size_t room = 0;
    for (size_t b = current_; b < blocks_.size(); ++b) room += rows_[b] - (b == current_ ? used_ : 0);
    if (room >= n) return true;
    const size_t rows = std::max({n - room, total_rows_, size_t{64}});
    Floats block = NewFloats(rows * dim_);
    if (!block) return false;
    try {
      blocks_.reserve(blocks_.size() + 1);
      rows_.reserve(rows_.size() + 1);
    } catch (const std::bad_alloc&) {
      return false;
    }
    blocks_.push_back(std::move(block));
    rows_.push_back(rows);
    total_rows_ += rows;
    return true;
  }
  // Room for the next vector. REQUIRES: reserved.
  float* Take() {
    while (used_ == rows_[current_]) {
      ++current_;
      used_ = 0;
    }
    return blocks_[current_].get() + used_++ * dim_;
  }
  size_t bytes() const { return total_rows_ * dim_ * sizeof(float); }

 private:
  size_t dim_;
  std::vector<Floats> blocks_;
  std::vector<size_t> rows_;  // each block's vectors
  size_t total_rows_ = 0;
  size_t current_ = 0, used_ = 0;  // the block being filled, and its rows taken
};

// Makes room in hnswlib's label map for `labels` labels. Only ever grows it:
// unordered_map::reserve rehashes a map that has more buckets than it needs
// into fewer (libstdc++), a pass over every label, which an insert of one
// node would pay each time.
void ReserveLabels(Graph* g, size_t labels) {
  auto& map = g->label_lookup_;
  if (static_cast<float>(labels) > static_cast<float>(map.bucket_count()) * map.max_load_factor()) {
    map.reserve(labels);
  }
}

// Frees malloc'd blocks unless released.
struct MallocBlocks {
  std::vector<char*> blocks;
  ~MallocBlocks() {
    for (char* b : blocks) std::free(b);
  }
};

// ---- batch insert: linking nodes on several threads ----
//
// AddBatch first gives every new node, on one thread and in label order, its
// id, level, vector, label and empty lists. Then it links them in rounds of
// kBatchRound nodes, each round in three steps:
//  1. plan, in parallel: for each node of the round, the HNSW insert's search
//     (greedy descent, a beam search with ef_construction on each of its
//     layers) in the graph as it was when the round began, which nobody
//     changes meanwhile, plus the exact distances to the round's earlier
//     nodes; then hnswlib's neighbour heuristic chooses up to m of these per
//     layer;
//  2. on one thread, in id order: write each node's lists and move the entry
//     point up to a node above the top level;
//  3. in parallel by target node: add each round node to the lists of the
//     neighbours it chose, in id order (a full list is pruned by the
//     heuristic). One thread owns all changes to one target's lists.
// No step shares a list between threads, so no locks are taken, and the
// graph depends only on the batches and their order: the same whatever the
// number of threads or their timing (the file's bytes stay reproducible).
// hnswlib's addPoint is not used: it numbers nodes in arrival order. A single
// insert (Add) is a batch of one.
// Step 3 notes every list it writes; those notes become the change marks, so
// a delta holds exactly the changed lists.

constexpr size_t kBatchRound = 128;
// Step 3 takes a second thread from this many target nodes on: one node's
// insert links back to a few dozen, which take less time than a thread start.
constexpr size_t kLinkBackTargetsPerThread = 128;

void SortNearestFirst(std::vector<Candidate>* c) {
  std::sort(c->begin(), c->end(), [](const Candidate& a, const Candidate& b) {
    return a.distance < b.distance || (a.distance == b.distance && a.node < b.node);
  });
}

// The HNSW neighbour heuristic (Malkov & Yashunin, algorithm 4, without
// refilling): going through `c` (distances to the base, nearest first), keeps
// a candidate when no kept one is nearer to it than the base is, up to m.
void SelectNeighbors(const Graph& g, std::vector<Candidate>* c, size_t m) {
  if (c->size() <= m) return;
  size_t kept = 0;
  for (size_t i = 0; i < c->size() && kept < m; ++i) {
    const Candidate x = (*c)[i];
    const Query xv = NodeQuery(g, x.node);
    bool good = true;
    for (size_t j = 0; j < kept && good; ++j) {
      good = DistanceTo(g, xv, (*c)[j].node) >= x.distance;
    }
    if (good) (*c)[kept++] = x;
  }
  c->resize(kept);
}

// Step 1 for `node`: its chosen neighbours, per layer. The graph as the round
// found it has entry point `entry` and top level `top` (-1: empty); the
// round's earlier nodes are [round_first, node).
void PlanLinks(const Graph& g, uint32_t node, uint32_t round_first, uint32_t entry, int top,
               std::vector<std::vector<uint32_t>>* plan) {
  const int level = g.element_levels_[node];
  const Query q = NodeQuery(g, node);
  plan->assign(static_cast<size_t>(level) + 1, {});
  DirectLists lists{g};
  Candidate at{0, entry};
  if (top >= 0) at = Descend(g, q, {DistanceTo(g, q, entry), entry}, top, level, lists);
  auto live = [&](uint32_t n) { return !g.isMarkedDeleted(n) && !Unreadable(g, n); };
  const bool all_live = g.num_deleted_ == 0 && (g.unread == nullptr || g.unread->unreadable.load() == 0);
  std::vector<Candidate> c;
  for (int layer = level; layer >= 0; --layer) {
    c.clear();
    if (layer <= top) {
      // Without deleted or unreadable nodes every node is live: no need to
      // read each met node's flags (a cache line the search does not
      // otherwise need).
      c = all_live
              ? SearchLayer(g, q, at, g.ef_construction_, layer, lists, [](uint32_t) { return true; })
              : SearchLayer(g, q, at, g.ef_construction_, layer, lists, live);
      // Every node met is deleted: link to the entry all the same, which
      // keeps the node reachable (deleted nodes stay as waypoints).
      if (c.empty()) c.push_back(at);
      SortNearestFirst(&c);
      at = c.front();  // where the next layer's search starts
    }
    const size_t searched = c.size();  // sorted already when layer <= top
    for (uint32_t j = round_first; j < node; ++j) {
      if (g.element_levels_[j] >= layer) c.push_back({DistanceTo(g, q, j), j});
    }
    if (layer > top || c.size() > searched) SortNearestFirst(&c);
    SelectNeighbors(g, &c, g.M_);
    for (const Candidate& n : c) (*plan)[layer].push_back(n.node);
  }
}

// REQUIRES: no other thread reads or writes the node's list on `layer`.
void WriteList(Graph* g, uint32_t node, int layer, const std::vector<Candidate>& c) {
  hnswlib::linklistsizeint* list = g->get_linklist_at_level(node, layer);
  uint32_t* ids = reinterpret_cast<uint32_t*>(list + 1);
  for (size_t i = 0; i < c.size(); ++i) ids[i] = c[i].node;
  g->setListCount(list, static_cast<unsigned short>(c.size()));
}

// Step 3: adds `node` to the list of `to` on `layer`; a full list is pruned
// by the heuristic among its nodes and the new one. Returns true when the
// list changed.
bool LinkBack(Graph* g, uint32_t to, uint32_t node, int layer, std::vector<Candidate>* scratch) {
  std::span<const uint32_t> had = Links(*g, to, layer);
  if (std::find(had.begin(), had.end(), node) != had.end()) return false;
  const size_t capacity = layer == 0 ? g->maxM0_ : g->maxM_;
  if (had.size() < capacity) {
    hnswlib::linklistsizeint* list = g->get_linklist_at_level(to, layer);
    reinterpret_cast<uint32_t*>(list + 1)[had.size()] = node;
    g->setListCount(list, static_cast<unsigned short>(had.size() + 1));
    return true;
  }
  const Query base = NodeQuery(*g, to);
  scratch->clear();
  scratch->push_back({DistanceTo(*g, base, node), node});
  for (uint32_t n : had) scratch->push_back({DistanceTo(*g, base, n), n});
  SortNearestFirst(scratch);
  SelectNeighbors(*g, scratch, capacity);
  WriteList(g, to, layer, *scratch);
  return true;
}

// Runs body(i, worker) for every i in [0, n) on up to `threads` threads, this
// one included (worker 0), and on one more thread only for every `per_thread`
// items: starting a thread costs tens of microseconds, more than a few cheap
// items. Stops early at an exception and returns the first.
template <class Body>
std::exception_ptr ParallelFor(size_t n, unsigned threads, size_t per_thread, const Body& body) {
  threads = static_cast<unsigned>(std::clamp<size_t>(n / per_thread, 1, threads));
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::vector<std::exception_ptr> errors(threads);
  auto work = [&](unsigned w) {
    try {
      for (size_t i; !stop.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) {
        body(i, w);
      }
    } catch (...) {
      errors[w] = std::current_exception();
      stop.store(true);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned t = 1; t < threads && t < n; ++t) {
    try {
      pool.emplace_back(work, t);
    } catch (...) {
      break;  // no thread to be had: fewer threads do the work
    }
  }
  work(0);
  for (std::thread& t : pool) t.join();
  for (std::exception_ptr& e : errors) {
    if (e) return e;
  }
  return nullptr;
}

// Asked once: std::thread::hardware_concurrency reads a file under /sys on
// every call.
unsigned DefaultInsertThreads() {
  static const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 2u);
  return threads;
}

}  // namespace

// ---- the index ----

struct HnswIndex::Impl {
  Impl(const HnswOptions& o, const GraphShape& s)
      : options(o), shape(s), space(s.metric, s.dim), default_ef(o.default_ef), arena(s.dim) {}

  Status Add(uint64_t label, std::span<const float> vector);
  Status AddBatch(std::span<const HnswInsert> items, unsigned threads);
  Status MarkDeleted(uint64_t label);
  Status Grow(size_t capacity);
  size_t RoomFor(size_t nodes) const;
  // Room for `nodes` nodes: a graph in the file copied out with it, then
  // grown to RoomFor(nodes).
  Status GrowFor(size_t nodes);
  Result<std::vector<Neighbor>> Search(std::span<const float> query,
                                       const HnswSearchOptions& o) const;
  std::vector<Candidate> SearchGraph(const float* query, size_t ef,
                                     const LabelFilter& filter) const;
  template <class Lists>
  std::vector<Candidate> SearchGraphWith(const float* query, size_t ef, const LabelFilter& filter,
                                         Lists& lists) const;
  // A graph in the file (in_file): its copy out of it.
  struct FileCopy {
    std::vector<uint8_t> levels;  // of the mapped nodes
    char* level0 = nullptr;       // room for `room` records (malloc)
    size_t room = 0;              // max_elements_ or more
    size_t level0_bytes = 0;
    std::unique_ptr<uint32_t[]> upper;  // the upper-layer lists, node after node
    char* upper_next = nullptr;         // where the next node's go
    ~FileCopy() { std::free(level0); }
  };
  // Room for the copy, its level-0 records for `capacity` nodes or
  // max_elements_, whichever is more. REQUIRES: a lock, in_file. Errors: kNoMem.
  Status StartCopy(FileCopy* c, size_t capacity) const;
  // Copies nodes [from, to), in order after those copied before. REQUIRES:
  // a lock, in_file.
  void CopyNodes(FileCopy* c, size_t from, size_t to) const;
  // Every list of the copy within its layer's capacity and naming mapped
  // nodes on the layer; kCorruptIndex naming the node otherwise.
  Status CheckCopy(const FileCopy& c) const;
  // The graph reads the copy from now on. REQUIRES: exclusive lock, in_file.
  void UseCopy(FileCopy* c);
  // Copies, checks and uses the copy, before a change; a check that fails
  // makes the index refuse everything (sticky). REQUIRES: exclusive lock.
  // `capacity`: the nodes the copy's level-0 records have room for, when
  // more than max_elements_ (Grow's).
  Status Privatize(size_t capacity = 0);
  void CopyAhead();
  Status Apply(const hnsw::ParsedImage& image);
  void InstallRecord(const hnsw::NodeRecordView& r, char** upper_block);
  void WriteLinks(const hnsw::NodeRecordView& r);
  void SetDeleted(uint32_t node, bool deleted);
  std::vector<uint32_t> ChangedSince(const ChangeMark& mark) const;
  Status CheckMark(const ChangeMark& mark) const;
  Status CheckVector(std::span<const float> v, const char* what) const;
  GraphView View() const { return GraphView(*graph, shape, mapped); }
  void ReadUnreadVectors();
  Status ReadAllUnread();
  // Starts change seq + 1. The change log is emptied first when it has
  // grown past twice the graph, so that it stays proportional to the graph.
  void BeginChange() {
    if (change_log.size() > std::max<size_t>(kMinChangeLog, 2 * graph->cur_element_count)) {
      change_log.clear();
      log_from = seq;
    }
    ++seq;
  }
  void NoteChange(uint32_t node) {
    if (node_seq.size() <= node) node_seq.resize(size_t{node} + 1);
    node_seq[node] = seq;
    LogChange(node);
  }
  // No memory for the entry: the log gives up the changes up to this one
  // (ChangedSince then goes through every node for an older mark).
  void LogChange(uint32_t node) noexcept {
    if (log_from == seq) return;
    try {
      change_log.push_back({seq, node});
    } catch (...) {
      change_log.clear();
      log_from = seq;
    }
  }
  ~Impl();

  const HnswOptions options;
  const GraphShape shape;
  KernelSpace space;  // before graph: the graph points into it
  std::unique_ptr<Graph> graph;
  std::atomic<size_t> default_ef;

  mutable GatedSharedMutex mu;
  // Guarded by mu (written under the exclusive lock only):
  std::vector<uint64_t> node_seq;  // seq of each node's last change (missing: 0)
  uint64_t seq = 0;                // changes so far
  // Every NoteChange of the changes after log_from, in order (a node may
  // appear more than once): a delta's nodes without a pass over the graph.
  struct LoggedChange {
    uint64_t seq;
    uint32_t node;
  };
  static constexpr size_t kMinChangeLog = 4096;
  std::vector<LoggedChange> change_log;
  uint64_t log_from = 0;
  Status sticky;                   // set when a failure left the graph inconsistent
  VectorArena arena;               // the vectors not in a mapped image

  // A mapped image (Map()): its first `mapped` nodes live in `region` -- their
  // level-0 records (while level0_mapped) and their upper-layer lists -- which
  // the graph must not free.
  std::shared_ptr<void> region;
  std::shared_ptr<void> vectors_owner;  // where the mapped nodes' vectors lie, if not in region
  std::unique_ptr<Unread> unread;       // those of them read on first use
  size_t mapped = 0;
  bool level0_mapped = false;
  size_t level0_room = 0;  // the records data_level0_memory_ has room for, if malloc'd here
  // The region is the file's own pages, read-only (Map()'s place): until
  // Privatize() or CopyAhead(), searches read lists through FileLists and
  // nothing writes.
  bool in_file = false;
  bool copy_ahead = false;  // the reader thread copies it after the vectors
  // The mapped nodes' upper-layer lists when they do not start 4-byte
  // aligned in the image (they follow one level byte per node): a copy
  // that is, so that no link is read from a misaligned address.
  std::unique_ptr<uint32_t[]> upper_lists;
};

HnswIndex::Impl::~Impl() {
  if (unread && unread->reader.joinable()) {
    unread->stop.store(true);
    unread->reader.join();
  }
  if (!graph) return;
  Graph& g = *graph;
  for (size_t i = 0; i < mapped; ++i) {
    if (g.element_levels_[i] > 0) g.linkLists_[i] = nullptr;
  }
  if (level0_mapped) g.data_level0_memory_ = nullptr;
}

// The reader thread (Unread): every unread vector in node order, a few
// dozen under each shared lock, so that an insert or a growth (and the
// searches queued behind it) wait for one such run at most: a few page
// faults when the file is not in the page cache. A read that throws (no memory) ends the thread: the
// rest are read when first needed.
void HnswIndex::Impl::ReadUnreadVectors() {
  constexpr size_t kRun = 32;
  try {
    size_t from = 0;
    for (; from < unread->nodes && !unread->stop.load(std::memory_order_relaxed); from += kRun) {
      std::shared_lock lock(mu);
      const Graph& g = *graph;
      for (size_t i = from; i < std::min(unread->nodes, from + kRun); ++i) VectorOf(g, static_cast<uint32_t>(i));
    }
    if (from >= unread->nodes) unread->all_read.store(true);
    if (copy_ahead) CopyAhead();
  } catch (...) {
  }
  unread->reading.store(false);
}

// Every vector still unread, before an insert links (its searches read
// them, and a failure there would leave the graph half linked). REQUIRES:
// the exclusive lock.
Status HnswIndex::Impl::ReadAllUnread() {
  if (unread == nullptr || unread->all_read.load()) return Status::OK();
  try {
    for (size_t i = 0; i < unread->nodes; ++i) VectorOf(*graph, static_cast<uint32_t>(i));
  } catch (const std::bad_alloc&) {
    return Status(kNoMem, "hnsw: no memory to read the mapped graph's vectors");
  }
  unread->all_read.store(true);
  return Status::OK();
}

Status HnswIndex::Impl::CheckVector(std::span<const float> v, const char* what) const {
  if (v.size() != shape.dim) {
    return StatusF(kMismatchDimension, "hnsw: %s has dimension %zu, the index has %u", what,
                   v.size(), shape.dim);
  }
  if (!AllFinite(v.data(), v.size())) {
    return StatusF(kMismatch, "hnsw: %s holds NaN or infinity", what);
  }
  return Status::OK();
}

// ---- a graph in the file (Map()'s place kFile, kFileCopiedAhead) ----
//
// The mapped nodes' level-0 records and upper-layer lists move into memory
// before the graph's first change, and every list is checked again there:
// Map() checked the file's bytes, which another program could have written
// since. Nothing in this process writes them meanwhile: every change
// privatizes first, under the exclusive lock.

Status HnswIndex::Impl::StartCopy(FileCopy* c, size_t capacity) const {
  const Graph& g = *graph;
  try {
    c->levels.assign(g.element_levels_.begin(), g.element_levels_.begin() + static_cast<ptrdiff_t>(mapped));
  } catch (const std::bad_alloc&) {
    return Status(kNoMem, "hnsw: no memory to copy the graph out of the file");
  }
  size_t upper_bytes = 0;
  for (uint8_t level : c->levels) upper_bytes += size_t{level} * g.size_links_per_element_;
  c->upper.reset(new (std::nothrow) uint32_t[(upper_bytes + kListSlack) / 4 + 1]());
  c->room = std::max(g.max_elements_, capacity);
  c->level0_bytes = std::max<size_t>(c->room, 1) * g.size_data_per_element_;
  c->level0 = static_cast<char*>(std::malloc(c->level0_bytes));
  if (!c->upper || c->level0 == nullptr) return Status(kNoMem, "hnsw: no memory to copy the graph out of the file");
  AdviseHugePages(c->level0, c->level0_bytes);
  c->upper_next = reinterpret_cast<char*>(c->upper.get());
  return Status::OK();
}

void HnswIndex::Impl::CopyNodes(FileCopy* c, size_t from, size_t to) const {
  const Graph& g = *graph;
  std::memcpy(c->level0 + from * g.size_data_per_element_, g.data_level0_memory_ + from * g.size_data_per_element_,
              (to - from) * g.size_data_per_element_);
  for (size_t i = from; i < to; ++i) {
    const size_t bytes = size_t{c->levels[i]} * g.size_links_per_element_;
    if (bytes == 0) continue;
    std::memcpy(c->upper_next, g.linkLists_[i], bytes);
    c->upper_next += bytes;
  }
}

Status HnswIndex::Impl::CheckCopy(const FileCopy& c) const {
  const Graph& g = *graph;  // (its sizes only: they do not change while in_file)
  const char* upper = reinterpret_cast<const char*>(c.upper.get());
  for (size_t i = 0; i < mapped; ++i) {
    for (int layer = 0; layer <= c.levels[i]; ++layer) {
      const char* list = layer == 0 ? c.level0 + i * g.size_data_per_element_
                                    : upper + size_t(layer - 1) * g.size_links_per_element_;
      uint16_t count;
      std::memcpy(&count, list, 2);
      bool good = count <= (layer == 0 ? g.maxM0_ : g.maxM_);
      for (size_t j = 0; good && j < count; ++j) {
        uint32_t to;
        std::memcpy(&to, list + 4 + 4 * j, 4);
        good = to < mapped && (layer == 0 || c.levels[to] >= layer);
      }
      if (!good) {
        return StatusF(kCorruptIndex, "hnsw: node %zu: its links were changed in the file after it was mapped", i);
      }
    }
    upper += size_t{c.levels[i]} * g.size_links_per_element_;
  }
  return Status::OK();
}

void HnswIndex::Impl::UseCopy(FileCopy* c) {
  Graph& g = *graph;
  char* upper = reinterpret_cast<char*>(c->upper.get());
  for (size_t i = 0; i < mapped; ++i) {
    if (c->levels[i] == 0) continue;
    g.linkLists_[i] = upper;
    upper += size_t{c->levels[i]} * g.size_links_per_element_;
  }
  g.data_level0_memory_ = std::exchange(c->level0, nullptr);
  level0_room = c->room;
  level0_mapped = false;
  upper_lists = std::move(c->upper);
  in_file = false;
}

Status HnswIndex::Impl::Privatize(size_t capacity) {
  if (!in_file) return Status::OK();
  FileCopy c;
  AGENTMEM_RETURN_IF_ERROR(StartCopy(&c, capacity));
  CopyNodes(&c, 0, mapped);
  if (Status s = CheckCopy(c); !s.ok()) {
    sticky = s;  // the file changed under the handle
    return s;
  }
  UseCopy(&c);
  return Status::OK();
}

// The copy of kFileCopiedAhead, on the reader thread once the vectors are
// read: a few thousand nodes under each shared lock, checked with no lock
// held, put in place under the exclusive lock if the graph is still in the
// file. A copy that cannot be made or fails its check is dropped: the
// first change then copies, and fails, itself.
void HnswIndex::Impl::CopyAhead() {
  constexpr size_t kRun = 4096;
  FileCopy c;
  {
    std::shared_lock lock(mu);
    // Room for the handle's first inserts: it is a writer's.
    if (!in_file || !StartCopy(&c, RoomFor(mapped + 1)).ok()) return;
  }
  for (size_t from = 0; from < mapped; from += kRun) {
    if (unread->stop.load(std::memory_order_relaxed)) return;
    std::shared_lock lock(mu);
    if (!in_file) return;
    CopyNodes(&c, from, std::min(mapped, from + kRun));
  }
  if (!CheckCopy(c).ok()) return;
  std::unique_lock lock(mu);
  if (in_file && sticky.ok()) UseCopy(&c);
}

// Grows the graph to `capacity` nodes. The steps that can fail run first, so
// that a failure leaves a consistent graph (hnswlib's resizeIndex deletes the
// visited-list pool before allocating its successor). REQUIRES: exclusive lock.
Status HnswIndex::Impl::Grow(size_t capacity) {
  Graph& g = *graph;
  if (capacity <= g.max_elements_) return Status::OK();
#ifdef AGENTMEM_TEST_HOOKS
  if (g_grow_fails.load(std::memory_order_relaxed)) {
    return StatusF(kNoMem, "hnsw: cannot grow to %zu nodes", capacity);
  }
#endif
  if (capacity > hnsw::kMaxNodes) capacity = hnsw::kMaxNodes;
  AGENTMEM_RETURN_IF_ERROR(Privatize(capacity));
  // No list made up front: hnswlib's pool constructor leaks the list it has
  // just made when putting it in its deque fails. Lists are made on demand.
  auto pool = std::make_unique<hnswlib::VisitedListPool>(0, static_cast<int>(capacity));
  g.vectors.resize(capacity);
  g.scales.resize(capacity);
  if (level0_room < capacity) {
    // Copied, not realloc'd: remapping memory advised to huge pages costs
    // several times the copy (0.5 s for 150 MiB, against 25 ms).
    void* data = std::malloc(capacity * g.size_data_per_element_);
    if (data == nullptr) return StatusF(kNoMem, "hnsw: cannot grow to %zu nodes", capacity);
    AdviseHugePages(data, capacity * g.size_data_per_element_);
    if (g.cur_element_count > 0) {
      std::memcpy(data, g.data_level0_memory_, g.cur_element_count * g.size_data_per_element_);
    }
    if (!level0_mapped) std::free(g.data_level0_memory_);
    g.data_level0_memory_ = static_cast<char*>(data);
    level0_room = capacity;
    level0_mapped = false;
  }
  void* lists = std::realloc(g.linkLists_, capacity * sizeof(char*));
  if (lists == nullptr) return StatusF(kNoMem, "hnsw: cannot grow to %zu nodes", capacity);
  g.linkLists_ = static_cast<char**>(lists);
  g.element_levels_.resize(capacity);
  delete g.visited_list_pool_;
  g.visited_list_pool_ = pool.release();
  g.max_elements_ = capacity;
  return Status::OK();
}

// The capacity for `nodes` nodes: the graph's, or twice the nodes there
// are at least, so that adding one node at a time costs amortized constant
// time. REQUIRES: a lock.
size_t HnswIndex::Impl::RoomFor(size_t nodes) const {
  const size_t n = graph->cur_element_count;
  if (nodes <= graph->max_elements_) return graph->max_elements_;
  return std::min<size_t>(std::max({2 * n, nodes, n + kMinCapacity}), hnsw::kMaxNodes);
}

Status HnswIndex::Impl::GrowFor(size_t nodes) {
  const size_t capacity = RoomFor(nodes);
  AGENTMEM_RETURN_IF_ERROR(Privatize(capacity));
  return Grow(capacity);
}

// One insert is a batch of one: the same links as AddBatch gives it.
Status HnswIndex::Impl::Add(uint64_t label, std::span<const float> vector) {
  const HnswInsert item{label, vector};
  return AddBatch(std::span(&item, 1), 1);
}

Status HnswIndex::Impl::AddBatch(std::span<const HnswInsert> items, unsigned threads) {
  // Checks and copies, outside the lock: the vectors in label order, as the
  // graph keeps them.
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return items[a].label < items[b].label; });
  const size_t count = items.size(), dim = shape.dim;
  std::vector<float> data(count * dim), scales(count);
  for (size_t i = 0; i < count; ++i) {
    const HnswInsert& item = items[order[i]];
    AGENTMEM_RETURN_IF_ERROR(CheckVector(item.vector, "vector"));
    if (i > 0 && item.label == items[order[i - 1]].label) {
      return StatusF(kConstraint, "hnsw: label %llu appears twice in the batch",
                     static_cast<unsigned long long>(item.label));
    }
    scales[i] = Keep(shape.metric, item.vector.data(), dim, data.data() + i * dim);
  }
  std::unique_lock lock(mu);
  if (!sticky.ok()) return sticky;
  if (count == 0) return Status::OK();
  Graph& g = *graph;
  for (size_t i = 0; i < count; ++i) {
    uint32_t existing;
    const uint64_t label = items[order[i]].label;
    if (FindNode(g, mapped, label, &existing)) {
      return StatusF(kConstraint, "hnsw: label %llu is already in the index",
                     static_cast<unsigned long long>(label));
    }
  }
  // Everything that can fail for want of memory, before the graph changes.
  const size_t first = g.cur_element_count;
  if (count > hnsw::kMaxNodes - first) {
    return StatusF(kTooBig, "hnsw: index is full (%zu nodes, %zu more)", first, count);
  }
  AGENTMEM_RETURN_IF_ERROR(GrowFor(first + count));
  if (node_seq.size() < first + count) node_seq.resize(first + count);
  if (!arena.Reserve(count)) return StatusF(kNoMem, "hnsw: no memory for a batch of %zu", count);
  AGENTMEM_RETURN_IF_ERROR(ReadAllUnread());
  std::vector<int> levels(count);
  MallocBlocks upper;
  upper.blocks.assign(count, nullptr);
  for (size_t i = 0; i < count; ++i) {
    levels[i] = LevelOf(&g, items[order[i]].label);
    if (levels[i] == 0) continue;
    upper.blocks[i] = NewUpperBlock(g, levels[i]);
    if (upper.blocks[i] == nullptr) return StatusF(kNoMem, "hnsw: no memory for a batch of %zu", count);
  }
  if (threads == 0) threads = DefaultInsertThreads();
  ReserveLabels(&g, g.label_lookup_.size() + count);
  for (size_t i = 0; i < count; ++i) {
    try {
      g.label_lookup_.emplace(items[order[i]].label, static_cast<uint32_t>(first + i));
    } catch (...) {
      for (size_t j = 0; j < i; ++j) g.label_lookup_.erase(items[order[j]].label);
      throw;
    }
  }
  // The records: nothing below allocates.
  for (size_t i = 0; i < count; ++i) {
    const size_t node = first + i;
    std::memset(g.data_level0_memory_ + node * g.size_data_per_element_, 0,
                g.size_data_per_element_);
    float* vector = arena.Take();
    std::memcpy(vector, data.data() + i * dim, g.data_size_);
    g.scales[node] = scales[i];
    g.vectors[node] = vector;
    g.setExternalLabel(static_cast<uint32_t>(node), items[order[i]].label);
    g.element_levels_[node] = levels[i];
    g.linkLists_[node] = upper.blocks[i];
    upper.blocks[i] = nullptr;  // the graph's now
  }
  g.cur_element_count = first + count;
  if (first == 0) g.maxlevel_ = -1;  // no entry point yet: the first node linked becomes it

  // The linking, round by round (see "batch insert" above). From here on a
  // failure leaves nodes without links: the index turns sticky-broken.
  std::vector<std::vector<uint32_t>> changed;
  std::exception_ptr error;
  try {
    changed.resize(threads);
    std::vector<std::vector<Candidate>> scratch(threads);
    std::vector<std::vector<std::vector<uint32_t>>> plans(std::min(count, kBatchRound));
    struct BackLink {
      uint32_t to, node;
      int layer;
    };
    std::vector<BackLink> back;
    std::vector<size_t> groups;  // where each target's run of `back` starts
    for (size_t round = 0; round < count && !error; round += kBatchRound) {
      const uint32_t round_first = static_cast<uint32_t>(first + round);
      const size_t n = std::min(kBatchRound, count - round);
      const uint32_t entry = g.enterpoint_node_;
      const int top = g.maxlevel_;
      error = ParallelFor(n, threads, 1, [&](size_t i, unsigned) {
        PlanLinks(g, round_first + static_cast<uint32_t>(i), round_first, entry, top, &plans[i]);
      });
      if (error) break;
      back.clear();
      for (size_t i = 0; i < n; ++i) {
        const uint32_t node = round_first + static_cast<uint32_t>(i);
        for (int layer = 0; layer < static_cast<int>(plans[i].size()); ++layer) {
          std::vector<Candidate>& own = scratch[0];
          own.clear();
          for (uint32_t to : plans[i][layer]) {
            own.push_back({0, to});
            back.push_back({to, node, layer});
          }
          WriteList(&g, node, layer, own);
        }
        if (levels[round + i] > g.maxlevel_) {
          g.enterpoint_node_ = node;
          g.maxlevel_ = levels[round + i];
        }
      }
      std::sort(back.begin(), back.end(), [](const BackLink& a, const BackLink& b) {
        return a.to != b.to ? a.to < b.to : a.layer != b.layer ? a.layer < b.layer : a.node < b.node;
      });
      groups.clear();
      for (size_t i = 0; i < back.size(); ++i) {
        if (i == 0 || back[i].to != back[i - 1].to) groups.push_back(i);
      }
      groups.push_back(back.size());
      error = ParallelFor(groups.size() - 1, threads, kLinkBackTargetsPerThread,
                          [&](size_t k, unsigned w) {
        for (size_t i = groups[k]; i < groups[k + 1]; ++i) {
          if (LinkBack(&g, back[i].to, back[i].node, back[i].layer, &scratch[w])) {
            changed[w].push_back(back[i].to);
          }
        }
      });
    }
  } catch (...) {
    error = std::current_exception();
  }
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (...) {
      sticky = FromException("batch insert");
    }
    sticky = StatusF(sticky.code() == kNoMem ? kNoMem : kInternal,
                     "%s; the index is unusable and must be rebuilt", sticky.message().c_str());
    return sticky;
  }
  BeginChange();
  for (size_t i = 0; i < count; ++i) NoteChange(static_cast<uint32_t>(first + i));
  for (const std::vector<uint32_t>& nodes : changed) {
    for (uint32_t n : nodes) NoteChange(n);
  }
  return Status::OK();
}

Status HnswIndex::Impl::MarkDeleted(uint64_t label) {
  std::unique_lock lock(mu);
  if (!sticky.ok()) return sticky;
  AGENTMEM_RETURN_IF_ERROR(Privatize());
  uint32_t node;
  if (!FindNode(*graph, mapped, label, &node)) {
    return StatusF(kNotFound, "hnsw: label %llu is not in the index",
                   static_cast<unsigned long long>(label));
  }
  if (!graph->isMarkedDeleted(node)) {
    graph->markDeletedInternal(node);
    BeginChange();
    NoteChange(node);
  }
  return Status::OK();
}

std::vector<Candidate> HnswIndex::Impl::SearchGraph(const float* vector, size_t ef,
                                                    const LabelFilter& filter) const {
  if (in_file) {
    FileLists lists{*graph, {}};
    return SearchGraphWith(vector, ef, filter, lists);
  }
  DirectLists lists{*graph};
  return SearchGraphWith(vector, ef, filter, lists);
}

template <class Lists>
std::vector<Candidate> HnswIndex::Impl::SearchGraphWith(const float* vector, size_t ef,
                                                        const LabelFilter& filter, Lists& lists) const {
  const Graph& g = *graph;
  const Query query{vector, 1.0f};
  const Candidate entry = Descend(g, query, {DistanceTo(g, query, g.enterpoint_node_), g.enterpoint_node_},
                                  g.maxlevel_, 0, lists);
  if (!filter && g.num_deleted_ == 0) {
    if (EveryVectorRead(g)) return SearchLayer(g, query, entry, ef, 0, lists, [](uint32_t) { return true; });
    return SearchLayer(g, query, entry, ef, 0, lists, [&](uint32_t n) { return !Unreadable(g, n); });
  }
  return SearchLayer(g, query, entry, ef, 0, lists, [&](uint32_t n) {
    return !g.isMarkedDeleted(n) && !Unreadable(g, n) && (!filter || filter(g.getExternalLabel(n)));
  });
}

Result<std::vector<Neighbor>> HnswIndex::Impl::Search(std::span<const float> query,
                                                      const HnswSearchOptions& o) const {
  AGENTMEM_RETURN_IF_ERROR(CheckVector(query, "query"));
  std::vector<float> q(query.begin(), query.end());
  if (shape.metric == Metric::kCosine) NormalizeInPlace(q.data(), q.size());
  std::shared_lock lock(mu);
  if (!sticky.ok()) return sticky;
  std::vector<Neighbor> out;
  if (o.k == 0 || graph->cur_element_count == 0) return out;
  const size_t ef = std::max(o.ef != 0 ? o.ef : default_ef.load(), o.k);
  for (const Candidate& c : SearchGraph(q.data(), ef, o.filter)) {
    out.push_back({graph->getExternalLabel(c.node), c.distance});
  }
  std::sort(out.begin(), out.end(), NeighborLess);
  if (out.size() > o.k) out.resize(o.k);
  return out;
}

void HnswIndex::Impl::WriteLinks(const hnsw::NodeRecordView& r) {
  hnsw::LinkCursor cursor(r.links);
  for (int layer = 0; layer <= r.level; ++layer) {
    const char* ids = nullptr;
    const uint32_t count = cursor.Next(&ids);
    hnswlib::linklistsizeint* list = graph->get_linklist_at_level(r.node, layer);
    graph->setListCount(list, static_cast<unsigned short>(count));
    std::memcpy(list + 1, ids, size_t{4} * count);
  }
}

void HnswIndex::Impl::SetDeleted(uint32_t node, bool deleted) {
  if (graph->isMarkedDeleted(node) == deleted) return;
  if (deleted) {
    graph->markDeletedInternal(node);
  } else {
    graph->unmarkDeletedInternal(node);
  }
}

// Writes one validated record into the graph. A new node (the next id) is
// created first; `upper_block` holds its zeroed upper-layer lists if level > 0.
void HnswIndex::Impl::InstallRecord(const hnsw::NodeRecordView& r, char** upper_block) {
  Graph& g = *graph;
  if (r.node >= g.cur_element_count) {
    std::memset(g.data_level0_memory_ + size_t{r.node} * g.size_data_per_element_, 0,
                g.size_data_per_element_);
    float* vector = arena.Take();
    g.scales[r.node] = Keep(shape.metric, reinterpret_cast<const float*>(r.vector), shape.dim, vector);
    g.vectors[r.node] = vector;
    g.setExternalLabel(r.node, r.label);
    g.element_levels_[r.node] = r.level;
    g.linkLists_[r.node] = r.level > 0 ? *upper_block : nullptr;
    if (r.level > 0) *upper_block = nullptr;  // owned by the graph now
    g.cur_element_count = size_t{r.node} + 1;
    g.label_lookup_[r.label] = r.node;
  }
  WriteLinks(r);
  SetDeleted(r.node, r.deleted);
  NoteChange(r.node);
}

// Applies a validated image. Everything that can fail for want of memory is
// allocated before the graph is touched, except the label map's nodes.
// REQUIRES: exclusive lock.
Status HnswIndex::Impl::Apply(const hnsw::ParsedImage& image) {
  const hnsw::ImageHeader& h = image.header;
  Graph& g = *graph;
  AGENTMEM_RETURN_IF_ERROR(GrowFor(h.node_count));
  ReserveLabels(&g, h.node_count - std::min<size_t>(h.node_count, mapped));
  size_t created = 0;
  for (const hnsw::NodeRecordView& r : image.records) created += r.node >= g.cur_element_count;
  if (!arena.Reserve(created)) return StatusF(kNoMem, "hnsw: no memory for %zu nodes", created);
  MallocBlocks upper;
  upper.blocks.reserve(image.records.size());
  for (const hnsw::NodeRecordView& r : image.records) {
    if (r.node < h.base_count || r.level == 0) continue;
    char* block = NewUpperBlock(g, r.level);
    if (block == nullptr) return StatusF(kNoMem, "hnsw: no memory for node %u", r.node);
    upper.blocks.push_back(block);
  }
  BeginChange();
  size_t next_block = 0;
  try {
    for (const hnsw::NodeRecordView& r : image.records) {
      bool takes_block = r.node >= h.base_count && r.level > 0;
      InstallRecord(r, takes_block ? &upper.blocks[next_block++] : nullptr);
    }
  } catch (...) {
    sticky = FromException("applying an image");
    return sticky;
  }
  g.enterpoint_node_ = h.entry_point;
  g.maxlevel_ = h.max_level;
  return Status::OK();
}

Status HnswIndex::Impl::CheckMark(const ChangeMark& mark) const {
  if (mark.seq > seq || mark.node_count > graph->cur_element_count) {
    return StatusF(kMisuse, "hnsw: change mark (seq %llu, %u nodes) is not from this index's past",
                   static_cast<unsigned long long>(mark.seq), mark.node_count);
  }
  return Status::OK();
}

std::vector<uint32_t> HnswIndex::Impl::ChangedSince(const ChangeMark& mark) const {
  std::vector<uint32_t> nodes;
  const uint32_t count = static_cast<uint32_t>(graph->cur_element_count);
  if (mark.seq >= log_from) {  // the log holds every change after the mark
    auto it = std::partition_point(change_log.begin(), change_log.end(),
                                   [&](const LoggedChange& c) { return c.seq <= mark.seq; });
    for (; it != change_log.end(); ++it) {
      if (it->node < mark.node_count) nodes.push_back(it->node);
    }
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    for (uint32_t i = mark.node_count; i < count; ++i) nodes.push_back(i);
    return nodes;
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (i >= mark.node_count || (i < node_seq.size() && node_seq[i] > mark.seq)) nodes.push_back(i);
  }
  return nodes;
}

// ---- public interface: every call guarded against exceptions ----

HnswIndex::HnswIndex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HnswIndex::~HnswIndex() = default;

// Sets what hnswlib's constructor sets on a graph of `shape` with no nodes
// and no memory yet (Grow allocates). Nothing here allocates: hnswlib's own
// constructor is not used because it leaks what it allocated when a later
// allocation in it fails (a visited list, the level-0 block).
static void InitEmptyGraph(Graph* graph, const GraphShape& shape, KernelSpace* space) {
  Graph& g = *graph;
  // What the destructor reads first.
  g.cur_element_count = 0;
  g.max_elements_ = 0;
  g.num_deleted_ = 0;
  g.data_level0_memory_ = nullptr;
  g.linkLists_ = nullptr;
  g.visited_list_pool_ = nullptr;
  g.M_ = shape.m;
  g.maxM_ = shape.m;
  g.maxM0_ = size_t{2} * shape.m;
  g.ef_construction_ = std::max<size_t>(shape.ef_construction, shape.m);
  g.ef_ = 10;
  g.mult_ = 1 / std::log(1.0 * g.M_);
  g.revSize_ = 1.0 / g.mult_;
  g.data_size_ = space->get_data_size();
  g.fstdistfunc_ = space->get_dist_func();
  g.dist_func_param_ = space->get_dist_func_param();
  g.kernels = space->kernels();
  g.dim = shape.dim;
  g.l2 = shape.metric == Metric::kL2;
  g.size_links_level0_ = g.maxM0_ * sizeof(hnswlib::tableint) + sizeof(hnswlib::linklistsizeint);
  // A record is its links and its label; the vector is elsewhere
  // (Graph::vectors). hnswlib's own offset of a vector is left pointing at
  // the label: nothing here reads a vector through it.
  g.size_data_per_element_ = g.size_links_level0_ + sizeof(hnswlib::labeltype);
  g.offsetData_ = g.size_links_level0_;
  g.label_offset_ = g.size_links_level0_;
  g.offsetLevel0_ = 0;
  g.size_links_per_element_ = g.maxM_ * sizeof(hnswlib::tableint) + sizeof(hnswlib::linklistsizeint);
  g.enterpoint_node_ = static_cast<hnswlib::tableint>(-1);
  g.maxlevel_ = -1;
}

Result<std::unique_ptr<HnswIndex>> HnswIndex::Create(const HnswOptions& options) {
  GraphShape shape{options.metric, options.dim, options.m, options.ef_construction};
  AGENTMEM_RETURN_IF_ERROR(hnsw::ValidateShape(shape, kRange));
  if (options.initial_capacity > hnsw::kMaxNodes) {
    return StatusF(kRange, "hnsw: initial capacity %zu above %u", options.initial_capacity,
                   hnsw::kMaxNodes);
  }
  std::unique_ptr<Impl> impl;
  Status s = Guarded("create", [&] {
    impl = std::make_unique<Impl>(options, shape);
    impl->graph = std::make_unique<Graph>(&impl->space);  // allocates nothing
    InitEmptyGraph(impl->graph.get(), shape, &impl->space);
    return impl->Grow(std::max(options.initial_capacity, kMinCapacity));
  });
  if (!s.ok()) return s;
  return std::unique_ptr<HnswIndex>(new HnswIndex(std::move(impl)));
}

// One layer's list of node `node` in the index without the nodes `gone`
// marks (old ids): the kept members, plus, for each removed member, its own
// kept members on the layer; more than the layer holds are cut by the
// neighbour heuristic. Appended to *out as [u16 count][count x u32 new id].
static void RepairedList(const Graph& g, uint32_t node, int layer, const std::vector<bool>& gone,
                         const std::vector<uint32_t>& new_id, std::vector<Candidate>* c,
                         std::string* out) {
  // Each id read once and checked (the lists of a graph in the file could
  // have been written since Map() checked them: FileLists).
  auto id_at = [&](std::span<const uint32_t> list, size_t i, uint32_t* id) {
    *id = __atomic_load_n(&list[i], __ATOMIC_RELAXED);
    return OnLayer(g, *id, layer);
  };
  std::span<const uint32_t> had = Links(g, node, layer);
  c->clear();
  bool lost = false;
  for (size_t i = 0; i < had.size(); ++i) {
    uint32_t x;
    if (!id_at(had, i, &x)) continue;
    if (!gone[x]) {
      c->push_back({0, x});
      continue;
    }
    lost = true;
    std::span<const uint32_t> theirs = Links(g, x, layer);
    for (size_t j = 0; j < theirs.size(); ++j) {
      uint32_t y;
      if (id_at(theirs, j, &y) && !gone[y] && y != node) c->push_back({0, y});
    }
  }
  if (lost) {
    std::sort(c->begin(), c->end(), [](const Candidate& a, const Candidate& b) { return a.node < b.node; });
    c->erase(std::unique(c->begin(), c->end(),
                         [](const Candidate& a, const Candidate& b) { return a.node == b.node; }),
             c->end());
    const size_t most = layer == 0 ? g.maxM0_ : g.maxM_;
    if (c->size() > most) {
      const Query v = NodeQuery(g, node);
      for (Candidate& x : *c) x.distance = DistanceTo(g, v, x.node);
      SortNearestFirst(c);
      // The heuristic's choice, then the nearest of the rest up to `most`:
      // the heuristic alone keeps too few here (measured: 2-4 points of
      // recall@10 below a rebuilt graph, none with the fill).
      std::vector<Candidate> nearest = *c;
      SelectNeighbors(g, c, most);
      for (const Candidate& x : nearest) {
        if (c->size() >= most) break;
        if (std::none_of(c->begin(), c->end(), [&](const Candidate& y) { return y.node == x.node; })) {
          c->push_back(x);
        }
      }
    }
  }
  const uint16_t count = static_cast<uint16_t>(c->size());
  out->append(reinterpret_cast<const char*>(&count), 2);
  for (const Candidate& x : *c) {
    const uint32_t id = new_id[x.node];
    out->append(reinterpret_cast<const char*>(&id), 4);
  }
}

Result<std::unique_ptr<HnswIndex>> HnswIndex::Without(std::span<const uint64_t> removed) const {
  std::shared_lock lock(impl_->mu);
  const Graph& g = *impl_->graph;
  const size_t n = g.cur_element_count;
  std::vector<bool> gone(n, false);
  for (uint64_t label : removed) {
    uint32_t node = 0;
    if (!FindNode(g, impl_->mapped, label, &node)) {
      return StatusF(kNotFound, "hnsw: no node labelled %llu", static_cast<unsigned long long>(label));
    }
    gone[node] = true;
  }
  std::vector<uint32_t> new_id(n, kNoNode);
  uint32_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!gone[i]) new_id[i] = kept++;
  }
  HnswOptions o = impl_->options;
  o.initial_capacity = kept;
  auto created = Create(o);
  if (!created.ok()) return created.status();
  std::unique_ptr<HnswIndex> out = std::move(created.value());
  Impl& dst = *out->impl_;
  Status s = Guarded("removal", [&] {
    Graph& h = *dst.graph;
    ReserveLabels(&h, kept);
    if (!dst.arena.Reserve(kept)) throw std::bad_alloc();
    dst.BeginChange();
    std::vector<Candidate> scratch;
    std::string links;
    for (size_t i = 0; i < n; ++i) {
      if (gone[i]) continue;
      const uint32_t old = static_cast<uint32_t>(i);
      hnsw::NodeRecordView r;
      r.node = new_id[i];
      r.label = g.getExternalLabel(old);
      r.level = g.element_levels_[i];
      r.vector = reinterpret_cast<const char*>(VectorOf(g, old));
      r.deleted = g.isMarkedDeleted(old) || Unreadable(g, old);  // the copy never makes it a hit
      links.clear();
      for (int layer = 0; layer <= r.level; ++layer) RepairedList(g, old, layer, gone, new_id, &scratch, &links);
      r.links = links.data();
      char* block = r.level > 0 ? NewUpperBlock(h, r.level) : nullptr;
      if (r.level > 0 && block == nullptr) throw std::bad_alloc();
      dst.InstallRecord(r, &block);
    }
    if (kept > 0) {
      uint32_t entry = g.enterpoint_node_;
      if (entry >= n || gone[entry]) {
        entry = kNoNode;
        int top = -1;
        for (size_t i = 0; i < n; ++i) {
          if (!gone[i] && g.element_levels_[i] > top) {
            top = g.element_levels_[i];
            entry = static_cast<uint32_t>(i);
          }
        }
      }
      h.enterpoint_node_ = new_id[entry];
      h.maxlevel_ = g.element_levels_[entry];
    }
    return Status::OK();
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::unique_ptr<HnswIndex>> HnswIndex::Deserialize(std::string_view image,
                                                          size_t default_ef) {
  Result<hnsw::ImageHeader> header = hnsw::ParseImageHeader(image);
  if (!header.ok()) return header.status();
  const hnsw::ImageHeader& h = *header;
  if (h.base_count != 0 || !h.vectors) {
    return AGENTMEM_CORRUPTION(kCorruptIndex, -1,
                               "hnsw image: a delta (builds on %u nodes, or without vectors), not a "
                               "full image",
                               h.base_count);
  }
  HnswOptions o{h.shape.metric,          h.shape.dim,  h.shape.m,
                h.shape.ef_construction, h.node_count, default_ef};
  Result<std::unique_ptr<HnswIndex>> index = Create(o);
  if (!index.ok()) return index.status();
  Impl& impl = *(*index)->impl_;
  Status s = Guarded("load", [&] {
    Result<hnsw::ParsedImage> parsed = hnsw::ParseImageBody(image, h, impl.View());
    if (!parsed.ok()) return parsed.status();
    std::unique_lock lock(impl.mu);
    return impl.Apply(*parsed);
  });
  if (!s.ok()) return s;
  return index;
}

// ---- mappable images ----

namespace {

constexpr uint32_t kMapMagic = 0x4d4e4841;  // "AHNM"
constexpr uint32_t kMapVersion = 1;          // level-0 records hold the vectors
constexpr uint32_t kMapVersionNoVectors = 2;  // they do not: Map() is given them
constexpr size_t kMapHeader = 64;
constexpr size_t kMapAlign = 64;

size_t AlignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

template <class T>
void Put(std::string* out, size_t at, T v) {
  std::memcpy(out->data() + at, &v, sizeof v);
}
template <class T>
T Get(const char* p, size_t at) {
  T v;
  std::memcpy(&v, p + at, sizeof v);
  return v;
}

Status MapCorrupt(const char* fmt, uint64_t a = 0, uint64_t b = 0) {
  char msg[160];
  std::snprintf(msg, sizeof msg, fmt, static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return StatusF(kCorruptIndex, "hnsw mapped image: %s", msg);
}

}  // namespace

namespace {

// Where a mappable image puts its parts (SerializeMappable()).
struct MapLayout {
  size_t nodes = 0;
  size_t upper = 0;   // bytes of upper-layer lists
  size_t level0 = 0;  // offset of the level-0 records
  size_t record = 0;  // bytes of a level-0 record
  size_t size() const { return level0 + nodes * record; }
};

// Errors: kMisuse when the labels do not increase with the node id.
Status LayOut(const Graph& g, bool with_vectors, MapLayout* out) {
  MapLayout m;
  m.nodes = g.cur_element_count;
  for (size_t i = 0; i < m.nodes; ++i) {
    m.upper += size_t(g.element_levels_[i]) * g.size_links_per_element_;
    if (i > 0 && g.getExternalLabel(uint32_t(i)) <= g.getExternalLabel(uint32_t(i - 1))) {
      return Status(kMisuse, "hnsw: labels do not increase with the node id; cannot map");
    }
  }
  // At least 8 bytes between the upper lists and level 0: hnswlib reads one
  // id past the end of a list (see kListSlack).
  m.level0 = AlignUp(kMapHeader + m.nodes + m.upper + 8, kMapAlign);
  // Without vectors a record is its links and its label.
  m.record = g.size_links_level0_ + (with_vectors ? g.data_size_ : 0) + sizeof(uint64_t);
  *out = m;
  return Status::OK();
}

// Gathers bytes into pieces of about kPieceBytes for an emitter.
class Pieces {
 public:
  static constexpr size_t kPieceBytes = size_t{256} << 10;
  explicit Pieces(const std::function<Status(std::string_view)>& emit) : emit_(emit) {}
  Status Add(const void* p, size_t n) {
    buf_.append(static_cast<const char*>(p), n);
    return buf_.size() >= kPieceBytes ? Flush() : Status::OK();
  }
  Status Zeros(size_t n) {
    buf_.append(n, '\0');
    return buf_.size() >= kPieceBytes ? Flush() : Status::OK();
  }
  Status Flush() {
    if (buf_.empty()) return Status::OK();
    Status s = emit_(buf_);
    buf_.clear();
    return s;
  }

 private:
  const std::function<Status(std::string_view)>& emit_;
  std::string buf_;
};

}  // namespace

Status HnswIndex::SerializeMappable(std::string* out, bool with_vectors) const {
  return EmitMappable(with_vectors, [out](std::string_view piece) {
    out->append(piece);
    return Status::OK();
  });
}

Result<size_t> HnswIndex::MappableSize(bool with_vectors) const {
  std::shared_lock lock(impl_->mu);
  MapLayout m;
  AGENTMEM_RETURN_IF_ERROR(LayOut(*impl_->graph, with_vectors, &m));
  return m.size();
}

Status HnswIndex::EmitMappable(bool with_vectors,
                               const std::function<Status(std::string_view)>& emit) const {
  std::shared_lock lock(impl_->mu);
  const Graph& g = *impl_->graph;
  if (with_vectors) AGENTMEM_RETURN_IF_ERROR(CheckVectorsReadable(g));
  MapLayout m;
  AGENTMEM_RETURN_IF_ERROR(LayOut(g, with_vectors, &m));
  const size_t n = m.nodes;
  std::string header(kMapHeader, '\0');
  Put<uint32_t>(&header, 0, kMapMagic);
  Put<uint32_t>(&header, 4, with_vectors ? kMapVersion : kMapVersionNoVectors);
  Put<uint32_t>(&header, 8, static_cast<uint32_t>(impl_->shape.metric));
  Put<uint32_t>(&header, 12, impl_->shape.dim);
  Put<uint32_t>(&header, 16, impl_->shape.m);
  Put<uint32_t>(&header, 20, impl_->shape.ef_construction);
  Put<uint32_t>(&header, 24, static_cast<uint32_t>(n));
  Put<uint32_t>(&header, 28, n == 0 ? kNoNode : g.enterpoint_node_);
  Put<int32_t>(&header, 32, n == 0 ? -1 : g.maxlevel_);
  Put<uint32_t>(&header, 36, static_cast<uint32_t>(g.num_deleted_));
  Put<uint64_t>(&header, 40, m.upper);
  Put<uint64_t>(&header, 48, m.level0);
  Put<uint32_t>(&header, 56, static_cast<uint32_t>(m.record));
  Pieces out(emit);
  AGENTMEM_RETURN_IF_ERROR(out.Add(header.data(), kMapHeader));
  for (size_t i = 0; i < n; ++i) {
    const auto level = static_cast<char>(g.element_levels_[i]);
    AGENTMEM_RETURN_IF_ERROR(out.Add(&level, 1));
  }
  for (size_t i = 0; i < n; ++i) {
    const size_t bytes = size_t(g.element_levels_[i]) * g.size_links_per_element_;
    if (bytes > 0) AGENTMEM_RETURN_IF_ERROR(out.Add(g.linkLists_[i], bytes));
  }
  AGENTMEM_RETURN_IF_ERROR(out.Zeros(m.level0 - (kMapHeader + n + m.upper)));
  for (size_t i = 0; i < n; ++i) {
    const char* from = g.data_level0_memory_ + i * g.size_data_per_element_;
    AGENTMEM_RETURN_IF_ERROR(out.Add(from, g.size_links_level0_));
    if (with_vectors) {
      AGENTMEM_RETURN_IF_ERROR(out.Add(VectorOf(g, static_cast<uint32_t>(i)), g.data_size_));
    }
    AGENTMEM_RETURN_IF_ERROR(out.Add(from + g.label_offset_, sizeof(uint64_t)));
  }
  return out.Flush();
}

Result<size_t> HnswIndex::VectorBytes(std::string_view image) {
  if (image.size() < kMapHeader) return MapCorrupt("%llu bytes, too short", image.size());
  const char* h = image.data();
  if (Get<uint32_t>(h, 0) != kMapMagic) return MapCorrupt("bad magic");
  const uint32_t version = Get<uint32_t>(h, 4);
  if (version == kMapVersion) return size_t{0};
  if (version != kMapVersionNoVectors) {
    return StatusF(kFormatVersion, "hnsw mapped image: version %u is not known", version);
  }
  const uint64_t dim = Get<uint32_t>(h, 12), m = Get<uint32_t>(h, 16), n = Get<uint32_t>(h, 24);
  const uint64_t level0 = Get<uint64_t>(h, 48), record = Get<uint32_t>(h, 56);
  // Bounded by the image's own bytes before anything is sized from them.
  if (dim == 0 || dim > hnsw::kMaxDim || m == 0 || m > hnsw::kMaxM || record != 8 * m + 4 + 8 ||
      level0 > image.size() || (image.size() - level0) % record != 0 ||
      (image.size() - level0) / record != n) {
    return MapCorrupt("sections do not fit its %llu bytes (%llu nodes)", image.size(), n);
  }
  return n * dim * sizeof(float);
}

float HnswIndex::KeepCopy(const float* v, size_t dim, float scale, float* dst) {
  if (scale != 0) {
    std::memcpy(dst, v, dim * sizeof(float));
    return scale;
  }
  CopyNormalized(v, dst, dim);
  return 1.0f;
}

Result<float> HnswIndex::ScaleFor(Metric metric, const float* v, size_t dim) {
  const double norm = Norm(v, dim);
  if (!std::isfinite(norm)) return Status(kMismatch, "hnsw: the vector holds NaN or infinity");
  return KeptScale(metric, norm);
}

Status HnswIndex::ForEachNodeLabel(std::string_view image, size_t first, size_t end,
                                   const std::function<bool(size_t node, uint64_t label)>& place) {
  Result<size_t> bytes = VectorBytes(image);
  if (!bytes.ok()) return bytes.status();
  if (*bytes == 0) return Status::OK();
  const char* h = image.data();
  const size_t n = std::min<size_t>(Get<uint32_t>(h, 24), end);
  const size_t level0 = Get<uint64_t>(h, 48), record = Get<uint32_t>(h, 56);
  const size_t links = record - sizeof(uint64_t);
  const char* from = h + level0 + first * record;
  for (size_t i = first; i < n; ++i, from += record) {
    const uint64_t label = Get<uint64_t>(from, links);
    if (!place(i, label)) return MapCorrupt("node %llu (label %llu): no usable vector for it", i, label);
  }
  return Status::OK();
}

Result<std::unique_ptr<HnswIndex>> HnswIndex::Map(char* image, size_t size, size_t spare,
                                                  std::shared_ptr<void> owner,
                                                  size_t default_ef, bool records_checked,
                                                  MapVectors vectors, ImagePlace place) {
  const bool in_file = place != ImagePlace::kMemory;
  if (in_file && spare != 0) return Status(kMisuse, "hnsw: an image in the file has no spare room");
  if (size < kMapHeader || reinterpret_cast<uintptr_t>(image) % 4 != 0) {
    return MapCorrupt("%llu bytes, too short or misaligned", size);
  }
  if (Get<uint32_t>(image, 0) != kMapMagic) return MapCorrupt("bad magic");
  const uint32_t version = Get<uint32_t>(image, 4);
  if (version != kMapVersion && version != kMapVersionNoVectors) {
    return StatusF(kFormatVersion, "hnsw mapped image: version %u is not known", version);
  }
  GraphShape shape{static_cast<Metric>(Get<uint32_t>(image, 8)), Get<uint32_t>(image, 12),
                   Get<uint32_t>(image, 16), Get<uint32_t>(image, 20)};
  if (Get<uint32_t>(image, 8) > 255) return MapCorrupt("unknown metric %llu", Get<uint32_t>(image, 8));
  AGENTMEM_RETURN_IF_ERROR(hnsw::ValidateShape(shape, kCorruptIndex));
  const size_t n = Get<uint32_t>(image, 24);
  const uint32_t entry = Get<uint32_t>(image, 28);
  const int32_t max_level = Get<int32_t>(image, 32);
  const size_t deleted = Get<uint32_t>(image, 36);
  const uint64_t upper = Get<uint64_t>(image, 40);
  const uint64_t level0 = Get<uint64_t>(image, 48);
  const size_t record = Get<uint32_t>(image, 56);
  const size_t links0 = size_t{2} * shape.m * 4 + 4, links_upper = size_t{shape.m} * 4 + 4;
  const bool holds_vectors = version == kMapVersion;
  if (!holds_vectors && (vectors.rows.size() != n || vectors.scales.size() != n)) {
    return StatusF(kMisuse, "hnsw mapped image: version %u leaves the vectors out; %zu given for %zu nodes",
                   version, vectors.rows.size(), n);
  }
  if (record != links0 + (holds_vectors ? size_t{shape.dim} * 4 : 0) + 8) {
    return MapCorrupt("record size %llu", record);
  }
  if (n > hnsw::kMaxNodes || level0 % kMapAlign != 0 || upper > size ||
      level0 < kMapHeader + n + upper + 8 || level0 > size || (size - level0) / record != n ||
      (size - level0) % record != 0) {
    return MapCorrupt("sections do not fit its %llu bytes (%llu nodes)", size, n);
  }
  if ((n == 0) != (entry == kNoNode) || (n == 0 && max_level != -1) ||
      (n > 0 && (entry >= n || max_level < 0 || max_level > hnsw::kMaxLevel))) {
    return MapCorrupt("entry point %llu or top level out of range", entry);
  }
  // Each level read once, into a copy: the checks below and the graph use
  // the same values even if the image's bytes change meanwhile (in_file).
  std::vector<uint8_t> level_copy;
  try {
    level_copy.assign(reinterpret_cast<const uint8_t*>(image + kMapHeader),
                      reinterpret_cast<const uint8_t*>(image + kMapHeader) + n);
  } catch (const std::bad_alloc&) {
    return Status(kNoMem, "hnsw: out of memory in map");
  }
  const uint8_t* levels = level_copy.data();
  uint64_t upper_sum = 0;
  for (size_t i = 0; i < n; ++i) {
    if (levels[i] > max_level) return MapCorrupt("node %llu: level above the top level", i);
    upper_sum += size_t{levels[i]} * links_upper;
  }
  if (upper_sum != upper) return MapCorrupt("upper lists hold %llu bytes, not %llu", upper, upper_sum);
  if (n > 0 && levels[entry] != max_level) return MapCorrupt("entry point %llu below the top level", entry);
  // Every list: its count within bounds, each neighbour a node on that layer.
  auto check_list = [&](const char* list, size_t node, int layer, size_t max_count) -> Status {
    const uint32_t count = Get<uint32_t>(list, 0) & 0xffff;
    if (count > max_count) return MapCorrupt("node %llu: too many links (%llu)", node, count);
    for (uint32_t j = 0; j < count; ++j) {
      const uint32_t to = Get<uint32_t>(list, 4 + 4 * size_t{j});
      if (to >= n || levels[to] < layer) return MapCorrupt("node %llu: link to %llu out of range", node, to);
    }
    return Status::OK();
  };
  // The level-0 records: the same check a caller that reads the image in
  // pieces makes (hnsw_mapped.h), here over the image where it lies.
  if (!records_checked) {
    MappedRecordCheck check;
    const std::string_view bytes(image, size);
    Status s = check.Start(bytes, size);
    if (s.ok()) s = check.Feed(0, bytes);
    if (s.ok()) s = check.Finish();
    if (!s.ok()) return s;
  }
  const char* up = image + kMapHeader + n;
  for (size_t i = 0; i < n; ++i) {
    for (int layer = 1; layer <= levels[i]; ++layer, up += links_upper) {
      AGENTMEM_RETURN_IF_ERROR(check_list(up, i, layer, shape.m));
    }
  }

  HnswOptions o{shape.metric, shape.dim, shape.m, shape.ef_construction, n, default_ef};
  std::unique_ptr<Impl> impl;
  bool read_ahead = false;  // a reader thread is to read the unread vectors
  Status s = Guarded("map", [&] {
    impl = std::make_unique<Impl>(o, shape);
    impl->graph = std::make_unique<Graph>(&impl->space);  // members set below
    Graph& g = *impl->graph;
    // The destructor's fields first, so that a failure below leaves it safe.
    InitEmptyGraph(&g, shape, &impl->space);
    const size_t capacity = std::min<size_t>(hnsw::kMaxNodes, n + spare / record);
    g.max_elements_ = capacity;
    g.num_deleted_ = deleted;
    g.enterpoint_node_ = entry;
    g.maxlevel_ = max_level;
    g.element_levels_.assign(capacity, 0);
    if (holds_vectors) {
      g.vectors.assign(capacity, nullptr);
      g.scales.assign(capacity, 0.0f);
    } else {
      g.vectors = std::move(vectors.rows);
      g.scales = std::move(vectors.scales);
      g.vectors.resize(capacity);
      g.scales.resize(capacity);
    }
    g.linkLists_ = static_cast<char**>(std::malloc(std::max<size_t>(capacity, 1) * sizeof(char*)));
    if (g.linkLists_ == nullptr) throw std::bad_alloc();
    g.visited_list_pool_ =
        new hnswlib::VisitedListPool(0, static_cast<int>(std::max<size_t>(capacity, 1)));  // as in Grow
    if (!holds_vectors && vectors.read) {
      impl->unread = std::make_unique<Unread>();
      impl->unread->zeros.assign(shape.dim, 0.0f);
      impl->unread->read = std::move(vectors.read);
      impl->unread->nodes = n;
      read_ahead = vectors.read_ahead;
#ifdef AGENTMEM_TEST_HOOKS
      read_ahead &= g_read_ahead.load();
#endif
    }
    impl->region = std::move(owner);
    impl->mapped = n;
    char* lists = image + kMapHeader + n;
    if (reinterpret_cast<uintptr_t>(lists) % alignof(uint32_t) != 0) {
      impl->upper_lists.reset(new uint32_t[(upper_sum + kListSlack) / 4 + 1]());
      std::memcpy(impl->upper_lists.get(), lists, upper_sum);
      lists = reinterpret_cast<char*>(impl->upper_lists.get());
    }
    for (size_t i = 0; i < n; ++i) {
      g.element_levels_[i] = levels[i];
      if (levels[i] > 0) {
        g.linkLists_[i] = lists;
        lists += size_t{levels[i]} * links_upper;
      }
    }
    // The records as they lie in the image; the vectors in them, as the
    // graph that wrote them kept them, or where `vectors` says.
    g.size_data_per_element_ = record;
    g.label_offset_ = record - sizeof(uint64_t);
    g.data_level0_memory_ = image + level0;
    for (size_t i = 0; holds_vectors && i < n; ++i) {
      g.vectors[i] = reinterpret_cast<const float*>(image + level0 + i * record + links0);
      const float scale = KeptScale(shape.metric, Norm(g.vectors[i], shape.dim));
      g.scales[i] = scale != 0 ? scale : 1.0f;
    }
    impl->vectors_owner = std::move(vectors.owner);
    g.unread = impl->unread.get();
    impl->level0_mapped = true;
    impl->in_file = in_file;
    impl->copy_ahead = place == ImagePlace::kFileCopiedAhead;
    g.cur_element_count = n;
    return Status::OK();
  });
  if (!s.ok()) return s;
  if (read_ahead) {
    Impl* i = impl.get();
    try {
      impl->unread->reading.store(true);
      impl->unread->reader = std::thread([i] { i->ReadUnreadVectors(); });
    } catch (...) {
      impl->unread->reading.store(false);  // no thread: each vector is read when first needed
    }
  }
  return std::unique_ptr<HnswIndex>(new HnswIndex(std::move(impl)));
}

Status HnswIndex::Add(uint64_t label, std::span<const float> vector) {
  return Guarded("insert", [&] { return impl_->Add(label, vector); });
}

Status HnswIndex::AddBatch(std::span<const HnswInsert> items, unsigned threads) {
  return Guarded("batch insert", [&] { return impl_->AddBatch(items, threads); });
}

Status HnswIndex::MarkDeleted(uint64_t label) {
  return Guarded("delete", [&] { return impl_->MarkDeleted(label); });
}

#ifdef AGENTMEM_TEST_HOOKS
void HnswIndex::SetGrowFailsForTest(bool on) { g_grow_fails.store(on); }
void HnswIndex::SetReadAheadForTest(bool on) { g_read_ahead.store(on); }
#endif

Status HnswIndex::Reserve(size_t capacity) {
  return Guarded("reserve", [&] {
    std::unique_lock lock(impl_->mu);
    if (!impl_->sticky.ok()) return impl_->sticky;
    return impl_->Grow(capacity);
  });
}

Result<std::vector<Neighbor>> HnswIndex::Search(std::span<const float> query,
                                                const HnswSearchOptions& options) const {
  std::vector<Neighbor> out;
  Status s = Guarded("search", [&] {
    Result<std::vector<Neighbor>> r = impl_->Search(query, options);
    if (!r.ok()) return r.status();
    out = std::move(*r);
    return Status::OK();
  });
  if (!s.ok()) return s;
  return out;
}

bool HnswIndex::Contains(uint64_t label) const {
  std::shared_lock lock(impl_->mu);
  uint32_t node;
  return FindNode(*impl_->graph, impl_->mapped, label, &node) &&
         !impl_->graph->isMarkedDeleted(node);
}

VectorBlock HnswIndex::NodeVectors() const {
  std::shared_lock lock(impl_->mu);
  const Graph& g = *impl_->graph;
  VectorBlock b;
  b.rows = g.vectors.data();
  b.count = g.cur_element_count;
  b.dim = impl_->shape.dim;
  return b;
}

void HnswIndex::ReadVectors(std::vector<uint32_t>* nodes) const {
  std::shared_lock lock(impl_->mu);
  const Graph& g = *impl_->graph;
  if (g.unread == nullptr) return;
  for (uint32_t node : *nodes) VectorOf(g, node);
  std::erase_if(*nodes, [&](uint32_t node) { return Unreadable(g, node); });
}

bool HnswIndex::ReadingAhead() const {
  return impl_->unread != nullptr && impl_->unread->reading.load(std::memory_order_acquire);
}

uint64_t HnswIndex::NodeLabel(uint32_t node) const {
  std::shared_lock lock(impl_->mu);
  return impl_->graph->getExternalLabel(node);
}

bool HnswIndex::NodeDeleted(uint32_t node) const {
  std::shared_lock lock(impl_->mu);
  return impl_->graph->isMarkedDeleted(node);
}

size_t HnswIndex::size() const {
  std::shared_lock lock(impl_->mu);
  return impl_->graph->cur_element_count;
}

HnswStats HnswIndex::Stats() const {
  std::shared_lock lock(impl_->mu);
  const Graph& g = *impl_->graph;
  HnswStats st;
  st.nodes = g.cur_element_count;
  st.deleted = g.num_deleted_;
  st.capacity = g.max_elements_;
  st.max_level = g.cur_element_count == 0 ? -1 : g.maxlevel_;
  st.entry_node = g.cur_element_count == 0 ? UINT32_MAX : g.enterpoint_node_;
  size_t upper = 0;
  for (size_t i = 0; i < g.cur_element_count; ++i) upper += g.element_levels_[i];
  // Per slot of capacity: the level-0 record, the upper-list and vector
  // pointers, the level and a visited mark; per node: upper lists, a
  // label-map entry (about 4 words) and our change sequence number; and the
  // vectors this process holds (those of a mapped image are in its records).
  const size_t per_slot = g.size_data_per_element_ + sizeof(char*) + sizeof(float*) +
                          sizeof(int) + sizeof(hnswlib::vl_type);
  const size_t per_node = 4 * sizeof(void*) + sizeof(uint64_t);
  st.memory_bytes = g.max_elements_ * per_slot + upper * g.size_links_per_element_ +
                    g.cur_element_count * per_node + impl_->arena.bytes();
  return st;
}

const HnswOptions& HnswIndex::options() const { return impl_->options; }

void HnswIndex::set_default_ef(size_t ef) { impl_->default_ef.store(ef); }

Status HnswIndex::Serialize(std::string* out) const {
  return Guarded("serialize", [&] {
    std::shared_lock lock(impl_->mu);
    if (!impl_->sticky.ok()) return impl_->sticky;
    AGENTMEM_RETURN_IF_ERROR(CheckVectorsReadable(*impl_->graph));
    std::vector<uint32_t> all(impl_->graph->cur_element_count);
    std::iota(all.begin(), all.end(), 0u);
    hnsw::EncodeImage(impl_->View(), 0, all, out);
    return Status::OK();
  });
}

ChangeMark HnswIndex::Mark() const {
  std::shared_lock lock(impl_->mu);
  return ChangeMark{impl_->seq, static_cast<uint32_t>(impl_->graph->cur_element_count)};
}

Result<std::vector<uint32_t>> HnswIndex::NodesChangedSince(const ChangeMark& mark) const {
  std::vector<uint32_t> nodes;
  Status s = Guarded("listing changes", [&] {
    std::shared_lock lock(impl_->mu);
    AGENTMEM_RETURN_IF_ERROR(impl_->CheckMark(mark));
    nodes = impl_->ChangedSince(mark);
    return Status::OK();
  });
  if (!s.ok()) return s;
  return nodes;
}

Status HnswIndex::EncodeDelta(const ChangeMark& mark, std::string* out, bool with_vectors) const {
  return Guarded("encoding a delta", [&] {
    std::shared_lock lock(impl_->mu);
    if (!impl_->sticky.ok()) return impl_->sticky;
    AGENTMEM_RETURN_IF_ERROR(impl_->CheckMark(mark));
    hnsw::EncodeImage(impl_->View(), mark.node_count, impl_->ChangedSince(mark), out, with_vectors);
    return Status::OK();
  });
}

// The vectors an image without them leaves to its caller, as given, in
// `storage`; each record points at its own. Errors: kCorruptIndex for a label with no vector or a vector that
// is not finite.
static Status SupplyVectors(const HnswIndex::VectorLookup& vectors, const GraphShape& shape,
                            hnsw::ParsedImage* image, std::vector<float>* storage) {
  if (image->header.vectors) return Status::OK();
  const size_t dim = shape.dim;
  // Every new node's vector is looked up before the storage is sized: the
  // header's node count is a number in the file, the vectors are its bytes.
  std::vector<const float*> found;
  for (const hnsw::NodeRecordView& r : image->records) {
    if (r.node < image->header.base_count) continue;
    const float* v = vectors ? vectors(r.label) : nullptr;
    if (v == nullptr || !AllFinite(v, dim)) {
      return StatusF(kCorruptIndex, "hnsw image: node %u (label %llu): no usable vector for it",
                     r.node, static_cast<unsigned long long>(r.label));
    }
    found.push_back(v);
  }
  storage->resize(found.size() * dim);
  size_t row = 0;
  for (hnsw::NodeRecordView& r : image->records) {
    if (r.node < image->header.base_count) continue;
    const float* v = found[row];
    float* out = storage->data() + row++ * dim;
    std::copy(v, v + dim, out);
    r.vector = reinterpret_cast<const char*>(out);
  }
  return Status::OK();
}

Status HnswIndex::ApplyDelta(std::string_view image, const VectorLookup& vectors) {
  return Guarded("applying a delta", [&] {
    Result<hnsw::ImageHeader> header = hnsw::ParseImageHeader(image);
    if (!header.ok()) return header.status();
    std::unique_lock lock(impl_->mu);
    if (!impl_->sticky.ok()) return impl_->sticky;
    Result<hnsw::ParsedImage> parsed = hnsw::ParseImageBody(image, *header, impl_->View());
    if (!parsed.ok()) return parsed.status();
    std::vector<float> supplied;
    AGENTMEM_RETURN_IF_ERROR(SupplyVectors(vectors, header->shape, &*parsed, &supplied));
    return impl_->Apply(*parsed);
  });
}

}  // namespace agentmem::index

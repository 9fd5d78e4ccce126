// engine/memory/recall.h -- hybrid recall: BM25 and vector search inside a user's
// partition with filters applied inside the search, fused by reciprocal rank
// fusion (docs/architecture.md "Recall").
//
// RecallIndex holds the derived, in-memory state the searches need: one BM25
// index per user, the vectors by episode id, and per-episode filter
// attributes. The Database feeds it every committed episode, in commit order
// (so a committed episode is visible to the next recall), and asks it to
// plan and run queries.
//
// Thread safety: none; the owning Database serialises access. A hybrid
// Recall() may run its vector leg on the handle's LegWorker
// (set_leg_worker()), which only reads this index, while the calling thread
// runs the BM25 leg.
#pragma once

#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/memory/id_table.h"
#include "engine/memory/task_thread.h"
#include "engine/memory/leg_worker.h"
#include "format/checkpoint.h"
#include "format/page.h"
#include "format/records.h"
#include "format/status.h"
#include "index/text/bm25.h"
#include "index/text/builtin_embedder.h"
#include "index/text/tokenizer.h"
#include "index/vector/hnsw.h"
#include "index/vector/metric.h"

namespace agentmem::engine {

enum class RecallMode { kHybrid, kBm25, kVector };

struct RecallQuery {
  std::string user_id;
  bool all_users = false;
  std::string text;
  std::vector<float> vector;  // empty: embed `text` with the file's embedder
  size_t k = 10;
  RecallMode mode = RecallMode::kHybrid;
  std::optional<std::string> session_id;
  std::optional<std::string> role;
  int64_t ts_from = INT64_MIN;  // event time in [ts_from, ts_to)
  int64_t ts_to = INT64_MAX;
  double half_life_s = 0;  // recency weighting; 0 = off
  double min_score = 0;    // fused score below this is dropped
  // Relevance (docs/recall.md, "Relevance and thresholds"): a hit matches when
  // it is in the BM25 list with a score > 0 and >= min_bm25, or in the vector
  // list with a similarity >= min_similarity (NaN: the file's embedder's
  // floor, RecallIndex::similarity_floor()). Hits that match neither are
  // dropped, unless `fill`.
  double min_similarity = NAN;
  double min_bm25 = 0;
  // Today's always-k rule: no default floor, and when fewer than k hits are
  // left the remaining candidates fill the list in id order (score 0).
  bool fill = false;
  int rrf_k = 60;
  // Hybrid fusion (docs/recall.md says how these were chosen): each list is
  // searched this deep (at least k), and an episode's fused score is
  //   (1 - w) * bm25_score / (the list's best bm25_score)
  //   + w * (similarity - the list's lowest) / (its highest - its lowest)
  // over the lists it is in (a vector list of equal similarities counts 1).
  // w = vector_weight; below 0: the file's (VectorWeight()).
  size_t fusion_depth = 50;
  double vector_weight = -1;
  int64_t now = 0;  // for recency weighting; 0 = the clock
  // A further predicate on episode ids (the metadata filter, which needs the
  // record); it runs after the in-memory filters, inside both searches.
  std::function<bool(uint64_t)> extra_filter;
};

struct RecallHit {
  uint64_t id = 0;
  double score = 0;         // the fused score (RRF, times the recency weight)
  double bm25_score = 0;    // 0 when not in the BM25 list
  double vector_score = 0;  // similarity; 0 when not in the vector list
  int bm25_rank = 0;        // 1-based rank in the BM25 list; 0 = absent
  int vector_rank = 0;      // 1-based rank in the vector list; 0 = absent
  bool fill = false;        // not matched by either list; added to reach k
  // In the BM25 list through the context indexed with the episode (the turns
  // before it) alone: no query term is in its own text. Set for EXPLAIN.
  bool bm25_via_context = false;
};

// What a query did, for EXPLAIN RECALL.
struct RecallPlan {
  std::string mode;
  uint64_t partition = 0;  // episodes in the user's partition (all users: every episode)
  uint64_t filtered = 0;   // after session/role/time filters
  std::string candidates;  // how the candidates were held: "partition", "listed", "every episode, not listed"
  std::string bm25_path;   // "maxscore over N postings" or "skipped: …"
  std::string vector_path; // "exact scan of N vectors (simd)" / "hnsw ef=…" / "skipped: …"
  std::string legs;        // hybrid: "parallel: …" or "one thread: <why>"; else "one leg"
  size_t bm25_hits = 0;
  size_t vector_hits = 0;
  size_t fused = 0;
  size_t filled = 0;
  size_t unmatched = 0;    // hits of the lists dropped: under every threshold
};

// The EXPLAIN RECALL text of both front ends (agentmem_explain_recall and
// SQL explain_recall): one JSON object, the plan's members followed by
// "hits", an array of {id, score, bm25_rank, bm25_score, vector_rank,
// vector_score} in rank order, with "bm25_match":"context" and "fill":true
// where they apply. Numbers are written by JsonWriter (doubles round-trip).
// Throws std::bad_alloc when the string cannot grow.
std::string ExplainJson(const RecallPlan& plan, const std::vector<RecallHit>& hits);

struct EpisodeAttrs {
  static constexpr uint32_t kNoNode = UINT32_MAX;
  uint32_t user = 0;
  uint32_t session = 0;  // interned
  uint32_t role = 0;     // interned
  uint32_t node = kNoNode;  // the episode's node in the graph, which holds its vector
  int64_t ts = 0;
  bool has_vector = false;
  bool present = false;
  bool forgotten = false;  // hidden by a forget record; its graph node stays until VACUUM
};

class RecallIndex {
 public:
  // `embedder`: the file's built-in embedder, if it has one.
  RecallIndex(index::TokenizerOptions tokenizer, uint32_t dim, index::Metric metric,
              std::optional<index::BuiltinEmbedder> embedder);

  // Indexes one committed episode (filters and vector). REQUIRES: ids arrive
  // in increasing order.
  Status Add(const format::EpisodeRecord& r);
  // The same from a checkpoint's entry (no record body).
  Status AddEntry(uint64_t id, const std::string& user, const std::string& session,
                  const std::string& role, int64_t ts, bool has_vector,
                  uint32_t node = EpisodeAttrs::kNoNode);
  // The same with the names already interned (a checkpoint's many entries
  // share few names): Intern*() give their ids, once per name.
  uint32_t InternUser(const std::string& s) { return Intern(&users_, s); }
  uint32_t InternSession(const std::string& s) { return Intern(&sessions_, s); }
  uint32_t InternRole(const std::string& s) { return Intern(&roles_, s); }
  Status AddEntry(uint64_t id, uint32_t user, uint32_t session, uint32_t role, int64_t ts,
                  bool has_vector, uint32_t node);
  void ReserveEntries(uint64_t n) { attrs_.Reserve(n); }
  // Hides episodes from every search (a forget record): they leave their
  // partition and its BM25 index; a graph node stays (skipped by the walk)
  // until VACUUM writes a graph without it. Unknown or forgotten ids are
  // ignored.
  Status Forget(const std::vector<uint64_t>& ids);
  // What a checkpoint keeps of an indexed episode: its attributes with the
  // session and role by name. False if not indexed.
  bool ExportEntry(uint64_t id, const EpisodeAttrs** attrs, const std::string** session,
                   const std::string** role) const;
  // The graph as a mappable image without its vectors (nothing when there
  // is no graph): its size, then its bytes in pieces (HnswIndex::
  // EmitMappable()). And the graph taken from one in place (checkpoint
  // load; after every AddEntry): MapGraph().
  Result<size_t> GraphSize();
  Status EmitGraph(const std::function<Status(std::string_view)>& emit);
  // The BM25 indexes as frozen images, one per user with episodes, after a
  // directory (format/checkpoint.h, bm25 section); `user_string` gives each
  // user's index in the state section's string table. In two steps, so that
  // the section is never held whole: PlanBm25 lays it out (the directory and
  // the size), EmitBm25 gives its bytes in order, one image at a time. And
  // the reverse: a user's index taken from its image in place (after
  // AddEntry).
  struct Bm25Plan {
    std::vector<uint32_t> users;               // the partitions with documents, in order
    std::vector<format::Bm25Partition> parts;  // their images, as the directory lists them
    std::string directory;                     // format::EncodeBm25Directory()'s bytes
    uint64_t size = 0;                         // the directory and every image
  };
  Bm25Plan PlanBm25(const std::function<uint32_t(const std::string&)>& user_string) const;
  // Errors: a damaged image's (Bm25Index::Verify()); kInternal when an
  // image is not the size the plan gave it.
  Status EmitBm25(const Bm25Plan& plan, const std::function<Status(std::string_view)>& emit) const;
  Status AttachBm25(const std::string& user, const char* image, size_t size);
  // Checks every user's BM25 index whole (Bm25Index::Verify()), naming the
  // user of the first that fails.
  Status VerifyBm25() const;
  // The episodes' nodes come from their entries (AddEntry's `node`): every
  // node must belong to exactly one episode.
  // `records_checked`, `vectors`, `place`: as HnswIndex::Map's.
  Status MapGraph(char* image, size_t size, size_t spare, std::shared_ptr<void> owner,
                  bool records_checked = false, index::HnswIndex::MapVectors vectors = {},
                  index::HnswImagePlace place = index::HnswImagePlace::kMemory);
  // Compaction: the graph for the copy when none of its nodes is deleted or
  // hidden -- the graph itself, handed over, when each node is an episode
  // the copy keeps; a copy without the forgotten episodes' nodes
  // (HnswIndex::Without) when they are at most kRepairShare of the nodes;
  // else nullptr (the copy builds its graph). This index then has no
  // usable graph and is broken until its handle reloads.
  std::unique_ptr<index::HnswIndex> TakeGraph();
  // Whether TakeGraph would give a graph (there is none: false).
  bool CanTakeGraph();
  static constexpr double kRepairShare = 0.1;
  // The copy's side: a graph whose nodes are this index's episodes with
  // vectors, one each, in id order (TakeGraph of the file it copies).
  // REQUIRES: no graph yet. Errors: kCorruptIndex when they disagree.
  Status AdoptGraph(std::unique_ptr<index::HnswIndex> graph);
  // A user's episodes: their BM25 index and ids.
  struct UserPartition {
    index::Bm25Index bm25;
    std::vector<uint64_t> ids;  // increasing
    size_t vectors = 0;         // of ids, those with a vector
  };
  // Compaction, beside TakeGraph(): every user's BM25 index, for the copy,
  // which then tokenizes nothing: its text records are these indexes'
  // documents (TextOf()), and its checkpoint holds the indexes themselves
  // (AdoptBm25()).
  struct TakenBm25 {
    std::vector<std::pair<std::string, std::unique_ptr<UserPartition>>> users;
    std::vector<uint64_t> ids;  // every user's documents, increasing
    // The text record of episode `id`'s document, its terms in byte order;
    // false if it has none. Asked in increasing id order, it lists the
    // documents of `window` ids at a time (Bm25Index::Documents()).
    bool TextOf(uint64_t id, format::TextRecord* out);
    bool empty() const { return users.empty(); }
    size_t window = 16384;
    // The documents with ids in [from, to), every user's, by id.
    uint64_t from = 0, to = 0;
    std::vector<std::string_view> terms;
    std::vector<index::Bm25Index::DocumentTerms> docs;
    std::vector<index::Bm25Index::TermRef> postings;
  };
  // Empty when there are no episodes, when an index does not hold exactly
  // its user's live episodes or fails Verify(), or when there is no memory
  // to list them (the copy then tokenizes them).
  // Otherwise this index has no BM25 indexes left and is broken until its
  // handle reloads.
  TakenBm25 TakeBm25();
  // The copy's side, once its episodes are committed: the indexes of
  // TakeBm25() replace its own, which hold none of its documents.
  // Errors: kCorruptIndex when their users or episodes are not the copy's.
  Status AdoptBm25(TakenBm25* taken);
  // Inserts the episodes among `episodes` that have a vector but no node: a
  // committed transaction without a graph image (a compacted file, whose
  // checkpoint holds the graph, read from its first page).
  Status InsertUnlinked(const std::vector<const format::EpisodeRecord*>& episodes);
  // Keeps the graph nodes of `labels` out of every vector search (their
  // vectors could not be read: their pages are damaged). They stay waypoints.
  Status HideNodes(const std::vector<uint64_t>& labels);
  // The labels of the graph's nodes whose episodes are forgotten; false when
  // the graph cannot go to a compaction copy at all (there is none, it is
  // broken, has deleted or hidden nodes, or its nodes are not the episodes
  // with vectors in id order).
  bool ForgottenNodes(std::vector<uint64_t>* labels);
  // Adds an indexed episode's BM25 terms, as committed in the file; a later
  // text record of the same episode (its context changed: a forget) replaces
  // the earlier one.
  Status AddText(const format::TextRecord& t);
  // The BM25 terms of an episode, by the file's tokenizer (the writer's side):
  // the tokens of its text, then those of `context` (the texts of the
  // episodes before it in its session, ContextIds()).
  format::TextRecord TextFor(const format::EpisodeRecord& r,
                             std::span<const std::string> context = {}) const;
  // How many earlier turns of its session an episode's document holds (the
  // file's "context" setting; 0: its own text only).
  uint32_t context() const { return tokenizer_.options().context; }
  // The context of a new or re-indexed episode `id` of (user, session): up to
  // context() indexed episodes of that session with smaller ids, newest
  // first, skipping forgotten ones and those in `skip` (sorted).
  std::vector<uint64_t> ContextIds(const std::string& user, const std::string& session,
                                   uint64_t id, std::span<const uint64_t> skip = {}) const;
  // The indexed episodes whose context includes one of `ids` (sorted), and
  // so must be indexed again when those are forgotten: for each, the next
  // context() episodes of its session that are not in `ids`.
  std::vector<uint64_t> ContextDependents(std::span<const uint64_t> ids) const;
  // The tokens of a query, by the file's tokenizer (query stop words dropped).
  std::vector<std::string> QueryTokens(std::string_view text) const {
    return tokenizer_.TokenizeQuery(text);
  }
  std::vector<std::string> DocumentTokens(std::string_view text) const {
    return tokenizer_.Tokenize(text);
  }
  // Runs a query; `plan` (optional) receives what was done. A hybrid query
  // over more than kParallelMin candidates, without an extra_filter (which
  // reads records), runs its vector leg on `worker` when it is idle; the hits
  // are the same either way.
  Status Recall(const RecallQuery& q, std::vector<RecallHit>* hits, RecallPlan* plan);
  // The embedding the built-in embedder gives `text` (the file's dimension).
  // REQUIRES: builtin_embedder().
  std::vector<float> Embed(std::string_view text) const;
  bool builtin_embedder() const { return embedder_.has_value(); }
  // The embedder name the file records, for the message of a recall that
  // needs a query vector this index cannot compute.
  void set_space_embedder(std::string name) { space_embedder_ = std::move(name); }
  // The similarity a vector hit needs to match when the query sets no
  // min_similarity: measured per embedder (docs/recall.md), -infinity (every
  // vector hit matches) for an embedder without a measured floor.
  static double DefaultSimilarityFloor(const std::string& embedder, index::Metric metric);
  void set_similarity_floor(double floor) { similarity_floor_ = floor; }
  double similarity_floor() const { return similarity_floor_; }
  // The hybrid weight of the vector list: kHashVectorWeight for the hashing
  // embedder's vectors, whose list is weaker, else kVectorWeight.
  static constexpr double kVectorWeight = 0.2;
  static constexpr double kHashVectorWeight = 0.1;
  double VectorWeight() const {
    return embedder_ && embedder_->name() == index::HashEmbedder::kName ? kHashVectorWeight
                                                                         : kVectorWeight;
  }

  // The writer's side of the graph: inserts the vectors of a transaction's
  // episodes into the HNSW graph and returns the graph delta image to commit
  // with them (empty when none has a vector). If the commit then fails, call
  // Break(): the in-memory graph no longer matches the file.
  Status InsertForCommit(const std::vector<format::EpisodeRecord>& episodes, std::string* delta);
  // The same for a commit whose graph insert may be deferred (docs/format.md
  // §5.6): returns the delta of the graph's changes since the last delta in
  // the file -- the nodes of earlier transactions -- and then inserts this
  // transaction's vectors, with any pending ones before them, on the insert
  // worker, while the commit is written and synced. Every later call that
  // reads the graph waits for that insert first. A transaction of more than
  // kDeferVectors vectors is inserted at once instead, and its delta holds
  // its nodes too. The delta is empty only when the graph has not changed
  // and the transaction has no vector.
  // `prepared` receives the page payload that the last deferred insert made
  // ahead for this delta, if it did and the graph has not changed since
  // (then the delta is taken from it, not encoded again; TxnWriter::AddAlone
  // compares the two all the same).
  Status DeferInsertForCommit(const std::vector<format::EpisodeRecord>& episodes,
                              std::string* delta, format::StoredPayload* prepared);
  static constexpr size_t kDeferVectors = 16;
  // Waits for a deferred insert, then inserts every pending vector (each
  // transaction's as one batch, in order): the graph then holds every
  // vector, as a checkpoint or a compaction copy needs. Errors: the insert's
  // (the index is then broken).
  Status FlushGraph();
  // The graph as it is now is in the file (a checkpoint holds it): the next
  // delta holds only what changes after.
  void NoteGraphWritten();
  // The reader's side: applies a committed graph image (a delta, or a full
  // image on an empty graph). An image this handle made itself is skipped,
  // and so are the nodes of one that this handle inserted already (the
  // pending vectors of the same transactions, which give the same graph).
  // An image without vectors (a commit's delta) takes them from `vectors`
  // (the episode records of its transaction) or from the pending vectors.
  Status ApplyGraphImage(std::string_view image, int64_t page_no,
                         const index::HnswIndex::VectorLookup& vectors);
  // The episodes among `episodes` (one committed transaction, after its
  // graph images) that have a vector but no node: pending until a later
  // delta gives them one, or this handle inserts them as a writer. Vector
  // searches scan them exactly meanwhile.
  Status AddPending(const std::vector<const format::EpisodeRecord*>& episodes);
  void Break(const Status& why) { broken_ = why; }
  const Status& broken() const { return broken_; }
  // Below this many candidate vectors the planner scans exactly.
  static constexpr size_t kExactScanMax = 4096;
  static constexpr size_t kGraphEf = 64;  // search beam width of the graph path
  // Up to this many candidates a hybrid query runs both legs on the calling
  // thread: handing a short leg to the worker costs more than it saves.
  static constexpr size_t kParallelMin = kExactScanMax;
  // A search over more than this many users' BM25 indexes goes through the
  // term table (term_parts_); over fewer, each query token is looked up in
  // each index, which costs less than building the table for a few users.
  static constexpr size_t kTermTableUsers = 8;
  // The worker thread of hybrid queries (nullptr: both legs on the calling
  // thread). Not owned; it must outlive every Recall() call.
  void set_leg_worker(LegWorker* worker) { legs_ = worker; }

 private:
  // ForgottenNodes, and they are at most kRepairShare of the graph's nodes.
  bool TakableGraph(std::vector<uint64_t>* forgotten);
  bool hidden_nodes_ = false;  // HideNodes hid a live episode's node
  static bool Unfiltered(const RecallQuery& q);
  const UserPartition* Partition(const std::string& user_id) const;
  struct Names {
    std::unordered_map<std::string, uint32_t> ids;
    std::vector<std::string> names;  // by id
  };
  static uint32_t Intern(Names* table, const std::string& s);
  // An unfiltered query over every user: its candidates are every live
  // episode, which is never listed (Candidates() gives an empty span).
  static bool EveryEpisode(const RecallQuery& q) { return q.all_users && Unfiltered(q); }
  std::span<const uint64_t> Candidates(const RecallQuery& q, uint64_t* partition,
                                      std::vector<uint64_t>* storage) const;
  // Every episode of every user that passes the query's filters, in id order.
  std::vector<uint64_t> ListEveryUser(const RecallQuery& q) const;
  bool Passes(const RecallQuery& q, uint64_t id, const EpisodeAttrs& a) const;
  Status VectorQuery(const RecallQuery& q, std::vector<float>* out) const;
  void VectorSearch(const RecallQuery& q, const std::vector<float>& query,
                    std::span<const uint64_t> candidates, size_t k,
                    std::vector<index::Neighbor>* out, RecallPlan* plan) const;
  bool GraphSearch(const RecallQuery& q, const std::vector<float>& query, size_t candidates,
                   size_t k, std::vector<index::Neighbor>* out, RecallPlan* plan) const;
  // A user's index checked whole, or the damage a search read in it
  // (Bm25Index::Verify(), status()), as kCorruptIndex naming the user.
  Status VerifiedBm25(uint32_t u) const;
  static Status Bm25Damage(const UserPartition& p, const std::string& user);
  static Status OfUser(const Status& s, const std::string& user);
  // Errors: kCorruptIndex when a term the query read is damaged in a
  // user's frozen image (Bm25Index::status()).
  Status Bm25Search(const RecallQuery& q, std::span<const uint64_t> candidates, size_t k,
                    std::vector<index::ScoredDoc>* out, RecallPlan* plan) const;
  // BM25 over every user as one collection (Bm25Index::TopKAcross()),
  // through term_parts_ (built by the first such search) when there are more
  // than kTermTableUsers users.
  Status Bm25SearchEveryUser(std::span<const std::string> tokens, const index::DocFilter& filter,
                           size_t k,
                           std::vector<index::ScoredDoc>* out, RecallPlan* plan) const;
  double Similarity(float distance) const;
  // The vector leg of a query: its query vector, then VectorSearch().
  struct VectorLeg {
    VectorLeg(const RecallIndex* s, const RecallQuery* query, std::span<const uint64_t> c, size_t d)
        : self(s), q(query), candidates(c), depth(d) {}
    const RecallIndex* self;
    const RecallQuery* q;
    std::span<const uint64_t> candidates;
    size_t depth;
    Status status;  // of the query vector (VectorQuery())
    std::vector<index::Neighbor> hits;
    std::string path;  // RecallPlan::vector_path
    std::exception_ptr exception;  // thrown on the worker (RunOn())
    void Run();
    static void RunOn(void* leg);  // LegWorker's task
  };
  // Hands *leg to the worker when the query may use it (Recall()) and the
  // worker takes it: returns the worker, to Finish() or Cancel(). Else
  // returns nullptr, and *legs says why (RecallPlan::legs).
  LegWorker* StartVectorLeg(const RecallQuery& q, uint64_t candidates, VectorLeg* leg,
                            std::string* legs) const;
  // The two ranked lists merged into one hit per episode (unsorted): the
  // BM25 list's in its order, then the vector list's that it lacks.
  std::vector<RecallHit> Fuse(const RecallQuery& q, const std::vector<index::ScoredDoc>& bm25,
                              const std::vector<index::Neighbor>& vec) const;
  // With q.fill, pads *hits up to q.k with candidates not among them.
  static void Fill(const RecallQuery& q, std::span<const uint64_t> candidates,
                   std::vector<RecallHit>* hits, RecallPlan* plan);
  // Whether a fused hit matches the query's thresholds (RecallQuery).
  bool Matches(const RecallQuery& q, const RecallHit& h) const;
  // Records the graph node of each episode inserted since the last call.
  void SyncNodes();
  // Waits for the deferred insert in flight, if any: the graph and the
  // episodes' nodes are then current (a failed insert breaks the index).
  // Every call that reads the graph starts with it.
  void Settle();
  // Puts `graph` in graph_'s place (dropping a delta made from the old one).
  void SetGraph(std::unique_ptr<index::HnswIndex> graph);
  // A delta's page payload made ahead, and the marks it goes between.
  struct PreparedDelta {
    format::StoredPayload payload;
    index::ChangeMark from, to;
  };
  // The page payload of the delta from `from` to the graph as it is, into
  // *out (its payload left empty if that fails): run by a deferred insert.
  static void PrepareDelta(const index::HnswIndex& graph, const index::ChangeMark& from,
                           PreparedDelta* out) noexcept;
  // The pending vectors not yet handed to the insert thread, one batch per
  // transaction in order, at most `most` batches; they are marked as handed.
  std::vector<std::vector<index::HnswInsert>> TakePendingBatches(size_t most = SIZE_MAX);
  // Drops the pending vectors whose episodes have a node now.
  void PrunePending();
  // The graph, made empty if there is none yet.
  Status EnsureGraph();
  // Inserts the episodes' vectors as one batch, on this thread. REQUIRES: a
  // graph, no pending vector before them, nothing in flight.
  Status InsertEpisodes(const std::vector<format::EpisodeRecord>& episodes);
  // Inserts the pending vectors not handed to the insert thread (the first
  // `batches` transactions' of them), one batch per transaction, on this
  // thread. REQUIRES: a graph, nothing in flight.
  Status InsertPending(size_t batches = SIZE_MAX);
  // The pending vectors among a query's candidates (or, for every episode,
  // those passing its filters), by episode id; and the nearest k of them to
  // `query`, scored as the graph's walk (`graph_path`) or its exact scan
  // scores a vector.
  std::vector<uint64_t> PendingMatches(const RecallQuery& q,
                                       std::span<const uint64_t> candidates) const;
  std::vector<index::Neighbor> ScorePending(std::span<const uint64_t> ids,
                                            const std::vector<float>& query, size_t k,
                                            bool graph_path) const;
  // Whether each episode with a vector has a node of a graph of `nodes`
  // nodes, in id order (node order is id order, as inserts make it).
  bool NodesAgree(size_t nodes) const;

  index::Tokenizer tokenizer_;
  uint32_t dim_;
  index::Metric metric_;
  std::optional<index::BuiltinEmbedder> embedder_;
  std::string space_embedder_;
  double similarity_floor_ = -INFINITY;
  IdTable<EpisodeAttrs> attrs_;
  // Which users' BM25 indexes hold each term (index/text/term_parts.h; part
  // numbers are user indexes), so that a search over every user looks a
  // query token up only in the indexes that hold it. Built from every
  // partition by the first such search over more than kTermTableUsers
  // users (under term_parts_mu_: searches are
  // const), null until then; from then on every partition is attached and
  // keeps it exact through its inserts, removals and frozen images. Its
  // memory: 4 bytes per (term, user) pair, each of which is at least one
  // posting, plus about 80 bytes per distinct term of the file.
  mutable std::mutex term_parts_mu_;
  mutable std::unique_ptr<index::Bm25TermParts> term_parts_;
  std::vector<std::unique_ptr<UserPartition>> partitions_;  // by user index
  Names users_, sessions_, roles_;
  // The episodes of each (user, session), increasing; forgotten ones leave.
  // Only kept when context() > 0.
  static uint64_t SessionKey(uint32_t user, uint32_t session) {
    return (uint64_t{user} << 32) | session;
  }
  std::unordered_map<uint64_t, std::vector<uint64_t>> session_ids_;
  uint64_t episodes_ = 0;
  // Every user's vectors, held once: the exact scans read them from the
  // graph's node records too. Built by commits.
  std::unique_ptr<index::HnswIndex> graph_;
  size_t synced_nodes_ = 0;  // graph nodes whose episode knows its node
  // Where the graph's deltas in the file reach: a delta holds the changes
  // after it.
  index::ChangeMark delta_mark_;
  // The vectors of committed episodes without a node yet (AddPending, and a
  // deferred insert's own until it is done), by episode id, with the
  // sequence number of their transaction: a transaction's vectors are
  // inserted as one batch, as their writer inserts them.
  struct Pending {
    uint64_t txn = 0;
    std::vector<float> vector;  // as committed
    std::vector<float> kept;  // as the graph keeps it (HnswIndex::KeepCopy)
    float scale = 1.0f;       // and its scale
    bool inserting = false;     // handed to the insert thread
  };
  Pending NewPending(uint64_t txn, const std::vector<float>& vector) const;
  std::map<uint64_t, Pending> pending_;
  uint64_t pending_txns_ = 0;
  // The next delta's page payload, made by a deferred insert after it ran
  // (encoding and compression are the most costly part of a small commit's
  // encoding): written by the insert thread, taken by the next
  // DeferInsertForCommit. Of use only for the graph it was made from: every
  // change of the graph moves its mark, and SetGraph drops it.
  PreparedDelta prepared_delta_;
  // Runs the deferred inserts; declared after graph_ and prepared_delta_, so
  // that it is joined before they go.
  TaskThread inserter_{"the graph insert of the last commit"};
  LegWorker* legs_ = nullptr;
  Status broken_;
};

}  // namespace agentmem::engine

// engine/recall.h -- hybrid recall: BM25 and vector search inside a user's
// partition with filters applied inside the search, fused by reciprocal rank
// fusion (docs/architecture.md "Recall").
//
// RecallIndex holds the derived, in-memory state the searches need: one BM25
// index per user, the vectors by episode id, and per-episode filter
// attributes. The Database feeds it every committed episode, in commit order
// (so a committed episode is visible to the next recall), and asks it to
// plan and run queries.
//
// Thread safety: none; the owning Database serialises access.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

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
  int rrf_k = 60;
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
};

// What a query did, for EXPLAIN RECALL.
struct RecallPlan {
  std::string mode;
  uint64_t partition = 0;  // episodes in the user's partition (all users: every episode)
  uint64_t filtered = 0;   // after session/role/time filters
  std::string bm25_path;   // "maxscore over N postings" or "skipped: …"
  std::string vector_path; // "exact scan of N vectors (simd)" / "hnsw ef=…" / "skipped: …"
  size_t bm25_hits = 0;
  size_t vector_hits = 0;
  size_t fused = 0;
  size_t filled = 0;
  std::string ToJson() const;
};

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
  void ReserveEntries(uint64_t n) { attrs_.reserve(n); }
  // Hides episodes from every search (a forget record): they leave their
  // partition and its BM25 index; a graph node stays (skipped by the walk)
  // until VACUUM writes a graph without it. Unknown or forgotten ids are
  // ignored.
  Status Forget(const std::vector<uint64_t>& ids);
  // What a checkpoint keeps of an indexed episode: its attributes with the
  // session and role by name. False if not indexed.
  bool ExportEntry(uint64_t id, const EpisodeAttrs** attrs, const std::string** session,
                   const std::string** role) const;
  // The graph as a mappable image (empty when there is no graph), and the
  // graph taken from one in place (checkpoint load; after every AddEntry).
  Status SerializeGraph(std::string* out) const;
  // A full graph image (Serialize, for a kGraph page) of the episodes that
  // are not forgotten: the graph itself when none of its nodes is, else a
  // graph built again from their vectors, in id order. Empty: no vectors.
  Status GraphImageWithout(std::string* out) const;
  // The BM25 indexes as frozen images, one per user with episodes, appended
  // to *body after a directory (format/checkpoint.h, bm25 section); `user_string`
  // gives each user's index in the state section's string table. And the
  // reverse: a user's index taken from its image in place (after AddEntry).
  void SerializeBm25(const std::function<uint32_t(const std::string&)>& user_string,
                     std::string* body) const;
  Status AttachBm25(const std::string& user, const char* image, size_t size);
  // The episodes' nodes come from their entries (AddEntry's `node`): every
  // node must belong to exactly one episode.
  // `records_checked`: as HnswIndex::Map's.
  Status MapGraph(char* image, size_t size, size_t spare, std::shared_ptr<void> owner,
                  bool records_checked = false);
  // Adds an indexed episode's BM25 terms, as committed in the file.
  Status AddText(const format::TextRecord& t);
  // The BM25 terms of an episode, by the file's tokenizer (the writer's side).
  format::TextRecord TextFor(const format::EpisodeRecord& r) const;
  // Runs a query; `plan` (optional) receives what was done.
  Status Recall(const RecallQuery& q, std::vector<RecallHit>* hits, RecallPlan* plan) const;
  // The embedding the built-in embedder gives `text` (the file's dimension).
  // REQUIRES: builtin_embedder().
  std::vector<float> Embed(std::string_view text) const;
  bool builtin_embedder() const { return embedder_.has_value(); }
  const float* VectorOf(uint64_t id) const;

  // The writer's side of the graph: inserts the vectors of a transaction's
  // episodes into the HNSW graph and returns the graph delta image to commit
  // with them (empty when none has a vector). If the commit then fails, call
  // Break(): the in-memory graph no longer matches the file.
  Status InsertForCommit(const std::vector<format::EpisodeRecord>& episodes, std::string* delta);
  // The reader's side: applies a committed graph image (a delta, or a full
  // image on an empty graph). An image this handle made itself is skipped.
  // An image without vectors (a commit's delta) takes them from `vectors`:
  // the episode records of its transaction.
  Status ApplyGraphImage(std::string_view image, int64_t page_no,
                         const index::HnswIndex::VectorLookup& vectors);
  void Break(const Status& why) { broken_ = why; }
  const Status& broken() const { return broken_; }
  // Below this many candidate vectors the planner scans exactly.
  static constexpr size_t kExactScanMax = 4096;
  static constexpr size_t kGraphEf = 64;  // search beam width of the graph path

 private:
  struct UserPartition {
    index::Bm25Index bm25;
    std::vector<uint64_t> ids;  // increasing
    size_t vectors = 0;         // of ids, those with a vector
  };
  static bool Unfiltered(const RecallQuery& q);
  const UserPartition* Partition(const std::string& user_id) const;
  struct Names {
    std::unordered_map<std::string, uint32_t> ids;
    std::vector<std::string> names;  // by id
  };
  static uint32_t Intern(Names* table, const std::string& s);
  std::span<const uint64_t> Candidates(const RecallQuery& q, uint64_t* partition,
                                      std::vector<uint64_t>* storage) const;
  bool Passes(const RecallQuery& q, const EpisodeAttrs& a) const;
  Status VectorQuery(const RecallQuery& q, std::vector<float>* out) const;
  void VectorSearch(const RecallQuery& q, const std::vector<float>& query,
                    std::span<const uint64_t> candidates, size_t k,
                    std::vector<index::Neighbor>* out, RecallPlan* plan) const;
  bool GraphSearch(const RecallQuery& q, const std::vector<float>& query, size_t candidates,
                   size_t k, std::vector<index::Neighbor>* out, RecallPlan* plan) const;
  void Bm25Search(const RecallQuery& q, std::span<const uint64_t> candidates, size_t k,
                  std::vector<index::ScoredDoc>* out, RecallPlan* plan) const;
  double Similarity(float distance) const;
  // Records the graph node of each episode inserted since the last call.
  void SyncNodes();

  index::Tokenizer tokenizer_;
  uint32_t dim_;
  index::Metric metric_;
  std::optional<index::BuiltinEmbedder> embedder_;
  std::vector<EpisodeAttrs> attrs_;  // by id - 1
  std::vector<std::unique_ptr<UserPartition>> partitions_;  // by user index
  Names users_, sessions_, roles_;
  uint64_t episodes_ = 0;
  // Every user's vectors, held once: the exact scans read them from the
  // graph's node records too. Built by commits.
  std::unique_ptr<index::HnswIndex> graph_;
  size_t synced_nodes_ = 0;  // graph nodes whose episode knows its node
  Status broken_;
};

}  // namespace agentmem::engine

// engine/memory/options.h -- open options and their parsing from the C ABI's option
// string ("sync=normal&busy_timeout=2000", see include/agentmem.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "engine/storage/log.h"
#include "format/records.h"
#include "format/status.h"
#include "index/text/tokenizer.h"

namespace agentmem::engine {

class Env;


// The vector space of a file: recorded at creation, checked on every write.
// The defaults are what a file that records none has; a new file opened
// without vector space options gets DefaultSpace().
struct VectorSpace {
  std::string embedder = "agentmem-hash-v1";
  uint32_t dim = 384;
  std::string metric = "cosine";  // cosine | ip | l2
  std::string type = "f32";       // how episode records store vectors: f32 | f16 | int8
  bool operator==(const VectorSpace&) const = default;
  // Whether vectors of `o` mean what this space's do: the same embedder,
  // dimension and metric, however each file stores them.
  bool SameVectors(const VectorSpace& o) const {
    return embedder == o.embedder && dim == o.dim && metric == o.metric;
  }
};

// The episode record component type of a vector type name (VectorSpace::type);
// false for a name this version does not know.
bool StoredVectorType(const std::string& name, format::VectorType* out);

inline index::TokenizerOptions NewFileTokenizer() {
  index::TokenizerOptions t;
  t.snowball = true;
  t.query_stop_words = true;
  t.context = 2;
  t.own_weight = 3;
  return t;
}

struct Options {
  bool read_only = false;
  bool create = true;
  SyncMode sync = SyncMode::kFull;
  int busy_timeout_ms = 5000;
  VectorSpace space;
  bool space_given = false;  // the caller named a vector space explicitly
  // Which parts of it ParseOptions() saw; space_given with none of these set
  // means all three (a space set as a whole).
  bool embedder_given = false;
  bool dim_given = false;
  bool metric_given = false;
  bool type_given = false;  // vector_type
  // Recorded at creation, like the vector space. A new file stems with
  // Snowball, drops the query stop words from queries and indexes each
  // episode with the two turns before it in its session, its own text
  // counting three times (docs/recall.md).
  index::TokenizerOptions tokenizer = NewFileTokenizer();
  bool tokenizer_given = false;
  uint64_t max_text_bytes = 8u << 20;
  uint32_t page_size = 4096;
  // The page cache's budget (like SQLite's cache_size): N > 0 pages of the
  // file's page_size, N < 0 -N KiB, 0 no cache. Default: Pager::kDefaultBudget.
  int64_t cache_size = -static_cast<int64_t>(Pager::kDefaultBudget / 1024);
  // A writable close folds the log into a checkpoint (docs/architecture.md,
  // "Checkpoints") once at least this many bytes were committed after the
  // last one; 0 never checkpoints. A commit does so once the bytes after the
  // last checkpoint reach 16 times this and the size of that checkpoint.
  uint64_t checkpoint_bytes = 4u << 20;
  // A writable close compacts the file (VACUUM; docs/lifecycle.md) when more
  // of its episode records are forgotten than live (at least 1,000 of them):
  // forgotten bytes never make up more than about half of the episodes' space.
  bool auto_vacuum = true;
  // Threads of a hybrid recall: 2 runs its vector leg on the handle's worker
  // thread while the caller's thread runs the BM25 leg (RecallIndex::Recall);
  // 1 runs both legs on the caller's thread.
  int recall_threads = 2;
  Env* env = nullptr;  // nullptr = Env::Posix()
  // For tests that need identical bytes (the format.md golden file): a fixed
  // salt for a new file (0 = random) and a clock (null = the system clock).
  uint64_t salt = 0;
  std::function<int64_t()> clock;
};

// Parses "key=value" pairs separated by '&' or ';' into *opts (which keeps its
// other fields). Errors: kMisuse naming the unknown key or bad value.
Status ParseOptions(const char* text, Options* opts);

const char* SyncModeName(SyncMode m);

// The vector space of a new file opened without vector space options:
// agentmem-glove-v2 (100, cosine, f16) when this library has its table, else
// agentmem-hash-v1 (384, cosine, f32).
VectorSpace DefaultSpace();

// The vector space a new file gets from `opts`. A part not named takes its
// default: the embedder is DefaultSpace()'s, or agentmem-hash-v1 when only a
// dimension is named (the built-in embedder of any dimension); the dimension
// is the embedder's own (100 for agentmem-glove-v1, else 384); the metric
// cosine; the type f16 for a built-in GloVe embedder, else f32.
VectorSpace NewFileSpace(const Options& opts);

// Whether a file that records `recorded` is what `opts` asks for: every part
// of the vector space the caller named is equal.
bool SpaceMatches(const Options& opts, const VectorSpace& recorded);

// The parts of the vector space `opts` names, as options ("embedder=x&vector_dim=8").
std::string AskedSpace(const Options& opts);

// The open options that create a file of vector space `s`
// ("embedder=x&vector_dim=8&vector_metric=cosine").
std::string SpaceOpenOptions(const VectorSpace& s);

// The open options that create a file with text analysis `t`
// ("tokenizer=unicode&stem=snowball&stop_words=query&context=2&own_weight=3"),
// or "" when no options give it (token lengths other than min 1 / max 0, or
// both stop lists, or both stemmers, which only older files record).
std::string TokenizerOpenOptions(const index::TokenizerOptions& t);

}  // namespace agentmem::engine

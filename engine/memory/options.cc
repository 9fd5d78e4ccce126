// engine/memory/options.cc -- option string parsing.
#include "engine/memory/options.h"

#include <charconv>
#include <string_view>

#include "index/text/glove_embedder.h"
#include "index/text/hash_embedder.h"

namespace agentmem::engine {
namespace {

bool ParseU64(std::string_view v, uint64_t lo, uint64_t hi, uint64_t* out) {
  uint64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi) return false;
  *out = x;
  return true;
}

Status Bad(std::string_view key, std::string_view value, const char* expect) {
  return StatusF(kMisuse, "option %.*s=%.*s: expected %s", static_cast<int>(key.size()),
                 key.data(), static_cast<int>(value.size()), value.data(), expect);
}

Status ApplyOne(std::string_view key, std::string_view value, Options* o) {
  uint64_t n = 0;
  if (key == "sync") {
    if (value == "full") o->sync = SyncMode::kFull;
    else if (value == "normal") o->sync = SyncMode::kNormal;
    else if (value == "off") o->sync = SyncMode::kOff;
    else return Bad(key, value, "full, normal or off");
  } else if (key == "busy_timeout") {
    if (!ParseU64(value, 0, 3600000, &n)) return Bad(key, value, "milliseconds 0..3600000");
    o->busy_timeout_ms = static_cast<int>(n);
  } else if (key == "vector_dim") {
    if (!ParseU64(value, 1, 65536, &n)) return Bad(key, value, "a dimension 1..65536");
    o->space.dim = static_cast<uint32_t>(n);
    o->space_given = o->dim_given = true;
  } else if (key == "vector_metric") {
    if (value != "cosine" && value != "ip" && value != "l2") return Bad(key, value, "cosine, ip or l2");
    o->space.metric = std::string(value);
    o->space_given = o->metric_given = true;
  } else if (key == "vector_type") {
    format::VectorType t;
    if (!StoredVectorType(std::string(value), &t)) return Bad(key, value, "f32, f16 or int8");
    o->space.type = std::string(value);
    o->space_given = o->type_given = true;
  } else if (key == "embedder") {
    if (value.empty() || value.size() > 200) return Bad(key, value, "a name of 1..200 bytes");
    o->space.embedder = std::string(value);
    o->space_given = o->embedder_given = true;
  } else if (key == "tokenizer") {
    if (value == "unicode") o->tokenizer.alphabet = index::Alphabet::kUnicode;
    else if (value == "ascii") o->tokenizer.alphabet = index::Alphabet::kAscii;
    else return Bad(key, value, "unicode or ascii");
    o->tokenizer_given = true;
  } else if (key == "stem") {
    if (value != "0" && value != "1" && value != "snowball") return Bad(key, value, "0, 1 or snowball");
    o->tokenizer.stem = value == "1";
    o->tokenizer.snowball = value == "snowball";
    o->tokenizer_given = true;
  } else if (key == "stop_words") {
    if (value != "0" && value != "1" && value != "query") return Bad(key, value, "0, 1 or query");
    o->tokenizer.stop_words = value == "1";
    o->tokenizer.query_stop_words = value == "query";
    o->tokenizer_given = true;
  } else if (key == "context") {
    if (!ParseU64(value, 0, index::TokenizerOptions::kMaxContext, &n)) return Bad(key, value, "0..8");
    o->tokenizer.context = static_cast<uint32_t>(n);
    o->tokenizer_given = true;
  } else if (key == "own_weight") {
    if (!ParseU64(value, 1, index::TokenizerOptions::kMaxOwnWeight, &n)) return Bad(key, value, "1..8");
    o->tokenizer.own_weight = static_cast<uint32_t>(n);
    o->tokenizer_given = true;
  } else if (key == "max_text_bytes") {
    if (!ParseU64(value, 1, 512u << 20, &n)) return Bad(key, value, "bytes 1..536870912");
    o->max_text_bytes = n;
  } else if (key == "checkpoint_bytes") {
    if (!ParseU64(value, 0, uint64_t{1} << 40, &n)) return Bad(key, value, "bytes 0..2^40 (0: never)");
    o->checkpoint_bytes = n;
  } else if (key == "auto_vacuum") {
    if (!ParseU64(value, 0, 1, &n)) return Bad(key, value, "0 or 1");
    o->auto_vacuum = n == 1;
  } else if (key == "recall_threads") {
    if (!ParseU64(value, 1, 2, &n)) return Bad(key, value, "1 or 2");
    o->recall_threads = static_cast<int>(n);
  } else if (key == "cache_size") {
    // At most 2^40 bytes either way: pages (<= 64 KiB each) or KiB.
    const bool kib = !value.empty() && value[0] == '-';
    if (!ParseU64(kib ? value.substr(1) : value, 0, uint64_t{1} << 24, &n)) {
      return Bad(key, value, "pages 0..16777216, or -KiB down to -16777216");
    }
    o->cache_size = kib ? -static_cast<int64_t>(n) : static_cast<int64_t>(n);
  } else if (key == "page_size") {
    if (!ParseU64(value, 512, 65536, &n) || (n & (n - 1))) return Bad(key, value, "a power of two 512..65536");
    o->page_size = static_cast<uint32_t>(n);
  } else {
    return StatusF(kMisuse, "unknown option \"%.*s\" (known: sync, busy_timeout, vector_dim, vector_type, "
                   "vector_metric, embedder, tokenizer, stem, stop_words, context, own_weight, max_text_bytes, page_size, "
                   "cache_size, checkpoint_bytes, auto_vacuum, recall_threads)",
                   static_cast<int>(key.size()), key.data());
  }
  return Status::OK();
}

}  // namespace

Status ParseOptions(const char* text, Options* opts) {
  if (text == nullptr) return Status::OK();
  std::string_view rest(text);
  while (!rest.empty()) {
    size_t end = rest.find_first_of("&;");
    std::string_view item = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return StatusF(kMisuse, "option \"%.*s\": expected key=value", static_cast<int>(item.size()),
                     item.data());
    }
    AGENTMEM_RETURN_IF_ERROR(ApplyOne(item.substr(0, eq), item.substr(eq + 1), opts));
  }
  if (opts->embedder_given && opts->dim_given &&
      index::GloveEmbedder::VersionOf(opts->space.embedder) &&
      opts->space.dim != index::GloveEmbedder::kDimension) {
    return StatusF(kMisuse, "option vector_dim=%u: %s has %u dimensions", opts->space.dim,
                   opts->space.embedder.c_str(), index::GloveEmbedder::kDimension);
  }
  return Status::OK();
}

// A new file of a built-in GloVe embedder stores its vectors as float16: the
// embedder sums a table of 8-bit components, so a float32 copy of its output
// holds no more than its float16 rounding does (docs/recall.md, "Stored as
// float16"). Any other embedder, and vectors the application gives, keep
// float32 unless vector_type says otherwise.
static std::string DefaultType(const std::string& embedder) {
  return index::GloveEmbedder::VersionOf(embedder) ? "f16" : "f32";
}

VectorSpace DefaultSpace() {
  if (index::GloveTable::HasLinked()) {
    return VectorSpace{std::string(index::GloveEmbedder::kName), index::GloveEmbedder::kDimension,
                       "cosine", DefaultType(std::string(index::GloveEmbedder::kName))};
  }
  return VectorSpace{std::string(index::HashEmbedder::kName), 384, "cosine"};
}

// Whether the options name fields of the space (vector_dim, ...) rather
// than setting it whole (Options::space assigned by the caller).
static bool SpaceFieldsGiven(const Options& o) {
  return o.embedder_given || o.dim_given || o.metric_given || o.type_given;
}

VectorSpace NewFileSpace(const Options& o) {
  if (!o.space_given) return DefaultSpace();
  if (!SpaceFieldsGiven(o)) return o.space;
  VectorSpace s;
  s.embedder = o.embedder_given ? o.space.embedder
               : o.dim_given    ? std::string(index::HashEmbedder::kName)
                                : DefaultSpace().embedder;
  s.dim = o.dim_given                                  ? o.space.dim
          : index::GloveEmbedder::VersionOf(s.embedder) ? index::GloveEmbedder::kDimension
                                                       : 384;
  s.metric = o.metric_given ? o.space.metric : "cosine";
  s.type = o.type_given ? o.space.type : DefaultType(s.embedder);
  return s;
}

bool SpaceMatches(const Options& o, const VectorSpace& recorded) {
  if (!o.space_given) return true;
  if (!SpaceFieldsGiven(o)) return recorded == o.space;
  return (!o.embedder_given || recorded.embedder == o.space.embedder) &&
         (!o.dim_given || recorded.dim == o.space.dim) &&
         (!o.metric_given || recorded.metric == o.space.metric) &&
         (!o.type_given || recorded.type == o.space.type);
}

std::string AskedSpace(const Options& o) {
  const bool all = !SpaceFieldsGiven(o);
  std::string out;
  auto add = [&](const char* key, const std::string& value) {
    out += (out.empty() ? "" : "&") + std::string(key) + "=" + value;
  };
  if (all || o.embedder_given) add("embedder", o.space.embedder);
  if (all || o.dim_given) add("vector_dim", std::to_string(o.space.dim));
  if (all || o.metric_given) add("vector_metric", o.space.metric);
  if ((all && o.space.type != "f32") || o.type_given) add("vector_type", o.space.type);
  return out;
}

const char* SyncModeName(SyncMode m) {
  switch (m) {
    case SyncMode::kFull: return "full";
    case SyncMode::kNormal: return "normal";
    case SyncMode::kOff: return "off";
  }
  return "?";
}

std::string SpaceOpenOptions(const VectorSpace& s) {
  return "embedder=" + s.embedder + "&vector_dim=" + std::to_string(s.dim) +
         "&vector_metric=" + s.metric + (s.type == "f32" ? "" : "&vector_type=" + s.type);
}

std::string TokenizerOpenOptions(const index::TokenizerOptions& t) {
  if (t.min_token_chars != 1 || t.max_token_chars != 0 || (t.stop_words && t.query_stop_words) ||
      (t.stem && t.snowball)) {
    return "";
  }
  std::string o = t.alphabet == index::Alphabet::kAscii ? "tokenizer=ascii" : "tokenizer=unicode";
  o += t.snowball ? "&stem=snowball" : t.stem ? "&stem=1" : "&stem=0";
  o += t.stop_words ? "&stop_words=1" : t.query_stop_words ? "&stop_words=query" : "&stop_words=0";
  o += "&context=" + std::to_string(t.context) + "&own_weight=" + std::to_string(t.own_weight);
  return o;
}

bool StoredVectorType(const std::string& name, format::VectorType* out) {
  if (name == "f32") {
    *out = format::VectorType::kF32;
  } else if (name == "f16") {
    *out = format::VectorType::kF16;
  } else if (name == "int8") {
    *out = format::VectorType::kInt8;
  } else {
    return false;
  }
  return true;
}

}  // namespace agentmem::engine

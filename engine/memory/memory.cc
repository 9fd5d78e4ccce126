// engine/memory/memory.cc -- context assembly, profile, export and import over the
// public Database API (engine/memory/memory.h; docs/memory.md states every rule).
//
// Nothing here may throw past its function but std::bad_alloc: the C ABI's
// Guard treats an escaping exception as a half-done operation and poisons the
// handle. The import's checking phase turns a field that is missing or of the
// wrong type into kMismatchJson naming the line. JSON is written with
// JsonWriter and read as tokens (engine/json/json_reader.h), never as an
// nlohmann::json tree, whose destructor allocates: a failed allocation must
// stay std::bad_alloc (AGENTMEM_NOMEM), not std::terminate.
#include "engine/memory/memory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "engine/json/json_reader.h"
#include "engine/json/json_writer.h"
#include "index/text/bm25.h"
#include "index/text/builtin_embedder.h"
#include "index/text/tokenizer.h"

namespace agentmem::engine {

namespace {

using format::BlockRecord;
using format::EpisodeRecord;
using format::FactRecord;
using format::kForever;

constexpr int kExportVersion = 3;  // written; 1 and 2 are read too
constexpr size_t kTopFacts = 10;  // facts listed in a profile

// The user's current facts: valid now and known now (not superseded), as
// Database::QueryFacts answers by default (docs/lifecycle.md).
Status CurrentFacts(Database* db, const std::string& user, std::vector<FactRecord>* out) {
  FactQuery q;
  q.user_id = user;
  return db->QueryFacts(q, out);
}

std::string FactText(const FactRecord& f) {
  return f.subject + " " + f.predicate + " " + f.object;
}

// ---------------------------------------------------------------- base64 (RFC 4648, padded)

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = uint32_t{p[i]} << 16;
    if (i + 1 < n) v |= uint32_t{p[i + 1]} << 8;
    if (i + 2 < n) v |= p[i + 2];
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < n ? kB64[(v >> 6) & 63] : '=';
    out += i + 2 < n ? kB64[v & 63] : '=';
  }
  return out;
}

bool Unbase64(std::string_view in, std::string* out) {
  if (in.size() % 4) return false;
  out->clear();
  uint32_t v = 0;
  int bits = 0;
  for (size_t i = 0; i < in.size(); i++) {
    char c = in[i];
    if (c == '=') {
      if (i + 2 < in.size() || (i + 1 < in.size() && in[i + 1] != '=')) return false;
      break;
    }
    const char* at = std::strchr(kB64, c);
    if (!at || c == '\0') return false;
    v = (v << 6) | static_cast<uint32_t>(at - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((v >> bits) & 0xff));
    }
  }
  return true;
}

// ---------------------------------------------------------------- embeddings

// The built-in embedder of the file's vector space, when it has one.
std::optional<index::BuiltinEmbedder> BuiltinEmbedder(const Database& db) {
  return index::BuiltinEmbedder::For(db.space().embedder, db.space().dim);
}

// The vector an episode would get from the file if it were remembered
// without one: the built-in embedding of its text, or none.
std::vector<float> DefaultVector(const std::optional<index::BuiltinEmbedder>& e,
                                 const std::string& text) {
  return e ? e->Embed(text) : std::vector<float>();
}

// A confidence as the shortest decimal that reads back as the same float
// (checked through double, as the importer reads it).
double ConfidenceNumber(float f) {
  char buf[32];
  for (int prec = 1; prec <= 9; prec++) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(f));
    double d = std::strtod(buf, nullptr);
    if (static_cast<float>(d) == f) return d;
  }
  return static_cast<double>(f);
}

void TimeOrNull(JsonWriter* w, const char* key, int64_t t) {
  w->Key(key);
  if (t == kForever) {
    w->Null();
  } else {
    w->Int(t);
  }
}

}  // namespace

// ==================================================================== context

uint32_t EstimateTokens(std::string_view text) {
  return static_cast<uint32_t>((text.size() + 3) / 4);
}

namespace {

// What is left of the budget; takes an item if it fits.
class ContextBuilder {
 public:
  ContextBuilder(int64_t budget, std::vector<ContextItem>* out) : left_(budget), out_(out) {}
  void Offer(ContextKind kind, uint64_t id, std::string name, std::string text,
             std::string reason) {
    uint32_t tokens = EstimateTokens(text);
    if (tokens > left_) return;  // skipped; a later, smaller item may still fit
    left_ -= tokens;
    out_->push_back({kind, id, std::move(name), std::move(text), tokens, std::move(reason)});
  }

 private:
  int64_t left_;
  std::vector<ContextItem>* out_;
};

Status OfferPinnedBlocks(Database* db, const std::string& user, ContextBuilder* b) {
  std::vector<BlockRecord> blocks;
  AGENTMEM_RETURN_IF_ERROR(db->ListBlocks(user, &blocks));  // one per name: each at most once
  std::erase_if(blocks, [](const BlockRecord& r) { return r.pinned_order < 0; });
  std::stable_sort(blocks.begin(), blocks.end(), [](const BlockRecord& a, const BlockRecord& c) {
    return a.pinned_order < c.pinned_order;  // ListBlocks gives name order within an order
  });
  for (BlockRecord& r : blocks) {
    std::string reason = "pinned block " + r.name;
    b->Offer(ContextKind::kBlock, r.version, r.name, std::move(r.value), std::move(reason));
  }
  return Status::OK();
}

// The user's current facts, most relevant first: BM25 of the query over each
// fact's "subject predicate object" (an index built here, over these facts
// alone), then confidence, then id. bm25_rank[i] is 1-based, 0 = no match.
void RankFacts(const std::string& query, std::vector<FactRecord>* facts,
               std::vector<int>* bm25_rank) {
  index::Tokenizer tok;
  index::Bm25Index bm25;
  for (size_t i = 0; i < facts->size(); i++) {
    std::vector<std::string> tokens = tok.Tokenize(FactText((*facts)[i]));
    (void)bm25.Add(i, tokens);  // ids are distinct; cannot fail
  }
  std::vector<std::string> q = tok.Tokenize(query);
  std::vector<double> score(facts->size(), 0.0);
  for (const index::ScoredDoc& d : bm25.TopKBruteForce(q, facts->size())) {
    score[d.doc_id] = d.score;
  }
  std::vector<size_t> order(facts->size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t c) {
    const FactRecord &fa = (*facts)[a], &fc = (*facts)[c];
    if (score[a] != score[c]) return score[a] > score[c];
    if (fa.confidence != fc.confidence) return fa.confidence > fc.confidence;
    return fa.id < fc.id;
  });
  std::vector<FactRecord> sorted;
  bm25_rank->clear();
  int rank = 0;
  for (size_t i : order) {
    sorted.push_back(std::move((*facts)[i]));
    bm25_rank->push_back(score[i] > 0 ? ++rank : 0);
  }
  *facts = std::move(sorted);
}

Status OfferCurrentFacts(Database* db, const std::string& user, const std::string& query,
                         ContextBuilder* b) {
  std::vector<FactRecord> facts;
  AGENTMEM_RETURN_IF_ERROR(CurrentFacts(db, user, &facts));
  std::vector<int> rank;
  RankFacts(query, &facts, &rank);
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < facts.size(); i++) {
    std::string text = FactText(facts[i]);
    if (!seen.insert(text).second) continue;  // the same s/p/o once
    char reason[96];
    if (rank[i] > 0) {
      std::snprintf(reason, sizeof reason, "current fact, bm25 rank %d", rank[i]);
    } else {
      std::snprintf(reason, sizeof reason, "current fact, confidence %.2f",
                    static_cast<double>(facts[i].confidence));
    }
    b->Offer(ContextKind::kFact, facts[i].id, "", std::move(text), reason);
  }
  return Status::OK();
}

// Episodes asked of recall: enough to fill the budget with short turns.
size_t RecallDepth(int64_t budget) {
  return static_cast<size_t>(std::clamp<int64_t>(budget / 16, 20, 1000));
}

std::string RankText(const char* list, int rank) {
  return rank > 0 ? std::string(list) + " #" + std::to_string(rank) : std::string(list) + " -";
}

Status OfferRecalledEpisodes(Database* db, const std::string& user, const std::string& query,
                             int64_t budget, ContextBuilder* b) {
  RecallQuery q;
  q.user_id = user;
  q.text = query;
  q.k = RecallDepth(budget);
  q.mode = RecallMode::kHybrid;
  std::vector<RecallHit> hits;
  AGENTMEM_RETURN_IF_ERROR(db->Recall(q, &hits, nullptr));
  std::unordered_set<uint64_t> seen;
  int rank = 0;
  for (const RecallHit& h : hits) {
    if (h.fill) break;  // matched by neither list: not relevant, only filler
    rank++;
    if (!seen.insert(h.id).second) continue;
    EpisodeRecord e;
    AGENTMEM_RETURN_IF_ERROR(db->GetEpisode(h.id, &e));
    std::string reason = "recall rank " + std::to_string(rank) + ": " +
                         RankText("bm25", h.bm25_rank) + ", " + RankText("vector", h.vector_rank);
    b->Offer(ContextKind::kEpisode, h.id, "", std::move(e.text), std::move(reason));
  }
  return Status::OK();
}

}  // namespace

Status AssembleContext(Database* db, const std::string& user_id, const std::string& query,
                       int64_t token_budget, std::vector<ContextItem>* out) {
  out->clear();
  if (token_budget < 0) return Status(kRange, "context token budget must be >= 0");
  ContextBuilder b(token_budget, out);
  AGENTMEM_RETURN_IF_ERROR(OfferPinnedBlocks(db, user_id, &b));
  AGENTMEM_RETURN_IF_ERROR(OfferCurrentFacts(db, user_id, query, &b));
  return OfferRecalledEpisodes(db, user_id, query, token_budget, &b);
}

// ==================================================================== profile

Status ProfileJson(Database* db, const std::string& user_id, std::string* json) {
  std::vector<uint64_t> ids;
  AGENTMEM_RETURN_IF_ERROR(db->ListEpisodeIds(user_id, nullptr, &ids));
  std::set<std::string> sessions;
  std::map<std::string, uint64_t> roles;
  std::optional<int64_t> first, last;
  for (uint64_t id : ids) {
    EpisodeRecord e;
    AGENTMEM_RETURN_IF_ERROR(db->GetEpisode(id, &e));
    sessions.insert(e.session_id);
    roles[e.role]++;
    first = first ? std::min(*first, e.ts) : e.ts;
    last = last ? std::max(*last, e.ts) : e.ts;
  }
  std::vector<BlockRecord> blocks;
  AGENTMEM_RETURN_IF_ERROR(db->ListBlocks(user_id, &blocks));
  uint64_t versions = 0, pinned = 0;
  for (const BlockRecord& b : blocks) {
    std::vector<BlockRecord> history;
    AGENTMEM_RETURN_IF_ERROR(db->ListBlockHistory(user_id, b.name, &history));
    versions += history.size();
    pinned += b.pinned_order >= 0;
  }
  std::vector<FactRecord> facts;
  AGENTMEM_RETURN_IF_ERROR(db->ListFacts(user_id, nullptr, nullptr, &facts));
  size_t all_facts = facts.size();
  AGENTMEM_RETURN_IF_ERROR(CurrentFacts(db, user_id, &facts));
  std::sort(facts.begin(), facts.end(),
            [](const FactRecord& a, const FactRecord& b) { return a.id < b.id; });
  std::stable_sort(facts.begin(), facts.end(), [](const FactRecord& a, const FactRecord& b) {
    return a.confidence > b.confidence;  // ties stay in id order
  });

  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Field("user_id", user_id);
  w.Field("episodes", ids.size());
  w.Field("sessions", sessions.size());
  w.Key("roles");
  w.BeginObject();
  for (const auto& [role, n] : roles) w.Field(role, n);
  w.EndObject();
  for (auto [key, t] : {std::pair{"first_ts", first}, std::pair{"last_ts", last}}) {
    w.Key(key);
    if (t) {
      w.Int(*t);
    } else {
      w.Null();
    }
  }
  w.Field("blocks", blocks.size());
  w.Field("pinned_blocks", pinned);
  w.Field("block_versions", versions);
  w.Field("facts", all_facts);
  w.Field("current_facts", facts.size());
  w.Key("top_facts");
  w.BeginArray();
  for (size_t i = 0; i < facts.size() && i < kTopFacts; i++) {
    const FactRecord& f = facts[i];
    w.BeginObject();
    w.Field("id", f.id);
    w.Field("subject", f.subject);
    w.Field("predicate", f.predicate);
    w.Field("object", f.object);
    w.Field("confidence", ConfidenceNumber(f.confidence));
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  *json = std::move(out);
  return Status::OK();
}

// ==================================================================== export

namespace {

// Each line is one JSON object and its '\n'. user_id null: the whole file.
void HeaderLine(const Database& db, const std::string* user_id, std::string* out) {
  uint64_t next_episode = 0, next_fact = 0, next_version = 0;
  db.NextIds(&next_episode, &next_fact, &next_version);
  JsonWriter w(out);
  w.BeginObject();
  w.Field("type", "agentmem-export");
  w.Field("version", kExportVersion);
  w.Field("scope", user_id ? "user" : "file");
  if (user_id) w.Field("user_id", *user_id);
  w.Field("embedder", db.space().embedder);
  w.Field("dim", db.space().dim);
  w.Field("metric", db.space().metric);
  if (db.space().type != "f32") w.Field("vector_type", db.space().type);
  w.Field("tokenizer", index::TokenizerConfigString(db.RecordedTokenizer()));
  w.Field("next_episode_id", next_episode);
  w.Field("next_fact_id", next_fact);
  w.Field("next_block_version", next_version);
  w.EndObject();
  *out += '\n';
}

// Stored metadata goes into the line as the JSON value it is, byte for byte,
// when that keeps the line one line and reads back the same: no line break
// (JSON allows one between tokens) and no white space around the value.
bool RawMetadataFits(const std::string& m) {
  auto space = [](char c) { return c == ' ' || c == '\t'; };
  return !m.empty() && m.find_first_of("\r\n") == std::string::npos && !space(m.front()) &&
         !space(m.back());
}

void EpisodeLine(const EpisodeRecord& e, const std::optional<index::BuiltinEmbedder>& builtin,
                 std::string* out) {
  JsonWriter w(out);
  w.BeginObject();
  w.Field("type", "episode");
  w.Field("user_id", e.user_id);
  w.Field("id", e.id);
  w.Field("session_id", e.session_id);
  w.Field("role", e.role);
  w.Field("ts", e.ts);
  w.Field("created_at", e.created_at);
  w.Field("text", e.text);
  if (RawMetadataFits(e.metadata)) {
    w.Key("metadata");
    w.Raw(e.metadata);
  } else if (!e.metadata.empty()) {
    w.Field("metadata_text", e.metadata);
  }
  // Omitted when it is what the file would compute again from the text, as
  // it stores it.
  std::vector<float> computed = DefaultVector(builtin, e.text);
  format::RoundToStored(e.vector_type, computed);
  if (e.vector != computed) {
    w.Field("embedding", Base64(e.vector.data(), e.vector.size() * sizeof(float)));
  }
  w.EndObject();
  *out += '\n';
}

void BlockLine(const BlockRecord& b, std::string* out) {
  JsonWriter w(out);
  w.BeginObject();
  w.Field("type", "block");
  w.Field("user_id", b.user_id);
  w.Field("name", b.name);
  w.Field("version", b.version);
  w.Field("value", b.value);
  w.Field("limit", b.limit);
  w.Field("pinned_order", b.pinned_order);
  w.Field("updated_at", b.updated_at);
  w.EndObject();
  *out += '\n';
}

void FactLine(const FactRecord& f, std::string* out) {
  JsonWriter w(out);
  w.BeginObject();
  w.Field("type", "fact");
  w.Field("user_id", f.user_id);
  w.Field("id", f.id);
  w.Field("subject", f.subject);
  w.Field("predicate", f.predicate);
  w.Field("object", f.object);
  w.Field("confidence", ConfidenceNumber(f.confidence));
  w.Key("source_episode_ids");
  w.BeginArray();
  for (uint64_t id : f.source_episode_ids) w.Uint(id);
  w.EndArray();
  w.Field("valid_from", f.valid_from);
  TimeOrNull(&w, "valid_to", f.valid_to);
  w.Field("recorded_at", f.recorded_at);
  TimeOrNull(&w, "expired_at", f.expired_at);
  w.EndObject();
  *out += '\n';
}

// The file's settings: declared predicates (by name), then the retention
// policy when one is set.
void SettingLines(const Database& db, std::string* out) {
  std::vector<std::pair<std::string, bool>> predicates;
  db.DeclaredPredicates(&predicates);
  for (const auto& [name, single] : predicates) {
    JsonWriter w(out);
    w.BeginObject();
    w.Field("type", "predicate");
    w.Field("predicate", name);
    w.Field("single_valued", single);
    w.EndObject();
    *out += '\n';
  }
  int64_t max_age_s = 0;
  bool keep_cited = false;
  db.Retention(&max_age_s, &keep_cited);
  if (max_age_s != 0 || keep_cited) {
    JsonWriter w(out);
    w.BeginObject();
    w.Field("type", "retention");
    w.Field("max_age_s", max_age_s);
    w.Field("keep_cited", keep_cited);
    w.EndObject();
    *out += '\n';
  }
}

// One user's memory (user_id) or the whole file's (nullptr).
Status ExportPinned(Database* db, const std::string* user_id, std::string* jsonl) {
  std::string out;
  HeaderLine(*db, user_id, &out);
  std::vector<std::string> users;
  if (user_id) {
    users.push_back(*user_id);
  } else {
    AGENTMEM_RETURN_IF_ERROR(db->ListUsers(&users));
    SettingLines(*db, &out);
  }
  std::optional<index::BuiltinEmbedder> builtin = BuiltinEmbedder(*db);
  std::vector<uint64_t> ids;
  for (const std::string& user : users) {
    std::vector<uint64_t> more;
    AGENTMEM_RETURN_IF_ERROR(db->ListEpisodeIds(user, nullptr, &more));
    ids.insert(ids.end(), more.begin(), more.end());
  }
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) {
    EpisodeRecord e;
    AGENTMEM_RETURN_IF_ERROR(db->GetEpisode(id, &e));
    EpisodeLine(e, builtin, &out);
  }
  std::vector<BlockRecord> versions;
  for (const std::string& user : users) {
    std::vector<BlockRecord> blocks;
    AGENTMEM_RETURN_IF_ERROR(db->ListBlocks(user, &blocks));
    for (const BlockRecord& b : blocks) {
      std::vector<BlockRecord> history;
      AGENTMEM_RETURN_IF_ERROR(db->ListBlockHistory(user, b.name, &history));
      for (BlockRecord& v : history) versions.push_back(std::move(v));
    }
  }
  std::sort(versions.begin(), versions.end(),
            [](const BlockRecord& a, const BlockRecord& b) { return a.version < b.version; });
  for (const BlockRecord& v : versions) BlockLine(v, &out);
  std::vector<FactRecord> facts;
  for (const std::string& user : users) {
    std::vector<FactRecord> more;
    AGENTMEM_RETURN_IF_ERROR(db->ListFacts(user, nullptr, nullptr, &more));
    for (FactRecord& f : more) facts.push_back(std::move(f));
  }
  std::sort(facts.begin(), facts.end(),
            [](const FactRecord& a, const FactRecord& b) { return a.id < b.id; });
  for (const FactRecord& f : facts) FactLine(f, &out);
  *jsonl = std::move(out);
  return Status::OK();
}

// Every read of one export sees one snapshot.
Status Export(Database* db, const std::string* user_id, std::string* jsonl) {
  jsonl->clear();
  ReadPin pin;
  AGENTMEM_RETURN_IF_ERROR(pin.Begin(db));
  return ExportPinned(db, user_id, jsonl);
}

}  // namespace

Status ExportUser(Database* db, const std::string& user_id, std::string* jsonl) {
  return Export(db, &user_id, jsonl);
}

Status ExportFile(Database* db, std::string* jsonl) { return Export(db, nullptr, jsonl); }

// ==================================================================== import

namespace {

// What an import will write, after every line was checked.
struct ImportPlan {
  std::vector<EpisodeRecord> episodes;  // sorted by id before writing
  std::vector<BlockRecord> blocks;      // in line order
  std::vector<FactRecord> facts;        // sorted by id before writing
  uint64_t skipped = 0;
  // Settings that differ from the file's (the last line of each wins).
  std::map<std::string, bool> predicates;
  std::optional<std::pair<int64_t, bool>> retention;  // max_age_s, keep_cited
  // The largest next ids of the headers (version 2); 1 = none.
  uint64_t next_episode = 1, next_fact = 1, next_block_version = 1;
};

// The raw text of member `key` of the JSON object `line` (already checked to
// be one by ParseJson), white space around it left out; the last one when the
// key is repeated. False when there is no such member.
class RawScanner {
 public:
  explicit RawScanner(std::string_view s) : s_(s) {}
  bool Member(std::string_view key, std::string_view* raw) {
    bool found = false;
    size_t p = Ws(0);
    if (p >= s_.size() || s_[p] != '{') return false;
    p = Ws(p + 1);
    JsonTokens name;
    while (p < s_.size() && s_[p] == '"') {
      size_t key_end = String(p);
      if (!ParseJson(s_.substr(p, key_end - p), &name) || name.empty()) return false;
      p = Ws(key_end);
      if (p >= s_.size() || s_[p] != ':') return false;
      size_t begin = Ws(p + 1), end = Value(begin);
      if (name[0].s == key) {
        *raw = s_.substr(begin, end - begin);
        found = true;
      }
      p = Ws(end);
      if (p < s_.size() && s_[p] == ',') p = Ws(p + 1);
    }
    return found;
  }

 private:
  size_t Ws(size_t p) const {
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n' || s_[p] == '\r')) p++;
    return p;
  }
  // Past the string that starts at p (its opening quote).
  size_t String(size_t p) const {
    for (p++; p < s_.size() && s_[p] != '"'; p++) {
      if (s_[p] == '\\') p++;
    }
    return std::min(p + 1, s_.size());
  }
  size_t Value(size_t p) const {
    if (p >= s_.size()) return p;
    if (s_[p] == '"') return String(p);
    if (s_[p] == '{' || s_[p] == '[') {
      size_t depth = 0;
      while (p < s_.size()) {
        char c = s_[p];
        if (c == '"') {
          p = String(p);
          continue;
        }
        p++;
        if (c == '{' || c == '[') depth++;
        if ((c == '}' || c == ']') && --depth == 0) break;
      }
      return p;
    }
    while (p < s_.size() && std::strchr(",}] \t\r\n", s_[p]) == nullptr) p++;
    return p;
  }
  std::string_view s_;
};

// A field that is missing or of the wrong type, or an integer out of range;
// CheckLine reports it as kMismatchJson naming the line. `j` below is a line
// as read by ParseJson: an object, at index 0.
struct FieldError {
  std::string what;
};

[[noreturn]] void Wrong(const char* key, const char* must) {
  throw FieldError{std::string("\"") + key + "\" " + must};
}

const JsonToken& At(const JsonTokens& j, const char* key) {
  size_t v = JsonMember(j, 0, key);
  if (v == kNoJsonValue) Wrong(key, "is missing");
  return j[v];
}

std::string Text(const JsonTokens& j, const char* key) {
  const JsonToken& v = At(j, key);
  if (v.kind != JsonToken::kString) Wrong(key, "must be a string");
  return v.s;
}

// An integer field that must fit T exactly (no wrap-around of -1 into a uint).
template <typename T>
T IntValue(const JsonToken& v, const char* key) {
  if (v.kind == JsonToken::kUint && std::in_range<T>(v.u)) return static_cast<T>(v.u);
  if (v.kind == JsonToken::kInt && std::in_range<T>(v.i)) return static_cast<T>(v.i);
  Wrong(key, "must be an integer in range");
}

template <typename T>
T Int(const JsonTokens& j, const char* key) {
  return IntValue<T>(At(j, key), key);
}

// A number of any kind, converted as nlohmann's get<double>() converted it.
double Number(const JsonTokens& j, const char* key) {
  const JsonToken& v = At(j, key);
  if (v.kind == JsonToken::kDouble) return v.d;
  if (v.kind == JsonToken::kInt) return static_cast<double>(v.i);
  if (v.kind == JsonToken::kUint) return static_cast<double>(v.u);
  Wrong(key, "must be a number");
}

bool Bool(const JsonTokens& j, const char* key) {
  const JsonToken& v = At(j, key);
  if (v.kind != JsonToken::kBool) Wrong(key, "must be true or false");
  return v.b;
}

// A next id of a header: at least 1, below 2^63.
uint64_t NextId(const JsonTokens& j, const char* key) {
  uint64_t v = Int<uint64_t>(j, key);
  if (v < 1 || v > static_cast<uint64_t>(INT64_MAX)) Wrong(key, "must be an integer in range");
  return v;
}

// A time that may be null: the open end of a range.
int64_t TimeOrForever(const JsonTokens& j, const char* key) {
  const JsonToken& v = At(j, key);
  if (v.kind == JsonToken::kNull) return kForever;
  int64_t t = IntValue<int64_t>(v, key);
  if (t == 0) Wrong(key, "must not be 0 (the engine reads 0 as a default, not as a time)");
  return t;
}

// A time: not 0, which the engine's writes read as "now" (or "never"), so
// that a record would not read back as it was written.
int64_t Time(const JsonTokens& j, const char* key) {
  int64_t t = Int<int64_t>(j, key);
  if (t == 0) Wrong(key, "must not be 0 (the engine reads 0 as a default, not as a time)");
  return t;
}

// `s` naming the line it refuses, when its message does not already.
Status AtLine(size_t line_no, Status s) {
  if (s.ok() || s.message().rfind("import line ", 0) == 0) return s;
  return StatusF(s.code(), "import line %zu: %s", line_no, s.message().c_str());
}

class Importer {
 public:
  Importer(Database* db, bool new_ids)
      : db_(db), builtin_(BuiltinEmbedder(*db)), new_ids_(new_ids) {}

  Status CheckLine(size_t line_no, std::string_view line) {
    if (!ParseJson(line, &line_) || line_[0].kind != JsonToken::kBeginObject) {
      return StatusF(kMismatchJson, "import line %zu: not a JSON object", line_no);
    }
    line_text_ = line;
    line_no_ = line_no;
    try {
      return CheckRecord(line_no, line_);
    } catch (const FieldError& e) {
      return StatusF(kMismatchJson, "import line %zu: %s", line_no, e.what.c_str());
    }
  }

  Status Write(ImportCounts* counts);

 private:
  Status CheckRecord(size_t line_no, const JsonTokens& j) {
    std::string type = Text(j, "type");
    if (type == "agentmem-export") return CheckHeader(line_no, j);
    if (!header_seen_) {
      return StatusF(kMismatchJson, "import line %zu: records must follow an export header line",
                     line_no);
    }
    if (type == "episode") return CheckEpisode(line_no, j);
    if (type == "block") return CheckBlock(j);
    if (type == "fact") return CheckFact(line_no, j);
    if (type == "predicate") return CheckPredicate(j);
    if (type == "retention") return CheckRetention(j);
    return StatusF(kMismatchJson, "import line %zu: unknown record type \"%s\"", line_no,
                   type.c_str());
  }

  Status CheckHeader(size_t line_no, const JsonTokens& j) {
    int version = Int<int>(j, "version");
    if (version < 1 || version > kExportVersion) {
      return StatusF(kMismatchJson, "import line %zu: export version %d is unknown (this "
                     "library reads versions 1 to %d)", line_no, version, kExportVersion);
    }
    if (version >= 2) {
      std::string scope = Text(j, "scope");
      if (scope != "file" && scope != "user") Wrong("scope", "must be \"file\" or \"user\"");
      if (scope == "user") (void)Text(j, "user_id");
      plan_.next_episode = std::max(plan_.next_episode, NextId(j, "next_episode_id"));
      plan_.next_fact = std::max(plan_.next_fact, NextId(j, "next_fact_id"));
      plan_.next_block_version =
          std::max(plan_.next_block_version, NextId(j, "next_block_version"));
    }
    version_ = version;
    // How each file stores its vectors (vector_type) is its own: an import
    // stores the export's values as this file stores any vector.
    VectorSpace s{Text(j, "embedder"), Int<uint32_t>(j, "dim"),
                  Text(j, "metric")};
    if (!s.SameVectors(db_->space())) {
      return StatusF(kMismatch,
                     "import line %zu: the export's vector space %s/%u/%s differs from this "
                     "file's %s/%u/%s; import it into a new file created with the open "
                     "options \"%s\"",
                     line_no, s.embedder.c_str(), s.dim, s.metric.c_str(),
                     db_->space().embedder.c_str(), db_->space().dim,
                     db_->space().metric.c_str(), SpaceOpenOptions(s).c_str());
    }
    if (version >= 3) AGENTMEM_RETURN_IF_ERROR(CheckTokenizer(line_no, Text(j, "tokenizer")));
    header_seen_ = true;
    return Status::OK();
  }

  // The export's text analysis must be the file's: its text records are
  // the tokens of the file's tokenizer, and recall would differ.
  Status CheckTokenizer(size_t line_no, const std::string& config) {
    auto parsed = index::ParseTokenizerConfig(config);
    if (!parsed.ok()) Wrong("tokenizer", "must be a tokenizer this library knows");
    const index::TokenizerOptions mine = db_->RecordedTokenizer();
    if (parsed.value() == mine) return Status::OK();
    const std::string options = TokenizerOpenOptions(parsed.value());
    return StatusF(kMismatch,
                   "import line %zu: the export's tokenizer \"%s\" differs from this file's "
                   "\"%s\"; import it into a new file created with %s%s%s",
                   line_no, config.c_str(), index::TokenizerConfigString(mine).c_str(),
                   options.empty() ? "that tokenizer" : "the open options \"",
                   options.c_str(), options.empty() ? "" : "\"");
  }

  Status CheckEpisode(size_t line_no, const JsonTokens& j) {
    EpisodeRecord r;
    r.id = Int<uint64_t>(j, "id");
    r.user_id = Text(j, "user_id");
    r.session_id = Text(j, "session_id");
    r.role = Text(j, "role");
    r.ts = Time(j, "ts");
    r.created_at = Time(j, "created_at");
    r.text = Text(j, "text");
    if (version_ == 1) {
      r.metadata = Text(j, "metadata");  // the JSON text as a string
    } else if (JsonMember(j, 0, "metadata") != kNoJsonValue) {
      if (JsonMember(j, 0, "metadata_text") != kNoJsonValue) {
        Wrong("metadata", "and \"metadata_text\" cannot both be given");
      }
      std::string_view raw;
      if (!RawScanner(line_text_).Member("metadata", &raw)) Wrong("metadata", "is unreadable");
      r.metadata = raw;
    } else if (JsonMember(j, 0, "metadata_text") != kNoJsonValue) {
      r.metadata = Text(j, "metadata_text");
    }
    if (JsonMember(j, 0, "embedding") != kNoJsonValue) {
      std::string bytes;
      if (!Unbase64(Text(j, "embedding"), &bytes) || bytes.size() % 4) {
        return StatusF(kMismatchJson, "import line %zu: embedding is not base64 of float32s",
                       line_no);
      }
      r.vector.resize(bytes.size() / 4);
      std::memcpy(r.vector.data(), bytes.data(), bytes.size());
    } else {
      r.vector = DefaultVector(builtin_, r.text);
    }
    // As the file would store it, so that an episode already present (a
    // float16 file importing its own export) compares equal.
    AGENTMEM_RETURN_IF_ERROR(AtLine(line_no, db_->AsStored(&r.vector)));
    // A line without a vector on a file whose model is the application's
    // (agentmem_create_embedder): the file's vector is that model's, whatever
    // it is, so a present episode is compared without its vector.
    const bool any_vector = r.vector.empty() && db_->has_embedder();
    if (r.id == 0) return StatusF(kMismatchJson, "import line %zu: episode id 0", line_no);
    auto [it, fresh] = episodes_.try_emplace(r.id, r);
    if (!fresh) {
      if (format::SameContent(it->second, r)) return Status::OK();  // repeated in this import
      return StatusF(kConstraint, "import line %zu: episode %llu appears twice, different",
                     line_no, static_cast<unsigned long long>(r.id));
    }
    if (new_ids_) return CheckEpisodeByContent(std::move(r), any_vector);
    EpisodeRecord have;
    Status s = db_->GetEpisode(r.id, &have);
    if (s.ok()) {
      if (any_vector) have.vector.clear();
      if (format::SameContent(have, r)) {
        plan_.skipped++;
        return Status::OK();
      }
      return StatusF(kConstraint, "import line %zu: episode %llu exists with different content",
                     line_no, static_cast<unsigned long long>(r.id));
    }
    if (s.code() != kNotFound) return s;
    if (r.id < db_->episode_id_limit()) {
      return StatusF(kConstraint,
                     "import line %zu: episode id %llu is below this file's next id %llu (it "
                     "was used and is gone)",
                     line_no, static_cast<unsigned long long>(r.id),
                     static_cast<unsigned long long>(db_->episode_id_limit()));
    }
    episode_line_[r.id] = line_no_;
    plan_.episodes.push_back(std::move(r));
    return Status::OK();
  }

  // Everything of an episode but its id (and, without `with_vector`, its
  // vector), as one string.
  static std::string ContentKey(const EpisodeRecord& e, bool with_vector = true) {
    std::string key = with_vector ? "v" : "t";
    for (const std::string* f : {&e.session_id, &e.role, &e.text, &e.metadata}) {
      key += std::to_string(f->size()) + ':' + *f;
    }
    key += std::to_string(e.ts) + ':' + std::to_string(e.created_at) + ':';
    if (with_vector) {
      key.append(reinterpret_cast<const char*>(e.vector.data()),
                 e.vector.size() * sizeof(float));
    }
    return key;
  }

  // New ids: the episode is present when one of the user's episodes has the
  // same content; else it is written under the next id. id_map_ records what
  // its exported id becomes (0 until written).
  Status CheckEpisodeByContent(EpisodeRecord r, bool any_vector) {
    auto [users, fresh] = contents_.try_emplace(r.user_id);
    if (fresh) {
      std::vector<uint64_t> ids;
      AGENTMEM_RETURN_IF_ERROR(db_->ListEpisodeIds(r.user_id, nullptr, &ids));
      for (uint64_t id : ids) {
        EpisodeRecord e;
        AGENTMEM_RETURN_IF_ERROR(db_->GetEpisode(id, &e));
        users->second.emplace(ContentKey(e), id);
        if (db_->has_embedder()) users->second.emplace(ContentKey(e, false), id);
      }
    }
    auto found = users->second.find(ContentKey(r, !any_vector));
    if (found != users->second.end()) {
      id_map_[r.id] = found->second;
      plan_.skipped++;
      return Status::OK();
    }
    id_map_[r.id] = 0;
    episode_line_[r.id] = line_no_;
    plan_.episodes.push_back(std::move(r));
    return Status::OK();
  }

  // New ids: the exported source ids as they are in this file; false when
  // one of them is an episode this import writes (so the fact is new too).
  // A source that is not in the import is dropped.
  bool MapSources(std::vector<uint64_t>* sources) const {
    std::vector<uint64_t> mapped;
    bool known = true;
    for (uint64_t id : *sources) {
      auto it = id_map_.find(id);
      if (it == id_map_.end()) continue;
      if (it->second == 0) known = false;
      mapped.push_back(it->second);
    }
    *sources = std::move(mapped);
    return known;
  }

  // New ids: the fact is present when one of the user's facts equals it but
  // for the id (or holds a later state of it).
  Status CheckFactByContent(size_t line_no, FactRecord r) {
    auto [it, fresh] = new_facts_.try_emplace(r.id, r);
    if (!fresh) {
      if (it->second == r) return Status::OK();  // repeated in this import
      return StatusF(kConstraint, "import line %zu: fact %llu appears twice, different",
                     line_no, static_cast<unsigned long long>(r.id));
    }
    FactRecord mapped = r;
    if (MapSources(&mapped.source_episode_ids)) {
      std::map<uint64_t, FactRecord>* have = nullptr;
      AGENTMEM_RETURN_IF_ERROR(Facts(r.user_id, &have));
      for (const auto& [id, f] : *have) {
        mapped.id = id;
        if (f == mapped || LaterState(f, mapped)) {
          plan_.skipped++;
          return Status::OK();
        }
      }
    }
    fact_line_[r.id] = line_no_;
    plan_.facts.push_back(std::move(r));
    return Status::OK();
  }

  // The versions a block has in the file and in this import so far.
  Status History(const std::string& user, const std::string& name,
                 std::vector<BlockRecord>** out) {
    auto key = std::make_pair(user, name);
    auto it = blocks_.find(key);
    if (it == blocks_.end()) {
      std::vector<BlockRecord> h;
      AGENTMEM_RETURN_IF_ERROR(db_->ListBlockHistory(user, name, &h));
      it = blocks_.emplace(key, std::move(h)).first;
    }
    *out = &it->second;
    return Status::OK();
  }

  static bool SameVersion(const BlockRecord& a, const BlockRecord& b) {
    return a.value == b.value && a.limit == b.limit && a.pinned_order == b.pinned_order &&
           a.updated_at == b.updated_at;
  }

  Status CheckBlock(const JsonTokens& j) {
    BlockRecord r;
    r.user_id = Text(j, "user_id");
    r.name = Text(j, "name");
    if (version_ >= 2) r.version = Int<uint64_t>(j, "version");
    r.value = Text(j, "value");
    r.limit = Int<uint32_t>(j, "limit");
    r.pinned_order = Int<int32_t>(j, "pinned_order");
    r.updated_at = Time(j, "updated_at");
    std::vector<BlockRecord>* history = nullptr;
    AGENTMEM_RETURN_IF_ERROR(History(r.user_id, r.name, &history));
    for (const BlockRecord& v : *history) {
      if (SameVersion(v, r)) {
        plan_.skipped++;
        return Status::OK();
      }
    }
    history->push_back(r);
    block_line_.push_back(line_no_);
    plan_.blocks.push_back(std::move(r));
    return Status::OK();
  }

  // `have` is a later state of the fact `r` is: the same fact, since superseded
  // (superseding only ever closes a fact's transaction time, keeping its id).
  static bool LaterState(const FactRecord& have, const FactRecord& r) {
    FactRecord closed = r;
    closed.expired_at = have.expired_at;
    return have.expired_at < r.expired_at && have == closed;
  }

  // The user's facts in the file, by id.
  Status Facts(const std::string& user, std::map<uint64_t, FactRecord>** out) {
    auto it = facts_.find(user);
    if (it == facts_.end()) {
      std::vector<FactRecord> list;
      AGENTMEM_RETURN_IF_ERROR(db_->ListFacts(user, nullptr, nullptr, &list));
      std::map<uint64_t, FactRecord> by_id;
      for (FactRecord& f : list) by_id.emplace(f.id, std::move(f));
      it = facts_.emplace(user, std::move(by_id)).first;
    }
    *out = &it->second;
    return Status::OK();
  }

  Status CheckFact(size_t line_no, const JsonTokens& j) {
    FactRecord r;
    r.id = Int<uint64_t>(j, "id");
    r.user_id = Text(j, "user_id");
    r.subject = Text(j, "subject");
    r.predicate = Text(j, "predicate");
    r.object = Text(j, "object");
    r.confidence = static_cast<float>(Number(j, "confidence"));
    const JsonToken& sources = At(j, "source_episode_ids");
    if (sources.kind != JsonToken::kBeginArray) Wrong("source_episode_ids", "must be an array");
    for (size_t p = &sources - j.data() + 1; j[p].kind != JsonToken::kEndArray;
         p = JsonValueEnd(j, p)) {
      r.source_episode_ids.push_back(IntValue<uint64_t>(j[p], "source_episode_ids"));
    }
    r.valid_from = Time(j, "valid_from");
    r.valid_to = TimeOrForever(j, "valid_to");
    r.recorded_at = Time(j, "recorded_at");
    r.expired_at = TimeOrForever(j, "expired_at");
    if (r.id == 0) return StatusF(kMismatchJson, "import line %zu: fact id 0", line_no);
    if (new_ids_) return CheckFactByContent(line_no, std::move(r));
    std::map<uint64_t, FactRecord>* have = nullptr;
    AGENTMEM_RETURN_IF_ERROR(Facts(r.user_id, &have));
    auto [it, fresh] = have->try_emplace(r.id, r);
    if (!fresh) {
      // The file reports only the sources it still remembers: compare with
      // the line's sources read the same way.
      const FactRecord shown = Remembered(r);
      if (it->second == r || LaterState(it->second, r) || it->second == shown ||
          LaterState(it->second, shown)) {
        plan_.skipped++;
        return Status::OK();
      }
      return StatusF(kConstraint, "import line %zu: fact %llu exists with different content",
                     line_no, static_cast<unsigned long long>(r.id));
    }
    fact_line_[r.id] = line_no_;
    plan_.facts.push_back(std::move(r));
    return Status::OK();
  }

  Status CheckPredicate(const JsonTokens& j) {
    std::string name = Text(j, "predicate");
    if (name.empty()) Wrong("predicate", "must not be empty");
    bool single = Bool(j, "single_valued");
    std::vector<std::pair<std::string, bool>> declared;
    db_->DeclaredPredicates(&declared);
    auto it = std::find_if(declared.begin(), declared.end(),
                           [&](const auto& d) { return d.first == name; });
    if (it != declared.end() && it->second == single) {
      plan_.predicates.erase(name);
    } else {
      plan_.predicates[name] = single;
      predicate_line_[name] = line_no_;
    }
    return Status::OK();
  }

  Status CheckRetention(const JsonTokens& j) {
    int64_t max_age_s = Int<int64_t>(j, "max_age_s");
    if (max_age_s < 0) Wrong("max_age_s", "must be >= 0");
    bool keep_cited = Bool(j, "keep_cited");
    int64_t have_age = 0;
    bool have_keep = false;
    db_->Retention(&have_age, &have_keep);
    if (have_age == max_age_s && have_keep == keep_cited) {
      plan_.retention.reset();
    } else {
      plan_.retention.emplace(max_age_s, keep_cited);
      retention_line_ = line_no_;
    }
    return Status::OK();
  }

  // Whether the file's next ids are below the export's.
  bool IdsBehind() const {
    if (new_ids_) return false;
    uint64_t episode = 0, fact = 0, version = 0;
    db_->NextIds(&episode, &fact, &version);
    return episode < plan_.next_episode || fact < plan_.next_fact ||
           version < plan_.next_block_version;
  }

  // r with only the source episodes the file or this import remembers (ids
  // at or past the file's next id count as remembered, as reads count them).
  FactRecord Remembered(FactRecord r) const {
    const uint64_t limit = db_->episode_id_limit();
    auto& src = r.source_episode_ids;
    src.erase(std::remove_if(src.begin(), src.end(),
                             [&](uint64_t e) {
                               EpisodeRecord found;
                               return e < limit && !episodes_.count(e) &&
                                      !db_->GetEpisode(e, &found).ok();
                             }),
              src.end());
    return r;
  }
  Status WriteAll(ImportCounts* counts);

  Database* db_;
  std::optional<index::BuiltinEmbedder> builtin_;
  bool new_ids_;
  bool header_seen_ = false;
  int version_ = kExportVersion;  // of the last header
  JsonTokens line_;  // the line being checked
  std::string_view line_text_;  // and its text
  size_t line_no_ = 0;          // and its number
  // The line of each record and setting of the plan: by exported id, in
  // block order, by predicate.
  std::map<uint64_t, size_t> episode_line_, fact_line_;
  std::vector<size_t> block_line_;
  std::map<std::string, size_t> predicate_line_;
  size_t retention_line_ = 0;
  ImportPlan plan_;
  std::map<uint64_t, EpisodeRecord> episodes_;  // seen in this import
  std::map<std::pair<std::string, std::string>, std::vector<BlockRecord>> blocks_;
  std::map<std::string, std::map<uint64_t, FactRecord>> facts_;  // file + this import
  // New ids only: each user's episodes by content; exported episode id -> id
  // here (0: written by this import, id not known yet); the import's facts.
  std::map<std::string, std::map<std::string, uint64_t>> contents_;
  std::map<uint64_t, uint64_t> id_map_;
  std::map<uint64_t, FactRecord> new_facts_;
};

// Database::ImportFact, when this engine has it (it writes a fact with its
// id and both time axes as given).
template <typename D>
Status ImportFact(D* db, FactRecord r, uint64_t* id) {
  if constexpr (requires { db->ImportFact(std::move(r), id); }) {
    return db->ImportFact(std::move(r), id);
  } else {
    return Status(kInternal, "this engine cannot import facts (no Database::ImportFact)");
  }
}

Status Importer::WriteAll(ImportCounts* counts) {
  auto by_id = [](const auto& a, const auto& b) { return a.id < b.id; };
  std::sort(plan_.episodes.begin(), plan_.episodes.end(), by_id);
  std::sort(plan_.facts.begin(), plan_.facts.end(), by_id);
  // A record the engine refuses (a NUL byte in a name or text, bad UTF-8,
  // metadata nested too deep, a value over its block's limit) names its line.
  for (EpisodeRecord& r : plan_.episodes) {
    uint64_t exported = r.id, id = 0;
    if (new_ids_) r.id = 0;
    AGENTMEM_RETURN_IF_ERROR(AtLine(episode_line_[exported], db_->Remember(std::move(r), &id)));
    if (new_ids_) id_map_[exported] = id;
    counts->episodes++;
  }
  for (size_t i = 0; i < plan_.blocks.size(); i++) {
    BlockRecord& r = plan_.blocks[i];
    if (new_ids_) r.version = 0;  // the next version here
    AGENTMEM_RETURN_IF_ERROR(AtLine(block_line_[i], db_->SetBlock(std::move(r))));
    counts->block_versions++;
  }
  for (FactRecord& r : plan_.facts) {
    const size_t line_no = fact_line_[r.id];
    if (new_ids_) {
      r.id = 0;
      MapSources(&r.source_episode_ids);
    }
    uint64_t id = 0;
    AGENTMEM_RETURN_IF_ERROR(AtLine(line_no, ImportFact(db_, std::move(r), &id)));
    counts->facts++;
  }
  for (const auto& [name, single] : plan_.predicates) {
    AGENTMEM_RETURN_IF_ERROR(
        AtLine(predicate_line_[name], db_->DeclarePredicate(name, single)));
  }
  if (plan_.retention) {
    AGENTMEM_RETURN_IF_ERROR(AtLine(
        retention_line_, db_->SetRetention(plan_.retention->first, plan_.retention->second)));
  }
  if (!new_ids_) {
    AGENTMEM_RETURN_IF_ERROR(
        db_->ReserveIds(plan_.next_episode, plan_.next_fact, plan_.next_block_version));
  }
  return Status::OK();
}

Status Importer::Write(ImportCounts* counts) {
  counts->skipped = plan_.skipped;
  if (plan_.episodes.empty() && plan_.blocks.empty() && plan_.facts.empty() &&
      plan_.predicates.empty() && !plan_.retention && !IdsBehind()) {
    return Status::OK();
  }
  bool own = !db_->in_transaction();
  if (own) AGENTMEM_RETURN_IF_ERROR(db_->Begin());
  Status s = WriteAll(counts);
  if (s.ok() && own) s = db_->Commit();
  if (!s.ok()) {
    if (own && db_->in_transaction()) (void)db_->Rollback();
    counts->episodes = counts->block_versions = counts->facts = 0;
  }
  return s;
}

}  // namespace

Status ImportJsonl(Database* db, std::string_view jsonl, ImportCounts* counts, bool new_ids) {
  *counts = ImportCounts{};
  Importer imp(db, new_ids);
  size_t line_no = 0;
  while (!jsonl.empty()) {
    size_t nl = jsonl.find('\n');
    std::string_view line = jsonl.substr(0, nl);
    jsonl = nl == std::string_view::npos ? std::string_view() : jsonl.substr(nl + 1);
    line_no++;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    AGENTMEM_RETURN_IF_ERROR(AtLine(line_no, imp.CheckLine(line_no, line)));
  }
  return imp.Write(counts);
}

}  // namespace agentmem::engine

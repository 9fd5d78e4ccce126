// cli/mcp/memory_tools.cc -- agentmem's own tools: remember, recall, forget,
// facts_assert, facts_query, block_get, block_set, context, profile. Each is a
// thin layer over one or two calls of include/agentmem.h.
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>

#include "mcp/tools.h"

namespace agentmem::mcp {
namespace {

constexpr int64_t kMaxTime = INT64_MAX;

struct CursorCloser {
  void operator()(agentmem_cursor* c) const { agentmem_cursor_close(c); }
};
using Cursor = std::unique_ptr<agentmem_cursor, CursorCloser>;

template <typename T>
struct Freed {
  T* p = nullptr;
  ~Freed() { agentmem_free(p); }
};

void WriteTime(JsonWriter* w, const char* key, int64_t t) {
  w->Key(key);
  if (t == kMaxTime) {
    w->Null();
  } else {
    w->Int(t);
  }
}

// ---------------------------------------------------------------- remember

std::string Remember(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  std::string text = a.RequiredString("text");
  std::string session = a.String("session_id").value_or("");
  std::string role = a.String("role").value_or("user");
  int64_t ts = a.Int("ts", 0, 0, INT64_MAX);
  std::string metadata;
  if (size_t at = a.At("metadata"); at != kNoJsonValue) metadata = JsonText(a.tokens(), at);
  int64_t id = 0;
  ctx.Check(agentmem_remember(ctx.db, user.c_str(), session.c_str(), role.c_str(), text.c_str(),
                              ts, metadata.empty() ? nullptr : metadata.c_str(), nullptr, 0, &id),
            "remember");
  w->BeginObject();
  w->Field("id", id);
  w->EndObject();
  return "";
}

// ---------------------------------------------------------------- recall

int RecallMode(const Args& a) {
  std::string mode = a.String("mode").value_or("hybrid");
  if (mode == "hybrid") return AGENTMEM_RECALL_HYBRID;
  if (mode == "bm25") return AGENTMEM_RECALL_BM25;
  if (mode == "vector") return AGENTMEM_RECALL_VECTOR;
  throw ToolError(a.Name("mode") + " must be \"hybrid\", \"bm25\" or \"vector\"");
}

// The options a recall call's arguments ask for; their strings live in
// `keep` (a deque: adding one moves none of the others).
agentmem_recall_options RecallOptions(const Args& a, std::deque<std::string>* keep) {
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.mode = RecallMode(a);
  o.k = static_cast<int>(a.Int("k", 10, 1, 10000));
  auto str = [&](const char* key) -> const char* {
    auto s = a.String(key);
    if (!s) return nullptr;
    keep->push_back(*s);
    return keep->back().c_str();
  };
  o.session_id = str("session_id");
  o.role = str("role");
  o.ts_from = a.Int("ts_from", INT64_MIN, INT64_MIN, INT64_MAX);
  o.ts_to = a.Int("ts_to", INT64_MAX, INT64_MIN, INT64_MAX);
  o.metadata_key = str("metadata_key");
  if (size_t at = a.At("metadata_value"); at != kNoJsonValue) {
    keep->push_back(JsonText(a.tokens(), at));
    o.metadata_value = keep->back().c_str();
  }
  o.min_similarity = a.Number("min_similarity", NAN);
  o.min_bm25 = a.Number("min_bm25", 0);
  o.min_score = a.Number("min_score", 0);
  o.half_life_s = a.Number("half_life_s", 0);
  o.fill = a.Bool("fill", false) ? 1 : 0;
  if ((o.metadata_key == nullptr) != (o.metadata_value == nullptr)) {
    throw ToolError("metadata_key and metadata_value go together");
  }
  return o;
}

// Why a hit was returned, from its ranks in the two lists.
std::string HitReason(const agentmem_hit& h) {
  if (h.bm25_rank == 0 && h.vector_rank == 0) return "fill: no list matched";
  std::string r;
  if (h.bm25_rank > 0) r = "bm25 #" + std::to_string(h.bm25_rank);
  if (h.vector_rank > 0) {
    if (!r.empty()) r += ", ";
    r += "vector #" + std::to_string(h.vector_rank);
  }
  return r;
}

void WriteHit(JsonWriter* w, const agentmem_hit& h) {
  w->BeginObject();
  w->Field("id", h.id);
  w->Field("session_id", h.session_id);
  w->Field("role", h.role);
  w->Field("text", h.text);
  w->Field("ts", h.ts);
  w->Field("score", h.score);
  w->Field("bm25_score", h.bm25_score);
  w->Field("vector_score", h.vector_score);
  w->Field("bm25_rank", h.bm25_rank);
  w->Field("vector_rank", h.vector_rank);
  w->Field("reason", HitReason(h));
  w->EndObject();
}

std::string Recall(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  std::string query = a.RequiredString("query");
  std::deque<std::string> keep;
  agentmem_recall_options o = RecallOptions(a, &keep);
  agentmem_cursor* raw = nullptr;
  ctx.Check(agentmem_recall(ctx.db, user.c_str(), query.c_str(), &o, &raw), "recall");
  Cursor cur(raw);
  w->BeginObject();
  w->Key("hits");
  w->BeginArray();
  int rc;
  while ((rc = agentmem_cursor_step(cur.get())) == AGENTMEM_ROW) {
    WriteHit(w, *agentmem_cursor_hit(cur.get()));
  }
  if (rc != AGENTMEM_DONE) ctx.Fail("recall");
  w->EndArray();
  if (a.Bool("explain", false)) {
    Freed<char> plan;
    ctx.Check(agentmem_explain_recall(ctx.db, user.c_str(), query.c_str(), &o, &plan.p),
              "explain recall");
    std::string compact = CompactJson(plan.p);
    w->Key("plan");
    if (compact.empty()) {
      w->Null();
    } else {
      w->Raw(compact);
    }
  }
  w->EndObject();
  return "";
}

// ---------------------------------------------------------------- forget

// Whether episode id belongs to user.
bool OwnsEpisode(const ToolContext& ctx, const std::string& user, int64_t id) {
  Freed<agentmem_episode> ep;
  int rc = agentmem_episode_get(ctx.db, id, &ep.p);
  if (rc == AGENTMEM_NOTFOUND) return false;
  ctx.Check(rc, "episode lookup");
  return user == ep.p->user_id;
}

// Whether fact id (any version) belongs to user.
bool OwnsFact(const ToolContext& ctx, const std::string& user, int64_t id) {
  agentmem_cursor* raw = nullptr;
  ctx.Check(agentmem_facts_v2(ctx.db, user.c_str(), nullptr, nullptr, nullptr, 0, 0,
                              AGENTMEM_FACTS_ALL_VERSIONS, &raw),
            "fact lookup");
  Cursor cur(raw);
  int rc;
  while ((rc = agentmem_cursor_step(cur.get())) == AGENTMEM_ROW) {
    if (agentmem_cursor_fact(cur.get())->id == id) return true;
  }
  if (rc != AGENTMEM_DONE) ctx.Fail("fact lookup");
  return false;
}

void WriteReceipt(JsonWriter* w, const agentmem_receipt& r) {
  w->BeginObject();
  w->Field("episodes", r.episodes);
  w->Field("facts", r.facts);
  w->Field("block_versions", r.block_versions);
  w->Field("vacuumed", r.vacuumed != 0);
  w->Field("bytes_before", r.bytes_before);
  w->Field("bytes_after", r.bytes_after);
  w->Field("needles", r.needles);
  w->Field("residue", r.residue);
  w->EndObject();
}

// Runs the one forget the arguments name.
void ForgetSelected(const ToolContext& ctx, const Args& a, const std::string& user, int flags,
                    agentmem_receipt* r) {
  int chosen = a.Has("episode_id") + a.Has("fact_id") + a.Has("block") + a.Has("session_id") +
               a.Has("before") + a.Has("all");
  if (chosen != 1) {
    throw ToolError("name exactly one of episode_id, fact_id, block, session_id, before, all");
  }
  if (a.Has("episode_id")) {
    int64_t id = a.Int("episode_id", 0, 1, INT64_MAX);
    if (!OwnsEpisode(ctx, user, id)) throw ToolError("no episode " + std::to_string(id));
    ctx.Check(agentmem_forget_episode(ctx.db, id, flags, r), "forget");
  } else if (a.Has("fact_id")) {
    int64_t id = a.Int("fact_id", 0, 1, INT64_MAX);
    if (!OwnsFact(ctx, user, id)) throw ToolError("no fact " + std::to_string(id));
    ctx.Check(agentmem_forget_fact(ctx.db, id, flags, r), "forget");
  } else if (a.Has("block")) {
    std::string name = a.RequiredString("block");
    ctx.Check(agentmem_forget_block(ctx.db, user.c_str(), name.c_str(), flags, r), "forget");
  } else if (a.Has("session_id")) {
    std::string s = a.RequiredString("session_id");
    ctx.Check(agentmem_forget(ctx.db, user.c_str(), s.c_str(), 0, flags, r), "forget");
  } else if (a.Has("before")) {
    int64_t before = a.Int("before", 0, 1, INT64_MAX);
    ctx.Check(agentmem_forget(ctx.db, user.c_str(), nullptr, before, flags, r), "forget");
  } else {
    if (!a.Bool("all", false)) throw ToolError("argument \"all\" must be true to forget everything");
    ctx.Check(agentmem_forget(ctx.db, user.c_str(), nullptr, 0, flags, r), "forget");
  }
}

std::string Forget(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  int flags = a.Bool("purge", false) ? AGENTMEM_FORGET_PURGE : 0;
  agentmem_receipt r{};
  ForgetSelected(ctx, a, user, flags, &r);
  WriteReceipt(w, r);
  return "";
}

// ---------------------------------------------------------------- facts

std::string FactsAssert(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  std::string s = a.RequiredString("subject");
  std::string p = a.RequiredString("predicate");
  std::string o = a.RequiredString("object");
  double confidence = a.Number("confidence", 1.0);
  int64_t from = a.Int("valid_from", 0, 0, INT64_MAX);
  int64_t to = a.Int("valid_to", 0, 0, INT64_MAX);
  std::vector<int64_t> sources = a.Ints("source_episode_ids");
  if (sources.size() > 10000) throw ToolError("at most 10000 source_episode_ids");
  for (int64_t id : sources) {
    if (!OwnsEpisode(ctx, user, id)) throw ToolError("no episode " + std::to_string(id));
  }
  int64_t id = 0;
  ctx.Check(agentmem_fact_assert(ctx.db, user.c_str(), s.c_str(), p.c_str(), o.c_str(), confidence,
                                 from, to, sources.data(), static_cast<int>(sources.size()), &id),
            "facts_assert");
  w->BeginObject();
  w->Field("id", id);
  w->EndObject();
  return "";
}

void WriteFact(JsonWriter* w, const agentmem_fact& f) {
  w->BeginObject();
  w->Field("id", f.id);
  w->Field("subject", f.subject);
  w->Field("predicate", f.predicate);
  w->Field("object", f.object);
  w->Field("confidence", f.confidence);
  w->Key("source_episode_ids");
  w->BeginArray();
  for (int i = 0; i < f.n_sources; i++) w->Int(f.source_episode_ids[i]);
  w->EndArray();
  w->Field("valid_from", f.valid_from);
  WriteTime(w, "valid_to", f.valid_to);
  w->Field("recorded_at", f.recorded_at);
  WriteTime(w, "expired_at", f.expired_at);
  w->EndObject();
}

std::string FactsQuery(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  auto s = a.String("subject"), p = a.String("predicate"), o = a.String("object");
  int64_t valid_at = a.Int("valid_at", 0, 0, INT64_MAX);
  int64_t known_at = a.Int("known_at", 0, 0, INT64_MAX);
  int flags = a.Bool("all_versions", false) ? AGENTMEM_FACTS_ALL_VERSIONS : 0;
  int64_t limit = a.Int("limit", 1000, 1, 100000);
  agentmem_cursor* raw = nullptr;
  ctx.Check(agentmem_facts_v2(ctx.db, user.c_str(), s ? s->c_str() : nullptr,
                              p ? p->c_str() : nullptr, o ? o->c_str() : nullptr, valid_at,
                              known_at, flags, &raw),
            "facts_query");
  Cursor cur(raw);
  w->BeginObject();
  w->Key("facts");
  w->BeginArray();
  int rc;
  int64_t n = 0;
  bool more = false;
  while ((rc = agentmem_cursor_step(cur.get())) == AGENTMEM_ROW) {
    if (n++ == limit) {
      more = true;
      break;
    }
    WriteFact(w, *agentmem_cursor_fact(cur.get()));
  }
  if (rc != AGENTMEM_DONE && rc != AGENTMEM_ROW) ctx.Fail("facts_query");
  w->EndArray();
  w->Field("truncated", more);
  w->EndObject();
  return "";
}

// ---------------------------------------------------------------- blocks

void WriteBlock(JsonWriter* w, const agentmem_block& b) {
  w->BeginObject();
  w->Field("name", b.name);
  w->Field("value", b.value);
  w->Field("limit", b.limit);
  w->Field("pinned_order", b.pinned_order);
  w->Field("updated_at", b.updated_at);
  w->Field("version", b.version);
  w->EndObject();
}

std::string BlockGet(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  if (auto name = a.String("name")) {
    Freed<agentmem_block> b;
    int rc = agentmem_block_get(ctx.db, user.c_str(), name->c_str(), &b.p);
    if (rc == AGENTMEM_NOTFOUND) throw ToolError("no block named \"" + *name + "\"");
    ctx.Check(rc, "block_get");
    WriteBlock(w, *b.p);
    return "";
  }
  agentmem_cursor* raw = nullptr;
  ctx.Check(agentmem_blocks(ctx.db, user.c_str(), &raw), "block_get");
  Cursor cur(raw);
  w->BeginObject();
  w->Key("blocks");
  w->BeginArray();
  int rc;
  while ((rc = agentmem_cursor_step(cur.get())) == AGENTMEM_ROW) {
    WriteBlock(w, *agentmem_cursor_block(cur.get()));
  }
  if (rc != AGENTMEM_DONE) ctx.Fail("block_get");
  w->EndArray();
  w->EndObject();
  return "";
}

std::string BlockSet(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  std::string name = a.RequiredString("name");
  std::string value = a.RequiredString("value");
  // A block keeps its limit and pin unless the call names them.
  int limit = 0, pinned = -1;
  Freed<agentmem_block> old;
  int rc = agentmem_block_get(ctx.db, user.c_str(), name.c_str(), &old.p);
  if (rc == AGENTMEM_OK) {
    limit = old.p->limit;
    pinned = old.p->pinned_order;
  } else if (rc != AGENTMEM_NOTFOUND) {
    ctx.Fail("block_set");
  }
  limit = static_cast<int>(a.Int("limit", limit, 0, INT32_MAX));
  pinned = static_cast<int>(a.Int("pinned_order", pinned, -1, INT32_MAX));
  ctx.Check(agentmem_block_set(ctx.db, user.c_str(), name.c_str(), value.c_str(), limit, pinned),
            "block_set");
  Freed<agentmem_block> b;
  ctx.Check(agentmem_block_get(ctx.db, user.c_str(), name.c_str(), &b.p), "block_set");
  WriteBlock(w, *b.p);
  return "";
}

// ---------------------------------------------------------------- context, profile

std::string Context(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  static const char* const kKinds[] = {"", "block", "fact", "episode"};
  std::string user = ctx.User(a);
  std::string query = a.RequiredString("query");
  int budget = static_cast<int>(a.Int("token_budget", 2000, 0, INT32_MAX));
  Freed<agentmem_context_item> items;
  int n = 0;
  ctx.Check(agentmem_context(ctx.db, user.c_str(), query.c_str(), budget, &items.p, &n),
            "context");
  std::string text;
  int64_t tokens = 0;
  w->BeginObject();
  w->Key("items");
  w->BeginArray();
  for (int i = 0; i < n; i++) {
    const agentmem_context_item& it = items.p[i];
    w->BeginObject();
    w->Field("kind", it.kind >= 1 && it.kind <= 3 ? kKinds[it.kind] : "unknown");
    w->Field("id", it.id);
    w->Field("name", it.name);
    w->Field("text", it.text);
    w->Field("tokens", it.tokens);
    w->Field("reason", it.reason);
    w->EndObject();
    tokens += it.tokens;
    text += (it.kind == AGENTMEM_CONTEXT_BLOCK ? std::string(it.name) + ": " : "- ") + it.text + "\n";
  }
  w->EndArray();
  w->Field("tokens", tokens);
  w->Field("token_budget", budget);
  w->EndObject();
  return text.empty() ? "(no memory matches)" : text;
}

std::string Profile(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  Freed<char> json;
  ctx.Check(agentmem_profile(ctx.db, user.c_str(), &json.p), "profile");
  std::string compact = CompactJson(json.p);
  if (compact.empty()) throw ToolError("the profile is not JSON");
  w->Raw(compact);
  return "";
}

}  // namespace

void AddMemoryTools(std::vector<Tool>* tools) {
  tools->push_back({"remember", "Remember",
                    "Store one episode (a turn of conversation, a note) in the user's memory. "
                    "Returns its id.",
                    R"S({"text":{"type":"string","description":"what to remember"},
                        "session_id":{"type":"string","description":"conversation id (default: empty)"},
                        "role":{"type":"string","description":"user, assistant, tool, system, summary, ... (default user)"},
                        "ts":{"type":"integer","minimum":0,"description":"event time, unix microseconds (default now)"},
                        "metadata":{"description":"any JSON value kept with the episode"}})S",
                    {"text"}, "", true, true, Remember});
  tools->push_back({"recall", "Recall",
                    "Search the user's episodes by hybrid (BM25 + vector), bm25 or vector "
                    "recall; hits come best first with their scores and why they matched.",
                    R"S({"query":{"type":"string"},
                        "mode":{"type":"string","enum":["hybrid","bm25","vector"],"description":"default hybrid"},
                        "k":{"type":"integer","minimum":1,"maximum":10000,"description":"hits wanted (default 10)"},
                        "session_id":{"type":"string","description":"only this session"},
                        "role":{"type":"string","description":"only this role"},
                        "ts_from":{"type":"integer","description":"only event times >= this (unix microseconds)"},
                        "ts_to":{"type":"integer","description":"only event times < this (unix microseconds)"},
                        "metadata_key":{"type":"string","description":"only episodes whose metadata holds metadata_value at this key or JSON pointer"},
                        "metadata_value":{"description":"the JSON value metadata_key must hold"},
                        "min_similarity":{"type":"number","description":"vector hits need this similarity (default: the embedder's floor)"},
                        "min_bm25":{"type":"number","description":"BM25 hits need this score (default 0)"},
                        "min_score":{"type":"number","description":"drop hits whose fused score is below (default 0)"},
                        "half_life_s":{"type":"number","description":"recency weighting: the score halves every this many seconds of age (default off)"},
                        "fill":{"type":"boolean","description":"always k hits: fill with unmatched episodes (default false)"},
                        "explain":{"type":"boolean","description":"also return the query plan (default false)"}})S",
                    {"query"}, "", false, true, Recall});
  tools->push_back({"forget", "Forget",
                    "Forget part of the user's memory: one episode, one fact, one block (every "
                    "version), one session, the episodes before a time, or everything (all: "
                    "true). With purge the file is compacted at once and scanned for the "
                    "forgotten bytes; the receipt says what went and what remains (residue 0).",
                    R"S({"episode_id":{"type":"integer"},"fact_id":{"type":"integer"},
                        "block":{"type":"string","description":"a block name"},
                        "session_id":{"type":"string","description":"every episode of this session"},
                        "before":{"type":"integer","description":"episodes with an event time before this (unix microseconds)"},
                        "all":{"type":"boolean","description":"true: every episode, block and fact of the user"},
                        "purge":{"type":"boolean","description":"compact now and verify nothing remains (default false)"}})S",
                    {}, "", true, true, Forget});
  tools->push_back({"facts_assert", "Assert a fact",
                    "Assert (subject, predicate, object) with a confidence and a valid-time "
                    "range; a predicate declared single-valued supersedes the old object, "
                    "which stays in the history.",
                    R"S({"subject":{"type":"string"},"predicate":{"type":"string"},"object":{"type":"string"},
                        "confidence":{"type":"number","minimum":0,"maximum":1,"description":"default 1"},
                        "valid_from":{"type":"integer","description":"valid time start, unix microseconds (default now)"},
                        "valid_to":{"type":"integer","description":"valid time end, unix microseconds (default open-ended)"},
                        "source_episode_ids":{"type":"array","items":{"type":"integer"},"description":"the episodes the fact comes from"}})S",
                    {"subject", "predicate", "object"}, "", true, true, FactsAssert});
  tools->push_back({"facts_query", "Query facts",
                    "The user's facts matching subject / predicate / object, on both time "
                    "axes: valid at valid_at, as the file knew them at known_at (0 = now on "
                    "either); all_versions returns every row including superseded ones.",
                    R"S({"subject":{"type":"string"},"predicate":{"type":"string"},"object":{"type":"string"},
                        "valid_at":{"type":"integer","description":"valid time instant, unix microseconds (default now)"},
                        "known_at":{"type":"integer","description":"transaction time instant, unix microseconds (default now)"},
                        "all_versions":{"type":"boolean","description":"every row of both time axes (default false)"},
                        "limit":{"type":"integer","minimum":1,"maximum":100000,"description":"most facts returned (default 1000)"}})S",
                    {}, "", false, true, FactsQuery});
  tools->push_back({"block_get", "Get a block",
                    "A working-memory block by name (its current version), or every block when "
                    "no name is given.",
                    R"S({"name":{"type":"string"}})S", {}, "", false, true, BlockGet});
  tools->push_back({"block_set", "Set a block",
                    "Write a new version of a working-memory block (earlier versions are kept). "
                    "limit (characters, 0 = none) and pinned_order (-1 = not pinned; pinned "
                    "blocks lead every context) keep their values when left out.",
                    R"S({"name":{"type":"string"},"value":{"type":"string"},
                        "limit":{"type":"integer","minimum":0},
                        "pinned_order":{"type":"integer","minimum":-1}})S",
                    {"name", "value"}, "", true, true, BlockSet});
  tools->push_back({"context", "Assemble context",
                    "The memory to put in a prompt for a query within a token budget: pinned "
                    "blocks, current facts, then recalled episodes, each with why it was "
                    "included.",
                    R"S({"query":{"type":"string"},
                        "token_budget":{"type":"integer","minimum":0,"description":"default 2000 (a token is 4 bytes of UTF-8)"}})S",
                    {"query"}, "", false, true, Context});
  tools->push_back({"profile", "Profile",
                    "A summary of the user's memory: counts, time span, roles and top facts.",
                    "{}", {}, "", false, true, Profile});
}

}  // namespace agentmem::mcp

// cli/mcp/graph_tools.cc -- the tools of the reference MCP memory server
// (@modelcontextprotocol/server-memory), with its argument and result shapes,
// over agentmem's facts and episodes (docs/mcp.md, "The knowledge-graph
// tools"):
//   entity       fact (name, "entity_type", entityType)
//   observation  episode (session "knowledge-graph:" + name, role
//                "observation", text "name: observation") and fact (name,
//                "observation", observation) citing it; one session per
//                entity, so that recall's context of earlier turns (open
//                option context) stays within the entity
//   relation     fact (from, relationType, to); a relationType that is a
//                reserved predicate or starts with "relation:" gets the
//                prefix "relation:"
// Every other current fact of the user reads as a relation too. Deletes are
// forgets. Each call is one transaction.
#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "mcp/tools.h"

namespace agentmem::mcp {
namespace {

constexpr const char* kTypePredicate = "entity_type";
constexpr const char* kObservationPredicate = "observation";
constexpr std::string_view kGraphSession = "knowledge-graph:";
constexpr std::string_view kRelationPrefix = "relation:";

std::string EncodeRelation(const std::string& type) {
  if (type == kTypePredicate || type == kObservationPredicate || type.starts_with(kRelationPrefix)) {
    return std::string(kRelationPrefix) + type;
  }
  return type;
}

std::string DecodeRelation(const std::string& predicate) {
  if (predicate.starts_with(kRelationPrefix)) return predicate.substr(kRelationPrefix.size());
  return predicate;
}

struct Observation {
  int64_t fact_id = 0;
  std::string text;
  std::vector<int64_t> episodes;
};

struct Entity {
  int64_t fact_id = 0;
  std::string name, type;
  std::vector<Observation> observations;
};

struct Relation {
  int64_t fact_id = 0;
  std::string from, to, type;
  bool operator==(const Relation& o) const { return from == o.from && to == o.to && type == o.type; }
};

struct Graph {
  std::vector<Entity> entities;  // in the order they were created
  std::map<std::string, size_t> by_name;
  std::vector<Relation> relations;
  std::map<int64_t, std::string> episode_entity;  // observation episode -> entity

  Entity* Find(const std::string& name) {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : &entities[it->second];
  }
};

struct CursorCloser {
  void operator()(agentmem_cursor* c) const { agentmem_cursor_close(c); }
};

// One current fact, copied out of its cursor.
struct FactRow {
  int64_t id;
  std::string subject, predicate, object;
  std::vector<int64_t> sources;
};

std::vector<FactRow> CurrentFacts(const ToolContext& ctx, const std::string& user) {
  agentmem_cursor* raw = nullptr;
  ctx.Check(agentmem_facts_v2(ctx.db, user.c_str(), nullptr, nullptr, nullptr, 0, 0, 0, &raw),
            "reading the graph");
  std::unique_ptr<agentmem_cursor, CursorCloser> cur(raw);
  std::vector<FactRow> rows;
  int rc;
  while ((rc = agentmem_cursor_step(cur.get())) == AGENTMEM_ROW) {
    const agentmem_fact* f = agentmem_cursor_fact(cur.get());
    rows.push_back({f->id, f->subject, f->predicate, f->object,
                    {f->source_episode_ids, f->source_episode_ids + f->n_sources}});
  }
  if (rc != AGENTMEM_DONE) ctx.Fail("reading the graph");
  return rows;
}

Graph LoadGraph(const ToolContext& ctx, const std::string& user) {
  std::vector<FactRow> rows = CurrentFacts(ctx, user);
  Graph g;
  for (const FactRow& r : rows) {
    if (r.predicate != kTypePredicate || g.by_name.count(r.subject)) continue;
    g.by_name[r.subject] = g.entities.size();
    g.entities.push_back({r.id, r.subject, r.object, {}});
  }
  for (FactRow& r : rows) {
    if (r.predicate == kTypePredicate) continue;
    if (r.predicate == kObservationPredicate) {
      if (Entity* e = g.Find(r.subject)) {
        for (int64_t ep : r.sources) g.episode_entity[ep] = r.subject;
        e->observations.push_back({r.id, r.object, std::move(r.sources)});
      }
      continue;
    }
    g.relations.push_back({r.id, r.subject, r.object, DecodeRelation(r.predicate)});
  }
  return g;
}

// ---------------------------------------------------------------- output

void WriteEntity(JsonWriter* w, const std::string& name, const std::string& type,
                 const std::vector<std::string>& observations) {
  w->BeginObject();
  w->Field("name", name);
  w->Field("entityType", type);
  w->Key("observations");
  w->BeginArray();
  for (const auto& o : observations) w->String(o);
  w->EndArray();
  w->EndObject();
}

void WriteEntity(JsonWriter* w, const Entity& e) {
  std::vector<std::string> texts;
  for (const auto& o : e.observations) texts.push_back(o.text);
  WriteEntity(w, e.name, e.type, texts);
}

void WriteRelation(JsonWriter* w, const Relation& r) {
  w->BeginObject();
  w->Field("from", r.from);
  w->Field("to", r.to);
  w->Field("relationType", r.type);
  w->EndObject();
}

// The entities whose names are in `names` (graph order) and every relation
// with an end among them.
void WriteSubgraph(JsonWriter* w, const Graph& g, const std::set<std::string>& names) {
  w->BeginObject();
  w->Key("entities");
  w->BeginArray();
  for (const Entity& e : g.entities) {
    if (names.count(e.name)) WriteEntity(w, e);
  }
  w->EndArray();
  w->Key("relations");
  w->BeginArray();
  for (const Relation& r : g.relations) {
    if (names.count(r.from) || names.count(r.to)) WriteRelation(w, r);
  }
  w->EndArray();
  w->EndObject();
}

std::string WriteDone(JsonWriter* w, const std::string& message) {
  w->BeginObject();
  w->Field("success", true);
  w->Field("message", message);
  w->EndObject();
  return message;
}

// ---------------------------------------------------------------- writes

void NonEmpty(const std::string& s, const std::string& what) {
  if (s.empty()) throw ToolError(what + " must not be empty (agentmem facts hold non-empty strings)");
}

void AssertFact(const ToolContext& ctx, const std::string& user, const std::string& s,
                const std::string& p, const std::string& o, const int64_t* sources, int n) {
  ctx.Check(agentmem_fact_assert(ctx.db, user.c_str(), s.c_str(), p.c_str(), o.c_str(), 1.0, 0, 0,
                                 sources, n, nullptr),
            "asserting (" + s + ", " + p + ")");
}

void AddObservation(const ToolContext& ctx, const std::string& user, const std::string& entity,
                    const std::string& text) {
  std::string metadata;
  JsonWriter w(&metadata);
  w.BeginObject();
  w.Field("entity", entity);
  w.EndObject();
  int64_t episode = 0;
  std::string session = std::string(kGraphSession) + entity;
  // The episode names its entity: recall finds it by the name too, and a
  // context that shows it says whom it is about.
  std::string episode_text = entity + ": " + text;
  ctx.Check(agentmem_remember(ctx.db, user.c_str(), session.c_str(), kObservationPredicate,
                              episode_text.c_str(), 0, metadata.c_str(), nullptr, 0, &episode),
            "remembering an observation");
  AssertFact(ctx, user, entity, kObservationPredicate, text, &episode, 1);
}

void ForgetFact(const ToolContext& ctx, int64_t id) {
  ctx.Check(agentmem_forget_fact(ctx.db, id, 0, nullptr), "forget");
}

void ForgetObservation(const ToolContext& ctx, const Observation& o) {
  for (int64_t ep : o.episodes) ctx.Check(agentmem_forget_episode(ctx.db, ep, 0, nullptr), "forget");
  ForgetFact(ctx, o.fact_id);
}

struct NewEntity {
  std::string name, type;
  std::vector<std::string> observations;
};

std::string CreateEntities(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  Graph g = LoadGraph(ctx, user);
  std::vector<NewEntity> added;
  std::set<std::string> seen;
  for (const Args& e : a.RequiredObjects("entities")) {
    NewEntity n{e.RequiredString("name"), e.RequiredString("entityType"),
                e.RequiredStrings("observations")};
    NonEmpty(n.name, e.Name("name"));
    NonEmpty(n.type, e.Name("entityType"));
    for (const auto& o : n.observations) NonEmpty(o, e.Name("observations") + "[]");
    if (g.Find(n.name) || !seen.insert(n.name).second) continue;
    added.push_back(std::move(n));
  }
  InTransaction(ctx, [&] {
    for (const NewEntity& n : added) {
      AssertFact(ctx, user, n.name, kTypePredicate, n.type, nullptr, 0);
      std::set<std::string> done;
      for (const auto& o : n.observations) {
        if (done.insert(o).second) AddObservation(ctx, user, n.name, o);
      }
    }
  });
  w->BeginObject();
  w->Key("entities");
  w->BeginArray();
  for (const NewEntity& n : added) WriteEntity(w, n.name, n.type, n.observations);
  w->EndArray();
  w->EndObject();
  return "";
}

std::vector<Relation> ReadRelations(const Args& a, const std::string& key) {
  std::vector<Relation> out;
  for (const Args& r : a.RequiredObjects(key)) {
    out.push_back({0, r.RequiredString("from"), r.RequiredString("to"),
                   r.RequiredString("relationType")});
  }
  return out;
}

std::string CreateRelations(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  Graph g = LoadGraph(ctx, user);
  std::vector<Relation> added;
  for (Relation& r : ReadRelations(a, "relations")) {
    NonEmpty(r.from, "from");
    NonEmpty(r.to, "to");
    NonEmpty(r.type, "relationType");
    if (std::find(g.relations.begin(), g.relations.end(), r) != g.relations.end() ||
        std::find(added.begin(), added.end(), r) != added.end()) {
      continue;
    }
    added.push_back(std::move(r));
  }
  InTransaction(ctx, [&] {
    for (const Relation& r : added) AssertFact(ctx, user, r.from, EncodeRelation(r.type), r.to, nullptr, 0);
  });
  w->BeginObject();
  w->Key("relations");
  w->BeginArray();
  for (const Relation& r : added) WriteRelation(w, r);
  w->EndArray();
  w->EndObject();
  return "";
}

std::string AddObservations(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  Graph g = LoadGraph(ctx, user);
  std::vector<std::pair<std::string, std::vector<std::string>>> added;
  std::map<std::string, std::set<std::string>> has;
  for (const Args& o : a.RequiredObjects("observations")) {
    std::string name = o.RequiredString("entityName");
    std::vector<std::string> contents = o.RequiredStrings("contents");
    Entity* e = g.Find(name);
    if (!e) throw ToolError("Entity with name " + name + " not found");
    std::set<std::string>& known = has[name];
    if (known.empty()) {
      for (const auto& obs : e->observations) known.insert(obs.text);
    }
    std::vector<std::string> fresh;
    for (auto& c : contents) {
      NonEmpty(c, o.Name("contents") + "[]");
      if (known.insert(c).second) fresh.push_back(std::move(c));
    }
    added.emplace_back(name, std::move(fresh));
  }
  InTransaction(ctx, [&] {
    for (const auto& [name, texts] : added) {
      for (const auto& t : texts) AddObservation(ctx, user, name, t);
    }
  });
  w->BeginObject();
  w->Key("results");
  w->BeginArray();
  for (const auto& [name, texts] : added) {
    w->BeginObject();
    w->Field("entityName", name);
    w->Key("addedObservations");
    w->BeginArray();
    for (const auto& t : texts) w->String(t);
    w->EndArray();
    w->EndObject();
  }
  w->EndArray();
  w->EndObject();
  return "";
}

std::string DeleteEntities(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  std::vector<std::string> list = a.RequiredStrings("entityNames");
  std::set<std::string> names(list.begin(), list.end());
  Graph g = LoadGraph(ctx, user);
  InTransaction(ctx, [&] {
    for (const Entity& e : g.entities) {
      if (!names.count(e.name)) continue;
      for (const Observation& o : e.observations) ForgetObservation(ctx, o);
      ForgetFact(ctx, e.fact_id);
    }
    for (const Relation& r : g.relations) {
      if (names.count(r.from) || names.count(r.to)) ForgetFact(ctx, r.fact_id);
    }
  });
  return WriteDone(w, "Entities deleted successfully");
}

std::string DeleteObservations(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  Graph g = LoadGraph(ctx, user);
  std::vector<const Observation*> gone;
  for (const Args& d : a.RequiredObjects("deletions")) {
    std::string name = d.RequiredString("entityName");
    std::vector<std::string> list = d.RequiredStrings("observations");
    Entity* e = g.Find(name);
    if (!e) continue;
    std::set<std::string> texts(list.begin(), list.end());
    for (const Observation& o : e->observations) {
      if (texts.count(o.text)) gone.push_back(&o);
    }
  }
  InTransaction(ctx, [&] {
    for (const Observation* o : gone) ForgetObservation(ctx, *o);
  });
  return WriteDone(w, "Observations deleted successfully");
}

std::string DeleteRelations(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  std::vector<Relation> list = ReadRelations(a, "relations");
  Graph g = LoadGraph(ctx, user);
  InTransaction(ctx, [&] {
    for (const Relation& r : g.relations) {
      if (std::find(list.begin(), list.end(), r) != list.end()) ForgetFact(ctx, r.fact_id);
    }
  });
  return WriteDone(w, "Relations deleted successfully");
}

// ---------------------------------------------------------------- reads

std::string ReadGraph(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  Graph g = LoadGraph(ctx, ctx.User(a));
  w->BeginObject();
  w->Key("entities");
  w->BeginArray();
  for (const Entity& e : g.entities) WriteEntity(w, e);
  w->EndArray();
  w->Key("relations");
  w->BeginArray();
  for (const Relation& r : g.relations) WriteRelation(w, r);
  w->EndArray();
  w->EndObject();
  return "";
}

// ASCII lower case: the reference server's case-insensitive match for the
// Latin alphabet (other bytes compare as they are).
std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

bool Contains(const std::string& text, const std::string& lower_query) {
  return Lower(text).find(lower_query) != std::string::npos;
}

bool SubstringMatch(const Entity& e, const std::string& q) {
  if (Contains(e.name, q) || Contains(e.type, q)) return true;
  return std::any_of(e.observations.begin(), e.observations.end(),
                     [&](const Observation& o) { return Contains(o.text, q); });
}

// The entities whose observation episodes hybrid recall finds for query:
// those that share a word with it (after the file's stemming and stop
// words), and with `semantic` also those only the vector search finds.
void RecallMatches(const ToolContext& ctx, const std::string& user, const std::string& query,
                   bool semantic, const Graph& g, std::set<std::string>* names) {
  if (query.find_first_not_of(" \t\r\n") == std::string::npos) return;
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.k = 100;
  o.role = kObservationPredicate;
  agentmem_cursor* raw = nullptr;
  ctx.Check(agentmem_recall(ctx.db, user.c_str(), query.c_str(), &o, &raw), "search_nodes");
  std::unique_ptr<agentmem_cursor, CursorCloser> cur(raw);
  int rc;
  while ((rc = agentmem_cursor_step(cur.get())) == AGENTMEM_ROW) {
    const agentmem_hit* hit = agentmem_cursor_hit(cur.get());
    if (hit->bm25_rank == 0 && !semantic) continue;
    auto it = g.episode_entity.find(hit->id);
    if (it != g.episode_entity.end()) names->insert(it->second);
  }
  if (rc != AGENTMEM_DONE) ctx.Fail("search_nodes");
}

std::string SearchNodes(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  std::string query = a.RequiredString("query");
  Graph g = LoadGraph(ctx, user);
  std::set<std::string> names;
  std::string q = Lower(query);
  for (const Entity& e : g.entities) {
    if (SubstringMatch(e, q)) names.insert(e.name);
  }
  RecallMatches(ctx, user, query, a.Bool("semantic", false), g, &names);
  WriteSubgraph(w, g, names);
  return "";
}

std::string OpenNodes(const ToolContext& ctx, const Args& a, JsonWriter* w) {
  std::string user = ctx.User(a);
  std::vector<std::string> list = a.RequiredStrings("names");
  Graph g = LoadGraph(ctx, user);
  std::set<std::string> names;
  for (const auto& n : list) {
    if (g.Find(n)) names.insert(n);
  }
  WriteSubgraph(w, g, names);
  return "";
}

// ---------------------------------------------------------------- schemas

#define ENTITY_SCHEMA                                                                \
  R"({"type":"object","properties":{"name":{"type":"string","description":"The name of the entity"},)" \
  R"("entityType":{"type":"string","description":"The type of the entity"},)"        \
  R"("observations":{"type":"array","items":{"type":"string"},"description":"An array of observation contents associated with the entity"}},)" \
  R"("required":["name","entityType","observations"]})"
#define RELATION_SCHEMA                                                              \
  R"({"type":"object","properties":{"from":{"type":"string","description":"The name of the entity where the relation starts"},)" \
  R"("to":{"type":"string","description":"The name of the entity where the relation ends"},)" \
  R"("relationType":{"type":"string","description":"The type of the relation"}},)"   \
  R"("required":["from","to","relationType"]})"
#define GRAPH_OUTPUT                                                                 \
  R"({"type":"object","properties":{"entities":{"type":"array","items":)" ENTITY_SCHEMA \
  R"(},"relations":{"type":"array","items":)" RELATION_SCHEMA R"(}},"required":["entities","relations"]})"
#define DONE_OUTPUT \
  R"({"type":"object","properties":{"success":{"type":"boolean"},"message":{"type":"string"}},"required":["success","message"]})"

}  // namespace

void AddGraphTools(std::vector<Tool>* tools) {
  tools->push_back({"create_entities", "Create Entities",
                    "Create multiple new entities in the knowledge graph",
                    R"({"entities":{"type":"array","items":)" ENTITY_SCHEMA "}}",
                    {"entities"},
                    R"({"type":"object","properties":{"entities":{"type":"array","items":)" ENTITY_SCHEMA
                    R"(}},"required":["entities"]})",
                    true, false, CreateEntities});
  tools->push_back({"create_relations", "Create Relations",
                    "Create multiple new relations between entities in the knowledge graph. "
                    "Relations should be in active voice",
                    R"({"relations":{"type":"array","items":)" RELATION_SCHEMA "}}",
                    {"relations"},
                    R"({"type":"object","properties":{"relations":{"type":"array","items":)" RELATION_SCHEMA
                    R"(}},"required":["relations"]})",
                    true, false, CreateRelations});
  tools->push_back({"add_observations", "Add Observations",
                    "Add new observations to existing entities in the knowledge graph",
                    R"({"observations":{"type":"array","items":{"type":"object","properties":{
                        "entityName":{"type":"string","description":"The name of the entity to add the observations to"},
                        "contents":{"type":"array","items":{"type":"string"},"description":"An array of observation contents to add"}},
                        "required":["entityName","contents"]}}})",
                    {"observations"},
                    R"({"type":"object","properties":{"results":{"type":"array","items":{"type":"object","properties":{
                        "entityName":{"type":"string"},"addedObservations":{"type":"array","items":{"type":"string"}}},
                        "required":["entityName","addedObservations"]}}},"required":["results"]})",
                    true, false, AddObservations});
  tools->push_back({"delete_entities", "Delete Entities",
                    "Delete multiple entities and their associated relations from the knowledge "
                    "graph",
                    R"({"entityNames":{"type":"array","items":{"type":"string"},"description":"An array of entity names to delete"}})",
                    {"entityNames"}, DONE_OUTPUT, true, false, DeleteEntities});
  tools->push_back({"delete_observations", "Delete Observations",
                    "Delete specific observations from entities in the knowledge graph",
                    R"({"deletions":{"type":"array","items":{"type":"object","properties":{
                        "entityName":{"type":"string","description":"The name of the entity containing the observations"},
                        "observations":{"type":"array","items":{"type":"string"},"description":"An array of observations to delete"}},
                        "required":["entityName","observations"]}}})",
                    {"deletions"}, DONE_OUTPUT, true, false, DeleteObservations});
  tools->push_back({"delete_relations", "Delete Relations",
                    "Delete multiple relations from the knowledge graph",
                    R"({"relations":{"type":"array","items":)" RELATION_SCHEMA
                    R"(,"description":"An array of relations to delete"}})",
                    {"relations"}, DONE_OUTPUT, true, false, DeleteRelations});
  tools->push_back({"read_graph", "Read Graph", "Read the entire knowledge graph", "{}", {},
                    GRAPH_OUTPUT, false, false, ReadGraph});
  tools->push_back({"search_nodes", "Search Nodes",
                    "Search for nodes in the knowledge graph based on a query: entity names, "
                    "types and observations that contain it, and observations that agentmem's "
                    "hybrid recall (BM25 + vector) finds sharing a word with it (with semantic: "
                    "true, also those that are only close in meaning)",
                    R"S({"query":{"type":"string","description":"The search query to match against entity names, types, and observation content"},
                        "semantic":{"type":"boolean","description":"also match observations close in meaning but sharing no word (default false)"}})S",
                    {"query"}, GRAPH_OUTPUT, false, false, SearchNodes});
  tools->push_back({"open_nodes", "Open Nodes",
                    "Open specific nodes in the knowledge graph by their names",
                    R"({"names":{"type":"array","items":{"type":"string"},"description":"An array of entity names to retrieve"}})",
                    {"names"}, GRAPH_OUTPUT, false, false, OpenNodes});
}

}  // namespace agentmem::mcp

// bench/eval.cc -- recall quality on the shared conversation splits (`make eval`).
//
// For each data set (LoCoMo, REALTALK: DIR/<set>/{episodes,questions}.jsonl)
// and each configuration (open options of a new in-memory database), every
// turn is remembered as an episode of user conv_id and session `session`, in
// `seq` order, and every question with evidence is recalled in its own
// conversation in bm25, vector and hybrid mode. Printed per mode: turn R@5 and
// R@10 (the share of a question's evidence turns among the first k hits) and
// session R@5 and R@10 (the share of its evidence sessions among the first k
// distinct sessions of the ranking), averaged over the questions, as
// shared/data/bm25_baseline.py defines them. LoCoMo's category 5
// (adversarial, no evidence) is left out, as there.
//
//   eval [--data DIR] [--set locomo|realtalk]... [--mode bm25|vector|hybrid]...
//        [--glove-vectors] [--no-floor] [--config NAME=OPTIONS]...
//
// Without --config: "reference" (the bm25_baseline.py tokenization, no
// context), "default" (a new file's defaults: agentmem-glove-v2 when the
// library links the GloVe table), "hash" (the defaults with the hashing
// embedder) and, with the table, "glove-v1" (the defaults with the earlier
// agentmem-glove-v1, which files made with it keep).
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agentmem.h"
#include "index/text/glove_embedder.h"

namespace {

struct Config {
  std::string name, options;
  bool glove = false;  // vectors from the linked GloVe table, passed by the eval
};

struct Turn {
  std::string turn_id;
  std::string session;
};

void Die(const std::string& what, int rc) {
  std::fprintf(stderr, "eval: %s (code %d)\n", what.c_str(), rc);
  std::exit(1);
}

// For a configuration with `glove`: the linked GloVe embedder, whose vectors
// the eval computes and passes to the engine (episode and query vectors).
const agentmem::index::GloveEmbedder* glove = nullptr;

// --no-floor: vector hits are not dropped below the embedder's floor.
bool no_floor = false;

const agentmem::index::GloveEmbedder* LinkedGlove() {
  static auto made = agentmem::index::GloveEmbedder::Create();
  if (!made.ok()) Die("GloVe vectors: " + made.status().message(), 0);
  return &made.value();
}

struct Scores {
  double turn5 = 0, turn10 = 0, sess5 = 0, sess10 = 0;
  int questions = 0;
};

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string FindData(std::string given) {
  if (!given.empty()) return given;
  if (const char* e = std::getenv("AGENTMEM_DATA_DIR")) return e;
  for (const char* d : {"../shared/data", "../../shared/data"}) {
    if (Exists(std::string(d) + "/locomo/episodes.jsonl")) return d;
  }
  return "";
}


// The ids of a recall's hits, best first.
void Recall(agentmem_db* db, const std::string& user, const std::string& query, int mode, int k,
            std::vector<int64_t>* out) {
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.mode = mode;
  o.k = k;
  if (no_floor) o.min_similarity = -INFINITY;
  std::vector<float> qv;
  if (glove) {
    qv = glove->Embed(query);
    o.query_vector = qv.data();
    o.query_dim = static_cast<int>(qv.size());
  }
  agentmem_cursor* cur = nullptr;
  int rc = agentmem_recall(db, user.c_str(), query.c_str(), &o, &cur);
  if (rc != AGENTMEM_OK) Die(std::string("recall: ") + agentmem_errmsg(db), rc);
  out->clear();
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) out->push_back(agentmem_cursor_hit(cur)->id);
  agentmem_cursor_close(cur);
  if (rc != AGENTMEM_DONE) Die("cursor step", rc);
}

// Loads one set into a new database and scores every mode.
void EvaluateSet(const std::string& dir, const std::string& set, const Config& config,
                 const std::set<std::string>& only) {
  std::ifstream episodes(dir + "/" + set + "/episodes.jsonl");
  std::ifstream questions(dir + "/" + set + "/questions.jsonl");
  if (!episodes || !questions) Die("cannot read " + dir + "/" + set + "/*.jsonl", 0);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(episodes, line);) rows.push_back(nlohmann::json::parse(line));
  std::stable_sort(rows.begin(), rows.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["conv_id"] != b["conv_id"] ? a["conv_id"] < b["conv_id"] : a["seq"] < b["seq"];
  });
  agentmem_db* db = nullptr;
  std::string options = config.options;
  if (glove) {
    options += ";vector_dim=100;embedder=" + std::string(agentmem::index::GloveEmbedder::kName);
  }
  int rc = agentmem_open_v2(":memory:", &db, AGENTMEM_OPEN_READWRITE, options.c_str());
  if (rc != AGENTMEM_OK) Die("open with \"" + config.options + "\" failed", rc);
  std::map<int64_t, Turn> turn_of;
  if ((rc = agentmem_begin(db)) != AGENTMEM_OK) Die("begin", rc);
  for (const nlohmann::json& j : rows) {
    std::string conv = j["conv_id"], text = j["text"], session = std::to_string(j["session"].get<int>());
    int64_t id = 0;
    std::vector<float> v;
    if (glove) v = glove->Embed(text);
    rc = agentmem_remember(db, conv.c_str(), session.c_str(), "user", text.c_str(), 0, nullptr,
                           glove ? v.data() : nullptr, static_cast<int>(v.size()), &id);
    if (rc != AGENTMEM_OK) Die("remember: " + std::string(agentmem_errmsg(db)), rc);
    turn_of[id] = {j["turn_id"], session};
  }
  if ((rc = agentmem_commit(db)) != AGENTMEM_OK) Die("commit", rc);
  std::map<std::pair<std::string, std::string>, std::string> session_of;  // (conv, turn) -> session
  for (const nlohmann::json& j : rows) {
    session_of[{j["conv_id"], j["turn_id"]}] = std::to_string(j["session"].get<int>());
  }

  const int modes[] = {AGENTMEM_RECALL_BM25, AGENTMEM_RECALL_VECTOR, AGENTMEM_RECALL_HYBRID};
  const char* names[] = {"bm25", "vector", "hybrid"};
  Scores scores[3];
  std::vector<nlohmann::json> qs;
  for (std::string line; std::getline(questions, line);) qs.push_back(nlohmann::json::parse(line));
  for (const nlohmann::json& q : qs) {
    if (set == "locomo" && q["category"] == 5) continue;
    if (q["evidence_turn_ids"].empty()) continue;
    std::string conv = q["conv_id"];
    std::set<std::string> ev, ev_sess;
    for (const auto& e : q["evidence_turn_ids"]) {
      ev.insert(e.get<std::string>());
      ev_sess.insert(session_of.at({conv, e.get<std::string>()}));
    }
    for (int m = 0; m < 3; m++) {
      if (!only.empty() && !only.count(names[m])) continue;
      // Turns: the hits of a recall with k = 10, as an app asks. Sessions:
      // the first 10 distinct sessions of a deeper ranking (k = 300).
      std::vector<int64_t> hits, deep;
      Recall(db, conv, q["question"], modes[m], 10, &hits);
      Recall(db, conv, q["question"], modes[m], 300, &deep);
      std::vector<std::string> sess_rank;
      for (size_t i = 0; i < deep.size() && sess_rank.size() < 10; i++) {
        std::string s = turn_of[deep[i]].session;
        if (std::find(sess_rank.begin(), sess_rank.end(), s) == sess_rank.end()) sess_rank.push_back(s);
      }
      auto turn_recall = [&](size_t k) {
        int found = 0;
        for (size_t i = 0; i < k && i < hits.size(); i++) found += ev.count(turn_of[hits[i]].turn_id);
        return static_cast<double>(found) / static_cast<double>(ev.size());
      };
      auto sess_recall = [&](size_t k) {
        int found = 0;
        for (size_t i = 0; i < k && i < sess_rank.size(); i++) found += ev_sess.count(sess_rank[i]);
        return static_cast<double>(found) / static_cast<double>(ev_sess.size());
      };
      Scores& s = scores[m];
      s.turn5 += turn_recall(5);
      s.turn10 += turn_recall(10);
      s.sess5 += sess_recall(5);
      s.sess10 += sess_recall(10);
      s.questions++;
    }
  }
  agentmem_close(db);
  for (int m = 0; m < 3; m++) {
    if (!only.empty() && !only.count(names[m])) continue;
    const Scores& s = scores[m];
    double n = s.questions > 0 ? s.questions : 1;
    std::printf("| %-8s | %-10s | %-6s | %5d | %.3f | %.3f | %.3f | %.3f |\n", set.c_str(),
                config.name.c_str(), names[m], s.questions, s.turn5 / n, s.turn10 / n, s.sess5 / n,
                s.sess10 / n);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string data;
  std::vector<std::string> sets;
  std::vector<Config> configs;
  std::set<std::string> modes;
  bool all_glove = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value", 0);
      return argv[++i];
    };
    if (a == "--data") {
      data = value();
    } else if (a == "--glove-vectors") {
      all_glove = true;
    } else if (a == "--no-floor") {
      no_floor = true;
    } else if (a == "--mode") {
      modes.insert(value());
    } else if (a == "--set") {
      sets.push_back(value());
    } else if (a == "--config") {
      std::string c = value();
      size_t eq = c.find('=');
      if (eq == std::string::npos) Die("--config wants NAME=OPTIONS, got " + c, 0);
      configs.push_back({c.substr(0, eq), c.substr(eq + 1)});
    } else {
      std::fprintf(stderr,
                   "usage: eval [--data DIR] [--set locomo|realtalk]... [--mode bm25|vector|hybrid]...\n"
                   "            [--glove-vectors] [--no-floor] [--config NAME=OPTIONS]...\n"
                   "  --glove-vectors: the eval embeds texts and queries with the linked GloVe\n"
                   "  table (agentmem-glove-v2) and passes the vectors to the engine, in every\n"
                   "  configuration (whatever embedder it names)\n"
                   "  --no-floor: no similarity floor (min_similarity = -inf): ranking quality\n"
                   "  DIR defaults to $AGENTMEM_DATA_DIR or ../shared/data; OPTIONS are open\n"
                   "  options (agentmem_open_v2), e.g. reference=tokenizer=ascii;stem=0;stop_words=0\n");
      return a == "--help" ? 0 : 2;
    }
  }
  data = FindData(data);
  if (data.empty()) Die("no evaluation data: pass --data DIR or set AGENTMEM_DATA_DIR", 0);
  if (sets.empty()) sets = {"locomo", "realtalk"};
  if (configs.empty()) {
    configs = {{"reference", "tokenizer=ascii;stem=0;stop_words=0;context=0"},
               {"default", ""},
               {"hash", "embedder=agentmem-hash-v1"}};
    if (agentmem::index::GloveTable::HasLinked()) {
      configs.push_back({"glove-v1", "embedder=agentmem-glove-v1"});
    }
  }
  for (Config& c : configs) c.glove |= all_glove;
  std::printf("| set      | config     | mode   | questions | turn R@5 | turn R@10 | session R@5 | session R@10 |\n"
              "|----------|------------|--------|------:|------:|------:|------:|------:|\n");
  for (const std::string& set : sets) {
    for (const Config& c : configs) {
      glove = c.glove ? LinkedGlove() : nullptr;
      EvaluateSet(data, set, c, modes);
    }
  }
  return 0;
}

// tests/index/text/glove_eval.cc -- measures the built-in embedders: vector
// turn recall on the shared LoCoMo/REALTALK splits (cosine over every turn
// of a question's conversation, as the engine's exact scan ranks them), how
// the similarities separate (the 99th percentile of a question against the
// turns of the next conversation, bench/relevance_floor.py's "unrelated"
// pairs, the median of its evidence turns, and the share of those at or above
// that percentile) and the time to embed a 20-word text. A tool, not a test: docs/recall.md
// ("The built-in embedder") gives its numbers.
//
//   glove_eval recall [TABLE [A S N WORDS [C]]] TABLE: a table file from
//                  index/text/glove/convert.py (default: the linked one,
//                  agentmem-glove-v2); A, S, N: sif_a, zipf_exponent,
//                  number_weight; WORDS: the vocabulary cut (0 = all); C: step
//                  4, 0 none, 1 as v1, 2 as v2 (default 0 with A S N WORDS)
//   glove_eval v1                           the linked table, agentmem-glove-v1
//   glove_eval hash                         the same for agentmem-hash-v1 (384-d)
//   glove_eval time [v1]                    the first use's cost, microseconds
//                                           per 20-word text
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "index/text/glove_embedder.h"
#include "index/text/hash_embedder.h"
#include "tests/index/text/shared_data.h"

using agentmem::index::GloveEmbedder;
using agentmem::index::GloveTable;
using agentmem::index::HashEmbedder;
using Embed = std::function<std::vector<float>(const std::string&)>;

namespace {

struct Turn {
  std::string id;
  int seq;
  std::vector<float> v;
};

// Vector-only turn R@10 (and R@5) of one set, as tests/engine/recall_test.cc
// counts it (LoCoMo without its category 5).
void Recall(const std::string& dir, const std::string& set, const Embed& embed) {
  std::map<std::string, std::vector<Turn>> convs;
  std::ifstream episodes(dir + "/" + set + "/episodes.jsonl");
  for (std::string line; std::getline(episodes, line);) {
    auto j = nlohmann::json::parse(line);
    convs[j["conv_id"]].push_back({j["turn_id"], j["seq"], embed(j["text"])});
  }
  for (auto& [conv, turns] : convs) {
    std::sort(turns.begin(), turns.end(), [](const Turn& a, const Turn& b) { return a.seq < b.seq; });
  }
  std::ifstream questions(dir + "/" + set + "/questions.jsonl");
  double r5 = 0, r10 = 0;
  int n = 0;
  std::vector<double> unrelated, relevant;  // similarities
  std::vector<std::string> names;           // conversations in order
  for (auto& [conv, turns] : convs) names.push_back(conv);
  for (std::string line; std::getline(questions, line);) {
    auto q = nlohmann::json::parse(line);
    if (q["evidence_turn_ids"].empty() || (set == "locomo" && q["category"] == 5)) continue;
    std::set<std::string> evidence(q["evidence_turn_ids"].begin(), q["evidence_turn_ids"].end());
    const std::vector<float> qv = embed(q["question"]);
    const std::vector<Turn>& turns = convs[q["conv_id"]];
    std::vector<std::pair<double, size_t>> ranked;
    for (size_t i = 0; i < turns.size(); i++) {
      double dot = 0;
      for (size_t k = 0; k < qv.size(); k++) dot += static_cast<double>(qv[k]) * turns[i].v[k];
      ranked.push_back({-dot, i});
    }
    std::sort(ranked.begin(), ranked.end());
    for (const auto& [neg, i] : ranked) {
      if (evidence.count(turns[i].id)) relevant.push_back(-neg);
    }
    const size_t at =
        std::find(names.begin(), names.end(), q["conv_id"].get<std::string>()) - names.begin();
    for (const Turn& t : convs[names[(at + 1) % names.size()]]) {
      double dot = 0;
      for (size_t k = 0; k < qv.size(); k++) dot += static_cast<double>(qv[k]) * t.v[k];
      unrelated.push_back(dot);
    }
    int found5 = 0, found10 = 0;
    for (size_t i = 0; i < 10 && i < ranked.size(); i++) {
      if (evidence.count(turns[ranked[i].second].id)) (i < 5 ? found5 : found10)++;
    }
    r5 += static_cast<double>(found5) / evidence.size();
    r10 += static_cast<double>(found5 + found10) / evidence.size();
    n++;
  }
  std::sort(unrelated.begin(), unrelated.end());
  std::sort(relevant.begin(), relevant.end());
  const double p99 = unrelated[unrelated.size() * 99 / 100];
  const double above =
      static_cast<double>(relevant.end() - std::lower_bound(relevant.begin(), relevant.end(), p99)) /
      relevant.size();
  std::printf("%-9s %4d questions  vector turn R@5 %.4f  R@10 %.4f  unrelated p99 %.3f  "
              "relevant p50 %.3f, >= p99 %.3f\n",
              set.c_str(), n, r5 / n, r10 / n, p99, relevant[relevant.size() / 2], above);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "recall";
  std::vector<uint32_t> storage;  // a table file, 4-byte aligned
  std::optional<GloveEmbedder> glove;
  if (mode == "recall" && argc > 2) {
    std::ifstream f(argv[2], std::ios::binary);
    std::string raw((std::istreambuf_iterator<char>(f)), {});
    storage.resize(raw.size() / 4 + 1);
    std::memcpy(storage.data(), raw.data(), raw.size());
    auto t = GloveTable::Parse({reinterpret_cast<const uint8_t*>(storage.data()), raw.size()});
    if (!t.ok()) return std::fprintf(stderr, "%s: %s\n", argv[2], t.status().ToString().c_str()), 1;
    auto o = GloveEmbedder::DefaultOptions();
    if (argc > 6) o = {std::atof(argv[3]), std::atof(argv[4]), std::atof(argv[5]), static_cast<uint32_t>(std::atoi(argv[6]))};
    if (argc > 7) o.common = static_cast<agentmem::index::GloveCommon>(std::atoi(argv[7]));
    auto e = GloveEmbedder::Create(t.value(), o);
    if (!e.ok()) return std::fprintf(stderr, "%s\n", e.status().ToString().c_str()), 1;
    glove.emplace(e.value());
  } else if (mode != "hash") {
    const auto t0 = std::chrono::steady_clock::now();
    const bool v1 = mode == "v1" || (mode == "time" && argc > 2 && std::string(argv[2]) == "v1");
    auto e = GloveEmbedder::Create(v1 ? agentmem::index::GloveVersion::kV1
                                      : agentmem::index::GloveVersion::kV2);
    if (!e.ok()) return std::fprintf(stderr, "%s\n", e.status().ToString().c_str()), 1;
    glove.emplace(e.value());
    if (mode == "time") {
      std::printf("%s: first use (parse the table, step 4) %.0f ms\n",
                  std::string(glove->name()).c_str(),
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                      .count());
    }
  }
  HashEmbedder hash = HashEmbedder::Create({384}).value();
  if (mode == "time") {
    const std::string text = "Caroline said she went to the LGBTQ support group yesterday and it "
                             "was so powerful for her, she told Melanie";
    std::vector<float> out(GloveEmbedder::kDimension);
    for (int round = 0; round < 3; round++) {
      const int n = 100000;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < n; i++) glove->EmbedInto(text, out).IgnoreError();
      auto t1 = std::chrono::steady_clock::now();
      std::printf("%s: %.2f us per 20-word text\n", std::string(glove->name()).c_str(),
                  std::chrono::duration<double, std::micro>(t1 - t0).count() / n);
    }
    return 0;
  }
  const std::string dir = agentmem::test::SharedDataDir();
  if (dir.empty()) return std::fprintf(stderr, "no shared data (set AGENTMEM_DATA_DIR)\n"), 1;
  Embed embed = [&](const std::string& s) { return glove ? glove->Embed(s) : hash.Embed(s); };
  for (const char* set : {"locomo", "realtalk"}) Recall(dir, set, embed);
  return 0;
}

// cli/demo.cc -- `make demo`: builds demo.agentmem from a small sample
// conversation (demo/sample_conversation.tsv), reopens it, prints what it
// holds per user, and recalls an answer for each user with the hybrid search.
// A pure client of include/agentmem.h.
//
// Sample file lines (tab-separated):
//   E  user  session  role  minutes-offset  text        an episode
//   B  user  name     limit pinned-order    value       a block
//   F  user  subject  predicate  object     confidence  a fact
#include <agentmem.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> SplitTabs(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string field;
  while (std::getline(ss, field, '\t')) out.push_back(field);
  return out;
}

int Fail(agentmem_db* db, const char* what) {
  std::fprintf(stderr, "demo: %s: %s (%d)\n", what, agentmem_errmsg(db),
               agentmem_extended_errcode(db));
  agentmem_close(db);
  return 1;
}

int Load(const char* sample, const char* path, std::set<std::string>* users) {
  std::ifstream in(sample);
  if (!in) {
    std::fprintf(stderr, "demo: cannot read %s\n", sample);
    return 1;
  }
  std::remove(path);
  agentmem_db* db = nullptr;
  if (agentmem_open(path, &db) != AGENTMEM_OK) return Fail(db, "open");
  const int64_t base = 1764000000LL * 1000000;  // 2025-11-24, unix microseconds
  if (agentmem_begin(db) != AGENTMEM_OK) return Fail(db, "begin");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto f = SplitTabs(line);
    int rc = AGENTMEM_MISUSE;
    if (f[0] == "E" && f.size() == 6) {
      int64_t ts = base + std::atoll(f[4].c_str()) * 60 * 1000000;
      rc = agentmem_remember(db, f[1].c_str(), f[2].c_str(), f[3].c_str(), f[5].c_str(), ts,
                             nullptr, nullptr, 0, nullptr);
    } else if (f[0] == "B" && f.size() == 6) {
      rc = agentmem_block_set(db, f[1].c_str(), f[2].c_str(), f[5].c_str(), std::atoi(f[3].c_str()),
                              std::atoi(f[4].c_str()));
    } else if (f[0] == "F" && f.size() == 6) {
      rc = agentmem_fact_assert(db, f[1].c_str(), f[2].c_str(), f[3].c_str(), f[4].c_str(),
                                std::atof(f[5].c_str()), 0, 0, nullptr, 0, nullptr);
    }
    if (rc != AGENTMEM_OK) {
      std::fprintf(stderr, "demo: bad sample line: %s\n", line.c_str());
      return Fail(db, "load");
    }
    users->insert(f[1]);
  }
  if (agentmem_commit(db) != AGENTMEM_OK) return Fail(db, "commit");
  return agentmem_close(db) == AGENTMEM_OK ? 0 : 1;
}

int Print(const char* path, const std::set<std::string>& users) {
  agentmem_db* db = nullptr;
  if (agentmem_open_v2(path, &db, AGENTMEM_OPEN_READONLY, nullptr) != AGENTMEM_OK) {
    return Fail(db, "reopen");
  }
  agentmem_stats st;
  if (agentmem_stats_get(db, &st) != AGENTMEM_OK) return Fail(db, "stats");
  std::printf("%s: %lld bytes, %lld users, %lld episodes, %lld blocks, %lld facts, %lld commits\n",
              path, (long long)st.file_bytes, (long long)st.users, (long long)st.episodes,
              (long long)st.blocks, (long long)st.facts, (long long)st.commits);
  for (const std::string& user : users) {
    std::printf("\n== user %s\n", user.c_str());
    agentmem_cursor* cur = nullptr;
    if (agentmem_blocks(db, user.c_str(), &cur) != AGENTMEM_OK) return Fail(db, "blocks");
    while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
      const agentmem_block* b = agentmem_cursor_block(cur);
      std::printf("  block %-10s (limit %d, pinned %d): %s\n", b->name, b->limit, b->pinned_order,
                  b->value);
    }
    agentmem_cursor_close(cur);
    if (agentmem_facts(db, user.c_str(), nullptr, nullptr, &cur) != AGENTMEM_OK) {
      return Fail(db, "facts");
    }
    while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
      const agentmem_fact* f = agentmem_cursor_fact(cur);
      std::printf("  fact  #%lld %s %s %s (confidence %.2f)\n", (long long)f->id, f->subject,
                  f->predicate, f->object, f->confidence);
    }
    agentmem_cursor_close(cur);
    if (agentmem_episodes(db, user.c_str(), nullptr, &cur) != AGENTMEM_OK) {
      return Fail(db, "episodes");
    }
    while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
      const agentmem_episode* e = agentmem_cursor_episode(cur);
      std::printf("  #%-3lld [%s] %-9s %s\n", (long long)e->id, e->session_id, e->role, e->text);
    }
    agentmem_cursor_close(cur);
  }
  return agentmem_close(db) == AGENTMEM_OK ? 0 : 1;
}

// Hybrid recall for one question per user, with the per-list ranks.
int ShowRecall(const char* path) {
  agentmem_db* db = nullptr;
  if (agentmem_open_v2(path, &db, AGENTMEM_OPEN_READONLY, nullptr) != AGENTMEM_OK) {
    return Fail(db, "reopen");
  }
  const char* asks[][2] = {{"ana", "what is wrong with my sourdough starter?"},
                           {"ben", "what can I eat before the marathon?"}};
  for (const auto& ask : asks) {
    std::printf("\n== recall for %s: \"%s\"\n", ask[0], ask[1]);
    agentmem_recall_options o;
    agentmem_recall_options_init(&o);
    o.k = 3;
    agentmem_cursor* cur = nullptr;
    if (agentmem_recall(db, ask[0], ask[1], &o, &cur) != AGENTMEM_OK) return Fail(db, "recall");
    while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
      const agentmem_hit* h = agentmem_cursor_hit(cur);
      std::printf("  #%-3lld score %.4f (bm25 #%d %.2f, vector #%d %.2f)  %s\n", (long long)h->id,
                  h->score, h->bm25_rank, h->bm25_score, h->vector_rank, h->vector_score, h->text);
    }
    agentmem_cursor_close(cur);
  }
  return agentmem_close(db) == AGENTMEM_OK ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* sample = argc > 1 ? argv[1] : "demo/sample_conversation.tsv";
  const char* path = argc > 2 ? argv[2] : "demo.agentmem";
  std::printf("agentmem %s demo: loading %s into %s\n", agentmem_libversion(), sample, path);
  std::set<std::string> users;
  if (Load(sample, path, &users) != 0) return 1;
  if (Print(path, users) != 0) return 1;
  return ShowRecall(path);
}

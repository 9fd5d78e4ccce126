// cli/shell/recall_commands.cc -- .recall (hits with scores and both ranks) and
// .explain (the recall plan), through agentmem_recall / agentmem_explain_recall.
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "shell/dot_commands.h"
#include "shell/text.h"

namespace agentmem::shell {
namespace {

// A finite number, or -inf / "-infinity" (min_similarity: no floor).
bool ParseThreshold(const std::string& s, double* out) {
  if (s == "-inf" || s == "-infinity") {
    *out = -INFINITY;
    return true;
  }
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno != 0 || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// Parses ".recall USER QUERY [K] [MODE] [fill] [min_similarity=X] [min_bm25=X]"
// into the options.
bool ParseRecallArgs(Shell& sh, const Args& args, agentmem_recall_options* o) {
  agentmem_recall_options_init(o);
  if (args.size() < 3 || args.size() > 8) {
    sh.Fail("usage: " + args[0] +
            " USER QUERY [K] [hybrid|bm25|vector] [fill] [min_similarity=X] [min_bm25=X]");
    return false;
  }
  for (size_t i = 3; i < args.size(); i++) {
    int64_t k;
    const std::string& a = args[i];
    if (a == "fill") {
      o->fill = 1;
      continue;
    }
    if (a.rfind("min_similarity=", 0) == 0 || a.rfind("min_bm25=", 0) == 0) {
      bool sim = a[4] == 's';
      std::string value = a.substr(a.find('=') + 1);
      if (!ParseThreshold(value, sim ? &o->min_similarity : &o->min_bm25)) {
        sh.Fail(std::string(sim ? "min_similarity" : "min_bm25") + " must be a number, not \"" +
                value + "\"");
        return false;
      }
      continue;
    }
    if (ParseInt(args[i], &k)) {
      if (k < 1 || k > 10000) {
        sh.Fail("k must be between 1 and 10000, not " + args[i]);
        return false;
      }
      o->k = static_cast<int>(k);
    } else if (args[i] == "hybrid") {
      o->mode = AGENTMEM_RECALL_HYBRID;
    } else if (args[i] == "bm25") {
      o->mode = AGENTMEM_RECALL_BM25;
    } else if (args[i] == "vector") {
      o->mode = AGENTMEM_RECALL_VECTOR;
    } else {
      sh.Fail("unknown recall argument \"" + args[i] +
              "\" (K, hybrid, bm25, vector, fill, min_similarity=X or min_bm25=X)");
      return false;
    }
  }
  if (!sh.db()) {
    sh.Fail("no database is open (use .open FILE)");
    return false;
  }
  return true;
}

Value Rank(int rank) { return rank > 0 ? Value::Int(rank) : Value::Null(); }

// Scores: full precision for machine modes, 4 decimals for people.
Value Score(double v, bool human) {
  if (!human) return Value::Real(v);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return Value{2, buf};
}

}  // namespace

bool CmdRecall(Shell& sh, const Args& args) {
  agentmem_recall_options o;
  if (!ParseRecallArgs(sh, args, &o)) return false;
  agentmem_cursor* cur = nullptr;
  if (agentmem_recall(sh.db(), args[1].c_str(), args[2].c_str(), &o, &cur) != AGENTMEM_OK) {
    return sh.FailDb();
  }
  PrintOptions po = sh.print;
  if (po.mode == Mode::kList) po.mode = Mode::kTable;
  bool human = po.mode == Mode::kTable || po.mode == Mode::kBox;
  if (human) po.max_width = 72;
  auto printer = MakePrinter(po, sh.out);
  printer->Begin({"#", "id", "score", "bm25_rank", "bm25_score", "vector_rank", "vector_score",
                  "session_id", "role", "text"});
  int rc, n = 0;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    const agentmem_hit* h = agentmem_cursor_hit(cur);
    printer->Row({Value::Int(++n), Value::Int(h->id), Score(h->score, human), Rank(h->bm25_rank),
                  Score(h->bm25_score, human), Rank(h->vector_rank), Score(h->vector_score, human),
                  Value::Text(h->session_id), Value::Text(h->role), Value::Text(h->text)});
  }
  printer->End();
  agentmem_cursor_close(cur);
  if (rc != AGENTMEM_DONE) return sh.FailDb();
  if (n == 0 && human) {
    std::fprintf(sh.out, "(no episode of user \"%s\" matches; \"fill\" lists the others)\n",
                 args[1].c_str());
  }
  std::fflush(sh.out);
  return true;
}

bool CmdExplain(Shell& sh, const Args& args) {
  agentmem_recall_options o;
  if (!ParseRecallArgs(sh, args, &o)) return false;
  char* plan = nullptr;
  if (agentmem_explain_recall(sh.db(), args[1].c_str(), args[2].c_str(), &o, &plan) !=
      AGENTMEM_OK) {
    return sh.FailDb();
  }
  std::string text = plan;
  agentmem_free(plan);
  auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);
  if (!parsed.is_discarded()) {
    text = parsed.dump(sh.print.mode == Mode::kJson ? -1 : 2, ' ', false,
                       nlohmann::ordered_json::error_handler_t::replace);
  }
  std::fprintf(sh.out, "%s\n", text.c_str());
  std::fflush(sh.out);
  return true;
}

}  // namespace agentmem::shell

// bench/recall_bench.cc -- the side-by-side benchmark: the same workload, in
// the same process run, on the same data, on agentmem (through include/agentmem.h), on baseline (a) SQLite 3 + FTS5 +
// a vector BLOB scanned by a SQL function, and on baseline (b) raw hnswlib +
// FTS5 (bench/systems.h describes the three stores); then the peers LanceDB
// and sqlite-vec, run by bench/peers/peers.mjs with node on the data and
// queries this program exports (--peers-dir; skipped, with a line in the
// report, when node or the npm packages are missing).
//
// Data (all seeded, so two runs build byte-for-byte the same workload):
//   texts    WordNet 3.0 glosses (Debian's wordnet-base: the text after " | "
//            on each synset line of data.{noun,verb,adj,adv}; 117,659 texts),
//            shuffled; the first --queries are held out as query texts, the
//            next --n are the episodes.
//   vectors  clustered synthetic unit vectors: --clusters centres with N(0,1)
//            coordinates, each point = a random centre + N(0, --noise) per
//            coordinate, L2-normalised. Queries are drawn the same way. Vector
//            recall is checked against an exact brute-force top-10 computed
//            here.
//   locomo   ../shared/data/locomo (7 conversations = 7 users, 4,419 turns,
//            1,524 questions), vectors from agentmem's built-in embedder (read
//            back from the file and given to the baselines); evidence-turn
//            Recall@10 next to the latencies.
//   sift     ../shared/data/bigann10k_sift: 9,900 real 128-d SIFT vectors,
//            L2, recall@10 against the shipped exact ground truth.
//
// Phases per system (each prints progress lines on stderr):
//   1. ingest, one episode per transaction, durable (first --single);
//   2. ingest, --batch episodes per transaction, durable, N episodes
//      (hnswlib: the batch's vectors inserted by 2 threads; its own build
//      time is reported apart, it bounds agentmem's goal);
//   3. recall top-k after a reopen: hybrid, BM25-only, vector-only; warm-up,
//      then --rounds rounds of the queries, modes interleaved, each mode
//      within --budget seconds per run (brute force is slow: it runs fewer
//      queries, and the sample count is in the notes); vector recall@k;
//   4. open to first recall: a fresh child process (fork + exec of this
//      program with --open-only), warm page cache, median of --open-runs;
//      then --idle-open-runs more, each after --idle-seconds of sleep (a
//      VM may hand memory freed meanwhile back to its host: new memory
//      then costs what the anchors' first writes cost);
//   5. the user filter: the same N episodes over --users users (round
//      robin), every hit must belong to the user;
//   6. size (all files of the store against raw text + raw vectors) and
//      peak RSS (VmHWM above the bench's own data, reset per system).
// Then: text-only ingest with agentmem's built-in embedder (the one a new
// file gets by default, agentmem-glove-v2 when the library links its GloVe
// table, else agentmem-hash-v1; and agentmem-hash-v1 on up to 10,000 texts as
// an extra row), LoCoMo (vectors from the default embedder) and SIFT,
// and the goals (agentmem against each baseline) as ratios agentmem / baseline,
// and the same goals against the best peer as ratios agentmem / best peer.
// Results: bench/results/recall-n<N>.{md,csv} (one CSV row per system,
// workload and metric) and recall-latency-n<N>.dat for bench/plot.sh.
// --callgrind: instruction counts of ingest and recall per system, for
// `valgrind --tool=callgrind --collect-atstart=no` (make bench-callgrind).
// No timing is asserted anywhere; correctness checks print WARN lines and
// are counted in the report.
//
// usage: recall_bench [--n 100000] [--out bench/results] [--help] ...
#include <agentmem.h>

#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#ifdef BENCH_HAVE_CALLGRIND
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_DUMP_STATS_AT(x) ((void)(x))
#define RUNNING_ON_VALGRIND 0
#endif

#include "anchors.h"
#include "systems.h"

namespace {

using bench::AnchorsLine;
using bench::Anchors;
using bench::MeasureAnchors;
using bench::Mode;
using bench::Store;
using bench::SysHit;

// ------------------------------------------------------------------ config

struct Config {
  size_t n = 100000;          // episodes
  size_t queries = 1000;      // held-out query texts
  size_t warmup = 100;        // untimed queries per mode before timing
  int rounds = 3;             // timed passes over all queries, per mode
  double budget = 15;         // seconds per mode and timing run (all rounds)
  int k = 10;
  int dim = 384;
  int clusters = 1000;
  double noise = 0.35;        // per-coordinate noise around a N(0,1) centre
  uint64_t seed = 20240611;
  size_t batch = 1000;        // episodes per transaction (batched ingest)
  size_t single = 2000;       // episodes committed one per transaction
  int users = 1000;           // users of the filter workload
  int open_runs = 5;          // child processes timed (after one untimed)
  int idle_open_runs = 3;     // child processes timed after a sleep each
  int idle_seconds = 8;       // the sleep before each of those
  std::string wordnet = "/usr/share/wordnet";
  std::string data_dir;       // evaluation data (locomo, bigann10k_sift); "" = search
  std::string out = "bench/results";
  std::string workdir = "/tmp/agentmem-bench";
  std::vector<std::string> systems = {"agentmem", "sqlite", "hnswlib"};
  // The peers bench/peers/peers.mjs runs with node, on data this program
  // exports: LanceDB and sqlite-vec from the npm registry (make bench-node).
  std::vector<std::string> peers = {"lancedb", "sqlite-vec"};
  std::string peers_dir;      // holds node_modules; "" = $AGENTMEM_BENCH_NODE_DIR or the cache
  std::string peers_script = "bench/peers/peers.mjs";
  std::string node = "node";
  bool run_single = true, run_filter = true, run_open = true, run_embedder = true,
       run_locomo = true, run_sift = true, run_purge = true;
  std::vector<int> modes = {bench::kHybrid, bench::kBm25, bench::kVector};
  std::vector<int> ef_sweep = {10, 16, 24, 32, 48, 64, 96, 128, 256};
  bool callgrind = false, callgrind_prepare = false;
  // --open-only mode (the child of phase 4)
  std::string open_only, query_file, open_user, open_system = "agentmem", open_embedder,
      open_metric = "cosine";
};

const char* kUsage =
    "usage: recall_bench [options]\n"
    "  --n N            episodes (default 100000)\n"
    "  --queries Q      held-out queries (1000)      --warmup W   untimed queries per mode (100)\n"
    "  --rounds R       timed passes per mode (3)    --k K        hits per recall (10)\n"
    "  --budget S       seconds per mode and timing run; slow modes run fewer queries (15)\n"
    "  --clusters C     vector clusters (1000)       --noise S    per-coordinate noise (0.35)\n"
    "  --seed S         data seed                    --batch B    episodes per transaction (1000)\n"
    "  --single M       one-per-transaction episodes (2000)   --users U   users of the filter run (1000)\n"
    "  --open-runs R    timed child opens (5)\n"
    "  --idle-open-runs R  timed child opens after a sleep each (3)\n"
    "  --idle-seconds S the sleep before each of those opens, in seconds (8)\n"
    "  --systems LIST   agentmem,sqlite,hnswlib,lancedb,sqlite-vec (all five; the last two\n"
    "                   are the peers, run by node: see --peers-dir)\n"
    "  --peers-dir DIR  the folder whose node_modules holds @lancedb/lancedb, better-sqlite3\n"
    "                   and sqlite-vec (default $AGENTMEM_BENCH_NODE_DIR, else\n"
    "                   $AGENTMEM_CACHE_DIR/bench-node, else ~/.cache/agentmem/bench-node;\n"
    "                   make bench-node installs them); without them the peers are skipped\n"
    "  --peers-script F bench/peers/peers.mjs   --node PROGRAM  node   --no-peers\n"
    "  --modes LIST     recall modes to time, e.g. bm25 or hybrid,vector (all three)\n"
    "  --wordnet DIR    WordNet dict folder (/usr/share/wordnet; Debian package wordnet-base)\n"
    "  --data DIR       evaluation data folder (default: $AGENTMEM_DATA_DIR, ../shared/data,\n"
    "                   /work/shared/data)\n"
    "  --out DIR        results folder (bench/results)\n"
    "  --workdir DIR    where the store files go (/tmp/agentmem-bench)\n"
    "  --no-single --no-filter --no-open --no-embedder --no-locomo --no-sift --no-purge\n"
    "                   skip a phase\n"
    "  --keep           leave the store files in --workdir\n"
    "  --callgrind      instruction counts of ingest and recall (run under valgrind\n"
    "                   --tool=callgrind --collect-atstart=no; see make bench-callgrind)\n"
    "  --callgrind-prepare  writes the first N - batch episodes of the --callgrind stores\n"
    "                   (natively, before the valgrind run)\n"
    "  --open-only FILE --system S --query-file QF --user U --dim D --metric M --embedder E\n"
    "                   (internal) the child of the open phase\n"
    "Environment: AGENTMEM_BENCH_OPTIONS=K=V&... more agentmem open options, e.g.\n"
    "  cache_size=-16384 (a 16 MiB page cache), for every handle and the open children\n";

// ------------------------------------------------------------------ utilities

double g_t0 = 0;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double ThreadCpuUs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

void Progress(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "[%7.1fs] ", Seconds() - g_t0);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
}

std::string Fmt(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

// Appends `item` to a `sep`-separated list.
void Append(std::string* list, const std::string& sep, const std::string& item) {
  if (!list->empty()) *list += sep;
  *list += item;
}

std::string Quoted(const std::string& s) {
  std::string q = "\"";
  q += s;
  q += '"';
  return q;
}

int g_warnings = 0;
void Warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "WARN ");
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  g_warnings++;
}

[[noreturn]] void Die(agentmem_db* db, int rc, const char* what) {
  std::fprintf(stderr, "recall_bench: %s failed: %s (%s)\n", what, agentmem_errstr(rc),
               db ? agentmem_errmsg(db) : "");
  std::exit(1);
}

// Peak RSS of this process since the last ResetPeakRss(), in KiB (VmHWM),
// and the current RSS (VmRSS).
long StatusKiB(const char* field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field) + 1);
  return -1;
}
// Returns the RSS the next peak is measured from.
long ResetPeakRss() {
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";
  return StatusKiB("VmRSS");
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) i++;
  return s.substr(i);
}

std::string CommandOutput(const char* cmd) {
  std::string out;
  if (FILE* p = popen(cmd, "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  return Trim(out);
}

int64_t FileBytes(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// ------------------------------------------------------------------ statistics

struct Summary {
  size_t n = 0;
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, min = 0, max = 0, sum = 0;
};

// Nearest-rank percentiles over all samples.
Summary Summarize(std::vector<double> v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double p) {
    size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
  };
  s.p50 = rank(0.50);
  s.p90 = rank(0.90);
  s.p99 = rank(0.99);
  s.min = v.front();
  s.max = v.back();
  s.sum = std::accumulate(v.begin(), v.end(), 0.0);
  s.mean = s.sum / static_cast<double>(v.size());
  return s;
}

// ------------------------------------------------------------------ report

// One measured value. Baselines add rows with their own `system`;
// the Markdown table puts systems side by side.
struct Row {
  std::string system, workload, metric;
  double value;
  std::string unit, notes;
};

class Report {
 public:
  void Add(const std::string& workload, const std::string& metric, double value,
           const std::string& unit, const std::string& notes = "",
           const std::string& system = "agentmem") {
    rows_.push_back({system, workload, metric, value, unit, notes});
  }
  // Latency samples in microseconds: p50 (with the spread as its note), p99,
  // mean and queries/s.
  void AddLatency(const std::string& workload, const std::vector<double>& us,
                  const std::string& extra, const std::string& system = "agentmem") {
    Summary s = Summarize(us);
    std::string spread = Fmt("n=%zu; min %.3f, p90 %.3f, max %.3f ms", s.n, s.min / 1e3,
                             s.p90 / 1e3, s.max / 1e3);
    if (!extra.empty()) spread += "; " + extra;
    Add(workload, "p50", s.p50 / 1e3, "ms", spread, system);
    Add(workload, "p99", s.p99 / 1e3, "ms", "", system);
    Add(workload, "mean", s.mean / 1e3, "ms", "", system);
    Add(workload, "queries/s", s.sum > 0 ? 1e6 * static_cast<double>(s.n) / s.sum : 0, "1/s",
        "one thread, back to back", system);
  }
  void AddHeader(const std::string& line) { header_.push_back(line); }
  void AddSection(const std::string& title, const std::vector<std::string>& lines) {
    sections_.push_back({title, lines});
  }

  std::string Markdown() const {
    std::vector<std::string> systems;
    std::vector<std::pair<std::string, std::string>> keys;  // (workload, metric) in order
    std::map<std::pair<std::string, std::string>, std::map<std::string, const Row*>> cells;
    for (const Row& r : rows_) {
      if (std::find(systems.begin(), systems.end(), r.system) == systems.end())
        systems.push_back(r.system);
      auto key = std::make_pair(r.workload, r.metric);
      if (!cells.count(key)) keys.push_back(key);
      cells[key][r.system] = &r;
    }
    std::string md;
    for (const std::string& h : header_) md += h + "\n";
    md += "\n| workload | metric | unit |";
    for (const auto& s : systems) md += " " + s + " |";
    md += " notes |\n|---|---|---|";
    for (size_t i = 0; i < systems.size(); i++) md += "---:|";
    md += "---|\n";
    std::string last_workload;
    for (const auto& key : keys) {
      const auto& row = cells.at(key);
      std::string unit, notes;
      md += "| " + (key.first == last_workload ? std::string("〃") : key.first) + " | " +
            key.second + " |";
      // A note all systems share is written once, without the system's name.
      std::set<std::string> distinct;
      size_t with_value = 0;
      for (const auto& s : systems) {
        auto it = row.find(s);
        if (it == row.end()) continue;
        with_value++;
        distinct.insert(it->second->notes);
      }
      bool shared = distinct.size() == 1;
      for (const auto& s : systems) {
        auto it = row.find(s);
        if (it == row.end()) continue;
        unit = it->second->unit;
        if (shared) {
          notes = it->second->notes;
          break;
        }
        if (!it->second->notes.empty())
          Append(&notes, "; ", (systems.size() > 1 ? "**" + s + "**: " : std::string()) +
                                   it->second->notes);
      }
      (void)with_value;
      md += " " + unit + " |";
      for (const auto& s : systems) {
        auto it = row.find(s);
        md += ' ';
        md += it == row.end() ? std::string("—") : Value(it->second->value);
        md += " |";
      }
      md += " " + notes + " |\n";
      last_workload = key.first;
    }
    for (const auto& [title, lines] : sections_) {
      md += "\n" + title + "\n\n";
      for (const auto& l : lines) md += l + "\n";
    }
    return md;
  }

  std::string Csv(size_t n, int dim) const {
    std::string csv = "system,workload,metric,value,unit,n,dim,notes\n";
    for (const Row& r : rows_) {
      csv += Quote(r.system) + "," + Quote(r.workload) + "," + Quote(r.metric) + "," +
             Fmt("%.6g", r.value) + "," + Quote(r.unit) + "," + std::to_string(n) + "," +
             std::to_string(dim) + "," + Quote(r.notes) + "\n";
    }
    return csv;
  }

 private:
  static std::string Value(double v) {
    double a = std::fabs(v);
    if (a >= 100) return Fmt("%.0f", v);
    if (a >= 10) return Fmt("%.1f", v);
    if (a >= 1) return Fmt("%.2f", v);
    return Fmt("%.3f", v);
  }
  static std::string Quote(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  }
  std::vector<Row> rows_;
  std::vector<std::string> header_;
  std::vector<std::pair<std::string, std::vector<std::string>>> sections_;
};

// ------------------------------------------------------------------ data

// xoshiro256** seeded through splitmix64, and Box-Muller normals: the same
// numbers with every compiler and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& x : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      x = z ^ (z >> 31);
    }
  }
  uint64_t Next() {
    uint64_t r = Rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return r;
  }
  uint64_t Below(uint64_t n) { return Next() % n; }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double u1 = Uniform(), u2 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * M_PI * u2);
    have_spare_ = true;
    return r * std::cos(2 * M_PI * u2);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  double spare_ = 0;
  bool have_spare_ = false;
};

// The gloss of every synset: the text after " | " (the license header lines
// at the top of each file start with spaces and have none).
std::vector<std::string> LoadGlosses(const std::string& dir) {
  std::vector<std::string> out;
  for (const char* pos : {"noun", "verb", "adj", "adv"}) {
    std::string path = dir + "/data." + pos;
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr,
                   "recall_bench: cannot read %s: install Debian's wordnet-base "
                   "(make bench does) or pass --wordnet DIR\n",
                   path.c_str());
      std::exit(2);
    }
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == ' ') continue;
      size_t bar = line.find(" | ");
      if (bar == std::string::npos) continue;
      std::string g = Trim(line.substr(bar + 3));
      if (!g.empty()) out.push_back(std::move(g));
    }
  }
  return out;
}

struct Vectors {
  int dim = 0;
  std::vector<float> data;  // n * dim
  size_t size() const { return dim ? data.size() / static_cast<size_t>(dim) : 0; }
  const float* row(size_t i) const { return data.data() + i * static_cast<size_t>(dim); }
};

Vectors ClusteredVectors(const std::vector<float>& centres, int clusters, int dim, size_t n,
                         double noise, Rng& rng) {
  Vectors v;
  v.dim = dim;
  v.data.resize(n * static_cast<size_t>(dim));
  for (size_t i = 0; i < n; i++) {
    const float* c = centres.data() + rng.Below(static_cast<uint64_t>(clusters)) * dim;
    float* x = v.data.data() + i * dim;
    double norm = 0;
    for (int d = 0; d < dim; d++) {
      x[d] = static_cast<float>(c[d] + noise * rng.Normal());
      norm += static_cast<double>(x[d]) * x[d];
    }
    float inv = static_cast<float>(1.0 / std::sqrt(norm));
    for (int d = 0; d < dim; d++) x[d] *= inv;
  }
  return v;
}

// ------------------------------------------------------------------ exact top-k

__attribute__((target_clones("avx2", "default"))) float Dot(const float* a, const float* b,
                                                            int dim) {
  float acc[16] = {};
  int i = 0;
  for (; i + 16 <= dim; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += a[i + j] * b[i + j];
  float s = 0;
  for (; i < dim; i++) s += a[i] * b[i];
  for (float x : acc) s += x;
  return s;
}

struct Scored {
  float sim;
  uint32_t row;
};

// Keeps the k best (highest similarity; ties to the lower row) in `top`.
void Offer(std::vector<Scored>* top, size_t k, float sim, uint32_t row) {
  auto better = [](const Scored& a, const Scored& b) {
    return a.sim != b.sim ? a.sim > b.sim : a.row < b.row;
  };
  Scored s{sim, row};
  if (top->size() == k && !better(s, top->back())) return;
  auto it = std::upper_bound(top->begin(), top->end(), s, better);
  top->insert(it, s);
  if (top->size() > k) top->pop_back();
}

// Exact cosine top-k of every query over `rows` of `base` (unit vectors, so
// cosine = dot), by brute force; queries in blocks so that a base row is read
// once per block, on all cores.
std::vector<std::vector<uint32_t>> ExactTopK(const Vectors& base, const Vectors& queries,
                                             size_t k) {
  std::vector<std::vector<uint32_t>> out(queries.size());
  const size_t kBlock = 16;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  auto work = [&](unsigned t) {
    for (size_t q0 = t * kBlock; q0 < queries.size(); q0 += threads * kBlock) {
      size_t q1 = std::min(queries.size(), q0 + kBlock);
      std::vector<std::vector<Scored>> top(q1 - q0);
      for (size_t r = 0; r < base.size(); r++) {
        for (size_t q = q0; q < q1; q++) {
          Offer(&top[q - q0], k, Dot(base.row(r), queries.row(q), base.dim),
                static_cast<uint32_t>(r));
        }
      }
      for (size_t q = q0; q < q1; q++)
        for (const Scored& s : top[q - q0]) out[q].push_back(s.row);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; t++) pool.emplace_back(work, t);
  for (auto& th : pool) th.join();
  return out;
}

// ------------------------------------------------------------------ workload helpers

const char* ModeName(int mode) {
  return mode == bench::kHybrid ? "hybrid" : mode == bench::kBm25 ? "bm25" : "vector";
}
const char* ModeTitle(int mode) {
  return mode == bench::kHybrid ? "hybrid (BM25 + vector, RRF)"
         : mode == bench::kBm25 ? "BM25 only (OR)"
                                : "vector only";
}

std::string UserName(size_t u) { return Fmt("user-%04zu", u); }

// Where the evaluation data lives, or "" (the caller says what it skips).
std::string FindDataDir(const Config& c) {
  std::vector<std::string> tries;
  if (!c.data_dir.empty()) tries.push_back(c.data_dir);
  if (const char* e = std::getenv("AGENTMEM_DATA_DIR")) tries.push_back(e);
  tries.push_back("../shared/data");
  tries.push_back("/work/shared/data");
  for (const auto& t : tries) {
    struct stat st;
    if (stat(t.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return t;
  }
  return "";
}

struct Data {
  std::vector<std::string> texts;    // episodes
  std::vector<std::string> qtexts;   // held-out queries
  Vectors vecs, qvecs;
  int64_t text_bytes = 0;
};

struct IngestResult {
  std::vector<int64_t> ids;         // by corpus row
  std::vector<double> unit_us;      // per transaction
  std::vector<double> unit_cpu_us;  // the same, thread CPU time (excludes waits and preemption)
  double seconds = 0;               // first Add to last Commit
  double close_seconds = 0;         // Close() (hnswlib: saveIndex)
  double build_seconds = -1;        // hnswlib: its own vector inserts
};

// Writes rows [0, n) of texts/vecs (vecs null: agentmem's built-in
// embedder), `batch` per transaction (1: autocommit), user_of(i) as the user,
// into a new store at `path`, and closes it. Progress every ~10 s.
template <class UserOf>
IngestResult Ingest(Store& s, const std::string& path, const std::vector<std::string>& texts,
                    const Vectors* vecs, size_t n, size_t batch, UserOf user_of,
                    const std::string& label) {
  s.Create(path);
  IngestResult r;
  r.ids.resize(n);
  double t0 = Seconds(), next_report = t0 + 10;
  for (size_t i = 0; i < n; i += batch) {
    size_t end = std::min(n, i + batch);
    double u0 = Seconds(), c0 = ThreadCpuUs();
    if (batch > 1) s.Begin();
    for (size_t j = i; j < end; j++)
      r.ids[j] = s.Add(user_of(j), texts[j], vecs ? vecs->row(j) : nullptr);
    if (batch > 1) s.Commit();
    double u1 = Seconds();
    r.unit_us.push_back((u1 - u0) * 1e6);
    r.unit_cpu_us.push_back(ThreadCpuUs() - c0);
    if (u1 >= next_report || end == n) {
      Progress("%s: %zu / %zu episodes, %.0f episodes/s so far", label.c_str(), end, n,
               static_cast<double>(end) / (u1 - t0));
      next_report = u1 + 10;
    }
  }
  r.seconds = Seconds() - t0;
  r.build_seconds = s.VectorBuildSeconds();
  double c0 = Seconds();
  s.Close();
  r.close_seconds = Seconds() - c0;
  return r;
}

struct ModeRun {
  std::vector<double> wall_us, cpu_us;
  std::vector<double> round_p50_us;
  std::vector<std::vector<SysHit>> first_round;   // hits of round 0, by query
  std::vector<std::vector<double>> by_query_us;   // every round's latency, by query
};

// Warm-up (at most --warmup queries or a tenth of the budget per mode), then
// `rounds` timed passes over the queries with the modes interleaved (so that
// a noisy stretch of the machine hits every mode alike); a mode stops a pass
// after budget/rounds seconds (at least 20 queries a pass).
std::map<int, ModeRun> TimeRecall(Store& s, const Config& c, const std::vector<std::string>& qtexts,
                                  const Vectors& qvecs, const std::vector<int>& modes,
                                  const std::vector<const char*>& user_of_query,
                                  const std::string& label) {
  std::map<int, ModeRun> runs;
  size_t nq = qtexts.size();
  std::vector<SysHit> hits;
  for (int mode : modes) {
    double w0 = Seconds();
    for (size_t i = 0; i < c.warmup && Seconds() - w0 < c.budget / 10; i++) {
      size_t q = i % nq;
      s.Recall(user_of_query[q], qtexts[q], qvecs.row(q), static_cast<Mode>(mode), c.k, &hits);
    }
  }
  double per_round = c.budget / c.rounds;
  for (int round = 0; round < c.rounds; round++) {
    for (int mode : modes) {
      ModeRun& run = runs[mode];
      run.by_query_us.resize(nq);
      std::vector<double> this_round;
      double r0 = Seconds();
      for (size_t q = 0; q < nq; q++) {
        if (q >= 20 && Seconds() - r0 > per_round) break;
        double c0 = ThreadCpuUs();
        int64_t t0 = MonoNs();
        s.Recall(user_of_query[q], qtexts[q], qvecs.row(q), static_cast<Mode>(mode), c.k, &hits);
        int64_t t1 = MonoNs();
        double c1 = ThreadCpuUs();
        double us = static_cast<double>(t1 - t0) / 1e3;
        run.wall_us.push_back(us);
        run.cpu_us.push_back(c1 - c0);
        this_round.push_back(us);
        if (run.first_round.size() <= q) run.first_round.push_back(hits);
        run.by_query_us[q].push_back(us);
      }
      Summary sm = Summarize(this_round);
      run.round_p50_us.push_back(sm.p50);
      Progress("%s %s: round %d/%d %-6s %zu queries  p50 %.3f ms  p99 %.3f ms  mean %.3f ms",
               s.Name().c_str(), label.c_str(), round + 1, c.rounds, ModeName(mode), sm.n,
               sm.p50 / 1e3, sm.p99 / 1e3, sm.mean / 1e3);
    }
  }
  return runs;
}

std::string LatencyNotes(const ModeRun& r) {
  Summary cpu = Summarize(r.cpu_us);
  std::string rounds;
  for (double p : r.round_p50_us) Append(&rounds, "/", Fmt("%.3f", p / 1e3));
  size_t distinct = 0;
  for (const auto& v : r.by_query_us) distinct += !v.empty();
  return Fmt("thread CPU p50 %.3f, p99 %.3f ms; p50 per round %s ms; %zu distinct queries",
             cpu.p50 / 1e3, cpu.p99 / 1e3, rounds.c_str(), distinct);
}

// Every list has k hits, and the hits came from the searches (a rank in the
// list the mode asks for). agentmem fills short lists from the partition
// (score 0, no rank), the baselines return short lists: both are counted.
void CheckLists(const std::string& system, std::map<int, ModeRun>& runs, const std::vector<std::string>& qtexts, int k,
                const std::string& what, std::vector<std::string>* checks) {
  for (auto& [mode, run] : runs) {
    size_t short_lists = 0, hits = 0, ranked = 0, empty_queries = 0;
    std::string examples;
    for (size_t q = 0; q < run.first_round.size(); q++) {
      const auto& list = run.first_round[q];
      if (list.size() != static_cast<size_t>(k)) short_lists++;
      size_t r = 0;
      for (const SysHit& h : list) {
        bool in = mode == bench::kBm25     ? h.bm25_rank > 0
                  : mode == bench::kVector ? h.vector_rank > 0
                                           : h.bm25_rank > 0 || h.vector_rank > 0;
        r += in;
      }
      hits += list.size();
      ranked += r;
      if (r == 0 && empty_queries++ < 3) Append(&examples, ", ", Quoted(qtexts[q]));
    }
    if (system == "agentmem" && short_lists)
      Warn("%s %s %s: %zu recalls returned fewer than k hits", system.c_str(), what.c_str(),
           ModeName(mode), short_lists);
    if (empty_queries * 20 > run.first_round.size())
      Warn("%s %s %s: %zu of %zu queries found nothing", system.c_str(), what.c_str(),
           ModeName(mode), empty_queries, run.first_round.size());
    checks->push_back(Fmt("- %s, %s, %s: %zu lists shorter than k=%d; %zu of %zu hits ranked by "
                          "the search; %zu queries found nothing%s%s",
                          system.c_str(), what.c_str(), ModeName(mode), short_lists, k, ranked,
                          hits, empty_queries, examples.empty() ? "" : ", e.g. ",
                          examples.c_str()));
  }
}

// EXPLAIN RECALL (agentmem) of query 0 and of each mode's slowest query (by
// its median over the rounds, so that one preempted sample does not pick it).
void AddPlans(Store& s, const std::map<int, ModeRun>& runs,
              const std::vector<std::string>& qtexts, const Vectors& qvecs,
              const std::vector<const char*>& user_of_query, int k, const std::string& what,
              std::vector<std::string>* plans) {
  for (const auto& [mode, run] : runs) {
    std::string p0 = s.Explain(user_of_query[0], qtexts[0], qvecs.row(0), static_cast<Mode>(mode), k);
    if (p0.empty()) return;
    plans->push_back(Fmt("- %s, %s, query 1: `%s`", ModeName(mode), what.c_str(), p0.c_str()));
    size_t worst = 0;
    double worst_us = -1;
    for (size_t q = 0; q < run.by_query_us.size(); q++) {
      if (run.by_query_us[q].empty()) continue;
      double med = Summarize(run.by_query_us[q]).p50;
      if (med > worst_us) worst = q, worst_us = med;
    }
    if (worst_us < 0) continue;
    std::string p = s.Explain(user_of_query[worst], qtexts[worst], qvecs.row(worst),
                              static_cast<Mode>(mode), k);
    plans->push_back(Fmt("- %s, %s, slowest query (#%zu, median %.3f ms over the rounds, %zu "
                         "bytes of text): `%s`",
                         ModeName(mode), what.c_str(), worst + 1, worst_us / 1e3,
                         qtexts[worst].size(), p.c_str()));
  }
}

// Fraction of the exact top-k rows found by the first round's hits.
double RecallAtK(const ModeRun& run, const std::unordered_map<int64_t, uint32_t>& row_of_id,
                 const std::vector<std::vector<uint32_t>>& truth, size_t k) {
  size_t found = 0, wanted = 0;
  for (size_t q = 0; q < run.first_round.size(); q++) {
    size_t want = std::min(k, truth[q].size());
    wanted += want;
    for (const SysHit& h : run.first_round[q]) {
      auto it = row_of_id.find(h.id);
      if (it != row_of_id.end() &&
          std::find(truth[q].begin(), truth[q].begin() + static_cast<long>(want), it->second) !=
              truth[q].begin() + static_cast<long>(want))
        found++;
    }
  }
  return wanted ? static_cast<double>(found) / static_cast<double>(wanted) : 0;
}

std::unordered_map<int64_t, uint32_t> RowOfId(const std::vector<int64_t>& ids) {
  std::unordered_map<int64_t, uint32_t> m;
  for (size_t i = 0; i < ids.size(); i++) m[ids[i]] = static_cast<uint32_t>(i);
  return m;
}

int64_t StoreBytes(const Store& s, const std::string& path) {
  int64_t total = 0;
  for (const auto& f : s.Files(path)) {
    int64_t b = FileBytes(f);
    if (b > 0) total += b;
  }
  return total;
}

// ------------------------------------------------------------------ open phase

bench::StoreOptions OptionsFor(int dim, bench::Metric metric, const std::string& embedder) {
  bench::StoreOptions o;
  o.dim = dim;
  o.metric = metric;
  o.embedder = embedder;
  return o;
}

// The child: reads the query first, then times open -> first hit.
int OpenOnlyMain(const Config& c) {
  std::string q = ReadSmallFile(c.query_file);
  if (q.size() < 8) {
    std::fprintf(stderr, "recall_bench --open-only: bad query file %s\n", c.query_file.c_str());
    return 2;
  }
  uint32_t text_len, dim;
  std::memcpy(&text_len, q.data(), 4);
  std::memcpy(&dim, q.data() + 4, 4);
  if (q.size() != 8 + text_len + dim * sizeof(float)) return 2;
  std::string text = q.substr(8, text_len);
  std::vector<float> vec(dim);
  std::memcpy(vec.data(), q.data() + 8 + text_len, dim * sizeof(float));
  auto store = bench::MakeStore(
      c.open_system, OptionsFor(static_cast<int>(dim),
                                c.open_metric == "l2" ? bench::Metric::kL2 : bench::Metric::kCosine,
                                c.open_embedder));
  int64_t t0 = MonoNs();
  store->Open(c.open_only);
  int64_t t1 = MonoNs();
  std::vector<SysHit> hits;
  store->Recall(c.open_user == "*" ? nullptr : c.open_user.c_str(), text, vec.data(),
                bench::kHybrid, c.k, &hits);
  int64_t t2 = MonoNs();
  std::string ids;
  for (const SysHit& h : hits) Append(&ids, ",", std::to_string(h.id));
  store->Close();
  std::printf("open_ns=%lld first_ns=%lld mono_first=%lld ids=%s\n",
              static_cast<long long>(t1 - t0), static_cast<long long>(t2 - t0),
              static_cast<long long>(t2), ids.c_str());
  return 0;
}

struct ChildRun {
  double open_ms = 0, first_ms = 0, since_fork_ms = 0;
  long maxrss_kib = 0;
  std::string ids;
  bool ok = false;
};

ChildRun RunChild(const std::string& system, const std::string& file,
                  const std::string& query_file, const std::string& user, int k,
                  const std::string& metric, const std::string& embedder) {
  ChildRun r;
  int fds[2];
  if (pipe(fds) != 0) return r;
  std::string kstr = std::to_string(k);
  int64_t fork_ns = MonoNs();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl("/proc/self/exe", "recall_bench", "--open-only", file.c_str(), "--system",
          system.c_str(), "--query-file", query_file.c_str(), "--user", user.c_str(), "--k",
          kstr.c_str(), "--metric", metric.c_str(), "--embedder", embedder.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(got));
  close(fds[0]);
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  long long open_ns, first_ns, mono_first;
  char ids[2048] = "";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
      std::sscanf(out.c_str(), "open_ns=%lld first_ns=%lld mono_first=%lld ids=%2047s", &open_ns,
                  &first_ns, &mono_first, ids) >= 3) {
    r.ok = true;
    r.open_ms = static_cast<double>(open_ns) / 1e6;
    r.first_ms = static_cast<double>(first_ns) / 1e6;
    r.since_fork_ms = static_cast<double>(mono_first - fork_ns) / 1e6;
    r.maxrss_kib = ru.ru_maxrss;
    r.ids = ids;
  }
  return r;
}

void WriteQueryFile(const std::string& path, const std::string& text, const float* vec, int dim) {
  std::string blob(8, '\0');
  uint32_t tl = static_cast<uint32_t>(text.size()), d = static_cast<uint32_t>(dim);
  std::memcpy(blob.data(), &tl, 4);
  std::memcpy(blob.data() + 4, &d, 4);
  blob += text;
  blob.append(reinterpret_cast<const char*>(vec), static_cast<size_t>(dim) * sizeof(float));
  std::ofstream(path, std::ios::binary) << blob;
}

// ------------------------------------------------------------------ one system, main data

struct Figures {  // what the goals compare, per system
  std::map<std::string, double> hybrid_p50, hybrid_p99, bm25_p50, bm25_p99, open_first_ms,
      open_ms, file_bytes, ingest_rate, vector_p50, vector_recall, single_rate, single_cpu_ms,
      peak_rss_mib;
  double hnsw_build_rate = 0;
  double text_ratio = -1;     // agentmem's text-only file / its raw text (built-in embedder)
  double purge_seconds = -1;  // agentmem: PURGE of purge_of of purge_n episodes
  size_t purge_of = 0, purge_n = 0;
};

struct Ctx {
  Ctx(const Config& c_, const Data& d_, Report& rep_,
      const std::vector<std::vector<uint32_t>>& truth_)
      : c(c_), d(d_), rep(rep_), truth(truth_) {}
  const Config& c;
  const Data& d;
  Report& rep;
  const std::vector<std::vector<uint32_t>>& truth;
  std::vector<std::string> checks, systems, plans, dat_recall, dat_latency;
  Figures fig;
  int64_t raw_bytes = 0;
  Anchors anchors;  // fdatasync and page-fault costs, measured at the start
};

const std::string kUser = "user-0";

// One recall mode's rows of a system: latency, the goal figures, the plot
// data and, for vector search, recall@10 against the exact top-k.
void AddModeFigures(Ctx& x, const std::string& name, int mode, const ModeRun& r,
                    const std::string& notes,
                    const std::unordered_map<int64_t, uint32_t>& row_of_id) {
  const Config& c = x.c;
  Report& rep = x.rep;
  rep.AddLatency(std::string("recall top-10, ") + ModeTitle(mode), r.wall_us, notes, name);
  Summary s = Summarize(r.wall_us);
  x.dat_latency.push_back(Fmt("%s %s %zu %.4f %.4f", name.c_str(), ModeName(mode), c.n,
                              s.p50 / 1e3, s.p99 / 1e3));
  if (mode == bench::kHybrid) x.fig.hybrid_p50[name] = s.p50 / 1e3, x.fig.hybrid_p99[name] = s.p99 / 1e3;
  if (mode == bench::kBm25) x.fig.bm25_p50[name] = s.p50 / 1e3, x.fig.bm25_p99[name] = s.p99 / 1e3;
  if (mode == bench::kVector) {
    double rec = RecallAtK(r, row_of_id, x.truth, static_cast<size_t>(c.k));
    x.fig.vector_p50[name] = s.p50 / 1e3;
    x.fig.vector_recall[name] = rec;
    rep.Add("vector recall@10 vs exact (cosine)", "recall@10", rec, "",
            Fmt("%zu queries, exact brute force in the bench", r.first_round.size()), name);
    x.dat_recall.push_back(Fmt("%s 64 %.4f %.4f", name.c_str(), s.p50 / 1e3, rec));
  }
}


std::string StorePath(const Config& c, const std::string& system, const std::string& what) {
  std::string p = c.workdir + "/" + what + "-" + system;
  if (system == "agentmem") p += ".agentmem";
  if (system == "sqlite") p += ".sqlite";
  return p;  // hnswlib: the store adds .hnsw and .sqlite
}

// --keep: the store files stay in --workdir for a look afterwards.
bool g_keep_stores = false;

void RemoveStore(const Store& s, const std::string& path) {
  if (g_keep_stores) return;
  for (const auto& f : s.Files(path)) std::remove(f.c_str());
}

// What the phases of one system share.
struct SystemRun {
  std::string name;
  bool am = false;  // agentmem
  bench::StoreOptions so;
  std::unique_ptr<Store> store;
  std::string main_file;
  IngestResult ing;            // phase 2
  std::map<int, ModeRun> runs;  // phase 3
  double reopen_ms = 0;        // phase 3: the in-process reopen
  long rss0 = 0;               // RSS before the system ran (KiB)
};

// Phase 1: one episode per transaction, durable, into its own store.
void SingleIngestPhase(Ctx& x, SystemRun& r) {
  const Config& c = x.c;
  const Data& d = x.d;
  Report& rep = x.rep;
  const std::string& name = r.name;
  const bool am = r.am;
  Store* store = r.store.get();
  const size_t users = static_cast<size_t>(c.users);
  auto main_user = [&](size_t i) { return am ? kUser : UserName(i % users); };
  {
    size_t m = std::min(c.single, c.n);
    std::string path = StorePath(c, name, "single");
    Progress("%s ingest: %zu episodes, one per transaction, durable -> %s", name.c_str(), m,
             path.c_str());
    IngestResult r = Ingest(*store, path, d.texts, &d.vecs, m, 1, main_user, name + " single");
    Summary s = Summarize(r.unit_us), cpu = Summarize(r.unit_cpu_us);
    std::string how = am ? "sync=full: one fdatasync per commit"
                      : name == "sqlite"
                          ? "WAL, synchronous=FULL: one WAL sync per commit"
                          : Fmt("the FTS5 row commits (WAL, FULL), addPoint in memory: the "
                                "vectors are durable only at saveIndex (%.0f ms at close)",
                                r.close_seconds * 1e3);
    const std::string w = "ingest, 1 episode per transaction (durable)";
    rep.Add(w, "commits/s", static_cast<double>(m) / r.seconds, "1/s",
            Fmt("%zu commits into an empty file; %s", m, how.c_str()), name);
    rep.Add(w, "commit p50", s.p50 / 1e3, "ms",
            Fmt("p99 %.3f, max %.3f ms; thread CPU p50 %.3f ms", s.p99 / 1e3, s.max / 1e3,
                cpu.p50 / 1e3),
            name);
    x.fig.single_rate[name] = static_cast<double>(m) / r.seconds;
    x.fig.single_cpu_ms[name] = cpu.p50 / 1e3;
    RemoveStore(*store, path);
  }
}

// Phase 2: N episodes, --batch per transaction, durable (r.ing).
void BatchedIngestPhase(Ctx& x, SystemRun& r) {
  const Config& c = x.c;
  const Data& d = x.d;
  Report& rep = x.rep;
  const std::string& name = r.name;
  const bool am = r.am;
  const bench::StoreOptions& so = r.so;
  Store* store = r.store.get();
  const size_t users = static_cast<size_t>(c.users);
  const std::string& main_file = r.main_file;
  auto main_user = [&](size_t i) { return am ? kUser : UserName(i % users); };
  Progress("%s ingest: %zu episodes, %zu per transaction, durable -> %s", name.c_str(), c.n,
           c.batch, main_file.c_str());
  r.ing = Ingest(*store, main_file, d.texts, &d.vecs, c.n, c.batch, main_user, name + " batched");
  const IngestResult& ing = r.ing;
  {
    Summary s = Summarize(ing.unit_us), cpu = Summarize(ing.unit_cpu_us);
    std::string w = Fmt("ingest, %zu per transaction (durable)", c.batch);
    double rate = static_cast<double>(c.n) / (ing.seconds + ing.close_seconds);
    x.fig.ingest_rate[name] = rate;
    rep.Add(w, "episodes/s", rate, "1/s",
            Fmt("%.1f s of transactions + %.2f s close%s for %zu episodes%s", ing.seconds,
                ing.close_seconds, am ? "" : name == "hnswlib" ? " (saveIndex)" : "", c.n,
                am ? ", one user" : Fmt(", %zu users", users).c_str()),
            name);
    rep.Add(w, "transaction p50", s.p50 / 1e3, "ms",
            Fmt("p99 %.1f, max %.1f ms; thread CPU p50 %.1f ms%s", s.p99 / 1e3, s.max / 1e3,
                cpu.p50 / 1e3,
                name == "hnswlib" ? " (the 2 insert threads are not in the main thread's CPU)"
                                  : ""),
            name);
    if (ing.build_seconds > 0) {
      x.fig.hnsw_build_rate = static_cast<double>(c.n) / ing.build_seconds;
      rep.Add(w, "vector index build alone", x.fig.hnsw_build_rate, "1/s",
              Fmt("hnswlib addPoint of every batch on %d threads: %.1f s", so.build_threads,
                  ing.build_seconds),
              name);
    }
  }
}

// Phase 3: recall on the reopened store (r.runs); hnswlib: the ef sweep.
void RecallPhase(Ctx& x, SystemRun& r) {
  const Config& c = x.c;
  const Data& d = x.d;
  Report& rep = x.rep;
  const std::string& name = r.name;
  const bool am = r.am;
  Store* store = r.store.get();
  const std::string& main_file = r.main_file;
  double o0 = Seconds();
  store->Open(main_file);
  double reopen_ms = r.reopen_ms = (Seconds() - o0) * 1e3;
  Progress("%s reopened in %.1f ms (in process); recall top-%d", name.c_str(), reopen_ms, c.k);
  std::vector<const char*> unfiltered(c.queries, am ? kUser.c_str() : nullptr);
  r.runs = TimeRecall(*store, c, d.qtexts, d.qvecs, c.modes, unfiltered, "recall");
  auto& runs = r.runs;
  const IngestResult& ing = r.ing;
  CheckLists(name, runs, d.qtexts, c.k, am ? "one partition" : "all episodes", &x.checks);
  AddPlans(*store, runs, d.qtexts, d.qvecs, unfiltered, c.k, Fmt("one partition of %zu", c.n),
           &x.plans);
  auto row_of_id = RowOfId(ing.ids);
  for (int mode : c.modes) {
    const ModeRun& r = runs[mode];
    AddModeFigures(x, name, mode, r, LatencyNotes(r), row_of_id);
  }
  if (name == "hnswlib" && !c.ef_sweep.empty()) {
    // recall against latency: the beam width sweep, vector only
    Config one = c;
    one.rounds = 1;
    one.warmup = 20;
    one.budget = 10;
    size_t nq = std::min<size_t>(c.queries, 500);
    std::vector<std::string> qt(d.qtexts.begin(), d.qtexts.begin() + static_cast<long>(nq));
    for (int ef : c.ef_sweep) {
      store->SetEf(ef);
      auto sw = TimeRecall(*store, one, qt, d.qvecs, {bench::kVector}, unfiltered,
                           Fmt("ef=%d", ef));
      const ModeRun& r = sw[bench::kVector];
      double rec = RecallAtK(r, row_of_id, x.truth, static_cast<size_t>(c.k));
      Summary s = Summarize(r.wall_us);
      rep.Add("vector only, hnswlib ef sweep", Fmt("ef %d: p50 / recall@10", ef), s.p50 / 1e3,
              "ms", Fmt("recall@10 %.3f over %zu queries", rec, r.first_round.size()), name);
      x.dat_recall.push_back(Fmt("hnswlib-ef %d %.4f %.4f", ef, s.p50 / 1e3, rec));
    }
    store->SetEf(64);
  }
  store->Close();
}

// The report's row of the opens after idling (first hits, ms).
void AddIdleOpens(Ctx& x, const std::string& name, const std::vector<double>& first_ms) {
  if (first_ms.empty()) return;
  std::string runs_s;
  for (double v : first_ms) Append(&runs_s, "/", Fmt("%.1f", v));
  x.rep.Add(Fmt("open → first recall after %d s idle (new process)", x.c.idle_seconds), "median",
            Summarize(first_ms).p50, "ms", Fmt("runs %s ms", runs_s.c_str()), name);
}

// One child process that opens r's file and recalls the query once.
ChildRun OpenChild(const Config& c, const SystemRun& r, const std::string& query_file) {
  return RunChild(r.name, r.main_file, query_file, r.am ? kUser : "*", c.k, "cosine",
                  "bench-synthetic");
}

// Opens after the machine sat idle: each child after a sleep of
// --idle-seconds; the median of their first hits, in the report.
void IdleOpens(Ctx& x, const SystemRun& r, const std::string& query_file) {
  const Config& c = x.c;
  if (c.idle_open_runs <= 0) return;
  std::vector<double> first_ms;
  Progress("%s open after idling: %d child processes, each after %d s of sleep", r.name.c_str(),
           c.idle_open_runs, c.idle_seconds);
  for (int i = 0; i < c.idle_open_runs; i++) {
    ::sleep(static_cast<unsigned>(std::max(0, c.idle_seconds)));
    ChildRun run = OpenChild(c, r, query_file);
    if (!run.ok) {
      Warn("%s: open-only child run after idling %d failed", r.name.c_str(), i);
      continue;
    }
    first_ms.push_back(run.first_ms);
    Progress("%s open after idling, run %d: first hit %.1f ms after open began", r.name.c_str(),
             i + 1, run.first_ms);
  }
  AddIdleOpens(x, r.name, first_ms);
}

// Phase 4: open to first recall in fresh child processes.
void OpenPhase(Ctx& x, SystemRun& r) {
  const Config& c = x.c;
  const Data& d = x.d;
  Report& rep = x.rep;
  const std::string& name = r.name;
  const bool am = r.am;
  auto& runs = r.runs;
  {
    const std::string query_file = c.workdir + "/query.bin";
    WriteQueryFile(query_file, d.qtexts[0], d.qvecs.row(0), c.dim);
    std::string expect;
    if (runs.count(bench::kHybrid) && !runs[bench::kHybrid].first_round.empty())
      for (const SysHit& h : runs[bench::kHybrid].first_round[0])
        Append(&expect, ",", std::to_string(h.id));
    std::vector<double> open_ms, first_ms, fork_ms;
    long child_rss = 0;
    bool same = true;
    Progress("%s open: 1 untimed + %d timed child processes (fork + exec, warm page cache)",
             name.c_str(), c.open_runs);
    for (int i = 0; i <= c.open_runs; i++) {
      ChildRun run = OpenChild(c, r, query_file);
      if (!run.ok) {
        Warn("%s: open-only child run %d failed", name.c_str(), i);
        continue;
      }
      if (!expect.empty() && run.ids != expect) same = false;
      if (i == 0) continue;
      open_ms.push_back(run.open_ms);
      first_ms.push_back(run.first_ms);
      fork_ms.push_back(run.since_fork_ms);
      child_rss = std::max(child_rss, run.maxrss_kib);
      Progress("%s open run %d: open %.1f ms, first hit %.1f ms after open began, %.1f ms after "
               "fork",
               name.c_str(), i, run.open_ms, run.first_ms, run.since_fork_ms);
    }
    if (!same) Warn("%s: a fresh process got different hybrid hits than the bench's handle",
                    name.c_str());
    x.checks.push_back(Fmt("- %s: a fresh process's first hybrid recall equals the bench "
                           "handle's: %s",
                           name.c_str(), same ? "yes" : "NO"));
    const std::string w = "open → first recall (new process, warm cache)";
    if (!first_ms.empty()) {
      Summary f = Summarize(first_ms), o = Summarize(open_ms), k = Summarize(fork_ms);
      std::string runs_s;
      for (double v : first_ms) Append(&runs_s, "/", Fmt("%.1f", v));
      const char* open_what = am                ? "agentmem_open_v2"
                              : name == "sqlite" ? "sqlite3_open_v2 + PRAGMAs"
                                                 : "loadIndex + sqlite3_open_v2";
      rep.Add(w, "median", f.p50, "ms", Fmt("runs %s ms", runs_s.c_str()), name);
      rep.Add(w, "open alone, median", o.p50, "ms", open_what, name);
      rep.Add(w, "fork → first hit, median", k.p50, "ms",
              "includes exec, dynamic loading, reading the query", name);
      rep.Add(w, "child peak RSS", static_cast<double>(child_rss) / 1024.0, "MiB",
              "the process after open + 1 hybrid recall", name);
      x.fig.open_first_ms[name] = f.p50;
      x.fig.open_ms[name] = o.p50;
    }
    rep.Add(w, "in-process reopen", r.reopen_ms, "ms", "in the bench process, just after ingest",
            name);
    IdleOpens(x, r, query_file);
  }
}

// The filtered workload's name in the report.
std::string FilterWorkload(const Config& c) {
  const size_t users = static_cast<size_t>(c.users);
  return Fmt("filtered to 1 of %zu users (%zu episodes each)", users, c.n / users);
}

// The exact top-k rows of query q among the episodes of its user (row i
// belongs to user i % --users, query q asks for user q % --users).
std::vector<std::vector<uint32_t>> UserTruth(const Ctx& x, size_t nq) {
  const Config& c = x.c;
  const size_t users = static_cast<size_t>(c.users);
  std::vector<std::vector<uint32_t>> utruth(nq);
  for (size_t q = 0; q < nq; q++) {
    std::vector<Scored> top;
    for (size_t r = q % users; r < c.n; r += users)
      Offer(&top, static_cast<size_t>(c.k), Dot(x.d.vecs.row(r), x.d.qvecs.row(q), c.dim),
            static_cast<uint32_t>(r));
    for (const Scored& s : top) utruth[q].push_back(s.row);
  }
  return utruth;
}

void AllUsersRecall(Ctx& x, Store& store);

// Phase 5: the same episodes over --users users, recall with the filter.
void FilterPhase(Ctx& x, SystemRun& r) {
  const Config& c = x.c;
  const Data& d = x.d;
  Report& rep = x.rep;
  const std::string& name = r.name;
  const bool am = r.am;
  Store* store = r.store.get();
  const size_t users = static_cast<size_t>(c.users);
  const std::string& main_file = r.main_file;
  const IngestResult& ing = r.ing;
  {
    auto user_of = [&](size_t i) { return UserName(i % users); };
    std::string path = main_file;
    std::vector<int64_t> ids = ing.ids;
    if (am) {
      path = StorePath(c, name, Fmt("users-n%zu", c.n));
      Progress("%s ingest: %zu episodes over %zu users (round robin), %zu per transaction -> %s",
               name.c_str(), c.n, users, c.batch, path.c_str());
      IngestResult ui =
          Ingest(*store, path, d.texts, &d.vecs, c.n, c.batch, user_of, name + " users");
      rep.Add(Fmt("ingest, %zu per transaction, %zu users", c.batch, users), "episodes/s",
              static_cast<double>(c.n) / (ui.seconds + ui.close_seconds), "1/s",
              Fmt("%.1f s", ui.seconds + ui.close_seconds), name);
      ids = ui.ids;
    }
    store->Open(path);
    std::vector<std::string> uq(c.queries);
    std::vector<const char*> user_of_query(c.queries);
    for (size_t q = 0; q < c.queries; q++) {
      uq[q] = UserName(q % users);
      user_of_query[q] = uq[q].c_str();
    }
    auto fr = TimeRecall(*store, c, d.qtexts, d.qvecs, c.modes, user_of_query, "filtered");
    std::string w = FilterWorkload(c);
    CheckLists(name, fr, d.qtexts, c.k, "user filter", &x.checks);
    AddPlans(*store, fr, d.qtexts, d.qvecs, user_of_query, c.k, "user filter", &x.plans);
    // Every hit belongs to the user; vector recall@k within the user's episodes.
    auto urow = RowOfId(ids);
    size_t foreign = 0, total = 0;
    for (auto& [mode, run] : fr)
      for (size_t q = 0; q < run.first_round.size(); q++)
        for (const SysHit& h : run.first_round[q]) {
          total++;
          if (h.user != uq[q]) foreign++;
        }
    if (foreign) Warn("%s: %zu of %zu filtered hits belong to another user", name.c_str(),
                      foreign, total);
    x.checks.push_back(Fmt("- %s, user filter: %zu of %zu hits (all modes, round 1) belong to "
                           "another user",
                           name.c_str(), foreign, total));
    if (fr.count(bench::kVector)) {
      const ModeRun& v = fr[bench::kVector];
      std::vector<std::vector<uint32_t>> utruth = UserTruth(x, v.first_round.size());
      rep.Add(w + ", vector", "recall@10", RecallAtK(v, urow, utruth, static_cast<size_t>(c.k)),
              "", "against the exact top-10 of the user's episodes", name);
    }
    for (int mode : {bench::kHybrid, bench::kVector, bench::kBm25}) {
      if (!fr.count(mode)) continue;
      rep.AddLatency(w + ", " + (mode == bench::kBm25 ? "BM25" : ModeName(mode)), fr[mode].wall_us,
                     LatencyNotes(fr[mode]), name);
    }
    if (am) AllUsersRecall(x, *store);
    store->Close();
    if (am) RemoveStore(*store, path);
  }
}

// agentmem's workload of the peers' unfiltered queries: the file of --users
// users searched across every user (all_users=1), each hit from any user.
void AllUsersRecall(Ctx& x, Store& store) {
  const Config& c = x.c;
  const Data& d = x.d;
  std::vector<const char*> every_user(c.queries, nullptr);
  auto ar = TimeRecall(store, c, d.qtexts, d.qvecs, c.modes, every_user, "all users");
  const std::string w = Fmt("every user of %d (all_users=1)", c.users);
  CheckLists("agentmem", ar, d.qtexts, c.k, "all users", &x.checks);
  AddPlans(store, ar, d.qtexts, d.qvecs, every_user, c.k, "all users", &x.plans);
  for (int mode : {bench::kHybrid, bench::kVector, bench::kBm25}) {
    if (!ar.count(mode)) continue;
    x.rep.AddLatency(w + ", " + (mode == bench::kBm25 ? "BM25" : ModeName(mode)), ar[mode].wall_us,
                     LatencyNotes(ar[mode]), "agentmem");
  }
}

// Phase 6: store size against the raw data, and peak RSS.
void SizePhase(Ctx& x, SystemRun& r) {
  Report& rep = x.rep;
  const std::string& name = r.name;
  const bool am = r.am;
  Store* store = r.store.get();
  const std::string& main_file = r.main_file;
  {
    int64_t bytes = StoreBytes(*store, main_file);
    x.fig.file_bytes[name] = static_cast<double>(bytes);
    std::string files;
    for (const auto& f : store->Files(main_file))
      if (FileBytes(f) > 0)
        Append(&files, ", ", Fmt("%s %lld", f.substr(f.rfind('/') + 1).c_str(),
                                 static_cast<long long>(FileBytes(f))));
    rep.Add("size", "store bytes", static_cast<double>(bytes) / 1048576.0, "MiB", files, name);
    rep.Add("size", "store / raw", static_cast<double>(bytes) / static_cast<double>(x.raw_bytes),
            "×", am ? "text, vectors, BM25 postings and the HNSW graph, one file"
                    : name == "sqlite" ? "table with vector BLOBs + FTS5 index"
                                       : "hnswlib index file + SQLite text with FTS5",
            name);
    long peak = StatusKiB("VmHWM");
    x.fig.peak_rss_mib[name] = (peak - r.rss0) / 1024.0;
    rep.Add("memory", "peak RSS of the bench during this system's run", (peak - r.rss0) / 1024.0,
            "MiB",
            Fmt("VmHWM above the %.0f MiB the bench held before (its data)", r.rss0 / 1024.0),
            name);
  }
}

// Every phase of one system on the main data (agentmem: the unfiltered
// workload is one user's partition of N, its design point, and the filtered
// one a second file of 1,000 users; the baselines store the 1,000 users once
// and their unfiltered queries have no WHERE).
void RunSystem(const std::string& name, Ctx& x) {
  const Config& c = x.c;
  SystemRun r;
  r.name = name;
  r.am = name == "agentmem";
  r.so = OptionsFor(c.dim, bench::Metric::kCosine, "bench-synthetic");
  r.so.capacity_hint = c.n;
  r.store = bench::MakeStore(name, r.so);
  r.rss0 = ResetPeakRss();
  r.main_file = StorePath(c, name, Fmt("main-n%zu", c.n));
  Progress("=== %s: %s", name.c_str(), r.store->Describe().c_str());
  x.systems.push_back("- **" + name + "**: " + r.store->Describe());
  if (c.run_single) SingleIngestPhase(x, r);
  BatchedIngestPhase(x, r);
  RecallPhase(x, r);
  if (c.run_open) OpenPhase(x, r);
  if (c.run_filter) FilterPhase(x, r);
  SizePhase(x, r);
  RemoveStore(*r.store, r.main_file);
}

// ------------------------------------------------------------------ peers (node)

// The peers run by bench/peers/peers.mjs with node, on the data exported
// here: LanceDB and sqlite-vec from the npm registry, installed by make
// bench-node outside the clone. Their measurements come back as JSON
// (latency samples in microseconds, the first round's hit rows) and go into
// the same rows, percentiles and recall@k as the systems above.

std::string PeersDir(const Config& c) {
  if (!c.peers_dir.empty()) return c.peers_dir;
  if (const char* e = std::getenv("AGENTMEM_BENCH_NODE_DIR"); e && *e) return e;
  if (const char* e = std::getenv("AGENTMEM_CACHE_DIR"); e && *e) return std::string(e) + "/bench-node";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/agentmem/bench-node";
}

// The npm packages a peer needs, as folders under node_modules.
std::vector<std::string> PeerPackages(const std::string& peer) {
  if (peer == "lancedb") return {"@lancedb/lancedb", "apache-arrow"};
  return {"better-sqlite3", "sqlite-vec"};
}

// "" when `peer` can run, else why not.
std::string PeerMissing(const Config& c, const std::string& dir, const std::string& peer) {
  if (FileBytes(c.peers_script) <= 0) return c.peers_script + " not found (run from the clone's root)";
  std::string v = CommandOutput((c.node + " --version 2>/dev/null").c_str());
  if (v.empty()) return "no " + c.node + " (Debian package nodejs; make bench-node installs it)";
  for (const auto& p : PeerPackages(peer))
    if (FileBytes(dir + "/node_modules/" + p + "/package.json") <= 0)
      return p + " is not installed in " + dir +
             "/node_modules (make bench-node installs it from the npm registry; was the "
             "registry unreachable?)";
  return "";
}

// Writes what the peers load: meta.json, texts.jsonl and queries.jsonl (one
// JSON string a line), vectors.f32 and qvectors.f32 (float32, row-major).
// Row i has id i and belongs to user i % --users, as in the baselines.
void ExportPeerData(const Ctx& x, const std::string& dir) {
  const Config& c = x.c;
  const Data& d = x.d;
  mkdir(dir.c_str(), 0755);
  nlohmann::json meta = {{"n", c.n},
                         {"dim", c.dim},
                         {"k", c.k},
                         {"queries", c.queries},
                         {"users", c.users},
                         {"batch", c.batch},
                         {"single", c.run_single ? c.single : 0},
                         {"warmup", c.warmup},
                         {"rounds", c.rounds},
                         {"budget", c.budget},
                         {"open_runs", c.run_open ? c.open_runs : 0},
                         {"idle_open_runs", c.run_open ? c.idle_open_runs : 0},
                         {"idle_seconds", c.idle_seconds},
                         {"filter", c.run_filter},
                         {"rrf_k", 60},
                         {"workdir", c.workdir}};
  meta["modes"] = nlohmann::json::array();
  for (int m : c.modes) meta["modes"].push_back(ModeName(m));
  std::ofstream(dir + "/meta.json") << meta.dump(1) << "\n";
  auto lines = [](const std::string& path, const std::vector<std::string>& v) {
    std::ofstream out(path);
    for (const auto& t : v)
      out << nlohmann::json(t).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
          << "\n";
  };
  lines(dir + "/texts.jsonl", d.texts);
  lines(dir + "/queries.jsonl", d.qtexts);
  auto floats = [](const std::string& path, const Vectors& v) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(v.data.data()),
               static_cast<std::streamsize>(v.data.size() * sizeof(float)));
  };
  floats(dir + "/vectors.f32", d.vecs);
  floats(dir + "/qvectors.f32", d.qvecs);
}

// Runs `argv` with its stdout sent to stderr (the node script prints progress
// lines); returns its exit status (-1: it did not run).
int RunToStderr(const std::vector<std::string>& argv) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(2, 1);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<double> Doubles(const nlohmann::json& j) {
  std::vector<double> v;
  for (const auto& e : j) v.push_back(e.get<double>());
  return v;
}

// A peer's timed mode as recall_bench's own runs hold it (hits: row ids,
// users from the rows).
ModeRun PeerModeRun(const Config& c, const nlohmann::json& j) {
  ModeRun r;
  r.wall_us = Doubles(j["wall_us"]);
  r.cpu_us = Doubles(j["cpu_us"]);
  r.round_p50_us = Doubles(j["round_p50_us"]);
  for (const auto& ids : j["first_round"]) {
    std::vector<SysHit> hits;
    for (const auto& id : ids) {
      SysHit h;
      h.id = id.get<int64_t>();
      h.user = UserName(static_cast<size_t>(h.id) % static_cast<size_t>(c.users));
      hits.push_back(h);
    }
    r.first_round.push_back(std::move(hits));
  }
  return r;
}

std::string PeerLatencyNotes(const ModeRun& r, const nlohmann::json& j) {
  Summary cpu = Summarize(r.cpu_us);
  std::string rounds;
  for (double p : r.round_p50_us) Append(&rounds, "/", Fmt("%.3f", p / 1e3));
  return Fmt("process CPU p50 %.3f, p99 %.3f ms (node and the library's threads); p50 per "
             "round %s ms; %d distinct queries",
             cpu.p50 / 1e3, cpu.p99 / 1e3, rounds.c_str(), j.value("distinct_queries", 0));
}

// Short lists, and filtered hits of another user, into the checks.
void PeerChecks(Ctx& x, const std::string& name, const std::map<int, ModeRun>& runs,
                const std::string& what, bool filtered) {
  const size_t users = static_cast<size_t>(x.c.users);
  for (const auto& [mode, run] : runs) {
    size_t short_lists = 0, foreign = 0, total = 0;
    for (size_t q = 0; q < run.first_round.size(); q++) {
      short_lists += run.first_round[q].size() != static_cast<size_t>(x.c.k);
      for (const SysHit& h : run.first_round[q]) {
        total++;
        if (filtered && h.user != UserName(q % users)) foreign++;
      }
    }
    if (foreign)
      Warn("%s %s %s: %zu of %zu hits belong to another user", name.c_str(), what.c_str(),
           ModeName(mode), foreign, total);
    x.checks.push_back(Fmt("- %s, %s, %s: %zu lists shorter than k=%d%s", name.c_str(),
                           what.c_str(), ModeName(mode), short_lists, x.c.k,
                           filtered ? Fmt("; %zu of %zu hits belong to another user", foreign,
                                          total)
                                          .c_str()
                                    : ""));
  }
}

int ModeOf(const std::string& m) {
  return m == "hybrid" ? bench::kHybrid : m == "bm25" ? bench::kBm25 : bench::kVector;
}

// The rows of one peer from peers.mjs's JSON, in the workloads (and with the
// figures) of the systems above.
void AddPeerResults(Ctx& x, const std::string& name, const nlohmann::json& j) {
  const Config& c = x.c;
  Report& rep = x.rep;
  const bool lance = name == "lancedb";
  const std::string durable =
      lance ? "a commit writes new files and renames them, no fsync (not durable on power loss)"
            : "WAL, synchronous=FULL: one WAL sync per commit";
  x.systems.push_back("- **" + name + "** (node " + j.value("node", "?") +
                      ", bench/peers/peers.mjs): " + j.value("describe", ""));
  if (j.contains("single")) {
    const auto& s = j["single"];
    Summary u = Summarize(Doubles(s["unit_us"]));
    const std::string w = "ingest, 1 episode per transaction (durable)";
    size_t m = s["count"].get<size_t>();
    rep.Add(w, "commits/s", static_cast<double>(m) / s["seconds"].get<double>(), "1/s",
            Fmt("%zu commits into an empty store; %s", m, durable.c_str()), name);
    rep.Add(w, "commit p50", u.p50 / 1e3, "ms", Fmt("p99 %.3f, max %.3f ms", u.p99 / 1e3, u.max / 1e3),
            name);
  }
  {
    const auto& b = j["batched"];
    Summary u = Summarize(Doubles(b["unit_us"]));
    double add = b["add_seconds"].get<double>(), fin = b["finish_seconds"].get<double>(),
           close = b["close_seconds"].get<double>();
    double rate = static_cast<double>(c.n) / (add + fin + close);
    x.fig.ingest_rate[name] = rate;
    const std::string w = Fmt("ingest, %zu per transaction (durable)", c.batch);
    rep.Add(w, "episodes/s", rate, "1/s",
            Fmt("%.1f s of commits%s + %.2f s close for %zu episodes, %d users; %s", add,
                fin > 0 ? Fmt(" + %.1f s before the first query (%s)", fin,
                              b.value("finish_notes", "").c_str())
                              .c_str()
                        : "",
                close, c.n, c.users, durable.c_str()),
            name);
    rep.Add(w, "transaction p50", u.p50 / 1e3, "ms",
            Fmt("p99 %.1f, max %.1f ms", u.p99 / 1e3, u.max / 1e3), name);
  }
  std::vector<int64_t> ids(c.n);
  std::iota(ids.begin(), ids.end(), 0);
  auto row_of_id = RowOfId(ids);
  std::map<int, ModeRun> runs;
  for (const auto& [mode_name, jr] : j["recall"].items()) {
    int mode = ModeOf(mode_name);
    ModeRun& r = runs[mode] = PeerModeRun(c, jr);
    AddModeFigures(x, name, mode, r, PeerLatencyNotes(r, jr), row_of_id);
  }
  PeerChecks(x, name, runs, "all episodes", false);
  if (j.contains("open")) {
    const auto& o = j["open"];
    std::vector<double> first, open, spawn;
    double rss = 0;
    std::string runs_s;
    for (const auto& r : o["runs"]) {
      first.push_back(r["first_ms"].get<double>());
      open.push_back(r["open_ms"].get<double>());
      spawn.push_back(r["since_spawn_ms"].get<double>());
      rss = std::max(rss, r["maxrss_kib"].get<double>());
      Append(&runs_s, "/", Fmt("%.1f", first.back()));
    }
    bool same = o.value("same", false);
    if (!same) Warn("%s: a fresh process got different hybrid hits than the bench's", name.c_str());
    x.checks.push_back(Fmt("- %s: a fresh process's first hybrid recall equals the bench "
                           "process's: %s",
                           name.c_str(), same ? "yes" : "NO"));
    const std::string w = "open → first recall (new process, warm cache)";
    if (!first.empty()) {
      Summary f = Summarize(first), op = Summarize(open), sp = Summarize(spawn);
      rep.Add(w, "median", f.p50, "ms", Fmt("runs %s ms", runs_s.c_str()), name);
      rep.Add(w, "open alone, median", op.p50, "ms",
              lance ? "connect + openTable" : "new Database + load sqlite-vec + PRAGMAs", name);
      rep.Add(w, "fork → first hit, median", sp.p50, "ms",
              "spawn of node: includes the runtime's start and loading the packages", name);
      rep.Add(w, "child peak RSS", rss / 1024.0, "MiB", "the node process after open + 1 hybrid recall",
              name);
      x.fig.open_first_ms[name] = f.p50;
      x.fig.open_ms[name] = op.p50;
    }
    rep.Add(w, "in-process reopen", j["reopen_ms"].get<double>(), "ms",
            "in the node process, just after ingest", name);
    std::vector<double> idle;
    if (o.contains("idle"))
      for (const auto& r : o["idle"]) idle.push_back(r["first_ms"].get<double>());
    AddIdleOpens(x, name, idle);
  }
  if (j.contains("filtered")) {
    const std::string w = FilterWorkload(c);
    std::map<int, ModeRun> fr;
    for (const auto& [mode_name, jr] : j["filtered"].items())
      fr[ModeOf(mode_name)] = PeerModeRun(c, jr);
    PeerChecks(x, name, fr, "user filter", true);
    if (fr.count(bench::kVector)) {
      const ModeRun& v = fr[bench::kVector];
      auto utruth = UserTruth(x, v.first_round.size());
      rep.Add(w + ", vector", "recall@10", RecallAtK(v, row_of_id, utruth, static_cast<size_t>(c.k)),
              "", "against the exact top-10 of the user's episodes", name);
    }
    for (int mode : {bench::kHybrid, bench::kVector, bench::kBm25}) {
      if (!fr.count(mode)) continue;
      rep.AddLatency(w + ", " + (mode == bench::kBm25 ? "BM25" : ModeName(mode)), fr[mode].wall_us,
                     PeerLatencyNotes(fr[mode], j["filtered"][ModeName(mode)]), name);
    }
  }
  {
    double bytes = j["size"]["bytes"].get<double>();
    x.fig.file_bytes[name] = bytes;
    rep.Add("size", "store bytes", bytes / 1048576.0, "MiB",
            Fmt("%d files", j["size"]["files"].get<int>()), name);
    rep.Add("size", "store / raw", bytes / static_cast<double>(x.raw_bytes), "×",
            lance ? "Lance data files, manifests and the three indexes (after optimize)"
                  : "SQLite file: table, vec0 chunks, FTS5 index",
            name);
    double peak = j["peak_rss_kib"].get<double>(), before = j["rss_before_kib"].get<double>();
    rep.Add("memory", "peak RSS of the bench during this system's run", (peak - before) / 1024.0,
            "MiB", Fmt("the node process's peak above the %.0f MiB it held with the data loaded", before / 1024.0),
            name);
  }
}

// Every peer of --systems on the main data, one node process each, after the
// systems above (one at a time: the machine has few cores). A peer that
// cannot run is named in the checks, and the bench goes on.
void RunPeers(Ctx& x) {
  const Config& c = x.c;
  if (c.peers.empty()) return;
  const std::string dir = PeersDir(c);
  std::vector<std::string> ready;
  for (const auto& p : c.peers) {
    std::string why = PeerMissing(c, dir, p);
    if (why.empty()) {
      ready.push_back(p);
      continue;
    }
    Warn("%s skipped: %s", p.c_str(), why.c_str());
    x.checks.push_back(Fmt("- %s skipped: %s", p.c_str(), why.c_str()));
  }
  if (ready.empty()) return;
  const std::string data = c.workdir + "/peers-data";
  ExportPeerData(x, data);
  Progress("exported the data and queries for the peers to %s", data.c_str());
  for (const auto& p : ready) {
    const std::string out = data + "/result-" + p + ".json";
    std::remove(out.c_str());
    Progress("=== %s: %s %s (node_modules in %s)", p.c_str(), c.node.c_str(),
             c.peers_script.c_str(), dir.c_str());
    int rc = RunToStderr({c.node, c.peers_script, "--modules", dir, "--data", data, "--system", p,
                          "--out", out});
    if (rc != 0 || FileBytes(out) <= 0) {
      Warn("%s: peers.mjs failed (exit status %d): no figures", p.c_str(), rc);
      x.checks.push_back(Fmt("- %s: peers.mjs failed (exit status %d): no figures", p.c_str(), rc));
      continue;
    }
    try {
      AddPeerResults(x, p, nlohmann::json::parse(ReadSmallFile(out)));
    } catch (const std::exception& e) {
      Warn("%s: unreadable results %s: %s", p.c_str(), out.c_str(), e.what());
    }
  }
  for (const char* f : {"meta.json", "texts.jsonl", "queries.jsonl", "vectors.f32", "qvectors.f32"})
    std::remove((data + "/" + f).c_str());
}

// ------------------------------------------------------------------ agentmem's built-in embedder

// The vector space a new file gets without options: the default built-in
// embedder, read from the header of an empty in-memory file's export.
struct EmbedderSpace {
  std::string name;
  int dim = 0;
};

EmbedderSpace DefaultEmbedder() {
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(":memory:", &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                            nullptr);
  if (rc != AGENTMEM_OK) Die(db, rc, "open :memory:");
  char* jsonl = nullptr;
  if ((rc = agentmem_export(db, nullptr, &jsonl)) != AGENTMEM_OK) Die(db, rc, "agentmem_export");
  std::string text(jsonl);
  agentmem_free(jsonl);
  agentmem_close(db);
  auto header = nlohmann::json::parse(text.substr(0, text.find('\n')));
  return {header["embedder"].get<std::string>(), header["dim"].get<int>()};
}

int64_t TextBytes(const std::vector<std::string>& texts, size_t n) {
  int64_t bytes = 0;
  for (size_t i = 0; i < n && i < texts.size(); i++) bytes += static_cast<int64_t>(texts[i].size());
  return bytes;
}

// Text-only ingest of `n` texts: agentmem embeds every text itself, with
// `space`, named in the open options (vector_dim alone would mean
// agentmem-hash-v1). `label` names it in the report.
void EmbedderIngest(Ctx& x, const EmbedderSpace& space, const std::string& label, size_t n) {
  const Config& c = x.c;
  auto store =
      bench::MakeAgentmemStore(OptionsFor(space.dim, bench::Metric::kCosine, space.name));
  std::string path = StorePath(c, "agentmem", Fmt("embedder-%s-n%zu", space.name.c_str(), n));
  Progress("agentmem ingest: %zu texts, built-in embedder %s, %zu per transaction -> %s", n,
           space.name.c_str(), c.batch, path.c_str());
  IngestResult r = Ingest(*store, path, x.d.texts, nullptr, n, c.batch,
                          [](size_t) { return kUser; }, "agentmem embedder");
  const std::string& what = label;
  x.rep.Add(Fmt("ingest, %zu per transaction, text only (%s)", c.batch, what.c_str()),
            "episodes/s", static_cast<double>(n) / (r.seconds + r.close_seconds), "1/s",
            Fmt("%.1f s for %zu texts; the engine embeds each text (%s, %d-d); the baselines "
                "have no embedder",
                r.seconds + r.close_seconds, n, space.name.c_str(), space.dim),
            "agentmem");
  const double ratio = static_cast<double>(FileBytes(path)) /
                      static_cast<double>(TextBytes(x.d.texts, n));
  x.rep.Add(Fmt("size, text only (%s)", what.c_str()), "file / raw text", ratio, "×",
            "vectors made by the engine are in the file; raw = text bytes only", "agentmem");
  if (label == "built-in embedder") x.fig.text_ratio = ratio;
  std::remove(path.c_str());
}

// The default embedder on all --n texts, and agentmem-hash-v1 (384-d) on at
// most 10,000 when it is not the default.
void RunEmbedderIngest(Ctx& x) {
  const EmbedderSpace space = DefaultEmbedder();
  EmbedderIngest(x, space, "built-in embedder", x.c.n);
  if (space.name != "agentmem-hash-v1") {
    EmbedderIngest(x, {"agentmem-hash-v1", 384}, "agentmem-hash-v1",
                   std::min<size_t>(x.c.n, 10000));
  }
}

// ------------------------------------------------------------------ purge

// Forgetting with PURGE: min(N, 50,000) episodes of one user (the bench's
// texts and vectors, 1,000 per durable transaction, in 50 sessions), then one
// session's episodes forgotten with AGENTMEM_FORGET_PURGE -- the forget, the
// VACUUM that copies the file without them and the search of the copy for
// every forgotten byte, timed as the one call a user makes.
void RunPurge(Ctx& x) {
  const Config& c = x.c;
  const size_t n = std::min<size_t>(c.n, 50000), sessions = 50;
  std::string options = Fmt("vector_dim=%d&vector_metric=cosine&sync=full&embedder=bench-synthetic",
                            c.dim);
  if (const char* more = std::getenv("AGENTMEM_BENCH_OPTIONS"); more != nullptr && *more)
    options += std::string("&") + more;
  const std::string path = StorePath(c, "agentmem", Fmt("purge-n%zu", n));
  std::remove(path.c_str());
  agentmem_db* db = nullptr;
  auto check = [&](int rc, const char* what) {
    if (rc != AGENTMEM_OK && rc != AGENTMEM_DONE)
      throw std::runtime_error(Fmt("purge: %s: %s", what, agentmem_errmsg(db)));
  };
  check(agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                         options.c_str()),
        "open");
  Progress("agentmem purge: %zu episodes in %zu sessions -> %s", n, sessions, path.c_str());
  for (size_t i = 0; i < n; i++) {
    if (i % c.batch == 0) check(agentmem_begin(db), "begin");
    const std::string session = Fmt("s%zu", i % sessions);
    check(agentmem_remember(db, kUser.c_str(), session.c_str(), "user", x.d.texts[i].c_str(), 0,
                            nullptr, x.d.vecs.row(i), c.dim, nullptr),
          "remember");
    if (i % c.batch == c.batch - 1 || i == n - 1) check(agentmem_commit(db), "commit");
  }
  agentmem_receipt r{};
  const double t0 = Seconds();
  check(agentmem_forget(db, kUser.c_str(), "s7", 0, AGENTMEM_FORGET_PURGE, &r), "forget");
  const double seconds = Seconds() - t0;
  agentmem_close(db);
  std::remove(path.c_str());
  x.fig.purge_seconds = seconds;
  x.fig.purge_of = static_cast<size_t>(r.episodes);
  x.fig.purge_n = n;
  x.rep.Add(Fmt("forget with PURGE, %lld of %zu episodes", static_cast<long long>(r.episodes), n),
            "seconds", seconds, "s",
            Fmt("forget + VACUUM + search of every byte of the copy: file %.1f -> %.1f MiB, "
                "%lld needles, residue %lld",
                r.bytes_before / 1048576.0, r.bytes_after / 1048576.0,
                static_cast<long long>(r.needles), static_cast<long long>(r.residue)),
            "agentmem");
}

// Reads a texmex .fvecs / .ivecs file: [int32 dim][dim values] per row.
template <class T>
std::vector<std::vector<T>> ReadVecs(const std::string& path) {
  std::vector<std::vector<T>> out;
  std::ifstream in(path, std::ios::binary);
  int32_t dim;
  while (in.read(reinterpret_cast<char*>(&dim), 4)) {
    if (dim <= 0 || dim > 100000) throw std::runtime_error(path + ": bad dimension");
    std::vector<T> v(static_cast<size_t>(dim));
    if (!in.read(reinterpret_cast<char*>(v.data()), static_cast<long>(v.size() * sizeof(T))))
      throw std::runtime_error(path + ": truncated");
    out.push_back(std::move(v));
  }
  return out;
}

Vectors ToVectors(const std::vector<std::vector<float>>& rows, int dim) {
  Vectors v;
  v.dim = dim;
  for (const auto& r : rows) v.data.insert(v.data.end(), r.begin(), r.end());
  return v;
}

// ------------------------------------------------------------------ LoCoMo (conversation-shaped)

// The vectors agentmem's built-in embedder made for the episodes of `path`
// (rows by id) and, through a scratch in-memory file, for the questions.
void EmbedderVectors(const std::string& am_path, int dim, const std::vector<int64_t>& ids,
                     const std::vector<std::string>& users,
                     const std::vector<std::string>& qtexts, Vectors* vecs, Vectors* qvecs) {
  const size_t n = ids.size();
  const size_t d = static_cast<size_t>(dim);
  vecs->dim = qvecs->dim = dim;
  vecs->data.assign(n * d, 0.0f);
  qvecs->data.assign(qtexts.size() * d, 0.0f);
  auto row_of_id = RowOfId(ids);
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(am_path.c_str(), &db, AGENTMEM_OPEN_READONLY, nullptr);
  if (rc != AGENTMEM_OK) Die(db, rc, "open the LoCoMo file");
  size_t got = 0;
  for (const std::string& u : std::set<std::string>(users.begin(), users.end())) {
    agentmem_cursor* cur = nullptr;
    if ((rc = agentmem_episodes(db, u.c_str(), nullptr, &cur)) != AGENTMEM_OK)
      Die(db, rc, "agentmem_episodes");
    while (agentmem_cursor_step(cur) == AGENTMEM_ROW) {
      const agentmem_episode* e = agentmem_cursor_episode(cur);
      auto it = row_of_id.find(e->id);
      if (it == row_of_id.end() || e->dim != dim || !e->vector) continue;
      std::memcpy(vecs->data.data() + static_cast<size_t>(it->second) * d, e->vector,
                  d * sizeof(float));
      got++;
    }
    agentmem_cursor_close(cur);
  }
  agentmem_close(db);
  if (got != n) Warn("LoCoMo: read back %zu of %zu embedded vectors", got, n);
  // The questions' vectors: the same embedder, through a scratch in-memory file.
  db = nullptr;
  if ((rc = agentmem_open_v2(":memory:", &db, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE,
                             "sync=off")) != AGENTMEM_OK)
    Die(db, rc, "open :memory:");
  if ((rc = agentmem_begin(db)) != AGENTMEM_OK) Die(db, rc, "agentmem_begin");
  for (const auto& q : qtexts)
    if ((rc = agentmem_remember(db, "q", "", "user", q.c_str(), 0, nullptr, nullptr, 0,
                                nullptr)) != AGENTMEM_OK)
      Die(db, rc, "agentmem_remember (question)");
  if ((rc = agentmem_commit(db)) != AGENTMEM_OK) Die(db, rc, "agentmem_commit");
  agentmem_cursor* cur = nullptr;
  if ((rc = agentmem_episodes(db, "q", nullptr, &cur)) != AGENTMEM_OK)
    Die(db, rc, "agentmem_episodes (questions)");
  size_t qi = 0;
  while (agentmem_cursor_step(cur) == AGENTMEM_ROW && qi < qtexts.size()) {
    const agentmem_episode* e = agentmem_cursor_episode(cur);
    if (e->vector && e->dim == dim)
      std::memcpy(qvecs->data.data() + qi * d, e->vector, d * sizeof(float));
    qi++;
  }
  agentmem_cursor_close(cur);
  agentmem_close(db);
  if (qi != qtexts.size()) Warn("LoCoMo: embedded %zu of %zu questions", qi, qtexts.size());
}


void RunLocomo(Ctx& x, const std::string& dir) {
  const Config& c = x.c;
  Report& rep = x.rep;
  std::ifstream ein(dir + "/locomo/episodes.jsonl"), qin(dir + "/locomo/questions.jsonl");
  if (!ein || !qin) {
    x.checks.push_back("- LoCoMo: " + dir + "/locomo not found: run skipped");
    return;
  }
  std::vector<std::string> texts, users, turn_ids;
  for (std::string line; std::getline(ein, line);) {
    auto j = nlohmann::json::parse(line);
    texts.push_back(j["text"].get<std::string>());
    users.push_back(j["conv_id"].get<std::string>());
    turn_ids.push_back(j["turn_id"].get<std::string>());
  }
  std::vector<std::string> qtexts, qusers;
  std::vector<std::vector<std::string>> evidence;
  std::vector<int> category;
  for (std::string line; std::getline(qin, line);) {
    auto j = nlohmann::json::parse(line);
    qtexts.push_back(j["question"].get<std::string>());
    qusers.push_back(j["conv_id"].get<std::string>());
    evidence.push_back(j["evidence_turn_ids"].get<std::vector<std::string>>());
    category.push_back(j["category"].get<int>());
  }
  size_t n = texts.size();
  Progress("LoCoMo: %zu turns of %zu conversations, %zu questions", n,
           std::set<std::string>(users.begin(), users.end()).size(), qtexts.size());
  int64_t text_bytes = 0;
  for (const auto& t : texts) text_bytes += static_cast<int64_t>(t.size());

  // agentmem with its default built-in embedder; the vectors it made go to
  // the baselines.
  const EmbedderSpace space = DefaultEmbedder();
  auto am = bench::MakeAgentmemStore(OptionsFor(space.dim, bench::Metric::kCosine, space.name));
  std::string am_path = StorePath(c, "agentmem", "locomo");
  IngestResult ai = Ingest(*am, am_path, texts, nullptr, n, c.batch,
                           [&](size_t i) { return users[i]; }, "locomo agentmem");
  rep.Add("LoCoMo: ingest, 1000 per transaction", "episodes/s",
          static_cast<double>(n) / (ai.seconds + ai.close_seconds), "1/s",
          Fmt("agentmem embeds each turn (built-in embedder %s)", space.name.c_str()),
          "agentmem");
  Vectors vecs, qvecs;
  EmbedderVectors(am_path, space.dim, ai.ids, users, qtexts, &vecs, &qvecs);

  std::vector<const char*> user_of_query(qtexts.size());
  for (size_t q = 0; q < qtexts.size(); q++) user_of_query[q] = qusers[q].c_str();
  Config lc = c;
  lc.budget = std::min(c.budget, 6.0);
  for (const std::string& name : c.systems) {
    std::unique_ptr<Store> store;
    std::string path = am_path;
    std::vector<int64_t> ids = ai.ids;
    if (name == "agentmem") {
      store = std::move(am);
    } else {
      bench::StoreOptions so = OptionsFor(space.dim, bench::Metric::kCosine, "");
      so.capacity_hint = n;
      store = bench::MakeStore(name, so);
      path = StorePath(c, name, "locomo");
      IngestResult r = Ingest(*store, path, texts, &vecs, n, c.batch,
                              [&](size_t i) { return users[i]; }, "locomo " + name);
      rep.Add("LoCoMo: ingest, 1000 per transaction", "episodes/s",
              static_cast<double>(n) / (r.seconds + r.close_seconds), "1/s",
              "vectors given (agentmem's built-in embedder made them)", name);
      ids = r.ids;
    }
    store->Open(path);
    auto runs = TimeRecall(*store, lc, qtexts, qvecs, c.modes, user_of_query, "LoCoMo");
    // Recall@10 over every question, also where the timed rounds ran fewer.
    for (auto& [mode, run] : runs) {
      std::vector<SysHit> hits;
      for (size_t q = run.first_round.size(); q < qtexts.size(); q++) {
        store->Recall(user_of_query[q], qtexts[q], qvecs.row(q), static_cast<Mode>(mode), c.k,
                      &hits);
        run.first_round.push_back(hits);
      }
    }
    store->Close();
    auto row_of_id = RowOfId(ids);
    for (int mode : c.modes) {
      const ModeRun& r = runs[mode];
      rep.AddLatency(std::string("LoCoMo: recall top-10 of the conversation, ") + ModeName(mode),
                     r.wall_us, LatencyNotes(r), name);
      // turn Recall@10: evidence turns in the top 10, per question (category 5
      // and questions without evidence excluded), averaged
      double sum = 0;
      size_t counted = 0;
      for (size_t q = 0; q < r.first_round.size(); q++) {
        if (category[q] == 5 || evidence[q].empty()) continue;
        std::set<std::string> found;
        for (const SysHit& h : r.first_round[q]) {
          auto it = row_of_id.find(h.id);
          if (it != row_of_id.end() && users[it->second] == qusers[q])
            found.insert(turn_ids[it->second]);
        }
        size_t hit = 0;
        for (const auto& e : evidence[q]) hit += found.count(e);
        sum += static_cast<double>(hit) / static_cast<double>(evidence[q].size());
        counted++;
      }
      rep.Add(std::string("LoCoMo: turn Recall@10, ") + ModeName(mode), "recall", counted ? sum / counted : 0,
              "",
              Fmt("%zu questions (category 5 excluded); reference BM25 0.495%s", counted,
                  name == "agentmem" ? "; only matching hits (the default similarity floor)" : ""),
              name);
    }
    rep.Add("LoCoMo: size", "store / raw",
            static_cast<double>(StoreBytes(*store, path)) /
                static_cast<double>(text_bytes + static_cast<int64_t>(n) * space.dim * 4),
            "×", Fmt("raw = text + %d-d float32 vectors", space.dim), name);
    RemoveStore(*store, path);
  }
}

// ------------------------------------------------------------------ SIFT (real vectors)

void RunSift(Ctx& x, const std::string& dir) {
  const Config& c = x.c;
  std::string base = dir + "/bigann10k_sift/";
  if (FileBytes(base + "base.fvecs") <= 0) {
    x.checks.push_back("- SIFT: " + base + " not found: run skipped");
    return;
  }
  auto b = ReadVecs<float>(base + "base.fvecs");
  auto q = ReadVecs<float>(base + "query.fvecs");
  auto gt = ReadVecs<int32_t>(base + "groundtruth.ivecs");
  if (b.empty() || q.empty() || gt.size() != q.size()) {
    Warn("SIFT: unexpected files in %s", base.c_str());
    return;
  }
  int dim = static_cast<int>(b[0].size());
  Vectors vecs = ToVectors(b, dim), qvecs = ToVectors(q, dim);
  std::vector<std::vector<uint32_t>> truth(gt.size());
  for (size_t i = 0; i < gt.size(); i++)
    for (size_t j = 0; j < gt[i].size() && j < static_cast<size_t>(c.k); j++)
      truth[i].push_back(static_cast<uint32_t>(gt[i][j]));
  std::vector<std::string> texts(b.size()), qtexts(q.size());
  for (size_t i = 0; i < b.size(); i++) texts[i] = x.d.texts[i % x.d.texts.size()];
  for (size_t i = 0; i < q.size(); i++) qtexts[i] = x.d.qtexts[i % x.d.qtexts.size()];
  Progress("SIFT: %zu base vectors, %zu queries, %d-d, L2", b.size(), q.size(), dim);
  std::vector<const char*> all(q.size(), nullptr), one(q.size(), kUser.c_str());
  for (const std::string& name : c.systems) {
    bench::StoreOptions so = OptionsFor(dim, bench::Metric::kL2, "bench-sift");
    so.capacity_hint = b.size();
    auto store = bench::MakeStore(name, so);
    std::string path = StorePath(c, name, "sift");
    IngestResult r = Ingest(*store, path, texts, &vecs, b.size(), c.batch,
                            [](size_t) { return kUser; }, "sift " + name);
    x.rep.Add("SIFT 10k × 128 (L2): ingest, 1000 per transaction", "episodes/s",
              static_cast<double>(b.size()) / (r.seconds + r.close_seconds), "1/s",
              r.build_seconds > 0 ? Fmt("vector build alone %.2f s", r.build_seconds) : "", name);
    store->Open(path);
    auto runs = TimeRecall(*store, c, qtexts, qvecs, {bench::kVector},
                           name == "agentmem" ? one : all, "SIFT");
    store->Close();
    const ModeRun& v = runs[bench::kVector];
    x.rep.AddLatency("SIFT 10k × 128 (L2): vector top-10", v.wall_us, LatencyNotes(v), name);
    x.rep.Add("SIFT 10k × 128 (L2): vector top-10", "recall@10",
              RecallAtK(v, RowOfId(r.ids), truth, static_cast<size_t>(c.k)), "",
              "against the shipped exact ground truth", name);
    RemoveStore(*store, path);
  }
}

// ------------------------------------------------------------------ goals: agentmem / baseline

// The same goals against the best peer of this run (the lowest latency or
// size, the highest rate among LanceDB and sqlite-vec): agentmem / best peer.
// A system's figure in `m`, or -1 when it was not measured.
double FigureOf(const std::map<std::string, double>& m, const char* system) {
  auto it = m.find(system);
  return it == m.end() ? -1.0 : it->second;
}

// A ratio or figure with about three significant digits.
std::string Num(double v) {
  const double m = std::fabs(v);
  return m >= 100 ? Fmt("%.0f", v) : m >= 10 ? Fmt("%.1f", v) : m >= 1 ? Fmt("%.2f", v)
                                                                        : Fmt("%.3f", v);
}

void AddPeerGoals(Ctx& x) {
  const Figures& f = x.fig;
  const std::vector<std::string>& peers = x.c.peers;
  bool ran = false;
  for (const auto& p : peers) ran = ran || f.ingest_rate.count(p) > 0;
  if (!ran) {
    if (!peers.empty())
      x.rep.AddSection("## Goals against the best peer (LanceDB, sqlite-vec)",
                       {"Not measured: no peer ran (see the checks)."});
    return;
  }
  std::vector<std::string> lines = {
      "Ratios are agentmem / the best peer of this run for that row (the lower latency or size, "
      "the higher rate, of LanceDB and sqlite-vec; each peer's own figure in the last column). "
      "The goal ratio is the one set against the baseline in the table above.",
      "",
      "| goal | agentmem | best peer | agentmem / best peer | goal ratio | met? | each peer |",
      "|---|---:|---:|---:|---:|---|---|"};
  auto row = [&](const std::string& goal, const std::map<std::string, double>& m, double scale,
                 const char* unit, bool lower, double goal_ratio, const char* goal_s) {
    auto a = m.find("agentmem");
    std::string best, each;
    double bv = 0;
    for (const auto& p : peers) {
      auto it = m.find(p);
      if (it == m.end() || it->second <= 0) continue;
      double v = it->second / scale;
      std::string extra;
      if (&m == &f.vector_p50 && f.vector_recall.count(p))
        extra = Fmt(" (recall@10 %.3f)", f.vector_recall.at(p));
      Append(&each, "; ", Fmt("%s %s %s%s", p.c_str(), Num(v).c_str(), unit, extra.c_str()));
      if (best.empty() || (lower ? v < bv : v > bv)) best = p, bv = v;
    }
    if (a == m.end() || best.empty()) {
      lines.push_back("| " + goal + " | — | — | — | " + goal_s + " | not measured | " + each + " |");
      return;
    }
    double av = a->second / scale, r = av / bv;
    bool met = lower ? r <= goal_ratio : r >= goal_ratio;
    lines.push_back(Fmt("| %s | %s %s | %s %s (%s) | %s | %s | %s | %s |", goal.c_str(),
                        Num(av).c_str(), unit, Num(bv).c_str(), unit, best.c_str(),
                        Num(r).c_str(), goal_s, goal_ratio > 0 ? (met ? "yes" : "**no**") : "—",
                        each.c_str()));
  };
  row("hybrid recall p50 (≥ 50× faster)", f.hybrid_p50, 1, "ms", true, 0.02, "≤ 0.02");
  row("hybrid recall p99 (reported)", f.hybrid_p99, 1, "ms", true, 1, "< 1");
  row("BM25 OR-query p99 (≥ 10× lower)", f.bm25_p99, 1, "ms", true, 0.1, "≤ 0.1");
  row("BM25 OR-query p50 (reported)", f.bm25_p50, 1, "ms", true, 1, "< 1");
  row("vector p50 (reported; recall@10 in the last column)", f.vector_p50, 1, "ms", true, 1, "< 1");
  row("open → first recall, new process (≥ 15× faster)", f.open_first_ms, 1, "ms", true,
      1.0 / 15, "≤ 0.067");
  row("file size (smaller)", f.file_bytes, 1048576.0, "MiB", true, 0.9999, "< 1");
  row("batched ingest (no slower)", f.ingest_rate, 1, "/s", false, 1, "≥ 1");
  x.rep.AddSection("## Goals against the best peer (LanceDB, sqlite-vec)", lines);
}

// The performance targets: absolute figures, and ratios to SQLite measured
// in this run, each met or not.
void AddTargets(Ctx& x) {
  const Figures& f = x.fig;
  std::vector<std::string> lines = {
      "Each target with agentmem's figure from the tables above, this run; a ratio's "
      "denominator is SQLite's (WAL, synchronous=FULL) or hnswlib's figure from the same run.",
      "",
      "| target | agentmem | compared with | goal | met? |",
      "|---|---:|---:|---:|---|"};
  auto row = [&](const std::string& what, double a, const std::string& shown,
                 const std::string& against, const char* goal, bool met) {
    if (a < 0) {
      lines.push_back("| " + what + " | — | — | " + goal + " | not measured |");
      return;
    }
    lines.push_back(Fmt("| %s | %s | %s | %s | %s |", what.c_str(), shown.c_str(),
                        against.c_str(), goal, met ? "yes" : "**no**"));
  };
  const double hp50 = FigureOf(f.hybrid_p50, "agentmem"), hp99 = FigureOf(f.hybrid_p99, "agentmem"),
               bp99 = FigureOf(f.bm25_p99, "agentmem"), open = FigureOf(f.open_first_ms, "agentmem");
  row("hybrid recall p50", hp50, Fmt("%.3f ms", hp50), "—", "≤ 0.5 ms", hp50 <= 0.5);
  row("hybrid recall p99", hp99, Fmt("%.3f ms", hp99), "—", "≤ 2 ms", hp99 <= 2);
  row("BM25 OR-query p99", bp99, Fmt("%.3f ms", bp99), "—", "≤ 2 ms", bp99 <= 2);
  row("open → first recall, new process", open, Fmt("%.1f ms", open), "—", "≤ 50 ms",
      open <= 50);
  const double file = FigureOf(f.file_bytes, "agentmem"), sqlite_file = FigureOf(f.file_bytes, "sqlite");
  row("file vs SQLite's", sqlite_file > 0 ? file : -1,
      Fmt("%.0f MiB", file / 1048576.0), Fmt("%.0f MiB (%.2f×)", sqlite_file / 1048576.0,
                                             file / sqlite_file),
      "≤ 1×", file <= sqlite_file);
  row("text-only file (built-in embedder) vs its text", f.text_ratio,
      Fmt("%.1f×", f.text_ratio), "—", "≤ 10×", f.text_ratio <= 10);
  const double sr = FigureOf(f.single_rate, "agentmem"), sqlite_sr = FigureOf(f.single_rate, "sqlite");
  row("single-commit ingest vs SQLite's", sqlite_sr > 0 ? sr : -1, Fmt("%.0f /s", sr),
      Fmt("%.0f /s (%.2f×)", sqlite_sr, sr / sqlite_sr), "≥ 1×", sr >= sqlite_sr);
  const double sc = FigureOf(f.single_cpu_ms, "agentmem"), sqlite_sc = FigureOf(f.single_cpu_ms, "sqlite");
  row("single-commit thread CPU vs SQLite's", sqlite_sc > 0 ? sc : -1, Fmt("%.3f ms", sc),
      Fmt("%.3f ms (%.2f×)", sqlite_sc, sc / sqlite_sc), "≤ 2×", sc <= 2 * sqlite_sc);
  const double ing = FigureOf(f.ingest_rate, "agentmem");
  row("1,000 per transaction vs hnswlib's 2-thread build", f.hnsw_build_rate > 0 ? ing : -1,
      Fmt("%.0f /s", ing), Fmt("%.0f /s (%.2f×)", f.hnsw_build_rate, ing / f.hnsw_build_rate),
      "≥ 1×", ing >= f.hnsw_build_rate);
  const double rss = FigureOf(f.peak_rss_mib, "agentmem"), sqlite_rss = FigureOf(f.peak_rss_mib, "sqlite");
  row("peak RSS of ingest + recall vs SQLite's", sqlite_rss > 0 ? rss : -1,
      Fmt("%.0f MiB", rss), Fmt("%.0f MiB (%.2f×)", sqlite_rss, rss / sqlite_rss), "≤ 2×",
      rss <= 2 * sqlite_rss);
  row(Fmt("PURGE of %zu of %zu episodes", f.purge_of, f.purge_n), f.purge_seconds,
      Fmt("%.2f s", f.purge_seconds), "—", "≤ 5 s", f.purge_seconds <= 5);
  x.rep.AddSection("## Targets", lines);
}

void AddGoals(Ctx& x) {
  const Figures& f = x.fig;
  std::vector<std::string> lines = {
      "Ratios are agentmem / baseline (below 1: agentmem is faster or smaller). Figures from "
      "the tables above, this run.",
      "",
      "| goal | agentmem | baseline | agentmem / baseline | goal ratio | met? |",
      "|---|---:|---:|---:|---:|---|"};
  auto row = [&](const std::string& goal, double a, double b, const char* unit, bool lower,
                 double goal_ratio, const char* goal_s) {
    if (a < 0 || b <= 0) {
      lines.push_back("| " + goal + " | — | — | — | " + goal_s + " | not measured |");
      return;
    }
    double r = a / b;
    bool met = lower ? r <= goal_ratio : r >= goal_ratio;
    lines.push_back(Fmt("| %s | %s %s | %s %s | %s | %s | %s |", goal.c_str(), Num(a).c_str(),
                        unit, Num(b).c_str(), unit, Num(r).c_str(), goal_s,
                        met ? "yes" : "**no**"));
  };
  row("hybrid recall p50 vs SQLite + FTS5 + cosine UDF (≥ 50× faster)",
      FigureOf(f.hybrid_p50, "agentmem"), FigureOf(f.hybrid_p50, "sqlite"), "ms", true, 0.02, "≤ 0.02");
  row("hybrid recall p99 vs SQLite (reported)", FigureOf(f.hybrid_p99, "agentmem"),
      FigureOf(f.hybrid_p99, "sqlite"), "ms", true, 1, "< 1");
  row("BM25 OR-query p99 vs FTS5 (≥ 10× lower)", FigureOf(f.bm25_p99, "agentmem"),
      FigureOf(f.bm25_p99, "sqlite"), "ms", true, 0.1, "≤ 0.1");
  row("open → first recall vs hnswlib loadIndex + FTS5 → first recall (≥ 15× faster)",
      FigureOf(f.open_first_ms, "agentmem"), FigureOf(f.open_first_ms, "hnswlib"), "ms", true, 1.0 / 15,
      "≤ 0.067");
  row("open → first recall vs hnswlib loadIndex alone", FigureOf(f.open_first_ms, "agentmem"),
      FigureOf(f.open_ms, "hnswlib"), "ms", true, 1.0 / 15, "≤ 0.067");
  row("file size vs SQLite (smaller, while also holding the graph)",
      FigureOf(f.file_bytes, "agentmem") / 1048576.0, FigureOf(f.file_bytes, "sqlite") / 1048576.0, "MiB",
      true, 0.9999, "< 1");
  row("batched ingest vs hnswlib's own 2-thread build (no slower)",
      FigureOf(f.ingest_rate, "agentmem"), f.hnsw_build_rate > 0 ? f.hnsw_build_rate : -1, "/s",
      false, 1, "≥ 1");
  row("batched ingest vs SQLite + FTS5 (reported)", FigureOf(f.ingest_rate, "agentmem"),
      FigureOf(f.ingest_rate, "sqlite"), "/s", false, 1, "≥ 1");
  x.rep.AddSection("## Goals", lines);
  AddTargets(x);
  AddPeerGoals(x);
}

// ------------------------------------------------------------------ callgrind

// Instruction counts: each measured block is bracketed by CALLGRIND_ZERO_STATS
// + TOGGLE_COLLECT (and instrumented only then) and dumped under a name
// bench/callgrind_report.sh reads: "<system> <phase> <operations>".
int CallgrindMain(const Config& c, const Data& d) {
  if (!RUNNING_ON_VALGRIND && !c.callgrind_prepare)
    std::fprintf(stderr, "recall_bench --callgrind: not under valgrind; nothing is counted "
                         "(see make bench-callgrind)\n");
  mkdir(c.workdir.c_str(), 0755);
  size_t nq = std::min<size_t>(c.queries, 100);
  std::vector<SysHit> hits;
  // Only the counted blocks run instrumented (valgrind --instr-atstart=no):
  // the rest runs at valgrind's core speed.
  auto counted = [](const std::string& dump, const std::function<void()>& work) {
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_ZERO_STATS;
    CALLGRIND_TOGGLE_COLLECT;
    work();
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS_AT(dump.c_str());
    CALLGRIND_STOP_INSTRUMENTATION;
  };
  for (const std::string& name : c.systems) {
    bench::StoreOptions so = OptionsFor(c.dim, bench::Metric::kCosine, "bench-synthetic");
    so.capacity_hint = c.n;
    // Threads start with collection off: hnswlib inserts on the main thread here.
    so.build_threads = 1;
    auto store = bench::MakeStore(name, so);
    std::string path = StorePath(c, name, "callgrind");
    bool am = name == "agentmem";
    auto add_batch = [&](size_t i) {
      store->Begin();
      for (size_t j = i; j < std::min(c.n, i + c.batch); j++)
        store->Add(am ? kUser : UserName(j % static_cast<size_t>(c.users)), d.texts[j],
                   d.vecs.row(j));
      store->Commit();
    };
    // The last batch is counted: inserts into a store that already holds
    // N - batch episodes, written natively by --callgrind-prepare (running
    // them under valgrind would take long).
    size_t last = c.n > c.batch ? c.n - c.batch : 0;
    if (c.callgrind_prepare) {
      Progress("callgrind prepare: %s, %zu episodes -> %s", name.c_str(), last, path.c_str());
      store->Create(path);
      for (size_t i = 0; i < last; i += c.batch) add_batch(i);
      store->Close();
      continue;
    }
    if (last > 0) {
      if (FileBytes(am || name == "sqlite" ? path : path + ".hnsw") <= 0) {
        std::fprintf(stderr, "recall_bench --callgrind: %s is missing: run --callgrind-prepare "
                             "with the same options first\n", path.c_str());
        return 2;
      }
      store->Open(path);
    } else {
      store->Create(path);
    }
    Progress("callgrind: %s ingest of %zu into %zu, counted", name.c_str(), c.n - last, last);
    counted(Fmt("%s ingest-batched %zu", name.c_str(), c.n - last), [&] {
      for (size_t i = last; i < c.n; i += c.batch) add_batch(i);
    });
    store->Close();
    store->Open(path);
    for (int mode : c.modes) {
      const char* user = am ? kUser.c_str() : nullptr;
      for (size_t q = 0; q < 10; q++)  // warm
        store->Recall(user, d.qtexts[q], d.qvecs.row(q), static_cast<Mode>(mode), c.k, &hits);
      Progress("callgrind: %s recall %s x %zu", name.c_str(), ModeName(mode), nq);
      counted(Fmt("%s recall-%s %zu", name.c_str(), ModeName(mode), nq), [&] {
        for (size_t q = 0; q < nq; q++)
          store->Recall(user, d.qtexts[q], d.qvecs.row(q), static_cast<Mode>(mode), c.k, &hits);
      });
    }
    store->Close();
    RemoveStore(*store, path);
  }
  return 0;
}

// ------------------------------------------------------------------ main

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream list(s);
  for (std::string m; std::getline(list, m, ',');)
    if (!m.empty()) out.push_back(m);
  return out;
}

bool ParseArgs(int argc, char** argv, Config* c) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "recall_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--n") c->n = std::stoull(val());
    else if (a == "--queries") c->queries = std::stoull(val());
    else if (a == "--warmup") c->warmup = std::stoull(val());
    else if (a == "--rounds") c->rounds = std::stoi(val());
    else if (a == "--budget") c->budget = std::stod(val());
    else if (a == "--k") c->k = std::stoi(val());
    else if (a == "--clusters") c->clusters = std::stoi(val());
    else if (a == "--noise") c->noise = std::stod(val());
    else if (a == "--seed") c->seed = std::stoull(val());
    else if (a == "--batch") c->batch = std::stoull(val());
    else if (a == "--single") c->single = std::stoull(val());
    else if (a == "--users") c->users = std::stoi(val());
    else if (a == "--open-runs") c->open_runs = std::stoi(val());
    else if (a == "--idle-open-runs") c->idle_open_runs = std::stoi(val());
    else if (a == "--idle-seconds") c->idle_seconds = std::stoi(val());
    else if (a == "--wordnet") c->wordnet = val();
    else if (a == "--data") c->data_dir = val();
    else if (a == "--out") c->out = val();
    else if (a == "--workdir") c->workdir = val();
    else if (a == "--no-single") c->run_single = false;
    else if (a == "--no-filter") c->run_filter = false;
    else if (a == "--no-open") c->run_open = false;
    else if (a == "--keep") g_keep_stores = true;
    else if (a == "--no-embedder") c->run_embedder = false;
    else if (a == "--no-purge") c->run_purge = false;
    else if (a == "--no-locomo") c->run_locomo = false;
    else if (a == "--no-sift") c->run_sift = false;
    else if (a == "--no-peers") c->peers.clear();
    else if (a == "--peers-dir") c->peers_dir = val();
    else if (a == "--peers-script") c->peers_script = val();
    else if (a == "--node") c->node = val();
    else if (a == "--callgrind") c->callgrind = true;
    else if (a == "--callgrind-prepare") c->callgrind = c->callgrind_prepare = true;
    else if (a == "--systems") {
      c->systems.clear();
      c->peers.clear();
      for (const auto& s : SplitList(val())) {
        if (s == "agentmem" || s == "sqlite" || s == "hnswlib") {
          c->systems.push_back(s);
        } else if (s == "lancedb" || s == "sqlite-vec") {
          c->peers.push_back(s);
        } else {
          std::fprintf(stderr,
                       "recall_bench: unknown system %s (agentmem, sqlite, hnswlib, lancedb, "
                       "sqlite-vec)\n",
                       s.c_str());
          return false;
        }
      }
    } else if (a == "--modes") {
      c->modes.clear();
      for (const std::string& m : SplitList(val())) {
        if (m == "hybrid") c->modes.push_back(bench::kHybrid);
        else if (m == "bm25") c->modes.push_back(bench::kBm25);
        else if (m == "vector") c->modes.push_back(bench::kVector);
        else {
          std::fprintf(stderr, "recall_bench: unknown mode %s\n", m.c_str());
          return false;
        }
      }
    }
    else if (a == "--open-only") c->open_only = val();
    else if (a == "--system") c->open_system = val();
    else if (a == "--query-file") c->query_file = val();
    else if (a == "--user") c->open_user = val();
    else if (a == "--metric") c->open_metric = val();
    else if (a == "--embedder") c->open_embedder = val();
    else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      std::fprintf(stderr, "recall_bench: unknown option %s\n%s", a.c_str(), kUsage);
      return false;
    }
  }
  if (c->n == 0 || c->queries == 0 || c->rounds < 1 || c->k < 1 || c->clusters < 1 ||
      c->batch == 0 || c->users < 1 || c->modes.empty() ||
      (c->systems.empty() && c->peers.empty()) ||
      c->budget <= 0) {
    std::fprintf(stderr, "recall_bench: bad option values\n");
    return false;
  }
  return true;
}

// Writes recall-n<N>.{md,csv} and the .dat files of bench/plot.sh into
// --out, and the table on stdout.
void WriteReport(Ctx& x, const std::string& commit, const std::string& dirty,
                 bool texts_repeat) {
  const Config& c = x.c;
  const Data& d = x.d;
  Report& rep = x.rep;
  std::string date = CommandOutput("date -u '+%Y-%m-%d %H:%M UTC'");
  std::string cpu;
  {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("model name", 0) == 0) {
        cpu = Trim(line.substr(line.find(':') + 1));
        break;
      }
  }
  std::string load = Trim(ReadSmallFile("/proc/loadavg"));
  std::string title;
  for (const auto& s : c.systems)
    Append(&title, " vs ", s == "sqlite" ? "SQLite + FTS5" : s == "hnswlib" ? "hnswlib + FTS5" : s);
  for (const auto& s : c.peers) Append(&title, " vs ", s == "lancedb" ? "LanceDB" : s);
  rep.AddHeader(Fmt("# %s — N = %zu episodes × %d-d, top-%d", title.c_str(), c.n, c.dim, c.k));
  rep.AddHeader("");
  rep.AddHeader(Fmt("%s · agentmem %s · started at commit %s%s · %u cores (%s) · load average "
                    "at end: %s · %.0f s",
                    date.c_str(), agentmem_libversion(), commit.c_str(),
                    dirty.empty() ? "" : " (work tree modified)",
                    std::thread::hardware_concurrency(), cpu.c_str(), load.c_str(),
                    Seconds() - g_t0));
  rep.AddHeader("");
  if (texts_repeat)
    rep.AddHeader("Past the 117,659 WordNet glosses the episode texts repeat (each text "
                  "appears more than once; BM25 sees duplicate documents).\n");
  rep.AddHeader(Fmt("Data: %zu WordNet 3.0 glosses (%.1f MB), %d-d clustered synthetic unit "
                    "vectors (%d clusters, noise %.2f, seed %llu), %zu held-out gloss queries "
                    "with vectors from the same clusters; up to %zu warm-up queries per mode, "
                    "then %d rounds of the queries, modes interleaved, at most %.0f s per mode "
                    "(slow brute-force modes run fewer queries: n in the notes). Latency = the "
                    "recall call + reading every hit's text, one thread. Percentiles are "
                    "nearest-rank over all samples. Systems run one after the other on a shared "
                    "machine: read the thread-CPU and per-round figures for the noise.",
                    c.n, d.text_bytes / 1e6, c.dim, c.clusters, c.noise,
                    static_cast<unsigned long long>(c.seed), c.queries, c.warmup, c.rounds,
                    c.budget));
  rep.AddHeader("");
  rep.AddHeader(AnchorsLine(x.anchors));
  rep.AddSection("## Systems", x.systems);
  if (!x.plans.empty()) rep.AddSection("## Plans (agentmem EXPLAIN RECALL)", x.plans);

  x.checks.push_back(Fmt("- warnings: %d", g_warnings));
  rep.AddSection("## Checks", x.checks);

  std::string md = rep.Markdown();
  std::string csv = rep.Csv(c.n, c.dim);
  mkdir(c.out.c_str(), 0755);
  std::string base = c.out + Fmt("/recall-n%zu", c.n);
  std::ofstream(base + ".md") << md;
  std::ofstream(base + ".csv") << csv;
  {
    std::ofstream dat(c.out + Fmt("/recall-latency-n%zu.dat", c.n));
    dat << "# system ef vector_p50_ms recall@10 (N = " << c.n << ")\n";
    for (const auto& l : x.dat_recall) dat << l << "\n";
    std::ofstream lat(c.out + Fmt("/latency-n%zu.dat", c.n));
    lat << "# system mode n p50_ms p99_ms\n";
    for (const auto& l : x.dat_latency) lat << l << "\n";
  }
  Progress("wrote %s.md and %s.csv (%d warnings)", base.c_str(), base.c_str(), g_warnings);
  std::fflush(stderr);
  std::fputs(md.c_str(), stdout);
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  Config c;
  if (!ParseArgs(argc, argv, &c)) return 2;
  if (!c.open_only.empty()) return OpenOnlyMain(c);
  g_t0 = Seconds();
  Report rep;
  // The commit the run started from (others may commit while it runs).
  const std::string commit = CommandOutput("git rev-parse --short HEAD 2>/dev/null");
  const std::string dirty =
      CommandOutput("git status --porcelain --untracked-files=no 2>/dev/null | head -1");

  // ---- data
  std::vector<std::string> glosses = LoadGlosses(c.wordnet);
  Progress("loaded %zu WordNet glosses from %s", glosses.size(), c.wordnet.c_str());
  if (glosses.size() < 2 * c.queries) {
    std::fprintf(stderr, "recall_bench: %zu glosses are too few for %zu held-out queries\n",
                 glosses.size(), c.queries);
    return 2;
  }
  Rng shuffle(c.seed);
  for (size_t i = glosses.size() - 1; i > 0; i--) std::swap(glosses[i], glosses[shuffle.Below(i + 1)]);
  Data d;
  d.qtexts.assign(glosses.begin(), glosses.begin() + static_cast<long>(c.queries));
  // Past the 117,659 glosses (make bench-large) the episode texts repeat.
  const size_t distinct_texts = std::min(c.n, glosses.size() - c.queries);
  d.texts.reserve(c.n);
  for (size_t i = 0; i < c.n; i++) d.texts.push_back(glosses[c.queries + i % distinct_texts]);
  const bool texts_repeat = distinct_texts < c.n;
  if (texts_repeat)
    Progress("only %zu distinct glosses for %zu episodes: texts repeat", distinct_texts, c.n);
  glosses.clear();
  glosses.shrink_to_fit();
  for (const auto& t : d.texts) d.text_bytes += static_cast<int64_t>(t.size());
  Rng centre_rng(c.seed + 1), base_rng(c.seed + 2), query_rng(c.seed + 3);
  std::vector<float> centres(static_cast<size_t>(c.clusters) * c.dim);
  for (float& x : centres) x = static_cast<float>(centre_rng.Normal());
  d.vecs = ClusteredVectors(centres, c.clusters, c.dim, c.n, c.noise, base_rng);
  d.qvecs = ClusteredVectors(centres, c.clusters, c.dim, c.queries, c.noise, query_rng);
  const int64_t vector_bytes = static_cast<int64_t>(c.n) * c.dim * 4;
  Progress("data: %zu episodes (%.1f MB text, %.1f MB vectors), %zu held-out queries, %d clusters",
           c.n, d.text_bytes / 1e6, vector_bytes / 1e6, c.queries, c.clusters);
  if (c.callgrind) return CallgrindMain(c, d);

  double gt0 = Seconds();
  std::vector<std::vector<uint32_t>> truth = ExactTopK(d.vecs, d.qvecs, static_cast<size_t>(c.k));
  Progress("exact top-%d of %zu queries over %zu vectors: %.1f s", c.k, c.queries, c.n,
           Seconds() - gt0);

  if (mkdir(c.workdir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "recall_bench: cannot create %s\n", c.workdir.c_str());
    return 2;
  }
  Ctx x(c, d, rep, truth);
  x.raw_bytes = d.text_bytes + vector_bytes;
  x.anchors = MeasureAnchors(c.workdir);
  Progress("%s", AnchorsLine(x.anchors).c_str());
  try {
    for (const std::string& s : c.systems) RunSystem(s, x);
    RunPeers(x);
    bool has_am = std::count(c.systems.begin(), c.systems.end(), "agentmem") > 0;
    if (c.run_embedder && has_am) RunEmbedderIngest(x);
    if (c.run_purge && has_am) RunPurge(x);
    std::string data_dir = FindDataDir(c);
    if ((c.run_locomo || c.run_sift) && data_dir.empty()) {
      x.checks.push_back("- evaluation data not found (--data, $AGENTMEM_DATA_DIR, "
                         "../shared/data, /work/shared/data): LoCoMo and SIFT runs skipped");
      Warn("evaluation data folder not found: LoCoMo and SIFT runs skipped");
    }
    if (c.run_locomo && has_am && !data_dir.empty()) RunLocomo(x, data_dir);
    if (c.run_sift && !data_dir.empty()) RunSift(x, data_dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recall_bench: %s\n", e.what());
    return 1;
  }
  AddGoals(x);

  WriteReport(x, commit, dirty, texts_repeat);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recall_bench: %s\n", e.what());
    return 1;
  }
}

// bench/recall_bench.cc -- the recall benchmark (issue #3 item 8; issue #7 grows
// it with baselines). A pure client of include/agentmem.h: every number is an
// ABI number, with the cost of the C API, the cursor and the text fetch in it.
//
// Data (all seeded, so two runs build byte-for-byte the same workload):
//   texts    WordNet 3.0 glosses (Debian's wordnet-base: the text after " | "
//            on each synset line of data.{noun,verb,adj,adv}; 117,659 texts),
//            shuffled; the first --queries are held out as query texts, the
//            next --n are the episodes.
//   vectors  clustered synthetic unit vectors: --clusters centres with N(0,1)
//            coordinates, each point = a random centre + N(0, --noise) per
//            coordinate, L2-normalised. Queries are drawn the same way. They
//            are passed explicitly (embedder=bench-synthetic), so vector
//            recall is checked against an exact brute-force top-10 computed
//            here.
//
// Phases (each prints progress lines on stderr):
//   1. ingest, one episode per transaction, sync=full (first --single episodes,
//      own file): commits/s and per-commit latency;
//   2. ingest, --batch episodes per transaction, sync=full, N episodes in ONE
//      user partition: episodes/s and per-batch latency;
//   3. recall top-k on that file after a reopen: hybrid, BM25-only and
//      vector-only; --warmup queries per mode first, then --rounds rounds of
//      all queries, modes interleaved; p50/p99/mean from all samples;
//      vector recall@k against the exact top-k;
//   4. open to first recall: a fresh child process (fork + exec of this
//      program with --open-only) opens the file and runs one hybrid recall,
//      warm page cache, median of --open-runs;
//   5. the same N episodes spread over --users users (round robin), recall
//      with the user filter: every hit must belong to the user;
//   6. size (file bytes against raw text + raw vector bytes) and peak RSS.
// Results: a Markdown table and a CSV in --out (one row per system, workload
// and metric, so baselines add rows, not formats), and the table on stdout.
// No timing is asserted anywhere; correctness checks print WARN lines and
// are counted in the report.
//
// usage: recall_bench [--n 100000] [--out bench/results] [--help] ...
#include <agentmem.h>

#include <fcntl.h>
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
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

// ------------------------------------------------------------------ config

struct Config {
  size_t n = 100000;          // episodes
  size_t queries = 1000;      // held-out query texts
  size_t warmup = 100;        // untimed queries per mode before timing
  int rounds = 3;             // timed passes over all queries, per mode
  int k = 10;
  int dim = 384;
  int clusters = 1000;
  double noise = 0.35;        // per-coordinate noise around a N(0,1) centre
  uint64_t seed = 20240611;
  size_t batch = 1000;        // episodes per transaction (batched ingest)
  size_t single = 2000;       // episodes committed one per transaction
  int users = 1000;           // users of the filter file
  int open_runs = 5;          // child processes timed (after one untimed)
  std::string wordnet = "/usr/share/wordnet";
  std::string out = "bench/results";
  std::string workdir = "/tmp/agentmem-bench";
  bool run_single = true, run_filter = true, run_open = true;
  std::vector<int> modes = {AGENTMEM_RECALL_HYBRID, AGENTMEM_RECALL_BM25, AGENTMEM_RECALL_VECTOR};
  bool reuse = false;         // keep a matching file from an earlier run (no ingest figures)
  // --open-only mode (the child of phase 4)
  std::string open_only, query_file, open_user;
};

const char* kUsage =
    "usage: recall_bench [options]\n"
    "  --n N            episodes (default 100000)\n"
    "  --queries Q      held-out queries (1000)      --warmup W   untimed queries per mode (100)\n"
    "  --rounds R       timed passes per mode (3)    --k K        hits per recall (10)\n"
    "  --clusters C     vector clusters (1000)       --noise S    per-coordinate noise (0.35)\n"
    "  --seed S         data seed                    --batch B    episodes per transaction (1000)\n"
    "  --single M       one-per-transaction episodes (2000)   --users U   users of the filter file (1000)\n"
    "  --open-runs R    timed child opens (5)\n"
    "  --wordnet DIR    WordNet dict folder (/usr/share/wordnet; Debian package wordnet-base)\n"
    "  --out DIR        results folder (bench/results)\n"
    "  --workdir DIR    where the .agentmem files go (/tmp/agentmem-bench)\n"
    "  --no-single --no-filter --no-open   skip a phase\n"
    "  --modes LIST     recall modes to time, e.g. bm25 or hybrid,vector (all three)\n"
    "  --reuse          reuse the files of an earlier run with the same data (skips ingest;\n"
    "                   for profiling recall and open)\n"
    "  --open-only FILE --query-file QF --user U   (internal) the child of the open phase\n";

const char* kOpenOptions = "vector_dim=384&embedder=bench-synthetic&sync=full";

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

long PeakRssKiB() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
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

// One measured value. Baselines (issue #7) add rows with their own `system`;
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
      for (const auto& s : systems) {
        auto it = row.find(s);
        if (it == row.end()) continue;
        unit = it->second->unit;
        if (!it->second->notes.empty())
          Append(&notes, "; ", (systems.size() > 1 ? s + ": " : std::string()) + it->second->notes);
      }
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

// ------------------------------------------------------------------ API helpers

struct Hit {
  int64_t id;
  std::string user;
  int bm25_rank, vector_rank;
};

// One recall through the ABI, all hits stepped (text fetched), cursor closed.
int RecallOnce(agentmem_db* db, const char* user, const std::string& text, const float* vec,
               int dim, int mode, int k, std::vector<Hit>* hits) {
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.k = k;
  o.mode = mode;
  o.query_vector = mode == AGENTMEM_RECALL_BM25 ? nullptr : vec;
  o.query_dim = mode == AGENTMEM_RECALL_BM25 ? 0 : dim;
  agentmem_cursor* cur = nullptr;
  int rc = agentmem_recall(db, user, text.c_str(), &o, &cur);
  if (rc != AGENTMEM_OK) return rc;
  if (hits) hits->clear();
  size_t text_bytes = 0;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    const agentmem_hit* h = agentmem_cursor_hit(cur);
    text_bytes += std::strlen(h->text);  // touch the text, as a caller would
    if (hits) hits->push_back({h->id, h->user_id, h->bm25_rank, h->vector_rank});
  }
  agentmem_cursor_close(cur);
  (void)text_bytes;
  return rc == AGENTMEM_DONE ? AGENTMEM_OK : rc;
}

agentmem_db* OpenOrDie(const std::string& path, int flags) {
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(path.c_str(), &db, flags, kOpenOptions);
  if (rc != AGENTMEM_OK) Die(db, rc, ("open " + path).c_str());
  return db;
}

agentmem_stats StatsOrDie(agentmem_db* db) {
  agentmem_stats st;
  int rc = agentmem_stats_get(db, &st);
  if (rc != AGENTMEM_OK) Die(db, rc, "agentmem_stats_get");
  return st;
}

const char* ModeName(int mode) {
  return mode == AGENTMEM_RECALL_HYBRID ? "hybrid" : mode == AGENTMEM_RECALL_BM25 ? "bm25" : "vector";
}

// ------------------------------------------------------------------ the workload

struct Data {
  std::vector<std::string> texts;    // episodes
  std::vector<std::string> qtexts;   // held-out queries
  Vectors vecs, qvecs;
  int64_t text_bytes = 0;
};

struct IngestResult {
  std::vector<int64_t> ids;      // by corpus row
  std::vector<double> unit_us;   // per transaction
  std::vector<double> unit_cpu_us;  // the same, thread CPU time (excludes waits and preemption)
  double seconds = 0;
  agentmem_stats stats{};
};

// Writes rows [0, n) of the data, `batch` per transaction (1: autocommit),
// user_of(i) as the user. Progress every ~10%.
template <class UserOf>
IngestResult Ingest(const std::string& path, const Data& d, size_t n, size_t batch,
                    UserOf user_of, const char* label) {
  std::remove(path.c_str());
  agentmem_db* db = OpenOrDie(path, AGENTMEM_OPEN_READWRITE | AGENTMEM_OPEN_CREATE);
  IngestResult r;
  r.ids.resize(n);
  const int64_t kTs0 = 1700000000LL * 1000000;
  double t0 = Seconds(), next_report = t0 + 10;
  for (size_t i = 0; i < n; i += batch) {
    size_t end = std::min(n, i + batch);
    double u0 = Seconds(), c0 = ThreadCpuUs();
    int rc;
    if (batch > 1 && (rc = agentmem_begin(db)) != AGENTMEM_OK) Die(db, rc, "agentmem_begin");
    for (size_t j = i; j < end; j++) {
      std::string user = user_of(j);
      rc = agentmem_remember(db, user.c_str(), "s1", "user", d.texts[j].c_str(),
                             kTs0 + static_cast<int64_t>(j) * 1000000, nullptr, d.vecs.row(j),
                             d.vecs.dim, &r.ids[j]);
      if (rc != AGENTMEM_OK) Die(db, rc, "agentmem_remember");
    }
    if (batch > 1 && (rc = agentmem_commit(db)) != AGENTMEM_OK) Die(db, rc, "agentmem_commit");
    double u1 = Seconds();
    r.unit_us.push_back((u1 - u0) * 1e6);
    r.unit_cpu_us.push_back(ThreadCpuUs() - c0);
    if (u1 >= next_report || end == n) {
      Progress("%s: %zu / %zu episodes, %.0f episodes/s so far", label, end, n,
               static_cast<double>(end) / (u1 - t0));
      next_report = u1 + 10;
    }
  }
  r.seconds = Seconds() - t0;
  r.stats = StatsOrDie(db);
  int rc = agentmem_close(db);
  if (rc != AGENTMEM_OK) Die(nullptr, rc, "agentmem_close");
  if (r.stats.episodes != static_cast<int64_t>(n))
    Warn("%s: the file holds %lld episodes, %zu were written", label,
         static_cast<long long>(r.stats.episodes), n);
  return r;
}

// --reuse: takes the ids of an existing file written by Ingest() from the same
// data (every user's episodes in id order must be the expected texts and
// vectors).
// Returns false when the file is missing or different.
template <class UserOf>
bool Reuse(const std::string& path, const Data& d, size_t n, UserOf user_of, IngestResult* r) {
  if (FileBytes(path) <= 0) return false;
  agentmem_db* db = nullptr;
  if (agentmem_open_v2(path.c_str(), &db, AGENTMEM_OPEN_READONLY, kOpenOptions) != AGENTMEM_OK) {
    agentmem_close(db);
    return false;
  }
  std::map<std::string, std::vector<size_t>> rows;
  for (size_t i = 0; i < n; i++) rows[user_of(i)].push_back(i);
  r->ids.assign(n, 0);
  r->stats = StatsOrDie(db);
  bool ok = r->stats.episodes == static_cast<int64_t>(n);
  for (auto it = rows.begin(); ok && it != rows.end(); ++it) {
    agentmem_cursor* cur = nullptr;
    if (agentmem_episodes(db, it->first.c_str(), nullptr, &cur) != AGENTMEM_OK) {
      ok = false;
      break;
    }
    size_t j = 0;
    while (ok && agentmem_cursor_step(cur) == AGENTMEM_ROW) {
      const agentmem_episode* e = agentmem_cursor_episode(cur);
      ok = j < it->second.size() && d.texts[it->second[j]] == e->text && e->vector &&
           e->dim == d.vecs.dim &&
           std::memcmp(e->vector, d.vecs.row(it->second[j]), sizeof(float) * e->dim) == 0;
      if (ok) r->ids[it->second[j++]] = e->id;
    }
    ok = ok && j == it->second.size();
    agentmem_cursor_close(cur);
  }
  agentmem_close(db);
  return ok;
}

struct ModeRun {
  std::vector<double> wall_us, cpu_us;
  std::vector<double> round_p50_us;
  std::vector<std::vector<Hit>> first_round;  // hits of round 0, by query
  std::vector<std::vector<double>> by_query_us;  // every round's latency, by query
};

// --warmup untimed queries per mode, then `rounds` timed passes over every
// query with the modes interleaved (so that a noisy stretch of the machine
// hits every mode alike).
std::map<int, ModeRun> TimeRecall(agentmem_db* db, const Config& c, const Data& d,
                                  const std::vector<int>& modes,
                                  const std::vector<std::string>& user_of_query,
                                  const char* label) {
  std::map<int, ModeRun> runs;
  size_t nq = d.qtexts.size();
  for (int mode : modes) {
    for (size_t i = 0; i < c.warmup; i++) {
      size_t q = i % nq;
      int rc = RecallOnce(db, user_of_query[q].c_str(), d.qtexts[q], d.qvecs.row(q), d.qvecs.dim,
                          mode, c.k, nullptr);
      if (rc != AGENTMEM_OK) Die(db, rc, "agentmem_recall (warm-up)");
    }
  }
  std::vector<Hit> hits;
  for (int round = 0; round < c.rounds; round++) {
    for (int mode : modes) {
      ModeRun& run = runs[mode];
      std::vector<double> this_round;
      for (size_t q = 0; q < nq; q++) {
        double c0 = ThreadCpuUs();
        int64_t t0 = MonoNs();
        int rc = RecallOnce(db, user_of_query[q].c_str(), d.qtexts[q], d.qvecs.row(q),
                            d.qvecs.dim, mode, c.k, &hits);
        int64_t t1 = MonoNs();
        double c1 = ThreadCpuUs();
        if (rc != AGENTMEM_OK) Die(db, rc, "agentmem_recall");
        double us = static_cast<double>(t1 - t0) / 1e3;
        run.wall_us.push_back(us);
        run.cpu_us.push_back(c1 - c0);
        this_round.push_back(us);
        if (round == 0) run.first_round.push_back(hits);
        run.by_query_us.resize(nq);
        run.by_query_us[q].push_back(us);
      }
      Summary s = Summarize(this_round);
      run.round_p50_us.push_back(s.p50);
      Progress("%s: round %d/%d %-6s p50 %.3f ms  p99 %.3f ms  mean %.3f ms", label, round + 1,
               c.rounds, ModeName(mode), s.p50 / 1e3, s.p99 / 1e3, s.mean / 1e3);
    }
  }
  return runs;
}

std::string LatencyNotes(const ModeRun& r) {
  Summary cpu = Summarize(r.cpu_us);
  std::string rounds;
  for (double p : r.round_p50_us) Append(&rounds, "/", Fmt("%.3f", p / 1e3));
  return Fmt("thread CPU p50 %.3f, p99 %.3f ms; p50 per round %s ms", cpu.p50 / 1e3,
             cpu.p99 / 1e3, rounds.c_str());
}

std::string Explain(agentmem_db* db, const char* user, const Data& d, size_t q, int mode, int k) {
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.k = k;
  o.mode = mode;
  if (mode != AGENTMEM_RECALL_BM25) {
    o.query_vector = d.qvecs.row(q);
    o.query_dim = d.qvecs.dim;
  }
  char* plan = nullptr;
  int rc = agentmem_explain_recall(db, user, d.qtexts[q].c_str(), &o, &plan);
  if (rc != AGENTMEM_OK) Die(db, rc, "agentmem_explain_recall");
  std::string s = plan;
  agentmem_free(plan);
  // The plan part only (the hits follow it).
  size_t h = s.find(",\"hits\":");
  return h == std::string::npos ? s : s.substr(0, h) + "}";
}

// EXPLAIN RECALL of the slowest query (by its median over the rounds, so
// that one preempted sample does not pick it), per mode.
void AddSlowestPlans(agentmem_db* db, const Data& d, std::map<int, ModeRun>& runs,
                     const std::vector<std::string>& user_of_query, int k, const std::string& what,
                     std::vector<std::string>* plans) {
  for (auto& [mode, run] : runs) {
    size_t worst = 0;
    double worst_us = -1;
    for (size_t q = 0; q < run.by_query_us.size(); q++) {
      double med = Summarize(run.by_query_us[q]).p50;
      if (med > worst_us) worst = q, worst_us = med;
    }
    if (worst_us < 0) continue;
    std::string p = Explain(db, user_of_query[worst].c_str(), d, worst, mode, k);
    plans->push_back(Fmt("- %s, %s, slowest query (#%zu, median %.3f ms over the rounds, %zu "
                         "bytes of text): `%s`",
                         ModeName(mode), what.c_str(), worst + 1, worst_us / 1e3,
                         d.qtexts[worst].size(), p.c_str()));
  }
}

// Every list has k hits, and the hits came from the searches (a rank in the
// list the mode asks for), not from the fill rule: an index that silently
// finds nothing shows here.
void CheckLists(std::map<int, ModeRun>& runs, const Data& d, int k, const std::string& what,
                std::vector<std::string>* checks) {
  for (auto& [mode, run] : runs) {
    size_t short_lists = 0, hits = 0, ranked = 0, empty_queries = 0;
    std::string examples;
    for (size_t q = 0; q < run.first_round.size(); q++) {
      const auto& list = run.first_round[q];
      if (list.size() != static_cast<size_t>(k)) short_lists++;
      size_t r = 0;
      for (const Hit& h : list) {
        bool in = mode == AGENTMEM_RECALL_BM25     ? h.bm25_rank > 0
                  : mode == AGENTMEM_RECALL_VECTOR ? h.vector_rank > 0
                                                   : h.bm25_rank > 0 || h.vector_rank > 0;
        r += in;
      }
      hits += list.size();
      ranked += r;
      if (r == 0 && empty_queries++ < 3) Append(&examples, ", ", Quoted(d.qtexts[q]));
    }
    if (short_lists) Warn("%s %s: %zu recalls returned fewer than k hits", what.c_str(),
                          ModeName(mode), short_lists);
    if (empty_queries * 20 > run.first_round.size())
      Warn("%s %s: %zu of %zu queries found nothing (every hit is fill)", what.c_str(),
           ModeName(mode), empty_queries, run.first_round.size());
    checks->push_back(Fmt("- %s, %s: %zu lists shorter than k=%d; %zu of %zu hits ranked by the "
                          "search (the rest fill); %zu queries found nothing%s%s",
                          what.c_str(), ModeName(mode), short_lists, k, ranked, hits,
                          empty_queries, examples.empty() ? "" : ", e.g. ", examples.c_str()));
  }
}

// ------------------------------------------------------------------ open phase

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

  int64_t t0 = MonoNs();
  agentmem_db* db = nullptr;
  int rc = agentmem_open_v2(c.open_only.c_str(), &db, AGENTMEM_OPEN_READWRITE, kOpenOptions);
  if (rc != AGENTMEM_OK) Die(db, rc, "open (child)");
  int64_t t1 = MonoNs();
  agentmem_recall_options o;
  agentmem_recall_options_init(&o);
  o.k = c.k;
  o.query_vector = vec.data();
  o.query_dim = static_cast<int>(dim);
  agentmem_cursor* cur = nullptr;
  rc = agentmem_recall(db, c.open_user.c_str(), text.c_str(), &o, &cur);
  if (rc != AGENTMEM_OK) Die(db, rc, "recall (child)");
  std::string ids;
  int64_t t2 = 0;
  while ((rc = agentmem_cursor_step(cur)) == AGENTMEM_ROW) {
    if (!t2) t2 = MonoNs();
    Append(&ids, ",", std::to_string(agentmem_cursor_hit(cur)->id));
  }
  if (!t2) t2 = MonoNs();
  agentmem_cursor_close(cur);
  agentmem_close(db);
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

ChildRun RunChild(const std::string& file, const std::string& query_file, const std::string& user,
                  int k) {
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
    execl("/proc/self/exe", "recall_bench", "--open-only", file.c_str(), "--query-file",
          query_file.c_str(), "--user", user.c_str(), "--k", kstr.c_str(),
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

// ------------------------------------------------------------------ main

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
    else if (a == "--k") c->k = std::stoi(val());
    else if (a == "--clusters") c->clusters = std::stoi(val());
    else if (a == "--noise") c->noise = std::stod(val());
    else if (a == "--seed") c->seed = std::stoull(val());
    else if (a == "--batch") c->batch = std::stoull(val());
    else if (a == "--single") c->single = std::stoull(val());
    else if (a == "--users") c->users = std::stoi(val());
    else if (a == "--open-runs") c->open_runs = std::stoi(val());
    else if (a == "--wordnet") c->wordnet = val();
    else if (a == "--out") c->out = val();
    else if (a == "--workdir") c->workdir = val();
    else if (a == "--no-single") c->run_single = false;
    else if (a == "--no-filter") c->run_filter = false;
    else if (a == "--no-open") c->run_open = false;
    else if (a == "--reuse") c->reuse = true;
    else if (a == "--modes") {
      c->modes.clear();
      std::stringstream list(val());
      for (std::string m; std::getline(list, m, ',');) {
        if (m == "hybrid") c->modes.push_back(AGENTMEM_RECALL_HYBRID);
        else if (m == "bm25") c->modes.push_back(AGENTMEM_RECALL_BM25);
        else if (m == "vector") c->modes.push_back(AGENTMEM_RECALL_VECTOR);
        else {
          std::fprintf(stderr, "recall_bench: unknown mode %s\n", m.c_str());
          return false;
        }
      }
    }
    else if (a == "--open-only") c->open_only = val();
    else if (a == "--query-file") c->query_file = val();
    else if (a == "--user") c->open_user = val();
    else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      std::fprintf(stderr, "recall_bench: unknown option %s\n%s", a.c_str(), kUsage);
      return false;
    }
  }
  if (c->n == 0 || c->queries == 0 || c->rounds < 1 || c->k < 1 || c->clusters < 1 ||
      c->batch == 0 || c->users < 1 || c->dim != 384 || c->modes.empty()) {
    std::fprintf(stderr, "recall_bench: bad option values\n");
    return false;
  }
  return true;
}

int Main(int argc, char** argv) {
  Config c;
  if (!ParseArgs(argc, argv, &c)) return 2;
  if (!c.open_only.empty()) return OpenOnlyMain(c);
  g_t0 = Seconds();
  Report rep;

  // ---- data
  std::vector<std::string> glosses = LoadGlosses(c.wordnet);
  Progress("loaded %zu WordNet glosses from %s", glosses.size(), c.wordnet.c_str());
  if (glosses.size() < c.n + c.queries) {
    std::fprintf(stderr, "recall_bench: %zu glosses, %zu episodes + %zu queries wanted\n",
                 glosses.size(), c.n, c.queries);
    return 2;
  }
  Rng shuffle(c.seed);
  for (size_t i = glosses.size() - 1; i > 0; i--) std::swap(glosses[i], glosses[shuffle.Below(i + 1)]);
  Data d;
  d.qtexts.assign(glosses.begin(), glosses.begin() + static_cast<long>(c.queries));
  d.texts.assign(glosses.begin() + static_cast<long>(c.queries),
                 glosses.begin() + static_cast<long>(c.queries + c.n));
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

  double gt0 = Seconds();
  std::vector<std::vector<uint32_t>> truth = ExactTopK(d.vecs, d.qvecs, static_cast<size_t>(c.k));
  Progress("exact top-%d of %zu queries over %zu vectors: %.1f s", c.k, c.queries, c.n,
           Seconds() - gt0);

  if (mkdir(c.workdir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "recall_bench: cannot create %s\n", c.workdir.c_str());
    return 2;
  }
  const std::string main_file = c.workdir + Fmt("/recall-n%zu.agentmem", c.n);
  const std::string users_file = c.workdir + Fmt("/users-n%zu.agentmem", c.n);
  const std::string single_file = c.workdir + "/single.agentmem";
  const std::string query_file = c.workdir + "/query.bin";
  const std::string kUser = "user-0";
  std::vector<std::string> checks;

  // ---- 1. one episode per transaction
  if (c.run_single) {
    size_t m = std::min(c.single, c.n);
    Progress("ingest: %zu episodes, one per transaction, sync=full -> %s", m, single_file.c_str());
    IngestResult r = Ingest(single_file, d, m, 1, [&](size_t) { return kUser; }, "single");
    Summary s = Summarize(r.unit_us);
    rep.Add("ingest, 1 episode per transaction (sync=full)", "commits/s",
            static_cast<double>(m) / r.seconds, "1/s",
            Fmt("%zu commits into an empty file; %lld data syncs", m,
                static_cast<long long>(r.stats.syncs)));
    Summary cpu = Summarize(r.unit_cpu_us);
    rep.Add("ingest, 1 episode per transaction (sync=full)", "commit p50", s.p50 / 1e3, "ms",
            Fmt("p99 %.3f, max %.3f ms; thread CPU p50 %.3f, p99 %.3f ms (wall minus CPU: "
                "fdatasync and preemption)",
                s.p99 / 1e3, s.max / 1e3, cpu.p50 / 1e3, cpu.p99 / 1e3));
    checks.push_back(Fmt("- one-per-transaction ingest: %lld commits, %lld data syncs for %zu "
                         "episodes",
                         static_cast<long long>(r.stats.commits),
                         static_cast<long long>(r.stats.syncs), m));
    std::remove(single_file.c_str());
  }

  // ---- 2. batched ingest, one partition
  IngestResult ing;
  bool reused = c.reuse && Reuse(main_file, d, c.n, [&](size_t) { return kUser; }, &ing);
  if (reused) {
    Progress("reusing %s (no ingest figures)", main_file.c_str());
  } else {
    Progress("ingest: %zu episodes, %zu per transaction, sync=full, one user -> %s", c.n, c.batch,
             main_file.c_str());
    ing = Ingest(main_file, d, c.n, c.batch, [&](size_t) { return kUser; }, "batched");
  }
  if (!reused) {
    Summary s = Summarize(ing.unit_us), cpu = Summarize(ing.unit_cpu_us);
    std::string w = Fmt("ingest, %zu per transaction (sync=full)", c.batch);
    rep.Add(w, "episodes/s", static_cast<double>(c.n) / ing.seconds, "1/s",
            Fmt("%.1f s for %zu episodes; %lld commits, %lld data syncs", ing.seconds, c.n,
                static_cast<long long>(ing.stats.commits),
                static_cast<long long>(ing.stats.syncs)));
    rep.Add(w, "transaction p50", s.p50 / 1e3, "ms",
            Fmt("p99 %.1f, min %.1f, max %.1f ms; first %.1f, last %.1f ms; thread CPU p50 %.1f "
                "ms, total %.1f s",
                s.p99 / 1e3, s.min / 1e3, s.max / 1e3, ing.unit_us.front() / 1e3,
                ing.unit_us.back() / 1e3, cpu.p50 / 1e3, cpu.sum / 1e6));
  }
  std::unordered_map<int64_t, uint32_t> row_of_id;
  for (size_t i = 0; i < ing.ids.size(); i++) row_of_id[ing.ids[i]] = static_cast<uint32_t>(i);

  // ---- 3. recall on the reopened file
  double o0 = Seconds();
  agentmem_db* db = OpenOrDie(main_file, AGENTMEM_OPEN_READWRITE);
  double reopen_ms = (Seconds() - o0) * 1e3;
  Progress("reopened %s in %.1f ms (in process); recall top-%d, %zu warm-up + %d x %zu queries "
           "per mode",
           main_file.c_str(), reopen_ms, c.k, c.warmup, c.rounds, c.queries);
  std::vector<std::string> plans;
  const std::vector<int>& all_modes = c.modes;
  auto has_mode = [&](int m) { return std::count(all_modes.begin(), all_modes.end(), m) > 0; };
  for (int mode : all_modes) {
    std::string p = Explain(db, kUser.c_str(), d, 0, mode, c.k);
    Progress("plan %-6s %s", ModeName(mode), p.c_str());
    plans.push_back(Fmt("- %s, one partition of %zu, query 1: `%s`", ModeName(mode), c.n,
                        p.c_str()));
  }
  std::vector<std::string> one_user(c.queries, kUser);
  auto runs = TimeRecall(db, c, d, all_modes, one_user, "recall");
  AddSlowestPlans(db, d, runs, one_user, c.k, Fmt("one partition of %zu", c.n), &plans);
  CheckLists(runs, d, c.k, "one partition", &checks);
  if (has_mode(AGENTMEM_RECALL_VECTOR)) {
    // vector recall@k against the exact top-k
    size_t found = 0;
    const ModeRun& v = runs[AGENTMEM_RECALL_VECTOR];
    for (size_t q = 0; q < c.queries; q++) {
      for (const Hit& h : v.first_round[q]) {
        auto it = row_of_id.find(h.id);
        if (it != row_of_id.end() &&
            std::find(truth[q].begin(), truth[q].end(), it->second) != truth[q].end())
          found++;
      }
    }
    double recall = static_cast<double>(found) / static_cast<double>(c.queries * c.k);
    rep.Add("vector recall@10 vs exact (cosine)", "recall@10", recall, "",
            Fmt("%zu queries, exact brute force in the bench", c.queries));
  }
  {
    const char* names[] = {"recall top-10, hybrid (BM25 + vector, RRF)",
                           "recall top-10, BM25 only (OR)", "recall top-10, vector only"};
    for (int mode : all_modes) {
      rep.AddLatency(names[mode], runs[mode].wall_us, LatencyNotes(runs[mode]));
    }
  }
  // Determinism: the same query twice on one handle.
  {
    std::vector<Hit> a, b;
    RecallOnce(db, kUser.c_str(), d.qtexts[1], d.qvecs.row(1), c.dim, AGENTMEM_RECALL_HYBRID, c.k,
               &a);
    RecallOnce(db, kUser.c_str(), d.qtexts[1], d.qvecs.row(1), c.dim, AGENTMEM_RECALL_HYBRID, c.k,
               &b);
    bool same = a.size() == b.size();
    for (size_t i = 0; same && i < a.size(); i++) same = a[i].id == b[i].id;
    if (!same) Warn("the same hybrid query gave different hits twice on one handle");
  }
  agentmem_stats main_stats = StatsOrDie(db);
  agentmem_close(db);

  // ---- 4. open to first recall in a fresh process
  if (c.run_open) {
    {
      std::string blob(8, '\0');
      uint32_t tl = static_cast<uint32_t>(d.qtexts[0].size()), dim = static_cast<uint32_t>(c.dim);
      std::memcpy(blob.data(), &tl, 4);
      std::memcpy(blob.data() + 4, &dim, 4);
      blob += d.qtexts[0];
      blob.append(reinterpret_cast<const char*>(d.qvecs.row(0)), c.dim * sizeof(float));
      std::ofstream(query_file, std::ios::binary) << blob;
    }
    std::string expect;
    if (has_mode(AGENTMEM_RECALL_HYBRID))
      for (const Hit& h : runs[AGENTMEM_RECALL_HYBRID].first_round[0])
      Append(&expect, ",", std::to_string(h.id));
    std::vector<double> open_ms, first_ms, fork_ms;
    long child_rss = 0;
    bool same = true;
    Progress("open: 1 untimed + %d timed child processes (fork + exec, warm page cache)",
             c.open_runs);
    for (int i = 0; i <= c.open_runs; i++) {
      ChildRun r = RunChild(main_file, query_file, kUser, c.k);
      if (!r.ok) {
        Warn("open-only child run %d failed", i);
        continue;
      }
      if (!expect.empty() && r.ids != expect) same = false;
      if (i == 0) continue;
      open_ms.push_back(r.open_ms);
      first_ms.push_back(r.first_ms);
      fork_ms.push_back(r.since_fork_ms);
      child_rss = std::max(child_rss, r.maxrss_kib);
      Progress("open run %d: open %.1f ms, first hit %.1f ms after open began, %.1f ms after "
               "fork",
               i, r.open_ms, r.first_ms, r.since_fork_ms);
    }
    if (!same) Warn("a fresh process got different hybrid hits than the writer's reopen");
    checks.push_back(Fmt("- a fresh process's first hybrid recall equals the earlier handle's: %s",
                         same ? "yes" : "NO"));
    if (!first_ms.empty()) {
      Summary f = Summarize(first_ms), o = Summarize(open_ms), k = Summarize(fork_ms);
      std::string runs_s;
      for (double x : first_ms) Append(&runs_s, "/", Fmt("%.1f", x));
      rep.Add("open → first recall (new process, warm cache)", "median", f.p50, "ms",
              Fmt("runs %s ms; of which agentmem_open_v2 median %.1f ms", runs_s.c_str(), o.p50));
      rep.Add("open → first recall (new process, warm cache)", "fork → first hit, median", k.p50,
              "ms", "includes exec, dynamic loading, reading the query");
      rep.Add("open → first recall (new process, warm cache)", "child peak RSS",
              static_cast<double>(child_rss) / 1024.0, "MiB", "the engine's memory after open + 1 recall");
    }
    rep.Add("open → first recall (new process, warm cache)", "in-process reopen", reopen_ms, "ms",
            "agentmem_open_v2 in the bench process, just after ingest");
  }

  // ---- 5. user filter: the same episodes over c.users users
  if (c.run_filter) {
    auto user_name = [](size_t u) { return Fmt("user-%04zu", u); };
    size_t users = static_cast<size_t>(c.users);
    IngestResult ui;
    auto user_of = [&](size_t i) { return user_name(i % users); };
    bool ureused = c.reuse && Reuse(users_file, d, c.n, user_of, &ui);
    if (ureused) {
      Progress("reusing %s (no ingest figures)", users_file.c_str());
    } else {
      Progress("ingest: %zu episodes over %zu users (round robin), %zu per transaction -> %s",
               c.n, users, c.batch, users_file.c_str());
      ui = Ingest(users_file, d, c.n, c.batch, user_of, "users");
      rep.Add(Fmt("ingest, %zu per transaction, %zu users", c.batch, users), "episodes/s",
              static_cast<double>(c.n) / ui.seconds, "1/s", Fmt("%.1f s", ui.seconds));
    }
    agentmem_db* udb = OpenOrDie(users_file, AGENTMEM_OPEN_READWRITE);
    std::vector<std::string> user_of_query(c.queries);
    for (size_t q = 0; q < c.queries; q++) user_of_query[q] = user_name(q % users);
    const std::vector<int>& modes = c.modes;
    for (int mode : modes) {
      std::string p = Explain(udb, user_of_query[0].c_str(), d, 0, mode, c.k);
      Progress("plan %-6s (user filter) %s", ModeName(mode), p.c_str());
      plans.push_back(Fmt("- %s, user filter (%zu users, %zu episodes each): `%s`", ModeName(mode),
                          users, c.n / users, p.c_str()));
    }
    auto fr = TimeRecall(udb, c, d, modes, user_of_query, "filtered");
    std::string w = Fmt("filtered to 1 of %zu users (%zu episodes each)", users, c.n / users);
    AddSlowestPlans(udb, d, fr, user_of_query, c.k, "user filter", &plans);
    CheckLists(fr, d, c.k, "user filter", &checks);
    // Every hit belongs to the user; vector recall@k within the user's episodes.
    std::vector<std::vector<uint32_t>> rows_of_user(users);
    for (size_t i = 0; i < c.n; i++) rows_of_user[i % users].push_back(static_cast<uint32_t>(i));
    std::unordered_map<int64_t, uint32_t> urow;
    for (size_t i = 0; i < ui.ids.size(); i++) urow[ui.ids[i]] = static_cast<uint32_t>(i);
    size_t foreign = 0, total = 0, found = 0, wanted = 0;
    for (int mode : modes) {
      for (size_t q = 0; q < c.queries; q++) {
        for (const Hit& h : fr[mode].first_round[q]) {
          total++;
          if (h.user != user_of_query[q]) foreign++;
        }
      }
    }
    for (size_t q = 0; q < c.queries; q++) {
      const auto& rows = rows_of_user[q % users];
      std::vector<Scored> top;
      for (uint32_t r : rows)
        Offer(&top, static_cast<size_t>(c.k), Dot(d.vecs.row(r), d.qvecs.row(q), c.dim), r);
      wanted += top.size();
      if (!has_mode(AGENTMEM_RECALL_VECTOR)) continue;
      for (const Hit& h : fr[AGENTMEM_RECALL_VECTOR].first_round[q]) {
        auto it = urow.find(h.id);
        if (it == urow.end()) continue;
        for (const Scored& s : top)
          if (s.row == it->second) found++;
      }
    }
    if (foreign) Warn("%zu of %zu filtered hits belong to another user", foreign, total);
    checks.push_back(Fmt("- user filter: %zu of %zu hits (all modes, round 1) belong to another "
                         "user",
                         foreign, total));
    if (has_mode(AGENTMEM_RECALL_VECTOR))
      rep.Add(w + ", vector", "recall@10", wanted ? static_cast<double>(found) / wanted : 0, "",
              "against the exact top-10 of the user's episodes");
    for (int mode : {AGENTMEM_RECALL_HYBRID, AGENTMEM_RECALL_VECTOR, AGENTMEM_RECALL_BM25}) {
      if (!has_mode(mode)) continue;
      rep.AddLatency(w + ", " + (mode == AGENTMEM_RECALL_BM25 ? "BM25" : ModeName(mode)),
                     fr[mode].wall_us, LatencyNotes(fr[mode]));
    }
    agentmem_close(udb);
  }

  // ---- 6. size and memory
  {
    int64_t file = FileBytes(main_file);
    int64_t raw = d.text_bytes + vector_bytes;
    rep.Add("size", "file bytes", static_cast<double>(file) / 1048576.0, "MiB",
            Fmt("%lld bytes; stats.file_bytes %lld; %lld pages", static_cast<long long>(file),
                static_cast<long long>(main_stats.file_bytes),
                static_cast<long long>(main_stats.pages)));
    rep.Add("size", "raw text + raw vectors", static_cast<double>(raw) / 1048576.0, "MiB",
            Fmt("text %.1f MiB + vectors %.1f MiB (%zu x %d float32)", d.text_bytes / 1048576.0,
                vector_bytes / 1048576.0, c.n, c.dim));
    rep.Add("size", "file / raw", static_cast<double>(file) / static_cast<double>(raw), "×",
            "the file holds text, vectors, BM25 postings and the HNSW graph");
    rep.Add("memory", "bench peak RSS", static_cast<double>(PeakRssKiB()) / 1024.0, "MiB",
            Fmt("whole bench process, incl. its own copy of the data (%.0f MiB of vectors)",
                vector_bytes / 1048576.0));
  }

  // ---- report
  std::string date = CommandOutput("date -u '+%Y-%m-%d %H:%M UTC'");
  std::string commit = CommandOutput("git rev-parse --short HEAD 2>/dev/null");
  std::string dirty = CommandOutput("git status --porcelain --untracked-files=no 2>/dev/null | head -1");
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
  rep.AddHeader(Fmt("# agentmem recall bench — N = %zu episodes × %d-d, top-%d", c.n, c.dim, c.k));
  rep.AddHeader("");
  rep.AddHeader(Fmt("%s · agentmem %s · commit %s%s · %u cores (%s) · load average at end: %s",
                    date.c_str(), agentmem_libversion(), commit.c_str(),
                    dirty.empty() ? "" : " (work tree modified)",
                    std::thread::hardware_concurrency(), cpu.c_str(), load.c_str()));
  rep.AddHeader("");
  rep.AddHeader(Fmt("Data: %zu WordNet 3.0 glosses (%.1f MB), %d-d clustered synthetic unit "
                    "vectors (%d clusters, noise %.2f, seed %llu), %zu held-out gloss queries "
                    "with vectors from the same clusters; %zu warm-up queries per mode, then %d "
                    "rounds of all queries, modes interleaved. Latency = agentmem_recall + "
                    "stepping every hit (text fetched) + cursor close, one thread. Percentiles "
                    "are nearest-rank over all samples. Wall-clock on a shared machine: read "
                    "the thread-CPU and per-round figures for the noise.",
                    c.n, d.text_bytes / 1e6, c.dim, c.clusters, c.noise,
                    static_cast<unsigned long long>(c.seed), c.queries, c.warmup, c.rounds));
  rep.AddSection("## Plans (EXPLAIN RECALL)", plans);
  checks.push_back(Fmt("- warnings: %d", g_warnings));
  rep.AddSection("## Checks", checks);

  std::string md = rep.Markdown();
  std::string csv = rep.Csv(c.n, c.dim);
  mkdir(c.out.c_str(), 0755);
  std::string base = c.out + Fmt("/recall-n%zu", c.n);
  std::ofstream(base + ".md") << md;
  std::ofstream(base + ".csv") << csv;
  Progress("wrote %s.md and %s.csv (%d warnings)", base.c_str(), base.c_str(), g_warnings);
  std::fflush(stderr);
  std::fputs(md.c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }

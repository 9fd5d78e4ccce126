// tests/engine/crafted_file_test.cc -- files a hostile writer made (built by
// tests/util/crafted.h, every page checksummed): opening, checking, writing to
// and importing them needs memory in proportion to the bytes they hold, never
// to a number written in them (docs/format.md §4.4, §8). Each case runs in a
// forked child whose peak resident memory is measured (VmHWM after resetting
// it), and must stay under 256 MiB for a file of at most 1 MiB.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/memory/database.h"
#include "engine/env/env.h"
#include "engine/memory/memory.h"
#include "tests/util/crafted.h"
#include "tests/util/peak_memory.h"

namespace agentmem::test {
namespace {

using engine::Database;

constexpr const char* kPath = "/mem/crafted.agentmem";
constexpr long kBoundKib = 256 * 1024;

struct ChildRun {
  bool finished = false;  // the child reported (did not crash or run out of memory)
  long grown_kib = -1;    // its peak resident memory above where it started
  std::string outcome;    // what `work` returned
};

// Runs `work` in a forked child. Its address space is capped 1 GiB above
// where it starts, so that a regression fails here instead of taking the
// machine's memory. Under a sanitizer it runs in this process.
ChildRun InChild(const std::function<std::string()>& work) {
#ifdef AGENTMEM_TEST_SANITIZED
  // No bound to measure here (see MemoryMeasurable), and ThreadSanitizer
  // stops a forked child that starts threads: run it in this process.
  ChildRun inline_run;
  inline_run.finished = true;
  inline_run.outcome = work();
  return inline_run;
#endif
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    long start = ResetPeakKib();
    if (start < 0) start = ProcStatusKib("VmRSS:");  // the peak starts at the fork
    if (MemoryMeasurable()) {
      const long vm = ProcStatusKib("VmSize:");
      rlimit r{};
      r.rlim_cur = r.rlim_max = static_cast<rlim_t>(vm + (1L << 20)) * 1024;
      setrlimit(RLIMIT_AS, &r);
    }
    std::string out;
    try {
      out = work();
    } catch (const std::exception& e) {
      out = std::string("exception: ") + e.what();
    }
    const std::string msg = std::to_string(PeakGrowthKib(start)) + "\n" + out;
    size_t done = 0;
    while (done < msg.size()) {
      const ssize_t n = write(fds[1], msg.data() + done, msg.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ChildRun run;
  const size_t nl = msg.find('\n');
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && nl != std::string::npos) {
    run.finished = true;
    run.grown_kib = std::strtol(msg.c_str(), nullptr, 10);
    run.outcome = msg.substr(nl + 1);
  }
  return run;
}

void CheckBounded(const ChildRun& run, size_t file_bytes) {
  CAPTURE(run.outcome);
  CAPTURE(run.grown_kib);
  REQUIRE(file_bytes <= (1u << 20));
  REQUIRE(run.finished);
  CHECK(run.outcome.find("exception") == std::string::npos);
  MESSAGE("peak memory grew " << run.grown_kib << " KiB for a file of " << file_bytes << " bytes");
  if (MemoryMeasurable()) CHECK(run.grown_kib < kBoundKib);
}

std::string Code(const Status& s) { return s.ok() ? "OK" : s.ToString(); }

// Opens the file (read-only, or read-write), reads everything, recalls,
// checks; read-write also remembers an episode, checkpoints at close and
// reopens. Returns what each step said.
std::string OpenAndUse(const std::string& bytes, bool write) {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  if (!env->CreateAtomic(kPath, bytes).ok()) return "no env";
  engine::Options o;
  o.env = env.get();
  o.create = false;
  o.read_only = !write;
  o.checkpoint_bytes = 1;  // a close writes a checkpoint
  std::string out;
  std::unique_ptr<Database> db;
  Status s = Database::Open(kPath, o, &db);
  out += "open: " + Code(s) + "\n";
  if (!s.ok()) return out;
  std::vector<uint64_t> ids;
  s = db->ListEpisodeIds("ann", nullptr, &ids);
  out += "list: " + Code(s) + " " + std::to_string(ids.size()) + "\n";
  for (uint64_t id : ids) {
    format::EpisodeRecord e;
    out += "episode " + std::to_string(id) + ": " + Code(db->GetEpisode(id, &e)) + " " + e.text + "\n";
  }
  engine::RecallQuery q;
  q.user_id = "ann";
  q.text = "hello";
  q.k = 5;
  q.mode = engine::RecallMode::kBm25;
  std::vector<engine::RecallHit> hits;
  engine::RecallPlan plan;
  s = db->Recall(q, &hits, &plan);
  out += "recall: " + Code(s) + " " + std::to_string(hits.size()) + "\n";
  std::vector<std::string> problems;
  s = db->Check(&problems);
  out += "check: " + Code(s) + " " + std::to_string(problems.size()) + "\n";
  for (const std::string& p : problems) out += "  " + p + "\n";
  if (!write) return out;
  format::EpisodeRecord e;
  e.user_id = "ann";
  e.session_id = "s2";
  e.role = "user";
  e.text = "hello again";
  e.ts = 9;
  uint64_t id = 0;
  s = db->Remember(e, &id);
  out += "remember: " + Code(s) + " " + std::to_string(id) + "\n";
  out += "close: " + Code(db->Close()) + "\n";
  db.reset();
  o.read_only = true;
  s = Database::Open(kPath, o, &db);
  out += "reopen: " + Code(s) + "\n";
  if (!s.ok()) return out;
  format::EpisodeRecord back;
  out += "read back: " + Code(db->GetEpisode(id, &back)) + " " + back.text + "\n";
  s = db->Recall(q, &hits, &plan);
  out += "recall: " + Code(s) + " " + std::to_string(hits.size()) + "\n";
  problems.clear();
  s = db->Check(&problems);
  out += "check: " + Code(s) + " " + std::to_string(problems.size()) + "\n";
  return out;
}

bool Has(const std::string& outcome, const std::string& line) {
  return outcome.find(line) != std::string::npos;
}

// The export of HugeIdFile(1) (user "ann"). The crafted episode has no
// creation time (0), which an import refuses: it is given time 5, its ts.
void ExportOfOneEpisode(std::string* jsonl) {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, HugeIdFile(1)).ok());
  engine::Options o;
  o.env = env.get();
  o.create = false;
  std::unique_ptr<Database> db;
  REQUIRE(Database::Open(kPath, o, &db).ok());
  REQUIRE(engine::ExportUser(db.get(), "ann", jsonl).ok());
  const size_t at = jsonl->find("\"created_at\":0,");
  REQUIRE(at != std::string::npos);
  jsonl->replace(at, 15, "\"created_at\":5,");
}

}  // namespace

TEST_SUITE("crafted files") {

TEST_CASE("a page holding a zstd frame of a gigabyte of zeros is refused without decompressing it") {
  const std::string bytes = BombFile();
  REQUIRE(bytes.size() < 40000);
  for (bool write : {false, true}) {
    CAPTURE(write);
    const ChildRun run = InChild([&] { return OpenAndUse(bytes, write); });
    CheckBounded(run, bytes.size());
    // The bomb is the last transaction, nothing vouches for it: a torn tail.
    CHECK(Has(run.outcome, "open: OK"));
    CHECK(Has(run.outcome, "episode 1: OK hello there"));
    CHECK(Has(run.outcome, "check: OK 0"));
  }
}

TEST_CASE("a page whose payload splits into far more records than its header counts stays small") {
  // 24 million empty records for a count of one: a valid page whose records
  // are not well-formed is damage (docs/format.md §4.6).
  const std::string bytes = RecordFloodFile();
  const ChildRun run = InChild([&] { return OpenAndUse(bytes, false); });
  CheckBounded(run, bytes.size());
  CHECK(Has(run.outcome, "open: AGENTMEM_CORRUPT_PAGE"));
  CHECK(Has(run.outcome, "record lengths do not add up"));
}

TEST_CASE("a page counting four billion records or a record claiming 2^62 bytes is refused") {
  for (const std::string& bytes : {HugeCountFile(), HugeLengthFile()}) {
    const ChildRun run = InChild([&] { return OpenAndUse(bytes, true); });
    CheckBounded(run, bytes.size());
    CHECK(Has(run.outcome, "open: AGENTMEM_CORRUPT_PAGE"));
  }
}

TEST_CASE("an episode id of thirty million or 2^63 - 1 costs one entry, not an array that large") {
  for (uint64_t id : {uint64_t{30000000}, (uint64_t{1} << 63) - 1}) {
    CAPTURE(id);
    const std::string bytes = HugeIdFile(id);
    const ChildRun run = InChild([&] { return OpenAndUse(bytes, true); });
    CheckBounded(run, bytes.size());
    CHECK(Has(run.outcome, "open: OK"));
    CHECK(Has(run.outcome, "episode " + std::to_string(id) + ": OK hello there"));
    CHECK(Has(run.outcome, "recall: OK 1"));
    if (id < Database::kMaxEpisodeId) {
      CHECK(Has(run.outcome, "remember: OK " + std::to_string(id + 1)));
      CHECK(Has(run.outcome, "read back: OK hello again"));
      CHECK(Has(run.outcome, "recall: OK 2"));
    } else {
      // The ids are used up: the next one would not be an SQL integer.
      CHECK(Has(run.outcome, "remember: AGENTMEM_RANGE"));
      CHECK(Has(run.outcome, "above the largest"));
      CHECK(Has(run.outcome, "recall: OK 1"));
    }
    CHECK(Has(run.outcome, "close: OK"));
    CHECK(Has(run.outcome, "reopen: OK"));
    CHECK(Has(run.outcome, "check: OK 0"));
  }
}

TEST_CASE("an import of an episode id above 2^63 - 1 is refused with a clear error") {
  std::unique_ptr<engine::Env> env = engine::NewMemEnv();
  REQUIRE(env->CreateAtomic(kPath, HugeIdFile(1)).ok());
  engine::Options o;
  o.env = env.get();
  o.create = false;
  std::unique_ptr<Database> db;
  REQUIRE(Database::Open(kPath, o, &db).ok());
  std::string jsonl;
  ExportOfOneEpisode(&jsonl);
  const size_t at = jsonl.find("\"id\":1,");
  REQUIRE(at != std::string::npos);
  for (const char* id : {"9223372036854775808", "18446744073709551615"}) {
    CAPTURE(id);
    std::string bad = jsonl;
    bad.replace(at, 7, std::string("\"id\":") + id + ",");
    engine::ImportCounts counts;
    Status s = engine::ImportJsonl(db.get(), bad, &counts);
    CAPTURE(s.ToString());
    CHECK(s.code() == kRange);
    CHECK(s.message().find("above the largest") != std::string::npos);
  }
  std::vector<uint64_t> ids;
  REQUIRE(db->ListEpisodeIds("ann", nullptr, &ids).ok());
  CHECK(ids == std::vector<uint64_t>{1});
}

TEST_CASE("a commit that moves the next episode id to twenty million keeps the next insert small") {
  const std::string bytes = HugeNextIdFile(20000000);
  const ChildRun run = InChild([&] { return OpenAndUse(bytes, true); });
  CheckBounded(run, bytes.size());
  CHECK(Has(run.outcome, "remember: OK 20000000"));
  CHECK(Has(run.outcome, "close: OK"));
  CHECK(Has(run.outcome, "read back: OK hello again"));
  CHECK(Has(run.outcome, "check: OK 0"));
}

TEST_CASE("importing an export whose episode id is thirty million stays small, and so do reopens") {
  // The export of a one-episode file, its id rewritten.
  std::string jsonl;
  ExportOfOneEpisode(&jsonl);
  const size_t at = jsonl.find("\"id\":1,");
  REQUIRE(at != std::string::npos);
  jsonl.replace(at, 7, "\"id\":30000000,");
  const ChildRun run = InChild([&] {
    std::unique_ptr<engine::Env> env = engine::NewMemEnv();
    engine::Options o;
    o.env = env.get();
    o.space = engine::VectorSpace{"test-hash", 4, "cosine"};
    o.space_given = true;
    o.tokenizer = index::TokenizerOptions{};  // the export's: its file records no tokenizer
    o.checkpoint_bytes = 1;
    std::unique_ptr<Database> db;
    Status s = Database::Open(kPath, o, &db);
    std::string out = "create: " + Code(s) + "\n";
    if (!s.ok()) return out;
    engine::ImportCounts counts;
    s = engine::ImportJsonl(db.get(), jsonl, &counts);
    out += "import: " + Code(s) + " " + std::to_string(counts.episodes) + "\n";
    out += "close: " + Code(db->Close()) + "\n";
    db.reset();
    std::string bytes;
    std::unique_ptr<engine::File> f;
    uint64_t size = 0;
    if (env->Open(kPath, engine::OpenMode{true}, &f).ok() && f->Size(&size).ok()) {
      f->ReadAt(0, size, &bytes).IgnoreError();
    }
    f.reset();
    return out + OpenAndUse(bytes, true);
  });
  CheckBounded(run, jsonl.size());
  CHECK(Has(run.outcome, "import: OK 1"));
  CHECK(Has(run.outcome, "episode 30000000: OK hello there"));
  CHECK(Has(run.outcome, "remember: OK 30000001"));
  CHECK(Has(run.outcome, "check: OK 0"));
}

}  // TEST_SUITE
}  // namespace agentmem::test

// tests/fuzz/replay_main.cc -- fuzz_replay: runs fuzz targets on kept inputs
// without libFuzzer (the normal g++ build), so CI checks the corpus on every
// `make test` (reliability_tests "the kept fuzz corpus replays...").
//
//   fuzz_replay TARGET PATH...   feeds each file (or each file of each folder,
//                                in name order) to TARGET
//   fuzz_replay --list           prints the registered targets
//
// Exit status 0 when every input ran; a broken invariant or a crash aborts,
// naming the input (FUZZ_REPLAY_VERBOSE=1 names each input as it starts).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz.h"

namespace agentmem::fuzz {

std::map<std::string, TargetFn>& Targets() {
  static std::map<std::string, TargetFn> targets;
  return targets;
}

bool Register(const char* name, TargetFn fn) {
  Targets()[name] = fn;
  return true;
}

}  // namespace agentmem::fuzz

namespace {

// The input being replayed, named by the crash handler.
char g_current[4096];

void OnCrash(int sig) {
  const char msg[] = "fuzz_replay: crashed while replaying ";
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  ignored = write(2, g_current, strlen(g_current));
  ignored = write(2, "\n", 1);
  (void)ignored;
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using agentmem::fuzz::Targets;
  if (argc == 2 && std::string(argv[1]) == "--list") {
    for (const auto& [name, fn] : Targets()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: fuzz_replay TARGET PATH... | --list\n");
    return 2;
  }
  auto it = Targets().find(argv[1]);
  if (it == Targets().end()) {
    std::fprintf(stderr, "fuzz_replay: no target named %s (see --list)\n", argv[1]);
    return 2;
  }
  std::vector<fs::path> inputs;
  for (int i = 2; i < argc; i++) {
    fs::path p = argv[i];
    if (fs::is_directory(p)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else if (fs::is_regular_file(p)) {
      inputs.push_back(p);
    } else {
      std::fprintf(stderr, "fuzz_replay: %s does not exist\n", p.c_str());
      return 2;
    }
  }
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signal(sig, OnCrash);
  const bool verbose = std::getenv("FUZZ_REPLAY_VERBOSE") != nullptr;
  double slowest = 0;
  std::string slowest_name;
  for (const fs::path& p : inputs) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string bytes = ss.str();
    std::snprintf(g_current, sizeof g_current, "%s", p.c_str());
    if (verbose) std::fprintf(stderr, "replaying %s (%zu bytes)\n", p.c_str(), bytes.size());
    auto t0 = std::chrono::steady_clock::now();
    it->second(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > slowest) {
      slowest = s;
      slowest_name = p.filename().string();
    }
  }
  std::printf("fuzz_replay %s: %zu inputs, 0 failures (slowest %s: %.3f s)\n", argv[1],
              inputs.size(), slowest_name.c_str(), slowest);
  return 0;
}

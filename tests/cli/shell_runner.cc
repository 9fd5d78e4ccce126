// tests/cli/shell_runner.cc -- see shell_runner.h.
#include "tests/cli/shell_runner.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/util/temp_dir.h"

extern char** environ;

namespace agentmem::test {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

ShellResult RunShell(const std::string& dir, const std::vector<std::string>& args,
                     const std::string& input) {
  static int counter = 0;
  std::string base = dir + "/.run" + std::to_string(counter++);
  WriteFileBytes(base + ".in", input);
  std::vector<std::string> argv_s = {AGENTMEM_SHELL_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = {"HOME=" + dir, "AGENTMEM_HISTORY=", "PATH=/usr/bin:/bin",
                                    "LANG=C.UTF-8"};
  std::vector<char*> env;
  for (auto& e : env_s) env.push_back(e.data());
  env.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, (base + ".in").c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, (base + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&fa, 2, (base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
  pid_t pid;
  ShellResult r;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), env.data()) != 0) {
    posix_spawn_file_actions_destroy(&fa);
    r.err = "posix_spawn failed";
    return r;
  }
  posix_spawn_file_actions_destroy(&fa);
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0) {
  }
  r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  r.out = Slurp(base + ".out");
  r.err = Slurp(base + ".err");
  unlink((base + ".in").c_str());
  unlink((base + ".out").c_str());
  unlink((base + ".err").c_str());
  return r;
}

std::string DataDir() {
  std::vector<std::string> candidates;
  if (const char* d = std::getenv("AGENTMEM_DATA_DIR")) candidates.push_back(d);
  candidates.push_back("../shared/data");
  candidates.push_back("/work/shared/data");
  for (const auto& d : candidates) {
    struct stat st;
    if (!d.empty() && stat((d + "/locomo/episodes.jsonl").c_str(), &st) == 0) {
      char* real = realpath(d.c_str(), nullptr);
      std::string out = real ? real : d;
      std::free(real);
      return out;
    }
  }
  return "";
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) out.push_back(line);
  return out;
}

}  // namespace agentmem::test

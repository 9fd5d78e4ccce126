// cli/shell/progress.h -- the progress bar of .import: drawn on stderr only
// when stderr is a terminal, never when it is a pipe or a file.
#pragma once

#include <cstdint>
#include <cstdio>

namespace agentmem::shell {

class Progress {
 public:
  // total: bytes of the input (0: unknown, no bar).
  Progress(std::FILE* err, int64_t total);
  ~Progress() { Finish(); }
  // done: bytes read so far; lines: lines read so far.
  void Update(int64_t done, int64_t lines);
  // Erases the bar (idempotent).
  void Finish();
  bool shown() const { return enabled_; }

 private:
  std::FILE* err_;
  int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  int last_permille_ = -1;
};

}  // namespace agentmem::shell

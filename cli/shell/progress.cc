// cli/shell/progress.cc -- see progress.h.
#include "shell/progress.h"

#include <unistd.h>

#include <string>

#include "shell/text.h"

namespace agentmem::shell {

Progress::Progress(std::FILE* err, int64_t total)
    : err_(err), total_(total), enabled_(total > 0 && isatty(fileno(err))) {}

void Progress::Update(int64_t done, int64_t lines) {
  if (!enabled_) return;
  int permille = static_cast<int>(done * 1000 / total_);
  if (permille > 1000) permille = 1000;
  if (permille == last_permille_) return;
  last_permille_ = permille;
  constexpr int kWidth = 30;
  int filled = permille * kWidth / 1000;
  std::string bar(filled, '#');
  bar.append(kWidth - filled, '.');
  std::fprintf(err_, "\r[%s] %3d.%d%%  %s lines", bar.c_str(), permille / 10, permille % 10,
               Thousands(lines).c_str());
  std::fflush(err_);
  drawn_ = true;
}

void Progress::Finish() {
  if (!drawn_) return;
  std::fputs("\r\033[K", err_);
  std::fflush(err_);
  drawn_ = false;
}

}  // namespace agentmem::shell

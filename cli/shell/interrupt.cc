// cli/shell/interrupt.cc -- see interrupt.h.
#include "shell/interrupt.h"

#include <csignal>

namespace agentmem::shell {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void OnInterrupt(int) { g_interrupted = 1; }

}  // namespace

void InstallInterruptHandler() {
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
}

bool Interrupted() { return g_interrupted != 0; }
void ClearInterrupt() { g_interrupted = 0; }

}  // namespace agentmem::shell

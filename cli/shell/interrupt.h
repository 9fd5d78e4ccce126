// cli/shell/interrupt.h -- ^C in the interactive shell: a SIGINT handler sets
// a flag that long work (a query's rows, .import, .export) checks, so that ^C
// stops the work, not the shell.
#pragma once

namespace agentmem::shell {

// Installs the handler (interactive sessions only; scripts keep the default
// action of SIGINT, which ends the process).
void InstallInterruptHandler();
// True once ^C was pressed since the last ClearInterrupt().
bool Interrupted();
void ClearInterrupt();

}  // namespace agentmem::shell

// cli/sync/sync.h -- `agentmem sync FILE postgresql://...`: pushes the file's
// change feed into a PostgreSQL database (docs/replication.md, "agentmem
// sync").
#pragma once

namespace agentmem::sync {

// Runs the command; argv[0] is "sync". Returns the process exit status: 0
// when every change up to the file's last commit is in PostgreSQL, 1 when the
// arguments are wrong or the file, the server or a statement fails (the
// PostgreSQL transaction that was open is rolled back; what earlier ones
// committed stays, and the next run goes on from there).
int RunSync(int argc, char** argv);

}  // namespace agentmem::sync

// cli/sync/sync.h -- `agentmem sync FILE postgresql://...` (command.cc,
// through agentmem_sync() of include/agentmem_sync.h): pushes the file's
// own changes into a PostgreSQL database and applies the other files'
// changes found there (docs/replication.md, "agentmem sync").
#pragma once

namespace agentmem::sync {

// Runs the command; argv[0] is "sync". Returns the process exit status: 0
// when every change up to the file's last commit is in PostgreSQL and every
// other file's change there is applied to the file, 1 when the arguments are
// wrong or the file, the server, a statement or a row read fails (the open
// PostgreSQL and local transactions are rolled back; what earlier ones
// committed stays, and the next run goes on from there). With --verify
// (argv[1]; FILE optional), syncs FILE when it is given, then prints the
// receipts report (verify.cc) and returns 1 also when a receipt has
// residue or PostgreSQL still holds a forgotten row.
int RunSync(int argc, char** argv);

}  // namespace agentmem::sync

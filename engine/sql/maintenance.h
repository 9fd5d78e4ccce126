// engine/sql/maintenance.h -- the maintenance statements SQLite does not
// parse, FORGET, VACUUM and SET RETENTION (docs/sql.md, "Forgetting and
// compaction"), rewritten into calls of the table-valued functions forget(),
// vacuum() and retention() before sqlite3 prepares them. Literals and parameters are copied verbatim,
// so `FORGET USER ? PURGE` binds like any statement.
#pragma once

#include <string>

#include "format/status.h"

namespace agentmem::engine::sql {

// If the statement starting at `sql` (up to `end`) is a FORGET, a bare
// VACUUM, a bare REINDEX or a SET RETENTION, sets *rewritten to the equivalent SELECT and *rest to just past its
// terminating ';' (or `end`), and returns true. A malformed FORGET gives
// kError with the grammar in the message.
//   FORGET USER u [SESSION s | BEFORE t] [PURGE]
//   FORGET EPISODE id [PURGE]      FORGET FACT id [PURGE]
//   FORGET BLOCK u name [PURGE]    VACUUM    REINDEX
//   SET RETENTION seconds [KEEP CITED]   (retention(seconds, keep))
// u, s, name: string literals or parameters; t, id: integers or parameters.
Result<bool> RewriteMaintenance(const char* sql, const char* end, std::string* rewritten,
                                const char** rest);

}  // namespace agentmem::engine::sql

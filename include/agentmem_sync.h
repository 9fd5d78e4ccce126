/*
** agentmem_sync.h -- the C interface of libagentmem_sync: one call that
** brings an open agentmem file and a PostgreSQL database up to date with each
** other, as `agentmem sync FILE CONNINFO` does (docs/replication.md,
** "agentmem sync" and "The library call"). The library is built from the
** shell's sync code (cli/sync/) when libpq is found, and links libpq and
** libagentmem; libagentmem itself does not depend on libpq.
**
** Conventions are those of agentmem.h: an int result code, AGENTMEM_OK is 0;
** no C++ types or exceptions cross the ABI.
**
** Caveats:
**  - A call takes its own PostgreSQL connection, and holds the database's
**    sync advisory lock while it runs: calls against one database, from any
**    process, run one at a time.
**  - The call commits local transactions on `db` (the pulled batches, the
**    sync.* meta keys) and may VACUUM the file (after pulled forgets); it
**    must not be made inside BEGIN ... COMMIT.
*/
#ifndef AGENTMEM_SYNC_H
#define AGENTMEM_SYNC_H

#include <stdint.h>

#include "agentmem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AGENTMEM_SYNC_REPORT_VERSION 1

/* What one agentmem_sync() did. The caller sets `version` to
** AGENTMEM_SYNC_REPORT_VERSION (fields are only ever appended; the library
** fills the ones that version names). Every other field is output. */
typedef struct agentmem_sync_report {
  int version;             /* in: AGENTMEM_SYNC_REPORT_VERSION */
  char origin[17];         /* the file's origin id, 16 hexadecimal digits ("" when
                              the call failed before reading or making it) */
  int64_t pushed;          /* change rows written to PostgreSQL */
  char log[17];            /* the file's log the push read, hexadecimal ("" when
                              the push did not get that far) */
  int64_t push_first;      /* the first and last of the file's commits the push read
                              (0, 0: none); it leaves out those that wrote nothing
                              to push (a pull's batches, the sync.* keys) */
  int64_t push_last;
  int resync;              /* 1: the log was read from its start (a VACUUM made it) */
  int64_t pulled;          /* change rows of other origins read and applied */
  int64_t forgets;         /* of them, forget rows */
  int purged;              /* 1: the file was vacuumed for the pulled forgets */
  int64_t receipts;        /* rows written to agentmem_receipts */
  int64_t position;        /* the global position (gpos) the file has applied */
  char errmsg[1024];       /* "" on success; on failure what failed, e.g.
                              "PostgreSQL: connection to server ... failed: ..." */
} agentmem_sync_report;

/* Push db's own changes that PostgreSQL does not hold, then pull and apply
** every other file's changes after db's pulled position, under the
** database's advisory lock; the tables are created when missing.
** conninfo is a libpq connection string or URI (postgresql://user@host/db).
**
** Returns AGENTMEM_OK when every change up to db's last commit is in
** PostgreSQL and every other file's change there is applied to db; a second
** call with nothing new reports pushed = pulled = 0.
** AGENTMEM_MISUSE: db, conninfo or pReport is NULL, pReport->version is not
** one this library knows (nothing is written to *pReport then), or db is
** inside BEGIN ... COMMIT.
** AGENTMEM_CANTOPEN: the connection failed (errmsg holds libpq's message).
** AGENTMEM_ERROR: a statement or a row read from PostgreSQL failed; a call
** on db that failed gives its own code instead (AGENTMEM_BUSY when another
** handle held the write lock past db's busy_timeout, AGENTMEM_FULL, ...);
** errmsg says which. The open PostgreSQL and local transactions are
** rolled back; what earlier batches committed stays, and the next call goes
** on from there. AGENTMEM_NOMEM, AGENTMEM_INTERNAL as in agentmem.h.
** On every return but the first MISUSE case, *pReport holds what was done
** before the call ended. Thread safety: db is used as any agentmem call
** uses it, but for the whole call; do not close it meanwhile. */
int agentmem_sync(agentmem_db *db, const char *conninfo, agentmem_sync_report *pReport);

#ifdef __cplusplus
}
#endif

#endif /* AGENTMEM_SYNC_H */

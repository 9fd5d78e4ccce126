/*
** agentmem.h -- the public C interface of agentmem, an embedded single-file
** database for AI-agent memory. This is the only public header.
**
** Conventions:
**  (1) Only opaque handles and plain C structs cross the ABI; no C++ types and
**      no exceptions ever escape.
**  (2) Functions return an int result code; AGENTMEM_OK is 0. Codes have a
**      primary part (low 8 bits) and may carry an extended part, as in SQLite:
**      (code & 0xff) is always one of the primary codes below.
**  (3) Memory returned to the caller (strings through char**, episode, block
**      and fact structs) is released with agentmem_free().
**  (4) agentmem_close(NULL) and agentmem_free(NULL) are harmless no-ops.
**  (5) Thread safety: a handle is serialized -- every function takes the
**      handle's mutex, so one handle may be shared by threads, but calls on
**      it run one at a time. A cursor belongs to its handle: use it from one
**      thread at a time and finish it before agentmem_close().
**  (6) Durability: with sync=FULL (the default) a commit that returned
**      AGENTMEM_OK survives process crash, OS crash and power loss, provided
**      the disk honours fdatasync. If a commit fails with AGENTMEM_IOERR_*
**      the transaction is "in doubt": after reopening it is either wholly
**      present or wholly absent, never partial. After any failed write or
**      sync the handle refuses further writes (AGENTMEM_IOERR_STICKY) until
**      it is closed and the file reopened; fsync is never retried.
**  (7) Strings are UTF-8 and NUL-terminated; invalid UTF-8 is refused with
**      AGENTMEM_MISMATCH_UTF8. Times are unix microseconds (int64).
**      A name or text holds no NUL byte: where one can arrive whole (SQL
**      values, bound text with a length, JSON "\u0000" in an import) it is
**      refused with AGENTMEM_MISMATCH, never stored or cut.
**
** Caveats (read these):
**  - sync=NORMAL gives up D: an OS crash or power loss may lose the most
**    recent commits (never corrupting the file); a process crash loses none.
**    sync=OFF gives up D as well and is meant for bulk loads.
**  - One writer at a time per file, across threads and processes. A second
**    writer waits up to the busy timeout and then gets AGENTMEM_BUSY; readers
**    are never blocked.
**  - Network file systems with broken byte-range locks are not supported.
**  - A handle may own a thread (recall_threads=2, after its first large
**    hybrid recall): as with SQLite, do not carry an open handle across
**    fork(); open a new one in the child.
*/
#ifndef AGENTMEM_H
#define AGENTMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- result codes */
#define AGENTMEM_OK              0   /* success */
#define AGENTMEM_ERROR           1   /* generic error; see agentmem_errmsg() */
#define AGENTMEM_INTERNAL        2   /* a bug in agentmem */
#define AGENTMEM_NOMEM           3   /* an allocation failed */
#define AGENTMEM_IOERR           4   /* an I/O call failed */
#define AGENTMEM_CORRUPT         5   /* the file is damaged */
#define AGENTMEM_NOTADB          6   /* the file is not an agentmem database */
#define AGENTMEM_FORMAT_VERSION  7   /* the file needs a newer agentmem */
#define AGENTMEM_BUSY            8   /* another writer holds the write lock */
#define AGENTMEM_READONLY        9   /* write attempted on a read-only handle */
#define AGENTMEM_MISUSE         10   /* API misuse: NULL/closed handle, bad state */
#define AGENTMEM_FULL           11   /* the disk is full */
#define AGENTMEM_CANTOPEN       12   /* the file cannot be opened or created */
#define AGENTMEM_CONSTRAINT     13   /* a constraint failed (block limit, empty name, ...) */
#define AGENTMEM_NOTFOUND       14   /* no such record */
#define AGENTMEM_MISMATCH       15   /* wrong kind of value (dimension, UTF-8, JSON) */
#define AGENTMEM_TOOBIG         16   /* a value exceeds a size limit */
#define AGENTMEM_RANGE          17   /* a parameter is out of range */
#define AGENTMEM_ABORT          18   /* an agentmem_exec() callback asked to stop */
#define AGENTMEM_ROW           100   /* agentmem_cursor_step(): a row is ready */
#define AGENTMEM_DONE          101   /* agentmem_cursor_step(): no more rows */

#define AGENTMEM_IOERR_READ          (AGENTMEM_IOERR | (1<<8))
#define AGENTMEM_IOERR_WRITE         (AGENTMEM_IOERR | (2<<8))
#define AGENTMEM_IOERR_FSYNC         (AGENTMEM_IOERR | (3<<8))
#define AGENTMEM_IOERR_SHORT_READ    (AGENTMEM_IOERR | (4<<8))
#define AGENTMEM_IOERR_TRUNCATE      (AGENTMEM_IOERR | (5<<8))
#define AGENTMEM_IOERR_LOCK          (AGENTMEM_IOERR | (6<<8))
#define AGENTMEM_IOERR_STICKY        (AGENTMEM_IOERR | (7<<8))
#define AGENTMEM_CORRUPT_CHECKSUM    (AGENTMEM_CORRUPT | (1<<8))
#define AGENTMEM_CORRUPT_PAGE        (AGENTMEM_CORRUPT | (2<<8))
#define AGENTMEM_CORRUPT_INDEX       (AGENTMEM_CORRUPT | (3<<8))
#define AGENTMEM_CORRUPT_SUPERBLOCK  (AGENTMEM_CORRUPT | (4<<8))
#define AGENTMEM_CORRUPT_HEADER      (AGENTMEM_CORRUPT | (5<<8))
#define AGENTMEM_BUSY_TIMEOUT        (AGENTMEM_BUSY | (1<<8))
#define AGENTMEM_NOTFOUND_CHANGES    (AGENTMEM_NOTFOUND | (1<<8))  /* agentmem_changes_since(): resync */
#define AGENTMEM_READONLY_FILE       (AGENTMEM_READONLY | (1<<8))
#define AGENTMEM_CANTOPEN_EXISTS     (AGENTMEM_CANTOPEN | (1<<8))
#define AGENTMEM_MISMATCH_DIMENSION  (AGENTMEM_MISMATCH | (1<<8))
#define AGENTMEM_MISMATCH_UTF8       (AGENTMEM_MISMATCH | (2<<8))
#define AGENTMEM_MISMATCH_JSON       (AGENTMEM_MISMATCH | (3<<8))

/* ---------------------------------------------------------------- handles */
typedef struct agentmem_db agentmem_db;      /* one open database file */
typedef struct agentmem_cursor agentmem_cursor; /* an iteration over records */

/* ---------------------------------------------------------------- library */

/* The library version, e.g. "0.1.0". The string is static; never free it. */
const char *agentmem_libversion(void);

/* An English description of a result code (primary or extended). Static. */
const char *agentmem_errstr(int code);

/* ---------------------------------------------------------------- open/close */

/* Flags for agentmem_open_v2(). Exactly one of READONLY or READWRITE. */
#define AGENTMEM_OPEN_READONLY   0x01  /* open an existing file for reading only */
#define AGENTMEM_OPEN_READWRITE  0x02  /* open for reading and writing */
#define AGENTMEM_OPEN_CREATE     0x04  /* with READWRITE: create the file if missing */

/* Open the database file zPath.
**
** zPath ":memory:" opens a private in-memory database that vanishes at close.
**
** flags: AGENTMEM_OPEN_READONLY, or AGENTMEM_OPEN_READWRITE optionally with
** AGENTMEM_OPEN_CREATE.
**
** zOptions: NULL or a string of "key=value" pairs separated by '&' or ';':
**   sync=full|normal|off      durability mode (default full; see Caveats)
**   busy_timeout=MS           how long a writer waits for the write lock
**                             (default 5000 ms; 0 = fail at once with BUSY)
**   vector_dim=N              dimension of episode vectors (default: the
**                             embedder's, 100 for agentmem-glove-v2, else 384)
**   vector_metric=cosine|ip|l2  (default cosine)
**   vector_type=f32|f16|int8  how the file stores vectors (default f16 for
**                             the built-in agentmem-glove embedders, whose
**                             vectors come from 8-bit tables, else f32); f16
**                             halves their bytes: vectors are rounded to the
**                             nearest float16 values when committed (a
**                             component beyond +-65504 is refused with
**                             AGENTMEM_RANGE); int8 stores one byte per
**                             component and a float32 scale per vector
**                             (component = q * scale, q in -127..127, the
**                             scale set by the largest |component|), so
**                             small components lose precision. Recall
**                             searches the stored values: docs/bench.md
**                             gives recall@10 for each type. f16 and int8
**                             files need read version 2
**   embedder=NAME             name of the model that makes the vectors
**                             (default "agentmem-glove-v2", the built-in GloVe
**                             embedder, or "agentmem-hash-v1" in a library
**                             built without its table; vector_dim alone
**                             means agentmem-hash-v1 at that dimension)
**                             A new file records the vector space; opening an
**                             existing file checks the parts named here.
**   tokenizer=unicode|ascii   how text is split into BM25 terms (default unicode:
**                             lower-cased letters and digits of every script;
**                             ascii: [a-z0-9]+ of lower-cased text)
**   stem=0|1|snowball         English stemming: none, Porter step 1, or the
**                             Snowball English stemmer (default snowball)
**   stop_words=0|1|query      none; 33 stop words dropped from texts and queries;
**                             or function words dropped from queries (default query)
**   context=0..8              each episode is also searched by the text of this
**                             many turns before it in its session (default 2)
**   own_weight=1..8           with context, the episode's own words count this
**                             many times (default 3). docs/recall.md; the
**                             reference BM25 of bm25_baseline.py is
**                             tokenizer=ascii;stem=0;stop_words=0;context=0
**   max_text_bytes=N          largest episode text accepted (default 8 MiB)
**   cache_size=N              the page cache of the handle, as in SQLite: N > 0
**                             pages of the file's page_size, N < 0 -N KiB, 0 none
**                             (default -8192: 8 MiB). Read pages are kept up to
**                             this many bytes (least recently used go first).
**   checkpoint_bytes=N        fold the log into a checkpoint at close once N bytes
**                             were committed after the last one (default 4 MiB;
**                             0 = never; docs/architecture.md "Checkpoints")
**   auto_vacuum=0|1           compact the file at a writable close when more of
**                             its episode records are forgotten than live, at
**                             least 1,000, or when superseded checkpoints and
**                             graph deltas exceed half the rest of the file
**                             (default 1; docs/lifecycle.md)
**   recall_threads=1|2        threads of one hybrid recall (default 2): with 2,
**                             a hybrid query over more than 4,096 candidates
**                             and no metadata filter runs its vector search on
**                             a worker thread of the handle (started by the
**                             first such query, joined by agentmem_close())
**                             while the calling thread runs BM25; the hits are
**                             the same. A query finding the worker busy, or a
**                             machine with one CPU, runs both on the calling
**                             thread, and so does one whose vector search the
**                             worker has not begun when BM25 is done; a worker
**                             kept waiting for a CPU (a loaded machine) is left
**                             unused for the next 16 to 1,024 queries, and so
**                             is it while the load average is at least the
**                             number of CPUs. With 1 every query runs on the
**                             calling thread.
** The vector_*, embedder and text options (tokenizer, stem, stop_words,
** context, own_weight) define the file's vector space and text analysis when
** the file is created; on an existing file they must match what the file
** records (the text options as a whole, unnamed ones taking their defaults),
** or the open fails with AGENTMEM_MISMATCH. Without them a file keeps its own.
**
** Returns AGENTMEM_OK with a usable handle in *ppDb. On failure returns
** AGENTMEM_CANTOPEN, AGENTMEM_NOTADB, AGENTMEM_FORMAT_VERSION,
** AGENTMEM_CORRUPT_* (the message names the damaged page), AGENTMEM_IOERR_*,
** AGENTMEM_MISMATCH, AGENTMEM_MISUSE (bad flags or options) or
** AGENTMEM_NOMEM. Like sqlite3_open_v2(), a handle comes back in *ppDb even
** on failure (unless memory ran out, when *ppDb is NULL) so that
** agentmem_errmsg() can explain; release it with agentmem_close().
**
** Opening never rebuilds an index and never writes: a torn tail left by a
** crash is ignored, and cut off by the next write transaction. */
int agentmem_open_v2(const char *zPath, agentmem_db **ppDb, int flags, const char *zOptions);

/* agentmem_open_v2(zPath, ppDb, READWRITE|CREATE, NULL). */
int agentmem_open(const char *zPath, agentmem_db **ppDb);

/* Close the handle and free it. An open transaction is rolled back.
** Returns AGENTMEM_OK; AGENTMEM_BUSY if cursors are still open (the handle
** stays usable); agentmem_close(NULL) returns AGENTMEM_OK and does nothing.
** With sync=NORMAL a final sync is made here; its failure is reported as
** AGENTMEM_IOERR_FSYNC but the handle is freed all the same. After a handle
** of 10,000 episodes or more, the memory it freed is given back to the
** system (glibc's malloc_trim), so that the process does not stay at that
** handle's size. */
int agentmem_close(agentmem_db *db);

/* The result code, extended result code, and English message of the most
** recent failed call on db. The message is owned by the handle and valid until
** the next call on it. A NULL db gives "out of memory" / AGENTMEM_NOMEM, as
** in SQLite. A successful call resets them to AGENTMEM_OK / "not an error". */
int agentmem_errcode(agentmem_db *db);
int agentmem_extended_errcode(agentmem_db *db);
const char *agentmem_errmsg(agentmem_db *db);

/* Free memory that agentmem returned to the caller. NULL is a no-op. */
void agentmem_free(void *p);

/* ---------------------------------------------------------------- your own embedder */

/* Metrics of agentmem_create_embedder(), as the open option vector_metric. */
#define AGENTMEM_METRIC_COSINE 0
#define AGENTMEM_METRIC_IP     1
#define AGENTMEM_METRIC_L2     2

/* The most texts one call of an agentmem_embed_fn is given. */
#define AGENTMEM_EMBED_BATCH_MAX 64

/* An application's embedding model. Embeds the n texts azText[0..n-1]
** (1 <= n <= AGENTMEM_EMBED_BATCH_MAX; UTF-8, NUL-terminated, owned by the
** library and valid during the call) into aOut: n * dim floats, text i's
** vector at aOut + i * dim. Returns AGENTMEM_OK, or an error code that fails
** the call that needed the vectors (a code that is not an agentmem error
** becomes AGENTMEM_ERROR); a message may then be copied into zErr, a buffer
** of nErr bytes (it is NUL-terminated by the library if the callback leaves
** it unterminated). The callback runs with the handle's mutex held: it must
** not call agentmem functions on the same handle. */
typedef int (*agentmem_embed_fn)(void *ctx, int n, const char *const *azText, int dim,
                                 float *aOut, char *zErr, int nErr);

/* Register the application's embedding model on db, like
** sqlite3_create_function(): from then on every episode written without a
** vector -- agentmem_remember() with vector NULL, an SQL INSERT without
** embedding, agentmem_import() of a line without one -- gets fn's vector of
** its text, and every recall without a query vector (agentmem_recall() in
** hybrid and vector modes, SQL recall(), agentmem_context()) fn's vector of
** the query. A write outside a transaction embeds its text at once; in a
** transaction texts are embedded AGENTMEM_EMBED_BATCH_MAX at a time, when
** that many wait and at commit (docs/recall.md, "Your own embedder").
**
** name, dim and metric (AGENTMEM_METRIC_*) must be the file's vector space
** (the open options embedder, vector_dim, vector_metric that created it),
** else AGENTMEM_MISMATCH; a file whose embedder is built in
** (agentmem-hash-v1) refuses with AGENTMEM_MISUSE. A later registration
** replaces this one; fn NULL removes it (name, dim and metric are then still
** checked). destroy (may be NULL) is called with ctx when the registration
** is replaced or removed and at agentmem_close(); it is not called when this
** function fails, and ctx then stays the caller's. Refused with
** AGENTMEM_MISUSE while the open transaction holds texts not yet embedded.
**
** When fn fails, returns a NaN or infinite value, the call that needed the
** vectors fails with fn's code (AGENTMEM_RANGE for a non-finite value) and a
** message naming the embedder, and writes nothing: agentmem_remember()
** leaves no episode, agentmem_commit() rolls the whole transaction back. */
int agentmem_create_embedder(agentmem_db *db, const char *name, int dim, int metric,
                             agentmem_embed_fn fn, void *ctx, void (*destroy)(void *));

/* ---------------------------------------------------------------- transactions */

/* Start an explicit transaction. Without one, every write is its own
** transaction (autocommit). A write transaction takes the file's write lock
** at its first write, waiting up to busy_timeout; reads inside the
** transaction see one consistent snapshot plus the transaction's own writes.
** Returns AGENTMEM_OK, or AGENTMEM_MISUSE if a transaction is already open. */
int agentmem_begin(agentmem_db *db);

/* Commit the open transaction: its records, then a commit record, are
** appended, then (sync=FULL) one fdatasync. Returns AGENTMEM_OK when the
** transaction is durable per the sync mode; AGENTMEM_MISUSE with no open
** transaction; AGENTMEM_IOERR_* / AGENTMEM_FULL on failure, after which the
** transaction is in doubt and the handle is read-only until reopened. When a
** registered embedder (agentmem_create_embedder) fails on the texts still
** waiting for their vectors, its code is returned, nothing is written and
** the transaction is rolled back. */
int agentmem_commit(agentmem_db *db);

/* Discard the open transaction. Returns AGENTMEM_OK, or AGENTMEM_MISUSE with
** no open transaction. Never fails otherwise. */
int agentmem_rollback(agentmem_db *db);

/* 0 while a transaction is open on db (agentmem_begin(), or SQL BEGIN), 1
** when none is (every write is then its own transaction), as
** sqlite3_get_autocommit(). A COMMIT that failed has ended its transaction
** unless this still says 0. 1 for a handle that is not open. */
int agentmem_get_autocommit(agentmem_db *db);

/* ---------------------------------------------------------------- episodes */

typedef struct agentmem_episode {
  int64_t id;               /* engine-assigned, increasing */
  const char *user_id;      /* "" is the anonymous bucket */
  const char *session_id;
  const char *role;         /* user / assistant / tool / system / summary / ... */
  const char *text;
  int64_t ts;               /* event time, unix microseconds */
  int64_t created_at;       /* commit time, unix microseconds */
  const char *metadata;     /* JSON text; "" when none */
  const float *vector;      /* dim floats, or NULL when dim == 0 */
  int dim;
} agentmem_episode;         /* fields may be appended in later versions */

/* Remember one episode. user_id, session_id and role may be "" but not NULL;
** text must be non-NULL valid UTF-8 of at most max_text_bytes; metadata is
** NULL/"" or a JSON object or value nested at most 64 levels of arrays and
** objects deep (deeper: AGENTMEM_TOOBIG); vector is NULL (the file's built-in
** embedder, or the model registered with agentmem_create_embedder(), embeds
** text; with an external embedder and none registered, no vector) or dim
** floats matching the file's vector_dim. ts is the event time (0 = now).
** On AGENTMEM_OK, *pId (if pId is not NULL) receives the new id. On failure
** *pId is left unchanged and nothing is written; codes: AGENTMEM_MISUSE,
** AGENTMEM_MISMATCH_UTF8, AGENTMEM_MISMATCH_JSON,
** AGENTMEM_MISMATCH_DIMENSION, AGENTMEM_TOOBIG, AGENTMEM_READONLY,
** AGENTMEM_BUSY, AGENTMEM_IOERR_*, AGENTMEM_FULL, and a registered embedder's
** codes (agentmem_create_embedder). Outside an explicit
** transaction the episode is committed before this returns. */
int agentmem_remember(agentmem_db *db, const char *user_id, const char *session_id,
                      const char *role, const char *text, int64_t ts,
                      const char *metadata, const float *vector, int dim, int64_t *pId);

/* Fetch one episode by id. On AGENTMEM_OK *ppEp is a struct the caller frees
** with agentmem_free() (one allocation; all strings live inside it). On
** failure *ppEp is set to NULL; codes: AGENTMEM_NOTFOUND, AGENTMEM_CORRUPT_*,
** AGENTMEM_IOERR_*, AGENTMEM_MISUSE. */
int agentmem_episode_get(agentmem_db *db, int64_t id, agentmem_episode **ppEp);

/* Iterate one user's episodes by event time (ts), ties by id.
** session_id NULL means every session. On AGENTMEM_OK *ppCur is a cursor;
** step it with agentmem_cursor_step() and read rows with
** agentmem_cursor_episode(); finish it with agentmem_cursor_close(). On
** failure *ppCur is NULL. The cursor sees the snapshot of its creation. */
int agentmem_episodes(agentmem_db *db, const char *user_id, const char *session_id,
                      agentmem_cursor **ppCur);

/* ---------------------------------------------------------------- blocks */

typedef struct agentmem_block {
  const char *user_id;
  const char *name;
  const char *value;
  int limit;            /* maximum characters (Unicode code points); 0 = none */
  int pinned_order;     /* order among pinned blocks; -1 = not pinned */
  int64_t updated_at;
  int64_t version;      /* increases with every write of any block */
} agentmem_block;

/* Write a new version of the block (user_id, name). name must be non-empty.
** limit is the maximum length of value in characters (0 = none); a value
** longer than limit is refused with AGENTMEM_CONSTRAINT and nothing is
** written. Earlier versions are kept (history). Codes as agentmem_remember(). */
int agentmem_block_set(agentmem_db *db, const char *user_id, const char *name,
                       const char *value, int limit, int pinned_order);

/* The current version of block (user_id, name). On AGENTMEM_OK *ppBlock is
** freed by the caller with agentmem_free(); on failure it is NULL
** (AGENTMEM_NOTFOUND when the block does not exist). */
int agentmem_block_get(agentmem_db *db, const char *user_id, const char *name,
                       agentmem_block **ppBlock);

/* Iterate the current version of each of a user's blocks, by name. Rows are
** read with agentmem_cursor_block(). */
int agentmem_blocks(agentmem_db *db, const char *user_id, agentmem_cursor **ppCur);

/* ---------------------------------------------------------------- facts */

typedef struct agentmem_fact {
  int64_t id;
  const char *user_id;
  const char *subject;
  const char *predicate;
  const char *object;
  double confidence;
  const int64_t *source_episode_ids;  /* the cited episodes not forgotten since */
  int n_sources;
  int64_t valid_from;   /* valid time, unix microseconds */
  int64_t valid_to;     /* INT64_MAX = still valid */
  int64_t recorded_at;  /* transaction time */
  int64_t expired_at;   /* INT64_MAX = not superseded */
} agentmem_fact;

/* Assert a fact (subject, predicate, object) for user_id. subject, predicate
** and object must be non-empty; confidence in [0, 1]; valid_from 0 = now;
** valid_to 0 = open-ended. source_ids may be NULL when n_sources is 0. On
** AGENTMEM_OK *pId (if not NULL) receives the fact id. Codes as
** agentmem_remember(), plus AGENTMEM_RANGE for a bad confidence or an empty
** valid-time range. */
int agentmem_fact_assert(agentmem_db *db, const char *user_id, const char *subject,
                         const char *predicate, const char *object, double confidence,
                         int64_t valid_from, int64_t valid_to,
                         const int64_t *source_ids, int n_sources, int64_t *pId);

/* Iterate a user's facts in id order; subject and predicate, when not NULL,
** restrict the listing. Rows are read with agentmem_cursor_fact(). */
int agentmem_facts(agentmem_db *db, const char *user_id, const char *subject,
                   const char *predicate, agentmem_cursor **ppCur);

/* Declare predicate single-valued (or not again) for every user of the file
** (e.g. "lives_in"): asserting a new object for a subject then supersedes the
** current one instead of adding a second -- the old fact is expired in
** transaction time and kept with its valid_to closed at the new fact's
** valid_from (docs/lifecycle.md, "Facts on two time axes"). */
int agentmem_predicate_declare(agentmem_db *db, const char *predicate, int single_valued);

#define AGENTMEM_FACTS_ALL_VERSIONS 0x01  /* every row of both time axes; no time filter */

/* Iterate user_id's facts matching subject, predicate and object (each NULL =
** any; looked up in an index, never by scanning the user's facts), in id
** order: those valid at valid_at (valid_from <= valid_at < valid_to) as the
** file knew them at known_at (recorded_at <= known_at < expired_at); 0 = now
** on either axis, so (0, 0) gives the current facts. With
** AGENTMEM_FACTS_ALL_VERSIONS every row, superseded ones included. Rows are
** read with agentmem_cursor_fact(). */
int agentmem_facts_v2(agentmem_db *db, const char *user_id, const char *subject,
                      const char *predicate, const char *object, int64_t valid_at,
                      int64_t known_at, int flags, agentmem_cursor **ppCur);

/* ---------------------------------------------------------------- forgetting */
/*
** A forget is committed like a write: what it names is invisible to every
** read, recall, SQL query and export of every handle from its commit on. The
** bytes leave the file at the next VACUUM; AGENTMEM_FORGET_PURGE does that at
** once and proves it (docs/lifecycle.md, "Forgetting"). Facts whose every source
** episode is forgotten are forgotten with them. Ids are never reused.
*/
#define AGENTMEM_FORGET_PURGE 0x01  /* then VACUUM and scan the new file for the forgotten bytes */

/* What a forget, PURGE or VACUUM did. */
typedef struct agentmem_receipt {
  int64_t episodes;        /* episodes forgotten */
  int64_t facts;           /* facts forgotten (with those citing only forgotten episodes) */
  int64_t block_versions;  /* block versions forgotten */
  int vacuumed;            /* 1: the file was rewritten */
  int64_t bytes_before;    /* file size before the rewrite */
  int64_t bytes_after;     /* and after */
  int64_t needles;         /* PURGE: forgotten texts (>= 16 bytes) and vectors searched for
                              in every byte of the new file, raw and decompressed */
  int64_t residue;         /* of them, found: 0 = nothing of the forgotten data remains */
} agentmem_receipt;

/* Forget user_id's memory: all of it (session_id NULL, before 0: episodes,
** blocks and facts), one session's episodes (session_id), or the episodes
** with an event time before `before` (unix microseconds). flags 0 or
** AGENTMEM_FORGET_PURGE. pReceipt may be NULL; inside BEGIN ... COMMIT its
** counts are 0 (the forget applies at COMMIT) and PURGE is AGENTMEM_MISUSE.
** Forgetting what does not exist is not an error (the counts say 0). */
int agentmem_forget(agentmem_db *db, const char *user_id, const char *session_id, int64_t before,
                    int flags, agentmem_receipt *pReceipt);
/* Forget one episode, one fact, or every version of one block. */
int agentmem_forget_episode(agentmem_db *db, int64_t id, int flags, agentmem_receipt *pReceipt);
int agentmem_forget_fact(agentmem_db *db, int64_t id, int flags, agentmem_receipt *pReceipt);
int agentmem_forget_block(agentmem_db *db, const char *user_id, const char *name, int flags,
                          agentmem_receipt *pReceipt);

/* Retention, stored in the file for every handle: episodes whose event time
** (ts) is more than max_age_seconds in the past are forgotten -- except, with
** keep_cited, those that a live fact cites -- when a writable handle closes
** and before a VACUUM copies the file, and after a writer's commit once the
** policy is due (docs/lifecycle.md; each time as one forget record).
** max_age_seconds 0 keeps episodes forever (the default). Blocks and facts
** never expire. agentmem_retention_get reads the policy. */
int agentmem_retention_set(agentmem_db *db, int64_t max_age_seconds, int keep_cited);
int agentmem_retention_get(agentmem_db *db, int64_t *pMaxAgeSeconds, int *pKeepCited);

/* Compact the file: write the live records, the indexes and a checkpoint to a
** new file beside it (FILE-vacuum), sync it, and rename it over FILE. Other
** handles, in this process or others, keep their snapshot and move to the new
** file on their next read or write. Ids, versions and both time axes of facts
** are kept. AGENTMEM_MISUSE inside a transaction; AGENTMEM_BUSY when another
** writer holds the lock past the busy timeout. pReceipt may be NULL. */
int agentmem_vacuum(agentmem_db *db, agentmem_receipt *pReceipt);

/* Proof for forgets that cannot PURGE (those committed inside BEGIN ...
** COMMIT). With on = 1, every forget this handle applies from then on --
** its own commits, and those of other handles that it reads -- keeps in
** memory what it removes: the texts (>= 16 bytes) and vectors of the
** episodes and the values of every version of the blocks. The next
** agentmem_vacuum on this handle searches its new file for them as PURGE
** does (receipt needles and residue) and then drops them. on = 0 drops what
** is kept and stops. The setting is the handle's, not the file's, and is
** lost when the handle closes. Returns AGENTMEM_OK, or AGENTMEM_MISUSE for a
** closed handle. */
int agentmem_forget_collect(agentmem_db *db, int on);

/* Search every byte of the file, and every compressed page's payload
** decompressed, for each of the n byte strings aNeedle[i] of aBytes[i]
** bytes (each at least 16 bytes: shorter ones would match innocent bytes).
** On AGENTMEM_OK, *pFound is how many distinct needles are in the file
** (0: none is). AGENTMEM_MISUSE for a NULL argument, n < 0 or a needle
** shorter than 16 bytes; an I/O error leaves *pFound 0. Reads the file up
** to its current end; takes no lock. */
int agentmem_search_bytes(agentmem_db *db, const void *const *aNeedle, const int64_t *aBytes,
                          int n, int64_t *pFound);

/* Salvage a damaged file (docs/recovery.md). Reads zSrc without writing to
** it and without opening it as a database: every page that passes its
** checksum is read, scanning past damage to the next valid page; every
** committed transaction whose pages are all valid and whose commit page
** matches them is written, in order, into the new file zDst through the
** normal commit path (so both indexes are built again). Ids, versions and
** both time axes are kept; forget records found on valid pages of a dropped
** transaction still apply, and a checkpoint after a dropped transaction
** gives back the records of its valid pages that the checkpoint names as
** live. Memory and time follow the file's size. zDst must not exist (AGENTMEM_CANTOPEN_EXISTS); it
** gets zSrc's permission bits. zDst NULL: only read and report (what `.check`
** prints for a file that does not open).
**
** On AGENTMEM_OK (the scan ran; with zDst, the new file is whole) *pzReport,
** when pzReport is not NULL, holds a JSON object to free with agentmem_free():
** "clean" (true: nothing lost), "damaged" (one entry per run of bad bytes:
** page, offset, bytes, commit_seq of its transaction or null, error),
** "transactions_kept", "transactions_dropped" (first_page, commit_page,
** commit_seq, reason, and the episode ids lost with it), "episodes_lost"
** (ids and [first, last] ranges), "episodes_lost_count", "torn_bytes",
** "forgets_unknown" (dropped transactions whose lost pages may have held
** forgets: the records written before them may include forgotten ones) and
** the rest listed in docs/recovery.md. Damage is not an error: the report
** says what was lost. On failure -- AGENTMEM_CANTOPEN, AGENTMEM_NOTADB,
** AGENTMEM_FORMAT_VERSION, AGENTMEM_CORRUPT_HEADER (neither the header nor a
** superblock gives the file's salt), AGENTMEM_IOERR_*, AGENTMEM_MISUSE,
** AGENTMEM_NOMEM -- *pzReport holds an English message (free it the same
** way) or NULL, and no new file is left behind. */
int agentmem_recover(const char *zSrc, const char *zDst, char **pzReport);

/* ---------------------------------------------------------------- recall */

#define AGENTMEM_RECALL_HYBRID 0  /* BM25 and vector lists, fused (default) */
#define AGENTMEM_RECALL_BM25   1  /* lexical only */
#define AGENTMEM_RECALL_VECTOR 2  /* semantic only */

#define AGENTMEM_RECALL_OPTIONS_VERSION 2

/* Options of agentmem_recall(). Initialise with agentmem_recall_options_init()
** (which sets `version` and every default) before changing fields; fields are
** only ever appended, and `version` tells the library which ones you know. */
typedef struct agentmem_recall_options {
  int version;                /* AGENTMEM_RECALL_OPTIONS_VERSION */
  int k;                      /* hits wanted (default 10, at most 10000) */
  int mode;                   /* AGENTMEM_RECALL_HYBRID / _BM25 / _VECTOR */
  int all_users;              /* 1: search every user's episodes (user_id ignored) */
  const char *session_id;     /* only this session (NULL: every session) */
  const char *role;           /* only this role (NULL: every role) */
  int64_t ts_from;            /* only event times >= ts_from (INT64_MIN: no bound) */
  int64_t ts_to;              /* only event times <  ts_to   (INT64_MAX: no bound) */
  const float *query_vector;  /* NULL: the built-in or registered embedder
                                 (agentmem_create_embedder) embeds the query text */
  int query_dim;
  double half_life_s;         /* recency weighting: the fused score halves every
                                 half_life_s seconds of age (0: off) */
  double min_score;           /* drop hits whose fused score is below (default 0) */
  int rrf_k;                  /* bm25 and vector mode: score = 1/(rrf_k + rank) (default 60) */
  const char *metadata_key;   /* only episodes whose metadata JSON holds */
  const char *metadata_value; /* this JSON value at this key ("channel" or a JSON
                                 pointer "/place/city"); value is JSON text, so a
                                 string needs its quotes: "\"chat\"". NULL: no filter.
                                 Reads each candidate's record: slower on big
                                 partitions than the other filters. */
  /* version 2 (a version 1 struct gets these defaults) */
  int fill;                   /* 1: always k hits -- no default similarity floor,
                                 and when fewer than k match, the other episodes
                                 of the filtered partition fill the list in id
                                 order with score 0 and both ranks 0 (default 0) */
  double min_similarity;      /* a vector hit matches when its vector_score is
                                 >= this; NAN (the default): the floor measured
                                 for the file's embedder (docs/recall.md), none
                                 for an external one; -INFINITY: no floor */
  double min_bm25;            /* a BM25 hit matches when its bm25_score is > 0
                                 and >= this (default 0) */
} agentmem_recall_options;

void agentmem_recall_options_init(agentmem_recall_options *opts);

/* One recall hit. score is the fused score, times the recency weight; ties go
** to the smaller id. In bm25 or vector mode it is 1/(rrf_k + rank). In hybrid
** mode, over the first max(k, 50) of each list, it is 0.8 (0.9 with the
** hashing embedder) times bm25_score over the list's best, plus 0.2 (0.1)
** times the similarity scaled min-max over the vector list (docs/recall.md).
** bm25_score
** is the Okapi BM25 score within the user's partition; vector_score is the
** similarity to the query (cosine: cos; ip: dot product; l2: minus the
** squared distance). A rank is 1-based; 0 means "not in that list". Only
** episodes that match come back: a BM25 hit (bm25_score > 0 and >= min_bm25)
** or a vector hit whose vector_score reaches min_similarity (by default the
** floor of the file's embedder), so a query that matches nothing gives no
** hits. With fill = 1, when fewer than k episodes match and the filtered
** partition holds more, the others fill the list in id order (the order
** they were remembered) with score 0 and both ranks 0. */
typedef struct agentmem_hit {
  int64_t id;
  const char *user_id;
  const char *session_id;
  const char *role;
  const char *text;
  int64_t ts;
  double score;
  double bm25_score;
  double vector_score;
  int bm25_rank;
  int vector_rank;
} agentmem_hit;

/* Recall what the database remembers about `query` for `user_id`, best first.
** opts NULL means the defaults. Filters (session, role, time) apply inside
** both searches, so k hits come back whenever the filtered partition holds k
** matching episodes (k episodes with fill = 1). A committed episode is found by the next recall, in this and in
** every other process. On AGENTMEM_OK *ppCur is a cursor over the hits: read
** them with agentmem_cursor_hit(). On failure *ppCur is NULL; codes:
** AGENTMEM_MISUSE (NULL arguments, bad mode, version, or a vector-mode query
** on a file whose vectors come from an external embedder without a query
** vector and without agentmem_create_embedder()), AGENTMEM_MISMATCH_DIMENSION,
** AGENTMEM_RANGE (also min_bm25 NaN), AGENTMEM_CORRUPT_*, AGENTMEM_IOERR_*,
** and the codes of a registered embedder that fails on the query. Episodes written in the handle's open transaction are
** not searched until it commits. */
int agentmem_recall(agentmem_db *db, const char *user_id, const char *query,
                    const agentmem_recall_options *opts, agentmem_cursor **ppCur);

/* EXPLAIN RECALL: runs the query and returns in *pzPlan a JSON object that
** says which plan was chosen (partition and filtered sizes, the BM25 and
** vector paths and their work, and in "legs" whether a hybrid query ran its
** two searches on two threads: recall_threads) followed by the hits with their per-list
** ranks and scores (doubles written so that they read back exactly). SQL
** explain_recall() returns the same text for the same query. Free *pzPlan
** with agentmem_free(). Codes as agentmem_recall(). */
int agentmem_explain_recall(agentmem_db *db, const char *user_id, const char *query,
                            const agentmem_recall_options *opts, char **pzPlan);

/* ---------------------------------------------------------------- cursors */

/* Advance a cursor. Returns AGENTMEM_ROW when a row is ready, AGENTMEM_DONE
** at the end, or an error code (AGENTMEM_CORRUPT_*, AGENTMEM_IOERR_*). */
int agentmem_cursor_step(agentmem_cursor *cur);

/* The current row of a cursor, or NULL if the cursor is of another kind or
** has no row. The struct is owned by the cursor and valid until the next
** step or close. */
const agentmem_episode *agentmem_cursor_episode(agentmem_cursor *cur);
const agentmem_block *agentmem_cursor_block(agentmem_cursor *cur);
const agentmem_fact *agentmem_cursor_fact(agentmem_cursor *cur);
const agentmem_hit *agentmem_cursor_hit(agentmem_cursor *cur);

/* Free a cursor. NULL is a no-op. Returns AGENTMEM_OK. */
int agentmem_cursor_close(agentmem_cursor *cur);

/* ---------------------------------------------------------------- the change feed */
/*
** Every committed transaction of the file, read back from its log, as a
** sequence of logical changes in commit order (docs/replication.md). A
** position in the feed is (log_id, seq): log_id names the file's log (its
** salt; a new file, a VACUUM's copy and a salvaged file each get a new one)
** and seq is a transaction's commit sequence number, 1, 2, 3, ... within that
** log. Within one log every commit stays in the file, so any since from 0 to
** the last commit can be read; a VACUUM starts a new log whose first
** transactions hold the live records of the old one.
*/
#define AGENTMEM_CHANGE_EPISODE   1  /* an episode was remembered */
#define AGENTMEM_CHANGE_BLOCK     2  /* a block version was written */
#define AGENTMEM_CHANGE_FACT      3  /* a fact, or a new version of one (data "new") */
#define AGENTMEM_CHANGE_FORGET    4  /* a forget: user, session, before, episode, fact, block */
#define AGENTMEM_CHANGE_RETENTION 5  /* the retention policy forgot episodes before a time */
#define AGENTMEM_CHANGE_META      6  /* a file setting (key, value) */
#define AGENTMEM_CHANGE_COMMIT    7  /* the end of a transaction: its last row */

/* One change. Rows of one transaction share seq and commit_ts and come in
** the order the transaction applies them: meta entries, episodes, block
** versions, facts, forgets, then one AGENTMEM_CHANGE_COMMIT row (also for a
** transaction with nothing else in it, such as a checkpoint). data is a JSON
** object with every field of the record (docs/replication.md lists them per
** kind); an episode's vector is in vector / dim, not in data. */
typedef struct agentmem_change {
  uint64_t log_id;        /* the file's log */
  int64_t seq;            /* the transaction's commit sequence number */
  int kind;               /* AGENTMEM_CHANGE_* */
  const char *kind_name;  /* "episode", "block", "fact", "forget", "retention", "meta", "commit" */
  int64_t id;             /* episode id, block version, fact id, the id a forget of one
                             episode or fact names; else 0 */
  const char *user_id;    /* "" for meta, retention and commit rows */
  const char *data;       /* JSON object: the record's fields */
  const float *vector;    /* an episode's dim floats; NULL otherwise */
  int dim;
  int64_t commit_ts;      /* the transaction's commit time, unix microseconds */
} agentmem_change;

/* Read the changes of every transaction committed after `since` in log
** log_id (0: whatever log the file holds), up to the last commit of the
** handle's snapshot when the call is made (a new snapshot unless a
** transaction is open). since 0 reads the whole log. On AGENTMEM_OK *ppCur
** is a cursor: step it with agentmem_cursor_step() and read each row with
** agentmem_cursor_change(); the cursor holds its snapshot until
** agentmem_cursor_close(). On failure *ppCur is NULL; codes:
** AGENTMEM_NOTFOUND_CHANGES when log_id is not the file's log (a VACUUM or a
** salvage made a new one) or since is past its last commit: the caller's
** copy cannot be brought up to date from here, and reads the feed again from
** since 0 of the file's log (agentmem_changes_head() names it; so does the
** message); AGENTMEM_RANGE for a negative since; AGENTMEM_MISUSE.
** agentmem_cursor_step() returns AGENTMEM_CORRUPT_* naming the page when a
** page of the log is damaged (a damaged transaction is never skipped),
** AGENTMEM_IOERR_*, and AGENTMEM_MISUSE when this handle vacuumed the file
** meanwhile. Reading costs the log from its first page, or from where the
** handle's last feed that was read to its end stopped (nothing when since is
** the last commit); memory holds one transaction at a time. */
int agentmem_changes_since(agentmem_db *db, uint64_t log_id, int64_t since,
                           agentmem_cursor **ppCur);

/* The current row of a cursor of agentmem_changes_since(), or NULL (another
** kind of cursor, or no row). Owned by the cursor; valid until the next step
** or close. */
const agentmem_change *agentmem_cursor_change(agentmem_cursor *cur);

/* The file's log and its last commit, as of a new snapshot (or the open
** transaction's): where a feed read now would end. Either pointer may be NULL.
** Returns AGENTMEM_OK, or AGENTMEM_MISUSE and the codes of a read. */
int agentmem_changes_head(agentmem_db *db, uint64_t *pLogId, int64_t *pSeq);

/* ---------------------------------------------------------------- replica writes */
/*
** What a replication client (agentmem sync, docs/replication.md) needs to
** apply another file's changes through the engine: records written with
** every field as the other file gave it, and settings of its own.
*/

/* Write ep as a new episode of this file: every field as given -- ts and
** created_at (0 = now), metadata, the vector (NULL/0: embedded as
** agentmem_remember() does) -- except ep->id, which is ignored: the episode
** gets this file's next id, returned in *pId (if not NULL). Checks and codes
** as agentmem_remember(); ep NULL is AGENTMEM_MISUSE. */
int agentmem_episode_put(agentmem_db *db, const agentmem_episode *ep, int64_t *pId);

/* Write f as a new fact of this file exactly as given, both time axes
** included (recorded_at 0 = now, expired_at 0 = never; valid_from 0 = now,
** valid_to 0 = open-ended), without superseding anything -- unlike
** agentmem_fact_assert(). f->id is ignored: the fact gets this file's next
** id, returned in *pId (if not NULL). source_episode_ids are this file's
** episode ids. AGENTMEM_RANGE when valid_to <= valid_from, expired_at <
** recorded_at or the confidence is outside [0, 1]; otherwise codes as
** agentmem_fact_assert(). */
int agentmem_fact_put(agentmem_db *db, const agentmem_fact *f, int64_t *pId);

/* A file setting of the replication client: keys start with "sync." (others:
** AGENTMEM_MISUSE), at most 256 bytes; values at most 64 KiB
** (AGENTMEM_TOOBIG); both UTF-8 without NUL. agentmem_meta_set writes like
** any write: in the open transaction, else committed at once; the setting
** is kept by VACUUM. agentmem_meta_get reads any key of docs/format.md §5.4
** as of a new snapshot (or the open transaction): on AGENTMEM_OK *pzValue is
** freed with agentmem_free(); AGENTMEM_NOTFOUND when the file has no such
** setting, and *pzValue is NULL on every failure. */
int agentmem_meta_set(agentmem_db *db, const char *key, const char *value);
int agentmem_meta_get(agentmem_db *db, const char *key, char **pzValue);

/* ---------------------------------------------------------------- statistics */

typedef struct agentmem_stats {
  int64_t file_bytes;       /* size of the file, torn tail excluded */
  int64_t episodes;         /* live episodes, all users */
  int64_t blocks;           /* current blocks (not versions), all users */
  int64_t block_versions;
  int64_t facts;
  int64_t users;
  int64_t commits;          /* commit sequence number of the snapshot */
  int64_t text_bytes;       /* bytes of episode text, all users */
  int64_t pages;            /* pages in the file */
  int64_t syncs;            /* data syncs this handle has issued */
} agentmem_stats;

/* Fill *pStats with figures of the handle's current snapshot. */
int agentmem_stats_get(agentmem_db *db, agentmem_stats *pStats);

/* ---------------------------------------------------------------- SQL */
/*
** SQL runs on a private in-memory sqlite3 connection whose tables are virtual
** tables over this file (docs/sql.md lists the tables and functions). No
** SQLite database file is ever created. The calls mirror sqlite3's: a
** statement is prepared, parameters are bound (by position, 1-based, or by
** name through agentmem_bind_parameter_index), agentmem_step() returns
** AGENTMEM_ROW for each row and AGENTMEM_DONE at the end, and
** agentmem_finalize() releases it. A statement outside BEGIN ... COMMIT is its
** own engine commit.
*/
typedef struct agentmem_stmt agentmem_stmt;  /* one prepared statement */

/* Column types, as agentmem_column_type() returns them (sqlite3's values). */
#define AGENTMEM_INTEGER 1
#define AGENTMEM_FLOAT   2
#define AGENTMEM_TEXT    3
#define AGENTMEM_BLOB    4
#define AGENTMEM_NULL    5

/* Run zero or more ';'-separated statements, like sqlite3_exec(): xCallback
** (may be NULL) is called once per result row with the column values as text
** (NULL for SQL NULL) and the column names; a non-zero return aborts with
** AGENTMEM_ABORT. On error, when pzErr is not NULL, *pzErr receives a copy
** of the message (free with agentmem_free()). */
int agentmem_exec(agentmem_db *db, const char *zSql,
                  int (*xCallback)(void *, int, char **, char **), void *pArg, char **pzErr);

/* Compile the first statement of zSql (nByte < 0: up to the NUL). *pzTail,
** when not NULL, is set to the rest of zSql. *ppStmt is NULL when zSql holds
** only white space or comments. */
int agentmem_prepare(agentmem_db *db, const char *zSql, int nByte, agentmem_stmt **ppStmt,
                     const char **pzTail);
int agentmem_step(agentmem_stmt *pStmt);       /* AGENTMEM_ROW, AGENTMEM_DONE or an error */
int agentmem_reset(agentmem_stmt *pStmt);      /* back to the start; bindings are kept */
int agentmem_finalize(agentmem_stmt *pStmt);   /* NULL is a no-op */
int agentmem_clear_bindings(agentmem_stmt *pStmt);

int agentmem_bind_parameter_count(agentmem_stmt *pStmt);
/* The index of a named parameter (":name", "@name" or "$name"); 0 if none. */
int agentmem_bind_parameter_index(agentmem_stmt *pStmt, const char *zName);
int agentmem_bind_null(agentmem_stmt *pStmt, int i);
int agentmem_bind_int64(agentmem_stmt *pStmt, int i, int64_t v);
int agentmem_bind_double(agentmem_stmt *pStmt, int i, double v);
/* Text and blobs are copied; n < 0 for text means up to the NUL. */
int agentmem_bind_text(agentmem_stmt *pStmt, int i, const char *z, int n);
int agentmem_bind_blob(agentmem_stmt *pStmt, int i, const void *p, int n);

/* Result columns of the current row. Pointers stay valid until the next
** step, reset or finalize of the statement. */
int agentmem_column_count(agentmem_stmt *pStmt);
const char *agentmem_column_name(agentmem_stmt *pStmt, int i);
int agentmem_column_type(agentmem_stmt *pStmt, int i);
int64_t agentmem_column_int64(agentmem_stmt *pStmt, int i);
double agentmem_column_double(agentmem_stmt *pStmt, int i);
const unsigned char *agentmem_column_text(agentmem_stmt *pStmt, int i);
const void *agentmem_column_blob(agentmem_stmt *pStmt, int i);
int agentmem_column_bytes(agentmem_stmt *pStmt, int i);

/* The handle a statement belongs to; the rows the last INSERT, UPDATE or
** DELETE on the handle changed. */
agentmem_db *agentmem_db_handle(agentmem_stmt *pStmt);
int64_t agentmem_changes(agentmem_db *db);

/* ---------------------------------------------------------------- memory: context, profile, export */
/* docs/memory.md states the rules in full. */

#define AGENTMEM_CONTEXT_BLOCK   1  /* a pinned block */
#define AGENTMEM_CONTEXT_FACT    2  /* a current fact */
#define AGENTMEM_CONTEXT_EPISODE 3  /* a recalled episode */

/* One item of an assembled context. */
typedef struct agentmem_context_item {
  int kind;             /* AGENTMEM_CONTEXT_BLOCK / _FACT / _EPISODE */
  int64_t id;           /* block version, fact id or episode id */
  const char *name;     /* the block's name; "" for facts and episodes */
  const char *text;     /* block value, "subject predicate object", or episode text */
  int tokens;           /* the token estimate of text: ceil(UTF-8 bytes / 4) */
  const char *reason;   /* why it was included, e.g. "recall rank 3: bm25 #1, vector #4" */
} agentmem_context_item;

/* Assemble the context for user_id, query and token_budget: the user's pinned
** blocks (pinned_order >= 0, in that order), then current facts (valid now and
** not superseded, most relevant to the query first), then episodes by hybrid
** recall of the query -- only those that match it, as agentmem_recall()'s
** defaults decide -- each at most once. Items are taken in that order; one
** whose tokens exceed what is left of the budget is skipped and later, smaller
** ones may still fit, so the tokens never sum to more than token_budget.
** On AGENTMEM_OK *paItems is an array of *pnItems items in context order, one
** allocation freed with agentmem_free() (NULL when *pnItems is 0). On failure
** *paItems is NULL and *pnItems 0; codes: AGENTMEM_MISUSE (NULL arguments),
** AGENTMEM_RANGE (negative budget), and the codes of agentmem_recall(). */
int agentmem_context(agentmem_db *db, const char *user_id, const char *query, int token_budget,
                     agentmem_context_item **paItems, int *pnItems);

/* A JSON object summarising user_id's memory: counts (episodes, sessions,
** blocks, block versions, facts, current facts), the event-time span of the
** episodes, episodes per role and the top current facts by confidence. On
** AGENTMEM_OK *pzJson is freed with agentmem_free(); on failure it is NULL. */
int agentmem_profile(agentmem_db *db, const char *user_id, char **pzJson);

/* Export user_id's whole memory as JSON lines (one header line, then every
** episode, block version and fact; docs/export.md gives every field). user_id
** NULL exports the whole file: every user, and the file's settings (declared
** predicates, retention) -- a backup that agentmem_import() restores. Two
** files holding the same memory export the same bytes. On AGENTMEM_OK
** *pzJsonl is freed with agentmem_free(); on failure it is NULL. */
int agentmem_export(agentmem_db *db, const char *user_id, char **pzJsonl);

/* Import what agentmem_export() produced (one user's memory or a whole file;
** several exports may be concatenated). Idempotent: records already present
** and identical are skipped, so importing the same text twice adds nothing
** the second time. Ids, block versions, times and provenance are kept, and
** so are a whole file's settings and next ids (docs/export.md). Every line is checked before anything
** is written, then all are written in one transaction (the caller's when one
** is open, else its own). On AGENTMEM_OK *pnAdded (if not NULL) receives the
** number of records written. Failures write nothing: AGENTMEM_MISMATCH_JSON
** (a malformed line; the message names it), AGENTMEM_MISMATCH (the export's
** vector space or tokenizer differs from the file's), AGENTMEM_CONSTRAINT (an id already
** holds different content), and the codes of agentmem_remember(). */
int agentmem_import(agentmem_db *db, const char *zJsonl, int64_t *pnAdded);

/* Flags of agentmem_import_v2(). */
#define AGENTMEM_IMPORT_NEW_IDS 0x01  /* give episodes and facts this file's next ids */

/* agentmem_import() with flags (0: the same). With AGENTMEM_IMPORT_NEW_IDS,
** episodes and facts are written under this file's next ids instead of their
** exported ones -- to merge a user's memory into a file whose ids have moved
** on -- and fact sources are renumbered with their episodes (a source not in
** the import is dropped). Still idempotent: an episode is present when the
** user has one with the same session, role, text, times, metadata and vector;
** a fact when the user has one equal to it but for the id. Other flags:
** AGENTMEM_MISUSE. Codes otherwise as agentmem_import(). */
int agentmem_import_v2(agentmem_db *db, const char *zJsonl, int flags, int64_t *pnAdded);

/* ---------------------------------------------------------------- memory: Markdown */
/* docs/markdown.md is the layout, line by line, and the rules of the import. */

/* user_id's memory as a Markdown document a person reads and edits
** (MEMORY.md): the blocks (pinned ones first, by pinned_order), the facts
** the file holds as current knowledge with their valid time, as a table, and
** every session with its episodes, newest session first. A user with no
** memory gets the headings alone. On AGENTMEM_OK *pzMarkdown is freed with
** agentmem_free(); on failure it is NULL. */
int agentmem_export_markdown(agentmem_db *db, const char *user_id, char **pzMarkdown);

/* Read an edited agentmem_export_markdown() document back into user_id's
** memory (the title's user is not read). A block whose value, pin or limit
** differs from its current version becomes a new version; a fact row that is
** new, or differs from the fact its id names, is asserted -- the fact it
** names is superseded in transaction time, not lost. Nothing else is
** written: removed lines, sessions and episodes change nothing (forgetting
** is agentmem_forget_*), and a document read back unchanged writes nothing.
** Every line is checked before anything is written, then all is written in
** one transaction (the caller's when one is open, else its own). On
** AGENTMEM_OK *pzReport (when pzReport is not NULL) is a JSON object, freed
** with agentmem_free(): "block_versions", "blocks_unchanged",
** "facts_asserted", "facts_superseded", "facts_unchanged" and "changes", one
** entry per write with its line. On failure nothing is written, *pzReport is
** NULL and the message names the line ("markdown line 12: ..."); codes:
** AGENTMEM_MISMATCH (the layout), AGENTMEM_MISMATCH_UTF8, AGENTMEM_NOTFOUND
** (a fact id that is not one of the user's facts), AGENTMEM_CONSTRAINT (a
** block over its limit), AGENTMEM_RANGE, and the codes of
** agentmem_block_set() and agentmem_fact_assert(). */
int agentmem_import_markdown(agentmem_db *db, const char *user_id, const char *zMarkdown,
                             char **pzReport);

#ifdef __cplusplus
}
#endif

#endif /* AGENTMEM_H */

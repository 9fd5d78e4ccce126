"""Memory: the agent-framework adapter -- episodes per user, hybrid recall with scores, facts
on both time axes, blocks, forgetting, retention, context, export and profile -- over one
.agentmem file.

Every method is async and runs its blocking C calls off the event loop (in the
executor given to Memory, by default the loop's); each has a sync twin named
<method>_sync that does the work. Times are unix microseconds (int) as in the
C API; a datetime is accepted wherever a time goes in.
"""

import array
import asyncio
import ctypes
import datetime
import functools
import json
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from . import _capi, _embedder
from ._handle import Handle, cstr, text
from .dbapi import Connection
from .errors import MissingFunctionError, NotFoundError, NulCharacterError

SCHEME = "agentmem:"
RECALL_OPTIONS = {"k", "mode", "session_id", "role", "ts_from", "ts_to", "half_life_s",
                  "min_score", "rrf_k", "query_vector", "metadata", "all_users", "fill",
                  "min_similarity", "min_bm25"}


# ---------------------------------------------------------------- records

@dataclass(frozen=True)
class Episode:
    id: int
    user_id: str
    session_id: str
    role: str
    text: str
    ts: int            # event time, unix microseconds
    created_at: int    # commit time
    metadata: object   # the metadata JSON, decoded; None when the episode has none
    vector: tuple = field(repr=False, default=())


@dataclass(frozen=True)
class Match:
    """One recall hit: the episode and why it was found (agentmem_hit)."""
    id: int
    user_id: str
    session_id: str
    role: str
    text: str
    ts: int
    score: float         # fused score (docs/recall.md), times the recency weight
    bm25_score: float    # 0 when not in the BM25 list
    vector_score: float  # 0 when not in the vector list
    bm25_rank: int       # 1-based; 0 = not in that list
    vector_rank: int

    def __str__(self):
        """One line: id, fused score, each list's rank and score ("-": not in it), text."""
        bm25 = f"#{self.bm25_rank} {self.bm25_score:.3f}" if self.bm25_rank else "-"
        vector = f"#{self.vector_rank} {self.vector_score:.3f}" if self.vector_rank else "-"
        return f"{self.id}  score {self.score:.4f}  bm25 {bm25}  vector {vector}  {self.text}"


@dataclass(frozen=True)
class Block:
    user_id: str
    name: str
    value: str
    limit: int                 # maximum characters; 0 = none
    pinned_order: object       # int, or None when not pinned
    updated_at: int
    version: int


@dataclass(frozen=True)
class Fact:
    id: int
    user_id: str
    subject: str
    predicate: str
    object: str
    confidence: float
    source_episode_ids: tuple
    valid_from: int
    valid_to: object     # int, or None while still valid
    recorded_at: int
    expired_at: object   # int, or None while not superseded


@dataclass(frozen=True)
class Receipt:
    """What a forget, purge or vacuum did (agentmem_receipt)."""
    episodes: int          # episodes forgotten
    facts: int             # facts forgotten (with those citing only forgotten episodes)
    block_versions: int    # block versions forgotten
    vacuumed: bool         # the file was rewritten
    bytes_before: int      # file size before the rewrite
    bytes_after: int       # and after
    needles: int           # purge: forgotten texts and vectors searched for in the new file
    residue: int           # of them, found: 0 = nothing of the forgotten data remains


@dataclass(frozen=True)
class ContextItem:
    kind: str     # "block", "fact" or "episode"
    id: int       # block version, fact id or episode id
    name: str     # the block's name; "" for facts and episodes
    text: str
    tokens: int
    reason: str


def micros(value):
    """Unix microseconds from an int (already microseconds) or a datetime; None stays None."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, datetime.datetime):  # naive: local time, as datetime.timestamp()
        aware = value if value.tzinfo is not None else value.astimezone()
        return (aware - _EPOCH) // datetime.timedelta(microseconds=1)
    raise TypeError(f"a time must be int microseconds or a datetime, not {type(value).__name__}")


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _open_end(value):
    return None if value == _capi.INT64_MAX else value


def _episode(ep):
    meta = text(ep.metadata)
    return Episode(ep.id, text(ep.user_id), text(ep.session_id), text(ep.role), text(ep.text),
                   ep.ts, ep.created_at, json.loads(meta) if meta else None,
                   tuple(ep.vector[:ep.dim]) if ep.vector else ())


def _match(h):
    return Match(h.id, text(h.user_id), text(h.session_id), text(h.role), text(h.text), h.ts,
                 h.score, h.bm25_score, h.vector_score, h.bm25_rank, h.vector_rank)


def _block(b):
    return Block(text(b.user_id), text(b.name), text(b.value), b.limit,
                 None if b.pinned_order < 0 else b.pinned_order, b.updated_at, b.version)


def _fact(f):
    return Fact(f.id, text(f.user_id), text(f.subject), text(f.predicate), text(f.object),
                f.confidence, tuple(f.source_episode_ids[:f.n_sources]), f.valid_from,
                _open_end(f.valid_to), f.recorded_at, _open_end(f.expired_at))


def _fact_row(row):
    """A Fact from a row of the SQL facts table / facts_as_of() (NULL = open-ended)."""
    (id_, user_id, subject, predicate, obj, confidence, sources, valid_from, valid_to,
     recorded_at, expired_at) = row
    return Fact(id_, user_id, subject, predicate, obj, confidence, tuple(json.loads(sources)),
                valid_from, valid_to, recorded_at, expired_at)


def _floats(vector):
    """(pointer, dim) for a sequence of floats (None -> (NULL, 0))."""
    if vector is None:
        return None, 0
    arr = (ctypes.c_float * len(vector))(*vector)
    return ctypes.cast(arr, ctypes.POINTER(ctypes.c_float)), len(vector)


def _refuse_nul(jsonl):
    """A NUL in JSONL text would end the C string there: refuse it, naming its line."""
    if isinstance(jsonl, (str, bytes)):
        nul = jsonl.find("\0" if isinstance(jsonl, str) else b"\0")
        if nul >= 0:
            line = jsonl.count("\n" if isinstance(jsonl, str) else b"\n", 0, nul) + 1
            raise NulCharacterError(f"import line {line}: a NUL character, which no JSON text "
                                    "holds (nothing was imported)")


def _async_twin(sync_method):
    """The async method that runs sync_method in the Memory's executor."""
    name = sync_method.__name__.removesuffix("_sync")

    @functools.wraps(sync_method)
    async def method(self, *args, **kwargs):
        loop = asyncio.get_running_loop()
        call = functools.partial(sync_method, self, *args, **kwargs)
        return await loop.run_in_executor(self.executor, call)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Async {name}: runs {sync_method.__name__}() off the event loop.\n\n" + \
        (sync_method.__doc__ or "")
    return method


class Memory:
    """An agent's memory in one .agentmem file. Thread-safe and asyncio-safe.

    Memory(path, **open_options) opens (creating) the file; resolve(url) does
    the same from "agentmem:./bot.agentmem". `connection` is a DB-API
    connection on the same handle, for SQL (docs/sql.md).

    embedder: a function fn(list[str]) -> one vector per text (lists of floats
    or an array shaped (n, dim); sentence-transformers' model.encode fits as
    is), registered with agentmem_create_embedder: episodes remembered without
    a vector and recalls without a query_vector call it. The file's vector
    space is (embedder_name, vector_dim, vector_metric): embedder_name
    defaults to fn's `name` attribute or its qualified name, vector_dim to the
    model's dimension (one probe call of fn when it cannot tell), vector_metric
    to "cosine"; an existing file must record the same, or the open fails
    (DataError). A string embedder is the open option: the name alone.
    """

    def __init__(self, path, *, readonly=False, create=True, executor=None, embedder=None,
                 embedder_name=None, **options):
        callback = None
        if callable(embedder):
            name = embedder_name or _embedder.default_name(embedder)
            dim = options.get("vector_dim")
            dim = int(dim) if dim is not None else _embedder.probe_dimension(embedder)
            metric = options.get("vector_metric") or "cosine"
            if metric not in _capi.METRICS:
                raise ValueError(f"vector_metric must be one of {', '.join(_capi.METRICS)}, "
                                 f"not {metric!r}")
            options = dict(options, embedder=name, vector_dim=dim, vector_metric=metric)
            callback = _embedder.CallbackEmbedder(embedder, dim)
        else:
            if embedder_name is not None:
                raise TypeError("embedder_name names a callable embedder=; pass one")
            if embedder is not None:
                options = dict(options, embedder=embedder)
        self._handle = Handle(path, readonly=readonly, create=create, options=options)
        self.connection = Connection(self._handle)
        self.executor = executor
        if callback is not None:
            try:
                self._handle.call("agentmem_create_embedder", cstr(options["embedder"], "embedder"),
                                  callback.dim, _capi.METRICS[metric], callback.c_function,
                                  None, None, method="Memory(embedder=fn)")
            except BaseException:
                self.close()
                raise
            self._handle.embedder = callback

    @property
    def embedder(self):
        """The registered embedding function's wrapper (calls, error), or None."""
        return self._handle.embedder

    @property
    def path(self):
        return self._handle.path

    # ---------------------------------------------------------------- episodes
    def remember_sync(self, user_id, text, *, session_id="", role="user", ts=None,
                      metadata=None, vector=None):
        """Remember one episode (turn); returns its id. metadata: a JSON-able value or JSON text."""
        if metadata is not None and not isinstance(metadata, str):
            metadata = json.dumps(metadata)
        vec, dim = _floats(vector)
        out = ctypes.c_int64()
        self._handle.call("agentmem_remember", cstr(user_id, "user_id"),
                          cstr(session_id, "session_id"), cstr(role, "role"),
                          cstr(text, "text"), micros(ts) or 0, cstr(metadata, "metadata"),
                          vec, dim, ctypes.byref(out))
        return out.value

    def remember_many_sync(self, user_id, texts, **kwargs):
        """Remember several episodes in one transaction (one commit); returns their ids."""
        with self._handle.lock:
            with self.connection:
                return [self.remember_sync(user_id, t, **kwargs) for t in texts]

    def get_episode_sync(self, episode_id):
        """The episode with this id, or None."""
        return self._get_one("agentmem_episode_get", _capi.Episode, _episode, episode_id)

    def episodes_sync(self, user_id, session_id=None):
        """A user's episodes by event time (ts), ties by id (one session's when given)."""
        return self._cursor_rows("agentmem_episodes", "agentmem_cursor_episode", _episode,
                                 cstr(user_id, "user_id"), cstr(session_id, "session_id"))

    # ---------------------------------------------------------------- recall
    def recall_scored_sync(self, user_id, query, k=10, **options):
        """Hybrid recall, best first, as Match records with per-list scores and ranks.

        Options (keywords): mode="hybrid" | "bm25" | "vector"; session_id, role;
        ts_from, ts_to (event time in [ts_from, ts_to)); half_life_s (recency
        weighting); min_score; rrf_k; query_vector (floats, for files with an
        external embedder and no embedder= function); metadata=(key, value):
        episodes whose metadata holds the JSON-able value at key (a key or a
        JSON pointer "/a/b"); all_users. Only episodes that match come back (a
        BM25 hit, or a vector similarity at the embedder's floor): min_bm25,
        min_similarity (cosine / dot product / minus squared L2; float("-inf")
        = no floor) set the thresholds; fill=True gives always k hits, the
        unmatched ones after the matches in id order with score 0.
        """
        opts, keep = self._recall_options(dict(options, k=k))
        cur = ctypes.c_void_p()
        with self._handle.lock:
            self._handle.call("agentmem_recall", cstr(user_id or "", "user_id"),
                              cstr(query, "query"), ctypes.byref(opts), ctypes.byref(cur))
            return self._handle.rows(cur, "agentmem_cursor_hit", _match)

    def recall_sync(self, user_id, query, k=10, **options):
        """The episodes recall_scored() finds, in its order, as full Episode records."""
        with self._handle.lock:
            found = [self.get_episode_sync(m.id)
                     for m in self.recall_scored_sync(user_id, query, k, **options)]
        return [ep for ep in found if ep is not None]

    def explain_recall_sync(self, user_id, query, k=10, **options):
        """EXPLAIN RECALL: the plan and per-list ranks of the same recall, as a dict."""
        opts, keep = self._recall_options(dict(options, k=k))
        plan = ctypes.c_void_p()
        with self._handle.lock:
            self._handle.call("agentmem_explain_recall", cstr(user_id or "", "user_id"),
                              cstr(query, "query"), ctypes.byref(opts), ctypes.byref(plan))
            return json.loads(self._handle.lib.take_string(plan.value))

    def _recall_options(self, a):
        """agentmem_recall_options from recall_scored's arguments, and the buffers it points to."""
        unknown = set(a) - RECALL_OPTIONS
        if unknown:
            raise TypeError(f"unknown recall option(s): {', '.join(sorted(unknown))}")
        opts = _capi.RecallOptions()
        self._handle.fn.agentmem_recall_options_init(ctypes.byref(opts))
        opts.k = a.get("k", 10)
        mode = a.get("mode", "hybrid")
        if mode not in _capi.RECALL_MODES:
            raise ValueError(f"mode must be one of {', '.join(_capi.RECALL_MODES)}, not {mode!r}")
        opts.mode = _capi.RECALL_MODES[mode]
        opts.all_users = int(bool(a.get("all_users")))
        opts.session_id = cstr(a.get("session_id"), "session_id")
        opts.role = cstr(a.get("role"), "role")
        if a.get("ts_from") is not None:
            opts.ts_from = micros(a["ts_from"])
        if a.get("ts_to") is not None:
            opts.ts_to = micros(a["ts_to"])
        opts.half_life_s = a.get("half_life_s") or 0.0
        opts.min_score = a.get("min_score") or 0.0
        opts.fill = int(bool(a.get("fill")))
        if a.get("min_similarity") is not None:
            opts.min_similarity = float(a["min_similarity"])
        if a.get("min_bm25") is not None:
            opts.min_bm25 = float(a["min_bm25"])
        if a.get("rrf_k") is not None:
            opts.rrf_k = a["rrf_k"]
        keep = None
        if a.get("query_vector") is not None:
            keep = array.array("f", a["query_vector"])
            ptr, _ = keep.buffer_info()
            opts.query_vector = ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float))
            opts.query_dim = len(keep)
        if a.get("metadata") is not None:
            key, value = a["metadata"]
            opts.metadata_key = cstr(key, "metadata key")
            opts.metadata_value = cstr(json.dumps(value), "metadata value")
        return opts, keep

    # ---------------------------------------------------------------- facts
    def add_fact_sync(self, user_id, subject, predicate, object, *, confidence=1.0,
                      valid_from=None, valid_to=None, sources=()):
        """Assert (subject, predicate, object) for user_id; returns the fact id.

        valid_from None = now; valid_to None = open-ended; sources: episode ids.
        """
        ids = (ctypes.c_int64 * len(sources))(*sources)
        out = ctypes.c_int64()
        self._handle.call("agentmem_fact_assert", cstr(user_id, "user_id"),
                          cstr(subject, "subject"), cstr(predicate, "predicate"),
                          cstr(object, "object"), float(confidence), micros(valid_from) or 0,
                          micros(valid_to) or 0, ids if sources else None, len(sources),
                          ctypes.byref(out))
        return out.value

    def recall_facts_sync(self, user_id, subject=None, predicate=None, object=None, *,
                          valid_at=None, known_at=None, all_versions=False):
        """The user's facts valid at valid_at as the file knew them at known_at, in id order.

        valid_at, known_at: None = now, so the default is the current facts.
        subject, predicate, object: None = any. all_versions: every record on
        both time axes (superseded ones too), no time filter. Runs
        agentmem_facts_v2 (an index lookup); a library without it is asked
        through SQL facts_as_of(user_id, valid_at), which knows no known_at.
        """
        if self._handle.lib.has("agentmem_facts_v2"):
            flags = _capi.FACTS_ALL_VERSIONS if all_versions else 0
            return self._cursor_rows(
                "agentmem_facts_v2", "agentmem_cursor_fact", _fact, cstr(user_id, "user_id"),
                cstr(subject, "subject"), cstr(predicate, "predicate"), cstr(object, "object"),
                micros(valid_at) or 0, micros(known_at) or 0, flags)
        if known_at is not None or all_versions:
            raise MissingFunctionError("agentmem_facts_v2",
                                       "Memory.recall_facts(known_at=..., all_versions=...)")
        sql = ("SELECT id, user_id, subject, predicate, object, confidence, source_episode_ids,"
               " valid_from, valid_to, recorded_at, expired_at FROM facts_as_of(?, ?)"
               " WHERE (?3 IS NULL OR subject = ?3) AND (?4 IS NULL OR predicate = ?4)"
               " AND (?5 IS NULL OR object = ?5) ORDER BY id")
        rows = self.connection.execute(
            sql, (user_id, micros(valid_at), subject, predicate, object)).fetchall()
        return [_fact_row(r) for r in rows]

    def declare_predicate_sync(self, predicate, single_valued=True):
        """Make predicate single-valued (for every user): a new object supersedes the current one."""
        self._handle.call("agentmem_predicate_declare", cstr(predicate, "predicate"),
                          int(bool(single_valued)), method="Memory.declare_predicate")

    def facts_sync(self, user_id, subject=None, predicate=None):
        """Every fact record of the user (current, closed and superseded), in id order."""
        return self._cursor_rows("agentmem_facts", "agentmem_cursor_fact", _fact,
                                 cstr(user_id, "user_id"), cstr(subject, "subject"),
                                 cstr(predicate, "predicate"))

    # ---------------------------------------------------------------- blocks
    def set_block_sync(self, user_id, name, value, *, limit=0, pinned_order=None):
        """Write a new version of block (user_id, name); limit is in characters (0 = none)."""
        self._handle.call("agentmem_block_set", cstr(user_id, "user_id"), cstr(name, "name"),
                          cstr(value, "value"), limit, -1 if pinned_order is None else pinned_order)

    def get_block_sync(self, user_id, name):
        """The current version of block (user_id, name), or None when there is none."""
        return self._get_one("agentmem_block_get", _capi.Block, _block,
                             cstr(user_id, "user_id"), cstr(name, "name"))

    def blocks_sync(self, user_id):
        """The current version of each of the user's blocks, by name."""
        return self._cursor_rows("agentmem_blocks", "agentmem_cursor_block", _block,
                                 cstr(user_id, "user_id"))

    # ---------------------------------------------------------------- lifecycle
    def context_sync(self, user_id, query, token_budget):
        """Pinned blocks, current facts, then recalled episodes within token_budget."""
        items, n = ctypes.POINTER(_capi.ContextItem)(), ctypes.c_int()
        self._handle.call("agentmem_context", cstr(user_id, "user_id"), cstr(query, "query"),
                          token_budget, ctypes.byref(items), ctypes.byref(n),
                          method="Memory.context")
        try:
            return [ContextItem(_capi.CONTEXT_KINDS.get(it.kind, str(it.kind)), it.id,
                                text(it.name), text(it.text), it.tokens, text(it.reason))
                    for it in items[:n.value]]
        finally:
            self._handle.fn.agentmem_free(items)

    def profile_sync(self, user_id):
        """A summary of the user's memory (counts, sessions, time span, top facts), as a dict."""
        return json.loads(self._string_call("agentmem_profile", "Memory.profile",
                                            cstr(user_id, "user_id")))

    def export_sync(self, user_id=None):
        """The user's whole memory as JSON lines (str), as agentmem_export() writes it;
        user_id None: the whole file (a backup; docs/export.md)."""
        return self._string_call("agentmem_export", "Memory.export", cstr(user_id, "user_id"))

    def import_jsonl_sync(self, jsonl, *, new_ids=False):
        """Import what export() produced; idempotent. Returns the number of records written.

        new_ids: write episodes and facts under this file's next ids (to merge a
        user's memory into a file whose ids have moved on; agentmem_import_v2).
        """
        _refuse_nul(jsonl)
        added = ctypes.c_int64()
        if new_ids:
            self._handle.call("agentmem_import_v2", cstr(jsonl, "jsonl"), _capi.IMPORT_NEW_IDS,
                              ctypes.byref(added), method="Memory.import_jsonl(new_ids=True)")
        else:
            self._handle.call("agentmem_import", cstr(jsonl, "jsonl"), ctypes.byref(added),
                              method="Memory.import_jsonl")
        return added.value

    def export_markdown_sync(self, user_id):
        """The user's memory as a Markdown document (str) a person reads and edits: blocks,
        current facts with their valid time, sessions with their episodes (docs/markdown.md)."""
        return self._string_call("agentmem_export_markdown", "Memory.export_markdown",
                                 cstr(user_id, "user_id"))

    def import_markdown_sync(self, user_id, markdown):
        """Read an edited export_markdown() document back; returns the report (a dict).

        Changed blocks become new block versions; new or edited fact rows are asserted,
        an edited one superseding the fact it names. Removed lines and the sessions change
        nothing; an unchanged document writes nothing. All or nothing: an error names the
        line ("markdown line 12: ...") and writes nothing.
        """
        nul, nl = ("\0", "\n") if isinstance(markdown, str) else (b"\0", b"\n")
        if isinstance(markdown, (str, bytes)) and nul in markdown:
            line = markdown.count(nl, 0, markdown.index(nul)) + 1
            raise NulCharacterError(f"markdown line {line}: holds a NUL byte")
        return json.loads(self._string_call("agentmem_import_markdown", "Memory.import_markdown",
                                            cstr(user_id, "user_id"),
                                            cstr(markdown, "markdown")))

    def forget_sync(self, user_id, session_id=None, before=None, *, purge=False):
        """Forget a user's memory: all of it, one session's episodes, or the episodes before a time.

        Invisible to every read from the commit on; purge=True also rewrites the
        file without the bytes and proves it (Receipt.residue == 0). Facts whose
        every source episode is forgotten go with them.
        """
        return self._receipt_call("agentmem_forget", "Memory.forget", cstr(user_id, "user_id"),
                                  cstr(session_id, "session_id"), micros(before) or 0,
                                  _capi.FORGET_PURGE if purge else 0)

    def forget_episode_sync(self, episode_id, *, purge=False):
        """Forget one episode."""
        return self._receipt_call("agentmem_forget_episode", "Memory.forget_episode", episode_id,
                                  _capi.FORGET_PURGE if purge else 0)

    def forget_fact_sync(self, fact_id, *, purge=False):
        """Forget one fact record."""
        return self._receipt_call("agentmem_forget_fact", "Memory.forget_fact", fact_id,
                                  _capi.FORGET_PURGE if purge else 0)

    def forget_block_sync(self, user_id, name, *, purge=False):
        """Forget every version of one block."""
        return self._receipt_call("agentmem_forget_block", "Memory.forget_block",
                                  cstr(user_id, "user_id"), cstr(name, "name"),
                                  _capi.FORGET_PURGE if purge else 0)

    def set_retention_sync(self, max_age, *, keep_cited=False):
        """Store a retention policy in the file: episodes older than max_age are forgotten.

        max_age: seconds or a timedelta, of event time (ts); 0 or None keeps
        episodes forever. keep_cited: spare episodes a live fact cites. Applied
        when a writable handle closes and before a vacuum; blocks and facts never expire.
        """
        if isinstance(max_age, datetime.timedelta):
            max_age = max_age // datetime.timedelta(seconds=1)
        self._handle.call("agentmem_retention_set", int(max_age or 0), int(bool(keep_cited)),
                          method="Memory.set_retention")

    def retention_sync(self):
        """The file's retention policy: (max_age_seconds, keep_cited); (0, False) = keep forever."""
        max_age, keep_cited = ctypes.c_int64(), ctypes.c_int()
        self._handle.call("agentmem_retention_get", ctypes.byref(max_age),
                          ctypes.byref(keep_cited), method="Memory.retention")
        return max_age.value, bool(keep_cited.value)

    def vacuum_sync(self):
        """Rewrite the file with only the live records (other handles move over on their next read)."""
        return self._receipt_call("agentmem_vacuum", "Memory.vacuum")

    # ---------------------------------------------------------------- misc
    def stats_sync(self):
        """Figures of the current snapshot (agentmem_stats) as a dict."""
        st = _capi.Stats()
        self._handle.call("agentmem_stats_get", ctypes.byref(st))
        return {name: getattr(st, name) for name, _ in _capi.Stats._fields_}

    def _get_one(self, function, struct, convert, *args):
        """One record through a C getter that allocates it (None on AGENTMEM_NOTFOUND)."""
        ptr = ctypes.POINTER(struct)()
        try:
            self._handle.call(function, *args, ctypes.byref(ptr))
        except NotFoundError:
            return None
        try:
            return convert(ptr.contents)
        finally:
            self._handle.fn.agentmem_free(ptr)

    def _cursor_rows(self, function, accessor, convert, *args):
        cur = ctypes.c_void_p()
        with self._handle.lock:
            self._handle.call(function, *args, ctypes.byref(cur))
            return self._handle.rows(cur, accessor, convert)

    def _receipt_call(self, function, method, *args):
        receipt = _capi.Receipt()
        self._handle.call(function, *args, ctypes.byref(receipt), method=method)
        return Receipt(receipt.episodes, receipt.facts, receipt.block_versions,
                       bool(receipt.vacuumed), receipt.bytes_before, receipt.bytes_after,
                       receipt.needles, receipt.residue)

    def _string_call(self, function, method, *args):
        out = ctypes.c_void_p()
        self._handle.call(function, *args, ctypes.byref(out), method=method)
        return self._handle.lib.take_string(out.value)

    # async twins of every *_sync method
    remember = _async_twin(remember_sync)
    remember_many = _async_twin(remember_many_sync)
    get_episode = _async_twin(get_episode_sync)
    episodes = _async_twin(episodes_sync)
    recall = _async_twin(recall_sync)
    recall_scored = _async_twin(recall_scored_sync)
    explain_recall = _async_twin(explain_recall_sync)
    add_fact = _async_twin(add_fact_sync)
    recall_facts = _async_twin(recall_facts_sync)
    facts = _async_twin(facts_sync)
    set_block = _async_twin(set_block_sync)
    get_block = _async_twin(get_block_sync)
    blocks = _async_twin(blocks_sync)
    context = _async_twin(context_sync)
    profile = _async_twin(profile_sync)
    export = _async_twin(export_sync)
    import_jsonl = _async_twin(import_jsonl_sync)
    export_markdown = _async_twin(export_markdown_sync)
    import_markdown = _async_twin(import_markdown_sync)
    declare_predicate = _async_twin(declare_predicate_sync)
    forget = _async_twin(forget_sync)
    forget_episode = _async_twin(forget_episode_sync)
    forget_fact = _async_twin(forget_fact_sync)
    forget_block = _async_twin(forget_block_sync)
    vacuum = _async_twin(vacuum_sync)
    set_retention = _async_twin(set_retention_sync)
    retention = _async_twin(retention_sync)
    stats = _async_twin(stats_sync)

    # ---------------------------------------------------------------- closing
    def close(self):
        """Close the file (waits for a call in progress); later calls raise ProgrammingError."""
        self.connection.close()

    async def aclose(self):
        await asyncio.get_running_loop().run_in_executor(self.executor, self.close)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()
        return False

    def __repr__(self):
        return f"<agentmem.Memory {self.path!r}>"


def resolve(url, **options):
    """A Memory for a URL "agentmem:PATH[?key=value&...]", e.g. "agentmem:./bot.agentmem".

    The query string gives open options (sync=normal, vector_dim=1536, ...);
    "agentmem::memory:" is a private in-memory database.
    """
    if not isinstance(url, str) or not url.startswith(SCHEME):
        raise ValueError(f"not an agentmem URL: {url!r} (expected {SCHEME}PATH, e.g. "
                         f"{SCHEME}./bot.agentmem)")
    path, _, query = url[len(SCHEME):].partition("?")
    if path.startswith("//"):
        path = path[2:]  # agentmem:///abs/path
    if not path:
        raise ValueError(f"agentmem URL without a path: {url!r}")
    return Memory(path, **dict(parse_qsl(query, strict_parsing=bool(query))), **options)

"""Finding and loading libagentmem, and the ctypes declarations of its C API.

The layouts below mirror include/agentmem.h field by field; ctypes applies the
platform's C alignment rules, so they match the C structs as long as they are
declared in the header's order. The library is loaded on first use, not at
import, so that ``import agentmem`` works (and can explain) without it.

Lookup order (docs/python.md):
  1. the ``AGENTMEM_LIB`` environment variable: a file, or a folder holding
     libagentmem.so. When it is set, nothing else is tried: an explicit choice
     that fails is an error, never silently replaced by another library;
  2. the package's own folder (agentmem/libagentmem.so), where the wheel
     that ``pip install .`` builds puts it;
  3. the build tree of the repository this package sits in
     (<repo>/build/engine/libagentmem.so, where ``make build`` puts it);
  4. the system's library path (ctypes.util.find_library, LD_LIBRARY_PATH,
     ld.so.cache): libagentmem.so.0, then libagentmem.so.
"""

import ctypes
import ctypes.util
import os
import threading
from pathlib import Path

from .errors import LibraryNotFoundError

ENV_VAR = "AGENTMEM_LIB"
LIB_FILE = "libagentmem.so"

c_int, c_int64, c_double, c_char_p, c_void_p = (
    ctypes.c_int, ctypes.c_int64, ctypes.c_double, ctypes.c_char_p, ctypes.c_void_p)
P = ctypes.POINTER

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

# Result codes used by the wrapper itself (the full list is in errors.py).
OK, ROW, DONE, MISUSE, NOTFOUND = 0, 100, 101, 10, 14

OPEN_READONLY, OPEN_READWRITE, OPEN_CREATE = 0x01, 0x02, 0x04
RECALL_MODES = {"hybrid": 0, "bm25": 1, "vector": 2}
RECALL_OPTIONS_VERSION = 2
COLUMN_INTEGER, COLUMN_FLOAT, COLUMN_TEXT, COLUMN_BLOB, COLUMN_NULL = 1, 2, 3, 4, 5


class Episode(ctypes.Structure):
    _fields_ = [("id", c_int64), ("user_id", c_char_p), ("session_id", c_char_p),
                ("role", c_char_p), ("text", c_char_p), ("ts", c_int64),
                ("created_at", c_int64), ("metadata", c_char_p),
                ("vector", P(ctypes.c_float)), ("dim", c_int)]


class Block(ctypes.Structure):
    _fields_ = [("user_id", c_char_p), ("name", c_char_p), ("value", c_char_p),
                ("limit", c_int), ("pinned_order", c_int), ("updated_at", c_int64),
                ("version", c_int64)]


class Fact(ctypes.Structure):
    _fields_ = [("id", c_int64), ("user_id", c_char_p), ("subject", c_char_p),
                ("predicate", c_char_p), ("object", c_char_p), ("confidence", c_double),
                ("source_episode_ids", P(c_int64)), ("n_sources", c_int),
                ("valid_from", c_int64), ("valid_to", c_int64),
                ("recorded_at", c_int64), ("expired_at", c_int64)]


class RecallOptions(ctypes.Structure):
    _fields_ = [("version", c_int), ("k", c_int), ("mode", c_int), ("all_users", c_int),
                ("session_id", c_char_p), ("role", c_char_p),
                ("ts_from", c_int64), ("ts_to", c_int64),
                ("query_vector", P(ctypes.c_float)), ("query_dim", c_int),
                ("half_life_s", c_double), ("min_score", c_double), ("rrf_k", c_int),
                ("metadata_key", c_char_p), ("metadata_value", c_char_p),
                # version 2
                ("fill", c_int), ("min_similarity", c_double), ("min_bm25", c_double)]


class Hit(ctypes.Structure):
    _fields_ = [("id", c_int64), ("user_id", c_char_p), ("session_id", c_char_p),
                ("role", c_char_p), ("text", c_char_p), ("ts", c_int64),
                ("score", c_double), ("bm25_score", c_double), ("vector_score", c_double),
                ("bm25_rank", c_int), ("vector_rank", c_int)]


class Stats(ctypes.Structure):
    _fields_ = [(name, c_int64) for name in (
        "file_bytes", "episodes", "blocks", "block_versions", "facts", "users",
        "commits", "text_bytes", "pages", "syncs")]


class Receipt(ctypes.Structure):
    _fields_ = [("episodes", c_int64), ("facts", c_int64), ("block_versions", c_int64),
                ("vacuumed", c_int), ("bytes_before", c_int64), ("bytes_after", c_int64),
                ("needles", c_int64), ("residue", c_int64)]


FORGET_PURGE = 0x01
FACTS_ALL_VERSIONS = 0x01
IMPORT_NEW_IDS = 0x01


class ContextItem(ctypes.Structure):
    _fields_ = [("kind", c_int), ("id", c_int64), ("name", c_char_p), ("text", c_char_p),
                ("tokens", c_int), ("reason", c_char_p)]


CONTEXT_KINDS = {1: "block", 2: "fact", 3: "episode"}

pp = P(c_void_p)  # agentmem_db ** / agentmem_cursor ** / agentmem_stmt **

# agentmem_embed_fn: (ctx, n, texts, dim, out, err, err_size) -> result code
EMBED_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_int, P(c_char_p), c_int, P(ctypes.c_float),
                            P(ctypes.c_char), c_int)
METRICS = {"cosine": 0, "ip": 1, "l2": 2}

# name: (restype, argtypes). Every function the package calls; a name missing
# from the loaded library is simply not declared (see Library.has()).
PROTOTYPES = {
    "agentmem_libversion": (c_char_p, []),
    "agentmem_errstr": (c_char_p, [c_int]),
    "agentmem_open_v2": (c_int, [c_char_p, pp, c_int, c_char_p]),
    "agentmem_close": (c_int, [c_void_p]),
    "agentmem_errcode": (c_int, [c_void_p]),
    "agentmem_extended_errcode": (c_int, [c_void_p]),
    "agentmem_errmsg": (c_char_p, [c_void_p]),
    "agentmem_free": (None, [c_void_p]),
    "agentmem_begin": (c_int, [c_void_p]),
    "agentmem_commit": (c_int, [c_void_p]),
    "agentmem_rollback": (c_int, [c_void_p]),
    "agentmem_remember": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_char_p, c_int64,
                                  c_char_p, P(ctypes.c_float), c_int, P(c_int64)]),
    "agentmem_episode_get": (c_int, [c_void_p, c_int64, P(P(Episode))]),
    "agentmem_episodes": (c_int, [c_void_p, c_char_p, c_char_p, pp]),
    "agentmem_block_set": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_int, c_int]),
    "agentmem_block_get": (c_int, [c_void_p, c_char_p, c_char_p, P(P(Block))]),
    "agentmem_blocks": (c_int, [c_void_p, c_char_p, pp]),
    "agentmem_fact_assert": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_char_p,
                                     c_double, c_int64, c_int64, P(c_int64), c_int,
                                     P(c_int64)]),
    "agentmem_facts": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, pp]),
    "agentmem_recall_options_init": (None, [P(RecallOptions)]),
    "agentmem_recall": (c_int, [c_void_p, c_char_p, c_char_p, P(RecallOptions), pp]),
    "agentmem_explain_recall": (c_int, [c_void_p, c_char_p, c_char_p, P(RecallOptions),
                                        P(c_void_p)]),
    "agentmem_cursor_step": (c_int, [c_void_p]),
    "agentmem_cursor_episode": (P(Episode), [c_void_p]),
    "agentmem_cursor_block": (P(Block), [c_void_p]),
    "agentmem_cursor_fact": (P(Fact), [c_void_p]),
    "agentmem_cursor_hit": (P(Hit), [c_void_p]),
    "agentmem_cursor_close": (c_int, [c_void_p]),
    "agentmem_stats_get": (c_int, [c_void_p, P(Stats)]),
    "agentmem_exec": (c_int, [c_void_p, c_char_p, c_void_p, c_void_p, P(c_void_p)]),
    "agentmem_prepare": (c_int, [c_void_p, c_void_p, c_int, pp, P(c_void_p)]),
    "agentmem_step": (c_int, [c_void_p]),
    "agentmem_reset": (c_int, [c_void_p]),
    "agentmem_finalize": (c_int, [c_void_p]),
    "agentmem_clear_bindings": (c_int, [c_void_p]),
    "agentmem_bind_parameter_count": (c_int, [c_void_p]),
    "agentmem_bind_parameter_index": (c_int, [c_void_p, c_char_p]),
    "agentmem_bind_null": (c_int, [c_void_p, c_int]),
    "agentmem_bind_int64": (c_int, [c_void_p, c_int, c_int64]),
    "agentmem_bind_double": (c_int, [c_void_p, c_int, c_double]),
    "agentmem_bind_text": (c_int, [c_void_p, c_int, c_char_p, c_int]),
    "agentmem_bind_blob": (c_int, [c_void_p, c_int, c_char_p, c_int]),
    "agentmem_column_count": (c_int, [c_void_p]),
    "agentmem_column_name": (c_char_p, [c_void_p, c_int]),
    "agentmem_column_type": (c_int, [c_void_p, c_int]),
    "agentmem_column_int64": (c_int64, [c_void_p, c_int]),
    "agentmem_column_double": (c_double, [c_void_p, c_int]),
    "agentmem_column_text": (c_void_p, [c_void_p, c_int]),
    "agentmem_column_blob": (c_void_p, [c_void_p, c_int]),
    "agentmem_column_bytes": (c_int, [c_void_p, c_int]),
    "agentmem_changes": (c_int64, [c_void_p]),
    # lifecycle: newer libraries only
    "agentmem_predicate_declare": (c_int, [c_void_p, c_char_p, c_int]),
    "agentmem_facts_v2": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_char_p, c_int64,
                                  c_int64, c_int, pp]),
    "agentmem_forget": (c_int, [c_void_p, c_char_p, c_char_p, c_int64, c_int, P(Receipt)]),
    "agentmem_forget_episode": (c_int, [c_void_p, c_int64, c_int, P(Receipt)]),
    "agentmem_forget_fact": (c_int, [c_void_p, c_int64, c_int, P(Receipt)]),
    "agentmem_forget_block": (c_int, [c_void_p, c_char_p, c_char_p, c_int, P(Receipt)]),
    "agentmem_vacuum": (c_int, [c_void_p, P(Receipt)]),
    "agentmem_retention_set": (c_int, [c_void_p, c_int64, c_int]),
    "agentmem_retention_get": (c_int, [c_void_p, P(c_int64), P(c_int)]),
    "agentmem_context": (c_int, [c_void_p, c_char_p, c_char_p, c_int, P(P(ContextItem)),
                                 P(c_int)]),
    "agentmem_profile": (c_int, [c_void_p, c_char_p, P(c_void_p)]),
    "agentmem_export": (c_int, [c_void_p, c_char_p, P(c_void_p)]),
    "agentmem_import": (c_int, [c_void_p, c_char_p, P(c_int64)]),
    "agentmem_import_v2": (c_int, [c_void_p, c_char_p, c_int, P(c_int64)]),
    "agentmem_export_markdown": (c_int, [c_void_p, c_char_p, P(c_void_p)]),
    "agentmem_import_markdown": (c_int, [c_void_p, c_char_p, c_char_p, P(c_void_p)]),
    "agentmem_create_embedder": (c_int, [c_void_p, c_char_p, c_int, c_int, EMBED_FN, c_void_p,
                                         c_void_p]),
    "agentmem_recover": (c_int, [c_char_p, c_char_p, P(c_void_p)]),
    "agentmem_get_autocommit": (c_int, [c_void_p]),
}


class Library:
    """A loaded libagentmem: ``lib.fn.agentmem_recall(...)`` calls into it."""

    def __init__(self, cdll, path):
        self.fn = cdll
        self.path = path
        for name, (restype, argtypes) in PROTOTYPES.items():
            if self.has(name):
                f = getattr(cdll, name)
                f.restype, f.argtypes = restype, argtypes

    def has(self, name):
        """Whether the loaded library exports the C function `name`."""
        try:
            getattr(self.fn, name)
            return True
        except AttributeError:
            return False

    def declare(self, name, restype, argtypes):
        """Declare a function that is not in PROTOTYPES; returns it, or None when missing."""
        if not self.has(name):
            return None
        f = getattr(self.fn, name)
        f.restype, f.argtypes = restype, argtypes
        return f

    def version(self):
        return self.fn.agentmem_libversion().decode()

    def errstr(self, code):
        return self.fn.agentmem_errstr(code).decode("utf-8", "replace")

    def take_string(self, ptr):
        """Decode and free a char* the library returned to the caller."""
        try:
            return ctypes.string_at(ptr).decode("utf-8") if ptr else None
        finally:
            self.fn.agentmem_free(ptr)


def repository_root():
    """The repository this package is part of, or None when it was installed elsewhere."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "include" / "agentmem.h").is_file() else None


def candidates():
    """(where, what to dlopen) in lookup order; the first that loads wins."""
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env)
        return [(f"{ENV_VAR}={env}", str(p / LIB_FILE if p.is_dir() else p))]
    found = []
    bundled = Path(__file__).resolve().parent / LIB_FILE
    if bundled.exists():
        found.append(("the package's folder", str(bundled)))
    root = repository_root()
    if root is not None:
        found.append(("the repository's build tree", str(root / "build" / "engine" / LIB_FILE)))
    system = ctypes.util.find_library("agentmem")
    names = ([system] if system else []) + [LIB_FILE + ".0", LIB_FILE]
    for name in dict.fromkeys(names):
        found.append(("the system library path", name))
    return found


def load():
    """Load libagentmem, or raise LibraryNotFoundError listing every attempt."""
    tried = []
    for where, target in candidates():
        if "/" in target and not os.path.exists(target):
            tried.append(f"{where}: {target}: no such file")
            continue
        try:
            return Library(ctypes.CDLL(target), target)
        except OSError as e:
            tried.append(f"{where}: {target}: {e}")
    if ENV_VAR not in os.environ or not os.environ[ENV_VAR]:
        tried.insert(0, f"{ENV_VAR}: not set")
    raise LibraryNotFoundError(tried)


_lock = threading.Lock()
_library = None


def lib():
    """The process-wide Library, loaded on first call."""
    global _library
    with _lock:
        if _library is None:
            _library = load()
        return _library

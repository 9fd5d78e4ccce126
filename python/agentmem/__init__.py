"""agentmem for Python: an embedded single-file database for AI-agent memory, over libagentmem's
C API with ctypes (standard library only). docs/python.md is the guide.

    import agentmem
    mem = agentmem.resolve("agentmem:./bot.agentmem")      # or agentmem.Memory(path)
    mem.remember_sync("alice", "I moved to Lisbon last spring.")
    for m in mem.recall_scored_sync("alice", "where does she live?"):
        print(m.id, m.score, m.bm25_score, m.vector_score, m.text)

    conn = agentmem.connect("bot.agentmem")                 # DB-API 2.0, like sqlite3
    conn.execute("SELECT id, text FROM recall(?, ?, 5)", ("Lisbon", "alice")).fetchall()
"""

from . import _capi
from .dbapi import Connection, Cursor, apilevel, connect, paramstyle, threadsafety
from .errors import (CODES, DatabaseError, DataError, Error, CorruptError, IntegrityError,
                     InterfaceError, InternalError, LibraryNotFoundError, MissingFunctionError,
                     NotFoundError, NotSupportedError, OperationalError, ProgrammingError,
                     Warning)
from ._recover import recover
from .memory import (Block, ContextItem, Episode, Fact, Match, Memory, Receipt, micros,
                     resolve)

__version__ = "0.1.0"


def library_path():
    """The libagentmem this process loaded (loading it if needed)."""
    return _capi.lib().path


def libversion():
    """agentmem_libversion() of the loaded library, e.g. "0.1.0"."""
    return _capi.lib().version()


__all__ = [
    "Block", "CODES", "Connection", "ContextItem", "CorruptError", "Cursor", "DataError",
    "DatabaseError", "Episode", "Error", "Fact", "IntegrityError", "InterfaceError",
    "InternalError", "LibraryNotFoundError", "Match", "Memory", "MissingFunctionError",
    "NotFoundError", "NotSupportedError", "OperationalError", "ProgrammingError", "Receipt",
    "Warning",
    "apilevel", "connect", "libversion", "library_path", "micros", "paramstyle", "recover", "resolve",
    "threadsafety",
]

"""agentmem.connect(): SQL over an .agentmem file, shaped like Python's sqlite3 module (PEP 249).

The SQL is agentmem's (docs/sql.md): tables episodes, blocks, facts and the
table-valued functions recall(), facts_as_of(), block_history(), ... over the
file, run by agentmem_prepare / agentmem_step / agentmem_column_*.

Transactions: a statement outside a transaction is its own commit (like
sqlite3 with autocommit on). `with conn:`, or conn.begin(), opens an engine
transaction (agentmem_begin) that SQL statements and Memory calls on the same
handle join; leaving the block commits it, or rolls it back on an exception.
Plain SQL BEGIN / COMMIT / ROLLBACK work as well, and conn.commit() /
conn.rollback() end whichever kind is open (no-ops when none is).
"""

import ctypes
import re
import weakref

from . import _capi
from ._handle import Handle, cstr
from .errors import ProgrammingError

apilevel = "2.0"
threadsafety = 2  # threads may share connections (calls are serialized), not cursors
paramstyle = "qmark"  # also :name, @name and $name with a mapping

_KEYWORD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*([A-Za-z]+)(?:\s+([A-Za-z]+))?", re.S)


def first_keywords(sql):
    """The first two words of a statement, upper-cased, skipping blanks and comments."""
    m = _KEYWORD.match(sql)
    return (m.group(1).upper(), (m.group(2) or "").upper()) if m else ("", "")


def connect(path, *, readonly=False, create=True, timeout=None, **options):
    """Open (by default create) the .agentmem file at path; ":memory:" is a private in-memory one.

    timeout is the busy timeout in seconds (how long a writer waits for another
    process's write lock; default 5). Other keyword arguments are the open
    options of agentmem_open_v2: sync="normal", vector_dim=1536, embedder=...
    """
    if timeout is not None:
        options["busy_timeout"] = int(timeout * 1000)
    return Connection(Handle(path, readonly=readonly, create=create, options=options))


class Connection:
    """A DB-API connection over one agentmem_db handle."""

    def __init__(self, handle):
        self._handle = handle
        self._cursors = weakref.WeakSet()
        self._txn = None  # None, "capi" (agentmem_begin) or "sql" (SQL BEGIN)
        self._with_owns = []  # per open `with conn:`: whether it began the transaction
        self.row_factory = None

    # ---------------------------------------------------------------- DB-API
    def cursor(self):
        self._handle.require_open()
        cur = Cursor(self)
        self._cursors.add(cur)
        return cur

    def execute(self, sql, parameters=()):
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql, seq_of_parameters):
        return self.cursor().executemany(sql, seq_of_parameters)

    def executescript(self, sql):
        return self.cursor().executescript(sql)

    @property
    def in_transaction(self):
        """Whether a transaction is open: the engine's own state (agentmem_get_autocommit), so
        that a COMMIT that failed and ended its transaction reads False."""
        self._sync_txn()
        return self._txn is not None

    def _sync_txn(self):
        """Forget a transaction the engine no longer has (a failed COMMIT ended it)."""
        h = self._handle
        if self._txn is None or h.db is None or not h.lib.has("agentmem_get_autocommit"):
            return
        with h.lock:
            if h.db is not None and h.fn.agentmem_get_autocommit(h.db):
                self._txn = None

    def begin(self):
        """Open an engine transaction (agentmem_begin) for SQL and Memory writes alike."""
        self._handle.call("agentmem_begin")
        self._txn = "capi"

    def commit(self):
        """Commit the open transaction (one engine commit); a no-op when none is open."""
        self._end("agentmem_commit", "COMMIT")

    def rollback(self):
        """Discard the open transaction; a no-op when none is open."""
        self._end("agentmem_rollback", "ROLLBACK")

    def _end(self, function, sql):
        if self._txn == "capi":
            self._txn = None
            self._handle.call(function)
        elif self._txn == "sql":
            try:
                self.execute(sql)
            finally:
                self._sync_txn()

    def close(self):
        """Finalize every statement, roll back an open transaction and close the file."""
        for cur in list(self._cursors):
            cur.close()
        self._txn = None
        self._handle.close()

    @property
    def closed(self):
        return self._handle.db is None

    @property
    def path(self):
        return self._handle.path

    def __enter__(self):
        owns = not self.in_transaction
        if owns:
            self.begin()
        self._with_owns.append(owns)
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._with_owns.pop() and not self.closed:
            if exc_type is None:
                self.commit()
            else:
                self.rollback()
        return False

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.db is not None:
            try:
                self.close()
            except Exception:  # nothing sensible to do in a finalizer
                pass

    # Exceptions as attributes, as PEP 249's optional extension suggests.
    from .errors import (DatabaseError, DataError, Error, IntegrityError,  # noqa: E402
                         InterfaceError, InternalError, NotSupportedError, OperationalError,
                         ProgrammingError, Warning)


class Cursor:
    """Runs one statement at a time; rows are read from the engine as they are fetched."""

    arraysize = 1

    def __init__(self, connection):
        self.connection = connection
        self._handle = connection._handle
        self._stmt = None
        self._row = None  # the current row, read but not yet returned
        self.description = None
        self.rowcount = -1
        self.lastrowid = None
        self.row_factory = connection.row_factory

    # ---------------------------------------------------------------- executing
    def execute(self, sql, parameters=()):
        h = self._handle
        with h.lock:
            self._reset_results()
            self._stmt = self._prepare(sql)
            if self._stmt is not None:
                self._bind(parameters)
                self._start(first_keywords(sql))
        return self

    def executemany(self, sql, seq_of_parameters):
        h = self._handle
        with h.lock:
            self._reset_results()
            stmt = self._stmt = self._prepare(sql)
            total = 0
            words = first_keywords(sql)
            for parameters in seq_of_parameters:
                if stmt is None:
                    break
                h.fn.agentmem_reset(stmt)
                h.fn.agentmem_clear_bindings(stmt)
                self._bind(parameters)
                self._start(words, keep=True)
                total += max(self.rowcount, 0)
            self.rowcount = total
            self._finish()
        return self

    def executescript(self, sql):
        """Run ';'-separated statements with agentmem_exec (no parameters, rows discarded)."""
        h = self._handle
        with h.lock:
            self._reset_results()
            h.require_open()
            err = ctypes.c_void_p()
            rc = h.fn.agentmem_exec(h.db, cstr(sql, "sql"), None, None, ctypes.byref(err))
            h.lib.take_string(err.value)
            h.check(rc)
        return self

    # ---------------------------------------------------------------- fetching
    def fetchone(self):
        with self._handle.lock:
            self._handle.require_open()
            if self._row is None and self._stmt is not None:
                self._step()
            row, self._row = self._row, None
        if row is not None and self.row_factory is not None:
            row = self.row_factory(self, row)
        return row

    def fetchmany(self, size=None):
        rows = []
        for _ in range(self.arraysize if size is None else size):
            row = self.fetchone()
            if row is None:
                break
            rows.append(row)
        return rows

    def fetchall(self):
        return list(self)

    def __iter__(self):
        return self

    def __next__(self):
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def close(self):
        with self._handle.lock:
            self._finish()

    def setinputsizes(self, sizes):
        pass

    def setoutputsize(self, size, column=None):
        pass

    def __del__(self):
        if getattr(self, "_stmt", None) is not None:
            self.close()

    # ---------------------------------------------------------------- internals
    def _reset_results(self):
        self._finish()
        self.description = None
        self.rowcount = -1
        self.lastrowid = None

    def _finish(self):
        stmt, self._stmt, self._row = self._stmt, None, None
        if stmt is not None and self._handle.db is not None:
            self._handle.fn.agentmem_finalize(stmt)

    def _prepare(self, sql):
        """The compiled first statement of sql (None for blanks and comments only)."""
        h = self._handle
        h.require_open()
        data = sql.encode("utf-8")
        buf = ctypes.create_string_buffer(data)
        stmt, tail = ctypes.c_void_p(), ctypes.c_void_p()
        h.check(h.fn.agentmem_prepare(h.db, buf, len(data), ctypes.byref(stmt),
                                      ctypes.byref(tail)))
        rest = data[tail.value - ctypes.addressof(buf):] if tail.value else b""
        if rest.strip() and stmt.value is not None:
            try:
                extra = self._prepare(rest.decode("utf-8"))
            except Exception:
                h.fn.agentmem_finalize(stmt.value)
                raise
            if extra is not None:
                h.fn.agentmem_finalize(extra)
                h.fn.agentmem_finalize(stmt.value)
                raise ProgrammingError("You can only execute one statement at a time.")
        return stmt.value

    def _bind(self, parameters):
        h, stmt = self._handle, self._stmt
        count = h.fn.agentmem_bind_parameter_count(stmt)
        if isinstance(parameters, dict):
            bound = set()
            for name, value in parameters.items():
                for prefix in ":@$":
                    i = h.fn.agentmem_bind_parameter_index(stmt, cstr(prefix + name, "name"))
                    if i:
                        self._bind_one(i, value)
                        bound.add(i)
            missing = set(range(1, count + 1)) - bound
            if missing:
                raise ProgrammingError(f"no value for parameter number {min(missing)}")
            return
        parameters = tuple(parameters)
        if len(parameters) != count:
            raise ProgrammingError(f"Incorrect number of bindings supplied. The current "
                                   f"statement uses {count}, and there are {len(parameters)} "
                                   f"supplied.")
        for i, value in enumerate(parameters, start=1):
            self._bind_one(i, value)

    def _bind_one(self, i, value):
        h, stmt = self._handle, self._stmt
        if value is None:
            rc = h.fn.agentmem_bind_null(stmt, i)
        elif isinstance(value, (bool, int)):
            rc = h.fn.agentmem_bind_int64(stmt, i, int(value))
        elif isinstance(value, float):
            rc = h.fn.agentmem_bind_double(stmt, i, value)
        elif isinstance(value, str):
            data = value.encode("utf-8")
            rc = h.fn.agentmem_bind_text(stmt, i, data, len(data))
        else:
            try:
                data = bytes(memoryview(value))  # bytes, bytearray, array('f', ...), ...
            except TypeError:
                raise ProgrammingError(f"parameter {i}: type {type(value).__name__} is not "
                                       f"supported (None, int, float, str or a buffer)") from None
            rc = h.fn.agentmem_bind_blob(stmt, i, data, len(data))
        h.check(rc)

    def _start(self, words, keep=False):
        """Run the statement to its first row; DML runs to completion here."""
        h = self._handle
        n = h.fn.agentmem_column_count(self._stmt)
        if n:
            self.description = tuple(
                (h.fn.agentmem_column_name(self._stmt, i).decode("utf-8"),
                 None, None, None, None, None, None) for i in range(n))
        self._step(keep)
        if words[0] in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
            self.rowcount = h.fn.agentmem_changes(h.db)
        if words[0] in ("INSERT", "REPLACE") and self.rowcount > 0:
            self.lastrowid = self._last_insert_rowid()
        self._track_transaction(words)

    def _step(self, keep=False):
        h = self._handle
        rc = h.fn.agentmem_step(self._stmt)
        if rc == _capi.ROW:
            self._row = self._read_row()
            return
        if rc != _capi.DONE:
            err = h.error(rc)
            self._finish()
            raise err
        if not keep:
            self._finish()

    def _read_row(self):
        h, stmt = self._handle, self._stmt
        row = []
        for i in range(h.fn.agentmem_column_count(stmt)):
            kind = h.fn.agentmem_column_type(stmt, i)
            if kind == _capi.COLUMN_INTEGER:
                row.append(h.fn.agentmem_column_int64(stmt, i))
            elif kind == _capi.COLUMN_FLOAT:
                row.append(h.fn.agentmem_column_double(stmt, i))
            elif kind == _capi.COLUMN_TEXT:
                p = h.fn.agentmem_column_text(stmt, i)
                row.append(ctypes.string_at(p, h.fn.agentmem_column_bytes(stmt, i)).decode())
            elif kind == _capi.COLUMN_BLOB:
                p = h.fn.agentmem_column_blob(stmt, i)
                n = h.fn.agentmem_column_bytes(stmt, i)
                row.append(ctypes.string_at(p, n) if n else b"")
            else:
                row.append(None)
        return tuple(row)

    def _last_insert_rowid(self):
        cur = Cursor(self.connection)
        try:
            return cur.execute("SELECT last_insert_rowid()").fetchone()[0]
        finally:
            cur.close()

    def _track_transaction(self, words):
        conn = self.connection
        if words[0] == "BEGIN" and conn._txn is None:
            conn._txn = "sql"
        elif (words[0] in ("COMMIT", "END") or (words[0] == "ROLLBACK" and words[1] != "TO")) \
                and conn._txn == "sql":
            conn._txn = None

"""Exceptions: the DB-API 2.0 hierarchy (PEP 249), each carrying the engine's code and message.

Every error raised for a failed C call is an instance of the class its primary
code maps to (CODE_CLASSES) and has:
  code     the extended result code (e.g. 264 = AGENTMEM_BUSY_TIMEOUT)
  primary  code & 0xff (e.g. 8 = AGENTMEM_BUSY)
  name     the code's name in include/agentmem.h ("AGENTMEM_BUSY_TIMEOUT")
  message  agentmem_errmsg() of the handle right after the failed call
"""

PRIMARY = {
    0: "OK", 1: "ERROR", 2: "INTERNAL", 3: "NOMEM", 4: "IOERR", 5: "CORRUPT", 6: "NOTADB",
    7: "FORMAT_VERSION", 8: "BUSY", 9: "READONLY", 10: "MISUSE", 11: "FULL", 12: "CANTOPEN",
    13: "CONSTRAINT", 14: "NOTFOUND", 15: "MISMATCH", 16: "TOOBIG", 17: "RANGE", 18: "ABORT",
    100: "ROW", 101: "DONE",
}
EXTENDED = {
    4: ["READ", "WRITE", "FSYNC", "SHORT_READ", "TRUNCATE", "LOCK", "STICKY"],
    5: ["CHECKSUM", "PAGE", "INDEX", "SUPERBLOCK", "HEADER"],
    8: ["TIMEOUT"], 9: ["FILE"], 12: ["EXISTS"], 14: ["CHANGES"], 15: ["DIMENSION", "UTF8", "JSON"],
}

# Every code by name, e.g. CODES["AGENTMEM_BUSY_TIMEOUT"] == 264.
CODES = {f"AGENTMEM_{n}": c for c, n in PRIMARY.items()}
for _p, _subs in EXTENDED.items():
    for _i, _sub in enumerate(_subs, start=1):
        CODES[f"AGENTMEM_{PRIMARY[_p]}_{_sub}"] = _p | (_i << 8)
NAMES = {c: n for n, c in CODES.items()}


def code_name(code):
    """'AGENTMEM_BUSY_TIMEOUT' for 264; an unknown extension falls back to its primary's name."""
    return NAMES.get(code) or NAMES.get(code & 0xFF, f"AGENTMEM_{code}")


class Warning(Exception):  # noqa: A001 -- PEP 249 names it so
    pass


class Error(Exception):
    """Base class of every agentmem error. `code` is None for errors the wrapper raises itself."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.primary = None if code is None else code & 0xFF
        self.name = None if code is None else code_name(code)

    def __str__(self):
        if self.code is None:
            return self.message
        return f"{self.message} ({self.name}, code {self.code})"


class InterfaceError(Error):
    pass


class DatabaseError(Error):
    pass


class DataError(DatabaseError):
    """A value the engine refuses: wrong dimension, bad UTF-8 or JSON, too big, out of range."""


class NulCharacterError(DataError, ValueError):
    """A str argument holds a NUL character: refused before any C call, as the
    engine refuses it in every name and text (AGENTMEM_MISMATCH)."""

    def __init__(self, message):
        super().__init__(message, 15)


class OperationalError(DatabaseError):
    """SQL errors, I/O, a busy or read-only file, a file that cannot be opened."""


class IntegrityError(DatabaseError):
    """A constraint failed: a block value over its limit, an empty name, a missing text."""


class InternalError(DatabaseError):
    pass


class ProgrammingError(DatabaseError):
    """API misuse: a closed handle, a transaction in the wrong state, wrong parameters."""


class NotSupportedError(DatabaseError):
    pass


class NotFoundError(DatabaseError):
    """AGENTMEM_NOTFOUND: no such record."""


class CorruptError(DatabaseError):
    """AGENTMEM_CORRUPT_*, NOTADB, FORMAT_VERSION: the file is damaged or not readable here."""


CODE_CLASSES = {
    1: OperationalError, 2: InternalError, 3: OperationalError, 4: OperationalError,
    5: CorruptError, 6: CorruptError, 7: CorruptError, 8: OperationalError,
    9: OperationalError, 10: ProgrammingError, 11: OperationalError, 12: OperationalError,
    13: IntegrityError, 14: NotFoundError, 15: DataError, 16: DataError, 17: DataError,
    18: OperationalError,
}


def from_code(code, message):
    """The exception for a failed call's code and message."""
    return CODE_CLASSES.get(code & 0xFF, DatabaseError)(message, code)


class LibraryNotFoundError(ImportError):
    """libagentmem could not be loaded; `tried` lists every attempt and why it failed."""

    def __init__(self, tried):
        self.tried = list(tried)
        super().__init__(
            "libagentmem not found; tried, in order:\n  " + "\n  ".join(self.tried) +
            "\nBuild it with `make build` (it lands in build/engine/), or set AGENTMEM_LIB "
            "to the path of libagentmem.so.")


class MissingFunctionError(NotImplementedError):
    """The loaded libagentmem lacks a C function this method needs (an older library)."""

    def __init__(self, function, method):
        self.function = function
        super().__init__(
            f"{method} needs the C function {function}(), which the loaded libagentmem does "
            f"not export: the library is older than this package")

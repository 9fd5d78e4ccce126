"""One open agentmem_db and the lock that pairs each C call with its error message.

The engine serializes calls on a handle itself, but agentmem_errmsg() belongs
to the handle: between a failed call in one thread and the errmsg read, a call
from another thread would reset it. So every call that may fail runs under
`Handle.lock` together with the read of its code and message. The lock is
re-entrant so that a method may call several C functions as one unit (a
transaction, or recall followed by the episodes' fetch).
"""

import ctypes
import os
import threading

from . import _capi
from .errors import MissingFunctionError, NulCharacterError, ProgrammingError, from_code


def cstr(value, what="a string argument"):
    """UTF-8 bytes for a const char * argument (None stays NULL)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        data = value.encode("utf-8")
    else:
        raise TypeError(f"{what} must be str, not {type(value).__name__}")
    if b"\0" in data:
        raise NulCharacterError(f"{what} contains a NUL character, which agentmem refuses "
                                "(strings are read back NUL-terminated)")
    return data


def text(value):
    """A str from a const char * field (NULL -> None)."""
    return None if value is None else value.decode("utf-8")


def options_string(options):
    """"key=value&key=value" for agentmem_open_v2 (None when there are none)."""
    parts = []
    for key, value in options.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = int(value)
        value = str(value)
        if any(c in key + value for c in "&;="):
            raise ValueError(f"open option {key}={value!r}: '&', ';' and '=' are separators")
        parts.append(f"{key}={value}")
    return "&".join(parts) or None


class Handle:
    """An open agentmem_db. Thread-safe; close() waits for a call in progress."""

    def __init__(self, path, *, readonly=False, create=True, options=None):
        self.lib = _capi.lib()
        self.fn = self.lib.fn
        self.lock = threading.RLock()
        self.embedder = None  # a registered _embedder.CallbackEmbedder (Memory(embedder=fn))
        self.path = path if path == ":memory:" else os.fspath(path)
        flags = _capi.OPEN_READONLY if readonly else _capi.OPEN_READWRITE
        if create and not readonly:
            flags |= _capi.OPEN_CREATE
        zpath = os.fsencode(self.path)
        db = ctypes.c_void_p()
        rc = self.fn.agentmem_open_v2(zpath, ctypes.byref(db), flags,
                                      cstr(options_string(options or {})))
        self.db = db.value
        if rc != _capi.OK:
            err = self.error(rc)
            self.fn.agentmem_close(self.db)  # a handle comes back even on failure
            self.db = None
            raise err

    def error(self, rc):
        """The exception for call result rc; REQUIRES: self.lock held since the call."""
        code = self.fn.agentmem_extended_errcode(self.db) if self.db else rc
        message = self.fn.agentmem_errmsg(self.db) if self.db else None
        if code & 0xFF != rc & 0xFF:  # the handle's record is not this call's
            code, message = rc, None
        message = message.decode("utf-8", "replace") if message else self.lib.errstr(code)
        err = from_code(code, message)
        if self.embedder is not None:  # the embedding function's own exception, if it failed
            err.__cause__ = self.embedder.take_error()
        return err

    def check(self, rc):
        """Raise the handle's error unless rc is AGENTMEM_OK; REQUIRES: self.lock held."""
        if rc != _capi.OK:
            raise self.error(rc)

    def call(self, name, *args, method=None):
        """Call the C function `name` with (db, *args) and raise on failure.

        method names the Python method for the error when the library lacks the
        function (MissingFunctionError).
        """
        fn = self.function(name, method or f"calling {name}()")
        with self.lock:
            self.require_open()
            self.check(fn(self.db, *args))

    def require_open(self):
        if self.db is None:
            raise ProgrammingError("Cannot operate on a closed database.")

    def function(self, name, method):
        """The C function `name`, or MissingFunctionError naming it and the Python method."""
        if not self.lib.has(name):
            raise MissingFunctionError(name, method)
        return getattr(self.fn, name)

    def rows(self, cursor_ptr, accessor, convert):
        """Step a C cursor to its end, converting each row; closes it. REQUIRES: lock held."""
        get = getattr(self.fn, accessor)
        out = []
        try:
            while True:
                rc = self.fn.agentmem_cursor_step(cursor_ptr)
                if rc == _capi.DONE:
                    return out
                if rc != _capi.ROW:
                    raise self.error(rc)
                out.append(convert(get(cursor_ptr).contents))
        finally:
            self.fn.agentmem_cursor_close(cursor_ptr)

    def close(self):
        with self.lock:
            if self.db is None:
                return
            rc = self.fn.agentmem_close(self.db)
            if rc & 0xFF == 8:  # AGENTMEM_BUSY: statements still open; the handle stays usable
                raise self.error(rc)
            self.db = None  # freed, even when the final sync failed
            if rc != _capi.OK:
                raise from_code(rc, self.lib.errstr(rc))

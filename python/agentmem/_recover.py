"""agentmem.recover: salvage of a damaged file (agentmem_recover, docs/recovery.md)."""

import ctypes
import json
import os

from . import _capi
from ._handle import cstr
from .errors import MissingFunctionError, from_code


def recover(src, dst=None):
    """Copy every whole committed transaction of the file `src` into the new file `dst`.

    `src` is read, never written, and need not open as a database; `dst` must not exist.
    With `dst` None nothing is written: the damage is only reported (what `.check` prints).
    Returns the report, the JSON object of docs/recovery.md decoded (a dict: "clean",
    "damaged", "transactions_dropped", "episodes_lost", ...). Damage is not an error; a
    failure (the source missing or not an agentmem file, `dst` existing, an I/O error)
    raises the class of its code (CorruptError, OperationalError, ...) with the engine's
    message, and leaves no new file.
    """
    lib = _capi.lib()
    if not lib.has("agentmem_recover"):
        raise MissingFunctionError("agentmem_recover", "recover")
    src_c = cstr(os.fspath(src), "src")
    dst_c = None if dst is None else cstr(os.fspath(dst), "dst")
    out = ctypes.c_void_p()
    rc = lib.fn.agentmem_recover(src_c, dst_c, ctypes.byref(out))
    report = lib.take_string(out.value)
    if rc != _capi.OK:
        raise from_code(rc, report or lib.errstr(rc))
    return json.loads(report)

"""The ctypes declarations of python/agentmem/_capi.py lay every struct out as the C compiler
does (tests/python/abi_layout.cc prints sizeof and offsetof from include/agentmem.h)."""

import ctypes
import subprocess

from agentmem import _capi
from support import build_program

STRUCTS = {
    "agentmem_episode": _capi.Episode, "agentmem_block": _capi.Block, "agentmem_fact": _capi.Fact,
    "agentmem_recall_options": _capi.RecallOptions, "agentmem_hit": _capi.Hit,
    "agentmem_stats": _capi.Stats, "agentmem_context_item": _capi.ContextItem,
    "agentmem_receipt": _capi.Receipt,
}


def c_layout():
    out = subprocess.run([str(build_program("tests/python/abi_layout"))], capture_output=True,
                         text=True, check=True).stdout
    return {name: int(n) for name, _, n in (line.split() for line in out.splitlines())}


def test_every_struct_has_the_c_size_and_field_offsets():
    layout = c_layout()
    checked = set()
    for key, value in layout.items():
        struct, _, field = key.partition(".")
        cls = STRUCTS[struct]
        got = getattr(cls, field).offset if field else ctypes.sizeof(cls)
        assert got == value, f"{key}: ctypes {got}, C {value}"
        checked.add(struct)
    assert {"agentmem_episode", "agentmem_hit", "agentmem_recall_options"} <= checked


def test_every_c_field_is_declared_in_order_and_none_is_left_out():
    layout = c_layout()
    for struct, cls in STRUCTS.items():
        fields = [k.partition(".")[2] for k in layout if k.startswith(struct + ".")]
        if fields:
            assert [f[0] for f in cls._fields_] == fields, struct

"""Helpers shared by the Python package's tests (conftest.py holds the fixtures).

The package under test is the repository's python/agentmem. The library is the
one AGENTMEM_LIB names (tests/python/python_tests, generated in a build dir,
sets it to that build's libagentmem.so); without it the package's own lookup
applies. AGENTMEM_TEST_BUILD names the build dir holding recall_dump.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

import agentmem  # noqa: E402


def build_dir():
    """The meson build dir under test: AGENTMEM_TEST_BUILD, else the repository's build/."""
    return Path(os.environ.get("AGENTMEM_TEST_BUILD") or REPO / "build")


def build_program(relative):
    """A program of the build under test; fails in a build-dir run, skips elsewhere, if missing."""
    exe = build_dir() / relative
    if not exe.is_file():
        if os.environ.get("AGENTMEM_TEST_BUILD"):
            pytest.fail(f"{exe} is missing: build it (ninja -C {build_dir()})")
        pytest.skip(f"{exe} not built")
    return exe


def python_env(**extra):
    """The environment of a child python that imports this package; None values unset a name."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), PYTHONDONTWRITEBYTECODE="1")
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run_python(code, *args, env=None, cwd=None, check=True):
    """Run `python -c code args...` in a child process; returns the CompletedProcess."""
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env or python_env(),
                          cwd=cwd, capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"child failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def requires(function):
    """Skip the test when the loaded libagentmem lacks a C function (an older library)."""
    return pytest.mark.skipif(not agentmem._capi.lib().has(function),
                              reason=f"the loaded libagentmem has no {function}() yet")

"""Fixtures of the Python package's tests (helpers: support.py)."""

import sys

import pytest

sys.dont_write_bytecode = True
import support  # noqa: E402,F401 -- puts python/ on sys.path
import agentmem  # noqa: E402


@pytest.fixture
def path(tmp_path):
    """A fresh .agentmem path (the file does not exist yet)."""
    return tmp_path / "bot.agentmem"


@pytest.fixture
def mem(path):
    m = agentmem.Memory(path)
    yield m
    m.close()


@pytest.fixture
def conn(path):
    c = agentmem.connect(path)
    yield c
    c.close()

"""Finding libagentmem: AGENTMEM_LIB, the package's folder, the repository's build tree, the system path."""

import os
import shutil
from pathlib import Path

import pytest

import agentmem
from support import REPO, python_env, run_python

SHOW = "import agentmem; print(agentmem.library_path()); print(agentmem.libversion())"
FAIL = """
import agentmem
try:
    agentmem.connect(":memory:")
except agentmem.LibraryNotFoundError as e:
    print(e)
"""


@pytest.fixture
def real_lib():
    """The absolute path of the libagentmem under test."""
    path = agentmem.library_path()
    if not os.path.isabs(path):
        pytest.skip("the library under test was found by name, not by path")
    return Path(path)


@pytest.fixture
def no_system_lib():
    """Skips when the system path (LD_LIBRARY_PATH aside, as the children unset it) has one."""
    found = run_python("import ctypes.util; print(ctypes.util.find_library('agentmem'))",
                       env=python_env(LD_LIBRARY_PATH=None)).stdout.strip()
    if found != "None":
        pytest.skip(f"a libagentmem is installed system-wide: {found}")


def copy_package(root):
    """The package copied to root/python/agentmem; returns root/python."""
    shutil.copytree(REPO / "python" / "agentmem", root / "python" / "agentmem",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root / "python"


def env_for(pythonpath, **extra):
    return python_env(**{"PYTHONPATH": str(pythonpath), "AGENTMEM_LIB": None,
                         "LD_LIBRARY_PATH": None, **extra})


def test_agentmem_lib_names_the_file_to_load(real_lib):
    out = run_python(SHOW, env=python_env(AGENTMEM_LIB=str(real_lib))).stdout.split()
    assert out == [str(real_lib), agentmem.libversion()]


def test_agentmem_lib_may_name_the_folder_holding_the_library(real_lib):
    out = run_python(SHOW, env=python_env(AGENTMEM_LIB=str(real_lib.parent))).stdout.split()
    assert out[0] == str(real_lib.parent / "libagentmem.so")


def test_a_wrong_agentmem_lib_is_an_error_naming_it_not_a_silent_fallback(tmp_path):
    wrong = tmp_path / "nowhere" / "libagentmem.so"
    message = run_python(FAIL, env=python_env(AGENTMEM_LIB=str(wrong))).stdout
    assert f"AGENTMEM_LIB={wrong}" in message and "no such file" in message
    assert "build tree" not in message and "system library path" not in message
    assert "make build" in message


def test_without_agentmem_lib_the_repositorys_build_tree_is_used(tmp_path, real_lib):
    pythonpath = copy_package(tmp_path)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "agentmem.h").write_text("/* marks the repository root */\n")
    (tmp_path / "build" / "engine").mkdir(parents=True)
    (tmp_path / "build" / "engine" / "libagentmem.so").symlink_to(real_lib)
    out = run_python(SHOW, env=env_for(pythonpath)).stdout.split()
    assert out[0] == str(tmp_path / "build" / "engine" / "libagentmem.so")


def test_outside_a_repository_the_system_library_path_is_used(tmp_path, real_lib, no_system_lib):
    pythonpath = copy_package(tmp_path)
    out = run_python(SHOW, env=env_for(pythonpath, LD_LIBRARY_PATH=str(real_lib.parent)))
    assert out.stdout.split()[1] == agentmem.libversion()


def test_when_nothing_is_found_the_error_lists_every_place_tried(tmp_path, no_system_lib):
    pythonpath = copy_package(tmp_path)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "agentmem.h").write_text("")
    message = run_python(FAIL, env=env_for(pythonpath)).stdout
    lines = message.splitlines()
    assert lines[0] == "libagentmem not found; tried, in order:"
    assert lines[1].strip() == "AGENTMEM_LIB: not set"
    assert f"the repository's build tree: {tmp_path}/build/engine/libagentmem.so: no such file" \
        in lines[2]
    assert all("the system library path" in line for line in lines[3:-1])
    assert "AGENTMEM_LIB" in lines[-1]


def test_importing_the_package_does_not_need_the_library(tmp_path):
    pythonpath = copy_package(tmp_path)
    run_python("import agentmem; print(agentmem.__version__)", env=env_for(pythonpath))


def test_a_library_in_the_package_folder_is_loaded_without_agentmem_lib(tmp_path, real_lib):
    """Where the wheel of `pip install .` puts it (tests/install checks the wheel itself)."""
    pythonpath = copy_package(tmp_path)
    bundled = pythonpath / "agentmem" / "libagentmem.so"
    shutil.copyfile(real_lib, bundled)
    out = run_python(SHOW, env=env_for(pythonpath)).stdout.split()
    assert out == [str(bundled), agentmem.libversion()]

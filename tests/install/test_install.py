"""Packaging (docs/install.md): meson install into a DESTDIR, the README's C example built with
pkg-config against it, the installed shell and man page, and `pip install .` into a clean venv
whose package carries the library."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("AGENTMEM_TEST_BUILD") or REPO / "build")
# Debian's interpreter: python3-mesonpy lives in its dist-packages.
DEBIAN_PYTHON = Path("/usr/bin/python3")
# pip's build folder for the wheel: beside the build under test, at the same depth, so that
# ccache finds the objects of that build (the compile lines are the same).
WHEEL_BUILD = REPO / "build-wheel"


def run(cmd, timeout=120, **kw):
    """Runs cmd; on failure raises with its output."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout, **kw)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def clean_env(**extra):
    """This environment without anything that points at a library or package."""
    env = dict(os.environ)
    for name in ("AGENTMEM_LIB", "PYTHONPATH", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH",
                 "PKG_CONFIG_SYSROOT_DIR", "PKG_CONFIG_LIBDIR", "VIRTUAL_ENV"):
        env.pop(name, None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def meson_info(name):
    return json.loads((BUILD / "meson-info" / f"intro-{name}.json").read_text())


def option(name):
    return next(o["value"] for o in meson_info("buildoptions") if o["name"] == name)


def under_prefix(destdir, option_name, *rest):
    """DESTDIR/<prefix>/<the option's folder>/rest..."""
    return destdir.joinpath(option("prefix").lstrip("/"), option(option_name), *rest)


def version():
    return meson_info("projectinfo")["version"]


def readme_section(title):
    readme = (REPO / "README.md").read_text()
    return readme.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.fixture(scope="module")
def destdir(tmp_path_factory):
    """The build under test installed into a fresh DESTDIR."""
    d = tmp_path_factory.mktemp("destdir")
    run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet", "--destdir", d])
    return d


@pytest.fixture(scope="module")
def libdir(destdir):
    return under_prefix(destdir, "libdir")


def sync_built():
    """libagentmem_sync is built when libpq is found (cli/meson.build)."""
    return (BUILD / "cli" / "libagentmem_sync.so").exists()


def test_meson_install_puts_the_library_header_shell_man_page_and_pc_file_and_nothing_else(destdir):
    lib = Path(option("libdir"))
    expected = {lib / f"libagentmem.so.{version()}", lib / "libagentmem.so.0",
                lib / "libagentmem.so", lib / "pkgconfig" / "agentmem.pc",
                Path(option("includedir")) / "agentmem.h", Path(option("bindir")) / "agentmem",
                Path(option("mandir")) / "man1" / "agentmem.1"}
    if sync_built():
        expected |= {lib / f"libagentmem_sync.so.{version()}", lib / "libagentmem_sync.so.0",
                     lib / "libagentmem_sync.so", Path(option("includedir")) / "agentmem_sync.h"}
    root = destdir / option("prefix").lstrip("/")
    found = {p.relative_to(root) for p in root.rglob("*") if p.is_file() or p.is_symlink()}
    assert found == expected
    assert os.readlink(root / lib / "libagentmem.so") == "libagentmem.so.0"
    assert os.readlink(root / lib / "libagentmem.so.0") == f"libagentmem.so.{version()}"


def test_the_installed_library_has_its_soname_and_exports_the_c_api_only(libdir):
    lib = libdir / f"libagentmem.so.{version()}"
    dynamic = run(["readelf", "-d", lib]).stdout
    assert "Library soname: [libagentmem.so.0]" in dynamic
    symbols = run(["nm", "-D", "--defined-only", lib]).stdout.split("\n")
    names = {line.split()[-1].split("@")[0] for line in symbols if line.strip()}
    names.discard("AGENTMEM_0")  # the version node (engine/agentmem.map)
    header = (REPO / "include" / "agentmem.h").read_text()
    declared = set(re.findall(r"^[a-z][\w \*]*?\b(agentmem_\w+)\(", header, re.M))
    assert declared and names == declared


def test_the_installed_sync_library_exports_agentmem_sync_only(libdir):
    if not sync_built():
        pytest.skip("built without libpq")
    lib = libdir / f"libagentmem_sync.so.{version()}"
    assert "Library soname: [libagentmem_sync.so.0]" in run(["readelf", "-d", lib]).stdout
    symbols = run(["nm", "-D", "--defined-only", lib]).stdout.split("\n")
    names = {line.split()[-1].split("@")[0] for line in symbols if line.strip()}
    names.discard("AGENTMEM_SYNC_0")  # the version node (cli/sync/agentmem_sync.map)
    assert names == {"agentmem_sync"}


def test_the_readme_c_example_builds_with_pkg_config_against_a_destdir_install(destdir, libdir,
                                                                                tmp_path):
    section = readme_section("Install")
    source = re.search(r"```c\n(.*?)```", section, re.S).group(1)
    command = re.search(r"```sh\n(cc hello\.c .*?)\n```", section, re.S).group(1)
    (tmp_path / "hello.c").write_text(source)
    env = clean_env(PKG_CONFIG_PATH=libdir / "pkgconfig", PKG_CONFIG_SYSROOT_DIR=destdir,
                    LD_LIBRARY_PATH=libdir)
    flags = run(["pkg-config", "--cflags", "--libs", "agentmem"], env=env).stdout.split()
    assert f"-I{under_prefix(destdir, 'includedir')}" in flags
    assert f"-L{libdir}" in flags and "-lagentmem" in flags
    assert run(["pkg-config", "--modversion", "agentmem"], env=env).stdout.strip() == version()
    out = run(["bash", "-c", command], cwd=tmp_path, env=env).stdout.splitlines()
    assert out == ["I moved to Lisbon last spring.", f"agentmem {version()}"]
    needed = run(["readelf", "-d", tmp_path / "hello"]).stdout
    assert "Shared library: [libagentmem.so.0]" in needed


def test_the_readme_library_fragments_compile_against_the_installed_header(destdir, libdir,
                                                                           tmp_path):
    """The snippets of "Using the library" (no main of their own) as one function body."""
    fragments = re.findall(r"```c\n(.*?)```", readme_section("Using the library"), re.S)
    assert len(fragments) >= 2
    body = re.sub(r"^#include .*\n", "", "".join(fragments), flags=re.M)
    (tmp_path / "fragments.c").write_text(
        "#include <agentmem.h>\n#include <stdio.h>\n\nvoid fragments(void) {\n" + body + "}\n")
    env = clean_env(PKG_CONFIG_PATH=libdir / "pkgconfig", PKG_CONFIG_SYSROOT_DIR=destdir)
    flags = run(["pkg-config", "--cflags", "agentmem"], env=env).stdout.split()
    run(["cc", "-fsyntax-only", "-Wall", "-Werror", *flags, tmp_path / "fragments.c"], env=env)


def test_the_installed_shell_runs_against_the_installed_library(destdir, libdir, tmp_path):
    shell = under_prefix(destdir, "bindir", "agentmem")
    assert str(BUILD.resolve()) not in run(["readelf", "-d", shell]).stdout  # no build RPATH
    env = clean_env(LD_LIBRARY_PATH=libdir)
    assert run([shell, "-version"], env=env).stdout.strip() == f"agentmem {version()}"
    out = run([shell, tmp_path / "bot.agentmem",
               "INSERT INTO episodes(user_id, text) VALUES ('alice', 'I moved to Lisbon.')",
               "SELECT text FROM recall('lisbon', 'alice', 3)"], env=env, cwd=tmp_path).stdout
    assert out.splitlines() == ["I moved to Lisbon."]


def rendered_man_page(page):
    """(text, warnings) of the page formatted for a 200-column UTF-8 terminal, with groff's
    typographic hyphens, minus signs and quotes given back as the ASCII the doc has."""
    env = clean_env(LC_ALL="C.UTF-8", MANWIDTH="200", MANPAGER="cat", PAGER="cat")
    if shutil.which("man"):
        proc = run(["man", "--warnings", "-l", page], env=env)
    else:
        proc = run(["groff", "-man", "-Tutf8", "-ww", "-P-c", "-P-b", "-P-u", page], env=env)
    text = proc.stdout.translate(str.maketrans({"\u2010": "-", "\u2212": "-", "\u2018": "'",
                                                "\u2019": "'", "\u201c": '"', "\u201d": '"'}))
    return text, proc.stderr


def test_the_installed_man_page_renders_what_docs_shell_md_says(destdir):
    text, warnings = rendered_man_page(under_prefix(destdir, "mandir", "man1", "agentmem.1"))
    assert warnings == ""
    flat = " ".join(text.split())
    doc = (REPO / "docs" / "shell.md").read_text()
    assert flat.startswith("AGENTMEM(1)") and f"agentmem {version()}" in flat

    def plain(markdown):
        return " ".join(markdown.replace("`", "").replace("\\|", "|").split())

    for heading in re.findall(r"^## (.+)$", doc, re.M):
        assert plain(heading).upper() in flat
    for heading in re.findall(r"^### (.+)$", doc, re.M):
        assert plain(heading) in flat
    for first_cell in re.findall(r"^\| *(.+?) *(?<!\\)\|", doc, re.M):
        if not set(first_cell) <= set("-: "):
            assert plain(first_cell) in flat
    # The first sentence of the description, whole.
    first = plain(doc.split("\n\n", 2)[1].split(". ")[0])
    assert plain(re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", first)) in flat


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A clean venv over Debian's python3 (for its python3-mesonpy) with `pip install
    --no-build-isolation` of the repository done in it, run from outside the clone."""
    if subprocess.run([DEBIAN_PYTHON, "-c", "import mesonpy"], capture_output=True).returncode:
        pytest.fail(f"{DEBIAN_PYTHON} cannot import mesonpy: install python3-mesonpy (make deps)")
    where = tmp_path_factory.mktemp("venv")
    run([DEBIAN_PYTHON, "-m", "venv", "--system-site-packages", where / "venv"], env=clean_env())
    # Debian's meson-python 0.12 reuses a build folder only while its native file in the
    # source root matches: a fresh folder and no native file always configure from scratch.
    shutil.rmtree(WHEEL_BUILD, ignore_errors=True)
    (REPO / ".mesonpy-native-file.ini").unlink(missing_ok=True)
    python = where / "venv" / "bin" / "python3"
    # At -O0: what is checked is the packaging, and the wheel's library at
    # pyproject.toml's -O3 took minutes of make test.
    run([python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index",
         f"--config-settings=builddir={WHEEL_BUILD}",
         "--config-settings=setup-args=-Doptimization=0", REPO],
        timeout=900, cwd=where, env=clean_env())
    return python


def site_package(python):
    out = run([python, "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
              env=clean_env()).stdout.strip()
    return Path(out) / "agentmem"


SCRIPT = """
import agentmem
mem = agentmem.Memory("bot.agentmem")
turn = mem.remember_sync("alice", "I moved to Lisbon last spring.")
print(agentmem.__file__)
print(agentmem.library_path())
print(mem.recall_scored_sync("alice", "where does she live? Lisbon")[0].text)
print(len(mem.get_episode_sync(turn).vector))
mem.close()
"""


def test_pip_install_builds_a_wheel_whose_package_carries_the_library(venv):
    package = site_package(venv)
    assert (package / "libagentmem.so").is_file()
    modules = {p.name for p in (REPO / "python" / "agentmem").glob("*.py")}
    assert {p.name for p in package.glob("*.py")} == modules


def test_the_pip_installed_package_remembers_and_recalls_with_no_environment_variable(venv,
                                                                                      tmp_path):
    out = run([venv, "-c", SCRIPT], cwd=tmp_path, env=clean_env()).stdout.splitlines()
    package = site_package(venv)
    assert out[0] == str(package / "__init__.py")
    assert out[1] == str(package / "libagentmem.so")
    assert out[2] == "I moved to Lisbon last spring."
    assert (tmp_path / "bot.agentmem").is_file()


def test_agentmem_lib_still_overrides_the_library_in_the_package(venv, tmp_path):
    built = (BUILD / "engine" / "libagentmem.so").resolve()
    out = run([venv, "-c", SCRIPT], cwd=tmp_path, env=clean_env(AGENTMEM_LIB=built)).stdout
    assert out.splitlines()[1] == str(built)


def test_the_wheel_links_the_glove_table_when_the_build_under_test_does(venv, tmp_path):
    """The wheel's build takes the same -Dglove_table=auto: both embed a new file's turns with
    the same embedder (100 dimensions with the table, 384 without)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    bundled = run([venv, "-c", SCRIPT], cwd=tmp_path / "a", env=clean_env()).stdout
    built = run([venv, "-c", SCRIPT], cwd=tmp_path / "b",
                env=clean_env(AGENTMEM_LIB=(BUILD / "engine" / "libagentmem.so").resolve())).stdout
    assert bundled.splitlines()[3] == built.splitlines()[3]

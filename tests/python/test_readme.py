"""The README's Python quick start: five lines whose output, shown in the README, matches a run."""

import re

import pytest

import agentmem
from support import REPO, run_python


def quick_start():
    """(the script, the output lines) of the README's "## Python" section."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    script = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"```\n\$ [^\n]*\n(.*?)```", section, re.S).group(1)
    return script, shown.splitlines()


def test_the_quick_start_is_five_lines():
    script, _ = quick_start()
    assert len(script.splitlines()) == 5


def has_glove():
    """Whether the loaded library embeds new files with agentmem-glove-v2 (100 dimensions)."""
    mem = agentmem.Memory(":memory:")
    try:
        return len(mem.get_episode_sync(mem.remember_sync("u", "hello")).vector) == 100
    finally:
        mem.close()


def test_the_quick_start_prints_what_the_readme_shows(tmp_path):
    if not has_glove():
        pytest.skip("the README shows agentmem-glove-v2 scores; this library has no GloVe table")
    script, shown = quick_start()
    out = run_python(script, cwd=tmp_path).stdout.splitlines()
    assert out == shown
    assert (tmp_path / "bot.agentmem").is_file()

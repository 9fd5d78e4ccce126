"""agentmem.recover: salvage of a damaged file from Python (agentmem_recover,
docs/recovery.md) -- the report as a dict, the salvaged file, failures as exceptions."""

import os

import pytest

import agentmem
from support import requires


def three_commits(path):
    """Three episodes, one commit each; returns where the log ends after each commit."""
    sizes = []
    with agentmem.Memory(path) as mem:
        for i, text in enumerate(["Alice moved to Lisbon.", "Alice adopted a cat named Miso.",
                                  "Alice learns the cello."]):
            mem.remember_sync("alice", text, session_id=f"s{i}")
            sizes.append(mem.stats_sync()["file_bytes"])
    return sizes


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x5A]))


@requires("agentmem_recover")
def test_recover_of_a_damaged_file_keeps_the_whole_transactions_and_reports_the_lost_one(tmp_path):
    src, dst = tmp_path / "src.agentmem", tmp_path / "dst.agentmem"
    sizes = three_commits(src)
    flip(src, sizes[0] + 40)  # inside the first page of the second commit
    with pytest.raises(agentmem.CorruptError):
        agentmem.Memory(src, create=False)
    report = agentmem.recover(src, dst)
    assert isinstance(report, dict)
    assert report["clean"] is False
    assert report["destination"] == str(dst)
    assert report["episodes_lost"] == [2]
    assert report["episodes_lost_count"] == 1
    assert len(report["damaged"]) == 1
    with agentmem.Memory(dst, create=False) as saved:
        assert [e.id for e in saved.episodes_sync("alice")] == [1, 3]
        assert saved.recall_scored_sync("alice", "cello", mode="bm25")[0].id == 3


@requires("agentmem_recover")
def test_recover_without_a_destination_only_reports(tmp_path):
    src = tmp_path / "src.agentmem"
    three_commits(src)
    before = src.read_bytes()
    report = agentmem.recover(str(src))
    assert report["clean"] is True
    assert report["destination"] is None
    assert report["episodes_lost_count"] == 0
    assert src.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["src.agentmem"]


@requires("agentmem_recover")
def test_recover_failures_raise_the_error_of_their_code_and_leave_no_file(tmp_path):
    src, dst = tmp_path / "src.agentmem", tmp_path / "dst.agentmem"
    three_commits(src)
    agentmem.recover(src, dst)
    with pytest.raises(agentmem.OperationalError) as e:
        agentmem.recover(src, dst)
    assert e.value.name == "AGENTMEM_CANTOPEN_EXISTS"
    assert "exists" in e.value.message
    junk = tmp_path / "junk"
    junk.write_bytes(b"j" * 5000)
    with pytest.raises(agentmem.CorruptError) as e:
        agentmem.recover(junk, tmp_path / "out.agentmem")
    assert e.value.name == "AGENTMEM_NOTADB"
    assert not (tmp_path / "out.agentmem").exists()
    with pytest.raises(agentmem.OperationalError) as e:
        agentmem.recover(tmp_path / "missing.agentmem", tmp_path / "out.agentmem")
    assert e.value.primary == agentmem.CODES["AGENTMEM_CANTOPEN"]
    with pytest.raises(ValueError):
        agentmem.recover("a\0b", tmp_path / "out.agentmem")

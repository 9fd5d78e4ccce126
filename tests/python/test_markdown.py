"""Memory.export_markdown / import_markdown: the MEMORY.md file (docs/markdown.md)."""

import asyncio

import pytest

import agentmem

T2023 = 1_672_531_200_000_000  # 2023-01-01T00:00:00Z


def _seed(mem):
    mem.set_block_sync("alice", "persona", "Warm and brief.\nNever guesses.", pinned_order=0)
    tokyo = mem.add_fact_sync("alice", "alice", "lives_in", "Tokyo", confidence=0.9,
                              valid_from=T2023)
    mem.remember_sync("alice", "I moved to Tokyo", session_id="s1", ts=T2023)
    return tokyo


def test_an_edited_block_and_fact_keep_both_versions_in_their_history(mem):
    tokyo = _seed(mem)
    text = mem.export_markdown_sync("alice")
    assert f"| alice | lives_in | Tokyo | 2023-01-01 |  | 0.9 | {tokyo} |" in text
    known_before = mem.recall_facts_sync("alice")[0].recorded_at
    edited = text.replace("Never guesses.", "Never guesses; asks.").replace("| Tokyo |",
                                                                          "| Osaka |")
    report = mem.import_markdown_sync("alice", edited)
    assert report["block_versions"] == 1
    assert report["facts_asserted"] == 1
    assert report["facts_superseded"] == 1
    assert [c.get("supersedes") for c in report["changes"]] == [None, tokyo]
    history = mem.connection.execute(
        "SELECT value FROM block_history(?, ?)", ("alice", "persona")).fetchall()
    assert [v for (v,) in history] == ["Warm and brief.\nNever guesses.",
                                       "Warm and brief.\nNever guesses; asks."]
    assert [f.object for f in mem.recall_facts_sync("alice", known_at=known_before)] == ["Tokyo"]
    assert [f.object for f in mem.recall_facts_sync("alice")] == ["Osaka"]
    assert len(mem.recall_facts_sync("alice", all_versions=True)) == 2


def test_an_unchanged_round_trip_writes_nothing(mem):
    _seed(mem)
    text = mem.export_markdown_sync("alice")
    before = mem.stats_sync()
    report = mem.import_markdown_sync("alice", text)
    assert report["changes"] == []
    assert report["blocks_unchanged"] == 1 and report["facts_unchanged"] == 1
    after = mem.stats_sync()
    assert (after["commits"], after["block_versions"], after["facts"]) == \
        (before["commits"], before["block_versions"], before["facts"])
    assert mem.export_markdown_sync("alice") == text


def test_a_malformed_line_is_refused_with_its_number_and_nothing_is_written(mem):
    _seed(mem)
    text = mem.export_markdown_sync("alice")
    bad = text.replace("Warm and brief.", "Changed.").replace("| 0.9 |", "| lots |")
    line = bad[:bad.index("| lots |")].count("\n") + 1
    with pytest.raises(agentmem.DataError, match=f"markdown line {line}: confidence"):
        mem.import_markdown_sync("alice", bad)
    nul = text.replace("Warm", "Wa\0rm")
    line = nul[:nul.index("\0")].count("\n") + 1
    with pytest.raises(agentmem.errors.NulCharacterError, match=f"markdown line {line}: holds a NUL"):
        mem.import_markdown_sync("alice", nul)
    with pytest.raises(agentmem.errors.NulCharacterError, match=f"markdown line {line}: holds"):
        mem.import_markdown_sync("alice", nul.encode())
    assert mem.export_markdown_sync("alice") == text


def test_a_very_long_line_reads_back_whole(mem):
    value = "x" * (2 << 20)
    report = mem.import_markdown_sync("alice", f"## Blocks\n### big\n```\n{value}\n```\n")
    assert report["block_versions"] == 1
    assert mem.get_block_sync("alice", "big").value == value


def test_a_user_with_no_memory_gets_a_minimal_document_that_reads_back(mem):
    text = mem.export_markdown_sync("nobody")
    assert "# Memory of nobody" in text and "## Facts" in text
    assert mem.import_markdown_sync("nobody", text)["changes"] == []


def test_the_async_twins_export_and_import(mem):
    async def run():
        await mem.set_block("bob", "notes", "hello")
        text = await mem.export_markdown("bob")
        return await mem.import_markdown("bob", text.replace("hello", "hello again"))
    assert asyncio.run(run())["block_versions"] == 1

"""User isolation: nothing of one user is ever returned for another, through any method."""

import json

import pytest

from support import requires


@pytest.fixture
def two_users(mem):
    mem.remember_sync("alice", "I moved to Lisbon last spring.", session_id="s1")
    mem.remember_sync("alice", "My sister visits in June.", session_id="s1")
    mem.remember_sync("bob", "Lisbon is too hot for me, I moved to Oslo.", session_id="s1")
    mem.add_fact_sync("alice", "alice", "lives_in", "Lisbon")
    mem.add_fact_sync("bob", "bob", "lives_in", "Oslo")
    mem.set_block_sync("alice", "profile", "Alice: Lisbon", pinned_order=0)
    mem.set_block_sync("bob", "profile", "Bob: Oslo", pinned_order=0)
    return mem


def test_recall_never_returns_another_users_episodes(two_users):
    mem = two_users
    for mode in ("hybrid", "bm25", "vector"):
        for user in ("alice", "bob"):
            # fill: every vector neighbour and every episode of the partition
            # comes back, and still only the user's own
            hits = mem.recall_scored_sync(user, "moved lisbon oslo hot", 50, mode=mode, fill=True)
            assert hits and {h.user_id for h in hits} == {user}
            assert {h.user_id for h in mem.recall_scored_sync(user, "moved lisbon oslo hot", 50,
                                                              mode=mode)} <= {user}
            found = mem.recall_sync(user, "lisbon", 50, mode=mode, fill=True)
            assert {e.user_id for e in found} == {user}
    assert mem.recall_scored_sync("carol", "lisbon") == []


def test_all_users_is_the_only_way_to_search_across_users(two_users):
    hits = two_users.recall_scored_sync(None, "lisbon", 50, all_users=True)
    assert {h.user_id for h in hits} == {"alice", "bob"}


def test_episodes_facts_and_blocks_are_per_user_even_with_the_same_session_and_names(two_users):
    mem = two_users
    assert {e.user_id for e in mem.episodes_sync("alice", "s1")} == {"alice"}
    assert [f.object for f in mem.recall_facts_sync("alice")] == ["Lisbon"]
    assert [f.object for f in mem.facts_sync("bob")] == ["Oslo"]
    assert mem.get_block_sync("alice", "profile").value == "Alice: Lisbon"
    assert mem.get_block_sync("bob", "profile").value == "Bob: Oslo"
    assert [b.value for b in mem.blocks_sync("bob")] == ["Bob: Oslo"]


def test_sql_recall_for_one_user_stays_in_that_users_partition(two_users):
    rows = two_users.connection.execute(
        "SELECT DISTINCT user_id FROM recall('lisbon oslo', 'bob', 50)").fetchall()
    assert rows == [("bob",)]


@requires("agentmem_export")
def test_export_holds_only_that_users_memory(two_users):
    lines = [json.loads(x) for x in two_users.export_sync("alice").splitlines()]
    assert {x["user_id"] for x in lines} == {"alice"}
    assert "Oslo" not in two_users.export_sync("alice")


@requires("agentmem_context")
def test_context_assembles_only_that_users_memory(two_users):
    items = two_users.context_sync("alice", "where does she live", 1000)
    assert items and not any("Oslo" in i.text or "Bob" in i.text for i in items)

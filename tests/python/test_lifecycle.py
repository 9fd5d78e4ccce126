"""Lifecycle through Python: forgetting with receipts, vacuum, single-valued
predicates and facts on both time axes. Each test is skipped against a library without the
C function it needs."""

import asyncio
import datetime
import time

import pytest

import agentmem
from support import requires

DAY = 86_400_000_000
T0 = 1_700_000_000_000_000
BOB_TEXT = "Bob's secret: the locker code is 4417 and the key is under the blue mat."


@pytest.fixture
def two_users(mem):
    mem.remember_sync("alice", "I moved to Lisbon last spring.", session_id="a1")
    mem.remember_sync("alice", "My sister visits in June.", session_id="a2")
    bob = mem.remember_sync("bob", BOB_TEXT, session_id="b1")
    mem.add_fact_sync("bob", "bob", "locker", "4417", sources=[bob])
    # enough of Bob for the rewrite to reclaim more than a vacuum adds (indexes, checkpoint)
    mem.remember_many_sync("bob", [f"Bob's note {i}: " + "lorem ipsum dolor " * 12
                                   for i in range(300)], session_id="b2")
    mem.set_block_sync("bob", "profile", "Bob keeps secrets.")
    return mem


def alice_view(mem):
    return [(h.id, h.score, h.bm25_rank, h.vector_rank)
            for h in mem.recall_scored_sync("alice", "where does she live lisbon sister")]


@requires("agentmem_forget")
def test_forgetting_a_user_removes_everything_of_theirs_and_nothing_else(two_users):
    mem = two_users
    before = alice_view(mem)
    receipt = mem.forget_sync("bob")
    assert (receipt.episodes, receipt.facts, receipt.block_versions) == (301, 1, 1)
    assert not receipt.vacuumed
    assert mem.recall_scored_sync("bob", "locker code") == []
    assert mem.episodes_sync("bob") == [] and mem.facts_sync("bob") == []
    assert mem.get_block_sync("bob", "profile") is None
    assert mem.connection.execute("SELECT count(*) FROM episodes WHERE user_id = 'bob'") \
        .fetchone() == (0,)
    assert alice_view(mem) == before


@requires("agentmem_forget")
def test_purge_rewrites_the_file_without_the_forgotten_bytes_and_proves_it(two_users, path):
    mem = two_users
    receipt = mem.forget_sync("bob", purge=True)
    assert receipt.vacuumed and receipt.residue == 0 and receipt.needles > 0
    assert receipt.bytes_after < receipt.bytes_before
    assert BOB_TEXT.encode() not in path.read_bytes()
    assert [e.text for e in mem.episodes_sync("alice")] == ["I moved to Lisbon last spring.",
                                                            "My sister visits in June."]


@requires("agentmem_forget")
def test_forget_by_session_or_by_time_takes_only_those_episodes(mem):
    old = mem.remember_sync("alice", "old turn", session_id="s1", ts=T0)
    mem.remember_sync("alice", "newer turn", session_id="s1", ts=T0 + 2 * DAY)
    mem.remember_sync("alice", "other session", session_id="s2", ts=T0 + 3 * DAY)
    assert mem.forget_sync("alice", before=T0 + DAY).episodes == 1
    assert mem.get_episode_sync(old) is None
    assert mem.forget_sync("alice", session_id="s1").episodes == 1
    assert [e.text for e in mem.episodes_sync("alice")] == ["other session"]
    assert mem.forget_sync("nobody").episodes == 0  # nothing to forget is not an error


@requires("agentmem_forget_episode")
def test_forgetting_one_episode_forgets_the_facts_it_alone_supports(mem):
    a = mem.remember_sync("alice", "I live in Tokyo.")
    b = mem.remember_sync("alice", "Tokyo is home.")
    only_a = mem.add_fact_sync("alice", "alice", "lives_in", "Tokyo", sources=[a])
    both = mem.add_fact_sync("alice", "alice", "home", "Tokyo", sources=[a, b])
    receipt = mem.forget_episode_sync(a)
    assert (receipt.episodes, receipt.facts) == (1, 1)
    assert [f.id for f in mem.facts_sync("alice")] == [both]
    assert only_a not in [f.id for f in mem.recall_facts_sync("alice")]


@requires("agentmem_forget_fact")
@requires("agentmem_forget_block")
def test_forgetting_one_fact_or_one_block_takes_only_that(mem):
    keep = mem.add_fact_sync("alice", "alice", "likes", "tea")
    drop = mem.add_fact_sync("alice", "alice", "likes", "coffee")
    assert mem.forget_fact_sync(drop).facts == 1
    assert [f.id for f in mem.facts_sync("alice")] == [keep]
    mem.set_block_sync("alice", "notes", "v1")
    mem.set_block_sync("alice", "notes", "v2")
    mem.set_block_sync("alice", "profile", "p")
    assert mem.forget_block_sync("alice", "notes").block_versions == 2
    assert [b.name for b in mem.blocks_sync("alice")] == ["profile"]


@requires("agentmem_forget")
def test_a_forget_inside_a_transaction_applies_at_commit_and_cannot_purge(two_users):
    mem = two_users
    with mem.connection:
        assert mem.forget_sync("bob").episodes == 0  # counted at COMMIT
        with pytest.raises(agentmem.ProgrammingError) as e:
            mem.forget_sync("bob", purge=True)
        assert e.value.code == agentmem.CODES["AGENTMEM_MISUSE"]
    assert mem.episodes_sync("bob") == []


@requires("agentmem_vacuum")
def test_vacuum_shrinks_the_file_after_forgetting_and_keeps_ids(two_users, path):
    mem = two_users
    ids = [e.id for e in mem.episodes_sync("alice")]
    mem.forget_sync("bob")
    receipt = mem.vacuum_sync()
    assert receipt.vacuumed and receipt.bytes_after < receipt.bytes_before
    assert path.stat().st_size == receipt.bytes_after
    assert [e.id for e in mem.episodes_sync("alice")] == ids
    with pytest.raises(agentmem.ProgrammingError):
        with mem.connection:
            mem.vacuum_sync()  # not inside a transaction


@requires("agentmem_vacuum")
def test_another_handle_keeps_reading_across_a_vacuum(two_users, path):
    reader = agentmem.Memory(path, readonly=True)
    before = alice_view(reader)
    two_users.vacuum_sync()
    assert alice_view(reader) == before
    reader.close()


@requires("agentmem_predicate_declare")
@requires("agentmem_facts_v2")
def test_a_single_valued_predicate_answers_on_both_time_axes(mem):
    mem.declare_predicate_sync("lives_in")
    mem.add_fact_sync("alice", "alice", "lives_in", "Tokyo", valid_from=T0)
    mem.add_fact_sync("bob", "bob", "lives_in", "Oslo", valid_from=T0)
    time.sleep(0.002)
    known_before_move = max(f.recorded_at for f in mem.facts_sync("alice")) + 1
    time.sleep(0.002)
    mem.add_fact_sync("alice", "alice", "lives_in", "Osaka", valid_from=T0 + 30 * DAY)
    now = mem.recall_facts_sync("alice", predicate="lives_in")
    assert [f.object for f in now] == ["Osaka"]
    then = mem.recall_facts_sync("alice", predicate="lives_in", valid_at=T0 + DAY)
    assert [(f.object, f.valid_to) for f in then] == [("Tokyo", T0 + 30 * DAY)]
    believed = mem.recall_facts_sync("alice", predicate="lives_in", known_at=known_before_move)
    assert [f.object for f in believed] == ["Tokyo"]
    versions = mem.recall_facts_sync("alice", "alice", "lives_in", all_versions=True)
    assert sorted(f.object for f in versions) == ["Osaka", "Tokyo", "Tokyo"]
    assert [f.object for f in mem.recall_facts_sync("alice", object="Tokyo",
                                                    valid_at=T0 + DAY)] == ["Tokyo"]
    assert {f.user_id for f in versions} == {"alice"}  # Bob's facts never appear


@requires("agentmem_forget")
@requires("agentmem_vacuum")
def test_async_lifecycle_methods_match_their_sync_twins(two_users):
    mem = two_users

    async def run():
        return await mem.forget("bob", session_id="b1"), await mem.vacuum()

    forgot, vacuumed = asyncio.run(run())
    assert forgot.episodes == 1 and vacuumed.vacuumed
    assert len(mem.episodes_sync("bob")) == 300
    assert mem.forget_sync("bob", session_id="b1").episodes == 0


def test_a_missing_lifecycle_function_is_named_in_the_error(mem, monkeypatch):
    """Against an older library: the method raises NotImplementedError naming the C function."""
    lib = agentmem._capi.lib()
    real_has = lib.has
    monkeypatch.setattr(lib, "has", lambda name: name != "agentmem_forget" and real_has(name))
    with pytest.raises(NotImplementedError, match=r"agentmem_forget\(\)") as e:
        mem.forget_sync("alice")
    assert isinstance(e.value, agentmem.MissingFunctionError)
    assert e.value.function == "agentmem_forget"


@requires("agentmem_retention_set")
@requires("agentmem_retention_get")
def test_a_retention_policy_is_stored_in_the_file_and_applied_by_the_commit_that_sets_it(path):
    with agentmem.Memory(path) as mem:
        assert mem.retention_sync() == (0, False)
        old = mem.remember_sync("alice", "an old turn", ts=T0)
        cited = mem.remember_sync("alice", "an old turn a fact cites", ts=T0)
        mem.add_fact_sync("alice", "alice", "said", "something", sources=[cited])
        new = mem.remember_sync("alice", "a turn of today")
        mem.set_retention_sync(datetime.timedelta(days=30), keep_cited=True)
        assert mem.get_episode_sync(old) is None  # applied after the commit, once due
        assert [e.id for e in mem.episodes_sync("alice")] == [cited, new]
    with agentmem.Memory(path) as mem:
        assert mem.retention_sync() == (30 * 86400, True)
        assert [e.id for e in mem.episodes_sync("alice")] == [cited, new]
        asyncio.run(mem.set_retention(None))
        assert asyncio.run(mem.retention()) == (0, False)

"""Memory: a round trip through every method, sync and async (docs/python.md)."""

import asyncio
import datetime
import json

import pytest

import agentmem
from support import requires

DAY = 86_400_000_000  # one day in microseconds
T0 = 1_700_000_000_000_000


def test_remember_keeps_every_field_and_get_episode_returns_it(path):
    mem = agentmem.Memory(path, embedder="agentmem-hash-v1")  # 384 dimensions
    vec = [0.0] * 383 + [1.0]
    eid = mem.remember_sync("alice", "I moved to Lisbon.", session_id="s1", role="assistant",
                            ts=T0, metadata={"channel": "chat", "n": 2}, vector=vec)
    ep = mem.get_episode_sync(eid)
    assert (ep.id, ep.user_id, ep.session_id, ep.role, ep.text, ep.ts) == \
        (eid, "alice", "s1", "assistant", "I moved to Lisbon.", T0)
    assert ep.metadata == {"channel": "chat", "n": 2}
    assert ep.vector == tuple(vec)
    assert ep.created_at > 0
    assert mem.get_episode_sync(eid + 1000) is None
    mem.close()


def test_a_datetime_is_taken_as_an_event_time(mem):
    when = datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc)
    eid = mem.remember_sync("alice", "May Day", ts=when)
    assert mem.get_episode_sync(eid).ts == 1_714_521_600_000_000


def test_episodes_lists_a_user_in_order_and_filters_by_session(mem):
    ids = [mem.remember_sync("alice", f"turn {i}", session_id=f"s{i % 2}") for i in range(5)]
    assert [e.id for e in mem.episodes_sync("alice")] == ids
    assert [e.id for e in mem.episodes_sync("alice", "s1")] == ids[1::2]
    assert mem.episodes_sync("nobody") == []


def test_remember_many_writes_all_turns_in_one_commit(mem):
    before = mem.stats_sync()["commits"]
    ids = mem.remember_many_sync("alice", ["one", "two", "three"], session_id="s")
    assert mem.stats_sync()["commits"] == before + 1
    assert [e.text for e in mem.episodes_sync("alice")] == ["one", "two", "three"]
    assert ids == sorted(ids)


def test_recall_scored_returns_hybrid_matches_with_both_scores_best_first(mem):
    a = mem.remember_sync("alice", "I moved to Lisbon last spring.", session_id="s1")
    b = mem.remember_sync("alice", "My sister visits in June.", session_id="s2")  # not a's context
    hits = mem.recall_scored_sync("alice", "where does she live lisbon")
    assert [h.id for h in hits] == [a]  # the sister's visit does not match
    hits = mem.recall_scored_sync("alice", "where does she live lisbon", fill=True)
    assert [h.id for h in hits] == [a, b]
    top = hits[0]
    assert top.bm25_rank == 1 and top.vector_rank == 1
    assert top.bm25_score > 0 and top.vector_score > 0
    assert top.score == pytest.approx(1.0)  # the best of both lists: 0.9 + 0.1 (docs/recall.md)
    assert hits[1].bm25_rank == 0 and hits[1].bm25_score == 0


def test_recall_returns_full_episodes_in_the_order_of_recall_scored(mem):
    mem.remember_sync("alice", "I moved to Lisbon last spring.", metadata={"m": 1})
    mem.remember_sync("alice", "Lisbon Lisbon Lisbon, the city.")
    mem.remember_sync("alice", "Dinner was pasta.")
    scored = [h.id for h in mem.recall_scored_sync("alice", "lisbon", 2)]
    episodes = mem.recall_sync("alice", "lisbon", 2)
    assert [e.id for e in episodes] == scored
    assert all(isinstance(e, agentmem.Episode) for e in episodes)


def test_recall_modes_and_filters_reach_the_engine(mem):
    mem.remember_sync("alice", "pasta for dinner", session_id="s1", role="user", ts=T0,
                      metadata={"channel": "chat"})
    mem.remember_sync("alice", "pasta again", session_id="s2", role="assistant", ts=T0 + DAY,
                      metadata={"channel": "mail"})
    texts = lambda **kw: [h.text for h in mem.recall_scored_sync("alice", "pasta", **kw)]
    assert texts(session_id="s2") == ["pasta again"]
    assert texts(role="user") == ["pasta for dinner"]
    assert texts(ts_from=T0 + 1) == ["pasta again"]
    assert texts(ts_to=datetime.datetime.fromtimestamp((T0 + 1) / 1e6)) == ["pasta for dinner"]
    assert texts(metadata=("channel", "mail")) == ["pasta again"]
    assert texts(k=1) and len(texts(k=1)) == 1
    bm25 = mem.recall_scored_sync("alice", "pasta", mode="bm25")
    assert all(h.vector_rank == 0 for h in bm25) and all(h.bm25_rank > 0 for h in bm25)
    vector = mem.recall_scored_sync("alice", "pasta", mode="vector")
    assert all(h.bm25_rank == 0 for h in vector) and all(h.vector_rank > 0 for h in vector)
    assert texts(min_score=1.5) == []  # no fused score reaches 1.5


def test_explain_recall_returns_the_plan_and_the_same_hits(mem):
    for t in ("Lisbon in spring", "Tokyo in autumn"):
        mem.remember_sync("alice", t)
    plan = mem.explain_recall_sync("alice", "lisbon", 5)
    assert plan["mode"] == "hybrid"
    assert [h["id"] for h in plan["hits"]] == [h.id for h in mem.recall_scored_sync("alice",
                                                                                   "lisbon", 5)]


def test_a_query_vector_is_used_on_a_file_with_an_external_embedder(tmp_path):
    mem = agentmem.Memory(tmp_path / "ext.agentmem", vector_dim=3, embedder="my-model")
    near = mem.remember_sync("alice", "first", vector=[1, 0, 0])
    far = mem.remember_sync("alice", "second", vector=[0, 1, 0])
    hits = mem.recall_scored_sync("alice", "anything", mode="vector", query_vector=[0.9, 0.1, 0])
    assert [h.id for h in hits] == [near, far]
    assert hits[0].vector_score == pytest.approx(0.9 / (0.82 ** 0.5), rel=1e-6)
    mem.close()


def test_facts_round_trip_with_their_valid_time(mem):
    src = mem.remember_sync("alice", "I live in Tokyo.")
    tokyo = mem.add_fact_sync("alice", "alice", "lives_in", "Tokyo", confidence=0.5,
                              valid_from=T0, valid_to=T0 + 10 * DAY, sources=[src])
    osaka = mem.add_fact_sync("alice", "alice", "lives_in", "Osaka", valid_from=T0 + 10 * DAY)
    mem.add_fact_sync("alice", "alice", "likes", "tea", valid_from=T0)
    now = mem.recall_facts_sync("alice", predicate="lives_in")
    assert [f.object for f in now] == ["Osaka"]
    assert now[0].valid_to is None and now[0].expired_at is None
    before = mem.recall_facts_sync("alice", "alice", "lives_in", valid_at=T0 + DAY)
    assert [(f.id, f.object) for f in before] == [(tokyo, "Tokyo")]
    fact = before[0]
    assert fact.confidence == pytest.approx(0.5)
    assert fact.source_episode_ids == (src,)
    assert (fact.valid_from, fact.valid_to) == (T0, T0 + 10 * DAY)
    assert [f.object for f in mem.recall_facts_sync("alice", valid_at=T0 + DAY)] == \
        ["Tokyo", "tea"]
    assert [f.id for f in mem.facts_sync("alice")] == [tokyo, osaka, tokyo + 2]
    assert [f.object for f in mem.facts_sync("alice", predicate="likes")] == ["tea"]


def test_blocks_round_trip_and_keep_the_newest_version(mem):
    assert mem.get_block_sync("alice", "profile") is None
    mem.set_block_sync("alice", "profile", "Lives in Tokyo.", limit=100, pinned_order=0)
    first = mem.get_block_sync("alice", "profile")
    mem.set_block_sync("alice", "profile", "Lives in Osaka.", limit=100, pinned_order=0)
    mem.set_block_sync("alice", "notes", "likes tea")
    block = mem.get_block_sync("alice", "profile")
    assert (block.user_id, block.name, block.value, block.limit, block.pinned_order) == \
        ("alice", "profile", "Lives in Osaka.", 100, 0)
    assert block.version > first.version
    assert mem.get_block_sync("alice", "notes").pinned_order is None
    assert [b.name for b in mem.blocks_sync("alice")] == ["notes", "profile"]
    history = mem.connection.execute("SELECT value FROM block_history('alice', 'profile')")
    assert history.fetchall() == [("Lives in Tokyo.",), ("Lives in Osaka.",)]


def test_stats_count_what_was_written(mem):
    mem.remember_sync("alice", "one")
    mem.set_block_sync("bob", "b", "v")
    st = mem.stats_sync()
    assert (st["episodes"], st["blocks"], st["users"]) == (1, 1, 2)


def test_every_async_method_gives_what_its_sync_twin_gives(mem):
    async def run():
        eid = await mem.remember("alice", "I moved to Lisbon.", session_id="s1")
        await mem.remember_many("alice", ["Lisbon is sunny.", "I like tea."])
        await mem.set_block("alice", "profile", "Lisbon", pinned_order=0)
        await mem.add_fact("alice", "alice", "lives_in", "Lisbon", sources=[eid])
        return {
            "get_episode": (await mem.get_episode(eid), mem.get_episode_sync(eid)),
            "episodes": (await mem.episodes("alice"), mem.episodes_sync("alice")),
            "recall": (await mem.recall("alice", "lisbon"), mem.recall_sync("alice", "lisbon")),
            "recall_scored": (await mem.recall_scored("alice", "lisbon", 2, mode="bm25"),
                              mem.recall_scored_sync("alice", "lisbon", 2, mode="bm25")),
            "explain": (await mem.explain_recall("alice", "tea"),
                        mem.explain_recall_sync("alice", "tea")),
            "facts": (await mem.recall_facts("alice"), mem.recall_facts_sync("alice")),
            "all_facts": (await mem.facts("alice"), mem.facts_sync("alice")),
            "block": (await mem.get_block("alice", "profile"),
                      mem.get_block_sync("alice", "profile")),
            "blocks": (await mem.blocks("alice"), mem.blocks_sync("alice")),
            "stats": (await mem.stats(), mem.stats_sync()),
        }
    results = asyncio.run(run())
    for name, (from_async, from_sync) in results.items():
        assert from_async == from_sync, name
    assert len(results["episodes"][0]) == 3


def test_async_methods_keep_the_sync_docstrings_and_names():
    assert agentmem.Memory.recall_scored.__name__ == "recall_scored"
    assert "recall_scored_sync" in agentmem.Memory.recall_scored.__doc__
    assert asyncio.iscoroutinefunction(agentmem.Memory.remember)


def test_resolve_opens_the_file_an_agentmem_url_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mem = agentmem.resolve("agentmem:./bot.agentmem")
    mem.remember_sync("alice", "hello")
    mem.close()
    assert (tmp_path / "bot.agentmem").is_file()
    again = agentmem.resolve(f"agentmem://{tmp_path}/bot.agentmem?sync=normal")
    assert [e.text for e in again.episodes_sync("alice")] == ["hello"]
    again.close()
    with agentmem.resolve("agentmem::memory:") as private:
        assert private.path == ":memory:"


@pytest.mark.parametrize("url", ["sqlite:./bot.db", "agentmem:", "./bot.agentmem", None])
def test_resolve_refuses_what_is_not_an_agentmem_url(url):
    with pytest.raises(ValueError):
        agentmem.resolve(url)


def test_async_with_closes_the_memory(path):
    async def run():
        async with agentmem.Memory(path) as m:
            await m.remember("alice", "x")
        return m
    m = asyncio.run(run())
    with pytest.raises(agentmem.ProgrammingError, match="closed"):
        m.remember_sync("alice", "y")


# ---------------------------------------------------------------- lifecycle

@requires("agentmem_context")
def test_context_puts_pinned_blocks_then_facts_then_episodes_within_the_budget(mem):
    mem.set_block_sync("alice", "profile", "Lives in Lisbon.", pinned_order=0)
    mem.add_fact_sync("alice", "alice", "lives_in", "Lisbon")
    mem.remember_sync("alice", "I moved to Lisbon last spring.")
    items = mem.context_sync("alice", "where in Lisbon does she live", 1000)
    assert [i.kind for i in items] == ["block", "fact", "episode"]
    assert items[0].name == "profile" and items[0].text == "Lives in Lisbon."
    assert all(i.reason for i in items)
    for budget in range(0, 40, 3):
        assert sum(i.tokens for i in mem.context_sync("alice", "Lisbon", budget)) <= budget


@requires("agentmem_profile")
def test_profile_summarises_one_user(mem):
    mem.remember_sync("alice", "one", session_id="a")
    mem.remember_sync("alice", "two", session_id="b")
    mem.remember_sync("bob", "three")
    profile = mem.profile_sync("alice")
    assert profile["user_id"] == "alice"
    assert (profile["episodes"], profile["sessions"]) == (2, 2)


@requires("agentmem_export")
@requires("agentmem_import")
def test_export_then_import_into_a_new_file_gives_the_same_export(mem, tmp_path):
    eid = mem.remember_sync("alice", "I moved to Lisbon.", metadata={"m": 1})
    mem.set_block_sync("alice", "profile", "Lisbon")
    mem.add_fact_sync("alice", "alice", "lives_in", "Lisbon", sources=[eid])
    mem.remember_sync("bob", "not exported")
    jsonl = mem.export_sync("alice")
    lines = [json.loads(line) for line in jsonl.splitlines()]
    assert {line.get("user_id") for line in lines} == {"alice"}
    other = agentmem.Memory(tmp_path / "copy.agentmem")
    assert other.import_jsonl_sync(jsonl) == 3
    assert other.import_jsonl_sync(jsonl) == 0
    assert other.export_sync("alice") == jsonl
    other.close()


@requires("agentmem_export")
@requires("agentmem_import")
def test_a_whole_file_export_restores_every_user_and_imports_once(mem, tmp_path):
    mem.remember_sync("alice", "I moved to Lisbon.", metadata={"m": [1, 2]})
    mem.remember_sync("bob", "bob's turn")
    backup = mem.export_sync()
    header = json.loads(backup.splitlines()[0])
    assert (header["scope"], header["version"]) == ("file", 3)
    other = agentmem.Memory(tmp_path / "restored.agentmem")
    assert other.import_jsonl_sync(backup) == 2
    assert other.import_jsonl_sync(backup) == 0
    assert other.export_sync() == backup
    other.close()


def test_an_export_of_other_text_settings_is_refused_by_a_default_file_and_restores_its_recall(
        tmp_path):
    texts = ["The runners were running in the parks", "A runner runs",
             "the park is big and the parks are green"]
    with agentmem.Memory(tmp_path / "a.agentmem", stem=1, stop_words=1, context=0) as a:
        a.remember_many_sync("ana", texts)
        backup = a.export_sync()
        want = [(m.id, m.score) for m in a.recall_scored_sync("ana", "the running parks")]
    header = json.loads(backup.splitlines()[0])
    assert header["tokenizer"] == "unicode-v1;stem=1;stop=1;min=1;max=0;own=3"
    with agentmem.Memory(tmp_path / "b.agentmem") as b:
        with pytest.raises(agentmem.DataError) as e:
            b.import_jsonl_sync(backup)
        assert e.value.name == "AGENTMEM_MISMATCH"
        assert "import line 1: the export's tokenizer" in e.value.message
        options = "tokenizer=unicode&stem=1&stop_words=1&context=0&own_weight=3"
        assert f'the open options "{options}"' in e.value.message
        assert b.stats_sync()["episodes"] == 0
    with agentmem.resolve(f"agentmem:{tmp_path / 'c.agentmem'}?{options}") as c:
        assert c.import_jsonl_sync(backup) == 3
        assert [(m.id, m.score) for m in c.recall_scored_sync("ana", "the running parks")] == want
        assert c.export_sync() == backup


def test_every_refusal_of_an_import_line_names_the_line(mem, tmp_path):
    mem.remember_sync("alice", "first")
    mem.remember_sync("alice", "beforeXafter")
    lines = mem.export_sync("alice").splitlines(keepends=True)
    assert "beforeXafter" in lines[2]
    cases = {
        "a raw NUL": lines[2].replace("beforeXafter", "before\0after"),
        "a NUL escape": lines[2].replace("beforeXafter", "before\\u0000after"),
        "an unpaired surrogate": lines[2].replace("beforeXafter", "before\\ud800"),
        "a line that is not JSON": lines[2][:20] + "\n",
    }
    with agentmem.Memory(tmp_path / "other.agentmem") as other:
        for what, bad in cases.items():
            jsonl = "".join(lines[:2]) + "\n" + bad   # a blank line 3: the bad one is line 4
            with pytest.raises(agentmem.DataError) as e:
                other.import_jsonl_sync(jsonl)
            assert e.value.message.startswith("import line 4: "), (what, e.value.message)
            assert other.stats_sync()["episodes"] == 0


@requires("agentmem_import_v2")
def test_import_with_new_ids_merges_a_user_into_a_file_whose_ids_moved_on(mem, tmp_path):
    src = mem.remember_sync("alice", "I moved to Lisbon.")
    mem.add_fact_sync("alice", "alice", "lives_in", "Lisbon", sources=[src])
    jsonl = mem.export_sync("alice")
    other = agentmem.Memory(tmp_path / "other.agentmem")
    taken = other.remember_sync("bob", "ids 1 and up are taken here")
    assert other.import_jsonl_sync(jsonl, new_ids=True) == 2
    assert other.import_jsonl_sync(jsonl, new_ids=True) == 0
    [episode] = other.episodes_sync("alice")
    assert episode.id > taken and episode.text == "I moved to Lisbon."
    assert other.facts_sync("alice")[0].source_episode_ids == (episode.id,)
    other.close()


def test_episodes_come_by_event_time_and_facts_list_only_remembered_sources(mem):
    t0 = 1_700_000_000_000_000
    late = mem.remember_sync("alice", "later", ts=t0 + 300)
    early = mem.remember_sync("alice", "earlier", ts=t0 + 100)
    tie = mem.remember_sync("alice", "earlier too", ts=t0 + 100)
    assert [e.id for e in mem.episodes_sync("alice")] == [early, tie, late]
    fact = mem.add_fact_sync("alice", "alice", "likes", "tea", sources=[late, early])
    mem.forget_episode_sync(late)
    assert [f.source_episode_ids for f in mem.facts_sync("alice") if f.id == fact] == [(early,)]

"""Recall through Python returns the same ids, order and scores as the C API for the same file.

The C side is tests/python/recall_dump.cc (agentmem_recall, printed with %.17g,
which a double survives exactly), built by meson in the build under test.
"""

import random
import subprocess

import pytest

import agentmem
from support import build_program

WORDS = ("lisbon tokyo osaka dinner pasta sister june spring moved visit train coffee tea "
         "garden music piano work office meeting doctor dentist birthday cake gift book movie "
         "weekend beach mountain rain snow flight hotel museum market bread cheese wine").split()
QUERIES = ["where does she live lisbon", "pasta dinner with wine", "doctor appointment",
           "birthday gift for my sister", "xylophone"]
BIG_USER_EPISODES = 4500  # over the exact-scan limit (4,096): recall walks the HNSW graph


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A file with one big user (HNSW path) and small ones (exact scan), deterministic."""
    path = tmp_path_factory.mktemp("parity") / "parity.agentmem"
    rng = random.Random(8)
    sentence = lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
    with agentmem.Memory(path, sync="normal") as mem:
        mem.remember_many_sync("big", [sentence() for _ in range(BIG_USER_EPISODES)])
        for user in ("alice", "bob"):
            mem.remember_many_sync(user, [sentence() for _ in range(60)])
    return path


def c_recall(path, user, query, k, mode, fill=False):
    out = subprocess.run([str(build_program("tests/python/recall_dump")), str(path), user, query,
                          str(k), mode] + (["fill"] if fill else []),
                         capture_output=True, text=True, check=True).stdout
    return [(int(i), float(s), float(b), float(v), int(br), int(vr))
            for i, s, b, v, br, vr in (line.split() for line in out.splitlines())]


def py_recall(mem, user, query, k, mode, fill=False):
    return [(h.id, h.score, h.bm25_score, h.vector_score, h.bm25_rank, h.vector_rank)
            for h in mem.recall_scored_sync(user, query, k, mode=mode, fill=fill)]


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
@pytest.mark.parametrize("user", ["big", "alice", "bob"])
def test_python_recall_equals_the_c_api_id_for_id_and_score_for_score(corpus, user, mode):
    with agentmem.Memory(corpus, readonly=True) as mem:
        for query in QUERIES:
            expected = c_recall(corpus, user, query, 20, mode)
            assert py_recall(mem, user, query, 20, mode) == expected, query
            if query == "xylophone":  # no episode matches it: no rows
                assert expected == []
            elif mode != "vector":  # no vector neighbour reaches the embedder's floor
                assert expected
            # With fill, every vector neighbour counts and k rows come back.
            filled = c_recall(corpus, user, query, 20, mode, fill=True)
            assert py_recall(mem, user, query, 20, mode, fill=True) == filled, query
            assert len(filled) == 20


def test_the_corpus_takes_both_vector_paths(corpus):
    with agentmem.Memory(corpus, readonly=True) as mem:
        assert "hnsw" in mem.explain_recall_sync("big", QUERIES[0])["vector"]
        assert "exact" in mem.explain_recall_sync("alice", QUERIES[0])["vector"]


def test_sql_recall_through_python_equals_the_c_api(corpus):
    conn = agentmem.connect(corpus, readonly=True)
    for query in QUERIES:
        rows = conn.execute("SELECT id, score, bm25_score, vector_score, bm25_rank, vector_rank "
                            "FROM recall(?, 'big', 20)", (query,)).fetchall()
        assert rows == c_recall(corpus, "big", query, 20, "hybrid"), query
    conn.close()

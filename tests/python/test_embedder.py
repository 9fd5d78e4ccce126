"""Memory(path, embedder=fn): the application's embedding function (docs/recall.md,
"Your own embedder") -- which calls use it, batching, result shapes, mismatch, failures."""

import array
import math

import pytest

import agentmem
from support import requires

pytestmark = requires("agentmem_create_embedder")

DIM = 4


def vector(text):
    """A deterministic 4-d embedding: counts of a, e, i, o (+1), normalised."""
    v = [1.0 + text.count(c) for c in "aeio"]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


class Model:
    """An embedding function that records its batches."""

    def __init__(self, shape=None):
        self.batches = []
        self.shape = shape  # None: lists; "float32" / "float64": a 2-D memoryview

    def __call__(self, texts):
        self.batches.append(list(texts))
        rows = [vector(t) for t in texts]
        if self.shape is None:
            return rows
        code = "f" if self.shape == "float32" else "d"
        flat = array.array(code, [x for row in rows for x in row])
        return memoryview(flat).cast("B").cast(code, (len(rows), DIM))


def open_memory(path, fn, **kw):
    return agentmem.Memory(path, embedder=fn, embedder_name="test-model", vector_dim=DIM, **kw)


def same(a, b):
    return all(abs(x - y) < 1e-6 for x, y in zip(a, b)) and len(a) == len(b)


@pytest.mark.parametrize("shape", [None, "float32", "float64"])
def test_text_only_remember_and_recall_call_the_embedder(path, shape):
    model = Model(shape)
    with open_memory(path, model) as mem:
        eid = mem.remember_sync("alice", "a banana in a bowl")
        assert model.batches == [["a banana in a bowl"]]
        assert same(mem.get_episode_sync(eid).vector, vector("a banana in a bowl"))
        hits = mem.recall_scored_sync("alice", "a banana in a bowl", mode="vector")
        assert [h.id for h in hits] == [eid]
        assert model.batches[-1] == ["a banana in a bowl"]
        calls = len(model.batches)
        mem.recall_scored_sync("alice", "banana", mode="bm25")
        assert len(model.batches) == calls  # BM25 needs no vector
        mem.context_sync("alice", "banana", 500)
        assert len(model.batches) == calls + 1
        mem.connection.execute("INSERT INTO episodes(user_id, text) VALUES ('alice', 'olive')")
        assert model.batches[-1] == ["olive"]
        assert mem.embedder.calls == len(model.batches)


def test_a_transaction_embeds_in_batches_of_64_and_the_rest_at_commit(path):
    model = Model()
    with open_memory(path, model) as mem:
        ids = mem.remember_many_sync("alice", [f"turn {i} of the day" for i in range(150)])
        assert [len(b) for b in model.batches] == [64, 64, 22]
        assert same(mem.get_episode_sync(ids[-1]).vector, vector("turn 149 of the day"))


def test_the_file_keeps_the_vector_space_and_another_one_is_refused(path):
    with open_memory(path, Model()) as mem:
        mem.remember_sync("alice", "hello")
    with pytest.raises(agentmem.DataError, match="test-model/4/cosine"):
        agentmem.Memory(path, embedder=Model(), embedder_name="other-model", vector_dim=DIM)
    with pytest.raises(agentmem.DataError):
        agentmem.Memory(path, embedder=Model(), embedder_name="test-model", vector_dim=8)
    with pytest.raises(agentmem.DataError):  # the default file is on the built-in embedder
        agentmem.Memory(path.parent / "builtin.agentmem").close()
        agentmem.Memory(path.parent / "builtin.agentmem", embedder=Model(),
                        embedder_name="test-model", vector_dim=DIM)
    # Reopened with the same space, it embeds again.
    model = Model()
    with open_memory(path, model) as mem:
        mem.remember_sync("alice", "again")
        assert model.batches == [["again"]]


def test_the_dimension_and_name_default_from_the_function(path):
    def embed(texts):
        return [vector(t) for t in texts]

    with agentmem.Memory(path, embedder=embed) as mem:  # one probe call gives the dimension
        mem.remember_sync("alice", "hello")
        assert len(mem.get_episode_sync(1).vector) == DIM
        header = mem.export_sync("alice").splitlines()[0]
        assert '"embedder":"python:test_embedder.test_the_dimension_and_name_default_from_' \
               'the_function.<locals>.embed"' in header


def failing(texts):
    raise RuntimeError("model offline")


@pytest.mark.parametrize("fn, error, message", [
    (failing, agentmem.DatabaseError, "RuntimeError: model offline"),
    (lambda texts: [vector(t) for t in texts][:-1], agentmem.DataError, r"returned \d vectors? for \d texts?"),
    (lambda texts: [vector(t)[:3] for t in texts], agentmem.DataError, r"vector 1 of \d has 3 values"),
    (lambda texts: [[math.nan] * DIM for t in texts], agentmem.DataError, "NaN"),
    (lambda texts: memoryview(array.array("f", [0.0] * (len(texts) + 1) * DIM)).cast("B").cast(
        "f", (len(texts) + 1, DIM)), agentmem.DataError, r"shape \(\d, 4\) for \d texts?; expected"),
])
def test_an_embedder_that_fails_or_returns_the_wrong_shape_writes_nothing(path, fn, error,
                                                                          message):
    with open_memory(path, fn) as mem:
        with pytest.raises(error, match=message):
            mem.remember_sync("alice", "lost")
        with pytest.raises(error, match=message):
            mem.remember_many_sync("alice", ["lost", "too"])
        assert mem.stats_sync()["episodes"] == 0
        with pytest.raises(error, match=message):
            mem.recall_scored_sync("alice", "query")
        # A vector given by the caller needs no embedder.
        mem.remember_sync("alice", "given", vector=[1.0, 0.0, 0.0, 0.0])
        assert mem.stats_sync()["episodes"] == 1


def test_the_embedding_functions_exception_is_the_cause(path):
    with open_memory(path, failing) as mem:
        with pytest.raises(agentmem.DatabaseError) as info:
            mem.remember_sync("alice", "lost")
        assert isinstance(info.value.__cause__, RuntimeError)


def test_recall_thresholds_and_fill_are_keywords(path):
    with open_memory(path, Model()) as mem:
        mem.remember_many_sync("alice", ["aaaa", "oooo", "eeee"])
        assert mem.recall_scored_sync("alice", "zzz", mode="bm25") == []
        assert len(mem.recall_scored_sync("alice", "zzz", mode="bm25", fill=True)) == 3
        # An external model has no measured floor: every vector neighbour matches.
        assert len(mem.recall_scored_sync("alice", "aaaa", mode="vector")) == 3
        near = mem.recall_scored_sync("alice", "aaaa", mode="vector", min_similarity=0.9)
        assert [h.text for h in near] == ["aaaa"]
        assert mem.recall_scored_sync("alice", "aaaa", mode="bm25", min_bm25=1e9) == []

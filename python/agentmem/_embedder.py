"""The application's embedding function as an agentmem_embed_fn (agentmem_create_embedder).

Memory(path, embedder=fn) registers fn: fn(list[str]) -> one vector per text,
as a list of lists of floats, any sequence of sequences of numbers, or an
object with the buffer protocol shaped (n, dim) -- a numpy array, as
sentence-transformers' model.encode returns, is copied without numpy being
imported here.
"""

import array
import ctypes

from . import _capi

ERROR, MISMATCH_DIMENSION = 1, 15 | (1 << 8)


class EmbeddingShapeError(ValueError):
    """The embedding function returned the wrong number of vectors or values."""


def default_name(fn):
    """The embedder name recorded in a new file when Memory is given no embedder_name."""
    name = getattr(fn, "name", None)
    if isinstance(name, str) and name:
        return name
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"python:{module}.{qualname}"


def probe_dimension(fn):
    """The dimension of fn's vectors: the model's own figure, else the length of one vector."""
    owner = getattr(fn, "__self__", None)
    get = getattr(owner, "get_sentence_embedding_dimension", None)
    if callable(get):
        dim = get()
        if isinstance(dim, int) and dim > 0:
            return dim
    first = next(iter(fn(["agentmem: how many dimensions?"])))
    return len(first)


def _flat_floats(result, n, dim):
    """The n * dim float32 values of fn's result, as bytes; EmbeddingShapeError when misshapen."""
    try:
        view = memoryview(result)
    except TypeError:
        view = None
    if view is not None and view.ndim == 2:
        if tuple(view.shape) != (n, dim):
            raise EmbeddingShapeError(
                f"returned an array of shape {tuple(view.shape)} for {n} text"
                f"{'' if n == 1 else 's'}; expected ({n}, {dim})")
        if view.format.lstrip("<=@") == "f":
            return view.tobytes()  # float32 in C order, whatever the strides
        return array.array("f", [float(x) for row in view.tolist() for x in row]).tobytes()
    rows = list(result)
    if len(rows) != n:
        raise EmbeddingShapeError(
            f"returned {len(rows)} vector{'' if len(rows) == 1 else 's'} for {n} text"
            f"{'' if n == 1 else 's'}")
    flat = array.array("f")
    for i, row in enumerate(rows):
        values = [float(x) for x in row]
        if len(values) != dim:
            raise EmbeddingShapeError(
                f"vector {i + 1} of {n} has {len(values)} values; the file's vectors have {dim}")
        flat.extend(values)
    return flat.tobytes()


class CallbackEmbedder:
    """fn behind an agentmem_embed_fn; keeps the ctypes callback alive while registered.

    `calls` counts the batches fn was given; `error` holds the exception of the
    last failed call (the agentmem error raised for it names it, and chains it).
    """

    def __init__(self, fn, dim):
        self.fn = fn
        self.dim = dim
        self.calls = 0
        self.error = None
        self.c_function = _capi.EMBED_FN(self._embed)

    def _embed(self, ctx, n, texts, dim, out, err, err_size):
        try:
            self.calls += 1
            batch = [texts[i].decode("utf-8") for i in range(n)]
            data = _flat_floats(self.fn(batch), n, dim)
            ctypes.memmove(out, data, len(data))
            return _capi.OK
        except BaseException as e:  # noqa: B036 -- nothing may escape into C
            self.error = e
            what = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            if err and err_size > 0:
                message = what.encode("utf-8", "replace")[:err_size - 1]
                ctypes.memmove(err, message + b"\0", len(message) + 1)
            return MISMATCH_DIMENSION if isinstance(e, EmbeddingShapeError) else ERROR

    def take_error(self):
        """The exception of the last failed call (cleared), or None."""
        e, self.error = self.error, None
        return e

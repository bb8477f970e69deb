"""A PartitionSpec with unreduced or reduced axes is more than its entries: as in JAX 0.10.2,
reading it as a sequence (``*spec``, ``spec[i]``, ``x in spec``) raises JAX's ValueError and
concatenating a tuple to it JAX's TypeError, while ``.partitions``, ``len``, ``index`` and
``count`` read the entries (issue 25, item 2). JAX's answers are recorded; a second test
checks the record against JAX where it is installed.
"""
import pytest

from plax.sharding import PartitionSpec

_ITER = ("ValueError", "Using *pspec is dangerous when PartitionSpec has non-empty "
         "unreduced/reduced set. Please use *spec.partitions")
_INDEX = ("ValueError", "Using pspec[...] is dangerous when PartitionSpec has non-empty "
          "unreduced/reduced set. Please use spec.partitions[...]")


def _add(spec: str, what: str, method: str):
    return ("TypeError", f"other ('Z',) cannot be of instance `tuple` when self {spec} has "
            f"{what} in `{method}` of PartitionSpec.")


def _cases(P):
    u = P("X", None, unreduced={"Y"})
    r = P("X", reduced={"Y"})
    return {
        "list": lambda: list(u), "star": lambda: (lambda *a: a)(*u), "tuple": lambda: tuple(r),
        "index0": lambda: u[0], "slice": lambda: r[0:1], "contains": lambda: "X" in u,
        "len": lambda: len(u), "partitions": lambda: u.partitions, "find": lambda: u.index("X"),
        "count": lambda: u.count(None), "add_tuple": lambda: u + ("Z",),
        "radd_tuple": lambda: ("Z",) + u, "add_tuple_reduced": lambda: r + ("Z",),
        "add_spec": lambda: repr(u + P("Z")), "plain_add": lambda: repr(P("X") + ("Z",)),
        "plain_list": lambda: list(P("X", None)), "plain_index": lambda: P("X", None)[0],
    }


RECORD = {
    "list": _ITER, "star": _ITER, "tuple": _ITER, "index0": _INDEX, "slice": _INDEX,
    "contains": _ITER, "len": 2, "partitions": ("X", None), "find": 0, "count": 1,
    "add_tuple": _add("P('X', None, unreduced={'Y'})", "unreduced", "__add__"),
    "radd_tuple": _add("P('X', None, unreduced={'Y'})", "unreduced", "__radd__"),
    "add_tuple_reduced": _add("P('X', reduced={'Y'})", "reduced", "__add__"),
    "add_spec": "P('X', None, 'Z', unreduced={'Y'})", "plain_add": "P('X', 'Z')",
    "plain_list": ["X", None], "plain_index": "X",
}


def _answer(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 -- the error is the answer
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("case", sorted(RECORD))
def test_as_jax_answers(case):
    assert _answer(_cases(PartitionSpec)[case]) == RECORD[case]


def test_record_is_jaxs():
    jax = pytest.importorskip("jax")
    got = {k: _answer(fn) for k, fn in _cases(jax.sharding.PartitionSpec).items()}
    assert got == RECORD

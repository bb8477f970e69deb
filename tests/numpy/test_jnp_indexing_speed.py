"""Eager indexing is not pathologically slow: basic indexing and static ``.at[]`` updates on
small arrays cost tens of microseconds (JAX: about 50-400 us on CPU). The bounds are loose
(a millisecond or more) so that a loaded CI machine does not fail them; they catch an
accidental O(size) or retracing path, not small regressions."""
from __future__ import annotations

import time

import numpy as np
import pytest

import plax.numpy as jnp


def _per_call_seconds(fn, calls: int = 50) -> float:
    fn()  # warm caches
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


X = jnp.arange(12.0).reshape(3, 4)
BIG = jnp.zeros((500, 500))
IDX = jnp.array([0, 2])

CASES = {
    "x[0]": lambda: X[0], "x[1:3]": lambda: X[1:3], "x[0, 1]": lambda: X[0, 1],
    "x[:, ::-1]": lambda: X[:, ::-1], "x[idx]": lambda: X[IDX],
    "x.at[0].set": lambda: X.at[0].set(1.0), "x.at[0, 1].add": lambda: X.at[0, 1].add(1.0),
    "x.at[idx].set": lambda: X.at[IDX].set(0.0),
}
BOUND = {"x[idx]": 3e-3, "x.at[idx].set": 5e-3}


@pytest.mark.parametrize("name", sorted(CASES))
def test_small_array_indexing_is_fast(name):
    seconds = _per_call_seconds(CASES[name])
    assert seconds < BOUND.get(name, 1.5e-3), f"{name}: {seconds * 1e6:.0f} us per call"


def test_static_update_of_a_large_array_does_not_scatter_every_element():
    # A static box update is a dynamic_update_slice, so it costs about one copy of the array
    # (a scatter through a flattened iota would cost several).
    copy = _per_call_seconds(lambda: BIG + 0.0, calls=10)
    update = _per_call_seconds(lambda: BIG.at[3, 5:9].set(1.0), calls=10)
    assert update < 10 * copy + 1e-3, (update, copy)
    np.testing.assert_array_equal(np.asarray(BIG.at[3, 5:9].set(1.0))[3, 4:10],
                                  [0, 1, 1, 1, 1, 0])

"""``scan(..., unroll=k)`` on the Numba backend: the native loop holds ``k`` copies of the body
per iteration (:func:`plax_numba.wholegen.scan_unroll`), then the remaining steps one by one;
the values are the same as without unrolling and as the NumPy backend's, bit for bit (the
bodies use only float32 arithmetic, which both backends round the same way)."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import plax
from plax import lax
from plax import numpy as jnp
from plax.lowering import PlaxFallbackWarning

from plax_numba.wholegen import UNROLL_MAX, scan_unroll
from numba_vs_numpy import assert_bits_equal


def _scan(unroll, reverse=False):
    def f(c0, xs):
        def body(carry, x):
            c, n = carry
            c = c * 0.9 + x
            return (c, n + 1), c * 2.0 - x
        return lax.scan(body, (c0, jnp.int32(0)), xs, reverse=reverse, unroll=unroll)
    return f


def _numba(f, *args):
    jf = plax.jit(f, backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)
        got = [np.asarray(x) for x in plax.tree_util.tree_leaves(jf(*args))]
        text = jf.lower(*args).compile().as_text()
    return got, text


def _numpy(f, *args):
    return [np.asarray(x) for x in plax.tree_util.tree_leaves(plax.jit(f, backend="numpy")(*args))]


def _kernel(text: str) -> str:
    """The whole-program kernel ``kernel(...)``'s source (after its cluster kernels)."""
    return text[text.rindex("def kernel("):]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("unroll", [1, 3, 4, True])
def test_unrolled_scan_values(unroll, reverse):
    rng = np.random.default_rng(0)
    c0 = rng.standard_normal(16).astype(np.float32)
    xs = rng.standard_normal((10, 16)).astype(np.float32)
    f = _scan(unroll, reverse)
    got, text = _numba(f, c0, xs)
    for g, w in zip(got, _numpy(f, c0, xs)):
        assert_bits_equal(g, w)
    for g, w in zip(got, _numba(_scan(1, reverse), c0, xs)[0]):
        assert_bits_equal(g, w)


def test_unrolled_body_in_the_source():
    c0 = np.zeros(16, np.float32)
    xs = np.ones((10, 16), np.float32)
    _, text = _numba(_scan(4), c0, xs)
    kernel = _kernel(text)
    # two iterations of four copies, then the remaining two steps one by one
    assert re.search(r"for it\d+ in range\(2\):", kernel), kernel
    assert re.search(r"for it\d+ in range\(8, 10\):", kernel), kernel
    for k in range(4):
        assert re.search(rf"i\d+ = it\d+ \* 4 \+ {k}\n", kernel), kernel
    calls = lambda part: len(re.findall(r"= k\d+\(", part))  # noqa: E731
    loops = re.split(r"\n    for it\d+ in ", kernel)
    assert calls(loops[1]) == 4 * calls(loops[2]) > 0, kernel
    _, plain = _numba(_scan(1), c0, xs)
    assert "range(8, 10)" not in plain and " * 4 + " not in plain


def test_full_unroll_and_the_cap():
    assert scan_unroll(True, 5) == 5 and scan_unroll(False, 5) == 1
    assert scan_unroll(8, 3) == 3 and scan_unroll(0, 7) == 1
    assert scan_unroll(True, 1000) == UNROLL_MAX
    c0 = np.zeros(16, np.float32)
    xs = np.arange(80, dtype=np.float32).reshape(5, 16)
    got, text = _numba(_scan(True, reverse=True), c0, xs)
    kernel = _kernel(text)
    assert re.search(r"for it\d+ in range\(1\):", kernel), kernel
    assert re.search(r"i\d+ = 4 - \(it\d+ \* 5 \+ 4\)", kernel), kernel
    for g, w in zip(got, _numpy(_scan(True, reverse=True), c0, xs)):
        assert_bits_equal(g, w)

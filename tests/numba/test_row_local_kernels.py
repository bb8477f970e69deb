"""Row-local clusters on the Numba backend (:mod:`plax_numba.codegen_rows`): softmax, logsumexp,
layer norm and a cross-entropy's gradient as one kernel reading each row once, checked against
the NumPy backend (float64 references within float32 rounding, integers exactly), the
declined cases lowered as before, and the kernel's structure (passes, scratch rows, threads)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import numpy as jnp
from plax.scipy.special import logsumexp

from numba_vs_numpy import compiled_source, jit_both

_rng = np.random.default_rng(7)


def _x(*shape, dtype=np.float32):
    return _rng.standard_normal(shape).astype(dtype)


def _labels(n, low, high):
    return _rng.integers(low, high, (n, 1)).astype(np.int32)


def _layer_norm(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-5) * g + b


def _xent(z, y):
    return -jnp.mean(jnp.take_along_axis(plax.nn.log_softmax(z, axis=-1), y, axis=1))


_special = _x(12, 9)
_special[1, 3] = np.nan
_special[2, :] = -np.inf
_special[3, 0] = np.inf
_special[4, :] = 0.0

CASES = {
    # (softmax and logsumexp alone: "NaN and infinite rows" below; threaded: past
    # PARALLEL_MIN elements, blocks of rows on numba's threads)
    "log_softmax threaded": (lambda x: plax.nn.log_softmax(x, -1), (_x(96, 400),)),
    "layer norm": (_layer_norm, (_x(16, 33), _x(33), _x(33))),
    "layer norm grad": (plax.grad(lambda x, g, b: (_layer_norm(x, g, b) ** 2).sum()),
                        (_x(16, 33), _x(33), _x(33))),
    "xent grad": (plax.grad(_xent), (_x(20, 30), _labels(20, 0, 30))),
    "one_hot xent grad": (plax.grad(lambda z, y: -(plax.nn.one_hot(y, 30) *
                                                 plax.nn.log_softmax(z)).sum()),
                          (_x(20, 30), _rng.integers(0, 30, 20).astype(np.int32))),
    # gathers out of the row: the fill value, or the clamped index; their transposes drop
    # or clamp the update
    "take fill": (lambda x, i: jnp.take_along_axis(plax.nn.log_softmax(x), i, axis=1,
                                                   mode="fill"), (_x(20, 30), _labels(20, -40, 40))),
    "take clip grad": (plax.grad(lambda x, i: jnp.take_along_axis(
        plax.nn.log_softmax(x), i, axis=1, mode="clip").sum()), (_x(20, 30), _labels(20, -40, 40))),
    "take fill grad": (plax.grad(lambda x, i: jnp.take_along_axis(
        plax.nn.log_softmax(x), i, axis=1, mode="fill").sum()), (_x(20, 30), _labels(20, -40, 40))),
    "rows over two axes": (lambda x: plax.nn.softmax(x, (-2, -1)), (_x(6, 4, 10),)),
    "NaN and infinite rows": (lambda x: (plax.nn.softmax(x), logsumexp(x, -1)), (_special,)),
    "row and per-row outputs": (lambda x: (x - x.max(-1, keepdims=True), x.max(-1),
                                           (x * x).sum(-1)), (_x(10, 17),)),
    "one row": (lambda v: plax.nn.softmax(v), (_x(50),)),
    "rows of two": (lambda x: plax.nn.softmax(x, -1), (_x(30, 2),)),
    "float16": (lambda x: (x - x.mean(-1, keepdims=True)) /
                jnp.sqrt(x.var(-1, keepdims=True) + 1e-3), (_x(12, 20, dtype=np.float16),)),
    "bfloat16 xent grad": (plax.grad(lambda z, y: _xent(z, y).astype(jnp.float32)),
                           (_x(12, 20).astype(jnp.bfloat16), _labels(12, 0, 20))),
    "int8 sums": (lambda v: v - v.sum(-1, keepdims=True) // 3,
                  (_rng.integers(-9, 9, (12, 30)).astype(np.int8),)),
    "bool any/all": (lambda x: (x > x.mean(-1, keepdims=True)).any(-1) & (x < 1).all(-1),
                     (_x(12, 20),)),
    "product": (lambda x: x / jnp.prod(x, -1, keepdims=True), (_x(12, 5),)),
    # (grad: a row of one value, the cotangent of a sum broadcast over it, reduced and picked)
    "grad of row extremes": (plax.grad(lambda x: (jnp.max(x, 1).sum() * jnp.min(x, 1)).sum()),
                             (_x(6, 40),)),
    "grad of logsumexp and softmax": (plax.grad(lambda x: (
        plax.nn.softmax(x) * x + logsumexp(x, -1, keepdims=True)).sum()), (_x(6, 40),)),
    "grad of a uniform pick": (plax.grad(lambda x, i: jnp.take_along_axis(
        jnp.broadcast_to(x.sum(-1, keepdims=True), x.shape), i, axis=1).sum()),
        (_x(6, 40), _labels(6, 0, 40))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_row_local_kernel_matches_the_reference(name, monkeypatch):
    # (the per-cluster program: a small one would otherwise be one whole-program kernel)
    monkeypatch.setenv("PLAX_NUMBA_WHOLE_MAX", "0")
    f, args = CASES[name]
    got, want = jit_both(f, *args, fallback_is_error=True)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w)
        else:
            tol = 1e-2 if w.dtype.itemsize == 2 else 2e-5
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                       rtol=tol, atol=tol, equal_nan=True)
    source = compiled_source(f, *args)
    assert "n_rows, row)" in source   # (a row-local kernel: every pass of its rows in it)


def test_softmax_reads_each_row_in_one_kernel_of_three_passes():
    x = _x(96, 400)
    source = compiled_source(lambda x: plax.nn.softmax(x, -1), x)
    kernel = source[source.index("def kernel("):]
    # the max straight from the input's rows, then a pass computing exp (kept in a scratch
    # row) and one dividing it by the row's sum
    assert kernel.count("for c in range(row):") == 2 and "= a0[lo + t]" in kernel
    assert kernel.count("exp_f32(") == 1
    assert "prange(" in kernel   # (96 x 400 elements: threaded over blocks of rows)
    assert source.count("def kernel(") == 1


def test_several_labels_a_row_are_declined_and_still_correct():
    f = plax.grad(lambda x, i: jnp.take_along_axis(plax.nn.log_softmax(x), i, axis=1).sum())
    args = (_x(20, 30), _rng.integers(0, 30, (20, 2)).astype(np.int32))
    got, want = jit_both(f, *args)
    np.testing.assert_allclose(got[0], want[0], rtol=2e-5, atol=2e-5)
    assert "n_rows, row)" not in compiled_source(f, *args)   # (its parts, as before)


def test_plan_declines_what_it_does_not_express(monkeypatch):
    """Values of two labels a row (a row-local cluster the fusion pass forms): the generator
    raises Unsupported, so the emitter lowers the cluster's parts."""
    from plax_numba import codegen, codegen_rows
    declined = []
    plan_rows = codegen_rows.plan_rows

    def spy(cluster, parallel=None):
        try:
            return plan_rows(cluster, parallel)
        except codegen.Unsupported as err:
            declined.append(str(err))
            raise
    monkeypatch.setattr(codegen_rows, "plan_rows", spy)
    idx = np.zeros((8, 2), np.int32)
    f = lambda x, i: jnp.take_along_axis(plax.nn.log_softmax(x), i, axis=1) * 2.0  # noqa: E731
    got, want = jit_both(f, _x(8, 6), idx)
    np.testing.assert_allclose(got[0], want[0], rtol=2e-5, atol=2e-5)
    assert declined and "(8, 2" in declined[0]

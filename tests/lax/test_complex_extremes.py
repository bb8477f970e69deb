"""max and min of complex numbers as JAX 0.10.2 computes them on CPU: lexicographic (real
part, then imaginary part), the first operand taken only when it wins strictly, so a tie
gives the second operand (its zeros' signs included) and a NaN in a compared part never
wins; reductions, cumulative and scatter forms fold that rule in their element order.
Checked against a Python loop of the rule (bits compared, signs of zeros and NaNs'
places included) and against JAX where it is installed. Small eager shapes."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from plax import lax
from plax import numpy as jnp

_PARTS = [0.0, -0.0, 1.0, np.nan, -np.inf]
_VALUES = np.array([complex(a, b) for a, b in itertools.product(_PARTS, _PARTS)], np.complex64)


def _wins(x: complex, y: complex, is_max: bool) -> bool:
    better = (lambda a, b: a > b) if is_max else (lambda a, b: a < b)
    return better(x.imag, y.imag) if x.real == y.real else better(x.real, y.real)


def _fold(xs, is_max: bool, start=None) -> complex:
    acc = complex(-np.inf if is_max else np.inf, 0.0) if start is None else start
    for e in xs:
        acc = acc if _wins(acc, complex(e), is_max) else complex(e)
    return acc


def _same(got, want) -> None:
    """Equal as JAX's results are: the same zeros' signs, NaN in the same parts."""
    got = np.asarray(got, np.complex64).ravel()
    want = np.asarray(want, np.complex64).ravel()
    for part in (np.real, np.imag):
        g, w = part(got), part(want)
        assert np.array_equal(np.isnan(g), np.isnan(w)), (got, want)
        assert np.array_equal(np.where(np.isnan(g), 0, g), np.where(np.isnan(w), 0, w))
        assert np.array_equal(np.signbit(g) | np.isnan(g), np.signbit(w) | np.isnan(w))


@pytest.mark.parametrize("is_max", [True, False])
def test_elementwise_ties_and_nans(is_max):
    x, y = np.repeat(_VALUES, len(_VALUES)), np.tile(_VALUES, len(_VALUES))
    want = [a if _wins(complex(a), complex(b), is_max) else b for a, b in zip(x, y)]
    for f in ((lax.max, jnp.maximum) if is_max else (lax.min, jnp.minimum)):
        _same(f(jnp.asarray(x), jnp.asarray(y)), want)


@pytest.mark.parametrize("is_max", [True, False])
def test_reductions_fold_from_the_identity(is_max):
    rows = np.random.default_rng(0).choice(_VALUES, (64, 4))
    reduce = jnp.max if is_max else jnp.min
    _same(reduce(jnp.asarray(rows), axis=1), [_fold(r, is_max) for r in rows])
    _same(reduce(jnp.asarray(rows[:3].T), axis=0), [_fold(r, is_max) for r in rows[:3]])
    # ``initial``: max(initial, reduced), as JAX combines them (a NaN reduced value wins)
    got = reduce(jnp.asarray(rows[:8]), axis=1, initial=complex(0.5, 0.0))
    _same(got, [_fold([_fold(r, is_max)], is_max, complex(0.5, 0.0)) for r in rows[:8]])
    # ``where``: the masked elements are the identity (folded in their places), not
    # ``initial`` (here a NaN, which loses)
    mask = np.arange(4) % 2 == 0
    identity = complex(-np.inf if is_max else np.inf, 0.0)
    got = reduce(jnp.asarray(rows[:8]), axis=1, initial=complex(np.nan, 0.0), where=mask)
    _same(got, [_fold([_fold(np.where(mask, r, identity), is_max)], is_max,
                      complex(np.nan, 0.0)) for r in rows[:8]])


@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_folds_each_window_in_order(reverse):
    x = np.random.default_rng(1).choice(_VALUES, (3, 5))
    for is_max, f in ((True, lax.cummax), (False, lax.cummin)):
        windows = [[r[k:] if reverse else r[:k + 1] for k in range(5)] for r in x]
        want = [[_fold(w, is_max) for w in ws] for ws in windows]
        _same(f(jnp.asarray(x), axis=1, reverse=reverse), want)


def test_scatter_combines_updates_in_order():
    u = np.random.default_rng(2).choice(_VALUES, 12)
    idx = np.array([0, 1, 2] * 4)
    base = np.array([0j, -0.0 + 0j, np.nan + 0j], np.complex64)
    for is_max in (True, False):
        at = jnp.asarray(base).at[jnp.asarray(idx)]
        got = at.max(jnp.asarray(u)) if is_max else at.min(jnp.asarray(u))
        _same(got, [_fold(u[idx == i], is_max, complex(base[i])) for i in range(3)])


def test_argmax_of_complex_refused():
    for f in (jnp.argmax, jnp.argmin):
        with pytest.raises(TypeError, match="complex64"):
            f(jnp.ones(3, jnp.complex64))


def test_as_jax():
    jax = pytest.importorskip("jax")
    x, y = np.repeat(_VALUES, len(_VALUES)), np.tile(_VALUES, len(_VALUES))
    rows = np.random.default_rng(3).choice(_VALUES, (16, 3))
    for ours, theirs in ((lax.max, jax.lax.max), (lax.min, jax.lax.min)):
        _same(ours(jnp.asarray(x), jnp.asarray(y)), theirs(x, y))
    mask = np.arange(3) != 1
    for name in ("max", "min"):
        _same(getattr(jnp, name)(jnp.asarray(rows), axis=1),
              getattr(jax.numpy, name)(rows, axis=1))
        for initial in (complex(0.0, 0.0), complex(-0.0, 1.0), complex(np.nan, 0.0)):
            _same(getattr(jnp, name)(jnp.asarray(rows), axis=1, initial=initial, where=mask),
                  getattr(jax.numpy, name)(rows, axis=1, initial=initial, where=mask))
            _same(getattr(jnp, name)(jnp.asarray(rows), axis=1, initial=initial),
                  getattr(jax.numpy, name)(rows, axis=1, initial=initial))
    for ours, theirs in ((lax.cummax, jax.lax.cummax), (lax.cummin, jax.lax.cummin)):
        for reverse in (False, True):
            _same(ours(jnp.asarray(rows), axis=1, reverse=reverse),
                  theirs(rows, axis=1, reverse=reverse))
    idx = np.array([0, 1] * 8)
    _same(jnp.zeros(2, np.complex64).at[jnp.asarray(idx)].max(jnp.asarray(rows[:, 0])),
          jax.numpy.zeros(2, np.complex64).at[idx].max(rows[:, 0]))

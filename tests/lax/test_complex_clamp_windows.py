"""Complex operands of ``lax.clamp`` and of the ``reduce_window`` max/min family, which plax
refused and JAX 0.10.2 computes: ``clamp`` compares real parts only (XLA's rule,
``plax.lowering.complex_extremes.clamp``); a window max/min folds JAX's lexicographic
max/min over the window's elements from the identity, the padding skipped. Their derivatives
are refused with TypeError, as JAX refuses them, and ``jnp.clip`` refuses complex values with
JAX's ValueError (plax computed it)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import plax
import plax.numpy as pnp
from plax import lax as plax_lax
from plax.lowering.complex_extremes import first_wins

C = np.complex64
SPECIALS = [0j, complex(-0.0, 0), complex(0, -0.0), 1 + 1j, 1 - 1j, complex(np.nan, 0),
            complex(0, np.nan), complex(1, np.nan), complex(np.inf, 1), complex(-np.inf, 0),
            2 + 0j, -1 + 3j]


def _bits(x):
    return np.ascontiguousarray(x).view(np.uint64)


def _triples():
    v = np.array(SPECIALS, C)
    idx = np.array(list(itertools.product(range(len(v)), repeat=3)))
    return v[idx[:, 0]], v[idx[:, 1]], v[idx[:, 2]]


def _clamp_loop(lo, x, hi):
    """XLA's clamp of complex values, one element at a time: raised to ``lo`` when
    ``lo.real >= x.real``, then lowered to ``hi`` unless ``<= hi.real`` (NaN compares false)."""
    out = np.empty_like(x)
    for i in range(x.size):
        r = lo[i] if lo[i].real >= x[i].real else x[i]
        out[i] = r if r.real <= hi[i].real else hi[i]
    return out


def test_complex_clamp_as_xla_computes_it():
    lo, x, hi = _triples()
    want = _clamp_loop(lo, x, hi)
    for got in (plax_lax.clamp(lo, x, hi), plax.jit(plax_lax.clamp)(lo, x, hi),
                plax.vmap(plax_lax.clamp)(lo, x, hi)):
        assert got.dtype == C
        np.testing.assert_array_equal(_bits(np.asarray(got)), _bits(want))
    # recorded from JAX 0.10.2
    got = plax_lax.clamp(C(1j), np.array([1 + 2j, 3 - 1j, -2 + 0.5j, 0j, 2 + 2j, 1 - 1j], C),
                         C(2 + 0j))
    np.testing.assert_array_equal(np.asarray(got), [1 + 2j, 2 + 0j, 1j, 1j, 2 + 2j, 1 - 1j])


def test_complex_clamp_as_jax():
    jax = pytest.importorskip("jax")
    lo, x, hi = _triples()
    want = np.asarray(jax.jit(jax.lax.clamp)(lo, x, hi))
    np.testing.assert_array_equal(_bits(np.asarray(plax_lax.clamp(lo, x, hi))), _bits(want))


def _fold_loop(x, is_max, window, strides, padding):
    """A 1-D (or row-major 2-D) window max/min, one element at a time: JAX's lexicographic
    max/min folded from the identity, out-of-bounds positions skipped."""
    x2 = x.reshape((1,) * (2 - x.ndim) + x.shape)
    w = (1,) * (2 - x.ndim) + tuple(window)
    s = (1,) * (2 - x.ndim) + tuple(strides)
    p = ((0, 0),) * (2 - x.ndim) + tuple(padding)
    oh = (x2.shape[0] + sum(p[0]) - w[0]) // s[0] + 1
    ow = (x2.shape[1] + sum(p[1]) - w[1]) // s[1] + 1
    out = np.empty((oh, ow), x.dtype)
    for i, j in itertools.product(range(oh), range(ow)):
        acc = C(complex(-np.inf if is_max else np.inf, 0))
        for a, b in itertools.product(range(w[0]), range(w[1])):
            r, c = i * s[0] + a - p[0][0], j * s[1] + b - p[1][0]
            if 0 <= r < x2.shape[0] and 0 <= c < x2.shape[1]:
                e = x2[r, c]
                acc = acc if first_wins(acc, e, is_max) else e
        out[i, j] = acc
    return out.reshape(out.shape[2 - x.ndim:])


def _sample(rng, shape, with_nan):
    parts = [0.0, 1.0, -1.0, 2.0, np.inf, -np.inf] + ([np.nan, -0.0] if with_nan else [])
    x = np.empty(shape, C)
    x.real, x.imag = rng.choice(parts, shape), rng.choice(parts, shape)
    return x


# (shape, window, strides, padding, NaNs and -0 in the data). In two dimensions XLA's CPU fold
# order over a window depends on the padding (row- or column-major), which decides among NaNs
# and tied zeros: those are checked in one dimension, where there is one order.
WINDOWS = [((9,), (3,), (1,), ((1, 1),), True), ((8,), (2,), (2,), ((0, 1),), True),
           ((4, 5), (2, 2), (1, 1), ((0, 0), (0, 0)), False),
           ((4, 5), (3, 2), (2, 1), ((1, 1), (0, 1)), False)]


@pytest.mark.parametrize("which", ["max", "min"])
@pytest.mark.parametrize("shape,window,strides,padding,with_nan", WINDOWS)
def test_complex_window_extremes_fold_as_xla(which, shape, window, strides, padding, with_nan):
    rng = np.random.default_rng(len(shape) * 10 + window[0])
    is_max = which == "max"
    init = C(complex(-np.inf if is_max else np.inf, 0))
    op = plax_lax.max if is_max else plax_lax.min
    f = lambda x: plax_lax.reduce_window(x, init, op, window, strides, padding)
    for _ in range(4):
        x = _sample(rng, shape, with_nan)
        want = _fold_loop(x, is_max, window, strides, padding)
        for got in (f(x), plax.jit(f)(x)):
            assert got.dtype == C
            np.testing.assert_array_equal(_bits(np.asarray(got)), _bits(want))
        got = plax.vmap(f)(np.stack([x, x[::-1]]))
        np.testing.assert_array_equal(_bits(np.asarray(got)[1]),
                                      _bits(_fold_loop(x[::-1], is_max, window, strides,
                                                       padding)))


def test_complex_window_extremes_as_jax():
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(7)
    for shape, window, strides, padding, with_nan in WINDOWS[::3]:  # (JAX compiles each)
        x = _sample(rng, shape, with_nan)
        for pl, jl, init in ((plax_lax.max, jax.lax.max, -np.inf),
                             (plax_lax.min, jax.lax.min, np.inf)):
            want = jax.lax.reduce_window(x, C(init), jl, window, strides, padding)
            got = plax_lax.reduce_window(x, C(init), pl, window, strides, padding)
            np.testing.assert_array_equal(_bits(np.asarray(got)), _bits(np.asarray(want)))


def test_complex_derivatives_refused_as_jax():
    # JAX: TypeError "gt (ge) does not accept dtype complex64 ..." from the JVP rules
    x = np.array([1 + 2j, 3 - 1j, 0j], C)
    with pytest.raises(TypeError, match="complex64"):
        plax.jvp(lambda x: plax_lax.clamp(C(0), x, C(2)), (x,), (x,))
    with pytest.raises(TypeError, match="complex64"):
        plax.jvp(lambda x: plax_lax.reduce_window(x, C(-np.inf), plax_lax.max, (2,), (1,),
                                                  "VALID"), (x,), (x,))


@pytest.mark.parametrize("args", [(np.array([1 + 2j], C), 0, 2), (np.array([1 + 2j], C),),
                                  (np.float32([1, 2]), 0j, 1), (np.float32([1, 2]), None, 1j)])
def test_clip_refuses_complex_values(args):
    with pytest.raises(ValueError, match="complex numbers have no order"):
        pnp.clip(*args)
    np.testing.assert_array_equal(np.asarray(pnp.clip(np.float32([-1, 3]), 0, 2)), [0, 2])

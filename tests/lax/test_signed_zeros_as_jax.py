"""max/min and what is built on them give zeros JAX's signs (XLA's ``-0.0 < +0.0``), eager
and jitted, compared bit for bit with real JAX. The conformance kit checks the same rule on
every backend without JAX (its "signed zeros" and "specials" cases)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as pnp
from plax import lax as plax_lax

F = np.float32
A = np.array([0.0, -0.0, -0.0, 0.0, np.nan, -0.0, 1.0], F)
B = np.array([-0.0, 0.0, -0.0, 0.0, 0.0, np.nan, 1.0], F)
C = np.array([0.0, -0.0, 0.0, -0.0], F)


def _pool(L, x, op, init):
    return L.reduce_window(x, init, op, (2,), (2,), "VALID")


# (label, f(lax, numpy) -> function, operands)
CASES = [
    ("maximum", lambda L, N: N.maximum, (A, B)),
    ("minimum", lambda L, N: N.minimum, (A, B)),
    ("maximum with a scalar zero", lambda L, N: lambda x: N.maximum(x, F(0.0)), (A,)),
    ("maximum with a scalar -0", lambda L, N: lambda x: N.maximum(x, F(-0.0)), (A,)),
    ("minimum with a scalar zero", lambda L, N: lambda x: N.minimum(F(0.0), x), (A,)),
    ("minimum with a scalar -0", lambda L, N: lambda x: N.minimum(F(-0.0), x), (A,)),
    ("maximum of 0-d zeros", lambda L, N: N.maximum, (np.array(-0.0, F), np.array(0.0, F))),
    ("minimum of 0-d operands", lambda L, N: N.minimum, (np.array(0.5, F), np.array(-0.0, F))),
    ("max over a stack", lambda L, N: lambda a, b: N.max(N.stack([a, b]), 0), (A, B)),
    ("min over a stack", lambda L, N: lambda a, b: N.min(N.stack([a, b]), 0), (A, B)),
    ("cummax", lambda L, N: lambda x: L.cummax(x), (C,)),
    ("cummin of the negation", lambda L, N: lambda x: L.cummin(-x), (C,)),
    ("cummax reversed", lambda L, N: lambda x: L.cummax(x, reverse=True), (C[::-1].copy(),)),
    ("max pool", lambda L, N: lambda x: _pool(L, x, L.max, -np.inf), (C,)),
    ("min pool of the negation", lambda L, N: lambda x: _pool(L, -x, L.min, np.inf), (C,)),
    ("clamp at -0", lambda L, N: lambda x: L.clamp(F(-0.0), x, F(1.0)), (C,)),
    ("clamp below +0", lambda L, N: lambda x: L.clamp(F(-1.0), x, F(0.0)), (C,)),
    ("fmax", lambda L, N: N.fmax, (A, B)),
    ("fmin", lambda L, N: N.fmin, (A, B)),
    ("relu", lambda L, N: lambda x: N.maximum(x, 0.0), (C,)),
    ("sort", lambda L, N: N.sort, (C,)),
    ("argmax", lambda L, N: N.argmax, (C,)),
]


def _bits(x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind != "f":
        return x
    return np.where(np.isnan(x), np.nan, x).view(np.uint32)  # (any NaN matches any NaN)


@pytest.mark.parametrize("label,make,args", CASES, ids=[c[0] for c in CASES])
def test_zero_signs_match_jax(label, make, args):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    want = _bits(make(jax.lax, jnp)(*args))
    f = make(plax_lax, pnp)
    for how, g in (("eager", f), ("jit", plax.jit(f))):
        got = _bits(g(*args))
        np.testing.assert_array_equal(got, want, err_msg=f"{label} ({how}): bits differ from JAX")


@pytest.mark.parametrize("dtype,direct", [(np.int32, True), (np.bool_, True), (np.uint8, True),
                                          (np.float32, False), (np.float16, False)])
def test_numpy_jit_calls_numpys_max_on_integers_only(dtype, direct):
    """The NumPy backend's jit calls ``np.maximum``/``np.minimum`` directly where the operands
    have one zero (integers, bools): on floats it would give either of two equal zeros."""
    from plax_numpy.backend import _direct_ufunc, load_core_impls

    x = np.zeros(3, dtype)
    for fn, prim, ufunc in ((pnp.maximum, plax_lax.max_p, np.maximum),
                            (pnp.minimum, plax_lax.min_p, np.minimum)):
        eqn, = plax.make_jaxpr(fn)(x, x).jaxpr.eqns
        assert eqn.primitive is prim
        assert _direct_ufunc(load_core_impls()[prim], eqn) is (ufunc if direct else None)

"""lax.scaled_dot (JAX 0.10's block-scaled dot product): values against NumPy (operands and
scales rounded to bfloat16 as JAX's decomposition rounds them, products in float64), JAX's
shape errors, vmap and jit, and beside JAX where installed."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import plax
from plax import lax
from plax import numpy as jnp

BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(0)
LHS = RNG.normal(size=(2, 4, 8)).astype(np.float32)
RHS = RNG.normal(size=(2, 8, 3)).astype(np.float32)
LS = RNG.uniform(0.5, 2, size=(2, 4, 2)).astype(np.float32)  # blocks of 4 along K
RS = RNG.uniform(0.5, 2, size=(2, 2, 3)).astype(np.float32)


def _reference(lhs, rhs, ls, rs):
    bf = lambda x: np.asarray(x).astype(BF16).astype(np.float64)  # noqa: E731
    a = (bf(lhs) * bf(np.repeat(ls, lhs.shape[-1] // ls.shape[-1], axis=-1))).astype(BF16)
    b = (bf(rhs) * bf(np.repeat(rs, rhs.shape[-2] // rs.shape[-2], axis=-2))).astype(BF16)
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


def test_values_against_numpy():
    got = lax.scaled_dot(LHS, RHS, lhs_scale=LS, rhs_scale=RS, preferred_element_type=jnp.float32)
    assert got.dtype == np.float32 and got.shape == (2, 4, 3)
    np.testing.assert_allclose(got, _reference(LHS, RHS, LS, RS), rtol=1e-5, atol=1e-5)
    default = lax.scaled_dot(LHS, RHS, lhs_scale=LS, rhs_scale=RS)
    assert default.dtype == BF16
    np.testing.assert_allclose(np.asarray(default, np.float32), _reference(LHS, RHS, LS, RS),
                               rtol=1e-2, atol=1e-2)
    unscaled = lax.scaled_dot(LHS[0], RHS[0], preferred_element_type=jnp.float32)
    np.testing.assert_allclose(unscaled, _reference(LHS[0], RHS[0], np.ones((4, 1)),
                                                    np.ones((1, 3))), rtol=1e-5, atol=1e-5)


def test_vmap_and_jit():
    f = lambda a, b, c, d: lax.scaled_dot(a, b, lhs_scale=c, rhs_scale=d,  # noqa: E731
                                          preferred_element_type=jnp.float32)
    want = f(LHS, RHS, LS, RS)
    np.testing.assert_allclose(plax.jit(f)(LHS, RHS, LS, RS), want, rtol=1e-6)
    np.testing.assert_allclose(plax.vmap(f)(LHS[:, None], RHS[:, None], LS[:, None],
                                            RS[:, None])[:, 0], want, rtol=1e-6)


@pytest.mark.parametrize("call, message", [
    (lambda: lax.scaled_dot(LHS[0, 0], RHS[0, :, 0]), "does not support 0-rank and 1-rank"),
    (lambda: lax.scaled_dot(LHS, RHS, lhs_scale=LS[0]), "must have the same rank"),
    (lambda: lax.scaled_dot(LHS, RHS[:, :4]), "LHS contracting dim 2 of size 8 does not match"),
    (lambda: lax.scaled_dot(LHS, RHS, lhs_scale=LS[:, :, :1].repeat(3, 2)),
     "must be divisible by its scale's dim size 3"),
    (lambda: lax.scaled_dot(LHS, RHS, lhs_scale=LS[:, :, :1].repeat(8, 2)),
     r"ratio of LHS contracting dim 2 to its scale's dim size \(1\) must be at least 2"),
    (lambda: lax.scaled_dot(LHS, RHS, rhs_scale=RS[:, :, :2]), "RHS dim 2 of size 3 does not"),
    (lambda: lax.scaled_dot(np.ones((2, 1)), np.ones((1, 3))), "must be at least 2")])
def test_errors(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_beside_jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")
    for kwargs in ({"lhs_scale": LS, "rhs_scale": RS, "preferred_element_type": np.float32},
                   {"lhs_scale": LS, "rhs_scale": RS}, {}):
        ours = lax.scaled_dot(LHS, RHS, **kwargs)
        theirs = jax.lax.scaled_dot(LHS, RHS, **kwargs)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_allclose(np.asarray(ours, np.float32), np.asarray(theirs, np.float32),
                                   rtol=1e-5, atol=1e-5)

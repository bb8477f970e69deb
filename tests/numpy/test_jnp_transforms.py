"""plax.numpy functions compose with the transforms: gradients against finite differences,
jit against eager, vmap against a Python loop, for a table of differentiable functions (the
composite ones especially: var, logaddexp, hypot, sinc, cumprod, sort, einsum, pad, ...)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads
from jnp_testutil import assert_close

RNG = np.random.default_rng(90)
A = jnp.asarray((RNG.standard_normal((3, 4)) + np.array([0.0, 0.3, -0.2, 0.6])).astype(np.float32))
B = jnp.asarray(RNG.standard_normal((3, 4)).astype(np.float32))
POS = jnp.asarray(RNG.uniform(0.5, 2.0, (3, 4)).astype(np.float32))
SQ = jnp.asarray(RNG.standard_normal((3, 3)).astype(np.float32))
V3 = jnp.asarray(RNG.standard_normal((5, 3)).astype(np.float32))

# name -> (function, arguments)
FUNCTIONS = {
    "sum_axis": (lambda x: jnp.sum(x, axis=1), (A,)),
    "mean_keepdims": (lambda x: jnp.mean(x, axis=0, keepdims=True), (A,)),
    "var": (lambda x: jnp.var(x, axis=1), (A,)), "std_ddof": (lambda x: jnp.std(x, ddof=1), (A,)),
    "prod": (lambda x: jnp.prod(x, axis=0), (POS,)), "max": (lambda x: jnp.max(x, axis=1), (A,)),
    "ptp": (lambda x: jnp.ptp(x, axis=1), (A,)), "cumsum": (lambda x: jnp.cumsum(x, axis=1), (A,)),
    "cumprod": (lambda x: jnp.cumprod(x, axis=1), (POS,)),
    "nansum": (jnp.nansum, (A,)), "nanmean": (lambda x: jnp.nanmean(x, axis=0), (A,)),
    "average": (lambda x, w: jnp.average(x, axis=1, weights=w), (A, POS)),
    "sum_where": (lambda x: jnp.sum(x, where=np.asarray(A) > 0), (A,)),
    "logaddexp": (jnp.logaddexp, (A, B)), "logaddexp2": (jnp.logaddexp2, (A, B)),
    "hypot": (jnp.hypot, (A, B)), "sinc": (jnp.sinc, (A,)), "arctan2": (jnp.arctan2, (A, B)),
    "power": (jnp.power, (POS, B)), "float_power": (jnp.float_power, (POS, A)),
    "sqrt": (jnp.sqrt, (POS,)), "cbrt": (jnp.cbrt, (POS,)), "log10": (jnp.log10, (POS,)),
    "expm1": (jnp.expm1, (A,)), "deg2rad": (jnp.deg2rad, (A,)), "copysign": (jnp.copysign, (A, B)),
    "maximum": (jnp.maximum, (A, B)), "fmin": (jnp.fmin, (A, B)), "square": (jnp.square, (A,)),
    "reciprocal": (jnp.reciprocal, (POS,)), "abs": (jnp.abs, (A,)),
    "clip": (lambda x: jnp.clip(x, -0.5, 0.5), (A,)), "where": (lambda x, y: jnp.where(
        np.asarray(A) > 0, x, y), (A, B)), "nan_to_num": (jnp.nan_to_num, (A,)),
    "dot": (jnp.dot, (A, B.T)), "matmul_batch": (jnp.matmul, (A[None], B.T)),
    "einsum": (lambda x, y: jnp.einsum("ij,kj->ik", x, y), (A, B)),
    "tensordot": (lambda x, y: jnp.tensordot(x, y, axes=([1], [1])), (A, B)),
    "kron": (jnp.kron, (SQ[:2, :2], SQ[1:, 1:])), "cross": (jnp.cross, (V3, V3[::-1])),
    "outer": (jnp.outer, (A[0], B[1])), "inner": (jnp.inner, (A, B)),
    "vdot": (jnp.vdot, (A, B)), "trace": (jnp.trace, (SQ,)), "diag": (jnp.diag, (A[0],)),
    "diagonal": (lambda x: jnp.diagonal(x, 1), (A,)), "tril": (jnp.tril, (A,)),
    "sort": (lambda x: jnp.sort(x, axis=1), (A,)), "take": (lambda x: jnp.take(
        x, np.array([2, 0, 3]), axis=1), (A,)),
    "take_along_axis": (lambda x: jnp.take_along_axis(x, np.argsort(np.asarray(A), 1), 1), (A,)),
    "pad_reflect": (lambda x: jnp.pad(x, 1, mode="reflect"), (A,)),
    "pad_constant": (lambda x: jnp.pad(x, ((1, 0), (0, 2)), constant_values=3.0), (A,)),
    "roll": (lambda x: jnp.roll(x, 2, axis=1), (A,)), "tile": (lambda x: jnp.tile(x, (2, 1)), (A,)),
    "repeat": (lambda x: jnp.repeat(x, np.array([1, 0, 2]), axis=0), (A,)),
    "concatenate": (lambda x, y: jnp.concatenate([x, y], axis=1), (A, B)),
    "stack": (lambda x, y: jnp.stack([x, y], axis=-1), (A, B)),
    "split": (lambda x: jnp.split(x, 2, axis=1)[1], (A,)), "flip": (jnp.flip, (A,)),
    "transpose": (jnp.transpose, (A,)), "reshape": (lambda x: x.reshape(2, 6), (A,)),
    "linspace": (lambda a, b: jnp.linspace(a, b, 5), (A[0, 0], B[0, 0])),
    "interpolate_like": (lambda x: jnp.round(x, 1) * 0 + x * 2, (A,)),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_grads_match_finite_differences(name):
    fn, args = FUNCTIONS[name]
    check_grads(fn, args, order=1, atol=3e-2)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_jit_matches_eager(name):
    fn, args = FUNCTIONS[name]
    eager = fn(*args)
    jitted = plax.jit(fn)(*args)
    for e, j in zip(plax.tree_util.tree_leaves(eager), plax.tree_util.tree_leaves(jitted)):
        assert_close(j, np.asarray(e), rtol=1e-5, atol=1e-5)


_VMAPPABLE = ["var", "std_ddof", "logaddexp", "hypot", "sinc", "cumprod", "sort", "einsum",
              "pad_reflect", "roll", "take", "diagonal", "trace", "tril", "clip", "nan_to_num",
              "dot", "matmul_batch", "kron", "concatenate", "split", "average", "linspace"]


@pytest.mark.parametrize("name", _VMAPPABLE)
def test_vmap_matches_python_loop(name):
    fn, args = FUNCTIONS[name]
    batch = [jnp.stack([a, a * 0.5 + 0.25]) for a in args]
    out = plax.vmap(fn)(*batch)
    expected = [fn(*[b[i] for b in batch]) for i in range(2)]
    for i in range(2):
        assert_close(out[i], np.asarray(expected[i]), rtol=1e-5, atol=1e-5)


def test_sinc_and_hypot_gradients_at_zero_are_finite():
    g = plax.grad(lambda x: jnp.sinc(x))(0.0)
    assert np.isfinite(float(g)) and abs(float(g)) < 1e-6
    g = plax.grad(lambda x: jnp.hypot(x, 3.0))(0.0)
    assert np.isfinite(float(g))


def test_seed_style_program():
    """A small program in the style of the seed tutorials: linear regression by gradient
    descent with jnp.dot, jnp.mean, jnp.where and .at[] updates under jit."""
    xs = jnp.linspace(-1.0, 1.0, 20)
    ys = 3.0 * xs + 0.5

    def loss(params):
        w, b = params[0], params[1]
        pred = w * xs + b
        return jnp.mean((pred - ys) ** 2)

    @plax.jit
    def step(params):
        g = plax.grad(loss)(params)
        return params - 0.5 * g

    params = jnp.zeros(2)
    for _ in range(200):
        params = step(params)
    assert_close(params, np.array([3.0, 0.5], np.float32), rtol=1e-3, atol=1e-3)
    relu = jnp.where(xs > 0, xs, 0.0)
    assert_close(jnp.dot(relu, relu), np.sum(np.maximum(np.asarray(xs), 0) ** 2), rtol=1e-5)

"""plax.lowering.simplify.unit_reductions: a reduction over axes of size 1 only is lowered as a
reshape (the gradient of ``x @ w + b`` sums the bias's cotangent over a size-1 axis), with the
reduction's values, and nothing else is rewritten."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.interpret import eval_jaxpr
from plax.lowering.simplify import unit_reductions

REDUCTIONS = {"reduce_sum": (lax.reduce_sum_p, np.float32),
              "reduce_prod": (lax.reduce_prod_p, np.float32),
              "reduce_max": (lax.reduce_max_p, np.float32),
              "reduce_min": (lax.reduce_min_p, np.int32),
              "reduce_and": (lax.reduce_and_p, np.bool_),
              "reduce_or": (lax.reduce_or_p, np.bool_),
              "reduce_xor": (lax.reduce_xor_p, np.uint8)}


def _names(jaxpr):
    return [e.primitive.name for e in jaxpr.eqns]


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_unit_axes_become_a_reshape_with_the_same_values(name):
    prim, dtype = REDUCTIONS[name]
    x = (np.arange(12).reshape(3, 1, 4, 1) % 3).astype(dtype)
    closed = plax.make_jaxpr(lambda x: prim.bind(x, axes=(1, 3)))(x)
    rewritten = unit_reductions(closed.jaxpr)
    assert _names(closed.jaxpr) == [name] and _names(rewritten) == ["reshape"]
    (got,) = eval_jaxpr(rewritten, closed.consts, x)
    (want,) = eval_jaxpr(closed.jaxpr, closed.consts, x)
    assert np.asarray(got).shape == (3, 4) and np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_a_reduction_over_a_wider_axis_is_left_alone():
    j = plax.make_jaxpr(lambda x: (x.sum(axis=(0, 1)), x.max(axis=1)))(jnp.ones((1, 3))).jaxpr
    assert unit_reductions(j) is j


def test_bias_gradient_runs_without_reductions_over_size_one_axes_on_every_backend():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    grad_b = plax.grad(lambda b: jnp.sum(jnp.tanh(x @ w + b)))
    closed = plax.make_jaxpr(grad_b)(b)
    unit = [e for e in closed.jaxpr.eqns if e.primitive.name == "reduce_sum"
            and all(e.invars[0].aval.shape[a] == 1 for a in e.params["axes"])]
    assert unit, "the gradient sums over a size-1 axis (as JAX stages it)"
    assert not [e for e in unit_reductions(closed.jaxpr).eqns if any(e is u for u in unit)]
    want = np.sum(1 - np.tanh(x.astype(np.float64) @ w + b) ** 2, axis=0)
    for backend in plax.plugins.registry().backends:
        if not any(d.platform == "cpu" for d in plax.devices(backend)):
            continue
        got = plax.jit(grad_b, backend=backend)(b)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6, err_msg=backend)


def _cpu_backends():
    return [b for b in plax.plugins.registry().backends
            if any(d.platform == "cpu" for d in plax.devices(b))]


#: programs whose size-1 reductions read operands a backend may hold as strided views or as
#: 0-d results: a transposed and a sliced operand, every axis of a size-1 array, keepdims, an
#: empty axes tuple (a reshape to the same shape), bfloat16, and a program output
STRIDED_CASES = {
    "transposed": lambda x: jnp.transpose(x, (2, 1, 0)).sum(axis=1) * 2,
    "sliced": lambda x: x[::2].max(axis=1) + 1,
    "all_axes_of_size_one": lambda x: x[:1, :, :1].sum() * 3,
    "keepdims": lambda x: jnp.transpose(x, (2, 1, 0)).prod(axis=1, keepdims=True) + 1,
    "no_axes": lambda x: lax.reduce_sum_p.bind(jnp.transpose(x, (2, 1, 0)), axes=()) + 1,
    "bfloat16": lambda x: jnp.transpose(x.astype(jnp.bfloat16), (2, 1, 0)).sum(axis=1) * 2,
    "output": lambda x: jnp.transpose(x, (2, 1, 0)).min(axis=1),
}


@pytest.mark.parametrize("case", sorted(STRIDED_CASES))
def test_unit_reductions_of_views_on_every_backend(case):
    f = STRIDED_CASES[case]
    x = (np.arange(6, dtype=np.float32).reshape(3, 1, 2) - 2.5)
    want = np.asarray(plax.jit(f, backend="numpy")(x)).astype(np.float64)
    for backend in _cpu_backends():
        got = np.asarray(plax.jit(f, backend=backend)(x))
        assert got.shape == want.shape, (backend, got.shape)
        np.testing.assert_array_equal(got.astype(np.float64), want, err_msg=backend)


def test_sum_over_a_size_one_axis_keeps_negative_zero_as_jax():
    # XLA makes the reduction a bitcast, so JAX's sum of a single -0.0 is -0.0 (a sum that
    # starts from +0.0 gives +0.0); a fusing backend's reshape gives JAX's value
    if "numba" not in plax.plugins.registry().backends:
        pytest.skip("the Numba backend (a fusing backend on the CPU) is not installed")
    x = np.full((3, 1, 2), -0.0, np.float32)
    got = np.asarray(plax.jit(lambda x: x.sum(axis=1), backend="numba")(x))
    assert got.shape == (3, 2) and np.signbit(got).all()
    jax = pytest.importorskip("jax")
    assert np.signbit(np.asarray(jax.jit(lambda x: x.sum(axis=1))(x))).all()

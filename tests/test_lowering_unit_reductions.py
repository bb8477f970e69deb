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

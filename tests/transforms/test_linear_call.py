"""``custom_derivatives.linear_call``: the call, its transpose under grad/vjp/linear_transpose
(custom, not derived), jvp, jit, vmap, and beside JAX 0.10.2 where it is installed."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import plax
from plax import numpy as jnp
from plax.custom_derivatives import linear_call


def _div(r, x):
    return x / r


def _div_t(r, ct):
    return ct / r


def div_add(x, denom, lc=linear_call):
    return x + lc(_div, _div_t, denom, x)


def _transpose(jax, f, example):
    return lambda y: jax.linear_transpose(f, example)(y)[0]


def _custom_id(x, lc=linear_call):
    # the transpose is deliberately not fun's transpose: what reverse mode uses shows
    return lc(lambda _, x: x, lambda _, t: 7.0 * t, (), x)


def test_call_and_custom_transpose():
    assert float(div_add(9.0, 3.0)) == 12.0
    # d/dx (x + x/r) = 1 + 1/r, from the transpose rule t / r
    np.testing.assert_allclose(plax.grad(div_add)(9.0, 3.0), 1 + 1 / 3, rtol=1e-6)
    t1 = _transpose(plax, _custom_id, 1.0)
    assert float(t1(2.0)) == 14.0  # the user's transpose, not the identity's
    assert float(_transpose(plax, t1, 1.0)(2.0)) == 2.0  # transposed back: the function
    assert float(_transpose(plax, _transpose(plax, t1, 1.0), 1.0)(2.0)) == 14.0


def test_grad_matches_finite_differences_and_composes_with_jit():
    r = np.array([1.0, 2.0, 4.0], np.float32)
    f = lambda x: jnp.sum(jnp.sin(div_add(x, r)))  # noqa: E731
    x = np.array([0.3, -0.2, 0.5], np.float32)
    eps = 1e-3
    x64, r64 = x.astype(np.float64), r.astype(np.float64)
    ref = [(np.sum(np.sin((x64 + eps * e) * (1 + 1 / r64)))
            - np.sum(np.sin((x64 - eps * e) * (1 + 1 / r64)))) / (2 * eps) for e in np.eye(3)]
    for g in (plax.grad(f), plax.jit(plax.grad(f)), plax.grad(plax.jit(f))):
        np.testing.assert_allclose(g(x), ref, rtol=1e-3)


def test_jvp_applies_the_function_to_tangents():
    y, t = plax.jvp(lambda x: div_add(x, 4.0), (8.0,), (1.0,))
    assert (float(y), float(t)) == (10.0, 1.25)
    with pytest.raises(TypeError, match="residual argument"):
        plax.grad(div_add, argnums=1)(9.0, 3.0)


def test_pytrees_and_closed_over_values_under_jit():
    def fun(r, xs):
        return {"s": xs[0] * r["scale"] + xs[1]}

    def fun_t(r, ct):
        return (ct["s"] * r["scale"], ct["s"])

    @plax.jit
    def g(w, a, b):
        # the function closes over w, traced by jit: it is an operand of the equation
        out = linear_call(lambda r, xs: {"s": fun(r, xs)["s"] * w},
                          lambda r, ct: fun_t(r, {"s": ct["s"] * w}),
                          {"scale": 3.0}, (a, b))
        return out["s"]

    assert float(g(2.0, 1.0, 1.0)) == 8.0
    np.testing.assert_allclose(plax.grad(g, argnums=(1, 2))(2.0, 1.0, 1.0), (6.0, 2.0))
    with pytest.raises(TypeError, match="transpose output pytree structure"):
        plax.grad(lambda x: linear_call(lambda r, x: x, lambda r, t: (t, t), (), x))(1.0)


def test_vmap_against_a_python_loop():
    rs = np.array([1.0, 2.0, 4.0], np.float32)
    xs = np.array([3.0, 5.0, 7.0], np.float32)
    for in_axes in ((0, 0), (None, 0), (0, None)):
        x_arg = xs if in_axes[0] == 0 else xs[0]
        r_arg = rs if in_axes[1] == 0 else rs[0]
        out = plax.vmap(plax.grad(div_add), in_axes)(x_arg, r_arg)
        ref = [1 + 1 / (rs[i] if in_axes[1] == 0 else rs[0]) for i in range(3)]
        np.testing.assert_allclose(out, ref, rtol=1e-6)
    # vjp of a vmapped call: the batched transpose
    _, pull = plax.vjp(plax.vmap(partial(div_add, denom=rs[0])), xs)
    np.testing.assert_allclose(pull(np.ones(3, np.float32))[0], 1 + 1 / rs[0], rtol=1e-6)
    _, pull = plax.vjp(lambda x: plax.vmap(div_add, (None, 0))(x, rs), xs[0])
    np.testing.assert_allclose(pull(np.ones(3, np.float32))[0], np.sum(1 + 1 / rs), rtol=1e-6)


def test_jaxpr_holds_both_functions():
    # JAX 0.10's parameters: the function as ``callee``, its transpose behind a thunk
    text = str(plax.make_jaxpr(div_add)(9.0, 3.0))
    assert "linear_call[" in text and "num_res=1" in text and "transpose_thunk=" in text
    eqn = plax.make_jaxpr(div_add)(9.0, 3.0).eqns[0]
    transpose = eqn.params["transpose_thunk"]()
    assert "div" in str(transpose) and transpose.in_avals == eqn.params["callee"].in_avals


def test_beside_jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")
    from jax.custom_derivatives import linear_call as jax_linear_call
    ours = plax.grad(div_add)(9.0, 3.0)
    theirs = jax.grad(partial(div_add, lc=jax_linear_call))(9.0, 3.0)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    for depth in range(1, 4):
        f_ours, f_theirs = partial(_custom_id), partial(_custom_id, lc=jax_linear_call)
        for _ in range(depth):
            f_ours, f_theirs = _transpose(plax, f_ours, 1.0), _transpose(jax, f_theirs, 1.0)
        assert float(f_ours(2.0)) == float(f_theirs(2.0))
    assert float(plax.jit(div_add)(9.0, 3.0)) == float(
        jax.jit(partial(div_add, lc=jax_linear_call))(9.0, 3.0))


def test_in_a_scan_body_under_jit_and_grad():
    # the transpose is deliberately 2 * t * r (not t * r): the loop's gradient uses it
    def step(c, r):
        return c + linear_call(lambda r, x: x * r, lambda r, t: 2 * t * r, r, c), None

    rs = np.array([1.0, 2.0, 3.0], np.float32)
    f = lambda x: plax.lax.scan(step, x, rs)[0]  # noqa: E731
    assert float(plax.jit(f)(1.0)) == float(np.prod(1 + rs))
    for g in (plax.grad(f), plax.jit(plax.grad(f))):
        np.testing.assert_allclose(g(1.0), np.prod(1 + 2 * rs.astype(np.float64)), rtol=1e-6)

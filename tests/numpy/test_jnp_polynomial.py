"""Polynomials of plax.numpy (poly, polyadd, polysub, polymul, polydiv, polyder, polyint,
polyval, polyfit, roots): values against NumPy in float64, dtypes against JAX's recording,
gradients against finite differences, jit and vmap."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import plax
import plax.numpy as jnp
from plax.test_util import check_grads
from jnp_extras_dtype_table import EXPRESSIONS, check_like_recorded, describe_plax

A = np.asarray


def _x64():
    return plax.config.override("jax_enable_x64", True)


coeffs = st.lists(st.floats(-10, 10), min_size=1, max_size=6).map(np.array)


@pytest.mark.parametrize("expr", EXPRESSIONS["polynomial"])
def test_dtype_weak_type_and_value_like_jax(expr):
    check_like_recorded(expr, describe_plax)


@settings(max_examples=25, deadline=None)
@given(coeffs, coeffs)
def test_add_sub_mul_div_hypothesis(a, b):
    with _x64():
        np.testing.assert_allclose(A(jnp.polyadd(a, b)), np.polyadd(a, b))
        np.testing.assert_allclose(A(jnp.polysub(a, b)), np.polysub(a, b))
        np.testing.assert_allclose(A(jnp.polymul(a, b, trim_leading_zeros=True)),
                                   np.polymul(a, b), rtol=1e-12, atol=1e-9)
        if abs(b[0]) > 0.5:
            q, r = jnp.polydiv(a, b)
            nq, nr = np.polydiv(a, b)
            np.testing.assert_allclose(A(q), nq, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(A(r)[len(A(r)) - len(nr):], nr, rtol=1e-9, atol=1e-7)


def test_polymul_keeps_leading_zeros_like_jax():
    a, b = np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0])
    np.testing.assert_allclose(A(jnp.polymul(a, b)), [0.0, 1.0, 5.0, 6.0])
    with pytest.raises(plax.errors.ConcretizationTypeError, match="trim_leading_zeros"):
        plax.jit(lambda a: jnp.polymul(a, b, trim_leading_zeros=True))(a)


@pytest.mark.parametrize("m", [0, 1, 2, 5])
def test_polyder_polyint_against_numpy(m):
    p = np.array([3.0, -1.0, 2.0, 0.5, 4.0])
    with _x64():
        np.testing.assert_allclose(A(jnp.polyder(p, m)), np.polyder(p, m))
        np.testing.assert_allclose(A(jnp.polyint(p, m)), np.polyint(p, m))
        if m:
            k = np.arange(1.0, m + 1)
            np.testing.assert_allclose(A(jnp.polyint(p, m, k=k)), np.polyint(p, m, k=k))
            np.testing.assert_allclose(A(jnp.polyint(p, m, k=2.0)), np.polyint(p, m, k=2.0))


@pytest.mark.parametrize("xshape", [(), (4,), (2, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_polyval_against_numpy(xshape, dtype):
    rng = np.random.default_rng(1)
    p = (rng.standard_normal(5) * 3).astype(dtype)
    x = (rng.standard_normal(xshape) * 2).astype(dtype)
    with _x64():
        np.testing.assert_allclose(A(jnp.polyval(p, x)), np.polyval(p, x), rtol=1e-12)
        np.testing.assert_allclose(A(jnp.polyval(p, x, unroll=2)), np.polyval(p, x), rtol=1e-12)


@pytest.mark.parametrize("zeros", [np.array([1.0, -2.0, 0.5]), np.array([1 + 2j, 1 - 2j, 3.0]),
                                   np.array([[1.0, 2.0], [0.5, 3.0]])])
def test_poly_against_numpy(zeros):
    with _x64():
        np.testing.assert_allclose(A(jnp.poly(zeros)), np.poly(zeros), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("p", [[1.0, -6.0, 11.0, -6.0], [0.0, 0.0, 2.0, 0.0, -8.0],
                               [1.0, 0.0, 1.0], [1.0, 2.0, 0.0, 0.0], [5.0]])
def test_roots_against_numpy(p):
    p = np.array(p)
    with _x64():
        got = np.sort_complex(A(jnp.roots(p)))
        np.testing.assert_allclose(got, np.sort_complex(np.roots(p)), atol=1e-7)


def test_roots_under_jit_needs_strip_zeros_false():
    p = np.array([1.0, -3.0, 2.0])
    with pytest.raises(plax.errors.ConcretizationTypeError, match="strip_zeros"):
        plax.jit(jnp.roots)(p)
    got = plax.jit(lambda p: jnp.roots(p, strip_zeros=False))(p)
    np.testing.assert_allclose(np.sort_complex(A(got)), [1.0, 2.0], atol=1e-5)


@pytest.mark.parametrize("kw", [{}, {"w": "w"}, {"full": True}, {"cov": True},
                                {"cov": "unscaled"}, {"rcond": 1e-3}])
@pytest.mark.parametrize("ycols", [None, 2])
@pytest.mark.parametrize("deg", [0, 1, 3])
def test_polyfit_against_numpy(kw, ycols, deg):
    rng = np.random.default_rng(2)
    x = np.linspace(-1, 2, 12)
    y = x ** 2 - x + rng.standard_normal(12) * 0.1
    if ycols:
        y = np.stack([y, 2 * y + 1], 1)
    kw = dict(kw)
    if kw.get("w") == "w":
        kw["w"] = rng.uniform(0.5, 2, 12)
    with _x64():
        got = jnp.polyfit(x, y, deg, **kw)
        exp = np.polyfit(x, y, deg, **kw)
        got, exp = (got, exp) if isinstance(exp, tuple) else ((got,), (exp,))
        for g, e in zip(got, exp):
            np.testing.assert_allclose(A(g), e, rtol=1e-7, atol=1e-10)


def test_gradients_against_finite_differences():
    with _x64():
        p = jnp.asarray(np.array([1.5, -2.0, 0.5, 3.0]))
        x = jnp.asarray(np.array([0.3, -1.2, 2.0]))
        check_grads(jnp.polyval, (p, x), 2)
        check_grads(jnp.polymul, (p, x), 1)
        check_grads(lambda a, b: jnp.polydiv(a, b)[0], (p, x), 1)
        check_grads(jnp.polyadd, (p, x), 1)
        check_grads(lambda p: jnp.polyder(p, 2), (p,), 1)
        check_grads(lambda p: jnp.polyint(p, 1, k=1.0), (p,), 1)
        check_grads(jnp.poly, (x,), 1)
        ys = jnp.asarray(np.array([1.0, 2.5, 2.0, 4.0, 7.0]))
        check_grads(lambda y: jnp.polyfit(jnp.asarray(np.arange(5.0)), y, 2), (ys,), 1)


def test_jit_and_vmap():
    rng = np.random.default_rng(3)
    ps = rng.standard_normal((3, 4)).astype(np.float32)
    q = np.array([1.0, 0.5], np.float32)
    fns = {
        "poly": jnp.poly, "polyadd": lambda p: jnp.polyadd(p, q),
        "polysub": lambda p: jnp.polysub(q, p), "polymul": lambda p: jnp.polymul(p, q),
        "polydiv": lambda p: jnp.polydiv(p, q)[1], "polyder": jnp.polyder,
        "polyint": jnp.polyint, "polyval": lambda p: jnp.polyval(p, q),
        "polyfit": lambda p: jnp.polyfit(np.arange(4.0, dtype=np.float32), p, 1),
        "roots": lambda p: jnp.sort_complex(jnp.roots(p, strip_zeros=False)),
    }
    for name, fn in fns.items():
        eager = np.stack([A(fn(row)) for row in ps])
        np.testing.assert_allclose(A(plax.vmap(fn)(ps)), eager, rtol=2e-4, atol=2e-5,
                                   err_msg=name)
        np.testing.assert_allclose(A(plax.jit(fn)(ps[0])), eager[0], rtol=2e-4, atol=2e-5,
                                   err_msg=name)

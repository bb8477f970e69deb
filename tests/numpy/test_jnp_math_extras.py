"""Elementwise extras of plax.numpy (frexp, ldexp, gcd, lcm, modf, spacing, fabs, pow,
bitwise_count, i0, sort_complex, matvec, vecmat): values against NumPy in float64 (bit-exact
where NumPy is), dtypes against JAX's recording, gradients, jit and vmap."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import plax
import plax.numpy as jnp
from plax.test_util import check_grads
from jnp_extras_dtype_table import EXPRESSIONS, check_like_recorded, describe_plax

# NumPy's references warn on the overflows and NaNs the tests ask for
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

A = np.asarray
SPECIAL = [0.0, -0.0, 1.0, -3.0, 0.75, 123.456, -1e-3, np.inf, -np.inf, np.nan]


def _x64():
    return plax.config.override("jax_enable_x64", True)


def _floats(dtype):
    info = np.finfo(dtype)
    return np.array(SPECIAL + [float(info.tiny), float(info.smallest_subnormal) * 3,
                               float(info.max)], dtype)


@pytest.mark.parametrize("expr", EXPRESSIONS["math_extras"])
def test_dtype_weak_type_and_value_like_jax(expr):
    check_like_recorded(expr, describe_plax)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_frexp_ldexp_bit_exact_against_numpy(dtype):
    x = _floats(dtype)
    with _x64():
        m, e = jnp.frexp(x)
        nm, ne = np.frexp(x)
        np.testing.assert_array_equal(A(m), nm)
        np.testing.assert_array_equal(A(e), ne)
        assert A(e).dtype == np.int32
        finite = x[np.isfinite(x)]
        for k in [-300, -40, -1, 0, 3, 20, 200, 1100]:
            np.testing.assert_array_equal(A(jnp.ldexp(finite, np.int32(k))),
                                          np.ldexp(finite, k), err_msg=str(k))
        np.testing.assert_array_equal(A(jnp.ldexp(m, e)), x)  # the round trip


@settings(max_examples=40, deadline=None)
@given(st.floats(allow_nan=False, width=32), st.integers(-160, 160))
def test_frexp_ldexp_hypothesis(x, k):
    x = np.float32(x)
    m, e = jnp.frexp(x)
    nm, ne = np.frexp(x)
    assert float(m) == float(nm) and int(e) == int(ne)
    assert float(jnp.ldexp(x, np.int32(k))) == float(np.ldexp(x, k))


def test_ldexp_rejects_float_exponents():
    with pytest.raises(ValueError, match="ldexp"):
        jnp.ldexp(1.0, 2.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_spacing_against_numpy(dtype):
    x = _floats(dtype)
    # JAX's choices where NumPy differs: spacing(-0.) is -tiny, float16 spacing(-inf) is inf
    jax_only = {-np.inf: np.inf} if dtype == np.float16 else {
        -0.0: -float(np.finfo(dtype).smallest_subnormal)}
    shared = np.array([v for v in x if not any(v == k and np.signbit(v) == np.signbit(k)
                                                for k in jax_only)], dtype)
    with _x64():
        np.testing.assert_array_equal(A(jnp.spacing(shared)), np.spacing(shared))
        for value, expected in jax_only.items():
            assert float(jnp.spacing(np.array(value, dtype))) == expected
    with pytest.raises(ValueError, match="complex"):
        jnp.spacing(np.complex64(1))


@settings(max_examples=40, deadline=None)
@given(st.integers(-10**6, 10**6), st.integers(-10**6, 10**6))
def test_gcd_lcm_hypothesis(a, b):
    with _x64():
        assert int(jnp.gcd(np.int64(a), np.int64(b))) == np.gcd(a, b)
        assert int(jnp.lcm(np.int64(a), np.int64(b) % 1000)) == np.lcm(a, b % 1000)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32])
def test_gcd_lcm_broadcast_against_numpy(dtype):
    rng = np.random.default_rng(1)
    a = rng.integers(0, 11, (3, 4)).astype(dtype)
    b = rng.integers(0, 11, (4,)).astype(dtype)
    np.testing.assert_array_equal(A(jnp.gcd(a, b)), np.gcd(a, b))
    np.testing.assert_array_equal(A(jnp.lcm(a, b)), np.lcm(a, b))
    with pytest.raises(ValueError, match="integers"):
        jnp.gcd(np.ones(2), 2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16])
def test_modf_fabs_against_numpy(dtype):
    x = (np.array([2.5, -1.25, 0.0, -7.0, 3.999]) * (1 if dtype != np.int16 else 2)).astype(dtype)
    with _x64():
        frac, whole = jnp.modf(x)
        nfrac, nwhole = np.modf(x)
        np.testing.assert_allclose(A(frac), nfrac, rtol=1e-6)
        np.testing.assert_allclose(A(whole), nwhole)
        np.testing.assert_allclose(A(jnp.fabs(x)), np.fabs(x))
    with pytest.raises(TypeError):
        jnp.fabs(np.complex64(1))


def test_pow_is_power():
    x = np.array([1.5, 2.0, 3.0])
    np.testing.assert_allclose(A(jnp.pow(x, 2)), x ** 2)
    np.testing.assert_allclose(A(jnp.pow(x, x)), np.power(x, x), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64,
                                   np.bool_])
def test_bitwise_count_against_numpy(dtype):
    rng = np.random.default_rng(2)
    with _x64():
        if dtype == np.bool_:
            x = np.array([True, False, True])
        else:
            info = np.iinfo(dtype)
            x = np.concatenate([rng.integers(info.min, info.max, 20, dtype=dtype, endpoint=True),
                                np.array([info.min, info.max, 0], dtype)])
        out = jnp.bitwise_count(x)
        np.testing.assert_array_equal(A(out), np.bitwise_count(x))
        assert out.dtype == np.uint8
    with pytest.raises(TypeError):
        jnp.bitwise_count(np.float32(1))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_i0_against_numpy(dtype):
    x = np.array([0.0, 0.5, -1.0, 3.0, -10.0, 30.0]).astype(dtype)
    with _x64():
        np.testing.assert_allclose(A(jnp.i0(x)), np.i0(x.astype(np.float64)),
                                   rtol=1e-12 if dtype == np.float64 else 2e-6)
    with pytest.raises(ValueError):
        jnp.i0(np.complex64(1))


@pytest.mark.parametrize("shape", [(5,), (3, 4)])
@pytest.mark.parametrize("dtype", [np.int8, np.float64, np.complex128])
def test_sort_complex_against_numpy(shape, dtype):
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 3, shape).astype(dtype)
    if dtype == np.complex128:
        x = x + 1j * rng.integers(-2, 2, shape)
    with _x64():
        np.testing.assert_array_equal(A(jnp.sort_complex(x)), np.sort_complex(x))


@pytest.mark.parametrize("shapes", [((2, 3), (3,)), ((4, 2, 3), (3,)), ((2, 3), (5, 3)),
                                    ((1, 2, 3), (4, 1, 3))])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.int32])
def test_matvec_vecmat_against_numpy(shapes, dtype):
    rng = np.random.default_rng(4)
    ms, vs = shapes
    m = (rng.standard_normal(ms) * 3).astype(dtype)
    v = (rng.standard_normal(vs) * 3).astype(dtype)
    if dtype == np.complex128:
        m, v = m + 1j * rng.standard_normal(ms), v - 1j * rng.standard_normal(vs)
    with _x64():
        np.testing.assert_allclose(A(jnp.matvec(m, v)), np.matvec(m, v), rtol=1e-12)
        mt = np.swapaxes(m, -1, -2)
        np.testing.assert_allclose(A(jnp.vecmat(v, mt)), np.vecmat(v, mt), rtol=1e-12)
    with pytest.raises(ValueError):
        jnp.matvec(np.ones(3), np.ones(3))


def test_gradients_against_finite_differences():
    rng = np.random.default_rng(5)
    with _x64():
        x = jnp.asarray(rng.uniform(0.2, 3.0, 4) * np.array([1, -1, 1, -1]))
        m = jnp.asarray(rng.standard_normal((3, 4)))
        check_grads(jnp.i0, (x,), 2)
        check_grads(lambda x: jnp.ldexp(x, np.int32(3)), (x,), 1)
        check_grads(lambda x: jnp.modf(x * 1.3)[0], (x,), 1)
        check_grads(jnp.fabs, (x,), 1)
        check_grads(jnp.matvec, (m, x), 2)
        check_grads(jnp.vecmat, (x[:3], m), 2)
        check_grads(lambda x: jnp.frexp(x)[0], (x,), 1)


def test_jit_and_vmap():
    rng = np.random.default_rng(6)
    xs = rng.uniform(-4, 4, (3, 5)).astype(np.float32)
    ints = rng.integers(-40, 40, (3, 5)).astype(np.int32)
    m = rng.standard_normal((5, 5)).astype(np.float32)
    cases = {
        "frexp": (lambda x: jnp.frexp(x)[1], xs), "ldexp": (lambda x: jnp.ldexp(
            x, np.int32(-3)), xs), "gcd": (lambda a: jnp.gcd(a, 12), ints),
        "lcm": (lambda a: jnp.lcm(a, 6), ints), "modf": (lambda x: jnp.modf(x)[0], xs),
        "spacing": (jnp.spacing, xs), "fabs": (jnp.fabs, xs), "pow": (lambda x: jnp.pow(x, 3),
                                                                     xs),
        "bitwise_count": (jnp.bitwise_count, ints), "i0": (jnp.i0, xs),
        "sort_complex": (jnp.sort_complex, xs), "matvec": (lambda v: jnp.matvec(m, v), xs),
        "vecmat": (lambda v: jnp.vecmat(v, m), xs)}
    for name, (fn, data) in cases.items():
        eager = np.stack([A(fn(row)) for row in data])
        np.testing.assert_allclose(A(plax.vmap(fn)(data)), eager, rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(A(plax.jit(fn)(data[0])), eager[0], rtol=1e-6,
                                   err_msg=name)

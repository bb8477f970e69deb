"""Reductions of plax.numpy (sum, mean, var, argmax, cumsum, the nan* family, ...) with
axis/keepdims/where/dtype/initial/ddof, across dtypes; values against NumPy in float64,
dtypes and weak types against JAX."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax.numpy as jnp
from jnp_testutil import (DTYPES, assert_close, bfloat16, check_avals_like_jax,
                          check_raises_like_jax, is_inexact, jax_fn, rand, wide)

# name -> NumPy reference (taking axis and keepdims, like the function)
REDUCTIONS = {
    "sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "amax": np.amax,
    "amin": np.amin, "mean": np.mean, "var": np.var, "std": np.std, "all": np.all,
    "any": np.any, "ptp": np.ptp, "count_nonzero": np.count_nonzero,
    "nansum": np.nansum, "nanprod": np.nanprod, "nanmax": np.nanmax, "nanmin": np.nanmin,
    "nanmean": np.nanmean, "nanvar": np.nanvar, "nanstd": np.nanstd,
}
_AXES = [(None, False), (1, True), (-1, False), ((0, 2), True), ((), False)]
# (function, dtype kind) JAX rejects, with its exception type
REJECTED = {("ptp", "b"): TypeError}


def _kind(dt):
    return "f" if dt == bfloat16 else np.dtype(dt).kind


def _reference(name, x, axis, keepdims, **kw):
    """NumPy's reduction of ``x`` computed wide (float64/complex128) where it matters."""
    np_fn = REDUCTIONS[name]
    xw = x.astype(wide(x.dtype)) if is_inexact(x.dtype) else x
    if name in ("mean", "var", "std", "nanmean", "nanvar", "nanstd") and not is_inexact(x.dtype):
        xw = x.astype(np.float64)
    if name in ("sum", "prod", "nansum", "nanprod") and x.dtype.kind in "biu":
        xw = x.astype(np.int64)  # accumulate exactly, then compare in the result dtype
    if name == "count_nonzero":
        return np.count_nonzero(x, axis=axis, keepdims=keepdims)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN and empty slices, on purpose
        return np_fn(xw, axis=axis, keepdims=keepdims, **kw)


def _check(name, out, expected):
    dt = np.dtype(out.dtype)
    if is_inexact(dt):
        expected = np.asarray(expected).astype(wide(dt))
    else:
        expected = np.asarray(expected).astype(dt)
    assert_close(out, expected, dtype=dt, rtol=2e-2 if dt == bfloat16 else None)


@pytest.mark.parametrize("axis,keepdims", _AXES, ids=[f"{a}-{k}" for a, k in _AXES])
@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction(name, dtype, axis, keepdims):
    rng = np.random.default_rng(abs(hash((name, str(dtype), str(axis)))) % 2**32)
    x = rand(rng, (2, 3, 4), dtype)
    if name.startswith("nan") and is_inexact(dtype):
        x.flat[[1, 7]] = np.nan
    if name in ("prod", "nanprod") and x.dtype.kind in "iu":
        x = rand(rng, (2, 3, 4), dtype, "small")  # keep integer products in range
    fn = getattr(jnp, name)
    if (name, _kind(dtype)) in REJECTED:
        check_raises_like_jax(lambda: fn(x, axis=axis, keepdims=keepdims), jax_fn(name), x,
                              axis=axis, keepdims=keepdims)
        return
    out = fn(x, axis=axis, keepdims=keepdims)
    check_avals_like_jax(out, jax_fn(name), x, axis=axis, keepdims=keepdims)
    if name in ("max", "min", "amax", "amin", "ptp") and dtype.kind == "c":
        return  # NumPy's complex max agrees only up to its NaN rules; covered below
    _check(name, out, _reference(name, x, axis, keepdims))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "bool", "float16", "bfloat16", "float32",
                                   "complex64"])
@pytest.mark.parametrize("name", ["sum", "prod", "mean", "var", "std", "max", "min", "all",
                                  "any", "nansum", "nanmean", "nanmax"])
def test_reduction_where(name, dtype):
    rng = np.random.default_rng(7)
    dt = DTYPES[dtype]
    x = rand(rng, (3, 4), dt, "small" if name == "prod" else "normal")
    where = rand(rng, (3, 4), np.bool_)
    where[:, 0] = True  # every row and column keeps an element
    where[0, :] = True
    kw = {"initial": 0} if name in ("max", "min", "nanmax") else {}
    if name in ("max", "min", "nanmax") and dt.kind == "c":
        return
    if dt == np.bool_ and name in ("max", "min", "nanmax"):
        kw = {"initial": False}
    fn = getattr(jnp, name)
    out = fn(x, axis=0, where=where, **kw)
    check_avals_like_jax(out, jax_fn(name), x, axis=0, where=where, **kw)
    _check(name, out, _reference(name, x, 0, False, where=where, **kw))


def test_max_where_without_initial_raises_like_jax():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    where = np.array([[True, False, True], [False, True, True]])
    err = check_raises_like_jax(lambda: jnp.max(x, where=where), jax_fn("max"), x, where=where)
    assert "initial" in str(err)


@pytest.mark.parametrize("name,dtype,to", [
    ("sum", "int8", "float32"), ("sum", "bool", "int8"), ("sum", "float16", "float32"),
    ("mean", "int32", "float16"), ("mean", "float32", "bfloat16"), ("prod", "uint8", "int32"),
    ("cumsum", "int8", "int16"), ("cumprod", "float16", "float32"), ("var", "int8", "float32"),
    ("std", "float32", "float16"),
])
def test_reduction_dtype_argument(name, dtype, to):
    rng = np.random.default_rng(8)
    x = rand(rng, (3, 5), DTYPES[dtype], "small")
    out = getattr(jnp, name)(x, axis=1, dtype=np.dtype(to) if to != "bfloat16" else bfloat16)
    check_avals_like_jax(out, jax_fn(name), x, axis=1,
                         dtype=np.dtype(to) if to != "bfloat16" else bfloat16)
    ref = {"cumsum": np.cumsum, "cumprod": np.cumprod}.get(name) or REDUCTIONS[name]
    expected = ref(x.astype(np.float64), axis=1)
    _check(name, out, expected)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "bool", "int32", "float16", "float32"])
def test_sum_prod_initial_and_promote_integers(dtype):
    rng = np.random.default_rng(9)
    x = rand(rng, (3, 4), DTYPES[dtype], "small")
    for name in ("sum", "prod", "max", "min"):
        init = 2 if dtype != "bool" or name in ("sum", "prod") else True
        out = getattr(jnp, name)(x, axis=1, initial=init)
        check_avals_like_jax(out, jax_fn(name), x, axis=1, initial=init)
        wide_x = x.astype(np.int64) if x.dtype.kind in "biu" else x.astype(np.float64)
        _check(name, out, REDUCTIONS[name](wide_x, axis=1, initial=init))
    out = jnp.sum(x, promote_integers=False)
    check_avals_like_jax(out, jax_fn("sum"), x, promote_integers=False)


@pytest.mark.parametrize("ddof", [0, 1, 2])
@pytest.mark.parametrize("name", ["var", "std", "nanvar", "nanstd"])
def test_var_std_ddof(name, ddof):
    rng = np.random.default_rng(10)
    x = rand(rng, (4, 5), np.float32)
    x[1, 2] = np.nan if name.startswith("nan") else x[1, 2]
    out = getattr(jnp, name)(x, axis=0, ddof=ddof)
    _check(name, out, REDUCTIONS[name](x.astype(np.float64), axis=0, ddof=ddof))
    out = getattr(jnp, name)(x, ddof=ddof, keepdims=True)
    _check(name, out, REDUCTIONS[name](x.astype(np.float64), ddof=ddof, keepdims=True))
    if not name.startswith("nan"):
        out = getattr(jnp, name)(x, axis=1, correction=ddof)
        _check(name, out, REDUCTIONS[name](x.astype(np.float64), axis=1, ddof=ddof))


def test_var_complex_is_real():
    z = rand(np.random.default_rng(11), (6,), np.complex64)
    out = jnp.var(z)
    check_avals_like_jax(out, jax_fn("var"), z)
    assert_close(out, np.var(z.astype(np.complex128)), dtype=np.float32)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "float16", "bfloat16",
                                   "float32"])   # (complex: refused, as JAX 0.10.2 refuses it;
@pytest.mark.parametrize("name", ["argmax", "argmin"])  # tests/lax/test_complex_extremes.py)
def test_argmax_argmin(name, dtype):
    rng = np.random.default_rng(12)
    x = rand(rng, (3, 4, 5), DTYPES[dtype])
    np_fn = getattr(np, name)
    xr = x.astype(wide(x.dtype)) if is_inexact(x.dtype) else x
    for axis, keepdims in [(None, False), (1, False), (-1, True), (None, True)]:
        out = getattr(jnp, name)(x, axis=axis, keepdims=keepdims)
        check_avals_like_jax(out, jax_fn(name), x, axis=axis, keepdims=keepdims)
        assert_close(out, np_fn(xr, axis=axis, keepdims=keepdims))


def test_argmax_nan_and_ties():
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, 1.0]], np.float32)
    assert_close(jnp.argmax(x, axis=1), np.argmax(x, axis=1))
    assert_close(jnp.argmin(x, axis=1), np.argmin(x, axis=1))
    with pytest.raises(ValueError, match="empty"):
        jnp.argmax(np.zeros((0, 3)), axis=0)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "float16", "float32",
                                   "complex64"])
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_cumsum_cumprod(name, dtype):
    rng = np.random.default_rng(13)
    x = rand(rng, (3, 4), DTYPES[dtype], "small")
    np_fn = getattr(np, name)
    for axis in (None, 0, -1):
        out = getattr(jnp, name)(x, axis=axis)
        check_avals_like_jax(out, jax_fn(name), x, axis=axis)
        xr = x.astype(wide(x.dtype)) if is_inexact(x.dtype) else x
        _check(name, out, np_fn(xr, axis=axis))


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
def test_cumulative_array_api(name):
    x = rand(np.random.default_rng(14), (3, 4), np.int8, "small")
    np_fn = np.cumsum if name == "cumulative_sum" else np.cumprod
    out = getattr(jnp, name)(x, axis=1)
    check_avals_like_jax(out, jax_fn(name), x, axis=1)
    _check(name, out, np_fn(x.astype(np.int64), axis=1))
    out = getattr(jnp, name)(x, axis=0, include_initial=True)
    start = np.zeros((1, 4)) if name == "cumulative_sum" else np.ones((1, 4))
    _check(name, out, np.concatenate([start, np_fn(x.astype(np.int64), axis=0)]))
    check_raises_like_jax(lambda: getattr(jnp, name)(x), jax_fn(name), x)
    v = x[0]
    _check(name, getattr(jnp, name)(v), np_fn(v.astype(np.int64)))


def test_average():
    rng = np.random.default_rng(15)
    x = rand(rng, (3, 4), np.float32)
    w = rand(rng, (4,), np.float32, "positive")
    assert_close(jnp.average(x), np.average(x.astype(np.float64)), dtype=np.float32)
    assert_close(jnp.average(x, axis=1, weights=w), np.average(x, axis=1, weights=w),
                 dtype=np.float32)
    w2 = rand(rng, (3, 4), np.float32, "positive")
    avg, total = jnp.average(x, axis=0, weights=w2, returned=True)
    ref_avg, ref_total = np.average(x.astype(np.float64), axis=0, weights=w2, returned=True)
    assert_close(avg, ref_avg, dtype=np.float32)
    assert_close(total, ref_total, dtype=np.float32)
    xi = rand(rng, (3, 4), np.int32)
    out = jnp.average(xi, axis=0)
    check_avals_like_jax(out, jax_fn("average"), xi, axis=0)
    assert_close(out, np.average(xi, axis=0), dtype=np.float32)
    with pytest.raises(ValueError, match="weights"):
        jnp.average(x, axis=1, weights=np.ones(3, np.float32))


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "max", "all", "any", "argmax", "var"])
def test_zero_rank_and_python_scalar_inputs(name):
    x = np.float32(2.5)
    out = getattr(jnp, name)(x)
    check_avals_like_jax(out, jax_fn(name), np.asarray(x))
    out = getattr(jnp, name)(3)
    check_avals_like_jax(out, jax_fn(name), 3)


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "any", "all", "max", "nansum"])
def test_empty_reductions(name):
    x = np.zeros((0, 3), np.float32)
    if name == "max":
        check_raises_like_jax(lambda: jnp.max(x, axis=0), jax_fn("max"), x, axis=0)
        out = jnp.max(x, axis=0, initial=-1.0)
        _check(name, out, np.max(x, axis=0, initial=-1.0))
        return
    out = getattr(jnp, name)(x, axis=0)
    _check(name, out, _reference(name, x, 0, False))
    out = getattr(jnp, name)(x, axis=1)
    assert out.shape == (0,)


def test_reduction_axis_errors_name_the_axis():
    x = np.zeros((2, 3), np.float32)
    for name in ("sum", "mean", "argmax", "cumsum", "var"):
        # JAX raises ValueError, except an IndexError from inside mean, var and argmax (an
        # accident of its implementation); plax raises ValueError for all of them.
        with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 2"):
            getattr(jnp, name)(x, axis=2)
        if name in ("sum", "cumsum"):
            check_raises_like_jax(lambda: getattr(jnp, name)(x, axis=2), jax_fn(name), x,
                                  axis=2)
    with pytest.raises(ValueError, match="repeated axis"):
        jnp.sum(x, axis=(0, 0))
    with pytest.raises(TypeError, match="axis"):
        jnp.sum(x, axis=1.5)

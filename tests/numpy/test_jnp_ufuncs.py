"""Elementwise functions of plax.numpy across dtypes and shapes.

Each function is called on every dtype of the sweep; where JAX accepts the call, plax's
values must match NumPy (computed in float64/complex128 for inexact results) and its dtype and
weak type must match JAX's; where JAX rejects the call plax must raise the same exception type.
The calls JAX rejects are listed in ``REJECTED`` so that the suite checks them without JAX too.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import plax.numpy as jnp
from jnp_testutil import (DTYPES, assert_close, bfloat16, check_avals_like_jax,
                          check_raises_like_jax, is_inexact, jax_fn, rand, requires_jax,
                          wide)


def _np_round(x):
    return np.round(x)


def _np_nan_to_num(x):
    return x  # replaced per dtype below (the extremes depend on the output dtype)


# name -> (NumPy reference, kind of random input per argument)
UNARY = {
    "negative": (np.negative, "normal"), "positive": (lambda x: x, "normal"),
    "abs": (np.abs, "normal"), "absolute": (np.absolute, "normal"),
    "sign": (np.sign, "normal"), "floor": (np.floor, "normal"), "ceil": (np.ceil, "normal"),
    "trunc": (np.trunc, "normal"), "fix": (np.fix, "normal"), "rint": (np.rint, "normal"),
    "round": (_np_round, "normal"), "around": (_np_round, "normal"),
    "round_": (_np_round, "normal"),
    "exp": (np.exp, "normal"), "exp2": (np.exp2, "normal"), "expm1": (np.expm1, "normal"),
    "log": (np.log, "positive"), "log1p": (np.log1p, "positive"), "log2": (np.log2, "positive"),
    "log10": (np.log10, "positive"), "sqrt": (np.sqrt, "positive"), "cbrt": (np.cbrt, "normal"),
    "square": (np.square, "normal"), "reciprocal": (lambda x: 1 / x, "nonzero"),
    "sin": (np.sin, "normal"), "cos": (np.cos, "normal"), "tan": (np.tan, "unit"),
    "arcsin": (np.arcsin, "unit"), "arccos": (np.arccos, "unit"),
    "arctan": (np.arctan, "normal"), "sinh": (np.sinh, "normal"), "cosh": (np.cosh, "normal"),
    "tanh": (np.tanh, "normal"), "arcsinh": (np.arcsinh, "normal"),
    "arccosh": (lambda x: np.arccosh(x + 1), "positive"), "arctanh": (np.arctanh, "unit"),
    "asin": (np.arcsin, "unit"), "acos": (np.arccos, "unit"), "atan": (np.arctan, "normal"),
    "asinh": (np.arcsinh, "normal"), "acosh": (lambda x: np.arccosh(x + 1), "positive"),
    "atanh": (np.arctanh, "unit"),
    "deg2rad": (np.deg2rad, "normal"), "rad2deg": (np.rad2deg, "normal"),
    "radians": (np.radians, "normal"), "degrees": (np.degrees, "normal"),
    "sinc": (np.sinc, "normal"), "isnan": (np.isnan, "normal"), "isinf": (np.isinf, "normal"),
    "isfinite": (np.isfinite, "normal"), "isposinf": (np.isposinf, "normal"),
    "isneginf": (np.isneginf, "normal"), "signbit": (np.signbit, "normal"),
    "real": (np.real, "normal"), "imag": (np.imag, "normal"),
    "conjugate": (np.conjugate, "normal"), "conj": (np.conj, "normal"),
    "angle": (np.angle, "normal"), "isreal": (np.isreal, "normal"),
    "iscomplex": (np.iscomplex, "normal"), "logical_not": (np.logical_not, "normal"),
    "invert": (np.invert, "normal"), "bitwise_not": (np.invert, "normal"),
    "bitwise_invert": (np.invert, "normal"), "nan_to_num": (_np_nan_to_num, "normal"),
}
# acosh/arccosh take x + 1 so that the input is in their domain
_SHIFTED = {"arccosh", "acosh"}


def _np_floor_divide(x, y):
    return np.floor_divide(x, y)


BINARY = {
    "add": (np.add, "normal", "normal"), "subtract": (np.subtract, "normal", "normal"),
    "multiply": (np.multiply, "normal", "normal"),
    "true_divide": (np.true_divide, "normal", "nonzero"),
    "divide": (np.divide, "normal", "nonzero"),
    "floor_divide": (np.floor_divide, "normal", "nonzero"),
    "remainder": (np.remainder, "normal", "nonzero"), "mod": (np.mod, "normal", "nonzero"),
    "fmod": (np.fmod, "normal", "nonzero"),
    "power": (np.power, "positive", "small"), "float_power": (np.float_power, "positive", "normal"),
    "arctan2": (np.arctan2, "normal", "normal"), "atan2": (np.arctan2, "normal", "normal"),
    "logaddexp": (np.logaddexp, "normal", "normal"),
    "logaddexp2": (np.logaddexp2, "normal", "normal"), "hypot": (np.hypot, "normal", "normal"),
    "maximum": (np.maximum, "normal", "normal"), "minimum": (np.minimum, "normal", "normal"),
    "fmax": (np.fmax, "normal", "normal"), "fmin": (np.fmin, "normal", "normal"),
    "nextafter": (np.nextafter, "normal", "normal"),
    "equal": (np.equal, "normal", "normal"), "not_equal": (np.not_equal, "normal", "normal"),
    "less": (np.less, "normal", "normal"), "less_equal": (np.less_equal, "normal", "normal"),
    "greater": (np.greater, "normal", "normal"),
    "greater_equal": (np.greater_equal, "normal", "normal"),
    "logical_and": (np.logical_and, "normal", "normal"),
    "logical_or": (np.logical_or, "normal", "normal"),
    "logical_xor": (np.logical_xor, "normal", "normal"),
    "bitwise_and": (np.bitwise_and, "normal", "normal"),
    "bitwise_or": (np.bitwise_or, "normal", "normal"),
    "bitwise_xor": (np.bitwise_xor, "normal", "normal"),
    "left_shift": (np.left_shift, "normal", "small"),
    "right_shift": (np.right_shift, "normal", "small"),
    "bitwise_left_shift": (np.left_shift, "normal", "small"),
    "bitwise_right_shift": (np.right_shift, "normal", "small"),
    "copysign": (np.copysign, "normal", "normal"), "heaviside": (np.heaviside, "normal", "normal"),
    "divmod": (np.divmod, "normal", "nonzero"),
}

# (function, dtype kind) pairs JAX rejects; "b" bool, "i"/"u" integers, "f" floats (bfloat16
# included), "c" complex. The exception types are JAX's; plax must raise the same.
_NO_COMPLEX_UNARY = ["floor", "ceil", "trunc", "fix", "cbrt"]
_NO_COMPLEX_BINARY = ["floor_divide", "remainder", "mod", "fmod", "nextafter", "copysign",
                      "heaviside", "divmod"]
_BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
            "bitwise_left_shift", "bitwise_right_shift", "invert", "bitwise_not",
            "bitwise_invert"]
REJECTED: dict[tuple[str, str], type] = {}
REJECTED.update({("negative", "b"): TypeError, ("sign", "b"): TypeError,
                 ("subtract", "b"): TypeError, ("round", "b"): ValueError,
                 ("around", "b"): ValueError, ("round_", "b"): ValueError})
REJECTED.update({(n, "c"): TypeError for n in _NO_COMPLEX_UNARY + _NO_COMPLEX_BINARY})
REJECTED.update({(n, "c"): ValueError for n in ["isposinf", "isneginf", "signbit", "hypot"]})
REJECTED.update({("round_", k): ValueError for k in "b"})
REJECTED.update({(n, k): TypeError for n in _BITWISE for k in "fc"})
# jax.numpy.fix and round_ were removed in JAX 0.10; plax keeps NumPy's names (checked
# against NumPy only)
NOT_IN_JAX = {"fix", "round_"}


def _np_complex_arctan2(y, x):
    """The complex extension of arctan2 that JAX (and XLA) compute: -i log((x + iy) / r)."""
    return -1j * np.log((x + 1j * y) / np.sqrt(x * x + y * y))


# NumPy does not define these on complex numbers; their references are given here
COMPLEX_REFERENCES = {"arctan2": _np_complex_arctan2, "atan2": _np_complex_arctan2,
                      "deg2rad": lambda x: x * (np.pi / 180), "radians": lambda x: x * (np.pi / 180),
                      "rad2deg": lambda x: x * (180 / np.pi), "degrees": lambda x: x * (180 / np.pi)}
# values checked by dedicated tests (NumPy has no complex reference)
VALUES_TESTED_ELSEWHERE = {("logaddexp", "c"), ("logaddexp2", "c")}


def _kind(dtype) -> str:
    dtype = np.dtype(dtype)
    return "f" if dtype == bfloat16 else dtype.kind


def _np_reference(name, np_fn, args, out_dtype):
    """NumPy's value of ``name`` on ``args``, computed wide for inexact results."""
    if name == "nan_to_num":
        x = args[0].astype(wide(out_dtype)) if is_inexact(out_dtype) else args[0]
        if not is_inexact(out_dtype):
            return x
        info = np.finfo(out_dtype) if out_dtype != bfloat16 else None
        hi = float(info.max) if info is not None else float(ml_finfo_max())
        return np.nan_to_num(x, posinf=hi, neginf=-hi)
    if name == "nextafter":  # depends on the spacing of the result type: compute in it
        return np.nextafter(*[a.astype(np.float32 if out_dtype == bfloat16 else out_dtype)
                              for a in args])
    # inexact inputs are computed wide; integer inputs too when the result is inexact
    widen_all = is_inexact(out_dtype)
    args = [a.astype(wide(a.dtype)) if is_inexact(a.dtype) else
            a.astype(wide(out_dtype)) if widen_all else a for a in args]
    with np.errstate(all="ignore"):
        return np_fn(*args)


def ml_finfo_max():
    import ml_dtypes
    return ml_dtypes.finfo(bfloat16).max


def _run(name, args, np_fn):
    kind = "c" if any(_kind(a.dtype) == "c" for a in args) else (
        "f" if any(_kind(a.dtype) == "f" for a in args) else _kind(args[0].dtype))
    kinds = {_kind(a.dtype) for a in args}
    rejected = next((REJECTED[(name, k)] for k in kinds if (name, k) in REJECTED), None)
    fn = getattr(jnp, name)
    if rejected is not None:
        with pytest.raises(rejected):
            fn(*args)
        if name not in NOT_IN_JAX:
            check_raises_like_jax(lambda: fn(*args), jax_fn(name), *args, concrete=False)
        return
    out = fn(*args)
    outs = out if isinstance(out, tuple) else (out,)
    if name not in NOT_IN_JAX:
        check_avals_like_jax(out, jax_fn(name), *args)
    if (name, kind) in VALUES_TESTED_ELSEWHERE:
        return
    if kind == "c":
        np_fn = COMPLEX_REFERENCES.get(name, np_fn)
    expected = _np_reference(name, np_fn, list(args), np.dtype(outs[0].dtype))
    expected = expected if isinstance(expected, tuple) else (expected,)
    for o, e in zip(outs, expected):
        dt = np.dtype(o.dtype)
        e = np.asarray(e)
        assert_close(o, e.astype(wide(dt)) if is_inexact(dt) else e, dtype=dt,
                     err_msg=f"{name}{tuple(a.dtype for a in args)}")


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype):
    np_fn, kind = UNARY[name]
    rng = np.random.default_rng(abs(hash((name, str(dtype)))) % 2**32)
    x = rand(rng, (3, 4), dtype, kind)
    if name in _SHIFTED:
        if dtype.kind != "c" and dtype != np.bool_:
            x = (x.astype(np.float64) + 1).astype(dtype)
        np_fn = np.arccosh
    _run(name, (x,), np_fn)


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_same_dtype(name, dtype):
    np_fn, kx, ky = BINARY[name]
    rng = np.random.default_rng(abs(hash((name, str(dtype)))) % 2**32)
    x = rand(rng, (3, 4), dtype, kx)
    y = rand(rng, (3, 4), dtype, ky)
    _run(name, (x, y), np_fn)


_MIXED = [("int8", "uint8"), ("int8", "float16"), ("uint8", "bfloat16"), ("float16", "bfloat16"),
          ("int32", "float32"), ("bool", "int8"), ("float32", "complex64"), ("uint32", "int32")]


@pytest.mark.parametrize("pair", _MIXED, ids=["-".join(p) for p in _MIXED])
@pytest.mark.parametrize("name", ["add", "multiply", "true_divide", "maximum", "less",
                                  "power", "arctan2", "logaddexp", "floor_divide", "equal"])
def test_binary_mixed_dtypes_broadcast(name, pair):
    """Promotion between different dtypes (JAX's lattice, not NumPy's) and broadcasting."""
    np_fn, kx, ky = BINARY[name]
    rng = np.random.default_rng(abs(hash((name, pair))) % 2**32)
    x = rand(rng, (2, 1, 3), DTYPES[pair[0]], kx)
    y = rand(rng, (4, 1), DTYPES[pair[1]], ky)
    _run(name, (x, y), np_fn)


# Python scalars are weakly typed: they take the array's type instead of widening it.
_SCALAR_CASES = [
    ("add", np.int8, 3), ("add", np.uint8, 2), ("add", np.int8, 2.5), ("multiply", np.float16, 3),
    ("true_divide", np.int32, 2), ("true_divide", np.int8, 2.0), ("subtract", bfloat16, 1),
    ("power", np.int8, 2), ("power", np.float16, 2), ("power", np.float32, 0.5),
    ("maximum", np.uint8, 1), ("less", np.int8, 1.5), ("floor_divide", np.int32, 2),
    ("remainder", np.int8, 3), ("add", np.complex64, 1.0), ("add", np.float32, 1j),
    ("logaddexp", np.int8, 1.0), ("arctan2", np.float16, 1), ("equal", np.bool_, True),
]


@pytest.mark.parametrize("name,dtype,scalar", _SCALAR_CASES,
                         ids=[f"{n}-{np.dtype(d).name}-{s!r}" for n, d, s in _SCALAR_CASES])
@pytest.mark.parametrize("order", ["array-scalar", "scalar-array"])
def test_binary_python_scalar(name, dtype, scalar, order):
    np_fn, kx, _ = BINARY[name]
    x = rand(np.random.default_rng(0), (5,), np.dtype(dtype), "positive")
    args = (x, scalar) if order == "array-scalar" else (scalar, x)
    if name == "power" and order == "scalar-array" and not is_inexact(np.dtype(dtype)):
        args = (scalar, np.abs(x))
    out = getattr(jnp, name)(*args)
    check_avals_like_jax(out, jax_fn(name), *args)
    ref_args = [np.asarray(a) for a in args]
    expected = _np_reference(name, np_fn, ref_args, np.dtype(out.dtype))
    dt = np.dtype(out.dtype)
    assert_close(out, np.asarray(expected).astype(wide(dt)) if is_inexact(dt) else expected,
                 dtype=dt)


@pytest.mark.parametrize("name", ["add", "multiply", "floor_divide", "power", "true_divide",
                                  "maximum", "equal", "logical_and", "arctan2", "hypot"])
def test_binary_both_python_scalars_stay_weak(name):
    out = getattr(jnp, name)(7, 2)
    assert out.shape == ()
    check_avals_like_jax(out, jax_fn(name), 7, 2)
    assert out.item() == pytest.approx(float(BINARY[name][0](np.float64(7) if is_inexact(
        out.dtype) else 7, np.float64(2) if is_inexact(out.dtype) else 2)), rel=1e-6)


@pytest.mark.parametrize("name", ["exp", "sin", "abs", "floor", "negative", "square", "sqrt",
                                  "isnan", "logical_not", "log2", "rint", "angle", "isinf"])
@pytest.mark.parametrize("value", [3, 2.5], ids=["int", "float"])
def test_unary_python_scalar(name, value):
    """Weak types of unary functions of Python scalars follow JAX (some composites, like
    ``log2`` and ``rint`` of an int, are strongly typed there)."""
    out = getattr(jnp, name)(value)
    check_avals_like_jax(out, jax_fn(name), value)
    ref = UNARY[name][0](np.float64(value) if is_inexact(out.dtype) else value)
    assert out.item() == pytest.approx(float(ref), rel=1e-6)


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (1, 1), (2, 0, 4)],
                         ids=["0d", "empty", "empty2d", "ones", "empty3d"])
@pytest.mark.parametrize("name", ["exp", "add", "less", "where_like", "isclose"])
def test_zero_rank_and_empty_shapes(name, shape):
    rng = np.random.default_rng(0)
    x = rand(rng, shape, np.float32)
    y = rand(rng, shape, np.float32)
    if name == "exp":
        out, exp = jnp.exp(x), np.exp(x.astype(np.float64))
    elif name == "add":
        out, exp = jnp.add(x, y), x.astype(np.float64) + y
    elif name == "less":
        out, exp = jnp.less(x, y), x < y
    elif name == "isclose":
        out, exp = jnp.isclose(x, y), np.isclose(x, y)
    else:
        out, exp = jnp.where(x > 0, x, y), np.where(x > 0, x, y)
    assert out.shape == shape
    assert_close(out, exp, dtype=out.dtype)


def test_broadcasting_against_zero_rank_and_empty():
    x = rand(np.random.default_rng(1), (0, 3), np.float32)
    out = jnp.add(x, jnp.ones((1, 3)))
    assert out.shape == (0, 3)
    out = jnp.multiply(jnp.asarray(np.float32(2)), jnp.ones((2, 0, 1)))
    assert out.shape == (2, 0, 1)
    assert jnp.add(jnp.ones((4, 1, 3)), jnp.ones((5, 1))).shape == (4, 5, 3)


# ---------------------------------------------------------------- non-ufunc elementwise helpers

@pytest.mark.parametrize("dtype", ["int8", "uint8", "float16", "bfloat16", "float32",
                                   "complex64", "bool"])
def test_where(dtype):
    rng = np.random.default_rng(2)
    cond = rand(rng, (3, 1), np.bool_)
    x = rand(rng, (1, 4), DTYPES[dtype])
    y = rand(rng, (3, 4), DTYPES[dtype])
    out = jnp.where(cond, x, y)
    assert_close(out, np.where(cond, x, y), dtype=out.dtype)
    check_avals_like_jax(out, jax_fn("where"), cond, x, y)
    # a non-bool condition is tested for truth; Python scalars are weak
    c2 = rand(rng, (3, 4), np.int32)
    out = jnp.where(c2, x, 0)
    assert_close(out, np.where(c2 != 0, x, np.zeros((), x.dtype)), dtype=out.dtype)
    check_avals_like_jax(out, jax_fn("where"), c2, x, 0)


def test_where_scalars_and_one_argument_form():
    out = jnp.where(True, 1.0, 2)
    check_avals_like_jax(out, jax_fn("where"), True, 1.0, 2)
    assert out.item() == 1.0
    cond = np.array([[0, 1], [2, 0]])
    for got, exp in zip(jnp.where(cond), np.nonzero(cond)):
        assert_close(got, exp)
    with pytest.raises(TypeError, match="both or neither"):
        jnp.where(cond, 1.0)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "float16", "bfloat16", "float32"])
@pytest.mark.parametrize("bounds", [(-1, 1), (None, 0.5), (-0.5, None), ("array", "array")],
                         ids=["both", "max", "min", "arrays"])
def test_clip(dtype, bounds):
    rng = np.random.default_rng(3)
    x = rand(rng, (4, 5), DTYPES[dtype])
    lo, hi = bounds
    if lo == "array":
        lo, hi = rand(rng, (5,), DTYPES[dtype]) - 2, rand(rng, (4, 1), DTYPES[dtype]) + 1
        lo, hi = lo.astype(DTYPES[dtype]), hi.astype(DTYPES[dtype])
    if DTYPES[dtype].kind in "iu" and not isinstance(lo, np.ndarray):
        lo = None if lo is None else max(int(lo), 0 if DTYPES[dtype].kind == "u" else -9)
        hi = None if hi is None else int(hi + 1)
    out = jnp.clip(x, lo, hi)
    exp = x.astype(np.float64)
    if lo is not None:
        exp = np.maximum(exp, np.asarray(lo, np.float64))
    if hi is not None:
        exp = np.minimum(exp, np.asarray(hi, np.float64))
    check_avals_like_jax(out, jax_fn("clip"), x, lo, hi)
    assert_close(out, exp if is_inexact(out.dtype) else exp.astype(out.dtype), dtype=out.dtype)
    # the NumPy 1.x keywords a_min/a_max are accepted too
    out2 = jnp.clip(x, a_min=lo, a_max=hi)
    assert_close(out2, np.asarray(out), dtype=out.dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "complex64", "int32"])
def test_nan_to_num(dtype):
    dt = DTYPES[dtype]
    vals = np.array([0.5, np.nan, np.inf, -np.inf, -2.0])
    if dt.kind == "c":
        x = np.empty(vals.shape, dt)
        x.real, x.imag = vals, vals[::-1]
    elif dt.kind == "i":
        x = np.array([1, -2, 3], dt)
    else:
        x = vals.astype(dt)
    out = jnp.nan_to_num(x)
    check_avals_like_jax(out, jax_fn("nan_to_num"), x)
    if dt.kind == "i":
        assert_close(out, x)
        return
    big = float(np.finfo(np.float32 if dt == bfloat16 else dt).max) if dt != bfloat16 else \
        float(ml_finfo_max())
    exp = np.nan_to_num(x.astype(wide(dt)), posinf=big, neginf=-big)
    assert_close(out, exp, dtype=dt)
    out = jnp.nan_to_num(x, nan=7.0, posinf=1.0, neginf=-1.0)
    assert_close(out, np.nan_to_num(x.astype(wide(dt)), nan=7.0, posinf=1.0, neginf=-1.0),
                 dtype=dt)


_CLOSE = [
    (np.array([1.0, 1e-9, np.nan, np.inf, -np.inf, np.inf, 1.0, 0.0]),
     np.array([1.0 + 1e-6, 0.0, np.nan, np.inf, np.inf, 1e30, np.nan, 1e-7])),
]


@pytest.mark.parametrize("dtype", ["float32", "float16", "complex64", "int32"])
@pytest.mark.parametrize("equal_nan", [False, True])
def test_isclose_allclose(dtype, equal_nan):
    a, b = _CLOSE[0]
    dt = DTYPES[dtype]
    if dt.kind == "i":
        a, b = np.array([1, 2, 3]), np.array([1, 3, 3])
    with np.errstate(over="ignore"):  # 1e30 is inf in float16, on purpose
        a, b = a.astype(dt), b.astype(dt)
    out = jnp.isclose(a, b, equal_nan=equal_nan)
    with np.errstate(all="ignore"):
        exp = np.isclose(a.astype(wide(dt) if dt.kind != "i" else np.float64),
                         b.astype(wide(dt) if dt.kind != "i" else np.float64), equal_nan=equal_nan)
    assert_close(out, exp)
    check_avals_like_jax(out, jax_fn("isclose"), a, b, equal_nan=equal_nan)
    assert bool(jnp.allclose(a, b, equal_nan=equal_nan)) == bool(exp.all())
    assert bool(jnp.allclose(a, a, equal_nan=True))
    out = jnp.isclose(a, b, rtol=0.5, atol=2.0)
    with np.errstate(all="ignore"):
        exp = np.isclose(a.astype(np.complex128 if dt.kind == "c" else np.float64),
                         b.astype(np.complex128 if dt.kind == "c" else np.float64), rtol=0.5,
                         atol=2.0)
    assert_close(out, exp)


def test_isclose_python_scalars_are_strong():
    out = jnp.isclose(1.0, 1.0 + 1e-9)
    assert out.item() is True or out.item() == True  # noqa: E712 - a NumPy bool
    check_avals_like_jax(out, jax_fn("isclose"), 1.0, 1.0 + 1e-9)


def test_array_equal_and_equiv():
    a = np.array([[1.0, np.nan], [2.0, 3.0]], np.float32)
    assert not bool(jnp.array_equal(a, a))
    assert bool(jnp.array_equal(a, a, equal_nan=True))
    assert not bool(jnp.array_equal(a, a[:1]))
    assert bool(jnp.array_equiv(np.array([1, 2]), np.array([[1, 2], [1, 2]])))
    assert not bool(jnp.array_equiv(np.array([1, 2]), np.array([1, 2, 3])))


def test_logaddexp_complex_is_log_of_sum():
    rng = np.random.default_rng(4)
    x = rand(rng, (6,), np.complex64)
    y = rand(rng, (6,), np.complex64)
    out = np.asarray(jnp.logaddexp(x, y)).astype(np.complex128)
    assert_close(np.exp(out), np.exp(x.astype(np.complex128)) + np.exp(y.astype(np.complex128)),
                 dtype=np.complex64, rtol=1e-5, atol=1e-5)
    out2 = np.asarray(jnp.logaddexp2(x, y)).astype(np.complex128)
    assert_close(2 ** out2, 2 ** x.astype(np.complex128) + 2 ** y.astype(np.complex128),
                 dtype=np.complex64, rtol=1e-5, atol=1e-5)


def test_complex_ordering_is_lexicographic():
    x = np.array([1 + 2j, 1 + 2j, 2 - 5j, 1 + 3j], np.complex64)
    y = np.array([1 + 3j, 1 + 2j, 1 + 9j, 1 - 3j], np.complex64)
    for name, op in [("less", np.less), ("less_equal", np.less_equal), ("greater", np.greater),
                     ("greater_equal", np.greater_equal)]:
        assert_close(getattr(jnp, name)(x, y), op(x, y))


def test_divmod_and_floor_divide_signs():
    x = np.array([7, -7, 7, -7, 0, 6], np.int32)
    y = np.array([2, 2, -2, -2, 3, -3], np.int32)
    q, r = jnp.divmod(x, y)
    assert_close(q, np.floor_divide(x, y))
    assert_close(r, np.remainder(x, y))
    xf, yf = x.astype(np.float32) + 0.5, y.astype(np.float32)
    assert_close(jnp.floor_divide(xf, yf), np.floor_divide(xf, yf))
    assert_close(jnp.remainder(xf, yf), np.remainder(xf, yf))
    # floats divided by zero follow IEEE as NumPy does
    assert_close(jnp.floor_divide(np.float32(1), np.float32(0)), np.float32(np.inf))


def test_round_decimals():
    x = np.array([1.2345, -2.5, 0.5, 1.5, 123.456, -0.0049], np.float32)
    for d in (0, 1, 2, -1):
        assert_close(jnp.round(x, d), np.round(x.astype(np.float64), d).astype(np.float32),
                     rtol=1e-6, atol=1e-6)
    ints = np.array([15, 25, -15, 14, 149, -151], np.int32)
    assert_close(jnp.round(ints, -1), np.round(ints, -1))
    assert_close(jnp.round(ints, -2), np.round(ints, -2))
    assert_close(jnp.round(ints, 1), ints)
    z = np.array([1.25 + 2.75j], np.complex64)
    assert_close(jnp.round(z, 1), np.round(z.astype(np.complex128), 1))


def test_integer_power_exact_and_negative_exponent_rejected():
    base = np.array([2, -3, 0, 1, 5], np.int32)
    exps = np.array([10, 3, 0, 7, 2], np.int32)
    assert_close(jnp.power(base, exps), np.power(base, exps))
    assert_close(jnp.power(base, 3), base ** 3)
    with pytest.raises(TypeError, match="negative powers"):
        jnp.power(base, -1)
    assert_close(jnp.power(np.float32(2), -1), np.float32(0.5))
    check_avals_like_jax(jnp.power(2, 3), jax_fn("power"), 2, 3)


@requires_jax
def test_ufunc_table_dtype_sweep_is_consistent_with_jax_rejections():
    """Every (function, kind) in REJECTED is rejected by JAX too (so the table is not stale)."""
    rng = np.random.default_rng(5)
    for (name, kind), exc in sorted(REJECTED.items()):
        if name in NOT_IN_JAX:
            continue
        dtype = {"b": np.bool_, "c": np.complex64, "f": np.float32, "i": np.int32}[kind]
        n_args = 2 if name in BINARY else 1
        args = [rand(rng, (2,), dtype) for _ in range(n_args)]
        from jnp_testutil import jax_out_avals
        ref = jax_out_avals(jax_fn(name), *args)
        assert isinstance(ref, exc), f"JAX accepts {name} on {kind}: {ref}"


def test_math_constants_match_numpy():
    assert jnp.pi == math.pi and jnp.e == math.e and jnp.inf == math.inf
    assert np.isnan(jnp.nan) and jnp.euler_gamma == np.euler_gamma and jnp.newaxis is None


def test_cached_python_scalar_operands_keep_the_sign_of_zero():
    # 0.0 == -0.0 (and they hash alike): the eager cache of converted scalars keeps them apart
    x_host = np.array([-0.0, 0.0, 1.5], np.float32)
    x = jnp.asarray(x_host)
    for order in ((0.0, -0.0, 0.0), (-0.0, 0.0, -0.0)):
        for s in order:
            np.testing.assert_array_equal(np.signbit(np.asarray(x + s)), np.signbit(x_host + s))
            np.testing.assert_array_equal(np.signbit(np.asarray(s * x)), np.signbit(s * x_host))

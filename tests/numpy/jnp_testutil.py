"""Shared helpers of the plax.numpy tests: deterministic random inputs, tolerances by dtype,
NumPy references, and (when JAX is installed) the dtype and weak type JAX gives for a call.

Values are checked against NumPy, computed in float64/complex128 where precision matters.
Result dtypes and weak types are checked against real JAX through ``jax.eval_shape`` (no
compilation); those checks are skipped, not faked, when ``jax`` is not importable.
"""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

import plax

try:  # JAX is the reference for dtypes; the tests run without it, minus those checks
    import jax
    import jax.numpy as jax_numpy
except ImportError:  # pragma: no cover - depends on the environment
    jax = None
    jax_numpy = None

bfloat16 = np.dtype(ml_dtypes.bfloat16)

# The dtypes the suite sweeps over (the task's list), by short name for test ids.
DTYPES = {
    "bool": np.dtype(np.bool_), "int8": np.dtype(np.int8), "int32": np.dtype(np.int32),
    "uint8": np.dtype(np.uint8), "uint32": np.dtype(np.uint32),
    "float16": np.dtype(np.float16), "bfloat16": bfloat16, "float32": np.dtype(np.float32),
    "complex64": np.dtype(np.complex64),
}
FLOAT_DTYPES = {k: v for k, v in DTYPES.items() if v.kind == "f" or v == bfloat16}
NUMERIC_DTYPES = {k: v for k, v in DTYPES.items() if k != "bool"}

_RTOL = {np.dtype(np.float16): 5e-3, bfloat16: 3e-2, np.dtype(np.float32): 2e-5,
         np.dtype(np.complex64): 2e-5, np.dtype(np.float64): 1e-12,
         np.dtype(np.complex128): 1e-12}


def is_inexact(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind in "fc" or dtype == bfloat16


def rand(rng: np.random.Generator, shape, dtype, kind: str = "normal") -> np.ndarray:
    """A NumPy array of ``dtype`` with values suited to ``kind``.

    kinds: "normal" (standard normal floats, small integers), "positive" (no zeros or
    negatives), "nonzero" (no zeros), "unit" (inside (-1, 1)), "small" (integers in [0, 4)).
    """
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    if dtype == np.bool_:
        return np.ones(shape, bool) if kind in ("positive", "nonzero") else rng.random(shape) > 0.5
    if dtype.kind in "iu":
        lo, hi = {"normal": (-5, 6), "positive": (1, 6), "nonzero": (1, 6), "unit": (0, 1),
                  "small": (0, 4)}[kind]
        if dtype.kind == "u":
            lo = max(lo, 0)
        vals = rng.integers(lo, hi, shape)
        if kind == "nonzero" and dtype.kind == "i":
            vals = vals * rng.choice([-1, 1], shape)
        return vals.astype(dtype)
    real = rng.standard_normal(shape)
    imag = rng.standard_normal(shape)
    if kind == "positive":
        real, imag = np.abs(real) + 0.5, imag
    elif kind == "nonzero":
        real = np.where(np.abs(real) < 0.25, 0.5, real)
    elif kind == "unit":
        real, imag = np.tanh(real) * 0.9, np.tanh(imag) * 0.9
    elif kind == "small":
        real = rng.integers(0, 4, shape).astype(np.float64)
    if dtype.kind == "c":
        return (real + 1j * imag).astype(dtype)
    return real.astype(dtype)


def wide(dtype) -> np.dtype:
    """The float64/complex128 dtype NumPy references compute in for an inexact ``dtype``."""
    return np.dtype(np.complex128) if np.dtype(dtype).kind == "c" else np.dtype(np.float64)


def to_numpy(x) -> np.ndarray:
    return np.asarray(x)


def assert_close(actual, expected, dtype=None, rtol=None, atol=None, err_msg=""):
    """``actual`` (a plax array) equals ``expected`` within the tolerance of ``dtype``
    (default: the dtype of ``actual``); integers and booleans exactly, NaNs equal NaNs."""
    got = to_numpy(actual)
    exp = np.asarray(expected)
    dtype = np.dtype(dtype if dtype is not None else got.dtype)
    assert got.shape == exp.shape, f"shape {got.shape} != expected {exp.shape}. {err_msg}"
    if not is_inexact(dtype):
        np.testing.assert_array_equal(got, exp.astype(got.dtype) if exp.dtype != got.dtype
                                      else exp, err_msg=err_msg)
        return
    rtol = _RTOL.get(dtype, 1e-5) if rtol is None else rtol
    atol = rtol if atol is None else atol
    gw, ew = got.astype(wide(dtype)), exp.astype(wide(dtype))
    np.testing.assert_allclose(gw, ew, rtol=rtol, atol=atol, equal_nan=True, err_msg=err_msg)


def assert_aval(x, dtype, weak_type: bool | None = None, shape=None):
    """``x`` (a plax array) has ``dtype`` (and ``weak_type``, ``shape`` when given)."""
    assert x.dtype == np.dtype(dtype), f"dtype {x.dtype} != {np.dtype(dtype)}"
    if weak_type is not None:
        assert x.weak_type == weak_type, f"weak_type {x.weak_type} != {weak_type} ({x.dtype})"
    if shape is not None:
        assert x.shape == tuple(shape), f"shape {x.shape} != {tuple(shape)}"


# ---------------------------------------------------------------- JAX as the dtype reference

def _jax_arg(a):
    if isinstance(a, np.ndarray):
        return jax.ShapeDtypeStruct(a.shape, a.dtype)
    return None


def jax_out_avals(jax_fn, *args, concrete: bool = False, **kwargs):
    """``(dtype, weak_type, shape)`` of each output of ``jax_fn(*args, **kwargs)`` in JAX, or
    the exception JAX raised. NumPy arrays are passed abstractly (shape and dtype), Python
    scalars as themselves, unless ``concrete`` (needed when the output shape depends on
    values). Returns None when JAX is not installed."""
    if jax is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if concrete:
                out = jax_fn(*[jax_numpy.asarray(a) if isinstance(a, np.ndarray) else a
                               for a in args], **kwargs)
            else:
                slots = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

                def call(*arrays):
                    full = list(args)
                    for i, arr in zip(slots, arrays):
                        full[i] = arr
                    return jax_fn(*full, **kwargs)

                try:
                    out = jax.eval_shape(call, *[_jax_arg(args[i]) for i in slots])
                except jax.errors.ConcretizationTypeError:
                    # the output shape depends on values: call JAX for real
                    return jax_out_avals(jax_fn, *args, concrete=True, **kwargs)
        except Exception as err:  # noqa: BLE001 - the exception is the answer
            return err
    leaves = jax.tree_util.tree_leaves(out)
    return [(np.dtype(o.dtype), bool(getattr(o, "weak_type", False)), tuple(o.shape))
            for o in leaves]


def plax_avals(out):
    leaves = plax.tree_util.tree_leaves(out)
    # (a NumPy result, as jnp.reshape of a NumPy array gives in JAX too, is not weak)
    return [(np.dtype(o.dtype), bool(getattr(o, "weak_type", False)), tuple(o.shape))
            for o in leaves]


def check_avals_like_jax(plax_out, jax_fn, *args, concrete: bool = False, check_weak=True,
                         **kwargs):
    """Asserts plax's outputs have JAX's dtypes (and weak types and shapes) for the same call.
    Does nothing when JAX is not installed (or ``jax_fn`` is None: a name JAX lacks)."""
    if jax_fn is None:
        return
    ref = jax_out_avals(jax_fn, *args, concrete=concrete, **kwargs)
    if ref is None:
        return
    if isinstance(ref, Exception):
        pytest.fail(f"JAX raised {type(ref).__name__}: {ref}, but plax returned "
                    f"{plax_avals(plax_out)}")
    got = plax_avals(plax_out)
    if not check_weak:
        got = [(d, None, s) for d, _, s in got]
        ref = [(d, None, s) for d, _, s in ref]
    assert got == ref, f"plax (dtype, weak_type, shape) {got} != JAX's {ref}"


def check_raises_like_jax(plax_call, jax_fn, *args, concrete: bool = True, **kwargs):
    """Asserts plax raises, and raises an exception of the type JAX raises for the same call
    (or one of its subclasses). Returns the plax exception."""
    with pytest.raises(Exception) as info:
        plax_call()
    err = info.value
    assert isinstance(err, (TypeError, ValueError, IndexError, NotImplementedError,
                            OverflowError, ZeroDivisionError)), f"unexpected exception type {type(err).__name__}"
    if jax is not None and jax_fn is not None:
        ref = jax_out_avals(jax_fn, *args, concrete=concrete, **kwargs)
        assert isinstance(ref, Exception), f"JAX did not raise; plax raised {err!r}"
        assert isinstance(err, type(ref)), (f"plax raised {type(err).__name__} ({err}), JAX "
                                            f"raised {type(ref).__name__} ({ref})")
    return err


# NumPy names plax keeps that JAX 0.10 removed: checked against NumPy only
REMOVED_FROM_JAX = {"fix", "round_", "row_stack", "trapz", "in1d"}


def jax_fn(name: str):
    """``jax.numpy.<name>`` resolved lazily (for building parametrised tables at import), or
    None for names JAX no longer has (their JAX checks are then skipped)."""
    if name in REMOVED_FROM_JAX:
        return None

    def call(*args, **kwargs):
        return getattr(jax_numpy, name)(*args, **kwargs)
    call.__name__ = name
    return call


requires_jax = pytest.mark.skipif(jax is None, reason="jax is not installed: this test "
                                  "compares result dtypes with real JAX")

"""Helpers of the Numba backend's tests: a function jitted on the Numba and on the NumPy
backend, the bit-for-bit comparison of their results, the generated source of a function, a
program with broadcasts shared by several tests, and a compiled loop over a scalar kernel."""
from __future__ import annotations

import functools
import warnings

import numpy as np

import plax
from plax import dtypes
from plax.lowering import PlaxFallbackWarning


def jit_both(f, *args, fallback_is_error: bool = False):
    """``f(*args)`` jitted on the Numba and on the NumPy backend, each as a list of host
    arrays (the leaves of its result). ``fallback_is_error``: a ``PlaxFallbackWarning`` of
    the Numba compilation raises (the path under test must not fall back)."""
    with warnings.catch_warnings():
        if fallback_is_error:
            warnings.simplefilter("error", PlaxFallbackWarning)
        got = plax.jit(f, backend="numba")(*args)
    want = plax.jit(f, backend="numpy")(*args)
    leaves = plax.tree_util.tree_leaves
    return [np.asarray(x) for x in leaves(got)], [np.asarray(x) for x in leaves(want)]


def compiled_source(f, *args) -> str:
    """The generated source of ``f`` compiled by the Numba backend for ``args``."""
    from plax import plugins
    from plax.transforms.call import compile_closed
    closed = plax.jit(f).lower(*args).jaxpr
    backend = plugins.registry().get_backend("numba")
    return compile_closed(closed, backend, plax.devices("cpu")[0]).executable.__plax_source__


def broadcasting_program():
    """``(f, args)``: one fused chain over a matrix, a column, a row and a scalar
    (``maximum(a * c - r, s) / (1 + r * r)``), shared by the tests that need a compiled
    cluster, so its kernel is compiled once a session."""
    from plax import numpy as jnp
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    col = np.array([[1.0], [2.0], [3.0]], np.float32)
    row = np.array([0.5, -1.0, 2.0, 4.0], np.float32)
    f = lambda a, c, r, s: jnp.maximum(a * c - r, s) / (1.0 + r * r)  # noqa: E731
    return f, (a, col, row, np.float32(3.0))


def assert_bits_equal(got, want):
    """Same dtype, shape and bits (floats compared as unsigned integers; NaNs in the same
    places, any payload). bfloat16 (NumPy kind "V") is a float here too, and complex values
    are compared part by part."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "c":  # real and imaginary parts as a trailing axis of floats
        got, want = (np.stack([a.real, a.imag], axis=-1) for a in (got, want))
    if dtypes.issubdtype(got.dtype, np.floating):
        ui = np.dtype(f"u{got.dtype.itemsize}")
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(ui), want[~nan].view(ui))
    else:
        np.testing.assert_array_equal(got, want)


@functools.lru_cache(maxsize=None)
def elementwise_loop(fn):
    """A compiled loop applying the scalar kernel ``fn`` (e.g. ``plax_numba.scalar.exp_f32``)
    to every element of a 1-d array, as the generated kernels call it. One loop per ``fn``
    in a process (numba compiles each new loop again, callee included), shared by the tests
    of that kernel."""
    from numba import njit

    @njit(error_model="numpy")
    def run(a):
        out = np.empty_like(a)
        for i in range(a.size):
            out[i] = fn(a[i])
        return out
    return run

"""Kernels compiled without numba's Python wrappers (``plax_numba.cache._compile_native``):
a kernel headed for a native artifact is compiled by numba without the CPython and C entry
points numba would wrap it in, since the artifact's own entry point
(:mod:`plax_numba.native_emit`) replaces them. Synchronous compilations (``PLAX_NUMBA_SYNC``)
go the same way and link the artifact. Values are checked against NumPy; no timing is
asserted (the saving is measured by ``benchmarks/numba_compiles.py``)."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import plax
from plax import numpy as jnp

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or sys.maxsize < 2 ** 32,
    reason="the native loader links ELF objects: 64-bit Linux only (elsewhere kernels load "
           "through numba, with its wrappers)")

_RAISING = '''
@njit(**_OPTIONS)
def kernel(a, n):
    o = np.empty(n, np.float64)
    for i in range(a.size):
        if a[i] < 0.0:
            raise ValueError("a negative operand")
        o[i] = a[i] * 2.0
    return (o, )
'''
_ARG_TYPES = [("array", np.dtype(np.float64), 1), ("int",)]


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """An empty kernel cache of the test's own, and nothing compiled in this process."""
    from plax_numba import cache
    monkeypatch.setattr(cache, "_dir", str(tmp_path))
    monkeypatch.setattr(cache, "_compiled", {})
    monkeypatch.setattr(cache, "_kernels", {})
    monkeypatch.delenv("PLAX_NUMBA_NATIVE", raising=False)
    return tmp_path


def test_a_kernels_exceptions_reach_the_caller_as_numba_raises_them(own_cache):
    # the artifact's entry point raises what the kernel raised (a user exception, numba's
    # own checks), as numba's own wrapper does, rather than a generic error
    from plax_numba import cache, native_emit, native_loader
    text = cache.module_source(_RAISING, ["mul"])
    bare = cache.native_compiles["bare"]
    cache.compile_for_cache(text, _ARG_TYPES, native=True)
    assert cache.native_compiles["bare"] == bare + 1
    path = native_emit.artifact_path(cache._marker(text, _ARG_TYPES))
    assert native_emit.has_code(path)
    assert not cache.load_kernel(text).overloads  # numba's wrapped kernel never compiled
    kernel = native_loader.load(path)
    assert kernel is not None, native_loader.fallbacks
    a = np.array([0.5, 1.5, 3.0])
    (out,) = kernel.function(a, 3)
    np.testing.assert_array_equal(out, a * 2.0)
    with pytest.raises(ValueError, match="a negative operand"):
        kernel.function(np.array([1.0, -1.0]), 2)
    with pytest.raises(ValueError, match="array is too big"):  # numba's np.empty check
        kernel.function(a, 1 << 60)
    (out,) = kernel.function(a, 3)  # and it keeps working
    np.testing.assert_array_equal(out, a * 2.0)


def test_synchronous_compilations_link_a_native_kernel(own_cache, monkeypatch):
    from plax_numba import cache, native_loader
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")
    bare, loaded = cache.native_compiles["bare"], native_loader.stats["loaded"]
    x = np.linspace(-2, 2, 33, dtype=np.float32)
    out = plax.jit(lambda x: jnp.tanh(x * 1.25) - x * x, backend="numba")(x)
    want = np.tanh(x.astype(np.float64) * 1.25) - x.astype(np.float64) ** 2
    np.testing.assert_allclose(np.asarray(out), want, rtol=2e-6, atol=2e-6)
    assert cache.native_compiles["bare"] > bare
    assert native_loader.stats["loaded"] > loaded
    kernels = list(cache._compiled.values())
    assert kernels and all(isinstance(k, native_loader.NativeKernel) for k in kernels)
    # numba's own dispatchers of those modules compiled nothing
    assert all(not d.overloads for d in cache._kernels.values())


def test_with_the_native_loader_off_kernels_keep_numbas_wrappers(own_cache, monkeypatch):
    from plax_numba import cache
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")
    monkeypatch.setenv("PLAX_NUMBA_NATIVE", "0")
    bare = cache.native_compiles["bare"]
    x = np.linspace(-2, 2, 33, dtype=np.float32)
    out = plax.jit(lambda x: jnp.tanh(x * 0.75) + x, backend="numba")(x)
    np.testing.assert_allclose(np.asarray(out), np.tanh(x.astype(np.float64) * 0.75) + x,
                               rtol=2e-6, atol=2e-6)
    assert cache.native_compiles["bare"] == bare
    assert any(d.overloads for d in cache._kernels.values())


def test_complex_scalars_are_compiled_the_usual_way():
    # the artifact's entry point takes no complex scalar: such a kernel is not compiled bare
    # (it would be compiled twice), and results it cannot box are declined after compiling
    from plax_numba import native_emit
    assert native_emit.takes_arguments([("array", np.dtype(np.complex64), 1), ("int",)])
    assert native_emit.takes_arguments([("scalar", np.dtype(np.float32)), ("int",)])
    assert not native_emit.takes_arguments([("scalar", np.dtype(np.complex64)), ("int",)])


def test_complex_programs_give_numpys_values_with_sync_compilation(own_cache, monkeypatch):
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")
    z = (np.linspace(-1, 1, 9) + 1j * np.linspace(2, 0, 9)).astype(np.complex64)
    f = plax.jit(lambda z, s: z * s + jnp.conj(z), backend="numba")
    out = f(z, np.complex64(0.5 - 2j))
    want = z.astype(np.complex128) * (0.5 - 2j) + np.conj(z.astype(np.complex128))
    np.testing.assert_allclose(np.asarray(out), want, rtol=2e-6, atol=2e-6)


_SCALED = '''
@njit(**_OPTIONS)
def kernel(a, n):
    o = np.empty(n, np.float64)
    for i in range(n):
        o[i] = a[i] * SCALE
    return (o, )
'''


def test_kernels_of_the_same_types_share_one_entry_object_and_each_runs_its_own(own_cache):
    # the entry point calls the kernel through a pointer the loader sets: kernels of the
    # same argument and result types share its object, and each artifact calls its kernel
    import pickle
    from plax_numba import cache, native_emit, native_loader
    paths = []
    for scale in (3.0, -0.5, 7.25):
        text = cache.module_source(_SCALED.replace("SCALE", repr(scale)), ["mul"])
        cache.compile_for_cache(text, _ARG_TYPES, native=True)
        paths.append(native_emit.artifact_path(cache._marker(text, _ARG_TYPES)))
    artifacts = [pickle.load(open(p, "rb")) for p in paths]
    assert len({a["objects"][1] for a in artifacts}) == 1       # one entry object
    assert len({a["kernel"] for a in artifacts}) == 3            # three kernels
    a = np.array([1.0, -2.0, 0.25])
    kernels = [native_loader.load(p) for p in paths]
    assert all(kernels), native_loader.fallbacks
    for kernel, scale in zip(kernels, (3.0, -0.5, 7.25)):
        (out,) = kernel.function(a, 3)
        np.testing.assert_array_equal(out, a * scale)


_COMPLEX_RESULT = '''
@njit(**_OPTIONS)
def kernel(a, n):
    acc = 0.0
    for i in range(n):
        acc += a[i]
    return (np.complex128(acc + 1j), )
'''


def test_results_the_entry_cannot_box_are_declined_and_compiled_the_usual_way(own_cache):
    # a complex scalar result is known only after compiling: the bare form is declined, the
    # kernel compiled with numba's wrappers, its artifact saying why there is no native form
    import pickle
    from plax_numba import cache, native_emit, native_loader
    text = cache.module_source(_COMPLEX_RESULT, ["reduce_sum"])
    declined = cache.native_compiles["declined"]
    kernel = cache.compile_kernel(text, _ARG_TYPES)
    assert cache.native_compiles["declined"] == declined + 1
    assert not isinstance(kernel, native_loader.NativeKernel)
    path = native_emit.artifact_path(cache._marker(text, _ARG_TYPES))
    assert "complex" in pickle.load(open(path, "rb"))["unsupported"]
    (got,) = cache.entry_point(kernel, _ARG_TYPES)(np.array([1.0, 2.5]), 2)
    assert got == 3.5 + 1j

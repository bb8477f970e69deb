"""Heavy scalar forms compiled once per process and called by the kernels
(:mod:`plax_numba.compiled_once`): one compilation however many kernels call a form, the
same bits as the inlined form, values matching the NumPy backend, small kernels calling the
twins of the vectorising forms (``zeta_f32_once``, ``lgamma_f32_once``, ...) and large ones
inlining the forms, and a kernel loaded from numba's disk cache by another process finding its
compiled-once form."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import plax
from plax import lax

from numba_vs_numpy import compiled_source, jit_both
from special_forms_cases import elementwise_loop_n


def _gamma_operands():
    rng = np.random.default_rng(3)
    a = rng.uniform(0.1, 12.0, 200).astype(np.float32)
    x = rng.uniform(0.0, 15.0, 200).astype(np.float32)
    return a, x


def test_two_kernels_share_one_compilation():
    """Two programs calling ``igammac``: both kernels call the form, which was compiled
    once in this process; each matches the NumPy backend (SciPy's float32 rounding: a few
    ulps)."""
    from plax_numba import compiled_once
    from plax_numba.special_gamma import igammac_f32
    a, x = _gamma_operands()
    programs = [lambda a, x: lax.igammac(a, x) * 2.0, lambda a, x: lax.igammac(a, x) - x]
    for f in programs:
        assert "igammac_f32(" in compiled_source(f, a, x)
        got, want = jit_both(f, a, x, fallback_is_error=True)
        np.testing.assert_allclose(got[0], want[0], rtol=2e-5, atol=1e-7)
    assert compiled_once.compiles[igammac_f32.symbol] == 1


def test_kernel_holds_a_call_not_the_body():
    """A loop calling ``betainc_f32`` holds one call of its external symbol and none of the
    iterative code (``betainc_core`` is not linked into it), and gives the inlined form's
    bits."""
    from plax_numba.special_beta import betainc_f32
    rng = np.random.default_rng(5)
    a, b = (rng.uniform(0.2, 20.0, 300).astype(np.float32) for _ in range(2))
    x = rng.uniform(0.0, 1.0, 300).astype(np.float32)
    loop = elementwise_loop_n(betainc_f32, 3)
    got = loop(a, b, x)
    ir = "".join(loop.inspect_llvm().values())
    assert f'call i32 @"{betainc_f32.symbol}"' in ir  # (numba's convention: a status)
    assert "betainc_core" not in ir
    want = elementwise_loop_n(betainc_f32.dispatcher, 3)(a, b, x)  # inlined
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_python_call_and_other_types_run_the_inlined_form():
    """Called from Python, or from compiled code with other argument types than its
    signature, a compiled-once function is its numba function."""
    from plax_numba.special_zeta import polygamma_f64
    assert polygamma_f64(1.0, 2.5) == polygamma_f64.dispatcher(1.0, 2.5)
    m = np.array([1, 2, 3], np.float32)
    x = np.array([0.5, 2.0, 7.0], np.float32)
    loop = elementwise_loop_n(polygamma_f64, 2)    # (float32, float32): not its signature
    got = loop(m, x)
    assert "plax_once." not in "".join(loop.inspect_llvm().values())
    want = elementwise_loop_n(polygamma_f64.dispatcher, 2)(m, x)
    np.testing.assert_array_equal(got, want)


def test_an_exception_raised_inside_propagates_to_the_caller(monkeypatch):
    """A compiled-once function is called with numba's calling convention: an exception it
    raises (a failed allocation in the blocked scan, say) reaches the kernel's caller rather
    than being printed and the kernel going on with an unwritten result."""
    from numba import njit
    from plax_numba.compiled_once import compiled_once

    @njit(nogil=True)
    def checked(x):
        if x < 0.0:
            raise ValueError("a negative operand")
        return x * 2.0
    once = compiled_once(checked, "float64(float64)", __name__, "checked_once")
    # (where the symbol's registration finds it)
    monkeypatch.setattr(sys.modules[__name__], "checked_once", once, raising=False)

    @njit
    def loop(a):
        out = np.empty_like(a)
        for i in range(a.size):
            out[i] = once(a[i])
        return out
    assert loop(np.array([1.0, 2.5])).tolist() == [2.0, 5.0]
    with pytest.raises(ValueError, match="a negative operand"):
        loop(np.array([1.0, -1.0]))
    assert f'"{once.symbol}"' in "".join(loop.inspect_llvm().values())


#: (primitive, operand dtype, arity) of each form of ``codegen.INLINE_FROM``
_INLINED_FORMS = {
    "log_f32": (lax.log_p, np.float32, 1), "sin_f32": (lax.sin_p, np.float32, 1),
    "cos_f32": (lax.cos_p, np.float32, 1), "expm1_f32": (lax.expm1_p, np.float32, 1),
    "erf_f32": (lax.erf_p, np.float32, 1), "erfc_f32": (lax.erfc_p, np.float32, 1),
    "erf_inv_f32": (lax.erf_inv_p, np.float32, 1), "lgamma_f32": (lax.lgamma_p, np.float32, 1),
    "digamma_f32": (lax.digamma_p, np.float32, 1),
    "bessel_i0e_f32": (lax.bessel_i0e_p, np.float32, 1),
    "bessel_i1e_f32": (lax.bessel_i1e_p, np.float32, 1),
    "bessel_i0e_f64": (lax.bessel_i0e_p, np.float64, 1),
    "bessel_i1e_f64": (lax.bessel_i1e_p, np.float64, 1),
    "digamma_f64": (lax.digamma_p, np.float64, 1), "erf_inv_f64": (lax.erf_inv_p, np.float64, 1),
    "zeta_f32": (lax.zeta_p, np.float32, 2),
}


def _twin(name):
    """The module attribute ``<name>_once`` (the twin the kernels import, cache._HELPERS)."""
    import importlib
    from plax_numba import cache
    module = next(m for m, names in cache._HELPERS.items() if f"{name}_once" in names)
    return getattr(importlib.import_module(module), f"{name}_once")


def test_every_inlined_form_has_a_twin():
    """Every form the code generator may call as ``<name>_once`` has that twin, importable
    by generated kernels, compiled once for the form's own signature."""
    from plax_numba import codegen
    assert set(codegen.INLINE_FROM) == set(_INLINED_FORMS)
    for name in codegen.INLINE_FROM:
        twin = _twin(name)
        dtype, arity = _INLINED_FORMS[name][1:]
        assert twin.signature == f"{np.dtype(dtype).name}({', '.join([np.dtype(dtype).name] * arity)})"
        assert twin.dispatcher.py_func.__name__ == name


@pytest.mark.parametrize("name", sorted(_INLINED_FORMS))
def test_called_when_small_inlined_when_large(name):
    """A kernel over fewer than ``INLINE_FROM[name]`` elements calls the form's compiled-once
    twin (a cheap compile); from there it inlines the form (it vectorises with the loop)."""
    from plax_numba import codegen
    prim, dtype, arity = _INLINED_FORMS[name]
    least = codegen.INLINE_FROM[name]
    names = ["s", "q"][:arity]
    for size, called in ((least - 1, True), (least, False)):
        x = np.full(size, 0.5, dtype)
        with plax.config.override("enable_x64", dtype == np.float64):
            eqn = plax.make_jaxpr(lambda *a: prim.bind(*a))(*[x] * arity).jaxpr.eqns[0]
        want = f"{name}_once(" if called else f"{name}("
        assert codegen.elementwise(eqn, names).startswith(want), (size, want)


def _bits(a):
    a = np.asarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("name", sorted(n for n, (_, _, arity) in _INLINED_FORMS.items()
                                        if arity == 1))
def test_twin_gives_the_inlined_bits(name):
    """The twin, called from a loop, gives the inlined form's bits on ordinary values, the
    edges (signed zeros, infinities, NaN, poles, the domain's ends) and random bit patterns."""
    from numba_vs_numpy import elementwise_loop
    dtype = _INLINED_FORMS[name][1]
    finfo = np.finfo(dtype)
    rng = np.random.default_rng(11)
    x = np.concatenate([
        np.linspace(-12, 12, 2001), [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -3.0, 1 - 1e-7,
                                     -(1 - 1e-7), np.inf, -np.inf, np.nan, finfo.tiny,
                                     finfo.max, -finfo.max, 1e30, -1e30]]).astype(dtype)
    size = 8 * np.dtype(dtype).itemsize
    pattern = rng.integers(0, 1 << (size - 1), 4000, dtype=np.int64).astype(f"uint{size}")
    x = np.concatenate([x, pattern.view(dtype), -pattern.view(dtype)])
    twin = _twin(name)
    got = elementwise_loop(twin)(x)
    want = elementwise_loop(twin.dispatcher)(x)
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_small_zeta_kernel_matches_numpy_backend():
    """``zeta`` fused with its neighbours over a few elements, through ``zeta_f32_once``:
    the NumPy backend's values (SciPy's float64 zeta rounded: within an ulp)."""
    s = np.linspace(1.5, 12.0, 96, dtype=np.float32)
    q = np.linspace(0.25, 9.0, 96, dtype=np.float32)

    def f(s, q):
        return lax.zeta(s, q) * 3.0 + q
    assert "zeta_f32_once(" in compiled_source(f, s, q)
    got, want = jit_both(f, s, q, fallback_is_error=True)
    np.testing.assert_allclose(got[0], want[0], rtol=3e-7, atol=0)


_CHILD = textwrap.dedent("""
    import numpy as np, plax
    from plax import lax
    from plax_numba import cache
    s = np.linspace(1.5, 12.0, 40, dtype=np.float32)
    a = np.linspace(0.5, 9.0, 40, dtype=np.float32)
    f = plax.jit(lambda s, a: (lax.zeta(s, a) + 1.0, lax.igamma(a, s) * 2.0), backend="numba")
    z, g = f(s, a)
    misses = sum(sum(k.stats.cache_misses.values()) for k in cache._kernels.values())
    print(np.asarray(z).view(np.uint32).tolist(), np.asarray(g).view(np.uint32).tolist(),
          misses)
""")


def test_cached_kernel_in_another_process(tmp_path):
    """A second process loads the kernels from numba's disk cache (no compilation) and finds
    their compiled-once forms (numba's reload hook registers them): the same bits."""
    # (the helpers' own numba cache is the package's, warm from this process's compiles)
    env = dict(os.environ, PLAX_NUMBA_CACHE_DIR=str(tmp_path), PLAX_NUMBA_SYNC="1",
               PLAX_NUMBA_WORKERS="0", PLAX_NUMBA_NATIVE="0", PLAX_NUMBA_FIRST_TIER="0")
    runs = [subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=600) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    first, second = (run.stdout.strip().rsplit(" ", 1) for run in runs)
    assert second[0] == first[0]
    assert int(second[1]) == 0, "the second process compiled a kernel"

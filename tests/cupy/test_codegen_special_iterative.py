"""The generator's device forms of the iterative special functions (``igamma``, ``igammac``,
``igamma_grad_a``, ``random_gamma_grad``, ``zeta``, ``polygamma``, ``betainc``;
``plax_cupy.special_source``), checked without a GPU: their kernels built for the host
(``-DPLAX_HOST``, g++) on the Numba forms' sweeps and edge grids
(``tests/numba/special_forms_cases.py``: dense and log-uniform sweeps, the band ``x ~ a``,
every combination of 0, -0, +-1, 0.5, 2, 1e-30, 1e30, +-inf and NaN), against the NumPy
backend's float64 kernels (SciPy underneath), within the bounds in ulps the Numba forms meet
(the same algorithms and constants, ``plax.lax.special_series``); NaN and infinities where the
reference has them. float16 and bfloat16 are the float32 form's value rounded to the type.
Also: the huge-shape region (Temme's expansion) against SciPy, which snippets a kernel
includes, and NVRTC compiling them with the device optimiser on.
"""
from __future__ import annotations

import ctypes
import os
import sys

import ml_dtypes
import numpy as np
import pytest
import scipy.special

from plax import lax
from plax.core.jaxpr import Var

from gpu_env import requires_nvrtc
from kernel_source_util import HAVE_CXX, aval, batch_source, make_eqn
from plax_cupy import codegen, nvrtc, special_source

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "numba"))
from special_forms_cases import CASES, max_ulps, reference, same_specials  # noqa: E402

needs_cxx = pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler (g++) for the host check")

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]
#: case name -> (primitive, number of operands)
FUNCTIONS = {"igamma": (lax.igamma_p, 2), "igammac": (lax.igammac_p, 2),
             "igamma_grad_a": (lax.igamma_grad_a_p, 2),
             "random_gamma_grad": (lax.random_gamma_grad_p, 2), "zeta": (lax.zeta_p, 2),
             "polygamma": (lax.polygamma_p, 2),
             "betainc": (lax.regularized_incomplete_beta_p, 3)}
_N = 4000   # per part of each sweep: ~10k-25k points with the edge grid
_LOG_MAX32 = float(np.log(np.finfo(np.float32).max))

_HOST: dict = {}


def _plans() -> dict:
    return {(name, d): codegen.plan_equation(make_eqn(prim, [Var(aval((1,), d)) for _ in range(arity)]))
            for name, (prim, arity) in FUNCTIONS.items() for d in FLOATS}


def _host(name: str, *args: np.ndarray) -> np.ndarray:
    """``name`` of the equally long 1-d ``args`` by its generated kernel built for the host
    (every kernel of this file in one unit, compiled once)."""
    if not _HOST:
        plans = _plans()
        source, suffixes = batch_source([p.source for p in plans.values()])
        lib = nvrtc.compile_host(source)
        _HOST.update({key: getattr(lib, "plax_host" + s) for key, s in zip(plans, suffixes)})
    fn = _HOST[(name, np.dtype(args[0].dtype))]
    args = [np.ascontiguousarray(a) for a in args]
    out = np.empty(args[0].shape, args[0].dtype)
    fn.argtypes = [ctypes.c_void_p] * (len(args) + 1) + [ctypes.c_longlong]
    fn.restype = None
    fn(*[a.ctypes.data for a in args], out.ctypes.data, out.size)
    return out


def _underflows32(a, x):
    """random_gamma_grad's float32 convention: where the prefactor underflows in float32 the
    derivative is its formula without iterating (as JAX and the NumPy backend)."""
    with np.errstate(all="ignore"):
        return a * np.log(x) - x - scipy.special.gammaln(a) < -_LOG_MAX32


@needs_cxx
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_error_bound_and_edges(name, dtype):
    case = CASES[name]
    args = [a.astype(dtype) for a in case.inputs(_N)]
    got = _host(name, *args)
    assert got.dtype == dtype
    ref = reference(case, *[a.astype(np.float64) for a in args])
    assert same_specials(got, ref), "NaN/inf differ from the NumPy backend"
    if name == "random_gamma_grad" and dtype == np.float32:
        skip = _underflows32(*[a.astype(np.float64) for a in args])
        want = np.asarray(plax_jit_numpy(lax.random_gamma_grad)(*args))
        np.testing.assert_allclose(got[skip], want[skip], rtol=1e-5, atol=0)
        got, ref = got[~skip], ref[~skip]
    bound = case.bound32 if dtype == np.float32 else case.bound64
    assert max_ulps(got, ref, dtype) <= bound


def plax_jit_numpy(fn):
    import plax
    return plax.jit(fn, backend="numpy")


@needs_cxx
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_half_types_are_the_float32_value_rounded(name, dtype):
    """float16/bfloat16 compute in float (the float32 form) and round once to the type."""
    case = CASES[name]
    with np.errstate(over="ignore"):
        args = [a.astype(dtype) for a in case.inputs(500)]
    got = _host(name, *args)
    assert got.dtype == dtype
    with np.errstate(over="ignore"):
        want = _host(name, *[a.astype(np.float32) for a in args]).astype(dtype)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


#: (function, operands, values): a few edges by hand
_EDGES = [
    ("igamma", ([2, 0, 2, np.inf, -1, np.nan], [0, 3, np.inf, 1, 1, 1]), [0, 1, 1, np.nan, np.nan, np.nan]),
    ("igammac", ([2, 0, 2], [0, 3, np.inf]), [1, 0, 0]),
    ("zeta", ([1, 0.5, 2, 2, np.inf], [2, 2, 0, -3, 1]), [np.inf, np.nan, np.inf, np.inf, np.nan]),
    ("polygamma", ([1, 0.5, -1, 2, 3], [np.inf, 1, 1, -2, np.nan]), [0, np.nan, np.nan, np.nan, np.nan]),
    ("betainc", ([2, 2, 0, 2, -1, 2], [3, 3, 2, 0, 1, 3], [0, 1, 0.5, 0.5, 0.5, 1.5]),
     [0, 1, 1, 0, np.nan, np.nan]),
    ("random_gamma_grad", ([2, 0, -1, 2], [0, 1, 1, -1]), [0, np.nan, np.nan, np.nan]),
    ("igamma_grad_a", ([2, 0, np.inf], [0, 1, 1]), [0, np.nan, np.nan]),
]


@needs_cxx
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_edge_values(dtype):
    """SciPy's conventions at the domain's edges (NaN for infinite shapes, for orders that are
    not non-negative integers and at the poles)."""
    for name, args, want in _EDGES:
        got = _host(name, *[np.array(a, dtype) for a in args])
        np.testing.assert_array_equal(got, np.array(want, dtype), err_msg=name)


@needs_cxx
def test_betainc_f64_tiny_a_beside_b_near_171():
    """``Gamma(a) Gamma(b)`` overflows for a tiny ``a`` beside ``b`` near 171 while ``a + b``
    stays below gamma's limit: the prefactor comes from logarithms there (inf / inf gave NaN),
    SciPy's values (the cases of the Numba form's regression test, both iteration branches)."""
    a = np.array([1.48137833e-03, 4.41231355e-02, 4.66347765e-03, 0.5, 1e-3, 2e-3])
    b = np.array([1.70953949e+02, 1.71445267e+02, 1.71091949e+02, 171.0, 171.5, 171.2])
    x = np.array([1.90746605e-16, 6.15268304e-26, 0.5, 0.5, 0.02, 0.9])
    got = _host("betainc", a, b, x)
    np.testing.assert_allclose(got, scipy.special.betainc(a, b, x), rtol=1e-13)
    got32 = _host("betainc", *(v.astype(np.float32) for v in (a, b, x)))
    want32 = scipy.special.betainc(*(v.astype(np.float32).astype(np.float64) for v in (a, b, x)))
    assert max_ulps(got32, want32, np.float32) <= 1.0


@needs_cxx
def test_betainc_f32_log_beta_without_lgamma():
    """The float32 path's ``-log B(a, b)`` (``plax_log_beta_parts``: Stirling's series after a
    shift by 10, no ``lgamma``) on each of its branches (both parameters below 10, one above,
    both above, a tiny one): within 1e-13 (1 + |value|) of the ``lgamma`` form it replaces
    (``plax_log_beta_factor``, kept for float64) and 1e-10 (1 + |value|) of SciPy's ``betaln``
    (both forms are 2e-11 off it beside a large ``b``), far inside the 2**-40 relative the
    float32 path iterates to (the value enters an ``exp``)."""
    rng = np.random.default_rng(4)
    a = np.concatenate([rng.uniform(0.01, 10, 300), rng.uniform(0.01, 10, 300),
                        rng.uniform(10, 1e4, 300), 10.0 ** rng.uniform(-9, -3, 100),
                        [1e-120, 1e-50, 3.0]])
    b = np.concatenate([rng.uniform(0.01, 10, 300), rng.uniform(10, 1e4, 300),
                        rng.uniform(10, 1e4, 300), rng.uniform(0.01, 100, 100),
                        [2.0, 40.0, 1e-120]])
    lib = nvrtc.compile_host(codegen.PREAMBLE + special_source.SPECIAL_COMMON_SOURCE
                             + special_source.BETA_SOURCE + r"""
extern "C" void log_beta(const double* a, const double* b, double* out, double* old, long long n) {
  for (long long i = 0; i < n; ++i) {
    double m;
    const double l = plax_log_beta_parts(a[i], b[i], &m);
    out[i] = l + log(m);
    old[i] = plax_log_beta_factor(a[i], b[i]);
  }
}""")
    out, old = np.empty_like(a), np.empty_like(a)
    lib.log_beta.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_longlong]
    lib.log_beta(a.ctypes.data, b.ctypes.data, out.ctypes.data, old.ctypes.data, a.size)
    ref = -scipy.special.betaln(a, b)
    scale = 1 + np.abs(ref)
    assert np.max(np.abs(out - old) / scale) <= 1e-13
    assert np.max(np.abs(out - ref) / scale) <= 1e-10


@needs_cxx
def test_huge_shapes_against_scipy():
    """Above a = 5e6 next to x = a (Temme's uniform expansion to its first correction; the
    series would need over 20000 terms) and beside that band (series and fraction): where P
    and Q are both above 1e-3, SciPy's values to 1e-9 in float64 and to an ulp in float32;
    in the tails (the expansion's relative error grows there) to 1e-6 absolute."""
    rng = np.random.default_rng(3)
    a = 10.0 ** rng.uniform(6.7, 9, 400)
    x = a * np.concatenate([1 + rng.uniform(-2e-3, 2e-3, 300), rng.uniform(0.9, 1.1, 100)])
    for dtype in (np.float64, np.float32):
        a_, x_ = a.astype(dtype), x.astype(dtype)
        wp = scipy.special.gammainc(a_.astype(np.float64), x_.astype(np.float64))
        centre = (wp > 1e-3) & (wp < 1 - 1e-3)
        for name, want in (("igamma", wp), ("igammac", 1 - wp)):
            got = _host(name, a_, x_).astype(np.float64)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6, err_msg=name)
            if dtype == np.float64:
                np.testing.assert_allclose(got[centre], want[centre], rtol=1e-9, err_msg=name)
            else:
                assert max_ulps(got[centre], want[centre], np.float32) <= 1.0, name


def test_snippets_pull_in_what_they_call():
    """A kernel gets the snippets its helpers call (igamma's derivatives and polygamma call
    digamma; all of them the shared constants and Stirling's correction), once each, and none
    it does not need."""
    igamma = special_source.helpers_for("t = plax_igamma(a0_v, a1_v);")
    assert igamma.index("#define PLAX_DIGAMMA\n") < igamma.index("#define PLAX_IGAMMA\n")
    assert igamma.index("#define PLAX_SF_COMMON\n") < igamma.index("#define PLAX_IGAMMA\n")
    assert "PLAX_ZETA" not in igamma and "PLAX_BETAINC" not in igamma
    beta = special_source.helpers_for("t = plax_betainc(a, b, x);")
    assert beta == special_source.SPECIAL_COMMON_SOURCE + special_source.BETA_SOURCE
    both = special_source.helpers_for("t = plax_zeta(s, q) + plax_random_gamma_grad(a, x);")
    assert both.count("#define PLAX_DIGAMMA\n") == 1 and both.count("#define PLAX_SF_COMMON\n") == 1
    assert "#define PLAX_IGAMMA\n" in both and "PLAX_BETAINC" not in both
    assert special_source.helpers_for("t = plax_igamma_like(a);") == ""
    src = codegen.plan_equation(make_eqn(lax.zeta_p, [Var(aval((4,), np.float32)),
                                                      Var(aval((4,), np.float32))])).source
    assert src.count("#define PLAX_ZETA\n") == 1 and "PLAX_BESSEL_IE" not in src


def test_no_fusible_primitive_lacks_a_device_form():
    assert codegen.WITHOUT_DEVICE_FORM == frozenset()


@requires_nvrtc
def test_iterative_kernels_compile_with_the_device_optimiser():
    """The float32 kernels (their forms call the double cores; the double overloads are in the
    unit too): the optimiser takes seconds per kernel on these, so not every dtype."""
    plans = [p for (_, d), p in _plans().items() if d == np.float32]
    source, _ = batch_source([p.source for p in plans])
    ptx = nvrtc.compile_ptx(source, "special_iterative.cu", options=nvrtc.NVRTC_OPTIONS)
    assert ptx.count(".entry") == len(plans)

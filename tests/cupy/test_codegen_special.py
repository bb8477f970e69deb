"""The generator's own device functions (``plax_cupy.special_source``), checked without a GPU:
the kernels' source built for the host (``-DPLAX_HOST``, g++) against NumPy/SciPy float64.

* complex ``asin``, ``acos``, ``atan``, ``asinh``, ``acosh``, ``atanh`` (complex64 and
  complex128) on a dense grid of every pair of parts from +-0, subnormals, the smallest normal,
  magnitudes from 1e-30 to the largest finite, values beside 1 and the branch points,
  +-inf and NaN, plus random ones: each part within a few ulps of NumPy's complex128 result,
  NaN where NumPy's is NaN, infinities and signed zeros equal (branch cuts included);
* ``bessel_i0e``/``bessel_i1e`` and ``digamma`` on float16, bfloat16, float32 and float64
  against SciPy in float64 (digamma left of 0 against the reflection formula in long double,
  SciPy's own being ~1e-12 off next to the poles), edge values included;
* NVRTC compiles the kernels with the device optimiser on (launched kernels are built so).
"""
from __future__ import annotations

import ctypes
import itertools

import ml_dtypes
import numpy as np
import pytest
import scipy.special

from plax import lax
from plax.lax import bessel_series
from plax.core.jaxpr import Var

from gpu_env import requires_nvrtc
from kernel_source_util import HAVE_CXX, aval, batch_source, make_eqn
from plax_cupy import codegen, nvrtc, special_source

needs_cxx = pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler (g++) for the host check")

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]
INVERSE = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh,
           "acosh": np.arccosh, "atanh": np.arctanh}


def _plan(prim, dtype):
    return codegen.plan_equation(make_eqn(prim, [Var(aval((1,), dtype))]))


def _all_plans() -> dict:
    """``{(primitive name, dtype): plan}`` of every kernel this file checks."""
    plans = {(name, np.dtype(d)): _plan(getattr(lax, f"{name}_p"), d)
             for name in INVERSE for d in (np.complex64, np.complex128)}
    plans.update({(name, d): _plan(getattr(lax, f"{name}_p"), d)
                  for name in ("digamma", "bessel_i0e", "bessel_i1e") for d in FLOATS})
    return plans


_HOST: dict = {}


def _host(prim, x):
    """``prim`` of ``x`` by its generated kernel, built for the host: all of this file's
    kernels in one unit, compiled once (a lone elementwise kernel reads its extent ``n``, so
    the plans of shape (1,) serve any size)."""
    if not _HOST:
        plans = _all_plans()
        source, suffixes = batch_source([p.source for p in plans.values()])
        lib = nvrtc.compile_host(source)
        _HOST.update({key: getattr(lib, "plax_host" + sfx) for key, sfx in zip(plans, suffixes)})
    fn = _HOST[(prim.name, np.dtype(x.dtype))]
    x = np.ascontiguousarray(x)
    out = np.empty(x.shape, x.dtype)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong]
    fn.restype = None
    fn(x.ctypes.data, out.ctypes.data, x.size)
    return out


def _finfo(dtype):
    return ml_dtypes.finfo(dtype) if dtype == BF16 else np.finfo(dtype)


# ---------------------------------------------------------------- complex inverse functions

def _complex_grid(dtype) -> np.ndarray:
    part = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
    fi = np.finfo(part)
    mags = [0.0, float(fi.smallest_subnormal), float(fi.tiny), 1e-30, 1e-10, 1e-5, 0.1, 0.5,
            0.9, 0.99999, 1.0, 1.00001, 1.1, 1.5, 2.0, 10.0, 1e5, 1e10, 1e18, 1e30,
            float(fi.max) / 4, float(fi.max), np.inf]
    mags = sorted(set(np.array(mags).astype(part).tolist()))
    parts = [s * m for m in mags for s in (1.0, -1.0)] + [np.nan]
    xs, ys = (np.array(v, part) for v in zip(*itertools.product(parts, parts)))
    rng = np.random.default_rng(0)
    rand = [rng.uniform(-3, 3, 3000),
            10.0 ** rng.uniform(-20, 20, 1500) * rng.choice([-1.0, 1.0], 1500)]
    rx = np.concatenate(rand).astype(part)
    ry = np.concatenate([rng.uniform(-3, 3, 3000),
                         10.0 ** rng.uniform(-20, 20, 1500) * rng.choice([-1.0, 1.0], 1500)]).astype(part)
    z = np.empty(xs.size + rx.size, dtype)
    z.real, z.imag = np.concatenate([xs, rx]), np.concatenate([ys, ry])
    return z


def _assert_parts_match(got, want, name):
    """Part by part: NaN where ``want`` is NaN, equal infinities and signed zeros, finite
    values within 4 ulps of the part (or 4 subnormals near underflow)."""
    part = got.real.dtype
    fi = np.finfo(part)
    for label, p in (("real", np.real), ("imag", np.imag)):
        g, w = p(got).astype(np.float64), p(want)
        problems = []
        nan = np.isnan(g) != np.isnan(w)
        problems.append(("NaN", nan))
        both = ~np.isnan(g) & ~np.isnan(w)
        inf = both & (np.isinf(g) | np.isinf(w)) & (g != w)
        problems.append(("infinity", inf))
        zero = both & ((g == 0) | (w == 0)) & (np.signbit(g) != np.signbit(w))
        problems.append(("sign", zero))
        fin = both & np.isfinite(w) & np.isfinite(g)
        with np.errstate(invalid="ignore"):
            far = fin & ~(np.abs(g - w) <= 4 * fi.eps * np.abs(w) + 4 * float(fi.smallest_subnormal))
        problems.append(("value", far))
        for what, bad in problems:
            idx = np.flatnonzero(bad)[:5]
            assert not idx.size, (f"{name} {label} part, {what}: {bad.sum()} differ: got "
                                  f"{got[idx]}, want {want[idx]}")


@needs_cxx
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", list(INVERSE))
def test_complex_inverse_functions_match_numpy_complex128(name, dtype):
    z = _complex_grid(np.dtype(dtype))
    got = _host(getattr(lax, f"{name}_p"), z)
    assert got.dtype == z.dtype
    with np.errstate(all="ignore"):
        want = INVERSE[name](z.astype(np.complex128))
    _assert_parts_match(got, want, name)


@needs_cxx
def test_complex_inverse_branch_cuts_follow_the_sign_of_zero():
    """On the cuts (real axis beyond +-1 for asin/acos/atanh, imaginary axis beyond +-i for
    asinh/atan, real axis below 1 for acosh) the side is the sign of the zero part."""
    cuts = {"asin": [(2.0, 0), (-3.0, 0)], "acos": [(2.0, 0), (-3.0, 0)],
            "atanh": [(2.0, 0), (-3.0, 0)], "acosh": [(0.5, 0), (-2.0, 0)],
            "asinh": [(0, 2.0), (0, -3.0)], "atan": [(0, 2.0), (0, -3.0)]}
    for name, points in cuts.items():
        for (re, im), zero in itertools.product(points, (0.0, -0.0)):
            z = np.empty(1, np.complex128)
            z.real, z.imag = (re, zero) if im == 0 else (zero, im)
            got, want = _host(getattr(lax, f"{name}_p"), z), INVERSE[name](z)
            np.testing.assert_allclose(got, want, rtol=1e-15, err_msg=f"{name}({z[0]})")
            assert np.signbit(got.real) == np.signbit(want.real), (name, z, got, want)
            assert np.signbit(got.imag) == np.signbit(want.imag), (name, z, got, want)


# ---------------------------------------------------------------- real special functions

def _real_grid(dtype) -> np.ndarray:
    rng = np.random.default_rng(1)
    x = np.concatenate([np.linspace(-200, 200, 8001), rng.uniform(-30, 30, 4000),
                        10.0 ** rng.uniform(-30, 30, 1000) * rng.choice([-1.0, 1.0], 1000),
                        [0.0, -0.0, 12.0, -12.0, 22.0, -22.0, 1e-300, 5e-324, 1e308,
                         np.inf, -np.inf, np.nan]])
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def _round_to(want, dtype):
    """A float64 reference as ``dtype``'s value (what a correctly rounded result would be)."""
    with np.errstate(over="ignore", under="ignore"):
        return want.astype(dtype).astype(np.float64)


def _assert_within_ulps(got, want, dtype, ulps, atol=0.0, what=""):
    g = got.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(want), err_msg=f"{what}: NaN")
    inf = np.isinf(want) | np.isinf(g)
    np.testing.assert_array_equal(g[inf], want[inf], err_msg=f"{what}: infinities")
    fin = np.isfinite(want) & np.isfinite(g)
    fi = _finfo(dtype)
    bound = ulps * float(fi.eps) * np.abs(want[fin]) + atol + float(fi.smallest_subnormal)
    err = np.abs(g[fin] - want[fin])
    worst = np.argmax(err - bound)
    assert (err <= bound).all(), (f"{what}: {(err > bound).sum()} beyond {ulps} ulps, e.g. "
                                  f"x -> {g[fin][worst]!r}, want {want[fin][worst]!r}")


@needs_cxx
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name, ref", [("bessel_i0e", scipy.special.i0e),
                                       ("bessel_i1e", scipy.special.i1e)])
def test_scaled_bessel_functions_match_scipy(name, ref, dtype):
    x = _real_grid(dtype)
    got = _host(getattr(lax, f"{name}_p"), x)
    assert got.dtype == x.dtype
    want = ref(x.astype(np.float64))
    if dtype == np.float64:  # SciPy's own float64 result is a few ulps off
        _assert_within_ulps(got, want, dtype, 16, what=name)
    else:  # float32, float16, bfloat16: the rounded value (float16/bfloat16 through float32)
        _assert_within_ulps(got, _round_to(want, dtype), dtype, 1, what=name)
    # i0e even, i1e odd: +-0 at +-0 (as JAX; SciPy gives +0 for -0), 0 at +-inf, NaN for NaN
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan]).astype(dtype)
    e = _host(getattr(lax, f"{name}_p"), edges).astype(np.float64)
    odd = name == "bessel_i1e"
    assert e[0] == (0.0 if odd else 1.0) and e[1] == (0.0 if odd else 1.0)
    assert np.signbit(e[1]) == odd and not np.signbit(e[0])
    assert e[2] == 0 and e[3] == 0 and np.signbit(e[3]) == odd and np.isnan(e[4])


def _digamma_reference(x: np.ndarray) -> np.ndarray:
    """psi in float64: SciPy right of 0; left of it the reflection psi(1 - x) - pi cot(pi x)
    in long double (x - round(x) is exact); NaN at the poles and -inf (XLA's convention)."""
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        want = scipy.special.psi(x)
        neg = x < 0
        ld = np.longdouble
        pi = ld("3.14159265358979323846264338327950288")
        frac = x[neg].astype(ld) - np.rint(x[neg]).astype(ld)
        want[neg] = (scipy.special.psi(1 - x[neg]).astype(ld) - pi / np.tan(pi * frac)).astype(np.float64)
    want[(x <= 0) & (x == np.floor(x))] = np.nan
    want[x == -np.inf] = np.nan
    return want


@needs_cxx
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_digamma_matches_the_reference(dtype):
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.uniform(-60, 60, 6000), 10.0 ** rng.uniform(-40, 300, 1000),
                        np.linspace(3.99, 64, 30001),  # float32's single-precision range
                        -np.arange(50.0), -np.arange(50.0) - 0.5, -np.arange(1.0, 50.0) + 1e-6,
                        1.4616321449683622 + np.linspace(-1e-6, 1e-6, 11),
                        [0.0, -0.0, 1e-300, np.inf, -np.inf, np.nan]])
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    got = _host(lax.digamma_p, x)
    assert got.dtype == x.dtype
    want = _digamma_reference(x)
    if dtype == np.float64:
        # relative error of a few ulps, absolute next to the zeros (one at 1.4616..., one in
        # each negative unit interval, where psi(1 - x) ~ log|x| cancels)
        atol = 8 * np.finfo(np.float64).eps * (1 + np.log1p(np.abs(x.astype(np.float64))))
        fin = np.isfinite(want)
        g, w, a = got[fin], want[fin], atol[fin]
        assert (np.abs(g - w) <= 8 * np.finfo(np.float64).eps * np.abs(w) + a).all(), \
            np.max(np.abs(g - w) / (np.abs(w) + a))
        np.testing.assert_array_equal(got[~fin], want[~fin])
    else:  # float32 (single precision from 4 on: a few ulps), half types through it (rounded)
        ulps = 4 if dtype == np.float32 else 1
        _assert_within_ulps(got, _round_to(want, dtype), dtype, ulps, what="digamma")
    edge = _host(lax.digamma_p, np.array([0.0, -0.0, -1.0, -np.inf, np.inf, np.nan], dtype))
    assert np.isnan(edge[[0, 1, 2, 3, 5]].astype(np.float64)).all() and edge[4] == np.inf


@needs_cxx
def test_digamma_f64_below_4_is_relatively_accurate_near_its_zero():
    """float64 digamma on (0, 4) against SciPy: near the positive zero x0 = 1.4616... (within
    0.3) the Taylor series at x0 keeps the error relative, 2 ulps measured (the recurrence
    alone left ~1e-16 absolute there: 245588 ulps at x0 + 2e-6); elsewhere below 4 the
    recurrence's cancellation, 24 ulps measured."""
    x = np.concatenate([np.linspace(1e-3, 4, 40001),
                        special_source.PSI_ROOT_HI + np.linspace(-1e-9, 1e-9, 201),
                        special_source.PSI_ROOT_HI + np.linspace(-0.299, 0.299, 4001)])
    got = _host(lax.digamma_p, x)
    want = scipy.special.psi(x)
    near = np.abs(x - special_source.PSI_ROOT_HI) < special_source.PSI_ROOT_BAND
    _assert_within_ulps(got[near], want[near], np.dtype(np.float64), 4, what="digamma near x0")
    _assert_within_ulps(got, want, np.dtype(np.float64), 32, what="digamma below 4")


def test_digamma_root_series_coefficients_are_hurwitz_zeta_values():
    """c_k = (-1)**(k+1) zeta(k + 1, x0), computed by the generator, against SciPy's zeta."""
    x0 = special_source.PSI_ROOT_HI + special_source.PSI_ROOT_LO
    got = np.array(special_source.psi_root_coefficients())
    k = np.arange(1, len(got) + 1)
    want = (-1.0) ** (k + 1) * scipy.special.zeta(k + 1.0, x0)
    np.testing.assert_allclose(got, want, rtol=2e-15)
    assert abs(scipy.special.psi(special_source.PSI_ROOT_HI) - got[0] * -special_source.PSI_ROOT_LO) < 1e-30


# ---------------------------------------------------------------- source and NVRTC

def test_helpers_are_included_only_where_called():
    z = np.ones(4, np.complex64)
    plain = codegen.plan_equation(make_eqn(lax.exp_p, [Var(aval(z.shape, z.dtype))])).source
    assert plain == plain.replace(special_source.COMPLEX_INVERSE_SOURCE, "")
    src = codegen.plan_equation(make_eqn(lax.acosh_p, [Var(aval(z.shape, z.dtype))])).source
    assert src.count("#define PLAX_COMPLEX_INVERSE") == 1 and "PLAX_DIGAMMA" not in src
    x = np.ones(4, np.float32)
    src = codegen.plan_equation(make_eqn(lax.bessel_i1e_p, [Var(aval(x.shape, x.dtype))])).source
    assert "#define PLAX_BESSEL_IE" in src and "PLAX_COMPLEX_INVERSE" not in src


def test_bessel_coefficients_are_the_exact_rationals_rounded():
    # 1 / (k! (k+1)! 2) and a_k(1) = prod_j (4 - (2j - 1)^2) / (k! 8^k), signs alternating
    assert bessel_series.series_coefficients(1, 3) == [0.5, 0.25, 1 / 24]
    assert bessel_series.hankel_coefficients(1, 3) == [1.0, -0.375, -0.1171875]


@requires_nvrtc
def test_special_kernels_compile_with_the_device_optimiser():
    plans = list(_all_plans().values())
    source, _ = batch_source([p.source for p in plans])
    ptx = nvrtc.compile_ptx(source, "special.cu", options=nvrtc.NVRTC_OPTIONS)
    assert ptx.count(".entry") == len(plans)

"""Kernel-table paths that ran CuPy's own (flushing) kernels keep float32 subnormals (issue 24).

CuPy compiles its elementwise and reduction kernels with ``-ftz=true``: a float32 subnormal
operand or result becomes a zero. ``eig``'s eigenvector normalisation (``sqrt``, sums,
``abs``, ``argmax``, division) and the special functions' table kernels
(``cupyx.scipy.special`` ufuncs with CuPy masks) ran there; both are plax-compiled kernels
now (``-ftz=false``). On the simulated GPU (``tests/cupy/fake_cupy.py``), whose CuPy kernels
flush float32 subnormals as a GPU's do (``fake_cupy_api.FLUSHES_FLOAT32``, every
``cupyx.scipy.special`` function):

* each moved path keeps subnormal inputs and results, at NumPy's/SciPy's float64 values
  rounded to float32, and compiles through plax's own NVRTC call with ``-ftz=false``;
* the negative controls run the previous CuPy formulas on the same inputs and see them flushed,
  so the checks above can fail.

Nothing here needs JAX (the launcher asserts that nothing but itself skips in the child).
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from gpu_env import NVRTC_PROBLEM
from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu

TINY = np.finfo(np.float32).tiny


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    # skipped there: this launcher and the real-NVRTC check
    run_file_on_simulated_gpu(__file__, skipped=2)


@pytest.mark.skipif(SIMULATED or bool(NVRTC_PROBLEM), reason=NVRTC_PROBLEM or "simulated NVRTC")
def test_the_moved_kernels_compile_with_nvrtc_without_flush_to_zero():
    # the real NVRTC (no GPU needed), plax's device options: no warning, no .ftz arithmetic
    from plax import lax
    from plax.lax import special as L
    from plax_cupy import codegen, kernels_elementwise, kernels_linalg, kernels_reduction, \
        kernels_windows, nvrtc
    sources = [kernels_linalg.UNIT_COLUMNS_SOURCE,
               kernels_elementwise.elementwise_source("a0 * a0", ("float",), "float")[0]]
    from plax.core.jaxpr import JaxprEqn, Var
    from plax.core.shaped_array import ShapedArray
    for prim, arity in ((L.erf_p, 1), (L.digamma_p, 1), (L.polygamma_p, 2), (lax.conj_p, 1)):
        dtype = np.complex64 if prim is lax.conj_p else np.float32
        avals = [ShapedArray((3,), np.dtype(dtype))] * arity
        out = prim.abstract_eval(*avals)
        out = out[0] if isinstance(out, (list, tuple)) else out
        expr = codegen.elementwise_expr(JaxprEqn(prim, [Var(a) for a in avals], [Var(out)], {}),
                                        [f"a{i}" for i in range(arity)])
        ctype = "plax_c64" if prim is lax.conj_p else "float"
        sources.append(kernels_elementwise.elementwise_source(expr, (ctype,) * arity, ctype)[0])
    for which in ("sum", "max", "min"):
        sources.append(kernels_windows.window_source(which, np.float32, (4, 6), (4, 2), (2, 3),
                                                     (1, 2), ((1, -1), (2, 0)), (2, 1), (1, 2))[0])
    sources.append(kernels_windows.window_source("sum", np.complex64, (5,), (4,), (2,), (1,),
                                                 ((0, 0),), (1,), (1,))[0])
    for kind, dtype in (("sum", np.float32), ("prod", np.float32), ("max", np.float32),
                        ("min", np.float32), ("sum", np.complex64), ("prod", np.complex64),
                        ("max", np.complex64), ("min", np.complex128)):
        sources.append(kernels_reduction.row_reduce_source(kind, dtype)[0])
    # the convolution's kernel (its subnormal partial sums), float16/bfloat16 nextafter on the
    # bits, float32/complex64 to bool
    from plax.lax.convolution import ConvDimensionNumbers
    from plax_cupy import kernels_convolution, kernels_precision
    ident = ConvDimensionNumbers((0, 1, 2), (0, 1, 2), (0, 1, 2))
    for dtype in (np.float32, np.complex64):
        sources.append(kernels_convolution.conv_source(
            dtype, dtype, dtype, (1, 2, 6), (2, 2, 3), (1, 2, 4), window_strides=(1,),
            padding=((0, 0),), lhs_dilation=(1,), rhs_dilation=(1,), dimension_numbers=ident,
            feature_group_count=1, batch_group_count=1)[0])
    for expr in kernels_precision._NEXTAFTER_16.values():
        sources.append(kernels_elementwise.elementwise_source(expr, ("unsigned short",) * 2,
                                                              "unsigned short")[0])
    for dtype, ctype in ((np.float32, "float"), (np.complex64, "plax_c64")):
        expr = codegen.convert_expr("a0", dtype, np.bool_)
        sources.append(kernels_elementwise.elementwise_source(expr, (ctype,), "bool")[0])
    for source in sources:   # (elementwise sources carry the special_source helpers they call)
        unit = codegen.PREAMBLE + source
        ptx = nvrtc.compile_binary(unit, nvrtc.DEVICE_OPTIONS + ("-arch=compute_80",),
                                   "ptx").decode()
        # (CUDA's math library seeds some functions with .approx.ftz on range-reduced
        # arguments whatever -ftz says; the check is on the arithmetic and comparisons)
        flushing = [line for line in ptx.splitlines() if ".ftz" in line and ".approx.ftz" not in line]
        assert not flushing, (flushing[:3], source[:300])
        nvrtc.compile_ptx(unit, options=nvrtc.DEVICE_OPTIONS + ("-arch=compute_80",))  # no warning


def _plax_compiles_since(start: int) -> list:
    import fake_nvrtc
    return fake_nvrtc.COMPILES[start:]


def _all_without_ftz(records) -> bool:
    import fake_nvrtc
    return all(r["via"] == "nvrtc" and "-ftz=false" in r["options"]
               and fake_nvrtc.flushes_subnormals(r["options"]) is False for r in records)


# ---------------------------------------------------------------- eig's normalisation

def _lapack_unit_columns(v: np.ndarray) -> np.ndarray:
    """LAPACK's normalisation of eigenvector columns in float64 (the reference): unit 2-norm,
    the largest-magnitude component turned real and positive unless it is real."""
    v = v.astype(np.complex128)
    norms = np.sqrt((np.abs(v) ** 2).sum(axis=-2, keepdims=True))
    v = v / np.where(norms == 0, 1.0, norms)
    big = np.argmax(np.abs(v) ** 2, axis=-2)[..., None, :]
    pivot = np.take_along_axis(v, big, axis=-2)
    turn = (pivot.imag != 0) & (pivot != 0)
    v = v * np.where(turn, np.conj(pivot) / np.where(turn, np.abs(pivot), 1.0), 1.0)
    # (geev sets the turned pivot's imaginary part to zero rather than keep rounding's residue)
    rows = np.arange(v.shape[-2])[:, None]
    return np.where(turn & (rows == big), v.real + 0j, v)


#: three 3-vectors as columns: a unit vector with subnormal components, a vector whose norm is
#: subnormal (every component subnormal), a complex one to be turned; then a zero column's batch
COLUMNS = np.array([[[1.0 + 0j, 3e-39 + 0j, 0.0 + 0j],
                     [2e-39 - 1e-40j, 2e-39 + 0j, 0.0 + 0j],
                     [-5e-40 + 0j, 1e-45 + 4e-39j, 0.0 + 0j]],
                    [[0.5j, 0.25 + 0j, 1e-38 + 0j],
                     [-0.5 + 0j, 1e-39 + 0j, 0.0 + 0j],
                     [3e-39 + 2e-39j, 0.0 + 0j, 1e-38 + 0j]]], np.complex64)


@on_simulated_gpu
@pytest.mark.parametrize("conjugate", [False, True], ids=["right", "left"])
def test_eig_normalisation_keeps_subnormals(conjugate):
    import cupy
    from plax_cupy import kernels_linalg
    start = len(__import__("fake_nvrtc").COMPILES)
    got = cupy.asnumpy(kernels_linalg._unit_columns(cupy.asarray(COLUMNS), conjugate=conjugate))
    want = _lapack_unit_columns(np.conj(COLUMNS) if conjugate else COLUMNS)
    assert got.dtype == np.complex64
    # each part to float32's rounding, subnormals included (their spacing is 1.4e-45)
    for part in (np.real, np.imag):
        np.testing.assert_allclose(part(got), part(want), rtol=2e-6, atol=3e-45)
    # the subnormal components survived (flushed, they would be exact zeros)
    small = (np.abs(want.real) < TINY) & (np.abs(want.real) > 1e-44)
    assert small.sum() >= 4 and np.all(got.real[small] != 0), got
    # the vector of subnormal norm became a unit vector (flushed: a zero or NaN column)
    np.testing.assert_allclose(np.linalg.norm(got[0, :, 1].astype(np.complex128)), 1.0, rtol=1e-6)
    # the turned pivot is exactly real
    assert got[1, 0, 0].imag == 0 and got[1, 0, 0].real > 0
    assert _all_without_ftz(_plax_compiles_since(start))


@on_simulated_gpu
def test_eig_of_a_matrix_with_subnormal_eigenvector_components():
    # a = [[1, t], [0, 2]]: the eigenvector of 2 is (t, 1) with t subnormal; the left
    # eigenvector of 1 is (1, -t) -- both keep t
    import plax
    from plax import lax
    import plax_cupy
    t = np.float32(3e-39)
    a = np.array([[1.0, t], [0.0, 2.0]], np.float32)
    x = plax.device_put(a, plax.devices("gpu")[0])
    with plax_cupy.count() as c:
        w, vl, vr = lax.linalg.eig(x, compute_left_eigenvectors=True,
                                   compute_right_eigenvectors=True)
        w, vl, vr = np.asarray(w), np.asarray(vl), np.asarray(vr)
    assert c.host_fallbacks == 0, c.fallbacks
    order = np.argsort(w.real)
    w, vl, vr = w[order], vl[:, order], vr[:, order]
    np.testing.assert_allclose(w, [1.0, 2.0], rtol=1e-6)
    a64 = a.astype(np.float64)
    # eigenvectors up to their normalisation: a vr = vr diag(w), vl^H a = diag(w) vl^H
    np.testing.assert_allclose(a64 @ vr, vr * w, rtol=1e-6, atol=1e-45)
    np.testing.assert_allclose(vl.conj().T @ a64, w[:, None] * vl.conj().T, rtol=1e-6, atol=1e-45)
    # the subnormal components, at their float64 values (flushed they would be zeros)
    assert vr[0, 1].real != 0 and vl[1, 0].real != 0, (vr, vl)
    np.testing.assert_allclose(abs(vr[0, 1].real), t / np.hypot(1.0, float(t)), rtol=1e-5)
    np.testing.assert_allclose(abs(vl[1, 0].real), t / np.hypot(1.0, float(t)), rtol=1e-5)
    np.testing.assert_allclose(np.abs(vr).max(axis=0), 1.0, rtol=1e-6)


@on_simulated_gpu
def test_cupys_own_normalisation_flushes_subnormals():
    # the negative control: the previous CuPy formula (sqrt of summed squares, division) on
    # the simulated GPU zeroes the subnormal components and turns a subnormal-norm column
    # into NaN or zeros, so the checks above can fail
    import cupy
    v = cupy.asarray(COLUMNS)
    norms = cupy.sqrt((v.real ** 2 + v.imag ** 2).sum(axis=-2, keepdims=True))
    got = cupy.asnumpy(v / cupy.where(norms == 0, cupy.ones((), norms.dtype), norms))
    assert got[0, 1, 0] == 0 and got[0, 2, 0] == 0       # 2e-39 and -5e-40 flushed
    assert not np.any(np.abs(got[0, :, 1]) > 0.5)          # the subnormal-norm column is lost


# ---------------------------------------------------------------- special functions' table

#: float32 subnormal arguments (and one normal value) for the table kernels
X = np.array([1e-39, -2e-39, 1e-44, 3e-39, 0.25], np.float32)


def _special_cases():
    """``(primitive, operands, SciPy float64 reference)`` of each table kernel moved off
    ``cupyx.scipy.special``, on float32 operands with subnormals."""
    import scipy.special as sp
    from plax.lax import special as L
    from plax.lax import special_functions as S
    x = X.astype(np.float64)
    pos = np.abs(X)
    ones = np.ones_like(X)
    twos = np.full_like(X, 2.0)
    return [
        (L.erf_p, (X,), sp.erf(x)),
        (L.erfc_p, (X,), sp.erfc(x)),
        (L.erf_inv_p, (X,), sp.erfinv(x)),
        (L.lgamma_p, (pos,), sp.gammaln(pos.astype(np.float64))),
        (L.digamma_p, (X,), sp.digamma(x)),
        (L.polygamma_p, (ones, X), sp.polygamma(1, x)),
        (S.igamma_p, (ones, pos), sp.gammainc(1.0, pos.astype(np.float64))),
        (S.igammac_p, (ones, pos), sp.gammaincc(1.0, pos.astype(np.float64))),
        (S.regularized_incomplete_beta_p, (ones, ones, pos), sp.betainc(1.0, 1.0, pos.astype(np.float64))),
        (S.zeta_p, (twos, np.float32(1.0) + pos), sp.zeta(2.0, 1.0 + pos.astype(np.float64))),
        (S.bessel_i0e_p, (X,), sp.i0e(x)),
        (S.bessel_i1e_p, (X,), sp.i1e(x)),
    ]


@on_simulated_gpu
def test_special_table_kernels_keep_subnormals(tmp_path, monkeypatch):
    import cupy
    from plax_cupy import kernel_modules, kernels
    monkeypatch.setenv("PLAX_CUPY_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setattr(kernel_modules, "_modules", {})
    start = len(__import__("fake_nvrtc").COMPILES)
    table = kernels.impls()
    kept = 0
    for prim, operands, want in _special_cases():
        got = cupy.asnumpy(table[prim](*(cupy.asarray(np.asarray(o, np.float32)) for o in operands)))
        assert got.dtype == np.float32, prim.name
        with np.errstate(over="ignore"):   # (digamma's -1/x beyond float32: -inf, as on a GPU)
            want32 = want.astype(np.float32)
        np.testing.assert_allclose(got, want32, rtol=2e-6, atol=3e-45, err_msg=prim.name)
        # a subnormal result (erf, erf_inv, i1e, igamma, betainc) is kept, not zeroed; a pole
        # reached by a flushed argument (digamma, lgamma, polygamma) would give NaN or inf
        subnormal = (np.abs(want32) < TINY) & (want32 != 0)
        assert np.all(got[subnormal] != 0), (prim.name, got)
        kept += int(subnormal.sum())
    assert kept >= 10
    compiles = _plax_compiles_since(start)
    assert compiles and _all_without_ftz(compiles)


@on_simulated_gpu
def test_special_table_kernels_float16_and_float64():
    # the other dtypes through the same kernels: float16 through float32, float64 as is
    import cupy
    import scipy.special as sp
    from plax.lax import special as L
    from plax_cupy import kernels
    table = kernels.impls()
    x = np.array([0.5, -0.25, 2.0], np.float64)
    for dtype in (np.float16, np.float64):
        got = cupy.asnumpy(table[L.erf_p](cupy.asarray(x.astype(dtype))))
        assert got.dtype == dtype
        np.testing.assert_allclose(got, sp.erf(x).astype(dtype), rtol=np.finfo(dtype).eps * 2)


@on_simulated_gpu
def test_cupys_special_functions_flush_subnormals():
    # the negative control: the previous path (cupyx.scipy.special) flushes on the simulated
    # GPU as CuPy's kernels do on a GPU: erf of a subnormal is zero, digamma's a NaN
    import cupy
    import cupyx.scipy.special as csp
    x = cupy.asarray(X[:2])
    assert np.all(cupy.asnumpy(csp.erf(x)) == 0)
    assert np.all(np.isnan(cupy.asnumpy(csp.digamma(x))) | np.isinf(cupy.asnumpy(csp.digamma(x))))


# ---------------------------------------------------------------- windows, square, conv, conj

#: a float32 row whose windows of two hold subnormals only (sums, maxima and minima subnormal)
ROW = np.array([1e-39, 2e-39, -3e-39, 0.0, 5e-39, -1e-45, 0.5], np.float32)


def _window_reference(x: np.ndarray, which: str, **params) -> np.ndarray:
    from plax.lax.windows import reduce_window_array
    wide = np.complex128 if x.dtype.kind == "c" else np.float64
    return reduce_window_array(x.astype(wide), which, **params).astype(x.dtype)


WINDOW = dict(window_dimensions=(2,), window_strides=(1,), padding=((1, 1),), base_dilation=(1,),
              window_dilation=(1,))


@on_simulated_gpu
@pytest.mark.parametrize("which", ["sum", "max", "min"])
def test_window_reductions_keep_subnormals(which):
    import cupy
    from plax.lax import windows as W
    from plax_cupy import kernels
    prim = {"sum": W.reduce_window_sum_p, "max": W.reduce_window_max_p,
            "min": W.reduce_window_min_p}[which]
    start = len(__import__("fake_nvrtc").COMPILES)
    got = cupy.asnumpy(kernels.impls()[prim](cupy.asarray(ROW), **WINDOW))
    want = _window_reference(ROW, which, **WINDOW)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.count_nonzero(np.abs(got[got != 0]) < TINY) >= 3   # subnormal results kept
    # a 2-d window with base and window dilation and negative padding, and complex64 sums
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 6)) * 1e-38).astype(np.float32)
    params = dict(window_dimensions=(2, 3), window_strides=(1, 2), padding=((1, -1), (2, 0)),
                  base_dilation=(2, 1), window_dilation=(1, 2))
    got = cupy.asnumpy(kernels.impls()[prim](cupy.asarray(x), **params))
    np.testing.assert_allclose(got, _window_reference(x, which, **params), rtol=1e-6, atol=3e-45)
    if which == "sum":
        z = (x + 1j * x[::-1]).astype(np.complex64)
        got = cupy.asnumpy(kernels.impls()[prim](cupy.asarray(z), **params))
        np.testing.assert_allclose(got, _window_reference(z, "sum", **params), rtol=1e-6,
                                   atol=3e-45)
    assert _all_without_ftz(_plax_compiles_since(start))


@on_simulated_gpu
def test_window_reduction_under_jit_and_the_flushing_control():
    # through plax (lax.reduce_window under jit) on the device; and the previous path, the
    # core's reduce_window_array on CuPy's reductions, flushes on the simulated GPU
    import cupy
    import plax
    from plax import lax
    from plax.lax.windows import reduce_window_array
    import plax_cupy
    x = plax.device_put(ROW, plax.devices("gpu")[0])
    f = plax.jit(lambda x: lax.reduce_window(x, 0.0, lax.add, (2,), (1,), "VALID"))
    with plax_cupy.count() as c:
        got = np.asarray(f(x))
    assert c.host_fallbacks == 0, c.fallbacks
    want = np.array([ROW[i] + np.float64(ROW[i + 1]) for i in range(len(ROW) - 1)], np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    flushed = cupy.asnumpy(reduce_window_array(cupy.asarray(ROW), "sum", xp=cupy, **WINDOW))
    assert flushed[1] == 0 and flushed[2] == 0      # 1e-39 and 1e-39 + 2e-39 lost


#: float32 values whose squares and pairwise products are subnormal (1e-20^2 = 1e-40)
SMALL = np.array([1e-20, -2e-20, 3e-21, 1.5e-19, 2.0], np.float32)


@on_simulated_gpu
def test_square_keeps_subnormal_results():
    import cupy
    from plax.lax.extra_elementwise import square_p
    from plax_cupy import kernels
    got = cupy.asnumpy(kernels.impls()[square_p](cupy.asarray(SMALL)))
    want = (SMALL.astype(np.float64) ** 2).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.all(got[:4] != 0)
    x = cupy.asarray(SMALL)
    assert np.all(cupy.asnumpy(x * x)[:3] == 0)     # the control: CuPy's product flushes


@on_simulated_gpu
def test_convolution_accumulates_subnormal_partial_sums():
    # a 1-d convolution of width 3 (one product per kernel offset, summed): every product and
    # partial sum is subnormal
    import plax
    from plax import lax
    import plax_cupy
    lhs = (SMALL[:4] * np.float32(1.0)).reshape(1, 1, 4)                    # (N, C, W)
    rhs = np.array([1e-20, 2e-20, -1e-20], np.float32).reshape(1, 1, 3)     # (O, I, W)
    gpu = plax.devices("gpu")[0]
    with plax_cupy.count() as c:
        got = np.asarray(lax.conv_general_dilated(plax.device_put(lhs, gpu),
                                                  plax.device_put(rhs, gpu), (1,), "VALID"))
    assert c.host_fallbacks == 0, c.fallbacks
    l64, r64 = lhs.astype(np.float64)[0, 0], rhs.astype(np.float64)[0, 0]
    want = np.array([sum(l64[i + k] * r64[k] for k in range(3)) for i in range(2)])
    np.testing.assert_allclose(got[0, 0], want, rtol=1e-5)
    assert np.all(got != 0)


@on_simulated_gpu
def test_triangular_solve_conjugates_without_flushing():
    # conj(a) x = b with a subnormal imaginary part on a's diagonal: x keeps it
    import plax
    from plax import lax
    a = np.array([[1 + 3e-39j, 0], [0.5, 1]], np.complex64)
    b = np.array([[1], [1]], np.complex64)
    gpu = plax.devices("gpu")[0]
    got = np.asarray(lax.linalg.triangular_solve(plax.device_put(a, gpu), plax.device_put(b, gpu),
                                                 left_side=True, lower=True, conjugate_a=True))
    want = np.linalg.solve(np.conj(a.astype(np.complex128)), b.astype(np.complex128))
    np.testing.assert_allclose(got.real, want.real, rtol=1e-6)
    np.testing.assert_allclose(got.imag, want.imag, rtol=1e-5, atol=3e-45)
    assert got[0, 0].imag != 0 and abs(got[0, 0].imag) < TINY


@on_simulated_gpu
def test_table_reductions_keep_subnormals():
    # the kernel table's reductions (what runs where the generator declines an equation)
    import cupy
    from plax import lax
    from plax_cupy import kernels
    table = kernels.impls()
    x = np.array([[1e-39, 2e-39, -5e-40], [-1e-39, -2e-39, -3e-39], [1e-20, 1e-20, 1.0]],
                 np.float32)
    x64 = x.astype(np.float64)
    cases = [(lax.reduce_sum_p, x64.sum(axis=1)), (lax.reduce_prod_p, x64.prod(axis=1)),
             (lax.reduce_max_p, x64.max(axis=1)), (lax.reduce_min_p, x64.min(axis=1))]
    for prim, want in cases:
        got = cupy.asnumpy(table[prim](cupy.asarray(x), axes=(1,)))
        np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6, atol=3e-45,
                                   err_msg=prim.name)
        assert got[0] != 0 and got[1] != 0 or prim is lax.reduce_prod_p, (prim.name, got)
    # a product of normal values that is subnormal (1e-20 * 1e-20), over several axes
    got = cupy.asnumpy(table[lax.reduce_prod_p](cupy.asarray(x[2:].reshape(1, 3, 1)), axes=(1, 2)))
    np.testing.assert_allclose(got, [np.float32(1e-40)], rtol=1e-5)
    z = (x + 1j * x[::-1]).astype(np.complex64)
    got = cupy.asnumpy(table[lax.reduce_sum_p](cupy.asarray(z), axes=(0,)))
    np.testing.assert_allclose(got, z.astype(np.complex128).sum(axis=0).astype(np.complex64),
                               rtol=1e-6, atol=3e-45)
    assert np.all(got.imag != 0)
    flushed = cupy.asnumpy(cupy.asarray(x).sum(axis=1))    # the control: CuPy's sum flushes
    assert flushed[0] == 0 and flushed[1] == 0


@on_simulated_gpu
def test_bfloat16_window_sum_keeps_subnormals():
    # bfloat16 reaches the window kernel widened to float32 (its subnormals are float32's)
    import ml_dtypes
    import plax
    from plax import lax
    bf16 = np.dtype(ml_dtypes.bfloat16)
    x = np.array([1e-39, 2e-39, 4e-39, 0.5], np.float32).astype(bf16)
    got = np.asarray(lax.reduce_window(plax.device_put(x, plax.devices("gpu")[0]),
                                       np.array(0, bf16), lax.add, (2,), (1,), "VALID"))
    want = (x[:-1].astype(np.float64) + x[1:].astype(np.float64)).astype(bf16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    assert np.all(got[:2].astype(np.float32) != 0)


@on_simulated_gpu
def test_float32_float64_conversions_keep_subnormals():
    # CuPy's astype between float32 and float64 flushes (cvt.ftz.f64.f32 under -ftz=true);
    # the mixed float32 x float64 product widens its float32 operand through plax's kernel
    import cupy
    from plax import lax
    from plax_cupy.kernels_elementwise import astype
    x = cupy.asarray(SUBNORMAL_PAIR)
    np.testing.assert_array_equal(cupy.asnumpy(astype(x, np.float64)),
                                  SUBNORMAL_PAIR.astype(np.float64))
    back = cupy.asnumpy(astype(cupy.asarray(SUBNORMAL_PAIR.astype(np.float64)), np.float32))
    np.testing.assert_array_equal(back.view(np.uint32), SUBNORMAL_PAIR.view(np.uint32))
    z = cupy.asnumpy(astype(x, np.complex128))
    np.testing.assert_array_equal(z.real, SUBNORMAL_PAIR.astype(np.float64))
    assert np.all(cupy.asnumpy(x.astype(np.float64))[:2] == 0)   # the control: CuPy's flushes
    # (the table's kernel: mixed operands reach it with x64 on)
    from plax_cupy import kernels
    a = cupy.asarray(SUBNORMAL_PAIR.reshape(1, 3))
    b = cupy.asarray(np.array([[1.0], [2.0], [0.0]]))
    got = cupy.asnumpy(kernels.impls()[lax.dot_general_p](
        a, b, dimension_numbers=(((1,), (0,)), ((), ())), precision=None,
        preferred_element_type=None))
    assert got.dtype == np.float64
    want = SUBNORMAL_PAIR.astype(np.float64) @ np.array([1.0, 2.0, 0.0])
    np.testing.assert_allclose(got[0, 0], want, rtol=1e-12)
    assert got[0, 0] != 0


#: float32 subnormals and a normal value
SUBNORMAL_PAIR = np.array([3e-39, -1e-40, 0.5], np.float32)

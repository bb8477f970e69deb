"""``argmax``/``argmin`` and the cumulative ops fused with the elementwise chain producing
their operand (:func:`plax_numba.codegen_scan.fused_arg`, ``fused_cumulative``): the
program is one kernel holding the producer and the scan (its source in ``as_text``, no
fallback warning), and its results are the NumPy backend's bit for bit across dtypes
(float16, bfloat16, float32, float64, integers), axes (first, middle, last, through jnp's
``keepdims``), ``reverse``, NaNs (the first NaN wins an arg-reduction; a NaN propagates
through ``cummax``) and ties (the first index wins). ``cumlogsumexp`` goes through libm's
``exp``/``log1p``, so it is compared within a few ulps."""
from __future__ import annotations

import numpy as np
import pytest

from plax import lax
from plax import numpy as jnp
from plax.dtypes import bfloat16, canonicalize_dtype

from numba_vs_numpy import assert_bits_equal, compiled_source, jit_both

FLOATS = [np.dtype(np.float16), np.dtype(bfloat16), np.dtype(np.float32),
          np.dtype(np.float64)]


def _values(dtype, shape, seed):
    """Small integers (many ties), with NaNs, zeros of both signs and infinities for
    floats."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, shape).astype(np.float64)
    if np.dtype(dtype).kind in "fV":
        x[rng.random(shape) < 0.04] = np.nan
        x[rng.random(shape) < 0.06] = -0.0
        x[rng.random(shape) < 0.02] = np.inf
    return x.astype(dtype)


def _fused(f, *args, names: str):
    """Asserts ``f`` compiles to one kernel holding the equations ``names`` (in order)."""
    source = compiled_source(f, *args)
    assert f"generated from the equations ({names})" in source, source
    return source


# (each kernel compiles in a second or more: the cases below share kernels where they can,
# one source per dtype, rank, axis position and direction)
_PRODUCER = {"argmax": "add", "argmin": "sub", "cumsum": "sub", "cumprod": "mul",
             "cummax": "add", "cummin": "sub"}


def _op(name, axis):
    prim, reverse = name.split("_")[0], name.endswith("_rev")
    if prim in ("argmax", "argmin"):
        fn = lax.argmax if prim == "argmax" else lax.argmin
        return lambda x, y: fn(x + y if prim == "argmax" else x - y, axis, np.int32)
    fn = getattr(lax, prim)
    return lambda x, y: fn({"add": x + y, "sub": x - y, "mul": x * y}[_PRODUCER[prim]],
                           axis, reverse=reverse)


def _check(dtype, shape, cases, seed=1):
    x = _values(dtype, shape, seed)
    y = np.ones(shape, dtype) if np.dtype(dtype).kind in "iu" else _values(dtype, shape, seed + 1)
    for name, axis in cases:
        f = _op(name, axis)
        prim = name.split("_")[0]
        source = _fused(f, x, y, names=f"{_PRODUCER[prim]} {prim}")
        if prim in ("cumsum", "cumprod") and np.dtype(dtype).kind in "fV":
            # the blocked scan compiled once per work dtype (plax_numba.compiled_once), one
            # call in the kernel: its body is not linked and optimised again in each kernel
            work = canonicalize_dtype(dtype)  # (float64 is float32 without x64)
            twin = {"float64": "f64", "float32": "f32"}.get(work.name, "bits")
            assert f"scan_lines_{twin}_once(" in source, source
        (got,), (want,) = jit_both(f, x, y, fallback_is_error=True)
        assert_bits_equal(got, want)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_fused_scans_equal_the_reference_bit_for_bit(dtype):
    # rows longer than XLA's block of 16 (blocked sums), NaNs, ties, both directions
    cases = [("argmax", 1), ("cumsum_rev", 1), ("cummax_rev", 1)]
    if dtype.itemsize >= 4:  # (the 16-bit formats share cumprod's code but its rounding)
        cases.append(("cumprod", 0))
    _check(dtype, (5, 37), cases)


def test_other_axes_and_integers():
    _check(np.float32, (3, 20, 4), [("argmin", 1), ("cumsum", 1), ("cummin_rev", 1)])
    _check(np.float32, (40,), [("argmax", 0), ("cumsum_rev", 0)])
    _check(np.int32, (37, 6), [("argmax", 0), ("argmin", 1), ("cumsum", 1), ("cummax", 0)])


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16)], ids=str)
def test_blocked_scans_along_an_outer_axis(dtype):
    """Lines down the columns are scanned together (plax_numba.scan_lines.blocked_rows):
    more than one level of block totals (300 > 16 * 16), both directions."""
    _check(dtype, (300, 3), [("cumsum", 0), ("cumsum_rev", 0)], seed=11)
    _check(dtype, (37, 6), [("cumprod_rev", 0)], seed=12)


def test_large_lone_cumulative_ops_are_kernels(monkeypatch):
    """A cumulative equation with no producer, of at least LONE_KERNEL_MIN elements, runs
    as the one-equation form of the fused kernel (not the reference's NumPy passes)."""
    from plax_numba import emitter
    monkeypatch.setattr(emitter, "LONE_KERNEL_MIN", 64)
    x = np.random.default_rng(13).standard_normal((40, 6)).astype(np.float32)
    for f, name in ((lambda v: jnp.cumsum(v, axis=0), "cumsum"),
                    (lambda v: lax.cummax(v, 1, reverse=True), "cummax")):
        _fused(f, x, names=name)
        (got,), (want,) = jit_both(f, x, fallback_is_error=True)
        assert_bits_equal(got, want)


def test_arg_reduction_beside_a_reduction():
    """The largest value and where it is, in one loop."""
    x = _values(np.float32, (6, 37), 9)
    f = lambda v: (jnp.max(v * 2, axis=1), jnp.argmax(v * 2, axis=1))  # noqa: E731
    _fused(f, x, names="mul reduce_max argmax")  # (each name once)
    got, want = jit_both(f, x, fallback_is_error=True)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_arg_reductions_first_nan_and_first_tie_win(dtype):
    nan = np.nan
    x = np.array([[1, 3, 3, 2, 3],            # first of equal maxima: 1
                  [nan, 5, nan, 9, -1],       # a NaN first: 0
                  [2, 7, nan, 7, nan],        # the first NaN wins: 2
                  [nan, nan, nan, nan, nan],  # all NaN: 0
                  [-1, -1, -1, -1, -1],       # all equal: 0
                  [0, -0.0, 0, -0.0, -4]], np.float64).astype(dtype)
    zero = np.zeros_like(x)
    f = _op("argmax", 1)  # (the kernel of test_fused_scans_equal_the_reference_bit_for_bit)
    (got,), (want,) = jit_both(f, x, zero, fallback_is_error=True)
    assert_bits_equal(got, want)
    np.testing.assert_array_equal(got, [1, 0, 2, 0, 0, 0])
    f = _op("argmin", 1)
    (got,), (want,) = jit_both(f, x, zero, fallback_is_error=True)
    assert_bits_equal(got, want)
    np.testing.assert_array_equal(got, [0, 0, 2, 0, 0, 4])


@pytest.mark.parametrize("axis,keepdims", [(0, True), (1, False), (-1, True)])
def test_jnp_argmax_forms_fuse(axis, keepdims):
    x = _values(np.float32, (9, 33), 3)
    f = lambda v: jnp.argmax(jnp.exp(v), axis=axis, keepdims=keepdims)  # noqa: E731
    _fused(f, x, names="exp argmax")
    (got,), (want,) = jit_both(f, x, fallback_is_error=True)
    assert_bits_equal(got, want)
    np.testing.assert_array_equal(got, np.argmax(np.exp(x.astype(np.float64)), axis=axis,
                                                 keepdims=keepdims))


def test_whole_array_argmax_is_a_scalar():
    x = _values(np.float32, (50,), 4)
    f = lambda v: jnp.argmin(v * 2.0)  # noqa: E731
    _fused(f, x, names="mul argmin")
    (got,), (want,) = jit_both(f, x, fallback_is_error=True)
    assert got.shape == () and got == want


@pytest.mark.parametrize("dtype", [np.dtype(np.float32)], ids=str)
def test_cumsum_against_a_float64_loop(dtype):
    """The fused blocked sum is close to a float64 running sum (the order moves the last
    digits only; the fused ``exp`` is the kernel's float32 form, within an ulp of NumPy's,
    so bits are compared with exact producers, above). ``jnp.cumsum`` stages a ``jit`` call
    named ``cumsum``, as JAX's does; lowering splices it, so ``exp`` still fuses with it."""
    import plax
    x = np.random.default_rng(5).standard_normal((4, 300)).astype(dtype)
    f = lambda v: jnp.cumsum(jnp.exp(v), axis=1)  # noqa: E731
    staged = plax.make_jaxpr(f)(x).jaxpr.eqns
    assert [e.primitive.name for e in staged] == ["exp", "jit"]
    assert staged[1].params["name"] == "cumsum"
    _fused(f, x, names="exp cumsum")
    (got,), _ = jit_both(f, x, fallback_is_error=True)
    exact = np.cumsum(np.exp(x.astype(np.float64)), axis=1)
    tol = {2: 2e-2, 4: 1e-5, 8: 1e-12}[np.dtype(dtype).itemsize]
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=tol)


@pytest.mark.parametrize("dtype,reverse", [(np.dtype(np.float32), False),
                                           (np.dtype(np.float16), True)], ids=str)
def test_cumlogsumexp_fuses(dtype, reverse):
    x = np.random.default_rng(6).standard_normal((5, 40)).astype(dtype)
    x[1, 3] = np.inf
    x[2, :] = -np.inf
    f = lambda v: lax.cumlogsumexp(v * 2, axis=1, reverse=reverse)  # noqa: E731
    _fused(f, x, names="mul cumlogsumexp")
    (got,), (want,) = jit_both(f, x, fallback_is_error=True)
    assert got.dtype == want.dtype
    rtol = {2: 1e-2, 4: 1e-6, 8: 1e-14}[np.dtype(dtype).itemsize]  # (libm's exp, log1p)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol)


def test_a_scan_the_kernel_declines_keeps_its_producers_fused(monkeypatch):
    """A scan the kernel does not express runs on its reference kernel while its
    producers still run as one kernel (the emitter splits the cluster around it)."""
    from plax_numba import codegen, codegen_scan

    def declined(*args, **kwargs):
        raise codegen.Unsupported("declined for the test")
    monkeypatch.setattr(codegen_scan, "fused_cumulative", declined)
    x = _values(np.float32, (7, 30), 7)
    f = lambda v: lax.cumsum(jnp.sin(v) * 2, axis=1)  # noqa: E731
    source = compiled_source(f, x)
    assert "generated from the equations (sin mul)" in source, source
    assert "cumsum" not in source.split("# ---- fused kernel")[1], source
    (got,), (want,) = jit_both(f, x, fallback_is_error=True)
    np.testing.assert_allclose(got, want, rtol=1e-5)  # (the kernel's float32 sin)


def test_first_tier_declines_scan_clusters():
    """The LLVM first tier does not express arg-reductions or scans: it declines such a
    cluster (numba's kernel runs it)."""
    from plax import make_jaxpr
    from plax.lowering import Cluster, FusionOptions, find_clusters
    from plax_numba import codegen, llvm_tier
    x = _values(np.float32, (8, 20), 8)
    for f in (lambda v: jnp.argmax(v * 2, axis=1), lambda v: lax.cumsum(v * 2, axis=0)):
        jaxpr = make_jaxpr(f)(x).jaxpr
        scans = FusionOptions(arg_reductions=True, cumulative=True)
        (cluster,) = [u for u in find_clusters(jaxpr, scans)
                      if isinstance(u, Cluster)]
        plan = codegen.plan_cluster(cluster, preallocate=True)
        assert llvm_tier.plan(cluster, plan) is None

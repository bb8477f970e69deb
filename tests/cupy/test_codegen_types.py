"""float16, bfloat16 and complex values in generated kernels, and nextafter bit by bit, checked
without a GPU: the kernels' source built for the host (``-DPLAX_HOST``, g++) against the NumPy
backend, bit for bit where the reference is exact; NVRTC compiles the same units with the
device optimiser on (launched kernels are compiled that way).
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from plax import lax
from plax.core.jaxpr import Var

from gpu_env import requires_nvrtc
from kernel_source_util import HAVE_CXX, aval, make_eqn, reference, run_host
from plax_cupy import codegen, dtypes, nvrtc

needs_cxx = pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler (g++) for the host check")

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)


def _run(eqn, *operands):
    plan = codegen.plan_equation(eqn)
    lib = nvrtc.compile_host(plan.source)
    return run_host(plan, lib.plax_host, list(operands))[0]


def _bits(x):
    x = np.ascontiguousarray(x)
    return x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def _edges(dtype):
    fi = ml_dtypes.finfo(dtype) if dtype.itemsize == 2 else np.finfo(dtype)
    tiny, sub, big = float(fi.smallest_normal), float(fi.smallest_subnormal), float(fi.max)
    xs = [0.0, -0.0, 0.0, -0.0, 1.0, 1.0, -1.0, sub, sub, -sub, tiny, tiny, big, big, -big,
          np.inf, -np.inf, np.inf, np.nan, 1.0, 0.0, 2.0, -2.0, 0.5]
    ys = [1.0, -1.0, -0.0, 0.0, 1.0, 2.0, np.inf, 0.0, 1.0, 0.0, 0.0, 1.0, np.inf, 0.0, -np.inf,
          0.0, 0.0, np.inf, 1.0, np.nan, 0.0, -np.inf, 5.0, -0.5]
    return np.array(xs, np.float64).astype(dtype), np.array(ys, np.float64).astype(dtype)


@needs_cxx
@pytest.mark.parametrize("dtype", [np.float32, np.float64, F16, BF16], ids=str)
def test_nextafter_matches_numpy_bit_for_bit(dtype):
    """nextafter(0, +-1) is the smallest subnormal (not flushed), nextafter(x, x) is x (and
    nextafter(0, -0) is -0), NaN in gives NaN, infinities and the largest finite value step
    correctly: the reference's bits exactly, including the issue's [edges] cases."""
    dtype = np.dtype(dtype)
    x, y = _edges(dtype)
    eqn = make_eqn(lax.nextafter_p, [Var(aval(x.shape, dtype)), Var(aval(x.shape, dtype))])
    plan = codegen.plan_equation(eqn)
    body = plan.source[len(codegen.PREAMBLE):]
    assert not re.search(r"(?<![\w])nextafterf?\(", body) and "plax_nextafter" in body  # not libm's
    got, want = _run(eqn, x, y), reference(eqn, [x, y])
    nan = np.isnan(want.astype(np.float64))
    assert np.array_equal(np.isnan(got.astype(np.float64)), nan)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])
    if dtype == np.float32:
        assert _bits(got)[0] == 1  # the smallest subnormal, as np.nextafter(0, 1)


@needs_cxx
def test_nextafter_on_empty_operands():
    """The issue's [[],[]] case: empty operands give an empty result of the right type."""
    for dtype in (np.float32, BF16):
        x = np.zeros((0,), dtype)
        eqn = make_eqn(lax.nextafter_p, [Var(aval((0,), dtype)), Var(aval((0,), dtype))])
        got = _run(eqn, x, x)
        assert got.shape == (0,) and got.dtype == np.dtype(dtype)


@needs_cxx
@pytest.mark.parametrize("dst", [F16, BF16], ids=str)
@pytest.mark.parametrize("src", [np.float32, np.float64], ids=str)
def test_rounding_to_half_types_is_nearest_even_bit_for_bit(src, dst):
    """Every float16/bfloat16 pattern, and the midpoints between neighbours (ties), the values
    just beside them, overflow to infinity and the subnormal range, convert as NumPy/ml_dtypes
    convert (float16 from double directly, bfloat16 through float32)."""
    src, dst = np.dtype(src), np.dtype(dst)
    with np.errstate(invalid="ignore", over="ignore"):
        every = np.arange(1 << 16, dtype=np.uint16).view(dst).astype(np.float64)
        finite = np.sort(every[np.isfinite(every)])
        mid = (finite[1:] + finite[:-1]) / 2
        x = np.concatenate([every, mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf),
                            [65519.99, 65520.0, 1e6, -1e6, 3.4e38, 1e-9, 1e-40]]).astype(src)
    eqn = make_eqn(lax.convert_element_type_p, [Var(aval(x.shape, src))], new_dtype=dst,
                   weak_type=False)
    got, want = _run(eqn, x), reference(eqn, [x])
    nan = np.isnan(x)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])
    assert np.isnan(got[nan].astype(np.float32)).all()


@needs_cxx
@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_a_fused_half_chain_rounds_after_every_operation(dtype):
    """exp(x) * y + x in one kernel equals the reference computed one operation at a time in
    the type (rounding each intermediate), bit for bit; and the sum of a half array
    accumulates wider and rounds once."""
    import plax
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, (6, 50)).astype(dtype)
    y = rng.uniform(-3, 3, (6, 50)).astype(dtype)

    def f(x, y):
        z = lax.add(lax.mul(lax.exp(x), y), x)
        return z, lax.reduce_sum_p.bind(z, axes=(1,))

    from kernel_source_util import clusters_of
    closed = plax.make_jaxpr(f)(x, y)
    (cluster,) = clusters_of(closed.jaxpr)
    plan = codegen.plan_cluster(cluster)
    z, s = run_host(plan, nvrtc.compile_host(plan.source).plax_host, [x, y])
    want = (np.exp(x.astype(np.float32)).astype(dtype).astype(np.float32) * y.astype(np.float32)
            ).astype(dtype).astype(np.float32) + x.astype(np.float32)
    np.testing.assert_array_equal(_bits(z), _bits(want.astype(dtype)))
    np.testing.assert_array_equal(_bits(s), _bits(z.astype(np.float64).sum(1).astype(np.float32).astype(dtype)))


@needs_cxx
def test_complex_functions_match_numpy_on_finite_values():
    """Complex arithmetic and functions on values across the plane (both signs, tiny and large
    parts, the axes): within a few ulps of |NumPy's value|, in complex64 and complex128."""
    rng = np.random.default_rng(1)
    parts = np.concatenate([rng.uniform(-3, 3, 40), [0.0, -0.0, 1.0, -1.0, 1e-20, 30.0, -30.0]])
    for dtype, rtol in ((np.complex64, 2e-6), (np.complex128, 1e-14)):
        z = (parts[:, None] + 1j * parts[None, :]).astype(dtype)
        for prim in (lax.exp_p, lax.log_p, lax.sqrt_p, lax.sin_p, lax.cos_p, lax.tan_p,
                     lax.tanh_p, lax.sinh_p, lax.cosh_p, lax.expm1_p, lax.log1p_p, lax.sign_p,
                     lax.abs_p, lax.rsqrt_p, lax.logistic_p, lax.exp2_p):
            eqn = make_eqn(prim, [Var(aval(z.shape, dtype))])
            got, want = _run(eqn, z), reference(eqn, [z])
            ok = np.isfinite(want)
            err = np.abs(got[ok].astype(np.complex128) - want[ok])
            assert (err <= 8 * rtol * np.abs(want[ok]) + 1e-300).all(), prim.name
        w = z[::-1].copy()
        for prim in (lax.mul_p, lax.div_p, lax.pow_p):
            eqn = make_eqn(prim, [Var(aval(z.shape, dtype)), Var(aval(z.shape, dtype))])
            got, want = _run(eqn, z, w), reference(eqn, [z, w])
            ok = np.isfinite(want) & (np.abs(want) < 1e30)
            err = np.abs(got[ok].astype(np.complex128) - want[ok])
            assert (err <= 64 * rtol * np.abs(want[ok]) + 1e-300).all(), prim.name


@needs_cxx
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=str)
def test_complex_functions_of_infinite_and_nan_parts_follow_numpy(dtype):
    """Every pair of parts from {0, -0, finite, +-inf, NaN, huge}: the special values NumPy
    (C99 Annex G) gives -- which part is NaN or infinite -- and the finite ones."""
    parts = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e30, -700.0, 800.0])
    z = np.empty((parts.size, parts.size), dtype)
    z.real, z.imag = parts[:, None], parts[None, :]
    z = z.reshape(-1)
    for prim in (lax.exp_p, lax.exp2_p, lax.log_p, lax.sqrt_p, lax.rsqrt_p, lax.sin_p, lax.cos_p,
                 lax.tan_p, lax.sinh_p, lax.cosh_p, lax.tanh_p, lax.expm1_p, lax.log1p_p,
                 lax.sign_p, lax.abs_p, lax.logistic_p):
        eqn = make_eqn(prim, [Var(aval(z.shape, dtype))])
        with np.errstate(all="ignore"):
            got, want = _run(eqn, z), reference(eqn, [z])
        for part in ((np.real, np.imag) if want.dtype.kind == "c" else (np.real,)):
            g, w = part(got).astype(np.float64), part(want).astype(np.float64)
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=prim.name)
            # (infinities' signs only where both parts of the operand are finite: C99 leaves
            # the sign unspecified for some infinite operands, where C libraries differ)
            np.testing.assert_array_equal(np.isinf(g), np.isinf(w), err_msg=prim.name)
            both = np.isfinite(z.real) & np.isfinite(z.imag) & np.isinf(w)
            np.testing.assert_array_equal(np.sign(g[both]), np.sign(w[both]), err_msg=prim.name)
            ok = np.isfinite(w)
            np.testing.assert_allclose(g[ok], w[ok], rtol=1e-5, atol=1e-30, err_msg=prim.name)


def _complex_extreme_cases():
    """Operand pairs of complex max/min: ties with every sign of zero in either part, a NaN in
    either part of either operand, both NaN, infinities, and plain lexicographic orders."""
    nan, inf = np.nan, np.inf
    z = [complex(0.0, 0.0), complex(-0.0, 0.0), complex(0.0, -0.0), complex(-0.0, -0.0)]
    pairs = [(a, b) for a in z for b in z]
    parts = [complex(nan, 0), complex(0, nan), complex(nan, nan), complex(1, 0), complex(1, nan),
             complex(nan, 1), complex(-inf, 0), complex(inf, -inf), complex(1, 2), complex(1, -2),
             complex(2, -5)]
    pairs += [(a, b) for a in parts for b in parts]
    a, b = zip(*pairs)
    return np.array(a, np.complex64), np.array(b, np.complex64)


@needs_cxx
def test_complex_division_by_zero_and_max_with_nan_follow_the_reference():
    """Smith's division gives NumPy's infinities and NaNs for a zero divisor; max/min are JAX's
    (plax.lowering.complex_extremes): lexicographic, the first operand only where it wins
    strictly (a tie gives the second, its zeros' signs too), a NaN never winning -- the
    reference's bits exactly."""
    a = np.array([1 + 1j, 0j, -1 + 0j, 2 + 3j, complex(np.nan, 0), 1 + 5j], np.complex64)
    b = np.array([0j, 0j, 0j, 2 + 1j, 1 + 0j, 1 + 5j], np.complex64)
    eqn = make_eqn(lax.div_p, [Var(aval(a.shape, a.dtype)), Var(aval(a.shape, a.dtype))])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(_run(eqn, a, b), reference(eqn, [a, b]))
    a, b = _complex_extreme_cases()
    for prim in (lax.max_p, lax.min_p):
        eqn = make_eqn(prim, [Var(aval(a.shape, a.dtype)), Var(aval(a.shape, a.dtype))])
        got, want = _run(eqn, a, b), reference(eqn, [a, b])
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=prim.name)


@needs_cxx
def test_complex_max_and_min_reductions_fold_in_order_including_empty_ones():
    """JAX's complex max/min is not associative (``max(max(1, nan), 0)`` is 0,
    ``max(1, max(nan, 0))`` is 1), so the generator declines their reductions (a block tree
    would combine strided elements: the kernel table's in-order fold runs them); the
    :class:`~plax_cupy.codegen.Reduction`'s identity and combine, folded in order over a row
    (a cluster of ``max``/``min`` of columns), give the reference's reduction bit for bit:
    ties with zero signs, NaN in either part, and the empty reduction's -+inf + 0j."""
    import plax
    from kernel_source_util import clusters_of
    nan = np.nan
    x = np.array([[1 + 2j, 1 - 5j, -np.inf - 1j, complex(-np.inf, 0)],
                  [3 + 0j, 3 + 1j, complex(nan, 0), 2 + 0j],
                  [complex(0.0, -0.0), complex(-0.0, 0.0), complex(-0.0, -0.0), complex(0.0, 0.0)],
                  [complex(nan, 1), complex(2, nan), complex(nan, nan), complex(1, 1)],
                  [complex(1, nan), 1 + 0j, complex(1, -0.0), complex(-np.inf, -1)],
                  [complex(5, 0), complex(nan, 0), complex(4, 0), complex(4, -0.0)]], np.complex64)
    for prim, combine in ((lax.reduce_max_p, lax.max), (lax.reduce_min_p, lax.min)):
        eqn = make_eqn(prim, [Var(aval(x.shape, np.complex64))], axes=(1,))
        with pytest.raises(codegen.Unsupported, match="folds in order"):
            codegen.plan_equation(eqn)
        red = codegen.reduction_of(eqn)
        init = np.complex64(complex(-np.inf if prim is lax.reduce_max_p else np.inf, 0.0))
        assert red.folds_in_order and red.init == \
            codegen.c_literal(complex(init), np.dtype(np.complex64))

        def fold(acc, *columns, combine=combine):
            for c in columns:
                acc = combine(acc, c)
            return acc

        # (the identity as an operand: the cluster's inputs are then exactly fold's arguments)
        columns = [np.full(x.shape[0], init)] + [np.ascontiguousarray(x[:, k])
                                                 for k in range(x.shape[1])]
        (cluster,) = clusters_of(plax.make_jaxpr(fold)(*columns).jaxpr)
        plan = codegen.plan_cluster(cluster)
        (got,) = run_host(plan, nvrtc.compile_host(plan.source).plax_host, columns)
        np.testing.assert_array_equal(_bits(got), _bits(reference(eqn, [x])), err_msg=prim.name)
        empty = make_eqn(prim, [Var(aval((3, 0), np.complex64))], axes=(1,))
        np.testing.assert_array_equal(_bits(reference(empty, [x[:3, :0]])),
                                      _bits(np.full(3, init, np.complex64)))


def test_half_and_complex_literals_are_read_from_memory():
    """float16, bfloat16 and complex rank-0 literals are kernel inputs in device memory (no
    kernel-scalar conversion of types CuPy or ctypes cannot pass by value)."""
    from plax.core.jaxpr import Literal
    for dtype in (F16, BF16, np.dtype(np.complex64)):
        lit = Literal(np.asarray(2, dtype)[()], aval((), dtype))
        eqn = make_eqn(lax.mul_p, [Var(aval((3,), dtype)), lit])
        plan = codegen.plan_equation(eqn)
        assert [i.kind for i in plan.inputs] == ["array", "array"]
        assert dtypes.storage_dtype(dtype).itemsize == dtype.itemsize


@requires_nvrtc
def test_half_and_complex_kernels_compile_with_the_device_optimiser():
    """A launched shape of each new type: NVRTC with the optimiser (not ``-G``), no warning."""
    from kernel_source_util import batch_source
    plans = []
    for dtype in (F16, BF16, np.dtype(np.complex64), np.dtype(np.complex128)):
        x = Var(aval((4, 8), dtype))
        for prim in (lax.exp_p, lax.mul_p, lax.reduce_sum_p):
            if prim is lax.reduce_sum_p:
                eqn = make_eqn(prim, [x], axes=(1,))
            else:
                eqn = make_eqn(prim, [x] * (2 if prim is lax.mul_p else 1))
            plans.append(codegen.plan_equation(eqn))
    source, _ = batch_source([p.source for p in plans])
    nvrtc.compile_ptx(source, "types.cu")


@needs_cxx
@pytest.mark.parametrize("dtype", [np.float32, np.complex64], ids=str)  # the two code paths
def test_pow_with_an_integer_exponent_converts_it_to_the_base_dtype(dtype):
    """``pow a:f32[] n:i32[]`` (JAX 0.10.2's staging of ``x ** n`` for a traced int ``n``):
    the generated kernel converts the exponent to the base's dtype, as XLA does, and gives
    the NumPy backend's values."""
    x = np.array([0.5, -1.5, 2.0, 3.0, -0.25, 1.0], dtype)
    n = np.array([0, 1, 2, 3, -1, -2], np.int32)
    eqn = make_eqn(lax.pow_p, [Var(aval(x.shape, dtype)), Var(aval(n.shape, np.int32))])
    got, want = _run(eqn, x, n), reference(eqn, [x, n])
    assert got.dtype == want.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.complex128), want.astype(np.complex128),
                               rtol=1e-6)
    np.testing.assert_allclose(want.astype(np.complex128), x.astype(np.complex128) ** n,
                               rtol=1e-6)

"""``plax_cupy.kernels_dot``: the cuBLAS argument list, checked by a NumPy model of cuBLAS's
column-major strided batched GEMM; the library's absence detected cleanly; and the kernel's
values on the simulated GPU (where cuBLAS is absent, so the float32/int32 fallback runs, with
one warning per dtype) against the NumPy backend.

The simulated-GPU tests run in a child process (``-p fake_cupy_plugin``: the simulation takes
the name ``cupy``); :func:`test_dot_on_the_simulated_gpu` starts it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings

import ml_dtypes
import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))


def _simulated() -> bool:
    mod = sys.modules.get("cupy")
    return mod is not None and getattr(mod, "__version__", "").endswith("simulated")


on_simulated_gpu = pytest.mark.skipif(not _simulated(), reason="runs on the simulated GPU "
                                      "(test_dot_on_the_simulated_gpu starts it)")
needs_cupy = pytest.mark.skipif(not _simulated() and __import__("importlib").util.find_spec("cupy") is None,
                                reason="CuPy is not installed")


def _column_major_gemm(args, memory: dict) -> None:
    """What ``cublasGemmStridedBatchedEx`` computes, on flat NumPy buffers named by their
    'pointers' in ``memory`` (no transposition flags: the only form plax uses)."""
    (_, ta, tb, m, n, k, alpha, pa, _, lda, sa, pb, _, ldb, sb, beta, pc, _, ldc, sc, batch,
     _, _) = args
    assert ta == tb == 0
    A, B, C = memory[pa], memory[pb], memory[pc]
    for i in range(batch):
        for col in range(n):
            for row in range(m):
                acc = sum(A[i * sa + row + p * lda] * B[i * sb + p + col * ldb] for p in range(k))
                C[i * sc + row + col * ldc] = memory[alpha] * acc + memory[beta] * C[i * sc + row + col * ldc]


@needs_cupy
@pytest.mark.parametrize("batch,m,n,k", [(1, 2, 3, 4), (3, 5, 1, 2), (2, 1, 4, 3)])
def test_gemm_arguments_compute_the_row_major_product(batch, m, n, k):
    """The argument list, run through a model of cuBLAS's column-major semantics, computes the
    row-major ``A @ B`` of every batch (the B-first swap, leading dimensions, strides)."""
    from plax_cupy import kernels_dot as kd
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (batch, m, k)).astype(np.float64)
    b = rng.integers(-3, 4, (batch, k, n)).astype(np.float64)
    c = np.full(batch * m * n, 99.0)
    memory = {100: a.reshape(-1), 200: b.reshape(-1), 300: c, 1: 1.0, 2: 0.0}
    gemm = kd.Gemm(batch, m, n, k, kd.CUDA_R_16BF, kd.CUDA_R_32F, kd.CUBLAS_COMPUTE_32F)
    args = kd.gemm_arguments(7, gemm, 100, 200, 300, 1, 2)
    assert len(args) == 23 and args[0] == 7
    assert args[8] == args[12] == kd.CUDA_R_16BF and args[17] == kd.CUDA_R_32F
    assert args[21] == kd.CUBLAS_COMPUTE_32F and args[20] == batch
    _column_major_gemm(args, memory)
    np.testing.assert_array_equal(c.reshape(batch, m, n), a @ b)


@needs_cupy
def test_int8_shapes_cublas_takes():
    from plax_cupy.kernels_dot import int8_shape_ok
    assert int8_shape_ok(3, 8, 16) and not int8_shape_ok(4, 6, 16) and not int8_shape_ok(4, 8, 6)


@needs_cupy
def test_a_missing_cublas_is_detected_without_an_error():
    """Where libcublas cannot be loaded (this machine without a CUDA toolkit or GPU, or the
    simulated GPU, which has no ``cupy.cuda.cublas``), the library is None: the kernel then
    falls back instead of failing at the first product."""
    from plax_cupy import kernels_dot
    kernels_dot._library.clear()
    lib = kernels_dot.cublas_library()
    if _simulated():
        assert lib is None
        return
    try:
        from cupy_backends.cuda.libs import cublas  # noqa: F401
        loadable = True
    except ImportError:
        loadable = False
    if not loadable:
        assert lib is None
    else:
        assert lib is None or hasattr(lib, "gemmStridedBatchedEx")


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the simulated GPU")
@pytest.mark.skipif(_simulated(), reason="already on the simulated GPU")
def test_dot_on_the_simulated_gpu():
    path = os.pathsep.join([HERE, os.path.join(REPO, "backends"), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "fake_cupy_plugin", "-q",
                           "-p", "no:cacheprovider", "-p", "no:randomly", os.path.abspath(__file__)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    tail = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    import re
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed and int(passed.group(1)) >= 50, tail  # the simulated-GPU tests ran, not skipped


# ---------------------------------------------------------------- on the simulated GPU

BF16 = np.dtype(ml_dtypes.bfloat16)

CASES = [  # (lhs shape, rhs shape, dimension numbers)
    ((6, 8), (8, 4), (((1,), (0,)), ((), ()))),                 # x @ y
    ((8, 6), (4, 8), (((0,), (1,)), ((), ()))),                 # x.T @ y.T (transposes)
    ((3, 5, 8), (3, 8, 4), (((2,), (1,)), ((0,), (0,)))),       # batched
    ((2, 4, 3, 4), (4, 2, 4, 5), (((1, 3), (0, 2)), ((0,), (1,)))),  # two contracted axes
    ((5, 0), (0, 3), (((1,), (0,)), ((), ()))),                 # empty contraction: zeros
]


def _run(lhs, rhs, **params):
    from plax import lax, plugins
    from plax_cupy import kernels
    be = plugins.registry().get_backend("cupy")
    device = be.devices()[0]
    fn = kernels.impls()[lax.dot_general_p]
    out = be._wrap(fn, lax.dot_general_p)(be.put(lhs, device), be.put(rhs, device), **params)
    return be.to_host(out)


def _reference(lhs, rhs, **params):
    import plax_numpy
    from plax import lax
    return np.asarray(plax_numpy.impls()[lax.dot_general_p](lhs, rhs, **params))


@on_simulated_gpu
@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.float64, np.int8, np.int32,
                                   np.uint8, np.bool_, np.complex64], ids=str)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_dot_general_matches_the_reference(dtype, case):
    lshape, rshape, dn = CASES[case]
    rng = np.random.default_rng(case)
    dtype = np.dtype(dtype)
    if dtype.kind in "biu":
        lhs = rng.integers(-9 if dtype.kind == "i" else 0, 10, lshape).astype(dtype)
        rhs = rng.integers(-9 if dtype.kind == "i" else 0, 10, rshape).astype(dtype)
    else:
        lhs = (rng.standard_normal(lshape) + (1j * rng.standard_normal(lshape) if dtype.kind == "c" else 0)).astype(dtype)
        rhs = (rng.standard_normal(rshape) + (1j * rng.standard_normal(rshape) if dtype.kind == "c" else 0)).astype(dtype)
    params = dict(dimension_numbers=dn, precision=None, preferred_element_type=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _run(lhs, rhs, **params)
    want = _reference(lhs, rhs, **params)
    assert got.shape == want.shape and got.dtype == want.dtype
    # the same float32 (or wider) sums, rounded once: equal up to the summation order
    np.testing.assert_allclose(got.astype(np.complex128), want.astype(np.complex128),
                               rtol=1e-2 if dtype.itemsize == 2 else 1e-5, atol=1e-5)


@on_simulated_gpu
@pytest.mark.parametrize("dtype,preferred", [(BF16, np.float32), (np.float16, np.float32),
                                             (np.int8, np.int32), (np.int8, np.int8)], ids=str)
def test_preferred_element_type(dtype, preferred):
    """bfloat16/float16 products kept in float32, int8 products in int32 or wrapped to int8,
    as the reference."""
    rng = np.random.default_rng(1)
    lhs = rng.integers(-60, 60, (4, 16)).astype(dtype)
    rhs = rng.integers(-60, 60, (16, 8)).astype(dtype)
    params = dict(dimension_numbers=(((1,), (0,)), ((), ())), precision=None,
                  preferred_element_type=np.dtype(preferred))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _run(lhs, rhs, **params)
    want = _reference(lhs, rhs, **params)
    assert got.dtype == want.dtype == np.dtype(preferred)
    np.testing.assert_array_equal(got, want)  # small integers: every sum exact


@on_simulated_gpu
@pytest.mark.parametrize("ldt,rdt", [(np.int8, np.float32), (np.float16, np.float32),
                                     (BF16, np.float32), (np.float32, BF16),
                                     (np.uint8, np.int8)], ids=str)
def test_mixed_operand_dtypes(ldt, rdt):
    """Operands of two dtypes (JAX 0.10 accepts them): both converted to the wider one, as
    the reference kernel does."""
    rng = np.random.default_rng(2)
    lhs = rng.integers(0, 5, (3, 6)).astype(ldt)
    rhs = rng.integers(-4, 5, (6, 2)).astype(rdt)
    params = dict(dimension_numbers=(((1,), (0,)), ((), ())), precision=None,
                  preferred_element_type=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _run(lhs, rhs, **params)
    want = _reference(lhs, rhs, **params)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # small integers: every sum exact


@on_simulated_gpu
def test_the_fallback_warns_once_per_dtype():
    """No cuBLAS on the simulated GPU: a bfloat16 product falls back with one warning naming
    dot_general and the dtype, and the next product does not warn again."""
    from plax_cupy.backend import PlaxCupyFallbackWarning
    from plax_cupy.backend import _warned
    _warned.difference_update({k for k in _warned if k[:1] == ("dot_general",)})
    x = np.ones((4, 4), BF16)
    params = dict(dimension_numbers=(((1,), (0,)), ((), ())), precision=None,
                  preferred_element_type=None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run(x, x, **params)
        _run(x, x, **params)
    ours = [w for w in caught if issubclass(w.category, PlaxCupyFallbackWarning)]
    assert len(ours) == 1 and "dot_general on bfloat16" in str(ours[0].message), [str(w.message) for w in caught]

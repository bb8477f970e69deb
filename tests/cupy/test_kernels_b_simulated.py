"""The GPU kernels of the linalg, FFT, convolution, window, special-function and callback
families (``plax_cupy.kernels_{linalg,fft,convolution,windows,special,callbacks}``) run on the
simulated GPU of ``fake_cupy`` and compared with the NumPy backend's kernels.

The family files (``test_kernels_b_<family>.py``) run only where ``cupy`` is the simulated one;
this file runs them in one child process with ``-p fake_cupy_plugin`` (the simulation takes the
name ``cupy``, so it never meets a real CuPy of this session), and holds the helpers they
share (:func:`close`, :data:`TOLERANCE`). It reuses the kernel runner of the other kernel
families (``test_kernels_a_simulated``).
"""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from gpu_env import NVRTC_PROBLEM
from test_simulated_streams import run_file_on_simulated_gpu

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = ("linalg", "fft", "convolution", "windows", "special", "callbacks", "programs",
            "random", "structural", "gather")


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the simulated GPU")
def test_kernel_families_b_on_the_simulated_gpu():
    run_file_on_simulated_gpu(*(os.path.join(HERE, f"test_kernels_b_{f}.py") for f in FAMILIES),
                              skipped=0)


def test_generated_kernels_compile_with_nvrtc():
    # the hand-written CUDA kernels of these families compile for the device without a warning
    if NVRTC_PROBLEM:
        pytest.skip(NVRTC_PROBLEM)
    from plax_cupy import codegen, nvrtc
    from plax_cupy.kernels_linalg import LU_PERMUTATION_SOURCE, SMALL_LU_ENTRY, SMALL_LU_SOURCE
    from plax_cupy.kernels_special import RANDOM_GAMMA_GRAD_SOURCE
    ptx = nvrtc.compile_ptx(codegen.PREAMBLE + SMALL_LU_SOURCE)
    assert all(f".entry {name}" in ptx for name in SMALL_LU_ENTRY.values())
    assert ".entry plax_lu_permutation" in nvrtc.compile_ptx(codegen.PREAMBLE + LU_PERMUTATION_SOURCE)
    ptx = nvrtc.compile_ptx(codegen.PREAMBLE + RANDOM_GAMMA_GRAD_SOURCE)
    assert ".entry plax_random_gamma_grad_f32" in ptx and ".entry plax_random_gamma_grad_f64" in ptx
    # the convolution's generated kernel on every kind of dtype, with groups and dilations: no
    # flush-to-zero arithmetic (subnormal partial sums are kept)
    from plax.lax.convolution import ConvDimensionNumbers
    from plax_cupy.kernels_convolution import conv_source
    dn = ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))  # NHWC, HWIO, NHWC
    for operand, out in ((np.float32, np.float32), (np.float16, np.float16), (_bf16(), _bf16()),
                         (_bf16(), np.float32), (np.complex64, np.complex64),
                         (np.int8, np.int32), (np.bool_, np.bool_), (np.float64, np.float64)):
        source, name = conv_source(operand, operand, out, (4, 9, 9, 6), (3, 3, 3, 4), (2, 5, 9, 4),
                                   window_strides=(2, 1), padding=((1, 1), (1, 1)),
                                   lhs_dilation=(1, 1), rhs_dilation=(1, 1),
                                   dimension_numbers=dn, feature_group_count=1,
                                   batch_group_count=2)
        ptx = nvrtc.compile_ptx(codegen.PREAMBLE + source)
        assert f".entry {name}" in ptx and ".ftz" not in ptx, (operand, out)
    # the implicit GEMM's gather (16-, 32- and 64-bit elements; both matrix forms, batch
    # groups, lhs dilation, padding)
    from plax_cupy.kernels_convolution import gather_source
    oihw = ConvDimensionNumbers((0, 1, 2, 3), (0, 1, 2, 3), (0, 1, 2, 3))
    for itemsize, numbers, batch_groups in ((2, dn, 2), (4, oihw, 1), (8, oihw, 2)):
        shapes = (((4, 9, 9, 6), (3, 3, 3, 4), (2, 5, 9, 4)) if numbers is dn else
                  ((4, 6, 9, 9), (4, 3, 3, 3), (4 // batch_groups, 4, 9, 17)))
        source, name = gather_source(itemsize, *shapes, window_strides=(2, 1),
                                     padding=((1, 1), (1, 1)), lhs_dilation=(1, 2),
                                     rhs_dilation=(1, 1), dimension_numbers=numbers,
                                     feature_group_count=2 // batch_groups,
                                     batch_group_count=batch_groups)
        assert f".entry {name}" in nvrtc.compile_ptx(codegen.PREAMBLE + source), itemsize


# ---------------------------------------------------------------- helpers of the family files

def _bf16():
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


#: relative (and absolute) tolerance per result dtype: a few units in the last place of the
#: type, as a different order of floating-point operations gives
TOLERANCE = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 3e-5, "float64": 1e-12,
             "complex64": 3e-5, "complex128": 1e-12}


def as_wide(a) -> np.ndarray:
    """``a`` in float64 (complex128 for complex values), for comparisons."""
    a = np.asarray(a)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def assert_close(got, want, dtype=None, scale: float = 1.0, what: str = ""):
    """``got`` equals ``want`` in shape and dtype, and in value to ``dtype``'s tolerance
    (``TOLERANCE``, times ``scale``) -- exactly for integers and booleans; NaN matches NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    name = np.dtype(dtype or want.dtype).name
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    tol = TOLERANCE[name] * scale
    np.testing.assert_allclose(as_wide(got), as_wide(want), rtol=tol, atol=tol, err_msg=what)


def close(primitive, *host_args, scale: float = 1.0, **params):
    """Runs ``primitive``'s GPU kernel (as the backend calls it) and the NumPy backend's kernel
    on ``host_args`` and asserts each result equal within its dtype's tolerance; returns the
    GPU results (a list for multi-result primitives)."""
    from test_kernels_a_simulated import reference, run_kernel
    got = run_kernel(primitive, *host_args, **params)
    want = reference(primitive, *host_args, **params)
    gots = got if isinstance(got, list) else [got]
    wants = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(gots) == len(wants), primitive.name
    for i, (g, w) in enumerate(zip(gots, wants)):
        assert_close(g, w, scale=scale, what=f"{primitive.name} result {i}")
    return got

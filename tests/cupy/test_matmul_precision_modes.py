"""The CuPy backend's float32 product math under a precision (``precision=`` or
``jax_default_matmul_precision``, which ``dot_general`` records): TF32, bfloat16 or float16
tensor-core modes, or float32 SGEMM (plax_cupy.kernels_dot.float32_compute_type). Needs CuPy
installed, no GPU: the mapping is checked, and the kernel's use of it with cuBLAS replaced by
a recorder.
"""
from __future__ import annotations

import numpy as np
import pytest

from gpu_env import HAVE_CUPY

pytestmark = pytest.mark.skipif(not HAVE_CUPY, reason="CuPy is not installed")


def _modes():
    from plax_cupy import kernels_dot as kd
    return kd


@pytest.mark.parametrize("precision, mode", [
    (None, None),
    (("DEFAULT", "DEFAULT"), "FAST_TF32"), (("HIGH", "HIGH"), "FAST_TF32"),
    ("HIGH", "FAST_TF32"), ("bfloat16", "FAST_TF32"), ("tensorfloat32", "FAST_TF32"),
    (("HIGHEST", "HIGHEST"), None), (("DEFAULT", "HIGHEST"), None), ("float32", None),
    ("TF32_TF32_F32", "FAST_TF32"), ("BF16_BF16_F32", "FAST_16BF"), ("F16_F16_F32", "FAST_16F"),
    ("F32_F32_F32", None), ("BF16_BF16_F32_X6", None), ("DEFAULT", "FAST_TF32"),
])
def test_float32_compute_type(precision, mode, monkeypatch):
    kd = _modes()
    monkeypatch.delenv("PLAX_GPU_ALLOW_TF32", raising=False)
    want = None if mode is None else getattr(kd, f"CUBLAS_COMPUTE_32F_{mode}")
    assert kd.float32_compute_type(precision) == want


def test_no_precision_opts_in_to_tf32_only_through_the_environment(monkeypatch):
    kd = _modes()
    monkeypatch.setenv("PLAX_GPU_ALLOW_TF32", "1")
    assert kd.float32_compute_type(None) == kd.CUBLAS_COMPUTE_32F_FAST_TF32
    assert kd.float32_compute_type(("HIGHEST", "HIGHEST")) is None


@pytest.mark.parametrize("setting, mode", [("tensorfloat32", "FAST_TF32"),
                                           ("BF16_BF16_F32", "FAST_16BF"), ("float32", None)])
def test_the_config_option_reaches_the_kernel(setting, mode, monkeypatch):
    # the precision dot_general records under the option, given to the kernel, selects the
    # cuBLAS compute type (cuBLAS itself replaced by a recorder: no GPU needed)
    import plax
    import plax.numpy as jnp
    kd = _modes()
    monkeypatch.delenv("PLAX_GPU_ALLOW_TF32", raising=False)
    with plax.default_matmul_precision(setting):
        closed = plax.make_jaxpr(jnp.dot)(jnp.ones((4, 8)), jnp.ones((8, 2)))
    params = closed.jaxpr.eqns[0].params
    asked = []
    monkeypatch.setattr(kd, "_arrange", lambda x, batch, free, contract, lhs: np.asarray(
        x, np.float32).reshape((1,) + x.shape if lhs else (1,) + x.shape))
    monkeypatch.setattr(kd, "cublas_library", lambda: object())
    monkeypatch.setattr(kd, "_try_gemm", lambda lib, gemm, *a: asked.append(gemm.compute_type))
    monkeypatch.setattr(kd, "_matmul", lambda a, b, i, o: np.matmul(a, b))
    out = kd.dot_general(np.ones((4, 8), np.float32), np.ones((8, 2), np.float32), **params)
    np.testing.assert_array_equal(out, np.full((4, 2), 8.0, np.float32))
    assert asked == ([] if mode is None else [getattr(kd, f"CUBLAS_COMPUTE_32F_{mode}")])

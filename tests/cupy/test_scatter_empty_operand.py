"""The CuPy scatter kernels handed an empty operand directly (``backend.execute``; through
plax the core answers that case itself: ``plax.core.passes.register_value_identity``): nothing
is launched, since a clamp on the empty axis would aim outside the operand, and the empty
operand comes back in every mode."""
from __future__ import annotations

import numpy as np
import pytest

from plax import lax
from plax.lax.slicing import GatherScatterMode, ScatterDimensionNumbers

from gpu_env import requires_gpu

pytestmark = requires_gpu

PRIMS = [lax.scatter_p, lax.scatter_add_p, lax.scatter_mul_p, lax.scatter_min_p,
         lax.scatter_max_p]


@pytest.mark.parametrize("mode", list(GatherScatterMode), ids=lambda m: m.name)
def test_no_kernel_writes_into_an_empty_operand(cupy_backend, mode, monkeypatch):
    from plax_cupy import kernels_indexing
    launched = []
    real_launch = kernels_indexing.launch_raw
    monkeypatch.setattr(kernels_indexing, "launch_raw",
                        lambda *a, **k: launched.append(a[1]) or real_launch(*a, **k))
    gpu = cupy_backend.devices()[0]
    dn = ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                 scatter_dims_to_operand_dims=(0,))
    operand = np.zeros((0, 3), np.float32)
    indices, updates = np.array([[0], [-1]], np.int32), np.ones((2, 3), np.float32)
    for prim in PRIMS:
        out = cupy_backend.execute(prim, *(cupy_backend.put(a, gpu) for a in
                                           (operand, indices, updates)),
                                   dimension_numbers=dn, indices_are_sorted=False,
                                   unique_indices=False, mode=mode)
        got = np.asarray(cupy_backend.to_host(out))
        assert got.shape == (0, 3) and got.dtype == np.float32, prim
    assert launched == []
    # a non-empty operand is written (the recorder sees the kernels)
    cupy_backend.execute(lax.scatter_add_p, *(cupy_backend.put(a, gpu) for a in
                                              (np.zeros((2, 3), np.float32), indices, updates)),
                         dimension_numbers=dn, indices_are_sorted=False, unique_indices=False,
                         mode=mode)
    assert launched == ["plax_scatter_targets", "plax_scatter_combine"]

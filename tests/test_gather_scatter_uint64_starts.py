"""uint64 start indices of 2**63 and more in gather and scatter on the CPU backends: they are
out of bounds on the high side, so ``clip`` clamps them to the last window and ``fill``/
``promise_in_bounds`` scatters drop them (as JAX with x64 on). The NumPy kernels converted the
indices to int64 first, which wrapped such a start negative: clamped to 0 instead of the top."""
import importlib.util

import numpy as np
import pytest

import plax
from plax import lax

_BACKENDS = ["numpy", pytest.param("numba", marks=pytest.mark.skipif(
    importlib.util.find_spec("numba") is None, reason="numba is not installed"))]

_STARTS = np.array([[2**63], [2**64 - 1], [3], [2**63 - 1], [9]], np.uint64)


def _clamped(starts: np.ndarray, top: int) -> np.ndarray:
    """The reference rule in Python integers: clamp each start to [0, top]."""
    return np.array([min(int(s), top) for s in starts.ravel()])


@pytest.mark.parametrize("backend", _BACKENDS)
def test_gather_clamps_huge_uint64_starts_to_the_top(backend):
    x = np.arange(10.0) * 1.5
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,),
                                    start_index_map=(0,))
    with plax.config.override("enable_x64", True):
        clip = plax.jit(lambda x, i: lax.gather(x, i, dn, (1,), mode="clip"),
                        backend=backend)(x, _STARTS)
        fill = plax.jit(lambda x, i: lax.gather(x, i, dn, (1,), mode="fill"),
                        backend=backend)(x, _STARTS)
    np.testing.assert_array_equal(np.asarray(clip), x[_clamped(_STARTS, 9)])
    inside = _STARTS.ravel() <= 9
    np.testing.assert_array_equal(np.asarray(fill), np.where(inside, x[_clamped(_STARTS, 9)],
                                                             np.nan))


@pytest.mark.parametrize("backend", _BACKENDS)
def test_scatter_add_clamps_or_drops_huge_uint64_starts(backend):
    updates = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    with plax.config.override("enable_x64", True):
        got = {m: np.asarray(plax.jit(lambda x, i, u: lax.scatter_add(x, i, u, dn, mode=m),
                                      backend=backend)(np.zeros(10), _STARTS, updates))
               for m in ("clip", "fill")}
    want_clip, want_fill = np.zeros(10), np.zeros(10)
    np.add.at(want_clip, _clamped(_STARTS, 9), updates)
    inside = _STARTS.ravel() <= 9
    np.add.at(want_fill, _clamped(_STARTS, 9)[inside], updates[inside])
    np.testing.assert_array_equal(got["clip"], want_clip)
    np.testing.assert_array_equal(got["fill"], want_fill)

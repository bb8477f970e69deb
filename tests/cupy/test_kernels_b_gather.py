"""``gather`` computed inside its reader's kernel (structural fusion, issue 24) on the simulated
GPU (run by test_kernels_b_simulated.py): a gather with the elementwise work after it (and the
index normalization before it) is one kernel per call with CUDA graphs off (it launched two or
three: the indices, the gather, the reader), its values equal to the NumPy backend's bit for bit
(exact arithmetic only) for every ``GatherDimensionNumbers`` form the programs stage (collapsed,
offset, operand-batching axes, several start axes), the three modes with indices out of bounds
both ways, index dtypes signed and unsigned (uint64 starts >= 2^63), operand dtypes of every
width (bfloat16, complex) and size-0 indices; a lone gather stays its own kernel."""
from __future__ import annotations

import numpy as np
import pytest

from test_kernels_a_simulated import on_a_gpu
from test_kernels_b_structural import _launches_and_value

pytestmark = on_a_gpu


def _run(f, *args):
    """``(launches, kernel names, result)`` of the second jitted call of ``f`` on the GPU."""
    import fake_cupy
    launches, got = _launches_and_value(f, *args)
    return launches, [name for name, _, _ in fake_cupy.LAUNCHES[len(fake_cupy.LAUNCHES) - launches:]], got


def _bits(a) -> np.ndarray:
    """``a``'s bits (complex as its parts), so NaN fills compare too."""
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "c":
        a = a.view(a.real.dtype)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind != "b" else a


def _check(f, *args, launches: int = 1):
    import plax
    got_launches, names, got = _run(f, *args)
    want = np.asarray(plax.jit(f, backend="numpy")(*args))
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    assert got_launches == launches, (got_launches, names)
    return names


#: operand dtypes: one of each width, bfloat16 and complex
_DTYPES = ["float32", "bfloat16", "int8", "uint16", "float64", "complex64", "bool"]


def _sample(shape, dtype):
    import ml_dtypes
    dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    x = np.arange(np.prod(shape, dtype=int)).reshape(shape) * 3 - 7
    if np.dtype(dtype).kind == "c":
        return (x + 0.5j * x[::-1] if x.ndim else x + 0.5j).astype(dtype)
    return (x % 2 == 1) if dtype == np.bool_ else x.astype(dtype)


def _twice(v):
    """Exact elementwise work after the gather, in every dtype."""
    return v != v[..., :1] if v.dtype == np.bool_ else v + v


@pytest.mark.parametrize("mode", ["clip", "fill", "promise_in_bounds"])
@pytest.mark.parametrize("dtype", _DTYPES)
def test_gather_forms_fuse_into_their_reader(dtype, mode, monkeypatch):
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    x = _sample((5, 3), dtype)
    idx = np.array([0, 4, 7, -1, 2, 2, -9], np.int32)   # out of bounds both ways, a duplicate
    if mode == "promise_in_bounds":
        idx = idx[[0, 1, 4, 5]]
    # take along axis 0 (collapsed, offset axes), a fill value, along axis 1
    names = _check(lambda x, i: _twice(x.at[i].get(mode=mode)), x, idx)
    assert "plax_gather" not in names, names
    _check(lambda x, i: _twice(x.at[i].get(mode=mode, fill_value=1)), x, idx)
    _check(lambda x, i: _twice(x.at[:, i].get(mode=mode)), x, idx)


def test_gather_dimension_numbers_index_dtypes_and_producers(monkeypatch):
    import plax
    from plax import lax
    from plax import numpy as jnp
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    x = _sample((4, 5, 6), "float32")
    i = np.array([[0, 1], [3, 4], [2, -2], [1, 9]], np.int32)
    # two start axes around a kept one; a slice of a window; take_along_axis (its indices
    # normalized, iota index vectors concatenated: all one kernel)
    _check(lambda x, i: x[i[:, 0], :, i[:, 1]] * 2.0, x, i)
    _check(lambda x, i: x[:, i[:, 0], 1:4] - 1.0, x, i)
    _check(lambda x, i: jnp.take_along_axis(x, i[None, :, :1] % 5, axis=1) * 4.0, x, i)
    # operand-batching axes: vmap of dynamic_slice
    f = plax.vmap(lambda row, s: lax.dynamic_slice(row, (s,), (3,)))
    _check(lambda x, s: f(x, s) + 1.0, x[:, 0], i[:, 1])
    # the operand computed by fused producers (at the gathered elements only), and the
    # gathered values reduced in the same kernel
    _check(lambda x, i: jnp.take(jnp.abs(x) - 3.0, i, axis=2), x, i)
    _check(lambda x, i: (x[i[:, 0]] * 2.0).sum(axis=(1, 2)), x, i)
    # index dtypes: unsigned ones far out of bounds are clamped or filled, never wrapped
    for index_dtype in (np.uint8, np.int16, np.int64, np.uint32):
        u = np.array([1, 3, np.iinfo(index_dtype).max, 0, 2], index_dtype)
        for mode in ("clip", "fill"):
            _check(lambda x, u: x.at[:, u].get(mode=mode) + 1.0, x, u)
    from plax.lax.slicing import GatherDimensionNumbers
    dn = GatherDimensionNumbers(offset_dims=(0, 2), collapsed_slice_dims=(1,), start_index_map=(1,))
    with plax.config.override("jax_enable_x64", True):   # (uint64 starts, read as they are)
        # XLA's rule, as JAX and gather's own kernel apply it (the NumPy backend reads starts
        # >= 2^63 as negative: 0 where clipped): compared with the rule written in NumPy
        u = np.array([[1], [2**63], [2**64 - 1], [2**63 - 1], [0]], np.uint64)
        x64 = x.astype(np.float64)
        rows = np.minimum(u[:, 0], 4).astype(np.int64)
        for mode in ("clip", "fill"):
            want = x64[:, rows] + 1.0
            if mode == "fill":
                want[:, u[:, 0] > 4] = np.nan
            launches, _, got = _run(lambda x, u: lax.gather(x, u, dn, (4, 1, 6), mode=mode) + 1.0,
                                    x64, u)
            assert launches == 1
            np.testing.assert_array_equal(_bits(got), _bits(want))
    # size-0 indices and a size-0 result: no launch
    assert _run(lambda x, i: x[i[:, 0]] + 1.0, x, i[:0])[0] == 0


def test_a_lone_gather_stays_its_own_kernel(monkeypatch):
    from plax import lax
    from plax.lax.slicing import GatherDimensionNumbers
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    x = _sample((5, 3), "float32")
    dn = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    # indices read as they are and nothing after: no launch to save, gather's own kernel
    names = _check(lambda x, i: lax.gather(x, i, dn, (1, 3), mode="clip"), x,
                   np.array([[1], [7]], np.int32))
    assert names == ["plax_gather"], names
    # a conversion of the indices before it: one kernel (it launched two)
    names = _check(lambda x, i: x.at[i].get(mode="clip"), x, np.array([1, 7], np.uint32))
    assert names == ["plax_elementwise"], names

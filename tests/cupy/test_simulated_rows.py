"""Long rows of the cumulative ops and argmax/argmin on the simulated GPU (issue 24).

:mod:`plax_cupy.kernels_rows` splits few long rows over several blocks (:func:`tiles_for`).
With small tiles forced (64 elements, rows from 128 split), the backend runs the multi-block
kernels on the simulated GPU: every dtype the row kernels take (float16, bfloat16 and complex
among them), ``reverse``, any axis, against NumPy in float64; and the launches are counted as
on a GPU (``plax_cupy.count``): one for a split cumsum (the single-pass look-back; three, five
when its tile totals split again, in the three-pass form behind ``SINGLE_PASS = False``), two
for argmax, one for a row below the threshold, and the tile kernels ran on several blocks; a
replayed CUDA graph of the single-pass scan reuses its tag and scratch and stays right. The host-thread build in ``test_kernels_rows.py`` checks the same kernels with many
threads per block (the simulation runs one).

The tests need the simulated CuPy, so :func:`test_on_the_simulated_gpu` runs this file again
in a child process with ``-p fake_cupy_plugin``; the other tests skip here.
"""
from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__)


@pytest.fixture
def small_tiles(monkeypatch):
    """Tiles of 64 elements, rows from 128 split; float64 and complex128 kept (x64 on)."""
    import plax
    from plax_cupy import kernels_rows
    monkeypatch.setattr(kernels_rows, "tile_of", lambda itemsize: 64)
    monkeypatch.setattr(kernels_rows, "LONG_ROW", 128)
    with plax.config.override("jax_enable_x64", True):
        yield


def _gpu_put(x):
    import plax
    return plax.device_put(x, plax.devices("gpu")[0])


def _counted(fn, *args):
    """``fn(*args)`` on the host, with its launches and host fallbacks."""
    import plax_cupy
    with plax_cupy.count() as c:
        out = np.asarray(fn(*args))
    return out, c


@on_simulated_gpu
@pytest.mark.parametrize("single_pass", [True, False])
def test_long_row_cumsum_launches_and_values(small_tiles, monkeypatch, single_pass):
    import fake_cupy
    import plax
    import plax_cupy
    from plax import lax
    from plax_cupy import kernels_rows
    monkeypatch.setattr(kernels_rows, "SINGLE_PASS", single_pass)
    rng = np.random.default_rng(0)
    x = rng.normal(size=1000).astype(np.float32)
    xd = _gpu_put(x)
    for reverse in (False, True):
        del fake_cupy.LAUNCHES[:]
        got, c = _counted(lambda v: lax.cumsum(v, axis=0, reverse=reverse), xd)
        assert (c.launches, c.host_fallbacks) == (1 if single_pass else 3, 0), c
        grids = {name.rsplit("_float", 1)[-1]: grid[0] for name, grid, _ in fake_cupy.LAUNCHES}
        assert grids == ({"_single_pass": 16} if single_pass else
                         {"_tile_totals": 16, "": 1, "_tiles": 16}), fake_cupy.LAUNCHES
        ref = np.cumsum(x[::-1] if reverse else x, dtype=np.float64)
        np.testing.assert_allclose(got, ref[::-1] if reverse else ref, rtol=2e-5, atol=2e-5)
    # 157 tiles: in three passes their totals split again (3 + 2 launches)
    y = rng.integers(-2**30, 2**30, 10_000).astype(np.int32)
    got, c = _counted(lambda v: lax.cumsum(v, axis=0), _gpu_put(y))
    assert c.launches == (1 if single_pass else 5), c
    np.testing.assert_array_equal(got, np.cumsum(y, dtype=np.int32))   # wraps
    # below the threshold: one block per row, one launch
    got, c = _counted(lambda v: lax.cumsum(v, axis=0), _gpu_put(x[:100]))
    assert c.launches == 1, c
    # under jit (a scaling kernel after the scan, so a graph has two kernels to capture): the
    # same kernels with CUDA graphs off, one graph launch with them on; fed its own results,
    # the program replays its graph on new values with the captured tag and scratch (stale
    # counters would skip every tile: each launch clears them)
    for graphs, launches in (("0", 2 if single_pass else 4), ("1", 1)):
        monkeypatch.setenv("PLAX_CUDA_GRAPHS", graphs)
        f = plax.jit(lambda v: lax.cumsum(v, axis=0) * np.float32(0.01))
        v = xd
        for step in range(6):
            before = np.asarray(v).astype(np.float64)
            with plax_cupy.count() as c:
                v = f(v)
            want = np.cumsum(before) * 0.01
            np.testing.assert_allclose(np.asarray(v), want, rtol=1e-4,
                                       atol=1e-5 * np.abs(want).max(), err_msg=f"{graphs} {step}")
        assert c.launches == launches, (graphs, c)


def _operand(rng, dtype, shape):
    if np.dtype(dtype).kind == "c":
        return (rng.uniform(0.99, 1.01, shape) + 1j * rng.uniform(-0.01, 0.01, shape)).astype(dtype)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-1, 1, shape).astype(dtype)
    return rng.integers(0, 100, shape).astype(dtype)


def _check_cumulative(x, axis, reverse, kernel_suffix):
    """Every cumulative op ``x``'s dtype takes along ``axis`` on the simulated GPU: one launch,
    of the row kernel whose name ends with ``kernel_suffix`` (``""``: the block-a-row one), no
    host fallback, values
    as NumPy's in float64 (complex128)."""
    import fake_cupy
    from plax import lax
    wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    ops = [(lax.cumsum, np.add), (lax.cummax, np.maximum), (lax.cummin, np.minimum)]
    if x.dtype.kind == "c":   # (JAX's complex max/min: a thread per row, not these kernels;
        ops = ops[:1]         # test_kernels_a_reduction.py checks them)
    if x.dtype.kind in "fc":
        ops.append((lax.cumprod, np.multiply))
    for op, ufunc in ops:
        del fake_cupy.LAUNCHES[:]
        got, c = _counted(lambda v: op(v, axis=axis, reverse=reverse), _gpu_put(x))
        assert c.host_fallbacks == 0, c.fallbacks
        assert c.launches == 1, (op, axis, c)
        kernels = [name for name, _, _ in fake_cupy.LAUNCHES if "cumulative" in name]
        assert len(kernels) == 1, kernels
        assert (kernels[0].endswith(kernel_suffix) if kernel_suffix else
                not kernels[0].endswith(("_columns", "_single_pass"))), kernels
        assert not kernels[0].endswith("_columns_single_pass") or "columns" in kernel_suffix
        src = np.flip(wide, axis) if reverse else wide
        want = ufunc.accumulate(src, axis=axis)
        want = np.flip(want, axis) if reverse else want
        if x.dtype.kind in "iu":
            np.testing.assert_array_equal(got, want.astype(x.dtype), err_msg=f"{op} {axis}")
        else:
            tol = 1e-12 if x.dtype in (np.float64, np.complex128) else 1e-5
            if x.dtype in (ml_dtypes.bfloat16, np.float16):
                tol = 0.1 if op is lax.cumsum else 2e-2
            np.testing.assert_allclose(got.astype(want.dtype), want, rtol=tol, atol=tol,
                                       err_msg=f"{op} {x.dtype} {axis} {reverse}")


@on_simulated_gpu
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
                                   np.complex64, np.complex128, np.int64, np.int32, np.uint8])
def test_long_rows_every_dtype_any_axis(small_tiles, monkeypatch, dtype):
    from plax_cupy import kernels_rows
    monkeypatch.setattr(kernels_rows, "COLUMN_PART_STRETCHES", 1)
    rng = np.random.default_rng(1)
    x = _operand(rng, dtype, (700, 3))
    # axis 0: 3 columns of 700 split (the few-columns single pass: tiles of rows by every
    # column); axis 1: 700 rows of 3, a block a row; a row of 700 (the rows' single pass)
    for axis, reverse, suffix in ((0, False, "_columns_single_pass"),
                                  (0, True, "_columns_single_pass"), (1, True, "")):
        _check_cumulative(x, axis, reverse, suffix)
    for reverse in (False, True):
        _check_cumulative(np.ascontiguousarray(x[:, 0]), 0, reverse, "_single_pass")
    # a non-last axis of 33 or 40 columns: a thread a column (the column kernel)
    for shape, axis in (((50, 40), 0), ((2, 30, 33), 1)):
        for reverse in (False, True):
            _check_cumulative(_operand(rng, dtype, shape), axis, reverse, "_columns")
    # a long axis of 40 columns: the column kernel with the axis in parts (a look-back a part)
    for reverse in (False, True):
        _check_cumulative(_operand(rng, dtype, (300, 40)), 0, reverse, "_columns_look_back")


@on_simulated_gpu
def test_long_row_cumlogsumexp(small_tiles):
    from plax import lax
    x = np.random.default_rng(2).normal(size=(2, 500)).astype(np.float64)
    got, c = _counted(lambda v: lax.cumlogsumexp(v, axis=1, reverse=True), _gpu_put(x))
    want = np.flip(np.logaddexp.accumulate(np.flip(x, 1), axis=1), 1)
    assert c.launches == 1 and got.dtype == np.float64, c
    np.testing.assert_allclose(got, want, rtol=1e-12)


@on_simulated_gpu
def test_long_row_argmax_argmin(small_tiles, monkeypatch):
    import fake_cupy
    import plax.numpy as jnp
    from plax_cupy import kernels_rows
    # (a non-last axis: the coalesced column kernel, its axis in parts of 64 rows, forced)
    monkeypatch.setattr(kernels_rows, "column_part_rows",
                        lambda chains, n, segs, itemsize: 64 if n >= 128 else n)
    x = np.random.default_rng(3).integers(-3, 4, (3, 700)).astype(np.float32)  # ties
    x[1, [650, 20]] = np.nan                    # the first NaN, in another tile than the second
    x[2, :] = 0
    x[2, [300, 600]] = 1e-45                    # a subnormal above zero: kept, the first wins
    wide = np.random.default_rng(4).integers(-3, 4, (300, 40)).astype(np.float32)
    wide[[250, 70], 3] = np.nan
    for fn, ref in ((jnp.argmax, np.argmax), (jnp.argmin, np.argmin)):
        for data, axis in ((x, 1), (x.T.copy(), 0), (wide, 0)):
            del fake_cupy.LAUNCHES[:]
            got, c = _counted(lambda v: fn(v, axis=axis), _gpu_put(data))
            assert c.launches == 2 and c.host_fallbacks == 0, c
            kinds = [name.rsplit("_long", 1)[-1] for name, _, _ in fake_cupy.LAUNCHES]
            assert kinds == (["_tile_best", "_of_tiles"] if axis == 1 else
                             ["_columns", "_of_tiles"]), kinds
            np.testing.assert_array_equal(got, ref(data, axis=axis))
        for half in (np.float16, ml_dtypes.bfloat16):   # (the ties survive the rounding)
            h = x.astype(half)
            got, c = _counted(lambda v: fn(v, axis=1), _gpu_put(h))
            assert c.launches == 2, c
            np.testing.assert_array_equal(got, ref(h.astype(np.float32), axis=1))


@on_simulated_gpu
def test_cumulative_table_kernels_have_no_cupy_path_left():
    # the row kernels serve every dtype the primitives take (they refuse booleans); the CuPy
    # forms that served booleans are gone, so a boolean reaching the table kernel is refused
    # by name rather than run on CuPy's flushing scans
    import cupy
    from plax import lax
    from plax.lax.cumlogsumexp import cumlogsumexp_p
    from plax_cupy import kernels
    table = kernels.impls()
    x = cupy.asarray(np.array([[True, False, True]]))
    for prim in (lax.cumsum_p, lax.cumprod_p, lax.cummax_p, lax.cummin_p, cumlogsumexp_p):
        with pytest.raises(TypeError, match="does not take dtype bool"):
            table[prim](x, axis=1, reverse=False)
        with pytest.raises(TypeError, match="bool"):
            prim.abstract_eval(_aval(x), axis=1, reverse=False)


def _aval(x):
    from plax.core.shaped_array import ShapedArray
    return ShapedArray(tuple(x.shape), np.dtype(x.dtype))


@on_simulated_gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("running", [40, 200])
def test_look_back_takes_a_window_of_predecessors_per_step(running, dtype):
    """A tile whose predecessors have published only their totals (their blocks still running)
    walks back over them a window of :data:`~plax_cupy.kernels_rows.WINDOW` at a time: with a
    tile's status and total packed in one word (float32) that is ``ceil(m / W)`` memory round
    trips for ``m`` predecessors, the totals read with their flags; with a flag and a value
    apart (float64) the totals are read again after the walk, ``ceil((m - 1) / W)`` more: the
    packed form halves the round trips. A tile whose predecessor published its inclusive scan
    takes one (packed), or two (the flag, then the value). The state of ``running`` tiles taken
    by blocks still at work is set up in the
    scratch (their tickets taken, tile 0's inclusive scan and the others' totals published),
    then one block scans the rest: bit for bit as a plain run (the carries are the same left
    fold of the totals in tile order)."""
    import cupy
    import fake_cupy
    from plax_cupy import codegen, kernel_modules, kernels_rows
    tile, tiles, window = 64, 260, kernels_rows.WINDOW
    x = np.random.default_rng(7).normal(size=tile * tiles).astype(dtype)
    packed = kernels_rows.packs(x.itemsize)
    source, name = kernels_rows.cumulative_source("sum", "float" if packed else "double")
    module = kernel_modules.module(codegen.PREAMBLE + source, kernels_rows._kernel_names(source))
    kernel = module.get_function(name + "_single_pass")
    counters = fake_cupy.look_back_counters(module)
    xd, state = cupy.asarray(x), cupy.zeros((2,), np.uint64)
    scratch = ([cupy.zeros((tiles,), np.uint64)] if packed else
               [cupy.zeros((tiles,), np.uint32), cupy.zeros((2 * tiles,), dtype)])

    def scan(tag, grid):
        for c in counters.values():
            c.value = 0
        y = cupy.zeros_like(xd)
        kernel((grid,), (1,), (xd, y, state, *scratch, np.int64(1), np.int64(x.size),
                               np.int64(1), np.int32(0), np.int64(tile), np.uint32(tag)))
        return y.get(), {key: c.value for key, c in counters.items()}

    plain, seen = scan(5, 4)
    # blocks in sequence: every predecessor's inclusive scan is out, one round trip a tile
    # packed, two apart
    least = 1 if packed else 2
    assert seen == {"tiles": tiles - 1, "steps": least * (tiles - 1), "most": least}, seen
    np.testing.assert_allclose(plain, np.cumsum(x, dtype=np.float64), rtol=1e-4, atol=1e-3)
    tag = 6
    if packed:   # (a tile's total: its elements folded in order, as one thread reduces them)
        totals = np.add.accumulate(x.reshape(tiles, tile), axis=1, dtype=dtype)[:, -1]
        words = totals[:running].view(np.uint32).astype(np.uint64)
        words[0] |= np.uint64(((tag << 2) | 2) << 32)
        words[1:] |= np.uint64(((tag << 2) | 1) << 32)
        scratch[0][:running] = cupy.asarray(words)
    else:   # (the plain run left every tile's total in vals[:tiles] and tile 0's inclusive
        # scan at vals[tiles]; it cleared the flags and counters)
        host_flags = np.zeros(tiles, np.uint32)
        host_flags[0] = (tag << 2) | 2
        host_flags[1:running] = (tag << 2) | 1
        scratch[0][...] = cupy.asarray(host_flags)
    state[...] = cupy.asarray(np.array([(tag << 32) | running, 0], np.uint64))
    resumed, seen = scan(tag, 1)
    expect = -(-running // window) + (0 if packed else -(-(running - 1) // window))
    assert seen["most"] == expect < running, (seen, expect)
    assert seen == {"tiles": tiles - running, "steps": expect + least * (tiles - running - 1),
                    "most": expect}, seen
    np.testing.assert_array_equal(resumed[running * tile:], plain[running * tile:])
    assert not scratch[0].get().any() and not state.get().any()


@on_simulated_gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_few_columns_look_back_once_per_tile(dtype):
    """The few-columns single pass (a tile: rows of the axis by every column) looks back once
    per tile, whatever the columns. Counted by the simulated module (memory round trips): blocks
    in sequence find their predecessor's inclusive scans out, so each tile after a chain's first
    takes one round trip for float32 (each column's status and total in one word, every column
    read at once) and two for float64 (one flag a tile, then its columns' values). Then
    ``running`` tiles are set up as taken by blocks still at work (the chain's first with its
    inclusive scans out, the others their totals) and one block scans the rest: the first walks
    back over them all, ``ceil(running / W)`` round trips packed (the totals read with their
    status), and apart as many more as windows of passed totals. Values against NumPy bit for bit (an integer-valued
    operand), and the scratch left clear."""
    import cupy
    import fake_cupy
    from plax_cupy import codegen, kernel_modules, kernels_rows
    outer, n, inner, tile_rows, running = 2, 3000, 4, 32, 40
    tiles = -(-n // tile_rows)
    x = np.random.default_rng(8).integers(-50, 50, (outer, n, inner)).astype(dtype)
    packed = kernels_rows.packs(x.itemsize)
    source, name = kernels_rows.cumulative_source("sum", "float" if packed else "double")
    module = kernel_modules.module(codegen.PREAMBLE + source, kernels_rows._kernel_names(source))
    kernel = module.get_function(name + "_columns_single_pass")
    counters = fake_cupy.look_back_counters(module)
    xd = cupy.asarray(x)
    state = cupy.zeros((2,), np.uint64)
    scratch = kernels_rows.group_scratch(outer * tiles, inner, dtype)
    want = np.flip(np.cumsum(np.flip(x, 1), axis=1), 1)

    def scan(tag, grid):
        for c in counters.values():
            c.value = 0
        y = cupy.zeros(x.shape, dtype)
        kernel((grid,), (1,), (xd, y, state, *scratch, np.int64(outer), np.int64(n),
                               np.int64(inner), np.int32(1), np.int64(tile_rows), np.uint32(tag)))
        assert not scratch[0].get().any() and not state.get().any()   # (left clear for a replay)
        return y.get(), {key: c.value for key, c in counters.items()}

    got, seen = scan(3, 5)
    least = 1 if packed else 2
    assert seen == {"tiles": outer * (tiles - 1), "steps": least * outer * (tiles - 1),
                    "most": least}, seen
    np.testing.assert_array_equal(got, want)
    # (outer slice 0's first `running` tiles taken and published by blocks still at work: tile
    # 0's inclusive scans, the others' totals; tile k's totals fold its rows n - 32 (k + 1) ..)
    tag = 6
    totals = np.flip(x[0], 0)[:running * tile_rows].reshape(running, tile_rows, inner).sum(1)
    inclusive = np.cumsum(totals, axis=0)
    if packed:
        words = totals.astype(dtype).view(np.uint32).astype(np.uint64)
        words[0] = inclusive[0].astype(dtype).view(np.uint32)
        words[0] |= np.uint64(((tag << 2) | 2) << 32)
        words[1:] |= np.uint64(((tag << 2) | 1) << 32)
        scratch[0][:running * inner] = cupy.asarray(words.reshape(-1))
    else:
        flags = np.zeros(outer * tiles, np.uint32)
        flags[0], flags[1:running] = (tag << 2) | 2, (tag << 2) | 1
        vals = np.zeros(2 * outer * tiles * inner, dtype)
        vals[:running * inner] = totals.reshape(-1)
        vals[outer * tiles * inner:][:inner] = inclusive[0]
        scratch[0][...] = cupy.asarray(flags)
        scratch[1][...] = cupy.asarray(vals)
    # (tickets 0 .. running - 1 taken: the block takes tile `running` of slice 0 first)
    state[...] = cupy.asarray(np.array([(tag << 32) | running, 0], np.uint64))
    resumed, seen = scan(tag, 1)
    window = kernels_rows.WINDOW
    # (apart, the passed totals are read a window of threads // inner tiles by every column at
    # a time: with the simulated block's one thread, a tile a round trip)
    per = max(1, min(window, 1 // inner))
    expect = -(-running // window) + (0 if packed else -(-(running - 1) // per))
    assert seen["most"] == expect, (seen, expect)
    assert packed or expect > running
    # (the rest in sequence, one look-back each but slice 1's first tile's)
    later = outer * tiles - running - 1
    assert seen == {"tiles": later, "steps": expect + least * (later - 1), "most": expect}, seen
    np.testing.assert_array_equal(resumed[0, :n - running * tile_rows],
                                  want[0, :n - running * tile_rows])
    np.testing.assert_array_equal(resumed[1], want[1])


@on_simulated_gpu
def test_split_column_scan_replays_as_a_graph(small_tiles, monkeypatch):
    """The column kernel with its axis in parts (``_columns_look_back``) under ``jit`` with CUDA
    graphs on: one launch a call, and fed its own results the replayed graph (the captured tag
    and scratch) stays right, since the kernel's last block clears the flags and counters."""
    import plax
    import plax_cupy
    from plax import lax
    from plax_cupy import kernels_rows
    monkeypatch.setattr(kernels_rows, "COLUMN_PART_STRETCHES", 1)
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "1")
    x = np.random.default_rng(10).uniform(-1, 1, (300, 40)).astype(np.float32)
    f = plax.jit(lambda v: lax.cumsum(v, axis=0) * np.float32(0.01))
    v = _gpu_put(x)
    for step in range(4):
        before = np.asarray(v).astype(np.float64)
        with plax_cupy.count() as c:
            v = f(v)
        want = np.cumsum(before, axis=0) * 0.01
        np.testing.assert_allclose(np.asarray(v), want, rtol=1e-4,
                                   atol=1e-5 * np.abs(want).max(), err_msg=f"step {step}")
    assert c.launches == 1, c

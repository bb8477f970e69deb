"""plax_cupy's row kernels (:mod:`plax_cupy.kernels_rows`: the cumulative ops and
argmax/argmin, plax-compiled so float32 subnormals are kept).

The simulated GPU runs one thread per block, so it never exercises the kernels' shared-memory
scan and tree reduction between threads. Here the same source is built on the host with
threads as ``std::thread``\\ s of one block and ``__syncthreads`` as a ``std::barrier`` (shared
arrays are then shared between them, as on a GPU), and run with 256 and 32 threads per block on
rows longer and shorter than a block, against NumPy. With real NVRTC (no GPU needed), every
source compiles with plax's device options, with no flush-to-zero instruction.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from gpu_env import NVRTC_PROBLEM

OPS = ("sum", "prod", "max", "min", "logsumexp")
CTYPES_OF = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
             np.dtype(np.int32): "int", np.dtype(np.int64): "long long",
             np.dtype(np.uint8): "unsigned char", np.dtype(np.int8): "signed char",
             np.dtype(np.complex64): "plax_c64", np.dtype(np.complex128): "plax_c128"}

#: the host's stand-ins for CUDA's block: one std::thread per thread, a barrier per block
_HOST_BLOCK = r"""
#include <barrier>
#include <thread>
#include <vector>
struct plax_dim3 { unsigned int x, y, z; };
static plax_dim3 blockIdx, blockDim, gridDim;
static thread_local plax_dim3 threadIdx;
static std::barrier<>* plax_block_barrier;
static inline void __syncthreads() { plax_block_barrier->arrive_and_wait(); }
#define __global__
#define __shared__ static
"""

_DRIVER = r"""
extern "C" void run_{name}({params}, unsigned int grid, unsigned int threads) {{
  blockDim.x = threads; gridDim.x = grid;
  for (unsigned int b = 0; b < grid; ++b) {{
    blockIdx.x = b;
    std::barrier<> barrier(threads);
    plax_block_barrier = &barrier;
    std::vector<std::thread> pool;
    for (unsigned int t = 0; t < threads; ++t)
      pool.emplace_back([=] {{ threadIdx.x = t; {name}({args}); }});
    for (auto& th : pool) th.join();
  }}
}}
"""

#: a kernel's C parameter type -> its ctypes type (pointers are passed as addresses)
_C_PARAM = {"long long": ctypes.c_longlong, "int": ctypes.c_int, "unsigned int": ctypes.c_uint,
            "float": ctypes.c_float}   # (a float literal operand is passed by value)

_BUILT: dict = {}   # source -> {kernel name: host driver} (one g++ build per source)


def _kernels(tmp_path, source: str, preamble: bool = True) -> dict:
    """Every ``extern "C" __global__`` kernel of ``source`` built for the host with a driver
    ``run_NAME(params..., grid, threads)`` (blocks in sequence, a block's threads as
    ``std::thread``\\ s): ``{name: fn(grid, threads, *args)}``, arrays passed as NumPy arrays.
    ``preamble=False``: ``source`` already begins with plax_cupy's preamble."""
    if source not in _BUILT:
        _BUILT[source] = _build_now(tmp_path, source, preamble)
    return _BUILT[source]


def _build_now(tmp_path, source: str, preamble: bool = True) -> dict:
    """``source`` (after plax_cupy's preamble unless ``preamble`` is False: a source that
    already has it) built now: what :func:`_kernels` caches."""
    from plax_cupy import codegen
    signatures = re.findall(r'extern "C" __global__ void (\w+)\(([^)]*)\)', source)
    drivers = []
    for name, params in signatures:
        names = [re.findall(r"\w+", p)[-1] for p in params.split(",")]
        drivers.append(_DRIVER.format(name=name, params=params, args=", ".join(names)))
    text = _HOST_BLOCK + (codegen.PREAMBLE if preamble else "") + source + "".join(drivers)
    # (a name per source: dlopen would hand back a library already loaded from the same path)
    stem = f"{signatures[0][0]}_{hashlib.sha1(text.encode()).hexdigest()[:12]}"
    src, lib = tmp_path / f"{stem}.cc", tmp_path / f"{stem}.so"
    src.write_text(text)
    done = subprocess.run(["g++", "-std=c++20", "-O0", "-shared", "-fPIC", "-pthread",
                           "-DPLAX_HOST", str(src), "-o", str(lib)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    built = ctypes.CDLL(str(lib))
    fns = {}
    for name, params in signatures:
        fn = getattr(built, f"run_{name}")
        fn.argtypes = [ctypes.c_void_p if "*" in p else _C_PARAM[p.replace("const", "").strip()
                                                                  .rsplit(" ", 1)[0].strip()]
                       for p in params.split(",")] + [ctypes.c_uint, ctypes.c_uint]
        fns[name] = _caller(fn)
    return fns


def _caller(fn):
    def call(grid, threads, *args):
        fn(*[a.ctypes.data if isinstance(a, np.ndarray) else a if isinstance(a, float) else int(a)
             for a in args], grid, threads)
    return call


def _cxx20_problem() -> str:
    """Why the threaded host build cannot run here ('' when it can): g++ with C++20's
    ``<barrier>`` (GCC 11 and later)."""
    if shutil.which("g++") is None:
        return "no C++ compiler (g++)"
    probe = subprocess.run(["g++", "-std=c++20", "-fsyntax-only", "-x", "c++", "-"],
                           input="#include <barrier>\nstd::barrier<> b(1);\n",
                           capture_output=True, text=True)
    return "" if probe.returncode == 0 else "g++ lacks C++20's <barrier> (GCC 11 or later needed)"


_CXX20_PROBLEM = _cxx20_problem()
needs_cxx20 = pytest.mark.skipif(bool(_CXX20_PROBLEM), reason=_CXX20_PROBLEM or "g++")


def _run_cumulative(tmp_path, op, x, axis, reverse, threads, grid=3):
    from plax_cupy import kernels_rows
    source, name = kernels_rows.cumulative_source(op, CTYPES_OF[x.dtype])
    x = np.ascontiguousarray(x)
    outer, n, inner = kernels_rows._layout(x.shape, axis)
    y = np.full_like(x, 7)
    _kernels(tmp_path, source)[name](grid, threads, x, y, outer * inner, n, inner, int(reverse))
    return y


def _reference(op, x, axis, reverse):
    x = np.flip(x, axis) if reverse else x
    acc = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
           "logsumexp": np.logaddexp}[op].accumulate(x, axis=axis, dtype=x.dtype)
    return np.flip(acc, axis) if reverse else acc


@needs_cxx20
@pytest.mark.parametrize("threads", [256, 32])
def test_cumulative_with_a_block_of_threads(tmp_path, threads):
    rng = np.random.default_rng(0)
    cases = [("sum", np.float64, (3, 1000), 1), ("sum", np.float64, (300, 2), 0),
             ("max", np.float32, (2, 5, 301), 2), ("min", np.int64, (4, 7), 1),
             ("prod", np.complex128, (2, 40), 1), ("sum", np.int32, (2, 600), 1),
             ("logsumexp", np.float64, (3, 257), 1)]
    for op, dtype, shape, axis in cases:
        if np.dtype(dtype).kind == "c":
            x = (rng.uniform(0.9, 1.1, shape) + 1j * rng.uniform(-0.1, 0.1, shape)).astype(dtype)
        elif np.dtype(dtype).kind == "f":
            x = rng.normal(size=shape).astype(dtype)
            if op == "max":
                x.reshape(-1)[[5, 400]] = np.nan   # NaN propagates from where it appears on
        else:
            x = rng.integers(-2**30, 2**30, shape).astype(dtype)  # int32 sums wrap
        for reverse in (False, True):
            got = _run_cumulative(tmp_path, op, x, axis, reverse, threads)
            want = _reference(op, x, axis, reverse)
            if dtype in (np.int32, np.int64):
                np.testing.assert_array_equal(got, want, err_msg=f"{op} {shape} {reverse}")
            else:   # (summation order differs from NumPy's sequential one)
                np.testing.assert_allclose(got, want, rtol=1e-10 if np.dtype(dtype).itemsize >= 8 else 1e-6,
                                           err_msg=f"{op} {dtype} {shape} {reverse}")


@needs_cxx20
@pytest.mark.parametrize("threads", [256, 32])
def test_cumulative_columns_with_a_block_of_threads(tmp_path, threads):
    """The column kernel (a non-last axis of many columns: a thread a column, a stretch's
    segments folded in order) with real threads, every segment count, against NumPy: bit for
    bit with one segment (a column is then NumPy's sequential fold) and for integers, max and
    min; close otherwise (the segments' totals change the order of a float sum)."""
    from plax_cupy import kernels_rows
    rng = np.random.default_rng(4)
    # (the sources of the test above: no new g++ build)
    cases = [("sum", np.float64, (300, 40), 0), ("max", np.float32, (3, 50, 33), 1),
             ("min", np.int64, (9, 70), 0), ("prod", np.complex128, (40, 2, 32), 0),
             ("sum", np.int32, (130, 64), 0), ("logsumexp", np.float64, (2, 100, 40), 1)]
    for op, dtype, shape, axis in cases:
        x = _operand(rng, op, dtype, shape)
        if op == "max":
            x[1, 30, 5] = np.nan   # NaN propagates down its column from there
        source, name = kernels_rows.cumulative_source(op, CTYPES_OF[x.dtype])
        outer, n, inner = kernels_rows._layout(x.shape, axis)
        chosen = kernels_rows.column_segments(n, inner, x.itemsize)
        for segs in sorted({1, 2, 8, chosen}):
            for reverse in (False, True):
                y = np.full_like(x, 7)
                _kernels(tmp_path, source)[name + "_columns"](2, threads, x, y, outer, n, inner,
                                                              int(reverse), segs)
                want = _reference(op, x, axis, reverse)
                msg = f"{op} {dtype} {shape} segs {segs} reverse {reverse}"
                if segs == 1 or op in ("max", "min") or x.dtype.kind in "iu":
                    np.testing.assert_array_equal(y, want, err_msg=msg)
                else:
                    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-11, err_msg=msg)


@needs_cxx20
@pytest.mark.parametrize("threads", [256, 32])
def test_argmax_argmin_with_a_block_of_threads(tmp_path, threads):
    from plax_cupy import kernels_rows
    rng = np.random.default_rng(1)
    x = rng.integers(-3, 4, (3, 700)).astype(np.float32)   # many ties: the first index wins
    x[1, [650, 20]] = np.nan                                 # the first NaN wins
    x[2, :] = 0
    x[2, 500] = 1e-45                                        # a subnormal is above zero
    for is_max, numpy_fn in ((True, np.argmax), (False, np.argmin)):
        for data, axis in ((x, 1), (x.T.copy(), 0), (x[:, :5].copy(), 1)):
            source, name = kernels_rows.argextreme_source(is_max, "float", "int")
            outer, n, inner = kernels_rows._layout(data.shape, axis)
            out = np.full(outer * inner, -7, np.int32)
            if inner == 1:   # (contiguous rows: a block a row)
                _kernels(tmp_path, source)[name](2, threads, data, out, outer, n)
            else:            # (a non-last axis: the coalesced column kernel, in one part)
                segs = kernels_rows.arg_column_segments(n, inner, data.itemsize)
                unused = np.zeros(1, np.float32), np.zeros(1, np.int64)
                _kernels(tmp_path, source)[name + "_columns"](2, threads, data, *unused, out,
                                                              outer, n, inner, segs, n)
            np.testing.assert_array_equal(out, numpy_fn(data, axis=axis), err_msg=f"{is_max} {axis}")


class _HostRows:
    """:func:`plax_cupy.kernels_rows.scan_rows` / ``arg_rows`` run on the host build: their
    launches go to the host drivers (``threads`` per block, at most ``grid`` blocks, so the
    grid-stride loops run too) and their scratch buffers are NumPy arrays filled with 7s (a
    pass that skips an element shows)."""

    def __init__(self, tmp_path, threads, grid=3):
        self.tmp_path, self.threads, self.grid = tmp_path, threads, grid
        self.launches: list = []

    def launch(self, source, name, jobs, *args):
        self.launches.append(name)
        _kernels(self.tmp_path, source)[name](min(jobs, self.grid), self.threads, *args)

    @staticmethod
    def empty(shape, dtype):
        return np.full(shape, 7, dtype)

    @staticmethod
    def empty_like(a):
        return np.full_like(a, 7)


@pytest.fixture
def host_rows(monkeypatch, tmp_path, request):
    """Small tiles (64 elements, rows from 128 split), kernels on the host build."""
    from plax_cupy import kernels_rows
    rows = _HostRows(tmp_path, request.param)
    monkeypatch.setattr(kernels_rows, "tile_of", lambda itemsize: 64)
    monkeypatch.setattr(kernels_rows, "LONG_ROW", 128)
    monkeypatch.setattr(kernels_rows, "_launch", rows.launch)
    monkeypatch.setattr(kernels_rows, "cupy", rows)
    return rows


def _operand(rng, op, dtype, shape):
    if np.dtype(dtype).kind == "c":
        return (rng.uniform(0.9, 1.1, shape) + 1j * rng.uniform(-0.1, 0.1, shape)).astype(dtype)
    if np.dtype(dtype).kind == "f":
        return (rng.uniform(0.99, 1.01, shape) if op == "prod" else rng.normal(size=shape)).astype(dtype)
    return rng.integers(-2**30, 2**30, shape).astype(dtype)  # int32 sums wrap


@needs_cxx20
@pytest.mark.parametrize("single_pass", [True, False])
@pytest.mark.parametrize("host_rows", [32, 8], indirect=True)
def test_cumulative_over_several_blocks(host_rows, single_pass, monkeypatch):
    from plax_cupy import kernels_rows
    monkeypatch.setattr(kernels_rows, "SINGLE_PASS", single_pass)
    rng = np.random.default_rng(2)
    # (shape, axis): one row of 16 tiles (the last partial), two rows along axis 0 (inner 2:
    # the few-columns single pass), five columns of two outer slices (likewise),
    # one row of 157 tiles (its totals split again: a second level), rows below LONG_ROW
    cases = [("sum", np.float32, (1000,), 0), ("sum", np.float64, (1000, 2), 0),
             ("sum", np.float32, (2, 300, 5), 1),
             ("max", np.float32, (3, 1000), 1), ("min", np.int64, (2, 300), 1),
             ("prod", np.complex128, (1, 700), 1), ("sum", np.int32, (10000,), 0),
             ("logsumexp", np.float64, (2, 500), 1), ("sum", np.float64, (1, 129), 1),
             ("sum", np.float64, (1, 100), 1)]
    # (ops and dtypes of the test above where they do: each new one is a g++ build)
    for op, dtype, shape, axis in cases:
        x = _operand(rng, op, dtype, shape)
        if op == "max":
            x[1, 700] = np.nan   # from a later tile on, NaN
        outer, n, inner = kernels_rows._layout(x.shape, axis)
        tiles = -(-n // 64) if n >= 128 else 1
        second = -(-tiles // 64) if tiles >= 128 else 1
        for reverse in (False, True):
            host_rows.launches.clear()
            got = np.full_like(x, 7)
            kernels_rows.scan_rows(op, x, got, outer, n, inner, reverse)
            # one launch a row of one tile, or a single pass; three passes per level of tiles
            # (the last level one)
            levels = (tiles > 1) + (second > 1)
            assert len(host_rows.launches) == (1 if single_pass else 1 + 2 * levels), \
                (shape, host_rows.launches)
            if single_pass and tiles > 1:   # (a non-last axis of few columns: tiles of them all)
                suffix = "_columns_single_pass" if 1 < inner < 32 else "_single_pass"
                assert re.search(rf"_(float|double|int|long_long|plax_c128){suffix}$",
                                 host_rows.launches[0]), (shape, host_rows.launches)
            want = _reference(op, x.astype(np.complex128 if x.dtype.kind == "c" else
                                           np.float64 if x.dtype.kind == "f" else x.dtype),
                              axis, reverse)
            if x.dtype.kind in "iu":
                np.testing.assert_array_equal(got, want, err_msg=f"{op} {shape} {reverse}")
            else:   # (float32: the tiles' order of summation differs from a sequential one)
                tol = 1e-10 if np.dtype(dtype).itemsize >= 16 or dtype == np.float64 else 2e-5
                np.testing.assert_allclose(got, want.astype(x.dtype), rtol=tol, atol=tol,
                                           err_msg=f"{op} {dtype} {shape} {reverse}")


#: blocks as concurrent host threads (one thread each: ``__shared__`` is per thread), so
#: the single-pass scan's blocks really wait on each other's flags
_CONCURRENT_BLOCKS = r"""
#include <thread>
#include <vector>
struct plax_dim3 { unsigned int x, y, z; };
static thread_local plax_dim3 blockIdx, threadIdx;
static plax_dim3 blockDim = {1, 1, 1}, gridDim;
static inline void __syncthreads() {}
#define __global__
#define __shared__ static thread_local
// four tiles in five hold a while between publishing their totals and their inclusive scans,
// so the tiles after them pass several totals and fold them
#include <chrono>
#define PLAX_ROW_AFTER_TOTAL(job) \
  if ((job) % 5) std::this_thread::sleep_for(std::chrono::microseconds(200))
"""

_CONCURRENT_DRIVER = r"""
extern "C" void run_{name}({params}, unsigned int grid) {{
  gridDim.x = grid;
  std::vector<std::thread> blocks;
  for (unsigned int b = 0; b < grid; ++b)
    blocks.emplace_back([=] {{ blockIdx.x = b; threadIdx.x = 0; {name}({args}); }});
  for (auto& th : blocks) th.join();
}}
"""

#: the look-back kernels a concurrent build drives (one g++ build per source for all three)
_LOOK_BACK_KERNELS = ("_single_pass", "_columns_single_pass", "_columns_look_back")

_CONCURRENT_BUILT: dict = {}   # source -> {kernel suffix: run}


def _concurrent_single_pass(tmp_path, ctype, kernel_suffix="_single_pass"):
    """The single-pass kernel (``name + kernel_suffix``, one of :data:`_LOOK_BACK_KERNELS`) on
    ``ctype`` built with blocks as concurrent host threads: ``run(grid, *the kernel's
    arguments)`` (arrays first, as NumPy arrays). One build per source drives all three."""
    from plax_cupy import codegen, kernels_rows
    source, name = kernels_rows.cumulative_source("sum", ctype)
    if source not in _CONCURRENT_BUILT:
        _CONCURRENT_BUILT[source] = _build_concurrent(tmp_path, codegen.PREAMBLE + source, name)
    return _CONCURRENT_BUILT[source][kernel_suffix]


def _build_concurrent(tmp_path, source: str, name: str) -> dict:
    """``source``'s :data:`_LOOK_BACK_KERNELS` built for :func:`_concurrent_single_pass`."""
    signatures = {suffix: re.search(rf'void {name + suffix}\(([^)]*)\)', source).group(1)
                  for suffix in _LOOK_BACK_KERNELS}
    drivers = [_CONCURRENT_DRIVER.format(
        params=params, name=name + suffix,
        args=", ".join(re.findall(r"\w+", p)[-1] for p in params.split(",")))
        for suffix, params in signatures.items()]
    text = _CONCURRENT_BLOCKS + source + "".join(drivers)
    stem = f"concurrent_{hashlib.sha1(text.encode()).hexdigest()[:12]}"
    src, lib = tmp_path / f"{stem}.cc", tmp_path / f"{stem}.so"
    src.write_text(text)
    done = subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread",
                           "-DPLAX_HOST", str(src), "-o", str(lib)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    built = ctypes.CDLL(str(lib))
    runs = {}
    for suffix, params in signatures.items():
        fn = getattr(built, f"run_{name + suffix}")
        fn.argtypes = [ctypes.c_void_p if "*" in p else
                       _C_PARAM[p.replace("const", "").strip().rsplit(" ", 1)[0].strip()]
                       for p in params.split(",")] + [ctypes.c_uint]
        runs[suffix] = _concurrent_caller(fn, params.count("*"))
    return runs


def _concurrent_caller(fn, pointers: int):
    def run(grid, *arrays_then_ints):
        arrays, ints = arrays_then_ints[:pointers], arrays_then_ints[pointers:]
        fn(*[a.ctypes.data for a in arrays], *ints, grid)
    return run


@needs_cxx20
@pytest.mark.parametrize("dtype, span, columns", [(np.float32, None, 1), (np.float32, 3, 1),
                                                  (np.float64, None, 1), (np.float32, None, 3),
                                                  (np.float64, None, 3), (np.float32, None, 33),
                                                  (np.float32, 3, 3), (np.float32, 3, 33)])
def test_single_pass_scan_with_concurrent_blocks(tmp_path, monkeypatch, dtype, span, columns):
    """The look-back between blocks running at once (host threads: x86's memory order, not
    a GPU's, so the fences are not tested): values against NumPy, bit for bit the same as
    blocks in sequence whatever the timing (the carries are one left fold of the tile
    totals, in tile order), and the scratch left cleared for a replay with the same tag.
    float32 publishes a tile's status and total in one word (the packed look-back; ``span``
    3: a tile passing 3 totals waits on the farthest, so the bounded walk runs too, for one
    column or each column of a group), float64 as a flag and a value apart. ``columns`` 3: the
    scan runs along axis 1 of ``(2, n, 3)``, tiles of 32 rows by the 3 columns (the few-columns
    single pass: one look-back a tile for its columns, float32 a word a column); 33: the column
    kernel with its axis in parts of 32 rows (``_columns_look_back``; blocks of one thread: a
    group a column; it fails when a part ignores its carry). (The span-3 cases share one
    build.)"""
    from plax_cupy import kernels_rows
    if span is not None:
        monkeypatch.setattr(kernels_rows, "LOOK_BACK_SPAN", span)
    suffix = ("_single_pass" if columns == 1 else "_columns_single_pass" if columns < 32 else
              "_columns_look_back")
    run = _concurrent_single_pass(tmp_path, CTYPES_OF[np.dtype(dtype)], suffix)
    rng = np.random.default_rng(5)
    n, tile = 2000 if columns == 1 else 700 if columns < 32 else 300, 32
    shape = (3, n) if columns == 1 else (2, n, columns)
    x = (rng.normal(size=shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(dtype)
    slots = x.size // n * -(-n // tile)
    state = np.full(2, 7, np.uint64)
    packed = kernels_rows.packs(x.itemsize)
    if columns > 1:   # (a word a column and tile; or a flag a tile, its columns' totals beside it)
        tickets = slots // columns if columns < 32 else slots
        scratch = ([np.full(slots, 7, np.uint64)] if packed else
                   [np.full(tickets, 7, np.uint32), np.full(2 * slots, 7, dtype)])
    else:
        scratch = ([np.full(slots, 7, np.uint64)] if packed else
                   [np.full(slots, 7, np.uint32), np.full(2 * slots, 7, dtype)])
    results = []
    for trial, grid in enumerate([1, 8, 8, 5, 8]):   # grid 1: the blocks in sequence
        for reverse in (0, 1):
            y = np.full_like(x, 7)
            segments = (8,) if columns >= 32 else ()   # (the split column kernel's)
            run(grid, x, y, state, *scratch, shape[0], n, 1 if columns == 1 else columns,
                reverse, *segments, tile, 1 + trial % 2)
            assert not state.any() and not scratch[0].any(), "scratch left set"
            want = _reference("sum", x.astype(np.float64), 1, bool(reverse))
            np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-3 * np.abs(x).max())
            results.append((reverse, y))
    for reverse, y in results[2:]:
        np.testing.assert_array_equal(y, results[reverse][1])   # bit for bit, any timing


@needs_cxx20
@pytest.mark.parametrize("host_rows", [32, 8], indirect=True)
def test_split_column_scan_over_several_blocks(host_rows, monkeypatch):
    """A non-last axis of 32 columns or more cut in parts (``_columns_look_back``; parts of one
    stretch forced), with a block of 32 or 8 threads: one launch, values as NumPy's (bit for
    bit for integers, max and min; NaN carried into later parts), either direction; and few
    rows of many columns along a long axis (they took the rows' strided single pass before)."""
    from plax_cupy import kernels_rows
    monkeypatch.setattr(kernels_rows, "COLUMN_PART_STRETCHES", 1)
    rng = np.random.default_rng(9)
    # (ops and dtypes of the tests above: no new g++ build)
    cases = [("sum", np.float64, (300, 40), 0), ("max", np.float32, (2, 400, 33), 1),
             ("min", np.int64, (500, 32), 0), ("sum", np.int32, (1000, 64), 0),
             ("prod", np.complex128, (200, 32), 0), ("logsumexp", np.float64, (300, 36), 0)]
    for op, dtype, shape, axis in cases:
        x = _operand(rng, op, dtype, shape)
        if op == "max":
            x[1, 130, 5] = np.nan   # from a later part on, NaN down its column
        outer, n, inner = kernels_rows._layout(x.shape, axis)
        for reverse in (False, True):
            host_rows.launches.clear()
            got = np.full_like(x, 7)
            kernels_rows.scan_rows(op, x, got, outer, n, inner, reverse)
            assert host_rows.launches and all(
                name.endswith("_columns_look_back") for name in host_rows.launches), \
                (shape, host_rows.launches)
            assert len(host_rows.launches) == 1, host_rows.launches
            want = _reference(op, x, axis, reverse)
            msg = f"{op} {dtype} {shape} reverse {reverse}"
            if op in ("max", "min") or x.dtype.kind in "iu":
                np.testing.assert_array_equal(got, want, err_msg=msg)
            else:
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-11, err_msg=msg)


@needs_cxx20
def test_column_look_backs_with_a_gpu_block(tmp_path, monkeypatch):
    """The two column look-back kernels as a GPU runs them: blocks of 256 threads and the real
    tiles and parts (the few-columns single pass: tiles of 2048 rows by 4 columns, each column
    reduced by 64 threads at once; the split column kernel: parts of 2 stretches of 8 segments,
    staged in shared memory), so their fold order is the one a GPU gives. Float sums equal
    NumPy's float64 ones within the tolerance the other tests use (float32 2e-5 of the running
    magnitude, float64 1e-12), integers bit for bit; the scratch is sized by ``scan_rows``."""
    from plax_cupy import kernels_rows
    rows = _HostRows(tmp_path, 256, grid=2)
    monkeypatch.setattr(kernels_rows, "LONG_ROW", 128)
    monkeypatch.setattr(kernels_rows, "_launch", rows.launch)
    monkeypatch.setattr(kernels_rows, "cupy", rows)
    rng = np.random.default_rng(11)
    # (sources the tests above build: no new g++ build)
    cases = [(np.float32, (20000, 4), "_columns_single_pass"),
             (np.int32, (20000, 4), "_columns_single_pass"),
             (np.float64, (600, 64), "_columns_look_back")]
    for dtype, shape, suffix in cases:
        x = _operand(rng, "sum", dtype, shape)
        outer, n, inner = kernels_rows._layout(x.shape, 0)
        for reverse in (False, True):
            rows.launches.clear()
            got = np.full_like(x, 7)
            kernels_rows.scan_rows("sum", x, got, outer, n, inner, reverse)
            assert len(rows.launches) == 1 and rows.launches[0].endswith(suffix), rows.launches
            want = _reference("sum", x.astype(np.float64) if x.dtype.kind == "f" else x, 0,
                              reverse)
            if x.dtype.kind in "iu":
                np.testing.assert_array_equal(got, want, err_msg=f"{shape} {reverse}")
            elif dtype == np.float32:
                scale = np.maximum(np.abs(want), np.sqrt(np.arange(1, n + 1))[::-1 if reverse else 1, None])
                assert np.all(np.abs(got - want) <= 2e-5 * scale), (shape, reverse)
            else:
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-11,
                                           err_msg=f"{shape} {reverse}")


@needs_cxx20
@pytest.mark.parametrize("host_rows", [32, 8], indirect=True)
def test_argmax_argmin_over_several_blocks(host_rows, monkeypatch):
    """Rows split in tiles (two launches: each tile's best, then each row's of those), and a
    non-last axis as columns (coalesced: a warp reads consecutive columns of a row, or with
    fewer than 32 columns consecutive rows whole), its axis in parts of 64 rows (forced) and
    each column's best of its parts in part order (a second launch), or in one part (one
    launch): ties and NaN across tiles, segments and parts go to the first index."""
    from plax_cupy import kernels_rows
    monkeypatch.setattr(kernels_rows, "column_part_rows",
                        lambda chains, n, segs, itemsize: 64 if n >= 128 else n)
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, (4, 700)).astype(np.float32)   # ties across tiles: the first wins
    x[1, [650, 20]] = np.nan                                 # the first NaN wins, across tiles
    x[2, :] = 0
    x[2, [300, 600]] = 1e-45                                 # a subnormal above zero, twice
    x[3, 699] = 9                                            # in the last (partial) tile
    x[3, 698] = -9
    wide = rng.integers(-3, 4, (300, 40)).astype(np.float32)
    wide[[250, 70], 3] = np.nan
    wide[:, 39] = 0
    wide[[200, 90], 39] = 1e-45
    for is_max, numpy_fn in ((True, np.argmax), (False, np.argmin)):
        for data, axis in ((x, 1), (x.T.copy(), 0), (x[:, :100].copy(), 1), (wide, 0),
                           (wide.reshape(3, 100, 40), 1), (x[:, :100].T.copy(), 0)):
            host_rows.launches.clear()
            outer, n, inner = kernels_rows._layout(data.shape, axis)
            out = np.full(outer * inner, -7, np.int32)
            kernels_rows.arg_rows(is_max, data, out, outer, n, inner)
            kinds = [name.rsplit("_int", 1)[-1] for name in host_rows.launches]
            if inner > 1:
                assert kinds == (["_columns", "_of_tiles"] if n >= 128 else ["_columns"]), kinds
            else:
                assert kinds == (["_tile_best", "_of_tiles"] if n >= 128 else [""]), kinds
            np.testing.assert_array_equal(out, numpy_fn(data, axis=axis).reshape(-1),
                                          err_msg=f"{is_max} {data.shape} {axis}")


def test_tiles_for():
    from plax_cupy import kernels_rows as k
    tile = k.tile_of(4)
    assert tile == k.THREADS * 32                            # 32 KiB of float32 per block
    assert k.tile_of(8) == k.tile_of(16) * 2 == k.THREADS * 16
    assert k.tiles_for(1, 10**8, tile) == -(-10**8 // tile)    # a long 1-D row: every SM
    assert k.tiles_for(1, k.LONG_ROW - 1, tile) == 1             # short: one launch
    assert k.tiles_for(k.FEW_ROWS, 10**8, tile) == 1             # many rows already fill the GPU
    assert k.tiles_for(k.FEW_ROWS - 1, k.LONG_ROW, tile) == -(-k.LONG_ROW // tile)



def test_a_repeated_launch_builds_its_source_once(monkeypatch):
    """A second ``scan_rows`` / ``arg_rows`` of the same form calls no source builder again
    and hands the module lookup the same preamble-and-source object (no string work per
    launch); a changed setting the source reads (``LOOK_BACK_SPAN``) is another cache entry,
    built once, with the new value in it. (No GPU: the launch is recorded, not run.)"""
    from types import SimpleNamespace
    from plax_cupy import kernel_modules, kernels_rows
    built, texts = [], []

    def counting(builder):
        def build(*args):
            built.append(args)
            return builder(*args)
        return build

    for builder in ("_build_cumulative_source", "_build_argextreme_source"):
        monkeypatch.setattr(kernels_rows, builder, counting(getattr(kernels_rows, builder)))
    module = SimpleNamespace(get_function=lambda name: lambda *launch: None)
    monkeypatch.setattr(kernel_modules, "module",
                        lambda text, names, device_id=None: texts.append(text) or module)
    monkeypatch.setattr(kernels_rows, "cupy",
                        SimpleNamespace(cuda=SimpleNamespace(Device=lambda: SimpleNamespace(id=0))))
    monkeypatch.setattr(kernels_rows, "_grid", lambda jobs, device: 1)
    x, y = np.zeros(10, np.float32), np.zeros(10, np.float32)
    where = np.zeros(1, np.int32)
    for span in (5, 5, 9, 9):   # (spans no other test uses: fresh cache entries)
        monkeypatch.setattr(kernels_rows, "LOOK_BACK_SPAN", span)
        kernels_rows.scan_rows("sum", x, y, 1, 10, 1, True)
    kernels_rows.arg_rows(True, x, where, 1, 10, 1)
    kernels_rows.arg_rows(True, x, where, 1, 10, 1)
    assert built[:2] == [("sum", "float"), ("sum", "float")]
    assert built[2:] in ([], [(True, "float", "int")])   # (built already by an earlier test)
    assert texts[0] is texts[1] and texts[2] is texts[3] and texts[4] is texts[5]
    assert "held[5]" in texts[0] and "held[9]" in texts[2]

def test_a_repeated_complex_scan_builds_its_source_once(monkeypatch):
    """A second complex ``cummax``/``cummin`` launch of the same form builds no source again
    and hands the module lookup the same preamble-and-source object; another form (min, or
    complex128) is its own entry. (No GPU: the launch is recorded, not run.)"""
    from types import SimpleNamespace
    from plax_cupy import kernel_modules, kernels_complex_scan
    texts, launched = [], []
    module = SimpleNamespace(get_function=lambda name: lambda *launch: launched.append(name))
    monkeypatch.setattr(kernel_modules, "module", lambda text, names: texts.append(text) or module)
    x64, x128 = np.zeros(6, np.complex64), np.zeros(6, np.complex128)
    for is_max, x in [(True, x64), (True, x64), (False, x64), (True, x128), (True, x128)]:
        kernels_complex_scan.complex_scan(is_max, x, x.copy(), 1, 6, 1, False)
    assert launched == ["plax_complex_cummax_complex64"] * 2 + ["plax_complex_cummin_complex64"] \
        + ["plax_complex_cummax_complex128"] * 2
    assert texts[0] is texts[1] and texts[3] is texts[4]
    assert len({id(t) for t in texts}) == 3 and "cummin" in texts[2]
    source = kernels_complex_scan.complex_scan_source(True, np.complex64)
    assert kernels_complex_scan.complex_scan_source(True, "complex64") is source


@pytest.mark.skipif(bool(NVRTC_PROBLEM), reason=NVRTC_PROBLEM or "nvrtc")
def test_every_row_kernel_compiles_with_nvrtc_without_warnings_or_flush_to_zero():
    from plax_cupy import codegen, dtypes, kernels_complex_scan, kernels_rows, nvrtc
    sources = []
    for dtype in [np.float32, np.float64, np.int8, np.int32, np.int64, np.uint16, np.uint64,
                  np.complex64, np.complex128]:
        ctype = dtypes.ctype(dtype)
        for op in OPS:
            # (complex max/min never reach the look-back scans: scan_rows sends them to
            # kernels_complex_scan, whose sources are compiled below instead)
            if (op != "logsumexp" or np.dtype(dtype).kind == "f") and \
                    not (np.dtype(dtype).kind == "c" and op in ("max", "min")):
                sources.append(kernels_rows.cumulative_source(op, ctype)[0])
        for is_max in (True, False):
            if np.dtype(dtype).kind != "c":
                sources.append(kernels_rows.argextreme_source(is_max, ctype, "int")[0])
            else:   # (complex cummax/cummin: a thread per row, JAX's rule)
                sources.append(kernels_complex_scan.complex_scan_source(is_max, dtype)[0])
    # (one translation unit per source: each repeats the row helpers)
    for source in sources:
        # (compile_ptx: a warning in NVRTC's log fails the test)
        ptx = nvrtc.compile_ptx(codegen.PREAMBLE + source,
                                options=nvrtc.DEVICE_OPTIONS + ("-arch=compute_80",))
        # (CUDA's math library seeds its expf/log1p with ex2.approx.ftz / rcp.approx.ftz on
        # range-reduced arguments whatever -ftz says: never a subnormal there; the check is on
        # the arithmetic and comparisons: add, mul, fma, setp, max, min, cvt)
        flushing = [line for line in ptx.splitlines() if ".ftz" in line and ".approx.ftz" not in line]
        assert not flushing, flushing[:3]
        # (every kernel of the source is in the module: the split column scan, the few-columns
        # single pass with its one look-back a tile, the coalesced argmax/argmin columns)
        entries = set(re.findall(r"\.entry (\w+)\(", ptx))
        assert set(kernels_rows._kernel_names(source)) <= entries, \
            set(kernels_rows._kernel_names(source)) - entries


@pytest.mark.skipif(bool(NVRTC_PROBLEM) or shutil.which("ptxas") is None,
                    reason=NVRTC_PROBLEM or "no ptxas on the PATH")
def test_look_back_kernels_assemble_for_sm90_without_spills():
    """The group look-back takes a word a column for elements up to 4 bytes, a flag and
    values above; ``benchmarks/gpu_rows.py --registers`` assembles the cumulative kernels of
    float32 (packed words), float64 and complex128 (two words; complex128's staged parts the
    most shared memory: ``ptxas`` refuses more than 48 KiB a block) for sm_90 and finds no
    spill in any (its exit status), printing every look-back kernel of each, with the shared
    memory ptxas lays out within 16 bytes of :func:`kernels_rows.shared_bytes`' count."""
    import sys
    from plax_cupy import kernels_rows
    for ctype, packed in (("float", True), ("double", False), ("plax_c128", False)):
        source, name = kernels_rows.cumulative_source("sum", ctype)
        for kernel in ("_columns_single_pass", "_columns_look_back"):
            params = re.search(rf"void {name + kernel}\(([^)]*)\)", source).group(1)
            assert ("unsigned long long* words" in params) == packed, (ctype, kernel, params)
            assert ("unsigned int* flags" in params) == (not packed), (ctype, kernel, params)
    repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    done = subprocess.run([sys.executable, os.path.join(repo, "benchmarks", "gpu_rows.py"),
                           "--registers"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    rows = re.findall(r"^(\w+)\s+(_\w+)\s+\d+\s+0\s+(\d+)\s+(\d+)$", done.stdout,
                      re.MULTILINE)
    listed = [(ctype, kernel) for ctype, kernel, _, _ in rows]
    for ctype in ("float", "double", "plax_c128"):
        for kernel in ("_single_pass", "_columns_single_pass", "_columns_look_back"):
            assert (ctype, kernel) in listed, (ctype, kernel, done.stdout)
    # (the shared memory source generation checks is ptxas's, give or take its layout)
    assert all(abs(int(smem) - int(counted)) <= 16 for *_, smem, counted in rows), done.stdout


def test_shared_bytes_sizes_every_table_type_and_names_what_it_cannot():
    """:func:`kernels_rows.shared_bytes` sizes a shared array of any C type of the dtype table
    (several extents multiplied, each array aligned to its element), and a type the table
    lacks or extents it cannot read are a ``ValueError`` naming them, not a ``KeyError`` or a
    declaration left out of the count."""
    from plax_cupy import kernels_rows

    def kernel(*declarations):
        return ('extern "C" __global__ void k(int n) {\n' +
                "".join(f"  __shared__ {d};\n" for d in declarations) + "  if (n) { }\n}\n")
    assert kernels_rows.shared_bytes(kernel("bool b[3]", "short s", "plax_bf16 h[2][3]",
                                            "volatile plax_c128 z[2]", "unsigned short u[5]"),
                                     "float") == {"k": 32 + 2 * 16 + 5 * 2}
    # (3 bools, a short after a byte of padding and 6 bfloat16s: 18 bytes, padded to 32 for
    # the complex128s, then 5 unsigned shorts)
    with pytest.raises(ValueError, match="C type 'float2'"):
        kernels_rows.shared_bytes(kernel("float a[4]", "float2 p[4]"), "float")
    with pytest.raises(ValueError, match=r"cannot read '__shared__ float a\[N\];' in k"):
        kernels_rows.shared_bytes(kernel("float a[N]"), "float")


def test_settings_whose_shared_memory_overflows_a_block_are_refused(monkeypatch):
    """Source generation counts each kernel's shared arrays (:func:`kernels_rows.shared_bytes`)
    and refuses a setting that takes a block past 48 KiB (``GROUP_HELD`` 2048: the float32
    split column kernel's held values grow by 1024 x 5 bytes, to 49172), naming the kernel and
    the settings, rather than leaving it to ptxas or the launch."""
    from plax_cupy import kernels_rows
    source, name = kernels_rows.cumulative_source("sum", "float")
    counted = kernels_rows.shared_bytes(source, "float")
    assert max(counted.values()) <= kernels_rows.SHARED_LIMIT
    assert counted[name + "_columns"] == 2 * kernels_rows.THREADS * 4   # (totals, carries)
    monkeypatch.setattr(kernels_rows, "GROUP_HELD", 2048)
    with pytest.raises(ValueError, match=rf"{name}_columns_look_back declares 49172 bytes of "
                                         r"shared memory on float, .*GROUP_HELD=2048"):
        kernels_rows.cumulative_source("sum", "float")
    monkeypatch.setattr(kernels_rows, "GROUP_HELD", 1024)
    monkeypatch.setattr(kernels_rows, "COLUMN_STAGED_STRETCHES", 3)   # (a third 17 KiB stretch)
    with pytest.raises(ValueError, match="_columns_look_back declares"):
        kernels_rows.cumulative_source("sum", "double")

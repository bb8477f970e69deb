"""plax-compiled kernels along one axis: the cumulative ops (``cumsum``, ``cumprod``,
``cummax``, ``cummin``, ``cumlogsumexp``) and ``argmax``/``argmin``.

These ran as CuPy's own kernels (``cupy.cumsum``, ``cupy.argmax``, ...), which CuPy compiles
with ``-ftz=true``: float32 subnormals were flushed to zero in running sums and products, and a
subnormal compared equal to zero in ``argmax``/``argmin``. Here each is a small hand-written
kernel compiled by plax's own NVRTC call (:func:`plax_cupy.kernel_modules.module`,
:data:`plax_cupy.nvrtc.DEVICE_OPTIONS`: ``-ftz=false``), so subnormals are kept as NumPy and
XLA keep them.

Layout: an operand is viewed as ``(outer, n, inner)`` around the axis (C order), one row per
``(outer, inner)`` pair; one thread block works on a row at a time (a grid-stride loop over
rows). A cumulative row is scanned a stretch of :func:`tile_of` elements at a time (32 KiB:
8192 float32), staged through shared memory: consecutive threads load consecutive elements
(coalesced), then each thread folds a contiguous chunk of the staged stretch, the chunk totals
are scanned in shared memory (Hillis-Steele, ``log2(threads)`` steps), each thread rescans its
chunk from the total before it, and the block stores the stretch back as it loaded it.
``reverse`` reads the row from its end. float16 is computed in float32 and rounded once, as
the reference kernels accumulate it (bfloat16 reaches the table widened to float32 by the
backend). These kernels serve every dtype the primitives take (their abstract evaluation
refuses booleans).

Long rows: one block per row leaves most of the GPU idle when the rows are few (a 1-D cumsum
of 1e8 elements ran on one SM). Below :data:`FEW_ROWS` rows of at least :data:`LONG_ROW`
elements (:func:`tiles_for`), each row is cut into tiles of one stretch each, in scan order,
one block per (row, tile). A scan then takes one launch (:data:`SINGLE_PASS`): tiles are taken
in ticket order, each publishes its total and looks back for the nearest earlier tile of its
row whose inclusive scan is published, :data:`WINDOW` predecessors per memory round trip (their
flags read at once, every published total passed), then reads the totals after it a window at
a time and folds them *in tile order* in one thread, so every carry is the same left fold of
the totals whatever the timing (a decoupled look-back that stays deterministic), and scans its
staged elements from that carry. Its scratch needs no clearing (flags and counters carry a
per-launch tag) and the last block out clears it, so a CUDA graph replaying the launch with
the same tag finds it clear. The inter-block protocol (ticket, flags, fences) has run only on
the host (blocks as concurrent threads, and in sequence on the simulated GPU, which counts the
look-back's steps), never on a GPU. The three-pass form it replaces (reduce, then scan, then
rescan: every tile's total, the scan of the ``(rows, tiles)`` totals -- the same dispatcher, so
a very long row recurses --, every tile's scan started from the scanned total before it) stays,
behind ``SINGLE_PASS = False``.
A tile of elements up to 4 bytes publishes its status and value in one 64-bit word
(:func:`packs`): the look-back reads both with one load per predecessor, one round trip per
window, and keeps the totals it passes in shared memory (:data:`LOOK_BACK_SPAN`); wider
elements publish a flag and a value apart.
argmax/argmin take two: every tile's best (value, index), then each row's best of its tiles'
pairs in tile order with the same rules, so ties still go to the first index and the first NaN
still wins. Every launch is plax-compiled and counted (``plax_cupy.counters().launches``).

A non-last axis (``inner`` > 1) would read a row with a stride of ``inner`` elements; these
kernels read it coalesced instead. With at least :data:`COLUMN_MIN` columns a thread takes a
column (``_columns``: a warp on consecutive columns, the axis in segments whose totals are
folded in order); when the column groups are fewer than :data:`COLUMN_CHAINS` the axis is also
cut in parts of :data:`COLUMN_PART_STRETCHES` stretches (:func:`column_part_rows`, a function of
the shape alone, so the fold order is too), a block a (part, group), each part looking back
once for all its columns (``_columns_look_back``), each part read from global memory once (its
:data:`COLUMN_STAGED_STRETCHES` stretches staged in shared memory between folding its totals and
scanning it). With 2 to 31 columns along a long axis, a tile is rows of the axis by every
column, loaded whole (``_columns_single_pass``), its columns reduced at once (``256 // inner``
threads a column) and looked back at once (``_group_look_back``). A group look-back on elements
up to 4 bytes publishes each column's status and total in one 64-bit word, and reads every
walking column's next :data:`WINDOW` predecessors in one round trip; wider elements publish a
flag a tile beside its columns' values (a round trip for the flags, then one for the values).
argmax/argmin along a non-last axis read a column group
(or, under 32 columns, whole rows) a warp at a time (``_columns``), in parts combined in part
order by a second launch.
"""
from __future__ import annotations

import functools
import math
import re

import numpy as np

import cupy

from plax import lax
from plax.lax.cumlogsumexp import cumlogsumexp_p
from plax_cupy import codegen, dtypes, special_source
from plax_cupy.kernels import kernel

#: threads per block of the row kernels (a power of two: the shared-memory scan halves it)
THREADS = 256

#: bytes of a tile each thread stages (as at most :data:`MAX_ITEMS` elements): a tile of
#: 8192 float32 elements or 4096 float64 is 32 KiB of shared memory, and one look-back per tile
#: is paid on half as many float32 tiles as with the 4096-element tiles before
ITEM_BYTES = 128

#: elements per thread of a tile at most (registers hold a thread's items while they are staged)
MAX_ITEMS = 32

#: loads each thread has in flight while staging a tile (registers bound it: see the source)
LOAD_BATCH = 8

#: predecessors a tile's look-back inspects per step (one memory round trip for all of them)
WINDOW = 32

#: rows shorter than this stay one block each (three launches cost more than they save)
LONG_ROW = 1 << 16

#: with this many rows or more, one block per row already fills the GPU (two per SM of an A100)
FEW_ROWS = 216

#: columns from which a cumulative op along a non-last axis runs as columns (a thread a column,
#: a warp on consecutive columns: coalesced) rather than a block per strided row
COLUMN_MIN = 32

#: most segments of a column group: a block of :data:`THREADS` threads is ``THREADS / segs``
#: columns by ``segs`` segments of the axis (8: 32 columns, a warp's 128-byte row segment of
#: float32 per load)
COLUMN_SEGMENTS = 8

#: the byte size of each element C type the row kernels take
_ITEMSIZE = {ctype: dtype.itemsize for dtype, ctype in dtypes.CTYPES.items()}


def items_per_thread(itemsize: int) -> int:
    """Elements each thread stages of a tile of ``itemsize``-byte elements: :data:`ITEM_BYTES`
    worth, at most :data:`MAX_ITEMS`.

    Example:
      >>> items_per_thread(4), items_per_thread(8), items_per_thread(16)
      (32, 16, 8)
    """
    return max(1, min(MAX_ITEMS, ITEM_BYTES // itemsize))


def tile_of(itemsize: int) -> int:
    """Elements per tile of a split row of ``itemsize``-byte elements: as many as a block of
    :data:`THREADS` stages in shared memory at once (the cumulative kernels' capacity).

    Example:
      >>> tile_of(4), tile_of(16)
      (8192, 2048)
    """
    return THREADS * items_per_thread(itemsize)


def column_items(itemsize: int) -> int:
    """Rows of its column each thread of the column kernel loads per stretch (in flight at
    once, then scanned in registers): 64 bytes' worth, at most 16.

    Example:
      >>> column_items(4), column_items(8), column_items(16)
      (16, 8, 4)
    """
    return max(1, min(16, 64 // itemsize))


def column_segments(n: int, inner: int, itemsize: int) -> int:
    """Segments of the axis a block of the column kernel splits each stretch in (a power of
    two, at most :data:`COLUMN_SEGMENTS`): as many as ``n`` rows fill at :func:`column_items`
    rows a segment, and at least enough that a block's ``THREADS / segs`` columns do not
    exceed ``inner`` by more than a warp's worth (threads past the last column idle).

    Example:
      >>> column_segments(4096, 4096, 4), column_segments(8, 10**6, 4), column_segments(64, 32, 4)
      (8, 1, 8)
    """
    by_rows = 1
    while by_rows < COLUMN_SEGMENTS and 2 * by_rows * column_items(itemsize) <= n:
        by_rows *= 2
    width = 32
    while width < THREADS and width < inner:
        width *= 2
    by_columns = min(COLUMN_SEGMENTS, max(1, THREADS // width))
    return max(by_rows, by_columns)


#: column chains (outer slices x column groups of the column kernel) from which they alone give
#: a GPU enough blocks (several resident a multiprocessor: 1024 is ~8 on an H200's 132, ~9.5 on
#: an A100's 108); fewer are cut along the axis (:func:`column_part_rows`)
COLUMN_CHAINS = 1024

#: stretches (``segs * column_items`` rows each) in a part of the axis of the split column
#: kernels: 4 for argmax/argmin (512 float32 rows, 2 KiB of a column; a (4096, 4096) float32
#: axis in 8 parts); the cumulative ops' parts take at most :data:`COLUMN_STAGED_STRETCHES`
COLUMN_PART_STRETCHES = 4

#: stretches of its part the split cumulative column kernel (``_columns_look_back``) stages in
#: shared memory between folding the part's totals and scanning it (each element read from
#: global memory once): a stretch is :data:`THREADS` x 64 bytes, so 2 are 32 KiB a block
COLUMN_STAGED_STRETCHES = 2


def column_part_rows(chains: int, n: int, segs: int, itemsize: int,
                     stretches: int | None = None) -> int:
    """Rows of the axis in each part of the column kernel (``n``: one part, the kernel without
    a look-back): with fewer than :data:`COLUMN_CHAINS` chains (outer slices by column groups),
    parts of ``stretches`` (:data:`COLUMN_PART_STRETCHES` unless given) stretches of ``segs``
    segments, when the axis holds two or more. A function of the shape alone (never of the
    device), so a float sum's fold order is too; the device's multiprocessors set only the grid
    (:func:`_grid`).

    Example:
      >>> column_part_rows(128, 4096, 8, 4), column_part_rows(2, 100, 8, 4)
      (512, 100)
      >>> column_part_rows(2048, 4096, 8, 4), column_part_rows(128, 4096, 8, 4, 2)
      (4096, 256)
    """
    if stretches is None:
        stretches = COLUMN_PART_STRETCHES
    part = stretches * segs * column_items(itemsize)
    if chains >= COLUMN_CHAINS or n < 2 * part:
        return n
    return part


def column_tile_rows(tile: int, inner: int) -> int:
    """Rows of the axis in a tile of the few-columns single pass (``1 < inner <``
    :data:`COLUMN_MIN`): as many as ``tile`` elements hold across ``inner`` columns, a multiple
    of 32 (so each column's stretch of shared memory starts on a padded line), at least 32.

    Example:
      >>> column_tile_rows(8192, 4), column_tile_rows(8192, 31), column_tile_rows(64, 3)
      (2048, 256, 32)
    """
    return max(32, tile // inner // 32 * 32)


def _capacity(ctype: str) -> int:
    """Elements a block of the cumulative kernels on ``ctype`` stages at once (a single-pass
    tile holds at most this many)."""
    return THREADS * items_per_thread(_ITEMSIZE[ctype])

#: ``op`` -> C++ combining ``a`` (earlier in scan order) with ``b`` (later); ``U`` is the
#: unsigned type of an integer's width (wrapping, as XLA; signed overflow is undefined in C++)
_COMBINE = {
    "sum": "plax_row_add(a, b)",
    "prod": "plax_row_mul(a, b)",
    "max": "plax_max(a, b)",
    "min": "plax_min(a, b)",
    "logsumexp": "plax_logaddexp(a, b)",
}

#: the block-wide work of a source is one function its kernels call, not inlined into each of
#: them (that doubled NVRTC's time per source); one call per row or tile costs nothing
_NOINLINE = r"""
#ifndef PLAX_ROW_NOINLINE
#if defined(PLAX_HOST) || defined(PLAX_SIM)
#define PLAX_ROW_NOINLINE
#else
#define PLAX_ROW_NOINLINE __noinline__
#endif
#endif
"""

_HELPERS = _NOINLINE + r"""
#ifndef PLAX_ROW_ATOMICS
#define PLAX_ROW_ATOMICS
#if defined(PLAX_HOST) || defined(PLAX_SIM)
// (the host builds' stand-ins for CUDA's atomics and fences are codegen.PREAMBLE's, which
// comes before these sources)
#include <sched.h>
#define PLAX_ROW_SPIN() sched_yield()
#else
#define PLAX_ROW_SPIN() ((void)0)
#endif
// (tagged counters and reads of published values: codegen.PREAMBLE's plax_tagged_count,
// plax_count_done and plax_read_published)
#if defined(PLAX_HOST) || defined(PLAX_SIM)
// the host builds count each tile's look-back steps (memory round trips: a window of flags, or
// of totals to fold), read by tests through the module's symbols
extern "C" {
unsigned long long plax_sim_look_back_tiles = 0, plax_sim_look_back_steps = 0,
    plax_sim_look_back_most = 0;
}
static inline void plax_row_note_look_back(unsigned long long steps) {
  __atomic_fetch_add(&plax_sim_look_back_tiles, 1ull, __ATOMIC_RELAXED);
  __atomic_fetch_add(&plax_sim_look_back_steps, steps, __ATOMIC_RELAXED);
  unsigned long long most = __atomic_load_n(&plax_sim_look_back_most, __ATOMIC_RELAXED);
  while (steps > most && !__atomic_compare_exchange_n(&plax_sim_look_back_most, &most, steps,
                                                      false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}
#define PLAX_ROW_NOTE_LOOK_BACK(steps) plax_row_note_look_back(steps)
#else
#define PLAX_ROW_NOTE_LOOK_BACK(steps) ((void)(steps))
#endif
// (a threaded host test defines it to hold a tile between publishing its total and its
// inclusive scan, so later tiles meet totals to pass and fold)
#ifndef PLAX_ROW_AFTER_TOTAL
#define PLAX_ROW_AFTER_TOTAL(job) ((void)(job))
#endif
// A look-back step over `seen` (the window's statuses, nearest first: 1 a total, 2 an inclusive
// scan, 0 unset): passes the totals, moving `*end` back over them, and sets `*found` at an
// inclusive scan; returns whether it stopped short of the window's end (the walk goes on)
__device__ __forceinline__ bool plax_row_pass(const unsigned int* seen, long long width,
                                              long long* end, long long* found) {
  long long passed = 0;
  while (passed < width && seen[passed] == 1u) ++passed;
  if (passed < width && seen[passed] == 2u) *found = *end - 1 - passed;
  *end -= passed;
  return passed < width;
}
// A look-back's walk over one flag a tile ((tag << 2) | 1: its total published, | 2: its
// inclusive scan; anything else: unset) for the tile at place `k` > 0 of its chain, ticket
// `job` (the tile at place p: ticket job - (k - p) * stride): `window` predecessors' flags a
// step, the block's threads at once, nearest first, each reader fencing before the values
// the flags publish are read; passes every total up to the nearest inclusive scan and returns
// its place in the chain, adding its steps to `*steps`. The whole block calls it.
__device__ __forceinline__ long long plax_row_walk_flags(unsigned int* flags, long long job,
    long long stride, long long k, unsigned int tag, long long window, unsigned int* seen,
    unsigned long long* steps) {
  const unsigned int agg = (tag << 2) | 1u, inc = (tag << 2) | 2u;
  const int t = threadIdx.x, threads = blockDim.x;
  long long end = k, found = -1;  // (places in the chain: tiles [end, k) published totals)
  while (found < 0) {
    const long long w = end < window ? end : window;
    for (long long i = t; i < w; i += threads) {
      const unsigned int f = *(volatile unsigned int*)(flags + job - (k - end + 1 + i) * stride);
      seen[i] = f == inc ? 2u : f == agg ? 1u : 0u;
    }
    if (t < w) __threadfence();  // (a flag read before the values it publishes)
    __syncthreads();
    const bool short_of_window = plax_row_pass(seen, w, &end, &found);
    ++*steps;
    if (found < 0 && short_of_window) PLAX_ROW_SPIN();  // (a tile not published yet)
    __syncthreads();  // (seen is written again next step)
  }
  return found;
}
// element p of a row's scan order (from its end when reversed)
__device__ __forceinline__ long long plax_row_at(long long base, long long n, long long inner,
                                                 int reverse, long long p) {
  return base + (reverse ? n - 1 - p : p) * inner;
}
// staged element p's place in shared memory: a word of padding per 32 elements, so a thread's
// contiguous chunk (stride of items per thread) and the block's rows both fall on distinct banks
#define PLAX_ROW_PAD(p) ((p) + ((p) >> 5))
#endif
template <typename T> __device__ __forceinline__ T plax_row_add(T a, T b) { return a + b; }
template <typename T> __device__ __forceinline__ T plax_row_mul(T a, T b) { return a * b; }
#define PLAX_ROW_WRAP(T, U) \
  template <> __device__ __forceinline__ T plax_row_add<T>(T a, T b) { return (T)((U)a + (U)b); } \
  template <> __device__ __forceinline__ T plax_row_mul<T>(T a, T b) { return (T)((U)a * (U)b); }
PLAX_ROW_WRAP(int, unsigned int)  // (narrower types are promoted to int: no overflow)
PLAX_ROW_WRAP(long long, unsigned long long)
"""
# (cumlogsumexp's combine: the source the scan kernel's cumlogsumexp uses too)
_HELPERS += special_source.LOGADDEXP_SOURCE


#: predecessors whose published values a tile's packed look-back holds (in shared memory) while
#: it walks back; a tile that passes this many totals without meeting an inclusive scan waits on
#: the farthest one's (that tile was taken earlier, so it finishes: no deadlock)
LOOK_BACK_SPAN = 256


def packs(itemsize: int) -> bool:
    """Whether a tile of ``itemsize``-byte elements publishes its status and value in one 64-bit
    word (the packed look-back: one load per predecessor, no fence between flag and value): up to
    4-byte elements. Wider ones publish a flag word and a value apart (two ordered reads).

    Example:
      >>> packs(4), packs(2), packs(8)
      (True, True, False)
    """
    return itemsize <= 4


def look_back_scratch(jobs: int, dtype) -> list:
    """The uncleared scratch of a single-pass scan of ``jobs`` tiles of ``dtype`` elements, in the
    kernel's parameter order after ``state`` (two ``uint64`` tagged counters, allocated apart):
    ``[words]`` (a ``uint64`` per tile) where :func:`packs`, else ``[flags, vals]`` (a ``uint32``
    per tile, and two elements per tile: aggregates, then inclusive scans).

    Example:
      >>> [a.dtype for a in look_back_scratch(4, np.float32)]   # doctest: +SKIP
      [dtype('uint64')]
    """
    return group_scratch(jobs, 1, dtype)   # (a tile of one column)


def group_scratch(jobs: int, width: int, dtype) -> list:
    """The uncleared scratch of a look-back over ``jobs`` tiles of ``width`` columns of
    ``dtype`` elements (``name + "_group_look_back"``), after ``state``: ``[words]``, a
    ``uint64`` per column a tile (its status and total: :func:`packs`), else ``[flags, vals]``,
    a ``uint32`` flag per tile and ``2 * jobs * width`` elements (the tiles' column totals, then
    their inclusive scans).

    Example:
      >>> [a.size for a in group_scratch(5, 4, np.float32)]   # doctest: +SKIP
      [20]
      >>> [a.size for a in group_scratch(5, 4, np.float64)]   # doctest: +SKIP
      [5, 40]
    """
    dtype = np.dtype(dtype)
    if packs(dtype.itemsize):
        return [cupy.empty((jobs * width,), np.uint64)]
    return [cupy.empty((jobs,), np.uint32), cupy.empty((2 * jobs * width,), dtype)]


def _packed_words(name: str, T: str) -> str:
    """The packed words' helpers of ``name`` on ``T`` (at most 4 bytes: :func:`packs`), for the
    packed look-backs (one column: :func:`_packed_look_back`; several: :func:`_group_look_back`)."""
    return f"""
// A tile's status and value in one 64-bit word: ((tag << 2) | status) << 32 | the value's bits
// (status 1: the tile's total, 2: its inclusive scan). One store publishes both and one load
// reads both (a naturally aligned 64-bit access is single-copy atomic): no fence between a flag
// and its value, and one memory round trip per window of predecessors.
__device__ __forceinline__ unsigned long long {name}_pack({T} v, unsigned int status) {{
  unsigned int bits = 0u;
  memcpy(&bits, &v, sizeof({T}));
  return ((unsigned long long)status << 32) | bits;
}}
__device__ __forceinline__ {T} {name}_unpack(unsigned long long word) {{
  const unsigned int bits = (unsigned int)word;
  {T} v;
  memcpy(&v, &bits, sizeof({T}));
  return v;
}}
// The carry of a packed look-back: the values held for the tiles `far` + 1 .. 1 before this
// one (`held[(d - 1) * stride]` for the tile d before; the farthest an inclusive scan, the
// others totals) folded in tile order. Not unrolled, 32-bit: unrolled, the float32 single pass
// took 72 registers a thread, 3 blocks an SM where 64 leave 4.
__device__ __forceinline__ {T} {name}_fold_held(const {T}* held, int far, int stride) {{
  int i = far * stride;
  {T} acc = held[i];
  #pragma unroll 1
  for (i -= stride; i >= 0; i -= stride) acc = {name}_op(acc, held[i]);
  return acc;
}}
"""


def _packed_look_back(name: str, T: str) -> str:
    """The packed look-back of ``name`` on ``T`` (at most 4 bytes): see
    :func:`_single_pass_source` (its helpers: :func:`_packed_words`)."""
    return f"""
// The walk reads {WINDOW} predecessors' words a step (the block's threads at once), keeps their
// values in `held` (slot d - 1 for the tile d before this one), and passes every total up to the
// nearest tile that has not published one; it stops at an inclusive scan. One thread then folds
// the held values in tile order from that inclusive scan. A tile that passes {LOOK_BACK_SPAN}
// totals re-reads the farthest one until it is an inclusive scan. The whole block calls it; it
// returns the carry (`*carry`, shared) to every thread.
__device__ PLAX_ROW_NOINLINE {T} {name}_look_back(unsigned long long* words, long long job,
    long long k, {T} total, unsigned int tag, unsigned int* seen, {T}* held, {T}* carry) {{
  const unsigned int agg = (tag << 2) | 1u, inc = (tag << 2) | 2u;
  const long long t = threadIdx.x, threads = blockDim.x;
  if (k == 0) {{  // the row's first tile: its total is its inclusive scan
    if (t == 0) atomicExch(words + job, {name}_pack(total, inc));
    return total;  // (unused: the row's first tile has no carry)
  }}
  if (t == 0) atomicExch(words + job, {name}_pack(total, agg));
  PLAX_ROW_AFTER_TOTAL(job);
  const long long first = job - k;  // (the row's first tile publishes an inclusive scan)
  const long long reach = k < {LOOK_BACK_SPAN} ? first : job - {LOOK_BACK_SPAN};  // (held slots)
  long long end = job, found = -1;  // tiles [end, job) have published their totals
  unsigned long long steps = 0;
  while (found < 0) {{
    const bool waits = end == reach;  // (passed every held slot: wait on the farthest)
    if (waits) end = reach + 1;
    const long long width = end - reach < {WINDOW} ? end - reach : {WINDOW};
    for (long long i = t; i < width; i += threads) {{
      const unsigned long long w = *(volatile unsigned long long*)(words + end - 1 - i);
      const unsigned int status = (unsigned int)(w >> 32);
      seen[i] = status == inc ? 2u : status == agg ? 1u : 0u;
      held[job - end + i] = {name}_unpack(w);
    }}
    __syncthreads();
    const bool short_of_window = plax_row_pass(seen, width, &end, &found);
    ++steps;
    if (found < 0 && (short_of_window || waits)) PLAX_ROW_SPIN();  // (a tile not done yet)
    __syncthreads();  // (seen is written again next step)
  }}
  if (t == 0) {{
    const {T} acc = {name}_fold_held(held, (int)(job - 1 - found), 1);
    atomicExch(words + job, {name}_pack({name}_op(acc, total), inc));
    *carry = acc;
    PLAX_ROW_NOTE_LOOK_BACK(steps);
  }}
  __syncthreads();
  return *carry;
}}
"""


def _two_word_look_back(name: str, T: str) -> str:
    """The two-word look-back of ``name`` on ``T`` (over 4 bytes): see
    :func:`_single_pass_source`."""
    return f"""
// The two-word look-back (elements over 4 bytes: a flag and a value apart, so a value is read
// after its flag and a fence) takes {WINDOW} predecessors a step: the block's threads read
// their flags at once (`seen`: 0 unset, 1 aggregate, 2 inclusive, nearest first), and the walk
// passes every aggregate up to the nearest tile that is not one (plax_row_walk_flags); the
// totals after the inclusive scan found are then read {WINDOW} at a time (`window`) and folded
// in tile order by one thread. The whole block calls it; it returns the carry (`*carry`,
// shared) to every thread.
__device__ PLAX_ROW_NOINLINE {T} {name}_look_back(unsigned int* flags, {T}* vals, long long jobs,
    long long job, long long k, {T} total, unsigned int tag, unsigned int* seen, {T}* window,
    {T}* carry) {{
  {T}* aggregate = vals;
  {T}* inclusive = vals + jobs;
  const unsigned int agg = (tag << 2) | 1u, inc = (tag << 2) | 2u;
  const long long t = threadIdx.x, threads = blockDim.x;
  if (k == 0) {{  // the row's first tile: its total is its inclusive scan
    if (t == 0) {{
      inclusive[job] = total;
      __threadfence();
      atomicExch(flags + job, inc);
    }}
    return total;  // (unused: the row's first tile has no carry)
  }}
  if (t == 0) {{
    aggregate[job] = total;
    __threadfence();
    atomicExch(flags + job, agg);
  }}
  PLAX_ROW_AFTER_TOTAL(job);
  unsigned long long steps = 0;
  // (the row's tiles are consecutive tickets, its first at job - k publishing an inclusive scan)
  const long long found = job - k + plax_row_walk_flags(flags, job, 1, k, tag, {WINDOW}, seen,
                                                        &steps);
  {T} acc;
  if (t == 0) acc = plax_read_published(inclusive + found);
  // (a round trip after the flags' own: with the first window of totals, or alone)
  if (found + 1 == job) ++steps;
  for (long long c = found + 1; c < job; c += {WINDOW}) {{
    const long long m = job - c < {WINDOW} ? job - c : {WINDOW};
    for (long long i = t; i < m; i += threads) window[i] = plax_read_published(aggregate + c + i);
    __syncthreads();
    if (t == 0) {{  // (unrolled: the window's loads issue together, then the chain of ops)
      #pragma unroll
      for (int i = 0; i < {WINDOW}; ++i)
        if (i < m) acc = {name}_op(acc, window[i]);
    }}
    ++steps;
    __syncthreads();
  }}
  if (t == 0) {{
    inclusive[job] = {name}_op(acc, total);
    __threadfence();
    atomicExch(flags + job, inc);
    *carry = acc;
    PLAX_ROW_NOTE_LOOK_BACK(steps);
  }}
  __syncthreads();
  return *carry;
}}
"""


#: values a packed group look-back holds in shared memory for the totals it passes: a tile of
#: ``width`` columns holds ``min(LOOK_BACK_SPAN, GROUP_HELD // width)`` predecessors' (256 of 4
#: columns, 32 of 32, 4 of 256) and then waits on the farthest, as :data:`LOOK_BACK_SPAN`
GROUP_HELD = 1024


def _group_look_back(name: str, T: str) -> str:
    """The look-back of a tile of several columns (``name + "_group_look_back"``): packed where
    :func:`packs` the element size (one word per column a tile, one round trip per window of
    predecessors), else a flag a tile and its columns' values apart (two round trips)."""
    if packs(_ITEMSIZE[T]):
        return _packed_words(name, T) + _packed_group_look_back(name, T)
    return _two_word_group_look_back(name, T)


def _packed_group_look_back(name: str, T: str) -> str:
    """The packed look-back of a tile of several columns on ``T`` (at most 4 bytes): see
    :func:`_group_look_back`."""
    if GROUP_HELD < THREADS:   # (a group of THREADS columns would hold no predecessor: no walk)
        raise ValueError(f"GROUP_HELD ({GROUP_HELD}) holds less than a value of each of the "
                         f"widest group's {THREADS} columns")
    return f"""
// The look-back of a tile of `width` columns (one chain of tiles per column group; a tile's
// predecessor in its chain is `stride` tickets before it, `k` its place in the chain), each
// column's status and total in one word (`words[ticket * width + column]`: {name}_pack): every
// column walks back on its own, nearest first, passing totals up to an inclusive scan, and all
// the walking columns' next {WINDOW} predecessors are read at once (the block's threads: one
// memory round trip a step, whatever the columns), their values kept in `held` (slot
// `(d - 1) * width + c` for the tile d before, column c; at most `span` tiles, then the column
// waits on the farthest). A column that meets an unset word reads on from it next step. Each
// column's carry is then the held values folded in tile order from its inclusive scan: the same
// left fold of the chain's totals wherever each column stopped (an inclusive scan is that fold),
// so the result does not depend on timing. `walk[c]`: the totals column c has passed, or minus
// the distance of its inclusive scan; `more`: two flags (one per step parity, so a step clears
// the next one's while no thread reads it) set by a column still walking. The whole block calls
// it; the carries are left in `carries` (shared) for every thread.
__device__ PLAX_ROW_NOINLINE void {name}_group_look_back(unsigned long long* words,
    long long job, long long stride, long long k, int width, const {T}* total, unsigned int tag,
    unsigned char* seen, {T}* held, int* walk, volatile int* more, {T}* carries) {{
  const unsigned int agg = (tag << 2) | 1u, inc = (tag << 2) | 2u;
  const int t = threadIdx.x, threads = blockDim.x;
  unsigned long long* mine = words + job * width;
  for (int c = t; c < width; c += threads)
    atomicExch(mine + c, {name}_pack(total[c], k == 0 ? inc : agg));
  if (k == 0) return;  // (the chain's first tile: its totals are its inclusive scans)
  PLAX_ROW_AFTER_TOTAL(job);
  const int cap = {GROUP_HELD} / width < {LOOK_BACK_SPAN} ? {GROUP_HELD} / width : {LOOK_BACK_SPAN};
  // (within `cap` of the chain's first tile, that tile's inclusive scan ends every walk)
  const int span = k < cap ? (int)k : cap, w = span < {WINDOW} ? span : {WINDOW};
  for (int c = t; c < width; c += threads) walk[c] = 0;
  if (t == 0) more[0] = 0;
  __syncthreads();
  unsigned long long steps = 0;
  for (int step = 0;; ++step) {{
    for (int q = t; q < w * width; q += threads) {{
      const int i = q / width, c = q % width, passed = walk[c];
      // (the tile d before: the next ones after those passed, or, all `span` passed, the farthest)
      const int d = passed < 0 ? 0 : passed < span ? passed + 1 + i : i == 0 ? span : 0;
      if (d == 0 || d > span) continue;
      const unsigned long long word =
          *(volatile unsigned long long*)(words + (job - d * stride) * width + c);
      const unsigned int status = (unsigned int)(word >> 32);
      seen[q] = status == inc ? 2 : status == agg ? 1 : 0;
      held[(d - 1) * width + c] = {name}_unpack(word);
    }}
    __syncthreads();
    if (t == 0) more[(step + 1) & 1] = 0;  // (read last by every thread before the barrier)
    for (int c = t; c < width; c += threads) {{
      const int passed = walk[c];
      if (passed < 0) continue;
      int i = 0;
      const int m = passed < span ? (span - passed < w ? span - passed : w) : 1;
      while (i < m && seen[i * width + c] == 1 && passed < span) ++i;
      if (i < m && seen[i * width + c] == 2) {{
        walk[c] = passed < span ? -(passed + i + 1) : -span;
      }} else {{
        walk[c] = passed + i;
        more[step & 1] = 1;
      }}
    }}
    ++steps;
    __syncthreads();
    if (!more[step & 1]) break;
    // (the host builds yield before every further step, whether a column met a word not yet
    // published or only walks on past aggregates; on a GPU this is nothing)
    PLAX_ROW_SPIN();
  }}
  for (int c = t; c < width; c += threads) {{
    const {T} acc = {name}_fold_held(held + c, -walk[c] - 1, width);
    carries[c] = acc;
    atomicExch(mine + c, {name}_pack({name}_op(acc, total[c]), inc));
  }}
  if (t == 0) PLAX_ROW_NOTE_LOOK_BACK(steps);
  __syncthreads();
}}
"""


def _two_word_group_look_back(name: str, T: str) -> str:
    """The look-back of a tile of several columns on ``T`` over 4 bytes: see
    :func:`_group_look_back`."""
    return f"""
// The look-back of a tile of `width` columns, elements over 4 bytes (one chain of tiles per
// column group; a tile's predecessor in its chain is `stride` tickets before it, `k` its place
// in the chain): the tile publishes all its columns' totals (`total`, shared) and then ONE flag
// for the tile, so a predecessor's state is one flag read, whatever the columns: {WINDOW}
// predecessors' flags a step (the block's threads at once), passing every aggregate up to the
// nearest tile that is not one (plax_row_walk_flags, as the two-word look-back's); then the
// columns' values after the inclusive scan found, a window of tiles by every column at a time
// (`window`, {THREADS} values), each column folded in tile order by its own thread: two round
// trips per window of predecessors. (No 64-bit word holds a status and such a value, and a
// value read with its flag, before the fence, could be one written before that flag: so they
// stay apart.) `vals`: the aggregates of `jobs` tiles by `width` columns, then their inclusive
// scans. The whole block calls it; the carries are left in `carries` (shared) for every thread.
__device__ PLAX_ROW_NOINLINE void {name}_group_look_back(unsigned int* flags, {T}* vals,
    long long jobs, long long job, long long stride, long long k, int width, const {T}* total,
    unsigned int tag, unsigned int* seen, {T}* window, {T}* carries) {{
  {T}* aggregate = vals;
  {T}* inclusive = vals + jobs * width;
  const unsigned int agg = (tag << 2) | 1u, inc = (tag << 2) | 2u;
  const int t = threadIdx.x, threads = blockDim.x;
  {T}* mine = (k == 0 ? inclusive : aggregate) + job * width;
  for (int c = t; c < width; c += threads) mine[c] = total[c];
  __threadfence();  // (each writer's values before the barrier, the barrier before the flag)
  __syncthreads();
  if (t == 0) atomicExch(flags + job, k == 0 ? inc : agg);
  if (k == 0) return;  // (the chain's first tile: its totals are its inclusive scans)
  PLAX_ROW_AFTER_TOTAL(job);
  unsigned long long steps = 0;
  const long long found = plax_row_walk_flags(flags, job, stride, k, tag, {WINDOW}, seen, &steps);
  const long long found_job = job - (k - found) * stride;
  for (int c = t; c < width; c += threads)
    carries[c] = plax_read_published(inclusive + found_job * width + c);
  // (a round trip after the flags' own: with the first window of totals, or alone)
  if (found + 1 == k) ++steps;
  // (tiles a window: as many as the block reads at once by every column, at most {WINDOW})
  const long long per = threads / width < 1 ? 1 : threads / width < {WINDOW} ? threads / width : {WINDOW};
  for (long long j0 = found + 1; j0 < k; j0 += per) {{
    const long long m = k - j0 < per ? k - j0 : per;
    for (long long q = t; q < m * width; q += threads) {{
      const long long d = q / width, c = q % width;
      window[q] = plax_read_published(aggregate + (job - (k - j0 - d) * stride) * width + c);
    }}
    __syncthreads();
    for (int c = t; c < width; c += threads) {{  // (each column's totals in tile order)
      {T} acc = carries[c];
      for (long long d = 0; d < m; ++d) acc = {name}_op(acc, window[d * width + c]);
      carries[c] = acc;
    }}
    ++steps;
    __syncthreads();
  }}
  for (int c = t; c < width; c += threads) inclusive[job * width + c] = {name}_op(carries[c], total[c]);
  __threadfence();
  __syncthreads();
  if (t == 0) {{
    atomicExch(flags + job, inc);
    PLAX_ROW_NOTE_LOOK_BACK(steps);
  }}
}}
"""


#: a look-back kernel's next ticket, in its loop over them (``state[0]``: the tagged count of
#: tickets taken; the loop ends past ``jobs``)
_TAKE_TICKET = """    if (threadIdx.x == 0) ticket = (long long)plax_tagged_count(state, tag);
    __syncthreads();
    const long long job = ticket;
    if (job >= jobs) break;"""


def _clear_at_exit(count: str, clear: str) -> str:
    """A look-back kernel's exit: the last block out (``state[1]``: the tagged count of blocks
    done) runs ``clear`` for each ``i`` below ``count`` and zeroes ``state``, so a CUDA graph
    replaying the launch with its tag finds the scratch unset."""
    return f"""  if (threadIdx.x == 0) {{
    __threadfence();
    last = plax_count_done(state + 1, tag) == gridDim.x - 1;
  }}
  __syncthreads();
  if (last) {{  // every block is done with the scratch: clear it for a replay
    for (long long i = threadIdx.x; i < {count}; i += blockDim.x) {clear}
    if (threadIdx.x == 0) {{ state[0] = 0ull; state[1] = 0ull; }}
  }}"""


def _group_form(T: str, most_columns: int,
                window: str | None = None) -> tuple[str, str, str, tuple[str, str]]:
    """How a kernel holding ``{name}_group_look_back`` on ``T`` declares and calls it:
    ``(scratch parameters, shared arrays, call, (clear count, clear statement))``, the call a
    template of ``name``, ``stride``, ``width`` and ``total``, the count of ``jobs`` and
    ``width``; ``most_columns``: the widest tile it calls with; ``window``: a shared array of
    :data:`THREADS` elements the caller lends the two-word form (unused during the look-back),
    else one of its own."""
    if packs(_ITEMSIZE[T]):
        return ("unsigned long long* words",
                f"""  __shared__ {T} held[{GROUP_HELD}];
  __shared__ unsigned char seen[{GROUP_HELD}];
  __shared__ int walk[{most_columns}];
  __shared__ volatile int more[2];""",
                "{name}_group_look_back(words, job, {stride}, k, {width}, {total}, tag, seen, "
                "held, walk, more, carries);",
                ("jobs * {width}", "words[i] = 0ull;"))
    own = "" if window else f"\n  __shared__ {T} window[{THREADS}];"
    return (f"unsigned int* flags, {T}* vals",
            f"  __shared__ unsigned int seen[{WINDOW}];" + own,
            "{name}_group_look_back(flags, vals, jobs, job, {stride}, k, {width}, {total}, tag, "
            f"seen, {window or 'window'}, carries);",
            ("jobs", "flags[i] = 0u;"))


def _single_pass_source(name: str, T: str, staged: int) -> str:
    """The single-pass kernels on ``T`` elements (with their look-back: packed where
    :func:`packs` the element size, else two words), for :func:`cumulative_source`, whose
    helpers they call: ``name + "_single_pass"`` (rows split in tiles) and ``name +
    "_columns_single_pass"`` (a long non-last axis of few columns: a tile is some rows of the
    axis by every column); ``staged``: the shared elements a tile is staged in."""
    if packs(_ITEMSIZE[T]):
        scratch, look_back = "unsigned long long* words", _packed_look_back(name, T)
        walk_shared = f"__shared__ {T} held[{LOOK_BACK_SPAN}];"
        call = f"{name}_look_back(words, {{job}}, k, total, tag, seen, held, &carry);"
        clear = "words[i] = 0ull;"
    else:
        scratch, look_back = f"unsigned int* flags, {T}* vals", _two_word_look_back(name, T)
        walk_shared = f"__shared__ {T} window[{WINDOW}];"
        call = (f"{name}_look_back(flags, vals, {{jobs}}, {{job}}, k, total, tag, seen, window, "
                f"&carry);")
        clear = "flags[i] = 0u;"
    group_scratch_params, group_walk, group_call, (group_count, group_clear) = _group_form(
        T, COLUMN_MIN)
    group_shared = f"""  __shared__ {T} buf[{staged}];
  __shared__ {T} totals[{THREADS}];
  __shared__ {T} column_totals[{COLUMN_MIN}];
  __shared__ {T} carries[{COLUMN_MIN}];
{group_walk}
  __shared__ long long ticket;
  __shared__ int last;"""
    shared = f"""  __shared__ {T} buf[{staged}];
  __shared__ {T} totals[{THREADS}];
  {walk_shared}
  __shared__ unsigned int seen[{WINDOW}];
  __shared__ {T} carry;
  __shared__ long long ticket;
  __shared__ int last;"""
    return f"""// rows split in tiles in one launch: tiles taken in ticket order (a tile waits only on tiles
// taken before it, by running blocks); each publishes its total, looks back to the nearest
// tile of its row with a published inclusive scan and folds the totals after it in tile order
// (so every carry is the same left fold of the totals, whoever finished first), publishes its
// inclusive scan, then scans its elements from the carry. `state` (two tagged counters),
// `words` (packed: a status and value per tile) or `flags` (one per tile, (tag << 2) | 1
// aggregate, | 2 inclusive) and `vals` (aggregates, then inclusive scans) need no clearing: a
// word of another tag is unset; the last block out clears them, so a CUDA graph replaying the
// launch with its tag finds them unset too.
{look_back}extern "C" __global__ void {name}_single_pass(const {T}* __restrict__ x, {T}* __restrict__ y,
    unsigned long long* state, {scratch}, long long rows, long long n,
    long long inner, int reverse, long long tile, unsigned int tag) {{
{shared}
  const long long tiles = (n + tile - 1) / tile, jobs = rows * tiles;
  for (;;) {{
{_TAKE_TICKET}
    const long long row = job / tiles, k = job % tiles, start = k * tile;
    const long long len = start + tile < n ? tile : n - start;
    const long long base = (row / inner) * n * inner + row % inner;
    {name}_load(x, base, n, inner, reverse, start, len, buf);
    const {T} total = {name}_reduce(buf, len, totals);
    {call.format(job="job", jobs="jobs")}
    {name}_scan(buf, len, totals, k ? &carry : nullptr);
    {name}_store(y, base, n, inner, reverse, start, len, buf);
  }}
{_clear_at_exit("jobs", clear)}
}}
// A long non-last axis of few columns (1 < inner < {COLUMN_MIN}), in one launch: a tile is
// `tile_rows` rows of the axis (a multiple of 32) by all `inner` columns, contiguous in memory:
// staged with coalesced loads, each column gathered into its own stretch of `buf` (column c at
// c * tile_rows, scan order); tiles taken in ticket order ((outer slice, tile) pairs). The
// columns are reduced at once, `per` = blockDim / inner threads a column (a block narrower than
// its columns: a thread a column, `together` columns at a time), each column's chunk totals
// kept in its own `per` slots of `totals` for its scan; then one look-back for the tile
// ({name}_group_look_back: its columns' totals a round trip), then each column's scan from its
// carry; the tile is stored back as it was loaded. A column's fold order: chunks of
// ceil(len / per) rows folded in order, their totals scanned (Hillis-Steele), the carry first.
extern "C" __global__ void {name}_columns_single_pass(const {T}* __restrict__ x,
    {T}* __restrict__ y, unsigned long long* state, {group_scratch_params},
    long long outer, long long n, long long inner, int reverse, long long tile_rows,
    unsigned int tag) {{
{group_shared}
  const long long tiles = (n + tile_rows - 1) / tile_rows, jobs = outer * tiles;
  const int columns = (int)inner, threads = (int)blockDim.x;
  const int per = threads / columns > 0 ? threads / columns : 1, together = threads / per;
  const int g = (int)threadIdx.x / per, lt = (int)threadIdx.x % per;  // (its column, its place)
  for (;;) {{
{_TAKE_TICKET}
    const long long o = job / tiles, k = job % tiles, start = k * tile_rows;
    const long long len = start + tile_rows < n ? tile_rows : n - start;
    const long long first = reverse ? n - start - len : start;  // (the tile's first row in memory)
    // (32-bit index arithmetic within the tile: its elements fit a block's shared memory)
    const int count = (int)(len * inner), rows_in = (int)len;
    const int stride = (int)tile_rows;
    const {T}* src = x + (o * n + first) * inner;
    #pragma unroll 1
    for (int q = threadIdx.x; q < count; q += blockDim.x) {{
      const int a = q / columns, c = q % columns;
      buf[PLAX_ROW_PAD(c * stride + (reverse ? rows_in - 1 - a : a))] = src[q];
    }}
    __syncthreads();
    // (tile_rows % 32 == 0: each column's pads line up. Several rounds only with one thread a
    // column, whose scan reads no chunk totals: `totals` may be rewritten by the next round)
    #pragma unroll 1
    for (int c0 = 0; c0 < columns; c0 += together) {{
      const bool live = g < together && c0 + g < columns;
      const int c = live ? c0 + g : 0;
      const {T} total = {name}_reduce_group(buf + PLAX_ROW_PAD(c * stride), len,
                                            totals + (live ? g * per : 0), lt, per, live);
      if (live && lt == 0) column_totals[c] = total;
    }}
    __syncthreads();
    {group_call.format(name=name, stride="1", width="columns", total="column_totals")}
    #pragma unroll 1
    for (int c0 = 0; c0 < columns; c0 += together) {{
      const bool live = g < together && c0 + g < columns;
      const int c = live ? c0 + g : 0;
      {name}_scan_group(buf + PLAX_ROW_PAD(c * stride), len, totals + (live ? g * per : 0),
                        k ? carries + c : nullptr, lt, per, live);
    }}
    {T}* dst = y + (o * n + first) * inner;
    for (int q = threadIdx.x; q < count; q += blockDim.x) {{
      const int a = q / columns, c = q % columns;
      dst[q] = buf[PLAX_ROW_PAD(c * stride + (reverse ? rows_in - 1 - a : a))];
    }}
    __syncthreads();  // (buf is staged again next)
  }}
{_clear_at_exit(group_count.format(width="inner"), group_clear)}
}}
"""


#: the module settings the row kernels' sources read: part of their cache key, so a changed
#: setting (a test's or a tuning run's) builds another source rather than reusing a stale one
_SOURCE_SETTINGS = ("THREADS", "ITEM_BYTES", "MAX_ITEMS", "LOAD_BATCH", "WINDOW",
                    "LOOK_BACK_SPAN", "COLUMN_MIN", "GROUP_HELD", "COLUMN_STAGED_STRETCHES")


def _settings() -> tuple:
    """The current values of :data:`_SOURCE_SETTINGS`, in order."""
    here = globals()
    return tuple(here[setting] for setting in _SOURCE_SETTINGS)


def cumulative_source(op: str, ctype: str) -> tuple[str, str]:
    """The CUDA C++ source and kernel name of a cumulative ``op`` on ``ctype`` elements.

    The source holds five kernels. Four work on one block-wide scan of a stretch of a row,
    staged through shared memory :func:`tile_of` its element size at a time: ``name`` (one
    block per row; takes ``(x, y, rows, n, inner, reverse)``) and, for rows split in tiles of
    ``tile`` elements (in scan order), ``name + "_single_pass"`` (the whole scan in one launch
    with a look-back between tiles; takes ``(x, y, state, *scratch, rows, n, inner, reverse,
    tile, tag)``, ``tile`` at most that: ``state`` 2 ``unsigned long long`` and
    :func:`look_back_scratch`, uncleared, and a tag in ``[1, 2**30)`` that no launch on that
    scratch has used, except a graph replaying this one), or
    the three passes ``name + "_tile_totals"`` (each tile's total into ``sums[row * tiles +
    k]``; takes ``(x, sums, rows, n, inner, reverse, tile)``), a scan of those totals, and
    ``name + "_tiles"`` (each tile's scan, starting from the inclusive scan of the totals at
    the tile before; takes ``(x, y, scanned, rows, n, inner, reverse, tile)``). The fifth,
    ``name + "_columns"``, scans along a non-last axis a thread a column (takes ``(x, y, outer,
    n, inner, reverse, segs)``, ``segs`` from :func:`column_segments`); ``name +
    "_columns_look_back"`` is it with the axis in parts (takes ``(x, y, state, *scratch,
    outer, n, inner, reverse, segs, part_rows, tag)``, the scratch sized for blocks of one
    column: :func:`group_scratch` of ``outer * (inner + width - 1) * parts`` tiles of one
    column), and ``name + "_columns_single_pass"`` the few-columns single pass (takes ``(x, y,
    state, *scratch, outer, n, inner, reverse, tile_rows, tag)``, :func:`group_scratch` of its
    tiles by ``inner`` columns).

    Args:
      op: ``"sum"``, ``"prod"``, ``"max"``, ``"min"`` or ``"logsumexp"``.
      ctype: the element's C type (:func:`plax_cupy.dtypes.ctype`; not a 16-bit float).

    Returns:
      ``(source, name)``: the source and the one-block-per-row kernel's name.

    Example:
      >>> source, name = cumulative_source("sum", "float")
      >>> name
      'plax_cumulative_sum_float'
      >>> name + "_tiles" in source
      True
    """
    return _cached_cumulative_source(op, ctype, _settings())


@functools.lru_cache(maxsize=None)
def _cached_cumulative_source(op: str, ctype: str, settings: tuple) -> tuple[str, str]:
    """:func:`cumulative_source` built once per ``(op, ctype)`` and :func:`_settings` (only a
    key here: the builder reads the settings itself), so a repeated launch does no string work
    and hands :func:`_launch` the same source object (whose hash Python keeps)."""
    return _build_cumulative_source(op, ctype)


def _build_cumulative_source(op: str, ctype: str) -> tuple[str, str]:
    """Builds :func:`cumulative_source` (uncached)."""
    name = f"plax_cumulative_{op}_{ctype.replace(' ', '_')}"
    combine = _COMBINE[op]
    T = ctype
    items = items_per_thread(_ITEMSIZE[ctype])
    cap = _capacity(ctype)
    batch = min(items, LOAD_BATCH)
    citems = column_items(_ITEMSIZE[ctype])
    # (a thread's staged items of a stretch, padded by one under 16 bytes: see _column_unstage)
    cpad = citems + (_ITEMSIZE[ctype] < 16)
    staged = cap + cap // 32   # (one element of padding per 32: PLAX_ROW_PAD)
    # (the split column kernel's look-back; its two-word form borrows `totals`, unused then)
    group_scratch_params, group_walk, group_call, (group_count, group_clear) = _group_form(
        T, THREADS, window="totals")
    source = _HELPERS + f"""
__device__ __forceinline__ {T} {name}_op({T} a, {T} b) {{ return {combine}; }}
{_group_look_back(name, T)}// Stages scan-order positions [start, start + len) of the row at `base` (len <= {cap}) in
// `buf`: consecutive threads read consecutive elements (coalesced where inner == 1), each
// thread issuing all its loads before storing any (one memory latency per batch, not per item)
__device__ __forceinline__ void {name}_load(const {T}* __restrict__ x, long long base,
    long long n, long long inner, int reverse, long long start, long long len, {T}* buf) {{
  // (batches of {batch}: a whole tile's items at once took 164 registers a thread for float32,
  // one block per SM; {batch} in flight per thread over the blocks an SM holds cover the
  // memory latency)
  const long long threads = blockDim.x, step = reverse ? -inner : inner, stride = threads * step;
  const {T}* src = x + plax_row_at(base, n, inner, reverse, start);
  for (long long p0 = threadIdx.x; p0 < len; p0 += threads * {batch}) {{
    {T} v[{batch}];
    const {T}* q = src + p0 * step;
    #pragma unroll
    for (int u = 0; u < {batch}; ++u, q += stride)
      if (p0 + u * threads < len) v[u] = *q;
    #pragma unroll
    for (int u = 0; u < {batch}; ++u)
      if (p0 + u * threads < len) buf[PLAX_ROW_PAD(p0 + u * threads)] = v[u];
  }}
  __syncthreads();
}}
// Writes the `len` staged elements back to positions [start, start + len) of the row, as
// {name}_load read them
__device__ __forceinline__ void {name}_store({T}* __restrict__ y, long long base, long long n,
    long long inner, int reverse, long long start, long long len, const {T}* buf) {{
  for (long long p = threadIdx.x; p < len; p += blockDim.x)
    y[plax_row_at(base, n, inner, reverse, start + p)] = buf[PLAX_ROW_PAD(p)];
  __syncthreads();  // (buf is staged again next)
}}
// The total of the `len` staged elements, to every thread of a group of `threads` (the block, or
// the block's `threads` threads from `threadIdx.x - t` in the few-columns single pass: its
// columns at once), `t` this thread's place in it: contiguous chunks, one per thread, folded;
// the chunk totals scanned (inclusive) in `totals` (Hillis-Steele), left there for
// {name}_scan. Every thread of the block calls it (the barriers are the block's); one of no
// group (`live` false) only keeps step. (Inlined into two callers, one for the whole block, one
// for groups: the block's kept the registers it had before groups.)
__device__ __forceinline__ {T} {name}_reduce_in(const {T}* buf, long long len, {T}* totals,
    long long t, long long threads, bool live) {{
  const long long chunk = (len + threads - 1) / threads;
  const long long active = chunk ? (len + chunk - 1) / chunk : 0;  // threads holding elements
  const long long lo = t * chunk, hi = lo + chunk < len ? lo + chunk : len;
  if (live && t < active) {{
    {T} acc = buf[PLAX_ROW_PAD(lo)];
    for (long long p = lo + 1; p < hi; ++p) acc = {name}_op(acc, buf[PLAX_ROW_PAD(p)]);
    totals[t] = acc;
  }}
  __syncthreads();
  for (long long s = 1; s < active; s <<= 1) {{  // inclusive scan of the chunk totals
    const bool take = live && t >= s && t < active;
    {T} before;
    if (take) before = totals[t - s];
    __syncthreads();
    if (take) totals[t] = {name}_op(before, totals[t]);
    __syncthreads();
  }}
  return totals[active > 0 ? active - 1 : 0];
}}
// Rescans each thread's chunk of the staged elements in place from the chunk totals before it
// (`totals`, as {name}_reduce left them for the same group) and from `*carry` (the row's scan
// before the stretch) when given
__device__ __forceinline__ void {name}_scan_in({T}* buf, long long len, const {T}* totals,
    const {T}* carry, long long t, long long threads, bool live) {{
  const long long chunk = (len + threads - 1) / threads;
  const long long active = chunk ? (len + chunk - 1) / chunk : 0;
  const long long lo = t * chunk, hi = lo + chunk < len ? lo + chunk : len;
  if (live && t < active) {{
    {T} acc = buf[PLAX_ROW_PAD(lo)];
    if (t) acc = {name}_op(totals[t - 1], acc);
    if (carry != nullptr) acc = {name}_op(*carry, acc);
    buf[PLAX_ROW_PAD(lo)] = acc;
    for (long long p = lo + 1; p < hi; ++p) {{
      acc = {name}_op(acc, buf[PLAX_ROW_PAD(p)]);
      buf[PLAX_ROW_PAD(p)] = acc;
    }}
  }}
  __syncthreads();
}}
__device__ PLAX_ROW_NOINLINE {T} {name}_reduce(const {T}* buf, long long len, {T}* totals) {{
  return {name}_reduce_in(buf, len, totals, threadIdx.x, blockDim.x, true);
}}
__device__ PLAX_ROW_NOINLINE void {name}_scan({T}* buf, long long len, const {T}* totals,
                                              const {T}* carry) {{
  {name}_scan_in(buf, len, totals, carry, threadIdx.x, blockDim.x, true);
}}
// (a group's: the few-columns single pass)
__device__ PLAX_ROW_NOINLINE {T} {name}_reduce_group(const {T}* buf, long long len, {T}* totals,
                                                    int t, int threads, bool live) {{
  return {name}_reduce_in(buf, len, totals, t, threads, live);
}}
__device__ PLAX_ROW_NOINLINE void {name}_scan_group({T}* buf, long long len, const {T}* totals,
                                                   const {T}* carry, int t, int threads, bool live) {{
  {name}_scan_in(buf, len, totals, carry, t, threads, live);
}}
// Scans scan-order positions [start, stop) of the row at `base` with the whole block, {cap}
// elements at a time through `buf`, from `*carry` (the row's scan before `start`) when given,
// into `y` (skipped when `y` is null). Returns the stretch's total (carry excluded) to every
// thread.
__device__ PLAX_ROW_NOINLINE {T} {name}_block(const {T}* __restrict__ x, {T}* __restrict__ y,
    long long base, long long n, long long inner, int reverse, long long start, long long stop,
    const {T}* carry, {T}* buf, {T}* totals) {{
  {T} total, running;
  bool carried = carry != nullptr;
  if (carried) running = *carry;
  for (long long s = start; s < stop; s += {cap}) {{
    const long long len = stop - s < {cap} ? stop - s : {cap};
    {name}_load(x, base, n, inner, reverse, s, len, buf);
    const {T} part = {name}_reduce(buf, len, totals);
    if (y != nullptr) {{
      {name}_scan(buf, len, totals, carried ? &running : nullptr);
      {name}_store(y, base, n, inner, reverse, s, len, buf);
    }}
    total = s == start ? part : {name}_op(total, part);
    running = carried ? {name}_op(running, part) : part;
    carried = true;
    __syncthreads();  // (totals is written again by the next stretch)
  }}
  return total;
}}
extern "C" __global__ void {name}(const {T}* __restrict__ x, {T}* __restrict__ y,
    long long rows, long long n, long long inner, int reverse) {{
  __shared__ {T} buf[{staged}];
  __shared__ {T} totals[{THREADS}];
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {{
    const long long base = (row / inner) * n * inner + row % inner;
    {name}_block(x, y, base, n, inner, reverse, 0, n, nullptr, buf, totals);
  }}
}}
// pass 1 of a row split in tiles: each tile's total, one block per (row, tile)
extern "C" __global__ void {name}_tile_totals(const {T}* __restrict__ x, {T}* __restrict__ sums,
    long long rows, long long n, long long inner, int reverse, long long tile) {{
  __shared__ {T} buf[{staged}];
  __shared__ {T} totals[{THREADS}];
  const long long tiles = (n + tile - 1) / tile;
  for (long long job = blockIdx.x; job < rows * tiles; job += gridDim.x) {{
    const long long row = job / tiles, start = (job % tiles) * tile;
    const long long base = (row / inner) * n * inner + row % inner;
    const {T} total = {name}_block(x, nullptr, base, n, inner, reverse, start,
                                   start + tile < n ? start + tile : n, nullptr, buf, totals);
    if (threadIdx.x == 0) sums[job] = total;
  }}
}}
// pass 3 (pass 2 scans the totals): each tile's scan from the scanned totals before it
extern "C" __global__ void {name}_tiles(const {T}* __restrict__ x, {T}* __restrict__ y,
    const {T}* __restrict__ scanned, long long rows, long long n, long long inner, int reverse,
    long long tile) {{
  __shared__ {T} buf[{staged}];
  __shared__ {T} totals[{THREADS}];
  const long long tiles = (n + tile - 1) / tile;
  for (long long job = blockIdx.x; job < rows * tiles; job += gridDim.x) {{
    const long long row = job / tiles, k = job % tiles, start = k * tile;
    const long long base = (row / inner) * n * inner + row % inner;
    {name}_block(x, y, base, n, inner, reverse, start, start + tile < n ? start + tile : n,
                 k ? scanned + job - 1 : nullptr, buf, totals);
  }}
}}
// Loads rows [lo, lo + {citems}) of a column (those before `end`; none where not `live`) into
// `v`, all in flight at once; returns how many
__device__ __forceinline__ int {name}_column_load(const {T}* __restrict__ x, long long base,
    long long n, long long inner, int reverse, bool live, long long lo, long long end,
    {T} (&v)[{citems}]) {{
  const int m = !live || lo >= end ? 0 : end - lo < {citems} ? (int)(end - lo) : {citems};
  #pragma unroll
  for (int u = 0; u < {citems}; ++u)
    if (u < m) v[u] = x[plax_row_at(base, n, inner, reverse, lo + u)];
  return m;
}}
// The same rows as {name}_column_load, from where the split column kernel staged them in shared
// memory: a thread's items of a stretch together, `at` pointing at its item 0 (item u of
// stretch j of thread t at `stage[(j * blockDim.x + t) * {cpad} + u]`: {cpad} elements a thread,
// so that for elements under 16 bytes a warp's item u falls on distinct banks)
__device__ __forceinline__ int {name}_column_unstage(const {T}* at, bool live, long long lo,
    long long end, {T} (&v)[{citems}]) {{
  const int m = !live || lo >= end ? 0 : end - lo < {citems} ? (int)(end - lo) : {citems};
  #pragma unroll
  for (int u = 0; u < {citems}; ++u)
    if (u < m) v[u] = at[u];
  return m;
}}
// A non-last axis of many columns (inner >= {COLUMN_MIN}): a block per group of `width` =
// THREADS / segs consecutive columns of one outer slice (a warp's loads read consecutive
// columns: coalesced), the axis taken a stretch of segs * {citems} rows at a time. Thread
// (segment s, column c) loads its {citems} rows of the stretch at once and scans them in
// registers (segment 0 from the column's carry: its scan before the stretch); one thread a
// column folds the other segments' totals in order after segment 0's; each thread of those adds
// the carry before its segment, and all store. With one segment a column is one sequential fold
// (NumPy's order). {name}_column_stretches scans rows [begin, end) so (from `carries[c]` when
// `carried`), leaving each column's scan at `end - 1` in `carries[c]`; it reads them from `x`,
// or where STAGED from `stage` ({name}_column_unstage; null otherwise).
template <bool STAGED>
__device__ __forceinline__ void {name}_column_stretches(const {T}* __restrict__ x,
    {T}* __restrict__ y, long long base, long long n, long long inner, int reverse, bool live,
    long long c, long long s, long long width, long long segs, long long begin, long long end,
    bool carried, {T}* totals, {T}* carries, const {T}* stage) {{
  // (its item 0 of the first stretch, when STAGED; else `stage` is null and `at` stays so,
  // no arithmetic done on it: only the branch a conditional takes is evaluated)
  const {T}* at = STAGED ? stage + threadIdx.x * {cpad} : stage;
  for (long long r0 = begin; r0 < end; r0 += segs * {citems},
       at = STAGED ? at + {cpad} * blockDim.x : at) {{
    const long long lo = r0 + s * {citems};
    {T} v[{citems}];
    const int m = STAGED ? {name}_column_unstage(at, live, lo, end, v)
                         : {name}_column_load(x, base, n, inner, reverse, live, lo, end, v);
    if (m && s == 0 && (r0 > begin || carried)) v[0] = {name}_op(carries[c], v[0]);
    {T} last = v[0];  // (v[m - 1], kept in a register: a dynamic index puts v in local memory)
    #pragma unroll
    for (int u = 1; u < {citems}; ++u)
      if (u < m) last = v[u] = {name}_op(v[u - 1], v[u]);
    if (m) totals[threadIdx.x] = last;
    __syncthreads();
    if (s == 0 && live) {{  // segment 0's scan, then the others' totals folded in order
      {T} run = totals[c];
      for (long long k = 1; k < segs && lo + k * {citems} < end; ++k) {{
        const {T} part = totals[k * width + c];
        totals[k * width + c] = run;
        run = {name}_op(run, part);
      }}
      carries[c] = run;
    }}
    __syncthreads();
    if (m && s > 0) {{
      const {T} before = totals[threadIdx.x];
      #pragma unroll
      for (int u = 0; u < {citems}; ++u)
        if (u < m) v[u] = {name}_op(before, v[u]);
    }}
    #pragma unroll
    for (int u = 0; u < {citems}; ++u)
      if (u < m) y[plax_row_at(base, n, inner, reverse, lo + u)] = v[u];
    __syncthreads();  // (totals is written again next stretch)
  }}
}}
extern "C" __global__ void {name}_columns(const {T}* __restrict__ x, {T}* __restrict__ y,
    long long outer, long long n, long long inner, int reverse, int segments) {{
  __shared__ {T} totals[{THREADS}];
  __shared__ {T} carries[{THREADS}];
  // (a block narrower than `segments` threads, as the simulated GPU's one: a segment a thread)
  const long long segs = segments < (int)blockDim.x ? segments : blockDim.x;
  const long long width = blockDim.x / segs, c = threadIdx.x % width, s = threadIdx.x / width;
  const long long groups = (inner + width - 1) / width;
  for (long long job = blockIdx.x; job < outer * groups; job += gridDim.x) {{
    const long long col = (job % groups) * width + c;
    {name}_column_stretches<false>(x, y, (job / groups) * n * inner + col, n, inner, reverse,
                                   col < inner, c, s, width, segs, 0, n, false, totals, carries,
                                   nullptr);
  }}
}}
// The column kernel with the axis cut in parts of `part_rows` rows (a multiple of a stretch, at
// most {COLUMN_STAGED_STRETCHES} stretches), in one launch: a job is (part k, column group), taken in ticket
// order part by part (a part's predecessor in its group's chain was taken `chains` tickets
// before it). A block reads its part once: it folds the part's rows per column (each segment's
// rows in order, then the segments in order) as it stages them in shared memory (`stage`),
// publishes the group's totals ({name}_group_look_back), takes the carries (the left fold of
// the earlier parts' totals, in part order) and scans the staged part as the column kernel
// does, storing it. The parts depend on the shape alone, so the fold order does too.
extern "C" __global__ void {name}_columns_look_back(const {T}* __restrict__ x,
    {T}* __restrict__ y, unsigned long long* state, {group_scratch_params},
    long long outer, long long n, long long inner, int reverse, int segments,
    long long part_rows, unsigned int tag) {{
  __shared__ {T} stage[{COLUMN_STAGED_STRETCHES * THREADS * cpad}];
  __shared__ {T} totals[{THREADS}];
  __shared__ {T} carries[{THREADS}];
  __shared__ {T} part_totals[{THREADS}];
{group_walk}
  __shared__ long long ticket;
  __shared__ int last;
  const long long segs = segments < (int)blockDim.x ? segments : blockDim.x;
  const long long width = blockDim.x / segs, c = threadIdx.x % width, s = threadIdx.x / width;
  const long long groups = (inner + width - 1) / width, chains = outer * groups;
  const long long parts = (n + part_rows - 1) / part_rows, jobs = chains * parts;
  for (;;) {{
{_TAKE_TICKET}
    const long long k = job / chains, chain = job % chains;
    const long long col = (chain % groups) * width + c;
    const bool live = col < inner;
    const long long base = (chain / groups) * n * inner + col;
    const long long begin = k * part_rows, end = begin + part_rows < n ? begin + part_rows : n;
    {T} acc;
    bool any = false;
    {T}* at = stage + threadIdx.x * {cpad};
    for (long long r0 = begin; r0 < end; r0 += segs * {citems}, at += {cpad} * blockDim.x) {{
      const long long lo = r0 + s * {citems};
      {T} v[{citems}];
      const int m = {name}_column_load(x, base, n, inner, reverse, live, lo, end, v);
      if (m) {{
        {T} a = any ? {name}_op(acc, v[0]) : v[0];
        #pragma unroll
        for (int u = 1; u < {citems}; ++u)
          if (u < m) a = {name}_op(a, v[u]);
        acc = a;
        any = true;
      }}
      #pragma unroll
      for (int u = 0; u < {citems}; ++u)  // (this thread's own words: no barrier before it reads them)
        if (u < m) at[u] = v[u];
    }}
    if (any) totals[threadIdx.x] = acc;
    __syncthreads();
    if (s == 0 && live) {{
      {T} run = totals[c];
      for (long long q = 1; q < segs && begin + q * {citems} < end; ++q)
        run = {name}_op(run, totals[q * width + c]);
      part_totals[c] = run;
    }}
    __syncthreads();
    {group_call.format(name=name, stride="chains", width="(int)width", total="part_totals")}
    {name}_column_stretches<true>(x, y, base, n, inner, reverse, live, c, s, width, segs, begin,
                                  end, k > 0, totals, carries, stage);
  }}
{_clear_at_exit(group_count.format(width="width"), group_clear)}
}}
"""
    source += _single_pass_source(name, T, staged)
    _check_shared(source, T)
    return source, name


def argextreme_source(is_max: bool, ctype: str, index_ctype: str) -> tuple[str, str]:
    """The CUDA C++ source and kernel name of ``argmax`` (``is_max``) or ``argmin`` along an
    axis: the first index of the largest (smallest) value, the first NaN where there is one,
    as NumPy and XLA.

    The source holds, for contiguous rows (a last axis), ``name`` (one block per row; takes
    ``(x, out, rows, n)``) and, for rows split in tiles of ``tile`` elements, ``name +
    "_tile_best"`` (each tile's best value and index into ``values[row * tiles + k]``,
    ``where[...]`` (``long long``); takes ``(x, values, where, rows, n, tile)``) and ``name + "_of_tiles"`` (each row's best of its
    tiles' pairs, in tile order, so the same first-index and first-NaN rules pick the same
    element; takes ``(values, where, out, rows, tiles)``), and ``name + "_columns"`` (a non-last
    axis read coalesced, in parts of ``part_rows`` rows: the index, or with several parts each
    part's pair for ``_of_tiles``; takes ``(x, values, where, out, outer, n, inner, segs,
    part_rows)``, ``segs`` from :func:`arg_column_segments`).

    Args:
      is_max: argmax, else argmin.
      ctype: the operand's C type (a real type; not a 16-bit float).
      index_ctype: the result's C type.

    Returns:
      ``(source, name)``: the source and the one-block-per-row kernel's name.

    Example:
      >>> argextreme_source(True, "float", "int")[1]
      'plax_argmax_float_int'
    """
    return _cached_argextreme_source(is_max, ctype, index_ctype, _settings())


@functools.lru_cache(maxsize=None)
def _cached_argextreme_source(is_max: bool, ctype: str, index_ctype: str,
                              settings: tuple) -> tuple[str, str]:
    """:func:`argextreme_source` built once per its arguments and :func:`_settings` (as
    :func:`_cached_cumulative_source`)."""
    return _build_argextreme_source(is_max, ctype, index_ctype)


def _build_argextreme_source(is_max: bool, ctype: str, index_ctype: str) -> tuple[str, str]:
    """Builds :func:`argextreme_source` (uncached)."""
    kind = "argmax" if is_max else "argmin"
    name = f"plax_{kind}_{ctype.replace(' ', '_')}_{index_ctype.replace(' ', '_')}"
    T = ctype
    beats = ">" if is_max else "<"   # (value a `beats` value b: a is better, ties aside)
    citems = column_items(_ITEMSIZE[ctype])
    source = _NOINLINE + f"""
// whether (v, i) beats (b, j) (j < 0: nothing yet): the first NaN, else the {"largest" if is_max else "smallest"}, else the
// earlier index
__device__ __forceinline__ bool {name}_wins({T} v, long long i, {T} b, long long j) {{
  const bool b_nan = b != b, v_nan = v != v;
  return j < 0 || (v_nan && (!b_nan || i < j)) ||
      (!b_nan && !v_nan && (v {beats} b || (v == b && i < j)));
}}
// The best (value, index) of positions [start, stop) of the contiguous row at `base` (element
// p at x[base + p], its index p, or index[base + p] when `index` is given, rising with p), left
// in values[0], where[0] (where[0] < 0: an empty stretch). A strided pass per thread, then a
// tree: the better, else the earlier. (A non-last axis goes to {name}_columns.)
__device__ PLAX_ROW_NOINLINE void {name}_block(const {T}* __restrict__ x, const long long* __restrict__ index,
    long long base, long long start, long long stop, {T}* values, long long* where) {{
  const long long threads = blockDim.x, t = threadIdx.x;
  {T} best = x[base + start];
  long long at = -1;  // (no element of this thread's stride yet)
  for (long long p = start + t; p < stop; p += threads) {{
    const {T} v = x[base + p];
    // (p rises: on a tie the earlier index stays; the first NaN stays once taken)
    if (at < 0 || (best == best && (v != v || v {beats} best))) {{
      best = v;
      at = index != nullptr ? index[base + p] : p;
    }}
  }}
  values[t] = best; where[t] = at;
  __syncthreads();
  for (long long s = threads / 2; s > 0; s >>= 1) {{  // tree: the better, else the earlier
    if (t < s && where[t + s] >= 0) {{
      const {T} v = values[t + s];
      const long long i = where[t + s];
      if ({name}_wins(v, i, values[t], where[t])) {{ values[t] = v; where[t] = i; }}
    }}
    __syncthreads();
  }}
}}
extern "C" __global__ void {name}(const {T}* __restrict__ x, {index_ctype}* __restrict__ out,
    long long rows, long long n) {{
  __shared__ {T} values[{THREADS}];
  __shared__ long long where[{THREADS}];
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {{
    {name}_block(x, nullptr, row * n, 0, n, values, where);
    if (threadIdx.x == 0) out[row] = ({index_ctype})where[0];
    __syncthreads();
  }}
}}
// pass 1 of a row split in tiles: each tile's best pair, one block per (row, tile)
extern "C" __global__ void {name}_tile_best(const {T}* __restrict__ x, {T}* __restrict__ best,
    long long* __restrict__ best_at, long long rows, long long n, long long tile) {{
  __shared__ {T} values[{THREADS}];
  __shared__ long long where[{THREADS}];
  const long long tiles = (n + tile - 1) / tile;
  for (long long job = blockIdx.x; job < rows * tiles; job += gridDim.x) {{
    const long long row = job / tiles, start = (job % tiles) * tile;
    {name}_block(x, nullptr, row * n, start, start + tile < n ? start + tile : n, values, where);
    if (threadIdx.x == 0) {{ best[job] = values[0]; best_at[job] = where[0]; }}
    __syncthreads();
  }}
}}
// A non-last axis (inner > 1), coalesced: a block per (column group, part of the axis), the
// group `width` consecutive columns, its threads `segs` segments by `width` columns (thread t:
// segment t / width, column t % width; threads past segs * width idle), segment s reading rows
// s, s + segs, ... of the part, {citems} loads in flight: a warp reads consecutive columns of a
// row (or, with fewer than 32 columns, consecutive rows whole), memory in order. The segments'
// bests are combined per column in segment order by the earlier-index rule; `parts` 1: the
// index goes to `out[o * inner + col]`, else the part's pair to `best`, `best_at` at
// `(o * inner + col) * parts + k`, for {name}_of_tiles.
extern "C" __global__ void {name}_columns(const {T}* __restrict__ x, {T}* __restrict__ best,
    long long* __restrict__ best_at, {index_ctype}* __restrict__ out, long long outer,
    long long n, long long inner, int segments, long long part_rows) {{
  __shared__ {T} values[{THREADS}];
  __shared__ long long where[{THREADS}];
  const long long segs = segments < (int)blockDim.x ? segments : blockDim.x;
  const long long width = blockDim.x / segs, c = threadIdx.x % width, s = threadIdx.x / width;
  const long long groups = (inner + width - 1) / width, chains = outer * groups;
  const long long parts = (n + part_rows - 1) / part_rows;
  for (long long job = blockIdx.x; job < chains * parts; job += gridDim.x) {{
    const long long chain = job / parts, k = job % parts;
    const long long o = chain / groups, col = (chain % groups) * width + c;
    const bool live = col < inner && s < segs;
    const {T}* src = x + o * n * inner + col;
    const long long begin = k * part_rows, end = begin + part_rows < n ? begin + part_rows : n;
    {T} b = src[begin * inner - col];  // (any element: replaced by the first one taken)
    long long at = -1;
    for (long long r0 = begin + s; live && r0 < end; r0 += segs * {citems}) {{
      {T} v[{citems}];
      #pragma unroll
      for (int u = 0; u < {citems}; ++u)
        if (r0 + u * segs < end) v[u] = src[(r0 + u * segs) * inner];
      #pragma unroll
      for (int u = 0; u < {citems}; ++u)  // (rows rise: a tie keeps the earlier)
        if (r0 + u * segs < end && (at < 0 || (b == b && (v[u] != v[u] || v[u] {beats} b)))) {{
          b = v[u];
          at = r0 + u * segs;
        }}
    }}
    values[threadIdx.x] = b;
    where[threadIdx.x] = at;
    __syncthreads();
    if (s == 0 && col < inner) {{
      for (long long q = 1; q < segs; ++q) {{
        const {T} v = values[q * width + c];
        const long long i = where[q * width + c];
        if (i >= 0 && {name}_wins(v, i, b, at)) {{ b = v; at = i; }}
      }}
      if (parts == 1) {{
        out[o * inner + col] = ({index_ctype})at;
      }} else {{
        best[(o * inner + col) * parts + k] = b;
        best_at[(o * inner + col) * parts + k] = at;
      }}
    }}
    __syncthreads();  // (values is written again next job)
  }}
}}
// pass 2: each row's best of its tiles' pairs
extern "C" __global__ void {name}_of_tiles(const {T}* __restrict__ best,
    const long long* __restrict__ best_at, {index_ctype}* __restrict__ out, long long rows,
    long long tiles) {{
  __shared__ {T} values[{THREADS}];
  __shared__ long long where[{THREADS}];
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {{
    {name}_block(best, best_at, row * tiles, 0, tiles, values, where);
    if (threadIdx.x == 0) out[row] = ({index_ctype})where[0];
    __syncthreads();
  }}
}}
"""
    _check_shared(source, T)
    return source, name


def _layout(shape, axis: int) -> tuple[int, int, int]:
    """``(outer, n, inner)`` of a C-order ``shape`` around ``axis``."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def tiles_for(rows: int, n: int, tile: int) -> int:
    """How many tiles (blocks) each of ``rows`` rows of ``n`` elements is split in: 1 (one
    block per row) unless the rows are too few to occupy the GPU (below :data:`FEW_ROWS`) and
    each is at least :data:`LONG_ROW` long (and two tiles), then ``ceil(n / tile)``.

    Args:
      rows: how many independent rows.
      n: elements per row.
      tile: elements per tile (:func:`tile_of` the element size).

    Returns:
      The tile count per row (at least 1).

    Example:
      >>> tiles_for(1, 10**8, 8192) == -(-10**8 // 8192)
      True
      >>> tiles_for(4096, 10**5, 8192)
      1
    """
    if rows >= FEW_ROWS or n < max(LONG_ROW, 2 * tile):
        return 1
    return -(-n // tile)


def _grid(jobs: int, device: int) -> int:
    """Blocks of a launch with ``jobs`` block-sized jobs on GPU ``device``: at most
    ``codegen.WAVES * 4`` a multiprocessor, as :func:`plax_cupy.codegen.elementwise_launch`
    (a grid-stride loop covers the rest). The multiprocessors are the backend's
    (:func:`plax_cupy.runtime.probe`, cached for the process: the simulated GPU reports its
    own), :data:`plax_cupy.codegen.DEFAULT_SM_COUNT` for a device it did not list."""
    from plax_cupy import runtime
    gpus, _ = runtime.probe()
    sms = gpus[device].multiprocessors if device < len(gpus) else codegen.DEFAULT_SM_COUNT
    return max(1, min(jobs, sms * codegen.WAVES * 4))


def _launch(source: str, name: str, jobs: int, *args) -> None:
    """Kernel ``name`` of ``source`` on :data:`THREADS`-thread blocks, one per job (a
    grid-stride loop covers jobs beyond the grid), compiled by plax (keeping subnormals: one
    module per source, so a source's kernels share it) and counted as one launch."""
    from plax_cupy import kernel_modules, runtime
    device = cupy.cuda.Device().id
    module = kernel_modules.module(kernel_modules.module_text(codegen.PREAMBLE, source),
                                   _kernel_names(source), device_id=device)
    module.get_function(name)((_grid(jobs, device),), (THREADS,), tuple(args))
    runtime.note_launch()


#: the static shared memory a block may declare (CUDA's limit without a kernel opting in to
#: more, which these do not): every kernel of a row source must fit, whatever the settings
SHARED_LIMIT = 48 * 1024

#: a ``__shared__`` declaration: its C type, then its name and extents (``[256]``, or none)
_SHARED_DECLARATION = re.compile(r"__shared__\s+(?:volatile\s+)?([A-Za-z_][\w ]*?)\s+\w+((?:\[\d+\])*)\s*;")


def shared_bytes(source: str, ctype: str) -> dict:
    """The static shared memory each kernel of a row source declares, in bytes: its
    ``__shared__`` arrays (sized by the settings the source was built with: :data:`THREADS`,
    :data:`GROUP_HELD`, :data:`COLUMN_STAGED_STRETCHES`, the element's size...), each aligned to
    its element's size (at most 16), in declaration order: ptxas's own count to within a few
    bytes (it may order them otherwise).

    Args:
      source: a source of :func:`cumulative_source` or :func:`argextreme_source`.
      ctype: the element's C type it was built for.

    Returns:
      ``{kernel name: bytes}``, in the source's order.

    Raises:
      ValueError: for a ``__shared__`` declaration it cannot read (extents that are not
        numbers) or of a C type the dtype table (:data:`plax_cupy.dtypes.CTYPES`) does not
        size, naming it: a count that skipped it would pass a kernel over the limit.

    Example:
      >>> source, name = cumulative_source("sum", "float")
      >>> shared_bytes(source, "float")[name + "_columns"]   # totals and carries: 2 x 256 x 4
      2048
    """
    found = {}
    starts = [m for m in re.finditer(r'extern "C" __global__ void (\w+)\(', source)]
    for m in starts:
        body = source[source.index("{", m.end()):]
        depth, end = 0, 0
        for end, char in enumerate(body):   # (to the brace closing the kernel's body)
            depth += (char == "{") - (char == "}")
            if depth == 0:
                break
        total = 0
        for at in re.finditer(r"__shared__", body[:end]):
            declaration = body[at.start():body.index(";", at.start()) + 1]
            parsed = _SHARED_DECLARATION.fullmatch(declaration)
            if parsed is None:
                raise ValueError(f"shared_bytes cannot read {declaration!r} in {m.group(1)}")
            size = _ITEMSIZE.get(parsed.group(1))
            if size is None:
                raise ValueError(f"shared_bytes: {m.group(1)} declares a __shared__ array of C "
                                 f"type {parsed.group(1)!r}, which the dtype table "
                                 "(plax_cupy.dtypes.CTYPES) does not size")
            count = math.prod(int(n) for n in re.findall(r"\d+", parsed.group(2)))
            total = -(-total // min(size, 16)) * min(size, 16) + size * count
        found[m.group(1)] = total
    return found


def _check_shared(source: str, ctype: str) -> None:
    """Raises ``ValueError`` where a kernel of ``source`` declares more shared memory than
    :data:`SHARED_LIMIT` (a setting raised past what a block holds: NVRTC compiles it, and the
    launch fails on the GPU, or ptxas refuses it)."""
    for kernel_name, size in shared_bytes(source, ctype).items():
        if size > SHARED_LIMIT:
            settings = ", ".join(f"{k}={v}" for k, v in zip(_SOURCE_SETTINGS, _settings()))
            raise ValueError(f"{kernel_name} declares {size} bytes of shared memory on {ctype}, "
                             f"more than a block's {SHARED_LIMIT}: lower the settings "
                             f"({settings})")


@functools.lru_cache(maxsize=None)
def _kernel_names(source: str) -> tuple:
    """The ``extern "C" __global__`` kernels of ``source``, in order."""
    return tuple(re.findall(r'extern "C" __global__ void (\w+)\(', source))


#: split rows are scanned in one launch (``_single_pass``: tiles look back at the tiles before
#: them) rather than three passes (the tiles' totals, their scan, each tile's scan); both
#: combine the tiles' totals in a fixed order, so results do not depend on timing
SINGLE_PASS = True

def scan_rows(op: str, work, out, outer: int, n: int, inner: int, reverse: bool) -> None:
    """Writes the cumulative ``op`` of ``work`` (contiguous, viewed as ``(outer, n, inner)``)
    along its middle axis into ``out`` (same shape and dtype): one launch with a block per row
    (or, along a non-last axis of at least :data:`COLUMN_MIN` columns, a block per group of
    columns, a thread a column: ``name + "_columns"``, with the axis in parts for few groups:
    ``name + "_columns_look_back"``), or for few long rows (:func:`tiles_for`)
    one launch of a block per tile with a look-back (:data:`SINGLE_PASS`; along a non-last axis
    of fewer columns a tile is rows of the axis by every column, loaded whole:
    ``name + "_columns_single_pass"``; a replayed CUDA graph reuses its tag and scratch, which
    the kernel leaves cleared), else three: the tiles' totals, their scan (this function again, on the
    ``(rows, tiles)`` totals), each tile's scan from the totals before.

    Args:
      op: ``"sum"``, ``"prod"``, ``"max"``, ``"min"`` or ``"logsumexp"``.
      work: the operand (a CuPy array of a row-kernel dtype).
      out: the result buffer.
      outer, n, inner: the layout (:func:`_layout`).
      reverse: scan from the end of each row.

    Example:
      >>> scan_rows("sum", x, y, 1, x.size, 1, False)   # doctest: +SKIP
    """
    rows = outer * inner
    ctype = dtypes.ctype(work.dtype)
    source, name = cumulative_source(op, ctype)
    if inner >= COLUMN_MIN:
        _scan_columns(source, name, work, out, outer, n, inner, reverse)
        return
    tile = tile_of(work.dtype.itemsize)
    tiles = tiles_for(rows, n, tile)
    common = (np.int64(rows), np.int64(n), np.int64(inner), np.int32(bool(reverse)))
    if tiles == 1:
        _launch(source, name, rows, work, out, *common)
        return
    jobs = rows * tiles
    if SINGLE_PASS and 1 < inner < COLUMN_MIN:   # (a tile: rows of the axis by every column)
        tile_rows = column_tile_rows(tile, inner)
        if tile_rows * inner > _capacity(ctype):
            raise ValueError(f"a tile of {tile_rows} rows by {inner} columns exceeds what a "
                             f"block stages ({_capacity(ctype)})")
        tickets = outer * -(-n // tile_rows)
        state = cupy.empty((2,), np.uint64)
        scratch = group_scratch(tickets, inner, work.dtype)
        _launch(source, name + "_columns_single_pass", tickets, work, out, state, *scratch,
                np.int64(outer), np.int64(n), np.int64(inner), np.int32(bool(reverse)),
                np.int64(tile_rows), codegen.launch_tag(30))
        return
    if SINGLE_PASS:
        if tile > _capacity(ctype):
            raise ValueError(f"a single-pass tile of {tile} elements exceeds what a block "
                             f"stages ({_capacity(ctype)})")
        state = cupy.empty((2,), np.uint64)
        scratch = look_back_scratch(jobs, work.dtype)
        tag = codegen.launch_tag(30)
        _launch(source, name + "_single_pass", jobs, work, out, state, *scratch, *common,
                np.int64(tile), tag)
        return
    sums = cupy.empty((rows * tiles,), work.dtype)
    _launch(source, name + "_tile_totals", rows * tiles, work, sums, *common, np.int64(tile))
    scanned = cupy.empty_like(sums)
    scan_rows(op, sums, scanned, rows, tiles, 1, False)   # (tiles in scan order already)
    _launch(source, name + "_tiles", rows * tiles, work, out, scanned, *common, np.int64(tile))


def _column_plan(segments, outer: int, n: int, inner: int, itemsize: int,
                 *stretches: int) -> tuple[int, int, int, int]:
    """``(segs, width, groups, part_rows)`` of a column kernel on an ``(outer, n, inner)``
    layout of ``itemsize``-byte elements: ``segs = segments(n, inner, itemsize)`` segments of
    the axis (:func:`column_segments` or :func:`arg_column_segments`), ``width`` columns a block
    of :data:`THREADS`, ``groups`` column groups an outer slice, and the rows of each part of the
    axis (:func:`column_part_rows`, of ``stretches`` where given; looked up when called: tests
    force it)."""
    segs = segments(n, inner, itemsize)
    width = THREADS // segs
    groups = -(-inner // width)
    return segs, width, groups, column_part_rows(outer * groups, n, segs, itemsize, *stretches)


def _scan_columns(source: str, name: str, work, out, outer: int, n: int, inner: int,
                  reverse: bool) -> None:
    """:func:`scan_rows` along a non-last axis of at least :data:`COLUMN_MIN` columns: the
    column kernel (``name + "_columns"``), or with the axis in parts (:func:`column_part_rows`
    of at most :data:`COLUMN_STAGED_STRETCHES` stretches) its split form (``name +
    "_columns_look_back"``), one launch either way."""
    itemsize = work.dtype.itemsize
    stretches = min(COLUMN_PART_STRETCHES, COLUMN_STAGED_STRETCHES)
    segs, width, groups, part_rows = _column_plan(column_segments, outer, n, inner, itemsize,
                                                  stretches)
    if part_rows >= n:
        _launch(source, name + "_columns", outer * groups, work, out, np.int64(outer),
                np.int64(n), np.int64(inner), np.int32(bool(reverse)), np.int32(segs))
        return
    parts = -(-n // part_rows)
    # (sized for any block width the kernel meets: a narrower block, as the simulated GPU's
    # one thread, makes groups of fewer columns, so more tiles and as many columns)
    state = cupy.empty((2,), np.uint64)
    scratch = group_scratch(outer * (inner + width - 1) * parts, 1, work.dtype)
    _launch(source, name + "_columns_look_back", outer * groups * parts, work, out, state,
            *scratch, np.int64(outer), np.int64(n), np.int64(inner), np.int32(bool(reverse)),
            np.int32(segs), np.int64(part_rows), codegen.launch_tag(30))


def arg_rows(is_max: bool, work, out, outer: int, n: int, inner: int) -> None:
    """Writes argmax (``is_max``) or argmin of ``work`` (contiguous, viewed as ``(outer, n,
    inner)``, ``n >= 1``) along its middle axis into ``out`` (``outer * inner`` indices): one
    launch with a block per row, or for few long rows (:func:`tiles_for`) two: each tile's
    best (value, index), then each row's best of those. Along a non-last axis (``inner`` > 1)
    the coalesced column kernel, and with its axis in parts (:func:`column_part_rows`) each
    column's best of its parts' pairs: one launch, or two.

    Args:
      is_max: argmax, else argmin.
      work: the operand (a CuPy array of a real row-kernel dtype).
      out: the index buffer (its dtype is the result's).
      outer, n, inner: the layout (:func:`_layout`).

    Example:
      >>> arg_rows(True, x, out, 1, x.size, 1)   # doctest: +SKIP
    """
    rows = outer * inner
    source, name = argextreme_source(is_max, dtypes.ctype(work.dtype), dtypes.ctype(out.dtype))
    if inner > 1:
        _arg_columns(source, name, work, out, outer, n, inner)
        return
    tile = tile_of(work.dtype.itemsize)
    tiles = tiles_for(rows, n, tile)
    if tiles == 1:
        _launch(source, name, rows, work, out, np.int64(rows), np.int64(n))
        return
    best = cupy.empty((rows * tiles,), work.dtype)
    best_at = cupy.empty((rows * tiles,), np.int64)
    _launch(source, name + "_tile_best", rows * tiles, work, best, best_at, np.int64(rows),
            np.int64(n), np.int64(tile))
    _launch(source, name + "_of_tiles", rows, best, best_at, out, np.int64(rows), np.int64(tiles))


def arg_column_segments(n: int, inner: int, itemsize: int) -> int:
    """Segments of the axis a block of the argmax/argmin column kernel reads in: as the
    cumulative column kernel (:func:`column_segments`) from :data:`COLUMN_MIN` columns, else
    as many as :data:`THREADS` threads hold rows of ``inner`` columns (a warp then reads whole
    consecutive rows: contiguous memory).

    Example:
      >>> arg_column_segments(4096, 4096, 4), arg_column_segments(10**6, 4, 4)
      (8, 64)
    """
    if inner >= COLUMN_MIN:
        return column_segments(n, inner, itemsize)
    return THREADS // inner


def _arg_columns(source: str, name: str, work, out, outer: int, n: int, inner: int) -> None:
    """:func:`arg_rows` along a non-last axis: ``name + "_columns"`` (coalesced), with the
    axis in parts (:func:`column_part_rows`) then each column's best of its parts' pairs
    (``name + "_of_tiles"``, in part order): one launch, or two."""
    segs, _, groups, part_rows = _column_plan(arg_column_segments, outer, n, inner,
                                              work.dtype.itemsize)
    parts = -(-n // part_rows)
    best = cupy.empty((outer * inner * parts if parts > 1 else 1,), work.dtype)
    best_at = cupy.empty(best.shape, np.int64)
    _launch(source, name + "_columns", outer * groups * parts, work, best, best_at, out,
            np.int64(outer), np.int64(n), np.int64(inner), np.int32(segs), np.int64(part_rows))
    if parts > 1:
        _launch(source, name + "_of_tiles", outer * inner, best, best_at, out,
                np.int64(outer * inner), np.int64(parts))


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _cumulative(op: str):
    def run(x, *, axis, reverse):
        dtype = np.dtype(x.dtype)
        if dtype not in dtypes.CTYPES or dtype == np.bool_:  # (the primitives refuse booleans)
            raise TypeError(f"cum{op} on the GPU does not take dtype {dtype}")
        compute = _compute_dtype(dtype)
        out = run_op(op, x.astype(compute, copy=False), axis, reverse)
        return out.astype(dtype, copy=False)
    return run


def run_op(op: str, x, axis: int, reverse: bool):
    """The cumulative ``op`` of the device array ``x`` along ``axis`` (a new C-contiguous
    array of ``x``'s dtype, a row-kernel dtype): :func:`scan_rows` on its contiguous copy."""
    work = cupy.ascontiguousarray(x)
    out = cupy.empty(work.shape, work.dtype)
    outer, n, inner = _layout(work.shape, axis)
    if work.size and work.dtype.kind == "c" and op in ("max", "min"):
        # (JAX's complex max/min are not associative: a thread per row folds in order)
        from plax_cupy.kernels_complex_scan import complex_scan
        complex_scan(op == "max", work, out, outer, n, inner, bool(reverse))
    elif work.size:
        scan_rows(op, work, out, outer, n, inner, bool(reverse))
    return out


def _arg(is_max: bool):
    def run(x, *, axes, index_dtype):
        (axis,) = axes
        dtype = np.dtype(x.dtype)
        compute = _compute_dtype(dtype)
        work = cupy.ascontiguousarray(x.astype(compute, copy=False))
        outer, n, inner = _layout(work.shape, axis)
        out = cupy.empty(work.shape[:axis] + work.shape[axis + 1:], np.dtype(index_dtype))
        if out.size:
            if n == 0:
                raise ValueError(f"{'argmax' if is_max else 'argmin'} of an empty axis {axis} "
                                 f"(shape {tuple(x.shape)}): there is no index to return")
            arg_rows(is_max, work, out, outer, n, inner)
        return out
    return run


def register() -> None:
    """Registers the row kernels for the cumulative ops (every dtype they take) and
    argmax/argmin."""
    for prim, op in ((lax.cumsum_p, "sum"), (lax.cumprod_p, "prod"), (lax.cummax_p, "max"),
                     (lax.cummin_p, "min"), (cumlogsumexp_p, "logsumexp")):
        kernel(prim)(_cumulative(op))
    kernel(lax.argmax_p)(_arg(True))
    kernel(lax.argmin_p)(_arg(False))

"""Fusion clusters as CUDA C: one kernel per cluster, generated as source text.

:func:`plan_cluster` turns a :class:`plax.lowering.Cluster` (the shared fusion pass's
grouping, the same the Numba backend compiles) into a :class:`ClusterKernel`: a complete
CUDA C++ translation unit plus what the runtime needs to launch it. This module never imports
CuPy: the source is plain text, so CI without a GPU compiles it with NVRTC
(:mod:`plax_cupy.nvrtc`) and, with ``-DPLAX_HOST``, with the host C++ compiler to check its
values (``tests/cupy``).

The translation unit has three parts:

* the **preamble** (:data:`PREAMBLE`): ``__device__`` helpers with XLA's semantics where C's
  differ -- NaN-propagating max/min, truncating integer division with division by zero giving
  -1, ``rem`` by zero giving the dividend, wrapping signed arithmetic (done in the unsigned type
  of the width: C's signed overflow is undefined), saturating float-to-integer conversion,
  shifts by the width or more giving 0 or the sign, bit casts;
* ``plax_elem(i, ...)``: everything the cluster computes at element ``i`` of the iteration
  shape (C order): it loads the operands (through ``broadcast_in_dim``'s index map where
  needed), evaluates the chain in registers, stores the elementwise outputs and hands each
  reduction its operand;
* the kernels: ``plax_elementwise`` (a grid-stride loop over the elements), or for a cluster
  with reductions ``plax_reduce`` (blocks own (output group, chunk) pairs: a group is
  :func:`reduction_layout`'s outputs per block -- 32 consecutive outputs on a warp for column
  sums, several short rows, or one output --, each of its threads accumulates a strided part
  of the chunk of its output and the block combines each output's lanes in shared memory).
  Where one block covers each group (:func:`reduction_launch`'s ``blocks_per_output`` is 1:
  short reductions, or many outputs) the block stores the results; otherwise each block
  stores its partials, fences, and counts itself done on its group's tagged counter, and the
  last block to count combines the partials in chunk order with a fixed tree and stores the
  results (and computes the cluster's epilogue on them, ``plax_epilogue(o, ...)``: elementwise
  work on the reductions' results, :attr:`plax.lowering.Cluster.epilogue`). One
  launch either way, and deterministic for a launch configuration: the combine's order never
  depends on which block finished last. Under ``#ifdef PLAX_HOST`` the same ``plax_elem`` is
  driven instead by a serial host function ``plax_host``;
* for a horizontal group (:func:`plan_group`), ``plax_multi``: one grid-stride loop over the
  concatenated element ranges of several elementwise clusters, each with its own
  ``plax_elem_m<k>``.

Shapes are baked into the source (index maps, extents): a kernel is compiled once per
cluster shape and dtype signature and cached by CuPy (in memory and on disk). Scalar literals
are kernel arguments, so programs differing only in their constants share a kernel.

**Types.** float16 and bfloat16 live in memory as their 16-bit patterns (``plax_f16``,
``plax_bf16``) and in registers as ``float``: each equation computes in float32 and rounds its
result to the type (nearest even), which is what NumPy's float16 and ml_dtypes' bfloat16 do per
operation, so fused chains round exactly where the reference does. Complex values are
``plax_c64``/``plax_c128`` (two floats or doubles, NumPy's layout) with NumPy's arithmetic
(Smith's division, integer powers by multiplication) and the functions computed from real ones
(finite operands match NumPy to a few ulps of the value's magnitude; infinite and NaN parts
give C99 Annex G's values, as NumPy's, for exp, exp2, log, log1p, expm1, sqrt, sin, cos, tan,
sinh, cosh, tanh, sign, abs, logistic and the inverse trigonometric and hyperbolic functions;
other operations follow their formulas; exp, sinh and cosh of a real part beyond exp's range
scale by halves, so a finite product stays finite). All four are read from device memory,
never passed by value, so launchers need no scalar conversion for them.

**Functions CUDA lacks.** Complex ``asin``/``acos``/``atan``/``asinh``/``acosh``/``atanh``,
``digamma``, ``bessel_i0e``/``bessel_i1e``, ``igamma``/``igammac``/``igamma_grad_a``/
``random_gamma_grad``, ``zeta``/``polygamma`` and ``betainc`` are the generator's own device
functions (:mod:`plax_cupy.special_source`), added after the preamble to the kernels that call them;
``erf``, ``erfc``, ``erf_inv`` and ``lgamma`` are CUDA's.

Whatever the generator does not express (a cluster whose reductions reduce different axes, a
dtype outside the map) raises :class:`Unsupported`: the lowering driver then runs the
cluster's equations one at a time (and an equation the generator declines on its own runs as
its kernel-table kernel, see :mod:`plax_cupy.emitter`).
"""
from __future__ import annotations

import itertools
import math
import re
import numpy as np

from plax import lax
from plax.core.jaxpr import Literal, Var
from plax.lax.fused_multiply_add import fma_p
from plax.lowering import (ARG_REDUCTION, BROADCAST, INDEX, REDUCTION, fusion_kind,
                           integer_exponent, sub_cluster)

from plax_cupy import codegen_structural, special_source
from plax_cupy.dtypes import (UnsupportedDtype, accumulator, ctype, is_floating, is_half,
                              unsigned_ctype, value_ctype)

#: threads per block of every generated kernel (a power of two: the block reduction halves it)
BLOCK = 256
#: blocks per multiprocessor a launch aims for (enough resident warps to hide memory latency)
WAVES = 8
#: the multiprocessor count assumed where no device is there to ask (an A100 has 108,
#: an H100 132): only the launch configuration depends on it, never the results' bits... of
#: elementwise kernels; reductions combine in an order fixed by the configuration
DEFAULT_SM_COUNT = 108
#: elements a reduction thread accumulates before partials are worth another block
ITEMS_PER_THREAD = 8
#: the largest member (elements) of a multi-tensor kernel (:func:`plan_group`): below it a
#: member's own kernel runs for a few launch costs at most, so a launch saved is a good part
#: of its time (2^22 float32: 48 MB moved, ~11 us at an H200's 4.3 TB/s, against ~3-5 us per
#: launch issued from Python); above it the grouping gains little (a guess, not measured)
HORIZONTAL_MAX_ELEMENTS = 1 << 22
#: the largest kernel (elements) that computes per element a value it reads through a
#: structural equation however costly (``plax.lowering.FusionOptions.recompute_max_elements``:
#: a key split before a sampler hashed again by each sample): below it a launch of ~3-5 us
#: issued from Python costs more than the repeated work (four hashes of ~100 integer
#: instructions per element: 2^16 elements take ~1 us of an H200's integer throughput)
RECOMPUTE_MAX_ELEMENTS = 1 << 16
#: bytes of one vector access of an elementwise kernel's vector path (a 128-bit load or
#: store: ``ld.global.nc.v4.u32``/``st.global.v4.u32``; see :func:`_vector_kernel`)
VECTOR_BYTES = 16
#: vector accesses per operand each thread issues before computing (chunks ``T`` apart, ``T``
#: the grid's threads): independent loads in flight, which a streaming kernel needs to cover
#: the memory latency of an H100/H200 (Little's law: about 32 KB in flight per SM)
VECTOR_CHUNKS = 2
#: the fewest elements for which an elementwise kernel gets a vector path: below it the kernel
#: is bound by its launch, and the path would only add code to compile
VECTOR_MIN_ELEMENTS = 1 << 16
#: the longest row (elements) of a row-local cluster (``plax.lowering.FusionOptions.row_local``,
#: :mod:`plax_cupy.codegen_rows_local`: softmax or layer norm with a block per row, each phase
#: re-reading the row). Up to it a row is at most 32 KiB of float32 per block (each later
#: phase's re-read hits L1/L2) and a block's 256 threads take at most 32 elements each per
#: phase; past it the split reductions of today's plan keep more blocks busy per row (a
#: choice, not yet measured on a GPU: docs/gpu.md)
ROW_LOCAL_MAX_ELEMENTS = 8192
#: the fewest equations of its own (values only it reads) some case of a ``select_n`` needs
#: for the select to become a branch computing only the selected case
#: (:func:`_branch_selects`): below it a divergent warp's cost of running both branches and
#: the branch itself outweigh what the warps that agree save (a guess; selu's ``where`` owns 3)
LAZY_SELECT_MIN_EQUATIONS = 8


class Unsupported(Exception):
    """The cluster uses something the CUDA generator does not express (the message says what)."""


# ---------------------------------------------------------------- launch configuration

def elementwise_launch(n: int, sm_count: int = DEFAULT_SM_COUNT, block: int = BLOCK,
                       per_thread: int = 1) -> tuple[int, int]:
    """``(grid, block)`` of an elementwise kernel over ``n`` elements.

    A grid-stride loop covers any ``n``, so the grid is capped at ``sm_count * WAVES * 4``
    blocks (more blocks than that only add scheduling work); at least one block.

    Args:
      n: the elements.
      sm_count: the device's multiprocessors.
      block: threads per block.
      per_thread: elements a thread takes per step of its loop (a kernel's
        ``ClusterKernel.per_thread``: ``VECTOR_CHUNKS`` vectors on the vector path, else 1).

    Returns:
      ``(grid, block)``.

    Example:
      >>> elementwise_launch(1000)
      (4, 256)
      >>> elementwise_launch(10**9, sm_count=100)
      (3200, 256)
      >>> elementwise_launch(1 << 20, sm_count=132, per_thread=8)   # float32, vector path
      (512, 256)
    """
    if n < 0 or block <= 0 or sm_count <= 0 or per_thread <= 0:
        raise ValueError(f"bad launch request n={n} block={block} sm_count={sm_count} "
                         f"per_thread={per_thread}")
    grid = max(1, min(-(-n // (block * per_thread)), sm_count * WAVES * 4))
    return grid, block


def reduction_launch(n_out: int, n_red: int, sm_count: int = DEFAULT_SM_COUNT,
                     block: int = BLOCK, outputs_per_block: int = 1) -> tuple[int, int, int]:
    """``(grid, block, blocks_per_output)`` of a reduction kernel.

    Each of the ``n_out`` output elements reduces ``n_red`` elements; a block reduces
    ``outputs_per_block`` outputs together (a group, :func:`reduction_layout`), with ``block //
    outputs_per_block`` threads each. A group's reduction is split over ``blocks_per_output``
    blocks (each thread accumulating about :data:`ITEMS_PER_THREAD` elements or more), enough
    to occupy the device when there are few groups; groups beyond the grid are covered by a
    grid-stride loop.

    Example:
      >>> reduction_launch(1, 10**8, sm_count=100)   # one sum of 1e8 elements
      (800, 256, 800)
      >>> reduction_launch(4096, 512, sm_count=132)   # row sums on an H200: a block per row
      (4096, 256, 1)
      >>> reduction_launch(2048, 4096, 132, outputs_per_block=32)   # column sums, 32 a block
      (1088, 256, 17)
    """
    if n_out < 0 or n_red < 0 or block <= 0 or sm_count <= 0:
        raise ValueError(f"bad launch request n_out={n_out} n_red={n_red}")
    if outputs_per_block < 1 or block % outputs_per_block:
        raise ValueError(f"bad launch request: {outputs_per_block} outputs per block of {block}")
    lanes = block // outputs_per_block                        # threads per output
    groups = -(-n_out // outputs_per_block)
    target = sm_count * WAVES
    want = -(-n_red // (lanes * ITEMS_PER_THREAD))           # blocks the work fills
    share = -(-target // max(groups, 1))                      # blocks the device has per group
    bpo = max(1, min(want, share))
    out_blocks = max(1, min(groups, max(1, (target * 4) // bpo), 1 << 20))
    return bpo * out_blocks, block, bpo


def reduction_layout(shape, red_axes, block: int = BLOCK) -> tuple[int, bool]:
    """``(outputs_per_block, outputs_fastest)``: how a reduction kernel's block of ``block``
    threads covers the outputs of a reduction of ``shape`` over ``red_axes``.

    Where every reduced axis comes before every kept one (column sums, a bias gradient's sum
    over the batch), a warp's threads take consecutive outputs (``outputs_fastest``: each load
    a contiguous row of them; a thread per output and reduced lane, up to 32 outputs a block)
    and the remaining threads split the reduced elements. So too where kept axes follow the
    last reduced one with at least 32 elements, or a power of two of them, between them (an
    ``argmax`` over the middle axis of ``(8, 300, 64)``: a warp reads 32 consecutive outputs'
    elements of a row, or whole rows of 2, 4, ... 16 elements), unless the reduced extent is
    so short that the layout below already reads runs as long (``(4096, 1, 64)`` or
    ``(1000, 3, 4)`` over axis 1: a warp's 32 outputs read 32 consecutive elements, its 8
    outputs two whole rows of 4 each reduced element, where a warp on outputs would leave 7 of
    every 8 threads idle and launch 8 times the blocks). Otherwise the threads of an output are
    consecutive and take consecutive reduced elements, an output per block unless the reduced
    extent is short (a row of 10 takes 16 threads, 16 rows a block): a block of 256 threads
    over a row of 10 left 246 of them idle and paid a full tree for it.

    Args:
      shape: the iteration shape.
      red_axes: the reduced axes (sorted).
      block: threads per block (a power of two).

    Returns:
      The outputs a block reduces together (a power of two dividing ``block``) and whether
      consecutive threads take consecutive outputs.

    Example:
      >>> reduction_layout((4096, 2048), (0,))
      (32, True)
      >>> reduction_layout((4096, 10), (1,))
      (16, False)
      >>> reduction_layout((8, 100000), (1,))
      (1, False)
      >>> reduction_layout((8, 300, 64), (1,)), reduction_layout((8, 300, 4), (1,))
      ((32, True), (4, True))
      >>> reduction_layout((4096, 1, 64), (1,)), reduction_layout((1000, 3, 4), (1,))
      ((256, False), (64, False))
    """
    red_axes = tuple(red_axes)
    n_out = math.prod(d for a, d in enumerate(shape) if a not in red_axes)
    n_red = math.prod(shape[a] for a in red_axes)
    if red_axes == tuple(range(len(red_axes))) and len(red_axes) < len(shape) and n_out > 1:
        return min(32, block, 1 << (n_out - 1).bit_length()), True
    lanes = min(block, max(1, 1 << (max(n_red, 1) - 1).bit_length()))
    inner = _inner_extent(shape, red_axes)
    # (the layout below puts 32 // lanes consecutive outputs on a warp at each reduced
    # element: runs as long as the outputs-fastest layout's min(32, inner), with fewer idle
    # threads, once lanes * min(32, inner) <= 32)
    if _warp_covers_rows(inner) and lanes * min(32, inner) > 32:
        return min(32, block, inner), True
    return block // lanes, False


def _inner_extent(shape, red_axes) -> int:
    """The elements of the kept axes after the last reduced one (1: the last axis reduced)."""
    return math.prod(shape[max(red_axes) + 1:]) if red_axes else 1


def _warp_covers_rows(inner: int) -> bool:
    """Whether a warp on ``inner``'s consecutive outputs reads contiguous runs of a row: 32
    elements of it, or whole rows of a power of two (:func:`reduction_layout`)."""
    return inner >= 32 or (inner > 1 and inner & (inner - 1) == 0)


def reads_coalesced(shape, red_axes) -> bool:
    """Whether a reduction kernel (:func:`reduction_layout`) over ``shape`` reads its operand
    coalesced: a warp's threads on consecutive outputs (``outputs_fastest``, or consecutive
    outputs covering whole rows of a short reduced axis) or on consecutive reduced elements of
    a row (the last axis reduced). A middle axis before a few kept elements (``(8, 300, 5)``
    over axis 1) is neither: each lane reads a column of the axis, ``5`` elements apart.

    Example:
      >>> reads_coalesced((8, 300, 5), (1,)), reads_coalesced((8, 300), (1,))
      (False, True)
    """
    inner = _inner_extent(shape, tuple(red_axes))
    return inner == 1 or _warp_covers_rows(inner) or reduction_layout(shape, red_axes)[1]


class UnfusedArgReduction(Unsupported):
    """An ``argmax``/``argmin`` the cluster kernel would read uncoalesced: the emitter runs it
    as its own (coalesced) kernel after the rest of the cluster (:mod:`plax_cupy.emitter`)."""


def _reduces(primitive) -> bool:
    """Whether ``primitive`` reduces (a ``REDUCTION``, or ``argmax``/``argmin``) in a cluster."""
    return fusion_kind(primitive, arg_reductions=True) in (REDUCTION, ARG_REDUCTION)


# ---------------------------------------------------------------- literals and helpers

def c_literal(value, dtype) -> str:
    """``value`` as an exact C++ constant of ``dtype``: hexadecimal floats (exact in every
    compiler), bit patterns for NaN and infinities, integer limits without overflow.

    Example:
      >>> c_literal(0.1, np.float32)
      '0x1.99999ap-4f'
      >>> c_literal(-2**63, np.int64)
      '(-9223372036854775807LL - 1)'
    """
    dtype = np.dtype(dtype)
    v = np.asarray(value, dtype)[()]
    if dtype == np.bool_:
        return "true" if v else "false"
    if dtype.kind == "c":  # a complex constant from its parts
        part = np.float32 if dtype == np.complex64 else np.float64
        return (f"plax_cplx<{value_ctype(part)}>({c_literal(v.real, part)}, "
                f"{c_literal(v.imag, part)})")
    if is_half(dtype):  # its value type's constant (float16/bfloat16 values are exact floats)
        return c_literal(np.float32(v), np.float32)
    if dtype.kind == "f":
        f = float(v)
        if math.isnan(f) or math.isinf(f):
            bits = int(np.asarray(v, dtype).view(np.uint32 if dtype.itemsize == 4 else np.uint64))
            suffix = "u" if dtype.itemsize == 4 else "ull"
            return f"plax_bitcast<{ctype(dtype)}>({bits:#x}{suffix})"
        if dtype == np.float32:
            # the float32 value's exact hex form (float.hex of the widened value, trimmed)
            return f"{_hex_float(f)}f"
        return _hex_float(f)
    i = int(v)
    t = ctype(dtype)
    if dtype.kind == "i":
        if dtype.itemsize == 8:
            if i == -2**63:
                return "(-9223372036854775807LL - 1)"
            return f"{i}LL"
        if i == int(np.iinfo(dtype).min):
            return f"(({t})({i + 1} - 1))"
        return f"(({t}){i})" if dtype.itemsize < 4 else str(i)
    suffix = "ull" if dtype.itemsize == 8 else "u"
    return f"(({t}){i}{suffix})" if dtype.itemsize < 4 else f"{i}{suffix}"


def _hex_float(f: float) -> str:
    text = f.hex()  # '0x1.999999a000000p-4'
    if "." in text:
        mant, exp = text.split("p")
        mant = mant.rstrip("0").rstrip(".")
        text = f"{mant}p{exp}"
    return text


def _fn(name: str, dtype) -> str:
    """The C math function for ``dtype``: ``expf`` for float32 (and float16/bfloat16, computed
    in float32), ``exp`` for float64."""
    return name + "f" if np.dtype(dtype) == np.float32 or is_half(dtype) else name


def _kind(dtype) -> str:
    """NumPy's kind letter, with bfloat16 (kind ``"V"``) counted as a float."""
    return "f" if is_floating(dtype) else np.dtype(dtype).kind


def load_expr(expr: str, dtype) -> str:
    """``expr`` (an element as stored) as its value type: float16/bfloat16 bits to float."""
    return f"plax_val({expr})" if is_half(dtype) else expr


def store_expr(expr: str, dtype, src=None) -> str:
    """``expr`` (a value of ``src``'s value type, default ``dtype``'s) as ``dtype`` is stored:
    float16 rounds from double or float, bfloat16 from float (as ml_dtypes converts), complex
    values convert part by part, everything else by a C cast."""
    dtype = np.dtype(dtype)
    src = dtype if src is None else np.dtype(src)
    if dtype == np.float16:
        return f"plax_to_f16({expr})"
    if is_half(dtype):
        return f"plax_to_bf16((float){expr})"
    if dtype.kind == "c":
        return expr if src == dtype else f"plax_ccast<{_part_ctype(dtype)}>({expr})"
    return expr if src == dtype else f"(({ctype(dtype)}){expr})"


def _part_ctype(dtype) -> str:
    """The C type of a complex dtype's real and imaginary parts."""
    return "float" if np.dtype(dtype) == np.complex64 else "double"


def _round_half(expr: str, dtype) -> str:
    """A float expression rounded to float16's or bfloat16's values (nearest even)."""
    fn = "plax_round_f16" if np.dtype(dtype) == np.float16 else "plax_round_bf16"
    return f"{fn}({expr})"


def signed_ctype(dtype) -> str:
    return {1: "signed char", 2: "short", 4: "int", 8: "long long"}[np.dtype(dtype).itemsize]


def _wide_unsigned(dtype) -> str:
    """The unsigned type integer arithmetic of ``dtype`` is carried out in (never narrower than
    ``unsigned int``, so that C's promotion to ``int`` cannot overflow)."""
    return "unsigned long long" if np.dtype(dtype).itemsize == 8 else "unsigned int"


#: how far apart consecutive launch tags lie (the golden ratio of 2**32): tags of one run are
#: spread over the whole space, not small counts, so the chance that reused, uncleared scratch
#: already holds this launch's tag is about one in 2**bits, not that of a small integer
_TAG_STRIDE = 0x9E3779B9
_LAUNCHES_TAGGED = itertools.count(1)


def launch_tag(bits: int = 32) -> np.uint32:
    """A nonzero tag of ``bits`` bits for one launch of a kernel whose blocks count or flag
    themselves on uncleared scratch (``plax_tagged_count``; ``kernels_rows``' look-back): a word
    holding another tag reads as unset, so scratch needs no clearing before the launch.

    Args:
      bits: the width the kernel keeps for the tag (32, or 30 where it packs two flag bits).

    Returns:
      A ``numpy.uint32`` in ``[1, 2**bits)``, different from the tags of the launches just before.

    Example:
      >>> 0 < int(launch_tag(30)) < 2 ** 30
      True
    """
    mask = (1 << bits) - 1
    tag = (next(_LAUNCHES_TAGGED) * _TAG_STRIDE) & mask
    return np.uint32(tag or 1)


PREAMBLE = r"""// ---- plax_cupy preamble: XLA semantics on top of C++ (see plax_cupy/codegen.py)
#ifdef PLAX_SIM
// the kernels compiled for the host, one thread per block (tests/cupy's simulated device):
// with blockDim 1 the block reduction is a no-op and __syncthreads has nothing to wait for
struct plax_dim3 { unsigned int x, y, z; };
static plax_dim3 blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
static int plax_sim_fenced;
extern "C" void plax_sim_block(unsigned int block, unsigned int grid) {
  blockIdx.x = block; gridDim.x = grid; blockDim.x = 1; threadIdx.x = 0; plax_sim_fenced = 0;
}
#define __global__
#define __shared__ static
static inline void __syncthreads() {}
// the memory model of a block counting itself done (plax_count_done): a fence since the
// block's last count, or the count is an error the simulated launcher reports (its partials
// might not be visible to the block that combines them)
extern "C" { unsigned int plax_sim_unfenced_counts = 0; }
static inline void plax_sim_fence() { plax_sim_fenced = 1; }
static inline void plax_sim_counted() {
  if (!plax_sim_fenced) ++plax_sim_unfenced_counts;
  plax_sim_fenced = 0;
}
#endif
#if defined(PLAX_HOST) || defined(PLAX_SIM)
// the host builds' stand-ins for CUDA's atomics and fences (GCC builtins: a threaded host
// test runs blocks as concurrent threads; kernels_rows' sources use them too)
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long expected,
                                           unsigned long long desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
static inline unsigned int atomicExch(unsigned int* p, unsigned int v) {
  return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned long long atomicExch(unsigned long long* p, unsigned long long v) {
  return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}
#ifdef PLAX_SIM
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); plax_sim_fence(); }
#else
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif
#include <cmath>
#include <cstring>
#include <cstdlib>
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
using std::isfinite;
// the float and double overloads CUDA declares globally (the complex templates call them)
using std::fabs; using std::hypot; using std::exp; using std::expm1; using std::log; using std::sin;
using std::cos; using std::tan; using std::sinh; using std::cosh; using std::sqrt; using std::atan2;
using std::copysign; using std::rint; using std::tanh; using std::isinf;
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
// CUDA's erfinv has no C library counterpart: M. Giles' approximation, then Newton steps on
// erf in double (accurate to rounding; only the host check uses it)
static inline double erfinv(double y) {
  if (y != y || y < -1.0 || y > 1.0) return NAN;
  if (y == 1.0 || y == -1.0) return y * INFINITY;
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) {
    w -= 2.5;
    x = 2.81022636e-08; x = 3.43273939e-07 + x * w; x = -3.5233877e-06 + x * w;
    x = -4.39150654e-06 + x * w; x = 0.00021858087 + x * w; x = -0.00125372503 + x * w;
    x = -0.00417768164 + x * w; x = 0.246640727 + x * w; x = 1.50140941 + x * w;
  } else {
    w = std::sqrt(w) - 3.0;
    x = -0.000200214257; x = 0.000100950558 + x * w; x = 0.00134934322 + x * w;
    x = -0.00367342844 + x * w; x = 0.00573950773 + x * w; x = -0.0076224613 + x * w;
    x = 0.00943887047 + x * w; x = 1.00167406 + x * w; x = 2.83297682 + x * w;
  }
  x *= y;
  for (int k = 0; k < 3; ++k) x -= (std::erf(x) - y) / (1.1283791670955126 * std::exp(-x * x));
  return x;
}
static inline float erfinvf(float y) { return (float)erfinv((double)y); }
#endif
// The count before this one of the 64-bit counter `word`, tagged with `tag` in its high half
// (a word of another tag counts as zero: scratch needs no clearing before a launch)
__device__ __forceinline__ unsigned long long plax_tagged_count(unsigned long long* word,
                                                                unsigned int tag) {
  unsigned long long old = *(volatile unsigned long long*)word;
  for (;;) {
    const unsigned long long count = (old >> 32) == tag ? (old & 0xffffffffull) : 0ull;
    const unsigned long long seen = atomicCAS(word, old, ((unsigned long long)tag << 32) | (count + 1));
    if (seen == old) return count;
    old = seen;
  }
}
// The blocks done before this one on `word` (plax_tagged_count); the caller fences its stores
// first, which the simulated GPU checks
__device__ __forceinline__ unsigned long long plax_count_done(unsigned long long* word,
                                                              unsigned int tag) {
#ifdef PLAX_SIM
  plax_sim_counted();
#endif
  return plax_tagged_count(word, tag);
}
// A value another block stored before counting itself done or raising its flag (then a
// fence): read past the L1 cache (volatile loads), a 32-bit word at a time where its size
// allows (a float: one load, not four), else a byte at a time
template <typename T> __device__ __forceinline__ T plax_read_published(const T* p) {
  T v;
  if (sizeof(T) % 4 == 0) {
    unsigned int words[(sizeof(T) + 3) / 4];  // (the bound of a 2-byte T's dead branch: 1)
    for (unsigned int i = 0; i < (sizeof(T) + 3) / 4; ++i)
      words[i] = ((const volatile unsigned int*)p)[i];
    memcpy(&v, words, sizeof(T));  // (not a store through another type's pointer)
  } else {
    for (unsigned int i = 0; i < sizeof(T); ++i) ((char*)&v)[i] = ((const volatile char*)p)[i];
  }
  return v;
}
template <typename To, typename From>
__device__ __forceinline__ To plax_bitcast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bitcast between different widths");
  union { From f; To t; } u;
  u.f = x;
  return u.t;
}
// max/min of equal floats (XLA's -0 < +0): the AND of their bits is -0 only for two -0s (max),
// the OR is -0 for either (min); equal nonzero values have equal bits
__device__ __forceinline__ float plax_max_tie(float a, float b) { return plax_bitcast<float>(plax_bitcast<unsigned>(a) & plax_bitcast<unsigned>(b)); }
__device__ __forceinline__ double plax_max_tie(double a, double b) { return plax_bitcast<double>(plax_bitcast<unsigned long long>(a) & plax_bitcast<unsigned long long>(b)); }
__device__ __forceinline__ float plax_min_tie(float a, float b) { return plax_bitcast<float>(plax_bitcast<unsigned>(a) | plax_bitcast<unsigned>(b)); }
__device__ __forceinline__ double plax_min_tie(double a, double b) { return plax_bitcast<double>(plax_bitcast<unsigned long long>(a) | plax_bitcast<unsigned long long>(b)); }
// max/min: NaN wins (XLA), -0 < +0, otherwise the larger/smaller
__device__ __forceinline__ float plax_max(float a, float b) { return a != a ? a : (b != b ? b : (a > b ? a : (a == b ? plax_max_tie(a, b) : b))); }
__device__ __forceinline__ double plax_max(double a, double b) { return a != a ? a : (b != b ? b : (a > b ? a : (a == b ? plax_max_tie(a, b) : b))); }
__device__ __forceinline__ float plax_min(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? a : (a == b ? plax_min_tie(a, b) : b))); }
__device__ __forceinline__ double plax_min(double a, double b) { return a != a ? a : (b != b ? b : (a < b ? a : (a == b ? plax_min_tie(a, b) : b))); }
template <typename T> __device__ __forceinline__ T plax_max(T a, T b) { return a > b ? a : b; }
template <typename T> __device__ __forceinline__ T plax_min(T a, T b) { return a < b ? a : b; }
// truncating division; by zero: -1 (all ones); MIN / -1 wraps to MIN
template <typename T, typename U> __device__ __forceinline__ T plax_sdiv(T x, T y) {
  if (y == 0) return (T)-1;
  if (y == (T)-1) return (T)((U)0 - (U)x);
  return (T)(x / y);
}
template <typename T> __device__ __forceinline__ T plax_udiv(T x, T y) { return y == 0 ? (T)~(T)0 : (T)(x / y); }
// remainder with the dividend's sign; by zero: the dividend
template <typename T> __device__ __forceinline__ T plax_srem(T x, T y) {
  if (y == 0) return x;
  if (y == (T)-1) return (T)0;
  return (T)(x % y);
}
template <typename T> __device__ __forceinline__ T plax_urem(T x, T y) { return y == 0 ? x : (T)(x % y); }
// float -> integer: truncate, saturate, NaN -> 0 (compared in double, where the bounds are exact)
template <typename T> __device__ __forceinline__ T plax_f2i(double x, double lo, double hi_excl, T tmin, T tmax) {
  return x != x ? (T)0 : (x >= hi_excl ? tmax : (x < lo ? tmin : (T)x));
}
__device__ __forceinline__ float plax_sign(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : (x != x ? x : 0.0f)); }
__device__ __forceinline__ double plax_sign(double x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : (x != x ? x : 0.0)); }
// 1 / (1 + exp(-x)) without overflow for large negative x
__device__ __forceinline__ float plax_logistic(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}
__device__ __forceinline__ double plax_logistic(double x) {
  if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}// nextafter bit by bit, as NumPy (C99): NaN in, NaN out; x == y gives y (so nextafter(0, -0)
// is -0); from zero the smallest subnormal with y's sign (CUDA's nextafterf may flush it)
template <typename F, typename U> __device__ __forceinline__ F plax_nextafter_bits(F x, F y) {
  if (x != x || y != y) return x + y;
  if (x == y) return y;
  const U sign = (U)1 << (sizeof(U) * 8 - 1);
  if (x == (F)0) return plax_bitcast<F>((U)((y < (F)0 ? sign : (U)0) | (U)1));
  const U b = plax_bitcast<U>(x);
  return plax_bitcast<F>((U)(((y > x) == (x > (F)0)) ? b + 1 : b - 1));
}
__device__ __forceinline__ float plax_nextafter(float x, float y) { return plax_nextafter_bits<float, unsigned int>(x, y); }
__device__ __forceinline__ double plax_nextafter(double x, double y) { return plax_nextafter_bits<double, unsigned long long>(x, y); }
// ---- float16 and bfloat16: 16-bit patterns in memory, float values in registers; every result
// rounded to the type (nearest even), as NumPy's float16 and ml_dtypes' bfloat16 round per op
struct plax_f16 { unsigned short bits; };
struct plax_bf16 { unsigned short bits; };
__device__ __forceinline__ float plax_f16_value(unsigned short h) {
  const unsigned int sign = (unsigned int)(h & 0x8000u) << 16;
  const unsigned int e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return plax_bitcast<float>(sign | 0x7f800000u | (m << 13));
  if (e == 0u) {  // zero or subnormal: m * 2**-24, exact in float
    const float v = (float)m * 0x1p-24f;
    return sign ? -v : v;
  }
  return plax_bitcast<float>(sign | ((e + 112u) << 23) | (m << 13));
}
__device__ __forceinline__ unsigned short plax_f16_bits(double x) {
  const unsigned long long b = plax_bitcast<unsigned long long>(x);
  const unsigned short sign = (unsigned short)((b >> 48) & 0x8000u);
  const unsigned long long a = b & 0x7fffffffffffffffull;
  if (a > 0x7ff0000000000000ull) return (unsigned short)(sign | 0x7e00u | ((a >> 42) & 0x3ffu));
  if (a >= 0x40effe0000000000ull) return (unsigned short)(sign | 0x7c00u);  // >= 65520: inf
  if (a < 0x3f10000000000000ull) {  // below 2**-14: a subnormal (or zero), in units of 2**-24
    return (unsigned short)(sign | (unsigned short)rint(plax_bitcast<double>(a) * 0x1p24));
  }
  const unsigned long long r = a - (1008ull << 52);  // rebias 1023 -> 15
  return (unsigned short)(sign | (unsigned short)((r + 0x1ffffffffffull + ((r >> 42) & 1ull)) >> 42));
}
// the same from float, in 32-bit integers (the common case: results computed in float)
__device__ __forceinline__ unsigned short plax_f16_bits(float x) {
  const unsigned int b = plax_bitcast<unsigned int>(x);
  const unsigned short sign = (unsigned short)((b >> 16) & 0x8000u);
  const unsigned int a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // >= 65520: inf
  if (a < 0x38800000u) {  // below 2**-14: a subnormal (or zero), in units of 2**-24
    return (unsigned short)(sign | (unsigned short)rintf(plax_bitcast<float>(a) * 0x1p24f));
  }
  const unsigned int r = a - (112u << 23);  // rebias 127 -> 15
  return (unsigned short)(sign | (unsigned short)((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
}
__device__ __forceinline__ float plax_bf16_value(unsigned short h) {
  return plax_bitcast<float>((unsigned int)h << 16);
}
__device__ __forceinline__ unsigned short plax_bf16_bits(float x) {  // from float, as ml_dtypes
  const unsigned int b = plax_bitcast<unsigned int>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b >> 16) | 0x40u);
  return (unsigned short)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float plax_val(plax_f16 h) { return plax_f16_value(h.bits); }
__device__ __forceinline__ float plax_val(plax_bf16 h) { return plax_bf16_value(h.bits); }
__device__ __forceinline__ plax_f16 plax_to_f16(double x) { plax_f16 h; h.bits = plax_f16_bits(x); return h; }
__device__ __forceinline__ plax_f16 plax_to_f16(float x) { plax_f16 h; h.bits = plax_f16_bits(x); return h; }
__device__ __forceinline__ plax_bf16 plax_to_bf16(float x) { plax_bf16 h; h.bits = plax_bf16_bits(x); return h; }
__device__ __forceinline__ float plax_round_f16(double x) { return plax_f16_value(plax_f16_bits(x)); }
__device__ __forceinline__ float plax_round_f16(float x) { return plax_f16_value(plax_f16_bits(x)); }
__device__ __forceinline__ float plax_round_bf16(float x) { return plax_bf16_value(plax_bf16_bits(x)); }
__device__ __forceinline__ float plax_nextafter_f16(float x, float y) {
  if (x != x || y != y) return x + y;
  if (x == y) return y;
  const unsigned short b = plax_f16_bits(x);
  if (x == 0.0f) return plax_f16_value(y < 0.0f ? 0x8001u : 0x0001u);
  return plax_f16_value((unsigned short)(((y > x) == (x > 0.0f)) ? b + 1 : b - 1));
}
__device__ __forceinline__ float plax_nextafter_bf16(float x, float y) {
  if (x != x || y != y) return x + y;
  if (x == y) return y;
  const unsigned short b = plax_bf16_bits(x);
  if (x == 0.0f) return plax_bf16_value(y < 0.0f ? 0x8001u : 0x0001u);
  return plax_bf16_value((unsigned short)(((y > x) == (x > 0.0f)) ? b + 1 : b - 1));
}
// fma of float16/bfloat16 values (held as float): a * b + c rounded to odd in float, so that
// the one rounding to the narrow type that follows is the correctly rounded fma (24 bits >=
// 11 + 2 and 8 + 2). In double the product is exact; two-sum gives the sum's error; float's
// nearest value moves one step toward the exact sum where inexact and even. The _rn
// intrinsics keep -fmad=true from contracting the error-free steps (host builds: -ffp-contract=off).
#if defined(PLAX_HOST) || defined(PLAX_SIM)
#define plax_dadd_rn(x, y) ((x) + (y))
#define plax_dsub_rn(x, y) ((x) - (y))
#define plax_dmul_rn(x, y) ((x) * (y))
#else
#define plax_dadd_rn __dadd_rn
#define plax_dsub_rn __dsub_rn
#define plax_dmul_rn __dmul_rn
#endif
__device__ __forceinline__ float plax_fma_odd_f32(float a, float b, float c) {
  const double p = plax_dmul_rn((double)a, (double)b), z = (double)c;
  const double s = plax_dadd_rn(p, z), zz = plax_dsub_rn(s, p);
  const double e = plax_dadd_rn(plax_dsub_rn(p, plax_dsub_rn(s, zz)), plax_dsub_rn(z, zz));
  const float f = (float)s;
  const double d = plax_dsub_rn(s, (double)f);
  const double toward = d != 0.0 ? d : e;
  if ((plax_bitcast<unsigned int>(f) & 1u) || toward == 0.0 || isinf(f) || f != f) return f;
  return plax_nextafter(f, plax_bitcast<float>(toward > 0.0 ? 0x7f800000u : 0xff800000u));
}
__device__ __forceinline__ float plax_qnan(float) { return plax_bitcast<float>(0x7fc00000u); }
__device__ __forceinline__ double plax_qnan(double) { return plax_bitcast<double>(0x7ff8000000000000ull); }
// ---- complex64 / complex128: NumPy's layout; arithmetic and functions as NumPy computes them
// (division by Smith's method, as NumPy). Trivial aggregates, so they may live in __shared__.
template <typename T> struct alignas(2 * sizeof(T)) plax_complex { T re, im; };
typedef plax_complex<float> plax_c64;
typedef plax_complex<double> plax_c128;
template <typename T> __device__ __forceinline__ plax_complex<T> plax_cplx(T re, T im) {
  plax_complex<T> z; z.re = re; z.im = im; return z;
}
template <typename T, typename S> __device__ __forceinline__ plax_complex<T> plax_ccast(plax_complex<S> z) {
  return plax_cplx<T>((T)z.re, (T)z.im);
}
template <typename T> __device__ __forceinline__ plax_complex<T> operator+(plax_complex<T> a, plax_complex<T> b) { return plax_cplx<T>(a.re + b.re, a.im + b.im); }
template <typename T> __device__ __forceinline__ plax_complex<T> operator-(plax_complex<T> a, plax_complex<T> b) { return plax_cplx<T>(a.re - b.re, a.im - b.im); }
template <typename T> __device__ __forceinline__ plax_complex<T> operator-(plax_complex<T> a) { return plax_cplx<T>(-a.re, -a.im); }
template <typename T> __device__ __forceinline__ plax_complex<T> operator*(plax_complex<T> a, plax_complex<T> b) {
  return plax_cplx<T>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
template <typename T> __device__ __forceinline__ plax_complex<T> operator/(plax_complex<T> a, plax_complex<T> b) {
  const T br = fabs(b.re), bi = fabs(b.im);
  if (br >= bi) {
    if (br == (T)0 && bi == (T)0) return plax_cplx<T>(a.re / br, a.im / bi);
    const T rat = b.im / b.re, scl = (T)1 / (b.re + b.im * rat);
    return plax_cplx<T>((a.re + a.im * rat) * scl, (a.im - a.re * rat) * scl);
  }
  const T rat = b.re / b.im, scl = (T)1 / (b.im + b.re * rat);
  return plax_cplx<T>((a.re * rat + a.im) * scl, (a.im * rat - a.re) * scl);
}
template <typename T> __device__ __forceinline__ bool operator==(plax_complex<T> a, plax_complex<T> b) { return a.re == b.re && a.im == b.im; }
template <typename T> __device__ __forceinline__ bool operator!=(plax_complex<T> a, plax_complex<T> b) { return !(a == b); }
template <typename T> __device__ __forceinline__ bool plax_isnan(plax_complex<T> a) { return a.re != a.re || a.im != a.im; }
// JAX's max/min of complex values (plax.lowering.complex_extremes): real parts compared, then
// imaginary parts; the first operand only where it wins strictly, so a tie gives the second
// (its zeros' signs too) and a NaN in a compared part never wins
template <typename T> __device__ __forceinline__ bool plax_cfirst_wins(plax_complex<T> a, plax_complex<T> b, bool is_max) {
  return a.re == b.re ? (is_max ? a.im > b.im : a.im < b.im) : (is_max ? a.re > b.re : a.re < b.re);
}
template <typename T> __device__ __forceinline__ plax_complex<T> plax_max(plax_complex<T> a, plax_complex<T> b) { return plax_cfirst_wins(a, b, true) ? a : b; }
template <typename T> __device__ __forceinline__ plax_complex<T> plax_min(plax_complex<T> a, plax_complex<T> b) { return plax_cfirst_wins(a, b, false) ? a : b; }
// sort orders complex values as the reference does (np.lexsort by real part, then
// imaginary part; NaN after every number in each key)
template <typename T> __device__ __forceinline__ bool plax_nan_last_less(T a, T b, bool* tie) {
  const bool an = a != a, bn = b != b;
  *tie = (an && bn) || (!an && !bn && a == b);
  return an != bn ? bn : (!an && a < b);
}
template <typename T> __device__ __forceinline__ bool plax_csort_less(plax_complex<T> a, plax_complex<T> b) {
  bool tie;
  const bool re = plax_nan_last_less(a.re, b.re, &tie);
  if (!tie) return re;
  return plax_nan_last_less(a.im, b.im, &tie);
}
template <typename T> __device__ __forceinline__ T plax_cabs(plax_complex<T> z) { return hypot(z.re, z.im); }
// z / |z| as NumPy: 0 at 0, NaN where a part is NaN (and |z| is not infinite), the direction
// of the infinite part where one part is infinite, NaN where both are
template <typename T> __device__ __forceinline__ plax_complex<T> plax_csign(plax_complex<T> z) {
  const T r = hypot(z.re, z.im);
  if (r != r) return plax_cplx<T>(r, r);
  if (isinf(r)) {
    if (isinf(z.re)) {
      if (isinf(z.im)) return plax_cplx<T>(plax_qnan(r), plax_qnan(r));
      return plax_cplx<T>(z.re > (T)0 ? (T)1 : (T)-1, (T)0);
    }
    return plax_cplx<T>((T)0, z.im > (T)0 ? (T)1 : (T)-1);
  }
  if (r == (T)0) return plax_cplx<T>((T)0, (T)0);
  return plax_cplx<T>(z.re / r, z.im / r);
}
// the largest argument whose exp is finite (a little below it)
__device__ __forceinline__ float plax_exp_limit(float) { return 88.0f; }
__device__ __forceinline__ double plax_exp_limit(double) { return 709.0; }
template <typename T> __device__ __forceinline__ plax_complex<T> plax_cexp(plax_complex<T> z) {
  if (z.im == (T)0) return plax_cplx<T>(exp(z.re), z.im);
  if (isinf(z.re) && !isfinite(z.im)) {  // C99: +inf + i NaN, or 0 from -inf
    return z.re > (T)0 ? plax_cplx<T>(z.re, plax_qnan(z.re)) : plax_cplx<T>((T)0, (T)0);
  }
  if (z.re > plax_exp_limit(z.re)) {  // exp(re) overflows where the product may not
    const T h = exp(z.re * (T)0.5);
    return plax_cplx<T>((h * cos(z.im)) * h, (h * sin(z.im)) * h);
  }
  const T e = exp(z.re);
  return plax_cplx<T>(e * cos(z.im), e * sin(z.im));
}
template <typename T> __device__ __forceinline__ plax_complex<T> plax_clog(plax_complex<T> z) {
  return plax_cplx<T>(log(hypot(z.re, z.im)), atan2(z.im, z.re));
}
template <typename T> __device__ __forceinline__ plax_complex<T> plax_cexpm1(plax_complex<T> z) {
  const T s = sin(z.im / (T)2);  // NumPy: expm1(re) cos(im) - 2 sin^2(im / 2), exp(re) sin(im)
  return plax_cplx<T>(expm1(z.re) * cos(z.im) - (T)2 * s * s, exp(z.re) * sin(z.im));
}
template <typename T> __device__ __forceinline__ plax_complex<T> plax_clog1p(plax_complex<T> z) {
  const T re = z.re + (T)1;  // NumPy: log(|1 + z|), arg(1 + z)
  return plax_cplx<T>(log(hypot(re, z.im)), atan2(z.im, re));
}
template <typename T> __device__ __forceinline__ plax_complex<T> plax_csqrt(plax_complex<T> z) {
  if (z.re == (T)0 && z.im == (T)0) return plax_cplx<T>((T)0, z.im);
  if (isinf(z.im)) return plax_cplx<T>(fabs(z.im), z.im);  // C99: +inf +- i inf, even for NaN
  const T t = sqrt((fabs(z.re) + hypot(z.re, z.im)) * (T)0.5);
  if (z.re >= (T)0) return plax_cplx<T>(t, z.im / ((T)2 * t));
  return plax_cplx<T>(fabs(z.im) / ((T)2 * t), copysign(t, z.im));
}
// on the real axis the imaginary part is the signed zero C99 gives (not inf * 0 = NaN)
template <typename T> __device__ __forceinline__ plax_complex<T> plax_csinh(plax_complex<T> z) {
  if (z.im == (T)0) return plax_cplx<T>(sinh(z.re), z.im);
  if (z.re == (T)0 && !isfinite(z.im)) return plax_cplx<T>(z.re, plax_qnan(z.re));
  if (isinf(z.re) && !isfinite(z.im)) return plax_cplx<T>(z.re, plax_qnan(z.re));
  if (fabs(z.re) > plax_exp_limit(z.re)) {  // sinh, cosh overflow where the products may not
    const T h = exp(fabs(z.re) * (T)0.5), c = (h * (T)0.5 * cos(z.im)) * h;
    return plax_cplx<T>(z.re < (T)0 ? -c : c, (h * (T)0.5 * sin(z.im)) * h);
  }
  return plax_cplx<T>(sinh(z.re) * cos(z.im), cosh(z.re) * sin(z.im));
}
template <typename T> __device__ __forceinline__ plax_complex<T> plax_ccosh(plax_complex<T> z) {
  if (z.im == (T)0) return plax_cplx<T>(cosh(z.re), copysign((T)0, z.re) * z.im);
  if (z.re == (T)0 && !isfinite(z.im)) return plax_cplx<T>(plax_qnan(z.re), z.re * (T)0);
  if (isinf(z.re) && !isfinite(z.im)) return plax_cplx<T>(fabs(z.re), plax_qnan(z.re));
  if (fabs(z.re) > plax_exp_limit(z.re)) {
    const T h = exp(fabs(z.re) * (T)0.5), c = (h * (T)0.5 * sin(z.im)) * h;
    return plax_cplx<T>((h * (T)0.5 * cos(z.im)) * h, z.re < (T)0 ? -c : c);
  }
  return plax_cplx<T>(cosh(z.re) * cos(z.im), sinh(z.re) * sin(z.im));
}
template <typename T> __device__ __forceinline__ plax_complex<T> plax_ctanh(plax_complex<T> z) {
  // Kahan's formula; for |re| > 22, tanh(re) is +-1 to working precision
  if (z.im == (T)0) return plax_cplx<T>(tanh(z.re), z.im);
  if (z.re == (T)0 && !isfinite(z.im)) return plax_cplx<T>(z.re, plax_qnan(z.re));
  if (!isfinite(z.im)) {  // C99: 1 +- i0 from an infinite real part, else NaN
    if (isinf(z.re)) return plax_cplx<T>(copysign((T)1, z.re), copysign((T)0, z.im));
    return plax_cplx<T>(plax_qnan(z.re), plax_qnan(z.re));
  }
  if (fabs(z.re) > (T)22) {
    const T e = exp((T)-2 * fabs(z.re));
    return plax_cplx<T>(copysign((T)1, z.re), (T)4 * sin(z.im) * cos(z.im) * e);
  }
  const T t = tan(z.im), beta = (T)1 + t * t, s = sinh(z.re), rho = sqrt((T)1 + s * s);
  const T den = (T)1 + beta * s * s;
  return plax_cplx<T>(beta * rho * s / den, t / den);
}
// sin z = -i sinh(i z), cos z = cosh(i z) (C99's definitions: the special values follow)
template <typename T> __device__ __forceinline__ plax_complex<T> plax_csin(plax_complex<T> z) {
  const plax_complex<T> t = plax_csinh(plax_cplx<T>(-z.im, z.re));
  return plax_cplx<T>(t.im, -t.re);
}
template <typename T> __device__ __forceinline__ plax_complex<T> plax_ccos(plax_complex<T> z) {
  return plax_ccosh(plax_cplx<T>(-z.im, z.re));
}
template <typename T> __device__ __forceinline__ plax_complex<T> plax_ctan(plax_complex<T> z) {
  const plax_complex<T> t = plax_ctanh(plax_cplx<T>(-z.im, z.re));  // tan z = -i tanh(i z)
  return plax_cplx<T>(t.im, -t.re);
}
template <typename T> __device__ __forceinline__ plax_complex<T> plax_cexp2(plax_complex<T> z) {
  const T ln2 = (T)0.693147180559945309417232121458176568;
  return plax_cexp(plax_cplx<T>(z.re * ln2, z.im * ln2));
}
template <typename T> __device__ __forceinline__ plax_complex<T> plax_crsqrt(plax_complex<T> z) {
  return plax_cplx<T>((T)1, (T)0) / plax_csqrt(z);
}
template <typename T> __device__ __forceinline__ plax_complex<T> plax_clogistic(plax_complex<T> z) {
  const plax_complex<T> one = plax_cplx<T>((T)1, (T)0);
  return one / (one + plax_cexp(-z));
}
// z ** w as NumPy: exact small integer powers by multiplication, else exp(w log z)
template <typename T> __device__ __forceinline__ plax_complex<T> plax_cpow(plax_complex<T> a, plax_complex<T> b) {
  const plax_complex<T> one = plax_cplx<T>((T)1, (T)0);
  if (b.re == (T)0 && b.im == (T)0) return one;
  if (a.re == (T)0 && a.im == (T)0) {
    if (b.re > (T)0 && b.im == (T)0) return plax_cplx<T>((T)0, (T)0);
    return plax_cplx<T>(plax_qnan((T)0), plax_qnan((T)0));
  }
  if (b.im == (T)0 && fabs(b.re) < (T)100 && b.re == (T)(long long)b.re) {
    long long n = (long long)b.re;
    if (n == 1) return a;
    if (n == 2) return a * a;
    if (n == 3) return (a * a) * a;
    long long m = n < 0 ? -n : n, mask = 1;
    plax_complex<T> aa = one, p = a;
    while (1) {
      if (m & mask) aa = aa * p;
      mask <<= 1;
      if (m < mask || mask <= 0) break;
      p = p * p;
    }
    return n < 0 ? one / aa : aa;
  }
  return plax_cexp(b * plax_clog(a));
}
"""


# ---------------------------------------------------------------- elementwise expressions

_ARITH = {lax.add_p: "+", lax.add_any_p: "+", lax.sub_p: "-", lax.mul_p: "*"}
_COMPARE = {lax.eq_p: "==", lax.ne_p: "!=", lax.lt_p: "<", lax.le_p: "<=", lax.gt_p: ">",
            lax.ge_p: ">="}
_BITWISE = {lax.and_p: "&", lax.or_p: "|", lax.xor_p: "^"}
_FLOAT_UNARY = {
    lax.exp_p: "exp", lax.exp2_p: "exp2", lax.log_p: "log", lax.log1p_p: "log1p",
    lax.expm1_p: "expm1", lax.tanh_p: "tanh", lax.sin_p: "sin", lax.cos_p: "cos",
    lax.tan_p: "tan", lax.asin_p: "asin", lax.acos_p: "acos", lax.atan_p: "atan",
    lax.sinh_p: "sinh", lax.cosh_p: "cosh", lax.asinh_p: "asinh", lax.acosh_p: "acosh",
    lax.atanh_p: "atanh", lax.sqrt_p: "sqrt", lax.rsqrt_p: "rsqrt", lax.cbrt_p: "cbrt",
    lax.floor_p: "floor", lax.ceil_p: "ceil", lax.abs_p: "fabs",
}


def _special_unary() -> dict:
    """erf, erfc, erf_inv, lgamma live in a family that may not be loaded; looked up lazily."""
    out = {}
    for name, fn in (("erf", "erf"), ("erfc", "erfc"), ("erf_inv", "erfinv"), ("lgamma", "lgamma")):
        prim = getattr(lax, f"{name}_p", None)
        if prim is not None:
            out[prim] = fn
    return out


def _special_helpers() -> dict:
    """The special functions with no CUDA library function -- digamma, the scaled Bessel
    functions, the incomplete gamma family, zeta, polygamma and the incomplete beta function --
    as the generator's own device functions (:mod:`plax_cupy.special_source`, included in the
    kernels that call them), called with the equation's operands in order; overloaded for
    float (half types and float32) and double. Looked up lazily: a family may not be loaded."""
    out = {}
    for prim_name, helper in (("digamma", "plax_digamma"), ("bessel_i0e", "plax_bessel_i0e"),
                              ("bessel_i1e", "plax_bessel_i1e"), ("igamma", "plax_igamma"),
                              ("igammac", "plax_igammac"), ("igamma_grad_a", "plax_igamma_grad_a"),
                              ("random_gamma_grad", "plax_random_gamma_grad"),
                              ("zeta", "plax_zeta"), ("polygamma", "plax_polygamma"),
                              ("regularized_incomplete_beta", "plax_betainc")):
        prim = getattr(lax, f"{prim_name}_p", None)
        if prim is not None:
            out[prim] = helper
    return out


#: fusible primitives (``plax.lowering.fusion``) with no device form here: declined by name, so
#: a cluster holding one splits around it and it runs as its kernel-table kernel. Empty: every
#: fusible primitive has one (kept for a primitive registered fusible before its form exists)
WITHOUT_DEVICE_FORM: frozenset = frozenset()


#: primitives whose float16/bfloat16 results are already values of the type (one of the
#: operands, or rounded by their own expression): not rounded again
_EXACT_ON_HALF = {lax.select_n_p, lax.max_p, lax.min_p, lax.clamp_p, lax.neg_p, lax.abs_p,
                  lax.convert_element_type_p, lax.bitcast_convert_type_p, lax.nextafter_p,
                  lax.floor_p, lax.ceil_p, lax.sign_p}


def elementwise_expr(eqn, a: list[str]) -> str:
    """The C++ expression computing ``eqn``'s (one) output from operand expressions ``a``.

    Each operand expression already has its operand's value type
    (:func:`plax_cupy.dtypes.value_ctype`); the result has the output's. float16 and bfloat16
    results are computed in float and rounded to the type, as the reference rounds each
    operation.

    Raises:
      Unsupported: a primitive or dtype the generator does not express.
    """
    prim = eqn.primitive
    if prim.name in WITHOUT_DEVICE_FORM:
        raise Unsupported(f"{prim.name}: no device form (runs as its kernel-table kernel)")
    din = [np.dtype(v.aval.dtype) for v in eqn.invars]
    dout = np.dtype(eqn.outvars[0].aval.dtype)
    try:
        for d in din + [dout]:
            ctype(d)
    except UnsupportedDtype as err:
        raise Unsupported(f"{prim.name}: {err}") from None
    if any(d.kind == "c" for d in din + [dout]):
        return _complex_expr(eqn, a, din, dout)
    expr = _real_expr(eqn, a, din, dout)
    if is_half(dout) and prim not in _EXACT_ON_HALF:
        expr = _round_half(expr, dout)
    return expr


def _real_expr(eqn, a: list[str], din: list, dout) -> str:
    prim = eqn.primitive
    k = _kind(din[0]) if din else _kind(dout)
    t = value_ctype(dout)
    bits = din[0].itemsize * 8 if din else 0
    if prim in _COMPARE:
        return f"({a[0]} {_COMPARE[prim]} {a[1]})"
    if prim in _ARITH:
        if k == "b":
            raise Unsupported(f"{prim.name} on bool")
        if k == "f":
            return f"({a[0]} {_ARITH[prim]} {a[1]})"
        w, u = _wide_unsigned(dout), unsigned_ctype(dout)
        return f"(({t})(({w})({u}){a[0]} {_ARITH[prim]} ({w})({u}){a[1]}))"
    if prim in _BITWISE:
        return f"(({t})({a[0]} {_BITWISE[prim]} {a[1]}))"
    if prim is lax.not_p:
        return f"(!{a[0]})" if k == "b" else f"(({t})~{a[0]})"
    if prim is lax.neg_p:
        if k == "f":
            return f"(-{a[0]})"
        w, u = _wide_unsigned(dout), unsigned_ctype(dout)
        return f"(({t})(({w})0 - ({w})({u}){a[0]}))"
    if prim is lax.abs_p and k in "iu":
        if k == "u":
            return a[0]
        w, u = _wide_unsigned(dout), unsigned_ctype(dout)
        return f"({a[0]} < 0 ? ({t})(({w})0 - ({w})({u}){a[0]}) : {a[0]})"
    if prim is lax.sign_p:
        if k == "f":
            return f"plax_sign({a[0]})"
        if k == "u":
            return f"(({t})({a[0]} != 0))"
        return f"(({t})({a[0]} > 0 ? 1 : ({a[0]} < 0 ? -1 : 0)))"
    if prim is lax.population_count_p and k in "iu":
        u = unsigned_ctype(din[0])
        fn = "__popcll" if din[0].itemsize == 8 else "__popc"
        cast = "unsigned long long" if din[0].itemsize == 8 else "unsigned int"
        return f"(({t}){fn}(({cast})({u}){a[0]}))"
    special = _special_unary()
    if k == "f" and (prim in _FLOAT_UNARY or prim in special):
        name = _FLOAT_UNARY.get(prim) or special[prim]
        return f"{_fn(name, dout)}({a[0]})"
    helper = _special_helpers().get(prim)
    if k == "f" and helper is not None:
        return f"{helper}({', '.join(a)})"
    if prim is lax.logistic_p and k == "f":
        return f"plax_logistic({a[0]})"
    if prim is lax.is_finite_p and k == "f":
        return f"((bool)isfinite({a[0]}))"
    if prim is lax.round_p and k == "f":
        # rounding_method 1: to nearest even (rint); 0: half away from zero (C's round)
        fn = "rint" if eqn.params.get("rounding_method", 0) == 1 else "round"
        return f"{_fn(fn, dout)}({a[0]})"
    if prim in (lax.max_p, lax.min_p):
        if k == "b":
            return f"({a[0]} {'||' if prim is lax.max_p else '&&'} {a[1]})"
        return f"{'plax_max' if prim is lax.max_p else 'plax_min'}({a[0]}, {a[1]})"
    if prim is lax.clamp_p:  # clamp(lo, x, hi) = min(max(x, lo), hi)
        lo, x, hi = a
        if k == "b":  # max is "or", min is "and" on booleans
            return f"(({x} || {lo}) && {hi})"
        return f"plax_min(plax_max({x}, {lo}), {hi})"
    if prim is lax.div_p:
        if k == "f":
            return f"({a[0]} / {a[1]})"
        if k == "i":
            return f"plax_sdiv<{t}, {unsigned_ctype(dout)}>({a[0]}, {a[1]})"
        if k == "u":
            return f"plax_udiv<{t}>({a[0]}, {a[1]})"
    if prim is lax.rem_p:
        if k == "f":
            return f"{_fn('fmod', dout)}({a[0]}, {a[1]})"
        if k == "i":
            return f"plax_srem<{t}>({a[0]}, {a[1]})"
        if k == "u":
            return f"plax_urem<{t}>({a[0]}, {a[1]})"
    if prim is lax.pow_p and k == "f":  # (an integer exponent converted to the base's dtype)
        y = convert_expr(a[1], din[1], dout) if din[1].kind in "iu" else a[1]
        return f"{_fn('pow', dout)}({a[0]}, {y})"
    if prim is lax.atan2_p and k == "f":
        return f"{_fn('atan2', dout)}({a[0]}, {a[1]})"
    if prim is lax.nextafter_p and k == "f":
        # bit by bit (CUDA's nextafterf may flush subnormals): NumPy's results exactly
        if is_half(dout):
            fn = "plax_nextafter_f16" if dout == np.float16 else "plax_nextafter_bf16"
            return f"{fn}({a[0]}, {a[1]})"
        return f"plax_nextafter({a[0]}, {a[1]})"
    if prim is fma_p:  # one rounding: the device's FMA; halves rounded to odd, then once
        return f"plax_fma_odd_f32({', '.join(a)})" if is_half(dout) else f"{_fn('fma', dout)}({', '.join(a)})"
    if prim is lax.bitcast_convert_type_p:
        if din[0] == dout:
            return a[0]
        if (is_half(din[0]) or is_half(dout)) and din[0].itemsize == dout.itemsize == 2:
            return _bitcast_16(a[0], din[0], dout)
        if din[0].itemsize != dout.itemsize or np.bool_ in (din[0], dout):
            raise Unsupported(f"bitcast_convert_type from {din[0]} to {dout}")
        return f"plax_bitcast<{t}>({a[0]})"
    if prim in (lax.shift_left_p, lax.shift_right_logical_p, lax.shift_right_arithmetic_p):
        return _shift(prim, a, din[0], bits)
    if prim is lax.select_n_p:
        which, cases = a[0], a[1:]
        if len(cases) == 1:
            return cases[0]
        if din[0] == np.bool_:
            return f"({which} ? {cases[1]} : {cases[0]})"
        expr = cases[-1]
        for i in range(len(cases) - 2, -1, -1):
            expr = f"({which} == {i} ? {cases[i]} : {expr})"
        return expr
    if prim is lax.convert_element_type_p:
        return convert_expr(a[0], din[0], dout)
    if (y := integer_exponent(eqn)) is not None:  # integer_pow, square
        return _integer_pow(a[0], y, dout)
    raise Unsupported(f"{prim.name} on {din[0] if din else dout}")


def _bitcast_16(x: str, src, dst) -> str:
    """A bit cast between 16-bit types where one is float16 or bfloat16 (value: float)."""
    if src == np.float16:
        bits = f"plax_f16_bits({x})"
    elif is_half(src):
        bits = f"plax_bf16_bits({x})"
    else:
        bits = f"((unsigned short){x})"
    if dst == np.float16:
        return f"plax_f16_value({bits})"
    if is_half(dst):
        return f"plax_bf16_value({bits})"
    return f"(({ctype(dst)}){bits})"


_COMPLEX_UNARY = {lax.exp_p: "plax_cexp", lax.exp2_p: "plax_cexp2", lax.expm1_p: "plax_cexpm1",
                  lax.log_p: "plax_clog", lax.log1p_p: "plax_clog1p", lax.sqrt_p: "plax_csqrt",
                  lax.rsqrt_p: "plax_crsqrt", lax.sin_p: "plax_csin", lax.cos_p: "plax_ccos",
                  lax.tan_p: "plax_ctan", lax.sinh_p: "plax_csinh", lax.cosh_p: "plax_ccosh",
                  lax.tanh_p: "plax_ctanh", lax.logistic_p: "plax_clogistic",
                  lax.sign_p: "plax_csign", lax.asin_p: "plax_casin", lax.acos_p: "plax_cacos",
                  lax.atan_p: "plax_catan", lax.asinh_p: "plax_casinh",
                  lax.acosh_p: "plax_cacosh", lax.atanh_p: "plax_catanh"}


def _complex_expr(eqn, a: list[str], din: list, dout) -> str:
    """The expression of an equation with a complex operand or result."""
    prim = eqn.primitive
    if prim is lax.complex_p:  # real parts -> one complex value
        p = _part_ctype(dout)
        return f"plax_cplx<{p}>(({p}){a[0]}, ({p}){a[1]})"
    if prim is lax.conj_p:
        p = _part_ctype(dout)
        if din[0].kind != "c":
            return f"plax_cplx<{p}>(({p}){a[0]}, ({p})0)"
        return f"plax_cplx<{p}>({a[0]}.re, -{a[0]}.im)"
    if prim is lax.real_p:
        return f"{a[0]}.re"
    if prim is lax.imag_p:
        return f"{a[0]}.im"
    if prim is lax.convert_element_type_p:
        return convert_expr(a[0], din[0], dout)
    if prim is lax.abs_p:
        return f"plax_cabs({a[0]})"
    if prim in _COMPLEX_UNARY:
        return f"{_COMPLEX_UNARY[prim]}({a[0]})"
    if prim in _ARITH:
        return f"({a[0]} {_ARITH[prim]} {a[1]})"
    if prim is lax.div_p:
        return f"({a[0]} / {a[1]})"
    if prim is lax.neg_p:
        return f"(-{a[0]})"
    if prim in (lax.eq_p, lax.ne_p):
        return f"({a[0]} {_COMPARE[prim]} {a[1]})"
    if prim in (lax.max_p, lax.min_p):
        return f"{'plax_max' if prim is lax.max_p else 'plax_min'}({a[0]}, {a[1]})"
    if prim is lax.pow_p:  # (an integer exponent converted to the base's dtype)
        y = convert_expr(a[1], din[1], dout) if din[1].kind in "iu" else a[1]
        return f"plax_cpow({a[0]}, {y})"
    if (y := integer_exponent(eqn)) is not None:  # integer_pow, square
        return _integer_pow(a[0], y, dout)
    if prim is lax.select_n_p:
        return _real_expr(eqn, a, din, dout)
    if prim is lax.bitcast_convert_type_p and din[0] == dout:  # (complex casts only to itself)
        return a[0]
    raise Unsupported(f"{prim.name} on {din[0] if din else dout}")


def _shift(prim, a, dtype, bits: int) -> str:
    x, y = a
    t, u = ctype(dtype), unsigned_ctype(dtype)
    w = _wide_unsigned(dtype)
    in_range = f"({y} >= 0 && {y} < {bits})" if dtype.kind == "i" else f"({y} < {bits}u)"
    if prim is lax.shift_left_p:
        return f"({in_range} ? ({t})(({w})({u}){x} << ({w}){y}) : ({t})0)"
    if prim is lax.shift_right_logical_p:
        return f"({in_range} ? ({t})(({w})({u}){x} >> ({w}){y}) : ({t})0)"
    # arithmetic: shifting by the width or more gives the sign (shift of the signed view)
    s = signed_ctype(dtype)
    return f"(({t})(({s}){x} >> ({in_range} ? (int){y} : {bits - 1})))"


def convert_expr(x: str, src, dst) -> str:
    """The C++ expression converting ``x`` (a value of ``src``) to ``dst`` with XLA's rules.

    Complex to real keeps the real part; float16 rounds from the value in double (as NumPy),
    bfloat16 from float (as ml_dtypes), both to nearest even.
    """
    src, dst = np.dtype(src), np.dtype(dst)
    t = value_ctype(dst)
    if dst == src:
        return x
    if src.kind == "c":
        if dst.kind == "c":
            return f"plax_ccast<{_part_ctype(dst)}>({x})"
        if dst == np.bool_:
            return f"({x}.re != 0 || {x}.im != 0)"
        x, src = f"{x}.re", np.dtype(np.float32 if src == np.complex64 else np.float64)
        if dst == src:
            return x
    if dst.kind == "c":
        p = _part_ctype(dst)
        return f"plax_cplx<{p}>(({p}){x}, ({p})0)"
    if dst == np.bool_:
        return f"({x} != 0)"
    if dst == np.float16:  # float32 and narrower values round from float, the rest from double
        wide = src.itemsize > 4 or src.kind in "iu" and src.itemsize > 2
        return f"plax_round_f16(({'double' if wide else 'float'}){x})"
    if is_half(dst):
        return f"plax_round_bf16((float){x})"
    if dst.kind in "iu" and _kind(src) == "f":
        info = np.iinfo(dst)
        upper, lower = float(info.max) + 1.0, float(info.min)
        return (f"plax_f2i<{t}>((double){x}, {_hex_float(lower)}, {_hex_float(upper)}, "
                f"{c_literal(info.min, dst)}, {c_literal(info.max, dst)})")
    if dst.kind in "iu" and src.kind in "iu":  # wrap: through the destination's unsigned type
        return f"(({t})({unsigned_ctype(dst)}){x})"
    return f"(({t}){x})"


def _integer_pow(x: str, y: int, dtype) -> str:
    t = value_ctype(dtype)
    if dtype.kind == "c":
        one = c_literal(1, dtype)
        if y == 0:
            return one
    elif y == 0:
        return f"(({t})1)"
    if y < 0 and _kind(dtype) not in "fc":
        raise Unsupported("integer_pow with a negative exponent on integers")

    def mul(p: str, q: str) -> str:
        if dtype == np.float16:  # NumPy multiplies float16 values, rounding each product
            return f"plax_round_f16({p} * {q})"
        if _kind(dtype) in "fc":  # (bfloat16: in float32, rounded once at the end, as the reference)
            return f"({p} * {q})"
        w, u = _wide_unsigned(dtype), unsigned_ctype(dtype)
        return f"(({t})(({w})({u}){p} * ({w})({u}){q}))"

    # square-and-multiply, each product rounded to the dtype, as the reference does
    n, acc, base = abs(y), None, x
    while n:
        if n & 1:
            acc = base if acc is None else mul(acc, base)
        n >>= 1
        if n:
            base = mul(base, base)
    if y < 0:
        acc = f"({one} / {acc})" if dtype.kind == "c" else f"(({t})1 / {acc})"
    return acc


# ---------------------------------------------------------------- reductions

class Reduction:
    """How one reduction of a cluster accumulates.

    Attributes:
      kind: ``"sum"``, ``"prod"``, ``"max"``, ``"min"``, ``"and"``, ``"or"`` or ``"xor"``.
      dtype: the operand's (and output's) dtype.
      acc: the accumulator dtype (:func:`plax_cupy.dtypes.accumulator`).
      init: the identity, as C++ source of the accumulator's type.
    """

    def __init__(self, kind: str, dtype):
        self.kind, self.dtype = kind, np.dtype(dtype)
        self.acc = accumulator(self.dtype, kind)
        self.init = self._identity()

    def _identity(self) -> str:
        kind, d, acc = self.kind, self.dtype, self.acc
        if kind == "sum" or kind in ("or", "xor"):
            return c_literal(0, acc)
        if kind == "prod":
            return c_literal(1, acc)
        if kind == "and":
            return c_literal(True if d == np.bool_ else -1 if d.kind == "i" else np.iinfo(d).max, d)
        if d == np.bool_:
            return "false" if kind == "max" else "true"
        if is_floating(d):
            return c_literal(-np.inf if kind == "max" else np.inf, acc)
        if d.kind == "c":  # where XLA's fold starts, an empty one's value (complex_extremes)
            return c_literal(complex(-np.inf if kind == "max" else np.inf, 0.0), d)
        info = np.iinfo(d)
        return c_literal(info.min if kind == "max" else info.max, d)

    @property
    def folds_in_order(self) -> bool:
        """Whether only a left fold in element order gives this reduction's result: complex
        max/min, whose rule (a tie gives the later operand, a NaN never wins) is not
        associative -- ``max(max(1, nan), 0)`` is 0, ``max(1, max(nan, 0))`` is 1 -- so a
        thread per output folding in order computes it (:func:`plan_cluster` declines it)."""
        return self.dtype.kind == "c" and self.kind in ("max", "min")

    def combine(self, s: str, v: str) -> str:
        """C++ source combining accumulator ``s`` with value ``v`` (both the accumulator type)."""
        kind, acc = self.kind, ctype(self.acc)
        if kind == "sum":
            return f"({s} + {v})"
        if kind == "prod":
            return f"({s} * {v})"
        if kind in ("max", "min"):
            if self.dtype == np.bool_:
                return f"({s} {'||' if kind == 'max' else '&&'} {v})"
            return f"plax_{kind}({s}, {v})"   # (complex: only folded in order, folds_in_order)
        op = {"and": "&", "or": "|", "xor": "^"}[kind]
        return f"(({acc})({s} {op} {v}))"

    #: how a partial of the reduction is stored between blocks: ``partial_items`` elements of
    #: ``partial_dtype`` each (the launcher allocates ``n_out * blocks * partial_items``)
    partial_items = 1

    @property
    def partial_dtype(self) -> np.dtype:
        return self.acc

    @property
    def acc_ctype(self) -> str:
        """The accumulator's C type."""
        return ctype(self.acc)

    def accumulate(self, s: str, v: str) -> str:
        """C++ source folding the value ``v`` into accumulator ``s`` where ``v`` comes after
        everything ``s`` holds (a thread's elements, in rising order): :meth:`combine`."""
        return self.combine(s, v)

    def operand(self, value: str, index: str | None = None) -> str:
        """A reduction operand's value as the accumulator type (``index``: unused)."""
        return _to_acc(value, self)

    def store(self, expr: str, dtype) -> str:
        """An accumulator ``expr`` as the result ``dtype`` is stored."""
        return store_expr(expr, dtype, self.acc)


_REDUCTIONS = {lax.reduce_sum_p: "sum", lax.reduce_prod_p: "prod", lax.reduce_max_p: "max",
               lax.reduce_min_p: "min", lax.reduce_and_p: "and", lax.reduce_or_p: "or",
               lax.reduce_xor_p: "xor"}


def reduction_of(eqn) -> Reduction:
    """The :class:`Reduction` of a reduction equation.

    Raises:
      Unsupported: an unknown reduction, a dtype outside the map, or a sum/product of bools.
    """
    kind = _REDUCTIONS.get(eqn.primitive)
    dtype = np.dtype(eqn.invars[0].aval.dtype)
    if kind is None:
        raise Unsupported(f"reduction {eqn.primitive.name}")
    try:
        ctype(dtype)
    except UnsupportedDtype as err:
        raise Unsupported(f"{eqn.primitive.name}: {err}") from None
    if dtype == np.bool_ and kind in ("sum", "prod"):
        raise Unsupported(f"{eqn.primitive.name} on bool")
    return Reduction(kind, dtype)


class ArgReduction:
    """How one ``argmax``/``argmin`` of a cluster accumulates: a (value, index) pair
    (``plax_arg<T, I>``, :data:`ARG_SOURCE`), the value in its compute type (float16 and
    bfloat16 as float) and the index along the reduced axis (``int``, or ``long long`` for an
    axis of 2**31 elements or more); index -1 is the empty accumulator. The better of two pairs
    is the first NaN, else the larger (argmax) or smaller value, else the earlier index, as
    NumPy and XLA pick (``-0.0`` and ``+0.0`` tie), so combining pairs in any order gives the
    same index: the block tree and the combine of a split's partials keep
    :class:`Reduction`'s plan unchanged.

    Attributes:
      kind: ``"argmax"`` or ``"argmin"``.
      dtype: the operand's dtype.
      index_dtype: the result's dtype.
      init: the empty accumulator, as C++ source.
    """

    def __init__(self, kind: str, dtype, index_dtype, extent: int):
        self.kind, self.dtype, self.index_dtype = kind, np.dtype(dtype), np.dtype(index_dtype)
        value_t = value_ctype(self.dtype)
        self._index_t = "int" if extent < 2 ** 31 else "long long"
        # (a name without a comma: kernel signatures are split at commas by their readers)
        self.acc_ctype = re.sub(r"\W+", "_", f"plax_arg_{value_t}_{self._index_t}")
        #: the ``typedef`` naming :attr:`acc_ctype` (in the kernel's helpers)
        self.typedef = f"typedef plax_arg<{value_t}, {self._index_t}> {self.acc_ctype};"
        self.init = f"{self.acc_ctype}{{({value_t})0, -1}}"
        self._max = "true" if kind == "argmax" else "false"
        # (C's struct layout: each member aligned to its size, the struct to the larger)
        value_size = 4 if is_half(self.dtype) else self.dtype.itemsize
        self.partial_items = 2 * max(value_size, 4 if self._index_t == "int" else 8) // 8
        self.partial_dtype = np.dtype(np.uint64)

    def combine(self, s: str, v: str) -> str:
        return f"plax_arg_best<{self._max}>({s}, {v})"

    def accumulate(self, s: str, v: str) -> str:
        return f"plax_arg_next<{self._max}>({s}, {v})"

    def operand(self, value: str, index: str | None = None) -> str:
        return f"{self.acc_ctype}{{{value}, ({self._index_t}){index}}}"

    def store(self, expr: str, dtype) -> str:
        return f"(({ctype(dtype)})({expr}).i)"


#: the pair ``argmax``/``argmin`` accumulate (:class:`ArgReduction`), in the kernels fusing one
ARG_SOURCE = r"""#ifndef PLAX_ARG_ACCUMULATOR
#define PLAX_ARG_ACCUMULATOR
// ---- argmax/argmin accumulators: (value, index); index < 0: nothing yet
template <typename T, typename I> struct plax_arg { T v; I i; };
template <typename T> __device__ __forceinline__ bool plax_arg_nan(T) { return false; }
__device__ __forceinline__ bool plax_arg_nan(float x) { return x != x; }
__device__ __forceinline__ bool plax_arg_nan(double x) { return x != x; }
// the better of two pairs: the first NaN, else the larger (MAX) or smaller value, else the
// earlier index (the same pair whatever the order they are combined in)
template <bool MAX, typename T, typename I>
__device__ __forceinline__ plax_arg<T, I> plax_arg_best(plax_arg<T, I> a, plax_arg<T, I> b) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  const bool a_nan = plax_arg_nan(a.v), b_nan = plax_arg_nan(b.v);
  const bool b_better = b_nan ? (!a_nan || b.i < a.i)
      : (!a_nan && ((MAX ? b.v > a.v : b.v < a.v) || (b.v == a.v && b.i < a.i)));
  return b_better ? b : a;
}
// a followed by b, a later element (a thread's elements in rising order): b only if it is
// better, a tie or a later NaN keeping a
template <bool MAX, typename T, typename I>
__device__ __forceinline__ plax_arg<T, I> plax_arg_next(plax_arg<T, I> a, plax_arg<T, I> b) {
  return (a.i < 0 || (!plax_arg_nan(a.v) && (plax_arg_nan(b.v) || (MAX ? b.v > a.v : b.v < a.v))))
      ? b : a;
}
#endif
"""


def arg_helpers(typedefs) -> str:
    """The source a kernel accumulating ``argmax``/``argmin`` pairs places after the preamble:
    :data:`ARG_SOURCE` and the pair types it names (:attr:`ArgReduction.typedef`), each once,
    in a fixed order; ``""`` for none.

    Args:
      typedefs: the kernel's pair typedefs (a set or any iterable of strings).

    Example:
      >>> arg_helpers(set())
      ''
      >>> "PLAX_ARG_ACCUMULATOR" in arg_helpers({"typedef plax_arg<float, int> plax_arg_f_i;"})
      True
    """
    typedefs = sorted(set(typedefs))
    return ARG_SOURCE + "".join(t + "\n" for t in typedefs) if typedefs else ""


def arg_reduction_of(eqn) -> ArgReduction:
    """The :class:`ArgReduction` of an ``argmax``/``argmin`` equation.

    Raises:
      Unsupported: a dtype outside the map (complex: the primitives refuse it anyway).
    """
    dtype = np.dtype(eqn.invars[0].aval.dtype)
    if dtype.kind == "c":
        raise Unsupported(f"{eqn.primitive.name} of {dtype}")
    (axis,) = eqn.params["axes"]
    return ArgReduction(eqn.primitive.name, dtype, eqn.params["index_dtype"],
                        int(eqn.invars[0].aval.shape[axis]))


# ---------------------------------------------------------------- the cluster kernel

class KernelInput:
    """How one cluster input reaches the kernel.

    Attributes:
      atom: the jaxpr Var or Literal.
      name: its parameter name (``a0``...).
      kind: ``"array"`` (a device pointer; rank-0 values read element 0), ``"literal"`` (a
        rank-0 literal passed by value from the host, so no device read is needed and kernels
        differing in constants share one compilation; booleans, integers, float32 and float64
        only: float16, bfloat16 and complex literals are read from device memory, so the
        launcher never converts them to a kernel scalar) or ``"value"`` (a value of its
        value type in a register of the caller: a reduction's final value handed to its
        epilogue, :func:`_epilogue_plan`).
      dtype: its dtype.
      value: a literal's host value (None for arrays).
    """

    def __init__(self, atom, name: str, kind: str, dtype, value=None):
        self.atom, self.name, self.kind, self.dtype, self.value = atom, name, kind, dtype, value

    def param(self) -> str:
        if self.kind == "value":
            return f"const {value_ctype(self.dtype)} {self.name}"
        t = ctype(self.dtype)  # as stored: float16/bfloat16 bits, complex pairs
        return f"const {t}* __restrict__ {self.name}" if self.kind == "array" else f"{t} {self.name}"


class ClusterKernel:
    """A generated cluster kernel: its source and how to launch it.

    Attributes:
      source: the complete CUDA C++ translation unit (:data:`PREAMBLE` included).
      inputs: a :class:`KernelInput` per cluster input, in the cluster's order.
      out_dtypes, out_shapes: per cluster output.
      elem_outputs: indices of the outputs ``plax_elem`` stores (iteration-shaped).
      reductions: ``(output index, Reduction)`` per reduction computed (the index None for
        one only the epilogue reads).
      final_outputs: the output indices stored at each reduction output's index ``o`` (the
        reductions' read after the cluster, then the epilogue's), in the kernel's parameter
        order after the partials (``r<j>``).
      n: elements of the iteration shape; ``n_out``/``n_red``: a reduction's output and
        reduced element counts (all reductions of a cluster reduce the same axes).
      outputs_per_block: the outputs a block of ``plax_reduce`` reduces together
        (:func:`reduction_layout`; pass it to :func:`reduction_launch`).
      per_thread: elements a thread of ``plax_elementwise`` takes per step of its loop (the
        vector path's, :func:`_vector_kernel`; pass it to :func:`elementwise_launch`).
      entry: the kernel names (``("plax_elementwise",)`` or
        ``("plax_reduce",)``).
      primitives: the fused primitives' names, for messages.
      elem_source: the ``plax_elem`` function (what :func:`plan_group` puts in a multi-tensor
        kernel, with the helpers it calls).
      vector: the elementwise body's :class:`VectorPlan` (None: no vector path).
    """

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return f"ClusterKernel({' '.join(self.primitives)}; n={self.n}, {self.entry})"


def _strides(shape) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _index_lines(var: str, total: str, extents, out_names) -> list[str]:
    """C++ lines decomposing the flat C-order index ``total`` over ``extents`` into the
    ``long long`` variables ``out_names``."""
    if not extents:
        return []
    lines = [f"long long {var} = {total};"]
    for ext, name in reversed(list(zip(extents, out_names))):
        lines.append(f"const long long {name} = {var} % {ext}LL; {var} /= {ext}LL;")
    return lines


def kernel_inputs(cluster, literal_values: bool = True, values: frozenset = frozenset()
                  ) -> list[KernelInput]:
    """A :class:`KernelInput` per input of ``cluster`` (parameters ``a0``, ``a1``...): ``"value"``
    for the inputs in ``values`` (ids), ``"literal"`` for rank-0 literals where
    ``literal_values`` (not float16, bfloat16 or complex ones), else ``"array"``."""
    inputs: list[KernelInput] = []
    for j, atom in enumerate(cluster.inputs):
        dtype = np.dtype(atom.aval.dtype)
        if id(atom) in values:
            inputs.append(KernelInput(atom, f"a{j}", "value", dtype))
        elif isinstance(atom, Literal) and not atom.aval.shape and literal_values and \
                not is_half(dtype) and dtype.kind != "c":
            inputs.append(KernelInput(atom, f"a{j}", "literal", dtype, np.asarray(atom.val, dtype)[()]))
        else:
            inputs.append(KernelInput(atom, f"a{j}", "array", dtype))
    return inputs


def plan_cluster(cluster, *, literal_values: bool = True, values: frozenset = frozenset()
                 ) -> ClusterKernel:
    """The CUDA kernel of ``cluster``.

    A cluster with an epilogue (:attr:`plax.lowering.Cluster.epilogue`: elementwise equations
    over its reductions' results) computes it in ``plax_epilogue(o, ...)``, called where
    output ``o``'s values are final (the block storing them, or the last block of a split
    reduction, after combining the partials), with each reduction's value as it is stored
    (float16 rounded first, as the reference's separate equation reads it).

    Args:
      cluster: a :class:`plax.lowering.Cluster` (or an object with its attributes).
      literal_values: pass rank-0 literals by value (True, as compiled programs do); False
        reads them from device memory like other operands.
      values: ids of inputs ``plax_elem`` takes as values in registers (``"value"`` inputs:
        the reductions' results, for an epilogue's own plan).

    Raises:
      Unsupported: a primitive, dtype or pattern the generator does not express.
    """
    shape = tuple(int(d) for d in cluster.shape)
    rank = len(shape)
    n = math.prod(shape)
    strides = _strides(shape)
    for eqn in cluster.eqns:
        for v in list(eqn.invars) + list(eqn.outvars):
            try:
                ctype(v.aval.dtype)
            except UnsupportedDtype as err:
                raise Unsupported(f"{eqn.primitive.name}: {err}") from None
        if eqn.primitive in (lax.broadcast_in_dim_p, lax.iota_p) and \
                eqn.params.get("sharding") is not None:
            raise Unsupported(f"{eqn.primitive.name} with a sharding")
        if len(eqn.outvars) != 1 and eqn.primitive is not lax.threefry2x32_p:
            raise Unsupported(f"{eqn.primitive.name}: several results")

    inputs = kernel_inputs(cluster, literal_values, values)
    by_atom = {id(inp.atom): inp for inp in inputs}

    # reductions: all must reduce the same axes (one (output, reduced) decomposition)
    red_axes = None
    for eqn in cluster.eqns:
        if _reduces(eqn.primitive):
            axes = tuple(sorted(int(a) for a in eqn.params["axes"]))
            if red_axes is not None and axes != red_axes:
                raise Unsupported("reductions over different axes in one cluster")
            red_axes = axes
            if fusion_kind(eqn.primitive) == REDUCTION and reduction_of(eqn).folds_in_order:
                # (the block tree combines threads' strided elements: not a fold in order)
                raise Unsupported(f"{eqn.primitive.name} of complex values folds in order "
                                  "(the kernel table's kernel)")
            if fusion_kind(eqn.primitive, arg_reductions=True) == ARG_REDUCTION and \
                    not reads_coalesced(shape, axes):
                raise UnfusedArgReduction(f"{eqn.primitive.name} along axis {axes[0]} of {shape} "
                                          "would read its operand uncoalesced")
    outputs = {id(v): j for j, v in enumerate(cluster.outputs)}
    out_dtypes = [np.dtype(v.aval.dtype) for v in cluster.outputs]
    out_shapes = [tuple(v.aval.shape) for v in cluster.outputs]

    body: list[str] = []
    load_lines: set = set()   # indices in body of operand loads (never moved into a branch)
    marks: list[int] = []     # where each equation's lines start in body
    selects: dict = {}        # k -> (local, operand expressions, dtype) of a select_n
    numbers: set = set()      # ids of scalar values known not to be NaN (_is_number)
    loaded: dict = {}   # id(atom) -> local holding its element i
    locals_: dict = {}  # id(var) -> expression

    def load(atom) -> str:
        key = id(atom)
        if key in locals_:
            return locals_[key]
        if key in loaded:
            return loaded[key]
        inp = by_atom.get(key)
        if inp is None:
            raise Unsupported(f"operand {atom} is not readable in the loop")
        if inp.kind in ("literal", "value"):
            return inp.name
        if not atom.aval.shape:
            expr = f"{inp.name}[0]"
        elif tuple(atom.aval.shape) == shape:
            expr = f"{inp.name}[i]"
        elif inp.kind == "array" and len(atom.aval.shape) == rank and all(
                a in (1, b) for a, b in zip(atom.aval.shape, shape)):
            # an elementwise operand of size 1 along some axes (JAX's broadcasting rule,
            # ``add a:f32[3,2] b:f32[1,2]``): read through its index map, as a broadcast is
            offset = _broadcast_offset(atom.aval.shape, range(rank), shape, need_index)
            expr = f"{inp.name}[{offset}]"
        else:
            raise Unsupported(f"operand {atom} of shape {atom.aval.shape} is not readable in the loop")
        local = f"{inp.name}_v"
        load_lines.add(len(body))
        body.append(f"const {value_ctype(inp.dtype)} {local} = {load_expr(expr, inp.dtype)};")
        loaded[key] = local
        return local

    # equations whose values nothing reads (dead code left in the jaxpr) are not generated: an
    # unused local would be an NVRTC warning, and their work wasted
    live = {id(v) for v in cluster.outputs}
    for eqn in reversed(cluster.eqns):
        if any(id(v) in live for v in eqn.outvars):
            live.update(id(v) for v in eqn.invars)

    elem_outputs: list[int] = []
    reductions: list[tuple[int, Reduction | ArgReduction]] = []
    red_operands: list[str] = []
    need_index: set = set()   # iteration dimensions a broadcast operand's index map reads
    # a cluster holding structural equations (slice, concatenate, ...: the fusion pass's
    # ``structural`` option): those and what feeds them are computed where they are read
    # (codegen_structural); the loop computes at ``i`` only what is needed there
    reads, at_i = None, set()
    epilogue = list(getattr(cluster, "epilogue", None) or ())   # (computed per output, apart)
    in_epilogue = {id(e) for e in epilogue}
    epilogue_reads = {id(v) for e in epilogue for v in e.invars}
    produced = {id(v) for e in cluster.eqns for v in e.outvars}
    structural = {id(e) for e in cluster.eqns if id(e) not in in_epilogue
                  and codegen_structural.is_structural(e, produced, shape)}
    if structural:
        reads = codegen_structural.StructuralReads(shape, cluster.eqns, by_atom, locals_, load)
        at_i = {id(v) for v in cluster.outputs} | epilogue_reads   # (an epilogue's results)
        for eqn in reversed(cluster.eqns):
            if id(eqn) in in_epilogue:
                continue   # (computed per output, apart: its operands are in epilogue_reads)
            if any(id(v) in at_i for v in eqn.outvars) and id(eqn) not in structural:
                at_i.update(id(v) for v in eqn.invars
                            if tuple(v.aval.shape) in (shape, ()) or fusion_kind(eqn.primitive) == BROADCAST)

    def computed(out, local: str, dout) -> None:
        """``out``'s value at ``i`` is ``local``: stored where it is a cluster output."""
        locals_[id(out)] = local
        j = outputs.get(id(out))
        if j is not None:
            elem_outputs.append(j)
            body.append(f"o{j}[i] = {store_expr(local, dout)};")

    red_vars: list = []   # per reduction, its result Var
    for k, eqn in enumerate(cluster.eqns):
        marks.append(len(body))
        out = eqn.outvars[0]
        prim = eqn.primitive
        dout = np.dtype(out.aval.dtype)
        if not any(id(v) in live for v in eqn.outvars) or id(eqn) in in_epilogue:
            continue
        if reads is not None and not any(id(v) in at_i for v in eqn.outvars):
            continue   # (computed where a structural read needs it)
        if id(eqn) in structural:
            lines: list = []
            local = reads.value(out, "i", lines, {})
            body.extend(lines)
            computed(out, local, dout)
            continue
        if prim is lax.threefry2x32_p:  # both hashed words in one pass (multiple results)
            args = [load(v) for v in eqn.invars]
            body.append(f"unsigned int t{k}_0, t{k}_1;")
            body.append(f"plax_threefry_elem({', '.join(args)}, &t{k}_0, &t{k}_1);")
            for r, v in enumerate(eqn.outvars):
                locals_[id(v)] = f"t{k}_{r}"
                j = outputs.get(id(v))
                if j is not None:
                    elem_outputs.append(j)
                    body.append(f"o{j}[i] = t{k}_{r};")
            continue
        if fusion_kind(prim, index=True) == INDEX:
            # iota: its element's index along `dimension`, from the loop's flat index
            dim = int(eqn.params["dimension"])
            if rank > 1:
                need_index.add(dim)
            position = f"idx{dim}" if rank > 1 else "i"
            if dout.kind == "c":
                part = _part_ctype(dout)
                expr = f"plax_cplx<{part}>(({part}){position}, ({part})0)"
            else:
                expr = f"(({value_ctype(dout)}){position})"
            local = f"t{k}"
            body.append(f"const {value_ctype(dout)} {local} = {expr};")
            computed(out, local, dout)
            continue
        if _reduces(prim):
            j = outputs.get(id(out))
            if j is None and id(out) not in epilogue_reads:
                continue  # read by nobody after the cluster: nothing to compute
            index = None
            if fusion_kind(prim) == REDUCTION:
                red = reduction_of(eqn)
            else:   # argmax/argmin: the value and its index along the reduced axis
                red = arg_reduction_of(eqn)
                (axis,) = red_axes
                if rank > 1:
                    need_index.add(axis)
                index = f"idx{axis}" if rank > 1 else "i"
            value = load(eqn.invars[0])
            r = len(reductions)
            reductions.append((j, red))
            red_vars.append(out)
            red_operands.append(f"{red.acc_ctype}* __restrict__ rv{r}")
            body.append(f"*rv{r} = {red.operand(value, index)};")
            continue
        if fusion_kind(prim) == BROADCAST:
            op = eqn.invars[0]
            if not op.aval.shape or tuple(op.aval.shape) == shape:
                expr = load(op)
            else:
                inp = by_atom.get(id(op))
                if inp is None or inp.kind != "array":
                    raise Unsupported("a broadcast operand that is not an input array")
                bdims = [int(d) for d in eqn.params["broadcast_dimensions"]]
                offset = _broadcast_offset(op.aval.shape, bdims, shape, need_index)
                expr = load_expr(f"{inp.name}[{offset}]", dout)
            local = f"t{k}"
            body.append(f"const {value_ctype(dout)} {local} = {expr};")
        else:
            args = [load(v) for v in eqn.invars]
            local = f"t{k}"
            expr = _max_min_of_a_number(eqn, args, [_is_number(v, by_atom, numbers) for v in eqn.invars]) \
                or elementwise_expr(eqn, args)
            body.append(f"const {value_ctype(dout)} {local} = {expr};")
            if prim is lax.convert_element_type_p and dout.kind == "f" and \
                    _is_number(eqn.invars[0], by_atom, numbers):
                numbers.add(id(out))   # (a float's conversion to a float: NaN only from NaN)
            if prim is lax.select_n_p and len(args) > 2 and dout.kind != "c":
                selects[k] = (local, args, dout)
        computed(out, local, dout)

    marks.append(len(body))
    if reads is not None:   # (indices and values a structural read computed for nothing)
        body = reads.pruned(body, marks, load_lines)
    body = _branch_selects(cluster.eqns, live, outputs, body, marks, load_lines, selects)
    # loads nothing reads (an operand integer_pow with y=0 ignores) would be NVRTC warnings
    for key, local in loaded.items():
        uses = sum(len(re.findall(rf"\b{local}\b", line)) for line in body)
        if uses == 1:
            body = [line for line in body if not line.startswith(f"const {value_ctype(by_atom[key].dtype)} {local} =")]
    # plax_elem(i, inputs..., elementwise outputs..., reduction operand slots...)
    params = [inp.param() for inp in inputs]
    params += [f"{ctype(out_dtypes[j])}* __restrict__ o{j}" for j in elem_outputs]
    params += red_operands
    head = [f"const long long idx{d} = (i / {strides[d]}LL) % {shape[d]}LL;" for d in sorted(need_index)]
    elem = [f"__device__ __forceinline__ void plax_elem(long long i{''.join(', ' + p for p in params)}) {{"]
    elem += ["  " + s for s in head + body]
    elem.append("}")
    in_args = [inp.name for inp in inputs]
    elem_out_args = [f"o{j}" for j in elem_outputs]

    # the helpers CUDA's library lacks, only in the kernels that call them
    elem_source = "\n".join(elem)
    epi = _epilogue_plan(cluster, epilogue, red_vars, literal_values) if epilogue else None
    special = special_source.helpers_for(elem_source + ("" if epi is None else epi.elem_source))
    helpers = special
    helpers += arg_helpers({red.typedef for _, red in reductions if isinstance(red, ArgReduction)})
    if "plax_threefry_elem(" in elem_source:
        helpers += _threefry_elem_source() + "\n"
    # (no primitive names or shape in the text: clusters whose code is the same, such as an
    # ``add`` over (3, 4) and over (0, 3), or ``add`` and ``add_any``, are one source, so one
    # NVRTC compile and one cached binary; ``describe`` names them)
    src: list[str] = [PREAMBLE + helpers, "// cluster", *elem, ""]
    # the outputs stored at an output's index o: the reductions' read after the cluster, then
    # the epilogue's (each cluster output index once)
    final_outputs = [j for j, _ in reductions if j is not None]
    epi_args: list = []
    if epi is not None:
        src += [re.sub(r"\bplax_elem\(", "plax_epilogue(", epi.elem_source), ""]
        final_outputs += [outputs[id(epi.outputs[m])] for m in epi.elem_outputs]
        where = {id(v): r for r, v in enumerate(red_vars)}
        epi_args = [f"e{where[id(inp.atom)]}" if inp.kind == "value" else by_atom[id(inp.atom)].name
                    for inp in epi.inputs]
        epi_args += [f"r{outputs[id(epi.outputs[m])]}" for m in epi.elem_outputs]
        if not final_outputs:   # (the launcher's stand-in scratch is a stored result)
            raise Unsupported("an epilogue whose results nothing reads")

    def finals(value, indent: str) -> list:
        """The lines storing output o's final values, ``value(r)`` the accumulator of
        reduction r: the reductions read after the cluster, then the epilogue's."""
        lines = []
        for r, (j, red_) in enumerate(reductions):
            if j is not None:
                lines.append(f"r{j}[o] = {red_.store(value(r), out_dtypes[j])};")
        if epi is not None:
            for r, (_, red_) in enumerate(reductions):
                if f"e{r}" not in epi_args:
                    continue   # (a result the epilogue does not read: no unused local)
                d = np.dtype(red_vars[r].aval.dtype)
                lines.append(f"const {value_ctype(d)} e{r} = "
                             f"{load_expr(red_.store(value(r), d), d)};")
            lines.append(f"plax_epilogue({', '.join(['o'] + epi_args)});")
        return [indent + t for t in lines]
    kernel_params = [inp.param() for inp in inputs]
    kernel_params += [f"{ctype(out_dtypes[j])}* __restrict__ o{j}" for j in elem_outputs]
    per_thread, vector = 1, None
    if not reductions:
        call = ", ".join(["i"] + in_args + elem_out_args)
        vector = _vector_plan(inputs, elem_outputs, out_dtypes, shape, need_index, params,
                              body, uses_helpers=bool(special))
        vector_elem, vector_path, per_thread = _vector_kernel(vector, n, in_args + elem_out_args)
        src += ["#ifndef PLAX_HOST", *vector_elem,
                f"extern \"C\" __global__ void plax_elementwise({', '.join(kernel_params + ['long long n'])}) {{",
                *vector_path,
                "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;",
                "       i += (long long)blockDim.x * gridDim.x) {",
                f"    plax_elem({call});",
                "  }",
                "}",
                "#else",
                f"extern \"C\" void plax_host({', '.join(kernel_params + ['long long n'])}) {{",
                f"  for (long long i = 0; i < n; ++i) plax_elem({call});",
                "}",
                "#endif", ""]
        entry = ("plax_elementwise",)
        n_out = n_red = 0
        opb = 1
    else:
        kept = [d for d in range(rank) if d not in red_axes]
        red = list(red_axes)
        n_out = math.prod(shape[d] for d in kept)
        n_red = math.prod(shape[d] for d in red)
        full = [f"k{d}" for d in kept], [f"k{d}" for d in red]
        flat_terms = " + ".join(f"k{d} * {strides[d]}LL" for d in range(rank)) or "0LL"
        decompose = (_index_lines("ro", "o", [shape[d] for d in kept], full[0])
                     + _index_lines("rr", "r", [shape[d] for d in red], full[1])
                     + [f"const long long i = {flat_terms};"])
        nr = len(reductions)
        slots = [f"&v{r}" for r in range(nr)]
        call = ", ".join(["i"] + in_args + elem_out_args + slots)
        partial_params = kernel_params + [f"{red_.acc_ctype}* __restrict__ p{r}"
                                          for r, (_, red_) in enumerate(reductions)]
        partial_params += [f"{ctype(out_dtypes[j])}* __restrict__ r{j}" for j in final_outputs]
        partial_params += ["long long n_out", "long long n_red", "int bpo",
                           "unsigned long long* __restrict__ done", "unsigned int tag"]
        # one launch whatever bpo is: with one block per group the block's value is final
        opb, outputs_fastest = reduction_layout(shape, red_axes)
        tpo = BLOCK // opb
        # a block reduces `opb` outputs (a group), `tpo` threads each: slot v of the block (a
        # thread; with fewer threads, as on the simulated GPU, each takes several) is output
        # lane `oi` and reduced lane `ri`, consecutive slots on consecutive outputs where the
        # kept axes are the trailing ones (a warp reads a row of outputs: coalesced), else on
        # consecutive reduced elements. With bpo blocks per group, each stores its partials,
        # fences and counts itself done on the group's counter, and the last of them combines
        # the partials in chunk order (a fixed tree: the result does not depend on which block
        # finished last)
        lanes = (["      const int oi = v % OPB, ri = v / OPB;"] if outputs_fastest else
                 ["      const int oi = v / TPO, ri = v % TPO;"])
        step = "OPB" if outputs_fastest else "1"   # between a slot and its next reduced lane's
        reduced_lane = "v / OPB" if outputs_fastest else "v % TPO"
        src += ["#ifndef PLAX_HOST",
                f"extern \"C\" __global__ void plax_reduce({', '.join(partial_params)}) {{",
                f"  constexpr int OPB = {opb}, TPO = {tpo};  // outputs a block, threads an output"]
        for r, (_, red_) in enumerate(reductions):
            src.append(f"  __shared__ {red_.acc_ctype} s{r}[{BLOCK}];")

        def tree(indent: str) -> list:
            lines = ["__syncthreads();",
                     "for (int s = TPO / 2; s > 0; s >>= 1) {",
                     "  for (int v = threadIdx.x; v < OPB * TPO; v += blockDim.x) {",
                     f"    const int ri = {reduced_lane};",
                     "    if (ri < s) {"]
            lines += [f"      s{r}[v] = {red_.combine(f's{r}[v]', f's{r}[v + s * {step}]')};"
                      for r, (_, red_) in enumerate(reductions)]
            lines += ["    }", "  }", "  __syncthreads();", "}"]
            return [indent + t for t in lines]

        src += ["  __shared__ int last;",
                "  const long long chunk = blockIdx.x % bpo;",
                "  const long long group_stride = gridDim.x / bpo;",
                "  const long long groups = (n_out + OPB - 1) / OPB;",
                "  for (long long g = blockIdx.x / bpo; g < groups; g += group_stride) {",
                "    for (int v = threadIdx.x; v < OPB * TPO; v += blockDim.x) {",
                *lanes,
                "      const long long o = g * OPB + oi;"]
        for r, (_, red_) in enumerate(reductions):
            src.append(f"      {red_.acc_ctype} acc{r} = {red_.init};")
        src += ["      if (o < n_out) {",
                "        for (long long r = chunk * TPO + ri; r < n_red; r += (long long)bpo * TPO) {"]
        src += ["          " + t for t in decompose]
        for r, (_, red_) in enumerate(reductions):
            src.append(f"          {red_.acc_ctype} v{r};")
        src.append(f"          plax_elem({call});")
        for r, (_, red_) in enumerate(reductions):   # (r rises: a thread's elements in order)
            src.append(f"          acc{r} = {red_.accumulate(f'acc{r}', f'v{r}')};")
        src += ["        }", "      }"]
        for r in range(nr):
            src.append(f"      s{r}[v] = acc{r};")
        src += ["    }"]
        src += tree("    ")
        # (the tree leaves output lane oi's value in the slot of its reduced lane 0)
        src += ["    for (int v = threadIdx.x; v < OPB * TPO; v += blockDim.x) {",
                *lanes,
                "      const long long o = g * OPB + oi;",
                "      if (ri != 0 || o >= n_out) continue;",
                "      if (bpo == 1) {"]
        src += finals(lambda r: f"s{r}[v]", "        ")
        src += ["      } else {"]
        for r in range(nr):
            src.append(f"        p{r}[o * bpo + chunk] = s{r}[v];")
        src += ["        __threadfence();  // the partials visible before the count says they are",
                "      }",
                "    }",
                "    __syncthreads();",
                "    if (threadIdx.x == 0)",
                "      last = bpo > 1 && plax_count_done(done + g, tag) == (unsigned long long)(bpo - 1);",
                "    __syncthreads();",
                "    if (last) {  // (block-uniform) every partial of group g is stored",
                "      __threadfence();",
                "      for (int v = threadIdx.x; v < OPB * TPO; v += blockDim.x) {",
                "  " + lanes[0],
                "        const long long o = g * OPB + oi;"]
        for r, (_, red_) in enumerate(reductions):
            acc_t = red_.acc_ctype
            src += [f"        {acc_t} c{r} = {red_.init};",
                    "        if (o < n_out)",
                    f"          for (long long c = ri; c < bpo; c += TPO) "
                    f"c{r} = {red_.combine(f'c{r}', f'plax_read_published(p{r} + o * bpo + c)')};",
                    f"        s{r}[v] = c{r};"]
        src += ["      }"]
        src += tree("      ")
        src += ["      for (int v = threadIdx.x; v < OPB * TPO; v += blockDim.x) {",
                "  " + lanes[0],
                "        const long long o = g * OPB + oi;",
                "        if (ri != 0 || o >= n_out) continue;"]
        src += finals(lambda r: f"s{r}[v]", "        ")
        src += ["      }",
                "      if (threadIdx.x == 0) done[g] = 0ull;  // cleared: a CUDA graph replays this launch with its tag",
                "    }",
                "    __syncthreads();  // s*, last are rewritten by the next group", "  }", "}",
                "#else"]
        # the host driver: every element once, in C order, accumulated serially
        host_params = kernel_params + [f"{ctype(out_dtypes[j])}* __restrict__ r{j}" for j in final_outputs]
        src += [f"extern \"C\" void plax_host({', '.join(host_params + ['long long n_out', 'long long n_red'])}) {{"]
        for r, (_, red_) in enumerate(reductions):
            acc_t = red_.acc_ctype
            src += [f"  {acc_t}* acc{r} = ({acc_t}*)malloc(sizeof({acc_t}) * (n_out ? n_out : 1));",
                    f"  for (long long o = 0; o < n_out; ++o) acc{r}[o] = {red_.init};"]
        src += ["  for (long long o = 0; o < n_out; ++o) {",
                "    for (long long r = 0; r < n_red; ++r) {"]
        src += ["      " + s for s in decompose]
        for r in range(nr):
            src.append(f"      {reductions[r][1].acc_ctype} v{r};")
        src.append(f"      plax_elem({call});")
        for r, (_, red_) in enumerate(reductions):
            src.append(f"      acc{r}[o] = {red_.accumulate(f'acc{r}[o]', f'v{r}')};")
        src += ["    }", "  }"]
        src += ["  for (long long o = 0; o < n_out; ++o) {",
                *finals(lambda r: f"acc{r}[o]", "    "), "  }"]
        for r in range(nr):
            src.append(f"  free(acc{r});")
        src += ["}", "#endif", ""]
        entry = ("plax_reduce",)

    return ClusterKernel(
        source="\n".join(src), inputs=inputs, out_dtypes=out_dtypes, out_shapes=out_shapes,
        elem_outputs=elem_outputs, reductions=reductions, final_outputs=final_outputs, n=n,
        n_out=n_out, n_red=n_red,
        outputs_per_block=opb, entry=entry, primitives=[e.primitive.name for e in cluster.eqns],
        shape=shape, elem_source=elem_source, per_thread=per_thread, vector=vector)


#: the vector path's loads and stores (:func:`_vector_kernel`), once per translation unit.
#: On the device a 16-, 8-, 4- or 2-byte word of ``V`` elements moves in one instruction
#: (``ld.global.nc.v4.u32`` for 16 bytes: the operands are ``const __restrict__``); the
#: simulated GPU's host build (``PLAX_SIM``) copies element by element (no aliasing games on
#: the host compiler).
VECTOR_SOURCE = r"""#ifndef PLAX_VECTOR_ACCESS
#define PLAX_VECTOR_ACCESS
#ifdef PLAX_SIM
#define PLAX_UNROLL
template <typename T, int V> static inline void plax_vload(T* r, const T* p) {
  for (int k = 0; k < V; ++k) r[k] = p[k];
}
template <typename T, int V> static inline void plax_vstore(T* p, const T* r) {
  for (int k = 0; k < V; ++k) p[k] = r[k];
}
#else
#define PLAX_UNROLL _Pragma("unroll")
template <int B> struct plax_word;
template <> struct plax_word<16> { typedef uint4 type; };
template <> struct plax_word<8> { typedef uint2 type; };
template <> struct plax_word<4> { typedef unsigned int type; };
template <> struct plax_word<2> { typedef unsigned short type; };
// V elements of T as one aligned word (the caller checked the alignment): a union, as
// plax_bitcast does, so the elements land in registers
template <typename T, int V>
__device__ __forceinline__ void plax_vload(T* r, const T* __restrict__ p) {
  typedef typename plax_word<sizeof(T) * V>::type W;
  union { W w; T t[V]; } u;
  u.w = *reinterpret_cast<const W*>(p);
  PLAX_UNROLL
  for (int k = 0; k < V; ++k) r[k] = u.t[k];
}
template <typename T, int V>
__device__ __forceinline__ void plax_vstore(T* __restrict__ p, const T* r) {
  typedef typename plax_word<sizeof(T) * V>::type W;
  union { W w; T t[V]; } u;
  PLAX_UNROLL
  for (int k = 0; k < V; ++k) u.t[k] = r[k];
  *reinterpret_cast<W*>(p) = u.w;
}
#endif
#endif
"""


def _epilogue_plan(cluster, epilogue: list, red_vars: list, literal_values: bool) -> ClusterKernel:
    """The plan of ``cluster``'s epilogue as an elementwise kernel over the reductions'
    result shape, whose ``plax_elem`` (renamed ``plax_epilogue``) :func:`plan_cluster` calls
    per output with the reductions' values (``"value"`` inputs) and the cluster's parameters.

    Raises:
      Unsupported: an epilogue without a reduction computed, one reading a value of the
        cluster other than a reduction's result, or one the generator does not express.
    """
    if not red_vars:
        raise Unsupported("an epilogue without a reduction")
    shape = tuple(red_vars[0].aval.shape)
    in_epilogue = {id(e) for e in epilogue}
    made = {id(v) for e in cluster.eqns if id(e) not in in_epilogue for v in e.outvars}
    results = {id(v) for v in red_vars}
    part = sub_cluster(epilogue, shape, {id(v) for v in cluster.outputs})
    if any(isinstance(v, Var) and id(v) in made and id(v) not in results for v in part.inputs):
        raise Unsupported("an epilogue reading a value that is not a reduction's result")
    plan = plan_cluster(part, literal_values=literal_values,
                        values=frozenset(id(v) for v in part.inputs if id(v) in results))
    plan.outputs = part.outputs   # (the Vars its elem_outputs index)
    return plan


def _is_number(atom, by_atom: dict, numbers: set) -> bool:
    """Whether the kernel source may assume ``atom`` is not NaN: a floating literal passed by
    value that is not (its value is in the source's signature: a NaN one is another kernel),
    or a value ``numbers`` holds (a float conversion of one)."""
    if id(atom) in numbers:
        return True
    inp = by_atom.get(id(atom))
    return inp is not None and inp.kind == "literal" and inp.dtype.kind == "f" and \
        not np.isnan(inp.value)


def _max_min_of_a_number(eqn, args: list[str], number: list[bool]) -> str | None:
    """``max``/``min`` of a real float where an operand is known not to be NaN
    (:func:`_is_number`): that operand's NaN test left out (``random.uniform``'s clamp to
    ``minval``), with ``plax_max``/``plax_min``'s results on every value, signed zeros and
    NaNs included; None elsewhere.

    Args:
      eqn: the equation.
      args: its operand expressions.
      number: for each operand, whether it is known not to be NaN.
    """
    if eqn.primitive not in (lax.max_p, lax.min_p) or \
            np.dtype(eqn.outvars[0].aval.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        return None
    op = ">" if eqn.primitive is lax.max_p else "<"
    tie = "plax_max_tie" if eqn.primitive is lax.max_p else "plax_min_tie"
    a, b = args
    # (a NaN b fails both comparisons and is the result, as plax_max gives it)
    if number[0]:
        return f"({a} {op} {b} ? {a} : ({a} == {b} ? {tie}({a}, {b}) : {b}))"
    if number[1]:
        return f"(({a} != {a} || {a} {op} {b}) ? {a} : ({a} == {b} ? {tie}({a}, {b}) : {b}))"
    return None


def _branch_selects(eqns, live: set, outputs: dict, body: list[str], marks: list[int],
                    load_lines: set, selects: dict) -> list[str]:
    """``plax_elem``'s lines with each ``select_n`` whose cases need enough work of their own
    computed lazily: an ``if``/``else`` whose branch computes only the case it selects.

    A case's own work is the equations whose values only it reads (through each other, not
    the predicate, another case, a reduction or an output of the cluster). Where some case owns
    at least :data:`LAZY_SELECT_MIN_EQUATIONS` equations, those equations' lines move into
    the case's branch and the select becomes an assignment there. The values are the same
    expressions, so the bits are the eager select's; an element computes one case where it
    computed all (the inverse-erf transform of ``random.normal``: one of its two polynomials,
    and no square root on the common branch), at the cost of a branch, which a warp whose
    elements disagree takes both ways. Operand loads stay where they were.

    Args:
      eqns: the cluster's equations.
      live: ids of the variables something reads.
      outputs: ids of the cluster's outputs.
      body: the lines of ``plax_elem`` in equation order.
      marks: where each equation's lines start in ``body`` (one more at the end).
      load_lines: indices in ``body`` of operand loads.
      selects: equation index -> ``(local, operand expressions, dtype)`` of the ``select_n``
        equations with two cases or more (real dtypes).

    Returns:
      The lines of ``plax_elem``.
    """
    if not selects:
        return body
    own_lines = [[body[j] for j in range(marks[k], marks[k + 1]) if j not in load_lines]
                 for k in range(len(eqns))]
    loads = [[body[j] for j in range(marks[k], marks[k + 1]) if j in load_lines]
             for k in range(len(eqns))]
    uses: dict = {}   # id(var) -> [(reading equation, operand position)]
    for k, eqn in enumerate(eqns):
        if any(id(v) in live for v in eqn.outvars):
            for pos, v in enumerate(eqn.invars):
                if not isinstance(v, Literal):
                    uses.setdefault(id(v), []).append((k, pos))
    for s in sorted(selects):
        local, args, dtype = selects[s]
        owned = []
        for case in range(1, len(args)):
            mine: set = set()
            for k in range(s - 1, -1, -1):
                eqn = eqns[k]
                if not own_lines[k] or _reduces(eqn.primitive) or \
                        any(id(v) in outputs for v in eqn.outvars):
                    continue
                readers = [r for v in eqn.outvars for r in uses.get(id(v), [])]
                if readers and all(r == (s, case) or r[0] in mine for r in readers):
                    mine.add(k)
            owned.append(sorted(mine))
        if max(len(m) for m in owned) < LAZY_SELECT_MIN_EQUATIONS:
            continue
        which, cases = args[0], args[1:]

        def branch(c: int) -> list[str]:
            return ["  " + line for k in owned[c] for line in own_lines[k]] + [f"  {local} = {cases[c]};"]

        lines = [f"{value_ctype(dtype)} {local};"]
        if np.dtype(eqns[s].invars[0].aval.dtype) == np.bool_:   # true selects case 1
            lines += [f"if ({which}) {{", *branch(1), "} else {", *branch(0), "}"]
        else:   # an index past the last case selects the last, as the expression form
            for c in range(len(cases) - 1):
                lines += [f"{'} else ' if c else ''}if ({which} == {c}) {{", *branch(c)]
            lines += ["} else {", *branch(len(cases) - 1), "}"]
        for k in (k for mine in owned for k in mine):
            own_lines[k] = []
        declared = f"const {value_ctype(dtype)} {local} ="
        own_lines[s] = lines + [line for line in own_lines[s] if not line.startswith(declared)]
    return [line for k in range(len(eqns)) for line in loads[k] + own_lines[k]]


class VectorPlan:
    """How an elementwise kernel's body runs ``v`` elements at a time (:func:`_vector_plan`).

    Attributes:
      v: elements per access (``VECTOR_BYTES`` over the widest such operand's itemsize).
      ins, outs: the operands read (inputs) and written (results) at the loop's own index.
      ctypes: each such operand's element C type; widths: its itemsize.
      idx, suffix: the index type (``unsigned int`` below 2**31 elements) and literal suffix.
      overload: the lines of a ``plax_elem(idx i, int s, params...)`` overload reading and
        writing those operands at ``[s]`` (registers), the rest as the scalar one.
    """

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def aligned(self, prefix: str = "") -> str:
        """A C expression, 0 when every such operand (named ``prefix + name``) is aligned to
        its ``v``-element chunk."""
        return " | ".join(f"((unsigned long long){prefix}{name} & "
                          f"{self.v * self.widths[name] - 1}u)" for name in self.ins + self.outs)


def _vector_plan(inputs, elem_outputs, out_dtypes, shape, need_index, params, body,
                 uses_helpers: bool) -> VectorPlan | None:
    """The vector path's plan of an elementwise body (see :func:`_vector_kernel`), or None
    where it gets none: below ``VECTOR_MIN_ELEMENTS`` (launch-bound), where the widest operand
    is over ``VECTOR_BYTES / 2`` bytes (complex128: one element per access already), where
    nothing is read or written at the loop's index, or where the body calls the special
    functions' helpers (compute-bound: the unrolled copies would cost compilation time, not
    save any).

    Args:
      inputs, elem_outputs, out_dtypes, shape: the cluster kernel's (:func:`plan_cluster`).
      need_index: the iteration dimensions whose index the body reads (``idx<d>``).
      params: the scalar ``plax_elem``'s parameters after its index.
      body: the scalar ``plax_elem``'s lines (operands read ``a<k>[i]``, results stored
        ``o<j>[i] = ...``).
      uses_helpers: whether the body calls :mod:`plax_cupy.special_source`'s helpers.
    """
    n = math.prod(shape)
    text = "\n".join(body)
    names = [inp.name for inp in inputs if inp.kind == "array" and shape
             and tuple(inp.atom.aval.shape) == shape and re.search(rf"\b{inp.name}\[i\]", text)]
    widths = {inp.name: np.dtype(inp.dtype).itemsize for inp in inputs if inp.name in names}
    widths.update({f"o{j}": np.dtype(out_dtypes[j]).itemsize for j in elem_outputs})
    if n < VECTOR_MIN_ELEMENTS or uses_helpers or not widths:
        return None
    v = VECTOR_BYTES // max(widths.values())
    if v < 2:
        return None
    idx, suffix = ("unsigned int", "u") if n < 2 ** 31 else ("unsigned long long", "ull")
    strides = _strides(shape)
    at_slot = re.compile(rf"\b({'|'.join(sorted(widths))})\[i\]")
    head = [f"const {idx} idx{d} = (i / {strides[d]}{suffix}) % {shape[d]}{suffix};"
            for d in sorted(need_index)]
    overload = [f"__device__ __forceinline__ void plax_elem({idx} i, int s"
                f"{''.join(', ' + p for p in params)}) {{"]
    overload += ["  " + at_slot.sub(r"\1[s]", line) for line in head + body]
    overload.append("}")
    ctypes_of = {inp.name: ctype(inp.dtype) for inp in inputs}
    ctypes_of.update({f"o{j}": ctype(out_dtypes[j]) for j in elem_outputs})
    return VectorPlan(v=v, ins=names, outs=[f"o{j}" for j in elem_outputs], ctypes=ctypes_of,
                      widths=widths, idx=idx, suffix=suffix, overload=overload)


def _vector_kernel(plan: VectorPlan | None, n: int,
                   operands: list[str]) -> tuple[list[str], list[str], int]:
    """The vector path of an elementwise kernel: ``(definitions, kernel lines, per_thread)``,
    or ``([], [], 1)`` where the kernel gets none (``plan`` None: :func:`_vector_plan`).

    The path takes every operand read at the loop's own index (an input of the iteration
    shape: contiguous, as the launcher passes it) and every result, ``V = VECTOR_BYTES /
    (the widest of their itemsizes)`` consecutive elements at a time: each thread loads
    ``VECTOR_CHUNKS`` such chunks, ``T`` chunks apart (``T`` the grid's threads, so a warp's
    accesses stay coalesced), of every such input into registers, computes their elements with
    a ``plax_elem`` overload that reads those registers (broadcast and rank-0 operands, ``iota``
    and the element index are as in the scalar loop), and stores each result's chunks whole.
    The last ``n % V`` elements are the scalar ``plax_elem``'s. The kernel checks at launch
    that every such pointer is aligned to its chunk (``V`` times its itemsize; CuPy's pool
    hands out 512-byte aligned blocks, a view at an offset may not be) and runs the scalar
    grid-stride loop otherwise. Index arithmetic is 32-bit below 2**31 elements.

    Args:
      plan: the body's vector plan.
      n: elements of the iteration shape.
      operands: the scalar ``plax_elem``'s arguments after the index.
    """
    if plan is None:
        return [], [], 1
    v, u, idx, suffix = plan.v, VECTOR_CHUNKS, plan.idx, plan.suffix
    ins, outs, ctypes_of = plan.ins, plan.outs, plan.ctypes
    # the scalar plax_elem's arguments after the index, the contiguous ones as their registers
    args = ", ".join(f"{name}_r" if name in plan.widths else name for name in operands)
    chunk = f"(c + u * t) * {v}{suffix}"
    lines = [f"  // the vector path (codegen._vector_kernel): {v} elements per access, {u} "
             "accesses per operand in flight",
             f"  if (({plan.aligned()}) == 0) {{",
             f"    const {idx} t = ({idx})blockDim.x * gridDim.x;",
             f"    const {idx} nc = {n // v}{suffix};",
             f"    for ({idx} c = ({idx})blockIdx.x * blockDim.x + threadIdx.x; c < nc; "
             f"c += {u}{suffix} * t) {{"]
    lines += [f"      {ctypes_of[name]} {name}_r[{u * v}] = {{}};" for name in ins + outs]
    lines += ["      PLAX_UNROLL",
              f"      for ({idx} u = 0; u < {u}{suffix}; ++u) {{",
              "        if (c + u * t < nc) {"]
    lines += [f"          plax_vload<{ctypes_of[name]}, {v}>({name}_r + u * {v}, {name} + {chunk});"
              for name in ins]
    lines += ["        }", "      }",
              "      PLAX_UNROLL",
              f"      for (int s = 0; s < {u * v}; ++s)",
              f"        plax_elem((c + (s / {v}) * t) * {v}{suffix} + s % {v}, s, {args});",
              "      PLAX_UNROLL",
              f"      for ({idx} u = 0; u < {u}{suffix}; ++u) {{",
              "        if (c + u * t < nc) {"]
    lines += [f"          plax_vstore<{ctypes_of[name]}, {v}>({name} + {chunk}, {name}_r + u * {v});"
              for name in outs]
    lines += ["        }", "      }", "    }"]
    if n % v:
        lines += [f"    for ({idx} i = nc * {v}{suffix} + ({idx})blockIdx.x * blockDim.x + "
                  f"threadIdx.x; i < {n}{suffix}; i += t)",
                  f"      plax_elem((long long)i, {', '.join(operands)});"]
    lines += ["    return;", "  }"]
    return [VECTOR_SOURCE, *plan.overload], lines, u * v


#: a kernel's parameters may take 4 KiB (CUDA before 12.1): a group with more (8 bytes each,
#: at most) is declined and its members run as their own kernels
_MAX_PARAM_BYTES = 4096


class GroupKernel:
    """A multi-tensor kernel (:func:`plan_group`): several elementwise clusters of different
    shapes in one launch over their concatenated element ranges.

    Attributes:
      source: the translation unit (:data:`PREAMBLE` included).
      members: each member's :class:`ClusterKernel` (its ``inputs``, ``elem_outputs``,
        ``out_shapes`` and ``out_dtypes`` say what it reads and writes).
      offsets: where each member's range starts in the concatenation, then the total ``n``.
      widths: elements of each member a thread takes at once (its vector path's ``v``, else
        1: :func:`_group_vector_loop`).
      entry: ``("plax_multi",)``.
    """

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return f"GroupKernel({len(self.members)} members; n={self.n})"


def plan_group(clusters, *, literal_values: bool = True) -> GroupKernel:
    """One kernel computing several independent elementwise ``clusters`` (a
    :class:`plax.lowering.HorizontalGroup`'s members) in one launch: a grid-stride loop over
    the concatenation of their element ranges, each element computed by its member's
    ``plax_elem`` at its index within the member (the member found by comparing with the
    offsets, baked into the source: a warp mostly takes one branch).

    Args:
      clusters: :class:`plax.lowering.Cluster` objects without reductions.
      literal_values: as in :func:`plan_cluster`.

    Raises:
      Unsupported: a member the generator does not express, or one that reduces.

    Example:
      >>> # two SGD updates, [3, 2] and [2]: elements 0..5 the first's, 6..7 the second's
      >>> plan_group(group.members).offsets   # doctest: +SKIP
      [0, 6, 8]
    """
    plans = [plan_cluster(c, literal_values=literal_values) for c in clusters]
    if any(p.reductions for p in plans):
        raise Unsupported("a reduction in a multi-tensor kernel")
    offsets = [0]
    for p in plans:
        offsets.append(offsets[-1] + p.n)
    params, calls, elems = [], [], []
    for k, p in enumerate(plans):
        names = [f"m{k}_{inp.name}" for inp in p.inputs]
        params += [inp.param()[:-len(inp.name)] + name for inp, name in zip(p.inputs, names)]
        outs = [f"m{k}_o{j}" for j in p.elem_outputs]
        params += [f"{ctype(p.out_dtypes[j])}* __restrict__ m{k}_o{j}" for j in p.elem_outputs]
        calls.append(f"plax_elem_m{k}(i - {offsets[k]}LL{''.join(', ' + a for a in names + outs)})")
        elems.append(p.elem_source.replace("void plax_elem(", f"void plax_elem_m{k}(", 1))
    if 8 * (len(params) + 1) > _MAX_PARAM_BYTES:
        raise Unsupported(f"a multi-tensor kernel of {len(params)} parameters")
    text = "\n".join(elems)
    helpers = special_source.helpers_for(text)
    if "plax_threefry_elem(" in text:
        helpers += _threefry_elem_source() + "\n"
    branch = []
    for k, call in enumerate(calls):
        test = "if" if k == 0 else "else if"
        branch.append(f"    {test} (i < {offsets[k + 1]}LL) {call};" if k < len(calls) - 1
                      else f"    else {call};" if k else f"    {call};")
    signature = ", ".join(params + ["long long n"])
    widths = [p.vector.v if p.vector is not None else 1 for p in plans]
    if max(widths) > 1:   # some member moves VECTOR_BYTES at a time: a loop over units
        device_loop = _group_vector_loop(plans, widths)
        text = "\n".join([VECTOR_SOURCE, text] + [
            "\n".join(p.vector.overload).replace("void plax_elem(", f"void plax_elem_m{k}(", 1)
            for k, p in enumerate(plans) if p.vector is not None])
    else:
        device_loop = ["  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;",
                       "       i += (long long)blockDim.x * gridDim.x) {", *branch, "  }"]
    src = [PREAMBLE + helpers, "// multi-tensor kernel", text, "",
           "#ifndef PLAX_HOST",
           f"extern \"C\" __global__ void plax_multi({signature}) {{",
           *device_loop, "}", "#else",
           f"extern \"C\" void plax_host({signature}) {{",
           "  for (long long i = 0; i < n; ++i) {", *branch, "  }", "}", "#endif", ""]
    return GroupKernel(source="\n".join(src), members=plans, offsets=offsets, n=offsets[-1],
                       entry=("plax_multi",), shape=(offsets[-1],), widths=widths,
                       primitives=[f"[{' '.join(p.primitives)}]" for p in plans])


def _group_vector_loop(plans, widths: list[int]) -> list[str]:
    """The device loop of a multi-tensor kernel some of whose members have a vector path: a
    grid-stride loop over *units*, a unit being ``widths[k]`` consecutive elements of member
    ``k`` (``VectorPlan.v`` where the member has a vector path, else 1), members in turn. A
    vector unit loads its member's contiguous operands ``v`` elements at a time into registers,
    computes them with the member's ``plax_elem`` overload and stores its results whole, where
    the member's pointers are aligned to their chunks (checked once per launch) and the unit
    is whole; otherwise (a view at an offset, the member's last ``n % v`` elements) it runs the
    scalar ``plax_elem`` on each of its elements."""
    units = [0]
    for p, v in zip(plans, widths):
        units.append(units[-1] + -(-p.n // v))
    lines = [f"  // units: {' '.join(map(str, widths))} elements of each member "
             "(codegen.plan_group)"]
    lines += [f"  const bool aligned{k} = (({p.vector.aligned(f'm{k}_')}) == 0);"
              for k, p in enumerate(plans) if p.vector is not None]
    lines += ["  for (long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
              f"u < {units[-1]}LL;", "       u += (long long)blockDim.x * gridDim.x) {"]
    for k, (p, v) in enumerate(zip(plans, widths)):
        test = "if" if k == 0 else "else if"
        head = f"    {test} (u < {units[k + 1]}LL) {{" if k < len(plans) - 1 else (
            "    else {" if k else "    {")
        operands = [f"m{k}_{inp.name}" for inp in p.inputs] + [f"m{k}_o{j}" for j in p.elem_outputs]
        scalar = f"plax_elem_m{k}(i{''.join(', ' + a for a in operands)})"
        if v == 1:
            lines += [head, f"      const long long i = u - {units[k]}LL;", f"      {scalar};",
                      "    }"]
            continue
        plan = p.vector
        local = {name: f"m{k}_{name}" for name in plan.ins + plan.outs}
        regs = ", ".join(f"{a}_r" if a[len(f'm{k}_'):] in plan.widths else a for a in operands)
        lines += [head, f"      const long long e = (u - {units[k]}LL) * {v}LL;",
                  f"      if (aligned{k} && e + {v} <= {p.n}LL) {{"]
        lines += [f"        {plan.ctypes[name]} {local[name]}_r[{v}];"
                  for name in plan.ins + plan.outs]
        lines += [f"        plax_vload<{plan.ctypes[name]}, {v}>({local[name]}_r, "
                  f"{local[name]} + e);" for name in plan.ins]
        lines += ["        PLAX_UNROLL", f"        for (int s = 0; s < {v}; ++s)",
                  f"          plax_elem_m{k}(({plan.idx})e + s, s, {regs});"]
        lines += [f"        plax_vstore<{plan.ctypes[name]}, {v}>({local[name]} + e, "
                  f"{local[name]}_r);" for name in plan.outs]
        lines += ["      } else {",
                  f"        for (long long i = e; i < e + {v} && i < {p.n}LL; ++i) {scalar};",
                  "      }", "    }"]
    lines.append("  }")
    return lines


def _to_acc(value: str, red: Reduction) -> str:
    """A reduction operand's value as its accumulator type."""
    if red.acc.kind == "c":
        return value if red.acc == red.dtype else f"plax_ccast<double>({value})"
    return f"(({ctype(red.acc)}){value})"


def _broadcast_offset(op_shape, bdims, shape, need_index: set) -> str:
    """The flat offset into an operand of ``op_shape`` whose axis j is the iteration axis
    ``bdims[j]`` (size-1 axes broadcast: they add nothing), from the loop's per-axis indices
    ``idx<d>``; records the axes it reads in ``need_index``."""
    op_strides = _strides(op_shape)
    terms = []
    for j, d in enumerate(bdims):
        if op_shape[j] == 1 and shape[d] != 1:
            continue
        need_index.add(d)
        terms.append(f"idx{d} * {op_strides[j]}LL")
    return " + ".join(terms) or "0"


class _OneEquation:
    """A one-equation 'cluster' (lone elementwise equations and eager operations use the same
    generator as clusters)."""

    def __init__(self, eqn):
        self.eqns = [eqn]
        kind = fusion_kind(eqn.primitive)
        self.shape = tuple(eqn.invars[0].aval.shape) if kind == REDUCTION else tuple(eqn.outvars[0].aval.shape)
        seen, inputs = set(), []
        for v in eqn.invars:
            if id(v) not in seen:
                seen.add(id(v))
                inputs.append(v)
        self.inputs = inputs
        self.outputs = [eqn.outvars[0]]


def plan_equation(eqn, *, literal_values: bool = True) -> ClusterKernel:
    """The kernel of one fusible equation (elementwise, broadcast, reduction or ``iota``).

    Raises:
      Unsupported: as :func:`plan_cluster`, or a primitive with no fusion kind.
    """
    if fusion_kind(eqn.primitive, index=True) is None or len(eqn.outvars) != 1:
        raise Unsupported(f"{eqn.primitive.name} is not fusible")
    return plan_cluster(_OneEquation(eqn), literal_values=literal_values)


# ---------------------------------------------------------------- threefry2x32

def threefry_source() -> str:
    """The CUDA C++ source of ``plax_threefry2x32``: Threefry-2x32 (20 rounds, JAX's key
    schedule and rotations, from :mod:`plax.lax.random_bits`) over ``n`` counter pairs.

    Each of the four operands is read at ``i * stride`` (stride 0: a rank-0 operand,
    broadcast), so one kernel serves every combination. uint32 arithmetic wraps in C++ as in
    NumPy, so the bits equal the reference kernel's. ``PLAX_HOST`` gives ``plax_threefry_host``.
    """
    params = ("const unsigned int* __restrict__ k0, const unsigned int* __restrict__ k1, "
              "const unsigned int* __restrict__ c0, const unsigned int* __restrict__ c1, "
              "unsigned int* __restrict__ y0, unsigned int* __restrict__ y1, long long n, "
              "long long s0, long long s1, long long s2, long long s3")
    return "\n".join([
        PREAMBLE,
        _threefry_elem_source(),
        "#ifndef PLAX_HOST",
        f"extern \"C\" __global__ void plax_threefry2x32({params}) {{",
        "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;",
        "       i += (long long)blockDim.x * gridDim.x) {",
        "    plax_threefry_elem(k0[i * s0], k1[i * s1], c0[i * s2], c1[i * s3], &y0[i], &y1[i]);",
        "  }",
        "}",
        "#else",
        f"extern \"C\" void plax_threefry_host({params}) {{",
        "  for (long long i = 0; i < n; ++i)",
        "    plax_threefry_elem(k0[i * s0], k1[i * s1], c0[i * s2], c1[i * s3], &y0[i], &y1[i]);",
        "}",
        "#endif", ""])


def _threefry_elem_source() -> str:
    """``plax_threefry_elem``: one counter pair hashed (the device function the threefry
    kernel and fusion clusters holding ``threefry2x32`` call)."""
    from plax.lax.random_bits import KS_PARITY, ROTATIONS
    rounds = []
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            rounds.append(f"  x0 += x1; x1 = ((x1 << {r}) | (x1 >> {32 - r})) ^ x0;")
        rounds.append(f"  x0 += ks{(i + 1) % 3}; x1 += ks{(i + 2) % 3} + {i + 1}u;")
    return "\n".join([
        "__device__ __forceinline__ void plax_threefry_elem(unsigned int ks0, unsigned int ks1,",
        "    unsigned int x0, unsigned int x1, unsigned int* out0, unsigned int* out1) {",
        f"  const unsigned int ks2 = ks0 ^ ks1 ^ {KS_PARITY:#x}u;",
        "  x0 += ks0; x1 += ks1;",
        *rounds,
        "  *out0 = x0; *out1 = x1;",
        "}"])


def describe(kernel: ClusterKernel) -> str:
    """The kernel's source with a header line, as ``Compiled.as_text()`` shows it."""
    return f"// ---- CUDA kernel: {' '.join(kernel.primitives)} over {kernel.shape}\n{kernel.source}"



def clamped_start(value: str, dtype, limit: int | str) -> str:
    """The C expression (``long long``) of a ``dynamic_slice``/``dynamic_update_slice`` start
    ``value`` of integer ``dtype`` clamped to ``[0, limit]``, as XLA clamps it so the window fits.

    An unsigned start is compared as ``unsigned long long`` before it is converted: a uint64
    of 2**63 or more would wrap negative as ``long long`` and clamp to 0 instead of to the top.
    A signed one is converted first (exact: every signed type fits ``long long``).

    Args:
      value: C expression of the start (evaluated up to three times: no side effects).
      dtype: its integer dtype (the primitives take signed or unsigned ones, not bool).
      limit: the largest start, ``dim - size`` (at least 0): a Python int, or a C expression
        of a non-negative ``long long``.

    Returns:
      The clamped start, a ``long long`` C expression.

    Raises:
      TypeError: for a ``dtype`` that is not a signed or unsigned integer.

    Example:
      >>> clamped_start("s", np.uint64, 6)
      '((unsigned long long)(s) > 6ULL ? 6LL : (long long)(s))'
    """
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        raise TypeError(f"a dynamic slice start must be a signed or unsigned integer, not {dtype}")
    if isinstance(limit, int) and limit == 0:
        return "0LL"
    top, wide = (f"{limit}LL", f"{limit}ULL") if isinstance(limit, int) else \
        (f"({limit})", f"(unsigned long long)({limit})")
    if dtype.kind == "u":
        return f"((unsigned long long)({value}) > {wide} ? {top} : (long long)({value}))"
    v = f"(long long)({value})"
    return f"({v} < 0LL ? 0LL : ({v} > {top} ? {top} : {v}))"


__all__ = ["ARG_SOURCE", "ArgReduction", "BLOCK", "ClusterKernel", "GroupKernel",
           "HORIZONTAL_MAX_ELEMENTS", "KernelInput", "Reduction", "Unsupported",
           "UnfusedArgReduction", "arg_reduction_of", "c_literal", "clamped_start", "convert_expr",
           "describe", "elementwise_expr", "elementwise_launch", "plan_cluster", "plan_equation",
           "plan_group", "reads_coalesced", "reduction_launch", "reduction_layout", "reduction_of",
           "threefry_source"]

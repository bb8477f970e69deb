"""Whether a captured CUDA graph computes what the program computes: a new plan's first
launches compared with a plain run of the same call (:mod:`plax_cupy.graphs` runs the check).

A capture that *fails* is seen (the program runs plainly, the reason in ``as_text()``); one that
succeeds but replays wrongly would not be: a library call that bakes in a host value or a
workspace pointer, a library-internal allocation freed once the capture ended, scratch a kernel
expects clear but a previous launch left dirty. So each new plan's graph is launched twice on
the capturing call's inputs, the program is run plainly once on the same inputs (fresh
buffers), and each launch's outputs are compared with the plain run's
(:func:`compare`). The rule (:func:`Rule.of`):

* **Bits**, for integer and boolean outputs, and for every output of a program whose captured
  path runs the same kernels as its plain run: plax's generated kernels, CuPy's own (CUB,
  Thrust), cuFFT on the plan the program owns (the same plan both times), the one-kernel scan
  and the look-back row kernels (whose carries are a left fold in tile order whatever the
  timing: :mod:`plax_cupy.kernels_rows`). None of them uses floating-point atomics, so two
  runs give the same bits; NaNs compare equal whatever their payload.
* **A tolerance**, for the floating outputs of a program holding a primitive whose capture
  takes another entry point than its plain run (:data:`CAPTURE_PATHS` with ``differs``:
  cuBLAS through :mod:`plax_cupy.cublas_direct` where the plain run calls CuPy's ``matmul``,
  cuSOLVER through :mod:`plax_cupy.cusolver_direct` where it calls ``cupy.linalg``): another
  entry point may pick another algorithm (its heuristic sees another workspace), which rounds
  differently. NaN and infinity positions must agree; elsewhere the largest difference must be
  at most ``tol * max(|plain|, |replay|)`` over the output, with ``tol = min(1/16, 32 * eps *
  R)``: ``eps`` the dtype's, ``R`` the program's reduction length (the summed lengths of its
  contractions, reductions, factorisations and cumulative ops, a ``scan`` body's times its
  length), a generous bound of the rounding two summation orders can accumulate, relative to
  the output's scale rather than to each element, so that rounding in a well-scaled output
  cannot false-alarm (an output that is all cancellation noise, or floats that jump on a
  threshold, could: the cost is a warning and plain runs, never a wrong result). The
  replays this check exists for are wrong by the size of the values themselves (stale or
  garbage operands, zeros, NaN-filled scratch), far beyond it. An integer or boolean output of
  such a program that a near tie could decide (:func:`near_ties`: it depends on a float that
  may round differently -- an ``argmax``/``argmin``, a ``sort``'s indices, a float->int
  conversion or a comparison of a library result -- or on a pivoting factorisation's pivots,
  ``lu``) may differ in at most one element in 64 (at least one); any other integer output (a
  step counter, a shape computation) must have equal bits.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import numpy as np

from plax import dtypes
from plax.core.jaxpr import Var, sub_jaxprs

#: primitive -> (what its capture goes through, whether that differs from its plain run's path)
CAPTURE_PATHS: dict = {
    "dot_general": ("cuBLAS gemm (cublas_direct)", True),
    "conv_general_dilated": ("cuBLAS gemm (cublas_direct, implicit GEMM)", True),
    "triangular_solve": ("cuBLAS trsm (cublas_direct)", True),
    "cholesky": ("cuSOLVER potrf (cusolver_direct)", True),
    "lu": ("cuSOLVER getrf (cusolver_direct)", True),
    "qr": ("cuSOLVER geqrf/orgqr (cusolver_direct)", True),
    "eigh": ("cuSOLVER syevd/heevd, syevjBatched (cusolver_direct)", True),
    "svd": ("cuSOLVER gesvd, gesvdjBatched (cusolver_direct)", True),
    "fft": ("cuFFT on the program's own plans (fft_plans)", False),
    "scan": ("the one-kernel scan's scratch (scan_kernel)", False),
    "cumsum": ("the look-back scratch (kernels_rows)", False),
    "cumprod": ("the look-back scratch (kernels_rows)", False),
    "cummax": ("the look-back scratch (kernels_rows)", False),
    "cummin": ("the look-back scratch (kernels_rows)", False),
    "cumlogsumexp": ("the look-back scratch (kernels_rows)", False),
}

#: the largest tolerance, relative to an output's scale (a wrong replay is off by its scale)
MAX_TOLERANCE = 2.0 ** -4
#: ulps of rounding allowed per element of reduction length
ULPS_PER_TERM = 32
#: an integer output a near tie could decide may differ in one element in this many
INTEGER_FLIPS = 64

#: library primitives whose integer outputs are chosen by comparing floats they computed (the
#: pivots of a pivoting factorisation): a near tie there may go the other way
PIVOTING = frozenset({"lu"})


def _reduction_length(eqn) -> int:
    """How many terms one output element of ``eqn`` sums or eliminates over (0: none, or
    parameters of a form not foreseen: the bound only widens a tolerance, never decides what
    compiles)."""
    try:
        return _terms(eqn)
    except (KeyError, IndexError, TypeError, ValueError):
        return 0


def _terms(eqn) -> int:
    name = eqn.primitive.name
    shapes = [tuple(getattr(getattr(v, "aval", None), "shape", ()) or ()) for v in eqn.invars]
    if not shapes:
        return 0
    if name == "dot_general":
        (contract, _), _ = eqn.params["dimension_numbers"]
        return math.prod(shapes[0][d] for d in contract)
    if name == "conv_general_dilated":
        return math.prod(shapes[1]) if len(shapes) > 1 else 0
    if name in ("triangular_solve", "cholesky", "lu", "qr", "eigh", "svd"):
        return shapes[0][-1] if shapes[0] else 0
    if name.startswith("cum"):
        axis = eqn.params.get("axis", 0)
        return shapes[0][axis] if shapes[0] else 0
    if name.startswith("reduce_") or name.startswith("arg"):
        outs = [math.prod(getattr(v.aval, "shape", ()) or ()) for v in eqn.outvars]
        return math.prod(shapes[0]) // max(1, outs[0] if outs else 1)
    return 0


def _is_var(v) -> bool:
    """Whether ``v`` is a jaxpr variable (not a literal: a literal never differs)."""
    return isinstance(v, Var)


def _differing(jaxpr, inputs: Sequence[bool]) -> list[bool]:
    """Per output of ``jaxpr`` (a ``Jaxpr`` or ``ClosedJaxpr``): whether it may differ between a
    plain run and a captured launch, given which of its inputs may (:func:`near_ties`)."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    differs = {v for v, d in zip(inner.invars, inputs) if d}
    for eqn in inner.eqns:
        ins = [_is_var(v) and v in differs for v in eqn.invars]
        differs.update(v for v, d in zip(eqn.outvars, _equation_differs(eqn, ins)) if d)
    return [_is_var(v) and v in differs for v in inner.outvars]


def _holds_library_rounding(jaxpr) -> bool:
    """Whether ``jaxpr`` or a sub-jaxpr holds a primitive whose capture may round differently."""
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        name = eqn.primitive.name
        if CAPTURE_PATHS.get(name, (None, False))[1]:
            return True
        if any(_holds_library_rounding(sub) for sub in sub_jaxprs(eqn.params)):
            return True
    return False


def _loop_carry(body, consts: list, carry: list, rest: list) -> tuple[list, list]:
    """A loop body's fixed point: ``(carry, outputs)`` flags once the carry's stop growing
    (the body's outputs begin with the carry)."""
    while True:
        outs = _differing(body, consts + carry + rest)
        grown = [a or b for a, b in zip(carry, outs[:len(carry)])]
        if grown == carry:
            return carry, outs
        carry = grown


def _equation_differs(eqn, ins: list[bool]) -> list[bool]:
    """Per output of ``eqn``: whether it may differ, given which inputs may (``ins``)."""
    name, outs = eqn.primitive.name, eqn.outvars
    if CAPTURE_PATHS.get(name, (None, False))[1]:   # (another entry point: rounds otherwise)
        return [any(ins) or dtypes.is_inexact(v.aval.dtype) or name in PIVOTING for v in outs]
    subs = sub_jaxprs(eqn.params)
    if not subs:
        return [any(ins)] * len(outs)
    p = eqn.params
    if name == "scan":
        nc, nk = p["num_consts"], p["num_carry"]
        carry, ys = _loop_carry(p["jaxpr"], ins[:nc], ins[nc:nc + nk], ins[nc + nk:])
        return carry + ys[nk:]
    if name == "while":
        cc, bc = p["cond_nconsts"], p["body_nconsts"]
        carry, _ = _loop_carry(p["body_jaxpr"], ins[cc:cc + bc], ins[cc + bc:], [])
        if _differing(p["cond_jaxpr"], ins[:cc] + carry)[0]:   # (the trip count itself)
            return [True] * len(outs)
        return carry
    if name == "cond":
        if ins[0]:   # (the branch taken)
            return [True] * len(outs)
        per = [_differing(b, ins[1:]) for b in p["branches"]]
        return [any(flags) for flags in zip(*per)]
    if len(subs) == 1 and len(subs[0].invars) == len(ins):
        return _differing(subs[0], ins)   # (jit, checkpoint, a custom rule's call)
    # (a form not foreseen: any output may differ where anything inside could)
    return [any(ins) or any(_holds_library_rounding(s) for s in subs)] * len(outs)


def near_ties(jaxpr) -> tuple[bool, ...]:
    """Per output of ``jaxpr``: whether it may differ between a plain run and a captured launch
    of a correct graph. A float may round differently where it depends on a primitive whose
    capture takes another library entry point (:data:`CAPTURE_PATHS`); an integer or boolean
    where it depends on such a float (an ``argmax``/``argmin`` of it, a ``sort`` it keys, its
    conversion or comparison: a near tie decided the other way) or on the pivots of a pivoting
    factorisation (:data:`PIVOTING`). Flows through ``jit``, ``scan`` and ``while`` carries
    (to a fixed point) and ``cond`` branches; anything else holding sub-jaxprs, as a whole.

    Example:
      >>> import plax, plax.numpy as jnp
      >>> near_ties(plax.make_jaxpr(lambda w, n: (jnp.argmax(w @ w), n + 1))(  # doctest: +SKIP
      ...     np.eye(2, dtype=np.float32), 0))
      (True, False)
    """
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    return tuple(_differing(jaxpr, [False] * len(inner.invars)))


class Rule(NamedTuple):
    """How a program's outputs are compared (see the module).

    Attributes:
      paths: ``{primitive: what its capture goes through}`` for the program's primitives in
        :data:`CAPTURE_PATHS` (named in a mismatch's warning).
      tolerant: whether a primitive's capture takes another entry point than its plain run.
      length: the program's reduction length ``R``.
      ties: per output, whether it may differ (:func:`near_ties`): an integer or boolean
        output may then differ in one element in :data:`INTEGER_FLIPS`, else in none.
    """

    paths: dict
    tolerant: bool
    length: int
    ties: tuple = ()

    @classmethod
    def of(cls, equations, jaxpr=None) -> "Rule":
        """The rule of a program, from ``(equation, times run)`` pairs (all of its jaxpr's) and
        the jaxpr itself (for :func:`near_ties`; without it, no integer output may differ)."""
        paths, tolerant, length = {}, False, 0
        for eqn, times in equations:
            name = eqn.primitive.name
            if name in CAPTURE_PATHS:
                what, differs = CAPTURE_PATHS[name]
                paths[name] = what
                tolerant = tolerant or differs
            length += times * _reduction_length(eqn)
        ties = near_ties(jaxpr) if tolerant and jaxpr is not None else ()
        return cls(paths, tolerant, max(1, length), ties)

    def may_tie(self, j: int) -> bool:
        """Whether integer or boolean output ``j`` may differ at a near tie."""
        return j < len(self.ties) and self.ties[j]

    def tolerance(self, dtype) -> float:
        """The largest difference allowed, relative to an output's scale, for ``dtype``
        (bfloat16 included: :func:`plax.dtypes.finfo`)."""
        if not self.tolerant:
            return 0.0
        return min(MAX_TOLERANCE, ULPS_PER_TERM * float(dtypes.finfo(dtype).eps) * self.length)

    def describe(self) -> str:
        """``bits`` or ``within <tol> (float32)``-style words for ``as_text()``."""
        if not self.tolerant:
            return "bit for bit"
        return (f"within {ULPS_PER_TERM} ulps x reduction length {self.length} of each output's "
                f"scale (at most {MAX_TOLERANCE:g})")


def compare(replayed: Sequence[np.ndarray], plain: Sequence[np.ndarray], rule: Rule) -> str | None:
    """The first difference between a launch's outputs and the plain run's, or ``None``.

    Args:
      replayed: the launch's outputs, on the host (:func:`to_host`).
      plain: the plain run's, likewise.
      rule: the program's :class:`Rule`.

    Returns:
      ``None`` when every output agrees; else one line naming the output, its dtype and shape,
      and the largest difference against the one allowed.

    Example:
      >>> compare([np.ones(3)], [np.ones(3)], Rule({}, False, 1)) is None
      True
    """
    if len(replayed) != len(plain):
        return f"{len(replayed)} outputs against {len(plain)}"
    for j, (r, p) in enumerate(zip(replayed, plain)):
        what = f"output {j} ({p.dtype}{list(p.shape)})"
        if r.shape != p.shape or r.dtype != p.dtype:
            return f"{what}: the replay gave {r.dtype}{list(r.shape)}"
        problem = _difference(np.asarray(r), np.asarray(p), rule, rule.may_tie(j))
        if problem:
            return f"{what}: {problem}"
    return None


def _difference(r: np.ndarray, p: np.ndarray, rule: Rule, may_tie: bool) -> str | None:
    """How ``r`` differs from ``p`` beyond the rule, or ``None`` (``may_tie``: an integer or
    boolean output a near tie could decide)."""
    if r.size == 0:
        return None
    dtype = p.real.dtype   # (the tolerance's: a complex output's part, bfloat16 itself)
    if dtype == dtypes.bfloat16:   # (compared as its exact float32 widening)
        r, p = r.astype(np.float32), p.astype(np.float32)
    kind = p.dtype.kind
    if kind not in "fc":   # integers, booleans (and anything else): equal elements
        differ = int(np.count_nonzero(r != p))
        allowed = max(1, p.size // INTEGER_FLIPS) if may_tie else 0
        if differ > allowed:
            flat = np.flatnonzero(r != p)[0]
            return (f"{differ} of {p.size} elements differ (allowed {allowed}; first at flat "
                    f"index {flat}: {r.flat[flat]!r} against {p.flat[flat]!r})")
        return None
    r_nan, p_nan = np.isnan(r), np.isnan(p)
    finite = np.isfinite(p) & np.isfinite(r)
    if not np.array_equal(r_nan, p_nan):
        return (f"NaN in {int(np.count_nonzero(r_nan))} elements against "
                f"{int(np.count_nonzero(p_nan))}; {_largest(r, p, finite)}")
    if not np.array_equal(r[~finite & ~p_nan], p[~finite & ~p_nan]):
        return f"infinities differ; {_largest(r, p, finite)}"
    if not rule.tolerant:   # (complex: both parts' bits; views of one itemsize, any shape)
        same = _bits(r.real) == _bits(p.real)
        if kind == "c":
            same &= _bits(r.imag) == _bits(p.imag)
        if (same | r_nan).all():
            return None
    diff = np.abs(r[finite].astype(np.complex128 if kind == "c" else np.float64)
                  - p[finite].astype(np.complex128 if kind == "c" else np.float64))
    largest = float(diff.max()) if diff.size else 0.0
    scale = max(float(np.abs(p[finite]).max()) if diff.size else 0.0,
                float(np.abs(r[finite]).max()) if diff.size else 0.0)
    allowed = rule.tolerance(dtype) * scale
    if largest > allowed or not rule.tolerant:
        return (f"largest difference {largest:.6g} (allowed {allowed:.3g}: "
                f"{'bit for bit' if not rule.tolerant else f'output scale {scale:.3g}'})")
    return None


def _bits(x: np.ndarray) -> np.ndarray:
    """The bit patterns of a real float array (a view as the unsigned type of its size)."""
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _largest(r: np.ndarray, p: np.ndarray, finite: np.ndarray) -> str:
    """The largest difference where both are finite, in words."""
    if not finite.any():
        return "largest difference: none measurable (no element is finite in both)"
    wide = np.complex128 if p.dtype.kind == "c" else np.float64
    return (f"largest difference where both are finite: "
            f"{float(np.abs(r[finite].astype(wide) - p[finite].astype(wide)).max()):.6g}")


# ---------------------------------------------------------------- held results, on the device

#: the CuPy kernels one held result's comparison issues (``!=``, ``any``, ``sum``, ``argmax``),
#: counted as the check's launches (and one ``stack`` of every result's two integers)
_COMPARE_KERNELS = 4


def held_snapshot(buffer: Any, on_device: bool = True) -> Any:
    """A copy of a held result's bits taken before a capture, for :func:`held_changes`: on the
    device (one device-to-device copy, counted as a launch: ``verify_launches`` under the
    check's route, :data:`plax_cupy.runtime.CHECKING`), or on the host (:func:`to_host`) where
    the device has no room for it, or where ``on_device`` is false (the caller found the
    snapshots of one capture too large beside it: :func:`snapshot_room`); a buffer not on the
    device, as NumPy sees it.

    Example:
      >>> before = held_snapshot(result)   # doctest: +SKIP
      >>> held_changes([(result, before)])   # doctest: +SKIP
      [None]
    """
    import cupy
    from plax_cupy import runtime
    raw = getattr(buffer, "bits", buffer)
    if not isinstance(raw, cupy.ndarray):
        return np.array(buffer, copy=True)
    if not on_device:
        return to_host(raw)
    try:
        copy = raw.copy()   # (C order, whatever the held view's strides)
    except cupy.cuda.memory.OutOfMemoryError:   # (the check must not fail the call)
        cupy.get_default_memory_pool().free_all_blocks()
        return to_host(raw)
    runtime.note_launch()
    return copy


def snapshot_room() -> int:
    """Device bytes the held-result snapshots of one capture may take: half of what the device
    and the memory pool could still hand out (within the pool's limit, where plax set one), so
    that the capture and the check's plain run keep the other half; past it the snapshots are
    taken on the host (:func:`held_snapshot`), which costs time, not a failed capture.

    Example:
      >>> sum(r.nbytes for r in held) <= snapshot_room()   # doctest: +SKIP
      True
    """
    import cupy
    pool = cupy.get_default_memory_pool()
    free, _total = cupy.cuda.runtime.memGetInfo()
    room = free + pool.free_bytes()
    limit = pool.get_limit()
    if limit:
        room = min(room, max(limit - pool.used_bytes(), 0))
    return room // 2


def held_changes(pairs: Sequence[tuple]) -> list:
    """Which held results changed since their :func:`held_snapshot`, compared bit for bit on
    the device: each element's bytes as unsigned words (NaN payloads, -0.0 and padding by their
    bits), so that only two integers per result come to the host, in one read for them all
    (``verify_reads``), whatever the results' size.

    Args:
      pairs: ``(buffer, snapshot)`` per held result, its snapshot :func:`held_snapshot`'s.

    Returns:
      Per pair, ``None`` where the bits are as they were, else ``(how many elements differ,
      the flat index (C order) of the first)``.

    Example:
      >>> held_changes([(result, before)])   # doctest: +SKIP
      [(3, 0)]
    """
    import cupy
    from plax_cupy import runtime
    found: list = [None] * len(pairs)
    on_device, summaries = [], []
    for k, (buffer, before) in enumerate(pairs):
        raw = getattr(buffer, "bits", buffer)
        if not isinstance(before, cupy.ndarray):   # (a host snapshot: compared on the host)
            now = to_host(raw) if isinstance(raw, cupy.ndarray) else np.asarray(raw)
            found[k] = _host_change(now, before)
        elif raw.size:
            on_device.append(k)
    try:
        for k in on_device:
            summaries += _device_change(getattr(pairs[k][0], "bits", pairs[k][0]), pairs[k][1])
        if summaries:
            stacked = cupy.stack(summaries)
            runtime.note_launch()
            read = to_host(stacked).reshape(-1, 2)   # (one read: two integers per result)
    except cupy.cuda.memory.OutOfMemoryError:   # (the comparison's temporaries: on the host)
        summaries = stacked = None
        cupy.get_default_memory_pool().free_all_blocks()
        for k in on_device:
            buffer, before = pairs[k]
            found[k] = _host_change(to_host(getattr(buffer, "bits", buffer)), to_host(before))
        return found
    if summaries:
        for k, (count, first) in zip(on_device, read.tolist()):
            found[k] = (int(count), int(first)) if count else None
    return found


def _words(x: Any, itemsize: int) -> Any:
    """A C-contiguous array's elements as rows of unsigned words (the widest that divide the
    item size), one row per element."""
    word = max(w for w in (8, 4, 2, 1) if itemsize % w == 0)
    return x.reshape(-1).view(np.dtype(f"u{word}")).reshape(x.size, itemsize // word)


def _device_change(raw: Any, before: Any) -> tuple:
    """``(elements differing, first differing flat index)`` of ``raw`` against ``before``
    (its C-ordered device copy), two 0-d int64 device arrays."""
    import cupy
    from plax_cupy import runtime
    now = cupy.ascontiguousarray(raw)   # (a strided view's elements in C order: a copy)
    runtime.note_launch(_COMPARE_KERNELS + (now is not raw))
    itemsize = raw.dtype.itemsize
    differs = (_words(now, itemsize) != _words(before, itemsize)).any(axis=1)
    return differs.sum(dtype=np.int64), differs.argmax().astype(np.int64, copy=False)


def _host_change(now: np.ndarray, before: np.ndarray):
    """:func:`held_changes`' answer for a snapshot kept on the host."""
    if not now.size:
        return None
    differs = (_words(np.ascontiguousarray(now), now.dtype.itemsize)
               != _words(np.ascontiguousarray(before), now.dtype.itemsize)).any(axis=1)
    count = int(np.count_nonzero(differs))
    return (count, int(np.argmax(differs))) if count else None


def to_host(buffer: Any) -> np.ndarray:
    """A program output on the host for :func:`compare`: a CuPy array's copy (counted in
    ``plax_cupy.counters().verify_reads``), a bfloat16 buffer's bits as bfloat16, anything
    else as NumPy sees it."""
    import cupy
    from plax_cupy import runtime
    raw = getattr(buffer, "bits", buffer)
    if not isinstance(raw, cupy.ndarray):
        return np.asarray(buffer)
    host = raw.get()
    runtime.THIS_THREAD.counts[runtime.VERIFY_READS] += 1
    return host if raw is buffer else host.view(dtypes.bfloat16)   # (a Bf16Buffer's bits)


__all__ = ["CAPTURE_PATHS", "Rule", "compare", "held_changes", "held_snapshot", "near_ties",
           "snapshot_room", "to_host"]

"""What the CuPy backend asks of the machine: is there CuPy, a driver and a GPU; memory limits;
out-of-memory errors that name the device; the counters of host traffic and kernel launches
(:func:`counters`, :class:`count`: each thread counts in a list of its own, :data:`THIS_THREAD`,
summed when read).

:func:`probe` never raises: it returns the GPUs it found (possibly none) and, when none, one
line saying why (CuPy missing, no driver, no device). The plugin hook reports the backend only
where it found a GPU, so a machine with CuPy but without a GPU sees nothing change.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
from dataclasses import dataclass
from typing import Iterator, NamedTuple


@dataclass(frozen=True)
class GpuInfo:
    """What :func:`probe` learned about one GPU."""

    id: int
    name: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    total_memory: int


_probed: list = []


def probe() -> tuple[list[GpuInfo], str]:
    """The CUDA GPUs CuPy can use, and why there are none (``""`` when there are some).

    Cached for the process: a driver does not appear while it runs.
    """
    if _probed:
        return _probed[0]
    result = _probe()
    _probed.append(result)
    return result


def _probe() -> tuple[list[GpuInfo], str]:
    from plax.config import env_flag
    if env_flag("PLAX_CUPY_DISABLE", False):   # (0/false/no/off: not disabled)
        return [], "disabled by PLAX_CUPY_DISABLE"
    if importlib.util.find_spec("cupy") is None:
        return [], "CuPy is not installed (pip install 'plax[cuda12]')"
    if "cupy" not in sys.modules and not _driver_loadable():
        # importing CuPy costs ~0.15 s; without a driver it could only say the same
        return [], "no CUDA GPU present (no CUDA driver: libcuda cannot be loaded)"
    try:
        import cupy
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # CUDARuntimeError without a driver, ImportError of a bad wheel
        text = str(err).splitlines()[0] if str(err) else type(err).__name__
        return [], f"no CUDA GPU present ({type(err).__name__}: {text})"
    if count == 0:
        return [], "no CUDA GPU present (the driver reports 0 devices)"
    gpus = []
    for i in range(count):
        p = cupy.cuda.runtime.getDeviceProperties(i)
        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        gpus.append(GpuInfo(i, name, (int(p["major"]), int(p["minor"])),
                            int(p["multiProcessorCount"]), int(p["totalGlobalMem"])))
    return gpus, ""


def _driver_loadable() -> bool:
    """Whether the CUDA driver library loads (cheap: no CuPy import, no device query)."""
    import ctypes
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll", "libcuda.dylib"):
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def memory_fraction() -> float | None:
    """``PLAX_GPU_MEMORY_FRACTION`` as a float in (0, 1], or None where unset.

    Raises:
      ValueError: a value that is not a number in (0, 1], naming the variable and the value.
    """
    from plax.config import env_number
    return env_number("PLAX_GPU_MEMORY_FRACTION", None, kind=float, above=0, maximum=1)


class GpuOutOfMemoryError(MemoryError):
    """A GPU allocation failed: names the device and the bytes asked for. The memory pool
    stays usable (cached blocks were released and the allocation retried once first)."""

    def __init__(self, device, nbytes: int | None, detail: str = ""):
        asked = f"{nbytes} bytes" if nbytes is not None else "memory"
        limit = ""
        frac = os.environ.get("PLAX_GPU_MEMORY_FRACTION")
        if frac:
            limit = f" (PLAX_GPU_MEMORY_FRACTION={frac} limits the pool)"
        super().__init__(f"Out of memory on {device} ({getattr(device, 'device_kind', '')}): "
                         f"could not allocate {asked}{limit}. {detail}".strip())
        self.device, self.nbytes = device, nbytes


def oom_bytes(err) -> int | None:
    """The size a CuPy ``OutOfMemoryError`` asked for (its first argument), if known."""
    args = getattr(err, "args", ())
    if args and isinstance(args[0], int):
        return args[0]
    import re
    m = re.search(r"allocating ([0-9,]+) bytes", str(err))
    return int(m.group(1).replace(",", "")) if m else None


# ---------------------------------------------------------------- host traffic counters

class Counters(NamedTuple):
    """Host traffic and kernel launches of the CuPy backend (a snapshot, or a block's deltas).

    Attributes:
      host_to_device: host-to-device copies (``device_put``, constants of compiled programs,
        results of a host fallback).
      device_to_host: device-to-host copies (reading results, host callbacks' operands,
        ``cond``/``while`` decisions, operands of a host fallback).
      launches: the device operations plax dispatches, counted where it dispatches them, the
        same on a real GPU and on tests/cupy's simulated one: each generated CUDA kernel
        (fused clusters, a reducing cluster's two, threefry, the kernel table's own); each
        kernel-table or plugin kernel call that launches no generated kernel and returns more
        than views of its operands, as one (whatever CuPy, cuBLAS, cuSOLVER or cuFFT kernels it
        issues inside: CuPy cannot report those); each copy plax makes itself (a strided
        operand made contiguous for a generated kernel, a ``scan``'s stacked ``ys``, an input
        copied into a CUDA graph's plan); and each CUDA graph launch, as one however many
        kernels it replays (:mod:`plax_cupy.graphs`). Allocations are not launches.
      host_fallbacks: primitives run on the host reference kernels for want of a GPU path
        (each also counts its copies above); zero on a complete backend.
      device_copies: device-to-device copies plax makes of whole buffers, each also a launch
        above: an input copied into a CUDA graph plan's static buffer (issued from Python or
        replayed in a graph of copies), a strided operand made contiguous for a generated
        kernel, a move between two GPUs. Views, and the copies CuPy or cuBLAS make inside a
        kernel-table call, are not counted.
      verify_launches: what checking a new CUDA graph plan against a plain run launched
        (:mod:`plax_cupy.graph_check`, once per capture, ``PLAX_CUDA_GRAPHS_VERIFY``): the
        plain run's launches and copies and the graph's second launch (and its first, when the
        check ran out of memory and the call ran plainly), and the device copies and comparisons
        of the earlier results the caller holds, counted here rather than in
        ``launches`` and ``device_copies`` so that those stay the program's own work. Only the
        checking thread's work counts here (:func:`counted_as`): another thread's launches
        meanwhile (on another GPU) count as usual.
      verify_reads: the device-to-host copies of that check (each output of the graph's two
        launches and of the plain run; one of the held results' comparison, two integers per
        held result), counted here rather than in ``device_to_host``.
    """

    host_to_device: int
    device_to_host: int
    launches: int
    host_fallbacks: int
    device_copies: int = 0
    verify_launches: int = 0
    verify_reads: int = 0


_KINDS = len(Counters._fields)   # (one count per field, in the fields' order)
H2D, D2H, LAUNCHES, FALLBACKS, D2D, VERIFY_LAUNCHES, VERIFY_READS = range(_KINDS)

#: how a thread's counts go while it checks a new CUDA graph plan against a plain run
#: (:func:`counted_as`, :mod:`plax_cupy.graph_check`): its launches (copies included) as
#: ``verify_launches``, its reads to the host as ``verify_reads``, its device copies nowhere else
CHECKING = {LAUNCHES: VERIFY_LAUNCHES, D2D: None, D2H: VERIFY_READS}

#: how a thread's counts go while it captures a CUDA graph: the kernels and copies it issues are
#: recorded, not run (the graph's launch is the one counted for all it replays)
CAPTURING = {LAUNCHES: None, D2D: None}

# Each thread counts in a list of its own (``THIS_THREAD.own``), so that an increment is a
# plain list's, never contended, and what one thread did is known without asking the others:
# whether a kernel-table call launched a generated kernel (``CupyBackend._wrap``), what a
# program's first call did (``count(this_thread=True)``). The process's totals are the sum of
# the live threads' lists and of the retired ones' (folded in when a thread ends).
_tallies_lock = threading.RLock()
_LIVE: dict = {}                       # id of a thread's _Retiring -> (its own counts, fallbacks)
_RETIRED: tuple = ([0] * _KINDS, {})   # the counts and fallbacks of threads that have ended


class _Retiring:
    """Held by one thread's :data:`THIS_THREAD` state alone: dropped when the thread ends,
    which folds the thread's counts into the retired ones (the totals stay whole while the
    registry of live threads stays as small as the threads that count)."""

    __slots__ = ()

    def __del__(self) -> None:
        try:
            with _tallies_lock:
                entry = _LIVE.pop(id(self), None)
                if entry is not None:
                    _add(_RETIRED, entry)
        except (AttributeError, TypeError):   # (at interpreter exit: the module's names gone)
            pass


def _add(into: tuple, tally: tuple) -> None:
    """Adds ``tally`` (``(counts, {primitive: fallbacks})``) into ``into``."""
    counts, fallbacks = into
    for i, n in enumerate(tally[0]):
        counts[i] += n
    for name, n in list(tally[1].items()):
        fallbacks[name] = fallbacks.get(name, 0) + n


class _Routed:
    """A thread's :attr:`_Thread.counts` while it routes them (:func:`counted_as`): a read
    gives what the thread issued (``issued``: unrouted, so that a comparison before and after
    a call sees the call's own work whatever the route), a write lands in the thread's own
    counts where ``route`` says."""

    __slots__ = ("own", "route", "issued")

    def __init__(self, own: list, route: dict, issued: list):
        self.own, self.route, self.issued = own, route, issued

    def __getitem__(self, i: int) -> int:
        return self.issued[i]

    def __setitem__(self, i: int, value: int) -> None:
        n = value - self.issued[i]   # (`counts[i] += n` sets counts[i] + n: n moves to j)
        self.issued[i] = value
        j = self.route.get(i, i)
        if j is not None:
            self.own[j] += n

    def __len__(self) -> int:
        return _KINDS


class _Thread(threading.local):
    """One thread's counting state (made on the thread's first count).

    Attributes:
      own: the thread's own counts (indexed by :data:`H2D`...), a plain list.
      counts: where its increments go: ``own``, or a :class:`_Routed` of it within
        :func:`counted_as` (``runtime.THIS_THREAD.counts[runtime.LAUNCHES] += 1``).
      fallbacks: ``{primitive: host fallbacks}`` of the thread.
    """

    def __init__(self):
        self.own = self.counts = [0] * _KINDS
        self.fallbacks: dict = {}
        self._retiring = _Retiring()
        with _tallies_lock:
            _LIVE[id(self._retiring)] = (self.own, self.fallbacks)


#: this thread's counts: ``runtime.THIS_THREAD.counts[runtime.H2D] += 1`` counts a copy (read
#: ``runtime.THIS_THREAD.counts`` each time, never keep it past the operation: a route swaps it)
THIS_THREAD = _Thread()


def _tally() -> tuple:
    """The process's ``(counts, {primitive: fallbacks})`` so far: every thread's, ended ones'
    included."""
    total: tuple = ([0] * _KINDS, {})
    with _tallies_lock:
        _add(total, _RETIRED)
        for entry in list(_LIVE.values()):
            _add(total, entry)
    return total


@contextlib.contextmanager
def counted_as(route: dict) -> Iterator[None]:
    """Within the block, this thread's counts go where ``route`` says (:data:`CHECKING`,
    :data:`CAPTURING`); other threads' count as usual (their increments untouched), and so do
    this thread's after the block (a block nested in another uses its own route, then the outer
    one's again).

    Args:
      route: ``{counter index: the index it counts in instead, or None for nowhere}``.

    Example:
      >>> with counted_as(CHECKING):   # doctest: +SKIP
      ...     reference = program(*buffers)   # its launches count as verify_launches
    """
    state = THIS_THREAD
    outer = state.counts
    issued = outer.issued if isinstance(outer, _Routed) else list(outer)
    state.counts = _Routed(state.own, route, issued)
    try:
        yield
    finally:
        state.counts = outer


def note_launch(n: int = 1) -> None:
    """Counts ``n`` kernel launches."""
    THIS_THREAD.counts[LAUNCHES] += n


def note_copy(n: int = 1) -> None:
    """Counts ``n`` device-to-device copies (their launches are counted by the caller)."""
    THIS_THREAD.counts[D2D] += n


def move_counts(source: int, target: int, n: int) -> None:
    """Moves ``n`` counts from total ``source`` to ``target`` (indices of :class:`Counters`):
    work counted before it was known to be ``target``'s (a graph's launch that a check, running
    out of memory, made its own: :mod:`plax_cupy.graphs`). Routed as any count of this thread.

    Example:
      >>> move_counts(LAUNCHES, VERIFY_LAUNCHES, 1)   # doctest: +SKIP
    """
    counts = THIS_THREAD.counts
    counts[source] -= n
    counts[target] += n


def note_fallback(primitive_name: str) -> None:
    """Counts one host fallback of ``primitive_name``."""
    state = THIS_THREAD
    state.counts[FALLBACKS] += 1
    state.fallbacks[primitive_name] = state.fallbacks.get(primitive_name, 0) + 1


def counters() -> Counters:
    """The CuPy backend's host copies and kernel launches so far in this process.

    Returns:
      a :class:`Counters` snapshot (all threads and devices together).

    Example:
      >>> import plax_cupy
      >>> plax_cupy.counters()   # doctest: +SKIP
      Counters(host_to_device=2, device_to_host=1, launches=5, host_fallbacks=0, device_copies=0,
               verify_launches=0, verify_reads=0)
    """
    return Counters(*_tally()[0])


def fallback_primitives() -> dict:
    """``{primitive name: count}`` of the host fallbacks so far (primitives without a GPU
    path), for tests and benchmarks that say which ones left the device."""
    return _tally()[1]


class count:
    """Context manager: the host copies and launches made inside the block.

    The object's attributes (those of :class:`Counters`) are the deltas since the block began,
    frozen when it ends; ``fallbacks`` is ``{primitive: count}`` of its host fallbacks.

    Args:
      this_thread: count only what the thread that enters the block does in it (all threads'
        work by default). Either costs nothing while the block is open: each thread counts in
        its own tallies (:data:`THIS_THREAD`), which the block reads when it begins and ends.

    Example:
      >>> with plax_cupy.count() as c:   # doctest: +SKIP
      ...     y = f(x).block_until_ready()
      >>> c.launches, c.device_to_host, c.host_fallbacks, c.device_copies
      (1, 0, 0, 0)
    """

    def __init__(self, this_thread: bool = False):
        self._this_thread = this_thread
        self._own: tuple | None = None   # (the entering thread's (counts, fallbacks), kept)
        self._start = self._end = None
        self._fb_start: dict = {}
        self._fb_end: dict | None = None

    def __enter__(self) -> "count":
        state = THIS_THREAD
        self._own = (state.own, state.fallbacks) if self._this_thread else None
        self._end = self._fb_end = None
        self._start, self._fb_start = self._read()
        return self

    def __exit__(self, *exc) -> bool:
        self._end, self._fb_end = self._read()
        return False

    def _read(self) -> tuple:
        """``(counts, fallbacks)`` now: the entering thread's own, or the process's."""
        if self._own is None:
            return _tally()
        # (the entering thread's lists themselves: THIS_THREAD read from another thread would
        # give that thread's)
        own, fallbacks = self._own
        return list(own), dict(fallbacks)

    def _delta(self, i: int) -> int:
        if self._start is None:
            raise RuntimeError("plax_cupy.count(): use it as `with plax_cupy.count() as c:`")
        return (self._end or self._read()[0])[i] - self._start[i]

    host_to_device = property(lambda self: self._delta(H2D))
    device_to_host = property(lambda self: self._delta(D2H))
    launches = property(lambda self: self._delta(LAUNCHES))
    host_fallbacks = property(lambda self: self._delta(FALLBACKS))
    device_copies = property(lambda self: self._delta(D2D))
    verify_launches = property(lambda self: self._delta(VERIFY_LAUNCHES))
    verify_reads = property(lambda self: self._delta(VERIFY_READS))

    @property
    def fallbacks(self) -> dict:
        end = self._fb_end if self._fb_end is not None else self._read()[1]
        return {k: v - self._fb_start.get(k, 0) for k, v in end.items() if v != self._fb_start.get(k, 0)}

    def snapshot(self) -> Counters:
        """The deltas as a :class:`Counters`."""
        return Counters(*(self._delta(i) for i in range(_KINDS)))

    def __repr__(self) -> str:
        return f"count({', '.join(f'{k}={v}' for k, v in self.snapshot()._asdict().items())})"

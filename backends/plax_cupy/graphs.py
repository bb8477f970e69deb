"""Compiled programs replayed as CUDA graphs, on buffer plans that read their inputs in place
and hand out their outputs.

A small program is bound by the launches Python issues, one per kernel. :class:`GraphedProgram`
wraps a compiled program (``fn(*buffers) -> list``) so that, where the program allows it:

* the first call runs plainly (its kernels were compiled with the program);
* the second call *captures* the program on the device's stream (``Stream.begin_capture`` /
  ``end_capture`` -> ``cupy.cuda.Graph``) on a **plan**, then launches the graph;
* a later call replays a plan it fits (one launch, whatever the number of kernels, loops with
  a static trip count included) and **hands the plan's own output buffers to the caller**,
  with no copy out.

A CUDA graph bakes its pointers in, and CuPy (14) exposes no update of an instantiated graph's
kernel arguments (no ``graphExecUpdate``/``graphExecKernelNodeSetParams`` in
``cupy.cuda.runtime``), so plans are keyed by pointers. Each input slot of a plan is one of two
kinds:

* **bound**: the graph reads the caller's buffer in place, and the plan fits only a call whose
  buffer in that slot has the same device pointer, shape, strides and dtype. A slot is bound
  when its pointer recurs: the same Array passed again, a buffer of this program's own plans
  (a training loop feeding each step's results to the next), or a pointer seen in that slot in
  one of the last two calls -- CuPy's memory pool hands a freed block back to the next
  allocation of its size, so ``f(params, device_put(batch))`` in a loop passes the batch at the
  same address each call. The plan holds no reference to a bound buffer (that would pin the
  block and stop the pool from handing it back); it needs none, since it reads that pointer
  only when a caller passes a live array there.
* **static**: the plan owns a buffer the caller's input is copied into (a device-to-device
  copy, counted in ``device_copies``) when it changed -- the pointer had not recurred when the
  plan was captured (a fresh array each call, kept by the caller). A copy into a static slot
  whose pointer has since started recurring gets a new plan (or, with no room, this one
  captured again with the slot bound, keeping its other static buffers).

A training loop ``params = step(params, x, y)`` needs no copy at all: the plan captured on the
first fed-back call writes its outputs into the static input buffers of the plan that produced
its inputs (a second capture steers those allocations there), so the two plans take turns, each
reading the other's outputs in place: **one launch a step**.

**Ownership.** A plan may replay only when nobody outside the program holds a buffer the replay
writes: its outputs and intermediates, and each static input it copies into (the caller may
still hold a result, a view of one, or a DLPack export of one). The rule is exact accounting
of references, not a snapshot per plan: the program keeps every buffer its plans write in one
registry with, for each, the reference counts of the buffer, its root array, its memory pointer
and its memory that the program's own structures account for. Each change of the plans (a
capture, an eviction) is bracketed by two measurements of those counts, taken under the
device's lock from the call itself (:meth:`GraphedProgram._snapshot`, then
:meth:`GraphedProgram._settle` once the frames that made the change are gone), and moves the
accounted counts by exactly the difference; a new plan's buffers, which nobody outside has seen,
are accounted at their counts then. So memory shared by two plans (a steered output) is
accounted once however many plans refer to it, and any count other than the accounted one is a
holder outside the program: the buffer is not free. Nor is any buffer on the same memory
(:meth:`GraphedProgram._free`): a result that is a view of a static input (a body returning
``c[0]`` of its carry) is registered apart from that input, and a caller holding the view moves
only the view's counts, since the plan's own reference to the view already holds the input;
every static buffer's memory counts as written, those a replaced plan's capture kept included.
Counts are only ever compared when taken
through :meth:`GraphedProgram._counts`, from the same frames. (A consumer of
``__cuda_array_interface__`` must keep the exporting object alive, as the protocol asks; a bare
integer pointer is not seen.)

A program keeps up to :data:`MAX_PLANS` plans, each holding the buffers its capture allocated.
When no plan fits and none may be captured, the call runs plainly (fresh buffers, one launch per
kernel): with every plan's results held by the caller, or when captures stop paying for
themselves (a plan nobody holds is evicted for a new capture only while captures stay under a
quarter of the replays past the first ``2 * MAX_PLANS``, see
:meth:`GraphedProgram._captures_pay`).

A program runs plainly for ever, with the reason in ``as_text()``, when a walk of its jaxpr
finds a host decision (``cond``, ``while``), a host callback, or a primitive whose GPU path
synchronises (see :data:`UNCAPTURABLE`); or when its first call copied anything between host
and device or fell back to the host (counted by :mod:`plax_cupy.runtime`), or launched one
kernel at most (nothing for a replay to save); or when ``PLAX_CUDA_GRAPHS=0``; or once a new
plan's launch differed from a plain run of the same call (below).

Matrix products are captured too, though CuPy's cuBLAS binding raises ``NotImplementedError``
on a capturing stream: while capturing, :mod:`plax_cupy.kernels_dot` makes them through
:mod:`plax_cupy.cublas_direct` (the loaded ``libcublas`` called directly, the same call). ``fft`` is
captured on plans the program owns (:mod:`plax_cupy.fft_plans`, made on its first call), not
on CuPy's cached ones, which any later transform may destroy while a graph reads them;
``cholesky``, ``triangular_solve``, ``lu``, ``qr``, ``eigh`` and ``svd`` through the direct
cuSOLVER and cuBLAS bindings (:mod:`plax_cupy.kernels_linalg`). A capture that fails all the
same (a routine the loaded library lacks, so CuPy's binding is called and refuses the capturing
stream; a synchronisation) leaves the program running plainly, with the exception in its reason.

**Each new plan is checked** (:mod:`plax_cupy.graph_check`,
:meth:`GraphedProgram._checked_launches`): a capture that succeeds may still replay wrongly on a
GPU (a host value or workspace pointer baked in, a library's allocation freed after the
capture, scratch a launch leaves dirty), and would return wrong numbers silently. So the call
that captures a plan launches it, runs the program plainly on the same inputs (fresh buffers),
launches it again, and compares both launches' outputs with the plain run's: bit for bit, or
within a tolerance for a program whose capture calls a library through another entry point than
its plain run. Equal: the plan's outputs are returned and the plan replays unchecked from then
on. Different: a :class:`ReplayMismatchWarning`, the plain run's results returned, every plan
dropped, and the program runs plainly for good with the difference in its reason. Every capture
is checked (the plans' own machinery has not run on a GPU either); the cost, one plain run, a
launch and three reads of each output per capture, is paid off the replay path and counted
apart (``verify_launches``, ``verify_reads`` of :class:`plax_cupy.runtime.Counters`).
``PLAX_CUDA_GRAPHS_VERIFY=0`` turns it off.
The comparison sees only the call's own outputs, so the check also copies every registered
buffer someone outside holds (an earlier result, a view of one) on the device before the capture
and compares it with that copy after the launches, on the device too
(:meth:`GraphedProgram._held_kept`, :func:`graph_check.held_changes`: one copy and a few small
kernels per held buffer, one read of two integers per held buffer to the host, whatever their
size): one the capture or launches wrote is written back, with the same warning and plain runs
for good.

:meth:`GraphedProgram.describe` (the ``# CUDA graph:`` line of ``as_text()``) also counts the
calls captured, replayed and run plainly, says why the last plain one was, and how many plans
were verified.

Threads: captures and replays on one device are serialised by a per-device lock
(:func:`device_lock`), so a plan is never shared by two calls at once and no other graphed
call's work lands in a capture; the backend's reads to the host and ``block_until_ready`` take
it too, since CUDA refuses a synchronisation of a capturing stream (and drops the capture).
"""
from __future__ import annotations

import sys
import threading
import warnings
from typing import Any, Callable, Sequence

import cupy

from plax.config import env_flag
from plax_cupy import graph_check, runtime
from plax_cupy.runtime import GpuOutOfMemoryError, oom_bytes

#: primitive name -> why a program holding it cannot be captured
UNCAPTURABLE = {
    "cond": "cond decides its branch on the host",
    "while": "while decides each iteration on the host",
    "pure_callback": "a host callback copies to the host",
    "io_callback": "a host callback copies to the host",
    "debug_callback": "a host callback copies to the host",
    "eig": "the general eigensolver synchronises with the host",
    # (fft is captured: a compiled program owns its cuFFT plans, plax_cupy.fft_plans)
}

_device_locks: dict = {}
_locks_lock = threading.Lock()


def graphs_enabled() -> bool:
    """Whether compiled programs may replay as CUDA graphs (``PLAX_CUDA_GRAPHS``, default on)."""
    return env_flag("PLAX_CUDA_GRAPHS", True)


def verify_enabled() -> bool:
    """Whether each new plan's first two launches are checked against a plain run of the same
    call (``PLAX_CUDA_GRAPHS_VERIFY``, default on; see :mod:`plax_cupy.graph_check`)."""
    return env_flag("PLAX_CUDA_GRAPHS_VERIFY", True)


#: how many programs of this process gave up their graphs after a wrong launch (a list, so
#: that a test reads the running count)
MISMATCHES = [0]


class ReplayMismatchWarning(RuntimeWarning):
    """A captured CUDA graph's launch gave other results than a plain run of the same call:
    the program returned the plain run's results and runs plainly from then on."""


def _equations(jaxpr, times: int = 1):
    """Every equation of ``jaxpr`` and of its sub-jaxprs (``jit``, ``scan`` bodies, custom
    rules...), each with how many times one call runs it (a ``scan`` body: its length)."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    for eqn in getattr(inner, "eqns", ()):
        yield eqn, times
        inner_times = times * int(eqn.params.get("length", 1) or 1) \
            if eqn.primitive.name == "scan" else times
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None), "eqns"):
                    yield from _equations(sub, inner_times)


def capture_blocker(jaxpr) -> str | None:
    """Why ``jaxpr`` cannot be captured as a CUDA graph, or ``None`` if it can.

    Args:
      jaxpr: a ``Jaxpr`` or ``ClosedJaxpr``; sub-jaxprs (``jit``, ``scan``, custom rules...)
        are walked too.

    Returns:
      a sentence naming the first primitive that needs the host, or ``None``.

    Example:
      >>> capture_blocker(plax.make_jaxpr(lambda x: x * 2)(1.0))   # doctest: +SKIP
    """
    for eqn, _ in _equations(jaxpr):
        name = eqn.primitive.name
        if name in UNCAPTURABLE:
            return f"{name}: {UNCAPTURABLE[name]}"
    return None


def device_lock(device_id: int) -> threading.RLock:
    """The lock that serialises captures and replays on GPU ``device_id``; whoever waits for
    the device's stream from the host (a read to the host, ``block_until_ready``) holds it too,
    since CUDA refuses a synchronisation of a stream while it captures, and invalidates the
    capture (another thread's, which would then run plainly for good).

    Example:
      >>> with device_lock(0):                   # doctest: +SKIP
      ...     stream.synchronize()
    """
    with _locks_lock:
        lock = _device_locks.get(device_id)
        if lock is None:
            lock = _device_locks[device_id] = threading.RLock()
        return lock


#: how many plans (captured graphs with their buffers) a program keeps at most
MAX_PLANS = 3
#: how many recent calls' input pointers count as recurring (see the module)
RECENT_CALLS = 2

#: the launches a plan's replay counts when no input is copied in: the graph's
_UNCOPIED_REPLAY = 1


def _raw(buffer):
    """The CuPy array holding ``buffer``'s memory (a bfloat16 buffer's bits), or ``None``."""
    raw = getattr(buffer, "bits", buffer)
    return raw if isinstance(raw, cupy.ndarray) else None


def _rewrap(like, raw):
    """``raw`` in the wrapper ``like`` came in (a bfloat16 buffer stays one)."""
    return raw if isinstance(like, cupy.ndarray) else type(like)(raw)


def _memory(raw):
    """The object owning ``raw``'s device memory, shared by every view of it (CuPy's
    ``MemoryPointer.mem``)."""
    data = raw.data
    return getattr(data, "mem", data)


def _key(buffer) -> tuple:
    """What a graph's captured pointer stands for: device pointer, shape, strides, dtype."""
    raw = _raw(buffer)
    return (raw.data.ptr, raw.shape, raw.strides, raw.dtype.str)


def _holders(buffer) -> tuple:
    """Reference counts of ``buffer``, and for its CuPy array of the array, its root (the array
    a view is of), its memory pointer and its memory: whoever holds the buffer, a view of it or
    its memory raises one of them."""
    counts = [sys.getrefcount(buffer)]
    raw = _raw(buffer)
    if raw is not None:
        data = raw.data
        for obj in (raw, getattr(raw, "base", None), data, getattr(data, "mem", None)):
            if obj is not None:  # (None's own count moves with everything else)
                counts.append(sys.getrefcount(obj))
    return tuple(counts)


def _sharing(registry: dict) -> dict:
    """For each id of ``registry`` (id -> buffer), the ids of the buffers on the same memory
    (itself included). Ids only, and no buffer left in a caller's frame: a reference kept
    would move the counts the program accounts for."""
    by_memory: dict = {}
    for i, buffer in registry.items():
        by_memory.setdefault(id(_memory(_raw(buffer))), []).append(i)
    return {i: tuple(group) for group in by_memory.values() for i in group}


class _Plan:
    """One captured graph and the buffers it owns.

    Attributes:
      graph: the captured ``cupy.cuda.Graph``.
      static: per input slot, the plan's own buffer the caller's input is copied into, or
        ``None`` for a bound slot (the graph reads the caller's buffer in place).
      keys: per input slot, :func:`_key` of the buffer the graph reads.
      outputs: the buffers a replay returns (``None`` where ``passthrough`` names the slot).
      passthrough: output index -> input slot, for an output that is a bound input itself.
      held: the memories the capture allocated (intermediates and outputs).
      written: the outputs a replay writes (in memory the capture allocated, a static input,
        or another plan's static input the outputs were steered into); not the outputs that
        are the program's constants.
    """

    def __init__(self, graph, static, keys, outputs, passthrough, held, written):
        self.graph, self.static, self.keys = graph, static, keys
        self.outputs, self.passthrough, self.held = outputs, passthrough, held
        self.written = written
        # (ids, so that checking them holds no reference that would change their counts)
        self.written_ids = [id(b) for b in written]
        self.static_ids = [None if b is None else id(b) for b in static]
        self.replays = 0
        self.copy_graphs: dict = {}   # input slots and source buffers -> graph of their copies

    @property
    def inputs(self) -> list:
        """The plan's static input buffers (``None`` for bound slots)."""
        return self.static

    def buffers(self) -> list:
        """Every buffer a replay may write: outputs, then static inputs."""
        return self.written + [b for b in self.static if b is not None]

    def graph_steps(self) -> list:
        """The captured operations, where the graph says (the simulated GPU's does)."""
        return list(getattr(self.graph, "steps", ()))

    def fit(self, buffers: Sequence[Any], keys: list) -> list | None:
        """The static slots a replay on ``buffers`` must copy into, or ``None`` when a bound
        slot's pointer differs."""
        copies = []
        for i, (static, key) in enumerate(zip(self.static, keys)):
            if static is None:
                if key != self.keys[i]:
                    return None
            elif _raw(buffers[i]) is not _raw(static):
                # (the plan remembers no caller buffer it copied from: a reference would pin
                # that block, and a pointer passed again is better read in place, bound)
                copies.append(i)
        return copies

    def replay(self, buffers: Sequence[Any], copies: list, stream, stable: dict) -> list:
        """Copies the changed static inputs in, launches the graph; returns the outputs.

        An input that is a buffer of one of the program's plans (``stable``: id -> buffer, all
        living as long as their plans) has a fixed address, so its copy is captured too: the
        copies from one set of such buffers are one graph launch."""
        from_plans = tuple(i for i in copies if stable.get(id(_raw(buffers[i]))) is _raw(buffers[i]))
        launches = _UNCOPIED_REPLAY
        for i in copies:
            if i in from_plans:
                continue
            cupy.copyto(_raw(self.static[i]), _raw(buffers[i]))
            launches += 1
        if from_plans:
            key = tuple((i, id(_raw(buffers[i]))) for i in from_plans)
            if key not in self.copy_graphs:
                self.copy_graphs[key] = self._capture_copies(buffers, from_plans, stream)
            copy_graph = self.copy_graphs[key]
            if copy_graph is None:  # (CUDA refused the capture: copied from Python)
                for i in from_plans:
                    cupy.copyto(_raw(self.static[i]), _raw(buffers[i]))
            else:
                copy_graph.launch(stream)
            launches += 1 if copy_graph is not None else len(from_plans)
        self.graph.launch(stream)
        runtime.note_launch(launches)
        runtime.note_copy(len(copies))
        self.replays += 1
        return [buffers[self.passthrough[j]] if j in self.passthrough else o
                for j, o in enumerate(self.outputs)]

    def _capture_copies(self, buffers, slots, stream):
        """A graph of the copies of ``buffers[i]`` into the static inputs, for ``i`` in
        ``slots`` (or ``None`` where CUDA refuses the capture)."""
        mode = getattr(cupy.cuda.runtime, "streamCaptureModeRelaxed", None)
        stream.begin_capture(*(() if mode is None else (mode,)))
        try:
            for i in slots:
                cupy.copyto(_raw(self.static[i]), _raw(buffers[i]))
        except Exception:  # noqa: BLE001 - fall back to copies issued from Python
            try:
                stream.end_capture()
            except Exception:  # noqa: BLE001 - (invalidated by what it refused)
                pass
            return None
        return stream.end_capture()


class _Capture:
    """What one stream capture of ``fn`` produced: the graph, the outputs, the allocations
    (in order, with their sizes)."""

    def __init__(self, fn: Callable, inputs: Sequence[Any], stream, steer: dict | None = None):
        pool = cupy.get_default_memory_pool()
        self.held: list = []
        self.sizes: list = []
        steer = steer or {}

        def allocate(nbytes):  # every allocation of the capture stays the plan's
            target = steer.get(len(self.held))
            if target is not None and target.nbytes == nbytes:
                memory = target.pointer   # another plan's static input: a steered output
            else:
                memory = pool.malloc(nbytes)
            self.held.append(memory)
            self.sizes.append(nbytes)
            return memory

        mode = getattr(cupy.cuda.runtime, "streamCaptureModeRelaxed", None)
        # (a captured kernel (or copy) is recorded, not run: the graph's launch is the one
        # launch counted for all it replays; this thread's alone, another's count meanwhile)
        with cupy.cuda.using_allocator(allocate), runtime.counted_as(runtime.CAPTURING):
            stream.begin_capture(*(() if mode is None else (mode,)))
            try:
                self.outputs = list(fn(*inputs))
            except BaseException:
                try:   # the capture ended; CUDA invalidated it if a call it refused caused this
                    stream.end_capture()   # (cudaErrorStreamCaptureInvalidated): the first
                except Exception:  # noqa: BLE001 - error says why, and is the one raised
                    pass
                raise
            else:
                self.graph = stream.end_capture()

    def allocation_of(self, buffer) -> int | None:
        """The index of the allocation ``buffer`` is the whole of, or ``None``."""
        raw = _raw(buffer)
        if raw is None:
            return None
        memory = _memory(raw)
        for k, held in enumerate(self.held):
            if getattr(held, "mem", held) is memory and raw.data.ptr == held.ptr \
                    and raw.nbytes == self.sizes[k]:
                return k
        return None


class _Target:
    """A steered allocation: the memory pointer of a static input buffer of another plan."""

    def __init__(self, buffer):
        raw = _raw(buffer)
        self.pointer, self.nbytes = raw.data, raw.nbytes


class GraphedProgram:
    """A compiled program that replays as a CUDA graph from its second call (see the module).

    Args:
      fn: the compiled program, ``fn(*buffers) -> list of buffers``, run inside the device's
        stream by the caller.
      jaxpr: the program's jaxpr (walked for what needs the host).
      backend: the CuPy backend (its device streams).
      device: the device the program runs on.

    Returns (when called): the program's outputs, equal to ``fn``'s. From the second call they
    are a plan's own buffers, which that plan rewrites only once the caller has let them go.
    """

    def __init__(self, fn: Callable, jaxpr, backend, device):
        self.fn, self.backend, self.device = fn, backend, device
        self.reason = ("disabled (PLAX_CUDA_GRAPHS=0)" if not graphs_enabled()
                       else capture_blocker(jaxpr))
        # (read at compile, as PLAX_CUDA_GRAPHS: how a new plan's launches are checked)
        self.check = graph_check.Rule.of(_equations(jaxpr), jaxpr) if verify_enabled() else None
        self._primitives = list(dict.fromkeys(e.primitive.name for e, _ in _equations(jaxpr)))
        self.verified = 0      # plans whose first two launches equalled a plain run
        self.mismatch = ""     # the first difference of a wrong launch, once one was caught
        self.calls = 0
        self.plans: list[_Plan] = []
        self.plain_calls = 0   # calls run plainly because no plan fitted nor could be captured
        self.captures = 0
        self.replays = 0
        self.plain_runs = 0    # every call run plainly (the first, and each for a reason)
        self.last_plain = ""   # why the last of them ran plainly
        self._recent: list = []       # the input keys of the last RECENT_CALLS calls
        self._stable: dict = {}       # id -> CuPy array of each buffer the plans write
        self._registry: dict = {}     # id -> buffer the plans write (one reference each)
        self._accounted: dict = {}    # id -> the _holders counts the program accounts for
        self._sharing: dict = {}      # id -> ids of the registered buffers on its memory
        self._lock = device_lock(device.id)

    @property
    def plan(self) -> "_Plan | None":
        """The first plan captured (``None`` before the second call)."""
        return self.plans[0] if self.plans else None

    def describe(self) -> str:
        """One line for ``as_text()``: whether the program replays as a graph, and if not why;
        then how many calls were captured, replayed and run plainly, and why the last plain
        one was.

        Example::

          # CUDA graph: captured, 23 operations replayed as one launch (1 of at most 3 buffer
          plans); calls: 1 captured, 8 replayed, 2 plain (last: every plan it fits writes
          buffers the caller still holds)   (one line)
        """
        if self.reason:
            state = f"no, runs plainly ({self.reason})"
        elif not self.plans:
            state = "to be captured on the second call"
        else:
            state = (f"captured, {len(self.plans[0].graph_steps())} operations replayed as one "
                     f"launch ({len(self.plans)} of at most {MAX_PLANS} buffer plans)")
        if self.check is None and not self.reason:
            state += "; replays not verified (PLAX_CUDA_GRAPHS_VERIFY=0)"
        elif self.verified and not self.reason:
            state += (f"; verified: {self.verified} plan(s)' first two launches equal to a plain "
                      f"run ({self.check.describe()})")
        calls = f"{self.captures} captured, {self.replays} replayed, {self.plain_runs} plain"
        if self.plain_runs:
            calls += f" (last: {self.last_plain})"
        return f"# CUDA graph: {state}; calls: {calls}"

    def _plain(self, buffers, why: str) -> list:
        """Runs the call plainly (one launch per kernel), noting why."""
        self.plain_runs += 1
        self.last_plain = why
        return self.fn(*buffers)

    def _why_no_plan(self, buffers, keys) -> str:
        """Why a call that no plan took, and that was not captured, runs plainly."""
        if any(plan.fit(buffers, keys) is not None for plan in self.plans):
            return ("every plan it fits writes buffers the caller still holds (results kept, or "
                    "views or exports of them)")
        if not self._captures_pay():
            return (f"no plan fits its inputs' pointers and captures no longer pay "
                    f"({self.captures} captures, {self.replays} replays)")
        return "no plan fits its inputs' pointers, and every plan's buffers are held (none to evict)"

    # ---------------------------------------------------------------- ownership

    def _counts(self, i: int) -> tuple:
        """:func:`_holders` of registered buffer ``i``. Every count goes through here, so the
        references of the measuring frames are the same each time."""
        return _holders(self._registry[i])

    def _free(self, i: int) -> bool:
        """Whether nobody outside the program holds registered buffer ``i`` (by id), a view of
        it or its memory: its counts are those the program accounts for -- and so are those of
        every registered buffer on the same memory (a plan's output that is a view of a static
        input, say: a caller holding that view leaves the input's own counts as they were,
        since the plan's reference to the view already holds the input). (A loop, not
        ``all()`` of a generator: this runs for each buffer a replay may write, every call.)"""
        for k in self._sharing[i]:
            if self._counts(k) != self._accounted[k]:
                return False
        return True

    def _snapshot(self) -> dict:
        """The counts of every registered buffer now (before the plans change)."""
        return {i: self._counts(i) for i in self._registry}

    def _settle(self, before: dict) -> None:
        """Re-registers the plans' buffers after they changed (a capture, an eviction) since
        ``before`` (a :meth:`_snapshot`): a buffer registered then has its accounted counts
        moved by exactly what the change did to its counts; a new plan's buffer (nobody outside
        has seen it) is accounted at its counts now. Called, like :meth:`_snapshot`, from the
        call itself, where the frames that made the change are gone."""
        # (every structure of the program that refers to the buffers first, then the counts)
        self._registry = {id(b): b for plan in self.plans for b in plan.buffers()}
        self._stable = {id(_raw(b)): _raw(b) for b in self._registry.values()}
        self._sharing = _sharing(self._registry)
        accounted = {}
        for i in self._registry:
            now = self._counts(i)
            accounted[i] = now if i not in before else tuple(
                a + (n - b) for a, n, b in zip(self._accounted[i], now, before[i]))
        self._accounted = accounted

    # ---------------------------------------------------------------- calls

    def __call__(self, *buffers) -> list:
        if self.reason:   # (not under the lock: plain calls of a program may overlap)
            return self._plain(buffers, self.reason)
        with self._lock:
            if self.reason:
                return self._plain(buffers, self.reason)
            if any(_raw(b) is None for b in buffers):
                self.reason = "an input is not a device array"
                return self._plain(buffers, self.reason)
            stream = self.backend.stream(self.device)
            if stream.is_capturing():  # a body of a program being captured: its kernels join
                return self.fn(*buffers)  # that graph (no graph launched inside a capture)
            keys = [_key(b) for b in buffers]
            recent, self._recent = self._recent, ([keys] + self._recent)[:RECENT_CALLS]
            if self.calls == 0:
                self.calls = 1
                return self._first_call(buffers)
            recurring = [any(k[i] == key for k in recent) for i, key in enumerate(keys)]
            # (indices, not plans, in this frame: a plan it named would outlive its eviction)
            chosen, copies = self._pick(buffers, keys)
            replace = None
            if chosen is not None and copies and any(recurring[i] for i in copies) and \
                    self._captures_pay():
                # a copy into a static slot whose pointer recurs: a plan reading it in place
                # spares that copy from now on (a new one while there is room, else this one
                # captured again, keeping its other static buffers, which others may steer to)
                replace = None if len(self.plans) < MAX_PLANS else chosen
                chosen = None
            if chosen is None:
                held: list = []
                before = self._snapshot()
                try:
                    if replace is not None or self._may_capture():
                        if self.check is not None:
                            held = self._held_snapshots(stream)
                        self._capture(buffers, recurring, stream, reuse=replace)
                        chosen, copies = len(self.plans) - 1, []
                except cupy.cuda.memory.OutOfMemoryError as err:
                    cupy.get_default_memory_pool().free_all_blocks()
                    raise GpuOutOfMemoryError(self.device, oom_bytes(err), str(err)) from None
                except Exception as err:  # what capture refuses: run plainly from now on
                    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                    self.reason = f"capture failed ({type(err).__name__}: {first})"
                    return self._plain(buffers, self.reason)
                finally:
                    self._settle(before)   # (the frames of the change are gone: exact counts)
                if chosen is None:
                    self.plain_calls += 1
                    return self._plain(buffers, self._why_no_plan(buffers, keys))
                if self.check is not None:   # (a new plan: its launches checked, once)
                    return self._checked_launches(buffers, stream, held)
            self.replays += 1
            return self.plans[chosen].replay(buffers, copies, stream, self._stable)

    def _checked_launches(self, buffers, stream, held: list) -> list:
        """Launches the plan just captured twice on ``buffers`` (the capture's launch and the
        first replay after a launch, which finds the scratch and workspaces that launch left)
        and runs the program plainly on them too (fresh buffers); returns the plan's outputs
        when both launches equal the plain run by the program's rule
        (:mod:`plax_cupy.graph_check`) and the earlier results the caller holds (``held``, read
        copied by :meth:`_held_snapshots` before the capture) are as they were, else warns, drops the
        plans and returns the plain run's outputs, the program running plainly from then on.
        Every launch, copy and read of the check but the call's own launch counts in
        ``verify_*`` (this thread's: :func:`plax_cupy.runtime.counted_as`)."""
        plan = self.plans[-1]
        outputs = plan.replay(buffers, [], stream, self._stable)   # (the call's own launch)
        try:
            with runtime.counted_as(runtime.CHECKING):
                problem, which, reference, outputs = self._check(plan, buffers, outputs, stream)
                overwritten = self._held_kept(held, stream)
        except BaseException as err:   # (an unchecked plan must not replay)
            del outputs, plan
            self.plans = []
            self._settle({})
            if not isinstance(err, cupy.cuda.memory.OutOfMemoryError):
                raise
            out_of_memory = True   # (the plain run beside the plans' buffers did not fit)
        else:
            out_of_memory = False
        if out_of_memory:   # without the plans' buffers, as every plain call since the first
            # (the call runs plainly: its graph launch was the check's alone, and no replay)
            runtime.move_counts(runtime.LAUNCHES, runtime.VERIFY_LAUNCHES, _UNCOPIED_REPLAY)
            cupy.get_default_memory_pool().free_all_blocks()
            self.reason = ("checking a capture against a plain run ran out of memory (the "
                           "plans' buffers and the plain run's together)")
            return self._plain(buffers, self.reason)
        self.replays += 1
        if problem is None and overwritten is not None:
            problem, which = overwritten, "the capture of a new plan and its launches"
        if problem is None:
            self.verified += 1
            return outputs
        del outputs, plan   # (no reference to a plan's buffers outlives the plans)
        self.mismatch = f"{which}: {problem}"
        self._give_up(f"{which} wrote memory the caller holds: {problem}"
                      if problem is overwritten else
                      f"{which} differed from a plain run of the same call: {problem}")
        self.plain_runs += 1   # (this call's results are the plain run's)
        self.last_plain = self.reason
        return reference

    def _held_snapshots(self, stream) -> list:
        """What :meth:`_held_kept` compares after a capture: ``(id, key, snapshot)`` of every
        registered buffer someone outside the program holds (an earlier call's result, a view
        of one), copied before the capture (:func:`graph_check.held_snapshot`, on ``stream``,
        ahead of the capture's work): on the device while they take at most
        :func:`graph_check.snapshot_room`, else on the host. Ids and keys, not buffers: a reference
        kept in the calling frame would be accounted as the program's by the capture's
        :meth:`_settle`."""
        ids = [i for i in self._registry if self._counts(i) != self._accounted[i]]
        # (on the device while they fit beside the capture; else on the host: slower, not a
        # capture that runs out of memory because of its check)
        on_device = sum(_raw(self._registry[i]).nbytes for i in ids) <= \
            graph_check.snapshot_room() if ids else True
        with runtime.counted_as(runtime.CHECKING), stream:
            return [(i, _key(self._registry[i]),
                     graph_check.held_snapshot(self._registry[i], on_device)) for i in ids]

    def _held_kept(self, held: list, stream) -> str | None:
        """Whether the capture and the checked launches of a new plan left the held earlier
        results of ``held`` (:meth:`_held_snapshots`) as they were, compared on the device
        (:func:`graph_check.held_changes`: one small read to the host, whatever their size);
        each one they wrote is written back from its snapshot, and the first is described
        (``None``: none was). The ownership rule (see the module) forbids such a write; this
        catches a flaw in it (or a graph that writes outside the memory it owns) when a capture
        makes it, rather than a wrong value the caller finds later."""
        # (a buffer gone, or another one now under its id, is not the plans' any more: none
        # of them writes it)
        live = [(buffer, snapshot) for i, key, snapshot in held
                if (buffer := self._registry.get(i)) is not None and _key(buffer) == key]
        first = None
        with stream:
            for (buffer, snapshot), change in zip(live, graph_check.held_changes(live)):
                if change is None:
                    continue
                raw = _raw(buffer)
                if isinstance(snapshot, cupy.ndarray):
                    cupy.copyto(raw, snapshot)   # (any strides)
                    runtime.note_launch()
                else:   # (a host snapshot: the device had no room for a copy)
                    cupy.copyto(raw, cupy.asarray(snapshot))   # (raw's bits: its dtype)
                count, index = change
                first = first or (f"an earlier result ({raw.dtype}{list(raw.shape)}) changed "
                                  f"in {count} of {raw.size} elements (first at flat index "
                                  f"{index}); written back")
        return first

    def _check(self, plan, buffers, outputs, stream) -> tuple:
        """:meth:`_checked_launches`' comparisons of the capture's launch (``outputs``) and of
        a second launch with a plain run: ``(problem or None, which launch, the plain run's
        outputs, the plan's outputs)``."""
        found = [graph_check.to_host(o) for o in outputs]
        reference = self.fn(*buffers)   # (after the launch: a stray write of the graph's
        expected = [graph_check.to_host(o) for o in reference]   # cannot reach these)
        problem = graph_check.compare(found, expected, self.check)
        which = "the capture's launch"
        if problem is None:
            outputs = plan.replay(buffers, [], stream, self._stable)
            plan.replays -= 1   # (the check's launch: not a call's, for the evictions)
            problem = graph_check.compare([graph_check.to_host(o) for o in outputs],
                                          expected, self.check)
            which = "its replay"
        return problem, which, reference, outputs

    def _give_up(self, why: str) -> None:
        """Warns that a captured graph replayed wrongly, drops every plan and runs the program
        plainly from now on, ``why`` in its reason."""
        paths = self.check.paths if self.check is not None else {}
        bound = ", ".join(f"{p} ({what})" for p, what in sorted(paths.items()))
        self.reason = f"a CUDA graph of it replayed wrongly: {why}"
        warnings.warn(
            f"CUDA graph replay differs from a plain run on {self.device}: {why}. The program "
            f"(primitives: {', '.join(self._primitives[:12])}"
            f"{', ...' if len(self._primitives) > 12 else ''}) "
            f"returned the plain run's results and runs plainly from now on. Captured through "
            f"direct library bindings or scratch-keeping kernels: {bound or 'none'}. "
            f"(PLAX_CUDA_GRAPHS_VERIFY=0 turns this check off; PLAX_CUDA_GRAPHS=0 all graphs.)",
            ReplayMismatchWarning, stacklevel=4)
        MISMATCHES[0] += 1
        self.plans = []
        self._settle({})   # (nothing registered: every count now is outside the program's)

    def _pick(self, buffers, keys) -> tuple:
        """The index of the plan that fits ``buffers`` with the fewest copies in and whose
        buffers it writes nobody outside holds, and those copies; ``(None, None)`` if none."""
        chosen, copies = None, None
        for n, plan in enumerate(self.plans):
            needed = plan.fit(buffers, keys)
            if needed is None or (copies is not None and len(needed) >= len(copies)):
                continue
            if all(self._free(i) for i in plan.written_ids) and \
                    all(self._free(plan.static_ids[i]) for i in needed):
                chosen, copies = n, needed
                if not copies:
                    break
        return chosen, copies

    def _captures_pay(self) -> bool:
        """Whether another capture is allowed: captures stay under a quarter of the replays,
        past the first ``2 * MAX_PLANS`` -- so a loop whose input pointers never recur runs
        plainly (or copies) rather than capture every call."""
        return self.captures < 2 * MAX_PLANS + self.replays // 4

    def _may_capture(self) -> bool:
        """Whether a call no plan fits may be captured: while there is room, or (captures
        paying, :meth:`_captures_pay`) by evicting the plan replayed least whose buffers nobody
        holds."""
        if len(self.plans) < MAX_PLANS:
            return True
        if not self._captures_pay():
            return False
        spare = [n for n, p in enumerate(self.plans)
                 if all(self._free(i) for i in p.written_ids + [i for i in p.static_ids if i])]
        if not spare:
            return False
        victim = min(spare, key=lambda n: self.plans[n].replays)
        del self.plans[victim]   # (its buffers go back to the pool once no plan shares them)
        return True

    def _capture(self, buffers, recurring, stream, reuse: int | None = None,
                 all_static: bool = False) -> None:
        """Captures a plan for ``buffers`` and appends it (see the module: which slots are
        bound, and where the outputs of a fed-back call are steered); ``reuse``: the index of a
        plan it replaces, whose static buffers it keeps for the slots that stay static."""
        pool = cupy.get_default_memory_pool()
        static: list = []
        held: list = []
        old = self.plans[reuse] if reuse is not None else None

        def allocate(nbytes):
            memory = pool.malloc(nbytes)
            held.append(memory)
            return memory

        copied = 0
        with cupy.cuda.using_allocator(allocate):
            for i, b in enumerate(buffers):
                raw = _raw(b)
                if not all_static and (id(raw) in self._stable or recurring[i]):
                    static.append(None)      # bound: read in place
                elif old is not None and old.static[i] is not None:
                    static.append(old.static[i])   # (free: _pick checked the ones it copies)
                    if raw is not _raw(old.static[i]):
                        cupy.copyto(_raw(old.static[i]), raw)
                        copied += 1
                else:
                    static.append(_rewrap(b, raw.copy()))
                    copied += 1
        runtime.note_launch(copied)  # the copies in run now, before the capture
        runtime.note_copy(copied)
        inputs = [b if s is None else s for b, s in zip(buffers, static)]
        capture = _Capture(self.fn, inputs, stream)
        steer = self._steering(buffers, static, capture)
        if steer:  # capture again, the fed-back outputs in the other plan's static inputs
            steered = _Capture(self.fn, inputs, stream, {k: t for k, (t, _, _) in steer.items()})
            if len(steered.outputs) == len(capture.outputs) and all(
                    _raw(steered.outputs[j]) is not None
                    and _memory(_raw(steered.outputs[j])) is _memory(_raw(target))
                    and _raw(steered.outputs[j]).data.ptr == _raw(target).data.ptr
                    and _raw(steered.outputs[j]).strides == _raw(target).strides
                    for _, j, target in steer.values()):
                capture = steered
                for _, j, target in steer.values():
                    capture.outputs[j] = target   # (the same object: accounted once)
            else:
                steer = {}
        outputs = capture.outputs
        passthrough = {j: i for j, out in enumerate(outputs) for i, b in enumerate(buffers)
                       if static[i] is None and _raw(out) is not None and _raw(out) is _raw(b)}
        bound_memories = {id(_memory(_raw(b))) for b, st in zip(buffers, static) if st is None}
        if not all_static and any(
                j not in passthrough and _raw(o) is not None and id(_memory(_raw(o))) in bound_memories
                for j, o in enumerate(outputs)):
            # an output views a bound input's memory (a reshape of it, say): a replay could not
            # hand out the view of the next call's input, so every slot is the plan's own
            return self._capture(buffers, recurring, stream, reuse, all_static=True)
        mine = {id(getattr(m, "mem", m)) for m in held + capture.held}
        mine |= {id(_memory(_raw(t))) for _, _, t in steer.values()}
        # (and the static buffers kept from the plan it replaces, which this capture did not
        # allocate: an output viewing one is written by each copy in, as any static's view)
        mine |= {id(_memory(_raw(s))) for s in static if s is not None}
        written = [o for j, o in enumerate(outputs) if j not in passthrough
                   and _raw(o) is not None and id(_memory(_raw(o))) in mine]
        plan = _Plan(capture.graph, static, [_key(b) for b in inputs],
                     [None if j in passthrough else o for j, o in enumerate(outputs)],
                     passthrough, held + capture.held, written)
        if old is not None:   # (other plans may steer into the static buffers it keeps)
            del self.plans[reuse]
            old = None
        self.plans.append(plan)
        self.captures += 1

    def _steering(self, buffers, static, capture) -> dict:
        """Where a fed-back call's outputs should live: for each input slot ``i`` bound to
        output ``j`` of a plan whose slot ``i`` is static (its buffer ``S``), nobody outside
        holding ``S``, this capture's output ``j`` goes to ``S`` -- so the next call, passing it
        at slot ``i``, fits that plan with no copy. Returns ``{allocation index: (target, j,
        S)}``."""
        steer: dict = {}
        for i, b in enumerate(buffers):
            if static[i] is not None:
                continue
            for plan in self.plans:
                if i >= len(plan.static_ids) or plan.static_ids[i] is None:
                    continue
                if not self._free(plan.static_ids[i]):  # (before naming it in this frame)
                    continue
                j = next((j for j, o in enumerate(plan.outputs)
                          if o is not None and _raw(o) is _raw(b)), None)
                if j is None or j >= len(capture.outputs) or any(v[1] == j for v in steer.values()):
                    continue
                target = plan.static[i]
                out, t = _raw(capture.outputs[j]), _raw(target)
                k = capture.allocation_of(capture.outputs[j])
                if (k is not None and out.shape == t.shape and out.dtype == t.dtype
                        and type(capture.outputs[j]) is type(target)):
                    steer[k] = (_Target(target), j, target)
                    break
        return steer

    def _first_call(self, buffers) -> list:
        """Runs plainly, and decides from what it did whether the program can be captured."""
        with runtime.count(this_thread=True) as mine:   # (not another thread's meanwhile)
            out = self._plain(buffers, "the first call, which compiles")
        # (uploads of the first call may be constants of lazily compiled bodies; an upload
        # every call is refused by the capture itself)
        if mine.host_fallbacks:
            self.reason = "a primitive runs on the host: " + ", ".join(sorted(mine.fallbacks))
        elif mine.device_to_host:
            self.reason = "it reads device memory on the host"
        elif mine.launches <= 1:
            # a replay is one launch at best: a single fused kernel gains nothing
            self.reason = f"{mine.launches} launches per call, no more than a replay's 1"
        return out

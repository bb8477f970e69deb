"""Compiled programs replayed as CUDA graphs, on static buffer plans that hand out their outputs.

A small program is bound by the launches Python issues, one per kernel. :class:`GraphedProgram`
wraps a compiled program (``fn(*buffers) -> list``) so that, where the program allows it:

* the first call runs plainly (it also compiles the kernels and warms CuPy's caches);
* the second call *captures* the program on the device's stream (``Stream.begin_capture`` /
  ``end_capture`` -> ``cupy.cuda.Graph``) on a **plan**: static input buffers (the call's
  inputs copied there first) and every buffer allocated while capturing (intermediates and
  outputs), all held by the plan, so the pointers the graph recorded stay valid for its life;
* a later call picks a plan it can replay, copies into the plan's input buffers only the inputs
  that changed (an Array is immutable: the buffer the plan last copied from, passed again,
  needs no copy), launches the graph (one launch, whatever the number of kernels, loops with a
  static trip count included) and **hands the plan's own output buffers to the caller**, with
  no copy out.

A call therefore costs ``1`` launch when its inputs are the buffers of the plan's previous
call, and one more per changed input -- except inputs that are buffers of the program's own
plans (fixed addresses, living as long as the plans), whose copies are captured as a graph of
their own, one launch for all of them: a training loop feeding each step's results to the next
makes two launches a step. The price of handing outputs out: a plan can replay only
when nobody outside the plans still holds its outputs (the graph would overwrite them) -- a
reference count of each buffer, its memory pointer and its memory, against their counts when
the plan was captured. A program keeps up to :data:`MAX_PLANS` plans (double buffering: a
training loop that feeds each call's results to the next alternates between two), each holding
its intermediates and outputs on the device; when every plan's outputs are still held (a caller
keeping every result) the call runs plainly (fresh buffers, one launch per kernel) rather than
capture without bound. An input whose buffer changed is copied because a CUDA graph bakes its
pointers in, and CuPy offers no update of a captured kernel's arguments.

A program runs plainly for ever, with the reason in ``as_text()``, when a walk of its jaxpr
finds a host decision (``cond``, ``while``), a host callback, or a primitive whose GPU path
synchronises (see :data:`UNCAPTURABLE`); or when its first call copied anything between host
and device or fell back to the host (counted by :mod:`plax_cupy.runtime`), or launched one
kernel at most (nothing for a replay to save); or when ``PLAX_CUDA_GRAPHS=0``.

Threads: captures and replays on one device are serialised by a per-device lock, so a plan is
never shared by two calls at once and no other graphed call's work lands in a capture.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable, Sequence

import cupy

from plax_cupy import runtime
from plax_cupy.runtime import GpuOutOfMemoryError, oom_bytes

#: primitive name -> why a program holding it cannot be captured
UNCAPTURABLE = {
    "cond": "cond decides its branch on the host",
    "while": "while decides each iteration on the host",
    "pure_callback": "a host callback copies to the host",
    "io_callback": "a host callback copies to the host",
    "debug_callback": "a host callback copies to the host",
    "eig": "the general eigensolver synchronises with the host",
}

_device_locks: dict = {}
_locks_lock = threading.Lock()


def graphs_enabled() -> bool:
    """Whether compiled programs may replay as CUDA graphs (``PLAX_CUDA_GRAPHS``, default on)."""
    return os.environ.get("PLAX_CUDA_GRAPHS", "1").strip().lower() not in ("0", "false", "no", "off")


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
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    for eqn in getattr(inner, "eqns", ()):
        name = eqn.primitive.name
        if name in UNCAPTURABLE:
            return f"{name}: {UNCAPTURABLE[name]}"
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None), "eqns"):
                    reason = capture_blocker(sub)
                    if reason:
                        return reason
    return None


def _device_lock(device_id: int) -> threading.RLock:
    with _locks_lock:
        lock = _device_locks.get(device_id)
        if lock is None:
            lock = _device_locks[device_id] = threading.RLock()
        return lock


#: how many plans (captured graphs with their buffers) a program keeps at most
MAX_PLANS = 2


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


class _Plan:
    """One captured graph and the buffers it owns: static inputs, intermediates, outputs.

    ``watched`` are the buffers a replay writes (the static inputs, by the copies in, and the
    outputs the capture allocated), ``baseline`` their :func:`_holders` counts when the plan
    alone held them: another count now means a caller still holds one (or a view of it), and
    the plan must not replay.
    """

    def __init__(self, graph, inputs: list, outputs: list, held: list, last: list):
        self.graph, self.inputs, self.outputs, self.held = graph, inputs, outputs, held
        # the caller's buffers whose values the static inputs hold (None: unknown); never a
        # plan's own buffer, whose values change with every replay that writes it
        self.last = last
        allocated = {id(getattr(m, "mem", m)) for m in held}
        written = list(inputs) + [o for o in outputs
                                  if _raw(o) is not None and id(_memory(_raw(o))) in allocated]
        self.watched = list({id(b): b for b in written}.values())
        self.memories = {id(_memory(_raw(b))) for b in self.watched}
        self.baseline: list | None = None
        self.replays = 0
        self.copy_graphs: dict = {}   # input slots and source buffers -> graph of their copies

    def _counts(self) -> list:
        return [_holders(b) for b in self.watched]

    def settle(self) -> None:
        """Records the watched buffers' counts now that only the plan holds them."""
        self.baseline = self._counts()

    def held_outside(self) -> bool:
        """Whether anyone but the plans holds a buffer a replay writes (or a view of it)."""
        return self._counts() != self.baseline

    @classmethod
    def capture(cls, fn: Callable, buffers: Sequence[Any], stream, owned) -> "_Plan":
        pool = cupy.get_default_memory_pool()
        held: list = []

        def allocate(nbytes):  # every allocation of the capture stays the plan's
            memory = pool.malloc(nbytes)
            held.append(memory)
            return memory

        with cupy.cuda.using_allocator(allocate):
            inputs = [_rewrap(b, _raw(b).copy()) for b in buffers]
            runtime.note_launch(len(inputs))  # the copies in run now, before the capture
            mode = getattr(cupy.cuda.runtime, "streamCaptureModeRelaxed", None)
            launched = runtime.TOTALS[runtime.LAUNCHES]
            stream.begin_capture(*(() if mode is None else (mode,)))
            try:
                outputs = list(fn(*inputs))
            finally:
                graph = stream.end_capture()  # ends (or abandons) the capture either way
                # a captured kernel is recorded, not launched: the graph's launch counts it
                runtime.TOTALS[runtime.LAUNCHES] = launched
        last = [None if id(_memory(_raw(b))) in owned else _raw(b) for b in buffers]
        return cls(graph, inputs, outputs, held, last)

    def graph_steps(self) -> list:
        """The captured operations, where the graph says (the simulated GPU's does)."""
        return list(getattr(self.graph, "steps", ()))

    def copies_for(self, buffers: Sequence[Any]) -> list | None:
        """The input slots a replay on ``buffers`` must copy into, or ``None`` when the plan
        cannot replay: a buffer it would write is still held outside the plans."""
        if self.held_outside():
            return None
        return [i for i, (static, b) in enumerate(zip(self.inputs, buffers))
                if _raw(b) is not _raw(static) and _raw(b) is not self.last[i]]

    def replay(self, buffers: Sequence[Any], copies: list, stream, owned: set,
               stable: dict) -> list:
        """Copies the changed inputs in, launches the graph; returns the plan's outputs.

        An input that is a buffer of one of the program's plans (``stable``: id -> buffer, all
        living as long as their plans) has a fixed address, so its copy is captured too: the
        copies from one set of such buffers are one graph launch (a training loop feeding each
        step's results to the next: two launches a step, whatever the parameter count)."""
        from_plans = tuple(i for i in copies if stable.get(id(_raw(buffers[i]))) is _raw(buffers[i]))
        launches = 1
        for i in copies:
            if i in from_plans:
                continue
            raw = _raw(buffers[i])
            cupy.copyto(_raw(self.inputs[i]), raw)
            self.last[i] = None if id(_memory(raw)) in owned else raw
            launches += 1
        if from_plans:
            key = tuple((i, id(_raw(buffers[i]))) for i in from_plans)
            if key not in self.copy_graphs:
                self.copy_graphs[key] = self._capture_copies(buffers, from_plans, stream)
            copy_graph = self.copy_graphs[key]
            if copy_graph is None:  # (CUDA refused the capture: copied from Python)
                for i in from_plans:
                    cupy.copyto(_raw(self.inputs[i]), _raw(buffers[i]))
            else:
                copy_graph.launch(stream)
            launches += 1 if copy_graph is not None else len(from_plans)
            for i in from_plans:
                self.last[i] = None
        self.graph.launch(stream)
        runtime.note_launch(launches)
        self.replays += 1
        return list(self.outputs)

    def _capture_copies(self, buffers, slots, stream):
        """A graph of the copies of ``buffers[i]`` into the static inputs, for ``i`` in
        ``slots`` (or ``None`` where CUDA refuses the capture)."""
        mode = getattr(cupy.cuda.runtime, "streamCaptureModeRelaxed", None)
        stream.begin_capture(*(() if mode is None else (mode,)))
        try:
            for i in slots:
                cupy.copyto(_raw(self.inputs[i]), _raw(buffers[i]))
        except Exception:  # noqa: BLE001 - fall back to copies issued from Python
            stream.end_capture()
            return None
        return stream.end_capture()


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
        self.calls = 0
        self.plans: list[_Plan] = []
        self.plain_calls = 0   # calls run plainly because every plan's outputs were held
        self._owned: set = set()      # the memories the plans write (their values change)
        self._stable: dict = {}       # id -> CuPy array of each buffer the plans write
        self._lock = _device_lock(device.id)

    @property
    def plan(self) -> "_Plan | None":
        """The first plan captured (``None`` before the second call)."""
        return self.plans[0] if self.plans else None

    def describe(self) -> str:
        """One line for ``as_text()``: whether the program replays as a graph, and if not why."""
        if self.reason:
            return f"# CUDA graph: no, runs plainly ({self.reason})"
        if not self.plans:
            return "# CUDA graph: to be captured on the second call"
        return (f"# CUDA graph: captured, {len(self.plans[0].graph_steps())} operations replayed "
                f"as one launch ({len(self.plans)} of at most {MAX_PLANS} buffer plans)")

    def _add(self, plan: _Plan) -> None:
        """Keeps ``plan``, its buffers' counts taken once only the plans hold them."""
        self.plans.append(plan)
        self._owned = self._owned | plan.memories
        # (alive as long as their plans, so an id here is never reused by another array)
        self._stable = {**self._stable, **{id(_raw(b)): _raw(b) for b in plan.watched}}
        plan.settle()  # last: the references just taken are the plans' own

    def __call__(self, *buffers) -> list:
        if self.reason:
            return self.fn(*buffers)
        with self._lock:
            if self.reason:
                return self.fn(*buffers)
            if any(_raw(b) is None for b in buffers):
                self.reason = "an input is not a device array"
                return self.fn(*buffers)
            stream = self.backend.stream(self.device)
            if stream.is_capturing():  # a body of a program being captured: its kernels join
                return self.fn(*buffers)  # that graph (no graph launched inside a capture)
            if self.calls == 0:
                self.calls = 1
                return self._first_call(buffers)
            best, copies = None, None
            for plan in self.plans:  # the one that needs the fewest copies in
                needed = plan.copies_for(buffers)
                if needed is not None and (copies is None or len(needed) < len(copies)):
                    best, copies = plan, needed
                    if not copies:
                        break
            if best is None:
                if len(self.plans) >= MAX_PLANS:
                    self.plain_calls += 1  # every plan's results are still held
                    return self.fn(*buffers)
                try:
                    best = _Plan.capture(self.fn, buffers, stream, self._owned)
                except cupy.cuda.memory.OutOfMemoryError as err:
                    cupy.get_default_memory_pool().free_all_blocks()
                    raise GpuOutOfMemoryError(self.device, oom_bytes(err), str(err)) from None
                except Exception as err:  # what capture refuses: run plainly from now on
                    self.reason = f"capture failed ({type(err).__name__}: {err})"
                    return self.fn(*buffers)
                self._add(best)
                copies = []
            return best.replay(buffers, copies, stream, self._owned, self._stable)

    def _first_call(self, buffers) -> list:
        """Runs plainly, and decides from what it did whether the program can be captured."""
        before, host_before = runtime.counters(), runtime.fallback_primitives()
        out = self.fn(*buffers)
        after = runtime.counters()
        # (uploads of the first call may be constants of lazily compiled bodies; an upload
        # every call is refused by the capture itself)
        if after.host_fallbacks != before.host_fallbacks:
            on_host = runtime.fallback_primitives()
            self.reason = "a primitive runs on the host: " + ", ".join(
                sorted(p for p, n in on_host.items() if n != host_before.get(p, 0)))
        elif after.device_to_host != before.device_to_host:
            self.reason = "it reads device memory on the host"
        elif after.launches - before.launches <= 1:
            # a replay is one launch at best: a single fused kernel gains nothing
            self.reason = (f"{after.launches - before.launches} launches per call, no more than "
                           "a replay's 1")
        return out

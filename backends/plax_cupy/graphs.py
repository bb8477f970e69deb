"""Compiled programs replayed as one CUDA graph, with a static buffer plan.

A small program is bound by the launches Python issues, one per kernel. :class:`GraphedProgram`
wraps a compiled program (``fn(*buffers) -> list``) so that, where the program allows it:

* the first call runs plainly (it also compiles the kernels and warms CuPy's caches);
* the second call *captures* the program on the device's stream (``Stream.begin_capture`` /
  ``end_capture`` -> ``cupy.cuda.Graph``) on a **static buffer plan**: inputs copied into fixed
  buffers allocated for the plan, and every buffer allocated while capturing (intermediates and
  outputs) held by the plan, so the pointers the graph recorded stay valid for its lifetime;
* every later call copies the inputs into the plan's input buffers (only those that are not the
  very buffers of the previous call: Arrays are immutable), launches the graph (one launch,
  whatever the number of kernels, loops with a static trip count included: no Python runs per
  iteration) and copies the outputs out into fresh arrays: ``1 + changed inputs + outputs``
  launches per call. Outputs are copied rather than handed out because Arrays are immutable and
  may outlive the next call, which rewrites the plan's buffers. A program whose plain call
  launches no more than that (one fused kernel) keeps running plainly.

A program runs plainly for ever, with the reason in ``as_text()``, when a walk of its jaxpr
finds a host decision (``cond``, ``while``), a host callback, or a primitive whose GPU path
synchronises (see :data:`UNCAPTURABLE`); or when its first call copied anything between host
and device or fell back to the host (counted by :mod:`plax_cupy.runtime`), or launched too
few kernels for a replay to save any; or when
``PLAX_CUDA_GRAPHS=0``.

Threads: captures and replays on one device are serialised by a per-device lock, so a plan is
never shared by two calls at once and no other graphed call's work lands in a capture.
"""
from __future__ import annotations

import os
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


def _raw(buffer):
    """The CuPy array holding ``buffer``'s memory (a bfloat16 buffer's bits), or ``None``."""
    raw = getattr(buffer, "bits", buffer)
    return raw if isinstance(raw, cupy.ndarray) else None


def _rewrap(like, raw):
    """``raw`` in the wrapper ``like`` came in (a bfloat16 buffer stays one)."""
    return raw if isinstance(like, cupy.ndarray) else type(like)(raw)


class _Plan:
    """One captured graph and the buffers it owns (inputs, intermediates, outputs)."""

    def __init__(self, graph, inputs: list, outputs: list, held: list, last: list):
        self.graph, self.inputs, self.outputs, self.held = graph, inputs, outputs, held
        # the caller's buffers the input buffers now hold: an Array is immutable, so the same
        # buffer object passed again needs no copy (held here, so its identity is not reused)
        self.last = last

    @classmethod
    def capture(cls, fn: Callable, buffers: Sequence[Any], stream) -> "_Plan":
        pool = cupy.get_default_memory_pool()
        held: list = []

        def allocate(nbytes):  # every allocation of the capture stays the plan's
            memory = pool.malloc(nbytes)
            held.append(memory)
            return memory

        with cupy.cuda.using_allocator(allocate):
            inputs = [_rewrap(b, _raw(b).copy()) for b in buffers]
            mode = getattr(cupy.cuda.runtime, "streamCaptureModeRelaxed", None)
            launched = runtime.TOTALS[runtime.LAUNCHES]
            stream.begin_capture(*(() if mode is None else (mode,)))
            try:
                outputs = list(fn(*inputs))
            finally:
                graph = stream.end_capture()  # ends (or abandons) the capture either way
                # a captured kernel is recorded, not launched: the graph's launch counts it
                runtime.TOTALS[runtime.LAUNCHES] = launched
        return cls(graph, inputs, outputs, held, [_raw(b) for b in buffers])

    def graph_steps(self) -> list:
        """The captured operations, where the graph says (the simulated GPU's does)."""
        return list(getattr(self.graph, "steps", ()))

    def replay(self, buffers: Sequence[Any], stream) -> list:
        for i, (static, b) in enumerate(zip(self.inputs, buffers)):
            raw = _raw(b)
            if raw is not self.last[i]:
                cupy.copyto(_raw(static), raw)
                self.last[i] = raw
        self.graph.launch(stream)
        runtime.note_launch()
        out = []
        for o in self.outputs:
            raw = _raw(o)
            out.append(o if raw is None else _rewrap(o, raw.copy()))
        return out


class GraphedProgram:
    """A compiled program that replays as one CUDA graph from its third call (see the module).

    Args:
      fn: the compiled program, ``fn(*buffers) -> list of buffers``, run inside the device's
        stream by the caller.
      jaxpr: the program's jaxpr (walked for what needs the host).
      backend: the CuPy backend (its device streams).
      device: the device the program runs on.

    Returns (when called): the program's outputs, equal to ``fn``'s.
    """

    def __init__(self, fn: Callable, jaxpr, backend, device):
        self.fn, self.backend, self.device = fn, backend, device
        self.reason = ("disabled (PLAX_CUDA_GRAPHS=0)" if not graphs_enabled()
                       else capture_blocker(jaxpr))
        self.calls = 0
        self.plan: _Plan | None = None
        self._lock = _device_lock(device.id)

    def describe(self) -> str:
        """One line for ``as_text()``: whether the program replays as a graph, and if not why."""
        if self.reason:
            return f"# CUDA graph: no, runs plainly ({self.reason})"
        if self.plan is None:
            return "# CUDA graph: to be captured on the second call, replayed from the third"
        return (f"# CUDA graph: captured, {len(self.plan.graph_steps())} operations replayed as "
                "one launch")

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
                before, host_before = runtime.counters(), runtime.fallback_primitives()
                out = self.fn(*buffers)
                after = runtime.counters()
                # (uploads of the first call may be constants of lazily compiled bodies; an
                # upload every call is refused by the capture itself)
                if after.host_fallbacks != before.host_fallbacks:
                    on_host = runtime.fallback_primitives()
                    self.reason = "a primitive runs on the host: " + ", ".join(
                        sorted(p for p, n in on_host.items() if n != host_before.get(p, 0)))
                elif after.device_to_host != before.device_to_host:
                    self.reason = "it reads device memory on the host"
                # a replay is a copy per input and output and the graph: fewer kernels than
                # that gain nothing (a single fused kernel stays one plain launch)
                replay = 1 + len(buffers) + len(out)
                if not self.reason and after.launches - before.launches <= replay:
                    self.reason = (f"{after.launches - before.launches} launches per call, no "
                                   f"more than a replay's {replay}")
                return out
            if self.plan is None:
                try:
                    self.plan = _Plan.capture(self.fn, buffers, stream)
                except cupy.cuda.memory.OutOfMemoryError as err:
                    cupy.get_default_memory_pool().free_all_blocks()
                    raise GpuOutOfMemoryError(self.device, oom_bytes(err), str(err)) from None
                except Exception as err:  # what capture refuses: run plainly from now on
                    self.reason = f"capture failed ({type(err).__name__}: {err})"
                    return self.fn(*buffers)
            return self.plan.replay(buffers, stream)

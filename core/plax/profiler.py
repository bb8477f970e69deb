"""``plax.profiler``: traces of a program's timeline, and a device memory profile.

``start_trace``/``stop_trace`` (or the ``trace`` context) record, with host timestamps:

- ``TraceAnnotation``/``StepTraceAnnotation`` spans and ``annotate_function`` calls;
- each ``jit`` trace, compilation and execution (``jit(f)``, with its backend and device).

``stop_trace`` writes them as a Chrome trace-event file, ``<log_dir>/plugins/profile/<run>/
<host>.trace.json.gz``, which https://ui.perfetto.dev, ``chrome://tracing`` and TensorBoard's
profile plugin open (``create_perfetto_trace=True`` also writes ``perfetto_trace.json.gz``,
JAX's name for the Perfetto upload). Eager operations are not recorded one by one: wrap them
in a ``TraceAnnotation``. On a GPU an execution span is the host's time to launch the program
(kernels run asynchronously): end a span with ``block_until_ready()`` to include the device's.

``device_memory_profile`` describes the live arrays per device in pprof's format.
"""
from __future__ import annotations

import contextlib
import functools
import gzip
import json
import os
import pathlib
import socket
import threading
import time
from typing import Any, Callable, Iterator

from plax import trace_events

_lock = threading.Lock()


class ProfileOptions:
    """JAX's profiler options, accepted for compatibility: plax's host tracer records the
    events listed in :mod:`plax.profiler` whatever the levels say.

    Example:
      >>> options = jax.profiler.ProfileOptions()
      >>> options.host_tracer_level, options.python_tracer_level
      (2, 1)
    """

    def __init__(self):
        self.host_tracer_level = 2
        self.python_tracer_level = 1
        self.duration_ms = 0
        self.start_timestamp_ns = 0
        self.enable_hlo_proto = True
        self.include_dataset_ops = True
        self.raise_error_on_start_failure = False
        self.repository_path = ""
        self.session_id = ""
        self.advanced_configuration: dict = {}

    def __repr__(self) -> str:
        return f"ProfileOptions({vars(self)})"


class _Session:
    """One trace: its events (appended from any thread) and where they go."""

    def __init__(self, log_dir: str, perfetto_link: bool, perfetto_trace: bool):
        self.log_dir = log_dir
        self.perfetto_link = perfetto_link
        self.perfetto_trace = perfetto_trace or perfetto_link
        self.events: list[dict] = []
        self.start_ns = time.perf_counter_ns()
        self.threads: dict[int, str] = {}

    def add(self, name: str, category: str, start_ns: int, end_ns: int,
            args: dict | None = None) -> None:
        thread = threading.current_thread()
        self.threads.setdefault(thread.ident, thread.name)
        event = {"name": name, "cat": category, "ph": "X", "pid": os.getpid(),
                 "tid": thread.ident, "ts": (start_ns - self.start_ns) / 1e3,
                 "dur": max(end_ns - start_ns, 0) / 1e3}
        if args:
            event["args"] = {k: v if isinstance(v, (int, float, bool)) else str(v)
                             for k, v in args.items()}
        self.events.append(event)  # (list.append is atomic: no lock per event)

    def run(self, name: str, entry: Any, bufs: list) -> Any:
        """Runs a compiled ``jit`` program (``entry`` of jit's cache), timed."""
        start = time.perf_counter_ns()
        outs = entry.executable(*entry.const_bufs, *bufs)
        self.add(f"jit({name})", "execute", start, time.perf_counter_ns(),
                 {"backend": entry.backend.name, "device": entry.device})
        return outs

    def write(self) -> pathlib.Path:
        pid = os.getpid()
        meta = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": "plax (host)"}}]
        meta += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": n}}
                 for tid, n in self.threads.items()]
        document = {"traceEvents": meta + self.events, "displayTimeUnit": "ns",
                    "otherData": {"producer": "plax.profiler"}}
        run = time.strftime("%Y_%m_%d_%H_%M_%S")
        folder = pathlib.Path(self.log_dir).absolute() / "plugins" / "profile" / run
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{socket.gethostname()}.trace.json.gz"
        payload = json.dumps(document).encode()
        with gzip.open(path, "wb") as f:
            f.write(payload)
        if self.perfetto_trace:
            with gzip.open(folder / "perfetto_trace.json.gz", "wb") as f:
                f.write(payload)
        if self.perfetto_link:
            print(f"Trace written to {folder / 'perfetto_trace.json.gz'}: open it at "
                  "https://ui.perfetto.dev ('Open trace file'); plax serves no link itself.")
        return path


def start_trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False,
                create_perfetto_trace: bool = False,
                profiler_options: ProfileOptions | None = None) -> None:
    """Starts recording a trace, to be written to ``log_dir`` by :func:`stop_trace`.

    Args:
      log_dir: the directory (TensorBoard's log directory); the trace goes to
        ``log_dir/plugins/profile/<date_time>/<host>.trace.json.gz``.
      create_perfetto_link: also write ``perfetto_trace.json.gz`` and print where it is (plax
        serves no link: open the file at https://ui.perfetto.dev).
      create_perfetto_trace: also write ``perfetto_trace.json.gz``.
      profiler_options: a :class:`ProfileOptions` (accepted; plax records the same events).

    Raises:
      RuntimeError: a trace is already running.
      TypeError: ``profiler_options`` is not a ProfileOptions.

    Example:
      >>> import tempfile
      >>> jax.profiler.start_trace(tempfile.mkdtemp())
      >>> with jax.profiler.TraceAnnotation("work"):
      ...     _ = jnp.arange(3.0).sum()
      >>> jax.profiler.stop_trace()
    """
    if profiler_options is not None and not isinstance(profiler_options, ProfileOptions):
        raise TypeError(f"profiler_options must be a plax.profiler.ProfileOptions, got "
                        f"{type(profiler_options).__name__}")
    with _lock:
        if trace_events.session[0] is not None:
            raise RuntimeError("Profile has already been started. Only one profile may be run "
                               "at a time.")
        trace_events.session[0] = _Session(os.fspath(log_dir), bool(create_perfetto_link),
                                           bool(create_perfetto_trace))


def stop_trace() -> None:
    """Stops the trace :func:`start_trace` began and writes it (see :mod:`plax.profiler`).

    Raises:
      RuntimeError: no trace is running.

    Example:
      >>> import tempfile
      >>> jax.profiler.start_trace(tempfile.mkdtemp())
      >>> jax.profiler.stop_trace()
    """
    with _lock:
        session = trace_events.session[0]
        if session is None:
            raise RuntimeError("No profile started")
        trace_events.session[0] = None
    session.write()


@contextlib.contextmanager
def trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False,
          create_perfetto_trace: bool = False,
          profiler_options: ProfileOptions | None = None) -> Iterator[None]:
    """A trace of the enclosed code: :func:`start_trace` on entry, :func:`stop_trace` on exit.

    Args: as :func:`start_trace`.

    Example:
      >>> import tempfile
      >>> with jax.profiler.trace(tempfile.mkdtemp()):
      ...     _ = jax.jit(lambda x: x * 2)(jnp.ones(3)).block_until_ready()
    """
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


class TraceAnnotation:
    """A span on the trace's timeline covering the enclosed code (nothing when no trace runs).

    Args:
      name: the span's name.
      **kwargs: shown as the span's arguments.

    Example:
      >>> with jax.profiler.TraceAnnotation("my_label", batch=3):
      ...     _ = jnp.dot(jnp.ones((4, 4)), jnp.ones(4)).block_until_ready()
    """

    _category = "annotation"

    def __init__(self, name: str, **kwargs):
        if not isinstance(name, str):
            raise TypeError(f"TraceAnnotation needs a string name, got {type(name).__name__}")
        self.name, self.kwargs = name, kwargs
        self._start: int | None = None

    def __enter__(self) -> "TraceAnnotation":
        self._start = time.perf_counter_ns() if trace_events.session[0] is not None else None
        return self

    def __exit__(self, *exc) -> None:
        session = trace_events.session[0]
        if self._start is not None and session is not None:
            session.add(self.name, self._category, self._start, time.perf_counter_ns(),
                        self.kwargs)


class StepTraceAnnotation(TraceAnnotation):
    """A :class:`TraceAnnotation` marking one step of a loop (a training step): named
    ``"<name> <step_num>"`` when ``step_num`` is given.

    Args:
      name: the step's name.
      **kwargs: shown as the span's arguments (``step_num`` among them).

    Example:
      >>> for step in range(2):
      ...     with jax.profiler.StepTraceAnnotation("train", step_num=step):
      ...         _ = jnp.ones(3) * step
    """

    _category = "step"

    def __init__(self, name: str, **kwargs):
        super().__init__(name, **kwargs)
        if "step_num" in kwargs:
            self.name = f"{name} {kwargs['step_num']}"


def annotate_function(func: Callable, name: str | None = None, **decorator_kwargs) -> Callable:
    """``func`` wrapped so that each call is a :class:`TraceAnnotation` span.

    Args:
      func: the function.
      name: the span's name (default: ``func``'s qualified name).
      **decorator_kwargs: the span's arguments.

    Returns:
      The wrapped function.

    Example:
      >>> @jax.profiler.annotate_function
      ... def f(x):
      ...     return jnp.dot(x, x.T).block_until_ready()
      >>> f(jnp.ones((2, 2))).shape
      (2, 2)
    """
    name = name or getattr(func, "__qualname__", None) or func.__name__

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with TraceAnnotation(name, **decorator_kwargs):
            return func(*args, **kwargs)
    return wrapper


def device_memory_profile(backend: str | None = None) -> bytes:
    """The live arrays' memory per device, as a gzipped pprof ``Profile`` protocol buffer.

    One sample per (device, dtype, shape): its values are the number of arrays and their
    bytes (sample types ``allocations``/``count`` and ``space``/``bytes``), its stack the
    device and then the ``dtype[shape]``, its labels ``device`` and ``kind`` (``buffer``).
    Read it with ``pprof`` (``go tool pprof -top file``).

    Args:
      backend: a platform or backend name (``"cpu"``, ``"gpu"``, ``"numba"``...); None for
        every device of the default platform, as :func:`plax.live_arrays`.

    Returns:
      The profile's bytes (gzip).

    Raises:
      RuntimeError: no installed backend has that name.

    Example:
      >>> profile = jax.profiler.device_memory_profile()
      >>> profile[:2] == b"\\x1f\\x8b"   # gzip
      True
    """
    from plax.array_runtime import live_arrays
    from plax import pprof
    groups: dict[tuple, list[int]] = {}
    for x in live_arrays(backend):
        device = next(iter(x.devices()))
        key = (str(device), f"{x.dtype.name}[{','.join(map(str, x.shape))}]")
        count_bytes = groups.setdefault(key, [0, 0])
        count_bytes[0] += 1
        count_bytes[1] += int(x.nbytes)
    return gzip.compress(pprof.encode_profile(
        [("allocations", "count"), ("space", "bytes")],
        [([device, array], values, {"device": device, "kind": "buffer"})
         for (device, array), values in sorted(groups.items())],
        time_ns=time.time_ns()))


def save_device_memory_profile(filename: os.PathLike | str, backend: str | None = None) -> None:
    """Writes :func:`device_memory_profile` to ``filename``.

    Args:
      filename: the file to write.
      backend: as :func:`device_memory_profile`.

    Example:
      >>> import os, tempfile
      >>> path = os.path.join(tempfile.mkdtemp(), "memory.prof")
      >>> jax.profiler.save_device_memory_profile(path)
      >>> os.path.getsize(path) > 0
      True
    """
    profile = device_memory_profile(backend)
    with open(filename, "wb") as f:
        f.write(profile)

"""Where in the user's code a staged value comes from (``file:line:col (function)``), recorded
only on request.

JAX records a traceback with every equation; plax records nothing by default, so tracing pays
nothing. Inside :func:`capturing` (``print_saved_residuals`` uses it), the staging trace
records, for each value an equation outputs, the innermost frame outside plax's own packages
(:func:`record`), and ``eval_jaxpr`` re-enters a recorded equation's source while binding it
again (:func:`entered`), so values recomputed from a jaxpr traced earlier -- a ``checkpoint``
body's -- keep the line that created them.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
from typing import Iterator

# capturing[0]: how many threads capture now (read by the staging trace and eval_jaxpr: 0,
# the common case, costs them one list read); what a capture records is its thread's own
_count_lock = threading.Lock()
capturing: list[int] = [0]
_own_dirs: list[str] = []


class _Capture(threading.local):
    """The running thread's capture: another thread tracing meanwhile records nothing."""

    def __init__(self) -> None:
        self.active = False
        self.sources: dict[int, tuple] = {}  # id(Var) -> (Var, source): Var kept alive
        self.current: list[str] = []  # sources of equations evaluated again, innermost last
        self.boundary = None  # the frame that asked: frames from it outward are not searched


_capture = _Capture()


class SourceInfo(str):
    """``"file:line:col (function)"``, as JAX prints a user frame."""

    __slots__ = ()


def _package_dirs() -> list[str]:
    """The directories of plax and its plugin packages (``plax_*``): not user code."""
    dirs = []
    for name, module in sys.modules.copy().items():
        if "." in name or not (name == "plax" or name.startswith("plax_")):
            continue
        path = getattr(module, "__file__", None)
        if path:
            dirs.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return dirs


def user_frame_source() -> SourceInfo | None:
    """The innermost frame of the calling stack outside plax's packages, as
    ``file:line:col (function)``; None if there is none below the frame that started the
    capture (a value made by plax itself on the way, as JAX leaves it without a source)."""
    frame = sys._getframe(1)
    boundary = _capture.boundary
    while frame is not None and frame is not boundary:
        filename = frame.f_code.co_filename
        if not any(filename.startswith(d) for d in _own_dirs) and \
                not filename.startswith("<frozen "):
            line, col = frame.f_lineno, 0
            positions = getattr(frame.f_code, "co_positions", None)  # Python >= 3.11
            if positions is not None:
                pos = next(itertools.islice(positions(), frame.f_lasti // 2, None), None)
                if pos is not None and pos[0] is not None:
                    line, col = pos[0], pos[2] or 0
            # the qualified name, as JAX prints it (``outer.<locals>.f``)
            name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
            return SourceInfo(f"{filename}:{line}:{col} ({name})")
        frame = frame.f_back
    return None


def record(out_vars) -> None:
    """Records where the values ``out_vars`` (Vars of a staged equation) come from: the
    equation being evaluated again, else the user's frame."""
    cap = _capture
    if not cap.active:  # another thread is capturing, not this one
        return
    source = cap.current[-1] if cap.current else user_frame_source()
    if source is not None:
        for v in out_vars:
            cap.sources[id(v)] = (v, source)


def source_of(var) -> SourceInfo | None:
    """Where ``var`` was recorded to come from (inside :func:`capturing`), or None."""
    hit = _capture.sources.get(id(var))
    return hit[1] if hit is not None and hit[0] is var else None


@contextlib.contextmanager
def entered(eqn) -> Iterator[None]:
    """While ``eqn`` is evaluated again, equations staged count as coming from its source."""
    source = source_of(eqn.outvars[0]) if eqn.outvars else None
    if source is None:
        yield
        return
    current = _capture.current
    current.append(source)
    try:
        yield
    finally:
        current.pop()


@contextlib.contextmanager
def capturing_sources(boundary=None) -> Iterator[None]:
    """Records sources while the block runs, in the running thread (each thread has its own
    capture; the records are dropped at its end). ``boundary``: the frame of the code that asked;
    it and the frames calling it are never a value's source.

    Example:
      >>> with capturing_sources():
      ...     closed = jax.make_jaxpr(jnp.sin)(1.0)
      ...     source_of(closed.jaxpr.eqns[0].outvars[0])  # doctest: +SKIP
      '/path/to/script.py:2:13 (<module>)'
    """
    cap = _capture
    if cap.active:
        yield
        return
    _own_dirs[:] = _package_dirs()
    cap.boundary = boundary
    cap.active = True
    with _count_lock:
        capturing[0] += 1
    try:
        yield
    finally:
        with _count_lock:
            capturing[0] -= 1
        cap.active = False
        cap.boundary = None
        cap.sources.clear()
        cap.current.clear()

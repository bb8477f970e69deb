"""``plax.debug.breakpoint``: stop at run time (also under ``jit``) and inspect the values of
the function's local variables, as ``jax.debug.breakpoint`` does.

At trace time the breakpoint records the caller's frame (file, line, function, source) and
its local variables; array values (tracers under a transform) travel through a debug
callback, so the debugger opens when the program *runs*, with concrete values, once per call
(once per batch member under ``vmap``). What happens there is a debugger *backend*:

- ``"cli"`` (the default at a terminal): a small pdb-like prompt (``p expr``, ``pp expr``,
  ``l``/``list``, ``w``/``where``, ``c``/``continue``, ``q``/``quit``) evaluating in the
  frame's locals and globals;
- ``"record"`` (non-interactive, for tests and scripts): appends a :class:`BreakpointFrame`
  to :data:`records` and continues.

``PLAX_DEBUG_BREAKPOINT=record`` in the environment makes ``"record"`` the default; a plugin
adds a backend with :func:`register_backend`.
"""
from __future__ import annotations

import cmd
import linecache
import os
import pprint
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["BreakpointFrame", "breakpoint", "records", "register_backend"]


@dataclass
class BreakpointFrame:
    """One stop of a breakpoint: where it is, and the values of the locals at run time."""

    filename: str
    lineno: int
    function: str
    locals: dict[str, Any] = field(default_factory=dict)
    globals: dict[str, Any] = field(default_factory=dict, repr=False)

    def source(self, context: int = 5) -> str:
        """The source lines around the breakpoint, the current one marked ``->``."""
        lines = []
        for n in range(max(1, self.lineno - context), self.lineno + context + 1):
            text = linecache.getline(self.filename, n)
            if text:
                lines.append(f"{n:4d} {'->' if n == self.lineno else '  '} {text.rstrip()}")
        return "\n".join(lines)


records: list[BreakpointFrame] = []  # what the "record" backend saw, oldest first


def _record(frames: list[BreakpointFrame]) -> None:
    records.append(frames[0])


class _Prompt(cmd.Cmd):
    """The ``"cli"`` backend's prompt: a few pdb commands over the recorded frames."""

    prompt = "(plaxdb) "

    def __init__(self, frames: list[BreakpointFrame], stdin=None, stdout=None):
        super().__init__(stdin=stdin, stdout=stdout)
        self.frames = frames
        self.index = 0
        if stdin is not None:
            self.use_rawinput = False

    @property
    def frame(self) -> BreakpointFrame:
        return self.frames[self.index]

    def _eval(self, expr: str):
        return eval(expr, dict(self.frame.globals), dict(self.frame.locals))  # noqa: S307

    def preloop(self) -> None:
        self.do_where("")

    def default(self, line: str) -> bool:
        try:  # like pdb: anything else is a Python expression or statement
            exec(compile(line, "<plaxdb>", "single"), dict(self.frame.globals),  # noqa: S102
                 dict(self.frame.locals))
        except Exception as err:  # noqa: BLE001 (reported, as pdb does)
            print(f"*** {type(err).__name__}: {err}", file=self.stdout)
        return False

    def do_p(self, arg: str) -> bool:
        """p expr: print the value of expr."""
        try:
            print(repr(self._eval(arg)), file=self.stdout)
        except Exception as err:  # noqa: BLE001
            print(f"*** {type(err).__name__}: {err}", file=self.stdout)
        return False

    def do_pp(self, arg: str) -> bool:
        """pp expr: pretty-print the value of expr."""
        try:
            print(pprint.pformat(self._eval(arg)), file=self.stdout)
        except Exception as err:  # noqa: BLE001
            print(f"*** {type(err).__name__}: {err}", file=self.stdout)
        return False

    def do_list(self, arg: str) -> bool:
        """l(ist): the source around the breakpoint."""
        print(self.frame.source(), file=self.stdout)
        return False

    do_l = do_list

    def do_where(self, arg: str) -> bool:
        """w(here): the recorded frames, the current one marked."""
        for i, f in enumerate(self.frames):
            mark = ">" if i == self.index else " "
            print(f"{mark} {f.filename}({f.lineno}){f.function}()", file=self.stdout)
        return False

    do_w = do_where

    def do_up(self, arg: str) -> bool:
        """u(p): the calling frame."""
        self.index = min(self.index + 1, len(self.frames) - 1)
        return self.do_where("")

    do_u = do_up

    def do_down(self, arg: str) -> bool:
        """d(own): the called frame."""
        self.index = max(self.index - 1, 0)
        return self.do_where("")

    do_d = do_down

    def do_continue(self, arg: str) -> bool:
        """c(ontinue): leave the debugger and go on running."""
        return True

    do_c = do_cont = do_continue

    def do_quit(self, arg: str) -> bool:
        """q(uit): stop the program (raises ``bdb.BdbQuit``)."""
        import bdb
        raise bdb.BdbQuit

    do_q = do_exit = do_quit

    def do_EOF(self, arg: str) -> bool:  # noqa: N802 (cmd's name)
        return True


def _cli(frames: list[BreakpointFrame]) -> None:
    _Prompt(frames).cmdloop()


_backends: dict[str, Callable[[list[BreakpointFrame]], None]] = {"cli": _cli, "record": _record}


def register_backend(name: str, run: Callable[[list[BreakpointFrame]], None]) -> None:
    """Adds a debugger backend: ``run(frames)`` is called at each stop, innermost frame
    first, and returns to let the program go on.

    Example:
      >>> register_backend("silent", lambda frames: None)
    """
    _backends[name] = run


def _default_backend() -> str:
    return os.environ.get("PLAX_DEBUG_BREAKPOINT") or "cli"


def _is_array_like(v: Any) -> bool:
    from plax.array import Array
    from plax.core.trace import Tracer
    return isinstance(v, (Array, Tracer))


def _frames(num_frames: int | None, filter_frames: bool) -> list[tuple[Any, dict, dict]]:
    """``(frame, dynamic locals, static locals)`` of the callers of breakpoint, innermost
    first; with ``filter_frames`` plax's own frames are skipped."""
    root = os.path.dirname(os.path.abspath(__file__))
    out = []
    frame = sys._getframe(2)
    while frame is not None and (num_frames is None or len(out) < num_frames):
        inside = os.path.abspath(frame.f_code.co_filename).startswith(root)
        if not (filter_frames and inside):
            dynamic = {k: v for k, v in frame.f_locals.items() if _is_array_like(v)}
            static = {k: v for k, v in frame.f_locals.items() if k not in dynamic}
            out.append((frame, dynamic, static))
        frame = frame.f_back
    return out


def breakpoint(*, backend: str | None = None, filter_frames: bool = True,  # noqa: A001
               num_frames: int | None = None, ordered: bool = False, token=None,
               **kwargs: Any) -> None:
    """Enters a debugger when the program reaches this point at run time (under ``jit``
    too), with the local variables' values.

    Args:
      backend: the debugger backend: ``"cli"`` (interactive prompt), ``"record"`` (append
        the frame to ``plax.debugger.records`` and go on), or one added with
        :func:`register_backend`. Default: ``PLAX_DEBUG_BREAKPOINT``, else ``"cli"``.
      filter_frames: skip plax's own frames.
      num_frames: how many calling frames to record (None: all; only the innermost one's
        arrays get run-time values, the others show what they held at trace time).
      ordered: keep breakpoints in program order (plax runs callbacks in order anyway).
      token: accepted for JAX compatibility (JAX's ordering token); must be None.
      **kwargs: passed to the backend as JAX does (ignored by the built-in ones).

    Example:
      >>> def f(x):
      ...     y = jnp.sin(x)
      ...     plax.debug.breakpoint(backend="record")
      ...     return y
      >>> _ = plax.jit(f)(0.0)
      >>> plax.debugger.records[-1].locals["y"]
      Array(0., dtype=float32)
    """
    if token is not None:
        raise ValueError("debug.breakpoint: the token argument is not supported by plax "
                         "(callbacks run in program order); pass token=None.")
    name = backend or _default_backend()
    if name not in _backends:
        raise ValueError(f"debug.breakpoint: unknown backend {name!r}; available: "
                         f"{sorted(_backends)} (add one with "
                         "plax.debugger.register_backend).")
    run = _backends[name]
    captured = _frames(num_frames, filter_frames)
    if not captured:
        return
    infos = [(f.f_code.co_filename, f.f_lineno, f.f_code.co_name, static, f.f_globals)
             for f, _, static in captured]
    names = sorted(captured[0][1])
    values = [captured[0][1][k] for k in names]

    def stop(*vals):
        frames = []
        for i, (filename, lineno, function, static, globs) in enumerate(infos):
            local = dict(static)
            if i == 0:
                local.update(zip(names, vals))
            else:
                local.update(captured[i][1])
            frames.append(BreakpointFrame(filename, lineno, function, local, globs))
        run(frames)

    from plax.debug import callback
    callback(stop, *values, ordered=ordered)

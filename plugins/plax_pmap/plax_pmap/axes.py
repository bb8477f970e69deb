"""Named axes: which axis names are bound where, and their sizes.

An axis name is bound by a ``vmap(axis_name=...)`` level (a :class:`BatchTrace` on the trace
stack, whose payload knows its size) or by ``pmap``/``shard_map`` while they trace the
per-device program (an entry of :data:`_env`). Collectives look names up here: an unbound
name is JAX's ``NameError``.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Hashable, Iterator, Sequence

from plax.core import trace as _trace
from plax.core.trace import register_trace_context
from plax.transforms.batching import BatchTrace


class _Env(threading.local):
    def __init__(self):
        self.frames: list[dict] = []  # {name: size}, outermost first


_env = _Env()


@contextlib.contextmanager
def axis_env(sizes: dict) -> Iterator[None]:
    """Binds the axis names of ``sizes`` (``{name: size}``) while a per-device program is
    traced by pmap or shard_map."""
    _env.frames.append(dict(sizes))
    try:
        yield
    finally:
        _env.frames.pop()


def _env_key() -> tuple:
    """The names pmap/shard_map bind while they trace, with their sizes: part of the trace
    context, so that a jitted function using ``all_gather`` under pmaps of two sizes is traced
    once per size (vmap's names are the core's contribution)."""
    return tuple([tuple(frame.items()) for frame in _env.frames])


register_trace_context(_env_key)


def _batch_mains():
    """The active vmap levels with an axis name, innermost first."""
    return [m for m in reversed(_trace.state.stack)
            if m.trace_type is BatchTrace and m.payload.name is not None]


def bound_names() -> list:
    names = [m.payload.name for m in reversed(_batch_mains())]
    for frame in _env.frames:
        names.extend(frame)
    return names


def unbound_error(name: Hashable) -> NameError:
    return NameError(f"unbound axis name: {name}. The following axis names (e.g. defined by "
                     f"pmap, shard_map or vmap(axis_name=...)) are available to collective "
                     f"operations: {bound_names()}")


def axis_size(name: Hashable) -> int:
    """The size of the innermost binding of ``name``.

    Raises:
      NameError: ``name`` is not bound (JAX's message).
    """
    for m in _batch_mains():
        if m.payload.name == name:
            return int(m.payload.size)
    for frame in reversed(_env.frames):
        if name in frame:
            return int(frame[name])
    raise unbound_error(name)


def batch_main_for(axes: Sequence[Hashable], args: Sequence[Any]):
    """The innermost vmap level binding one of ``axes`` that lies above every operand's
    trace (and the dynamic trace): the collective must be processed there, with operands of
    lower levels entering it unbatched. None when the operands' own traces come first."""
    mains = _batch_mains()
    if not mains:
        return None
    top = _trace.state.dynamic.level
    for x in args:
        if isinstance(x, _trace.Tracer):
            top = max(top, x._trace.main.level)
    for m in mains:
        if m.level <= top:
            return None
        if m.payload.name in axes:
            return m
    return None


def as_axes(axis_name: Any) -> tuple:
    """``axis_name`` (a name or a tuple/list of names) as a tuple of names."""
    if isinstance(axis_name, (tuple, list)):
        return tuple(axis_name)
    return (axis_name,)

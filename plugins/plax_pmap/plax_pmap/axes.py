"""Named axes: which axis names are bound where, and their sizes.

An axis name is bound by a ``vmap(axis_name=...)`` level (a :class:`BatchTrace` on the trace
stack, whose payload knows its size) or by ``pmap``/``shard_map`` while they trace the
per-device program (a frame of :mod:`plax.core.axis_env`). Collectives look names up
here: an unbound name is JAX's ``NameError``.
"""
from __future__ import annotations

from typing import Any, Hashable

from plax.core import trace as _trace
from plax.core.axis_env import bound_frames
from plax.transforms.batching import BatchTrace


def _batch_mains():
    """The active vmap levels with an axis name, innermost first."""
    return [m for m in reversed(_trace.state.stack)
            if m.trace_type is BatchTrace and m.payload.name is not None]


def bound_names() -> list:
    names = [m.payload.name for m in reversed(_batch_mains())]
    for frame in bound_frames():
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
    for frame in reversed(bound_frames()):
        if name in frame:
            return int(frame[name])
    raise unbound_error(name)


def as_axes(axis_name: Any) -> tuple:
    """``axis_name`` (a name or a tuple/list of names) as a tuple of names."""
    if isinstance(axis_name, (tuple, list)):
        return tuple(axis_name)
    return (axis_name,)

"""Axis names bound while a program is traced, outside any ``vmap``: by ``pmap`` and
``shard_map`` (plugins) while they trace the per-device program, and by
``make_jaxpr(f, axis_env=[(name, size), ...])``.

``vmap(axis_name=...)`` binds its name through its level on the trace stack instead (see
:mod:`plax.transforms.batching`). The frames here are part of the trace context, so a jitted
function is traced again under another binding.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Hashable, Iterator, Mapping

from plax.core.trace import register_trace_context


class _Env(threading.local):
    def __init__(self):
        self.frames: list[dict] = []  # {name: size}, outermost first


_env = _Env()


@contextlib.contextmanager
def axis_env(sizes: Mapping[Hashable, int]) -> Iterator[None]:
    """Binds the axis names of ``sizes`` (``{name: size}``) for the duration of the block.

    Args:
      sizes: the names to bind, with their sizes.

    Example:
      >>> with axis_env({"i": 4}):
      ...     bound_frames()
      [{'i': 4}]
    """
    _env.frames.append(dict(sizes))
    try:
        yield
    finally:
        _env.frames.pop()


def bound_frames() -> list[dict]:
    """The active bindings, outermost first: one ``{name: size}`` dict per block."""
    return _env.frames


def _env_key() -> tuple:
    # the names bound with their sizes: a jitted function using all_gather under bindings of
    # two sizes is traced once per size
    return tuple([tuple(frame.items()) for frame in _env.frames])


register_trace_context(_env_key)

"""Where plax's internals report timed events while ``plax.profiler`` traces.

``session[0]`` is the running profiler session, or None: a call site checks it before timing
anything, so nothing is spent while no trace runs (one list read). The session (see
:mod:`plax.profiler`) has ``add(name, category, start_ns, end_ns, args)`` and
``run(name, entry, bufs)`` (a compiled program's execution, timed).
"""
from __future__ import annotations

from typing import Any

#: the active ``plax.profiler`` session, or None
session: list[Any] = [None]

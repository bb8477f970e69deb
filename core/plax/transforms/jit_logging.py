"""What ``jit`` logs when asked: ``jax_log_compiles`` (each trace and compile, with the
argument types) and ``jax_explain_cache_misses`` (why a function was traced again: which
argument's shape, dtype, weak type, static value or tree structure changed).

Both go through the ``logging`` module at level WARNING, as JAX's do, so they show without
any logging set-up. Only the cache-miss path of ``jit`` calls in here.
"""
from __future__ import annotations

import inspect
import logging
import os
import sys
from typing import Any, Callable, Sequence

logger = logging.getLogger("plax.jit")


def _where(fun: Callable) -> str:
    """``file:line`` of a function's definition, or ``'unknown'``."""
    try:
        code = inspect.unwrap(fun).__code__
        return f"{code.co_filename}:{code.co_firstlineno}"
    except (AttributeError, ValueError):
        return "unknown"


def _call_site() -> str:
    """``file:line (function)`` of the first frame outside plax: the user's call."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(root):
        frame = frame.f_back
    if frame is None:
        return "unknown"
    return f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"


def _short(aval: Any) -> str:
    short = aval.str_short() if hasattr(aval, "str_short") else str(aval)
    return short + ("{weak_type=True}" if getattr(aval, "weak_type", False) else "")


def log_trace(name: str, seconds: float) -> None:
    """``jax_log_compiles``: a function was traced."""
    logger.warning("Finished tracing + transforming %s for jit in %.9f sec", name, seconds)


def log_compile(name: str, avals: Sequence[Any], backend: str, seconds: float) -> None:
    """``jax_log_compiles``: a traced function was compiled for a backend."""
    types = ", ".join(_short(a) for a in avals)
    logger.warning("Compiling jit(%s) with global shapes and types (%s). Backend: %s.", name,
                   types, backend)
    logger.warning("Finished compilation of jit(%s) in %.9f sec", name, seconds)


def explain_miss(fun: Callable, debug: Any, key: tuple, previous: Sequence[tuple]) -> None:
    """``jax_explain_cache_misses``: logs why ``key`` (treedef, avals, static, nargs, flags,
    context) matched none of the ``previous`` keys of the same function."""
    name = getattr(fun, "__name__", type(fun).__name__)
    lines = [f"TRACING CACHE MISS at {_call_site()}:"]
    if not previous:
        lines += ["  never seen function:", f"    {name} id={id(fun)} defined at {_where(fun)}"]
        logger.warning("\n".join(lines))
        return
    lines.append(f"  for {name} defined at {_where(fun)}")
    best = min((_differences(debug, key, old) for old in previous), key=len)
    lines.append("  all previously seen cache keys differ. For the closest previous key:")
    lines += best or ["  different configuration or tracing context (x64, PRNG layout, "
                      "axis names)"]
    logger.warning("\n".join(lines))


def _differences(debug: Any, new: tuple, old: tuple) -> list[str]:
    tree, avals, static = new[0], new[1], new[2]
    o_tree, o_avals, o_static = old[0], old[1], old[2]
    out: list[str] = []
    if tree != o_tree:
        out += ["  different input pytree:", f"  * now {tree} and before {o_tree}"]
    elif avals != o_avals:
        try:
            debug.in_tree = tree
            names = debug.arg_names()
        except Exception:  # noqa: BLE001 (a message must not fail)
            names = [f"[{i}]" for i in range(len(avals))]
        out.append("  different input types:")
        for n, a, b in zip(names, avals, o_avals):
            if a != b or getattr(a, "weak_type", False) != getattr(b, "weak_type", False):
                out.append(f"  * at {n}, now {_short(a)} and before {_short(b)}")
    if static != o_static:
        out.append("  different static arguments:")
        old_static = dict(o_static)
        try:
            params = list(inspect.signature(debug.fun).parameters)
        except (TypeError, ValueError):
            params = []
        for k, v in static:
            if k not in old_static or old_static[k] != v:
                where = (params[k] if isinstance(k, int) and k < len(params) else
                         f"argument {k}" if isinstance(k, int) else k)
                before = getattr(old_static[k], "value", old_static[k]) \
                    if k in old_static else "absent"
                out.append(f"  * at {where}, now {getattr(v, 'value', v)!r} and before "
                           f"{before!r}")
    if new[3] != old[3]:
        out.append(f"  different number of positional arguments: now {new[3]} and before "
                   f"{old[3]}")
    return out

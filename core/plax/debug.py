"""``plax.debug``: printing and callbacks that run when a program runs, not when it is traced.

Under ``jit`` they print once per call (never at trace time, and a cached program prints
again each time it runs); under ``vmap`` once per batch member, in order; under ``grad``
they see the primal values.
"""
from __future__ import annotations

import builtins
from typing import Any, Callable

import numpy as np

from plax.debugger import breakpoint  # noqa: A004 (JAX's name)
from plax.lax.callbacks import debug_callback as _debug_callback

__all__ = ["breakpoint", "callback", "print", "visualize_array_sharding", "visualize_sharding"]


def callback(callback: Callable[..., Any], *args: Any, ordered: bool = False,
             **kwargs: Any) -> None:
    """Calls ``callback(*args, **kwargs)`` on the host each time the program runs.

    The array leaves of ``args`` and ``kwargs`` reach ``callback`` as plax Arrays with their
    run-time values; other leaves (strings, ...) as they were given. What ``callback``
    returns is ignored. The call survives ``jit`` (it is an effectful primitive that
    dead-code elimination keeps), runs once per batch member under ``vmap`` and sees primal
    values under differentiation.

    Args:
      callback: the host function.
      *args: its positional arguments (pytrees).
      **kwargs: its keyword arguments (pytrees).
      ordered: keep the calls in program order (plax runs callbacks in program order
        anyway).

    Example:
      >>> _ = plax.jit(lambda x: plax.debug.callback(lambda v: print(v * 2), x) or x)(1.0)
      2.0
    """
    _debug_callback(callback, *args, ordered=ordered, **kwargs)


def print(fmt: str, *args: Any, ordered: bool = False, **kwargs: Any) -> None:
    """Prints ``fmt.format(*args, **kwargs)`` with the run-time values of the arrays.

    Arrays print as JAX prints them (``str`` of an Array is NumPy's, so ``{}`` of a vector
    gives ``[0. 1. 2.]`` and a format spec such as ``{:.2f}`` applies to scalars), with
    NumPy's print options as they were when the function was traced.

    Args:
      fmt: a ``str.format`` template.
      *args: the positional values to format (pytrees of arrays and other values).
      **kwargs: the keyword values to format.
      ordered: keep the prints in program order.

    Example:
      >>> _ = plax.jit(lambda x: plax.debug.print("x = {x}", x=x) or x)(1.0)
      x = 1.0
    """
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print fmt must be a string, got {type(fmt).__name__}")
    options = np.get_printoptions()

    def _print(*a, **k):
        with np.printoptions(**options):
            builtins.print(fmt.format(*a, **k))

    _print.__name__ = "debug_print"
    _debug_callback(_print, *args, ordered=ordered, **kwargs)


def _sharding_table(shape, sharding) -> str:
    """The text table of :func:`visualize_array_sharding` for an array of ``shape``."""
    shape = tuple(shape)
    if len(shape) > 2:
        raise ValueError(f"visualize_array_sharding shows arrays of rank 1 or 2, got shape {shape}")
    shape2 = (1,) * (2 - len(shape)) + shape
    cells: dict = {}
    for device, index in sharding.devices_indices_map(shape).items():
        index = (slice(None),) * (2 - len(shape)) + tuple(index)
        key = []
        for i, n in zip(index, shape2):
            if isinstance(i, slice):
                key.append(i.indices(n)[:2])
            else:
                key.append((i, i + 1))
        cells.setdefault(tuple(key), []).append(device)
    rows = sorted({k[0] for k in cells})
    cols = sorted({k[1] for k in cells})

    def label(devs) -> str:
        kinds = sorted({d.platform.upper() for d in devs})
        return f"{'/'.join(kinds)} {','.join(str(d.id) for d in sorted(devs, key=lambda d: d.id))}"

    texts = {k: label(v) for k, v in cells.items()}
    width = max(len(t) for t in texts.values()) + 4
    sep = "+" + "+".join("-" * width for _ in cols) + "+"
    lines = [sep]
    for r in rows:
        lines.append("|" + "|".join(texts.get((r, c), "").center(width) for c in cols) + "|")
        lines.append(sep)
    return "\n".join(lines)


def visualize_array_sharding(arr: Any, *, use_color: bool = False, scale: float = 1.0,
                             min_width: int = 9, max_width: int = 80) -> None:
    """Prints which device holds which block of a rank-1 or rank-2 array, as a text table
    (one cell per block, naming the devices that hold it; replicated blocks list several).

    Args:
      arr: a plax Array.
      use_color, scale, min_width, max_width: accepted for JAX compatibility (plax prints
        plain text, without ``rich``).

    Example:
      >>> plax.debug.visualize_array_sharding(jnp.ones(4))
      +---------+
      |  CPU 0  |
      +---------+
    """
    builtins.print(_sharding_table(np.shape(arr), arr.sharding))


def visualize_sharding(shape, sharding, **kwargs) -> None:
    """Prints the table of :func:`visualize_array_sharding` for an array of ``shape`` placed
    by ``sharding``."""
    builtins.print(_sharding_table(tuple(shape), sharding))

"""``plax.debug``: printing and callbacks that run when a program runs, not when it is traced.

Under ``jit`` they print once per call (never at trace time, and a cached program prints
again each time it runs); under ``vmap`` once per batch member, in order; under ``grad``
they see the primal values.
"""
from __future__ import annotations

import builtins
from typing import Any, Callable

import numpy as np

from plax.lax.callbacks import debug_callback as _debug_callback

__all__ = ["callback", "print"]


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
      *args, **kwargs: its arguments (pytrees).
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
      *args, **kwargs: the values to format (pytrees of arrays and other values).
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

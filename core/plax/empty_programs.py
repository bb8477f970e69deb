"""Programs whose outputs are all empty are not compiled.

A program every output of which has size 0 (``random.normal(key, (0,))``, a slice to
nothing) computes nothing anyone can read, so a compiling backend gains nothing from its
kernels but their compilation (the Numba backend spent ~10 CPU s on two such programs).
:func:`plax.transforms.call.compile_closed` asks :func:`computes_nothing` and, where it
holds, hands out :func:`empty_outputs` instead of the backend's executable: the outputs'
buffers, of the right shapes and dtypes on the right device, made once by the backend.

Only a pure program is skipped: one holding an effectful equation (a debug print, an
``io_callback``, a ref's effect, a checkify check; see :mod:`plax.core.effects`) or a
``pure_callback`` (the user's function runs and its results are checked) anywhere, sub-jaxprs
included, is compiled and run as before. Errors of tracing were raised before compilation.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from plax.core.effects import jaxpr_has_effects
from plax.core.jaxpr import Jaxpr, sub_jaxprs


def _has_host_callback(jaxpr: Jaxpr) -> bool:
    """Whether an equation of ``jaxpr`` or of a sub-jaxpr calls the user's function on the
    host (``pure_callback``: the effectful callbacks are :mod:`plax.core.effects`')."""
    from plax.lax.callbacks import pure_callback_p
    return any(e.primitive is pure_callback_p or any(_has_host_callback(s)
                                                     for s in sub_jaxprs(e.params))
               for e in jaxpr.eqns)


def computes_nothing(jaxpr: Jaxpr) -> bool:
    """Whether running ``jaxpr`` (a program as a backend receives it) can be skipped: every
    output has size 0 and nothing in it acts on the world.

    Args:
      jaxpr: the program, prepared for a backend
        (:func:`plax.core.passes.prepare_for_backend`).

    Returns:
      True for a pure program whose outputs are all empty (or that has none).

    Example::

      jaxpr, _ = prepare_for_backend(plax.make_jaxpr(lambda x: x[:0] * 2)(x))
      computes_nothing(jaxpr)   # True
    """
    if any(math.prod(v.aval.shape) for v in jaxpr.outvars):
        return False
    return not jaxpr_has_effects(jaxpr) and not _has_host_callback(jaxpr)


def empty_outputs(jaxpr: Jaxpr, backend, device) -> Callable:
    """The executable of a program that :func:`computes_nothing`: it returns the outputs'
    empty buffers, put on ``device`` by ``backend`` once (an empty buffer holds nothing to
    change, so every call may return the same ones) and ignores its operands.

    Args:
      jaxpr: the program (its outputs' avals give the shapes and dtypes).
      backend: the backend the program was to be compiled by.
      device: the device it runs on.

    Returns:
      A callable taking the program's buffers and returning the list of its outputs.

    Example::

      run = empty_outputs(jaxpr, backend, device)
      run(*buffers)   # [array([], dtype=float32)]
    """
    buffers = [backend.put(np.empty(tuple(v.aval.shape), np.dtype(v.aval.dtype)), device)
               for v in jaxpr.outvars]

    def run(*_buffers):
        return list(buffers)

    return run

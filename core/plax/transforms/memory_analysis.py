"""``Compiled.memory_analysis()``: the bytes a compiled program takes, from its jaxpr.

Arguments and outputs are exact. Temporaries come from the values' lifetimes: each value an
equation makes is taken to be allocated there and freed after its last use, so
``temp_size_in_bytes`` is the most bytes of intermediate values alive at once. Backends do at
most that (the Numba backend fuses equations into kernels that never allocate some of them);
values inside a control-flow body count as their equation's outputs.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from plax.core.jaxpr import ClosedJaxpr, Literal


def _nbytes(aval) -> int:
    shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
    if shape is None or not isinstance(dtype, np.dtype):
        return 0  # tokens, refs' effects: no buffer of their own
    return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


def analyse(closed: ClosedJaxpr, donated: Sequence[bool], code_size: int):
    """A :class:`plax.stages.CompiledMemoryStats` for ``closed``.

    Args:
      closed: the program.
      donated: per input, whether it is donated (its buffer may hold an output, and is freed
        after its last use).
      code_size: the size of the generated code, in bytes.

    Returns:
      The statistics.

    Example:
      >>> stats = jax.jit(lambda x: jnp.sin(x) * 2).lower(jnp.ones(4)).compile().memory_analysis()
      >>> stats.argument_size_in_bytes, stats.output_size_in_bytes
      (16, 16)
    """
    from plax.stages import CompiledMemoryStats
    jaxpr = closed.jaxpr
    ins = list(jaxpr.invars)
    outs = [v for v in jaxpr.outvars if not isinstance(v, Literal)]
    argument = sum(_nbytes(v.aval) for v in ins)
    output = sum(_nbytes(v.aval) for v in jaxpr.outvars)
    # donated inputs alias outputs of the same type, each at most once
    free = {}
    for v in outs:
        key = (v.aval.shape, v.aval.dtype)
        free[key] = free.get(key, 0) + 1
    alias = 0
    for v, d in zip(ins, donated):
        key = (v.aval.shape, v.aval.dtype)
        if d and free.get(key, 0):
            free[key] -= 1
            alias += _nbytes(v.aval)
    last_use: dict = {}
    for i, eqn in enumerate(jaxpr.eqns):
        for v in eqn.invars:
            if not isinstance(v, Literal):
                last_use[v] = i
    kept = set(outs) | set(ins)  # outputs live to the end; inputs are the caller's
    live = peak_temp = outputs_made = 0
    peak = argument
    for i, eqn in enumerate(jaxpr.eqns):
        live += sum(_nbytes(v.aval) for v in eqn.outvars if v not in kept)
        outputs_made += sum(_nbytes(v.aval) for v in eqn.outvars if v in kept)
        peak_temp = max(peak_temp, live)
        peak = max(peak, argument + live + outputs_made)
        for v in set(eqn.invars):
            if not isinstance(v, Literal) and last_use.get(v) == i and v not in kept:
                live -= _nbytes(v.aval)
        for v in eqn.outvars:  # a value nothing reads is freed at once
            if v not in kept and v not in last_use:
                live -= _nbytes(v.aval)
    peak = max(peak, argument + output) - alias  # a donated input's buffer holds an output
    return CompiledMemoryStats(
        argument_size_in_bytes=argument, output_size_in_bytes=output,
        alias_size_in_bytes=alias, temp_size_in_bytes=peak_temp,
        generated_code_size_in_bytes=code_size, peak_memory_in_bytes=peak)

"""A fusion cluster holding reference-only equations (:func:`plax_numba.codegen.reference_only`:
``log1p``, whose bits must be NumPy's own) as one native kernel that runs the cluster chunk by
chunk.

The cluster is cut at those equations into segments; each run of other equations is a serial
kernel of its own (:func:`plax_numba.codegen.plan_cluster` with ``out_params``, writing into
the buffers it is given), and a ``log1p`` is NumPy's loop called natively on the chunk
(:func:`plax_numba.numpy_calls.log1p_into`). The generated ``kernel`` loops over chunks of
:data:`CHUNK` elements, on numba's threads where the cluster is large enough
(``prange``), and takes each chunk through every segment while it is in cache: no
intermediate of the cluster's size is written to memory and no Python runs per chunk.
(A Python loop over the chunks did the same on worker threads, paying ~25 us of interpreter
work per chunk under the GIL: ``log1p(x / 2) * 2 + 1`` on 1M float32 took 0.44-0.57 ms
against JAX's 0.40 ms, on 2 cores.) Elementwise work on chunks gives the bits of whole
arrays, so the results are the NumPy backend's bit for bit.
"""
from __future__ import annotations

import re
from typing import Callable

import numpy as np

from plax.config import env_number
from plax import lax
from plax.lowering import sub_cluster

from plax_numba.codegen import (KernelPlan, Unsupported, _Input, _preallocated_plan, _t,
                                plan_cluster, reference_only)

#: elements per chunk: a chunk's intermediates stay in the core's L2 cache, and both threads
#: get work from 2**15 elements on. (Process CPU time of ``log1p(x / 2) * 2 + 1`` on 1M
#: float32 on one thread, loaded 2-core host, best of 40 batches, two rounds: 0.38-0.41 ms
#: for chunks of 2**12, 0.43-0.46 for 2**13, 0.38-0.42 for 2**14, 0.39 for 2**16; the three
#: passes on whole arrays 0.94 ms.)
CHUNK = env_number("PLAX_NUMBA_CHUNK", 1 << 14)


def split_cluster(cluster, cut: Callable = reference_only) -> list:
    """``cluster`` cut at the equations where ``cut(eqn)`` holds (by default the
    reference-only ones, :func:`codegen.reference_only`): ``[(equations, sub_cluster)]`` in
    order, each such equation alone and the runs between them together; a part's
    sub-cluster has for outputs what a later part or the cluster's reader needs. (The
    emitter's segments, a native loop's parts, this module's kernel.)

    Example::

      for eqns, sub in split_cluster(cluster):
          ...   # len(eqns) == 1 and reference_only(eqns[0]): NumPy's loop
    """
    parts, run = [], []
    for eqn in cluster.eqns:
        if cut(eqn):
            if run:
                parts.append(run)
            parts.append([eqn])
            run = []
        else:
            run.append(eqn)
    if run:
        parts.append(run)
    needed_after = [{id(v) for v in cluster.outputs}]
    for part in reversed(parts[1:]):  # what each part's successors read
        needed_after.insert(0, needed_after[0] | {id(v) for e in part for v in e.invars})
    return [(part, sub_cluster(part, cluster.shape, later))
            for part, later in zip(parts, needed_after)]


def _native_call(eqn) -> str:
    """The native call computing a reference-only equation on a chunk (``log1p_into(x,
    out)``); Unsupported for any other."""
    dtype = np.dtype(eqn.invars[0].aval.dtype)
    if eqn.primitive is not lax.log1p_p or dtype not in (np.float32, np.float64):
        raise Unsupported(f"{eqn.primitive.name} on {dtype} between chunk kernels")
    return "log1p_into"


def plan_split(cluster, parallel: bool | None = None) -> KernelPlan:
    """The plan of ``cluster`` (holding a reference-only equation) as one chunked kernel.

    Args:
      cluster: a flat cluster over at least :data:`plax_numba.codegen.PARALLEL_MIN`
        elements without reductions, every input of its shape or rank 0.
      parallel: False: the chunks run in order on the calling thread (a program whose BLAS
        threads hold the cores); otherwise on numba's threads.

    Returns:
      A :class:`~plax_numba.codegen.KernelPlan` with ``out_params``: its wrapper allocates
      the outputs and calls ``kernel(*inputs, *outputs, n)`` (and ``base`` after ``n``
      where a segment computes an ``iota``).

    Raises:
      Unsupported: the cluster or one of its segments is not of that form.

    Example::

      plan = plan_split(cluster)   # random.normal's erf_inv around NumPy's log1p
      text = cache.module_source(plan.source, plan.primitives)
    """
    shape = tuple(cluster.shape)
    if not shape or any(a.aval.shape and tuple(a.aval.shape) != shape
                        for a in cluster.inputs):
        raise Unsupported("a split cluster with broadcast operands")
    inputs = [_Input(a, f"a{i}", "array" if a.aval.shape else "scalar",
                     np.dtype(a.aval.dtype), 1 if a.aval.shape else 0)
              for i, a in enumerate(cluster.inputs)]
    # each value's expression on the current chunk
    names = {id(inp.atom): (f"{inp.name}[lo:hi]" if inp.kind == "array" else inp.name)
             for inp in inputs}
    final = {id(v): j for j, v in enumerate(cluster.outputs)}
    helpers, body, index_base = [], [], False
    for s, (seg, sub) in enumerate(split_cluster(cluster)):
        if any(tuple(v.aval.shape) != shape for v in sub.outputs):
            raise Unsupported("a value of another shape between chunk kernels")
        missing = [v for v in sub.inputs if id(v) not in names]
        if missing:
            raise Unsupported(f"an operand the chunk loop does not hold: {missing[0]}")
        outs = []
        for v in sub.outputs:
            if id(v) in final:
                names[id(v)] = f"o{final[id(v)]}[lo:hi]"
            else:
                names[id(v)] = f"v{len(names)}"
                body.append(f"{names[id(v)]} = np.empty(m, {_t(v.aval.dtype)})")
            outs.append(names[id(v)])
        args = [names[id(v)] for v in sub.inputs]
        if len(seg) == 1 and reference_only(seg[0]):
            if not outs:
                continue
            body.append(f"{_native_call(seg[0])}({args[0]}, {outs[0]})")
            continue
        plan = plan_cluster(sub, preallocate=True, parallel=False)
        if not plan.out_params or plan.source.count("def ") != 1:
            raise Unsupported("a segment the chunk kernels do not express")
        helpers.append(re.sub(r"^def kernel\(", f"def segment{s}(", plan.source, flags=re.M))
        extra = ["base + lo"] if plan.index_base else []
        index_base = index_base or plan.index_base
        body.append(f"segment{s}({', '.join(args + outs + ['m'] + extra)})")
    params = ([inp.name for inp in inputs] + [f"o{j}" for j in range(len(cluster.outputs))]
              + ["n"] + (["base"] if index_base else []))
    loop = "range" if parallel is False else "prange"
    lines = [f"@njit(**{'_OPTIONS' if parallel is False else '_PARALLEL'})",
             f"def kernel({', '.join(params)}):",
             f"    for c in {loop}((n + {CHUNK - 1}) // {CHUNK}):",
             f"        lo = c * {CHUNK}",
             f"        hi = min(lo + {CHUNK}, n)",
             "        m = hi - lo"]
    lines += ["        " + line for line in body]
    lines.append("    return 0")
    source = "\n".join(helpers) + "\n" + "\n".join(lines) + "\n"
    out_dtypes = [np.dtype(v.aval.dtype) for v in cluster.outputs]
    return _preallocated_plan(source, inputs, cluster, shape, out_dtypes, index_base)

"""Control flow on the GPU as host loops over compiled bodies.

``cond``, ``while`` and ``scan`` hold sub-jaxprs. The CuPy backend compiles each body once
(with its own ``compile``: fused kernels, cuBLAS...) and drives it from Python:

* ``cond``: the branch index is read to the host (one device synchronisation), then the
  chosen branch runs;
* ``while``: each iteration runs the compiled condition, reads its boolean to the host (one
  synchronisation per iteration) and runs the compiled body;
* ``scan``: ``length`` calls of the compiled body, slicing ``xs`` on the device (views, no
  copy) and stacking the per-step ``ys`` at the end (one copy); no synchronisation at all.

The cost is a Python call sequence per iteration (tens of microseconds with kernel launches)
plus, for ``cond`` and ``while``, a host round trip per decision. A ``scan`` whose body is small
does not come here: it runs as one device-side loop in one kernel (:mod:`plax_cupy.scan_kernel`,
docs/gpu.md); this loop is for the bodies that kernel declines. The functions here are written against a small interface
(:class:`BodyRunner`), so the logic is unit-tested on the CPU with the NumPy backend.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable


class BodyRunner:
    """Compiles and runs sub-jaxprs on one device of one backend.

    Args:
      backend: the backend whose ``compile`` builds the bodies (and whose ``put`` places their
        constants).
      device: the device they run on.
      read_scalar: ``fn(buffer) -> Python scalar`` (a device-to-host read for a GPU).
      stack: ``fn(list of buffers) -> buffer`` stacking along a new leading axis.
    """

    def __init__(self, backend, device, read_scalar: Callable[[Any], Any],
                 stack: Callable[[list], Any]):
        self.backend, self.device = backend, device
        self.read_scalar, self.stack = read_scalar, stack
        self._compiled: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    def run(self, closed, *buffers) -> list:
        """Runs the ClosedJaxpr ``closed`` on ``buffers``; returns its output buffers."""
        entry = self._compiled.get(closed)
        if entry is None:
            from plax.transforms.call import compile_closed
            entry = self._compiled[closed] = compile_closed(closed, self.backend, self.device)
        return list(entry.executable(*entry.const_bufs, *buffers))


def run_cond(runner: BodyRunner, index, *operands, branches) -> list:
    """``cond``: reads the index (clamped into range, as XLA does) and runs that branch."""
    i = min(max(int(runner.read_scalar(index)), 0), len(branches) - 1)
    return runner.run(branches[i], *operands)


def run_while(runner: BodyRunner, *args, cond_jaxpr, body_jaxpr, cond_nconsts: int,
              body_nconsts: int) -> list:
    """``while``: the compiled condition, read to the host, then the compiled body, until the
    condition is false."""
    cconsts = args[:cond_nconsts]
    bconsts = args[cond_nconsts:cond_nconsts + body_nconsts]
    carry = list(args[cond_nconsts + body_nconsts:])
    while bool(runner.read_scalar(runner.run(cond_jaxpr, *cconsts, *carry)[0])):
        carry = runner.run(body_jaxpr, *bconsts, *carry)
    return carry


def run_scan(runner: BodyRunner, *args, jaxpr, length: int, reverse: bool, unroll=1,
             num_consts: int, num_carry: int, **_ignored) -> list:
    """``scan``: ``length`` calls of the compiled body over slices of ``xs``; the ``ys`` are
    stacked once at the end (no host synchronisation)."""
    consts = args[:num_consts]
    carry = list(args[num_consts:num_consts + num_carry])
    xs = args[num_consts + num_carry:]
    n_ys = len(jaxpr.out_avals) - num_carry
    ys: list[list] = [[None] * length for _ in range(n_ys)]
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        outs = runner.run(jaxpr, *consts, *carry, *[x[i] for x in xs])
        carry = list(outs[:num_carry])
        for col, o in zip(ys, outs[num_carry:]):
            col[i] = o
    if length == 0:
        import numpy as np
        empty = [runner.backend.put(np.zeros((0,) + tuple(a.shape), a.dtype), runner.device)
                 for a in jaxpr.out_avals[num_carry:]]
        return carry + empty
    return carry + [runner.stack(col) for col in ys]

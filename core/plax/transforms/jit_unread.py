"""Which arguments a ``jit`` program never reads. JAX 0.10 (``keep_unused=False``, the
default) prunes them, after dead-code elimination, before it picks the devices a call runs
on: an argument the function does not read may be committed to any device, and a call does
not raise for it (``jit(lambda x, y: x + 1)(on_device_0, on_device_1)`` runs on device 0)."""
from __future__ import annotations

import weakref

from plax.core.jaxpr import ClosedJaxpr, Var

# program -> the indices of its inputs it does not read (computed once per traced program)
_unread: "weakref.WeakKeyDictionary[ClosedJaxpr, frozenset]" = weakref.WeakKeyDictionary()


def unread_inputs(closed: ClosedJaxpr) -> frozenset:
    """The positions of ``closed``'s inputs that no equation (after dead-code elimination)
    and no output reads.

    Args:
      closed: a traced program.

    Returns:
      A frozenset of input positions (empty when the program reads every input).

    Example:
      >>> closed = plax.make_jaxpr(lambda x, y: x + 1)(1.0, 2.0)
      >>> sorted(unread_inputs(closed))
      [1]
    """
    hit = _unread.get(closed)
    if hit is not None:
        return hit
    from plax.core.passes import dce
    body = dce(closed.jaxpr)
    read = {v for v in body.outvars if isinstance(v, Var)}
    for e in body.eqns:
        read.update(v for v in e.invars if isinstance(v, Var))
    out = frozenset(i for i, v in enumerate(body.invars) if v not in read)
    _unread[closed] = out
    return out

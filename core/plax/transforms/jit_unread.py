"""Which arguments a ``jit`` program never reads. JAX 0.10 (``keep_unused=False``, the
default) prunes them, after dead-code elimination, before it picks the devices a call runs
on: an argument the function does not read may be committed to any device, and a call does
not raise for it (``jit(lambda x, y: x + 1)(on_device_0, on_device_1)`` runs on device 0)."""
from __future__ import annotations

from plax.core.jaxpr import ClosedJaxpr
from plax.core.passes import _pruned_body


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
    # the pruning dce does for a call's body, all outputs kept (cached per program there)
    _, keep_in = _pruned_body(closed, (True,) * len(closed.jaxpr.outvars))
    return frozenset(i for i, k in enumerate(keep_in) if not k)

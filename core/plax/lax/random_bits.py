"""The ``threefry2x32`` primitive: the Threefry-2x32 block cipher (20 rounds) used by plax.random.

``threefry2x32(k1, k2, x1, x2)`` hashes the counter pairs ``(x1, x2)`` under the
key ``(k1, k2)`` and returns the two output words. It is elementwise over four
``uint32`` operands (equal shapes, or rank 0 broadcasting against the rest),
so it batches like any elementwise primitive and has a zero derivative.

Making it a primitive (rather than a composition of adds, rotates and xors)
lets each backend run it natively: the NumPy backend runs a vectorised
reference implementation, compiled backends can emit one fused kernel.

Reference: Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"
(SC 2011), Threefry-2x32 with 20 rounds.
"""
from __future__ import annotations

import numpy as np

from plax.core.primitive import Primitive
from plax.core.shaped_array import ShapedArray
from plax.lax.base import asarray, same_shapes_or_scalar
from plax.transforms.batching import defbroadcasting
from plax.transforms.jvp import defzero

threefry2x32_p = Primitive("threefry2x32", multiple_results=True)

# The rotation schedule and key-schedule parity constant of Threefry-2x32.
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
KS_PARITY = 0x1BD11BDA


@threefry2x32_p.def_abstract_eval
def _threefry2x32_abstract_eval(k1, k2, x1, x2):
    avals = (k1, k2, x1, x2)
    bad = [a.dtype.name for a in avals if a.dtype != np.uint32]
    if bad:
        got = ", ".join(a.dtype.name for a in avals)
        raise TypeError(f"threefry2x32 requires uint32 operands (key words k1, k2 and counter "
                        f"words x1, x2), got dtypes {got}.")
    shape = same_shapes_or_scalar("threefry2x32", avals)
    out = ShapedArray(shape, np.dtype(np.uint32), False)
    return (out, out)


defbroadcasting(threefry2x32_p)
defzero(threefry2x32_p)


def threefry2x32(k1, k2, x1, x2):
    """Applies the Threefry-2x32 hash to counter words ``(x1, x2)`` under key ``(k1, k2)``.

    Args:
      k1, k2: the two ``uint32`` key words (usually rank 0).
      x1, x2: ``uint32`` counter words, of equal shapes (rank-0 operands broadcast).

    Returns:
      A pair ``(y1, y2)`` of ``uint32`` arrays of the broadcast shape.

    Example:
      >>> k = jnp.uint32(0)
      >>> threefry2x32(k, k, jnp.zeros(2, jnp.uint32), jnp.arange(2, dtype=jnp.uint32))
      [Array([1797259609, 2579123966], dtype=uint32), Array([928981903, 3251367595], dtype=uint32)]
    """
    return threefry2x32_p.bind(asarray(k1), asarray(k2), asarray(x1), asarray(x2))

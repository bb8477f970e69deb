"""Primitives of plax.random: ``threefry2x32`` (the Threefry-2x32 block cipher, 20 rounds) and
``random_gamma_grad`` (the implicit derivative of gamma samples).

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

from plax import dtypes
from plax.core.primitive import Primitive
from plax.core.shaped_array import ShapedArray
from plax.lax.base import asarray, broadcasting_shape
from plax.lowering.fusion import ELEMENTWISE, register_fusible
from plax.transforms.batching import defbroadcasting
from plax.transforms.jvp import defzero

threefry2x32_p = Primitive("threefry2x32", multiple_results=True)
# both words per element: fused only by generators that emit multi-result equations
# (plax.lowering.find_clusters(multiple_results=True): the Numba backend)
register_fusible(threefry2x32_p, ELEMENTWISE)

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
    shape = broadcasting_shape("threefry2x32", avals)
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
      >>> lax.threefry2x32(k, k, jnp.zeros(2, jnp.uint32), jnp.arange(2, dtype=jnp.uint32))
      [Array([1797259609,  928981903], dtype=uint32), Array([2579123966, 3453687069], dtype=uint32)]
    """
    return threefry2x32_p.bind(asarray(k1), asarray(k2), asarray(x1), asarray(x2))


# ------------------------------------------------------------------ random_gamma_grad

random_gamma_grad_p = Primitive("random_gamma_grad")
register_fusible(random_gamma_grad_p, ELEMENTWISE)  # the Numba backend has scalar forms


@random_gamma_grad_p.def_abstract_eval
def _random_gamma_grad_abstract_eval(a, x):
    for name, aval in (("a", a), ("x", x)):
        if not dtypes.is_float(aval.dtype):
            raise TypeError(f"random_gamma_grad requires float operands, got {name} of dtype "
                            f"{aval.dtype.name}.")
    if a.dtype != x.dtype:
        raise TypeError(f"random_gamma_grad requires operands of one dtype, got {a.dtype.name} "
                        f"and {x.dtype.name}.")
    shape = broadcasting_shape("random_gamma_grad", (a, x))
    return ShapedArray(shape, a.dtype, a.weak_type and x.weak_type)


defbroadcasting(random_gamma_grad_p)


def random_gamma_grad(a, x):
    """The derivative of a gamma sample ``x`` with respect to its shape parameter ``a``.

    Gamma samples are reparameterised implicitly: with ``F(x; a)`` the gamma CDF,
    ``dx/da = -(dF/da) / (dF/dx)``. This is JAX's ``lax.random_gamma_grad``
    (a power series for ``x <= max(1, a)``, a continued fraction otherwise);
    backends evaluate it to convergence. It is not itself differentiable.

    Args:
      a: shape parameters (float).
      x: gamma samples of the same dtype and shape (rank 0 broadcasts).

    Returns:
      ``dx/da``, elementwise; NaN where ``a <= 0`` or ``x < 0``, 0 where ``x == 0``.

    Example:
      >>> lax.random_gamma_grad(jnp.float32(1.0), jnp.float32(0.5))
      Array(0.8069791, dtype=float32)
    """
    return random_gamma_grad_p.bind(asarray(a), asarray(x))

"""Modified Bessel functions of orders 0 and 1 (plain and exponentially scaled) and Hurwitz's
zeta function."""
from __future__ import annotations

from plax import lax

from ._util import Array, ArrayLike, inexact

__all__ = ["i0", "i0e", "i1", "i1e", "zeta"]


def i0e(x: ArrayLike) -> Array:
    """Exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I0(x)``.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``i0e(x)``.

    Example:
      >>> from plax.scipy.special import i0e
      >>> float(i0e(0.0))
      1.0
    """
    x, = inexact("i0e", x)
    return lax.bessel_i0e(x)


def i0(x: ArrayLike) -> Array:
    """Modified Bessel function of order 0, ``I0(x) = exp(|x|) i0e(x)``.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``I0(x)``.

    Example:
      >>> from plax.scipy.special import i0
      >>> round(float(i0(1.0)), 6)
      1.266066
    """
    x, = inexact("i0", x)
    return lax.exp(lax.abs(x)) * lax.bessel_i0e(x)


def i1e(x: ArrayLike) -> Array:
    """Exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I1(x)``.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``i1e(x)``.

    Example:
      >>> from plax.scipy.special import i1e
      >>> float(i1e(0.0))
      0.0
    """
    x, = inexact("i1e", x)
    return lax.bessel_i1e(x)


def i1(x: ArrayLike) -> Array:
    """Modified Bessel function of order 1, ``I1(x) = exp(|x|) i1e(x)``.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``I1(x)``.

    Example:
      >>> from plax.scipy.special import i1
      >>> round(float(i1(1.0)), 6)
      0.565159
    """
    x, = inexact("i1", x)
    return lax.exp(lax.abs(x)) * lax.bessel_i1e(x)


def zeta(x: ArrayLike, q: ArrayLike | None = None) -> Array:
    """The Hurwitz zeta function ``zeta(x, q) = sum_{k>=0} (k + q)^(-x)``, elementwise.

    Args:
      x: exponents; integers promote to floats.
      q: offsets, broadcast with ``x``. As in JAX, ``q`` is required (the Riemann zeta
        function, ``q=None``, raises NotImplementedError).

    Returns:
      ``zeta(x, q)``; not differentiable (as in JAX).

    Example:
      >>> from plax.scipy.special import zeta
      >>> round(float(zeta(2.0, 1.0)), 6)  # pi**2 / 6
      1.644934
    """
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to "
                                  "compute the Hurwitz Zeta function.")
    x, q = inexact("zeta", x, q)
    return lax.zeta(x, q)

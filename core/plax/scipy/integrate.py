"""plax.scipy.integrate: the trapezoidal rule (``jax.scipy.integrate``)."""
from __future__ import annotations

from typing import Any

from plax import numpy as jnp
from plax.numpy.util import canonicalize_axis, check_arraylike

Array = Any
ArrayLike = Any

__all__ = ["trapezoid"]


def trapezoid(y: ArrayLike, x: ArrayLike | None = None, dx: ArrayLike = 1.0,
              axis: int = -1) -> Array:
    """Integrate ``y`` along ``axis`` with the composite trapezoidal rule.

    Args:
      y: the samples.
      x: the sample points: 1-D with ``y.shape[axis]`` entries, or of ``y``'s shape; if
        omitted the points are ``dx`` apart.
      dx: the spacing when ``x`` is omitted.
      axis: the axis to integrate over.

    Returns:
      The integral, with ``axis`` removed; integer inputs give a float result.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.integrate import trapezoid
      >>> trapezoid(jnp.array([1., 2., 3.]))
      Array(4., dtype=float32)
      >>> trapezoid(jnp.array([1., 2., 3.]), x=jnp.array([0., 1., 3.]))
      Array(6.5, dtype=float32)
    """
    from plax.scipy.stats._util import promote_dtypes_inexact
    if x is None:
        check_arraylike("trapezoid", y)
        y, dx = promote_dtypes_inexact(jnp.asarray(y), dx)
    else:
        check_arraylike("trapezoid", y, x)
        y, x = promote_dtypes_inexact(jnp.asarray(y), jnp.asarray(x))
    axis = canonicalize_axis(axis, y.ndim)
    y = jnp.moveaxis(y, axis, -1)
    if x is not None:
        if x.ndim == 1:
            if x.shape[0] != y.shape[-1]:
                raise ValueError(f"trapezoid: x has {x.shape[0]} points but y has "
                                 f"{y.shape[-1]} along axis {axis}")
        else:
            x = jnp.moveaxis(x, axis, -1)
        dx = x[..., 1:] - x[..., :-1]
    return 0.5 * jnp.sum(dx * (y[..., 1:] + y[..., :-1]), axis=-1)

"""plax.scipy.interpolate: ``RegularGridInterpolator`` (linear and nearest), as in JAX."""
from __future__ import annotations

import itertools
from typing import Any, Optional, Sequence

import numpy as np

from plax import numpy as jnp

Array = Any

__all__ = ["RegularGridInterpolator"]


class RegularGridInterpolator:
    """Interpolation on a rectilinear grid in any number of dimensions, as
    :obj:`scipy.interpolate.RegularGridInterpolator` (``"linear"`` and ``"nearest"``).

    Args:
      points: ``d`` strictly ascending 1-D grids.
      values: shape ``(len(points[0]), ..., len(points[d-1]), ...)``; trailing axes are
        carried along.
      method: ``"linear"`` or ``"nearest"``.
      bounds_error: must be False (as in JAX: no data-dependent errors).
      fill_value: the value outside the grid; None extrapolates from the edge cells.

    Example:
      >>> from plax.scipy.interpolate import RegularGridInterpolator
      >>> f = RegularGridInterpolator((jnp.array([0.0, 1.0]), jnp.array([0.0, 2.0])),
      ...                             jnp.array([[0.0, 2.0], [1.0, 3.0]]))
      >>> f(jnp.array([[0.5, 1.0]]))
      Array([1.5], dtype=float32)
    """

    def __init__(self, points: Sequence[Any], values: Any, method: str = "linear",
                 bounds_error: bool = False, fill_value: Optional[float] = np.nan):
        if method not in ("linear", "nearest"):
            raise ValueError(f"RegularGridInterpolator: method {method!r} is not defined "
                             "(use 'linear' or 'nearest')")
        if bounds_error:
            raise NotImplementedError("RegularGridInterpolator: bounds_error=True is not "
                                      "supported (as in JAX)")
        values = jnp.asarray(values)
        if len(points) > values.ndim:
            raise ValueError(f"there are {len(points)} point arrays, but values has "
                             f"{values.ndim} dimensions")
        if not jnp.issubdtype(values.dtype, jnp.inexact):
            values = values.astype(jnp.result_type(float))
        grids = []
        for i, p in enumerate(points):
            p = jnp.asarray(p)
            if p.ndim != 1:
                raise ValueError(f"the points in dimension {i} must be 1-dimensional")
            if p.shape[0] != values.shape[i]:
                raise ValueError(f"there are {p.shape[0]} points and {values.shape[i]} values "
                                 f"in dimension {i}")
            grids.append(p.astype(values.dtype) if jnp.issubdtype(values.dtype, jnp.floating)
                         else p)
        self.grid = tuple(grids)
        self.values = values
        self.method = method
        self.bounds_error = bounds_error
        self.fill_value = fill_value

    def _locate(self, xi: Array):
        """Per dimension: the lower cell index, the position inside the cell, and whether the
        point is outside the grid."""
        indices, weights, outside = [], [], []
        for g, x in zip(self.grid, xi):
            n = g.shape[0]
            i = jnp.clip(jnp.searchsorted(g, x, side="right") - 1, 0, max(n - 2, 0))
            lo = g[i]
            hi = g[jnp.minimum(i + 1, n - 1)]
            width = jnp.where(hi == lo, jnp.ones_like(hi), hi - lo)
            indices.append(i)
            weights.append((x - lo) / width)
            outside.append((x < g[0]) | (x > g[-1]))
        return indices, weights, outside

    def __call__(self, xi: Any, method: Optional[str] = None) -> Array:
        """The interpolated values at ``xi`` (shape ``(..., d)``, or a tuple of ``d`` arrays).

        Returns:
          Shape ``xi.shape[:-1] + values.shape[d:]``.
        """
        method = self.method if method is None else method
        if method not in ("linear", "nearest"):
            raise ValueError(f"RegularGridInterpolator: method {method!r} is not defined")
        d = len(self.grid)
        if isinstance(xi, (tuple, list)):
            xi = jnp.stack(jnp.broadcast_arrays(*[jnp.asarray(v) for v in xi]), axis=-1)
        xi = jnp.asarray(xi)
        if xi.shape[-1] != d:
            raise ValueError(f"the requested sample points xi have dimension {xi.shape[-1]}, "
                             f"but this RegularGridInterpolator has dimension {d}")
        batch = xi.shape[:-1]
        flat = xi.reshape((-1, d)).astype(self.values.dtype)
        coords = [flat[:, k] for k in range(d)]
        indices, weights, outside = self._locate(coords)
        trailing = self.values.shape[d:]
        if method == "nearest":
            idx = tuple(jnp.where(w <= 0.5, i, i + 1) for i, w in zip(indices, weights))
            out = self.values[idx]
        else:
            out = jnp.zeros((flat.shape[0],) + trailing, self.values.dtype)
            for corner in itertools.product((0, 1), repeat=d):
                idx = tuple(jnp.minimum(i + c, g.shape[0] - 1)
                            for i, c, g in zip(indices, corner, self.grid))
                w = jnp.ones((flat.shape[0],), self.values.dtype)
                for c, t in zip(corner, weights):
                    w = w * (t if c else 1 - t)
                out = out + w.reshape((-1,) + (1,) * len(trailing)) * self.values[idx]
        if self.fill_value is not None:
            off = outside[0]
            for o in outside[1:]:
                off = off | o
            off = off.reshape((-1,) + (1,) * len(trailing))
            out = jnp.where(off, jnp.asarray(self.fill_value, dtype=out.dtype), out)
        return out.reshape(batch + trailing)

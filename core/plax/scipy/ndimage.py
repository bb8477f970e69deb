"""plax.scipy.ndimage: interpolation at arbitrary coordinates (``jax.scipy.ndimage``).

Boundary modes follow JAX, which fixed SciPy's historic off-by-one at the edges: plax's
``"constant"`` and ``"wrap"`` equal SciPy's ``"grid-constant"`` and ``"grid-wrap"``.
"""
from __future__ import annotations

import functools
import itertools
import operator
from typing import Any, Callable, Sequence

import numpy as np

from plax import lax
from plax import numpy as jnp

Array = Any
ArrayLike = Any

__all__ = ["map_coordinates"]


def _mirror(index: Array, size: int) -> Array:
    """Reflect about the end samples: ``... 2 1 | 0 1 2 | 1 0 ...`` (a triangle wave)."""
    if size == 1:
        return jnp.zeros_like(index)
    period = 2 * (size - 1)
    return jnp.abs((index + size - 1) % period - (size - 1))


def _reflect(index: Array, size: int) -> Array:
    """Reflect about the array's edges: ``... 1 0 | 0 1 2 | 2 1 ...``."""
    return jnp.floor_divide(_mirror(2 * index + 1, 2 * size + 1) - 1, 2)


_FIXERS: dict[str, Callable[[Array, int], Array]] = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _nodes(coordinate: Array, order: int) -> list[tuple[Array, Any]]:
    """The integer sample positions and weights interpolating at ``coordinate``."""
    if order == 0:
        index = coordinate if jnp.issubdtype(coordinate.dtype, jnp.integer) else lax.round(
            coordinate)
        return [(index.astype(np.int32), 1)]
    lower = jnp.floor(coordinate)
    frac = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - frac), (index + 1, frac)]


def map_coordinates(input: ArrayLike, coordinates: Sequence[ArrayLike], order: int,
                    mode: str = "constant", cval: ArrayLike = 0.0) -> Array:
    """Sample ``input`` at fractional ``coordinates`` (``scipy.ndimage.map_coordinates``).

    Args:
      input: the N-dimensional array to interpolate.
      coordinates: ``N`` arrays of one shape, the coordinates along each axis.
      order: 0 (nearest, rounding halves away from zero) or 1 (linear).
      mode: ``"constant"`` (``cval`` outside), ``"nearest"``, ``"wrap"``, ``"mirror"`` or
        ``"reflect"``; ``"constant"`` and ``"wrap"`` behave like SciPy's ``"grid-constant"``
        and ``"grid-wrap"``, as in JAX.
      cval: the fill value for ``mode="constant"``.

    Returns:
      The interpolated values, of the coordinates' shape and ``input``'s dtype (integer
      inputs round the result).

    Raises:
      ValueError: if ``len(coordinates) != input.ndim``.
      NotImplementedError: for ``order > 1`` or another mode.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.ndimage import map_coordinates
      >>> image = jnp.arange(12.0).reshape(3, 4)
      >>> map_coordinates(image, [jnp.array([0.5, 1.5]), jnp.array([1.5, 2.5])], order=1)
      Array([3.5, 8.5], dtype=float32)
    """
    image = jnp.asarray(input)
    coords = [jnp.asarray(c) for c in coordinates]
    if len(coords) != image.ndim:
        raise ValueError(f"coordinates must be a sequence of length input.ndim, but "
                         f"{len(coords)} != {image.ndim}")
    fixer = _FIXERS.get(mode)
    if fixer is None:
        raise NotImplementedError(f"plax.scipy.ndimage.map_coordinates does not support "
                                  f"mode={mode!r}; supported modes are {sorted(_FIXERS)}")
    if order not in (0, 1):
        raise NotImplementedError(f"plax.scipy.ndimage.map_coordinates supports order 0 or 1; "
                                  f"got order={order}")
    cval = jnp.asarray(cval, dtype=image.dtype)
    per_axis = []
    for coord, size in zip(coords, image.shape):
        per_axis.append([(fixer(index, size), (index >= 0) & (index < size), weight)
                         for index, weight in _nodes(coord, order)])
    terms = []
    for combo in itertools.product(*per_axis):
        indices = tuple(c[0] for c in combo)
        value = image[indices]
        if mode == "constant":
            inside = functools.reduce(operator.and_, [c[1] for c in combo])
            value = jnp.where(inside, value, cval)
        weight = functools.reduce(operator.mul, [c[2] for c in combo])
        terms.append(weight * value)
    out = functools.reduce(operator.add, terms)
    if jnp.issubdtype(image.dtype, jnp.integer):
        out = lax.round(out)
    return out.astype(image.dtype)

"""Argument handling shared by plax.scipy.special: JAX's promotion of arguments to an inexact
dtype (integers give floats), then broadcasting to one shape."""
from __future__ import annotations

from typing import Any

from plax import numpy as jnp
from plax.numpy.util import promote_args_inexact

Array = Any
ArrayLike = Any


def inexact(name: str, *args: ArrayLike) -> list:
    """``args`` promoted to their common inexact dtype and broadcast to one shape."""
    args = promote_args_inexact(name, *args)
    if len(args) > 1:
        args = jnp.broadcast_arrays(*args)
    return list(args)


def const(like: Array, value: float) -> Array:
    """``value`` as a rank-0 array of ``like``'s dtype."""
    return jnp.asarray(value, dtype=jnp.result_type(like))

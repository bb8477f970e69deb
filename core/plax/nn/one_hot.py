"""plax.nn.one_hot: indices to one-hot vectors."""
from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from plax import dtypes, lax
from plax import numpy as jnp
from plax.core.trace import Tracer
from plax.errors import ConcretizationTypeError
from plax.numpy.util import canonicalize_axis
from plax.transforms.jit import jit

Array = Any

__all__ = ["one_hot"]


def _concrete_num_classes(num_classes: Any) -> int:
    """``num_classes`` as a Python int, with JAX's errors for a traced or non-integer value."""
    if isinstance(num_classes, Tracer):
        raise ConcretizationTypeError(
            num_classes,
            "The error arose in plax.nn.one_hot argument `num_classes`: it must be a "
            "concrete integer, not a traced value (mark it static with static_argnums).")
    try:
        return operator.index(num_classes)
    except TypeError:
        raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, got "
                        f"({num_classes!r},).\nThe error arose in plax.nn.one_hot argument "
                        f"`num_classes`.") from None


def _one_hot_impl(x: Array, num_classes: int, dtype: Any, axis: int) -> Array:
    out_axis = canonicalize_axis(axis, x.ndim + 1)
    lhs = lax.expand_dims(x, (out_axis,))
    rhs_shape = [1] * x.ndim
    rhs_shape.insert(out_axis, num_classes)
    rhs = lax.broadcasted_iota(x.dtype, tuple(rhs_shape), out_axis)
    return (lhs == rhs).astype(dtype)


_one_hot_impl.__name__ = "_one_hot"
_one_hot = jit(_one_hot_impl, static_argnames=("num_classes", "dtype", "axis"))


def one_hot(x: Any, num_classes: int, *, dtype: Any | None = None, axis: int = -1) -> Array:
    """One-hot encodes the integer indices ``x`` along a new axis of size ``num_classes``.

    Indices outside ``[0, num_classes)`` encode as all zeros.

    Args:
      x: array of indices (integers; floats are accepted with a DeprecationWarning, as
        in JAX).
      num_classes: number of classes, a concrete integer.
      dtype: dtype of the result (default: the default float dtype).
      axis: position of the new axis in the result (default -1, the last).

    Returns:
      An array of shape ``x.shape`` with ``num_classes`` inserted at ``axis``.

    Raises:
      TypeError: if ``num_classes`` is not an integer.
      ConcretizationTypeError: if ``num_classes`` is traced.

    Example:
      >>> import plax
      >>> plax.nn.one_hot(plax.numpy.array([0, 2, 5]), 3)
      Array([[1., 0., 0.],
             [0., 0., 1.],
             [0., 0., 0.]], dtype=float32)
    """
    num_classes = _concrete_num_classes(num_classes)
    x = jnp.asarray(x)
    if not (dtypes.is_integer(x.dtype) or dtypes.is_bool(x.dtype)) or dtypes.is_bool(x.dtype):
        warnings.warn(f"jax.nn.one_hot input should be integer-typed; got dtype={x.dtype}",
                      DeprecationWarning, stacklevel=2)
    dtype = dtypes.default_float_dtype() if dtype is None else np.dtype(dtype)
    if not isinstance(axis, (int, np.integer)):
        axis_index = getattr(lax, "axis_index", None)
        if axis_index is None:
            raise NotImplementedError(
                f"one_hot over the named axis {axis!r} needs lax.axis_index, which plax "
                "provides only with a multi-device plugin.")
        return jnp.asarray(x == axis_index(axis), dtype=dtype)
    return _one_hot(x, num_classes=num_classes, dtype=dtype, axis=int(axis))

"""``jax.typing``: the types of values plax functions accept, for annotations.

``ArrayLike`` is what converts to an Array (an Array, a tracer, a NumPy array or scalar, a
Python bool/int/float/complex); ``DTypeLike`` what names a dtype (a string, a NumPy dtype or
scalar type, a Python type, an object with a ``dtype``).

Example:
  >>> from plax.typing import ArrayLike
  >>> def double(x: ArrayLike) -> jax.Array:
  ...     return 2 * jnp.asarray(x)
"""
from __future__ import annotations

from typing import Any, Protocol, Union

import numpy as np

from plax.array import Array
from plax.core.trace import Tracer

__all__ = ["ArrayLike", "DTypeLike"]


class _SupportsDType(Protocol):
    @property
    def dtype(self) -> np.dtype: ...


# written out, not plax.array.ARRAYLIKE_TYPES: a type checker reads the annotation without
# running code, and of NumPy's scalars it names numbers and bools only (ARRAYLIKE_TYPES's
# np.generic, a runtime check's cheap superset, would admit np.str_ and np.datetime64 too)
ArrayLike = Union[Array, Tracer, np.ndarray, np.bool_, np.number, bool, int, float, complex]
DTypeLike = Union[str, type[Any], np.dtype, _SupportsDType]

"""Arrays of typed keys made by the creation functions: ``lax.full``, ``jnp.zeros``,
``jnp.ones``, ``jnp.full``, ``jnp.empty`` with a key dtype (``key<fry>``), and their
``*_like`` forms of a key array.

As in JAX 0.10.2, a key array is filled either with a key (broadcast, its words and all) or
with a number, which becomes every word of every key (``jnp.ones((2,), key_dtype)`` holds
the words ``[[1, 1], [1, 1]]``); an array of numbers cannot be cast to keys, nor keys to
numbers.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plax import dtypes, lax
from plax.core.trace import Tracer, get_aval
from plax.lax.base import lax_shape
from plax.random.keys import KeyDType, PRNGKeyArray


def _dtype_name(x: Any) -> str:
    if isinstance(x, (Tracer,)) or hasattr(x, "aval"):
        return str(get_aval(x).dtype)
    return str(dtypes.dtype(x))


def full_keys(shape: Sequence[int], fill_value: Any, dtype: Any = None) -> PRNGKeyArray:
    """A key array of ``shape`` filled with ``fill_value``.

    Args:
      shape: the shape of the key array (without the key's own words).
      fill_value: a key array (broadcast to ``shape``) or a scalar number (every word of
        every key).
      dtype: the key dtype (default: ``fill_value``'s).

    Returns:
      A :class:`~plax.random.keys.PRNGKeyArray`.

    Raises:
      ValueError: keys asked for as another dtype, or an array of numbers as keys (JAX's
        ``Cannot convert_element_type`` error).

    Example:
      >>> random.key_data(full_keys((2,), 7, random.key(0).dtype))
      Array([[7, 7],
             [7, 7]], dtype=uint32)
    """
    shape = tuple(lax_shape(shape, "full shape"))
    if isinstance(fill_value, PRNGKeyArray):
        if dtype is not None and dtype != fill_value.dtype:
            to = dtype if isinstance(dtype, KeyDType) else dtypes.to_numpy_dtype(dtype)
            raise ValueError(f"Cannot convert_element_type from {fill_value.dtype} to {to}: "
                             "keys are not numbers (random.key_data gives their words)")
        from plax.numpy.util import broadcast_to
        impl = fill_value._impl
        data = broadcast_to(fill_value._data, shape + impl.key_shape)
        return PRNGKeyArray(impl, data)
    impl = dtype.impl
    if np.ndim(fill_value) if not isinstance(fill_value, Tracer) else get_aval(fill_value).ndim:
        raise ValueError(f"Cannot convert_element_type from {_dtype_name(fill_value)} to "
                         f"{dtype}: an array of numbers is not keys (make keys with "
                         "random.wrap_key_data)")
    return PRNGKeyArray(impl, lax.full(shape + impl.key_shape, fill_value, np.uint32))

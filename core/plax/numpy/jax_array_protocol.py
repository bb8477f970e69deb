"""Objects with ``__jax_array__`` (the array wrappers of equinox/flax style), read where
JAX 0.10 reads them: ``jnp.array``/``jnp.asarray`` (and the ``*_like`` functions built on
them) and the operators of an array (``array + obj``, ``obj @ array``). Everywhere else (a
``jax.numpy`` function, a primitive, a ``jit`` argument, ``grad``/``vmap``) JAX 0.10 refuses
them with the ValueError of :func:`plax.errors.jax_array_operand`."""
from __future__ import annotations

from typing import Any

import numpy as np


def has_jax_array(x: Any) -> bool:
    """Whether ``x``'s type defines ``__jax_array__`` (looked up on the type, as Python looks
    up special methods, so an instance attribute does not count).

    Example:
      >>> class Wrapped:
      ...     def __jax_array__(self):
      ...         return jnp.ones(2)
      >>> has_jax_array(Wrapped()), has_jax_array(jnp.ones(2))
      (True, False)
    """
    t = type(x)
    return t not in _PLAIN and hasattr(t, "__jax_array__")


#: types that define no ``__jax_array__`` and are common operands and list items: answered
#: without the attribute look-up (a failed one, on the eager paths of ordinary operands)
_PLAIN = frozenset({bool, int, float, complex, list, tuple, np.ndarray})


def unwrap_leaves(seq: Any) -> Any:
    """Nested lists/tuples with each non-sequence item that has ``__jax_array__`` replaced by
    what that method returns (once, as ``jnp.array`` reads the items of a list).

    Args:
      seq: a list or tuple, possibly nested.

    Returns:
      The same structure (lists as lists, tuples as tuples) with the items unwrapped.

    Example:
      >>> class Wrapped:
      ...     def __jax_array__(self):
      ...         return 2.0
      >>> unwrap_leaves([1.0, (Wrapped(),)])
      [1.0, (2.0,)]
    """
    if isinstance(seq, (list, tuple)):
        items = [unwrap_leaves(o) for o in seq]
        return tuple(items) if isinstance(seq, tuple) else items
    return seq.__jax_array__() if has_jax_array(seq) else seq


def unwrapped_operand(other: Any) -> Any:
    """The operand an array operator (``x + other``) uses for ``other``: what its
    ``__jax_array__`` returns (read once, as JAX 0.10's operators do), else ``other`` itself.

    Example:
      >>> class Wrapped:
      ...     def __jax_array__(self):
      ...         return 2.0
      >>> unwrapped_operand(Wrapped()), unwrapped_operand(3)
      (2.0, 3)
    """
    return other.__jax_array__() if has_jax_array(other) else other


def array_from_jax_array(obj: Any, build, dtype: Any) -> Any:
    """``jnp.array(obj)`` for an object with ``__jax_array__``, as JAX 0.10 builds it: the
    method's result (and, if that is itself such an object, its result) converted by
    ``build``, strongly typed when no ``dtype`` was asked for (JAX decides the weak type from
    ``obj``, which is not a Python scalar: ``jnp.asarray(Wrapped(2.0))`` is a float32 array
    that is not weak).

    Args:
      obj: the object.
      build: ``jnp.array`` with the other arguments bound, called on the unwrapped value.
      dtype: the dtype the caller asked for, or None.

    Returns:
      An Array (or a tracer, when the method returns one).

    Raises:
      TypeError: the method returned, twice over, an object with ``__jax_array__``.
    """
    value = obj.__jax_array__()
    if has_jax_array(value):  # JAX reads the result once more, as an item of the data
        value = value.__jax_array__()
        if has_jax_array(value):
            raise TypeError(f"Unexpected input type for array: {type(value).__name__}: "
                            f"__jax_array__ of {type(obj).__name__} returned objects with "
                            "__jax_array__ twice over; return an array.")
    out = build(value)
    if dtype is None and getattr(getattr(out, "aval", None), "weak_type", False):
        from plax import lax
        out = lax.convert_element_type(out, out.dtype, weak_type=False)
    return out

"""Shared pieces of the lax primitive definitions: operand conversion and shape/dtype checks."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plax import dtypes
from plax.array import Array, from_host
from plax.float0 import is_float0_value
from plax.core.shaped_array import ShapedArray
from plax.core.trace import Tracer, get_aval

# dtype categories accepted by primitives (checked in abstract evaluation)
BOOL = "bool"
INT = "int"
UINT = "uint"
FLOAT = "float"
COMPLEX = "complex"

_category_test = {
    BOOL: dtypes.is_bool,
    INT: lambda d: d.kind == "i",
    UINT: lambda d: d.kind == "u",
    FLOAT: dtypes.is_float,
    COMPLEX: dtypes.is_complex,
}

NUMBER = (INT, UINT, FLOAT, COMPLEX)
INEXACT = (FLOAT, COMPLEX)
INTEGRAL = (INT, UINT)
BOOL_OR_INT = (BOOL, INT, UINT)
ANY = (BOOL, INT, UINT, FLOAT, COMPLEX)
ORDERED = (BOOL, INT, UINT, FLOAT)


def check_dtype(name: str, aval: ShapedArray, allowed: Sequence[str], what: str = "operand") -> None:
    """Raises TypeError if ``aval``'s dtype is not in the ``allowed`` categories."""
    if not any(_category_test[c](aval.dtype) for c in allowed):
        kinds = ", ".join(allowed)
        raise TypeError(f"{name} does not accept dtype {aval.dtype.name} for its {what}; it "
                        f"accepts {kinds} types.")


def asarray(x: Any):
    """A primitive operand from ``x``: arrays and tracers pass through, host values become
    Arrays (Python scalars weakly typed, with JAX's default dtypes); float0 values stay the
    NumPy arrays they are (they carry no data: :mod:`plax.float0`)."""
    if isinstance(x, (Array, Tracer)) or is_float0_value(x):
        return x
    return from_host(x)


def out_sharded(compute, out_sharding: Any):
    """``compute()`` with the explicit sharding ``out_sharding`` (the ``out_sharding=`` and
    ``sharding=`` parameters of JAX's lax functions): :func:`plax.sharding_types.
    with_out_sharding`, imported only when a sharding is given."""
    from plax.sharding_types import with_out_sharding
    return with_out_sharding(compute, out_sharding)


def canonicalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
    """``axis`` in ``[0, ndim)``, accepting negative axes.

    Raises:
      ValueError: when the axis is out of range, naming it and the rank.
    """
    try:
        axis = int(axis)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name} {axis} is out of bounds for array of dimension {ndim}")
    return axis + ndim if axis < 0 else axis


def canonicalize_shape(shape: Any, context: str = "") -> tuple[int, ...]:
    """A shape as a tuple of non-negative Python ints (from an int, a sequence of ints, or a
    concrete 1-D integer array).

    Raises:
      TypeError: when an entry is not an integer (e.g. a float or a traced value).
      ValueError: for a negative dimension (see :func:`lax_shape` for lax's TypeError).
    """
    if not isinstance(shape, (tuple, list)):
        if isinstance(shape, (np.ndarray, Array)) and np.ndim(shape) == 1:
            if not np.issubdtype(shape.dtype, np.integer):
                raise TypeError(f"Shapes must be 1D sequences of concrete values of integer "
                                f"type, got {shape!r}{' ' + context if context else ''}.")
            shape = np.asarray(shape).tolist()
        elif isinstance(shape, (int, np.integer)) or hasattr(shape, "__index__"):
            shape = (shape,)
    try:
        out = tuple(int(operator_index(d)) for d in shape)
    except TypeError as err:
        raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, got "
                        f"{shape!r}{' ' + context if context else ''}.\n{err}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"Shape dimensions must be non-negative, got {out}")
    return out


def lax_shape(shape: Any, name: str) -> tuple[int, ...]:
    """:func:`canonicalize_shape` for the lax wrappers: a negative dimension raises TypeError
    there, as in JAX's lax (``name`` says which argument was wrong)."""
    try:
        return canonicalize_shape(shape)
    except ValueError:
        raise TypeError(f"{name} must have every element be nonnegative, got "
                        f"{tuple(shape) if isinstance(shape, (tuple, list)) else shape!r}.") from None


def operator_index(d: Any) -> int:
    import operator
    return operator.index(d)


def broadcasting_shape(name: str, avals: Sequence[ShapedArray]) -> tuple[int, ...]:
    """The output shape of an n-ary elementwise primitive, by JAX's rule.

    Rank-0 operands broadcast against anything; the other operands must have equal ranks,
    and in each dimension their sizes must be equal or 1 (a size-1 dimension broadcasts,
    as ``lax.add(x_1x2, y_3x2)`` does in JAX). Ranks are never promoted: that is
    ``jnp``'s job.

    Args:
      name: the primitive's name, for the error messages.
      avals: the operands' abstract values.

    Returns:
      The broadcast shape.

    Raises:
      TypeError: operands of different ranks (other than rank 0), or sizes that are
        neither equal nor 1.

    Example:
      >>> broadcasting_shape("add", [ShapedArray((1, 2), np.float32), ShapedArray((3, 2), np.float32)])
      (3, 2)
    """
    shape = None
    equal = True
    for a in avals:
        if not a.shape:
            continue
        if shape is None:
            shape = a.shape
        elif a.shape != shape:
            equal = False
    if shape is None:
        return ()
    if equal:  # the common case, kept to one pass
        return shape
    shapes = [a.shape for a in avals if a.shape]
    ranks = {len(s) for s in shapes}
    if len(ranks) != 1:
        # JAX's message, then the shapes and the way out (lax never promotes ranks)
        raise TypeError(f"{name}: arrays must have the same number of dimensions, got {ranks} "
                        f"(shapes {', '.join(map(str, shapes))}); lax does not add axes: use the "
                        f"jax.numpy function, or lax.expand_dims / lax.broadcast_in_dim first.")
    out = []
    for sizes in zip(*shapes):
        not_one = {d for d in sizes if d != 1}
        if len(not_one) > 1:
            raise TypeError(f"{name} got incompatible shapes for broadcasting: "
                            f"{', '.join(map(str, shapes))}.")
        out.append(not_one.pop() if not_one else 1)
    return tuple(out)


def same_dtypes(name: str, avals: Sequence[ShapedArray]) -> np.dtype:
    """The common dtype of an elementwise primitive's operands (they must all be equal)."""
    dt = avals[0].dtype
    for a in avals[1:]:
        if a.dtype != dt:
            got = ", ".join(x.dtype.name for x in avals)
            raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got {got}. "
                            f"(Tip: jnp.{name} is a similar function that does automatic type "
                            "promotion on inputs).")
    return dt


def aval_of(x: Any) -> ShapedArray:
    return get_aval(x)

"""``jax.ds`` (``dslice``): a slice whose start may be traced, for refs and arrays.

``x[jax.ds(i, 2)]`` reads ``x[i:i + 2]`` with ``i`` dynamic (the size must be static), on a
ref (``x_ref[jax.ds(i, 2)] = v`` writes) or on an array (``x.at[jax.ds(i, 2)].set(v)``).
:class:`Slice` is the object ``ds`` returns; refs parse it into their indexer
(:class:`plax.state.types.RefIndexer`); arrays (:func:`split_array_index`) cut the window
with ``dynamic_slice`` first, then index it with ordinary slices.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from plax.tree_util import register_pytree_node_class


def _is_static(v) -> bool:
    """Whether ``v`` is a known integer (a Python or NumPy int, or a concrete integer scalar
    array, as JAX's ``core.is_dim`` counts it); a traced value is not."""
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (int, np.integer)):
        return True
    from plax.core.trace import Tracer
    if isinstance(v, Tracer) or getattr(v, "shape", None) != ():
        return False
    try:
        operator.index(v)
    except TypeError:
        return False
    return True


@register_pytree_node_class
class Slice:
    """A slice with a start index (static, or traced), a static size and a static stride:
    ``Slice(start, size, stride)`` selects ``start, start + stride, ...``, ``size`` elements.

    A static start is the pytree's auxiliary data, a traced one its leaf (as in JAX), so a
    Slice can be passed through ``jit``.

    Example:
      >>> jax.ds(1, 2)
      Slice(start=1, size=2, stride=1)
    """

    __slots__ = ("start", "size", "stride")

    def __init__(self, start, size, stride: int = 1):
        if stride < 0:
            raise ValueError("`stride` must be >= 0.")
        self.start, self.size, self.stride = start, size, stride

    @property
    def is_dynamic_start(self) -> bool:
        """Whether the start is an array (traced or not) rather than a Python integer."""
        return not _is_static(self.start)

    @property
    def is_dynamic_size(self) -> bool:
        return not _is_static(self.size)

    def __repr__(self) -> str:
        return f"Slice(start={self.start!r}, size={self.size!r}, stride={self.stride!r})"

    def __eq__(self, other) -> bool:
        return (type(other) is Slice and self.stride == other.stride
                and _same(self.start, other.start) and _same(self.size, other.size))

    __hash__ = None  # mutable-like (it may hold an array), as JAX's dataclass

    def tree_flatten(self):
        children = (self.start if self.is_dynamic_start else None,
                    self.size if self.is_dynamic_size else None)
        aux = (None if self.is_dynamic_start else self.start,
               None if self.is_dynamic_size else self.size, self.stride)
        return children, aux

    @classmethod
    def tree_unflatten(cls, aux, children) -> "Slice":
        start, size = (c if c is not None else a for c, a in zip(children, aux[:2]))
        return cls(start, size, aux[2])

    @classmethod
    def from_slice(cls, slc: slice, size: int) -> "Slice":
        """The Slice selecting what ``slc`` selects on an axis of ``size``.

        Raises:
          ValueError: for a step below 1.
        """
        start, stop, step = slc.indices(size)
        if step < 1:
            raise ValueError(f"slice must have a step >= 1 (found: {step})")
        return cls(start, len(range(start, stop, step)), step)


def _same(a, b) -> bool:
    return a is b or (_is_static(a) and _is_static(b) and int(a) == int(b))


def dslice(start: Any, size: Any = None, stride: int | None = None) -> slice | Slice:
    """A :class:`Slice` from a start index and a size, with the meaning of Python's slices:
    ``dslice(None)`` is ``:``, ``dslice(j)`` is ``:j``, ``dslice(i, j)`` is ``i:i+j`` and
    ``dslice(i, j, stride)`` is ``i:i+j*stride:stride`` (``j`` elements); ``i`` may be traced.

    Args:
      start: the first index (an int or an integer scalar array); None for the whole axis.
      size: how many elements (a static int); None makes ``start`` the size, from 0.
      stride: the step between elements (a static int, default 1).

    Returns:
      A :class:`Slice` (``slice(None)`` for ``dslice(None)``).

    Raises:
      ValueError: for a stride that is not a Python integer.

    Example:
      >>> x = jnp.arange(10)
      >>> jax.jit(lambda x, i: x[jax.ds(i, 2)])(x, 4)
      Array([4, 5], dtype=int32)
    """
    if start is None:
        return slice(None)
    if stride is None:
        stride = 1
    if not isinstance(stride, int):
        raise ValueError("Non-static stride in `dslice`")
    if size is None:
        start, size = 0, start
    return Slice(start, size, stride)


ds = dslice


# ------------------------------------------------------------------ arrays indexed by Slices

def has_slice(idx) -> bool:
    """Whether the index ``idx`` holds a :class:`Slice` (a cheap test for the indexing path)."""
    if type(idx) is Slice:
        return True
    return type(idx) is tuple and any(type(i) is Slice for i in idx)


def _axes_consumed(i) -> int:
    """How many axes of the indexed array the index entry ``i`` consumes."""
    if i is None or isinstance(i, (bool, np.bool_)):
        return 0
    dtype = getattr(i, "dtype", None)
    if dtype is not None and np.dtype(dtype) == np.bool_:
        return len(i.shape)  # a mask consumes the axes it covers
    return 1


def split_array_index(shape: tuple, idx) -> tuple[list, list, tuple]:
    """``(starts, sizes, rest)`` for an array index holding Slices: the window
    ``dynamic_slice(x, starts, sizes)`` covers each Slice's span (other axes whole), and
    ``window[rest]`` is ``x[idx]`` (each Slice replaced by a static slice of the window).

    Raises:
      TypeError: for a Slice whose size is not a static integer, or whose start is not an
        integer scalar.
      IndexError: for a Slice larger than its axis.
    """
    idx = idx if type(idx) is tuple else (idx,)
    n_ell = sum(1 for i in idx if i is Ellipsis)
    used = sum(_axes_consumed(i) for i in idx if i is not Ellipsis)
    starts: list = [0] * len(shape)
    sizes = list(shape)
    rest, axis = [], 0
    for i in idx:
        if i is Ellipsis:
            axis += max(len(shape) - used, 0) if n_ell else 0
            rest.append(i)
            continue
        if type(i) is Slice:
            if axis >= len(shape):
                raise IndexError(f"Too many indices: {len(idx)} for an array of rank "
                                 f"{len(shape)}.")
            _check_slice(i, shape[axis])
            extent = (i.size - 1) * i.stride + 1 if i.size else 0
            starts[axis], sizes[axis] = i.start, extent
            rest.append(slice(None, None, i.stride) if i.size else slice(0, 0))
        else:
            rest.append(i)
        axis += _axes_consumed(i)
    return starts, sizes, tuple(rest)


def _check_slice(s: Slice, dim: int) -> None:
    if s.is_dynamic_size:
        raise TypeError(f"The size of a dynamic slice must be a static integer, got "
                        f"{s.size!r}: pass it as a Python int (a static argument under jit).")
    start_shape = getattr(s.start, "shape", ())
    start_dtype = getattr(s.start, "dtype", np.dtype(np.int32))
    if start_shape != () or np.dtype(start_dtype).kind not in "iu":
        raise TypeError(f"The start of a dynamic slice must be an integer scalar, got "
                        f"{s.start!r}.")


def read_with_slices(x, idx, read):
    """``x[idx]`` for an index holding Slices: ``read(window, rest)`` on the window that
    ``dynamic_slice`` cuts (a traced start is wrapped when negative and clamped into range,
    as ``lax.dynamic_slice`` does)."""
    from plax import lax
    from plax.core.trace import get_aval
    starts, sizes, rest = split_array_index(get_aval(x).shape, idx)
    return read(lax.dynamic_slice(x, starts, sizes), rest)


def update_with_slices(x, idx, update):
    """``x.at[idx].<op>(...)`` for an index holding Slices: ``update(window, rest)`` gives
    the window updated, written back with ``dynamic_update_slice`` at the same (wrapped and
    clamped) starts."""
    from plax import lax
    from plax.core.trace import get_aval
    starts, sizes, rest = split_array_index(get_aval(x).shape, idx)
    window = lax.dynamic_slice(x, starts, sizes)
    from plax.lax.slicing import dynamic_update_slice_unchecked
    return dynamic_update_slice_unchecked(x, update(window, rest), starts)

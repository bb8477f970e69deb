"""``ravel_pytree``: a pytree of arrays as one flat vector, and the function that undoes it.

The usual bridge between pytree-shaped parameters and code that wants one vector (an optimiser
from SciPy, a Hessian as a matrix, a Krylov solver).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plax import dtypes, lax
from plax.core.trace import get_aval
from plax.tree_util import tree_flatten, tree_unflatten


def ravel_pytree(pytree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """Flattens a pytree of arrays and scalars into one 1-D array.

    The leaves are raveled in C order and concatenated in the pytree's leaf order. Their dtypes
    are promoted together (JAX's rules); the returned ``unravel`` splits a vector of the same
    length back into the pytree, converting each leaf back to its own dtype.

    Args:
      pytree: a pytree whose leaves are arrays or scalars.

    Returns:
      ``(flat, unravel)``: ``flat`` is a 1-D array (float32 and empty for a pytree without
      leaves); ``unravel(v)`` rebuilds the pytree from a vector ``v`` of ``flat``'s length.
      Where every leaf has one dtype, ``unravel`` takes a vector of any dtype (and keeps it);
      otherwise it needs ``flat``'s dtype. ``unravel`` is hashable (equal for equal
      structures), so it can be a static argument of ``jit``.

    Raises:
      (from ``unravel``) ValueError: the vector has the wrong shape; TypeError: the leaves had
      several dtypes and the vector has another dtype than ``flat``.

    Example:
      >>> from plax.flatten_util import ravel_pytree
      >>> flat, unravel = ravel_pytree({"w": jnp.ones((2, 2)), "b": jnp.zeros(2)})
      >>> flat
      Array([0., 0., 1., 1., 1., 1.], dtype=float32)
      >>> unravel(flat * 2)["w"]
      Array([[2., 2.],
             [2., 2.]], dtype=float32)
    """
    leaves, treedef = tree_flatten(pytree)
    if not leaves:
        return lax.full((0,), 0, np.float32), _Unravel(treedef, (), (), None, None)
    from plax.numpy.util import asarray_weak
    leaves = [asarray_weak(leaf) for leaf in leaves]
    avals = [get_aval(leaf) for leaf in leaves]
    from_dtypes = tuple(a.dtype for a in avals)
    to_dtype = dtypes.result_type(*from_dtypes)
    shapes = tuple(a.shape for a in avals)
    sizes = tuple(a.size for a in avals)
    single = all(dt == to_dtype for dt in from_dtypes)
    pieces = [lax.reshape(leaf if single else lax.convert_element_type(leaf, to_dtype), (n,))
              for leaf, n in zip(leaves, sizes)]
    flat = pieces[0] if len(pieces) == 1 else lax.concatenate(pieces, 0)
    return flat, _Unravel(treedef, sizes, shapes, None if single else from_dtypes,
                          None if single else np.dtype(to_dtype))


class _Unravel:
    """The inverse of one :func:`ravel_pytree` call: compared and hashed by what it rebuilds."""

    __slots__ = ("_key",)

    def __init__(self, treedef, sizes, shapes, from_dtypes, to_dtype):
        self._key = (treedef, sizes, shapes, from_dtypes, to_dtype)

    def __eq__(self, other: Any) -> bool:
        return type(other) is _Unravel and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"<unravel to {self._key[0]}>"

    def __call__(self, flat) -> Any:
        treedef, sizes, shapes, from_dtypes, to_dtype = self._key
        from plax.numpy.util import asarray_weak
        flat = asarray_weak(flat)
        aval = get_aval(flat)
        total = sum(sizes)
        if aval.shape != (total,):
            raise ValueError(f"the unravel function expects a 1-D array of shape ({total},), "
                             f"the length of the raveled pytree; got shape {aval.shape}")
        if to_dtype is not None and aval.dtype != to_dtype:
            raise TypeError(f"unravel function given array of dtype {aval.dtype}, but expected "
                            f"dtype {to_dtype} (the leaves had several dtypes, promoted to "
                            f"{to_dtype}); convert it with .astype({to_dtype.name!r})")
        leaves, start = [], 0
        for i, (n, shape) in enumerate(zip(sizes, shapes)):
            chunk = lax.reshape(lax.slice_in_dim(flat, start, start + n, axis=0), shape)
            if from_dtypes is not None and from_dtypes[i] != to_dtype:
                chunk = _convert_quietly(chunk, from_dtypes[i])
            leaves.append(chunk)
            start += n
        return tree_unflatten(treedef, leaves)


def _convert_quietly(x, dtype):
    """``x`` as ``dtype``; a complex vector back to a real leaf drops the imaginary part
    without NumPy's ComplexWarning (the leaf was real, the vector only promoted it)."""
    if dtypes.is_complex(get_aval(x).dtype) and not dtypes.is_complex(dtype):
        x = lax.real(x)
    return lax.convert_element_type(x, dtype)

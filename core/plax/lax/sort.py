"""The sort primitive: sorts several operands along one axis by the first ``num_keys`` of them."""
from __future__ import annotations

import numpy as np

from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.lax.base import ORDERED, asarray, aval_of, canonicalize_axis, check_dtype
from plax.transforms.batching import move_axis_to
from plax.transforms.jvp import Zero

sort_p = Primitive("sort", multiple_results=True)


@sort_p.def_abstract_eval
def _sort_abstract_eval(*operands, dimension, is_stable, num_keys):
    if not operands:
        raise TypeError("sort requires at least one operand")
    shape = operands[0].shape
    for o in operands:
        if o.shape != shape:
            raise TypeError(f"sort operands must all have the same shape, got "
                            f"{[o.shape for o in operands]}")
    if not 1 <= num_keys <= len(operands):
        raise ValueError(f"sort num_keys must be between 1 and the number of operands "
                         f"({len(operands)}), got {num_keys}")
    for k in operands[:num_keys]:
        check_dtype("sort", k, ORDERED + ("complex",), "key")
    if not 0 <= dimension < max(len(shape), 1) or not shape:
        raise ValueError(f"sort dimension {dimension} out of bounds for shape {shape}")
    return tuple(operands)


def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """Sorts ``operand`` (an array, or a sequence sorted together by its first ``num_keys``)
    along ``dimension``. NaNs sort to the end.

    Example:
      >>> lax.sort(jnp.array([3, 1, 2]))
      Array([1, 2, 3], dtype=int32)
    """
    if isinstance(operand, (list, tuple)):
        ops = [asarray(o) for o in operand]
        single = False
    else:
        ops = [asarray(operand)]
        single = True
    dim = canonicalize_axis(dimension, aval_of(ops[0]).ndim)
    out = sort_p.bind(*ops, dimension=dim, is_stable=bool(is_stable), num_keys=int(num_keys))
    return out[0] if single else tuple(out)


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """Sorts ``keys`` along ``dimension`` and applies the same permutation to ``values``."""
    k, v = sort([keys, values], dimension, is_stable, 1)
    return k, v


def take_along_axis_via_gather(x, idx, axis: int):
    """``x`` reindexed along ``axis`` by integer ``idx`` of the same shape (used by sort's JVP)."""
    from plax.lax.shape import expand_dims
    from plax.lax.slicing import GatherDimensionNumbers, GatherScatterMode, gather
    if aval_of(x).size == 0:  # nothing to move (and no slice of size 1 fits an empty axis)
        return x
    nd = aval_of(x).ndim
    others = tuple(i for i in range(nd) if i != axis)
    dn = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,), start_index_map=(axis,),
                                operand_batching_dims=others, start_indices_batching_dims=others)
    return gather(x, expand_dims(idx, (nd,)), dn, (1,) * nd,
                  mode=GatherScatterMode.PROMISE_IN_BOUNDS)


@register_rule("jvp", sort_p)
def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    from plax.lax.shape import broadcasted_iota
    shape = aval_of(primals[0]).shape
    iota = broadcasted_iota(np.int32, shape, dimension)
    *outs, perm = sort_p.bind(*primals, iota, dimension=dimension, is_stable=is_stable,
                              num_keys=num_keys)
    t_out = [t if type(t) is Zero else take_along_axis_via_gather(t, perm, dimension)
             for t in tangents]
    return outs, t_out


@register_rule("batch", sort_p)
def _sort_batch(vals, dims, *, dimension, is_stable, num_keys):
    # as JAX's rule: the operands meet at the first batched one's axis, which stays where it
    # is (the others moved there, unbatched ones broadcast along it), and the sorted dimension
    # shifts past it
    first, bdim = next((v, d) for v, d in zip(vals, dims) if d is not None)
    size = aval_of(first).shape[bdim]
    moved = [move_axis_to(v, d, bdim, size) for v, d in zip(vals, dims)]
    return sort_p.bind(*moved, dimension=dimension + (bdim <= dimension), is_stable=is_stable,
                       num_keys=num_keys), bdim


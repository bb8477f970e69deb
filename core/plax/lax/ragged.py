"""Ragged (grouped) matrix products: ``lax.ragged_dot`` and ``lax.ragged_dot_general``, with
JAX's :class:`RaggedDotDimensionNumbers`.

A ragged dot is a composition here, not a primitive of its own. Why: its meaning (JAX's
own reference lowering, used by XLA wherever no native ragged-dot instruction exists) is
"mask each group's slice of the ragged dimension, then one ``dot_general``", and every piece
of that (``iota``, ``cumsum``, comparisons, ``select_n``, ``broadcast_in_dim``,
``dot_general``) is a primitive that every backend already compiles and fuses, and whose JVP,
transpose and batching rules exist. A primitive would add a kernel per backend (NumPy, Numba,
CuPy) for the same arithmetic, and JVP/transpose/vmap rules that re-derive what the
composition gives for free, including gradients in the contracting and batch modes, which
JAX 0.10.2 leaves unimplemented. The cost is that of the dense expansion: ``g`` times the
work of one ``dot_general``, as in JAX's fallback; fine for the MoE layers of the docs (a
handful of experts), not a grouped-GEMM kernel.

The three modes (``g`` groups, ``x...`` the lhs dimensions of the ragged dimension's kind
listed before it in the dimension numbers):

1. ragged non-contracting ``m``: ``[b..,m..,k..], [g,b..,k..,n..], [b..,x..,g] -> [b..,m..,n..]``
   (``ragged_dot`` is this with ``lhs [m, k]``, ``rhs [g, k, n]``, ``group_sizes [g]``);
   rows past ``sum(group_sizes)`` are zeros;
2. ragged contracting ``k``: ``[b..,m..,k..], [b..,k..,n..], [b..,x..,g] -> [g,b..,m..,n..]``:
   one product per group of the contracted dimension;
3. ragged batch ``b``: ``[b..,m..,k..], [b..,k..,n..], [x..,g] -> [b..,m..,n..]``: every batch
   entry is its own product anyway, so this is ``dot_general`` (the group sizes are checked,
   not used, as in JAX).
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, Optional, Sequence

import numpy as np

__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general"]

Array = Any


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """Dimension numbers of :func:`ragged_dot_general` (JAX's
    ``lax.RaggedDotDimensionNumbers``): the ``dot_general`` dimension numbers
    ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``, the one lhs ragged
    dimension, and the rhs group dimension (one in the non-contracting mode, none otherwise).
    Sequences are stored as tuples, so instances are hashable (a jit parameter)."""
    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: Sequence[int]
    rhs_group_dimensions: Sequence[int]

    def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
        object.__setattr__(self, "dot_dimension_numbers",
                           tuple(tuple(tuple(d) for d in pair) for pair in dot_dimension_numbers))
        object.__setattr__(self, "lhs_ragged_dimensions", tuple(lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", tuple(rhs_group_dimensions))


_BASIC = RaggedDotDimensionNumbers(dot_dimension_numbers=(((1,), (1,)), ((), ())),
                                   lhs_ragged_dimensions=(0,), rhs_group_dimensions=(0,))


class _Mode(enum.Enum):
    NONCONTRACTING = 1
    CONTRACTING = 2
    BATCH = 3


def _free(rank: int, *taken) -> list:
    used = {d for dims in taken for d in dims}
    return [d for d in range(rank) if d not in used]


def _mode(lhs_rank: int, dims: RaggedDotDimensionNumbers) -> tuple:
    ragged = dims.lhs_ragged_dimensions[0]
    (contract, _), (batch, _) = dims.dot_dimension_numbers
    free = _free(lhs_rank, contract, batch)
    if ragged in free:
        return _Mode.NONCONTRACTING, ragged
    if ragged in contract:
        return _Mode.CONTRACTING, ragged
    if ragged in batch:
        return _Mode.BATCH, ragged
    raise TypeError(f"ragged_dot_general: lhs ragged dimension {ragged} is none of the lhs's "
                    f"non-contracting {free}, contracting {list(contract)} or batch "
                    f"{list(batch)} dimensions")


def _prefix(mode: _Mode, rank: int, ragged: int, batch, contract) -> list:
    """The dimensions whose sizes lead ``group_sizes``'s shape (``[b.., x.., g]``)."""
    batch, contract = list(batch), list(contract)
    if mode is _Mode.NONCONTRACTING:
        free = _free(rank, contract, batch)
        return batch + free[:free.index(ragged)]
    if mode is _Mode.CONTRACTING:
        return batch + contract[:contract.index(ragged)]
    return batch[:batch.index(ragged)]


def _check(lhs, rhs, group_sizes, dims: RaggedDotDimensionNumbers) -> tuple:
    """JAX's validation of a ragged dot (TypeError for each bad input); returns the mode, the
    lhs ragged dimension and the group count."""
    if not isinstance(dims, RaggedDotDimensionNumbers):
        raise TypeError("ragged_dot_general: ragged_dot_dimension_numbers must be a "
                        f"lax.RaggedDotDimensionNumbers, got {type(dims).__name__}")
    if not np.issubdtype(group_sizes.dtype, np.integer):
        raise TypeError("ragged_dot_general requires group_sizes of an integer dtype, got "
                        f"{group_sizes.dtype}")
    if len(dims.lhs_ragged_dimensions) != 1:
        raise TypeError("ragged_dot_general expects exactly one lhs ragged dimension, got "
                        f"{dims.lhs_ragged_dimensions}")
    ragged = dims.lhs_ragged_dimensions[0]
    if not 0 <= ragged < lhs.ndim:
        raise TypeError(f"ragged_dot_general: lhs ragged dimension {ragged} is out of range "
                        f"for an lhs of rank {lhs.ndim} (it must be in [0, {lhs.ndim}))")
    mode, ragged = _mode(lhs.ndim, dims)
    (l_contract, r_contract), (l_batch, r_batch) = dims.dot_dimension_numbers
    if group_sizes.ndim == 0:
        raise TypeError("ragged_dot_general: expected group_sizes of rank >= 1, got a scalar")
    if group_sizes.ndim != 1:
        want = tuple(lhs.shape[d] for d in _prefix(mode, lhs.ndim, ragged, l_batch,
                                                     l_contract)) + group_sizes.shape[-1:]
        if tuple(group_sizes.shape) != want:
            raise TypeError(f"ragged_dot_general: expected group_sizes of shape {want}, got "
                            f"{tuple(group_sizes.shape)}")
    for what, l_dims, r_dims in (("contracting", l_contract, r_contract),
                                 ("batch", l_batch, r_batch)):
        l_sizes = tuple(lhs.shape[d] for d in l_dims if 0 <= d < lhs.ndim)
        r_sizes = tuple(rhs.shape[d] for d in r_dims if 0 <= d < rhs.ndim)
        if len(l_sizes) == len(r_sizes) == len(l_dims) == len(r_dims) and l_sizes != r_sizes:
            # said here, before the group axis is added, so the shapes are the user's
            raise TypeError(f"ragged_dot_general requires {what} dimensions of the same sizes, "
                            f"got {l_sizes} and {r_sizes} (lhs shape {tuple(lhs.shape)}, rhs "
                            f"shape {tuple(rhs.shape)})")
    groups = group_sizes.shape[-1]
    rhs_groups = dims.rhs_group_dimensions
    if mode is _Mode.NONCONTRACTING:
        if len(rhs_groups) != 1:
            raise TypeError("ragged_dot_general requires exactly one rhs group dimension when "
                            f"the lhs ragged dimension is non-contracting, got {rhs_groups}")
        g = rhs_groups[0]
        if not 0 <= g < rhs.ndim:
            raise TypeError(f"ragged_dot_general: rhs group dimension {g} is out of range for "
                            f"an rhs of rank {rhs.ndim} (it must be in [0, {rhs.ndim}))")
        if g in r_batch or g in r_contract:
            raise TypeError(f"ragged_dot_general: rhs group dimension {g} must be neither a "
                            f"contracting {list(r_contract)} nor a batch {list(r_batch)} "
                            "dimension of the rhs")
        if rhs.shape[g] != groups:
            raise TypeError(f"ragged_dot_general: expected rhs group dimension {g} of size "
                            f"{groups} (the group count, group_sizes.shape[-1]), got "
                            f"{rhs.shape[g]}")
    elif rhs_groups:
        raise TypeError("ragged_dot_general requires no rhs group dimension when the lhs "
                        f"ragged dimension is contracting or batch, got {rhs_groups}")
    return mode, ragged, groups


def _expand(x, dim: int, group_sizes, prefix: Sequence[int]):
    """``[g] + x.shape``: slice ``j`` keeps the entries of ``x`` whose index along ``dim``
    lies in group ``j`` (of the group sizes for that entry's ``prefix`` indices), zeros
    elsewhere."""
    import plax.lax as lax
    ends = lax.cumsum(group_sizes, axis=group_sizes.ndim - 1)
    starts = lax.sub(ends, group_sizes)
    # group axis first, then the prefix dimensions in increasing order (broadcast_in_dim's
    # dimensions must increase)
    order = list(np.argsort(prefix))
    perm = (group_sizes.ndim - 1,) + tuple(order)
    shape = (group_sizes.shape[-1],) + tuple(x.shape)
    bdims = (0,) + tuple(1 + int(prefix[i]) for i in order)
    ends = lax.broadcast_in_dim(lax.transpose(ends, perm), shape, bdims)
    starts = lax.broadcast_in_dim(lax.transpose(starts, perm), shape, bdims)
    index = lax.broadcasted_iota(group_sizes.dtype, shape, dim + 1)
    inside = lax.bitwise_and(lax.le(starts, index), lax.lt(index, ends))
    wide = lax.broadcast_in_dim(x, shape, tuple(range(1, len(shape))))
    return lax.select(inside, wide, lax.full_like(wide, 0))


def ragged_dot_general(lhs: Array, rhs: Array, group_sizes: Array,
                       ragged_dot_dimension_numbers: RaggedDotDimensionNumbers,
                       precision: Any = None, preferred_element_type: Any = None,
                       group_offset: Optional[Array] = None, out_sharding: Any = None) -> Array:
    """Ragged matrix product: a ``dot_general`` whose lhs has one ragged dimension, cut into
    consecutive groups of ``group_sizes`` entries (JAX's ``lax.ragged_dot_general``).

    The modes, by the kind of the lhs ragged dimension (see the module docstring): a
    non-contracting ragged dimension multiplies each group by its own slice of the rhs group
    dimension; a contracting one gives one product per group (a new leading axis of size
    ``g``); a batch one is ``dot_general``. ``group_sizes`` is ``[g]`` or ``[b.., x.., g]``
    (per batch entry / outer dimension).

    Args:
      lhs: an array.
      rhs: an array of the same dtype.
      group_sizes: integer array whose last axis has the ``g`` group sizes.
      ragged_dot_dimension_numbers: a :class:`RaggedDotDimensionNumbers`.
      precision: as in :func:`plax.lax.dot_general`.
      preferred_element_type: the result dtype, as in :func:`plax.lax.dot_general`.
      group_offset: not supported (``NotImplementedError``, as in JAX outside TPUs).
      out_sharding: the result's sharding, as in :func:`plax.lax.dot_general`.

    Returns:
      The ``dot_general`` result shape, with a leading ``g`` axis in the contracting mode.

    Raises:
      TypeError: non-integer group sizes, a group_sizes shape that does not match, a ragged
        or group dimension out of range or of the wrong kind, a group count that differs
        from the rhs group dimension's size.

    Example:
      >>> dims = lax.RaggedDotDimensionNumbers((((1,), (0,)), ((), ())), [1], [])
      >>> lax.ragged_dot_general(jnp.ones((2, 3)), jnp.ones((3, 2)), jnp.array([1, 2]), dims)
      Array([[[1., 1.],
              [1., 1.]],
      <BLANKLINE>
             [[2., 2.],
              [2., 2.]]], dtype=float32)
    """
    import plax.lax as lax
    import plax.numpy as jnp
    lhs, rhs, group_sizes = jnp.asarray(lhs), jnp.asarray(rhs), jnp.asarray(group_sizes)
    dims = ragged_dot_dimension_numbers
    mode, ragged, _ = _check(lhs, rhs, group_sizes, dims)
    if group_offset is not None:
        raise NotImplementedError("ragged_dot_general: group_offset is not supported (JAX "
                                  "supports it on TPU only)")
    if out_sharding is not None:
        from plax.sharding_types import with_out_sharding
        return with_out_sharding(
            lambda: ragged_dot_general(lhs, rhs, group_sizes, dims, precision,
                                       preferred_element_type), out_sharding)
    (l_contract, r_contract), (l_batch, r_batch) = dims.dot_dimension_numbers
    up = lambda ds: [d + 1 for d in ds]
    dot = lambda a, b, dn: lax.dot_general(a, b, dn, precision=precision,
                                           preferred_element_type=preferred_element_type)
    l_prefix = _prefix(mode, lhs.ndim, ragged, l_batch, l_contract)
    if mode is _Mode.BATCH:
        return dot(lhs, rhs, dims.dot_dimension_numbers)
    if mode is _Mode.NONCONTRACTING:
        # the lhs's group axis contracts with the rhs's group dimension: each row meets
        # only its own group's matrix
        return dot(_expand(lhs, ragged, group_sizes, l_prefix), rhs,
                   ((up(l_contract) + [0], list(r_contract) + [dims.rhs_group_dimensions[0]]),
                    (up(l_batch), list(r_batch))))
    # contracting: both sides masked to each group's slice of k; the group axis is a batch
    rhs_ragged = r_contract[list(l_contract).index(ragged)]
    r_prefix = _prefix(mode, rhs.ndim, rhs_ragged, r_batch, r_contract)
    return dot(_expand(lhs, ragged, group_sizes, l_prefix),
               _expand(rhs, rhs_ragged, group_sizes, r_prefix),
               ((up(l_contract), up(r_contract)), ([0] + up(l_batch), [0] + up(r_batch))))


def ragged_dot(lhs: Array, rhs: Array, group_sizes: Array, precision: Any = None,
               preferred_element_type: Any = None, group_offset: Optional[Array] = None,
               out_sharding: Any = None) -> Array:
    """Grouped matrix product (JAX's ``lax.ragged_dot``, the mixture-of-experts case): rows
    of ``lhs`` ``[m, k]`` come in consecutive groups of ``group_sizes`` ``[g]`` rows, and
    group ``i`` multiplies ``rhs[i]`` ``[k, n]``. Rows past ``sum(group_sizes)`` are zeros.

    Args:
      lhs: ``[m, k]``.
      rhs: ``[g, k, n]``.
      group_sizes: ``[g]`` integers.
      precision, preferred_element_type, out_sharding: as in :func:`ragged_dot_general`.
      group_offset: not supported (as in JAX outside TPUs).

    Returns:
      ``[m, n]``.

    Example:
      >>> lhs = jnp.ones((3, 2))
      >>> rhs = jnp.stack([jnp.ones((2, 2)), 2 * jnp.ones((2, 2))])
      >>> lax.ragged_dot(lhs, rhs, jnp.array([1, 2]))
      Array([[2., 2.],
             [4., 4.],
             [4., 4.]], dtype=float32)
    """
    return ragged_dot_general(lhs, rhs, group_sizes, _BASIC, precision=precision,
                              preferred_element_type=preferred_element_type,
                              group_offset=group_offset, out_sharding=out_sharding)

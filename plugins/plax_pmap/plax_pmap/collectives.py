"""Collectives as primitives: ``psum``, ``pmax``, ``pmin``, ``all_gather``, ``all_to_all``,
``psum_scatter``, ``ppermute`` and ``axis_index`` (``pmean``, ``pshuffle`` and
``axis_size`` are built on them). The primitive objects are defined in
:mod:`plax_pmap.primitives` (exported as ``plax.lax.psum_p`` ...); their rules are here.

Every primitive names its axes in the ``axes`` parameter (a tuple). Each has

* an abstract-eval rule (shapes only; ``axis_size`` is a parameter where the shape needs it),
* JVP and transpose rules (all but ``pmax``/``pmin``/``axis_index`` are linear; ``psum``
  transposes to ``psum`` as in JAX's ``pmap``),
* a batching rule for ``vmap(axis_name=...)``: at the vmap level that binds one of its axes
  the rule computes the collective over the batch (``psum`` sums the batch), at other
  levels it carries the batch dimension through.

Inside ``pmap``/``shard_map`` the primitives are staged into the per-device program and run
by :mod:`plax_pmap.runtime` on the devices' threads, exchanging through shared memory.
Applied where none of their axes is bound they raise JAX's ``NameError``.
"""
from __future__ import annotations

import math
from typing import Any, Hashable, Sequence

import numpy as np

from plax import lax, tree_util
from plax import numpy as jnp
from plax.core import Primitive, registry, varying as _varying
from plax.core.passes import register_value_identity
from plax.core.shaped_array import ShapedArray
from plax.core.trace import get_aval
from plax.transforms.batching import move_axis_to, register_axis_primitive
from plax.transforms.jvp import Zero
from plax_pmap.axes import as_axes, axis_size as _axis_size
from plax_pmap.primitives import (COLLECTIVES, all_gather_p, all_to_all_p, axis_index_p,
                                  pmax_p, pmin_p, ppermute_p, psum_p, psum_scatter_p)

__all__ = ["psum", "pmean", "pmax", "pmin", "all_gather", "all_to_all", "psum_scatter",
           "ppermute", "pshuffle", "axis_index", "axis_size", "pbroadcast", "pvary", "pcast",
           "pswapaxes",
           "COLLECTIVES", "psum_p", "pmax_p", "pmin_p", "all_gather_p", "all_to_all_p",
           "psum_scatter_p", "ppermute_p", "axis_index_p"]


def _axis(aval: ShapedArray, ax: int, what: str) -> int:
    if not -aval.ndim <= ax < max(aval.ndim, 1):
        raise ValueError(f"{what}={ax} is out of bounds for an operand of shape {aval.shape}")
    return ax % max(aval.ndim, 1)


# ------------------------------------------------------------------ abstract evaluation

def _typed(x, axes, shape, reduces: bool = False) -> ShapedArray:
    """The result's aval; inside ``shard_map(check_vma=True)`` typed by its varying axes
    (:mod:`plax.core.varying`): a reduction over ``axes`` is equal along them, every other
    collective's result differs along them."""
    if not _varying.active():
        return ShapedArray(shape, x.dtype, x.weak_type)
    vma = _varying.axes_of(x)
    vma = vma - frozenset(axes) if reduces else vma | frozenset(axes)
    return ShapedArray(shape, x.dtype, x.weak_type, vma)


for _p in (psum_p, pmax_p, pmin_p):
    _p.def_abstract_eval(lambda x, *, axes: _typed(x, axes, x.shape, reduces=True))
ppermute_p.def_abstract_eval(lambda x, *, axes, perm: _typed(x, axes, x.shape))


@all_gather_p.def_abstract_eval
def _all_gather_aval(x, *, axes, axis, axis_size):
    s = list(x.shape)
    s.insert(axis, axis_size)
    return _typed(x, axes, tuple(s))


@all_to_all_p.def_abstract_eval
def _all_to_all_aval(x, *, axes, split_axis, concat_axis, axis_size):
    if x.shape[split_axis] != axis_size:
        raise ValueError(f"all_to_all: split_axis {split_axis} of the operand (shape {x.shape}) "
                         f"must have the size of axis {axes[0]!r}, {axis_size}")
    s = list(x.shape)
    del s[split_axis]
    s.insert(concat_axis, axis_size)
    return _typed(x, axes, tuple(s))


@psum_scatter_p.def_abstract_eval
def _psum_scatter_aval(x, *, axes, scatter_dimension, axis_size):
    if x.shape[scatter_dimension] != axis_size:
        raise ValueError(f"psum_scatter: dimension {scatter_dimension} of the operand (shape "
                         f"{x.shape}) must have the size of axis {axes[0]!r}, {axis_size} "
                         "(pass tiled=True to split it into equal blocks)")
    s = list(x.shape)
    del s[scatter_dimension]
    return _typed(x, axes, tuple(s))


@axis_index_p.def_abstract_eval
def _axis_index_aval(*, axes, axis_size):
    return ShapedArray((), np.dtype(np.int32), False,
                       frozenset(axes) if _varying.active() else frozenset())


for _p in COLLECTIVES:
    _varying.register_self_typed(_p)


# ------------------------------------------------------------------ user functions

def _leafwise(fn, x):
    return tree_util.tree_map(lambda leaf: fn(jnp.asarray(leaf)), x)


def _groups(axis_index_groups, axes, what):
    """``None``, or ``(members, rank)`` for ``axis_index_groups`` over ``axes``: constant
    tables indexed by a member's position on the axes (first name major), ``members[p]`` the
    positions of ``p``'s group in group order and ``rank[p]`` ``p``'s place in it.

    Raises:
      ValueError: the groups are not lists of equal size that together hold every position
        of the axes exactly once.
    """
    if axis_index_groups is None:
        return None
    n = axis_size(axes)
    try:
        groups = [[int(i) for i in g] for g in axis_index_groups]
    except TypeError:
        raise ValueError(f"{what}: axis_index_groups must be a list of lists of axis "
                         f"indices, got {axis_index_groups!r}") from None
    flat = sorted(i for g in groups for i in g)
    if not groups or len({len(g) for g in groups}) != 1 or flat != list(range(n)):
        raise ValueError(f"{what}: axis_index_groups {axis_index_groups!r} must split the "
                         f"{n} positions of axis {_axes_label(axes)!r} into "
                         "groups of equal size, each position in exactly one group")
    members = np.zeros((n, len(groups[0])), np.int32)
    rank = np.zeros(n, np.int32)
    for g in groups:
        for r, i in enumerate(g):
            members[i], rank[i] = g, r
    return members, rank


def _group_size(axes, groups) -> int:
    """How many members take part: the axes' size, or a group's with ``axis_index_groups``."""
    return axis_size(axes) if groups is None else groups[0].shape[1]


def _axes_label(axes):
    return axes if len(axes) > 1 else axes[0]


def _gathered(v, axes, groups):
    """``(values, my rank)``: the values of the members of this member's group (all the
    axes' members without groups), stacked along a new leading axis in group order, and
    this member's place among them (an int32 value)."""
    allv = all_gather(v, axes)
    pos = axis_index(axes)
    if groups is None:
        return allv, pos
    members, rank = groups
    mine = jnp.take(jnp.asarray(members), pos, axis=0)
    return jnp.take(allv, mine, axis=0), jnp.take(jnp.asarray(rank), pos, axis=0)


def psum(x: Any, axis_name: Hashable | Sequence[Hashable], *, axis_index_groups=None) -> Any:
    """The sum of ``x`` over the devices (or batch members) along the named axes.

    Args:
      x: a pytree of arrays.
      axis_name: a name bound by pmap, shard_map or vmap, or a tuple of names (summed over
        all of them).
      axis_index_groups: None, or a list of groups of axis positions (lists of equal
        size that together hold every position once): each member sums over its group.

    Returns:
      ``x``'s structure, each leaf the sum over the axes (equal on every member).

    Raises:
      NameError: an axis name is not bound (``unbound axis name: i``).

    Example:
      >>> plax.vmap(lambda x: plax.lax.psum(x, "i"), axis_name="i")(jnp.arange(3.0))
      Array([3., 3., 3.], dtype=float32)
    """
    axes = as_axes(axis_name)
    groups = _groups(axis_index_groups, axes, "psum")
    if groups is not None:
        return _leafwise(lambda v: jnp.sum(_gathered(v, axes, groups)[0], axis=0), x)
    return _leafwise(lambda v: psum_p.bind(v, axes=axes), x)


def pmax(x: Any, axis_name, *, axis_index_groups=None) -> Any:
    """The maximum of ``x`` over the named axes (see :func:`psum`)."""
    axes = as_axes(axis_name)
    groups = _groups(axis_index_groups, axes, "pmax")
    if groups is not None:
        return _leafwise(lambda v: jnp.max(_gathered(v, axes, groups)[0], axis=0), x)
    return _leafwise(lambda v: pmax_p.bind(v, axes=axes), x)


def pmin(x: Any, axis_name, *, axis_index_groups=None) -> Any:
    """The minimum of ``x`` over the named axes (see :func:`psum`)."""
    axes = as_axes(axis_name)
    groups = _groups(axis_index_groups, axes, "pmin")
    if groups is not None:
        return _leafwise(lambda v: jnp.min(_gathered(v, axes, groups)[0], axis=0), x)
    return _leafwise(lambda v: pmin_p.bind(v, axes=axes), x)


def axis_size(axis_name) -> int:
    """The size of the named axis (the product for a tuple of names), a Python int.

    Raises:
      NameError: a name is not bound.
    """
    return math.prod(_axis_size(n) for n in as_axes(axis_name))


def pmean(x: Any, axis_name, *, axis_index_groups=None) -> Any:
    """The mean of ``x`` over the named axes: ``psum(x) / axis_size``."""
    axes = as_axes(axis_name)
    groups = _groups(axis_index_groups, axes, "pmean")
    n = _group_size(axes, groups)
    return tree_util.tree_map(lambda s: s / n,
                              psum(x, axes, axis_index_groups=axis_index_groups))


def axis_index(axis_name) -> Any:
    """This member's position along the named axis (int32); for a tuple of names the
    position in their product, the first name major.

    Example:
      >>> plax.vmap(lambda x: plax.lax.axis_index("i"), axis_name="i")(jnp.zeros(3))
      Array([0, 1, 2], dtype=int32)
    """
    axes = as_axes(axis_name)
    out = None
    for name in axes:
        i = axis_index_p.bind(axes=(name,), axis_size=_axis_size(name))
        out = i if out is None else out * np.int32(_axis_size(name)) + i
    return out


def _gather_one(v, name, axis):
    return all_gather_p.bind(v, axes=(name,), axis=axis, axis_size=_axis_size(name))


def all_gather(x: Any, axis_name, *, axis_index_groups=None, axis: int = 0,
               tiled: bool = False) -> Any:
    """Every member's ``x``, stacked along a new axis ``axis`` in axis-index order (with
    ``tiled=True``: concatenated along the existing axis ``axis``).

    Example:
      >>> plax.vmap(lambda x: plax.lax.all_gather(x, "i"), axis_name="i")(jnp.arange(2.0))
      Array([[0., 1.],
             [0., 1.]], dtype=float32)
    """
    axes = as_axes(axis_name)
    groups = _groups(axis_index_groups, axes, "all_gather")

    def one(v):
        nd = v.ndim
        ax = axis % (nd if tiled else nd + 1) if (nd or not tiled) else 0
        if tiled and nd == 0:
            raise ValueError("all_gather(tiled=True) needs an operand of rank >= 1")
        n = _group_size(axes, groups)
        if groups is not None:
            g = _gathered(v, axes, groups)[0]
        else:
            g = v
            for name in reversed(axes):  # the first name ends up major
                g = _gather_one(g, name, 0)
            g = lax.reshape(g, (n,) + tuple(v.shape))
        g = jnp.moveaxis(g, 0, ax)
        if tiled:
            s = list(v.shape)
            s[ax] *= n
            g = lax.reshape(g, tuple(s))
        return g

    return _leafwise(one, x)


def all_to_all(x: Any, axis_name, split_axis: int, concat_axis: int, *,
               axis_index_groups=None, tiled: bool = False) -> Any:
    """Member ``i`` sends block ``j`` of its ``split_axis`` to member ``j``, which stacks the
    blocks it receives along ``concat_axis`` in sender order (``tiled=False``: the split axis
    must have the axis' size and is removed, a new axis is inserted; ``tiled=True``: it is
    divided into equal blocks and they are concatenated along ``concat_axis``). A tuple of
    axis names acts on their product (the first name major), ``axis_index_groups`` within
    each group (members numbered by their place in it)."""
    axes = as_axes(axis_name)
    groups = _groups(axis_index_groups, axes, "all_to_all")
    if groups is not None or len(axes) > 1:
        return _leafwise(lambda v: _all_to_all_gathered(v, axes, groups, split_axis,
                                                        concat_axis, tiled), x)
    name = axes[0]
    n = _axis_size(name)

    def one(v):
        nd = v.ndim
        sa, ca = split_axis % nd, concat_axis % nd if tiled else concat_axis % nd
        if not tiled:
            _all_to_all_aval(v.aval, axes=(name,), split_axis=sa, concat_axis=ca, axis_size=n)
            return all_to_all_p.bind(v, axes=(name,), split_axis=sa, concat_axis=ca,
                                     axis_size=n)
        if v.shape[sa] % n:
            raise ValueError(f"all_to_all(tiled=True): split_axis {sa} of size {v.shape[sa]} "
                             f"is not divisible by the size of axis {name!r}, {n}")
        s = list(v.shape)
        blocks = s[:sa] + [n, s[sa] // n] + s[sa + 1:]
        y = all_to_all_p.bind(lax.reshape(v, tuple(blocks)), axes=(name,), split_axis=sa,
                              concat_axis=0, axis_size=n)
        # y: (n senders, ... block at sa ...); put the senders just before concat_axis
        y = jnp.moveaxis(y, 0, ca)
        out = list(y.shape)
        merged = out[:ca] + [out[ca] * out[ca + 1]] + out[ca + 2:]
        return lax.reshape(y, tuple(merged))

    return _leafwise(one, x)


def _all_to_all_gathered(v, axes, groups, split_axis, concat_axis, tiled):
    """``all_to_all`` over several axes or within groups, from the gathered values: this
    member keeps block ``rank`` of every sender's ``split_axis``."""
    nd = v.ndim
    sa, ca = split_axis % nd, concat_axis % nd
    n, what = _group_size(axes, groups), _axes_label(axes)
    if tiled:
        if v.shape[sa] % n:
            raise ValueError(f"all_to_all(tiled=True): split_axis {sa} of size {v.shape[sa]} "
                             f"is not divisible by the size of axis {what!r}, {n}")
        s = list(v.shape)
        v = lax.reshape(v, tuple(s[:sa] + [n, s[sa] // n] + s[sa + 1:]))
    elif v.shape[sa] != n:
        raise ValueError(f"all_to_all: split_axis {sa} of the operand (shape {v.shape}) must "
                         f"have the size of axis {what!r}, {n}")
    senders, rank = _gathered(v, axes, groups)        # (n senders, *v.shape)
    mine = jnp.take(senders, rank, axis=sa + 1)       # (n senders, rest): block ``rank``
    y = jnp.moveaxis(mine, 0, ca)                     # senders at concat_axis
    if not tiled:
        return y
    out = list(y.shape)                               # tiled: merged with the block after
    return lax.reshape(y, tuple(out[:ca] + [out[ca] * out[ca + 1]] + out[ca + 2:]))


def psum_scatter(x: Any, axis_name, *, scatter_dimension: int = 0, axis_index_groups=None,
                 tiled: bool = False) -> Any:
    """The sum over the named axis, of which member ``i`` keeps block ``i`` along
    ``scatter_dimension`` (``tiled=False``: that dimension must have the axis' size and is
    removed; ``tiled=True``: it is divided into equal blocks). A tuple of axis names acts on
    their product (the first name major), ``axis_index_groups`` within each group."""
    axes = as_axes(axis_name)
    groups = _groups(axis_index_groups, axes, "psum_scatter")
    if groups is not None or len(axes) > 1:
        return _leafwise(lambda v: _psum_scatter_gathered(v, axes, groups, scatter_dimension,
                                                          tiled), x)
    name = axes[0]
    n = _axis_size(name)

    def one(v):
        sd = scatter_dimension % v.ndim
        if not tiled:
            _psum_scatter_aval(v.aval, axes=(name,), scatter_dimension=sd, axis_size=n)
            return psum_scatter_p.bind(v, axes=(name,), scatter_dimension=sd, axis_size=n)
        if v.shape[sd] % n:
            raise ValueError(f"psum_scatter(tiled=True): dimension {sd} of size {v.shape[sd]} "
                             f"is not divisible by the size of axis {name!r}, {n}")
        s = list(v.shape)
        blocks = s[:sd] + [n, s[sd] // n] + s[sd + 1:]
        return psum_scatter_p.bind(lax.reshape(v, tuple(blocks)), axes=(name,),
                                   scatter_dimension=sd, axis_size=n)

    return _leafwise(one, x)


def _psum_scatter_gathered(v, axes, groups, scatter_dimension, tiled):
    """``psum_scatter`` over several axes or within groups: the group's sum, of which this
    member keeps block ``rank``."""
    sd = scatter_dimension % v.ndim
    n, what = _group_size(axes, groups), _axes_label(axes)
    if tiled and v.shape[sd] % n:
        raise ValueError(f"psum_scatter(tiled=True): dimension {sd} of size {v.shape[sd]} "
                         f"is not divisible by the size of axis {what!r}, {n}")
    if not tiled and v.shape[sd] != n:
        raise ValueError(f"psum_scatter: dimension {sd} of the operand (shape {v.shape}) must "
                         f"have the size of axis {what!r}, {n} (pass tiled=True to split it "
                         "into equal blocks)")
    values, rank = _gathered(v, axes, groups)
    total = jnp.sum(values, axis=0)
    if not tiled:
        return jnp.take(total, rank, axis=sd)
    size = v.shape[sd] // n
    return lax.dynamic_slice_in_dim(total, rank * size, size, axis=sd)


def ppermute(x: Any, axis_name, perm: Sequence[tuple[int, int]]) -> Any:
    """Sends ``x`` from member ``src`` to member ``dst`` for each pair of ``perm``; members
    that receive nothing get zeros. A tuple of axis names numbers the members on their
    product (the first name major).

    Raises:
      ValueError: ``perm`` names a member twice as source or as destination, or one out of
        range.
    """
    axes = as_axes(axis_name)
    name = _axes_label(axes)
    n = axis_size(axes)
    pairs = tuple((int(s), int(d)) for s, d in perm)
    srcs, dsts = [s for s, _ in pairs], [d for _, d in pairs]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute sources and destinations must be unique, got perm={perm}")
    if any(not 0 <= i < n for i in srcs + dsts):
        raise ValueError(f"ppermute perm={perm} names a member outside axis {name!r} of size {n}")
    if len(axes) > 1:  # the positions on the axes' product, from the gathered values
        src = np.zeros(n, np.int32)
        got = np.zeros(n, bool)
        for s_, d_ in pairs:
            src[d_], got[d_] = s_, True

        def one(v):
            values, pos = _gathered(v, axes, None)
            mine = jnp.take(values, jnp.take(jnp.asarray(src), pos, axis=0), axis=0)
            return jnp.where(jnp.take(jnp.asarray(got), pos, axis=0), mine,
                             jnp.zeros_like(mine))
        return _leafwise(one, x)
    return _leafwise(lambda v: ppermute_p.bind(v, axes=axes, perm=pairs), x)


def pshuffle(x: Any, axis_name, perm: Sequence[int]) -> Any:
    """Member ``i`` receives the ``x`` of member ``perm[i]`` (``perm`` a permutation)."""
    if sorted(perm) != list(range(len(perm))):
        raise ValueError(f"pshuffle perm must be a permutation of range(n), got {perm}")
    return ppermute(x, axis_name, [(s, d) for d, s in enumerate(perm)])


def pbroadcast(x: Any, axis_name, source: int) -> Any:
    """Every member receives the ``x`` of member ``source`` (its position on the axes).

    Computed as a ``psum`` in which every other member contributes zeros, so the result is
    replicated over the axes (``shard_map``'s replication check sees a ``psum``) and each
    member sends one operand rather than receiving all of them."""
    axes = as_axes(axis_name)
    n = axis_size(axes)
    if not 0 <= int(source) < n:
        raise ValueError(f"pbroadcast source={source} is outside axis {_axes_label(axes)!r} "
                         f"of size {n}")
    mine = lax.eq(axis_index(axes), np.int32(source))

    def one(v):
        if v.dtype == np.bool_:  # (a sum of booleans is their "or": count, then compare)
            return lax.ne(one(lax.convert_element_type(v, np.int32)), np.int32(0))
        return psum(jnp.where(mine, v, jnp.zeros_like(v)), axes)

    return _leafwise(one, x)


# The type cast itself: the identity on values, typed as varying over ``axes`` (shown as
# ``pvary[axes=('x',)]`` in a per-device jaxpr, as JAX shows it). Bound only while a
# shard_map body is typed; backends never see it (``plax.core.passes`` erases it before
# compiling). Linear, its transpose a psum over its axes (with the other collectives' below).
pvary_p = Primitive("pvary")
registry.register_rule("impl", pvary_p)(lambda x, *, axes: x)
_varying.register_self_typed(pvary_p)
register_value_identity(pvary_p)


@pvary_p.def_abstract_eval
def _pvary_aval(x, *, axes):
    return ShapedArray(x.shape, x.dtype, x.weak_type, _varying.axes_of(x) | frozenset(axes))


# vmap formulation: a value's type there is whether it is batched, so the cast is nothing
registry.register_rule("batch", pvary_p)(lambda vals, dims, *, axes: (vals[0], dims[0]))
# (the vmap level binding the axes handles it even for a value from below that level, as it
# does every collective, so the cast never reaches the transforms outside the shard_map)
register_axis_primitive(pvary_p, lambda params: params["axes"])
# what the core calls where a value is made like a varying one (zeros_like, full_like)
_varying.register_caster(lambda x, axes: pvary_p.bind(x, axes=tuple(axes)))


def pvary(x: Any, axis_name) -> Any:
    """``x``, typed as varying over the named axes inside ``shard_map(check_vma=True)``
    (JAX's ``pvary``; JAX 0.10 spells it ``pcast(x, axis_name, to="varying")``). Values
    are unchanged; the type matters for ``out_specs`` (a varying value cannot go to an entry
    that leaves the axes out) and reverse mode (the cotangent is summed over the devices).
    An invariant value used with varying ones is cast implicitly, so it is rarely needed.
    Outside a typed shard_map body it is the identity."""
    axes = as_axes(axis_name)
    for name in axes:
        _axis_size(name)  # NameError for an unbound name, as every collective
    if not _varying.active():
        return x

    def one(leaf):
        missing = tuple(a for a in axes if a not in _varying.axes_of(get_aval(leaf)))
        return pvary_p.bind(leaf, axes=missing) if missing else leaf

    return tree_util.tree_map(one, x)


def pswapaxes(x: Any, axis_name, axis: int, *, axis_index_groups=None) -> Any:
    """Swaps the named (mapped) axis with the operand's axis ``axis``: member ``i``'s block
    ``j`` along ``axis`` goes to member ``j``, which keeps the blocks it receives along
    ``axis`` in sender order. That dimension must have the size of the named axis (of a
    group, with ``axis_index_groups``). The same as ``all_to_all(x, axis_name, axis, axis)``.

    Example:
      >>> x = jnp.arange(4.0).reshape(2, 2)   # member i holds row i
      >>> plax.vmap(lambda r: plax.lax.pswapaxes(r, "i", 0), axis_name="i")(x)
      Array([[0., 2.],
             [1., 3.]], dtype=float32)
    """
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


_PCAST_TARGETS = ("varying", "reduced", "unreduced")


def pcast(x: Any, axis_name, *, to: str) -> Any:
    """Casts the type of ``x`` along the named axes: ``to="varying"`` marks an invariant
    value as varying over them (JAX 0.10's replacement for ``pvary``; see :func:`pvary`
    for what plax's typing records).

    Args:
      x: a pytree of arrays.
      axis_name: a name or a tuple of names, bound by ``shard_map``, ``pmap`` or ``vmap``.
      to: ``"varying"``. JAX's ``"reduced"`` and ``"unreduced"`` belong to its explicit
        sharding types, which plax does not model (``NotImplementedError``).

    Returns:
      ``x``'s values, unchanged.

    Raises:
      ValueError: ``to`` is not one of JAX's targets, or (inside a typed ``shard_map``)
        ``x`` already varies over some of the axes.
      TypeError: ``axis_name`` is a set.
      NameError: an axis name is not bound.

    Example:
      >>> plax.vmap(lambda v: plax.lax.pcast(v, "i", to="varying"), axis_name="i")(
      ...     jnp.arange(2.0))
      Array([0., 1.], dtype=float32)
    """
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"pcast: axis_name must be a name or a tuple of names, got the set "
                        f"{axis_name!r} (a set has no order)")
    if to not in _PCAST_TARGETS:
        raise ValueError(f"pcast: to={to!r} is not one of {_PCAST_TARGETS}")
    if to != "varying":
        raise NotImplementedError(
            f"pcast(to={to!r}): plax does not model JAX's reduced/unreduced sharding types "
            "(explicit-sharding meshes are computed on one device); use psum/psum_scatter "
            "to reduce over the axes")
    axes = as_axes(axis_name)
    if not axes:
        return x

    def check(leaf):
        aval = get_aval(leaf)
        already = _varying.axes_of(aval) & frozenset(axes) if _varying.active() else ()
        if already:
            raise ValueError(f"pcast(to='varying'): the value ({aval}) already varies over "
                             f"{sorted(already, key=str)}; only an invariant value can be "
                             "cast to varying")
        return leaf

    return pvary(tree_util.tree_map(check, x), axes)


# ------------------------------------------------------------------ JVP and transpose

def _linear(p, transpose):
    """JVP and transpose rules of a linear one-operand primitive ``p``: its tangent is ``p`` of
    the tangent, its transpose ``transpose(ct, x, **params)`` (symbolic zeros pass)."""
    def jvp(primals, tangents, **params):
        out = p.bind(*primals, **params)
        t = tangents[0]
        if type(t) is Zero:
            return out, Zero(get_aval(out))
        return out, p.bind(t, **params)

    registry.register_rule("jvp", p)(jvp)

    def tr(ct, x, **params):
        if type(ct) is Zero:
            return [Zero(x.aval)]
        return [transpose(ct, x, **params)]

    registry.register_rule("transpose", p)(tr)


def _psum_transpose(ct, x, axes):
    # untyped (pmap, vmap, shard_map(check_vma=False)): psum transposes to psum. Typed: the
    # cotangent is already equal along the axes the operand varied over (identity there),
    # and summed along those it was implicitly broadcast over (JAX's pvary)
    if _varying.active():
        axes = tuple(a for a in axes if a not in _varying.axes_of(x.aval))
        if not axes:
            return ct
    return psum_p.bind(ct, axes=axes)


_linear(psum_p, _psum_transpose)
# the cotangent of a value broadcast to the devices: summed over them
_linear(pvary_p, lambda ct, x, axes: psum_p.bind(ct, axes=axes))
# a cotangent reaching a value that varies over fewer axes is summed over the others
_varying.register_reducer(lambda ct, axes: psum_p.bind(ct, axes=axes))
_linear(ppermute_p, lambda ct, x, axes, perm: ppermute_p.bind(
    ct, axes=axes, perm=tuple((d, s) for s, d in perm)))
_linear(all_gather_p, lambda ct, x, axes, axis, axis_size: psum_scatter_p.bind(
    ct, axes=axes, scatter_dimension=axis, axis_size=axis_size))
_linear(psum_scatter_p, lambda ct, x, axes, scatter_dimension, axis_size: all_gather_p.bind(
    ct, axes=axes, axis=scatter_dimension, axis_size=axis_size))
_linear(all_to_all_p, lambda ct, x, axes, split_axis, concat_axis, axis_size: all_to_all_p.bind(
    ct, axes=axes, split_axis=concat_axis, concat_axis=split_axis, axis_size=axis_size))


def _minmax_jvp(p):
    def jvp(primals, tangents, **params):
        x, = primals
        out = p.bind(x, **params)
        t = tangents[0]
        if type(t) is Zero:
            return out, Zero(get_aval(out))
        # the tangent of the members holding the extremum, averaged over ties
        hit = lax.convert_element_type(lax.eq(x, out), get_aval(t).dtype)
        num = psum_p.bind(lax.mul(t, hit), axes=params["axes"])
        den = psum_p.bind(hit, axes=params["axes"])
        return out, lax.div(num, den)

    registry.register_rule("jvp", p)(jvp)


_minmax_jvp(pmax_p)
_minmax_jvp(pmin_p)


def _axis_index_jvp(primals, tangents, **params):
    out = axis_index_p.bind(**params)
    return out, Zero.from_primal(out)


registry.register_rule("jvp", axis_index_p)(_axis_index_jvp)


# ------------------------------------------------------------------ batching (vmap axis_name)

def _own(axis_data, axes) -> bool:
    return axis_data.name is not None and axis_data.name in axes


def _rest(axis_data, axes) -> tuple:
    return tuple(a for a in axes if a != axis_data.name)


def _batch_rule(p):
    def deco(fn):
        fn.needs_axis_data = True
        registry.register_rule("batch", p)(fn)
        return fn
    return deco


def _reducer(p, reduce, on_unbatched):
    @_batch_rule(p)
    def rule(vals, dims, *, axes, axis_data):
        x, = vals
        d, = dims
        if not _own(axis_data, axes):
            return p.bind(x, axes=axes), d
        y = on_unbatched(x, axis_data.size) if d is None else reduce(x, d)
        rest = _rest(axis_data, axes)
        if rest:
            y = p.bind(y, axes=rest)
        return y, None
    return rule


def _scale(x, n):
    return lax.mul(x, lax.convert_element_type(np.asarray(n), get_aval(x).dtype))


_reducer(psum_p, lambda x, d: lax.reduce_sum(x, (d,)), _scale)
_reducer(pmax_p, lambda x, d: lax.reduce_max(x, (d,)), lambda x, n: x)
_reducer(pmin_p, lambda x, d: lax.reduce_min(x, (d,)), lambda x, n: x)


@_batch_rule(axis_index_p)
def _axis_index_batch(vals, dims, *, axes, axis_size, axis_data):
    if not _own(axis_data, axes):
        return axis_index_p.bind(axes=axes, axis_size=axis_size), None
    return lax.iota(np.int32, axis_data.size), 0


@_batch_rule(all_gather_p)
def _all_gather_batch(vals, dims, *, axes, axis, axis_size, axis_data):
    x, = vals
    d, = dims
    if not _own(axis_data, axes):
        x = move_axis_to(x, d, 0, axis_data.size)
        return all_gather_p.bind(x, axes=axes, axis=axis + 1, axis_size=axis_size), 0
    x = move_axis_to(x, d, 0, axis_data.size)  # (n, ...): every member's value
    return jnp.moveaxis(x, 0, axis), None


@_batch_rule(psum_scatter_p)
def _psum_scatter_batch(vals, dims, *, axes, scatter_dimension, axis_size, axis_data):
    x, = vals
    d, = dims
    sd = scatter_dimension
    if not _own(axis_data, axes):
        x = move_axis_to(x, d, 0, axis_data.size)
        return psum_scatter_p.bind(x, axes=axes, scatter_dimension=sd + 1,
                                   axis_size=axis_size), 0
    if d is None:
        total = _scale(x, axis_data.size)
        return jnp.moveaxis(total, sd, 0), 0
    x = move_axis_to(x, d, 0, axis_data.size)
    total = lax.reduce_sum(x, (0,))
    return jnp.moveaxis(total, sd, 0), 0


@_batch_rule(all_to_all_p)
def _all_to_all_batch(vals, dims, *, axes, split_axis, concat_axis, axis_size, axis_data):
    x, = vals
    d, = dims
    x = move_axis_to(x, d, 0, axis_data.size)
    if not _own(axis_data, axes):
        return all_to_all_p.bind(x, axes=axes, split_axis=split_axis + 1,
                                 concat_axis=concat_axis + 1, axis_size=axis_size), 0
    # x: (senders i, ...split j...) -> receiver j gets x[i, ..j..] stacked over i at concat_axis
    y = jnp.moveaxis(x, split_axis + 1, 0)          # (j, i, rest)
    return jnp.moveaxis(y, 1, concat_axis + 1), 0


@_batch_rule(ppermute_p)
def _ppermute_batch(vals, dims, *, axes, perm, axis_data):
    x, = vals
    d, = dims
    if not _own(axis_data, axes):
        return ppermute_p.bind(x, axes=axes, perm=perm), d
    n = axis_data.size
    x = move_axis_to(x, d, 0, n)
    src = np.zeros(n, np.int32)
    got = np.zeros(n, bool)
    for s, t in perm:
        src[t], got[t] = s, True
    taken = jnp.take(x, jnp.asarray(src), axis=0)
    mask = jnp.asarray(got).reshape((n,) + (1,) * (x.ndim - 1))
    return jnp.where(mask, taken, jnp.zeros_like(taken)), 0


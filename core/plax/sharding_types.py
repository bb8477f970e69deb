"""Sharding in types (JAX 0.10's explicit sharding): how operations propagate shardings.

On a mesh whose axes are ``AxisType.Explicit`` (the default of :func:`plax.make_mesh`), an
array's :class:`~plax.sharding.NamedSharding` is part of its type: ``plax.typeof(x)`` prints
``f32[8@X,4@Y]`` and every operation gives its result a sharding computed from its operands'
by a *sharding rule* (this module), as JAX does:

* elementwise operations keep the operands' common spec (a dimension split over an axis in
  one operand and unsplit in another is split in the result; two different splits are a
  :class:`ShardingTypeError`);
* reductions drop the reduced dimensions' entries; ``transpose`` permutes them;
  ``broadcast_in_dim`` maps them to the new positions; ``reshape`` merges or splits them;
* ``dot_general`` keeps the batch and free dimensions' entries, and refuses contracting
  dimensions split on both sides unless ``out_sharding=`` says what the result is;
* ``sort``, ``top_k`` and the cumulative reductions need their axis unsplit;
* slicing, gathers and scatters follow :mod:`plax.sharding_indexing`.

:func:`cast` gives a value a sharding (``reshard``): eagerly it places the array, under a
trace it types it. The backward pass casts each cotangent to its primal's sharding.

Eagerly, an operation whose rule keeps every device's block local (elementwise operations,
transposes, reductions over unsplit dimensions, sorts and scans along unsplit axes) runs on
each device on that device's buffers: nothing is gathered. Other operations gather their
operands on the first device, compute there, and place the result as its sharding says
(values are exact either way). Under ``jit`` the input types carry their shardings and the
program is partitioned: each device runs its blocks, exchanging data where the types say so
(:mod:`plax.sharding_spmd`, :mod:`plax.sharding_partition`).

The eager hook (:func:`apply_sharded`) is reached only when an operand is held by several
devices under a NamedSharding, so programs that never build a mesh pay nothing; the
``out_sharding=`` parameters (:func:`with_out_sharding`) cost one ``is None`` test.
"""
from __future__ import annotations

import contextlib
import math
import threading
from typing import Any, Callable, Sequence

from plax.sharding import AxisType, NamedSharding, PartitionSpec
from plax.sharding_unreduced import (check_unreduced_operands, unreduced_result_axes,
                                     with_unreduced)


class ShardingTypeError(Exception):
    """An explicitly sharded program whose result sharding is ambiguous or inconsistent
    (JAX 0.10's ``ShardingTypeError``): the message says which operands disagree and how
    to resolve it (``out_sharding=``, :func:`plax.sharding.reshard`)."""


Dims = tuple  # one tuple of mesh axis names per array dimension (() when unsplit)


def _names(entry) -> tuple:
    return () if entry is None else entry if isinstance(entry, tuple) else (entry,)


def _entry(names: tuple):
    return None if not names else names[0] if len(names) == 1 else tuple(names)


def spec_dims(spec: PartitionSpec, ndim: int) -> Dims:
    """``spec`` as one tuple of axis names per dimension, padded to ``ndim``."""
    out = [_names(e) for e in spec.partitions][:ndim]
    return tuple(out + [()] * (ndim - len(out)))


def dims_spec(dims: Dims) -> PartitionSpec:
    """The PartitionSpec of ``dims`` (the inverse of :func:`spec_dims`)."""
    return PartitionSpec(*map(_entry, dims))


def _spec_tuple(dims: Dims) -> tuple:
    return tuple(map(_entry, dims))


def sharded_dims_str(shape: Sequence[int], sharding: NamedSharding) -> str:
    """The dimensions of a type as JAX prints them: ``8@X,4``, ``32@(X,Y)`` (only the
    mesh's Explicit axes are part of the type).

    Example:
      >>> mesh = plax.make_mesh((1,), ("X",))
      >>> sharded_dims_str((8, 4), NamedSharding(mesh, PartitionSpec("X")))
      '8@X,4'
    """
    explicit = set(sharding.mesh.explicit_axes)
    parts = []
    for n, names in zip(shape, spec_dims(sharding.spec, len(shape))):
        names = tuple(a for a in names if a in explicit)
        parts.append(f"{n}@{names[0]}" if len(names) == 1 else
                     f"{n}@({','.join(names)})" if names else str(n))
    return ",".join(parts)


def type_sharding(x: Any, aval) -> NamedSharding:
    """The sharding of ``x``'s type, as ``jax.typeof(x).sharding`` gives it: a NamedSharding
    over the abstract mesh of ``x``'s mesh (the current abstract mesh for a value not laid
    out over one), whose spec names only the Explicit axes.

    Example:
      >>> type_sharding(jnp.ones(3), plax.typeof(jnp.ones(3)))
      NamedSharding(mesh=AbstractMesh((), axis_types=()), spec=P(None,))
    """
    from plax.sharding import AbstractMesh, get_abstract_mesh
    s = getattr(aval, "sharding", None)
    if not isinstance(s, NamedSharding):
        s = getattr(x, "sharding", None) if hasattr(x, "_device") else None
    ndim = len(aval.shape)
    if not isinstance(s, NamedSharding):
        mesh = get_abstract_mesh()
        key = (mesh, ndim)
        found = _UNPLACED.get(key)
        if found is None:
            found = _UNPLACED[key] = NamedSharding(mesh, PartitionSpec(*(None,) * ndim))
        return found
    mesh = s.mesh if isinstance(s.mesh, AbstractMesh) else s.mesh.abstract_mesh
    explicit = set(mesh.explicit_axes)
    dims = [tuple(a for a in names if a in explicit) for names in spec_dims(s.spec, ndim)]
    return NamedSharding(mesh, _with_extras(PartitionSpec(*[_entry(d) for d in dims]), s.spec))


def unreduced_str(sharding: Any) -> str:
    """The unreduced and reduced mesh axes of a type's sharding as JAX prints them after the
    dimensions: ``{U:Y}``, ``{R:(X,Y)}`` (in mesh order); '' when there are none."""
    spec = getattr(sharding, "spec", None)
    out = ""
    for tag, axes in (("U", getattr(spec, "unreduced", ())), ("R", getattr(spec, "reduced", ()))):
        if axes:
            names = [a for a in sharding.mesh.axis_names if a in axes]
            out += "{" + tag + ":" + (names[0] if len(names) == 1 else
                                      f"({','.join(names)})") + "}"
    return out


_UNPLACED: dict = {}  # (abstract mesh, rank) -> the type sharding of a value on no mesh


def _with_extras(spec: PartitionSpec, like: PartitionSpec) -> PartitionSpec:
    """``spec`` with ``like``'s unreduced and reduced axes (JAX 0.10's ``P(unreduced=...)``)."""
    unreduced = getattr(like, "unreduced", frozenset())
    reduced = getattr(like, "reduced", frozenset())
    if not unreduced and not reduced:
        return spec
    return PartitionSpec(*spec.partitions, unreduced=unreduced, reduced=reduced)


def explicit_sharding(x: Any) -> NamedSharding | None:
    """``x``'s NamedSharding when its mesh has an Explicit axis (the sharding is then part
    of its type), else None."""
    s = getattr(x, "sharding", None)
    if isinstance(s, NamedSharding) and AxisType.Explicit in s.mesh.axis_types:
        return s
    return None


def type_dims(aval) -> Dims:
    """The Explicit mesh axes of each dimension of ``aval``'s type (all ``()`` when it has
    no explicit sharding): what type equality compares."""
    s = explicit_sharding(aval)
    if s is None:
        return ((),) * len(aval.shape)
    explicit = set(s.mesh.explicit_axes)
    return tuple(tuple(a for a in names if a in explicit)
                 for names in spec_dims(s.spec, len(aval.shape)))


def check_scanned_unsplit(avals: Sequence) -> None:
    """JAX's ValueError for a ``scan`` over an axis that is split over devices."""
    for aval in avals:
        s = explicit_sharding(aval)
        if s is not None and aval.shape and spec_dims(s.spec, len(aval.shape))[0]:
            raise ValueError("0th dimension of all xs should be replicated. Got "
                             f"{dims_spec(spec_dims(s.spec, len(aval.shape)))!r}")


def scanned_slice_sharding(aval) -> NamedSharding:
    """The sharding of one slice ``x[i]`` of a scanned ``x`` (its leading axis unsplit)."""
    s = aval.sharding
    return NamedSharding(s.mesh, dims_spec(spec_dims(s.spec, len(aval.shape))[1:]))


def stacked_sharding(aval) -> NamedSharding:
    """The sharding of a scan's stacked output of per-step values of type ``aval``."""
    s = aval.sharding
    return NamedSharding(s.mesh, dims_spec(((),) + spec_dims(s.spec, len(aval.shape))))


def check_replicated(aval, name: str) -> None:
    """JAX's error for a cumulative reduction over a flattened input that is split."""
    if any(type_dims(aval)):
        raise ShardingTypeError(
            f"The input should be fully replicated when axis is not specified to {name}. Got "
            f"input type={aval.dtype.name}[{sharded_dims_str(aval.shape, aval.sharding)}]")


def explicit_type(x: Any) -> NamedSharding | None:
    """The explicit sharding in the type of ``x`` (an array or a tracer), else None."""
    aval = getattr(x, "aval", None)
    return explicit_sharding(aval) if aval is not None else None


# ------------------------------------------------------------------ shard_map's in_specs

def shard_map_checks_types(mesh, axis_names) -> bool:
    """Whether ``shard_map`` over ``mesh`` (manual over ``axis_names``, None: all its
    axes) compares its ``in_specs`` with its arguments' types: as JAX 0.10, when it is
    manual over every axis of the mesh and every one is Explicit."""
    names = tuple(mesh.axis_names)
    manual = set(names) if axis_names is None else set(
        (axis_names,) if isinstance(axis_names, str) else axis_names)
    return manual == set(names) and set(mesh.explicit_axes) == set(names)


def inferred_in_specs(leaves: Sequence) -> list:
    """The ``in_specs`` of ``shard_map`` left out on an all-Explicit mesh: each argument's
    type's spec (``P()`` for one with no sharding), as JAX infers them."""
    out = []
    for x in leaves:
        s = explicit_type(x)
        out.append(PartitionSpec() if s is None else s.spec)
    return out


def check_in_specs(leaves: Sequence, specs: Sequence) -> None:
    """JAX 0.10's ValueError for an argument of ``shard_map`` (over an all-Explicit mesh)
    whose type's spec is not its ``in_specs`` entry (both padded to its rank)."""
    for x, spec in zip(leaves, specs):
        ndim = len(getattr(x, "shape", ()))
        s = explicit_type(x)
        have = spec_dims(s.spec, ndim) if s is not None else ((),) * ndim
        want = spec_dims(spec, ndim)
        # unreduced/reduced axes are part of the type too (each device's partial sums)
        have_spec = _with_extras(dims_spec(have), s.spec if s is not None else None)
        want_spec = _with_extras(dims_spec(want), spec)
        if have_spec != want_spec:
            from plax.api_util import typeof
            raise ValueError(
                f"in_specs passed to shard_map: {want_spec!r} does not match the specs "
                f"of the input: {have_spec!r} for arg: {typeof(x)}. `in_specs` is an "
                "optional argument so you can omit specifying it and shard_map will infer "
                "the in_specs from the arguments. If you want to reshard your inputs, you can "
                "use `jax.reshard` on the arguments and then pass those args to shard_map.")


# ------------------------------------------------------------------ with_sharding_constraint

def constraint_is_assertion(xs: Any, shardings: Any) -> bool:
    """JAX 0.10's ``with_sharding_constraint`` on Explicit axes: with a current mesh whose
    axes are all Explicit it only asserts that each value's type is its sharding (True:
    nothing to place); a NamedSharding naming Explicit axes with no mesh set is refused.
    False: the constraint places the values (:func:`plax.sharding._place_tree`, which also
    reports malformed arguments).

    Raises:
      AssertionError: a value's type is split otherwise than its constraint says.
      ValueError: a NamedSharding names Explicit axes while no mesh is set.
    """
    from plax import tree_util
    from plax.sharding import _is_sharding_leaf, get_mesh
    try:
        leaves, treedef = tree_util.tree_flatten(xs)
        targets = treedef.flatten_up_to(
            tree_util.tree_broadcast(shardings, xs, is_leaf=_is_sharding_leaf))
    except (ValueError, TypeError):
        return False
    mesh = get_mesh()
    if mesh is None:
        for s in targets:
            if isinstance(s, NamedSharding) and any(_names(e) for e in s.spec.partitions) and \
                    any(s.mesh.axis_types[s.mesh.axis_names.index(a)] == AxisType.Explicit
                        for e in s.spec.partitions for a in _names(e)):
                raise ValueError(
                    "The spec of NamedSharding passed to with_sharding_constraint can only "
                    f"refer to Auto axes of the mesh. Got spec={s.spec!r} and mesh="
                    f"{s.mesh.abstract_mesh!r}. You probably meant to use `reshard` API?")
        return False
    if not mesh.axis_names or set(mesh.explicit_axes) != set(mesh.axis_names):
        return False
    for x, s in zip(leaves, targets):
        if isinstance(s, PartitionSpec):
            spec = s
        elif isinstance(s, NamedSharding):
            spec = s.spec
        else:
            return False
        ndim = len(getattr(x, "shape", ()))
        have = explicit_type(x)
        have = spec_dims(have.spec, ndim) if have is not None else ((),) * ndim
        if have != spec_dims(spec, ndim):
            raise AssertionError(
                "`with_sharding_constraint` acts as an assert when all axes of mesh are of "
                f"type `Explicit`. The array sharding: {dims_spec(have)!r} did not match the "
                f"sharding provided: {dims_spec(spec_dims(spec, ndim))!r}. Please use "
                "`jax.sharding.reshard` to shard your input to the sharding you want.")
    return True


# ------------------------------------------------------------------ out_sharding= of dot

_override = threading.local()


@contextlib.contextmanager
def dot_out_sharding(spec: PartitionSpec | None):
    """While active, ``dot_general``'s rule gives ``spec`` instead of deriving (and perhaps
    refusing) one: what ``out_sharding=`` of ``jnp.dot``/``matmul``/``einsum`` means."""
    previous = getattr(_override, "spec", None)
    _override.spec = spec
    try:
        yield
    finally:
        _override.spec = previous


def with_out_sharding(compute: Callable[[], Any], out_sharding: Any) -> Any:
    """``compute()`` placed as ``out_sharding`` says: what JAX 0.10's ``out_sharding=``
    parameter of ``jnp.zeros``, ``jnp.dot``, ``random.normal``, ... means. A
    ``dot_general`` or ``reshape`` computed inside takes that sharding instead of deriving one
    (so contracting split dimensions is allowed); the result is then placed with
    :func:`plax.sharding.reshard` (a Sharding, or a PartitionSpec resolved on the current
    mesh; under a transformation the traced value is returned as it is).

    Args:
      compute: computes the unsharded result.
      out_sharding: a :class:`~plax.sharding.Sharding` or PartitionSpec.

    Returns:
      The result of ``compute`` with that sharding.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     with_out_sharding(lambda: jnp.zeros(4), PartitionSpec("x")).sharding.spec
      P('x',)
    """
    from plax.sharding import reshard
    spec = out_sharding.spec if isinstance(out_sharding, NamedSharding) else out_sharding
    with dot_out_sharding(spec if isinstance(spec, PartitionSpec) else None):
        out = compute()
    return reshard(out, out_sharding)


def recorded_out_sharding(out_sharding: Any, caller: str) -> NamedSharding | None:
    """The ``sharding=`` parameter JAX records in ``caller``'s equation for its
    ``out_sharding=`` argument: a NamedSharding over the abstract mesh (the current mesh's
    for a PartitionSpec) with the spec as given; None for another kind of Sharding.

    Raises:
      ValueError: the spec names a mesh axis that is not Explicit (JAX's error).

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     recorded_out_sharding(PartitionSpec("x"), "reshape").spec
      P('x',)
    """
    from plax.sharding import _check_reshard_axes, _resolve
    resolved = _resolve(out_sharding, f"{caller} out_sharding")
    if not isinstance(resolved, NamedSharding):
        return None
    _check_reshard_axes(resolved, caller)
    mesh = resolved.mesh
    return NamedSharding(getattr(mesh, "abstract_mesh", mesh), resolved.spec)


# ------------------------------------------------------------------ casts and untyped work

def _cast_target() -> tuple | None:
    """``(sharding, rank of the value cast)`` while a :func:`cast` is staged, else None."""
    return getattr(_override, "cast", None)


#: how many :func:`cast` calls are staging now, in any thread: a cheap test for the staging
#: trace before it asks :func:`casting` about its own thread
casts_in_progress = [0]


def casting() -> bool:
    """Whether a :func:`cast` is being staged in this thread (the staging trace then types
    the equation it records even when its operand has no sharding)."""
    return getattr(_override, "cast", None) is not None


def cast(x: Any, sharding: NamedSharding) -> Any:
    """``x`` with the explicit sharding ``sharding``: what ``reshard`` means in a type.

    Eagerly the array is placed as ``sharding`` says (nothing moves when it already is).
    Under a trace one identity ``broadcast_in_dim`` is staged whose result has that sharding
    in its type (JAX stages a ``reshard`` equation; plax reuses a primitive every backend
    runs, so compiled programs need nothing new).

    Args:
      x: an array or a tracer.
      sharding: a NamedSharding whose mesh has an Explicit axis.

    Returns:
      ``x`` typed (and, eagerly, placed) as ``sharding``.

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> cast(jnp.ones(4), NamedSharding(mesh, PartitionSpec("x"))).sharding.spec
      P('x',)
    """
    from plax.core.trace import Tracer
    if not isinstance(x, Tracer):
        if explicit_sharding(x) == sharding:
            return x
        from plax.device import _shard_leaf
        return _shard_leaf(x, sharding)
    if getattr(x.aval, "sharding", None) == sharding:
        return x
    from plax.lax.shape import broadcast_in_dim_p
    with broadcasts_typed(sharding, x.ndim):
        return broadcast_in_dim_p.bind(x, shape=tuple(x.shape),
                                       broadcast_dimensions=tuple(range(x.ndim)))


@contextlib.contextmanager
def broadcasts_typed(sharding: NamedSharding, rank: int):
    """While active, a ``broadcast_in_dim`` staged in this thread to a result of rank
    ``rank`` is typed with ``sharding`` (leading dimensions beyond ``rank`` unsplit):
    how :func:`cast` types its equation, and how ``jnp.zeros_like`` of a traced sharded
    value stages its one ``broadcast_in_dim`` typed as JAX's is.

    Example::

      # sharding: NamedSharding(mesh, P('X', 'Y')) on a mesh of Explicit axes, inside a trace
      with broadcasts_typed(sharding, 2):
          lax.full((8, 4), 0.0, jnp.float32)   # staged typed f32[8@X,4@Y]
    """
    previous = getattr(_override, "cast", None)
    _override.cast = (sharding, rank)
    casts_in_progress[0] += 1
    try:
        yield
    finally:
        casts_in_progress[0] -= 1
        _override.cast = previous


def typed_like(x: Any, like: Any) -> Any:
    """``x`` cast to the explicit sharding of ``like`` (an array, a tracer or an aval), or
    ``x`` itself when ``like`` has none: how a cotangent keeps its primal's sharding."""
    s = getattr(like, "sharding", None)
    if not isinstance(s, NamedSharding) or AxisType.Explicit not in s.mesh.axis_types:
        return x
    if getattr(getattr(x, "aval", None), "sharding", None) == s:
        return x
    return cast(x, s)


@contextlib.contextmanager
def untyped():
    """While active, operations on explicitly sharded values compute as on unsharded ones
    (eagerly on one device, traced without sharded types): for a jnp function that computes
    its result one way and types it as JAX does with :func:`cast` (``.at[]`` updates)."""
    from plax.sharding import internal_eager_work
    previous = getattr(_override, "untyped", False)
    _override.untyped = True
    try:
        with internal_eager_work():  # its eager steps are plax's own (not placed, checked)
            yield
    finally:
        _override.untyped = previous


def is_untyped() -> bool:
    return getattr(_override, "untyped", False)


# ------------------------------------------------------------------ the rules

_rules: dict[str, Callable] = {}


def register_sharding_rule(name: str):
    """Registers ``rule(prim, in_dims, in_avals, params) -> out dims`` for the primitive
    called ``name`` (``in_dims`` has one :data:`Dims` per operand)."""
    def deco(rule):
        _rules[name] = rule
        return rule
    return deco


def _incompatible(prim, in_dims) -> ShardingTypeError:
    specs = ", ".join(repr(_spec_tuple(d)) for d in in_dims)
    return ShardingTypeError(f"{prim.name} got incompatible shardings for broadcasting: {specs}.")


def _elementwise(prim, in_dims, in_avals, params) -> Dims:
    ndim = max(len(a.shape) for a in in_avals)
    ranked = [d for d, a in zip(in_dims, in_avals) if len(a.shape) == ndim]
    out = []
    for k in range(ndim):
        found = {d[k] for d in ranked if d[k]}
        if len(found) > 1:
            raise _incompatible(prim, ranked)
        out.append(found.pop() if found else ())
    used = [a for names in out for a in names]
    if len(used) != len(set(used)):  # each operand fine, the merged result splits twice
        shape = next(a.shape for a in in_avals if len(a.shape) == ndim)
        inputs = ", ".join(_short_type(a.shape, a.dtype, d) for d, a in zip(in_dims, in_avals))
        raise ShardingTypeError(
            f"{prim.name} operation with inputs: {inputs} produces an illegally sharded "
            f"result: {_short_type(shape, in_avals[0].dtype, tuple(out))}")
    return tuple(out)


def _short_type(shape: tuple, dtype, dims: Dims) -> str:
    """``f32[8@X,8]``: a type as JAX's messages print it (``dims`` may be illegal)."""
    from plax.core.shaped_array import short_dtype_name
    parts = [str(n) if not names else f"{n}@{names[0]}" if len(names) == 1
             else f"{n}@({','.join(names)})" for n, names in zip(shape, dims)]
    return f"{short_dtype_name(dtype)}[{','.join(parts)}]"


def _sharding_str(aval, dims: Dims, mesh) -> str:
    return f"NamedSharding(mesh={mesh.abstract_mesh!r}, spec={dims_spec(dims)!r})"


def _typed_mesh(in_avals):
    return next(a.sharding.mesh for a in in_avals if getattr(a, "sharding", None) is not None)


def _all_alike(prim, in_dims, in_avals) -> Dims:
    """The common dims of the operands that carry shardings (one without, a constant, goes
    with any), or JAX's error naming them all."""
    typed = [d for d, a in zip(in_dims, in_avals) if getattr(a, "sharding", None) is not None]
    if any(d != typed[0] for d in typed[1:]):
        mesh = _typed_mesh(in_avals)
        shardings = [_sharding_str(a, d, mesh) for d, a in zip(in_dims, in_avals)]
        if prim.name == "select_n":
            raise ShardingTypeError(
                f"select cases must have the same shardings, got [{', '.join(shardings)}].")
        raise ShardingTypeError("All operands should have the same sharding. Got shardings "
                                + ", ".join(shardings))
    return typed[0] if typed else in_dims[0]


def _select_n(prim, in_dims, in_avals, params) -> Dims:
    """JAX's rule: the cases split alike; ``which`` a scalar or split as they are."""
    which, w_aval = in_dims[0], in_avals[0]
    cases = _all_alike(prim, in_dims[1:], in_avals[1:])
    if w_aval.shape and getattr(w_aval, "sharding", None) is not None and \
            any(getattr(a, "sharding", None) is not None for a in in_avals[1:]) and \
            which != cases:
        mesh = _typed_mesh(in_avals)
        raise ShardingTypeError(
            "select `which` must be scalar or have the same sharding as cases, got `which` "
            f"sharding {_sharding_str(w_aval, which, mesh)} but case sharding "
            f"{_sharding_str(in_avals[1], in_dims[1], mesh)}.")
    if not any(getattr(a, "sharding", None) is not None for a in in_avals[1:]):
        return which if w_aval.shape else cases
    return cases


def _reduction(prim, in_dims, in_avals, params) -> Dims:
    axes = set(params["axes"])
    return tuple(d for k, d in enumerate(in_dims[0]) if k not in axes)


def _transpose(prim, in_dims, in_avals, params) -> Dims:
    return tuple(in_dims[0][p] for p in params["permutation"])


def _broadcast_in_dim(prim, in_dims, in_avals, params) -> Dims:
    out = [()] * len(params["shape"])
    for k, d in enumerate(params["broadcast_dimensions"]):
        if in_avals[0].shape[k] == params["shape"][d]:
            out[d] = in_dims[0][k]
    return tuple(out)


def _squeeze(prim, in_dims, in_avals, params) -> Dims:
    drop = {d % len(in_dims[0]) for d in params["dimensions"]}
    return tuple(d for k, d in enumerate(in_dims[0]) if k not in drop)


def reshape_groups(shape: tuple, new: tuple) -> list:
    """Groups of input and output dimensions with equal products, in order: the pairs
    ``(input dims, output dims)`` a reshape maps onto each other (size-1 dimensions at the
    end form groups of their own, possibly with an empty side). ``[]`` when the sizes do not
    match. Example: ``reshape_groups((8, 4), (32,)) == [([0, 1], [0])]``."""
    groups, i, j = [], 0, 0
    while i < len(shape) or j < len(new):
        gi, gj = [i], [j]
        pi = shape[i] if i < len(shape) else 1
        pj = new[j] if j < len(new) else 1
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj:
                if i >= len(shape):
                    return []
                gi.append(i)
                pi *= shape[i]
                i += 1
            else:
                if j >= len(new):
                    return []
                gj.append(j)
                pj *= new[j]
                j += 1
        groups.append(([k for k in gi if k < len(shape)], [k for k in gj if k < len(new)]))
    return groups


def _reshape_error(in_avals, new) -> ShardingTypeError:
    return ShardingTypeError(
        "This reshape is not supported. Please specify the sharding of the output via the "
        "`out_sharding` argument of jax.lax.reshape. Got operand type: "
        f"{in_avals[0]}, new sizes: {tuple(new)}")


def _one_dim_regrouped(shape: tuple, new: tuple):
    """How a reshape from ``shape`` to the longer ``new`` splits exactly one dimension of
    ``shape`` into consecutive dimensions of ``new`` (the others kept, size for size): per
    dimension of ``shape`` its size, or the list of sizes it becomes. None when the reshape
    is not such a split; raises ``ValueError`` when it splits more than one dimension (JAX
    reads the shapes in this order, trailing size-1 pairs aside, and so does this)."""
    if len(new) <= len(shape):
        return None
    trailing = 0
    while shape and new and shape[-1] == 1 and new[-1] == 1:
        shape, new, trailing = shape[:-1], new[:-1], trailing + 1
    out, j, splits = [], 0, 0
    for i, size in enumerate(shape):
        if j >= len(new):
            return None
        if new[j] == size:
            out.append(size)
            j += 1
            continue
        splits += 1
        if splits > 1:
            raise ValueError("more than one dimension split")
        piece = [new[j]]
        j += 1
        # take new dimensions until their product is ``size``, and the size-1 ones after it
        # (unless the next operand dimension starts there)
        while math.prod(piece) != size or (j < len(new) and new[j] == 1):
            if math.prod(piece) > size:
                return None
            if (math.prod(piece) == size and i + 1 < len(shape) and j < len(new)
                    and new[j] == shape[i + 1]):
                break
            if j >= len(new):
                return None
            piece.append(new[j])
            j += 1
        out.append(piece)
    if j != len(new):
        return None
    return out + [1] * trailing


def _split_axes(names: tuple, sizes: list, axis_size, in_avals, new) -> list:
    """The mesh axes ``names`` (major first) dealt out over dimensions of ``sizes``: each
    dimension takes axes while its remaining size exceeds 1, each axis dividing it."""
    it, out = iter(names), []
    for size in sizes:
        taken = []
        while size > 1:
            name = next(it, None)
            if name is None:
                break
            size, rest = divmod(size, axis_size(name))
            if rest:
                raise _reshape_error(in_avals, new)
            taken.append(name)
        out.append(tuple(taken))
    if next(it, None) is not None:
        raise _reshape_error(in_avals, new)
    return out


def check_dims_divide(shape: Sequence[int], dims: Dims, sharding: NamedSharding) -> None:
    """JAX's ValueError for a dimension of ``shape`` split (as ``dims`` say, over
    ``sharding``'s mesh) into a number of parts that does not divide it."""
    sizes = sharding.mesh.shape
    for k, (n, names) in enumerate(zip(shape, dims)):
        parts = math.prod(sizes[a] for a in names)
        if names and n % parts:
            raise ValueError(
                f"Sharding spec {tuple(names)!r} implies that array axis {k} is partitioned "
                f"{parts} times, but does not evenly divide the dimension size {n}. Got shape: "
                f"{tuple(shape)} and sharding {sharding!r}")


def _reshape(prim, in_dims, in_avals, params) -> Dims:
    """JAX 0.10.2's rule. Only size-1 dimensions come or go: the others keep their axes. One
    dimension split into several: its axes are dealt out major first (each dividing what is
    left of a new dimension). Several merged into one: the merged dimensions' axes, major
    first, provided no unsplit dimension comes before a split one (``(8@X,4@Y) -> 32@(X,Y)``,
    ``(4,8@X) -> 32`` is refused). Anything else, or a split dimension regrouped by a reshape
    with ``dimensions=``, is JAX's ``ShardingTypeError`` asking for ``out_sharding=``."""
    shape, new = tuple(in_avals[0].shape), tuple(params["new_sizes"])
    recorded = params.get("sharding")  # out_sharding=, as the equation records it
    if recorded is not None:
        dims = spec_dims(recorded.spec, len(new))
        check_dims_divide(new, dims, NamedSharding(recorded.mesh, dims_spec(dims)))
        return dims
    override = getattr(_override, "spec", None)
    if override is not None:
        return spec_dims(override, len(new))
    dims = in_dims[0]
    if not any(dims):
        return ((),) * len(new)
    permuted = params.get("dimensions") is not None
    if [n for n in shape if n != 1] == [n for n in new if n != 1]:
        kept = iter(d for n, d in zip(shape, dims) if n != 1)
        return tuple(() if n == 1 else next(kept) for n in new)
    mesh = in_avals[0].sharding.mesh
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))
    try:
        split = _one_dim_regrouped(shape, new)
        merged = None if split is not None else _one_dim_regrouped(new, shape)
    except ValueError:
        raise _reshape_error(in_avals, new) from None
    out: list = []
    if split is not None:
        for piece, names in zip(split, dims):
            if not isinstance(piece, list):
                out.append(names)
            elif not names:
                out.extend([()] * len(piece))
            elif permuted:
                raise _reshape_error(in_avals, new)
            else:
                out.extend(_split_axes(names, piece, sizes.__getitem__, in_avals, new))
        return tuple(out)
    if merged is not None:
        it = iter(dims)
        for size, piece in zip(new, merged):
            if not isinstance(piece, list):
                out.append(next(it))
                continue
            group = [next(it) for _ in piece]
            if not any(group):
                out.append(())
                continue
            # the group's axes, major first; an unsplit dimension before a split one is
            # not a layout one dimension can carry
            while group and not group[-1]:
                group.pop()
            if permuted or any(not g for g in group):
                raise _reshape_error(in_avals, new)
            names = tuple(a for g in group for a in g)
            out.extend(_split_axes(names, [size], sizes.__getitem__, in_avals, new))
        return tuple(out)
    raise _reshape_error(in_avals, new)


def _dot_general(prim, in_dims, in_avals, params) -> Dims:
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    lhs, rhs = in_dims
    override = getattr(_override, "spec", None)
    l_spec = tuple(_entry(lhs[k]) for k in lc)
    r_spec = tuple(_entry(rhs[k]) for k in rc)
    if override is not None:
        if override.unreduced:
            _check_unreduced_product(l_spec, r_spec, override.unreduced)
        ndim = len(lb) + len(lhs) - len(lb) - len(lc) + len(rhs) - len(rb) - len(rc)
        return spec_dims(override, ndim)
    for a, b in zip(lc, rc):
        if lhs[a] and rhs[b] and lhs[a] != rhs[b]:
            raise ShardingTypeError(
                "dot_general requires contracting dimensions to have consistent sharding, "
                f"got {l_spec} and {r_spec}.")
    # one operand split along a contracting dimension: each device sums its part and the
    # partial sums are added (JAX's rule); both split: ambiguous
    if any(lhs[a] and rhs[b] for a, b in zip(lc, rc)):
        raise ShardingTypeError(
            "Contracting dimensions are sharded and it is ambiguous how the output should be "
            "sharded. Please specify the output sharding via the `out_sharding` parameter. "
            f"Got lhs_contracting_spec={l_spec} and rhs_contracting_spec={r_spec}")
    batch = []
    for a, b in zip(lb, rb):
        if lhs[a] and rhs[b] and lhs[a] != rhs[b]:
            raise ShardingTypeError(
                f"dot_general requires lhs batch dimensions and rhs batch dimensions to have "
                f"the consistent sharding, got {tuple(_entry(lhs[k]) for k in lb)} and "
                f"{tuple(_entry(rhs[k]) for k in rb)}")
        batch.append(lhs[a] or rhs[b])
    free_l = [lhs[k] for k in range(len(lhs)) if k not in lc and k not in lb]
    free_r = [rhs[k] for k in range(len(rhs)) if k not in rc and k not in rb]
    out = tuple(batch + free_l + free_r)
    used = [a for names in out for a in names]
    if len(used) != len(set(used)):
        raise ShardingTypeError(
            f"dot_general: the result would be split twice over one mesh axis "
            f"({_spec_tuple(out)}); pass out_sharding= to say how it is split")
    return out


def _check_unreduced_product(l_spec: tuple, r_spec: tuple, unreduced: frozenset) -> None:
    """JAX's checks of a product asked for an unreduced result (``out_sharding=P(...,
    unreduced={'Y'})``): both operands' contracting dimensions split alike, over exactly the
    unreduced axes (each device's partial product is then its part of the sum)."""
    if l_spec != r_spec:
        raise ShardingTypeError(
            "lhs and rhs contracting dims should be sharded identically when out_sharding "
            "provided to dot_general mentions unreduced_axes. Got "
            f"lhs_contracting_spec={l_spec}, rhs_contracting_spec={r_spec}")
    axes = [a for e in l_spec if e is not None for a in (e if isinstance(e, tuple) else (e,))]
    if frozenset(unreduced) != frozenset(axes):
        raise ShardingTypeError(
            "out_sharding's unreduced axes should be equal to the contracting specs. Got "
            f"unreduced axes={frozenset(unreduced)} and contracting spec={l_spec}")


def _expand_dims(prim, in_dims, in_avals, params) -> Dims:
    out = list(in_dims[0])
    ndim = len(out) + len(params["dimensions"])
    for d in sorted(d % ndim for d in params["dimensions"]):
        out.insert(d, ())
    return tuple(out)


def _cumulative(prim, in_dims, in_avals, params) -> Dims:
    axis = params["axis"]
    if in_dims[0][axis]:
        aval = in_avals[0]
        typ = f"{aval.dtype.name}[{sharded_dims_str(aval.shape, aval.sharding)}]" \
            if getattr(aval, "sharding", None) is not None else aval.str_short()
        raise ShardingTypeError("Input should be unsharded over the axis being reduced. Got "
                                f"input type={typ} and axis={axis}")
    return in_dims[0]


def _sort(prim, in_dims, in_avals, params) -> list:
    """Every operand unsplit along the sorted dimension (JAX's error otherwise); the
    results are split as the operands' common spec."""
    dim = params["dimension"]
    for dims, aval in zip(in_dims, in_avals):
        if dims[dim]:
            raise ShardingTypeError(
                "Arguments to sort must be unsharded over the sorting dimension. Got arg "
                f"sharding=NamedSharding(mesh={aval.sharding.mesh.abstract_mesh!r}, "
                f"spec={aval.sharding.spec!r}) and sorting dimension={dim}")
    common = _elementwise(prim, in_dims, in_avals, params)
    return [common] * len(in_avals)


def _top_k(prim, in_dims, in_avals, params) -> list:
    axis = params.get("axis", len(in_dims[0]) - 1)
    axis = axis % len(in_dims[0]) if in_dims[0] else 0
    if in_dims[0] and in_dims[0][axis]:
        aval = in_avals[0]
        raise ShardingTypeError(
            "The input should be unsharded over the axis along which to compute the top_k "
            f"values. Got input type={aval.dtype.name}[{sharded_dims_str(aval.shape, aval.sharding)}]"
            f" and axis={axis}")
    return [in_dims[0], in_dims[0]]


def _concatenate(prim, in_dims, in_avals, params) -> Dims:
    return _all_alike(prim, in_dims, in_avals)  # JAX: operands with shardings split alike


def _stack(prim, in_dims, in_avals, params) -> Dims:
    out = list(_all_alike(prim, in_dims, in_avals))  # JAX: operands split alike
    out.insert(params["axis"], ())
    return tuple(out)


def _unstack(prim, in_dims, in_avals, params) -> list:
    from plax.core.shaped_array import short_dtype_name
    axis, dims, aval = params["axis"], in_dims[0], in_avals[0]
    if dims[axis]:
        raise ShardingTypeError(
            f"unstack operand cannot be sharded on the unstacking axis {axis}. Got operand "
            f"type={short_dtype_name(aval.dtype)}[{sharded_dims_str(aval.shape, aval.sharding)}]")
    return [dims[:axis] + dims[axis + 1:]] * aval.shape[axis]


for _name in ("transpose",):
    _rules[_name] = _transpose
for _name in ("argmax", "argmin"):
    _rules[_name] = _reduction
for _name in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"):
    _rules[_name] = _cumulative
_rules["expand_dims"] = _expand_dims
_rules["select_n"] = _select_n
#: rules whose operands of the result's rank are cut as the result is (others: whole)
ELEMENTWISE_LIKE = (_elementwise, _select_n)
_rules["sort"] = _sort
_rules["top_k"] = _top_k
_ALONG_UNSPLIT_AXIS = (_cumulative, _sort, _top_k)
_rules["concatenate"] = _concatenate
_rules["stack"] = _stack
_rules["unstack"] = _unstack
_rules["broadcast_in_dim"] = _broadcast_in_dim
_rules["squeeze"] = _squeeze
_rules["reshape"] = _reshape
_rules["dot_general"] = _dot_general


def _rule_for(prim) -> Callable | None:
    rule = _rules.get(prim.name)
    if rule is not None:
        return rule
    from plax.lowering.fusion import ELEMENTWISE, REDUCTION, fusion_kind
    kind = fusion_kind(prim)
    if kind == ELEMENTWISE and not prim.multiple_results:
        return _elementwise
    if kind == REDUCTION:
        return _reduction
    return None


# ------------------------------------------------------------------ traced types

def typed_result(prim, in_avals: Sequence, params: dict, out_aval):
    """``out_aval`` annotated with the sharding ``prim``'s rule gives it, for a traced
    equation some of whose operands have sharded types (what ``make_jaxpr`` prints as
    ``f32[8@X,4]``), or that a :func:`cast` stages. ``out_aval`` is a list for a primitive
    with several results. Raises :class:`ShardingTypeError` where JAX does, at trace time."""
    target = _cast_target()
    if target is not None and prim.name == "broadcast_in_dim":
        sharding, rank = target
        extra = len(out_aval.shape) - rank  # vmap's batch dimensions, put first: unsplit
        if extra > 0:
            dims = ((),) * extra + spec_dims(sharding.spec, rank)
            sharding = NamedSharding(sharding.mesh, dims_spec(dims))
        return _with_sharding(out_aval, sharding)
    if is_untyped():
        return out_aval
    shardings = [getattr(a, "sharding", None) for a in in_avals]
    present = [s for s in shardings if s is not None]
    if not present:
        return out_aval
    mesh = present[0].mesh
    if any(s.mesh != mesh for s in present):
        raise ValueError(f"{prim.name}: operands are sharded over different meshes; reshard "
                         "them onto one mesh first")
    unreduced = frozenset()
    if any(s.spec.unreduced for s in present):
        check_unreduced_operands(prim, in_avals)
        unreduced = unreduced_result_axes(prim, in_avals)
    rule = _rule_for(prim)
    if rule is None or (rule is _reduction and "axes" not in params):
        return out_aval  # no rule: the result's type has no sharding
    in_dims = [spec_dims(s.spec, len(a.shape)) if s is not None else ((),) * len(a.shape)
               for s, a in zip(shardings, in_avals)]
    out_dims = rule(prim, in_dims, in_avals, params)
    if rule is _dot_general and getattr(_override, "spec", None) is not None:
        # out_sharding=P(..., unreduced={'Y'}): the product's partial sums are its result
        unreduced = unreduced | _override.spec.unreduced
    if prim.multiple_results:
        return [_with_sharding(a, with_unreduced(NamedSharding(mesh, dims_spec(d)), unreduced))
                for a, d in zip(out_aval, out_dims)]
    return _with_sharding(out_aval, with_unreduced(NamedSharding(mesh, dims_spec(out_dims)),
                                                   unreduced))


def _with_sharding(aval, sharding):
    from plax.core.shaped_array import ShapedArray
    return ShapedArray(aval.shape, aval.dtype, aval.weak_type, aval.vma, sharding)


# ------------------------------------------------------------------ eager execution

def apply_sharded(prim, args: list, params: dict):
    """Runs ``prim`` eagerly on operands of which some are explicitly sharded; returns the
    result with its propagated sharding, or NotImplemented when no rule covers ``prim``
    (the caller then computes it on one device, as for any array on several devices).

    A primitive without a rule whose result types carry shardings all the same (``cond``,
    ``scan``, ``while``: their bodies were traced with the operands' sharded types) is
    computed on one device and placed as those types say."""
    if is_untyped():
        return NotImplemented
    shardings = [explicit_sharding(a) for a in args]
    mesh = None
    for s in shardings:
        if s is None:
            continue
        if mesh is not None and s.mesh != mesh:
            raise ValueError(f"{prim.name}: operands are sharded over different meshes "
                             f"{mesh} and {s.mesh}; reshard them onto one mesh first")
        mesh = s.mesh
    if mesh is None:  # laid out over Auto axes (or not over a mesh): JAX's partitioner
        from plax.sharding_auto import apply_auto
        return apply_auto(prim, args, params)
    rule = _rule_for(prim)
    avals = [a.aval for a in args]
    unreduced = frozenset()
    if any(s is not None and s.spec.unreduced for s in shardings):
        check_unreduced_operands(prim, avals)
        unreduced = unreduced_result_axes(prim, avals)
    if rule is _dot_general and getattr(_override, "spec", None) is not None:
        unreduced = unreduced | _override.spec.unreduced  # as typed_result types it
    out_avals = prim.abstract_eval_cached(tuple(avals), params)
    if rule is None or (rule is _reduction and "axes" not in params):
        return _placed_as_typed(prim, args, params, out_avals)
    in_dims = [spec_dims(s.spec, len(a.shape)) if s is not None else ((),) * len(a.shape)
               for s, a in zip(shardings, avals)]
    out_dims = rule(prim, in_dims, avals, params)
    many = prim.multiple_results
    outs = list(zip(out_avals, out_dims)) if many else [(out_avals, out_dims)]
    indices, typed = None, []
    for aval, dims in outs:
        sharding = NamedSharding(mesh, dims_spec(dims))
        try:
            idx = sharding.devices_indices_map(aval.shape)
        except ValueError as err:
            raise ShardingTypeError(f"{prim.name}: the result {aval.str_short()} cannot be "
                                    f"sharded as {sharding.spec!r}: {err}") from None
        indices = idx if indices is None else indices
        typed.append((aval, sharding, idx))
    local = _local_operands(prim, rule, args, in_dims, out_dims if not many else out_dims[0],
                            indices, params)
    from plax.array import from_device_buffers
    if local is not None:
        from plax.dispatch import kernel
        per_device = {d: kernel(d, prim)(*ops, **params) for d, ops in local.items()}
        bufs = [{d: (b[k] if many else b) for d, b in per_device.items()}
                for k in range(len(typed))]
    else:  # a one-equation partitioned program; on one device when it does not partition
        from plax.sharding_spmd import run_equation
        bufs = run_equation(prim, args, params,
                            [_with_sharding(a, with_unreduced(s, unreduced))
                             for a, s, _ in typed], mesh)
        if bufs is not None:
            local = True  # partial sums, if any, kept per device as the types say
        else:
            bufs = _computed_then_split(prim, args, params, [t[0] for t in typed],
                                        [t[2] for t in typed])
    if unreduced:
        results = [_unreduced_result(aval, sharding, b, unreduced, local is not None)
                   for (aval, sharding, _), b in zip(typed, bufs)]
    else:
        results = [from_device_buffers(aval.shape, aval.dtype, sharding, b,
                                       weak_type=aval.weak_type)
                   for (aval, sharding, _), b in zip(typed, bufs)]
    return results if many else results[0]


def _unreduced_result(aval, sharding, bufs: dict, unreduced: frozenset, local: bool):
    """A result JAX types unreduced over ``unreduced``: computed from each device's partial
    blocks (``local``: those blocks are the result's partial sums, kept where they are), or
    from the summed operands on one device (then laid out as partial sums: the value on
    the first device along the unreduced axes, zeros on the others)."""
    from plax.array import from_device_buffers
    from plax.sharding_unreduced import place_unreduced
    target = with_unreduced(sharding, unreduced)
    if local:
        return from_device_buffers(aval.shape, aval.dtype, target, bufs,
                                   weak_type=aval.weak_type)
    whole = from_device_buffers(aval.shape, aval.dtype, sharding, bufs,
                                weak_type=aval.weak_type)
    return place_unreduced(whole, target)


def _placed_as_typed(prim, args, params, out_avals):
    """The result of a primitive without a rule (``cond``, ``scan``, ``while``), placed as
    its types' explicit shardings say: computed on every device as a one-equation
    partitioned program, or on one device when it does not partition (NotImplemented when
    no result type has an explicit sharding)."""
    many = prim.multiple_results
    avals = list(out_avals) if many else [out_avals]
    if not any(explicit_sharding(a) is not None for a in avals):
        return NotImplemented
    from plax.array import Array, from_device_buffers
    from plax.device import _shard_leaf
    from plax.dispatch import kernel
    from plax.sharding_spmd import run_equation
    mesh = next(s for s in map(explicit_sharding, args) if s is not None).mesh
    bufs = run_equation(prim, args, params, avals, mesh)  # a loop or branch on every device
    if bufs is not None:
        results = [from_device_buffers(a.shape, a.dtype, explicit_sharding(a) or
                                       NamedSharding(mesh, PartitionSpec()), b,
                                       weak_type=a.weak_type)
                   for a, b in zip(avals, bufs)]
        return results if many else results[0]
    first = next(a for a in args if explicit_sharding(a) is not None)._device
    outs = kernel(first, prim)(*[a._buffer_on(first) for a in args], **params)
    outs = list(outs) if many else [outs]
    results = []
    for buf, aval in zip(outs, avals):
        arr = Array._new(buf, _with_sharding(aval, None), first, True)
        s = explicit_sharding(aval)
        results.append(arr if s is None else _shard_leaf(arr, s))
    return results if many else results[0]


def _local_operands(prim, rule, args, in_dims, out_dims, indices, params) -> dict | None:
    """``{device: operand buffers}`` when every device can compute its block of the result
    from its own blocks of the operands, else None."""
    if rule in ELEMENTWISE_LIKE:
        pass
    elif rule is _transpose or rule is _squeeze or rule is _expand_dims:
        pass  # the operand's block, permuted or reshaped, is the result's block
    elif rule is _reduction:
        if any(in_dims[0][k] for k in params["axes"]):
            return None  # a split reduced dimension needs the other devices' partial results
    elif rule in _ALONG_UNSPLIT_AXIS:
        if any(d != tuple(out_dims) for d in in_dims):
            return None  # an operand split otherwise than the result: its blocks differ
    else:
        return None
    out = {}
    ndim = len(out_dims)
    for device, index in indices.items():
        ops = []
        for a, dims in zip(args, in_dims):
            if rule in ELEMENTWISE_LIKE and a.ndim == ndim:
                # a size-1 dimension broadcasts (lax's size-1 rule): every device reads it whole
                buf = _block(a, device, tuple(slice(None) if n == 1 else i
                                              for n, i in zip(a.shape, index)))
            elif rule in ELEMENTWISE_LIKE and a.ndim == 0:
                buf = a._buffer_on(device) if len(a.devices()) == 1 else _block(a, device, ())
            elif rule not in ELEMENTWISE_LIKE:
                buf = _own_block(a, device)
            else:
                return None
            if buf is None:
                return None
            ops.append(buf)
        out[device] = ops
    return out


def _own_block(a, device):
    """The buffer ``a`` keeps on ``device`` (None when it has none there)."""
    for p in getattr(a, "_pieces", ()):
        if p.device == device:
            from plax.device import move_buffer
            return move_buffer(p.buffer, device, device, src_backend=p.backend)
    return None


def _block(a, device, index: tuple):
    """``a[index]`` as a buffer on ``device``, cut from the block ``a`` keeps there (which
    holds it when ``a`` is split at most as finely as the result); None when it cannot be
    had without another device's data."""
    from plax.device import move_buffer
    pieces = getattr(a, "_pieces", None)
    if pieces is None:  # a one-device array: cut the block and move it (no gather)
        return _cut(move_buffer(a._buf, a._device, device), device, a.shape,
                    (slice(None),) * a.ndim, index)
    for p in pieces:
        if p.device == device:
            buf = move_buffer(p.buffer, device, device, src_backend=p.backend)
            return _cut(buf, device, a.shape, p.index, index)
    return None


def _cut(buf, device, shape, have: tuple, want: tuple):
    """The part ``want`` of the global array from ``buf``, which holds its part ``have``."""
    starts, limits, same = [], [], True
    for h, w, n in zip(have, want, shape):
        h0, h1, _ = h.indices(n)
        w0, w1, _ = w.indices(n)
        if w0 < h0 or w1 > h1:
            return None
        starts.append(w0 - h0)
        limits.append(w1 - h0)
        same = same and (w0, w1) == (h0, h1)
    if same:
        return buf
    from plax.dispatch import kernel
    from plax.lax.slicing import slice_p
    return kernel(device, slice_p)(buf, start_indices=tuple(starts),
                                   limit_indices=tuple(limits), strides=None)


def _computed_then_split(prim, args, params, out_avals: list, indices: list) -> list:
    """The results computed on the first device from the gathered operands, then each
    device's block of each moved there (one ``{device: buffer}`` per result)."""
    from plax.device import move_buffer
    from plax.dispatch import kernel
    first = next(iter(indices[0]))
    wholes = kernel(first, prim)(*[a._buffer_on(first) for a in args], **params)
    wholes = list(wholes) if prim.multiple_results else [wholes]
    out = []
    for whole, aval, idx_map in zip(wholes, out_avals, indices):
        full = (slice(None),) * len(aval.shape)
        out.append({d: move_buffer(_cut(whole, first, aval.shape, full, idx), first, d)
                    for d, idx in idx_map.items()})
    return out


from plax import sharding_indexing  # noqa: E402,F401  (registers the indexing rules)
from plax import sharding_linalg  # noqa: E402,F401  (registers the linear-algebra rules)

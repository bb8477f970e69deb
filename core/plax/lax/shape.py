"""Shape primitives: broadcast_in_dim, reshape, transpose, squeeze, expand_dims, rev, pad,
concatenate, stack, unstack, split and iota, plus the helpers built on them (full, broadcast, ...)."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

import plax.lax.binary as B
from plax import dtypes
from plax.core.pretty_print import pp_param_rules
from plax.core.primitive import Primitive
from plax.lowering.fusion import BROADCAST, INDEX, STRUCTURAL, register_fusible
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.core.varying import vary_like
from plax.lax.base import (out_sharded, asarray, aval_of, canonicalize_axis, lax_shape, operator_index,
                          same_dtypes)
from plax.transforms.batching import move_axis_to
from plax.transforms.jvp import Zero, deflinear, defzero


def _undefined(x) -> bool:
    from plax.transforms.transpose import is_undefined_primal
    return is_undefined_primal(x)


# ------------------------------------------------------------------ broadcast_in_dim

broadcast_in_dim_p = Primitive("broadcast_in_dim")
register_fusible(broadcast_in_dim_p, BROADCAST)


def _broadcast_in_dim_pp_params(params: dict) -> dict:
    # as JAX prints it: the shape is the binder's type; no dimensions to map, none shown
    shown = {k: v for k, v in params.items() if k != "shape"}
    if not shown.get("broadcast_dimensions", True):
        del shown["broadcast_dimensions"]
    return shown


pp_param_rules[broadcast_in_dim_p] = _broadcast_in_dim_pp_params


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != x.ndim:
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must have length equal to the "
                        f"operand ndim; got broadcast_dimensions {broadcast_dimensions} for "
                        f"operand ndim {x.ndim}.")
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions):
        raise TypeError(f"broadcast_in_dim broadcast_dimensions {broadcast_dimensions} out of "
                        f"range for target shape {shape}")
    if any(a >= b for a, b in zip(broadcast_dimensions, broadcast_dimensions[1:])):
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must be strictly increasing; got "
                        f"{broadcast_dimensions}")
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] != 1 and x.shape[i] != shape[d]:
            raise TypeError(f"broadcast_in_dim operand dimension sizes must either be 1, or be "
                            f"equal to their corresponding dimensions in the target broadcast "
                            f"shape; got operand of shape {x.shape}, target broadcast shape "
                            f"{shape}, broadcast_dimensions {broadcast_dimensions}")
    return ShapedArray(shape, x.dtype, x.weak_type)


def broadcast_in_dim(operand, shape: Sequence[int], broadcast_dimensions: Sequence[int],
                     out_sharding=None):
    """Broadcasts ``operand`` to ``shape``; its axis i becomes output axis
    ``broadcast_dimensions[i]``; ``out_sharding``: the result's explicit sharding.

    Example:
      >>> lax.broadcast_in_dim(jnp.ones(3), (2, 3), (1,)).shape
      (2, 3)
    """
    if out_sharding is not None:
        return out_sharded(lambda: broadcast_in_dim(operand, shape, broadcast_dimensions),
                           out_sharding)
    operand = asarray(operand)
    shape = lax_shape(shape, "broadcast_in_dim shape")
    dims = tuple(int(d) for d in broadcast_dimensions)
    if aval_of(operand).shape == shape and dims == tuple(range(len(shape))):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims)


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    if type(ct) is Zero:
        return [None]
    from plax.lax.reduction import reduce_sum
    # as JAX's rule: sum over every axis but those fed by the operand's axes of size other
    # than 1, then give the size-1 axes back with a broadcast_in_dim (expand_dims)
    unit = tuple(i for i, n in enumerate(x.aval.shape) if n == 1)
    kept = {d for i, d in enumerate(broadcast_dimensions) if i not in unit}
    summed = reduce_sum(ct, tuple(i for i in range(len(shape)) if i not in kept))
    return [expand_dims(summed, unit)]


deflinear(broadcast_in_dim_p, _broadcast_in_dim_transpose)


@register_rule("batch", broadcast_in_dim_p)
def _broadcast_in_dim_batch(vals, dims, *, shape, broadcast_dimensions):
    (x,), (d,) = vals, dims
    size = aval_of(x).shape[d]
    x = move_axis_to(x, d, 0, size)
    # the shifted dimensions as NumPy ints, as JAX's rule computes them (np.add): its jaxprs
    # print them as ``np.int64(2)``
    shifted = tuple(np.add(1, broadcast_dimensions)) if broadcast_dimensions else ()
    return broadcast_in_dim_p.bind(x, shape=(size,) + shape,
                                   broadcast_dimensions=(0,) + shifted), 0


def broadcast(operand, sizes: Sequence[int], out_sharding=None):
    """Adds leading axes of ``sizes`` to ``operand`` (JAX's lax.broadcast; ``out_sharding``:
    the result's explicit sharding)."""
    if out_sharding is not None:
        return out_sharded(lambda: broadcast(operand, sizes), out_sharding)
    operand = asarray(operand)
    a = aval_of(operand)
    sizes = lax_shape(sizes, "broadcast sizes")
    return broadcast_in_dim(operand, sizes + a.shape, tuple(range(len(sizes), len(sizes) + a.ndim)))


def broadcast_size_one(x, shape: Sequence[int]):
    """``x`` broadcast to ``shape`` as an elementwise primitive broadcasts its operands: from
    rank 0, or along the axes where ``x`` has size 1 (JAX's ``_maybe_broadcast``).

    Args:
      x: an array of rank 0, or of ``len(shape)`` dimensions each equal to ``shape``'s or 1.
      shape: the target shape.

    Returns:
      ``x`` itself when it already has ``shape``, else a ``broadcast_in_dim`` of it (after a
      ``reshape`` dropping the size-1 axes), as JAX stages it.

    Example:
      >>> broadcast_size_one(jnp.ones((1, 2)), (3, 2)).shape
      (3, 2)
    """
    x_shape = aval_of(x).shape
    shape = tuple(shape)
    if x_shape == shape:
        return x
    if not x_shape:
        return broadcast_in_dim(x, shape, ())
    kept = tuple(i for i, (a, b) in enumerate(zip(x_shape, shape)) if a == b)
    return broadcast_in_dim(reshape(x, tuple(x_shape[i] for i in kept)), shape, kept)


def broadcast_to_rank(x, rank: int):
    a = aval_of(x)
    if a.ndim >= rank:
        return x
    return broadcast(x, (1,) * (rank - a.ndim))


def full(shape: Sequence[int], fill_value, dtype=None, sharding=None, *,
         weak_type: bool | None = None):
    """An array of ``shape`` filled with ``fill_value`` (of ``dtype``, default the value's;
    ``sharding``: the result's explicit sharding).

    Example:
      >>> lax.full((2,), 3.0)
      Array([3., 3.], dtype=float32, weak_type=True)
    """
    if sharding is not None:
        return out_sharded(lambda: full(shape, fill_value, dtype, weak_type=weak_type), sharding)
    if dtypes.fills_keys(fill_value, dtype):
        from plax.random.key_fill import full_keys
        return full_keys(shape, fill_value, dtype)
    from plax.array import from_host
    from plax.lax.convert import cast_host_scalar, convert_element_type
    shape = lax_shape(shape, "full shape")
    if fill_value is None:  # a ValueError, as JAX raises
        raise ValueError("full: fill_value None is not a valid value (it has no numeric value)")
    weak = (dtype is None and dtypes.is_weakly_typed(fill_value)) if weak_type is None else weak_type
    dt = dtypes.canonicalize_dtype(dtype) if dtype is not None else dtypes.dtype(fill_value)
    # JAX's conversion: a host scalar with NumPy where JAX uses it (a staged jaxpr sees a
    # literal), else the primitive, which saturates a float out of an integer type's range.
    # convert_element_type does so for a strong target; a weak one is converted here, on the
    # host, as JAX's full does (grad's seed of ones is a literal, not an equation)
    host = cast_host_scalar(fill_value, dt) if weak and isinstance(
        fill_value, dtypes.HOST_VALUE_TYPES) else None
    if host is not None:
        fill = from_host(host, weak_type=weak)
    else:
        fill = convert_element_type(fill_value, dt, weak)
    if aval_of(fill).shape != ():
        raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape "
                        f"{aval_of(fill).shape}.")
    return broadcast_in_dim(fill, shape, ())


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """An array like ``x`` (its shape and dtype unless given) filled with ``fill_value``
    (``sharding``: the result's explicit sharding)."""
    if sharding is not None:
        return out_sharded(lambda: full_like(x, fill_value, dtype, shape), sharding)
    if dtypes.fills_keys(x, None):  # a key array: its shape, and its key dtype unless given
        return full(x.shape if shape is None else shape, fill_value,
                    x.dtype if dtype is None else dtype)
    a = aval_of(asarray(x)) if not hasattr(x, "aval") else x.aval
    dt = dtype if dtype is not None else a.dtype
    out = full(a.shape if shape is None else shape, fill_value, dt,
               weak_type=dtype is None and a.weak_type)
    return vary_like(out, x)  # inside shard_map: varying as `x` is (JAX's pvary)


def zeros_like_array(x):
    return full_like(x, 0)


# ------------------------------------------------------------------ reshape

reshape_p = Primitive("reshape")
register_fusible(reshape_p, STRUCTURAL)  # (a generator reads its operand at the same flat index)
# JAX's reshape also records the result's sharding (plax's types carry shardings): printed at
# the value JAX has for it; ``dimensions`` (a transposition before the reshape) is None when
# there is none, and printed as JAX prints it when a rule bound the primitive without it
# (``sharding``, a NamedSharding over the abstract mesh, is a parameter only when
# ``out_sharding=`` gave it: backends ignore it, the sharding rule types the result by it)
pp_param_rules[reshape_p] = lambda params: {"dimensions": None, "sharding": None, **params}


@reshape_p.def_abstract_eval
def _reshape_abstract_eval(x, *, new_sizes, dimensions=None, sharding=None):
    if any(d < 0 for d in new_sizes):
        raise TypeError(f"reshape new_sizes must all be positive, got {tuple(new_sizes)}.")
    if dimensions is not None and sorted(dimensions) != list(range(x.ndim)):
        raise TypeError(f"reshape dimensions must be a permutation of operand dimensions, got "
                        f"dimensions {tuple(dimensions)} for shape {x.shape}.")
    if math.prod(new_sizes) != x.size:
        raise TypeError(f"reshape total size must be unchanged, got new_sizes {new_sizes} (of "
                        f"total size {math.prod(new_sizes)}) for shape {x.shape} (of total size "
                        f"{x.size}).")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


def reshape(operand, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None, *,
            out_sharding=None):
    """Reshapes ``x``, in row-major order, after transposing it by ``dimensions`` if given.

    One ``reshape`` equation, the transposition folded into it as JAX stages it.

    Args:
      x: an array.
      new_sizes: the result's shape; its size must be ``x``'s.
      dimensions: a permutation of ``x``'s axes applied before the reshape (None: none).
      out_sharding: the result's sharding under explicit sharding (a Sharding, or a
        PartitionSpec resolved on the current mesh), for a reshape whose sharding JAX's
        rule cannot derive (merging a dimension split on a minor axis, regrouping a split
        dimension with ``dimensions``). None: derived from ``x``'s.

    Returns:
      ``transpose(x, dimensions).reshape(new_sizes)``.

    Raises:
      TypeError: ``dimensions`` is not a permutation of ``x``'s axes, or the sizes differ.
      ShardingTypeError: ``x`` is explicitly sharded and JAX's rule cannot say how the
        result is split (pass ``out_sharding=``).

    Example:
      >>> lax.reshape(jnp.arange(6).reshape(2, 3), (6,), (1, 0))
      Array([0, 3, 1, 4, 2, 5], dtype=int32)
    """
    if out_sharding is not None:
        from plax.sharding_types import recorded_out_sharding, with_out_sharding
        recorded = recorded_out_sharding(out_sharding, "reshape")
        if recorded is None:  # another kind of Sharding: computed, then placed
            return with_out_sharding(lambda: _reshape(operand, new_sizes, dimensions, None),
                                     out_sharding)
        out = _reshape(operand, new_sizes, dimensions, recorded)
        if not _typed_as(out, recorded) or _unplaced(out):
            from plax.sharding import reshard  # an operand on no mesh: typed and placed
            out = reshard(out, out_sharding)
        return out
    return _reshape(operand, new_sizes, dimensions, None)


def _reshape(x, new_sizes, dimensions, sharding):
    """:func:`reshape`, its equation recording ``sharding`` (JAX's parameter) when given."""
    x = asarray(x)
    new_sizes = lax_shape(new_sizes, "reshape new_sizes")
    if dimensions is not None:
        dimensions = tuple(operator_index(d) for d in dimensions)
        if dimensions == tuple(range(aval_of(x).ndim)):
            dimensions = None  # the identity: no transposition to record (as JAX)
    if dimensions is None and aval_of(x).shape == new_sizes:
        if sharding is None or _typed_as(x, sharding):
            return x
    if sharding is None:
        return reshape_p.bind(x, new_sizes=new_sizes, dimensions=dimensions)
    return reshape_p.bind(x, new_sizes=new_sizes, dimensions=dimensions, sharding=sharding)


def _unplaced(x) -> bool:
    """Whether ``x`` is an Array laid out over no mesh of Explicit axes."""
    from plax.core.trace import Tracer
    from plax.sharding_types import explicit_sharding
    return not isinstance(x, Tracer) and explicit_sharding(x) is None


def _typed_as(x, sharding) -> bool:
    """Whether ``x``'s type is split as ``sharding`` says (a reshape to its own shape is
    then no equation)."""
    from plax.sharding_types import spec_dims, type_dims
    a = aval_of(x)
    return type_dims(a) == spec_dims(sharding.spec, len(a.shape))


def _reshape_transpose(ct, x, *, new_sizes, dimensions=None, sharding=None):
    if type(ct) is Zero:
        return [None]
    if dimensions is None:
        if sharding is not None:  # back to the operand's sharding, recorded as JAX does
            return [reshape(ct, x.aval.shape, out_sharding=_operand_sharding(x.aval, sharding))]
        return [reshape(ct, x.aval.shape)]
    # undo the reshape into the transposed operand's shape, then the transposition
    permuted = reshape(ct, tuple(x.aval.shape[d] for d in dimensions))
    return [transpose(permuted, tuple(int(d) for d in np.argsort(dimensions)))]


def _operand_sharding(aval, sharding):
    """The sharding of a reshape's operand type ``aval`` over ``sharding``'s mesh."""
    from plax.sharding import NamedSharding
    from plax.sharding_types import dims_spec, type_dims
    return NamedSharding(sharding.mesh, dims_spec(type_dims(aval)))


deflinear(reshape_p, _reshape_transpose)


@register_rule("batch", reshape_p)
def _reshape_batch(vals, dims, *, new_sizes, dimensions=None, sharding=None):
    (x,), (d,) = vals, dims
    size = aval_of(x).shape[d]
    x = move_axis_to(x, d, 0, size)
    if dimensions is not None:
        dimensions = (0,) + tuple(k + 1 for k in dimensions)
    if sharding is not None:  # the batch dimension split as the operand's (as JAX does)
        from plax.sharding import NamedSharding, PartitionSpec
        from plax.sharding_types import type_dims
        batch = type_dims(aval_of(x))[0] if aval_of(x).ndim else ()
        entry = batch[0] if len(batch) == 1 else (batch or None)
        spec = PartitionSpec(entry, *sharding.spec.partitions)
        sharding = NamedSharding(sharding.mesh, spec)
    return _reshape(x, (size,) + tuple(new_sizes), dimensions, sharding), 0


# ------------------------------------------------------------------ transpose

transpose_p = Primitive("transpose")
register_fusible(transpose_p, STRUCTURAL)  # (a generator reads its operand at the permuted index)


@transpose_p.def_abstract_eval
def _transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise TypeError(f"transpose permutation isn't a permutation of operand dimensions, got "
                        f"permutation {permutation} for operand shape {x.shape}.")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


def transpose(operand, permutation: Sequence[int]):
    """Permutes the axes of ``x``: output axis i is input axis ``permutation[i]``."""
    operand = asarray(operand)
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(len(permutation))) and len(permutation) == aval_of(operand).ndim:
        return operand
    return transpose_p.bind(operand, permutation=permutation)


deflinear(transpose_p, lambda ct, x, *, permutation:
          [None if type(ct) is Zero else transpose(ct, tuple(np.argsort(permutation)))])


@register_rule("batch", transpose_p)
def _transpose_batch(vals, dims, *, permutation):
    (x,), (d,) = vals, dims
    perm = (d,) + tuple(p if p < d else p + 1 for p in permutation)
    return transpose_p.bind(x, permutation=perm), 0


# ------------------------------------------------------------------ squeeze / expand_dims

squeeze_p = Primitive("squeeze")
register_fusible(squeeze_p, STRUCTURAL)  # (a generator reads its operand at the same flat index)


@squeeze_p.def_abstract_eval
def _squeeze_abstract_eval(x, *, dimensions):
    for d in dimensions:
        if not 0 <= d < x.ndim:
            raise ValueError(f"squeeze dimensions {dimensions} out of range for operand shape "
                             f"{x.shape}")
        if x.shape[d] != 1:
            raise ValueError(f"cannot select an axis to squeeze out which has size not equal to "
                             f"one, got shape={x.shape} and dimensions={dimensions}")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in dimensions),
                       x.dtype, x.weak_type)


def squeeze(array, dimensions: Sequence[int]):
    """Removes the size-1 axes ``dimensions`` of ``x``."""
    array = asarray(array)
    nd = aval_of(array).ndim
    dims = tuple(sorted({canonicalize_axis(d, nd, "squeeze dimension") for d in dimensions}))
    if not dims:
        return array
    return squeeze_p.bind(array, dimensions=dims)


# JAX transposes squeeze to expand_dims (a broadcast_in_dim)
deflinear(squeeze_p, lambda ct, x, *, dimensions:
          [None if type(ct) is Zero else expand_dims(ct, dimensions)])


def _leading_batch_rule(prim):
    """The batching rule of a primitive whose ``dimensions`` parameter names axes: move the batch
    axis to the front and shift those axes past it."""

    def rule(vals, dims, *, dimensions):
        (x,), (d,) = vals, dims
        x = move_axis_to(x, d, 0, aval_of(x).shape[d])
        return prim.bind(x, dimensions=tuple(k + 1 for k in dimensions)), 0

    register_rule("batch", prim)(rule)


_leading_batch_rule(squeeze_p)


expand_dims_p = Primitive("expand_dims")


@expand_dims_p.def_abstract_eval
def _expand_dims_abstract_eval(x, *, dimensions):
    out_rank = x.ndim + len(dimensions)
    shape = list(x.shape)
    for d in sorted(dimensions):
        if not 0 <= d < out_rank:
            raise ValueError(f"expand_dims dimension {d} out of range for result rank {out_rank}")
        shape.insert(d, 1)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def expand_dims(array, dimensions: Sequence[int]):
    """Inserts size-1 axes at positions ``dimensions`` of the result."""
    array = asarray(array)
    out_rank = aval_of(array).ndim + len(dimensions)
    dims = tuple(sorted(canonicalize_axis(d, out_rank) for d in dimensions))
    if len(set(dims)) != len(dims):
        raise ValueError(f"repeated axis in expand_dims: {tuple(dimensions)}")
    if not dims:
        return array
    # JAX stages broadcast_in_dim here; expand_dims_p stays for rules and plugins that bind it
    shape = list(aval_of(array).shape)
    for d in dims:
        shape.insert(d, 1)
    return broadcast_in_dim_p.bind(array, shape=tuple(shape),
                                   broadcast_dimensions=tuple(i for i in range(out_rank)
                                                              if i not in dims))


deflinear(expand_dims_p, lambda ct, x, *, dimensions:
          [None if type(ct) is Zero else squeeze(ct, dimensions)])


_leading_batch_rule(expand_dims_p)


# ------------------------------------------------------------------ rev

rev_p = Primitive("rev")
register_fusible(rev_p, STRUCTURAL)  # (a generator reads its operand at the mirrored index)


@rev_p.def_abstract_eval
def _rev_abstract_eval(x, *, dimensions):
    if len(set(dimensions)) != len(dimensions) or any(not 0 <= d < x.ndim for d in dimensions):
        raise TypeError(f"rev dimensions must be unique axes of the operand, got {dimensions} "
                        f"for shape {x.shape}")
    return x


def rev(operand, dimensions: Sequence[int]):
    """Reverses ``x`` along ``dimensions``."""
    operand = asarray(operand)
    nd = aval_of(operand).ndim
    dims = tuple(int(d) for d in dimensions)
    if any(not -nd <= d < nd for d in dims):
        raise TypeError(f"rev dimensions must all be axes of the operand, got dimensions {dims} "
                        f"for operand ndim {nd}.")
    dims = tuple(d + nd if d < 0 else d for d in dims)
    if not dims:
        return operand
    return rev_p.bind(operand, dimensions=dims)


deflinear(rev_p, lambda ct, x, *, dimensions:
          [None if type(ct) is Zero else rev(ct, dimensions)])


@register_rule("batch", rev_p)
def _rev_batch(vals, dims, *, dimensions):
    (x,), (d,) = vals, dims
    return rev_p.bind(x, dimensions=tuple(k + (k >= d) for k in dimensions)), d


# ------------------------------------------------------------------ pad

pad_p = Primitive("pad")
register_fusible(pad_p, STRUCTURAL)  # (a generator reads its operand or the padding value)


@pad_p.def_abstract_eval
def _pad_abstract_eval(x, padding_value, *, padding_config):
    same_dtypes("pad", [x, padding_value])
    if padding_value.shape != ():
        raise ValueError(f"pad padding_value must be a scalar, got shape {padding_value.shape}")
    if len(padding_config) != x.ndim:
        raise ValueError(f"length of padding_config must equal the number of axes of operand, "
                         f"got padding_config {padding_config} for operand shape {x.shape}")
    shape = []
    for d, (lo, hi, interior) in zip(x.shape, padding_config):
        if interior < 0:
            raise ValueError(f"interior padding in padding_config must be nonnegative, got "
                             f"padding_config {padding_config}")
        out = int(lo + hi + d + max(d - 1, 0) * interior)
        if out < 0:
            raise ValueError(f"Dimension size after padding is not at least 0, got result "
                             f"dimension {out} for padding_config {padding_config} and operand "
                             f"shape {x.shape}")
        shape.append(out)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def pad(operand, padding_value, padding_config: Sequence[tuple[int, int, int]]):
    """Pads ``x`` with ``padding_value``: ``(low, high, interior)`` per axis; negative low/high crop.

    Example:
      >>> lax.pad(jnp.array([1., 2.]), 0., [(1, 0, 1)])
      Array([0., 1., 0., 2.], dtype=float32)
    """
    # NumPy integers kept as given: JAX's jaxprs print them so (``np.int64(1)``)
    cfg = tuple(tuple(v if isinstance(v, np.integer) else int(v) for v in c)
                for c in padding_config)
    return pad_p.bind(asarray(operand), asarray(padding_value), padding_config=cfg)


def _pad_transpose(ct, x, padding_value, *, padding_config):
    if type(ct) is Zero:
        return [None, None]
    from plax.lax.reduction import reduce_sum
    from plax.lax.slicing import slice as slice_
    out = [None, None]
    t_x = None
    if _undefined(x) or _undefined(padding_value):
        # Undo the edge padding (negative padding crops), then drop interior padding by striding.
        unpadded = pad(ct, B.full_like_scalar(0, ct), [(-lo, -hi, 0) for lo, hi, _ in padding_config])
        shape = aval_of(unpadded).shape
        t_x = slice_(unpadded, (0,) * len(shape), shape, tuple(i + 1 for _, _, i in padding_config))
    if _undefined(x):
        out[0] = t_x
    if _undefined(padding_value):
        total = reduce_sum(ct, tuple(range(aval_of(ct).ndim)))
        inner = reduce_sum(t_x, tuple(range(aval_of(t_x).ndim)))
        out[1] = B.sub(total, inner)
    return out


deflinear(pad_p, _pad_transpose)


@register_rule("batch", pad_p)
def _pad_batch(vals, dims, *, padding_config):
    (x, pv), (dx, dp) = vals, dims
    from plax.lax.select import select
    size = aval_of(x).shape[dx] if dx is not None else aval_of(pv).shape[dp]
    x = move_axis_to(x, dx, 0, size)
    cfg = ((0, 0, 0),) + tuple(padding_config)
    if dp is None:
        return pad_p.bind(x, pv, padding_config=cfg), 0
    # A batched padding value: pad with zeros, then fill the padding positions per example.
    padded = pad_p.bind(x, B.full_like_scalar(0, x), padding_config=cfg)
    mask = pad_p.bind(full(aval_of(x).shape, True, np.dtype(bool)), asarray(False),
                      padding_config=cfg)
    out_shape = aval_of(padded).shape
    pv_full = broadcast_in_dim(move_axis_to(pv, dp, 0, size), out_shape, (0,))
    return select(mask, padded, pv_full), 0


# ------------------------------------------------------------------ concatenate

concatenate_p = Primitive("concatenate")
register_fusible(concatenate_p, STRUCTURAL)  # (a generator reads the piece an element falls in)


@concatenate_p.def_abstract_eval
def _concatenate_abstract_eval(*xs, dimension):
    if not xs:
        raise TypeError("concatenate requires a non-empty sequence of operands")
    dt = same_dtypes("concatenate", xs)
    nd = xs[0].ndim
    if not 0 <= dimension < max(nd, 1) or nd == 0:
        raise TypeError(f"concatenate dimension out of bounds: dimension {dimension} for shapes "
                        f"{', '.join(str(x.shape) for x in xs)}.")
    for x in xs:
        if x.ndim != nd or any(a != b for i, (a, b) in enumerate(zip(x.shape, xs[0].shape))
                               if i != dimension):
            raise TypeError(f"Cannot concatenate arrays with shapes that differ in dimensions "
                            f"other than the one being concatenated: concatenating along "
                            f"dimension {dimension} for shapes "
                            f"{', '.join(str(x.shape) for x in xs)}.")
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(tuple(shape), dt, all(x.weak_type for x in xs))


def concatenate(operands: Sequence, dimension: int):
    """Joins ``operands`` (equal dtypes and shapes except along ``dimension``) along ``dimension``."""
    ops = [asarray(o) for o in operands]
    if not ops:
        raise ValueError("concatenate requires a non-empty sequence of operands")
    if len(ops) == 1:
        return ops[0]
    return concatenate_p.bind(*ops, dimension=int(dimension))


def _concatenate_transpose(ct, *xs, dimension):
    if type(ct) is Zero:
        return [None] * len(xs)
    from plax.lax.slicing import slice as slice_
    out, start = [], 0
    shape = aval_of(ct).shape
    for x in xs:
        size = x.aval.shape[dimension]
        if _undefined(x):
            lo = [0] * len(shape)
            hi = list(shape)
            lo[dimension], hi[dimension] = start, start + size
            out.append(slice_(ct, lo, hi))
        else:
            out.append(None)
        start += size
    return out


deflinear(concatenate_p, _concatenate_transpose)


@register_rule("batch", concatenate_p)
def _concatenate_batch(vals, dims, *, dimension):
    size = next(aval_of(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    moved = [move_axis_to(v, d, 0, size) for v, d in zip(vals, dims)]
    return concatenate_p.bind(*moved, dimension=dimension + 1), 0


# ------------------------------------------------------------------ stack

stack_p = Primitive("stack")


@stack_p.def_abstract_eval
def _stack_abstract_eval(*xs, axis):
    # JAX 0.10.2's words and types (ValueError for shapes, TypeError for dtypes)
    if not xs:
        raise ValueError("stack expects at least one operand, got 0.")
    if len({x.ndim for x in xs}) != 1:
        raise ValueError(f"Cannot stack arrays with different numbers of dimensions: got "
                         f"{', '.join(str(x.shape) for x in xs)}.")
    if len({x.shape for x in xs}) != 1:
        raise ValueError(f"All input arrays must have the same shape. Got "
                         f"{', '.join(str(x.shape) for x in xs)}.")
    if not 0 <= axis <= xs[0].ndim:
        raise ValueError(f"stack axis {axis} out of range for operands of rank {xs[0].ndim}")
    dt = same_dtypes("stack", xs)
    shape = list(xs[0].shape)
    shape.insert(axis, len(xs))
    return ShapedArray(tuple(shape), dt, all(x.weak_type for x in xs))


def stack(operands: Sequence, axis: int = 0):
    """Joins arrays of one shape and dtype along a new axis (one ``stack`` equation, as JAX).

    Args:
      operands: a non-empty sequence of arrays, all of the same shape and dtype.
      axis: where the new axis goes in the result (negative counts from its end).

    Returns:
      An array of rank ``operands[0].ndim + 1`` whose slice ``i`` along ``axis`` is
      ``operands[i]``.

    Example:
      >>> lax.stack([jnp.ones(2), jnp.zeros(2)], axis=1).shape
      (2, 2)
    """
    ops = [asarray(o) for o in operands]
    if not ops:
        raise ValueError("stack expects at least one operand, got 0.")
    axis = canonicalize_axis(axis, aval_of(ops[0]).ndim + 1)
    return stack_p.bind(*ops, axis=int(axis))


def _stack_transpose(ct, *xs, axis):
    if type(ct) is Zero:
        return [None] * len(xs)
    parts = unstack_p.bind(ct, axis=axis)  # as JAX: one unstack, whatever operands are known
    return [p if _undefined(x) else None for p, x in zip(parts, xs)]


deflinear(stack_p, _stack_transpose)


@register_rule("batch", stack_p)
def _stack_batch(vals, dims, *, axis):
    d0 = dims[0]
    if d0 is not None and all(d == d0 for d in dims):
        # every operand batched along one axis: stack around it (as JAX's rule)
        if axis <= d0:
            return stack_p.bind(*vals, axis=axis), d0 + 1
        return stack_p.bind(*vals, axis=axis + 1), d0
    size = next(aval_of(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    moved = [move_axis_to(v, d, 0, size) for v, d in zip(vals, dims)]
    return stack_p.bind(*moved, axis=axis + 1), 0


# ------------------------------------------------------------------ unstack

unstack_p = Primitive("unstack", multiple_results=True)


@unstack_p.def_abstract_eval
def _unstack_abstract_eval(x, *, axis):
    if x.ndim == 0:
        raise ValueError(f"unstack requires arrays with rank > 0, however a scalar array of "
                         f"shape {x.shape} was passed.")
    if not 0 <= axis < x.ndim:
        raise ValueError(f"unstack axis {axis} out of range for operand shape {x.shape}")
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return tuple(ShapedArray(shape, x.dtype, x.weak_type) for _ in range(x.shape[axis]))


def unstack(x, axis: int = 0) -> tuple:
    """The slices of ``x`` along ``axis`` (one ``unstack`` equation, as JAX).

    Args:
      x: an array of rank at least 1.
      axis: the axis to split (negative counts from the end).

    Returns:
      A tuple of ``x.shape[axis]`` arrays of rank ``x.ndim - 1``.

    Example:
      >>> len(lax.unstack(jnp.ones((2, 3)), axis=1))
      3
    """
    x = asarray(x)
    return tuple(unstack_p.bind(x, axis=int(canonicalize_axis(axis, aval_of(x).ndim))))


def _unstack_transpose(cts, x, *, axis):
    if all(type(ct) is Zero for ct in cts):
        return [None]
    from plax.transforms.jvp import instantiate
    return [stack_p.bind(*[instantiate(ct) for ct in cts], axis=axis)]


deflinear(unstack_p, _unstack_transpose)


@register_rule("batch", unstack_p)
def _unstack_batch(vals, dims, *, axis):
    (x,), (d,) = vals, dims
    # the batch axis stays where it is; the split axis shifts past it when it is at or after
    out_axis, out_d = (axis, d - 1) if axis < d else (axis + 1, d)
    outs = unstack_p.bind(x, axis=out_axis)
    return outs, [out_d] * len(outs)


# ------------------------------------------------------------------ split

split_p = Primitive("split", multiple_results=True)


@split_p.def_abstract_eval
def _split_abstract_eval(x, *, sizes, axis):
    if not 0 <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {x.ndim}")
    if any(s < 0 for s in sizes):
        raise ValueError(f"Sizes passed to split must be nonnegative, got {list(sizes)}")
    if sum(sizes) != x.shape[axis]:
        raise ValueError(f"Sum of sizes {sum(sizes)} must be equal to dimension {axis} of the "
                         f"operand shape {list(x.shape)}")
    # (the sizes may be NumPy ints, as jnp.split binds them: the shapes hold Python ints)
    return tuple(ShapedArray(x.shape[:axis] + (int(s),) + x.shape[axis + 1:], x.dtype,
                             x.weak_type) for s in sizes)


def split(operand, sizes: Sequence[int], axis: int = 0) -> list:
    """Splits ``operand`` along ``axis`` into consecutive pieces of the given ``sizes`` (one
    ``split`` equation, as JAX stages it).

    Args:
      operand: an array of rank at least 1.
      sizes: the pieces' lengths along ``axis``: non-negative, adding up to its length.
      axis: the axis to split (negative counts from the end).

    Returns:
      A list of ``len(sizes)`` arrays; piece ``i`` has length ``sizes[i]`` along ``axis``.

    Raises:
      ValueError: a negative size, sizes not adding up to the axis length, or an axis out of
        range (JAX's errors).

    Example:
      >>> lax.split(jnp.arange(6), (2, 4))
      [Array([0, 1], dtype=int32), Array([2, 3, 4, 5], dtype=int32)]
    """
    x = asarray(operand)
    ndim = aval_of(x).ndim
    axis = operator_index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return list(split_p.bind(x, sizes=tuple(sizes), axis=axis % ndim))


def _split_transpose(cts, x, *, sizes, axis):
    if all(type(ct) is Zero for ct in cts):
        return [None]
    from plax.transforms.jvp import instantiate
    # as JAX: the cotangents joined back, zeros standing for the pieces no result used
    return [concatenate([instantiate(ct) for ct in cts], axis)]


deflinear(split_p, _split_transpose)


@register_rule("batch", split_p)
def _split_batch(vals, dims, *, sizes, axis):
    (x,), (d,) = vals, dims
    # the batch axis stays where it is; the split axis shifts past it when at or after it
    outs = split_p.bind(x, sizes=sizes, axis=axis + 1 if axis >= d else axis)
    return outs, [d] * len(outs)


# ------------------------------------------------------------------ iota

iota_p = Primitive("iota")
pp_param_rules[iota_p] = lambda params: {**params, "sharding": None}  # as JAX prints it


@iota_p.def_abstract_eval
def _iota_abstract_eval(*, dtype, shape, dimension):
    if not (dtypes.is_integer(dtype) or dtypes.is_inexact(dtype)):
        # JAX 0.10's words (its generic dtype check), so code matching on them works alike
        raise TypeError(f"iota does not accept dtype {np.dtype(dtype).name}. Accepted dtypes "
                        "are subtypes of integer, floating, complexfloating.")
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota dimension must be between 0 and len(shape), got "
                         f"dimension={dimension} for shape={shape}")
    return ShapedArray(shape, dtype, False)


defzero(iota_p)  # no operands, so no tangent to carry: declared non-differentiable
register_fusible(iota_p, INDEX)  # (a generator computes it from its loop's index)


def iota(dtype, size: int):
    """``[0, 1, ..., size - 1]`` of ``dtype``.

    Args:
      dtype: an integer, floating or complex dtype (bool raises TypeError, as in JAX).
      size: the length.

    Returns:
      A 1-d array of ``size`` counting values.

    Example:
      >>> lax.iota(np.int32, 3)
      Array([0, 1, 2], dtype=int32)
    """
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype, shape: Sequence[int], dimension: int, out_sharding=None):
    """An array of ``shape`` whose values count along axis ``dimension``.

    Args:
      dtype: an integer, floating or complex dtype (bool raises TypeError, as in JAX).
      shape: the result's shape (negative sizes raise TypeError).
      dimension: the axis that counts, in ``[0, len(shape))``; as in JAX a negative one is
        not wrapped but raises ValueError.
      out_sharding: the result's explicit sharding.

    Returns:
      The array of ``dtype``.

    Example:
      >>> lax.broadcasted_iota(np.int32, (2, 3), 1)
      Array([[0, 1, 2],
             [0, 1, 2]], dtype=int32)
    """
    if out_sharding is not None:
        return out_sharded(lambda: broadcasted_iota(dtype, shape, dimension), out_sharding)
    shape = lax_shape(shape, "iota shape")
    # as JAX: an integer dimension, checked (not wrapped) by the abstract evaluation
    return iota_p.bind(dtype=dtypes.canonicalize_dtype(dtype), shape=shape,
                       dimension=operator_index(dimension))


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """Merges axes ``[start, stop)`` of ``x`` into one."""
    shape = aval_of(operand).shape
    stop = len(shape) if stop_dimension is None else stop_dimension
    new = shape[:start_dimension] + (math.prod(shape[start_dimension:stop]),) + shape[stop:]
    return reshape(operand, new)

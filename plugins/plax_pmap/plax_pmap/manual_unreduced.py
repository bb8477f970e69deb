"""Unreduced values inside ``shard_map``: their types (``{V:X, U:Y}``) and JAX 0.10.2's rules.

The block of an argument whose in_spec has ``unreduced={'Y'}`` holds this device's part of a
sum over ``Y``: JAX types it ``f32[4,8]{V:X, U:Y}`` (``ShapedArray.unreduced``), not varying
over ``Y``. :data:`vary_unreduced_cast_p` (JAX's Varying->Unreduced cast, an identity on
values) gives a block that type; the body's operations are then typed by :func:`typed_results`
(registered with :func:`plax.core.varying.register_unreduced_rule`), which follows JAX 0.10.2:

* kept unreduced (a sum of parts stays one): ``add`` of two values unreduced over the same
  axes, ``reduce_sum``, layout changes (``transpose``, ``reshape``, ``squeeze``,
  ``broadcast_in_dim``, ``slice``, ``pad``, ``concatenate``, ``dynamic_update_slice``),
  dtype casts, ``copy``, ``top_k`` (both results), ``sort`` (each result as its own operand:
  ``argsort``'s indices are not unreduced), ``select_n`` (as its first case), calls and
  control flow (typed by their bodies), and collectives over axes the value is not unreduced
  over;
* ``psum``/``pmean`` over the unreduced axes add the parts (the result is no longer
  unreduced); ``psum_scatter`` over them scatters the sum (varying over them);
* refused with JAX's errors: ``mul`` of two unreduced values, or of one and a value not
  reduced over its axes (``u * 2``), ``add`` of an unreduced and a plain value (``u + 1``),
  ``dot_general``, every other elementwise function (``sin``, ``neg``, ``sub``, ``max``,
  comparisons) and ``dynamic_slice`` (``NotImplementedError``), collectives and implicit
  broadcasts that would make it vary over its unreduced axes (``pmax``, ``all_gather``,
  ``ppermute``, ``u + axis_index('Y')``: "pvary cannot accept args which are unreduced"),
  and ``psum`` over a mix of varying and unreduced axes;
* the rest drop the unreduced axes (JAX's result type then has none): ``integer_pow``,
  ``reduce_max``/``argmax``, cumulative sums, ``gather``, ``rev``, bitcasts, scatters
  (``u.at[i].add(v)`` and the other ``.at`` updates scatter when an operand is unreduced,
  as JAX stages them, rather than write a box with ``dynamic_update_slice``).

Elsewhere, as in JAX: ``zeros_like(u)`` and the other fills are varying over ``u``'s varying
axes, not unreduced (:func:`plax.core.varying.vary_like`), and the VJP of a function whose
output is unreduced refuses the cotangent (it would have to be typed reduced,
``{V:X, R:Y}``; :func:`plax.transforms.autodiff`'s check).

The values themselves are computed as before (:mod:`plax_pmap.unreduced_specs`): the
types only decide what is refused.
"""
from __future__ import annotations

from typing import Any

from plax.core import Primitive, registry
from plax.core import varying as _varying
from plax.core.jaxpr import sub_jaxprs
from plax.core.passes import register_value_identity
from plax.transforms.batching import register_axis_primitive

__all__ = ["vary_unreduced_cast", "vary_unreduced_cast_p", "typed_results"]

_NONE: frozenset = frozenset()

# ------------------------------------------------------------------ the cast

vary_unreduced_cast_p = Primitive("vary_unreduced_cast")
registry.register_rule("impl", vary_unreduced_cast_p)(lambda x, *, axes: x)
# vmap (shard_map's vmap formulation batches each mesh axis): the value is what it was
registry.register_rule("batch", vary_unreduced_cast_p)(
    lambda vals, dims, *, axes: (vals[0], dims[0]))
_varying.register_self_typed(vary_unreduced_cast_p)
register_value_identity(vary_unreduced_cast_p)  # erased before a backend compiles
register_axis_primitive(vary_unreduced_cast_p, lambda params: params["axes"])


def _not_varying_error(axes: tuple, vma: frozenset) -> ValueError:
    return ValueError(
        "vary_unreduced_cast is a Varying->Unreduced collective. This means that the axis "
        "names mentioned in `axes` passed to `vary_unreduced_cast` must be present in "
        f"`jax.typeof(x).mat.varying`. Got axes={tuple(axes)} and "
        f"jax.typeof(x).mat.varying={frozenset(vma)}")


@vary_unreduced_cast_p.def_abstract_eval
def _cast_aval(x, *, axes):
    vma = _varying.axes_of(x)
    if not _varying.active():  # untyped (check_vma=False): nothing to say
        return x
    missing = tuple(a for a in axes if a not in vma)
    if missing:
        raise _not_varying_error(missing, vma)
    return x.update(vma=vma - frozenset(axes),
                    unreduced=_varying.unreduced_of(x) | frozenset(axes))


def vary_unreduced_cast(x: Any, axes: tuple) -> Any:
    """``x`` (varying over ``axes``) typed as unreduced over them: each device's value is its
    part of a sum over ``axes`` (JAX's ``vary_unreduced_cast``; the value is unchanged).

    Args:
      x: a value of a shard_map body that varies over ``axes``.
      axes: mesh axis names.

    Returns:
      ``x``, typed ``{U:axes}``.

    Raises:
      ValueError: ``x`` does not vary over every axis of ``axes`` (JAX's text).

    Example:
      >>> # inside shard_map(..., in_specs=P('X', 'Y')): typeof gives f32[4,1]{V:X, U:Y}
      >>> # jax.typeof(vary_unreduced_cast(u, ('Y',)))
    """
    return vary_unreduced_cast_p.bind(x, axes=tuple(axes)) if axes else x


# ------------------------------------------------------------------ the rules

# a sum of parts stays one: the result is unreduced over the operands' axes
_KEEPS = frozenset({
    "reduce_sum", "transpose", "reshape", "squeeze", "expand_dims", "broadcast_in_dim",
    "slice", "pad", "convert_element_type", "copy", "copy_p", "reduce_precision",
    "device_put", "optimization_barrier", "vary_unreduced_cast", "debug_callback",
    "stop_gradient", "top_k"})
# JAX's collectives: over axes the value is unreduced on, only psum and psum_scatter
_COLLECTIVES = frozenset({"psum", "pmax", "pmin", "all_gather", "all_to_all", "reduce_scatter",
                          "ppermute", "pvary"})
# elementwise primitives whose results JAX types without unreduced axes (no error)
_DROPS_ELEMENTWISE = frozenset({"integer_pow", "bitcast_convert_type", "imag"})


def _short(aval) -> str:
    return aval.str_short()


def _as_operand(aval, vma: frozenset):
    """``aval`` as JAX shows an operand of a binary operation: made varying over the other
    operands' axes (its implicit ``pvary``), no longer weakly typed."""
    return aval.update(vma=_varying.axes_of(aval) | vma, weak_type=False)


def _unreduced_rule_error(name: str) -> NotImplementedError:
    return NotImplementedError(f"unreduced rule for {name} is not implemented. Please file an "
                               "issue at https://github.com/jax-ml/jax/issues")


def _check_implicit_broadcasts(in_avals) -> None:
    """JAX's ValueError where an operand would be broadcast (``pvary``) over axes it is
    unreduced on, to meet operands varying over them (``u + axis_index('Y')``)."""
    vmas = [_varying.axes_of(a) for a in in_avals]
    union = frozenset().union(*vmas)
    for a, v in zip(in_avals, vmas):
        u = _varying.unreduced_of(a)
        bad = (union - v) & u
        if bad:
            raise ValueError(f"pvary cannot accept args which are unreduced. Got {_short(a)} "
                             f"and axes={set(union - v)}")


def _collective(name: str, x, params: dict, out_avals):
    axes = tuple(params.get("axes", ()))
    u = _varying.unreduced_of(x)
    touched = frozenset(axes) & u
    if not touched:  # over other axes: the parts stay parts
        return [o.update(unreduced=u) for o in out_avals]
    if name == "pvary":
        raise ValueError("Unsupported pcast from=unreduced, to='varying'")
    if name in ("psum", "reduce_scatter"):
        vma = _varying.axes_of(x)
        states = {"varying" if a in vma else "unreduced" if a in u else "invarying"
                  for a in axes}
        if len(states) > 1:
            order = [s for s in ("varying", "unreduced", "invarying") if s in states]
            raise ValueError(
                "jax.lax.psum can only accept axis_name which corresponds to one of varying, "
                f"unreduced, reduced or invarying state of the input. Got input type: {x}, "
                f"axes: {axes} and input state: {{{', '.join(map(repr, order))}}}")
        return [o.update(unreduced=u - touched) for o in out_avals]
    raise ValueError(f"pvary cannot accept args which are unreduced. Got {_short(x)} and "
                     f"axes={set(axes)}")


def _binary(name: str, in_avals, out_avals):
    from plax.sharding_types import ShardingTypeError
    lhs, rhs = in_avals
    lu, ru = _varying.unreduced_of(lhs), _varying.unreduced_of(rhs)
    if name in ("add", "add_any"):
        if lu and ru:
            if lu != ru:
                raise ShardingTypeError("lhs and rhs to `add` must be unreduced along the same "
                                        f"mesh axes. Got lhs={lu}, rhs={ru}")
            return [o.update(unreduced=lu) for o in out_avals]
        side, other = ("lhs", "rhs") if lu else ("rhs", "lhs")
        raise ShardingTypeError(
            f"{side} is unreduced while {other} is not. `add` operation does not allow this "
            f"because there will be implicit communication. Please reduce {side} via "
            f"`reshard` before calling `add`.")
    # mul: bilinear, so only one factor may hold parts (and the other must be reduced over
    # their axes, which plax does not type: JAX's error)
    if lu and ru:
        raise ShardingTypeError(f"lhs and rhs to `mul` cannot be unreduced since mul is "
                                f"bilinear. Got lhs={lu}, rhs={ru}")
    vma = _varying.axes_of(lhs) | _varying.axes_of(rhs)
    shown = f"lhs={_as_operand(lhs, vma)} and rhs={_as_operand(rhs, vma)}"
    if lu:
        raise ShardingTypeError(
            f"RHS should be reduced along the same axes LHS is unreduced on. Got {shown}")
    raise ShardingTypeError(
        f"LHS should be reduced along the same axes RHS is unreduced on. Got {shown}")


def typed_results(primitive, in_avals, params: dict, out_avals):
    """The types of ``primitive``'s results (``out_avals``, a list for several) in a typed
    shard_map body where some operand is unreduced, as JAX 0.10.2 types them (see the
    module docstring).

    Raises:
      ShardingTypeError: ``add``/``mul``/``dot_general`` operands JAX refuses.
      NotImplementedError: an elementwise function (or ``dynamic_slice``) of an unreduced
        value.
      ValueError: a collective or implicit broadcast over the unreduced axes (other than
        ``psum``/``psum_scatter``), or ``psum`` over varying and unreduced axes at once.
    """
    many = primitive.multiple_results
    outs = list(out_avals) if many else [out_avals]
    name = primitive.name
    sets = [_varying.unreduced_of(a) for a in in_avals]
    if name in _COLLECTIVES:
        typed = _collective(name, in_avals[0], params, outs)
    elif name == "cond":  # unreduced where every branch's result is, over those axes
        branches = params["branches"]
        typed = [o.update(unreduced=frozenset.intersection(
            *[_varying.unreduced_of(b.out_avals[k]) for b in branches]))
            for k, o in enumerate(outs)]
    elif sub_jaxprs(params):  # a call or loop: typed by its body already
        return out_avals
    else:
        _check_implicit_broadcasts(in_avals)
        typed = _typed_operation(primitive, name, in_avals, sets, outs)
    return typed if many else typed[0]


def _typed_operation(primitive, name: str, in_avals, sets: list, outs: list) -> list:
    from plax.lowering.fusion import ELEMENTWISE, fusion_kind
    from plax.sharding_types import ShardingTypeError
    first = next(s for s in sets if s)
    if name in ("add", "add_any", "mul") and len(in_avals) == 2:
        return _binary(name, in_avals, outs)
    if name == "dot_general":
        vma = frozenset().union(*[_varying.axes_of(a) for a in in_avals])
        lhs, rhs = (_as_operand(a, vma) for a in in_avals)
        raise ShardingTypeError(f"lhs or rhs passed to dot_general cannot be unreduced. Got "
                                f"lhs={lhs!r} and rhs={rhs!r}")
    if name in ("concatenate", "stack"):
        found = {s for s in sets if s}
        if len(found) > 1:
            raise ShardingTypeError("All operands should be unreduced along the same mesh "
                                    f"axes. Got unreduced specs: {found}")
        return [o.update(unreduced=first) for o in outs]
    if name == "select_n":  # as its first case (JAX's rule)
        return [o.update(unreduced=sets[1] if len(sets) > 1 else _NONE) for o in outs]
    if name == "dynamic_update_slice":
        # (x.at[i].set(v) of an unreduced operand or update scatters, as in JAX)
        if sets[0] != sets[1]:
            axes = tuple(sorted(_varying.typed_axes(), key=str))
            raise ShardingTypeError(
                "dynamic_update_slice operand and update must be unreduced along the same "
                f"axes. Got operand sharding {in_avals[0]}({{Manual: {axes}}}) and update "
                f"sharding {in_avals[1]}({{Manual: {axes}}}).")
        return [o.update(unreduced=sets[0]) for o in outs]
    if name == "dynamic_slice":
        raise _unreduced_rule_error(name)
    if name == "sort":  # each result as its own operand (JAX's rule): argsort's indices not
        return [o.update(unreduced=s) for o, s in zip(outs, sets)]
    if name in _KEEPS:
        return [o.update(unreduced=sets[0] or first) for o in outs]
    if fusion_kind(primitive) == ELEMENTWISE and name not in _DROPS_ELEMENTWISE:
        raise _unreduced_rule_error(name)
    return [o.update(unreduced=_NONE) for o in outs]


_varying.register_unreduced_rule(typed_results)

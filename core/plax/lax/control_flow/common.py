"""What the control-flow primitives share: tracing user functions into closed sub-jaxprs,
staging derived bodies (JVP, transpose, batched), and type checks with JAX's messages."""
from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable, Sequence

from plax import dtypes
from plax.core import varying
from plax.core.interpret import jaxpr_as_fun
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Var
from plax.core.shaped_array import ShapedArray
from plax.core.trace import new_main
from plax.transforms.staging import JaxprTrace, convert_tracer_consts, trace_to_jaxpr


# body -> {key: derived body}; weak, so derived bodies live as long as the body they come from
_derived: "weakref.WeakKeyDictionary[ClosedJaxpr, dict]" = weakref.WeakKeyDictionary()


def memo(closed: ClosedJaxpr, key: tuple, make: Callable[[], Any]) -> Any:
    """``make()``, cached on ``closed`` under ``key`` (a repeated transform of the same body
    retraces nothing); uncached when the key is unhashable."""
    table = _derived.get(closed)
    if table is None:
        table = _derived.setdefault(closed, {})
    try:
        return table[key]
    except KeyError:
        hit = table[key] = make()
        return hit
    except TypeError:
        return make()


def trace_flat(fun: Callable, in_avals: Sequence[ShapedArray], where: str,
               trace_type=JaxprTrace, hoist: bool = False) -> tuple[ClosedJaxpr, list]:
    """Traces ``fun(*flat) -> flat outputs`` into a ClosedJaxpr over concrete constants.

    Args:
      hoist: also pass the concrete array constants as operands (as JAX does with a user's
        branch or loop body, so the body prints without constants of its own).

    Returns:
      ``(closed, captured)``: ``closed`` takes the captured values first (tracers of
      enclosing transforms that ``fun`` closed over, and hoisted constants), then the inputs.
    """
    closed, _ = trace_to_jaxpr(lambda *a: list(fun(*a)), list(in_avals), where=where,
                               trace_type=trace_type)
    if hoist:
        j = closed.jaxpr
        return (ClosedJaxpr(Jaxpr([], list(j.constvars) + list(j.invars), j.outvars, j.eqns), []),
                list(closed.consts))
    return convert_tracer_consts(closed.jaxpr, closed.consts)


def stage_derived(fun: Callable, in_avals: Sequence[ShapedArray], what: str,
                  trace_type=JaxprTrace) -> ClosedJaxpr:
    """A body derived from another by a transform rule, staged on its own."""
    closed, captured = trace_flat(fun, in_avals, what, trace_type)
    if captured:
        raise NotImplementedError(
            f"The {what} closes over a value of an enclosing transform (a custom derivative "
            "rule capturing a tracer); plax cannot stage it as a control-flow body.")
    return closed


def with_leading_inputs(closed: ClosedJaxpr, mine: Sequence[int], avals: Sequence[ShapedArray]
                        ) -> ClosedJaxpr:
    """``closed`` (whose first ``len(mine)`` inputs are captured values) made to take all of
    ``avals`` first: its own captured value ``k`` sits at position ``mine[k]``, the other
    positions are inputs it ignores."""
    j = closed.jaxpr
    n = len(mine)
    lead = [Var(a) for a in avals]
    for k, pos in enumerate(mine):
        lead[pos] = j.invars[k]
    return ClosedJaxpr(Jaxpr(j.constvars, lead + list(j.invars[n:]), j.outvars, j.eqns),
                       closed.consts)


def merge_captured(captured_lists: Sequence[list]) -> tuple[list, list]:
    """One list of captured values for several bodies (shared ones once), and per body the
    positions of its own captured values in it."""
    merged: list = []
    where: dict = {}
    positions = []
    for captured in captured_lists:
        pos = []
        for c in captured:
            if id(c) not in where:
                where[id(c)] = len(merged)
                merged.append(c)
            pos.append(where[id(c)])
        positions.append(pos)
    return merged, positions


def is_inexact_aval(aval: ShapedArray) -> bool:
    return dtypes.is_inexact(aval.dtype)


def same_type(a: ShapedArray, b: ShapedArray) -> bool:
    """Equal shape and dtype (weak types may differ: they are joined), and equal explicit
    shardings where either has one."""
    return a.shape == b.shape and a.dtype == b.dtype and (
        getattr(a, "sharding", None) is getattr(b, "sharding", None) or same_sharding(a, b))


def same_sharding(a: ShapedArray, b: ShapedArray) -> bool:
    """Whether two types are split alike over Explicit mesh axes (no sharding: unsplit)."""
    from plax.sharding_types import type_dims
    return type_dims(a) == type_dims(b)


def long_str(a: ShapedArray) -> str:
    """A type as JAX's messages write it: ``float32[3,2]``, ``float32[8@X,4]``."""
    dims = a._dims_str() if isinstance(a, ShapedArray) else ",".join(map(str, a.shape))
    return f"{a.dtype.name}[{dims}]"


def type_mismatch(a: ShapedArray, b: ShapedArray) -> str:
    """Which part of two types differs, in JAX's words."""
    if a.shape != b.shape and a.dtype != b.dtype:
        return "so the shapes and dtypes do not match"
    if a.shape != b.shape:
        return "so the shapes do not match"
    if a.dtype != b.dtype:
        return "so the dtypes do not match"
    if not same_sharding(a, b):
        return "so the shardings do not match"
    return "so the weak types do not match"


def join_weak(avals: Sequence[ShapedArray]) -> ShapedArray:
    """The common type of equal-shaped, equal-dtype values: weak only if all are weak."""
    a = avals[0]
    vma = frozenset().union(*[x.vma for x in avals])  # shard_map typing: varying in any
    return ShapedArray(a.shape, a.dtype, all(x.weak_type for x in avals), vma,
                       getattr(a, "sharding", None))


def batched_fun(closed: ClosedJaxpr, dims: Sequence, axis_data) -> Callable:
    """``closed`` as a function vectorised over ``dims`` (None: unbatched input), every
    output batched on axis 0 (unbatched ones broadcast)."""
    from plax.transforms.batching import BatchTrace, BatchTracer, move_axis_to
    size = axis_data.size

    def fun(*vals):
        with new_main(BatchTrace, payload=axis_data) as main:
            trace = BatchTrace(main)
            tracers = [v if d is None else BatchTracer(trace, v, d) for v, d in zip(vals, dims)]
            outs = [trace.full_raise(o) for o in jaxpr_as_fun(closed)(*tracers)]
            return [move_axis_to(o.val, o.batch_dim, 0, size) for o in outs]

    return fun


def check_carry(in_tree, out_tree, in_avals, out_avals, what: str,
                body_fun: Callable | None = None) -> None:
    """JAX's TypeErrors for a body whose carry output differs from its input in structure,
    shape or dtype (weak types may differ, as in JAX). The carry is named by ``body_fun``'s
    first parameter, as JAX's messages name it."""
    from plax.pytrees.engine import tree_unflatten
    from plax.tree_util import keystr, tree_flatten_with_path
    if in_tree != out_tree:
        raise TypeError(
            f"{what} body function carry input and carry output must have the same pytree "
            f"structure, but they differ:\n\nThe input carry has structure {in_tree} but the "
            f"carry output has structure {out_tree}.\n\nRevise the function so that the carry "
            "output has the same pytree structure as the carry input.")
    carry_name = _first_parameter(body_fun)

    def component(path: str) -> str:
        if carry_name:
            return (f"the input carry component {carry_name}{path}" if path
                    else f"the input carry {carry_name}")
        return f"the input carry at path {path}" if path else "the input carry"

    paths = [keystr(p) for p, _ in tree_flatten_with_path(
        tree_unflatten(in_tree, list(range(len(in_avals)))))[0]]
    diffs = [f"{component(path)} has type {long_str(a)} but the corresponding output carry "
             f"component has type {long_str(b)}, {type_mismatch(a, b)}"
             for path, a, b in zip(paths, in_avals, out_avals) if not same_type(a, b)]
    if not diffs:
        return
    if len(diffs) == 1:
        differences = diffs[0][0].upper() + diffs[0][1:] + ".\n"
    else:
        differences = "\n".join(f"  * {d};\n" for d in diffs[:-1]) + f"  * {diffs[-1]}.\n"
    raise TypeError(
        f"{what} body function carry input and carry output must have equal types, but they "
        f"differ:\n\n{differences}\nRevise the function so that all output types match the "
        "corresponding input types.")


def _first_parameter(fun: Callable | None) -> str | None:
    try:
        params = list(inspect.signature(fun).parameters) if fun is not None else []
    except (TypeError, ValueError):
        params = []
    return params[0] if params else None


def widen_varying(widen: list, in_avals: list, out_avals: list) -> tuple[list, bool]:
    """Inside ``shard_map(check_vma=True)``: the mesh axes each loop carry must be typed as
    varying over (``widen``, one frozenset per carry) grown by those its body's output varies
    over and its input does not (the body is then traced again, until they settle); returns
    them and whether any grew. JAX asks for an explicit ``pvary`` on the initial carry here."""
    if not varying.active():
        return widen, False
    grown = [w | (varying.axes_of(b) - varying.axes_of(a))
             for w, a, b in zip(widen, in_avals, out_avals)]
    return grown, grown != list(widen)


def carry_types(carry_in: Sequence[ShapedArray], carry_out: Sequence[ShapedArray],
                extra: frozenset = frozenset()) -> list[ShapedArray]:
    """The types of a loop's final carries: the body's outputs, varying (shard_map typing)
    also over the axes the body's input varies over -- after no iteration the carry is the
    input -- and over ``extra`` (a while predicate's: the trip count differs there)."""
    return [b if (a.vma | extra) <= b.vma else
            ShapedArray(b.shape, b.dtype, b.weak_type, a.vma | b.vma | extra,
                        getattr(b, "sharding", None))
            for a, b in zip(carry_in, carry_out)]


def with_varying(avals: list, widen: list) -> list:
    """``avals`` with the carries' extra varying axes (see :func:`widen_varying`)."""
    return [a.update(vma=a.vma | w) if w else a for a, w in zip(avals, widen)]


def promote_weak(leaves: list, in_avals: list, out_avals: list) -> tuple[list, bool]:
    """A weakly typed carry input whose body output has another dtype is promoted with that
    output's type (as in JAX: a weak float carry stays a float when the body returns an int32,
    so the carry check then names it; a weak type alone is no mismatch); returns the new
    leaves and whether any changed."""
    from plax.dtypes import result_type_of_avals
    from plax.lax.convert import convert_element_type
    changed = False
    new = []
    for x, a, b in zip(leaves, in_avals, out_avals):
        if a.weak_type and a.shape == b.shape and a.dtype != b.dtype:
            dtype, _ = result_type_of_avals(((a.dtype, True), (b.dtype, b.weak_type)))
            x = convert_element_type(x, dtype, weak_type=False)
            changed = True
        new.append(x)
    return new, changed

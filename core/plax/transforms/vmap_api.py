"""``vmap``: vectorise a function over a batch axis of its arguments."""
from __future__ import annotations

import functools
from typing import Any, Callable, Hashable

from plax import tree_util
from plax.core.trace import DebugInfo, get_aval, new_main
from plax.transforms.batching import AxisData, BatchTrace, BatchTracer, move_axis_to


def _broadcast_prefix(prefix, tree, what: str):
    """Expands an ``in_axes``/``out_axes`` prefix tree to one entry per leaf of ``tree``."""
    leaves_out: list = []
    is_none_leaf = lambda x: x is None  # noqa: E731
    try:
        tree_util.tree_map(lambda ax, sub: leaves_out.extend(
            [ax] * len(tree_util.tree_leaves(sub))), prefix, tree, is_leaf=is_none_leaf)
    except ValueError as err:
        raise ValueError(f"vmap {what} specification must be a tree prefix of the corresponding "
                         f"value, got specification {prefix!r} for value tree "
                         f"{tree_util.tree_structure(tree)}. {err}") from None
    return leaves_out


def _check_axes(axes, what: str) -> None:
    """The TypeError JAX raises when vmap is applied with an ``in_axes``/``out_axes`` whose
    leaves are not Python ints or None (NumPy integers and bools are refused too)."""
    for ax in tree_util.tree_leaves(axes, is_leaf=lambda x: x is None):
        if ax is not None and type(ax) is not int:
            raise TypeError(f"vmap {what} must be an int, None, or (nested) container with those "
                            f"types as leaves, but got {axes!r}: {ax!r} is a "
                            f"{type(ax).__name__}. Give the axis to map as a Python int, or None "
                            "for a value that is not mapped.")


def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_name: Hashable | None = None,
         axis_size: int | None = None, spmd_axis_name: Any = None,
         sum_match: bool = False) -> Callable:
    """Vectorises ``fun`` over axis ``in_axes`` of its arguments.

    Args:
      fun: the function to map.
      in_axes: an int, None, or a pytree prefix of the positional arguments giving the mapped
        axis of each (None: not mapped). Keyword arguments are mapped over axis 0.
      out_axes: where the mapped axis goes in each output (int, None or a prefix tree).
      axis_name: a name for the mapped axis, for collectives.
      axis_size: the batch size, needed when no argument is mapped.
      spmd_axis_name: the mesh axis the batch is split over (under explicit sharding).
      sum_match: an output whose ``out_axes`` is None but that is batched is summed over
        the batch instead of raising (as JAX's ``sum_match``).

    Returns:
      The batched function.

    Example:
      >>> mat_vec = jax.vmap(jnp.dot, in_axes=(0, None))
      >>> mat_vec(jnp.ones((2, 3)), jnp.ones(3))
      Array([3., 3.], dtype=float32)
    """
    if not callable(fun):
        raise TypeError(f"vmap requires a callable as its first argument (the function to "
                        f"map), got {fun!r} of type {type(fun).__name__}. Pass the function "
                        "itself, e.g. vmap(f), not its name or the result of calling it.")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)  # JAX treats a list in_axes as a tuple prefix
    if not (in_axes is None or type(in_axes) in (int, tuple)):
        # a dict or another container cannot be matched against the positional arguments
        raise TypeError(f"vmap in_axes must be an int, None, or a tuple of entries corresponding "
                        f"to the positional arguments passed to the function, but got "
                        f"{in_axes!r} of type {type(in_axes).__name__}. For a dict argument, "
                        "wrap its axes in a tuple: in_axes=({'a': 0},).")
    _check_axes(in_axes, "in_axes")
    _check_axes(out_axes, "out_axes")

    @functools.wraps(fun)
    def batched(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap in_axes must be an int, None, or a tuple of entries "
                             f"corresponding to the positional arguments passed to the function, "
                             f"but got len(in_axes)={len(in_axes)}, len(args)={len(args)}. Give "
                             f"one in_axes entry per positional argument (keyword arguments are "
                             f"always mapped over axis 0).")
        args_tree_in = (args, kwargs)
        leaves, in_tree = tree_util.tree_flatten(args_tree_in)
        prefix = (in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args),
                  {k: 0 for k in kwargs})
        axes = _broadcast_prefix(prefix, args_tree_in, "in_axes")
        from plax.transforms.autodiff import _as_array
        # only mapped leaves become arrays: unmapped ones pass through as they are (a Python
        # int can then still be a static argument of a jitted function inside)
        leaves = [x if ax is None else _as_array(x) for x, ax in zip(leaves, axes)]
        debug = DebugInfo("vmap", fun, in_tree, kwargs=True)
        size = _batch_size(leaves, axes, debug, axis_size)
        canon = []
        for x, ax in zip(leaves, axes):
            if ax is None:
                canon.append(None)
                continue
            nd = get_aval(x).ndim
            if not -nd <= ax < nd:
                raise ValueError(f"vmap was requested to map its argument along axis {ax}, which "
                                 f"implies that its rank should be at least {ax + 1 if ax >= 0 else -ax}, "
                                 f"but is only {nd} (its shape is {get_aval(x).shape})")
            canon.append(ax % nd)
        with new_main(BatchTrace, payload=AxisData(size, axis_name, spmd_axis_name),
                      debug=debug) as main:
            trace = BatchTrace(main)
            tracers = [BatchTracer(trace, x, ax) if ax is not None else x
                       for x, ax in zip(leaves, canon)]
            debug.in_tracers = tracers
            a, kw = tree_util.tree_unflatten(in_tree, tracers)
            out = fun(*a, **kw)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            o_axes = _broadcast_prefix(out_axes, out, "out_axes")
            results = []
            for i, (o, oax) in enumerate(zip(out_leaves, o_axes)):
                from plax.transforms.staging import check_output
                check_output(o, "the function passed to vmap")
                _refuse_ref_output(o, out, i)
                if oax is None and not (isinstance(o, BatchTracer) and o._trace.main is main):
                    results.append(o)  # not batched: returned as it is (a Python float stays one)
                    continue
                t = trace.full_raise(_as_array(o))
                val, bdim = t.val, t.batch_dim
                if oax is None:
                    if bdim is not None and sum_match:
                        from plax.lax.reduction import reduce_sum
                        results.append(reduce_sum(val, (bdim,)))
                        continue
                    if bdim is not None:
                        path = tree_util.keystr(tree_util.tree_flatten_with_path(out)[0][i][0])
                        raise ValueError(
                            f"vmap out_axes is None for output{path or ''} of type "
                            f"{t.aval.str_short()}, but that output is batched on axis {bdim}: "
                            "it depends on the mapped inputs. Give it an int out_axes, or "
                            "return only values that do not depend on the mapped axis there.")
                    results.append(val)
                    continue
                nd = get_aval(val).ndim + (bdim is None)
                if not -nd <= oax < nd:
                    raise ValueError(f"vmap out_axes {oax} is out of bounds for an output of rank "
                                     f"{nd}")
                results.append(move_axis_to(val, bdim, oax % nd, size))
        return tree_util.tree_unflatten(out_tree, results)

    return batched


def _refuse_ref_output(o, out, i: int) -> None:
    """A ref cannot leave a vmap (JAX 0.10.2 fails on one with an internal AttributeError):
    its batch lives in the ref the mapped function wrote, not in a value to stack."""
    from plax.state.types import is_ref_aval
    aval = get_aval(o)
    if is_ref_aval(aval):
        path = tree_util.keystr(tree_util.tree_flatten_with_path(out)[0][i][0])
        raise ValueError(f"the function passed to vmap returned{' ' + path if path else ''} a "
                         f"mutable array reference of type {aval}, but mutable array "
                         "references cannot be returned: return ref[...] or freeze(ref).")


def _batch_size(leaves, axes, debug, axis_size):
    sizes = {}
    for i, (x, ax) in enumerate(zip(leaves, axes)):
        if ax is None:
            continue
        shape = get_aval(x).shape
        if not -len(shape) <= ax < len(shape):
            raise ValueError(f"vmap was requested to map its argument along axis {ax}, which "
                             f"implies that its rank should be at least "
                             f"{ax + 1 if ax >= 0 else -ax}, but is only {len(shape)} (its shape "
                             f"is {shape})")
        sizes.setdefault(shape[ax], []).append((i, ax, get_aval(x)))
    if axis_size is not None:
        if sizes and set(sizes) != {axis_size}:
            raise ValueError(f"vmap got axis_size={axis_size} but mapped inputs have sizes "
                             f"{sorted(sizes)}")
        return int(axis_size)
    if not sizes:
        raise ValueError("vmap must have at least one non-None value in in_axes (or be given "
                         "axis_size)")
    if len(sizes) > 1:
        names = debug.arg_names()
        lines = []
        for size, entries in sorted(sizes.items(), key=lambda kv: -len(kv[1])):
            i, ax, aval = entries[0]
            count = "one axis" if len(entries) == 1 else f"{len(entries)} axes"
            example = "" if len(entries) == 1 else "e.g. "
            lines.append(f"  * {count} had size {size}: {example}axis {ax} of argument "
                         f"{names[i]} of type {aval.str_short()};")
        raise ValueError("vmap got inconsistent sizes for array axes to be mapped:\n"
                         + "\n".join(lines) + "\nAll mapped axes must have the same size: "
                         "check the shapes, or pass in_axes=None for arguments not to map.")
    return next(iter(sizes))

"""Host callbacks as primitives: ``debug_callback``, ``pure_callback`` and ``io_callback``.

Each primitive carries a :class:`HostCallback` parameter: what a backend calls on the host
with NumPy arrays, getting NumPy arrays back. The wrapper turns the operands into plax
Arrays, calls the user's function with the pytrees it was given, and checks what it
returns against the declared result types, so a backend's kernel is one line.

``debug_callback`` and ``io_callback`` are effectful (:mod:`plax.core.effects`): dead-code
elimination keeps them although nobody reads their results. ``pure_callback`` is pure: an
unused one may be dropped, as in JAX.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plax import dtypes
from plax.core.effects import register_effectful
from plax.core.pretty_print import pp_name_rules, pp_param_rules
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.core.trace import Tracer

__all__ = ["debug_callback_p", "pure_callback_p", "io_callback_p", "HostCallback",
           "debug_callback", "pure_callback", "io_callback"]

debug_callback_p = Primitive("debug_callback", multiple_results=True)
pure_callback_p = Primitive("pure_callback", multiple_results=True)
io_callback_p = Primitive("io_callback", multiple_results=True)
register_effectful(debug_callback_p)
register_effectful(io_callback_p)


def _printed_as(params: dict):
    """``(name, params)`` a debug callback's equation prints as in a jaxpr, or None to print
    as ``debug_callback``. A callback function that JAX stages as a primitive of its own
    (``debug.print``'s is ``debug_print``) carries ``printed_as(cb, params) -> (name,
    params)``; see :func:`plax.debug.print`."""
    cb = params.get("callback")
    rule = getattr(getattr(cb, "fun", None), "printed_as", None)
    return rule(cb, params) if rule is not None else None


pp_name_rules[debug_callback_p] = lambda params: (_printed_as(params) or (None, None))[0]
pp_param_rules[debug_callback_p] = lambda params: (_printed_as(params) or (None, params))[1]

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized")


class HostCallback:
    """A user's function as a backend calls it: ``cb(*host_arrays, result_avals=...)``.

    Attributes:
      fun: the user's function.
      in_tree: the treedef of ``(args, kwargs)`` over the dynamic leaves and the static ones.
      static: per leaf of ``in_tree``, None for an operand or ``(value,)`` for a static
        (non-array) leaf kept as it was.
      out_tree: the treedef the results must have (None: the results are ignored).
      partitioned: whether a sharded program calls it per device on local blocks.
    """

    __slots__ = ("fun", "in_tree", "static", "out_tree", "partitioned", "__weakref__")

    def __init__(self, fun: Callable, in_tree, static: tuple, out_tree=None,
                 partitioned: bool = False):
        self.fun, self.in_tree, self.static, self.out_tree = fun, in_tree, static, out_tree
        # debug.callback(partitioned=True): a program run on several devices calls it on
        # each device's local blocks (plax.sharding_partition.HostCall)
        self.partitioned = partitioned

    def __repr__(self) -> str:
        return getattr(self.fun, "__name__", type(self.fun).__name__)

    def __call__(self, *arrays, result_avals: tuple = ()) -> list:
        from plax import tree_util
        from plax.array import from_owned_host
        # copies: the callback may keep its arguments, and the program reuses buffers
        ops = iter([from_owned_host(np.array(a)) for a in arrays])
        leaves = [next(ops) if s is None else s[0] for s in self.static]
        args, kwargs = tree_util.tree_unflatten(self.in_tree, leaves)
        out = self.fun(*args, **kwargs)
        if self.out_tree is None:
            return []
        return check_results(out, self.out_tree, result_avals)


def check_results(out: Any, out_tree, result_avals: tuple) -> list:
    """The host arrays of a callback's results ``out``, checked against the declared tree and
    shapes (and cast to the declared dtypes, as JAX does).

    Raises:
      RuntimeError: the structure or a shape differs from the declaration.
    """
    from plax import tree_util
    leaves, tree = tree_util.tree_flatten(out)
    if tree != out_tree:
        raise RuntimeError(
            f"Callback returned a value of structure {tree}, but its declared result "
            f"structure is {out_tree}.")
    host = []
    for i, (x, aval) in enumerate(zip(leaves, result_avals)):
        x = np.asarray(x)
        if x.shape != tuple(aval.shape):
            raise RuntimeError(
                f"Incorrect output shape for return value #{i}: Expected: {tuple(aval.shape)}, "
                f"Actual: {x.shape}")
        if x.dtype != aval.dtype:
            x = x.astype(aval.dtype)
        host.append(x)
    return host


def _is_operand(x: Any) -> bool:
    from plax.array import ARRAYLIKE_TYPES
    return isinstance(x, ARRAYLIKE_TYPES)


def _flatten_args(fun: Callable, args: tuple, kwargs: dict, out_tree=None):
    """(operands, HostCallback): the array leaves of ``(args, kwargs)`` become operands, the
    other leaves (strings, None-like objects) stay static in the callback."""
    from plax import tree_util
    from plax.lax.base import asarray
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    operands, static = [], []
    for x in leaves:
        if _is_operand(x):
            operands.append(asarray(x))
            static.append(None)
        else:
            static.append((x,))
    return operands, HostCallback(fun, in_tree, tuple(static), out_tree)


def _result_avals(result_shape_dtypes: Any) -> tuple:
    """(avals, treedef) of a pytree of ``ShapeDtypeStruct``-likes (anything with ``shape`` and
    ``dtype``)."""
    from plax import tree_util
    leaves, tree = tree_util.tree_flatten(result_shape_dtypes)
    avals = []
    for x in leaves:
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise TypeError(
                f"result_shape_dtypes must be a pytree of objects with shape and dtype "
                f"(jax.ShapeDtypeStruct), got {x!r} of type {type(x).__name__}")
        avals.append(ShapedArray(tuple(x.shape), dtypes.canonicalize_dtype(x.dtype)))
    return tuple(avals), tree


# ------------------------------------------------------------------ public functions

def debug_callback(callback: Callable, *args: Any, ordered: bool = False,
                   partitioned: bool = False, **kwargs: Any) -> None:
    """Calls ``callback(*args, **kwargs)`` on the host when the program runs (see
    :func:`plax.debug.callback`)."""
    if not callable(callback):
        raise TypeError("first argument to jax.debug.callback must be callable, but got an "
                        f"object of type {type(callback)}")
    operands, cb = _flatten_args(callback, args, kwargs)
    cb.partitioned = bool(partitioned)
    if debug_call_rewriters:
        cb, operands = debug_call_rewriters[-1](cb, operands)
    debug_callback_p.bind(*operands, callback=cb, ordered=bool(ordered))


# Rewriters a mapping transform pushes while it traces its body, each ``(cb, operands) ->
# (cb, operands)``: shard_map's vmap formulation makes a debug callback run once per mesh
# device, as JAX's does (plax_pmap.per_device_callbacks).
debug_call_rewriters: list[Callable] = []


def pure_callback(callback: Callable, result_shape_dtypes: Any, *args: Any,
                  sharding: Any = None, vmap_method: str | None = None, **kwargs: Any) -> Any:
    """Calls a pure Python function on the host, with results of declared shapes and dtypes.

    ``callback`` receives plax Arrays (the leaves of ``args`` and ``kwargs``) and returns a
    pytree of arrays matching ``result_shape_dtypes``. Being pure, the call may be dropped
    when its results are unused. Under ``vmap``, ``vmap_method`` says how the batch reaches
    the callback: ``"sequential"`` (one call per batch member), ``"expand_dims"`` (one call,
    unbatched arguments given a leading axis of size 1), ``"broadcast_all"`` (one call,
    every argument broadcast to the batch) or ``"legacy_vectorized"`` (one call, unbatched
    arguments left as they are). It has no derivative: wrap it in :func:`plax.custom_jvp`.

    Args:
      callback: the host function.
      result_shape_dtypes: a pytree of :class:`plax.ShapeDtypeStruct` (or arrays).
      *args: its positional arguments (pytrees of arrays).
      **kwargs: its keyword arguments (pytrees of arrays).
      sharding: accepted for compatibility; plax runs the callback on the host.
      vmap_method: one of ``"sequential"``, ``"sequential_unrolled"``, ``"expand_dims"``,
        ``"broadcast_all"``, ``"legacy_vectorized"``, or None (vmap raises).

    Returns:
      The callback's results, as a pytree of Arrays shaped like ``result_shape_dtypes``.

    Example:
      >>> plax.pure_callback(np.sin, plax.ShapeDtypeStruct((3,), jnp.float32), jnp.arange(3.))
      Array([0.       , 0.841471 , 0.9092974], dtype=float32)
    """
    from plax import tree_util
    if not callable(callback):
        raise TypeError(f"pure_callback callback must be callable, got {callback!r}")
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise ValueError(f"vmap_method must be one of {VMAP_METHODS} or None, got {vmap_method!r}")
    avals, out_tree = _result_avals(result_shape_dtypes)
    operands, cb = _flatten_args(callback, args, kwargs, out_tree)
    outs = pure_callback_p.bind(*operands, callback=cb, result_avals=avals,
                                vmap_method=vmap_method)
    return tree_util.tree_unflatten(out_tree, list(outs))


def io_callback(callback: Callable, result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                ordered: bool = False, **kwargs: Any) -> Any:
    """Calls an impure Python function on the host (see :func:`plax.experimental.io_callback`)."""
    from plax import tree_util
    if not callable(callback):
        raise TypeError(f"io_callback callback must be callable, got {callback!r}")
    avals, out_tree = _result_avals(result_shape_dtypes)
    operands, cb = _flatten_args(callback, args, kwargs, out_tree)
    outs = io_callback_p.bind(*operands, callback=cb, result_avals=avals, ordered=bool(ordered))
    return tree_util.tree_unflatten(out_tree, list(outs))


# ------------------------------------------------------------------ abstract evaluation

def _debug_abstract_eval(*avals, callback, ordered):
    return []


def _io_abstract_eval(*avals, callback, result_avals, ordered):
    return list(result_avals)


def _pure_abstract_eval(*avals, callback, result_avals, vmap_method):
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise ValueError(f"pure_callback vmap_method must be one of {VMAP_METHODS} or None, "
                         f"got vmap_method={vmap_method!r}")
    return list(result_avals)


debug_callback_p.def_abstract_eval(_debug_abstract_eval)
pure_callback_p.def_abstract_eval(_pure_abstract_eval)
io_callback_p.def_abstract_eval(_io_abstract_eval)


# ------------------------------------------------------------------ differentiation

def _debug_jvp(primals, tangents, **params):
    # The callback sees the primal values only; it has no outputs, hence no tangents.
    debug_callback_p.bind(*primals, **params)
    return [], []


def _pure_jvp(primals, tangents, **params):
    raise ValueError("Pure callbacks do not support JVP. Please use `jax.custom_jvp` to use "
                     "callbacks while taking gradients.")


def _io_jvp(primals, tangents, **params):
    raise ValueError("IO callbacks do not support JVP.")


register_rule("jvp", debug_callback_p)(_debug_jvp)
register_rule("jvp", pure_callback_p)(_pure_jvp)
register_rule("jvp", io_callback_p)(_io_jvp)


# ------------------------------------------------------------------ batching

def _size(vals, dims) -> int:
    return next(np.shape(v)[d] if not isinstance(v, Tracer) else v.aval.shape[d]
                for v, d in zip(vals, dims) if d is not None)


def _member(vals, dims, i: int) -> list:
    from plax.lax.slicing import index_in_dim
    return [v if d is None else index_in_dim(v, i, d, keepdims=False) for v, d in zip(vals, dims)]


def _stack(outs: list, n: int, avals: tuple) -> list:
    """Per-member results (a list of lists) stacked along a new leading axis."""
    from plax.lax.shape import broadcast_in_dim, concatenate
    stacked = []
    for k, aval in enumerate(avals):
        rows = [broadcast_in_dim(o[k], (1,) + tuple(aval.shape), tuple(range(1, len(aval.shape) + 1)))
                for o in outs]
        stacked.append(concatenate(rows, 0) if len(rows) > 1 else rows[0])
    return stacked


def _sequential(prim, vals, dims, params, avals):
    n = _size(vals, dims)
    outs = [prim.bind(*_member(vals, dims, i), **params) for i in range(n)]
    if n == 0:
        from plax.lax.shape import full
        return [full((0,) + tuple(a.shape), 0, a.dtype) for a in avals], [0] * len(avals)
    return _stack(outs, n, avals), [0] * len(avals)


def _debug_batch(vals, dims, **params):
    # one call per batch member, in order, as a Python loop over the vmapped function would
    n = _size(vals, dims)
    for i in range(n):
        debug_callback_p.bind(*_member(vals, dims, i), **params)
    return [], []


def _pure_batch(vals, dims, *, callback, result_avals, vmap_method):
    from plax.lax.shape import broadcast_in_dim, expand_dims
    from plax.transforms.batching import move_axis_to
    params = dict(callback=callback, result_avals=result_avals, vmap_method=vmap_method)
    if vmap_method is None:
        raise NotImplementedError(
            "vmap is only supported for the pure_callback primitive when vmap_method is one of "
            "'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            "'legacy_vectorized'. Got vmap_method=None.")
    if vmap_method in ("sequential", "sequential_unrolled"):
        return _sequential(pure_callback_p, vals, dims, params, result_avals)
    n = _size(vals, dims)
    args = []
    for v, d in zip(vals, dims):
        if d is not None:
            args.append(move_axis_to(v, d, 0, n))
        elif vmap_method == "expand_dims":
            args.append(expand_dims(v, (0,)))
        elif vmap_method == "broadcast_all":
            shape = tuple(np.shape(v)) if not isinstance(v, Tracer) else v.aval.shape
            args.append(broadcast_in_dim(v, (n,) + shape, tuple(range(1, len(shape) + 1))))
        else:  # legacy_vectorized: unbatched arguments as they are
            args.append(v)
    batched = tuple(ShapedArray((n,) + tuple(a.shape), a.dtype) for a in result_avals)
    outs = pure_callback_p.bind(*args, callback=callback, result_avals=batched,
                                vmap_method=vmap_method)
    return list(outs), [0] * len(outs)


def _io_batch(vals, dims, *, callback, result_avals, ordered):
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    params = dict(callback=callback, result_avals=result_avals, ordered=ordered)
    return _sequential(io_callback_p, vals, dims, params, result_avals)


register_rule("batch", debug_callback_p)(_debug_batch)
register_rule("batch", pure_callback_p)(_pure_batch)
register_rule("batch", io_callback_p)(_io_batch)

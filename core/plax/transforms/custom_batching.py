"""``custom_vmap``: a function with a user-supplied batching rule (``jax.custom_batching``).

Under a transform, a call binds ``custom_vmap_call`` with the traced function as its
``call`` parameter (a ClosedJaxpr taking the values it closed over first, then the flat
arguments) and the rule as ``rule``:

* evaluated (``impl``), staged by ``jit``/``make_jaxpr``, or compiled by a backend (it is a
  call equation, :mod:`plax.core.passes`), it is the function;
* batched (``vmap``), the user's rule ``rule(axis_size, in_batched, *args) -> (out,
  out_batched)`` replaces it: batched arguments come with their batch axis first, and an
  output the rule says is unbatched is the same for every member;
* differentiated forward (``jvp``), it is again a ``custom_vmap_call``, of the function's
  JVP, whose rule is the JVP of the user's rule (inputs batched only on the primal or only
  on the tangent side are vectorised around it), as in JAX;
* differentiated in reverse (``grad``, ``vjp``, ``linearize``) it is refused as in JAX
  0.10: the rule gives no transpose. Wrap the function in ``custom_vjp`` for that.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from plax import tree_util
from plax.core import registry, varying
from plax.core.interpret import jaxpr_as_fun
from plax.core.jaxpr import ClosedJaxpr, Jaxpr
from plax.core.primitive import Primitive
from plax.core.trace import get_aval, state as trace_state
from plax.transforms.batching import AxisData, batch_flat_fun_dims, move_axis_to

__all__ = ["custom_vmap", "sequential_vmap", "custom_vmap_p"]


def _pp_rule(rule) -> str:
    # JAX prints the rule as a function's repr with its address masked
    return f"<function {getattr(rule, '__qualname__', rule)} at 0xXXXXXXXXXXXX>"


class _CustomVmapPrimitive(Primitive):
    """``custom_vmap_call``: a call of ``params["call"]`` that ``vmap`` replaces by
    ``params["rule"]``. The passes and backends treat it as a call (its body compiled)."""

    __slots__ = ()
    call_param = "call"
    pp_body_named_after_operands = False  # JAX names the body's variables afresh
    pp_params = {"rule": _pp_rule}


custom_vmap_p = _CustomVmapPrimitive("custom_vmap_call", multiple_results=True)
varying.register_self_typed(custom_vmap_p)  # typed by its traced body, as jit


@custom_vmap_p.def_abstract_eval
def _abstract_eval(*avals, call: ClosedJaxpr, rule, in_tree, out_tree):
    return list(call.out_avals)


def _register_lowering() -> None:
    from plax.lowering.calls import register_call_primitive
    register_call_primitive(custom_vmap_p, "call")  # compiled as its body, loops included


_register_lowering()


@registry.register_rule("impl", custom_vmap_p)
def _impl(*args, call: ClosedJaxpr, rule, in_tree, out_tree):
    return jaxpr_as_fun(call)(*args)


# ------------------------------------------------------------------ the rules' calling convention

class _ClosedRule:
    """The user's rule as the primitive calls it: ``(axis_size, [consts_batched,
    args_batched], consts, args)``; the values the function closed over are not the rule's."""

    def __init__(self, rule: Callable):
        self.rule = rule
        # named (and printed) as the user's rule
        self.__name__ = getattr(rule, "__name__", "<unnamed rule>")
        self.__qualname__ = getattr(rule, "__qualname__", self.__name__)

    def __call__(self, axis_size: int, in_batched, consts, args):
        consts_batched, args_batched = in_batched
        if any(tree_util.tree_leaves(consts_batched)):
            raise ValueError(
                f"custom_vmap function with rule {_rule_name(self.rule)} closes over a value "
                "that vmap batches; the rule sees only the arguments. Pass that value to the "
                "function as an argument instead.")
        return self.rule(axis_size, list(args_batched), *args)


def _rule_name(rule) -> str:
    return getattr(rule, "__name__", "<unnamed rule>")


def _call_rule(rule, axis_size: int, in_batched, args):
    return rule(axis_size, list(in_batched), *args)


def _check_rule_trees(rule, want_tree, out_tree, batched_tree) -> None:
    if out_tree != batched_tree:
        raise ValueError(
            "structure of output value and output batching specification returned by custom "
            f"vmap rule ({_rule_name(rule)}) do not match.\nOutput values: {out_tree}\n"
            f"Batching spec: {batched_tree}")
    if out_tree != want_tree:
        raise ValueError(
            f"structure of output returned by custom vmap rule ({_rule_name(rule)}) does not "
            f"match that of original custom-vmapped function.\nOriginal output: {want_tree}\n"
            f"Rule output: {out_tree}")


def _as_operand(x):
    from plax.transforms.custom_derivatives import _as_operand as as_operand
    return as_operand(x)


# ------------------------------------------------------------------ vmap: the user's rule

@registry.register_rule("batch", custom_vmap_p)
def _batch(vals, dims, *, call: ClosedJaxpr, rule, in_tree, out_tree):
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    vals = [move_axis_to(v, d, 0, size) if d is not None else v for v, d in zip(vals, dims)]
    args = tree_util.tree_unflatten(in_tree, vals)
    in_batched = tree_util.tree_unflatten(in_tree, [d is not None for d in dims])
    out, out_batched = _call_rule(rule, size, in_batched, args)
    flat_out, tree_out = tree_util.tree_flatten(out)
    flat_batched, tree_batched = tree_util.tree_flatten(out_batched)
    _check_rule_trees(rule, out_tree, tree_out, tree_batched)
    flat_out = [_as_operand(o) for o in flat_out]
    for o, b, want in zip(flat_out, flat_batched, call.out_avals):
        shape = get_aval(o).shape
        if b and (not shape or shape[0] != size):
            # JAX trusts the rule here; a wrong shape would make every later type wrong
            raise ValueError(
                f"custom vmap rule ({_rule_name(rule)}) said an output is batched, but its "
                f"shape {shape} has no leading axis of the batch size {size} (the function's "
                f"output is {want.str_short()}): return it with the batch axis first, or say "
                "it is unbatched")
    return flat_out, [0 if b else None for b in flat_batched]


# ------------------------------------------------------------------ jvp: the rule's JVP

class _JvpOfRule:
    """The rule of the ``custom_vmap_call`` a JVP binds: the JVP of the user's rule
    ``(axis_size, [primals_batched, tangents_batched], primals, tangents)``."""

    def __init__(self, rule, out_tree):
        self.rule = rule
        self.out_tree = out_tree
        # named as JAX names it (printed in jaxprs)
        self.__name__ = "jvp_of_rule_rule"
        self.__qualname__ = "custom_vmap_jvp.<locals>.jvp_of_rule_rule"

    def __call__(self, axis_size: int, in_batched, primals, tangents):
        from plax.transforms.autodiff import jvp
        ps_batched, ts_batched = in_batched
        both = tree_util.tree_map(lambda p, t: p and t, ps_batched, ts_batched)
        only_p = tree_util.tree_map(lambda p, t: p and not t, ps_batched, ts_batched)
        only_t = tree_util.tree_map(lambda p, t: t and not p, ps_batched, ts_batched)
        rule_batched: list = []

        def with_rule(*ps):
            out, out_b = _call_rule(self.rule, axis_size, both, ps)
            _check_rule_trees(self.rule, self.out_tree, tree_util.tree_structure(out),
                              tree_util.tree_structure(out_b))
            rule_batched.append(out_b)
            return out

        flat_in, in_tree = tree_util.tree_flatten((primals, tangents))
        extra = tree_util.tree_leaves((only_p, only_t))
        out_tree_box: list = []

        def flat_jvp(*xs):
            ps, ts = tree_util.tree_unflatten(in_tree, xs)
            out = jvp(with_rule, tuple(ps), tuple(ts))
            leaves, tree = tree_util.tree_flatten(out)
            out_tree_box.append(tree)
            return leaves

        if any(extra):  # members differing on one side only: vectorise the JVP over them
            pairs = batch_flat_fun_dims(flat_jvp, [0 if e else None for e in extra],
                                        AxisData(axis_size))(*flat_in)
            flat_out = [v for v, _ in pairs]
            extra_out = [b for _, b in pairs]
        else:
            flat_out = flat_jvp(*flat_in)
            extra_out = [False] * len(flat_out)
        outs = tree_util.tree_unflatten(out_tree_box[-1], flat_out)
        extra_p, extra_t = tree_util.tree_unflatten(out_tree_box[-1], extra_out)
        mutual = rule_batched[-1]
        out_batched = (tree_util.tree_map(lambda m, e: bool(m or e), mutual, extra_p),
                       tree_util.tree_map(lambda m, e: bool(m or e), mutual, extra_t))
        return outs, out_batched


def _linearization_error():
    return ValueError(
        "Linearization failed to produce known values for all output primals. This is "
        "typically caused by attempting to differentiate a function uses an operation that "
        "does not support reverse-mode autodiff. (Here: a custom_vmap function, which "
        "supports vmap and jvp but not grad/vjp/linearize, as in JAX. Wrap it in custom_vjp "
        "to give it a reverse-mode rule.)")


@registry.register_rule("jvp", custom_vmap_p)
def _jvp(primals, tangents, *, call: ClosedJaxpr, rule, in_tree, out_tree):
    from plax.transforms.jvp import instantiate, jvp_flat, tangent_aval
    from plax.transforms.staging import is_linearize_tracer, trace_to_jaxpr
    if any(is_linearize_tracer(t) for t in tangents):
        raise _linearization_error()
    tangents = [instantiate(t) for t in tangents]
    n = len(primals)
    body = jaxpr_as_fun(call)

    def jvp_body(*xs):
        outs, out_tangents = jvp_flat(body, list(xs[:n]), list(xs[n:]))
        return list(outs) + list(out_tangents)

    avals = [get_aval(p) for p in primals] + [tangent_aval(get_aval(p)) for p in primals]
    jvp_call, _ = trace_to_jaxpr(jvp_body, avals, "a custom_vmap function's JVP")
    jvp_call, consts = _consts_as_operands(jvp_call)
    jvp_rule = _JvpOfRule(rule, out_tree)
    if consts:  # values the JVP's body holds (not the rule's): leading operands
        jvp_rule = _ClosedRule(jvp_rule)
        in_tree = tree_util.tree_structure(([0] * len(consts), (_example(in_tree),) * 2))
    else:
        in_tree = tree_util.tree_structure((_example(in_tree),) * 2)
    outs = custom_vmap_p.bind(*consts, *primals, *tangents, call=jvp_call, rule=jvp_rule,
                              in_tree=in_tree,
                              out_tree=tree_util.tree_structure((_example(out_tree),) * 2))
    return outs[:len(outs) // 2], outs[len(outs) // 2:]


def _example(tree):
    """A value of structure ``tree`` (zeros at the leaves), to build treedefs from."""
    return tree_util.tree_unflatten(tree, [0] * tree.num_leaves)


def _consts_as_operands(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """The jaxpr with every constant made a leading input, and those constants (JAX's
    ``convert_constvars_jaxpr``): the function's captured values are operands, so every
    transform sees them."""
    jaxpr = closed.jaxpr
    if not jaxpr.constvars:
        return closed, []
    moved = Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.outvars, jaxpr.eqns)
    return ClosedJaxpr(moved, []), list(closed.consts)


# ------------------------------------------------------------------ the public API

class custom_vmap:
    """A function with a custom batching rule (``jax.custom_batching.custom_vmap``): it
    behaves as ``fun``, except under ``vmap``, where the rule set with :meth:`def_vmap`
    computes the whole batch.

    Args:
      fun: the function.

    Example:
      >>> @custom_vmap
      ... def f(x, y):
      ...     return x + y
      >>> @f.def_vmap
      ... def f_vmap_rule(axis_size, in_batched, xs, ys):
      ...     return xs * ys, True
      >>> plax.vmap(f)(jnp.arange(3), jnp.arange(1, 4))  # xs * ys, not xs + ys
      Array([0, 2, 6], dtype=int32)

    ``custom_vmap`` functions support ``vmap``, ``jit`` and ``jvp``; ``grad`` of one raises
    (as in JAX); put a ``custom_vjp`` around it for reverse mode.
    """

    def __init__(self, fun: Callable[..., Any]):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule: Callable | None = None

    def __getattr__(self, name: str):
        from plax.transforms.custom_derivatives import forward_attr
        return forward_attr(self, name)

    def def_vmap(self, vmap_rule: Callable[..., tuple[Any, Any]]) -> Callable[..., tuple[Any, Any]]:
        """Sets the batching rule ``vmap_rule(axis_size, in_batched, *args) -> (out,
        out_batched)``: ``in_batched`` is a list with one pytree of bools per argument,
        batched arguments have their batch axis first, and ``out_batched`` is a pytree of
        bools shaped as ``out`` (or a prefix of it with one bool per leaf).

        Args:
          vmap_rule: the rule.

        Returns:
          ``vmap_rule``, unchanged (so it can be used as a decorator).
        """
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        from plax.transforms.custom_derivatives import _resolve_args
        name = getattr(self.fun, "__name__", "fun")
        try:
            args = _resolve_args(self.fun, args, kwargs)
        except TypeError as err:
            raise TypeError(
                "The input arguments to the custom_vmap-decorated function "
                f"{name} could not be resolved to positional-only arguments. Binding failed "
                f"with the error:\n{err}") from err
        if not self.vmap_rule:
            raise AttributeError(f"No batching rule defined for custom_vmap function {name} "
                                 "using def_vmap.")
        if trace_state.depth == 0:  # no transform: the function itself
            return self.fun(*args)
        from plax.transforms.staging import trace_to_jaxpr
        leaves, args_tree = tree_util.tree_flatten(args)
        leaves = [_as_operand(x) for x in leaves]
        out_trees: list = []

        def flat_fun(*xs):
            out = self.fun(*tree_util.tree_unflatten(args_tree, xs))
            out_leaves, tree = tree_util.tree_flatten(out)
            out_trees.append(tree)
            return [_as_operand(o) for o in out_leaves]

        closed, _ = trace_to_jaxpr(flat_fun, [get_aval(x) for x in leaves],
                                   f"the custom_vmap function {name}")
        call, consts = _consts_as_operands(closed)
        in_tree = _in_tree(len(consts), args_tree)
        outs = custom_vmap_p.bind(*consts, *leaves, call=call,
                                  rule=_ClosedRule(self.vmap_rule), in_tree=in_tree,
                                  out_tree=out_trees[-1])
        return tree_util.tree_unflatten(out_trees[-1], outs)


def _in_tree(n_consts: int, args_tree):
    """The treedef of ``(consts_list, args_tuple)``, as JAX's ``in_tree`` parameter."""
    return tree_util.tree_structure(([0] * n_consts, tuple(_example(args_tree))))


def sequential_vmap(f: Callable) -> custom_vmap:
    """``f`` as a :class:`custom_vmap` whose batching rule loops over the batch
    (``lax.map``) instead of vectorising: for functions that cannot take a batch axis.

    Args:
      f: the function.

    Returns:
      A :class:`custom_vmap` function.

    Example:
      >>> @sequential_vmap
      ... def total(x):
      ...     return x.sum()
      >>> plax.vmap(total)(jnp.ones((3, 2)))
      Array([2., 2., 2.], dtype=float32)
    """
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        from plax import lax
        flat_args, args_tree = tree_util.tree_flatten(list(args))
        flat_batched = tree_util.tree_leaves(list(in_batched))
        looped = [a for a, b in zip(flat_args, flat_batched) if b]

        def one(member):
            it = iter(member)
            merged = [next(it) if b else a for a, b in zip(flat_args, flat_batched)]
            return f(*tree_util.tree_unflatten(args_tree, merged))

        out = lax.map(one, looped)
        return out, tree_util.tree_map(lambda _: True, out)

    return f

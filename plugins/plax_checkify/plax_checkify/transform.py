"""The checkify transform: a jaxpr interpreter that threads an error value.

``checkify(f)`` traces ``f`` to a jaxpr, then evaluates it equation by equation, binding
each primitive again (so ``jit``, ``vmap`` and ``grad`` around ``checkify`` see ordinary
primitives) and asking the equation's rule in the ``checkify`` table what can go wrong.
A rule reports a failure predicate and the values its message needs; the interpreter folds
them into the error value with ``select``s, so the checks are part of the program that
every backend runs, with no host callback.

The error value is a fixed set of arrays: ``failed`` (bool), ``code`` (int32, the index of
the first failing :class:`~plax_checkify.errors.Site`) and one tuple of payload arrays per
site. A loop or branch carries it through its body, so the sites a body may report are
found first, by tracing the body once (:meth:`ErrorState.discover`), and their payloads
allocated before the body is staged for real: the carry's type does not change.

Rule signature (register with ``plax.core.register_rule("checkify", prim)``)::

    rule(ctx: ErrorState, *operands, **params) -> output (a list if multiple_results)

Inside, bind the primitive and call ``ctx.report(kind, failed, payload, info=...)``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from plax import lax, tree_util
from plax.core import ClosedJaxpr, Jaxpr, Literal, ShapeDtypeStruct, ShapedArray, new_transform
from plax.core.interpret import literal_array
from plax.core.trace import fun_name, get_aval
from plax.transforms.staging import trace_to_jaxpr

from plax_checkify.errors import Error, JaxException, NaNError, Site, all_checks, user_checks

checkify_rules = new_transform("checkify")

# JAX's list of the primitives whose float outputs nan_checks inspects (by name, so that a
# plugin's primitive of the same name is covered too).
NAN_PRIMITIVES = frozenset({
    "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bessel_i0e",
    "bessel_i1e", "cbrt", "conv_general_dilated", "cos", "cosh", "cumlogsumexp", "cummax",
    "cummin", "cumprod", "cumsum", "custom_linear_solve", "digamma", "dot_general", "erf",
    "erf_inv", "erfc", "exp", "expm1", "fft", "igamma", "igamma_grad_a", "igammac",
    "integer_pow", "lgamma", "log", "log1p", "logistic", "mul", "pad", "pow", "psum", "reduce",
    "reduce_prod", "reduce_sum", "reduce_window", "reduce_window_sum",
    "regularized_incomplete_beta", "rem", "rng_uniform", "rsqrt", "sin", "sinh", "sqrt", "sub",
    "tan", "tanh",
    "fma",  # plax's fused multiply-add: JAX's mul and add, which XLA fuses into it
})


def _strong(aval: ShapedArray) -> ShapedArray:
    return ShapedArray(tuple(aval.shape), aval.dtype, False)


def _zeros(aval: ShapedArray):
    return lax.full(aval.shape, 0, aval.dtype)


class _Shared:
    """What every copy of an error state shares: the enabled kinds and the sites found."""

    __slots__ = ("enabled", "sites", "keys")

    def __init__(self, enabled: frozenset):
        self.enabled = enabled
        self.sites: list[Site] = []
        self.keys: dict = {}  # (equation, kind, n-th report of that kind) -> site index


class ErrorState:
    """The error value while a checkified program is interpreted, and the rules' interface.

    Attributes:
      enabled: the error kinds being checked (``errors=`` of :func:`checkify`).
    """

    __slots__ = ("_shared", "failed", "code", "payloads", "_eqn", "_counts")

    def __init__(self, shared: _Shared, failed, code, payloads: list):
        self._shared = shared
        self.failed, self.code, self.payloads = failed, code, payloads
        self._eqn: Any = None
        self._counts: dict = {}

    @classmethod
    def new(cls, enabled: frozenset) -> "ErrorState":
        return cls(_Shared(enabled), lax.full((), False, np.dtype(bool)),
                   lax.full((), -1, np.dtype(np.int32)), [])

    @property
    def enabled(self) -> frozenset:
        return self._shared.enabled

    # ---- what rules call

    def report(self, kind: type, failed: Any, payload: Sequence[Any] = (), *, info: Any = None,
               where: str = "") -> None:
        """Records that the current equation fails with error ``kind`` where ``failed`` is true.

        Args:
          kind: a :class:`JaxException` subclass; ignored unless enabled.
          failed: a boolean scalar (array) computed by the program.
          payload: arrays the message needs (recorded when this is the first failure).
          info: static data for the message (see the kind's ``message``).
          where: the user's source line, if known.
        """
        if kind not in self.enabled:
            return
        shared = self._shared
        n = self._counts.get(kind, 0)
        self._counts[kind] = n + 1
        key = (self._eqn, kind, n)
        idx = shared.keys.get(key)
        if idx is None:
            idx = shared.keys[key] = len(shared.sites)
            shared.sites.append(Site(kind, info, tuple(_strong(get_aval(p)) for p in payload),
                                     where))
        self._allocate()
        site = shared.sites[idx]
        failed = lax.convert_element_type(failed, np.dtype(bool))
        first = lax.bitwise_and(failed, lax.bitwise_not(self.failed))
        self.code = lax.select(first, lax.full((), idx, np.dtype(np.int32)), self.code)
        self.payloads[idx] = tuple(
            _where(first, lax.convert_element_type(new, a.dtype), old)
            for new, old, a in zip(payload, self.payloads[idx], site.payload_avals))
        self.failed = lax.bitwise_or(self.failed, failed)

    def interpret(self, closed: ClosedJaxpr, args: Sequence[Any]) -> list:
        """Evaluates ``closed`` on ``args`` with this state (a call's body, inlined)."""
        return interpret(closed.jaxpr, closed.consts, args, self)

    def child(self, leaves: Sequence[Any]) -> "ErrorState":
        """A state sharing the sites, holding ``leaves`` (as :meth:`leaves` lays them out)."""
        st = ErrorState(self._shared, None, None, [])
        st._load_layout(self, leaves)
        return st

    def leaves(self) -> list:
        """The error value as a flat list of arrays, to carry through a loop or branch."""
        return [self.failed, self.code] + [p for ps in self.payloads for p in ps]

    def load(self, leaves: Sequence[Any]) -> None:
        """Takes the error value back from ``leaves`` (as :meth:`leaves` laid it out)."""
        self._load_layout(self, leaves)

    def discover(self, fun: Callable, *arg_avals: Any) -> None:
        """Traces ``fun(child_state, *args)`` once, to find the sites it may report, and
        allocates their payloads here, so a loop or branch body keeps its carry's type."""
        avals = [ShapeDtypeStruct(a.shape, a.dtype) for a in arg_avals]
        in_avals = [_strong(get_aval(x)) for x in self.leaves()] + [
            ShapedArray(tuple(a.shape), a.dtype, False) for a in avals]
        n = len(self.leaves())

        def traced(*xs):
            fun(self.child(xs[:n]), *xs[n:])
            return []

        trace_to_jaxpr(traced, in_avals, where="a checkified body")
        self._allocate()

    def to_error(self) -> Error:
        self._allocate()
        return Error(self.failed, self.code, tuple(self.payloads), tuple(self._shared.sites))

    # ---- internals

    def _allocate(self) -> None:
        sites = self._shared.sites
        for site in sites[len(self.payloads):]:
            self.payloads.append(tuple(_zeros(a) for a in site.payload_avals))

    def _load_layout(self, like: "ErrorState", leaves: Sequence[Any]) -> None:
        leaves = list(leaves)
        self.failed, self.code = leaves[0], leaves[1]
        rest, payloads = leaves[2:], []
        for ps in like.payloads:
            payloads.append(tuple(rest[:len(ps)]))
            rest = rest[len(ps):]
        self.payloads = payloads


def _where(pred, new, old):
    """``new`` where the scalar ``pred`` holds, else ``old``."""
    shape = get_aval(old).shape
    if shape:
        pred = lax.broadcast_in_dim(pred, shape, ())
        new = lax.broadcast_in_dim(new, shape, tuple(range(len(shape)))) \
            if get_aval(new).shape != shape else new
    return lax.select(pred, new, old)


def interpret(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any], ctx: ErrorState) -> list:
    """Evaluates ``jaxpr`` on ``args``, binding each primitive and running its checkify rule."""
    env: dict = {}

    def read(v):
        return literal_array(v) if isinstance(v, Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        prim = eqn.primitive
        ctx._eqn, ctx._counts = eqn, {}
        rule = checkify_rules.get(prim)
        if rule is not None:
            outs = rule(ctx, *invals, **eqn.params)
        elif prim.name in NAN_PRIMITIVES:
            outs = nan_check_rule(prim, ctx, *invals, **eqn.params)
        elif _sub_jaxprs(eqn.params):
            outs = _higher_order_rule(eqn, ctx, invals)
        else:
            outs = prim.bind(*invals, **eqn.params)
        if not prim.multiple_results:
            outs = (outs,)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def nan_check_rule(prim, ctx: ErrorState, *args, **params):
    """Binds ``prim`` and reports a :class:`NaNError` if a float output holds a NaN.

    A plugin opts its own primitive in with
    ``register_rule("checkify", my_p)(functools.partial(nan_check_rule, my_p))``.
    """
    out = prim.bind(*args, **params)
    if NaNError in ctx.enabled:
        from plax import numpy as jnp
        outs = out if prim.multiple_results else [out]
        flags = [jnp.any(jnp.isnan(o)) for o in outs if jnp.issubdtype(get_aval(o).dtype,
                                                                         jnp.inexact)]
        if flags:
            ctx.report(NaNError, functools.reduce(jnp.logical_or, flags), info=prim.name)
    return out


def _sub_jaxprs(params: dict) -> list:
    found = []
    for v in params.values():
        if isinstance(v, ClosedJaxpr):
            found.append(v)
        elif isinstance(v, (tuple, list)):
            found.extend(b for b in v if isinstance(b, ClosedJaxpr))
    return found


def _higher_order_rule(eqn, ctx: ErrorState, invals: list):
    """An equation holding sub-jaxprs with no rule of its own (``custom_jvp_call``,
    ``custom_vjp_call``, ``checkpoint``, ...): bound as it is when its body reports nothing
    (keeping, e.g., a custom derivative); inlined when it is a call whose body does."""
    prim = eqn.primitive
    bodies = _sub_jaxprs(eqn.params)
    before = len(ctx._shared.sites)
    for body in bodies:
        ctx.discover(lambda st, *xs, body=body: st.interpret(body, xs), *body.in_avals)
    if len(ctx._shared.sites) == before:
        return prim.bind(*invals, **eqn.params)
    call = [b for b in bodies if len(b.in_avals) == len(invals)]
    if len(bodies) == 1 and call:
        outs = ctx.interpret(call[0], invals)
        return outs if prim.multiple_results else outs[0]
    raise NotImplementedError(
        f"Primitive {prim.name!r} has no 'checkify' rule, so checks inside it cannot be "
        f"functionalized. Register one with plax.core.register_rule('checkify', "
        f"{prim.name}_p).")


def checkify(f: Callable, errors: frozenset = user_checks) -> Callable:
    """Functionalises the checks in ``f``: ``checkify(f)(*args)`` returns ``(err, out)``.

    ``err`` is an :class:`Error` saying whether a check failed (the first one in program
    order) with its message; ``out`` is what ``f`` returns. The checks are ordinary array
    operations in the traced program, so ``jit``, ``vmap`` (an error per batch member) and
    ``grad`` apply to the checkified function, on every backend.

    Args:
      f: the function to check.
      errors: the kinds of error to check for, a union of :data:`user_checks` (the
        default: calls of :func:`check`), :data:`nan_checks`, :data:`div_checks`,
        :data:`index_checks`, :data:`float_checks` or :data:`all_checks`.

    Returns:
      A function taking ``f``'s arguments and returning ``(err, out)``.

    Example:
      >>> from plax.experimental import checkify
      >>> f = checkify.checkify(lambda x: jnp.log(x), errors=checkify.nan_checks)
      >>> err, out = f(jnp.float32(-1.))
      >>> err.get()
      'nan generated by primitive: log.'
      >>> err.throw()
      Traceback (most recent call last):
      ...
      plax_checkify.errors.JaxRuntimeError: nan generated by primitive: log.
    """
    from plax_checkify.check import _functionalizing
    errors = frozenset(errors)
    unknown = [e for e in errors if not (isinstance(e, type) and issubclass(e, JaxException))]
    if unknown:
        raise TypeError(f"checkify errors must be error kinds such as checkify.nan_checks' "
                        f"members; got {unknown}. Known kinds: "
                        f"{sorted(k.__name__ for k in all_checks)}.")

    @functools.wraps(f)
    def checked(*args, **kwargs):
        out_tree: list = []

        # As JAX's checkify, f closes over its arguments instead of receiving tracers: a
        # Python scalar stays a Python value while f runs (Python control flow on it works,
        # and check refuses it as a formatting argument as JAX does); arrays become constants.
        def flat():
            out_leaves, tree = tree_util.tree_flatten(f(*args, **kwargs))
            out_tree.append(tree)
            return out_leaves

        _functionalizing.count += 1
        try:
            closed, _ = trace_to_jaxpr(flat, [],
                                       where=f"the checkified function {fun_name(f)}")
        finally:
            _functionalizing.count -= 1
        ctx = ErrorState.new(errors)
        outs = interpret(closed.jaxpr, closed.consts, [], ctx)
        return ctx.to_error(), tree_util.tree_unflatten(out_tree[0], outs)

    return checked

"""Batched ``while`` loops whose elements run independently: recognised, and resized.

``vmap`` of a ``while_loop`` whose predicate is batched, and the rejection samplers' loops
(:mod:`plax.random._loops`), stage one ``while`` over the whole batch: its cond is
``reduce_or`` of a per-element predicate, and its body computes each element's step and
keeps the elements whose predicate is false as they were (``select_n(pred, old, new)``).
Run as written, every round computes the body for the whole batch, though most elements
finished rounds ago (``random.gamma``: about 1.02 proposals an element, 4 rounds of the
whole batch).

When every equation of the cond and the body works element by element along the batch axis
(axis 0 of every carry), each element's values are those of its own loop, run alone. A
backend may then run the loop in any grouping of the elements: :func:`per_element_while`
recognises such a loop, and :meth:`PerElementWhile.resized` gives the per-element predicate
and the body for a block of ``k`` elements (the same equations, the batch axis ``k`` long),
so a backend can run only the elements still active, a block at a time. The jaxpr users see
does not change: this is for code generation.

Aligned values (their axis 0 is the batch: row ``b`` belongs to element ``b``) are the
carries, the constants whose axis 0 has the batch's length, and what equations compute from
them along the batch; other values are the same for every element (kept as they are).
"""
from __future__ import annotations

from typing import Callable

from plax import lax
from plax.core.effects import eqn_has_effects
from plax.core.jaxpr import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var
from plax.core.shaped_array import ShapedArray
from plax.lowering.calls import spliced_calls
from plax.lowering.fusion import ARG_REDUCTION, CUMULATIVE, ELEMENTWISE, REDUCTION, \
    fusion_kind


class PerElementWhile:
    """A batched ``while`` equation whose elements run independently (see the module
    docstring); made by :func:`per_element_while`.

    Attributes:
      size: the batch's length (axis 0 of every carry).
      aligned_consts: per constant operand of the equation (the cond's, then the body's),
        whether its axis 0 is the batch (a block reads its elements' rows).
    """

    def __init__(self, eqn: JaxprEqn, size: int, aligned_consts: list, pred: ClosedJaxpr,
                 body: ClosedJaxpr):
        self.eqn, self.size, self.aligned_consts = eqn, size, aligned_consts
        self._pred, self._body = pred, body
        self._resized: dict = {}

    def resized(self, k: int) -> tuple[ClosedJaxpr, ClosedJaxpr]:
        """``(pred, body)`` for a block of ``k`` elements: ``pred`` maps the cond's operands
        to the per-element predicate (``bool[k]``), ``body`` is the body (its outputs keep
        an element whose predicate is false as it was), aligned values ``k`` long on axis 0.

        Example:
          >>> f = plax.vmap(lambda x: lax.while_loop(lambda v: v < 10, lambda v: v * 2, x))
          >>> form = per_element_while(plax.make_jaxpr(f)(jnp.ones(8)).jaxpr.eqns[-1])
          >>> pred, body = form.resized(4)
          >>> pred.out_avals[0].shape, body.out_avals[0].shape
          ((4,), (4,))
        """
        got = self._resized.get(k)
        if got is None:
            nc, nb = self.eqn.params["cond_nconsts"], self.eqn.params["body_nconsts"]
            carries = [True] * (len(self.eqn.invars) - nc - nb)
            resize = _Resizer(self.size, k)
            pred = resize.closed(self._pred, self.aligned_consts[:nc] + carries)
            body = resize.closed(self._body, self.aligned_consts[nc:] + carries)
            got = self._resized[k] = (pred, body)
        return got


def per_element_while(eqn: JaxprEqn) -> PerElementWhile | None:
    """The :class:`PerElementWhile` of a ``while`` equation whose batch elements run
    independently, else None.

    It must have: carries of rank >= 1 sharing their axis-0 length; a cond ending in
    ``reduce_or`` over axis 0 of a ``bool[size]`` predicate; a body whose every output is
    its carry unchanged or ``select_n`` of that same predicate (recomputed in the body from
    the same operands, or broadcast along the carry's other axes) between the carry and a
    new value; and cond and body computed element by element along axis 0 (elementwise
    operations, reductions, slices, reshapes and broadcasts that keep axis 0, nested loops
    of this same kind).

    Args:
      eqn: any equation (None unless it is a ``while``).

    Returns:
      the form, or None.

    Example:
      >>> f = plax.vmap(lambda x: lax.while_loop(lambda v: v < 10, lambda v: v * 2, x))
      >>> eqn = plax.make_jaxpr(f)(jnp.ones(8)).jaxpr.eqns[-1]
      >>> per_element_while(eqn).size
      8
    """
    if eqn.primitive is not lax.while_p:
        return None
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    carries = eqn.invars[nc + nb:]
    if not carries or any(not v.aval.shape for v in carries):
        return None
    size = int(carries[0].aval.shape[0])
    if size < 2 or any(int(v.aval.shape[0]) != size for v in carries):
        return None
    aligned_consts = [bool(v.aval.shape) and int(v.aval.shape[0]) == size
                      for v in eqn.invars[:nc + nb]]
    cond = spliced_calls(p["cond_jaxpr"].jaxpr)
    body = spliced_calls(p["body_jaxpr"].jaxpr)
    reduce = _reduced_predicate(cond, size)
    if reduce is None:
        return None
    found = reduce.invars[0]
    pred = ClosedJaxpr(Jaxpr(cond.constvars, cond.invars, [found],
                             [e for e in cond.eqns if e is not reduce]),
                       p["cond_jaxpr"].consts)
    body_closed = ClosedJaxpr(body, p["body_jaxpr"].consts)
    if not _keeps_finished(eqn, cond, found, body):
        return None
    resize = _Resizer(size, size)  # (the check: raises where an equation mixes elements)
    try:
        resize.closed(pred, aligned_consts[:nc] + [True] * len(carries), outputs=True)
        resize.closed(body_closed, aligned_consts[nc:] + [True] * len(carries), outputs=True)
    except _NotLocal:
        return None
    return PerElementWhile(eqn, size, aligned_consts, pred, body_closed)


# ---------------------------------------------------------------- the loop's shape

def _producers(jaxpr: Jaxpr) -> dict:
    return {id(v): (e, j) for e in jaxpr.eqns for j, v in enumerate(e.outvars)}


def _reduced_predicate(cond: Jaxpr, size: int) -> JaxprEqn | None:
    """The ``reduce_or`` over axis 0 of a ``bool[size]`` operand that ``cond`` returns (its
    operand is the per-element predicate), else None."""
    out = cond.outvars[0]
    made = _producers(cond).get(id(out))
    if made is None or made[0].primitive is not lax.reduce_or_p:
        return None
    e = made[0]
    x = e.invars[0]
    if (isinstance(x, Literal) or tuple(x.aval.shape) != (size,)
            or tuple(int(a) for a in e.params["axes"]) != (0,)):
        return None
    return e


def _keeps_finished(eqn: JaxprEqn, cond: Jaxpr, pred, body: Jaxpr) -> bool:
    """Whether each output of ``body`` is its carry, or ``select_n(q, carry, new)`` with
    ``q`` the cond's per-element predicate ``pred`` recomputed in ``body`` from the same
    operands (or it broadcast along the carry's trailing axes)."""
    same = _SameValue(eqn, cond, body)
    made = same.body_made
    carries = body.invars[eqn.params["body_nconsts"]:]
    for k, out in enumerate(body.outvars):
        if out is carries[k]:
            continue
        e = made.get(id(out), (None,))[0]
        if e is None or e.primitive is not lax.select_n_p or len(e.invars) != 3 \
                or e.invars[1] is not carries[k]:
            return False
        q = e.invars[0]
        if isinstance(q, Var) and len(q.aval.shape) > 1:
            b = made.get(id(q), (None,))[0]
            if b is None or b.primitive is not lax.broadcast_in_dim_p \
                    or tuple(int(d) for d in b.params["broadcast_dimensions"]) != (0,):
                return False
            q = b.invars[0]
        if not same(q, pred):
            return False
    return True


class _SameValue:
    """Whether a value of the body is computed as a value of the cond is: the same equations
    (primitive, parameters, result index) applied to the same operands (the same outer
    operand of the loop, the same carry, an equal literal)."""

    def __init__(self, eqn: JaxprEqn, cond: Jaxpr, body: Jaxpr):
        p = eqn.params
        nc, nb = p["cond_nconsts"], p["body_nconsts"]
        outer = eqn.invars
        self.cond_in = {id(v): (("const", outer[i]) if i < nc else ("carry", i - nc))
                        for i, v in enumerate(cond.invars)}
        self.body_in = {id(v): (("const", outer[nc + i]) if i < nb else ("carry", i - nb))
                        for i, v in enumerate(body.invars)}
        self.cond_made, self.body_made = _producers(cond), _producers(body)
        self.memo: dict = {}

    def __call__(self, b, c) -> bool:
        if isinstance(b, Literal) or isinstance(c, Literal):
            return (isinstance(b, Literal) and isinstance(c, Literal)
                    and b.aval == c.aval and _equal(b.val, c.val))
        key = (id(b), id(c))
        if key not in self.memo:
            self.memo[key] = False  # (no cycles in a jaxpr; a guard all the same)
            self.memo[key] = self._same(b, c)
        return self.memo[key]

    def _same(self, b, c) -> bool:
        if id(b) in self.body_in or id(c) in self.cond_in:
            x, y = self.body_in.get(id(b)), self.cond_in.get(id(c))
            if x is None or y is None or x[0] != y[0]:
                return False
            if x[0] == "carry":
                return x[1] == y[1]
            return x[1] is y[1] or (isinstance(x[1], Literal) and isinstance(y[1], Literal)
                                    and _equal(x[1].val, y[1].val))
        (eb, jb), (ec, jc) = self.body_made.get(id(b)), self.cond_made.get(id(c))
        return (eb.primitive is ec.primitive and jb == jc and len(eb.invars) == len(ec.invars)
                and _equal(eb.params, ec.params)
                and all(self(x, y) for x, y in zip(eb.invars, ec.invars)))


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # (arrays in parameters: not compared, not equal)
        return False


# ---------------------------------------------------------------- element-local resizing

class _NotLocal(Exception):
    """An equation mixes the batch's elements (or is not known not to)."""


def _axes(params: dict, name: str) -> tuple:
    value = params.get(name)
    return () if value is None else tuple(int(a) for a in value)


class _Resizer:
    """Rewrites jaxprs whose aligned values (axis 0: the batch of ``size`` elements) are
    computed element by element so that the batch is ``k`` long; raises :class:`_NotLocal`
    at the first equation that is not element-local."""

    def __init__(self, size: int, k: int):
        self.size, self.k = size, k

    def closed(self, closed: ClosedJaxpr, aligned_in: list, outputs: bool = False
               ) -> ClosedJaxpr:
        jaxpr, aligned_out = self.jaxpr(closed.jaxpr, aligned_in)
        if outputs and not all(aligned_out):
            raise _NotLocal("an output is not aligned with the batch")
        return ClosedJaxpr(jaxpr, closed.consts)

    def aval(self, aval) -> ShapedArray:
        return ShapedArray((self.k,) + tuple(aval.shape[1:]), aval.dtype,
                           getattr(aval, "weak_type", False))

    def jaxpr(self, jaxpr: Jaxpr, aligned_in: list) -> tuple[Jaxpr, list]:
        jaxpr = spliced_calls(jaxpr)
        env: dict = {}      # id(old var) -> new var
        aligned: set = set()  # ids of the new aligned vars
        for v in jaxpr.constvars:
            env[id(v)] = v
        invars = []
        for v, a in zip(jaxpr.invars, aligned_in):
            if a:
                if not v.aval.shape or int(v.aval.shape[0]) != self.size:
                    raise _NotLocal("an aligned operand without the batch axis")
                nv = Var(self.aval(v.aval))
                aligned.add(id(nv))
            else:
                nv = v
            env[id(v)] = nv
            invars.append(nv)

        def read(v):
            return env.get(id(v), v) if isinstance(v, Var) else v

        eqns = []
        for e in jaxpr.eqns:
            ins = [read(v) for v in e.invars]
            flags = [isinstance(v, Var) and id(v) in aligned for v in ins]
            params, out_aligned = self.equation(e, ins, flags)
            outs = []
            for v, a in zip(e.outvars, out_aligned):
                nv = (DropVar if isinstance(v, DropVar) else Var)(
                    self.aval(v.aval) if a else v.aval)
                if a:
                    aligned.add(id(nv))
                env[id(v)] = nv
                outs.append(nv)
            eqns.append(JaxprEqn(e.primitive, ins, outs, params))
        outvars = [read(v) for v in jaxpr.outvars]
        flags = [isinstance(v, Var) and id(v) in aligned for v in outvars]
        return Jaxpr(jaxpr.constvars, invars, outvars, eqns), flags

    def equation(self, e: JaxprEqn, ins: list, flags: list) -> tuple[dict, list]:
        """``(params, which outputs are aligned)`` of ``e`` resized."""
        prim, p, n_out = e.primitive, e.params, len(e.outvars)
        size = self.size
        if eqn_has_effects(e):  # (run once a round as written, not once a block)
            raise _NotLocal(f"{prim.name} has effects")
        if not any(flags):
            return self.unaligned(e)
        rule = _RULES.get(prim)
        if rule is not None:
            return rule(self, e, ins, flags)
        kind = fusion_kind(prim, False, True, True)
        out = e.outvars[0].aval
        if kind == ELEMENTWISE:
            rank = len(out.shape)
            for v, a in zip(ins, flags):
                shape = tuple(v.aval.shape)
                if a or not shape:
                    continue
                if len(shape) != rank or shape[0] != 1:  # (a broadcast along the batch)
                    raise _NotLocal(f"{prim.name} of an operand not aligned with the batch")
            if not out.shape or int(out.shape[0]) != size:
                raise _NotLocal(f"{prim.name} without the batch axis")
            return p, [True] * n_out
        if kind in (REDUCTION, ARG_REDUCTION) and flags[0] and len(ins) == 1:
            if 0 in _axes(p, "axes"):
                raise _NotLocal(f"{prim.name} over the batch axis")
            return p, [True] * n_out
        if kind == CUMULATIVE and flags[0] and int(p.get("axis", 0)) != 0:
            return p, [True] * n_out
        raise _NotLocal(f"{prim.name} on a value aligned with the batch")

    def unaligned(self, e: JaxprEqn) -> tuple[dict, list]:
        """An equation of values the same for every element: kept, except that a broadcast
        (or an ``iota`` along another axis) to a leading axis of the batch's length whose
        rows are all equal becomes aligned (a block's rows are those rows)."""
        p = e.params
        if not e.outvars:
            return p, []
        out = e.outvars[0].aval
        leading = bool(out.shape) and int(out.shape[0]) == self.size
        if leading and e.primitive is lax.broadcast_in_dim_p \
                and 0 not in _axes(p, "broadcast_dimensions"):
            return dict(p, shape=(self.k,) + tuple(p["shape"][1:])), [True]
        if leading and e.primitive is lax.iota_p and int(p["dimension"]) != 0:
            return dict(p, shape=(self.k,) + tuple(p["shape"][1:])), [True]
        return p, [False] * len(e.outvars)


def _broadcast_in_dim(r: _Resizer, e, ins, flags):
    p = e.params
    dims = _axes(p, "broadcast_dimensions")
    if not dims or dims[0] != 0:
        raise _NotLocal("broadcast_in_dim moving the batch axis")
    return dict(p, shape=(r.k,) + tuple(p["shape"][1:])), [True]


def _reshape(r: _Resizer, e, ins, flags):
    p = e.params
    sizes = tuple(int(n) for n in p["new_sizes"])
    if p.get("dimensions") is not None or not sizes or sizes[0] != r.size:
        raise _NotLocal("reshape across the batch axis")
    return dict(p, new_sizes=(r.k,) + sizes[1:]), [True]


def _keeping_axis0(name: str) -> Callable:
    def rule(r: _Resizer, e, ins, flags):
        rank = len(e.invars[0].aval.shape)
        if 0 in {a % rank for a in _axes(e.params, name)} or not all(flags):
            raise _NotLocal(f"{e.primitive.name} of the batch axis")
        return e.params, [True] * len(e.outvars)
    return rule


def _slice(r: _Resizer, e, ins, flags):
    p = e.params
    strides = p.get("strides")
    if int(p["start_indices"][0]) != 0 or int(p["limit_indices"][0]) != r.size \
            or (strides is not None and int(strides[0]) != 1):
        raise _NotLocal("slice of the batch axis")
    return dict(p, limit_indices=(r.k,) + tuple(p["limit_indices"][1:])), [True]


def _concatenate(r: _Resizer, e, ins, flags):
    if int(e.params["dimension"]) == 0 or not all(flags):
        raise _NotLocal("concatenate along the batch axis")
    return e.params, [True]


def _transpose(r: _Resizer, e, ins, flags):
    if int(e.params["permutation"][0]) != 0:
        raise _NotLocal("transpose moving the batch axis")
    return e.params, [True]


def _while(r: _Resizer, e, ins, flags):
    form = per_element_while(e)
    if form is None:
        raise _NotLocal("a while loop whose elements do not run independently")
    nc = e.params["cond_nconsts"]
    n_consts = nc + e.params["body_nconsts"]
    if form.size != r.size or list(flags[:n_consts]) != form.aligned_consts \
            or not all(flags[n_consts:]):
        raise _NotLocal("a while loop over another batch")
    pred, body = form.resized(r.k)
    # the cond: the resized predicate, reduced over the block as the loop's own cond is
    q = pred.jaxpr.outvars[0]
    out = Var(ShapedArray((), q.aval.dtype))
    cond = Jaxpr(pred.jaxpr.constvars, pred.jaxpr.invars, [out], pred.jaxpr.eqns
                 + [JaxprEqn(lax.reduce_or_p, [q], [out], {"axes": (0,)})])
    return (dict(e.params, cond_jaxpr=ClosedJaxpr(cond, pred.consts), body_jaxpr=body),
            [True] * len(e.outvars))


_RULES = {
    lax.broadcast_in_dim_p: _broadcast_in_dim, lax.reshape_p: _reshape,
    lax.squeeze_p: _keeping_axis0("dimensions"), lax.rev_p: _keeping_axis0("dimensions"),
    lax.slice_p: _slice, lax.concatenate_p: _concatenate, lax.transpose_p: _transpose,
    lax.while_p: _while,
}
if hasattr(lax, "expand_dims_p"):
    _RULES[lax.expand_dims_p] = _keeping_axis0("dimensions")

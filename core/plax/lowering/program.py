"""The lowering driver: a jaxpr becomes a straight-line Python function over a backend's steps.

:func:`lower` asks the backend's :class:`~plax.lowering.emitter.Emitter` for one step per
fusion cluster or equation, runs the equations holding sub-jaxprs that it declines with the
program's own backend and device (see :mod:`plax.lowering.bodies`), falls back where it
declines anything else (see :mod:`plax.lowering.emitter`),
and generates one line of Python per step (``v3 = _f2(v1, v2)``), with literals bound once
as globals, a ``del`` after each value's last use (so large temporaries are freed, and may
be reused, as early as possible), and ``out=`` reuse of dead temporaries for steps that
accept it. The generated source is kept on the result as ``__plax_source__``.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

from plax.core.jaxpr import Jaxpr, JaxprEqn, Literal, Var
from plax.lowering.emitter import Emitter, Step
from plax.lowering.bodies import body_step
from plax.lowering.fallback import fallback_step
from plax.lowering.calls import _call_primitives, call_body, is_pinned_call, pinned_call_body
from plax.lowering.fusion import Cluster, HorizontalGroup, find_clusters, order_for_fusion
from plax.lowering.literals import literal_value
from plax.lowering.liveness import reads_before_updates
from plax.lowering.simplify import (common_subexpressions, compose_broadcasts, explicit_broadcasts,
                                   fold_scalar_constants, hoist_broadcasts, sink_unit_reshapes,
                                   unit_reductions)

def lower(jaxpr: Jaxpr, emitter: Emitter, backend, device) -> Callable[..., list]:
    """Compiles a constvar-free ``jaxpr`` into ``fn(*buffers) -> list of buffers``.

    Args:
      jaxpr: the jaxpr, as ``Backend.compile`` receives it (constants are leading inputs).
      emitter: the backend's code generator.
      backend: the backend (for the fallback's transfers and messages).
      device: the device the function runs on.

    Returns:
      The executable, with its generated source as ``__plax_source__``.

    Raises:
      UnsupportedPrimitiveError: an equation neither the emitter nor the reference runs.
    """
    return _Program(jaxpr, emitter, backend, device).build()


def fusion_units(jaxpr: Jaxpr, emitter) -> list:
    """The fusion clusters and lone equations :func:`lower` offers ``emitter``, in order.

    The one source of what a program's steps will be: :func:`lower` emits these, and a
    backend that predicts its dispatch count (or a test that checks its kernels) asks here
    rather than repeating the rewrites and the emitter's fusion options.

    Args:
      jaxpr: the program, its declined calls already spliced in (as :func:`lower` does).
      emitter: the :class:`~plax.lowering.emitter.Emitter` (an instance or its class: only its
        ``fuses*`` attributes are read).

    Returns:
      A list of :class:`~plax.lowering.fusion.Cluster`, ``JaxprEqn`` and (for an emitter with
      :attr:`~plax.lowering.Emitter.horizontal_max_elements`)
      :class:`~plax.lowering.fusion.HorizontalGroup`; ``jaxpr.eqns`` as they are for an
      emitter that does not fuse.

    Example:
      >>> class Fusing(Emitter): fuses = True
      >>> def names(u): return getattr(u, 'primitive', None) and u.primitive.name or [
      ...     e.primitive.name for e in u.eqns]
      >>> f = lambda x: jnp.exp(x).sum(axis=0) * 2.0
      >>> [names(u) for u in fusion_units(plax.make_jaxpr(f)(jnp.ones((3, 4))).jaxpr, Fusing)]
      [['exp', 'reduce_sum'], 'mul']
      >>> # a sum over an axis of size 1 is a reshape, and ``mul`` is computed before it
      >>> [names(u) for u in fusion_units(plax.make_jaxpr(f)(jnp.ones((1, 4))).jaxpr, Fusing)]
      [['exp', 'mul'], 'reshape']
    """
    if not emitter.fuses:
        # (reads of an update's operand first: the update may then take it as out=)
        return list(reads_before_updates(jaxpr).eqns)
    options = emitter.fusion_options()
    # one program is asked several times (the Numba backend's dispatch count, then its
    # lowering; a whole-program kernel's reference tier, then its per-cluster fallback): the
    # units depend on the jaxpr and the options alone, so they are kept per jaxpr object
    per_options = _units_made.get(jaxpr)
    if per_options is None:  # (setdefault: two threads lowering it share one table)
        per_options = _units_made.setdefault(jaxpr, {})
    units = per_options.get(options)
    if units is None:
        units = per_options[options] = _fusion_units(jaxpr, options)
        _formed[0] += 1
    return list(units)


#: jaxpr -> {FusionOptions: its units}: weak, so a program nobody holds frees its entry (the
#: units hold the jaxpr's equations and variables, never the jaxpr itself)
_units_made: "weakref.WeakKeyDictionary[Jaxpr, dict]" = weakref.WeakKeyDictionary()
_formed = [0]


def fusion_units_formed() -> int:
    """How many times :func:`fusion_units` has formed a program's units in this process (a
    program asked again, with the same options, is answered from what it formed: tests count
    this to check that the passes over one program share one result).

    Example:
      >>> class Fusing(Emitter): fuses = True
      >>> j = plax.make_jaxpr(lambda x: jnp.exp(x) * 2.0)(jnp.ones(3)).jaxpr
      >>> before = fusion_units_formed()
      >>> fusion_units(j, Fusing) == fusion_units(j, Fusing), fusion_units_formed() - before
      (True, 1)
    """
    return _formed[0]


def _fusion_units(jaxpr: Jaxpr, options) -> list:
    # (scalar arithmetic on literals alone is computed once, here, not at every call;
    # a fusing generator reads an operand at the loop's index: size-1 broadcasts explicit;
    # a reduction over size-1 axes is a reshape, a view rather than a kernel; a repeated
    # equation, an elementwise one cut off by keepdims reshapes, a cheap one read only through
    # a broadcast, a broadcast of a broadcast would each be a kernel of its own)
    simple = common_subexpressions(unit_reductions(fold_scalar_constants(jaxpr)))
    simple = compose_broadcasts(sink_unit_reshapes(simple))
    simple = compose_broadcasts(hoist_broadcasts(simple))
    # (reads of an update's operand first: the update may then take it as out=)
    simple = reads_before_updates(explicit_broadcasts(simple))
    return list(find_clusters(order_for_fusion(simple, options), options))


class _Program:
    def __init__(self, jaxpr: Jaxpr, emitter: Emitter, backend, device):
        self.emitter, self.backend, self.device = emitter, backend, device
        self.env: dict[str, Any] = {}
        self.names: dict = {}
        self.guarded = False
        self.accepted_calls: dict = {}  # id(call equation) -> its step (emitter or pinned)
        self.jaxpr = self.splice_declined_calls(jaxpr)

    def splice_declined_calls(self, jaxpr: Jaxpr) -> Jaxpr:
        """``jaxpr`` with every call equation the emitter declines replaced by its body's
        equations (recursively), so a body shares its caller's program: one guard around
        everything, temporaries freed and reused across the call, clusters fused across it."""
        if not any(e.primitive in _call_primitives for e in jaxpr.eqns):
            return jaxpr
        eqns: list = []
        rename: dict = {}
        for e in jaxpr.eqns:
            self._append(e, eqns, rename)
        outvars = [rename.get(v, v) if isinstance(v, Var) else v for v in jaxpr.outvars]
        return Jaxpr(jaxpr.constvars, jaxpr.invars, outvars, eqns)

    def _append(self, eqn: JaxprEqn, eqns: list, rename: dict) -> None:
        if rename:
            eqn = JaxprEqn(eqn.primitive, [rename.get(v, v) if isinstance(v, Var) else v
                                           for v in eqn.invars], eqn.outvars, eqn.params)
        body = call_body(eqn)
        if body is None:
            # a call pinned to this program's own backend and device is spliced as any call;
            # one pinned elsewhere stays an equation, run by its body kernel (never offered to
            # the emitter: a GPU backend must not take a call pinned to the CPU)
            body = pinned_call_body(eqn, self.backend, self.device)
            if body is None:
                if is_pinned_call(eqn):  # its own program, not this backend's to emit
                    self.accepted_calls[id(eqn)] = body_step(eqn, self.backend, self.device)
                eqns.append(eqn)
                return
        else:
            step = self.emitter.emit_equation(eqn)
            if step is not None:
                self.accepted_calls[id(eqn)] = step
                eqns.append(eqn)
                return
        # Inline the body with fresh variables (one body may be called from several places).
        inner = body.jaxpr
        local: dict = {v: Literal(c, v.aval) for v, c in zip(inner.constvars, body.consts)}
        local.update(zip(inner.invars, eqn.invars))
        for ie in inner.eqns:
            outs = [type(v)(v.aval) for v in ie.outvars]
            ins = [local.get(v, v) if isinstance(v, Var) else v for v in ie.invars]
            local.update(zip(ie.outvars, outs))
            self._append(JaxprEqn(ie.primitive, ins, outs, ie.params), eqns, rename)
        for outer, out in zip(eqn.outvars, inner.outvars):
            out = local.get(out, out) if isinstance(out, Var) else out
            # the body's own declined calls were spliced too: follow their renaming
            rename[outer] = rename.get(out, out) if isinstance(out, Var) else out

    def name_of(self, atom) -> str:
        if isinstance(atom, Literal):
            key = f"_c{len(self.env)}"
            self.env[key] = self.emitter.constant(literal_value(atom))
            return key
        name = self.names.get(atom)
        if name is None:
            name = self.names[atom] = f"v{len(self.names)}"
        return name

    def units(self) -> list:
        """(step, invars, outvars, multiple_results) per cluster or equation, in order."""
        units = []
        for unit in fusion_units(self.jaxpr, self.emitter):
            if isinstance(unit, HorizontalGroup):  # one step, or its units one by one
                step = self.emitter.emit_group(unit)
                if step is not None:
                    units.append((_as_step(step), unit.inputs, unit.outputs, True))
                    continue
                for u in unit.units:
                    units.extend(self.unit(u))
            else:
                units.extend(self.unit(unit))
        return units

    def unit(self, unit) -> list:
        """The steps of one cluster (one, or one per equation where the emitter declines it)
        or lone equation."""
        if isinstance(unit, Cluster):
            step = self.emitter.emit_cluster(unit)
            if step is not None:
                return [(_as_step(step), unit.inputs, unit.outputs, True)]
            if unit.parts is not None:   # (structural fusion declined: its units as they were)
                return [s for part in unit.parts for s in self.unit(part)]
            return [self.equation(e) for e in unit.eqns]
        return [self.equation(unit)]

    def equation(self, eqn: JaxprEqn):
        step = self.accepted_calls.get(id(eqn))
        if step is None:
            step = self.emitter.emit_equation(eqn)
        multiple = eqn.primitive.multiple_results
        if step is None:  # sub-jaxprs (cond, while, scan) compile with this program's backend
            step = body_step(eqn, self.backend, self.device)
        if step is None:
            step = fallback_step(eqn, self.backend, self.device)
        return _as_step(step), eqn.invars, eqn.outvars, multiple

    def build(self) -> Callable[..., list]:
        jaxpr = self.jaxpr
        params = [self.name_of(v) for v in jaxpr.invars]
        units = self.units()
        last: dict = {}
        for i, (_, ins, _, _) in enumerate(units):
            for v in ins:
                if isinstance(v, Var):
                    last[v] = i
        for v in jaxpr.outvars:
            if isinstance(v, Var):
                last[v] = len(units)
        # a step not known to allocate its result (a slice, a reshape: NumPy hands back a
        # view; any step without ``fresh_result``) may return its operand's memory: an
        # operand's buffer is not taken for a result in place while such a result is live,
        # else the ufunc writing into it changes the view (last first: a view of a view holds
        # its base too). Only the reuse waits: ``del`` of the name still comes after its last
        # reader (a view keeps its base's memory itself, and a result that is no view lets it
        # go)
        held: dict = {}   # value -> the last step at which a result that may be its view is live
        for step, ins, outs, multiple in reversed(units):
            if step.fresh_result or (step.accepts_out and not multiple):
                continue
            end = max((max(last.get(o, -1), held.get(o, -1)) for o in outs), default=-1)
            for v in ins:
                if isinstance(v, Var) and held.get(v, -1) < end:
                    held[v] = end
        caller_owned = set(jaxpr.invars)
        fresh: set = set()  # values this function allocated (a dead one may take a result)
        body = []
        for i, (step, ins, outs, multiple) in enumerate(units):
            key = f"_f{i}"
            self.env[key] = step.fn
            self.guarded |= step.guarded
            args = ", ".join(self.name_of(v) for v in ins)
            out_names = [self.name_of(v) for v in outs]
            if step.accepts_out and not multiple:
                reuse = _dead_operand(ins, outs[0], i, fresh, last, held)
                if reuse is not None:
                    args += f", out={self.name_of(reuse)}"
                if outs[0].aval.shape:
                    fresh.add(outs[0])
            elif step.fresh_result and not multiple and outs[0].aval.shape:
                fresh.add(outs[0])   # (a product's new array may take ``+ b`` in place)
            if not out_names:
                lhs = "_"
            else:
                lhs = ", ".join(out_names) + "," if multiple else out_names[0]
            body.append(f"{lhs} = {key}({args})")
            dead = sorted({self.name_of(v) for v in ins if isinstance(v, Var)
                           and last.get(v) == i and v not in caller_owned})
            if dead:
                body.append(f"del {', '.join(dead)}")
        body.append(f"return [{', '.join(self.name_of(v) for v in jaxpr.outvars)}]")
        lines = [f"def _compiled({', '.join(params)}):"]
        guard = self.emitter.guard() if self.guarded else None
        if guard is not None:
            self.env["_enter"], self.env["_leave"] = guard
            lines += ["    _token = _enter()", "    try:"]
            lines += ["        " + b for b in body]
            lines += ["    finally:", "        _leave(_token)"]
        else:
            lines += ["    " + b for b in body]
        source = "\n".join(lines)
        where = f"<plax jit {self.backend.name} {id(jaxpr):x}>"
        exec(compile(source, where, "exec"), self.env)
        fn = self.env["_compiled"]
        fn.__plax_source__ = source
        return fn


def _as_step(step) -> Step:
    return step if isinstance(step, Step) else Step(step)


def _dead_operand(ins, out: Var, i: int, fresh: set, last: dict, held: dict):
    """An operand whose buffer can take the result: allocated here, dead after step ``i``,
    no result that may be its view live after it (``held``), and of the result's shape and
    dtype."""
    if not out.aval.shape:
        return None
    for v in ins:
        if (isinstance(v, Var) and v in fresh and last.get(v) == i and held.get(v, -1) <= i
                and v.aval.shape == out.aval.shape and v.aval.dtype == out.aval.dtype):
            return v
    return None

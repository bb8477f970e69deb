"""The ``shard_map`` equation that ``make_jaxpr`` shows, as JAX 0.10.2 prints it.

``make_jaxpr`` of a function holding a ``shard_map`` prints one equation with the body's
jaxpr (its values typed by the mesh axes they vary over) and the parameters JAX gives it::

    c:f32[6@i] = shard_map[
      check_vma=True
      in_specs=(P('i',), P())
      jaxpr={ lambda ; d:f32[3]{V:i} e:f32[3]. let ... in (g,) }
      mesh=AbstractMesh('i': 2, axis_types=(Explicit,), device_kind=cpu, ...)
      newly_manual_axes=frozenset({'i'})
      out_specs=(P('i',),)
    ] a b

The equation is staged when the ``shard_map`` is traced directly by ``make_jaxpr``; ``jit``,
``grad`` and ``vmap`` keep tracing it as nested ``vmap``s (:mod:`plax_pmap.api`), which
every transform and backend composes with. Evaluating the equation (``eval_jaxpr`` of the
printed jaxpr) runs that same formulation.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from plax.core import registry
from plax.core.interpret import eval_jaxpr
from plax.core.pretty_print import pp_param_rules
from plax.core.primitive import Primitive
from plax.core.shaped_array import ShapedArray
from plax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["shard_map_p", "MeshParam", "bind_shard_map"]

shard_map_p = Primitive("shard_map", multiple_results=True)


class MeshParam:
    """The ``mesh`` parameter of a ``shard_map`` equation: the concrete mesh it runs on,
    printed as JAX prints the parameter: the mesh passed as ``mesh=``, or the abstract mesh
    of the context mesh when none was passed (``abstract``)."""

    __slots__ = ("mesh", "abstract")

    def __init__(self, mesh: Mesh, abstract: bool = True):
        self.mesh = mesh
        self.abstract = abstract

    def __eq__(self, other) -> bool:
        return isinstance(other, MeshParam) and other.mesh == self.mesh

    def __hash__(self) -> int:
        return hash(self.mesh)

    def __repr__(self) -> str:
        return str(self.mesh.abstract_mesh if self.abstract else self.mesh)

    __str__ = __repr__


class ManualAxes(frozenset):
    """``newly_manual_axes``: a frozenset that prints its axes in mesh order (a plain
    frozenset of strings prints in an order that changes from run to run)."""

    __slots__ = ("order",)

    def __new__(cls, axes, order: Sequence):
        self = super().__new__(cls, axes)
        self.order = tuple(a for a in order if a in self)
        return self

    def __repr__(self) -> str:
        return "frozenset({" + ", ".join(repr(a) for a in self.order) + "})"

    __str__ = __repr__


def _names(entry) -> tuple:
    return () if entry is None else entry if isinstance(entry, tuple) else (entry,)


@shard_map_p.def_abstract_eval
def _shard_map_avals(*avals, jaxpr, call_jaxpr, mesh, in_specs, out_specs, check_vma,
                     newly_manual_axes):
    from plax.sharding_types import shard_map_checks_types
    m = mesh.mesh
    typed = shard_map_checks_types(m, None)
    out = []
    for aval, spec in zip(jaxpr.out_avals, out_specs):
        shape = [n * math.prod(m.shape[a] for a in _names(spec[d] if d < len(spec) else None))
                 for d, n in enumerate(aval.shape)]
        out.append(ShapedArray(tuple(shape), aval.dtype, aval.weak_type,
                               sharding=NamedSharding(m, spec) if typed else None))
    return out


def _shard_map_impl(*args, jaxpr, call_jaxpr, mesh, in_specs, out_specs, check_vma,
                    newly_manual_axes):
    from plax_pmap.api import _place_shard_map_outputs, _shard_map_vmap
    m = mesh.mesh

    def body(*xs):
        return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *xs)

    outs = _shard_map_vmap(body, list(args), list(in_specs), m, list(out_specs), check_vma)
    return list(_place_shard_map_outputs(outs, m, list(out_specs)))


registry.register_rule("impl", shard_map_p)(_shard_map_impl)


# Under transforms and in compiled programs the equation is its vmap formulation, traced
# once at staging into ``call_jaxpr`` (global inputs -> global outputs): backends inline it
# (plax.core.passes.inline_calls) and the transforms below evaluate it.
def _expanded(params: dict):
    return params["call_jaxpr"]


def _jvp(primals, tangents, **params):
    import plax
    from plax.transforms.jvp import instantiate
    call = _expanded(params)
    outs, tans = plax.jvp(lambda *xs: eval_jaxpr(call.jaxpr, call.consts, *xs),
                          list(primals), [instantiate(t) for t in tangents])
    return list(outs), list(tans)


def _batch(vals, dims, **params):
    import plax
    call = _expanded(params)
    outs = plax.vmap(lambda *xs: eval_jaxpr(call.jaxpr, call.consts, *xs),
                     in_axes=tuple(dims))(*vals)
    return list(outs), [0] * len(outs)


registry.register_rule("jvp", shard_map_p)(_jvp)
registry.register_rule("batch", shard_map_p)(_batch)


# In a typed body JAX binds its psum as ``psum_invariant`` (the sum of a varying value is
# invariant); plax's psum types its result the same way under its own name. This stand-in
# is only ever printed.
_psum_invariant_shown = Primitive("psum_invariant")
# ... and a psum adding the parts of a value unreduced over its axes as ``unreduced_psum``
_unreduced_psum_shown = Primitive("unreduced_psum")


def _shown_psum(e):
    """The stand-in a typed body's psum equation ``e`` prints as."""
    from plax.core import varying
    from plax.core.jaxpr import Var
    x = e.invars[0]
    summed = set(e.params.get("axes", ()))
    if isinstance(x, Var) and summed and summed <= varying.unreduced_of(x.aval):
        return _unreduced_psum_shown
    return _psum_invariant_shown


def _as_jax_names(closed, check_vma: bool):
    """The body as JAX prints it: with ``check_vma``, its psums named ``psum_invariant``
    (``unreduced_psum`` where they add the parts of an unreduced value)."""
    from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn
    from plax_pmap.primitives import psum_p
    j = closed.jaxpr
    if not check_vma or not any(e.primitive is psum_p for e in j.eqns):
        return closed
    eqns = [JaxprEqn(_shown_psum(e), e.invars, e.outvars, e.params)
            if e.primitive is psum_p else e for e in j.eqns]
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, j.outvars, eqns), closed.consts)


def _printed_params(params: dict) -> dict:
    # JAX's keys (the body under ``jaxpr``), the mesh as its abstract mesh
    return {"check_vma": params["check_vma"], "in_specs": params["in_specs"],
            "jaxpr": _as_jax_names(params["jaxpr"], params["check_vma"]),
            "mesh": params["mesh"],
            "newly_manual_axes": params["newly_manual_axes"],
            "out_specs": params["out_specs"]}


pp_param_rules[shard_map_p] = _printed_params


def with_implicit_pvary(closed, mesh_axes: Sequence) -> Any:
    """``closed`` with the casts JAX writes where an invariant value meets varying ones:
    before an operation whose result varies over axes one of its operands does not, that
    operand is cast by ``pvary[axes=...]`` (plax's typing casts implicitly; JAX's jaxpr
    shows the cast). Values are unchanged."""
    from plax.core import varying
    from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Var, sub_jaxprs
    from plax_pmap.collectives import pvary_p
    from plax_pmap.runtime import _COLLECTIVE_SET
    eqns = []
    for eqn in closed.jaxpr.eqns:
        prim = eqn.primitive
        if prim in _COLLECTIVE_SET or prim in varying._self_typed or \
                any(True for _ in sub_jaxprs(eqn.params)):
            eqns.append(eqn)
            continue
        out_vma = frozenset().union(*[varying.axes_of(v.aval) for v in eqn.outvars])
        ins = []
        for v in eqn.invars:
            # a literal is invariant: JAX casts it too (pvary[axes=('i',)] 2.0:f32[])
            have = varying.axes_of(v.aval) if isinstance(v, Var) else frozenset()
            missing = tuple(a for a in mesh_axes if a in out_vma and a not in have)
            if not missing:
                ins.append(v)
                continue
            cast = Var(v.aval.update(vma=have | frozenset(missing)))
            eqns.append(JaxprEqn(pvary_p, [v], [cast], {"axes": missing}))
            ins.append(cast)
        eqns.append(eqn if ins == list(eqn.invars) else
                    JaxprEqn(prim, ins, list(eqn.outvars), eqn.params))
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(list(j.constvars), list(j.invars), list(j.outvars), eqns),
                       list(closed.consts))


def bind_shard_map(closed, leaves: Sequence[Any], in_specs: Sequence[PartitionSpec],
                   out_specs: Sequence[PartitionSpec], mesh: Mesh, check_vma: bool,
                   axis_names: Any = None, mesh_given: bool = False) -> list:
    """Stages a ``shard_map`` equation running ``closed`` (the body traced on its blocks)
    over ``mesh`` (``mesh_given``: passed as ``mesh=`` rather than taken from the context);
    returns its outputs."""
    manual = ManualAxes(mesh.axis_names if axis_names is None else axis_names,
                        mesh.axis_names)
    if check_vma:
        closed = with_implicit_pvary(closed, mesh.axis_names)
    from plax.core.trace import get_aval
    from plax.transforms.staging import trace_to_jaxpr
    from plax_pmap.api import _shard_map_vmap

    def expanded(*xs):
        return list(_shard_map_vmap(lambda *b: eval_jaxpr(closed.jaxpr, closed.consts, *b),
                                    list(xs), list(in_specs), mesh, list(out_specs), check_vma))

    call, _ = trace_to_jaxpr(expanded, [get_aval(x) for x in leaves], "shard_map")
    return shard_map_p.bind(*leaves, jaxpr=closed, call_jaxpr=call, mesh=MeshParam(mesh, not mesh_given),
                            in_specs=tuple(in_specs), out_specs=tuple(out_specs),
                            check_vma=bool(check_vma), newly_manual_axes=manual)

"""Replication checking for ``shard_map`` (``check_vma=True``): which mesh axes each value of
the per-device program may vary over, and whether the outputs agree with ``out_specs``.

The analysis runs over the traced body jaxpr. Each value gets the set of mesh axes along which
it may differ between devices (JAX calls it the value's *varying manual axes*, vma):

* an argument varies over the mesh axes its in_spec names; constants and literals over none;
* ``psum``/``pmax``/``pmin`` (and ``pmean``, built on ``psum``) over axes remove them;
* ``axis_index`` over an axis varies over it; ``all_gather``, ``psum_scatter``,
  ``all_to_all`` and ``ppermute`` over an axis keep (or add) it -- every member receives a
  different block, or in ``all_gather``'s case JAX still counts the result as varying;
* every other primitive varies over the union of its operands' axes;
* ``jit``, ``checkpoint`` and ``custom_jvp``/``custom_vjp`` calls are analysed through their
  bodies; ``cond`` takes the union over its branches and its index; ``scan`` and
  ``while_loop`` iterate their body until the carries' axes stop growing, and a while loop's
  outputs also vary over the axes of its predicate (the trip count may differ between
  devices).

An output whose out_spec leaves out a mesh axis claims to be equal along it; if its value may
vary over that axis, :func:`check_out_specs` raises a ``ValueError`` naming the output, the
axis and the ways out.
"""
from __future__ import annotations

from typing import Callable, Hashable, Sequence

from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal
from plax_pmap.primitives import (all_gather_p, all_to_all_p, axis_index_p, pmax_p, pmin_p,
                                  ppermute_p, psum_p, psum_scatter_p)

_NONE: frozenset = frozenset()

_REDUCING = (psum_p, pmax_p, pmin_p)
_VARYING = (all_gather_p, all_to_all_p, psum_scatter_p, ppermute_p)


def jaxpr_vma(jaxpr: Jaxpr, in_vma: Sequence[frozenset]) -> list[frozenset]:
    """The mesh axes each output of ``jaxpr`` may vary over, given its inputs' (constants
    vary over none).

    Args:
      jaxpr: the program (a :class:`Jaxpr`; pass ``closed.jaxpr`` for a ClosedJaxpr).
      in_vma: one frozenset of axis names per input variable.

    Returns:
      One frozenset per output.
    """
    env: dict = {v: _NONE for v in jaxpr.constvars}
    env.update(zip(jaxpr.invars, in_vma))

    def read(x) -> frozenset:
        return _NONE if isinstance(x, Literal) else env[x]

    for eqn in jaxpr.eqns:
        outs = _eqn_vma(eqn, [read(x) for x in eqn.invars])
        env.update(zip(eqn.outvars, outs))
    return [read(x) for x in jaxpr.outvars]


def _union(sets) -> frozenset:
    out = _NONE
    for s in sets:
        out = out | s
    return out


def _eqn_vma(eqn: JaxprEqn, ins: list[frozenset]) -> list[frozenset]:
    p, params, n_out = eqn.primitive, eqn.params, len(eqn.outvars)
    if p in _REDUCING:
        return [ins[0] - frozenset(params["axes"])]
    if p in _VARYING:
        return [ins[0] | frozenset(params["axes"])]
    if p is axis_index_p:
        return [frozenset(params["axes"])]
    rule = _STRUCTURED.get(p.name)
    if rule is not None:
        return rule(params, ins, n_out)
    subs = list(sub_jaxprs(params))
    if not subs:
        return [_union(ins)] * n_out
    if len(subs) == 1 and len(subs[0].invars) == len(ins) and len(subs[0].outvars) == n_out:
        return jaxpr_vma(subs[0], ins)  # a call: jit, checkpoint, custom_jvp/vjp
    # an unknown primitive holding programs: everything may depend on everything
    u = _union(ins)
    for sub in subs:
        u = u | _union(jaxpr_vma(sub, [u] * len(sub.invars)))
    return [u] * n_out


def sub_jaxprs(params: dict):
    """The jaxprs among an equation's parameters (ClosedJaxprs unwrapped), in order."""
    for v in params.values():
        for x in (v if isinstance(v, (list, tuple)) else (v,)):
            if isinstance(x, ClosedJaxpr):
                yield x.jaxpr
            elif isinstance(x, Jaxpr):
                yield x


def _jaxpr(j) -> Jaxpr:
    return j.jaxpr if isinstance(j, ClosedJaxpr) else j


def _cond(params, ins, n_out):
    index, ops = ins[0], ins[1:]
    outs = [index] * n_out  # which branch runs may differ between devices
    for branch in params["branches"]:
        outs = [a | b for a, b in zip(outs, jaxpr_vma(_jaxpr(branch), ops))]
    return outs


def _fixpoint(body: Callable[[list], list], carry: list) -> list:
    """The carries' axes after any number of iterations: grow them until stable."""
    while True:
        new = [a | b for a, b in zip(carry, body(carry))]
        if new == carry:
            return carry
        carry = new


def _scan(params, ins, n_out):
    body = _jaxpr(params["jaxpr"])
    nc, nk = params["num_consts"], params["num_carry"]
    consts, init, xs = ins[:nc], ins[nc:nc + nk], ins[nc + nk:]
    carry = _fixpoint(lambda c: jaxpr_vma(body, consts + c + xs)[:nk], list(init))
    return carry + jaxpr_vma(body, consts + carry + xs)[nk:]


def _while(params, ins, n_out):
    cond, body = _jaxpr(params["cond_jaxpr"]), _jaxpr(params["body_jaxpr"])
    cn, bn = params["cond_nconsts"], params["body_nconsts"]
    cconsts, bconsts, init = ins[:cn], ins[cn:cn + bn], ins[cn + bn:]
    carry = _fixpoint(lambda c: jaxpr_vma(body, bconsts + c), list(init))
    pred, = jaxpr_vma(cond, cconsts + carry)
    return [c | pred for c in carry]


_STRUCTURED: dict[str, Callable] = {"cond": _cond, "scan": _scan, "while": _while}


# ------------------------------------------------------------------ the check

def spec_axes(spec) -> frozenset:
    """The mesh axes a PartitionSpec names (in any dimension, tuples flattened)."""
    out = set()
    for e in spec:
        if e is None:
            continue
        out.update(e if isinstance(e, tuple) else (e,))
    return frozenset(out)


def check_out_specs(closed: ClosedJaxpr, in_specs: Sequence, out_specs: Sequence,
                    out_names: Sequence[str], mesh_axes: Sequence[Hashable]) -> None:
    """Raises if an output may vary over a mesh axis its out_spec leaves out.

    Args:
      closed: the traced per-device program (inputs: one per argument leaf).
      in_specs: the PartitionSpec of each argument leaf.
      out_specs: the PartitionSpec of each output leaf.
      out_names: how to name each output in the message (``"out[1]['w']"``).
      mesh_axes: the mesh axes to check (in mesh order).

    Raises:
      ValueError: naming the first such output and axis, and what to do about it.
    """
    outs = jaxpr_vma(closed.jaxpr, [spec_axes(s) for s in in_specs])
    for vma, spec, name in zip(outs, out_specs, out_names):
        claimed = spec_axes(spec)
        bad = [a for a in mesh_axes if a in vma and a not in claimed]
        if not bad:
            continue
        axis = bad[0]
        others = f" (and over {', '.join(repr(a) for a in bad[1:])})" if bad[1:] else ""
        raise ValueError(
            f"shard_map output {name} has out_specs {spec!r}, which leaves out mesh axis "
            f"{axis!r}: the output is then taken to be equal on all devices along {axis!r}, "
            f"but its value may differ between them{others} -- it depends on an argument "
            f"split over {axis!r}, on axis_index({axis!r}), or on a collective such as "
            f"all_gather/ppermute/psum_scatter over it. Reduce it over the axis "
            f"(lax.psum/pmean/pmax/pmin(x, {axis!r})), or name {axis!r} in its out_specs "
            f"entry so that the devices' blocks are concatenated (e.g. "
            f"PartitionSpec({axis!r})), or pass check_vma=False to shard_map if the values "
            f"are equal anyway (the first device's block is returned).")

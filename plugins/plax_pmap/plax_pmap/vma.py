"""Replication checking for ``shard_map`` (``check_vma=True``): whether the outputs agree
with ``out_specs``.

A body traced with ``check_vma`` has every value typed by the mesh axes along which it may
differ between devices (its *varying manual axes*, vma: ``ShapedArray.vma``, see
:mod:`plax.core.varying`): an argument varies over the mesh axes its in_spec names, constants
over none; ``psum``/``pmax``/``pmin`` over axes remove them; ``axis_index``, ``all_gather``,
``psum_scatter``, ``all_to_all`` and ``ppermute`` over an axis add it (every member
receives a different block, or in ``all_gather``'s case JAX still counts the result as
varying); every other primitive varies over the union of its operands' axes; ``jit``,
``checkpoint``, ``cond``, ``scan`` and ``while_loop`` are typed by their bodies (a ``cond``
or ``while_loop`` with a varying predicate varies over its axes, a loop carry over whatever
its body makes it vary over).

An output whose out_spec leaves out a mesh axis claims to be equal along it; if its type
says it may vary over that axis, :func:`check_out_specs` raises a ``ValueError`` naming the
output, the axis and the ways out.
"""
from __future__ import annotations

from typing import Hashable, Sequence

from plax.core import varying
from plax.core.jaxpr import ClosedJaxpr


def spec_axes(spec) -> frozenset:
    """The mesh axes a PartitionSpec names (in any dimension, tuples flattened; its
    unreduced axes are not among them)."""
    out = set()
    for e in getattr(spec, "partitions", spec):
        if e is None:
            continue
        out.update(e if isinstance(e, tuple) else (e,))
    return frozenset(out)


def check_out_specs(closed: ClosedJaxpr, out_specs: Sequence, out_names: Sequence[str],
                    mesh_axes: Sequence[Hashable]) -> None:
    """Raises if an output may vary over a mesh axis its out_spec leaves out.

    Args:
      closed: the per-device program, traced with ``check_vma`` (its values typed).
      out_specs: the PartitionSpec of each output leaf.
      out_names: how to name each output in the message (``"out[1]['w']"``).
      mesh_axes: the mesh axes to check (in mesh order).

    Raises:
      ValueError: naming the first such output and axis, and what to do about it.
    """
    check_out_vmas([varying.axes_of(v.aval) for v in closed.jaxpr.outvars], out_specs,
                   out_names, mesh_axes)


def check_out_vmas(vmas: Sequence[frozenset], out_specs: Sequence, out_names: Sequence[str],
                   mesh_axes: Sequence[Hashable]) -> None:
    """:func:`check_out_specs` given each output's varying axes (an eagerly run body's).

    Raises:
      ValueError: as :func:`check_out_specs`.
    """
    for vma, spec, name in zip(vmas, out_specs, out_names):
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

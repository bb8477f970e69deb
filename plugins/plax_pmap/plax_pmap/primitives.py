"""The collective primitives themselves, without their rules: ``psum_p``, ``pmax_p``,
``pmin_p``, ``all_gather_p``, ``all_to_all_p``, ``psum_scatter_p`` (JAX's
``reduce_scatter_p``), ``ppermute_p`` and ``axis_index_p``.

This module is small on purpose: the plugin's hook imports it to export the primitives as
``plax.lax.psum_p`` and so on, and plugin discovery should not pay for the rules. The abstract
evaluation, JVP, transpose and batching rules live in :mod:`plax_pmap.collectives`, which the
first ``bind`` of any of these primitives imports.

Each primitive names its axes in its ``axes`` parameter (a tuple of names); the others are
``axis`` and ``axis_size`` (``all_gather``), ``split_axis``, ``concat_axis`` and
``axis_size`` (``all_to_all``), ``scatter_dimension`` and ``axis_size``
(``psum_scatter``), ``perm`` (``ppermute``: ``((source, destination), ...)``) and
``axis_size`` (``axis_index``). Each takes one operand (``axis_index`` none).
"""
from __future__ import annotations

import importlib

from plax.core import Primitive, registry
from plax.transforms.batching import register_axis_primitive
from plax_pmap.axes import axis_size as _axis_size

__all__ = ["CollectivePrimitive", "psum_p", "pmax_p", "pmin_p", "all_gather_p", "all_to_all_p",
           "psum_scatter_p", "reduce_scatter_p", "ppermute_p", "axis_index_p", "COLLECTIVES"]

_rules_loaded = [False]


class CollectivePrimitive(Primitive):
    """A primitive over named axes. Binding it loads the rules on first use and checks that
    every name is bound. A vmap level binding one of its axes processes it even when that
    level is above the operands (``psum(1.0, "i")`` is the axis size): the core's level rule
    does that for every primitive that refers to axis names (see
    ``plax.transforms.batching.axis_names_of``)."""

    __slots__ = ()

    def bind(self, *args, **params):
        if not _rules_loaded[0]:
            importlib.import_module("plax_pmap.collectives")  # registers the rules
            _rules_loaded[0] = True
        if params.get("axis_index_groups", False) is None:
            # JAX's binds pass axis_index_groups=None; plax's primitives have no groups
            # (the grouped functions are built from all_gather)
            del params["axis_index_groups"]
        for name in params["axes"]:
            _axis_size(name)  # NameError for an unbound name
        return super().bind(*args, **params)


def _prim(name: str) -> CollectivePrimitive:
    p = CollectivePrimitive(name)
    register_axis_primitive(p, lambda params: params["axes"])
    registry.register_rule("impl", p)(_eager_impl(p))
    return p


def _eager_impl(p):
    def impl(*args, axes, **params):
        # reached only when the names are bound by a pmap/shard_map trace but the value is
        # concrete (a program evaluated outside the runtime): say so
        raise NameError(f"unbound axis name: {axes[0]}. {p.name} ran outside the pmap/shard_map "
                        "program that binds it (an eagerly evaluated sub-program is not run "
                        "by the device runtime)")
    return impl


psum_p = _prim("psum")
pmax_p = _prim("pmax")
pmin_p = _prim("pmin")
all_gather_p = _prim("all_gather")
all_to_all_p = _prim("all_to_all")
psum_scatter_p = _prim("reduce_scatter")
reduce_scatter_p = psum_scatter_p  # JAX's name for it
ppermute_p = _prim("ppermute")
axis_index_p = _prim("axis_index")
COLLECTIVES = (psum_p, pmax_p, pmin_p, all_gather_p, all_to_all_p, psum_scatter_p, ppermute_p,
               axis_index_p)

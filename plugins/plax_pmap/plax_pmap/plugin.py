"""The entry point (``plax.plugins: pmap = plax_pmap.plugin``).

Discovery imports only this module and :mod:`plax_pmap.primitives` (the primitive objects,
exported as ``plax.lax.psum_p`` ...): it exports small functions that import the
implementation (:mod:`plax_pmap.api`, :mod:`plax_pmap.collectives`) on their first call, so
``plax.devices()`` and ``import plax`` do not pay for pmap.
"""
from __future__ import annotations

import importlib

from plax.plugins import hookimpl

_API = ("pmap", "shard_map")
_LAX = ("psum", "pmean", "pmax", "pmin", "all_gather", "all_to_all", "ppermute", "pshuffle",
        "psum_scatter", "axis_index", "axis_size", "pbroadcast", "pvary", "pcast", "pswapaxes")
# The primitive objects, under JAX's names (``reduce_scatter_p`` is JAX's name for
# psum_scatter's; plax also offers it as ``psum_scatter_p``). They come from the small
# plax_pmap.primitives module, which loads the rules on the first bind.
_PRIMITIVES = ("psum_p", "pmax_p", "pmin_p", "all_gather_p", "all_to_all_p", "ppermute_p",
               "psum_scatter_p", "reduce_scatter_p", "axis_index_p")


def _lazy(module: str, name: str):
    def call(*args, **kwargs):
        target = getattr(importlib.import_module(module), name)
        return target(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__module__ = module
    call.__doc__ = f"See :func:`{module}.{name}` (loaded on first call)."
    call.__wrapped_lazily__ = (module, name)
    return call


@hookimpl
def plax_plugins():
    exports = {n: _lazy("plax_pmap.api", n) for n in _API}
    exports["smap"] = _lazy("plax_pmap.smap", "smap")
    exports["experimental.shard_map"] = importlib.import_module("plax_pmap.shard_map_module")
    exports.update({f"lax.{n}": _lazy("plax_pmap.collectives", n) for n in _LAX})
    exports["lax.ragged_all_to_all"] = _lazy("plax_pmap.ragged_collectives", "ragged_all_to_all")
    exports.update({f"lax.{n}": _lazy("plax_pmap.point_to_point", n) for n in ("psend", "precv")})
    primitives = importlib.import_module("plax_pmap.primitives")
    exports.update({f"lax.{n}": getattr(primitives, n) for n in _PRIMITIVES})
    exports["distributed.backend_initialize"] = _lazy("plax_pmap.mpi", "backend_initialize")
    return exports

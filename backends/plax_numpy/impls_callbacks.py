"""Host callbacks: the primitive's ``callback`` parameter does the work on NumPy arrays."""
from __future__ import annotations

from plax.lax.callbacks import debug_callback_p, io_callback_p, pure_callback_p
from plax_numpy.registry import impl


@impl(debug_callback_p)
def debug_callback(*arrays, callback, ordered):
    callback(*arrays)
    return []


@impl(pure_callback_p)
def pure_callback(*arrays, callback, result_avals, vmap_method):
    return callback(*arrays, result_avals=result_avals)


@impl(io_callback_p)
def io_callback(*arrays, callback, result_avals, ordered):
    return callback(*arrays, result_avals=result_avals)

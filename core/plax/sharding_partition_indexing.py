"""Per-block forms of the operations that work along some dimensions and leave the others
alone: slicing, padding, reversing, dynamic slices and updates, gathers, scatters and FFTs
(used by :mod:`plax.sharding_partition`).

Such an operation reads and writes a dimension it does not touch (one sliced whole, not
padded, not reversed, not indexed into, not transformed) position by position, so a split
there stays split: each device computes its block of the result from its block of the
operand. Only the dimensions it touches must be whole on every device; the partitioner
makes them so (an all-gather along those mesh axes alone), and cuts the result to its type.

Each form returns ``(dims wanted per operand, dims of the result, block params)``, or None
when the operation is computed whole (the caller gathers its operands).
"""
from __future__ import annotations

from typing import Callable

from plax.sharding_exchange import local_shape


def _keep(dims: tuple, touched: set) -> tuple:
    """``dims`` with the touched dimensions made whole."""
    return tuple(() if k in touched else n for k, n in enumerate(dims))


def _scalars(invars) -> list:
    return [((),) * len(v.aval.shape) for v in invars]


def _slice(eqn, typed, mesh):
    p, shape = eqn.params, eqn.invars[0].aval.shape
    strides = p.get("strides") or (1,) * len(shape)
    touched = {k for k, (lo, hi, st, n) in enumerate(zip(p["start_indices"], p["limit_indices"],
                                                          strides, shape))
               if (lo, hi, st) != (0, n, 1)}
    want = _keep(typed, touched)
    block = local_shape(shape, want, mesh)
    if block is None:
        return None
    limits = tuple(block[k] if k not in touched else hi
                   for k, hi in enumerate(p["limit_indices"]))
    return [want], want, dict(p, limit_indices=limits)


def _rev(eqn, typed, mesh):
    want = _keep(typed, set(eqn.params["dimensions"]))
    return [want], want, eqn.params


def _pad(eqn, typed, mesh):
    touched = {k for k, c in enumerate(eqn.params["padding_config"]) if tuple(c) != (0, 0, 0)}
    want = _keep(typed, touched)
    return [want, ()], want, eqn.params


def _dynamic_slice(eqn, typed, mesh):
    p, shape = eqn.params, eqn.invars[0].aval.shape
    # a dimension sliced whole: its start is clamped to 0 on the block as on the whole
    touched = {k for k, (s, n) in enumerate(zip(p["slice_sizes"], shape)) if s != n}
    want = _keep(typed, touched)
    block = local_shape(shape, want, mesh)
    if block is None:
        return None
    sizes = tuple(block[k] if k not in touched else s for k, s in enumerate(p["slice_sizes"]))
    return [want] + _scalars(eqn.invars[1:]), want, dict(p, slice_sizes=sizes)


def _dynamic_update_slice(eqn, typed, mesh):
    shape, upd = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape
    want = _keep(typed, {k for k, (n, m) in enumerate(zip(shape, upd)) if n != m})
    return [want, want] + _scalars(eqn.invars[2:]), want, eqn.params


def _gather(eqn, typed, mesh):
    """An operand dimension taken whole (not indexed into, not collapsed) is a window
    (offset) dimension of the result: a split there passes through; the indices are whole."""
    p = eqn.params
    dn, sizes = p["dimension_numbers"], p["slice_sizes"]
    operand, indices = eqn.invars[0].aval, eqn.invars[1].aval
    if dn.operand_batching_dims:
        return None
    windows = [k for k in range(len(operand.shape)) if k not in dn.collapsed_slice_dims]
    passing = {k for k in windows if k not in dn.start_index_map
               and sizes[k] == operand.shape[k]}
    # the operand's dims as the result's offset dimensions carry them
    op_dims = [()] * len(operand.shape)
    for out_k, k in zip(dn.offset_dims, windows):
        if k in passing:
            op_dims[k] = typed[out_k]
    op_dims = tuple(op_dims)
    block = local_shape(operand.shape, op_dims, mesh)
    if block is None:
        return None
    out = [()] * len(typed)
    for out_k, k in zip(dn.offset_dims, windows):
        out[out_k] = op_dims[k]
    new_sizes = tuple(block[k] if k in passing else s for k, s in enumerate(sizes))
    return ([op_dims, ((),) * len(indices.shape)], tuple(out),
            dict(p, slice_sizes=new_sizes))


def _scatter(eqn, typed, mesh):
    """An operand window dimension the updates cover whole passes its split through (the
    updates cut alike); the indices and the rest are whole."""
    dn = eqn.params["dimension_numbers"]
    operand, indices, updates = (v.aval for v in eqn.invars[:3])
    if dn.operand_batching_dims or len(eqn.invars) != 3:
        return None
    windows = [k for k in range(len(operand.shape)) if k not in dn.inserted_window_dims]
    op_dims, up_dims = [()] * len(operand.shape), [()] * len(updates.shape)
    for u, k in zip(dn.update_window_dims, windows):
        if updates.shape[u] == operand.shape[k] and k not in dn.scatter_dims_to_operand_dims:
            op_dims[k] = up_dims[u] = typed[k]
    op_dims, up_dims = tuple(op_dims), tuple(up_dims)
    return ([op_dims, ((),) * len(indices.shape), up_dims], op_dims, eqn.params)


def _fft(eqn, typed, mesh):
    n = len(eqn.params["fft_lengths"])
    ndim = len(typed)
    want = _keep(typed, set(range(ndim - n, ndim)))
    return [want], want, eqn.params


#: primitive name -> form(eqn, the result's typed dims, mesh)
FORMS: dict[str, Callable] = {
    "slice": _slice, "rev": _rev, "pad": _pad, "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice, "gather": _gather, "fft": _fft,
    **{name: _scatter for name in ("scatter", "scatter-add", "scatter-mul", "scatter-min",
                                   "scatter-max", "scatter_add", "scatter_mul", "scatter_min",
                                   "scatter_max")},
}


def dimensionwise_form(eqn, typed: tuple, mesh):
    """``(operand dims, [(result dims, (), None)], block params)`` of ``eqn`` computed on
    blocks split along the dimensions it does not touch, or None (see the module)."""
    form = FORMS.get(eqn.primitive.name)
    if form is None:
        return None
    found = form(eqn, typed, mesh)
    if found is None:
        return None
    want, out, params = found
    return want, [(out, (), None)], params

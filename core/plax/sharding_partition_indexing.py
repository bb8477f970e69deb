"""Per-block forms of the operations that work along some dimensions and leave the others
alone: slicing, padding, reversing, dynamic slices and updates, gathers, scatters, FFTs,
and factorizations and solves of batches of matrices (used by
:mod:`plax.sharding_partition`).

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
    (offset) dimension of the result: a split there passes through. A batching dimension
    (the operand's and the indices' paired, as ``vmap`` of a gather makes) is split alike on
    both; the indices are otherwise whole."""
    p = eqn.params
    dn, sizes = p["dimension_numbers"], p["slice_sizes"]
    operand, indices = eqn.invars[0].aval, eqn.invars[1].aval
    windows = [k for k in range(len(operand.shape)) if k not in dn.collapsed_slice_dims
               and k not in dn.operand_batching_dims]
    passing = {k for k in windows if k not in dn.start_index_map
               and sizes[k] == operand.shape[k]}
    op_dims = [()] * len(operand.shape)
    ix_dims = [()] * len(indices.shape)
    out = [()] * len(typed)
    for out_k, k in zip(dn.offset_dims, windows):
        if k in passing:
            op_dims[k] = out[out_k] = typed[out_k]
    # the result's other dimensions are the indices' (all but the index vector's), in order
    batch_pos = [k for k in range(len(typed)) if k not in dn.offset_dims]
    for o, i in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
        op_dims[o] = ix_dims[i] = out[batch_pos[i]] = typed[batch_pos[i]]
    op_dims, ix_dims = tuple(op_dims), tuple(ix_dims)
    block = local_shape(operand.shape, op_dims, mesh)
    if block is None:
        return None
    new_sizes = tuple(block[k] if k in passing else s for k, s in enumerate(sizes))
    return [op_dims, ix_dims], tuple(out), dict(p, slice_sizes=new_sizes)


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


def _matrices(eqn, typed, mesh):
    """A factorization or solve: each device takes its batch of matrices (the leading
    dimensions as its results' types split them), every matrix whole."""
    batch = typed[:len(typed) - 2] if eqn.primitive.name == "triangular_solve" else \
        typed[:len(eqn.invars[0].aval.shape) - 2]
    want = [batch + ((),) * (len(v.aval.shape) - len(batch)) for v in eqn.invars]
    outs = [batch + ((),) * (len(v.aval.shape) - len(batch)) for v in eqn.outvars]
    return want, outs if eqn.primitive.multiple_results else outs[0], eqn.params


#: primitive name -> form(eqn, the result's typed dims, mesh)
FORMS: dict[str, Callable] = {
    "slice": _slice, "rev": _rev, "pad": _pad, "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice, "gather": _gather, "fft": _fft,
    **{name: _matrices for name in ("cholesky", "lu", "qr", "eigh", "svd", "eig",
                                    "triangular_solve")},
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
    outs = out if isinstance(out, list) else [out]
    return want, [(o, (), None) for o in outs], params

"""``gather`` and the ``scatter`` family inside whole-program kernels and native loops.

A loop body that reads ``x[i]`` through ``jnp.take_along_axis`` or writes ``x.at[i].set(v)``
stages a ``gather`` or a ``scatter``. Without a native form the whole loop ran as a Python
loop around its compiled body (:data:`plax_numba.wholegen.NOT_NATIVE`). Here each is written
as loops over its index positions and windows, with XLA's semantics as the reference kernels
(``plax_numpy.impls_indexing``) compute them:

* ``gather``: each start clamped into the operand; with ``FILL_OR_DROP`` a window not wholly
  in bounds reads the fill value instead;
* ``scatter*``: a window not wholly in bounds is skipped (``FILL_OR_DROP`` and
  ``PROMISE_IN_BOUNDS``) or its start clamped (``CLIP``); the updates combine in the order of
  their index positions, so repeated indices add as ``np.add.at`` adds and the last ``set``
  wins -- the reference's bits.

What is left out raises :class:`~plax_numba.codegen.Unsupported` (and the caller keeps the
per-equation path): float16/bfloat16 arithmetic combiners and out-of-bounds fills (those
values are held as their bits), floating ``scatter-min``/``scatter-max`` (their signed zeros
and NaNs), and ``uint64`` indices (their conversion to a signed position).
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.lax.slicing import GatherScatterMode, gather_fill_value
from plax_numba import codegen
from plax_numba.codegen import Unsupported, constant

#: the mark of the line that copies an update's operand before writing into it (here and
#: ``dynamic_update_slice``'s): in a loop, ``plax_numba.wholegen._update_in_place`` drops
#: the copy where the operand is a carry nothing else reads afterwards
UPDATE = "  # update"

_COMBINE = {lax.scatter_p: None, lax.scatter_add_p: "{o} + {u}", lax.scatter_mul_p: "{o} * {u}",
            lax.scatter_min_p: "min({o}, {u})", lax.scatter_max_p: "max({o}, {u})"}


def _index_dtype_ok(aval) -> None:
    if np.dtype(aval.dtype) == np.uint64:
        raise Unsupported("gather/scatter with uint64 indices")


def _loops(gen, extents, lines: list, ind: str) -> tuple[list, str]:
    """Nested ``for`` lines over ``extents``; their variables and the innermost indent."""
    names = [gen.fresh("j") for _ in extents]
    for n, name in zip(extents, names):
        lines.append(f"{ind}for {name} in range({int(n)}):")
        ind += "    "
    return names, ind


def _at(array: str, index: list) -> str:
    return f"{array}[{', '.join(index)}]" if index else array


def _starts(gen, operand_shape, window, index_vec: list, index_map, batch_dims,
            batch_vars: dict, lines, ind, clamp: bool) -> tuple[list, str | None]:
    """Locals holding each operand dimension's start (moved inside the operand when
    ``clamp``), and the test that the window was wholly in bounds before any clamping."""
    starts, tests = [], []
    for d, (dim, size) in enumerate(zip(operand_shape, window)):
        s = gen.fresh("s")
        if d in index_map:
            lines.append(f"{ind}{s} = np.int64({index_vec[index_map.index(d)]})")
        elif d in batch_dims:
            lines.append(f"{ind}{s} = np.int64({batch_vars[d]})")
        else:
            starts.append("0")
            continue
        tests.append(f"{s} >= 0 and {s} <= {int(dim) - int(size)}")
        if clamp:
            ok = gen.fresh("ok")
            lines.append(f"{ind}{ok} = {tests.pop()}")
            tests.append(ok)
            lines.append(f"{ind}{s} = min(max({s}, 0), {int(dim) - int(size)})")
        starts.append(s)
    return starts, " and ".join(tests) or "True"


def _placed(rank: int, *groups) -> list:
    """Index variables placed at their axes: ``groups`` are ``(axes, variables)`` pairs."""
    out = [None] * rank
    for axes, names in groups:
        for a, v in zip(axes, names):
            out[a] = v
    return out


def _shifted(starts: list, offsets: dict) -> list:
    """Each dimension's start plus its window variable (``offsets``: dimension -> variable)."""
    return [s if d not in offsets else (offsets[d] if s == "0" else f"{s} + {offsets[d]}")
            for d, s in enumerate(starts)]


def gather(gen, eqn, ins, lines, ind):
    """``gather``: for each index position, its window read at its clamped start (or the
    fill value, ``FILL_OR_DROP``, where the window is not wholly in bounds)."""
    operand, indices = eqn.invars[0].aval, eqn.invars[1].aval
    out = eqn.outvars[0].aval
    p, dn = eqn.params, eqn.params["dimension_numbers"]
    _index_dtype_ok(indices)
    dtype = np.dtype(out.dtype)
    fill = p["mode"] == GatherScatterMode.FILL_OR_DROP
    if fill and dtype in codegen.LOW_FLOATS:
        raise Unsupported(f"gather filling out-of-bounds windows on {dtype}")
    window = tuple(int(n) for n in p["slice_sizes"])
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    kept = [d for d in range(len(operand.shape)) if d not in dropped]
    batch_positions = [a for a in range(len(out.shape)) if a not in dn.offset_dims]
    name = gen.fresh()
    if out.shape:
        lines.append(f"{ind}{name} = np.empty({_shape(out.shape)}, {codegen._storage(dtype)})")
    # loops over the batch positions, then the window
    bvars, inner = _loops(gen, [out.shape[a] for a in batch_positions], lines, ind)
    vec = [_at(ins[1], bvars + [str(k)]) for k in range(indices.shape[-1])]
    batch_vars = {od: bvars[idim] for od, idim in zip(dn.operand_batching_dims,
                                                     dn.start_indices_batching_dims)}
    starts, ok = _starts(gen, operand.shape, window, vec, list(dn.start_index_map),
                         set(dn.operand_batching_dims), batch_vars, lines, inner, clamp=True)
    wvars, body = _loops(gen, [out.shape[a] for a in dn.offset_dims], lines, inner)
    src = _shifted(starts, dict(zip(kept, wvars)))
    dst = _placed(len(out.shape), (batch_positions, bvars), (dn.offset_dims, wvars))
    value = _at(ins[0], src)
    if fill:
        value = f"({value} if {ok} else {constant(gather_fill_value(dtype, p['fill_value']), dtype)})"
    if not out.shape:  # a rank-0 value is a local (a float32 one for float16/bfloat16)
        if dtype in codegen.LOW_FLOATS:
            value = f"{codegen.LOW_FLOATS[dtype]}_value({value})"
        lines.append(f"{body}{name} = {value}")
        return [name]
    lines.append(f"{body}{name}[{', '.join(dst)}] = {value}")
    return [name]


def scatter(gen, eqn, ins, lines, ind):
    """``scatter``, ``scatter-add``/``-mul``/``-min``/``-max``: a copy of the operand, each
    index position's window of updates combined into it in order."""
    operand, indices, updates = (v.aval for v in eqn.invars)
    p, dn = eqn.params, eqn.params["dimension_numbers"]
    _index_dtype_ok(indices)
    dtype = np.dtype(operand.dtype)
    combine = _COMBINE[eqn.primitive]
    if combine is not None and dtype in codegen.LOW_FLOATS:
        raise Unsupported(f"{eqn.primitive.name} on {dtype}")
    if eqn.primitive in (lax.scatter_min_p, lax.scatter_max_p) and dtype.kind == "f":
        raise Unsupported(f"{eqn.primitive.name} on {dtype} (signed zeros, NaNs)")
    if not operand.shape:
        raise Unsupported("scatter into a scalar")
    dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    scatter_axes = [a for a in range(len(updates.shape)) if a not in dn.update_window_dims]
    extents = iter(updates.shape[a] for a in dn.update_window_dims)
    window = tuple(1 if d in dropped else int(next(extents)) for d in range(len(operand.shape)))
    name = gen.fresh()
    lines.append(f"{ind}{name} = {ins[0]}.copy(){UPDATE}")
    bvars, inner = _loops(gen, [updates.shape[a] for a in scatter_axes], lines, ind)
    vec = [_at(ins[1], bvars + [str(k)]) for k in range(indices.shape[-1])]
    batch_vars = {od: bvars[idim] for od, idim in zip(dn.operand_batching_dims,
                                                     dn.scatter_indices_batching_dims)}
    clamp = p["mode"] == GatherScatterMode.CLIP
    starts, ok = _starts(gen, operand.shape, window, vec, list(dn.scatter_dims_to_operand_dims),
                         set(dn.operand_batching_dims), batch_vars, lines, inner, clamp)
    if not clamp:
        lines.append(f"{inner}if {ok}:")
        inner += "    "
    wvars, body = _loops(gen, [updates.shape[a] for a in dn.update_window_dims], lines, inner)
    kept = [d for d in range(len(operand.shape)) if d not in dropped]
    dst = _shifted(starts, dict(zip(kept, wvars)))
    u = _at(ins[2], _placed(len(updates.shape), (scatter_axes, bvars),
                            (dn.update_window_dims, wvars)))
    if not updates.shape and dtype in codegen.LOW_FLOATS:  # (a float32 local: as its bits)
        u = f"{codegen.LOW_FLOATS[dtype]}_bits({u})"
    target = f"{name}[{', '.join(dst)}]"
    value = u if combine is None else combine.format(o=target, u=u)
    lines.append(f"{body}{target} = {value}")
    return [name]


def _shape(shape) -> str:
    return "(" + "".join(f"{int(n)}, " for n in shape) + ")"


HANDLERS = {lax.gather_p: gather, **{prim: scatter for prim in _COMBINE}}

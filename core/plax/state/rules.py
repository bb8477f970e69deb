"""Printing, JVP and batching rules of the ref primitives (:mod:`plax.state.primitives`).

Differentiation follows JAX: a ref made inside the differentiated function carries a
tangent ref (made even when its initial value has no tangent), reads and writes act on both,
and reverse mode discharges the staged tangent program before transposing it (see
:func:`plax.state.discharge.discharge_jaxpr`). Writing a differentiated value into a ref
from outside the function is JAX's error. Batching: a ref made from a batched value is
batched along its leading axis; writing a batched value into an unbatched ref is JAX's error.
"""
from __future__ import annotations

import numpy as np

from plax.core import registry
from plax.core.jaxpr import DropVar, Literal
from plax.core.pretty_print import pp_rules
from plax.state.primitives import (_check_write, addupdate_p, bind_new_ref, free_ref_p,
                                   freeze_p, get_p, making_level, new_ref_p, read_value, swap_p,
                                   written_value)
from plax.state.types import RefIndexer
from plax.transforms.batching import batch_of_unbatched
from plax.transforms.jvp import Zero, instantiate, jvp_of_zeros, linear_in_first_jvp
from plax.transforms.staging import LinearizeTrace, is_linearize_tracer

# ------------------------------------------------------------------ printing


def _atom(v, namer) -> str:
    if isinstance(v, Literal):  # an index literal prints without its type, as in JAX
        return namer(v).split(":")[0]
    return namer(v)


def _indexed(namer, ref, dyn, indexer: RefIndexer) -> str:
    return namer(ref) + indexer.pp_entries([_atom(d, namer) for d in dyn])


def _binder(namer, v) -> str:
    namer.unused.discard(v)  # named even when unused, as JAX prints a swap's old value
    return f"{namer(v)}:{v.aval.str_short()}"


def _pp_get(eqn, namer) -> str:
    ref, *dyn = eqn.invars
    return f"{_binder(namer, eqn.outvars[0])} <- {_indexed(namer, ref, dyn, eqn.params['indexer'])}"


def _pp_swap(eqn, namer) -> str:
    ref, val, *dyn = eqn.invars
    x_i = _indexed(namer, ref, dyn, eqn.params["indexer"])
    y = eqn.outvars[0]
    if isinstance(y, DropVar) or y in namer.top_unused:
        return f"{x_i} <- {namer(val)}"
    return f"{_binder(namer, y)}, {x_i} <- {x_i}, {namer(val)}"


def _pp_addupdate(eqn, namer) -> str:
    ref, val, *dyn = eqn.invars
    return f"{_indexed(namer, ref, dyn, eqn.params['indexer'])} += {namer(val)}"


pp_rules[get_p] = _pp_get
pp_rules[swap_p] = _pp_swap
pp_rules[addupdate_p] = _pp_addupdate


# ------------------------------------------------------------------ JVP

def _new_ref_jvp(primals, tangents, **params):
    (x,), (t,) = primals, tangents
    level = making_level()
    # always a tangent ref: a later write of a differentiated value must have one to go to.
    # In reverse mode the tangent program is staged (the level below this JVP level): the
    # tangent ref must be made there, or its reads would run now, on zeros.
    t = instantiate(t)
    return (bind_new_ref(x, level - 1, params),
            bind_new_ref(t, level - 1, params, skip_linearize=is_linearize_tracer(t)
                         or not _linearizing_below(level)))


def _linearizing_below(level: int) -> bool:
    from plax.core.trace import state
    return level > 0 and issubclass(state.stack[level - 1].trace_type, LinearizeTrace)


def _no_tangent_ref_error(ref) -> Exception:
    from plax.core.trace import get_aval
    return Exception("performing a set/swap operation with a differentiated value on a "
                     f"non-differentiated array reference of type {get_aval(ref)}. Move the "
                     "array reference to be an argument of the differentiated function?")


def _swap_jvp(primals, tangents, *, indexer):
    ref, val, *dyn = primals
    ref_t, val_t = tangents[0], tangents[1]
    out = swap_p.bind(ref, val, *dyn, indexer=indexer)
    if type(ref_t) is Zero and type(val_t) is Zero:
        return out, Zero.from_primal(out)
    if type(ref_t) is Zero:
        raise _no_tangent_ref_error(ref)
    return out, swap_p.bind(ref_t, instantiate(val_t), *dyn, indexer=indexer)


def _addupdate_jvp(primals, tangents, *, indexer):
    ref, val, *dyn = primals
    ref_t, val_t = tangents[0], tangents[1]
    addupdate_p.bind(ref, val, *dyn, indexer=indexer)
    if type(val_t) is not Zero:
        if type(ref_t) is Zero:
            raise _no_tangent_ref_error(ref)
        addupdate_p.bind(ref_t, val_t, *dyn, indexer=indexer)
    return [], []


def _free_ref_jvp(primals, tangents):
    free_ref_p.bind(primals[0])
    if type(tangents[0]) is not Zero:
        free_ref_p.bind(tangents[0])
    return [], []


registry.register_rule("jvp", free_ref_p)(_free_ref_jvp)
registry.register_rule("jvp", new_ref_p)(_new_ref_jvp)
jvp_of_zeros.add(new_ref_p)
registry.register_rule("jvp", freeze_p)(linear_in_first_jvp(freeze_p))
registry.register_rule("jvp", get_p)(linear_in_first_jvp(get_p))
registry.register_rule("jvp", swap_p)(_swap_jvp)
registry.register_rule("jvp", addupdate_p)(_addupdate_jvp)


# ------------------------------------------------------------------ batching
# A batched ref holds its batch along axis 0. An access with unbatched indices gets a leading
# full slice. An access with batched indices (``x_ref[i]``, ``i`` batched, as JAX allows) is
# one gather/scatter-style access: each batched index carries its batch along a new leading
# axis, and a batched ref is indexed by an iota along its batch axis as well (as JAX does),
# so the integer-array indices broadcast to (batch, *per-example index shape). NumPy's rule
# then places that block where the per-example access placed its index block, or in front;
# a transpose restores the per-example layout.

_SLICED = ("slice", "dslice")  # entries that keep their dimension in the result


def _batched_indexer(indexer: RefIndexer, size: int, axis: int = 0) -> RefIndexer:
    """``indexer`` on a ref batched along ``axis``: a full slice over the batch axis."""
    e, shape = indexer.entries, indexer.ref_shape
    return RefIndexer(e[:axis] + (("slice", 0, size, 1),) + e[axis:],
                      shape[:axis] + (size,) + shape[axis:])


def _adjacent(entries) -> bool:
    """Whether the integer-array indices (integers count among them when an array is
    present, as in NumPy) are adjacent."""
    at = [i for i, e in enumerate(entries) if e[0] in ("dyn", "int")]
    return not at or at[-1] - at[0] + 1 == len(at)


def _advanced_block_position(entries) -> int:
    """Where NumPy puts the broadcast shape of the integer-array indices: in place when they
    are adjacent, else in front."""
    if not _adjacent(entries):
        return 0
    first = next(i for i, e in enumerate(entries) if e[0] in ("dyn", "int"))
    return sum(1 for e in entries[:first] if e[0] in _SLICED)


class _Access:
    """An access ``ref[indexer]`` with batched operands, rewritten for the unbatched level:
    ``ref``, ``dyn``, ``indexer`` to bind with; the read comes out with its batch at
    ``out_dim`` (after :meth:`to_example_layout`); a written value is arranged by
    :meth:`from_example_layout`."""

    def __init__(self, ref, ref_dim, dyn, dyn_dims, indexer: RefIndexer, size: int):
        from plax.core.trace import get_aval
        from plax.transforms.batching import move_axis_to
        self.ref, self.perm = ref, None
        example_shapes = [tuple(s for k, s in enumerate(get_aval(d).shape) if k != dd)
                          for d, dd in zip(dyn, dyn_dims)]
        self.example_shape = indexer.result_shape(example_shapes)
        batched_index = any(dd is not None for dd in dyn_dims)
        entries = indexer.entries
        if not batched_index and (ref_dim is None or not any(example_shapes)
                                  or (ref_dim == 0 and _adjacent(entries))):
            # unbatched indices, a full slice over the ref's batch axis: the batch comes out
            # after the sliced dimensions before it (integer-array indices keep their place
            # when they are adjacent and the batch axis leads; else they take the general
            # path below, as they would jump in front of the batch axis)
            self.dyn, self.indexer = list(dyn), (indexer if ref_dim is None
                                                 else _batched_indexer(indexer, size, ref_dim))
            self.out_dim = None if ref_dim is None else sum(
                1 for e in entries[:ref_dim] if e[0] in _SLICED)
            return
        from plax import lax
        rank = max((len(s) for s in example_shapes), default=0)
        new_dyn = []
        for d, dd, shp in zip(dyn, dyn_dims, example_shapes):
            if dd is None:
                new_dyn.append(d)
            else:
                d = move_axis_to(d, dd, 0, size)
                new_dyn.append(lax.reshape(d, (size,) + (1,) * (rank - len(shp)) + shp))
        example_pos = _advanced_block_position(entries)
        if ref_dim is None:
            # the batch leads the index block, which stays where the example access put it
            self.dyn, self.indexer, self.out_dim = new_dyn, indexer, example_pos
            return
        # the ref's batch axis is indexed by an iota: one more integer-array index, whose
        # batch leads the broadcast index block
        iota = lax.broadcasted_iota(new_dyn[0].dtype if new_dyn else np.int32,
                                    (size,) + (1,) * rank, 0)
        n_before = sum(1 for e in entries[:ref_dim] if e[0] in ("dyn", "dslice"))
        self.dyn = new_dyn[:n_before] + [iota] + new_dyn[n_before:]
        entries = entries[:ref_dim] + (("dyn",),) + entries[ref_dim:]
        shape = indexer.ref_shape[:ref_dim] + (size,) + indexer.ref_shape[ref_dim:]
        self.indexer = RefIndexer(entries, shape)
        self.out_dim = 0
        # the result is (*sliced dims before p, batch, *index block, *other sliced dims); the
        # example access has its index block after example_pos sliced dims
        p = _advanced_block_position(entries)
        n_sliced = sum(1 for e in entries if e[0] in _SLICED)
        n_block = len(self.example_shape) - n_sliced
        sliced = list(range(p)) + list(range(p + 1 + n_block, 1 + n_block + n_sliced))
        block = list(range(p + 1, p + 1 + n_block))
        perm = [p] + sliced[:example_pos] + block + sliced[example_pos:]
        if perm != sorted(perm):
            self.perm = tuple(perm)

    def to_example_layout(self, out):
        from plax import lax
        return lax.transpose(out, self.perm) if self.perm else out

    def from_example_layout(self, val, val_dim, size: int):
        from plax import lax
        from plax.transforms.batching import move_axis_to
        val = move_axis_to(val, val_dim, self.out_dim, size)
        if self.perm:
            inverse = [0] * len(self.perm)
            for k, p in enumerate(self.perm):
                inverse[p] = k
            val = lax.transpose(val, tuple(inverse))
        return val


def _batched_slice_start(dyn_dims, indexer: RefIndexer) -> bool:
    """Whether a ``jax.ds(i, n)`` entry has its start ``i`` batched."""
    operand_entries = [e for e in indexer.entries if e[0] in ("dyn", "dslice")]
    return any(e[0] == "dslice" and dd is not None for dd, e in zip(dyn_dims, operand_entries))


# A dynamic slice whose start is batched (each example's window starts elsewhere) is not one
# rectangular access of the batched ref: the whole ref is read, each example's access is
# applied to it by the per-example read/write (vmapped: dynamic_slice batches as a gather),
# and, for a write, the whole ref is written back. JAX 0.10.2 refuses these
# (NotImplementedError: "No support for vmapping over nontrivial slices just yet"); plax
# takes them, because its scan batches a fori_loop's counter with the carry it runs beside.

def _whole(ref):
    from plax.core.trace import get_aval
    return get_p.bind(ref, indexer=RefIndexer.full(get_aval(ref).shape))


def _per_example(fun, vals, dims, size: int):
    from plax.transforms.vmap_api import vmap
    return vmap(fun, in_axes=tuple(dims), axis_size=size)(*vals)


def _get_whole_batch(vals, dims, indexer):
    ref, *dyn = vals
    size = _size_of(vals, dims)
    out = _per_example(lambda v, *d: read_value(v, indexer, d), [_whole(ref), *dyn],
                       dims, size)
    return out, 0


def _write_whole_batch(vals, dims, indexer, accumulate: bool):
    ref, val, *dyn = vals
    if dims[0] is None:
        raise _unbatched_ref_error(ref)
    size = _size_of(vals, dims)
    whole = _whole(ref)
    new = _per_example(lambda v, x, *d: written_value(v, indexer, d, x, accumulate),
                       [whole, val, *dyn], dims, size)
    from plax.transforms.batching import move_axis_to
    swap_p.bind(ref, move_axis_to(new, 0, dims[0], size),
                indexer=RefIndexer.full(whole.shape))
    if accumulate:
        return []
    return _per_example(lambda v, *d: read_value(v, indexer, d), [whole, *dyn],
                        [dims[0], *dims[2:]], size), 0


def _unbatched_ref_error(ref) -> Exception:
    from plax.core.trace import get_aval
    return Exception("performing a set/swap operation with vmapped value on an unbatched array "
                     f"reference of type {get_aval(ref)}. Move the array reference to be an "
                     "argument to the vmapped function?")


def _new_ref_batch(vals, dims, *, axis_data, **params):
    # always batched (along axis 0): batched values may be written into it later
    from plax.transforms.batching import move_axis_to
    (x,), (d,) = vals, dims
    return bind_new_ref(move_axis_to(x, d, 0, axis_data.size), making_level() - 1, params), 0


_new_ref_batch.needs_axis_data = True


def _freeze_batch(vals, dims):
    return freeze_p.bind(vals[0]), dims[0]


def _size_of(vals, dims) -> int:
    from plax.transforms.batching import axis_size
    return axis_size(vals, dims)


def _get_batch(vals, dims, *, indexer):
    if _batched_slice_start(dims[1:], indexer):
        return _get_whole_batch(vals, dims, indexer)
    ref, *dyn = vals
    access = _Access(ref, dims[0], dyn, dims[1:], indexer, _size_of(vals, dims))
    out = get_p.bind(access.ref, *access.dyn, indexer=access.indexer)
    return access.to_example_layout(out), access.out_dim


def _unbatched_aval(x, dim):
    from plax.core.trace import get_aval
    aval = get_aval(x)
    if dim is None:
        return aval
    return aval.update(shape=tuple(s for k, s in enumerate(aval.shape) if k != dim))


def _write_access(vals, dims, indexer, name: str):
    ref, val, *dyn = vals
    if dims[0] is None:
        raise _unbatched_ref_error(ref)
    # the example's shapes checked first, so a wrong one is the error it is without vmap
    _check_write(_unbatched_aval(ref, dims[0]), _unbatched_aval(val, dims[1]),
                 [_unbatched_aval(d, dd) for d, dd in zip(dyn, dims[2:])], indexer, name)
    size = _size_of(vals, dims)
    access = _Access(ref, dims[0], dyn, dims[2:], indexer, size)
    return access, access.from_example_layout(val, dims[1], size)


def _swap_batch(vals, dims, *, indexer):
    if _batched_slice_start(dims[2:], indexer):
        return _write_whole_batch(vals, dims, indexer, accumulate=False)
    access, val = _write_access(vals, dims, indexer, "swap")
    old = swap_p.bind(access.ref, val, *access.dyn, indexer=access.indexer)
    return access.to_example_layout(old), access.out_dim


def _addupdate_batch(vals, dims, *, indexer):
    if _batched_slice_start(dims[2:], indexer):
        return _write_whole_batch(vals, dims, indexer, accumulate=True), []
    access, val = _write_access(vals, dims, indexer, "addupdate")
    return addupdate_p.bind(access.ref, val, *access.dyn, indexer=access.indexer), []


registry.register_rule("batch", free_ref_p)(
    lambda vals, dims: (free_ref_p.bind(vals[0]), []))
registry.register_rule("batch", new_ref_p)(_new_ref_batch)
batch_of_unbatched.add(new_ref_p)
registry.register_rule("batch", freeze_p)(_freeze_batch)
registry.register_rule("batch", get_p)(_get_batch)
registry.register_rule("batch", swap_p)(_swap_batch)
registry.register_rule("batch", addupdate_p)(_addupdate_batch)

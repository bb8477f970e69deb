"""Printing, JVP and batching rules of the ref primitives (:mod:`plax.state.primitives`).

Differentiation follows JAX: a ref made inside the differentiated function carries a
tangent ref (made even when its initial value has no tangent), reads and writes act on both,
and reverse mode discharges the staged tangent program before transposing it (see
:func:`plax.state.discharge.discharge_jaxpr`). Writing a differentiated value into a ref
from outside the function is JAX's error. Batching: a ref made from a batched value is
batched along its leading axis; writing a batched value into an unbatched ref is JAX's error.
"""
from __future__ import annotations

from plax.core import registry
from plax.core.jaxpr import DropVar, Literal
from plax.core.pretty_print import pp_rules
from plax.state.primitives import (addupdate_p, bind_new_ref, freeze_p, get_p, making_level,
                                   new_ref_p, swap_p)
from plax.state.types import RefIndexer
from plax.transforms.batching import batch_of_unbatched
from plax.transforms.jvp import Zero, instantiate, jvp_of_zeros
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


def _freeze_jvp(primals, tangents):
    (ref,), (ref_t,) = primals, tangents
    out = freeze_p.bind(ref)
    return out, (Zero.from_primal(out) if type(ref_t) is Zero else freeze_p.bind(ref_t))


def _get_jvp(primals, tangents, *, indexer):
    ref, *dyn = primals
    out = get_p.bind(ref, *dyn, indexer=indexer)
    ref_t = tangents[0]
    if type(ref_t) is Zero:
        return out, Zero.from_primal(out)
    return out, get_p.bind(ref_t, *dyn, indexer=indexer)


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


registry.register_rule("jvp", new_ref_p)(_new_ref_jvp)
jvp_of_zeros.add(new_ref_p)
registry.register_rule("jvp", freeze_p)(_freeze_jvp)
registry.register_rule("jvp", get_p)(_get_jvp)
registry.register_rule("jvp", swap_p)(_swap_jvp)
registry.register_rule("jvp", addupdate_p)(_addupdate_jvp)


# ------------------------------------------------------------------ batching
# A batched ref holds its batch along axis 0; its index gets a leading full slice.

def _batched_indexer(indexer: RefIndexer, size: int) -> RefIndexer:
    entries = indexer.entries
    dyn_at = [i for i, e in enumerate(entries) if e[0] == "dyn"]
    if dyn_at and dyn_at[-1] - dyn_at[0] + 1 != len(dyn_at):
        # NumPy would move the indexed axes in front of the batch axis
        raise NotImplementedError("vmap of a ref read or write whose integer-array indices "
                                  "are not adjacent is not supported; index with adjacent "
                                  "arrays or read the whole ref first.")
    return RefIndexer((("slice", 0, size, 1),) + entries, (size,) + indexer.ref_shape)


def _check_ref_dims(ref_dim, dyn_dims):
    if ref_dim not in (0, None):
        raise NotImplementedError(f"vmap of a ref batched along axis {ref_dim}: plax batches "
                                  "refs along axis 0 (use in_axes=0 for ref arguments).")
    if any(d is not None for d in dyn_dims):
        raise NotImplementedError("vmap of a ref read or write with a batched index is not "
                                  "supported yet; read the whole ref (ref[...]) and index the "
                                  "array instead.")


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


def _get_batch(vals, dims, *, indexer):
    ref, *dyn = vals
    _check_ref_dims(dims[0], dims[1:])
    from plax.core.trace import get_aval
    size = get_aval(ref).shape[0]
    return get_p.bind(ref, *dyn, indexer=_batched_indexer(indexer, size)), 0


def _write_operands(vals, dims, indexer):
    from plax.core.trace import get_aval
    from plax.transforms.batching import move_axis_to
    ref, val, *dyn = vals
    if dims[0] is None:
        raise _unbatched_ref_error(ref)
    _check_ref_dims(dims[0], dims[2:])
    size = get_aval(ref).shape[0]
    return ref, move_axis_to(val, dims[1], 0, size), dyn, _batched_indexer(indexer, size)


def _swap_batch(vals, dims, *, indexer):
    ref, val, dyn, batched = _write_operands(vals, dims, indexer)
    return swap_p.bind(ref, val, *dyn, indexer=batched), 0


def _addupdate_batch(vals, dims, *, indexer):
    ref, val, dyn, batched = _write_operands(vals, dims, indexer)
    return addupdate_p.bind(ref, val, *dyn, indexer=batched), []


registry.register_rule("batch", new_ref_p)(_new_ref_batch)
batch_of_unbatched.add(new_ref_p)
registry.register_rule("batch", freeze_p)(_freeze_batch)
registry.register_rule("batch", get_p)(_get_batch)
registry.register_rule("batch", swap_p)(_swap_batch)
registry.register_rule("batch", addupdate_p)(_addupdate_batch)

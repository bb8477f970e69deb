"""The primitives of mutable array references, with their abstract eval and rules.

* ``new_ref`` (``x -> Ref``), ``freeze`` (``Ref -> x``);
* ``get`` (``ref, *idx -> ref[idx]``), printed ``y <- x[i]``;
* ``swap`` (``ref, v, *idx -> old ref[idx]``, writing ``v``), printed ``x[i] <- v`` when the
  old value is unused at the top level, else ``y, x[i] <- x[i], v``;
* ``addupdate`` (``ref, v, *idx -> ()``, adding ``v``), printed ``x[i] += v``.

The static part of the index is the ``indexer`` parameter (:class:`RefIndexer`); dynamic
integer indices are trailing operands. All are effectful: dead-code elimination keeps
them. Eagerly they act on :class:`~plax.state.types.Ref` objects (``impl`` rules); a
compiled program never sees them: ``jit`` discharges them first
(:mod:`plax.state.discharge`), so backends need no kernels of their own.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from plax.array import HOST_VALUE_TYPES, Array
from plax.core import effects, registry
from plax.core.primitive import Primitive
from plax.core.shaped_array import ShapedArray
from plax.core.trace import Tracer, state as trace_state
from plax.sharding import mesh_maybe_set as _mesh_maybe_set
from plax.state.types import AbstractRef, Ref, RefIndexer, is_ref_aval

new_ref_p = Primitive("new_ref")
freeze_p = Primitive("freeze")
get_p = Primitive("get")
swap_p = Primitive("swap")
addupdate_p = Primitive("addupdate", multiple_results=True)
empty_ref_p = Primitive("empty_ref")
free_ref_p = Primitive("free_ref", multiple_results=True)
ref_primitives = (new_ref_p, freeze_p, get_p, swap_p, addupdate_p, empty_ref_p, free_ref_p)
for _p in ref_primitives:
    effects.register_effectful(_p)


# ------------------------------------------------------------------ abstract eval

def _expect_ref(aval, what: str) -> None:
    if not is_ref_aval(aval):
        raise TypeError(f"{what} expects a mutable array reference (made by plax.new_ref), got "
                        f"a value of type {aval.str_short()}.")


@new_ref_p.def_abstract_eval
def _new_ref_abstract_eval(x, *, memory_space=None, kind=None):
    if is_ref_aval(x):
        raise TypeError(f"new_ref expects an array, got a mutable array reference of type "
                        f"{x}. Read it with ref[...] first.")
    return AbstractRef(ShapedArray(x.shape, x.dtype, x.weak_type, x.vma))


@empty_ref_p.def_abstract_eval
def _empty_ref_abstract_eval(*, ty, memory_space=None):
    return AbstractRef(ty)


@free_ref_p.def_abstract_eval
def _free_ref_abstract_eval(ref):
    _expect_ref(ref, "free_ref")
    return []


@freeze_p.def_abstract_eval
def _freeze_abstract_eval(ref):
    _expect_ref(ref, "freeze")
    return ref.inner_aval


def _read_aval(ref, dyn, indexer: RefIndexer) -> ShapedArray:
    _expect_ref(ref, "get")
    shape = indexer.result_shape([d.shape for d in dyn])
    # a read of an explicitly sharded ref is typed with its sharding (the index keeps every
    # split dimension whole: _check_sharded_index), as JAX types it: f32[8@X,4@Y]
    sharding = getattr(getattr(ref, "inner_aval", None), "sharding", None)
    parts = getattr(getattr(sharding, "spec", None), "partitions", ())
    if sharding is None or not any(p is not None for p in parts) or len(shape) != len(ref.shape):
        sharding = None
    return ShapedArray(shape, ref.dtype, ref.weak_type, sharding=sharding)


@get_p.def_abstract_eval
def _get_abstract_eval(ref, *dyn, indexer):
    return _read_aval(ref, dyn, indexer)


def _check_write(ref, val, dyn, indexer, name: str) -> ShapedArray:
    expected = _read_aval(ref, dyn, indexer)
    if val.shape != expected.shape:
        where = "()" if indexer.is_full else f"({indexer!r},)"
        raise ValueError(f"Invalid shape for `{name}`. Ref shape: {ref.shape}. Expected shape: "
                         f"{expected.shape}. Value shape: {val.shape}. Transforms: {where}. ")
    if val.dtype != ref.dtype:
        raise ValueError(f"Invalid dtype for `{name}`. Ref dtype: {ref.dtype}. Value dtype: "
                         f"{val.dtype}. ")
    return expected


@swap_p.def_abstract_eval
def _swap_abstract_eval(ref, val, *dyn, indexer):
    return _check_write(ref, val, dyn, indexer, "swap")


@addupdate_p.def_abstract_eval
def _addupdate_abstract_eval(ref, val, *dyn, indexer):
    _check_write(ref, val, dyn, indexer, "addupdate")
    return []


# ------------------------------------------------------------------ eager (impl) rules
# A Ref holds an immutable Array; a write replaces it with the updated array, computed by
# the ordinary array operations (so every backend runs them with the kernels it has).

def _window(indexer: RefIndexer, dyn):
    """``(starts, sizes, squeezed)`` when the index is a rectangular window (ints, traced
    scalars and unit-stride slices), else None. A window is read and written by
    ``dynamic_slice``/``dynamic_update_slice`` on the indices as they are, with no index
    arithmetic: so a discharged tangent program stays linear in all but its residuals,
    which reverse mode needs. Traced indices are clamped into range, not wrapped."""
    from plax.core.trace import get_aval
    if any(get_aval(d).shape for d in dyn) or any(
            (e[0] == "slice" and e[3] != 1) or (e[0] == "dslice" and e[2] != 1)
            for e in indexer.entries):
        return None
    it = iter(dyn)
    dt = get_aval(dyn[0]).dtype if dyn else np.dtype(np.int32)
    starts, sizes, squeezed = [], [], []
    for axis, (e, dim) in enumerate(zip(indexer.entries, indexer.ref_shape)):
        if e[0] == "slice":
            starts.append(np.asarray(e[1], dt)[()])
            sizes.append(e[2])
            continue
        if e[0] == "dslice":  # jax.ds(i, size): the window starts at the operand i
            starts.append(next(it))
            sizes.append(e[1])
            continue
        starts.append(np.asarray(e[1] % dim, dt)[()] if e[0] == "int" else next(it))
        sizes.append(1)
        squeezed.append(axis)
    return starts, sizes, squeezed


def _dslice_window(indexer: RefIndexer, dyn):
    """For an index holding strided or mixed ``jax.ds`` entries: ``(starts, sizes, inner,
    inner_dyn)``, the window ``dynamic_slice(value, starts, sizes)`` spanning each dynamic
    slice (other axes whole) and the index ``inner`` (each dynamic slice made a static one)
    that selects the access from that window; None without dynamic slices."""
    if all(e[0] != "dslice" for e in indexer.entries):
        return None
    from plax.core.trace import get_aval
    it = iter(dyn)
    dt = next(get_aval(d).dtype for d, e in zip(dyn, _operand_entries(indexer))
              if e[0] == "dslice")
    starts, sizes, entries, inner_dyn = [], [], [], []
    for e, dim in zip(indexer.entries, indexer.ref_shape):
        if e[0] == "dslice":
            extent = (e[1] - 1) * e[2] + 1 if e[1] else 0
            starts.append(next(it))
            sizes.append(extent)
            entries.append(("slice", 0, e[1], e[2]))
            continue
        if e[0] == "dyn":
            inner_dyn.append(next(it))
        starts.append(np.zeros((), dt)[()])
        sizes.append(dim)
        entries.append(e)
    return starts, sizes, RefIndexer(tuple(entries), tuple(sizes)), inner_dyn


def _operand_entries(indexer: RefIndexer) -> list:
    """The entries that take an operand, in operand order."""
    return [e for e in indexer.entries if e[0] in ("dyn", "dslice")]


def read_value(value, indexer: RefIndexer, dyn):
    """``value[idx]`` for an array ``value`` (also used by discharge)."""
    if indexer.is_full:
        return value
    window = _window(indexer, dyn)
    if window is None:
        spans = _dslice_window(indexer, dyn)
        if spans is not None:
            from plax import lax
            starts, sizes, inner, inner_dyn = spans
            sub = lax.dynamic_slice(value, starts, sizes, allow_negative_indices=False)
            return read_value(sub, inner, inner_dyn)
        return value[indexer.to_index(dyn)]
    from plax import lax
    starts, sizes, squeezed = window
    out = lax.dynamic_slice(value, starts, sizes, allow_negative_indices=False)
    return lax.squeeze(out, squeezed) if squeezed else out


def written_value(value, indexer: RefIndexer, dyn, val, accumulate: bool = False):
    """``value`` with ``val`` written (or added) at the index (also used by discharge)."""
    if indexer.is_full:
        return value + val if accumulate else val
    window = _window(indexer, dyn)
    if window is None:
        spans = _dslice_window(indexer, dyn)
        if spans is not None:
            from plax import lax
            starts, sizes, inner, inner_dyn = spans
            sub = lax.dynamic_slice(value, starts, sizes, allow_negative_indices=False)
            sub = written_value(sub, inner, inner_dyn, val, accumulate)
            return lax.slicing.dynamic_update_slice_unchecked(value, sub, starts, False)
        at = value.at[indexer.to_index(dyn)]
        return at.add(val) if accumulate else at.set(val)
    from plax import lax
    starts, sizes, _ = window
    if accumulate:
        val = read_value(value, indexer, dyn) + val
    update = lax.reshape(val, tuple(sizes))
    return lax.slicing.dynamic_update_slice_unchecked(value, update, starts, False)


def _new_ref_impl(x, *, memory_space=None, kind=None):
    return Ref(x)


def _freeze_impl(ref):
    return ref._value


def _get_impl(ref, *dyn, indexer):
    return read_value(ref._value, indexer, dyn)


def _swap_impl(ref, val, *dyn, indexer):
    old = ref._value
    ref._value = written_value(old, indexer, dyn, val)
    return read_value(old, indexer, dyn)


def _addupdate_impl(ref, val, *dyn, indexer):
    ref._value = written_value(ref._value, indexer, dyn, val, accumulate=True)
    return []


def _empty_ref_impl(*, ty, memory_space=None):
    # as JAX 0.10.2: an empty ref exists only inside a compiled program (jit)
    raise NotImplementedError("Evaluation rule for 'empty_ref' not implemented")


def _free_ref_impl(ref):
    return []  # eagerly a no-op, as in JAX (the Array it holds is freed when unreferenced)


for _p, _impl in ((empty_ref_p, _empty_ref_impl), (free_ref_p, _free_ref_impl),
                  (new_ref_p, _new_ref_impl), (freeze_p, _freeze_impl), (get_p, _get_impl),
                  (swap_p, _swap_impl), (addupdate_p, _addupdate_impl)):
    registry.register_rule("impl", _p)(_impl)


# ------------------------------------------------------------------ the user-facing operations

def _is_eager(ref) -> bool:
    return type(ref) is Ref and trace_state.depth == 0


def _as_value(x, ref_aval):
    """``x`` as an array of the ref's dtype: weakly typed values (Python scalars) are
    converted, as JAX does; a strongly typed value of another dtype is left for the
    abstract eval's error."""
    from plax import numpy as jnp
    from plax.core.trace import get_aval
    aval = get_aval(x)
    if is_ref_aval(aval):
        raise TypeError("Cannot write a mutable array reference into another; read it with "
                        "ref[...] first.")
    if not isinstance(x, Tracer):
        weak = aval.weak_type and aval.dtype.kind in "biufc"
        return jnp.asarray(x, ref_aval.dtype if weak else None)
    if aval.dtype != ref_aval.dtype and aval.weak_type or (
            aval.dtype == ref_aval.dtype and aval.weak_type != ref_aval.weak_type):
        from plax.lax.convert import convert_element_type
        x = convert_element_type(x, ref_aval.dtype)
    return x


def _committed_value(x):
    """The value a ref made off any mesh holds: JAX 0.10 commits it to a device, so a
    one-device Array that is not committed yet is copied onto the default device (where
    ``plax.default_device`` says now) and committed there; anything else as it is (a
    committed Array, a value over a mesh)."""
    if type(x) is Array and not x._committed:
        from plax.device import default_device
        device = default_device()
        return Array._new(x._buffer_on(device), x.aval, device, True)
    return x


def _onto_ref_device(name: str, ref, value):
    """``value`` (an Array) as the write ``name`` (``"swap"``, ``"addupdate"``) of the eager
    ``ref`` takes it: an uncommitted one copied onto the device the ref is committed to (a
    ref made off any mesh) and committed there, so the ref stays committed; one committed
    to another device is JAX's ValueError. Values of a ref over a mesh: as they are."""
    old = ref._value
    if type(old) is not Array or type(value) is not Array or not old._committed:
        return value
    device = old._device
    if value._device is device:
        return value if value._committed else Array._new(value._buf, value.aval, device, True)
    if value._committed:
        from plax.sharding_eager import incompatible_arguments
        raise incompatible_arguments((f"argument args[0] of {name}", ref.aval, device),
                                     (f"argument args[1] of {name}", value.aval,
                                      value._device))
    return Array._new(value._buffer_on(device), value.aval, device, True)


def _access_on_mesh(name: str, impl: Callable, ref, operands: Sequence, indexer):
    """``impl(ref, *operands, indexer=indexer)``: the eager ``get``, ``swap`` or
    ``addupdate`` (``name``) of the concrete ``ref``, with the value written (if any) and
    the indices as ``operands``, placed as JAX places it under the set mesh
    (:func:`plax.sharding_eager.ref_access`). Asked only when a mesh may be set
    (``mesh_maybe_set``): without one the callers run ``impl`` themselves, one call less."""
    from plax.sharding_eager import ref_access
    return ref_access(name, ref, operands, lambda *ops: impl(ref, *ops, indexer=indexer))


def ref_get(ref, idx=None):
    """``ref[idx]``: reads the indexed part of a mutable array reference.

    Args:
      ref: a Ref (or a traced one).
      idx: ints, slices, Ellipsis and integer arrays, as in NumPy (None: the whole ref).

    Returns:
      The array read.

    Example:
      >>> r = jax.new_ref(jnp.arange(3.0))
      >>> jax.ref.get(r, 1)
      Array(1., dtype=float32)
    """
    aval = _ref_aval(ref, "get")
    indexer, dyn = RefIndexer.parse(aval.shape, idx)
    _check_sharded_index(aval, indexer)
    if _is_eager(ref):
        if _mesh_maybe_set[0]:
            return _access_on_mesh("get", _get_impl, ref, dyn, indexer)
        return read_value(ref._value, indexer, dyn)
    return get_p.bind(ref, *dyn, indexer=indexer)


def ref_swap(ref, idx, value, _function_name: str = "ref_swap"):
    """Writes ``value`` into ``ref[idx]`` and returns what was there.

    Example:
      >>> r = jax.new_ref(jnp.zeros(2))
      >>> jax.ref.swap(r, 0, 5.0)
      Array(0., dtype=float32)
    """
    aval = _ref_aval(ref, "swap")
    indexer, dyn = RefIndexer.parse(aval.shape, idx)
    _check_sharded_index(aval, indexer)
    value = _as_value(value, aval)
    if _is_eager(ref) and not isinstance(value, Tracer):
        _check_write(aval, value.aval, [getattr(d, "aval", d) for d in dyn], indexer, "swap")
        value = _onto_ref_device("swap", ref, value)
        if _mesh_maybe_set[0]:
            return _access_on_mesh("swap", _swap_impl, ref, (value, *dyn), indexer)
        return _swap_impl(ref, value, *dyn, indexer=indexer)
    return swap_p.bind(ref, value, *dyn, indexer=indexer)


def ref_set(ref, idx, value) -> None:
    """``ref[idx] = value``.

    Example:
      >>> r = jax.new_ref(jnp.zeros(2))
      >>> jax.ref.set(r, 1, 3.0); r
      Ref([0., 3.], dtype=float32)
    """
    ref_swap(ref, idx, value, "ref_set")


def ref_addupdate(ref, idx, x) -> None:
    """Adds ``x`` into ``ref[idx]`` (one ``addupdate``; ``ref[idx] += x`` is a get and a
    swap instead, as in JAX).

    Example:
      >>> r = jax.new_ref(jnp.zeros(2))
      >>> jax.ref.addupdate(r, 0, 1.0); r
      Ref([1., 0.], dtype=float32)
    """
    aval = _ref_aval(ref, "addupdate")
    indexer, dyn = RefIndexer.parse(aval.shape, idx)
    _check_sharded_index(aval, indexer)
    x = _as_value(x, aval)
    if _is_eager(ref) and not isinstance(x, Tracer):
        _check_write(aval, x.aval, [getattr(d, "aval", d) for d in dyn], indexer, "addupdate")
        x = _onto_ref_device("addupdate", ref, x)
        if _mesh_maybe_set[0]:
            _access_on_mesh("addupdate", _addupdate_impl, ref, (x, *dyn), indexer)
        else:
            _addupdate_impl(ref, x, *dyn, indexer=indexer)
        return
    addupdate_p.bind(ref, x, *dyn, indexer=indexer)


def _check_sharded_index(aval: AbstractRef, indexer) -> None:
    """JAX 0.10.2's errors for indexing a ref whose value is explicitly sharded (typed
    ``Ref{f32[8@X,4]}``) other than by slices that keep every split dimension whole: the
    ref's type (its sharding) could not stay what it is.

    Raises:
      TypeError: an integer (or integer array) index on such a ref.
      ValueError: a slice that is not the whole of a split dimension.
    """
    sharding = getattr(aval.inner_aval, "sharding", None)
    spec = tuple(getattr(getattr(sharding, "spec", None), "partitions", ()))
    if not any(p is not None for p in spec):
        return
    entries = indexer.entries
    if any(e[0] != "slice" for e in entries):
        raise TypeError("sharded ref (array reference) can only be indexed by slices, not "
                        "integers")
    for i, (e, d, s) in enumerate(zip(entries, aval.shape, spec)):
        if s is not None and e[1:] != (0, d, 1):
            raise ValueError("sharded ref (array reference) can only be sliced along "
                             f"unsharded axes, but ref of shape {tuple(aval.shape)} was sliced "
                             f"on axis {i}, which is sharded like {s}")


def _ref_aval(ref, what: str) -> AbstractRef:
    aval = getattr(ref, "aval", None)
    if not is_ref_aval(aval):
        raise TypeError(f"{what} expects a mutable array reference (made by plax.new_ref), got "
                        f"{type(ref).__name__}"
                        + (f" of type {aval.str_short()}" if aval is not None else "") + ".")
    return aval


def new_ref(init_val: Any, *, memory_space: Any = None, kind: str | None = None) -> Ref:
    """A mutable array reference holding ``init_val``.

    Args:
      init_val: an array or scalar (the ref's shape and dtype are its own).
      memory_space: accepted for JAX compatibility (plax has one memory space per device).
      kind: accepted for JAX compatibility.

    Returns:
      A :class:`Ref` (a traced one under ``jit`` or another transform).

    Example:
      >>> r = jax.new_ref(jnp.zeros(3))
      >>> r[1] = 2.0
      >>> r
      Ref([0., 2., 0.], dtype=float32)
    """
    if isinstance(init_val, Ref) or is_ref_aval(getattr(init_val, "aval", None)):
        raise TypeError("new_ref expects an array, got a mutable array reference. Read it "
                        "with ref[...] (or plax.freeze) first.")
    if not isinstance(init_val, (Array, Tracer)):
        if not isinstance(init_val, HOST_VALUE_TYPES):
            raise TypeError(f"Error interpreting argument to new_ref as a JAX value. The "
                            f"problematic value is of type {type(init_val)} and was passed to "
                            "new_ref at position 0.\n")
        from plax.array import from_host
        init_val = from_host(init_val)
    if trace_state.depth == 0:
        if _mesh_maybe_set[0]:  # JAX 0.10 copies the value onto the set mesh
            from plax.sharding_eager import placed_ref_value
            init_val = placed_ref_value(init_val)
        return Ref(_committed_value(init_val))
    return bind_new_ref(init_val, len(trace_state.stack) - 1,
                        dict(memory_space=memory_space, kind=kind))


class _RefLevels(threading.local):
    """Per thread, as the trace stack whose levels they name: ``making``, the stack levels
    whose rules are processing a new_ref now (see bind_new_ref); ``inline``, the bodies
    evaluated inline by a rule (see inline_body)."""

    def __init__(self) -> None:
        self.making: list[int] = []
        self.inline: list[tuple[int, int]] = []


_levels = _RefLevels()


def bind_new_ref(x, level: int, params: dict, skip_linearize: bool = True):
    """Binds ``new_ref`` so that the transform at stack ``level`` processes it, and (through
    its rule, which calls this with the level below) every transform under it: a ref is
    made by every active transform, as in JAX, so one made inside ``vmap(grad(f))`` is
    batched and has a tangent ref. ``skip_linearize``: reverse mode's staging levels hold
    tangents only, so a primal ref passes them by."""
    from plax.transforms.staging import LinearizeTrace
    stack = trace_state.stack
    _inline_bodies = _levels.inline
    if _inline_bodies:
        # a body evaluated inline by a rule (see :func:`inline_body`): the transforms between
        # its inputs and the rule's own level are not transforming it (the one whose rule is
        # running among them), so they make no ref of it
        inputs_level, body_level = _inline_bodies[-1]
        if inputs_level < level < body_level:
            level = inputs_level
    while skip_linearize and level > 0 and issubclass(stack[level].trace_type, LinearizeTrace):
        level -= 1
    if level <= trace_state.dynamic.level:  # the staging (or eager) level takes it as it is
        return new_ref_p.bind(x, **params)
    if isinstance(x, Tracer) and x._trace.main.level > level:
        # a tangent staged by reverse mode above the level reached (vmap(grad(f)) making a
        # ref of its differentiated input): the linear program stages the ref, and the
        # transforms below make it when they run that program
        return new_ref_p.bind(x, **params)
    x = stack[level].with_cur_trace().full_raise(x)
    making = _levels.making
    making.append(level)
    try:
        return new_ref_p.bind(x, **params)
    finally:
        making.pop()


@contextlib.contextmanager
def inline_body(inputs: Sequence[Any]) -> Iterator[None]:
    """Marks a closed body (a ``jit`` body with refs) evaluated inline under a new transform
    by the rule of a lower one: a ``new_ref`` in it is made by the new transform and the
    transforms its ``inputs`` live in, not by the transform whose rule is running (its
    values there are already lowered; a ref made at its level would leak its tracers)."""
    levels = [x._trace.main.level for x in inputs if isinstance(x, Tracer)]
    inline = _levels.inline
    inline.append((max(levels, default=trace_state.dynamic.level), len(trace_state.stack)))
    try:
        yield
    finally:
        inline.pop()


def making_level() -> int:
    """The level processing the ``new_ref`` being bound (for its rules)."""
    making = _levels.making
    return making[-1] if making else len(trace_state.stack) - 1


def freeze(ref) -> Any:
    """The value of ``ref`` as an immutable Array (the ref should not be used afterwards).

    Example:
      >>> r = jax.new_ref(jnp.zeros(2)); r[0] = 1.0
      >>> jax.freeze(r)
      Array([1., 0.], dtype=float32)
    """
    if isinstance(ref, Array):  # JAX accepts an array and returns it
        return ref
    _ref_aval(ref, "freeze")
    if _is_eager(ref):
        return ref._value
    return freeze_p.bind(ref)


def empty_ref(ty: Any, memory_space: Any = None) -> Ref:
    """A mutable array reference of ``ty``'s shape and dtype whose contents are not set
    (JAX 0.10's ``jax.empty_ref``): write it before reading it.

    As in JAX, it exists only inside a compiled program (``jit``); made eagerly it raises
    ``NotImplementedError``. plax's compiled programs start it as zeros.

    Args:
      ty: an array or ``ShapeDtypeStruct`` giving the shape and dtype.
      memory_space: accepted for JAX compatibility (plax has one memory space per device).

    Returns:
      A traced :class:`Ref`.

    Example:
      >>> @jax.jit
      ... def f(x):
      ...     r = jax.empty_ref(jax.ShapeDtypeStruct((2,), jnp.float32))
      ...     r[...] = x
      ...     return r[...] * 2
      >>> f(jnp.ones(2))
      Array([2., 2.], dtype=float32)
    """
    if not (hasattr(ty, "shape") and hasattr(ty, "dtype")):
        raise TypeError(f"Cannot interpret value of type {type(ty)} as an abstract array; it "
                        "does not have a dtype attribute")
    from plax.transforms.staging import abstractify
    aval = abstractify(ty)
    aval = ShapedArray(aval.shape, aval.dtype, aval.weak_type)
    return empty_ref_p.bind(ty=aval, memory_space=memory_space)


def free_ref(ref) -> tuple:
    """Invalidates ``ref`` (JAX 0.10's ``jax.free_ref``): inside ``jit`` a later read or write
    of it is an error; eagerly it does nothing.

    Returns:
      ``()``, as JAX.

    Example:
      >>> r = jax.new_ref(jnp.zeros(2))
      >>> jax.free_ref(r)
      ()
    """
    _ref_aval(ref, "free_ref")
    free_ref_p.bind(ref)
    return ()

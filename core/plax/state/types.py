"""The types of mutable array references: :class:`AbstractRef` (what a transform knows of a
ref) and :class:`Ref` (a concrete one, holding an Array that writes replace), with the
indexer that ``ref[idx]`` is parsed into.

A ref is not an array: no arithmetic or ``jnp`` function accepts it. It is read with
``ref[idx]`` (the ``get`` primitive), written with ``ref[idx] = v`` (``swap``) and
accumulated into with ``ref.addupdate(v, idx)`` (``addupdate``); see
:mod:`plax.state.primitives` and docs/state.md.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from plax.core.shaped_array import ShapedArray
from plax.state.indexing import Slice


class AbstractRef(ShapedArray):
    """The abstract value of a mutable array reference: ``Ref{f32[3]}`` in jaxprs.

    It carries the ShapedArray of the value the ref holds (``inner_aval``) and exposes its
    shape and dtype, so shape logic reads it like an array's. It never equals a ShapedArray:
    a ref and an array are different types to every cache and rule.

    Example:
      >>> AbstractRef(ShapedArray((3,), np.dtype("float32"))).str_short()
      'Ref{f32[3]}'
    """

    __slots__ = ("inner_aval",)

    def __init__(self, inner_aval: ShapedArray):
        super().__init__(inner_aval.shape, inner_aval.dtype, inner_aval.weak_type,
                         inner_aval.vma)
        self.inner_aval = inner_aval
        self._hash = hash(("Ref", inner_aval))

    def __eq__(self, other) -> bool:
        return type(other) is AbstractRef and self.inner_aval == other.inner_aval

    def __hash__(self) -> int:
        return self._hash

    def update(self, shape=None, dtype=None, weak_type=None, vma=None,
               unreduced=None) -> "AbstractRef":
        return AbstractRef(self.inner_aval.update(shape, dtype, weak_type, vma, unreduced))

    def strip_weak_type(self) -> "AbstractRef":
        return AbstractRef(self.inner_aval.strip_weak_type())

    def str_short(self) -> str:
        return f"Ref{{{self.inner_aval.str_short()}}}"

    def __str__(self) -> str:
        # as jax.typeof prints it: full dtype names, no weak-type mark inside a ref, the
        # dimensions with their mesh axes (``Ref{float32[8@X,4@Y]}``) as the value's type has
        return f"Ref{{{self.dtype.name}[{self.inner_aval._dims_str()}]}}"

    __repr__ = __str__


def is_ref_aval(aval: Any) -> bool:
    """Whether ``aval`` is the type of a mutable array reference."""
    return type(aval) is AbstractRef


# ------------------------------------------------------------------ indexers

# One entry per dimension of the ref, after parsing:
#   ("slice", start, size, stride)   static slice (stride >= 1)
#   ("int", i)                       static integer (as written: printed as written)
#   ("dyn",)                         an integer scalar or array operand of the primitive
#   ("dslice", size, stride)         jax.ds(i, size, stride) with a traced start ``i``: an
#                                    integer scalar operand, a window of ``size`` elements
_FULL = "slice"


class RefIndexer:
    """The static part of ``ref[idx]``: one entry per dimension of the ref (see above),
    hashable, so it can be a primitive parameter. Dynamic indices (traced or array
    integers) are the primitive's trailing operands, in order.

    Example:
      >>> RefIndexer.parse((3, 4), (1, slice(1, None)))[0]
      RefIndexer[1,1:]
    """

    __slots__ = ("entries", "ref_shape", "_hash")

    def __init__(self, entries: tuple, ref_shape: tuple):
        self.entries = tuple(entries)
        self.ref_shape = tuple(ref_shape)
        self._hash = hash((self.entries, self.ref_shape))

    def __eq__(self, other) -> bool:
        return (type(other) is RefIndexer and self.entries == other.entries
                and self.ref_shape == other.ref_shape)

    def __hash__(self) -> int:
        return self._hash

    @property
    def is_full(self) -> bool:
        """Whether the indexer selects the whole ref (printed ``[...]``)."""
        return all(e[0] == _FULL and e[1] == 0 and e[2] == d and e[3] == 1
                   for e, d in zip(self.entries, self.ref_shape))

    @staticmethod
    def full(shape: tuple) -> "RefIndexer":
        return RefIndexer(tuple((_FULL, 0, d, 1) for d in shape), shape)

    @staticmethod
    def parse(shape: tuple, idx: Any) -> tuple["RefIndexer", list]:
        """``(indexer, dynamic_operands)`` for ``ref[idx]`` on a ref of ``shape``.

        Raises:
          ValueError: an integer out of bounds, too many indices, a negative slice step.
          TypeError: an index of a kind refs do not take (None, a float, a boolean mask).
        """
        from plax.core.trace import Tracer
        if idx is None or idx is Ellipsis or (isinstance(idx, tuple) and not idx):
            return RefIndexer.full(shape), []
        if not isinstance(idx, tuple):
            idx = (idx,)
        n_ell = sum(1 for i in idx if i is Ellipsis)
        if n_ell > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        n_real = len(idx) - n_ell
        if n_real > len(shape):
            raise ValueError(f"Too many indices for a ref of shape {shape}: got {len(idx)} "
                             f"indices {idx!r}.")
        if n_ell:
            k = idx.index(Ellipsis)
            idx = idx[:k] + (slice(None),) * (len(shape) - n_real) + idx[k + 1:]
        idx = idx + (slice(None),) * (len(shape) - len(idx))
        entries, dyn = [], []
        for i, dim in zip(idx, shape):
            if type(i) is Slice:
                entry = _slice_entry(i, dim)
                entries.append(entry)
                if entry[0] == "dslice":
                    dyn.append(_slice_start(i.start))
            elif isinstance(i, slice):
                start, stop, step = i.indices(dim)
                if step <= 0:
                    raise ValueError(f"Ref slices need a positive step, got {i!r}. Read the "
                                     "ref with ref[...] and index the array instead.")
                entries.append((_FULL, start, len(range(start, stop, step)), step))
            elif isinstance(i, (bool, np.bool_)) or i is None:
                raise TypeError(f"Refs are indexed by integers, slices, Ellipsis and integer "
                                f"arrays; got {i!r}. Read the ref with ref[...] and index the "
                                "array instead.")
            elif isinstance(i, (int, np.integer)):
                k = int(i)
                if not -dim <= k < dim:
                    raise ValueError(f"Out of bound indexer: idx={k}, dim={dim}.")
                entries.append(("int", k))
            else:
                if not isinstance(i, Tracer):
                    from plax import numpy as jnp
                    i = jnp.asarray(i)
                if i.dtype.kind == "b":
                    from plax.numpy.indexing import NonConcreteBooleanIndexError
                    raise NonConcreteBooleanIndexError(i.aval)
                if i.dtype.kind not in "iu":
                    raise TypeError(f"Ref indices must be integers, got an array of dtype "
                                    f"{i.dtype.name}.")
                entries.append(("dyn",))
                dyn.append(i)
        return RefIndexer(tuple(entries), shape), dyn

    def result_shape(self, dyn_shapes) -> tuple:
        """The shape ``ref[idx]`` has (NumPy's rules for integer-array indices)."""
        dyn_shapes = list(dyn_shapes)
        if all(e[0] != "dyn" for e in self.entries):  # static: no NumPy emulation needed
            return tuple(e[2] if e[0] == _FULL else e[1] for e in self.entries
                         if e[0] in (_FULL, "dslice"))
        it = iter(dyn_shapes)
        probe = []
        for e in self.entries:
            if e[0] == _FULL:
                probe.append(slice(e[1], e[1] + e[2] * e[3], e[3]) if e[2] else slice(0, 0))
            elif e[0] == "dslice":  # a window of e[1] elements, wherever it starts
                next(it)
                probe.append(slice(0, (e[1] - 1) * e[2] + 1, e[2]) if e[1] else slice(0, 0))
            elif e[0] == "int":
                probe.append(e[1])
            else:
                probe.append(np.zeros(next(it), np.intp))
        # a zero-stride view: no memory of the ref's size is touched
        return np.broadcast_to(np.empty((), np.bool_), self.ref_shape)[tuple(probe)].shape

    def to_index(self, dyn_values) -> tuple:
        """The NumPy-style index tuple (dynamic operands substituted) for array indexing."""
        it = iter(dyn_values)
        out = []
        for e in self.entries:
            if e[0] == _FULL:
                out.append(slice(e[1], e[1] + e[2] * e[3], e[3]) if e[2] else slice(0, 0))
            elif e[0] == "int":
                out.append(e[1])
            else:
                out.append(next(it))
        return tuple(out)

    def pp_entries(self, dyn_names) -> str:
        """The index as JAX prints it: ``[...]``, ``[1,1:]``, ``[b,:]``."""
        if self.is_full:
            return "[...]"
        it = iter(dyn_names)
        parts = []
        for e, dim in zip(self.entries, self.ref_shape):
            if e[0] == _FULL:
                # JAX prints a slice as start:start+size (its stride not shown)
                start, end = e[1], e[1] + e[2]
                parts.append(f"{start if start else ''}:{end if end != dim else ''}")
            elif e[0] == "int":
                parts.append(str(e[1]))
            elif e[0] == "dslice":  # as JAX prints it: i:i+size (its stride not shown)
                start = next(it)
                parts.append(f"{start}:{start}+{e[1]}")
            else:
                parts.append(next(it))
        return "[" + ",".join(parts) + "]"

    def __repr__(self) -> str:
        return "RefIndexer" + self.pp_entries(["?"] * len(self.entries))


def _slice_entry(s: Slice, dim: int) -> tuple:
    """The indexer entry of ``jax.ds(...)`` on an axis of ``dim``: a static slice when its
    start is a Python integer, else a ``dslice`` (its start an operand)."""
    if s.is_dynamic_size:
        raise TypeError(f"The size of a dynamic slice must be a static integer, got "
                        f"{s.size!r}.")
    size, stride = int(s.size), int(s.stride)
    extent = (size - 1) * stride + 1 if size else 0
    if stride < 1:
        raise ValueError(f"Ref slices need a positive stride, got {s!r}.")
    if not s.is_dynamic_start:
        start = int(s.start)
        if not 0 <= start <= dim - extent:
            raise ValueError(f"Out of bound slice: start={start}, size={size}, "
                             f"stride={stride}, dim={dim}.")
        return (_FULL, start, size, stride)
    if extent > dim:
        raise ValueError(f"Out of bound slice: start={s.start}, size={size}, stride={stride}, "
                         f"dim={dim}.")
    return ("dslice", size, stride)


def _slice_start(start):
    from plax.core.trace import Tracer
    if not isinstance(start, Tracer):
        from plax import numpy as jnp
        start = jnp.asarray(start)
    if start.shape != () or start.dtype.kind not in "iu":
        raise TypeError(f"The start of a dynamic slice must be an integer scalar, got a value "
                        f"of type {start.aval.str_short()}.")
    return start


# ------------------------------------------------------------------ the concrete ref

class Ref:
    """A mutable array reference: ``plax.new_ref(x)`` makes one.

    ``ref[idx]`` reads, ``ref[idx] = v`` writes, ``ref[idx] += v`` reads then writes, and
    ``ref.addupdate(v, idx)`` accumulates. A ref may be passed to or closed over by ``jit``,
    ``scan``, ``fori_loop``, ``while_loop`` and ``cond``; their bodies' writes are visible
    afterwards. ``plax.freeze(ref)`` reads its value as an immutable Array.

    Example:
      >>> r = jax.new_ref(jnp.zeros(3))
      >>> r[1] = 2.0
      >>> r
      Ref([0., 2., 0.], dtype=float32)
    """

    __slots__ = ("_value", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, value):
        self._value = value  # an Array; each write replaces it

    @property
    def aval(self) -> AbstractRef:
        return AbstractRef(self._value.aval)

    shape = property(lambda self: self._value.shape)
    dtype = property(lambda self: self._value.dtype)
    ndim = property(lambda self: self._value.ndim)
    size = property(lambda self: self._value.size)
    weak_type = property(lambda self: self._value.aval.weak_type)
    sharding = property(lambda self: self._value.sharding)
    #: whether the value is committed to its device(s): JAX 0.10 commits every ref made
    #: eagerly (off any mesh to one device), so its reads are committed arrays
    committed = property(lambda self: self._value.committed)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __getitem__(self, idx):
        from plax.state import primitives
        return primitives.ref_get(self, idx)

    def __setitem__(self, idx, value) -> None:
        from plax.state import primitives
        primitives.ref_set(self, idx, value)

    def addupdate(self, x, idx=()) -> None:
        """Adds ``x`` into ``self[idx]`` (the ``addupdate`` primitive)."""
        from plax.state import primitives
        primitives.ref_addupdate(self, idx, x)

    def __repr__(self) -> str:
        text = repr(self._value)
        return "Ref" + text[text.index("("):]

    __str__ = __repr__

    def __iter__(self):
        raise TypeError("A Ref is not iterable: read it with ref[...] first.")

    def __array__(self, dtype=None, copy=None):
        raise TypeError("A Ref cannot be converted to a NumPy array; read it with "
                        "plax.freeze(ref) or ref[...] first.")

    def __bool__(self):
        raise TypeError("The truth value of a Ref is undefined; read it with ref[...] first.")

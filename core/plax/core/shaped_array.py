"""ShapedArray: the abstract value of an array (shape, dtype, weak_type, varying axes)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

_short_names = {
    "bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64",
    "complex64": "c64", "complex128": "c128",
}


def short_dtype_name(dtype: np.dtype) -> str:
    """``float32`` -> ``f32``: the dtype spelling used in jaxprs."""
    if getattr(dtype, "names", None) == ("float0",):
        return "float0"
    return _short_names.get(dtype.name, dtype.name)


_NO_AXES: frozenset = frozenset()


def _as_dtype(dtype) -> np.dtype:
    # as JAX's: NumPy's reading, not canonicalized (float is float64 without x64 too)
    try:
        return np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"ShapedArray takes a dtype (np.float32, jnp.int32, 'float32'...), "
                        f"got {dtype!r}") from e


class ShapedArray:
    """What a transform knows of an array without its values: shape, dtype and weak type.

    Instances are immutable and hashable (the jit cache keys on them), and equal when
    their shape, dtype, weak type, sharding and varying axes are.

    Inside ``shard_map(check_vma=True)`` a value also records ``vma``, the mesh axes along
    which it may differ between devices (see :mod:`plax.core.varying`), and ``unreduced``,
    those along which its devices hold partial sums of it (JAX's ``mat.unreduced``: the
    block of an argument whose in_spec has ``unreduced=`` axes, printed ``{V:X, U:Y}``).

    A value of an explicitly sharded array also records ``sharding``, its
    :class:`plax.sharding.NamedSharding` (JAX 0.10's sharding in types, printed as
    ``f32[8@X,4]``; see :mod:`plax.sharding_types`). As in JAX 0.10 both are part of the
    type: avals that differ in them are unequal (so the jit caches tell them apart), though
    they hash alike.

    Example:
      >>> ShapedArray((2, 3), np.dtype("float32")).str_short()
      'f32[2,3]'
    """

    __slots__ = ("shape", "dtype", "weak_type", "vma", "sharding", "unreduced", "_hash")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, weak_type: bool = False,
                 vma: frozenset = _NO_AXES, sharding: Any = None,
                 unreduced: frozenset = _NO_AXES):
        self.shape = tuple(shape)
        if isinstance(dtype, (type, str)):  # a scalar type (np.float32, jnp.int8) or a name,
            dtype = _as_dtype(dtype)          # as JAX's ShapedArray takes them
        self.dtype = dtype
        self.weak_type = bool(weak_type)
        self.vma = vma
        self.sharding = sharding
        self.unreduced = unreduced
        self._hash = hash((self.shape, dtype, self.weak_type))

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    def __eq__(self, other) -> bool:
        # As JAX 0.10's (interned) ShapedArray: the sharding and the varying axes are part
        # of the type. The hash leaves them out (equal avals still hash equal): it stays a
        # constant computed once, and avals differing only in them are rare.
        return (type(other) is ShapedArray and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type
                and (self.sharding is other.sharding or self.sharding == other.sharding)
                and (self.vma is other.vma or self.vma == other.vma)
                and (self.unreduced is other.unreduced or self.unreduced == other.unreduced))

    def __hash__(self) -> int:
        return self._hash

    @property
    def manual_axis_type(self) -> Any:
        """The ``shard_map`` mesh axes this value varies over, as JAX 0.10 spells them: a
        :class:`plax.sharding.ManualAxisType` (plax types varying axes only).

        Example:
          >>> jax.typeof(jnp.ones(3)).manual_axis_type.varying
          frozenset()
        """
        from plax.sharding_abstract import ManualAxisType
        return ManualAxisType(varying=self.vma, unreduced=self.unreduced)

    def update(self, shape=None, dtype=None, weak_type=None, vma=None,
               unreduced=None) -> "ShapedArray":
        """A copy with the given fields replaced (the sharding is not kept)."""
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type,
                           self.vma if vma is None else vma, None,
                           self.unreduced if unreduced is None else unreduced)

    def strip_weak_type(self) -> "ShapedArray":
        return self if not self.weak_type else ShapedArray(self.shape, self.dtype, False,
                                                           self.vma, None, self.unreduced)

    def str_short(self) -> str:
        return f"{short_dtype_name(self.dtype)}[{self._dims_str()}]{self._vma_str()}"

    def _vma_str(self) -> str:
        # as JAX writes it: ``{V:i}``, ``{V:(i,j)}`` for several axes (plax's vma is a set:
        # in name order, which is the mesh's order in the usual meshes), with the unreduced
        # axes of a shard_map block after them (``{V:X, U:Y}``); then the sharding's
        # unreduced and reduced axes (``{U:Y}``, ``{R:Y}``)
        parts = []
        for tag, axes in (("V", self.vma), ("U", self.unreduced)):
            if axes:
                names = ",".join(sorted(map(str, axes)))
                parts.append(f"{tag}:" + (names if len(axes) == 1 else f"({names})"))
        out = "{" + ", ".join(parts) + "}" if parts else ""
        if self.sharding is not None:
            from plax.sharding_types import unreduced_str
            out += unreduced_str(self.sharding)
        return out

    def __repr__(self) -> str:
        # as JAX prints it (``ShapedArray(float32[4@X,4])``; jaxprs use the short names)
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.dtype.name}[{self._dims_str()}]{self._vma_str()}{weak})"

    def __str__(self) -> str:
        """The type as ``jax.typeof(x)`` prints it: ``float32[8,4]``, ``~float32[]`` for a weak
        type, ``key<fry>[3]`` for typed keys, ``float32[8@X,4]`` for an explicitly sharded
        value (dimension 0 split over mesh axis ``X``)."""
        return (f"{'~' if self.weak_type else ''}{self.dtype.name}[{self._dims_str()}]"
                f"{self._vma_str()}")

    def _dims_str(self) -> str:
        if self.sharding is not None:
            from plax.sharding_types import sharded_dims_str
            return sharded_dims_str(self.shape, self.sharding)
        return ",".join(map(str, self.shape))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]


class ShapeDtypeStruct:
    """A stand-in with ``shape`` and ``dtype`` (and ``weak_type``, ``sharding``), for
    ``eval_shape`` and ``jit(...).lower``.

    ``sharding`` may be a :class:`~plax.sharding.Sharding` or a ``PartitionSpec``; as in
    JAX, a PartitionSpec is read against the current mesh (``plax.set_mesh``) whenever
    ``.sharding`` is asked for, and printed as the NamedSharding it gives.

    Example:
      >>> ShapeDtypeStruct((3,), jnp.float32)
      ShapeDtypeStruct(shape=(3,), dtype=float32)
    """

    __slots__ = ("shape", "dtype", "weak_type", "_sharding")

    def __init__(self, shape, dtype, weak_type: bool = False, sharding=None):
        from plax import dtypes
        if dtype is None:
            raise ValueError("ShapeDtypeStruct: dtype must be specified.")
        self.shape = tuple(shape)
        self.dtype = dtypes.to_numpy_dtype(dtype)
        self.weak_type = weak_type
        if sharding is not None:
            from plax.sharding import PartitionSpec, Sharding
            if not isinstance(sharding, (Sharding, PartitionSpec)):
                raise ValueError(
                    "sharding should be an instance of `jax.sharding.Sharding`, "
                    "`jax.sharding.PartitionSpec` or `jax.experimental.layout.Format`. Got "
                    f"{sharding} of type {type(sharding)}.")
        self._sharding = sharding

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    @property
    def sharding(self):
        """The sharding given (a PartitionSpec as a NamedSharding on the current mesh), or
        None."""
        from plax.sharding import PartitionSpec
        if not isinstance(self._sharding, PartitionSpec):
            return self._sharding
        from plax.sharding import NamedSharding, _mesh_of_abstract, get_mesh
        mesh = _mesh_of_abstract(get_mesh())
        if mesh is None or mesh.empty:
            raise TypeError("When specifying PartitionSpec to `ShapeDtypeStruct`, the context "
                            "mesh cannot be empty. Please use `jax.set_mesh` to set the mesh "
                            "context.")
        return NamedSharding(mesh, self._sharding)

    def __eq__(self, other) -> bool:
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type
                and self.sharding == other.sharding)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self) -> str:
        sharding = self.sharding
        sh = f", sharding={sharding}" if sharding is not None else ""
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{sh}{weak})"

    __str__ = __repr__

    @classmethod
    def like(cls, x) -> "ShapeDtypeStruct":
        """The shape, dtype, weak type and sharding of ``x`` (an array, a tracer, a scalar
        or another ShapeDtypeStruct).

        Example:
          >>> ShapeDtypeStruct.like(1.0)
          ShapeDtypeStruct(shape=(), dtype=float32, weak_type=True)
        """
        if isinstance(x, ShapeDtypeStruct):
            return cls(x.shape, x.dtype, x.weak_type, x._sharding)
        from plax.core.trace import get_aval
        aval = get_aval(x)
        # as JAX: a committed array's sharding (an uncommitted one has none to keep)
        sharding = (getattr(x, "sharding", None) if hasattr(x, "_device")
                    and getattr(x, "_committed", True) else None)
        return cls(aval.shape, aval.dtype, aval.weak_type, sharding)

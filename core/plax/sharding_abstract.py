"""Device-free mesh descriptions of JAX 0.10's ``jax.sharding``: :class:`AbstractDevice`
(the kind of device an abstract mesh stands for), :class:`ManualAxisType` (which manual mesh
axes a value varies over, is unreduced or reduced over) and :func:`use_abstract_mesh` (an
abstract mesh made current for tracing, without devices).

plax's :func:`plax.sharding.get_abstract_mesh` answers the innermost ``use_abstract_mesh``
first, then the mesh of ``set_mesh``/``use_mesh``.
"""
from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Any


@dataclasses.dataclass(frozen=True)
class AbstractDevice:
    """The kind of device an :class:`~plax.sharding.AbstractMesh` stands for, without a
    device (``jax.sharding.AbstractDevice``).

    Args:
      device_kind: the device kind, as ``Device.device_kind`` says it (``"cpu"``).
      num_cores: cores per device, or None.
      platform: the platform (``"cpu"``, ``"gpu"``).

    Example:
      >>> AbstractDevice(device_kind="cpu", num_cores=None, platform="cpu")
      AbstractDevice(device_kind=cpu, num_cores=None, platform=cpu)
    """

    device_kind: str
    num_cores: int | None
    platform: str

    def __repr__(self) -> str:
        return f"AbstractDevice({self._repr()})"

    def _repr(self) -> str:
        # Also the tail of an AbstractMesh's repr, as JAX prints it.
        return (f"device_kind={self.device_kind}, num_cores={self.num_cores}, "
                f"platform={self.platform}")


# Interned: equal ManualAxisTypes are the same object, as in JAX (compared by identity).
_INTERNED: "weakref.WeakValueDictionary[tuple, ManualAxisType]" = weakref.WeakValueDictionary()
_INTERN_LOCK = threading.Lock()


class ManualAxisType:
    """Which manual mesh axes (inside ``shard_map``) a value is varying, unreduced or
    reduced over (``jax.sharding.ManualAxisType``). Immutable and interned: two equal ones
    are the same object.

    Args:
      varying: axes whose shards hold different values.
      unreduced: axes whose shards hold partial sums not yet added.
      reduced: axes whose shards hold the same, already reduced value.

    Raises:
      ValueError: an axis is both varying and unreduced, or both varying and reduced.

    Example:
      >>> ManualAxisType(varying={"x"})
      ManualAxisType(varying=frozenset({'x'}), unreduced=frozenset(), reduced=frozenset())
    """

    __slots__ = ("varying", "unreduced", "reduced", "__weakref__")

    def __new__(cls, *, varying=frozenset(), unreduced=frozenset(), reduced=frozenset()):
        varying, unreduced, reduced = frozenset(varying), frozenset(unreduced), frozenset(reduced)
        if varying & unreduced:
            raise ValueError("varying and unreduced cannot have common mesh axes. Got "
                             f"varying={set(varying)} and unreduced={set(unreduced)}")
        if varying & reduced:
            raise ValueError("varying and reduced cannot have common mesh axes. Got "
                             f"varying={set(varying)} and reduced={set(reduced)}")
        key = (varying, unreduced, reduced)
        with _INTERN_LOCK:
            obj = _INTERNED.get(key)
            if obj is None:
                obj = object.__new__(cls)
                for name, value in zip(cls.__slots__, key):
                    object.__setattr__(obj, name, value)
                _INTERNED[key] = obj
        return obj

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ManualAxisType is immutable: use .update({name}=...)")

    def __repr__(self) -> str:
        return (f"ManualAxisType(varying={self.varying}, unreduced={self.unreduced}, "
                f"reduced={self.reduced})")

    def __reduce__(self):
        return _make_manual_axis_type, (self.varying, self.unreduced, self.reduced)

    def update(self, **kwargs) -> "ManualAxisType":
        """This type with the given fields (``varying``, ``unreduced``, ``reduced``) replaced."""
        fields = {"varying": self.varying, "unreduced": self.unreduced, "reduced": self.reduced}
        fields.update(kwargs)
        return ManualAxisType(**fields)

    def to_ct_mat(self) -> "ManualAxisType":
        """The type of a cotangent of a value of this type: unreduced and reduced swap."""
        return self.update(unreduced=self.reduced, reduced=self.unreduced)

    @property
    def empty(self) -> bool:
        """Whether no axis is named."""
        return not (self.varying or self.unreduced or self.reduced)

    @property
    def vur(self) -> frozenset:
        """Every axis named: varying, unreduced or reduced."""
        return self.varying | self.unreduced | self.reduced

    def invarying(self, mesh) -> frozenset:
        """The manual axes of ``mesh`` this type does not name."""
        return frozenset(mesh.manual_axes) - self.vur


def _make_manual_axis_type(varying, unreduced, reduced) -> ManualAxisType:
    return ManualAxisType(varying=varying, unreduced=unreduced, reduced=reduced)


class _AbstractMeshState(threading.local):
    def __init__(self):
        self.stack: list = []


_state = _AbstractMeshState()


def current_abstract_mesh():
    """The innermost abstract mesh of :func:`use_abstract_mesh`, or None."""
    stack = _state.stack
    return stack[-1] if stack else None


class use_abstract_mesh:
    """Makes an :class:`~plax.sharding.AbstractMesh` current in a ``with`` block
    (``jax.sharding.use_abstract_mesh``): :func:`~plax.sharding.get_abstract_mesh` returns it,
    and sharding types are checked against it, without devices.

    Args:
      mesh: an :class:`~plax.sharding.AbstractMesh`.

    Raises:
      ValueError: ``mesh`` is not an AbstractMesh, or (on entry) its size differs from a
        non-empty current mesh's, as in JAX.

    Example:
      >>> from plax.sharding import AbstractMesh, get_abstract_mesh
      >>> with use_abstract_mesh(AbstractMesh((2,), ("x",))):
      ...     get_abstract_mesh()
      AbstractMesh('x': 2, axis_types=(Auto,))
    """

    __slots__ = ("mesh", "prev")

    def __init__(self, mesh):
        from plax.sharding import AbstractMesh
        if not isinstance(mesh, AbstractMesh):
            raise ValueError("Expected mesh of type `plax.sharding.AbstractMesh`. Got type: "
                             f"{type(mesh)}")
        self.mesh = mesh

    def __enter__(self) -> None:
        from plax.sharding import get_abstract_mesh
        prev = get_abstract_mesh()
        if not prev.empty and not self.mesh.empty and prev.size != self.mesh.size:
            raise ValueError("use_abstract_mesh cannot change the size of the mesh. Got new "
                             f"mesh: {self.mesh} with size={self.mesh.size} and prev mesh: "
                             f"{prev} with size={prev.size}")
        self.prev = prev
        _state.stack.append(self.mesh)

    def __exit__(self, *exc) -> bool:
        _state.stack.pop()
        return False


__all__ = ["AbstractDevice", "ManualAxisType", "use_abstract_mesh"]

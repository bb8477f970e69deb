"""Shardings: which part of an array each device holds.

A :class:`Sharding` maps each of its devices to the *index* of the global array that device
holds: a tuple with one entry per dimension, each a ``slice`` (a block of that dimension) or
an ``int`` (one position; that dimension is then dropped from the shard, as pmap's stacked
axis is). A plain :class:`plax.Array` lives on one device (:class:`SingleDeviceSharding`);
an array built with :func:`plax.make_array_from_single_device_arrays`,
:func:`plax.make_array_from_callback` or ``plax.device_put(x, sharding)`` holds one buffer
per device of its sharding.

* :class:`SingleDeviceSharding` -- the whole array on one device.
* :class:`NamedSharding` -- a :class:`Mesh` of devices with named axes, and a
  :class:`PartitionSpec` saying which mesh axes split each array dimension.
* :class:`IndexMapSharding` -- an explicit ``{device: index}`` map, for layouts the other two
  do not describe (a multi-device plugin's pmap sharding: device ``i`` holds ``x[i]``).

plax computes with the shards on one device at a time: until a multi-device plugin (pmap,
shard_map) is installed, an operation on an array held by several devices first gathers it
onto its first device (see docs/plugins_and_devices.md). These classes describe placement;
the plugin gives meshes their behaviour (``with mesh:``, sharded jit).

JAX 0.10's sharding-in-types names are here too: :class:`AxisType` (each mesh axis is
``Auto``, ``Explicit`` or ``Manual``), :func:`reshard`, :func:`auto_axes` and
:func:`explicit_axes` (and ``plax.lax.with_sharding_constraint``). plax does not partition
``jit``: eagerly these place arrays as JAX does; under a transformation they change nothing.

Example:
  >>> mesh = Mesh(np.array(plax.devices()[:1]), ("x",))
  >>> NamedSharding(mesh, PartitionSpec("x")).devices_indices_map((4,))
  {CpuDevice(id=0): (slice(None, None, None),)}
"""
from __future__ import annotations

import enum
import functools
import math
import sys as _sys
from typing import Any, Callable, Mapping, Sequence

import numpy as np

Index = tuple  # one ``slice`` or ``int`` per dimension of the global array


class Sharding:
    """Where the parts of an array live: a map from devices to indices of the global array.

    Subclasses set ``_device_assignment`` (the devices in a fixed order: the order of the
    array's shards, whose first device is where operations gather the array) and implement
    :meth:`devices_indices_map`.
    """

    _device_assignment: tuple = ()

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        """``{device: index}`` for an array of ``global_shape`` (devices in shard order)."""
        raise NotImplementedError

    def addressable_devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        """Like :meth:`devices_indices_map` (plax runs in one process: every device is
        addressable)."""
        return self.devices_indices_map(global_shape)

    @property
    def device_set(self) -> set:
        """The devices holding a part of the array."""
        return set(self._device_assignment)

    @property
    def addressable_devices(self) -> set:
        return self.device_set

    @property
    def num_devices(self) -> int:
        return len(self._device_assignment)

    @property
    def is_fully_addressable(self) -> bool:
        return True

    @property
    def is_fully_replicated(self) -> bool:
        """Whether every device holds the whole array."""
        raise NotImplementedError

    #: the memory kind given to the constructor (None: the device's default)
    _memory_kind: str | None = None

    @property
    def memory_kind(self) -> str:
        """The kind of memory that holds the array (``"device"``, ``"pinned_host"``,
        ``"unpinned_host"``: :mod:`plax.memory`)."""
        return self._memory_kind or "device"

    def with_memory_kind(self, kind: str | None) -> "Sharding":
        """This sharding with memory kind ``kind`` (JAX's check of the kind)."""
        import copy
        from plax.memory import check_memory_kind
        new = copy.copy(self)
        new._memory_kind = check_memory_kind(kind, self._device_assignment[0])
        return new

    def shard_shape(self, global_shape: Sequence[int]) -> tuple[int, ...]:
        """The shape of the shard on the first device (equal on every device of an even
        sharding)."""
        index = next(iter(self.devices_indices_map(global_shape).values()))
        return index_shape(index, global_shape)

    def is_equivalent_to(self, other: "Sharding", ndim: int) -> bool:
        """Whether ``other`` puts the same parts of a rank-``ndim`` array on the same devices
        (compared on a shape every split of up to this many devices divides evenly)."""
        if not isinstance(other, Sharding):
            return False
        shape = (math.lcm(*range(1, self.num_devices + 1)),) * ndim
        try:
            return _normalized(self, shape) == _normalized(other, shape)
        except ValueError:
            return False


def _normalized(sharding: Sharding, shape) -> dict:
    return {d: tuple((i.indices(n) if isinstance(i, slice) else i) for i, n in zip(idx, shape))
            for d, idx in sharding.devices_indices_map(shape).items()}


def index_shape(index: Index, global_shape: Sequence[int]) -> tuple[int, ...]:
    """The shape of ``global_array[index]`` (int entries drop their dimension).

    Example:
      >>> index_shape((slice(0, 2), 1), (4, 3))
      (2,)
    """
    out = []
    for i, n in zip(index, global_shape):
        if isinstance(i, slice):
            out.append(len(range(*i.indices(n))))
    out.extend(global_shape[len(index):])
    return tuple(out)


def _full_index(ndim: int) -> Index:
    return (slice(None),) * ndim


def _is_device(x) -> bool:
    from plax.device import Device
    return isinstance(x, Device)


class SingleDeviceSharding(Sharding):
    """The placement of an unsharded array: all of it on one device.

    Example:
      >>> SingleDeviceSharding(plax.devices()[0]).devices_indices_map((2,))
      {CpuDevice(id=0): (slice(None, None, None),)}
    """

    def __init__(self, device, *, memory_kind: str | None = None):
        if not _is_device(device):
            raise TypeError(f"SingleDeviceSharding expects a plax Device, got {device!r}")
        self._device = device
        self._device_assignment = (device,)
        if memory_kind is not None:
            from plax.memory import check_memory_kind
            self._memory_kind = check_memory_kind(memory_kind, device)

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        return {self._device: _full_index(len(global_shape))}

    is_fully_replicated = property(lambda self: True)

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self.memory_kind})"

    def __eq__(self, other) -> bool:
        return (isinstance(other, SingleDeviceSharding) and other._device == self._device
                and other.memory_kind == self.memory_kind)

    def __hash__(self) -> int:
        return hash(self._device)


class PartitionSpec(tuple):
    """For each array dimension, the mesh axes that split it: ``None`` (not split), an axis
    name, or a tuple of names (split over their product, the first name major). Dimensions
    beyond the spec are not split.

    Printed as JAX 0.10 prints it, as ``P`` and the tuple of entries.

    Example:
      >>> PartitionSpec("x", None)
      P('x', None)
      >>> PartitionSpec("x")
      P('x',)
    """

    unreduced: frozenset = frozenset()
    reduced: frozenset = frozenset()

    def __new__(cls, *partitions: Any, unreduced: Any = frozenset(),
                reduced: Any = frozenset()):
        for p in partitions:
            names = p if isinstance(p, tuple) else (p,)
            if p is not None and not all(isinstance(n, str) for n in names):
                raise TypeError(f"PartitionSpec entries must be None, a mesh axis name or a "
                                f"tuple of names, got {p!r}")
        spec = super().__new__(cls, partitions)
        if unreduced or reduced or not isinstance(unreduced, (set, frozenset)) or \
                not isinstance(reduced, (set, frozenset)):
            spec.unreduced = _axis_set(unreduced, "unreduced")
            spec.reduced = _axis_set(reduced, "reduced")
            _check_unreduced(partitions, spec.unreduced, spec.reduced)
        return spec

    @property
    def partitions(self) -> tuple:
        """The entries, one per dimension (without the unreduced and reduced axes)."""
        return tuple.__getitem__(self, slice(None))

    # A spec with unreduced or reduced axes is more than its entries: as in JAX, reading it
    # as a sequence of entries (``*spec``, ``spec[i]``, ``x in spec``) is refused; its
    # ``.partitions`` are the entries.
    def __iter__(self):
        if self.unreduced or self.reduced:
            raise ValueError("Using *pspec is dangerous when PartitionSpec has non-empty "
                             "unreduced/reduced set. Please use *spec.partitions")
        return tuple.__iter__(self)

    def __getitem__(self, i):
        if self.unreduced or self.reduced:
            raise ValueError("Using pspec[...] is dangerous when PartitionSpec has non-empty "
                             "unreduced/reduced set. Please use spec.partitions[...]")
        return tuple.__getitem__(self, i)

    def __contains__(self, name) -> bool:
        if self.unreduced or self.reduced:
            self.__iter__()  # JAX's ValueError (its membership test iterates)
        return tuple.__contains__(self, name)

    def index(self, value, *args) -> int:
        return self.partitions.index(value, *args)

    def count(self, value) -> int:
        return self.partitions.count(value)

    def __add__(self, other):
        if isinstance(other, PartitionSpec):
            return PartitionSpec(*self.partitions, *other.partitions,
                                 unreduced={*self.unreduced, *other.unreduced},
                                 reduced={*self.reduced, *other.reduced})
        if isinstance(other, tuple):
            self._check_concatenable(other, "__add__")
            return PartitionSpec(*self.partitions, *other)
        return NotImplemented

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        self._check_concatenable(other, "__radd__")
        return PartitionSpec(*other, *self.partitions)

    def _check_concatenable(self, other: tuple, method: str) -> None:
        """JAX's TypeError for a tuple concatenated to a spec with unreduced/reduced axes."""
        for what in ("unreduced", "reduced"):
            if getattr(self, what):
                raise TypeError(f"other {other} cannot be of instance `tuple` when self "
                                f"{self} has {what} in `{method}` of PartitionSpec.")

    def update(self, partitions=None, unreduced=None, reduced=None) -> "PartitionSpec":
        """A spec like this one with the given parts replaced."""
        return PartitionSpec(*(self.partitions if partitions is None else partitions),
                             unreduced=self.unreduced if unreduced is None else unreduced,
                             reduced=self.reduced if reduced is None else reduced)

    def __repr__(self) -> str:
        entries = tuple.__repr__(self)[1:-1]
        extra = []
        if self.unreduced:  # written as JAX writes it: a set
            extra.append(f"unreduced={set(self.unreduced)!r}")
        if self.reduced:
            extra.append(f"reduced={set(self.reduced)!r}")
        if not extra:
            return f"P({entries})"
        lead = "" if not entries else f"{entries} " if entries.endswith(",") else f"{entries}, "
        return f"P({lead}{', '.join(extra)})"

    def __eq__(self, other) -> bool:
        # Unlike a tuple, equal only to another spec; trailing Nones change nothing.
        return isinstance(other, PartitionSpec) and _strip(self) == _strip(other) and \
            self.unreduced == other.unreduced and self.reduced == other.reduced

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((_strip(self), self.unreduced, self.reduced))

    def __reduce__(self):
        if self.unreduced or self.reduced:
            return (_spec_with_sets, (self.partitions, self.unreduced, self.reduced))
        return (PartitionSpec, self.partitions)


def _spec_with_sets(partitions, unreduced, reduced) -> "PartitionSpec":
    return PartitionSpec(*partitions, unreduced=unreduced, reduced=reduced)


def _axis_set(value: Any, what: str) -> frozenset:
    if not isinstance(value, (set, frozenset)):
        raise TypeError(f"{what} argument of PartitionSpec should be of type `frozenset` or "
                        f"`set`. Got type {value}")
    if None in value:
        raise ValueError(f"{what} cannot contain None: its elements name the mesh axes over "
                         f"which the array is {what}")
    return frozenset(value)


def _check_unreduced(partitions: tuple, unreduced: frozenset, reduced: frozenset) -> None:
    """JAX's errors for an axis named twice among the entries and the unreduced and
    reduced sets."""
    if unreduced & reduced:
        raise ValueError(f"`unreduced` and `reduced` argument to PartitionSpec cannot overlap. "
                         f"Got unreduced: {unreduced} and reduced: {reduced}")
    for entry in partitions:
        for name in entry if isinstance(entry, tuple) else (entry,):
            for which, axes in (("unreduced", unreduced), ("reduced", reduced)):
                if name in axes:
                    raise ValueError(
                        f"partitions cannot overlap with {which} axes passed to PartitionSpec. "
                        f"Got partitions: {partitions} and {which} axes: {axes}")


P = PartitionSpec


def _strip(spec: tuple) -> tuple:
    out = spec.partitions if isinstance(spec, PartitionSpec) else tuple(spec)
    while out and out[-1] is None:
        out = out[:-1]
    return out


class AxisType(enum.Enum):
    """How a mesh axis is used (JAX 0.10's sharding in types).

    * ``Auto`` -- the compiler decides how values are split over the axis (``jit``'s
      automatic partitioning). The default of a :class:`Mesh` built directly.
    * ``Explicit`` -- the split is part of each value's type and changes only through
      :func:`reshard`. The default of :func:`make_mesh`.
    * ``Manual`` -- the program handles each device's block itself (inside ``shard_map``).

    plax records the type of every axis (``mesh.axis_types``, the mesh's repr) so that JAX
    programs run unchanged, but it does not partition ``jit``: the type changes where arrays
    are placed only as described for :func:`reshard`, :func:`auto_axes` and
    :func:`explicit_axes`.

    Example:
      >>> AxisType.Explicit
      Explicit
      >>> make_mesh((1,), ("x",), axis_types=(AxisType.Auto,)).axis_types
      (Auto,)
    """

    Auto = 1
    Explicit = 2
    Manual = 3

    def __repr__(self) -> str:
        return self.name


def _axis_types(axis_types: Any, axis_names: tuple, default: AxisType,
                caller: str) -> tuple:
    """``axis_types`` as a tuple with one :class:`AxisType` per axis name (validated)."""
    if axis_types is None:
        return (default,) * len(axis_names)
    if isinstance(axis_types, AxisType):  # one type for every axis
        return (axis_types,) * len(axis_names)
    if not isinstance(axis_types, (tuple, list)):
        raise TypeError(f"{caller}: axis_types must be a plax.sharding.AxisType or a tuple of "
                        f"them (one per axis), got {axis_types!r} of type "
                        f"{type(axis_types).__name__}")
    bad = [t for t in axis_types if not isinstance(t, AxisType)]
    if bad:
        raise TypeError(f"{caller}: axis_types entries must be plax.sharding.AxisType members "
                        f"(AxisType.Auto, AxisType.Explicit, AxisType.Manual), got {bad[0]!r} "
                        f"of type {type(bad[0]).__name__} in axis_types={tuple(axis_types)!r}")
    if len(axis_types) != len(axis_names):
        raise ValueError(f"{caller}: axis_types has {len(axis_types)} entries "
                         f"{tuple(axis_types)!r} but there are {len(axis_names)} axis names "
                         f"{axis_names}; give one AxisType per axis")
    return tuple(axis_types)


class Mesh:
    """Devices laid out in an n-dimensional grid with named axes.

    Args:
      devices: an array (or nested sequence) of distinct plax Devices.
      axis_names: one name per dimension of ``devices``.
      axis_types: how each axis is used: a tuple with one :class:`AxisType` per axis, or a
        single one for every axis. Default: ``AxisType.Auto`` for every axis (as JAX's
        ``Mesh``; :func:`make_mesh` defaults to ``Explicit``).

    Raises:
      ValueError: the axis names do not match the dimensions of ``devices``, are not
        distinct, or ``axis_types`` has the wrong length; the devices are not distinct.
      TypeError: an entry of ``devices`` is not a Device, or of ``axis_types`` not an
        AxisType.

    Meshes are equal when their devices (in layout), axis names and axis types are (as in
    JAX, meshes differing only in axis types are not equal).

    Example:
      >>> mesh = Mesh(np.array(plax.devices()[:1]), ("x",))
      >>> mesh
      Mesh(axis_sizes=(1,), axis_names=('x',), axis_types=(Auto,))
      >>> mesh.axis_names, mesh.axis_sizes, mesh.size
      (('x',), (1,), 1)
    """

    def __init__(self, devices: Any, axis_names: str | Sequence[str],
                 axis_types: AxisType | Sequence[AxisType] | None = None):
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        devices = np.asarray(devices, dtype=object)  # Devices are not sequences: kept whole
        axis_names = tuple(axis_names)
        if devices.ndim != len(axis_names):
            raise ValueError(f"Mesh: devices has {devices.ndim} dimensions {devices.shape} but "
                             f"{len(axis_names)} axis names {axis_names} were given")
        if len(set(axis_names)) != len(axis_names):
            raise ValueError(f"Mesh axis names must be distinct, got {axis_names}")
        flat = list(devices.flat)
        if not all(_is_device(d) for d in flat):
            raise TypeError(f"Mesh expects plax Devices, got {[d for d in flat if not _is_device(d)][:3]}")
        if len(set(flat)) != len(flat):
            raise ValueError(f"Mesh devices must be distinct, got {flat}")
        self.devices = devices
        self.axis_names = axis_names
        self.axis_types = _axis_types(axis_types, axis_names, AxisType.Auto, "Mesh")

    @property
    def shape(self) -> dict:
        """``{axis name: size}`` in axis order."""
        return dict(zip(self.axis_names, self.devices.shape))

    axis_sizes = property(lambda self: tuple(self.devices.shape))
    size = property(lambda self: int(self.devices.size))
    empty = property(lambda self: self.devices.size == 0)
    shape_tuple = property(lambda self: tuple(zip(self.axis_names, self.devices.shape)))
    device_ids = property(lambda self: np.vectorize(lambda d: d.id, otypes=[int])(self.devices))
    devices_flat = property(lambda self: tuple(self.devices.flat))

    def _axes_of_type(self, t: AxisType) -> tuple:
        return tuple(n for n, a in zip(self.axis_names, self.axis_types) if a is t)

    auto_axes = property(lambda self: self._axes_of_type(AxisType.Auto))
    explicit_axes = property(lambda self: self._axes_of_type(AxisType.Explicit))
    manual_axes = property(lambda self: self._axes_of_type(AxisType.Manual))
    are_all_axes_auto = property(lambda self: all(t is AxisType.Auto for t in self.axis_types))
    are_all_axes_explicit = property(
        lambda self: all(t is AxisType.Explicit for t in self.axis_types))
    are_all_axes_manual = property(
        lambda self: all(t is AxisType.Manual for t in self.axis_types))

    def update(self, devices: Any = None, axis_names: Sequence[str] | None = None,
               axis_types: AxisType | Sequence[AxisType] | None = None) -> "Mesh":
        """A mesh like this one with the given parts replaced.

        Example:
          >>> make_mesh((1,), ("x",)).update(axis_types=(AxisType.Auto,))
          Mesh(axis_sizes=(1,), axis_names=('x',), axis_types=(Auto,))
        """
        return Mesh(self.devices if devices is None else devices,
                    self.axis_names if axis_names is None else axis_names,
                    self.axis_types if axis_types is None else axis_types)

    def __str__(self) -> str:
        # JAX 0.10 prints a mesh inside other reprs (NamedSharding, jaxpr params, errors) in
        # this compact form, and uses the keyword form below only for repr() itself.
        parts = [f"{n!r}: {s}" for n, s in self.shape.items()]
        return f"Mesh({', '.join(parts + [f'axis_types={self.axis_types!r}'])})"

    def __repr__(self) -> str:
        return (f"Mesh(axis_sizes={self.axis_sizes!r}, axis_names={self.axis_names!r}, "
                f"axis_types={self.axis_types!r})")

    def __eq__(self, other) -> bool:
        return (isinstance(other, Mesh) and self.axis_names == other.axis_names
                and self.devices.shape == other.devices.shape
                and self.devices_flat == other.devices_flat
                and self.axis_types == other.axis_types)

    def __hash__(self) -> int:
        return hash((self.axis_names, self.devices.shape, self.devices_flat, self.axis_types))


class NamedSharding(Sharding):
    """An array split over a :class:`Mesh` as a :class:`PartitionSpec` says.

    Dimension ``d`` is cut into as many equal blocks as the product of the sizes of the mesh
    axes named by ``spec[d]``; the device at mesh position ``p`` holds, in each dimension, the
    block numbered by its coordinates along those axes (the first named axis major). Mesh
    axes not named in the spec replicate.

    Example:
      >>> mesh = Mesh(np.array(plax.devices()[:1]), ("x",))
      >>> NamedSharding(mesh, PartitionSpec("x")).is_fully_replicated
      True
    """

    def __init__(self, mesh: "Mesh | AbstractMesh", spec: PartitionSpec | Sequence | None = None,
                 *, memory_kind: str | None = None):
        abstract = isinstance(mesh, AbstractMesh)
        if not isinstance(mesh, Mesh) and not abstract:
            raise TypeError(f"NamedSharding expects a plax.sharding.Mesh, got {mesh}")
        spec = PartitionSpec() if spec is None else spec
        if not isinstance(spec, PartitionSpec):
            spec = PartitionSpec(*spec)
        used: list[str] = []
        for entry in spec.partitions:
            for name in (() if entry is None else entry if isinstance(entry, tuple) else (entry,)):
                if name not in mesh.axis_names:
                    raise ValueError(f"PartitionSpec {spec!r} names axis {name!r}, which mesh "
                                     f"{mesh} does not have")
                if name in used:
                    raise ValueError(f"PartitionSpec {spec!r} uses mesh axis {name!r} twice")
                used.append(name)
        for name in spec.unreduced | spec.reduced:
            if name not in mesh.axis_names:
                raise ValueError(f"PartitionSpec {spec!r} names axis {name!r}, which mesh "
                                 f"{mesh} does not have")
        self.mesh = mesh
        self.spec = spec
        if abstract:
            # a type's sharding (what jax.typeof gives): no devices, as in JAX
            self._memory_kind = memory_kind
            return
        self._device_assignment = mesh.devices_flat
        if memory_kind is not None:
            from plax.memory import check_memory_kind
            self._memory_kind = check_memory_kind(memory_kind, self._device_assignment[0])

    def _axes(self, dim: int) -> tuple:
        entry = self.spec.partitions[dim] if dim < len(self.spec) else None
        return () if entry is None else entry if isinstance(entry, tuple) else (entry,)

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        shape = tuple(global_shape)
        if len(self.spec) > len(shape):
            raise ValueError(f"{self!r} has {len(self.spec)} entries but the array has rank "
                             f"{len(shape)} (shape {shape})")
        sizes = self.mesh.shape
        position = {n: i for i, n in enumerate(self.mesh.axis_names)}
        parts = [math.prod(sizes[a] for a in self._axes(d)) for d in range(len(shape))]
        for d, (n, k) in enumerate(zip(shape, parts)):
            if n % k:
                raise ValueError(f"{self!r} splits array dimension {d} into {k} parts, but its "
                                 f"size {n} (shape {shape}) is not divisible by {k}")
        out = {}
        for coords in np.ndindex(*self.mesh.devices.shape):
            index = []
            for d, (n, k) in enumerate(zip(shape, parts)):
                if k == 1:
                    index.append(slice(None))
                    continue
                block = 0
                for a in self._axes(d):
                    block = block * sizes[a] + coords[position[a]]
                step = n // k
                index.append(slice(block * step, (block + 1) * step))
            out[self.mesh.devices[coords]] = tuple(index)
        return out

    @property
    def memory_kind(self) -> str | None:
        """The memory kind; None for a type's sharding (over an AbstractMesh), as in JAX."""
        if isinstance(self.mesh, AbstractMesh):
            return self._memory_kind
        return super().memory_kind

    @property
    def is_fully_addressable(self) -> bool:
        if isinstance(self.mesh, AbstractMesh):  # a type's sharding: JAX's error
            raise ValueError("is_fully_addressable is not implemented for "
                             "`jax.sharding.AbstractMesh`.")
        return True

    @property
    def is_fully_replicated(self) -> bool:
        sizes = self.mesh.shape
        return all(sizes[a] == 1 for d in range(len(self.spec)) for a in self._axes(d))

    @property
    def _device_assignment(self) -> tuple:
        devices = self.__dict__.get("_devices")
        if devices is None:  # over an AbstractMesh: JAX's error
            raise ValueError("device_set is not implemented for "
                             "`jax.sharding.AbstractMesh`.")
        return devices

    @_device_assignment.setter
    def _device_assignment(self, devices: tuple) -> None:
        self.__dict__["_devices"] = devices

    def __repr__(self) -> str:
        if isinstance(self.mesh, AbstractMesh):  # as JAX prints a type's sharding
            kind = f", memory_kind={self._memory_kind}" if self._memory_kind else ""
            return f"NamedSharding(mesh={self.mesh}, spec={self.spec!r}{kind})"
        return (f"NamedSharding(mesh={self.mesh}, spec={self.spec!r}, "
                f"memory_kind={self.memory_kind})")

    def __eq__(self, other) -> bool:
        return isinstance(other, NamedSharding) and self.mesh == other.mesh \
            and self.spec == other.spec

    def __hash__(self) -> int:
        return hash((self.mesh, self.spec))


class IndexMapSharding(Sharding):
    """An explicit ``{device: index}`` map, in shard order: the general form a multi-device
    plugin uses for layouts a mesh does not describe.

    Args:
      indices: each device's index into the global array (``slice`` or ``int`` entries;
        missing trailing entries mean whole dimensions).

    Example (pmap's layout: device ``i`` holds row ``i``, without its leading axis):
      >>> s = IndexMapSharding({plax.devices()[0]: (0,)})
      >>> s.shard_shape((1, 3))
      (3,)
    """

    def __init__(self, indices: Mapping[Any, Index]):
        if not indices:
            raise ValueError("IndexMapSharding needs at least one device")
        for d, idx in indices.items():
            if not _is_device(d):
                raise TypeError(f"IndexMapSharding keys must be plax Devices, got {d!r}")
            if not isinstance(idx, tuple) or not all(isinstance(i, (slice, int)) for i in idx):
                raise TypeError(f"The index of {d!r} must be a tuple of slices and ints, got "
                                f"{idx!r}")
        self._indices = dict(indices)
        self._device_assignment = tuple(self._indices)

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        ndim = len(global_shape)
        out = {}
        for d, idx in self._indices.items():
            if len(idx) > ndim:
                raise ValueError(f"{self!r} has indices of length {len(idx)} for an array of "
                                 f"rank {ndim}")
            out[d] = tuple(idx) + _full_index(ndim - len(idx))
        return out

    @property
    def is_fully_replicated(self) -> bool:
        return all(all(isinstance(i, slice) and i == slice(None) for i in idx)
                   for idx in self._indices.values())

    def __repr__(self) -> str:
        return f"IndexMapSharding({self._indices!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, IndexMapSharding) and \
            list(self._indices.items()) == list(other._indices.items())

    def __hash__(self) -> int:
        return hash(tuple((d, tuple(map(_slice_key, i))) for d, i in self._indices.items()))


def _slice_key(i):
    return (i.start, i.stop, i.step) if isinstance(i, slice) else i


def index_key(index: Index) -> tuple:
    """A hashable form of an index (slices are unhashable before Python 3.12)."""
    return tuple(map(_slice_key, index))


class Shard:
    """One device's part of an array (``x.addressable_shards``).

    Attributes:
      device: where it lives.
      index: the index of the global array it holds.
      replica_id: 0 for the first device holding this index, 1 for the next, ...
      data: the part as a one-device :class:`plax.Array`.
    """

    __slots__ = ("device", "index", "replica_id", "data")

    def __init__(self, device, index: Index, replica_id: int, data):
        self.device = device
        self.index = index
        self.replica_id = replica_id
        self.data = data

    def __repr__(self) -> str:
        return (f"Shard(device={self.device!r}, index={self.index}, "
                f"replica_id={self.replica_id}, data={self.data!r})")


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str],
              axis_types: AxisType | Sequence[AxisType] | None = None, *,
              devices: Sequence | None = None) -> Mesh:
    """A :class:`Mesh` of the given shape over the first devices of the default platform
    (or over ``devices``).

    Args:
      axis_shapes: the size of each mesh axis.
      axis_names: the name of each mesh axis.
      axis_types: a tuple with one :class:`AxisType` per axis, or one for all. Default:
        ``AxisType.Explicit`` for every axis (as JAX 0.10's ``make_mesh``).
      devices: the devices to lay out (default: ``plax.devices()``); the first
        ``prod(axis_shapes)`` are used.

    Returns:
      The mesh.

    Raises:
      ValueError: there are too few devices (the message says how to get more), or
        ``axis_types`` has the wrong length.
      TypeError: an entry of ``axis_types`` is not an AxisType.

    Example:
      >>> make_mesh((1,), ("x",))
      Mesh(axis_sizes=(1,), axis_names=('x',), axis_types=(Explicit,))
    """
    types = _axis_types(axis_types, tuple(axis_names), AxisType.Explicit, "make_mesh")
    if devices is None:
        from plax.device import devices as _devices
        devices = _devices()
    n = math.prod(axis_shapes)
    if len(devices) < n:
        raise ValueError(f"make_mesh: a mesh of shape {tuple(axis_shapes)} needs {n} devices, "
                         f"but only {len(devices)} are given: {list(devices)}. "
                         "PLAX_NUM_CPU_DEVICES=N gives N CPU devices.")
    grid = np.empty(n, dtype=object)
    grid[:] = list(devices)[:n]
    return Mesh(grid.reshape(tuple(axis_shapes)), tuple(axis_names), types)


class PositionalSharding(IndexMapSharding):
    """Devices laid out in an array whose shape says how many blocks each array dimension is
    cut into (JAX's deprecated ``PositionalSharding``): device ``devices[i, j]`` holds block
    ``(i, j)``. ``.reshape(...)`` and ``.replicate(axis)`` give the other layouts.

    Example:
      >>> PositionalSharding(plax.devices()[:1]).shape
      (1,)
    """

    def __init__(self, devices: Any):
        grid = np.empty(np.shape(np.asarray(devices, dtype=object)), dtype=object)
        flat = list(np.asarray(devices, dtype=object).flat)
        grid.reshape(-1)[:] = flat
        if not all(_is_device(d) for d in flat):
            raise TypeError("PositionalSharding expects an array of plax Devices")
        self._grid = grid
        self._device_assignment = tuple(flat)
        self._indices = None

    shape = property(lambda self: self._grid.shape)
    ndim = property(lambda self: self._grid.ndim)

    def reshape(self, *shape) -> "PositionalSharding":
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return PositionalSharding(self._grid.reshape(shape))

    def replicate(self, axis: int | None = None, keepdims: bool = True) -> "PositionalSharding":
        """The same devices with ``axis`` (all axes for None) holding copies, not blocks."""
        grid = self._grid
        axes = range(grid.ndim) if axis is None else [axis % grid.ndim]
        out = PositionalSharding(grid)
        out._replicated = set(axes) | set(getattr(self, "_replicated", ()))
        return out

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        shape = tuple(global_shape)
        grid = self._grid
        if grid.ndim != len(shape) and grid.size > 1:
            raise ValueError(f"PositionalSharding of shape {grid.shape} does not fit an array of "
                             f"rank {len(shape)}; reshape it to one entry per dimension")
        rep = getattr(self, "_replicated", set())
        out = {}
        for coords in np.ndindex(*grid.shape):
            index = []
            for d, n in enumerate(shape):
                k = grid.shape[d] if d < grid.ndim and d not in rep else 1
                if n % k:
                    raise ValueError(f"PositionalSharding {grid.shape} does not divide dimension "
                                     f"{d} of shape {shape}")
                step = n // k
                b = coords[d] if k > 1 else 0
                index.append(slice(None) if k == 1 else slice(b * step, (b + 1) * step))
            out[grid[coords]] = tuple(index)
        return out

    @property
    def is_fully_replicated(self) -> bool:
        rep = getattr(self, "_replicated", set())
        return all(s == 1 or d in rep for d, s in enumerate(self._grid.shape))

    def __repr__(self) -> str:
        return f"PositionalSharding({self._grid.tolist()!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, PositionalSharding) and self._grid.shape == other._grid.shape \
            and self._device_assignment == other._device_assignment \
            and getattr(self, "_replicated", set()) == getattr(other, "_replicated", set())

    def __hash__(self) -> int:
        return hash((self._grid.shape, self._device_assignment))


# ------------------------------------------------------------------ the current mesh

import contextlib as _contextlib
import threading as _threading


class _MeshState(_threading.local):
    def __init__(self):
        self.stack: list = []
        self.internal = 0  # this thread's internal eager work in progress (internal_eager_work)


_mesh_state = _MeshState()
_global_mesh: list = [None]
#: whether a mesh may be current in some thread (the global one is set, or a ``use_mesh``
#: block is open somewhere): one read on the eager and ``jit`` fast paths, which look up
#: the current mesh only when it is true
mesh_maybe_set: list = [False]
_open_use_mesh = [0]  # ``use_mesh`` blocks open, in all threads


_flag_lock = _threading.Lock()  # threads may open and close use_mesh blocks together


def _refresh_mesh_flag() -> None:
    mesh_maybe_set[0] = _global_mesh[0] is not None or _open_use_mesh[0] > 0


@_contextlib.contextmanager
def internal_eager_work():
    """Eager work plax does for itself (a partitioned program's steps, an eager
    ``shard_map`` body's blocks, compiling), in the running thread: its operations are
    neither placed on the set mesh nor checked against it as a user's are
    (:mod:`plax.sharding_eager`); other threads' eager work is placed meanwhile. The device
    threads of a partitioned program share their caller's state
    (:func:`plax.sharding_threads.on_each_device`).

    Example:
      >>> with set_mesh(make_mesh((1,), ("x",))), internal_eager_work():
      ...     in_internal_eager_work(), get_mesh() is not None
      (True, True)
    """
    state = _mesh_state
    state.internal += 1
    try:
        yield
    finally:
        state.internal -= 1


def in_internal_eager_work() -> bool:
    """Whether the running thread is inside :func:`internal_eager_work`.

    Example:
      >>> in_internal_eager_work()
      False
    """
    return _mesh_state.internal > 0


@_contextlib.contextmanager
def no_mesh_in_this_thread():
    """Inside the block the running thread has no current mesh (:func:`get_mesh` is None:
    its eager work is neither placed nor checked, its ``jit`` calls see no context mesh);
    other threads keep theirs. (:func:`internal_eager_work` turns only placement and its
    checks off, and keeps the mesh current.)

    Example:
      >>> with set_mesh(make_mesh((1,), ("x",))), no_mesh_in_this_thread():
      ...     get_mesh() is None
      True
    """
    stack = _mesh_state.stack
    stack.append(None)   # (read by get_mesh; a use_mesh block inside stacks above it)
    try:
        yield
    finally:
        stack.pop()


def get_mesh() -> Mesh | None:
    """The mesh set with :func:`use_mesh` (innermost) or :func:`set_mesh`, or None."""
    stack = _mesh_state.stack
    return stack[-1] if stack else _global_mesh[0]


class AbstractMesh:
    """A mesh's shape without its devices: axis sizes, names and types (JAX 0.10's
    ``jax.sharding.AbstractMesh``), what :func:`get_abstract_mesh` returns and what
    sharding types are checked against.

    Args:
      axis_sizes: the size of each axis.
      axis_names: the name of each axis.
      axis_types: one :class:`AxisType` per axis, or one for all (default ``Auto``).

    Example:
      >>> AbstractMesh((2, 4), ("X", "Y"))
      AbstractMesh('X': 2, 'Y': 4, axis_types=(Auto, Auto))
      >>> get_abstract_mesh()  # no mesh set
      AbstractMesh((), axis_types=())
    """

    def __init__(self, axis_sizes: Sequence[int], axis_names: Sequence[str],
                 axis_types: AxisType | Sequence[AxisType] | None = None, *,
                 abstract_device: Any = None):
        self.axis_sizes = tuple(int(n) for n in axis_sizes)
        self.axis_names = tuple(axis_names)
        if len(self.axis_sizes) != len(self.axis_names):
            raise ValueError(f"AbstractMesh: {len(self.axis_sizes)} axis sizes "
                             f"{self.axis_sizes} but {len(self.axis_names)} axis names "
                             f"{self.axis_names}; give one size per name")
        self.axis_types = _axis_types(axis_types, self.axis_names, AxisType.Auto,
                                      "AbstractMesh")
        self.abstract_device = abstract_device  # the platform's name, or None

    shape = property(lambda self: dict(zip(self.axis_names, self.axis_sizes)))
    shape_tuple = property(lambda self: tuple(zip(self.axis_names, self.axis_sizes)))
    size = property(lambda self: math.prod(self.axis_sizes))
    empty = property(lambda self: not self.axis_names)
    _axes_of_type = Mesh._axes_of_type
    auto_axes = Mesh.auto_axes
    explicit_axes = Mesh.explicit_axes
    manual_axes = Mesh.manual_axes
    are_all_axes_auto = Mesh.are_all_axes_auto
    are_all_axes_explicit = Mesh.are_all_axes_explicit
    are_all_axes_manual = Mesh.are_all_axes_manual
    abstract_mesh = property(lambda self: self)

    def update(self, axis_sizes=None, axis_names=None, axis_types=None) -> "AbstractMesh":
        """An abstract mesh like this one with the given parts replaced."""
        return AbstractMesh(self.axis_sizes if axis_sizes is None else axis_sizes,
                            self.axis_names if axis_names is None else axis_names,
                            self.axis_types if axis_types is None else axis_types,
                            abstract_device=self.abstract_device)

    def _key(self) -> tuple:
        return self.axis_sizes, self.axis_names, self.axis_types, self.abstract_device

    def __eq__(self, other) -> bool:
        return isinstance(other, AbstractMesh) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        if self.empty:
            return "AbstractMesh((), axis_types=())"
        parts = [f"{n!r}: {s}" for n, s in zip(self.axis_names, self.axis_sizes)]
        parts.append(f"axis_types={self.axis_types!r}")
        if hasattr(self.abstract_device, "_repr"):  # an AbstractDevice
            parts.append(self.abstract_device._repr())
        elif self.abstract_device is not None:  # as JAX prints a concrete mesh's abstract one
            parts += [f"device_kind={self.abstract_device}", "num_cores=None",
                      f"platform={self.abstract_device}"]
        return f"AbstractMesh({', '.join(parts)})"


def _mesh_abstract_mesh(mesh: Mesh) -> AbstractMesh:
    flat = mesh.devices_flat
    return AbstractMesh(mesh.axis_sizes, mesh.axis_names, mesh.axis_types,
                        abstract_device=flat[0].platform if flat else None)


Mesh.abstract_mesh = property(_mesh_abstract_mesh,
                              doc="This mesh's :class:`AbstractMesh` (sizes, names, types).")

_EMPTY_ABSTRACT_MESH = AbstractMesh((), ())

# AbstractDevice, ManualAxisType and use_abstract_mesh live in plax.sharding_abstract, loaded
# on first use (import time); until it is loaded no use_abstract_mesh block can be active.
_ABSTRACT_NAMES = ("AbstractDevice", "ManualAxisType", "use_abstract_mesh")


def __getattr__(name: str):
    if name in _ABSTRACT_NAMES:
        import plax.sharding_abstract as module
        return getattr(module, name)
    raise AttributeError(f"module 'plax.sharding' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ABSTRACT_NAMES))


def _current_abstract_mesh():
    module = _sys.modules.get("plax.sharding_abstract")
    return None if module is None else module.current_abstract_mesh()


def get_abstract_mesh() -> AbstractMesh:
    """The :class:`AbstractMesh` of the current mesh (set with :func:`set_mesh` or
    :func:`use_mesh`); an empty one (``.empty`` is True) when none is set, as in JAX.

    Example:
      >>> with set_mesh(make_mesh((1,), ("x",))):
      ...     get_abstract_mesh()
      AbstractMesh('x': 1, axis_types=(Explicit,), device_kind=cpu, num_cores=None, platform=cpu)
    """
    abstract = _current_abstract_mesh()  # the innermost use_abstract_mesh comes first
    if abstract is not None:
        return abstract
    mesh = get_mesh()
    return _EMPTY_ABSTRACT_MESH if mesh is None else mesh.abstract_mesh


@_contextlib.contextmanager
def use_mesh(mesh: Mesh):
    """Makes ``mesh`` the current mesh inside a ``with`` block (``shard_map`` without
    ``mesh=`` uses it).

    Example:
      >>> with use_mesh(make_mesh((1,), ("x",))):
      ...     get_mesh()
      Mesh(axis_sizes=(1,), axis_names=('x',), axis_types=(Explicit,))
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(f"use_mesh expects a plax.sharding.Mesh, got {mesh}")
    _mesh_state.stack.append(mesh)
    with _flag_lock:
        _open_use_mesh[0] += 1
        _refresh_mesh_flag()
    try:
        yield mesh
    finally:
        _mesh_state.stack.pop()
        with _flag_lock:
            _open_use_mesh[0] -= 1
            _refresh_mesh_flag()


class _SetMesh:
    """What :func:`set_mesh` returns: also a context manager restoring the previous mesh."""

    def __init__(self, previous):
        self.previous = previous

    def __enter__(self):
        return None  # as JAX's ``with jax.set_mesh(mesh):`` (the mesh is not bound)

    def __exit__(self, *exc):
        _global_mesh[0] = self.previous
        _refresh_mesh_flag()
        return False


def set_mesh(mesh: Mesh | None) -> _SetMesh:
    """Sets the current mesh for the whole program (None clears it), as ``jax.set_mesh``.

    Used as ``with set_mesh(mesh):`` it restores the previous mesh at the end of the block
    (and binds nothing, as in JAX). PartitionSpecs given to ``reshard``, ``device_put`` and
    the ``out_sharding=`` parameters resolve against the current mesh.

    Args:
      mesh: a :class:`Mesh`, or None.

    Returns:
      An object usable as a context manager.

    Raises:
      ValueError: ``mesh`` is not a Mesh (JAX's error).

    Example:
      >>> with set_mesh(make_mesh((1,), ("x",))):
      ...     get_abstract_mesh().axis_names
      ('x',)
    """
    if mesh is not None and not isinstance(mesh, Mesh):
        raise ValueError(f"Expected mesh of type `plax.sharding.Mesh`. Got {type(mesh)}")
    previous = _global_mesh[0]
    _global_mesh[0] = mesh
    _refresh_mesh_flag()
    return _SetMesh(previous)


# ------------------------------------------------------------------ resharding

def _is_sharding_leaf(s: Any) -> bool:
    return s is None or isinstance(s, (Sharding, PartitionSpec))


def _resolve(s: Any, what: str) -> Sharding:
    """``s`` as a Sharding: a PartitionSpec becomes a NamedSharding on the current mesh."""
    if isinstance(s, Sharding):
        return s
    if isinstance(s, PartitionSpec):
        mesh = _mesh_of_abstract(get_mesh())
        if mesh is None:
            raise ValueError(
                f"{what} got PartitionSpec {s!r}, but there is no current mesh to resolve it "
                "against. Enter one with `with plax.sharding.use_mesh(mesh):` or "
                "`plax.sharding.set_mesh(mesh)`, or pass NamedSharding(mesh, spec).")
        return NamedSharding(mesh, s)
    if s is None:
        raise ValueError(f"{what} got None, which is not allowed: pass a plax.sharding.Sharding "
                         "(e.g. NamedSharding(mesh, spec)) or a PartitionSpec")
    raise TypeError(f"{what} must be plax.sharding.Sharding or PartitionSpec instances, got "
                    f"{s!r} of type {type(s).__name__}")


def _mesh_of_abstract(mesh: "Mesh | None") -> "Mesh | None":
    """The concrete mesh a PartitionSpec is resolved against: ``mesh`` (the current one), or,
    inside ``use_abstract_mesh`` with an abstract mesh of other axes, that abstract mesh laid
    over the current mesh's devices (of the default devices without one) in their order, as
    JAX lays it over the devices of the computation."""
    # (until plax.sharding_abstract is loaded no use_abstract_mesh block can be open)
    module = _sys.modules.get("plax.sharding_abstract")
    abstract = None if module is None else module.current_abstract_mesh()
    if abstract is None or abstract.empty or (mesh is not None and
                                              mesh.abstract_mesh == abstract):
        return mesh
    import plax
    flat = list(mesh.devices_flat) if mesh is not None else plax.devices()
    if len(flat) < abstract.size:
        raise ValueError(f"use_abstract_mesh({abstract!r}) needs {abstract.size} devices, but "
                         f"there are {len(flat)}")
    devices = np.array(flat[:abstract.size], dtype=object).reshape(abstract.axis_sizes)
    return Mesh(devices, abstract.axis_names, axis_types=abstract.axis_types)


def _padded(s: Sharding, ndim: int) -> Sharding:
    """A NamedSharding with its spec padded with ``None`` to ``ndim`` entries (as JAX's
    ``reshard`` normalizes it: ``P('x')`` of a matrix reads ``P('x', None)``)."""
    if isinstance(s, NamedSharding) and len(s.spec) < ndim:
        return NamedSharding(s.mesh, PartitionSpec(*s.spec.partitions,
                                                   *(None,) * (ndim - len(s.spec))))
    return s


def _place_tree(xs: Any, shardings: Any, what: str, pad_spec: bool = False,
                typed: bool = False) -> Any:
    """The one implementation of :func:`reshard` and ``lax.with_sharding_constraint``.

    ``shardings`` is a pytree prefix of ``xs`` whose leaves are Shardings or PartitionSpecs.
    Concrete leaves of ``xs`` are placed as their sharding says (a NamedSharding over one
    device included: the result carries it). Traced leaves are returned unchanged (plax's
    ``jit`` does not partition), except that with ``typed`` (``reshard``) a sharding over
    an Explicit mesh becomes the traced value's type.
    """
    from plax import tree_util
    from plax.core.trace import Tracer
    from plax.device import _shard_leaf, device_put
    from plax.sharding_types import cast

    leaves, treedef = tree_util.tree_flatten(xs)
    try:  # one target per leaf of xs (a sharding over an empty subtree applies to nothing)
        targets = treedef.flatten_up_to(
            tree_util.tree_broadcast(shardings, xs, is_leaf=_is_sharding_leaf))
    except ValueError as err:
        raise ValueError(f"{what} must be a single Sharding or PartitionSpec, or a pytree "
                         f"prefix of the values' structure {treedef!r}; got {shardings!r}:\n"
                         f"{err}") from None
    out = []
    for leaf, target in zip(leaves, targets):
        s = _resolve(target, what)
        ndim = len(np.shape(leaf)) if not isinstance(leaf, Tracer) else leaf.ndim
        if pad_spec and isinstance(s, NamedSharding) and len(s.spec) > ndim and \
                all(e is None for e in s.spec.partitions[ndim:]):
            # JAX's reshard and out_sharding= accept a spec padded with trailing Nones
            s = NamedSharding(s.mesh, PartitionSpec(*s.spec.partitions[:ndim]))
        if isinstance(s, NamedSharding) and len(s.spec) > ndim:
            raise ValueError(f"{what}: {s!r} has {len(s.spec)} entries, but the value it applies "
                             f"to has rank {ndim} (shape {tuple(np.shape(leaf))})")
        if pad_spec:
            s = _padded(s, ndim)
        if isinstance(leaf, Tracer):
            # under a trace an explicit sharding becomes the value's type; others do nothing
            explicit = typed and isinstance(s, NamedSharding) and \
                AxisType.Explicit in s.mesh.axis_types
            if not typed and isinstance(s, NamedSharding) and \
                    AxisType.Explicit not in s.mesh.axis_types and s.mesh.size > 1:
                # with_sharding_constraint over Auto axes: staged for jit's layouts
                from plax.sharding_auto import constrain
                out.append(constrain(leaf, s))
                continue
            out.append(cast(leaf, s) if explicit else leaf)
        elif isinstance(s, SingleDeviceSharding):
            out.append(device_put(leaf, s))
        else:
            out.append(_shard_leaf(leaf, s))
    return tree_util.tree_unflatten(treedef, out)


def reshard(xs: Any, out_shardings: Any) -> Any:
    """Places arrays as ``out_shardings`` say (JAX 0.10's ``jax.sharding.reshard``).

    Eagerly this is ``plax.device_put(x, NamedSharding(mesh, spec))`` for each leaf: the
    result is split over the sharding's devices and its ``.sharding`` is the given one (its
    spec padded with ``None`` to the array's rank, as JAX does). Under a transformation
    (``jit``, ``grad``, ``vmap``, ...) a sharding over an Explicit mesh becomes the traced
    value's type (``jit(f)(x).sharding`` of an output is then that sharding, as in JAX);
    other shardings leave traced values unchanged.

    Args:
      xs: an array, or a pytree of arrays (NumPy arrays and scalars are accepted).
      out_shardings: a :class:`Sharding` or :class:`PartitionSpec` for every leaf, or a
        pytree prefix of ``xs`` of them. A PartitionSpec is resolved against the current
        mesh (:func:`get_mesh`, set with :func:`use_mesh` or :func:`set_mesh`).

    Returns:
      ``xs`` with every leaf a :class:`plax.Array` placed as its sharding says.

    Raises:
      ValueError: a PartitionSpec is given with no current mesh, a sharding is None, a spec
        is longer than its array's rank, or ``out_shardings`` is not a prefix of ``xs``.
      TypeError: a leaf of ``out_shardings`` is neither a Sharding nor a PartitionSpec.

    Example:
      >>> mesh = make_mesh((1,), ("x",))
      >>> y = reshard(jnp.arange(4.0), NamedSharding(mesh, PartitionSpec("x")))
      >>> y.sharding
      NamedSharding(mesh=Mesh('x': 1, axis_types=(Explicit,)), spec=P('x',), memory_kind=device)
      >>> with use_mesh(mesh):
      ...     reshard({"w": jnp.ones((2, 2))}, PartitionSpec("x"))["w"].sharding.spec
      P('x', None)
    """
    _check_reshard_axes(out_shardings)
    return _place_tree(xs, out_shardings, "reshard out_shardings", pad_spec=True, typed=True)


def _check_reshard_axes(out_shardings: Any, caller: str = "reshard") -> None:
    """JAX's ValueError for a NamedSharding given to ``reshard`` (or the ``out_sharding=`` of
    ``caller``) whose spec names a mesh axis that is not Explicit (it says a type; an Auto
    axis has none)."""
    from plax import tree_util
    for s in tree_util.tree_leaves(out_shardings, is_leaf=_is_sharding_leaf):
        if not isinstance(s, NamedSharding):
            continue
        types = dict(zip(s.mesh.axis_names, s.mesh.axis_types))
        for entry in s.spec.partitions:
            for name in (entry if isinstance(entry, tuple) else (entry,)):
                if name is not None and types.get(name, AxisType.Explicit) != \
                        AxisType.Explicit:
                    raise ValueError(
                        f"PartitionSpec passed to {caller} cannot contain axis names that are "
                        f"of type Auto or Manual. Got PartitionSpec: {s.spec!r} with axis "
                        f"name: {name} of type: AxisType.{types[name].name}.")


def _decorator_mesh(axes: str | tuple | None, shardings: Any, caller: str) -> Mesh | None:
    """The mesh ``auto_axes``/``explicit_axes`` work on: the current one, or that of the
    NamedShardings among ``shardings`` (which must agree), or None. Checks ``axes``."""
    from plax import tree_util
    found = None
    for s in tree_util.tree_leaves(shardings, is_leaf=_is_sharding_leaf):
        if isinstance(s, NamedSharding):
            if found is not None and _abstract(found) != _abstract(s.mesh):
                raise ValueError(f"Shardings passed to {caller} should have the same mesh; got "
                                 f"{found} and {s.mesh}")
            found = s.mesh
    current = get_mesh()
    if current is not None and found is not None and _abstract(current) != _abstract(found):
        raise ValueError(f"{caller}: the current mesh {current!r} must match the mesh of the "
                         f"shardings {found!r}")
    mesh = current if current is not None else found
    if mesh is None:
        return None
    for a in _axes_tuple(axes, mesh):
        if a not in mesh.axis_names:
            raise ValueError(f"{caller}: axes names {a!r}, which mesh {mesh} does not have")
        if mesh.axis_types[mesh.axis_names.index(a)] is AxisType.Manual:
            raise NotImplementedError(f"{caller}: going from a Manual axis ({a!r}) to an Auto "
                                      "or Explicit one is not supported (as in JAX)")
    return mesh


def _abstract(mesh: Mesh) -> tuple:
    return mesh.axis_names, mesh.axis_sizes, mesh.axis_types


def _axes_tuple(axes: str | tuple | None, mesh: Mesh) -> tuple:
    if axes is None:
        return mesh.axis_names
    return axes if isinstance(axes, tuple) else (axes,)


def _retyped_mesh(mesh: Mesh, axes: str | tuple | None, axis_type: "AxisType") -> Mesh:
    """``mesh`` with ``axes`` (default: all) of type ``axis_type``: the mesh that
    ``auto_axes``/``explicit_axes`` make current while their function runs."""
    names = set(_axes_tuple(axes, mesh))
    return mesh.update(axis_types=tuple(
        axis_type if a in names else t for a, t in zip(mesh.axis_names, mesh.axis_types)))


def _onto_mesh(xs: Any, mesh: Mesh) -> Any:
    """Each explicitly sharded leaf of ``xs`` re-typed onto ``mesh`` (the same devices with
    other axis types), keeping its spec: its placement does not change, and its type keeps
    only the axes that are Explicit on ``mesh`` (JAX drops the others from the spec)."""
    from plax import tree_util
    from plax.core.trace import Tracer
    from plax.device import _shard_leaf
    from plax.sharding_types import cast, explicit_type

    def one(x):
        s = explicit_type(x) if isinstance(x, Tracer) else getattr(x, "sharding", None)
        if not isinstance(s, NamedSharding) or s.mesh is mesh or \
                s.mesh.axis_names != mesh.axis_names:
            return x
        if not isinstance(x, Tracer):
            return _shard_leaf(x, NamedSharding(mesh, s.spec))
        # a traced type names the Explicit axes only (typing rules read the spec as it is)
        keep = set(mesh.explicit_axes)
        entries = []
        for e in s.spec.partitions:
            names = tuple(a for a in (e if isinstance(e, tuple) else (e,))
                          if a is not None and a in keep)
            entries.append(names[0] if len(names) == 1 else names or None)
        return cast(x, NamedSharding(mesh, PartitionSpec(*entries)))
    return tree_util.tree_map(one, xs)


def _pop_required(kwargs: dict, given: Any, name: str) -> Any:
    if given is not None:
        return given
    if name in kwargs:
        return kwargs.pop(name)
    raise TypeError(f"Missing required keyword argument: {name!r}")


def auto_axes(f: Callable | None = None, /, *, axes: str | tuple[str, ...] | None = None,
              out_sharding: Any = None) -> Callable:
    """Runs ``f`` with mesh ``axes`` (default: all) of type ``Auto``, then reshards its
    outputs to ``out_sharding`` (JAX 0.10's ``jax.sharding.auto_axes``).

    plax does not partition computations, so ``f`` is called unchanged; as in JAX, its
    outputs are then resharded with :func:`reshard` (eagerly placed; unchanged under
    ``jit``) -- unless there is neither a current mesh nor a NamedSharding in
    ``out_sharding``, or the axes are all ``Auto`` already, in which cases JAX returns ``f``'s
    outputs as they are and so does plax.

    Args:
      f: the function; without it, ``auto_axes(axes=..., out_sharding=...)`` is a decorator.
      axes: the mesh axis name, or tuple of names, made ``Auto`` (default: every axis).
      out_sharding: the outputs' sharding (a pytree prefix of them, as for :func:`reshard`).
        If None, each call must pass ``out_sharding=`` as a keyword argument (it is not
        passed on to ``f``).

    Returns:
      The wrapped function.

    Raises:
      TypeError: (at the call) no ``out_sharding`` was given.
      ValueError: ``axes`` names an axis the mesh lacks, or the shardings' meshes differ
        from each other or from the current mesh.

    Example:
      >>> mesh = make_mesh((1,), ("x",))
      >>> double = auto_axes(lambda a: a * 2, out_sharding=NamedSharding(mesh, P("x")))
      >>> y = double(jnp.arange(3.0))
      >>> y, y.sharding.spec
      (Array([0., 2., 4.], dtype=float32), P('x',))
    """
    if f is None:
        return lambda g: auto_axes(g, axes=axes, out_sharding=out_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        sharding = _pop_required(kwargs, out_sharding, "out_sharding")
        mesh = _decorator_mesh(axes, sharding, "auto_axes")
        if mesh is None or set(mesh.auto_axes) == set(_axes_tuple(axes, mesh)):
            return f(*args, **kwargs)
        # as JAX: f runs under the mesh with those axes Auto, on arguments whose types no
        # longer name them (x + y of f32[4@X,4] and f32[4,4@X] is then legal)
        auto = _retyped_mesh(mesh, axes, AxisType.Auto)
        with use_mesh(auto):
            out = f(*_onto_mesh(args, auto), **kwargs)
        return _place_tree(out, sharding, "reshard out_shardings", pad_spec=True, typed=True)

    return wrapped


def explicit_axes(f: Callable | None = None, /, *, axes: str | tuple[str, ...] | None = None,
                  in_sharding: Any = None) -> Callable:
    """Reshards the positional arguments to ``in_sharding``, then runs ``f`` with mesh
    ``axes`` (default: all) of type ``Explicit`` (JAX 0.10's ``jax.sharding.explicit_axes``).

    plax does not partition computations, so ``f`` is called unchanged on the arguments
    :func:`reshard` gives (eagerly placed; unchanged under ``jit``), and its outputs are
    returned as they are. As in JAX a current mesh is required.

    Args:
      f: the function; without it, ``explicit_axes(axes=..., in_sharding=...)`` is a
        decorator.
      axes: the mesh axis name, or tuple of names, made ``Explicit`` (default: every axis).
      in_sharding: the sharding of the positional arguments (a pytree prefix of the tuple of
        them, as for :func:`reshard`). If None, each call must pass ``in_sharding=`` as a
        keyword argument (it is not passed on to ``f``).

    Returns:
      The wrapped function.

    Raises:
      TypeError: (at the call) no ``in_sharding`` was given.
      ValueError: (at the call) there is no current mesh, or ``axes`` names an axis it
        lacks.

    Example:
      >>> with use_mesh(make_mesh((1,), ("x",))):
      ...     explicit_axes(lambda a: a + 1, in_sharding=P("x"))(jnp.zeros(2))
      Array([1., 1.], dtype=float32)
    """
    if f is None:
        return lambda g: explicit_axes(g, axes=axes, in_sharding=in_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        sharding = _pop_required(kwargs, in_sharding, "in_sharding")
        if get_mesh() is None:
            raise ValueError("explicit_axes needs a current mesh: enter one with "
                             "`with plax.sharding.use_mesh(mesh):` or "
                             "`plax.sharding.set_mesh(mesh)`")
        mesh = _decorator_mesh(axes, None, "explicit_axes")
        # as JAX: f runs under the mesh with those axes Explicit on arguments resharded (and
        # typed) as in_sharding says; its outputs return typed for the caller's mesh
        explicit = _retyped_mesh(mesh, axes, AxisType.Explicit)
        with use_mesh(explicit):
            args = _place_tree(args, sharding, "reshard out_shardings", pad_spec=True,
                               typed=True)
            out = f(*args, **kwargs)
        return _onto_mesh(out, mesh)

    return wrapped


def make_single_device_sharding(device, *, memory_kind: str | None = None
                                ) -> SingleDeviceSharding:
    """The sharding of an array held whole by ``device`` (JAX's
    ``jax.sharding.make_single_device_sharding``).

    Args:
      device: a plax Device.
      memory_kind: the kind of memory (:mod:`plax.memory`; None: ``"device"``).

    Returns:
      ``SingleDeviceSharding(device, memory_kind=memory_kind)``.

    Example:
      >>> make_single_device_sharding(plax.devices()[0])
      SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)
    """
    return SingleDeviceSharding(device, memory_kind=memory_kind)


__all__ = ["Sharding", "SingleDeviceSharding", "make_single_device_sharding", "NamedSharding", "IndexMapSharding", "Mesh",
           "PartitionSpec", "P", "Shard", "make_mesh", "index_shape", "PositionalSharding",
           "get_mesh", "get_abstract_mesh", "AbstractMesh", "use_mesh", "set_mesh", "AxisType",
           "reshard", "AbstractDevice", "ManualAxisType", "use_abstract_mesh",
           "auto_axes", "explicit_axes"]

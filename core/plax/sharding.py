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

Example:
  >>> mesh = Mesh(np.array(plax.devices()[:1]), ("x",))
  >>> NamedSharding(mesh, PartitionSpec("x")).devices_indices_map((4,))
  {CpuDevice(id=0): (slice(None, None, None),)}
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

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

    @property
    def memory_kind(self) -> None:
        return None

    def with_memory_kind(self, kind: str | None) -> "Sharding":
        """This sharding (plax has one kind of memory per device)."""
        return self

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

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        return {self._device: _full_index(len(global_shape))}

    is_fully_replicated = property(lambda self: True)

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self._device!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, SingleDeviceSharding) and other._device == self._device

    def __hash__(self) -> int:
        return hash(self._device)


class PartitionSpec(tuple):
    """For each array dimension, the mesh axes that split it: ``None`` (not split), an axis
    name, or a tuple of names (split over their product, the first name major). Dimensions
    beyond the spec are not split.

    Example:
      >>> PartitionSpec("x", None)
      PartitionSpec('x', None)
    """

    def __new__(cls, *partitions: Any):
        for p in partitions:
            names = p if isinstance(p, tuple) else (p,)
            if p is not None and not all(isinstance(n, str) for n in names):
                raise TypeError(f"PartitionSpec entries must be None, a mesh axis name or a "
                                f"tuple of names, got {p!r}")
        return super().__new__(cls, partitions)

    def __repr__(self) -> str:
        return f"PartitionSpec({', '.join(map(repr, self))})"

    def __eq__(self, other) -> bool:
        # Unlike a tuple, equal only to another spec; trailing Nones change nothing.
        return isinstance(other, PartitionSpec) and _strip(self) == _strip(other)

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(_strip(self))

    def __reduce__(self):
        return (PartitionSpec, tuple(self))


P = PartitionSpec


def _strip(spec: tuple) -> tuple:
    out = tuple(spec)
    while out and out[-1] is None:
        out = out[:-1]
    return out


class Mesh:
    """Devices laid out in an n-dimensional grid with named axes.

    Args:
      devices: an array (or nested sequence) of distinct plax Devices.
      axis_names: one name per dimension of ``devices``.

    Example:
      >>> Mesh(np.array(plax.devices()[:1]), ("x",))
      Mesh('x': 1)
    """

    def __init__(self, devices: Any, axis_names: str | Sequence[str]):
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

    @property
    def shape(self) -> dict:
        """``{axis name: size}`` in axis order."""
        return dict(zip(self.axis_names, self.devices.shape))

    axis_sizes = property(lambda self: tuple(self.devices.shape))
    size = property(lambda self: int(self.devices.size))
    device_ids = property(lambda self: np.vectorize(lambda d: d.id, otypes=[int])(self.devices))
    devices_flat = property(lambda self: tuple(self.devices.flat))

    def __repr__(self) -> str:
        axes = ", ".join(f"{n!r}: {s}" for n, s in self.shape.items())
        return f"Mesh({axes})"

    def __eq__(self, other) -> bool:
        return (isinstance(other, Mesh) and self.axis_names == other.axis_names
                and self.devices.shape == other.devices.shape
                and self.devices_flat == other.devices_flat)

    def __hash__(self) -> int:
        return hash((self.axis_names, self.devices.shape, self.devices_flat))


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

    def __init__(self, mesh: Mesh, spec: PartitionSpec | Sequence | None = None, *,
                 memory_kind: str | None = None):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"NamedSharding expects a plax.sharding.Mesh, got {mesh!r}")
        spec = PartitionSpec() if spec is None else spec
        if not isinstance(spec, PartitionSpec):
            spec = PartitionSpec(*spec)
        used: list[str] = []
        for entry in spec:
            for name in (() if entry is None else entry if isinstance(entry, tuple) else (entry,)):
                if name not in mesh.axis_names:
                    raise ValueError(f"PartitionSpec {spec!r} names axis {name!r}, which mesh "
                                     f"{mesh!r} does not have")
                if name in used:
                    raise ValueError(f"PartitionSpec {spec!r} uses mesh axis {name!r} twice")
                used.append(name)
        self.mesh = mesh
        self.spec = spec
        self._device_assignment = mesh.devices_flat

    def _axes(self, dim: int) -> tuple:
        entry = self.spec[dim] if dim < len(self.spec) else None
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
    def is_fully_replicated(self) -> bool:
        sizes = self.mesh.shape
        return all(sizes[a] == 1 for d in range(len(self.spec)) for a in self._axes(d))

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"

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


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str], *,
              devices: Sequence | None = None) -> Mesh:
    """A :class:`Mesh` of the given shape over the first devices of the default platform
    (or over ``devices``).

    Example:
      >>> make_mesh((1,), ("x",))
      Mesh('x': 1)
    """
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
    return Mesh(grid.reshape(tuple(axis_shapes)), tuple(axis_names))


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


_mesh_state = _MeshState()
_global_mesh: list = [None]


def get_mesh() -> Mesh | None:
    """The mesh set with :func:`use_mesh` (innermost) or :func:`set_mesh`, or None."""
    stack = _mesh_state.stack
    return stack[-1] if stack else _global_mesh[0]


get_abstract_mesh = get_mesh


@_contextlib.contextmanager
def use_mesh(mesh: Mesh):
    """Makes ``mesh`` the current mesh inside a ``with`` block (``shard_map`` without
    ``mesh=`` uses it).

    Example:
      >>> with use_mesh(make_mesh((1,), ("x",))):
      ...     get_mesh()
      Mesh('x': 1)
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(f"use_mesh expects a plax.sharding.Mesh, got {mesh!r}")
    _mesh_state.stack.append(mesh)
    try:
        yield mesh
    finally:
        _mesh_state.stack.pop()


class _SetMesh:
    """What :func:`set_mesh` returns: also a context manager restoring the previous mesh."""

    def __init__(self, previous):
        self.previous = previous

    def __enter__(self):
        return get_mesh()

    def __exit__(self, *exc):
        _global_mesh[0] = self.previous
        return False


def set_mesh(mesh: Mesh | None) -> _SetMesh:
    """Sets the current mesh for the whole program (None clears it); usable as a ``with``
    block that restores the previous one."""
    if mesh is not None and not isinstance(mesh, Mesh):
        raise TypeError(f"set_mesh expects a plax.sharding.Mesh or None, got {mesh!r}")
    previous = _global_mesh[0]
    _global_mesh[0] = mesh
    return _SetMesh(previous)


__all__ = ["Sharding", "SingleDeviceSharding", "NamedSharding", "IndexMapSharding", "Mesh",
           "PartitionSpec", "P", "Shard", "make_mesh", "index_shape", "PositionalSharding",
           "get_mesh", "get_abstract_mesh", "use_mesh", "set_mesh"]

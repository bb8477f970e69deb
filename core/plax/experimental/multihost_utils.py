"""``plax.experimental.multihost_utils``: host-side helpers for runs over several processes.

They exchange host values between the processes of a run started with
``plax.distributed.initialize()`` (see :mod:`plax.distributed`), through the transport of
the plugin that provides it (plax-pmap over MPI). With one process they work unchanged, as
if the run had one process. Every process must call them in the same order with arrays of
the same shapes and dtypes (a process whose shapes differ raises ``ValueError`` on every
process, naming the shapes); a process that does not arrive makes the others raise
``TimeoutError`` after ``PLAX_COLLECTIVE_TIMEOUT`` seconds.

plax Arrays are whole on every process (a ``shard_map`` over a mesh that spans processes
returns the whole result to each), so every input here is a process-local value:
``process_allgather`` stacks (or concatenates) the processes' values.
``host_local_array_to_global_array`` assembles a global Array from each process's part of it
(the blocks of that process's devices of a mesh), and ``global_array_to_host_local_array``
cuts this process's part back out.
"""
from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np

from plax import distributed, tree_util

__all__ = ["process_allgather", "broadcast_one_to_all", "sync_global_devices", "assert_equal",
           "host_local_array_to_global_array", "global_array_to_host_local_array"]

_MAX_RANK = 32


def _gather(x: np.ndarray) -> np.ndarray:
    """``x`` from every process, stacked in process order (one process: ``x[None]``)."""
    transport = distributed.transport()
    if transport is None:
        return x[None]
    timeout = distributed.collective_timeout()
    if x.ndim > _MAX_RANK:
        raise ValueError(f"multihost_utils: arrays of rank above {_MAX_RANK} are not supported "
                         f"(got shape {x.shape})")
    # first the shapes and dtypes, so that a mismatch is an error on every process, not a
    # transfer of unequal sizes
    sig = np.full(_MAX_RANK + 2, -1, np.int64)
    sig[0], sig[1] = x.ndim, zlib.crc32(x.dtype.str.encode())
    sig[2:2 + x.ndim] = x.shape
    sigs = transport.allgather(sig[None], timeout)
    if not (sigs == sigs[0]).all():
        shapes = [tuple(int(d) for d in s[2:2 + int(s[0])]) for s in sigs]
        raise ValueError(f"multihost_utils: the processes passed arrays of different shapes or "
                         f"dtypes (shapes by process: {shapes}; this process's dtype: "
                         f"{x.dtype}); every process must pass the same")
    return transport.allgather(np.ascontiguousarray(x)[None], timeout)


def process_allgather(in_tree: Any, tiled: bool = False) -> Any:
    """Gathers each leaf of ``in_tree`` from every process.

    Args:
      in_tree: a pytree of arrays (plax Arrays, NumPy arrays or scalars), the same shapes and
        dtypes on every process.
      tiled: concatenate the processes' values along their first axis instead of stacking
        them along a new one.

    Returns:
      The pytree of NumPy arrays: each leaf of shape ``(process_count, *shape)``, or with
      ``tiled=True`` ``(process_count * shape[0], *shape[1:])``.

    Raises:
      ValueError: the processes' shapes or dtypes differ, or ``tiled`` with a scalar leaf.

    Example:
      >>> process_allgather(jnp.arange(3)).shape   # one process
      (1, 3)
    """
    def one(leaf):
        x = np.asarray(leaf)
        if tiled and x.ndim == 0:
            raise ValueError("process_allgather(tiled=True) needs arrays of rank >= 1 (the "
                             "processes' values are concatenated along axis 0); got a scalar")
        out = _gather(x)
        return out.reshape((-1,) + x.shape[1:]) if tiled else out

    return tree_util.tree_map(one, in_tree)


def broadcast_one_to_all(in_tree: Any, is_source: bool | None = None) -> Any:
    """Every process receives the source process's value of each leaf of ``in_tree``.

    The data travel by the transport's ``bcast`` (``MPI_Ibcast`` with plax-pmap) where it
    has one, else by ``allgather``.

    Args:
      in_tree: a pytree of arrays, the same structure, shapes and dtypes on every process.
      is_source: whether this process is the source; exactly one process must pass True
        (default: process 0 is the source).

    Returns:
      The source's pytree, as NumPy arrays, on every process.

    Raises:
      ValueError: not exactly one process is the source, or the processes' pytrees,
        shapes or dtypes differ (on every process).
      TimeoutError: a process did not arrive within ``PLAX_COLLECTIVE_TIMEOUT`` seconds.

    Example:
      >>> broadcast_one_to_all(np.float32(2.0))   # one process: its own value
      array(2., dtype=float32)
    """
    if is_source is None:
        import plax
        is_source = plax.process_index() == 0
    leaves, treedef = tree_util.tree_flatten(in_tree)
    values = [np.asarray(leaf) for leaf in leaves]
    transport = distributed.transport()
    if transport is None:
        if not is_source:
            raise ValueError("broadcast_one_to_all: exactly one process must be the source, got "
                             "is_source=True on processes []")
        return tree_util.tree_unflatten(treedef, [np.array(v) for v in values])
    timeout = distributed.collective_timeout()
    heads = transport.allgather(np.asarray([[bool(is_source), len(values)]], np.int64),
                                timeout)
    sources = np.flatnonzero(heads[:, 0])
    if len(sources) != 1:
        raise ValueError(f"broadcast_one_to_all: exactly one process must be the source, got "
                         f"is_source=True on processes {sources.tolist()}")
    if not (heads[:, 1] == len(values)).all():
        raise ValueError(f"broadcast_one_to_all: the processes passed pytrees of different "
                         f"structures (numbers of leaves by process: {heads[:, 1].tolist()})")
    _check_same(transport, timeout, [_signature(v.shape, v.dtype) for v in values],
                tree_util.tree_flatten_with_path(in_tree)[0], "broadcast_one_to_all")
    src = int(sources[0])
    bcast = getattr(transport, "bcast", None)
    out = []
    for v in values:
        if not v.size:  # nothing to send
            out.append(np.array(v))
        elif bcast is not None:
            out.append(np.asarray(bcast(np.ascontiguousarray(v), src, timeout)).reshape(v.shape))
        else:  # a transport without bcast: everyone's values travel, the source's are kept
            out.append(transport.allgather(np.ascontiguousarray(v)[None], timeout)[src])
    return tree_util.tree_unflatten(treedef, out)


def sync_global_devices(name: str) -> None:
    """Waits until every process has reached a call with the same ``name`` (a barrier).

    Args:
      name: a label of this point of the program, the same on every process.

    Raises:
      AssertionError: the processes reached calls with different names (their programs
        diverged).
      TimeoutError: a process did not arrive within ``PLAX_COLLECTIVE_TIMEOUT`` seconds.

    Example:
      >>> sync_global_devices("checkpoint saved")   # one process: returns at once
    """
    tag = np.asarray(zlib.crc32(str(name).encode()), np.int64)
    tags = _gather(tag)
    if not (tags == tags[0]).all():
        raise AssertionError(f"sync_global_devices({name!r}): the processes reached barriers "
                             "with different names")


def assert_equal(in_tree: Any, fail_message: str = "") -> None:
    """Checks that every leaf of ``in_tree`` is equal on every process.

    Args:
      in_tree: a pytree of arrays, the same shapes and dtypes on every process (NaNs compare
        equal).
      fail_message: the start of the error's message.

    Raises:
      AssertionError: a leaf differs between processes (with ``fail_message``, naming the
        leaf).
      ValueError: the processes' shapes or dtypes differ.

    Example:
      >>> assert_equal({"w": jnp.ones(2)}, "parameters")   # one process: always equal
    """
    paths = tree_util.tree_flatten_with_path(in_tree)[0]
    for path, leaf in paths:
        values = _gather(np.asarray(leaf))
        if not all(np.array_equal(values[0], v, equal_nan=values.dtype.kind in "fc")
                   for v in values[1:]):
            where = tree_util.keystr(path) or "the value"
            raise AssertionError(f"{fail_message} {where} differs between processes".strip())


# ------------------------------------------------------------------ signatures

def _signature(shape: tuple, dtype: Any, extra: str = "") -> np.ndarray:
    """One row of int64 describing an array (and ``extra``, e.g. its PartitionSpec), for
    comparing between processes: rank, dtype, ``extra``, the whole shape (as a checksum,
    so any rank fits) and the first ``_MAX_RANK`` dimensions (for messages)."""
    row = np.full(_MAX_RANK + 4, -1, np.int64)
    row[0] = len(shape)
    row[1] = zlib.crc32(np.dtype(dtype).str.encode())
    row[2] = zlib.crc32(extra.encode())
    row[3] = zlib.crc32(repr(tuple(int(d) for d in shape)).encode())
    dims = tuple(shape)[:_MAX_RANK]
    row[4:4 + len(dims)] = dims
    return row


def _row_shape(row: np.ndarray) -> tuple:
    return tuple(int(d) for d in row[4:4 + min(int(row[0]), _MAX_RANK)])


def _where(path: tuple) -> str:
    return f"the leaf at {tree_util.keystr(path)}" if path else "the input"


def _check_same(transport: Any, timeout: float, rows: list, paths: list, fname: str,
                what: str = "shapes", subject: str = "shapes or dtypes") -> None:
    """Compares every process's ``rows`` (one :func:`_signature` per leaf; the same number
    of leaves on every process, checked before); raises the same ``ValueError`` on every
    process, naming the first leaf that differs."""
    if not rows:
        return
    table = transport.allgather(np.stack(rows)[None], timeout)  # (processes, leaves, row)
    differs = np.flatnonzero(~(table == table[0]).all(axis=(0, 2)))
    if differs.size:
        i = int(differs[0])
        shapes = [_row_shape(t[i]) for t in table]
        same_dtype = bool((table[:, i, 1] == table[0, i, 1]).all())
        same_extra = bool((table[:, i, 2] == table[0, i, 2]).all())
        detail = [f"{what} by process: {shapes}"]
        if not same_dtype:
            detail.append("their dtypes differ too" if len(set(shapes)) > 1
                          else "their dtypes differ")
        if not same_extra:
            detail.append("their PartitionSpecs differ")
        raise ValueError(f"{fname}: the processes passed different {subject} for "
                         f"{_where(paths[i][0])} ({'; '.join(detail)}); every process must "
                         "pass the same")


def _raise_if_any_failed(transport: Any, timeout: float, error: BaseException | None,
                         n_leaves: int, fname: str) -> None:
    """Every process says whether its own checks passed and how many leaves it has; if one
    failed, it raises its own error and the others a ``ValueError`` naming it (so that no
    process is left waiting in a collective the failing one never reaches)."""
    heads = transport.allgather(np.asarray([[error is None, n_leaves]], np.int64), timeout)
    if error is not None:
        raise error
    failed = np.flatnonzero(heads[:, 0] == 0).tolist()
    if failed:
        raise ValueError(f"{fname}: process(es) {failed} could not use their local inputs "
                         "(their own error says why)")
    if not (heads[:, 1] == n_leaves).all():
        raise ValueError(f"{fname}: the processes passed pytrees of different structures "
                         f"(numbers of leaves by process: {heads[:, 1].tolist()})")


# ------------------------------------------------------------------ mesh layout

class _Layout:
    """Which process holds each position of a mesh, and each process's block of it.

    ``owners`` has the mesh's shape and holds each device's process index; every process's
    positions must form one contiguous block (a sub-box of the mesh, as ``make_mesh`` over
    ``plax.devices()`` gives), which is that process's *local mesh*.
    """

    def __init__(self, owners: np.ndarray, axis_names: tuple):
        self.owners = np.asarray(owners, dtype=np.int64)
        self.names = tuple(axis_names)
        self.sizes = dict(zip(self.names, self.owners.shape))
        self.boxes: dict[int, tuple] = {}
        nd = self.owners.ndim
        for p in np.unique(self.owners).tolist():
            mine = self.owners == p
            box = []
            for ax in range(nd):
                hit = np.flatnonzero(mine.any(axis=tuple(a for a in range(nd) if a != ax)))
                box.append(slice(int(hit[0]), int(hit[-1]) + 1))
            if not mine[tuple(box)].all():
                raise ValueError(
                    f"the devices of process {p} do not form one contiguous block of the mesh "
                    f"(they sit at mesh positions {np.argwhere(mine).tolist()}); order the "
                    "mesh's devices by process, as plax.make_mesh over plax.devices() does")
            self.boxes[int(p)] = tuple(box)

    @classmethod
    def of(cls, mesh: Any, fname: str) -> "_Layout":
        """The layout of a :class:`plax.sharding.Mesh` (errors name ``fname``)."""
        from plax.sharding import Mesh
        if not isinstance(mesh, Mesh):
            raise TypeError(f"{fname}: global_mesh must be a plax.sharding.Mesh, got {mesh}")
        owners = np.vectorize(lambda d: int(getattr(d, "process_index", 0)),
                              otypes=[np.int64])(mesh.devices)
        try:
            return cls(owners, mesh.axis_names)
        except ValueError as err:
            raise ValueError(f"{fname}: {err}") from None

    def local_sizes(self, p: int) -> dict:
        return {n: s.stop - s.start for n, s in zip(self.names, self.boxes[p])}

    @staticmethod
    def axes(spec: tuple, d: int) -> tuple:
        entry = spec[d] if d < len(spec) else None
        return () if entry is None else entry if isinstance(entry, tuple) else (entry,)

    def parts(self, spec: tuple, ndim: int, sizes: dict) -> list:
        """Into how many blocks each dimension is cut over a mesh of ``sizes``."""
        return [math.prod(sizes[a] for a in self.axes(spec, d)) for d in range(ndim)]

    def _block(self, coords: tuple, spec: tuple, sizes: dict, step: list) -> tuple:
        """The index of the block held at mesh position ``coords`` (of a mesh of ``sizes``),
        blocks being ``step`` long in each dimension."""
        index = []
        for d, b in enumerate(step):
            k = 0
            for a in self.axes(spec, d):
                k = k * sizes[a] + coords[self.names.index(a)]
            index.append(slice(k * b, (k + 1) * b))
        return tuple(index)

    def local_shape(self, p: int, spec: tuple, global_shape: tuple) -> tuple:
        local = self.parts(spec, len(global_shape), self.local_sizes(p))
        whole = self.parts(spec, len(global_shape), self.sizes)
        return tuple(n // k * m for n, k, m in zip(global_shape, whole, local))

    def global_shape(self, p: int, spec: tuple, local_shape: tuple) -> tuple:
        local = self.parts(spec, len(local_shape), self.local_sizes(p))
        whole = self.parts(spec, len(local_shape), self.sizes)
        return tuple(n // m * k for n, k, m in zip(local_shape, whole, local))

    def assemble(self, spec: tuple, global_shape: tuple, dtype: Any, parts: dict) -> np.ndarray:
        """The global array from ``parts`` (``{process: its local array}``). A block that
        several processes hold (a mesh axis the spec does not name spans processes) is taken
        from the first of them in mesh order."""
        out = np.empty(global_shape, dtype)
        step = [n // k for n, k in zip(global_shape,
                                       self.parts(spec, len(global_shape), self.sizes))]
        done = set()
        for coords in np.ndindex(*self.owners.shape):
            where = self._block(coords, spec, self.sizes, step)
            key = tuple(s.start for s in where)
            if key in done:
                continue
            done.add(key)
            p = int(self.owners[coords])
            box = self.boxes[p]
            local = tuple(c - s.start for c, s in zip(coords, box))
            out[where] = parts[p][self._block(local, spec, self.local_sizes(p), step)]
        return out

    def extract(self, p: int, spec: tuple, x: np.ndarray) -> np.ndarray:
        """Process ``p``'s local array: the blocks of its devices, laid out over its local
        mesh."""
        out = np.empty(self.local_shape(p, spec, x.shape), x.dtype)
        step = [n // k for n, k in zip(x.shape, self.parts(spec, x.ndim, self.sizes))]
        box = self.boxes[p]
        local_sizes = self.local_sizes(p)
        for local in np.ndindex(*(s.stop - s.start for s in box)):
            coords = tuple(c + s.start for c, s in zip(local, box))
            out[self._block(local, spec, local_sizes, step)] = \
                x[self._block(coords, spec, self.sizes, step)]
        return out


# ------------------------------------------------------------------ local <-> global

def _specs_per_leaf(fname: str, pspecs: Any, inputs: Any) -> list:
    """One PartitionSpec per leaf of ``inputs``; ``pspecs`` is a pytree prefix of them."""
    from plax.sharding import PartitionSpec

    def is_spec(x):
        return isinstance(x, PartitionSpec)

    try:
        specs = tree_util.tree_structure(inputs).flatten_up_to(
            tree_util.tree_broadcast(pspecs, inputs, is_leaf=is_spec))
    except ValueError as exc:
        # JAX's message for a None where a spec belongs
        specs_n, def_n = tree_util.tree_flatten(pspecs, is_leaf=lambda x: x is None or is_spec(x))
        try:
            subs_n = def_n.flatten_up_to(inputs)
        except ValueError:
            subs_n = []
        if any(s is None and tree_util.tree_leaves(t) for s, t in zip(specs_n, subs_n)):
            raise ValueError(f"{fname}: None is not a valid input to the pspecs argument; use "
                             "PartitionSpec() to replicate an input") from None
        raise ValueError(f"{fname}: pspecs must be a PartitionSpec or a pytree prefix of the "
                         f"inputs (one PartitionSpec per leaf or per subtree).\n{exc}") from None
    bad = next((spec for spec in specs if not is_spec(spec)), None)
    if bad is not None:
        raise TypeError(f"{fname}: pspecs must hold PartitionSpecs, got {bad!r}")
    return specs


def _host(leaf: Any, where: str, fname: str) -> np.ndarray:
    """``leaf`` as a NumPy array of a plax dtype (Python scalars canonicalized as plax does)."""
    from plax import dtypes
    x = np.asarray(leaf)
    if x.dtype == dtypes.float0:  # as JAX: float0 values travel as booleans
        return np.zeros(x.shape, np.bool_)
    try:
        return x.astype(dtypes.canonicalize_dtype(x.dtype), copy=False)
    except TypeError as err:
        raise TypeError(f"{fname}: {where} is not an array ({err})") from None


def _value(leaf: Any, alone: bool, sharding: Any, where: str, fname: str) -> tuple[Any, bool]:
    """``(leaf, True)`` where ``leaf`` can be returned as it is (a traced value, or an Array
    with the result's sharding, when the mesh is this process's alone), else ``(its host
    value, False)``."""
    from plax.array import Array
    from plax.core.trace import Tracer
    if isinstance(leaf, Tracer):
        if not alone:
            raise TypeError(f"{fname}: {where} is traced; across processes the values must be "
                            "concrete (call it outside jit, grad and vmap)")
        return leaf, True
    if alone and isinstance(leaf, Array) and leaf.sharding == sharding:
        return leaf, True
    return _host(leaf, where, fname), False


def _check_processes(layout: _Layout, pi: int, transport: Any, mesh: Any, fname: str) -> None:
    if pi not in layout.boxes:
        raise ValueError(f"{fname}: the mesh {mesh} has none of this process's devices "
                         f"(process {pi}): use a mesh over plax.devices()")
    if transport is None and set(layout.boxes) != {pi}:
        raise ValueError(f"{fname}: the mesh {mesh} holds devices of processes "
                         f"{sorted(layout.boxes)}, but this run has one process")


def _sharding(mesh: Any, spec: Any, where: str, fname: str) -> Any:
    """``NamedSharding(mesh, spec)``; its error (an axis the mesh lacks, or named twice)
    names the leaf."""
    from plax.sharding import NamedSharding
    try:
        return NamedSharding(mesh, spec)
    except ValueError as err:
        raise ValueError(f"{fname}: the spec for {where}: {err}") from None


def _check_rank(spec: Any, shape: tuple, where: str, fname: str) -> None:
    if len(spec) > len(shape):
        raise ValueError(f"{fname}: {spec!r} has {len(spec)} entries but {where} has rank "
                         f"{len(shape)} (shape {tuple(shape)})")


def _fit(layout: _Layout, p: int, spec: Any, shape: tuple, sizes: dict, where: str,
         fname: str, what: str) -> None:
    """Checks that each dimension of ``shape`` divides into the blocks that ``spec`` cuts it
    into over a mesh of ``sizes``."""
    for d, (n, k) in enumerate(zip(shape, layout.parts(spec, len(shape), sizes))):
        if n % k:
            axes = layout.axes(spec, d)
            raise ValueError(
                f"{fname}: {where} has {what} shape {tuple(shape)}, but {spec!r} splits its "
                f"dimension {d} over mesh axes {axes} ({', '.join(f'{a}={sizes[a]}' for a in axes)}"
                f"{' on this process' if what == 'local' else ''}) into {k} blocks, and its size "
                f"{n} is not divisible by {k}")


def _put(host: np.ndarray, sharding: Any) -> Any:
    """``host`` as a plax Array with ``sharding`` (a NamedSharding even over one device)."""
    import plax
    return plax.make_array_from_callback(host.shape, sharding, lambda index: host[index],
                                         dtype=host.dtype)


def host_local_array_to_global_array(local_inputs: Any, global_mesh: Any, pspecs: Any) -> Any:
    """Assembles global Arrays from each process's local part of them.

    Each process passes its *local* value of each leaf: the blocks that ``pspecs`` assigns to
    this process's devices of ``global_mesh``, laid out as over its *local mesh* (the block
    of the mesh that its devices form). Along a dimension split over mesh axes that span
    processes the global array is the processes' local values side by side, in mesh order;
    along a dimension not split across processes (``P(None)``, or axes within a process)
    every process holds the whole dimension. So with ``global_mesh = make_mesh((n,), ("x",))``
    over every process's devices and ``P("x")``, the global array is the processes' local
    arrays concatenated in process order. The processes exchange their local values through
    the transport (one ``allgather``), and every process receives the whole global array, as
    plax Arrays are whole on every process. With one process (or a mesh of this process's
    devices only) the global array is the local one and nothing is exchanged.

    Where a spec leaves a mesh axis that spans processes unnamed, the processes should pass
    equal values (JAX leaves unequal ones undefined); plax takes the first process's (in
    mesh order). Unlike JAX, where an Array that is not fully addressable is returned as is,
    every input is taken as local (plax Arrays are whole everywhere); with one process an
    Array that already has the result's sharding is returned unchanged.

    Every process of the run must call it, in the same order, with the same mesh, pytree
    structure and specs.

    Args:
      local_inputs: a pytree of this process's values (plax Arrays, NumPy arrays, scalars).
      global_mesh: a :class:`plax.sharding.Mesh` over the devices of every process; each
        process's devices must form one contiguous block of it.
      pspecs: a :class:`plax.sharding.PartitionSpec`, or a pytree prefix of
        ``local_inputs`` with one per leaf or subtree (``PartitionSpec()`` replicates).

    Returns:
      The pytree of global plax Arrays, each with sharding
      ``NamedSharding(global_mesh, spec)``.

    Raises:
      ValueError: a local shape does not fit the mesh and spec (naming the leaf and the
        dimension), ``pspecs`` is not a prefix of ``local_inputs`` or holds None, a spec
        names an axis the mesh lacks, a process's devices are not a contiguous block of the
        mesh or this process has none, or the processes' inputs disagree in structure,
        global shape, dtype or spec (on every process).
      TypeError: a spec is not a PartitionSpec, or a leaf is not an array (or is traced,
        in a run of several processes).
      TimeoutError: a process did not arrive within ``PLAX_COLLECTIVE_TIMEOUT`` seconds.

    Example:
      >>> mesh = jax.make_mesh((1,), ("x",))
      >>> P = jax.sharding.PartitionSpec
      >>> g = host_local_array_to_global_array(np.arange(4.0), mesh, P("x"))   # one process
      >>> g
      Array([0., 1., 2., 3.], dtype=float32)
      >>> g.sharding == jax.sharding.NamedSharding(mesh, P("x"))
      True
    """
    import plax
    from plax.sharding import NamedSharding
    fname = "host_local_array_to_global_array"
    pi = plax.process_index()
    layout = _Layout.of(global_mesh, fname)  # the same mesh everywhere: the same errors
    transport = distributed.transport()
    alone = set(layout.boxes) == {pi}
    paths, treedef = tree_util.tree_flatten_with_path(local_inputs)
    error: BaseException | None = None
    values: list = []
    kept: list = []  # whether each leaf is returned as it is
    specs: list = []
    shapes: list = []
    try:
        _check_processes(layout, pi, transport, global_mesh, fname)
        specs = _specs_per_leaf(fname, pspecs, local_inputs)
        sizes = layout.local_sizes(pi)
        for (path, leaf), spec in zip(paths, specs):
            where = _where(path)
            value, keep = _value(leaf, alone, _sharding(global_mesh, spec, where, fname), where,
                                 fname)
            _check_rank(spec, value.shape, where, fname)
            _fit(layout, pi, spec, value.shape, sizes, where, fname, "local")
            values.append(value)
            kept.append(keep)
            shapes.append(layout.global_shape(pi, spec, tuple(value.shape)))
    except Exception as err:  # noqa: BLE001 -- every process must learn of it, then it is raised
        if transport is None or alone:
            raise
        error = err
    if alone:  # global == local
        out = []
        for value, keep, spec in zip(values, kept, specs):
            out.append(value if keep else _put(value, NamedSharding(global_mesh, spec)))
        return tree_util.tree_unflatten(treedef, out)

    timeout = distributed.collective_timeout()
    _raise_if_any_failed(transport, timeout, error, len(paths), fname)
    _check_same(transport, timeout,
                [_signature(g, v.dtype, repr(s)) for g, v, s in zip(shapes, values, specs)],
                paths, fname, what="global shapes", subject="shapes, dtypes or specs")
    # every process's local shapes follow from the global ones: pack the local values as
    # bytes, pad to the longest, and gather them at once
    procs = sorted(layout.boxes)
    offsets = {q: [] for q in procs}
    lengths = {}
    for q in procs:
        n = 0
        for g, v, s in zip(shapes, values, specs):
            offsets[q].append(n)
            n += math.prod(layout.local_shape(q, s, g)) * v.dtype.itemsize
        lengths[q] = n
    longest = max(lengths.values())
    mine = np.zeros(longest, np.uint8)
    for v, off in zip(values, offsets[pi]):
        mine[off:off + v.nbytes] = np.ascontiguousarray(v).reshape(-1).view(np.uint8)
    everyone = transport.allgather(mine[None], timeout) if longest else None
    out = []
    for i, (g, v, s) in enumerate(zip(shapes, values, specs)):
        parts = {}
        for q in procs:
            if q == pi:
                parts[q] = v
                continue
            shape = layout.local_shape(q, s, g)
            off = offsets[q][i]
            raw = everyone[q, off:off + math.prod(shape) * v.dtype.itemsize]
            parts[q] = raw.view(v.dtype).reshape(shape)
        out.append(_put(layout.assemble(s, g, v.dtype, parts), NamedSharding(global_mesh, s)))
    return tree_util.tree_unflatten(treedef, out)


def global_array_to_host_local_array(global_inputs: Any, global_mesh: Any, pspecs: Any) -> Any:
    """This process's local part of global Arrays: the inverse of
    :func:`host_local_array_to_global_array`.

    For each leaf, the blocks that ``pspecs`` assigns to this process's devices of
    ``global_mesh``, laid out over its *local mesh* (the block of the mesh its devices
    form). Nothing is exchanged between processes: plax Arrays are whole on every process.
    With one process (or a mesh of this process's devices only) the local array is the
    global one; an Array that already has the result's sharding is returned unchanged.

    Args:
      global_inputs: a pytree of global values (plax Arrays, NumPy arrays, scalars).
      global_mesh: a :class:`plax.sharding.Mesh` over the devices of every process; each
        process's devices must form one contiguous block of it.
      pspecs: a :class:`plax.sharding.PartitionSpec`, or a pytree prefix of
        ``global_inputs`` with one per leaf or subtree.

    Returns:
      The pytree of local plax Arrays, each with sharding ``NamedSharding(local_mesh, spec)``
      where ``local_mesh`` is this process's block of ``global_mesh``.

    Raises:
      ValueError: a global shape does not divide as the mesh and spec say (naming the leaf
        and the dimension), ``pspecs`` is not a prefix of ``global_inputs`` or holds None, a
        spec names an axis the mesh lacks, or a process's devices are not a contiguous block
        of the mesh or this process has none.
      TypeError: a spec is not a PartitionSpec, or a leaf is not an array (or is traced, in
        a run of several processes).

    Example:
      >>> mesh = jax.make_mesh((1,), ("x",))
      >>> P = jax.sharding.PartitionSpec
      >>> g = host_local_array_to_global_array({"w": np.ones((2, 2))}, mesh, P(None, "x"))
      >>> global_array_to_host_local_array(g, mesh, P(None, "x"))["w"]   # one process
      Array([[1., 1.],
             [1., 1.]], dtype=float32)
    """
    import plax
    from plax.sharding import Mesh
    fname = "global_array_to_host_local_array"
    pi = plax.process_index()
    layout = _Layout.of(global_mesh, fname)
    _check_processes(layout, pi, distributed.transport(), global_mesh, fname)
    alone = set(layout.boxes) == {pi}
    local_mesh = global_mesh if alone else Mesh(global_mesh.devices[layout.boxes[pi]],
                                                global_mesh.axis_names)
    paths, treedef = tree_util.tree_flatten_with_path(global_inputs)
    specs = _specs_per_leaf(fname, pspecs, global_inputs)
    out = []
    for (path, leaf), spec in zip(paths, specs):
        where = _where(path)
        sharding = _sharding(local_mesh, spec, where, fname)
        value, keep = _value(leaf, alone, sharding, where, fname)
        _check_rank(spec, value.shape, where, fname)
        _fit(layout, pi, spec, value.shape, layout.sizes, where, fname, "global")
        if keep:
            out.append(leaf)
        else:
            out.append(_put(value if alone else layout.extract(pi, spec, value), sharding))
    return tree_util.tree_unflatten(treedef, out)

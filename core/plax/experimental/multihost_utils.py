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
"""
from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from plax import distributed, tree_util

__all__ = ["process_allgather", "broadcast_one_to_all", "sync_global_devices", "assert_equal"]

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

    Args:
      in_tree: a pytree of arrays, the same shapes and dtypes on every process.
      is_source: whether this process is the source; exactly one process must pass True
        (default: process 0 is the source).

    Returns:
      The source's pytree, as NumPy arrays, on every process.

    Raises:
      ValueError: not exactly one process is the source, or the shapes differ.

    Example:
      >>> broadcast_one_to_all(np.float32(2.0))   # one process: its own value
      array(2., dtype=float32)
    """
    if is_source is None:
        import plax
        is_source = plax.process_index() == 0
    flags = _gather(np.asarray(bool(is_source)))
    sources = np.flatnonzero(flags)
    if len(sources) != 1:
        raise ValueError(f"broadcast_one_to_all: exactly one process must be the source, got "
                         f"is_source=True on processes {sources.tolist()}")
    src = int(sources[0])
    return tree_util.tree_map(lambda leaf: np.asarray(_gather(np.asarray(leaf))[src]), in_tree)


def sync_global_devices(name: str) -> None:
    """Waits until every process has reached a call with the same ``name`` (a barrier).

    Raises:
      AssertionError: the processes reached calls with different names (their programs
        diverged).
      TimeoutError: a process did not arrive within ``PLAX_COLLECTIVE_TIMEOUT`` seconds.
    """
    tag = np.asarray(zlib.crc32(str(name).encode()), np.int64)
    tags = _gather(tag)
    if not (tags == tags[0]).all():
        raise AssertionError(f"sync_global_devices({name!r}): the processes reached barriers "
                             "with different names")


def assert_equal(in_tree: Any, fail_message: str = "") -> None:
    """Checks that every leaf of ``in_tree`` is equal on every process.

    Raises:
      AssertionError: a leaf differs between processes (with ``fail_message``).
    """
    paths = tree_util.tree_flatten_with_path(in_tree)[0]
    for path, leaf in paths:
        values = _gather(np.asarray(leaf))
        if not all(np.array_equal(values[0], v, equal_nan=values.dtype.kind in "fc")
                   for v in values[1:]):
            where = tree_util.keystr(path) or "the value"
            raise AssertionError(f"{fail_message} {where} differs between processes".strip())

"""The fast path of a top-level ``jit`` call under a set mesh (of CPU devices, or of one
device of any platform).

JAX 0.10 places every host value and uncommitted array argument of such a call replicated
on the mesh when it has Explicit axes (``NamedSharding(mesh, P())``), runs the program, and
places its results on the mesh (Explicit or Auto axes). On a mesh of CPU devices plax's
general path (``JitFunction._call_general``) does so with one host buffer that every device
holds (:func:`plax.sharding_eager.placed_argument`, ``place_replicated``), so the program
runs on the arguments' own buffers (a host value's one copy) and each result holds the
program's output buffer; on a mesh of one device of another platform (a GPU) the
arguments are put on that device once and the result holds the output buffer too (a mesh
of several GPUs copies each result to every device: nothing to replay, :func:`recipe`
says None). What the general path made of a signature's results -- each one's
type, sharding and pieces, or the device a result kept on a committed argument's device
is committed to (:mod:`plax.sharding_device_typed`) -- is recorded once (:func:`recipe`),
and later calls with
arguments of the same kinds run the program and wrap its buffers so (:func:`replayed`),
skipping the placement, checks and result placement that would give the same answer again.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plax.array import _BUF, Array, _Piece, _ShardedArray, _host_numpy, _sharded, from_host
from plax.dtypes import NUMERIC_DTYPE_TYPES as _NUMERIC, PY_SCALAR_TYPES as _SCALARS


def leaf_kinds(leaves: Sequence) -> tuple | None:
    """What a recorded call's signature says of each argument leaf, all that the general
    path's placement of the call depends on: an Array by its type, and by its device too
    when committed or on another platform than the CPU; an Array over several devices (or placed on a mesh) by its
    type and sharding; a NumPy array by its shape and dtype; a scalar by its Python or NumPy
    type (its value's type follows from it). None when some leaf is of another kind (a
    pending array, a ref, ...): the call takes the general path.

    Example:
      >>> leaf_kinds([jnp.ones(2), np.zeros(3, np.float32), 1.0])
      (ShapedArray(float32[2]), ((3,), dtype('float32')), <class 'float'>)
    """
    kinds = []
    for x in leaves:
        t = type(x)
        if t is Array:
            if x._committed:
                kinds.append((x.aval, x._device))
            elif x._device.platform == "cpu":  # (every CPU device reads its buffer)
                kinds.append(x.aval)
            else:  # (the program reads its buffer on its own device)
                kinds.append((x.aval, x._device, False))
        elif t is _ShardedArray:
            kinds.append((x.aval, x._sharding, x._committed))
        elif t is np.ndarray:
            kinds.append((x.shape, x.dtype))
        elif t in _SCALARS or isinstance(x, np.generic):
            kinds.append(t)
        else:
            return None
    return tuple(kinds)


def recipe(out_bufs: Sequence, results: Sequence) -> list | None:
    """How the general path placed ``results`` (a call's result leaves) from the program's
    output buffers ``out_bufs``: per result its type, sharding and pieces
    ``(device, index, backend)``, when each is an Array committed over the mesh whose every
    piece holds its output buffer as it is, or its type and device, when it is a one-device
    Array committed there holding its output buffer (a result kept on a committed
    argument's device); else None (nothing to replay).

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     y = plax.jit(jnp.sin)(np.ones(2))
      >>> [spec.spec for _, spec, _ in recipe([y._buf], [y])]
      [P()]
    """
    parts = []
    for buf, out in zip(out_bufs, results):
        if type(out) is Array and out._committed and out._buf is buf:
            parts.append((out.aval, out._device))
            continue
        if type(out) is not _ShardedArray or not out._committed or \
                _BUF.__get__(out, _ShardedArray) is not buf or \
                any(p.buffer is not buf for p in out._pieces):
            return None
        parts.append((out.aval, out._sharding,
                      tuple((p.device, p.index, p.backend) for p in out._pieces)))
    return parts


def replayed(parts: Sequence, out_bufs: Sequence) -> list:
    """The results of a call, its program's ``out_bufs`` placed as :func:`recipe` recorded
    (``parts``): equal, in type, sharding, pieces and committedness, to what the general
    path makes of them.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     y = plax.jit(jnp.sin)(np.ones(2))
      >>> replayed(recipe([y._buf], [y]), [y._buf])[0].sharding == y.sharding
      True
    """
    outs = []
    new = Array._new
    for part, buf in zip(parts, out_bufs):
        if len(part) == 2:  # kept on a committed argument's device
            outs.append(new(buf, part[0], part[1], True))
            continue
        aval, sharding, layout = part
        # (typed=False: the recorded type itself, as the general path typed it)
        out = _sharded(aval, sharding, [_Piece(d, i, buf, b) for d, i, b in layout], True,
                       typed=False)
        _BUF.__set__(out, buf)  # the whole value: nothing to gather
        outs.append(out)
    return outs


def host_buffer(x: Any, device) -> Any:
    """The buffer a call runs on for the argument leaf ``x`` (of a kind :func:`leaf_kinds`
    accepts): an Array's own (over a mesh: its buffer on ``device``), else one copy of the host value on ``device`` (its owner may
    write to it after the call), as :func:`plax.sharding_eager.placed_argument` makes it.

    Example:
      >>> host_buffer(np.ones(2), plax.devices()[0])
      array([1., 1.], dtype=float32)
    """
    if type(x) is Array:
        return x._buf
    if type(x) is _ShardedArray:  # (as the general path takes it: one CPU buffer, if shared)
        return x._buffer_on(device)
    if type(x) is np.ndarray and type(x.dtype) in _NUMERIC:  # (from_host's copy, no Array)
        return device.backend.put(_host_numpy(x, None)[0], device)
    return from_host(x, device=device)._buf

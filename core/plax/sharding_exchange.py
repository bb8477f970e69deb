"""How one device's block of a value is made from the blocks the devices hold: the
communication steps of a partitioned ``jit`` (:mod:`plax.sharding_spmd`).

An :class:`Exchange` turns a value held split one way (``src`` dims, perhaps as *partial*
results over some mesh axes: each device along those axes holds a term of a sum, or of a
max, ...) into the same value split another way (``dst`` dims). Each device computes its
own block: it takes the pieces of the source blocks that overlap it -- its own block when
that suffices, so cutting a value more finely moves nothing -- and combines the partial
terms in one fixed order, so devices that hold the same block hold the same bits. This is
an all-reduce, a reduce-scatter, an all-gather or an all-to-all, as the dims say.

On CPU devices the blocks live in host memory and the pieces are read in place; other
devices' blocks go through the host (``to_host``, then ``put``).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from plax.sharding import NamedSharding
from plax.sharding_types import dims_spec

#: how partial terms combine, by the reduction that produced them
COMBINE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
           "and": np.bitwise_and, "or": np.bitwise_or}


def _coords(mesh) -> dict:
    """``{device: {axis name: position}}`` on ``mesh``."""
    names = tuple(mesh.axis_names)
    return {mesh.devices[idx]: dict(zip(names, idx)) for idx in np.ndindex(mesh.devices.shape)}


def _bounds(index: tuple, shape: tuple) -> list:
    return [s.indices(n)[:2] for s, n in zip(index, shape)]


class Exchange:
    """One communication step: the value in ``src`` (split as ``src_dims``, partial over
    ``partial`` axes, combined by ``combine``) becomes ``dst`` split as ``dst_dims``.
    Along the ``keep`` axes the value stays partial sums (unreduced, ``{U:Y}``): each
    device takes its pieces only from the devices at its own position along them, so its
    block remains its own term of the sum.

    The plan of every device's pieces is computed once, when the step is built: for each
    device, ``[(term, source device, part of the source block, part of the result)]``.
    """

    def __init__(self, mesh, shape: tuple, dtype, src, dst, src_dims: tuple,
                 dst_dims: tuple, partial: tuple = (), combine: str | None = None,
                 keep: tuple = ()):
        self.src, self.dst = src, dst
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.src_dims, self.dst_dims = src_dims, dst_dims
        self.partial, self.combine, self.keep = tuple(partial), combine, tuple(keep)
        devices = list(mesh.devices.flat)
        coords = _coords(mesh)
        src_map = NamedSharding(mesh, dims_spec(src_dims)).devices_indices_map(self.shape)
        dst_map = NamedSharding(mesh, dims_spec(dst_dims)).devices_indices_map(self.shape)
        self.pieces: dict = {}
        self.local: dict = {}  # device -> its own block suffices (the part to cut), or None
        for d in devices:
            want = _bounds(dst_map[d], self.shape)
            have = _bounds(src_map[d], self.shape)
            if not self.partial and all(h0 <= w0 and w1 <= h1
                                        for (h0, h1), (w0, w1) in zip(have, want)):
                self.local[d] = tuple(slice(w0 - h0, w1 - h0)
                                      for (h0, _), (w0, w1) in zip(have, want))
                continue
            terms: dict = {}  # partial coordinates -> {source block bounds: source device}
            for s in sorted(devices, key=lambda s: s != d):  # its own blocks first
                if any(coords[s][a] != coords[d][a] for a in self.keep):
                    continue  # another term of a sum that stays unreduced
                term = tuple(coords[s][a] for a in self.partial)
                key = tuple(_bounds(src_map[s], self.shape))
                terms.setdefault(term, {}).setdefault(key, s)
            plan = []
            for term in sorted(terms):
                for key, s in terms[term].items():
                    lo = [max(h0, w0) for (h0, _), (w0, _) in zip(key, want)]
                    hi = [min(h1, w1) for (_, h1), (_, w1) in zip(key, want)]
                    if any(a >= b for a, b in zip(lo, hi)) and self.shape:
                        continue
                    part = tuple(slice(a - h0, b - h0) for a, b, (h0, _) in zip(lo, hi, key))
                    into = tuple(slice(a - w0, b - w0) for a, b, (w0, _) in zip(lo, hi, want))
                    plan.append((term, s, part, into))
            self.pieces[d] = (tuple(w1 - w0 for w0, w1 in want), plan)

    def moves_data(self) -> bool:
        """Whether some device needs another's data (False: every device cuts its own)."""
        return bool(self.pieces)

    def run(self, device, envs: dict, backends: dict) -> Any:
        """``device``'s block of the result, from the source blocks in ``envs`` (``{device:
        {local var: buffer}}``, read, not changed)."""
        own = self.local.get(device)
        if own is not None:
            buf = envs[device][self.src]
            if all(p.indices(n)[:2] == (0, n) for p, n in zip(own, np.shape(buf))):
                return buf
            return _put(np.ascontiguousarray(_host(buf, device, backends)[own]), device,
                        backends)
        block_shape, plan = self.pieces[device]
        out = None
        last_term = None
        combine = COMBINE[self.combine] if self.combine else None
        term_buf = None
        for term, s, part, into in plan:
            piece = _host(envs[s][self.src], s, backends)[part]
            if term != last_term:  # a new partial term: fold the previous one in
                if term_buf is not None:
                    out = term_buf if out is None else combine(out, term_buf, out=out)
                term_buf = np.empty(block_shape, self.dtype)
                last_term = term
            term_buf[into] = piece
        if term_buf is not None:
            out = term_buf if out is None else combine(out, term_buf, out=out)
        if out is None:
            out = np.empty(block_shape, self.dtype)
        return _put(out, device, backends)


def _host(buf, device, backends) -> np.ndarray:
    if device.platform == "cpu":
        return np.asarray(buf)
    return backends[device].to_host(buf)


def _put(host: np.ndarray, device, backends):
    if device.platform == "cpu":
        return host
    return backends[device].put(host, device)


def local_shape(shape: tuple, dims: tuple, mesh) -> tuple | None:
    """The shape of one device's block of a ``shape`` array split as ``dims`` on ``mesh``
    (None when a dimension does not divide over its axes)."""
    sizes = mesh.shape
    out = []
    for n, names in zip(shape, dims):
        k = math.prod(sizes[a] for a in names)
        if n % k:
            return None
        out.append(n // k)
    return tuple(out)

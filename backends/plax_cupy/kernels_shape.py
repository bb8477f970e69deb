"""GPU kernels of the shape primitives: broadcast_in_dim, reshape, transpose, squeeze,
expand_dims, rev, pad, concatenate, iota, and the identities stop_gradient and (checkpoint)
name.

Each is one or two CuPy calls (views where CuPy gives views, else one copy kernel); none reads
a value on the host. They move elements without computing on them, so they run on a bfloat16
operand's bits (:func:`on_bits`).

``CupyBackend._wrap`` hands a kernel marked ``fn.bf16 == "bits"`` its
:class:`~plax_cupy.backend.Bf16Buffer` operands as they are (it returns Bf16Buffers); other
kernels get float32 widenings and their bfloat16 results are rounded back. Widening is exact,
so an unmarked structural kernel still gives the right values, at the cost of two conversions
and a signalling NaN's quiet bit.

Needed from ``backend.py``: a fusible primitive's eager path (``_eager_fused``) is wrapped
without the mark, so bfloat16 operands are widened before the generated kernel is planned and
before a table kernel marked ``"bits"`` is reached. Two conformance failures follow (the same
calls under ``jit`` are right): eager ``nextafter`` on bfloat16 returns ``x`` (one bfloat16
step is lost in the rounding back; ``test_values[cupy-nextafter-bfloat16]``), and an eager
``bitcast_convert_type`` from a 0-d float32 to bfloat16 reaches ``_bf16_call``'s bit cast,
which views a 0-d array as a narrower type (``test_zero_tangent[cupy-bitcast_convert_type]``).
Passing the mark on (``partial(self._eager_fused, ...)`` marked ``bf16 = "bits"`` when the
table kernel is, its avals read as bfloat16 for Bf16Buffers) would fix both.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

import cupy

from plax import lax
from plax.transforms.checkpoint import name_p
from plax_cupy.backend import Bf16Buffer
from plax_cupy.kernels import kernel


def on_bits(fn: Callable) -> Callable:
    """Marks ``fn`` as a kernel that moves values without computing on them, so bfloat16
    operands can be handed over as their uint16 bits.

    The wrapped kernel unwraps every :class:`Bf16Buffer` argument to its bits, and wraps its
    result(s) back when any argument was one (the data operands of such primitives share the
    result's dtype; index operands are never bfloat16).

    Args:
      fn: a kernel ``fn(*cupy_arrays, **params)``.

    Returns:
      The kernel, with ``bf16 = "bits"`` set for the backend.

    Example:
      >>> @kernel(lax.rev_p)
      ... @on_bits
      ... def _rev(x, *, dimensions):
      ...     return cupy.flip(x, dimensions)
    """
    @functools.wraps(fn)
    def run(*args, **params):
        if not any(isinstance(a, Bf16Buffer) for a in args):
            return fn(*args, **params)
        out = fn(*[a.bits if isinstance(a, Bf16Buffer) else a for a in args], **params)
        if isinstance(out, (list, tuple)):
            return [Bf16Buffer(o) for o in out]
        return Bf16Buffer(out)

    run.bf16 = "bits"
    return run


@kernel(lax.broadcast_in_dim_p)
@on_bits
def _broadcast_in_dim(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return cupy.broadcast_to(x.reshape(expanded), tuple(shape))


@kernel(lax.reshape_p)
@on_bits
def _reshape(x, *, new_sizes):
    return cupy.reshape(x, tuple(new_sizes))


@kernel(lax.transpose_p)
@on_bits
def _transpose(x, *, permutation):
    return cupy.transpose(x, tuple(permutation))


@kernel(lax.squeeze_p)
@on_bits
def _squeeze(x, *, dimensions):
    return cupy.squeeze(x, axis=tuple(dimensions))


@kernel(lax.expand_dims_p)
@on_bits
def _expand_dims(x, *, dimensions):
    return cupy.expand_dims(x, tuple(dimensions))


@kernel(lax.rev_p)
@on_bits
def _rev(x, *, dimensions):
    return cupy.flip(x, tuple(dimensions)) if dimensions else x


@kernel(lax.pad_p)
@on_bits
def _pad(x, padding_value, *, padding_config):
    """Low, high and interior padding (negative low/high amounts crop), as XLA's pad.

    The result is filled with ``padding_value`` (a 0-d device array, never read on the host)
    and ``x`` is written on its strided grid, then the negative amounts are cropped.
    """
    inner = [d + max(d - 1, 0) * i for d, (_, _, i) in zip(x.shape, padding_config)]
    full = [max(lo, 0) + n + max(hi, 0) for n, (lo, hi, _) in zip(inner, padding_config)]
    out = cupy.empty(tuple(full), x.dtype)
    out[...] = padding_value
    place = tuple(slice(max(lo, 0), max(lo, 0) + n, i + 1)
                  for n, (lo, _, i) in zip(inner, padding_config))
    if x.size:
        out[place] = x
    crop = tuple(slice(max(-lo, 0), f - max(-hi, 0)) for f, (lo, hi, _) in zip(full, padding_config))
    return out[crop]


@kernel(lax.concatenate_p)
@on_bits
def _concatenate(*xs, dimension):
    return cupy.concatenate(xs, axis=dimension)


@kernel(lax.iota_p)
def _iota(*, dtype, shape, dimension):
    """Counts along ``dimension``; float values are the exactly rounded integers (counted in
    float64 and converted once, as NumPy's arange gives them)."""
    dtype = np.dtype(dtype)
    count = shape[dimension]
    if dtype.kind in "fc":
        line = cupy.arange(count, dtype=np.float64).astype(dtype)
    else:
        line = cupy.arange(count, dtype=dtype)
    expanded = [1] * len(shape)
    expanded[dimension] = count
    return cupy.broadcast_to(line.reshape(expanded), tuple(shape))


@kernel(lax.stop_gradient_p, name_p)
@on_bits
def _identity(x, **params):
    """The operand itself (buffers are immutable, so no copy)."""
    return x

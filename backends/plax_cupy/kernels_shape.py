"""GPU kernels of the shape primitives: broadcast_in_dim, reshape, transpose, squeeze,
expand_dims, rev, pad, concatenate, stack, unstack, iota, and the identities stop_gradient and (checkpoint)
name.

Each is one or two CuPy calls (views where CuPy gives views, else one copy kernel); none reads
a value on the host. They move elements without computing on them, so they run on a bfloat16
operand's bits (:func:`on_bits`).

``CupyBackend._wrap`` hands a kernel marked ``fn.bf16 == "bits"`` its
:class:`~plax_cupy.backend.Bf16Buffer` operands as they are (it returns Bf16Buffers); other
kernels get float32 widenings and their bfloat16 results are rounded back. Widening is exact,
so an unmarked structural kernel still gives the right values, at the cost of two conversions
and a signalling NaN's quiet bit.
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


def _view_kernel(primitive, view: Callable, param: str) -> None:
    """Registers ``view(x, tuple(params[param]))`` (one CuPy call giving a view where CuPy can,
    on bfloat16's bits) as the GPU kernel of ``primitive``, whose one parameter is ``param``."""
    def run(x, **params):
        return view(x, tuple(params[param]))
    run.__name__ = run.__qualname__ = f"_{primitive.name}"
    kernel(primitive)(on_bits(run))


for _primitive, _view, _param in [
        (lax.transpose_p, cupy.transpose, "permutation"),
        (lax.squeeze_p, cupy.squeeze, "dimensions"),
        (lax.expand_dims_p, cupy.expand_dims, "dimensions"),
        (lax.rev_p, lambda x, axes: cupy.flip(x, axes) if axes else x, "dimensions")]:
    _view_kernel(_primitive, _view, _param)


@kernel(lax.reshape_p)
@on_bits
def _reshape(x, *, new_sizes, dimensions=None, sharding=None):
    """A view where CuPy can make one; ``dimensions`` transposes first (JAX's folded
    transposition), which copies only where the reshape cannot view the transposed strides."""
    if dimensions is not None:
        x = cupy.transpose(x, tuple(dimensions))
    return cupy.reshape(x, tuple(new_sizes))


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


@kernel(lax.stack_p)
@on_bits
def _stack(*xs, axis):
    return cupy.stack(xs, axis=axis)


@kernel(lax.unstack_p)
@on_bits
def _unstack(x, *, axis):
    return [cupy.take(x, i, axis=axis) for i in range(x.shape[axis])]


@kernel(lax.split_p)
@on_bits
def _split(x, *, sizes, axis):
    """Contiguous copies of the pieces (as XLA's split gives separate buffers)."""
    out, start = [], 0
    for size in sizes:
        index = (slice(None),) * axis + (slice(start, start + size),)
        out.append(cupy.ascontiguousarray(x[index]))
        start += size
    return out


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

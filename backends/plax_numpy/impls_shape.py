"""NumPy implementations of the shape primitives."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax_numpy.registry import impl


@impl(lax.broadcast_in_dim_p)
def _broadcast_in_dim(x, *, shape, broadcast_dimensions):
    x = np.asarray(x)
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape)


@impl(lax.reshape_p)
def _reshape(x, *, new_sizes, dimensions=None, sharding=None):
    if dimensions is not None:
        x = np.transpose(x, dimensions)  # the transposition JAX folds into its reshape
    return np.reshape(x, new_sizes)


@impl(lax.transpose_p)
def _transpose(x, *, permutation):
    return np.transpose(x, permutation)


@impl(lax.squeeze_p)
def _squeeze(x, *, dimensions):
    return np.squeeze(x, axis=dimensions)


@impl(lax.expand_dims_p)
def _expand_dims(x, *, dimensions):
    return np.expand_dims(x, dimensions)


@impl(lax.rev_p)
def _rev(x, *, dimensions):
    return np.flip(x, dimensions)


@impl(lax.pad_p, fresh=True)
def _pad(x, padding_value, *, padding_config):
    x = np.asarray(x)
    # interior padding: place x on a strided grid
    inner_shape = [d + max(d - 1, 0) * i for d, (_, _, i) in zip(x.shape, padding_config)]
    if any(i for _, _, i in padding_config):
        grid = np.full(inner_shape, padding_value, dtype=x.dtype)
        grid[tuple(slice(None, None, i + 1) for _, _, i in padding_config)] = x
    else:
        grid = x
    # edge padding; negative amounts crop
    widths = [(max(lo, 0), max(hi, 0)) for lo, hi, _ in padding_config]
    if any(w != (0, 0) for w in widths):
        grid = np.pad(grid, widths, mode="constant", constant_values=padding_value)
    crops = tuple(slice(max(-lo, 0), grid.shape[k] - max(-hi, 0))
                  for k, (lo, hi, _) in enumerate(padding_config))
    if grid is x:  # nothing padded (at most cropped): copied, new memory as on the other paths
        return x[crops].copy()
    return grid[crops]


@impl(lax.concatenate_p, fresh=True)
def _concatenate(*xs, dimension):
    return np.concatenate(xs, axis=dimension)


@impl(lax.stack_p, fresh=True)
def _stack(*xs, axis):
    return np.stack(xs, axis=axis)


@impl(lax.unstack_p, fresh=True)  # (np.take copies)
def _unstack(x, *, axis):
    return [np.take(x, i, axis=axis) for i in range(np.shape(x)[axis])]


@impl(lax.split_p)
def _split(x, *, sizes, axis):
    # views of consecutive runs (np.split would give one piece for no sizes)
    starts = np.cumsum((0,) + tuple(int(s) for s in sizes))
    return [x[(slice(None),) * axis + (slice(a, a + int(n)),)] for a, n in zip(starts, sizes)]


@impl(lax.iota_p)
def _iota(*, dtype, shape, dimension):
    line = np.arange(shape[dimension], dtype=dtype)
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(line.reshape(expanded), shape)

"""GPU kernels of ``sort`` (several operands, ``num_keys`` keys) and ``top_k``.

Both are stable sorts on the device (CuPy's ``argsort``, a radix/merge sort that keeps the
order of equal keys), with the reference kernels' order: NaN after every number, complex
numbers by real part then imaginary part, ties in index order. Several keys sort as a
least-significant-first sequence of stable sorts, so keys of different dtypes need no common
type.

Float keys are canonicalised first (:func:`canonical_float_key`: every NaN one positive NaN,
``-0.0`` as ``0.0``): CuPy sorts a one-dimensional float32/float64 array with CUB's radix sort
on the bits, where a NaN with the sign bit set comes before ``-inf`` (on the H200 ``sort`` of
``[nan, -0.0, 0.0, -nan, ...]`` put a NaN first), and other shapes and dtypes with NaN-aware
comparisons; canonical keys sort the same way through both.
"""
from __future__ import annotations

import numpy as np

import cupy

from plax import lax
from plax.lax.top_k import top_k_by_sorting, top_k_p
from plax_cupy import dtypes
from plax_cupy.kernels import kernel
from plax_cupy.kernels_elementwise import elementwise


def canonical_float_key(key: "cupy.ndarray") -> "cupy.ndarray":
    """``key`` with every NaN replaced by the positive quiet NaN and ``-0.0`` by ``0.0`` (in
    both parts of a complex key), so that a sort on the bits (CuPy's radix sort of a 1-d
    float32/float64 array) orders it as JAX does: NaN last whatever its sign and payload,
    ``-0.0`` tied with ``0.0``. One plax-compiled kernel on the bits (integer operations, so
    float32 subnormals are kept: CuPy's float comparisons flush them to zero). Other dtypes
    come back as they are.

    Args:
      key: a device array (float16, float32, float64, complex64 or complex128 is
        canonicalised).

    Returns:
      A device array of ``key``'s shape and dtype.

    Example:
      >>> canonical_float_key(cupy.asarray([-np.nan, -0.0, 1.0]))  # [nan, 0., 1.], NaN positive
    """
    kind = key.dtype.kind
    if kind == "c":   # both parts at once: the interleaved float words of a contiguous copy
        part = np.dtype(f"f{key.dtype.itemsize // 2}")
        words = cupy.ascontiguousarray(key).reshape(-1).view(part)   # (rank 0 too)
        return canonical_float_key(words).view(key.dtype).reshape(key.shape)
    if kind != "f":
        return key
    bits = 8 * key.dtype.itemsize
    u = np.dtype(f"u{key.dtype.itemsize}")
    ctype = dtypes.ctype(u)
    word = lambda v: f"(({ctype}){int(v):#x}ull)"   # noqa: E731
    inf_bits = np.asarray(np.inf, key.dtype).view(u)[()]
    nan_bits = np.asarray(np.nan, key.dtype).view(u)[()]
    magnitude = f"(a0 & {word((1 << (bits - 1)) - 1)})"
    expression = (f"{magnitude} > {word(inf_bits)} ? {word(nan_bits)} : "
                  f"({magnitude} == 0 ? ({ctype})0 : a0)")
    return elementwise(expression, u, key.view(u)).view(key.dtype)


def _parts(key):
    """The arrays a key sorts by, least significant first (complex: imaginary, then real),
    float ones canonicalised (:func:`canonical_float_key`)."""
    key = canonical_float_key(key)
    return [key.imag, key.real] if key.dtype.kind == "c" else [key]


def lexicographic_order(keys: list) -> "cupy.ndarray":
    """The stable permutation along the last axis that sorts by ``keys[0]``, ties by
    ``keys[1]``, and so on (each key real, NaN last).

    Args:
      keys: device arrays of one shape (any real dtypes).

    Returns:
      An int64 device array of that shape: indices along the last axis.

    Example:
      >>> lexicographic_order([cupy.asarray([1, 0, 1]), cupy.asarray([5., 7., 2.])])
      array([1, 2, 0])
    """
    perm = None
    for key in reversed(keys):
        if perm is None:
            perm = cupy.argsort(key, axis=-1, kind="stable")
        else:
            step = cupy.argsort(cupy.take_along_axis(key, perm, axis=-1), axis=-1, kind="stable")
            perm = cupy.take_along_axis(perm, step, axis=-1)
    return perm


def sort_keys(key: "cupy.ndarray") -> list:
    """``key`` as :func:`lexicographic_order` keys, most significant first: a complex key is
    its real then imaginary part, any other key itself; float keys canonicalised
    (:func:`canonical_float_key`).

    Example:
      >>> [k.dtype.name for k in sort_keys(cupy.zeros(3, cupy.complex64))]
      ['float32', 'float32']
    """
    return list(reversed(_parts(key)))


@kernel(lax.sort_p)
def _sort(*operands, dimension, is_stable, num_keys):
    ops = [cupy.moveaxis(o, dimension, -1) for o in operands]
    keys = []
    for k in ops[:num_keys]:
        keys += sort_keys(k)
    perm = lexicographic_order(keys)
    return [cupy.moveaxis(cupy.take_along_axis(o, perm, axis=-1), -1, dimension) for o in ops]


@kernel(top_k_p)
def _top_k(x, *, k, axis):
    """The ``k`` largest along ``axis``, descending, ties (and NaN, which come first) in index
    order, as the reference kernel (:func:`plax.lax.top_k.top_k_by_sorting`, with the sort on
    the keys of :func:`sort_keys`)."""
    return top_k_by_sorting(x, k, axis, lambda v: lexicographic_order(sort_keys(v)), xp=cupy)

"""Host input/output: arrays from buffers, strings, functions and files, and NumPy's
save/savez. Reading and writing files happens on the host, outside any transform."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plax import dtypes

# JAX re-exports NumPy's writers: np.save/np.savez convert plax arrays through __array__.
save = np.save
savez = np.savez


def _to_plax(host: np.ndarray):
    from plax.numpy.creation import asarray
    return asarray(host)


def frombuffer(buffer, dtype: Any = float, count: int = -1, offset: int = 0):
    """A 1-D array from the bytes of ``buffer`` (see ``numpy.frombuffer``).

    Example:
      >>> jnp.frombuffer(b"\\x01\\x02", dtype=jnp.uint8)
      Array([1, 2], dtype=uint8)
    """
    return _to_plax(np.frombuffer(buffer, dtype=dtypes.to_numpy_dtype(dtype), count=count,
                                  offset=offset))


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str):
    """A 1-D array parsed from text ``string`` with separator ``sep``.

    Example:
      >>> jnp.fromstring("1 2 3", dtype=int, sep=" ")
      Array([1, 2, 3], dtype=int32)
    """
    return _to_plax(np.fromstring(string, dtype=dtypes.to_numpy_dtype(dtype), count=count,
                                  sep=sep))


def fromfunction(function: Callable, shape, *, dtype: Any = float, **kwargs):
    """``function`` evaluated at every index of ``shape`` (mapped with vmap, so
    ``function`` sees scalar coordinates and must be written with plax operations).

    Example:
      >>> jnp.fromfunction(lambda i, j: i + j, (2, 3), dtype=int)
      Array([[0, 1, 2],
             [1, 2, 3]], dtype=int32)
    """
    from plax import lax, vmap
    shape = tuple(int(d) for d in shape)
    dt = dtypes.canonicalize_dtype(dtypes.to_numpy_dtype(dtype))
    f = lambda *idx: function(*idx, **kwargs)
    # innermost vmap maps the last axis; each level broadcasts over one axis
    for i in range(len(shape) - 1, -1, -1):
        f = vmap(f, in_axes=tuple(0 if j == i else None for j in range(len(shape))))
    return f(*[lax.iota(dt, d) for d in shape])


def fromiter(*args, **kwargs):
    """Not implemented, as in JAX: consuming an iterator is a side effect.

    Raises:
      NotImplementedError: always; use ``jnp.asarray(np.fromiter(...))``.
    """
    raise NotImplementedError(
        "jnp.fromiter() is not implemented because it may be non-pure and thus unsafe for use "
        "with JIT and other transformations. Consider jnp.asarray(np.fromiter(...)) instead.")


def fromfile(*args, **kwargs):
    """Not implemented, as in JAX: reading a file is a side effect.

    Raises:
      NotImplementedError: always; use ``jnp.asarray(np.fromfile(...))``.
    """
    raise NotImplementedError(
        "jnp.fromfile() is not implemented because it may be non-pure and thus unsafe for use "
        "with JIT and other transformations. Consider jnp.asarray(np.fromfile(...)) instead.")


def load(file, *args, **kwargs):
    """``numpy.load``, with a loaded array returned as a plax Array (``.npz`` archives and
    pickled objects are returned as NumPy gives them).

    Example:
      >>> import io; buf = io.BytesIO(); jnp.save(buf, jnp.arange(2)); _ = buf.seek(0)
      >>> jnp.load(buf)
      Array([0, 1], dtype=int32)
    """
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray) and out.dtype != object:
        dt = out.dtype
        if dt.kind == "V" and dt.names is None and dt.itemsize == 2:
            # np.save writes bfloat16 as raw 2-byte void: view it back, as JAX does
            out = out.view(dtypes.bfloat16)
        return _to_plax(out)
    return out

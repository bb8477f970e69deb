"""Printing: array_repr, array_str and NumPy's print options (which plax's repr uses)."""
from __future__ import annotations

import contextlib

import numpy as np

get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions


@contextlib.contextmanager
def printoptions(*args, **kwargs):
    """Context manager setting NumPy's print options (which plax arrays print with).

    Example:
      >>> with jnp.printoptions(precision=2):
      ...     print(jnp.array([1 / 3]))
      [0.33]
    """
    with np.printoptions(*args, **kwargs) as opts:
        yield opts


def _host(a):
    from plax.core.trace import Tracer
    if isinstance(a, Tracer):
        return None
    return np.asarray(a)


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None) -> str:
    """The repr of an array, ``Array([...], dtype=...)`` with NumPy's formatting options.

    Example:
      >>> jnp.array_repr(jnp.array([1.0, 2.0]))
      'Array([1., 2.], dtype=float32)'
    """
    host = _host(arr)
    if host is None:
        return repr(arr)
    body = np.array2string(host, max_line_width=max_line_width, precision=precision,
                           suppress_small=suppress_small, separator=", ", prefix="Array(")
    return f"Array({body}, dtype={host.dtype.name})"


def array_str(a, max_line_width=None, precision=None, suppress_small=None) -> str:
    """The str of an array, as ``numpy.array_str`` of its values.

    Example:
      >>> jnp.array_str(jnp.array([1.0, 2.0]))
      '[1. 2.]'
    """
    host = _host(a)
    if host is None:
        return str(a)
    return np.array_str(host, max_line_width=max_line_width, precision=precision,
                        suppress_small=suppress_small)

"""dtype inspection helpers and aliases: ``isdtype`` (Array API), ``iterable``, ``bool``,
``object_``, ``ComplexWarning`` and ``einsum_path``."""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from plax import dtypes
from plax.numpy.scalar_types import bool_

# JAX exports the Array API's ``bool`` name for its boolean scalar type.
bool = bool_  # noqa: A001 (shadows the builtin inside this module only through this name)
object_ = np.object_
ComplexWarning = np.exceptions.ComplexWarning

_KINDS = {
    "bool": lambda d: d == np.bool_,
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: dtypes.issubdtype(d, np.floating),
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iuc" or dtypes.issubdtype(d, np.floating),
}


def isdtype(dtype, kind) -> builtins.bool:
    """Whether ``dtype`` is of ``kind`` (Array API): a kind name (``"bool"``, ``"signed
    integer"``, ``"unsigned integer"``, ``"integral"``, ``"real floating"``, ``"complex
    floating"``, ``"numeric"``), a dtype, or a tuple of these.

    Example:
      >>> jnp.isdtype(jnp.bfloat16, "real floating")
      True
    """
    d = dtypes.to_numpy_dtype(dtype)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"Unrecognized {k=!r}")
            if _KINDS[k](d):
                return True
        else:
            try:
                if d == dtypes.to_numpy_dtype(k):
                    return True
            except TypeError:
                raise TypeError(f"Expected kind to be a dtype, string, or tuple; got {k=!r}") from None
    return False


def iterable(y: Any) -> builtins.bool:
    """Whether ``iter(y)`` works (a rank-0 array is not iterable).

    Example:
      >>> jnp.iterable(jnp.ones(2)), jnp.iterable(jnp.ones(()))
      (True, False)
    """
    try:
        iter(y)
    except TypeError:
        return False
    return True


def einsum_path(subscripts: str, /, *operands, optimize="auto"):
    """The contraction order ``einsum`` would use, as ``numpy.einsum_path`` reports it.

    Only the operands' shapes matter: they are stood in for by zero-stride host arrays.

    Returns:
      ``(path, description)``: the path as a list of contracted operand positions (JAX's
      form, without NumPy's leading ``"einsum_path"`` marker) and NumPy's text report.

    Example:
      >>> jnp.einsum_path("ij,jk->ik", jnp.ones((2, 3)), jnp.ones((3, 4)))[0]
      [(0, 1)]
    """
    from plax.core.trace import get_aval
    if optimize == "auto" or optimize is True:
        optimize = "greedy"
    stand_ins = [np.broadcast_to(np.zeros((), np.float32), get_aval(op).shape)
                 if hasattr(op, "aval") else np.asarray(op) for op in operands]
    path, description = np.einsum_path(subscripts, *stand_ins, optimize=optimize)
    return [p for p in path if p != "einsum_path"], description

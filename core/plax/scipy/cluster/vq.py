"""plax.scipy.cluster.vq: assigning observations to the nearest code-book entry."""
from __future__ import annotations

from typing import Any

from plax import numpy as jnp

Array = Any

__all__ = ["vq"]


def vq(obs: Any, code_book: Any, check_finite: bool = True) -> tuple:
    """Assigns each observation to its nearest code (Euclidean distance), as
    :obj:`scipy.cluster.vq.vq`.

    Args:
      obs: ``(n,)`` or ``(n, d)`` observations.
      code_book: ``(k,)`` or ``(k, d)`` codes (the same number of features).
      check_finite: ignored (as in JAX).

    Returns:
      ``(codes, dists)``: the index of the nearest code (int32; the first on ties) and the
      distance to it.

    Raises:
      ValueError: for mismatched ranks or feature counts.

    Example:
      >>> from plax.scipy.cluster.vq import vq
      >>> vq(jnp.array([[0.0, 0.1], [1.0, 1.2]]), jnp.array([[0.0, 0.0], [1.0, 1.0]]))
      (Array([0, 1], dtype=int32), Array([0.1       , 0.20000005], dtype=float32))
    """
    obs, code_book = jnp.asarray(obs), jnp.asarray(code_book)
    if obs.ndim != code_book.ndim or obs.ndim not in (1, 2):
        raise ValueError(f"vq: obs and code_book must both be 1-D or both 2-D, got shapes "
                         f"{obs.shape} and {code_book.shape}")
    if obs.ndim == 2 and obs.shape[1] != code_book.shape[1]:
        raise ValueError(f"vq: obs and code_book must have the same number of features, got "
                         f"{obs.shape[1]} and {code_book.shape[1]}")
    dt = jnp.promote_types(jnp.promote_types(obs.dtype, code_book.dtype), float)
    if obs.ndim == 1:
        obs, code_book = obs[:, None], code_book[:, None]
    obs, code_book = obs.astype(dt), code_book.astype(dt)
    diff = obs[:, None, :] - code_book[None, :, :]
    dist = jnp.sqrt(jnp.sum(diff * diff, axis=-1))
    codes = jnp.argmin(dist, axis=1).astype(jnp.int32)
    return codes, jnp.take_along_axis(dist, codes[:, None].astype(jnp.int32), axis=1)[:, 0]

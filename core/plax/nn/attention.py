"""plax.nn.dot_product_attention: scaled dot-product attention, ``softmax(q k^T * scale) v``.

Arrays are laid out as JAX lays them out: ``query`` is ``(B, T, N, H)`` (batch, query
length, heads, head size), ``key`` and ``value`` are ``(B, S, K, H)`` with ``N`` a
multiple of ``K`` (grouped-query attention), ``bias`` and ``mask`` broadcast to
``(B, N, T, S)``. Leading dimensions may be left out (3-D inputs have no batch).
As in JAX, logits are computed in at least float32 and the softmax always in float32.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plax import dtypes
from plax import lax
from plax import numpy as jnp
from plax.nn.softmax import logsumexp, softmax

ArrayLike = Any
Array = Any

__all__ = ["dot_product_attention"]


def _ensure_4d(t: ArrayLike) -> Array:
    t = jnp.asarray(t)
    missing = 4 - t.ndim
    return jnp.expand_dims(t, tuple(range(missing))) if missing > 0 else t


def _check_shape_and_dtype(t: Array | None, shape: Sequence[int], dtype: Any,
                           name: str) -> None:
    """Raises JAX's ValueError when ``t`` has the wrong rank, dtype or sizes (-1: any)."""
    if t is None:
        return
    if t.ndim != len(shape):
        raise ValueError(f"{name} ndim should be {len(shape)}, but got {t.ndim}")
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"{name} dtype should be {dtype}, but got {t.dtype}")
    for have, want in zip(t.shape, shape):
        if want != -1 and have != want:
            raise ValueError(f"{name} shape should be {list(shape)}: but got {t.shape}")


def _large_negative(dtype: np.dtype) -> Array:
    # The softmax runs in float32, so the fill value must stay finite there.
    big = min(float(dtypes.finfo(dtype).max), float(np.finfo(np.float32).max))
    return jnp.asarray(-0.7 * big, dtype=dtype)


def _combined_mask(shape: tuple[int, ...], mask: Array | None, is_causal: bool,
                   q_seqlen: Array | None, kv_seqlen: Array | None,
                   window: tuple[int, int] | None) -> Array | None:
    """The boolean mask over logits of ``shape`` (B, K, G, T, S), or None when nothing is masked."""
    T, S = shape[-2], shape[-1]
    combined = None

    def conj(a, b):
        return b if a is None else jnp.logical_and(a, b)

    if mask is not None:
        combined = conj(combined, mask)
    q_pos = lax.broadcasted_iota(np.int32, (T, S), 0)
    k_pos = lax.broadcasted_iota(np.int32, (T, S), 1)
    if is_causal:
        combined = conj(combined, q_pos >= k_pos)
    if window is not None:
        left, right = window
        combined = conj(combined, (q_pos <= k_pos + left) & (q_pos >= k_pos - right))
    if q_seqlen is not None or kv_seqlen is not None:
        pad = jnp.ones((1, T, S), dtype=bool)
        if q_seqlen is not None:
            pad = pad & (jnp.arange(T)[None, :, None] < q_seqlen[:, None, None])
        if kv_seqlen is not None:
            pad = pad & (jnp.arange(S)[None, None, :] < kv_seqlen[:, None, None])
        combined = conj(combined, pad[:, None, None, :, :])
    if combined is None:
        return None
    return jnp.broadcast_to(combined, shape)


def _to_grouped(t: Array | None, K: int, G: int) -> Array | None:
    """A (B, N, T, S) bias or mask as (B, K, G, T, S); a head dimension of 1 broadcasts."""
    if t is None:
        return None
    b, n, tt, s = t.shape
    if n == 1:
        return t[:, :, None, :, :]
    return jnp.reshape(t, (b, K, G, tt, s))


def _attention(query, key, value, bias, mask, is_causal, scale, q_seqlen, kv_seqlen,
               window, return_residual):
    B, T, N, H = query.shape
    _, S, K, _ = key.shape
    G = N // K
    q = jnp.reshape(query, (B, T, K, G, H))
    logits_dtype = jnp.promote_types(query.dtype, np.float32)
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", q, key, preferred_element_type=logits_dtype)
    logits = logits * jnp.asarray(scale, dtype=logits.dtype)
    bias = _to_grouped(bias, K, G)
    if bias is not None:
        logits = (logits + bias).astype(logits.dtype)
    combined = _combined_mask(logits.shape, _to_grouped(mask, K, G), is_causal, q_seqlen,
                              kv_seqlen, window)
    if combined is not None:
        logits = jnp.where(combined, logits, _large_negative(logits.dtype))
    logits = logits.astype(np.float32)
    probs = softmax(logits, axis=-1).astype(key.dtype)
    encoded = jnp.einsum("BKGTS,BSKH->BTKGH", probs, value)
    if q_seqlen is not None:
        valid = jnp.arange(T)[None, :] < q_seqlen[:, None]
        encoded = encoded * valid[:, :, None, None, None].astype(encoded.dtype)
    encoded = jnp.reshape(encoded, (B, T, N, H))
    if not return_residual:
        return encoded
    lse = logsumexp(logits, axis=-1).astype(key.dtype)            # B K G T
    lse = jnp.reshape(jnp.transpose(lse, (0, 3, 1, 2)), (B, T, N))
    return encoded, lax.stop_gradient(lse)


def dot_product_attention(query: ArrayLike, key: ArrayLike, value: ArrayLike,
                          bias: ArrayLike | None = None, mask: ArrayLike | None = None, *,
                          scale: float | None = None, is_causal: bool = False,
                          query_seq_lengths: ArrayLike | None = None,
                          key_value_seq_lengths: ArrayLike | None = None,
                          local_window_size: int | tuple[int, int] | None = None,
                          implementation: str | None = None,
                          return_residual: bool = False) -> Array | tuple[Array, Array]:
    """Scaled dot-product attention, ``softmax(query @ key^T * scale + bias) @ value``.

    Args:
      query: ``(B, T, N, H)`` queries (or ``(T, N, H)`` without batch).
      key: ``(B, S, K, H)`` keys; ``N`` must be a multiple of ``K``.
      value: ``(B, S, K, H)`` values, of the dtype of ``key``.
      bias: optional logits bias broadcastable to ``(B, N, T, S)``.
      mask: optional boolean mask broadcastable to ``(B, N, T, S)``; False entries are
        excluded from the softmax.
      scale: factor applied to the logits; default ``1 / sqrt(H)``.
      is_causal: apply a causal mask (query ``i`` attends to keys ``j <= i``).
      query_seq_lengths: optional int32 ``(B,)`` valid query lengths; padded query rows
        of the output are zero.
      key_value_seq_lengths: optional int32 ``(B,)`` valid key/value lengths.
      local_window_size: ``(left, right)`` (or one int for both): query ``i`` attends to
        keys ``j`` with ``i - left <= j <= i + right``.
      implementation: ``None`` or ``"xla"`` (the portable implementation; plax has no
        cuDNN path, and ``"cudnn"`` raises NotImplementedError).
      return_residual: also return the log-sum-exp of the logits, ``(B, T, N)``.

    Returns:
      The attention output with the shape of ``query`` (and the residual when asked).

    Raises:
      ValueError: for mismatched shapes or dtypes, as JAX raises.

    Example:
      >>> import plax
      >>> q = plax.numpy.ones((1, 2, 1, 4))
      >>> plax.nn.dot_product_attention(q, q, q).shape
      (1, 2, 1, 4)
    """
    output_shape = jnp.asarray(query).shape
    query_arr, key_arr, value_arr = _ensure_4d(query), _ensure_4d(key), _ensure_4d(value)
    bias = _ensure_4d(bias) if bias is not None else None
    mask = _ensure_4d(mask) if mask is not None else None
    q_seqlen = jnp.asarray(query_seq_lengths) if query_seq_lengths is not None else None
    kv_seqlen = (jnp.asarray(key_value_seq_lengths) if key_value_seq_lengths is not None
                 else None)
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)

    B, S, K, H = key_arr.shape
    _check_shape_and_dtype(value_arr, [B, S, K, H], key_arr.dtype, "value")
    _check_shape_and_dtype(query_arr, [B, -1, -1, H], key_arr.dtype, "query")
    _check_shape_and_dtype(mask, [-1] * 4, np.dtype(bool), "mask")
    _check_shape_and_dtype(bias, [-1] * 4, None, "bias")
    _check_shape_and_dtype(q_seqlen, [B], np.dtype("int32"), "query_seq_lengths")
    _check_shape_and_dtype(kv_seqlen, [B], np.dtype("int32"), "key_value_seq_lengths")
    if query_arr.shape[-2] % K != 0:
        raise ValueError("The number of query heads must be a multiple of key/value heads, "
                         f"but got {query_arr.shape[-2]} vs {K}")
    if implementation == "cudnn":
        raise NotImplementedError("plax has no cuDNN attention; use implementation=None or "
                                  "'xla'")
    if implementation not in (None, "xla"):
        raise ValueError(f"Unsupported implementation option: {implementation}")
    scale_val = (1.0 / np.sqrt(H)) if scale is None else scale

    out = _attention(query_arr, key_arr, value_arr, bias, mask, is_causal, scale_val,
                     q_seqlen, kv_seqlen, local_window_size, return_residual)
    if return_residual:
        out, residual = out
        return jnp.reshape(out, output_shape), jnp.reshape(residual, output_shape[:-1])
    return jnp.reshape(out, output_shape)

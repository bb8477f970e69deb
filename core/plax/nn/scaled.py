"""Block-scaled matrix products: ``scaled_matmul``, ``scaled_dot_general`` and
``get_scaled_dot_general_config`` (JAX's MXFP8 / NVFP4 microscaling recipes).

JAX runs these as cuDNN kernels on recent NVIDIA GPUs (on CPU its ``scaled_matmul`` has no
lowering). plax computes the same mathematics with plain primitives, so every backend runs it:
a block of ``block_size`` consecutive elements along the contracting dimension shares one
scale; quantized operands are rounded to the grid of their low-precision format and the
product is accumulated in float32.

plax arrays cannot hold the 8- and 4-bit float types themselves (``jnp.float8_e4m3fn`` and
friends are names only), so quantized values and scales are carried in float32, holding
exactly the values the low-precision types can represent; ``scaled_matmul`` accepts any real
dtype for its operands and scales.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Literal, Optional, Sequence

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp
from plax.dtypes import finfo

Array = Any
ArrayLike = Any
DTypeLike = Any

__all__ = ["BlockScaleConfig", "get_scaled_dot_general_config", "scaled_dot_general",
           "scaled_matmul"]


@dataclasses.dataclass(slots=True)
class BlockScaleConfig:
    """How one operand of :func:`scaled_dot_general` is quantized (as JAX's).

    Attributes:
      mode: ``"mxfp8"`` (power-of-two ``float8_e8m0fnu`` scales, ``float8_e4m3fn`` data) or
        ``"nvfp4"`` (``float8_e4m3fn`` scales, ``float4_e2m1fn`` data, a global scale).
      block_size: elements along the contracting dimension that share a scale.
      data_type: the low-precision type of the quantized values.
      scale_type: the type of the scales.
      global_scale: ``nvfp4`` only: a float32 array of shape ``(1,)`` dividing the operand
        before block scaling (and multiplying the product back).
      infer_only: kept for JAX compatibility.
    """
    mode: str
    block_size: int
    data_type: DTypeLike
    scale_type: DTypeLike
    global_scale: Optional[Array]
    infer_only: bool


def get_scaled_dot_general_config(mode: Literal["nvfp4", "mxfp8"],
                                  global_scale: Optional[Array] = None) -> BlockScaleConfig:
    """The quantization config of one operand of :func:`scaled_dot_general`.

    Args:
      mode: ``"mxfp8"`` (blocks of 32, ``float8_e4m3fn`` values, power-of-two scales) or
        ``"nvfp4"`` (blocks of 16, ``float4_e2m1fn`` values, ``float8_e4m3fn`` scales).
      global_scale: ``nvfp4`` only: a float32 array of shape ``(1,)``; ones by default.

    Returns:
      A :class:`BlockScaleConfig`.

    Raises:
      ValueError: for another ``mode``.

    Example:
      >>> from plax.nn import get_scaled_dot_general_config
      >>> cfg = get_scaled_dot_general_config("mxfp8")
      >>> cfg.block_size, cfg.data_type.__name__
      (32, 'float8_e4m3fn')
    """
    if mode == "nvfp4":
        return BlockScaleConfig(
            mode="nvfp4", block_size=16, data_type=jnp.float4_e2m1fn,
            scale_type=jnp.float8_e4m3fn,
            global_scale=(jnp.ones((1,), dtype=np.float32) if global_scale is None
                          else global_scale),
            infer_only=False)
    if mode == "mxfp8":
        return BlockScaleConfig(
            mode="mxfp8", block_size=32, data_type=jnp.float8_e4m3fn,
            scale_type=jnp.float8_e8m0fnu, global_scale=None, infer_only=False)
    raise ValueError(f"get_scaled_dot_general_config: unsupported mode {mode!r}; "
                     "expected 'nvfp4' or 'mxfp8'")


def scaled_matmul(lhs: Array, rhs: Array, lhs_scales: Array, rhs_scales: Array,
                  preferred_element_type: DTypeLike = np.float32) -> Array:
    """Block-scaled batched matrix product ``einsum('BMK,BNK->BMN', a * sa, b * sb)``.

    Each scale covers ``K // K_s`` consecutive elements of the contracting (last) dimension:
    ``a_scaled = a * repeat(lhs_scales, K // K_a, axis=-1)``, likewise for ``b``; products are
    accumulated in float32.

    Args:
      lhs: shape ``(B, M, K)``.
      rhs: shape ``(B, N, K)``.
      lhs_scales: shape ``(B, M, K_a)`` with ``K % K_a == 0``.
      rhs_scales: shape ``(B, N, K_b)`` with ``K % K_b == 0``.
      preferred_element_type: the output dtype (float32 by default).

    Returns:
      Shape ``(B, M, N)`` in ``preferred_element_type``.

    Raises:
      ValueError: for operands that are not 3-D or whose batch, contracting or
        non-contracting sizes do not match.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.nn import scaled_matmul
      >>> a = jnp.array([1, 2, 3]).reshape((1, 1, 3))
      >>> b = jnp.array([4, 5, 6]).reshape((1, 1, 3))
      >>> s = jnp.array([0.5]).reshape((1, 1, 1))
      >>> scaled_matmul(a, b, s, s)
      Array([[[8.]]], dtype=float32)
    """
    a, b = jnp.asarray(lhs), jnp.asarray(rhs)
    sa, sb = jnp.asarray(lhs_scales), jnp.asarray(rhs_scales)
    if not all(v.ndim == 3 for v in (a, b, sa, sb)):
        raise ValueError("scaled_matmul requires all inputs to be 3-dimensional arrays, got "
                         f"shapes {a.shape}, {b.shape}, {sa.shape}, {sb.shape}")
    (batch_a, m, k_a), (batch_b, n, k_b) = a.shape, b.shape
    if k_a != k_b or batch_a != batch_b:
        raise ValueError("scaled_matmul requires lhs and rhs to have matching batch (B) and "
                         f"contract (K) dimensions, but got shapes {a.shape} and {b.shape}")
    if sa.shape[0] != batch_a or sb.shape[0] != batch_b or sa.shape[1] != m or sb.shape[1] != n:
        raise ValueError("scaled_matmul requires scales to match the batch and non-contract "
                         f"dimensions of the inputs, but got shapes lhs: {a.shape}, rhs: "
                         f"{b.shape}, lhs_scales: {sa.shape}, rhs_scales: {sb.shape}")
    for name, s in (("lhs_scales", sa), ("rhs_scales", sb)):
        if s.shape[2] == 0 or k_a % s.shape[2]:
            raise ValueError(f"scaled_matmul: {name} has {s.shape[2]} blocks along the "
                             f"contracting dimension, which does not divide K={k_a}")
    out_dtype = jnp.dtype(preferred_element_type)
    f32 = np.float32
    a_scaled = a.astype(f32) * jnp.repeat(sa.astype(f32), k_a // sa.shape[2], axis=-1)
    b_scaled = b.astype(f32) * jnp.repeat(sb.astype(f32), k_b // sb.shape[2], axis=-1)
    out = lax.dot_general(a_scaled, b_scaled, (((2,), (2,)), ((0,), (0,))),
                          preferred_element_type=f32)
    return out.astype(out_dtype)


# ---------------------------------------------------------------- quantization

def _round_to_format(v: Array, dtype: DTypeLike) -> Array:
    """``v`` (float32, within the format's range) rounded to the nearest value of the float
    format ``dtype`` (ties to even, subnormals included), still as float32."""
    info = finfo(dtype)
    mant_bits, min_exp = int(info.nmant), int(info.minexp)
    _, e = jnp.frexp(v)                       # |v| = m 2^e, m in [0.5, 1)
    quantum_exp = jnp.maximum(e - 1, min_exp) - mant_bits
    one = jnp.ones_like(v)
    return jnp.rint(v * jnp.ldexp(one, -quantum_exp)) * jnp.ldexp(one, quantum_exp)


def _e8m0_round_up(s: Array) -> Array:
    """The smallest power of two ``>= s`` representable in ``float8_e8m0fnu`` (2^-127 for zero
    and the smallest values, at most 2^127), as float32 — the MX recipe's scale rounding."""
    m, e = jnp.frexp(s)                      # s = m 2^e, m in [0.5, 1)
    exponent = jnp.where(m == 0.5, e - 1, e)
    exponent = jnp.clip(exponent, -127, 127)
    one = jnp.ones_like(s)
    return jnp.where(s <= np.float32(2.0 ** -127), jnp.ldexp(one, jnp.full_like(e, -127)),
                     jnp.ldexp(one, exponent))


def _quantize(x: Array, config: BlockScaleConfig) -> tuple[Array, Array]:
    """``(x_q, scales)`` for ``x`` of shape ``(B, M, K)``: blocks of ``config.block_size``
    along ``K`` share a scale, ``x_q`` holds values of ``config.data_type`` (as float32)."""
    shape = x.shape
    k, bs = shape[-1], config.block_size
    if k < bs or k % bs:
        raise ValueError(f"scaled_dot_general: the contracting size {k} must be a multiple of "
                         f"the block size {bs} ({config.mode})")
    x = x.astype(np.float32).reshape(shape[:-1] + (k // bs, bs))
    data_max = np.float32(finfo(config.data_type).max)
    amax = jnp.max(jnp.abs(x), axis=-1, keepdims=True)
    if config.mode == "mxfp8":
        scales = _e8m0_round_up(amax / data_max)
    elif config.mode == "nvfp4":
        x = x / jnp.asarray(config.global_scale, dtype=np.float32)
        amax = jnp.max(jnp.abs(x), axis=-1, keepdims=True)
        scale_max = np.float32(finfo(config.scale_type).max)
        scales = _round_to_format(jnp.clip(amax / data_max, 0, scale_max), config.scale_type)
    else:
        raise ValueError(f"scaled_dot_general: unrecognized mode {config.mode!r}")
    # an all-zero block has scale 0 under nvfp4: its values stay 0 (not 0/0)
    safe = jnp.where(scales == 0, jnp.ones_like(scales), scales)
    scaled = jnp.clip(x / safe, -data_max, data_max)
    x_q = _round_to_format(scaled, config.data_type)
    return x_q.reshape(shape), scales[..., 0]


def _normalize(x: Array, contract: Sequence[int], batch: Sequence[int]) -> Array:
    """``x`` transposed to (batch, kept, contracting) axes, each group in increasing axis order,
    and reshaped to ``(B, M, K)``."""
    order = range(x.ndim)
    b = [d for d in order if d in batch]
    kept = [d for d in order if d not in contract and d not in batch]
    c = [d for d in order if d in contract]
    size = lambda axes: int(np.prod([x.shape[d] for d in axes], dtype=np.int64))  # noqa: E731
    return jnp.transpose(x, b + kept + c).reshape((size(b), size(kept), size(c)))


def _out_shape(x_shape, y_shape, x_dn, y_dn) -> tuple[int, ...]:
    (xc, xb), (yc, yb) = x_dn, y_dn
    return (tuple(x_shape[d] for d in range(len(x_shape)) if d in xb)
            + tuple(x_shape[d] for d in range(len(x_shape)) if d not in xc and d not in xb)
            + tuple(y_shape[d] for d in range(len(y_shape)) if d not in yc and d not in yb))


def _quantized_dot(x: Array, y: Array, dn, cfg_x: BlockScaleConfig, cfg_y: BlockScaleConfig,
                   out_dtype) -> Array:
    """``dot_general(x, y, dn)`` with both operands block-quantized along their contraction
    (batch dims, then x's kept dims, then y's, each in increasing axis order)."""
    (xc, yc), (xb, yb) = dn
    x3, y3 = _normalize(x, xc, xb), _normalize(y, yc, yb)
    xq, xs = _quantize(x3, cfg_x)
    yq, ys = _quantize(y3, cfg_y)
    nvfp4 = cfg_x.mode == "nvfp4"
    out = scaled_matmul(xq, yq, xs, ys, preferred_element_type=np.float32 if nvfp4 else out_dtype)
    if nvfp4:
        out = out * (jnp.asarray(cfg_x.global_scale, dtype=np.float32)
                     * jnp.asarray(cfg_y.global_scale, dtype=np.float32))
        out = out.astype(out_dtype)
    return out.reshape(_out_shape(x.shape, y.shape, (xc, xb), (yc, yb)))


def _transpose_operand(g: Array, x: Array, y: Array, dn, configs, out_dtype, swap: bool) -> Array:
    """The cotangent of ``x`` in ``dot_general(x, y, dn)`` (of ``y`` when ``swap``, with ``dn``
    swapped by the caller), itself a block-quantized product of ``g`` and the other operand:
    ``configs = (config of g, config of the other operand)``."""
    (xc, yc), (xb, yb) = dn
    x_kept = [d for d in range(x.ndim) if d not in xc and d not in xb]
    y_kept = [d for d in range(y.ndim) if d not in yc and d not in yb]
    nb = len(xb)
    g_batch = list(range(nb))
    if swap:   # g's axes: batch, y's kept (the original lhs), x's kept (the original rhs)
        g_y = list(range(nb, nb + len(y_kept)))
    else:      # g's axes: batch, x's kept, y's kept
        g_y = list(range(nb + len(x_kept), nb + len(x_kept) + len(y_kept)))
    g_dn = ((tuple(g_y), tuple(y_kept)), (tuple(g_batch), tuple(yb)))
    if configs[0].mode == "nvfp4":   # as JAX: the gradient products run unquantized
        out = lax.dot_general(g, y, g_dn, preferred_element_type=out_dtype)
    else:
        out = _quantized_dot(g, y, g_dn, configs[0], configs[1], out_dtype)
    # out's axes: batch, x's kept (g's remaining), y's contracting dims in increasing order,
    # which pair with x's contracting dims sorted by y's
    x_contract_by_y = list(np.take(np.asarray(xc, dtype=int), np.argsort(yc))) if xc else []
    perm = np.argsort(list(xb) + x_kept + x_contract_by_y)
    return lax.transpose(out, tuple(int(p) for p in perm)).astype(x.dtype)


def _make_scaled_dot(dn, out_dtype, configs):
    @plax.custom_vjp
    def f(lhs, rhs):
        return _quantized_dot(lhs, rhs, dn, configs[0], configs[1], out_dtype)

    def fwd(lhs, rhs):
        return f(lhs, rhs), (lhs, rhs)

    def bwd(res, g):
        lhs, rhs = res
        (lc, rc), (lb, rb) = dn
        grad_lhs = _transpose_operand(g, lhs, rhs, dn, (configs[2], configs[1]), out_dtype,
                                      swap=False)
        grad_rhs = _transpose_operand(g, rhs, lhs, ((rc, lc), (rb, lb)),
                                      (configs[2], configs[0]), out_dtype, swap=True)
        if configs[2].mode == "nvfp4":
            # straight-through estimator that zeroes what the forward quantization clipped
            data_max = float(finfo(configs[0].data_type).max)
            scale_max = float(finfo(configs[0].scale_type).max)
            for_lhs = jnp.asarray(configs[0].global_scale, dtype=lhs.dtype) * data_max * scale_max
            for_rhs = jnp.asarray(configs[1].global_scale, dtype=rhs.dtype) * data_max * scale_max
            grad_lhs = jnp.where(jnp.abs(lhs) <= for_lhs, grad_lhs, jnp.zeros_like(grad_lhs))
            grad_rhs = jnp.where(jnp.abs(rhs) <= for_rhs, grad_rhs, jnp.zeros_like(grad_rhs))
        return grad_lhs, grad_rhs

    f.defvjp(fwd, bwd)
    return f


def scaled_dot_general(lhs: ArrayLike, rhs: ArrayLike, dimension_numbers,
                       preferred_element_type: DTypeLike = np.float32,
                       configs: Optional[list[BlockScaleConfig]] = None,
                       implementation: Optional[str] = None) -> Array:
    """``lax.dot_general`` with both operands block-quantized (MXFP8 or NVFP4 recipes).

    Each operand is quantized along its contracting dimensions (flattened, in increasing axis
    order) with its config, the product is a :func:`scaled_matmul`, and the backward pass
    quantizes the output cotangent with ``configs[2]`` (NVFP4 gradients run unquantized and
    zero where the forward pass clipped, as in JAX).

    Args:
      lhs, rhs: real arraylikes.
      dimension_numbers: ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
      preferred_element_type: the output dtype (float32 by default).
      configs: three :class:`BlockScaleConfig` (lhs, rhs, gradient), e.g. from
        :func:`get_scaled_dot_general_config`; ``None`` computes a plain
        ``lax.dot_general``.
      implementation: deprecated and ignored (as in JAX).

    Returns:
      Batch dimensions first, then ``lhs``'s free dimensions, then ``rhs``'s.

    Raises:
      ValueError: when a flattened contracting size is not a multiple of the block size.

    Example:
      >>> import plax, plax.numpy as jnp
      >>> from plax.nn import get_scaled_dot_general_config, scaled_dot_general
      >>> configs = [get_scaled_dot_general_config("mxfp8")] * 3
      >>> x = jnp.ones((2, 4, 32))
      >>> scaled_dot_general(x, x, (((2,), (2,)), ((0,), (0,))), configs=configs).shape
      (2, 4, 4)
    """
    if implementation is not None:
        warnings.warn("scaled_dot_general: implementation= is ignored (as in JAX, where it "
                      "is deprecated)", DeprecationWarning, stacklevel=2)
    lhs, rhs = jnp.asarray(lhs), jnp.asarray(rhs)
    if configs is None:
        return lax.dot_general(lhs, rhs, dimension_numbers,
                               preferred_element_type=preferred_element_type)
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(int(d) for d in v) for v in (lc, rc, lb, rb))
    out_dtype = jnp.dtype(preferred_element_type)
    return _make_scaled_dot(((lc, rc), (lb, rb)), out_dtype, list(configs))(lhs, rhs)

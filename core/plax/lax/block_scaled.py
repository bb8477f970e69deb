"""``lax.scaled_dot``: a dot product of block-scaled operands (JAX 0.10's ``jax.lax.scaled_dot``,
the operation behind MX/float8 formats).

Each operand is multiplied by its scale, the scale's entries repeated along the contracting
dimensions over blocks ("subchannels") of the operand, both in bfloat16 as JAX's
decomposition computes them, then contracted with ``dot_general`` accumulating in
``preferred_element_type`` (bfloat16 by default).

plax runs JAX's decomposition directly (as :func:`plax.lax.composite` does), so a jaxpr shows
its ``convert_element_type``/``mul``/``dot_general`` equations rather than one ``scaled_dot``
equation, and it is differentiable, where JAX's primitive has no derivative rule.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plax import dtypes

__all__ = ["scaled_dot"]


def _check(lhs_shape, rhs_shape, lhs_scale_shape, rhs_scale_shape, dimension_numbers) -> None:
    """JAX's checks (its messages): ranks, batch and contracting sizes, scale blocks. A scale
    not given is JAX's default, ones of the operand's shape with 1 on contracting axes."""
    (lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch) = dimension_numbers
    shapes = (lhs_shape, rhs_shape, lhs_scale_shape, rhs_scale_shape)
    if len({len(x) for x in shapes}) > 1:
        raise TypeError("All input tensors must have the same rank. Got lhs rank: "
                        f"{len(lhs_shape)} rhs rank: {len(rhs_shape)} lhs_scale rank: "
                        f"{len(lhs_scale_shape)} rhs_scale rank: {len(rhs_scale_shape)}.")
    if len(lhs_batch) != len(rhs_batch):
        raise TypeError("LHS and RHS must have the same number of batch dimensions, got "
                        f"{len(lhs_batch)} and {len(rhs_batch)}.")
    if len(lhs_contracting) != len(rhs_contracting):
        raise TypeError("LHS and RHS must have the same number of contracting dimensions, got "
                        f"{len(lhs_contracting)} and {len(rhs_contracting)}.")
    for i, j in zip(lhs_batch, rhs_batch):
        if len({lhs_shape[i], rhs_shape[j], lhs_scale_shape[i], rhs_scale_shape[j]}) > 1:
            raise TypeError("All input tensors must have the same batch dimension size for "
                            f"batch dims ({i}, {j}).")
    for i, j in zip(lhs_contracting, rhs_contracting):
        if lhs_shape[i] != rhs_shape[j]:
            raise TypeError(f"LHS contracting dim {i} of size {lhs_shape[i]} does not match "
                            f"RHS contracting dim {j} of size {rhs_shape[j]}.")
    _check_scale("LHS", lhs_shape, lhs_scale_shape, lhs_contracting)
    _check_scale("RHS", rhs_shape, rhs_scale_shape, rhs_contracting)


def _scale_shape(operand_shape: tuple, scale, contracting) -> tuple:
    if scale is not None:
        return tuple(np.shape(scale))
    return tuple(1 if i in contracting else d for i, d in enumerate(operand_shape))


def _check_scale(side: str, shape: tuple, scale_shape: tuple, contracting) -> None:
    for i, size in enumerate(shape):
        if i in contracting:
            if size % scale_shape[i]:
                raise TypeError(f"{side} contracting dim {i} of size {size} must be divisible "
                                f"by its scale's dim size {scale_shape[i]}.")
            if size // scale_shape[i] < 2:
                raise TypeError(f"The ratio of {side} contracting dim {i} to its scale's dim "
                                f"size ({size // scale_shape[i]}) must be at least 2.")
        elif scale_shape[i] != size:
            raise TypeError(f"{side} dim {i} of size {size} does not match scale dim size "
                            f"{scale_shape[i]}.")


def _scaled(operand, scale, contracting: Sequence[int]):
    """``operand * scale`` in bfloat16, each scale entry repeated over its block."""
    from plax import lax
    from plax import numpy as jnp
    operand = lax.convert_element_type(operand, dtypes.bfloat16)
    if scale is None:  # JAX's default scale is 1: the product is the operand in bfloat16
        return operand
    scale = jnp.asarray(scale)
    for i in contracting:
        block = operand.shape[i] // scale.shape[i]
        if block > 1:
            scale = jnp.repeat(scale, block, axis=i)
    return operand * lax.convert_element_type(scale, dtypes.bfloat16)


def scaled_dot(lhs: Any, rhs: Any, *, lhs_scale: Any = None, rhs_scale: Any = None,
               dimension_numbers: Any = None, preferred_element_type: Any = None):
    """``(lhs * lhs_scale) @ (rhs * rhs_scale)`` with block scales (``jax.lax.scaled_dot``).

    Args:
      lhs, rhs: the operands, of one rank (at least 2).
      lhs_scale, rhs_scale: their scales (default: ones), of the operands' rank and shape
        except along the contracting dimensions, which they divide into blocks of at least
        two elements.
      dimension_numbers: ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``;
        default: contract the last axis of ``lhs`` with the second-to-last of ``rhs``, the
        leading axes batched.
      preferred_element_type: the result and accumulation dtype (default bfloat16).

    Returns:
      The product, of dtype ``preferred_element_type``.

    Raises:
      TypeError: rank-0/1 operands without dimension numbers, or shapes that do not fit
        (JAX's messages).

    Example:
      >>> x = jnp.ones((2, 4))
      >>> lax.scaled_dot(x, jnp.ones((4, 3)), lhs_scale=jnp.full((2, 2), 2.0),
      ...                preferred_element_type=jnp.float32)
      Array([[8., 8., 8.],
             [8., 8., 8.]], dtype=float32)
    """
    from plax import lax
    if dimension_numbers is None:
        n = np.ndim(lhs)
        if n < 2:
            raise TypeError("scaled_dot does not support 0-rank and 1-rank operands.")
        dimension_numbers = (((n - 1,), (n - 2,)), (tuple(range(n - 2)), tuple(range(n - 2))))
    (lhs_contracting, rhs_contracting), batch = dimension_numbers
    dimension_numbers = ((tuple(lhs_contracting), tuple(rhs_contracting)),
                         (tuple(batch[0]), tuple(batch[1])))
    lhs_shape, rhs_shape = tuple(np.shape(lhs)), tuple(np.shape(rhs))
    _check(lhs_shape, rhs_shape, _scale_shape(lhs_shape, lhs_scale, dimension_numbers[0][0]),
           _scale_shape(rhs_shape, rhs_scale, dimension_numbers[0][1]), dimension_numbers)
    out_dtype = dtypes.check_user_dtype(
        dtypes.bfloat16 if preferred_element_type is None else preferred_element_type,
        "scaled_dot")
    return lax.dot_general(_scaled(lhs, lhs_scale, dimension_numbers[0][0]),
                           _scaled(rhs, rhs_scale, dimension_numbers[0][1]),
                           dimension_numbers, preferred_element_type=out_dtype)

"""``fma``: the fused multiply-add ``a * b + c`` rounded once, an internal elementwise primitive.

JAX has no ``lax.fma``, but XLA contracts ``x * y + z`` into one hardware FMA, and plax's
samplers (:mod:`plax.random`) must round as that does to give JAX's bits. This primitive is
that operation, so a backend computes it with its own FMA (Numba: ``llvm.fma``; CuPy:
``fma``/``fmaf``) instead of an emulation from ~25 plain float operations. It is not in
``plax.lax``'s namespace (JAX's surface): import it from this module.

Each backend's kernel is exact for every input (one rounding of the exact ``a * b + c``,
overflow included; IEEE's results for infinities and NaNs); the conformance kit checks their
bits against an exact rational reference.
"""
from __future__ import annotations

from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax import binary as B
from plax.lax.base import FLOAT, aval_of, asarray, broadcasting_shape, check_dtype, same_dtypes
from plax.lowering.fusion import ELEMENTWISE, register_fusible
from plax.transforms.batching import defbroadcasting
from plax.transforms.jvp import Zero, defjvp

__all__ = ["fma", "fma_p"]

fma_p = Primitive("fma")


@fma_p.def_abstract_eval
def _fma_abstract_eval(a, b, c):
    for x in (a, b, c):
        check_dtype("fma", x, (FLOAT,))
    dtype = same_dtypes("fma", (a, b, c))
    shape = broadcasting_shape("fma", (a, b, c))
    return ShapedArray(shape, dtype, a.weak_type and b.weak_type and c.weak_type)


def _out_shape(*operands) -> tuple[int, ...]:
    return broadcasting_shape("fma", [aval_of(x) for x in operands])


def _addend_tangent(t, a, b, c):
    # c's tangent passes through, broadcast to the result's shape where c was (rank 0, size 1)
    shape = _out_shape(a, b, c)
    if aval_of(t).shape == shape:
        return t
    from plax.lax.shape import broadcast_size_one
    return broadcast_size_one(t, shape)


# d(a*b + c) = da*b + a*db + dc: the derivative of the exact expression (one rounding of the
# primal changes no derivative)
defjvp(fma_p, lambda t, a, b, c: B.mul(t, b), lambda t, a, b, c: B.mul(a, t), _addend_tangent)
defbroadcasting(fma_p)
register_fusible(fma_p, ELEMENTWISE)


@register_rule("transpose", fma_p)
def _fma_transpose(ct, a, b, c):
    # linear in (a, c) for a known b, or in (b, c) for a known a, as mul is in one operand
    from plax.transforms.transpose import is_undefined_primal
    if is_undefined_primal(a) and is_undefined_primal(b):
        raise TypeError("fma is not linear in both factors at once; this is a bug in a JVP rule.")
    if type(ct) is Zero:
        return [None, None, None]
    ct_a = B.unbroadcast(B.mul(ct, b), a.aval) if is_undefined_primal(a) else None
    ct_b = B.unbroadcast(B.mul(a, ct), b.aval) if is_undefined_primal(b) else None
    ct_c = B.unbroadcast(ct, c.aval) if is_undefined_primal(c) else None
    return [ct_a, ct_b, ct_c]


def fma(a, b, c):
    """Elementwise fused multiply-add: ``a * b + c`` with one rounding.

    What a hardware FMA computes (and what XLA makes of ``x * y + z``): the exact value of
    ``a * b + c`` rounded once to the operands' dtype, so ``fma(a, b, -(a * b))`` is the
    rounding error of the product. Not part of JAX's ``lax``.

    Args:
      a, b, c: float arrays (float16, bfloat16, float32 or float64) of one dtype; shapes
        equal, rank 0, or of equal rank with size 1 where another has any size.

    Returns:
      The correctly rounded ``a * b + c``, in the operands' dtype.

    Raises:
      TypeError: an operand is not a real float array, or the dtypes differ.

    Example:
      >>> fma(jnp.float32(0.1), jnp.float32(3.0), jnp.float32(-0.3))  # one rounding
      Array(-7.450581e-09, dtype=float32)
    """
    return fma_p.bind(asarray(a), asarray(b), asarray(c))

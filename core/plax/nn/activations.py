"""Elementwise activation functions of plax.nn (relu, gelu, silu, elu, ...).

Each one is written on plax.numpy and plax.lax and wrapped in :func:`plax.jit`, as JAX
does, so ``make_jaxpr`` shows one named call per activation. ``relu``, ``relu6`` and
``log1mexp`` carry JAX's custom derivative rules (the gradient of relu at 0 is 0).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.numpy.util import check_arraylike, promote_args_inexact
from plax.transforms.custom_derivatives import custom_jvp
from plax.transforms.jit import jit

ArrayLike = Any
Array = Any

__all__ = ["identity", "relu", "relu6", "sigmoid", "sparse_sigmoid", "softplus", "sparse_plus",
           "soft_sign", "silu", "swish", "mish", "log_sigmoid", "elu", "selu", "celu",
           "leaky_relu", "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish", "gelu", "glu",
           "squareplus", "log1mexp", "tanh"]


def _arraylike(name: str, x: ArrayLike) -> Array:
    """``x`` as an array, after checking that it is an array or a scalar (not a list)."""
    check_arraylike(name, x)
    return jnp.asarray(x)


def _zeros_where_not(pred: Array, g: Array) -> Array:
    """``g`` where ``pred`` holds, zero elsewhere."""
    return lax.select(pred, g, lax.full_like(g, 0))


@jit
def identity(x: ArrayLike) -> Array:
    """Identity activation: returns its argument unchanged (as an array).

    Args:
      x: input array.

    Returns:
      ``x`` as an array.

    Example:
      >>> import plax
      >>> plax.nn.identity(plax.numpy.array([-1., 0., 2.]))
      Array([-1.,  0.,  2.], dtype=float32)
    """
    return _arraylike("identity", x)


@custom_jvp
@jit
def relu(x: ArrayLike) -> Array:
    """Rectified linear unit, ``max(x, 0)``, whose derivative at 0 is taken to be 0.

    Args:
      x: input array.

    Returns:
      An array of the same shape and dtype as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.relu(plax.numpy.array([-2., 0., 0.5, 2.]))
      Array([0. , 0. , 0.5, 2. ], dtype=float32)
      >>> plax.grad(plax.nn.relu)(0.)
      Array(0., dtype=float32, weak_type=True)
    """
    return jnp.maximum(x, 0)


relu.defjvps(lambda g, ans, x: _zeros_where_not(x > 0, g))


@custom_jvp
@jit
def relu6(x: ArrayLike) -> Array:
    """ReLU capped at 6, ``min(max(x, 0), 6)``; its derivative is 0 at both kinks.

    Args:
      x: input array.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.relu6(plax.numpy.array([-1., 3., 7.]))
      Array([0., 3., 6.], dtype=float32)
    """
    return jnp.minimum(jnp.maximum(x, 0), 6.)


relu6.defjvps(lambda g, ans, x: _zeros_where_not((x > 0) & (x < 6), g))


@jit
def sigmoid(x: ArrayLike) -> Array:
    """Logistic sigmoid, ``1 / (1 + exp(-x))``.

    Args:
      x: input array (floating point).

    Returns:
      An array of the same shape and dtype as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.sigmoid(plax.numpy.array([0.]))
      Array([0.5], dtype=float32)
    """
    return lax.logistic(x)


@jit
def sparse_sigmoid(x: ArrayLike) -> Array:
    """Piecewise-linear sigmoid: 0 below -1, 1 above 1, ``(x + 1) / 2`` between.

    It is the derivative of :func:`sparse_plus`.

    Args:
      x: input array.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.sparse_sigmoid(plax.numpy.array([-2., 0., 2.]))
      Array([0. , 0.5, 1. ], dtype=float32)
    """
    return 0.5 * jnp.clip(x + 1.0, 0.0, 2.0)


@jit
def softplus(x: ArrayLike) -> Array:
    """Softplus, ``log(1 + exp(x))``, computed stably as ``logaddexp(x, 0)``.

    Args:
      x: input array.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.softplus(plax.numpy.array([0.]))
      Array([0.6931472], dtype=float32)
    """
    return _logaddexp0(x)


@custom_jvp
def _logaddexp0(x: Array) -> Array:
    return jnp.logaddexp(x, 0)


def _no_pos_inf(v: Array) -> Array:
    return jnp.where(v == np.inf, 0, v)


@_logaddexp0.defjvp
def _logaddexp0_jvp(primals, tangents):
    # JAX's rule for logaddexp: the tangent is weighted by exp(x - out), so the derivative
    # of softplus at 0 is 1/2 (plax.numpy.logaddexp's own derivative gives 0 at a tie).
    x, = primals
    t, = tangents
    out = _logaddexp0(x)
    return out, t * jnp.exp(_no_pos_inf(x) - _no_pos_inf(out))


@jit
def sparse_plus(x: ArrayLike) -> Array:
    """Sparse plus: 0 for ``x <= -1``, ``x`` for ``x >= 1``, ``(x + 1)**2 / 4`` between.

    Args:
      x: input array.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.sparse_plus(plax.numpy.array([-2., 0., 2.]))
      Array([0.  , 0.25, 2.  ], dtype=float32)
    """
    x = _arraylike("sparse_plus", x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


@jit
def soft_sign(x: ArrayLike) -> Array:
    """Soft sign, ``x / (|x| + 1)``.

    Args:
      x: input array.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.soft_sign(plax.numpy.array([-1., 3.]))
      Array([-0.5 ,  0.75], dtype=float32)
    """
    x = _arraylike("soft_sign", x)
    return x / (jnp.abs(x) + 1)


@jit
def silu(x: ArrayLike) -> Array:
    """SiLU (also called swish), ``x * sigmoid(x)``.

    Args:
      x: input array.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.silu(plax.numpy.array([0., 1.]))
      Array([0.       , 0.7310586], dtype=float32)
    """
    x = _arraylike("silu", x)
    return x * sigmoid(x)


swish = silu


@jit
def mish(x: ArrayLike) -> Array:
    """Mish, ``x * tanh(softplus(x))``.

    Args:
      x: input array.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.mish(plax.numpy.array([0., 1.]))
      Array([0.       , 0.8650984], dtype=float32)
    """
    x = _arraylike("mish", x)
    return x * jnp.tanh(softplus(x))


@jit
def log_sigmoid(x: ArrayLike) -> Array:
    """Logarithm of the sigmoid, ``-softplus(-x)``, stable for large ``|x|``.

    Args:
      x: input array.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.log_sigmoid(plax.numpy.array([0.]))
      Array([-0.6931472], dtype=float32)
    """
    x = _arraylike("log_sigmoid", x)
    return -softplus(-x)


@jit
def elu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Array:
    """Exponential linear unit: ``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise.

    Args:
      x: input array.
      alpha: scalar or array, the scale of the negative part (default 1.0).

    Returns:
      An array of the shape of ``x`` broadcast against ``alpha``.

    Example:
      >>> import plax
      >>> plax.nn.elu(plax.numpy.array([-1., 2.]))
      Array([-0.63212055,  2.        ], dtype=float32)
    """
    x = _arraylike("elu", x)
    # exp only of the non-positive part, so that large x do not overflow into the gradient
    negative = jnp.where(x > 0, 0., x)
    return jnp.where(x > 0, x, alpha * jnp.expm1(negative))


@jit
def selu(x: ArrayLike) -> Array:
    """Scaled ELU, ``lambda * elu(x, alpha)`` with the self-normalising constants.

    ``lambda = 1.0507009873554805`` and ``alpha = 1.6732632423543772``.

    Args:
      x: input array.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.selu(plax.numpy.array([1.]))
      Array([1.050701], dtype=float32)
    """
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


@jit
def celu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Array:
    """Continuously differentiable ELU: ``max(x, 0) + alpha * expm1(min(x, 0) / alpha)``.

    Args:
      x: input array.
      alpha: scalar or array (default 1.0).

    Returns:
      An array of the shape of ``x`` broadcast against ``alpha``.

    Example:
      >>> import plax
      >>> plax.nn.celu(plax.numpy.array([-1., 2.]), alpha=2.)
      Array([-0.78693867,  2.        ], dtype=float32)
    """
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


@jit
def leaky_relu(x: ArrayLike, negative_slope: ArrayLike = 1e-2) -> Array:
    """Leaky ReLU: ``x`` for ``x >= 0``, ``negative_slope * x`` otherwise.

    Args:
      x: input array.
      negative_slope: scalar or array, the slope for negative inputs (default 0.01).

    Returns:
      An array of the shape of ``x`` broadcast against ``negative_slope``.

    Example:
      >>> import plax
      >>> plax.nn.leaky_relu(plax.numpy.array([-2., 3.]), negative_slope=0.5)
      Array([-1.,  3.], dtype=float32)
    """
    x = _arraylike("leaky_relu", x)
    return jnp.where(x >= 0, x, negative_slope * x)


@jit
def hard_tanh(x: ArrayLike) -> Array:
    """Hard tanh: ``x`` clipped to ``[-1, 1]``.

    Args:
      x: input array.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.hard_tanh(plax.numpy.array([-2., 0.5, 2.]))
      Array([-1. ,  0.5,  1. ], dtype=float32)
    """
    x = _arraylike("hard_tanh", x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


@jit
def hard_sigmoid(x: ArrayLike) -> Array:
    """Hard sigmoid, ``relu6(x + 3) / 6``.

    Args:
      x: input array.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.hard_sigmoid(plax.numpy.array([-4., 0., 4.]))
      Array([0. , 0.5, 1. ], dtype=float32)
    """
    return relu6(x + 3.) / 6.


@jit
def hard_silu(x: ArrayLike) -> Array:
    """Hard SiLU (also called hard swish), ``x * hard_sigmoid(x)``.

    Args:
      x: input array.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.hard_silu(plax.numpy.array([-4., 1., 4.]))
      Array([-0.       ,  0.6666667,  4.       ], dtype=float32)
    """
    x = _arraylike("hard_silu", x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


@jit
def squareplus(x: ArrayLike, b: ArrayLike = 4) -> Array:
    """Squareplus, ``(x + sqrt(x**2 + b)) / 2``, a smooth algebraic ReLU.

    Args:
      x: input array.
      b: smoothness parameter (default 4).

    Returns:
      An array of the shape of ``x`` broadcast against ``b``.

    Example:
      >>> import plax
      >>> plax.nn.squareplus(plax.numpy.array([0., 1.5]))
      Array([1., 2.], dtype=float32)
    """
    check_arraylike("squareplus", x, b)
    x, b = jnp.asarray(x), jnp.asarray(b)
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


def gelu(x: ArrayLike, approximate: bool = True) -> Array:
    """Gaussian error linear unit, ``x * Phi(x)``.

    With ``approximate=True`` (the default, as in JAX) the tanh form
    ``x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3)))`` is used; with
    ``approximate=False`` the exact ``x/2 * erfc(-x / sqrt(2))``.

    Args:
      x: input array; integers are promoted to floating point.
      approximate: whether to use the tanh approximation.

    Returns:
      A floating-point array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.gelu(plax.numpy.array([1.]), approximate=False)
      Array([0.8413447], dtype=float32)
    """
    return _gelu(x, approximate=bool(approximate))


def _gelu_impl(x: ArrayLike, approximate: bool) -> Array:
    x, = promote_args_inexact("gelu", x)
    dtype = x.dtype
    if approximate:
        c = np.asarray(math.sqrt(2 / math.pi), dtype)
        cdf = 0.5 * (1.0 + jnp.tanh(c * (x + 0.044715 * (x ** 3))))
        return x * cdf
    sqrt_half = np.asarray(math.sqrt(0.5), dtype)
    return jnp.asarray(0.5 * x * lax.erfc(-x * sqrt_half), dtype=dtype)


_gelu_impl.__name__ = "gelu"
_gelu = jit(_gelu_impl, static_argnames=("approximate",))


def glu(x: ArrayLike, axis: int = -1) -> Array:
    """Gated linear unit: split ``x`` in two halves along ``axis``, return ``a * sigmoid(b)``.

    Args:
      x: input array; its size along ``axis`` must be even.
      axis: the axis to split (default -1).

    Returns:
      An array with half the size of ``x`` along ``axis``.

    Raises:
      AssertionError: if the size along ``axis`` is odd (as JAX raises).

    Example:
      >>> import plax
      >>> plax.nn.glu(plax.numpy.array([1., 2., 0., 0.]))
      Array([0.5, 1. ], dtype=float32)
    """
    return _glu(x, axis=axis)


def _glu_impl(x: ArrayLike, axis: int) -> Array:
    x = _arraylike("glu", x)
    size = x.shape[axis]
    if size % 2 != 0:
        raise AssertionError("axis size must be divisible by 2")
    x1, x2 = jnp.split(x, 2, axis)
    return x1 * sigmoid(x2)


_glu_impl.__name__ = "glu"
_glu = jit(_glu_impl, static_argnames=("axis",))


@custom_jvp
@jit
def log1mexp(x: ArrayLike) -> Array:
    """``log(1 - exp(-x))`` for ``x > 0``, accurate for small and large ``x``.

    It switches between ``log(-expm1(-x))`` and ``log1p(-exp(-x))`` at ``log 2``;
    its derivative is ``1 / expm1(x)``.

    Args:
      x: input array (positive values).

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.log1mexp(plax.numpy.array([1.]))
      Array([-0.4586751], dtype=float32)
    """
    x = _arraylike("log1mexp", x)
    return jnp.where(x < math.log(2.0), jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


log1mexp.defjvps(lambda g, ans, x: g / jnp.expm1(x))

tanh = jnp.tanh

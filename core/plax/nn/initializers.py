"""plax.nn.initializers: weight initializers, drawing from plax.random bit for bit as JAX does.

Each factory (``glorot_uniform()``, ``normal(0.02)``, ...) returns an initializer
``init(key, shape, dtype=None)``; ``zeros`` and ``ones`` are initializers themselves.

    from plax import random
    from plax.nn import initializers
    w = initializers.glorot_normal()(random.key(0), (784, 256))
"""
from __future__ import annotations

import math
from typing import Any, Literal, Protocol, Sequence, runtime_checkable

import numpy as np

from plax import dtypes
from plax import numpy as jnp
from plax import random

Array = Any
ArrayLike = Any
DTypeLike = Any
RealNumeric = Any
Shape = Sequence[int]

__all__ = ["Initializer", "zeros", "ones", "constant", "uniform", "normal", "truncated_normal",
           "variance_scaling", "glorot_uniform", "glorot_normal", "xavier_uniform",
           "xavier_normal", "lecun_uniform", "lecun_normal", "he_uniform", "he_normal",
           "kaiming_uniform", "kaiming_normal", "orthogonal", "delta_orthogonal"]


@runtime_checkable
class Initializer(Protocol):
    """What the factories of this module return: ``init(key, shape, dtype=None) -> Array``."""

    def __call__(self, key: Array, shape: Shape, dtype: DTypeLike | None = None,
                 out_sharding: Any = None) -> Array:
        raise NotImplementedError


def _dtype(dtype: DTypeLike | None) -> np.dtype:
    return dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)


def _no_sharding(out_sharding: Any, name: str) -> None:
    if out_sharding is not None:
        raise NotImplementedError(f"plax.nn.initializers.{name}: out_sharding is not supported")


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(d) for d in shape)


def zeros(key: Array, shape: Shape, dtype: DTypeLike | None = None,
          out_sharding: Any = None) -> Array:
    """An initializer that returns zeros (the key is ignored).

    Args:
      key: a PRNG key (unused).
      shape: shape of the result.
      dtype: dtype of the result (default: the default float dtype).
      out_sharding: must be None in plax.

    Returns:
      An array of zeros.

    Example:
      >>> import plax
      >>> plax.nn.initializers.zeros(plax.random.key(0), (2,))
      Array([0., 0.], dtype=float32)
    """
    _no_sharding(out_sharding, "zeros")
    return jnp.zeros(shape, _dtype(dtype))


def ones(key: Array, shape: Shape, dtype: DTypeLike | None = None,
         out_sharding: Any = None) -> Array:
    """An initializer that returns ones (the key is ignored).

    Args:
      key: a PRNG key (unused).
      shape: shape of the result.
      dtype: dtype of the result (default: the default float dtype).
      out_sharding: must be None in plax.

    Returns:
      An array of ones.

    Example:
      >>> import plax
      >>> plax.nn.initializers.ones(plax.random.key(0), (2,))
      Array([1., 1.], dtype=float32)
    """
    _no_sharding(out_sharding, "ones")
    return jnp.ones(shape, _dtype(dtype))


def constant(value: ArrayLike, dtype: DTypeLike | None = None) -> Initializer:
    """Builds an initializer that fills its result with ``value``.

    Args:
      value: the fill value (a scalar or an array broadcastable to the shape).
      dtype: default dtype of the initializer's result.

    Returns:
      An initializer ``init(key, shape, dtype=dtype)``.

    Example:
      >>> import plax
      >>> plax.nn.initializers.constant(-7)(plax.random.key(0), (2,))
      Array([-7., -7.], dtype=float32)
    """
    def init(key: Array, shape: Shape, dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding, "constant")
        return jnp.full(shape, value, dtype=_dtype(dtype))
    return init


def uniform(scale: RealNumeric = 1e-2, dtype: DTypeLike | None = None) -> Initializer:
    """Builds an initializer drawing uniformly from ``[0, scale)``.

    Args:
      scale: upper bound of the range (default 0.01).
      dtype: default dtype of the initializer's result.

    Returns:
      An initializer ``init(key, shape, dtype=dtype)``.

    Example:
      >>> import plax
      >>> w = plax.nn.initializers.uniform(10.0)(plax.random.key(0), (2, 3))
      >>> w.shape, bool((w >= 0).all() and (w < 10).all())
      ((2, 3), True)
    """
    def init(key: Array, shape: Shape, dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding, "uniform")
        dtype = _dtype(dtype)
        return random.uniform(key, _shape(shape), dtype) * jnp.array(scale, dtype)
    return init


def normal(stddev: RealNumeric = 1e-2, dtype: DTypeLike | None = None) -> Initializer:
    """Builds an initializer drawing from a centred normal with standard deviation ``stddev``.

    Args:
      stddev: standard deviation (default 0.01).
      dtype: default dtype of the initializer's result.

    Returns:
      An initializer ``init(key, shape, dtype=dtype)``.

    Example:
      >>> import plax
      >>> plax.nn.initializers.normal(5.0)(plax.random.key(0), (2, 3)).shape
      (2, 3)
    """
    def init(key: Array, shape: Shape, dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding, "normal")
        dtype = _dtype(dtype)
        return random.normal(key, _shape(shape), dtype) * jnp.array(stddev, dtype)
    return init


def truncated_normal(stddev: RealNumeric = 1e-2, dtype: DTypeLike | None = None,
                     lower: RealNumeric = -2.0, upper: RealNumeric = 2.0) -> Initializer:
    """Builds an initializer drawing ``stddev * z`` with ``z`` a standard normal cut to ``(lower, upper)``.

    Args:
      stddev: scale of the draws (default 0.01; the result's standard deviation is
        smaller, since the tails are cut).
      dtype: default dtype of the initializer's result.
      lower: lower bound of ``z`` (default -2).
      upper: upper bound of ``z`` (default 2).

    Returns:
      An initializer ``init(key, shape, dtype=dtype)``.

    Example:
      >>> import plax
      >>> w = plax.nn.initializers.truncated_normal(1.0)(plax.random.key(0), (100,))
      >>> bool((abs(w) <= 2).all())
      True
    """
    def init(key: Array, shape: Shape, dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding, "truncated_normal")
        dtype = _dtype(dtype)
        z = random.truncated_normal(key, lower, upper, _shape(shape), dtype)
        return z * jnp.array(stddev, dtype)
    return init


def _axis_size(shape: tuple[int, ...], axis: int | Sequence[int]) -> int:
    if isinstance(axis, (int, np.integer)):
        return shape[axis]
    return math.prod(shape[i] for i in axis)


def _compute_fans(shape: tuple[int, ...], in_axis: int | Sequence[int] = -2,
                  out_axis: int | Sequence[int] = -1,
                  batch_axis: int | Sequence[int] = ()) -> tuple[float, float]:
    """(fan_in, fan_out) of a weight of ``shape``: in/out sizes times the receptive field."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional "
                         "weights tensor with default in_axis. Must be at least 2D or specify "
                         "in_axis explicitly.")
    in_size = _axis_size(shape, in_axis)
    out_size = _axis_size(shape, out_axis)
    batch_size = _axis_size(shape, batch_axis)
    receptive_field = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field, out_size * receptive_field


def _complex_uniform(key: Array, shape: tuple[int, ...], dtype: np.dtype) -> Array:
    """Uniform on the complex disc of radius sqrt(2) (unit variance)."""
    key_r, key_theta = random.split(key)
    real = dtypes.real_dtype(dtype)
    r = jnp.sqrt(2 * random.uniform(key_r, shape, real)).astype(dtype)
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key: Array, upper: float, shape: tuple[int, ...],
                              dtype: np.dtype) -> Array:
    """Complex standard normal with modulus below ``upper``, by inverting the radial CDF."""
    key_r, key_theta = random.split(key)
    real = dtypes.real_dtype(dtype)
    t = (1 - jnp.exp(jnp.array(-(upper ** 2), dtype))) \
        * random.uniform(key_r, shape, real).astype(dtype)
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
    return r * jnp.exp(1j * theta)


_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")


def variance_scaling(scale: RealNumeric,
                     mode: Literal["fan_in", "fan_out", "fan_avg", "fan_geo_avg"],
                     distribution: Literal["truncated_normal", "normal", "uniform"],
                     in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
                     batch_axis: int | Sequence[int] = (),
                     dtype: DTypeLike | None = None) -> Initializer:
    """Builds an initializer whose draws have variance ``scale / n``, ``n`` set by ``mode``.

    ``n`` is the fan-in (``"fan_in"``), the fan-out (``"fan_out"``), their mean
    (``"fan_avg"``) or their geometric mean (``"fan_geo_avg"``). The fans are the sizes of
    ``in_axis`` and ``out_axis`` times the receptive field (the size of every axis that is
    none of ``in_axis``, ``out_axis``, ``batch_axis``). ``distribution`` is
    ``"truncated_normal"`` (cut at two standard deviations and rescaled to the variance),
    ``"normal"`` or ``"uniform"``; complex dtypes draw from their complex analogues.

    Args:
      scale: the variance numerator.
      mode: one of ``"fan_in"``, ``"fan_out"``, ``"fan_avg"``, ``"fan_geo_avg"``.
      distribution: one of ``"truncated_normal"``, ``"normal"``, ``"uniform"``.
      in_axis: axis or axes of the input dimension (default -2).
      out_axis: axis or axes of the output dimension (default -1).
      batch_axis: axis or axes left out of the fans (default none).
      dtype: default dtype of the initializer's result.

    Returns:
      An initializer ``init(key, shape, dtype=dtype)``.

    Raises:
      ValueError: (when called) for an unknown ``mode`` or ``distribution``, or a weight of
        rank below 2 with the default ``in_axis``.

    Example:
      >>> import plax
      >>> init = plax.nn.initializers.variance_scaling(2.0, "fan_in", "normal")
      >>> init(plax.random.key(0), (3, 4)).shape
      (3, 4)
    """
    def init(key: Array, shape: Shape, dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding, "variance_scaling")
        shape = _shape(shape)
        dtype = _dtype(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        if mode == "fan_in":
            denominator = fan_in
        elif mode == "fan_out":
            denominator = fan_out
        elif mode == "fan_avg":
            denominator = (fan_in + fan_out) / 2
        elif mode == "fan_geo_avg":
            denominator = (fan_in * fan_out) ** 0.5
        else:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = jnp.array(scale / denominator, dtype=dtype)
        complex_ = dtypes.is_complex(dtype)
        if distribution == "truncated_normal":
            if not complex_:
                # the standard deviation of a standard normal cut to (-2, 2)
                stddev = jnp.sqrt(variance) / jnp.array(.87962566103423978, dtype)
                return random.truncated_normal(key, -2, 2, shape, dtype) * stddev
            # the standard deviation of a complex standard normal cut at modulus 2
            stddev = jnp.sqrt(variance) / jnp.array(.95311164380491208, dtype)
            return _complex_truncated_normal(key, 2, shape, dtype) * stddev
        if distribution == "normal":
            return random.normal(key, shape, dtype) * jnp.sqrt(variance)
        if distribution == "uniform":
            if not complex_:
                return random.uniform(key, shape, dtype, -1) * jnp.sqrt(3 * variance)
            return _complex_uniform(key, shape, dtype) * jnp.sqrt(variance)
        raise ValueError(f"invalid distribution for variance scaling initializer: "
                         f"{distribution}")
    return init


def _fan_factory(scale: float, mode: str, distribution: str, name: str, what: str):
    """One of the named variance_scaling presets (glorot, lecun, he)."""
    def factory(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
                batch_axis: int | Sequence[int] = (),
                dtype: DTypeLike | None = None) -> Initializer:
        return variance_scaling(scale, mode, distribution, in_axis=in_axis,
                                out_axis=out_axis, batch_axis=batch_axis, dtype=dtype)
    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"""Builds {what}: ``variance_scaling({scale}, "{mode}", "{distribution}")``.

    Args:
      in_axis: axis or axes of the input dimension (default -2).
      out_axis: axis or axes of the output dimension (default -1).
      batch_axis: axis or axes left out of the fans (default none).
      dtype: default dtype of the initializer's result.

    Returns:
      An initializer ``init(key, shape, dtype=dtype)``.

    Example:
      >>> import plax
      >>> plax.nn.initializers.{name}()(plax.random.key(0), (3, 4)).shape
      (3, 4)
    """
    return factory


glorot_uniform = _fan_factory(1.0, "fan_avg", "uniform", "glorot_uniform",
                              "the Glorot (Xavier) uniform initializer")
glorot_normal = _fan_factory(1.0, "fan_avg", "truncated_normal", "glorot_normal",
                             "the Glorot (Xavier) normal initializer")
lecun_uniform = _fan_factory(1.0, "fan_in", "uniform", "lecun_uniform",
                             "the LeCun uniform initializer")
lecun_normal = _fan_factory(1.0, "fan_in", "truncated_normal", "lecun_normal",
                            "the LeCun normal initializer")
he_uniform = _fan_factory(2.0, "fan_in", "uniform", "he_uniform",
                          "the He (Kaiming) uniform initializer")
he_normal = _fan_factory(2.0, "fan_in", "truncated_normal", "he_normal",
                         "the He (Kaiming) normal initializer")
xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal


def orthogonal(scale: RealNumeric = 1.0, column_axis: int = -1,
               dtype: DTypeLike | None = None) -> Initializer:
    """Builds an initializer returning ``scale`` times a uniformly random orthogonal matrix.

    The weight is viewed as a matrix whose columns run along ``column_axis`` and whose
    rows are all other axes flattened; that matrix has orthonormal rows or columns
    (whichever are fewer).

    Args:
      scale: factor applied to the orthogonal matrix (default 1).
      column_axis: the axis holding the columns (default -1).
      dtype: default dtype of the initializer's result.

    Returns:
      An initializer ``init(key, shape, dtype=dtype)``; it raises ValueError for a
      shape of rank below 2.

    Example:
      >>> import plax
      >>> w = plax.nn.initializers.orthogonal()(plax.random.key(0), (3, 3))
      >>> bool(plax.numpy.allclose(w @ w.T, plax.numpy.eye(3), atol=1e-5))
      True
    """
    def init(key: Array, shape: Shape, dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding, "orthogonal")
        dtype = _dtype(dtype)
        shape = _shape(shape)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if any(d == 0 for d in shape):
            return jnp.zeros(shape, dtype=dtype)
        n_cols = shape[column_axis]
        n_rows = math.prod(shape) // n_cols
        q = random.orthogonal(key, n_rows, (), dtype, n_cols)
        rest = tuple(np.delete(np.array(shape), column_axis))
        q = jnp.reshape(q, rest + (n_cols,))
        q = jnp.moveaxis(q, -1, column_axis)
        return jnp.array(scale, dtype) * q
    return init


def delta_orthogonal(scale: RealNumeric = 1.0, column_axis: int = -1,
                     dtype: DTypeLike | None = None) -> Initializer:
    """Builds the delta-orthogonal initializer for convolution kernels.

    The kernel (3-D, 4-D or 5-D: spatial axes, then input and output channels) is zero
    except at its spatial centre, which holds an orthogonal ``(in, out)`` matrix drawn
    as by :func:`orthogonal`.

    Args:
      scale: factor applied to the orthogonal matrix (default 1).
      column_axis: the axis holding the columns of that matrix (default -1).
      dtype: default dtype of the initializer's result.

    Returns:
      An initializer ``init(key, shape, dtype=dtype)``; it raises ValueError unless the
      shape has rank 3, 4 or 5 with ``shape[-1] >= shape[-2]``.

    Example:
      >>> import plax
      >>> w = plax.nn.initializers.delta_orthogonal()(plax.random.key(0), (3, 3, 2, 4))
      >>> w.shape, float(abs(w[0, 0]).sum())
      ((3, 3, 2, 4), 0.0)
    """
    def init(key: Array, shape: Shape, dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        _no_sharding(out_sharding, "delta_orthogonal")
        dtype = _dtype(dtype)
        shape = _shape(shape)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        ortho = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return jnp.zeros(shape, dtype=dtype).at[centre].set(ortho)
    return init

"""``jax.image``: resampling images (``resize``, ``scale_and_translate``).

Each spatial dimension that changes is resampled by one weight matrix, ``W[i, j]`` the weight
of input pixel ``i`` in output pixel ``j``: the kernel (triangle for linear, Keys cubic,
Lanczos 3 or 5, OpenCV's cubic, or the overlap of pixel areas) evaluated at the distance
between input pixel ``i`` and the centre of output pixel ``j`` mapped back into the input,
stretched by ``1 / scale`` when downsampling with ``antialias`` (a low-pass filter), each
column normalised to sum to one, and zero for output pixels whose centre falls outside the
input. The image is contracted with each matrix in turn (``einsum``), so the whole resampling
is differentiable and traceable. ``nearest`` gathers ``floor((j + 0.5) * in / out)`` instead.
"""
from __future__ import annotations

import enum
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """How :func:`resize` and :func:`scale_and_translate` interpolate.

    NEAREST (nearest neighbour), LINEAR (triangle kernel), LANCZOS3 / LANCZOS5 (windowed
    sinc of radius 3 / 5), CUBIC (Keys cubic, a = -0.5), CUBIC_PYTORCH (a = -0.75 with the
    edges repeated, as PyTorch without antialiasing), AREA (the mean of the input pixels an
    output pixel covers).

    Example:
      >>> jax.image.ResizeMethod.from_string("bilinear")
      <ResizeMethod.LINEAR: 1>
    """

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> "ResizeMethod":
        """The method a name stands for (``"linear"``, ``"bilinear"``, ``"cubic"``, ...).

        Raises:
          ValueError: for an unknown name.
        """
        method = _NAMES.get(s)
        if method is None:
            raise ValueError(f'Unknown resize method "{s}"')
        return method


_NAMES = {"nearest": ResizeMethod.NEAREST, "linear": ResizeMethod.LINEAR,
          "bilinear": ResizeMethod.LINEAR, "trilinear": ResizeMethod.LINEAR,
          "triangle": ResizeMethod.LINEAR, "lanczos3": ResizeMethod.LANCZOS3,
          "lanczos5": ResizeMethod.LANCZOS5, "cubic": ResizeMethod.CUBIC,
          "bicubic": ResizeMethod.CUBIC, "tricubic": ResizeMethod.CUBIC,
          "cubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
          "bicubic-pytorch": ResizeMethod.CUBIC_PYTORCH, "area": ResizeMethod.AREA}


# ------------------------------------------------------------------ kernels (of |distance|)

def _triangle(x):
    from plax import numpy as jnp
    return jnp.maximum(0, 1 - jnp.abs(x))


def _lanczos(radius: float) -> Callable:
    def kernel(x):
        from plax import numpy as jnp
        # sinc(x) * sinc(x / radius), 1 near 0 (where the quotient loses its precision)
        num = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
        den = jnp.where(x != 0, np.pi ** 2 * x ** 2, 1)
        return jnp.where(x > radius, 0.0, jnp.where(x > 1e-3, num / den, 1))
    return kernel


def _cubic(a: float) -> Callable:
    """The cubic convolution kernel with parameter ``a`` (Keys: -0.5; OpenCV: -0.75)."""
    def kernel(x):
        from plax import numpy as jnp
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        return jnp.where(x >= 2.0, 0.0, jnp.where(x >= 1.0, far, near))
    return kernel


_AREA = object()  # weights are the overlaps of pixel intervals, not a kernel of distance
_KERNELS = {ResizeMethod.LINEAR: (1, _triangle), ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
            ResizeMethod.LANCZOS5: (5, _lanczos(5.0)), ResizeMethod.CUBIC: (2, _cubic(-0.5)),
            ResizeMethod.CUBIC_PYTORCH: (2, _cubic(-0.75)), ResizeMethod.AREA: (1, _AREA)}
_EPS = 1000.0 * float(np.finfo(np.float32).eps)  # columns lighter than this get no weight


def _normalised(weights):
    from plax import numpy as jnp
    total = jnp.sum(weights, axis=0, keepdims=True)
    return jnp.where(jnp.abs(total) > _EPS, weights / jnp.where(total != 0, total, 1), 0)


def _weight_matrix(in_size: int, out_size: int, scale, translation, kernel, antialias: bool,
                   edge_padding: bool, radius: int):
    """The ``(in_size, out_size)`` weights of one dimension (see the module docstring)."""
    from plax import numpy as jnp
    dtype = jnp.result_type(scale, translation)
    inv_scale = 1.0 / scale
    kernel_scale = jnp.maximum(inv_scale, 1.0) if antialias else 1.0
    # the input coordinate of each output pixel's centre (pixel centres at i + 0.5)
    sample = (jnp.arange(out_size, dtype=dtype) + 0.5 - translation) * inv_scale - 0.5
    pad = radius if edge_padding else 0
    taps = jnp.arange(-pad, in_size + pad, dtype=dtype)
    if kernel is _AREA:
        left = (jnp.arange(out_size, dtype=dtype) - translation) * inv_scale
        right = left + inv_scale
        start = jnp.arange(in_size, dtype=dtype)
        weights = jnp.maximum(0.0, jnp.minimum(right[None, :], start[:, None] + 1.0)
                              - jnp.maximum(left[None, :], start[:, None]))
    else:
        weights = kernel(jnp.abs(sample[None, :] - taps[:, None]) / kernel_scale)
    if edge_padding:
        # taps off the image take the value of the edge pixel: fold their weight onto it
        edge = np.clip(np.arange(-pad, in_size + pad), 0, in_size - 1)
        fold = np.zeros((in_size, in_size + 2 * pad), np.float32)
        fold[edge, np.arange(in_size + 2 * pad)] = 1.0
        return _normalised(jnp.asarray(fold, dtype) @ weights)
    weights = _normalised(weights)
    inside = (sample >= -0.5) & (sample <= in_size - 0.5)
    return jnp.where(inside[None, :], weights, 0)


def _resample(image, shape, spatial_dims, scales, translations, method: ResizeMethod,
              antialias: bool, precision):
    from plax import numpy as jnp
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC  # the same kernel once antialiased, as in JAX
    radius, kernel = _KERNELS[method]
    edge_padding = method == ResizeMethod.CUBIC_PYTORCH
    out = image
    letters = "abcdefghijklmnopqrstuvwxyz"
    for d, scale, translation in zip(spatial_dims, scales, translations):
        w = _weight_matrix(image.shape[d], shape[d], scale, translation, kernel, antialias,
                           edge_padding, radius).astype(image.dtype)
        src = letters[:image.ndim]
        dst = src[:d] + "Z" + src[d + 1:]
        out = jnp.einsum(f"{src},{src[d]}Z->{dst}", out, w, precision=precision)
    return out


def _check_shape(image, shape) -> tuple:
    shape = tuple(int(s) for s in shape)
    if len(shape) != image.ndim:
        raise ValueError("shape must have length equal to the number of dimensions of x; "
                         f" {shape} vs {image.shape}")
    return shape


def _method(method) -> ResizeMethod:
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    if not isinstance(method, ResizeMethod):
        raise TypeError(f"method must be a string or a ResizeMethod, got {method!r}")
    return method


def _inexact(x):
    from plax import numpy as jnp
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return x
    return x.astype(jnp.promote_types(x.dtype, jnp.float32) if x.dtype != np.bool_
                    else jnp.float32)


def _resize_nearest(image, shape):
    for d, (m, n) in enumerate(zip(image.shape, shape)):
        if m == n:
            continue
        # computed in float32, as JAX does (so the indices are JAX's in every precision mode)
        offsets = np.floor(((np.arange(n, dtype=np.float32) + np.float32(0.5))
                            * np.float32(m) / np.float32(n))).astype(np.int32)
        index: list[Any] = [slice(None)] * image.ndim
        index[d] = offsets
        image = image[tuple(index)]
    return image


def resize(image, shape: Sequence[int], method: str | ResizeMethod, antialias: bool = True,
           precision=None):
    """Resizes ``image`` to ``shape`` (every dimension may change: batch and channels too).

    Args:
      image: an array.
      shape: the output shape, one entry per dimension of ``image``.
      method: a :class:`ResizeMethod` or its name: ``"nearest"``, ``"linear"``
        (``"bilinear"``, ``"trilinear"``, ``"triangle"``), ``"lanczos3"``, ``"lanczos5"``,
        ``"cubic"`` (``"bicubic"``, ``"tricubic"``), ``"cubic-pytorch"``, ``"area"``.
      antialias: filter when downsampling (ignored for ``"nearest"``).
      precision: the precision of the contractions (default HIGHEST, as in JAX).

    Returns:
      The resized image: the input's dtype for ``"nearest"``, else that dtype promoted to an
      inexact one.

    Raises:
      ValueError: for a shape of another rank, or an unknown method.

    Example:
      >>> jax.image.resize(jnp.array([0.0, 1.0]), (4,), "linear")
      Array([0.  , 0.25, 0.75, 1.  ], dtype=float32)
    """
    from plax import lax
    from plax import numpy as jnp
    image = jnp.asarray(image)
    shape = _check_shape(image, shape)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    image = _inexact(image)
    dims = [d for d in range(image.ndim) if image.shape[d] != shape[d]]
    scales = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in dims]
    return _resample(image, shape, dims, scales, [0.0] * len(dims), method, antialias,
                     lax.Precision.HIGHEST if precision is None else precision)


def scale_and_translate(image, shape: Sequence[int], spatial_dims: Sequence[int], scale,
                        translation, method: str | ResizeMethod, antialias: bool = True,
                        precision=None):
    """Resamples ``image`` to ``shape``, mapping input coordinate ``x`` of each dimension in
    ``spatial_dims`` to ``x * scale + translation`` (pixel centres at ``i + 0.5``).

    Args:
      image: an array.
      shape: the output shape, one entry per dimension of ``image``.
      spatial_dims: the dimensions resampled.
      scale: one scale per spatial dimension (may be traced).
      translation: one translation per spatial dimension (may be traced).
      method: as for :func:`resize`, except ``"nearest"``.
      antialias: filter when downsampling.
      precision: the precision of the contractions (default HIGHEST, as in JAX).

    Returns:
      The resampled image (its dtype promoted to an inexact one).

    Raises:
      ValueError: for a shape of another rank, or ``"nearest"`` (as in JAX).

    Example:
      >>> jax.image.scale_and_translate(jnp.arange(4.0), (4,), (0,), jnp.array([1.0]),
      ...                               jnp.array([1.0]), "linear")
      Array([0., 0., 1., 2.], dtype=float32)
    """
    from plax import lax
    from plax import numpy as jnp
    image = jnp.asarray(image)
    shape = _check_shape(image, shape)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for "
                         "scale_and_translate.")
    image = _inexact(image)
    scale, translation = jnp.asarray(scale), jnp.asarray(translation)
    kind = jnp.result_type(scale, translation, jnp.float32)
    scale, translation = scale.astype(kind), translation.astype(kind)
    dims = [int(d) % image.ndim for d in spatial_dims]
    return _resample(image, shape, dims, [scale[k] for k in range(len(dims))],
                     [translation[k] for k in range(len(dims))], method, antialias,
                     lax.Precision.HIGHEST if precision is None else precision)

"""conv_general_dilated: N-d convolution with strides, padding, dilations, layouts and groups.

The primitive carries explicit padding pairs and a :class:`ConvDimensionNumbers` of integer
layouts; the user-facing functions (``conv``, ``conv_with_general_padding``,
``conv_transpose``) turn padding names and layout strings into those. Both transposes are
themselves convolutions: the lhs cotangent convolves the output cotangent with the flipped
kernel (strides and lhs dilation trade places), the rhs cotangent correlates the input with
the output cotangent (strides and rhs dilation trade places); feature and batch groups trade
places too.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from plax import dtypes
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax.base import NUMBER, asarray, aval_of, check_dtype, out_sharded
from plax.lax.dot import _canonical_precision  # one canonical form for every product
from plax.transforms.jvp import Zero, bilinear_jvp


class ConvDimensionNumbers(NamedTuple):
    """Where the batch, feature and spatial axes of each convolution operand live.

    Attributes:
      lhs_spec: ``(batch axis, feature axis, spatial axes...)`` of the input.
      rhs_spec: ``(output feature axis, input feature axis, spatial axes...)`` of the kernel.
      out_spec: ``(batch axis, feature axis, spatial axes...)`` of the output.
    """

    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers) -> ConvDimensionNumbers:
    """Canonical :class:`ConvDimensionNumbers` from ``None`` (``NC...``, ``OI...``, ``NC...``),
    a ConvDimensionNumbers, or a triple of layout strings such as ``("NHWC", "HWIO", "NHWC")``.

    Spatial axes are listed in the order their letters appear in the kernel string.

    Args:
      lhs_shape: the input's shape.
      rhs_shape: the kernel's shape.
      dimension_numbers: the layouts.

    Returns:
      The layouts as integer axis tuples.

    Example:
      >>> lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
      ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
    """
    lhs_shape, rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got "
                        f"{len(lhs_shape)} and {len(rhs_shape)}.")
    nd = len(lhs_shape)
    if nd < 2:
        raise TypeError(f"convolution requires operands of rank at least 2, got lhs shape "
                        f"{lhs_shape} and rhs shape {rhs_shape}.")
    if dimension_numbers is None:
        default = tuple(range(nd))
        return ConvDimensionNumbers(default, default, default)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        specs = dimension_numbers
    else:
        specs = tuple(dimension_numbers)
        if len(specs) != 3:
            raise TypeError(f"convolution dimension_numbers must be a ConvDimensionNumbers or "
                            f"a triple of strings, got {dimension_numbers!r}.")
    if all(isinstance(s, str) for s in specs):
        return _from_strings(*specs, nd)
    dn = ConvDimensionNumbers(*(tuple(int(i) for i in s) for s in specs))
    for s in dn:
        if sorted(s) != list(range(nd)):
            raise TypeError(f"convolution dimension_numbers {tuple(dn)} must each be a "
                            f"permutation of range({nd}).")
    return dn


def _from_strings(lhs: str, rhs: str, out: str, nd: int) -> ConvDimensionNumbers:
    for s in (lhs, rhs, out):
        if len(s) != nd or len(set(s)) != nd:
            raise TypeError(f"convolution dimension_numbers strings must have one distinct "
                            f"letter per operand dimension ({nd}), got {(lhs, rhs, out)}.")
    if not ({"N", "C"} <= set(lhs) and {"O", "I"} <= set(rhs) and {"N", "C"} <= set(out)):
        raise TypeError(f"convolution dimension_numbers need 'N' and 'C' in the lhs and out "
                        f"strings and 'O' and 'I' in the rhs string, got {(lhs, rhs, out)}.")
    spatial = [c for c in rhs if c not in "OI"]
    if set(lhs) - {"N", "C"} != set(spatial) or set(out) - {"N", "C"} != set(spatial):
        raise TypeError(f"convolution dimension_numbers elements must each have the same set "
                        f"of spatial characters, got {(lhs, rhs, out)}.")
    return ConvDimensionNumbers((lhs.index("N"), lhs.index("C")) + tuple(lhs.index(c) for c in spatial),
                                (rhs.index("O"), rhs.index("I")) + tuple(rhs.index(c) for c in spatial),
                                (out.index("N"), out.index("C")) + tuple(out.index(c) for c in spatial))


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int],
                    window_strides: Sequence[int], padding: str) -> list[tuple[int, int]]:
    """Explicit ``(low, high)`` padding pairs for a padding name.

    ``"VALID"`` pads nothing; ``"SAME"`` pads so the output has ``ceil(in / stride)``
    elements, with the odd element of padding at the end (``"SAME_LOWER"``: at the start).

    Example:
      >>> lax.padtype_to_pads((5,), (3,), (2,), "SAME")
      [(1, 1)]
    """
    name = padding.upper() if isinstance(padding, str) else padding
    if name == "VALID":
        return [(0, 0)] * len(in_shape)
    if name in ("SAME", "SAME_LOWER"):
        out = []
        for n, w, s in zip(in_shape, window_shape, window_strides):
            total = max((-(-n // s) - 1) * s + w - n, 0)
            small, big = total // 2, total - total // 2
            out.append((big, small) if name == "SAME_LOWER" else (small, big))
        return out
    raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or 'SAME_LOWER', "
                       f"got {padding}.")


def _dilate(n: int, d: int) -> int:
    return 0 if n == 0 else (n - 1) * d + 1


def conv_output_shape(lhs_shape, rhs_shape, window_strides, padding, lhs_dilation,
                      rhs_dilation, dn, batch_group_count) -> tuple:
    """The output shape of conv_general_dilated (its arguments already canonical)."""
    spatial = []
    for k in range(len(dn.lhs_spec) - 2):
        n = _dilate(lhs_shape[dn.lhs_spec[k + 2]], lhs_dilation[k])
        w = _dilate(rhs_shape[dn.rhs_spec[k + 2]], rhs_dilation[k])
        lo, hi = padding[k]
        span = n + lo + hi - w
        spatial.append(span // window_strides[k] + 1 if span >= 0 else 0)
    canon = (lhs_shape[dn.lhs_spec[0]] // batch_group_count, rhs_shape[dn.rhs_spec[0]], *spatial)
    out = [0] * len(canon)
    for j, axis in enumerate(dn.out_spec):
        out[axis] = canon[j]
    return tuple(out)


# ---------------------------------------------------------------- the values, for the backends
# Array-module-generic pieces of the convolution and window kernels: the NumPy reference
# kernels and the CuPy kernels call them with their module (``xp``), so the layout and
# padding logic is written once.

def dilate_and_pad(x, axes: Sequence[int], dilation: Sequence[int], padding: Sequence[tuple],
                   fill, xp=None):
    """``x`` with ``dilation - 1`` holes between elements and ``(low, high)`` padding
    (negative crops) along ``axes``, holes and padding holding ``fill``: one allocation and
    one strided copy, or a view of ``x`` when it is only cropped.

    Args:
      x: a host or device array.
      axes: the axes to dilate and pad.
      dilation: one dilation per axis in ``axes`` (1 for none).
      padding: one ``(low, high)`` pair per axis in ``axes``.
      fill: the value of holes and padding (a scalar of ``x``'s dtype).
      xp: the array module of ``x`` (default NumPy).

    Returns:
      The dilated and padded array, of ``x``'s dtype.

    Example:
      >>> import numpy as np
      >>> dilate_and_pad(np.array([1, 2]), (0,), (2,), ((1, 0),), 0)
      array([0, 1, 0, 2])
    """
    if all(d == 1 for d in dilation) and all(lo <= 0 and hi <= 0 for lo, hi in padding):
        crop = [slice(None)] * x.ndim  # nothing to fill: a view, no copy
        for a, (lo, hi) in zip(axes, padding):
            start = min(-lo, x.shape[a])
            crop[a] = slice(start, max(x.shape[a] + hi, start))
        return x[tuple(crop)]
    xp = np if xp is None else xp
    shape = list(x.shape)
    dst = [slice(None)] * x.ndim
    src = [slice(None)] * x.ndim
    empty = False
    for a, d, (lo, hi) in zip(axes, dilation, padding):
        n = x.shape[a]
        size = max(_dilate(n, d) + lo + hi, 0)
        shape[a] = size
        # input element i lands at lo + i * d; keep those inside [0, size)
        first = max(0, -(-max(0, -lo) // d))
        last = min(n - 1, (size - 1 - lo) // d) if size else -1
        if first > last:
            empty = True
            continue
        dst[a] = slice(lo + first * d, lo + last * d + 1, d)
        src[a] = slice(first, last + 1)
    out = xp.full(tuple(shape), fill, x.dtype)
    if not empty and x.size:
        out[tuple(dst)] = x[tuple(src)]
    return out


def window_view(x, axes: Sequence[int], window: Sequence[int], strides: Sequence[int],
                window_dilation: Sequence[int], out_sizes: Sequence[int], xp=None):
    """A strided view of (a C-contiguous copy of) ``x`` of shape ``x.shape`` with ``axes``
    replaced by ``out_sizes``, followed by ``window``: element ``[..., i, ..., k]`` is
    ``x[..., i * stride + k * dilation, ...]``.

    The view is always over C-ordered memory, so a reduction over it (which NumPy orders by
    the strides) adds a window's elements in one order whatever ``x``'s layout: a transposed
    operand gives the same bits as a contiguous one, on every backend.

    Args:
      x: a host or device array of rank at least 1.
      axes: the windowed axes.
      window, strides, window_dilation: one per axis in ``axes``.
      out_sizes: the number of window positions along each axis in ``axes`` (each window
        must fit: see :func:`plax.lax.windows.window_output_shape`).
      xp: the array module of ``x`` (default NumPy).

    Returns:
      The view (no copy beyond making ``x`` contiguous); treat it as read-only (its windows
      overlap).

    Example:
      >>> import numpy as np
      >>> window_view(np.arange(5), (0,), (2,), (1,), (1,), (4,))[:2]
      array([[0, 1],
             [1, 2]])
    """
    xp = np if xp is None else xp
    x = xp.ascontiguousarray(x)
    shape, st = list(x.shape), list(x.strides)
    extra_shape, extra_strides = [], []
    for a, w, s, d, m in zip(axes, window, strides, window_dilation, out_sizes):
        extra_shape.append(w)
        extra_strides.append(x.strides[a] * d)
        shape[a] = m
        st[a] = x.strides[a] * s
    return xp.lib.stride_tricks.as_strided(x, tuple(shape) + tuple(extra_shape),
                                           tuple(st) + tuple(extra_strides))


def conv_compute_dtype(out_dtype) -> np.dtype:
    """The dtype a backend accumulates a convolution of result dtype ``out_dtype`` in: int64
    for booleans, float32 for the 16-bit floats (no half-precision accumulation), else
    ``out_dtype`` itself.

    Example:
      >>> conv_compute_dtype(np.float16)
      dtype('float32')
    """
    out_dtype = np.dtype(out_dtype)
    if out_dtype == np.bool_:
        return np.dtype(np.int64)
    if out_dtype.itemsize == 2 and out_dtype.kind in "fV":  # float16, bfloat16
        return np.dtype(np.float32)
    return out_dtype


def to_channels_last(lhs, rhs, dimension_numbers, compute, xp=None) -> tuple:
    """The operands of a convolution laid out as its kernels compute: ``x`` as
    ``(N, spatial..., C)`` and ``w`` as ``(window..., I, O)``, both cast to ``compute``.

    Args:
      lhs, rhs: host or device arrays laid out as ``dimension_numbers`` says.
      dimension_numbers: the primitive's :class:`ConvDimensionNumbers`.
      compute: the dtype to compute in (:func:`conv_compute_dtype`).
      xp: the array module of the operands (default NumPy).

    Returns:
      ``(x, w)`` (views where no cast is needed).

    Example:
      >>> import numpy as np
      >>> dn = ConvDimensionNumbers((0, 1, 2), (0, 1, 2), (0, 1, 2))
      >>> [a.shape for a in to_channels_last(np.zeros((1, 2, 5)), np.zeros((3, 2, 4)), dn,
      ...                                    np.float64)]
      [(1, 5, 2), (4, 2, 3)]
    """
    xp = np if xp is None else xp
    ls, rs, _ = dimension_numbers
    x = xp.transpose(lhs, (ls[0],) + tuple(ls[2:]) + (ls[1],)).astype(compute, copy=False)
    w = xp.transpose(rhs, tuple(rs[2:]) + (rs[1], rs[0])).astype(compute, copy=False)
    return x, w


def from_channels_last(out, dimension_numbers, out_dtype, xp=None):
    """A convolution's result computed channels last, ``(N, spatial..., O)``, laid out as the
    output spec of ``dimension_numbers`` says, in ``out_dtype`` (booleans: nonzero), and
    C-contiguous.

    Args:
      out: the host or device array computed in the compute dtype.
      dimension_numbers: the primitive's :class:`ConvDimensionNumbers`.
      out_dtype: the result dtype.
      xp: the array module of ``out`` (default NumPy).

    Returns:
      The result buffer.

    Example:
      >>> import numpy as np
      >>> dn = ConvDimensionNumbers((0, 1, 2), (0, 1, 2), (0, 1, 2))
      >>> from_channels_last(np.zeros((1, 4, 3)), dn, np.float32).shape
      (1, 3, 4)
    """
    xp = np if xp is None else xp
    os_ = dimension_numbers[2]
    nsp = out.ndim - 2
    if np.dtype(out_dtype) == np.bool_:
        out = out != 0
    perm = [0] * (nsp + 2)
    perm[os_[0]], perm[os_[1]] = 0, nsp + 1
    for i in range(nsp):
        perm[os_[2 + i]] = 1 + i
    out = xp.transpose(out, perm)
    return xp.ascontiguousarray(out.astype(out_dtype, copy=False))


conv_general_dilated_p = Primitive("conv_general_dilated")

_CONV_TYPES = ("bool",) + NUMBER


@conv_general_dilated_p.def_abstract_eval
def _conv_abstract_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count, precision,
                        preferred_element_type):
    name = "conv_general_dilated"
    check_dtype(name, lhs, _CONV_TYPES, "lhs")
    check_dtype(name, rhs, _CONV_TYPES, "rhs")
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"{name} requires operands of the same dtype, got {lhs.dtype.name} "
                        f"and {rhs.dtype.name}.")
    if lhs.ndim != rhs.ndim:
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got {lhs.ndim} "
                        f"and {rhs.ndim}.")
    dn = dimension_numbers
    nsp = lhs.ndim - 2
    for what, v in (("window_strides", window_strides), ("padding", padding),
                    ("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if len(v) != nsp:
            raise ValueError(f"{name} {what} must have one entry per spatial dimension "
                             f"({nsp}, for lhs shape {lhs.shape}), got {v}")
    for what, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if any(int(s) < 1 for s in v):
            raise ValueError(f"{name} {what} must be positive, got {v}")
    g, b = feature_group_count, batch_group_count
    for what, c in (("feature_group_count", g), ("batch_group_count", b)):
        if not isinstance(c, (int, np.integer)) or c < 1:
            raise ValueError(f"{name} {what} must be a positive integer, got {c}.")
    if g > 1 and b > 1:
        raise ValueError(f"{name} at most one of feature_group_count and batch_group_count "
                         f"may be > 1, got {g} and {b}.")
    n, c = lhs.shape[dn.lhs_spec[0]], lhs.shape[dn.lhs_spec[1]]
    o, i = rhs.shape[dn.rhs_spec[0]], rhs.shape[dn.rhs_spec[1]]
    if c % g:
        raise ValueError(f"{name} feature_group_count must divide lhs feature dimension size, "
                         f"but {g} does not divide {c}.")
    if c // g != i:
        raise ValueError(f"{name} lhs feature dimension size divided by feature_group_count "
                         f"must equal the rhs input feature dimension size, but {c} // {g} != "
                         f"{i} (lhs shape {lhs.shape}, rhs shape {rhs.shape}).")
    if o % g:
        raise ValueError(f"{name} rhs output feature dimension size must be a multiple of "
                         f"feature_group_count, but {o} is not a multiple of {g}.")
    if n % b:
        raise ValueError(f"{name} batch_group_count must divide lhs batch dimension size, but "
                         f"{b} does not divide {n}.")
    if o % b:
        raise ValueError(f"{name} rhs output feature dimension size must be a multiple of "
                         f"batch_group_count, but {o} is not a multiple of {b}.")
    shape = conv_output_shape(lhs.shape, rhs.shape, window_strides, padding, lhs_dilation,
                              rhs_dilation, dn, b)
    dt = lhs.dtype
    if preferred_element_type is not None and preferred_element_type != dt:
        pet = preferred_element_type
        if dtypes.is_complex(dt) and not dtypes.is_complex(pet):
            raise TypeError(f"{name} preferred_element_type {pet.name} cannot hold the result "
                            f"of {dt.name} operands.")
        if dt.kind in "iu" and pet.kind in "iu" and pet.itemsize < dt.itemsize:
            raise TypeError(f"{name} preferred_element_type must not be narrower than the "
                            f"operands' type, got {pet.name} for {dt.name} operands.")
        dt = pet
    return ShapedArray(shape, dt, lhs.weak_type and rhs.weak_type)


def _ints(v, n: int, what: str, default: int = 1) -> tuple:
    if v is None:
        return (default,) * n
    v = tuple(int(x) for x in v)
    if len(v) != n:
        raise ValueError(f"conv_general_dilated {what} must have one entry per spatial "
                         f"dimension ({n}), got {v}")
    return v


def conv_general_dilated(lhs, rhs, window_strides: Sequence[int], padding,
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None, dimension_numbers=None,
                         feature_group_count: int = 1, batch_group_count: int = 1,
                         precision=None, preferred_element_type=None, out_sharding=None):
    """General N-d convolution (a cross-correlation, as in JAX and XLA).

    Args:
      lhs: the input, rank ``n + 2`` (batch, feature, ``n`` spatial axes, in the layout of
        ``dimension_numbers``).
      rhs: the kernel, rank ``n + 2`` (output feature, input feature, spatial axes).
      window_strides: ``n`` strides.
      padding: ``"SAME"``, ``"SAME_LOWER"``, ``"VALID"`` or ``n`` ``(low, high)`` pairs
        (negative values crop).
      lhs_dilation: ``n`` input dilation factors (transposed convolution); default ones.
      rhs_dilation: ``n`` kernel dilation factors (atrous convolution); default ones.
      dimension_numbers: ``None``, a :class:`ConvDimensionNumbers` or layout strings such
        as ``("NHWC", "HWIO", "NHWC")``.
      feature_group_count: split the input features into this many groups.
      batch_group_count: split the input batch into this many groups (used by gradients).
      precision: ``None``, a :class:`Precision` or a pair of them (lhs, rhs); ``None``
        takes ``jax_default_matmul_precision`` when set. Recorded on the equation as
        ``dot_general`` records it (so ``jit`` retraces when the option changes); the CPU
        backends compute float32 at full precision whatever is asked, as XLA's CPU backend.
      preferred_element_type: the accumulation and output dtype.

    Returns:
      The convolution, in the ``out_spec`` layout.

    Example:
      >>> lax.conv_general_dilated(jnp.ones((1, 1, 5)), jnp.ones((1, 1, 3)), (1,), "VALID")
      Array([[[3., 3., 3.]]], dtype=float32)
    """
    if out_sharding is not None:  # the result's explicit sharding
        return out_sharded(lambda: conv_general_dilated(
            lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
            feature_group_count, batch_group_count, precision, preferred_element_type),
            out_sharding)
    lhs, rhs = asarray(lhs), asarray(rhs)
    la, ra = aval_of(lhs), aval_of(rhs)
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    nsp = la.ndim - 2
    window_strides = _ints(window_strides, nsp, "window_strides")
    lhs_dilation = _ints(lhs_dilation, nsp, "lhs_dilation")
    rhs_dilation = _ints(rhs_dilation, nsp, "rhs_dilation")
    if isinstance(padding, str):
        in_shape = [la.shape[a] for a in dn.lhs_spec[2:]]
        window = [_dilate(ra.shape[a], d) for a, d in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = padtype_to_pads(in_shape, window, window_strides, padding)
    padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    pet = None if preferred_element_type is None else dtypes.canonicalize_dtype(preferred_element_type)
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dn,
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count),
        precision=_canonical_precision(precision), preferred_element_type=pet)


def conv(lhs, rhs, window_strides: Sequence[int], padding, precision=None,
         preferred_element_type=None):
    """Convolution in the ``NC...`` / ``OI...`` layout without dilation.

    Example:
      >>> lax.conv(jnp.ones((1, 1, 4, 4)), jnp.ones((1, 1, 2, 2)), (2, 2), "VALID").shape
      (1, 1, 2, 2)
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides: Sequence[int], padding,
                              lhs_dilation: Sequence[int] | None,
                              rhs_dilation: Sequence[int] | None, precision=None,
                              preferred_element_type=None):
    """Convolution in the ``NC...`` / ``OI...`` layout with dilations and any padding.

    Example:
      >>> lax.conv_with_general_padding(jnp.ones((1, 1, 3)), jnp.ones((1, 1, 2)), (1,), [(1, 1)],
      ...                           (2,), None).shape
      (1, 1, 6)
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_transpose_pads(k: int, s: int, padding: str) -> tuple[int, int]:
    # The padding of the lhs-dilated input that makes a transposed convolution the gradient
    # of a forward one with that padding name: "VALID" grows the output by the kernel,
    # "SAME" gives exactly in * stride elements.
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    else:
        total = k + s - 2 + max(k - s, 0)
        lo = k - 1
    return lo, total - lo


_TRANSPOSE_LAYOUTS = {3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                      5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs, rhs, strides: Sequence[int], padding,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers=None,
                   transpose_kernel: bool = False, precision=None, preferred_element_type=None,
                   use_consistent_padding: bool = False):
    """Transposed ("deconvolution") convolution: a convolution of the input dilated by
    ``strides``.

    Args:
      lhs: the input (default layout ``N...C``, channels last).
      rhs: the kernel (default layout ``...IO``).
      strides: the dilation of the input (the strides of the forward convolution).
      padding: ``"SAME"``, ``"VALID"`` or explicit ``(low, high)`` pairs.
      rhs_dilation: kernel dilation; default ones.
      dimension_numbers: layouts, as for :func:`conv_general_dilated`.
      transpose_kernel: flip the kernel's spatial axes and swap its I and O axes, making this
        the gradient of ``conv_general_dilated`` with the same kernel.
      precision, preferred_element_type: as for :func:`conv_general_dilated`.
      use_consistent_padding: read ``(low, high)`` pairs as the forward convolution's
        padding too, as the names are (each side then gets ``dilated kernel - 1 - pad``:
        PyTorch's convention); by default pairs pad the dilated input directly (JAX's
        default, kept for compatibility).

    Returns:
      The transposed convolution.

    Example:
      >>> lax.conv_transpose(jnp.ones((1, 3, 1)), jnp.ones((2, 1, 1)), (2,), "SAME").shape
      (1, 6, 1)
    """
    lhs, rhs = asarray(lhs), asarray(rhs)
    la, ra = aval_of(lhs), aval_of(rhs)
    if dimension_numbers is None:
        if la.ndim not in _TRANSPOSE_LAYOUTS:
            raise ValueError(f"conv_transpose without dimension_numbers needs rank 3, 4 or 5 "
                             f"operands, got lhs shape {la.shape}.")
        dimension_numbers = _TRANSPOSE_LAYOUTS[la.ndim]
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    nsp = la.ndim - 2
    strides = _ints(strides, nsp, "strides")
    rhs_dilation = _ints(rhs_dilation, nsp, "rhs_dilation")
    if isinstance(padding, str):
        if padding not in ("SAME", "VALID"):
            raise ValueError(f"conv_transpose padding must be 'SAME', 'VALID' or (low, high) "
                             f"pairs, got {padding!r}.")
        ks = [_dilate(ra.shape[a], d) for a, d in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = [_conv_transpose_pads(k, s, padding) for k, s in zip(ks, strides)]
    elif use_consistent_padding:  # the forward convolution's padding, as a name would be
        ks = [_dilate(ra.shape[a], d) for a, d in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = [(k - 1 - int(lo), k - 1 - int(hi)) for k, (lo, hi) in zip(ks, padding)]
    if transpose_kernel:
        from plax.lax.shape import rev, transpose
        rhs = rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(ra.ndim))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        rhs = transpose(rhs, tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * nsp, padding, lhs_dilation=strides,
                                rhs_dilation=rhs_dilation, dimension_numbers=dn,
                                precision=precision, preferred_element_type=preferred_element_type)


# ------------------------------------------------------------------ axis reshuffles

def _merge_into(x, src: int, dst: int):
    """Folds axis ``src`` into axis ``dst`` as its major part (``dst`` indexes the result
    without ``src``)."""
    from plax.lax.shape import reshape
    from plax.transforms.batching import move_axis_to
    shape = aval_of(x).shape
    target = dst if dst < src else dst + 1  # dst's position in x
    x = move_axis_to(x, src, target - (src < target), shape[src])
    new = list(np.delete(shape, src))
    new[dst] = shape[src] * shape[target]
    return reshape(x, tuple(int(d) for d in new))


def _split_out(x, axis: int, major: int):
    """Splits axis ``axis`` into ``(major, size // major)``."""
    from plax.lax.shape import reshape
    shape = list(aval_of(x).shape)
    shape[axis:axis + 1] = [major, shape[axis] // major]
    return reshape(x, tuple(shape))


def _params_with(params: dict, **changes) -> dict:
    out = dict(params)
    out.update(changes)
    return out


# ------------------------------------------------------------------ transforms

register_rule("jvp", conv_general_dilated_p)(bilinear_jvp(conv_general_dilated_p))


def _cast(x, dtype):
    if aval_of(x).dtype == dtype:
        return x
    from plax.lax.convert import convert_element_type
    return convert_element_type(x, dtype)


def _transpose_lhs(ct, lhs_aval, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type):
    from plax.lax.shape import rev
    ls, rs, os_ = dimension_numbers
    rhs = _cast(rhs, aval_of(ct).dtype)
    groups = max(feature_group_count, batch_group_count)
    if groups > 1:
        # the new kernel maps the O features (groups of O/groups) to groups * I features
        rhs = _merge_into(_split_out(rhs, rs[0], groups), rs[0], rs[1])
    ra = aval_of(rhs)
    pads = []
    for k in range(len(ls) - 2):
        n = _dilate(lhs_aval.shape[ls[k + 2]], lhs_dilation[k])
        w = _dilate(ra.shape[rs[k + 2]], rhs_dilation[k])
        m = _dilate(aval_of(ct).shape[os_[k + 2]], window_strides[k])
        lo = w - 1 - padding[k][0]
        pads.append((lo, n + w - 1 - m - lo))
    dn = ConvDimensionNumbers(os_, (rs[1], rs[0]) + tuple(rs[2:]), ls)
    out = conv_general_dilated_p.bind(
        ct, rev(rhs, tuple(rs[2:])), window_strides=lhs_dilation, padding=tuple(pads),
        lhs_dilation=window_strides, rhs_dilation=rhs_dilation, dimension_numbers=dn,
        feature_group_count=groups, batch_group_count=1, precision=precision,
        preferred_element_type=None)
    if batch_group_count > 1:
        # features come out as (group, C): the group index belongs to the batch axis
        out = _merge_into(_split_out(out, ls[1], batch_group_count), ls[1], ls[0])
    return _cast(out, lhs_aval.dtype)


def _transpose_rhs(ct, lhs, rhs_aval, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type):
    ls, rs, os_ = dimension_numbers
    lhs = _cast(lhs, aval_of(ct).dtype)
    la, ca = aval_of(lhs), aval_of(ct)
    pads = []
    for k in range(len(ls) - 2):
        n = _dilate(la.shape[ls[k + 2]], lhs_dilation[k])
        w = _dilate(rhs_aval.shape[rs[k + 2]], rhs_dilation[k])
        m = _dilate(ca.shape[os_[k + 2]], window_strides[k])
        lo = padding[k][0]
        pads.append((lo, w - 1 + m - n - lo))
    swap = lambda s: (s[1], s[0]) + tuple(s[2:])  # noqa: E731
    dn = ConvDimensionNumbers(swap(ls), swap(os_), swap(rs))
    out = conv_general_dilated_p.bind(
        lhs, ct, window_strides=rhs_dilation, padding=tuple(pads), lhs_dilation=lhs_dilation,
        rhs_dilation=window_strides, dimension_numbers=dn,
        feature_group_count=batch_group_count, batch_group_count=feature_group_count,
        precision=precision, preferred_element_type=None)
    return _cast(out, rhs_aval.dtype)


@register_rule("transpose", conv_general_dilated_p)
def _conv_transpose_rule(ct, lhs, rhs, **params):
    from plax.transforms.transpose import is_undefined_primal
    if type(ct) is Zero:
        return [None, None]
    if is_undefined_primal(lhs) and is_undefined_primal(rhs):
        raise TypeError("conv_general_dilated is bilinear, not linear in both operands at once")
    if is_undefined_primal(lhs):
        return [_transpose_lhs(ct, lhs.aval, rhs, **params), None]
    return [None, _transpose_rhs(ct, lhs, rhs.aval, **params)]


@register_rule("batch", conv_general_dilated_p)
def _conv_batch(vals, dims, **params):
    from plax.transforms.batching import axis_size, move_axis_to
    (lhs, rhs), (dl, dr) = vals, dims
    ls, rs, os_ = params["dimension_numbers"]
    g, b = params["feature_group_count"], params["batch_group_count"]
    size = axis_size(vals, dims)
    bind = conv_general_dilated_p.bind
    if dr is None and b == 1:
        # the vmapped axis joins the batch axis
        out = bind(_merge_into(lhs, dl, ls[0]), rhs, **params)
        return _split_out(out, os_[0], size), os_[0]
    if dl is None and g == 1 and b == 1:
        # the vmapped axis joins the output features
        out = bind(lhs, _merge_into(rhs, dr, rs[0]), **params)
        return _split_out(out, os_[1], size), os_[1]
    # general case: both operands batched (materialised if not); each example becomes its
    # own group of features (or of batch)
    if dl is None:
        lhs, dl = move_axis_to(lhs, None, 0, size), 0
    if dr is None:
        rhs, dr = move_axis_to(rhs, None, 0, size), 0
    if b > 1:
        new_lhs = _merge_into(lhs, dl, ls[0])
        new_params = _params_with(params, batch_group_count=b * size)
    else:
        new_lhs = _merge_into(lhs, dl, ls[1])
        new_params = _params_with(params, feature_group_count=g * size)
    new_rhs = _merge_into(rhs, dr, rs[0])
    out = bind(new_lhs, new_rhs, **new_params)
    return _split_out(out, os_[1], size), os_[1]

"""plax.numpy: the NumPy API on plax arrays (``from plax import numpy as jnp``).

Everything here is written with ``plax.lax``; nothing calls NumPy on array
data, so every function works under jit, grad and vmap. Dtype promotion
follows JAX's rules (see plax.dtypes), not NumPy's.
"""
import numpy as _np

from plax.array import Array as ndarray
from plax.array import Array
from plax.dtypes import (finfo, iinfo, promote_types, result_type, float0)
from plax.numpy.scalar_types import (bool_, int8, int16, int32, int64, uint8, uint16, uint32,
                                     uint64, bfloat16, float16, float32, float64, complex64,
                                     complex128, int_, uint, float_, complex_, single, double,
                                     csingle, cdouble, half)
from plax.numpy.creation import (array, asarray, from_dlpack, full, zeros, ones, empty, zeros_like,
                                 ones_like, empty_like, full_like, arange, linspace, logspace,
                                 geomspace, eye, identity, tri, meshgrid, indices)
from plax.numpy.ufuncs import (add, subtract, multiply, true_divide, divide, floor_divide,
                               remainder, mod, fmod, divmod, power, float_power, negative, positive,
                               abs, absolute, sign, floor, ceil, trunc, fix, rint, round, around,
                               round_, exp, exp2, expm1, log, log1p, log2, log10, sqrt, cbrt,
                               square, reciprocal, sin, cos, tan, arcsin, arccos, arctan, arctan2,
                               sinh, cosh, tanh, arcsinh, arccosh, arctanh, asin, acos, atan,
                               atan2, asinh, acosh, atanh, logaddexp, logaddexp2, hypot, deg2rad,
                               rad2deg, radians, degrees, sinc, maximum, minimum, fmax, fmin,
                               nextafter, equal, not_equal, less, less_equal, greater,
                               greater_equal, logical_and, logical_or, logical_xor, logical_not,
                               bitwise_and, bitwise_or, bitwise_xor, bitwise_not, bitwise_invert,
                               invert, left_shift, right_shift, bitwise_left_shift,
                               bitwise_right_shift, isnan, isinf, isfinite, isposinf, isneginf,
                               signbit, copysign, heaviside, real, imag, conjugate, conj, angle,
                               isreal, iscomplex, where, clip, nan_to_num, isclose, allclose,
                               array_equal, array_equiv)
from plax.numpy.reductions import (sum, prod, max, min, amax, amin, mean, var, std, all, any,
                                   argmax, argmin, cumsum, cumprod, cumulative_sum,
                                   cumulative_prod, ptp, count_nonzero, average, nansum, nanprod,
                                   nanmax, nanmin, nanmean, nanvar, nanstd)
from plax.numpy.shape_ops import (reshape, ravel, transpose, permute_dims, matrix_transpose,
                                  moveaxis, swapaxes, squeeze, expand_dims, atleast_1d, atleast_2d,
                                  atleast_3d, concatenate, concat, stack, unstack, hstack, vstack,
                                  row_stack, dstack, column_stack, split, array_split, hsplit,
                                  vsplit, dsplit, broadcast_arrays, tile, repeat, flip, fliplr,
                                  flipud, roll, rot90, diagonal, diag, trace, tril, triu, take,
                                  take_along_axis, append, pad, ndim, shape, size)
from plax.numpy.util import broadcast_to, broadcast_shapes
from plax.numpy.products import (dot, matmul, vdot, vecdot, inner, outer, tensordot, kron, cross,
                                 einsum, convolve, correlate)
from plax.numpy.searching import (sort, argsort, nonzero, flatnonzero, argwhere, searchsorted,
                                  unique)
from plax.numpy.indexing import NonConcreteBooleanIndexError
from plax.numpy.ufunc_class import ufunc, frompyfunc
from plax.numpy.array_api_metadata import __array_api_version__, __array_namespace_info__
# Less common functions load on first use of one of their names (PEP 562), so that
# ``import plax`` does not pay for them: module -> the names plax.numpy takes from it.
_LAZY_FUNCTIONS = {
    "statistics": ("median", "nanmedian", "quantile", "nanquantile", "percentile", "nanpercentile",
        "nanargmax", "nanargmin", "nancumsum", "nancumprod", "cov", "corrcoef"),
    "histograms": ("bincount", "digitize", "histogram", "histogram2d", "histogramdd",
        "histogram_bin_edges"),
    "polynomial": ("poly", "polyadd", "polysub", "polymul", "polydiv", "polyder", "polyint",
        "polyval", "polyfit", "roots"),
    "calculus": ("diff", "ediff1d", "gradient", "trapezoid", "unwrap", "interp"),
    "math_extras": ("frexp", "ldexp", "gcd", "lcm", "modf", "spacing", "fabs", "pow",
        "bitwise_count", "i0", "sort_complex", "matvec", "vecmat"),
    "window_functions": ("bartlett", "blackman", "hamming", "hanning", "kaiser"),
    "sets": ("isin", "union1d", "intersect1d", "setdiff1d", "setxor1d", "unique_all",
        "unique_counts", "unique_inverse", "unique_values"),
    "index_tricks": ("r_", "c_", "s_", "index_exp", "mgrid", "ogrid", "ix_", "diag_indices",
        "diag_indices_from", "tril_indices", "tril_indices_from", "triu_indices",
        "triu_indices_from", "mask_indices", "ravel_multi_index", "unravel_index"),
    "manipulation": ("delete", "insert", "resize", "rollaxis", "block", "trim_zeros", "choose",
        "compress", "extract", "select", "piecewise", "place", "put", "put_along_axis",
        "fill_diagonal", "partition", "argpartition", "lexsort", "diagflat", "vander", "astype",
        "apply_along_axis", "apply_over_axes"),
    "bits": ("packbits", "unpackbits"),
    "vectorization": ("vectorize",),
    "host_io": ("frombuffer", "fromstring", "fromfunction", "fromiter", "fromfile", "load", "save",
        "savez"),
    "printing": ("array_repr", "array_str", "printoptions", "get_printoptions", "set_printoptions"),
}
_LAZY_WHERE = {name: module for module, names in _LAZY_FUNCTIONS.items() for name in names}

# ``bool`` is JAX's name for the boolean scalar type (it shadows the builtin in this module).
from plax.numpy.dtype_info import bool, object_, ComplexWarning, isdtype, iterable, einsum_path
from plax.numpy import scalar_types as _scalar_types  # the ml_dtypes low-precision types
globals().update({_n: getattr(_scalar_types, _n) for _n in _scalar_types._LOW_PRECISION
                  if hasattr(_scalar_types, _n)})

pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
euler_gamma = _np.euler_gamma
newaxis = None

generic, number, inexact, floating, complexfloating = (_np.generic, _np.number, _np.inexact,
                                                       _np.floating, _np.complexfloating)
integer, signedinteger, unsignedinteger = _np.integer, _np.signedinteger, _np.unsignedinteger
character, flexible = _np.character, _np.flexible


def dtype(obj, align=False, copy=False):
    """``numpy.dtype`` that also understands plax scalar types and Python types.

    Example:
      >>> jnp.dtype(jnp.bfloat16)
      dtype(bfloat16)
    """
    from plax import dtypes as _dtypes
    return _dtypes.to_numpy_dtype(obj)


def isscalar(element) -> bool:
    """Whether ``element`` is a scalar (a Python/NumPy scalar or a rank-0 array).

    Example:
      >>> jnp.isscalar(jnp.float32(1.0)), jnp.isscalar([1.0])
      (True, False)
    """
    if hasattr(element, "aval"):
        return element.aval.ndim == 0
    return _np.isscalar(element)


def can_cast(from_, to, casting: str = "safe") -> bool:
    """NumPy's ``can_cast`` on plax dtypes and arrays.

    Example:
      >>> jnp.can_cast(jnp.int8, jnp.int32)
      True
    """
    return _np.can_cast(dtype(from_) if not hasattr(from_, "aval") else from_.dtype, dtype(to),
                        casting)


def iscomplexobj(x) -> bool:
    """Whether ``x`` (an array, scalar or nested sequence) has a complex dtype.

    Example:
      >>> jnp.iscomplexobj(jnp.array([1 + 2j]))
      True
    """
    from plax import dtypes as _dtypes
    if isinstance(x, (list, tuple)):
        return _np.iscomplexobj(_np.asarray(x))
    return _dtypes.is_complex(_dtypes.dtype(x))


def issubdtype(arg1, arg2) -> bool:
    """Whether dtype ``arg1`` is ``arg2`` or below it in NumPy's type hierarchy (bfloat16 is a
    floating type, float0 is not); JAX's ``jnp.issubdtype`` names, while
    ``plax.dtypes.issubdtype`` keeps ``jax.dtypes``' ``(a, b)``.

    Example:
      >>> jnp.issubdtype(jnp.bfloat16, jnp.floating)
      True
    """
    from plax import dtypes as _dtypes
    return _dtypes.issubdtype(arg1, arg2)


def isrealobj(x) -> bool:
    """Whether ``x`` does not have a complex dtype (see :func:`iscomplexobj`)."""
    return not iscomplexobj(x)


def copy(a, order=None):
    """A copy of ``a`` (arrays are immutable, so the array itself).

    Raises:
      TypeError: for lists and tuples, as JAX (use jnp.array).
    """
    from plax.numpy.util import check_arraylike
    check_arraylike("copy", a)
    return asarray(a)


# Submodules loaded on first use (``jnp.fft``, ``jnp.linalg``): ``import plax`` does not load
# them or the lax families they bind.
_LAZY_SUBMODULES = ("fft", "linalg")


def __getattr__(name: str):
    import importlib
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"plax.numpy.{name}")
    module_name = _LAZY_WHERE.get(name)
    if module_name is None:
        raise AttributeError(f"module 'plax.numpy' has no attribute {name!r}")
    module = importlib.import_module(f"plax.numpy.{module_name}")
    namespace = globals()
    for n in _LAZY_FUNCTIONS[module_name]:
        namespace[n] = getattr(module, n)
    return namespace[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_SUBMODULES) | set(_LAZY_WHERE))


def _register():
    from plax.core.trace import Tracer
    from plax.numpy.array_methods import register_array_methods
    register_array_methods(Array, Tracer)


_register()

"""GPU kernels of the special functions (``plax.lax.special``, ``plax.lax.special_functions``
and ``random_gamma_grad``), with the reference kernels' values (``plax_numpy``: SciPy, with
XLA's conventions where SciPy's differ).

Most are ``cupyx.scipy.special`` ufuncs (CUDA ports of the Cephes code SciPy runs on the
host): ``erf``, ``erfc``, ``erf_inv``, ``lgamma``, ``digamma``, ``polygamma``, ``igamma``,
``igammac``, ``regularized_incomplete_beta``, ``zeta``, ``bessel_i0e``, ``bessel_i1e``. The
fusible ones (``erf``, ``erfc``, ``erf_inv``, ``lgamma``, ``digamma``, ``bessel_i0e``,
``bessel_i1e``) normally run as generated kernels, fused with their neighbours
(:mod:`plax_cupy.codegen`, :mod:`plax_cupy.special_source`); their kernels here serve a call
the generator declines.

``random_gamma_grad`` (and ``igamma_grad_a``, built on it) has no CuPy counterpart: each is
one CUDA kernel calling the device form the fused kernels call (:mod:`plax_cupy.special_source`:
JAX's series / continued fraction per element, in double). float16 is computed in float32 and
rounded (bfloat16 arrives widened to float32 by the backend and is rounded by it).

:func:`launch_raw` is this package's helper for the hand-written CUDA kernels of these
families (also the LU permutation of :mod:`plax_cupy.kernels_linalg`).
"""
from __future__ import annotations

import functools

import numpy as np

import cupy

from plax.lax import special_functions as S
from plax.lax.random_bits import random_gamma_grad_p
from plax.lax.special import digamma_p, erf_inv_p, erf_p, erfc_p, lgamma_p, polygamma_p
from plax_cupy import special_source
from plax_cupy.kernels import kernel

# ---------------------------------------------------------------- hand-written CUDA kernels

def launch_raw(source: str, name: str, n: int, *args) -> None:
    """Launches ``name`` of the CUDA C++ ``source`` over ``n`` work items (a grid-stride loop
    in the kernel covers them), compiling the source once per process.

    The source is compiled after :data:`plax_cupy.codegen.PREAMBLE` (so it also builds for the
    simulated GPU of ``tests/cupy``); ``args`` are contiguous device arrays and NumPy scalars,
    in the kernel's parameter order. Each call counts one launch in :func:`plax_cupy.counters`.

    Example:
      >>> launch_raw(src, "plax_lu_permutation", batch, pivots, perm, np.int64(batch), ...)
    """
    from plax_cupy import codegen, kernel_modules, runtime
    module = kernel_modules.module(codegen.PREAMBLE + source, (name,))
    grid, block = codegen.elementwise_launch(max(int(n), 1))
    module.get_function(name)((grid,), (block,), tuple(args))
    runtime.note_launch()  # (plax_cupy.counters: CuPy does not count RawModule launches)


# ---------------------------------------------------------------- dtype handling

def _compute_dtype(dtype) -> np.dtype:
    """float16 computes in float32 (CuPy's special ufuncs have no half-precision loops)."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype.itemsize < 4 else dtype


def _elementwise(fn):
    """``fn`` on operands cast to the compute dtype of the first, result cast back to it."""
    @functools.wraps(fn)
    def wrapped(x, *rest):
        dtype = np.dtype(x.dtype)
        compute = _compute_dtype(dtype)
        args = [v.astype(compute, copy=False) for v in (x, *rest)]
        return cupy.asarray(fn(*args)).astype(dtype, copy=False)
    return wrapped


def _special():
    import cupyx.scipy.special
    return cupyx.scipy.special


def _nan_like(x):
    return cupy.full((), np.nan, x.dtype)  # (filled on the device: no host copy)


def _poles(x):
    """The non-positive integers, where digamma and polygamma are NaN (XLA's convention)."""
    return (x <= 0) & (x == cupy.floor(x))


# ---------------------------------------------------------------- plax.lax.special

@kernel(erf_p)
@_elementwise
def erf(x):
    """The error function, elementwise (``cupyx.scipy.special.erf``).

    Example:
      >>> erf(cupy.asarray([0.0, 1.0], np.float32))  # [0, 0.8427]
    """
    return _special().erf(x)


@kernel(erfc_p)
@_elementwise
def erfc(x):
    """The complementary error function ``1 - erf(x)``, elementwise.

    Example:
      >>> erfc(cupy.asarray([0.0], np.float32))  # [1]
    """
    return _special().erfc(x)


@kernel(erf_inv_p)
@_elementwise
def erf_inv(x):
    """The inverse error function on ``[-1, 1]`` (±inf at ±1, NaN outside), elementwise.

    Example:
      >>> erf_inv(cupy.asarray([0.5], np.float32))  # [0.4769]
    """
    return _special().erfinv(x)


@kernel(lgamma_p)
@_elementwise
def lgamma(x):
    """``log|Gamma(x)|`` elementwise; +inf at the poles and at ±inf (as C's ``lgamma``).

    Example:
      >>> lgamma(cupy.asarray([3.0], np.float32))  # [log 2]
    """
    out = _special().gammaln(x)
    return cupy.where(cupy.isneginf(x), cupy.full((), np.inf, x.dtype), out)


@kernel(digamma_p)
@_elementwise
def digamma(x):
    """The digamma function ``Gamma'(x) / Gamma(x)``; NaN at the non-positive integers (XLA).

    Example:
      >>> digamma(cupy.asarray([1.0], np.float32))  # [-0.5772]
    """
    return cupy.where(_poles(x), _nan_like(x), _special().digamma(x))


@kernel(polygamma_p)
@_elementwise
def polygamma(m, x):
    """The ``m``-th derivative of digamma at ``x``; NaN unless ``m`` is a non-negative
    integer, and at the poles of digamma (XLA's convention).

    Example:
      >>> polygamma(cupy.asarray([1.0]), cupy.asarray([1.0]))  # [pi^2 / 6]
    """
    integral = (m >= 0) & (m == cupy.floor(m))
    safe_m = cupy.where(integral, m, cupy.zeros((), m.dtype))
    out = _special().polygamma(safe_m, x).astype(x.dtype, copy=False)
    return cupy.where(integral & ~_poles(x), out, _nan_like(x))


# ---------------------------------------------------------------- plax.lax.special_functions

@kernel(S.igamma_p)
@_elementwise
def igamma(a, x):
    """The regularised lower incomplete gamma function ``P(a, x)``; NaN for infinite ``a``.

    Example:
      >>> igamma(cupy.asarray([1.0]), cupy.asarray([1.0]))  # [1 - 1/e]
    """
    out = _special().gammainc(a, x).astype(a.dtype, copy=False)
    return cupy.where(cupy.isinf(a), _nan_like(a), out)


@kernel(S.igammac_p)
@_elementwise
def igammac(a, x):
    """The regularised upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``; NaN for
    infinite ``a``.

    Example:
      >>> igammac(cupy.asarray([1.0]), cupy.asarray([1.0]))  # [1/e]
    """
    out = _special().gammaincc(a, x).astype(a.dtype, copy=False)
    return cupy.where(cupy.isinf(a), _nan_like(a), out)


@kernel(S.regularized_incomplete_beta_p)
@_elementwise
def regularized_incomplete_beta(a, b, x):
    """The regularised incomplete beta function ``I_x(a, b)``, elementwise.

    Example:
      >>> regularized_incomplete_beta(*(cupy.asarray([v]) for v in (1.0, 1.0, 0.25)))  # [0.25]
    """
    return _special().betainc(a, b, x)


@kernel(S.zeta_p)
@_elementwise
def zeta(x, q):
    """Hurwitz's zeta function ``sum_k (k + q)^-x``; NaN where ``x`` or ``q`` is infinite.

    Example:
      >>> zeta(cupy.asarray([2.0]), cupy.asarray([1.0]))  # [pi^2 / 6]
    """
    out = _special().zeta(x, q).astype(x.dtype, copy=False)
    return cupy.where(cupy.isinf(x) | cupy.isinf(q), _nan_like(x), out)


@kernel(S.bessel_i0e_p)
@_elementwise
def bessel_i0e(x):
    """The exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I0(x)``.

    Example:
      >>> bessel_i0e(cupy.asarray([0.0]))  # [1]
    """
    return _special().i0e(x)


@kernel(S.bessel_i1e_p)
@_elementwise
def bessel_i1e(x):
    """The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I1(x)``.

    Example:
      >>> bessel_i1e(cupy.asarray([0.0]))  # [0]
    """
    return _special().i1e(x)


# ---------------------------------------------------------------- random_gamma_grad

# d(sample)/d(a) of a gamma sample: JAX's power series (x <= max(1, a)) iterated while a term
# matters, or continued fraction (at most 2000 terms); one thread per element, lgamma (CUDA's)
# and digamma (plax_cupy.special_source's) computed in the kernel, so a call is one launch.
# Elements whose a * log(x) - x - lgamma(a) underflows keep the formula's value before any
# iteration, as in JAX. igamma_grad_a's kernel multiplies by minus the gamma density in the
# same pass and applies its domain (NaN outside a > 0, x > 0; 0 at x == 0).
#: CUDA source: random_gamma_grad and igamma_grad_a elementwise, float32 and float64 entries
def _gamma_grad_body() -> str:
    entries = []
    for fn in ("plax_random_gamma_grad", "plax_igamma_grad_a"):
        for suffix, ctype in (("f32", "float"), ("f64", "double")):
            entries.append(
                f'extern "C" __global__ void {fn}_{suffix}(\n'
                f'    const {ctype}* a, const {ctype}* x, {ctype}* out, long long n) {{\n'
                "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
                "       i += (long long)blockDim.x * gridDim.x)\n"
                f"    out[i] = {fn}(a[i], x[i]);\n}}\n")
    return "".join(entries)


#: The two kernels (float32/float64 each) running the device forms of
#: :mod:`plax_cupy.special_source` that the fused kernels call, so a call served by this table
#: gives the fused kernels' bits.
RANDOM_GAMMA_GRAD_SOURCE = special_source.helpers_for(_gamma_grad_body()) + _gamma_grad_body()


def _gamma_grad_kernel(entry: str, a, x):
    """Launches ``<entry>_f32``/``_f64`` of :data:`RANDOM_GAMMA_GRAD_SOURCE` on ``a`` and ``x``
    (broadcast to one shape, the compute dtype: float32 or float64); one launch."""
    a, x = cupy.broadcast_arrays(a, x)
    dtype = a.dtype
    a_c, x_c = cupy.ascontiguousarray(a), cupy.ascontiguousarray(x)
    out = cupy.empty(a.shape, dtype)
    n = int(a.size)
    if n:
        name = f"{entry}_f32" if dtype == np.float32 else f"{entry}_f64"
        launch_raw(RANDOM_GAMMA_GRAD_SOURCE, name, n, a_c, x_c, out, np.int64(n))
    return out


@kernel(random_gamma_grad_p)
@_elementwise
def random_gamma_grad(a, x):
    """The derivative of a gamma sample ``x`` with respect to its shape ``a`` (what
    ``random.gamma``'s gradient uses), by JAX's series / continued fraction on the device.

    Args:
      a: shape parameters; x: the samples (same shape, or one a scalar).

    Returns:
      ``d x / d a`` elementwise; NaN where ``a <= 0``, ``x < 0`` or either is NaN; 0 at
      ``x == 0``.

    Example:
      >>> random_gamma_grad(cupy.asarray([1.0]), cupy.asarray([0.5]))
    """
    return _gamma_grad_kernel("plax_random_gamma_grad", a, x)


@kernel(S.igamma_grad_a_p)
@_elementwise
def igamma_grad_a(a, x):
    """``d P(a, x) / d a``: minus the sample derivative times the gamma density (the
    reference kernel's formula), in one kernel; NaN outside ``a > 0, x > 0`` (0 at
    ``x == 0``).

    Example:
      >>> igamma_grad_a(cupy.asarray([1.0]), cupy.asarray([1.0]))
    """
    return _gamma_grad_kernel("plax_igamma_grad_a", a, x)

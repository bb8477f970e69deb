"""GPU kernels of the special functions (``plax.lax.special``, ``plax.lax.special_functions``
and ``random_gamma_grad``), with the reference kernels' values (``plax_numpy``: SciPy, with
XLA's conventions where SciPy's differ).

Every one is a plax-compiled kernel (``-ftz=false``) running the device form the fused kernels
call (:mod:`plax_cupy.special_source`, CUDA's ``erf``/``erfc``/``erfinv``/``lgamma``): ``erf``,
``erfc``, ``erf_inv``, ``lgamma``, ``digamma``, ``polygamma``, ``igamma``, ``igammac``,
``regularized_incomplete_beta``, ``zeta``, ``bessel_i0e`` and ``bessel_i1e`` through
:func:`plax_cupy.kernels_elementwise.primitive_elementwise` (the generator's own expression of
the primitive, poles and domains included), ``random_gamma_grad`` and ``igamma_grad_a``
through the hand-written entries below. These primitives are fusible, so they normally run as
generated kernels, fused with their neighbours (:mod:`plax_cupy.codegen`); the table's kernels
serve a call the generator declines, and give the same bits. (They were
``cupyx.scipy.special`` ufuncs with CuPy's ``where``/``floor``/``isinf`` masks: CuPy compiles
those with ``-ftz=true``, which flushed float32 subnormal operands and results.) float16 is
computed in float32 and rounded (bfloat16 arrives widened to float32 by the backend and is
rounded by it).

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
    # (joined once per source object: a cached source costs no string work per launch)
    module = kernel_modules.module(kernel_modules.module_text(codegen.PREAMBLE, source), (name,))
    grid, block = codegen.elementwise_launch(max(int(n), 1))
    module.get_function(name)((grid,), (block,), tuple(args))
    runtime.note_launch()  # (plax_cupy.counters: CuPy does not count RawModule launches)


# ---------------------------------------------------------------- dtype handling

def _compute_dtype(dtype) -> np.dtype:
    """float16 computes in float32 (a widened half value is a normal float32, so nothing is
    lost; the kernels of :func:`plax_cupy.kernels_elementwise.elementwise` take 32/64 bits)."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype.itemsize < 4 else dtype


def _elementwise(fn):
    """``fn`` on operands cast to the compute dtype of the first, result cast back to it."""
    @functools.wraps(fn)
    def wrapped(x, *rest, **params):
        dtype = np.dtype(x.dtype)
        compute = _compute_dtype(dtype)
        args = [v.astype(compute, copy=False) for v in (x, *rest)]
        return cupy.asarray(fn(*args, **params)).astype(dtype, copy=False)
    return wrapped


def _generated(primitive, doc: str):
    """The table kernel of the fusible special function ``primitive``: the generator's
    expression of it in one plax-compiled kernel (float16 through float32)."""
    def run(*operands, **params):
        from plax_cupy.kernels_elementwise import primitive_elementwise
        return primitive_elementwise(primitive, *operands, **params)
    run.__name__ = run.__qualname__ = primitive.name
    run.__doc__ = (f"{doc}\n\n    Args:\n      *operands: device arrays (one float dtype, broadcast "
                   f"together).\n\n    Returns:\n      A new device array of ``{primitive.name}``'s "
                   f"values.\n\n    Example:\n      >>> {primitive.name}(*operands)  # doctest: +SKIP\n")
    return kernel(primitive)(_elementwise(run))


# ---------------------------------------------------------------- plax.lax.special

erf = _generated(erf_p, "The error function, elementwise.")
erfc = _generated(erfc_p, "The complementary error function ``1 - erf(x)``, elementwise.")
erf_inv = _generated(erf_inv_p, "The inverse error function on ``[-1, 1]`` (±inf at ±1, NaN "
                     "outside), elementwise.")
lgamma = _generated(lgamma_p, "``log|Gamma(x)|`` elementwise; +inf at the poles and at ±inf.")
digamma = _generated(digamma_p, "The digamma function ``Gamma'(x) / Gamma(x)``; NaN at the "
                     "non-positive integers (XLA).")
polygamma = _generated(polygamma_p, "The ``m``-th derivative of digamma at ``x``; NaN unless "
                       "``m`` is a non-negative integer, and at the poles of digamma (XLA).")

# ---------------------------------------------------------------- plax.lax.special_functions

igamma = _generated(S.igamma_p, "The regularised lower incomplete gamma function ``P(a, x)``.")
igammac = _generated(S.igammac_p, "The regularised upper incomplete gamma function "
                     "``Q(a, x) = 1 - P(a, x)``.")
regularized_incomplete_beta = _generated(
    S.regularized_incomplete_beta_p, "The regularised incomplete beta function ``I_x(a, b)``.")
zeta = _generated(S.zeta_p, "Hurwitz's zeta function ``sum_k (k + q)^-x``.")
bessel_i0e = _generated(S.bessel_i0e_p, "``exp(-|x|) I0(x)``, the exponentially scaled "
                        "modified Bessel function of order 0.")
bessel_i1e = _generated(S.bessel_i1e_p, "``exp(-|x|) I1(x)``, the exponentially scaled "
                        "modified Bessel function of order 1.")


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

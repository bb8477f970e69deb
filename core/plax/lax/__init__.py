"""plax.lax: the primitives, with JAX's names and signatures.

Each function here binds one primitive (or composes a few). Unlike
``plax.numpy`` these do not promote dtypes: operands must already agree.

The control-flow, callback, convolution, window, precision and linear-algebra families
load on first use of one of their names (``lax.cond``, ``lax.linalg.cholesky``,
``from plax.lax import scan``); ``import plax`` does not load them.
"""
import importlib as _importlib
import importlib.machinery as _machinery

from plax.lax.binary import (add, sub, mul, div, rem, pow, max, min, atan2, nextafter, complex,
                             eq, ne, lt, le, gt, ge, bitwise_and, bitwise_or, bitwise_xor,
                             shift_left, shift_right_logical, shift_right_arithmetic,
                             add_p, sub_p, mul_p, div_p, rem_p, pow_p, max_p, min_p, atan2_p,
                             nextafter_p, add_any_p, complex_p, eq_p, ne_p, lt_p, le_p, gt_p, ge_p,
                             and_p, or_p, xor_p, shift_left_p, shift_right_logical_p,
                             shift_right_arithmetic_p)
from plax.lax.unary import (neg, sign, floor, ceil, round, is_finite, exp, exp2, log, log1p, expm1,
                            tanh, logistic, sin, cos, tan, asin, acos, atan, sinh, cosh, asinh,
                            acosh, atanh, sqrt, rsqrt, cbrt, abs, bitwise_not, population_count,
                            real, imag, conj, integer_pow, RoundingMethod,
                            neg_p, sign_p, floor_p, ceil_p, round_p, is_finite_p, exp_p, exp2_p,
                            log_p, log1p_p, expm1_p, tanh_p, logistic_p, sin_p, cos_p, tan_p,
                            asin_p, acos_p, atan_p, sinh_p, cosh_p, asinh_p, acosh_p, atanh_p,
                            sqrt_p, rsqrt_p, cbrt_p, abs_p, not_p, population_count_p, real_p,
                            imag_p, conj_p, integer_pow_p)
from plax.lax.special import (erf, erfc, erf_inv, lgamma, digamma, polygamma, erf_p, erfc_p,
                              erf_inv_p, lgamma_p, digamma_p, polygamma_p)
from plax.lax.special_functions import (igamma, igammac, igamma_grad_a, betainc, zeta, bessel_i0e,
                                        bessel_i1e, igamma_p, igammac_p, igamma_grad_a_p,
                                        regularized_incomplete_beta_p, zeta_p, bessel_i0e_p,
                                        bessel_i1e_p)
from plax.lax.select import select_n, select, clamp, select_n_p, clamp_p
from plax.lax.convert import (convert_element_type, bitcast_convert_type, stop_gradient,
                              convert_element_type_p, bitcast_convert_type_p, stop_gradient_p)
from plax.lax.shape import (broadcast_in_dim, broadcast, full, full_like, reshape, transpose, squeeze,
                            expand_dims, rev, pad, concatenate, stack, unstack, split, iota,
                            broadcasted_iota, collapse, broadcast_in_dim_p, reshape_p,
                            transpose_p, squeeze_p, expand_dims_p, rev_p, pad_p, concatenate_p,
                            stack_p, unstack_p, split_p, iota_p)
from plax.lax.slicing import (slice, slice_in_dim, index_in_dim, dynamic_slice, dynamic_index_in_dim,
                              dynamic_slice_in_dim, dynamic_update_slice,
                              dynamic_update_slice_in_dim, dynamic_update_index_in_dim, gather,
                              scatter, scatter_add, scatter_mul, scatter_min, scatter_max,
                              GatherDimensionNumbers,
                              ScatterDimensionNumbers, GatherScatterMode, slice_p, dynamic_slice_p,
                              dynamic_update_slice_p, gather_p, scatter_p, scatter_add_p,
                              scatter_mul_p, scatter_min_p, scatter_max_p)
from plax.lax.reduction import (reduce_sum, reduce_prod, reduce_max, reduce_min, reduce_and,
                                reduce_or, reduce_xor, argmax, argmin, reduce_sum_p, reduce_prod_p,
                                reduce_max_p, reduce_min_p, reduce_and_p, reduce_or_p,
                                reduce_xor_p, argmax_p, argmin_p)
from plax.lax.cumulative import (cumsum, cumprod, cummax, cummin, associative_scan, cumsum_p,
                                 cumprod_p, cummax_p, cummin_p)
from plax.lax.sort import sort, sort_key_val, sort_p
from plax.lax.dot import dot_general, dot, dot_general_p
from plax.lax.random_bits import (threefry2x32, threefry2x32_p, random_gamma_grad,
                                  random_gamma_grad_p)

from plax.lax.fft import fft, FftType, fft_p
from plax.lax.top_k import top_k, top_k_p
from plax.lax.cumlogsumexp import cumlogsumexp, cumlogsumexp_p
from plax.lax.extra_elementwise import square, clz, mulhi, square_p, clz_p, mulhi_p
from plax.lax.sharding_constraint import with_sharding_constraint

# The heavier primitive families load on first use of one of their names (PEP 562), so that
# ``import plax`` does not pay for them: family module -> the names plax.lax takes from it.
# A family's module is an attribute too (``lax.linalg``, ``lax.control_flow``). The three small
# families above stay eager because each exports a function named like its module (``lax.fft``
# is the function, as in JAX); importing such a module late would rebind the name to it.
_FAMILIES = {
    "control_flow": ("cond", "switch", "cond_p", "while_loop", "fori_loop", "while_p", "scan",
                     "map", "scan_p"),
    "callbacks": ("debug_callback_p", "pure_callback_p", "io_callback_p"),
    "convolution": ("conv_general_dilated", "conv", "conv_with_general_padding",
                    "conv_transpose", "conv_dimension_numbers", "padtype_to_pads",
                    "ConvDimensionNumbers", "conv_general_dilated_p"),
    "windows": ("reduce_window", "reduce_window_sum_p", "reduce_window_max_p",
                "reduce_window_min_p"),
    "precision": ("reduce_precision", "reduce_precision_p"),
    "ragged": ("ragged_dot", "ragged_dot_general", "RaggedDotDimensionNumbers"),
    "bit_generator": ("rng_bit_generator", "rng_bit_generator_p"),
    "block_scaled": ("scaled_dot",),
    # plax's own fused multiply-add (not in JAX's lax: its samplers' rounding, see the module)
    "fused_multiply_add": ("fma_p",),
    "linalg": ("cholesky_p", "triangular_solve_p", "lu_p", "qr_p", "eigh_p", "svd_p", "eig_p"),
    # composites, shape helpers and JAX's enums/types (no primitives of their own)
    "extras": ("AccuracyMode", "ConvGeneralDilatedDimensionNumbers", "DotAlgorithm",
               "DotAlgorithmPreset", "DotDimensionNumbers", "Precision", "PrecisionLike",
               "RandomAlgorithm", "Tolerance", "approx_max_k",
               "approx_min_k", "batch_matmul", "broadcast_like", "broadcast_shapes",
               "broadcast_to_rank", "composite", "conv_general_dilated_local",
               "conv_general_dilated_patches", "conv_general_permutations",
               "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose_shape_tuple",
               "dce_sink", "dtype", "empty", "index_take", "optimization_barrier",
               "platform_dependent", "reciprocal", "reduce",
               "reduce_window_shape_tuple", "scatter_apply", "scatter_sub", "shape_as_value",
               "stage", "tile", "custom_linear_solve",
               "custom_root"),
}
_WHERE = {name: family for family, names in _FAMILIES.items() for name in (family, *names)}


def __getattr__(name: str):
    family = _WHERE.get(name)
    if family is None:
        if name.startswith("__"):  # dunder probes (copy, pickle, doctest) never load plugins
            raise AttributeError(f"module 'plax.lax' has no attribute {name!r}")
        # ``from plax.lax import special_series`` asks here before importing the submodule;
        # a backend doing so while plugins load must not reach the plugin registry
        # (PathFinder looks in this package's folder only, never at plugin exports)
        if _machinery.PathFinder.find_spec(f"plax.lax.{name}", __path__) is not None:
            return _importlib.import_module(f"plax.lax.{name}")
        # names contributed by transform plugins (``{"lax.psum": psum}`` from plax-pmap)
        from plax import plugins
        return plugins.lookup(f"lax.{name}")
    module = _importlib.import_module(f"plax.lax.{family}")
    namespace = globals()
    namespace[family] = module
    for n in _FAMILIES[family]:
        namespace[n] = getattr(module, n)
    return namespace[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


bitwise_and_p = and_p
bitwise_or_p = or_p


def zeros_like_array(x):
    """Zeros with the shape and dtype of ``x``."""
    return full_like(x, 0)

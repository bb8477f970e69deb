"""Bad operands: each primitive's abstract eval rejects them with a specific TypeError or
ValueError whose message names the offending shapes, dtypes or parameters.

(Dtypes a primitive does not accept at all are covered for every primitive by
``test_coverage.test_rejects_unaccepted_dtype``.)
"""
from __future__ import annotations

import numpy as np
import pytest

from plax import lax
from plax.core.shaped_array import ShapedArray
from plax.lax import GatherDimensionNumbers as GDN
from plax.lax import GatherScatterMode as Mode
from plax.lax import ScatterDimensionNumbers as SDN

from .harness import dt, jax_answers


def A(shape, dtype="float32") -> ShapedArray:
    return ShapedArray(tuple(shape), dt(dtype))


F32, I32 = "float32", "int32"
GATHER_OK = dict(dimension_numbers=GDN((1,), (0,), (0,)), slice_sizes=(1, 3),
                 indices_are_sorted=False, unique_indices=False, mode=Mode.CLIP, fill_value=None)
SCATTER_OK = dict(dimension_numbers=SDN((1,), (0,), (0,)), indices_are_sorted=False,
                  unique_indices=False, mode=Mode.CLIP)
DOT = dict(precision=None, preferred_element_type=None)
MATMUL = (((1,), (0,)), ((), ()))


def gather_with(**changes):
    return dict(GATHER_OK, **changes)


# (primitive, operand avals, params, exception, fragments the message must contain)
BAD = [
    # elementwise
    (lax.add_p, [A((2, 3)), A((3,))], {}, TypeError, ["(2, 3)", "(3,)"]),
    (lax.add_p, [A((3,)), A((3,), I32)], {}, TypeError, ["float32", "int32"]),
    (lax.mul_p, [A((2,)), A((2, 1))], {}, TypeError, ["(2,)", "(2, 1)"]),
    # equal ranks: sizes must be equal or 1 (size-1 axes broadcast)
    (lax.add_p, [A((3, 2)), A((4, 2))], {}, TypeError, ["(3, 2)", "(4, 2)", "incompatible"]),
    (lax.atan2_p, [A((3, 1)), A((1,))], {}, TypeError, ["(3, 1)", "(1,)", "dimensions"]),
    (lax.eq_p, [A((2,)), A((3,))], {}, TypeError, ["(2,)", "(3,)"]),
    (lax.lt_p, [A((2,), I32), A((2,), "uint32")], {}, TypeError, ["int32", "uint32"]),
    (lax.and_p, [A((2,), "int8"), A((2,), "int16")], {}, TypeError, ["int8", "int16"]),
    (lax.shift_left_p, [A((4,), I32), A((2,), I32)], {}, TypeError, ["(4,)", "(2,)"]),
    (lax.atan2_p, [A((2,)), A((2,), "float64")], {}, TypeError, ["float32", "float64"]),
    (lax.complex_p, [A((2,)), A((2,), "float64")], {}, TypeError, ["float32", "float64"]),
    (lax.complex_p, [A((2,)), A((3,))], {}, TypeError, ["(2,)", "(3,)"]),
    (lax.polygamma_p, [A((2,)), A((3,))], {}, TypeError, ["(2,)", "(3,)"]),
    (lax.pow_p, [A((2,)), A((2,), "float16")], {}, TypeError, ["float32", "float16"]),
    (lax.integer_pow_p, [A((2,), I32)], {"y": -2}, TypeError, ["-2", "int32"]),
    # the fused multiply-add: three operands of one float dtype, broadcasting as add does
    (lax.fma_p, [A((2,)), A((2,)), A((2,), "float64")], {}, TypeError, ["float32", "float64"]),
    (lax.fma_p, [A((2, 3)), A((3,)), A((2, 3))], {}, TypeError, ["(2, 3)", "(3,)"]),
    (lax.select_n_p, [A((3,), F32), A((3,)), A((3,))], {}, TypeError, ["float32"]),
    (lax.select_n_p, [A((2,), "bool"), A((3,)), A((3,))], {}, TypeError, ["(2,)", "(3,)"]),
    (lax.select_n_p, [A((3,), "bool"), A((3,)), A((3,)), A((3,))], {}, TypeError, ["3"]),
    (lax.select_n_p, [A((), "bool"), A((3,)), A((2,))], {}, TypeError, ["(3,)", "(2,)"]),
    (lax.select_n_p, [A((), "bool"), A((3,)), A((3,), I32)], {}, TypeError, ["float32", "int32"]),
    (lax.select_n_p, [A((), "bool")], {}, TypeError, ["at least one case"]),
    (lax.clamp_p, [A((2,)), A((3,)), A(())], {}, TypeError, ["(2,)", "(3,)"]),
    (lax.clamp_p, [A(()), A((3,)), A((), I32)], {}, TypeError, ["float32", "int32"]),
    (lax.convert_element_type_p, [A((2,))], dict(new_dtype=np.dtype("U3"), weak_type=False),
     TypeError, ["<U3"]),
    (lax.bitcast_convert_type_p, [A((3,), I32)], dict(new_dtype=dt("int64")), TypeError,
     ["int32", "int64", "(3,)"]),
    (lax.bitcast_convert_type_p, [A((3,), "bool")], dict(new_dtype=dt("uint8")), TypeError,
     ["bool", "uint8"]),
    (lax.bitcast_convert_type_p, [A((3,), "complex64")], dict(new_dtype=dt("float64")), TypeError,
     ["complex64", "float64"]),
    # shape
    (lax.broadcast_in_dim_p, [A((3,))], dict(shape=(2, 3), broadcast_dimensions=()), TypeError,
     ["()", "1"]),
    (lax.broadcast_in_dim_p, [A((3,))], dict(shape=(2, 3), broadcast_dimensions=(2,)), TypeError,
     ["(2,)", "(2, 3)"]),
    (lax.broadcast_in_dim_p, [A((2, 3))], dict(shape=(2, 3), broadcast_dimensions=(1, 0)),
     TypeError, ["(1, 0)"]),
    (lax.broadcast_in_dim_p, [A((3,))], dict(shape=(2, 4), broadcast_dimensions=(1,)), TypeError,
     ["(3,)", "(2, 4)"]),
    (lax.reshape_p, [A((2, 3))], dict(new_sizes=(4, 2)), TypeError, ["(4, 2)", "(2, 3)"]),
    (lax.reshape_p, [A((2, 3))], dict(new_sizes=(3, 2), dimensions=(0, 0)), TypeError,
     ["permutation", "(0, 0)", "(2, 3)"]),
    (lax.split_p, [A((2, 3))], dict(sizes=(1, 1), axis=1), ValueError, ["Sum of sizes 2", "[2, 3]"]),
    (lax.split_p, [A((2, 3))], dict(sizes=(-1, 4), axis=1), ValueError, ["nonnegative", "-1"]),
    (lax.split_p, [A((2, 3))], dict(sizes=(2,), axis=2), ValueError, ["axis 2", "dimension 2"]),
    (lax.transpose_p, [A((2, 3))], dict(permutation=(0, 0)), TypeError, ["(0, 0)", "(2, 3)"]),
    (lax.transpose_p, [A((2, 3))], dict(permutation=(0,)), TypeError, ["(0,)", "(2, 3)"]),
    (lax.squeeze_p, [A((2, 1))], dict(dimensions=(0,)), ValueError, ["(2, 1)", "(0,)"]),
    (lax.squeeze_p, [A((2, 1))], dict(dimensions=(2,)), ValueError, ["(2, 1)", "(2,)"]),
    (lax.expand_dims_p, [A((2,))], dict(dimensions=(3,)), ValueError, ["3", "2"]),
    (lax.rev_p, [A((2, 3))], dict(dimensions=(0, 0)), TypeError, ["(0, 0)", "(2, 3)"]),
    (lax.rev_p, [A((2, 3))], dict(dimensions=(2,)), TypeError, ["(2,)", "(2, 3)"]),
    (lax.pad_p, [A((3,)), A(())], dict(padding_config=((0, 0, 0), (0, 0, 0))), ValueError,
     ["(3,)"]),
    (lax.pad_p, [A((3,)), A(())], dict(padding_config=((0, 0, -1),)), ValueError, ["-1"]),
    (lax.pad_p, [A((3,)), A(())], dict(padding_config=((-2, -2, 0),)), ValueError, ["-1", "(3,)"]),
    (lax.pad_p, [A((3,)), A((1,))], dict(padding_config=((1, 1, 0),)), ValueError, ["(1,)"]),
    (lax.pad_p, [A((3,)), A((), I32)], dict(padding_config=((1, 1, 0),)), TypeError,
     ["float32", "int32"]),
    (lax.concatenate_p, [], dict(dimension=0), TypeError, ["non-empty"]),
    (lax.concatenate_p, [A((2, 3)), A((2, 4))], dict(dimension=0), TypeError, ["(2, 3)", "(2, 4)"]),
    (lax.concatenate_p, [A((2, 3)), A((2, 3))], dict(dimension=2), TypeError, ["2", "(2, 3)"]),
    (lax.concatenate_p, [A((2,)), A((2,), I32)], dict(dimension=0), TypeError, ["float32", "int32"]),
    (lax.concatenate_p, [A(()), A(())], dict(dimension=0), TypeError, ["()"]),
    (lax.iota_p, [], dict(dtype=dt(I32), shape=(2, 3), dimension=2), ValueError, ["2", "(2, 3)"]),
    # slicing
    (lax.slice_p, [A((5,))], dict(start_indices=(0, 0), limit_indices=(1, 1), strides=None),
     TypeError, ["(0, 0)", "1"]),
    (lax.slice_p, [A((5,))], dict(start_indices=(2,), limit_indices=(6,), strides=None),
     TypeError, ["(6,)", "(5,)"]),
    (lax.slice_p, [A((5,))], dict(start_indices=(3,), limit_indices=(2,), strides=None),
     TypeError, ["(3,)", "(2,)"]),
    (lax.slice_p, [A((5,))], dict(start_indices=(0,), limit_indices=(5,), strides=(0,)),
     TypeError, ["(0,)"]),
    (lax.dynamic_slice_p, [A((5, 2)), A((), I32)], dict(slice_sizes=(1, 1)), TypeError,
     ["1", "(5, 2)"]),
    (lax.dynamic_slice_p, [A((5,)), A(())], dict(slice_sizes=(1,)), TypeError, ["float32"]),
    (lax.dynamic_slice_p, [A((5,)), A((1,), I32)], dict(slice_sizes=(1,)), TypeError, ["(1,)"]),
    (lax.dynamic_slice_p, [A((5,)), A((), I32)], dict(slice_sizes=(6,)), TypeError, ["(6,)", "(5,)"]),
    (lax.dynamic_slice_p, [A((5, 2)), A((), I32), A((), "int8")], dict(slice_sizes=(1, 1)),
     TypeError, ["int32", "int8"]),
    (lax.dynamic_update_slice_p, [A((5, 2)), A((1, 1)), A((), "int16"), A((), I32)], {},
     TypeError, ["int16", "int32"]),
    (lax.dynamic_update_slice_p, [A((5,)), A((6,)), A((), I32)], {}, TypeError, ["(6,)", "(5,)"]),
    (lax.dynamic_update_slice_p, [A((5,)), A((2, 1)), A((), I32)], {}, TypeError,
     ["(2, 1)", "(5,)"]),
    (lax.dynamic_update_slice_p, [A((5,)), A((2,), I32), A((), I32)], {}, TypeError,
     ["float32", "int32"]),
    (lax.gather_p, [A((5, 3)), A((4, 1), F32)], GATHER_OK, ValueError, ["float32"]),
    (lax.gather_p, [A((5, 3)), A((4, 2), I32)], GATHER_OK, TypeError, ["2", "(0,)"]),
    (lax.gather_p, [A((5, 3)), A((4, 1), I32)], gather_with(slice_sizes=(1, 4)), TypeError,
     ["(1, 4)", "(5, 3)"]),
    (lax.gather_p, [A((5, 3)), A((4, 1), I32)], gather_with(slice_sizes=(2, 3)), TypeError,
     ["(2, 3)"]),
    (lax.gather_p, [A((5, 3)), A((4, 1), I32)],
     gather_with(dimension_numbers=GDN((1,), (), (0,))), TypeError, ["(1,)", "()"]),
    (lax.gather_p, [A((5, 3)), A((4, 1), I32)],
     gather_with(dimension_numbers=GDN((1,), (0,), (2,))), TypeError, ["start_index_map", "(2,)"]),
    (lax.gather_p, [A((3, 4)), A((2, 1), I32)],
     gather_with(dimension_numbers=GDN((), (1,), (1,), (0,), (0,)), slice_sizes=(1, 1)), TypeError,
     ["3", "2"]),
    (lax.scatter_add_p, [A((5, 3)), A((4, 1), I32), A((4, 4))], SCATTER_OK, TypeError,
     ["(4, 4)", "(5, 3)"]),
    (lax.scatter_add_p, [A((5, 3)), A((4, 1), I32), A((3, 3))], SCATTER_OK, TypeError,
     ["(4,)", "(3,)"]),
    (lax.scatter_p, [A((5, 3)), A((4, 1), I32), A((4, 3), I32)], SCATTER_OK, TypeError,
     ["float32", "int32"]),
    (lax.scatter_mul_p, [A((5, 3)), A((4, 1), F32), A((4, 3))], SCATTER_OK, ValueError, ["float32"]),
    (lax.scatter_add_p, [A((5, 3)), A((4, 1), I32), A((4, 3))],
     dict(SCATTER_OK, dimension_numbers=SDN((1,), (0,), (2,))), TypeError,
     ["scatter_dims_to_operand_dims", "(2,)"]),
    (lax.scatter_min_p, [A((5, 3)), A((4, 2), I32), A((4, 3))], SCATTER_OK, TypeError, ["(4, 2)"]),
    (lax.scatter_max_p, [A((5, 3)), A((4, 1), I32), A((4,))], SCATTER_OK, TypeError, ["(4,)"]),
    # reductions, cumulative, sort
    (lax.reduce_sum_p, [A((2, 3))], dict(axes=(2,)), ValueError, ["(2,)", "(2, 3)"]),
    (lax.reduce_max_p, [A((2, 3))], dict(axes=(0, 0)), ValueError, ["(0, 0)", "(2, 3)"]),
    (lax.reduce_and_p, [A((2, 3), "bool")], dict(axes=(-1,)), ValueError, ["(-1,)", "(2, 3)"]),
    (lax.argmax_p, [A((2, 3))], dict(axes=(0, 1), index_dtype=dt(I32)), ValueError, ["(0, 1)"]),
    (lax.argmin_p, [A((2, 0))], dict(axes=(1,), index_dtype=dt(I32)), ValueError, ["(2, 0)"]),
    (lax.argmax_p, [A((2, 3))], dict(axes=(0,), index_dtype=dt(F32)), TypeError, ["float32"]),
    (lax.cumsum_p, [A((2, 3))], dict(axis=2, reverse=False), ValueError, ["2", "(2, 3)"]),
    (lax.cummax_p, [A(())], dict(axis=0, reverse=False), ValueError, ["()"]),
    (lax.sort_p, [A((3,)), A((4,))], dict(dimension=0, is_stable=True, num_keys=1), TypeError,
     ["(3,)", "(4,)"]),
    (lax.sort_p, [A((3,))], dict(dimension=0, is_stable=True, num_keys=2), ValueError, ["2"]),
    (lax.sort_p, [A((3,))], dict(dimension=1, is_stable=True, num_keys=1), ValueError,
     ["1", "(3,)"]),
    (lax.sort_p, [A(())], dict(dimension=0, is_stable=True, num_keys=1), ValueError, ["()"]),
    # dot_general
    (lax.dot_general_p, [A((2, 3)), A((4, 5))], dict(DOT, dimension_numbers=MATMUL), TypeError,
     ["(3,)", "(4,)"]),
    (lax.dot_general_p, [A((2, 3), I32), A((3, 5), I32)],
     dict(DOT, dimension_numbers=MATMUL, preferred_element_type=dt("int8")), TypeError,
     ["int8", "int32", "narrower"]),
    (lax.dot_general_p, [A((2, 3, 4)), A((3, 4, 5))],
     dict(DOT, dimension_numbers=(((2,), (1,)), ((0,), (0,)))), TypeError, ["(2,)", "(3,)"]),
    (lax.dot_general_p, [A((2, 3)), A((3, 4))], dict(DOT, dimension_numbers=(((2,), (0,)), ((), ()))),
     TypeError, ["(2,)", "(2, 3)"]),
    (lax.dot_general_p, [A((2, 3)), A((3, 4))], dict(DOT, dimension_numbers=(((1,), (0,)), ((1,), (0,)))),
     TypeError, ["disjoint"]),
    (lax.dot_general_p, [A((2, 3)), A((3, 4))], dict(DOT, dimension_numbers=(((1,), ()), ((), ()))),
     TypeError, ["equal numbers"]),
    (lax.dot_general_p, [A((2, 3), I32), A((3, 4), I32)],
     dict(DOT, dimension_numbers=MATMUL, preferred_element_type=dt("int8")), TypeError,
     ["int8", "int32"]),
    # callbacks
    (lax.pure_callback_p, [A((3,))], dict(callback=print, result_avals=(A((3,)),),
                                          vmap_method="bogus"), ValueError,
     ["vmap_method", "bogus"]),
    # random
    (lax.threefry2x32_p, [A((2,), "uint32"), A((2,), "uint32"), A((2,), "int32"), A((2,), "uint32")],
     {}, TypeError, ["uint32", "int32"]),
    (lax.threefry2x32_p, [A((), "uint32"), A((), "uint32"), A((2,), "uint32"), A((3,), "uint32")],
     {}, TypeError, ["(2,)", "(3,)"]),
    (lax.random_gamma_grad_p, [A((2,)), A((2,), "float16")], {}, TypeError, ["float32", "float16"]),
    (lax.igamma_p, [A((2,)), A((2,), "float16")], {}, TypeError, ["float32", "float16"]),
    (lax.regularized_incomplete_beta_p, [A((2,)), A((3,)), A((2,))], {}, TypeError,
     ["(2,)", "(3,)"]),
    (lax.bessel_i0e_p, [A((2,), "int32")], {}, TypeError, ["int32"]),
    # control flow
    (lax.cond_p, [A(()), A((3,))], dict(branches=()), TypeError, ["int32", "f32[]"]),
    # fft
    (lax.fft_p, [A((3,), "complex64")], dict(fft_type=lax.FftType.FFT, fft_lengths=(4,)),
     ValueError, ["(3,)", "(4,)"]),
    (lax.fft_p, [A((4,))], dict(fft_type=lax.FftType.RFFT, fft_lengths=(2, 4)), ValueError,
     ["(4,)", "(2, 4)"]),
    (lax.fft_p, [A((4,), "complex64")], dict(fft_type=lax.FftType.IRFFT, fft_lengths=(4,)),
     ValueError, ["(4,)", "(3,)"]),
    (lax.fft_p, [A((4,), "float16")], dict(fft_type=lax.FftType.RFFT, fft_lengths=(4,)),
     TypeError, ["float16"]),
    # linalg
    (lax.cholesky_p, [A((2, 3))], {}, ValueError, ["(2, 3)"]),
    (lax.cholesky_p, [A((3,))], {}, TypeError, ["(3,)"]),
    (lax.triangular_solve_p, [A((3, 3)), A((2, 3))],
     dict(left_side=True, lower=True, transpose_a=False, conjugate_a=False, unit_diagonal=False),
     ValueError, ["(3, 3)", "(2, 3)"]),
    (lax.triangular_solve_p, [A((2, 3, 3)), A((4, 3, 3))],
     dict(left_side=True, lower=True, transpose_a=False, conjugate_a=False, unit_diagonal=False),
     ValueError, ["(2, 3, 3)", "(4, 3, 3)"]),
    (lax.eigh_p, [A((3, 4))], dict(lower=True), ValueError, ["(3, 4)"]),
    (lax.lu_p, [A((3,), "float16")], {}, TypeError, ["float16"]),
    # convolution
    (lax.conv_general_dilated_p, [A((2, 4, 5)), A((6, 2, 3))],
     dict(window_strides=(1,), padding=((0, 0),), lhs_dilation=(1,), rhs_dilation=(1,),
          dimension_numbers=lax.ConvDimensionNumbers((0, 1, 2), (0, 1, 2), (0, 1, 2)),
          feature_group_count=1, batch_group_count=1, precision=None,
          preferred_element_type=None), ValueError, ["(2, 4, 5)", "(6, 2, 3)"]),
    (lax.conv_general_dilated_p, [A((2, 4, 5)), A((6, 4, 3, 1))],
     dict(window_strides=(1,), padding=((0, 0),), lhs_dilation=(1,), rhs_dilation=(1,),
          dimension_numbers=lax.ConvDimensionNumbers((0, 1, 2), (0, 1, 2), (0, 1, 2)),
          feature_group_count=1, batch_group_count=1, precision=None,
          preferred_element_type=None), TypeError, ["3", "4"]),
    # windows
    (lax.reduce_window_sum_p, [A((2, 4, 5))],
     dict(window_dimensions=(1, 2), window_strides=(1, 1, 1), padding=((0, 0),) * 3,
          base_dilation=(1, 1, 1), window_dilation=(1, 1, 1)), TypeError,
     ["(2, 4, 5)", "(1, 2)"]),
    # top_k
    (lax.top_k_p, [A((3,))], dict(k=4, axis=0), ValueError, ["k=4", "[3]"]),
    # precision
    (lax.reduce_precision_p, [A((3,))], dict(exponent_bits=0, mantissa_bits=3), ValueError,
     ["exponent_bits", "0"]),
    (lax.cumlogsumexp_p, [A((3,))], dict(axis=1, reverse=False), ValueError, ["1", "(3,)"]),
]


def _id(entry):
    prim, avals, params, exc, _ = entry
    return f"{prim.name}-{'-'.join(a.str_short() for a in avals)}"


@pytest.mark.parametrize("prim,avals,params,exc,fragments", BAD, ids=[_id(e) for e in BAD])
def test_abstract_eval_rejects(prim, avals, params, exc, fragments):
    with pytest.raises(exc) as info:
        prim.abstract_eval(*avals, **params)
    message = str(info.value)
    missing = [f for f in fragments if f not in message]
    assert not missing, f"{prim.name} error {message!r} does not mention {missing}"


def test_every_family_has_error_cases():
    from .specs import FAMILIES
    covered = {p for p, *_ in BAD}
    for family, specs in FAMILIES.items():
        assert any(s.prim in covered for s in specs), f"no bad-operand case for family {family}"


F6 = np.ones(6, np.float32)
F23 = np.ones((2, 3), np.float32)
I0 = np.int32(0)

# The public lax wrappers: (id, call on a lax module ``L`` (plax.lax or jax.lax), exception, a
# pattern of plax's message). Each is also checked against JAX's recorded exception
# (jax_answers.json), except the ids in JAX_ARTEFACTS.
WRAPPER_CASES = [
    ("add", lambda L: L.add(np.ones(3, np.float32), np.ones(2, np.float32)), TypeError,
     r"\(3,\).*\(2,\)"),
    ("add_none", lambda L: L.add(None, 1), TypeError, "NoneType"),
    ("reshape", lambda L: L.reshape(F6, (4, 2)), TypeError, r"\(4, 2\)"),
    ("reshape_negative", lambda L: L.reshape(F6, (-1,)), TypeError, r"new_sizes.*-1"),
    ("broadcast_negative", lambda L: L.broadcast(F6, (-1,)), TypeError, r"-1"),
    ("broadcast_in_dim_shape", lambda L: L.broadcast_in_dim(np.ones(3, np.float32), (2, 4), (1,)),
     TypeError, r"\(3,\).*\(2, 4\)"),
    ("full_negative", lambda L: L.full((2, -1), 0.0), TypeError, r"full shape.*-1"),
    ("full_none", lambda L: L.full((2,), None), ValueError, "None"),
    ("convert_none", lambda L: L.convert_element_type(None, np.float32), ValueError, "None"),
    ("dot_general", lambda L: L.dot_general(F23, np.ones((4,), np.float32), MATMUL),
     TypeError, r"\(3,\).*\(4,\)"),
    ("dot_mismatch", lambda L: L.dot(F23, np.ones((4, 5), np.float32)), ValueError,
     r"\(2, 3\).*\(4, 5\)"),
    ("dot_rank", lambda L: L.dot(np.ones((2, 2, 3), np.float32), F23.T), ValueError, r"1-D or 2-D"),
    ("concatenate_empty", lambda L: L.concatenate([], 0), ValueError, "non-empty"),
    ("concatenate_shapes", lambda L: L.concatenate([F23, np.ones((2, 4), np.float32)], 0),
     TypeError, r"\(2, 3\).*\(2, 4\)"),
    ("transpose_perm", lambda L: L.transpose(F23, (0, 0)), TypeError, r"\(0, 0\)"),
    ("squeeze_non_one", lambda L: L.squeeze(F23, (0,)), ValueError, r"\(2, 3\)"),
    ("rev_out_of_range", lambda L: L.rev(F23, (2,)), TypeError, r"\(2,\)"),
    ("pad_config_length", lambda L: L.pad(F23, np.float32(0), ((0, 0, 0),)), ValueError,
     "padding_config"),
    ("pad_value_shape", lambda L: L.pad(F23, np.zeros(1, np.float32), ((0, 0, 0),) * 2),
     ValueError, "scalar"),
    ("slice_limits", lambda L: L.slice(F6, (3,), (2,)), TypeError, r"\(3,\).*\(2,\)"),
    ("slice_strides", lambda L: L.slice(F6, (0,), (6,), (1, 1)), TypeError, r"strides"),
    ("index_in_dim", lambda L: L.index_in_dim(F6, 7), IndexError, r"7.*6"),
    ("dynamic_slice_count", lambda L: L.dynamic_slice(F23, (I0,), (1, 1)), ValueError,
     r"1 start indices.*\(2, 3\)"),
    ("dynamic_slice_sizes", lambda L: L.dynamic_slice(F23, (I0, I0), (1,)), ValueError,
     r"slice_sizes"),
    ("dynamic_slice_2d_starts", lambda L: L.dynamic_slice(F6, np.zeros((1, 1), np.int32), (1,)),
     ValueError, r"1-D"),
    ("dynamic_slice_negative_size", lambda L: L.dynamic_slice(F6, (I0,), (-1,)), TypeError,
     r"slice_sizes.*-1"),
    ("dynamic_slice_too_big", lambda L: L.dynamic_slice(F6, (I0,), (7,)), TypeError, r"\(7,\)"),
    ("dynamic_slice_mixed_types", lambda L: L.dynamic_slice(F23, (np.int8(0), I0), (1, 1)),
     TypeError, r"int8.*int32"),
    ("dynamic_slice_float_start", lambda L: L.dynamic_slice(F6, (np.float32(1),), (1,)),
     TypeError, "float32"),
    ("dynamic_update_slice_count", lambda L: L.dynamic_update_slice(F23, F23, (I0,)), ValueError,
     r"1 start indices"),
    ("dynamic_update_slice_big", lambda L: L.dynamic_update_slice(F6, np.ones(7, np.float32),
                                                                  (I0,)), TypeError, r"\(7,\)"),
    ("gather_float_indices", lambda L: L.gather(F23, np.zeros((2, 1), np.float32),
                                                GDN((1,), (0,), (0,)), (1, 3)), ValueError,
     "integer"),
    ("scatter_float_indices", lambda L: L.scatter(F23, np.zeros((2, 1), np.float32),
                                                  F23, SDN((1,), (0,), (0,))), ValueError,
     "integer"),
    ("sort", lambda L: L.sort(np.ones(3, np.float32), dimension=1), ValueError, r"1"),
]

# JAX raises these from a lowering / verifier error (lax.reshape checks no sizes) or an
# eager fast path, not from its shape rules; plax raises what JAX's jit-traced calls raise
JAX_ARTEFACTS = {"reshape"}


@pytest.mark.parametrize("call,exc,pattern", [c[1:] for c in WRAPPER_CASES],
                         ids=[c[0] for c in WRAPPER_CASES])
def test_public_wrappers_raise_the_same_errors(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call(lax)


@pytest.mark.parametrize("name,call,exc", [(c[0], c[1], c[2]) for c in WRAPPER_CASES
                                           if c[0] not in JAX_ARTEFACTS],
                         ids=[c[0] for c in WRAPPER_CASES if c[0] not in JAX_ARTEFACTS])
def test_wrapper_errors_match_jax(name, call, exc):
    """JAX's ``jax.lax`` raises an instance of the class plax raises (JAX's exceptions are
    recorded in ``jax_answers.json`` by ``record_jax_answers.py``)."""
    recorded = jax_answers()["wrapper_errors"]
    assert name in recorded, (f"no recorded JAX answer for {name!r}; run python -m "
                              "plax.testing.conformance.record_jax_answers where JAX is installed")
    assert recorded[name] is not None, f"{name}: JAX raised no exception"
    assert exc.__name__ in recorded[name], (
        f"{name}: plax raises {exc.__name__}, JAX raised {recorded[name][0]}")

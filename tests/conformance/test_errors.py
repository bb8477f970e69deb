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

from .harness import dt


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
    (lax.pad_p, [A((3,)), A((1,))], dict(padding_config=((1, 1, 0),)), TypeError, ["(1,)"]),
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
    (lax.dynamic_update_slice_p, [A((5,)), A((6,)), A((), I32)], {}, TypeError, ["(6,)", "(5,)"]),
    (lax.dynamic_update_slice_p, [A((5,)), A((2, 1)), A((), I32)], {}, TypeError,
     ["(2, 1)", "(5,)"]),
    (lax.dynamic_update_slice_p, [A((5,)), A((2,), I32), A((), I32)], {}, TypeError,
     ["float32", "int32"]),
    (lax.gather_p, [A((5, 3)), A((4, 1), F32)], GATHER_OK, TypeError, ["float32"]),
    (lax.gather_p, [A((5, 3)), A((4, 2), I32)], GATHER_OK, TypeError, ["2", "(0,)"]),
    (lax.gather_p, [A((5, 3)), A((4, 1), I32)], gather_with(slice_sizes=(1, 4)), TypeError,
     ["(1, 4)", "(5, 3)"]),
    (lax.gather_p, [A((5, 3)), A((4, 1), I32)], gather_with(slice_sizes=(2, 3)), TypeError,
     ["(2, 3)"]),
    (lax.gather_p, [A((5, 3)), A((4, 1), I32)],
     gather_with(dimension_numbers=GDN((1,), (), (0,))), TypeError, ["(1,)", "()"]),
    (lax.gather_p, [A((3, 4)), A((2, 1), I32)],
     gather_with(dimension_numbers=GDN((), (1,), (1,), (0,), (0,)), slice_sizes=(1, 1)), TypeError,
     ["3", "2"]),
    (lax.scatter_add_p, [A((5, 3)), A((4, 1), I32), A((4, 4))], SCATTER_OK, TypeError,
     ["(4, 4)", "(5, 3)"]),
    (lax.scatter_add_p, [A((5, 3)), A((4, 1), I32), A((3, 3))], SCATTER_OK, TypeError,
     ["(4,)", "(3,)"]),
    (lax.scatter_p, [A((5, 3)), A((4, 1), I32), A((4, 3), I32)], SCATTER_OK, TypeError,
     ["float32", "int32"]),
    (lax.scatter_mul_p, [A((5, 3)), A((4, 1), F32), A((4, 3))], SCATTER_OK, TypeError, ["float32"]),
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
    (lax.dot_general_p, [A((2, 3)), A((3, 5), I32)], dict(DOT, dimension_numbers=MATMUL), TypeError,
     ["float32", "int32"]),
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
    # random
    (lax.threefry2x32_p, [A((2,), "uint32"), A((2,), "uint32"), A((2,), "int32"), A((2,), "uint32")],
     {}, TypeError, ["uint32", "int32"]),
    (lax.threefry2x32_p, [A((), "uint32"), A((), "uint32"), A((2,), "uint32"), A((3,), "uint32")],
     {}, TypeError, ["(2,)", "(3,)"]),
    (lax.random_gamma_grad_p, [A((2,)), A((2,), "float16")], {}, TypeError, ["float32", "float16"]),
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


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: lax.add(np.ones(3, np.float32), np.ones(2, np.float32)), TypeError, r"\(3,\).*\(2,\)"),
    (lambda: lax.reshape(np.ones(6, np.float32), (4, 2)), TypeError, r"\(4, 2\)"),
    (lambda: lax.dot_general(np.ones((2, 3), np.float32), np.ones((4,), np.float32), MATMUL),
     TypeError, r"\(3,\).*\(4,\)"),
    (lambda: lax.sort(np.ones(3, np.float32), dimension=1), ValueError, r"1"),
], ids=["add", "reshape", "dot_general", "sort"])
def test_public_wrappers_raise_the_same_errors(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()

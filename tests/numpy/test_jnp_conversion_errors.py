"""Converting bad values to arrays raises the exception class JAX raises: ``None`` is a
ValueError (it has no numeric value), other non-numeric objects a TypeError, ragged nesting a
ValueError (a TypeError when the items are JAX arrays, which JAX stacks), out-of-range
integers an OverflowError; bad dtypes and shapes are TypeErrors.

Each row runs without JAX; when JAX is importable the same call is made on JAX and must raise
the same class.
"""
from __future__ import annotations

import decimal
import fractions
import warnings

import numpy as np
import pytest

import plax.numpy as jnp
from plax import lax

try:
    import jax.numpy as jax_numpy
    from jax import lax as jax_lax
except ImportError:  # pragma: no cover - depends on the environment
    jax_numpy = jax_lax = None

F32 = np.float32

# (id, call on (m, L): a numpy module and its lax, exception class, fragments of plax's message)
CASES = [
    # None: a ValueError, wherever it is
    ("asarray_none", lambda m, L: m.asarray(None), ValueError, ["None"]),
    ("array_none", lambda m, L: m.array(None), ValueError, ["None"]),
    ("array_none_dtype", lambda m, L: m.array(None, dtype=m.float32), ValueError, ["None"]),
    ("list_of_none", lambda m, L: m.asarray([None]), ValueError, ["None"]),
    ("list_with_none", lambda m, L: m.asarray([1, None]), ValueError, ["None"]),
    ("nested_none", lambda m, L: m.asarray([[1], [None]]), ValueError, ["None"]),
    ("none_beside_string", lambda m, L: m.asarray(["a", None]), ValueError, ["None"]),
    ("arrays_and_none", lambda m, L: m.asarray([m.ones(2), None]), ValueError, ["None"]),
    # other non-numeric values: TypeError
    ("string", lambda m, L: m.asarray("abc"), TypeError, ["str"]),
    ("array_string", lambda m, L: m.array("abc"), TypeError, ["str"]),
    ("bytes", lambda m, L: m.asarray(b"abc"), TypeError, ["bytes"]),
    ("list_with_string", lambda m, L: m.asarray([1, "a"]), TypeError, ["str", "'a'"]),
    ("list_of_strings", lambda m, L: m.asarray(["a", "b"]), TypeError, ["str"]),
    ("object", lambda m, L: m.asarray(object()), TypeError, ["object"]),
    ("dict", lambda m, L: m.asarray({1: 2}), TypeError, ["dict"]),
    ("set", lambda m, L: m.asarray({1, 2}), TypeError, ["set"]),
    ("slice", lambda m, L: m.asarray(slice(1)), TypeError, ["slice"]),
    ("ellipsis", lambda m, L: m.asarray(...), TypeError, ["ellipsis"]),
    ("fraction", lambda m, L: m.asarray(fractions.Fraction(1, 2)), TypeError, ["Fraction"]),
    ("decimal", lambda m, L: m.asarray(decimal.Decimal("1.5")), TypeError, ["Decimal"]),
    ("function", lambda m, L: m.asarray(lambda: 1), TypeError, ["function"]),
    ("generator", lambda m, L: m.asarray(i for i in range(3)), TypeError, ["generator"]),
    ("numpy_object_array", lambda m, L: m.asarray(np.array([1, 2], dtype=object)), TypeError,
     ["object"]),
    ("numpy_string_array", lambda m, L: m.asarray(np.array(["a"])), TypeError, ["<U1"]),
    ("numpy_datetime_array",
     lambda m, L: m.asarray(np.array(["2020-01-01"], dtype="datetime64[D]")), TypeError,
     ["datetime64"]),
    # ragged nesting: ValueError (TypeError for JAX arrays, which are stacked)
    ("ragged", lambda m, L: m.asarray([[1, 2], [3]]), ValueError, ["[[1, 2], [3]]"]),
    ("array_ragged", lambda m, L: m.array([[1, 2], [3]]), ValueError, ["[[1, 2], [3]]"]),
    ("ragged_depth", lambda m, L: m.asarray([1, [2]]), ValueError, ["[1, [2]]"]),
    ("ragged_empty", lambda m, L: m.asarray([[], [1]]), ValueError, ["[[], [1]]"]),
    ("ragged_numpy", lambda m, L: m.asarray([np.ones(2), np.ones(3)]), ValueError, ["array"]),
    ("ragged_arrays", lambda m, L: m.asarray([m.ones(2), m.ones(3)]), TypeError,
     ["(2,)", "(3,)"]),
    ("ragged_array_and_list", lambda m, L: m.asarray([m.ones(2), [1]]), TypeError,
     ["(2,)", "(1,)"]),
    # dtypes
    ("dtype_object", lambda m, L: m.asarray([1, 2], dtype=object), TypeError, ["dtype('O')"]),
    ("array_dtype_object", lambda m, L: m.array([1, 2], dtype=object), TypeError,
     ["dtype('O')"]),
    ("dtype_unknown", lambda m, L: m.asarray([1, 2], dtype="foo"), TypeError, ["foo"]),
    ("dtype_str", lambda m, L: m.asarray([1, 2], dtype=str), TypeError, ["dtype('<U')"]),
    ("zeros_dtype_unknown", lambda m, L: m.zeros(3, dtype="foo"), TypeError, ["foo"]),
    ("zeros_dtype_object", lambda m, L: m.zeros(3, dtype=object), TypeError, ["dtype('O')"]),
    ("zeros_dtype_str", lambda m, L: m.zeros(3, dtype=str), TypeError, ["dtype('<U')"]),
    ("zeros_dtype_int", lambda m, L: m.zeros(3, dtype=1), TypeError, ["1"]),
    ("astype_object", lambda m, L: m.ones(3).astype(object), TypeError, ["dtype('O')"]),
    ("astype_unknown", lambda m, L: m.ones(3).astype("foo"), TypeError, ["foo"]),
    ("zeros_like_dtype", lambda m, L: m.zeros_like(m.ones(2), dtype="foo"), TypeError, ["foo"]),
    # shapes
    ("ones_negative", lambda m, L: m.ones((2, -1)), TypeError, ["-1"]),
    ("ones_negative_int", lambda m, L: m.ones(-1), TypeError, ["-1"]),
    ("zeros_negative", lambda m, L: m.zeros((-1, 2)), TypeError, ["-1"]),
    ("full_negative", lambda m, L: m.full((-1,), 1), TypeError, ["-1"]),
    ("empty_negative", lambda m, L: m.empty(-1), TypeError, ["-1"]),
    ("ones_float", lambda m, L: m.ones(3.5), TypeError, ["3.5"]),
    ("ones_whole_float", lambda m, L: m.ones(3.0), TypeError, ["3.0"]),
    ("ones_float_entry", lambda m, L: m.ones((2.5,)), TypeError, ["2.5"]),
    ("ones_string", lambda m, L: m.ones("3"), TypeError, ["'3'"]),
    ("ones_none", lambda m, L: m.ones(None), TypeError, ["None"]),
    ("ones_none_entry", lambda m, L: m.ones([2, None]), TypeError, ["None"]),
    ("ones_2d_array", lambda m, L: m.ones(np.array([[2]])), TypeError, ["[[2]]"]),
    ("ones_float_array", lambda m, L: m.ones(np.array([2.0])), TypeError, ["2."]),
    ("eye_float", lambda m, L: m.eye(2.5), TypeError, ["2.5"]),
    ("eye_float_k", lambda m, L: m.eye(2, k=1.5), ValueError, ["1.5"]),
    ("linspace_float_num", lambda m, L: m.linspace(0.0, 1.0, 2.5), TypeError, ["2.5"]),
    # integers out of range: OverflowError
    ("int_2_70", lambda m, L: m.asarray(2 ** 70), OverflowError, [str(2 ** 70)]),
    ("int_minus_2_70", lambda m, L: m.asarray(-2 ** 70), OverflowError, [str(-2 ** 70)]),
    ("int_2_31", lambda m, L: m.asarray(2 ** 31), OverflowError, [str(2 ** 31)]),
    ("list_int_2_70", lambda m, L: m.asarray([2 ** 70]), OverflowError, [str(2 ** 70)]),
    ("list_int_2_40", lambda m, L: m.asarray([1, 2 ** 40]), OverflowError, [str(2 ** 40)]),
    ("list_numpy_int64", lambda m, L: m.asarray([np.int64(2 ** 40)]), OverflowError,
     [str(2 ** 40)]),
    ("int8_300", lambda m, L: m.asarray(300, dtype=m.int8), OverflowError, ["300"]),
    ("list_int8_400", lambda m, L: m.asarray([[1, 2], [3, 400]], dtype=m.int8), OverflowError,
     ["400"]),
    ("uint8_negative", lambda m, L: m.asarray(-1, dtype=m.uint8), OverflowError, ["-1"]),
    ("jnp_add_2_70", lambda m, L: m.add(2 ** 70, 1), OverflowError, [str(2 ** 70)]),
    ("array_plus_2_70", lambda m, L: m.ones(3, m.int32) + 2 ** 70, OverflowError,
     [str(2 ** 70)]),
    # jnp functions and operators given non-arrays
    ("jnp_add_none", lambda m, L: m.add(None, 1), TypeError, ["add", "NoneType"]),
    ("jnp_sin_none", lambda m, L: m.sin(None), TypeError, ["sin", "NoneType"]),
    ("jnp_sum_none", lambda m, L: m.sum(None), TypeError, ["sum", "NoneType"]),
    ("jnp_sin_string", lambda m, L: m.sin("a"), TypeError, ["sin", "str"]),
    ("jnp_zeros_like_none", lambda m, L: m.zeros_like(None), TypeError, ["NoneType"]),
    ("jnp_full_none", lambda m, L: m.full(3, None), TypeError, ["NoneType"]),
    ("array_plus_none", lambda m, L: m.ones(3) + None, TypeError, []),
    ("array_plus_string", lambda m, L: m.ones(3) + "a", TypeError, []),
    ("array_plus_object", lambda m, L: m.ones(3) + object(), TypeError, []),
    # lax given non-arrays
    ("lax_add_none", lambda m, L: L.add(None, 1), TypeError, ["NoneType"]),
    ("lax_add_none_second", lambda m, L: L.add(1, None), TypeError, ["NoneType"]),
    ("lax_add_string", lambda m, L: L.add("a", 1), TypeError, ["str"]),
    ("lax_add_lists", lambda m, L: L.add([1], [1]), TypeError, ["list"]),
    ("lax_add_tuples", lambda m, L: L.add((1,), (1,)), TypeError, ["tuple"]),
    ("lax_add_object", lambda m, L: L.add(object(), 1), TypeError, ["object"]),
    ("lax_add_2_70", lambda m, L: L.add(2 ** 70, 1), OverflowError, [str(2 ** 70)]),
    ("lax_neg_none", lambda m, L: L.neg(None), TypeError, ["NoneType"]),
    ("lax_sin_string", lambda m, L: L.sin("a"), TypeError, ["str"]),
    ("lax_reshape_none", lambda m, L: L.reshape(None, (1,)), TypeError, ["NoneType"]),
    ("lax_reduce_sum_none", lambda m, L: L.reduce_sum(None, (0,)), TypeError, ["NoneType"]),
    ("lax_select_none", lambda m, L: L.select(None, 1, 1), TypeError, ["NoneType"]),
    ("lax_concatenate_none", lambda m, L: L.concatenate([None], 0), TypeError, ["NoneType"]),
    ("lax_convert_none", lambda m, L: L.convert_element_type(None, np.float32), ValueError,
     ["None"]),
    ("lax_convert_unknown_dtype", lambda m, L: L.convert_element_type(1, "foo"), TypeError,
     ["foo"]),
    ("lax_full_none", lambda m, L: L.full((2,), None), ValueError, ["None"]),
    ("lax_full_unknown_dtype", lambda m, L: L.full((2,), 0, "foo"), TypeError, ["foo"]),
    ("lax_dynamic_slice_none_start", lambda m, L: L.dynamic_slice(m.ones(3), (None,), (1,)),
     ValueError, ["None"]),
    ("lax_dot_none", lambda m, L: L.dot(None, m.ones(3)), ValueError, ["()", "(3,)"]),
]


@pytest.mark.parametrize("call,exc,fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_conversion_error(call, exc, fragments):
    with pytest.raises(exc) as info:
        call(jnp, lax)
    # not both: None must not raise a TypeError that is also a ValueError, nor the reverse
    other = ValueError if exc is TypeError else TypeError if exc is ValueError else None
    assert other is None or not isinstance(info.value, other), type(info.value)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in message: {message}"
    if jax_numpy is not None:
        with pytest.raises(exc), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # JAX's own, for string dtypes
            call(jax_numpy, jax_lax)


# (id, call on (m, L), expected value): conversions JAX accepts, and so does plax
ACCEPTED = [
    ("range", lambda m, L: m.asarray(range(3)), np.array([0, 1, 2], np.int32)),
    ("range_float", lambda m, L: m.asarray(range(3), dtype=m.float32), np.array([0, 1, 2], F32)),
    ("list_of_ranges", lambda m, L: m.asarray([range(2), range(2)]),
     np.array([[0, 1], [0, 1]], np.int32)),
    ("bytearray", lambda m, L: m.asarray(bytearray(b"ab")), np.array([97, 98], np.uint8)),
    ("memoryview", lambda m, L: m.asarray(memoryview(b"ab")), np.array([97, 98], np.uint8)),
    ("big_int_beside_float", lambda m, L: m.asarray([1.0, 2 ** 70]), np.array([1.0, 2.0 ** 70], F32)),
    ("big_int_as_float", lambda m, L: m.asarray([2 ** 70], dtype=m.float32),
     np.array([2.0 ** 70], F32)),
    ("ones_numpy_shape", lambda m, L: m.ones(np.array([2, 3])), np.ones((2, 3), F32)),
    ("ones_array_shape", lambda m, L: m.ones(m.array([2, 3])), np.ones((2, 3), F32)),
    ("ones_0d_shape", lambda m, L: m.ones(np.array(3)), np.ones(3, F32)),
    ("reshape_array_shape", lambda m, L: m.arange(6).reshape(m.array([2, 3])),
     np.arange(6, dtype=np.int32).reshape(2, 3)),
    ("nested_int8", lambda m, L: m.asarray([[1, 2], [3, 4]], dtype=m.int8),
     np.array([[1, 2], [3, 4]], np.int8)),
]


@pytest.mark.parametrize("call,expected", [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_conversion(call, expected):
    out = call(jnp, lax)
    assert out.dtype == expected.dtype and out.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(out), expected)
    if jax_numpy is not None:
        ref = call(jax_numpy, jax_lax)
        assert ref.dtype == expected.dtype and ref.shape == expected.shape
        np.testing.assert_array_equal(np.asarray(ref), expected)

"""Bad input raises the exception type JAX raises for the same call, with a message naming the
offending shapes, axes, dtypes or values."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from jnp_testutil import check_raises_like_jax, jax, jax_numpy

A23 = np.ones((2, 3), np.float32)
A4 = np.ones((4,), np.float32)
I6 = np.arange(6, dtype=np.int32)

# (id, call on a numpy module stand-in ``m`` (plax.numpy or jax.numpy), exception type,
#  fragments the plax message must contain)
CASES = [
    ("broadcast", lambda m: m.add(A23, A4), ValueError, ["(2, 3)", "(4,)"]),
    ("broadcast_where", lambda m: m.where(A23 > 0, A23, A4), ValueError, ["(2, 3)", "(4,)"]),
    ("broadcast_to", lambda m: m.broadcast_to(A23, (3,)), ValueError, ["(2, 3)", "(3,)"]),
    ("broadcast_to_mismatch", lambda m: m.broadcast_to(A23, (2, 4)), ValueError,
     ["(2, 3)", "(2, 4)"]),
    ("axis_sum", lambda m: m.sum(A23, axis=2), ValueError, ["axis 2", "dimension 2"]),
    ("axis_neg", lambda m: m.mean(A23, axis=-3), ValueError, ["axis -3", "dimension 2"]),
    ("axis_argmax", lambda m: m.argmax(A23, axis=5), ValueError, ["axis 5", "dimension 2"]),
    ("axis_concat", lambda m: m.concatenate([A23, A23], axis=2), ValueError, ["2"]),
    ("axis_stack", lambda m: m.stack([A23, A23], axis=4), ValueError, ["4"]),
    ("axis_expand_dims", lambda m: m.expand_dims(A23, 5), ValueError, ["5"]),
    ("axis_squeeze_size", lambda m: m.squeeze(A23, 0), ValueError, ["(2, 3)"]),
    ("axis_moveaxis", lambda m: m.moveaxis(A23, 0, 3), ValueError, ["3"]),
    ("axis_flip", lambda m: m.flip(A23, 2), ValueError, ["2"]),
    ("axis_take", lambda m: m.take(A23, I6[:1], axis=3), ValueError, ["3"]),
    ("axis_cumsum", lambda m: m.cumsum(A23, axis=-4), ValueError, ["-4"]),
    ("axis_repeated", lambda m: m.sum(A23, axis=(1, 1)), ValueError, ["repeated"]),
    ("too_many_indices", lambda m: m.asarray(A23)[0, 0, 0], IndexError, ["Too many indices"]),
    ("float_index", lambda m: m.asarray(A23)[1.5], TypeError, ["integer"]),
    ("string_index", lambda m: m.asarray(A23)["a"], TypeError, ["string"]),
    ("float_array_index", lambda m: m.asarray(A23)[np.array([0.0])], TypeError, ["float"]),
    ("two_ellipses", lambda m: m.asarray(A23)[..., ...], IndexError, ["ellipsis"]),
    ("list_index", lambda m: m.asarray(A23)[[0, 1]], TypeError, ["non-tuple sequence"]),
    ("mask_shape", lambda m: m.asarray(A23)[np.array([True, False, True])], IndexError,
     ["(3,)", "(2, 3)"]),
    ("list_to_sum", lambda m: m.sum([1, 2]), TypeError, ["sum", "list"]),
    ("list_to_add", lambda m: m.add([1, 2], 1), TypeError, ["add", "list"]),
    ("list_to_reshape", lambda m: m.reshape([1, 2], (2,)), TypeError, ["reshape", "list"]),
    ("list_to_exp", lambda m: m.exp([1.0]), TypeError, ["exp", "list"]),
    ("list_to_dot", lambda m: m.dot([1.0], [2.0]), TypeError, ["dot", "list"]),
    ("list_to_where", lambda m: m.where([True], 1, 2), TypeError, ["where", "list"]),
    ("list_to_concatenate", lambda m: m.concatenate([[1, 2], [3]]), TypeError,
     ["concatenate", "list"]),
    ("list_to_sort", lambda m: m.sort([3, 1]), TypeError, ["sort", "list"]),
    ("list_to_copy", lambda m: m.copy([3, 1]), TypeError, ["copy", "list"]),
    # (JAX array inputs: jnp.reshape of a NumPy array is NumPy's reshape in JAX, a ValueError)
    ("reshape_size", lambda m: m.reshape(m.asarray(I6), (4,)), TypeError, ["(6,)", "(4,)"]),
    ("reshape_two_unknown", lambda m: m.reshape(m.asarray(I6), (-1, -1)), TypeError, ["-1"]),
    ("reshape_method", lambda m: m.asarray(I6).reshape(4), TypeError, ["(6,)", "(4,)"]),
    ("reshape_method_2d", lambda m: m.asarray(I6).reshape(4, 2), TypeError, ["(4, 2)"]),
    ("reshape_unknown_no_divide", lambda m: m.reshape(m.asarray(I6), (4, -1)), TypeError,
     ["(4, -1)", "divide"]),
    ("reshape_negative", lambda m: m.reshape(m.asarray(I6), (-2, 3)), TypeError, ["(-2, 3)"]),
    ("reshape_float", lambda m: m.reshape(m.asarray(I6), (2.0, 3)), TypeError, ["2.0"]),
    ("add_same_rank", lambda m: m.asarray(A4) + m.ones(3, np.float32), TypeError,
     ["(4,)", "(3,)"]),
    ("add_same_rank_2d", lambda m: m.add(m.asarray(A23), m.ones((2, 4))), TypeError,
     ["(2, 3)", "(2, 4)"]),
    ("multiply_same_rank", lambda m: m.multiply(A4, np.ones(3, np.float32)), TypeError,
     ["(4,)", "(3,)"]),
    ("compare_same_rank", lambda m: m.asarray(A4) < m.ones(3), TypeError, ["(4,)", "(3,)"]),
    ("where_same_rank", lambda m: m.where(m.asarray(A4) > 0, A4, np.ones(3, np.float32)),
     ValueError, ["(4,)", "(3,)"]),
    ("copysign_same_rank", lambda m: m.copysign(A4, np.ones(3, np.float32)), ValueError,
     ["(4,)", "(3,)"]),
    ("broadcast_to_same_rank", lambda m: m.broadcast_to(m.ones(3), (4,)), ValueError,
     ["(3,)", "(4,)"]),
    ("broadcast_arrays", lambda m: m.broadcast_arrays(m.ones(3), m.ones(4)), ValueError,
     ["(3,)", "(4,)"]),
    ("broadcast_shapes_negative", lambda m: m.broadcast_shapes((-1,), (3,)), TypeError, ["-1"]),
    ("transpose_axis_range", lambda m: m.transpose(A23, (0, 2)), ValueError, ["2"]),
    ("squeeze_axis_range", lambda m: m.squeeze(A23, 2), ValueError, ["2"]),
    ("expand_dims_repeated", lambda m: m.expand_dims(A23, (1, 1)), ValueError, ["repeated"]),
    ("split_float_indices", lambda m: m.split(m.asarray(I6), [2.5]), TypeError, ["2.5"]),
    ("tile_float_reps", lambda m: m.tile(A4, (2, 1.5)), TypeError, ["1.5"]),
    ("tile_string_reps", lambda m: m.tile(A4, "2"), TypeError, ["'2'"]),
    ("repeat_negative", lambda m: m.repeat(A4, -1), TypeError, ["-1"]),
    ("repeat_length", lambda m: m.repeat(A4, m.asarray(np.array([1, 2]))), ValueError, ["4"]),
    ("repeat_list", lambda m: m.repeat(A4, [1, 2, 3, 4]), TypeError, ["list"]),
    ("rot90_same_axes", lambda m: m.rot90(A23, axes=(0, 0)), ValueError, ["axes"]),
    ("rot90_1d", lambda m: m.rot90(A4), ValueError, ["(4,)"]),
    ("pad_width_axes", lambda m: m.pad(A23, ((1, 1), (1, 1), (1, 1))), ValueError, ["2 axes"]),
    ("pad_constant_values_shape", lambda m: m.pad(A23, 1, constant_values=np.ones((3, 2))),
     ValueError, ["(3, 2)"]),
    ("take_along_axis_shapes", lambda m: m.take_along_axis(A23, np.ones((3, 1), np.int32), axis=1),
     ValueError, ["(3, 1)", "(2, 1)"]),
    ("take_along_axis_none_2d", lambda m: m.take_along_axis(A23, np.ones((2, 1), np.int32),
                                                            axis=None), ValueError, ["1D"]),
    ("take_along_axis_float", lambda m: m.take_along_axis(A23, np.ones((2, 1)), axis=1),
     TypeError, ["float"]),
    ("take_along_axis_mode", lambda m: m.take_along_axis(A23, np.ones((2, 1), np.int32), axis=1,
                                                         mode="wrap"), ValueError, ["wrap"]),
    ("take_mode_drop", lambda m: m.take(A4, I6[:1], mode="drop"), ValueError, ["drop"]),
    ("eye_float", lambda m: m.eye(2.5), TypeError, ["2.5"]),
    ("linspace_float_num", lambda m: m.linspace(0.0, 1.0, 2.5), TypeError, ["2.5"]),
    ("concat_shapes", lambda m: m.concatenate([A23, np.ones((2, 4), np.float32)], axis=0),
     TypeError, ["(2, 3)", "(2, 4)"]),
    ("concat_ranks", lambda m: m.concatenate([A23, A4]), TypeError, ["(2, 3)", "(4,)"]),
    ("concat_scalars", lambda m: m.concatenate([np.float32(1), np.float32(2)]), ValueError,
     ["Zero-dimensional"]),
    ("concat_empty", lambda m: m.concatenate([]), ValueError, ["at least one"]),
    ("stack_shapes", lambda m: m.stack([A23, A23.T]), ValueError, ["(2, 3)", "(3, 2)"]),
    ("stack_empty", lambda m: m.stack([]), ValueError, ["at least one"]),
    ("matmul_core", lambda m: m.matmul(A23, A23), TypeError, ["(2, 3)"]),
    ("matmul_scalar", lambda m: m.matmul(np.float32(1), A23), ValueError, ["()"]),
    ("dot_core", lambda m: m.dot(A23, A23), TypeError, ["3", "2"]),
    ("einsum_operands", lambda m: m.einsum("ij,jk", A23), ValueError, ["2", "1"]),
    ("einsum_rank", lambda m: m.einsum("ijk", A23), ValueError, ["ijk"]),
    ("einsum_sizes", lambda m: m.einsum("ij,ij", A23, A23.T), ValueError, ["i"]),
    ("tensordot_axes", lambda m: m.tensordot(A23, A23, 3), TypeError, ["3"]),
    ("split_unequal", lambda m: m.split(I6, 4), ValueError, ["equal division"]),
    ("transpose_axes", lambda m: m.transpose(A23, (0, 0)), TypeError, ["(0, 0)"]),
    ("zeros_bad_dtype", lambda m: m.zeros(3, dtype="not-a-dtype"), TypeError, ["not-a-dtype"]),
    ("zeros_negative", lambda m: m.zeros((-1, 2)), TypeError, ["-1"]),
    ("zeros_float_shape", lambda m: m.zeros((2.5,)), TypeError, ["2.5"]),
    ("arange_step_zero", lambda m: m.arange(0, 3, 0), ZeroDivisionError, ["step"]),
    ("linspace_negative", lambda m: m.linspace(0, 1, -2), ValueError, ["-2"]),
    ("eye_negative", lambda m: m.eye(-1), ValueError, ["-1"]),
    ("meshgrid_indexing", lambda m: m.meshgrid(A4, A4, indexing="yx"), ValueError, ["yx"]),
    ("where_one_branch", lambda m: m.where(A4 > 0, A4), TypeError, ["both"]),
    ("take_float_indices", lambda m: m.take(A4, np.array([0.5])), ValueError, ["integer"]),
    ("take_mode", lambda m: m.take(A4, I6[:1], mode="nope"), ValueError, ["nope"]),
    ("searchsorted_side", lambda m: m.searchsorted(A4, 1.0, side="up"), ValueError, ["up"]),
    ("nonzero_scalar", lambda m: m.nonzero(np.float32(1)), ValueError, ["0d"]),
    ("pad_negative", lambda m: m.pad(A23, -1), ValueError, ["negative"]),
    ("array_ragged", lambda m: m.array([[1, 2], [3]]), ValueError, ["[[1, 2], [3]]"]),
    ("array_overflow", lambda m: m.array(2 ** 40), OverflowError, [str(2 ** 40)]),
    ("int_overflow_in_op", lambda m: m.add(I6, 2 ** 40), OverflowError, [str(2 ** 40)]),
    ("negative_int_power", lambda m: m.power(I6, -1), TypeError, ["negative"]),
    ("sign_bool", lambda m: m.sign(np.array([True])), TypeError, ["bool"]),
    ("subtract_bool", lambda m: m.subtract(np.array([True]), np.array([False])), TypeError,
     ["bool"]),
    ("bitwise_float", lambda m: m.bitwise_and(A4, A4), TypeError, ["float"]),
    ("hypot_complex", lambda m: m.hypot(np.ones(2, np.complex64), 1.0), ValueError,
     ["complex"]),
    ("max_where_no_initial", lambda m: m.max(A4, where=A4 > 0), ValueError, ["initial"]),
    ("at_set_shape", lambda m: m.asarray(A23).at[0].set(np.ones(4, np.float32)), ValueError,
     ["(4,)", "(3,)"]),
    ("at_add_bool", lambda m: m.asarray(np.array([True])).at[0].add(True), TypeError,
     ["bool"]),
    ("astype_bad", lambda m: m.asarray(A4).astype("nope"), TypeError, ["nope"]),
]


# JAX raises an IndexError ("tuple index out of range") from inside mean and argmax for an
# axis out of range; plax raises the ValueError JAX raises everywhere else.
JAX_ARTEFACTS = {"axis_neg", "axis_argmax"}


@pytest.mark.parametrize("name,call,exc,fragments", CASES, ids=[c[0] for c in CASES])
def test_error(name, call, exc, fragments):
    with pytest.raises(exc) as info:
        call(jnp)
    message = str(info.value)
    for fragment in fragments:
        assert fragment.lower() in message.lower(), f"{fragment!r} not in message: {message}"
    if jax is not None and name not in JAX_ARTEFACTS:
        check_raises_like_jax(lambda: call(jnp), lambda: call(jax_numpy))


def test_non_concrete_boolean_index_error_matches_jax():
    f = plax.jit(lambda x: x[x > 0])
    with pytest.raises(jnp.NonConcreteBooleanIndexError) as info:
        f(A4)
    assert "bool[4]" in str(info.value) and "jnp.where" in str(info.value)
    if jax is not None:
        with pytest.raises(jax.errors.NonConcreteBooleanIndexError):
            jax.jit(lambda x: x[x > 0])(A4)
        assert issubclass(jnp.NonConcreteBooleanIndexError, IndexError)


def test_traced_values_where_static_ones_are_needed():
    with pytest.raises(plax.errors.ConcretizationTypeError, match="size"):
        plax.jit(jnp.nonzero)(A4)
    with pytest.raises(plax.errors.ConcretizationTypeError, match="arange"):
        plax.jit(lambda n: jnp.arange(n))(3)
    with pytest.raises(plax.errors.ConcretizationTypeError, match="dynamic_slice"):
        plax.jit(lambda x, i: x[i:])(A4, 1)
    with pytest.raises(TypeError, match="concrete"):  # as JAX: shapes must be concrete
        plax.jit(lambda x: jnp.zeros(x.sum().astype(int)))(A4)


def test_array_protocol_errors():
    x = jnp.asarray(A23)
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        bool(x)
    with pytest.raises(TypeError, match="unhashable"):
        hash(x)
    with pytest.raises(TypeError, match=r"\.at\["):
        x[0, 0] = 1.0
    with pytest.raises(TypeError, match="len"):
        len(jnp.asarray(1.0))


# A list where an array is expected: JAX's first line (its message names the argument's class),
# then plax's advice on a line of its own.
NOT_ARRAYLIKE = [
    (lambda m: m.sum([1, 2, 3]), "sum requires ndarray or scalar arguments, got <class 'list'> "
                                 "at position 0."),
    (lambda m: m.sin((1, 2)), "sin requires ndarray or scalar arguments, got <class 'tuple'> "
                              "at position 0."),
    (lambda m: m.add(1, [2]), "add requires ndarray or scalar arguments, got <class 'list'> "
                              "at position 1."),
    # each *_like names itself (empty_like says ones_like, as JAX 0.10.2's does)
    (lambda m: m.zeros_like([1.0]), "zeros_like requires ndarray or scalar arguments, got "
                                    "<class 'list'> at position 0."),
    (lambda m: m.ones_like([1.0]), "ones_like requires ndarray or scalar arguments, got "
                                   "<class 'list'> at position 0."),
    (lambda m: m.empty_like([1.0]), "ones_like requires ndarray or scalar arguments, got "
                                    "<class 'list'> at position 0."),
    (lambda m: m.full_like([1.0], 2), "full_like requires ndarray or scalar arguments, got "
                                      "<class 'list'> at position 0."),
]


@pytest.mark.parametrize("k", range(len(NOT_ARRAYLIKE)))
def test_not_arraylike_first_line_as_jax(k):
    call, first = NOT_ARRAYLIKE[k]
    with pytest.raises(TypeError) as info:
        call(jnp)
    lines = str(info.value).splitlines()
    assert lines == [first, "Use jnp.array(...) to convert a list or tuple."]
    if jax_numpy is not None:
        with pytest.raises(TypeError) as jinfo:
            call(jax_numpy)
        assert str(jinfo.value) == first

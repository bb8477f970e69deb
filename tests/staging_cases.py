"""Programs whose jaxprs JAX 0.10.2 prints in a particular way (issue 25: staging and
printing), shared by ``test_staging_as_jax.py`` and ``record_staging_as_jax.py``.

Each case is ``name -> build(jax, jnp) -> (function, example arguments)``, written once for
both libraries (``jax`` is ``plax`` or JAX itself)."""
from __future__ import annotations

import numpy as np


def _m():
    return np.ones((2, 3), np.float32)


def _v():
    return np.ones(3, np.float32)


def _t():
    return np.ones((4, 5, 6), np.float32)


def _i():
    return np.array([0, 2], np.int32)


CASES = {
    # stacking: one stack equation, jit calls of broadcast_in_dim for atleast_*d
    "stack": lambda jax, jnp: (lambda x: jnp.stack([x, x]), (_v(),)),
    "stack_axis_last": lambda jax, jnp: (lambda x: jnp.stack([x, 2.0 * x], axis=-1), (_m(),)),
    "stack_scalars": lambda jax, jnp: (lambda x: jnp.stack([x[0], x[1]]), (_v(),)),
    "stack_dtype": lambda jax, jnp: (lambda x: jnp.stack([x, x], dtype=jnp.int32), (_m(),)),
    "stack_of_array": lambda jax, jnp: (lambda x: jnp.stack(x, axis=1), (_m(),)),
    "vstack": lambda jax, jnp: (lambda x: jnp.vstack([x, x]), (_v(),)),
    "hstack": lambda jax, jnp: (lambda x: jnp.hstack([x, x]), (_m(),)),
    "dstack": lambda jax, jnp: (lambda x: jnp.dstack([x, x]), (_v(),)),
    "column_stack": lambda jax, jnp: (lambda x: jnp.column_stack([x, x]), (_v(),)),
    "hstack_of_array": lambda jax, jnp: (lambda x: jnp.hstack(x), (_m(),)),
    "concatenate_of_array": lambda jax, jnp: (lambda x: jnp.concatenate(x), (_m(),)),
    "expand_dims": lambda jax, jnp: (lambda x: jnp.expand_dims(x, (0, -1)), (_v(),)),
    "new_axes": lambda jax, jnp: (lambda x: x[None, :, None], (_v(),)),
    "atleast_1d": lambda jax, jnp: (jnp.atleast_1d, (_v(),)),
    "atleast_2d_scalar": lambda jax, jnp: (lambda x: jnp.atleast_2d(x[0]), (_v(),)),
    "atleast_3d_two": lambda jax, jnp: (lambda x: jnp.atleast_3d(x, x[0]), (_m(),)),
    "unstack": lambda jax, jnp: (lambda x: jnp.unstack(x, axis=1), (_m(),)),
    "grad_of_stack": lambda jax, jnp: (jax.grad(lambda x: jnp.stack([x, 2 * x]).sum()), (_v(),)),
    "vmap_of_stack": lambda jax, jnp: (jax.vmap(lambda x: jnp.stack([x, x], axis=1), in_axes=1),
                                       (_m(),)),
    "vmap_stack_unbatched": lambda jax, jnp: (
        jax.vmap(lambda x, y: jnp.stack([x, y]), in_axes=(0, None)), (_m(), _v())),
    # slices: JAX keeps all-one strides given to lax.slice, and its batcher keeps them
    "vmap_slice_in_dim": lambda jax, jnp: (jax.vmap(lambda x: jax.lax.slice_in_dim(x, 1, 3)),
                                           (_m(),)),
    "slice_step": lambda jax, jnp: (lambda x: x[::2], (np.ones(6, np.float32),)),
    "slice_negative_step": lambda jax, jnp: (lambda x: x[5:1:-2], (np.ones(6, np.float32),)),
    "slice_and_int": lambda jax, jnp: (lambda x: x[1, 1:3], (_m(),)),
    "slices_two_axes": lambda jax, jnp: (lambda x: x[1:, ::-2], (_m(),)),
    # line breaking: runs of binders wrap once the column passes 80, as jaxlib's printer
    "binders_9": lambda jax, jnp: (lambda x: jax.lax.unstack(x), (np.ones((9, 3), np.float32),)),
    "binders_10": lambda jax, jnp: (lambda x: jax.lax.unstack(x), (np.ones((10, 3), np.float32),)),
    "binders_30": lambda jax, jnp: (lambda x: jax.lax.unstack(x), (np.ones((30, 3), np.float32),)),
    "invars_8": lambda jax, jnp: (lambda *a: [x + 1 for x in a], (_v(),) * 8),
    "invars_9": lambda jax, jnp: (lambda *a: [x + 1 for x in a], (_v(),) * 9),
    # (issue 25, shape primitives) reshape's folded transposition and the split primitive
    "reshape_dimensions": lambda jax, jnp: (lambda x: jax.lax.reshape(x, (6,), (1, 0)), (_m(),)),
    "reshape_dimensions_identity": lambda jax, jnp: (
        lambda x: jax.lax.reshape(x, (3, 2), (0, 1)), (_m(),)),
    "column_stack_of_array": lambda jax, jnp: (lambda x: jnp.column_stack(x), (_m(),)),
    "grad_of_reshape_dimensions": lambda jax, jnp: (
        jax.grad(lambda x: jnp.sin(jax.lax.reshape(x, (3, 2), (1, 0))).sum()), (_m(),)),
    "vmap_of_reshape_dimensions": lambda jax, jnp: (
        jax.vmap(lambda x: jax.lax.reshape(x, (6,), (1, 0)), in_axes=2),
        (np.ones((2, 3, 4), np.float32),)),
    "lax_split": lambda jax, jnp: (lambda x: jax.lax.split(x, (1, 2), axis=1), (_m(),)),
    "split_sections": lambda jax, jnp: (lambda x: jnp.split(x, 3, axis=1), (_m(),)),
    "split_indices": lambda jax, jnp: (lambda x: jnp.split(x, [2], axis=-1), (_m(),)),
    "array_split": lambda jax, jnp: (lambda x: jnp.array_split(x, 2, axis=1), (_m(),)),
    "hsplit": lambda jax, jnp: (lambda x: jnp.hsplit(x, [1]), (_m(),)),
    "vsplit": lambda jax, jnp: (lambda x: jnp.vsplit(x, 2), (_m(),)),
    "dsplit": lambda jax, jnp: (lambda x: jnp.dsplit(x, [1]),
                                (np.ones((2, 1, 3), np.float32),)),
    "grad_of_split": lambda jax, jnp: (
        jax.grad(lambda x: jax.lax.split(x, (1, 2), axis=1)[0].sum()), (_m(),)),
    "vmap_of_split": lambda jax, jnp: (
        jax.vmap(lambda x: jnp.split(x, [1], axis=0), in_axes=1), (_m(),)),
    "jvp_of_split": lambda jax, jnp: (
        lambda x, t: jax.jvp(lambda x: jnp.split(x, 3, axis=1), (x,), (t,)), (_m(), _m())),
    # JVP rules written as JAX's: a symbolic-zero tangent passes the other through (add, sub),
    # max/min/pow reuse the result
    "jvp_add_constant": lambda jax, jnp: (
        lambda x, t: jax.jvp(lambda x: x + jnp.ones(3), (x,), (t,)), (_v(), _v())),
    "jvp_sub_from_constant": lambda jax, jnp: (
        lambda x, t: jax.jvp(lambda x: np.float32(2.0) - x, (x,), (t,)), (_v(), _v())),
    "jvp_max": lambda jax, jnp: (
        lambda x, t: jax.jvp(lambda x: jax.lax.max(x, jnp.sin(x)), (x,), (t,)), (_v(), _v())),
    "jvp_min_constant": lambda jax, jnp: (
        lambda x, t: jax.jvp(lambda x: jax.lax.min(x, np.float32(0.5)), (x,), (t,)),
        (_v(), _v())),
    "jvp_pow": lambda jax, jnp: (
        lambda x, t: jax.jvp(lambda x: jax.lax.pow(x, 2.0 * x), (x,), (t,)), (_v(), _v())),
    "jvp_pow_constant_base": lambda jax, jnp: (
        lambda x, t: jax.jvp(lambda x: jax.lax.pow(np.float32(3.0), x), (x,), (t,)),
        (_v(), _v())),
    "vmap_of_atleast_2d": lambda jax, jnp: (jax.vmap(jnp.atleast_2d), (_m(),)),
    # an index mixing slices (and static ints) with integer arrays: one gather
    "index_slice_array": lambda jax, jnp: (lambda x, i: x[1:3, i], (_t(), _i())),
    "index_array_int": lambda jax, jnp: (lambda x, i: x[:, i, 2], (_t(), _i())),
    "index_array_step": lambda jax, jnp: (lambda x, i: x[i, ::2], (_t(), _i())),
    "index_reversed_array": lambda jax, jnp: (lambda x, i: x[::-1, i], (_t(), _i())),
    "index_array_slice_array": lambda jax, jnp: (lambda x, i: x[i, 1:3, i], (_t(), _i())),
    "index_slice_array_none": lambda jax, jnp: (lambda x, i: x[1:, i, None, -1], (_t(), _i())),
    # (issue 25, transposes and JVP rules) as JAX's rules stage them: the transpose of a
    # broadcast_in_dim from size-1 axes re-expands with broadcast_in_dim, squeeze's is
    # expand_dims, slice's a pad with NumPy ints; arctan2 and div differentiate with square
    # and integer_pow; sub's transpose negates before summing down
    "grad_where_size_one": lambda jax, jnp: (
        jax.grad(lambda x, y: jnp.where(x > 1.0, x, y).sum(), argnums=(0, 1)),
        (_col(), _row())),
    "grad_where_scalar_other": lambda jax, jnp: (
        jax.grad(lambda x: jnp.where(x > 1.0, x, 0.0).sum()), (_col(),)),
    "grad_broadcast_to_size_one": lambda jax, jnp: (
        jax.grad(lambda x: jnp.sin(jnp.broadcast_to(x, (2, 1, 3))).sum()),
        (np.ones((1, 3), np.float32),)),
    "grad_slice": lambda jax, jnp: (jax.grad(lambda x: x[1:3].sum()), (np.ones(5, np.float32),)),
    "grad_slice_step": lambda jax, jnp: (
        jax.grad(lambda x: jnp.sin(x[1:, ::2]).sum()), (np.ones((3, 5), np.float32),)),
    "grad_lax_slice_unit_strides": lambda jax, jnp: (
        jax.grad(lambda x: jax.lax.slice(x, (1,), (3,), (1,)).sum()), (np.ones(5, np.float32),)),
    "grad_squeeze": lambda jax, jnp: (
        jax.grad(lambda x: jnp.squeeze(x).sum()), (_col(),)),
    "grad_squeeze_axis": lambda jax, jnp: (
        jax.grad(lambda x: jnp.sin(jnp.squeeze(x, 1)).sum()),
        (np.ones((3, 1, 2, 1), np.float32),)),
    "grad_arctan2": lambda jax, jnp: (
        jax.grad(lambda x, y: jnp.arctan2(x, y).sum(), argnums=(0, 1)), (_v(), _v())),
    "grad_true_divide": lambda jax, jnp: (
        jax.grad(lambda x, y: jnp.true_divide(x, y).sum(), argnums=(0, 1)), (_v(), _v())),
    "grad_mul_sub": lambda jax, jnp: (
        jax.grad(lambda x, y: x * y - y), (np.float32(2.0), np.float32(3.0))),
    "grad_mul_sub_both": lambda jax, jnp: (
        jax.grad(lambda x, y: x * y - y, argnums=(0, 1)), (np.float32(2.0), np.float32(3.0))),
    "grad_mul_sub_size_one": lambda jax, jnp: (
        jax.grad(lambda x, y: (x * y - y).sum(), argnums=(0, 1)), (_col(), _row())),
    # add_any's batcher broadcasts an unbatched operand along the other's batch axis
    "vmap_grad_mul_sub": lambda jax, jnp: (
        jax.vmap(jax.grad(lambda x, y: x * y - y, argnums=(0, 1))), (_v(), _v())),
    # a custom_jvp/custom_vjp under vmap prints the user's rules' names
    "vmap_custom_jvp": lambda jax, jnp: (jax.vmap(jnp.logaddexp), (_m(), _m())),
    "vmap_custom_vjp": lambda jax, jnp: (jax.vmap(_custom_vjp_sin(jax, jnp)), (_m(),)),
    # index arrays normalized in their own dtype, converted to int32 once broadcast
    "index_int16_array_int": lambda jax, jnp: (
        lambda x, i: x[i, 2], (_t(), _i().astype(np.int16))),
    "index_reversed_int8_array": lambda jax, jnp: (
        lambda x, i: x[::-1, i], (_t(), _i().astype(np.int8))),
    # jnp functions written as JAX writes them (issue 25, item 7)
    "floor_divide_int": lambda jax, jnp: (jnp.floor_divide, (_i(), _i()[::-1])),
    "floor_divide_int_size_one": lambda jax, jnp: (
        jnp.floor_divide, (np.ones((3, 1), np.int32), np.ones((1, 4), np.int32))),
    "floor_divide_uint": lambda jax, jnp: (jnp.floor_divide, (_i().astype(np.uint8),) * 2),
    "remainder": lambda jax, jnp: (jnp.remainder, (_v(), _v())),
    "remainder_size_one": lambda jax, jnp: (jnp.remainder, (_col(), _row())),
    "remainder_int": lambda jax, jnp: (jnp.remainder, (_i(), _i()[::-1])),
    "remainder_int_scalar": lambda jax, jnp: (lambda x: jnp.remainder(x, 3), (_i(),)),
    "fmod_int": lambda jax, jnp: (jnp.fmod, (_i(), _i()[::-1])),
    "divmod_int": lambda jax, jnp: (jnp.divmod, (_i(), _i()[::-1])),
    "fmax": lambda jax, jnp: (jnp.fmax, (_v(), _v())),
    "fmax_size_one": lambda jax, jnp: (jnp.fmax, (_col(), _row())),
    "fmax_complex": lambda jax, jnp: (jnp.fmax, (_v().astype(np.complex64),) * 2),
    "fmin": lambda jax, jnp: (jnp.fmin, (_v(), np.float32(2.0))),
    "greater_complex": lambda jax, jnp: (jnp.greater, (_col().astype(np.complex64),
                                                       _row().astype(np.complex64))),
    "less_equal_complex": lambda jax, jnp: (jnp.less_equal, (_v().astype(np.complex64),) * 2),
    "isclose": lambda jax, jnp: (jnp.isclose, (_v(), _v())),
    "isclose_equal_nan": lambda jax, jnp: (
        lambda x, y: jnp.isclose(x, y, rtol=1e-3, equal_nan=True), (_col(), _row())),
    "isclose_complex": lambda jax, jnp: (jnp.isclose, (_v().astype(np.complex64),) * 2),
    "copysign": lambda jax, jnp: (jnp.copysign, (_v(), _v())),
    "copysign_size_one": lambda jax, jnp: (jnp.copysign, (_col(), _row())),
    "signbit_float16": lambda jax, jnp: (jnp.signbit, (_v().astype(np.float16),)),
    # (issue 25) vmap's parameters of JAX's types: reductions' shifted axes are NumPy ints,
    # select_n moves its selector first and broadcasts unbatched operands with NumPy ints,
    # dot_general of two batched operands adds the mapped axes to its batch dimensions
    "vmap_sum_axis": lambda jax, jnp: (jax.vmap(lambda x: jnp.sum(x, axis=0), in_axes=1),
                                       (_m(),)),
    "vmap_max_axis": lambda jax, jnp: (jax.vmap(lambda x: jnp.max(x, axis=1)), (_t(),)),
    "vmap_any": lambda jax, jnp: (jax.vmap(lambda x: jnp.any(x > 0, axis=0), in_axes=1),
                                  (_t(),)),
    "vmap_argmax": lambda jax, jnp: (jax.vmap(lambda x: jnp.argmax(x, axis=0), in_axes=1),
                                     (_t(),)),
    "vmap_mean": lambda jax, jnp: (jax.vmap(lambda x: jnp.mean(x, axis=0), in_axes=2), (_t(),)),
    "vmap_where_unbatched": lambda jax, jnp: (
        jax.vmap(lambda x, y: jnp.where(x > 0, x, y), in_axes=(1, None)), (_m(), _v()[:2])),
    "vmap_triu": lambda jax, jnp: (jax.vmap(jnp.triu, in_axes=1),
                                   (np.ones((3, 2, 3), np.float32),)),
    "vmap_select_batched_alike": lambda jax, jnp: (
        jax.vmap(lambda p, x: jax.lax.select(p, x, -x), in_axes=1),
        (np.ones((2, 3), bool), _m())),
    "vmap_dot_both_batched": lambda jax, jnp: (
        jax.vmap(jnp.dot, in_axes=(1, 0)), (_t(), np.ones((5, 6, 2), np.float32))),
    "vmap_dot_general_batch_dims": lambda jax, jnp: (
        jax.vmap(lambda x, y: jax.lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))),
                 in_axes=(1, 1)),
        (np.ones((2, 4, 2, 3), np.float32), np.ones((2, 4, 3, 5), np.float32))),
    # sort's batcher keeps the batch axis where it is and shifts the sorted dimension past it
    "vmap_sort_in_axis": lambda jax, jnp: (
        jax.vmap(lambda x: jnp.sort(x, axis=0), in_axes=1), (_t(),)),
    "vmap_argsort": lambda jax, jnp: (jax.vmap(jnp.argsort, in_axes=1), (_m(),)),
    # (issue 25) pow of a float base and an integer exponent, and integer_pow's JVP
    "pow_traced_int": lambda jax, jnp: (lambda x, n: x ** n, (_v(), np.int32(3))),
    "power_int_array": lambda jax, jnp: (jnp.power, (_m(), np.array([1, 2, 3], np.int32))),
    "lax_pow_int": lambda jax, jnp: (lambda x, n: jax.lax.pow(x, n), (_v(), np.int32(3))),
    "lax_pow_python_int": lambda jax, jnp: (lambda x: jax.lax.pow(x, 3), (_v(),)),
    "grad_pow_traced_int": lambda jax, jnp: (
        jax.grad(lambda x, n: (x ** n).sum()), (_v(), np.int32(3))),
    "grad_lax_pow_int": lambda jax, jnp: (
        jax.grad(lambda x, n: jax.lax.pow(x, n).sum()), (_m(), np.int32(2))),
    "jvp_pow_traced_int": lambda jax, jnp: (
        lambda x, t, n: jax.jvp(lambda x: x ** n, (x,), (t,)), (_v(), _v(), np.int32(3))),
    "jvp_power_int_row": lambda jax, jnp: (
        lambda x, t, n: jax.jvp(lambda x: jnp.power(x, n), (x,), (t,)),
        (_col(), _col(), np.array([[1, 2, 3, 4]], np.int32))),
    "grad_pow_2": lambda jax, jnp: (jax.grad(lambda x: (x ** 2).sum()), (_v(),)),
    "grad_pow_1": lambda jax, jnp: (jax.grad(lambda x: (x ** 1).sum()), (_v(),)),
    "jvp_pow_3": lambda jax, jnp: (
        lambda x, t: jax.jvp(lambda x: x ** 3, (x,), (t,)), (_v(), _v())),
    "grad_grad_pow_3": lambda jax, jnp: (jax.grad(jax.grad(lambda x: x ** 3)),
                                         (np.float32(2.0),)),
    # cumulative reductions, constant padding and roll: one jit call each, as JAX's jitted
    # functions (cumsum, _pad, _roll_static); the flattening for axis=None inside or outside
    "cumsum": lambda jax, jnp: (jnp.cumsum, (_v(),)),
    "cumsum_axis": lambda jax, jnp: (lambda x: jnp.cumsum(x, axis=1), (_m(),)),
    "cumsum_dtype": lambda jax, jnp: (lambda x: jnp.cumsum(x, dtype=jnp.int32), (_v(),)),
    "cumprod_flat": lambda jax, jnp: (jnp.cumprod, (_m(),)),
    "nancumsum": lambda jax, jnp: (jnp.nancumsum, (_v(),)),
    "grad_of_cumsum": lambda jax, jnp: (jax.grad(lambda x: jnp.cumsum(x).sum()), (_v(),)),
    "pad": lambda jax, jnp: (lambda x: jnp.pad(x, 1), (_v(),)),
    "pad_value": lambda jax, jnp: (
        lambda x: jnp.pad(x, ((0, 1), (2, 0)), constant_values=3.0), (_m(),)),
    "roll": lambda jax, jnp: (lambda x: jnp.roll(x, 1), (_v(),)),
    "roll_axis": lambda jax, jnp: (lambda x: jnp.roll(x, -1, axis=1), (_m(),)),
    "roll_flat": lambda jax, jnp: (lambda x: jnp.roll(x, 2), (_m(),)),
    "vmap_cumsum": lambda jax, jnp: (jax.vmap(jnp.cumsum), (_m(),)),
    "vmap_pad": lambda jax, jnp: (jax.vmap(lambda x: jnp.pad(x, 1)), (_m(),)),
    "vmap_roll": lambda jax, jnp: (jax.vmap(lambda x: jnp.roll(x, 1)), (_m(),)),
}

#: cases staged with ``jax_enable_x64`` on
X64_CASES = {
    "x64_index_array_int": lambda jax, jnp: (lambda x, i: x[i, 2], (_t(), _i())),
    "x64_index_int64_array_int": lambda jax, jnp: (
        lambda x, i: x[i, 2], (_t(), _i().astype(np.int64))),
    "x64_index_int64_array_slice": lambda jax, jnp: (
        lambda x, i: x[1:3, i], (_t(), _i().astype(np.int64))),
    "x64_index_reversed_int64_array": lambda jax, jnp: (
        lambda x, i: x[::-1, i], (_t(), _i().astype(np.int64))),
    "x64_signbit": lambda jax, jnp: (jnp.signbit, (_v().astype(np.float64),)),
}
CASES.update(X64_CASES)


def _custom_vjp_sin(jax, jnp):
    @jax.custom_vjp
    def sin(x):
        return jnp.sin(x)

    def sin_fwd(x):
        return sin(x), jnp.cos(x)

    def sin_bwd(cos_x, g):
        return (g * cos_x,)

    sin.defvjp(sin_fwd, sin_bwd)
    return sin


def jaxpr_text(jax, jnp, name: str) -> str:
    if name in X64_CASES:
        with jax.enable_x64(True):
            fun, args = X64_CASES[name](jax, jnp)
            return str(jax.make_jaxpr(fun)(*args))
    fun, args = CASES[name](jax, jnp)
    return str(jax.make_jaxpr(fun)(*args))


# rank promotion (jnp binary functions, issue 25): operands of one rank reach the primitive
# unbroadcast, size-1 axes included; a lower rank gains leading size-1 axes only
def _col():
    return np.ones((3, 1), np.float32)


def _row():
    return np.ones((1, 4), np.float32)


def _full():
    return np.ones((3, 4), np.float32)


def _vec4():
    return np.ones(4, np.float32)


def _scalar():
    return np.float32(2.0)


_RANK_PROMOTION_SHAPES = {"size_one": (_col, _row), "rank": (_full, _vec4),
                          "scalar": (_scalar, _v)}
_RANK_PROMOTION_FUNCTIONS = {
    "add": lambda jnp: jnp.add, "multiply": lambda jnp: jnp.multiply,
    "maximum": lambda jnp: jnp.maximum, "arctan2": lambda jnp: jnp.arctan2,
    "power": lambda jnp: jnp.power, "less": lambda jnp: jnp.less,
    "greater_equal": lambda jnp: jnp.greater_equal, "not_equal": lambda jnp: jnp.not_equal,
    "true_divide": lambda jnp: jnp.true_divide, "nextafter": lambda jnp: jnp.nextafter,
    "where": lambda jnp: (lambda x, y: jnp.where(x > 1.0, x, y)),
    "operator": lambda jnp: (lambda x, y: x * y - y),
    "logaddexp": lambda jnp: jnp.logaddexp, "hypot": lambda jnp: jnp.hypot,
}


def _rank_promotion_case(function, shapes):
    make_x, make_y = _RANK_PROMOTION_SHAPES[shapes]
    return lambda jax, jnp: (_RANK_PROMOTION_FUNCTIONS[function](jnp), (make_x(), make_y()))


CASES.update({f"rank_promotion_{f}_{s}": _rank_promotion_case(f, s)
              for f in _RANK_PROMOTION_FUNCTIONS for s in _RANK_PROMOTION_SHAPES})
CASES.update({
    "rank_promotion_vmap_size_one": lambda jax, jnp: (
        jax.vmap(jnp.add), (np.ones((5, 3, 1), np.float32), np.ones((5, 1, 4), np.float32))),
    "rank_promotion_grad_size_one": lambda jax, jnp: (
        jax.grad(lambda x, y: jnp.sum(x * y), argnums=(0, 1)), (_col(), _row())),
    "rank_promotion_grad_rank": lambda jax, jnp: (
        jax.grad(lambda x, y: jnp.sum(jnp.multiply(x, y)), argnums=(0, 1)), (_full(), _vec4())),
    "rank_promotion_grad_scalar": lambda jax, jnp: (
        jax.grad(lambda x, y: jnp.sum(x * y)), (_scalar(), _v())),
    "rank_promotion_grad_logaddexp": lambda jax, jnp: (
        jax.grad(lambda x, y: jnp.sum(jnp.logaddexp(x, y)), argnums=(0, 1)), (_col(), _row())),
})

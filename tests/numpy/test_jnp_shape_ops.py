"""Shape manipulation: reshape/transpose/moveaxis, stacking and splitting, tile/repeat, flips and
rolls, diagonals and triangles, take/take_along_axis, pad, broadcasting helpers. Each case is
compared with NumPy (values) and JAX (dtypes, weak types, shapes)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from jnp_testutil import (DTYPES, assert_close, check_avals_like_jax,
                          check_raises_like_jax, jax_fn, rand)

_rng = np.random.default_rng(20)
X = rand(_rng, (2, 3, 4), np.float32)
I8 = rand(_rng, (2, 3), np.int8)
F32 = rand(_rng, (1, 3), np.float32)
V3 = rand(_rng, (3,), np.int8)
M34 = rand(_rng, (3, 4), np.int8)
SQ = rand(_rng, (1, 3, 1), np.float32)

# (name, args, kwargs, NumPy reference or None for np.<name>)
CASES = [
    ("reshape", (X, (6, 4)), {}, None), ("reshape", (X, (-1, 2)), {}, None),
    ("reshape", (X, 24), {}, None), ("reshape", (np.float32(3), (1, 1)), {}, None),
    ("ravel", (X,), {}, None), ("transpose", (X,), {}, None),
    ("transpose", (X, (1, 0, 2)), {}, None), ("transpose", (X, (-1, 0, 1)), {}, None),
    ("permute_dims", (X, (2, 0, 1)), {}, np.transpose),
    ("matrix_transpose", (X,), {}, lambda x: np.swapaxes(x, -1, -2)),
    ("moveaxis", (X, 0, -1), {}, None), ("moveaxis", (X, (0, 1), (2, 0)), {}, None),
    ("swapaxes", (X, 0, 2), {}, None), ("squeeze", (SQ,), {}, None), ("squeeze", (SQ, 2), {}, None),
    ("squeeze", (SQ, (0, -1)), {}, None), ("expand_dims", (X, 1), {}, None),
    ("expand_dims", (X, (0, -1)), {}, None), ("expand_dims", (np.float32(1), 0), {}, None),
    ("atleast_1d", (3.0,), {}, None), ("atleast_1d", (V3, I8), {}, None),
    ("atleast_2d", (V3,), {}, None), ("atleast_2d", (np.int8(2),), {}, None),
    ("atleast_3d", (I8,), {}, None), ("atleast_3d", (V3,), {}, None),
    ("concatenate", ([I8, F32],), {}, None), ("concatenate", ([I8, I8[:, :1]],), {"axis": 1}, None),
    ("concatenate", ([I8, V3],), {"axis": None}, None), ("concat", ([I8, F32],), {}, np.concatenate),
    ("concatenate", ([I8, I8],), {"axis": -1, "dtype": np.float32}, None),
    ("stack", ([I8, I8.astype(np.float32)],), {}, None), ("stack", ([I8, I8],), {"axis": -1}, None),
    ("stack", ([V3, V3, V3],), {"axis": 1}, None),
    ("unstack", (X,), {}, lambda x: tuple(x)), ("unstack", (X,), {"axis": 2},
                                                 lambda x, axis: tuple(np.moveaxis(x, axis, 0))),
    ("hstack", ([V3, V3],), {}, None), ("hstack", ([I8, I8],), {}, None),
    ("vstack", ([V3, V3],), {}, None), ("row_stack", ([V3, V3],), {}, np.vstack),
    ("dstack", ([V3, V3],), {}, None), ("column_stack", ([V3, V3],), {}, None),
    ("column_stack", ([V3, M34[:, :2]],), {}, None),
    ("split", (X, 2, 2), {}, None), ("split", (X, [1, 3], 2), {}, None),
    ("split", (X, [1, 1], 1), {}, None), ("array_split", (X, 3, 2), {}, None),
    ("array_split", (X, 5, 1), {}, None), ("hsplit", (X, 3), {}, None),
    ("vsplit", (X, 2), {}, None), ("dsplit", (X, 2), {}, None), ("hsplit", (V3, 3), {}, None),
    ("broadcast_arrays", (I8[:, :1], F32[0]), {}, None), ("broadcast_to", (V3, (2, 3)), {}, None),
    ("broadcast_to", (np.float32(1), (2, 2)), {}, None),
    ("tile", (I8, 2), {}, None), ("tile", (I8, (2, 1, 3)), {}, None), ("tile", (V3, (0,)), {}, None),
    ("repeat", (I8, 2), {}, None), ("repeat", (I8, 2, 1), {}, None),
    ("repeat", (I8, np.array([1, 0, 2]), 1), {}, None), ("repeat", (I8, 0), {}, None),
    ("repeat", (I8, 3), {"axis": 0, "total_repeat_length": 5},
     lambda x, r, axis, total_repeat_length: np.repeat(x, r, axis)[:total_repeat_length]),
    ("repeat", (V3, np.array([1, 2, 0])), {"total_repeat_length": 5},
     lambda x, r, total_repeat_length: np.concatenate([np.repeat(x, r), np.repeat(x[1:2], 2)])),
    ("flip", (X,), {}, None), ("flip", (X, 1), {}, None), ("flip", (X, (0, 2)), {}, None),
    ("fliplr", (X,), {}, None), ("flipud", (X,), {}, None), ("roll", (X, 2), {}, None),
    ("roll", (X, -1, 1), {}, None), ("roll", (X, (1, 2), (0, 2)), {}, None),
    ("roll", (X, 5, -1), {}, None), ("roll", (X, 7, (0, 1)), {}, None),
    ("rot90", (X,), {}, None), ("rot90", (X, 2), {}, None), ("rot90", (X, 3, (1, 2)), {}, None),
    ("rot90", (X, -1), {}, None),
    ("diagonal", (X,), {}, None), ("diagonal", (X, 1, 1, 2), {}, None),
    ("diagonal", (X, -1, 2, 0), {}, None), ("diagonal", (M34, 5), {}, None),
    ("diag", (V3,), {}, None), ("diag", (V3, 1), {}, None), ("diag", (V3, -2), {}, None),
    ("diag", (M34,), {}, None), ("diag", (M34, -1), {}, None), ("diag", (M34, 2), {}, None),
    ("trace", (X,), {}, None), ("trace", (M34, 1), {}, None),
    ("trace", (M34,), {"dtype": np.float32}, None), ("trace", (X, 0, 2, 1), {}, None),
    ("tril", (X,), {}, None), ("tril", (X, -1), {}, None), ("triu", (X, 1), {}, None),
    ("triu", (M34,), {}, None), ("tril", (M34, 2), {}, None),
    ("append", (I8, F32), {}, None), ("append", (I8, F32, 0), {}, None),
    ("ndim", (X,), {}, None), ("shape", (X,), {}, None), ("size", (X,), {}, None),
    ("size", (X, 1), {}, None), ("ndim", (3.0,), {}, None),
]


def _ids():
    return [f"{c[0]}{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize("name,args,kwargs,ref", CASES, ids=_ids())
def test_shape_op(name, args, kwargs, ref):
    out = getattr(jnp, name)(*args, **kwargs)
    ref = ref or getattr(np, name)
    expected = ref(*args, **kwargs)
    if name in ("ndim", "shape", "size"):
        assert out == expected
        return
    if isinstance(expected, (list, tuple)):
        assert isinstance(out, (list, tuple)) and len(out) == len(expected)
        for o, e in zip(out, expected):
            assert_close(o, e)
    else:
        assert_close(out, expected)
    if name not in ("unstack",) or kwargs:
        check_avals_like_jax(out, jax_fn(name), *args, **kwargs)


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
def test_shape_ops_keep_dtype(dtype):
    x = rand(np.random.default_rng(21), (2, 3), dtype)
    for fn in (lambda a: jnp.reshape(a, (3, 2)), jnp.transpose, lambda a: jnp.flip(a, 0),
               lambda a: jnp.roll(a, 1), lambda a: jnp.tile(a, 2), lambda a: jnp.repeat(a, 2),
               lambda a: jnp.concatenate([a, a]), lambda a: jnp.stack([a, a]), jnp.tril,
               lambda a: jnp.pad(a, 1), lambda a: jnp.take(a, np.array([1, 0]), axis=1),
               jnp.diagonal, lambda a: jnp.rot90(a), jnp.ravel):
        assert fn(x).dtype == dtype
    assert_close(jnp.transpose(x), x.T)


def test_python_scalars_stay_weak_through_shape_ops():
    for name, args in [("reshape", (2.0, (1,))), ("expand_dims", (3, 0)),
                       ("broadcast_to", (1.5, (2,))), ("atleast_1d", (2,)), ("ravel", (1.0,)),
                       ("tile", (2.0, 3)), ("repeat", (2, 2)), ("stack", ([1.0, 2.0],)),
                       ("concatenate", ([np.float32(1) * np.ones(2, np.float32), [3.0]],))]:
        if name == "concatenate":
            continue  # lists are not arrays (tested with the errors)
        out = getattr(jnp, name)(*args)
        check_avals_like_jax(out, jax_fn(name), *args)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap", "empty"])
@pytest.mark.parametrize("pad_width", [1, (1, 2), ((1, 0), (2, 3)), ((0, 0), (3, 0))],
                         ids=["int", "pair", "per-axis", "one-axis"])
def test_pad_modes(mode, pad_width):
    x = rand(np.random.default_rng(22), (3, 4), np.float32)
    out = jnp.pad(x, pad_width, mode=mode)
    expected = np.pad(x, pad_width, mode="constant" if mode == "empty" else mode)
    if mode == "empty":
        assert out.shape == expected.shape
    else:
        assert_close(out, expected)
    check_avals_like_jax(out, jax_fn("pad"), x, pad_width, mode=mode)


def test_pad_constant_values_and_errors():
    x = rand(np.random.default_rng(23), (2, 3), np.int8)
    out = jnp.pad(x, ((1, 0), (2, 3)), constant_values=9)
    assert_close(out, np.pad(x, ((1, 0), (2, 3)), constant_values=9))
    check_avals_like_jax(out, jax_fn("pad"), x, ((1, 0), (2, 3)), constant_values=9)
    big = jnp.pad(x, 5, mode="wrap")  # padding wider than the axis wraps around repeatedly
    assert_close(big, np.pad(x, 5, mode="wrap"))
    assert_close(jnp.pad(x, 4, mode="reflect"), np.pad(x, 4, mode="reflect"))
    err = check_raises_like_jax(lambda: jnp.pad(x, -1), jax_fn("pad"), x, -1)
    assert "negative" in str(err)
    with pytest.raises(NotImplementedError, match="median"):
        jnp.pad(x, 1, mode="median")


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "bool", "complex64"])
def test_take_modes_and_fill(dtype):
    x = rand(np.random.default_rng(24), (2, 3, 4), DTYPES[dtype])
    idx = np.array([0, 2, -1, 5, -7])
    out = jnp.take(x, idx, axis=2)
    n = x.shape[2]
    valid = (idx >= -n) & (idx < n)
    expected = np.take(x, np.where(valid, idx, 0), axis=2)
    fill = {"f": np.nan, "c": np.nan, "i": np.iinfo(np.int32).min, "u": np.iinfo(np.uint8).max,
            "b": True}[DTYPES[dtype].kind]
    expected = np.where(valid, expected, np.asarray(fill).astype(x.dtype))
    assert_close(out, expected)
    check_avals_like_jax(out, jax_fn("take"), x, idx, axis=2)
    assert_close(jnp.take(x, idx, axis=2, mode="clip"), np.take(x, idx, axis=2, mode="clip"))
    assert_close(jnp.take(x, idx, axis=2, mode="wrap"), np.take(x, idx, axis=2, mode="wrap"))
    out = jnp.take(x, idx, axis=2, fill_value=1)
    assert_close(out, np.where(valid, np.take(x, np.where(valid, idx, 0), axis=2),
                               np.ones((), x.dtype)))
    # flattened, scalar and multi-dimensional indices
    assert_close(jnp.take(x, 7), np.take(x, 7))
    idx2 = np.array([[0, 1], [3, 2]])
    assert_close(jnp.take(x, idx2, axis=1, mode="clip"), np.take(x, idx2, axis=1, mode="clip"))
    assert_close(jnp.take(x, np.array([], np.int32), axis=0), np.take(x, [], axis=0))


def test_take_raise_mode_and_bad_indices():
    x = np.arange(5.0, dtype=np.float32)
    with pytest.raises(NotImplementedError, match="raise"):
        jnp.take(x, np.array([1]), mode="raise")
    check_raises_like_jax(lambda: jnp.take(x, np.array([1.0])), jax_fn("take"), x,
                          np.array([1.0]))
    with pytest.raises(ValueError, match="mode"):
        jnp.take(x, np.array([1]), mode="nearest")


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_take_along_axis(axis):
    rng = np.random.default_rng(25)
    x = rand(rng, (3, 4, 5), np.float32)
    if axis is None:
        idx = rng.integers(0, x.size, (7,))
    else:
        shape = list(x.shape)
        shape[axis] = 6
        idx = rng.integers(-x.shape[axis], x.shape[axis], shape)
    out = jnp.take_along_axis(x, idx, axis)
    assert_close(out, np.take_along_axis(x, idx, axis))
    check_avals_like_jax(out, jax_fn("take_along_axis"), x, idx, axis)
    # argsort round trip, and broadcasting of size-1 index axes
    order = np.argsort(x, axis=-1)
    assert_close(jnp.take_along_axis(x, order, -1), np.sort(x, -1))
    idx1 = np.zeros((3, 1, 5), np.int32)
    assert_close(jnp.take_along_axis(x, idx1, 1), np.take_along_axis(x, idx1, 1))


def test_take_along_axis_out_of_bounds_fills():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    idx = np.array([[0, 9], [-1, -9], [3, 2]])
    out = jnp.take_along_axis(x, idx, 1)
    valid = (idx >= -4) & (idx < 4)
    ref = np.where(valid, np.take_along_axis(x, np.where(valid, idx, 0), 1), np.nan)
    assert_close(out, ref)
    assert_close(jnp.take_along_axis(x, idx, 1, mode="clip"),
                 np.take_along_axis(x, np.clip(np.where(idx < 0, idx + 4, idx), 0, 3), 1))
    check_raises_like_jax(lambda: jnp.take_along_axis(x, idx[0], 1), jax_fn("take_along_axis"),
                          x, idx[0], 1)


def test_repeat_with_traced_counts_needs_total_length():
    x = np.array([1, 2, 3], np.int32)
    reps = np.array([2, 0, 3], np.int32)
    out = plax.jit(lambda r: jnp.repeat(x, r, total_repeat_length=5))(reps)
    assert_close(out, np.repeat(x, reps))
    out = plax.jit(lambda r: jnp.repeat(x, r, total_repeat_length=7))(reps)
    assert_close(out, np.concatenate([np.repeat(x, reps), [3, 3]]))
    with pytest.raises(plax.errors.ConcretizationTypeError, match="total_repeat_length"):
        plax.jit(lambda r: jnp.repeat(x, r))(reps)
    with pytest.raises(ValueError, match="length 3"):
        jnp.repeat(x, np.array([1, 2]))


def test_split_errors():
    x = np.arange(6)
    err = check_raises_like_jax(lambda: jnp.split(x, 4), jax_fn("split"), x, 4)
    assert "equal division" in str(err)
    assert_close(jnp.array_split(x, 4)[0], np.array_split(x, 4)[0])


def test_diag_and_trace_of_empty_and_offsets():
    m = rand(np.random.default_rng(26), (3, 4), np.float32)
    for k in range(-4, 6):
        assert_close(jnp.diagonal(m, k), np.diagonal(m, k))
        assert_close(jnp.trace(m, k), np.trace(m, k).astype(np.float32), dtype=np.float32)
        assert_close(jnp.diag(m, k), np.diag(m, k))
    v = np.array([1.0, 2.0], np.float32)
    for k in (-3, 0, 2):
        assert_close(jnp.diag(v, k), np.diag(v, k))
    with pytest.raises(ValueError, match="1d or 2d"):
        jnp.diag(np.zeros((2, 2, 2)))


def test_roll_without_axis_and_empty():
    x = np.arange(12).reshape(3, 4)
    for shift in (-13, -1, 0, 5):
        assert_close(jnp.roll(x, shift), np.roll(x, shift))
    e = np.zeros((0, 3))
    assert_close(jnp.roll(e, 2, 0), np.roll(e, 2, 0))


def test_reshape_method_forms_and_order():
    x = jnp.arange(6)
    assert x.reshape(2, 3).shape == (2, 3)
    assert x.reshape((3, 2)).shape == (3, 2)
    assert x.reshape(-1).shape == (6,)
    assert jnp.reshape(x, newshape=(2, 3)).shape == (2, 3) if _newshape_ok() else True
    with pytest.raises(NotImplementedError, match="order"):
        jnp.reshape(x, (2, 3), order="F")


def _newshape_ok():
    import inspect
    return "newshape" in inspect.signature(jnp.reshape).parameters


def test_broadcast_shapes():
    assert jnp.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert jnp.broadcast_shapes((), (0, 4)) == (0, 4)
    err = check_raises_like_jax(lambda: jnp.broadcast_shapes((2, 3), (4,)),
                                jax_fn("broadcast_shapes"), (2, 3), (4,))
    assert "(2, 3)" in str(err) and "(4,)" in str(err)

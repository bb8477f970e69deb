"""The Array class: immutability, conversions, protocols, operators, methods and printing.

Values are checked against NumPy (float64 reference, then cast); dtypes, weak
types and printed forms against real JAX when it is importable.
"""
from __future__ import annotations

import copy
import operator
import pickle

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import dtypes
from doctest_util import NumericOutputChecker


def _jax():
    return pytest.importorskip("jax")


def _jnp():
    _jax()
    import jax.numpy as real_jnp
    return real_jnp


def _as_np(x):
    return np.asarray(x)


# ------------------------------------------------------------------ construction / metadata

def test_array_cannot_be_constructed_directly():
    with pytest.raises(TypeError, match="jnp.array|device_put"):
        plax.Array(np.ones(3))


def test_metadata_properties():
    host = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    x = jnp.asarray(host)
    assert x.shape == host.shape
    assert x.dtype == host.dtype
    assert x.ndim == host.ndim
    assert x.size == host.size
    assert x.itemsize == host.itemsize
    assert x.nbytes == host.nbytes
    np.testing.assert_array_equal(_as_np(x.T), host.T)
    np.testing.assert_array_equal(_as_np(x.mT), np.swapaxes(host, -1, -2))
    assert x.aval.shape == host.shape and x.aval.dtype == host.dtype and not x.weak_type


def test_array_carries_device_and_aval():
    x = jnp.ones(3)
    dev = plax.devices()[0]
    assert x.device == dev
    assert x.devices() == {dev}
    assert x.sharding.device_set == {dev}
    assert x.block_until_ready() is x
    assert isinstance(x.aval, plax.core.ShapedArray)


# ------------------------------------------------------------------ immutability

def test_item_assignment_raises_type_error_naming_at():
    x = jnp.zeros(3)
    with pytest.raises(TypeError, match=r"\.at\[") as info:
        x[0] = 1.0
    assert "immutable" in str(info.value)
    np.testing.assert_array_equal(_as_np(x), np.zeros(3))


def test_hash_raises_type_error():
    with pytest.raises(TypeError, match="unhashable"):
        hash(jnp.ones(2))
    with pytest.raises(TypeError, match="unhashable"):
        {jnp.ones(()): 1}


def test_array_protocol_returns_read_only_view():
    x = jnp.arange(4.0)
    view = np.asarray(x)
    assert not view.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 10.0
    np.testing.assert_array_equal(_as_np(x), [0.0, 1.0, 2.0, 3.0])


def test_array_protocol_dtype_and_copy():
    x = jnp.arange(3)
    as_float = np.asarray(x, dtype=np.float64)
    assert as_float.dtype == np.float64
    np.testing.assert_array_equal(as_float, [0.0, 1.0, 2.0])
    owned = np.array(x, copy=True)
    owned[0] = 7  # a copy is the caller's to change
    np.testing.assert_array_equal(_as_np(x), [0, 1, 2])
    with pytest.raises(ValueError, match="copy"):
        x.__array__(np.float64, copy=False)


def test_device_get_returns_writable_copy():
    x = jnp.arange(3.0)
    host = plax.device_get(x)
    assert isinstance(host, np.ndarray) and host.flags.writeable
    host[0] = 5.0
    assert float(x[0]) == 0.0


# ------------------------------------------------------------------ protocols

def test_dlpack_round_trip_through_numpy_and_plax():
    x = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    host = np.from_dlpack(x)
    np.testing.assert_array_equal(host, np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(ValueError, match="read-only"):  # a view, read-only as JAX's
        host[0, 0] = 100.0
    assert float(x[0, 0]) == 0.0
    back = jnp.from_dlpack(np.arange(4, dtype=np.int16))
    assert isinstance(back, plax.Array) and back.dtype == np.int16
    np.testing.assert_array_equal(_as_np(back), np.arange(4))
    again = jnp.from_dlpack(x)
    assert again.dtype == x.dtype and again.shape == x.shape
    np.testing.assert_array_equal(_as_np(again), _as_np(x))
    assert x.__dlpack_device__()[0] == 1  # kDLCPU


def test_array_namespace_is_plax_numpy():
    x = jnp.ones(2)
    xp = x.__array_namespace__()
    assert xp is jnp
    np.testing.assert_allclose(_as_np(xp.sin(x)), np.sin(np.ones(2)))


@pytest.mark.parametrize("value", [np.arange(6.0).reshape(2, 3), np.array(3, np.int8),
                                   np.array([True, False])])
def test_pickle_round_trip(value):
    x = jnp.asarray(value)
    y = pickle.loads(pickle.dumps(x))
    assert isinstance(y, plax.Array)
    assert y.dtype == x.dtype and y.shape == x.shape and y.weak_type == x.weak_type
    np.testing.assert_array_equal(_as_np(y), _as_np(x))


def test_pickle_keeps_weak_type():
    x = jnp.asarray(1.5) + 1.0
    assert x.weak_type
    y = pickle.loads(pickle.dumps(x))
    assert y.weak_type and y.dtype == x.dtype


def test_copy_and_deepcopy_give_equal_arrays():
    x = jnp.arange(3)
    for y in (copy.copy(x), copy.deepcopy(x)):
        assert isinstance(y, plax.Array)
        np.testing.assert_array_equal(_as_np(y), _as_np(x))


# ------------------------------------------------------------------ Python conversions

def test_len_iter_bool_float_int_index_complex():
    x = jnp.array([1.5, 2.5, 3.5])
    assert len(x) == 3
    items = list(x)
    assert all(isinstance(i, plax.Array) and i.shape == () for i in items)
    assert [float(i) for i in items] == [1.5, 2.5, 3.5]
    assert bool(jnp.array(1.0)) is True and bool(jnp.array(0)) is False
    assert float(jnp.array(2.5)) == 2.5
    assert int(jnp.array(2.7)) == 2
    assert complex(jnp.array(1 + 2j)) == 1 + 2j
    assert [10, 20, 30][jnp.array(2)] == 30
    assert operator.index(jnp.array(4, dtype=jnp.uint8)) == 4
    assert jnp.array(3.0).item() == 3.0 and isinstance(jnp.array(3.0).item(), float)
    assert jnp.arange(4).reshape(2, 2).tolist() == [[0, 1], [2, 3]]
    assert f"{jnp.array(2.5):.3f}" == "2.500"


@pytest.mark.parametrize("fn,exc,pattern", [
    (len, TypeError, "unsized"),
    (iter, TypeError, "0-d"),
])
def test_unsized_protocols_raise(fn, exc, pattern):
    with pytest.raises(exc, match=pattern):
        fn(jnp.array(1.0))


def test_bool_of_many_elements_raises_value_error():
    with pytest.raises(ValueError, match="ambiguous"):
        bool(jnp.ones(3))


@pytest.mark.parametrize("conv", [float, int, complex])
def test_scalar_conversion_of_non_scalar_raises(conv):
    with pytest.raises(TypeError, match="scalar"):
        conv(jnp.ones(3))
    with pytest.raises(TypeError, match="scalar"):
        conv(jnp.ones((1, 1)))  # JAX accepts only rank-0 arrays here


@pytest.mark.parametrize("bad", [jnp.array(1.0), jnp.array([1])])
def test_index_of_non_integer_scalar_raises(bad):
    with pytest.raises(TypeError, match="integer scalar"):
        operator.index(bad)


def test_iterating_empty_leading_axis():
    assert list(jnp.zeros((0, 2))) == []


# ------------------------------------------------------------------ operators

_BINARY_OPS = [
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
    operator.pow, operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
]
_BITWISE_OPS = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift]


def _check_close(got, want, dtype):
    assert isinstance(got, plax.Array), type(got)
    assert got.dtype == dtype, (got.dtype, dtype)
    np.testing.assert_allclose(_as_np(got).astype(np.float64), np.asarray(want, np.float64),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", _BINARY_OPS, ids=lambda op: op.__name__)
def test_arithmetic_and_comparison_operators(op):
    a = np.array([1.5, 2.0, 3.25], np.float32)
    b = np.array([0.5, 4.0, 2.0], np.float32)
    want = op(a.astype(np.float64), b.astype(np.float64))
    dt = np.dtype(bool) if want.dtype == bool else np.dtype(np.float32)
    _check_close(op(jnp.asarray(a), jnp.asarray(b)), want, dt)
    # reflected: Python scalar on the left, NumPy array on the left
    _check_close(op(2.0, jnp.asarray(b)), op(2.0, b.astype(np.float64)), dt)
    _check_close(op(jnp.asarray(a), 2.0), op(a.astype(np.float64), 2.0), dt)
    _check_close(op(a, jnp.asarray(b)), want, dt)
    _check_close(op(jnp.asarray(a), b), want, dt)


@pytest.mark.parametrize("op", _BITWISE_OPS, ids=lambda op: op.__name__)
def test_bitwise_operators(op):
    a = np.array([1, 6, 12], np.int32)
    b = np.array([3, 1, 2], np.int32)
    for got, want in [(op(jnp.asarray(a), jnp.asarray(b)), op(a, b)),
                      (op(jnp.asarray(a), 1), op(a, 1)),
                      (op(5, jnp.asarray(b)), op(5, b)),
                      (op(a, jnp.asarray(b)), op(a, b))]:
        assert isinstance(got, plax.Array) and got.dtype == np.int32
        np.testing.assert_array_equal(_as_np(got), want)


def test_bool_bitwise_operators():
    a, b = np.array([True, False, True]), np.array([True, True, False])
    for op in (operator.and_, operator.or_, operator.xor):
        got = op(jnp.asarray(a), jnp.asarray(b))
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(_as_np(got), op(a, b))
    np.testing.assert_array_equal(_as_np(~jnp.asarray(a)), ~a)


def test_unary_operators_and_divmod_matmul():
    a = np.array([-1.5, 0.0, 2.0], np.float32)
    x = jnp.asarray(a)
    _check_close(-x, -a, np.float32)
    _check_close(+x, a, np.float32)
    _check_close(abs(x), np.abs(a), np.float32)
    np.testing.assert_array_equal(_as_np(~jnp.asarray(np.array([0, 5], np.int8))),
                                  ~np.array([0, 5], np.int8))
    q, r = divmod(jnp.asarray(np.array([7, -7], np.int32)), 3)
    np.testing.assert_array_equal(_as_np(q), [2, -3])
    np.testing.assert_array_equal(_as_np(r), [1, 2])
    q, r = divmod(7, jnp.asarray(np.array([2, -3], np.int32)))
    np.testing.assert_array_equal(_as_np(q), np.floor_divide(7, [2, -3]))
    np.testing.assert_array_equal(_as_np(r), np.remainder(7, [2, -3]))
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    _check_close(jnp.asarray(m) @ jnp.asarray(m.T), m @ m.T, np.float32)
    _check_close(m @ jnp.asarray(m.T), m @ m.T, np.float32)
    _check_close(jnp.asarray(m) @ m.T, m @ m.T, np.float32)
    assert round(jnp.array(2.6)) is not None
    _check_close(round(jnp.array(2.6)), 3.0, np.float32)


def test_numpy_array_on_the_left_gives_plax_array():
    # NumPy defers to Array (which has a high __array_priority__ and no __array_ufunc__), so
    # the result is a plax Array with JAX's promotion: float32 stays float32 with float64 NumPy.
    x = jnp.ones(3)
    for out in (np.ones(3) + x, np.ones(3) * x, np.ones(3) < x, np.float64(2.0) * x,
                np.ones(3, np.float32) - x):
        assert isinstance(out, plax.Array), type(out)
    assert (np.ones(3) + x).dtype == np.float32
    # NumPy ufuncs called directly convert the Array and return NumPy arrays, as with JAX.
    assert isinstance(np.sin(x), np.ndarray)


def test_operator_with_unknown_type_returns_not_implemented():
    class Other:
        def __radd__(self, other):
            return "other.__radd__"

    assert jnp.ones(2) + Other() == "other.__radd__"
    with pytest.raises(TypeError):
        jnp.ones(2) + "a string"


def test_operators_match_jax_dtypes_and_weak_types():
    real_jnp = _jnp()
    cases = [
        lambda m: m.array([1, 2]) + 1.5,
        lambda m: m.asarray(1) + 1,
        lambda m: m.asarray(2.0) * 3,
        lambda m: m.array([1, 2], dtype=m.uint8) + 300 - 300,
        lambda m: m.array([1, 2], dtype=m.int8) * 2,
        lambda m: m.array([1.0], dtype=m.bfloat16) + 1.0,
        lambda m: m.array([1.0], dtype=m.float16) + m.array([1], dtype=m.int8),
        lambda m: 2 ** m.arange(3),
        lambda m: m.arange(3) / 2,
        lambda m: m.arange(3) // 2,
        lambda m: m.arange(3.0) > 1,
        lambda m: m.array([True, False]) + True,
        lambda m: 1j * m.ones(2),
        lambda m: -m.asarray(1.0),
    ]
    for case in cases:
        assert repr(case(jnp)) == repr(case(real_jnp))


# ------------------------------------------------------------------ indexing

_INDICES = [
    0, -1, slice(1, None), slice(None, None, -2), (0, 1), (Ellipsis, 0), (None, 0), (0, None),
    (slice(None), None, 1), Ellipsis, (), np.array([0, 1, 1]), (np.array([0, 1]), 1),
    (np.array([[0], [1]]), np.array([0, 2])), (slice(None), np.array([2, 0])),
    (1, Ellipsis, None), np.array([True, False]), (np.int32(1), slice(0, 2)),
]


@pytest.mark.parametrize("idx", _INDICES, ids=repr)
def test_getitem_matches_numpy(idx):
    host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = jnp.asarray(host)[idx]
    want = host[idx]
    assert isinstance(got, plax.Array)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(_as_np(got), want)


def test_getitem_with_array_indices():
    host = np.arange(10, dtype=np.int32) * 3
    x = jnp.asarray(host)
    np.testing.assert_array_equal(_as_np(x[jnp.array([1, 3, 5])]), host[[1, 3, 5]])
    assert int(x[jnp.array(4)]) == host[4]


def test_getitem_out_of_bounds_matches_jax():
    real_jnp = _jnp()  # JAX clamps out-of-bounds gather indices rather than raising
    for idx in (5, -7, np.array([0, 9])):
        assert repr(jnp.arange(3)[idx]) == repr(real_jnp.arange(3)[idx])


@pytest.mark.parametrize("method,values,np_fn", [
    ("set", 9.0, lambda a, i, v: a.__setitem__(i, v)),
    ("add", 2.0, lambda a, i, v: np.add.at(a, i, v)),
    ("multiply", 3.0, lambda a, i, v: np.multiply.at(a, i, v)),
    ("divide", 2.0, lambda a, i, v: np.divide.at(a, i, v)),
    ("power", 2.0, lambda a, i, v: np.power.at(a, i, v)),
    ("min", 1.5, lambda a, i, v: np.minimum.at(a, i, v)),
    ("max", 4.5, lambda a, i, v: np.maximum.at(a, i, v)),
])
@pytest.mark.parametrize("idx", [1, (slice(None), 2), np.array([0, 2, 2]) % 2, (Ellipsis, 0)],
                         ids=repr)
def test_at_methods_match_numpy(method, values, np_fn, idx):
    host = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    x = jnp.asarray(host)
    got = getattr(x.at[idx], method)(values)
    want = host.astype(np.float64)
    np_fn(want, idx, values)
    assert isinstance(got, plax.Array) and got.dtype == np.float32 and got.shape == host.shape
    np.testing.assert_allclose(_as_np(got), want, rtol=1e-6)
    np.testing.assert_array_equal(_as_np(x), host)  # the original is untouched


def test_at_get():
    host = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    x = jnp.asarray(host)
    np.testing.assert_array_equal(_as_np(x.at[1, ::-1].get()), host[1, ::-1])
    np.testing.assert_array_equal(_as_np(x.at[np.array([1, 0])].get()), host[[1, 0]])


# ------------------------------------------------------------------ methods

_METHOD_CASES = [
    ("astype", (np.int32,), {}),
    ("reshape", (3, 2), {}),
    ("reshape", ((6,),), {}),
    ("transpose", (), {}),
    ("transpose", ((1, 0),), {}),
    ("sum", (), {}), ("sum", (), {"axis": 0}),
    ("mean", (), {"axis": 1}),
    ("max", (), {}), ("min", (), {"axis": 0}),
    ("prod", (), {}),
    ("argmax", (), {}), ("argmin", (), {"axis": 1}),
    ("std", (), {}), ("var", (), {"axis": 0}),
    ("any", (), {}), ("all", (), {}),
    ("clip", (1.0, 3.0), {}),
    ("round", (), {}),
    ("flatten", (), {}), ("ravel", (), {}),
    ("squeeze", (), {}),
    ("cumsum", (), {"axis": 1}),
]


@pytest.mark.parametrize("name,args,kwargs", _METHOD_CASES,
                         ids=[f"{c[0]}{c[1]}{c[2]}" for c in _METHOD_CASES])
def test_methods_match_numpy(name, args, kwargs):
    host = np.array([[0.5, 2.0, 3.5], [-1.0, 4.25, 0.0]], np.float32)
    got = getattr(jnp.asarray(host), name)(*args, **kwargs)
    want = getattr(host.astype(np.float64), name)(*args, **kwargs)
    assert isinstance(got, plax.Array)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(_as_np(got).astype(np.float64), want, rtol=1e-6, atol=1e-6)


def test_methods_dtypes_match_jax():
    real_jnp = _jnp()
    host = np.array([[0.5, 2.0, 3.5], [-1.0, 4.25, 0.0]], np.float32)
    for name, args, kwargs in _METHOD_CASES + [("item", (1,), {}), ("dot", (host.T,), {})]:
        got = getattr(jnp.asarray(host), name)(*args, **kwargs)
        want = getattr(real_jnp.asarray(host), name)(*args, **kwargs)
        if name == "item":
            assert got == want and type(got) is type(want)
        else:
            # reductions (std, var, mean) may differ from XLA's in the last digit: the
            # summation order is not specified, so printed floats are compared to a few ulps
            assert NumericOutputChecker().check_output(repr(want), repr(got), 0), name


def test_dot_method_and_item():
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(_as_np(jnp.asarray(a).dot(jnp.asarray(a.T))), a @ a.T)
    assert jnp.asarray(a).item(4) == 4.0
    with pytest.raises(ValueError):
        jnp.ones(3).item()


# ------------------------------------------------------------------ printing

def _repr_cases(m):
    return [
        m.array([1.0, 2.0, 3.0]),
        m.array(3.0),
        m.array(1.0) + 1,
        m.asarray(2) * 1,
        m.array([1, 2]) + 1.5,
        m.array([True, False]),
        m.array(True),
        m.arange(10),
        m.array([[1, 2], [3, 4]], dtype=m.uint8),
        m.array([-5, 7], dtype=m.int8),
        m.array([1 + 2j, 3j]),
        m.array([1.5, 2.25], dtype=m.bfloat16),
        m.array(0.1, dtype=m.bfloat16),
        m.array([0.1, 65000.0], dtype=m.float16),
        m.ones((3, 4)),
        m.ones((0,)),
        m.ones((0, 3)),
        m.zeros((2, 0), dtype=m.int32),
        m.arange(100.0).reshape(10, 10),
        m.arange(24).reshape(2, 3, 4),
        m.arange(1000.0),
        m.arange(2000),
        m.array([1e10, 1e-5]),
        m.array([np.nan, np.inf, -np.inf]),
        m.array([0.1, 0.25, 1 / 3]),
        m.arange(30.0).reshape(2, 15) * 0.125 + 1e3,
    ]


def test_repr_and_str_match_jax():
    real_jnp = _jnp()
    for ours, theirs in zip(_repr_cases(jnp), _repr_cases(real_jnp), strict=True):
        assert repr(ours) == repr(theirs)
        assert str(ours) == str(theirs)


def test_repr_format_without_jax():
    assert repr(jnp.array([1.0, 2.0])) == "Array([1., 2.], dtype=float32)"
    assert repr(jnp.array(1.0) + 1) == "Array(2., dtype=float32, weak_type=True)"
    assert repr(jnp.zeros((0, 3))) == "Array([], shape=(0, 3), dtype=float32)"
    assert str(jnp.array([1, 2])) == "[1 2]"
    two_d = repr(jnp.arange(4).reshape(2, 2))
    assert two_d == "Array([[0, 1],\n       [2, 3]], dtype=int32)"


# ------------------------------------------------------------------ dtypes of creation

@pytest.mark.parametrize("dt", [d for d in dtypes.supported_dtypes if d.itemsize < 8],
                         ids=str)
def test_each_dtype_round_trips(dt):
    host = np.array([0, 1, 2]).astype(dt)
    x = jnp.asarray(host)
    assert x.dtype == dt
    np.testing.assert_array_equal(_as_np(x), host)
    assert np.asarray(x).dtype == dt


# ------------------------------------------------------------------ eager fast paths

@pytest.mark.parametrize("value", [2.0, -0.0, 0.0, float("nan"), float("inf"), 3, -7, 0])
def test_python_scalar_operands_match_numpy(value):
    # Python scalars absorbed by an array take a cached fast path; it must not change results
    # (signed zeros, nan, ints converted to the array's dtype).
    host = np.array([-1.5, 0.0, 2.0], np.float32)
    x = jnp.asarray(host)
    v = np.float32(value)
    with np.errstate(all="ignore"):
        cases = [(lambda: x * value, host * v), (lambda: value - x, v - host),
                 (lambda: x / value, host / v), (lambda: value + x, v + host)]
    for _ in range(2):  # the second round hits the cache
        for make, want in cases:
            got = make()
            assert got.dtype == np.float32 and not got.weak_type
            np.testing.assert_array_equal(np.asarray(got), want)
            np.testing.assert_array_equal(np.signbit(np.asarray(got)), np.signbit(want))


def test_scalar_operand_follows_committed_device():
    d = plax.devices()[0]
    x = plax.device_put(jnp.arange(3.0), d)
    y = x * 2.0
    assert y.committed and y.device == d
    np.testing.assert_array_equal(np.asarray(y), [0.0, 2.0, 4.0])


def test_int_array_with_python_scalars():
    x = jnp.asarray(np.array([1, 2, 3], np.int16))
    assert (x + 1).dtype == np.int16 and (x * 2.5).dtype == np.float32
    assert (x + 1).weak_type is False and (x * 2.5).weak_type is True  # as in JAX
    np.testing.assert_array_equal(np.asarray(x * 40000), np.array([1, 2, 3], np.int16) * np.int16(
        np.array(40000).astype(np.int16)))

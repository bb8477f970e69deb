"""The ufunc objects (``jnp.add`` ... and ``jnp.frompyfunc``): ``reduce``, ``accumulate``,
``at``, ``reduceat`` and ``outer`` against NumPy's ufunc methods (float64/int64 references),
the fast built-in paths against the generic loops, jit against eager, grad against finite
differences, vmap against a Python loop, and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp

# JAX 0.10's ufunc objects and NumPy's identities for them
BINARY = ("add", "subtract", "multiply", "maximum", "minimum", "bitwise_and", "bitwise_or",
          "bitwise_xor", "logical_and", "logical_or", "logical_xor", "logaddexp", "logaddexp2")
INTEGER_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor"}
REORDERABLE = set(BINARY) - {"subtract"}

RNG = np.random.default_rng(0)
INTS = RNG.integers(-3, 4, (3, 5)).astype(np.int32)
FLOATS = RNG.standard_normal((3, 5)).astype(np.float32)


def _numpy_ufunc(name):
    return getattr(np, name)


def _operand(name):
    return INTS if name in INTEGER_ONLY or name.startswith("logical") else FLOATS


def _close(actual, expected, dtype=None):
    actual = np.asarray(actual)
    if dtype is not None:
        assert actual.dtype == dtype
    expected = np.asarray(expected)
    if actual.dtype.kind in "fc":
        np.testing.assert_allclose(actual, expected.astype(actual.dtype), rtol=2e-6, atol=2e-6)
    else:
        np.testing.assert_array_equal(actual, expected.astype(actual.dtype))


def test_the_builtin_ufuncs_are_ufunc_objects_with_numpys_identities():
    for name in BINARY + ("negative",):
        uf = getattr(jnp, name)
        assert isinstance(uf, jnp.ufunc), name
        assert repr(uf) == f"<jnp.ufunc '{name}'>"
        ref = _numpy_ufunc(name)
        assert (uf.nin, uf.nout, uf.nargs) == (ref.nin, ref.nout, ref.nin), name
        identity = ref.identity if name not in ("bitwise_and",) else -1
        assert uf.identity == identity or (uf.identity is None and identity is None), name
    assert jnp.add == jnp.add and hash(jnp.add) == hash(jnp.add) and jnp.add != jnp.subtract


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_reduce_against_numpy(name, axis):
    uf, ref, x = getattr(jnp, name), _numpy_ufunc(name), _operand(name)
    wide = x.astype(np.int64 if x.dtype.kind == "i" else np.float64)
    if axis is None and name not in REORDERABLE:
        # NumPy refuses; JAX folds the raveled array, in C order
        expected, kept_shape = ref.reduce(wide.ravel()), (1, 1)
    else:
        expected = ref.reduce(wide, axis=axis)
        kept_shape = ref.reduce(wide, axis=axis, keepdims=True).shape
    _close(uf.reduce(x, axis=axis), expected)
    assert uf.reduce(x, axis=axis, keepdims=True).shape == kept_shape
    _close(plax.jit(lambda a: uf.reduce(a, axis=axis))(x), expected)


@pytest.mark.parametrize("name", sorted(REORDERABLE))
def test_reduce_over_several_axes_of_a_reorderable_ufunc(name):
    uf, ref, x = getattr(jnp, name), _numpy_ufunc(name), _operand(name)
    x3 = np.stack([x, x[::-1]], 1)
    wide = x3.astype(np.int64 if x3.dtype.kind == "i" else np.float64)
    _close(uf.reduce(x3, axis=(0, 2)), ref.reduce(wide, axis=(0, 2)))
    assert uf.reduce(x3, axis=(0, 2), keepdims=True).shape == (1, 2, 1)


@pytest.mark.parametrize("name", ["add", "subtract", "maximum", "logaddexp", "bitwise_or",
                                  "logical_xor"])
def test_reduce_initial_and_where(name):
    uf, ref, x = getattr(jnp, name), _numpy_ufunc(name), _operand(name)
    wide = x.astype(np.int64 if x.dtype.kind == "i" else np.float64)
    mask = RNG.random(x.shape) < 0.6
    initial = 1 if x.dtype.kind == "i" else 0.5
    expected = ref.reduce(wide, axis=1, initial=initial, where=mask)
    _close(uf.reduce(x, axis=1, initial=initial, where=mask), expected)
    _close(uf.reduce(x, axis=0, initial=initial), ref.reduce(wide, axis=0, initial=initial))


def test_reduce_dtype_and_result_types_follow_jax():
    i8 = INTS.astype(np.int8)
    assert jnp.add.reduce(i8).dtype == jnp.sum(i8, axis=0).dtype == np.int32
    assert jnp.subtract.reduce(i8).dtype == np.int8
    _close(jnp.subtract.reduce(i8, dtype=np.float32), np.subtract.reduce(i8.astype(np.float64)),
           np.float32)
    _close(jnp.maximum.reduce(i8, dtype=np.float32), i8.max(0), np.float32)
    assert jnp.logical_and.reduce(INTS, axis=1).dtype == np.bool_


def test_subtract_reduce_and_accumulate_fold_left_to_right():
    x = np.array([10., 1., 2., 3.], np.float32)
    _close(jnp.subtract.reduce(x), 10 - 1 - 2 - 3)
    _close(jnp.subtract.accumulate(x), [10, 9, 7, 4])
    _close(jnp.subtract.reduce(x, initial=20.), 20 - 10 - 1 - 2 - 3)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("axis", [0, 1])
def test_accumulate_against_numpy(name, axis):
    uf, ref, x = getattr(jnp, name), _numpy_ufunc(name), _operand(name)
    wide = x.astype(np.int64 if x.dtype.kind == "i" else np.float64)
    result = uf.accumulate(x, axis=axis)
    assert result.shape == x.shape
    _close(result, ref.accumulate(wide, axis=axis))
    _close(plax.jit(lambda a: uf.accumulate(a, axis=axis))(x), ref.accumulate(wide, axis=axis))


def test_accumulate_keeps_small_integer_dtypes_and_propagates_nan():
    i8 = INTS.astype(np.int8)
    for name in ("add", "multiply", "subtract", "maximum"):
        assert getattr(jnp, name).accumulate(i8, axis=1).dtype == np.int8, name
    with_nan = np.array([1., np.nan, 3., 0.], np.float32)
    _close(jnp.maximum.accumulate(with_nan), np.maximum.accumulate(with_nan))
    _close(jnp.minimum.accumulate(with_nan), np.minimum.accumulate(with_nan))
    flags = np.array([False, True, False])
    _close(jnp.maximum.accumulate(flags), np.maximum.accumulate(flags), np.bool_)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "maximum", "minimum",
                                  "bitwise_xor", "logaddexp"])
def test_at_applies_every_occurrence_of_a_repeated_index(name):
    uf, ref = getattr(jnp, name), _numpy_ufunc(name)
    a = _operand(name)[0].copy()
    idx = np.array([0, 3, 3, 1, 3])
    b = (np.arange(5) % 3 + 1).astype(a.dtype)
    expected = a.astype(np.float64 if a.dtype.kind == "f" else np.int64)
    ref.at(expected, idx, b)
    _close(uf.at(a, jnp.asarray(idx), b, inplace=False), expected, a.dtype)


def test_at_with_slices_scalars_and_unary_ufuncs():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    cases = [(slice(None), jnp.array([0, 0, 2])), (1, slice(1, None)), (jnp.array([2, 2]),),
             (Ellipsis, 3)]
    for index in cases:
        np_index = tuple(np.asarray(i) if isinstance(i, plax.Array) else i for i in index)
        expected = a.astype(np.int64)
        np.subtract.at(expected, np_index, 5)
        _close(jnp.subtract.at(a, index, 5, inplace=False), expected, np.int32)
        neg = a.astype(np.int64)
        np.negative.at(neg, np_index)
        _close(jnp.negative.at(a, index, inplace=False), neg, np.int32)
    flags = np.array([True, False, False])
    expected = flags.copy()
    np.logical_xor.at(expected, [0, 0, 1], True)
    _close(jnp.logical_xor.at(flags, jnp.array([0, 0, 1]), True, inplace=False), expected)
    expected = flags.copy()
    np.add.at(expected, [1, 1, 2], True)
    _close(jnp.add.at(flags, jnp.array([1, 1, 2]), True, inplace=False), expected, np.bool_)


@pytest.mark.parametrize("name", ["add", "subtract", "maximum", "multiply", "logical_or"])
def test_reduceat_against_numpy(name):
    uf, ref, x = getattr(jnp, name), _numpy_ufunc(name), _operand(name)
    wide = x.astype(np.int64 if x.dtype.kind == "i" else np.float64)
    for axis, idx in ((1, [0, 3, 1, 4, 4]), (0, [2, 0]), (1, [0])):
        expected = ref.reduceat(wide, idx, axis=axis)
        _close(uf.reduceat(x, jnp.array(idx), axis=axis), expected)
        _close(plax.jit(lambda a, i: uf.reduceat(a, i, axis=axis))(x, jnp.array(idx)), expected)


@pytest.mark.parametrize("name", BINARY)
def test_outer_against_numpy(name):
    uf, ref, x = getattr(jnp, name), _numpy_ufunc(name), _operand(name)
    wide = x.astype(np.int64 if x.dtype.kind == "i" else np.float64)
    result = uf.outer(x[0], x[1:, :2])
    assert result.shape == (5, 2, 2)
    _close(result, ref.outer(wide[0], wide[1:, :2]))


def test_frompyfunc_methods_match_numpys_object_ufunc():
    # a non-commutative, non-associative function: the order of the fold shows
    fn = lambda a, b: 2 * a - b  # noqa: E731
    uf, ref = jnp.frompyfunc(fn, 2, 1), np.frompyfunc(fn, 2, 1)
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    wide = x.astype(np.float64)
    _close(uf(x, 1.5), fn(wide, 1.5))
    _close(uf.reduce(x, axis=1), ref.reduce(wide, axis=1).astype(np.float64))
    _close(uf.reduce(x, axis=None), ref.reduce(wide.ravel()))
    _close(uf.accumulate(x, axis=0), ref.accumulate(wide, axis=0).astype(np.float64))
    _close(uf.reduceat(x, jnp.array([0, 2, 1]), axis=1),
           ref.reduceat(wide, [0, 2, 1], axis=1).astype(np.float64))
    _close(uf.outer(x[0], x[1]), ref.outer(wide[0], wide[1]).astype(np.float64))
    expected = wide.copy().astype(object)
    ref.at(expected, ([0, 0, 2], [1, 1, 3]), 1.0)
    _close(uf.at(x, (jnp.array([0, 0, 2]), jnp.array([1, 1, 3])), 1.0, inplace=False),
           expected.astype(np.float64))
    two = jnp.frompyfunc(lambda a, b: (a + b, a * b), 2, 2)
    s, p = two(jnp.arange(3), 2)
    _close(s, np.arange(3) + 2)
    _close(p, np.arange(3) * 2)


def test_generic_paths_agree_with_the_fast_paths():
    generic = {name: jnp.ufunc(getattr(jnp, name).call_positional, 2, 1, name=name,
                               identity=getattr(jnp, name).identity)
               for name in ("add", "multiply", "maximum", "bitwise_or")}
    for name, uf in generic.items():
        fast, x = getattr(jnp, name), _operand(name)
        _close(uf.reduce(x, axis=1), fast.reduce(x, axis=1))
        _close(uf.accumulate(x, axis=1), fast.accumulate(x, axis=1))
        idx = jnp.array([4, 0, 4, 4])
        _close(uf.at(x[0], idx, x[1, :4], inplace=False), fast.at(x[0], idx, x[1, :4],
                                                                  inplace=False))


def test_grad_and_vmap_through_the_generic_loops():
    x = np.array([0.5, -1.0, 2.0, 0.25], np.float32)

    def f(v):
        return jnp.subtract.reduce(jnp.sin(v)) + jnp.subtract.accumulate(v * v).sum()

    g = plax.grad(f)(x)
    eps = 1e-3
    fd = [(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(4, dtype=np.float32)]
    np.testing.assert_allclose(g, fd, rtol=2e-2, atol=2e-3)
    rows = FLOATS
    batched = plax.vmap(jnp.subtract.accumulate)(rows)
    _close(batched, np.stack([np.subtract.accumulate(r.astype(np.float64)) for r in rows]))
    batched_at = plax.vmap(lambda r: jnp.maximum.at(r, jnp.array([1, 1, 3]), 0.0,
                                                    inplace=False))(rows)
    expected = []
    for r in rows.astype(np.float64):
        r = r.copy()
        np.maximum.at(r, [1, 1, 3], 0.0)
        expected.append(r)
    _close(batched_at, np.stack(expected))


def test_a_ufunc_is_a_static_argument_of_jit():
    fold = plax.jit(lambda uf, a: uf.reduce(a, axis=1), static_argnums=0)
    _close(fold(jnp.add, INTS), INTS.sum(1))
    _close(fold(jnp.subtract, INTS), np.subtract.reduce(INTS.astype(np.int64), axis=1))


def test_errors():
    x = jnp.asarray(INTS)
    with pytest.raises(NotImplementedError, match="inplace=False"):
        jnp.add.at(x, 0, 1)
    with pytest.raises(NotImplementedError, match="out argument"):
        jnp.add(x, x, out=x)
    with pytest.raises(NotImplementedError, match="out argument"):
        jnp.add.reduce(x, out=x)
    with pytest.raises(ValueError, match="binary ufuncs"):
        jnp.negative.reduce(x)
    with pytest.raises(ValueError, match="binary ufuncs"):
        jnp.negative.outer(x, x)
    with pytest.raises(ValueError, match="single value"):
        jnp.frompyfunc(lambda a, b: (a, b), 2, 2).accumulate(x)
    with pytest.raises(ValueError, match="does not have an identity"):
        jnp.maximum.reduce(x, where=x > 0)
    with pytest.raises(ValueError, match="dtype=bool"):
        jnp.add.reduce(x, where=x)
    with pytest.raises(ValueError, match="zero-size array"):
        jnp.subtract.reduce(jnp.zeros((0, 2)))
    with pytest.raises(ValueError, match="zero-size array"):
        jnp.maximum.reduce(jnp.zeros((0, 2)))
    np.testing.assert_array_equal(jnp.add.reduce(jnp.zeros((0, 2))), [0, 0])
    with pytest.raises(ValueError, match="multiple axes"):
        jnp.subtract.accumulate(x, axis=None)
    with pytest.raises(NotImplementedError, match="one axis at a time"):
        jnp.subtract.reduce(x, axis=(0, 1))
    with pytest.raises(TypeError, match="integer or boolean"):
        jnp.bitwise_and.reduce(jnp.asarray(FLOATS))
    with pytest.raises(TypeError, match="operand"):
        jnp.negative.at(x, 0, 1, inplace=False)
    with pytest.raises(TypeError, match="operand"):
        jnp.add.at(x, 0, inplace=False)
    with pytest.raises(IndexError, match="out-of-bounds"):
        jnp.add.reduceat(x, jnp.array([0, 5]), axis=1)
    with pytest.raises(IndexError, match="out-of-bounds"):
        jnp.add.reduceat(x, jnp.array([-1]), axis=1)
    with pytest.raises(ValueError, match="one-dimensional"):
        jnp.add.reduceat(x, jnp.array([[0]]))
    with pytest.raises(ValueError, match="1 or more dimension"):
        jnp.add.reduceat(jnp.asarray(3), jnp.array([0]))
    with pytest.raises(TypeError):
        jnp.add.reduceat(x, [0, 1])
    with pytest.raises(TypeError, match="positional argument"):
        jnp.frompyfunc(lambda a, b: a + b, 2, 1)(x)
    with pytest.raises(ValueError, match="nin >= 1"):
        jnp.ufunc(lambda: 0, 0, 1)


def test_as_jax():
    """Values and dtypes as JAX 0.10 gives them, where JAX and NumPy disagree on the dtype
    (``add.accumulate`` of booleans counts, small integers keep their type, ...)."""
    jax = pytest.importorskip("jax")
    i8 = INTS.astype(np.int8)
    flags = INTS > 0
    calls = [
        lambda m: m.add.reduce(i8), lambda m: m.add.accumulate(flags, axis=1),
        lambda m: m.multiply.accumulate(i8, axis=1), lambda m: m.subtract.reduce(i8, axis=None),
        lambda m: m.subtract.accumulate(i8, axis=1, dtype=np.float32),
        lambda m: m.maximum.reduce(FLOATS, axis=1, initial=0.5, where=flags),
        lambda m: m.logical_xor.reduce(i8, axis=0), lambda m: m.bitwise_or.reduce(flags, axis=1),
        lambda m: m.logaddexp2.reduce(FLOATS, axis=0),
        lambda m: m.add.at(m.zeros(5, np.int32), m.asarray([0, 0, 3]), 2, inplace=False),
        lambda m: m.negative.at(m.arange(5), m.asarray([0, 1, 1]), inplace=False),
        lambda m: m.add.reduceat(m.arange(8), m.asarray([0, 4, 1, 5])),
        lambda m: m.subtract.outer(m.arange(3), m.arange(2.0)),
    ]
    for i, call in enumerate(calls):
        ours, theirs = call(jnp), np.asarray(call(jax.numpy))
        assert np.asarray(ours).dtype == theirs.dtype, i
        _close(ours, theirs)


def test_builtin_ufuncs_pickle_and_copy_as_themselves():
    import copy
    import operator
    import pickle
    for name in BINARY + ("negative",):
        uf = getattr(jnp, name)
        assert pickle.loads(pickle.dumps(uf)) is uf and copy.deepcopy(uf) is uf, name
    made = jnp.frompyfunc(operator.add, 2, 1)  # a picklable function: pickled by value
    made.accumulate(INTS)  # (its compiled loop is not pickled)
    back = pickle.loads(pickle.dumps(made))
    assert back == made and back is not made
    _close(back.reduce(INTS, axis=1), INTS.sum(1))

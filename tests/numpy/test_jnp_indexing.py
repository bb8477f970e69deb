"""NumPy indexing on plax arrays: ``x[idx]`` for random index expressions (hypothesis) compared
with NumPy, and with JAX's clamping where integer indices are out of bounds; plus the fixed
cases every user hits (negative steps, None, Ellipsis, masks, adjacent and non-adjacent
advanced indices)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import plax
import plax.numpy as jnp
from jnp_index_strategies import clamped, index_expressions, shapes, valid_for_numpy
from jnp_testutil import assert_close, check_avals_like_jax, check_raises_like_jax

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- getitem against NumPy

@SETTINGS
@given(data=st.data())
def test_getitem_matches_numpy(data):
    shape = data.draw(shapes())
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    idx, _ = data.draw(index_expressions(shape))
    if not valid_for_numpy(x, idx):
        return
    expected = x[idx]
    out = jnp.asarray(x)[idx]
    assert_close(out, expected, err_msg=f"shape {shape} index {idx!r}")


@SETTINGS
@given(data=st.data())
def test_getitem_out_of_bounds_integers_clamp_like_jax(data):
    shape = data.draw(shapes(min_dims=1))
    if 0 in shape:
        return
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    idx, oob = data.draw(index_expressions(shape, allow_oob=True, allow_bool=False))
    safe = clamped(idx, shape)
    if not valid_for_numpy(x, safe):
        return
    out = jnp.asarray(x)[idx]
    assert_close(out, x[safe], err_msg=f"shape {shape} index {idx!r} (oob={oob})")


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_getitem_under_jit_matches_eager(data):
    shape = data.draw(shapes(min_dims=1, max_dims=3))
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    idx, _ = data.draw(index_expressions(shape, allow_bool=False))
    if not valid_for_numpy(x, idx):
        return
    arrays = [e for e in (idx if isinstance(idx, tuple) else (idx,)) if isinstance(e, np.ndarray)]

    def f(xx, *arrs):
        it = iter(arrs)
        parts = idx if isinstance(idx, tuple) else (idx,)
        rebuilt = tuple(next(it) if isinstance(e, np.ndarray) else e for e in parts)
        return xx[rebuilt if isinstance(idx, tuple) else rebuilt[0]]

    out = plax.jit(f)(x, *arrays)  # the integer arrays are traced
    assert_close(out, x[idx], err_msg=f"shape {shape} index {idx!r}")


# ---------------------------------------------------------------- fixed cases

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5)

FIXED = [
    0, -1, (1, 2), (slice(None), 1), (Ellipsis, 2), (None, 1), (1, None, 2), slice(1, 3),
    slice(None, None, -1), slice(10, -10, -2), slice(-10, 10),
    (slice(None), slice(3, 0, -1), slice(None, None, 2)), np.array([0, 2]),
    np.array([-1, 0, 2]), (np.array([0, 1]), np.array([1, 2])),
    (np.array([[0], [1]]), np.array([1, 2, 3])), (np.array([0, 1]), slice(None), np.array([1, 2])),
    (slice(None), np.array([0, 1]), np.array([1, 2])), (np.array([0, 1]), 1),
    (1, slice(None), np.array([0, 2])), (np.array(1), 2), (X[..., 0] > 20,), (X[:, :, 0] > 5,),
    (slice(None), X[0, :, 0] > 2), X > 30, (1, np.array([True, False, True, True])),
    np.array(True), True, False, (None, Ellipsis, None), (Ellipsis, None, np.array([1, 2]), None),
    ([0, 1],), ([[0, 1], [1, 2]], [0, 2]), (0, [True, False, True, False]),
    (np.array([], dtype=np.int32),), (0, np.array([], dtype=np.int32)),
    np.array([0, 1], np.uint8), (np.array([0, 1], np.int8), None, np.array([[2], [3]])),
    (slice(None), None, np.array([0, 1]), slice(None)), (np.array([0, 1]), None, np.array([0, 1])),
    (0, 0, 0), (Ellipsis, 0), (Ellipsis, -1, slice(None)), (np.int32(1),), np.int64(-2),
    (slice(None), slice(None), slice(None), None), (0, Ellipsis, 0, None), (True, 0), (1, True),
    (None, True, Ellipsis, False), (np.array([[True, False, True, False]] * 3),),
    (Ellipsis, np.array([True, False, False, True, True])), (True, np.array([0, 2])),
    (np.array([0, 1]), Ellipsis, True), (np.array(False), 0), (True, True),
    (np.array([0, 2]), slice(1, 3), np.array([[4], [0]])),
]


@pytest.mark.parametrize("idx", FIXED, ids=[repr(i)[:40] for i in FIXED])
def test_getitem_fixed_cases(idx):
    out = jnp.asarray(X)[idx]
    assert_close(out, X[idx])
    if not (isinstance(idx, tuple) and idx[0] is None and idx[1] is True):  # JAX 0.10 fails here
        check_avals_like_jax(out, lambda x: x[idx], X)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint32, np.float16, np.complex64])
def test_getitem_keeps_dtype_and_weak_type(dtype):
    x = np.ones((3, 2), dtype)
    assert jnp.asarray(x)[0].dtype == dtype
    assert jnp.asarray(x)[np.array([0, 0])].dtype == dtype
    w = jnp.asarray(2.0) * jnp.ones(1)  # weakly typed? no: ones is strong
    assert not w[0].weak_type
    weak = jnp.full((3,), 2.0)  # a Python scalar fill is weak, as in JAX
    assert weak[0].weak_type and weak[np.array([1])].weak_type


def test_getitem_with_traced_scalar_index_and_dynamic_slices():
    x = np.arange(10, dtype=np.float32)
    f = plax.jit(lambda a, i: a[i])
    for i in (0, 3, -1, 9, 12, -20):
        assert_close(f(x, i), x[np.clip(i + 10 if i < 0 else i, 0, 9)])
    g = plax.jit(lambda a, i: a[i, 1:3])
    m = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    assert_close(g(m, 2), m[2, 1:3])


def test_getitem_jit_static_slice_with_array_scalar_bounds():
    x = np.arange(10, dtype=np.float32)
    assert_close(jnp.asarray(x)[jnp.asarray(2):jnp.asarray(7)], x[2:7])
    with pytest.raises(plax.errors.ConcretizationTypeError, match="dynamic_slice"):
        plax.jit(lambda a, i: a[i:i + 2])(x, 1)


def test_iteration_len_and_unstack_by_index():
    x = jnp.asarray(X)
    rows = list(x)
    assert len(rows) == len(x) == 3
    for r, ref in zip(rows, X):
        assert_close(r, ref)
    with pytest.raises(TypeError, match="0-d"):
        iter(jnp.asarray(1.0))


def test_index_errors_like_jax():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    xp = jnp.asarray(x)
    cases = [
        ((0, 1, 2), "Too many indices"), ((Ellipsis, Ellipsis), "ellipsis"),
        ([0, 1], "non-tuple sequence"), ([[0, 1], [1, 2]], "non-tuple sequence"),
        (X[0] > 5, "boolean index"),
        (1.0, "integer"), ("a", "string"), (np.array([1.0]), "integer"),
        (slice(0.5, 2), "Slice"), ((0, [1, 2.5]), None),
    ]
    for idx, pattern in cases:
        err = check_raises_like_jax(lambda: xp[idx], lambda a: a[idx], x)
        if pattern:
            assert pattern.lower() in str(err).lower(), (idx, str(err))
    err = check_raises_like_jax(lambda: xp[np.array([True, False])],
                                lambda a: a[np.array([True, False])], x)
    assert "3" in str(err) and "2" in str(err)


def test_traced_boolean_mask_raises_nonconcrete_error():
    x = np.arange(5.0, dtype=np.float32)
    with pytest.raises(jnp.NonConcreteBooleanIndexError) as info:
        plax.jit(lambda a: a[a > 2])(x)
    assert "jnp.where" in str(info.value)
    assert isinstance(info.value, IndexError)  # as JAX's
    # the documented workarounds work
    out = plax.jit(lambda a: jnp.where(a > 2, a, 0.0))(x)
    assert_close(out, np.where(x > 2, x, 0.0))
    out = plax.jit(lambda a: a[jnp.nonzero(a > 2, size=2)])(x)
    assert_close(out, x[np.nonzero(x > 2)][:2])


def test_setitem_raises_with_at_hint():
    x = jnp.zeros(3)
    with pytest.raises(TypeError, match=r"\.at\["):
        x[0] = 1.0


# A static int outside its axis: JAX reads it with dynamic_slice (the start wrapped once if
# negative, then clamped as it runs), so x[-5] of a length-3 axis is x[0] (-5 + 3 = -2, clamped)
# and checkify sees the index; in-bounds ints stay static slices. Values recorded from JAX.
_OOB_X = np.arange(6, dtype=np.float32).reshape(2, 3)
_OOB_CASES = [
    (lambda x: x[5], [3., 4., 5.], "dynamic_slice"),
    (lambda x: x[-5], [0., 1., 2.], "dynamic_slice"),
    (lambda x: x[0, 7], 2., "dynamic_slice"),
    (lambda x: x[None, 9], [[3., 4., 5.]], "dynamic_slice"),
    (lambda x: x[..., -9], [0., 3.], "dynamic_slice"),
    (lambda x: x[-1], [3., 4., 5.], "slice"),
]


@pytest.mark.parametrize("k", range(len(_OOB_CASES)))
def test_static_out_of_bounds_int_reads_with_dynamic_slice(k):
    f, want, prim = _OOB_CASES[k]
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(_OOB_X))), want)
    np.testing.assert_array_equal(np.asarray(plax.jit(f)(_OOB_X)), want)
    assert plax.make_jaxpr(f)(_OOB_X).jaxpr.eqns[0].primitive.name == prim


def test_static_out_of_bounds_int_as_jax():
    jax = pytest.importorskip("jax")
    for f, _, _ in _OOB_CASES:
        np.testing.assert_array_equal(np.asarray(f(jnp.asarray(_OOB_X))),
                                      np.asarray(f(jax.numpy.asarray(_OOB_X))))
        np.testing.assert_array_equal(np.asarray(plax.grad(lambda x: f(x).sum())(_OOB_X)),
                                      np.asarray(jax.grad(lambda x: f(x).sum())(_OOB_X)))

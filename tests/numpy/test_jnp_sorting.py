"""Sorting and searching: sort/argsort (stable, descending, NaN last), nonzero/argwhere/
flatnonzero with and without ``size``, searchsorted, unique; eagerly and under jit."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from jnp_testutil import (DTYPES, assert_close, bfloat16, check_avals_like_jax,
                          check_raises_like_jax, jax_fn, rand)

_SORT_DTYPES = ["bool", "int8", "int32", "uint8", "float16", "bfloat16", "float32"]


def _with_nans(x):
    if x.dtype.kind == "f" or x.dtype == bfloat16:
        x = x.copy()
        x.flat[::5] = np.nan
    return x


@pytest.mark.parametrize("dtype", _SORT_DTYPES)
@pytest.mark.parametrize("axis", [-1, 0, None])
def test_sort(dtype, axis):
    x = _with_nans(rand(np.random.default_rng(50), (4, 6), DTYPES[dtype]))
    ref = np.sort(x.astype(np.float32) if x.dtype == bfloat16 else x, axis=axis)
    out = jnp.sort(x, axis=axis)
    assert_close(out, ref.astype(x.dtype))
    check_avals_like_jax(out, jax_fn("sort"), x, axis=axis)
    out = jnp.sort(x, axis=axis, descending=True)
    # descending: reversed ascending order, NaNs first (as JAX)
    flipped = np.flip(ref, axis=axis if axis is not None else 0)
    assert_close(out, flipped.astype(x.dtype))


@pytest.mark.parametrize("dtype", _SORT_DTYPES)
@pytest.mark.parametrize("axis", [-1, 0, None])
def test_argsort_is_stable(dtype, axis):
    rng = np.random.default_rng(51)
    x = rand(rng, (5, 6), DTYPES[dtype], "small")  # many ties
    x = _with_nans(x)
    xs = x.astype(np.float32) if x.dtype == bfloat16 else x
    out = jnp.argsort(x, axis=axis)
    assert_close(out, np.argsort(xs, axis=axis, kind="stable"))
    check_avals_like_jax(out, jax_fn("argsort"), x, axis=axis)
    out = jnp.argsort(x, axis=axis, descending=True)
    # JAX's stable descending order keeps equal elements in their original order
    ref = np.argsort(-_order_key(xs), axis=axis, kind="stable")
    assert_close(out, ref)


def _order_key(x):
    """A float64 key with sort's order (NaN above +inf) so that negating it reverses the order."""
    k = x.astype(np.float64)
    return np.where(np.isnan(k), np.inf, k) + np.where(np.isnan(k), 1.0, 0.0) * 1e300


def test_sort_special_values_and_complex():
    x = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, 1.0, np.nan], np.float32)
    assert_close(jnp.sort(x), np.sort(x))
    assert_close(jnp.argsort(x), np.argsort(x, kind="stable"))
    z = rand(np.random.default_rng(52), (7,), np.complex64, "small")
    assert_close(jnp.sort(z), np.sort(z))
    check_avals_like_jax(jnp.sort(z), jax_fn("sort"), z)
    with pytest.raises(ValueError, match="order"):
        jnp.sort(x, order="a")


def test_sort_under_jit_and_vmap_and_methods():
    x = rand(np.random.default_rng(53), (3, 5), np.float32)
    assert_close(plax.jit(jnp.sort)(x), np.sort(x))
    assert_close(plax.vmap(jnp.argsort)(x), np.argsort(x, axis=-1))
    assert_close(jnp.asarray(x).sort(axis=0), np.sort(x, axis=0))
    assert_close(jnp.asarray(x).argsort(), np.argsort(x))


_NZ_INPUTS = {
    "bool2d": rand(np.random.default_rng(54), (3, 4), np.bool_),
    "int2d": rand(np.random.default_rng(55), (3, 4), np.int32, "small"),
    "float1d": np.array([0.0, 1.5, 0.0, -2.0, np.nan], np.float32),
    "empty": np.zeros((0, 3), np.float32), "zeros3d": np.zeros((2, 2, 2), np.int8),
    "complex": np.array([0j, 1j, 1 + 0j, 0j], np.complex64),
}


@pytest.mark.parametrize("name", sorted(_NZ_INPUTS))
def test_nonzero_argwhere_flatnonzero(name):
    x = _NZ_INPUTS[name]
    for got, exp in zip(jnp.nonzero(x), np.nonzero(x)):
        assert_close(got, exp)
    check_avals_like_jax(jnp.nonzero(x), jax_fn("nonzero"), x, concrete=True)
    assert_close(jnp.argwhere(x), np.argwhere(x))
    check_avals_like_jax(jnp.argwhere(x), jax_fn("argwhere"), x, concrete=True)
    assert_close(jnp.flatnonzero(x), np.flatnonzero(x))
    for got, exp in zip(jnp.where(x), np.nonzero(x)):
        assert_close(got, exp)
    assert_close(jnp.count_nonzero(x), np.count_nonzero(x))


@pytest.mark.parametrize("size", [1, 3, 20])
@pytest.mark.parametrize("fill_value", [None, -1, "tuple"])
@pytest.mark.parametrize("name", ["bool2d", "int2d", "float1d", "zeros3d"])
def test_nonzero_with_size(name, size, fill_value):
    x = _NZ_INPUTS[name]
    if fill_value == "tuple":
        fill_value = tuple(range(-1, -1 - x.ndim, -1))
    exp = np.nonzero(x)
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value or 0,) * x.ndim
    padded = [np.concatenate([e, np.full(max(size - len(e), 0), f, np.int64)])[:size]
              for e, f in zip(exp, fills)]
    for fn in (lambda a: jnp.nonzero(a, size=size, fill_value=fill_value),
               plax.jit(lambda a: jnp.nonzero(a, size=size, fill_value=fill_value))):
        got = fn(x)
        assert len(got) == x.ndim
        for g, e in zip(got, padded):
            assert_close(g, e)
    check_avals_like_jax(jnp.nonzero(x, size=size, fill_value=fill_value), jax_fn("nonzero"),
                         x, size=size, fill_value=fill_value)
    out = jnp.argwhere(x, size=size, fill_value=fill_value if fill_value != () else None)
    assert_close(out, np.stack(padded, axis=1))
    flat = jnp.flatnonzero(x, size=size, fill_value=-7)
    fe = np.flatnonzero(x)
    assert_close(flat, np.concatenate([fe, np.full(max(size - len(fe), 0), -7)])[:size])


def test_nonzero_zero_rank_and_traced_without_size():
    check_raises_like_jax(lambda: jnp.nonzero(np.float32(1)), jax_fn("nonzero"), np.float32(1))
    assert jnp.argwhere(np.float32(1)).shape == (1, 0)
    assert jnp.argwhere(np.float32(0)).shape == (0, 0)
    with pytest.raises(plax.errors.ConcretizationTypeError, match="size"):
        plax.jit(jnp.nonzero)(np.ones(3))
    with pytest.raises(plax.errors.ConcretizationTypeError):
        plax.jit(lambda a: jnp.where(a))(np.ones(3))


_SORTED = np.array([1.0, 2.0, 2.0, 3.0, 5.0], np.float32)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("v", [3.0, np.array([0.0, 2.0, 2.5, 6.0, np.nan], np.float32),
                               np.array([[1, 2], [3, 4]], np.int32), np.array([], np.float32)],
                         ids=["scalar", "nan", "2d-int", "empty"])
def test_searchsorted(side, v):
    out = jnp.searchsorted(_SORTED, v, side=side)
    assert_close(out, np.searchsorted(_SORTED, v, side=side))
    check_avals_like_jax(out, jax_fn("searchsorted"), _SORTED, v, side=side)
    assert_close(plax.jit(lambda a, b: jnp.searchsorted(a, b, side=side))(_SORTED, v),
                 np.searchsorted(_SORTED, v, side=side))


def test_searchsorted_sorter_nan_in_a_and_errors():
    a = np.array([3.0, 1.0, 2.0], np.float32)
    sorter = np.argsort(a)
    assert_close(jnp.searchsorted(a, 2.5, sorter=sorter), np.searchsorted(a, 2.5, sorter=sorter))
    an = np.array([1.0, 2.0, np.nan], np.float32)
    v = np.array([np.nan, 1.5, 9.0], np.float32)
    for side in ("left", "right"):
        assert_close(jnp.searchsorted(an, v, side=side), np.searchsorted(an, v, side=side))
    assert_close(jnp.searchsorted(np.array([], np.float32), 2.5), np.int64(0))
    check_raises_like_jax(lambda: jnp.searchsorted(a, 1.0, side="middle"),
                          jax_fn("searchsorted"), a, 1.0, side="middle")
    check_raises_like_jax(lambda: jnp.searchsorted(np.ones((2, 2)), 1.0),
                          jax_fn("searchsorted"), np.ones((2, 2)), 1.0)


_UNIQUE = {
    "int": np.array([3, 1, 2, 3, 1], np.int32), "float": np.array([2.5, -1.0, 2.5], np.float32),
    "2d": np.array([[1, 2], [1, 2], [0, 1]], np.int32), "bool": np.array([True, False, True]),
    "nan": np.array([1.0, np.nan, np.nan, 2.0], np.float32), "empty": np.zeros(0, np.int32),
}


@pytest.mark.parametrize("name", sorted(_UNIQUE))
@pytest.mark.parametrize("extras", [(), ("return_index",), ("return_inverse",),
                                    ("return_counts",),
                                    ("return_index", "return_inverse", "return_counts")],
                         ids=["plain", "index", "inverse", "counts", "all"])
def test_unique(name, extras):
    x = _UNIQUE[name]
    kw = {e: True for e in extras}
    out = jnp.unique(x, **kw)
    ref = np.unique(x, **kw)
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    for o, r in zip(outs, refs):
        assert_close(o, np.asarray(r).reshape(o.shape))
    check_avals_like_jax(out, jax_fn("unique"), x, concrete=True, **kw)


def test_unique_axis_and_size():
    x = _UNIQUE["2d"]
    assert_close(jnp.unique(x, axis=0), np.unique(x, axis=0))
    x = _UNIQUE["int"]
    out = jnp.unique(x, size=5)
    assert_close(out, np.array([1, 2, 3, 1, 1]))  # padded with the smallest value, as JAX
    check_avals_like_jax(out, jax_fn("unique"), x, size=5)
    assert_close(jnp.unique(x, size=2), np.array([1, 2]))
    assert_close(jnp.unique(x, size=4, fill_value=-9), np.array([1, 2, 3, -9]))
    vals, idx, inv, cnt = jnp.unique(x, size=5, return_index=True, return_inverse=True,
                                     return_counts=True)
    rv, ri, rinv, rc = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    assert_close(vals, np.array([1, 2, 3, 1, 1]))
    assert_close(idx, np.concatenate([ri, [ri[0]] * 2]))  # the padded value's index, as JAX
    assert_close(inv, rinv)
    assert_close(cnt, np.concatenate([rc, [0, 0]]))


def test_unique_under_jit_needs_size():
    x = _UNIQUE["nan"]
    out = plax.jit(lambda a: jnp.unique(a, size=4))(x)
    assert_close(out, np.array([1.0, 2.0, np.nan, 1.0], np.float32))
    out = plax.jit(lambda a: jnp.unique(a, size=2, fill_value=0))(_UNIQUE["int"])
    assert_close(out, np.array([1, 2]))
    with pytest.raises(plax.errors.ConcretizationTypeError, match="size"):
        plax.jit(jnp.unique)(x)

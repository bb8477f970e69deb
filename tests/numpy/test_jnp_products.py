"""Products: dot, matmul (with batch broadcasting), vdot, vecdot, inner, outer, tensordot, kron,
cross and einsum (a table of subscripts: ellipses, traces, transposes, three operands),
against NumPy in float64 and JAX's result dtypes."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from jnp_testutil import (DTYPES, assert_close, bfloat16, check_avals_like_jax,
                          check_raises_like_jax, is_inexact, jax_fn, rand, wide)


def _ref(np_fn, *args, **kwargs):
    """NumPy's product on widened inputs (exact integers, float64/complex128)."""
    wide_args = [a.astype(wide(a.dtype)) if isinstance(a, np.ndarray) and is_inexact(a.dtype)
                 else a.astype(np.int64) if isinstance(a, np.ndarray) and a.dtype.kind in "iu"
                 else a for a in args]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # NumPy's cross of 2-vectors
        return np_fn(*wide_args, **kwargs)


def _check(out, expected):
    dt = np.dtype(out.dtype)
    expected = np.asarray(expected)
    # products sum several terms: allow a few ulps more than a single operation
    rtol = {np.dtype(np.float16): 1e-2, bfloat16: 5e-2}.get(dt, 1e-5)
    assert_close(out, expected.astype(wide(dt)) if is_inexact(dt) else expected.astype(dt),
                 dtype=dt, rtol=rtol if is_inexact(dt) else None)


_PRODUCT_DTYPES = ["bool", "int8", "int32", "uint8", "float16", "bfloat16", "float32",
                   "complex64"]


@pytest.mark.parametrize("dtype", _PRODUCT_DTYPES)
@pytest.mark.parametrize("name,shapes", [
    ("dot", [(3, 4), (4, 2)]), ("matmul", [(3, 4), (4, 2)]), ("inner", [(3, 4), (5, 4)]),
    ("vdot", [(3, 4), (12,)]), ("outer", [(3,), (2, 2)]), ("kron", [(2, 3), (2, 2)]),
    ("tensordot", [(2, 3, 4), (3, 4, 5)]), ("vecdot", [(4, 3), (4, 3)]),
    ("cross", [(4, 3), (4, 3)]),
])
def test_product_dtypes(name, shapes, dtype):
    rng = np.random.default_rng(30)
    dt = DTYPES[dtype]
    a, b = (rand(rng, s, dt, "small") for s in shapes)
    fn = getattr(jnp, name)
    if name == "cross" and dtype == "bool":
        check_raises_like_jax(lambda: fn(a, b), jax_fn(name), a, b)
        return
    out = fn(a, b)
    if not (name == "kron" and dtype == "bool"):  # JAX rejects kron of bools; plax ANDs them
        check_avals_like_jax(out, jax_fn(name), a, b)
    np_fn = {"vecdot": lambda x, y: np.sum(np.conj(x) * y, axis=-1)}.get(name) or getattr(np, name)
    if dtype == "bool" and name in ("dot", "matmul", "inner", "vdot", "tensordot", "vecdot"):
        expected = np_fn(a.astype(np.int64), b.astype(np.int64)) > 0  # logical or of ands
    else:
        expected = _ref(np_fn, a, b)
    _check(out, expected)


@pytest.mark.parametrize("a_shape,b_shape", [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((5, 2, 3), (3, 4)), ((5, 1, 2, 3), (4, 3, 2)),
    ((2, 3), (5, 3, 4)), ((0, 3), (3, 2)), ((2, 0), (0, 3)), ((1, 2, 3), (7, 1, 3, 2)),
    ((3,), (4, 3, 2)), ((4, 2, 3), (3,))])
def test_matmul_broadcasting(a_shape, b_shape):
    rng = np.random.default_rng(31)
    a, b = rand(rng, a_shape, np.float32), rand(rng, b_shape, np.float32)
    out = jnp.matmul(a, b)
    _check(out, _ref(np.matmul, a, b))
    check_avals_like_jax(out, jax_fn("matmul"), a, b)
    _check(plax.numpy.asarray(a) @ b, _ref(np.matmul, a, b))


@pytest.mark.parametrize("a_shape,b_shape", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)),
                                             ((5, 2, 3), (4, 3, 2)), ((), (3,)), ((2, 3), ())])
def test_dot_and_inner_shapes(a_shape, b_shape):
    rng = np.random.default_rng(32)
    a, b = rand(rng, a_shape, np.float32), rand(rng, b_shape, np.float32)
    _check(jnp.dot(a, b), _ref(np.dot, a, b))
    check_avals_like_jax(jnp.dot(a, b), jax_fn("dot"), a, b)
    a2 = a if len(a_shape) < 2 else np.swapaxes(a, -1, -2).copy()
    if a2.shape[-1:] == b.shape[-1:] or not a2.shape or not b.shape:
        _check(jnp.inner(a2, b), _ref(np.inner, a2, b))


def test_preferred_element_type_and_mixed_dtypes():
    rng = np.random.default_rng(33)
    a8, b8 = rand(rng, (3, 4), np.int8), rand(rng, (4, 2), np.int8)
    out = jnp.dot(a8, b8, preferred_element_type=np.int32)
    check_avals_like_jax(out, jax_fn("dot"), a8, b8, preferred_element_type=np.int32)
    _check(out, _ref(np.dot, a8, b8))
    h, g = rand(rng, (2, 3), np.float16), rand(rng, (3, 2), np.float16)
    out = jnp.matmul(h, g, preferred_element_type=np.float32)
    check_avals_like_jax(out, jax_fn("matmul"), h, g, preferred_element_type=np.float32)
    _check(out, _ref(np.matmul, h, g))
    f = rand(rng, (4,), np.float32)
    out = jnp.dot(a8, f)
    check_avals_like_jax(out, jax_fn("dot"), a8, f)
    _check(out, _ref(np.dot, a8, f))
    out = jnp.dot(f, 2.0)
    check_avals_like_jax(out, jax_fn("dot"), f, 2.0)


@pytest.mark.parametrize("axes", [2, 0, 1, ((1, 2), (1, 0)), [[1], [0]], (-1, 0), ((), ())])
def test_tensordot_axes(axes):
    rng = np.random.default_rng(34)
    a = rand(rng, (2, 3, 4), np.float32)
    shapes = {2: (3, 4, 5), 0: (2, 2), 1: (4, 5), ((1, 2), (1, 0)): (4, 3, 5),
              (-1, 0): (4, 5), ((), ()): (2,)}
    b = rand(rng, shapes.get(axes if not isinstance(axes, list) else (1,), (3, 5))
             if not isinstance(axes, list) else (3, 5), np.float32)
    if isinstance(axes, list):
        a = rand(rng, (2, 3), np.float32)
    out = jnp.tensordot(a, b, axes)
    _check(out, _ref(np.tensordot, a, b, axes))
    check_avals_like_jax(out, jax_fn("tensordot"), a, b, axes)


def test_tensordot_errors():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    err = check_raises_like_jax(lambda: jnp.tensordot(a, b, 3), jax_fn("tensordot"), a, b, 3)
    assert "3" in str(err)
    check_raises_like_jax(lambda: jnp.tensordot(a, b, ((0, 1), (0,))), jax_fn("tensordot"),
                          a, b, ((0, 1), (0,)))


@pytest.mark.parametrize("a_shape,b_shape", [((2,), (2, 3)), ((2, 2), (3,)), ((2, 1, 3), (4, 2)),
                                             ((), (2,)), ((3,), ())])
def test_kron(a_shape, b_shape):
    rng = np.random.default_rng(35)
    a, b = rand(rng, a_shape, np.float32), rand(rng, b_shape, np.float32)
    _check(jnp.kron(a, b), _ref(np.kron, a, b))
    check_avals_like_jax(jnp.kron(a, b), jax_fn("kron"), a, b)


@pytest.mark.parametrize("a_shape,b_shape,kwargs", [
    ((3,), (3,), {}), ((3,), (2,), {}), ((2,), (3,), {}), ((5, 3), (5, 3), {}),
    ((3, 5), (3, 5), {"axis": 0}), ((5, 3), (3, 5), {"axisb": 0}),
    ((5, 3), (5, 3), {"axisc": 0}), ((2, 3), (1, 3), {}), ((4, 3), (3,), {})])
def test_cross(a_shape, b_shape, kwargs):
    rng = np.random.default_rng(36)
    a, b = rand(rng, a_shape, np.float32), rand(rng, b_shape, np.float32)
    out = jnp.cross(a, b, **kwargs)
    _check(out, _ref(np.cross, a, b, **kwargs))
    check_avals_like_jax(out, jax_fn("cross"), a, b, **kwargs)


def test_cross_2d_vectors_give_scalars_and_bad_sizes_raise():
    a, b = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)
    assert_close(jnp.cross(a, b), np.float32(1 * 4 - 2 * 3))
    bad = np.ones(4, np.float32)
    check_raises_like_jax(lambda: jnp.cross(bad, bad), jax_fn("cross"), bad, bad)


def test_vdot_conjugates_and_vecdot_axis():
    rng = np.random.default_rng(37)
    z, w = rand(rng, (2, 3), np.complex64), rand(rng, (3, 2), np.complex64)
    _check(jnp.vdot(z, w), _ref(np.vdot, z, w))
    x, y = rand(rng, (3, 4), np.complex64), rand(rng, (4,), np.complex64)
    out = jnp.vecdot(x.T, y[:, None], axis=0)
    _check(out, np.sum(np.conj(x.T.astype(np.complex128)) * y[:, None], axis=0))
    check_avals_like_jax(out, jax_fn("vecdot"), x.T.copy(), y[:, None].copy(), axis=0)


EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("ij", [(2, 3)]),
    ("ji", [(2, 3)]), ("...ij,...jk->...ik", [(5, 2, 3), (5, 3, 4)]),
    ("...ij,jk", [(5, 2, 3), (3, 4)]), ("i,i->", [(3,), (3,)]), ("i,j->ij", [(3,), (4,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("iij->j", [(3, 3, 4)]), ("i...->...", [(3, 4, 5)]), ("ijk->kji", [(2, 3, 4)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]), ("ij,kj->ik", [(2, 3), (4, 3)]),
    ("a,b,c->abc", [(2,), (3,), (4,)]), ("ijk,jil->kl", [(3, 4, 5), (4, 3, 2)]),
    ("...,...->...", [(2, 3), (3,)]), ("ii->", [(4, 4)]), ("iji->j", [(3, 4, 3)]),
    ("i,i,i->i", [(3,), (3,), (3,)]), ("ab,ab->", [(2, 3), (1, 3)]), ("ij->i", [(2, 0)]),
    ("ij,jk->ik", [(2, 0), (0, 4)]), ("b...c,c...d->b...d", [(2, 5, 3), (3, 5, 4)]),
    ("i,ij,j->", [(3,), (3, 4), (4,)]), ("ijk,ikl,ilm->ijm", [(2, 3, 4), (2, 4, 5), (2, 5, 2)]),
    ("ii,ij->j", [(3, 3), (3, 2)]), ("ab,cd->", [(2, 3), (4, 5)]), ("", [()]),
    (",i->i", [(), (3,)]), ("...i,...i", [(2, 1, 3), (4, 3)]), ("i i -> i", [(3, 3)]),
]


@pytest.mark.parametrize("subscripts,shapes", EINSUM, ids=[s or "scalar" for s, _ in EINSUM])
def test_einsum(subscripts, shapes):
    rng = np.random.default_rng(38)
    ops = [rand(rng, s, np.float32) for s in shapes]
    out = jnp.einsum(subscripts, *ops)
    _check(out, _ref(np.einsum, subscripts, *ops))
    check_avals_like_jax(out, jax_fn("einsum"), subscripts, *ops)


@pytest.mark.parametrize("dtypes_", [("int8", "float32"), ("int8", "int8"), ("bool", "int32"),
                                     ("float16", "bfloat16"), ("complex64", "float32")])
def test_einsum_dtypes(dtypes_):
    rng = np.random.default_rng(39)
    a = rand(rng, (2, 3), DTYPES[dtypes_[0]], "small")
    b = rand(rng, (3, 4), DTYPES[dtypes_[1]], "small")
    out = jnp.einsum("ij,jk->ik", a, b)
    check_avals_like_jax(out, jax_fn("einsum"), "ij,jk->ik", a, b)
    _check(out, _ref(np.einsum, "ij,jk->ik", a, b))
    if "complex64" not in dtypes_:  # a float32 result type would drop imaginary parts
        out = jnp.einsum("ij,jk->ik", a, b, preferred_element_type=np.float32)
        check_avals_like_jax(out, jax_fn("einsum"), "ij,jk->ik", a, b,
                             preferred_element_type=np.float32)


def test_einsum_errors_name_the_problem():
    a, b = np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)
    err = check_raises_like_jax(lambda: jnp.einsum("ij,jk->ik", a, b), jax_fn("einsum"),
                                "ij,jk->ik", a, b)
    assert "j" in str(err)
    check_raises_like_jax(lambda: jnp.einsum("ij,jk->ik", a), jax_fn("einsum"), "ij,jk->ik", a)
    check_raises_like_jax(lambda: jnp.einsum("ijk->i", a), jax_fn("einsum"), "ijk->i", a)
    check_raises_like_jax(lambda: jnp.einsum("ij->iz", a), jax_fn("einsum"), "ij->iz", a)


def test_einsum_under_jit_and_grad():
    rng = np.random.default_rng(40)
    a, b = rand(rng, (2, 3), np.float32), rand(rng, (3, 4), np.float32)
    f = lambda x, y: jnp.einsum("ij,jk->", x, y)  # noqa: E731
    assert_close(plax.jit(f)(a, b), _ref(np.einsum, "ij,jk->", a, b).astype(np.float32),
                 rtol=1e-5)
    ga = plax.grad(f)(a, b)
    # d/da sum_ik (a @ b)_ik = b summed over its columns, broadcast over rows
    assert_close(ga, np.broadcast_to(b.astype(np.float64).sum(1), (2, 3)), dtype=np.float32)


def test_matmul_errors():
    a, b = np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)
    err = check_raises_like_jax(lambda: jnp.matmul(a, b), jax_fn("matmul"), a, b)
    assert "3" in str(err) and "4" in str(err)
    check_raises_like_jax(lambda: jnp.matmul(np.float32(1), a), jax_fn("matmul"),
                          np.float32(1), a)
    c = np.ones((2, 2, 3), np.float32)
    d = np.ones((3, 3, 4), np.float32)
    check_raises_like_jax(lambda: jnp.matmul(c, d), jax_fn("matmul"), c, d)
    check_raises_like_jax(lambda: jnp.dot(a, b), jax_fn("dot"), a, b)

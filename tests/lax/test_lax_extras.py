"""The composite and helper names of jax.lax that plax builds from other primitives
(plax.lax.extras) and the square/clz/mulhi primitives' public wrappers: NumPy references always,
JAX's answers where JAX is installed (CI has none; those checks skip)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.test_util import check_grads

R = np.random.default_rng(4)

try:
    import jax
    import jax.numpy as jjnp
    from jax import lax as jlax
except ImportError:  # the cross-checks skip
    jax = None

needs_jax = pytest.mark.skipif(jax is None, reason="cross-check with JAX (not installed in CI)")


def test_shape_helpers():
    assert lax.broadcast_shapes((2, 1), (3,), ()) == (2, 3)
    with pytest.raises(ValueError, match="Incompatible"):
        lax.broadcast_shapes((2,), (3,))
    assert lax.broadcast_to_rank(jnp.ones(3), 3).shape == (1, 1, 3)
    assert lax.broadcast_to_rank(jnp.ones((2, 3)), 1).shape == (2, 3)
    np.testing.assert_array_equal(lax.broadcast_like(2.0, jnp.ones((2, 2))), np.full((2, 2), 2.0))
    assert lax.empty((2, 3), jnp.int32).shape == (2, 3)
    np.testing.assert_array_equal(lax.shape_as_value((2, 3)), [2, 3])
    assert lax.dtype(jnp.ones(2, jnp.int8)) == np.int8
    assert lax.dtype(1.0) == np.float32
    with plax.config.override("jax_enable_x64", True):
        assert lax.dtype(1.0) == np.float64


def test_structural():
    x = jnp.arange(24).reshape(2, 3, 4)
    parts = lax.split(x, (1, 3), axis=2)
    np.testing.assert_array_equal(parts[0], np.asarray(x)[:, :, :1])
    np.testing.assert_array_equal(parts[1], np.asarray(x)[:, :, 1:])
    with pytest.raises(ValueError, match="Sum of sizes"):
        lax.split(x, (1, 2), axis=2)
    np.testing.assert_array_equal(lax.tile(x, (2, 1, 3)), np.tile(np.asarray(x), (2, 1, 3)))
    np.testing.assert_array_equal(lax.stack([x, x + 1], axis=-1),
                                  np.stack([np.asarray(x), np.asarray(x) + 1], -1))
    us = lax.unstack(x, axis=1)
    assert len(us) == 3
    np.testing.assert_array_equal(us[2], np.asarray(x)[:, 2])
    # composites differentiate and batch through their primitives
    f = lambda v: jnp.sum(lax.tile(v, (3,)) ** 2) + jnp.sum(lax.split(v, (1, 2))[1])
    check_grads(f, (np.array([0.5, -1.0, 2.0]),), order=1)
    out = plax.vmap(lambda v: lax.stack([v, 2 * v]))(jnp.ones((4, 2)))
    assert out.shape == (4, 2, 2)


def test_index_take_batch_matmul_reciprocal():
    src = R.standard_normal((3, 4, 5)).astype(np.float32)
    i0, i1 = np.array([0, 2, 1]), np.array([3, 0, 1])
    np.testing.assert_array_equal(lax.index_take(src, (i0, i1), (0, 1)), src[i0, i1])
    np.testing.assert_array_equal(lax.index_take(src, (i1,), (2,)), np.moveaxis(src[:, :, i1], 2, 0))
    a, b = R.standard_normal((2, 3, 4)).astype(np.float32), R.standard_normal((2, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(lax.batch_matmul(a, b), a @ b, rtol=1e-5)
    with pytest.raises(ValueError, match="same ndim"):
        lax.batch_matmul(a, b[0])
    np.testing.assert_allclose(lax.reciprocal(jnp.array([2.0, -4.0])), [0.5, -0.25])
    assert "integer_pow" in str(plax.make_jaxpr(lax.reciprocal)(1.0))


def test_square_clz_mulhi_wrappers():
    np.testing.assert_array_equal(lax.square(jnp.array([3, -4], jnp.int32)), [9, 16])
    np.testing.assert_allclose(plax.grad(lambda v: lax.square(v))(1.5), 3.0)
    x = np.array([0, 1, 255, -1, 2 ** 20], np.int32)
    want = [32 - int(v % 2 ** 32).bit_length() for v in x.tolist()]
    np.testing.assert_array_equal(lax.clz(x), want)
    a = R.integers(-2 ** 31, 2 ** 31, 20, dtype=np.int64).astype(np.int32)
    b = R.integers(-2 ** 31, 2 ** 31, 20, dtype=np.int64).astype(np.int32)
    np.testing.assert_array_equal(lax.mulhi(a, b), [(int(p) * int(q)) >> 32 for p, q in zip(a, b)])


def test_scatter_sub_and_apply():
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    idx = np.array([[1], [3], [1]])
    out = lax.scatter_sub(jnp.ones(5), idx, jnp.array([1.0, 2.0, 3.0]), dn)
    np.testing.assert_allclose(out, [1, -3, 1, -1, 1])
    applied = lax.scatter_apply(jnp.ones(5), idx, lambda v: v * 3, dn, update_shape=(3,))
    np.testing.assert_allclose(applied, [1, 9, 1, 3, 1])   # index 1 listed twice: applied twice
    jitted = plax.jit(lambda o: lax.scatter_apply(o, idx, lambda v: v + 1, dn, update_shape=(3,)))
    np.testing.assert_allclose(jitted(jnp.zeros(5)), [0, 2, 0, 1, 0])


def test_reduce():
    x = R.standard_normal((3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(lax.reduce(x, 0.0, lax.add, (0, 2)), x.sum((0, 2)), rtol=1e-5)
    np.testing.assert_allclose(lax.reduce(x, -np.inf, lax.max, (1,)), x.max(1))
    assert "reduce_sum" in str(plax.make_jaxpr(lambda v: lax.reduce(v, 0.0, lax.add, (1,)))(x))
    # a general computation, a tuple of operands and odd lengths (argmax as a reduction)
    vals = x.reshape(3, 20)
    idx = np.broadcast_to(np.arange(20, dtype=np.int32), (3, 20))

    def argmax_comp(a, b):
        av, ai = a
        bv, bi = b
        take_a = (av > bv) | ((av == bv) & (ai < bi))
        return jnp.where(take_a, av, bv), jnp.where(take_a, ai, bi)

    best, where = lax.reduce((vals, idx), (np.float32(-np.inf), np.int32(0)), argmax_comp, (1,))
    np.testing.assert_array_equal(where, vals.argmax(1))
    np.testing.assert_allclose(best, vals.max(1))
    odd = R.standard_normal(7)
    np.testing.assert_allclose(lax.reduce(odd, 0.0, lambda a, b: a + b, (0,)), odd.sum(),
                               rtol=1e-6)
    np.testing.assert_allclose(lax.reduce(np.ones((2, 0)), 5.0, lambda a, b: a + b, (1,)), [5, 5])
    check_grads(lambda v: lax.reduce(v, 1.0, lambda a, b: a * b, (0,)),
                (np.array([0.5, 1.5, -2.0]),), order=1)


def test_approx_top_k():
    x = R.standard_normal((4, 10)).astype(np.float32)
    vals, idx = lax.approx_max_k(x, 3)
    np.testing.assert_allclose(vals, -np.sort(-x, 1)[:, :3])
    np.testing.assert_array_equal(idx, np.argsort(-x, 1, kind="stable")[:, :3])
    vals, idx = lax.approx_min_k(x, 2, reduction_dimension=0)
    np.testing.assert_allclose(vals, np.sort(x, 0)[:2])
    np.testing.assert_array_equal(idx, np.argsort(x, 0, kind="stable")[:2])


def test_ragged_dot():
    lhs = R.standard_normal((7, 3)).astype(np.float32)
    rhs = R.standard_normal((3, 3, 2)).astype(np.float32)
    sizes = np.array([2, 0, 4])          # the last row is in no group: zeros
    out = lax.ragged_dot(lhs, rhs, sizes)
    group = np.repeat(np.arange(3), sizes)
    want = np.zeros((7, 2), np.float32)
    for m, g in enumerate(group):
        want[m] = lhs[m] @ rhs[g]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    check_grads(lambda a, b: lax.ragged_dot(a, b, sizes),
                (lhs.astype(np.float64)[:3], rhs.astype(np.float64)), order=1)


def _patches_ref(x, fh, fw, stride):
    n, c, h, w = x.shape
    oh, ow = (h - fh) // stride + 1, (w - fw) // stride + 1
    out = np.zeros((n, c * fh * fw, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            win = x[:, :, i * stride:i * stride + fh, j * stride:j * stride + fw]
            out[:, :, i, j] = win.reshape(n, c * fh * fw)
    return out


def test_conv_patches_and_local():
    x = R.standard_normal((2, 3, 6, 5)).astype(np.float32)
    patches = lax.conv_general_dilated_patches(x, (2, 3), (1, 1), "VALID")
    np.testing.assert_allclose(patches, _patches_ref(x, 2, 3, 1), rtol=1e-6)
    w = R.standard_normal((4, 3 * 2 * 3, 5, 3)).astype(np.float32)  # O, I, out H, out W
    out = lax.conv_general_dilated_local(x, w, (1, 1), "VALID", (2, 3))
    ref = np.einsum("nfhw,ofhw->nohw", _patches_ref(x, 2, 3, 1), w)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    nhwc = np.moveaxis(x, 1, -1)
    p2 = lax.conv_general_dilated_patches(nhwc, (2, 3), (2, 1), "VALID",
                                          dimension_numbers=("NHWC", "OIHW", "NHWC"))
    np.testing.assert_allclose(np.moveaxis(np.asarray(p2), -1, 1), _patches_ref(x, 2, 3, 1)[:, :, ::2],
                               rtol=1e-6)


def test_conv_shape_tuples_match_conv():
    x = jnp.ones((2, 9, 7, 3))
    k = jnp.ones((3, 2, 3, 4))
    dn = ("NHWC", "HWIO", "NHWC")
    for pad in ("VALID", "SAME", ((1, 2), (0, 1))):
        out = lax.conv_general_dilated(x, k, (2, 1), pad, dimension_numbers=dn)
        assert lax.conv_general_shape_tuple(x.shape, k.shape, (2, 1), pad, dn) == out.shape
    for pad in ("VALID", "SAME"):
        out = lax.conv_transpose(x, k, (2, 2), pad, dimension_numbers=dn)
        assert lax.conv_transpose_shape_tuple(x.shape, k.shape, (2, 2), pad, dn) == out.shape
    assert lax.conv_shape_tuple((1, 3, 8, 8), (4, 3, 3, 3), (2, 2), "SAME") == (1, 4, 4, 4)
    y = lax.reduce_window(jnp.ones((5, 7)), 0.0, lax.add, (2, 3), (2, 2), ((0, 1), (1, 0)))
    assert lax.reduce_window_shape_tuple((5, 7), (2, 3), (2, 2), ((0, 1), (1, 0))) == y.shape


def test_identities_and_enums():
    tree = (1.0, {"a": jnp.ones(2)})
    out = lax.optimization_barrier(tree)
    np.testing.assert_array_equal(out[1]["a"], [1, 1])
    assert lax.stage(2.0).dtype == np.float32
    assert lax.dce_sink(jnp.ones(1)) is None
    f = lax.composite(lambda v: v * 2, name="my.double")
    np.testing.assert_array_equal(f(jnp.arange(3)), [0, 2, 4])
    assert lax.platform_dependent(1, cpu=lambda v: v + 1, default=lambda v: v) == 2
    with pytest.raises(NotImplementedError):
        lax.platform_dependent(1, tpu=lambda v: v)
    assert lax.Precision("highest") is lax.Precision.HIGHEST and str(lax.Precision.HIGH) == "HIGH"
    x = jnp.ones((2, 2))
    np.testing.assert_allclose(lax.dot(x, x, precision=lax.Precision.HIGHEST), 2 * np.ones((2, 2)))
    assert lax.Tolerance(rtol=1e-3).rtol == 1e-3
    assert int(lax.RandomAlgorithm.RNG_THREE_FRY) == 1


@needs_jax
def test_against_jax():
    x = R.standard_normal((2, 3, 6, 5)).astype(np.float32)
    np.testing.assert_allclose(
        lax.conv_general_dilated_patches(x, (2, 2), (2, 1), ((1, 0), (0, 1)), rhs_dilation=(1, 2)),
        jlax.conv_general_dilated_patches(x, (2, 2), (2, 1), ((1, 0), (0, 1)), rhs_dilation=(1, 2)),
        rtol=1e-6)
    w = R.standard_normal((4, 12, 3, 5)).astype(np.float32)
    np.testing.assert_allclose(lax.conv_general_dilated_local(x, w, (2, 1), "SAME", (2, 2)),
                               jlax.conv_general_dilated_local(x, w, (2, 1), "SAME", (2, 2)),
                               rtol=1e-4, atol=1e-5)
    lhs, rhs = R.standard_normal((6, 3)), R.standard_normal((2, 3, 4))
    sizes = np.array([4, 1], np.int32)
    np.testing.assert_allclose(lax.ragged_dot(lhs, rhs, sizes), jlax.ragged_dot(lhs, rhs, sizes),
                               rtol=1e-5, atol=1e-6)
    for args in [((1, 8, 8, 3), (3, 3, 3, 4), (2, 2), "SAME", ("NHWC", "HWIO", "NHWC")),
                 ((1, 3, 9, 9), (4, 3, 2, 2), (3, 1), "VALID", ("NCHW", "OIHW", "NCHW"))]:
        assert lax.conv_general_shape_tuple(*args) == tuple(jlax.conv_general_shape_tuple(*args))
    assert lax.conv_general_permutations(("NHWC", "HWIO", "NHWC")) == \
        jlax.conv_general_permutations(("NHWC", "HWIO", "NHWC"))
    assert lax.conv_general_permutations(("NCHW", "OIHW", "NHWC")) == \
        jlax.conv_general_permutations(("NCHW", "OIHW", "NHWC"))
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    jdn = jlax.ScatterDimensionNumbers((), (0,), (0,))
    idx = np.array([[0], [0], [2]])
    np.testing.assert_allclose(
        lax.scatter_apply(jnp.ones(4), idx, lambda v: v * 2 + 1, dn, update_shape=(3,)),
        jlax.scatter_apply(jjnp.ones(4), idx, lambda v: v * 2 + 1, jdn, update_shape=(3,)))
    assert [p.name for p in lax.Precision] == [p.name for p in jlax.Precision]
    assert {p.name for p in lax.DotAlgorithmPreset} <= {p.name for p in jlax.DotAlgorithmPreset}


def _richardson(mv, r):
    # a fixed-step iteration a reverse-mode pass could not differentiate through cheaply
    return lax.fori_loop(0, 80, lambda i, x: x + 0.2 * (r - mv(x)), jnp.zeros_like(r))


def test_custom_linear_solve():
    m = np.array([[2.0, 0.5], [0.3, 3.0]])
    b = np.array([1.0, 2.0])
    x = np.linalg.solve(m, b)

    def f(mat, rhs):
        return lax.custom_linear_solve(lambda v: mat @ v, rhs, _richardson, _richardson)

    np.testing.assert_allclose(f(m, b), x, rtol=1e-5)
    lam = np.linalg.solve(m.T, np.ones(2))
    np.testing.assert_allclose(plax.grad(lambda r: f(m, r).sum())(b), lam, rtol=1e-5)
    np.testing.assert_allclose(plax.grad(lambda a: f(a, b).sum())(m), -np.outer(lam, x),
                               rtol=1e-5)
    np.testing.assert_allclose(plax.jit(plax.grad(lambda r: f(m, r).sum()))(b), lam, rtol=1e-5)
    spd = m @ m.T
    sym = lambda r: lax.custom_linear_solve(lambda v: spd @ v, r,  # noqa: E731
                                            lambda mv, q: jnp.linalg.solve(spd, q),
                                            symmetric=True)
    np.testing.assert_allclose(plax.grad(lambda r: sym(r)[0])(b),
                               np.linalg.solve(spd, [1.0, 0.0]), rtol=1e-6)
    with pytest.raises(TypeError, match="transpose_solve"):
        plax.grad(lambda r: lax.custom_linear_solve(lambda v: m @ v, r, _richardson).sum())(b)
    x_aux, aux = lax.custom_linear_solve(lambda v: m @ v, b,
                                         lambda mv, r: (jnp.linalg.solve(m, r), 7), has_aux=True)
    np.testing.assert_allclose(x_aux, x, rtol=1e-6)
    assert aux == 7


def test_custom_root():
    def newton(f, x0):
        return lax.fori_loop(0, 30, lambda i, x: x - f(x) / plax.grad(f)(x), x0)

    def cube_root(a):
        return lax.custom_root(lambda x: x ** 3 - a, 1.0, newton, lambda g, y: y / g(1.0))

    np.testing.assert_allclose(cube_root(8.0), 2.0, rtol=1e-6)
    # d a^(1/3) / da = a^(-2/3) / 3
    np.testing.assert_allclose(plax.grad(cube_root)(8.0), 8.0 ** (-2 / 3) / 3, rtol=1e-6)
    np.testing.assert_allclose(plax.jit(plax.grad(cube_root))(27.0), 27.0 ** (-2 / 3) / 3,
                               rtol=1e-6)
    vals = plax.vmap(cube_root)(jnp.array([1.0, 8.0, 27.0]))
    np.testing.assert_allclose(vals, [1.0, 2.0, 3.0], rtol=1e-6)


@needs_jax
def test_implicit_solves_against_jax():
    m = np.array([[2.0, 0.5], [0.3, 3.0]], np.float32)
    b = np.array([1.0, 2.0], np.float32)

    def jrich(mv, r):
        return jax.lax.fori_loop(0, 80, lambda i, x: x + 0.2 * (r - mv(x)), jjnp.zeros_like(r))

    want = jax.grad(lambda a: jlax.custom_linear_solve(lambda v: a @ v, b, jrich, jrich).sum())(m)
    got = plax.grad(lambda a: lax.custom_linear_solve(lambda v: a @ v, b, _richardson,
                                                      _richardson).sum())(m)
    np.testing.assert_allclose(got, want, rtol=1e-5)

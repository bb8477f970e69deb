"""lax.ragged_dot / ragged_dot_general (plax.lax.ragged): the three modes against NumPy
float64 loops, gradients against finite differences, vmap against a Python loop, jit against
eager, dtypes and errors as JAX 0.10.2 (cross-checks skip where JAX is not installed)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.test_util import check_grads

R = np.random.default_rng(25)
Dims = lax.RaggedDotDimensionNumbers


def _bounds(sizes):
    ends = np.cumsum(sizes)
    return list(zip(ends - sizes, ends))


def _ref_noncontracting(lhs, rhs, sizes):
    """[b, m, k], [g, b, k, n], [b, g] -> [b, m, n], a loop over batch entries and groups."""
    out = np.zeros((lhs.shape[0], lhs.shape[1], rhs.shape[-1]))
    for b in range(lhs.shape[0]):
        for g, (s, e) in enumerate(_bounds(sizes[b])):
            out[b, s:e] = lhs[b, s:e].astype(np.float64) @ rhs[g, b].astype(np.float64)
    return out


def _ref_contracting(lhs, rhs, sizes):
    """[m, k], [k, n], [g] -> [g, m, n]."""
    return np.stack([lhs[:, s:e].astype(np.float64) @ rhs[s:e].astype(np.float64)
                     for s, e in _bounds(sizes)])


# (lhs shape, rhs shape, group sizes, dimension numbers, reference or None)
CASES = {
    "moe": ((7, 3), (3, 3, 2), [2, 0, 4], ((((1,), (1,)), ((), ())), (0,), (0,)),
            lambda l, r, g: _ref_noncontracting(l[None], r[:, None], g[None])[0]),
    "noncontracting_batched": ((2, 5, 3), (3, 2, 3, 4), [[1, 2, 2], [0, 3, 1]],
                               ((((2,), (2,)), ((0,), (1,))), (1,), (0,)),
                               _ref_noncontracting),
    "noncontracting_group_last": ((5, 4), (4, 3, 2), [2, 1], ((((1,), (0,)), ((), ())),
                                                                  (0,), (2,)),
                                  lambda l, r, g: _ref_noncontracting(
                                      l[None], np.moveaxis(r, 2, 0)[:, None], g[None])[0]),
    # batch dimensions listed out of order: group_sizes follow the listed order [b2, b1, g]
    "noncontracting_batch_order": ((2, 3, 5, 4), (2, 3, 2, 4, 3), [[[1, 4], [2, 2]],
                                                                   [[5, 0], [0, 3]],
                                                                   [[2, 1], [3, 2]]],
                                   ((((3,), (3,)), ((1, 0), (1, 0))), (2,), (2,)),
                                   lambda l, r, g: np.stack([np.stack([
                                       _ref_noncontracting(l[b1, b2][None],
                                                           r[b1, b2][:, None],
                                                           g[b2, b1][None])[0]
                                       for b1 in range(2)]) for b2 in range(3)])),
    "contracting": ((4, 6), (6, 5), [1, 3, 2], ((((1,), (0,)), ((), ())), (1,), ()),
                    _ref_contracting),
    "contracting_batched": ((2, 4, 6), (2, 6, 5), [[1, 3, 2], [2, 2, 1]],
                            ((((2,), (1,)), ((0,), (0,))), (2,), ()),
                            lambda l, r, g: np.stack([_ref_contracting(l[b], r[b], g[b])
                                                      for b in range(2)], 1)),
    "batch": ((6, 2, 3), (6, 3, 4), [1, 2, 1], ((((2,), (1,)), ((0,), (0,))), (0,), ()),
              lambda l, r, g: np.einsum("bmk,bkn->bmn", l.astype(np.float64), r)),
}


def _operands(name, dtype=np.float32):
    lshape, rshape, sizes, dims, _ = CASES[name]
    lhs = R.standard_normal(lshape).astype(dtype)
    rhs = R.standard_normal(rshape).astype(dtype)
    return lhs, rhs, np.asarray(sizes, np.int32), Dims(*dims)


@pytest.mark.parametrize("name", sorted(CASES))
def test_modes_match_numpy_loop(name):
    lhs, rhs, sizes, dims = _operands(name)
    out = lax.ragged_dot_general(lhs, rhs, sizes, dims)
    np.testing.assert_allclose(out, CASES[name][4](lhs, rhs, sizes), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_modes_match_jax(name):
    jax = pytest.importorskip("jax")
    lhs, rhs, sizes, dims = _operands(name)
    want = jax.lax.ragged_dot_general(lhs, rhs, sizes, jax.lax.RaggedDotDimensionNumbers(
        dims.dot_dimension_numbers, dims.lhs_ragged_dimensions, dims.rhs_group_dimensions))
    out = lax.ragged_dot_general(lhs, rhs, sizes, dims)
    assert out.shape == want.shape and out.dtype == want.dtype
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_ragged_dot_is_the_moe_case():
    lhs, rhs, sizes, dims = _operands("moe")
    np.testing.assert_array_equal(lax.ragged_dot(lhs, rhs, sizes),
                                  lax.ragged_dot_general(lhs, rhs, sizes, dims))


def test_dimension_numbers_are_hashable_tuples():
    dims = Dims([[[1], [1]], [[], []]], [0], [0])
    assert dims == Dims((((1,), (1,)), ((), ())), (0,), (0,))
    assert dims.lhs_ragged_dimensions == (0,) and hash(dims) == hash(Dims(*dims.__dict__.values()))


def test_dimension_numbers_print_as_jax():
    jax = pytest.importorskip("jax")
    args = ([[[1], [1]], [[], []]], [0], [0])
    assert repr(Dims(*args)) == repr(jax.lax.RaggedDotDimensionNumbers(*args))


@pytest.mark.parametrize("name", ["moe", "noncontracting_batched", "contracting", "batch"])
def test_grads_match_finite_differences(name):
    lhs, rhs, sizes, dims = _operands(name, np.float64)
    check_grads(lambda a, b: lax.ragged_dot_general(a, b, sizes, dims), (lhs, rhs),
                order=1, modes=("fwd", "rev"))


def test_grad_matches_jax():
    jax = pytest.importorskip("jax")
    lhs, rhs, sizes, _ = _operands("moe")
    loss = lambda m: lambda a, b: (m.lax.ragged_dot(a, b, sizes) ** 2).sum()
    got = plax.grad(loss(plax), argnums=(0, 1))(lhs, rhs)
    want = jax.grad(loss(jax), argnums=(0, 1))(lhs, rhs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_vmap_matches_loop_any_axis():
    lhs, rhs, sizes, _ = _operands("moe")
    lhss = np.stack([lhs, 2 * lhs, -lhs], axis=1)              # batched along axis 1
    sizess = np.array([[2, 0, 4], [1, 1, 1], [0, 7, 0]], np.int32)
    out = plax.vmap(lax.ragged_dot, in_axes=(1, None, 0))(lhss, rhs, sizess)
    want = np.stack([lax.ragged_dot(lhss[:, i], rhs, sizess[i]) for i in range(3)])
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


def test_vmap_of_rhs_in_contracting_mode():
    lhs, rhs, sizes, dims = _operands("contracting")
    rhss = np.stack([rhs, -rhs])
    out = plax.vmap(lambda r: lax.ragged_dot_general(lhs, r, sizes, dims), in_axes=2)(
        np.moveaxis(rhss, 0, 2))
    want = np.stack([_ref_contracting(lhs, r, sizes) for r in rhss])
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_jit_matches_eager():
    for name in ("moe", "contracting_batched"):
        lhs, rhs, sizes, dims = _operands(name)
        f = lambda a, b, g: lax.ragged_dot_general(a, b, g, dims)
        np.testing.assert_allclose(plax.jit(f)(lhs, rhs, sizes), f(lhs, rhs, sizes),
                                   rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype, preferred", [
    ("float16", None), ("bfloat16", None), ("float32", None), ("complex64", None),
    ("int8", None), ("int32", None), ("uint8", None), ("bool", None),
    ("int8", "int32"), ("bfloat16", "float32"), ("float16", "float32")])
def test_dtypes(dtype, preferred):
    lhs = (R.integers(0, 3, (5, 3))).astype(jnp.dtype(dtype))
    rhs = (R.integers(0, 3, (2, 3, 2))).astype(jnp.dtype(dtype))
    sizes = np.array([2, 3], np.int8)                          # any integer dtype
    out = lax.ragged_dot(lhs, rhs, sizes, preferred_element_type=preferred)
    assert out.dtype == jnp.dtype(preferred or dtype)
    real = lambda x: np.real(np.asarray(x)).astype(np.float64)   # the values are real
    want = _ref_noncontracting(real(lhs)[None], real(rhs)[:, None], sizes[None])[0]
    if dtype == "bool":
        want = want != 0
    np.testing.assert_allclose(real(out), want, rtol=1e-2)
    jax = pytest.importorskip("jax")
    assert out.dtype == jax.lax.ragged_dot(lhs, rhs, sizes,
                                           preferred_element_type=preferred).dtype


BAD = {
    "float_group_sizes": (lambda m: m.lax.ragged_dot(np.ones((3, 2)), np.ones((2, 2, 2)),
                                                      np.array([1., 2.])), "integer"),
    "group_count": (lambda m: m.lax.ragged_dot(np.ones((3, 2)), np.ones((2, 2, 2)),
                                               np.array([1, 2, 0])), "size"),
    "scalar_group_sizes": (lambda m: m.lax.ragged_dot(np.ones((3, 2)), np.ones((2, 2, 2)),
                                                      np.array(1)), "rank"),
    "group_sizes_shape": (lambda m: m.lax.ragged_dot(np.ones((3, 2)), np.ones((2, 2, 2)),
                                                     np.array([[1, 2]])), r"\(2,\)"),
    "contracting_sizes": (lambda m: m.lax.ragged_dot(np.ones((3, 2)), np.ones((2, 3, 2)),
                                                     np.array([1, 2])), "same"),
    "group_dim_in_contracting_mode": (lambda m: m.lax.ragged_dot_general(
        np.ones((3, 2)), np.ones((2, 2)), np.array([1, 1]),
        m.lax.RaggedDotDimensionNumbers((([1], [0]), ([], [])), [1], [0])), "group dim"),
    "two_ragged_dims": (lambda m: m.lax.ragged_dot_general(
        np.ones((3, 2)), np.ones((2, 2)), np.array([1, 1]),
        m.lax.RaggedDotDimensionNumbers((([1], [0]), ([], [])), [0, 1], [])),
        "exactly one lhs ragged"),
    "ragged_dim_range": (lambda m: m.lax.ragged_dot_general(
        np.ones((3, 2)), np.ones((2, 2)), np.array([1, 1]),
        m.lax.RaggedDotDimensionNumbers((([1], [0]), ([], [])), [2], [])), "lhs ragged"),
    "no_group_dim_in_noncontracting_mode": (lambda m: m.lax.ragged_dot_general(
        np.ones((3, 2)), np.ones((2, 2)), np.array([1, 1]),
        m.lax.RaggedDotDimensionNumbers((([1], [0]), ([], [])), [0], [])), "rhs group"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_errors(name):
    call, match = BAD[name]
    with pytest.raises(TypeError, match=match):
        call(plax)


@pytest.mark.parametrize("name", sorted(BAD))
def test_errors_match_jax_type(name):
    jax = pytest.importorskip("jax")
    with pytest.raises(TypeError):
        BAD[name][0](jax)


def test_group_offset_is_not_supported():
    with pytest.raises(NotImplementedError, match="group_offset"):
        lax.ragged_dot(np.ones((3, 2)), np.ones((2, 2, 2)), np.array([1, 2]),
                       group_offset=np.array([0]))


def test_out_sharding_places_the_result():
    lhs, rhs, sizes, _ = _operands("moe")
    spec = plax.sharding.PartitionSpec("x")
    with plax.set_mesh(plax.make_mesh((1,), ("x",))):
        out = lax.ragged_dot(lhs, rhs, sizes, out_sharding=spec)
    assert isinstance(out.sharding, plax.sharding.NamedSharding)
    assert out.sharding.spec[0] == "x"
    np.testing.assert_array_equal(out, lax.ragged_dot(lhs, rhs, sizes))

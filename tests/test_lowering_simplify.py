"""plax.lowering.fold_transposed_products: a transpose of a matrix product becomes a product of
the swapped operands, with the same values, and only where that is legal."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.interpret import eval_jaxpr
from plax.lowering import fold_transposed_products


def _names(jaxpr):
    return [e.primitive.name for e in jaxpr.eqns]


def _run(jaxpr, consts, *args):
    return [np.asarray(v) for v in eval_jaxpr(jaxpr, consts, *args)]


@pytest.mark.parametrize("lc,rc", [(1, 0), (0, 0), (1, 1), (0, 1)])
def test_folds_every_contraction_layout_with_equal_values(lc, rc):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4) if lc == 1 else (4, 3)).astype(np.float32)
    b = rng.standard_normal((4, 5) if rc == 0 else (5, 4)).astype(np.float32)
    f = lambda a, b: lax.dot_general(a, b, (((lc,), (rc,)), ((), ()))).T
    closed = plax.make_jaxpr(f)(a, b)
    folded = fold_transposed_products(closed.jaxpr)
    assert _names(closed.jaxpr) == ["dot_general", "transpose"] and _names(folded) == ["dot_general"]
    (got,) = _run(folded, closed.consts, a, b)
    want = np.tensordot(a.astype(np.float64), b.astype(np.float64), ([lc], [rc])).T
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_product_read_elsewhere_or_returned_is_left_alone():
    a, b = jnp.ones((3, 4)), jnp.ones((4, 5))
    both = plax.make_jaxpr(lambda a, b: (lambda p: (p.T, p + 1))(a @ b))(a, b).jaxpr
    assert fold_transposed_products(both) is both
    other_perm = plax.make_jaxpr(lambda a, b: jnp.transpose(jnp.dot(a, b)[None], (0, 2, 1)))(a, b).jaxpr
    assert fold_transposed_products(other_perm) is other_perm
    batched = plax.make_jaxpr(lambda a, b: jnp.swapaxes(jnp.matmul(a, b), 1, 2))(
        jnp.ones((2, 3, 4)), jnp.ones((2, 4, 5))).jaxpr
    assert fold_transposed_products(batched) is batched


def test_min_elements_and_gradient_of_an_mlp_layer():
    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)
    w, x = jnp.ones((6, 4)) * 0.1, jnp.arange(12.0).reshape(2, 6) / 12
    closed = plax.make_jaxpr(plax.grad(loss))(w, x)
    assert "transpose" in _names(closed.jaxpr)
    folded = fold_transposed_products(closed.jaxpr)
    assert "transpose" not in _names(folded)
    assert fold_transposed_products(closed.jaxpr, min_elements=25) is closed.jaxpr  # 6x4 = 24
    (got,) = _run(folded, closed.consts, w, x)
    (want,) = _run(closed.jaxpr, closed.consts, w, x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_numba_backend_compiles_the_folded_product():
    if "numba" not in plax.plugins.registry().backends:
        pytest.skip("the numba backend is not installed")
    import plax_numba.backend as nb
    rng = np.random.default_rng(1)
    w = rng.standard_normal((200, 100)).astype(np.float32)
    x = rng.standard_normal((64, 200)).astype(np.float32)
    g = lambda w, x: plax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)
    got = np.asarray(plax.jit(g, backend="numba")(w, x))
    want = np.asarray(plax.jit(g, backend="numpy")(w, x))
    assert got.flags.c_contiguous and 200 * 100 >= nb.FOLD_MIN_ELEMENTS
    # both against float64: the backends' float32 products may round differently (another
    # BLAS kernel or thread count), each within float32's error for sums of 64 terms
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    d = 1 - np.tanh(x64 @ w64) ** 2
    exact, scale = x64.T @ d, np.abs(x64).T @ d
    for value in (got, want):
        assert np.all(np.abs(value - exact) <= 64 * np.finfo(np.float32).eps * (scale + 1))

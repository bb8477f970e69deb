"""``jax.linear_transpose`` (against the transposed matrix of the linear map, and beside JAX
0.10.2 where installed) and ``jax.clear_caches``."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp

_M = np.arange(6.0, dtype=np.float32).reshape(2, 3)

# name -> (function, example primals, cotangent)
_CASES = {
    "scalars": (lambda x, y: 0.5 * x - 3 * y, (1.0, 1.0), 1.0),
    "matrix": (lambda v: jnp.asarray(_M) @ v, (np.ones(3, np.float32),),
               np.array([1.0, 2.0], np.float32)),
    "cumsum": (lambda x: jnp.cumsum(x), (np.ones(3, np.float32),),
               np.array([1.0, 2.0, 3.0], np.float32)),
    "pytree": (lambda d: {"a": d["x"] * 2, "b": jnp.sum(d["y"])},
               ({"x": np.ones(2, np.float32), "y": np.ones(3, np.float32)},),
               {"a": np.array([1.0, 2.0], np.float32), "b": np.float32(3.0)}),
    "affine": (lambda x: x + 1.0, (1.0,), 1.0),
    "loop": (lambda x: plax.lax.fori_loop(0, 3, lambda i, c: c * 2.0, x),
             (np.ones(2, np.float32),), np.ones(2, np.float32)),
}


def _matrix_of(fun, n):
    """The matrix of a linear map of R^n, column by column (float64)."""
    return np.stack([np.asarray(fun(jnp.asarray(e, np.float32)), np.float64)
                     for e in np.eye(n)], axis=1)


def test_transpose_is_the_transposed_matrix():
    rng = np.random.default_rng(0)
    for f, n in [(lambda v: jnp.asarray(_M) @ v, 3), (lambda x: jnp.cumsum(x[::-1]) * 3, 4),
                 (lambda x: jnp.concatenate([x, 2 * x[:2]]), 3)]:
        A = _matrix_of(f, n)
        ct = rng.standard_normal(A.shape[0]).astype(np.float32)
        (got,) = plax.linear_transpose(f, jnp.ones(n))(jnp.asarray(ct))
        np.testing.assert_allclose(np.asarray(got, np.float64), A.T @ ct, rtol=1e-5)


def test_shape_dtype_structs_jit_and_pytrees():
    f_t = plax.linear_transpose(lambda x: jnp.sin(2.0) * x,
                                plax.ShapeDtypeStruct((2,), np.float32))
    np.testing.assert_allclose(f_t(jnp.ones(2))[0], np.full(2, np.sin(2.0)), rtol=1e-6)
    g = plax.jit(plax.linear_transpose(lambda x: x[::-1] * 2, jnp.ones(3)))
    np.testing.assert_array_equal(g(jnp.arange(3.0))[0], [4.0, 2.0, 0.0])
    f, primals, ct = _CASES["pytree"]
    (out,) = plax.linear_transpose(f, *primals)(ct)
    np.testing.assert_array_equal(out["x"], [2.0, 4.0])
    np.testing.assert_array_equal(out["y"], [3.0, 3.0, 3.0])


def test_errors():
    f_t = plax.linear_transpose(lambda x, y: 0.5 * x - 3 * y, 1.0, 1.0)
    with pytest.raises(TypeError, match=r"cotangent type does not match function output, "
                                        r"expected \(ShapedArray\(float32\[\], weak_type=True"):
        f_t(jnp.ones(2))
    with pytest.raises(TypeError, match="cotangent tree does not match function output"):
        f_t((1.0,))
    with pytest.raises(TypeError, match="only supports"):
        plax.linear_transpose(lambda x, y: x * 2.0 + y, 1, 1.0)
    with pytest.raises(TypeError, match="not linear in its arguments: mul"):
        plax.linear_transpose(lambda x: x * x, 1.0)
    with pytest.raises(TypeError, match="not linear in its arguments: sin"):
        plax.linear_transpose(jnp.sin, 1.0)


@pytest.mark.parametrize("name", sorted(_CASES))
def test_beside_jax(name):
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    f, primals, ct = _CASES[name]
    if name == "loop":
        jf = lambda x: jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0, x)  # noqa: E731
    elif name == "cumsum":
        jf = lambda x: jax.numpy.cumsum(x)  # noqa: E731
    elif name == "matrix":
        jf = lambda v: jax.numpy.asarray(_M) @ v  # noqa: E731
    elif name == "pytree":
        jf = lambda d: {"a": d["x"] * 2, "b": jax.numpy.sum(d["y"])}  # noqa: E731
    else:
        jf = f
    ours = plax.tree_util.tree_leaves(plax.linear_transpose(f, *primals)(ct))
    theirs = jax.tree_util.tree_leaves(jax.linear_transpose(jf, *primals)(ct))
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and a.weak_type == b.weak_type
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_clear_caches_makes_jit_trace_again():
    traces = []
    f = plax.jit(lambda x: (traces.append(1), x + 1)[1])
    f(1.0)
    f(2.0)
    assert len(traces) == 1
    plax.clear_caches()
    assert float(f(3.0)) == 4.0
    assert len(traces) == 2
    f(4.0)
    assert len(traces) == 2

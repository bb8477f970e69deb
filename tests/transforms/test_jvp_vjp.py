"""jvp, vjp, linearize, jacfwd, jacrev, jacobian and hessian: results on pytrees, float0
tangents, and the errors for mismatched structure, shape and dtype."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import dtypes
from plax import numpy as jnp

X = np.array([0.5, -1.0, 2.0], np.float32)
T = np.array([1.0, 0.5, -2.0], np.float32)


def _f(x):
    return jnp.sin(x) * x


def _df(x):  # derivative of sin(x) x, in float64
    x = np.asarray(x, np.float64)
    return np.cos(x) * x + np.sin(x)


# ------------------------------------------------------------------ jvp

def test_jvp_values_and_pytrees():
    out, t = plax.jvp(_f, (X,), (T,))
    np.testing.assert_allclose(out, np.sin(X) * X, rtol=1e-6)
    np.testing.assert_allclose(t, _df(X) * T, rtol=1e-6)
    f = lambda p: {"s": jnp.sum(p["a"] * p["b"]), "t": (p["a"] * 2,)}  # noqa: E731
    p = {"a": X, "b": T}
    tp = {"a": np.ones(3, np.float32), "b": np.zeros(3, np.float32)}
    out, t = plax.jvp(f, (p,), (tp,))
    assert set(t) == {"s", "t"} and isinstance(t["t"], tuple)
    np.testing.assert_allclose(t["s"], np.sum(T), rtol=1e-6)
    np.testing.assert_allclose(t["t"][0], 2 * np.ones(3))


def test_jvp_has_aux():
    out, t, aux = plax.jvp(lambda x: (_f(x), {"x": x}), (X,), (T,), has_aux=True)
    np.testing.assert_allclose(t, _df(X) * T, rtol=1e-6)
    np.testing.assert_allclose(aux["x"], X)


def test_jvp_integer_primal_takes_float0_tangent():
    out, t = plax.jvp(lambda x, n: x * n, (2.0, 3), (1.0, np.zeros((), dtypes.float0)))
    assert float(out) == 6.0 and float(t) == 3.0


@pytest.mark.parametrize("primals,tangents,exc,msg", [
    ((X,), (np.ones(2, np.float32),), ValueError, r"different primal and tangent shapes"),
    ((X,), (np.ones(3, np.int32),), TypeError, r"dtypes must be equal.*got tangent dtype int32"),
    ((X.astype(np.float16),), (T,), TypeError, r"expected tangent dtype float16"),
    ((3,), (1.0,), TypeError, r"tangent dtype must be float0"),
    ((X, X), (T,), TypeError, r"must have the same tree structure"),
    (X, T, TypeError, r"must be tuples or lists"),
])
def test_jvp_mismatch_errors(primals, tangents, exc, msg):
    f = (lambda *a: a[0]) if isinstance(primals, tuple) else _f
    with pytest.raises(exc, match=msg):
        plax.jvp(f, primals, tangents)


# ------------------------------------------------------------------ vjp

def test_vjp_values_pytrees_and_integers():
    out, f_vjp = plax.vjp(_f, X)
    (ct,) = f_vjp(T)
    np.testing.assert_allclose(ct, _df(X) * T, rtol=1e-6)
    out, f_vjp = plax.vjp(lambda p, n: {"y": p["a"] * n}, {"a": X}, 3)
    g_p, g_n = f_vjp({"y": T})
    np.testing.assert_allclose(g_p["a"], 3 * T)
    assert g_n.dtype == dtypes.float0


def test_vjp_has_aux_and_reuse():
    out, f_vjp, aux = plax.vjp(lambda x: (_f(x), x * 2), X, has_aux=True)
    np.testing.assert_allclose(aux, 2 * X)
    first, second = f_vjp(T)[0], f_vjp(2 * T)[0]  # a pullback can be called again
    np.testing.assert_allclose(second, 2 * np.asarray(first), rtol=1e-6)


@pytest.mark.parametrize("ct,exc,msg", [
    ((T,), ValueError, r"unexpected tree structure of argument to vjp function"),
    (np.ones(2, np.float32), ValueError, r"got f32\[2\], but expected f32\[3\]"),
    (np.ones(3, np.int32), ValueError, r"got i32\[3\], but expected f32\[3\]"),
])
def test_vjp_cotangent_mismatch_errors(ct, exc, msg):
    _, f_vjp = plax.vjp(_f, X)
    with pytest.raises(exc, match=msg):
        f_vjp(ct)


def test_vjp_pullback_takes_one_argument():
    _, f_vjp = plax.vjp(lambda x, y: x * y, X, X)
    with pytest.raises(TypeError, match="takes one argument"):
        f_vjp(T, T)


# ------------------------------------------------------------------ linearize

def test_linearize_matches_jvp_and_checks_tangents():
    out, f_jvp = plax.linearize(_f, X)
    np.testing.assert_allclose(out, np.sin(X) * X, rtol=1e-6)
    np.testing.assert_allclose(f_jvp(T), _df(X) * T, rtol=1e-6)
    np.testing.assert_allclose(f_jvp(2 * T), 2 * _df(X) * T, rtol=1e-6)
    out, f_jvp = plax.linearize(lambda p: p["a"] * p["b"], {"a": 2.0, "b": 3.0})
    assert float(f_jvp({"a": 1.0, "b": 0.0})) == 3.0
    with pytest.raises(TypeError, match="structure"):
        f_jvp(1.0)
    _, f_jvp = plax.linearize(_f, X)
    with pytest.raises(ValueError, match="different primal and tangent shapes"):
        f_jvp(np.ones(2, np.float32))


def test_linearize_does_not_rerun_the_function():
    calls = []

    def f(x):
        calls.append(1)
        return jnp.sin(x)

    _, f_jvp = plax.linearize(f, X)
    f_jvp(T)
    f_jvp(T)
    assert len(calls) == 1


# ------------------------------------------------------------------ Jacobians

def _fd_jac(f, x, eps=1e-3):
    x = np.asarray(x, np.float64)
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = eps
        e = e.reshape(x.shape)
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    return np.stack(cols, axis=-1).reshape(np.shape(f(x)) + x.shape)


@pytest.mark.parametrize("jac", [plax.jacfwd, plax.jacrev, plax.jacobian])
def test_jacobian_values_and_shapes(jac):
    m = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]], np.float32)
    f = lambda x: jnp.tanh(jnp.asarray(m) @ x) * 2.0  # noqa: E731
    J = jac(f)(X)
    assert J.shape == (2, 3)
    np.testing.assert_allclose(J, _fd_jac(lambda x: np.tanh(m @ x) * 2.0, X), rtol=1e-4, atol=1e-5)
    x2 = X.reshape(1, 3).repeat(2, 0)
    assert jac(lambda x: x.sum(0))(x2).shape == (3, 2, 3)
    assert jac(jnp.sin)(0.5).shape == ()


@pytest.mark.parametrize("jac", [plax.jacfwd, plax.jacrev])
def test_jacobian_pytrees_argnums_has_aux(jac):
    f = lambda p: {"o": p["a"] * p["b"], "s": jnp.sum(p["a"])}  # noqa: E731
    J = jac(f)({"a": X, "b": 2.0})
    assert set(J) == {"o", "s"} and set(J["o"]) == {"a", "b"}
    assert J["o"]["a"].shape == (3, 3) and J["o"]["b"].shape == (3,)
    assert J["s"]["a"].shape == (3,) and J["s"]["b"].shape == ()
    np.testing.assert_allclose(J["o"]["a"], 2 * np.eye(3))
    np.testing.assert_allclose(J["o"]["b"], X)
    ja, jb = jac(lambda a, b: a * b, argnums=(0, 1))(X, 2.0)
    np.testing.assert_allclose(ja, 2 * np.eye(3))
    np.testing.assert_allclose(jb, X)
    J, aux = jac(lambda x: (x ** 2, x.sum()), has_aux=True)(X)
    np.testing.assert_allclose(J, np.diag(2 * X))
    np.testing.assert_allclose(aux, X.sum())


@pytest.mark.parametrize("jac", [plax.jacfwd, plax.jacrev])
def test_jacobian_rejects_integer_inputs(jac):
    with pytest.raises(TypeError, match="requires real- or complex-valued inputs"):
        jac(lambda x: x * 2)(np.arange(3))


def test_hessian_values_and_pytree_structure():
    f = lambda x: jnp.sum(x ** 3) + x[0] * x[1]  # noqa: E731
    H = plax.hessian(f)(X)
    want = np.diag(6 * X.astype(np.float64))
    want[0, 1] = want[1, 0] = 1.0
    np.testing.assert_allclose(H, want, rtol=1e-6)
    H = plax.hessian(lambda p: jnp.sum(p["a"] ** 2 * p["b"]))({"a": X, "b": 2.0})
    assert H["a"]["a"].shape == (3, 3) and H["a"]["b"].shape == (3,) and H["b"]["b"].shape == ()
    np.testing.assert_allclose(H["a"]["a"], 4 * np.eye(3))
    np.testing.assert_allclose(H["a"]["b"], 2 * X)
    np.testing.assert_allclose(H["b"]["a"], 2 * X)
    assert float(H["b"]["b"]) == 0.0
    np.testing.assert_allclose(plax.hessian(jnp.sin)(0.5), -np.sin(0.5), rtol=1e-6)


@pytest.mark.parametrize("transform", [
    lambda f: plax.jvp(f, (1.0,), (1.0,)),
    lambda f: plax.vjp(f, 1.0),
    lambda f: plax.jacfwd(f)(X),
    lambda f: plax.jacrev(f)(X),
    lambda f: plax.linearize(f, 1.0),
])
def test_non_array_output_raises_type_error(transform):
    with pytest.raises(TypeError, match="'s' of type str returned by the differentiated "
                                        "function is not a valid JAX type"):
        transform(lambda x: "s")

"""plax.scipy.optimize.minimize (BFGS) against scipy.optimize in float64, under jit and vmap."""
import numpy as np
import pytest
import scipy.optimize as so

import plax
import plax.numpy as jnp
from plax.scipy.optimize import OptimizeResults, minimize


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


def rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def quad(x, a, c):
    d = x - c
    return 0.5 * jnp.dot(d, jnp.dot(a, d)) + jnp.sum(jnp.cos(d) * 0.01)


def _spd(n, seed=0):
    m = np.random.default_rng(seed).normal(size=(n, n))
    return m @ m.T + n * np.eye(n)


def test_fields_and_types():
    assert OptimizeResults._fields == ("x", "success", "status", "fun", "jac", "hess_inv",
                                       "nfev", "njev", "nit")
    res = minimize(lambda x: jnp.sum((x - 3.0) ** 2), jnp.zeros(2), method="BFGS")
    assert isinstance(res, OptimizeResults)
    np.testing.assert_allclose(res.x, [3.0, 3.0], atol=1e-8)
    assert bool(res.success) and int(res.status) == 0
    assert res.x.dtype == np.float64 and res.hess_inv.shape == (2, 2)
    assert int(res.nfev) == int(res.njev) >= int(res.nit) >= 1


def test_rosenbrock_2d_matches_scipy():
    x0 = np.array([-1.2, 1.0])
    res = minimize(rosen, jnp.asarray(x0), method="BFGS")
    ref = so.minimize(lambda x: float(rosen(jnp.asarray(x))), x0, method="BFGS")
    assert bool(res.success)
    np.testing.assert_allclose(res.x, ref.x, atol=1e-4)
    np.testing.assert_allclose(res.x, [1.0, 1.0], atol=1e-5)
    np.testing.assert_allclose(res.jac, plax.grad(rosen)(res.x), rtol=1e-12)
    assert float(res.fun) < 1e-10


def test_quadratic_with_args_and_hess_inv():
    n = 4
    a, c = _spd(n), np.arange(n, dtype=float)
    res = minimize(quad, jnp.zeros(n), args=(jnp.asarray(a), jnp.asarray(c)), method="bfgs")
    ref = so.minimize(lambda x: float(quad(jnp.asarray(x), a, c)), np.zeros(n),
                      jac=lambda x: np.asarray(plax.grad(quad)(jnp.asarray(x), a, c)),
                      method="BFGS", options=dict(gtol=1e-8))
    assert bool(res.success)
    np.testing.assert_allclose(res.x, ref.x, atol=1e-6)
    # the BFGS inverse-Hessian estimate approaches the true inverse Hessian
    hess = np.asarray(plax.hessian(quad)(res.x, a, c))
    np.testing.assert_allclose(np.asarray(res.hess_inv) @ hess, np.eye(n), atol=0.1)


def test_options_and_tol():
    x0 = jnp.asarray([-1.2, 1.0])
    res = minimize(rosen, x0, method="BFGS", options=dict(maxiter=3))
    assert int(res.nit) == 3 and int(res.status) == 1 and not bool(res.success)
    loose = minimize(rosen, x0, method="BFGS", tol=1e-1)
    tight = minimize(rosen, x0, method="BFGS", options=dict(gtol=1e-9, norm=2))
    assert int(loose.nit) < int(tight.nit)
    assert float(jnp.linalg.norm(tight.jac)) < 1e-9


def test_jit_and_vmap():
    a, c = jnp.asarray(_spd(3)), jnp.asarray([1.0, -2.0, 0.5])
    solve = lambda x0: minimize(quad, x0, args=(a, c), method="BFGS")
    x0s = jnp.asarray(np.random.default_rng(1).normal(size=(3, 3)))
    batched = plax.vmap(solve)(x0s)
    jitted = plax.jit(solve)(x0s[1])
    for i in range(3):
        single = solve(x0s[i])
        np.testing.assert_allclose(batched.x[i], single.x, rtol=1e-10, atol=1e-12)
        assert int(batched.nit[i]) == int(single.nit)
    np.testing.assert_allclose(jitted.x, solve(x0s[1]).x, rtol=1e-12)
    assert bool(jnp.all(batched.success))


def test_float32():
    with plax.config.override("jax_enable_x64", False):
        res = minimize(lambda x: jnp.sum((x - 1.5) ** 2), jnp.zeros(3, jnp.float32),
                       method="BFGS")
        assert res.x.dtype == np.float32
        np.testing.assert_allclose(res.x, 1.5, rtol=1e-5)


def test_bad_input():
    with pytest.raises(TypeError, match="tuple"):
        minimize(rosen, jnp.zeros(2), args=[1], method="BFGS")
    with pytest.raises(ValueError, match="not recognized"):
        minimize(rosen, jnp.zeros(2), method="Nelder-Mead")
    with pytest.raises(ValueError, match="1-dimensional"):
        minimize(rosen, jnp.zeros((2, 2)), method="BFGS")

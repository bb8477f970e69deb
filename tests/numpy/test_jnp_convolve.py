"""jnp.convolve and jnp.correlate (built on lax.conv_general_dilated): every mode and
length order against NumPy in float64, complex conjugation, dtype promotion, gradients,
vmap, jit and errors."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads

RNG = np.random.default_rng(0)
LENGTHS = [(5, 4), (4, 5), (6, 4), (4, 6), (5, 2), (2, 5), (1, 4), (4, 1), (3, 3)]


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n,m", LENGTHS)
@pytest.mark.parametrize("name", ["convolve", "correlate"])
def test_matches_numpy(name, n, m, mode):
    a = RNG.standard_normal(n)
    v = RNG.standard_normal(m) + 1j * RNG.standard_normal(m)
    with plax.config.override("enable_x64", True):
        for vv in (v, v.real.copy()):
            got = getattr(jnp, name)(a, vv, mode)
            expected = getattr(np, name)(a, vv, mode)
            assert got.shape == expected.shape
            np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-12, atol=1e-12)


def test_defaults_and_dtypes():
    a, v = np.array([1, 2, 3], np.int32), np.array([0, 1, 2], np.int32)
    assert jnp.convolve(a, v).shape == (5,)       # "full"
    assert jnp.correlate(a, v).shape == (1,)      # "valid"
    assert jnp.convolve(a, v).dtype == np.float32  # integers promote to inexact, as in JAX
    assert jnp.convolve(a.astype(np.float16), v.astype(np.float16)).dtype == np.float16


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_grads_vmap_jit(mode):
    a, v = RNG.standard_normal(6).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    for f in (jnp.convolve, jnp.correlate):
        g = lambda a, v: f(a, v, mode)  # noqa: E731
        check_grads(g, (a, v), order=2, modes=("fwd", "rev"))
        np.testing.assert_allclose(np.asarray(plax.jit(g)(a, v)), np.asarray(g(a, v)), rtol=1e-6)
        batch = RNG.standard_normal((3, 6)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(plax.vmap(g, (0, None))(batch, v)),
                                   np.stack([np.asarray(g(b, v)) for b in batch]), rtol=1e-5,
                                   atol=1e-6)


def test_matches_jax():
    J = pytest.importorskip("jax.numpy")
    a, v = RNG.standard_normal(7).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    for mode in ("full", "same", "valid"):
        for name in ("convolve", "correlate"):
            np.testing.assert_allclose(np.asarray(getattr(jnp, name)(v, a, mode)),
                                       np.asarray(getattr(J, name)(v, a, mode)), rtol=1e-5,
                                       atol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="only support 1-dimensional inputs"):
        jnp.convolve(np.ones((2, 2)), np.ones(3))
    with pytest.raises(ValueError, match="inputs cannot be empty, got shapes \\(0,\\) and \\(3,\\)"):
        jnp.correlate(np.ones(0), np.ones(3))
    with pytest.raises(ValueError, match="mode"):
        jnp.convolve(np.ones(3), np.ones(3), "middle")
    with pytest.raises(TypeError):
        jnp.convolve([1.0, 2.0], np.ones(3))

"""Window functions of plax.numpy (bartlett, blackman, hamming, hanning, kaiser): values against
NumPy in float64, dtypes against JAX's recording, kaiser's gradient in beta, jit with a static
length, and the concretization error for a traced length."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads
from jnp_extras_dtype_table import EXPRESSIONS, check_like_recorded, describe_plax

NAMES = ["bartlett", "blackman", "hamming", "hanning"]


@pytest.mark.parametrize("expr", EXPRESSIONS["window_functions"])
def test_dtype_weak_type_and_value_like_jax(expr):
    check_like_recorded(expr, describe_plax)


@pytest.mark.parametrize("M", [-2, 0, 1, 2, 5, 16, np.int64(9)])
@pytest.mark.parametrize("name", NAMES)
def test_cosine_windows_against_numpy(name, M):
    with plax.config.override("jax_enable_x64", True):
        np.testing.assert_allclose(np.asarray(getattr(jnp, name)(M)), getattr(np, name)(M),
                                   atol=1e-13)


@pytest.mark.parametrize("M", [0, 1, 2, 7, 12])
@pytest.mark.parametrize("beta", [0.0, 3.5, 8.6, 14.0])
def test_kaiser_against_numpy(M, beta):
    with plax.config.override("jax_enable_x64", True):
        np.testing.assert_allclose(np.asarray(jnp.kaiser(M, beta)), np.kaiser(M, beta),
                                   rtol=1e-12, atol=1e-14)


def test_windows_default_to_float32():
    for fn in [jnp.bartlett, jnp.blackman, jnp.hamming, jnp.hanning]:
        assert fn(4).dtype == np.float32
    assert jnp.kaiser(4, 2).dtype == np.float32


def test_kaiser_gradient_in_beta():
    with plax.config.override("jax_enable_x64", True):
        check_grads(lambda b: jnp.kaiser(6, b), (np.float64(2.5),), 2)
        check_grads(lambda b: jnp.kaiser(5, b).sum(), (np.float64(0.7),), 1)


def test_jit_vmap_and_traced_length():
    hanning = plax.jit(jnp.hanning, static_argnums=0)
    np.testing.assert_allclose(np.asarray(hanning(7)), np.hanning(7), atol=1e-6)
    with pytest.raises(plax.errors.ConcretizationTypeError, match="static"):
        plax.jit(jnp.hamming)(5)
    with pytest.raises(TypeError, match="integer"):
        jnp.blackman(2.5)
    betas = np.array([0.0, 2.0, 5.0], np.float32)
    got = plax.vmap(lambda b: jnp.kaiser(8, b))(betas)
    np.testing.assert_allclose(np.asarray(got), np.stack([np.kaiser(8, b) for b in betas]),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(plax.jit(lambda b: jnp.kaiser(8, b))(2.0)),
                               np.kaiser(8, 2.0), rtol=1e-5)

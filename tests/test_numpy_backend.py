"""The NumPy backend's jaxpr compiler: results equal eager execution, temporaries are freed and
reused without ever writing into an input or an output, and the branch-free select is exact."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax


def _compiled_source(jitted, *args) -> str:
    jitted(*args)
    entry = next(iter(jitted._cache.values()))
    return entry.executable.__plax_source__


def test_chain_matches_eager_and_leaves_inputs_untouched():
    rng = np.random.default_rng(0)
    host = rng.standard_normal(10_000).astype(np.float32)
    # on the CPU, so that the eager reference f(x) runs there too (not on a GPU that is the
    # default platform: its exp may differ by an ulp, which y's cancellation magnifies)
    x = plax.device_put(host, plax.devices("cpu")[0])

    def f(x):
        y = jnp.exp(x) * 1.5 - 2.0
        z = jnp.where(x > 0, y, x) * y
        return z / (1.0 + x * x)

    out = plax.jit(f, backend="numpy")(x)
    np.testing.assert_allclose(np.asarray(out), np.asarray(f(x)), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(x), host)  # the input buffer was not reused
    src = _compiled_source(plax.jit(f, backend="numpy"), x)
    assert "out=" in src and "del " in src, src


def test_intermediate_that_is_also_an_output_is_not_overwritten():
    x = jnp.arange(5000, dtype=jnp.float32) / 1000

    def f(x):
        a = jnp.exp(x)
        b = a * 2.0        # `a` is returned, so its buffer must not take `b`
        return a, b + 1.0

    a, b = plax.jit(f, backend="numpy")(x)
    np.testing.assert_allclose(np.asarray(a), np.exp(np.asarray(x)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(b), 2 * np.exp(np.asarray(x)) + 1, rtol=1e-6)


def test_operand_used_twice_in_one_equation():
    x = jnp.linspace(-2, 2, 5000)

    def f(x):
        t = jnp.sin(x)
        return t * t + 0.5

    out = plax.jit(f, backend="numpy")(x)
    np.testing.assert_allclose(np.asarray(out), np.sin(np.asarray(x)) ** 2 + 0.5, rtol=1e-6)


def test_broadcast_views_are_never_written():
    # broadcast_in_dim returns a read-only view in the NumPy backend: it must never be
    # chosen as an output buffer (writing into it would raise or corrupt the constant).
    x = jnp.ones((100, 100))

    def f(x):
        b = lax.broadcast_in_dim(jnp.float32(3.0), (100, 100), ())
        return (b + x) * 2.0

    np.testing.assert_array_equal(np.asarray(plax.jit(f, backend="numpy")(x)), 8.0)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int64", "uint16",
                                   "bool", "complex64"])
def test_select_is_bit_exact(dtype):
    rng = np.random.default_rng(1)
    n = 50_000
    d = np.dtype(dtype)
    if d == np.bool_:
        a, b = rng.random(n) < 0.5, rng.random(n) < 0.5
    elif d.kind == "c":
        a = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(d)
        b = (rng.standard_normal(n) - 1j * rng.standard_normal(n)).astype(d)
    else:
        a = (rng.standard_normal(n) * 50).astype(d)
        b = (rng.standard_normal(n) * 50).astype(d)
    if d.kind == "f":
        a[::5] = np.nan
        b[1::7] = -0.0
    which = rng.random(n) < 0.5
    with plax.config.override("jax_enable_x64", True):  # keep 64-bit dtypes as they are
        out = np.asarray(lax.select(jnp.asarray(which), jnp.asarray(a), jnp.asarray(b)))
    expected = np.where(which, a, b)
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out.view(np.uint8), expected.view(np.uint8))

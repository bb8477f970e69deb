"""With ``jax_enable_x64``, Python scalars are 64-bit and 64-bit dtypes survive; integers of
up to 32 bits still compute inexact functions in float32 (JAX's rule). Compared with real JAX
in x64 mode; the expressions are those of the dtype table that have 64-bit results."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from jnp_testutil import jax, jax_numpy

EXPRESSIONS = [
    "jnp.sum(np.ones(3, np.int8))", "jnp.sum(np.ones(3, np.uint8))", "jnp.mean(np.ones(3, np.int32))",
    "jnp.mean(np.ones(3, np.int64))", "jnp.var(np.ones(3, np.uint8))", "jnp.sin(np.ones(3, np.int32))",
    "jnp.sin(np.ones(3, np.int64))", "jnp.sin(3)", "jnp.exp(np.ones(3, bool))",
    "jnp.asarray(np.ones(3, np.int32)) / jnp.asarray(np.ones(3, np.int32))", "jnp.true_divide(1, 2)",
    "jnp.rint(np.ones(3, np.int32))", "jnp.angle(np.ones(3, np.int32))", "jnp.linspace(0, 1, 3)",
    "jnp.linspace(np.int32(0), 1, 3)", "jnp.arange(3.0)", "jnp.arange(3)", "jnp.array([1, 2.0])",
    "jnp.array(1)", "jnp.asarray(np.ones(2, np.float64))", "jnp.zeros(2)", "jnp.argmax(np.ones(3))",
    "jnp.average(np.ones(3, np.int32))", "jnp.hypot(np.ones(3, np.int32), 1)",
    "jnp.cumsum(np.ones(3, bool))", "jnp.asarray(np.ones(3, np.int32)) + 1.5",
    "jnp.asarray(np.ones(3, np.uint32)) + np.ones(3, np.int32)", "jnp.float_power(2, 3)",
    "jnp.nonzero(np.ones(2))", "jnp.full(3, 1)", "jnp.count_nonzero(np.ones(3))",
]


@pytest.fixture
def x64():
    jax_was = jax.config.jax_enable_x64 if jax is not None else None
    plax.config.update("jax_enable_x64", True)
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        plax.config.update("jax_enable_x64", False)
        if jax is not None:
            jax.config.update("jax_enable_x64", jax_was)


def _avals(module, expr):
    env = {"jnp": module, "np": np, "bf16": ml_dtypes.bfloat16}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = eval(expr, env)  # noqa: S307 - the test's own table
    leaves = out if isinstance(out, (tuple, list)) else [out]
    return [(np.dtype(o.dtype), bool(o.weak_type)) for o in leaves]


@pytest.mark.skipif(jax is None, reason="jax is not installed: compares with JAX's x64 mode")
@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_x64_dtypes_like_jax(x64, expr):
    assert _avals(jnp, expr) == _avals(jax_numpy, expr), expr


def test_x64_values_are_64_bit(x64):
    x = jnp.arange(3.0) / 3
    assert x.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(x), np.arange(3.0) / 3)  # exact in float64
    assert jnp.sum(np.ones(3, np.int8)).dtype == np.int64
    assert jnp.sin(np.int32(1)).dtype == np.float32

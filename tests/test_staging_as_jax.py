"""Jaxprs staged and printed as JAX 0.10.2 stages and prints them (issue 25: ``stack`` and
``unstack`` equations, ``broadcast_in_dim`` for new axes, ``atleast_*d`` as jit calls,
slices' strides and bounds, jaxlib's line breaking, ``debug.log``'s equation), against text
recorded from JAX 0.10.2 (``record_staging_as_jax.py``) and, where JAX is installed, against
JAX itself; plus the values of the new primitives against NumPy."""
from __future__ import annotations

import json
import logging
import pathlib

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from staging_cases import CASES, jaxpr_text

RECORD = json.loads((pathlib.Path(__file__).with_name("staging_as_jax.json")).read_text())

#: cases whose text still differs from JAX's, and why
KNOWN_DIFFERENCES: dict[str, str] = {}


def _case_params():
    return [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_DIFFERENCES[n], strict=True))
            if n in KNOWN_DIFFERENCES else n for n in sorted(CASES)]


@pytest.mark.parametrize("name", _case_params())
def test_jaxpr_text_as_recorded_from_jax(name):
    assert jaxpr_text(plax, jnp, name) == RECORD["jaxprs"][name]


@pytest.mark.parametrize("name", _case_params())
def test_jaxpr_text_as_jax_prints_it(name):
    jax = pytest.importorskip("jax", reason="compares with JAX itself")
    import jax.numpy as jax_jnp
    assert jaxpr_text(plax, jnp, name) == jaxpr_text(jax, jax_jnp, name)


def test_record_is_current_where_jax_is_installed():
    jax = pytest.importorskip("jax", reason="compares the record with JAX itself")
    if jax.__version__ != RECORD["jax_version"]:
        pytest.skip(f"recorded from JAX {RECORD['jax_version']}, installed {jax.__version__}")
    import jax.numpy as jax_jnp
    assert {n: jaxpr_text(jax, jax_jnp, n) for n in CASES} == RECORD["jaxprs"]


# ------------------------------------------------------------------ values

@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stack_and_unstack_values(axis):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(4)]
    got = lax.stack(xs, axis)
    np.testing.assert_array_equal(np.asarray(got), np.stack(xs, axis))
    parts = lax.unstack(got, axis)
    assert len(parts) == 4
    for p, x in zip(parts, xs):
        np.testing.assert_array_equal(np.asarray(p), x)
    # under jit (compiled), the same values
    np.testing.assert_array_equal(np.asarray(plax.jit(lambda *v: jnp.stack(v, axis))(*xs)),
                                  np.stack(xs, axis))


def test_stack_gradient_against_the_derivative():
    x = np.array([0.3, -1.2, 2.0], np.float32)

    def f(x):
        return jnp.sum(jnp.stack([jnp.sin(x), x * x], axis=1) * jnp.array([1.0, 3.0]))
    g = np.asarray(plax.grad(f)(x))
    np.testing.assert_allclose(g, np.cos(x.astype(np.float64)) + 6 * x, rtol=1e-6)
    # and the unstack the gradient stages, against the same derivative
    h = np.asarray(plax.grad(lambda x: jnp.sum(lax.unstack(jnp.stack([jnp.sin(x), x * x]))[1]))(x))
    np.testing.assert_allclose(h, 2 * x, rtol=1e-6)


def test_stack_vmap_against_a_loop():
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((5, 3)).astype(np.float32)
    y = rng.standard_normal(3).astype(np.float32)
    got = plax.vmap(lambda x, y: jnp.stack([x, y, x], axis=1), in_axes=(0, None))(xs, y)
    want = np.stack([np.stack([x, y, x], axis=1) for x in xs])
    np.testing.assert_array_equal(np.asarray(got), want)
    zs = rng.standard_normal((4, 5, 3)).astype(np.float32)
    got = plax.vmap(lambda m: jnp.unstack(m, axis=1)[2], in_axes=1)(zs)
    np.testing.assert_array_equal(np.asarray(got), np.stack([zs[:, i, 2] for i in range(5)]))


def test_stacking_functions_values():
    a, b = np.arange(3.0, dtype=np.float32), np.arange(3.0, 6.0, dtype=np.float32)
    m = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    for name in ("vstack", "hstack", "dstack", "column_stack"):
        for arg in ([a, b], [m, m], m):
            np.testing.assert_array_equal(np.asarray(getattr(jnp, name)(arg)),
                                          getattr(np, name)(arg), err_msg=name)
    for k in (1, 2, 3):
        for x in (np.float32(2.0), a, m):
            got = getattr(jnp, f"atleast_{k}d")(x)
            np.testing.assert_array_equal(np.asarray(got), getattr(np, f"atleast_{k}d")(x))
    np.testing.assert_array_equal(np.asarray(jnp.concatenate(m, axis=0)), m.reshape(-1))


@pytest.mark.parametrize("index", [np.s_[::2], np.s_[5:1:-2], np.s_[::-1], np.s_[1:6:3, -1],
                                   np.s_[4:1:2], np.s_[-2:-8:-2, 1:4], np.s_[2, 1:3],
                                   np.s_[1:, ::-2], np.s_[None, 1, ..., 2:0:-1]])
def test_static_slices_values(index):
    x = np.arange(42.0, dtype=np.float32).reshape(7, 6)
    np.testing.assert_array_equal(np.asarray(jnp.asarray(x)[index]), x[index])


def test_pow_with_an_integer_exponent_values_and_derivative():
    # x ** n for a traced int n is `pow a b:i32[]` (the exponent not promoted): the values of
    # NumPy float64, and the derivative n * x ** (n - 1), 0 where n is 0 (also at x = 0)
    x = np.array([0.0, 1.5, -2.0, 3.0], np.float32)
    n = np.array([0, 1, 2, -1], np.int32)
    x64 = x.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = x64 ** n
        slope = np.where(n == 0, 0.0, n * x64 ** (n - 1))
    np.testing.assert_allclose(np.asarray(x ** jnp.asarray(n)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(lax.pow(x, n)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(plax.jit(lambda x, n: x ** n)(x, n)), want, rtol=1e-6)
    g = plax.grad(lambda x, n: jnp.sum(x ** n))(x, n)
    np.testing.assert_allclose(np.asarray(g), slope, rtol=1e-6)
    # an integer base is refused by lax.pow, with JAX's message
    with pytest.raises(TypeError, match="the first argument to pow must have an inexact dtype"):
        lax.pow(np.int32(2), np.int32(3))


# ------------------------------------------------------------------ errors (JAX's)

def test_stack_errors_as_jax():
    with pytest.raises(ValueError, match="All input arrays must have the same shape"):
        lax.stack([np.ones(2, np.float32), np.ones(3, np.float32)])
    with pytest.raises(ValueError, match="different numbers of dimensions"):
        lax.stack([np.ones(2, np.float32), np.ones((2, 1), np.float32)])
    with pytest.raises(TypeError, match="lax.stack requires arguments to have the same dtypes"):
        lax.stack([np.ones(2, np.float32), np.ones(2, np.int32)])
    with pytest.raises(ValueError, match="Need at least one array to stack"):
        jnp.stack([])
    with pytest.raises(ValueError, match="axis 0 is out of bounds for array of dimension 0"):
        jnp.unstack(jnp.float32(1))


# ------------------------------------------------------------------ debug.log

def test_debug_log_stages_jax_debug_print_equation_and_logs(caplog):
    def f(x):
        plax.debug.log("x is {}", x)
        return x
    text = str(plax.make_jaxpr(f)(np.ones(2, np.float32)))
    assert "debug_print[" in text and "debug_callback" not in text
    assert 'logging_record=<LogRecord: jax._src.debugging, 20, ' in text
    assert f"{__file__}, " in text
    with caplog.at_level(logging.INFO, logger="jax._src.debugging"):
        plax.jit(f)(np.arange(2.0, dtype=np.float32))
    (rec,) = [r for r in caplog.records if r.name == "jax._src.debugging"]
    assert rec.getMessage() == "x is [0. 1.]"
    assert rec.pathname == __file__

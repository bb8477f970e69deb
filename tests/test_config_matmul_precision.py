"""``jax_default_matmul_precision``: recorded in ``dot_general`` as JAX records it (the jit
cache keyed by it), ignored for values on the CPU backends as XLA's CPU backend ignores it,
and mapped to cuBLAS math modes by the CuPy backend (tests/cupy/test_matmul_precision_modes.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp

try:
    import jax
    import jax.numpy as jjnp
except ImportError:  # the JAX halves of the tests are skipped
    jax = jjnp = None

_SETTINGS = ["bfloat16", "tensorfloat32", "float32", "default", "high", "highest",
             "BF16_BF16_F32", "TF32_TF32_F32", "F32_F32_F32"]
_EXPECTED = {"bfloat16": ("DEFAULT", "DEFAULT"), "default": ("DEFAULT", "DEFAULT"),
             "tensorfloat32": ("HIGH", "HIGH"), "high": ("HIGH", "HIGH"),
             "float32": ("HIGHEST", "HIGHEST"), "highest": ("HIGHEST", "HIGHEST"),
             "BF16_BF16_F32": "BF16_BF16_F32", "TF32_TF32_F32": "TF32_TF32_F32",
             "F32_F32_F32": "F32_F32_F32"}


def _recorded(jx, np_, setting, **kw):
    """The precision parameter of the product ``jnp.dot`` stages under ``setting``, as
    names (JAX's Precision members and presets print as their names)."""
    with jx.default_matmul_precision(setting):
        closed = jx.make_jaxpr(lambda a, b: np_.dot(a, b, **kw))(np_.ones((2, 3)),
                                                                  np_.ones((3, 4)))
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "dot_general"]
    p = eqn.params["precision"]
    if p is None:
        return None
    return tuple(str(x).rsplit(".", 1)[-1] for x in p) if isinstance(p, tuple) else \
        str(p).rsplit(".", 1)[-1]


@pytest.mark.parametrize("setting", _SETTINGS)
def test_default_precision_is_recorded_as_jax_records_it(setting):
    got = _recorded(plax, jnp, setting)
    assert got == _EXPECTED[setting]
    if jax is not None:
        assert _recorded(jax, jjnp, setting) == got


def test_an_explicit_precision_wins_and_none_is_recorded_without_the_option():
    # recorded as JAX records it: one Precision for both operands
    assert _recorded(plax, jnp, "bfloat16", precision="highest") == ("HIGHEST", "HIGHEST")
    if jax is not None:
        assert _recorded(jax, jjnp, "bfloat16", precision="highest") == ("HIGHEST", "HIGHEST")
    closed = plax.make_jaxpr(jnp.dot)(jnp.ones((2, 3)), jnp.ones((3, 4)))
    assert closed.jaxpr.eqns[0].params["precision"] is None


def test_jit_traces_again_when_the_option_changes():
    f = plax.jit(lambda a, b: a @ b)
    text = str(plax.make_jaxpr(f)(jnp.ones((2, 3)), jnp.ones((3, 4))))
    assert "precision=" not in text  # None: not printed, as JAX prints it
    with plax.default_matmul_precision("tensorfloat32"):
        assert "precision=(Precision.HIGH, Precision.HIGH)" in str(
            plax.make_jaxpr(f)(jnp.ones((2, 3)), jnp.ones((3, 4))))
    plax.config.update("jax_default_matmul_precision", "float32")
    try:
        assert "precision=(Precision.HIGHEST, Precision.HIGHEST)" in str(
            plax.make_jaxpr(f)(jnp.ones((2, 3)), jnp.ones((3, 4))))
    finally:
        plax.config.update("jax_default_matmul_precision", None)


@pytest.mark.parametrize("setting", ["bfloat16", "tensorfloat32", "BF16_BF16_F32"])
def test_cpu_products_stay_float32_as_in_jax(setting, backend_name):
    # XLA's CPU backend computes float32 products in float32 whatever the precision; so do
    # plax's CPU backends: the results are those without the option, bit for bit
    rng = np.random.default_rng(0)
    a = rng.standard_normal((33, 17)).astype(np.float32)
    b = rng.standard_normal((17, 9)).astype(np.float32)
    if plax.devices()[0].platform != "cpu":
        pytest.skip("the CPU backends' behaviour")
    f = plax.jit(lambda a, b: jnp.dot(a, b), backend=backend_name)
    plain = np.asarray(f(a, b))
    with plax.default_matmul_precision(setting):
        reduced = np.asarray(f(a, b))
        eager = np.asarray(jnp.dot(a, b))
    np.testing.assert_array_equal(reduced, plain)
    np.testing.assert_array_equal(eager, plain)
    np.testing.assert_allclose(plain, a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-5, atol=1e-5)

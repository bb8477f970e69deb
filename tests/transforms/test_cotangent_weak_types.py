"""The weak type of a Python scalar's cotangent comes from the backward pass, as in JAX 0.10.2:
the rules' constants are weakly typed like their operands (so grad of x**2 at 0.7 is weakly
typed), while rules that use strongly typed values make it strong (real/imag's transposes pair
the cotangent with a strong zero; pow's derivative converts its operands). Recorded from JAX,
and compared with JAX where it is installed."""
import pytest

import plax


def _functions(jax):
    jnp = jax.numpy
    return {
        "sin": jnp.sin, "square": lambda x: x ** 2, "mul3": lambda x: 3 * x, "tanh": jnp.tanh,
        "abs": jnp.abs, "where": lambda x: jnp.where(x > 0, x, 0.), "sqrt": jnp.sqrt,
        "maximum": lambda x: jnp.maximum(x, 1.), "recip": lambda x: 1. / x,
        "times_f32": lambda x: x * jnp.float32(2), "power": lambda x: jnp.power(x, 2.5),
        "sigmoid": jax.nn.sigmoid, "relu": jax.nn.relu,
        "real": lambda z: jnp.real(z) ** 2, "imag": jnp.imag, "abs_complex": jnp.abs,
        "norm_complex": lambda z: jnp.real(z) ** 2 + jnp.imag(z) ** 2,
    }


# whether grad(f)(x) is weakly typed in JAX 0.10.2 (x = 0.7, or 3. + 4j for the complex ones)
RECORDED = {
    "sin": True, "square": True, "mul3": True, "tanh": True, "abs": True, "where": True,
    "sqrt": True, "maximum": True, "recip": True, "times_f32": True, "power": False,
    "sigmoid": True, "relu": True,
    "real": False, "imag": False, "abs_complex": False, "norm_complex": False,
}


def _weak(jax, name, jitted):
    f = _functions(jax)[name]
    x = 3. + 4j if "complex" in name or name in ("real", "imag") else 0.7
    g = jax.grad(f)
    return (jax.jit(g) if jitted else g)(x).aval.weak_type


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded(name, jitted):
    assert _weak(plax, name, jitted) is RECORDED[name]


def test_strong_output_cotangent_gives_strong_input_cotangent():
    ct = plax.vjp(plax.numpy.sin, 2.0)[1](plax.numpy.float32(1))[0]
    assert not ct.aval.weak_type


def test_under_vmap_of_vjp():
    out = plax.vmap(lambda c: plax.vjp(lambda x: x * 2., 0.5)[1](c))(plax.numpy.ones(3))[0]
    assert not out.aval.weak_type  # the batched cotangent is a strong float32 array, as JAX's


def test_as_jax():
    jax = pytest.importorskip("jax")
    assert {n: _weak(jax, n, False) for n in RECORDED} == RECORDED

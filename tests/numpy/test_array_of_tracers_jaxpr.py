"""``jnp.array`` of a list holding tracers stages JAX's equations: per item a cast and a
``broadcast_in_dim``, then ``concatenate`` (Common_Gotchas_in_JAX's jaxpr cell)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp

# JAX 0.10.2's text for ``make_jaxpr(lambda x: jnp.array([x, x]))(1.0)``, recorded
PAIR_OF_SCALARS = """{ lambda ; a:f32[]. let
    b:f32[] = convert_element_type[new_dtype=float32 weak_type=False] a
    c:f32[1] = broadcast_in_dim b
    d:f32[] = convert_element_type[new_dtype=float32 weak_type=False] a
    e:f32[1] = broadcast_in_dim d
    f:f32[2] = concatenate[dimension=0] c e
  in (f,) }"""

CASES = [
    (lambda m: (lambda x: m.array([x, x])), lambda m: 1.0),
    (lambda m: (lambda x: m.array([x, 2.0 * x, 3.0])), lambda m: m.ones(())),
    (lambda m: (lambda x: m.array([x, x])), lambda m: m.ones((2,))),
    (lambda m: (lambda x: m.array([[x, x], [x, x]])), lambda m: 1.0),
    (lambda m: (lambda x: m.array([x, 1.5], dtype=m.int32)), lambda m: 1.0),
    (lambda m: (lambda x: m.array((x, x), ndmin=3)), lambda m: 1.0),
]


def test_pair_of_scalars_prints_jax_text():
    assert str(plax.make_jaxpr(lambda x: jnp.array([x, x]))(1.0)) == PAIR_OF_SCALARS


@pytest.mark.parametrize("case", range(len(CASES)))
def test_jaxpr_matches_jax(case):
    jax = pytest.importorskip("jax")
    make_fn, make_arg = CASES[case]
    ours = str(plax.make_jaxpr(make_fn(jnp))(make_arg(jnp)))
    theirs = str(jax.make_jaxpr(make_fn(jax.numpy))(make_arg(jax.numpy)))
    assert ours == theirs


def test_values_under_jit_vmap_and_grad():
    f = lambda x: jnp.array([[x, 2.0 * x], [3.0, x * x]])
    np.testing.assert_allclose(plax.jit(f)(2.0), [[2.0, 4.0], [3.0, 4.0]])
    np.testing.assert_allclose(plax.vmap(f)(jnp.arange(2.0)),
                               [[[0.0, 0.0], [3.0, 0.0]], [[1.0, 2.0], [3.0, 1.0]]])
    np.testing.assert_allclose(plax.grad(lambda x: f(x).sum())(2.0), 1.0 + 2.0 + 2 * 2.0)
    assert plax.jit(lambda x: jnp.array([x, 1.5], dtype=jnp.int32))(2.7).tolist() == [2, 1]


def test_ragged_items_raise_type_error():
    with pytest.raises(TypeError, match="same shape"):
        plax.jit(lambda x: jnp.array([x, jnp.stack([x, x])]))(1.0)

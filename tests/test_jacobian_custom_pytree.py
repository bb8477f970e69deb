"""``jacfwd``/``jacrev`` rebuild the argument and output trees from ``None`` leaves, as JAX's
dtype checks (``tree_map``) do, so a custom pytree's unflatten sees ``None`` there
(docs/custom_pytrees.md: ``jax.jacobian(lambda x: x)(tree)`` fails in the class's __init__)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp


def _register(tree_util, array):
    """A fresh custom pytree class that records the types its children arrive as."""
    class Box:
        seen: list = []

        def __init__(self, a, b):
            Box.seen.append(type(a).__name__)
            self.a, self.b = a, b

    tree_util.register_pytree_node(Box, lambda t: ((t.a, t.b), None),
                                   lambda _, ch: Box(*ch))

    class Strict:  # calls jnp.array on its children, as custom_pytrees.md's MyTree does
        def __init__(self, a):
            self.a = array(a)

    tree_util.register_pytree_node(Strict, lambda t: ((t.a,), None), lambda _, ch: Strict(*ch))
    return Box, Strict


@pytest.mark.parametrize("name", ["jacfwd", "jacrev"])
def test_output_tree_rebuilt_from_none_and_values(name):
    Box, _ = _register(plax.tree_util, jnp.array)
    jac = getattr(plax, name)(lambda x: Box(2.0 * x, jnp.sin(x)))(jnp.array([0.5, 1.0]))
    assert "NoneType" in Box.seen
    np.testing.assert_allclose(jac.a, 2.0 * np.eye(2))
    np.testing.assert_allclose(jac.b, np.diag(np.cos([0.5, 1.0])), rtol=1e-6)


@pytest.mark.parametrize("name", ["jacfwd", "jacrev"])
def test_input_tree_rebuilt_from_none(name):
    Box, _ = _register(plax.tree_util, jnp.array)
    arg = Box(jnp.array([1.0, 2.0]), jnp.array([3.0, 4.0]))
    del Box.seen[:]
    jac = getattr(plax, name)(lambda t: t.a * t.b)(arg)
    assert Box.seen[0] == "NoneType"
    np.testing.assert_allclose(jac.a, np.diag([3.0, 4.0]))
    np.testing.assert_allclose(jac.b, np.diag([1.0, 2.0]))


@pytest.mark.parametrize("name", ["jacobian", "jacfwd", "jacrev"])
def test_strict_class_fails_with_jax_error(name):
    _, Strict = _register(plax.tree_util, jnp.array)
    with pytest.raises(ValueError, match="^None is not a valid value for jnp.array$"):
        getattr(plax, name)(lambda x: x)(Strict(jnp.ones(2)))


@pytest.mark.parametrize("name", ["jacobian", "jacfwd", "jacrev"])
def test_strict_class_beside_jax(name):
    jax = pytest.importorskip("jax")
    _, Strict = _register(jax.tree_util, jax.numpy.array)
    with pytest.raises(ValueError) as theirs:
        getattr(jax, name)(lambda x: x)(Strict(jax.numpy.ones(2)))
    _, Strict = _register(plax.tree_util, jnp.array)
    with pytest.raises(ValueError) as ours:
        getattr(plax, name)(lambda x: x)(Strict(jnp.ones(2)))
    assert str(ours.value) == str(theirs.value)

"""``jit(donate_argnums=/donate_argnames=)`` as JAX 0.10.2 does it on CPU: a donated argument
that an output of its shape and dtype can take is deleted (using it raises RuntimeError);
the others stay alive and a "Some donated buffers were not usable" warning names them."""
import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp


def _run(jax, fn, args, **jit_kw):
    """(deleted flags of args, warning texts, result as NumPy) of one donating call."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = jax.jit(fn, **jit_kw)(*args)
    texts = [str(w.message) for w in caught if "donated" in str(w.message)]
    return [a.is_deleted() for a in args], texts, np.asarray(out)


CASES = [
    (lambda x, y: x + y, dict(donate_argnums=0)),
    (lambda x, y: x + y, dict(donate_argnums=(0, 1))),
    (lambda x, y: (x * y).sum(), dict(donate_argnums=0)),
    (lambda x, y: x * y, dict(donate_argnames="y")),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_deletes_and_warns_like_jax(case):
    jax = pytest.importorskip("jax")
    fn, kw = CASES[case]
    theirs = _run(jax, fn, [jax.numpy.ones(3), jax.numpy.ones(3)], **kw)
    ours = _run(plax, fn, [jnp.ones(3), jnp.ones(3)], **kw)
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose(ours[2], theirs[2])


def test_donated_input_is_deleted_and_raises():
    x, y = jnp.ones(3), jnp.full(3, 2.0)
    out = plax.jit(lambda a, b: a + b, donate_argnums=0)(x, y)
    np.testing.assert_allclose(out, [3.0, 3.0, 3.0])
    assert x.is_deleted() and not y.is_deleted()
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[3\]"):
        x + 1
    np.testing.assert_allclose(y, 2.0)


def test_unusable_donation_warns_and_keeps_the_argument():
    x = jnp.ones(3)
    with pytest.warns(UserWarning, match=r"Some donated buffers were not usable: float32\[3\]"):
        out = plax.jit(lambda a: a.sum(), donate_argnums=0)(x)
    assert out == 3.0 and not x.is_deleted()


def test_no_donation_under_an_outer_trace():
    x = jnp.ones(3)
    inner = plax.jit(lambda a: a * 2.0, donate_argnums=0)
    np.testing.assert_allclose(plax.jit(lambda a: inner(a) + 1.0)(x), 3.0)
    assert not x.is_deleted()

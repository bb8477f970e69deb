"""Objects with ``__jax_array__`` where JAX 0.10.2 reads them (``jnp.array``/``jnp.asarray``,
the ``*_like`` functions, array operators, ``.at[].set``) and where it refuses them
(``jax.numpy`` functions, primitives, ``jit``/``grad``/``vmap`` arguments and outputs,
indices). Each case is checked on plax against the value and type JAX 0.10.2 gives (written
down here from JAX 0.10.2; the ``*_jax`` tests check the expectations on JAX itself where it
is installed)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax.errors import jax_array_operand



def _wrapper_class():
    class Wrapped:
        """An equinox/flax-style wrapper: no arithmetic of its own, only ``__jax_array__``."""

        def __init__(self, value):
            self.value = value

        def __jax_array__(self):
            return self.value

    return Wrapped


def _inner(lib, name):
    """The value a wrapper holds, built with ``lib`` (plax or jax)."""
    return {"f32 array": lambda: lib.numpy.ones(2), "f16 array": lambda: lib.numpy.ones(2, "float16"),
            "py float": lambda: 2.0, "py int": lambda: 3, "py bool": lambda: True,
            "f64 numpy": lambda: np.full(2, 0.5), "list": lambda: [1.0, 2.0],
            "nested wrapper": lambda: _wrapper_class()(1.5)}[name]()


# case -> (operation on (lib, W, inner), expected (dtype, weak_type, values))
_ACCEPTED = {
    ("asarray", "py float"): (lambda l, W, v: l.numpy.asarray(W(v)), ("float32", False, [2.0])),
    ("asarray", "py int"): (lambda l, W, v: l.numpy.asarray(W(v)), ("int32", False, [3])),
    ("asarray", "py bool"): (lambda l, W, v: l.numpy.asarray(W(v)), ("bool", False, [True])),
    ("asarray", "f64 numpy"): (lambda l, W, v: l.numpy.asarray(W(v)), ("float32", False, [0.5, 0.5])),
    ("asarray", "list"): (lambda l, W, v: l.numpy.asarray(W(v)), ("float32", False, [1.0, 2.0])),
    ("asarray", "nested wrapper"): (lambda l, W, v: l.numpy.asarray(W(v)), ("float32", False, [1.5])),
    ("array", "f16 array"): (lambda l, W, v: l.numpy.array(W(v)), ("float16", False, [1.0, 1.0])),
    ("asarray int32", "py float"): (lambda l, W, v: l.numpy.asarray(W(v), dtype="int32"),
                                    ("int32", False, [2])),
    ("array of wrappers", "py float"): (lambda l, W, v: l.numpy.array([W(v), W(1.0)]),
                                        ("float32", False, [2.0, 1.0])),
    ("zeros_like", "f16 array"): (lambda l, W, v: l.numpy.zeros_like(W(v)), ("float16", False, [0, 0])),
    # operators read __jax_array__ once and use the value as is: a Python float stays weak
    ("f16 array + W", "py float"): (lambda l, W, v: l.numpy.ones(2, "float16") + W(v),
                                    ("float16", False, [3.0, 3.0])),
    ("W + f16 array", "py float"): (lambda l, W, v: W(v) + l.numpy.ones(2, "float16"),
                                    ("float16", False, [3.0, 3.0])),
    ("i32 array * W", "py float"): (lambda l, W, v: l.numpy.ones(2, "int32") * W(v),
                                    ("float32", True, [2.0, 2.0])),
    ("W @ matrix", "f32 array"): (lambda l, W, v: W(v) @ l.numpy.ones((2, 2)),
                                  ("float32", False, [2.0, 2.0])),
    ("array < W", "f32 array"): (lambda l, W, v: l.numpy.zeros(2) < W(v), ("bool", False, [True, True])),
    (".at[0].set(W)", "py float"): (lambda l, W, v: l.numpy.zeros(2).at[0].set(W(v)),
                                    ("float32", False, [2.0, 0.0])),
    ("jit: asarray(W(tracer))", "f32 array"): (
        lambda l, W, v: l.jit(lambda x: l.numpy.asarray(W(x)) * 3)(v), ("float32", False, [3.0, 3.0])),
    ("jit: tracer + W(tracer)", "f32 array"): (
        lambda l, W, v: l.jit(lambda x: x + W(x))(v), ("float32", False, [2.0, 2.0])),
    ("grad through asarray", "f32 array"): (
        lambda l, W, v: l.grad(lambda x: (l.numpy.asarray(W(x)) ** 2).sum())(v),
        ("float32", False, [2.0, 2.0])),
    ("vmap: tracer * W(tracer)", "f32 array"): (
        lambda l, W, v: l.vmap(lambda x: x * W(x))(v), ("float32", False, [1.0, 1.0])),
}


def _check_accepted(lib, case):
    op, (dtype, weak, values) = _ACCEPTED[case]
    out = op(lib, _wrapper_class(), _inner(lib, case[1]))
    assert (str(out.dtype), bool(out.aval.weak_type)) == (dtype, weak), lib.__name__
    np.testing.assert_array_equal(np.asarray(out), np.asarray(values, dtype))


_IDS = [f"{a}-{b}" for a, b in _ACCEPTED]


@pytest.mark.parametrize("case", list(_ACCEPTED), ids=_IDS)
def test_accepted_as_jax(case):
    """Converted as JAX 0.10.2 converts them: dtype, weak type and values."""
    _check_accepted(plax, case)


@pytest.mark.parametrize("case", list(_ACCEPTED), ids=_IDS)
def test_the_expectations_are_jax_s(case):
    _check_accepted(pytest.importorskip("jax"), case)


def test_asarray_keeps_a_committed_array_committed():
    """``jnp.asarray(W(committed))`` is the committed array itself (no copy), as in JAX."""
    W = _wrapper_class()
    x = plax.device_put(plax.numpy.ones(2), plax.devices()[0])
    assert plax.numpy.asarray(W(x)) is x
    assert (W(1.0) + x).committed


_REFUSED = {
    "jnp.sin": lambda l, w: l.numpy.sin(w),
    "jnp.dot": lambda l, w: l.numpy.dot(w, l.numpy.ones(2)),
    "grad": lambda l, w: l.grad(lambda x: x.sum())(w),
    "vmap": lambda l, w: l.vmap(lambda x: x)(w),
    "index": lambda l, w: l.numpy.ones(3)[w],
    "jit output": lambda l, w: l.jit(lambda x: x, static_argnums=0)(w),
}


@pytest.mark.parametrize("where", list(_REFUSED))
def test_refused_as_jax(where):
    """JAX 0.10.2's ValueError, word for word, where it reads no ``__jax_array__``."""
    W = _wrapper_class()
    with pytest.raises(ValueError, match=r"__jax_array__\(\) during abstractification") as got:
        _REFUSED[where](plax, W(1))
    assert str(got.value) == str(jax_array_operand(W(1)))


@pytest.mark.parametrize("where", list(_REFUSED))
def test_refused_with_jax_s_words(where):
    jax = pytest.importorskip("jax")
    W = _wrapper_class()
    with pytest.raises(ValueError) as want:
        _REFUSED[where](jax, W(1))
    assert str(want.value) == str(jax_array_operand(W(1)))


def test_operator_on_a_wrapper_of_a_wrapper_is_unsupported():
    """Operators read ``__jax_array__`` once: a wrapper of a wrapper is an operand Python
    cannot add (TypeError), as in JAX."""
    W = _wrapper_class()
    with pytest.raises(TypeError, match="unsupported operand"):
        plax.numpy.ones(2) + W(W(1.0))


def test_operator_on_a_wrapper_of_a_wrapper_is_unsupported_in_jax():
    jax = pytest.importorskip("jax")
    W = _wrapper_class()
    with pytest.raises(TypeError, match="unsupported operand"):
        jax.numpy.ones(2) + W(W(1.0))

"""Every array method and property works on the values a transform traces, as on an Array:
a tracer's own attributes (its variable, its trace) must never hide one (``x.var()`` inside
``jit`` once called the tracer's jaxpr variable)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core import Tracer
from plax.numpy import array_methods

#: each method or property called with no arguments, on a (3, 4) float32 matrix
NO_ARGUMENT = ["sum", "mean", "max", "min", "prod", "argmax", "argmin", "std", "var", "any",
               "all", "cumsum", "cumprod", "ptp", "flatten", "ravel", "squeeze", "conj",
               "conjugate", "argsort", "sort", "diagonal", "trace", "copy", "round", "T", "mT",
               "real", "imag"]


def _all_methods(x):
    out = []
    for name in NO_ARGUMENT:
        value = getattr(x, name)
        out.append((value() if callable(value) else value).astype(jnp.float32))
    return out


def _tracer_classes():
    import plax.transforms   # noqa: F401  (every transform's tracer defined)
    seen, todo = [], [Tracer]
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo += cls.__subclasses__()
    return seen


def test_no_tracer_slot_is_named_as_an_array_method():
    methods = set(array_methods._methods) | set(array_methods._properties)
    for cls in _tracer_classes():
        slots = getattr(cls, "__slots__", ())
        slots = (slots,) if isinstance(slots, str) else slots
        assert not methods & set(slots), (cls, methods & set(slots))


@pytest.mark.parametrize("transform", ["jit", "vmap", "grad", "jvp"])
def test_every_method_on_a_tracer_equals_eager(transform):
    x = jnp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 2.0)
    want = [np.asarray(v) for v in _all_methods(x)]
    if transform == "jit":
        got = plax.jit(_all_methods)(x)
    elif transform == "vmap":   # (each row alone, a Python loop as the reference)
        x = x[None]
        got = [v[0] for v in plax.vmap(_all_methods)(x)]
    elif transform == "grad":   # (reverse mode against forward mode, basis vector by vector)
        def total(x):
            return sum(jnp.sum(o) for o in _all_methods(x))
        grad = np.asarray(plax.grad(total)(x))
        for k in range(x.size):
            basis = np.zeros(x.size, np.float32)
            basis[k] = 1.0
            _, slope = plax.jvp(total, (x,), (jnp.asarray(basis.reshape(x.shape)),))
            np.testing.assert_allclose(grad.reshape(-1)[k], np.asarray(slope), rtol=1e-5,
                                       atol=1e-5)
        got = plax.jit(_all_methods)(x)
    else:
        got, _ = plax.jvp(lambda x: _all_methods(x), (x,), (jnp.ones_like(x),))
    for name, g, w in zip(NO_ARGUMENT, got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6, atol=1e-6, err_msg=name)

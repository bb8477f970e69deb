"""A program whose outputs are all empty is not compiled (plax.empty_programs): the backend's
``compile`` is never called, yet the outputs have the shapes, dtypes and device a compiled
program gives them; a program with an effect or a host callback is compiled and runs."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax, random
from plax import numpy as jnp
from plax.experimental import io_callback


@pytest.fixture
def compiles(backend, monkeypatch):
    """The programs ``backend`` is asked to compile (a list that grows with each)."""
    seen = []
    original = type(backend).compile

    def counting(self, jaxpr, device):
        seen.append(jaxpr)
        return original(self, jaxpr, device)

    monkeypatch.setattr(type(backend), "compile", counting)
    return seen


def _kernels_of(backend_name):
    """The Numba backend's generated kernels in this process (its count of compilations),
    else None."""
    if backend_name != "numba":
        return None
    from plax_numba import cache
    return dict(cache._kernels)


def test_empty_outputs_compile_nothing(backend_name, compiles):
    kernels = _kernels_of(backend_name)

    def sample(key, x):
        k1, k2 = random.split(key)
        return (random.normal(k1, (0,)), random.bits(k2, (3, 0)),
                random.randint(k2, (0, 2), -5, 5), jnp.sin(x[:0]) * 2, x.astype(jnp.int8)[2:2])

    f = plax.jit(sample, backend=backend_name)
    x = jnp.arange(6.0, dtype=jnp.float32)
    got = f(random.PRNGKey(0), x)
    want = plax.jit(sample, backend="numpy").lower(random.PRNGKey(0), x).out_info
    assert compiles == []
    assert _kernels_of(backend_name) == kernels
    for g, w in zip(got, want):
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        assert g.devices() == x.devices()
        assert np.asarray(g).shape == w.shape and np.asarray(g).dtype == w.dtype
    again = f(random.PRNGKey(1), x)  # cached: still nothing compiled
    assert compiles == [] and [a.shape for a in again] == [a.shape for a in got]


def test_a_nonempty_output_is_compiled(backend_name, compiles):
    out = plax.jit(lambda x: (x[:0], x[:1] + 1), backend=backend_name)(jnp.arange(3.0))
    assert len(compiles) == 1
    assert out[0].shape == (0,) and out[1].tolist() == [1.0]


def test_effects_and_callbacks_still_run(backend_name, compiles, capsys):
    calls = []

    def pure(a):
        calls.append(("pure", a.shape))
        return np.zeros((0,), np.float32)

    def io(a):
        calls.append(("io", a.shape))
        return np.zeros((0,), np.float32)

    def f(x):
        plax.debug.print("n={}", x.size)
        return x[:0] * 2

    plax.jit(f, backend=backend_name)(jnp.arange(4.0))
    assert capsys.readouterr().out.splitlines() == ["n=4"]
    spec = plax.ShapeDtypeStruct((0,), jnp.float32)
    plax.jit(lambda x: plax.pure_callback(pure, spec, x), backend=backend_name)(jnp.zeros(0))
    plax.jit(lambda x: io_callback(io, spec, x), backend=backend_name)(jnp.zeros(0))
    assert calls == [("pure", (0,)), ("io", (0,))]
    assert len(compiles) == 3


def test_a_pure_callback_returning_a_wrong_shape_still_raises(backend_name, compiles):
    spec = plax.ShapeDtypeStruct((0,), jnp.float32)
    f = plax.jit(lambda x: plax.pure_callback(lambda a: np.zeros(2, np.float32), spec, x),
                 backend=backend_name)
    with pytest.raises(Exception, match="shape"):
        f(jnp.zeros(0))


def test_tracing_errors_are_raised(backend_name, compiles):
    with pytest.raises(TypeError):
        plax.jit(lambda x: lax.add(x[:0], jnp.zeros(0, jnp.int32)), backend=backend_name)(
            jnp.arange(3.0))
    assert compiles == []

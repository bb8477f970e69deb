"""``jax.ensure_compile_time_eval``: concrete values computed at once while ``jit`` traces
(Python control flow on them works), traced values staged as before; beside JAX 0.10.2 where
installed."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp


def _program(jx):
    np_ = jx.numpy
    seen = []

    def f(x):
        with jx.ensure_compile_time_eval():
            z = np_.arange(3) * 2
            seen.append(type(z).__name__)
            n = int(z.sum())  # concrete: a Python int
            w = x + 1  # traced: still staged
        return x * n + w + (z.sum() if n > 5 else 0)
    return f, seen


@pytest.mark.parametrize("how", ["jit", "grad", "vmap", "eager"])
def test_concrete_inside_traced_functions(how):
    f, seen = _program(plax)
    x = jnp.arange(3.0)
    out = {"jit": lambda: plax.jit(f)(2.0), "grad": lambda: plax.grad(f)(2.0),
           "vmap": lambda: plax.vmap(f)(x), "eager": lambda: f(2.0)}[how]()
    want = {"jit": 2 * 6 + 3 + 6, "grad": 6 + 1, "vmap": np.arange(3.0) * 7 + 1 + 6,
            "eager": 2 * 6 + 3 + 6}[how]
    np.testing.assert_allclose(np.asarray(out), want)
    assert seen == ["Array"]


def test_only_traced_work_is_staged():
    f, _ = _program(plax)
    eqns = plax.make_jaxpr(f)(1.0).jaxpr.eqns
    assert not any(e.primitive.name == "iota" for e in eqns)  # arange ran at trace time
    assert plax.make_jaxpr(f)(1.0).jaxpr.eqns[0].primitive.name == "add"  # x + 1 staged


def test_state_restored_after_the_block():
    def f(x):
        with plax.ensure_compile_time_eval():
            pass
        return x + jnp.sin(1.0)
    eqns = plax.make_jaxpr(f)(1.0).jaxpr.eqns
    assert [e.primitive.name for e in eqns] == ["sin", "add"]  # staged again after the block


def test_beside_jax():
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    ours, _ = _program(plax)
    theirs, _ = _program(jax)
    np.testing.assert_allclose(np.asarray(plax.jit(ours)(2.0)), np.asarray(jax.jit(theirs)(2.0)))
    np.testing.assert_allclose(np.asarray(plax.grad(ours)(2.0)),
                               np.asarray(jax.grad(theirs)(2.0)))

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


def test_debug_log_emits_records_from_the_calling_line(caplog):
    import logging
    import inspect

    def f(x):
        plax.debug.log("x is {}", x)  # the line the records name
        return x
    line = inspect.getsourcelines(f)[1] + 1
    with caplog.at_level(logging.INFO, logger="jax._src.debugging"):
        plax.jit(f)(3.0)
        f(jnp.arange(2.0))
        plax.vmap(f)(jnp.arange(2.0))
    records = [r for r in caplog.records if r.name == "jax._src.debugging"]
    assert [r.getMessage() for r in records] == ["x is 3.0", "x is [0. 1.]", "x is 0.0",
                                                 "x is 1.0"]
    assert all(r.levelno == logging.INFO and r.lineno == line and r.funcName == "f"
               and r.pathname == __file__ for r in records)
    with pytest.raises(TypeError, match="fmt must be a string"):
        plax.debug.log(3)

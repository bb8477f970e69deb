"""plax.lowering.batched_while: which batched ``while`` loops run element by element, and
their cond and body resized to a block of elements. The staged jaxpr is never changed."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax, random
from plax import numpy as jnp
from plax.core.jaxpr import sub_jaxprs
from plax.lowering.batched_while import per_element_while
from plax.lowering.calls import spliced_calls as spliced


def _whiles(jaxpr):
    """Every ``while`` equation of ``jaxpr``, sub-jaxprs included, calls spliced."""
    found = []
    for e in spliced(jaxpr).eqns:
        if e.primitive is lax.while_p:
            found.append(e)
        for sub in sub_jaxprs(e.params):
            found += _whiles(sub)
    return found


def _collatz(v):
    def step(s):
        v, n = s
        return jnp.where(v % 2 == 0, v // 2, 3 * v + 1), n + 1
    return lax.while_loop(lambda s: s[0] != 1, step, (v, 0))


def test_vmapped_while_is_per_element_and_resizes():
    x = np.arange(1, 9, dtype=np.int32)
    [eqn] = _whiles(plax.make_jaxpr(plax.vmap(_collatz))(x).jaxpr)
    form = per_element_while(eqn)
    assert form is not None and form.size == 8
    pred, body = form.resized(3)
    assert [a.shape for a in pred.out_avals] == [(3,)]
    assert [a.shape for a in body.out_avals] == [(3,), (3,)]
    assert form.resized(3) is form.resized(3)   # (made once per block size)


def test_batched_and_unbatched_constants():
    def newton(c, scale):   # c per element (batched), scale shared (unbatched)
        def body(v):
            return v - (v * v * v - c) / (3 * v * v) * scale.sum()
        return lax.while_loop(lambda v: jnp.abs(v * v * v - c) > 1e-3 * c, body, c)
    c = np.linspace(1, 50, 8).astype(np.float32)
    scale = np.array([0.5, 0.25, 0.25], np.float32)
    jaxpr = plax.make_jaxpr(plax.vmap(newton, in_axes=(0, None)))(c, scale).jaxpr
    [eqn] = _whiles(jaxpr)
    form = per_element_while(eqn)
    assert form is not None
    by_shape = {tuple(v.aval.shape): a for v, a in zip(eqn.invars, form.aligned_consts)}
    assert by_shape[(8,)] and not by_shape[(3,)]
    _, body = form.resized(5)
    shapes = [tuple(v.aval.shape) for v in body.jaxpr.invars]
    assert (5,) in shapes and (3,) in shapes and (8,) not in shapes  # the shared one kept


def test_samplers_loops_are_per_element():
    f = lambda k: random.gamma(k, np.float32(2.0), (16,))  # noqa: E731
    whiles = _whiles(plax.make_jaxpr(f)(random.PRNGKey(0)).jaxpr)
    assert len(whiles) == 2 and all(per_element_while(e) is not None for e in whiles)


def _mixing(x):   # the body reads a neighbour: elements do not run independently
    return lax.while_loop(lambda s: jnp.any(s < 10),
                          lambda s: jnp.where(s < 10, s + jnp.roll(s, 1) + 1, s), x)


def _unfrozen(x):   # finished elements keep changing: the result depends on the batch
    return lax.while_loop(lambda s: jnp.any(s < 10), lambda s: s + 1, x)


@pytest.mark.parametrize("f", [_mixing, _unfrozen])
def test_loops_mixing_elements_are_not_per_element(f):
    [eqn] = _whiles(plax.make_jaxpr(f)(np.arange(8, dtype=np.float32)).jaxpr)
    assert per_element_while(eqn) is None


def test_scalar_predicate_and_other_equations_are_not():
    f = lambda x: lax.while_loop(lambda v: v[0] < 5, lambda v: v + 1, x)  # noqa: E731
    [eqn] = _whiles(plax.make_jaxpr(f)(np.zeros(4, np.float32)).jaxpr)
    assert per_element_while(eqn) is None
    other = plax.make_jaxpr(lambda x: x + 1)(1.0).jaxpr.eqns[0]
    assert per_element_while(other) is None


def test_staged_jaxpr_is_unchanged():
    x = np.arange(1, 9, dtype=np.int32)
    before = str(plax.make_jaxpr(plax.vmap(_collatz))(x))
    [eqn] = _whiles(plax.make_jaxpr(plax.vmap(_collatz))(x).jaxpr)
    per_element_while(eqn).resized(4)
    assert str(plax.make_jaxpr(plax.vmap(_collatz))(x)) == before


def test_loop_with_effects_is_not_per_element():
    def f(x):
        def body(v):
            plax.debug.print("round")   # once a round as written: not once a block
            return v * 2
        return lax.while_loop(lambda v: v < 10, body, x)
    [eqn] = _whiles(plax.make_jaxpr(plax.vmap(f))(np.ones(8, np.float32)).jaxpr)
    assert per_element_while(eqn) is None

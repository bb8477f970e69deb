"""checkpoint / remat as the ``checkpoint`` primitive: values and derivatives equal the
undecorated function's; reverse mode saves what the policy saves (residuals counted with
print_saved_residuals, against JAX when it is installed) and recomputes the rest (equations
counted in the staged gradient)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import numpy as jnp
from plax.ad_checkpoint import checkpoint_name, print_saved_residuals
from plax.test_util import check_grads

cp = plax.checkpoint_policies

try:
    import jax
    import jax.ad_checkpoint
    import jax.numpy as jjnp
except ImportError:  # CI has no JAX
    jax = None


def g(np_, W, x):
    y = np_.dot(W, x)
    return np_.sin(np_.sin(y))


def named(np_, name_fn, x):
    a = name_fn(np_.sin(x), "a")
    b = name_fn(np_.cos(a), "b")
    return np_.sum(np_.sin(b))


POLICIES = {
    "none": (lambda c: None, None),
    "everything": (lambda c: c.everything_saveable, None),
    "nothing": (lambda c: c.nothing_saveable, None),
    "dots": (lambda c: c.dots_saveable, None),
    "dots_no_batch": (lambda c: c.dots_with_no_batch_dims_saveable, None),
    "only_a": (lambda c: c.save_only_these_names("a"), "named"),
    "all_but_a": (lambda c: c.save_any_names_but_these("a"), "named"),
}

# residuals saved (beyond the arguments), as JAX 0.10 saves them
EXPECTED_SAVED = {"none": 0, "everything": 2, "nothing": 0, "dots": 1, "dots_no_batch": 1,
                  "only_a": 1, "all_but_a": 1}


def _problem(lib):
    if lib == "jax":
        np_, ckpt, policies, name_fn = jjnp, jax.checkpoint, jax.checkpoint_policies, \
            jax.ad_checkpoint.checkpoint_name
    else:
        np_, ckpt, policies, name_fn = jnp, plax.checkpoint, plax.checkpoint_policies, \
            checkpoint_name
    return np_, ckpt, policies, name_fn


def saved_lines(lib, key, capsys) -> list[str]:
    make_policy, kind = POLICIES[key]
    np_, ckpt, policies, name_fn = _problem(lib)
    show = print_saved_residuals if lib == "plax" else jax.ad_checkpoint.print_saved_residuals
    x = np.arange(3.0, dtype=np.float32)
    if kind == "named":
        f = ckpt(lambda x: named(np_, name_fn, x), policy=make_policy(policies))
        show(f, x)
    else:
        W = np.ones((3, 3), np.float32)
        f = ckpt(lambda W, x: np_.sum(g(np_, W, x)), policy=make_policy(policies))
        show(f, W, x)
    return [ln for ln in capsys.readouterr().out.splitlines() if ln]


@pytest.mark.parametrize("key", sorted(POLICIES))
def test_saved_residuals_follow_the_policy(key, capsys):
    lines = saved_lines("plax", key, capsys)
    extra = [ln for ln in lines if "argument" not in ln]
    assert len(extra) == EXPECTED_SAVED[key], lines


@pytest.mark.skipif(jax is None, reason="JAX not installed")
@pytest.mark.parametrize("key", sorted(POLICIES))
def test_saved_residuals_match_jax(key, capsys):
    ours = saved_lines("plax", key, capsys)
    theirs = saved_lines("jax", key, capsys)
    assert len(ours) == len(theirs), (ours, theirs)
    assert sorted(ln.split()[0] for ln in ours) == sorted(ln.split()[0] for ln in theirs)
    # saved intermediates are described as JAX does, with the line of the function that
    # made each (file:line:col (function))
    saved_ours = sorted(ln for ln in ours if "argument" not in ln)
    saved_theirs = sorted(ln for ln in theirs if "argument" not in ln)
    assert saved_ours == saved_theirs
    assert all(" from " + __file__ + ":" in ln for ln in saved_ours), saved_ours


def _count(jaxpr, name: str) -> int:
    """Equations of primitive ``name`` in ``jaxpr`` and its sub-jaxprs."""
    from plax.core.jaxpr import ClosedJaxpr, Jaxpr
    n = 0
    for e in jaxpr.eqns:
        n += e.primitive.name == name
        for p in e.params.values():
            if isinstance(p, (Jaxpr, ClosedJaxpr)):
                n += _count(p.jaxpr if isinstance(p, ClosedJaxpr) else p, name)
    return n


def test_backward_pass_recomputes_what_is_not_saved():
    W, x = jnp.ones((3, 3)), jnp.arange(3.0)

    def grad_jaxpr(policy):
        f = plax.checkpoint(lambda W, x: jnp.sum(g(jnp, W, x)), policy=policy)
        return plax.make_jaxpr(plax.grad(f, argnums=(0, 1)))(W, x).jaxpr

    plain = plax.make_jaxpr(plax.grad(lambda W, x: jnp.sum(g(jnp, W, x)), argnums=(0, 1)))(W, x)
    # forward: 1 dot, 2 sin; backward without remat: 2 dots (one per argument)
    assert (_count(plain.jaxpr, "dot_general"), _count(plain.jaxpr, "sin")) == (3, 2)
    nothing = grad_jaxpr(None)               # recomputes the dot and the inner sin
    assert (_count(nothing, "dot_general"), _count(nothing, "sin")) == (4, 3)
    dots = grad_jaxpr(cp.dots_saveable)      # the dot is saved, the inner sin recomputed
    assert (_count(dots, "dot_general"), _count(dots, "sin")) == (3, 3)
    everything = grad_jaxpr(cp.everything_saveable)
    assert (_count(everything, "dot_general"), _count(everything, "sin")) == (3, 2)


@pytest.mark.parametrize("key", sorted(POLICIES))
def test_gradients_equal_the_plain_function(key):
    make_policy, kind = POLICIES[key]
    policy = make_policy(cp)
    with plax.config.override("enable_x64", True):
        x = jnp.asarray(np.linspace(-1.0, 1.0, 3))
        if kind == "named":
            plain = lambda x: named(jnp, checkpoint_name, x)  # noqa: E731
            args = (x,)
        else:
            W = jnp.asarray(np.linspace(0.5, 1.5, 9).reshape(3, 3))
            plain = lambda W, x: jnp.sum(g(jnp, W, x))  # noqa: E731
            args = (W, x)
        f = plax.checkpoint(plain, policy=policy)
        check_grads(f, args, order=2, modes=("fwd", "rev"))
        for a, b in zip(plax.grad(f, argnums=tuple(range(len(args))))(*args),
                        plax.grad(plain, argnums=tuple(range(len(args))))(*args)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12)


def test_checkpoint_primitive_in_jaxpr_and_under_transforms():
    f = plax.checkpoint(lambda x, y: (jnp.sin(x) * y, x))
    closed = plax.make_jaxpr(f)(1.0, 2.0)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["checkpoint"]
    xs = jnp.arange(3.0)
    np.testing.assert_allclose(np.asarray(plax.jit(f)(1.0, 2.0)[0]), np.sin(1.0) * 2, rtol=1e-6)
    out = plax.vmap(f)(xs, jnp.ones(3))
    np.testing.assert_allclose(np.asarray(out[0]), np.sin(np.arange(3.0)), rtol=1e-6)
    gf = plax.vmap(plax.grad(lambda x: f(x, 2.0)[0]))
    want = 2 * np.cos(np.arange(3.0))
    np.testing.assert_allclose(np.asarray(gf(xs)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(plax.jit(gf)(xs)), want, rtol=1e-6)
    _, t = plax.jvp(lambda x: f(x, 2.0)[0], (1.0,), (1.0,))
    np.testing.assert_allclose(float(t), 2 * np.cos(1.0), rtol=1e-6)


def test_checkpoint_with_custom_jvp_inside_and_closure_over_tracer():
    @plax.custom_jvp
    def s(x):
        return jnp.sin(x)

    s.defjvp(lambda p, t: (s(p[0]), 2 * t[0]))
    f = plax.checkpoint(lambda x: s(x) * x)
    np.testing.assert_allclose(float(plax.jit(plax.grad(f))(1.0)), 2 + np.sin(1.0), rtol=1e-6)

    def outer(y):  # the checkpointed function closes over a tracer of grad
        return plax.checkpoint(lambda x: jnp.sin(x * y))(2.0)

    np.testing.assert_allclose(float(plax.grad(outer)(0.5)), 2 * np.cos(1.0), rtol=1e-6)


def test_checkpoint_name_is_identity_with_a_primitive():
    closed = plax.make_jaxpr(lambda x: checkpoint_name(x * 2, "z"))(1.0)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["mul", "name"]
    assert float(plax.jit(lambda x: checkpoint_name(x * 2, "z"))(1.5)) == 3.0
    assert float(plax.grad(lambda x: checkpoint_name(x * x, "z"))(3.0)) == 6.0
    with pytest.raises(TypeError, match="string"):
        checkpoint_name(1.0, 3)


def test_checkpoint_rejects_non_callable():
    with pytest.raises(TypeError, match="callable"):
        plax.checkpoint(3)


def test_effects_inside_checkpoint_run_again_in_the_backward_pass(capsys):
    # as in JAX: the backward pass recomputes the body's effects with the rest
    def f(x):
        plax.debug.print("x={}", x)
        return jnp.sin(x)

    plax.jit(lambda x: (plax.checkpoint(f)(x), x)[1])(3.0)
    assert capsys.readouterr().out.split() == ["x=3.0"]
    for policy in (None, cp.everything_saveable):
        g = plax.grad(plax.checkpoint(f, policy=policy))
        np.testing.assert_allclose(float(g(1.0)), np.cos(1.0), rtol=1e-6)
        np.testing.assert_allclose(float(plax.jit(g)(2.0)), np.cos(2.0), rtol=1e-6)
        assert capsys.readouterr().out.split() == ["x=1.0", "x=1.0", "x=2.0", "x=2.0"]

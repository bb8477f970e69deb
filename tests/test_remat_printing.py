"""``print_saved_residuals`` with source lines, and the backward pass of ``checkpoint`` staged
as one ``remat2[differentiated=True]`` equation: printed as JAX 0.10.2 prints them (beside
JAX where installed), with gradients checked against the function without remat and
against finite differences.
"""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp

try:
    import jax
    import jax.ad_checkpoint  # noqa: F401
    import jax.numpy as jjnp
except ImportError:  # the JAX halves of the tests are skipped
    jax = jjnp = None


def _layer(np_, W, x):
    y = np_.dot(W, x)
    return np_.sin(y)


def _three_layers(np_, W1, W2, x):
    return _layer(np_, W2, _layer(np_, W1, x))


def _named(jx, np_, W, x):
    y = jx.ad_checkpoint.checkpoint_name(np_.dot(W, x), "dot")
    return np_.sin(y)


_SIN_LINE = inspect.getsourcelines(_layer)[1] + 2  # the line of np_.sin(y)
_NAMED_LINE = inspect.getsourcelines(_named)[1] + 1


def _lines(jx, np_, which, capsys):
    W1, W2, x = np_.ones((5, 4)), np_.ones((3, 5)), np_.ones(4)
    show = jx.ad_checkpoint.print_saved_residuals
    if which == "plain":
        show(lambda W1, W2, x: _three_layers(np_, W1, W2, x), W1, W2, x)
    elif which == "remat":
        layer = jx.checkpoint(lambda W, x: _layer(np_, W, x))
        show(lambda W1, W2, x: layer(W2, layer(W1, x)), W1, W2, x)
    elif which == "named":
        policy = jx.checkpoint_policies.save_only_these_names("dot")
        show(jx.checkpoint(lambda W, x: _named(jx, np_, W, x), policy=policy), W1, x)
    elif which == "jit":
        show(jx.jit(lambda W, x: _layer(np_, W, x)), W1, x)
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("which", ["plain", "remat", "named", "jit"])
def test_saved_residuals_print_source_lines_as_jax(which, capsys):
    ours = _lines(plax, jnp, which, capsys)
    here = re.escape(__file__)
    if which == "plain":
        assert ours[3:] == [f"f32[5] output of sin from {__file__}:{_SIN_LINE}:11 (_layer)",
                            f"f32[5] output of cos from {__file__}:{_SIN_LINE}:11 (_layer)",
                            f"f32[3] output of cos from {__file__}:{_SIN_LINE}:11 (_layer)"]
    elif which == "remat":
        assert ours[3:] == [f"f32[5] output of sin from {__file__}:{_SIN_LINE}:11 (_layer)"]
    elif which == "named":
        assert re.fullmatch(rf"f32\[5\] named 'dot' from {here}:{_NAMED_LINE}:8 \(_named\)",
                            ours[-1]), ours
    else:  # made by plax on the way (vjp calls the jitted function): no source, as JAX
        assert ours[-1] == "f32[5] output of jitted function '<lambda>' from "
    if jax is not None:
        assert _lines(jax, jjnp, which, capsys) == ours


def test_sources_are_not_recorded_outside_print_saved_residuals():
    from plax.core import source_info
    plax.make_jaxpr(jnp.sin)(1.0)
    assert not source_info.capturing[0] and not source_info._capture.sources


def _grad_of_remat(jx, np_):
    return str(jx.make_jaxpr(jx.grad(lambda x: jx.checkpoint(
        lambda y: np_.sin(np_.sin(y)))(x)))(2.0))


def test_grad_of_remat_prints_a_transposed_remat_as_jax():
    text = _grad_of_remat(plax, jnp)
    assert text == """{ lambda ; a:f32[]. let
    b:f32[] = sin a
    _:f32[] = sin b
    c:f32[] = remat2[
      differentiated=True
      jaxpr={ lambda ; d:f32[] e:f32[]. let
          f:f32[] = sin d
          g:f32[] = cos d
          h:f32[] = cos f
          i:f32[] = mul e h
          j:f32[] = mul i g
        in (j,) }
      policy=None
      prevent_cse=True
    ] a 1.0:f32[]
  in (c,) }"""
    if jax is not None:
        assert _grad_of_remat(jax, jjnp) == text


def test_saved_values_are_operands_of_the_transposed_remat_and_unused_primals_are_not():
    f = plax.checkpoint(lambda y: jnp.sin(jnp.sin(y)),
                        policy=plax.checkpoint_policies.everything_saveable)
    closed = plax.make_jaxpr(plax.grad(f))(2.0)
    (remat,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "checkpoint"]
    assert remat.params["differentiated"] is True
    assert [str(e.primitive.name) for e in remat.params["jaxpr"].jaxpr.eqns] == ["mul", "mul"]
    assert len(remat.invars) == 3  # cos a, cos (sin a), the cotangent: not a itself


def _f(x):
    return jnp.sum(jnp.sin(x) * jnp.cos(2.0 * x))


@pytest.mark.parametrize("policy", [None, "dots_saveable", "everything_saveable"])
def test_gradients_through_the_transposed_remat(policy):
    pol = None if policy is None else getattr(plax.checkpoint_policies, policy)
    g = plax.checkpoint(_f, policy=pol)
    x = jnp.asarray(np.linspace(-1.0, 1.0, 5, dtype=np.float32))
    want = np.asarray(plax.grad(_f)(x))
    np.testing.assert_allclose(np.asarray(plax.grad(g)(x)), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(plax.jit(plax.grad(g))(x)), want, rtol=1e-6,
                               atol=1e-6)
    # second order: the transposed remat is differentiated again
    hess = np.asarray(plax.hessian(g)(x))
    np.testing.assert_allclose(hess, np.asarray(plax.hessian(_f)(x)), rtol=1e-5, atol=1e-5)
    eps = 1e-2
    x64 = np.asarray(x, np.float64)
    fd = np.array([(np.asarray(plax.grad(_f)(jnp.asarray(x64 + eps * e, jnp.float32)))
                    - np.asarray(plax.grad(_f)(jnp.asarray(x64 - eps * e, jnp.float32))))
                   / (2 * eps) for e in np.eye(5)])
    np.testing.assert_allclose(hess, fd, rtol=2e-2, atol=2e-2)
    # vmap of the gradient, against a loop
    xs = jnp.asarray(np.linspace(-1.0, 1.0, 10, dtype=np.float32).reshape(2, 5))
    loop = np.stack([np.asarray(plax.grad(g)(xi)) for xi in xs])
    np.testing.assert_allclose(np.asarray(plax.vmap(plax.grad(g))(xs)), loop, rtol=1e-6)


def _remat_programs(jx, np_):
    f = lambda x: jx.checkpoint(lambda y: np_.sin(np_.sin(y)))(x)  # noqa: E731
    return [str(jx.make_jaxpr(lambda x: jx.vjp(f, x)[1](1.0))(2.0)),
            str(jx.make_jaxpr(jx.jit(jx.grad(f)))(2.0)),
            str(jx.make_jaxpr(jx.vmap(jx.grad(f)))(np_.ones(3)))]


def test_vjp_jit_and_vmap_of_remat_print_as_jax():
    texts = _remat_programs(plax, jnp)
    assert all(t.count("remat2[") == 1 and "differentiated=True" in t for t in texts)
    assert "jit[" in texts[1] and "f32[3] = remat2[" in texts[2]
    if jax is not None:
        assert _remat_programs(jax, jjnp) == texts

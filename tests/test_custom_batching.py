"""plax.custom_batching (``jax.custom_batching``): custom_vmap's rule under vmap, nested
vmap and jit, its JVP, its refusal of reverse mode, its jaxpr, and sequential_vmap; NumPy
references, and JAX 0.10.2 side by side where installed."""
from __future__ import annotations

import re

import numpy as np
import pytest

import plax
from plax import numpy as jnp
from plax.custom_batching import custom_vmap, sequential_vmap


def _make(mod, calls=None):
    """``sin(x) * y`` whose vmap rule computes ``cos(x) * y`` instead (so the rule's use is
    visible), for plax or JAX (``mod`` is the package)."""
    cv = mod.custom_batching.custom_vmap

    @cv
    def f(x, y):
        return mod.numpy.sin(x) * y

    @f.def_vmap
    def rule(axis_size, in_batched, x, y):
        if calls is not None:
            calls.append((axis_size, list(in_batched)))
        return mod.numpy.cos(x) * y, in_batched[0] or in_batched[1]

    return f


def test_unbatched_call_is_the_function():
    f = _make(plax)
    np.testing.assert_allclose(f(1.0, 2.0), np.sin(1.0) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(plax.jit(f)(1.0, 2.0), np.sin(1.0) * 2.0, rtol=1e-6)


def test_vmap_calls_the_rule_with_batch_axis_first():
    calls = []
    f = _make(plax, calls)
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    out = plax.vmap(f, in_axes=(1, None))(x, 2.0)
    assert calls == [(3, [True, False])]
    np.testing.assert_allclose(out, np.cos(x.T) * 2.0, rtol=1e-6)


def test_nested_vmap_and_jit_compose():
    f = _make(plax)
    xs, ys = np.arange(3.0, dtype=np.float32), np.arange(2.0, dtype=np.float32)
    nested = plax.vmap(plax.vmap(f, in_axes=(0, None)), in_axes=(None, 0))(xs, ys)
    np.testing.assert_allclose(nested, np.cos(xs)[None, :] * ys[:, None], rtol=1e-6)
    for g in (plax.jit(plax.vmap(f, in_axes=(0, None))), plax.vmap(plax.jit(f), in_axes=(0, None))):
        np.testing.assert_allclose(g(xs, 2.0), np.cos(xs) * 2.0, rtol=1e-6)


def test_vmap_over_other_arguments_only_runs_the_function():
    f = _make(plax)
    out = plax.vmap(lambda z: f(1.0, 2.0) + 0 * z)(jnp.arange(3.0))
    np.testing.assert_allclose(out, np.full(3, np.sin(1.0) * 2.0), rtol=1e-6)


def test_pytree_arguments_and_outputs():
    seen = []

    @custom_vmap
    def f(d):
        return {"s": d["u"] + d["v"], "t": (d["u"], 2.0 * d["u"])}

    @f.def_vmap
    def rule(axis_size, in_batched, d):
        seen.append(in_batched)
        return ({"s": d["u"] * 10.0 + d["v"], "t": (d["u"][0], 3.0 * d["u"])},
                {"s": True, "t": (False, True)})

    u = np.arange(3.0, dtype=np.float32)
    out = plax.vmap(f, in_axes=({"u": 0, "v": None},))({"u": u, "v": 1.0})
    assert seen == [[{"u": True, "v": False}]]
    np.testing.assert_allclose(out["s"], u * 10.0 + 1.0)
    np.testing.assert_allclose(out["t"][0], np.zeros(3))  # unbatched: broadcast, as in JAX
    np.testing.assert_allclose(out["t"][1], 3.0 * u)


def test_rule_errors():
    @custom_vmap
    def f(x):
        return x

    with pytest.raises(AttributeError, match="No batching rule defined for custom_vmap function f"):
        plax.vmap(f)(jnp.arange(3.0))
    f.def_vmap(lambda n, b, x: (x, [True]))
    with pytest.raises(ValueError, match="structure of output value and output batching"):
        plax.vmap(f)(jnp.arange(3.0))
    f.def_vmap(lambda n, b, x: ((x, x), (True, True)))
    with pytest.raises(ValueError, match="does not match that of original custom-vmapped"):
        plax.vmap(f)(jnp.arange(3.0))
    f.def_vmap(lambda n, b, x: (x[0], True))  # JAX trusts this; plax says what is wrong
    with pytest.raises(ValueError, match="no leading axis of the batch size 3"):
        plax.vmap(f)(jnp.arange(3.0))
    with pytest.raises(TypeError, match="could not be resolved to positional-only"):
        f(1.0, z=2.0)


def test_closing_over_a_batched_value_is_refused():
    def outer(c):
        @custom_vmap
        def f(x):
            return x + c

        f.def_vmap(lambda n, b, x: (x, True))
        return f(jnp.ones(3))

    with pytest.raises(ValueError, match="closes over a value that vmap batches"):
        plax.vmap(outer)(jnp.arange(2.0))


def test_jvp_uses_the_function_and_vmap_of_jvp_the_rules_jvp():
    f = _make(plax)
    p, t = plax.jvp(f, (1.0, 2.0), (1.0, 0.0))
    np.testing.assert_allclose([p, t], [np.sin(1.0) * 2.0, np.cos(1.0) * 2.0], rtol=1e-6)
    xs = np.arange(3.0, dtype=np.float32)
    # primal and tangent batched together: the rule's JVP (d/dx cos(x) * 2 = -2 sin x)
    p, t = plax.vmap(lambda x, t: plax.jvp(f, (x, 2.0), (t, 0.0)))(xs, np.ones(3, np.float32))
    np.testing.assert_allclose(p, np.cos(xs) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(t, -np.sin(xs) * 2.0, rtol=1e-6)
    # only the tangent batched: vectorised around the rule's JVP
    p, t = plax.vmap(lambda t: plax.jvp(f, (1.0, 2.0), (t, 0.0)))(xs)
    np.testing.assert_allclose(p, np.full(3, np.cos(1.0) * 2.0), rtol=1e-6)
    np.testing.assert_allclose(t, -np.sin(1.0) * 2.0 * xs, rtol=1e-6)


def test_reverse_mode_is_refused_as_in_jax():
    f = _make(plax)
    for attempt in (lambda: plax.grad(f)(1.0, 2.0),
                    lambda: plax.vmap(plax.grad(f), in_axes=(0, None))(jnp.arange(3.0), 2.0),
                    lambda: plax.linearize(f, 1.0, 2.0)):
        with pytest.raises(ValueError, match="Linearization failed"):
            attempt()
    # vmap first: the rule replaces the function, and the rule is differentiable
    g = plax.grad(lambda x: plax.vmap(f, in_axes=(0, None))(x, 2.0).sum())(jnp.arange(3.0))
    np.testing.assert_allclose(g, -2.0 * np.sin(np.arange(3.0)), rtol=1e-6)


def test_custom_vjp_around_custom_vmap_gives_reverse_mode():
    @plax.custom_vjp
    @custom_vmap
    def f(x, y):
        return jnp.sin(x) * y

    f.def_vmap(lambda n, b, xs, ys: (jnp.cos(xs) * ys, True))
    f.defvjp(lambda x, y: (f(x, y), (jnp.cos(x), jnp.sin(x), y)),
             lambda res, g: (res[0] * g * res[2], res[1] * g))
    np.testing.assert_allclose(plax.vmap(f)(jnp.zeros(3), jnp.ones(3)), np.ones(3))
    np.testing.assert_allclose(plax.grad(f)(0.0, 1.0), 1.0)


def test_sequential_vmap_loops_with_the_function():
    calls = []

    @sequential_vmap
    def total(x, scale):
        calls.append(plax.typeof(x).shape)
        return x.sum() * scale

    x = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    np.testing.assert_allclose(plax.vmap(total, in_axes=(0, None))(x, 2.0), x.sum(1) * 2.0)
    assert calls and all(shape == (2,) for shape in calls)  # one member at a time
    text = str(plax.make_jaxpr(plax.vmap(total, in_axes=(0, None)))(x, 2.0))
    assert "scan[" in text and "custom_vmap_call[" in text


def test_make_jaxpr_prints_as_jax():
    f = _make(plax)
    text = str(plax.make_jaxpr(f)(1.0, 2.0))
    assert text == """{ lambda ; a:f32[] b:f32[]. let
    c:f32[] = custom_vmap_call[
      call={ lambda ; d:f32[] e:f32[]. let
          f:f32[] = sin d
          g:f32[] = mul f e
        in (g,) }
      in_tree=PyTreeDef(([], (*, *)))
      out_tree=PyTreeDef(*)
      rule=<function _make.<locals>.rule at 0xXXXXXXXXXXXX>
    ] a b
  in (c,) }"""


def _jax():
    return pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")


def test_beside_jax_values_and_jaxprs():
    jax = _jax()
    import jax.custom_batching  # noqa: F401
    pf, jf = _make(plax), _make(jax)
    xs = np.linspace(-1, 1, 4).astype(np.float32)
    for pv, jv in [(plax.vmap(pf, in_axes=(0, None))(xs, 2.0), jax.vmap(jf, in_axes=(0, None))(xs, 2.0)),
                   (plax.jvp(pf, (0.5, 2.0), (1.0, 1.0)), jax.jvp(jf, (0.5, 2.0), (1.0, 1.0))),
                   (plax.vmap(lambda t: plax.jvp(pf, (0.5, 2.0), (t, 0.0)))(xs),
                    jax.vmap(lambda t: jax.jvp(jf, (0.5, 2.0), (t, 0.0)))(xs))]:
        for a, b in zip(plax.tree_util.tree_leaves(pv), jax.tree_util.tree_leaves(jv)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    with pytest.raises(ValueError, match="Linearization failed"):
        jax.grad(jf)(1.0, 2.0)

    def norm(text):  # the address JAX masks, and the rule's qualified name
        return re.sub(r"<function \S+ at", "<function RULE at", text)

    for args, fun in [((1.0, 2.0), lambda m, f: f),
                      ((1.0, 1.0), lambda m, f: lambda x, t: m.jvp(f, (x, 2.0), (t, 0.0)))]:
        ours = str(plax.make_jaxpr(fun(plax, pf))(*args))
        theirs = str(jax.make_jaxpr(fun(jax, jf))(*args))
        assert norm(ours) == norm(theirs)


def test_sequential_vmap_beside_jax():
    jax = _jax()
    import jax.custom_batching  # noqa: F401
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    ours = plax.vmap(sequential_vmap(lambda v: jnp.cumsum(v)))(x)
    theirs = jax.vmap(jax.custom_batching.sequential_vmap(lambda v: jax.numpy.cumsum(v)))(x)
    np.testing.assert_allclose(ours, theirs)

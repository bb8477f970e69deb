"""``custom_jvp``/``custom_vjp`` with ``symbolic_zeros=True``: zero tangents and cotangents
reach the rules as ``SymbolicZero`` s and a forward rule learns which inputs are perturbed,
under jvp, grad, jit and vmap; the pattern is compared with JAX 0.10.2 where installed."""
from __future__ import annotations

import numpy as np
import pytest

import plax


def _mul_jvp(mod, seen):
    """x * y whose JVP rule records which tangents are symbolic zeros."""
    cd = mod.custom_derivatives

    @mod.custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        seen.append(tuple(type(t) is cd.SymbolicZero for t in tangents))
        for t, p in zip(tangents, primals):
            if type(t) is cd.SymbolicZero:
                assert (t.shape, t.dtype) == (np.shape(p), np.dtype("float32"))
        t = 0.0
        if type(tx) is not cd.SymbolicZero:
            t = t + tx * y
        if type(ty) is not cd.SymbolicZero:
            t = t + ty * x
        return f(x, y), t

    f.defjvp(f_jvp, symbolic_zeros=True)
    return f


def _two_out_vjp(mod, seen):
    """(x * y, x + y) whose rules record the perturbed flags and the zero cotangents."""
    cd = mod.custom_derivatives

    @mod.custom_vjp
    def f(x, y):
        return x * y, x + y

    def fwd(x, y):
        seen.append(("fwd", x.perturbed, y.perturbed))
        x, y = cd.custom_vjp_primal_tree_values((x, y))
        return f(x, y), (x, y)

    def bwd(res, cts):
        x, y = res
        a, b = cts
        seen.append(("bwd",) + tuple(type(c) is cd.SymbolicZero for c in cts))
        a = 0.0 if type(a) is cd.SymbolicZero else a
        b = 0.0 if type(b) is cd.SymbolicZero else b
        return a * y + b, a * x + b

    f.defvjp(fwd, bwd, symbolic_zeros=True)
    return f


def _jvp_cases(mod):
    jnp = mod.numpy
    seen: list = []
    f = _mul_jvp(mod, seen)
    out = [
        mod.jvp(lambda x: f(x, 3.0), (2.0,), (1.0,))[1],
        mod.grad(lambda y: f(2.0, y))(3.0),
        mod.jit(mod.grad(lambda x: f(x, 3.0)))(2.0),
        mod.vmap(mod.grad(lambda y: f(2.0, y)))(jnp.arange(3.0)),
        mod.jvp(mod.vmap(lambda x: f(x, 3.0)), (jnp.arange(3.0),), (jnp.ones(3),))[1],
        mod.grad(lambda x: f(x, x))(2.0),
    ]
    return [np.asarray(o) for o in out], seen


def _vjp_cases(mod):
    jnp = mod.numpy
    seen: list = []
    f = _two_out_vjp(mod, seen)
    out = [
        mod.grad(lambda x: f(x, 3.0)[0])(2.0),
        mod.grad(lambda y: f(2.0, y)[1])(3.0),
        mod.jit(mod.grad(lambda x: f(x, 3.0)[0]))(2.0),
        mod.grad(lambda x: mod.jit(f)(x, 3.0)[0])(2.0),
        mod.vmap(mod.grad(lambda x: f(x, 3.0)[1]))(jnp.arange(2.0)),
    ]
    return [np.asarray(o) for o in out], seen


def test_custom_jvp_rule_sees_symbolic_zeros():
    values, seen = _jvp_cases(plax)
    np.testing.assert_allclose(values[0], 3.0)
    np.testing.assert_allclose(values[1], 2.0)
    np.testing.assert_allclose(values[2], 3.0)
    np.testing.assert_allclose(values[3], [2.0, 2.0, 2.0])
    np.testing.assert_allclose(values[4], [3.0, 3.0, 3.0])
    np.testing.assert_allclose(values[5], 4.0)
    assert seen[0] == (False, True) and seen[1] == (True, False)
    assert seen[-1] == (False, False)


def test_custom_vjp_rules_see_perturbed_flags_and_symbolic_zero_cotangents():
    values, seen = _vjp_cases(plax)
    np.testing.assert_allclose(values[:4], [3.0, 1.0, 3.0, 3.0])
    np.testing.assert_allclose(values[4], [1.0, 1.0])
    assert seen[:4] == [("fwd", True, False), ("bwd", False, True),
                        ("fwd", False, True), ("bwd", True, False)]


def test_symbolic_zero_of_an_integer_argument_is_float0():
    cd = plax.custom_derivatives
    got = []

    @plax.custom_jvp
    def g(x, n):
        return x * n

    def g_jvp(p, t):
        got.append(t[1])
        return g(*p), t[0] * p[1]

    g.defjvp(g_jvp, symbolic_zeros=True)
    assert float(plax.grad(g)(2.0, 3)) == 3.0
    assert type(got[0]) is cd.SymbolicZero and got[0].dtype == plax.dtypes.float0


def test_without_symbolic_zeros_rules_see_arrays():
    @plax.custom_jvp
    def f(x, y):
        return x * y

    kinds = []

    def f_jvp(p, t):
        kinds.append([type(v).__name__ for v in t])
        return f(*p), t[0] * p[1] + t[1] * p[0]

    f.defjvp(f_jvp)
    assert float(plax.grad(f)(2.0, 3.0)) == 3.0
    assert "SymbolicZero" not in kinds[0]


def test_pattern_beside_jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")
    import jax.custom_derivatives  # noqa: F401
    for cases in (_jvp_cases, _vjp_cases):
        ours, seen_ours = cases(plax)
        theirs, seen_theirs = cases(jax)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-6)
        assert seen_ours == seen_theirs


def _bad_symbolic_zero(mod):
    cd = mod.custom_derivatives

    @mod.custom_vjp
    def f(x, y):
        return x * y["a"]

    f.defvjp(lambda x, y: (f(x.value, {"a": y["a"].value}), None),
             lambda r, g: (g, {"a": cd.SymbolicZero(mod.typeof(mod.numpy.ones(3)))}),
             symbolic_zeros=True)
    return f


def test_a_symbolic_zero_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=r"at output\[1\]\['a'\] the SymbolicZero had "
                                         r"shape/dtype f32\[3\] while the corresponding input"):
        plax.grad(_bad_symbolic_zero(plax), argnums=(0, 1))(2.0, {"a": 3.0})


def test_wrong_symbolic_zero_beside_jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")
    import jax.custom_derivatives  # noqa: F401
    with pytest.raises(ValueError, match=r"at output\[1\]\['a'\] the SymbolicZero had"):
        jax.grad(_bad_symbolic_zero(jax), argnums=(0, 1))(2.0, {"a": 3.0})

"""Jaxprs: make_jaxpr's printed form (hand-checked texts, and the same skeleton as real JAX
prints), constants and literals, sub-jaxprs, evaluation, and check_jaxpr on good and
malformed jaxprs."""
from __future__ import annotations

import re

import numpy as np
import pytest

import plax
from plax import core
from plax import numpy as jnp
from plax.core import ClosedJaxpr, Jaxpr, JaxprEqn, JaxprTypeError, Literal, ShapedArray, Var

X = np.arange(6, dtype=np.float32).reshape(2, 3)
V = np.ones(3, np.float32)
W = np.ones((3, 2), np.float32)


def test_short_jaxpr_prints_on_one_line():
    text = str(plax.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0))
    assert text == "{ lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = mul b 2.0:f32[] in (c,) }"


def test_long_jaxpr_breaks_lines_and_sorts_params():
    text = str(plax.make_jaxpr(lambda x: jnp.sum(x ** 2, axis=0))(X))
    assert text == ("{ lambda ; a:f32[2,3]. let\n"
                    "    b:f32[2,3] = integer_pow[y=2] a\n"
                    "    c:f32[3] = reduce_sum[axes=(0,) out_sharding=None] b\n"
                    "  in (c,) }")
    text = str(plax.make_jaxpr(lambda x: x.T.reshape(6))(X))
    assert "b:f32[3,2] = transpose[permutation=(1, 0)] a" in text


def test_closed_over_array_is_a_constvar():
    w = jnp.asarray(W)
    closed = plax.make_jaxpr(lambda x: jnp.tanh(x @ w))(X)
    assert str(closed).startswith("{ lambda a:f32[3,2]; b:f32[2,3]. let\n"
                                  "    c:f32[2,2] = dot_general[\n")
    assert closed.consts == [w]
    assert [a.str_short() for a in closed.in_avals] == ["f32[2,3]"]
    assert [a.str_short() for a in closed.out_avals] == ["f32[2,2]"]


def test_unused_results_print_as_underscore_and_names_continue_past_z():
    text = str(plax.make_jaxpr(plax.grad(lambda x: jnp.sum(jnp.sin(x) * x)))(V))
    assert "    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] d\n" in text

    def many(x):
        for _ in range(27):
            x = x + 1.0
        return x

    text = str(plax.make_jaxpr(many)(1.0))
    assert "    ba:f32[] = add z 1.0:f32[]\n    bb:f32[] = add ba 1.0:f32[]\n" in text


def test_outputs_inputs_and_literals():
    closed = plax.make_jaxpr(lambda x, n: (x * 2, n, 3.0))(1.0, np.arange(3))
    assert str(closed) == ("{ lambda ; a:f32[] b:i32[3]. let\n"
                           "    c:f32[] = mul a 2.0:f32[]\n"
                           "  in (c, b, 3.0:f32[]) }")
    out = closed.jaxpr.outvars[2]
    assert isinstance(out, Literal) and out.aval.weak_type


def test_sub_jaxpr_params_print_nested():
    @plax.custom_jvp
    def f(x):
        return jnp.sin(x)

    def f_jvp(primals, tangents):
        return f(primals[0]), 2.0 * tangents[0]

    f.defjvp(f_jvp)
    text = str(plax.make_jaxpr(lambda x: f(x) * x)(1.0))
    assert text == ("{ lambda ; a:f32[]. let\n"
                    "    b:f32[] = custom_jvp_call[\n"
                    "      name=f\n"
                    "      call_jaxpr={ lambda ; c:f32[]. let d:f32[] = sin c in (d,) }\n"
                    "      jvp=f_jvp\n"
                    "      symbolic_zeros=False\n"
                    "    ] a\n"
                    "    e:f32[] = mul b a\n"
                    "  in (e,) }")


def test_make_jaxpr_options():
    closed = plax.make_jaxpr(lambda x, n: x * n, static_argnums=1)(V, 3)
    assert "mul a 3.0:f32[]" in str(closed)
    closed, shape = plax.make_jaxpr(lambda x: {"y": x * 2}, return_shape=True)(V)
    assert shape == {"y": plax.ShapeDtypeStruct((3,), jnp.float32)}
    assert str(closed).startswith("{ lambda ; a:f32[3]")


# ------------------------------------------------------------------ against real JAX

_JAX_CASES = {
    "chain": (lambda np_: lambda x, y: np_.sin(x) * y + np_.cos(y), (X, X)),
    "sum_sq": (lambda np_: lambda x: np_.sum(x ** 2, axis=0), (X,)),
    "dot": (lambda np_: lambda x, v: np_.dot(x, v), (X, V)),
    "exp_log": (lambda np_: lambda x: np_.log(np_.exp(x) + 1.0), (V,)),
    "max": (lambda np_: lambda x: np_.max(x, axis=1), (X,)),
    "transpose_reshape": (lambda np_: lambda x: x.T.reshape(6), (X,)),
    "literal_outputs": (lambda np_: lambda x, n: (x * 2, n, 3.0), (1.0, np.arange(3))),
}


def _jax_like(case, lib, np_):
    make, args = _JAX_CASES[case]
    return lib.make_jaxpr(make(np_))(*args)


def _skeleton(text: str) -> str:
    """The printed jaxpr without parameter blocks, separators and layout: binders, types,
    primitive names and operands in order (lax's parameter sets differ between libraries)."""
    text = re.sub(r"(:[a-z0-9]+)\[([0-9,]*)\]", r"\1<\2>", text)  # types: f32[2,3] -> f32<2,3>
    out, depth = [], 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return " ".join("".join(out).replace(";", " ").split())


@pytest.mark.parametrize("case", list(_JAX_CASES))
def test_same_structure_as_jax(case):
    jax = pytest.importorskip("jax")
    ours = _jax_like(case, plax, jnp)
    theirs = _jax_like(case, jax, jax.numpy)
    assert [e.primitive.name for e in ours.eqns] == [e.primitive.name for e in theirs.eqns]
    assert _skeleton(str(ours)) == _skeleton(str(theirs))


def test_grad_jaxpr_same_structure_as_jax():
    jax = pytest.importorskip("jax")
    ours = plax.make_jaxpr(plax.grad(lambda x: jnp.sum(jnp.sin(x) * x)))(V)
    theirs = jax.make_jaxpr(jax.grad(lambda x: jax.numpy.sum(jax.numpy.sin(x) * x)))(V)
    assert _skeleton(str(ours)) == _skeleton(str(theirs))


# ------------------------------------------------------------------ evaluation

def test_eval_jaxpr_and_jaxpr_as_fun_round_trip():
    w = jnp.asarray(W)
    closed = plax.make_jaxpr(lambda x: (jnp.tanh(x @ w), x.sum() + 1.0))(X)
    a, b = core.jaxpr_as_fun(closed)(jnp.asarray(X))
    np.testing.assert_allclose(a, np.tanh(X @ W), rtol=1e-6)
    np.testing.assert_allclose(b, X.sum() + 1.0)
    out = core.eval_jaxpr(closed.jaxpr, closed.consts, jnp.asarray(X))
    np.testing.assert_allclose(out[0], np.tanh(X @ W), rtol=1e-6)
    with pytest.raises(TypeError, match="takes 1 arguments, got 2"):
        core.eval_jaxpr(closed.jaxpr, closed.consts, X, X)
    # evaluating under a transform differentiates the staged computation
    g = plax.grad(lambda x: core.jaxpr_as_fun(closed)(x)[1])(jnp.asarray(X))
    np.testing.assert_allclose(g, np.ones_like(X))


# ------------------------------------------------------------------ check_jaxpr

@pytest.mark.parametrize("fun,args", [
    (lambda x: jnp.sin(x) * 2.0, (1.0,)),
    (plax.grad(lambda x: jnp.sum(jnp.exp(x) @ jnp.ones((3, 2)))), (X,)),
    (plax.vmap(lambda a, i: a.at[i].add(1.0)), (X, np.array([0, 2]))),
    (plax.jacrev(lambda x: x[jnp.array([0, 0, 1])] ** 2), (V,)),
])
def test_check_jaxpr_accepts_staged_jaxprs(fun, args):
    closed = plax.make_jaxpr(fun)(*args)
    assert core.check_jaxpr(closed) is None
    assert core.check_jaxpr(closed.jaxpr) is None


def _f32(*shape):
    return ShapedArray(shape, np.dtype("float32"))


def test_check_jaxpr_rejects_malformed_jaxprs():
    sin_p = plax.lax.sin_p
    a, b, c = Var(_f32(3)), Var(_f32(3)), Var(_f32(2))
    use_before_def = Jaxpr([], [a], [b], [JaxprEqn(sin_p, [c], [b], {})])
    with pytest.raises(JaxprTypeError, match="used before it is defined"):
        core.check_jaxpr(use_before_def)
    wrong_type = Jaxpr([], [a], [c], [JaxprEqn(sin_p, [a], [c], {})])
    with pytest.raises(JaxprTypeError, match=r"produces f32\[3\] but the binders say f32\[2\]"):
        core.check_jaxpr(wrong_type)
    twice = Jaxpr([], [a], [b], [JaxprEqn(sin_p, [a], [b], {}), JaxprEqn(sin_p, [a], [b], {})])
    with pytest.raises(JaxprTypeError, match="defined twice"):
        core.check_jaxpr(twice)
    bad_literal = Jaxpr([], [a], [b], [JaxprEqn(plax.lax.add_p, [a, Literal(np.int32(1), _f32())],
                                                [b], {})])
    with pytest.raises(JaxprTypeError, match="Literal"):
        core.check_jaxpr(bad_literal)
    bad_operands = Jaxpr([], [a, c], [b], [JaxprEqn(plax.lax.add_p, [a, c], [b], {})])
    with pytest.raises(JaxprTypeError, match="rejects its operands"):
        core.check_jaxpr(bad_operands)
    bad = ClosedJaxpr(Jaxpr([], [a], [a], []), [])
    bad.consts = [1.0]
    with pytest.raises(JaxprTypeError, match="1 constants for 0 constvars"):
        core.check_jaxpr(bad)


def test_check_jaxpr_checks_sub_jaxprs():
    @plax.custom_jvp
    def f(x):
        return jnp.sin(x)

    f.defjvp(lambda p, t: (f(p[0]), t[0]))
    closed = plax.make_jaxpr(f)(V)
    inner = closed.eqns[0].params["call_jaxpr"].jaxpr
    inner.eqns[0].outvars[0] = Var(_f32(2))  # corrupt the body
    inner.outvars[0] = inner.eqns[0].outvars[0]
    with pytest.raises(JaxprTypeError, match="in a sub-jaxpr of equation"):
        core.check_jaxpr(closed)

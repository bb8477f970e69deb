"""Transform semantics checked against real JAX: the function ``vjp``/``linearize`` return is a
pytree (and ``tree_util.Partial``), custom_jvp/custom_vjp functions called outside any
transform return what the Python function returns, tracer conversions (``float(x)`` under
``grad`` ...), the weak types of every transform's outputs on Python scalars, and the
argument checks each transform makes when it is applied.

The expected values are written out (CI has no JAX); where JAX is installed, each table is
also run through JAX to show that it still describes JAX.
"""
from __future__ import annotations

import functools
import operator

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import errors, tree_util
from plax.array import Array
from plax.tree_util import Partial


def _libs():
    """(jax, jax.numpy) pairs to run a case with: plax, and JAX where installed."""
    out = [("plax", plax, jnp)]
    try:
        import jax
        out.append(("jax", jax, jax.numpy))
    except ImportError:
        pass
    return out


def _jax_or_skip():
    jax = pytest.importorskip("jax")
    return jax, jax.numpy


def _f(x):
    return jnp.sin(x) * x


X = np.array([1.0, 2.0], np.float32)


# ------------------------------------------------------------------ 1. vjp/linearize pytrees

def test_vjp_function_leaves_are_its_residual_arrays():
    _, f_vjp = plax.vjp(_f, jnp.asarray(X))
    leaves, treedef = tree_util.tree_flatten(f_vjp)
    assert leaves and all(isinstance(r, Array) for r in leaves)
    assert f_vjp not in leaves
    rebuilt = tree_util.tree_unflatten(treedef, leaves)
    np.testing.assert_allclose(rebuilt(jnp.ones(2))[0], f_vjp(jnp.ones(2))[0])
    # a map over the residuals changes the function: zero residuals, zero cotangent
    zeroed = tree_util.tree_map(lambda r: r * 0, f_vjp)
    np.testing.assert_array_equal(zeroed(jnp.ones(2))[0], np.zeros(2))


def test_vjp_function_returned_from_jit():
    want = np.cos(X) * X + np.sin(X)
    jitted = plax.jit(lambda x: plax.vjp(_f, x)[1])
    g = jitted(jnp.asarray(X))
    assert callable(g)
    np.testing.assert_allclose(g(jnp.ones(2))[0], want, rtol=1e-6)
    # one trace, one structure: the second call's function has the same treedef
    g2 = jitted(jnp.asarray(X) + 1)
    assert tree_util.tree_structure(g) == tree_util.tree_structure(g2)
    assert hash(tree_util.tree_structure(g)) == hash(tree_util.tree_structure(g2))


def test_vjp_function_passed_into_jit_and_vmap():
    _, f_vjp = plax.vjp(_f, jnp.asarray(X))
    out = plax.jit(lambda fv, ct: fv(ct))(f_vjp, jnp.ones(2))
    np.testing.assert_allclose(out[0], f_vjp(jnp.ones(2))[0], rtol=1e-6)
    xs = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    _, f_vjps = plax.vmap(lambda x: plax.vjp(_f, x))(jnp.asarray(xs))
    cts = plax.vmap(lambda fv, ct: fv(ct))(f_vjps, jnp.ones((3, 2)))[0]
    np.testing.assert_allclose(cts, np.cos(xs) * xs + np.sin(xs), rtol=1e-5)


def test_make_jaxpr_of_a_vjp_function():
    closed = plax.make_jaxpr(lambda x: plax.vjp(_f, x)[1])(X)
    _, f_vjp = plax.vjp(_f, jnp.asarray(X))
    assert len(closed.jaxpr.outvars) == len(tree_util.tree_leaves(f_vjp))


def test_linearize_returns_a_partial_of_its_residuals():
    y, f_jvp = plax.linearize(_f, jnp.asarray(X))
    assert isinstance(f_jvp, Partial)
    leaves = tree_util.tree_leaves(f_jvp)
    assert leaves and all(isinstance(r, Array) for r in leaves)
    want = np.cos(X) * X + np.sin(X)
    np.testing.assert_allclose(f_jvp(jnp.ones(2)), want, rtol=1e-6)
    g = plax.jit(lambda x: plax.linearize(_f, x)[1])(jnp.asarray(X))
    np.testing.assert_allclose(g(jnp.ones(2)), want, rtol=1e-6)
    xs = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    _, f_jvps = plax.vmap(lambda x: plax.linearize(_f, x))(jnp.asarray(xs))
    out = plax.vmap(lambda fj, t: fj(t))(f_jvps, jnp.ones((3, 2)))
    np.testing.assert_allclose(out, np.cos(xs) * xs + np.sin(xs), rtol=1e-5)


def test_vjp_and_linearize_functions_are_pytrees_in_jax_too():
    jax, jjnp = _jax_or_skip()
    _, f_vjp = jax.vjp(lambda x: jjnp.sin(x) * x, jjnp.asarray(X))
    assert all(isinstance(r, jax.Array) for r in jax.tree_util.tree_leaves(f_vjp))
    _, f_jvp = jax.linearize(lambda x: jjnp.sin(x) * x, X)
    assert isinstance(f_jvp, jax.tree_util.Partial)


def _add3(a, b, c=0):
    return a + b + c


@pytest.mark.parametrize("libname", [n for n, _, _ in _libs()])
def test_partial_behaves_like_jax(libname):
    _, lib, _ = next(x for x in _libs() if x[0] == libname)
    P, tu = lib.tree_util.Partial, lib.tree_util
    p = P(_add3, 1)
    assert tu.tree_leaves(p) == [1] and p(2) == 3 and p(2, c=3) == 6
    assert tu.tree_leaves(P(_add3, 1, c=5)) == [1, 5]
    # a Partial of a Partial keeps the inner one as its (static) function
    pp = P(p, 2)
    assert tu.tree_leaves(pp) == [2] and pp(3) == 6 and pp.args == (2,)
    fp = P(functools.partial(_add3, 1), 2)
    assert tu.tree_leaves(fp) == [2] and fp(3) == 6
    # treedefs compare (and hash) by the function
    assert tu.tree_structure(P(_add3, 1)) == tu.tree_structure(P(_add3, 7))
    assert hash(tu.tree_structure(P(_add3, 1))) == hash(tu.tree_structure(P(_add3, 7)))
    assert tu.tree_structure(P(_add3, 1)) != tu.tree_structure(P(operator.add, 1))
    m = tu.tree_map(lambda x: x * 10, P(_add3, 1, c=2))
    assert isinstance(m, P) and m(0) == 30 and m.keywords == {"c": 20}
    assert isinstance(p, functools.partial)
    assert float(lib.jit(lambda f, x: f(x))(P(_add3, 1.0), 2.0)) == 3.0


# ------------------------------------------------------------------ 2. custom rules, eagerly

def _custom_fns(lib):
    @lib.custom_jvp
    def cj(x):
        return x * 3

    cj.defjvp(lambda p, t: (cj(p[0]), t[0] * 3))

    @lib.custom_vjp
    def cv(x):
        return x * 3

    cv.defvjp(lambda x: (cv(x), None), lambda r, g: (g * 3,))
    return {"custom_jvp": cj, "custom_vjp": cv}


def _describe_value(x):
    """A value's kind as the tables below write it (weak types shown as ``~``)."""
    if isinstance(x, (tuple, list)):
        return "(" + ",".join(_describe_value(v) for v in x) + ")"
    if isinstance(x, dict):
        return "{" + ",".join(f"{k}:{_describe_value(v)}" for k, v in x.items()) + "}"
    if isinstance(x, (np.ndarray, np.generic)):
        return f"np.{x.dtype}"
    if isinstance(x, (bool, int, float, complex)):
        return type(x).__name__
    return f"{x.dtype}{'~' if x.weak_type else ''}"


# (argument maker, what the call returns): JAX runs the Python function on the argument as
# it is (NumPy values get the canonical dtype) and returns whatever it returns.
_EAGER_CASES = {
    "python_float": (lambda jnp_: 2.0, "float", 6.0),
    "python_int": (lambda jnp_: 2, "int", 6),
    "python_bool": (lambda jnp_: True, "int", 3),
    "numpy_float32": (lambda jnp_: np.float32(2.0), "np.float32", 6.0),
    "numpy_float64_array": (lambda jnp_: np.array(2.0), "np.float32", 6.0),
    "numpy_int64": (lambda jnp_: np.int64(2), "np.int32", 6),
    "array": (lambda jnp_: jnp_.asarray(2.0), "float32~", 6.0),
}


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
@pytest.mark.parametrize("case", list(_EAGER_CASES))
@pytest.mark.parametrize("libname", [n for n, _, _ in _libs()])
def test_custom_function_called_eagerly_returns_what_python_returns(libname, case, kind):
    _, lib, jnp_ = next(x for x in _libs() if x[0] == libname)
    make_arg, kind_out, value = _EAGER_CASES[case]
    out = _custom_fns(lib)[kind](make_arg(jnp_))
    assert _describe_value(out) == kind_out
    assert out == value


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
def test_custom_function_staged_or_differentiated_gives_arrays(kind):
    fn = _custom_fns(plax)[kind]
    assert _describe_value(plax.jit(fn)(2.0)) == "float32~"
    assert float(plax.grad(fn)(2.0)) == 3.0
    seen = []

    def probe(y):  # inside grad, on arguments that are not traced: just the function
        seen.append(fn(2.0))
        return y

    plax.grad(probe)(1.0)
    assert type(seen[0]) is float and seen[0] == 6.0


def test_custom_function_eager_pytrees_nondiff_and_bad_outputs():
    @plax.custom_jvp
    def h(x, y):
        return {"a": x, "b": [y * 2, 1]}

    h.defjvp(lambda p, t: (h(*p), h(*t)))
    assert h(1.0, 2) == {"a": 1.0, "b": [4, 1]}

    nd = plax.custom_jvp(lambda x, n: x * n, nondiff_argnums=(1,))
    nd.defjvp(lambda n, p, t: (nd(p[0], n), t[0] * n))
    assert nd(2.0, 3) == 6.0 and type(nd(2.0, 3)) is float
    assert float(plax.grad(nd)(2.0, 3)) == 3.0

    @plax.custom_jvp
    def s(x):
        return "hello"

    s.defjvp(lambda p, t: (s(*p), t[0]))
    with pytest.raises(TypeError, match="not a valid JAX type"):
        s(1.0)


# ------------------------------------------------------------------ 3. tracer conversions

_CONVERSIONS = {
    "float": float,
    "int": int,
    "bool": bool,
    "complex": complex,
    "index": operator.index,
    "np.asarray": np.asarray,
    "item": lambda x: x.item(),
    "tolist": lambda x: x.tolist(),
    "if": lambda x: 1 if x > 0 else 0,
    "np.float32": np.float32,
}

_TRANSFORMS = {
    "grad": lambda j, jnp_, f: j.grad(f)(3.0),
    "jvp": lambda j, jnp_, f: j.jvp(f, (3.0,), (1.0,)),
    "vjp": lambda j, jnp_, f: j.vjp(f, 3.0),
    "linearize": lambda j, jnp_, f: j.linearize(f, 3.0),
    "jacfwd": lambda j, jnp_, f: j.jacfwd(f)(3.0),
    "jacrev": lambda j, jnp_, f: j.jacrev(f)(3.0),
    "hessian": lambda j, jnp_, f: j.hessian(f)(3.0),
    "vmap": lambda j, jnp_, f: j.vmap(f)(jnp_.ones(2) * 3),
    "jit": lambda j, jnp_, f: j.jit(f)(3.0),
}

# JAX reads a tracer's value only for bool, int, index and item, and only when it is known
# (a JVP tracer of a concrete value); float, complex and NumPy conversions always raise.
_AD = ("grad", "jvp", "vjp", "linearize", "jacfwd", "jacrev", "hessian")
_CONVERSION_TABLE = {
    "float": {t: "ConcretizationTypeError" for t in _TRANSFORMS},
    "complex": {t: "ConcretizationTypeError" for t in _TRANSFORMS},
    "np.asarray": {t: "TracerArrayConversionError" for t in _TRANSFORMS},
    "np.float32": {t: "TracerArrayConversionError" for t in _TRANSFORMS},
    "tolist": {t: "ConcretizationTypeError" for t in _TRANSFORMS},
    "index": {t: "TypeError" for t in _TRANSFORMS},  # a float: not an index whatever its value
    "int": {**{t: "ok" for t in _AD}, "vmap": "ConcretizationTypeError",
            "jit": "ConcretizationTypeError"},
    "item": {**{t: "ok" for t in _AD}, "vmap": "ConcretizationTypeError",
             "jit": "ConcretizationTypeError"},
    "bool": {**{t: "ok" for t in _AD}, "vmap": "TracerBoolConversionError",
             "jit": "TracerBoolConversionError"},
    "if": {**{t: "ok" for t in _AD}, "vmap": "TracerBoolConversionError",
           "jit": "TracerBoolConversionError"},
}


def _conversion_outcome(lib, jnp_, conv, transform):
    def f(x):
        _CONVERSIONS[conv](x)
        return x * 1.0

    try:
        _TRANSFORMS[transform](lib, jnp_, f)
    except Exception as err:  # noqa: BLE001
        return type(err).__name__
    return "ok"


@pytest.mark.parametrize("transform", list(_TRANSFORMS))
@pytest.mark.parametrize("conv", list(_CONVERSIONS))
def test_tracer_conversions_follow_jax(conv, transform):
    assert _conversion_outcome(plax, jnp, conv, transform) == _CONVERSION_TABLE[conv][transform]


@pytest.mark.parametrize("transform", list(_TRANSFORMS))
@pytest.mark.parametrize("conv", list(_CONVERSIONS))
def test_tracer_conversion_table_is_jax(conv, transform):
    jax, jjnp = _jax_or_skip()
    assert _conversion_outcome(jax, jjnp, conv, transform) == _CONVERSION_TABLE[conv][transform]


def test_float_of_a_tracer_under_grad_raises_instead_of_a_wrong_gradient():
    # it used to read the value: d/dx (3.0 * x) = 3.0, silently
    with pytest.raises(errors.ConcretizationTypeError, match="`float` function"):
        plax.grad(lambda x: float(x) * x)(3.0)


def test_integer_index_under_grad_reads_the_known_value():
    # an integer is piecewise constant: JAX lets Python index with it under grad
    assert float(plax.grad(lambda x: x * [1.0, 2.0, 3.0, 4.0][x.astype(int)])(3.0)) == 4.0
    assert float(plax.grad(lambda x: x * len(range(x.astype(int))))(3.0)) == 3.0


def _message(fn):
    with pytest.raises(TypeError) as info:
        fn()
    return str(info.value)


def _scale(alpha, beta):
    return float(beta) * alpha


@pytest.mark.parametrize("name,call", [
    ("grad", lambda: plax.grad(_scale, argnums=1)(1.0, 2.0)),
    ("value_and_grad", lambda: plax.value_and_grad(_scale, argnums=1)(1.0, 2.0)),
    ("jvp", lambda: plax.jvp(_scale, (1.0, 2.0), (1.0, 1.0))),
    ("vjp", lambda: plax.vjp(_scale, 1.0, 2.0)),
    ("linearize", lambda: plax.linearize(_scale, 1.0, 2.0)),
    ("jacfwd", lambda: plax.jacfwd(_scale, argnums=1)(1.0, 2.0)),
    ("jacrev", lambda: plax.jacrev(_scale, argnums=1)(1.0, 2.0)),
    ("hessian", lambda: plax.hessian(_scale, argnums=1)(1.0, 2.0)),
    ("vmap", lambda: plax.vmap(_scale)(jnp.ones(2), jnp.ones(2))),
])
def test_conversion_error_names_the_function_and_the_argument(name, call):
    msg = _message(call)
    assert f"tracing the function _scale for {name}." in msg
    assert "argument beta." in msg


def test_conversion_error_names_pytree_paths_and_intermediates():
    msg = _message(lambda: plax.grad(lambda p: float(p["w"][1]) * p["w"][0])(
        {"w": (1.0, 2.0)}))
    assert "argument p['w'][1]." in msg
    # an intermediate value: reverse mode knows which inputs it was computed from
    msg = _message(lambda: plax.grad(lambda x, y: float(jnp.sin(y)) * x, argnums=(0, 1))(
        1.0, 2.0))
    assert "argument y." in msg
    # bool / index / NumPy conversions say it too
    msg = _message(lambda: plax.vmap(lambda v: v if v > 0 else -v)(jnp.ones(2)))
    assert "for vmap" in msg and "argument v." in msg
    msg = _message(lambda: plax.grad(lambda x: np.asarray(x) * x)(1.0))
    assert "for grad" in msg and "argument x." in msg


# ------------------------------------------------------------------ 4. weak types

def _vjp_call(j, f, *args, ct=1.0, **kw):
    out = j.vjp(f, *args, **kw)
    return (out[0], out[1](ct)) + tuple(out[2:])


def _lin_call(j, f, *args, t=1.0):
    y, f_jvp = j.linearize(f, *args)
    return y, f_jvp(t)


_sq = lambda x: x * x * 2.0  # noqa: E731
_mul = lambda x, y: x * y + 1.0  # noqa: E731
_aux = lambda x: (x * x, x + 1.0)  # noqa: E731

# Outputs of each transform on Python scalars, as JAX gives them: "float32~" is a weakly
# typed float32 array, "float" a Python float returned as the function returned it.
_WEAK_TYPE_TABLE = {
    "grad": (lambda j, n: j.grad(_sq)(3.0), "float32~"),
    "grad_argnums": (lambda j, n: j.grad(_mul, argnums=(0, 1))(3.0, 2.0), "(float32~,float32~)"),
    "grad_has_aux": (lambda j, n: j.grad(_aux, has_aux=True)(3.0), "(float32~,float32~)"),
    "grad_const": (lambda j, n: j.grad(lambda x: 2.0)(3.0), "float32~"),
    "grad_strong_output": (lambda j, n: j.grad(lambda x: x * n.float32(2))(3.0), "float32~"),
    "grad_strong_input": (lambda j, n: j.grad(_sq)(n.float32(3)), "float32"),
    "value_and_grad": (lambda j, n: j.value_and_grad(_sq)(3.0), "(float32~,float32~)"),
    "value_and_grad_has_aux": (lambda j, n: j.value_and_grad(_aux, has_aux=True)(3.0),
                               "((float32~,float32~),float32~)"),
    "value_and_grad_const": (lambda j, n: j.value_and_grad(lambda x: 2.0)(3.0),
                             "(float,float32~)"),
    "jvp": (lambda j, n: j.jvp(_sq, (3.0,), (1.0,)), "(float32~,float32~)"),
    "jvp_has_aux": (lambda j, n: j.jvp(_aux, (3.0,), (1.0,), has_aux=True),
                    "(float32~,float32~,float32~)"),
    "jvp_strong_tangent": (lambda j, n: j.jvp(_sq, (3.0,), (n.float32(1.0),)),
                           "(float32~,float32~)"),
    "jvp_const": (lambda j, n: j.jvp(lambda x: 2.0, (3.0,), (1.0,)), "(float,float32~)"),
    "vjp": (lambda j, n: _vjp_call(j, _sq, 3.0), "(float32~,(float32~))"),
    "vjp_has_aux": (lambda j, n: _vjp_call(j, _aux, 3.0, has_aux=True),
                    "(float32~,(float32~),float32~)"),
    "vjp_const": (lambda j, n: _vjp_call(j, lambda x: 2.0, 3.0), "(float,(float32~))"),
    "vjp_strong_input": (lambda j, n: _vjp_call(j, lambda x: x * 2.0, n.float32(3)),
                         "(float32,(float32))"),
    "linearize": (lambda j, n: _lin_call(j, _sq, 3.0), "(float32~,float32~)"),
    "linearize_const": (lambda j, n: _lin_call(j, lambda x: 2.0, 3.0), "(float,float32~)"),
    "linearize_strong_tangent": (lambda j, n: _lin_call(j, _sq, 3.0, t=n.float32(1.0))[1],
                                 "float32"),
    "jacfwd": (lambda j, n: j.jacfwd(_sq)(3.0), "float32~"),
    "jacfwd_argnums": (lambda j, n: j.jacfwd(_mul, argnums=(0, 1))(3.0, 2.0),
                       "(float32~,float32~)"),
    "jacfwd_has_aux": (lambda j, n: j.jacfwd(_aux, has_aux=True)(3.0), "(float32~,float32~)"),
    "jacfwd_const": (lambda j, n: j.jacfwd(lambda x: 2.0)(3.0), "float32~"),
    "jacfwd_stack": (lambda j, n: j.jacfwd(lambda x: n.stack([x, x]))(3.0), "float32~"),
    "jacfwd_strong_output": (lambda j, n: j.jacfwd(lambda x: x * n.float32(2))(3.0), "float32"),
    "jacfwd_mixed_inputs": (lambda j, n: j.jacfwd(lambda x, y: x * y, argnums=(0, 1))(
        3.0, n.float32(2.0)), "(float32,float32)"),
    "jacrev": (lambda j, n: j.jacrev(_sq)(3.0), "float32~"),
    "jacrev_argnums": (lambda j, n: j.jacrev(_mul, argnums=(0, 1))(3.0, 2.0),
                       "(float32~,float32~)"),
    "jacrev_has_aux": (lambda j, n: j.jacrev(_aux, has_aux=True)(3.0), "(float32~,float32~)"),
    "jacrev_strong_output": (lambda j, n: j.jacrev(lambda x: x * n.float32(2))(3.0),
                             "float32~"),
    "jacrev_mixed_inputs": (lambda j, n: j.jacrev(lambda x, y: x * y, argnums=(0, 1))(
        3.0, n.float32(2.0)), "(float32~,float32)"),
    "hessian": (lambda j, n: j.hessian(_sq)(3.0), "float32~"),
    "hessian_argnums": (lambda j, n: j.hessian(_mul, argnums=(0, 1))(3.0, 2.0),
                        "((float32~,float32~),(float32~,float32~))"),
    "hessian_has_aux": (lambda j, n: j.hessian(_aux, has_aux=True)(3.0), "(float32~,float32~)"),
    "hessian_const": (lambda j, n: j.hessian(lambda x: 2.0 * x)(3.0), "float32~"),
    "vmap": (lambda j, n: j.vmap(_sq)(n.ones(2)), "float32"),
    "vmap_unmapped_scalar": (lambda j, n: j.vmap(_mul, in_axes=(0, None))(n.ones(2), 2.0),
                             "float32"),
    "vmap_out_axes_none": (lambda j, n: j.vmap(lambda x, y: (x * y, y * 2.0), in_axes=(0, None),
                                               out_axes=(0, None))(n.ones(2), 2.0),
                           "(float32,float)"),
    "vmap_scalar_output": (lambda j, n: j.vmap(lambda x: 2.0)(n.ones(2)), "float32~"),
    "vmap_axis_size": (lambda j, n: j.vmap(lambda: 1.0, axis_size=2)(), "float32~"),
    "jit": (lambda j, n: j.jit(_sq)(3.0), "float32~"),
    "jit_has_aux_like": (lambda j, n: j.jit(_aux)(3.0), "(float32~,float32~)"),
    "jit_const": (lambda j, n: j.jit(lambda x: 2.0)(3.0), "float32~"),
    "grad_of_jit": (lambda j, n: j.grad(j.jit(_sq))(3.0), "float32~"),
    "jit_of_grad": (lambda j, n: j.jit(j.grad(_sq))(3.0), "float32~"),
    "jit_of_jacfwd": (lambda j, n: j.jit(j.jacfwd(_sq))(3.0), "float32~"),
    "vmap_of_grad": (lambda j, n: j.vmap(j.grad(_sq))(n.ones(2)), "float32"),
}


@pytest.mark.parametrize("case", list(_WEAK_TYPE_TABLE))
def test_weak_types_of_transform_outputs(case):
    run, want = _WEAK_TYPE_TABLE[case]
    assert _describe_value(run(plax, jnp)) == want


@pytest.mark.parametrize("case", list(_WEAK_TYPE_TABLE))
def test_weak_type_table_is_jax(case):
    jax, jjnp = _jax_or_skip()
    run, want = _WEAK_TYPE_TABLE[case]
    assert _describe_value(run(jax, jjnp)) == want


# ------------------------------------------------------------------ 5. argument checks

def _two(x, y=1.0):
    return x * y


def _custom_jvp_fn():
    return plax.custom_jvp(lambda x: x)


def _custom_vjp_fn():
    return plax.custom_vjp(lambda x: x)


# (what is applied, the exception, a fragment of the message); everything here raises when
# the transform is applied, before any call.
_BAD_APPLICATIONS = {
    **{f"{t}_not_callable": (lambda t=t: getattr(plax, t)("f"), TypeError,
                             f"{t} requires a callable")
       for t in ("grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "vmap", "jit")},
    "jvp_not_callable": (lambda: plax.jvp("f", (1.0,), (1.0,)), TypeError,
                         "jvp requires a callable"),
    "vjp_not_callable": (lambda: plax.vjp(None, 1.0), TypeError, "vjp requires a callable"),
    "linearize_not_callable": (lambda: plax.linearize("f", 1.0), TypeError,
                               "linearize requires a callable"),
    "jit_none": (lambda: plax.jit(None), TypeError, "jit requires a callable"),
    **{f"{t}_argnums_{name}": (lambda t=t, bad=bad: getattr(plax, t)(_two, argnums=bad),
                               TypeError, "argnums must be an int")
       for t in ("grad", "value_and_grad", "jacfwd", "hessian")
       for name, bad in (("str", "a"), ("float", 1.0), ("tuple_with_str", (0, "a")))},
    "grad_argnums_empty": (lambda: plax.grad(_two, argnums=()), ValueError,
                           "at least one argnum"),
    "jit_static_argnums_str": (lambda: plax.jit(_two, static_argnums="a"), TypeError,
                               "static_argnums must be an int"),
    "jit_static_argnums_float": (lambda: plax.jit(_two, static_argnums=1.0), TypeError,
                                 "static_argnums must be an int"),
    "jit_static_argnums_tuple_with_str": (lambda: plax.jit(_two, static_argnums=(0, "a")),
                                          TypeError, "static_argnums must be an int"),
    "jit_static_argnums_out_of_range": (lambda: plax.jit(_two, static_argnums=5), ValueError,
                                        "only accepts 2 positional arguments"),
    "jit_static_argnames_int": (lambda: plax.jit(_two, static_argnames=1), TypeError,
                                "static_argnames must be a string"),
    "jit_static_argnames_tuple_with_int": (lambda: plax.jit(_two, static_argnames=(1,)),
                                           TypeError, "static_argnames must be a string"),
    "jit_static_argnames_unknown": (lambda: plax.jit(_two, static_argnames="zz"), ValueError,
                                    "invalid argnames"),
    "jit_donate_argnums_str": (lambda: plax.jit(_two, donate_argnums="a"), TypeError,
                               "donate_argnums must be an int"),
    "jit_decorator_static_argnums_str": (lambda: plax.jit(static_argnums="a"), TypeError,
                                         "static_argnums must be an int"),
    "vmap_in_axes_str": (lambda: plax.vmap(_two, in_axes="a"), TypeError,
                         "in_axes must be an int, None, or a tuple"),
    "vmap_in_axes_float": (lambda: plax.vmap(_two, in_axes=1.0), TypeError,
                           "in_axes must be an int, None, or a tuple"),
    "vmap_in_axes_dict": (lambda: plax.vmap(_two, in_axes={"a": 0}), TypeError,
                          "in_axes must be an int, None, or a tuple"),
    "vmap_in_axes_bool": (lambda: plax.vmap(_two, in_axes=True), TypeError,
                          "in_axes must be an int, None, or a tuple"),
    "vmap_in_axes_numpy_int": (lambda: plax.vmap(_two, in_axes=np.int64(0)), TypeError,
                               "in_axes must be an int, None, or a tuple"),
    "vmap_in_axes_nested_str": (lambda: plax.vmap(_two, in_axes=(0, "a")), TypeError,
                                "in_axes must be an int, None, or \\(nested\\) container"),
    "vmap_in_axes_nested_numpy_int": (lambda: plax.vmap(_two, in_axes=(np.int64(0),)),
                                      TypeError, "\\(nested\\) container"),
    "vmap_out_axes_str": (lambda: plax.vmap(_two, out_axes="a"), TypeError,
                          "out_axes must be an int, None, or \\(nested\\) container"),
    "vmap_out_axes_float": (lambda: plax.vmap(_two, out_axes=1.0), TypeError,
                            "out_axes must be an int"),
    "vmap_out_axes_bool": (lambda: plax.vmap(_two, out_axes=True), TypeError,
                           "out_axes must be an int"),
}

# Checks JAX makes only when the transformed function is called (plax makes them when it is
# applied, with the exception class JAX raises later).
_PLAX_ONLY = {
    "custom_jvp_not_callable": (lambda: plax.custom_jvp("f"), TypeError,
                                "custom_jvp requires a callable"),
    "custom_jvp_nondiff_argnums_str": (lambda: plax.custom_jvp(_two, nondiff_argnums="a"),
                                       TypeError, "nondiff_argnums must be a sequence of ints"),
    "defjvp_not_callable": (lambda: _custom_jvp_fn().defjvp("f_jvp"), TypeError,
                            "JVP rule must be a function"),
    "defjvps_not_callable": (lambda: _custom_jvp_fn().defjvps("f_jvp"), TypeError,
                             "JVP rule must be a function"),
    "custom_vjp_not_callable": (lambda: plax.custom_vjp(3), TypeError,
                                "custom_vjp requires a callable"),
    "defvjp_fwd_not_callable": (lambda: _custom_vjp_fn().defvjp("fwd", lambda r, g: (g,)),
                                TypeError, "fwd rule must be a function"),
    "defvjp_bwd_not_callable": (lambda: _custom_vjp_fn().defvjp(lambda x: (x, None), "bwd"),
                                TypeError, "bwd rule must be a function"),
    **{f"jacrev_argnums_{name}": (lambda bad=bad: plax.jacrev(_two, argnums=bad), TypeError,
                                  "argnums must be an int")
       for name, bad in (("str", "a"), ("float", 1.0), ("tuple_with_str", (0, "a")))},
    "hessian_argnums_empty": (lambda: plax.hessian(_two, argnums=()), ValueError,
                              "at least one argnum"),
}


@pytest.mark.parametrize("case", list(_BAD_APPLICATIONS) + list(_PLAX_ONLY))
def test_transform_arguments_checked_when_applied(case):
    apply, exc, msg = {**_BAD_APPLICATIONS, **_PLAX_ONLY}[case]
    with pytest.raises(exc, match=msg):
        apply()


_JAX_APPLY = {  # the same applications, written for JAX
    "jvp_not_callable": lambda j: j.jvp("f", (1.0,), (1.0,)),
    "vjp_not_callable": lambda j: j.vjp(None, 1.0),
    "linearize_not_callable": lambda j: j.linearize("f", 1.0),
    "jit_none": lambda j: j.jit(None),
    "grad_argnums_empty": None,  # JAX raises its ValueError only when called
    "jit_decorator_static_argnums_str": lambda j: j.jit(static_argnums="a")(_two),
}


@pytest.mark.parametrize("case", list(_BAD_APPLICATIONS))
def test_bad_applications_raise_the_same_class_in_jax(case):
    jax, _ = _jax_or_skip()
    if case in _JAX_APPLY and _JAX_APPLY[case] is None:
        pytest.skip("JAX checks this when the function is called")
    _, exc, _ = _BAD_APPLICATIONS[case]
    if case in _JAX_APPLY:
        apply = functools.partial(_JAX_APPLY[case], jax)
    else:
        # rewrite the plax application for JAX: same transform, same arguments
        apply = _BAD_APPLICATIONS[case][0]
        apply = _with_module(apply, jax)
    with pytest.raises(exc):
        apply()


def _with_module(fn, module):
    """``fn`` with the global name ``plax`` bound to ``module``."""
    import types
    glb = dict(fn.__globals__, plax=module)
    return types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__, fn.__closure__)


@pytest.mark.parametrize("case,exc,msg", [
    ("grad_out_of_range", TypeError, "requires at least 6 positional arguments"),
    ("jacfwd_out_of_range", ValueError, "argnums=5 refers to positional argument 5"),
    ("jacrev_out_of_range", ValueError, "argnums=5 refers to positional argument 5"),
    ("hessian_out_of_range", ValueError, "argnums=5 refers to positional argument 5"),
    ("vmap_in_axes_too_long", ValueError, "len\\(in_axes\\)=2, len\\(args\\)=1"),
    ("vmap_in_axes_too_short", ValueError, "len\\(in_axes\\)=1, len\\(args\\)=2"),
    ("defvjp_none", AttributeError, "No VJP defined"),
    ("defvjp_bwd_none", AttributeError, "No VJP defined"),
])
@pytest.mark.parametrize("libname", [n for n, _, _ in _libs()])
def test_call_time_argument_errors(libname, case, exc, msg):
    _, lib, jnp_ = next(x for x in _libs() if x[0] == libname)
    calls = {
        "grad_out_of_range": lambda: lib.grad(_two, argnums=5)(1.0),
        "jacfwd_out_of_range": lambda: lib.jacfwd(_two, argnums=5)(1.0),
        "jacrev_out_of_range": lambda: lib.jacrev(_two, argnums=5)(1.0),
        "hessian_out_of_range": lambda: lib.hessian(_two, argnums=5)(1.0),
        "vmap_in_axes_too_long": lambda: lib.vmap(_two, in_axes=[0, None])(jnp_.ones(2)),
        "vmap_in_axes_too_short": lambda: lib.vmap(_two, in_axes=(0,))(jnp_.ones(2),
                                                                         jnp_.ones(2)),
        "defvjp_none": lambda: _vjp_defined(lib, None, None)(1.0),
        "defvjp_bwd_none": lambda: _vjp_defined(lib, lambda x: (x, None), None)(1.0),
    }
    with pytest.raises(exc, match=msg if libname == "plax" else None):
        calls[case]()


def _vjp_defined(lib, fwd, bwd):
    f = lib.custom_vjp(lambda x: x)
    f.defvjp(fwd, bwd)
    return f


def test_accepted_argument_forms():
    # what JAX accepts must keep working: lists, bools and NumPy ints as argnums, list in_axes
    assert float(plax.grad(_two, argnums=[1])(2.0, 3.0)[0]) == 2.0
    assert float(plax.grad(_two, argnums=True)(2.0, 3.0)) == 2.0
    assert float(plax.grad(_two, argnums=np.int64(0))(2.0, 3.0)) == 3.0
    assert plax.vmap(_two, in_axes=[0, None])(jnp.ones(2), 2.0).shape == (2,)
    assert plax.vmap(_two, out_axes=[0]) is not None
    assert plax.jit(_two, static_argnums=np.int64(1))(1.0, 2.0) == 2.0
    assert plax.jit(_two, static_argnames=["y"])(1.0, y=2.0) == 2.0
    assert plax.jit(static_argnums=1)(_two)(1.0, 2.0) == 2.0

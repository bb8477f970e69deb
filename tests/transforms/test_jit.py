"""jit: caching per signature, static and donated arguments, closures, nesting, lower/compile,
device and backend selection, the concretisation and leaked-tracer errors, disable_jit,
eval_shape, block_until_ready. Jitted results are compared with the eager function."""
from __future__ import annotations

import re

import functools

import numpy as np
import pytest

import plax
from plax import errors
from plax import numpy as jnp

X = np.array([0.5, -1.0, 2.0], np.float32)


def _counting(f):
    """``f`` plus a list that grows by one each time ``f`` runs (i.e. is traced)."""
    calls = []

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        calls.append(1)
        return f(*args, **kwargs)

    return wrapped, calls


def test_jit_matches_eager_on_each_backend(backend_name):
    f = lambda x, y: jnp.sum(jnp.sin(x) * y, axis=0) + jnp.max(x)  # noqa: E731
    x = jnp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    jf = plax.jit(f, backend=backend_name)
    np.testing.assert_allclose(jf(x, x), f(x, x), rtol=1e-6)
    assert jf(x, x).dtype == f(x, x).dtype


def test_traces_once_per_signature_and_cache_size():
    f, calls = _counting(lambda x: x * 2)
    jf = plax.jit(f)
    x3 = jnp.asarray(X)
    for _ in range(3):
        jf(x3)
    assert len(calls) == 1 and jf._cache_size() == 1
    jf(jnp.arange(4.0))                       # new shape
    jf(jnp.arange(3))                         # new dtype
    jf(2.0)                                   # weakly typed scalar
    jf(jnp.float32(2.0))                      # strongly typed scalar: a new signature
    jf(3.0)                                   # same as 2.0
    assert len(calls) == 5 and jf._cache_size() == 5
    out = jf(2.0)
    assert out.weak_type and float(out) == 4.0
    assert not jf(jnp.float32(2.0)).weak_type
    jf.clear_cache()
    jf(x3)
    assert jf._cache_size() == 1 and len(calls) == 6


def test_retrace_on_new_tree_structure():
    f, calls = _counting(lambda p: p["a"] + p.get("b", 0.0))
    jf = plax.jit(f)
    jf({"a": X})
    jf({"a": X, "b": X})
    jf({"a": X})
    assert len(calls) == 2


def test_x64_mode_is_part_of_the_signature():
    jf = plax.jit(lambda x: x + jnp.ones(3))
    x = jnp.asarray(X)
    assert jf(x).dtype == np.float32
    with plax.config.override("jax_enable_x64", True):
        assert jf(x).dtype == np.float64     # the constant is f64 now: retraced
    assert jf(x).dtype == np.float32


def test_static_argnums_and_argnames():
    def f(x, n, *, mode="add"):
        return x + n if mode == "add" else x * n

    g, calls = _counting(f)
    jf = plax.jit(g, static_argnums=1, static_argnames="mode")
    np.testing.assert_allclose(jf(X, 2), X + 2)
    np.testing.assert_allclose(jf(X, 3), X + 3)
    np.testing.assert_allclose(jf(X, 3, mode="mul"), X * 3)
    assert len(calls) == 3
    np.testing.assert_allclose(jf(X, n=3), X + 3)   # by name: a new signature, as in JAX
    np.testing.assert_allclose(jf(X, n=3), X + 3)
    assert len(calls) == 4
    jn = plax.jit(lambda x, n: x * n, static_argnames="n")
    np.testing.assert_allclose(jn(X, 4), X * 4)
    np.testing.assert_allclose(jn(X, n=4), X * 4)
    jneg = plax.jit(lambda x, n: jnp.zeros(n) + x.sum(), static_argnums=-1)
    assert jneg(X, 5).shape == (5,)


def test_static_argument_errors():
    f = lambda x, n: x * n  # noqa: E731
    with pytest.raises(ValueError, match="(?s)Non-hashable static arguments.*list.*tuple"):
        plax.jit(f, static_argnums=1)(X, [2])
    with pytest.raises(ValueError, match="static_argnums=.3,.*only accepts 2 positional"):
        plax.jit(f, static_argnums=3)
    with pytest.raises(ValueError, match=r"invalid argnames \['q'\]"):
        plax.jit(f, static_argnames="q")


def test_static_values_compare_by_type_and_value():
    g, calls = _counting(lambda x, n: x * n)
    jf = plax.jit(g, static_argnums=1)
    assert jf(X, 2).dtype == np.float32
    jf(X, 2.0)                                 # 2 == 2.0 but a different type: retrace
    jf(X, True)
    assert len(calls) == 3


def test_donate_argnums_and_argnames_together():
    jf = plax.jit(lambda x, y: x + y, donate_argnums=(0,), donate_argnames="y")
    x, y = jnp.asarray(X), jnp.asarray(X)
    with pytest.warns(UserWarning, match="Some donated buffers were not usable"):
        np.testing.assert_allclose(jf(x, y), 2 * X)
    # one output: x (first) is taken as JAX's aliasing takes it, y stays valid
    assert x.is_deleted() and not y.is_deleted()
    np.testing.assert_allclose(y, X)


def test_closures_over_arrays_and_python_values():
    w = jnp.asarray(X)
    scale = 3.0
    jf = plax.jit(lambda x: x * w + scale)
    np.testing.assert_allclose(jf(X), X * X + 3.0)
    jaxpr = plax.make_jaxpr(lambda x: x * w + scale)(X)
    assert len(jaxpr.jaxpr.constvars) == 1 and jaxpr.consts[0] is w


def test_jit_inside_jit_is_one_call_equation():
    inner = plax.jit(lambda y: jnp.sin(y) * 2)
    outer = plax.jit(lambda x: inner(x) + inner(x * 3))
    (eqn,) = plax.make_jaxpr(outer)(X).jaxpr.eqns
    assert eqn.primitive.name == "jit"
    names = [e.primitive.name for e in eqn.params["jaxpr"].eqns]
    assert names == ["jit", "mul", "jit", "add"], names  # the inner calls stay calls
    np.testing.assert_allclose(outer(X), np.sin(X) * 2 + np.sin(X * 3) * 2, rtol=1e-6)


def test_jit_of_grad_and_grad_of_jit_and_methods():
    f = plax.jit(lambda x: jnp.sum(x ** 3))
    np.testing.assert_allclose(plax.grad(f)(X), 3 * X ** 2, rtol=1e-6)
    np.testing.assert_allclose(plax.jit(plax.grad(f))(X), 3 * X ** 2, rtol=1e-6)

    class Model:  # hashable by identity, so it can be a static argument
        def __init__(self, w):
            self.w = w

        @functools.partial(plax.jit, static_argnums=0)
        def apply(self, x):
            return x * self.w

    np.testing.assert_allclose(Model(2.0).apply(X), 2 * X)
    np.testing.assert_allclose(Model(3.0).apply(X), 3 * X)


def test_kwargs_pytrees_and_none_outputs():
    jf = plax.jit(lambda x, y=None: {"s": x + y, "n": None, "t": (x * 2, 1.5)})
    out = jf(X, y=X)
    np.testing.assert_allclose(out["s"], 2 * X)
    assert out["n"] is None and float(out["t"][1]) == 1.5 and out["t"][1].weak_type


def test_committed_arguments_and_device_selection(backend_name):
    dev = plax.devices()[0]
    x = plax.device_put(X, dev)
    assert x.committed
    jf = plax.jit(lambda a: a * 2)
    for _ in range(2):                        # general path, then the cached path
        out = jf(x)
        assert out.committed and out.device == dev
        np.testing.assert_allclose(out, 2 * X)
    out = jf(jnp.asarray(X))
    assert not out.committed
    jd = plax.jit(lambda a: a + 1, device=dev)
    assert jd(X).device == dev and jd(X).committed
    jb = plax.jit(lambda a: a + 1, backend=backend_name)
    np.testing.assert_allclose(jb(X), X + 1)
    assert jb(X).device.platform == plax.plugins.registry().get_backend(backend_name).platform
    np.testing.assert_allclose(plax.jit(lambda a: a + 1, backend="cpu")(X), X + 1)


def test_unknown_backend_raises():
    with pytest.raises(RuntimeError, match="Unknown backend 'bogus'"):
        plax.jit(lambda a: a, backend="bogus")(X)


# ------------------------------------------------------------------ lower / compile

def test_lower_as_text_and_compile():
    jf = plax.jit(lambda x: jnp.sin(x) * 2)
    lowered = jf.lower(X)
    text = lowered.as_text()
    assert text == "{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = mul b 2.0:f32[] in (c,) }"
    compiled = lowered.compile()
    np.testing.assert_allclose(compiled(X), np.sin(X) * 2, rtol=1e-6)
    with pytest.raises(TypeError, match=r"Argument 'x' compiled with float32\[3\] and called "
                                        r"with float32\[4\]"):
        compiled(np.ones(4, np.float32))
    spec = plax.ShapeDtypeStruct((3,), jnp.float32)
    np.testing.assert_allclose(jf.lower(spec).compile()(X), np.sin(X) * 2, rtol=1e-6)
    assert jf.eval_shape(spec) == plax.ShapeDtypeStruct((3,), jnp.float32)


# ------------------------------------------------------------------ errors under tracing

_ADVICE = ("static_argnums", "jnp.where")  # and structured control flow, once lax has it


@pytest.mark.parametrize("fn,exc", [
    (lambda x: x if x.sum() > 0 else -x, errors.TracerBoolConversionError),
    (lambda x: int(x[0]), errors.ConcretizationTypeError),
    (lambda x: float(x[0]), errors.ConcretizationTypeError),
    (lambda x: [1.0, 2.0, 3.0][x.astype(jnp.int32)[0]], errors.TracerIntegerConversionError),
    (lambda x: jnp.zeros(x.astype(jnp.int32)[0]), TypeError),
])
def test_python_control_flow_on_traced_values_says_what_to_do(fn, exc):
    with pytest.raises(exc) as info:
        plax.jit(fn)(X)
    for advice in _ADVICE:
        assert advice in str(info.value), str(info.value)
    for name in re.findall(r"lax\.(\w+)", str(info.value)):
        assert hasattr(plax.lax, name), f"the advice names lax.{name}, which plax lacks"


def test_bool_conversion_error_is_a_concretization_error():
    assert issubclass(errors.TracerBoolConversionError, errors.ConcretizationTypeError)
    assert issubclass(errors.ConcretizationTypeError, TypeError)


def test_numpy_conversion_of_tracer_raises():
    with pytest.raises(errors.TracerArrayConversionError, match="plax.numpy functions"):
        plax.jit(lambda x: np.asarray(x))(X)


def test_grad_keeps_python_control_flow_on_concrete_values():
    f = lambda x: x * 2 if x > 0 else -x  # noqa: E731
    assert float(plax.grad(f)(2.0)) == 2.0 and float(plax.grad(f)(-2.0)) == -1.0


@pytest.mark.parametrize("transform", [plax.jit, plax.grad, plax.vmap])
def test_leaked_tracer_raises_unexpected_tracer_error(transform):
    leaked = []

    def leak(x):
        leaked.append(x)
        return jnp.sum(x)

    transform(leak)(jnp.asarray(X))
    with pytest.raises(errors.UnexpectedTracerError, match="stored it in a global"):
        jnp.sin(leaked[0])
    with pytest.raises(errors.UnexpectedTracerError):
        plax.jit(lambda y: y + leaked[0])(X)


@pytest.mark.parametrize("out", ["s", object(), [1, "a"]])
def test_jit_returning_a_non_array_leaf_raises(out):
    with pytest.raises(TypeError, match="is not a valid JAX type"):
        plax.jit(lambda x: out)(X)


def test_non_array_argument_and_non_callable():
    with pytest.raises(TypeError, match="static_argnums"):
        plax.jit(lambda x, s: x)(X, "s")
    with pytest.raises(TypeError, match="jit requires a callable"):
        plax.jit(3)


# ------------------------------------------------------------------ helpers around jit

def test_disable_jit_runs_python_eagerly():
    seen = []

    @plax.jit
    def f(x):
        seen.append(type(x).__name__)
        return x * 2 if float(x[0]) > 0 else x  # needs a concrete value

    x = jnp.asarray(X)
    with plax.disable_jit():
        np.testing.assert_allclose(f(x), X * 2)
    assert seen == ["Array"]  # the function ran on the array itself, not on a tracer
    with pytest.raises(errors.ConcretizationTypeError):
        f(x)


def test_eval_shape_and_shape_dtype_struct():
    a = plax.ShapeDtypeStruct((2, 3), jnp.float32)
    b = plax.ShapeDtypeStruct((3,), jnp.float32)
    assert plax.eval_shape(jnp.dot, a, b) == plax.ShapeDtypeStruct((2,), jnp.float32)
    out = plax.eval_shape(lambda p: {"s": p["a"].sum(), "i": p["a"].astype(jnp.int32)},
                          {"a": X})
    assert out["s"].shape == () and out["s"].dtype == np.float32
    assert out["i"] == plax.ShapeDtypeStruct((3,), jnp.int32)
    assert plax.eval_shape(lambda x: x * 2, 1.0).weak_type
    calls = []
    plax.eval_shape(lambda x: calls.append(1) or x, a)
    assert calls == [1]
    assert repr(b) == "ShapeDtypeStruct(shape=(3,), dtype=float32)"
    assert b.ndim == 1 and a.size == 6


def test_block_until_ready_on_pytrees():
    tree = {"a": jnp.asarray(X), "b": (jnp.ones(2), 1.0, None)}
    assert plax.block_until_ready(tree) is tree
    assert tree["a"].block_until_ready() is tree["a"]

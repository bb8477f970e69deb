"""Host callbacks: plax.debug.print / plax.debug.callback, plax.pure_callback and
plax.experimental.io_callback, eagerly and under jit, vmap, grad and jvp (cross-checked
against JAX when it is installed)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import numpy as jnp
from plax.core import passes
from plax.experimental import io_callback
from plax.test_util import check_grads

S = plax.ShapeDtypeStruct

try:
    import jax
    import jax.numpy as jjnp
except ImportError:  # CI has no JAX
    jax = None

needs_jax = pytest.mark.skipif(jax is None, reason="JAX not installed")


def printed(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


# ------------------------------------------------------------------ debug.print

def test_debug_print_eager(capsys):
    plax.debug.print("x={x} y={}", jnp.arange(3.0), x=2.0)
    assert printed(capsys) == ["x=2.0 y=[0. 1. 2.]"]


def test_debug_print_jit_prints_at_run_time_once_per_call(capsys):
    traces = []

    def f(x):
        traces.append(1)
        plax.debug.print("x={}", x)
        return x + 1

    jf = plax.jit(f)
    plax.make_jaxpr(f)(1.0)
    assert printed(capsys) == []          # tracing prints nothing
    jf(1.0)
    jf(2.0)                               # cached: no retrace, but prints again
    assert printed(capsys) == ["x=1.0", "x=2.0"]
    assert len(traces) == 1


def test_debug_print_survives_dce():
    # its result is unused (it has none) and the function's output does not depend on it
    def f(x):
        plax.debug.print("{}", x * 2)
        return x

    closed = plax.make_jaxpr(f)(1.0)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["mul", "debug_callback"]
    jaxpr, _ = passes.prepare_for_backend(closed)
    assert [e.primitive.name for e in jaxpr.eqns] == ["mul", "debug_callback"]


def test_debug_print_in_nested_jit_with_no_outputs_used(capsys):
    inner = plax.jit(lambda x: plax.debug.print("inner {}", x))
    outer = plax.jit(lambda x: (inner(x), x + 1)[1])
    assert float(outer(3.0)) == 4.0
    assert printed(capsys) == ["inner 3.0"]


def test_function_returning_nothing(capsys):
    f = plax.jit(lambda x: plax.debug.print("{}", x))
    assert f(1.0) is None
    assert printed(capsys) == ["1.0"]


def test_debug_print_vmap_once_per_member_in_order(capsys):
    f = plax.vmap(lambda x, y: plax.debug.print("{} {}", x, y), in_axes=(0, None))
    f(jnp.arange(3.0), 7)
    assert printed(capsys) == ["0.0 7", "1.0 7", "2.0 7"]
    plax.jit(f)(jnp.arange(3.0), 7)
    assert printed(capsys) == ["0.0 7", "1.0 7", "2.0 7"]


def test_debug_print_vmap_axis_1_and_nested(capsys):
    x = jnp.arange(6.0).reshape(2, 3)
    plax.vmap(lambda r: plax.debug.print("{}", r), in_axes=1)(x)
    assert printed(capsys) == ["[0. 3.]", "[1. 4.]", "[2. 5.]"]
    # nested: the inner vmap's members, each split by the outer one (JAX's order too)
    plax.vmap(plax.vmap(lambda v: plax.debug.print("{}", v)))(x)
    assert printed(capsys) == ["0.0", "3.0", "1.0", "4.0", "2.0", "5.0"]


def test_debug_print_under_grad_and_jvp_sees_primals(capsys):
    def f(x):
        plax.debug.print("x={}", x)
        return x * x

    assert float(plax.grad(f)(3.0)) == 6.0
    assert printed(capsys) == ["x=3.0"]
    assert float(plax.grad(plax.jit(f))(3.0)) == 6.0
    assert printed(capsys) == ["x=3.0"]
    _, t = plax.jvp(f, (2.0,), (1.0,))
    assert float(t) == 4.0
    assert printed(capsys) == ["x=2.0"]


def test_debug_print_format_spec_and_pytrees(capsys):
    plax.debug.print("{:.2f} {s} {t}", jnp.float32(1.23456), s="str", t={"a": jnp.ones(2)})
    assert printed(capsys) == ["1.23 str {'a': Array([1., 1.], dtype=float32)}"]


def test_debug_print_bad_fmt():
    with pytest.raises(TypeError, match="fmt"):
        plax.debug.print(3)


FORMATS = [
    ("{}", lambda np_: (np_.arange(3.0),), {}),
    ("{x} and {y}", lambda np_: (), {"x": 1.5, "y": [1, 2]}),
    ("{:.3f}", lambda np_: (np_.float32(2.0) / 3,), {}),
    ("{}", lambda np_: (np_.ones((2, 2), np_.int32),), {}),
    ("{}", lambda np_: ({"a": np_.arange(2.0)},), {}),
]


@needs_jax
@pytest.mark.parametrize("k", range(len(FORMATS)))
def test_debug_print_matches_jax(k, capsys):
    fmt, args, kwargs = FORMATS[k]
    jax.jit(lambda *a: jax.debug.print(fmt, *a, **kwargs))(*args(jjnp))
    jax.effects_barrier()
    want = printed(capsys)
    plax.jit(lambda *a: plax.debug.print(fmt, *a, **kwargs))(*args(jnp))
    assert printed(capsys) == want


def test_debug_callback_gets_arrays_and_static_leaves():
    seen = []
    plax.jit(lambda x: plax.debug.callback(lambda a, tag, b=None: seen.append((a, tag, b)),
                                           x, "tag", b=x + 1))(jnp.arange(2.0))
    (a, tag, b), = seen
    assert isinstance(a, plax.Array) and tag == "tag"
    np.testing.assert_array_equal(np.asarray(b), [1.0, 2.0])


def test_debug_callback_not_callable():
    with pytest.raises(TypeError, match="callable"):
        plax.debug.callback(3, 1.0)


# ------------------------------------------------------------------ pure_callback

def test_pure_callback_eager_and_jit():
    x = jnp.arange(4.0)
    want = np.sin(np.arange(4.0)).astype(np.float32)
    for f in (lambda x: plax.pure_callback(np.sin, S((4,), jnp.float32), x),):
        np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-6)
        out = plax.jit(f)(x)
        assert out.dtype == np.float32 and out.shape == (4,)
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)


def test_pure_callback_pytrees_and_kwargs():
    def cb(a, b, *, scale):
        return {"s": a * scale + b, "p": (a * b, np.zeros((), np.int32))}

    shapes = {"s": S((2,), jnp.float32), "p": (S((2,), jnp.float32), S((), jnp.int32))}
    out = plax.jit(lambda x, y: plax.pure_callback(cb, shapes, x, y, scale=2.0))(
        jnp.ones(2), jnp.arange(2.0))
    np.testing.assert_array_equal(np.asarray(out["s"]), [2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(out["p"][0]), [0.0, 1.0])
    assert out["p"][1].dtype == np.int32


def test_pure_callback_unused_result_is_dropped_under_jit():
    calls = []

    def f(x):
        plax.pure_callback(lambda v: calls.append(1) or v, S((), jnp.float32), x)
        return x

    plax.jit(f)(1.0)
    assert calls == []


def test_pure_callback_wrong_shape_and_structure():
    f = plax.jit(lambda x: plax.pure_callback(lambda v: np.ones(2), S((3,), jnp.float32), x))
    with pytest.raises(RuntimeError, match=r"shape.*#0.*\(3,\).*\(2,\)"):
        f(jnp.arange(3.0))
    g = plax.jit(lambda x: plax.pure_callback(lambda v: (v, v), S((3,), jnp.float32), x))
    with pytest.raises(RuntimeError, match="structure"):
        g(jnp.arange(3.0))


def test_pure_callback_casts_result_dtype():
    out = plax.jit(lambda x: plax.pure_callback(lambda v: np.ones(3), S((3,), jnp.float32), x))(
        jnp.arange(3.0))
    assert out.dtype == np.float32


def test_pure_callback_bad_arguments():
    with pytest.raises(TypeError, match="shape and dtype"):
        plax.pure_callback(np.sin, (3,), 1.0)
    with pytest.raises(ValueError, match="vmap_method"):
        plax.pure_callback(np.sin, S((), jnp.float32), 1.0, vmap_method="vectorized")
    with pytest.raises(TypeError, match="callable"):
        plax.pure_callback(None, S((), jnp.float32), 1.0)


def test_pure_callback_jvp_raises_jax_error():
    f = lambda x: plax.pure_callback(np.sin, S((), jnp.float32), x)  # noqa: E731
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP"):
        plax.grad(f)(1.0)
    with pytest.raises(ValueError, match="custom_jvp"):
        plax.jvp(f, (1.0,), (1.0,))


def test_pure_callback_grad_through_custom_jvp():
    @plax.custom_jvp
    def sin(x):
        return plax.pure_callback(np.sin, S(x.shape, x.dtype), x, vmap_method="expand_dims")

    sin.defjvp(lambda p, t: (sin(p[0]), jnp.cos(p[0]) * t[0]))
    with plax.config.override("enable_x64", True):
        x = jnp.asarray(np.linspace(-1, 1, 5))
        check_grads(lambda x: sin(x) * x, (x,), order=1, modes=("fwd", "rev"))
        np.testing.assert_allclose(np.asarray(plax.vmap(plax.grad(sin))(x)), np.cos(np.asarray(x)))


def test_pure_callback_vmap_none_raises():
    f = plax.vmap(lambda x: plax.pure_callback(np.sin, S((), jnp.float32), x))
    with pytest.raises(NotImplementedError, match="vmap_method"):
        f(jnp.arange(3.0))


def _shapes_seen(method, in_axes=(0, None)):
    seen = []

    def cb(a, b):
        seen.append((a.shape, b.shape))
        return np.asarray(a) + np.asarray(b)

    f = plax.vmap(lambda a, b: plax.pure_callback(cb, S((2,), jnp.float32), a, b,
                                                  vmap_method=method), in_axes=in_axes)
    a, b = jnp.arange(6.0).reshape(3, 2), jnp.ones(2)
    out = f(a, b)
    np.testing.assert_array_equal(np.asarray(out), np.arange(6.0).reshape(3, 2) + 1)
    np.testing.assert_array_equal(np.asarray(plax.jit(f)(a, b)), np.asarray(out))
    return seen[:len(seen) // 2]


def test_pure_callback_vmap_methods():
    assert _shapes_seen("sequential") == [((2,), (2,))] * 3
    assert _shapes_seen("expand_dims") == [((3, 2), (1, 2))]
    assert _shapes_seen("broadcast_all") == [((3, 2), (3, 2))]
    assert _shapes_seen("legacy_vectorized") == [((3, 2), (2,))]


def test_pure_callback_vmap_batch_axis_1_matches_loop():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    # expand_dims hands the whole batch (on axis 0) to the callback in one call
    g = lambda v: plax.pure_callback(lambda u: np.cumsum(u, -1), S((3,), jnp.float32), v,  # noqa: E731
                                     vmap_method="expand_dims")
    want = np.stack([np.cumsum(x[:, k]) for k in range(4)])
    np.testing.assert_array_equal(np.asarray(plax.vmap(g, in_axes=1)(x)), want)
    np.testing.assert_array_equal(np.asarray(plax.jit(plax.vmap(g, in_axes=1))(x)), want)


@needs_jax
@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_pure_callback_vmap_shapes_match_jax(method):
    seen = []

    def cb(a, b):
        seen.append((np.shape(a), np.shape(b)))
        return np.asarray(a) + np.asarray(b)

    a, b = np.arange(6.0, dtype=np.float32).reshape(3, 2), np.ones(2, np.float32)
    jax.vmap(lambda a, b: jax.pure_callback(cb, jax.ShapeDtypeStruct((2,), np.float32), a, b,
                                            vmap_method=method), in_axes=(0, None))(a, b)
    want, seen[:] = list(seen), []
    plax.vmap(lambda a, b: plax.pure_callback(cb, S((2,), jnp.float32), a, b,
                                              vmap_method=method), in_axes=(0, None))(a, b)
    assert seen == want


# ------------------------------------------------------------------ io_callback

def test_io_callback_runs_each_call_and_is_kept():
    log = []
    f = plax.jit(lambda x: (io_callback(lambda v: log.append(float(v)), None, x), x * 2)[1])
    f(1.0)
    f(2.0)
    assert log == [1.0, 2.0]
    out = plax.jit(lambda x: io_callback(lambda v: v + 1, S((), jnp.float32), x, ordered=True))(
        jnp.float32(1.0))
    assert float(out) == 2.0


def test_io_callback_vmap():
    log = []
    f = lambda x: io_callback(lambda v: log.append(float(v)) or v, S((), jnp.float32), x)  # noqa: E731
    out = plax.vmap(f)(jnp.arange(3.0))
    np.testing.assert_array_equal(np.asarray(out), [0.0, 1.0, 2.0])
    assert log == [0.0, 1.0, 2.0]
    g = lambda x: io_callback(lambda v: v, S((), jnp.float32), x, ordered=True)  # noqa: E731
    with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
        plax.vmap(g)(jnp.arange(3.0))


def test_io_callback_jvp_raises():
    f = lambda x: io_callback(lambda v: v, S((), jnp.float32), x)  # noqa: E731
    with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
        plax.grad(f)(1.0)


def test_namespaces():
    assert plax.experimental.io_callback is io_callback
    assert callable(plax.debug.print) and callable(plax.debug.callback)
    assert plax.lax.pure_callback_p.name == "pure_callback"


@pytest.mark.skipif(not hasattr(plax.lax, "fori_loop"), reason="no control flow")
def test_debug_print_inside_control_flow_under_jit(capsys):
    # an effect inside a loop or branch body keeps the loop and the branch alive
    def body(i, c):
        plax.debug.print("i={} c={}", i, c)
        return c + 1.0

    out = plax.jit(lambda x: (plax.lax.fori_loop(0, 3, body, x), x)[1])(0.0)
    assert float(out) == 0.0
    assert printed(capsys) == ["i=0 c=0.0", "i=1 c=1.0", "i=2 c=2.0"]
    plax.jit(lambda p, x: plax.lax.cond(p, lambda x: plax.debug.print("T {}", x),
                                        lambda x: None, x))(True, 1.0)
    assert printed(capsys) == ["T 1.0"]

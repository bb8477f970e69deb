"""jnp's binary functions promote ranks only, as JAX 0.10.2's ``promote_shapes`` does (issue 25).

``jnp.add(x_3x1, y_1x4)`` binds one ``add`` of ``f32[3,1]`` and ``f32[1,4]`` (the elementwise
primitives broadcast size-1 axes themselves), ``jnp.add(x_3x4, y_4)`` gives ``y`` one leading
size-1 axis (``broadcast_in_dim`` to ``f32[1,4]``), and functions built on primitives that
take no size-1 operands (``select_n``, ``clamp``) broadcast fully where they need it. The
jaxprs are compared with JAX's in ``tests/test_staging_as_jax.py`` (cases ``rank_promotion_*``
of ``staging_cases.py``); here: values on every CPU backend, eagerly and under ``jit``, against
NumPy float64, gradients against finite differences, ``vmap`` against a Python loop, and
``jax_numpy_rank_promotion``. No JAX needed.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import plugins
from plax.test_util import check_grads

CPU_BACKENDS = sorted(name for name, b in plugins.registry().backends.items()
                      if b.platform == "cpu")

#: operand shapes: size-1 axes on both sides, a rank promotion, rank 0 on either side, both
SHAPES = [((3, 1), (1, 4)), ((3, 4), (4,)), ((), (3,)), ((3,), ()), ((2, 1, 3), (4, 1))]

#: name -> (jnp function, NumPy reference); float32 operands in [0.5, 2] or [-2, -0.5]
FLOAT = {
    "add": (jnp.add, np.add), "subtract": (jnp.subtract, np.subtract),
    "multiply": (jnp.multiply, np.multiply), "true_divide": (jnp.true_divide, np.true_divide),
    "maximum": (jnp.maximum, np.maximum), "minimum": (jnp.minimum, np.minimum),
    "arctan2": (jnp.arctan2, np.arctan2), "equal": (jnp.equal, np.equal),
    "not_equal": (jnp.not_equal, np.not_equal), "less": (jnp.less, np.less),
    "less_equal": (jnp.less_equal, np.less_equal), "greater": (jnp.greater, np.greater),
    "greater_equal": (jnp.greater_equal, np.greater_equal),
    "floor_divide": (jnp.floor_divide, np.floor_divide), "remainder": (jnp.remainder, np.remainder),
    "fmod": (jnp.fmod, np.fmod), "power": (lambda x, y: jnp.power(jnp.abs(x), y),
                                           lambda x, y: np.power(np.abs(x), y)),
    "float_power": (lambda x, y: jnp.float_power(jnp.abs(x), y),
                    lambda x, y: np.float_power(np.abs(x), y)),
    "logaddexp": (jnp.logaddexp, np.logaddexp), "logaddexp2": (jnp.logaddexp2, np.logaddexp2),
    "hypot": (jnp.hypot, np.hypot), "copysign": (jnp.copysign, np.copysign),
    "fmax": (jnp.fmax, np.fmax), "fmin": (jnp.fmin, np.fmin),
    "heaviside": (jnp.heaviside, np.heaviside), "isclose": (jnp.isclose, np.isclose),
    "logical_and": (jnp.logical_and, np.logical_and), "logical_or": (jnp.logical_or, np.logical_or),
    "logical_xor": (jnp.logical_xor, np.logical_xor),
    "where": (lambda x, y: jnp.where(x > y, x, y), lambda x, y: np.where(x > y, x, y)),
    "clip": (lambda x, y: jnp.clip(x, y, 1.5), lambda x, y: np.clip(x, y, 1.5)),
    "ldexp": (lambda x, y: jnp.ldexp(x, jnp.asarray(y).astype(jnp.int32)),
              lambda x, y: np.ldexp(x, np.asarray(y).astype(np.int32))),
    "divmod": (lambda x, y: jnp.stack(jnp.divmod(x, y)), lambda x, y: np.stack(np.divmod(x, y))),
}

#: name -> (jnp function, NumPy reference); int32 operands in [1, 6] (exponents in [0, 3])
INT = {
    "add": (jnp.add, np.add), "bitwise_and": (jnp.bitwise_and, np.bitwise_and),
    "bitwise_xor": (jnp.bitwise_xor, np.bitwise_xor), "left_shift": (jnp.left_shift, np.left_shift),
    "right_shift": (jnp.right_shift, np.right_shift),
    "floor_divide": (jnp.floor_divide, np.floor_divide), "remainder": (jnp.remainder, np.remainder),
    "power": (lambda x, y: jnp.power(x, y % 4), lambda x, y: np.power(x, y % 4)),
    "gcd": (jnp.gcd, np.gcd), "lcm": (jnp.lcm, np.lcm),
}

#: name -> (jnp function, NumPy reference); complex64 operands
COMPLEX = {
    "add": (jnp.add, np.add), "multiply": (jnp.multiply, np.multiply),
    "true_divide": (jnp.true_divide, np.true_divide), "equal": (jnp.equal, np.equal),
    "less": (jnp.less, np.less), "logaddexp": (jnp.logaddexp, None),
    "power": (jnp.power, np.power),
}


def _float_operand(rng, shape):
    sign = np.where(rng.random(shape) < 0.3, -1.0, 1.0)
    return (sign * rng.uniform(0.5, 2.0, shape)).astype(np.float32)


def _operands(kind, sx, sy, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "int":
        return tuple(rng.integers(1, 7, s).astype(np.int32) for s in (sx, sy))
    if kind == "complex":
        return tuple((rng.uniform(0.5, 2.0, s) + 1j * rng.uniform(-1, 1, s)).astype(np.complex64)
                     for s in (sx, sy))
    return _float_operand(rng, sx), _float_operand(rng, sy)


def _reference(kind, name, ref, x, y):
    if kind == "complex" and name == "logaddexp":
        return np.log(np.exp(x.astype(np.complex128)) + np.exp(y.astype(np.complex128)))
    if kind == "float" and name in ("floor_divide", "remainder", "divmod"):
        return ref(x, y)  # exact in float32 (float64 may round across an integer)
    wide = {"int": np.int64, "float": np.float64, "complex": np.complex128}[kind]
    return ref(x.astype(wide), y.astype(wide))


TABLE = {"float": FLOAT, "int": INT, "complex": COMPLEX}
CASES = [(kind, name) for kind, table in TABLE.items() for name in sorted(table)]


def _check(got, want, kind, name):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (name, got.shape, np.shape(want))
    if got.dtype == np.bool_ or kind == "int":
        np.testing.assert_array_equal(got, want, err_msg=name)
    else:
        np.testing.assert_allclose(got, want, rtol=5e-6, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("kind,name", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_values_eager_every_backend(backend, kind, name):
    fn, ref = TABLE[kind][name]
    device = plax.devices(backend=backend)[0]
    for sx, sy in SHAPES:
        x, y = _operands(kind, sx, sy)
        with plax.default_device(device):
            got = fn(plax.device_put(x, device), plax.device_put(y, device))
        _check(got, _reference(kind, name, ref, x, y), kind, f"{name} {sx} {sy}")


@pytest.fixture
def compiled_at_once(monkeypatch):
    """The Numba backend compiles before the first call (else that call may run its
    reference tier, NumPy's kernels, while the kernel compiles)."""
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")


def _jitted_cases():
    """(backend, kind, names, shapes) per program: on the NumPy backend every function of a
    table on every pair of shapes; a compiling backend gets a few float functions on size-1 and
    rank-promoted operands (its compiles cost seconds each, and the lax tests already run each
    primitive on size-1 operands there)."""
    return [(b, kind, sorted(table), SHAPES) if b == "numpy" else
            (b, kind, ["add", "arctan2", "where"], SHAPES[:2])
            for b in CPU_BACKENDS for kind, table in sorted(TABLE.items())
            if b == "numpy" or kind == "float"]


@pytest.mark.parametrize("backend,kind,names,shapes", _jitted_cases(),
                         ids=[f"{b}-{k}" for b, k, _, _ in _jitted_cases()])
def test_values_jitted_every_backend(backend, kind, names, shapes, compiled_at_once):
    # one program per backend and dtype kind: the functions side by side on operands of each
    # pair of shapes (one compile)
    table = TABLE[kind]
    args = [a for sx, sy in shapes for a in _operands(kind, sx, sy, seed=1)]

    def program(*args):
        return [table[n][0](x, y) for x, y in zip(args[::2], args[1::2]) for n in names]
    got = iter(plax.jit(program, backend=backend)(*args))
    for (sx, sy), x, y in zip(shapes, args[::2], args[1::2]):
        for name in names:
            _check(next(got), _reference(kind, name, table[name][1], x, y), kind,
                   f"{name} {sx} {sy}")


def test_python_scalars_and_numpy_operands():
    x = np.arange(4.0, dtype=np.float32)
    m = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(jnp.add(m, x), m + x)
    np.testing.assert_array_equal(jnp.subtract(2.0, jnp.asarray(m)), 2.0 - m)
    np.testing.assert_array_equal(jnp.asarray(m)[:, :1] * jnp.asarray(x)[None], m[:, :1] * x)
    assert jnp.add(np.float32(1), jnp.ones((1, 3))).shape == (1, 3)


# ------------------------------------------------------------------ gradients

DIFFERENTIABLE = ["add", "subtract", "multiply", "true_divide", "maximum", "arctan2", "power",
                  "logaddexp", "logaddexp2", "hypot", "where", "copysign", "fmax"]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@pytest.mark.parametrize("sx,sy", [((3, 1), (1, 4)), ((3, 4), (4,)), ((), (3,))])
def test_grads_against_finite_differences(name, sx, sy):
    x, y = _operands("float", sx, sy, seed=2)
    check_grads(FLOAT[name][0], (x, y), order=1, modes=("fwd", "rev"), eps=1e-3, atol=5e-2,
                rtol=5e-2)


def test_gradient_sums_over_the_broadcast_axes():
    x, y = _operands("float", (3, 1), (4,), seed=3)
    gx, gy = plax.grad(lambda x, y: jnp.sum(x * y), argnums=(0, 1))(x, y)
    assert gx.shape == (3, 1) and gy.shape == (4,)
    np.testing.assert_allclose(gx, np.broadcast_to(y.sum(), (3, 1)), rtol=1e-6)
    np.testing.assert_allclose(gy, np.broadcast_to(x.sum(), (4,)), rtol=1e-6)
    gx = plax.grad(lambda x: jnp.sum(jnp.maximum(x, 0.0)))(x)
    np.testing.assert_array_equal(gx, (x > 0).astype(np.float32))


# ------------------------------------------------------------------ vmap

def _loop(fn, in_axes, args):
    size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    return np.stack([np.asarray(fn(*[a if ax is None else np.take(a, i, axis=ax)
                                     for a, ax in zip(args, in_axes)])) for i in range(size)])


@pytest.mark.parametrize("name", ["add", "multiply", "arctan2", "where", "logaddexp", "hypot",
                                  "floor_divide", "greater", "power", "clip"])
@pytest.mark.parametrize("in_axes,shapes", [
    ((0, None), [(5, 3, 1), (1, 4)]), ((None, 0), [(3, 4), (5, 4)]),
    ((0, 0), [(5, 3), (5, 2, 1)]), ((1, None), [(3, 5), ()]),
])
def test_vmap_against_a_loop(name, in_axes, shapes):
    fn = FLOAT[name][0]
    args = [_float_operand(np.random.default_rng(4), s) for s in shapes]
    want = _loop(fn, in_axes, args)
    np.testing.assert_allclose(plax.vmap(fn, in_axes=in_axes)(*args), want, rtol=1e-6)
    np.testing.assert_allclose(plax.jit(plax.vmap(fn, in_axes=in_axes))(*args), want, rtol=1e-6)


# ------------------------------------------------------------------ jax_numpy_rank_promotion

@pytest.fixture
def rank_promotion():
    """Sets ``jax_numpy_rank_promotion`` for a test, restoring it after."""
    old = plax.config.jax_numpy_rank_promotion
    yield lambda value: plax.config.update("jax_numpy_rank_promotion", value)
    plax.config.update("jax_numpy_rank_promotion", old)


def test_rank_promotion_raise_and_warn(rank_promotion):
    m, v = jnp.ones((3, 4)), jnp.ones(4)
    rank_promotion("raise")
    with pytest.raises(ValueError, match=r"Operands could not be broadcast together for add on "
                                         r"shapes \(3, 4\) \(4,\) and with the config option "
                                         r"jax_numpy_rank_promotion='raise'"):
        jnp.add(m, v)
    with pytest.raises(ValueError, match="for add on shapes"):
        plax.jit(jnp.add)(m, v)
    # size-1 axes, rank 0 and Python scalars are no rank promotion
    assert jnp.add(jnp.ones((3, 1)), jnp.ones((1, 4))).shape == (3, 4)
    assert jnp.add(m, jnp.float32(2)).shape == (3, 4)
    assert (m * 2.0).shape == (3, 4)
    rank_promotion("warn")
    with pytest.warns(UserWarning, match=r"Following NumPy automatic rank promotion for multiply "
                                         r"on shapes \(3, 4\) \(4,\)"):
        jnp.multiply(m, v)
    rank_promotion("allow")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jnp.multiply(m, v).shape == (3, 4)


def test_incompatible_shapes_raise_jax_errors():
    # as JAX: a rank promotion that cannot broadcast is numpy's ValueError text, operands of
    # one rank reach the primitive, whose shape rule raises TypeError
    with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting: "
                                         r"shapes=\[\(3,\), \(4, 5\)\]"):
        jnp.add(jnp.ones(3), jnp.ones((4, 5)))
    with pytest.raises(TypeError, match=r"add got incompatible shapes for broadcasting: "
                                        r"\(3, 2\), \(4, 2\)"):
        jnp.add(jnp.ones((3, 2)), jnp.ones((4, 2)))
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        jnp.where(jnp.ones(3) > 0, jnp.ones((4, 5)), 0.0)


def test_errors_match_jax():
    jax = pytest.importorskip("jax", reason="compares error types with JAX itself")
    for a, b in [((3,), (4, 5)), ((3, 2), (4, 2))]:
        x, y = np.ones(a, np.float32), np.ones(b, np.float32)
        with pytest.raises(Exception) as theirs:
            jax.numpy.add(x, y)
        with pytest.raises(Exception) as ours:
            jnp.add(x, y)
        assert type(ours.value) is type(theirs.value)
        assert str(ours.value) == str(theirs.value)


def test_promote_shapes_stages_rank_promotion_only():
    from plax.numpy.util import promote_shapes
    shapes = lambda *a: [x.shape for x in promote_shapes("f", *a)]  # noqa: E731
    assert shapes(jnp.ones((3, 1)), jnp.ones((1, 4))) == [(3, 1), (1, 4)]
    assert shapes(jnp.ones((3, 4)), jnp.ones(4)) == [(3, 4), (1, 4)]
    assert shapes(jnp.ones(()), jnp.ones((2, 3)), jnp.ones(3)) == [(1, 1), (2, 3), (1, 3)]
    assert shapes(jnp.ones(()), jnp.ones(3)) == [(), (3,)]
    text = str(plax.make_jaxpr(jnp.add)(jnp.ones((3, 1)), jnp.ones((1, 4))))
    assert "broadcast_in_dim" not in text and "add a b" in text


# ------------------------------------------------------------------ vmap jaxprs, as JAX's

def _vmap_cases(jax):
    jnp_ = jax.numpy
    return {
        "rank_promotion_batched": (jax.vmap(lambda x, y: jnp_.where(x > y, x, y)),
                                   (np.ones((5, 3, 4), np.float32), np.ones((5, 4), np.float32))),
        "size_one_unbatched": (jax.vmap(jnp_.add, in_axes=(0, None)),
                               (np.ones((5, 3, 1), np.float32), np.ones((1, 4), np.float32))),
    }


#: ``str(make_jaxpr(...))`` of each case, as JAX 0.10.2 printed it
JAX_VMAP_JAXPRS = {
    "rank_promotion_batched": """\
{ lambda ; a:f32[5,3,4] b:f32[5,4]. let
    c:f32[5,1,4] = broadcast_in_dim[broadcast_dimensions=(0, np.int64(2))] b
    d:bool[5,3,4] = gt a c
    e:f32[5,3,4] = jit[
      name=_where
      jaxpr={ lambda ; d:bool[5,3,4] a:f32[5,3,4] b:f32[5,4]. let
          f:f32[5,3,4] = broadcast_in_dim[broadcast_dimensions=(0, np.int64(2))] b
          e:f32[5,3,4] = select_n d f a
        in (e,) }
    ] d a b
  in (e,) }""",
    "size_one_unbatched": """\
{ lambda ; a:f32[5,3,1] b:f32[1,4]. let
    c:f32[1,1,4] = broadcast_in_dim[
      broadcast_dimensions=(np.int64(1), np.int64(2))
    ] b
    d:f32[5,3,4] = add a c
  in (d,) }""",
}


@pytest.mark.parametrize("name", sorted(JAX_VMAP_JAXPRS))
def test_vmap_jaxprs_match_the_record(name):
    f, args = _vmap_cases(plax)[name]
    assert str(plax.make_jaxpr(f)(*args)) == JAX_VMAP_JAXPRS[name]


@pytest.mark.parametrize("name", sorted(JAX_VMAP_JAXPRS))
def test_vmap_record_is_what_jax_prints(name):
    jax = pytest.importorskip("jax", reason="compares the record with JAX (not installed in CI)")
    f, args = _vmap_cases(jax)[name]
    assert str(jax.make_jaxpr(f)(*args)) == JAX_VMAP_JAXPRS[name]

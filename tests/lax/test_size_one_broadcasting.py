"""Size-1 broadcasting in the n-ary elementwise lax primitives, as in JAX 0.10.2.

``lax.add(x_1x2, y_3x2)`` has shape ``(3, 2)``: operands of equal rank whose sizes are equal or
1 broadcast (rank 0 broadcasts as before); other ranks and sizes raise JAX's TypeErrors, and
``select_n``/``clamp`` keep requiring equal shapes, as in JAX. ``vmap`` stages an unbatched
operand as ``f32[1,...]`` (not a full copy per batch member), gradients sum over the broadcast
axes, and every CPU backend installed computes the values (the conformance kit's size-1 cases
run the GPU backend on the simulated device). References: NumPy float64 broadcasting, finite
differences, Python loops, and JAX's jaxprs recorded below (compared live where JAX is
installed; CI has no JAX and checks the record).
"""
from __future__ import annotations


import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax, plugins
from plax.lowering import Cluster, explicit_broadcasts, find_clusters, order_for_fusion
from plax.test_util import check_grads

R = np.random.default_rng(25)

CPU_BACKENDS = sorted(name for name, b in plugins.registry().backends.items()
                      if b.platform == "cpu")

#: (lax function, NumPy reference, operand sampler low/high)
BINARY = {
    "add": (lax.add, np.add), "sub": (lax.sub, np.subtract), "mul": (lax.mul, np.multiply),
    "div": (lax.div, np.divide), "pow": (lax.pow, np.power), "max": (lax.max, np.maximum),
    "atan2": (lax.atan2, np.arctan2), "lt": (lax.lt, np.less), "ne": (lax.ne, np.not_equal),
}

#: (shape of x, shape of y, shape of the result)
SHAPES = [((1, 2), (3, 2), (3, 2)), ((3, 1), (1, 4), (3, 4)), ((2, 1, 4), (2, 3, 1), (2, 3, 4)),
          ((1, 1), (2, 5), (2, 5)), ((1,), (0,), (0,)), ((), (1, 3), (1, 3))]


def _operands(sx, sy):
    return (R.uniform(0.5, 2.0, sx).astype(np.float32), R.uniform(0.5, 2.0, sy).astype(np.float32))


# ------------------------------------------------------------------ shape rule and errors

@pytest.mark.parametrize("sx,sy,out", SHAPES)
def test_shape_rule(sx, sy, out):
    x, y = _operands(sx, sy)
    assert lax.add(x, y).shape == out
    assert lax.add(y, x).shape == out
    assert lax.eq(x, y).dtype == np.bool_


@pytest.mark.parametrize("sx,sy,pattern", [
    ((3, 2), (4, 2), r"add got incompatible shapes for broadcasting: \(3, 2\), \(4, 2\)\."),
    ((2,), (3, 2), r"add: arrays must have the same number of dimensions, got \{1, 2\}"),
    ((1, 2), (3, 1, 2), r"add: arrays must have the same number of dimensions"),
])
def test_shape_errors(sx, sy, pattern):
    x, y = _operands(sx, sy)
    with pytest.raises(TypeError, match=pattern):
        lax.add(x, y)
    with pytest.raises(TypeError, match=pattern):  # staged: the same rule
        plax.jit(lax.add)(x, y)


def test_dtypes_still_must_match():
    with pytest.raises(TypeError, match="same dtypes"):
        lax.add(np.ones((1, 2), np.float32), np.ones((3, 2), np.int32))


def test_select_n_and_clamp_keep_equal_shapes():
    # as in JAX: their shape rules take rank 0 or the operand's shape, never size 1
    pred, case = np.ones((1, 2), bool), np.ones((3, 2), np.float32)
    with pytest.raises(TypeError, match="select"):
        lax.select_n(pred, case, case)
    with pytest.raises(TypeError, match="select"):
        lax.select_n(np.ones((3, 2), bool), np.ones((1, 2), np.float32), case)
    with pytest.raises(TypeError, match="clamp"):
        lax.clamp(np.zeros((1, 2), np.float32), case, np.float32(1))


# ------------------------------------------------------------------ values on every backend

@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_values_every_backend(backend, name):
    fn, ref = BINARY[name]
    device = plax.devices(backend=backend)[0]
    for sx, sy, out in SHAPES:
        x, y = _operands(sx, sy)
        want = ref(x.astype(np.float64), y.astype(np.float64))
        with plax.default_device(device):
            eager = fn(plax.device_put(x, device), plax.device_put(y, device))
        jitted = plax.jit(fn, backend=backend)(x, y)
        for got in (eager, jitted):
            assert got.shape == out
            np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=2e-6, atol=1e-6)


@pytest.fixture
def compiled_at_once(monkeypatch):
    """The Numba backend compiles before the first call (else that call may run its
    reference tier, NumPy's kernels, while the kernel compiles)."""
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_fused_chain_every_backend(backend, compiled_at_once):
    # a chain where several operands broadcast along different axes, a literal and a
    # reduction at the end: compiled backends fuse it (explicit broadcasts, read in the loop)
    a, b = _operands((1, 3, 1), (4, 3, 5))
    c = R.uniform(0.5, 2.0, (4, 1, 5)).astype(np.float32)

    def f(a, b, c):
        t = lax.mul(lax.add(a, b), lax.sin(c))
        return lax.sub(t, lax.max(a, c)), jnp.sum(lax.exp(lax.add(a, c)) * 2.0, axis=(0, 2))

    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    want = ((a64 + b64) * np.sin(c64) - np.maximum(a64, c64),
            (np.exp(a64 + c64) * 2.0).sum(axis=(0, 2)))
    for got, ref in zip(plax.jit(f, backend=backend)(a, b, c), want):
        np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=1e-5)


def test_integer_and_bool_operands():
    x = np.array([[3, -7, 12]], np.int32)
    y = np.array([[2], [5]], np.int32)
    np.testing.assert_array_equal(lax.shift_left(x, y), np.left_shift(x, y))
    np.testing.assert_array_equal(lax.bitwise_and(x > 0, y > 2), (x > 0) & (y > 2))
    np.testing.assert_array_equal(lax.rem(x, y), np.fmod(x, y))


# ------------------------------------------------------------------ gradients

def test_grad_sums_over_the_broadcast_axes():
    x, y = _operands((1, 2), (3, 2))
    gx, gy = plax.grad(lambda x, y: lax.add(x, y).sum(), argnums=(0, 1))(x, y)
    assert gx.shape == (1, 2) and gy.shape == (3, 2)
    np.testing.assert_array_equal(gx, np.full((1, 2), 3.0))
    np.testing.assert_array_equal(gy, np.ones((3, 2)))
    gx, gy = plax.grad(lambda x, y: lax.mul(x, y).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, y.sum(0, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(gy, np.broadcast_to(x, (3, 2)), rtol=1e-6)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "max", "atan2"])
@pytest.mark.parametrize("sx,sy", [((1, 3), (2, 3)), ((2, 1), (1, 3)), ((), (2, 1))])
def test_grads_against_finite_differences(name, sx, sy):
    fn = BINARY[name][0]
    x, y = _operands(sx, sy)
    check_grads(fn, (x, y), order=2, modes=("fwd", "rev"), eps=1e-3, atol=5e-2, rtol=5e-2)


def test_jvp_of_a_size_one_operand_has_the_output_shape():
    x, y = _operands((1, 2), (3, 2))
    for fn in (lax.add, lax.sub, lax.rem, lax.max, lax.pow):
        out, t = plax.jvp(lambda a: fn(a, y), (x,), (np.ones_like(x),))
        assert out.shape == t.shape == (3, 2), fn
    out, t = plax.jvp(lambda a: lax.sub(x, a), (y,), (np.ones_like(y),))
    np.testing.assert_array_equal(t, -np.ones((3, 2)))


# ------------------------------------------------------------------ vmap

def _loop(fn, in_axes, args):
    size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    return np.stack([np.asarray(fn(*[a if ax is None else np.take(a, i, axis=ax)
                                     for a, ax in zip(args, in_axes)])) for i in range(size)])


@pytest.mark.parametrize("in_axes,shapes", [
    ((0, None), [(4, 3, 2), (3, 2)]), ((None, 1), [(3, 2), (3, 4, 2)]),
    ((0, None), [(4,), (2, 3)]), ((1, 0), [(2, 4), (4, 2)]), ((0, 0), [(4, 1, 2), (4, 3, 1)]),
    ((None, 0), [(1, 2), (4, 3, 2)]),
])
def test_vmap_against_a_loop(in_axes, shapes):
    args = [R.uniform(0.5, 2.0, s).astype(np.float32) for s in shapes]
    fn = lambda x, y: lax.sub(lax.mul(x, y), lax.max(x, y))  # noqa: E731
    want = _loop(fn, in_axes, args)
    np.testing.assert_allclose(plax.vmap(fn, in_axes=in_axes)(*args), want, rtol=1e-6)
    np.testing.assert_allclose(plax.jit(plax.vmap(fn, in_axes=in_axes))(*args), want, rtol=1e-6)


def test_vmap_of_grad_against_a_loop():
    xs, y = _operands((4, 1, 2), (3, 2))
    fn = plax.grad(lambda x, y: (lax.mul(x, y) ** 2).sum())
    want = _loop(fn, (0, None), (xs, y))
    np.testing.assert_allclose(plax.vmap(fn, in_axes=(0, None))(xs, y), want, rtol=1e-5)


# ------------------------------------------------------------------ jaxprs, as JAX prints them

def _jaxpr_cases(jax):
    jnp_, lax_ = jax.numpy, jax.lax
    return {
        "unbatched_rhs": (jax.vmap(lambda x, y: x + y, in_axes=(0, None)),
                          (jnp_.ones((3, 2)), jnp_.ones(2))),
        "moved_axis": (jax.vmap(lambda x, y: x + y, in_axes=(None, 1)),
                       (jnp_.ones(2), jnp_.ones((2, 3)))),
        "batched_scalar": (jax.vmap(lambda x, y: x * y, in_axes=(0, None)),
                           (jnp_.ones(3), jnp_.ones((2, 4)))),
        "literal": (jax.vmap(lambda x, y: lax_.max(x, y) - 1.0, in_axes=(None, 0)),
                    (jnp_.ones(2), jnp_.ones((3, 2)))),
        "compare": (jax.vmap(lambda x, y: lax_.lt(x, y), in_axes=(0, None)),
                    (jnp_.ones((3, 2)), jnp_.ones(2))),
        "grad_mul": (jax.grad(lambda x, y: lax_.mul(x, y).sum()),
                     (jnp_.ones((1, 2)), jnp_.ones((3, 2)))),
        "direct": (lambda x, y: lax_.atan2(x, y), (jnp_.ones((1, 2)), jnp_.ones((3, 1)))),
    }


#: ``str(make_jaxpr(...))`` of each case, as JAX 0.10.2 printed it
JAX_JAXPRS = {
    "unbatched_rhs": """\
{ lambda ; a:f32[3,2] b:f32[2]. let
    c:f32[1,2] = broadcast_in_dim[broadcast_dimensions=(np.int64(1),)] b
    d:f32[3,2] = add a c
  in (d,) }""",
    "moved_axis": """\
{ lambda ; a:f32[2] b:f32[2,3]. let
    c:f32[1,2] = broadcast_in_dim[broadcast_dimensions=(np.int64(1),)] a
    d:f32[3,2] = transpose[permutation=(1, 0)] b
    e:f32[3,2] = add c d
  in (e,) }""",
    "batched_scalar": """\
{ lambda ; a:f32[3] b:f32[2,4]. let
    c:f32[1,2,4] = broadcast_in_dim[
      broadcast_dimensions=(np.int64(1), np.int64(2))
    ] b
    d:f32[3,1,1] = broadcast_in_dim[broadcast_dimensions=(0,)] a
    e:f32[3,2,4] = mul d c
  in (e,) }""",
    "literal": """\
{ lambda ; a:f32[2] b:f32[3,2]. let
    c:f32[1,2] = broadcast_in_dim[broadcast_dimensions=(np.int64(1),)] a
    d:f32[3,2] = max c b
    e:f32[3,2] = sub d 1.0:f32[]
  in (e,) }""",
    "compare": """\
{ lambda ; a:f32[3,2] b:f32[2]. let
    c:f32[1,2] = broadcast_in_dim[broadcast_dimensions=(np.int64(1),)] b
    d:bool[3,2] = lt a c
  in (d,) }""",
    "grad_mul": """\
{ lambda ; a:f32[1,2] b:f32[3,2]. let
    c:f32[3,2] = mul a b
    _:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] c
    d:f32[3,2] = broadcast_in_dim 1.0:f32[]
    e:f32[3,2] = mul d b
    f:f32[2] = reduce_sum[axes=(0,) out_sharding=None] e
    g:f32[1,2] = reshape[dimensions=None new_sizes=(1, 2) sharding=None] f
  in (g,) }""",
    "direct": """\
{ lambda ; a:f32[1,2] b:f32[3,1]. let c:f32[3,2] = atan2 a b in (c,) }""",
}


@pytest.mark.parametrize("name", sorted(JAX_JAXPRS))
def test_jaxprs_match_the_record(name):
    f, args = _jaxpr_cases(plax)[name]
    assert str(plax.make_jaxpr(f)(*args)) == JAX_JAXPRS[name]


@pytest.mark.parametrize("name", sorted(JAX_JAXPRS))
def test_record_is_what_jax_prints(name):
    jax = pytest.importorskip("jax", reason="compares the record with JAX (not installed in CI)")
    f, args = _jaxpr_cases(jax)[name]
    assert str(jax.make_jaxpr(f)(*args)) == JAX_JAXPRS[name]


# ------------------------------------------------------------------ lowering

def test_explicit_broadcasts_keep_a_vmapped_chain_in_one_cluster():
    # vmap stages add a:f32[4,3] c:f32[1,3]; a fusing backend reads c through a broadcast's
    # index map, so the whole chain (and the broadcast) is one cluster, as before vmap staged
    # size-1 operands
    f = plax.vmap(lambda x, y: jnp.sin(x * y + 1.0) * y, in_axes=(0, None))
    jaxpr = plax.make_jaxpr(f)(jnp.ones((4, 3)), jnp.ones(3)).jaxpr
    assert [str(e.outvars[0].aval) for e in jaxpr.eqns][:2] == ["float32[1,3]", "float32[4,3]"]
    rewritten = explicit_broadcasts(jaxpr)
    for eqn in rewritten.eqns:
        if eqn.primitive is not lax.broadcast_in_dim_p:
            assert all(not v.aval.shape or v.aval.shape == eqn.outvars[0].aval.shape
                       for v in eqn.invars), eqn
    units = list(find_clusters(order_for_fusion(rewritten)))
    big = [u for u in units if isinstance(u, Cluster) and u.shape == (4, 3)]
    assert len(big) == 1 and len(big[0].eqns) == 6  # two broadcasts, mul add sin mul
    assert all(e.outvars[0].aval.shape == (4, 3) for e in rewritten.eqns)  # (1, 3)s bypassed
    assert explicit_broadcasts(plax.make_jaxpr(jnp.sin)(jnp.ones(3)).jaxpr).eqns[0].primitive \
        is lax.sin_p


# ------------------------------------------------------------------ every n-ary elementwise primitive

def _nary_elementwise():
    """(primitive, arity, dtype) of every n-ary primitive of plax.lax that declares itself
    elementwise (fusible), with the first dtype its abstract eval takes."""
    from plax.core.shaped_array import ShapedArray
    from plax.lowering import ELEMENTWISE, fusion_kind
    arity = {"regularized_incomplete_beta": 3, "threefry2x32": 4, "clamp": 3, "select_n": 3,
             "bessel_i0e": 1, "bessel_i1e": 1}  # (their abstract evals take any number)
    out, seen = [], set()
    for name, p in sorted(vars(lax).items()):
        if not name.endswith("_p") or fusion_kind(p) != ELEMENTWISE or p in seen:
            continue
        seen.add(p)  # (and_p is also bitwise_and_p)
        n = arity.get(p.name, 2)
        for dtype in (np.float32, np.int32, np.uint32):
            try:
                p.abstract_eval(*[ShapedArray((2, 3), np.dtype(dtype))] * n)
            except TypeError:
                continue
            if n > 1:
                out.append((p, n, np.dtype(dtype)))
            break
    return out


NARY = _nary_elementwise()
#: JAX's select_n and clamp take operands of one shape or rank 0, never size 1
EQUAL_SHAPES_ONLY = {"select_n", "clamp"}
_SIZE_ONE = [(1, 3), (2, 1), (2, 3), (1, 1)]


def test_every_nary_elementwise_primitive_is_listed():
    names = {p.name for p, _, _ in NARY}
    assert {"add", "atan2", "shift_left", "igamma", "zeta", "threefry2x32", "random_gamma_grad",
            "regularized_incomplete_beta", "select_n", "clamp"} <= names


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("prim,arity,dtype", NARY, ids=[p.name for p, _, _ in NARY])
def test_size_one_equals_explicit_broadcast(backend, prim, arity, dtype):
    # the value with size-1 operands is the value with the operands broadcast by hand, on
    # every CPU backend, eagerly and under jit (select_n and clamp refuse them, as in JAX)
    rng = np.random.default_rng(len(prim.name))
    shapes = [_SIZE_ONE[k % len(_SIZE_ONE)] for k in range(arity)]
    if dtype.kind == "f":
        ops = [rng.uniform(0.5, 2.0, s).astype(dtype) for s in shapes]
    else:
        ops = [rng.integers(1, 5, s).astype(dtype) for s in shapes]
    bind = (lambda *a: prim.bind(*a)) if prim.multiple_results else \
        (lambda *a: [prim.bind(*a)])
    if prim.name in EQUAL_SHAPES_ONLY:
        with pytest.raises(TypeError):
            bind(*ops)
        return
    full = [np.broadcast_to(o, (2, 3)) for o in ops]
    device = plax.devices(backend=backend)[0]
    jitted = plax.jit(bind, backend=backend)
    with plax.default_device(device):
        eager = bind(*[plax.device_put(o, device) for o in ops])
        want = bind(*[plax.device_put(np.ascontiguousarray(o), device) for o in full])
    for got in (eager, jitted(*ops)):
        for g, w in zip(got, want):
            assert g.shape == (2, 3)
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, equal_nan=True)

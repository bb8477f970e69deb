"""Constants in jaxprs, mixed-dtype ``dot_general`` and ``linear_call`` as JAX 0.10.2 prints them.

JAX's rule for what a traced constant becomes: Python and NumPy scalars (and rank-0 NumPy
arrays) are written inline as literals; a ``jax.Array`` of any rank, and a NumPy array of
rank > 0, is a constvar (``{ lambda a:f32[3]; b:f32[3]. let ... }``), at the top level and
inside ``jit``'s jaxpr; the bodies of ``cond``/``switch``, ``scan``, ``while``,
``custom_jvp_call``/``custom_vjp_call`` (``num_consts``), ``remat2`` and ``linear_call``
take what they closed over as leading operands instead, as JAX places them. A scalar
converted while tracing (``jnp.float32(2.0)``) is converted on the host, into a literal.

Each case runs with ``jax`` bound to plax and must print the text JAX 0.10.2 printed for it,
recorded below (so CI, without JAX, checks it); where JAX is installed the same program
runs under JAX and must print the record.
"""
from __future__ import annotations

import numpy as np
import pytest

import plax


def _jaxpr_cases(jax):
    """name -> (function, args): each closes over or makes constants as JAX's docs do."""

    jnp, lax = jax.numpy, jax.lax
    arr3 = jnp.arange(3.0)                    # a concrete Array: a constvar
    arr0 = jnp.array(3.0)                     # a rank-0 Array: a constvar too
    np3 = np.arange(3.0, dtype=np.float32)    # a NumPy array: a constvar
    npi3 = np.arange(3, dtype=np.int32)       # converted in the jaxpr, not on the host
    x3 = jnp.ones(3)
    return {
        "closed_array": (lambda x: x + arr3, (x3,)),
        "closed_numpy": (lambda x: x * np3, (x3,)),
        "closed_rank0_array": (lambda x: x * arr0, (x3,)),
        "numpy_scalar_literal": (lambda x: x + np.float32(3.0) + np.array(2.0, np.float32),
                                 (x3,)),
        "folded_scalar_literal": (lambda x: x * jnp.float32(2.0) + jnp.array(1.0), (x3,)),
        "numpy_int_array": (lambda x: x + npi3, (x3,)),
        "traced_arange": (lambda x: x + jnp.arange(3.0) + jnp.arange(1.0, 4.0)
                          + jnp.arange(0.0, 1.5, 0.5), (x3,)),
        "jit_closed_and_arange": (lambda x: jax.jit(lambda y: y * arr3 + jnp.arange(3.0))(x),
                                  (x3,)),
        "cond_consts": (lambda x: lax.cond(x[0] > 0, lambda y: y + arr3, lambda y: y - np3, x),
                        (x3,)),
        "scan_consts": (lambda x: lax.scan(lambda c, t: (c + arr3, t * arr0), x,
                                           jnp.ones((2, 3)))[0], (x3,)),
        "while_consts": (lambda x: lax.while_loop(lambda v: v[0] < 10.0, lambda v: v + arr3,
                                                  x), (x3,)),
        "grad_closed_rank0": (jax.grad(lambda x: jnp.sum(jnp.sin(x) * arr0)), (x3,)),
        "dot_general_int8_float32": (
            lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))),
            (jnp.ones((2, 3), jnp.int8), jnp.ones((3, 2), jnp.float32))),
        "dot_general_mixed_grad": (
            jax.grad(lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))).sum(),
                     argnums=(0, 1)),
            (jnp.ones((2, 3), jnp.float16), jnp.ones((3, 2), jnp.float32))),
        "dot_general_mixed_vmap": (
            jax.vmap(lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())))),
            (jnp.ones((4, 2, 3), jnp.bfloat16), jnp.ones((4, 3, 2), jnp.float32))),
        "dot_general_preferred_grad": (
            jax.grad(lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                                  preferred_element_type=jnp.float32).sum()),
            (jnp.ones((2, 3), jnp.bfloat16), jnp.ones((3, 2), jnp.bfloat16))),
        "linear_call": (lambda x: jax.custom_derivatives.linear_call(
            lambda r, t: t * r + arr3, lambda r, ct: ct * r, 2.0, x), (x3,)),
        "custom_jvp_consts": (lambda x: jax.nn.relu(x) + _custom_jvp(jax, arr3)(x), (x3,)),
        "custom_vjp_consts": (_custom_vjp(jax, arr3), (x3,)),
        "remat_consts": (jax.checkpoint(lambda x: jnp.sin(x) * arr3), (x3,)),
        "switch_consts": (lambda x: lax.switch(1, [lambda y: y + arr3, lambda y: y * arr0,
                                                   lambda y: y - np3], x), (x3,)),
    }


def _custom_jvp(jax, c):
    @jax.custom_jvp
    def scale(x):
        return x * c

    scale.defjvp(lambda p, t: (scale(p[0]), t[0] * c))
    return scale


def _custom_vjp(jax, c):
    @jax.custom_vjp
    def sin_scale(x):
        return jax.numpy.sin(x) * c

    sin_scale.defvjp(lambda x: (sin_scale(x), x), lambda r, g: (g * c,))
    return sin_scale


#: What JAX 0.10.2 printed for each case of _jaxpr_cases (str of make_jaxpr).
JAX_JAXPRS = {
    "closed_array": """\
{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = add b a in (c,) }""",
    "closed_numpy": """\
{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = mul b a in (c,) }""",
    "closed_rank0_array": """\
{ lambda a:f32[]; b:f32[3]. let
    c:f32[] = convert_element_type[new_dtype=float32 weak_type=False] a
    d:f32[3] = mul b c
  in (d,) }""",
    "numpy_scalar_literal": """\
{ lambda ; a:f32[3]. let
    b:f32[3] = add a 3.0:f32[]
    c:f32[3] = add b 2.0:f32[]
  in (c,) }""",
    "folded_scalar_literal": """\
{ lambda ; a:f32[3]. let
    b:f32[3] = mul a 2.0:f32[]
    c:f32[3] = add b 1.0:f32[]
  in (c,) }""",
    "numpy_int_array": """\
{ lambda a:i32[3]; b:f32[3]. let
    c:f32[3] = convert_element_type[new_dtype=float32 weak_type=False] a
    d:f32[3] = add b c
  in (d,) }""",
    "traced_arange": """\
{ lambda ; a:f32[3]. let
    b:f32[3] = iota[dimension=0 dtype=float32 shape=(3,) sharding=None] 
    c:f32[3] = add a b
    d:f32[3] = iota[dimension=0 dtype=float32 shape=(3,) sharding=None] 
    e:f32[3] = add 1.0:f32[] d
    f:f32[3] = add c e
    g:f32[3] = iota[dimension=0 dtype=float32 shape=(3,) sharding=None] 
    h:f32[3] = mul 0.5:f32[] g
    i:f32[3] = add 0.0:f32[] h
    j:f32[3] = add f i
  in (j,) }""",
    "jit_closed_and_arange": """\
{ lambda ; a:f32[3]. let
    b:f32[3] = jit[
      name=<lambda>
      jaxpr={ lambda c:f32[3]; a:f32[3]. let
          d:f32[3] = mul a c
          e:f32[3] = iota[dimension=0 dtype=float32 shape=(3,) sharding=None] 
          b:f32[3] = add d e
        in (b,) }
    ] a
  in (b,) }""",
    "cond_consts": """\
{ lambda a:f32[3] b:f32[3]; c:f32[3]. let
    d:f32[1] = slice[limit_indices=(1,) start_indices=(0,) strides=None] c
    e:f32[] = squeeze[dimensions=(0,)] d
    f:bool[] = gt e 0.0:f32[]
    g:i32[] = convert_element_type[new_dtype=int32 weak_type=False] f
    h:f32[3] = cond[
      branches=(
        { lambda ; i:f32[3] j:f32[3] k:f32[3]. let l:f32[3] = sub k j in (l,) }
        { lambda ; m:f32[3] n:f32[3] o:f32[3]. let p:f32[3] = add o m in (p,) }
      )
    ] g a b c
  in (h,) }""",
    "scan_consts": """\
{ lambda a:f32[3] b:f32[]; c:f32[3]. let
    d:f32[2,3] = broadcast_in_dim 1.0:f32[]
    e:f32[3] _:f32[2,3] = scan[
      jaxpr={ lambda ; f:f32[3] g:f32[] h:f32[3] i:f32[3]. let
          j:f32[3] = add h f
          k:f32[] = convert_element_type[new_dtype=float32 weak_type=False] g
          l:f32[3] = mul i k
        in (j, l) }
      length=2
      num_carry=1
      num_consts=2
      reverse=False
      unroll=1
    ] a b c d
  in (e,) }""",
    "while_consts": """\
{ lambda a:f32[3]; b:f32[3]. let
    c:f32[3] = while[
      body_jaxpr={ lambda ; d:f32[3] e:f32[3]. let f:f32[3] = add e d in (f,) }
      body_nconsts=1
      cond_jaxpr={ lambda ; g:f32[3]. let
          h:f32[1] = slice[limit_indices=(1,) start_indices=(0,) strides=None] g
          i:f32[] = squeeze[dimensions=(0,)] h
          j:bool[] = lt i 10.0:f32[]
        in (j,) }
      cond_nconsts=0
    ] a b
  in (c,) }""",
    "grad_closed_rank0": """\
{ lambda a:f32[]; b:f32[3]. let
    c:f32[3] = sin b
    d:f32[3] = cos b
    e:f32[] = convert_element_type[new_dtype=float32 weak_type=False] a
    f:f32[3] = mul c e
    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] f
    g:f32[3] = broadcast_in_dim 1.0:f32[]
    h:f32[3] = mul g e
    i:f32[3] = mul h d
  in (i,) }""",
    "dot_general_int8_float32": """\
{ lambda ; a:i8[2,3] b:f32[3,2]. let
    c:f32[2,2] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a b
  in (c,) }""",
    "dot_general_mixed_grad": """\
{ lambda ; a:f16[2,3] b:f32[3,2]. let
    c:f32[2,2] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a b
    _:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] c
    d:f32[2,2] = broadcast_in_dim 1.0:f32[]
    e:f32[2,3] = dot_general[dimension_numbers=(([0], [0]), ([], []))] d a
    f:f32[3,2] = transpose[permutation=(1, 0)] e
    g:f32[2,3] = dot_general[dimension_numbers=(([1], [1]), ([], []))] d b
    h:f16[2,3] = convert_element_type[new_dtype=float16 weak_type=False] g
  in (h, f) }""",
    "dot_general_mixed_vmap": """\
{ lambda ; a:bf16[4,2,3] b:f32[4,3,2]. let
    c:f32[4,2,2] = dot_general[dimension_numbers=(([2], [1]), ([0], [0]))] a b
  in (c,) }""",
    "dot_general_preferred_grad": """\
{ lambda ; a:bf16[2,3] b:bf16[3,2]. let
    c:f32[2,2] = dot_general[
      dimension_numbers=(([1], [0]), ([], []))
      preferred_element_type=float32
    ] a b
    _:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] c
    d:f32[2,2] = broadcast_in_dim 1.0:f32[]
    e:f32[2,3] = dot_general[
      dimension_numbers=(([1], [1]), ([], []))
      preferred_element_type=float32
    ] d b
    f:bf16[2,3] = convert_element_type[new_dtype=bfloat16 weak_type=False] e
  in (f,) }""",
    "linear_call": """\
{ lambda a:f32[3]; b:f32[3]. let
    c:f32[3] = linear_call[
      callee={ lambda ; d:f32[3] e:f32[] f:f32[3]. let
          g:f32[] = convert_element_type[new_dtype=float32 weak_type=False] e
          h:f32[3] = mul f g
          i:f32[3] = add h d
        in (i,) }
      num_callee_consts=1
      num_res=1
      transpose_thunk=<function _memoize.<locals>.memoized at 0xXXXXXXXXXXXX>
    ] a 2.0:f32[] b
  in (c,) }""",
    "custom_jvp_consts": """\
{ lambda a:f32[3]; b:f32[3]. let
    c:f32[3] = custom_jvp_call[
      name=relu
      call_jaxpr={ lambda ; d:f32[3]. let
          e:f32[3] = jit[
            name=relu
            jaxpr={ lambda ; d:f32[3]. let e:f32[3] = max d 0.0:f32[] in (e,) }
          ] d
        in (e,) }
      jvp=jvp
      symbolic_zeros=False
    ] b
    f:f32[3] = custom_jvp_call[
      name=scale
      call_jaxpr={ lambda ; g:f32[3] h:f32[3]. let i:f32[3] = mul h g in (i,) }
      jvp=<lambda>
      num_consts=1
      symbolic_zeros=False
    ] a b
    j:f32[3] = add c f
  in (j,) }""",
    "custom_vjp_consts": """\
{ lambda a:f32[3]; b:f32[3]. let
    c:f32[3] = custom_vjp_call[
      name=sin_scale
      bwd=<lambda>
      call_jaxpr={ lambda ; d:f32[3] e:f32[3]. let
          f:f32[3] = sin e
          g:f32[3] = mul f d
        in (g,) }
      fwd=<lambda>
      num_consts=1
      symbolic_zeros=False
    ] a b
  in (c,) }""",
    "remat_consts": """\
{ lambda a:f32[3]; b:f32[3]. let
    c:f32[3] = remat2[
      differentiated=False
      jaxpr={ lambda ; d:f32[3] e:f32[3]. let
          f:f32[3] = sin e
          g:f32[3] = mul f d
        in (g,) }
      policy=None
      prevent_cse=True
    ] a b
  in (c,) }""",
    "switch_consts": """\
{ lambda a:f32[3] b:f32[] c:f32[3]; d:f32[3]. let
    e:i32[] = clamp 0:i32[] 1:i32[] 2:i32[]
    f:f32[3] = cond[
      branches=(
        { lambda ; g:f32[3] h:f32[] i:f32[3] j:f32[3]. let
            k:f32[3] = add j g
          in (k,) }
        { lambda ; l:f32[3] m:f32[] n:f32[3] o:f32[3]. let
            p:f32[] = convert_element_type[new_dtype=float32 weak_type=False] m
            q:f32[3] = mul o p
          in (q,) }
        { lambda ; r:f32[3] s:f32[] t:f32[3] u:f32[3]. let
            v:f32[3] = sub u t
          in (v,) }
      )
    ] e a b c d
  in (f,) }""",
}


CASE_NAMES = sorted(JAX_JAXPRS)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_plax_prints_what_jax_printed(name):
    fun, args = _jaxpr_cases(plax)[name]
    assert str(plax.make_jaxpr(fun)(*args)) == JAX_JAXPRS[name]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_record_is_jax_own(name):
    jax = pytest.importorskip("jax", reason="JAX is not installed: the record is checked "
                                            "against plax only")
    fun, args = _jaxpr_cases(jax)[name]
    assert str(jax.make_jaxpr(fun)(*args)) == JAX_JAXPRS[name]


def test_constvars_hold_the_values():
    # the consts of the ClosedJaxpr are the captured values, in constvar order, and
    # evaluating the jaxpr gives what the function gives
    from plax.core.interpret import jaxpr_as_fun
    for name in ("closed_array", "closed_rank0_array", "cond_consts", "scan_consts"):
        fun, args = _jaxpr_cases(plax)[name]
        closed = plax.make_jaxpr(fun)(*args)
        assert len(closed.consts) == len(closed.jaxpr.constvars) >= 1
        for v, c in zip(closed.jaxpr.constvars, closed.consts):
            assert v.aval.shape == np.shape(c)
        np.testing.assert_allclose(np.asarray(jaxpr_as_fun(closed)(*args)[0]),
                                   np.asarray(fun(*args)), rtol=1e-6)


def test_jit_and_backends_run_constvars():
    # a rank-0 Array constant (now a constvar) through jit on the installed backends
    arr0 = plax.numpy.array(3.0)
    f = lambda x: plax.numpy.sin(x) * arr0 + plax.numpy.arange(3.0)  # noqa: E731
    x = np.linspace(0.0, 1.0, 3, dtype=np.float32)
    expected = np.sin(x.astype(np.float64)) * 3.0 + np.arange(3.0)
    for backend in ("numpy", "numba"):
        try:
            out = plax.jit(f, backend=backend)(x)
        except (RuntimeError, ValueError) as e:  # backend not installed here
            pytest.skip(f"backend {backend}: {e}")
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)


def test_traced_arange_values_match_jax_formula():
    # JAX 0.10 computes arange(start, stop, step) as start + step * iota in the result
    # type (float32 for 16-bit floats): the same float32 rounding, not NumPy's float64
    jnp = plax.numpy
    out = np.asarray(jnp.arange(0.1, 1.0, 0.1))
    ref = (np.float32(0.1) + np.float32(0.1) * np.arange(9, dtype=np.float32))
    np.testing.assert_array_equal(out, ref)
    assert out.dtype == np.float32
    h = jnp.arange(1.0, 4.0, 1.0, dtype=jnp.float16)
    assert h.dtype == np.float16 and np.asarray(h).tolist() == [1.0, 2.0, 3.0]


def test_arange_values_beside_jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")
    cases = [((10, 0, -2), None), ((5,), "float16"), ((0.5, 3), "int32"), ((1, 2.5, 0.25), None),
             ((-3, 3), None), ((2, 12, 3), "uint8"), ((0, 1, 0.1), "bfloat16"), ((5, 1), None)]
    for args, dtype in cases:
        ours = plax.numpy.arange(*args, dtype=dtype)
        theirs = jax.numpy.arange(*args, dtype=dtype)
        assert ours.dtype == theirs.dtype, args
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


# ------------------------------------------------------------------ mixed-dtype dot_general

MIXED = [("int8", "float32", "float32"), ("float16", "float32", "float32"),
         ("bfloat16", "float32", "float32"), ("int32", "float32", "float32"),
         ("int8", "int32", "int32"), ("bool", "float32", "float32"),
         ("float32", "complex64", "complex64"), ("uint8", "int8", "int8"),
         ("int8", "float16", "float16")]
DN = (((1,), (0,)), ((), ()))


def _operands(a, b):
    rng = np.random.default_rng(0)
    low = 0 if a.startswith("u") else -3  # small values: no integer product overflows
    x = rng.integers(low, 4, (2, 3)).astype(plax.numpy.dtype(a) if a != "bool" else bool)
    y = rng.integers(-3, 4, (3, 2)).astype(plax.numpy.dtype(b))
    return x, y


@pytest.mark.parametrize("a,b,out", MIXED)
def test_dot_general_mixed_dtypes(a, b, out):
    x, y = _operands(a, b)
    ref = x.astype(np.float64) @ y.astype(np.complex128 if "complex" in b else np.float64)
    for fun in (plax.lax.dot_general, plax.jit(plax.lax.dot_general, static_argnums=2)):
        r = fun(x, y, DN)
        assert r.dtype == np.dtype(plax.numpy.dtype(out))
        np.testing.assert_allclose(np.asarray(r).astype(ref.dtype), ref)


def test_dot_general_mixed_numba_backend():
    x, y = _operands("int8", "float32")
    try:
        f = plax.jit(lambda a, b: plax.lax.dot_general(a, b, DN) + 1.0, backend="numba")
        r = f(x, y)
    except (RuntimeError, ValueError) as e:
        pytest.skip(f"numba backend: {e}")
    np.testing.assert_allclose(np.asarray(r), x.astype(np.float64) @ y + 1.0)


def test_dot_general_mixed_errors():
    i32 = np.ones((2, 2), np.int32)
    with pytest.raises(TypeError, match="must not be narrower"):
        plax.lax.dot_general(i32, i32.astype(np.int8), DN, preferred_element_type=np.int8)


def test_dot_general_mixed_grad_vmap():
    jnp, lax = plax.numpy, plax.lax
    x = np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float16)
    y = np.linspace(-2, 1, 6).reshape(3, 2).astype(np.float32)
    gx, gy = plax.grad(lambda a, b: lax.dot_general(a, b, DN).sum(), argnums=(0, 1))(x, y)
    # cotangents come back in each operand's dtype (JAX's rule)
    assert (gx.dtype, gy.dtype) == (np.float16, np.float32)
    np.testing.assert_allclose(np.asarray(gx, np.float64),
                               np.broadcast_to(y.sum(1), (2, 3)), rtol=1e-3)
    np.testing.assert_allclose(np.asarray(gy), np.broadcast_to(
        x.astype(np.float32).sum(0)[:, None], (3, 2)), rtol=1e-6)
    t = plax.jvp(lambda a, b: lax.dot_general(a, b, DN), (x, y), (x, y))[1]
    assert t.dtype == np.float32
    xs = np.stack([x, 2 * x, -x])
    ys = np.stack([y, y + 1, 3 * y])
    out = plax.vmap(lambda a, b: lax.dot_general(a, b, DN))(xs, ys)
    loop = np.stack([xs[i].astype(np.float64) @ ys[i] for i in range(3)])
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), loop, rtol=1e-6)


def test_dot_general_mixed_beside_jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")
    for a, b, _ in MIXED:
        x, y = _operands(a, b)
        ours = plax.lax.dot_general(x, y, DN)
        theirs = jax.lax.dot_general(x, y, DN)
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))
    x, y = _operands("float16", "float32")
    f = lambda lax: lambda a, b: lax.dot_general(a, b, DN).sum()  # noqa: E731
    ours = plax.grad(f(plax.lax), argnums=(0, 1))(x, y)
    theirs = jax.grad(f(jax.lax), argnums=(0, 1))(x, y)
    assert [o.dtype for o in ours] == [t.dtype for t in theirs]


# ------------------------------------------------------------------ aval equality

def test_aval_equality_includes_sharding_and_vma():
    from plax.core.shaped_array import ShapedArray
    f32 = np.dtype(np.float32)
    mesh = plax.make_mesh((1,), ("x",))
    sharded = ShapedArray((8,), f32, sharding=plax.sharding.NamedSharding(
        mesh, plax.sharding.PartitionSpec("x")))
    plain = ShapedArray((8,), f32)
    varying = ShapedArray((8,), f32, vma=frozenset({"x"}))
    assert sharded != plain and varying != plain and sharded != varying
    assert plain == ShapedArray((8,), f32) and hash(plain) == hash(sharded)
    assert ShapedArray((8,), f32, vma=frozenset({"x"})) == varying

"""plax prints what JAX 0.10.2 prints: jaxpr parameters (``reduce_sum``'s ``out_sharding``,
``dot_general``'s dimension numbers, precision and result type, ``broadcast_in_dim`` without
its shape), Python-float literals as written, tracers (``JitTracer(~float32[])``), the first
line of the tracer conversion errors, and ``print_saved_residuals`` (qualified function names,
offloaded residuals in host memory), shardings with their memory kind.

Each case runs one program with ``jax`` bound to plax and compares its output with the text
JAX 0.10.2 printed for it, recorded below, so that CI (without JAX) checks it too; where JAX
is installed the same program runs under JAX and must print the recorded text (the record is
JAX's own). tests/jax_docs/run_jax_docs.py runs JAX's documentation pages the same way.
"""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import plax


def _jaxpr_cases(jax):
    jnp, lax = jax.numpy, jax.lax
    x23, x3 = jnp.ones((2, 3)), jnp.ones(3)
    return {
        "reduce_sum": (lambda x: jnp.sum(jnp.sin(x) * 3.0), (x3,)),
        "dot": (lambda a, b: jnp.dot(a + 1, b + 1), (jnp.ones((3, 4)), jnp.ones(4))),
        "dot_highest": (lambda a: jnp.dot(a, a, precision="highest"), (x3,)),
        "dot_precision_pair": (lambda a: lax.dot(a, a, precision=(lax.Precision.HIGHEST,
                                                                  lax.Precision.DEFAULT)),
                               (x3,)),
        "einsum": (lambda a: jnp.einsum("ij,kj->ik", a, a), (x23,)),
        "lax_dot_general": (lambda a: lax.dot_general(a, a, (((1,), (1,)), ((), ()))), (x23,)),
        "broadcast_in_dim": (lambda a, s: (lax.broadcast_in_dim(a, (2, 3), (1,)),
                                           lax.broadcast_in_dim(s, (3,), ())), (x3, 1.0)),
        "reshape": (lambda a: a.reshape(6), (x23,)),
        "iota": (lambda: lax.iota(jnp.int32, 3), ()),
        "weak_literals": (lambda a: a * 0.1 + 1e-08 * a - 3e+38, (1.0,)),
        "strong_literal": (lambda a: a * np.float32(0.1), (1.0,)),
        "fori_loop_while": (lambda a, n: lax.fori_loop(0, n, lambda i, c: c + a * 3., a),
                            (jnp.ones(2), 5)),
        "fori_loop_scan": (lambda a: lax.fori_loop(0, 3, lambda i, c: c + i, a), (0,)),
    }


#: What JAX 0.10.2 printed for each case of _jaxpr_cases (str of make_jaxpr).
JAX_JAXPRS = {
    "reduce_sum": """\
{ lambda ; a:f32[3]. let
    b:f32[3] = sin a
    c:f32[3] = mul b 3.0:f32[]
    d:f32[] = reduce_sum[axes=(0,) out_sharding=None] c
  in (d,) }""",
    "dot": """\
{ lambda ; a:f32[3,4] b:f32[4]. let
    c:f32[3,4] = add a 1.0:f32[]
    d:f32[4] = add b 1.0:f32[]
    e:f32[3] = dot_general[
      dimension_numbers=(([1], [0]), ([], []))
      preferred_element_type=float32
    ] c d
  in (e,) }""",
    "dot_highest": """\
{ lambda ; a:f32[3]. let
    b:f32[] = dot_general[
      dimension_numbers=(([0], [0]), ([], []))
      precision=(Precision.HIGHEST, Precision.HIGHEST)
      preferred_element_type=float32
    ] a a
  in (b,) }""",
    "dot_precision_pair": """\
{ lambda ; a:f32[3]. let
    b:f32[] = dot_general[
      dimension_numbers=(([0], [0]), ([], []))
      precision=(Precision.HIGHEST, Precision.DEFAULT)
    ] a a
  in (b,) }""",
    "einsum": """\
{ lambda ; a:f32[2,3]. let
    b:f32[2,2] = dot_general[
      dimension_numbers=(([1], [1]), ([], []))
      preferred_element_type=float32
    ] a a
  in (b,) }""",
    "lax_dot_general": """\
{ lambda ; a:f32[2,3]. let
    b:f32[2,2] = dot_general[dimension_numbers=(([1], [1]), ([], []))] a a
  in (b,) }""",
    "broadcast_in_dim": """\
{ lambda ; a:f32[3] b:f32[]. let
    c:f32[2,3] = broadcast_in_dim[broadcast_dimensions=(1,)] a
    d:f32[3] = broadcast_in_dim b
  in (c, d) }""",
    "reshape": """\
{ lambda ; a:f32[2,3]. let
    b:f32[6] = reshape[dimensions=None new_sizes=(6,) sharding=None] a
  in (b,) }""",
    # JAX writes the space before the (no) operands
    "iota": """\
{ lambda ; . let
    a:i32[3] = iota[dimension=0 dtype=int32 shape=(3,) sharding=None] \n  in (a,) }""",
    "weak_literals": """\
{ lambda ; a:f32[]. let
    b:f32[] = mul a 0.1:f32[]
    c:f32[] = mul 1e-08:f32[] a
    d:f32[] = add b c
    e:f32[] = sub d 3e+38:f32[]
  in (e,) }""",
    # the bounds as given (no conversion), the counter weakly typed like a Python int
    "fori_loop_while": """\
{ lambda ; a:f32[2] b:i32[]. let
    _:i32[] _:i32[] c:f32[2] = while[
      body_jaxpr={ lambda ; d:f32[2] e:i32[] f:i32[] g:f32[2]. let
          h:i32[] = add e 1:i32[]
          i:f32[2] = mul d 3.0:f32[]
          j:f32[2] = add g i
        in (h, f, j) }
      body_nconsts=1
      cond_jaxpr={ lambda ; k:i32[] l:i32[] m:f32[2]. let
          n:bool[] = lt k l
        in (n,) }
      cond_nconsts=0
    ] a 0:i32[] b a
  in (c,) }""",
    "fori_loop_scan": """\
{ lambda ; a:i32[]. let
    _:i32[] b:i32[] = scan[
      jaxpr={ lambda ; c:i32[] d:i32[]. let
          e:i32[] = add c 1:i32[]
          f:i32[] = add d c
        in (e, f) }
      length=3
      num_carry=2
      num_consts=0
      reverse=False
      unroll=1
    ] 0:i32[] a
  in (b,) }""",
    "strong_literal": """\
{ lambda ; a:f32[]. let
    b:f32[] = convert_element_type[new_dtype=float32 weak_type=False] a
    c:f32[] = mul b 0.10000000149011612:f32[]
  in (c,) }""",
}


def _jaxprs(jax) -> dict:
    return {name: str(jax.make_jaxpr(f)(*args)) for name, (f, args) in _jaxpr_cases(jax).items()}


def _printed(jax) -> str:
    """What printing tracers, a conversion error and saved residuals shows."""
    jnp = jax.numpy
    from_ad = __import__(jax.__name__ + ".ad_checkpoint", fromlist=["x"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        def show(x):
            print(x)
            return x
        jax.jit(show)(1.0)
        jax.jit(show)(jnp.ones((2, 3), jnp.int32))
        jax.grad(show)(1.0)
        jax.jvp(show, (1.0,), (2.0,))
        jax.vmap(show)(jnp.ones(3))
        print(jax.device_put(jnp.ones(3), jax.devices("cpu")[0]).sharding)

        def branch(x):
            return x if x > 0 else -x
        try:
            jax.jit(branch)(1.0)
        except jax.errors.TracerBoolConversionError as e:
            print(str(e).splitlines()[0])

        def chain(n):
            def f(x):
                for _ in range(n):
                    x = jnp.sin(x)
                return x
            return f
        from_ad.print_saved_residuals(chain(2), 3.0)

        def named(x):
            a = from_ad.checkpoint_name(jnp.sin(x), "a")
            b = from_ad.checkpoint_name(jnp.cos(a), "b")
            return jnp.sum(from_ad.checkpoint_name(jnp.sin(b), "c") * a)
        policy = jax.checkpoint_policies.save_and_offload_only_these_names(
            names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"],
            offload_src="device", offload_dst="pinned_host")
        from_ad.print_saved_residuals(jax.checkpoint(named, policy=policy), jnp.ones(3))
    # the source lines name this file; keep the line:column and the function
    return out.getvalue().replace(__file__, "<file>")


#: What JAX 0.10.2 printed for _printed (line numbers are this file's).
JAX_PRINTED = """\
JitTracer(~float32[])
JitTracer(int32[2,3])
GradTracer(primal=1.0, typeof(tangent)=f32[])
JVPTracer(primal=1.0, tangent=2.0)
VmapTracer(aval=float32[], batched=float32[3])
SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)
Attempted boolean conversion of traced array with shape bool[].
f32[] output of cos from <file>:{sin}:24 (_printed.<locals>.chain.<locals>.f)
f32[] output of cos from <file>:{sin}:24 (_printed.<locals>.chain.<locals>.f)
f32[3] from the argument x
f32[3] named 'a' from <file>:{name_a}:16 (_printed.<locals>.named)
f32<host>[3] output of device_put from \n"""


def _expected_printed() -> str:
    import inspect
    src, first = inspect.getsourcelines(_printed)
    line = {key: first + next(i for i, s in enumerate(src) if pattern in s)
            for key, pattern in (("sin", "x = jnp.sin(x)"), ("name_a", '"a")'))}
    return JAX_PRINTED.format(**line)


@pytest.mark.parametrize("name", sorted(JAX_JAXPRS))
def test_plax_prints_the_jaxpr_jax_printed(name):
    assert _jaxprs(plax)[name] == JAX_JAXPRS[name]


def test_plax_prints_tracers_errors_and_residuals_as_jax_did():
    assert _printed(plax) == _expected_printed()


def test_the_records_are_what_jax_prints():
    jax = pytest.importorskip("jax", reason="compares the recorded texts with JAX itself")
    assert _jaxprs(jax) == JAX_JAXPRS
    assert _printed(jax) == _expected_printed()


def test_explicit_precision_is_recorded_as_a_pair():
    closed = plax.make_jaxpr(lambda a: plax.numpy.dot(a, a, precision="highest"))(np.ones(3))
    assert closed.jaxpr.eqns[0].params["precision"] == ("HIGHEST", "HIGHEST")


def test_varying_axes_print_as_jax_writes_them():
    from plax.core.shaped_array import ShapedArray
    one = ShapedArray((3,), np.dtype("float32"), vma=frozenset({"i"}))
    two = ShapedArray((2, 2), np.dtype("float32"), vma=frozenset({"j", "i"}))
    assert (one.str_short(), str(one)) == ("f32[3]{V:i}", "float32[3]{V:i}")
    assert (two.str_short(), str(two)) == ("f32[2,2]{V:(i,j)}", "float32[2,2]{V:(i,j)}")


def test_fori_loop_of_a_python_int_stays_weakly_typed():
    # as JAX: lax.fori_loop(0, 10, lambda i, x: x + i, 0) is Array(45, dtype=int32, weak_type=True)
    out = plax.lax.fori_loop(0, 10, lambda i, x: x + i, 0)
    assert int(out) == 45 and out.aval.weak_type and out.dtype == np.int32


def _shaped_array_reprs(jax):
    jnp = jax.numpy
    return [repr(jax.typeof(jnp.ones((2, 3)))), repr(jax.typeof(1.0)),
            repr(jax.typeof(jnp.arange(3, dtype=jnp.int8)))]


def test_shaped_array_repr_is_jax_s():
    # jax.typeof(x) shown by a notebook (JAX's parallel page prints it in an f-string)
    expected = ["ShapedArray(float32[2,3])", "ShapedArray(float32[], weak_type=True)",
                "ShapedArray(int8[3])"]
    assert _shaped_array_reprs(plax) == expected
    try:
        import jax
    except ImportError:
        return  # CI has no JAX: the record above is its answer
    assert _shaped_array_reprs(jax) == expected


def test_shaped_array_takes_scalar_types_and_names_as_jax_s():
    """``ShapedArray((3,), jnp.float32)``, as JAX code writes it, holds a NumPy dtype (it held
    the scalar type, and printing it raised AttributeError); NumPy's reading, as JAX's: a
    Python ``float`` is float64 even without x64. Equal to (and hashing as) the dtype's."""
    from plax import numpy as jnp
    from plax.core import ShapedArray
    cases = [(np.float32, "float32"), (jnp.float32, "float32"), ("int8", "int8"),
             (jnp.bfloat16, "bfloat16"), (float, "float64"), (bool, "bool")]
    for given, name in cases:
        a = ShapedArray((2, 3), given)
        assert isinstance(a.dtype, np.dtype) and a.dtype.name == name
        assert a == ShapedArray((2, 3), np.dtype(a.dtype))
        assert hash(a) == hash(ShapedArray((2, 3), np.dtype(a.dtype)))
        assert repr(a) == f"ShapedArray({name}[2,3])"
    with pytest.raises(TypeError, match="ShapedArray takes a dtype"):
        ShapedArray((3,), "floop")

"""CPU unit tests of the CuPy backend's pieces that need no GPU: the dtype map, the launch
configuration arithmetic, the generator's handling of clusters (what it fuses, what it
declines) and the host-side control flow (run here with the NumPy backend standing in for
the GPU)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

from kernel_source_util import clusters_of
from plax_cupy import codegen, dtypes


# ---------------------------------------------------------------- the dtype map

def test_dtype_map():
    import ml_dtypes
    assert dtypes.ctype(np.float32) == "float"
    assert dtypes.ctype(np.float64) == "double"
    assert dtypes.ctype(np.int64) == "long long"
    assert dtypes.ctype(np.uint8) == "unsigned char"
    assert dtypes.ctype(np.bool_) == "bool"
    # float16/bfloat16 stored as bits and computed in float; complex as the preamble's pairs
    assert dtypes.ctype(np.float16) == "plax_f16" and dtypes.value_ctype(np.float16) == "float"
    assert dtypes.ctype(ml_dtypes.bfloat16) == "plax_bf16"
    assert dtypes.value_ctype(ml_dtypes.bfloat16) == "float"
    assert dtypes.ctype(np.complex64) == "plax_c64" == dtypes.value_ctype(np.complex64)
    assert dtypes.storage_dtype(ml_dtypes.bfloat16) == np.uint16
    assert dtypes.storage_dtype(np.float16) == np.float16
    for t in ("U3", "V4", ml_dtypes.float8_e4m3fn, object):
        with pytest.raises(dtypes.UnsupportedDtype, match="do not handle"):
            dtypes.ctype(t)
        assert not dtypes.supported(t)
    # the C type has the dtype's width on the platforms CUDA supports (LP64)
    import ctypes
    widths = {"bool": 1, "signed char": 1, "short": 2, "int": 4, "long long": 8, "unsigned char": 1,
              "unsigned short": 2, "unsigned int": 4, "unsigned long long": 8, "float": 4, "double": 8,
              "plax_f16": 2, "plax_bf16": 2, "plax_c64": 8, "plax_c128": 16}
    for d, t in dtypes.CTYPES.items():
        assert widths[t] == d.itemsize, (d, t)
    assert ctypes.sizeof(ctypes.c_longlong) == 8


def test_accumulators():
    assert dtypes.accumulator(np.float32, "sum") == np.float64
    assert dtypes.accumulator(np.float64, "prod") == np.float64
    assert dtypes.accumulator(np.int8, "sum") == np.uint64
    assert dtypes.accumulator(np.uint32, "prod") == np.uint64
    assert dtypes.accumulator(np.float32, "max") == np.float32
    assert dtypes.accumulator(np.int16, "xor") == np.int16


# ---------------------------------------------------------------- launch configuration

@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 10**6, 10**8, 2**40])
@pytest.mark.parametrize("sm", [1, 80, 132])
def test_elementwise_launch_covers_every_element(n, sm):
    grid, block = codegen.elementwise_launch(n, sm)
    assert block == codegen.BLOCK and grid >= 1
    assert grid <= sm * codegen.WAVES * 4 and grid < 2**31
    # a grid-stride loop covers any n; no more blocks than elements need
    assert grid <= max(1, -(-n // block))


@pytest.mark.parametrize("n_out,n_red", [(1, 0), (1, 1), (1, 10**8), (7, 9), (4096, 512),
                                         (10**7, 3), (0, 5), (3, 2**33)])
@pytest.mark.parametrize("sm", [1, 108])
def test_reduction_launch(n_out, n_red, sm):
    grid, block, bpo = codegen.reduction_launch(n_out, n_red, sm)
    assert block == codegen.BLOCK and bpo >= 1 and grid >= bpo and grid % bpo == 0
    assert grid < 2**31
    # every (output, chunk) pair is owned by exactly one block per grid-stride step: the
    # chunks of one output cover its reduced elements
    assert bpo * block * max(1, -(-n_red // (bpo * block))) >= n_red
    # many outputs with little work each: one block per output, no split
    if n_out >= sm * codegen.WAVES:
        assert bpo == 1
    # one output with a lot of work: split over about as many blocks as the device holds
    if n_out == 1 and n_red >= 10**8:
        assert bpo == sm * codegen.WAVES


def test_launch_rejects_nonsense():
    with pytest.raises(ValueError):
        codegen.elementwise_launch(-1)
    with pytest.raises(ValueError):
        codegen.reduction_launch(1, -1)


# ---------------------------------------------------------------- what is fused

def _kernel_of(f, *args):
    (cluster,) = clusters_of(plax.make_jaxpr(f)(*args).jaxpr)
    return codegen.plan_cluster(cluster)


def test_selu_is_one_elementwise_kernel_with_literals_by_value():
    x = np.ones(1000, np.float32)
    plan = _kernel_of(lambda x: 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67), x)
    assert plan.entry == ("plax_elementwise",) and not plan.reductions
    assert [i.kind for i in plan.inputs].count("array") == 1  # x; the constants are arguments
    assert all(i.kind == "literal" for i in plan.inputs if i.atom.aval.shape == ())
    assert "expf(" in plan.source and "exp(" not in plan.source.split("// cluster")[1].replace("expf(", "")


def test_clusters_with_the_same_code_are_one_source():
    # the kernel cache, NVRTC and the simulated GPU's host builds key on the text: a shape or a
    # primitive's name in it made each of these its own compile (a third of the kit's builds)
    def source(f, *shapes):
        return _kernel_of(f, *[np.ones(s, np.float32) for s in shapes]).source
    tanh_add = lambda x, y: jnp.tanh(x) + y  # noqa: E731
    same = source(tanh_add, (3, 4), (3, 4))
    assert source(tanh_add, (5, 7), (5, 7)) == same
    assert source(tanh_add, (0, 3), (0, 3)) == same
    assert source(tanh_add, (60,), (60,)) == same
    assert source(lambda x, y: jnp.tanh(x) - y, (3, 4), (3, 4)) != same  # other code, other text
    assert source(tanh_add, (3, 4), (4,)) != same                       # a broadcast reads otherwise
    assert source(lambda x, y: lax.add_any_p.bind(jnp.tanh(x), y), (3, 4), (3, 4)) == same


def test_full_reduction_is_a_partial_and_final_kernel():
    x = np.ones((64, 128), np.float32)
    plan = _kernel_of(lambda x: jnp.sum(jnp.tanh(x) * 2.0), x)
    assert plan.entry == ("plax_reduce",)
    assert (plan.n_out, plan.n_red) == (1, 64 * 128)
    (j, red), = plan.reductions
    assert red.kind == "sum" and red.acc == np.float64


def test_reductions_over_different_axes_are_declined():
    x = np.ones((4, 6), np.float32)
    f = lambda x: (lax.reduce_sum_p.bind(jnp.exp(x), axes=(0,)),  # noqa: E731
                   lax.reduce_max_p.bind(jnp.exp(x), axes=(1,)))
    (cluster,) = clusters_of(plax.make_jaxpr(f)(x).jaxpr)
    with pytest.raises(codegen.Unsupported, match="different axes"):
        codegen.plan_cluster(cluster)


def test_complex_and_half_precision_clusters_are_generated():
    import ml_dtypes
    for dtype in (np.complex64, np.float16, ml_dtypes.bfloat16):
        x = np.ones(8, dtype)
        (cluster,) = clusters_of(plax.make_jaxpr(lambda x: x * x + x)(x).jaxpr)
        plan = codegen.plan_cluster(cluster)
        assert plan.out_dtypes == [np.dtype(dtype)]
    # complex inverse functions fuse too, with their helpers included in that kernel only
    z = np.ones(8, np.complex64)
    (cluster,) = clusters_of(plax.make_jaxpr(lambda x: jnp.arcsin(x) + x)(z).jaxpr)
    plan = codegen.plan_cluster(cluster)
    assert "plax_casin(" in plan.source and "PLAX_COMPLEX_INVERSE" in plan.source
    assert "PLAX_COMPLEX_INVERSE" not in codegen.plan_cluster(
        clusters_of(plax.make_jaxpr(lambda x: x * x + x)(z).jaxpr)[0]).source


def test_shapes_are_baked_and_broadcasts_index_maps():
    x = np.ones((3, 5), np.float32)
    y = np.ones((5,), np.float32)
    plan = _kernel_of(lambda x, y: jnp.sin(x) + y, x, y)
    assert "idx1 = (i / 1LL) % 5LL" in plan.source  # the row operand reads idx1 only
    assert "idx0" not in plan.source


def test_size_one_operands_read_through_their_index_map():
    # an elementwise equation with operands of size 1 along some axes (JAX's rule): one
    # kernel, each operand read at the axes where it is not 1 (eager operations take this
    # path; compiled programs meet them as explicit broadcasts)
    from kernel_source_util import aval, make_eqn
    from plax.core.jaxpr import Var
    eqn = make_eqn(lax.add_p, [Var(aval((1, 5), np.float32)), Var(aval((3, 1), np.float32))])
    assert eqn.outvars[0].aval.shape == (3, 5)
    source = codegen.plan_equation(eqn).source
    assert "a0[idx1 * 1LL]" in source and "a1[idx0 * 1LL]" in source
    eqn = make_eqn(lax.mul_p, [Var(aval((1, 1), np.float32)), Var(aval((2, 4), np.float32))])
    assert "a0[0]" in codegen.plan_equation(eqn).source  # all axes of size 1: one element


def test_describe_names_the_fused_primitives():
    x = np.ones(4, np.float32)
    plan = _kernel_of(lambda x: jnp.exp(x) * 2.0, x)
    text = codegen.describe(plan)
    assert text.startswith("// ---- CUDA kernel: exp mul over (4,)") and "plax_elementwise" in text


# ---------------------------------------------------------------- host-side control flow

@pytest.fixture(scope="module")
def runner():
    """The control-flow driver over the NumPy backend (the GPU backend passes a device read
    and ``cupy.stack``; here NumPy's)."""
    from plax import plugins
    from plax_cupy.control_flow import BodyRunner
    backend = plugins.registry().get_backend("numpy")
    return BodyRunner(backend, backend.devices()[0], read_scalar=lambda b: np.asarray(b)[()],
                      stack=np.stack)


def _eqn(f, *args, prim):
    closed = plax.make_jaxpr(f)(*args)
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == prim]
    return eqn


def test_while_loop_on_host(runner):
    from plax_cupy.control_flow import run_while

    def f(x):
        return lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))

    x = np.float32(1.5)
    eqn = _eqn(f, x, prim="while")
    out = run_while(runner, np.int32(0), x, **eqn.params)
    assert int(out[0]) == 10 and float(out[1]) == 1.5 * 2**10


def test_scan_on_host_forward_and_reverse(runner):
    from plax_cupy.control_flow import run_scan
    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    for reverse in (False, True):
        def f(c, xs):
            return lax.scan(lambda c, x: (c + x.sum(), c * x), c, xs, reverse=reverse)
        eqn = _eqn(f, np.float32(1.0), xs, prim="scan")
        consts = eqn.params["num_consts"]
        assert consts == 0
        carry, ys = run_scan(runner, np.float32(1.0), xs, **eqn.params)
        want_c, want_ys = plax.jit(f, backend="numpy")(np.float32(1.0), xs)
        np.testing.assert_array_equal(carry, want_c)
        np.testing.assert_array_equal(ys, want_ys)


def test_scan_of_length_zero(runner):
    from plax_cupy.control_flow import run_scan
    xs = np.zeros((0, 2), np.float32)
    f = lambda c, xs: lax.scan(lambda c, x: (c + x.sum(), x * 2), c, xs)  # noqa: E731
    eqn = _eqn(f, np.float32(1.0), xs, prim="scan")
    carry, ys = run_scan(runner, np.float32(1.0), xs, **eqn.params)
    assert float(carry) == 1.0 and ys.shape == (0, 2) and ys.dtype == np.float32


def test_cond_clamps_its_index(runner):
    from plax_cupy.control_flow import run_cond
    f = lambda i, x: lax.switch(i, [lambda x: x + 1, lambda x: x * 10, lambda x: -x], x)  # noqa: E731
    eqn = _eqn(f, np.int32(0), np.float32(2.0), prim="cond")
    for i, want in ((0, 3.0), (1, 20.0), (2, -2.0), (7, -2.0), (-3, 3.0)):
        (out,) = run_cond(runner, np.int32(i), np.float32(2.0), **eqn.params)
        assert float(out) == want, i

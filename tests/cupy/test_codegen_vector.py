"""The elementwise kernels' vector path (``plax_cupy.codegen._vector_kernel``, issue 24's selu
bandwidth), checked without a GPU.

* emitted where it pays: every operand read at the loop's own index (contiguous) and every
  result move ``VECTOR_BYTES`` at a time, several chunks per thread, 32-bit index math, the
  alignment checked in the kernel; broadcast and rank-0 operands keep their index maps; no
  path for small kernels, complex128, reductions, nor the special functions' helpers;
* NVRTC compiles it for every dtype the fused kernels take, mixed widths included, and the
  optimised PTX holds 128-bit loads and stores;
* on the simulated GPU (this file again, in a child process; which builds the kernels
  themselves for the host, the vector path included) and on a real one, it computes what NumPy
  does, with a tail of ``n % V`` elements, and so does the scalar loop a misaligned view takes.
"""
from __future__ import annotations

import re
import shutil

import ml_dtypes
import numpy as np
import pytest

from plax import lax
from plax.core.jaxpr import Literal, Var

from gpu_env import GPU_PROBLEM, requires_nvrtc
from kernel_source_util import DTYPES, aval, batch_source, make_eqn
from plax_cupy import codegen
from test_simulated_streams import SIMULATED, run_file_on_simulated_gpu

#: on the simulated GPU (the child process) or a real one
on_a_gpu = pytest.mark.skipif(not SIMULATED and bool(GPU_PROBLEM),
                              reason="needs a GPU, real or simulated (test_on_the_simulated_gpu)")

#: above VECTOR_MIN_ELEMENTS, and not a multiple of any vector width: every kernel has a tail
BIG = (codegen.VECTOR_MIN_ELEMENTS + 3,)
F32 = np.dtype(np.float32)


def _source(eqn) -> tuple[str, codegen.ClusterKernel]:
    plan = codegen.plan_equation(eqn)
    return plan.source[len(codegen.PREAMBLE):], plan


def _selu_cluster_eqn(shape, dtype=F32):
    x = Var(aval(shape, dtype))
    return make_eqn(lax.mul_p, [x, Literal(np.asarray(2, dtype)[()], aval((), dtype))])


def test_contiguous_operands_get_the_vector_path():
    src, plan = _source(_selu_cluster_eqn(BIG))
    # float32: four elements per 16-byte access, VECTOR_CHUNKS accesses in flight
    assert plan.per_thread == 4 * codegen.VECTOR_CHUNKS
    assert "plax_vload<float, 4>(a0_r" in src and "plax_vstore<float, 4>(o0 +" in src
    assert "((unsigned long long)a0 & 15u) | ((unsigned long long)o0 & 15u)" in src
    assert "unsigned int c =" in src                      # 32-bit index math below 2**31
    assert f"i < {BIG[0]}u" in src                        # the tail, by the scalar plax_elem
    # the launch: a thread per VECTOR_CHUNKS vectors, capped by the multiprocessors
    assert codegen.elementwise_launch(BIG[0], 132, per_thread=plan.per_thread)[0] == \
        -(-BIG[0] // (codegen.BLOCK * plan.per_thread))
    assert codegen.elementwise_launch(10 ** 9, 132, per_thread=8)[0] == 132 * codegen.WAVES * 4


def test_broadcast_and_scalar_operands_keep_their_index_maps():
    shape = (512, 257)
    x, row, s = Var(aval(shape, F32)), Var(aval((257,), F32)), Var(aval((), F32))
    b = make_eqn(lax.broadcast_in_dim_p, [row], shape=shape, broadcast_dimensions=(1,))
    from plax.lowering import Cluster
    eqns = [b, make_eqn(lax.add_p, [x, b.outvars[0]])]
    eqns.append(make_eqn(lax.mul_p, [eqns[1].outvars[0], s]))
    plan = codegen.plan_cluster(Cluster(eqns, shape, [row, x, s], [eqns[2].outvars[0]]))
    src = plan.source
    assert plan.per_thread == 8
    assert "plax_vload<float, 4>(a1_r" in src                 # x: contiguous
    assert "a0_r" not in src and "a2_r" not in src           # the row and the scalar: not
    assert re.search(r"a0\[idx1 \* 1LL\]", src) and "a2[0]" in src
    assert "const unsigned int idx1 = (i / 1u) % 257u;" in src   # the overload's 32-bit map


@pytest.mark.parametrize("case", ["small", "complex128", "reduction", "special"])
def test_no_vector_path(case):
    if case == "small":
        eqn = _selu_cluster_eqn((codegen.VECTOR_MIN_ELEMENTS - 1,))
    elif case == "complex128":
        c = np.dtype(np.complex128)
        eqn = make_eqn(lax.neg_p, [Var(aval(BIG, c))])
    elif case == "reduction":
        eqn = make_eqn(lax.reduce_sum_p, [Var(aval(BIG, F32))], axes=(0,))
    else:
        eqn = make_eqn(lax.digamma_p, [Var(aval(BIG, F32))])
    src, plan = _source(eqn)
    assert "plax_vload" not in src and plan.per_thread == 1


def _dtype_cases():
    """Per dtype: its conversions from and to float32 (mixed widths: the narrower operand
    moves fewer bytes per access) and a select between two of its arrays."""
    eqns = []
    for d in DTYPES:
        x = Var(aval(BIG, d))
        eqns.append(make_eqn(lax.convert_element_type_p, [x], new_dtype=F32, weak_type=False))
        eqns.append(make_eqn(lax.convert_element_type_p, [Var(aval(BIG, F32))], new_dtype=d,
                             weak_type=False))
        eqns.append(make_eqn(lax.select_n_p, [Var(aval(BIG, np.bool_)), x, Var(aval(BIG, d))]))
    for d in (np.float16, ml_dtypes.bfloat16, np.complex64):
        x = Var(aval(BIG, d))
        eqns.append(make_eqn(lax.mul_p, [x, x]))
    return eqns


@requires_nvrtc
def test_vector_path_compiles_for_every_dtype():
    from plax_cupy import nvrtc
    plans = [codegen.plan_equation(e) for e in _dtype_cases()]
    vector = [p for p in plans if p.per_thread > 1]
    # all but those whose widest operand is complex128
    assert len(vector) == len(plans) - 3, [p for p in plans if p.per_thread == 1]
    source, _ = batch_source([p.source for p in plans])
    ptx = nvrtc.compile_ptx(source, "vector.cu", options=nvrtc.NVRTC_CHECK_OPTIONS)
    assert ptx.count(".entry") == len(plans)
    assert_128_bit_accesses(codegen.plan_equation(_selu_cluster_eqn(BIG)).source)


def assert_128_bit_accesses(source: str) -> None:
    """``source`` compiled as plax compiles for a device (optimised, ``compute_80``), without a
    warning, loads and stores 128 bits at a time."""
    from plax_cupy import nvrtc
    ptx = nvrtc.compile_ptx(source, "vector.cu",
                            options=("-arch=compute_80",) + nvrtc.DEVICE_OPTIONS)
    assert re.search(r"ld\.global\.nc\.v4\.u32", ptx) and re.search(r"st\.global\.v4\.", ptx)


# ---------------------------------------------------------------- on the simulated GPU

@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__, skipped=2)   # (this one, and NVRTC there)


@on_a_gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
def test_vector_path_values_with_a_tail(dtype):
    import plax
    import plax.numpy as jnp
    x = (np.arange(BIG[0]) % 61 - 30).astype(dtype)
    f = plax.jit(lambda x: jnp.where(x > 0, x * 3, x - 1), backend="cupy")
    got = np.asarray(f(plax.device_put(x, plax.devices("gpu")[0])))
    np.testing.assert_array_equal(got, np.where(x > 0, x * 3, x - 1).astype(dtype))
    assert codegen.plan_equation(_selu_cluster_eqn(BIG, np.dtype(dtype))).per_thread > 1


@on_a_gpu
def test_misaligned_view_takes_the_scalar_loop():
    import cupy
    import plax
    from plax_cupy.backend import Launcher
    backend = plax.plugins.registry().get_backend("cupy")
    plan = codegen.plan_equation(_selu_cluster_eqn(BIG))
    x = np.random.default_rng(0).normal(size=BIG[0] + 1).astype(np.float32)
    base = cupy.asarray(x)
    for view, want in ((base[:-1], x[:-1]), (base[1:], x[1:])):  # aligned, then 4 bytes off
        assert view.flags.c_contiguous
        (out,) = Launcher(plan, backend)(view, np.float32(2))
        np.testing.assert_array_equal(cupy.asnumpy(out), want * np.float32(2))

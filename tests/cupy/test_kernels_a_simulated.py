"""The GPU kernels of the shape, indexing, reduction, sort, precision and random families
(``plax_cupy.kernels_{shape,indexing,reduction,sort,precision,random}``) run on the simulated
GPU of ``fake_cupy`` and compared with the NumPy backend's kernels.

The family files (``test_kernels_a_<family>.py``) run where ``cupy`` is the simulated one or
a GPU is present; this file runs them in one child process with ``-p fake_cupy_plugin`` (the simulation
takes the name ``cupy``, so it never meets a real CuPy of this session), and holds the helper
they share, :func:`check`.
"""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from gpu_env import GPU_PROBLEM, NVRTC_PROBLEM
from test_simulated_streams import SIMULATED, run_file_on_simulated_gpu

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = ("shape", "indexing", "reduction", "sort", "precision", "programs")


#: marks a family file's tests: they run on the simulated GPU (in place of CuPy) or a real one
on_a_gpu = pytest.mark.skipif(
    not (SIMULATED or not GPU_PROBLEM),
    reason="no CUDA GPU present; runs on the simulated GPU (test_kernels_a_simulated.py starts it)")


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the simulated GPU")
def test_kernel_families_on_the_simulated_gpu():
    run_file_on_simulated_gpu(*(os.path.join(HERE, f"test_kernels_a_{f}.py") for f in FAMILIES),
                              skipped=0)


def test_box_kernels_compile_with_nvrtc():
    # dynamic_slice's and dynamic_update_slice's generated kernels compile for the device
    # without a warning: every element width, signed and unsigned start indices, ranks 1 to 4
    if NVRTC_PROBLEM:
        pytest.skip(NVRTC_PROBLEM)
    from plax_cupy import codegen, nvrtc
    from plax_cupy.kernels_indexing import box_source
    for rank, width, index in [(1, 1, np.int8), (2, 2, np.uint8), (3, 4, np.int32),
                               (4, 8, np.uint64), (2, 16, np.int64)]:
        ptx = nvrtc.compile_ptx(codegen.PREAMBLE + box_source(rank, width, index))
        assert ".entry plax_box_read" in ptx and ".entry plax_box_write" in ptx


def test_gather_kernels_compile_with_nvrtc():
    # gather's generated kernel for the gathers of a few programs (batching dimensions, fill
    # values of every width, unsigned indices) compiles for the device without a warning
    if NVRTC_PROBLEM:
        pytest.skip(NVRTC_PROBLEM)
    import plax
    import plax.numpy as jnp
    from plax import lax
    from plax_cupy import codegen, nvrtc
    from plax_cupy.kernels_indexing import _fill_bits, gather_source
    x = np.zeros((4, 5, 6), np.complex128)
    i = np.array([[1, 2], [3, 9]], np.uint32)
    programs = [lambda x, i: x[i[:, 0], :, i[:, 1]],
                lambda x, i: x.real.astype(jnp.float16).at[i].get(mode="fill", fill_value=2),
                lambda x, i: plax.vmap(lambda r, s: lax.dynamic_slice(r, (s, 0), (2, 6)))(x[:2], i[:, 0])]
    for prog in programs:
        eqns = [e for e in plax.make_jaxpr(prog)(x, i).jaxpr.eqns if e.primitive.name == "gather"]
        assert eqns
        for e in eqns:
            op, ix = (v.aval for v in e.invars)
            p = e.params
            source = gather_source(op.shape, ix.shape, ix.dtype, op.dtype.itemsize,
                                   dimension_numbers=p["dimension_numbers"],
                                   slice_sizes=p["slice_sizes"], mode=p["mode"],
                                   fill_bits=_fill_bits(op.dtype, p["fill_value"], False))
            assert ".entry plax_gather" in nvrtc.compile_ptx(codegen.PREAMBLE + source)


def test_scatter_kernels_compile_with_nvrtc():
    # the scatters' generated kernels (targets for a batched and an unbatched scatter, the
    # combining step of every kind on the dtypes with their own arithmetic) compile for the
    # device without a warning
    if NVRTC_PROBLEM:
        pytest.skip(NVRTC_PROBLEM)
    import ml_dtypes
    import plax
    from plax_cupy import codegen, nvrtc
    from plax_cupy.kernels_indexing import scatter_combine_source, scatter_targets_source
    x = np.zeros((4, 5), np.float32)
    i = np.array([1, 3], np.uint16)
    for prog in (lambda x, i: x.at[i].add(1.0, mode="clip"),
                 lambda x, i: plax.vmap(lambda r, j: r.at[j].max(2.0))(x[:2], i)):
        for e in plax.make_jaxpr(prog)(x, i).jaxpr.eqns:
            if e.primitive.name.startswith("scatter"):
                op, ix, up = (v.aval for v in e.invars)
                dn = e.params["dimension_numbers"]
                dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
                win = iter(up.shape[d] for d in dn.update_window_dims)
                window = tuple(1 if d in dropped else next(win) for d in range(len(op.shape)))
                source = scatter_targets_source(op.shape, ix.shape, ix.dtype, window,
                                                dimension_numbers=dn, mode=e.params["mode"])
                assert ".entry plax_scatter_targets" in nvrtc.compile_ptx(codegen.PREAMBLE + source)
    for dtype in (np.bool_, np.int8, np.uint64, np.float16, ml_dtypes.bfloat16, np.float64,
                  np.complex64):
        for kind in ("set", "add", "mul", "min", "max"):
            ptx = nvrtc.compile_ptx(codegen.PREAMBLE + scatter_combine_source(kind, dtype))
            assert ".entry plax_scatter_combine" in ptx


# ---------------------------------------------------------------- helpers of the family files

def backend():
    """The ``cupy`` backend object (the simulated GPU's)."""
    from plax import plugins
    return plugins.registry().get_backend("cupy")


def run_kernel(primitive, *host_args, **params):
    """``primitive``'s GPU kernel on device copies of ``host_args``, called as the backend
    calls kernels (on the device's stream, bfloat16 operands widened unless the kernel moves
    bits); the result(s) read back to the host."""
    from plax_cupy import kernels
    be = backend()
    fn = kernels.impls()[primitive]
    device = be.devices()[0]
    bufs = [be.put(np.asarray(a), device) for a in host_args]
    out = be._wrap(fn, primitive)(*bufs, **params)
    if isinstance(out, (list, tuple)):
        return [be.to_host(o) for o in out]
    return be.to_host(out)


def reference(primitive, *host_args, **params):
    import plax_numpy
    return plax_numpy.impls()[primitive](*[np.asarray(a) for a in host_args], **params)


def check(primitive, *host_args, rtol=None, **params):
    """Asserts the GPU kernel's results equal the NumPy backend's: shape and dtype always,
    values exactly (NaN equal to NaN) or, with ``rtol``, to that relative tolerance."""
    got = run_kernel(primitive, *host_args, **params)
    want = reference(primitive, *host_args, **params)
    gots = got if isinstance(got, list) else [got]
    wants = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(gots) == len(wants)
    for g, w in zip(gots, wants):
        w = np.asarray(w)
        assert g.shape == w.shape, (primitive.name, g.shape, w.shape)
        assert g.dtype == w.dtype, (primitive.name, g.dtype, w.dtype)
        if rtol is None or w.dtype.kind not in "fcV":
            np.testing.assert_array_equal(_comparable(g), _comparable(w), err_msg=primitive.name)
        else:
            np.testing.assert_allclose(g.astype(np.complex128 if w.dtype.kind == "c" else np.float64),
                                       w.astype(np.complex128 if w.dtype.kind == "c" else np.float64),
                                       rtol=rtol, atol=rtol, err_msg=primitive.name)
    return got


def _comparable(a):
    # exact comparison of the bits of floats (NaN payloads aside: any NaN equals any NaN),
    # values otherwise
    a = np.asarray(a)
    if a.dtype.kind in "fcV" or a.dtype.name == "bfloat16":
        with np.errstate(invalid="ignore"):
            return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    return a


def dtypes_all():
    """Every dtype a structural primitive takes: bool, the integers, the floats (bfloat16
    included) and the complex types."""
    import ml_dtypes
    return [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
            np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.complex64,
            np.complex128]


def sample(shape, dtype, seed=0):
    """Values of ``dtype`` and ``shape`` with signs, zeros and (for floats) NaN and inf."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) > 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(dtype)
    x = rng.standard_normal(shape) * 4
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def check_program(fn, *host_args, primitives, rtol=None):
    """Traces ``fn`` and evaluates its equations with the NumPy backend's kernels; each equation
    of ``primitives`` (names) is also run with its GPU kernel on the same operands and
    compared (:func:`check`). Returns how many equations were compared, so a test can assert
    that its program reached the primitives it is about."""
    import plax
    from plax.core.jaxpr import Literal
    closed = plax.make_jaxpr(fn)(*host_args)
    compared = [0]

    def evaluate(jaxpr, consts, args):
        env = {}
        for v, val in zip(jaxpr.constvars, consts):
            env[v] = val
        for v, val in zip(jaxpr.invars, args):
            env[v] = np.asarray(val)
        read = lambda v: np.asarray(v.val, v.aval.dtype) if isinstance(v, Literal) else env[v]  # noqa: E731
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            inner = eqn.params.get("jaxpr")
            if eqn.primitive.name == "jit" and inner is not None:
                outs = evaluate(inner.jaxpr, inner.consts, ins)
            else:
                if eqn.primitive.name in primitives:
                    check(eqn.primitive, *ins, rtol=rtol, **eqn.params)
                    compared[0] += 1
                out = reference(eqn.primitive, *ins, **eqn.params)
                outs = list(out) if eqn.primitive.multiple_results else [out]
            for v, o in zip(eqn.outvars, outs):
                env[v] = np.asarray(o)
        return [read(v) for v in jaxpr.outvars]

    evaluate(closed.jaxpr, closed.consts, host_args)
    return compared[0]

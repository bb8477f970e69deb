"""plax's generated kernels keep float32 subnormals on the GPU (issue 24).

CuPy's ``RawModule(code=...)`` appends ``-ftz=true`` to every NVRTC compile, which flushes
float32 subnormals to zero; NumPy and XLA keep them. plax compiles its kernels itself
(:func:`plax_cupy.nvrtc.compile_binary`, :data:`plax_cupy.nvrtc.DEVICE_OPTIONS`) and loads the
binary with ``RawModule(path=...)``. Checked here:

* with real NVRTC (no GPU needed): a generated kernel compiled with plax's options has no
  ``.ftz`` instruction in its PTX; with ``-ftz=true`` added it has (the check can fail);
* on the simulated GPU, whose NVRTC records the options of every compile and whose modules
  compiled with ``-ftz=true`` run with x86's flush-to-zero mode on: every kernel plax compiled
  went through its own NVRTC call with ``-ftz=false``, none through CuPy's; a float32 subnormal
  survives ``x * 1``, ``x + 0``, ``abs``, ``where`` in a fused kernel, bit for bit NumPy's; and
  the same kernel loaded through ``RawModule(code=...)`` flushes it (x86 hosts);
* the device target (cubin or PTX) and what the simulation refuses as CUDA does.
"""
from __future__ import annotations

import platform
import shutil

import numpy as np
import pytest

from gpu_env import NVRTC_PROBLEM
from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu

#: float32 subnormals (the smallest, one near the normal range's edge) and normal neighbours
SUBNORMALS = np.array([1e-45, -3e-39, 1.1754942e-38, 0.5, -2.0], np.float32)


def _program(x):
    import plax.numpy as jnp
    # (x > 0 keeps where's operands live so it is not folded into a copy)
    return x * 1.0, x + 0.0, jnp.abs(x), jnp.where(x > 0, x, -x)


def _expected(h):
    return h * np.float32(1.0), h + np.float32(0.0), np.abs(h), np.where(h > 0, h, -h)


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    # skipped there: this launcher and the two real-NVRTC checks
    run_file_on_simulated_gpu(__file__, skipped=3)


@pytest.mark.skipif(SIMULATED or bool(NVRTC_PROBLEM), reason=NVRTC_PROBLEM or "simulated NVRTC")
def test_the_device_options_compile_no_flush_to_zero_instruction():
    import plax
    from plax_cupy import codegen, nvrtc
    from kernel_source_util import clusters_of, inline_calls
    closed = plax.make_jaxpr(_program)(SUBNORMALS)
    plans = [codegen.plan_cluster(c) for c in clusters_of(inline_calls(closed.jaxpr))]
    assert plans, "the program made no generated kernel"
    for plan in plans:
        ptx = nvrtc.compile_binary(plan.source, nvrtc.DEVICE_OPTIONS + ("-arch=compute_80",),
                                   "ptx").decode()
        assert ".f32" in ptx, ptx
        assert ".ftz" not in ptx, [line for line in ptx.splitlines() if ".ftz" in line][:5]
    flushing = nvrtc.compile_binary(plans[0].source, nvrtc.DEVICE_OPTIONS + (
        "-arch=compute_80", "-ftz=true"), "ptx").decode()
    assert ".ftz" in flushing   # what CuPy's RawModule(code=...) compiles


def test_device_target():
    from plax_cupy import nvrtc
    assert nvrtc.device_target(90, [75, 80, 86, 89, 90]) == ("-arch=sm_90", "cubin")
    assert nvrtc.device_target(86, [75, 80, 86]) == ("-arch=sm_86", "cubin")
    # a device newer than NVRTC: PTX of the newest architecture below it (the driver JITs it)
    assert nvrtc.device_target(120, [75, 80, 90, 100]) == ("-arch=compute_100", "ptx")
    with pytest.raises(nvrtc.CompileError, match="none at or below the device's compute capability 70"):
        nvrtc.device_target(70, [75, 80])
    assert nvrtc.DEVICE_OPTIONS.count("-ftz=false") == 1
    assert not any(o.startswith("-ftz=true") or o == "--use_fast_math" for o in nvrtc.DEVICE_OPTIONS)


@pytest.fixture
def fresh_kernels(monkeypatch, tmp_path):
    """An empty kernel cache, on disk and in memory: every kernel is compiled anew."""
    from plax_cupy import kernel_modules
    monkeypatch.setenv("PLAX_CUPY_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setattr(kernel_modules, "_modules", {})


@on_simulated_gpu
def test_subnormals_survive_a_fused_kernel(fresh_kernels):
    import plax
    import plax_cupy
    import fake_nvrtc
    start = len(fake_nvrtc.COMPILES)
    x = plax.device_put(SUBNORMALS, plax.devices("gpu")[0])
    with plax_cupy.count() as c:
        out = plax.jit(_program)(x)
    assert c.host_fallbacks == 0, c.fallbacks
    for got, want in zip(out, _expected(SUBNORMALS)):
        np.testing.assert_array_equal(np.asarray(got).view(np.uint32), want.view(np.uint32))
    assert np.asarray(out[0])[0] != 0   # (1e-45 is 2**-149: kept, not flushed)
    compiled = fake_nvrtc.COMPILES[start:]
    assert compiled, "the program compiled no kernel"
    for record in compiled:
        assert record["via"] == "nvrtc", "a plax kernel compiled through cupy.RawModule(code=...)"
        assert fake_nvrtc.flushes_subnormals(record["options"]) is False, record["options"]
        assert "-ftz=false" in record["options"], record["options"]


@on_simulated_gpu
def test_no_plax_kernel_reaches_nvrtc_with_ftz(fresh_kernels):
    # eager kernels, a special function's, the PRNG's, a program's: every compile so far
    import plax
    import plax.numpy as jnp
    from plax import lax, random
    import fake_nvrtc
    gpu = plax.devices("gpu")[0]
    x = plax.device_put(np.linspace(0.1, 2.0, 8, dtype=np.float32), gpu)
    np.asarray(lax.lgamma(x))
    np.asarray(random.normal(random.PRNGKey(0), (8,)))
    np.asarray(plax.jit(lambda x: jnp.tanh(x) * 2.0 + jnp.sum(x))(x))
    assert len(fake_nvrtc.COMPILES) >= 2
    bad = [r["options"] for r in fake_nvrtc.COMPILES
           if r["via"] != "nvrtc" or fake_nvrtc.flushes_subnormals(r["options"])]
    assert not bad, bad


@on_simulated_gpu
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64", "i686", "i386"),
                    reason="the simulation flushes subnormals with x86's MXCSR modes only")
def test_kernels_compiled_by_cupy_flush_subnormals(monkeypatch):
    # the negative control: built as before (the source handed to cupy.RawModule(code=...),
    # which adds -ftz=true), the same program flushes the subnormals, so the test above can fail
    import cupy
    import plax
    from plax_cupy import kernel_modules
    import fake_nvrtc

    def cupy_compiles(key, entries):
        source, options, device_id = key
        built = cupy.RawModule(code=source, options=("--std=c++17",))
        for name in entries:
            built.get_function(name)
        return kernel_modules._modules.setdefault(key, built)
    monkeypatch.setattr(kernel_modules, "_modules", {})
    monkeypatch.setattr(kernel_modules, "_build", cupy_compiles)
    start = len(fake_nvrtc.COMPILES)
    x = plax.device_put(SUBNORMALS, plax.devices("gpu")[0])
    out = [np.asarray(o) for o in plax.jit(lambda x: _program(x))(x)]   # (a program of its own)
    assert [r["via"] for r in fake_nvrtc.COMPILES[start:]] and \
        all(r["via"] == "cupy" and "-ftz=true" in r["options"] for r in fake_nvrtc.COMPILES[start:])
    subnormal = np.abs(SUBNORMALS) < np.finfo(np.float32).tiny
    # x * 1 and x + 0 (x86's modes flush arithmetic; a GPU's abs.ftz/neg.ftz flush abs and
    # where's negation too, which x86's sign-bit operations do not)
    for got, want in zip(out[:2], _expected(SUBNORMALS)[:2]):
        assert np.all(got[subnormal] == 0), got        # flushed
        np.testing.assert_array_equal(got[~subnormal], want[~subnormal])


@on_simulated_gpu
def test_the_simulation_refuses_what_cuda_refuses(tmp_path):
    import cupy
    import fake_cupy
    import fake_nvrtc
    from plax_cupy import nvrtc
    with pytest.raises(TypeError, match="Exactly one of `code` and `path`"):
        cupy.RawModule()
    with pytest.raises(TypeError, match="Exactly one of `code` and `path`"):
        cupy.RawModule(code="x", path="y")
    with pytest.raises(fake_nvrtc.NVRTCError, match="INVALID_OPTION"):
        fake_nvrtc.compileProgram(fake_nvrtc.createProgram("", "k.cu", [], []), ["-ftz=maybe"])
    with pytest.raises(nvrtc.CompileError, match="INVALID_INPUT"):   # no cubin of a virtual arch
        nvrtc.compile_binary("", ("-arch=compute_80",), "cubin")
    junk = tmp_path / "junk.cubin"
    junk.write_bytes(b"not a cubin")
    with pytest.raises(fake_cupy.CUDADriverError, match="INVALID_IMAGE"):
        cupy.RawModule(path=str(junk))
    newer = tmp_path / "k90.cubin"   # the simulated device is sm_80
    newer.write_bytes(nvrtc.compile_binary("", ("-arch=sm_90",), "cubin"))
    with pytest.raises(fake_cupy.CUDADriverError, match="NO_BINARY_FOR_GPU"):
        cupy.RawModule(path=str(newer))


#: float32 subnormals along a row, for the plax-compiled row kernels (plax_cupy.kernels_rows)
ROW = np.array([[3e-39, 1e-45, 0.0, -1e-45, 2e-39, 0.5],
                [0.0, 1e-45, -3e-39, 1.0, 1.1754942e-38, -2e-45]], np.float32)


def _row_expected():
    # NumPy float32 (subnormal sums and products by these factors are exact)
    scaled = np.where(np.abs(ROW) < 1e-30, ROW, np.float32(1.0))   # products stay subnormal
    return {
        "cumsum": np.cumsum(ROW, axis=1, dtype=np.float32),
        "cumsum_reverse": np.cumsum(ROW[:, ::-1], axis=1, dtype=np.float32)[:, ::-1],
        "cumsum_axis0": np.cumsum(ROW, axis=0, dtype=np.float32),
        "cumprod": np.cumprod(np.where(np.arange(6) == 0, np.float32(1.0), scaled) * np.float32(0.5) + ROW * 0,
                              axis=1, dtype=np.float32),
        "cummax": np.maximum.accumulate(-np.abs(ROW), axis=1),
        "cummin": np.minimum.accumulate(np.abs(ROW), axis=1),
        "argmax": np.argmax(ROW[:, :4], axis=1),
        "argmin": np.argmin(ROW[:, :4], axis=1),
    }


def _row_program(x):
    from plax import lax
    scaled = lax.select(lax.abs(x) < 1e-30, x, lax.full_like(x, 1.0))
    first = lax.broadcasted_iota(np.int32, x.shape, 1) == 0
    factors = lax.select(first, lax.full_like(x, 1.0), scaled) * 0.5 + x * 0
    return {
        "cumsum": lax.cumsum(x, axis=1),
        "cumsum_reverse": lax.cumsum(x, axis=1, reverse=True),
        "cumsum_axis0": lax.cumsum(x, axis=0),
        "cumprod": lax.cumprod(factors, axis=1),
        "cummax": lax.cummax(-lax.abs(x), axis=1),
        "cummin": lax.cummin(lax.abs(x), axis=1),
        "argmax": lax.argmax(x[:, :4], 1, np.int32),
        "argmin": lax.argmin(x[:, :4], 1, np.int32),
    }


@on_simulated_gpu
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_subnormals_survive_cumulative_ops_and_argmax(fresh_kernels, jitted):
    # these ran as CuPy's own kernels (flushing); now plax-compiled row kernels
    import plax
    import plax_cupy
    import fake_nvrtc
    start = len(fake_nvrtc.COMPILES)
    x = plax.device_put(ROW, plax.devices("gpu")[0])
    with plax_cupy.count() as c:
        out = (plax.jit(_row_program) if jitted else _row_program)(x)
    assert c.host_fallbacks == 0, c.fallbacks
    want = _row_expected()
    for name, got in out.items():
        got = np.asarray(got)
        if name.startswith("arg"):
            np.testing.assert_array_equal(got, want[name], err_msg=name)
        else:
            np.testing.assert_array_equal(got.view(np.uint32), want[name].view(np.uint32), err_msg=name)
    # (flushed, 3e-39 + 1e-45 would be 0 and every operand of argmin's rows a zero: index 0)
    assert np.asarray(out["cumsum"])[0, 1] != 0 and list(np.asarray(out["argmin"])) == [3, 2]
    assert all(r["via"] == "nvrtc" and "-ftz=false" in r["options"]
               for r in fake_nvrtc.COMPILES[start:])


@on_simulated_gpu
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64", "i686", "i386"),
                    reason="checked beside the x86 control above")
def test_cupys_own_scan_and_argmax_flush_subnormals():
    # the negative control: CuPy's kernels (the previous path) flush, so the test above can fail
    import cupy
    x = cupy.asarray(ROW)
    assert np.all(cupy.asnumpy(cupy.cumsum(x, axis=1))[0, :2] == np.float32(3e-39) * 0 + [0, 0])
    assert list(cupy.asnumpy(cupy.argmin(x[:, :4], axis=1))) == [0, 0]


@on_simulated_gpu
def test_table_kernels_of_nextafter_and_clamp_keep_subnormals():
    # the kernel table's own nextafter and clamp (the paths beside the generated kernels) are
    # plax-compiled too: from zero nextafter steps to the smallest subnormal, and clamp passes
    # a subnormal between its bounds (CuPy's nextafter/maximum/minimum flush both to zero)
    import cupy
    from plax import lax
    from plax_cupy import kernels
    table = kernels.impls()
    zeros = np.zeros(3, np.float32)
    towards = np.array([1.0, -1.0, 0.0], np.float32)
    got = cupy.asnumpy(table[lax.nextafter_p](cupy.asarray(zeros), cupy.asarray(towards)))
    np.testing.assert_array_equal(got.view(np.uint32),
                                  np.nextafter(zeros, towards).view(np.uint32))
    x = cupy.asarray(SUBNORMALS)
    lo, hi = cupy.asarray(np.float32(-2e-39)), cupy.asarray(np.float32(1.0))
    got = cupy.asnumpy(table[lax.clamp_p](lo, x, hi))
    want = np.minimum(np.maximum(SUBNORMALS, np.float32(-2e-39)), np.float32(1.0))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@on_simulated_gpu
def test_cupys_comparisons_flush_their_operands():
    # CuPy compiles float32 comparisons to setp.<op>.ftz.f32 (test_comparisons_compile_to_ftz
    # below, with NVRTC): a subnormal compares equal to zero; the simulation does the same
    import cupy
    x = cupy.asarray(np.array([1e-39, -1e-39, 0.5], np.float32))
    zero = cupy.asarray(np.zeros(3, np.float32))
    assert cupy.asnumpy(x > zero).tolist() == [False, False, True]
    assert cupy.asnumpy(x == 0).tolist() == [True, True, False]
    assert cupy.asnumpy(cupy.less(x, zero)).tolist() == [False, False, False]
    z = cupy.asarray(np.array([1e-39j, 1 + 0j], np.complex64))
    assert cupy.asnumpy(z == 0).tolist() == [True, False]
    wide = cupy.asarray(np.array([1e-39], np.float64))   # float64 never flushes
    assert cupy.asnumpy(wide > 0).tolist() == [True]


@pytest.mark.skipif(SIMULATED or bool(NVRTC_PROBLEM), reason=NVRTC_PROBLEM or "simulated NVRTC")
def test_comparisons_compile_to_ftz():
    # what the simulation above models: CuPy's comparison kernels under its -ftz=true
    from plax_cupy import nvrtc
    source = """extern "C" __global__ void cmp(const float* a, const float* b, bool* out) {
      const int i = threadIdx.x; out[i] = a[i] < b[i]; }"""
    options = tuple(o for o in nvrtc.NVRTC_OPTIONS if not o.startswith("-ftz")) + ("-ftz=true",)
    assert "setp.lt.ftz.f32" in nvrtc.compile_ptx(source, options=options)


@on_simulated_gpu
def test_half_nextafter_table_kernel_steps_the_bits():
    # float16 and bfloat16 nextafter is one plax-compiled kernel on the bits: a bfloat16
    # subnormal (a float32 subnormal once widened) steps to its neighbour; CuPy's comparisons
    # of the widened values took it for zero and stepped from zero instead
    import cupy
    import ml_dtypes
    from plax import lax
    from plax_cupy import kernels
    from plax_cupy.backend import Bf16Buffer
    fn = kernels.impls()[lax.nextafter_p]
    bf16 = np.dtype(ml_dtypes.bfloat16)
    x = np.array([1e-39, -1e-39, 1e-39, 0.0, 0.0, 1.0, np.nan, 2.0], np.float32).astype(bf16)
    y = np.array([1.0, -1.0, 0.0, -1.0, 0.0, 2.0, 1.0, np.inf], np.float32).astype(bf16)
    out = fn(Bf16Buffer(cupy.asarray(x.view(np.uint16))), Bf16Buffer(cupy.asarray(y.view(np.uint16))))
    got = cupy.asnumpy(out.bits)
    steps = {0: x.view(np.uint16)[0] + 1, 1: x.view(np.uint16)[1] + 1, 2: x.view(np.uint16)[2] - 1,
             3: 0x8001, 4: 0x0000, 5: x.view(np.uint16)[5] + 1, 7: x.view(np.uint16)[7] + 1}
    for i, bits in steps.items():
        assert got[i] == bits, (i, hex(got[i]), hex(bits))
    assert np.isnan(got.view(bf16)[6].astype(np.float32))
    h = np.array([6e-8, -6e-8, 0.0, 1.0, 65504.0], np.float16)
    t = np.array([1.0, 0.0, -1.0, 0.0, 0.0], np.float16)
    got = cupy.asnumpy(fn(cupy.asarray(h), cupy.asarray(t)))
    np.testing.assert_array_equal(got.view(np.uint16), np.nextafter(h, t).view(np.uint16))

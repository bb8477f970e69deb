"""The host build of generated kernels (``plax_cupy.nvrtc.compile_host``, which the simulated
GPU and the host value checks use) takes the preamble's standard headers from a precompiled
header, and builds without one where the compiler cannot make it."""
from __future__ import annotations

import ctypes
import os
import shutil

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++)")


def test_precompiled_header_is_built_once_and_the_kernel_computes(tmp_path, monkeypatch):
    from plax_cupy import codegen, nvrtc
    monkeypatch.setattr(nvrtc, "_precompiled", {})
    options = nvrtc._precompiled_header("g++", "PLAX_HOST", str(tmp_path))
    assert options[0] == "-include" and os.path.exists(options[1] + ".gch"), options
    assert nvrtc._precompiled_header("g++", "PLAX_HOST", str(tmp_path)) is options  # memoised
    source = codegen.PREAMBLE + (
        '\nextern "C" void hyp(double* out, double x) { *out = std::sqrt(x * x + 1.0); }\n')
    lib = nvrtc.compile_host(source, workdir=str(tmp_path))
    lib.hyp.argtypes = [ctypes.c_void_p, ctypes.c_double]
    out = np.zeros(1)
    lib.hyp(out.ctypes.data, 3.0)
    assert out[0] == np.sqrt(10.0)
    # a source beginning with the preamble takes the preamble itself precompiled (a second
    # header, built once) and builds only its own lines
    preamble = nvrtc._precompiled_header("g++", "PLAX_HOST", str(tmp_path), codegen.PREAMBLE)
    assert preamble != options and open(preamble[1]).read() == codegen.PREAMBLE
    assert len(list(tmp_path.glob("pch*.h.gch"))) == 2
    other = nvrtc.compile_host(source + 'extern "C" int two() { return 2; }\n',
                               workdir=str(tmp_path))
    assert other.two() == 2 and len(list(tmp_path.glob("pch*.h.gch"))) == 2


def test_messages_of_a_kernel_after_the_preamble_give_its_line_in_the_source(tmp_path):
    from plax_cupy import codegen, nvrtc
    source = codegen.PREAMBLE + "\nint fine = 1;\nint broken = ;\n"
    line = source.splitlines().index("int broken = ;") + 1
    with pytest.raises(nvrtc.CompileError, match=f":{line}:"):
        nvrtc.compile_host(source, workdir=str(tmp_path))


def test_a_compiler_that_cannot_precompile_builds_without(tmp_path, monkeypatch):
    from plax_cupy import nvrtc
    monkeypatch.setattr(nvrtc, "_precompiled", {})
    assert nvrtc._precompiled_header(str(tmp_path / "no-such-compiler"), "PLAX_HOST",
                                     str(tmp_path)) == []


def _links(monkeypatch) -> list:
    """The ``(linker alone?, output)`` of each link :func:`compile_host` makes from now on."""
    from plax_cupy import nvrtc
    real, seen = nvrtc._link_shared, []

    def recording(compiler, obj, out, driver=False):
        real(compiler, obj, out, driver)
        seen.append((not driver and bool(nvrtc.linker_of(compiler)), out))
    monkeypatch.setattr(nvrtc, "_link_shared", recording)
    return seen


def test_kernels_are_linked_by_the_linker_alone(tmp_path, monkeypatch):
    # (not through the compiler's driver, which adds the C++ runtime the code never calls)
    from plax_cupy import codegen, nvrtc
    links = _links(monkeypatch)
    source = codegen.PREAMBLE + (
        '\nextern "C" float th(float x) { return tanhf(x) + std::erf(x); }\n')
    lib = nvrtc.compile_host(source, workdir=str(tmp_path))
    lib.th.argtypes, lib.th.restype = [ctypes.c_float], ctypes.c_float
    np.testing.assert_allclose(lib.th(0.5), np.tanh(0.5) + 0.5204998778130465, rtol=1e-6)
    alone = bool(nvrtc.linker_of(os.environ.get("CXX", "g++")))
    assert [a for a, _ in links] == [alone]
    assert not list(tmp_path.glob("*.o")) and not list(tmp_path.glob("*.tmp"))


def test_code_needing_the_cpp_runtime_is_linked_again_by_the_driver(tmp_path, monkeypatch):
    # operator new is in libstdc++, which the process has not loaded: the library the linker
    # alone made does not load, so it is built again and linked by the driver
    from plax_cupy import nvrtc
    links = _links(monkeypatch)
    source = ('extern "C" int made() { int* p = new int[3]; p[2] = 7; int v = p[2]; '
              'delete[] p; return v; }\n')
    lib = nvrtc.compile_host(source, workdir=str(tmp_path))
    assert lib.made() == 7
    alone = bool(nvrtc.linker_of(os.environ.get("CXX", "g++")))
    assert [a for a, _ in links] == ([True, False] if alone else [False])
    assert nvrtc.compile_host(source, workdir=str(tmp_path)).made() == 7  # cached, loads

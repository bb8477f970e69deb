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

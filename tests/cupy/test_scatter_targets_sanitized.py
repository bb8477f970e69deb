"""The scatter's target kernel (``plax_cupy.kernels_indexing.scatter_targets_source``) with the
extreme int64 and uint64 starts, built for the host as the simulated GPU builds it
(``-DPLAX_SIM``, the host flags of ``plax_cupy.nvrtc``) plus ``-fsanitize=undefined``: every
start far out of bounds is dropped (``FILL_OR_DROP``, ``PROMISE_IN_BOUNDS``) or clamped
(``CLIP``) as the NumPy backend's reference rule says, and no offset computed on the way
overflows (signed overflow is undefined behaviour in C++: a compiler may fold it into a wrong
in-bounds write). ``nvrtc.compile_host`` takes no extra flag, so the test calls g++ itself."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++)")

#: the operand (10, 4), one index per update, a window of one row (stride 4: a start of 2^62
#: or more overflows ``start * 4`` in ``long long``)
_SHAPE, _WINDOW = (10, 4), (1, 4)
_STARTS = {np.int64: [np.iinfo(np.int64).max, np.iinfo(np.int64).min, 2**62, -1, 3, 9, 10,
                      -(2**62)],
           np.uint64: [2**64 - 1, 2**63, 2**62, 3, 9, 10, 2**63 - 1]}


def _build(source: str, workdir) -> ctypes.CDLL:
    """``source`` built for the simulated GPU's host with the undefined-behaviour sanitizer."""
    from plax_cupy import codegen, nvrtc
    src, lib = os.path.join(workdir, "targets.cpp"), os.path.join(workdir, "targets.so")
    with open(src, "w") as f:
        f.write(codegen.PREAMBLE + source)
    subprocess.run(["g++", "-DPLAX_SIM", *nvrtc.HOST_FLAGS, "-fsanitize=undefined", "-shared",
                    "-o", lib, src], check=True, capture_output=True, text=True)
    return ctypes.CDLL(lib)


def _reference(starts, mode: str) -> np.ndarray:
    """The flat target of each update element (index major, then the window), -1 dropped:
    the rule in Python integers (clamped to [0, 9] under clip, else dropped out of it)."""
    targets = []
    for s in starts:
        inside = 0 <= int(s) <= _SHAPE[0] - 1
        row = min(max(int(s), 0), _SHAPE[0] - 1)
        targets += [row * _SHAPE[1] + w if inside or mode == "clip" else -1
                    for w in range(_SHAPE[1])]
    return np.array(targets, np.int64)


@pytest.mark.parametrize("index_dtype", [np.int64, np.uint64], ids=["int64", "uint64"])
def test_far_out_of_bounds_starts_drop_or_clamp_without_overflow(index_dtype, tmp_path, capfd):
    from plax.lax.slicing import GatherScatterMode, ScatterDimensionNumbers
    from plax_cupy.kernels_indexing import scatter_targets_source
    dn = ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                 scatter_dims_to_operand_dims=(0,))
    indices = np.array(_STARTS[index_dtype], index_dtype).reshape(-1, 1)
    m = indices.shape[0] * _SHAPE[1]
    for mode, name in ((GatherScatterMode.FILL_OR_DROP, "fill"),
                       (GatherScatterMode.PROMISE_IN_BOUNDS, "promise"),
                       (GatherScatterMode.CLIP, "clip")):
        workdir = tmp_path / name
        workdir.mkdir()
        lib = _build(scatter_targets_source(_SHAPE, indices.shape, indices.dtype, _WINDOW,
                                            dimension_numbers=dn, mode=mode), str(workdir))
        lib.plax_sim_block.argtypes = [ctypes.c_uint, ctypes.c_uint]
        lib.plax_scatter_targets.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong]
        targets = np.full(m, -7, np.int64)
        lib.plax_sim_block(0, 1)   # (one block of one thread: the grid-stride loop does all)
        lib.plax_scatter_targets(indices.ctypes.data, targets.ctypes.data, m)
        np.testing.assert_array_equal(targets, _reference(indices.ravel(), name), err_msg=name)
        reported = capfd.readouterr().err
        assert "runtime error" not in reported, f"{name}: {reported}"

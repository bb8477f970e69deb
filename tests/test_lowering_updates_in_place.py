"""Updates written into their dead operand by the lowering driver's ``out=`` seam
(:func:`plax.lowering.updates_in_place`, :func:`plax.lowering.update_target`): in a jitted
program on the NumPy and Numba backends, a ``scatter`` or ``dynamic_update_slice`` whose
operand the program computed and reads no more is handed that operand as ``out=`` and writes
into it; the caller's arrays, operands still read later (directly or through a view), and
update values that share the operand's memory keep the copy. Values equal NumPy's."""
from __future__ import annotations

import re

import numpy as np
import pytest

import plax
from plax import lax
from plax.lowering import takes_out, update_target, updates_in_place

BACKENDS = ["numpy", pytest.param("numba", marks=pytest.mark.skipif(
    __import__("importlib").util.find_spec("numba") is None, reason="numba is not installed"))]


def _program(x, v, i):
    y = (x * 2.0).at[i].set(v)                        # the product: the program's own, dead
    z = lax.dynamic_update_slice(y, v[None, :3], (1, 0))
    w = z.at[0].set(x[0])                             # x is the caller's: copied
    kept = w * 1.0
    late = kept[2:4]                                  # a view of kept, read after the update
    u = kept.at[3].add(v)
    shifted = u.at[5:7].set(u[4:6])                   # update values read from the operand
    return shifted, late + 0.0, x.at[1].add(1.0)


def _want(x, v, i):
    y = x * np.float32(2.0)
    y[i] = v
    y[1, :3] = v[:3]
    y[0] = x[0]
    late = y[2:4].copy()
    u = y.copy()
    u[3] += v
    shifted = u.copy()
    shifted[5:7] = u[4:6]
    x1 = x.copy()
    x1[1] += 1.0
    return shifted, late, x1


@pytest.mark.parametrize("backend", BACKENDS)
def test_dead_operands_are_updated_in_place_and_values_are_numpys(backend):
    x = np.arange(40000.0, dtype=np.float32).reshape(200, 200) / 7   # (the per-equation program)
    v = np.linspace(-1, 1, 200, dtype=np.float32)
    before = x.copy()
    f = plax.jit(_program, backend=backend)
    for got, want in zip(f(x, v, np.int32(3)), _want(x, v, 3)):
        np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(x, before)
    text = f.lower(x, v, np.int32(3)).compile().as_text()
    handed = re.findall(r"= (_f\d+)\((v\d+), .*out=(v\d+)\)", text)
    # every update is handed its operand (kept's view `late` is read before kept's update:
    # plax.lowering.reads_before_updates), and the `* 1.0` ufunc its own; `shifted` reads
    # its values from its operand, so update_target copies there
    assert len(handed) == 6 and all(op == out for _, op, out in handed), text
    assert "out=v0" not in text and "out=a0" not in text   # (never the caller's x)


def test_a_kernel_that_updates_in_place():
    @updates_in_place
    def put(x, v, *, at, out=None):
        y = update_target(x, out, v)
        y[at] = v
        return y
    x = np.zeros(5, np.float32)
    assert takes_out(put) and not takes_out(lambda x: x)
    assert put(x, 1.0, at=0, out=x) is x and x[0] == 1.0
    assert put(x, 2.0, at=1) is not x and x[1] == 0.0          # no out: a copy
    assert put(x, x[2:4], at=slice(0, 2), out=x) is not x      # its values share x's memory
    read_only = np.zeros(3)
    read_only.setflags(write=False)
    assert put(read_only, 1.0, at=0, out=read_only) is not read_only
    strided = np.zeros(10)[::2]
    assert put(strided, 1.0, at=0, out=strided) is not strided

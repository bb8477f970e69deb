"""Updates of loop carries written in place in the Numba backend's native loops
(``plax_numba.wholegen._update_in_place``): ``x.at[i].set(v)`` or ``dynamic_update_slice``
whose operand is an array carry and whose value is its new value copies the carry once per
loop, not once per step, where nothing reads the old value afterwards; where something does
(another carry's new value, an operation on both the old and the new value) the step
keeps its copy; reads of the old value traced after the update are scheduled before it
(:func:`plax.lowering.reads_before_updates`). Values are the NumPy backend's bit for bit, and the caller's arrays are
never written.

One program holds every case, so the file compiles one kernel (numba compiles slowly here).
"""
from __future__ import annotations

import re
import warnings

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp


def _program(x, rows, m, v):
    def body(i, c):
        x, rows, m, kept, sw, acc = c
        # in place: reads of the old x (through a row view) come before the update
        x = x.at[i].set(v * i + x[i - 1])
        # in place: a window written by dynamic_update_slice; the old value's read, traced
        # after the update, is scheduled before it (plax.lowering.reads_before_updates)
        old_rows = rows
        rows = lax.dynamic_update_slice(rows, (v[:2] * i)[None], (i % rows.shape[0], 0))
        acc = acc + old_rows[0, 1]
        # copies: the old m is another carry's new value
        kept, m = m, m.at[i % 4].add(1.0)
        # in place, both: a swap of two elements read first, two updates in a row
        a, b = i % 6, (i * 5 + 1) % 6
        first, second = sw[a], sw[b]
        sw = sw.at[a].set(second).at[b].set(first)
        return x, rows, m, kept, sw, acc + x[i, 0] * x[i, 3]
    out = lax.fori_loop(1, x.shape[0], body,
                        (x, rows, m, m * 2, jnp.concatenate([v, v[:2]]) + 0.5,
                         jnp.float32(0)))

    def step(c, i):
        # copies: the old value is read together with the new one
        new = c.at[i].set(c[i] * 3.0 + 1.0)
        return new, (c * new)[i] + c[0, 1]
    last, ys = lax.scan(step, x[:5], jnp.arange(5))
    return out + (last, ys)


def _updates(text: str) -> tuple[int, int]:
    """(updates written in place, updates copying their operand) in a kernel's source."""
    in_place = len(re.findall(r"= [a-z]+\d+  # update$", text, re.M))
    copies = len(re.findall(r"\.copy\(\)  # update$", text, re.M))
    return in_place, copies


def test_carry_updates_are_in_place_where_nothing_reads_the_old_value():
    from plax.lowering import PlaxFallbackWarning
    rng = np.random.default_rng(3)
    args = (rng.standard_normal((12, 4)).astype(np.float32),
            rng.standard_normal((3, 2)).astype(np.float32),
            rng.standard_normal((4, 3)).astype(np.float32),
            rng.standard_normal(4).astype(np.float32))
    before = [a.copy() for a in args]
    native = plax.jit(_program, backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)  # PlaxNativeLoopWarning included
        got = native(*args)
        got_again = native(*args)   # (the carries' first buffers were the inputs' copies)
    text = native.lower(*args).compile().as_text()
    assert _updates(text) == (4, 2), text
    want = plax.jit(_program, backend="numpy")(*args)
    for g, a, w in zip(got, got_again, want):
        g, a, w = np.asarray(g), np.asarray(a), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(a, w)
    for arg, old in zip(args, before):
        np.testing.assert_array_equal(arg, old)

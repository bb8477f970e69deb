"""Derivatives at non-smooth points (ties, bounds, zeros), where finite differences cannot
decide: forward and reverse derivatives must match real JAX's conventions (averaging over
ties, clamp's one-sided bounds, ``0 ** 0``, ...). JAX's answers are recorded in
``jax_answers.json`` (by ``record_jax_answers.py``), so JAX need not be installed."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax

from .harness import assert_same, jax_answers, on_each_device, to_arrays

F = np.float32


def arr(*v):
    return np.array(v, F)


# (label, f(L) -> function of arrays written against lax module L, arguments)
CASES = [
    ("max tie", lambda L: lambda x, y: L.max(x, y), (arr(1, 2, 3), arr(1, 0, 3))),
    ("min tie", lambda L: lambda x, y: L.min(x, y), (arr(1, 2, 3), arr(1, 0, 3))),
    ("reduce_max ties", lambda L: lambda x: L.reduce_max(x, (0,)), (arr(1, 3, 3, 2),)),
    ("reduce_min ties", lambda L: lambda x: L.reduce_min(x, (1,)),
     (np.array([[1, 1, 2], [0, 4, 0]], F),)),
    ("clamp at bounds", lambda L: lambda lo, x, hi: L.clamp(lo, x, hi),
     (np.zeros(5, F), arr(0, 0.5, 1, 2, -1), np.ones(5, F))),
    ("abs at zero", lambda L: lambda x: L.abs(x), (arr(0, -1, 2),)),
    ("sort ties", lambda L: lambda x: L.sort(x), (arr(2, 1, 2, 0),)),
    ("sort_key_val ties", lambda L: lambda k, v: L.sort_key_val(k, v), (arr(2, 1, 2, 1), arr(5, 6, 7, 8))),
    ("cummax ties", lambda L: lambda x: L.cummax(x, 0), (arr(1, 3, 3, 2, 3),)),
    ("cummin ties reverse", lambda L: lambda x: L.cummin(x, 0, reverse=True), (arr(1, 0, 0, 2, 0),)),
    ("cumprod zeros", lambda L: lambda x: L.cumprod(x, 0), (arr(2, 0, 3, 0, 4),)),
    ("reduce_prod zeros", lambda L: lambda x: L.reduce_prod(x, (0,)), (arr(0, 2, 0),)),
    ("reduce_prod one zero", lambda L: lambda x: L.reduce_prod(x, (0,)), (arr(3, 0, 2),)),
    ("pow at zero", lambda L: lambda x, y: L.pow(x, y), (arr(0, 0, 2, 0), arr(0, 2, 0, 0.5))),
    ("integer_pow at zero", lambda L: lambda x: L.integer_pow(x, 0), (arr(0, 1),)),
    ("rem", lambda L: lambda x, y: L.rem(x, y), (arr(5.5, -5.5, 1), arr(2, 2, -3))),
    ("sqrt at zero", lambda L: lambda x: L.sqrt(x), (arr(0, 4),)),
    ("select on ties", lambda L: lambda x, y: L.select(L.lt(x, y), x, y), (arr(1, 2), arr(1, 3))),
    ("atan2 on the axis", lambda L: lambda y, x: L.atan2(y, x), (arr(0, 1), arr(1, 0))),
]


def _flat(out):
    return [np.asarray(o, np.float64) for o in (out if isinstance(out, (list, tuple)) else [out])]


@pytest.mark.parametrize("label,make,args", CASES, ids=[c[0] for c in CASES])
def test_jvp_and_vjp_match_jax(label, make, args, backend_name):
    recorded = jax_answers()["nonsmooth"].get(label)
    assert recorded is not None and recorded["args"] == [np.asarray(a).tolist() for a in args], (
        f"{label}: no recorded JAX answer for these arguments; run "
        "python -m plax.testing.conformance.record_jax_answers where JAX is installed")
    tangents = [np.asarray(t, F) for t in recorded["tangents"]]
    cts = [np.asarray(c, F) for c in recorded["cotangents"]]
    f = make(lax)

    def check():
        _, t_out = plax.jvp(f, to_arrays(args), to_arrays(tangents))
        got = _flat(t_out)
        assert len(got) == len(recorded["jvp"]), f"{label}: jvp gave {len(got)} outputs"
        for a, b in zip(got, recorded["jvp"]):
            assert_same(a, np.asarray(b, F), np.float32, what=f"{label}: jvp")
        out, f_vjp = plax.vjp(f, *to_arrays(args))
        ct = type(out)(to_arrays(cts)) if isinstance(out, (list, tuple)) else to_arrays(cts)[0]
        got = _flat(f_vjp(ct))
        assert len(got) == len(recorded["vjp"]), f"{label}: vjp gave {len(got)} cotangents"
        for a, b in zip(got, recorded["vjp"]):
            assert_same(a, np.asarray(b, F), np.float32, what=f"{label}: vjp")

    on_each_device(backend_name, check)

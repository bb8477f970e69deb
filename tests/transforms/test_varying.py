"""The core's varying-axes typing (plax.core.varying): what shard_map(check_vma=True) builds on.

The multi-device behaviour (gradients through collectives against references on 1, 2 and 4
devices) is in plugins/plax_pmap/tests; here the core's part alone: the aval field, the
union rule while staging, the reduction of cotangents, and jit's trace cache."""
from __future__ import annotations

import numpy as np

import plax
import plax.numpy as jnp
from plax.core import varying
from plax.core.shaped_array import ShapedArray
from plax.transforms.staging import trace_to_jaxpr

F32 = np.dtype(np.float32)
X = frozenset({"x"})


def test_vma_is_part_of_the_type():
    # as JAX 0.10's ShapedArray: avals that differ in their varying axes are unequal (they
    # hash alike: the hash is computed once, from shape, dtype and weak type)
    a, b = ShapedArray((2,), F32), ShapedArray((2,), F32, vma=X)
    assert a != b and hash(a) == hash(b) and b == ShapedArray((2,), F32, vma=X)
    assert b.str_short() == "f32[2]{V:x}" and a.str_short() == "f32[2]"
    assert b.update(shape=(3,)).vma == X and b.strip_weak_type().vma == X
    assert ShapedArray((2,), F32, True, X).strip_weak_type().vma == X


def _out_vma(fun, in_avals):
    closed, _ = trace_to_jaxpr(fun, in_avals)
    return [v.aval.vma for v in closed.jaxpr.outvars]


def test_staging_types_results_by_the_union_only_while_typing():
    avals = [ShapedArray((2,), F32, vma=X), ShapedArray((2,), F32)]

    def fun(a, b):
        return [jnp.sin(a) * b, jnp.cos(b), plax.jit(lambda u, v: (u + v, v * 2))(a, b)[1]]

    with varying.typing(("x",)):
        assert varying.active() and varying.typed_axes() == X
        assert _out_vma(fun, avals) == [X, frozenset(), frozenset()]
        with varying.typing(None):  # an untyped body inside a typed one
            assert not varying.active()
            assert _out_vma(fun, avals) == [frozenset()] * 3
    assert not varying.active() and varying.typed_axes() == frozenset()
    assert _out_vma(fun, avals) == [frozenset()] * 3


def test_jit_traces_again_under_other_varying_axes():
    traces = []
    double = plax.jit(lambda u: traces.append(1) or u * 2)
    with varying.typing(("x",)):
        plain = _out_vma(lambda a: [double(a)], [ShapedArray((2,), F32)])
        typed = _out_vma(lambda a: [double(a)], [ShapedArray((2,), F32, vma=X)])
    assert plain == [frozenset()] and typed == [X] and len(traces) == 2


class _TypedArray(np.ndarray):
    """A cotangent whose aval carries varying axes (as a tracer's does in a typed body)."""


def _typed_ones(vma: frozenset) -> np.ndarray:
    ct = np.ones(2, np.float32).view(_TypedArray)
    ct.aval = ShapedArray((2,), F32, vma=vma)
    return ct


def test_reduce_cotangent_sums_only_the_extra_axes():
    calls = []
    saved = varying._reducer[0]
    varying.register_reducer(lambda ct, axes: calls.append(axes) or ct * 10)
    try:
        ct = _typed_ones(X)
        assert varying.reduce_cotangent(ct, ShapedArray((2,), F32, vma=X)) is ct
        plain = np.ones(2, np.float32)  # an untyped cotangent: nothing to sum
        assert varying.reduce_cotangent(plain, ShapedArray((2,), F32, vma=X)) is plain
        wide = _typed_ones(X | {"y"})
        np.testing.assert_array_equal(
            varying.reduce_cotangent(wide, ShapedArray((2,), F32, vma=frozenset({"y"}))),
            np.full(2, 10.0))
        assert calls == [("x",)]
    finally:
        varying.register_reducer(saved)


def test_loop_carries_widen_to_the_body_outputs_varying_axes():
    """A scan carry that starts replicated and becomes varying is retyped and the body traced
    again, so the carry's type inside the body is the loop's (JAX asks for a pvary)."""
    seen = []

    def fun(a):
        def body(c, _):
            seen.append(c.aval.vma)
            return c + a, None
        return [plax.lax.scan(body, jnp.zeros(2), None, length=3)[0]]

    with varying.typing(("x",)):
        assert _out_vma(fun, [ShapedArray((2,), F32, vma=X)]) == [X]
    assert seen[0] == frozenset() and seen[-1] == X

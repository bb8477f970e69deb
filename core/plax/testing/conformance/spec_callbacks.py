"""Conformance specs of the host callbacks: debug_callback, pure_callback, io_callback.

Their callbacks are parameters, so a case's reference can see what the callback saw:
the debug_callback cases record the values the callback received and check them against
the operands. pure_callback and io_callback have no derivative of their own (JAX raises
ValueError); their grad cases wrap them in ``custom_jvp``, as a user must, and their cases
are kept out of the bare primitive's linearization check (``grad_operands=()``).
"""
from __future__ import annotations

import numpy as np

import plax
from plax import lax, tree_util
from plax.core.shaped_array import ShapedArray
from plax.lax.callbacks import HostCallback

from .harness import ALL, Case, GradCase, Spec, dt, rand

SHAPES = [(), (3,), (2, 3)]


def host_callback(fun, n: int, out=None) -> HostCallback:
    """``fun`` as a primitive's ``callback`` parameter: ``n`` array arguments, results of the
    tree ``out`` (None: results ignored)."""
    _, in_tree = tree_util.tree_flatten((tuple(range(n)), {}))
    out_tree = None if out is None else tree_util.tree_flatten(out)[1]
    return HostCallback(fun, in_tree, (None,) * n, out_tree)


# ------------------------------------------------------------------ debug_callback

def _debug_cases(dtype):
    cases = []
    for shape in SHAPES:
        seen: list = []
        cb = host_callback(lambda x, y, seen=seen: seen.append((np.asarray(x), np.asarray(y))), 2)

        def ref(x, y, seen=seen):
            # the callback ran (last) on exactly the operands, with their dtypes
            got_x, got_y = seen[-1]
            assert got_x.dtype == x.dtype and got_x.shape == x.shape
            np.testing.assert_array_equal(got_x, x)
            np.testing.assert_array_equal(got_y, y)
            return []

        cases.append(Case(dict(callback=cb, ordered=False),
                          lambda r, s=shape: [rand(r, s, dtype), rand(r, (2,), dtype)], ref,
                          label=f"{shape}"))
    return cases


# ------------------------------------------------------------------ pure_callback / io_callback

def _flip(x):
    return np.flip(np.asarray(x), -1) if np.ndim(x) else np.asarray(x)


def _result_cases(dtype, make_params):
    cases = []
    for shape in SHAPES:
        aval = ShapedArray(shape, dt(dtype))
        cases.append(Case(make_params(host_callback(_flip, 1, 0), (aval,), "sequential"),
                          lambda r, s=shape: [rand(r, s, dtype)], lambda x: [_flip(x)],
                          label=f"flip {shape}", grad_operands=()))
        cases.append(Case(make_params(host_callback(lambda x, y: (y, x), 2, (0, 0)),
                                      (aval, aval), "broadcast_all"),
                          lambda r, s=shape: [rand(r, s, dtype), rand(r, s, dtype)],
                          lambda x, y: [y, x], label=f"swap {shape}", grad_operands=()))
    return cases


def _pure_params(cb, avals, method):
    return dict(callback=cb, result_avals=avals, vmap_method=method)


def _io_params(cb, avals, method):
    return dict(callback=cb, result_avals=avals, ordered=False)


def _pure_sin_cos(call):
    """sin and cos computed by host callbacks (through ``call``), differentiable through
    ``custom_jvp`` rules that call each other (so every order works)."""
    S = plax.ShapeDtypeStruct

    @plax.custom_jvp
    def sin(x):
        return call(np.sin, S(np.shape(x), x.dtype), x)

    @plax.custom_jvp
    def cos(x):
        return call(np.cos, S(np.shape(x), x.dtype), x)

    sin.defjvp(lambda p, t: (sin(p[0]), cos(p[0]) * t[0]))
    cos.defjvp(lambda p, t: (cos(p[0]), -sin(p[0]) * t[0]))
    return sin, cos


def _grads(call):
    def make():
        sin, cos = _pure_sin_cos(call)
        x = np.linspace(-1.0, 1.0, 4)
        return [GradCase(lambda x: sin(x) * cos(x), (x,), x64=True, label="sin*cos"),
                GradCase(lambda x: sin(x * x), (x.reshape(2, 2),), x64=True, label="sin(x^2)")]
    return make


def _pure(f, shape_dtype, x):
    return plax.pure_callback(f, shape_dtype, x, vmap_method="sequential")


def _io(f, shape_dtype, x):
    from plax.experimental import io_callback
    return io_callback(f, shape_dtype, x)


SPECS = [
    Spec(lax.debug_callback_p, ALL, _debug_cases, nondiff=True),
    Spec(lax.pure_callback_p, ALL, lambda d: _result_cases(d, _pure_params), grads=_grads(_pure)),
    Spec(lax.io_callback_p, ALL, lambda d: _result_cases(d, _io_params), grads=_grads(_io)),
]

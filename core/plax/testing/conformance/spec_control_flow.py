"""Specs of the control-flow primitives: ``cond`` (two and three branches, the index out of
range clamped as XLA does) and ``while`` (a count-down loop swapping two values, so the
predicate depends on the carry and batched members stop at different steps).

The bodies are written per dtype (they only move values around, so every dtype is
accepted); the gradient cases use the user functions (``lax.cond``, ``lax.while_loop``) on
float math. ``while`` is differentiable in forward mode only, as in JAX.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.core.shaped_array import ShapedArray
from plax.lax.control_flow.common import trace_flat

from .harness import ALL, Case, GradCase, Spec, dt, f64, rand

SPECS: list[Spec] = []

SHAPES = [(), (3,), (2, 3), (0, 2)]


def _body(fun, avals):
    closed, captured = trace_flat(fun, avals, "a conformance body")
    assert not captured
    return closed


def _operand(rng, shape, d):
    return rand(rng, shape, d, -3, 3)


def _cond_cases(d):
    d = dt(d)
    out = []
    for shape in SHAPES:
        avals = [ShapedArray(shape, d), ShapedArray(shape, d)]
        two = (_body(lambda x, y: [y, x], avals), _body(lambda x, y: [x, x], avals))
        three = two + (_body(lambda x, y: [y, y], avals),)
        for branches, lo, hi in ((two, 0, 1), (three, -2, 4)):
            def sample(rng, shape=shape, lo=lo, hi=hi):
                return [np.asarray(rng.integers(lo, hi + 1), np.int32),
                        _operand(rng, shape, d), _operand(rng, shape, d)]

            def ref(i, x, y, n=len(branches)):
                i = min(max(int(i), 0), n - 1)
                x, y = f64(x), f64(y)
                return [[y, x], [x, x], [y, y]][i]

            out.append(Case(dict(branches=branches), sample, ref,
                            f"{len(branches)} branches {list(shape)}", grad_operands=(1, 2)))
    return out


def _cond_grads():
    rng = np.random.default_rng(0)
    x = rand(rng, (3,), np.float32, 0.5, 1.5)
    y = rand(rng, (3,), np.float32, 0.5, 1.5)

    def f(p):
        return lambda x, y: lax.cond(p, lambda x, y: lax.sin(x) * y, lambda x, y: x * x / y, x, y)

    def g(i):
        return lambda x, y: lax.switch(i, [lambda x, y: lax.exp(x) + y, lambda x, y: x * y,
                                           lambda x, y: lax.cos(y) * x], x, y)

    return ([GradCase(f(p), (x, y), label=f"cond {p}") for p in (True, False)]
            + [GradCase(g(i), (x, y), label=f"switch {i}") for i in (0, 1, 5)])


SPECS.append(Spec(lax.cond_p, ALL, _cond_cases, grads=_cond_grads))


def _while_cases(d):
    d = dt(d)
    out = []
    k_aval = ShapedArray((), np.dtype(np.int32))
    for shape in SHAPES[:3]:
        avals = [k_aval, ShapedArray(shape, d), ShapedArray(shape, d)]
        cond = _body(lambda k, x, y: [lax.gt(k, np.int32(0))], avals)
        body = _body(lambda k, x, y: [lax.sub(k, np.int32(1)), y, x], avals)

        def sample(rng, shape=shape):
            return [np.asarray(rng.integers(-1, 5), np.int32),
                    _operand(rng, shape, d), _operand(rng, shape, d)]

        def ref(k, x, y):
            x, y = f64(x), f64(y)
            n = max(int(k), 0)
            return [np.asarray(min(int(k), 0), np.int32)] + ([y, x] if n % 2 else [x, y])

        # forward-mode only: the linearization (VJP) check differentiates no operand
        out.append(Case(dict(cond_jaxpr=cond, body_jaxpr=body, cond_nconsts=0,
                             body_nconsts=0), sample, ref, f"swap {list(shape)}",
                        grad_operands=()))
    return out


def _while_grads():
    rng = np.random.default_rng(1)
    x = rand(rng, (3,), np.float32, 0.5, 1.5)

    def f(n):
        def fun(x):
            def body(c):
                i, v = c
                return i + 1, lax.sin(v) * x + v
            return lax.while_loop(lambda c: c[0] < n, body, (0, x))[1]
        return fun

    return [GradCase(f(n), (x,), label=f"{n} steps", modes=("fwd",)) for n in (0, 1, 3)]


SPECS.append(Spec(lax.while_p, ALL, _while_cases, grads=_while_grads))


def _scan_cases(d):
    d = dt(d)
    out = []
    for shape, length, reverse in [((), 3, False), ((3,), 4, True), ((2, 3), 1, False),
                                   ((2,), 0, False)]:
        s = ShapedArray(shape, d)
        # consts (a), carry (c), xs (x): the carry takes each x; ys are the old carry and a
        body = _body(lambda a, c, x: [x, c, a], [s, s, s])

        def sample(rng, shape=shape, length=length):
            return [_operand(rng, shape, d), _operand(rng, shape, d),
                    _operand(rng, (length,) + shape, d)]

        def ref(a, c, xs, reverse=reverse, length=length, shape=shape):
            a, c, xs = f64(a), f64(c), f64(xs)
            ys0 = np.zeros((length,) + shape, c.dtype)
            ys1 = np.zeros((length,) + shape, a.dtype)
            for i in (reversed(range(length)) if reverse else range(length)):
                ys0[i], ys1[i] = c, a
                c = xs[i]
            return [c, ys0, ys1]

        out.append(Case(dict(jaxpr=body, length=length, reverse=reverse, unroll=1,
                             num_consts=1, num_carry=1), sample, ref,
                        f"{list(shape)} x{length}{' reverse' if reverse else ''}"))
    return out


def _scan_grads():
    rng = np.random.default_rng(2)
    w = rand(rng, (3,), np.float32, 0.2, 0.8)
    xs = rand(rng, (4, 3), np.float32, -1, 1)

    def rnn(reverse):
        def fun(w, xs):
            def step(c, x):
                c = lax.tanh(c * w + x)
                return c, lax.sin(c) * x
            return list(lax.scan(step, w, xs, reverse=reverse))
        return fun

    def fori(w):
        return lax.fori_loop(0, 3, lambda i, c: lax.sin(c) * w + c, w)

    return [GradCase(rnn(False), (w, xs), label="rnn"),
            GradCase(rnn(True), (w, xs), label="rnn reverse"),
            GradCase(fori, (w,), label="fori_loop static")]


SPECS.append(Spec(lax.scan_p, ALL, _scan_cases, grads=_scan_grads))

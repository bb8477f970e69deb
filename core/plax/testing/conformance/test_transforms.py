"""Transform compositions: ``jit(grad)`` (compiled by the backend under test) against eager
``grad`` for every differentiable primitive, ``vmap`` of ``grad`` (and its ``jit``) against a
loop of ``grad`` for a sample, and transforms around ``iota``, the one primitive without
operands. (``jit`` of ``vmap`` runs for every primitive in ``test_primitives``.)"""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax
from plax.test_util import check_grads

from .harness import assert_same, loop_reference, on_each_device, to_arrays
from .specs import ALL_SPECS, BY_PRIMITIVE

SAMPLE = [lax.exp_p, lax.div_p, lax.pow_p, lax.max_p, lax.select_n_p, lax.clamp_p,
          lax.logistic_p, lax.broadcast_in_dim_p, lax.pad_p, lax.concatenate_p,
          lax.dynamic_update_slice_p, lax.gather_p, lax.scatter_add_p, lax.reduce_max_p,
          lax.cumprod_p, lax.sort_p, lax.dot_general_p]


def scalar_loss(fun):
    """``sum(real(outputs))``: a scalar to take ``grad`` of."""
    def loss(*args):
        out = fun(*args)
        total = 0.0
        for o in (out if isinstance(out, list) else [out]):
            if np.issubdtype(o.dtype, np.complexfloating):
                o = lax.real(o)
            total = total + lax.reduce_sum(o, tuple(range(o.ndim)))
        return total
    return loss


def first_grad_case(prim):
    case = BY_PRIMITIVE[prim].grads()[0]
    return case.fun, tuple(np.asarray(a) for a in case.args)


def _float_args(args):
    """Indices of the float arguments (the ones ``grad`` differentiates)."""
    return tuple(i for i, a in enumerate(args) if np.issubdtype(a.dtype, np.floating))


# every primitive whose first grad case has a real float argument to differentiate in
# reverse mode (``while`` is differentiable in forward mode only)
DIFFERENTIABLE = [s.prim for s in ALL_SPECS if s.grads is not None
                  and "rev" in s.grads()[0].modes
                  and _float_args(first_grad_case(s.prim)[1])]


@pytest.mark.parametrize("prim", DIFFERENTIABLE, ids=lambda p: p.name)
def test_jit_of_grad_matches_eager(prim, backend_name):
    fun, args = first_grad_case(prim)
    g = plax.grad(scalar_loss(fun), argnums=_float_args(args))
    jitted = plax.jit(g, backend=backend_name)

    def check():
        eager = g(*to_arrays(args))
        for e, j in zip(eager, jitted(*to_arrays(args))):
            assert j.dtype == e.dtype and j.shape == e.shape
            assert_same(np.asarray(j), np.asarray(e), e.dtype, tol_scale=4,
                        what=f"jit(grad({prim}))")

    on_each_device(backend_name, check)


@pytest.mark.parametrize("prim", SAMPLE, ids=lambda p: p.name)
def test_vmap_of_grad_matches_loop(prim, backend_name):
    fun, args = first_grad_case(prim)
    # batch the first argument over slightly scaled copies (keeps domains and orderings)
    stacked = np.stack([args[0] * np.asarray(1 + 0.01 * k, args[0].dtype) for k in range(3)])
    g = plax.grad(scalar_loss(fun), argnums=0)
    examples = [[stacked[k]] + list(args[1:]) for k in range(3)]
    expected = loop_reference(g, examples)[0]
    in_axes = (0,) + (None,) * (len(args) - 1)
    batched = plax.vmap(g, in_axes=in_axes)
    jitted = plax.jit(batched, backend=backend_name)

    def check():
        operands = to_arrays([stacked] + list(args[1:]))
        for how, f in (("vmap", batched), ("jit of vmap", jitted)):
            got = f(*operands)
            assert_same(np.asarray(got), expected, expected.dtype, tol_scale=4,
                        what=f"{how}(grad({prim}))")

    on_each_device(backend_name, check)


def test_iota_under_transforms(backend_name):
    xs = np.arange(12, dtype=np.float32).reshape(3, 4)

    def f(x):
        return x * lax.iota(np.float32, 4) + lax.broadcasted_iota(np.float32, (4,), 0)

    expected = loop_reference(f, [[x] for x in xs])[0]
    got = plax.vmap(f)(*to_arrays([xs]))
    assert_same(np.asarray(got), expected, np.float32, what="vmap with iota")
    got = plax.jit(plax.vmap(f), backend=backend_name)(*to_arrays([xs]))
    assert_same(np.asarray(got), expected, np.float32, what="jit(vmap) with iota")
    check_grads(f, to_arrays([xs[1]]), order=2, modes=("fwd", "rev"))
    _, t = plax.jvp(lambda x: lax.iota(np.int32, 3), (to_arrays([xs[0]])[0],),
                    (to_arrays([np.ones(4, np.float32)])[0],))
    assert np.asarray(t).dtype == plax.dtypes.float0 and np.asarray(t).shape == (3,)

"""plax.lowering.fold_scalar_constants: scalar elementwise equations of literals alone are
computed once when a program is lowered (grad's seed ``1 / n`` is not a step at every call),
with the reference kernels' values, and nothing else is touched."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.interpret import eval_jaxpr
from plax.core.jaxpr import Literal
from plax.lowering import Emitter, fold_scalar_constants, fusion_units


def _literal_only(jaxpr):
    """The scalar equations that read literals alone."""
    return [e.primitive.name for e in jaxpr.eqns if e.outvars[0].aval.shape == ()
            and e.invars and all(isinstance(v, Literal) for v in e.invars)]


class _Fusing(Emitter):
    fuses = True


def test_grad_seed_is_folded_and_no_step_of_the_program():
    f = plax.grad(lambda x: -jnp.mean(jnp.sin(x)))
    x = np.linspace(-2, 2, 7, dtype=np.float32)
    closed = plax.make_jaxpr(f)(x)
    assert _literal_only(closed.jaxpr) == ["neg"]  # the seed: neg 1.0, then div by 7.0
    folded = fold_scalar_constants(closed.jaxpr)
    assert _literal_only(folded) == [] and len(folded.eqns) == len(closed.jaxpr.eqns) - 2
    (got,) = eval_jaxpr(folded, closed.consts, x)
    np.testing.assert_allclose(np.asarray(got), -np.cos(x.astype(np.float64)) / 7, rtol=1e-6)
    lone = [u.primitive.name for u in fusion_units(closed.jaxpr, _Fusing)
            if not hasattr(u, "eqns") and u.outvars[0].aval.shape == ()]
    assert lone == [], lone


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_folded_values_equal_the_unfolded_kernels(backend):
    """Chains of literal arithmetic in every dtype family, integer division by zero, float
    overflow and NaN, as the primitive's kernels compute them at run time (the same function
    with the operands as arguments, so nothing folds)."""
    def consts(*a):
        i7, i0, big, f3, h, b = a
        return (lax.div(i7, i0), lax.rem(i7, i0), lax.neg(lax.div(i7, np.int32(2))),
                lax.mul(big, big), lax.sqrt(lax.neg(f3)), lax.exp(lax.mul(f3, f3)),
                lax.add(h, h), lax.convert_element_type(lax.mul(f3, f3), np.int8),
                lax.bitwise_not(b), lax.integer_pow(f3, -2))
    args = (np.int32(7), np.int32(0), np.float32(3e38), np.float32(3.0),
            np.asarray(1.5, jnp.bfloat16), np.uint8(5))

    def read_by_a_step(*zeros):  # (results that are outputs keep their equations)
        return [lax.add(c, z) for c, z in zip(consts(*args), zeros)]

    def not_folded(*a_and_zeros):
        return [lax.add(c, z) for c, z in zip(consts(*a_and_zeros[:6]), a_and_zeros[6:])]
    zeros = [np.zeros((), np.asarray(c).dtype) for c in consts(*args)]
    jaxpr = plax.make_jaxpr(read_by_a_step)(*zeros).jaxpr
    assert len(_literal_only(jaxpr)) >= 9 and _literal_only(fold_scalar_constants(jaxpr)) == []
    folded = plax.jit(read_by_a_step, backend=backend)(*zeros)
    want = plax.jit(not_folded, backend=backend)(*args, *zeros)
    for g, w in zip(folded, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_outputs_arrays_and_non_elementwise_equations_are_kept():
    # a literal computation that is the jaxpr's output keeps its equation; an array result
    # (a broadcast of a literal) and a reduction are not folded
    closed = plax.make_jaxpr(lambda x: (lax.div(np.float32(1), np.float32(4)),
                                        jnp.full((3,), 2.0) * x))(np.ones(3, np.float32))
    assert fold_scalar_constants(closed.jaxpr) is closed.jaxpr
    j = plax.make_jaxpr(lambda x: x * lax.reduce_sum(np.float32(2.0), axes=()))(np.float32(1))
    assert fold_scalar_constants(j.jaxpr) is j.jaxpr

"""The special-function primitives take exactly their number of operands: binding one with
too many or too few raises a TypeError naming it (the abstract eval once took any number)."""
import numpy as np
import pytest

from plax import lax
from plax.lax import special_functions as sf

ARITY = {sf.igamma_p: 2, sf.igammac_p: 2, sf.igamma_grad_a_p: 2,
         sf.regularized_incomplete_beta_p: 3, sf.zeta_p: 2, sf.bessel_i0e_p: 1,
         sf.bessel_i1e_p: 1}


@pytest.mark.parametrize("prim", list(ARITY), ids=lambda p: p.name)
def test_wrong_operand_count_raises(prim):
    x = np.float32(0.5)
    for count in (ARITY[prim] - 1, ARITY[prim] + 1):
        if count < 1:
            continue
        with pytest.raises(TypeError, match=f"{prim.name} takes {ARITY[prim]} operand"):
            prim.bind(*([x] * count))


@pytest.mark.parametrize("prim", list(ARITY), ids=lambda p: p.name)
def test_right_operand_count_is_accepted(prim):
    out = prim.bind(*([np.float32(0.5)] * ARITY[prim]))
    assert np.shape(out) == () and np.asarray(out).dtype == np.float32


def test_public_wrapper_still_works():
    np.testing.assert_allclose(float(lax.bessel_i0e(np.float32(0.0))), 1.0)
